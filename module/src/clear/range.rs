// SPDX-License-Identifier: GPL-2.0

//! [`GiganticRange`]: a physically contiguous, naturally aligned range of
//! base pages on one node, from `alloc_contig_pages()`.

use crate::chunks::{GIGANTIC_PAGES, PAGE_BYTES};
use crate::shim::{self, node};
use core::ptr::NonNull;
use kernel::{
    bindings,
    page::BorrowedPage,
    prelude::*,
    sync::atomic::{Atomic, Full, Relaxed, Release},
};

/// Largest range [`GiganticRange::alloc_pages`] accepts: 2^24 pages (64 GiB).
pub(crate) const MAX_RANGE_PAGES: u64 = 1 << 24;

/// The `movable_gigantic` opt-in (`/sys/kernel/debug/tierkit/movable_gigantic`,
/// as the kernel's `vm.movable_gigantic_pages` for hugetlb): when set,
/// gigantic ranges may come from ZONE_MOVABLE. Offlining a memory block
/// inside such a range then fails at once with `EBUSY` (the memory
/// notifier in mapping.rs refuses it, see [`movable_range_in`]), instead of
/// the range blocking it.
pub(crate) static MOVABLE_GIGANTIC: Atomic<bool> = Atomic::new(false);

/// At most this many ranges taken with the `movable_gigantic` opt-in live
/// at once (256 GiB of 1 GiB ranges); one more is `ENOMEM`.
pub(crate) const MAX_MOVABLE_RANGES: usize = 256;

/// The live ranges taken with the `movable_gigantic` opt-in, wherever they
/// landed: slot value `(first pfn << 6) | log2(nr_pages)`, 0 when free.
///
/// The kernel assumes that everything in ZONE_MOVABLE can be migrated
/// (`has_unmovable_pages()` skips the zone), so without this an offline of
/// a block inside a range that no mapping holds yet (a `TK_IOC_CLEAR_BENCH`
/// range, a GiB being cleared at first touch) would retry its migration
/// until the offlining task is killed. The memory notifier asks
/// [`movable_range_in`] and refuses such an offline with `EBUSY` at once.
static MOVABLE_RANGES: [Atomic<u64>; MAX_MOVABLE_RANGES] =
    [const { Atomic::new(0) }; MAX_MOVABLE_RANGES];

/// Per node: allocations with the `movable_gigantic` opt-in under way,
/// from before `alloc_contig_frozen_pages()` until their range is in
/// [`MOVABLE_RANGES`] (or they failed). The memory notifier refuses an
/// offline of the node's memory while one is (`EBUSY`): in that window a
/// new range is allocated but not yet known, and an offline of a block
/// inside it would retry its migration until killed.
static MOVABLE_PENDING: [Atomic<u32>; crate::interleave::MAX_NUMNODES] =
    [const { Atomic::new(0) }; crate::interleave::MAX_NUMNODES];


/// Whether an allocation with the opt-in is under way on `nid`.
pub(crate) fn movable_pending(nid: usize) -> bool {
    MOVABLE_PENDING
        .get(nid)
        .is_some_and(|c| c.load(Relaxed) != 0)
}

/// One entry of [`MOVABLE_PENDING`], given back on drop.
struct Pending(usize);

impl Pending {
    fn new(nid: usize) -> Option<Pending> {
        let c = MOVABLE_PENDING.get(nid)?;
        c.fetch_add(1, Full);
        Some(Pending(nid))
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(c) = MOVABLE_PENDING.get(self.0) {
            c.fetch_add(u32::MAX, Release);
        }
    }
}

/// A slot value of [`MOVABLE_RANGES`].
fn movable_slot(pfn: u64, nr_pages: u64) -> u64 {
    (pfn << 6) | u64::from(nr_pages.trailing_zeros())
}

/// Records a range in [`MOVABLE_RANGES`]: the slot taken, or `ENOMEM`
/// when all are in use.
fn movable_register(pfn: u64, nr_pages: u64) -> Result<usize> {
    let v = movable_slot(pfn, nr_pages);
    for (i, slot) in MOVABLE_RANGES.iter().enumerate() {
        if slot.cmpxchg(0, v, Full).is_ok() {
            return Ok(i);
        }
    }
    crate::ratelimit::ratelimited!(
        pr_err,
        "clear: more than {} ranges taken with movable_gigantic at once\n",
        MAX_MOVABLE_RANGES
    );
    Err(ENOMEM)
}

/// The first live range taken with the `movable_gigantic` opt-in that
/// overlaps pfns `start..end`, as `(first pfn, nr_pages)`.
pub(crate) fn movable_range_in(start: u64, end: u64) -> Option<(u64, u64)> {
    MOVABLE_RANGES.iter().find_map(|slot| {
        let v = slot.load(Relaxed);
        let (pfn, nr) = (v >> 6, 1u64 << (v & 63));
        (v != 0 && pfn < end && start < pfn + nr).then_some((pfn, nr))
    })
}

/// Checks that `nid` names an online node with memory (`N_MEMORY`).
///
/// Returns `EINVAL`, with a message, for an id out of range, an offline node
/// or a memoryless one.
pub(crate) fn check_memory_node(nid: i64) -> Result<usize> {
    let ids = node::nr_node_ids();
    if nid < 0 || nid as u64 >= ids as u64 {
        pr_debug!("clear: node {} does not exist (nr_node_ids {})\n", nid, ids);
        return Err(EINVAL);
    }
    let nid = nid as usize;
    if !node::online(nid) {
        pr_debug!("clear: node {} is offline\n", nid);
        return Err(EINVAL);
    }
    if !node::has_memory(nid) {
        pr_debug!("clear: node {} has no memory (not in N_MEMORY)\n", nid);
        return Err(EINVAL);
    }
    Ok(nid)
}

/// A physically contiguous range of `nr_pages` base pages on one node.
///
/// tierkit never passes `__GFP_ZERO`. With `init_on_alloc` off the pages
/// come as they were and clearing them is the job of
/// [`clear`](super::clear); with it on, the allocator has zeroed them
/// ([`zeroed_by_allocator`](Self::zeroed_by_allocator)), and the gigantic
/// fault and the pool take that as their clear instead of clearing twice.
///
/// A 1 GiB range ([`alloc`](Self::alloc)) is one compound folio of
/// `PUD_ORDER`, as hugetlb's gigantic folios: whatever maps it by one PUD
/// hands it to `get_user_pages()`, which counts the references of every
/// 4 KiB page of a PUD leaf on its folio (shim.c `tk_alloc_contig()`).
/// Other sizes (the KUnit suites' smaller ranges, up to 64 GiB, never
/// mapped; the clear benchmark takes 1 GiB ranges) are order-0 pages, and
/// so is a range of the pre-cleared pool ([`alloc_for_pool`]) until a
/// mapping takes it ([`make_folio`]): in ZONE_MOVABLE a compound page
/// that is not hugetlb and straddles a memory block makes the offline of
/// every block under it but the last fail in `isolate_single_pageblock()`
/// (mm/page_isolation.c), before the memory notifier could give the
/// range back.
///
/// [`alloc_for_pool`]: Self::alloc_for_pool
/// [`make_folio`]: Self::make_folio
///
/// # Invariants
///
/// - `first` is the first of `nr_pages` physically contiguous pages, all on
///   node `nid`, allocated by `tk_alloc_contig()`. `nr_pages` is a power
///   of two, so the range is naturally aligned. With `folio`, `first` is
///   the head of one compound folio of `nr_pages` pages; this value owns
///   one reference to it, put on drop (others, taken by
///   `get_user_pages()` or a PTE that maps one of its pages, keep it
///   allocated until they are put). Without, each page is an order-0
///   page with one reference, owned by this value and put on drop with
///   `free_contig_range()`.
/// - `base` is `page_address(first)`: the range is lowmem on x86_64, so the
///   direct map covers all `nr_pages * PAGE_SIZE` bytes from `base`.
pub(crate) struct GiganticRange {
    first: NonNull<bindings::page>,
    base: NonNull<u8>,
    nr_pages: u64,
    nid: usize,
    /// One compound folio (a 1 GiB range) rather than order-0 pages.
    folio: bool,
    /// `init_on_alloc` was on: the allocator zeroed every page.
    zeroed: bool,
    /// Its slot in [`MOVABLE_RANGES`] when taken with the opt-in.
    movable_slot: Option<usize>,
    /// A folio counted by `tk_movable_track()`: given back through
    /// `tk_movable_put()`, which keeps it while others hold it.
    tracked: bool,
}

// SAFETY: the range is plain memory owned by this value; nothing ties it to
// the thread that allocated it.
unsafe impl Send for GiganticRange {}

// SAFETY: `&GiganticRange` only gives out page pointers and the address of
// the memory; every write through them is `unsafe` and its caller keeps it
// exclusive.
unsafe impl Sync for GiganticRange {}

impl GiganticRange {
    /// A 1 GiB range (2^18 pages) on node `nid`, one folio. See
    /// [`alloc_pages`](Self::alloc_pages).
    pub(crate) fn alloc(nid: usize) -> Result<Self> {
        Self::alloc_pages(nid, GIGANTIC_PAGES)
    }

    /// [`alloc_pages`](Self::alloc_pages) for the pre-cleared pool:
    /// order-0 pages whatever the size (a 1 GiB range becomes a folio
    /// when a mapping takes it, [`make_folio`](Self::make_folio)), and no
    /// `ENOMEM` logged (the pool's refill thread retries later and logs
    /// once itself).
    pub(crate) fn alloc_for_pool(nid: usize, nr_pages: u64) -> Result<Self> {
        Self::alloc_pages_with(nid, nr_pages, false, true, false)
    }

    /// [`alloc_pages`](Self::alloc_pages) for a mapping whose vmas were
    /// set up at `mmap`: from ZONE_MOVABLE only if `may_be_movable` (its
    /// vmas refuse long-term writable pins) and the opt-in is on now, so a
    /// GiB never lands where its vmas do not expect it.
    pub(crate) fn alloc_for_mapping(nid: usize, nr_pages: u64, may_be_movable: bool) -> Result<Self> {
        Self::alloc_pages_with(nid, nr_pages, true, may_be_movable, true)
    }

    /// `nr_pages` (a power of two up to [`MAX_RANGE_PAGES`]) physically
    /// contiguous, naturally aligned pages on node `nid`, never another
    /// node's memory (`__GFP_THISNODE`), zeroed only if `init_on_alloc` is
    /// on. A range of exactly 1 GiB is one folio (see the type).
    ///
    /// Errors: `EINVAL` for a bad size, a node that does not exist, is
    /// offline or has no memory; `EINTR`
    /// when the allocation failed and the task is being killed; `ENOMEM`
    /// when the node has no free naturally aligned range of that size in
    /// one zone (`GFP_KERNEL` never takes `ZONE_MOVABLE`; with
    /// [`MOVABLE_GIGANTIC`] set, `__GFP_MOVABLE | __GFP_HIGHMEM` does).
    pub(crate) fn alloc_pages(nid: usize, nr_pages: u64) -> Result<Self> {
        Self::alloc_pages_with(nid, nr_pages, true, true, true)
    }

    /// `may_be_folio`: a 1 GiB range is one folio (else order-0 pages).
    fn alloc_pages_with(
        nid: usize,
        nr_pages: u64,
        log: bool,
        may_be_movable: bool,
        may_be_folio: bool,
    ) -> Result<Self> {
        if nr_pages == 0 || !nr_pages.is_power_of_two() || nr_pages > MAX_RANGE_PAGES {
            pr_debug!("clear: bad range size of {} pages\n", nr_pages);
            return Err(EINVAL);
        }
        let nid = check_memory_node(nid as i64)?;
        // SAFETY: reads a static key / boot parameter.
        let zeroed = unsafe { shim::tk_init_on_alloc() };
        let folio = may_be_folio && nr_pages == GIGANTIC_PAGES;
        // Taken as movable (registered for the memory notifier, and kept
        // from vmas that accept long-term pins) only where it can land in
        // ZONE_MOVABLE: with the opt-in, on a node that has such memory. A
        // node without ZONE_MOVABLE gives kernel-zone memory either way.
        // SAFETY: the shim range-checks `nid`.
        let movable = may_be_movable
            && MOVABLE_GIGANTIC.load(Relaxed)
            && unsafe { shim::tk_node_has_movable(nid as c_int) };
        // Until the range is registered (or this fails), the notifier
        // refuses offlines of the node's memory.
        let _pending = if movable { Pending::new(nid) } else { None };
        // SAFETY: `nid` is an online node with memory; the shim passes
        // GFP_KERNEL | __GFP_THISNODE | __GFP_NOWARN (| __GFP_MOVABLE |
        // __GFP_HIGHMEM) and no nodemask; 2^18 pages is within
        // MAX_FOLIO_ORDER (PUD_ORDER).
        let first =
            unsafe { shim::tk_alloc_contig(nr_pages as c_ulong, nid as c_int, movable, folio) };
        let Some(first) = NonNull::new(first) else {
            // alloc_contig_range() gives up when the task is killed
            // (fatal_signal_pending()): no memory shortage to report.
            // SAFETY: no precondition.
            if unsafe { shim::tk_fatal_signal_pending() } {
                return Err(EINTR);
            }
            if !log {
                return Err(ENOMEM);
            }
            // SAFETY: the shim range-checks `nid`.
            if !movable && unsafe { shim::tk_node_has_movable(nid as c_int) } {
                crate::ratelimit::ratelimited!(pr_err,
                    "clear: no free naturally aligned {} MiB range in node {}'s kernel zones; its ZONE_MOVABLE memory is used only with 'echo 1 > /sys/kernel/debug/tierkit/movable_gigantic'\n",
                    (nr_pages * PAGE_BYTES) >> 20,
                    nid
                );
                return Err(ENOMEM);
            }
            crate::ratelimit::ratelimited!(
                pr_err,
                "clear: no free naturally aligned {} MiB range on node {}\n",
                (nr_pages * PAGE_BYTES) >> 20,
                nid
            );
            return Err(ENOMEM);
        };
        // SAFETY: `first` is the first page of the `nr_pages` pages just
        // allocated, so `first + nr_pages - 1` is in the same memmap range
        // (pfn_to_page of its pfn).
        let (nid_first, nid_last, base) = unsafe {
            let pfn = shim::tk_page_to_pfn(first.as_ptr());
            let last = shim::tk_pfn_to_page(pfn + (nr_pages - 1) as c_ulong);
            (
                bindings::page_to_nid(first.as_ptr()),
                bindings::page_to_nid(last),
                shim::tk_page_address(first.as_ptr()),
            )
        };
        let free = || {
            // SAFETY: the pages were allocated above and are not used.
            unsafe { shim::tk_free_contig(first.as_ptr(), nr_pages as c_ulong) }
        };
        if nid_first != nid as c_int || nid_last != nid as c_int {
            crate::ratelimit::ratelimited!(
                pr_err,
                "clear: asked node {}, got pages of nodes {}..{}\n",
                nid,
                nid_first,
                nid_last
            );
            free();
            return Err(ENOMEM);
        }
        let Some(base) = NonNull::new(base.cast::<u8>()) else {
            crate::ratelimit::ratelimited!(
                pr_err,
                "clear: range on node {} is not in the direct map\n",
                nid
            );
            free();
            return Err(EINVAL);
        };
        let movable_slot = if movable {
            let delay = crate::pages::movable::REGISTER_DELAY_MS.load(Relaxed);
            if delay != 0 {
                // SAFETY: process context, no lock held.
                unsafe { bindings::msleep(delay) };
            }
            // SAFETY: `first` is a page just allocated.
            let pfn = unsafe { shim::tk_page_to_pfn(first.as_ptr()) } as u64;
            match movable_register(pfn, nr_pages) {
                Ok(i) => Some(i),
                Err(e) => {
                    free();
                    return Err(e);
                }
            }
        } else {
            None
        };
        // INVARIANT: checked above: `nr_pages` contiguous pages of `nid`
        // from `alloc_contig_pages()`, mapped at `base`.
        let mut range = Self {
            first,
            base,
            nr_pages,
            nid,
            folio,
            zeroed,
            movable_slot,
            tracked: false,
        };
        if folio {
            range.track()?;
        }
        Ok(range)
    }

    /// Counts a fresh folio for the memory notifier: it may be mapped and
    /// so held by others after this value drops, so it is counted
    /// (crate::pages::movable) from now until it is back in the allocator.
    /// Errors: `ENOMEM` (no counter, or an offline is taking its memory
    /// down); the range is then freed on drop as an untracked folio.
    fn track(&mut self) -> Result {
        // SAFETY: By the type invariant, `first` heads a folio of
        // `nr_pages` this value owns, not counted yet (`tracked` false).
        match unsafe { shim::tk_movable_track(self.first.as_ptr(), self.nr_pages as c_ulong) } {
            0 => {
                self.tracked = true;
                Ok(())
            }
            _ => Err(ENOMEM),
        }
    }

    /// Makes a 1 GiB range of order-0 pages ([`alloc_for_pool`]) one
    /// folio, as [`alloc`](Self::alloc) gives one, for a mapping to map by
    /// one PUD; nothing for a folio or another size. The contents stay as
    /// they are (a cleared range stays cleared).
    ///
    /// Errors: `EBUSY` when a page is briefly held by someone else (a
    /// speculative reference), `ENOMEM` as [`alloc`](Self::alloc): the
    /// range is then still whole and is freed when dropped.
    ///
    /// [`alloc_for_pool`]: Self::alloc_for_pool
    pub(crate) fn make_folio(&mut self) -> Result {
        if self.folio || self.nr_pages != GIGANTIC_PAGES {
            return Ok(());
        }
        // SAFETY: By the type invariant, `first` heads `nr_pages` order-0
        // pages from `tk_alloc_contig()` (not a folio), each with only this
        // value's reference: the range is in nobody's page tables.
        kernel::error::to_result(unsafe {
            shim::tk_contig_to_folio(self.first.as_ptr(), self.nr_pages as c_ulong)
        })?;
        // INVARIANT: `first` now heads one folio of `nr_pages` holding the
        // one reference this value owns.
        self.folio = true;
        self.track()
    }

    /// Whether it was taken with the `movable_gigantic` opt-in (it may be
    /// in ZONE_MOVABLE).
    pub(crate) fn taken_movable(&self) -> bool {
        self.movable_slot.is_some()
    }

    /// Whether the allocator zeroed every page (`init_on_alloc` was on).
    pub(crate) fn zeroed_by_allocator(&self) -> bool {
        self.zeroed
    }

    /// References to the range's folio (its head page's count for order-0
    /// ranges): 1, this value's own, when nothing else holds it.
    pub(crate) fn folio_refs(&self) -> i32 {
        // SAFETY: By the type invariant, `first` is a page this value keeps
        // allocated.
        unsafe { shim::tk_folio_ref_count(self.first.as_ptr()) }
    }

    /// Whether the range is one compound folio.
    pub(crate) fn is_folio(&self) -> bool {
        self.folio
    }

    /// The node of every page of the range.
    pub(crate) fn nid(&self) -> usize {
        self.nid
    }

    /// Base pages in the range.
    pub(crate) fn nr_pages(&self) -> u64 {
        self.nr_pages
    }

    /// Bytes in the range.
    pub(crate) fn bytes(&self) -> u64 {
        self.nr_pages * PAGE_BYTES
    }

    /// The pfn of the first page.
    pub(crate) fn pfn(&self) -> u64 {
        // SAFETY: By the type invariant, `first` is a valid page.
        unsafe { shim::tk_page_to_pfn(self.first.as_ptr()) as u64 }
    }

    /// The kernel virtual address of the first byte (direct map). Writing
    /// through it is the caller's business: it must not race with other
    /// users of the memory, such as a process that has it mapped.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// Page `index` of the range, for `vm_insert_page()`: a page of a folio
    /// (or an order-0 page) the range holds a reference to, neither anon
    /// nor typed, so `validate_page_before_insert()` (mm/memory.c) accepts
    /// it. A mapping takes its own reference on the folio, so the pages
    /// outlive the range while mapped.
    pub(crate) fn page(&self, index: u64) -> Option<BorrowedPage<'_>> {
        if index >= self.nr_pages {
            return None;
        }
        // SAFETY: By the type invariant, the range is `nr_pages` contiguous
        // pages from `first`, and `index < nr_pages`: the pfn is inside it.
        let page = unsafe { shim::tk_pfn_to_page((self.pfn() + index) as c_ulong) };
        let page = NonNull::new(page)?;
        // SAFETY: By the type invariant, the page is part of the range owned
        // by `self`, so it stays valid while `self` is borrowed.
        Some(unsafe { BorrowedPage::from_raw(page) })
    }
}

impl GiganticRange {
    /// [`page`](Self::page) as a raw pointer, for `vm_insert_pages()` and
    /// the fault handler; valid while the range is.
    pub(crate) fn page_ptr(&self, index: u64) -> Option<*mut bindings::page> {
        self.page(index).map(|p| p.as_ptr())
    }
}

impl Drop for GiganticRange {
    fn drop(&mut self) {
        if let Some(i) = self.movable_slot {
            // Before the pages go back: a new range may reuse them.
            MOVABLE_RANGES[i].store(0, Release);
        }
        if self.tracked {
            // SAFETY: By the type invariant, `first` heads the folio of
            // `nr_pages` pages this value holds one reference to, counted
            // by `tk_movable_track()`; given back once here. Holders of
            // other references (a pipe, O_DIRECT) keep it tierkit's orphan
            // until they put them.
            unsafe { shim::tk_movable_put(self.first.as_ptr(), self.nr_pages as c_ulong) };
            return;
        }
        // SAFETY: By the type invariant, `first` heads `nr_pages` pages
        // from `tk_alloc_contig()` to which this value holds its
        // reference (the folio's, or one per order-0 page), dropped here
        // once; holders of other references keep the folio until they
        // put them.
        unsafe { shim::tk_free_contig(self.first.as_ptr(), self.nr_pages as c_ulong) };
    }
}
