//! On-disk cache of compiled components.
//!
//! Compiling a large guest (a Python or JavaScript interpreter) takes many seconds;
//! loading its compiled artifact takes milliseconds. An entry is keyed by the SHA-256
//! of the component and of the engine's compatibility hash (wasmtime version, target,
//! compiler settings), and stores a SHA-256 of its own bytes: an entry that fails the
//! check, or that the engine rejects, is rebuilt, never trusted.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use sha2::{Digest, Sha256};
use tracing::{debug, warn};
use wasmtime::component::Component;
use wasmtime::Engine;

/// Length of the checksum that prefixes every cache entry.
const CHECKSUM_LEN: usize = 32;

/// How a component was obtained.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CacheOutcome {
    /// Loaded from a valid cache entry.
    Hit,
    /// Compiled; no entry existed (or caching is off).
    Compiled,
    /// Compiled because the entry was unusable, for the reason given.
    Rebuilt(String),
}

/// A directory of compiled components, or none (always compile).
#[derive(Clone, Debug)]
pub(crate) struct CompileCache {
    /// Where entries live; `None` disables caching.
    dir: Option<PathBuf>,
}

impl CompileCache {
    /// A cache in `dir`, created on first write.
    #[cfg(test)]
    pub(crate) fn new(dir: PathBuf) -> Self {
        CompileCache { dir: Some(dir) }
    }

    /// A cache in `dir`, or none.
    pub(crate) fn at(dir: Option<PathBuf>) -> Self {
        CompileCache { dir }
    }

    /// Loads the component at `path`, from the cache when a valid entry exists.
    pub(crate) fn load(
        &self,
        engine: &Engine,
        path: &Path,
    ) -> anyhow::Result<(Component, CacheOutcome)> {
        let wasm = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        self.load_bytes(engine, path, &wasm)
    }

    /// Loads component bytes (`path` names them in reports), from the cache when a
    /// valid entry exists.
    pub(crate) fn load_bytes(
        &self,
        engine: &Engine,
        path: &Path,
        wasm: &[u8],
    ) -> anyhow::Result<(Component, CacheOutcome)> {
        self.load_digested(engine, path, wasm, &digest(wasm))
    }

    /// As [`CompileCache::load_bytes`], for bytes whose [`digest`] is known.
    pub(crate) fn load_digested(
        &self,
        engine: &Engine,
        path: &Path,
        wasm: &[u8],
        digest: &str,
    ) -> anyhow::Result<(Component, CacheOutcome)> {
        let Some(dir) = &self.dir else {
            return Ok((compile(engine, wasm, path)?, CacheOutcome::Compiled));
        };
        let entry = dir.join(format!("{}.cwasm", cache_key(engine, digest)));
        let outcome = match std::fs::read(&entry) {
            Ok(bytes) => match deserialize_checked(engine, &bytes) {
                Ok(component) => {
                    debug!(plugin = %path.display(), entry = %entry.display(), "compile cache hit");
                    return Ok((component, CacheOutcome::Hit));
                }
                Err(reason) => {
                    warn!(plugin = %path.display(), entry = %entry.display(), "discarding cache entry: {reason}");
                    CacheOutcome::Rebuilt(reason)
                }
            },
            Err(_) => CacheOutcome::Compiled,
        };
        let component = compile(engine, wasm, path)?;
        if let Err(error) = store(&entry, &component) {
            warn!(entry = %entry.display(), "could not write compile cache entry: {error:#}");
        }
        Ok((component, outcome))
    }
}

fn compile(engine: &Engine, wasm: &[u8], path: &Path) -> anyhow::Result<Component> {
    Component::new(engine, wasm)
        .map_err(anyhow::Error::from)
        .with_context(|| format!("{} is not a valid WebAssembly component", path.display()))
}

/// SHA-256 of a component's bytes, hex: what names it in the cache and in a run's
/// journal.
pub(crate) fn digest(wasm: &[u8]) -> String {
    hex::encode(Sha256::digest(wasm))
}

/// The cache entry's name: the component's digest under this engine's settings.
fn cache_key(engine: &Engine, digest: &str) -> String {
    let mut engine_hash = std::collections::hash_map::DefaultHasher::new();
    engine
        .precompile_compatibility_hash()
        .hash(&mut engine_hash);
    let mut key = Sha256::new();
    key.update(engine_hash.finish().to_le_bytes());
    key.update(digest.as_bytes());
    hex::encode(key.finalize())
}

fn deserialize_checked(engine: &Engine, bytes: &[u8]) -> Result<Component, String> {
    if bytes.len() < CHECKSUM_LEN {
        return Err("entry is truncated".into());
    }
    let (checksum, artifact) = bytes.split_at(CHECKSUM_LEN);
    if Sha256::digest(artifact).as_slice() != checksum {
        return Err("entry checksum does not match (corrupt or partly written)".into());
    }
    // SAFETY: `Component::deserialize` requires bytes produced by `serialize` of a
    // compatible engine and not modified since. The checksum above proves the bytes
    // are exactly what this process family wrote to a per-user cache directory, the
    // key covers the engine's compatibility hash, and wasmtime re-checks the header.
    #[allow(unsafe_code)]
    let component = unsafe { Component::deserialize(engine, artifact) };
    component.map_err(|e| format!("engine rejected the entry: {e}"))
}

fn store(entry: &Path, component: &Component) -> anyhow::Result<()> {
    let dir = entry.parent().context("cache entry has no directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let artifact = component.serialize()?;
    let mut bytes = Vec::with_capacity(CHECKSUM_LEN + artifact.len());
    bytes.extend_from_slice(&Sha256::digest(&artifact));
    bytes.extend_from_slice(&artifact);
    // Write then rename, so a reader never sees half an entry.
    let temp = tempfile::NamedTempFile::new_in(dir)?;
    std::fs::write(temp.path(), &bytes)?;
    temp.persist(entry)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::Sandbox;

    #[test]
    fn compile_cache_hits_and_rebuilds_corrupt_entries() {
        let cache_dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::new(cache_dir.path().to_path_buf());
        let sandbox = Sandbox::new().unwrap();
        // The `files` plugin, as the binary embeds it, in a file of its own.
        let (_, bytes) = crate::builtin::BUILTINS[0];
        let component_dir = tempfile::tempdir().unwrap();
        let files = component_dir.path().join("files.wasm");
        std::fs::write(&files, bytes).unwrap();
        assert_eq!(
            cache.load(sandbox.engine(), &files).unwrap().1,
            CacheOutcome::Compiled
        );
        assert_eq!(
            cache.load(sandbox.engine(), &files).unwrap().1,
            CacheOutcome::Hit
        );

        let entry = std::fs::read_dir(cache_dir.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let mut bytes = std::fs::read(&entry).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        std::fs::write(&entry, &bytes).unwrap();
        let (component, outcome) = cache.load(sandbox.engine(), &files).unwrap();
        assert!(
            matches!(outcome, CacheOutcome::Rebuilt(ref why) if why.contains("checksum")),
            "{outcome:?}"
        );
        sandbox.prepare(&component).unwrap();
        assert_eq!(
            cache.load(sandbox.engine(), &files).unwrap().1,
            CacheOutcome::Hit,
            "the rebuilt entry is good"
        );

        std::fs::write(&entry, b"short").unwrap();
        assert!(matches!(
            cache.load(sandbox.engine(), &files).unwrap().1,
            CacheOutcome::Rebuilt(_)
        ));
    }
}
