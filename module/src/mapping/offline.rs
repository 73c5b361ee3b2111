// SPDX-License-Identifier: GPL-2.0

//! The memory notifier: tierkit's pages when the memory under them goes
//! offline.
//!
//! tierkit's 4 KiB pages come from the node's kernel zones when it has
//! free memory there, and from ZONE_MOVABLE otherwise (a CXL node onlined
//! `online_movable` has nothing else). ZONE_MOVABLE promises that its
//! memory can be offlined, but the kernel cannot migrate pages a driver
//! inserted (they are not on the LRU, and `set_movable_ops()` is only for
//! balloon and zsmalloc pages). So tierkit keeps the promise itself, as
//! virtio-mem and other memory-notifier users do: on `MEM_GOING_OFFLINE`
//! (the range is isolated, nothing new is allocated in it) it moves each of
//! its pages in the range to a new page on the nearest other node with
//! memory, in the offlined node's zonelist order (as `do_migrate_range()`
//! picks a target), by zapping the pages' PTEs, copying, and swapping the
//! pages in the [`Backing`]; the next touch faults the new page in. The
//! moves are batched as a rebalance's ([`super::moves`]: up to 512 pages
//! picked under the mapping's lock, their new pages allocated without it,
//! each pick checked again, one zap and TLB flush for the batch), so a
//! fault waits for one batch at most and a block of pages costs a TLB
//! flush per 512 pages, not per page. The statistics follow the pages.
//! Pages someone may be doing DMA to (`FOLL_PIN`), or that hold a
//! reference beside the mapping's, are not moved: the offline fails with
//! `EBUSY`; without a page to move one to, with `ENOMEM`; on a signal,
//! with `EINTR` (checked between batches). The pages moved before stay
//! moved.
//!
//! On kernel (non-movable) memory the kernel refuses to isolate a range
//! with tierkit's pages in it, so such an offline fails with `EBUSY` at
//! once, before the notifier runs.
//!
//! Gigantic ranges are only on ZONE_MOVABLE with the `movable_gigantic`
//! opt-in; offlining a block inside one fails at once with `EBUSY` and a
//! message naming the range.

use super::Backing;
use crate::shim;
use crate::state::{DeviceState, Registry};
use kernel::{
    bindings,
    ffi::{c_int, c_ulong, c_void},
    prelude::*,
    sync::Arc,
};

/// `MEM_GOING_OFFLINE` for pfns `start..start + nr`: every backing in
/// `registry` moves its pages out, or the first refusal fails the offline.
fn going_offline(registry: &Registry, start: u64, nr: u64) -> Result {
    // Ranges no mapping holds (yet) too: a TK_IOC_CLEAR_BENCH range, a
    // GiB being cleared at its first touch. The kernel cannot migrate
    // them and would retry until the offlining task is killed.
    // SAFETY: no precondition; the block going offline is still online
    // until MEM_OFFLINE, so this finds its first page.
    let first = unsafe { shim::tk_pfn_to_online_page(start as c_ulong) };
    if first.is_null() {
        return Ok(());
    }
    // SAFETY: an online pfn's struct page.
    let nid = unsafe { bindings::page_to_nid(first) };
    if crate::clear::range::movable_pending(nid as usize) {
        pr_warn!(
                "refusing to offline pfns {:#x}-{:#x}: tierkit is taking a 1 GiB range on node {} with movable_gigantic; try again\n",
                start,
                start + nr - 1,
                nid
            );
        return Err(EBUSY);
    }
    if let Some((pfn, pages)) = crate::clear::movable_range_in(start, start + nr) {
        pr_warn!(
                "refusing to offline pfns {:#x}-{:#x}: they hold tierkit's {} MiB range at pfn {:#x} (taken with movable_gigantic; the kernel cannot migrate it)\n",
                start,
                start + nr - 1,
                (pages * crate::chunks::PAGE_BYTES) >> 20,
                pfn
            );
        return Err(EBUSY);
    }
    registry.for_each(|addr| {
        // SAFETY: a registered backing is alive until `f` returns for it
        // (`Registry`'s type invariant).
        let b = unsafe { &*(addr as *const Backing) };
        b.going_offline(start, start + nr)
    })?;
    // What no registered mapping answered for: pages of an mmap or a
    // TK_IOC_BULK in progress, and pages a pipe, O_DIRECT, io_uring or a
    // ptrace peek still holds after their file let go (see
    // crate::pages::movable).
    let held = crate::pages::movable::busy(start, nr);
    if held != 0 {
        crate::ratelimit::ratelimited!(
            pr_warn,
            "refusing to offline pfns {:#x}-{:#x}: {} tierkit pages there are not in a mapping yet or still held after their file let go (a pipe, O_DIRECT, io_uring, ptrace); try again\n",
            start,
            start + nr - 1,
            held
        );
        return Err(EBUSY);
    }
    Ok(())
}

/// The registration of tierkit's memory notifier for `state`.
///
/// # Invariants
///
/// The C shim's memory notifier is registered with a pointer to `*state`
/// until this value drops.
pub(crate) struct MemoryNotifier {
    state: Arc<DeviceState>,
}

impl MemoryNotifier {
    pub(crate) fn register(state: Arc<DeviceState>) -> Result<Self> {
        let ctx = core::ptr::from_ref::<DeviceState>(&state)
            .cast_mut()
            .cast::<c_void>();
        // SAFETY: `ctx` points to the `DeviceState` that `state` keeps alive; the
        // notifier is unregistered in drop, before `state` is released.
        let ret = unsafe { shim::tk_register_memory_notifier(Some(memory_event), ctx) };
        kernel::error::to_result(ret)?;
        // INVARIANT: registered just above.
        Ok(Self { state })
    }
}

impl Drop for MemoryNotifier {
    fn drop(&mut self) {
        // SAFETY: By the type invariant, it is registered; after this no
        // callback runs or is running.
        unsafe { shim::tk_unregister_memory_notifier() };
        let _ = &self.state;
    }
}

/// The memory notifier's callback for `MEM_GOING_OFFLINE`.
///
/// # Safety
///
/// `ctx` is the `DeviceState` that [`MemoryNotifier::register`] registered, alive.
unsafe extern "C" fn memory_event(
    ctx: *mut c_void,
    start_pfn: c_ulong,
    nr_pages: c_ulong,
) -> c_int {
    // SAFETY: see the function's safety section.
    let state = unsafe { &*ctx.cast::<DeviceState>() };
    // The pool's refill of the node pauses and gives up a range it is
    // filling, so that it cannot race this offline (or its retry) with a
    // new range; ready ranges of the pool are nobody's yet: give them back.
    // SAFETY: no precondition; the block is online until MEM_OFFLINE.
    let first = unsafe { shim::tk_pfn_to_online_page(start_pfn) };
    if !first.is_null() {
        // SAFETY: an online pfn's struct page.
        let nid = unsafe { bindings::page_to_nid(first) };
        state.pool.offlining(nid as usize);
    }
    state
        .pool
        .release_in(start_pfn as u64, (start_pfn + nr_pages) as u64);
    match going_offline(&state.mappings, start_pfn as u64, nr_pages as u64) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}
