// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `tierkit_gigantic`: a whole 1 GiB range per node cleared
//! and checked, the bench ioctl on 1 GiB, and the state of a file's
//! gigantic mode.

use kernel::prelude::*;

#[kunit_tests(tierkit_gigantic)]
mod gigantic_tests {
    use crate::chunks::GIGANTIC_PAGES;
    use crate::clear::bench::bench;
    use crate::clear::gigantic::{set_gigantic_ioctl, GiganticMode};
    use crate::clear::tests::*;
    use crate::clear::{ClearParams, Threads};
    use crate::uapi::{self, TkClearBench, TkGigantic};

    /// One full 1 GiB range per node whose memory is in kernel zones, all
    /// local CPUs, default chunks: pattern, parallel clear, every byte zero.
    /// A node whose memory is ZONE_MOVABLE (the cxl topology's CXL node) is
    /// left to `tk-test-gigantic`, the one place that clears and checks a
    /// whole GiB of emulated CXL memory (QEMU emulates it access by access:
    /// fill, clear and check took over 400 s here, past KUnit's timeout);
    /// the matrices of `tierkit_clear` still clear ranges there.
    #[test]
    fn one_gib_per_node() -> Result {
        let _movable = AllowMovable::new();
        // SAFETY: the shim range-checks `nid`.
        let kernel_zones = |nid: usize| !unsafe { crate::shim::tk_node_has_movable(nid as c_int) };
        for &nid in memory_nodes().iter().filter(|&&nid| kernel_zones(nid)) {
            let before = free_pages();
            let mut range = GiganticRange::alloc(nid)?;
            let on_node = range.page(0).map(|p| p.nid()) == Some(nid as i32)
                && range.page(GIGANTIC_PAGES - 1).map(|p| p.nid()) == Some(nid as i32);
            let aligned = range.pfn() % GIGANTIC_PAGES == 0;
            // One PUD-order folio with one reference, the range's own.
            let one_folio = range.is_folio() && range.folio_refs() == 1;
            let eligible = CpuSet::for_memory(nid, Placement::Local)?.len();
            let ok = check_case(
                &mut range,
                &ClearParams::new(Threads::Fixed(eligible), Placement::Local),
            );
            let bytes = range.bytes();
            drop(range);
            assert!(on_node);
            assert!(aligned);
            assert!(one_folio);
            assert!(ok);
            assert_eq!(bytes, 1u64 << 30);
            assert!(worst_drop(&before) < SLACK_PAGES);
        }
        Ok(())
    }

    /// A 1 GiB range of the pool's kind on node 0: order-0 pages, each with
    /// one reference, until `make_folio()` makes it one PUD-order folio with
    /// one reference, its last page a tail of it, and every byte as it was
    /// (a cleared range stays cleared); back in the allocator on drop.
    #[test]
    fn pool_range_becomes_one_folio() -> Result {
        let _movable = AllowMovable::new();
        let before = free_pages();
        let mut range = GiganticRange::alloc_for_pool(0, GIGANTIC_PAGES)?;
        let last = GIGANTIC_PAGES - 1;
        let refs = |r: &GiganticRange, i: u64| {
            let p = r.page_ptr(i)?;
            // SAFETY: a page of the range, which keeps it allocated.
            Some(unsafe { crate::shim::tk_folio_ref_count(p) })
        };
        let order0 =
            !range.is_folio() && refs(&range, 0) == Some(1) && refs(&range, last) == Some(1);
        // One byte per 2 MiB step (not a GiB clear): a mark that must stay.
        let step = (GIGANTIC_PAGES * crate::chunks::PAGE_BYTES / 512) as usize;
        for i in 0..512 {
            // SAFETY: the range is ours alone, `bytes()` long from `as_ptr()`.
            unsafe { range.as_ptr().add(i * step + i).write(i as u8 | 1) };
        }
        let made = range.make_folio();
        let one_folio =
            range.is_folio() && refs(&range, 0) == Some(1) && refs(&range, last) == Some(1);
        // SAFETY: as above.
        let kept =
            (0..512).all(|i| unsafe { range.as_ptr().add(i * step + i).read() } == i as u8 | 1);
        // A folio already: nothing to do.
        let again = range.make_folio();
        drop(range);
        assert!(order0);
        assert!(made.is_ok());
        assert!(one_folio);
        assert!(kept);
        assert!(again.is_ok());
        assert!(worst_drop(&before) < SLACK_PAGES);
        Ok(())
    }

    /// `TK_IOC_CLEAR_BENCH` with one worker on the last memory node whose
    /// memory is all in kernel zones: the CPU-less node of the numa
    /// topology, so that the bench reports its nearest CPU node. On the
    /// cxl topology that is node 0: the CXL node's memory is ZONE_MOVABLE,
    /// and QEMU emulates it access by access (one pass over a GiB took a
    /// minute). The bench adds nothing there that `one_gib_per_node` does
    /// not check on the same node (a full GiB cleared by the same `clear`,
    /// every byte checked, the workers on the nearest CPU node).
    #[test]
    fn bench_one_gib() -> Result {
        let nodes = memory_nodes();
        let kernel_only = nodes
            .iter()
            .rev()
            // SAFETY: the shim range-checks `nid`.
            .find(|&&nid| !unsafe { crate::shim::tk_node_has_movable(nid as c_int) });
        let nid = *kernel_only.or(nodes.last()).ok_or(EINVAL)?;
        let _movable = AllowMovable::new();
        let before = free_pages();
        let mut a = TkClearBench {
            nid: nid as i32,
            threads: 1,
            placement: uapi::TK_PLACE_LOCAL,
            nr_gigantic: 1,
            ..Default::default()
        };
        let r = bench(&mut a);
        assert!(r.is_ok());
        assert_eq!(a.bytes, 1u64 << 30);
        assert_eq!(a.workers, 1);
        assert!(a.elapsed_ns > 0);
        assert!(a.mbps > 0);
        assert!(a.variant[0] != 0);
        assert_eq!(a.cpu_node, local_cpu_node(nid).map_or(-2, |n| n as i32));
        assert!(worst_drop(&before) < SLACK_PAGES);
        Ok(())
    }

    /// The gigantic mode of a `/dev/tierkit` file, without the device: set,
    /// query, refuse once mapped, populate (clear) a range and report it.
    #[test]
    fn gigantic_mode_state() -> Result {
        let before = free_pages();
        let mut mode: Option<GiganticMode> = None;
        let mut q = TkGigantic {
            flags: uapi::TK_GIGANTIC_F_QUERY,
            ..Default::default()
        };
        assert!(set_gigantic_ioctl(&mut mode, false, &mut q).is_ok());
        assert!(mode.is_none());
        assert_eq!(q.last_nid, -1);
        assert_eq!(q.threads, uapi::TK_THREADS_AUTO);
        assert_eq!(q.chunk_kib, 2048);

        let mut bad = TkGigantic {
            threads: 0,
            ..Default::default()
        };
        assert!(set_gigantic_ioctl(&mut mode, false, &mut bad).err() == Some(EINVAL));
        let mut bad = TkGigantic {
            threads: 1,
            flags: 4,
            ..Default::default()
        };
        assert!(set_gigantic_ioctl(&mut mode, false, &mut bad).err() == Some(EINVAL));
        // More workers than online CPUs: refused before any mmap takes a
        // range (arguments are checked before any work).
        let mut bad = TkGigantic {
            threads: 4096,
            ..Default::default()
        };
        assert!(set_gigantic_ioctl(&mut mode, false, &mut bad).err() == Some(EINVAL));
        assert!(mode.is_none());

        let mut set = TkGigantic {
            threads: 1,
            placement: uapi::TK_PLACE_ANY,
            chunk_kib: 3076,
            ..Default::default()
        };
        assert!(set_gigantic_ioctl(&mut mode, false, &mut set).is_ok());
        assert_eq!(set.nr_cleared, 0);
        let mut again = set;
        assert!(set_gigantic_ioctl(&mut mode, true, &mut again).err() == Some(EBUSY));

        let populated = match mode.as_mut() {
            Some(m) => m.populate_pages(0, SMALL_PAGES).map(|r| {
                let seen = (r.nid(), r.nr_pages(), first_nonzero(&r).is_none());
                // What dev.rs does once the whole mmap succeeded.
                m.note_mapped(1);
                seen
            }),
            None => Err(EINVAL),
        };
        let kept = mode.as_ref().map(|m| {
            (
                m.nr_cleared() as usize,
                m.last().map(|l| l.nid),
                m.params().placement,
            )
        });
        let mut q = TkGigantic {
            flags: uapi::TK_GIGANTIC_F_QUERY,
            ..Default::default()
        };
        let queried = set_gigantic_ioctl(&mut mode, true, &mut q);
        assert!(populated == Ok((0, SMALL_PAGES, true)));
        assert!(kept == Some((1, Some(0), Placement::Any)));
        assert!(queried.is_ok());
        assert_eq!(q.nr_cleared, 1);
        assert_eq!(q.last_nid, 0);
        // With init_on_alloc on the allocator zeroed the range: that is the
        // clear, with no workers (Documentation/ABI/testing/dev-tierkit).
        // SAFETY: reads a static key / boot parameter.
        let allocator_zeroed = unsafe { crate::shim::tk_init_on_alloc() };
        assert_eq!(q.last_workers, if allocator_zeroed { 0 } else { 1 });
        assert_eq!(q.last_cpu_node, -1);
        assert_eq!(q.placement, uapi::TK_PLACE_ANY);
        assert_eq!(q.chunk_kib, 3076);
        assert!(q.last_elapsed_ns > 0);
        assert!(worst_drop(&before) < SLACK_PAGES);
        Ok(())
    }
}
