// SPDX-License-Identifier: GPL-2.0

//! Gigantic-page clearing: clear a 1 GiB physically contiguous range with
//! several kernel workers on CPUs near its memory.
//!
//! The kernel clears a gigantic hugetlb page on one thread
//! (`folio_zero_user()` → `clear_contig_highpages()` → `clear_pages()`).
//! tierkit allocates the same kind of range ([`GiganticRange`], from
//! `alloc_contig_pages()`), splits it into chunks
//! ([`ChunkPlan`](crate::chunks::ChunkPlan)), and lets N workers claim chunks
//! from an atomic cursor and clear them with the kernel's own
//! `clear_pages()` ([`pool`]). Where the workers run is the
//! [`Placement`]: local to the memory, remote, or anywhere.
//!
//! Entry points:
//! - allocate, then clear in parallel: [`GiganticRange::alloc`], [`clear`];
//! - `TK_IOC_CLEAR_BENCH`: [`bench::bench`];
//! - the gigantic mode of `/dev/tierkit` (`TK_IOC_SET_GIGANTIC`, then
//!   `mmap`): [`gigantic::GiganticMode`];
//! - the pre-cleared pool that gigantic faults take from:
//!   [`ready::GiganticPool`].

pub(crate) mod bench;
pub(crate) mod gigantic;
pub(crate) mod placement;
pub(crate) mod pool;
pub(crate) mod range;
pub(crate) mod ready;
pub(crate) mod refill;
mod tests;

pub(crate) use placement::{CpuSet, Placement};
pub(crate) use range::{movable_range_in, GiganticRange};

use crate::chunks::{self, AutoThreads, PAGE_BYTES};
use crate::interleave::MAX_NUMNODES;
use crate::shim;
use crate::uapi;
use kernel::{
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};

/// Pages of the probe slice that `auto` clears with 1, 2, ... workers:
/// 64 MiB, or the whole range if it is smaller.
pub(crate) const AUTO_PROBE_PAGES: u64 = 16384;

/// How many workers to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Threads {
    /// Probe: add workers while bandwidth rises (see [`AutoThreads`]),
    /// once per node and placement (see [`AUTO_CHOICE`]).
    Auto,
    /// Exactly this many, 1..=eligible CPUs.
    Fixed(u32),
}

impl Threads {
    /// The `threads` ABI value: [`uapi::TK_THREADS_AUTO`] or a count. Zero
    /// is `EINVAL`; an upper bound needs the node and is checked by
    /// [`clear`].
    pub(crate) fn from_uapi(v: u32) -> Result<Self> {
        match v {
            uapi::TK_THREADS_AUTO => Ok(Self::Auto),
            0 => Err(EINVAL),
            n => Ok(Self::Fixed(n)),
        }
    }
}

/// Parameters of one parallel clear.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClearParams {
    pub(crate) threads: Threads,
    pub(crate) placement: Placement,
    /// Pages per chunk, 1..=8192 (32 MiB).
    pub(crate) chunk_pages: u32,
}

impl ClearParams {
    /// Parameters from the ABI fields shared by `TkGigantic` and
    /// `TkClearBench`. `EINVAL` for a zero thread count, an unknown
    /// placement, or a chunk that is not a multiple of 4 KiB up to 32 MiB.
    pub(crate) fn from_uapi(threads: u32, placement: u32, chunk_kib: u32) -> Result<Self> {
        Ok(Self {
            threads: Threads::from_uapi(threads)?,
            placement: Placement::from_uapi(placement)?,
            chunk_pages: chunks::chunk_pages_from_kib(chunk_kib).ok_or(EINVAL)?,
        })
    }

    /// `threads` workers, `placement`, default chunk.
    pub(crate) fn new(threads: Threads, placement: Placement) -> Self {
        Self {
            threads,
            placement,
            chunk_pages: chunks::DEFAULT_CHUNK_KIB / 4,
        }
    }
}

/// What [`clear`] did.
pub(crate) struct ClearReport {
    /// Time of the clear itself: from queueing the first worker to the
    /// completion (for `auto`, not counting the probe).
    pub(crate) elapsed_ns: u64,
    /// Bytes cleared.
    pub(crate) bytes: u64,
    /// Workers used.
    pub(crate) workers: u32,
    /// The node whose CPUs ran the workers, -1 for `any`.
    pub(crate) cpu_node: i32,
    /// Each worker's CPU and share.
    pub(crate) pool: pool::PoolReport,
}

/// The `clear_pages()` variant the kernel's alternatives picked on this CPU:
/// "erms" (`rep stosb`), "rep_good" (`rep stosq`) or "unrolled".
pub(crate) fn clear_pages_variant() -> &'static CStr {
    // SAFETY: the shim returns a pointer to a static NUL-terminated string.
    unsafe { CStr::from_char_ptr(shim::tk_clear_pages_variant()) }
}

/// The eligible CPUs for `params` on the memory of `range`, and the worker
/// count: `Fixed` checked against them, `Auto` resolved by probing.
fn resolve(range: &mut GiganticRange, params: &ClearParams) -> Result<(CpuSet, u32)> {
    let set = CpuSet::for_memory(range.nid(), params.placement)?;
    let n = match params.threads {
        Threads::Fixed(n) if n >= 1 && n <= set.len() => n,
        Threads::Fixed(n) => {
            pr_debug!(
                "clear: {} threads, but {} placement for node {} has {} CPUs\n",
                n,
                params.placement.name(),
                range.nid(),
                set.len()
            );
            return Err(EINVAL);
        }
        Threads::Auto => auto_threads(range, &set, params)?,
    };
    Ok((set, n))
}

/// Placements per node in [`AUTO_CHOICE`].
const PLACEMENTS: usize = 3;

/// The `auto` worker count found for each (node, placement), as
/// `(eligible CPUs << 16) | count`; 0 until measured. The answer depends
/// on the memory and the CPUs, not on the clear: it is measured by the
/// first `auto` clear of a node and placement, and again when the
/// placement's number of eligible CPUs changed (CPU hotplug) or the node
/// gained or lost memory ([`forget_auto`], from the node notifier).
static AUTO_CHOICE: [Atomic<u32>; MAX_NUMNODES * PLACEMENTS] =
    [const { Atomic::new(0) }; MAX_NUMNODES * PLACEMENTS];

fn auto_slot(nid: usize, placement: Placement) -> Option<&'static Atomic<u32>> {
    AUTO_CHOICE.get(nid * PLACEMENTS + placement.to_uapi() as usize)
}

/// Forgets the `auto` worker counts of node `nid` (its memory changed).
pub(crate) fn forget_auto(nid: usize) {
    for i in 0..PLACEMENTS {
        if let Some(slot) = AUTO_CHOICE.get(nid * PLACEMENTS + i) {
            slot.store(0, Relaxed);
        }
    }
}

/// The `auto` worker count for `range` and `set`: the one measured for
/// this node and placement, or measured now with [`probe_threads`].
fn auto_threads(range: &mut GiganticRange, set: &CpuSet, params: &ClearParams) -> Result<u32> {
    let key = set.len() << 16;
    let slot = auto_slot(range.nid(), params.placement);
    if let Some(v) = slot.map(|s| s.load(Relaxed)) {
        if v != 0 && v & !0xffff == key && (v & 0xffff) <= set.len() {
            return Ok(v & 0xffff);
        }
    }
    let n = probe_threads(range, set, params.chunk_pages)?;
    if let Some(s) = slot {
        s.store(key | n, Relaxed);
    }
    Ok(n)
}

/// The `auto` thread count for `set`: clears the first
/// [`AUTO_PROBE_PAGES`] of `range` with 1, 2, ... workers, as long as each
/// added worker raises the bandwidth by more than 5%.
fn probe_threads(range: &mut GiganticRange, set: &CpuSet, chunk_pages: u32) -> Result<u32> {
    let probe = range.nr_pages().min(AUTO_PROBE_PAGES);
    // Warm-up, not measured: first touch of the probe slice.
    // SAFETY: `&mut range` gives exclusive use of its memory.
    unsafe { pool::clear_range(range.as_ptr(), probe, &set.cpus()[..1], chunk_pages, None)? };
    let mut auto = AutoThreads::new(set.len());
    while let Some(n) = auto.next() {
        // SAFETY: as above.
        let r = unsafe {
            pool::clear_range(
                range.as_ptr(),
                probe,
                &set.cpus()[..n as usize],
                chunk_pages,
                None,
            )?
        };
        auto.record(n, chunks::mbps(probe * PAGE_BYTES, r.elapsed_ns));
    }
    Ok(auto.best())
}

/// Clears all of `range` in parallel per `params`.
///
/// Errors: `EINVAL` for a thread count of 0 or above the eligible CPUs, or
/// a placement that no CPU satisfies; `ENOMEM`; `EIO` if a worker failed.
pub(crate) fn clear(range: &mut GiganticRange, params: &ClearParams) -> Result<ClearReport> {
    clear_with_fault(range, params, None)
}

/// [`clear`] with the pool's test hook: worker `fail_worker` fails.
pub(crate) fn clear_with_fault(
    range: &mut GiganticRange,
    params: &ClearParams,
    fail_worker: Option<u32>,
) -> Result<ClearReport> {
    let (set, n) = resolve(range, params)?;
    // SAFETY: `&mut range` gives exclusive use of its `nr_pages` pages,
    // mapped in the direct map at `as_ptr()`.
    let pool = unsafe {
        pool::clear_range(
            range.as_ptr(),
            range.nr_pages(),
            &set.cpus()[..n as usize],
            params.chunk_pages,
            fail_worker,
        )?
    };
    Ok(ClearReport {
        elapsed_ns: pool.elapsed_ns,
        bytes: range.bytes(),
        workers: pool.workers.len() as u32,
        cpu_node: set.node(),
        pool,
    })
}
