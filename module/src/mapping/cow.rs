// SPDX-License-Identifier: GPL-2.0

//! Copy-on-write between a process's 4 KiB tierkit mappings and its
//! forked child's (`TK_IOC_SNAPSHOT`, see
//! Documentation/ABI/testing/dev-tierkit).
//!
//! A tierkit mapping is `MAP_SHARED` of a device, so the kernel's fork
//! would share it. Before the fork, the parent (libtkrun's `pthread_atfork`
//! prepare handler) asks for a *snapshot* of each range into a new file:
//! the parent's vmas of the range become copy-on-write ones (shim_vma.c
//! `tk_mmap_lock_cow_current()`, the mmap lock held for writing for that
//! alone), every page of the range gets a second holder, the snapshot
//! ([`NodePage::share`]: a page reference and a share count), and the
//! parent's PTEs of the range are zapped, all under the backing's lock.
//! The child maps the snapshot at the same file offsets; that mmap inserts
//! nothing and its vmas are copy-on-write ones too (shim_vma.c
//! `tk_vma_set_cow()`). In a copy-on-write vma a fault maps a page
//! read-only, and a write to a page that is still shared copies it
//! ([`Backing::unshare`]) into a new page on the same node, charged to the
//! writer's memory cgroup; a write to a page that is not shared makes its
//! PTE writable. Copy-on-write vmas are write notified, so they refuse
//! long-term writable pins, the parent's from its first fork on. A page
//! stops being shared when all but one holder copied it or let go (the
//! child's exit or exec): the last holder then maps it without a copy.
//!
//! So no write of either side reaches the other after the parent's zap,
//! including the parent's other threads' (their next write faults and
//! waits for the lock). A fork costs a page reference and a share count
//! per page and the zap, as the kernel's fork costs a reference and a PTE
//! copy per page, and no copy; each side pays a copy per page it writes
//! while the other still shares it, and reads copy nothing. A page that
//! may be pinned for DMA is copied for the child at once, as fork copies a
//! pinned anonymous page.
//!
//! A shared page is never moved: a rebalance counts it busy and an
//! offline of its memory is refused (`EBUSY`), as for any page with a
//! reference beside its backing's (`Backing::swap_in` freezes the
//! references). Each holder counts it in the statistics and the global
//! limit: a snapshot reserves its full size, what the child may come to
//! hold.

use super::{Backing, BackingPages, GiganticPlan, GiganticRanges};
use crate::chunks::GIGANTIC_PAGES;
use crate::clear::gigantic::LastSlot;
use crate::clear::ClearParams;
use crate::pages::NodePage;
use crate::placed::PlacedPages;
use crate::shim;
use crate::state::{DeviceState, Reservation, Stats};
use crate::sync::resched_killable;
use kernel::{
    bindings,
    error::to_result,
    ffi::{c_int, c_ulong, c_void},
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    sync::Arc,
};

/// shim.h `TK_FAULT_WRITE`: the fault writes.
pub(crate) const FAULT_WRITE: u32 = 1;
/// shim.h `TK_FAULT_COW`: the vma is a copy-on-write one.
pub(crate) const FAULT_COW: u32 = 2;

/// What a snapshot holds.
pub(crate) enum SnapPages {
    /// 4 KiB pages, page `i` at `pgoff + i`.
    Small(PlacedPages),
    /// The GiBs of a gigantic range (`None`: not made at the snapshot) and
    /// how the snapshot's mapping makes the others at their first touch
    /// ([`super::gib`]).
    Gigantic(GiganticRanges, GiganticPlan),
}

impl SnapPages {
    /// 4 KiB pages it covers.
    pub(crate) fn nr_pages(&self) -> usize {
        match self {
            SnapPages::Small(p) => p.len(),
            SnapPages::Gigantic(g, _) => g.ranges.len() * GIGANTIC_PAGES as usize,
        }
    }
}

/// A snapshot waiting for the child's `mmap` of its file: the pages of
/// file page offsets `pgoff..pgoff + pages.nr_pages()`.
pub(crate) struct Snapshot {
    pub(crate) pgoff: u64,
    pub(crate) pages: SnapPages,
    /// Some page may be in ZONE_MOVABLE (a source backing was so).
    pub(crate) movable: bool,
    pub(crate) reservation: Reservation,
}

/// Current's mmap lock, held for reading while this lives.
struct MmapRead;

impl MmapRead {
    /// The lock, after the tierkit vmas in `start..end` were made
    /// copy-on-write ones under it held for writing.
    fn lock_cow(start: usize, end: usize) -> Result<Self> {
        // SAFETY: an ioctl: process context with an mm, no mmap lock held.
        to_result(unsafe { shim::tk_mmap_lock_cow_current(start as c_ulong, end as c_ulong) })?;
        Ok(MmapRead)
    }
}

impl Drop for MmapRead {
    fn drop(&mut self) {
        // SAFETY: taken by `lock`.
        unsafe { shim::tk_mmap_read_unlock_current() };
    }
}

/// `TK_IOC_SNAPSHOT`'s work: a snapshot of the caller's tierkit mappings
/// at `addr..addr + len` (page aligned, contiguous file offsets, possibly
/// several vmas and backings), all 4 KiB ones (at most `max_pages`) or all
/// gigantic ones (whole GiBs, at most `max_gigantic` of them: see
/// [`super::gib`]). `source` is called with each vma's file
/// (`private_data`) first, under the mmap lock, and may refuse it.
///
/// Errors: `EINVAL` for a bad range, a hole, an address that is not a
/// tierkit mapping, 4 KiB and gigantic ones mixed, or offsets that do not
/// follow on; `ENOMEM` past the global limit, for a copy of a pinned page
/// or for a gigantic spare; `EBUSY` for a GiB that may be pinned; `EINTR`
/// on a fatal signal or while waiting for the mmap lock; `source`'s. On
/// any error nothing is left shared and the caller's PTEs that were zapped
/// fault in again.
pub(crate) fn snapshot(
    state: &Arc<DeviceState>,
    addr: usize,
    len: usize,
    (max_pages, max_gigantic): (usize, usize),
    mut source: impl FnMut(*mut c_void) -> Result,
) -> Result<Snapshot> {
    let nr = len >> PAGE_SHIFT;
    let end = addr.checked_add(len).ok_or(EINVAL)?;
    if addr % PAGE_SIZE != 0 || len % PAGE_SIZE != 0 || nr == 0 {
        return Err(EINVAL);
    }
    let reservation = Stats::reserve(state, nr as u64)?;
    let _mm = MmapRead::lock_cow(addr, end)?;
    let mut out: Option<Building> = None;
    let (mut first, mut done, mut movable) = (0u64, 0u64, false);
    let mut a = addr;
    while a < end {
        let (mut pgoff, mut vend): (c_ulong, c_ulong) = (0, 0);
        let mut file: *mut c_void = core::ptr::null_mut();
        let mut gigantic = false;
        // SAFETY: current's mmap lock is held (`_mm`); the pointers are to
        // locals.
        let b = unsafe {
            shim::tk_vma_backing_at(
                a as c_ulong,
                &mut pgoff,
                &mut vend,
                &mut file,
                &mut gigantic,
            )
        };
        if b.is_null() {
            return Err(EINVAL);
        }
        let pgoff = pgoff as u64;
        if out.is_none() {
            first = pgoff;
            let max = if gigantic {
                max_gigantic * GIGANTIC_PAGES as usize
            } else {
                max_pages
            };
            if nr > max {
                return Err(EINVAL);
            }
            out = Some(Building::new(state, nr, gigantic)?);
        } else if pgoff != first + done {
            return Err(EINVAL);
        }
        let Some(o) = out.as_mut() else {
            return Err(EINVAL);
        };
        source(file)?;
        let n = (vend.min(end) - a) >> PAGE_SHIFT;
        // SAFETY: a tierkit vma's `vm_private_data` is a live `Backing` of
        // its file, which the vma keeps open while the mmap lock we hold
        // keeps the vma.
        let b = unsafe { &*b.cast::<Backing>() };
        movable |= b.movable;
        match o {
            Building::Small(p) if !gigantic => b.share_range(pgoff, n, p)?,
            Building::Gigantic(g, nids, plan) if gigantic => {
                let (params, last) = b.share_gigantic(pgoff, n as u64, g, nids)?;
                plan.get_or_insert((params, last));
            }
            _ => return Err(EINVAL),
        }
        done += n as u64;
        a += n << PAGE_SHIFT;
    }
    let pages = match out.ok_or(EINVAL)? {
        Building::Small(p) => SnapPages::Small(p),
        Building::Gigantic(g, nids, plan) => {
            let (params, last) = plan.ok_or(EINVAL)?;
            SnapPages::Gigantic(g, GiganticPlan { nids, params, last })
        }
    };
    Ok(Snapshot {
        pgoff: first,
        pages,
        movable,
        reservation,
    })
}

/// A snapshot's pages while `snapshot` gathers them.
enum Building {
    Small(PlacedPages),
    Gigantic(GiganticRanges, KVec<usize>, Option<(ClearParams, LastSlot)>),
}

impl Building {
    fn new(state: &Arc<DeviceState>, nr: usize, gigantic: bool) -> Result<Self> {
        if !gigantic {
            return Ok(Building::Small(PlacedPages::with_capacity(state, nr)?));
        }
        let slots = nr.div_ceil(GIGANTIC_PAGES as usize);
        Ok(Building::Gigantic(
            GiganticRanges {
                ranges: KVec::with_capacity(slots, GFP_KERNEL)?,
                state: state.clone(),
            },
            KVec::with_capacity(slots, GFP_KERNEL)?,
            None,
        ))
    }
}

impl Backing {
    /// Appends a holder of each of this backing's pages at file page
    /// offsets `pgoff..pgoff + n` to `out` (a copy for a page that may be
    /// pinned for DMA), then zaps their PTEs: from then on this backing's
    /// vmas map them again only through the fault handler, which copies a
    /// shared page first (or, in a copy-on-write vma, maps it read-only).
    fn share_range(&self, pgoff: u64, n: usize, out: &mut PlacedPages) -> Result {
        let mut pages = self.pages.lock();
        let BackingPages::Small(p) = &mut *pages else {
            return Err(EINVAL);
        };
        let start =
            usize::try_from(pgoff.checked_sub(self.pgoff).ok_or(EINVAL)?).map_err(|_| EINVAL)?;
        let mine = p.pages().get(start..start + n).ok_or(EINVAL)?;
        // The statistics are counted per run of pages on one node: one
        // atomic operation per run, not per page.
        let mut run = (0usize, 0u64);
        let mut share_all = || -> Result {
            for (j, cur) in mine.iter().enumerate() {
                let nid = cur.nid();
                // SAFETY: `cur` is a page `p` owns.
                let page = if unsafe { shim::tk_page_maybe_dma_pinned(cur.as_ptr()) } {
                    let new = NodePage::alloc_copy(nid, self.movable)?;
                    // SAFETY: both pages are valid; `new` is ours alone.
                    unsafe { shim::tk_copy_page(new.as_ptr(), cur.as_ptr()) };
                    new
                } else {
                    cur.share()
                };
                out.push_in_run(page, nid, &mut run)?;
                resched_killable(j + 1)?;
            }
            Ok(())
        };
        let shared = share_all();
        out.count_run(&mut run);
        shared?;
        // SAFETY: By the type invariant, `mapping` is the live address
        // space of the file that owns `self`. A fault on these pages waits
        // for the lock we hold, then sees them shared.
        unsafe {
            bindings::unmap_mapping_pages(self.mapping, pgoff as c_ulong, n as c_ulong, true)
        };
        Ok(())
    }

    /// Whether the page at file page offset `pgoff` is shared.
    fn shared_at(pages: &BackingPages, idx: usize) -> bool {
        match pages {
            BackingPages::Small(p) => p.pages().get(idx).is_some_and(NodePage::is_shared),
            BackingPages::Gigantic(_) => false,
        }
    }

    /// Makes the page at file page offset `pgoff` this backing's alone
    /// (caller holds the lock, `pages` is its contents): if it is shared, a
    /// copy on the same node takes its place (the old page's PTEs in this
    /// file's vmas are zapped first) and this backing's share of the old
    /// page goes. Nothing for a page that is not shared or not there.
    /// `ENOMEM` when no page can be had.
    pub(super) fn unshare(&self, pages: &mut BackingPages, pgoff: u64) -> Result {
        let Some(k) = pgoff
            .checked_sub(self.pgoff)
            .and_then(|i| usize::try_from(i).ok())
        else {
            return Ok(());
        };
        if !Self::shared_at(pages, k) {
            return Ok(());
        }
        let BackingPages::Small(p) = pages else {
            return Ok(());
        };
        let Some(cur) = p.pages().get(k) else {
            return Ok(());
        };
        let new = NodePage::alloc_copy(cur.nid(), self.movable)?;
        // SAFETY: both pages are valid, `new` is ours alone. Nobody writes
        // `cur`: no writable PTE maps a shared page (this backing's are
        // read-only or gone, the other holders see it shared too).
        unsafe { shim::tk_copy_page(new.as_ptr(), cur.as_ptr()) };
        // SAFETY: By the type invariant, `mapping` is the live address
        // space of the file that owns `self`; a fault waits for our lock.
        unsafe { bindings::unmap_mapping_pages(self.mapping, pgoff as c_ulong, 1, true) };
        p.replace(k, new);
        Ok(())
    }
}

/// The `page_mkwrite` of a copy-on-write vma (shim_vma.c
/// `tk_vm_page_mkwrite()`): a write to `page`, mapped read-only at file
/// page offset `pgoff` of `backing`. 0: the page is the backing's alone
/// (the kernel makes the PTE writable); `-EAGAIN`: it was copied, or
/// replaced meanwhile, and its PTE zapped (the fault is retried);
/// `-ENOMEM`, `-EFAULT` (no such page).
///
/// # Safety
///
/// `backing` is the `vm_private_data` of the faulting copy-on-write vma,
/// of a file that is not released: a live [`Backing`].
#[no_mangle]
unsafe extern "C" fn tk_mapping_mkwrite(
    backing: *mut c_void,
    pgoff: c_ulong,
    page: *mut bindings::page,
) -> c_int {
    // SAFETY: see the function's safety section.
    let b = unsafe { &*backing.cast::<Backing>() };
    let mut pages = b.pages.lock();
    match b.page(&pages, pgoff as u64) {
        Some(p) if p == page => {}
        Some(_) => return EAGAIN.to_errno(),
        None => return EFAULT.to_errno(),
    }
    let idx = (pgoff as u64).wrapping_sub(b.pgoff) as usize;
    if !Backing::shared_at(&pages, idx) {
        return 0;
    }
    match b.unshare(&mut pages, pgoff as u64) {
        Ok(()) => EAGAIN.to_errno(),
        Err(e) => e.to_errno(),
    }
}
