// SPDX-License-Identifier: GPL-2.0

//! What tierkit holds in ZONE_MOVABLE, for the memory notifier
//! (the C side is `shim_movable.c`).
//!
//! The kernel cannot migrate a page a driver allocated and inserted: it is
//! not on the LRU. If a block holding such a page goes offline and nobody
//! answers for it, `offline_pages()` loops (`scan_movable_pages()` skips
//! it, `test_pages_isolated()` fails) until the writer of `state` gets a
//! signal, holding `mem_hotplug_lock` for writing. Mappings move their
//! pages away (module/src/mapping.rs), but a page is tierkit's before any
//! mapping is registered (an `mmap` or `TK_IOC_BULK` in progress) and may
//! stay held after its mapping is gone (a pipe a `vmsplice()` filled,
//! O_DIRECT in flight, io_uring buffers, a ptrace peek).
//!
//! # Invariants
//!
//! Every page tierkit allocates in ZONE_MOVABLE (an order-0 [`NodePage`],
//! or a 1 GiB folio taken with `movable_gigantic`) is counted in its memory
//! section from its allocation ([`own`] and `GiganticRange`) until it is
//! back in the allocator. Its owner gives it back through
//! `tk_movable_put()`: freed at once when tierkit's reference is the only
//! one, else kept as an *orphan*, with tierkit's reference and its count,
//! until the other holders let go (a delayed work looks once a second, and
//! an offline of its block looks first). So no tierkit page in ZONE_MOVABLE
//! ever reaches the buddy allocator through another holder's `put_page()`
//! uncounted, and the notifier answers `EBUSY` at once for a block whose
//! sections still count pages after the registered mappings moved theirs
//! out ([`busy`]). A page allocated concurrently with an offline is either
//! counted before the notifier reads the counts, or sees the range marked
//! by the notifier (from `MEM_GOING_OFFLINE` until `MEM_OFFLINE` or
//! `MEM_CANCEL_OFFLINE`) and is given back, and the allocation is made
//! again (the range is isolated: it is not allocated from any more). A
//! range of order-0 pages taken with `movable_gigantic` (the pool's, until
//! a fault makes it a folio and counts it here) is nobody else's to hold:
//! the notifier knows it by its slot (`clear::movable_range_in`).
//!
//! Costs: O(1) per page (an atomic add on its section's counter; one
//! allocation per section ever used, kept until module exit), O(orphans)
//! per offline and per second while orphans exist.
//!
//! Limits: after module unload tierkit's orphans belong to their other
//! holders: their last `put_page()` frees them, and until then an offline
//! of their block waits for them as for any driver's page.
//!
//! [`NodePage`]: super::NodePage

use crate::shim;
use core::ptr::NonNull;
use kernel::{bindings, ffi::c_ulong, prelude::*};

/// Allocations made again when the page came from a range an offline is
/// taking down (isolated: a retry never gets such a page again).
const ISOLATED_RETRIES: usize = 4;

/// Makes `alloc()`'s page (NULL: `ENOMEM`) an owned, counted order-0 page,
/// allocating again if an offline isolated its pageblock meanwhile.
///
/// # Safety
///
/// `alloc` returns NULL or a fresh order-0 page with one reference that
/// the caller then owns.
pub(super) unsafe fn own(
    mut alloc: impl FnMut() -> *mut bindings::page,
) -> Result<NonNull<bindings::page>> {
    for _ in 0..ISOLATED_RETRIES {
        let page = NonNull::new(alloc()).ok_or(ENOMEM)?;
        // SAFETY: a fresh order-0 page we own (function's safety section).
        match unsafe { shim::tk_movable_track(page.as_ptr(), 1) } {
            0 => return Ok(page),
            ret => {
                // SAFETY: not counted (the track failed); our reference.
                unsafe { bindings::__free_pages(page.as_ptr(), 0) };
                if ret != EAGAIN.to_errno() {
                    return Err(ENOMEM);
                }
            }
        }
    }
    Err(ENOMEM)
}

/// Gives back the owner's reference to an order-0 page [`own`] made (see
/// the module's invariants).
///
/// # Safety
///
/// `page` came from [`own`]; the caller owns its reference and does not
/// use `page` afterwards.
pub(super) unsafe fn put(page: NonNull<bindings::page>) {
    // SAFETY: the function's safety section.
    unsafe { shim::tk_movable_put(page.as_ptr(), 1) };
}

/// The memory notifier's last word on pfns `start..start + nr`: the number
/// of tierkit pages still counted in their sections after the orphans that
/// only tierkit held were freed (0: nothing of tierkit's is left there).
pub(crate) fn busy(start: u64, nr: u64) -> u64 {
    // SAFETY: process context (the memory notifier).
    unsafe { shim::tk_movable_busy(start as c_ulong, nr as c_ulong) as u64 }
}

/// Test hook (`/sys/kernel/debug/tierkit/test/movable_register_delay_ms`):
/// milliseconds to sleep between an allocation of ZONE_MOVABLE pages and
/// their registration (a gigantic range, a 4 KiB `mmap`, `TK_IOC_BULK`),
/// so that a test can offline memory inside that window. 0 in production.
pub(crate) static REGISTER_DELAY_MS: kernel::sync::atomic::Atomic<u32> =
    kernel::sync::atomic::Atomic::new(0);

/// The test hook `test/movable_register_delay_ms` for 4 KiB pages: sleeps
/// that long (0 in production), or until a signal, while a 4 KiB `mmap`
/// holds pages not yet in a registered mapping and `TK_IOC_BULK` holds
/// its pages, so that a test can offline memory inside that window.
pub(crate) fn window_delay() {
    let ms = REGISTER_DELAY_MS.load(kernel::sync::atomic::Relaxed);
    if ms != 0 {
        // SAFETY: process context, no spinlock held.
        unsafe { bindings::msleep_interruptible(ms) };
    }
}

/// Pages tierkit keeps because someone else still holds them.
pub(crate) fn orphans() -> u64 {
    // SAFETY: no precondition.
    unsafe { shim::tk_movable_orphans() as u64 }
}

/// Puts tierkit's reference of every orphan at module exit (the last field
/// of the module, so it drops after every file, range and page).
pub(crate) struct MovableExit;

impl Drop for MovableExit {
    fn drop(&mut self) {
        // SAFETY: module exit: every file is closed and every range and
        // page of tierkit's is given back; nothing is tracked afterwards.
        unsafe { shim::tk_movable_exit() };
    }
}
