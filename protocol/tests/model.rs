//! Host tests of the bandwidth model (`src/model.rs`): the seed measurement
//! (the XSBench rates the model is fitted on, read from
//! Documentation/mm/bandwidth-model.md), and property tests of
//! `predict` and `recommend` against plain brute-force references written
//! straight from the definitions.
use proptest::prelude::*;
use tierkit_core::interleave::{Nodemask, Weights, MAX_NUMNODES};
use tierkit_protocol::model::*;

// ---------------------------------------------------------------------------
// Plain references
// ---------------------------------------------------------------------------

/// The prediction straight from the definition, for `(rate, weight)` pairs.
fn ref_predict(regime: Regime, nodes: &[(f64, u32)]) -> f64 {
    let total: u32 = nodes.iter().map(|n| n.1).sum();
    let terms = nodes.iter().map(|&(r, w)| (w as f64 / total as f64) / r);
    let t = match regime {
        Regime::Parallel => terms.fold(0.0, f64::max),
        Regime::Serial => terms.sum(),
    };
    1.0 / t
}

/// The best prediction over every non-empty subset of `nodes` and every
/// weight vector in 1..=max_w: (throughput, mask, weights).
fn brute_best(regime: Regime, nodes: &[(usize, f64)], max_w: u32) -> (f64, u64, Vec<u32>) {
    let n = nodes.len();
    let mut best = (0.0, 0u64, Vec::new());
    for subset in 1u32..(1 << n) {
        let idx: Vec<usize> = (0..n).filter(|i| subset >> i & 1 == 1).collect();
        let k = idx.len();
        let mut w = vec![1u32; k];
        loop {
            let pairs: Vec<(f64, u32)> =
                idx.iter().zip(&w).map(|(&i, &w)| (nodes[i].1, w)).collect();
            let p = ref_predict(regime, &pairs);
            if p > best.0 {
                let mask = idx.iter().fold(0u64, |m, &i| m | 1 << nodes[i].0);
                best = (p, mask, w.clone());
            }
            // Next weight vector (odometer).
            let mut j = 0;
            while j < k && w[j] == max_w {
                w[j] = 1;
                j += 1;
            }
            if j == k {
                break;
            }
            w[j] += 1;
        }
    }
    best
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs())
}

fn rates2(a: f64, b: f64) -> Rates {
    rates_of(&[(0, a), (1, b)])
}

fn w2(a: u8, b: u8) -> Weights {
    let mut t = [0u8; MAX_NUMNODES];
    t[0] = a;
    t[1] = b;
    Weights::from_table(t)
}

// ---------------------------------------------------------------------------
// The seed measurement (the XSBench rates the model is fitted on), read
// from its one statement: Documentation/mm/bandwidth-model.md's table
// `| seed policy | XSBench lookups/s |`, in M lookups/s.
// ---------------------------------------------------------------------------

/// The seed table's rate of `policy`, M lookups/s, from the doc.
fn seed(policy: &str) -> f64 {
    let doc = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../Documentation/mm/bandwidth-model.md"
    );
    let text = std::fs::read_to_string(doc).expect("Documentation/mm/bandwidth-model.md");
    let mut in_table = false;
    for line in text.lines() {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        if cells == ["seed policy", "XSBench lookups/s"] {
            in_table = true;
        } else if !line.trim_start().starts_with('|') {
            in_table = false;
        } else if in_table && cells[0] == policy {
            let v = cells[1].strip_suffix(" M").expect("a rate in M lookups/s");
            return v.parse().expect("a number");
        }
    }
    panic!("no seed row {policy:?} in {doc}")
}

fn dram_only() -> f64 {
    seed("DRAM only")
}

fn interleave_1_1() -> f64 {
    seed("1:1 interleave")
}

fn weighted_measured() -> f64 {
    seed("weighted interleave")
}

#[test]
fn seed_cxl_rate_from_one_to_one_interleave() {
    let cxl = infer_rate(Regime::Parallel, dram_only(), 0.5, interleave_1_1()).unwrap();
    assert!(close(cxl, 1.54, 1e-12), "{cxl}");
    // The model reproduces both measurements it was fitted on.
    let r = rates2(dram_only(), cxl);
    let both = Nodemask(0b11);
    assert!(close(
        predict(Regime::Parallel, &r, Nodemask(0b01), &w2(1, 1)),
        dram_only(),
        1e-12
    ));
    assert!(close(
        predict_interleave(Regime::Parallel, &r, both),
        interleave_1_1(),
        1e-12
    ));
}

#[test]
fn seed_weighted_ceiling_is_6_23_at_about_3_to_1() {
    let cxl = infer_rate(Regime::Parallel, dram_only(), 0.5, interleave_1_1()).unwrap();
    let r = rates2(dram_only(), cxl);
    let both = Nodemask(0b11);
    let ceil = ceiling(Regime::Parallel, &r, both);
    assert!(close(ceil, 6.23, 1e-12), "{ceil}");
    // The real-valued optimum splits traffic as the rates.
    let ratio = dram_only() / cxl;
    assert!((ratio - 3.05).abs() < 0.005, "{ratio}");

    // Integer weights 1..=255: about 3:1, within 0.1% of the ceiling.
    let rec = recommend(Regime::Parallel, &r, both, 255).unwrap();
    assert_eq!(rec.mask, both);
    let w = rec.weights[0] as f64 / rec.weights[1] as f64;
    assert!((2.9..=3.2).contains(&w), "weights {:?}", &rec.weights[..2]);
    assert!(
        rec.throughput <= ceil && close(rec.throughput, ceil, 1e-3),
        "{}",
        rec.throughput
    );
    assert!(close(rec.throughput, 6.23, 1e-3));

    // With small weights only (at most 4), exactly 3:1, at 6.16 M.
    let small = recommend(Regime::Parallel, &r, both, 4).unwrap();
    assert_eq!(&small.weights[..2], &[3, 1]);
    let p31 = predict(Regime::Parallel, &r, both, &w2(3, 1));
    assert!(close(small.throughput, p31, 1e-12));
    assert!((p31 - 6.16).abs() < 0.005, "{p31}");
}

#[test]
fn seed_measured_weighted_is_93_percent_of_the_ceiling() {
    let cxl = infer_rate(Regime::Parallel, dram_only(), 0.5, interleave_1_1()).unwrap();
    let ceil = ceiling(Regime::Parallel, &rates2(dram_only(), cxl), Nodemask(0b11));
    let frac = weighted_measured() / ceil;
    assert_eq!((frac * 100.0).round(), 93.0, "{frac}");
}

#[test]
fn seed_in_the_serial_regime_drops_the_cxl_node() {
    // Serial: 1/mixed = 0.5/dram + 0.5/r, so r = 2.29; spreading never pays.
    let cxl = infer_rate(Regime::Serial, dram_only(), 0.5, interleave_1_1()).unwrap();
    assert!((cxl - 2.292).abs() < 0.001, "{cxl}");
    let r = rates2(dram_only(), cxl);
    let rec = recommend(Regime::Serial, &r, Nodemask(0b11), 255).unwrap();
    assert_eq!(rec.mask, Nodemask(0b01));
    assert_eq!(rec.weights[0], 1);
    assert!(close(rec.throughput, dram_only(), 1e-12));
    assert!(close(
        ceiling(Regime::Serial, &r, Nodemask(0b11)),
        dram_only(),
        1e-12
    ));
    // The seed's weighted rate is impossible in the serial regime: above any node.
    assert!(weighted_measured() > ceiling(Regime::Serial, &r, Nodemask(0b11)));
}

// ---------------------------------------------------------------------------
// Unit tests
// ---------------------------------------------------------------------------

#[test]
fn regimes_on_equal_nodes() {
    // Two equal nodes: parallel doubles, serial stays.
    let r = rates2(10.0, 10.0);
    let both = Nodemask(0b11);
    assert!(close(
        predict_interleave(Regime::Parallel, &r, both),
        20.0,
        1e-12
    ));
    assert!(close(
        predict_interleave(Regime::Serial, &r, both),
        10.0,
        1e-12
    ));
    assert_eq!(Regime::from_name("serial"), Some(Regime::Serial));
    assert_eq!(Regime::Parallel.name(), "parallel");
    assert_eq!(Regime::from_name("x"), None);
}

#[test]
fn amounts_are_normalised_and_bad_placements_predict_zero() {
    let r = rates2(4.0, 1.0);
    let mut pages = [0.0; MAX_NUMNODES];
    pages[0] = 300.0;
    pages[1] = 100.0;
    let p = predict_amounts(Regime::Serial, &r, &pages);
    assert!(close(p, 1.0 / (0.75 / 4.0 + 0.25 / 1.0), 1e-12));
    // Traffic on a node without a rate.
    pages[5] = 1.0;
    assert_eq!(predict_amounts(Regime::Serial, &r, &pages), 0.0);
    assert_eq!(
        predict_amounts(Regime::Parallel, &r, &[0.0; MAX_NUMNODES]),
        0.0
    );
    assert_eq!(
        predict(Regime::Parallel, &r, Nodemask::EMPTY, &Weights::new()),
        0.0
    );
}

#[test]
fn fractions_follow_the_weights() {
    let f = fractions(
        Nodemask(0b101),
        &Weights::from_table({
            let mut t = [0u8; MAX_NUMNODES];
            t[0] = 21;
            t[2] = 10;
            t[1] = 200; // not in the mask
            t
        }),
    );
    assert!(close(f[0], 21.0 / 31.0, 1e-15));
    assert_eq!(f[1], 0.0);
    assert!(close(f[2], 10.0 / 31.0, 1e-15));
}

#[test]
fn stream_and_latency_rates() {
    assert!(close(
        stream_rate(10.0, 5.0, 1, 1),
        2.0 / (0.1 + 0.2),
        1e-12
    ));
    assert!(close(
        stream_rate(10.0, 5.0, 2, 1),
        3.0 / (0.2 + 0.2),
        1e-12
    ));
    assert!(close(stream_rate(10.0, 0.0, 1, 0), 10.0, 1e-12));
    assert_eq!(stream_rate(10.0, 0.0, 1, 1), 0.0);
    assert_eq!(stream_rate(1.0, 1.0, 0, 0), 0.0);
    assert!(close(latency_rate(4.69, 100.0, 250.0), 1.876, 1e-12));
    assert_eq!(latency_rate(4.69, 0.0, 250.0), 0.0);
}

#[test]
fn infer_rate_edge_cases() {
    // Parallel: A alone is the bottleneck, nothing to learn about B.
    assert_eq!(infer_rate(Regime::Parallel, 4.0, 0.5, 8.0), None);
    assert_eq!(infer_rate(Regime::Serial, 4.0, 0.5, 8.0), None);
    assert_eq!(infer_rate(Regime::Serial, 4.0, 0.0, 2.0), None);
    assert_eq!(infer_rate(Regime::Serial, 4.0, 1.0, 2.0), None);
    assert_eq!(infer_rate(Regime::Serial, 0.0, 0.5, 2.0), None);
}

#[test]
fn recommend_drops_a_node_too_slow_for_one_page_per_cycle() {
    // 1000 against 1: even 255:1 sends 1/256 of the traffic to the slow
    // node, which then takes 256 / 1 time units per unit of work.
    let r = rates2(1000.0, 1.0);
    let rec = recommend(Regime::Parallel, &r, Nodemask(0b11), 255).unwrap();
    assert_eq!(rec.mask, Nodemask(0b01));
    assert!(close(rec.throughput, 1000.0, 1e-12));
    // Nodes without rates are never picked; none at all is None.
    let r = rates_of(&[(3, 5.0)]);
    let rec = recommend(Regime::Parallel, &r, Nodemask(0b1011), 255).unwrap();
    assert_eq!(rec.mask, Nodemask(0b1000));
    assert_eq!(recommend(Regime::Parallel, &r, Nodemask(0b11), 255), None);
    assert_eq!(recommend(Regime::Parallel, &r, Nodemask(0b1000), 0), None);
}

#[test]
fn recommend_equal_nodes() {
    // Parallel: 1:1 over both; serial: one node (fewest nodes on a tie).
    let r = rates2(7.0, 7.0);
    let p = recommend(Regime::Parallel, &r, Nodemask(0b11), 255).unwrap();
    assert_eq!((p.mask, &p.weights[..2]), (Nodemask(0b11), &[1u8, 1][..]));
    let s = recommend(Regime::Serial, &r, Nodemask(0b11), 255).unwrap();
    assert_eq!((s.mask, s.weights[0]), (Nodemask(0b01), 1));
}

#[test]
fn recommend_three_nodes_parallel_is_proportional() {
    let r = rates_of(&[(0, 20.0), (2, 10.0), (5, 5.0)]);
    let rec = recommend(Regime::Parallel, &r, Nodemask(0b100101), 255).unwrap();
    assert_eq!(rec.mask, Nodemask(0b100101));
    assert_eq!((rec.weights[0], rec.weights[2], rec.weights[5]), (4, 2, 1));
    assert!(close(rec.throughput, 35.0, 1e-12));
    assert_eq!(rec.total(), 7);
    assert!(close(
        predict(Regime::Parallel, &r, rec.mask, &rec.weight_table()),
        35.0,
        1e-12
    ));
}

// ---------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------

/// Up to 3 distinct nodes below 64 with rates in (0.01, 1000).
fn nodes_strategy() -> impl Strategy<Value = Vec<(usize, f64)>> {
    prop::collection::btree_map(0usize..64, 0.01f64..1000.0, 1..=3)
        .prop_map(|m| m.into_iter().collect())
}

/// Rates drawn from a few values, so that ties and exact ratios come up.
fn nodes_with_ties() -> impl Strategy<Value = Vec<(usize, f64)>> {
    prop::collection::btree_map(
        0usize..8,
        prop::sample::select(vec![1.0, 2.0, 3.0, 4.69, 1.54, 10.0, 0.05, 13.2]),
        1..=3,
    )
    .prop_map(|m| m.into_iter().collect())
}

fn regime_strategy() -> impl Strategy<Value = Regime> {
    prop_oneof![Just(Regime::Parallel), Just(Regime::Serial)]
}

fn check_against_brute(
    regime: Regime,
    nodes: &[(usize, f64)],
    max_w: u8,
) -> Result<(), TestCaseError> {
    let rates = rates_of(nodes);
    let cand = Nodemask(nodes.iter().fold(0, |m, n| m | 1u64 << n.0));
    let rec = recommend(regime, &rates, cand, max_w).unwrap();
    let (best, _, _) = brute_best(regime, nodes, max_w as u32);
    prop_assert!(
        close(rec.throughput, best, 1e-9),
        "recommend {} ({:?} {:?}) brute {}",
        rec.throughput,
        rec.mask,
        &rec.weights[..8],
        best
    );
    // Its mask is a subset of the candidates; its weights are in range and
    // reproduce its prediction through the plain reference.
    prop_assert!(!rec.mask.is_empty() && rec.mask.0 & !cand.0 == 0);
    let pairs: Vec<(f64, u32)> = rec
        .mask
        .iter()
        .map(|n| {
            let w = rec.weights[n];
            assert!((1..=max_w).contains(&w));
            (rates[n], w as u32)
        })
        .collect();
    prop_assert!(close(ref_predict(regime, &pairs), rec.throughput, 1e-12));
    for n in 0..MAX_NUMNODES {
        if !rec.mask.contains(n) {
            prop_assert_eq!(rec.weights[n], 0);
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn predict_matches_the_reference(
        regime in regime_strategy(),
        nodes in nodes_strategy(),
        ws in prop::collection::vec(1u8..=255, 3),
    ) {
        let rates = rates_of(&nodes);
        let mut t = [0u8; MAX_NUMNODES];
        let mut mask = Nodemask::EMPTY;
        let mut pairs = Vec::new();
        for (i, &(n, r)) in nodes.iter().enumerate() {
            t[n] = ws[i];
            mask = mask.with(n);
            pairs.push((r, ws[i] as u32));
        }
        let p = predict(regime, &rates, mask, &Weights::from_table(t));
        prop_assert!(close(p, ref_predict(regime, &pairs), 1e-12));
        // Never above the ceiling; parallel never below serial.
        prop_assert!(p <= ceiling(regime, &rates, mask) * (1.0 + 1e-12));
        let other = predict(Regime::Parallel, &rates, mask, &Weights::from_table(t));
        let serial = predict(Regime::Serial, &rates, mask, &Weights::from_table(t));
        prop_assert!(other >= serial * (1.0 - 1e-12));
        // Scaling every weight changes nothing.
        if ws.iter().all(|&w| w <= 127) {
            let mut t2 = t;
            for w in t2.iter_mut() {
                *w *= 2;
            }
            let p2 = predict(regime, &rates, mask, &Weights::from_table(t2));
            prop_assert!(close(p, p2, 1e-12));
        }
    }

    #[test]
    fn recommend_matches_brute_force_small_weights(
        regime in regime_strategy(),
        nodes in nodes_strategy(),
        max_w in 1u8..=7,
    ) {
        check_against_brute(regime, &nodes, max_w)?;
    }

    #[test]
    fn recommend_matches_brute_force_with_ties(
        regime in regime_strategy(),
        nodes in nodes_with_ties(),
        max_w in 1u8..=9,
    ) {
        check_against_brute(regime, &nodes, max_w)?;
    }

    #[test]
    fn infer_rate_inverts_predict(
        regime in regime_strategy(),
        ra in 0.01f64..1000.0,
        rb in 0.01f64..1000.0,
        wa in 1u8..=255,
        wb in 1u8..=255,
    ) {
        let r = rates2(ra, rb);
        let mixed = predict(regime, &r, Nodemask(0b11), &w2(wa, wb));
        let fa = wa as f64 / (wa as f64 + wb as f64);
        let got = infer_rate(regime, ra, fa, mixed);
        let b_bound = (1.0 - fa) / rb > fa / ra * (1.0 + 1e-9);
        match regime {
            Regime::Serial => {
                // Recoverable unless B's term is lost in rounding.
                if (1.0 - fa) / rb > 1e-6 * fa / ra {
                    let got = got.unwrap();
                    prop_assert!(close(got, rb, 1e-6), "{got} {rb}");
                }
            }
            Regime::Parallel if b_bound => prop_assert!(close(got.unwrap(), rb, 1e-9)),
            Regime::Parallel => {}
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Two nodes with the full weight range: 65,025 weight pairs each.
    #[test]
    fn recommend_matches_brute_force_full_range_two_nodes(
        regime in regime_strategy(),
        a in 0.01f64..1000.0,
        b in 0.01f64..1000.0,
    ) {
        check_against_brute(regime, &[(0, a), (1, b)], 255)?;
    }
}
