// SPDX-License-Identifier: GPL-2.0

//! KUnit suites of the weighted-interleave code, run in the guest when the
//! module loads.
//!
//! - `tierkit_wi_selector`: node sequences of the address and task paths
//!   (the worked examples, a weight of 255, single-node masks).
//! - `tierkit_wi_abi`: the weight-file ABI and the policy nodemask, with
//!   every rejected input of mm/mempolicy.c and its errno.
//! - `tierkit_wi_files`: the `nodeN` files and node hotplug.
//!
//! The allocation suite `tierkit_wi_alloc` is in `src/placed/tests.rs`.
//!
//! Each case builds its own [`Wi`], so the weight table userspace sees is
//! never touched. KUnit aborts a failing case without running destructors;
//! the cases check what they can before an assertion that could leak pages.
//!
//! [`Wi`]: crate::wi::Wi

use kernel::prelude::*;

/// Sequences of the address path (`weighted_interleave_nid`,
/// `interleave_nid`) and the task path (`weighted_interleave_nodes`).
#[kunit_tests(tierkit_wi_selector)]
mod selector {
    use crate::interleave::{
        interleave_nid_ref, weighted_interleave_nid_ref, Nodemask, Selector, TaskState, Weights,
        MAX_NUMNODES,
    };

    fn weights(pairs: &[(usize, u8)]) -> Weights {
        let mut t = [0u8; MAX_NUMNODES];
        for &(nid, w) in pairs {
            t[nid] = w;
        }
        Weights::from_table(t)
    }

    fn mask(nodes: &[usize]) -> Nodemask {
        nodes.iter().fold(Nodemask::EMPTY, |m, &n| m.with(n))
    }

    /// Address path, selector and the kernel's walk, against `expect` from
    /// ilx 0; plus `Selector::fill` for the same run.
    fn address_path_is(m: Nodemask, w: &Weights, expect: &[usize]) -> bool {
        let Some(sel) = Selector::new(m, w) else {
            return false;
        };
        let mut filled = [0u8; 64];
        let n = expect.len().min(filled.len());
        sel.fill(0, &mut filled[..n]);
        expect.iter().enumerate().all(|(ilx, &nid)| {
            sel.node_for_ilx(ilx as u64) == nid
                && weighted_interleave_nid_ref(m, w, ilx as u64) == Some(nid)
                && (ilx >= n || filled[ilx] as usize == nid)
        })
    }

    #[test]
    fn issue_example_nodes_0_1_weights_3_1() {
        let m = mask(&[0, 1]);
        let w = weights(&[(0, 3), (1, 1)]);
        assert!(address_path_is(m, &w, &[0, 0, 0, 1, 0, 0, 0, 1]));
    }

    #[test]
    fn issue_example_nodes_1_3_weights_2_5() {
        let m = mask(&[1, 3]);
        let w = weights(&[(1, 2), (3, 5)]);
        assert!(address_path_is(m, &w, &[1, 1, 3, 3, 3, 3, 3, 1]));
    }

    #[test]
    fn unset_weights_count_as_one() {
        // A node without a weight (table entry 0, the kernel's NULL state)
        // weighs 1: {0,1} with only node 0 set to 2 gives 0,0,1.
        let m = mask(&[0, 1]);
        let w = weights(&[(0, 2)]);
        assert!(address_path_is(m, &w, &[0, 0, 1, 0, 0, 1]));
    }

    #[test]
    fn weight_255() {
        let m = mask(&[0, 1]);
        let w = weights(&[(0, 255), (1, 1)]);
        let sel = Selector::new(m, &w);
        assert!(sel.is_some());
        let Some(sel) = sel else { return };
        assert_eq!(sel.total(), 256);
        assert!((0..255u64).all(|ilx| sel.node_for_ilx(ilx) == 0));
        assert_eq!(sel.node_for_ilx(255), 1);
        assert_eq!(sel.node_for_ilx(256), 0);
        assert_eq!(sel.node_for_ilx(256 * 1000 + 255), 1);
        // Two heavy nodes around a light one.
        let m = mask(&[0, 2, 5]);
        let w = weights(&[(0, 255), (2, 7), (5, 255)]);
        let sel = Selector::new(m, &w);
        assert!(sel.is_some());
        let Some(sel) = sel else { return };
        assert_eq!(sel.total(), 517);
        assert_eq!(sel.node_for_ilx(254), 0);
        assert_eq!(sel.node_for_ilx(255), 2);
        assert_eq!(sel.node_for_ilx(261), 2);
        assert_eq!(sel.node_for_ilx(262), 5);
        assert_eq!(sel.node_for_ilx(516), 5);
        assert_eq!(sel.node_for_ilx(517), 0);
        assert!((0..5000u64)
            .all(|ilx| { Some(sel.node_for_ilx(ilx)) == weighted_interleave_nid_ref(m, &w, ilx) }));
    }

    #[test]
    fn single_node_masks() {
        for nid in [0usize, 1, 7, 63] {
            let m = mask(&[nid]);
            let w = weights(&[(nid, 200)]);
            let sel = Selector::new(m, &w);
            assert!(sel.is_some());
            if let Some(sel) = sel {
                assert!([0u64, 1, 199, 200, 12345, u64::MAX]
                    .iter()
                    .all(|&ilx| sel.node_for_ilx(ilx) == nid));
            }
            let mut t = TaskState::new();
            assert!((0..500).all(|_| t.next(m, &w) == Some(nid)));
        }
    }

    #[test]
    fn empty_mask_has_no_selector() {
        assert!(Selector::new(Nodemask::EMPTY, &Weights::new()).is_none());
        assert!(Selector::interleave(Nodemask::EMPTY).is_none());
    }

    #[test]
    fn interleave_mode_ignores_weights() {
        let m = mask(&[0, 1, 3]);
        let sel = Selector::interleave(m);
        assert!(sel.is_some());
        if let Some(sel) = sel {
            let expect = [0usize, 1, 3, 0, 1, 3, 0];
            assert!(expect
                .iter()
                .enumerate()
                .all(|(ilx, &n)| sel.node_for_ilx(ilx as u64) == n
                    && interleave_nid_ref(m, ilx as u64) == Some(n)));
        }
    }

    #[test]
    fn selector_matches_kernel_walk() {
        // xorshift: masks and weights of every shape, against the walk.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut ok = true;
        for _ in 0..200 {
            let m = Nodemask(next() & next());
            if m.is_empty() {
                continue;
            }
            let mut t = [0u8; MAX_NUMNODES];
            for slot in t.iter_mut() {
                *slot = (next() % 256) as u8;
            }
            let w = Weights::from_table(t);
            let Some(sel) = Selector::new(m, &w) else {
                ok = false;
                continue;
            };
            let start = next();
            let mut run = [0u8; 128];
            sel.fill(start, &mut run);
            for (k, &filled) in run.iter().enumerate() {
                let ilx = start.wrapping_add(k as u64);
                let r = weighted_interleave_nid_ref(m, &w, ilx);
                ok &= Some(sel.node_for_ilx(ilx)) == r && Some(filled as usize) == r;
            }
        }
        assert!(ok);
    }

    #[test]
    fn task_path_sequence() {
        // weighted_interleave_nodes() from a fresh policy.
        let m = mask(&[0, 1]);
        let w = weights(&[(0, 3), (1, 1)]);
        let mut t = TaskState::new();
        let seq = [0usize, 0, 0, 1, 0, 0, 0, 1, 0];
        assert!(seq.iter().all(|&n| t.next(m, &w) == Some(n)));
        // A node leaving the mask moves the task on at once.
        let mut t = TaskState::new();
        assert_eq!(t.next(m, &w), Some(0));
        assert_eq!(t.next(mask(&[1, 3]), &w), Some(1));
        assert_eq!(t.next(mask(&[1, 3]), &w), Some(3));
    }
}

/// The weight-file ABI (mm/mempolicy.c `node_store`,
/// `weighted_interleave_auto_store`, `mempolicy_set_node_perf`) and the
/// policy nodemask (`mpol_set_nodemask`).
#[kunit_tests(tierkit_wi_abi)]
mod abi {
    use crate::interleave::{Nodemask, Weights, MAX_NUMNODES};
    use crate::uapi;
    use crate::wi::{memory_nodes, possible_nodes, Mode, Policy, Wi};
    use kernel::{prelude::*, sync::Arc};

    fn new_wi() -> Result<Arc<Wi>> {
        Arc::pin_init(Wi::new(), GFP_KERNEL)
    }

    fn m01() -> Nodemask {
        Nodemask(0b11)
    }

    #[test]
    fn initial_state_is_auto_with_weights_1() -> Result {
        let wi = new_wi()?;
        assert!(wi.is_auto());
        assert!(!wi.has_bandwidth());
        assert!((0..MAX_NUMNODES).all(|n| wi.weight(n) == 1));
        Ok(())
    }

    #[test]
    fn node_store_rejects_bad_weights() -> Result {
        let wi = new_wi()?;
        // From the initial state: rejected, and auto stays on.
        for bad in [
            &b"0"[..],
            b"0\n",
            b"256",
            b"256\n",
            b"1000",
            b"abc",
            b"",
            b"\n",
            b"-1",
            b" 3",
            b"3 ",
            b"3\n\n",
            b"0x",
            b"08",
        ] {
            assert_eq!(wi.node_store(0, bad), Err(EINVAL));
        }
        assert!(wi.is_auto());
        assert_eq!(wi.weight(0), 1);
        // After a valid write the old weight is kept.
        assert_eq!(wi.node_store(0, b"5\n"), Ok(()));
        assert!(!wi.is_auto());
        for bad in [&b"0"[..], b"256", b"abc", b""] {
            assert_eq!(wi.node_store(0, bad), Err(EINVAL));
        }
        assert_eq!(wi.weight(0), 5);
        Ok(())
    }

    #[test]
    fn node_store_accepts_kstrtou8_forms() -> Result {
        let wi = new_wi()?;
        assert_eq!(wi.node_store(1, b"3\n"), Ok(()));
        assert_eq!(wi.weight(1), 3);
        // The other nodes are 1 in the table a first write creates.
        assert_eq!(wi.weight(0), 1);
        assert!(!wi.is_auto());
        assert_eq!(wi.node_store(1, b"0x10"), Ok(()));
        assert_eq!(wi.weight(1), 16);
        assert_eq!(wi.node_store(1, b"010"), Ok(()));
        assert_eq!(wi.weight(1), 8);
        assert_eq!(wi.node_store(1, b"+7"), Ok(()));
        assert_eq!(wi.weight(1), 7);
        assert_eq!(wi.node_store(1, b"255"), Ok(()));
        assert_eq!(wi.weight(1), 255);
        // A NUL ends the string, as sysfs NUL-terminates the buffer.
        assert_eq!(wi.node_store(1, b"4\0junk"), Ok(()));
        assert_eq!(wi.weight(1), 4);
        Ok(())
    }

    #[test]
    fn auto_without_bandwidth_is_enodev() -> Result {
        let wi = new_wi()?;
        // Initial state: true goes on to the bandwidth check.
        assert_eq!(wi.auto_store_with(b"1", m01()), Err(ENODEV));
        assert!(wi.is_auto());
        // Manual mode: ENODEV, weights and mode kept.
        assert_eq!(wi.node_store(0, b"9"), Ok(()));
        assert_eq!(wi.auto_store_with(b"true\n", m01()), Err(ENODEV));
        assert!(!wi.is_auto());
        assert_eq!(wi.weight(0), 9);
        Ok(())
    }

    #[test]
    fn auto_rejects_non_booleans() -> Result {
        let wi = new_wi()?;
        for bad in [&b""[..], b"maybe", b"2", b"o", b"ox", b"\n", b" 1"] {
            assert_eq!(wi.auto_store_with(bad, m01()), Err(EINVAL));
        }
        assert!(wi.is_auto());
        Ok(())
    }

    #[test]
    fn auto_false_keeps_weights() -> Result {
        let wi = new_wi()?;
        // From the initial state: manual mode, every weight 1.
        assert_eq!(wi.auto_store_with(b"0\n", m01()), Ok(()));
        assert!(!wi.is_auto());
        assert_eq!(wi.weight(0), 1);
        assert_eq!(wi.node_store(0, b"6"), Ok(()));
        // Already manual: nothing changes.
        assert_eq!(wi.auto_store_with(b"false", m01()), Ok(()));
        assert_eq!(wi.weight(0), 6);
        // Auto and back to manual keeps the auto weights.
        assert_eq!(
            wi.bandwidth_store_with(b"0 100 100\n1 300 300\n", 2, m01()),
            Ok(())
        );
        assert!(!wi.is_auto());
        assert_eq!(wi.weight(0), 6);
        assert_eq!(wi.auto_store_with(b"y", m01()), Ok(()));
        assert!(wi.is_auto());
        // floor(32*100/400) = 8, floor(32*300/400) = 24, gcd 8: 1 and 3.
        assert_eq!((wi.weight(0), wi.weight(1)), (1, 3));
        assert_eq!(wi.auto_store_with(b"off", m01()), Ok(()));
        assert!(!wi.is_auto());
        assert_eq!((wi.weight(0), wi.weight(1)), (1, 3));
        Ok(())
    }

    #[test]
    fn bandwidth_in_auto_mode_sets_weights() -> Result {
        let wi = new_wi()?;
        // min(read, write): 200000 and 50000 of 250000 -> 25 and 6.
        assert_eq!(
            wi.bandwidth_store_with(b"0 200000 250000\n1 60000 50000\n", 2, m01()),
            Ok(())
        );
        assert!(wi.is_auto());
        assert!(wi.has_bandwidth());
        assert_eq!((wi.weight(0), wi.weight(1)), (25, 6));
        // Nodes without memory keep 1.
        assert_eq!(wi.weight(2), 1);
        // A later report for one node recomputes all (auto mode).
        assert_eq!(
            wi.bandwidth_store_with(b"1\t200000 200000", 2, m01()),
            Ok(())
        );
        assert_eq!((wi.weight(0), wi.weight(1)), (1, 1));
        // A node with memory but no bandwidth gets 1; the one with all of
        // it gets 32 (and the GCD with the 1s is 1).
        let wi = new_wi()?;
        assert_eq!(
            wi.bandwidth_store_with(b"0 1000 1000\n", 3, Nodemask(0b111)),
            Ok(())
        );
        assert_eq!((wi.weight(0), wi.weight(1), wi.weight(2)), (32, 1, 1));
        Ok(())
    }

    #[test]
    fn bandwidth_in_manual_mode_is_only_stored() -> Result {
        let wi = new_wi()?;
        assert_eq!(wi.node_store(0, b"3"), Ok(()));
        assert_eq!(
            wi.bandwidth_store_with(b"0 200000 200000\n1 50000 50000\n", 2, m01()),
            Ok(())
        );
        assert!(!wi.is_auto());
        assert_eq!((wi.weight(0), wi.weight(1)), (3, 1));
        // Switching to auto uses the stored bandwidth: 25 and 6.
        assert_eq!(wi.auto_store_with(b"1", m01()), Ok(()));
        assert!(wi.is_auto());
        assert_eq!((wi.weight(0), wi.weight(1)), (25, 6));
        Ok(())
    }

    #[test]
    fn bandwidth_rejects_bad_lines() -> Result {
        let wi = new_wi()?;
        for bad in [
            &b""[..],
            b"\n",
            b"0 1",
            b"0 1 2 3",
            b"x 1 2",
            b"0 -1 2",
            b"0 1 99999999999",
            b"2 1 1",
            b"64 1 1",
            b"0 1 1\n1 1",
        ] {
            assert_eq!(wi.bandwidth_store_with(bad, 2, m01()), Err(EINVAL));
        }
        // Nothing was applied, not even the good first line of the last.
        assert!(!wi.has_bandwidth());
        assert!(wi.is_auto());
        Ok(())
    }

    #[test]
    fn policy_nodemask_is_intersected_with_n_memory() -> Result {
        let has = Nodemask(0b1011);
        let w0 = [0u8; 64];
        let p = Policy::new_with(uapi::TK_MODE_WEIGHTED_INTERLEAVE, 0, 0b1_0110, &w0, has)?;
        // Nodes 2 and 4 have no memory: dropped, and reported as dropped.
        assert_eq!(p.mask, Nodemask(0b0010));
        assert_eq!(p.mode, Mode::Weighted);
        assert_eq!(p.own, None);
        let p = Policy::new_with(uapi::TK_MODE_INTERLEAVE, 0, u64::MAX, &w0, has)?;
        assert_eq!(p.mask, has);
        assert_eq!(p.mode, Mode::Interleave);
        // Nothing left: EINVAL.
        assert_eq!(Policy::new_with(0, 0, 0b0100, &w0, has).err(), Some(EINVAL));
        assert_eq!(Policy::new_with(0, 0, 0, &w0, has).err(), Some(EINVAL));
        // Bad mode or flags.
        assert_eq!(Policy::new_with(2, 0, 0b1, &w0, has).err(), Some(EINVAL));
        assert_eq!(Policy::new_with(0, 2, 0b1, &w0, has).err(), Some(EINVAL));
        // Own weights: every node of the effective mask needs one; the
        // others are ignored, and interleave mode takes none.
        let f = uapi::TK_POLICY_F_WEIGHTS;
        assert_eq!(Policy::new_with(0, f, 0b1, &w0, has).err(), Some(EINVAL));
        let mut w = [0u8; 64];
        w[0] = 3;
        w[1] = 1;
        w[2] = 9;
        assert_eq!(Policy::new_with(1, f, 0b11, &w, has).err(), Some(EINVAL));
        let p = Policy::new_with(0, f, 0b111, &w, has)?;
        assert_eq!(p.mask, Nodemask(0b11));
        let own = p.weights(Weights::new);
        assert_eq!((own.get(0), own.get(1), own.get(2)), (3, 1, 1));
        Ok(())
    }

    #[test]
    fn policy_on_this_machine() -> Result {
        let mem = memory_nodes();
        assert!(!mem.is_empty());
        let p = Policy::new(0, 0, u64::MAX, &[0; MAX_NUMNODES])?;
        assert_eq!(p.mask, mem);
        // Offline, memoryless and impossible nodes alone are EINVAL.
        for nid in 0..MAX_NUMNODES {
            if !mem.contains(nid) {
                assert_eq!(
                    Policy::new(0, 0, 1u64 << nid, &[0; MAX_NUMNODES]).err(),
                    Some(EINVAL)
                );
            }
        }
        assert!(possible_nodes() <= MAX_NUMNODES);
        Ok(())
    }
}

/// The `nodeN` files and the node hotplug events that add and remove them.
#[kunit_tests(tierkit_wi_files)]
mod files {
    use crate::debugfs::DebugfsDir;
    use crate::interleave::MAX_NUMNODES;
    use crate::wi::{
        debugfs::{node_event, WiFiles},
        memory_nodes, Wi,
    };
    use kernel::{ffi::c_int, prelude::*, sync::Arc};

    #[test]
    fn node_files_follow_hotplug_events() -> Result {
        // A private tree (the notifier stays with the module's own files).
        let root = DebugfsDir::new(c"tierkit_kunit", None)?;
        let wi = Arc::pin_init(Wi::new(), GFP_KERNEL)?;
        let files = WiFiles::new_with(&root, wi, false)?;
        let mem = memory_nodes();
        // One file per node with memory, none for the others.
        assert!((0..MAX_NUMNODES).all(|n| files.has_node(n) == mem.contains(n)));
        let first = mem.first().unwrap_or(0);
        // NODE_REMOVED_LAST_MEMORY removes the file, NODE_ADDED_FIRST_MEMORY
        // brings it back, once.
        node_event(&files, first as c_int, false);
        assert!(!files.has_node(first));
        node_event(&files, first as c_int, true);
        node_event(&files, first as c_int, true);
        assert!(files.has_node(first));
        // A node that gets memory later (as a CXL region onlined by dax
        // kmem) gets its file then.
        if let Some(late) = (0..MAX_NUMNODES).find(|&n| !mem.contains(n)) {
            assert!(!files.has_node(late));
            node_event(&files, late as c_int, true);
            assert!(files.has_node(late));
            node_event(&files, late as c_int, false);
            assert!(!files.has_node(late));
        }
        // Ids tierkit cannot name are ignored.
        node_event(&files, -1, true);
        node_event(&files, MAX_NUMNODES as c_int, true);
        assert!(!files.has_node(MAX_NUMNODES));
        Ok(())
    }
}
