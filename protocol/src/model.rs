//! The bandwidth model: what a placement does to a workload's throughput,
//! and which nodemask and weights maximise it.
//!
//! A workload's cost on node `i` is its **rate** `r_i`: the throughput it
//! would reach with all of its memory traffic on that node (GB/s for a
//! streaming kernel, lookups/s for a latency-bound one; any unit, as long as
//! every node uses the same). A placement sends the fraction `f_i` of the
//! traffic to node `i` (for weighted interleave `f_i = w_i / Σ w`, for a
//! placement already made the node's share of the pages). The time per unit
//! of work is then, in the two regimes:
//!
//! - [`Regime::Parallel`]: the memory controllers work at once, as on
//!   hardware: `t = max_i f_i / r_i`. Spreading traffic adds bandwidth; the
//!   continuous optimum is `f_i ∝ r_i` with throughput `Σ r_i`.
//! - [`Regime::Serial`]: one accessor pays each access in turn, as under
//!   emulation (QEMU's CXL window): `t = Σ_i f_i / r_i`, a weighted harmonic
//!   mean of the rates. Spreading never helps; the optimum is the fastest
//!   node alone.
//!
//! and the predicted throughput is `1 / t`.
//!
//! [`recommend`] finds the nodemask and integer weights (1..=`max_weight`,
//! the kernel allows 1..=255) that maximise the prediction, exactly:
//! nodes may be left out of the mask, which matters even in the parallel
//! regime, since a node in the mask takes at least one page per cycle.
//!
//! Host only: this file uses `f64`, so unlike `interleave.rs` it is not
//! compiled into `tierkit.ko` (the kernel has no floating point). It uses
//! `core::` only and allocates nothing, like the rest of the crate.

use tierkit_core::interleave::{Nodemask, Weights, MAX_NUMNODES};

/// How per-node times combine (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Regime {
    /// `t = max_i f_i / r_i`: nodes serve their traffic at the same time.
    Parallel,
    /// `t = Σ_i f_i / r_i`: every access is paid in turn.
    Serial,
}

impl Regime {
    /// `"parallel"` or `"serial"`, the spelling of reports.
    pub const fn name(self) -> &'static str {
        match self {
            Regime::Parallel => "parallel",
            Regime::Serial => "serial",
        }
    }

    /// The inverse of [`Regime::name`].
    pub fn from_name(s: &str) -> Option<Regime> {
        match s {
            "parallel" => Some(Regime::Parallel),
            "serial" => Some(Regime::Serial),
            _ => None,
        }
    }
}

/// Per-node rates, indexed by node id; 0 (or anything not positive and
/// finite) means "no figure": such a node is never recommended, and a
/// placement that puts traffic there predicts 0.
pub type Rates = [f64; MAX_NUMNODES];

fn usable(r: f64) -> bool {
    r.is_finite() && r > 0.0
}

/// The predicted throughput for a placement given as per-node amounts
/// (fractions, or page counts: they are normalised by their sum). 0 if the
/// amounts are all 0 or put traffic on a node without a usable rate.
/// Negative or non-finite amounts count as 0.
pub fn predict_amounts(regime: Regime, rates: &Rates, amounts: &[f64; MAX_NUMNODES]) -> f64 {
    let mut total = 0.0;
    for &a in amounts.iter() {
        if a.is_finite() && a > 0.0 {
            total += a;
        }
    }
    if total <= 0.0 || !total.is_finite() {
        return 0.0;
    }
    let mut t = 0.0f64;
    for (&a, &r) in amounts.iter().zip(rates.iter()) {
        if !(a.is_finite() && a > 0.0) {
            continue;
        }
        if !usable(r) {
            return 0.0;
        }
        let term = (a / total) / r;
        t = match regime {
            Regime::Parallel => {
                if term > t {
                    term
                } else {
                    t
                }
            }
            Regime::Serial => t + term,
        };
    }
    if t > 0.0 {
        1.0 / t
    } else {
        0.0
    }
}

/// The per-node fractions of traffic that weighted interleave over `mask`
/// with `weights` gives: `w_i / Σ w` for the nodes of the mask, 0 elsewhere
/// (a whole number of interleave cycles; `Weights` reads 0 as 1, as the
/// kernel does).
pub fn fractions(mask: Nodemask, weights: &Weights) -> [f64; MAX_NUMNODES] {
    let mut f = [0.0; MAX_NUMNODES];
    let total = weights.total(mask);
    if total == 0 {
        return f;
    }
    for nid in mask.iter() {
        if let Some(slot) = f.get_mut(nid) {
            *slot = f64::from(weights.get(nid)) / f64::from(total);
        }
    }
    f
}

/// The predicted throughput of weighted interleave over `mask` with
/// `weights` (0 for an empty mask).
pub fn predict(regime: Regime, rates: &Rates, mask: Nodemask, weights: &Weights) -> f64 {
    predict_amounts(regime, rates, &fractions(mask, weights))
}

/// The predicted throughput of `MPOL_INTERLEAVE` over `mask` (every weight
/// 1).
pub fn predict_interleave(regime: Regime, rates: &Rates, mask: Nodemask) -> f64 {
    predict(regime, rates, mask, &Weights::new())
}

/// The best any split of the traffic over `mask` can do, with real-valued
/// fractions: `Σ r_i` (parallel, at `f_i ∝ r_i`) or `max r_i` (serial, the
/// fastest node alone). Nodes without a usable rate are ignored.
pub fn ceiling(regime: Regime, rates: &Rates, mask: Nodemask) -> f64 {
    let mut acc = 0.0f64;
    for nid in mask.iter() {
        let r = rates.get(nid).copied().unwrap_or(0.0);
        if !usable(r) {
            continue;
        }
        acc = match regime {
            Regime::Parallel => acc + r,
            Regime::Serial => {
                if r > acc {
                    r
                } else {
                    acc
                }
            }
        };
    }
    acc
}

/// The rate of node B inferred from node A's rate `rate_a` and a measured
/// throughput `mixed` of a placement that puts the fraction `frac_a`
/// (0 < frac_a < 1) of the traffic on A and the rest on B.
///
/// - Serial: `1/mixed = frac_a/rate_a + (1-frac_a)/rate_b`.
/// - Parallel: `1/mixed = max(frac_a/rate_a, (1-frac_a)/rate_b)`; B's term
///   must be the larger one (`mixed < rate_a / frac_a`), else the
///   measurement says nothing about B beyond a lower bound.
///
/// `None` when the inputs do not determine a positive, finite rate.
///
/// The seed measurement (Documentation/mm/bandwidth-model.md): from DRAM
/// alone and 1:1 interleave, in the parallel regime the CXL node's rate is
/// half the interleaved one (`tests/model.rs`).
pub fn infer_rate(regime: Regime, rate_a: f64, frac_a: f64, mixed: f64) -> Option<f64> {
    if !(usable(rate_a) && usable(mixed) && frac_a > 0.0 && frac_a < 1.0) {
        return None;
    }
    let frac_b = 1.0 - frac_a;
    let rate_b = match regime {
        Regime::Serial => {
            let left = 1.0 / mixed - frac_a / rate_a;
            if left <= 0.0 {
                return None;
            }
            frac_b / left
        }
        Regime::Parallel => {
            if frac_a / rate_a >= 1.0 / mixed {
                return None;
            }
            frac_b * mixed
        }
    };
    usable(rate_b).then_some(rate_b)
}

/// The rate of a streaming kernel that reads `reads` and writes `writes`
/// arrays per element, from a node's read and write bandwidth: the time per
/// element is `reads/read_bw + writes/write_bw` and the kernel counts
/// `reads + writes` arrays of traffic (STREAM's convention), so
/// `(reads + writes) / (reads/read_bw + writes/write_bw)`. 0 if a needed
/// bandwidth is not usable.
pub fn stream_rate(read_bw: f64, write_bw: f64, reads: u32, writes: u32) -> f64 {
    let (nr, nw) = (f64::from(reads), f64::from(writes));
    if reads + writes == 0 || (reads > 0 && !usable(read_bw)) || (writes > 0 && !usable(write_bw)) {
        return 0.0;
    }
    let mut t = 0.0;
    if reads > 0 {
        t += nr / read_bw;
    }
    if writes > 0 {
        t += nw / write_bw;
    }
    (nr + nw) / t
}

/// The rate of a latency-bound kernel on a node with load latency
/// `latency`, given its rate `anchor_rate` on a node with latency
/// `anchor_latency`: the time per unit of work scales with the latency.
/// 0 if an input is not usable.
pub fn latency_rate(anchor_rate: f64, anchor_latency: f64, latency: f64) -> f64 {
    if !(usable(anchor_rate) && usable(anchor_latency) && usable(latency)) {
        return 0.0;
    }
    anchor_rate * anchor_latency / latency
}

/// A recommended placement: the nodemask, a weight per node of the mask
/// (0 outside it), and the predicted throughput.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Recommendation {
    pub mask: Nodemask,
    /// `weights[n]`: the weight of node `n`, in `1..=max_weight` for the
    /// nodes of the mask, 0 elsewhere.
    pub weights: [u8; MAX_NUMNODES],
    /// [`predict`] for this mask and these weights.
    pub throughput: f64,
}

impl Recommendation {
    /// The weights as a [`Weights`] table (nodes outside the mask read as 1,
    /// and do not matter).
    pub fn weight_table(&self) -> Weights {
        Weights::from_table(self.weights)
    }

    /// Σ of the weights: one interleave cycle.
    pub fn total(&self) -> u32 {
        self.weights.iter().map(|&w| u32::from(w)).sum()
    }
}

/// Relative tolerance under which two predictions count as equal.
const TIE: f64 = 1e-9;

/// Whether `a` is a strictly better candidate than `b`: a higher prediction
/// (beyond [`TIE`]); on a tie, fewer nodes; then a shorter cycle; then the
/// lower nodemask; then the lexicographically smaller weights.
fn better(a: &Recommendation, b: &Recommendation) -> bool {
    let scale = if a.throughput > b.throughput {
        a.throughput
    } else {
        b.throughput
    };
    if a.throughput > b.throughput + TIE * scale {
        return true;
    }
    if b.throughput > a.throughput + TIE * scale {
        return false;
    }
    let (na, nb) = (a.mask.weight(), b.mask.weight());
    if na != nb {
        return na < nb;
    }
    let (ta, tb) = (a.total(), b.total());
    if ta != tb {
        return ta < tb;
    }
    if a.mask.0 != b.mask.0 {
        return a.mask.0 < b.mask.0;
    }
    a.weights < b.weights
}

/// Divides the weights of `mask` by their greatest common divisor (the
/// prediction is unchanged: it depends on the ratios only).
fn reduce(mask: Nodemask, w: &mut [u8; MAX_NUMNODES]) {
    let mut g: u32 = 0;
    for nid in mask.iter() {
        let mut a = u32::from(w[nid & (MAX_NUMNODES - 1)]);
        let mut b = g;
        while b != 0 {
            let r = a % b;
            a = b;
            b = r;
        }
        g = a;
    }
    if g > 1 {
        for nid in mask.iter() {
            let slot = &mut w[nid & (MAX_NUMNODES - 1)];
            *slot = (u32::from(*slot) / g) as u8;
        }
    }
}

fn candidate(
    regime: Regime,
    rates: &Rates,
    mask: Nodemask,
    mut w: [u8; MAX_NUMNODES],
) -> Recommendation {
    reduce(mask, &mut w);
    let throughput = predict(regime, rates, mask, &Weights::from_table(w));
    Recommendation {
        mask,
        weights: w,
        throughput,
    }
}

/// The best weights for a fixed `mask` of usable nodes (see [`recommend`]).
fn best_for_mask(
    regime: Regime,
    rates: &Rates,
    mask: Nodemask,
    max_weight: u8,
) -> Option<Recommendation> {
    let mut best: Option<Recommendation> = None;
    let mut consider = |c: Recommendation| {
        if best.as_ref().is_none_or(|b| better(&c, b)) {
            best = Some(c);
        }
    };
    match regime {
        Regime::Parallel => {
            // Some node k is the bottleneck at weight m: t = r_k / m is the
            // throughput per unit of weight, and every other node can take
            // up to floor(r_i / t) units without becoming slower. Trying
            // every (k, m) therefore finds a vector at least as good as the
            // optimum (each weight of the optimum is at most ours, and our
            // bottleneck is no worse), so the best candidate is optimal.
            for k in mask.iter() {
                let rk = rates[k & (MAX_NUMNODES - 1)];
                for m in 1..=max_weight {
                    let mut w = [0u8; MAX_NUMNODES];
                    for i in mask.iter() {
                        let v = if i == k {
                            m
                        } else {
                            let ri = rates[i & (MAX_NUMNODES - 1)];
                            // floor(r_i * m / r_k), clamped to 1..=max.
                            let x = ri * f64::from(m) / rk;
                            // Guard against x = 2.9999999 for an exact 3.
                            let x = x * (1.0 + 4.0 * f64::EPSILON);
                            if x >= f64::from(max_weight) {
                                max_weight
                            } else if x < 1.0 {
                                1
                            } else {
                                x as u8
                            }
                        };
                        w[i & (MAX_NUMNODES - 1)] = v;
                    }
                    consider(candidate(regime, rates, mask, w));
                }
            }
        }
        Regime::Serial => {
            // W / Σ (w_i / r_i) is linear-fractional in w: its maximum over
            // the box is at a vertex, where a node weighs max_weight iff
            // its rate beats the throughput. So: the p fastest nodes at
            // max_weight, the others at 1, for p = 1..=n.
            let n = mask.weight();
            for p in 1..=n {
                let mut w = [1u8; MAX_NUMNODES];
                for i in mask.iter() {
                    // Rank of node i by rate (descending, ties by node id).
                    let ri = rates[i & (MAX_NUMNODES - 1)];
                    let rank = mask
                        .iter()
                        .filter(|&j| {
                            let rj = rates[j & (MAX_NUMNODES - 1)];
                            rj > ri || (rj == ri && j < i)
                        })
                        .count() as u32;
                    if rank < p {
                        w[i & (MAX_NUMNODES - 1)] = max_weight;
                    }
                }
                let mut full = [0u8; MAX_NUMNODES];
                for i in mask.iter() {
                    full[i & (MAX_NUMNODES - 1)] = w[i & (MAX_NUMNODES - 1)];
                }
                consider(candidate(regime, rates, mask, full));
            }
        }
    }
    best
}

/// The nodemask (a non-empty subset of `candidates`) and the weights in
/// `1..=max_weight` that maximise [`predict`] in `regime`. Nodes without a
/// usable rate are never chosen. `None` if no candidate has one, or
/// `max_weight` is 0.
///
/// Exact: a node j in an optimal mask can be swapped for any left-out node
/// with a rate at least r_j without a loss, so some optimal mask is the k
/// fastest nodes for some k, and for each such mask the best weights are
/// found exactly (see `best_for_mask`). Among equal predictions (relative
/// 1e-9) it prefers fewer nodes, then a shorter cycle; the weights are
/// divided by their GCD. Cost: O(n³ · max_weight) for n candidate nodes.
///
/// On the seed measurement (Documentation/mm/bandwidth-model.md), parallel,
/// it gives the weights and ceiling that page states (`tests/model.rs`).
pub fn recommend(
    regime: Regime,
    rates: &Rates,
    candidates: Nodemask,
    max_weight: u8,
) -> Option<Recommendation> {
    if max_weight == 0 {
        return None;
    }
    // The usable candidates, fastest first (ties: lower node id first).
    let mut order = [0u8; MAX_NUMNODES];
    let mut n = 0usize;
    for nid in candidates.iter() {
        if usable(rates[nid & (MAX_NUMNODES - 1)]) {
            order[n & (MAX_NUMNODES - 1)] = nid as u8;
            n += 1;
        }
    }
    if n == 0 {
        return None;
    }
    let order = &mut order[..n];
    // Insertion sort: no allocation, n <= 64.
    for i in 1..order.len() {
        let mut j = i;
        while j > 0 {
            let (a, b) = (order[j - 1] as usize, order[j] as usize);
            let (ra, rb) = (rates[a], rates[b]);
            if rb > ra || (rb == ra && b < a) {
                order.swap(j - 1, j);
                j -= 1;
            } else {
                break;
            }
        }
    }
    let mut best: Option<Recommendation> = None;
    let mut mask = Nodemask::EMPTY;
    for &nid in order.iter() {
        mask = mask.with(nid as usize);
        if let Some(c) = best_for_mask(regime, rates, mask, max_weight) {
            if best.as_ref().is_none_or(|b| better(&c, b)) {
                best = Some(c);
            }
        }
    }
    best
}

/// A rates table from `(node, rate)` pairs (nodes >= 64 are ignored).
pub fn rates_of(pairs: &[(usize, f64)]) -> Rates {
    let mut r = [0.0; MAX_NUMNODES];
    for &(n, v) in pairs {
        if let Some(slot) = r.get_mut(n) {
            *slot = v;
        }
    }
    r
}
