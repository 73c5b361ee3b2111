// SPDX-License-Identifier: GPL-2.0

//! The refill thread and the shrinker of the pre-cleared gigantic pool
//! ([`GiganticPool`]).
//!
//! The 7.3 kernel crate has no kthread or shrinker abstraction, so both
//! are made here on the C API through `bindings`, as Binder makes its
//! shrinker: `kthread_create_on_node()` and `kthread_stop_put()`,
//! `shrinker_alloc()`, `shrinker_register()` and `shrinker_free()`.
//!
//! The thread runs at nice 19, as khugepaged, so that it yields to every
//! normal task. It asks the pool what is due ([`GiganticPool::refill_wait`]):
//! a range now ([`GiganticPool::refill_step`]), or a sleep until a pause
//! ends or until it is kicked ([`GiganticPool::wait_for_work`]).
//!
//! Module lifetime: [`PoolWorker`] is dropped in module exit, and its drop
//! frees the shrinker (`shrinker_free()` waits for callbacks in flight)
//! and stops the thread (`kthread_stop_put()` waits for it to exit) before
//! it returns, so no code of the module runs on their behalf after it.

use super::ready::GiganticPool;
use crate::shim;
use core::ptr::NonNull;
use kernel::{
    bindings,
    error::from_err_ptr,
    ffi::{c_int, c_ulong, c_void},
    prelude::*,
    sync::Arc,
    task::Task,
};

/// The refill thread and the shrinker of the module's pool. Dropping it
/// stops both and frees every ready range.
///
/// # Invariants
///
/// `task` is the refill kthread over `pool`, created by
/// `kthread_create_on_node()` and woken, not yet stopped, and this value
/// holds a reference on its `task_struct` (so stopping it is valid even
/// after the thread function returned). `shrinker` is registered, with
/// `pool` as its `private_data`, and not yet freed. `pool` keeps the pool
/// alive for both.
pub(crate) struct PoolWorker {
    pool: Arc<GiganticPool>,
    task: NonNull<bindings::task_struct>,
    shrinker: NonNull<bindings::shrinker>,
}

// SAFETY: the pointers are only used by `drop`, which may run on any thread.
unsafe impl Send for PoolWorker {}
// SAFETY: `&PoolWorker` gives access to nothing.
unsafe impl Sync for PoolWorker {}

impl PoolWorker {
    /// Starts the refill thread and registers the shrinker of `pool`.
    ///
    /// Errors: the error of `kthread_create_on_node()` (`ENOMEM`, or
    /// `EINTR` when the caller is being killed); `ENOMEM` if the shrinker
    /// cannot be had. Nothing is left running then.
    pub(crate) fn start(pool: Arc<GiganticPool>) -> Result<Self> {
        let ctx = Arc::as_ptr(&pool).cast_mut().cast::<c_void>();
        // SAFETY: `refill_thread` gets `ctx`, the pool, which `pool` keeps
        // alive until the thread is stopped (below on failure, else in
        // drop); the name is a C string without conversion specifiers.
        let task = unsafe {
            bindings::kthread_create_on_node(
                Some(refill_thread),
                ctx,
                bindings::NUMA_NO_NODE,
                c"tierkit_pool".as_char_ptr(),
            )
        };
        let task = NonNull::new(from_err_ptr(task)?).ok_or(ENOMEM)?;
        // SAFETY: `task` was just created and not woken, so it is alive;
        // the reference taken here is put by `kthread_stop_put()`.
        unsafe { bindings::get_task_struct(task.as_ptr()) };
        // SAFETY: `task` is alive (the reference above).
        unsafe { bindings::wake_up_process(task.as_ptr()) };
        let shrinker = match register_shrinker(ctx) {
            Ok(s) => s,
            Err(e) => {
                pool.stop_refill();
                // SAFETY: `task` is a kthread of ours with our reference,
                // not stopped yet; it is not used again.
                unsafe { bindings::kthread_stop_put(task.as_ptr()) };
                return Err(e);
            }
        };
        // INVARIANT: the thread was created and woken with our reference,
        // the shrinker registered over `pool`, just above.
        Ok(Self {
            pool,
            task,
            shrinker,
        })
    }
}

impl Drop for PoolWorker {
    fn drop(&mut self) {
        // SAFETY: By the type invariant, registered and not freed;
        // `shrinker_free()` unregisters it and waits for callbacks in
        // flight, so none runs after this.
        unsafe { bindings::shrinker_free(self.shrinker.as_ptr()) };
        self.pool.stop_refill();
        // SAFETY: By the type invariant, a kthread of ours, not stopped,
        // whose `task_struct` our reference keeps valid; this waits for
        // the thread to return and puts the reference.
        unsafe { bindings::kthread_stop_put(self.task.as_ptr()) };
        self.pool.drain();
    }
}

/// The refill kthread: refills the pool until stopped.
///
/// # Safety
///
/// `ctx` is the `GiganticPool` of a [`PoolWorker`], which stops this
/// thread before the pool can go.
unsafe extern "C" fn refill_thread(ctx: *mut c_void) -> c_int {
    // SAFETY: see the function's safety section.
    let pool = unsafe { &*ctx.cast::<GiganticPool>() };
    // SAFETY: the current task is this kthread; `MAX_NICE` is a valid nice.
    unsafe { bindings::sched_set_normal(Task::current_raw(), bindings::MAX_NICE as c_int) };
    pool.set_refill_task();
    // Freezable, as kthreads that allocate and write memory should be:
    // suspend and hibernation freeze it between steps (the loop's
    // kthread_freezable_should_stop()). Its wait is interruptible, so the
    // freezer's wake-up reaches it.
    // SAFETY: called in a kthread (this one).
    unsafe { shim::tk_set_freezable() };
    // SAFETY: called in a kthread (this one).
    let stop = || unsafe { bindings::kthread_should_stop() };
    // SAFETY: called in this freezable kthread, no lock held.
    while !unsafe { bindings::kthread_freezable_should_stop(core::ptr::null_mut()) } {
        match pool.refill_wait() {
            None => {
                pool.refill_step(&stop);
                // SAFETY: process context, no lock held.
                unsafe { shim::tk_cond_resched() };
            }
            Some(timeout) => {
                if !pool.wait_for_work(timeout) {
                    break;
                }
            }
        }
    }
    0
}

/// Allocates and registers a NUMA-aware shrinker over the pool `ctx`,
/// counting base pages (as the huge zero page's shrinker does).
///
/// Errors: `ENOMEM`.
fn register_shrinker(ctx: *mut c_void) -> Result<NonNull<bindings::shrinker>> {
    // SAFETY: no precondition.
    let flags = unsafe { shim::tk_shrinker_numa_aware() };
    // SAFETY: the name is a C string without conversion specifiers.
    let s = unsafe { bindings::shrinker_alloc(flags, c"tierkit-gigantic-pool".as_char_ptr()) };
    let s = NonNull::new(s).ok_or(ENOMEM)?;
    let p = s.as_ptr();
    // SAFETY: `p` is a fresh shrinker of ours, not registered yet: nothing
    // else looks at it; these are the fields `shrinker_register()` needs
    // set (the rest `shrinker_alloc()` set up). `ctx` outlives the
    // shrinker (the caller frees it first).
    unsafe {
        (&raw mut (*p).count_objects).write(Some(shrink_count));
        (&raw mut (*p).scan_objects).write(Some(shrink_scan));
        (&raw mut (*p).seeks).write(bindings::DEFAULT_SEEKS as c_int);
        (&raw mut (*p).private_data).write(ctx);
        bindings::shrinker_register(p);
    }
    Ok(s)
}

/// The shrinker's `count_objects`: the ready base pages of `sc->nid`.
///
/// # Safety
///
/// Called by the shrinker core with a shrinker from [`register_shrinker`]
/// (whose `private_data` is a live pool) and a valid `shrink_control`.
unsafe extern "C" fn shrink_count(
    s: *mut bindings::shrinker,
    sc: *mut bindings::shrink_control,
) -> c_ulong {
    // SAFETY: see the function's safety section.
    let (pool, nid) = unsafe { (&*(*s).private_data.cast::<GiganticPool>(), (*sc).nid) };
    usize::try_from(nid).map_or(0, |n| pool.count(n)) as c_ulong
}

/// The shrinker's `scan_objects`: frees ready ranges of `sc->nid`, at
/// least one and as many as cover `sc->nr_to_scan` base pages, and reports
/// in `sc->nr_scanned` every base page it freed: the shrinker core takes
/// that from the pass's `total_scan`, so a pass asking for a few pages
/// (kswapd at a low priority) frees one range, not the whole pool one
/// `SHRINK_BATCH` at a time.
///
/// # Safety
///
/// As [`shrink_count`].
unsafe extern "C" fn shrink_scan(
    s: *mut bindings::shrinker,
    sc: *mut bindings::shrink_control,
) -> c_ulong {
    // SAFETY: see the function's safety section.
    let (pool, nid, nr) = unsafe {
        (
            &*(*s).private_data.cast::<GiganticPool>(),
            (*sc).nid,
            (*sc).nr_to_scan,
        )
    };
    // `SHRINK_STOP` (~0UL).
    let shrink_stop = bindings::SHRINK_STOP as c_ulong;
    // Reclaim caused by the refill's own allocation (alloc_contig_pages()
    // migrating pages out of the range) must not free the pool it fills.
    if pool.is_refill_task() {
        return shrink_stop;
    }
    // `u64::MAX`: the pool was busy (try-lock), come back later.
    match usize::try_from(nid).map_or(0, |n| pool.scan(n, nr as u64)) {
        u64::MAX => shrink_stop,
        freed => {
            // SAFETY: `sc` is the valid `shrink_control` of this call.
            unsafe { (*sc).nr_scanned = freed.max(nr as u64) as c_ulong };
            freed as c_ulong
        }
    }
}

/// KUnit suite of the shrinker's protocol with the shrinker core, on a
/// test pool of small ranges (2 MiB) of node 0: the core's loop of
/// `do_shrink_slab()` is played here, with the batch it uses.
#[kunit_tests(tierkit_pool_shrinker)]
mod tests {
    use super::*;

    /// Pages of a test range: 2 MiB.
    const PAGES: u64 = 512;
    /// `SHRINK_BATCH`: what the core asks per call.
    const BATCH: u64 = 128;

    /// `do_shrink_slab()`'s loop over `total_scan` base pages: the ranges
    /// left ready on node 0 afterwards, and the `nr_scanned` reports.
    fn one_pass(pool: &GiganticPool, total_scan: u64) -> (u64, KVec<u64>) {
        // SAFETY: all-zero is a valid `shrinker` and `shrink_control`
        // (plain integers, pointers and lists nobody walks here).
        let mut s: bindings::shrinker = unsafe { core::mem::zeroed() };
        s.private_data = core::ptr::from_ref(pool).cast_mut().cast();
        let mut reports = KVec::new();
        let mut left = total_scan as i64;
        while left >= BATCH as i64 {
            // SAFETY: as above.
            let mut sc: bindings::shrink_control = unsafe { core::mem::zeroed() };
            sc.nid = 0;
            sc.nr_to_scan = BATCH as c_ulong;
            sc.nr_scanned = BATCH as c_ulong;
            // SAFETY: `s` names a live pool; `sc` is valid.
            let ret = unsafe { shrink_scan(&mut s, &mut sc) };
            if ret == bindings::SHRINK_STOP as c_ulong {
                break;
            }
            let _ = reports.push(sc.nr_scanned as u64, GFP_KERNEL);
            left -= sc.nr_scanned as i64;
        }
        (pool.ready(0), reports)
    }

    #[test]
    fn a_small_pass_frees_one_range_not_the_pool() {
        let never = || false;
        let Ok(p) = KBox::pin_init(GiganticPool::new(PAGES, true), GFP_KERNEL) else {
            return;
        };
        let mut filled = p.store(b"0 3").is_ok();
        for _ in 0..3 {
            filled &= p.fill_one(0, &never).is_ok();
        }
        // A pass of three batches: the core's figure for a pool of three
        // ranges at a low priority is far below one range.
        let (left, reports) = one_pass(&p, 3 * BATCH);
        let _ = p.store(b"0 0");
        drop(p);
        assert!(filled);
        assert_eq!(left, 2);
        assert_eq!(reports.len(), 1);
        assert_eq!(reports.first().copied(), Some(PAGES));
    }
}
