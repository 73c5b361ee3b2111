//! Host tests of `tierkit_core::socket`: per-socket weight tables.
//!
//! The invariant that matters most: with one socket, or with every socket's
//! table equal, placement is exactly today's weighted interleave (Linux 7.3
//! `weighted_interleave_nid`, `weighted_interleave_nodes`,
//! `alloc_pages_bulk_weighted_interleave`), page by page, whatever socket
//! each allocation runs on. Today's placement is `tierkit_core::interleave`,
//! itself tested against literal ports of the C (`tests/interleave.rs`).

use proptest::prelude::*;
use tierkit_core::interleave::{
    bulk_split, weighted_interleave_nid_ref, Nodemask, Selector, TaskState, Weights, MAX_NUMNODES,
};
use tierkit_core::socket::{check_table, Levels, SocketError, SocketWeights, MAX_SOCKETS};

/// A mask of up to 8 nodes among 0..12 (small, so tables overlap it).
fn small_mask() -> impl Strategy<Value = Nodemask> {
    (1u64..(1 << 12)).prop_map(Nodemask)
}

/// A table of weights 0..=255 over nodes 0..12 (0: not a candidate).
fn table() -> impl Strategy<Value = [u8; MAX_NUMNODES]> {
    prop::collection::vec(prop_oneof![Just(0u8), 1u8..=8, any::<u8>()], 12).prop_map(|v| {
        let mut t = [0u8; MAX_NUMNODES];
        t[..12].copy_from_slice(&v);
        t
    })
}

/// A table with a weight 1..=255 on every node 0..12.
fn full_table() -> impl Strategy<Value = [u8; MAX_NUMNODES]> {
    prop::collection::vec(prop_oneof![1u8..=8, 1u8..=255], 12).prop_map(|v| {
        let mut t = [0u8; MAX_NUMNODES];
        t[..12].copy_from_slice(&v);
        t
    })
}

/// The socket each of `n` allocations runs on: moves between sockets at
/// random points, and `None` (an unknown socket) now and then.
fn socket_seq(n: usize) -> impl Strategy<Value = Vec<Option<usize>>> {
    prop::collection::vec(
        prop_oneof![4 => (0usize..MAX_SOCKETS).prop_map(Some), 1 => Just(None)],
        n,
    )
}

fn levels<'a>(file: &'a SocketWeights, device: &'a SocketWeights, global: Weights) -> Levels<'a> {
    Levels {
        file,
        file_flat: None,
        device,
        global,
    }
}

/// Node of ilx `ilx` for an allocation on `socket`.
fn node(l: &Levels<'_>, socket: Option<usize>, mask: Nodemask, ilx: u64) -> usize {
    let (m, w) = l.pick(socket, mask);
    Selector::new(m, &w).unwrap().node_for_ilx(ilx)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// No table anywhere (a one-socket machine where nobody set one, or
    /// any machine before the ABI is used): today's placement, on every
    /// path, for any sequence of sockets.
    #[test]
    fn no_tables_is_todays_placement(
        mask in small_mask(),
        g in full_table(),
        start in any::<u64>(),
        sockets in socket_seq(300),
    ) {
        let global = Weights::from_table(g);
        let none = SocketWeights::new();
        let l = levels(&none, &none, global);
        let mut task = TaskState::new();
        let mut today = TaskState::new();
        for (i, &s) in sockets.iter().enumerate() {
            let ilx = start.wrapping_add(i as u64);
            prop_assert_eq!(Some(node(&l, s, mask, ilx)), weighted_interleave_nid_ref(mask, &global, ilx));
            let (m, w) = l.pick(s, mask);
            prop_assert_eq!(task.next(m, &w), today.next(mask, &global));
            prop_assert_eq!(task, today);
        }
    }

    /// Every socket with the same table `t` (device-wide or per file, any
    /// mix), a mask inside `t`'s nodes: exactly today's placement with `t`
    /// as the weights, page by page and step by step, while the allocation
    /// moves between sockets at random; the bulk path splits alike.
    #[test]
    fn equal_tables_are_todays_placement(
        mask in small_mask(),
        t in full_table(),
        g in full_table(),
        per_file in any::<bool>(),
        start in any::<u64>(),
        sockets in socket_seq(300),
        bulk_pages in 1u64..5000,
    ) {
        let mut all = SocketWeights::new();
        for s in 0..MAX_SOCKETS {
            all.set(s, t).unwrap();
        }
        let none = SocketWeights::new();
        let l = if per_file {
            levels(&all, &none, Weights::from_table(g))
        } else {
            levels(&none, &all, Weights::from_table(g))
        };
        let today_w = Weights::from_table(t);
        let mut task = TaskState::new();
        let mut today = TaskState::new();
        for (i, &s) in sockets.iter().enumerate() {
            let ilx = start.wrapping_add(i as u64);
            if s.is_none() {
                continue; // an unknown socket has no table: not this case
            }
            prop_assert_eq!(Some(node(&l, s, mask, ilx)), weighted_interleave_nid_ref(mask, &today_w, ilx));
            let (m, w) = l.pick(s, mask);
            prop_assert_eq!(task.next(m, &w), today.next(mask, &today_w));
        }
        let (m, w) = l.pick(Some(sockets.len() % MAX_SOCKETS), mask);
        let (mut a, mut b) = ([0u64; MAX_NUMNODES], [0u64; MAX_NUMNODES]);
        bulk_split(&mut task, m, &w, bulk_pages, &mut a);
        bulk_split(&mut today, mask, &today_w, bulk_pages, &mut b);
        prop_assert_eq!(a, b);
        prop_assert_eq!(task, today);
    }

    /// A socket's table narrows the candidates to `mask ∩ {weight > 0}` and
    /// weighs them by the table: today's placement over that narrower mask;
    /// with no candidate left, the fallback is today's placement over
    /// `mask` with the base weights. Every node picked is in `mask`.
    #[test]
    fn a_table_restricts_then_weighs(
        mask in small_mask(),
        t in table(),
        g in full_table(),
        socket in 0usize..MAX_SOCKETS,
        ilx in any::<u64>(),
    ) {
        let mut dev = SocketWeights::new();
        dev.set(socket, t).unwrap();
        let none = SocketWeights::new();
        let global = Weights::from_table(g);
        let l = levels(&none, &dev, global);
        let cand = Nodemask(mask.0 & (0..12u32).filter(|&n| t[n as usize] != 0).fold(0, |a, n| a | 1 << n));
        let got = node(&l, Some(socket), mask, ilx);
        prop_assert!(mask.contains(got));
        if cand.is_empty() {
            prop_assert_eq!(Some(got), weighted_interleave_nid_ref(mask, &global, ilx));
        } else {
            prop_assert!(t[got] != 0);
            prop_assert_eq!(Some(got), weighted_interleave_nid_ref(cand, &Weights::from_table(t), ilx));
        }
        // Another socket, without a table, is unaffected.
        let other = (socket + 1) % MAX_SOCKETS;
        prop_assert_eq!(Some(node(&l, Some(other), mask, ilx)), weighted_interleave_nid_ref(mask, &global, ilx));
    }

    /// A task that moves between sockets mid-mapping: the ilx keeps its
    /// meaning, so each page's node depends only on the socket it was
    /// placed from and its ilx, never on what was placed before.
    #[test]
    fn node_depends_only_on_socket_and_ilx(
        mask in small_mask(),
        t0 in table(),
        t1 in table(),
        start in any::<u64>(),
        sockets in socket_seq(200),
    ) {
        let mut dev = SocketWeights::new();
        dev.set(0, t0).unwrap();
        dev.set(1, t1).unwrap();
        let none = SocketWeights::new();
        let l = levels(&none, &dev, Weights::new());
        for (i, &s) in sockets.iter().enumerate() {
            let s = s.map(|s| s % 2);
            let ilx = start.wrapping_add(i as u64);
            let (m, w) = dev.pick(s, mask, Weights::new());
            prop_assert_eq!(Some(node(&l, s, mask, ilx)), weighted_interleave_nid_ref(m, &w, ilx));
        }
    }

    /// The file's table for the socket beats the file's flat weights, which
    /// beat the device's table, which beats the global table; a table with
    /// no candidate in the mask is passed over.
    #[test]
    fn levels_precedence(
        mask in small_mask(),
        ft in table(),
        dt in table(),
        flat in prop::option::of(full_table()),
        g in full_table(),
    ) {
        let (mut file, mut dev) = (SocketWeights::new(), SocketWeights::new());
        file.set(3, ft).unwrap();
        dev.set(3, dt).unwrap();
        let global = Weights::from_table(g);
        let l = Levels { file: &file, file_flat: flat.map(Weights::from_table), device: &dev, global };
        let got = l.pick(Some(3), mask);
        let want = if file.get_for(Some(3), mask) {
            file.pick(Some(3), mask, global)
        } else if let Some(f) = flat {
            (mask, Weights::from_table(f))
        } else {
            dev.pick(Some(3), mask, global)
        };
        prop_assert_eq!(got, want);
    }
}

#[test]
fn two_sockets_restrict_to_local_nodes() {
    // The RFC's machine: socket 0 = nodes 0 (DRAM) + 2 (CXL), socket 1 =
    // nodes 1 + 3. Each socket weighs its own nodes 3:1 and the others 0.
    let mut dev = SocketWeights::new();
    let mut t0 = [0u8; MAX_NUMNODES];
    t0[0] = 3;
    t0[2] = 1;
    let mut t1 = [0u8; MAX_NUMNODES];
    t1[1] = 3;
    t1[3] = 1;
    dev.set(0, t0).unwrap();
    dev.set(1, t1).unwrap();
    let none = SocketWeights::new();
    let l = levels(&none, &dev, Weights::new());
    let mask = Nodemask(0b1111);
    let on = |s, n: u64| {
        (0..n)
            .map(|i| node(&l, Some(s), mask, i))
            .collect::<Vec<_>>()
    };
    assert_eq!(on(0, 8), [0, 0, 0, 2, 0, 0, 0, 2]);
    assert_eq!(on(1, 8), [1, 1, 1, 3, 1, 1, 1, 3]);
    // A nodemask without socket 1's nodes: socket 1 falls back to today's
    // placement over the mask with the global weights (all 1).
    let mask02 = Nodemask(0b0101);
    assert_eq!(
        (0..4)
            .map(|i| node(&l, Some(1), mask02, i))
            .collect::<Vec<_>>(),
        [0, 2, 0, 2]
    );
    // Only the CXL node of socket 1 in the mask: its table still applies.
    assert_eq!(node(&l, Some(1), Nodemask(0b1001), 0), 3);
    // An unknown socket: no table.
    assert_eq!(l.pick(None, mask), (mask, Weights::new()));
}

#[test]
fn check_table_errors() {
    let mem = Nodemask(0b1011); // nodes 0, 1, 3 have memory; 2 does not
    let mut t = [0u8; MAX_NUMNODES];
    t[0] = 1;
    assert_eq!(check_table(&t, 4, 4, mem), Ok(()));
    assert_eq!(check_table(&t, 3, 4, mem), Err(SocketError::SizeMismatch));
    assert_eq!(check_table(&t, 65, 65, mem), Err(SocketError::SizeMismatch));
    let mut past = t;
    past[4] = 1;
    assert_eq!(
        check_table(&past, 4, 4, mem),
        Err(SocketError::SizeMismatch)
    );
    let mut memless = t;
    memless[2] = 5;
    assert_eq!(check_table(&memless, 4, 4, mem), Err(SocketError::NoMemory));
    assert_eq!(
        check_table(&[0; MAX_NUMNODES], 4, 4, mem),
        Err(SocketError::ZeroSum)
    );
    let mut s = SocketWeights::new();
    assert_eq!(s.set(MAX_SOCKETS, t), Err(SocketError::UnknownSocket));
    s.set(1, t).unwrap();
    assert_eq!(s.get(1), Some(&t));
    s.clear(1);
    assert_eq!(s.get(1), None);
    assert!(s.is_empty());
}
