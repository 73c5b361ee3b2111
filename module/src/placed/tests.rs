// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of the page allocation behind `/dev/tierkit`
//! (`tierkit_wi_alloc`): bulk split and resume state, pages on the node
//! the selector picks, zeroed pages from dirty memory, and cleanup when an
//! allocation fails part-way.
//!
//! Each case builds its own [`DeviceState`], so the weight table and the
//! statistics userspace sees are never touched. KUnit aborts a failing case
//! without running destructors; the cases check what they can before an
//! assertion that could leak pages.
//!
//! [`DeviceState`]: crate::state::DeviceState

use kernel::prelude::*;

/// The real allocation paths behind `/dev/tierkit`.
#[kunit_tests(tierkit_wi_alloc)]
mod alloc {
    use crate::interleave::{weighted_interleave_nid_ref, Nodemask, TaskState, MAX_NUMNODES};
    use crate::pages::NodePage;
    use crate::placed::{alloc_placed, alloc_placed_with, bulk, bulk_with};
    use crate::shim;
    use crate::state::DeviceState;
    use crate::wi::{memory_nodes, Policy};
    use kernel::{prelude::*, str::CString, sync::Arc};

    fn new_state() -> Result<Arc<DeviceState>> {
        DeviceState::new()
    }

    /// The first two nodes with memory (the default topology: DRAM node 0
    /// and a CPU-less CXL node).
    fn two_nodes() -> Result<(usize, usize)> {
        let mut it = memory_nodes().iter();
        match (it.next(), it.next()) {
            (Some(a), Some(b)) => Ok((a, b)),
            _ => {
                pr_err!("tierkit_wi_alloc: needs two nodes with memory\n");
                Err(ENODEV)
            }
        }
    }

    /// A table with weights {a: wa, b: wb}, set through the nodeN ABI.
    fn state_with(a: usize, wa: u8, b: usize, wb: u8) -> Result<Arc<DeviceState>> {
        let state = new_state()?;
        state
            .wi
            .node_store(a, CString::try_from_fmt(fmt!("{wa}\n"))?.to_bytes())?;
        state
            .wi
            .node_store(b, CString::try_from_fmt(fmt!("{wb}\n"))?.to_bytes())?;
        Ok(state)
    }

    fn held_total(state: &DeviceState) -> u64 {
        (0..MAX_NUMNODES).map(|n| state.stats.held(n)).sum()
    }

    #[test]
    fn bulk_split_and_resume_state() -> Result {
        let (a, b) = two_nodes()?;
        let state = state_with(a, 3, b, 1)?;
        let mask = Nodemask::single(a).with(b);
        let weights = state.wi.weights();
        let mut task = TaskState::new();
        let mut per_node = [0u64; MAX_NUMNODES];
        // Fresh policy, {3,1}, 10 pages: 8 and 2, real pages.
        bulk(&state, mask, &weights, &mut task, 10, &mut per_node)?;
        assert_eq!(per_node[a], 8);
        assert_eq!(per_node[b], 2);
        assert_eq!(per_node.iter().sum::<u64>(), 10);
        assert_eq!(state.stats.allocated(a), 8);
        assert_eq!(state.stats.allocated(b), 2);
        assert_eq!(held_total(&state), 0);
        // Resume state: il_prev = a with 1 left, so the next three single
        // allocations go a, b, a.
        assert_eq!(task.il_prev(), a as i32);
        assert_eq!(task.il_weight(), 1);
        let mut t = task;
        assert_eq!(t.next(mask, &weights), Some(a));
        assert_eq!(t.next(mask, &weights), Some(b));
        assert_eq!(t.next(mask, &weights), Some(a));
        // And the bulk path resumes from there too: 1 more page goes to a.
        bulk(&state, mask, &weights, &mut task, 1, &mut per_node)?;
        assert_eq!((per_node[a], per_node[b]), (1, 0));
        assert_eq!((task.il_prev(), task.il_weight()), (a as i32, 0));
        Ok(())
    }

    #[test]
    fn bulk_failure_keeps_state_and_frees() -> Result {
        let (a, b) = two_nodes()?;
        let state = state_with(a, 3, b, 1)?;
        let mask = Nodemask::single(a).with(b);
        let weights = state.wi.weights();
        let mut task = TaskState::from_raw(a as i32, 2);
        let before = task;
        let mut per_node = [0u64; MAX_NUMNODES];
        let r = bulk_with(
            &state,
            mask,
            &weights,
            &mut task,
            4096,
            &mut per_node,
            Some(3000),
        );
        assert_eq!(r, Err(ENOMEM));
        assert_eq!(task, before);
        assert_eq!(held_total(&state), 0);
        // (The pages go back through the per-CPU lists, which NR_FREE_PAGES
        // does not count, so free counts cannot show it; the pages are
        // owned by a vector whose drop frees them.)
        assert_eq!(state.stats.allocated(a) + state.stats.allocated(b), 3000);
        // Zero pages and an empty mask are EINVAL.
        assert_eq!(
            bulk(&state, mask, &weights, &mut task, 0, &mut per_node),
            Err(EINVAL)
        );
        assert_eq!(
            bulk(
                &state,
                Nodemask::EMPTY,
                &weights,
                &mut task,
                1,
                &mut per_node
            ),
            Err(EINVAL)
        );
        assert_eq!(task, before);
        Ok(())
    }

    #[test]
    fn mapped_pages_sit_on_the_selected_node() -> Result {
        let (a, b) = two_nodes()?;
        let state = state_with(a, 3, b, 1)?;
        let policy = Policy::new(0, 0, Nodemask::single(a).with(b).0, &[0; MAX_NUMNODES])?;
        let weights = state.wi.weights();
        let sel = policy.selector(&weights)?;
        let pgoff = 0x7_f123_4567_u64;
        let nr = 1024usize;
        let placed = alloc_placed(&state, &sel, pgoff, nr)?;
        let mut on_node = true;
        let mut zero = true;
        for (i, page) in placed.pages().iter().enumerate() {
            let want = weighted_interleave_nid_ref(policy.mask, &weights, pgoff + i as u64);
            on_node &= Some(page.nid()) == want;
            // SAFETY: the pages are ours alone (never mapped).
            zero &= unsafe { page.all_bytes_are(0) };
        }
        let held = held_total(&state);
        drop(placed);
        assert!(on_node);
        assert!(zero);
        assert_eq!(held, nr as u64);
        assert_eq!(held_total(&state), 0);
        assert_eq!(
            state.stats.allocated(a) + state.stats.allocated(b),
            nr as u64
        );
        assert_eq!(state.stats.allocated(a), 768);
        Ok(())
    }

    #[test]
    fn mapped_pages_failure_frees_everything() -> Result {
        let (a, b) = two_nodes()?;
        let state = state_with(a, 1, b, 1)?;
        let policy = Policy::new(1, 0, Nodemask::single(a).with(b).0, &[0; MAX_NUMNODES])?;
        let sel = policy.selector(&state.wi.weights())?;
        let r = alloc_placed_with(&state, &sel, 0, 512, Some(300));
        assert!(matches!(r, Err(e) if e == ENOMEM));
        assert_eq!(held_total(&state), 0);
        assert_eq!(state.stats.allocated(a) + state.stats.allocated(b), 300);
        Ok(())
    }

    /// Most pages [`dirty_node`] dirties on a node with CPUs: 256 MiB, 64
    /// times what `zero_check` allocates after it (64 probes and 4096
    /// mapped pages). It was 1 GiB; the time goes into allocating and
    /// freeing the pages one by one, which the debug kernel (KASAN, page
    /// poisoning, DEBUG_VM) makes several times slower (1 GiB on each of
    /// two nodes took 19.6 s there).
    const DIRTY_MAX_PAGES: usize = 1 << 16;

    /// Most pages [`dirty_node`] dirties on a CPU-less node: 64 MiB, 16
    /// times what `zero_check` allocates after it. QEMU emulates CXL
    /// memory (the CPU-less node of the cxl topology) access by access:
    /// dirtying 1 GiB there took 45 s.
    const DIRTY_MAX_PAGES_CPULESS: usize = 1 << 14;

    /// Allocates most of `nid`'s free memory, fills it with 0xA5 and frees
    /// it, so that the allocations that follow get dirty pages. Returns the
    /// number of pages dirtied.
    ///
    /// The probes of `zero_check` show whether the pages handed out next
    /// are dirty: with too little dirt they would find none, and the test
    /// would fail.
    fn dirty_node(nid: usize) -> Result<usize> {
        // 7/8 of it, at most [`DIRTY_MAX_PAGES`] ([`DIRTY_MAX_PAGES_CPULESS`]
        // on a CPU-less node), stopping early rather than pushing the node
        // into reclaim (__GFP_NORETRY). Order-0 allocations take the
        // smallest free blocks first, so the pages dirtied include the
        // node's small fragments, and the free lists are LIFO, so what is
        // allocated next comes from the dirtied pages: the probes in
        // `zero_check` show it, which is what makes the zero check able to
        // fail.
        let cap = if shim::node::nr_cpus(nid) > 0 {
            DIRTY_MAX_PAGES
        } else {
            DIRTY_MAX_PAGES_CPULESS
        };
        let target = ((shim::node::free_pages(nid) / 8 * 7) as usize).min(cap);
        let mut pages: KVVec<NodePage> = KVVec::with_capacity(target, GFP_KERNEL)?;
        // SAFETY: reads a constant.
        let noretry = unsafe { shim::tk_gfp_noretry() };
        while pages.len() < target {
            // The mmap path's zones (kernel zones, then ZONE_MOVABLE on a
            // movable-only CXL node), so that it sees this dirt.
            let Ok(p) = NodePage::alloc_user(nid, noretry) else {
                break;
            };
            // SAFETY: the page is ours alone.
            unsafe { p.fill(0xa5) };
            if pages.push_within_capacity(p).is_err() {
                break;
            }
            if pages.len() % 512 == 0 {
                // SAFETY: process context, no locks held.
                unsafe { shim::tk_cond_resched() };
            }
        }
        Ok(pages.len())
    }

    /// Pages the zero check allocates to see the dirt.
    const PROBES: usize = 1024;

    /// The zero check on one node: after dirtying it, plain allocations do
    /// see the dirt (so the check can fail), and every page of the mmap
    /// allocation path is on `nid` and zero.
    fn zero_check(nid: usize) -> Result<(usize, usize, bool, bool)> {
        let dirtied = dirty_node(nid)?;
        // Proof that the memory handed out next is dirty.
        // 1024 pages: more than any CPU's per-CPU list holds, so the
        // probes reach the buddy lists whichever CPU the test runs on.
        let mut probes: KVec<NodePage> = KVec::with_capacity(PROBES, GFP_KERNEL)?;
        for _ in 0..PROBES {
            probes.push(NodePage::alloc_uninit(nid)?, GFP_KERNEL)?;
        }
        // SAFETY: the probe pages are ours alone.
        let dirty_seen = probes
            .iter()
            .filter(|p| unsafe { p.all_bytes_are(0xa5) })
            .count();
        drop(probes);
        // The mmap path, single-node policy.
        let state = new_state()?;
        let policy = Policy::new(0, 0, Nodemask::single(nid).0, &[0; MAX_NUMNODES])?;
        let sel = policy.selector(&state.wi.weights())?;
        let placed = alloc_placed(&state, &sel, 0, 4096)?;
        let on_node = placed.pages().iter().all(|p| p.nid() == nid);
        // SAFETY: the pages are ours alone (never mapped).
        let zero = placed.pages().iter().all(|p| unsafe { p.all_bytes_are(0) });
        Ok((dirtied, dirty_seen, on_node, zero))
    }

    #[test]
    fn pages_are_zero_even_from_dirty_memory() -> Result {
        // SAFETY: reads a boot-time setting.
        let init_on_alloc = unsafe { shim::tk_init_on_alloc() };
        for nid in memory_nodes().iter() {
            let (dirtied, dirty_seen, on_node, zero) = zero_check(nid)?;
            pr_info!(
                "tierkit_wi_alloc: node{}: dirtied {} pages, {}/{} probes dirty, init_on_alloc {}\n",
                nid,
                dirtied,
                dirty_seen,
                PROBES,
                init_on_alloc
            );
            assert!(dirtied >= 4096);
            // Unless the allocator zeroes everything anyway, the dirt shows.
            assert!(init_on_alloc || dirty_seen > 0);
            assert!(on_node);
            assert!(zero);
        }
        Ok(())
    }
}
