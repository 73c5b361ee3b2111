// SPDX-License-Identifier: GPL-2.0

//! The pages behind `/dev/tierkit` mappings, and what happens to them when
//! the memory under them goes away.
//!
//! Each successful `mmap` makes one [`Backing`]: the 4 KiB pages or the
//! 1 GiB ranges of that mapping, found by file page offset. It is the
//! `vm_private_data` of the mapping's vmas, for the fault handlers:
//! [`tk_mapping_fault`] maps a 4 KiB page again after its PTE was zapped
//! (`MADV_DONTNEED`, or a move below); [`tk_gigantic_map_pud`] makes a GiB
//! of a gigantic mapping at its first touch (allocated on the node the
//! file's policy picked for it at `mmap`, cleared in parallel) and
//! maps it with one PUD under the backing's lock ([`tk_gigantic_map_pte`]
//! maps a 4 KiB page of it where the kernel did not try the PUD). Each
//! GiB is one compound folio (see [`GiganticRange`](crate::clear::GiganticRange)). A GiB made once stays
//! with the file until release (or, shared with a forked child, until a
//! write copies it: [`gib`]): a later fault (after `MADV_DONTNEED`, a
//! `/proc/PID/pagemap` or `smaps` read, which split the PUD away, or in a
//! child after `fork`) maps the same range again, contents kept.
//!
//! What happens to the pages when their memory goes offline: [`offline`].

pub(crate) mod cow;
mod gib;
mod moves;
mod offline;
mod tests;

use crate::chunks::GIGANTIC_PAGES;
use crate::clear::gigantic::{populate_with, LastClear, LastSlot};
use crate::clear::ClearParams;
use crate::pages::NodePage;
use crate::placed::PlacedPages;
use crate::shim;
use crate::state::{DeviceState, Reservation};
use crate::sync::KillableMutex;
pub(crate) use gib::{GiB, COW_COPIES, COW_SPARES};
use kernel::{
    bindings,
    ffi::{c_int, c_uint, c_ulong, c_void},
    new_mutex,
    prelude::*,
    static_lock_class,
    sync::atomic::{Atomic, Relaxed},
    sync::{Arc, Mutex},
};
pub(crate) use moves::RebalanceCounts;
pub(crate) use offline::MemoryNotifier;

/// Test hook (`/sys/kernel/debug/tierkit/test/fail_next_backing`): when
/// armed, the next [`Backing::new`] fails with `ENOMEM` before it
/// allocates, as its allocation may (one shot; the hook disarms). Lets a
/// test fail an `mmap` at that point, after its pages are taken and
/// inserted. 0 in production.
#[cfg(tierkit_test)]
pub(crate) static FAIL_NEXT_BACKING: Atomic<u32> = Atomic::new(0);

/// What a [`Backing`] holds.
pub(crate) enum BackingPages {
    /// 4 KiB mode: page `i` at `pgoff + i`.
    Small(PlacedPages),
    /// Gigantic mode: range `i` covers `pgoff + i * 2^18` onward.
    Gigantic(GiganticRanges),
}

/// The 1 GiB ranges of one gigantic mapping: slot `i` covers file page
/// offset `pgoff + i * 2^18` onward, `None` until its first touch. Each
/// range is counted in the statistics while held (by each holder of a GiB
/// shared copy-on-write after a fork: [`gib`]).
pub(crate) struct GiganticRanges {
    pub(crate) ranges: KVec<Option<GiB>>,
    pub(crate) state: Arc<DeviceState>,
}

/// How a gigantic mapping makes each GiB at its first touch.
pub(crate) struct GiganticPlan {
    /// The node of slot `i`, picked by the file's policy at `mmap`.
    pub(crate) nids: KVec<usize>,
    /// The file's clearing parameters (fixed once it is mapped).
    pub(crate) params: ClearParams,
    /// Where the file's `TK_GIGANTIC_F_QUERY` finds the latest clear.
    pub(crate) last: LastSlot,
}

impl Drop for GiganticRanges {
    fn drop(&mut self) {
        while let Some(slot) = self.ranges.pop() {
            let Some(r) = slot else { continue };
            self.state.stats.gigantic(r.range().nid(), false);
            drop(r);
            // SAFETY: process context (file release, or a failed mmap), no
            // spinlock held.
            unsafe { shim::tk_cond_resched() };
        }
    }
}

/// The pages of one successful `mmap` (see the module docs).
///
/// # Invariants
///
/// `mapping` is the `f_mapping` of the file that owns this value (the
/// device inode's address space), alive as long as the file is. While
/// `reg_id` is not 0, the address of this pinned value is in
/// `state.mappings` under that id.
#[pin_data(PinnedDrop)]
pub(crate) struct Backing {
    /// File page offset of the first page.
    pgoff: u64,
    mapping: *mut bindings::address_space,
    /// Locked by the fault handler while it maps a page and by the memory
    /// notifier while it replaces one.
    #[pin]
    pages: Mutex<BackingPages>,
    /// Gigantic mode: how a GiB is made at its first touch.
    plan: Option<GiganticPlan>,
    /// Gigantic mode: serializes the first-touch work (allocate and clear
    /// one GiB) of this mapping's faults; killable, as the work is long.
    #[pin]
    fault_lock: KillableMutex<()>,
    state: Arc<DeviceState>,
    /// Its id in `state.mappings`, 0 until registered.
    reg_id: u64,
    /// Whether its vmas were set up for pages in ZONE_MOVABLE (they then
    /// refuse long-term pins): a rebalance may take pages there only then.
    movable: bool,
    /// Gigantic mode: a 4 KiB fault was logged (once per mapping).
    pte_noted: Atomic<bool>,
    /// 4 KiB mode: the vmas that map it (the one of `mmap`, then
    /// shim_vma.c's `open` and `close`: splits, fork, mremap, munmap).
    /// A rebalance passes over a backing no vma maps any more.
    vmas: Atomic<u64>,
    /// Its share of the global limit, given back last.
    _reservation: Reservation,
}

// SAFETY: `mapping` is only passed to `unmap_mapping_pages()`, which may be
// called from any thread; everything else is `Send`/`Sync` or behind the
// mutex.
unsafe impl Send for Backing {}
// SAFETY: as above.
unsafe impl Sync for Backing {}

impl Backing {
    /// A backing for the pages of a mapping at file page offset `pgoff` of
    /// a file whose `f_mapping` is `mapping`, registered with the memory
    /// notifier of `state`. `plan` is for gigantic mappings (whose `pages`
    /// start with empty slots); `movable`: its vmas are set up for pages in
    /// ZONE_MOVABLE.
    pub(crate) fn new(
        state: &Arc<DeviceState>,
        mapping: *mut bindings::address_space,
        pgoff: u64,
        pages: BackingPages,
        plan: Option<GiganticPlan>,
        reservation: Reservation,
        movable: bool,
    ) -> Result<Pin<KBox<Self>>> {
        #[cfg(tierkit_test)]
        if FAIL_NEXT_BACKING.xchg(0, Relaxed) != 0 {
            return Err(ENOMEM);
        }
        let mut b = KBox::pin_init(
            pin_init!(Backing {
                pgoff,
                mapping,
                pages <- new_mutex!(pages, "tierkit_backing"),
                plan,
                fault_lock <- KillableMutex::new((), c"tierkit_gigantic_fault", static_lock_class!()),
                state: state.clone(),
                reg_id: 0,
                movable,
                pte_noted: Atomic::new(false),
                vmas: Atomic::new(1),
                _reservation: reservation,
            }),
            GFP_KERNEL,
        )?;
        let addr = core::ptr::from_ref::<Backing>(&b) as usize;
        let bp = b.as_mut();
        let mark_registered = move |id| {
            // SAFETY: `reg_id` is not structurally pinned; nothing moves.
            // The notifier cannot look at `b` yet: it takes the registry
            // lock, which `add` holds while this runs.
            unsafe { bp.get_unchecked_mut().reg_id = id };
        };
        // SAFETY: `b` is pinned in its KBox and, once `reg_id` is set, its
        // drop removes that id from the registry before it is freed.
        unsafe { state.mappings.add(addr, mark_registered) }?;
        Ok(b)
    }

    /// The page at file page offset `pgoff` in `pages`, if any.
    fn page(&self, pages: &BackingPages, pgoff: u64) -> Option<*mut bindings::page> {
        let idx = pgoff.checked_sub(self.pgoff)?;
        match pages {
            BackingPages::Small(p) => p
                .pages()
                .get(usize::try_from(idx).ok()?)
                .map(|p| p.as_ptr()),
            BackingPages::Gigantic(g) => {
                let range = g
                    .ranges
                    .get(usize::try_from(idx / GIGANTIC_PAGES).ok()?)?
                    .as_ref()?;
                range.range().page_ptr(idx % GIGANTIC_PAGES)
            }
        }
    }

    /// The first pfn of slot `idx` of a gigantic mapping, if it is made,
    /// and whether another holder shares its GiB.
    fn gigantic_pfn(&self, idx: usize) -> Option<(u64, bool)> {
        match &*self.pages.lock() {
            BackingPages::Gigantic(g) => g
                .ranges
                .get(idx)?
                .as_ref()
                .map(|r| (r.range().pfn(), r.is_shared())),
            BackingPages::Small(_) => None,
        }
    }

    /// The work of [`tk_gigantic_map_pud`] before it maps: the first pfn of the GiB at file
    /// page offset `pgoff` (which must start a GiB of this mapping), made
    /// now if this is its first touch. A GiB shared with a fork's other
    /// side is copied first ([`gib`]) for a write (`flags` has
    /// `cow::FAULT_WRITE`), and for any fault of a vma that is not a
    /// copy-on-write one (which would map it writable).
    ///
    /// Errors: `EFAULT` for an offset outside the mapping or not at a GiB;
    /// `EINTR` on a fatal signal; as [`populate_with`] (`ENOMEM`: no free
    /// aligned GiB on the node, `EINVAL`: the node went away).
    fn gigantic_fault(&self, pgoff: u64, flags: u32) -> Result<u64> {
        let plan = self.plan.as_ref().ok_or(EFAULT)?;
        let off = pgoff.checked_sub(self.pgoff).ok_or(EFAULT)?;
        if off % GIGANTIC_PAGES != 0 {
            return Err(EFAULT);
        }
        let idx = usize::try_from(off / GIGANTIC_PAGES).map_err(|_| EFAULT)?;
        let nid = *plan.nids.get(idx).ok_or(EFAULT)?;
        let private = flags & cow::FAULT_WRITE != 0 || flags & cow::FAULT_COW == 0;
        match self.gigantic_pfn(idx) {
            Some((_, true)) if private => return self.unshare_gigantic(idx),
            Some((pfn, _)) => return Ok(pfn),
            None => {}
        }
        let _first = self.fault_lock.lock()?;
        // Another thread may have made it while we waited (a GiB made now
        // is this mapping's alone).
        if let Some((pfn, _)) = self.gigantic_pfn(idx) {
            return Ok(pfn);
        }
        // A ready range of the pool, or one allocated and cleared now,
        // without the pages lock (the memory notifier takes it); dropped
        // (freed) on any failure below.
        // Only where its vmas expect it: a vma set up without the
        // movable_gigantic opt-in does not refuse long-term writable pins,
        // so its GiB never comes from ZONE_MOVABLE, whatever the opt-in
        // says now (a pin there would retry forever).
        let range = match self.state.pool.take(nid, self.movable) {
            Some(r) => {
                *plan.last.lock() = Some(LastClear {
                    elapsed_ns: 0,
                    workers: 0,
                    nid: nid as i32,
                    cpu_node: -1,
                });
                r
            }
            None => populate_with(&plan.params, nid, GIGANTIC_PAGES, self.movable, &plan.last)?,
        };
        let pfn = range.pfn();
        let gib = GiB::new(range)?;
        let mut pages = self.pages.lock();
        let BackingPages::Gigantic(g) = &mut *pages else {
            return Err(EFAULT);
        };
        let slot = g.ranges.get_mut(idx).ok_or(EFAULT)?;
        self.state.stats.gigantic(nid, true);
        *slot = Some(gib);
        Ok(pfn)
    }

    /// Moves this mapping's pages out of pfns `start..end`, in batches
    /// ([`moves`]). Errors: `EBUSY` for a gigantic range in it or a page
    /// that cannot move for a pin or a reference, `ENOMEM` when no
    /// replacement page can be had, `EINTR` on a signal (the offline is
    /// then cancelled).
    fn going_offline(&self, start: u64, end: u64) -> Result {
        let len = match &*self.pages.lock() {
            BackingPages::Gigantic(g) => {
                for r in g.ranges.iter().flatten().map(GiB::range) {
                    let (first, last) = (r.pfn(), r.pfn() + r.nr_pages());
                    if first < end && start < last {
                        pr_warn!(
                            "refusing to offline pfns {:#x}-{:#x}: they hold tierkit's 1 GiB range at pfn {:#x} on node {}, mapped by a /dev/tierkit file\n",
                            start,
                            end - 1,
                            first,
                            r.nid()
                        );
                        return Err(EBUSY);
                    }
                }
                return Ok(());
            }
            BackingPages::Small(p) => p.len(),
        };
        self.move_out(len, start, end)
    }

    /// The part of a move after the zap (caller holds the lock): copies
    /// page `i` of `p` into `new` and puts `new` in its place, unless a pin
    /// or a reference beside the mapping's keeps the old page (which the
    /// next touch then maps again; `new` is freed).
    fn swap_in(p: &mut PlacedPages, i: usize, new: NodePage) -> core::result::Result<(), Stayed> {
        let old = p.pages().get(i).ok_or(Stayed::NoMemory)?.as_ptr();
        // A pin taken through the PTE just before the zap (GUP-fast does
        // not take our lock) would keep writing to `old`: keep `old`.
        // SAFETY: `old` is owned by `p`.
        if unsafe { shim::tk_page_maybe_dma_pinned(old) } {
            return Err(Stayed::Pinned);
        }
        // Only the backing's own reference may be left: any other (a
        // ptrace or /proc/PID/mem write in progress, a pfn walker) could
        // still write `old` after the copy. Frozen, none can be taken.
        // SAFETY: `old` is owned by `p`.
        if !unsafe { shim::tk_page_ref_freeze(old, 1) } {
            return Err(Stayed::Referenced);
        }
        // SAFETY: both pages are valid; `new` is not shared; nobody writes
        // `old` any more (its PTEs are gone, DMA pins were ruled out, its
        // references are frozen).
        unsafe { shim::tk_copy_page(new.as_ptr(), old) };
        // The move commits: the charge goes with the contents, as the
        // kernel's migration moves it, so the owner's cgroup pays nothing
        // for it (and `new` was allocated uncharged).
        // SAFETY: `old`'s references are frozen; `new` is ours alone, from
        // `NodePage::alloc_on`/`alloc_away`.
        unsafe { shim::tk_page_move_charge(old, new.as_ptr()) };
        // SAFETY: frozen just above; back to the backing's one reference,
        // which `replace` drops.
        unsafe { shim::tk_page_ref_unfreeze(old, 1) };
        p.replace(i, new);
        Ok(())
    }
}

/// Why a page that was to move stayed where it was.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Stayed {
    /// No page to move it to: the node, or the owner's memory cgroup, has
    /// none to give.
    NoMemory,
    /// It may be pinned for DMA (`FOLL_PIN`).
    Pinned,
    /// A reference beside the mapping's is held.
    Referenced,
}

impl Stayed {
    /// What an offline that meets it answers.
    fn errno(self) -> Error {
        match self {
            Stayed::NoMemory => ENOMEM,
            Stayed::Pinned | Stayed::Referenced => EBUSY,
        }
    }

    /// Why, for a log line.
    fn why(self) -> &'static str {
        match self {
            Stayed::NoMemory => "no page to move it to",
            Stayed::Pinned => "it may be pinned for DMA",
            Stayed::Referenced => "it is in use (a reference beside the mapping's)",
        }
    }
}

#[pinned_drop]
impl PinnedDrop for Backing {
    fn drop(self: Pin<&mut Self>) {
        if self.reg_id != 0 {
            self.state.mappings.remove(self.reg_id);
        }
        // The pages, then the reservation, drop with the fields.
    }
}

/// The fault handler's work (shim_vma.c `tk_vm_fault()`): maps the page of
/// `backing` at file page offset `pgoff` at `addr` of `vma`. A page still
/// shared with a fork's snapshot ([`cow`]) is first made this backing's
/// own copy, unless the vma is a copy-on-write one (`TK_FAULT_COW`, its
/// PTEs write-protected until `page_mkwrite`) and the fault reads. Returns
/// 0, or a negative errno (`-EFAULT` if the mapping has no such page:
/// SIGBUS; `-ENOMEM` if no copy could be had).
///
/// # Safety
///
/// `backing` is the `vm_private_data` that `TkFile::mmap` gave `vma`, a vma
/// of a file that is not released: a live [`Backing`]. `vma` is the
/// faulting vma, `addr` page aligned inside it.
#[no_mangle]
unsafe extern "C" fn tk_mapping_fault(
    backing: *mut c_void,
    vma: *mut bindings::vm_area_struct,
    addr: c_ulong,
    pgoff: c_ulong,
    flags: kernel::ffi::c_uint,
) -> c_int {
    // SAFETY: see the function's safety section.
    let b = unsafe { &*backing.cast::<Backing>() };
    let mut pages = b.pages.lock();
    let cow_read = flags & cow::FAULT_COW != 0 && flags & cow::FAULT_WRITE == 0;
    if !cow_read {
        if let Err(e) = b.unshare(&mut pages, pgoff as u64) {
            return e.to_errno();
        }
    }
    let Some(page) = b.page(&pages, pgoff as u64) else {
        return EFAULT.to_errno();
    };
    // SAFETY: `vma` is the faulting VM_MIXEDMAP vma and `addr` lies in it;
    // `page` stays owned by the backing while we hold its lock, and a
    // mover must take the lock before it zaps and frees a page.
    unsafe { shim::tk_vm_insert_page(vma, addr, page) }
}

/// A vma of `backing` was made (shim_vma.c `tk_vm_open()`: a split,
/// fork, mremap): counted.
///
/// # Safety
///
/// `backing` is the `vm_private_data` that `TkFile::mmap` gave a 4 KiB
/// vma of a file that is not released: a live [`Backing`].
#[no_mangle]
unsafe extern "C" fn tk_mapping_vma_open(backing: *mut c_void) {
    // SAFETY: see the function's safety section.
    let b = unsafe { &*backing.cast::<Backing>() };
    b.vmas.add(1, Relaxed);
}

/// A vma of `backing` is going (shim_vma.c `tk_vm_close()`).
///
/// # Safety
///
/// As [`tk_mapping_vma_open`].
#[no_mangle]
unsafe extern "C" fn tk_mapping_vma_close(backing: *mut c_void) {
    // SAFETY: see the function's safety section.
    let b = unsafe { &*backing.cast::<Backing>() };
    // Each close pairs with the vma `mmap` counted or an open.
    b.vmas.fetch_sub(1, Relaxed);
}

impl Backing {
    /// [`Backing::gigantic_fault`], with a failure counted in the `limits`
    /// file as `gigantic_fault_failed` and logged (the fault answers
    /// SIGBUS; nothing stays allocated).
    fn gigantic_fault_logged(&self, pgoff: u64, flags: u32) -> Result<u64> {
        self.gigantic_fault(pgoff, flags).inspect_err(|e| {
            self.state.stats.gigantic_fault_failed();
            // SAFETY: no precondition.
            if unsafe { shim::tk_fatal_signal_pending() } {
                pr_debug!("gigantic fault at file page {:#x}: killed\n", pgoff);
            } else {
                crate::ratelimit::ratelimited!(
                    pr_warn,
                    "gigantic fault at file page {:#x} failed ({:?}): SIGBUS\n",
                    pgoff,
                    e
                );
            }
        })
    }
}

/// shim_vma.c `VM_FAULT_*` answers.
const VM_FAULT_SIGBUS: bindings::vm_fault_t = bindings::vm_fault_reason_VM_FAULT_SIGBUS;
const VM_FAULT_NOPAGE: bindings::vm_fault_t = bindings::vm_fault_reason_VM_FAULT_NOPAGE;

/// The gigantic PUD fault (shim_vma.c `tk_gigantic_huge_fault()`): the
/// first pfn of the GiB of `backing` at file page offset `pgoff` (made at
/// its first touch, copied if it is shared and the fault needs it private:
/// `flags` are shim.h's `TK_FAULT_*`, see [`Backing::gigantic_fault`]),
/// mapped by shim_vma.c `tk_gigantic_insert_pud()` with the backing's lock
/// held, after the lock saw the backing still hold that GiB, alone for a
/// write: a copy on write replaces a GiB, and a snapshot shares one, under
/// that lock and zap it afterwards ([`gib`]), so no fault maps a GiB the
/// backing let go of or a shared GiB writable. The fault is retried
/// otherwise. SIGBUS when the GiB cannot be had.
///
/// # Safety
///
/// `backing` is the `vm_private_data` that `TkFile::mmap` gave a gigantic
/// vma of a file that is not released: a live [`Backing`]; `vmf` is the
/// fault of that vma. Called in a fault, mmap lock (or the vma's) held for
/// reading.
#[no_mangle]
unsafe extern "C" fn tk_gigantic_map_pud(
    backing: *mut c_void,
    vmf: *mut bindings::vm_fault,
    pgoff: c_ulong,
    flags: c_uint,
) -> bindings::vm_fault_t {
    // SAFETY: see the function's safety section.
    let b = unsafe { &*backing.cast::<Backing>() };
    let Ok(pfn) = b.gigantic_fault_logged(pgoff as u64, flags) else {
        return VM_FAULT_SIGBUS;
    };
    let write = flags & cow::FAULT_WRITE != 0;
    let mut stale = false;
    let ret = {
        let pages = b.pages.lock();
        if !b.holds_gib(&pages, pgoff as u64, pfn, write) {
            return VM_FAULT_NOPAGE;
        }
        // SAFETY: `vmf` is this fault's (see above); the backing's lock is
        // a mutex, and the insert only takes the page-table lock.
        unsafe { shim::tk_gigantic_insert_pud(vmf, pfn as c_ulong, write, &mut stale) }
    };
    if stale {
        b.zap_gib_at(pgoff as u64);
    }
    ret
}

/// A 4 KiB fault in a gigantic mapping (shim_vma.c `tk_gigantic_pte_fault()`):
/// THP is disabled for the task or the vma, or an earlier such fault left
/// a PMD table in the GiB's PUD slot. Makes the GiB at its first touch as
/// [`tk_gigantic_map_pud`] does, and maps its 4 KiB page at file page
/// offset `pgoff` with shim_vma.c `tk_gigantic_insert_pte()`
/// (`vm_insert_page()`: that PTE holds a reference on the GiB's folio)
/// with the backing's lock held, so the page is one the backing holds
/// then. Logged once per mapping.
///
/// # Safety
///
/// As [`tk_gigantic_map_pud`].
#[no_mangle]
unsafe extern "C" fn tk_gigantic_map_pte(
    backing: *mut c_void,
    vmf: *mut bindings::vm_fault,
    pgoff: c_ulong,
    addr: c_ulong,
    flags: c_uint,
) -> bindings::vm_fault_t {
    // SAFETY: see the function's safety section.
    let b = unsafe { &*backing.cast::<Backing>() };
    let Some(off) = (pgoff as u64).checked_sub(b.pgoff) else {
        return VM_FAULT_SIGBUS;
    };
    let first = b.pgoff + off / GIGANTIC_PAGES * GIGANTIC_PAGES;
    if b.gigantic_fault_logged(first, flags).is_err() {
        return VM_FAULT_SIGBUS;
    }
    if !b.pte_noted.xchg(true, Relaxed) {
        crate::ratelimit::ratelimited!(pr_info,
            "gigantic mapping: GiB at file page {:#x} mapped with 4 KiB pages at {:#x} (THP disabled for the task or the vma, or a PMD table already in its PUD slot)\n",
            first,
            addr
        );
    }
    let pages = b.pages.lock();
    match b.page(&pages, pgoff as u64) {
        // SAFETY: `vmf` is this fault's; `p` is a page of a GiB the
        // backing holds while its lock, held here, is.
        Some(p) => unsafe { shim::tk_gigantic_insert_pte(vmf, p) },
        None => VM_FAULT_SIGBUS,
    }
}
