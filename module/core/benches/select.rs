//! ns per node selection for `MPOL_WEIGHTED_INTERLEAVE`: tierkit's
//! [`Selector`] (prefix sums, division-free remainder, binary search) against
//! a straight port of the kernel's `weighted_interleave_nid` walk
//! (mm/mempolicy.c), which sums the weights of the mask and then walks it on
//! every call.
//!
//! Run: `cargo bench -p tierkit-core --bench select`. Criterion reports each
//! case; a summary table with the walk/selector ratio follows, measured side
//! by side in the same run.

use criterion::{criterion_group, Criterion, Throughput};
use std::hint::black_box;
use std::time::{Duration, Instant};
use tierkit_core::interleave::{
    bench_sum_selector, weighted_interleave_nid_ref, Nodemask, Selector, Weights,
};

/// ilx values per measured batch.
const BATCH: usize = 1024;

struct Case {
    name: &'static str,
    mask: Nodemask,
    weights: Weights,
}

fn cases() -> Vec<Case> {
    let mut mixed = [0u8; 64];
    let mut x: u32 = 12345;
    for w in mixed.iter_mut() {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        *w = 1 + ((x >> 16) % 255) as u8;
    }
    let table = |pairs: &[(usize, u8)]| {
        let mut w = Weights::new();
        for &(n, v) in pairs {
            w.set(n, v).unwrap();
        }
        w
    };
    vec![
        Case {
            name: "2 nodes {3,1}",
            mask: Nodemask(0b11),
            weights: table(&[(0, 3), (1, 1)]),
        },
        Case {
            name: "2 nodes {255,255}",
            mask: Nodemask(0b11),
            weights: table(&[(0, 255), (1, 255)]),
        },
        Case {
            name: "4 nodes {5,3,2,1}",
            mask: Nodemask(0b1111),
            weights: table(&[(0, 5), (1, 3), (2, 2), (3, 1)]),
        },
        Case {
            name: "8 nodes all 1",
            mask: Nodemask(0xff),
            weights: Weights::new(),
        },
        Case {
            name: "64 nodes all 255",
            mask: Nodemask(u64::MAX),
            weights: Weights::from_table([255; 64]),
        },
        Case {
            name: "64 nodes mixed 1..255",
            mask: Nodemask(u64::MAX),
            weights: Weights::from_table(mixed),
        },
    ]
}

/// Pseudo-random ilx values: half arbitrary u64, half anonymous-mapping-like
/// virtual page numbers.
fn ilxs() -> Vec<u64> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..BATCH)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i % 2 == 0 {
                x
            } else {
                0x0007_f000_0000 + (x >> 29)
            }
        })
        .collect()
}

fn walk_batch(mask: Nodemask, w: &Weights, ilx: &[u64]) -> u64 {
    let mut s = 0u64;
    for &i in ilx {
        s = s.wrapping_add(weighted_interleave_nid_ref(mask, w, black_box(i)).unwrap_or(0) as u64);
    }
    s
}

fn sel_batch(sel: &Selector, ilx: &[u64]) -> u64 {
    let mut s = 0u64;
    for &i in ilx {
        s = s.wrapping_add(sel.node_for_ilx(black_box(i)) as u64);
    }
    s
}

fn fill_batch(sel: &Selector, start: u64, out: &mut [u8]) -> u64 {
    sel.fill(black_box(start), out);
    out.iter().map(|&n| n as u64).sum()
}

fn bench(c: &mut Criterion) {
    let ilx = ilxs();
    let mut out = vec![0u8; BATCH];
    for case in cases() {
        let sel = Selector::new(case.mask, &case.weights).unwrap();
        assert_eq!(
            walk_batch(case.mask, &case.weights, &ilx),
            sel_batch(&sel, &ilx)
        );
        let mut g = c.benchmark_group(case.name);
        g.throughput(Throughput::Elements(BATCH as u64));
        g.bench_function("kernel walk", |b| {
            b.iter(|| walk_batch(case.mask, &case.weights, black_box(&ilx)))
        });
        g.bench_function("selector", |b| b.iter(|| sel_batch(&sel, black_box(&ilx))));
        g.bench_function("selector fill (consecutive)", |b| {
            b.iter(|| fill_batch(&sel, black_box(0x0007_f123_4567), &mut out))
        });
        g.finish();
    }
}

/// ns per call of `f` processing `BATCH` elements, best of a few rounds.
fn ns_per(mut f: impl FnMut() -> u64, budget: Duration) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < budget / 5 {
            black_box(f());
            n += 1;
        }
        let ns = start.elapsed().as_nanos() as f64 / (n * BATCH as u64) as f64;
        best = best.min(ns);
    }
    best
}

fn summary() {
    let ilx = ilxs();
    let mut out = vec![0u8; BATCH];
    let budget = Duration::from_millis(300);
    println!();
    println!("ns per node selection (best of 5, {BATCH} pseudo-random ilx per batch)");
    println!(
        "{:<24} {:>12} {:>12} {:>9} {:>12}",
        "case", "kernel walk", "selector", "ratio", "fill/page"
    );
    for case in cases() {
        let sel = Selector::new(case.mask, &case.weights).unwrap();
        let walk = ns_per(
            || walk_batch(case.mask, &case.weights, black_box(&ilx)),
            budget,
        );
        let fast = ns_per(|| sel_batch(&sel, black_box(&ilx)), budget);
        let fill = ns_per(
            || fill_batch(&sel, black_box(0x0007_f123_4567), &mut out),
            budget,
        );
        println!(
            "{:<24} {:>10.2}ns {:>10.2}ns {:>8.1}x {:>10.2}ns",
            case.name,
            walk,
            fast,
            walk / fast,
            fill
        );
    }
    // Keep bench_sum_selector (the in-kernel bench helper) exercised.
    let sel = Selector::new(Nodemask(0b11), &Weights::new()).unwrap();
    black_box(bench_sum_selector(&sel, 0, 16));
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // `cargo bench` passes --bench; `cargo test --benches` does not, and
    // then criterion only smoke-tests each case once: skip the timed table.
    if std::env::args().any(|a| a == "--bench") {
        summary();
    }
}
