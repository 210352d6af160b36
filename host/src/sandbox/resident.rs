//! Keeping a finished instance's memory resident for the next instance in its slot.
//!
//! A pooled memory slot is reset in place between instances (see `engine`): wasmtime
//! finds the pages the last instance wrote with Linux's `PAGEMAP_SCAN` and copies
//! them back from the module's image, so they stay mapped and the next instance takes
//! no page faults on them. But the scan stops at its 32nd run of written pages
//! (wasmtime 48's `reset_with_pagemap`, `MAX_REGIONS`), and everything after that
//! point is given back to the kernel: the next instance faults it in again, read and
//! write, one page fault at a time, on its caller's path. An interpreter's call
//! writes a few hundred pages scattered across its heap: CPython's `run_python` call
//! leaves about 70 runs, so every call faulted in most of its working set (about 330
//! faults, 0.6 ms of a 1.4 ms call).
//!
//! Before a finished store is dropped, [`GuestMemory::keep_resident`] joins the runs
//! separated by the smallest gaps until at most [`RESET_RUNS`] are left, by faulting
//! the gap pages in as written (`MADV_POPULATE_WRITE`: their contents do not change).
//! wasmtime's scan then reaches the end of the memory, copies every written page back
//! from the image (the gap pages too, so nothing of the finished call survives: the
//! reset is as complete as before) and gives nothing back to the kernel. The pages a
//! call touches stay mapped from one instance to the next; after the first few calls
//! the joined runs cover the working set and nothing more needs joining.
//!
//! What this costs: the joined pages are copied back at every reset, as the written
//! ones are, up to the pool's `linear_memory_keep_resident` per memory (past it,
//! wasmtime gives the rest back as before); nothing is joined when the written pages
//! and the gaps together would pass that much, so a guest that writes every other page
//! of a large memory makes the host do no joining work. It is done where the next instance is
//! made ahead (`ready`), off the caller's path. Only the memory a call's result was
//! lifted from is joined ([`InPlace`] records where wasmtime lifted it: the component
//! model offers no other way to a component's memory); tables stay within one run.
//!
//! [`InPlace`] implements wasmtime's `ComponentType` and `Lift` by forwarding to the
//! wrapped type: those traits' items are hidden from wasmtime's documentation (its
//! derive macros use them), so a wasmtime upgrade may have to follow them.

use std::os::fd::AsRawFd;
use std::sync::OnceLock;

use wasmtime::component::__internal::{CanonicalAbiInfo, InstanceType, InterfaceType, LiftContext};
use wasmtime::component::{ComponentType, Lift};

use super::engine::KEEP_RESIDENT_MEMORY;

/// The most runs of written pages wasmtime 48's in-place reset copies back before it
/// gives the rest of the memory to the kernel (its `MAX_REGIONS`).
const RESET_RUNS: usize = 32;

/// Runs reported by one `PAGEMAP_SCAN`; a memory with more is scanned again from
/// where the last scan stopped.
const SCAN_RUNS: usize = 1024;

/// The accessible part of one linear memory, in the host's address space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct GuestMemory {
    /// Its first byte.
    start: usize,
    /// One past its last accessible byte.
    end: usize,
}

/// A value lifted from a guest's linear memory, with where that memory lies (as
/// wasmtime lifted it, so exactly the guest's memory), for its store's refill.
pub(super) struct InPlace<T> {
    /// The value, lifted as `T` is.
    pub(super) value: T,
    /// The memory it was lifted from; `None` where its type needs none.
    pub(super) memory: Option<GuestMemory>,
}

impl<T> InPlace<T> {
    fn lifted(cx: &LiftContext<'_>, value: T) -> InPlace<T> {
        let memory = cx.memory();
        let memory = (!memory.is_empty()).then(|| GuestMemory {
            start: memory.as_ptr() as usize,
            end: memory.as_ptr() as usize + memory.len(),
        });
        InPlace { value, memory }
    }
}

// SAFETY: `InPlace<T>` is `T` in the component model, to the last detail: every item
// forwards to `T`'s.
#[allow(unsafe_code)]
unsafe impl<T: ComponentType> ComponentType for InPlace<T> {
    type Lower = T::Lower;
    const ABI: CanonicalAbiInfo = T::ABI;
    const MAY_REQUIRE_REALLOC: bool = T::MAY_REQUIRE_REALLOC;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        T::typecheck(ty, types)
    }
}

// SAFETY: lifts exactly as `T` does, and only reads where the lifting context's
// memory is.
#[allow(unsafe_code)]
unsafe impl<T: Lift> Lift for InPlace<T> {
    fn linear_lift_from_flat(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        src: &Self::Lower,
    ) -> wasmtime::Result<Self> {
        let value = T::linear_lift_from_flat(cx, ty, src)?;
        Ok(InPlace::lifted(cx, value))
    }

    fn linear_lift_from_memory(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        bytes: &[u8],
    ) -> wasmtime::Result<Self> {
        let value = T::linear_lift_from_memory(cx, ty, bytes)?;
        Ok(InPlace::lifted(cx, value))
    }
}

/// What [`GuestMemory::keep_resident`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Joined {
    /// Runs of written pages the memory had.
    pub(super) runs: usize,
    /// Pages faulted in to join them.
    pub(super) pages: usize,
}

impl GuestMemory {
    /// Joins the memory's runs of written pages until at most [`RESET_RUNS`] are
    /// left (see the module's documentation). Call it only on a store whose
    /// instance no longer runs: it is about to be dropped and its slot reset.
    pub(super) fn keep_resident(&self) -> Joined {
        let Some(runs) = self.written_runs() else {
            return Joined::default();
        };
        let mut joined = Joined {
            runs: runs.len(),
            pages: 0,
        };
        for (start, len) in gaps_to_fill(&runs, RESET_RUNS, KEEP_RESIDENT_MEMORY) {
            if populate_write(start, len) {
                joined.pages += len / page_size();
            }
        }
        joined
    }

    /// The runs of pages `PAGEMAP_SCAN` reports as wasmtime's reset looks for them
    /// (present, written, neither the zero page nor a file's page), as
    /// `(start, end)` addresses; `None` where the kernel has no `PAGEMAP_SCAN` (before
    /// 6.7: wasmtime then resets by its other path, which this does not help).
    fn written_runs(&self) -> Option<Vec<(usize, usize)>> {
        let pagemap = pagemap()?;
        let mut runs = Vec::new();
        let mut found = vec![PageRegion::default(); SCAN_RUNS];
        let mut from = self.start;
        while from < self.end {
            let mut scan = ScanArg {
                size: std::mem::size_of::<ScanArg>() as u64,
                flags: 0,
                start: from as u64,
                end: self.end as u64,
                walk_end: 0,
                vec: found.as_mut_ptr() as u64,
                vec_len: SCAN_RUNS as u64,
                max_pages: 0,
                category_inverted: PAGE_IS_PFNZERO | PAGE_IS_FILE,
                category_mask: PAGE_IS_WRITTEN | PAGE_IS_PRESENT | PAGE_IS_PFNZERO | PAGE_IS_FILE,
                category_anyof_mask: 0,
                return_mask: 0,
            };
            // SAFETY: PAGEMAP_SCAN reads `scan` and writes at most `vec_len` regions
            // into `found`, which outlives the call; it reads only page tables.
            #[allow(unsafe_code)]
            let count = unsafe { libc::ioctl(pagemap.as_raw_fd(), PAGEMAP_SCAN, &mut scan) };
            let count = usize::try_from(count).ok()?;
            let walked_to = usize::try_from(scan.walk_end).ok()?;
            runs.extend(
                found[..count.min(SCAN_RUNS)]
                    .iter()
                    .map(|region| (region.start as usize, region.end as usize)),
            );
            if walked_to <= from {
                break;
            }
            from = walked_to;
        }
        // Runs split only by the end of one scan and the start of the next are one.
        runs.dedup_by(|next, last| {
            let touching = last.1 == next.0;
            if touching {
                last.1 = next.1;
            }
            touching
        });
        Some(runs)
    }
}

/// The gaps between `runs` (sorted, disjoint `(start, end)` ranges) to fill so that
/// at most `most` runs are left, as `(start, len)`: the smallest gaps, so that the
/// fewest bytes are added. None when the runs and the gaps together would pass
/// `budget` bytes: wasmtime's reset keeps at most that much resident anyway, so
/// joining more would only spend work a guest chose (a call that writes every other
/// page of a large memory) without sparing the next instance anything.
fn gaps_to_fill(runs: &[(usize, usize)], most: usize, budget: usize) -> Vec<(usize, usize)> {
    if runs.len() <= most {
        return Vec::new();
    }
    let mut gaps: Vec<(usize, usize)> = runs
        .windows(2)
        .map(|pair| (pair[0].1, pair[1].0 - pair[0].1))
        .collect();
    gaps.sort_by_key(|&(start, len)| (len, start));
    gaps.truncate(runs.len() - most);
    let written: usize = runs.iter().map(|(start, end)| end - start).sum();
    let filled: usize = gaps.iter().map(|&(_, len)| len).sum();
    if written + filled > budget {
        return Vec::new();
    }
    gaps.sort_unstable();
    gaps
}

/// Faults `len` bytes at `start` in as written, without changing what they hold;
/// whether the kernel did.
fn populate_write(start: usize, len: usize) -> bool {
    // SAFETY: the range lies between two runs of pages of one accessible linear
    // memory whose instance no longer runs, so it is mapped read-write; populating
    // it for writing copies each page's contents into a private page and changes no
    // byte of it.
    #[allow(unsafe_code)]
    let done = unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) };
    done == 0
}

/// `/proc/self/pagemap`, opened once.
fn pagemap() -> Option<&'static std::fs::File> {
    static PAGEMAP: OnceLock<Option<std::fs::File>> = OnceLock::new();
    PAGEMAP
        .get_or_init(|| std::fs::File::open("/proc/self/pagemap").ok())
        .as_ref()
}

fn page_size() -> usize {
    rustix::param::page_size()
}

// The `PAGEMAP_SCAN` ioctl (linux/fs.h, Linux 6.7).
const PAGEMAP_SCAN: libc::c_ulong = 0xC060_6610;
const PAGE_IS_WRITTEN: u64 = 1 << 1;
const PAGE_IS_FILE: u64 = 1 << 2;
const PAGE_IS_PRESENT: u64 = 1 << 3;
const PAGE_IS_PFNZERO: u64 = 1 << 5;

/// `struct pm_scan_arg`.
#[repr(C)]
struct ScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// `struct page_region`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest gaps are filled, just enough of them, in address order.
    #[test]
    fn the_smallest_gaps_are_filled_until_few_enough_runs_are_left() {
        let runs = [(0, 10), (12, 20), (50, 60), (61, 70), (100, 110)];
        assert_eq!(gaps_to_fill(&runs, 5, 1000), vec![]);
        assert_eq!(gaps_to_fill(&runs, 3, 1000), vec![(10, 2), (60, 1)]);
        assert_eq!(
            gaps_to_fill(&runs, 1, 1000),
            vec![(10, 2), (20, 30), (60, 1), (70, 30)]
        );
    }

    /// Runs and gaps past the budget (what the reset keeps resident) are not joined:
    /// a call writing every other page of a large memory costs no joining work.
    #[test]
    fn nothing_is_joined_past_what_the_reset_keeps_resident() {
        let runs = [(0, 10), (12, 20), (50, 60), (61, 70), (100, 110)];
        // 47 bytes written; joining to 3 runs adds 3.
        assert_eq!(gaps_to_fill(&runs, 3, 50), vec![(10, 2), (60, 1)]);
        assert_eq!(gaps_to_fill(&runs, 3, 49), vec![]);
        let alternate: Vec<(usize, usize)> = (0..10_000).map(|i| (2 * i, 2 * i + 1)).collect();
        assert_eq!(gaps_to_fill(&alternate, RESET_RUNS, 8_000), vec![]);
    }

    /// In a real anonymous mapping, written pages are reported in runs as wasmtime's
    /// reset sees them, and joining leaves at most `RESET_RUNS` runs without changing
    /// a byte.
    #[test]
    fn scattered_writes_are_joined_into_few_runs_and_keep_their_contents() {
        let page = page_size();
        let pages = 400;
        // SAFETY: a fresh private anonymous mapping, used only through `memory` below
        // and unmapped at the end of the test.
        #[allow(unsafe_code)]
        let base = unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                (pages + 2) * page,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(base, libc::MAP_FAILED);
            let inner = (base as usize + page) as *mut libc::c_void;
            assert_eq!(
                libc::mprotect(inner, pages * page, libc::PROT_READ | libc::PROT_WRITE),
                0
            );
            base as usize
        };
        let start = base + page;
        // SAFETY: the read-write pages of the mapping made above.
        #[allow(unsafe_code)]
        let memory = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, pages * page) };
        // Every third page written: about 133 runs of one page.
        for index in (0..pages).step_by(3) {
            memory[index * page] = (index % 251) as u8 + 1;
        }
        let found = GuestMemory {
            start,
            end: start + pages * page,
        };
        if pagemap().is_none() {
            panic!("this test needs /proc/self/pagemap (Linux)");
        }
        let before = found
            .written_runs()
            .expect("PAGEMAP_SCAN (Linux 6.7 or later)");
        assert_eq!(before.len(), pages.div_ceil(3));
        let joined = found.keep_resident();
        assert_eq!(joined.runs, before.len());
        assert!(joined.pages > 0);
        let after = found.written_runs().unwrap();
        assert!(after.len() <= RESET_RUNS, "{} runs left", after.len());
        for index in 0..pages {
            let expected = if index % 3 == 0 {
                (index % 251) as u8 + 1
            } else {
                0
            };
            assert_eq!(memory[index * page], expected, "page {index} changed");
        }
        // SAFETY: the mapping made above, no longer used.
        #[allow(unsafe_code)]
        unsafe {
            libc::munmap(base as *mut libc::c_void, (pages + 2) * page);
        }
    }
}
