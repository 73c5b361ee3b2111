// SPDX-License-Identifier: GPL-2.0

//! The moves of 4 KiB pages: a rebalance's (`TK_IOC_REBALANCE`,
//! module/src/rebalance.rs) and an offline's (`MEM_GOING_OFFLINE`,
//! [`super::offline`]), in batches as the kernel's `migrate_pages()` moves
//! folios (`migrate_pages_batch()`: up to `NR_MAX_BATCHED_MIGRATION` folios
//! unmapped with `TTU_BATCH_FLUSH`, one TLB flush, then each copied).
//!
//! Both walk a mapping's slots with the same [`Backing::walk`]; what differs
//! is which pages go where ([`Rules`]): a rebalance moves each page that is
//! not on the node its ilx picks to that node and counts a page that cannot
//! move; an offline moves each page in the pfns going offline to the nearest
//! other node with memory (the target `do_migrate_range()` picks) and fails
//! at the first page that cannot move.
//!
//! Each batch takes up to [`MOVE_BATCH`] pages to move in three steps:
//! 1. under the mapping's lock, the pages of the next window of the
//!    mapping that are to move are picked (and counted);
//! 2. without the lock, a page on its target is allocated for each (the
//!    allocation may sleep; a fault on the mapping meanwhile does not wait);
//! 3. under the lock again, each pick is checked anew (what the fault
//!    handler, a fork's unshare, a rebalance or an offline may have changed
//!    while the lock was dropped: the page in the slot, its node or pfn, a
//!    DMA pin), the span of the batch's pages is zapped once (one
//!    `unmap_mapping_pages()`: one mmu_gather, one TLB flush per vma), and
//!    each page is copied and swapped in ([`Backing::swap_in`]).
//!
//! A fault in the mapping thus waits for at most one batch of copies, as a
//! fault on a folio under migration waits for its batch. The memory a walk
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

/// Where a picked page goes.
#[derive(Clone, Copy, Debug)]
enum To {
    /// To this node and no other (a rebalance: [`NodePage::alloc_on`]).
    Node(usize),
    /// To the nearest node with memory other than this one, the page's own
    /// (an offline: [`NodePage::alloc_away`]).
    Away(usize),
}

/// What a walk moves, and what it does with a page that cannot move.
struct Rules<S> {
    /// Where the page `cur` in slot `k` goes, `None` if it stays: asked at
    /// the pick and again, under the lock, after the allocation.
    sel: S,
    /// The first page that cannot move ends the walk with its errno (an
    /// offline), instead of being counted and left (a rebalance).
    strict: bool,
    /// Whether a signal pending ends the walk with `EINTR` (asked between
    /// batches, after a `cond_resched()`).
    interrupted: fn() -> bool,
}

/// One pick: its slot, where it goes, and its pfn when picked.
struct Pick {
    k: usize,
    to: To,
    pfn: u64,
}

/// One batch's picks, then `(slot, new page)`; and the first page that
/// could not move, with its pfn.
struct Batch {
    picked: KVec<Pick>,
    ready: KVec<(usize, NodePage)>,
    refused: Option<(u64, Stayed)>,
}

impl Batch {
    /// Room for [`MOVE_BATCH`] of each, taken before the walk: no
    /// allocation of a walk's own is made under the mapping's lock.
    fn new() -> Result<Batch> {
        Ok(Batch {
            picked: KVec::with_capacity(MOVE_BATCH, GFP_KERNEL)?,
            ready: KVec::with_capacity(MOVE_BATCH, GFP_KERNEL)?,
            refused: None,
        })
    }

    /// Notes that the page at `pfn` stays, for `why`.
    fn refuse(&mut self, pfn: u64, why: Stayed) {
        self.refused.get_or_insert((pfn, why));
    }

    /// Under strict rules, the errno of the first page that stayed.
    fn check(&self, strict: bool) -> Result {
        match self.refused {
            Some((_, why)) if strict => Err(why.errno()),
            _ => Ok(()),
        }
    }
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
        let rules = Rules {
            sel: |k: usize, cur: &NodePage| {
                let want = target(self.pgoff + k as u64);
                (cur.nid() != want).then_some(To::Node(want))
            },
            strict: false,
            interrupted: crate::sync::fatal_signal_pending,
        };
        let paced = |c: &RebalanceCounts| if dry_run { Ok(0) } else { go(c) };
        self.walk(len, &rules, counts, &mut Batch::new()?, paced)
    }

    /// The 4 KiB part of an offline of pfns `start..end`: moves each page
    /// of this mapping in that range to the nearest other node with
    /// memory, in batches (see the module docs). Errors: `EBUSY` for a
    /// page that may be pinned for DMA or has a reference beside the
    /// mapping's, `ENOMEM` when no page can be had for one (each logged,
    /// with the page's pfn); `EINTR` on a signal. The pages moved before
    /// stay moved.
    pub(super) fn move_out(&self, len: usize, start: u64, end: u64) -> Result {
        let rules = Rules {
            sel: |_: usize, cur: &NodePage| {
                (start..end)
                    .contains(&cur.pfn())
                    .then(|| To::Away(cur.nid()))
            },
            strict: true,
            interrupted: crate::sync::signal_pending,
        };
        let mut b = Batch::new()?;
        let mut counts = RebalanceCounts::default();
        let res = self.walk(len, &rules, &mut counts, &mut b, |_| Ok(MOVE_BATCH as u64));
        if let (Err(_), Some((pfn, why))) = (&res, b.refused) {
            pr_warn!(
                "refusing to offline pfn {:#x}: a tierkit page there cannot move: {}\n",
                pfn,
                why.why()
            );
        }
        res
    }

    /// The batches of a walk over slots `0..len` (see the module docs),
    /// `go` asked before each as in [`Backing::rebalance`].
    fn walk<S: Fn(usize, &NodePage) -> Option<To>>(
        &self,
        len: usize,
        rules: &Rules<S>,
        counts: &mut RebalanceCounts,
        b: &mut Batch,
        mut go: impl FnMut(&RebalanceCounts) -> Result<u64>,
    ) -> Result {
        let mut i = 0usize;
        while i < len {
            let allowed = go(counts)?;
            i = self.pick(i, len, rules, allowed, counts, b)?;
            b.check(rules.strict)?;
            self.alloc_picked(b, rules.strict, counts)?;
            b.check(rules.strict)?;
            {
                let mut pages = self.pages.lock();
                let BackingPages::Small(p) = &mut *pages else {
                    return Err(EOPNOTSUPP);
                };
                self.move_ready(p, &rules.sel, b, counts);
            }
            b.check(rules.strict)?;
            // SAFETY: process context, no lock held.
            unsafe { shim::tk_cond_resched() };
            if (rules.interrupted)() {
                return Err(EINTR);
            }
        }
        Ok(())
    }

    /// Step 1 (takes the lock): counts the pages of slots `i..` up to
    /// [`SCAN_WINDOW`] and puts those `rules.sel` moves in `b.picked`, at
    /// most `allowed` and [`MOVE_BATCH`] (none if `allowed` is 0: the
    /// window is only counted). A DMA-pinned page is counted `busy` (under
    /// strict rules it ends the pick). Returns the slot the next batch
    /// starts at.
    fn pick<S: Fn(usize, &NodePage) -> Option<To>>(
        &self,
        i: usize,
        len: usize,
        rules: &Rules<S>,
        allowed: u64,
        counts: &mut RebalanceCounts,
        b: &mut Batch,
    ) -> Result<usize> {
        let count_only = allowed == 0;
        let room = usize::try_from(allowed)
            .unwrap_or(usize::MAX)
            .min(MOVE_BATCH);
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
            let to = (rules.sel)(k, cur);
            if to.is_some() && !count_only && tried == room {
                // The batch is full, or the pace allows no more now: this
                // page starts the next batch.
                return Ok(k);
            }
            counts.looked += 1;
            let Some(to) = to else {
                continue;
            };
            counts.misplaced += 1;
            if count_only {
                continue;
            }
            tried += 1;
            // SAFETY: `cur` is a page `p` owns.
            if unsafe { shim::tk_page_maybe_dma_pinned(cur.as_ptr()) } {
                counts.busy += 1;
                b.refuse(cur.pfn(), Stayed::Pinned);
                if rules.strict {
                    return Ok(k);
                }
                continue;
            }
            let pfn = cur.pfn();
            // Capacity for MOVE_BATCH was reserved, and `tried <= room`.
            if b.picked.push_within_capacity(Pick { k, to, pfn }).is_err() {
                counts.no_memory += 1;
            }
        }
        Ok(end)
    }

    /// Step 2 (without the lock): a new page on its target for each pick,
    /// into `b.ready`; a pick without one is counted `no_memory` (under
    /// strict rules it ends the step). `EINTR` on a fatal signal (the pages
    /// allocated so far are freed).
    fn alloc_picked(&self, b: &mut Batch, strict: bool, counts: &mut RebalanceCounts) -> Result {
        let mut n = 0usize;
        while let Some(Pick { k, to, pfn }) = b.picked.pop() {
            let new = match to {
                To::Node(nid) => NodePage::alloc_on(nid, self.movable),
                To::Away(nid) => NodePage::alloc_away(nid),
            };
            match new {
                // Capacity for MOVE_BATCH was reserved, as for `picked`.
                Ok(new) => {
                    if b.ready.push_within_capacity((k, new)).is_err() {
                        counts.no_memory += 1;
                    }
                }
                Err(_) => {
                    counts.no_memory += 1;
                    b.refuse(pfn, Stayed::NoMemory);
                    if strict {
                        b.picked.clear();
                        b.ready.clear();
                        return Ok(());
                    }
                }
            }
            n += 1;
            if let Err(e) = crate::sync::resched_killable(n) {
                b.picked.clear();
                b.ready.clear();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Step 3 (caller holds the lock): drops the picks that changed while
    /// the lock was dropped (`sel` no longer moves the slot's page, or it
    /// is pinned: `busy`), zaps the span of the rest once, then
    /// [`Backing::swap_in`] each; `b.ready` is left empty (a page that
    /// stays frees its new page, and is noted in `b.refused`).
    fn move_ready(
        &self,
        p: &mut PlacedPages,
        sel: &impl Fn(usize, &NodePage) -> Option<To>,
        b: &mut Batch,
        counts: &mut RebalanceCounts,
    ) {
        let mut refused = b.refused;
        b.ready.retain(|(k, _)| match p.pages().get(*k) {
            // Moved meanwhile (a rebalance's or an offline's move happened
            // to land it where it goes): nothing to do; it was counted.
            Some(cur) if sel(*k, cur).is_none() => false,
            // SAFETY: `cur` is a page `p` owns.
            Some(cur) if unsafe { shim::tk_page_maybe_dma_pinned(cur.as_ptr()) } => {
                counts.busy += 1;
                refused.get_or_insert((cur.pfn(), Stayed::Pinned));
                false
            }
            Some(_) => true,
            None => {
                counts.no_memory += 1;
                false
            }
        });
        b.refused = refused;
        let span = b.ready.iter().map(|&(k, _)| k);
        let (Some(first), Some(last)) = (span.clone().min(), span.max()) else {
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
        while let Some((k, new)) = b.ready.pop() {
            let pfn = p.pages().get(k).map_or(0, NodePage::pfn);
            match Self::swap_in(p, k, new) {
                Ok(()) => counts.moved += 1,
                Err(why) => {
                    match why {
                        Stayed::NoMemory => counts.no_memory += 1,
                        Stayed::Pinned | Stayed::Referenced => counts.busy += 1,
                    }
                    b.refuse(pfn, why);
                }
            }
        }
    }
}
