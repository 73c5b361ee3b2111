// SPDX-License-Identifier: GPL-2.0

//! Copy-on-write of the GiBs of gigantic mappings between a process and
//! its forked child (`TK_IOC_SNAPSHOT` of a gigantic range, see
//! Documentation/ABI/testing/dev-tierkit).
//!
//! As for 4 KiB pages ([`super::cow`]), the snapshot makes the parent's
//! vmas of the range copy-on-write ones (shim_vma.c
//! `tk_gigantic_vm_ops_cow`: write notified), gives each GiB made so far a
//! second holder, the snapshot, and zaps the parent's PUDs (and PTEs) of
//! the range. A fault maps a shared GiB read-only; the first write of
//! either side while it is shared copies the whole GiB into a GiB of its
//! own on the same node and maps that; a write to a GiB no other holder
//! has makes its PUD writable. A GiB not touched yet at the snapshot is
//! made fresh (zero) by each side at its first touch.
//!
//! A 1 GiB page cannot be had in pieces, and a free aligned GiB may be
//! gone by the time a side writes. So, as hugetlb reserves huge pages for
//! a private mapping, the snapshot takes one *spare* GiB on the GiB's node
//! for each holder it adds (allocated, neither cleared nor copied): the
//! copy of a write takes a spare and never fails for want of memory, and
//! a holder that goes while others stay frees one. A snapshot that cannot
//! get its spares fails with `ENOMEM` (libtkrun then copies the range at
//! fork, as it did before). Spares count against nothing else: the
//! snapshot's file already reserved its whole size of the global limit.
//!
//! Invariant: a shared GiB with `holders` holders has `holders - 1`
//! spares, but during a copy, which took one (copies of one GiB take
//! turns: [`SharedGiB::copying`]).
//!
//! A shared GiB is never moved (gigantic ranges never are) and an offline
//! of its memory is refused, as for any gigantic range. A GiB that may be
//! pinned for DMA is not shared: the snapshot fails with `EBUSY`.

use super::{Backing, BackingPages, GiganticRanges};
use crate::chunks::GIGANTIC_PAGES;
use crate::clear::gigantic::LastSlot;
use crate::clear::ClearParams;
use crate::clear::GiganticRange;
use crate::shim;
use crate::sync::{resched_killable, KillableMutex, SIGNAL_CHECK_PAGES};
use kernel::{
    bindings,
    ffi::{c_int, c_ulong, c_void},
    new_mutex,
    page::PAGE_SIZE,
    prelude::*,
    static_lock_class,
    sync::atomic::{Acquire, Atomic, Full, Relaxed},
    sync::{Arc, Mutex, UniqueArc},
};

/// GiBs copied by a write after a fork's snapshot, cumulative (the
/// `limits` file's `gigantic_cow_copies`).
pub(crate) static COW_COPIES: Atomic<u64> = Atomic::new(0);
/// Spare GiBs held now for copies to come (`gigantic_cow_spares`).
pub(crate) static COW_SPARES: Atomic<u64> = Atomic::new(0);

/// A GiB of a gigantic mapping and what its holders share.
#[pin_data]
pub(crate) struct SharedGiB {
    range: GiganticRange,
    /// The backings (and pending snapshots) that hold it.
    holders: Atomic<u64>,
    /// One per holder but the first, on the GiB's node (see the module
    /// docs).
    #[pin]
    spares: Mutex<KVec<GiganticRange>>,
    /// Held by a write's copy of this GiB, from taking its spare to
    /// leaving the GiB's holders.
    #[pin]
    copying: KillableMutex<()>,
}

impl SharedGiB {
    fn init(range: GiganticRange) -> impl PinInit<Self> {
        pin_init!(SharedGiB {
            range,
            holders: Atomic::new(1),
            spares <- new_mutex!(KVec::new(), "tierkit_gib_spares"),
            copying <- KillableMutex::new((), c"tierkit_gib_copying", static_lock_class!()),
        })
    }

    /// Whether another holder has it too.
    fn is_shared(&self) -> bool {
        self.holders.load(Acquire) > 1
    }
}

/// One holder of a GiB: a slot of a gigantic mapping, or of a snapshot
/// waiting for its `mmap`.
pub(crate) struct GiB {
    shared: Arc<SharedGiB>,
    /// This holder took a spare for its own copy: it leaves without
    /// freeing one.
    spare_taken: bool,
}

impl GiB {
    /// The only holder of `range`. `ENOMEM` (the range freed) when the
    /// small allocation fails.
    pub(crate) fn new(range: GiganticRange) -> Result<Self> {
        Ok(Self {
            shared: Arc::pin_init(SharedGiB::init(range), GFP_KERNEL)?,
            spare_taken: false,
        })
    }

    /// The GiB.
    pub(crate) fn range(&self) -> &GiganticRange {
        &self.shared.range
    }

    /// Whether another holder has it too.
    pub(crate) fn is_shared(&self) -> bool {
        self.shared.is_shared()
    }
}

impl Drop for GiB {
    fn drop(&mut self) {
        // Gone before a spare is: a holder that reads `holders == 1` after
        // this may write the GiB in place.
        self.shared.holders.fetch_sub(1, Full);
        if !self.spare_taken {
            let spare = self.shared.spares.lock().pop();
            if spare.is_some() {
                COW_SPARES.fetch_sub(1, Relaxed);
            }
            drop(spare);
        }
    }
}

/// Copies every byte of `from` into `to` (both 1 GiB), 2 MiB at a time
/// with a reschedule and fatal-signal check in between: `EINTR`.
fn copy_gib(from: &GiganticRange, to: &GiganticRange) -> Result {
    let len = usize::try_from(from.bytes()).map_err(|_| EINVAL)?;
    if to.bytes() != from.bytes() {
        return Err(EINVAL);
    }
    let chunk = SIGNAL_CHECK_PAGES * PAGE_SIZE;
    let mut off = 0usize;
    while off < len {
        let n = chunk.min(len - off);
        // SAFETY: both ranges are `len` bytes of the direct map that the
        // caller's holders keep allocated, and `off + n <= len`. Nobody
        // writes `from`: every mapping of a shared GiB is read-only (a
        // copy-on-write vma's) and it is not pinned for DMA (checked at the
        // snapshot). `to` is a spare no one else has.
        unsafe { core::ptr::copy_nonoverlapping(from.as_ptr().add(off), to.as_ptr().add(off), n) };
        off += n;
        resched_killable(SIGNAL_CHECK_PAGES)?;
    }
    Ok(())
}

impl Backing {
    /// Slot `idx` of this gigantic mapping, if made: the first pfn of its
    /// GiB and the GiB's shared part.
    fn gib_at(&self, idx: usize) -> Option<(u64, Arc<SharedGiB>)> {
        let pages = self.pages.lock();
        let BackingPages::Gigantic(g) = &*pages else {
            return None;
        };
        let gib = g.ranges.get(idx)?.as_ref()?;
        Some((gib.range().pfn(), gib.shared.clone()))
    }

    /// The first file page offset of slot `idx`.
    fn gib_pgoff(&self, idx: usize) -> u64 {
        self.pgoff + idx as u64 * GIGANTIC_PAGES
    }

    /// Zaps every PUD and PTE of this backing's vmas that maps slot `idx`.
    fn zap_gib(&self, idx: usize) {
        // SAFETY: By the type invariant, `mapping` is the live address
        // space of the file that owns `self`.
        unsafe {
            bindings::unmap_mapping_pages(
                self.mapping,
                self.gib_pgoff(idx) as c_ulong,
                GIGANTIC_PAGES as c_ulong,
                true,
            )
        };
    }

    /// Makes slot `idx`'s GiB this backing's alone, copying it into a
    /// spare if it is still shared; its first pfn. Serialized with the
    /// mapping's first touches (`fault_lock`) and with the other holders'
    /// copies of the same GiB. Errors: `EINTR` (a fatal signal; nothing
    /// changed), `EFAULT` for a slot that is not made.
    pub(super) fn unshare_gigantic(&self, idx: usize) -> Result<u64> {
        let _one = self.fault_lock.lock()?;
        let (pfn, old) = self.gib_at(idx).ok_or(EFAULT)?;
        let _copying = old.copying.lock()?;
        if !old.is_shared() {
            // The others let go while this waited.
            return Ok(pfn);
        }
        // Allocated before the spare is taken, so that nothing can fail
        // between taking it and holding the copy.
        let cell = UniqueArc::<SharedGiB>::new_uninit(GFP_KERNEL)?;
        let Some(spare) = old.spares.lock().pop() else {
            // The invariant says a shared GiB has a spare when no copy is
            // under way (and none is: `copying` is held).
            return Err(ENOMEM);
        };
        COW_SPARES.fetch_sub(1, Relaxed);
        if let Err(e) = copy_gib(&old.range, &spare) {
            // It was popped: the vector has room.
            if let Err(s) = old.spares.lock().push_within_capacity(spare) {
                drop(s);
            } else {
                COW_SPARES.add(1, Relaxed);
            }
            return Err(e);
        }
        let new: Arc<SharedGiB> = match cell.pin_init_with(SharedGiB::init(spare)) {
            Ok(u) => u.into(),
            Err(never) => match never {},
        };
        let pfn = new.range.pfn();
        let left = {
            let mut pages = self.pages.lock();
            let BackingPages::Gigantic(g) = &mut *pages else {
                return Err(EFAULT);
            };
            let slot = g.ranges.get_mut(idx).ok_or(EFAULT)?;
            let mut left = slot.replace(GiB {
                shared: new,
                spare_taken: false,
            });
            if let Some(l) = left.as_mut() {
                l.spare_taken = true;
            }
            left
        };
        // Before this backing leaves the old GiB's holders: until then no
        // other holder writes it in place, so a stale read-only mapping of
        // it here reads what the copy has.
        self.zap_gib(idx);
        drop(left);
        COW_COPIES.add(1, Relaxed);
        Ok(pfn)
    }

    /// For `TK_IOC_SNAPSHOT` (current's mmap lock held for reading, its
    /// vmas of the range made copy-on-write ones): appends a holder of
    /// each slot of file page offsets `pgoff..pgoff + n` (whole GiBs) to
    /// `out` (`None` for a GiB not made yet), with a spare for each GiB
    /// made, and the slot's node to `nids`; then zaps the range. Returns
    /// the mapping's clearing parameters, for the snapshot's first
    /// touches. Errors: `EINVAL` for a range that is not whole slots of
    /// this mapping, `EBUSY` for a GiB that may be pinned for DMA,
    /// `ENOMEM` for a spare that cannot be had, `EINTR`: nothing is zapped
    /// then (`out`'s new holders free their spares when dropped).
    pub(super) fn share_gigantic(
        &self,
        pgoff: u64,
        n: u64,
        out: &mut GiganticRanges,
        nids: &mut KVec<usize>,
    ) -> Result<(ClearParams, LastSlot)> {
        let plan = self.plan.as_ref().ok_or(EINVAL)?;
        let off = pgoff.checked_sub(self.pgoff).ok_or(EINVAL)?;
        if off % GIGANTIC_PAGES != 0 || n % GIGANTIC_PAGES != 0 {
            return Err(EINVAL);
        }
        let first = usize::try_from(off / GIGANTIC_PAGES).map_err(|_| EINVAL)?;
        let count = usize::try_from(n / GIGANTIC_PAGES).map_err(|_| EINVAL)?;
        // No first touch or copy of this mapping meanwhile: its slots stay.
        let _one = self.fault_lock.lock()?;
        // The spares first, without the backing's lock (a GiB is long to
        // get): one per GiB made, on its node.
        let mut spares = KVec::with_capacity(count, GFP_KERNEL)?;
        for idx in first..first + count {
            let nid = *plan.nids.get(idx).ok_or(EINVAL)?;
            let spare = match self.gib_at(idx) {
                None => None,
                Some((_, gib)) => {
                    let head = gib.range.page_ptr(0).ok_or(EFAULT)?;
                    // SAFETY: the GiB's first page, kept by `gib`.
                    if unsafe { shim::tk_page_maybe_dma_pinned(head) } {
                        return Err(EBUSY);
                    }
                    Some(GiganticRange::alloc_for_mapping(
                        nid,
                        GIGANTIC_PAGES,
                        self.movable,
                    )?)
                }
            };
            spares.push((nid, spare), GFP_KERNEL)?;
        }
        out.ranges.reserve(count, GFP_KERNEL)?;
        nids.reserve(count, GFP_KERNEL)?;
        // Shared under the backing's lock, as a fault checks and maps
        // under it: a fault either maps before the sharing (and the zap
        // below removes it) or sees the GiB shared.
        {
            let pages = self.pages.lock();
            let BackingPages::Gigantic(g) = &*pages else {
                return Err(EINVAL);
            };
            for (k, (nid, spare)) in spares.into_iter().enumerate() {
                let holder = match (g.ranges.get(first + k).and_then(Option::as_ref), spare) {
                    (Some(gib), Some(spare)) => Some(share(&gib.shared, spare)?),
                    _ => None,
                };
                if holder.is_some() {
                    self.state.stats.gigantic(nid, true);
                }
                out.ranges
                    .push_within_capacity(holder)
                    .map_err(|_| ENOMEM)?;
                nids.push_within_capacity(nid).map_err(|_| ENOMEM)?;
            }
        }
        // SAFETY: By the type invariant, `mapping` is the live address
        // space of the file that owns `self`. A fault on the range waits
        // for `fault_lock` (held), then sees its GiBs shared.
        unsafe {
            bindings::unmap_mapping_pages(self.mapping, pgoff as c_ulong, n as c_ulong, true)
        };
        Ok((plan.params, plan.last.clone()))
    }
}

/// A new holder of `gib`, with `spare` (a GiB on its node) for the copy
/// that one of its holders will need.
fn share(gib: &Arc<SharedGiB>, spare: GiganticRange) -> Result<GiB> {
    gib.spares.lock().push(spare, GFP_KERNEL)?;
    COW_SPARES.add(1, Relaxed);
    gib.holders.fetch_add(1, Full);
    Ok(GiB {
        shared: gib.clone(),
        spare_taken: false,
    })
}

impl Backing {
    /// The slot of file page offset `pgoff` and the page's index in it.
    fn gib_index(&self, pgoff: u64) -> Option<(usize, u64)> {
        let off = pgoff.checked_sub(self.pgoff)?;
        Some((
            usize::try_from(off / GIGANTIC_PAGES).ok()?,
            off % GIGANTIC_PAGES,
        ))
    }

    /// Whether `pages` (this backing's, locked) holds the GiB whose first
    /// pfn is `pfn` at file page offset `pgoff`, and, for a `write`, no
    /// other holder has it: what a fault checks under the lock before it
    /// maps `pfn`.
    pub(super) fn holds_gib(
        &self,
        pages: &BackingPages,
        pgoff: u64,
        pfn: u64,
        write: bool,
    ) -> bool {
        let BackingPages::Gigantic(g) = pages else {
            return false;
        };
        self.gib_index(pgoff)
            .and_then(|(idx, _)| g.ranges.get(idx)?.as_ref())
            .is_some_and(|gib| gib.range().pfn() == pfn && !(write && gib.is_shared()))
    }

    /// [`Backing::zap_gib`] of the GiB at file page offset `pgoff`.
    pub(super) fn zap_gib_at(&self, pgoff: u64) {
        if let Some((idx, _)) = self.gib_index(pgoff) {
            self.zap_gib(idx);
        }
    }
}

/// The `page_mkwrite` of a copy-on-write gigantic vma (shim_vma.c
/// `tk_gigantic_page_mkwrite()`): a write to `page`, a 4 KiB page of a GiB
/// mapped read-only at file page offset `pgoff`. 0: the GiB is the
/// backing's alone (the kernel makes the PTE writable); `-EAGAIN`: it was
/// copied, or the page is stale, and the old mapping zapped (the fault is
/// retried); `-EINTR`, `-EFAULT` (no such page).
///
/// # Safety
///
/// `backing` is the `vm_private_data` of a gigantic vma of a file that is
/// not released: a live [`Backing`]; `page` is the page of the fault.
#[no_mangle]
unsafe extern "C" fn tk_gigantic_mkwrite(
    backing: *mut c_void,
    pgoff: c_ulong,
    page: *mut bindings::page,
) -> c_int {
    // SAFETY: see the function's safety section.
    let b = unsafe { &*backing.cast::<Backing>() };
    let Some((idx, k)) = b.gib_index(pgoff as u64) else {
        return EFAULT.to_errno();
    };
    let Some((first, gib)) = b.gib_at(idx) else {
        return EFAULT.to_errno();
    };
    // SAFETY: `page` is the page the kernel's fault holds.
    if unsafe { shim::tk_page_to_pfn(page) } as u64 != first + k {
        b.zap_gib(idx);
        return EAGAIN.to_errno();
    }
    if !gib.is_shared() {
        return 0;
    }
    drop(gib);
    match b.unshare_gigantic(idx) {
        Ok(_) => EAGAIN.to_errno(),
        Err(e) => e.to_errno(),
    }
}
