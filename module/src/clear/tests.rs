// SPDX-License-Identifier: GPL-2.0

//! KUnit suites of gigantic clearing, one file each under `tests/`:
//! `tierkit_clear` (correctness.rs), `tierkit_clear_errors` (errors.rs) and
//! `tierkit_gigantic` (gigantic.rs); this file holds what they share.
//!
//! Every correctness case fills the range with a non-zero pattern and checks
//! it (fresh guest RAM is already zero, so a check without the fill could
//! never fail), clears it in parallel, and then reads every byte. Fills
//! and checks run on every online CPU at once ([`pass`]), with the
//! kernel's `memset` and `memchr_inv`: under QEMU's TCG these string
//! primitives are several times faster than a loop of Rust, and under
//! KASAN they are not instrumented per access.
//!
//! A failing `assert!` ends the test thread without running destructors, so
//! the cases collect what they saw, free the range, and assert afterwards.
//! Workers only report into the pool's counters; nothing asserts in them.
//!
//! Leak checks compare each node's free pages before and after, counted as
//! free memory is (`node::free_pages`): NR_FREE_PAGES with its per-CPU
//! deltas folded in, plus the pages on the per-CPU free lists. Without
//! those two terms the count dropped by more than [`SLACK_PAGES`] with no
//! leak: a migration out of the range allocates its targets through the
//! per-CPU lists, whose refills (batch << alloc_factor pages) leave
//! thousands of free pages there, and `drain_all_pages()` is not exported
//! to drain them. What remains is what the kernel really allocates in the
//! background meanwhile (slab pages, a worker's stack). [`SLACK_PAGES`]
//! (4 MiB) covers that and is at most half the smallest range a test
//! allocates (8 MiB = 2048 pages, on CPU-less nodes; 64 MiB elsewhere), so
//! a leaked range cannot hide in it.

use super::placement::{local_cpu_node, remote_cpu_node};
use super::{pool::WorkerReport, CpuSet, GiganticRange, Placement};
use crate::chunks::PAGE_BYTES;
use crate::shim::node;
use kernel::{
    bindings,
    prelude::*,
    sync::{
        atomic::{Atomic, Full, Relaxed},
        Arc, Completion,
    },
    workqueue,
};

mod correctness;
mod errors;
mod gigantic;

/// Pages of the matrix ranges on nodes with CPUs: 64 MiB.
const SMALL_PAGES: u64 = 16384;

/// Pages of the matrix ranges on CPU-less nodes: 8 MiB. QEMU emulates CXL
/// memory (the CPU-less node of the cxl topology) access by access, about
/// 250 times slower than DRAM, and a matrix case touches its range four
/// times: 64 MiB made the two matrices take 164 s there. What the matrix
/// proves (every chunk of the plan cleared, by the planned workers, on the
/// placement's CPUs) does not depend on the size: 8 MiB still has three
/// chunks with [`CHUNK_ODD`] (the last partial), four with [`CHUNK_2M`],
/// 2048 with [`CHUNK_PAGE`], and one with [`CHUNK_MAX`] (so the second
/// worker is not started); and it is twice [`SLACK_PAGES`], so a leaked
/// range still shows. The full-size check of CXL memory is
/// `one_gib_per_node`.
const CPULESS_PAGES: u64 = 2048;

/// Pages of the matrix ranges on `nid`: [`SMALL_PAGES`], or
/// [`CPULESS_PAGES`] on a node without CPUs.
fn matrix_pages(nid: usize) -> u64 {
    if node::nr_cpus(nid) > 0 {
        SMALL_PAGES
    } else {
        CPULESS_PAGES
    }
}

/// Tolerated drift of a node's free pages across a test (see the module
/// doc).
const SLACK_PAGES: u64 = 1024;

/// The byte every byte of page `i` of a filled range holds: never zero,
/// and different for neighbouring pages (1..=255, cycling), so that a clear
/// of the wrong page or a partial clear shows.
fn pattern_byte(i: u64) -> u8 {
    (i % 255) as u8 + 1
}

/// What one pass over a range does to each page.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PageOp {
    /// Writes [`pattern_byte`] into every byte (`memset`).
    Fill,
    /// Finds a byte that is not the page's [`pattern_byte`] (`memchr_inv`).
    CheckPattern,
    /// Finds a non-zero byte (`memchr_inv`).
    CheckZero,
}

/// Pages per claim of a [`Pass`]: 2 MiB, then a reschedule.
const PASS_CHUNK_PAGES: u64 = 512;

/// Runs `op` on pages `first..first + count` of the range at `base`;
/// returns the byte offset (from `base`) of the first byte that failed a
/// check.
///
/// # Safety
///
/// `base` must be the direct-map address of a range of at least
/// `first + count` pages that nothing else accesses meanwhile, except
/// other passes of the same op on other pages (checks only read).
unsafe fn run_pages(base: usize, first: u64, count: u64, op: PageOp) -> Option<u64> {
    let page = PAGE_BYTES as usize;
    if op == PageOp::CheckZero {
        let start = base + first as usize * page;
        // SAFETY: the pages are readable and not written meanwhile (the
        // caller's promise); memchr_inv only reads `count` pages.
        let bad = unsafe { bindings::memchr_inv(start as *const c_void, 0, count as usize * page) };
        return (!bad.is_null()).then(|| (bad as usize - base) as u64);
    }
    for i in first..first + count {
        let addr = base + i as usize * page;
        let b = pattern_byte(i);
        match op {
            // SAFETY: the page is writable, 8-byte aligned, and only this
            // pass touches it.
            PageOp::Fill => unsafe {
                crate::shim::tk_memset64(
                    addr as *mut c_void,
                    u64::from(b) * 0x0101_0101_0101_0101,
                    page / 8,
                )
            },
            _ => {
                // SAFETY: the page is readable and not written meanwhile.
                let bad =
                    unsafe { bindings::memchr_inv(addr as *const c_void, c_int::from(b), page) };
                if !bad.is_null() {
                    return Some((bad as usize - base) as u64);
                }
            }
        }
    }
    None
}

/// One parallel pass over a range: the test thread and one work item per
/// other online CPU claim [`PASS_CHUNK_PAGES`] at a time from `cursor`.
///
/// # Invariants
///
/// `base` is the direct-map address of `nr_pages` pages that only this
/// pass accesses until `done` is completed; `remaining` counts the work
/// items not yet finished plus one for the test thread.
#[pin_data]
struct Pass {
    base: usize,
    nr_pages: u64,
    op: PageOp,
    cursor: Atomic<u64>,
    /// The lowest failing byte offset seen, `u64::MAX` if none.
    first_bad: Atomic<u64>,
    remaining: Atomic<u32>,
    #[pin]
    done: Completion,
}

impl Pass {
    /// Claims and processes chunks until none is left.
    fn run(&self) {
        loop {
            let first = self.cursor.fetch_add(PASS_CHUNK_PAGES, Relaxed);
            if first >= self.nr_pages {
                break;
            }
            let count = PASS_CHUNK_PAGES.min(self.nr_pages - first);
            // SAFETY: by the type invariant the range is ours; the cursor
            // hands each chunk out once.
            if let Some(off) = unsafe { run_pages(self.base, first, count, self.op) } {
                let mut cur = self.first_bad.load(Relaxed);
                while off < cur {
                    match self.first_bad.cmpxchg(cur, off, Relaxed) {
                        Ok(_) => break,
                        Err(v) => cur = v,
                    }
                }
            }
            // SAFETY: process context (the test thread or a kworker), no
            // locks held.
            unsafe { crate::shim::tk_cond_resched() };
        }
    }

    /// Drops one count of `remaining`; the last completes `done`.
    fn put(&self) {
        // Full: every write of the pass happens before the completion.
        if self.remaining.fetch_sub(1, Full) == 1 {
            self.done.complete_all();
        }
    }
}

/// Runs `op` over all of `range` on every online CPU (on the test thread
/// alone for a CPU-less node), and returns the byte offset of the first
/// byte that failed the check (`None` for a fill).
///
/// If the pass cannot be allocated, the test thread does all of it.
fn pass(range: &GiganticRange, op: PageOp) -> Option<u64> {
    let base = range.as_ptr() as usize;
    let nr_pages = range.nr_pages();
    // On a CPU-less node the test thread works alone: QEMU emulates CXL
    // memory access by access (as MMIO, presumably under its global lock),
    // and more CPUs only contended: `one_gib_per_node` on the cxl topology
    // took 574 s with parallel passes, 418 s without (one loaded run each).
    let helpers = if node::nr_cpus(range.nid()) == 0 {
        0
    } else {
        CpuSet::for_memory(range.nid(), Placement::Any).map_or(0, |s| s.len().saturating_sub(1))
    };
    // INVARIANT: the caller owns `range` and does not touch it until this
    // function returns, which is after the wait for `done` below.
    let shared = Arc::pin_init(
        pin_init!(Pass {
            base,
            nr_pages,
            op,
            cursor: Atomic::new(0),
            first_bad: Atomic::new(u64::MAX),
            remaining: Atomic::new(1),
            done <- Completion::new(),
        }),
        GFP_KERNEL,
    );
    let Ok(shared) = shared else {
        // SAFETY: the test owns the range; nothing else touches it.
        return unsafe { run_pages(base, 0, nr_pages, op) };
    };
    for _ in 0..helpers {
        let s = shared.clone();
        shared.remaining.add(1, Relaxed);
        // SAFETY: `system_dfl_wq`, the unbound system workqueue that
        // replaces the deprecated `system_unbound_wq`, is a C global that
        // is always available.
        let wq = unsafe { workqueue::Queue::from_raw(bindings::system_dfl_wq) };
        let spawned = wq.try_spawn(GFP_KERNEL, move || {
            s.run();
            s.put();
        });
        if spawned.is_err() {
            // The closure (and its reference) is gone; the chunks it would
            // have claimed stay for the others.
            shared.put();
        }
    }
    shared.run();
    shared.put();
    // The range must stay ours until every work item is done with it.
    shared.done.wait_for_completion();
    let bad = shared.first_bad.load(Relaxed);
    (bad != u64::MAX).then_some(bad)
}

/// Fills `range` with [`pattern_byte`], page by page.
fn fill(range: &mut GiganticRange) {
    // `&mut`: nothing else reads the range meanwhile.
    let _ = pass(range, PageOp::Fill);
}

/// Whether every byte holds its page's [`pattern_byte`] (a full scan).
fn pattern_intact(range: &GiganticRange) -> bool {
    pass(range, PageOp::CheckPattern).is_none()
}

/// The byte offset of the first non-zero byte, if any (a full scan).
fn first_nonzero(range: &GiganticRange) -> Option<u64> {
    pass(range, PageOp::CheckZero)
}

/// The `movable_gigantic` opt-in, set while alive and restored on drop:
/// the suites clear ranges on every memory node, and a CXL node onlined
/// `online_movable` has nothing but ZONE_MOVABLE memory.
struct AllowMovable(bool);

impl AllowMovable {
    fn new() -> Self {
        Self(super::range::MOVABLE_GIGANTIC.xchg(true, kernel::sync::atomic::Relaxed))
    }
}

impl Drop for AllowMovable {
    fn drop(&mut self) {
        super::range::MOVABLE_GIGANTIC.store(self.0, kernel::sync::atomic::Relaxed);
    }
}

/// Free pages of every node, indexed by node id.
fn free_pages() -> KVec<u64> {
    let mut v = KVec::new();
    for nid in 0..node::nr_node_ids() {
        if v.push(node::free_pages(nid), GFP_KERNEL).is_err() {
            break;
        }
    }
    v
}

/// The largest drop of free pages on any node from `before` to now.
fn worst_drop(before: &[u64]) -> u64 {
    let after = free_pages();
    before
        .iter()
        .zip(after.iter())
        .map(|(b, a)| b.saturating_sub(*a))
        .max()
        .unwrap_or(0)
}

/// Nodes with memory.
fn memory_nodes() -> KVec<usize> {
    let mut v = KVec::new();
    for nid in 0..node::nr_node_ids() {
        if node::has_memory(nid) && v.push(nid, GFP_KERNEL).is_err() {
            break;
        }
    }
    v
}

/// Thread counts 1, 2 and all of `eligible`, without repeats.
fn thread_counts(eligible: u32) -> KVec<u32> {
    let mut v = KVec::new();
    for t in [1, 2, eligible] {
        if t >= 1 && t <= eligible && !v.contains(&t) && v.push(t, GFP_KERNEL).is_err() {
            break;
        }
    }
    v
}

/// Whether every worker ran, on an eligible CPU.
fn workers_on(set: &CpuSet, workers: &[WorkerReport]) -> bool {
    workers
        .iter()
        .all(|w| set.contains(w.ran_on) && w.ran_on == w.cpu)
}

/// One fill / clear / scan case; returns whether it passed, and prints why
/// not.
fn check_case(range: &mut GiganticRange, params: &super::ClearParams) -> bool {
    let nid = range.nid();
    fill(range);
    if !pattern_intact(range) {
        pr_err!("clear test: node {}: pattern did not stick\n", nid);
        return false;
    }
    let r = match super::clear(range, params) {
        Ok(r) => r,
        Err(e) => {
            pr_err!(
                "clear test: node {} {:?}: clear failed: {:?}\n",
                nid,
                params,
                e
            );
            return false;
        }
    };
    if let Some(off) = first_nonzero(range) {
        pr_err!(
            "clear test: node {} {:?}: byte offset {} not zero\n",
            nid,
            params,
            off
        );
        return false;
    }
    let Ok(set) = CpuSet::for_memory(nid, params.placement) else {
        return false;
    };
    let chunks: u64 = r.pool.workers.iter().map(|w| w.chunks).sum();
    let planned_chunks = crate::chunks::ChunkPlan::new(range.nr_pages(), params.chunk_pages)
        .map_or(0, |p| p.nr_chunks());
    if chunks != planned_chunks {
        pr_err!(
            "clear test: {:?}: {} chunks cleared of {}\n",
            params,
            chunks,
            planned_chunks
        );
        return false;
    }
    if !workers_on(&set, &r.pool.workers) || r.cpu_node != set.node() {
        pr_err!(
            "clear test: node {} {:?}: a worker ran off its CPU set\n",
            nid,
            params
        );
        return false;
    }
    if let super::Threads::Fixed(n) = params.threads {
        let planned = crate::chunks::ChunkPlan::new(range.nr_pages(), params.chunk_pages)
            .map_or(0, |p| crate::chunks::workers_for(&p, n));
        if r.workers != planned {
            pr_err!(
                "clear test: {:?}: {} workers, expected {}\n",
                params,
                r.workers,
                planned
            );
            return false;
        }
    }
    true
}

/// The matrix for one placement on a range of every memory node (64 MiB,
/// or 4 MiB on a CPU-less node: see [`CPULESS_PAGES`]):
/// thread counts 1, 2, all, and each chunk size of `chunks` (pages).
/// Returns (cases run, cases failed, cases refused with EINVAL because the
/// placement has no CPUs for that node).
fn matrix(placement: Placement, chunks: &[u32]) -> Result<(u32, u32, u32)> {
    let (mut run, mut failed, mut refused) = (0, 0, 0);
    let _movable = AllowMovable::new();
    for &nid in memory_nodes().iter() {
        let mut range = GiganticRange::alloc_pages(nid, matrix_pages(nid))?;
        let set = match CpuSet::for_memory(nid, placement) {
            Ok(set) => set,
            Err(e) => {
                // Only `remote` may lack CPUs; clear must refuse it too.
                let p = super::ClearParams::new(super::Threads::Fixed(1), placement);
                let refused_too = super::clear(&mut range, &p).err() == Some(EINVAL);
                if e != EINVAL || placement != Placement::Remote || !refused_too {
                    failed += 1;
                }
                refused += 1;
                continue;
            }
        };
        for &t in thread_counts(set.len()).iter() {
            for &chunk_pages in chunks {
                let params = super::ClearParams {
                    threads: super::Threads::Fixed(t),
                    placement,
                    chunk_pages,
                };
                run += 1;
                if !check_case(&mut range, &params) {
                    failed += 1;
                }
            }
        }
    }
    Ok((run, failed, refused))
}

/// 3 MiB + 4 KiB: does not divide 64 MiB or 1 GiB.
const CHUNK_ODD: u32 = 769;
/// The default, 2 MiB: divides.
const CHUNK_2M: u32 = 512;
/// One page per chunk: the most claims.
const CHUNK_PAGE: u32 = 1;
/// The largest chunk, 32 MiB: 64 MiB has two chunks, so a third worker idles.
const CHUNK_MAX: u32 = 8192;

// SMALL_PAGES is 64 MiB, CPULESS_PAGES 8 MiB, at least twice the slack.
const _: () = assert!(SMALL_PAGES * PAGE_BYTES == 64 << 20);
const _: () = assert!(CPULESS_PAGES * PAGE_BYTES == 8 << 20);
const _: () = assert!(CPULESS_PAGES >= 2 * SLACK_PAGES);
