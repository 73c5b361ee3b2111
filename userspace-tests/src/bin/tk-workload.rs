//! tk-workload: what placement does to real work. One working set per
//! policy, three kernels, measured side by side in one run, each figure
//! next to the bandwidth model's prediction from the calibrated costs.
//!
//! Policies (`--policies`, default all that apply):
//! - `local`: the default policy (the threads run on the DRAM node's CPUs);
//! - `bind:N` for every memory node;
//! - `kernel-interleave`: `MPOL_INTERLEAVE` over the memory nodes;
//! - `kernel-weighted-hmat`: `MPOL_WEIGHTED_INTERLEAVE` with the kernel's
//!   own weights (auto weights from HMAT/CDAT);
//! - `tierkit-weighted-hmat`: `/dev/tierkit` with the same weights;
//! - `tierkit-auto-measured`: `/dev/tierkit`, weights from the kernel's
//!   formula on the measured bandwidth (written to tierkit's `bandwidth`);
//! - `tierkit-optimized`: `/dev/tierkit` with the nodemask and weights the
//!   model recommends for the workload.
//!
//! Kernels (`--workloads lookup,stream,fault`; see
//! `userspace_tests::workload::kernels`): XSBench-style lookups/s,
//! STREAM-style copy/scale/add/triad MB/s, and page_fault2-style faults/s
//! for 1..T threads plus pages/s delivered by tierkit's mmap against the
//! kernel's page-by-page faults and `MAP_POPULATE`.
//!
//! Predictions: the model (`tierkit_core::model`) in the calibration's
//! regime, on the pages per node each working set really got
//! (move_pages), from the nodes' costs measured **in the same rounds** as
//! the workloads, each on its own working set bound to the node (so that
//! the machine's load drifting between the calibration and the workloads
//! does not count as model error; `predicted_calibration` in the rows is
//! the same model on `tk-calibrate`'s figures). STREAM kernels use each
//! node's bandwidth for the same kernel. The lookup uses the calibrated latency, anchored at
//! the lookup rate measured on the DRAM node (`bind:<dram>`, whose
//! prediction is therefore exact by construction): node i's rate is that
//! times `lat_dram / lat_i`, except on a node without locality (QEMU's
//! CXL window, where a streamed word costs about as much as a random
//! load), where each of the lookup's loads is paid in turn, a random one
//! at the node's latency and one that follows in the same lines at a word
//! of its read bandwidth (see `Calibration::lookup_rates`).
//!
//! The calibration comes from `--calibration FILE` (tk-calibrate's
//! `--out`), else it is measured first. tierkit's weights and bandwidth
//! table are put back at the end.
//!
//! Measurements run side by side: every policy's working set is allocated
//! first, then `--rounds` rounds visit them in turn. Every block of a
//! policy does the same work (the same lookups, passes, chase), timed in
//! chunks of about 0.1 to a few ms, and each chunk's best time over the
//! blocks counts (`kernels::ChunkMins`: interference only ever slows a
//! chunk down, and a drift in the machine's load hits every policy
//! alike). Deliveries
//! (pages/s) take the median of `--reps` round-robin repetitions.
//!
//! Flags: `--threads T` for the lookup and STREAM (default: the DRAM
//! node's CPUs; 1 in tierkit's guest, where a block of T threads needs T
//! host CPUs free at once and the host is shared), `--fault-threads N`
//! (page_fault2 runs 1..N; default the DRAM node's CPUs), `--duration
//! SECS` per policy and round (STREAM: a quarter per kernel), `--rounds R`, `--lookup-size`, `--stream-size`,
//! `--fault-size`, `--map-size` (bytes, `16M`), `--nuclides N`, `--reps R`
//! (deliveries), `--topology NAME` (the label in the rows). Defaults are
//! small in tierkit's guest (`$TIERKIT_MODE` set) and larger elsewhere.

use anyhow::{anyhow, Context, Result};
use serde_json::json;
use std::process::ExitCode;
use tierkit_core::model;
use userspace_tests::node::{fmt_mask, nodes_of, Topology};
use userspace_tests::report::Report;
use userspace_tests::sys::{self, PAGE_SIZE};
use userspace_tests::weights::WeightDir;
use userspace_tests::workload::calib::Chase;
use userspace_tests::workload::calib::{self, Calibration, Opts, Workload};
use userspace_tests::workload::kernels::{
    self, deliver, lookup_rate, page_fault2, run_lookups, Bw, ChunkMins, Delivery, Stream,
    TaskPolicy, XsData, XsParams,
};
use userspace_tests::workload::rows::{self, Row};
use userspace_tests::workload::{
    amounts_of, fmt_pages, fmt_size, in_guest, Flags, Placement, Region,
};
use userspace_tests::*;

const BIN: &str = "tk-workload";
const KNOWN: &[&str] = &[
    "calibration",
    "threads",
    "fault-threads",
    "duration",
    "lookup-size",
    "stream-size",
    "fault-size",
    "map-size",
    "nuclides",
    "reps",
    "rounds",
    "workloads",
    "policies",
    "topology",
    "no-settle",
    "help",
];

fn usage() {
    println!(
        "usage: {BIN} [--calibration FILE] [--workloads lookup,stream,fault] [--policies local,bind:0,...] \
         [--threads T] [--fault-threads N] [--duration SECS] [--lookup-size 32M] [--stream-size 8M] [--fault-size 2M] \
         [--map-size 8M] [--nuclides 34] [--reps 3] [--rounds 3] [--topology NAME]"
    );
}

#[derive(Clone, Debug)]
struct Settings {
    threads: usize,
    fault_threads: usize,
    duration: f64,
    lookup_size: usize,
    stream_size: usize,
    fault_size: usize,
    map_size: usize,
    nuclides: usize,
    reps: usize,
    rounds: usize,
}

impl Settings {
    fn defaults() -> Settings {
        if in_guest() {
            Settings {
                threads: 1,
                fault_threads: 0,
                duration: 0.2,
                lookup_size: 32 << 20,
                stream_size: 8 << 20,
                fault_size: 2 << 20,
                map_size: 8 << 20,
                nuclides: 34,
                reps: 3,
                rounds: 3,
            }
        } else {
            Settings {
                threads: 0,
                fault_threads: 0,
                duration: 2.0,
                lookup_size: 1 << 30,
                stream_size: 1 << 30,
                fault_size: 128 << 20,
                map_size: 256 << 20,
                nuclides: 68,
                reps: 5,
                rounds: 3,
            }
        }
    }
}

/// A policy of the report.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Policy {
    Local,
    Bind(u32),
    KernelInterleave,
    KernelWeighted,
    TierkitHmat,
    TierkitAuto,
    TierkitOptimized,
}

impl Policy {
    fn name(&self) -> String {
        match self {
            Policy::Local => rows::LOCAL.into(),
            Policy::Bind(n) => rows::bind(*n),
            Policy::KernelInterleave => rows::KERNEL_INTERLEAVE.into(),
            Policy::KernelWeighted => rows::KERNEL_WEIGHTED_HMAT.into(),
            Policy::TierkitHmat => rows::TIERKIT_WEIGHTED_HMAT.into(),
            Policy::TierkitAuto => rows::TIERKIT_AUTO_MEASURED.into(),
            Policy::TierkitOptimized => rows::TIERKIT_OPTIMIZED.into(),
        }
    }

    fn is_tierkit(&self) -> bool {
        matches!(
            self,
            Policy::TierkitHmat | Policy::TierkitAuto | Policy::TierkitOptimized
        )
    }
}

/// Everything the runs share.
struct Ctx {
    topo: Topology,
    cal: Calibration,
    memory: u64,
    kernel_w: Option<[u8; 64]>,
    tw: Option<WeightDir>,
    cpus: Vec<u32>,
    threads: usize,
    fault_threads: usize,
    dram: u32,
    topology: String,
}

/// A policy made ready: the placement, and the nodemask and weights it
/// interleaves with (for the rows).
struct Ready {
    placement: Placement,
    nodemask: Option<Vec<u32>>,
    weights: Option<Vec<(u32, u8)>>,
}

fn pairs(mask: u64, w: &[u8; 64]) -> Vec<(u32, u8)> {
    nodes_of(mask)
        .into_iter()
        .map(|n| (n, w[n as usize]))
        .collect()
}

impl Ctx {
    fn tierkit(&self) -> Result<&WeightDir> {
        self.tw
            .as_ref()
            .ok_or_else(|| anyhow!("no tierkit weight directory"))
    }

    /// Sets tierkit's weights as `p` needs them for workload `w`.
    fn prepare(&self, p: &Policy, w: Workload) -> Result<Ready> {
        let mem = self.memory;
        let all_ones = [1u8; 64];
        Ok(match p {
            Policy::Local => Ready {
                placement: Placement::Local,
                nodemask: None,
                weights: None,
            },
            Policy::Bind(n) => Ready {
                placement: Placement::Bind(*n),
                nodemask: Some(vec![*n]),
                weights: None,
            },
            Policy::KernelInterleave => Ready {
                placement: Placement::KernelInterleave(mem),
                nodemask: Some(nodes_of(mem)),
                weights: Some(pairs(mem, &all_ones)),
            },
            Policy::KernelWeighted => {
                let k = self
                    .kernel_w
                    .ok_or_else(|| anyhow!("the kernel has no weighted interleave"))?;
                Ready {
                    placement: Placement::KernelWeighted(mem),
                    nodemask: Some(nodes_of(mem)),
                    weights: Some(pairs(mem, &k)),
                }
            }
            Policy::TierkitHmat => {
                let k = self
                    .kernel_w
                    .ok_or_else(|| anyhow!("the kernel has no weighted interleave"))?;
                let tw = self.tierkit()?;
                tw.set_weights(&pairs(mem, &k))?;
                Ready {
                    placement: Placement::Tierkit(mem),
                    nodemask: Some(nodes_of(mem)),
                    weights: Some(pairs(mem, &tw.table()?)),
                }
            }
            Policy::TierkitAuto => {
                let tw = self.tierkit()?;
                tw.write_bandwidth(&self.cal.measured_entries())
                    .context("writing tierkit's bandwidth")?;
                tw.write_auto_str("true").context("writing true to auto")?;
                Ready {
                    placement: Placement::Tierkit(mem),
                    nodemask: Some(nodes_of(mem)),
                    weights: Some(pairs(mem, &tw.table()?)),
                }
            }
            Policy::TierkitOptimized => {
                let rec = self
                    .cal
                    .recommend(w)
                    .ok_or_else(|| anyhow!("the model has no recommendation"))?;
                let tw = self.tierkit()?;
                let p = pairs(rec.mask.0, &rec.weights);
                tw.set_weights(&p)?;
                Ready {
                    placement: Placement::Tierkit(rec.mask.0),
                    nodemask: Some(nodes_of(rec.mask.0)),
                    weights: Some(p),
                }
            }
        })
    }

    fn row(&self, workload: &str, p: &Policy, unit: &str, measured: f64) -> Row {
        Row {
            topology: self.topology.clone(),
            workload: workload.into(),
            policy: p.name(),
            unit: unit.into(),
            measured,
            predicted: None,
            regime: self.cal.regime.clone(),
            threads: Some(self.threads),
            ..Default::default()
        }
    }
}

/// Checks that a `bind:N` working set is all on N.
fn check_bind(r: &mut Report, name: &str, p: &Policy, pages: &[(i32, usize)]) {
    if let Policy::Bind(n) = p {
        let off: usize = pages.iter().filter(|x| x.0 != *n as i32).map(|x| x.1).sum();
        if off > 0 {
            r.fail(
                &format!("{name}: pages on node {n}"),
                format!("{off} pages elsewhere: {}", fmt_pages(pages)),
            );
        }
    }
}

/// One policy's working set, made ready.
struct Set<T> {
    policy: Policy,
    ready: Ready,
    region: Region,
    pages: Vec<(i32, usize)>,
    state: T,
}

/// Allocates a working set of `bytes` for every policy (in order, so
/// that each tierkit mapping gets the weights its policy set), then
/// `init` on each. A policy that fails is reported and left out.
fn sets<T>(
    ctx: &Ctx,
    policies: &[Policy],
    w: Workload,
    what: &str,
    bytes: usize,
    r: &mut Report,
    mut init: impl FnMut(&Region) -> Result<T>,
) -> Vec<Set<T>> {
    let mut v = Vec::new();
    for p in policies {
        let res = (|| -> Result<Set<T>> {
            let ready = ctx.prepare(p, w)?;
            let region = Region::new(&ready.placement, bytes)?;
            let pages = region.node_pages().unwrap_or_default();
            let state = init(&region)?;
            Ok(Set {
                policy: p.clone(),
                ready,
                region,
                pages,
                state,
            })
        })();
        match res {
            Ok(s) => {
                check_bind(r, &format!("{what} {}", p.name()), p, &s.pages);
                v.push(s);
            }
            Err(e) => {
                r.fail(&format!("{what} {}", p.name()), format!("{e:#}"));
            }
        }
    }
    v
}

/// Per-workload facts for the JSON line (the in-run calibration).
type InRun = Vec<(String, serde_json::Value)>;

fn lookup(
    ctx: &Ctx,
    s: &Settings,
    policies: &[Policy],
    r: &mut Report,
    inrun: &mut InRun,
) -> Vec<Row> {
    let params = XsParams::for_size(s.lookup_size, s.nuclides);
    let t0 = sys::monotonic_ns();
    let data = XsData::generate(params);
    let bytes = params.layout().3;
    let mix = data.load_mix();
    let loads = mix.0 + mix.1;
    // Where the lookup's loads fall, per page (the same layout in every
    // working set): the model's traffic split, instead of the page split.
    let page_loads = data.page_loads(16384);
    r.note(format!(
        "lookup: {} nuclides x {} gridpoints, union grid {} points, working set {}, {:.1} loads per lookup \
         (built in {:.1} s); {} rounds of two {} s blocks per policy, each chunk of 64 lookups at its best time",
        params.nuclides,
        params.gridpoints,
        params.union_len(),
        fmt_size(bytes),
        loads,
        (sys::monotonic_ns() - t0) as f64 / 1e9,
        s.rounds,
        s.duration / 2.0
    ));
    let mut sets = sets(
        ctx,
        policies,
        Workload::Lookup,
        "lookup",
        bytes,
        r,
        |region| data.copy_into(region),
    );
    // The latency of each node, re-measured in the same rounds (on its own
    // bound buffer of the same size).
    let mut chases = Vec::new();
    for &n in &ctx.topo.memory {
        match Region::new(&Placement::Bind(n), bytes) {
            Ok(region) => {
                let c = Chase::new(
                    &region,
                    ctx.cpus.first().copied(),
                    s.duration,
                    0x77 + n as u64,
                );
                chases.push((n, region, c));
            }
            Err(e) => {
                r.fail(&format!("lookup latency of node {n}"), format!("{e:#}"));
            }
        }
    }
    // Warm-up, then rounds.
    for set in &sets {
        run_lookups(&data, &set.state, &ctx.cpus, ctx.threads, s.duration / 4.0);
    }
    // Per set and thread, each chunk's best time (every block draws the
    // same lookups: see `ChunkMins`).
    let mut mins: Vec<Vec<ChunkMins>> = vec![Vec::new(); sets.len()];
    let mut verify: Vec<Option<u64>> = vec![None; sets.len()];
    for _ in 0..s.rounds {
        for (_, region, c) in chases.iter_mut() {
            c.run(region, ctx.cpus.first().copied());
        }
        for (i, set) in sets.iter().enumerate() {
            // Two blocks of half the duration: more samples for the best.
            for _ in 0..2 {
                let res = run_lookups(&data, &set.state, &ctx.cpus, ctx.threads, s.duration / 2.0);
                if mins[i].len() != res.chunks.len() {
                    mins[i] = vec![ChunkMins::default(); res.chunks.len()];
                }
                for (m, c) in mins[i].iter_mut().zip(&res.chunks) {
                    m.add(c);
                }
                verify[i] = Some(res.verify);
            }
        }
    }
    let best: Vec<f64> = mins.iter().map(|m| lookup_rate(m)).collect();
    let mut out = Vec::new();
    let first = verify.first().copied().flatten();
    for (i, set) in sets.drain(..).enumerate() {
        let name = format!("lookup {}", set.policy.name());
        if verify[i] != first {
            r.fail(
                &name,
                format!(
                    "results differ from {}'s (hash {:?} vs {first:?})",
                    policies[0].name(),
                    verify[i]
                ),
            );
            continue;
        }
        r.ok_note(
            &name,
            format!("{:.0} lookups/s, pages {}", best[i], fmt_pages(&set.pages)),
        );
        let mut row = ctx.row("lookup", &set.policy, "lookups/s", best[i]);
        match set.region.page_nodes() {
            Ok(nodes) => {
                let mut t: Vec<(i32, f64)> = Vec::new();
                for (&n, &l) in nodes.iter().zip(&page_loads) {
                    match t.iter_mut().find(|x| x.0 == n) {
                        Some(x) => x.1 += l,
                        None => t.push((n, l)),
                    }
                }
                t.sort_by_key(|x| x.0);
                row.traffic = Some(t);
            }
            Err(e) => {
                r.fail(&format!("{name} traffic"), format!("{e:#}"));
            }
        }
        row.pages = set.pages;
        row.pfn_runs = set.region.pfn_runs();
        row.nodemask = set.ready.nodemask;
        row.weights = set.ready.weights;
        drop(set.region);
        out.push(row);
    }
    // Predictions, anchored at the DRAM node's measured rate.
    let anchor = out
        .iter()
        .find(|row| row.policy == rows::bind(ctx.dram))
        .or_else(|| out.iter().find(|row| row.policy == rows::LOCAL))
        .map(|row| row.measured);
    let mut run = ctx.cal.clone();
    for (n, _, c) in &chases {
        if let Some(x) = run.nodes.iter_mut().find(|x| x.nid == *n) {
            x.latency_ns = c.best_ns;
        }
    }
    r.note(format!(
        "lookup: latency measured in the same rounds: {} (tk-calibrate: {})",
        run.nodes
            .iter()
            .map(|n| format!("node {} {:.0} ns", n.nid, n.latency_ns))
            .collect::<Vec<_>>()
            .join(", "),
        ctx.cal
            .nodes
            .iter()
            .map(|n| format!("node {} {:.0} ns", n.nid, n.latency_ns))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    inrun.push((
        "lookup".into(),
        json!({
            "loads_per_lookup": loads,
            "random_loads": mix.0,
            "streamed_loads": mix.1,
            "latency_ns": run.nodes.iter().map(|n| json!([n.nid, n.latency_ns])).collect::<Vec<_>>(),
            "no_locality": run.nodes.iter().filter(|n| Calibration::no_locality(n)).map(|n| n.nid).collect::<Vec<_>>(),
            "anchor": anchor.map(|a| json!({"node": ctx.dram, "lookups_per_s": a})),
        }),
    ));
    if let Some(a) = anchor {
        let rates = run.lookup_rates(ctx.dram, a, mix, ctx.threads);
        let rates_cal = ctx.cal.lookup_rates(ctx.dram, a, mix, ctx.threads);
        for row in out.iter_mut() {
            // The loads on each node (not the pages: the lookup's traffic
            // is far from uniform over its pages).
            let am = match &row.traffic {
                Some(t) => {
                    let mut a = [0.0; 64];
                    for &(n, l) in t {
                        if (0..64).contains(&n) {
                            a[n as usize] += l;
                        }
                    }
                    a
                }
                None => amounts_of(&row.pages),
            };
            row.predicted = Some(model::predict_amounts(ctx.cal.regime(), &rates, &am));
            row.predicted_calibration =
                Some(model::predict_amounts(ctx.cal.regime(), &rates_cal, &am));
        }
    }
    out
}

fn stream(
    ctx: &Ctx,
    s: &Settings,
    policies: &[Policy],
    r: &mut Report,
    inrun: &mut InRun,
) -> Vec<Row> {
    r.note(format!(
        "stream: 3 arrays of {} doubles ({}), {} thread(s), {} rounds, each kernel of each policy \
         timed in blocks of {} s for at least {} s per round, each 256 KiB chunk at its best time; every node's costs \
         re-measured in the same rounds on its own bound working set",
        s.stream_size / 24,
        fmt_size(s.stream_size),
        ctx.threads,
        s.rounds,
        s.duration / 8.0,
        s.duration / 4.0
    ));
    // Each kernel gets a quarter of `--duration` per round, so that a
    // round of the four costs a policy what a round of lookups does.
    // The calibration, side by side with the policies: STREAM on a working
    // set bound to each node (separate from the bind:N policies' own).
    let mut cal_sets = Vec::new();
    for &n in &ctx.topo.memory {
        match Region::new(&Placement::Bind(n), s.stream_size) {
            Ok(region) => {
                let st = Stream::new(&region, &ctx.cpus, ctx.threads, s.duration / 8.0);
                cal_sets.push((n, region, st));
            }
            Err(e) => {
                r.fail(&format!("stream costs of node {n}"), format!("{e:#}"));
            }
        }
    }
    let mut sets = sets(
        ctx,
        policies,
        Workload::Triad,
        "stream",
        s.stream_size,
        r,
        |region| {
            Ok(Stream::new(
                region,
                &ctx.cpus,
                ctx.threads,
                s.duration / 8.0,
            ))
        },
    );
    for _ in 0..s.rounds {
        for (_, _, st) in cal_sets.iter_mut() {
            st.round(&ctx.cpus, ctx.threads, s.duration / 4.0);
        }
        for set in sets.iter_mut() {
            set.state.round(&ctx.cpus, ctx.threads, s.duration / 4.0);
        }
    }
    let mut run = ctx.cal.clone();
    for (n, region, st) in &cal_sets {
        let b = st.best();
        if let Some(x) = run.nodes.iter_mut().find(|x| x.nid == *n) {
            (x.copy_mbps, x.scale_mbps, x.add_mbps, x.triad_mbps) = (b[0], b[1], b[2], b[3]);
        }
        r.note(format!(
            "stream costs of node {n}, same rounds: copy {:.0} scale {:.0} add {:.0} triad {:.0} MB/s, {} physical runs{}",
            b[0],
            b[1],
            b[2],
            b[3],
            region.pfn_runs().map_or("?".into(), |x| x.to_string()),
            ctx.cal.node(*n).map_or(String::new(), |c| format!(
                " (tk-calibrate: {:.0} {:.0} {:.0} {:.0})",
                c.copy_mbps, c.scale_mbps, c.add_mbps, c.triad_mbps
            ))
        ));
    }
    inrun.push((
        "stream".into(),
        json!(cal_sets
            .iter()
            .map(|(n, region, st)| json!({"nid": n, "mbps": st.best(), "errors": st.errors(), "pfn_runs": region.pfn_runs()}))
            .collect::<Vec<_>>()),
    ));
    let workloads = [
        Workload::Copy,
        Workload::Scale,
        Workload::Add,
        Workload::Triad,
    ];
    let mut out = Vec::new();
    for set in sets {
        let name = format!("stream {}", set.policy.name());
        let errors = set.state.errors();
        if errors > 0 {
            r.fail(
                &name,
                format!("{errors} sampled elements have wrong values"),
            );
            continue;
        }
        let best = set.state.best();
        r.ok_note(
            &name,
            format!(
                "copy {:.0} scale {:.0} add {:.0} triad {:.0} MB/s, pages {}, {} physical runs",
                best[0],
                best[1],
                best[2],
                best[3],
                fmt_pages(&set.pages),
                set.region.pfn_runs().map_or("?".into(), |x| x.to_string())
            ),
        );
        let amounts = amounts_of(&set.pages);
        let runs = set.region.pfn_runs();
        for (k, kernel) in Bw::STREAM.iter().enumerate() {
            let mut row = ctx.row(kernel.name(), &set.policy, "MB/s", best[k]);
            row.pfn_runs = runs;
            row.pages = set.pages.clone();
            row.nodemask = set.ready.nodemask.clone();
            row.weights = set.ready.weights.clone();
            row.predicted = Some(model::predict_amounts(
                ctx.cal.regime(),
                &run.rates(workloads[k]),
                &amounts,
            ));
            row.predicted_calibration = Some(model::predict_amounts(
                ctx.cal.regime(),
                &ctx.cal.rates(workloads[k]),
                &amounts,
            ));
            out.push(row);
        }
    }
    out
}

fn fault(ctx: &Ctx, s: &Settings, policies: &[Policy], r: &mut Report) -> Vec<Row> {
    let mut out = Vec::new();
    r.note(format!(
        "fault: page_fault2 on a private mapping of a {} shared-memory file per thread, 1..{} threads, \
         {} rounds of {} s, best counts; deliveries of {}, {} rounds, median",
        fmt_size(s.fault_size),
        ctx.fault_threads,
        s.rounds,
        s.duration,
        fmt_size(s.map_size),
        s.reps
    ));
    let k = ctx.kernel_w;
    let mut pf: Vec<(Policy, TaskPolicy)> = Vec::new();
    for p in policies.iter().filter(|p| !p.is_tierkit()) {
        let policy = match p {
            Policy::Local => TaskPolicy::DEFAULT,
            Policy::Bind(n) => TaskPolicy {
                mode: sys::MPOL_BIND,
                mask: 1 << n,
            },
            Policy::KernelInterleave => TaskPolicy {
                mode: sys::MPOL_INTERLEAVE,
                mask: ctx.memory,
            },
            Policy::KernelWeighted if k.is_some() => TaskPolicy {
                mode: sys::MPOL_WEIGHTED_INTERLEAVE,
                mask: ctx.memory,
            },
            _ => continue,
        };
        pf.push((p.clone(), policy));
    }
    // best[policy][threads - 1], pages of the first run.
    let mut best = vec![vec![0.0f64; ctx.fault_threads]; pf.len()];
    let mut pages = vec![Vec::new(); pf.len()];
    let mut failed: Vec<Option<String>> = vec![None; pf.len()];
    for t in 1..=ctx.fault_threads {
        for _ in 0..s.rounds {
            for (i, (_, tp)) in pf.iter().enumerate() {
                if failed[i].is_some() {
                    continue;
                }
                match page_fault2(&ctx.cpus, t, s.fault_size, s.duration, *tp) {
                    Ok((rate, n)) => {
                        best[i][t - 1] = best[i][t - 1].max(rate);
                        if pages[i].is_empty() {
                            pages[i] = n;
                        }
                    }
                    Err(e) => failed[i] = Some(format!("{e:#}")),
                }
            }
        }
    }
    for (i, (p, _)) in pf.iter().enumerate() {
        let name = format!("fault page_fault2 {}", p.name());
        if let Some(e) = &failed[i] {
            r.fail(&name, e.clone());
            continue;
        }
        check_bind(r, &name, p, &pages[i]);
        let by: Vec<(usize, f64)> = best[i]
            .iter()
            .enumerate()
            .map(|(t, &f)| (t + 1, f))
            .collect();
        r.ok_note(
            &name,
            format!(
                "{} faults/s, pages {}",
                by.iter()
                    .map(|(t, f)| format!("T={t}: {f:.0}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                fmt_pages(&pages[i])
            ),
        );
        let mut row = ctx.row("fault", p, "faults/s", by.last().map_or(0.0, |x| x.1));
        row.variant = Some("page_fault2".into());
        row.by_threads = Some(by);
        row.pages = pages[i].clone();
        out.push(row);
    }
    // Pages/s delivered: tierkit against the kernel, same weights, round
    // robin.
    let Some(kw) = k else {
        r.skip("fault deliveries", "the kernel has no weighted interleave");
        return out;
    };
    let mut dels: Vec<(Delivery, Policy, Ready)> = Vec::new();
    for d in Delivery::ALL {
        match d {
            Delivery::TierkitMmap => {
                if !policies.contains(&Policy::TierkitHmat) {
                    continue;
                }
                match ctx.prepare(&Policy::TierkitHmat, Workload::Triad) {
                    Ok(x) => dels.push((d, Policy::TierkitHmat, x)),
                    Err(e) => {
                        r.fail("fault tierkit-mmap", format!("{e:#}"));
                    }
                }
            }
            _ => {
                if policies.contains(&Policy::KernelWeighted) {
                    dels.push((
                        d,
                        Policy::KernelWeighted,
                        Ready {
                            placement: Placement::KernelWeighted(ctx.memory),
                            nodemask: Some(nodes_of(ctx.memory)),
                            weights: Some(pairs(ctx.memory, &kw)),
                        },
                    ));
                }
            }
        }
    }
    let npages = s.map_size / PAGE_SIZE;
    let cpu: Vec<u32> = ctx.cpus.first().copied().into_iter().collect();
    let mut times: Vec<Vec<u64>> = vec![Vec::new(); dels.len()];
    let mut nodes: Vec<Vec<(i32, usize)>> = vec![Vec::new(); dels.len()];
    let mut failed: Vec<Option<String>> = vec![None; dels.len()];
    for rep in 0..s.reps.max(1) {
        for (i, (d, _, _)) in dels.iter().enumerate() {
            if failed[i].is_some() {
                continue;
            }
            // One thread, on the DRAM node's first CPU.
            let (_, res) =
                workload::run_threads(&cpu, 1, |_| deliver(*d, npages, ctx.memory, rep == 0));
            match res.into_iter().next().expect("one thread") {
                Ok((ns, n)) => {
                    times[i].push(ns.max(1));
                    if rep == 0 {
                        nodes[i] = n;
                    }
                }
                Err(e) => failed[i] = Some(format!("{e:#}")),
            }
        }
    }
    let mut rates = Vec::new();
    for (i, (d, p, ready)) in dels.into_iter().enumerate() {
        let name = format!("fault {} {}", d.name(), p.name());
        if let Some(e) = &failed[i] {
            r.fail(&name, e.clone());
            continue;
        }
        let mut t = times[i].clone();
        t.sort_unstable();
        let rate = |ns: u64| npages as f64 * 1e9 / ns as f64;
        let (med, top) = (rate(t[t.len() / 2]), rate(t[0]));
        r.ok_note(
            &name,
            format!(
                "{med:.0} pages/s median, {top:.0} best, pages {}",
                kernels::fmt_nodes(&nodes[i])
            ),
        );
        rates.push((d, med));
        let mut row = ctx.row("fault", &p, "pages/s", med);
        row.variant = Some(d.name().into());
        row.threads = Some(1);
        row.pages = nodes[i].clone();
        row.nodemask = ready.nodemask;
        row.weights = ready.weights;
        out.push(row);
    }
    let get = |d| rates.iter().find(|x| x.0 == d).map(|x| x.1);
    if let (Some(t), Some(f), Some(p)) = (
        get(Delivery::TierkitMmap),
        get(Delivery::KernelFault),
        get(Delivery::KernelPopulate),
    ) {
        r.note(format!(
            "pages/s: tierkit mmap / page-by-page faults = {:.2}, tierkit mmap / MAP_POPULATE = {:.2}",
            t / f,
            t / p
        ));
    }
    out
}

fn main() -> ExitCode {
    userspace_tests::help!();
    let flags = match Flags::from_args_or_usage(BIN, &["help", "no-settle"], KNOWN, usage) {
        Ok(f) => f,
        Err(code) => return code,
    };
    if flags.has("help") {
        usage();
        return ExitCode::SUCCESS;
    }
    workload::set_settle(!flags.has("no-settle"));
    let mut r = Report::new(BIN, "bench");
    let mut s = Settings::defaults();
    let parsed = (|| -> Result<()> {
        s.threads = flags.parse_or("threads", s.threads)?;
        s.fault_threads = flags.parse_or("fault-threads", s.fault_threads)?;
        s.duration = flags.parse_or("duration", s.duration)?;
        s.lookup_size = flags.size_or("lookup-size", s.lookup_size)?;
        s.stream_size = flags.size_or("stream-size", s.stream_size)?;
        s.fault_size = flags.size_or("fault-size", s.fault_size)?.max(PAGE_SIZE);
        s.map_size = flags.size_or("map-size", s.map_size)?.max(PAGE_SIZE);
        s.nuclides = flags.parse_or("nuclides", s.nuclides)?;
        s.reps = flags.parse_or("reps", s.reps)?;
        s.rounds = flags.parse_or("rounds", s.rounds)?.max(1);
        Ok(())
    })();
    if let Err(e) = parsed {
        r.fail("flags", format!("{e:#}"));
        return r.finish();
    }
    let workloads = flags
        .list("workloads")
        .unwrap_or_else(|| vec!["lookup".into(), "stream".into(), "fault".into()]);
    for w in &workloads {
        if !["lookup", "stream", "fault"].contains(&w.as_str()) {
            r.fail(
                "flags",
                format!("--workloads: unknown {w:?} (lookup, stream, fault)"),
            );
            return r.finish();
        }
    }
    // THP off for the whole process: every working set in 4 KiB pages, as
    // tierkit's.
    let _ = sys::disable_thp();

    let Some(topo) = read_topology(&mut r) else {
        return r.finish();
    };
    let Some(dram) = topo.dram_node().or_else(|| topo.memory.first().copied()) else {
        r.fail("topology", "no memory node");
        return r.finish();
    };
    let memory = topo.memory_mask();
    let tw = if tk::Tierkit::present() {
        WeightDir::tierkit()
    } else {
        None
    };
    let tsaved = tw.as_ref().map(|t| {
        (
            t.snapshot(),
            std::fs::read_to_string(t.bandwidth_path()).unwrap_or_default(),
        )
    });
    let kernel_w = WeightDir::kernel().and_then(|k| k.table().ok());

    let cpus = workload::node_cpus(topo.dram_node().unwrap_or(dram));
    let threads = if s.threads == 0 {
        cpus.len().max(1)
    } else {
        s.threads
    };
    let fault_threads = if s.fault_threads == 0 {
        cpus.len().max(1)
    } else {
        s.fault_threads
    };
    let cal = match flags.get("calibration") {
        Some(path) => match Calibration::load(path) {
            Ok(c) => {
                r.ok_note("calibration", format!("{path}: regime {}", c.regime));
                c
            }
            Err(e) => {
                r.fail("calibration", format!("{e:#}"));
                return r.finish();
            }
        },
        None => {
            let mut o = Opts::defaults();
            o.threads = threads;
            let mut log = |l: String| r.note(l);
            match calib::calibrate(&topo, &o, &mut log) {
                Ok(c) => {
                    for l in c.table(memory) {
                        r.note(l);
                    }
                    r.ok_note("calibration", format!("measured, regime {}", c.regime));
                    c
                }
                Err(e) => {
                    r.fail("calibration", format!("{e:#}"));
                    return r.finish();
                }
            }
        }
    };
    let topology = flags
        .get("topology")
        .map(str::to_string)
        .unwrap_or_else(|| {
            if !cxl::cxl_nodes().is_empty() {
                "cxl".into()
            } else if !topo.memory_only().is_empty() {
                "numa".into()
            } else {
                "flat".into()
            }
        });

    // The policies.
    let mut all = vec![Policy::Local];
    all.extend(topo.memory.iter().map(|&n| Policy::Bind(n)));
    if topo.memory.len() >= 2 {
        all.push(Policy::KernelInterleave);
        if kernel_w.is_some() {
            all.push(Policy::KernelWeighted);
        }
    }
    if tw.is_some() {
        if kernel_w.is_some() && topo.memory.len() >= 2 {
            all.push(Policy::TierkitHmat);
        }
        all.push(Policy::TierkitAuto);
        all.push(Policy::TierkitOptimized);
    } else {
        r.skip("tierkit policies", "no /dev/tierkit or weight directory");
    }
    let policies: Vec<Policy> = match flags.list("policies") {
        None => all,
        Some(names) => {
            let mut v = Vec::new();
            for n in names {
                match all.iter().find(|p| p.name() == n) {
                    Some(p) => v.push(p.clone()),
                    None => {
                        r.fail(
                            "flags",
                            format!(
                                "--policies: {n:?} does not apply here ({})",
                                all.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
                            ),
                        );
                        return r.finish();
                    }
                }
            }
            v
        }
    };
    let ctx = Ctx {
        topo,
        cal,
        memory,
        kernel_w,
        tw,
        cpus,
        threads,
        fault_threads,
        dram,
        topology,
    };
    r.note(format!(
        "{}: memory {}, {} thread(s) on CPUs {:?} (node {}), regime {}, kernel weights {}, {} s per measurement",
        ctx.topology,
        fmt_mask(ctx.memory),
        ctx.threads,
        ctx.cpus,
        ctx.topo.dram_node().unwrap_or(dram),
        ctx.cal.regime,
        ctx.kernel_w
            .map_or("-".into(), |k| fmt_weights(&pairs(ctx.memory, &k))),
        s.duration
    ));

    let t0 = sys::monotonic_ns();
    let mut all_rows = Vec::new();
    let mut inrun: InRun = Vec::new();
    for w in &workloads {
        let t = sys::monotonic_ns();
        let rows = match w.as_str() {
            "lookup" => lookup(&ctx, &s, &policies, &mut r, &mut inrun),
            "stream" => stream(&ctx, &s, &policies, &mut r, &mut inrun),
            _ => fault(&ctx, &s, &policies, &mut r),
        };
        r.note(format!(
            "{w}: {:.1} s",
            (sys::monotonic_ns() - t) as f64 / 1e9
        ));
        all_rows.extend(rows);
    }
    for l in rows::table(&all_rows) {
        r.note(l);
    }

    // Put tierkit's weights and bandwidth table back.
    if let (Some(tw), Some((snap, bw))) = (&ctx.tw, tsaved) {
        let res = (|| -> Result<()> {
            if !bw.trim().is_empty() {
                weights::write_file(&tw.bandwidth_path(), &bw)
                    .context("writing the bandwidth table back")?;
            }
            snap?.restore()
        })();
        r.check("restore tierkit weights", res);
    }
    let opt: Vec<_> = [Workload::Lookup, Workload::Triad]
        .iter()
        .filter_map(|&w| {
            let rec = ctx.cal.recommend(w)?;
            Some(
                json!({"workload": w.name(), "nodemask": nodes_of(rec.mask.0),
                        "weights": pairs(rec.mask.0, &rec.weights), "predicted": rec.throughput}),
            )
        })
        .collect();
    r.set("topology", json!(ctx.topology));
    r.set("regime", json!(ctx.cal.regime));
    r.set("threads", json!(ctx.threads));
    r.set("elapsed_s", json!((sys::monotonic_ns() - t0) as f64 / 1e9));
    r.set(
        "settings",
        json!({"duration": s.duration, "lookup_size": s.lookup_size, "stream_size": s.stream_size,
               "fault_size": s.fault_size, "map_size": s.map_size, "nuclides": s.nuclides, "reps": s.reps}),
    );
    r.set(
        "calibration",
        serde_json::to_value(&ctx.cal).unwrap_or_default(),
    );
    r.set("optimized", json!(opt));
    r.set(
        "calibration_in_run",
        serde_json::Value::Object(inrun.into_iter().collect()),
    );
    r.set("nodemask", json!(nodes_of(ctx.memory)));
    r.set("rows", serde_json::to_value(&all_rows).unwrap_or_default());
    r.finish()
}
