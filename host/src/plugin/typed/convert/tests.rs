//! The JSON conversion's round trip, as a property: random values of every parameter
//! and result type the typed Rust fixture (`tests/fixtures`, built for wasm32-wasip2
//! by the integration tests' guest builder) exports, every WIT type nested, go to JSON
//! text and back unchanged.

#[allow(dead_code)] // the guest builder of the integration tests; one fixture used here
#[path = "../../../../../tests/all/guests.rs"]
mod guests;

use std::path::Path;

use serde_json::Value;
use wasmtime::component::types::{ComponentItem, Type};
use wasmtime::component::{Component, Val};

use super::from_json::from_json;
use super::to_json::to_json;

/// Random values of every parameter and result type the Rust fixture exports (every
/// WIT type, nested) → JSON text → values: the same value back, every time.
#[test]
fn json_round_trip_of_random_values_of_every_type() {
    let types = fixture_types(&guests::guests().typed_rust);
    assert!(types.len() > 30, "{}", types.len());
    let mut rng = Rng(0x5eed_1234_abcd_0042);
    let mut checked = 0;
    for round in 0..200 {
        for ty in &types {
            let value = random_val(ty, &mut rng, 0);
            let json = to_json(ty, &value).unwrap_or_else(|e| panic!("to_json {ty:?}: {e}"));
            let text = json.to_string();
            let reread: Value = serde_json::from_str(&text).unwrap();
            let back = from_json(ty, &reread)
                .unwrap_or_else(|e| panic!("round {round}: {text} as {ty:?}: {e}"));
            assert!(
                same(&value, &back),
                "round {round}: {value:?}\n -> {text}\n -> {back:?}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 6000);
}

/// Every parameter and result type of every function the component exports.
fn fixture_types(file: &Path) -> Vec<Type> {
    let mut config = wasmtime::Config::new();
    config.wasm_component_model(true);
    let engine = wasmtime::Engine::new(&config).unwrap();
    let component = Component::from_file(&engine, file).unwrap();
    let mut funcs = Vec::new();
    for (_, item) in component.component_type().exports(&engine) {
        match item.ty {
            ComponentItem::ComponentFunc(f) => funcs.push(f),
            ComponentItem::ComponentInstance(i) => {
                for (_, item) in i.exports(&engine) {
                    if let ComponentItem::ComponentFunc(f) = item.ty {
                        funcs.push(f);
                    }
                }
            }
            _ => {}
        }
    }
    let mut types = Vec::new();
    for f in funcs {
        types.extend(f.params().map(|(_, t)| t));
        types.extend(f.results());
    }
    types
}

/// xorshift64*: a seeded generator, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Mostly the edges of a range, sometimes anything.
    fn bits(&mut self) -> u64 {
        match self.below(4) {
            0 => 0,
            1 => u64::MAX,
            2 => self.below(300),
            _ => self.next(),
        }
    }

    fn float(&mut self) -> f64 {
        match self.below(8) {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => f64::NEG_INFINITY,
            3 => -0.0,
            4 => f64::MIN_POSITIVE,
            5 => (self.below(2000) as f64 - 1000.0) / 8.0,
            _ => f64::from_bits(self.next()),
        }
    }

    fn string(&mut self) -> String {
        let pool = ['a', 'Z', ' ', '"', '\\', '\n', 'é', '€', '😀', '\u{0}', '{'];
        (0..self.below(8))
            .map(|_| pool[self.below(pool.len() as u64) as usize])
            .collect()
    }
}

fn random_val(ty: &Type, rng: &mut Rng, depth: usize) -> Val {
    let len = |rng: &mut Rng| if depth > 3 { 0 } else { rng.below(4) as usize };
    match ty {
        Type::Bool => Val::Bool(rng.below(2) == 0),
        Type::U8 => Val::U8(rng.bits() as u8),
        Type::U16 => Val::U16(rng.bits() as u16),
        Type::U32 => Val::U32(rng.bits() as u32),
        Type::U64 => Val::U64(rng.bits()),
        Type::S8 => Val::S8(rng.bits() as i8),
        Type::S16 => Val::S16(rng.bits() as i16),
        Type::S32 => Val::S32(rng.bits() as i32),
        Type::S64 => Val::S64(rng.bits() as i64),
        Type::Float32 => Val::Float32(rng.float() as f32),
        Type::Float64 => Val::Float64(rng.float()),
        Type::Char => Val::Char(rng.string().chars().next().unwrap_or('x')),
        Type::String => Val::String(rng.string()),
        Type::List(list) => {
            let n = len(rng);
            Val::List(
                (0..n)
                    .map(|_| random_val(&list.ty(), rng, depth + 1))
                    .collect(),
            )
        }
        Type::Record(record) => Val::Record(
            record
                .fields()
                .map(|f| (f.name.to_string(), random_val(&f.ty, rng, depth + 1)))
                .collect(),
        ),
        Type::Tuple(tuple) => Val::Tuple(
            tuple
                .types()
                .map(|t| random_val(&t, rng, depth + 1))
                .collect(),
        ),
        Type::Variant(variant) => {
            let cases: Vec<_> = variant.cases().collect();
            let case = &cases[rng.below(cases.len() as u64) as usize];
            let payload = case
                .ty
                .as_ref()
                .map(|t| Box::new(random_val(t, rng, depth + 1)));
            Val::Variant(case.name.to_string(), payload)
        }
        Type::Enum(names) => {
            let names: Vec<&str> = names.names().collect();
            Val::Enum(names[rng.below(names.len() as u64) as usize].to_string())
        }
        Type::Flags(flags) => Val::Flags(
            flags
                .names()
                .filter(|_| rng.below(2) == 0)
                .map(str::to_string)
                .collect(),
        ),
        Type::Option(option) => Val::Option(if rng.below(3) == 0 {
            None
        } else {
            Some(Box::new(random_val(&option.ty(), rng, depth + 1)))
        }),
        Type::Result(result) => {
            let ok = rng.below(2) == 0;
            let ty = if ok { result.ok() } else { result.err() };
            let payload = ty.map(|t| Box::new(random_val(&t, rng, depth + 1)));
            Val::Result(if ok { Ok(payload) } else { Err(payload) })
        }
        other => panic!("the fixture has no {other:?}"),
    }
}

/// Equality, with NaN equal to NaN (and of the same width).
fn same(a: &Val, b: &Val) -> bool {
    let boxed = |a: &Option<Box<Val>>, b: &Option<Box<Val>>| match (a, b) {
        (Some(a), Some(b)) => same(a, b),
        (None, None) => true,
        _ => false,
    };
    let all = |a: &[Val], b: &[Val]| a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(a, b));
    match (a, b) {
        (Val::Float32(x), Val::Float32(y)) => {
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
        }
        (Val::Float64(x), Val::Float64(y)) => {
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
        }
        (Val::List(a), Val::List(b)) | (Val::Tuple(a), Val::Tuple(b)) => all(a, b),
        (Val::Record(a), Val::Record(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|((n, a), (m, b))| n == m && same(a, b))
        }
        (Val::Variant(n, a), Val::Variant(m, b)) => n == m && boxed(a, b),
        (Val::Option(a), Val::Option(b)) => boxed(a, b),
        (Val::Result(Ok(a)), Val::Result(Ok(b))) | (Val::Result(Err(a)), Val::Result(Err(b))) => {
            boxed(a, b)
        }
        (a, b) => a == b,
    }
}
