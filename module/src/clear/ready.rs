// SPDX-License-Identifier: GPL-2.0

//! The pre-cleared gigantic pool: 1 GiB ranges cleared in the background,
//! so that the first touch of a GiB of a gigantic `/dev/tierkit` mapping
//! only maps one.
//!
//! There is no upstream counterpart: pre-zeroing huge pages was proposed in
//! 2026 and not merged. hugetlb's `nr_hugepages` keeps pages, but clears
//! each at its first fault (`folio_zero_user()`).
//!
//! - `/sys/kernel/debug/tierkit/gigantic/pool` sets a target per node
//!   ([`GiganticPool::store`]: lines `NID COUNT`) and reads back
//!   `NID TARGET READY` per node ([`GiganticPool::show`]).
//! - One kthread, `tierkit_pool` (started with the shrinker by
//!   [`super::refill`]), at nice 19 as khugepaged (it yields to
//!   every normal task), fills the pools one range at a time: it takes a
//!   range as gigantic mmap does ([`GiganticRange::alloc_for_pool`],
//!   the same zones and `movable_gigantic` opt-in, but as order-0 pages
//!   until a fault takes it) and clears it on the
//!   CPUs of the nearest node with CPUs, 2 MiB between reschedule points;
//!   with `init_on_alloc` on, the allocator's own zeroing is the clear.
//!   The node to fill next is the pure [`next_refill`].
//! - A gigantic fault takes a ready range of its node ([`GiganticPool::take`])
//!   and wakes the thread to refill behind it.
//! - Ready ranges are given back when a target is lowered, on rmmod
//!   ([`PoolWorker`](super::refill::PoolWorker)'s drop), under memory
//!   pressure (a NUMA-aware shrinker counting base pages; refill of the
//!   node then pauses for [`PAUSE_NS`]), and when a memory block under
//!   one goes offline ([`GiganticPool::release_in`], from the memory
//!   notifier).
//! - The `stats` file shows the ready ranges per node (`pool` column), the
//!   `limits` file `gigantic_pool_taken`, `gigantic_pool_shrunk` and
//!   `gigantic_pool_filling` (ranges the refill thread holds outside the
//!   pool, so that a check of free memory can wait until it holds none).
//!
//! The pool is global and only root configures it (the file is 0600); its
//! memory is not charged to a memory cgroup, and each node keeps at most
//! what its eligible zones hold less 1 GiB ([`max_pool_count`]).

use super::range::MOVABLE_GIGANTIC;
use super::GiganticRange;
use crate::chunks::PAGE_BYTES;
use crate::interleave::MAX_NUMNODES;
use crate::pool_cmd::{
    for_each_pool_line, max_pool_count, next_refill, PoolNode, PoolWriteError, Refill,
};
use crate::shim::{self, node, node::possible_nodes};
use kernel::{
    ffi::{c_int, c_uint},
    fmt, new_condvar, new_mutex,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Relaxed, Release},
        CondVar, Mutex,
    },
    task::{Task, MAX_SCHEDULE_TIMEOUT},
    time::{msecs_to_jiffies, Jiffies},
};

/// After the shrinker took a range of a node, or an allocation for it
/// failed, its refill pauses this long: 10 s (ns).
pub(crate) const PAUSE_NS: u64 = 10_000_000_000;

/// Pages the refill clears between reschedule and stop checks: 2 MiB.
const CLEAR_STEP_PAGES: u64 = 512;

/// One node's pool.
struct NodePool {
    target: u32,
    ready: KVec<GiganticRange>,
    /// No refill before this time (`ktime_get_ns()`).
    paused_until_ns: u64,
    /// The last refill of the node failed (logged once until one succeeds).
    failing: bool,
    /// Offlines of the node's memory begun ([`GiganticPool::offlining`]):
    /// a refill that sees it change gives its range up.
    offlines: u64,
}

impl NodePool {
    fn new() -> Self {
        Self {
            target: 0,
            ready: KVec::new(),
            paused_until_ns: 0,
            failing: false,
            offlines: 0,
        }
    }
}

/// What the pool's lock protects.
struct PoolState {
    nodes: [NodePool; MAX_NUMNODES],
    /// Work came in since the refill thread last looked (a target went
    /// up, a range was taken or shrunk): it does not sleep before looking
    /// again.
    kicked: bool,
    /// The refill thread is to end ([`super::refill::PoolWorker`]'s drop).
    stopping: bool,
}

/// The pre-cleared pool of ranges of `range_pages` base pages, per node.
/// The module's has 1 GiB ranges (`DeviceState::pool`); KUnit tests make
/// small ones.
///
/// Lock order: the pool's lock is taken last and never held while a range
/// is allocated, cleared or freed, except by a failed `push` (which frees
/// the range it could not add). The shrinker only try-locks it.
#[pin_data]
pub(crate) struct GiganticPool {
    range_pages: u64,
    /// Test hook: fill each range with 0x5a before it is cleared.
    poison: bool,
    #[pin]
    state: Mutex<PoolState>,
    /// Where the refill thread sleeps; notified with `kicked` or
    /// `stopping` set.
    #[pin]
    work: CondVar,
    /// The refill thread's `task_struct` (0 when none runs), for the
    /// shrinker, which must not free the pool that thread's own
    /// allocation is reclaiming for.
    refill_task: Atomic<usize>,
    /// Ready ranges per node, readable without the lock (shrinker count,
    /// `stats`).
    ready: [Atomic<u64>; MAX_NUMNODES],
    /// Faults served from the pool, cumulative.
    taken: Atomic<u64>,
    /// Ranges given back by the shrinker, cumulative.
    shrunk: Atomic<u64>,
    /// Refills under way: counted under the lock in the same hold that
    /// decided them (so a target written after the decision finds it
    /// counted), uncounted once their range is ready or freed.
    filling: Atomic<u64>,
}

/// One refill under way in [`GiganticPool::filling`], uncounted on drop.
struct Filling<'a>(&'a Atomic<u64>);

impl Drop for Filling<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Release);
    }
}

/// `ktime_get_ns()`.
fn now_ns() -> u64 {
    // SAFETY: no precondition.
    unsafe { shim::tk_ktime_get_ns() }
}

impl GiganticPool {
    /// An empty pool (every target 0) of ranges of `range_pages` base
    /// pages (a power of two); `poison` is the test hook above.
    pub(crate) fn new(range_pages: u64, poison: bool) -> impl PinInit<Self> {
        pin_init!(GiganticPool {
            range_pages,
            poison,
            state <- new_mutex!(
                PoolState {
                    nodes: core::array::from_fn(|_| NodePool::new()),
                    kicked: false,
                    stopping: false,
                },
                "tierkit_gigantic_pool"
            ),
            work <- new_condvar!("tierkit_gigantic_pool_work"),
            refill_task: Atomic::new(0),
            ready: core::array::from_fn(|_| Atomic::new(0)),
            taken: Atomic::new(0),
            shrunk: Atomic::new(0),
            filling: Atomic::new(0),
        })
    }

    /// Ready ranges of `nid`.
    pub(crate) fn ready(&self, nid: usize) -> u64 {
        self.ready.get(nid).map_or(0, |r| r.load(Relaxed))
    }

    /// Faults served from the pool, cumulative.
    pub(crate) fn taken(&self) -> u64 {
        self.taken.load(Relaxed)
    }

    /// Ranges given back under memory pressure, cumulative.
    pub(crate) fn shrunk(&self) -> u64 {
        self.shrunk.load(Relaxed)
    }

    /// The most ranges `nid` may keep: what its eligible zones (kernel
    /// zones, plus ZONE_MOVABLE with `movable_gigantic`) manage, less one
    /// range.
    pub(crate) fn max_count(&self, nid: usize) -> u32 {
        let movable = MOVABLE_GIGANTIC.load(Relaxed);
        // SAFETY: the shim range-checks `nid`.
        let cap = unsafe { shim::tk_node_gigantic_capacity(nid as c_int, movable) };
        max_pool_count(cap as u64, self.range_pages)
    }

    /// Checks one line of a write: `nid` must be an online node with
    /// memory (`EINVAL`), `count` at most [`max_count`](Self::max_count)
    /// (`ENOSPC`).
    fn check(&self, nid: u32, count: u32) -> Result {
        let nid = super::range::check_memory_node(i64::from(nid))?;
        if nid >= MAX_NUMNODES {
            return Err(EINVAL);
        }
        let max = self.max_count(nid);
        if count > max {
            pr_info!(
                "gigantic pool: node {} holds at most {} ranges of {} MiB, not {}\n",
                nid,
                max,
                (self.range_pages * PAGE_BYTES) >> 20,
                count
            );
            return Err(ENOSPC);
        }
        Ok(())
    }

    /// A write to the `pool` file: lines `NID COUNT`, all checked before
    /// any is applied. Raising a target wakes the refill thread; lowering
    /// one gives the ranges above it back at once. A write also ends any
    /// refill pause of the nodes it names.
    ///
    /// Errors: `EINVAL` for a malformed or empty write or a node that is
    /// not online with memory; `ENOSPC` for a count the node cannot hold
    /// (see [`max_count`](Self::max_count)). Nothing changes then.
    pub(crate) fn store(&self, buf: &[u8]) -> Result {
        let s = core::str::from_utf8(buf).map_err(|_| EINVAL)?;
        let mut st = self.state.lock();
        let r = for_each_pool_line(
            s,
            |nid, count| self.check(nid, count),
            |nid, count| {
                if let Some(n) = st.nodes.get_mut(nid as usize) {
                    n.target = count;
                    n.paused_until_ns = 0;
                    n.failing = false;
                }
            },
        );
        match r {
            Ok(()) => {}
            Err(PoolWriteError::Line(_)) => return Err(EINVAL),
            Err(PoolWriteError::Check(e)) => return Err(e),
        }
        self.kick_locked(&mut st);
        drop(st);
        self.trim();
        Ok(())
    }

    /// The `pool` file: `NID TARGET READY` for every node with memory or
    /// a target.
    pub(crate) fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.state.lock();
        for (nid, n) in st.nodes.iter().enumerate().take(possible_nodes()) {
            if node::has_memory(nid) || n.target > 0 {
                writeln!(f, "{} {} {}", nid, n.target, n.ready.len())?;
            }
        }
        Ok(())
    }

    /// A ready range of `nid`, cleared, if there is one, made one folio
    /// for a mapping ([`GiganticRange::make_folio`]: ready ranges wait as
    /// order-0 pages, so that an offline can isolate the memory blocks
    /// under them and the memory notifier give them back); the refill
    /// thread is woken to replace it. The caller owns the range.
    /// `may_be_movable`: the taker's vmas refuse long-term writable pins,
    /// so it may have a range taken with the `movable_gigantic` opt-in.
    /// `None` too when the range could not be made a folio (it is freed).
    pub(crate) fn take(&self, nid: usize, may_be_movable: bool) -> Option<GiganticRange> {
        let mut r = {
            let mut st = self.state.lock();
            let ready = &mut st.nodes.get_mut(nid)?.ready;
            let i = ready
                .iter()
                .rposition(|r| may_be_movable || !r.taken_movable())?;
            let r = ready.remove(i).ok()?;
            self.ready[nid].fetch_sub(1, Relaxed);
            self.kick_locked(&mut st);
            r
        };
        // Outside the lock: it writes the range's 2^18 struct pages.
        r.make_folio().ok()?;
        self.taken.add(1, Relaxed);
        Some(r)
    }

    /// Wakes the refill thread, if one runs, with `st` (this pool's
    /// state) locked.
    fn kick_locked(&self, st: &mut PoolState) {
        st.kicked = true;
        self.work.notify_one();
    }

    /// For the refill thread: sleeps until it is kicked or stopped, or
    /// `timeout` passes; returns at once if it was kicked since it last
    /// looked. Returns whether the thread is to go on.
    pub(super) fn wait_for_work(&self, timeout: Jiffies) -> bool {
        let mut st = self.state.lock();
        if !st.kicked && !st.stopping {
            // The lock is released while it sleeps; a kick or stop takes
            // it, so none is missed between the check and the sleep.
            let _ = self.work.wait_interruptible_timeout(&mut st, timeout);
        }
        st.kicked = false;
        !st.stopping
    }

    /// Tells the refill thread to end (it does after its current step).
    pub(super) fn stop_refill(&self) {
        let mut st = self.state.lock();
        st.stopping = true;
        self.work.notify_one();
    }

    /// Records the current task as the refill thread (at its start), for
    /// [`Self::is_refill_task`].
    pub(super) fn set_refill_task(&self) {
        self.refill_task
            .store(Task::current_raw() as usize, Relaxed);
    }

    /// Whether the current task is the refill thread.
    pub(super) fn is_refill_task(&self) -> bool {
        self.refill_task.load(Relaxed) == Task::current_raw() as usize
    }

    /// Removes one ready range for which `pick(nid, range)` holds, with
    /// the lock held only for the removal; the caller frees it.
    fn remove_one(
        &self,
        mut pick: impl FnMut(usize, &NodePool, &GiganticRange) -> bool,
    ) -> Option<(usize, GiganticRange)> {
        let mut st = self.state.lock();
        for (nid, n) in st.nodes.iter_mut().enumerate() {
            let Some(i) = n.ready.iter().position(|r| pick(nid, n, r)) else {
                continue;
            };
            let r = n.ready.remove(i).ok()?;
            self.ready[nid].fetch_sub(1, Relaxed);
            return Some((nid, r));
        }
        None
    }

    /// Frees ready ranges above each node's target.
    fn trim(&self) {
        while let Some((_, r)) = self.remove_one(|_, n, _| n.ready.len() > n.target as usize) {
            drop(r);
            // SAFETY: process context, no lock held.
            unsafe { shim::tk_cond_resched() };
        }
    }

    /// Sets every target to 0 and frees every ready range (rmmod).
    pub(crate) fn drain(&self) {
        for n in self.state.lock().nodes.iter_mut() {
            n.target = 0;
        }
        self.trim();
    }

    /// `MEM_GOING_OFFLINE` for pfns `start..end`: frees the ready ranges
    /// that overlap it (the memory is isolated, so refill cannot take it
    /// again). Returns how many.
    pub(crate) fn release_in(&self, start: u64, end: u64) -> u32 {
        let mut n = 0;
        while let Some((nid, r)) =
            self.remove_one(|_, _, r| r.pfn() < end && start < r.pfn() + r.nr_pages())
        {
            pr_info!(
                "gigantic pool: gave back the range at pfn {:#x} on node {} for the offline of pfns {:#x}-{:#x}\n",
                r.pfn(),
                nid,
                start,
                end - 1
            );
            drop(r);
            n += 1;
        }
        n
    }

    /// `MEM_GOING_OFFLINE` of memory of `nid`: the node's refill pauses
    /// for [`PAUSE_NS`] from now (a device goes offline block by block, each
    /// block restarts the pause), and a range being filled for it is given
    /// up at its next clear step, or when its allocation returns
    /// ([`fill_one`](Self::fill_one)): an offline refused while the refill
    /// held a range of the node succeeds when tried again, instead of
    /// meeting the next range. The thread is kicked: it may sleep with
    /// nothing due, and must look again when the pause ends (and, if the
    /// node then has no memory, every 10 s until it is back).
    pub(crate) fn offlining(&self, nid: usize) {
        let mut st = self.state.lock();
        if let Some(n) = st.nodes.get_mut(nid) {
            n.offlines = n.offlines.wrapping_add(1);
            n.paused_until_ns = now_ns().saturating_add(PAUSE_NS);
        }
        self.kick_locked(&mut st);
    }

    /// What the refill thread does next (see [`next_refill`]).
    pub(crate) fn next(&self) -> Refill {
        let st = self.state.lock();
        next_refill(&pool_nodes(&st), now_ns())
    }

    /// [`next`](Self::next), and when a range is due now, its node, with
    /// the refill counted in `filling` under the same hold of the lock.
    fn claim_refill(&self) -> Option<usize> {
        let st = self.state.lock();
        match next_refill(&pool_nodes(&st), now_ns()) {
            Refill::Now(nid) => {
                self.filling.add(1, Relaxed);
                Some(nid)
            }
            _ => None,
        }
    }

    /// Refills under way: ranges the refill thread holds outside the pool
    /// (being allocated or cleared, or about to be).
    pub(crate) fn filling(&self) -> u64 {
        self.filling.load(Acquire)
    }

    /// Allocates and clears one range for `nid`'s pool and adds it if the
    /// pool is still short (else frees it). `stop` is asked every 2 MiB of
    /// clearing.
    ///
    /// Errors: `ENOMEM` (or `EINVAL` for a node without memory) when no
    /// range could be had: the node's refill pauses for [`PAUSE_NS`] and
    /// the first failure is logged; `EINTR` when `stop` said so, or the
    /// node's pool no longer wants the range (its target was lowered to
    /// its ready count or below, or an offline of the node's memory began:
    /// [`offlining`](Self::offlining)) before the range was added (it is
    /// freed).
    pub(crate) fn fill_one(&self, nid: usize, stop: &dyn Fn() -> bool) -> Result {
        if nid >= MAX_NUMNODES {
            return Err(EINVAL);
        }
        let offlines = self.state.lock().nodes[nid].offlines;
        let mut range = match GiganticRange::alloc_for_pool(nid, self.range_pages) {
            Ok(r) => r,
            Err(e) => {
                let mut st = self.state.lock();
                let n = &mut st.nodes[nid];
                n.paused_until_ns = now_ns().saturating_add(PAUSE_NS);
                if !n.failing {
                    n.failing = true;
                    pr_warn!(
                        "gigantic pool: no free aligned {} MiB range on node {} ({:?}); {} of {} ready, retrying every 10 s\n",
                        (self.range_pages * PAGE_BYTES) >> 20,
                        nid,
                        e,
                        n.ready.len(),
                        n.target
                    );
                }
                return Err(e);
            }
        };
        if self.poison {
            // SAFETY: the range is ours alone, `bytes()` long from its
            // direct-map address.
            unsafe {
                shim::tk_memset64(
                    range.as_ptr().cast(),
                    0x5a5a_5a5a_5a5a_5a5a,
                    (range.bytes() / 8) as usize,
                )
            };
        }
        // A target lowered meanwhile (to the ready count or below) makes
        // this range unneeded: stop clearing and free it now, as a lowered
        // target frees ready ranges, rather than after the whole clear
        // (tens of seconds on CXL memory).
        let unneeded = || {
            let st = self.state.lock();
            let n = &st.nodes[nid];
            n.ready.len() >= n.target as usize || n.offlines != offlines
        };
        // With init_on_alloc on, the allocator's zeroing was this range's
        // clear (the poison of the tests asks for a real one).
        if self.poison || !range.zeroed_by_allocator() {
            clear_slowly(&mut range, &|| stop() || unneeded())?;
        }
        let mut st = self.state.lock();
        let n = &mut st.nodes[nid];
        n.failing = false;
        if n.offlines != offlines {
            // An offline of the node's memory began since the allocation
            // (which no clear step saw, with init_on_alloc): give it up.
            drop(st);
            drop(range);
            return Err(EINTR);
        }
        if n.ready.len() < n.target as usize {
            // On failure the range is freed (under the lock; rare).
            n.ready.push(range, GFP_KERNEL)?;
            self.ready[nid].add(1, Relaxed);
        } else {
            drop(st);
            drop(range);
        }
        Ok(())
    }

    /// The shrinker's count for `nid`: its ready base pages.
    pub(super) fn count(&self, nid: usize) -> u64 {
        self.ready(nid) * self.range_pages
    }

    /// The shrinker's scan: frees ready ranges of `nid` covering at least
    /// `nr` base pages (one at least) and pauses its refill. Returns the
    /// base pages freed, or `u64::MAX` (`SHRINK_STOP`) if the pool was busy
    /// before anything was freed.
    pub(crate) fn scan(&self, nid: usize, nr: u64) -> u64 {
        let want = nr.div_ceil(self.range_pages).max(1);
        let mut freed = 0;
        for _ in 0..want {
            let r = {
                let Some(mut st) = self.state.try_lock() else {
                    return if freed == 0 { u64::MAX } else { freed };
                };
                let Some(n) = st.nodes.get_mut(nid) else {
                    break;
                };
                let Some(r) = n.ready.pop() else {
                    break;
                };
                n.paused_until_ns = now_ns().saturating_add(PAUSE_NS);
                self.ready[nid].fetch_sub(1, Relaxed);
                self.shrunk.add(1, Relaxed);
                // The thread may sleep without a timeout (pool was full):
                // wake it so that it waits out the pause and refills.
                self.kick_locked(&mut st);
                r
            };
            drop(r);
            freed += self.range_pages;
        }
        freed
    }
}

/// Clears `range` with `clear_pages()`, 2 MiB at a time, rescheduling in
/// between and asking `stop`.
///
/// Errors: `EINTR` when `stop` returned true.
fn clear_slowly(range: &mut GiganticRange, stop: &dyn Fn() -> bool) -> Result {
    let mut off = 0;
    while off < range.nr_pages() {
        let n = CLEAR_STEP_PAGES.min(range.nr_pages() - off);
        // SAFETY: pages `off..off + n` of the range, which is ours alone
        // (`&mut`), are in the direct map from `as_ptr()`.
        unsafe {
            let addr = range.as_ptr().add((off * PAGE_BYTES) as usize);
            shim::tk_clear_pages(addr.cast(), n as c_uint);
        }
        off += n;
        // SAFETY: process context, no spinlock held.
        unsafe { shim::tk_cond_resched() };
        if stop() {
            return Err(EINTR);
        }
    }
    Ok(())
}

impl GiganticPool {
    /// How long the refill thread sleeps before it looks again, in
    /// jiffies: `None` when a range is due now; else until the earliest
    /// pause ends (1 ms to 60 s), [`PAUSE_NS`] while a short node has no
    /// memory (the refill resumes within that once it is back online), or
    /// `MAX_SCHEDULE_TIMEOUT` (until woken).
    pub(super) fn refill_wait(&self) -> Option<Jiffies> {
        match self.next() {
            Refill::Now(_) => None,
            Refill::At(t) => {
                let ms = (t.saturating_sub(now_ns()) / 1_000_000).clamp(1, 60_000);
                Some(msecs_to_jiffies(ms as u32))
            }
            Refill::NoMemory => Some(msecs_to_jiffies((PAUSE_NS / 1_000_000) as u32)),
            Refill::Idle => Some(MAX_SCHEDULE_TIMEOUT as Jiffies),
        }
    }

    /// One step of the refill thread: fills one range on the node due, on
    /// the CPUs nearest it; `stop` is asked between clear steps.
    pub(super) fn refill_step(&self, stop: &dyn Fn() -> bool) {
        let Some(nid) = self.claim_refill() else {
            return;
        };
        // Uncounted after fill_one, which has then added or freed its range.
        let _filling = Filling(&self.filling);
        // SAFETY: `nid` has memory (next_refill), so it is an online node.
        unsafe {
            let near = kernel::bindings::numa_nearest_node(
                nid as c_int,
                kernel::bindings::node_states_N_CPU,
            );
            shim::tk_bind_to_node_cpus(near)
        };
        // Failures pause the node and are logged by fill_one.
        let _ = self.fill_one(nid, stop);
    }
}

/// Each node's pool as [`next_refill`] sees it.
fn pool_nodes(st: &PoolState) -> [PoolNode; MAX_NUMNODES] {
    core::array::from_fn(|nid| {
        let n = &st.nodes[nid];
        PoolNode {
            target: n.target,
            ready: n.ready.len() as u32,
            paused_until_ns: n.paused_until_ns,
            has_memory: nid < possible_nodes() && node::has_memory(nid),
        }
    })
}

impl GiganticPool {
    /// The first pfns of `nid`'s ready ranges, for tests.
    pub(crate) fn ready_pfns(&self, nid: usize) -> KVec<u64> {
        let mut v = KVec::new();
        if let Some(n) = self.state.lock().nodes.get(nid) {
            for r in n.ready.iter() {
                if v.push(r.pfn(), GFP_KERNEL).is_err() {
                    break;
                }
            }
        }
        v
    }
}

mod kunit;
