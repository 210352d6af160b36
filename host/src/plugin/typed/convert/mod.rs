//! JSON ↔ component values, along the WIT type. One mapping, used both ways:
//!
//! | WIT | JSON |
//! |---|---|
//! | `bool` | `true` / `false` |
//! | `u8` … `s64` | an integer in the type's range (64-bit values exactly, beyond 2⁵³ too); `3.0` is taken as `3` |
//! | `f32`, `f64` | a number; NaN and ±infinity as the strings `"NaN"`, `"inf"`, `"-inf"` |
//! | `char` | a string of one Unicode scalar value |
//! | `string` | a string |
//! | `list<u8>` | a base64 string (standard alphabet, padded); an array of 0–255 is accepted too |
//! | `list<T>`, `list<T, N>` | an array (of exactly N) |
//! | `tuple<A, B>` | an array of exactly the members |
//! | `record` | an object with every field by its WIT name; unknown fields are refused; an absent `option` field is `null` |
//! | `variant` | `{"case": payload}`, payload `null` for a case without one (`"case"` alone is accepted too) |
//! | `enum` | the case name |
//! | `flags` | an array of the set flags' names |
//! | `option<T>` | `null` or the value; inside another option, `{"some": value}` |
//! | `result<T, E>` | `{"ok": value}` or `{"err": value}` (`null` without a payload) |
//!
//! Resources, maps, futures and streams have no JSON form; [`super::schema`] refuses
//! them at load. Errors in arguments name the JSON path of the bad value:
//! `$.items[2].weight: expected u8 0..255, got 300`.
//!
//! Layout: `from_json` (arguments in, checked along the type), `to_json` (results
//! out), `tests` (the round trip, as a property).

pub(crate) mod from_json;
#[cfg(test)]
mod tests;
pub(crate) mod to_json;

pub(crate) use self::from_json::args_from_json;
pub(crate) use self::to_json::to_json;
