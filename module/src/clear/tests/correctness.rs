// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `tierkit_clear`: parallel clears of 64 MiB ranges (8 MiB on
//! CPU-less nodes) over placements, thread counts and chunk sizes, every
//! byte checked; a worker failure reported. The fill and check machinery
//! is the parent's (`clear/tests.rs`).

use kernel::prelude::*;

#[kunit_tests(tierkit_clear)]
mod clear_tests {
    use crate::clear::tests::*;

    #[test]
    fn local_matrix_64m() -> Result {
        let before = free_pages();
        let (run, failed, refused) = matrix(
            Placement::Local,
            &[CHUNK_ODD, CHUNK_2M, CHUNK_PAGE, CHUNK_MAX],
        )?;
        assert!(run > 0);
        assert_eq!(failed, 0);
        assert_eq!(refused, 0);
        assert!(worst_drop(&before) < SLACK_PAGES);
        Ok(())
    }

    #[test]
    fn any_matrix_64m() -> Result {
        let before = free_pages();
        let (run, failed, refused) = matrix(Placement::Any, &[CHUNK_ODD, CHUNK_MAX])?;
        assert!(run > 0);
        assert_eq!(failed, 0);
        assert_eq!(refused, 0);
        assert!(worst_drop(&before) < SLACK_PAGES);
        Ok(())
    }

    /// On the default topology (one node with CPUs) every node refuses
    /// `remote` with EINVAL; with two CPU nodes it runs the matrix.
    #[test]
    fn remote_matrix_64m() -> Result {
        let before = free_pages();
        let (run, failed, refused) = matrix(Placement::Remote, &[CHUNK_ODD, CHUNK_MAX])?;
        assert!(run + refused > 0);
        assert_eq!(failed, 0);
        let cpu_nodes = (0..node::nr_node_ids())
            .filter(|&n| node::nr_cpus(n) > 0)
            .count();
        let none_refused = refused == 0;
        let two_cpu_nodes = cpu_nodes >= 2;
        assert!(none_refused == two_cpu_nodes);
        assert!(worst_drop(&before) < SLACK_PAGES);
        Ok(())
    }

    /// A memory-only node's workers run on the nearest node with CPUs.
    #[test]
    fn cpuless_node_uses_nearest_cpu_node() {
        for &nid in memory_nodes().iter() {
            let local = local_cpu_node(nid);
            assert!(local.is_some());
            let local = local.unwrap_or(usize::MAX);
            assert!(node::nr_cpus(local) > 0);
            if node::nr_cpus(nid) > 0 {
                assert_eq!(local, nid);
            }
            if let Some(remote) = remote_cpu_node(nid) {
                assert!(remote != local);
                assert!(node::nr_cpus(remote) > 0);
            }
        }
    }

    #[test]
    fn auto_threads_64m() -> Result {
        let before = free_pages();
        let mut range = GiganticRange::alloc_pages(0, SMALL_PAGES)?;
        // Below 1 GiB a range is order-0 pages, each with its one reference.
        let plain = !range.is_folio() && range.folio_refs() == 1;
        let eligible = CpuSet::for_memory(0, Placement::Local)?.len();
        fill(&mut range);
        let filled = pattern_intact(&range);
        let r = crate::clear::clear(
            &mut range,
            &crate::clear::ClearParams::new(crate::clear::Threads::Auto, Placement::Local),
        );
        let zero = first_nonzero(&range).is_none();
        drop(range);
        assert!(plain);
        assert!(filled);
        let workers = r.as_ref().map_or(0, |r| r.workers);
        assert!(workers >= 1 && workers <= eligible);
        assert!(zero);
        assert!(worst_drop(&before) < SLACK_PAGES);
        Ok(())
    }

    /// The leak checks' count of free pages ([`free_pages`]) sees pages
    /// taken and holds still once they are back: 4096 order-0 pages taken
    /// on node 0 one by one and freed. Taking them refills the per-CPU
    /// lists in batches and freeing them parks them there, so a count of
    /// NR_FREE_PAGES alone stays low afterwards by what those lists keep.
    #[test]
    fn free_count_holds_still_without_a_leak() -> Result {
        const N: usize = 4 * SLACK_PAGES as usize;
        let mut pages = KVVec::with_capacity(N, GFP_KERNEL)?;
        let before = free_pages();
        while pages.len() < N {
            let Ok(p) = crate::pages::NodePage::alloc_gfp(0, bindings::GFP_KERNEL) else {
                break;
            };
            if pages.push(p, GFP_KERNEL).is_err() {
                break;
            }
        }
        let taken = pages.len();
        let held = before[0].saturating_sub(free_pages()[0]);
        drop(pages);
        let after = worst_drop(&before);
        assert_eq!(taken, N);
        assert!(held + SLACK_PAGES > N as u64);
        assert!(held < N as u64 + SLACK_PAGES);
        assert!(after < SLACK_PAGES);
        Ok(())
    }

    /// A worker that fails makes the whole clear fail (EIO), the others
    /// stop early, and nothing hangs or leaks.
    #[test]
    fn worker_failure_is_reported() -> Result {
        let before = free_pages();
        let mut range = GiganticRange::alloc_pages(0, SMALL_PAGES)?;
        let eligible = CpuSet::for_memory(0, Placement::Local)?.len();
        let params = crate::clear::ClearParams {
            threads: crate::clear::Threads::Fixed(eligible),
            placement: Placement::Local,
            chunk_pages: CHUNK_PAGE,
        };
        let r = crate::clear::clear_with_fault(&mut range, &params, Some(0));
        let err = r.err();
        // The same range clears fine without the fault.
        fill(&mut range);
        let ok_after = check_case(&mut range, &params);
        drop(range);
        assert!(err == Some(EIO));
        assert!(ok_after);
        assert!(worst_drop(&before) < SLACK_PAGES);
        Ok(())
    }
}
