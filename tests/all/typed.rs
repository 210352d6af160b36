//! Typed components: components written only against their own WIT (no warren
//! interface), in Rust, Python and JavaScript, whose exported functions are tools.
//! Every WIT type through the real `warren call` binary, errors that name the JSON
//! path, a WIT `result::err` as a tool error, the sandbox's limits and denials,
//! refusals at load, `[plugins.NAME]`, `plugin inspect`. The round-trip property test
//! of the JSON conversion is a unit test beside it (`plugin/typed/convert/tests.rs`).

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::support::{cache_dir, guests, root, text, World};

/// A project whose warren.toml loads one typed component.
struct Typed {
    world: World,
}

/// Profiles every typed world has: `main` reads `docs/`, the others are tight on one
/// limit each.
const PROFILES: &str = r#"
[profiles.main.capabilities]
fs = [{ host = "docs", guest = "/docs", mode = "ro" }]
[profiles.frugal.capabilities]
fuel = 20_000_000
[profiles.hurried.capabilities]
fuel = 1_000_000_000_000
tool_timeout_ms = 300
[profiles.terse.capabilities]
max_output_kb = 4
[profiles.tiny.capabilities]
memory_mb = 2
"#;

impl Typed {
    /// Loads `plugin` (no built-ins) with `extra` TOML after `[plugins]`.
    fn new(plugin: &Path, extra: &str) -> Typed {
        let world = World::new();
        std::fs::write(
            world.path("warren.toml"),
            format!(
                "[plugins]\nbuiltins = false\nfiles = [{plugin:?}]\ncache_dir = {:?}\n{extra}\n{PROFILES}",
                cache_dir()
            ),
        )
        .unwrap();
        Typed { world }
    }

    /// The Rust fixture, its tools described by its WIT's doc comments.
    fn rust() -> Typed {
        let wit = root().join("tests/fixtures/typed-rust/wit");
        Typed::new(
            &guests().typed_rust,
            &format!("[plugins.typed_rust]\nwit = {wit:?}\n"),
        )
    }

    fn python() -> Typed {
        Typed::new(crate::guests::typed_python(), "")
    }

    fn js() -> Typed {
        Typed::new(crate::guests::typed_js(), "")
    }

    /// `warren call TOOL ARGS --profile PROFILE`: the output, or the error.
    fn call_as(&self, profile: &str, tool: &str, args: Value) -> Result<String, String> {
        let output = crate::support::warren(
            &self.world,
            &["call", tool, &args.to_string(), "--profile", profile],
        );
        if output.status.success() {
            Ok(text(&output.stdout).trim_end().to_string())
        } else {
            assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
            let stderr = text(&output.stderr);
            Err(stderr
                .lines()
                .find_map(|l| l.strip_prefix("error: "))
                .unwrap_or(&stderr)
                .to_string())
        }
    }

    fn call(&self, tool: &str, args: Value) -> Result<String, String> {
        self.call_as("main", tool, args)
    }

    /// The output as JSON.
    fn json(&self, tool: &str, args: Value) -> Value {
        let output = self.call(tool, args).unwrap();
        serde_json::from_str(&output).unwrap_or_else(|e| panic!("{output}: {e}"))
    }
}

#[test]
fn bool() {
    let rust = Typed::rust();
    assert_eq!(
        rust.json("scalars_negate", json!({"value": true})),
        json!(false)
    );
    assert_eq!(
        rust.call("scalars_negate", json!({"value": "yes"})),
        Err(r#"invalid input for scalars_negate: $.value: expected a boolean, got "yes""#.into())
    );
    let js = Typed::js();
    assert_eq!(
        js.json("text_position", json!({"words": ["a", "b"], "word": "b"})),
        json!([true, 1])
    );
}

#[test]
fn integers_of_every_width_with_their_ranges() {
    let rust = Typed::rust();
    let extremes = json!({
        "a": 255, "b": -128, "c": 65535, "d": -32768,
        "e": 4294967295u32, "f": -2147483648i32,
        "g": 18446744073709551615u64, "h": -9223372036854775808i64,
    });
    // 64-bit values beyond 2^53 come back exactly.
    assert_eq!(
        rust.call("scalars_integers", extremes.clone()).unwrap(),
        "[255,-128,65535,-32768,4294967295,-2147483648,18446744073709551615,-9223372036854775808]"
    );
    let lows = json!({"a": 0, "b": 127, "c": 0, "d": 32767, "e": 0, "f": 2147483647, "g": 0, "h": 9223372036854775807i64});
    assert_eq!(
        rust.json("scalars_integers", lows),
        json!([0, 127, 0, 32767, 0, 2147483647, 0, 9223372036854775807i64])
    );
    // An integral float is an integer.
    assert_eq!(rust.json("add", json!({"a": 2.0, "b": 40})), json!(42));
    for (field, bad, message) in [
        ("a", json!(256), "expected u8 0..255, got 256"),
        ("b", json!(-129), "expected s8 -128..127, got -129"),
        ("c", json!(-1), "expected u16 0..65535, got -1"),
        ("d", json!(32768), "expected s16 -32768..32767, got 32768"),
        (
            "e",
            json!(4294967296u64),
            "expected u32 0..4294967295, got 4294967296",
        ),
        (
            "f",
            json!(1.5),
            "expected s32 -2147483648..2147483647, got 1.5",
        ),
        (
            "g",
            json!(-1),
            "expected u64 0..18446744073709551615, got -1",
        ),
        (
            "h",
            json!("7"),
            "expected s64 -9223372036854775808..9223372036854775807, got \"7\"",
        ),
    ] {
        let mut args = extremes.clone();
        args[field] = bad;
        assert_eq!(
            rust.call("scalars_integers", args),
            Err(format!(
                "invalid input for scalars_integers: $.{field}: {message}"
            ))
        );
    }
    let python = Typed::python();
    assert_eq!(
        python.call("inventory_swap", json!({"pair": ["x", 256]})),
        Err("invalid input for inventory_swap: $.pair[1]: expected u8 0..255, got 256".into())
    );
    let js = Typed::js();
    assert_eq!(
        js.json(
            "text_ratio",
            json!({"a": 18446744073709551615u64, "b": -32768})
        ),
        // -2^49 as an f32, written as the shortest decimal that reads as that f32.
        json!(-562949950000000.0)
    );
}

#[test]
fn floats_and_their_non_finite_values() {
    let rust = Typed::rust();
    // f32 comes back as the shortest decimal that reads as the same f32.
    assert_eq!(
        rust.json("scalars_halve", json!({"x": 0.2, "y": 1e300})),
        json!([0.1, 5e299])
    );
    assert_eq!(
        rust.json("scalars_divide", json!({"a": 1, "b": 0})),
        json!("inf")
    );
    assert_eq!(
        rust.json("scalars_divide", json!({"a": -1, "b": 0})),
        json!("-inf")
    );
    assert_eq!(
        rust.json("scalars_divide", json!({"a": 0, "b": 0})),
        json!("NaN")
    );
    assert_eq!(
        rust.json("scalars_divide", json!({"a": "inf", "b": 2})),
        json!("inf")
    );
    assert_eq!(
        rust.json("scalars_divide", json!({"a": 0.1, "b": 3})),
        json!(0.1 / 3.0)
    );
    assert_eq!(
        rust.call("scalars_halve", json!({"x": 1e39, "y": 1})),
        Err(
            "invalid input for scalars_halve: $.x: expected a number in the range of f32, got 1e+39"
                .into()
        )
    );
    assert_eq!(
        rust.call("scalars_halve", json!({"x": "lots", "y": 1})),
        Err(r#"invalid input for scalars_halve: $.x: expected a number (f32), got "lots""#.into())
    );
    let python = Typed::python();
    assert_eq!(
        python.json(
            "inventory_convert",
            json!({"weight": 1500, "from": "grams", "to": "kilograms"})
        ),
        json!(1.5)
    );
    let js = Typed::js();
    assert_eq!(js.json("text_ratio", json!({"a": 1, "b": 4})), json!(0.25));
}

#[test]
fn char_is_a_one_character_string() {
    let rust = Typed::rust();
    assert_eq!(
        rust.json("scalars_next_char", json!({"c": "a"})),
        json!("b")
    );
    assert_eq!(
        rust.json("scalars_next_char", json!({"c": "ß"})),
        json!("à")
    );
    for bad in [json!("ab"), json!(""), json!(97)] {
        let error = rust
            .call("scalars_next_char", json!({"c": bad}))
            .unwrap_err();
        assert!(
            error.contains("$.c: expected a one-character string"),
            "{error}"
        );
    }
    let js = Typed::js();
    assert_eq!(
        js.json("text_tokenize", json!({"text": "Hi!"})),
        json!([{"word": "Hi"}, {"punct": "!"}])
    );
}

#[test]
fn strings_are_returned_as_their_text() {
    let rust = Typed::rust();
    assert_eq!(
        rust.call("scalars_shout", json!({"text": "héllo\nwörld"}))
            .unwrap(),
        "HÉLLO\nWÖRLD"
    );
    let python = Typed::python();
    assert_eq!(
        python.call("greet", json!({"name": "Ada"})).unwrap(),
        "Hello, Ada!"
    );
    let js = Typed::js();
    assert_eq!(
        js.call(
            "text_restyle",
            json!({"text": "hello wide world", "style": "title"})
        )
        .unwrap(),
        "Hello Wide World"
    );
    assert_eq!(
        js.call("text_restyle", json!({"text": 5, "style": "upper"})),
        Err("invalid input for text_restyle: $.text: expected a string, got 5".into())
    );
}

#[test]
fn lists() {
    let rust = Typed::rust();
    let items = json!([
        {"name": "a", "weight": 3, "tags": []},
        {"name": "b", "weight": 4, "tags": ["x", "y"]},
    ]);
    assert_eq!(
        rust.json("shapes_total_weight", json!({"items": items})),
        json!(7)
    );
    assert_eq!(
        rust.json("shapes_total_weight", json!({"items": []})),
        json!(0)
    );
    assert_eq!(
        rust.call("shapes_total_weight", json!({"items": {"name": "a"}})),
        Err(
            "invalid input for shapes_total_weight: $.items: expected an array, got an object"
                .into()
        )
    );
    let python = Typed::python();
    assert_eq!(
        python.json(
            "inventory_label_names",
            json!({"labels": ["gift", "fragile"]})
        ),
        json!(["FRAGILE", "GIFT"])
    );
    let js = Typed::js();
    assert_eq!(
        js.json("text_tokenize", json!({"text": "pi 2.5"})),
        json!([{"word": "pi"}, {"number": 2.5}])
    );
}

#[test]
fn list_of_u8_is_base64() {
    let rust = Typed::rust();
    assert_eq!(
        rust.json("shapes_bytes", json!({"data": "AQID"})),
        json!([6, "AwIB"])
    );
    assert_eq!(
        rust.json("shapes_bytes", json!({"data": ""})),
        json!([0, ""])
    );
    // An array of bytes is accepted too; the output is always base64.
    assert_eq!(
        rust.json("shapes_bytes", json!({"data": [1, 2, 3]})),
        json!([6, "AwIB"])
    );
    let error = rust
        .call("shapes_bytes", json!({"data": "not base64!"}))
        .unwrap_err();
    assert!(
        error.starts_with("invalid input for shapes_bytes: $.data: expected base64 bytes"),
        "{error}"
    );
    assert_eq!(
        rust.call("shapes_bytes", json!({"data": [1, 256]})),
        Err("invalid input for shapes_bytes: $.data[1]: expected u8 0..255, got 256".into())
    );
    let python = Typed::python();
    assert_eq!(
        python
            .call("inventory_hex", json!({"data": "3q2+7w=="}))
            .unwrap(),
        "deadbeef"
    );
    let js = Typed::js();
    assert_eq!(js.json("text_encode", json!({"text": "hé"})), json!("aMOp"));
}

#[test]
fn options_are_null_or_the_value() {
    let rust = Typed::rust();
    assert_eq!(
        rust.json("shapes_first_word", json!({"text": "  two words"})),
        json!("two")
    );
    assert_eq!(
        rust.json("shapes_first_word", json!({"text": "   "})),
        json!(null)
    );
    // An option inside an option: null, {"some": null}, {"some": value}.
    for value in [json!(null), json!({"some": null}), json!({"some": 7})] {
        assert_eq!(rust.json("shapes_maybe", json!({"value": value})), value);
    }
    // An absent option argument is none.
    assert_eq!(rust.json("shapes_maybe", json!({})), json!(null));
    assert_eq!(
        rust.call("shapes_maybe", json!({"value": 7})),
        Err(r#"invalid input for shapes_maybe: $.value: expected null or {"some": …} (an option inside an option), got 7"#.into())
    );
    let python = Typed::python();
    let items = json!([{"name": "a", "weight": 1, "origin": "Oslo"}, {"name": "b", "weight": 2}]);
    assert_eq!(
        python.json("inventory_find", json!({"items": items, "name": "b"})),
        json!({"name": "b", "weight": 2, "origin": null})
    );
    assert_eq!(
        python.json("inventory_find", json!({"items": items, "name": "c"})),
        json!(null)
    );
    let js = Typed::js();
    assert_eq!(
        js.json("text_analyze", json!({"text": ""})),
        json!({"words": 0, "chars": 0, "longest": null})
    );
}

#[test]
fn results_in_arguments_and_as_tool_errors() {
    let rust = Typed::rust();
    // A top-level result: ok is the output, err a tool error the model sees.
    assert_eq!(
        rust.json("shapes_parse", json!({"text": " -12 "})),
        json!(-12)
    );
    assert_eq!(
        rust.call("shapes_parse", json!({"text": "12x"})),
        Err("shapes_parse failed: `12x` is not an integer: invalid digit found in string".into())
    );
    // A result argument is {"ok": …} or {"err": …}.
    assert_eq!(
        rust.json("shapes_check", json!({"outcome": {"ok": 21}})),
        json!(42)
    );
    assert_eq!(
        rust.call("shapes_check", json!({"outcome": {"err": "bad"}})),
        Err("shapes_check failed: BAD".into())
    );
    assert_eq!(
        rust.call("shapes_check", json!({"outcome": {"maybe": 1}})),
        Err(r#"invalid input for shapes_check: $.outcome: expected {"ok": …} or {"err": …}, got an object"#.into())
    );
    assert_eq!(rust.json("shapes_bare", json!({"ok": true})), json!(null));
    assert_eq!(
        rust.call("shapes_bare", json!({"ok": false})),
        Err("shapes_bare failed: the function returned an error (its WIT error type carries no detail)".into())
    );
    let python = Typed::python();
    assert_eq!(
        python.call("inventory_hex", json!({"data": ""})),
        Err("inventory_hex failed: no bytes to show".into())
    );
    let js = Typed::js();
    assert_eq!(
        js.call("text_ratio", json!({"a": 1, "b": 0})),
        Err("text_ratio failed: division by zero".into())
    );
}

#[test]
fn tuples_are_fixed_arrays() {
    let python = Typed::python();
    assert_eq!(
        python.json("inventory_swap", json!({"pair": ["x", 7]})),
        json!([7, "x"])
    );
    assert_eq!(
        python.call("inventory_swap", json!({"pair": ["x"]})),
        Err(r#"invalid input for inventory_swap: $.pair: expected an array of 2 (a tuple), got an array"#.into())
    );
    let rust = Typed::rust();
    assert_eq!(
        rust.json(
            "shapes_scale",
            json!({"shape": {"rectangle": [2, 3.5]}, "factor": 2})
        ),
        json!({"rectangle": [4.0, 7.0]})
    );
    let js = Typed::js();
    assert_eq!(
        js.json("text_position", json!({"words": ["a"], "word": "z"})),
        json!([false, null])
    );
}

#[test]
fn records_have_every_field_and_no_other() {
    let python = Typed::python();
    let added = json!({"name": "b", "weight": 2, "origin": null});
    assert_eq!(
        python.json(
            "inventory_apply",
            json!({"items": [{"name": "a", "weight": 1, "origin": "Oslo"}], "events": [{"added": added}]})
        ),
        json!([{"name": "a", "weight": 1, "origin": "Oslo"}, added])
    );
    assert_eq!(
        python.call(
            "inventory_apply",
            json!({"items": [{"name": "a"}], "events": []})
        ),
        Err(
            "invalid input for inventory_apply: $.items[0]: missing required field `weight`".into()
        )
    );
    assert_eq!(
        python.call(
            "inventory_apply",
            json!({"items": [{"name": "a", "weight": 1, "colour": "red", "size": 3}], "events": []})
        ),
        Err("invalid input for inventory_apply: $.items[0]: unknown fields `colour`, `size` (expected: name, weight, origin)".into())
    );
    let js = Typed::js();
    assert_eq!(
        js.json("text_analyze", json!({"text": "the quick brownest fox"})),
        json!({"words": 4, "chars": 22, "longest": "brownest"})
    );
}

#[test]
fn variants_are_objects_keyed_by_case() {
    let rust = Typed::rust();
    assert_eq!(
        rust.json("shapes_area", json!({"shape": {"rectangle": [2, 3]}})),
        json!(6.0)
    );
    assert_eq!(
        rust.json("shapes_area", json!({"shape": {"point": null}})),
        json!(0.0)
    );
    // A case without a payload may be written as its name alone.
    assert_eq!(
        rust.json("shapes_scale", json!({"shape": "point", "factor": 3})),
        json!({"point": null})
    );
    assert_eq!(
        rust.call("shapes_area", json!({"shape": {"square": 2}})),
        Err(r#"invalid input for shapes_area: $.shape: expected one of `circle`, `rectangle`, `point` as {"case": payload}, got an object"#.into())
    );
    assert_eq!(
        rust.call("shapes_area", json!({"shape": {"circle": "big"}})),
        Err(
            r#"invalid input for shapes_area: $.shape.circle: expected a number (f64), got "big""#
                .into()
        )
    );
    assert_eq!(
        rust.call("shapes_area", json!({"shape": "circle"})),
        Err(r#"invalid input for shapes_area: $.shape: variant case `circle` needs a payload: {"circle": …}"#.into())
    );
    let python = Typed::python();
    assert_eq!(
        python.json(
            "inventory_apply",
            json!({"items": [{"name": "a", "weight": 1, "origin": null}], "events": [{"removed": "a"}, "cleared"]})
        ),
        json!([])
    );
    let js = Typed::js();
    assert_eq!(
        js.json("text_tokenize", json!({"text": "7 up"})),
        json!([{"number": 7.0}, {"word": "up"}])
    );
}

#[test]
fn enums_are_case_names() {
    let rust = Typed::rust();
    assert_eq!(
        rust.json("shapes_next_color", json!({"color": "blue"})),
        json!("red")
    );
    assert_eq!(
        rust.call("shapes_next_color", json!({"color": "purple"})),
        Err(r#"invalid input for shapes_next_color: $.color: expected one of `red`, `green`, `blue`, got "purple""#.into())
    );
    let python = Typed::python();
    assert_eq!(
        python.json(
            "inventory_convert",
            json!({"weight": 2, "from": "kilograms", "to": "grams"})
        ),
        json!(2000.0)
    );
    let js = Typed::js();
    assert_eq!(
        js.call("text_restyle", json!({"text": "Mixed", "style": "lower"}))
            .unwrap(),
        "mixed"
    );
}

#[test]
fn flags_are_arrays_of_names() {
    let rust = Typed::rust();
    assert_eq!(
        rust.json("shapes_invert", json!({"perms": ["read"]})),
        json!(["write", "execute"])
    );
    assert_eq!(
        rust.json("shapes_invert", json!({"perms": []})),
        json!(["read", "write", "execute"])
    );
    assert_eq!(
        rust.json(
            "shapes_invert",
            json!({"perms": ["read", "write", "execute", "read"]})
        ),
        json!([])
    );
    assert_eq!(
        rust.call("shapes_invert", json!({"perms": ["read", "fly"]})),
        Err(r#"invalid input for shapes_invert: $.perms[1]: expected one of `read`, `write`, `execute`, got "fly""#.into())
    );
    let python = Typed::python();
    assert_eq!(
        python.json("inventory_label_names", json!({"labels": []})),
        json!([])
    );
    let js = Typed::js();
    assert_eq!(
        js.call(
            "text_clean",
            json!({"text": "  a   b  ", "opts": ["collapse", "trim"]})
        )
        .unwrap(),
        "a b"
    );
}

#[test]
fn nested_types_round_trip_through_the_guest() {
    let rust = Typed::rust();
    let order = json!({
        "items": [
            {"name": "crate", "weight": 200, "tags": ["heavy", "wood"]},
            {"name": "box", "weight": 3, "tags": []},
        ],
        "color": "green",
        "note": {"some": null},
        "permissions": ["read", "execute"],
        "shapes": [{"circle": 1.5}, {"rectangle": [1.0, 2.0]}, {"point": null}],
    });
    assert_eq!(
        rust.json("shapes_echo_order", json!({"order": order})),
        order
    );
    let mut sparse = order.clone();
    sparse["note"] = json!({"some": "fragile"});
    sparse["color"] = json!(null);
    assert_eq!(
        rust.json("shapes_echo_order", json!({"order": sparse})),
        sparse
    );
}

#[test]
fn bad_arguments_name_the_json_path() {
    let rust = Typed::rust();
    let items = json!([
        {"name": "a", "weight": 1, "tags": []},
        {"name": "b", "weight": 2, "tags": []},
        {"name": "c", "weight": 300, "tags": []},
    ]);
    assert_eq!(
        rust.call("shapes_total_weight", json!({"items": items})),
        Err(
            "invalid input for shapes_total_weight: $.items[2].weight: expected u8 0..255, got 300"
                .into()
        )
    );
    let deep = json!({"order": {
        "items": [{"name": "x", "weight": 1, "tags": ["ok", 5]}],
        "color": null, "note": null, "permissions": [], "shapes": [],
    }});
    assert_eq!(
        rust.call("shapes_echo_order", deep),
        Err("invalid input for shapes_echo_order: $.order.items[0].tags[1]: expected a string, got 5".into())
    );
    assert_eq!(
        rust.call("add", json!({"a": 1})),
        Err("invalid input for add: $: missing required argument `b`".into())
    );
    assert_eq!(
        rust.call("add", json!({"a": 1, "b": 2, "c": 3})),
        Err("invalid input for add: $: unknown argument `c` (expected: a, b)".into())
    );
    assert_eq!(
        rust.call("add", json!([1, 2])),
        Err("invalid input for add: arguments must be a JSON object".into())
    );
}

#[test]
fn top_level_and_interface_functions_are_tools() {
    let rust = Typed::rust();
    let output = crate::support::warren(&rust.world, &["tools", "--json"]);
    let tools: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for expected in [
        "add",
        "scalars_negate",
        "scalars_next_char",
        "shapes_echo_order",
        "effects_spin",
    ] {
        assert!(names.contains(&expected), "{names:?}");
    }
    let add = tools.iter().find(|t| t["name"] == "add").unwrap();
    assert_eq!(
        (&add["plugin"], &add["typed"]),
        (&json!("typed_rust"), &json!(true))
    );
    // Descriptions come from the WIT doc comments ([plugins.typed_rust] wit).
    assert_eq!(
        add["description"],
        "Adds two numbers (a function at the top level of the world)."
    );
    assert_eq!(
        add["input_schema"],
        json!({
            "type": "object",
            "properties": {
                "a": {"type": "integer", "minimum": -2147483648i64, "maximum": 2147483647},
                "b": {"type": "integer", "minimum": -2147483648i64, "maximum": 2147483647},
            },
            "required": ["a", "b"],
            "additionalProperties": false,
        })
    );
    let total = tools
        .iter()
        .find(|t| t["name"] == "shapes_total_weight")
        .unwrap();
    assert_eq!(
        total["input_schema"]["properties"]["items"]["items"]["description"],
        "A thing that weighs something."
    );
    assert_eq!(rust.json("add", json!({"a": 2, "b": 40})), json!(42));
    let js = Typed::js();
    assert_eq!(js.call("version", json!({})).unwrap(), "typed-js 0.1.0");
}

#[test]
fn fuel_and_wall_time_stop_a_typed_tool_that_loops() {
    let rust = Typed::rust();
    assert_eq!(
        rust.call_as("frugal", "effects_spin", json!({})),
        Err("effects_spin ran out of fuel after 20000000 instructions (raise capabilities.fuel = 20000000 in profile `frugal`)".into())
    );
    let started = std::time::Instant::now();
    assert_eq!(
        rust.call_as("hurried", "effects_spin", json!({})),
        Err("effects_spin timed out after 300 ms (raise capabilities.tool_timeout_ms = 300 in profile `hurried`)".into())
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn files_and_network_follow_the_profile() {
    let rust = Typed::rust();
    assert_eq!(
        rust.call("effects_read_file", json!({"path": "/docs/notes.md"}))
            .unwrap(),
        "alpha\nthe quick brown fox\nomega"
    );
    let secret = rust.world.path("secret.txt");
    for path in [
        secret.to_str().unwrap(),
        "/docs/../secret.txt",
        "/secret.txt",
    ] {
        let error = rust
            .call("effects_read_file", json!({"path": path}))
            .unwrap_err();
        assert!(error.starts_with("effects_read_file failed: "), "{error}");
        assert!(!error.contains("TOP SECRET"), "{error}");
    }
    // No `net`: the network imports are not linked, and the denial names the grant.
    let error = rust
        .call("effects_connect", json!({"address": "127.0.0.1:9"}))
        .unwrap_err();
    assert!(
        error.starts_with("effects_connect was denied network access (wasi:sockets/")
            && error.ends_with("(capability capabilities.net of profile `main`)"),
        "{error}"
    );
    // A `net` that lists another address: the connect is refused by the host's policy,
    // and the component's error result is reported as that denial.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let config = rust.world.path("warren.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "[profiles.netted.capabilities]\nnet = [\"127.0.0.1:{}\"]\n",
        port.wrapping_add(1)
    ));
    std::fs::write(&config, text).unwrap();
    let address = format!("127.0.0.1:{port}");
    let error = rust
        .call_as("netted", "effects_connect", json!({"address": address}))
        .unwrap_err();
    assert!(
        error.starts_with("effects_connect was denied") && error.contains(&address),
        "{error}"
    );
    assert!(
        listener.accept().is_err(),
        "no connection reached the listener"
    );
}

#[test]
fn output_and_memory_limits_hold_for_typed_results() {
    let rust = Typed::rust();
    assert_eq!(
        rust.json("effects_zeros", json!({"count": 3})),
        json!("AAAA")
    );
    // 3000 bytes are 4002 bytes of JSON, within the cap of 4 KiB; 3100 are 4138.
    assert_eq!(
        rust.call_as("terse", "effects_zeros", json!({"count": 3000}))
            .unwrap()
            .len(),
        4002
    );
    assert_eq!(
        rust.call_as("terse", "effects_zeros", json!({"count": 3100})),
        Err("effects_zeros produced a result larger than 4 KiB (4138 bytes) (raise capabilities.max_output_kb = 4 in profile `terse`)".into())
    );
    // Far past the cap, the result is refused while it is lifted out of the guest
    // (the store's hostcall fuel), before the host holds it.
    assert_eq!(
        rust.call_as("terse", "effects_zeros", json!({"count": 50_000_000})),
        Err("effects_zeros produced a result larger than 4 KiB (raise capabilities.max_output_kb = 4 in profile `terse`)".into())
    );
    let error = rust
        .call_as("tiny", "effects_zeros", json!({"count": 8_000_000}))
        .unwrap_err();
    assert_eq!(
        error,
        "effects_zeros hit the memory limit of 2 MiB (raise capabilities.memory_mb = 2 in profile `tiny`)"
    );
}

#[test]
fn a_component_exporting_a_resource_is_refused() {
    let typed = Typed::new(&guests().typed_resource, "");
    let output = crate::support::warren(&typed.world, &["tools"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("typed_resource.wasm: cannot offer this typed component's functions as tools: exports resource `counter` (in fixture:typed-resource/counters@0.1.0): a typed component cannot use resources"),
        "{stderr}"
    );
}

#[test]
fn a_component_importing_what_warren_lacks_is_refused_naming_every_import() {
    let typed = Typed::new(&guests().typed_import, "");
    let output = crate::support::warren(&typed.world, &["call", "lookup", r#"{"key":"a"}"#]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("imports `fixture:typed-import/store@0.1.0`, `fixture:typed-import/ticker@0.1.0` that warren does not provide"),
        "{stderr}"
    );
    let output = crate::support::warren(
        &typed.world,
        &["plugin", "inspect", guests().typed_import.to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("`fixture:typed-import/ticker@0.1.0`"));
}

#[test]
fn types_too_deep_or_too_large_written_out_are_refused_at_load() {
    let bomb = &guests().typed_bomb;
    let typed = Typed::new(bomb, "");
    let output = crate::support::warren(&typed.world, &["tools"]);
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("function `deep.nested`: $.x")
            && stderr.contains(".some: types nest more than 32 levels deep"),
        "{stderr}"
    );
    // A record of two copies of a record … 13 levels: 8,192 leaves. The walk stops at
    // the budget instead of writing them all out.
    let typed = Typed::new(bomb, "[plugins.typed_bomb]\nhide = [\"deep_nested\"]\n");
    let started = std::time::Instant::now();
    let output = crate::support::warren(&typed.world, &["tools"]);
    assert!(
        text(&output.stderr).contains("function `wide.fan`: its input schema would take more than 64 KiB written out ([plugins] max_schema_kb)"),
        "{}",
        text(&output.stderr)
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    let typed = Typed::new(
        bomb,
        "max_schema_kb = 4096\n[plugins.typed_bomb]\nhide = [\"deep_nested\"]\n",
    );
    assert_eq!(typed.json("wide_fan", json!({"x": tree(12)})), json!(true));
}

/// A value of the bomb's `r0`: records of two records, `levels` deep, true at the
/// bottom.
fn tree(levels: usize) -> Value {
    if levels == 0 {
        return json!({"a": true, "b": false});
    }
    let below = tree(levels - 1);
    json!({"a": below.clone(), "b": below})
}

#[test]
fn plugins_table_renames_describes_and_hides_tools() {
    let table = "[plugins.typed_rust]\nrename = { add = \"sum\" }\ndescribe = { scalars_shout = \"Make text loud.\" }\nhide = [\"effects_spin\", \"effects_connect\"]\n";
    let typed = Typed::new(&guests().typed_rust, table);
    let output = crate::support::warren(&typed.world, &["tools", "--json"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let tools: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    let find = |name: &str| tools.iter().find(|t| t["name"] == name);
    assert!(
        find("add").is_none()
            && find("effects_spin").is_none()
            && find("effects_connect").is_none()
    );
    assert_eq!(
        find("scalars_shout").unwrap()["description"],
        "Make text loud."
    );
    // Without WIT docs, the description is the signature.
    assert_eq!(
        find("sum").unwrap()["description"],
        "add(a: s32, b: s32) -> s32"
    );
    assert_eq!(typed.json("sum", json!({"a": 1, "b": 2})), json!(3));
    let error = typed.call("add", json!({"a": 1, "b": 2})).unwrap_err();
    assert!(error.starts_with("no tool `add` is available"), "{error}");

    for (table, message) in [
        (
            "[plugins.typed_rust]\nhide = [\"nope\"]\n",
            "hide names `nope`, which this component does not export",
        ),
        (
            "[plugins.typed_rust]\nrename = { nope = \"x\" }\n",
            "names tool `nope`, which this plugin does not offer",
        ),
        (
            "[plugins.elsewhere]\nhide = []\n",
            "[plugins.elsewhere]: no plugin `elsewhere` is loaded",
        ),
        (
            "[plugins.typed_rust]\nhidden = []\n",
            "unknown field `hidden`",
        ),
    ] {
        let typed = Typed::new(&guests().typed_rust, table);
        let output = crate::support::warren(&typed.world, &["tools"]);
        assert!(!output.status.success());
        assert!(
            text(&output.stderr).contains(message),
            "{table}: {}",
            text(&output.stderr)
        );
    }
}

#[test]
fn plugin_inspect_shows_typed_tools_and_schemas() {
    let world = World::new();
    let file = guests().typed_rust.to_str().unwrap().to_string();
    let output = crate::support::warren(&world, &["plugin", "inspect", &file]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("kind: typed component"), "{stdout}");
    assert!(
        stdout.contains("  shapes_area (shapes.area): shapes.area(shape: variant { circle, rectangle, point }) -> f64\n    arguments: {"),
        "{stdout}"
    );
    let wit = root().join("tests/fixtures/typed-rust/wit");
    let output = crate::support::warren(
        &world,
        &["plugin", "inspect", &file, "--wit", wit.to_str().unwrap()],
    );
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("  shapes_area (shapes.area): The area of `shape`."),
        "{stdout}"
    );
}

/// A typed tool in an agent run: the scripted model calls it, and sees its output.
#[tokio::test]
async fn a_typed_tool_in_an_agent_run() {
    let rust = Typed::rust();
    let config = rust.world.path("warren.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[models.scripted]\nprovider = \"scripted\"\nscript = \"script.toml\"\n");
    std::fs::write(&config, text).unwrap();
    std::fs::write(
        rust.world.path("script.toml"),
        "[[turns]]\ntool_calls = [{ name = \"shapes_total_weight\", arguments = { items = [{ name = \"a\", weight = 40, tags = [] }, { name = \"b\", weight = 2, tags = [] }] } }]\n\n\
         [[turns]]\nwhen = \"42\"\ntext = \"It weighs 42.\"\n",
    )
    .unwrap();
    let host = warren::Host::load(warren::Config::load(&config).unwrap())
        .await
        .unwrap();
    let report = host.start("main", "Weigh it.", None).unwrap().wait().await;
    assert_eq!(report.root.text, "It weighs 42.", "{:?}", report.root);
}

/// `warren plugin new --typed`: a Rust typed component that builds and passes its own
/// test through warren; two of them load side by side, their tools named after each.
#[test]
fn scaffolded_typed_component_builds_and_passes_its_own_test() {
    guests();
    let dir = tempfile::tempdir().unwrap();
    let warren = env!("CARGO_BIN_EXE_warren");
    for name in ["hello-typed", "other-typed"] {
        let output = Command::new(warren)
            .args(["plugin", "new", name, "--typed", "--dir"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", text(&output.stderr));
        let tool = format!("{}_greet", name.replace('-', "_"));
        assert!(
            text(&output.stdout).contains(&format!("calls its `{tool}` tool")),
            "{}",
            text(&output.stdout)
        );
        let root_dir = dir.path().join(name);
        assert!(root_dir.join("wit/world.wit").is_file());
        assert!(!root_dir.join("wit/plugin.wit").exists());
        let output = Command::new(root_dir.join("test.sh"))
            .env("WARREN", warren)
            .env("CARGO_TARGET_DIR", root().join("target/wasm"))
            .env("XDG_CACHE_HOME", cache_dir())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "typed scaffold test failed:\n{}{}",
            text(&output.stdout),
            text(&output.stderr)
        );
        assert!(text(&output.stdout).contains(&format!("ok: {name} works under warren")));
    }
    let config = dir.path().join("warren.toml");
    std::fs::write(
        &config,
        format!(
            "[plugins]\nfiles = [\"hello-typed/hello-typed.wasm\", \"other-typed/other-typed.wasm\"]\nbuiltins = false\ncache_dir = {:?}\n",
            cache_dir()
        ),
    )
    .unwrap();
    let output = Command::new(warren)
        .args(["--config", config.to_str().unwrap(), "tools", "--json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let tools: Value = serde_json::from_slice(&output.stdout).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "hello_typed_greet",
            "hello_typed_greet_person",
            "other_typed_greet",
            "other_typed_greet_person"
        ]
    );
}
