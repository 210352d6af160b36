//! The numeric limits of one tool call, declared once.
//!
//! The table at the bottom of this file is the only list of them. Each row gives a
//! limit's doc, name, type, default, the bounds a config file may set it within, and
//! what a queue job's ceiling without it means; from it come [`CallLimits`] (with its
//! `Default` and [`CallLimits::narrow`]), [`PartialCallLimits`] (the optional form
//! `[defaults.capabilities]` and a profile's `capabilities` table are read into, each
//! value checked against its bounds where it is written), and the limits' part of the
//! queue's wire form ([`Ceiling`](super::ceiling::Ceiling)).
//!
//! Adding a limit is one row here, one in the config's key table (`config::keys`, from
//! which a test renders the configuration reference) and its line in the capabilities
//! table of docs/security.md; the sandbox then enforces it.

use std::fmt::Display;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess};
use serde::Deserialize;

/// Largest `memory_mb` a profile may set: the engine reserves this much address space
/// per instance slot.
pub(crate) const MAX_MEMORY_MB: u64 = 4096;

/// `value` as a `T` within `min..=max`, or the message a config error shows for it.
/// The one bounds rule of `warren.toml`'s integers.
pub(crate) fn in_bounds<T>(value: i64, min: T, max: T) -> Result<T, String>
where
    T: TryFrom<i64> + PartialOrd + Display,
{
    T::try_from(value)
        .ok()
        .filter(|v| *v >= min && *v <= max)
        .ok_or_else(|| format!("must be between {min} and {max}, got {value}"))
}

/// Reads one integer within bounds, failing at the value (so a config error names its
/// line and key).
struct InBounds<T> {
    /// The smallest value allowed.
    min: T,
    /// The largest value allowed.
    max: T,
}

impl<'de, T> DeserializeSeed<'de> for InBounds<T>
where
    T: TryFrom<i64> + PartialOrd + Display,
{
    type Value = T;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<T, D::Error> {
        let value = i64::deserialize(deserializer)?;
        in_bounds(value, self.min, self.max).map_err(de::Error::custom)
    }
}

/// Generates everything the rows below need; see the module's doc.
///
/// `wire: required`: a queue job's ceiling must carry the limit (the first four, which
/// every warren job has carried); `wire: default`: a ceiling without it (a job written
/// before the limit existed) gets the default. A new limit is `wire: default`.
macro_rules! call_limits {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident: $ty:ty = $default:expr, in $min:literal..=$max:expr, wire: $wire:ident;
    )*) => {
        /// What one tool call may use: every limit a profile's `capabilities` sets,
        /// each a number in the unit its name ends with.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) struct CallLimits {
            $($(#[doc = $doc])* pub(crate) $name: $ty,)*
        }

        impl Default for CallLimits {
            fn default() -> Self {
                CallLimits::DEFAULT
            }
        }

        /// Each limit's bounds in a config file, `(min, max)` (for the key table's
        /// test).
        #[cfg(test)]
        #[derive(Clone, Copy, Debug)]
        pub(crate) struct CallLimitBounds {
            $($(#[doc = $doc])* pub(crate) $name: ($ty, $ty),)*
        }

        impl CallLimits {
            /// Every limit's default.
            pub(crate) const DEFAULT: CallLimits = CallLimits { $($name: $default,)* };

            /// Every limit's bounds in a config file.
            #[cfg(test)]
            pub(crate) const BOUNDS: CallLimitBounds = CallLimitBounds { $($name: ($min, $max),)* };

            /// Every limit's name (its key in `capabilities` and in a job's ceiling),
            /// in the table's order.
            pub(crate) const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            /// Each limit the smaller of `self`'s and `other`'s: what a child under a
            /// parent with `other` may use.
            pub(crate) fn narrow(&self, other: &CallLimits) -> CallLimits {
                CallLimits { $($name: self.$name.min(other.$name),)* }
            }

            /// Writes every limit as a field of `fields`, in the table's order.
            pub(crate) fn serialize_into<S: serde::ser::SerializeStruct>(
                &self,
                fields: &mut S,
            ) -> Result<(), S::Error> {
                $(fields.serialize_field(stringify!($name), &self.$name)?;)*
                Ok(())
            }
        }

        /// Call limits as one layer of configuration sets them: each one given or
        /// not (`[defaults.capabilities]`, then a profile's own `capabilities`).
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub(crate) struct PartialCallLimits {
            $($(#[doc = $doc])* pub(crate) $name: Option<$ty>,)*
        }

        impl PartialCallLimits {
            /// Each limit from `self`, else from `below`.
            pub(crate) fn over(&self, below: &PartialCallLimits) -> PartialCallLimits {
                PartialCallLimits { $($name: self.$name.or(below.$name),)* }
            }

            /// Each limit given here, else its default.
            pub(crate) fn or_defaults(&self) -> CallLimits {
                let defaults = CallLimits::default();
                CallLimits { $($name: self.$name.unwrap_or(defaults.$name),)* }
            }

            /// Reads limit `name`'s value, the next of `map`: within its bounds when
            /// `checked` (a config file), else any value of its type (a job's
            /// ceiling, which only ever narrows). `name` must be one of
            /// [`CallLimits::NAMES`].
            pub(crate) fn read<'de, A: MapAccess<'de>>(
                &mut self,
                name: &str,
                map: &mut A,
                checked: bool,
            ) -> Result<(), A::Error> {
                match name {
                    $(stringify!($name) => {
                        if self.$name.is_some() {
                            return Err(de::Error::duplicate_field(stringify!($name)));
                        }
                        self.$name = Some(if checked {
                            map.next_value_seed(InBounds::<$ty> { min: $min, max: $max })?
                        } else {
                            map.next_value::<$ty>()?
                        });
                    })*
                    other => return Err(de::Error::unknown_field(other, CallLimits::NAMES)),
                }
                Ok(())
            }

            /// The limits of a job's ceiling as read: a missing `wire: default` limit
            /// is its default, a missing `wire: required` one an error.
            pub(crate) fn on_the_wire<E: de::Error>(&self) -> Result<CallLimits, E> {
                let defaults = CallLimits::default();
                Ok(CallLimits {
                    $($name: match self.$name {
                        Some(value) => value,
                        None => call_limits!(@absent $wire, $name, defaults),
                    },)*
                })
            }
        }
    };
    (@absent required, $name:ident, $defaults:ident) => {
        return Err(E::missing_field(stringify!($name)))
    };
    (@absent default, $name:ident, $defaults:ident) => {
        $defaults.$name
    };
}

call_limits! {
    /// Instructions per call (the default is a few seconds of work).
    fuel: u64 = 5_000_000_000, in 1..=1_000_000_000_000, wire: required;
    /// Wall time per call, in milliseconds.
    tool_timeout_ms: u64 = 10_000, in 1..=3_600_000, wire: required;
    /// Linear memory cap per call, in MiB.
    memory_mb: u64 = 256, in 1..=MAX_MEMORY_MB, wire: required;
    /// Cap on the result and on each of stdout and stderr, in KiB.
    max_output_kb: u64 = 1024, in 1..=1_048_576, wire: required;
    /// Resource handles (open files and directories, streams, sockets, HTTP fields) a
    /// call may hold at once: bounds the host descriptors and host memory one call
    /// can pin.
    max_handles: u64 = 1024, in 16..=65_536, wire: default;
    /// `host-log` bytes per call, in KiB; every record costs at least 128 bytes
    /// (`sandbox::LOG_RECORD_MIN_BYTES`).
    max_log_kb: u64 = 64, in 0..=65_536, wire: default;
    /// Bytes one call may write to files (every grant, scratch included), in MiB.
    max_write_mb: u64 = 64, in 0..=1_048_576, wire: default;
    /// Size of the scratch directory, in MiB.
    scratch_mb: u64 = 256, in 1..=1_048_576, wire: default;
}

impl CallLimits {
    /// `tool_timeout_ms` as a duration.
    pub(crate) fn tool_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.tool_timeout_ms)
    }

    /// `max_output_kb` in bytes.
    pub(crate) fn max_output_bytes(&self) -> usize {
        usize::try_from(self.max_output_kb.saturating_mul(1024)).unwrap_or(usize::MAX)
    }

    /// `max_write_mb` in bytes.
    pub(crate) fn max_write_bytes(&self) -> u64 {
        self.max_write_mb.saturating_mul(1 << 20)
    }

    /// `scratch_mb` in bytes.
    pub(crate) fn scratch_bytes(&self) -> u64 {
        self.scratch_mb.saturating_mul(1 << 20)
    }

    /// `memory_mb` in bytes.
    pub(crate) fn memory_bytes(&self) -> usize {
        usize::try_from(self.memory_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
    }

    /// `max_log_kb` in bytes.
    pub(crate) fn max_log_bytes(&self) -> usize {
        usize::try_from(self.max_log_kb.saturating_mul(1024)).unwrap_or(usize::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrowing_takes_the_smaller_of_each() {
        let parent = CallLimits {
            fuel: 100,
            memory_mb: 64,
            ..CallLimits::default()
        };
        let child = CallLimits {
            fuel: 1000,
            memory_mb: 32,
            ..CallLimits::default()
        };
        let narrowed = child.narrow(&parent);
        assert_eq!((narrowed.fuel, narrowed.memory_mb), (100, 32));
        assert_eq!(narrowed.max_handles, CallLimits::default().max_handles);
    }

    #[test]
    fn layers_apply_field_by_field() {
        let defaults = PartialCallLimits {
            memory_mb: Some(32),
            fuel: Some(7),
            ..PartialCallLimits::default()
        };
        let profile = PartialCallLimits {
            fuel: Some(9),
            ..PartialCallLimits::default()
        };
        let limits = profile.over(&defaults).or_defaults();
        assert_eq!((limits.fuel, limits.memory_mb), (9, 32));
        assert_eq!(limits.scratch_mb, CallLimits::default().scratch_mb);
    }

    #[test]
    fn bounds_name_the_range() {
        assert_eq!(in_bounds::<u64>(5, 1, 10), Ok(5));
        assert_eq!(
            in_bounds(0, 1, MAX_MEMORY_MB),
            Err("must be between 1 and 4096, got 0".into())
        );
        assert_eq!(
            in_bounds::<u64>(-1, 0, 9),
            Err("must be between 0 and 9, got -1".into())
        );
    }
}
