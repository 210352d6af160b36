//! `capabilities` tables (`[defaults.capabilities]` and each profile's): the grants
//! (directories, scratch, variables, hosts) read here, the limits through the
//! policy's table of them, each checked at its line; then resolved against the file
//! system and `[defaults.capabilities]`, field by field, into a [`CapabilitySet`].

use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use toml::Spanned;

use super::error::ConfigError;
use super::source::Source;
use super::values::{EnvName, GuestPath, Parsed};
use crate::policy::capabilities::{capability_keys, KnownKey};
use crate::policy::{
    CapabilitySet, EnvGrant, FsGrant, FsMode, NetPattern, NetPolicy, PartialCallLimits,
    SCRATCH_GUEST_PATH,
};

/// A `capabilities` table: the grants, then the limits (read by the policy's table,
/// each checked against its bounds at its line). Unknown keys are refused.
#[derive(Default)]
pub(super) struct RawCapabilities {
    /// Directories, each `{ host, guest, mode }`.
    fs: Option<Vec<RawFsGrant>>,
    /// Whether the agent gets a scratch directory.
    scratch: Option<bool>,
    /// Variables passed to the guest, by name or with a literal value.
    env: Option<Vec<RawEnvGrant>>,
    /// `host[:port]` patterns.
    net: Option<Vec<Parsed<NetPattern>>>,
    /// The per-call limits given here.
    limits: PartialCallLimits,
}

impl RawCapabilities {
    /// Whether the table grants and limits nothing (or was not written).
    pub(super) fn is_empty(&self) -> bool {
        self.fs.is_none()
            && self.scratch.is_none()
            && self.env.is_none()
            && self.net.is_none()
            && self.limits == PartialCallLimits::default()
    }
}

impl<'de> Deserialize<'de> for RawCapabilities {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// Reads the table's keys one by one.
        struct Table;
        impl<'de> serde::de::Visitor<'de> for Table {
            type Value = RawCapabilities;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a capabilities table")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RawCapabilities, A::Error> {
                let mut raw = RawCapabilities::default();
                while let Some(key) = map.next_key_seed(KnownKey(capability_keys()))? {
                    match key {
                        "fs" => raw.fs = Some(map.next_value()?),
                        "scratch" => raw.scratch = Some(map.next_value()?),
                        "env" => raw.env = Some(map.next_value()?),
                        "net" => raw.net = Some(map.next_value()?),
                        limit => raw.limits.read(limit, &mut map, true)?,
                    }
                }
                Ok(raw)
            }
        }
        deserializer.deserialize_struct("RawCapabilities", capability_keys(), Table)
    }
}

/// The table's schema, for the key table's check (`config::keys`): the keys its
/// reader accepts, each with the type read.
#[cfg(test)]
impl schemars::JsonSchema for RawCapabilities {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RawCapabilities".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let properties: serde_json::Map<String, serde_json::Value> = capability_keys()
            .iter()
            .map(|&key| {
                let schema = match key {
                    "fs" => generator.subschema_for::<Vec<RawFsGrant>>(),
                    "scratch" => generator.subschema_for::<bool>(),
                    "env" => generator.subschema_for::<Vec<RawEnvGrant>>(),
                    "net" => generator.subschema_for::<Vec<String>>(),
                    _ => generator.subschema_for::<u64>(),
                };
                (key.to_string(), schema.to_value())
            })
            .collect();
        schemars::json_schema!({
            "type": "object",
            "properties": properties,
            "additionalProperties": false,
        })
    }
}

/// One `fs` entry as written.
#[derive(Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
struct RawFsGrant {
    /// The directory, relative to the config file; checked to exist once parsed.
    #[cfg_attr(test, schemars(with = "String"))]
    host: Spanned<String>,
    /// Where the guest sees it.
    guest: GuestPath,
    /// `ro` unless given.
    #[serde(default = "read_only")]
    mode: FsMode,
}

/// Grants are read-only unless they say otherwise.
fn read_only() -> FsMode {
    FsMode::ReadOnly
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(
    untagged,
    expecting = "an environment variable name, or a table { name = \"...\", value = \"...\" }"
)]
enum RawEnvGrant {
    /// The host's value of the variable, when it is set.
    Name(EnvName),
    /// A value given in the file.
    Literal {
        /// The variable.
        name: EnvName,
        /// Its value.
        value: String,
    },
}

/// The capabilities of `raw` (a profile's table, or `[defaults.capabilities]` with
/// no `defaults`) over `defaults`, field by field; `key` is the table's dotted key.
pub(super) fn resolve(
    src: &Source<'_>,
    raw: &RawCapabilities,
    defaults: Option<&RawCapabilities>,
    key: &str,
) -> Result<CapabilitySet, ConfigError> {
    // Each field comes from the profile, else from [defaults.capabilities], else the
    // built-in default (which grants nothing).
    macro_rules! pick {
        ($field:ident) => {
            raw.$field
                .as_ref()
                .or_else(|| defaults.and_then(|d| d.$field.as_ref()))
        };
    }
    let builtin = CapabilitySet::default();
    let mut fs = Vec::new();
    for (i, grant) in pick!(fs).into_iter().flatten().enumerate() {
        fs.push(fs_grant(src, grant, &format!("{key}.fs[{i}].host"))?);
    }
    let scratch = pick!(scratch).copied().unwrap_or(builtin.scratch);
    if let Some(clash) = fs
        .iter()
        .position(|g| g.guest == SCRATCH_GUEST_PATH)
        .filter(|_| scratch)
    {
        let grant = &pick!(fs).expect("fs present")[clash];
        return src.invalid(
            grant.host.span(),
            &format!("{key}.fs[{clash}].guest"),
            format!("{SCRATCH_GUEST_PATH} is reserved for the scratch directory"),
        );
    }
    let env = pick!(env).into_iter().flatten().map(env_grant).collect();
    let net = NetPolicy::new(
        pick!(net)
            .into_iter()
            .flatten()
            .map(|p| p.0.clone())
            .collect(),
    );
    let below = defaults.map(|d| d.limits).unwrap_or_default();
    Ok(CapabilitySet {
        fs,
        scratch,
        env,
        net: Arc::new(net),
        limits: raw.limits.over(&below).or_defaults(),
    })
}

/// One `fs` grant, its host directory resolved against the config file's directory;
/// `field` is its dotted key, for the error when that is not a directory.
fn fs_grant(src: &Source<'_>, grant: &RawFsGrant, field: &str) -> Result<FsGrant, ConfigError> {
    let host = src.base.join(grant.host.get_ref());
    let host = match host.canonicalize() {
        Ok(host) if host.is_dir() => host,
        Ok(_) => {
            return src.invalid(
                grant.host.span(),
                field,
                format!("{} is not a directory", host.display()),
            )
        }
        Err(e) => return src.invalid(grant.host.span(), field, format!("{}: {e}", host.display())),
    };
    Ok(FsGrant {
        host,
        guest: grant.guest.0.clone(),
        mode: grant.mode,
    })
}

/// One `env` grant: the host's value of a variable, or a value given in the file.
fn env_grant(grant: &RawEnvGrant) -> EnvGrant {
    match grant {
        RawEnvGrant::Name(name) => EnvGrant {
            name: name.0.clone(),
            value: None,
        },
        RawEnvGrant::Literal { name, value } => EnvGrant {
            name: name.0.clone(),
            value: Some(value.clone()),
        },
    }
}

#[cfg(test)]
mod tests {
    use crate::config::tests::parse;
    use crate::policy::FsMode;

    #[test]
    fn profile_inherits_defaults_field_by_field() {
        let config = parse(
            r#"
[defaults.capabilities]
memory_mb = 32
net = ["example.com"]
[profiles.reader]
tools = ["read_file"]
[profiles.reader.capabilities]
fs = [{ host = "docs", guest = "/docs" }]
net = []
"#,
        )
        .unwrap();
        let reader = config.profile("reader").unwrap();
        assert_eq!(reader.capabilities.limits.memory_mb, 32);
        assert!(reader.capabilities.net.patterns().is_empty());
        assert_eq!(reader.capabilities.fs[0].mode, FsMode::ReadOnly);
        assert_eq!(
            reader.capabilities.limits.fuel,
            crate::policy::CallLimits::default().fuel
        );
        assert!(reader.tools.allows("read_file") && !reader.tools.allows("write_file"));
    }
}
