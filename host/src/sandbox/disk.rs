//! Disk bounds: `capabilities.max_write_mb` (bytes one call may write to files) and
//! `capabilities.scratch_mb` (the size of the scratch directory).
//!
//! wasmtime-wasi has no hook for file writes, so the linker's `wasi:filesystem`
//! functions that write are shadowed by thin wrappers that charge the bytes *before*
//! delegating to wasmtime-wasi's own implementation: `descriptor.write` directly, and
//! `write-via-stream` / `append-via-stream` by wrapping the stream they return in a
//! [`CountingStream`], so `output-stream.write`, `blocking-write-and-flush`, the
//! zero-writes and `splice` into a file are all charged at one place. A write that
//! would pass a budget is refused (the guest sees `insufficient-space`) and the whole
//! call then fails with an error naming the key.
//!
//! Which descriptors lie in the scratch directory is learnt from `get-directories`
//! (the `/scratch` preopen) and `open-at` (a child of a scratch descriptor); a file
//! opened there whose write crosses `scratch_mb` is removed after the call. Handle
//! numbers are reused after a close, so a reused number may be charged to scratch as
//! well: the error is on the strict side. Overhead: one map lookup and a mutex per
//! write call (not per byte).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use wasmtime::component::{Linker, LinkerInstance, Resource};
use wasmtime_wasi::filesystem::WasiFilesystemView as _;
use wasmtime_wasi::p2::bindings::filesystem::preopens::Host as _;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self, Descriptor, DescriptorFlags, ErrorCode, HostDescriptor as _, OpenFlags, PathFlags,
};
use wasmtime_wasi::WasiView;
use wasmtime_wasi_io::poll::Pollable;
use wasmtime_wasi_io::streams::{DynOutputStream, OutputStream, StreamError, StreamResult};

use crate::policy::SCRATCH_GUEST_PATH;

/// What the charging wrappers need of a call's store state: its WASI view (the
/// filesystem and the resource table) and the call's budgets.
pub(crate) trait DiskView: WasiView + 'static {
    /// The call's disk budgets.
    fn disk(&self) -> &DiskBudget;
}

/// Which budget a refused write passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DiskLimit {
    /// `capabilities.max_write_mb`.
    Write,
    /// `capabilities.scratch_mb`.
    Scratch,
}

/// One call's disk budgets, shared with the counting streams it hands out.
#[derive(Clone)]
pub(crate) struct DiskBudget {
    state: Arc<Mutex<DiskState>>,
}

struct DiskState {
    /// Bytes the call may still write to any file.
    write_left: u64,
    /// The scratch directory and its size limit (`None`: no scratch).
    scratch: Option<(PathBuf, u64)>,
    /// Bytes the scratch directory may still grow by: measured at the call's first
    /// write into it, so calls that do not write there never walk it.
    scratch_left: Option<u64>,
    /// Descriptors inside the scratch directory: handle → path relative to it.
    scratch_files: HashMap<u32, PathBuf>,
    /// The first budget a write passed.
    exceeded: Option<DiskLimit>,
    /// Scratch files whose write crossed `scratch_mb`: removed after the call.
    partial: Vec<PathBuf>,
}

impl DiskBudget {
    /// Budgets of `write_bytes` for the call and, for `scratch` = (directory, limit),
    /// the limit less what the directory already holds.
    pub(crate) fn new(write_bytes: u64, scratch: Option<(PathBuf, u64)>) -> Self {
        DiskBudget {
            state: Arc::new(Mutex::new(DiskState {
                write_left: write_bytes,
                scratch,
                scratch_left: None,
                scratch_files: HashMap::new(),
                exceeded: None,
                partial: Vec::new(),
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DiskState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Charges `bytes` written through descriptor `rep`; refuses (and remembers) a
    /// write that would pass a budget.
    fn charge(
        &self,
        rep: Option<u32>,
        scratch_path: Option<&Path>,
        bytes: u64,
    ) -> Result<(), DiskLimit> {
        let mut state = self.lock();
        let in_scratch =
            scratch_path.is_some() || rep.is_some_and(|r| state.scratch_files.contains_key(&r));
        if in_scratch && state.scratch_left.is_none() {
            state.scratch_left = state
                .scratch
                .as_ref()
                .map(|(dir, limit)| limit.saturating_sub(used_bytes(dir)));
        }
        let refused = if bytes > state.write_left {
            Some(DiskLimit::Write)
        } else if in_scratch && state.scratch_left.is_some_and(|left| bytes > left) {
            Some(DiskLimit::Scratch)
        } else {
            None
        };
        if let Some(limit) = refused {
            state.exceeded.get_or_insert(limit);
            if limit == DiskLimit::Scratch {
                let path = scratch_path
                    .map(Path::to_path_buf)
                    .or_else(|| rep.and_then(|r| state.scratch_files.get(&r).cloned()));
                state.partial.extend(path);
            }
            return Err(limit);
        }
        state.write_left -= bytes;
        if in_scratch {
            if let Some(left) = state.scratch_left.as_mut() {
                *left -= bytes;
            }
        }
        Ok(())
    }

    /// The budget a write passed, if one did.
    pub(crate) fn exceeded(&self) -> Option<DiskLimit> {
        self.lock().exceeded
    }

    /// Removes the scratch files whose writes crossed `scratch_mb` (paths relative to
    /// `scratch`).
    pub(crate) fn remove_partial(&self, scratch: &Path) {
        for relative in self.lock().partial.drain(..) {
            let _ = std::fs::remove_file(scratch.join(relative));
        }
    }

    fn scratch_path(&self, rep: u32) -> Option<PathBuf> {
        self.lock().scratch_files.get(&rep).cloned()
    }

    fn mark_scratch(&self, rep: u32, path: PathBuf) {
        self.lock().scratch_files.insert(rep, path);
    }
}

/// Bytes used under `dir` (regular files, recursively; symlinks not followed).
fn used_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => used_bytes(&entry.path()),
            Ok(t) if t.is_file() => entry.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// A file output stream that charges every write to the call's budgets first.
struct CountingStream {
    inner: DynOutputStream,
    budget: DiskBudget,
    /// The file's path relative to the scratch directory, when it is in it.
    scratch_path: Option<PathBuf>,
}

#[async_trait::async_trait]
impl Pollable for CountingStream {
    async fn ready(&mut self) {
        self.inner.ready().await;
    }
}

#[async_trait::async_trait]
impl OutputStream for CountingStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.budget
            .charge(None, self.scratch_path.as_deref(), bytes.len() as u64)
            .map_err(|limit| {
                StreamError::LastOperationFailed(wasmtime::Error::msg(refusal(limit)))
            })?;
        self.inner.write(bytes)
    }

    fn flush(&mut self) -> StreamResult<()> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        self.inner.check_write()
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await;
    }
}

fn refusal(limit: DiskLimit) -> &'static str {
    match limit {
        DiskLimit::Write => "write refused: capabilities.max_write_mb reached",
        DiskLimit::Scratch => "write refused: capabilities.scratch_mb reached",
    }
}

/// The stream wasmtime-wasi opened, swapped in the table for a [`CountingStream`]
/// around it.
fn counting_stream<T: DiskView>(
    state: &mut T,
    opened: wasmtime_wasi::p2::FsResult<Resource<DynOutputStream>>,
    scratch_path: Option<PathBuf>,
) -> wasmtime::Result<(Result<Resource<DynOutputStream>, ErrorCode>,)> {
    let stream = match opened {
        Ok(stream) => stream,
        Err(error) => {
            return Ok((Err(types::Host::convert_error_code(
                &mut state.filesystem(),
                error,
            )?),))
        }
    };
    let inner = state.ctx().table.delete(stream)?;
    let counting: DynOutputStream = Box::new(CountingStream {
        inner,
        budget: state.disk().clone(),
        scratch_path,
    });
    Ok((Ok(state.ctx().table.push(counting)?),))
}

const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";
const FILESYSTEM_PREOPENS: &str = "wasi:filesystem/preopens@0.2.12";

/// Shadows the writing `wasi:filesystem` functions of `linker` (which must already
/// hold wasmtime-wasi's) with the charging wrappers.
pub(crate) fn add_to_linker<T: DiskView>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    shadow_get_directories(linker)?;
    let mut types = linker.instance(FILESYSTEM_TYPES)?;
    shadow_open_at(&mut types)?;
    types.func_wrap_async(
        "[method]descriptor.write",
        |mut store, (fd, buffer, offset): (Resource<Descriptor>, Vec<u8>, u64)| {
            Box::new(async move {
                let state = store.data_mut();
                if state
                    .disk()
                    .charge(Some(fd.rep()), None, buffer.len() as u64)
                    .is_err()
                {
                    return Ok((Err(ErrorCode::InsufficientSpace),));
                }
                let mut view = state.filesystem();
                let result = match view.write(fd, buffer, offset).await {
                    Ok(written) => Ok(written),
                    Err(error) => Err(types::Host::convert_error_code(
                        &mut state.filesystem(),
                        error,
                    )?),
                };
                Ok((result,))
            })
        },
    )?;
    types.func_wrap(
        "[method]descriptor.write-via-stream",
        |mut store, (fd, offset): (Resource<Descriptor>, u64)| {
            let state = store.data_mut();
            let scratch_path = state.disk().scratch_path(fd.rep());
            let opened = state.filesystem().write_via_stream(fd, offset);
            counting_stream(state, opened, scratch_path)
        },
    )?;
    types.func_wrap(
        "[method]descriptor.append-via-stream",
        |mut store, (fd,): (Resource<Descriptor>,)| {
            let state = store.data_mut();
            let scratch_path = state.disk().scratch_path(fd.rep());
            let opened = state.filesystem().append_via_stream(fd);
            counting_stream(state, opened, scratch_path)
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Shadows `get-directories`, to mark the scratch directory's descriptor as the root
/// of the scratch tree.
fn shadow_get_directories<T: DiskView>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    let mut preopens = linker.instance(FILESYSTEM_PREOPENS)?;
    preopens.func_wrap("get-directories", |mut store, (): ()| {
        let state = store.data_mut();
        let dirs = state.filesystem().get_directories()?;
        for (dir, path) in &dirs {
            if path == SCRATCH_GUEST_PATH {
                state.disk().mark_scratch(dir.rep(), PathBuf::new());
            }
        }
        Ok((dirs,))
    })
}

/// Shadows `open-at`, to mark what is opened in the scratch tree with its path there.
fn shadow_open_at<T: DiskView>(types: &mut LinkerInstance<'_, T>) -> wasmtime::Result<()> {
    types.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store,
         (fd, path_flags, path, open_flags, flags): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )| {
            Box::new(async move {
                let state = store.data_mut();
                let parent = state.disk().scratch_path(fd.rep());
                let mut view = state.filesystem();
                let opened = view
                    .open_at(fd, path_flags, path.clone(), open_flags, flags)
                    .await;
                let result = match opened {
                    Ok(child) => {
                        if let Some(parent) = parent {
                            state.disk().mark_scratch(child.rep(), parent.join(&path));
                        }
                        Ok(child)
                    }
                    Err(error) => Err(types::Host::convert_error_code(
                        &mut state.filesystem(),
                        error,
                    )?),
                };
                Ok((result,))
            })
        },
    )
}
