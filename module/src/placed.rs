// SPDX-License-Identifier: GPL-2.0

//! The pages of a mapping on the nodes the selector picks: the allocation
//! behind `/dev/tierkit`'s `mmap` (address path, [`alloc_placed`]) and
//! `TK_IOC_BULK` (bulk path, [`bulk`]), and the [`PlacedPages`] a mapping
//! holds, counted in the device's statistics.

mod tests;

use crate::interleave::{self, Nodemask, Selector, TaskState, Weights, MAX_NUMNODES};
use crate::pages::NodePage;
use crate::state::DeviceState;
use crate::sync::{resched_every, resched_killable};
use kernel::{bindings, prelude::*, sync::Arc};
/// Frees `pages` from the end, rescheduling every 512 pages; `each` is
/// called for every page before it is freed (statistics).
fn free_all(pages: &mut KVVec<NodePage>, mut each: impl FnMut(&NodePage)) {
    let mut freed = 0usize;
    while let Some(p) = pages.pop() {
        each(&p);
        drop(p);
        freed += 1;
        resched_every(freed);
    }
}

/// The pages of one mapping of a `/dev/tierkit` file, in mapping order,
/// counted as "held" in the statistics until dropped.
pub(crate) struct PlacedPages {
    pages: KVVec<NodePage>,
    state: Arc<DeviceState>,
}

impl PlacedPages {
    /// The pages, page `i` of the mapping at index `i`.
    pub(crate) fn pages(&self) -> &[NodePage] {
        &self.pages
    }

    /// Number of pages.
    pub(crate) fn len(&self) -> usize {
        self.pages.len()
    }

    /// Puts `new` in place of page `i` (which is freed) and moves its
    /// count in the statistics to `new`'s node. The caller has zapped the
    /// old page's PTEs and copied its contents.
    pub(crate) fn replace(&mut self, i: usize, new: NodePage) {
        let nid = new.nid();
        if let Some(slot) = self.pages.get_mut(i) {
            let old = core::mem::replace(slot, new);
            self.state.stats.release(old.nid(), 1);
            self.state.stats.add(nid, 1, true);
            drop(old);
        }
    }

    /// No pages yet, room for `cap`: a fork's snapshot
    /// (module/src/mapping/cow.rs) fills it with
    /// [`push_in_run`](Self::push_in_run).
    pub(crate) fn with_capacity(state: &Arc<DeviceState>, cap: usize) -> Result<PlacedPages> {
        Ok(PlacedPages {
            pages: KVVec::with_capacity(cap, GFP_KERNEL)?,
            state: state.clone(),
        })
    }

    /// Appends `page` of node `nid`, counted as held there when the
    /// caller's `run` (node, pages) ends: a run of pages on one node is
    /// counted at once ([`count_run`](Self::count_run)), not page by page.
    /// `ENOMEM` beyond the capacity (`page` is dropped uncounted).
    pub(crate) fn push_in_run(
        &mut self,
        page: NodePage,
        nid: usize,
        run: &mut (usize, u64),
    ) -> Result {
        if run.0 != nid {
            self.count_run(run);
            *run = (nid, 0);
        }
        self.pages.push_within_capacity(page).map_err(|_| ENOMEM)?;
        run.1 += 1;
        Ok(())
    }

    /// Counts the pages of `run` (node, pages) that
    /// [`push_in_run`](Self::push_in_run) appended as held on its node,
    /// and empties it. Every run must be counted before `self` drops.
    pub(crate) fn count_run(&self, run: &mut (usize, u64)) {
        if run.1 != 0 {
            self.state.stats.add(run.0, run.1, true);
        }
        run.1 = 0;
    }

    /// The pages as an array of `struct page *`, for `vm_insert_pages()`.
    /// The pages stay owned by `self` (the borrow keeps them alive).
    pub(crate) fn raw_pages(&self) -> &[*mut bindings::page] {
        let pages: &[NodePage] = &self.pages;
        // SAFETY: `NodePage` is `repr(transparent)` over
        // `NonNull<bindings::page>`, which has the layout of
        // `*mut bindings::page`; same length, same lifetime, read only.
        unsafe { core::slice::from_raw_parts(pages.as_ptr().cast(), pages.len()) }
    }
}

/// Pages that are freed together on drop, with reschedule points.
struct Batch(KVVec<NodePage>);

impl Drop for Batch {
    fn drop(&mut self) {
        free_all(&mut self.0, |_| {});
    }
}

impl Drop for PlacedPages {
    fn drop(&mut self) {
        let state = &self.state;
        free_all(&mut self.pages, |p| state.stats.release(p.nid(), 1));
    }
}

/// The address path for a mapping: allocates `nr_pages` zeroed pages, page
/// `i` on `sel.node_for_ilx(pgoff + i)` (the ilx `get_vma_policy()`
/// computes for a mapping at file page offset `pgoff`), and checks each
/// page's node. All pages are allocated before anything is mapped; if one
/// allocation fails, every page taken so far is freed and the result is
/// `ENOMEM`. Every 512 pages it reschedules and, on a fatal signal, frees
/// everything and returns `EINTR`.
///
/// `fail_after` makes the allocation number `fail_after` fail, for tests of
/// the error path.
pub(crate) fn alloc_placed_with(
    state: &Arc<DeviceState>,
    sel: &Selector,
    pgoff: u64,
    nr_pages: usize,
    fail_after: Option<usize>,
) -> Result<PlacedPages> {
    let mut placed = PlacedPages {
        pages: KVVec::with_capacity(nr_pages, GFP_KERNEL)?,
        state: state.clone(),
    };
    let mut nodes = [0u8; 256];
    let mut done = 0usize;
    while done < nr_pages {
        let chunk = (nr_pages - done).min(nodes.len());
        sel.fill(pgoff.wrapping_add(done as u64), &mut nodes[..chunk]);
        for &nid in &nodes[..chunk] {
            let nid = nid as usize;
            if fail_after == Some(placed.pages.len()) {
                return Err(ENOMEM);
            }
            let page = NodePage::alloc_zeroed(nid)?;
            if page.nid() != nid {
                // __GFP_THISNODE makes this impossible; refuse rather than
                // hand out a misplaced page.
                return Err(EIO);
            }
            state.stats.add(nid, 1, true);
            // Capacity was reserved: this cannot fail.
            placed
                .pages
                .push_within_capacity(page)
                .map_err(|_| ENOMEM)?;
            resched_killable(placed.pages.len())?;
        }
        done += chunk;
    }
    Ok(placed)
}

/// [`alloc_placed_with`] without fault injection.
pub(crate) fn alloc_placed(
    state: &Arc<DeviceState>,
    sel: &Selector,
    pgoff: u64,
    nr_pages: usize,
) -> Result<PlacedPages> {
    alloc_placed_with(state, sel, pgoff, nr_pages, None)
}

/// The bulk path (`alloc_pages_bulk_weighted_interleave()`, mm/mempolicy.c)
/// with real pages: splits `nr_pages` over `mask` from `task`'s state as
/// the kernel does ([`interleave::bulk_split`]), allocates that many pages
/// on each node, checks every page's node, and frees them all. On success
/// `per_node` holds the counts and `task` the resume state the kernel would
/// leave; on failure (`ENOMEM`, `EINTR` on a fatal signal, or `EIO` for a
/// misplaced page) every page is freed and `task` is unchanged.
///
/// `fail_after` makes the allocation number `fail_after` fail, for tests.
pub(crate) fn bulk_with(
    state: &DeviceState,
    mask: Nodemask,
    weights: &Weights,
    task: &mut TaskState,
    nr_pages: u64,
    per_node: &mut [u64; MAX_NUMNODES],
    fail_after: Option<usize>,
) -> Result {
    let mut next = *task;
    let total = interleave::bulk_split(&mut next, mask, weights, nr_pages, per_node);
    if nr_pages == 0 || total != nr_pages {
        return Err(EINVAL);
    }
    let count = usize::try_from(nr_pages).map_err(|_| EINVAL)?;
    // Freed on every return, with reschedule points (`Batch`'s drop).
    let mut pages = Batch(KVVec::with_capacity(count, GFP_KERNEL)?);
    for nid in mask.iter() {
        for _ in 0..per_node[nid] {
            if fail_after == Some(pages.0.len()) {
                return Err(ENOMEM);
            }
            let page = NodePage::alloc_uninit(nid)?;
            if page.nid() != nid {
                return Err(EIO);
            }
            state.stats.add(nid, 1, false);
            pages.0.push_within_capacity(page).map_err(|_| ENOMEM)?;
            resched_killable(pages.0.len())?;
        }
    }
    crate::pages::movable::window_delay();
    drop(pages);
    *task = next;
    Ok(())
}

/// [`bulk_with`] without fault injection.
pub(crate) fn bulk(
    state: &DeviceState,
    mask: Nodemask,
    weights: &Weights,
    task: &mut TaskState,
    nr_pages: u64,
    per_node: &mut [u64; MAX_NUMNODES],
) -> Result {
    bulk_with(state, mask, weights, task, nr_pages, per_node, None)
}
