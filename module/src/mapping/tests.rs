// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of the page move that a rebalance and a memory offline
//! make ([`Backing::swap_in`] after [`NodePage::alloc_on`] or
//! [`NodePage::alloc_away`]), on pages of the kernel's own making: no
//! mapping, so no zap is needed and nobody else can write them.
//!
//! A failing `assert!` ends the test thread without running destructors,
//! so each case collects what it saw, puts back every reference it took
//! and frees its pages, and asserts afterwards.

use kernel::prelude::*;

#[kunit_tests(tierkit_move)]
mod moves {
    use crate::interleave::{Nodemask, MAX_NUMNODES};
    use crate::mapping::{Backing, Stayed};
    use crate::pages::NodePage;
    use crate::placed::{alloc_placed, PlacedPages};
    use crate::shim;
    use crate::state::DeviceState;
    use crate::wi::{memory_nodes, Policy};
    use core::ffi::c_int;
    use kernel::{prelude::*, sync::Arc};

    const PAGES: usize = 16;

    /// The first two nodes with memory (DRAM node 0 and the memory-only
    /// or CXL node on both topologies).
    fn two_nodes() -> Result<(usize, usize)> {
        let mut it = memory_nodes().iter();
        match (it.next(), it.next()) {
            (Some(a), Some(b)) => Ok((a, b)),
            _ => {
                pr_err!("tierkit_move: needs two nodes with memory\n");
                Err(ENODEV)
            }
        }
    }

    /// [`PAGES`] pages on node `a`, page `i` filled with `0x40 + i`.
    fn placed_on(state: &Arc<DeviceState>, a: usize) -> Result<PlacedPages> {
        let policy = Policy::new(1, 0, Nodemask::single(a).0, &[0; MAX_NUMNODES])?;
        let sel = policy.selector(&state.wi.weights())?;
        let p = alloc_placed(state, &sel, 0, PAGES)?;
        for (i, page) in p.pages().iter().enumerate() {
            // SAFETY: the pages are ours alone (never mapped).
            unsafe { page.fill(0x40 + i as u8) };
        }
        Ok(p)
    }

    /// Whether page `i` of `p` still holds its fill.
    fn kept(p: &PlacedPages, i: usize) -> bool {
        // SAFETY: the pages are ours alone (never mapped).
        p.pages()
            .get(i)
            .is_some_and(|pg| unsafe { pg.all_bytes_are(0x40 + i as u8) })
    }

    #[test]
    fn a_move_keeps_the_contents_and_lands_on_the_target_node() -> Result {
        let (a, b) = two_nodes()?;
        let state = DeviceState::new()?;
        let mut p = placed_on(&state, a)?;
        let (mut moved, mut on_b, mut intact, mut refs_one) = (0, 0, 0, 0);
        for i in 0..PAGES {
            // ZONE_MOVABLE allowed: the CXL node of the cxl topology has
            // no other memory.
            let new = NodePage::alloc_on(b, true)?;
            if Backing::swap_in(&mut p, i, new).is_ok() {
                moved += 1;
            }
            let pg = &p.pages()[i];
            on_b += usize::from(pg.nid() == b);
            intact += usize::from(kept(&p, i));
            // SAFETY: `pg` is a valid page `p` keeps allocated.
            refs_one += usize::from(unsafe { shim::tk_folio_ref_count(pg.as_ptr()) } == 1);
        }
        let (held_a, held_b) = (state.stats.held(a), state.stats.held(b));
        drop(p);
        let (left_a, left_b) = (state.stats.held(a), state.stats.held(b));
        assert_eq!(moved, PAGES);
        assert_eq!(on_b, PAGES);
        assert_eq!(intact, PAGES);
        // The backing's own reference only: the old one's was not moved
        // onto the new page, nor left behind.
        assert_eq!(refs_one, PAGES);
        assert_eq!((held_a, held_b), (0, PAGES as u64));
        assert_eq!((left_a, left_b), (0, 0));
        Ok(())
    }

    #[test]
    fn a_page_someone_else_holds_stays_where_it_is() -> Result {
        let (a, b) = two_nodes()?;
        let state = DeviceState::new()?;
        let mut p = placed_on(&state, a)?;
        // SAFETY: no precondition.
        let pin = unsafe { shim::tk_test_pin_bias() };
        let mut seen: KVec<(bool, bool, bool, c_int)> = KVec::new();
        // One extra reference (a ptrace write in progress), then a FOLL_PIN.
        for (i, extra) in [(0usize, 1), (1, pin)] {
            let old = p.pages()[i].as_ptr();
            // SAFETY: `old` is a valid page `p` keeps allocated; the
            // references are put back below.
            unsafe { shim::tk_test_page_ref_add(old, extra) };
            let new = NodePage::alloc_on(b, true)?;
            let res = Backing::swap_in(&mut p, i, new);
            let stayed = p.pages()[i].as_ptr() == old;
            // SAFETY: as above: the references this case added.
            unsafe { shim::tk_test_page_ref_add(old, -extra) };
            let why = match res {
                Err(Stayed::Referenced) => 1,
                Err(Stayed::Pinned) => 2,
                Err(Stayed::NoMemory) => 3,
                Ok(()) => 0,
            };
            // SAFETY: as above.
            let refs = unsafe { shim::tk_folio_ref_count(old) };
            seen.push((stayed, kept(&p, i), refs == 1, why), GFP_KERNEL)?;
        }
        let held_a = state.stats.held(a);
        drop(p);
        // Kept: same page, contents, one reference again, the reason.
        assert!(seen[0].0 && seen[0].1 && seen[0].2);
        assert_eq!(seen[0].3, 1);
        assert!(seen[1].0 && seen[1].1 && seen[1].2);
        assert_eq!(seen[1].3, 2);
        assert_eq!(held_a, PAGES as u64);
        Ok(())
    }

    /// A fork's snapshot (`mapping::cow`): a page held by two
    /// `PlacedPages` has two references and is shared; a move leaves it
    /// (a reference beside the backing's); when one holder lets go the
    /// other has it alone, with one reference and its contents; and the
    /// last holder's drop frees it (the statistics count each holder).
    #[test]
    fn a_shared_page_stays_put_and_goes_with_its_last_holder() -> Result {
        let (a, b) = two_nodes()?;
        let state = DeviceState::new()?;
        let mut p = placed_on(&state, a)?;
        let mut q = PlacedPages::with_capacity(&state, PAGES)?;
        let mut run = (a, 0);
        for pg in p.pages() {
            q.push_in_run(pg.share(), a, &mut run)?;
        }
        q.count_run(&mut run);
        let refs = |x: &PlacedPages, n: c_int| {
            x.pages()
                .iter()
                // SAFETY: valid pages `x` keeps allocated.
                .filter(|pg| unsafe { shim::tk_folio_ref_count(pg.as_ptr()) } == n)
                .count()
        };
        let shared = p.pages().iter().filter(|pg| pg.is_shared()).count();
        let two_refs = refs(&p, 2);
        let held_both = state.stats.held(a);
        let new = NodePage::alloc_on(b, true)?;
        let moved = !matches!(Backing::swap_in(&mut p, 0, new), Err(Stayed::Referenced));
        drop(p);
        let alone = q.pages().iter().filter(|pg| !pg.is_shared()).count();
        let one_ref = refs(&q, 1);
        let intact = (0..PAGES).filter(|&i| kept(&q, i)).count();
        let held_one = state.stats.held(a);
        drop(q);
        let held_none = state.stats.held(a);
        assert_eq!((shared, two_refs), (PAGES, PAGES));
        assert!(!moved);
        assert_eq!((alone, one_ref, intact), (PAGES, PAGES, PAGES));
        assert_eq!(held_both, 2 * PAGES as u64);
        assert_eq!((held_one, held_none), (PAGES as u64, 0));
        Ok(())
    }

    #[test]
    fn a_target_node_without_memory_gives_no_page() -> Result {
        let (a, _) = two_nodes()?;
        let state = DeviceState::new()?;
        let p = placed_on(&state, a)?;
        // A node id past every node with memory, and one out of range.
        let none = (0..MAX_NUMNODES)
            .rev()
            .find(|&n| !memory_nodes().contains(n));
        let no_memory = none.map(|n| NodePage::alloc_on(n, true).is_err());
        let out_of_range = NodePage::alloc_on(MAX_NUMNODES + 1, true).is_err();
        // Away from `a`: another node, never `a` itself.
        let away = NodePage::alloc_away(a).map(|pg| pg.nid());
        drop(p);
        assert_ne!(no_memory, Some(false));
        assert!(out_of_range);
        assert!(matches!(away, Ok(n) if n != a));
        Ok(())
    }
}
