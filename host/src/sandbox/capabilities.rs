//! What a profile lets its tools touch, in validated form, and how one tool call's
//! WASI context is built from it.
//!
//! Deny by default: a [`CapabilitySet::default()`] grants no files, no scratch
//! directory, no environment variables and no network, and sets the limits below.
//! Nothing from the host's environment or argv reaches a guest unless named here.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use super::limits::CappedPipe;
use super::net::{DenialLog, NetPolicy};

/// Default `capabilities.fuel`: instructions per tool call (a few seconds of work).
pub const DEFAULT_FUEL: u64 = 5_000_000_000;
/// Default `capabilities.tool_timeout_ms`: wall time per tool call.
pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 10_000;
/// Default `capabilities.memory_mb`: linear memory per tool call.
pub const DEFAULT_MEMORY_MB: u64 = 256;
/// Default `capabilities.max_output_kb`: cap on the result and on stdout and stderr.
pub const DEFAULT_MAX_OUTPUT_KB: u64 = 1024;
/// Default `capabilities.max_handles`: resource handles a call may hold at once.
pub const DEFAULT_MAX_HANDLES: u64 = 1024;
/// Default `capabilities.max_log_kb`: `host-log` bytes per call.
pub const DEFAULT_MAX_LOG_KB: u64 = 64;
/// Default `capabilities.max_write_mb`: bytes a call may write to files.
pub const DEFAULT_MAX_WRITE_MB: u64 = 64;
/// Default `capabilities.scratch_mb`: size of the scratch directory.
pub const DEFAULT_SCRATCH_MB: u64 = 256;
/// Largest `capabilities.memory_mb` a profile may set (the engine reserves this much
/// address space per instance slot).
pub const MAX_MEMORY_MB: u64 = 4096;
/// Where a profile's scratch directory appears inside the guest.
pub const SCRATCH_GUEST_PATH: &str = "/scratch";

/// Access mode of a preopened directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
pub enum FsMode {
    /// Read only: writes, renames, deletes and metadata changes are refused.
    #[serde(rename = "ro")]
    ReadOnly,
    /// Read and write.
    #[serde(rename = "rw")]
    ReadWrite,
}

/// One directory a tool may see.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsGrant {
    /// The directory on the host, absolute and canonical.
    pub host: PathBuf,
    /// Where the guest sees it, e.g. `/docs`.
    pub guest: String,
    /// Whether the guest may change it.
    pub mode: FsMode,
}

/// One environment variable a tool may read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvGrant {
    /// The variable's name.
    pub name: String,
    /// A literal value, or `None` to pass the host's value (when it is set).
    pub value: Option<String>,
}

/// Everything one profile's tool calls may touch, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapabilitySet {
    /// Preopened directories.
    pub fs: Vec<FsGrant>,
    /// Whether the agent gets a private writable directory at [`SCRATCH_GUEST_PATH`].
    pub scratch: bool,
    /// Environment variables passed to the guest.
    pub env: Vec<EnvGrant>,
    /// Hosts reachable over HTTP and addresses over raw sockets.
    pub net: Arc<NetPolicy>,
    /// Instructions per call.
    pub fuel: u64,
    /// Wall time per call, in milliseconds.
    pub tool_timeout_ms: u64,
    /// Linear memory cap, in MiB.
    pub memory_mb: u64,
    /// Cap on the result and on each of stdout and stderr, in KiB.
    pub max_output_kb: u64,
    /// Resource handles (open files and directories, streams, sockets, HTTP fields) a
    /// call may hold at once: bounds the host descriptors and host memory one call
    /// can pin.
    pub max_handles: u64,
    /// `host-log` bytes per call, in KiB; every record costs at least
    /// [`LOG_RECORD_MIN_BYTES`](super::LOG_RECORD_MIN_BYTES).
    pub max_log_kb: u64,
    /// Bytes one call may write to files (every grant, scratch included), in MiB.
    pub max_write_mb: u64,
    /// Size of the scratch directory, in MiB.
    pub scratch_mb: u64,
}

impl Default for CapabilitySet {
    fn default() -> Self {
        CapabilitySet {
            fs: Vec::new(),
            scratch: false,
            env: Vec::new(),
            net: Arc::default(),
            fuel: DEFAULT_FUEL,
            tool_timeout_ms: DEFAULT_TOOL_TIMEOUT_MS,
            memory_mb: DEFAULT_MEMORY_MB,
            max_output_kb: DEFAULT_MAX_OUTPUT_KB,
            max_handles: DEFAULT_MAX_HANDLES,
            max_log_kb: DEFAULT_MAX_LOG_KB,
            max_write_mb: DEFAULT_MAX_WRITE_MB,
            scratch_mb: DEFAULT_SCRATCH_MB,
        }
    }
}

impl CapabilitySet {
    /// What a sub-agent with profile capabilities `self` may use under a parent with
    /// `parent`: every grant must also be the parent's (a directory inside one of the
    /// parent's, read-only unless both allow writing; variables and hosts the parent
    /// has), and every limit is the smaller of the two.
    pub fn intersect(&self, parent: &CapabilitySet) -> CapabilitySet {
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
            fuel: self.fuel.min(parent.fuel),
            tool_timeout_ms: self.tool_timeout_ms.min(parent.tool_timeout_ms),
            memory_mb: self.memory_mb.min(parent.memory_mb),
            max_output_kb: self.max_output_kb.min(parent.max_output_kb),
            max_handles: self.max_handles.min(parent.max_handles),
            max_log_kb: self.max_log_kb.min(parent.max_log_kb),
            max_write_mb: self.max_write_mb.min(parent.max_write_mb),
            scratch_mb: self.scratch_mb.min(parent.scratch_mb),
        }
    }

    /// The wall-time limit as a duration.
    pub fn tool_timeout(&self) -> Duration {
        Duration::from_millis(self.tool_timeout_ms)
    }

    /// The output cap in bytes.
    pub fn max_output_bytes(&self) -> usize {
        usize::try_from(self.max_output_kb.saturating_mul(1024)).unwrap_or(usize::MAX)
    }

    /// `max_write_mb` in bytes.
    pub fn max_write_bytes(&self) -> u64 {
        self.max_write_mb.saturating_mul(1 << 20)
    }

    /// `scratch_mb` in bytes.
    pub fn scratch_bytes(&self) -> u64 {
        self.scratch_mb.saturating_mul(1 << 20)
    }

    /// The memory cap in bytes.
    pub fn memory_bytes(&self) -> usize {
        usize::try_from(self.memory_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
    }

    /// Builds the WASI context of one call: preopens, scratch, env, sockets and the
    /// capped stdout/stderr pipes. No argv, no inherited env, no stdin.
    pub(crate) fn wasi_ctx(
        &self,
        scratch: Option<&Path>,
        stdout: &CappedPipe,
        stderr: &CappedPipe,
        denials: &DenialLog,
    ) -> anyhow::Result<WasiCtx> {
        let mut builder = WasiCtxBuilder::new();
        builder.stdout(stdout.clone()).stderr(stderr.clone());
        // File reads, writes and opens run on the calling thread instead of a hop to
        // tokio's blocking pool and back for each one: a call is short (its wall-clock
        // limit bounds it) and granted directories are local, so the hop costs more
        // than the I/O it moves (wasmtime issue 7973).
        builder.allow_blocking_current_thread(true);
        for grant in &self.fs {
            let perms = match grant.mode {
                FsMode::ReadOnly => FsPerms::ReadOnly,
                FsMode::ReadWrite => FsPerms::ReadWrite,
            };
            builder
                .preopened_dir(&grant.host, &grant.guest, perms)
                .map_err(anyhow::Error::from)
                .with_context(|| format!("opening {} for {}", grant.host.display(), grant.guest))?;
        }
        if let (true, Some(dir)) = (self.scratch, scratch) {
            builder
                .preopened_dir(dir, SCRATCH_GUEST_PATH, FsPerms::ReadWrite)
                .map_err(anyhow::Error::from)
                .with_context(|| format!("opening scratch directory {}", dir.display()))?;
        }
        for grant in &self.env {
            let value = match &grant.value {
                Some(literal) => Some(literal.clone()),
                None => std::env::var(&grant.name).ok(),
            };
            if let Some(value) = value {
                builder.env(&grant.name, value);
            }
        }
        // Name lookups are never offered: a lookup is itself a way out (DNS
        // exfiltration) and raw sockets only match literal addresses anyway.
        // TCP itself is on so that every connect reaches `socket_addr_check`, which
        // refuses (and records) any address the policy does not list.
        builder
            .allow_ip_name_lookup(false)
            .allow_udp(false)
            .allow_tcp(true);
        let policy = self.net.clone();
        let denials = denials.clone();
        builder.socket_addr_check(move |addr, usage| {
            let verdict = policy.check_socket(addr, usage);
            let denials = denials.clone();
            Box::pin(async move {
                match verdict {
                    Ok(()) => true,
                    Err(denial) => {
                        denials.record(denial);
                        false
                    }
                }
            })
        });
        Ok(builder.build())
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
            fuel: 100,
            memory_mb: 64,
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
            fuel: 1000,
            memory_mb: 32,
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
        assert_eq!((effective.fuel, effective.memory_mb), (100, 32));
    }
}
