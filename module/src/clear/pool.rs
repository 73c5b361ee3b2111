// SPDX-License-Identifier: GPL-2.0

//! The worker pool: one work item per worker, queued with `queue_work_on()`
//! on a chosen CPU of a per-operation bound workqueue. Workers claim chunks
//! from an atomic cursor until the plan runs out, and the last one to finish
//! completes the caller's [`KillableCompletion`].
//!
//! `padata_do_multithreaded()` would do this for a built-in caller, but it is
//! `__init` and not exported.

use crate::chunks::{ChunkPlan, PAGE_BYTES};
use crate::shim;
use crate::sync::KillableCompletion;
use core::ptr::NonNull;
use kernel::{
    bindings,
    cpu::CpuId,
    new_work,
    prelude::*,
    sync::{
        atomic::{Atomic, Full, Relaxed},
        Arc,
    },
    workqueue::{impl_has_work, RawWorkItem, Work, WorkItem},
};

/// `Worker::ran_on` before the worker ran.
const NOT_RUN: u32 = u32::MAX;

/// What one worker did.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WorkerReport {
    /// The CPU it was queued on.
    pub(crate) cpu: u32,
    /// The CPU it ran on (`u32::MAX` if it never ran).
    pub(crate) ran_on: u32,
    /// Chunks it cleared.
    pub(crate) chunks: u64,
    /// Pages it cleared.
    pub(crate) pages: u64,
}

/// What a parallel clear did.
pub(crate) struct PoolReport {
    /// From queueing the first worker to the completion.
    pub(crate) elapsed_ns: u64,
    /// One entry per worker started.
    pub(crate) workers: KVec<WorkerReport>,
}

impl PoolReport {
    /// Pages cleared by all workers together.
    pub(crate) fn pages(&self) -> u64 {
        self.workers.iter().map(|w| w.pages).sum()
    }
}

/// State shared by the caller and the workers of one clear.
///
/// # Invariants
///
/// `base` is the kernel virtual address of `plan.nr_pages()` writable pages
/// that nothing else reads or writes until the caller's `clear_range`
/// returns; each chunk index is handed out once by `cursor`.
#[pin_data]
struct Shared {
    base: usize,
    plan: ChunkPlan,
    cursor: Atomic<u64>,
    /// Workers still running, plus one held by the caller while queueing.
    remaining: Atomic<u32>,
    /// First error a worker hit (negative errno), 0 if none.
    error: Atomic<i32>,
    /// Test hook: the worker with this index fails on the first chunk it
    /// claims, leaving that chunk uncleared.
    fail_worker: u32,
    #[pin]
    done: KillableCompletion,
}

impl Shared {
    /// Drops one reference from `remaining`; the last completes the caller.
    fn put(&self) {
        // Full ordering: every worker's writes (pages and counters) happen
        // before the last decrement, and so before `complete_all()`.
        if self.remaining.fetch_sub(1, Full) == 1 {
            self.done.complete_all();
        }
    }

    fn fail(&self, err: Error) {
        let _ = self.error.cmpxchg(0, err.to_errno(), Relaxed);
    }
}

/// One worker of a clear: a work item queued on `cpu` that claims chunks
/// from the [`Shared`] cursor and clears them, and counts what it did.
#[pin_data]
struct Worker {
    /// The work item `queue_work_on()` runs.
    #[pin]
    work: Work<Worker>,
    /// The clear this worker takes part in.
    shared: Arc<Shared>,
    /// Position among the clear's workers (for `Shared::fail_worker`).
    index: u32,
    /// The CPU it is queued on.
    cpu: u32,
    /// The CPU it ran on, [`NOT_RUN`] until it runs.
    ran_on: Atomic<u32>,
    /// Chunks it cleared.
    chunks: Atomic<u64>,
    /// Pages it cleared.
    pages: Atomic<u64>,
}

impl_has_work! {
    impl HasWork<Self> for Worker { self.work }
}

impl WorkItem for Worker {
    type Pointer = Arc<Worker>;

    fn run(this: Arc<Worker>) {
        this.clear_chunks();
        this.shared.put();
    }
}

impl Worker {
    fn clear_chunks(&self) {
        let s = &*self.shared;
        self.ran_on.store(CpuId::current().as_u32(), Relaxed);
        // Another worker failed: stop early, the caller reports its error.
        while s.error.load(Relaxed) == 0 {
            let Some(chunk) = s.plan.chunk(s.cursor.fetch_add(1, Relaxed)) else {
                break;
            };
            if self.index == s.fail_worker {
                s.fail(EIO);
                break;
            }
            let addr = s.base + (chunk.first_page * PAGE_BYTES) as usize;
            // SAFETY: By the type invariant of `Shared`, the chunk lies inside the
            // range at `base`, which nothing else touches, and this worker
            // is the only one to get this chunk index from the cursor.
            unsafe { shim::tk_clear_pages(addr as *mut c_void, chunk.nr_pages) };
            self.chunks.add(1, Relaxed);
            self.pages.add(u64::from(chunk.nr_pages), Relaxed);
            // clear_pages() does not reschedule; a chunk is at most 32 MiB.
            // SAFETY: process context (a kworker), no locks held.
            unsafe { shim::tk_cond_resched() };
        }
    }
}

/// A workqueue of our own, destroyed (after draining) on drop.
///
/// # Invariants
///
/// The pointer is a live workqueue from `alloc_workqueue()` (through
/// [`shim::tk_alloc_workqueue`]), owned by this value alone: nothing else
/// destroys it, and it is destroyed exactly once, on drop.
struct OwnedQueue(NonNull<bindings::workqueue_struct>);

impl OwnedQueue {
    fn new() -> Result<Self> {
        // SAFETY: the name is a NUL-terminated static string; the shim
        // allocates a per-CPU (bound), CPU-intensive workqueue.
        let wq = unsafe { shim::tk_alloc_workqueue(c"tierkit_clear".as_char_ptr()) };
        // INVARIANT: a non-NULL result is a new workqueue that only this
        // value refers to.
        Ok(Self(NonNull::new(wq).ok_or(ENOMEM)?))
    }
}

impl Drop for OwnedQueue {
    fn drop(&mut self) {
        // SAFETY: By the type invariant, the queue is a live workqueue from
        // alloc_workqueue() that nobody else destroys. destroy_workqueue()
        // drains it first, so no work item of ours runs after this returns.
        unsafe { bindings::destroy_workqueue(self.0.as_ptr()) };
    }
}

/// Clears `nr_pages` pages at `base` with one worker on each of `cpus`, in
/// chunks of `chunk_pages`, and waits for them.
///
/// Workers beyond the number of chunks are not started. `fail_worker` is a
/// test hook: that worker fails with `EIO` on the first chunk it claims (`None` in
/// real use).
///
/// The wait is killable: on a fatal signal the workers stop after their
/// current chunk and the result is `EINTR`, with the range partly cleared.
///
/// Errors: `EINVAL` for an empty plan or no CPU; `ENOMEM`; `EINTR`; the
/// first error a worker reported; `EIO` if the workers cleared fewer pages
/// than planned.
///
/// # Safety
///
/// `base` must be the kernel virtual address of `nr_pages` writable pages
/// that nothing else accesses until this function returns.
pub(crate) unsafe fn clear_range(
    base: *mut u8,
    nr_pages: u64,
    cpus: &[u32],
    chunk_pages: u32,
    fail_worker: Option<u32>,
) -> Result<PoolReport> {
    let plan = ChunkPlan::new(nr_pages, chunk_pages).ok_or(EINVAL)?;
    let nr_workers = crate::chunks::workers_for(&plan, cpus.len() as u32);
    if nr_workers == 0 {
        return Err(EINVAL);
    }
    let wq = OwnedQueue::new()?;
    // INVARIANT: the caller guarantees `base` per this function's safety
    // section, and `wq` is destroyed (drained) before it returns.
    let shared = Arc::pin_init(
        pin_init!(Shared {
            base: base as usize,
            plan,
            cursor: Atomic::new(0),
            remaining: Atomic::new(1),
            error: Atomic::new(0),
            fail_worker: fail_worker.unwrap_or(u32::MAX),
            done <- KillableCompletion::new(),
        }),
        GFP_KERNEL,
    )?;

    // Allocate every worker before queueing any, so that an allocation
    // failure leaves nothing running.
    let mut workers = KVec::with_capacity(nr_workers as usize, GFP_KERNEL)?;
    for (index, &cpu) in cpus.iter().take(nr_workers as usize).enumerate() {
        let shared = shared.clone();
        let w = Arc::pin_init(
            pin_init!(Worker {
                work <- new_work!("tierkit::clear::Worker"),
                shared,
                index: index as u32,
                cpu,
                ran_on: Atomic::new(NOT_RUN),
                chunks: Atomic::new(0),
                pages: Atomic::new(0),
            }),
            GFP_KERNEL,
        )?;
        workers.push(w, GFP_KERNEL)?;
    }

    // SAFETY: reads the clock.
    let start = unsafe { shim::tk_ktime_get_ns() };
    let wq_ptr = wq.0.as_ptr();
    for w in workers.iter() {
        shared.remaining.add(1, Relaxed);
        let cpu = w.cpu;
        // SAFETY: `Queue::enqueue` always passes WORK_CPU_UNBOUND, so this is
        // its body with a chosen CPU. The closure returns false only if the
        // work item is already queued (never: it is new). `Worker` is `Send`
        // and has no lifetime; its `Shared::base` stays valid because `wq`
        // is drained before this function returns. `wq_ptr` is a live
        // workqueue by the type invariant of `OwnedQueue`, and `wq` is only
        // dropped after the wait below. `queue_work_on()` gets a pointer
        // that `__enqueue` keeps valid until the work runs.
        let queued = unsafe {
            RawWorkItem::<0>::__enqueue(w.clone(), move |work| {
                bindings::queue_work_on(cpu as c_int, wq_ptr, work)
            })
        };
        if queued.is_err() {
            shared.fail(EBUSY);
            shared.put();
        }
    }
    // Drop the caller's reference; if every worker is done already this
    // completes, and the wait returns at once.
    shared.put();
    if shared.done.wait_killable().is_err() {
        // A fatal signal: make every worker stop at its next chunk (at most
        // 32 MiB away), then wait for them, since they use `base`.
        shared.fail(EINTR);
        shared.done.wait();
    }
    // SAFETY: reads the clock.
    let elapsed_ns = unsafe { shim::tk_ktime_get_ns() } - start;
    // No work item of ours may run past this point.
    drop(wq);

    let mut report = PoolReport {
        elapsed_ns,
        workers: KVec::with_capacity(workers.len(), GFP_KERNEL)?,
    };
    for w in workers.iter() {
        report.workers.push(
            WorkerReport {
                cpu: w.cpu,
                ran_on: w.ran_on.load(Relaxed),
                chunks: w.chunks.load(Relaxed),
                pages: w.pages.load(Relaxed),
            },
            GFP_KERNEL,
        )?;
    }
    let err = shared.error.load(Relaxed);
    if err != 0 {
        return Err(Error::from_errno(err));
    }
    if report.pages() != nr_pages {
        crate::ratelimit::ratelimited!(
            pr_err,
            "clear: workers cleared {} of {} pages\n",
            report.pages(),
            nr_pages
        );
        return Err(EIO);
    }
    Ok(report)
}
