//! Per-call resource limits that need more than a number: a memory cap that remembers
//! it refused a growth, and stdout/stderr pipes that refuse to grow past their cap.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use wasmtime::ResourceLimiter;

/// Caps a guest's linear memory and table growth, remembering whether it refused one so
/// a trap that follows (Rust aborts on allocation failure) is reported as the limit.
#[derive(Debug)]
pub(crate) struct MemoryCap {
    /// `capabilities.memory_mb` in bytes; a growth past it is refused.
    max_bytes: usize,
    /// Set once a memory growth was refused.
    refused: bool,
    /// Bytes of linear memory the call's instance holds now (every memory's size).
    in_use: usize,
    /// The most it held at once.
    peak: usize,
}

/// Table growth limit (elements). Tables hold function references; no honest plugin
/// needs millions of them, and each costs host memory outside the linear-memory cap.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

impl MemoryCap {
    /// A cap of `max_bytes` of linear memory.
    pub(crate) fn new(max_bytes: usize) -> Self {
        MemoryCap {
            max_bytes,
            refused: false,
            in_use: 0,
            peak: 0,
        }
    }

    /// Whether a memory growth was refused during this call.
    pub(crate) fn refused(&self) -> bool {
        self.refused
    }

    /// The most linear memory the call's instance held at once, in bytes (its
    /// memories' initial sizes and every growth allowed).
    pub(crate) fn peak_bytes(&self) -> u64 {
        self.peak as u64
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allow = desired <= self.max_bytes && maximum.is_none_or(|max| desired <= max);
        if allow {
            // A new memory comes here with `current` 0 and its initial size.
            self.in_use = self.in_use.saturating_add(desired.saturating_sub(current));
            self.peak = self.peak.max(self.in_use);
        } else {
            self.refused = true;
        }
        Ok(allow)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS && maximum.is_none_or(|max| desired <= max))
    }
}

/// An in-memory stdout or stderr with a hard cap, checked before bytes are copied.
///
/// A write that would pass the cap is refused with an error (the guest sees a broken
/// stream) and the overflow is remembered, so the call is reported as output too large.
#[derive(Clone, Debug)]
pub(crate) struct CappedPipe {
    /// `capabilities.max_output_kb` in bytes.
    capacity: usize,
    /// What the guest wrote, up to `capacity`.
    buffer: Arc<Mutex<Vec<u8>>>,
    /// Set once a write was refused for lack of room.
    overflowed: Arc<AtomicBool>,
}

impl CappedPipe {
    /// A pipe holding at most `capacity` bytes.
    pub(crate) fn new(capacity: usize) -> Self {
        CappedPipe {
            capacity,
            buffer: Arc::default(),
            overflowed: Arc::default(),
        }
    }

    /// Whether the guest tried to write past the cap.
    pub(crate) fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::Relaxed)
    }

    /// What was written, lossily decoded.
    pub(crate) fn contents(&self) -> String {
        String::from_utf8_lossy(&self.buffer.lock().expect("pipe poisoned")).into_owned()
    }
}

impl AsyncWrite for CappedPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let mut buffer = self.buffer.lock().expect("pipe poisoned");
        if buf.len() > self.capacity - buffer.len() {
            self.overflowed.store(true, Ordering::Relaxed);
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "output limit reached (capabilities.max_output_kb)",
            )));
        }
        buffer.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl wasmtime_wasi::cli::IsTerminal for CappedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl wasmtime_wasi::cli::StdoutStream for CappedPipe {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn pipe_refuses_past_capacity_and_keeps_what_fit() {
        let pipe = CappedPipe::new(8);
        let mut writer = pipe.clone();
        writer.write_all(b"12345").await.unwrap();
        assert!(writer.write_all(b"6789").await.is_err());
        assert!(pipe.overflowed());
        assert_eq!(pipe.contents(), "12345");
    }

    #[test]
    fn memory_cap_remembers_refusal() {
        let mut cap = MemoryCap::new(1 << 20);
        assert!(cap.memory_growing(0, 1 << 20, None).unwrap());
        assert!(!cap.refused());
        assert!(!cap.memory_growing(0, (1 << 20) + 1, None).unwrap());
        assert!(cap.refused());
    }
}
