// SPDX-License-Identifier: GPL-2.0

//! KUnit suites of gigantic clearing.
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
//! Leak checks compare each node's free pages before and after. The count
//! jitters a little without any leak: pages move to and from the per-CPU
//! lists (`drain_all_pages()` is not exported), per-CPU vmstat deltas are
//! folded lazily, and the kernel allocates in the background. [`SLACK_PAGES`]
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

#[kunit_tests(tierkit_clear)]
mod clear_tests {
    use super::*;

    #[test]
    fn local_matrix_64m() -> Result {
        let before = free_pages();
        let (run, failed, refused) = matrix(
            Placement::Local,
            &[CHUNK_ODD, CHUNK_2M, CHUNK_PAGE, CHUNK_MAX],
        )?;
        assert!(run > 0);
        assert_eq!(failed, 0);
        assert_eq!(refused, 0);
        assert!(worst_drop(&before) < SLACK_PAGES);
        Ok(())
    }

    #[test]
    fn any_matrix_64m() -> Result {
        let before = free_pages();
        let (run, failed, refused) = matrix(Placement::Any, &[CHUNK_ODD, CHUNK_MAX])?;
        assert!(run > 0);
        assert_eq!(failed, 0);
        assert_eq!(refused, 0);
        assert!(worst_drop(&before) < SLACK_PAGES);
        Ok(())
    }

    /// On the default topology (one node with CPUs) every node refuses
    /// `remote` with EINVAL; with two CPU nodes it runs the matrix.
    #[test]
    fn remote_matrix_64m() -> Result {
        let before = free_pages();
        let (run, failed, refused) = matrix(Placement::Remote, &[CHUNK_ODD, CHUNK_MAX])?;
        assert!(run + refused > 0);
        assert_eq!(failed, 0);
        let cpu_nodes = (0..node::nr_node_ids())
            .filter(|&n| node::nr_cpus(n) > 0)
            .count();
        let none_refused = refused == 0;
        let two_cpu_nodes = cpu_nodes >= 2;
        assert!(none_refused == two_cpu_nodes);
        assert!(worst_drop(&before) < SLACK_PAGES);
        Ok(())
    }

    /// A memory-only node's workers run on the nearest node with CPUs.
    #[test]
    fn cpuless_node_uses_nearest_cpu_node() {
        for &nid in memory_nodes().iter() {
            let local = local_cpu_node(nid);
            assert!(local.is_some());
            let local = local.unwrap_or(usize::MAX);
            assert!(node::nr_cpus(local) > 0);
            if node::nr_cpus(nid) > 0 {
                assert_eq!(local, nid);
            }
            if let Some(remote) = remote_cpu_node(nid) {
                assert!(remote != local);
                assert!(node::nr_cpus(remote) > 0);
            }
        }
    }

    #[test]
    fn auto_threads_64m() -> Result {
        let before = free_pages();
        let mut range = GiganticRange::alloc_pages(0, SMALL_PAGES)?;
        // Below 1 GiB a range is order-0 pages, each with its one reference.
        let plain = !range.is_folio() && range.folio_refs() == 1;
        let eligible = CpuSet::for_memory(0, Placement::Local)?.len();
        fill(&mut range);
        let filled = pattern_intact(&range);
        let r = super::super::clear(
            &mut range,
            &super::super::ClearParams::new(super::super::Threads::Auto, Placement::Local),
        );
        let zero = first_nonzero(&range).is_none();
        drop(range);
        assert!(plain);
        assert!(filled);
        let workers = r.as_ref().map_or(0, |r| r.workers);
        assert!(workers >= 1 && workers <= eligible);
        assert!(zero);
        assert!(worst_drop(&before) < SLACK_PAGES);
        Ok(())
    }

    /// A worker that fails makes the whole clear fail (EIO), the others
    /// stop early, and nothing hangs or leaks.
    #[test]
    fn worker_failure_is_reported() -> Result {
        let before = free_pages();
        let mut range = GiganticRange::alloc_pages(0, SMALL_PAGES)?;
        let eligible = CpuSet::for_memory(0, Placement::Local)?.len();
        let params = super::super::ClearParams {
            threads: super::super::Threads::Fixed(eligible),
            placement: Placement::Local,
            chunk_pages: CHUNK_PAGE,
        };
        let r = super::super::clear_with_fault(&mut range, &params, Some(0));
        let err = r.err();
        // The same range clears fine without the fault.
        fill(&mut range);
        let ok_after = check_case(&mut range, &params);
        drop(range);
        assert!(err == Some(EIO));
        assert!(ok_after);
        assert!(worst_drop(&before) < SLACK_PAGES);
        Ok(())
    }
}

#[kunit_tests(tierkit_clear_errors)]
mod error_tests {
    use super::super::bench::bench;
    use super::super::range::{check_memory_node, MAX_RANGE_PAGES};
    use super::super::{ClearParams, Threads};
    use super::*;
    use crate::uapi::{self, TkClearBench};

    fn bench_arg(nid: i32, threads: u32, placement: u32, nr_gigantic: u32) -> TkClearBench {
        TkClearBench {
            nid,
            threads,
            placement,
            nr_gigantic,
            ..Default::default()
        }
    }

    #[test]
    fn invalid_nodes_are_einval() {
        let before = free_pages();
        let ids = node::nr_node_ids();
        assert!(GiganticRange::alloc_pages(63, SMALL_PAGES).err() == Some(EINVAL));
        assert!(GiganticRange::alloc_pages(ids, SMALL_PAGES).err() == Some(EINVAL));
        assert!(GiganticRange::alloc(usize::MAX / 2).err() == Some(EINVAL));
        assert!(check_memory_node(-1).err() == Some(EINVAL));
        // Offline and memoryless nodes, if this topology has any.
        for nid in 0..ids {
            if !node::has_memory(nid) {
                assert!(GiganticRange::alloc_pages(nid, SMALL_PAGES).err() == Some(EINVAL));
                let mut a = bench_arg(nid as i32, 1, uapi::TK_PLACE_LOCAL, 1);
                assert!(bench(&mut a).err() == Some(EINVAL));
            }
        }
        let mut a = bench_arg(63, 1, uapi::TK_PLACE_LOCAL, 1);
        assert!(bench(&mut a).err() == Some(EINVAL));
        let mut a = bench_arg(-1, 1, uapi::TK_PLACE_LOCAL, 1);
        assert!(bench(&mut a).err() == Some(EINVAL));
        assert!(worst_drop(&before) < SLACK_PAGES);
    }

    #[test]
    fn bad_sizes_are_einval() {
        assert!(GiganticRange::alloc_pages(0, 0).err() == Some(EINVAL));
        assert!(GiganticRange::alloc_pages(0, 3 * 4096).err() == Some(EINVAL));
        assert!(GiganticRange::alloc_pages(0, MAX_RANGE_PAGES * 2).err() == Some(EINVAL));
    }

    /// Zero threads, more threads than eligible CPUs, bad placements and
    /// chunks: EINVAL before any worker runs (the pattern survives) and
    /// without leaking.
    #[test]
    fn bad_thread_counts_are_einval() -> Result {
        let before = free_pages();
        let mut range = GiganticRange::alloc_pages(0, SMALL_PAGES)?;
        let eligible = CpuSet::for_memory(0, Placement::Local)?.len();
        fill(&mut range);
        let zero = super::super::clear(
            &mut range,
            &ClearParams::new(Threads::Fixed(0), Placement::Local),
        )
        .err();
        let over = super::super::clear(
            &mut range,
            &ClearParams::new(Threads::Fixed(eligible + 1), Placement::Local),
        )
        .err();
        let any_over = super::super::clear(
            &mut range,
            &ClearParams::new(Threads::Fixed(u32::MAX - 1), Placement::Any),
        )
        .err();
        let intact = pattern_intact(&range);
        drop(range);
        assert!(zero == Some(EINVAL));
        assert!(over == Some(EINVAL));
        assert!(any_over == Some(EINVAL));
        assert!(intact);

        assert!(Threads::from_uapi(0).err() == Some(EINVAL));
        assert!(Threads::from_uapi(uapi::TK_THREADS_AUTO) == Ok(Threads::Auto));
        assert!(ClearParams::from_uapi(1, 3, 0).err() == Some(EINVAL));
        assert!(ClearParams::from_uapi(1, 0, 6).err() == Some(EINVAL));
        assert!(ClearParams::from_uapi(1, 0, 32768 + 4).err() == Some(EINVAL));
        assert!(ClearParams::from_uapi(1, 0, 0).map(|p| p.chunk_pages) == Ok(512));

        let mut a = bench_arg(0, 0, uapi::TK_PLACE_LOCAL, 1);
        assert!(bench(&mut a).err() == Some(EINVAL));
        let mut a = bench_arg(0, eligible + 1, uapi::TK_PLACE_LOCAL, 1);
        assert!(bench(&mut a).err() == Some(EINVAL));
        let mut a = bench_arg(0, 1, 7, 1);
        assert!(bench(&mut a).err() == Some(EINVAL));
        let mut a = bench_arg(0, 1, uapi::TK_PLACE_LOCAL, 0);
        assert!(bench(&mut a).err() == Some(EINVAL));
        let mut a = bench_arg(0, 1, uapi::TK_PLACE_LOCAL, uapi::TK_CLEAR_BENCH_MAX + 1);
        assert!(bench(&mut a).err() == Some(EINVAL));
        assert!(worst_drop(&before) < SLACK_PAGES);
        Ok(())
    }

    /// A range bigger than the node's free memory (the next power of two
    /// above it), and the largest allowed range: ENOMEM, nothing leaked.
    #[test]
    fn alloc_failure_is_enomem() {
        let before = free_pages();
        for &nid in memory_nodes().iter() {
            let too_big = (node::free_pages(nid) + 1)
                .next_power_of_two()
                .min(MAX_RANGE_PAGES);
            assert!(GiganticRange::alloc_pages(nid, too_big).err() == Some(ENOMEM));
            assert!(GiganticRange::alloc_pages(nid, MAX_RANGE_PAGES).err() == Some(ENOMEM));
        }
        assert!(worst_drop(&before) < SLACK_PAGES);
    }
}

#[kunit_tests(tierkit_gigantic)]
mod gigantic_tests {
    use super::super::bench::bench;
    use super::super::gigantic::{set_gigantic_ioctl, GiganticMode};
    use super::super::{ClearParams, Threads};
    use super::*;
    use crate::chunks::GIGANTIC_PAGES;
    use crate::uapi::{self, TkClearBench, TkGigantic};

    /// One full 1 GiB range per node whose memory is in kernel zones, all
    /// local CPUs, default chunks: pattern, parallel clear, every byte zero.
    /// A node whose memory is ZONE_MOVABLE (the cxl topology's CXL node) is
    /// left to `tk-test-gigantic`, the one place that clears and checks a
    /// whole GiB of emulated CXL memory (QEMU emulates it access by access:
    /// fill, clear and check took over 400 s here, past KUnit's timeout);
    /// the matrices of `tierkit_clear` still clear ranges there.
    #[test]
    fn one_gib_per_node() -> Result {
        let _movable = AllowMovable::new();
        // SAFETY: the shim range-checks `nid`.
        let kernel_zones = |nid: usize| !unsafe { crate::shim::tk_node_has_movable(nid as c_int) };
        for &nid in memory_nodes().iter().filter(|&&nid| kernel_zones(nid)) {
            let before = free_pages();
            let mut range = GiganticRange::alloc(nid)?;
            let on_node = range.page(0).map(|p| p.nid()) == Some(nid as i32)
                && range.page(GIGANTIC_PAGES - 1).map(|p| p.nid()) == Some(nid as i32);
            let aligned = range.pfn() % GIGANTIC_PAGES == 0;
            // One PUD-order folio with one reference, the range's own.
            let one_folio = range.is_folio() && range.folio_refs() == 1;
            let eligible = CpuSet::for_memory(nid, Placement::Local)?.len();
            let ok = check_case(
                &mut range,
                &ClearParams::new(Threads::Fixed(eligible), Placement::Local),
            );
            let bytes = range.bytes();
            drop(range);
            assert!(on_node);
            assert!(aligned);
            assert!(one_folio);
            assert!(ok);
            assert_eq!(bytes, 1u64 << 30);
            assert!(worst_drop(&before) < SLACK_PAGES);
        }
        Ok(())
    }

    /// `TK_IOC_CLEAR_BENCH` with one worker on the last memory node whose
    /// memory is all in kernel zones: the CPU-less node of the numa
    /// topology, so that the bench reports its nearest CPU node. On the
    /// cxl topology that is node 0: the CXL node's memory is ZONE_MOVABLE,
    /// and QEMU emulates it access by access (one pass over a GiB took a
    /// minute). The bench adds nothing there that `one_gib_per_node` does
    /// not check on the same node (a full GiB cleared by the same `clear`,
    /// every byte checked, the workers on the nearest CPU node).
    #[test]
    fn bench_one_gib() -> Result {
        let nodes = memory_nodes();
        let kernel_only = nodes
            .iter()
            .rev()
            // SAFETY: the shim range-checks `nid`.
            .find(|&&nid| !unsafe { crate::shim::tk_node_has_movable(nid as c_int) });
        let nid = *kernel_only.or(nodes.last()).ok_or(EINVAL)?;
        let _movable = AllowMovable::new();
        let before = free_pages();
        let mut a = TkClearBench {
            nid: nid as i32,
            threads: 1,
            placement: uapi::TK_PLACE_LOCAL,
            nr_gigantic: 1,
            ..Default::default()
        };
        let r = bench(&mut a);
        assert!(r.is_ok());
        assert_eq!(a.bytes, 1u64 << 30);
        assert_eq!(a.workers, 1);
        assert!(a.elapsed_ns > 0);
        assert!(a.mbps > 0);
        assert!(a.variant[0] != 0);
        assert_eq!(a.cpu_node, local_cpu_node(nid).map_or(-2, |n| n as i32));
        assert!(worst_drop(&before) < SLACK_PAGES);
        Ok(())
    }

    /// The gigantic mode of a `/dev/tierkit` file, without the device: set,
    /// query, refuse once mapped, populate (clear) a range and report it.
    #[test]
    fn gigantic_mode_state() -> Result {
        let before = free_pages();
        let mut mode: Option<GiganticMode> = None;
        let mut q = TkGigantic {
            flags: uapi::TK_GIGANTIC_F_QUERY,
            ..Default::default()
        };
        assert!(set_gigantic_ioctl(&mut mode, false, &mut q).is_ok());
        assert!(mode.is_none());
        assert_eq!(q.last_nid, -1);
        assert_eq!(q.threads, uapi::TK_THREADS_AUTO);
        assert_eq!(q.chunk_kib, 2048);

        let mut bad = TkGigantic {
            threads: 0,
            ..Default::default()
        };
        assert!(set_gigantic_ioctl(&mut mode, false, &mut bad).err() == Some(EINVAL));
        let mut bad = TkGigantic {
            threads: 1,
            flags: 4,
            ..Default::default()
        };
        assert!(set_gigantic_ioctl(&mut mode, false, &mut bad).err() == Some(EINVAL));
        // More workers than online CPUs: refused before any mmap takes a
        // range (arguments are checked before any work).
        let mut bad = TkGigantic {
            threads: 4096,
            ..Default::default()
        };
        assert!(set_gigantic_ioctl(&mut mode, false, &mut bad).err() == Some(EINVAL));
        assert!(mode.is_none());

        let mut set = TkGigantic {
            threads: 1,
            placement: uapi::TK_PLACE_ANY,
            chunk_kib: 3076,
            ..Default::default()
        };
        assert!(set_gigantic_ioctl(&mut mode, false, &mut set).is_ok());
        assert_eq!(set.nr_cleared, 0);
        let mut again = set;
        assert!(set_gigantic_ioctl(&mut mode, true, &mut again).err() == Some(EBUSY));

        let populated = match mode.as_mut() {
            Some(m) => m.populate_pages(0, SMALL_PAGES).map(|r| {
                let seen = (r.nid(), r.nr_pages(), first_nonzero(&r).is_none());
                // What dev.rs does once the whole mmap succeeded.
                m.note_mapped(1);
                seen
            }),
            None => Err(EINVAL),
        };
        let kept = mode.as_ref().map(|m| {
            (
                m.nr_cleared() as usize,
                m.last().map(|l| l.nid),
                m.params().placement,
            )
        });
        let mut q = TkGigantic {
            flags: uapi::TK_GIGANTIC_F_QUERY,
            ..Default::default()
        };
        let queried = set_gigantic_ioctl(&mut mode, true, &mut q);
        assert!(populated == Ok((0, SMALL_PAGES, true)));
        assert!(kept == Some((1, Some(0), Placement::Any)));
        assert!(queried.is_ok());
        assert_eq!(q.nr_cleared, 1);
        assert_eq!(q.last_nid, 0);
        // With init_on_alloc on the allocator zeroed the range: that is the
        // clear, with no workers (Documentation/ABI/testing/dev-tierkit).
        // SAFETY: reads a static key / boot parameter.
        let allocator_zeroed = unsafe { crate::shim::tk_init_on_alloc() };
        assert_eq!(q.last_workers, if allocator_zeroed { 0 } else { 1 });
        assert_eq!(q.last_cpu_node, -1);
        assert_eq!(q.placement, uapi::TK_PLACE_ANY);
        assert_eq!(q.chunk_kib, 3076);
        assert!(q.last_elapsed_ns > 0);
        assert!(worst_drop(&before) < SLACK_PAGES);
        Ok(())
    }
}

// SMALL_PAGES is 64 MiB, CPULESS_PAGES 8 MiB, at least twice the slack.
const _: () = assert!(SMALL_PAGES * PAGE_BYTES == 64 << 20);
const _: () = assert!(CPULESS_PAGES * PAGE_BYTES == 8 << 20);
const _: () = assert!(CPULESS_PAGES >= 2 * SLACK_PAGES);
