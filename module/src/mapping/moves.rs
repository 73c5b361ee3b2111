// SPDX-License-Identifier: GPL-2.0

//! A rebalance's moves (`TK_IOC_REBALANCE`, module/src/rebalance.rs), in
//! batches as the kernel's `migrate_pages()` moves folios
//! (`migrate_pages_batch()`: up to `NR_MAX_BATCHED_MIGRATION` folios
//! unmapped with `TTU_BATCH_FLUSH`, one TLB flush, then each copied).
//!
//! Each batch takes up to [`MOVE_BATCH`] misplaced pages in three steps:
//! 1. under the mapping's lock, the pages of the next window of the
//!    mapping that are not on their target node are picked (and counted);
//! 2. without the lock, a page on its target is allocated for each (the
//!    allocation may sleep; a fault on the mapping meanwhile does not wait);
//! 3. under the lock again, each pick is checked anew (what the fault
//!    handler, a fork's unshare or an offline may have changed while the
//!    lock was dropped: the page in the slot, its node, a DMA pin), the
//!    span of the batch's pages is zapped once (one `unmap_mapping_pages()`:
//!    one mmu_gather, one TLB flush per vma), and each page is copied and
//!    swapped in ([`Backing::swap_in`]).
//!
//! A fault in the mapping thus waits for at most one batch of copies, as a
//! fault on a folio under migration waits for its batch. The memory a call
//! holds beyond the mapping's own is one batch of new pages.

use super::{Backing, BackingPages, Stayed};
use crate::pages::NodePage;
use crate::placed::PlacedPages;
use crate::shim;
use kernel::{ffi::c_ulong, prelude::*, sync::atomic::Relaxed};

/// Pages one batch moves with one zap (one TLB flush per vma): the
/// kernel's `NR_MAX_BATCHED_MIGRATION` (`HPAGE_PMD_NR`, 512 on x86-64).
pub(crate) const MOVE_BATCH: usize = 512;

/// File pages one look under the lock covers at most, moved or not.
const SCAN_WINDOW: usize = 4 * MOVE_BATCH;

/// What a rebalance did so far (`TkRebalance`'s counters).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RebalanceCounts {
    pub(crate) looked: u64,
    pub(crate) misplaced: u64,
    pub(crate) moved: u64,
    pub(crate) no_memory: u64,
    pub(crate) busy: u64,
}

/// One batch's picks: `(slot, target node)`, then `(slot, new page)`.
struct Batch {
    picked: KVec<(usize, usize)>,
    ready: KVec<(usize, NodePage)>,
}

impl Backing {
    /// Moves each 4 KiB page of this mapping that is not on the node
    /// `target(ilx)` gives for its ilx (its file page offset) to that
    /// node, in batches (see the module docs); `go` is called before each
    /// batch, without the lock, and says how many pages may move now (0:
    /// the rest is only counted), or stops the walk with its error.
    /// `EOPNOTSUPP` for a gigantic mapping; `EINTR` on a fatal signal.
    pub(crate) fn rebalance(
        &self,
        target: impl Fn(u64) -> usize,
        counts: &mut RebalanceCounts,
        dry_run: bool,
        mut go: impl FnMut(&RebalanceCounts) -> Result<u64>,
    ) -> Result {
        let len = match &*self.pages.lock() {
            BackingPages::Gigantic(_) => return Err(EOPNOTSUPP),
            // Nobody maps it any more: its pages wait for the release
            // only, so none is moved or counted.
            BackingPages::Small(_) if self.vmas.load(Relaxed) == 0 => return Ok(()),
            BackingPages::Small(p) => p.len(),
        };
        let mut b = Batch {
            picked: KVec::with_capacity(MOVE_BATCH, GFP_KERNEL)?,
            ready: KVec::with_capacity(MOVE_BATCH, GFP_KERNEL)?,
        };
        let mut i = 0usize;
        while i < len {
            let allowed = if dry_run { 0 } else { go(counts)? };
            i = self.pick(i, len, &target, allowed, counts, &mut b.picked)?;
            self.alloc_picked(&mut b, counts)?;
            {
                let mut pages = self.pages.lock();
                let BackingPages::Small(p) = &mut *pages else {
                    return Err(EOPNOTSUPP);
                };
                self.move_ready(p, &mut b.ready, counts);
            }
            // SAFETY: process context, no lock held.
            unsafe { shim::tk_cond_resched() };
            if crate::sync::fatal_signal_pending() {
                return Err(EINTR);
            }
        }
        Ok(())
    }

    /// Step 1 (takes the lock): counts the pages of slots `i..` up to
    /// [`SCAN_WINDOW`] and puts the misplaced ones in `picked`, at most
    /// `allowed` and [`MOVE_BATCH`] (none if `allowed` is 0: the window is
    /// only counted). A DMA-pinned page is counted `busy`. Returns the slot
    /// the next batch starts at.
    fn pick(
        &self,
        i: usize,
        len: usize,
        target: &impl Fn(u64) -> usize,
        allowed: u64,
        counts: &mut RebalanceCounts,
        picked: &mut KVec<(usize, usize)>,
    ) -> Result<usize> {
        let count_only = allowed == 0;
        let room = usize::try_from(allowed).unwrap_or(usize::MAX).min(MOVE_BATCH);
        let end = (i + SCAN_WINDOW).min(len);
        let pages = self.pages.lock();
        let BackingPages::Small(p) = &*pages else {
            return Err(EOPNOTSUPP);
        };
        let mut tried = 0usize;
        for k in i..end {
            let Some(cur) = p.pages().get(k) else {
                return Ok(end);
            };
            let want = target(self.pgoff + k as u64);
            if cur.nid() != want && !count_only && tried == room {
                // The batch is full, or the pace allows no more now: this
                // page starts the next batch.
                return Ok(k);
            }
            counts.looked += 1;
            if cur.nid() == want {
                continue;
            }
            counts.misplaced += 1;
            if count_only {
                continue;
            }
            tried += 1;
            // SAFETY: `cur` is a page `p` owns.
            if unsafe { shim::tk_page_maybe_dma_pinned(cur.as_ptr()) } {
                counts.busy += 1;
                continue;
            }
            // Capacity for MOVE_BATCH was reserved, and `tried <= room`.
            if picked.push_within_capacity((k, want)).is_err() {
                counts.no_memory += 1;
            }
        }
        Ok(end)
    }

    /// Step 2 (without the lock): a new page on its target for each pick,
    /// into `b.ready`; a pick without one is counted `no_memory`. `EINTR`
    /// on a fatal signal (the pages allocated so far are freed).
    fn alloc_picked(&self, b: &mut Batch, counts: &mut RebalanceCounts) -> Result {
        for (n, (k, want)) in b.picked.drain_all().enumerate() {
            match NodePage::alloc_on(want, self.movable) {
                // Capacity for MOVE_BATCH was reserved, as for `picked`.
                Ok(new) => {
                    if b.ready.push_within_capacity((k, new)).is_err() {
                        counts.no_memory += 1;
                    }
                }
                Err(_) => counts.no_memory += 1,
            }
            if let Err(e) = crate::sync::resched_killable(n + 1) {
                b.ready.clear();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Step 3 (caller holds the lock): drops the picks that changed while
    /// the lock was dropped (the slot's page is on the target now, or is
    /// pinned: `busy`), zaps the span of the rest once, then
    /// [`Backing::swap_in`] each; `ready` is left empty (a page that stays
    /// frees its new page).
    pub(super) fn move_ready(
        &self,
        p: &mut PlacedPages,
        ready: &mut KVec<(usize, NodePage)>,
        counts: &mut RebalanceCounts,
    ) {
        ready.retain(|(k, new)| match p.pages().get(*k) {
            // Moved meanwhile (an offline's move happened to land it
            // there): nothing to do; it was counted as misplaced.
            Some(cur) if cur.nid() == new.nid() => false,
            // SAFETY: `cur` is a page `p` owns.
            Some(cur) if unsafe { shim::tk_page_maybe_dma_pinned(cur.as_ptr()) } => {
                counts.busy += 1;
                false
            }
            Some(_) => true,
            None => {
                counts.no_memory += 1;
                false
            }
        });
        let (Some(&(first, _)), Some(&(last, _))) = (ready.first(), ready.last()) else {
            return;
        };
        // SAFETY: By the type invariant, `mapping` is the live address
        // space of the file that owns `self`. Faults on these pages wait
        // for the lock the caller holds, so none maps an old page again
        // after the zap.
        unsafe {
            kernel::bindings::unmap_mapping_pages(
                self.mapping,
                (self.pgoff + first as u64) as c_ulong,
                (last - first + 1) as c_ulong,
                true,
            )
        };
        while let Some((k, new)) = ready.pop() {
            match Self::swap_in(p, k, new) {
                Ok(()) => counts.moved += 1,
                Err(Stayed::NoMemory) => counts.no_memory += 1,
                Err(Stayed::Pinned | Stayed::Referenced) => counts.busy += 1,
            }
        }
    }
}
