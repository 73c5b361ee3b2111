//! Host tests of `tierkit_core::interleave` against reference models written
//! straight from Linux 7.3 `mm/mempolicy.c`, `lib/kstrtox.c` and
//! `include/linux/nodemask.h`.
//!
//! The `k_*` functions below are literal ports of the C, kept close to the
//! original line by line (C-style raw state: `il_prev` as a `short` that may
//! be the kernel's `MAX_NUMNODES - 1`, weight tables with no "unset"). They
//! take the kernel's `MAX_NUMNODES` as a parameter, so the tests run with both
//! 64 (`CONFIG_NODES_SHIFT=6`) and 1024 (`=10`).

use proptest::prelude::*;
use tierkit_core::interleave::*;

// ---------------------------------------------------------------------------
// Literal ports of the kernel's C
// ---------------------------------------------------------------------------

/// `find_next_bit(mask, maxn, start)`: only bits < 64 can be set.
fn k_find_next_bit(mask: u64, maxn: i64, start: i64) -> i64 {
    let mut b = start;
    while b < maxn {
        if (0..64).contains(&b) && (mask >> b) & 1 == 1 {
            return b;
        }
        b += 1;
    }
    maxn
}

/// `first_node`.
fn k_first_node(mask: u64, maxn: i64) -> i64 {
    k_find_next_bit(mask, maxn, 0).min(maxn)
}

/// `next_node`.
fn k_next_node(n: i64, mask: u64, maxn: i64) -> i64 {
    k_find_next_bit(mask, maxn, n + 1).min(maxn)
}

/// `__next_node_in`.
fn k_next_node_in(node: i64, mask: u64, maxn: i64) -> i64 {
    let mut ret = k_next_node(node, mask, maxn);
    if ret == maxn {
        ret = k_first_node(mask, maxn);
    }
    ret
}

/// `node_isset`.
fn k_node_isset(node: i64, mask: u64) -> bool {
    (0..64).contains(&node) && (mask >> node) & 1 == 1
}

/// `current->il_prev`, `current->il_weight`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct KTask {
    il_prev: i64,
    il_weight: u8,
}

/// The kernel's weight table (`iw_table`, entries 1..=255).
fn k_table(w: &Weights) -> [u8; 64] {
    w.effective()
}

/// `weighted_interleave_nid` (returns `maxn` in place of `numa_node_id()`).
fn k_weighted_interleave_nid(nodemask: u64, table: &[u8; 64], ilx: u64, maxn: i64) -> i64 {
    let nr_nodes = nodemask.count_ones();
    if nr_nodes == 0 {
        return maxn;
    }
    let mut weight_total: u32 = 0;
    let mut nid = k_first_node(nodemask, maxn);
    while nid < maxn {
        weight_total += table[nid as usize] as u32;
        nid = k_next_node(nid, nodemask, maxn);
    }
    let mut target = (ilx % weight_total as u64) as u32;
    nid = k_first_node(nodemask, maxn);
    while target != 0 {
        let weight = table[nid as usize] as u32;
        if target < weight {
            break;
        }
        target -= weight;
        nid = k_next_node_in(nid, nodemask, maxn);
    }
    nid
}

/// `interleave_nid`.
fn k_interleave_nid(nodemask: u64, ilx: u64, maxn: i64) -> i64 {
    let nnodes = nodemask.count_ones();
    if nnodes == 0 {
        return maxn;
    }
    let target = (ilx % nnodes as u64) as u32;
    let mut nid = k_first_node(nodemask, maxn);
    for _ in 0..target {
        nid = k_next_node(nid, nodemask, maxn);
    }
    nid
}

/// `weighted_interleave_nodes`.
fn k_weighted_interleave_nodes(me: &mut KTask, nodes: u64, table: &[u8; 64], maxn: i64) -> i64 {
    let mut node = me.il_prev;
    if me.il_weight == 0 || !k_node_isset(node, nodes) {
        node = k_next_node_in(node, nodes, maxn);
        if node == maxn {
            return node;
        }
        me.il_prev = node;
        me.il_weight = table[node as usize];
    }
    me.il_weight -= 1;
    node
}

/// `interleave_nodes`.
fn k_interleave_nodes(me: &mut KTask, nodes: u64, maxn: i64) -> i64 {
    let nid = k_next_node_in(me.il_prev, nodes, maxn);
    if nid < maxn {
        me.il_prev = nid;
    }
    nid
}

/// `alloc_pages_bulk_weighted_interleave`, every `__alloc_pages_bulk`
/// succeeding; returns the calls `(node, nr_pages)` in order and the total.
fn k_bulk(
    me: &mut KTask,
    nodes: u64,
    table: &[u8; 64],
    nr_pages: u64,
    maxn: i64,
) -> (Vec<(usize, u64)>, u64) {
    let mut calls = Vec::new();
    let mut total_allocated: u64 = 0;
    let mut rem_pages = nr_pages;
    let mut resume_node: i64;
    let mut resume_weight: u8;
    if nr_pages == 0 {
        return (calls, 0);
    }
    let nnodes = nodes.count_ones();
    if nnodes == 0 {
        return (calls, 0);
    }
    let mut node = me.il_prev;
    let mut weight = me.il_weight;
    if weight != 0 && k_node_isset(node, nodes) {
        let node_pages = rem_pages.min(weight as u64);
        calls.push((node as usize, node_pages));
        total_allocated += node_pages;
        if rem_pages <= weight as u64 {
            me.il_weight -= rem_pages as u8;
            return (calls, total_allocated);
        }
        rem_pages -= weight as u64;
    }
    me.il_weight = 0;
    let mut prev_node = node;
    let weights = *table;
    let mut weight_total: u32 = 0;
    node = k_first_node(nodes, maxn);
    while node < maxn {
        weight_total += weights[node as usize] as u32;
        node = k_next_node(node, nodes, maxn);
    }
    let rounds = rem_pages / weight_total as u64;
    let mut delta = rem_pages % weight_total as u64;
    resume_node = k_next_node_in(prev_node, nodes, maxn);
    resume_weight = weights[resume_node as usize];
    for _ in 0..nnodes {
        node = k_next_node_in(prev_node, nodes, maxn);
        weight = weights[node as usize];
        let mut node_pages = weight as u64 * rounds;
        if delta > weight as u64 {
            node_pages += weight as u64;
            delta -= weight as u64;
        } else if delta != 0 {
            node_pages += delta;
            resume_node = node;
            resume_weight = weight - delta as u8;
            delta = 0;
        }
        if node_pages == 0 {
            break;
        }
        calls.push((node as usize, node_pages));
        total_allocated += node_pages;
        if total_allocated == nr_pages {
            break;
        }
        prev_node = node;
    }
    me.il_prev = resume_node;
    me.il_weight = resume_weight;
    (calls, total_allocated)
}

/// lib/math/gcd.c `gcd` (the non-ffs variant), literally.
fn k_gcd(mut a: u64, mut b: u64) -> u64 {
    let mut r = a | b;
    if a == 0 || b == 0 {
        return r;
    }
    r &= r.wrapping_neg();
    while b & r == 0 {
        b >>= 1;
    }
    if b == r {
        return r;
    }
    loop {
        while a & r == 0 {
            a >>= 1;
        }
        if a == r {
            return r;
        }
        if a == b {
            return a;
        }
        if a < b {
            std::mem::swap(&mut a, &mut b);
        }
        a -= b;
        a >>= 1;
        if a & r != 0 {
            a += b;
        }
        a >>= 1;
    }
}

/// `reduce_interleave_weights`, as in C (index loops kept on purpose).
#[allow(clippy::needless_range_loop)]
fn k_reduce_interleave_weights(bw: &[u32; 64], n_memory: u64, new_iw: &mut [u8; 64]) {
    let weightiness: i32 = 32;
    let mut sum_bw: u64 = 0;
    let mut iw_gcd: u32 = 0;
    for nid in 0..64 {
        if k_node_isset(nid, n_memory) {
            sum_bw += bw[nid as usize] as u64;
        }
    }
    for nid in 0..64usize {
        if !k_node_isset(nid as i64, n_memory) {
            continue;
        }
        let scaling_factor: u32 = (weightiness as u32).wrapping_mul(bw[nid]);
        if bw[nid] != 0 && sum_bw < scaling_factor as u64 {
            let cast_sum_bw = sum_bw as u32;
            new_iw[nid] = (scaling_factor / cast_sum_bw) as u8;
        } else {
            new_iw[nid] = 1;
        }
        if iw_gcd == 0 {
            iw_gcd = new_iw[nid] as u32;
        }
        iw_gcd = k_gcd(iw_gcd as u64, new_iw[nid] as u64) as u32;
    }
    for nid in 0..64usize {
        if k_node_isset(nid as i64, n_memory) {
            new_iw[nid] /= iw_gcd as u8;
        }
    }
}

/// `kstrtou8(s, 0, &res)` on a NUL-terminated copy of `buf`, literally
/// (`kstrtoull` → `_kstrtoull` → `_parse_integer_fixup_radix` →
/// `_parse_integer_limit`). `Err(-22)` is EINVAL, `Err(-34)` ERANGE.
fn k_kstrtou8(buf: &[u8]) -> Result<u8, i32> {
    let mut s: Vec<u8> = buf.to_vec();
    s.push(0);
    s.extend_from_slice(&[0, 0, 0]);
    let mut p = 0usize;
    if s[p] == b'+' {
        p += 1;
    }
    // _parse_integer_fixup_radix
    let tolower = |c: u8| c | 0x20;
    let base: u64;
    if s[p] == b'0' {
        if tolower(s[p + 1]) == b'x' && s[p + 2].is_ascii_hexdigit() {
            base = 16;
        } else {
            base = 8;
        }
    } else {
        base = 10;
    }
    if base == 16 && s[p] == b'0' && tolower(s[p + 1]) == b'x' {
        p += 2;
    }
    // _parse_integer_limit
    let mut res: u64 = 0;
    let mut rv = 0usize;
    let mut overflow = false;
    loop {
        let c = s[p + rv];
        let lc = tolower(c);
        let val: u64 = if c.is_ascii_digit() {
            (c - b'0') as u64
        } else if (b'a'..=b'f').contains(&lc) {
            (lc - b'a' + 10) as u64
        } else {
            break;
        };
        if val >= base {
            break;
        }
        if res & (!0u64 << 60) != 0 {
            match res.checked_mul(base).and_then(|r| r.checked_add(val)) {
                Some(r) => res = r,
                None => {
                    res = u64::MAX;
                    overflow = true;
                }
            }
        } else {
            res = res * base + val;
        }
        rv += 1;
    }
    if overflow {
        return Err(-34);
    }
    if rv == 0 {
        return Err(-22);
    }
    p += rv;
    if s[p] == b'\n' {
        p += 1;
    }
    if s[p] != 0 {
        return Err(-22);
    }
    if res != (res as u8) as u64 {
        return Err(-34);
    }
    Ok(res as u8)
}

/// `sysfs_streq(buf, "")` on the NUL-terminated copy.
fn k_sysfs_streq_empty(buf: &[u8]) -> bool {
    let c0 = buf.first().copied().unwrap_or(0);
    let c1 = buf.get(1).copied().unwrap_or(0);
    c0 == 0 || (c0 == b'\n' && c1 == 0)
}

/// `node_store`'s validation: Ok(weight) or the errno.
fn k_node_store(buf: &[u8]) -> Result<u8, i32> {
    let count = buf.len();
    let mut weight = 0u8;
    if count == 0
        || k_sysfs_streq_empty(buf)
        || match k_kstrtou8(buf) {
            Ok(w) => {
                weight = w;
                false
            }
            Err(_) => true,
        }
        || weight == 0
    {
        return Err(-22);
    }
    Ok(weight)
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// Our state, as the kernel's raw `il_prev` for a given `MAX_NUMNODES`.
fn raw_prev(t: &TaskState, maxn: i64) -> i64 {
    match t.il_prev() {
        -1 => maxn - 1,
        p => p as i64,
    }
}

fn same_state(t: &TaskState, k: &KTask, maxn: i64) -> bool {
    raw_prev(t, maxn) == k.il_prev && t.il_weight() == k.il_weight
}

fn weights_of(pairs: &[(usize, u8)]) -> Weights {
    let mut w = Weights::new();
    for &(n, v) in pairs {
        w.set(n, v).unwrap();
    }
    w
}

fn mask_of(nodes: &[usize]) -> Nodemask {
    nodes.iter().fold(Nodemask::EMPTY, |m, &n| m.with(n))
}

/// The cycle spelled out: each node of the mask repeated `weight` times.
fn expanded(mask: Nodemask, w: &Weights) -> Vec<usize> {
    let mut v = Vec::new();
    for n in mask.iter() {
        for _ in 0..w.get(n) {
            v.push(n);
        }
    }
    v
}

// ---------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------

fn any_mask() -> impl Strategy<Value = Nodemask> {
    prop_oneof![
        any::<u64>().prop_map(Nodemask),
        (0usize..64).prop_map(Nodemask::single),
        (0usize..64, 0usize..64).prop_map(|(a, b)| Nodemask::single(a).with(b)),
        (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(a, b, c)| Nodemask(a & b & c)),
        Just(Nodemask(u64::MAX)),
        Just(Nodemask(1 << 63)),
        Just(Nodemask((1 << 63) | 1)),
    ]
}

fn nonempty_mask() -> impl Strategy<Value = Nodemask> {
    any_mask().prop_filter("non-empty", |m| !m.is_empty())
}

fn any_weights() -> impl Strategy<Value = Weights> {
    prop_oneof![
        prop::array::uniform32(any::<u8>())
            .prop_flat_map(|a| (Just(a), prop::array::uniform32(any::<u8>())))
            .prop_map(|(a, b)| {
                let mut t = [0u8; 64];
                t[..32].copy_from_slice(&a);
                t[32..].copy_from_slice(&b);
                Weights::from_table(t)
            }),
        Just(Weights::new()),
        Just(Weights::from_table([255; 64])),
        Just(Weights::from_table([1; 64])),
        prop::array::uniform32(prop_oneof![Just(1u8), Just(255u8), 1u8..=8]).prop_map(|a| {
            let mut t = [0u8; 64];
            t[..32].copy_from_slice(&a);
            t[32..].copy_from_slice(&a);
            Weights::from_table(t)
        }),
    ]
}

fn any_ilx() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        0u64..100_000,
        (0u64..100_000).prop_map(|d| u64::MAX - d),
        (0u64..100_000).prop_map(|d| (1u64 << 32).wrapping_add(d).wrapping_sub(50_000)),
        (0u64..1000, 32u32..64).prop_map(|(d, s)| (1u64 << s).wrapping_sub(d)),
        // Typical anonymous-mapping ilx: a user virtual page number.
        (0x0007_f000_0000_u64..0x0007_ffff_ffff),
    ]
}

/// The kernel's raw task state for `maxn`: a node, or its "fresh" value.
fn any_ktask(maxn: i64) -> impl Strategy<Value = KTask> {
    (
        prop_oneof![(0i64..64), Just(maxn - 1)],
        prop_oneof![Just(0u8), any::<u8>(), 1u8..4],
    )
        .prop_map(|(il_prev, il_weight)| KTask { il_prev, il_weight })
}

fn any_maxn() -> impl Strategy<Value = i64> {
    prop_oneof![Just(64i64), Just(1024i64)]
}

// ---------------------------------------------------------------------------
// The worked examples
// ---------------------------------------------------------------------------

#[test]
fn example_nodes_0_1_weights_3_1() {
    let mask = mask_of(&[0, 1]);
    let w = weights_of(&[(0, 3), (1, 1)]);
    let sel = Selector::new(mask, &w).unwrap();
    let want = [0, 0, 0, 1, 0, 0, 0, 1];
    for ilx in 0..8u64 {
        assert_eq!(
            weighted_interleave_nid_ref(mask, &w, ilx),
            Some(want[ilx as usize])
        );
        assert_eq!(sel.node_for_ilx(ilx), want[ilx as usize]);
    }
    let mut out = [0u8; 8];
    sel.fill(0, &mut out);
    assert_eq!(out, [0, 0, 0, 1, 0, 0, 0, 1]);
}

#[test]
fn example_nodes_1_3_weights_2_5() {
    let mask = mask_of(&[1, 3]);
    let w = weights_of(&[(1, 2), (3, 5)]);
    let sel = Selector::new(mask, &w).unwrap();
    let want = [1, 1, 3, 3, 3, 3, 3, 1];
    for ilx in 0..8u64 {
        assert_eq!(
            weighted_interleave_nid_ref(mask, &w, ilx),
            Some(want[ilx as usize])
        );
        assert_eq!(sel.node_for_ilx(ilx), want[ilx as usize]);
    }
}

#[test]
fn example_bulk_10_pages_then_0_1_0() {
    let mask = mask_of(&[0, 1]);
    let w = weights_of(&[(0, 3), (1, 1)]);
    let mut st = TaskState::new();
    let mut out = [0u64; MAX_NUMNODES];
    assert_eq!(bulk_split(&mut st, mask, &w, 10, &mut out), 10);
    assert_eq!(out[0], 8);
    assert_eq!(out[1], 2);
    assert_eq!(out[2..].iter().sum::<u64>(), 0);
    assert_eq!((st.il_prev(), st.il_weight()), (0, 1));
    let next: Vec<usize> = (0..3).map(|_| st.next(mask, &w).unwrap()).collect();
    assert_eq!(next, [0, 1, 0]);

    // The kernel's call order: 8 pages on node 0, then 2 on node 1.
    let mut st = TaskState::new();
    let mut calls = Vec::new();
    bulk_plan(&mut st, mask, &w, 10, |n, c| calls.push((n, c)));
    assert_eq!(calls, [(0, 8), (1, 2)]);
}

#[test]
fn fresh_task_state() {
    let st = TaskState::new();
    assert_eq!(st.il_prev(), -1);
    assert_eq!(st.il_weight(), 0);
    assert_eq!(st, TaskState::default());
    assert_eq!(st, TaskState::from_raw(-1, 0));
    assert_eq!(st, TaskState::from_raw(1023, 0));
    assert_eq!(TaskState::from_raw(63, 0).il_prev(), 63);
    // Fresh starts at the first node, even when node 63 is in the mask.
    let mask = mask_of(&[5, 63]);
    let w = Weights::new();
    let mut st = TaskState::new();
    assert_eq!(st.next(mask, &w), Some(5));
    assert_eq!(st.next(mask, &w), Some(63));
    assert_eq!(st.next(mask, &w), Some(5));
    // Empty mask: None, state unchanged.
    let mut st = TaskState::from_raw(5, 2);
    assert_eq!(st.next(Nodemask::EMPTY, &w), None);
    assert_eq!(st.next_plain(Nodemask::EMPTY), None);
    assert_eq!(st, TaskState::from_raw(5, 2));
}

#[test]
fn task_path_weights_3_1() {
    let mask = mask_of(&[0, 1]);
    let w = weights_of(&[(0, 3), (1, 1)]);
    let mut st = TaskState::new();
    let seq: Vec<usize> = (0..9).map(|_| st.next(mask, &w).unwrap()).collect();
    assert_eq!(seq, [0, 0, 0, 1, 0, 0, 0, 1, 0]);
    assert_eq!((st.il_prev(), st.il_weight()), (0, 2));
}

#[test]
fn bulk_whole_cycle_resume_state_differs_from_single_steps() {
    // 8 pages = 2 whole cycles of {3,1}: delta == 0.
    let mask = mask_of(&[0, 1]);
    let w = weights_of(&[(0, 3), (1, 1)]);
    let mut bulk = TaskState::new();
    let mut out = [0u64; MAX_NUMNODES];
    bulk_split(&mut bulk, mask, &w, 8, &mut out);
    assert_eq!((out[0], out[1]), (6, 2));
    // The kernel resumes from next_node_in(prev_node) with its full weight.
    assert_eq!((bulk.il_prev(), bulk.il_weight()), (0, 3));
    let mut single = TaskState::new();
    for _ in 0..8 {
        single.next(mask, &w);
    }
    assert_eq!((single.il_prev(), single.il_weight()), (1, 0));
    for _ in 0..20 {
        assert_eq!(bulk.next(mask, &w), single.next(mask, &w));
    }
}

#[test]
fn bulk_edge_cases() {
    let mask = mask_of(&[2, 7]);
    let w = weights_of(&[(2, 4), (7, 2)]);
    let mut out = [0u64; MAX_NUMNODES];
    // 0 pages and empty masks do nothing.
    let mut st = TaskState::from_raw(2, 3);
    assert_eq!(bulk_split(&mut st, mask, &w, 0, &mut out), 0);
    assert_eq!(bulk_split(&mut st, Nodemask::EMPTY, &w, 5, &mut out), 0);
    assert_eq!(st, TaskState::from_raw(2, 3));
    // Fits in the current node's remaining weight.
    assert_eq!(bulk_split(&mut st, mask, &w, 2, &mut out), 2);
    assert_eq!((out[2], st.il_prev(), st.il_weight()), (2, 2, 1));
    // Exactly uses it up: il_weight 0, il_prev stays.
    assert_eq!(bulk_split(&mut st, mask, &w, 1, &mut out), 1);
    assert_eq!((out[2], st.il_prev(), st.il_weight()), (1, 2, 0));
    // Remaining weight on a node outside the mask is ignored.
    // Prev 3 -> next_node_in(3) = 7 takes its 2, then node 2 takes 1 of 4.
    let mut st = TaskState::from_raw(3, 5);
    bulk_split(&mut st, mask, &w, 3, &mut out);
    assert_eq!((out[2], out[3], out[7]), (1, 0, 2));
    assert_eq!((st.il_prev(), st.il_weight()), (2, 3));
    // Huge counts: no overflow, exact split.
    let mut st = TaskState::new();
    let n = u64::MAX - 3;
    assert_eq!(bulk_split(&mut st, mask, &w, n, &mut out), n);
    assert_eq!(out[2] + out[7], n);
}

#[test]
fn fill_across_pgoff_wrap() {
    // total 3 does not divide 2^64: after u64::MAX the cycle restarts at 0.
    let mask = mask_of(&[0, 1]);
    let w = weights_of(&[(0, 2), (1, 1)]);
    let sel = Selector::new(mask, &w).unwrap();
    let mut out = [9u8; 6];
    sel.fill(u64::MAX - 2, &mut out);
    // u64::MAX % 3 == 0: ilx MAX-2, MAX-1, MAX -> targets 1, 2, 0.
    assert_eq!(out, [0, 1, 0, 0, 0, 1]);
    for (k, &n) in out.iter().enumerate() {
        assert_eq!(
            n as usize,
            sel.node_for_ilx((u64::MAX - 2).wrapping_add(k as u64))
        );
    }
}

/// The division-free remainder, for every possible total and numerators at
/// the edges of each step of the computation.
#[test]
fn target_exhaustive_totals() {
    let mut edges: Vec<u64> = vec![0, 1, 2, u64::MAX, u64::MAX - 1, 1 << 47, (1 << 47) - 1];
    for s in [14u32, 16, 31, 32, 33, 46, 47, 48, 63] {
        for d in 0..3u64 {
            edges.push((1u64 << s).wrapping_add(d));
            edges.push((1u64 << s).wrapping_sub(d + 1));
        }
    }
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..16 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        edges.push(x);
    }
    for total in 1..=MAX_WEIGHT_TOTAL {
        let mut t = [0u8; 64];
        let mut left = total;
        let mut n = 0;
        while left > 0 {
            let v = left.min(255);
            t[n] = v as u8;
            left -= v;
            n += 1;
        }
        let mask = Nodemask(if n == 64 { u64::MAX } else { (1u64 << n) - 1 });
        let sel = Selector::new(mask, &Weights::from_table(t)).unwrap();
        assert_eq!(sel.total(), total);
        let d = total as u64;
        for &e in edges
            .iter()
            .chain([d - 1, d, d + 1, d * d, u64::MAX - d].iter())
        {
            assert_eq!(sel.target(e) as u64, e % d, "total {total} ilx {e}");
        }
    }
}

// ---------------------------------------------------------------------------
// Nodemask, weights, parsing
// ---------------------------------------------------------------------------

#[test]
fn nodemask_ops() {
    let m = mask_of(&[1, 4, 63]);
    assert_eq!(m.first(), Some(1));
    assert_eq!(m.weight(), 3);
    assert_eq!(m.iter().collect::<Vec<_>>(), [1, 4, 63]);
    assert_eq!(m.next_in(1), Some(4));
    assert_eq!(m.next_in(4), Some(63));
    assert_eq!(m.next_in(63), Some(1));
    assert_eq!(m.next_in(1000), Some(1));
    assert_eq!(m.next_in(0), Some(1));
    assert_eq!(m.next_after(63), None);
    assert_eq!(m.nth(2), Some(63));
    assert_eq!(m.nth(3), None);
    assert!(m.contains(63) && !m.contains(64) && !m.contains(0));
    assert_eq!(Nodemask::EMPTY.first(), None);
    assert_eq!(Nodemask::EMPTY.next_in(3), None);
    assert_eq!(Nodemask::single(64), Nodemask::EMPTY);
    assert_eq!(m.and(mask_of(&[4, 5])), mask_of(&[4]));
    assert_eq!(
        effective_nodemask(mask_of(&[0, 2]), mask_of(&[0, 1])),
        Ok(mask_of(&[0]))
    );
    assert_eq!(
        effective_nodemask(mask_of(&[2]), mask_of(&[0, 1])),
        Err(WeightError::Invalid)
    );
    assert_eq!(
        effective_nodemask(Nodemask::EMPTY, mask_of(&[0])),
        Err(WeightError::Invalid)
    );
}

/// A cpuset that allows part of a policy's mask, none of it, or nothing;
/// a node of the mask without memory (offlined) stays.
#[test]
fn cpuset_nodemask_cases() {
    let mem = mask_of(&[0, 1, 2]);
    let all = Nodemask(u64::MAX);
    assert_eq!(
        cpuset_nodemask(mask_of(&[0, 2]), all, mem),
        mask_of(&[0, 2])
    );
    assert_eq!(
        cpuset_nodemask(mask_of(&[0, 2]), mem, mem),
        mask_of(&[0, 2])
    );
    assert_eq!(
        cpuset_nodemask(mask_of(&[0, 2]), mask_of(&[0, 1]), mem),
        mask_of(&[0])
    );
    // No node of the mask left: the cpuset's nodes with memory.
    assert_eq!(
        cpuset_nodemask(mask_of(&[2]), mask_of(&[0, 1, 5]), mem),
        mask_of(&[0, 1])
    );
    assert_eq!(
        cpuset_nodemask(mask_of(&[2]), Nodemask::EMPTY, mem),
        mask_of(&[2])
    );
    // Node 2 offlined: the root cpuset's mems follow N_MEMORY, and the
    // mask keeps the node (an allocation there fails, as without cpusets).
    let mem = mask_of(&[0, 1]);
    assert_eq!(cpuset_nodemask(mask_of(&[2]), mem, mem), mask_of(&[2]));
    assert_eq!(
        cpuset_nodemask(mask_of(&[2]), mask_of(&[0]), mem),
        mask_of(&[2])
    );
}

#[test]
fn vma_ilx_matches_get_vma_policy() {
    assert_eq!(vma_ilx(100, 5, 0), 105);
    assert_eq!(vma_ilx(1024, 1023, 9), 2 + 1);
    assert_eq!(vma_ilx(u64::MAX, 2, 0), 1);
    assert_eq!(vma_ilx(7, 7, 64), 0);
}

#[test]
fn weights_get_set() {
    let mut w = Weights::new();
    assert_eq!(w.get(0), 1);
    assert_eq!(w.get(64), 1);
    assert_eq!(w.set(3, 0), Err(WeightError::Invalid));
    assert_eq!(w.set(64, 3), Err(WeightError::Invalid));
    assert_eq!(w, Weights::new());
    assert_eq!(w.set(3, 255), Ok(()));
    assert_eq!(w.get(3), 255);
    assert_eq!(w.total(mask_of(&[0, 3])), 256);
    assert_eq!(w.total(Nodemask(u64::MAX)), 63 + 255);
    assert_eq!(
        Weights::from_table([255; 64]).total(Nodemask(u64::MAX)),
        MAX_WEIGHT_TOTAL
    );
    assert_eq!(w.effective()[3], 255);
    assert_eq!(w.effective()[4], 1);
}

#[test]
fn parse_weight_cases() {
    let ok: &[(&[u8], u8)] = &[
        (b"1", 1),
        (b"3\n", 3),
        (b"255", 255),
        (b"255\n", 255),
        (b"+7", 7),
        (b"+7\n", 7),
        (b"0x1F", 31),
        (b"0X1f\n", 31),
        (b"0xff", 255),
        (b"010", 8),
        (b"0377", 255),
        (b"+0x10", 16),
        (b"00000000000000000000000000005", 5),
        (b"5\0junk", 5), // kstrtou8 stops at the C string's NUL
    ];
    for &(s, w) in ok {
        assert_eq!(parse_weight(s), Ok(w), "{:?}", String::from_utf8_lossy(s));
    }
    let bad: &[&[u8]] = &[
        b"",
        b"\n",
        b"\0",
        b"0",
        b"0\n",
        b"00",
        b"0x0",
        b"256",
        b"0x100",
        b"0400",
        b"-1",
        b"+-1",
        b"++1",
        b" 3",
        b"3 ",
        b"3\n\n",
        b"\n3",
        b"3a",
        b"08",
        b"09",
        b"0x",
        b"0xg",
        b"x1",
        b"abc",
        b"1.5",
        b"99999999999999999999999999",
        b"0xffffffffffffffffff",
        b"1e2",
    ];
    for &s in bad {
        assert_eq!(
            parse_weight(s),
            Err(WeightError::Invalid),
            "{:?}",
            String::from_utf8_lossy(s)
        );
    }
}

#[test]
fn parse_bool_auto_cases() {
    for s in [
        &b"1"[..],
        b"1\n",
        b"y",
        b"Y",
        b"yes",
        b"t",
        b"true",
        b"T",
        b"e",
        b"E",
        b"on",
        b"ON",
        b"oN\n",
        b"1junk",
    ] {
        assert_eq!(parse_bool_auto(s), Ok(true), "{:?}", s);
    }
    for s in [
        &b"0"[..],
        b"0\n",
        b"n",
        b"N",
        b"no",
        b"f",
        b"false",
        b"F",
        b"d",
        b"D",
        b"off",
        b"OF",
        b"oFx",
    ] {
        assert_eq!(parse_bool_auto(s), Ok(false), "{:?}", s);
    }
    for s in [
        &b""[..],
        b"\n",
        b"o",
        b"o\n",
        b"ox",
        b"2",
        b" 1",
        b"\x001",
        b"maybe",
    ] {
        assert_eq!(parse_bool_auto(s), Err(WeightError::Invalid), "{:?}", s);
    }
}

// ---------------------------------------------------------------------------
// Auto weights
// ---------------------------------------------------------------------------

#[test]
fn auto_weights_25_6() {
    // DRAM 200 GB/s, CXL 50 GB/s (min of read and write, MB/s).
    let mut bw = [0u32; 64];
    bw[0] = bw_from_coords(200_000, 210_000);
    bw[1] = bw_from_coords(60_000, 50_000);
    assert_eq!((bw[0], bw[1]), (200_000, 50_000));
    let mut out = [1u8; 64];
    reduce_interleave_weights(&bw, mask_of(&[0, 1]), &mut out);
    assert_eq!((out[0], out[1]), (25, 6));
    assert!(out[2..].iter().all(|&w| w == 1));
    assert_eq!(Weights::from_bandwidth(&bw, mask_of(&[0, 1])).get(0), 25);
}

#[test]
fn auto_weights_more() {
    let run = |bws: &[(usize, u32)], mem: &[usize]| {
        let mut bw = [0u32; 64];
        for &(n, b) in bws {
            bw[n] = b;
        }
        let mut out = [1u8; 64];
        reduce_interleave_weights(&bw, mask_of(mem), &mut out);
        out
    };
    // Equal: 16:16 reduced by the GCD to 1:1.
    let o = run(&[(0, 100), (1, 100)], &[0, 1]);
    assert_eq!((o[0], o[1]), (1, 1));
    // 3:1 bandwidth: 24:8 -> 3:1.
    let o = run(&[(0, 300), (1, 100)], &[0, 1]);
    assert_eq!((o[0], o[1]), (3, 1));
    // One node alone: 32 -> 1.
    let o = run(&[(0, 1)], &[0]);
    assert_eq!(o[0], 1);
    // A node with no bandwidth data weighs 1, and counts in the GCD.
    let o = run(&[(0, 300), (1, 100)], &[0, 1, 2]);
    assert_eq!((o[0], o[1], o[2]), (24, 8, 1));
    // A share below 1/32 is rounded up to 1.
    let o = run(&[(0, 1000), (1, 10)], &[0, 1]);
    assert_eq!((o[0], o[1]), (31, 1));
    // Nodes without memory are untouched, even with bandwidth.
    let mut out = [7u8; 64];
    let mut bw = [0u32; 64];
    bw[0] = 100;
    bw[5] = 100;
    reduce_interleave_weights(&bw, mask_of(&[0]), &mut out);
    assert_eq!((out[0], out[5], out[1]), (1, 7, 7));
    // No node with memory: nothing written.
    let mut out = [7u8; 64];
    reduce_interleave_weights(&bw, Nodemask::EMPTY, &mut out);
    assert_eq!(out, [7u8; 64]);
}

// ---------------------------------------------------------------------------
// Property tests
// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Selector == the kernel's walk == the spelled-out cycle.
    #[test]
    fn selector_matches_walk(mask in nonempty_mask(), w in any_weights(), ilx in any_ilx()) {
        let sel = Selector::new(mask, &w).unwrap();
        let want = weighted_interleave_nid_ref(mask, &w, ilx).unwrap();
        prop_assert_eq!(sel.node_for_ilx(ilx), want);
        prop_assert_eq!(k_weighted_interleave_nid(mask.0, &k_table(&w), ilx, 1024), want as i64);
        let cyc = expanded(mask, &w);
        prop_assert_eq!(sel.total() as usize, cyc.len());
        prop_assert_eq!(cyc[(ilx as u128 % cyc.len() as u128) as usize], want);
        prop_assert_eq!(sel.target(ilx) as u64, ilx % sel.total() as u64);
        prop_assert_eq!(sel.len(), mask.weight() as usize);
    }

    /// The nodes a task in a cpuset places over: never empty for a
    /// non-empty mask; never a node with memory outside the cpuset, unless
    /// the cpuset allows no node with memory; the mask's own nodes whenever
    /// one is left; the whole mask when the cpuset allows every node with
    /// memory.
    #[test]
    fn cpuset_nodemask_stays_in_the_cpuset(
        mask in nonempty_mask(),
        mems in any::<u64>(),
        memory in any::<u64>(),
    ) {
        let (mems, memory) = (Nodemask(mems), Nodemask(memory));
        let got = cpuset_nodemask(mask, mems, memory);
        prop_assert!(!got.is_empty());
        let refused = Nodemask(memory.0 & !mems.0);
        if !mems.and(memory).is_empty() {
            prop_assert!(got.and(refused).is_empty());
        }
        let kept = Nodemask(mask.0 & !refused.0);
        if !kept.is_empty() {
            prop_assert_eq!(got, kept);
        }
        prop_assert_eq!(cpuset_nodemask(mask, Nodemask(mems.0 | memory.0), memory), mask);
    }

    /// With all weights 1 it is `interleave_nid`.
    #[test]
    fn interleave_matches_kernel(mask in nonempty_mask(), ilx in any_ilx()) {
        let sel = Selector::interleave(mask).unwrap();
        let want = interleave_nid_ref(mask, ilx).unwrap();
        prop_assert_eq!(want as i64, k_interleave_nid(mask.0, ilx, 64));
        prop_assert_eq!(sel.node_for_ilx(ilx), want);
        prop_assert_eq!(weighted_interleave_nid_ref(mask, &Weights::new(), ilx), Some(want));
    }

    /// `fill` == `node_for_ilx` page by page, including across u64 wrap.
    #[test]
    fn fill_matches_single(
        mask in nonempty_mask(),
        w in any_weights(),
        start in prop_oneof![any_ilx(), (0u64..3000).prop_map(|d| u64::MAX - d)],
        len in 0usize..3000,
    ) {
        let sel = Selector::new(mask, &w).unwrap();
        let mut out = vec![0u8; len];
        sel.fill(start, &mut out);
        for (k, &n) in out.iter().enumerate() {
            let ilx = start.wrapping_add(k as u64);
            prop_assert_eq!(n as usize, sel.node_for_ilx(ilx), "k={} ilx={}", k, ilx);
        }
    }

    /// The division-free remainder against `%` for every total and edge
    /// numerators.
    #[test]
    fn target_is_ilx_mod_total(total in 1u32..=MAX_WEIGHT_TOTAL, ilx in any_ilx()) {
        let mut t = [0u8; 64];
        let mut left = total;
        let mut n = 0;
        while left > 0 {
            let x = left.min(255);
            t[n] = x as u8;
            left -= x;
            n += 1;
        }
        let mask = Nodemask(if n == 64 { u64::MAX } else { (1u64 << n) - 1 });
        let sel = Selector::new(mask, &Weights::from_table(t)).unwrap();
        prop_assert_eq!(sel.total(), total);
        prop_assert_eq!(sel.target(ilx) as u64, ilx % total as u64);
    }

    /// The task path against `weighted_interleave_nodes` and
    /// `interleave_nodes`, with the mask changing between steps (a rebind).
    #[test]
    fn task_path_matches_kernel(
        maxn in any_maxn(),
        init in any_maxn().prop_flat_map(any_ktask),
        masks in prop::collection::vec(any_mask(), 1..4),
        w in any_weights(),
        ops in prop::collection::vec((0usize..4, any::<bool>(), 1usize..40), 1..12),
    ) {
        let mut k = init;
        if k.il_prev >= 64 { k.il_prev = maxn - 1; }
        let mut t = TaskState::from_raw(k.il_prev as i32, k.il_weight);
        let table = k_table(&w);
        for (mi, plain, steps) in ops {
            let mask = masks[mi % masks.len()];
            for _ in 0..steps {
                let (got, want) = if plain {
                    (t.next_plain(mask), k_interleave_nodes(&mut k, mask.0, maxn))
                } else {
                    (t.next(mask, &w), k_weighted_interleave_nodes(&mut k, mask.0, &table, maxn))
                };
                prop_assert_eq!(got.map(|n| n as i64).unwrap_or(maxn), want);
                prop_assert!(same_state(&t, &k, maxn), "{:?} vs {:?}", t, k);
            }
        }
    }

    /// The bulk path against `alloc_pages_bulk_weighted_interleave`: same
    /// calls in the same order, same totals, same resume state.
    #[test]
    fn bulk_matches_kernel(
        maxn in any_maxn(),
        init in any_maxn().prop_flat_map(any_ktask),
        masks in prop::collection::vec(any_mask(), 1..3),
        w in any_weights(),
        ops in prop::collection::vec((0usize..3, prop_oneof![0u64..40, 0u64..100_000, Just(u64::MAX)], any::<bool>()), 1..8),
    ) {
        let mut k = init;
        if k.il_prev >= 64 { k.il_prev = maxn - 1; }
        let mut t = TaskState::from_raw(k.il_prev as i32, k.il_weight);
        let table = k_table(&w);
        for (mi, n, single) in ops {
            let mask = masks[mi % masks.len()];
            if single {
                let got = t.next(mask, &w);
                let want = k_weighted_interleave_nodes(&mut k, mask.0, &table, maxn);
                prop_assert_eq!(got.map(|n| n as i64).unwrap_or(maxn), want);
            } else {
                // bulk_split from the same state must agree with bulk_plan.
                let mut t2 = t;
                let mut out = [0u64; MAX_NUMNODES];
                let split_total = bulk_split(&mut t2, mask, &w, n, &mut out);

                let mut calls = Vec::new();
                let got = bulk_plan(&mut t, mask, &w, n, |node, c| calls.push((node, c)));
                let (kcalls, want) = k_bulk(&mut k, mask.0, &table, n, maxn);
                prop_assert_eq!(got, want);
                prop_assert_eq!(&calls, &kcalls);
                prop_assert_eq!(got, if mask.is_empty() { 0 } else { n });

                let mut per = [0u64; MAX_NUMNODES];
                for &(node, c) in &calls { per[node] += c; }
                prop_assert_eq!(out, per);
                prop_assert_eq!(split_total, got);
                prop_assert_eq!(t2, t);
            }
            prop_assert!(same_state(&t, &k, maxn), "{:?} vs {:?}", t, k);
        }
    }

    /// Bulk == N single task-path steps in per-node counts; the resume state
    /// is the same, except after a whole number of cycles (delta == 0), where
    /// it is the kernel's equivalent "(next node, full weight)" form.
    #[test]
    fn bulk_equals_single_steps(
        init in any_ktask(1024),
        mask in nonempty_mask(),
        w in any_weights(),
        n in prop_oneof![1u64..50, 1u64..5000],
    ) {
        let st0 = TaskState::from_raw(init.il_prev as i32, init.il_weight);
        let mut bulk = st0;
        let mut out = [0u64; MAX_NUMNODES];
        prop_assert_eq!(bulk_split(&mut bulk, mask, &w, n, &mut out), n);

        let mut single = st0;
        let mut counts = [0u64; MAX_NUMNODES];
        for _ in 0..n {
            counts[single.next(mask, &w).unwrap()] += 1;
        }
        prop_assert_eq!(out, counts);

        if bulk != single {
            // Only the whole-cycle case differs: the single path sits on the
            // cycle's last node with nothing left; the kernel's bulk path
            // names the following node with its full weight.
            prop_assert_eq!(single.il_weight(), 0);
            let next = mask.next_in(single.prev_node().unwrap()).unwrap();
            prop_assert_eq!(bulk.prev_node(), Some(next));
            prop_assert_eq!(bulk.il_weight(), w.get(next));
        }
        // Either way the futures agree.
        for _ in 0..(2 * w.total(mask) + 3) {
            prop_assert_eq!(bulk.next(mask, &w), single.next(mask, &w));
        }
    }

    /// `reduce_interleave_weights` against the literal port, including
    /// bandwidths large enough that `32 * bw` wraps in `unsigned int`.
    #[test]
    fn reduce_matches_kernel(
        mem in any_mask(),
        bw in prop::collection::vec(prop_oneof![Just(0u32), 1u32..1000, 1u32..1_000_000, any::<u32>()], 64),
        prefill in any::<u8>(),
    ) {
        let mut b = [0u32; 64];
        b.copy_from_slice(&bw);
        let mut ours = [prefill; 64];
        let mut theirs = [prefill; 64];
        reduce_interleave_weights(&b, mem, &mut ours);
        k_reduce_interleave_weights(&b, mem.0, &mut theirs);
        prop_assert_eq!(ours, theirs);
        for n in mem.iter() {
            prop_assert!((1..=32).contains(&ours[n]));
        }
    }

    /// `parse_weight` against `node_store`'s checks on random writes.
    #[test]
    fn parse_weight_matches_node_store(
        s in prop::collection::vec(prop::sample::select(b"0123456789abcdefABCDEFxX+-\n \0g".to_vec()), 0..8)
    ) {
        let want = k_node_store(&s);
        prop_assert_eq!(parse_weight(&s).ok(), want.ok());
    }

    /// And on every decimal, hex and octal spelling of 0..=300.
    #[test]
    fn parse_weight_numbers(v in 0u32..=300, form in 0usize..6, nl in any::<bool>()) {
        let mut s = match form {
            0 => format!("{}", v),
            1 => format!("+{}", v),
            2 => format!("0x{:x}", v),
            3 => format!("0X{:X}", v),
            4 => format!("0{:o}", v),
            _ => format!("+0x{:x}", v),
        };
        if nl { s.push('\n'); }
        let want = if (1..=255).contains(&v) { Ok(v as u8) } else { Err(WeightError::Invalid) };
        prop_assert_eq!(parse_weight(s.as_bytes()), want);
        prop_assert_eq!(k_node_store(s.as_bytes()).ok(), want.ok());
    }

    /// `parse_bool_auto` is kstrtobool: decided by the first two bytes.
    #[test]
    fn parse_bool_first_two_bytes(s in prop::collection::vec(any::<u8>(), 0..5)) {
        let r = parse_bool_auto(&s);
        let mut t = s.clone();
        t.truncate(2);
        if s.first() != Some(&0) {
            prop_assert_eq!(r, parse_bool_auto(&t));
        }
    }

    /// The bench checksums agree (same node sequence).
    #[test]
    fn bench_sums_agree(mask in nonempty_mask(), w in any_weights(), start in any_ilx()) {
        let sel = Selector::new(mask, &w).unwrap();
        prop_assert_eq!(bench_sum_selector(&sel, start, 300), bench_sum_walk(mask, &w, start, 300));
    }
}

#[test]
fn selector_is_small() {
    assert!(std::mem::size_of::<Selector>() <= 224);
    assert!(std::mem::size_of::<TaskState>() <= 4);
}
