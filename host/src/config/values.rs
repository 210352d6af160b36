//! Scalar values of `warren.toml` validated while they are read, so a bad one is an
//! error at its line and key: bounded integers, dollar amounts, and names and paths
//! of each kind.

use std::fmt;

use serde::Deserialize;

use super::names::name_like;
use crate::policy::call_limits::in_bounds;

/// The values a key may take beyond its type, as the key table (`keys`) gives them;
/// a value past them is refused where it is written, naming the key.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Bounds {
    /// Any value of its type.
    None,
    /// An integer in `min..=max`.
    Int {
        /// The smallest.
        min: u64,
        /// The largest.
        max: u64,
    },
    /// A number at least 0.
    NonNegative,
    /// A number above 0.
    Positive,
    /// A string of at most this many bytes.
    Bytes(usize),
}

/// An integer in `MIN..=MAX`, rejected at its line otherwise.
#[derive(Clone, Copy, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(try_from = "i64")]
pub(super) struct Bounded<const MIN: u64, const MAX: u64>(pub(super) u64);

/// The count `bound` holds as written, else `default`.
pub(super) fn count_or<const MIN: u64, const MAX: u64>(
    bound: Option<Bounded<MIN, MAX>>,
    default: usize,
) -> usize {
    bound.map_or(default, |v| v.0 as usize)
}

#[cfg(test)]
impl<const MIN: u64, const MAX: u64> Bounded<MIN, MAX> {
    /// The bounds, for the key table.
    pub(super) const BOUNDS: Bounds = Bounds::Int { min: MIN, max: MAX };
}

impl<const MIN: u64, const MAX: u64> TryFrom<i64> for Bounded<MIN, MAX> {
    type Error = String;
    fn try_from(value: i64) -> Result<Self, String> {
        in_bounds(value, MIN, MAX).map(Bounded)
    }
}

/// A value read from its text by its `FromStr` (a `capabilities.net` entry, an agent
/// state), refused at its line with that parser's message.
#[derive(Clone, Copy, Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(bound = ""))]
#[serde(try_from = "String", bound = "T: std::str::FromStr<Err = String>")]
pub(super) struct Parsed<T>(#[cfg_attr(test, schemars(with = "String"))] pub(super) T);

impl<T: std::str::FromStr<Err = String>> TryFrom<String> for Parsed<T> {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        value.parse().map(Parsed)
    }
}

macro_rules! validated_string {
    ($(#[$doc:meta])* $name:ident, $check:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
        #[cfg_attr(test, derive(schemars::JsonSchema))]
        #[serde(try_from = "String")]
        pub(super) struct $name(pub(super) String);

        impl TryFrom<String> for $name {
            type Error = String;
            fn try_from(value: String) -> Result<Self, String> {
                let check: fn(&str) -> Result<(), String> = $check;
                check(&value).map(|()| $name(value))
            }
        }
    };
}

validated_string!(
    /// `[a-zA-Z0-9_-]{1,64}`: a profile name, also used as an enum value for models.
    ProfileName,
    |s| name_like(s, "profile name", false)
);
validated_string!(
    /// `[a-zA-Z0-9_-]{1,64}`: a queue name (BullMQ keys are `bull:NAME:…`).
    QueueName,
    |s| name_like(s, "queue name", false)
);
validated_string!(
    /// A tool name or a pattern with `*`.
    ToolPattern,
    |s| name_like(s, "tool name or pattern", true)
);
validated_string!(
    /// A POSIX-style variable name.
    EnvName,
    |s| {
        let mut chars = s.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
            Ok(())
        } else {
            Err(format!("`{s}` is not a valid environment variable name"))
        }
    }
);
validated_string!(
    /// An absolute guest path without `.` or `..` components.
    GuestPath,
    |s| {
        let valid = s.starts_with('/')
            && s.len() > 1
            && s[1..].split('/').all(|part| !part.is_empty() && part != "." && part != "..");
        if valid {
            Ok(())
        } else {
            Err(format!("guest path `{s}` must be absolute, like /docs, with no empty, `.` or `..` parts"))
        }
    }
);

/// A non-negative, finite amount of US dollars.
#[derive(Clone, Copy, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(try_from = "f64")]
pub(super) struct Dollars(pub(super) f64);

#[cfg(test)]
impl Dollars {
    /// The bounds, for the key table.
    pub(super) const BOUNDS: Bounds = Bounds::NonNegative;
}

impl TryFrom<f64> for Dollars {
    type Error = String;
    fn try_from(value: f64) -> Result<Self, String> {
        if value.is_finite() && value >= 0.0 {
            Ok(Dollars(value))
        } else {
            Err(format!(
                "must be a non-negative amount of dollars, got {value}"
            ))
        }
    }
}

impl fmt::Display for ProfileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
