//! The node each page should be on: the kernel's interleave and weighted
//! interleave by tierkit-core's reference model ([`expected_seq`]), the
//! weight sets the placement and differential tests run, and the page by
//! page comparisons and pictures of where pages landed.

use crate::topology::node;
use tierkit_core::interleave::{
    interleave_nid_ref, weighted_interleave_nid_ref, Nodemask, Weights,
};

/// The node the kernel (with `MPOL_WEIGHTED_INTERLEAVE`) or tierkit (with
/// `TK_MODE_WEIGHTED_INTERLEAVE`) picks for `ilx`: mm/mempolicy.c
/// `weighted_interleave_nid`, by tierkit-core's reference model (a straight
/// port of the kernel's walk). `weights[n]` is node n's weight (0 reads as
/// 1, "never set"). `nodemask` must not be empty.
pub fn expected_wi_nid(nodemask: u64, weights: &[u8; 64], ilx: u64) -> u32 {
    let w = Weights::from_table(*weights);
    weighted_interleave_nid_ref(Nodemask(nodemask), &w, ilx).expect("empty nodemask") as u32
}

/// mm/mempolicy.c `interleave_nid`: the `ilx % nr_nodes`-th node of the
/// mask, by tierkit-core's reference model.
pub fn expected_il_nid(nodemask: u64, ilx: u64) -> u32 {
    interleave_nid_ref(Nodemask(nodemask), ilx).expect("empty nodemask") as u32
}

/// Expected nodes for ilx `first_ilx .. first_ilx + n`.
pub fn expected_seq(
    mode_weighted: bool,
    nodemask: u64,
    weights: &[u8; 64],
    first_ilx: u64,
    n: usize,
) -> Vec<u32> {
    (0..n as u64)
        .map(|i| {
            if mode_weighted {
                expected_wi_nid(nodemask, weights, first_ilx + i)
            } else {
                expected_il_nid(nodemask, first_ilx + i)
            }
        })
        .collect()
}

/// A weight table with `(node, weight)` set and every other node 1.
pub fn weight_table(weights: &[(u32, u8)]) -> [u8; 64] {
    let mut t = [1u8; 64];
    for &(n, w) in weights {
        t[n as usize] = w;
    }
    t
}

/// One weight set of the placement and differential tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightSet {
    pub nodemask: u64,
    /// Weight of each node of the mask.
    pub weights: Vec<(u32, u8)>,
}

impl WeightSet {
    pub fn new(weights: &[(u32, u8)]) -> WeightSet {
        let nodes: Vec<u32> = weights.iter().map(|w| w.0).collect();
        WeightSet {
            nodemask: node::mask_of(&nodes),
            weights: weights.to_vec(),
        }
    }

    /// `{0,1} w{0:3,1:1}`.
    pub fn name(&self) -> String {
        format!(
            "{} {}",
            node::fmt_mask(self.nodemask),
            fmt_weights(&self.weights)
        )
    }

    /// Σ weights: one interleave cycle.
    pub fn total(&self) -> u32 {
        self.weights.iter().map(|w| w.1 as u32).sum()
    }

    /// Enough pages to see every node's run at least twice, and at least
    /// `min`.
    pub fn pages(&self, min: usize) -> usize {
        (2 * self.total() as usize + 7).max(min)
    }

    /// The full weight table (1 outside the set).
    pub fn table(&self) -> [u8; 64] {
        weight_table(&self.weights)
    }
}

/// The weight sets the tests run on a topology: on (DRAM, CXL) the documented
/// {3,1}, then equal, 255 on either or both sides, co-prime, and then
/// single-node masks; on three or more memory nodes one set over all of
/// them. With one memory node only the single-node sets.
pub fn weight_sets(topo: &node::Topology) -> Vec<WeightSet> {
    let mut v = Vec::new();
    let Some(d) = topo.dram_node().or_else(|| topo.memory.first().copied()) else {
        return v;
    };
    let c = topo
        .cxl_node()
        .or_else(|| topo.memory.iter().copied().find(|&n| n != d));
    if let Some(c) = c {
        for (a, b) in [
            (3, 1),
            (1, 1),
            (255, 1),
            (1, 255),
            (255, 255),
            (2, 5),
            (13, 7),
        ] {
            v.push(WeightSet::new(&[(d, a), (c, b)]));
        }
    }
    v.push(WeightSet::new(&[(d, 9)]));
    if let Some(c) = c {
        v.push(WeightSet::new(&[(c, 255)]));
    }
    if topo.memory.len() >= 3 {
        let all: Vec<(u32, u8)> = topo
            .memory
            .iter()
            .enumerate()
            .filter(|(_, &n)| n < 64)
            .map(|(i, &n)| (n, (i * 37 % 255 + 1) as u8))
            .collect();
        v.push(WeightSet::new(&all));
    }
    v
}

/// Compares the nodes `move_pages` reported with the expected ones, page
/// by page. On mismatch the error names the first few differing pages and
/// how many differ.
pub fn compare_nodes(got: &[i32], want: &[u32]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!(
            "{} pages queried, {} expected",
            got.len(),
            want.len()
        ));
    }
    let bad: Vec<usize> = (0..got.len())
        .filter(|&i| got[i] != want[i] as i32)
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    let first: Vec<String> = bad
        .iter()
        .take(4)
        .map(|&i| format!("page {i} on {}, expected {}", status_str(got[i]), want[i]))
        .collect();
    Err(format!(
        "{} of {} pages differ: {}",
        bad.len(),
        got.len(),
        first.join("; ")
    ))
}

/// Compares two observed sequences (e.g. kernel against tierkit).
pub fn compare_seqs(a_name: &str, a: &[i32], b_name: &str, b: &[i32]) -> Result<(), String> {
    if a.len() != b.len() {
        return Err(format!(
            "{a_name} has {} pages, {b_name} {}",
            a.len(),
            b.len()
        ));
    }
    let bad: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
    if bad.is_empty() {
        return Ok(());
    }
    let first: Vec<String> = bad
        .iter()
        .take(4)
        .map(|&i| {
            format!(
                "page {i}: {a_name} {} {b_name} {}",
                status_str(a[i]),
                status_str(b[i])
            )
        })
        .collect();
    Err(format!(
        "{} of {} pages differ: {}",
        bad.len(),
        a.len(),
        first.join("; ")
    ))
}

/// A `move_pages` status as text: the node, or the errno name.
pub fn status_str(s: i32) -> String {
    match s {
        s if s >= 0 => s.to_string(),
        s if s == -libc::ENOENT => "ENOENT(not present)".into(),
        s if s == -libc::EFAULT => "EFAULT".into(),
        s => format!("errno {}", -s),
    }
}

/// Pages per node: `(node, count)` ascending, negative statuses under -1.
pub fn per_node_counts(nodes: &[i32]) -> Vec<(i32, usize)> {
    let mut m = std::collections::BTreeMap::new();
    for &n in nodes {
        *m.entry(if n < 0 { -1 } else { n }).or_insert(0usize) += 1;
    }
    m.into_iter().collect()
}

/// One character per page: the node's digit (`a`.. from node 10), `?` for
/// a page with no node.
pub fn picture(nodes: &[i32]) -> String {
    nodes
        .iter()
        .map(|&n| match n {
            0..=9 => (b'0' + n as u8) as char,
            10..=35 => (b'a' + (n - 10) as u8) as char,
            _ => '?',
        })
        .collect()
}

/// Formats `(node, weight)` pairs: `w{0:3,1:1}`.
pub fn fmt_weights(weights: &[(u32, u8)]) -> String {
    let v: Vec<String> = weights.iter().map(|(n, w)| format!("{n}:{w}")).collect();
    format!("w{{{}}}", v.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_sequences_from_the_issue() {
        // nodes {0,1}, weights {3,1}: 0,0,0,1,0,0,0,1
        let t = weight_table(&[(0, 3), (1, 1)]);
        assert_eq!(
            expected_seq(true, 0b11, &t, 0, 8),
            vec![0, 0, 0, 1, 0, 0, 0, 1]
        );
        // nodes {1,3}, weights {2,5}: 1,1,3,3,3,3,3,1
        let t = weight_table(&[(1, 2), (3, 5)]);
        assert_eq!(
            expected_seq(true, 0b1010, &t, 0, 8),
            vec![1, 1, 3, 3, 3, 3, 3, 1]
        );
        // MPOL_INTERLEAVE ignores weights.
        assert_eq!(expected_seq(false, 0b1010, &t, 1, 4), vec![3, 1, 3, 1]);
        // 0 reads as 1.
        let mut z = [0u8; 64];
        z[0] = 2;
        assert_eq!(expected_seq(true, 0b11, &z, 0, 3), vec![0, 0, 1]);
    }

    #[test]
    fn sets() {
        let t = node::Topology {
            online: vec![0, 1],
            memory: vec![0, 1],
            cpu: vec![0],
        };
        let v = weight_sets(&t);
        assert_eq!(v[0], WeightSet::new(&[(0, 3), (1, 1)]));
        assert_eq!(v[0].name(), "{0,1} w{0:3,1:1}");
        assert_eq!(v[0].pages(256), 256);
        assert_eq!(v[4].total(), 510);
        assert_eq!(v[4].pages(256), 1027);
        assert!(v.iter().any(|s| s.nodemask == 0b01));
        assert!(v
            .iter()
            .any(|s| s.nodemask == 0b10 && s.weights == vec![(1, 255)]));
        let one = node::Topology {
            online: vec![0],
            memory: vec![0],
            cpu: vec![0],
        };
        assert_eq!(weight_sets(&one), vec![WeightSet::new(&[(0, 9)])]);
        let three = node::Topology {
            online: vec![0, 1, 2],
            memory: vec![0, 1, 2],
            cpu: vec![0],
        };
        assert_eq!(weight_sets(&three).last().unwrap().nodemask, 0b111);
    }

    #[test]
    fn compare() {
        assert!(compare_nodes(&[0, 1], &[0, 1]).is_ok());
        let e = compare_nodes(&[0, -libc::ENOENT], &[0, 1]).unwrap_err();
        assert!(e.contains("1 of 2 pages differ"), "{e}");
        assert!(e.contains("page 1 on ENOENT"), "{e}");
        assert!(compare_nodes(&[0], &[0, 1]).is_err());
        assert!(compare_seqs("kernel", &[0, 1], "tierkit", &[0, 1]).is_ok());
        let e = compare_seqs("kernel", &[0, 1], "tierkit", &[0, 0]).unwrap_err();
        assert!(e.contains("page 1: kernel 1 tierkit 0"), "{e}");
    }

    #[test]
    fn counts_and_picture() {
        assert_eq!(
            per_node_counts(&[0, 0, 1, -2]),
            vec![(-1, 1), (0, 2), (1, 1)]
        );
        assert_eq!(picture(&[0, 0, 0, 1, 10, -2]), "0001a?");
        assert_eq!(fmt_weights(&[(0, 3), (1, 1)]), "w{0:3,1:1}");
    }
}
