// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `tierkit_clear_errors`: the clearing and bench arguments
//! refused with their errno (nodes, sizes, thread counts), and an
//! allocation that cannot succeed.

use kernel::prelude::*;

#[kunit_tests(tierkit_clear_errors)]
mod error_tests {
    use crate::clear::bench::bench;
    use crate::clear::range::{check_memory_node, MAX_RANGE_PAGES};
    use crate::clear::tests::*;
    use crate::clear::{ClearParams, Threads};
    use crate::uapi::{self, TkClearBench};

    fn bench_arg(nid: i32, threads: u32, placement: u32, nr_gigantic: u32) -> TkClearBench {
        TkClearBench {
            nid,
            threads,
            placement,
            nr_gigantic,
            ..Default::default()
        }
    }

    #[test]
    fn invalid_nodes_are_einval() {
        let before = free_pages();
        let ids = node::nr_node_ids();
        assert!(GiganticRange::alloc_pages(63, SMALL_PAGES).err() == Some(EINVAL));
        assert!(GiganticRange::alloc_pages(ids, SMALL_PAGES).err() == Some(EINVAL));
        assert!(GiganticRange::alloc(usize::MAX / 2).err() == Some(EINVAL));
        assert!(check_memory_node(-1).err() == Some(EINVAL));
        // Offline and memoryless nodes, if this topology has any.
        for nid in 0..ids {
            if !node::has_memory(nid) {
                assert!(GiganticRange::alloc_pages(nid, SMALL_PAGES).err() == Some(EINVAL));
                let mut a = bench_arg(nid as i32, 1, uapi::TK_PLACE_LOCAL, 1);
                assert!(bench(&mut a).err() == Some(EINVAL));
            }
        }
        let mut a = bench_arg(63, 1, uapi::TK_PLACE_LOCAL, 1);
        assert!(bench(&mut a).err() == Some(EINVAL));
        let mut a = bench_arg(-1, 1, uapi::TK_PLACE_LOCAL, 1);
        assert!(bench(&mut a).err() == Some(EINVAL));
        assert!(worst_drop(&before) < SLACK_PAGES);
    }

    #[test]
    fn bad_sizes_are_einval() {
        assert!(GiganticRange::alloc_pages(0, 0).err() == Some(EINVAL));
        assert!(GiganticRange::alloc_pages(0, 3 * 4096).err() == Some(EINVAL));
        assert!(GiganticRange::alloc_pages(0, MAX_RANGE_PAGES * 2).err() == Some(EINVAL));
    }

    /// Zero threads, more threads than eligible CPUs, bad placements and
    /// chunks: EINVAL before any worker runs (the pattern survives) and
    /// without leaking.
    #[test]
    fn bad_thread_counts_are_einval() -> Result {
        let before = free_pages();
        let mut range = GiganticRange::alloc_pages(0, SMALL_PAGES)?;
        let eligible = CpuSet::for_memory(0, Placement::Local)?.len();
        fill(&mut range);
        let zero = crate::clear::clear(
            &mut range,
            &ClearParams::new(Threads::Fixed(0), Placement::Local),
        )
        .err();
        let over = crate::clear::clear(
            &mut range,
            &ClearParams::new(Threads::Fixed(eligible + 1), Placement::Local),
        )
        .err();
        let any_over = crate::clear::clear(
            &mut range,
            &ClearParams::new(Threads::Fixed(u32::MAX - 1), Placement::Any),
        )
        .err();
        let intact = pattern_intact(&range);
        drop(range);
        assert!(zero == Some(EINVAL));
        assert!(over == Some(EINVAL));
        assert!(any_over == Some(EINVAL));
        assert!(intact);

        assert!(Threads::from_uapi(0).err() == Some(EINVAL));
        assert!(Threads::from_uapi(uapi::TK_THREADS_AUTO) == Ok(Threads::Auto));
        assert!(ClearParams::from_uapi(1, 3, 0).err() == Some(EINVAL));
        assert!(ClearParams::from_uapi(1, 0, 6).err() == Some(EINVAL));
        assert!(ClearParams::from_uapi(1, 0, 32768 + 4).err() == Some(EINVAL));
        assert!(ClearParams::from_uapi(1, 0, 0).map(|p| p.chunk_pages) == Ok(512));

        let mut a = bench_arg(0, 0, uapi::TK_PLACE_LOCAL, 1);
        assert!(bench(&mut a).err() == Some(EINVAL));
        let mut a = bench_arg(0, eligible + 1, uapi::TK_PLACE_LOCAL, 1);
        assert!(bench(&mut a).err() == Some(EINVAL));
        let mut a = bench_arg(0, 1, 7, 1);
        assert!(bench(&mut a).err() == Some(EINVAL));
        let mut a = bench_arg(0, 1, uapi::TK_PLACE_LOCAL, 0);
        assert!(bench(&mut a).err() == Some(EINVAL));
        let mut a = bench_arg(0, 1, uapi::TK_PLACE_LOCAL, uapi::TK_CLEAR_BENCH_MAX + 1);
        assert!(bench(&mut a).err() == Some(EINVAL));
        assert!(worst_drop(&before) < SLACK_PAGES);
        Ok(())
    }

    /// A range bigger than the node's free memory (the next power of two
    /// above it), and the largest allowed range: ENOMEM, nothing leaked.
    #[test]
    fn alloc_failure_is_enomem() {
        let before = free_pages();
        for &nid in memory_nodes().iter() {
            let too_big = (node::free_pages(nid) + 1)
                .next_power_of_two()
                .min(MAX_RANGE_PAGES);
            assert!(GiganticRange::alloc_pages(nid, too_big).err() == Some(ENOMEM));
            assert!(GiganticRange::alloc_pages(nid, MAX_RANGE_PAGES).err() == Some(ENOMEM));
        }
        assert!(worst_drop(&before) < SLACK_PAGES);
    }
}
