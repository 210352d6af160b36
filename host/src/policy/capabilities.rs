//! Everything one profile's tool calls may touch, validated: the grants (directories,
//! scratch, environment variables, hosts) and the [`CallLimits`], and the one
//! narrowing rule for a child under its parent ([`CapabilitySet::intersect`]).
//!
//! Deny by default: a [`CapabilitySet::default()`] grants no files, no scratch
//! directory, no environment variables and no network, and sets the default limits.
//! Nothing from the host's environment or argv reaches a guest unless named here.

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};

use serde::de::{self, DeserializeSeed, Deserializer, Visitor};

use super::call_limits::CallLimits;
use super::net::NetPolicy;

/// Where a profile's scratch directory appears inside the guest.
pub(crate) const SCRATCH_GUEST_PATH: &str = "/scratch";

/// Access mode of a preopened directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub enum FsMode {
    /// Read only: writes, renames, deletes and metadata changes are refused.
    #[serde(rename = "ro")]
    ReadOnly,
    /// Read and write.
    #[serde(rename = "rw")]
    ReadWrite,
}

/// One directory a tool may see. Given to `ConfigBuilder::set`
/// as a value (`.set("defaults.capabilities.fs", vec![grant])`), it is the table
/// `{ host, guest, mode }` a `warren.toml` would hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsGrant {
    /// The directory on the host: absolute and canonical once loaded; a relative
    /// path given in code resolves against the configuration's directory.
    pub host: PathBuf,
    /// Where the guest sees it, e.g. `/docs`.
    pub guest: String,
    /// Whether the guest may change it.
    pub mode: FsMode,
}

impl From<FsGrant> for toml::Value {
    fn from(grant: FsGrant) -> toml::Value {
        let mode = match grant.mode {
            FsMode::ReadOnly => "ro",
            FsMode::ReadWrite => "rw",
        };
        let mut table = toml::Table::new();
        table.insert(
            "host".into(),
            grant.host.to_string_lossy().into_owned().into(),
        );
        table.insert("guest".into(), grant.guest.into());
        table.insert("mode".into(), mode.into());
        toml::Value::Table(table)
    }
}

/// One environment variable a tool may read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EnvGrant {
    /// The variable's name.
    pub name: String,
    /// A literal value, or `None` to pass the host's value (when it is set).
    pub value: Option<String>,
}

/// Everything one profile's tool calls may touch, validated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CapabilitySet {
    /// Preopened directories.
    pub fs: Vec<FsGrant>,
    /// Whether the agent gets a private writable directory at [`SCRATCH_GUEST_PATH`].
    pub(crate) scratch: bool,
    /// Environment variables passed to the guest.
    pub(crate) env: Vec<EnvGrant>,
    /// Hosts reachable over HTTP and addresses over raw sockets.
    pub(crate) net: Arc<NetPolicy>,
    /// Fuel, time, memory, output, handles, logs and disk per call.
    pub(crate) limits: CallLimits,
}

impl CapabilitySet {
    /// Whether a tool call under this set can run again after a crash without
    /// repeating an effect outside it: it can write no granted directory and reach
    /// no network address. (Its scratch directory is its own, and a resumed agent's
    /// is new.) A call in doubt under any other set is not run again.
    pub(crate) fn replay_safe(&self) -> bool {
        self.fs.iter().all(|grant| grant.mode == FsMode::ReadOnly) && self.net.patterns().is_empty()
    }

    /// What a sub-agent with profile capabilities `self` may use under a parent with
    /// `parent`: every grant must also be the parent's (a directory inside one of the
    /// parent's, read-only unless both allow writing; variables and hosts the parent
    /// has), and every limit is the smaller of the two.
    pub(crate) fn intersect(&self, parent: &CapabilitySet) -> CapabilitySet {
        let fs = self
            .fs
            .iter()
            .filter_map(|grant| {
                let covering: Vec<&FsGrant> = parent
                    .fs
                    .iter()
                    .filter(|p| grant.host.starts_with(&p.host))
                    .collect();
                if covering.is_empty() {
                    return None;
                }
                let writable = grant.mode == FsMode::ReadWrite
                    && covering.iter().any(|p| p.mode == FsMode::ReadWrite);
                Some(FsGrant {
                    host: grant.host.clone(),
                    guest: grant.guest.clone(),
                    mode: if writable {
                        FsMode::ReadWrite
                    } else {
                        FsMode::ReadOnly
                    },
                })
            })
            .collect();
        let env = self
            .env
            .iter()
            .filter(|g| parent.env.iter().any(|p| p.name == g.name))
            .cloned()
            .collect();
        CapabilitySet {
            fs,
            scratch: self.scratch && parent.scratch,
            env,
            net: Arc::new(self.net.intersect(&parent.net)),
            limits: self.limits.narrow(&parent.limits),
        }
    }
}

/// The keys of a capabilities table, in a config file and in a job's ceiling alike:
/// the grants, then every limit.
pub(crate) fn capability_keys() -> &'static [&'static str] {
    static KEYS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
        ["fs", "scratch", "env", "net"]
            .into_iter()
            .chain(CallLimits::NAMES.iter().copied())
            .collect()
    });
    &KEYS
}

/// Reads a table key that must be one of `0`: an unknown key fails where it is
/// written (so a config error names its line), listing the known ones.
pub(crate) struct KnownKey(pub(crate) &'static [&'static str]);

impl<'de> DeserializeSeed<'de> for KnownKey {
    type Value = &'static str;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl Visitor<'_> for KnownKey {
    type Value = &'static str;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        self.0
            .iter()
            .find(|known| **known == key)
            .copied()
            .ok_or_else(|| E::unknown_field(key, self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_never_exceeds_its_parent() {
        let grant = |host: &str, mode| FsGrant {
            host: host.into(),
            guest: "/g".into(),
            mode,
        };
        let env = |name: &str| EnvGrant {
            name: name.into(),
            value: None,
        };
        let parent = CapabilitySet {
            fs: vec![
                grant("/data", FsMode::ReadOnly),
                grant("/work", FsMode::ReadWrite),
            ],
            env: vec![env("LANG")],
            limits: CallLimits {
                fuel: 100,
                memory_mb: 64,
                ..CallLimits::default()
            },
            ..CapabilitySet::default()
        };
        let child = CapabilitySet {
            fs: vec![
                grant("/data/docs", FsMode::ReadWrite),
                grant("/work/out", FsMode::ReadWrite),
                grant("/etc", FsMode::ReadOnly),
            ],
            scratch: true,
            env: vec![env("LANG"), env("HOME")],
            limits: CallLimits {
                fuel: 1000,
                memory_mb: 32,
                ..CallLimits::default()
            },
            ..CapabilitySet::default()
        };
        let effective = child.intersect(&parent);
        assert_eq!(
            effective.fs,
            vec![
                grant("/data/docs", FsMode::ReadOnly),
                grant("/work/out", FsMode::ReadWrite)
            ]
        );
        assert!(!effective.scratch);
        assert_eq!(effective.env, vec![env("LANG")]);
        assert_eq!(
            (effective.limits.fuel, effective.limits.memory_mb),
            (100, 32)
        );
    }
}
