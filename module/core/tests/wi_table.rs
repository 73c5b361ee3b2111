//! Host tests of `tierkit_core::wi_table` (the weight table's state machine)
//! against a plain model written from Linux 7.3 `mm/mempolicy.c`:
//! `node_store()`, `weighted_interleave_auto_store()`,
//! `mempolicy_set_node_perf()` and `reduce_interleave_weights()`, with
//! `wi_state` and `node_bw_table` as the C keeps them (a nullable pointer to
//! `{mode_auto, iw_table[]}` and a nullable array of `min(read, write)`).

use proptest::prelude::*;
use tierkit_core::interleave::{
    parse_bool_auto, parse_weight, reduce_interleave_weights, Nodemask, MAX_NUMNODES,
};
use tierkit_core::wi_table::{BwLines, TableError, WeightTable};

/// The kernel's two pointers, plus what tierkit's `bandwidth` file reads
/// back (the raw pair; the kernel keeps only the minimum).
#[derive(Clone, Debug, Default)]
struct Model {
    /// `wi_state`: `None` is NULL.
    wi_state: Option<(bool, Vec<u8>)>,
    /// `node_bw_table`: `None` is NULL; kcalloc'ed, so 0 until set.
    node_bw_table: Option<Vec<u32>>,
    raw: std::collections::BTreeMap<usize, (u32, u32)>,
}

const EINVAL: i32 = -22;
const ENODEV: i32 = -19;

impl Model {
    fn reduce(&mut self, has_memory: Nodemask) {
        let bw: [u32; MAX_NUMNODES] = self.node_bw_table.clone().unwrap().try_into().unwrap();
        let mut new_iw = [1u8; MAX_NUMNODES];
        reduce_interleave_weights(&bw, has_memory, &mut new_iw);
        self.wi_state = Some((true, new_iw.to_vec()));
    }

    /// node_store(): kstrtou8 || weight == 0 -> -EINVAL; old = wi_state;
    /// new->iw_table = old ? copy : all 1s; new->iw_table[nid] = weight;
    /// new->mode_auto = false.
    fn node_store(&mut self, nid: usize, buf: &[u8]) -> i32 {
        let Ok(w) = parse_weight(buf) else {
            return EINVAL;
        };
        if nid >= MAX_NUMNODES {
            return EINVAL;
        }
        let mut t = match &self.wi_state {
            Some((_, t)) => t.clone(),
            None => vec![1; MAX_NUMNODES],
        };
        t[nid] = w;
        self.wi_state = Some((false, t));
        0
    }

    /// weighted_interleave_auto_store().
    fn auto_store(&mut self, buf: &[u8], has_memory: Nodemask) -> i32 {
        let Ok(input) = parse_bool_auto(buf) else {
            return EINVAL;
        };
        if let Some((auto, _)) = &self.wi_state {
            if *auto == input {
                return 0;
            }
        }
        if !input {
            let t = match &self.wi_state {
                Some((_, t)) => t.clone(),
                None => vec![1; MAX_NUMNODES],
            };
            self.wi_state = Some((false, t));
            return 0;
        }
        if self.node_bw_table.is_none() {
            return ENODEV;
        }
        self.reduce(has_memory);
        0
    }

    /// mempolicy_set_node_perf() for one node.
    fn set_node_perf(&mut self, nid: usize, r: u32, w: u32, has_memory: Nodemask) {
        let table = self
            .node_bw_table
            .get_or_insert_with(|| vec![0; MAX_NUMNODES]);
        table[nid] = r.min(w);
        self.raw.insert(nid, (r, w));
        if let Some((false, _)) = self.wi_state {
            return;
        }
        self.reduce(has_memory);
    }

    /// tierkit's `bandwidth` file: parse every line first (decimal digits
    /// only, three fields, nid < nodes), then apply in order.
    fn bandwidth_store(&mut self, buf: &[u8], nodes: usize, has_memory: Nodemask) -> i32 {
        let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
        let text = &buf[..end];
        let mut parsed = Vec::new();
        for line in text.split(|&c| c == b'\n') {
            let fields: Vec<&[u8]> = line
                .split(|&c| c == b' ' || c == b'\t' || c == b'\r')
                .filter(|f| !f.is_empty())
                .collect();
            if fields.is_empty() {
                continue;
            }
            let num = |f: &[u8]| -> Option<u32> {
                if f.iter().all(u8::is_ascii_digit) {
                    std::str::from_utf8(f).ok()?.parse().ok()
                } else {
                    None
                }
            };
            let v: Vec<Option<u32>> = fields.iter().map(|f| num(f)).collect();
            match v[..] {
                [Some(n), Some(r), Some(w)] if (n as usize) < nodes.min(MAX_NUMNODES) => {
                    parsed.push((n as usize, r, w))
                }
                _ => return EINVAL,
            }
        }
        if parsed.is_empty() {
            return EINVAL;
        }
        for (n, r, w) in parsed {
            self.set_node_perf(n, r, w, has_memory);
        }
        0
    }

    fn weights(&self) -> Vec<u8> {
        match &self.wi_state {
            Some((_, t)) => t.clone(),
            None => vec![1; MAX_NUMNODES],
        }
    }
}

fn code(r: Result<(), TableError>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(TableError::Invalid) => EINVAL,
        Err(TableError::NoBandwidth) => ENODEV,
    }
}

#[derive(Clone, Debug)]
enum Op {
    Node(usize, Vec<u8>),
    Auto(Vec<u8>),
    Bandwidth(Vec<u8>),
}

fn weight_buf() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (0u32..300).prop_map(|w| format!("{w}").into_bytes()),
        (1u32..256).prop_map(|w| format!("{w}\n").into_bytes()),
        Just(b"0x10".to_vec()),
        Just(b"".to_vec()),
        Just(b"abc".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..6),
    ]
}

fn auto_buf() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"1".to_vec()),
        Just(b"0\n".to_vec()),
        Just(b"true".to_vec()),
        Just(b"off".to_vec()),
        Just(b"on".to_vec()),
        Just(b"x".to_vec()),
        Just(b"".to_vec()),
    ]
}

fn bw_buf() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        8 => (0usize..10, 0u32..300_000, 0u32..300_000).prop_map(|(n, r, w)| format!("{n} {r} {w}")),
        1 => Just(String::from("   ")),
        1 => Just(String::from("1 +5 6")),
        1 => Just(String::from("1 2")),
        1 => Just(String::from("0 4294967296 1")),
        1 => Just(String::from("0\t7\t9\r")),
    ];
    proptest::collection::vec(line, 0..4).prop_map(|v| v.join("\n").into_bytes())
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..70, weight_buf()).prop_map(|(n, b)| Op::Node(n, b)),
        auto_buf().prop_map(Op::Auto),
        bw_buf().prop_map(Op::Bandwidth),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Any sequence of writes to nodeN, auto and bandwidth: the same
    /// results, weights, auto flag and bandwidth as the model, after every
    /// write.
    #[test]
    fn table_matches_the_kernel_model(
        ops in proptest::collection::vec(op(), 0..24),
        has_memory in 1u64..(1 << 10),
        nodes in 1usize..12,
    ) {
        let mask = Nodemask(has_memory);
        let mut t = WeightTable::new();
        let mut m = Model::default();
        for o in &ops {
            let (got, want) = match o {
                Op::Node(n, b) => (code(t.node_store(*n, b)), m.node_store(*n, b)),
                Op::Auto(b) => (code(t.auto_store(b, mask)), m.auto_store(b, mask)),
                Op::Bandwidth(b) => (
                    code(t.bandwidth_store(b, nodes, mask)),
                    m.bandwidth_store(b, nodes, mask),
                ),
            };
            prop_assert_eq!(got, want, "{:?}", o);
            prop_assert_eq!(t.weights().effective().to_vec(), m.weights(), "{:?}", o);
            prop_assert_eq!(t.is_auto(), m.wi_state.as_ref().is_none_or(|s| s.0));
            prop_assert_eq!(t.has_bandwidth(), m.node_bw_table.is_some());
            let bw: Vec<(usize, u32, u32)> = t.bandwidth().collect();
            let want_bw: Vec<(usize, u32, u32)> =
                m.raw.iter().map(|(&n, &(r, w))| (n, r, w)).collect();
            prop_assert_eq!(bw, want_bw);
        }
    }
}

#[test]
fn initial_state_is_auto_with_every_weight_one() {
    let t = WeightTable::new();
    assert!(t.is_auto());
    assert!(!t.has_bandwidth());
    assert_eq!(t.weights().effective(), [1u8; MAX_NUMNODES]);
}

#[test]
fn auto_without_bandwidth_is_enodev_and_changes_nothing() {
    let mut t = WeightTable::new();
    t.node_store(0, b"3").unwrap();
    assert_eq!(
        t.auto_store(b"1", Nodemask(0b11)),
        Err(TableError::NoBandwidth)
    );
    assert!(!t.is_auto());
    assert_eq!(t.weights().get(0), 3);
}

#[test]
fn bandwidth_reduces_weights_in_auto_mode_only() {
    let mut t = WeightTable::new();
    t.bandwidth_store(b"0 200000 200000\n1 50000 60000\n", 2, Nodemask(0b11))
        .unwrap();
    assert_eq!((t.weights().get(0), t.weights().get(1)), (25, 6));
    t.node_store(1, b"9").unwrap();
    t.bandwidth_store(b"1 100000 100000", 2, Nodemask(0b11))
        .unwrap();
    assert_eq!(t.weights().get(1), 9, "manual mode keeps the weights");
    t.auto_store(b"1", Nodemask(0b11)).unwrap();
    // floor(32 * 200000 / 300000) = 21, floor(32 * 100000 / 300000) = 10.
    assert_eq!((t.weights().get(0), t.weights().get(1)), (21, 10));
}

#[test]
fn a_bad_bandwidth_line_applies_nothing() {
    let mut t = WeightTable::new();
    for bad in [
        &b""[..],
        b"\n \n",
        b"0 1 2\n1 2",
        b"0 1 2 3",
        b"2 1 1",
        b"0 -1 2",
        b"0 +1 2",
        b"0 4294967296 1",
    ] {
        assert_eq!(
            t.bandwidth_store(bad, 2, Nodemask(0b11)),
            Err(TableError::Invalid),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
        assert!(!t.has_bandwidth());
    }
    assert_eq!(BwLines::new(b"0 1 2\0garbage").count(), 1);
}
