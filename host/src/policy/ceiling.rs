//! A capability set in the queue's portable form: the parent's grants and limits that
//! bound a child run on another machine, as a job's `ceiling` carries them.
//!
//! The wire form is JSON such as `{"fs": [["/data", false]], "scratch": false, "env":
//! ["LANG"], "net": ["example.com:443"], "fuel": 7, "tool_timeout_ms": …}`: the grants,
//! then every limit under its name. Jobs come from Node and Python producers too, so
//! the form is fixed: unknown fields are refused, and a limit newer than the form
//! (`wire: default` in [`call_limits`](super::call_limits)) takes its default when
//! absent.

use std::fmt;
use std::sync::Arc;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::call_limits::{CallLimits, PartialCallLimits};
use super::capabilities::{capability_keys, CapabilitySet, EnvGrant, FsGrant, FsMode, KnownKey};
use super::net::{NetPattern, NetPolicy};

/// A capability set without what only its own machine can use (guest paths, literal
/// variable values): what a child on a worker is intersected with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ceiling {
    /// Directories as `(host path, writable)`.
    pub fs: Vec<(String, bool)>,
    /// Whether a scratch directory is allowed.
    pub scratch: bool,
    /// Names of the environment variables allowed.
    pub env: Vec<String>,
    /// `capabilities.net` entries.
    pub net: Vec<String>,
    /// Every per-call limit.
    pub limits: CallLimits,
}

impl Ceiling {
    /// The portable form of `caps`.
    pub(crate) fn of(caps: &CapabilitySet) -> Ceiling {
        Ceiling {
            fs: caps
                .fs
                .iter()
                .map(|g| (g.host.display().to_string(), g.mode == FsMode::ReadWrite))
                .collect(),
            scratch: caps.scratch,
            env: caps.env.iter().map(|g| g.name.clone()).collect(),
            net: caps.net.patterns().iter().map(|p| p.to_string()).collect(),
            limits: caps.limits,
        }
    }

    /// A capability set that admits exactly the ceiling, to intersect a worker's
    /// profile with. An entry that does not parse admits nothing.
    pub(crate) fn to_capabilities(&self) -> CapabilitySet {
        CapabilitySet {
            fs: self
                .fs
                .iter()
                .map(|(host, writable)| FsGrant {
                    host: host.into(),
                    guest: String::new(),
                    mode: if *writable {
                        FsMode::ReadWrite
                    } else {
                        FsMode::ReadOnly
                    },
                })
                .collect(),
            scratch: self.scratch,
            env: self
                .env
                .iter()
                .map(|name| EnvGrant {
                    name: name.clone(),
                    value: None,
                })
                .collect(),
            net: Arc::new(NetPolicy::new(
                self.net
                    .iter()
                    .filter_map(|p| p.parse::<NetPattern>().ok())
                    .collect(),
            )),
            limits: self.limits,
        }
    }
}

impl Serialize for Ceiling {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut fields = serializer.serialize_struct("Ceiling", capability_keys().len())?;
        fields.serialize_field("fs", &self.fs)?;
        fields.serialize_field("scratch", &self.scratch)?;
        fields.serialize_field("env", &self.env)?;
        fields.serialize_field("net", &self.net)?;
        self.limits.serialize_into(&mut fields)?;
        fields.end()
    }
}

impl<'de> Deserialize<'de> for Ceiling {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_struct("Ceiling", capability_keys(), CeilingVisitor)
    }
}

/// Reads a [`Ceiling`] from its map.
struct CeilingVisitor;

impl<'de> Visitor<'de> for CeilingVisitor {
    type Value = Ceiling;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a capability ceiling")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ceiling, A::Error> {
        let (mut fs, mut scratch, mut env, mut net) = (None, None, None, None);
        let mut limits = PartialCallLimits::default();
        while let Some(key) = map.next_key_seed(KnownKey(capability_keys()))? {
            match key {
                "fs" => once(&mut fs, key, map.next_value()?)?,
                "scratch" => once(&mut scratch, key, map.next_value()?)?,
                "env" => once(&mut env, key, map.next_value()?)?,
                "net" => once(&mut net, key, map.next_value()?)?,
                limit => limits.read(limit, &mut map, false)?,
            }
        }
        let required = |field: &'static str| de::Error::missing_field(field);
        Ok(Ceiling {
            fs: fs.ok_or_else(|| required("fs"))?,
            scratch: scratch.ok_or_else(|| required("scratch"))?,
            env: env.ok_or_else(|| required("env"))?,
            net: net.ok_or_else(|| required("net"))?,
            limits: limits.on_the_wire()?,
        })
    }
}

/// Sets `slot` to `value`, unless the field was already given.
fn once<T, E: de::Error>(slot: &mut Option<T>, field: &'static str, value: T) -> Result<(), E> {
    if slot.replace(value).is_some() {
        return Err(E::duplicate_field(field));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ceiling_round_trips_through_json() {
        let caps = CapabilitySet {
            fs: vec![FsGrant {
                host: "/data".into(),
                guest: "/d".into(),
                mode: FsMode::ReadOnly,
            }],
            net: Arc::new(NetPolicy::new(vec!["example.com:443".parse().unwrap()])),
            limits: CallLimits {
                fuel: 7,
                ..CallLimits::default()
            },
            ..CapabilitySet::default()
        };
        let ceiling = Ceiling::of(&caps);
        let back: Ceiling =
            serde_json::from_str(&serde_json::to_string(&ceiling).unwrap()).unwrap();
        let child = CapabilitySet {
            fs: vec![FsGrant {
                host: "/data/x".into(),
                guest: "/x".into(),
                mode: FsMode::ReadWrite,
            }],
            net: Arc::new(NetPolicy::new(vec![
                "example.com:443".parse().unwrap(),
                "evil.com".parse().unwrap(),
            ])),
            ..CapabilitySet::default()
        };
        let effective = child.intersect(&back.to_capabilities());
        assert_eq!(effective.fs[0].mode, FsMode::ReadOnly);
        assert_eq!(effective.net.patterns().len(), 1);
        assert_eq!(effective.limits.fuel, 7);
    }

    /// The form Node and Python producers write and read: field names and order, the
    /// limits newer than the first four defaulting when absent, the first four and
    /// the grants required, unknown and repeated fields refused.
    #[test]
    fn the_wire_form_is_fixed() {
        let caps = CapabilitySet {
            fs: vec![FsGrant {
                host: "/data".into(),
                guest: "/d".into(),
                mode: FsMode::ReadOnly,
            }],
            env: vec![EnvGrant {
                name: "LANG".into(),
                value: Some("C".into()),
            }],
            net: Arc::new(NetPolicy::new(vec!["example.com:443".parse().unwrap()])),
            limits: CallLimits {
                fuel: 7,
                ..CallLimits::default()
            },
            ..CapabilitySet::default()
        };
        let written = serde_json::to_string(&Ceiling::of(&caps)).unwrap();
        // Limits added later follow these, each under its name.
        let pinned = r#"{"fs":[["/data",false]],"scratch":false,"env":["LANG"],"net":["example.com:443"],"fuel":7,"tool_timeout_ms":10000,"memory_mb":256,"max_output_kb":1024,"max_handles":1024,"max_log_kb":64,"max_write_mb":64,"scratch_mb":256"#;
        assert!(written.starts_with(pinned), "{written}");
        let fields =
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&written).unwrap();
        assert_eq!(fields.len(), 4 + CallLimits::NAMES.len(), "{written}");
        let old = r#"{"fs":[],"scratch":true,"env":[],"net":[],"fuel":1,"tool_timeout_ms":2,"memory_mb":3,"max_output_kb":4}"#;
        let read: Ceiling = serde_json::from_str(old).unwrap();
        assert_eq!(
            read.limits,
            CallLimits {
                fuel: 1,
                tool_timeout_ms: 2,
                memory_mb: 3,
                max_output_kb: 4,
                ..CallLimits::default()
            }
        );
        assert!(read.scratch);
        let refused = |text: &str| {
            serde_json::from_str::<Ceiling>(text)
                .unwrap_err()
                .to_string()
        };
        assert!(refused(&old.replace(r#""fuel":1,"#, "")).contains("missing field `fuel`"));
        assert!(refused(&old.replace(r#""fs":[],"#, "")).contains("missing field `fs`"));
        assert!(refused(&old.replace(r#""fuel":1"#, r#""fuel":1,"gpu":1"#))
            .contains("unknown field `gpu`"));
        assert!(refused(&old.replace(r#""fuel":1"#, r#""fuel":1,"fuel":2"#))
            .contains("duplicate field `fuel`"));
    }
}
