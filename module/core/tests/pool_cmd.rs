//! Host tests of `tierkit_core::pool_cmd` against plain models: the parser
//! against `str::split_whitespace` + `u32::from_str`, and the refill
//! choice against a sort.

use proptest::prelude::*;
use tierkit_core::pool_cmd::{
    for_each_pool_line, max_pool_count, next_refill, parse_pool_line, PoolLineError, PoolNode,
    PoolWriteError, Refill,
};

/// The model parser: two fields of ASCII digits only, each a u32.
fn model_line(l: &str) -> Option<(u32, u32)> {
    let f: Vec<&str> = l.split_ascii_whitespace().collect();
    if f.len() != 2 || !f.iter().all(|x| x.bytes().all(|b| b.is_ascii_digit())) {
        return None;
    }
    Some((f[0].parse().ok()?, f[1].parse().ok()?))
}

proptest! {
    #[test]
    fn line_matches_model(l in "[ \t0-9a-z+-]{0,24}") {
        prop_assert_eq!(parse_pool_line(&l).ok(), model_line(&l));
    }

    #[test]
    fn line_round_trips(nid: u32, count: u32, sp in "[ \t]{1,3}") {
        let line = format!("{nid}{sp}{count}\n");
        prop_assert_eq!(parse_pool_line(&line), Ok((nid, count)));
    }

    /// A write applies all its lines in order, or nothing.
    #[test]
    fn write_is_all_or_nothing(lines in proptest::collection::vec("[0-9]{1,2} [0-9]{1,2}|x|", 0..6), limit in 0u32..100) {
        let buf = lines.join("\n");
        let mut applied = Vec::new();
        let r = for_each_pool_line(&buf, |_, c| if c <= limit { Ok(()) } else { Err(c) }, |n, c| applied.push((n, c)));
        let content: Vec<&String> = lines.iter().filter(|l| !l.trim().is_empty()).collect();
        let parsed: Vec<Option<(u32, u32)>> = content.iter().map(|l| model_line(l)).collect();
        if content.is_empty() {
            prop_assert_eq!(r, Err(PoolWriteError::Line(PoolLineError::Empty)));
            prop_assert!(applied.is_empty());
        } else if parsed.iter().any(Option::is_none) {
            prop_assert_eq!(r, Err(PoolWriteError::Line(PoolLineError::Malformed)));
            prop_assert!(applied.is_empty());
        } else if let Some(&(_, c)) = parsed.iter().flatten().find(|(_, c)| *c > limit) {
            prop_assert_eq!(r, Err(PoolWriteError::Check(c)));
            prop_assert!(applied.is_empty());
        } else {
            prop_assert_eq!(r, Ok(()));
            prop_assert_eq!(applied, parsed.into_iter().flatten().collect::<Vec<_>>());
        }
    }

    /// What fits less one range; a count past `u32::MAX` (a node of more
    /// than 2^32 ranges: never with 1 GiB ranges) is `u32::MAX`.
    #[test]
    fn bound_leaves_a_range(cap in 0u64..1 << 40, range in 1u64..1 << 20) {
        let n = u64::from(max_pool_count(cap, range));
        prop_assert!(n == 0 || (n + 1) * range <= cap);
        if cap / range <= u64::from(u32::MAX) {
            prop_assert!((n + 2) * range > cap);
        } else {
            prop_assert_eq!(n, u64::from(u32::MAX));
        }
    }

    /// The choice is the model's: among nodes with memory, short and not
    /// paused, the fewest ready then lowest id; else the earliest pause
    /// end among short nodes; else waiting for memory if a node without
    /// memory is short; else idle.
    #[test]
    fn refill_matches_model(
        nodes in proptest::collection::vec((0u32..4, 0u32..4, 0u64..20, any::<bool>()), 0..8),
        now in 0u64..20,
    ) {
        let nodes: Vec<PoolNode> = nodes.into_iter().map(|(target, ready, p, m)| PoolNode {
            target, ready, paused_until_ns: p, has_memory: m,
        }).collect();
        let mut short: Vec<(usize, &PoolNode)> = nodes.iter().enumerate()
            .filter(|(_, n)| n.has_memory && n.ready < n.target).collect();
        let mut due: Vec<(u32, usize)> = short.iter()
            .filter(|(_, n)| n.paused_until_ns <= now).map(|&(i, n)| (n.ready, i)).collect();
        due.sort();
        short.sort_by_key(|(_, n)| n.paused_until_ns);
        let want = match (due.first(), short.first()) {
            (Some(&(_, i)), _) => Refill::Now(i),
            (None, Some((_, n))) => Refill::At(n.paused_until_ns),
            (None, None) if nodes.iter().any(|n| !n.has_memory && n.ready < n.target) => {
                Refill::NoMemory
            }
            (None, None) => Refill::Idle,
        };
        prop_assert_eq!(next_refill(&nodes, now), want);
    }
}

#[test]
fn seed_cases() {
    // A 4 GiB node keeps at most 3 ranges of 1 GiB; 1 GiB keeps none.
    assert_eq!(max_pool_count(4 << 18, 1 << 18), 3);
    assert_eq!(max_pool_count(1 << 18, 1 << 18), 0);
    assert_eq!(max_pool_count(123, 0), 0);
    let n = |target, ready| PoolNode {
        target,
        ready,
        paused_until_ns: 0,
        has_memory: true,
    };
    assert_eq!(next_refill(&[n(2, 1), n(2, 0)], 5), Refill::Now(1));
    assert_eq!(next_refill(&[n(1, 1), n(0, 0)], 5), Refill::Idle);
    // A node that went offline short of its target is looked at again.
    let offline = PoolNode {
        has_memory: false,
        ..n(2, 0)
    };
    assert_eq!(next_refill(&[n(1, 1), offline], 5), Refill::NoMemory);
}
