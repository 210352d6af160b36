//! How one tool call's WASI context is built from its [`CapabilitySet`]: the granted
//! directories and scratch as preopens, the granted variables, sockets through the
//! network policy, capped stdout and stderr. No argv, no inherited env, no stdin.

use std::path::Path;

use anyhow::Context as _;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use super::limits::CappedPipe;
use super::net::{check_socket, DenialLog};
use crate::policy::{CapabilitySet, FsMode, SCRATCH_GUEST_PATH};

/// Builds the WASI context of one call under `caps`: preopens, scratch, env, sockets and the
/// capped stdout/stderr pipes. No argv, no inherited env, no stdin.
pub(crate) fn wasi_ctx(
    caps: &CapabilitySet,
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
    for grant in &caps.fs {
        let perms = match grant.mode {
            FsMode::ReadOnly => FsPerms::ReadOnly,
            FsMode::ReadWrite => FsPerms::ReadWrite,
        };
        builder
            .preopened_dir(&grant.host, &grant.guest, perms)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("opening {} for {}", grant.host.display(), grant.guest))?;
    }
    if let (true, Some(dir)) = (caps.scratch, scratch) {
        builder
            .preopened_dir(dir, SCRATCH_GUEST_PATH, FsPerms::ReadWrite)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("opening scratch directory {}", dir.display()))?;
    }
    for grant in &caps.env {
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
    let policy = caps.net.clone();
    let denials = denials.clone();
    builder.socket_addr_check(move |addr, usage| {
        let verdict = check_socket(&policy, addr, usage);
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
