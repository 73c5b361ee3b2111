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
//! (move_pages). STREAM kernels use the calibrated bandwidth (copy and
//! scale: read and write; add and triad: triad). The lookup uses the
//! calibrated latency, anchored at the lookup rate measured on the DRAM
//! node (`bind:<dram>`, whose prediction is therefore exact by
//! construction): node i's rate is that times `lat_dram / lat_i`.
//!
//! The calibration comes from `--calibration FILE` (tk-calibrate's
//! `--out`), else it is measured first. tierkit's weights and bandwidth
//! table are put back at the end.
//!
//! Flags: `--threads T` (default: the DRAM node's CPUs), `--duration
//! SECS` per measurement, `--lookup-size`, `--stream-size`,
//! `--fault-size`, `--map-size` (bytes, `16M`), `--nuclides N`, `--reps R`
//! (deliveries), `--topology NAME` (the label in the rows). Defaults are
//! small in tierkit's guest (`$TIERKIT_MODE` set) and larger elsewhere.

use anyhow::{anyhow, bail, Context, Result};
use serde_json::json;
use std::process::ExitCode;
use tierkit_core::model;
use userspace_tests::node::{fmt_mask, nodes_of, Topology};
use userspace_tests::report::Report;
use userspace_tests::sys::{self, PAGE_SIZE};
use userspace_tests::weights::WeightDir;
use userspace_tests::workload::calib::{self, Calibration, Opts, Workload};
use userspace_tests::workload::kernels::{
    self, delivery_rate, page_fault2, run_lookups, run_stream, Delivery, TaskPolicy, XsData,
    XsParams, STREAM_KERNELS,
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
    "duration",
    "lookup-size",
    "stream-size",
    "fault-size",
    "map-size",
    "nuclides",
    "reps",
    "workloads",
    "policies",
    "topology",
    "help",
];

fn usage() {
    println!(
        "usage: {BIN} [--calibration FILE] [--workloads lookup,stream,fault] [--policies local,bind:0,...] \
         [--threads T] [--duration SECS] [--lookup-size 32M] [--stream-size 24M] [--fault-size 16M] \
         [--map-size 32M] [--nuclides 34] [--reps 3] [--topology NAME]"
    );
}

#[derive(Clone, Debug)]
struct Settings {
    threads: usize,
    duration: f64,
    lookup_size: usize,
    stream_size: usize,
    fault_size: usize,
    map_size: usize,
    nuclides: usize,
    reps: usize,
}

impl Settings {
    fn defaults() -> Settings {
        if in_guest() {
            Settings {
                threads: 0,
                duration: 0.5,
                lookup_size: 32 << 20,
                stream_size: 24 << 20,
                fault_size: 16 << 20,
                map_size: 32 << 20,
                nuclides: 34,
                reps: 3,
            }
        } else {
            Settings {
                threads: 0,
                duration: 2.0,
                lookup_size: 1 << 30,
                stream_size: 1 << 30,
                fault_size: 128 << 20,
                map_size: 256 << 20,
                nuclides: 68,
                reps: 5,
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

fn lookup(ctx: &Ctx, s: &Settings, policies: &[Policy], r: &mut Report) -> Vec<Row> {
    let params = XsParams::for_size(s.lookup_size, s.nuclides);
    let t0 = sys::monotonic_ns();
    let data = XsData::generate(params);
    let bytes = params.layout().3;
    r.note(format!(
        "lookup: {} nuclides x {} gridpoints, union grid {} points, working set {} (built in {:.1} s)",
        params.nuclides,
        params.gridpoints,
        params.union_len(),
        fmt_size(bytes),
        (sys::monotonic_ns() - t0) as f64 / 1e9
    ));
    let mut out = Vec::new();
    let mut verify: Option<u64> = None;
    for p in policies {
        let name = format!("lookup {}", p.name());
        let res = (|| -> Result<Row> {
            let ready = ctx.prepare(p, Workload::Lookup)?;
            let region = Region::new(&ready.placement, bytes)?;
            let view = data.copy_into(&region)?;
            let pages = region.node_pages().unwrap_or_default();
            let res = run_lookups(&data, &view, &ctx.cpus, ctx.threads, s.duration);
            let mut row = ctx.row("lookup", p, "lookups/s", res.per_s);
            row.pages = pages;
            row.nodemask = ready.nodemask;
            row.weights = ready.weights;
            match verify {
                None => verify = Some(res.verify),
                Some(v) if v != res.verify => {
                    bail!(
                        "lookup results differ from the first policy's (hash {:#x} vs {v:#x})",
                        res.verify
                    )
                }
                _ => {}
            }
            Ok(row)
        })();
        match res {
            Ok(row) => {
                check_bind(r, &name, p, &row.pages);
                r.ok_note(
                    &name,
                    format!(
                        "{:.0} lookups/s, pages {}",
                        row.measured,
                        fmt_pages(&row.pages)
                    ),
                );
                out.push(row);
            }
            Err(e) => {
                r.fail(&name, format!("{e:#}"));
            }
        }
    }
    // Predictions, anchored at the DRAM node's measured rate.
    let anchor = out
        .iter()
        .find(|row| row.policy == rows::bind(ctx.dram))
        .or_else(|| out.iter().find(|row| row.policy == rows::LOCAL))
        .map(|row| row.measured);
    if let Some(a) = anchor {
        let rates = ctx.cal.lookup_rates(ctx.dram, a);
        for row in out.iter_mut() {
            row.predicted = Some(model::predict_amounts(
                ctx.cal.regime(),
                &rates,
                &amounts_of(&row.pages),
            ));
        }
    }
    out
}

fn stream(ctx: &Ctx, s: &Settings, policies: &[Policy], r: &mut Report) -> Vec<Row> {
    r.note(format!(
        "stream: 3 arrays of {} doubles ({}), {} thread(s), best of 2 blocks per kernel",
        s.stream_size / 24,
        fmt_size(s.stream_size),
        ctx.threads
    ));
    let mut out = Vec::new();
    let workloads = [
        Workload::Copy,
        Workload::Scale,
        Workload::Add,
        Workload::Triad,
    ];
    for p in policies {
        let name = format!("stream {}", p.name());
        let res = (|| -> Result<Vec<Row>> {
            let ready = ctx.prepare(p, Workload::Triad)?;
            let region = Region::new(&ready.placement, s.stream_size)?;
            let pages = region.node_pages().unwrap_or_default();
            let res = run_stream(&region, &ctx.cpus, ctx.threads, s.duration, 2);
            if res.errors > 0 {
                bail!("{} sampled elements have wrong values", res.errors);
            }
            let amounts = amounts_of(&pages);
            Ok((0..4)
                .map(|k| {
                    let mut row = ctx.row(STREAM_KERNELS[k], p, "MB/s", res.mbps[k]);
                    row.pages = pages.clone();
                    row.nodemask = ready.nodemask.clone();
                    row.weights = ready.weights.clone();
                    row.predicted = Some(model::predict_amounts(
                        ctx.cal.regime(),
                        &ctx.cal.rates(workloads[k]),
                        &amounts,
                    ));
                    row
                })
                .collect())
        })();
        match res {
            Ok(v) => {
                check_bind(r, &name, p, &v[0].pages);
                r.ok_note(
                    &name,
                    format!(
                        "copy {:.0} scale {:.0} add {:.0} triad {:.0} MB/s, pages {}",
                        v[0].measured,
                        v[1].measured,
                        v[2].measured,
                        v[3].measured,
                        fmt_pages(&v[0].pages)
                    ),
                );
                out.extend(v);
            }
            Err(e) => {
                r.fail(&name, format!("{e:#}"));
            }
        }
    }
    out
}

fn fault(ctx: &Ctx, s: &Settings, policies: &[Policy], r: &mut Report) -> Vec<Row> {
    let mut out = Vec::new();
    r.note(format!(
        "fault: page_fault2 on a private mapping of a {} shared-memory file per thread, 1..{} threads; \
         deliveries of {} x {} reps",
        fmt_size(s.fault_size),
        ctx.threads,
        fmt_size(s.map_size),
        s.reps
    ));
    let k = ctx.kernel_w;
    for p in policies.iter().filter(|p| !p.is_tierkit()) {
        let name = format!("fault page_fault2 {}", p.name());
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
        let mut by = Vec::new();
        let mut pages = Vec::new();
        let mut err = None;
        for t in 1..=ctx.threads {
            match page_fault2(&ctx.cpus, t, s.fault_size, s.duration, policy) {
                Ok((rate, n)) => {
                    by.push((t, rate));
                    if t == 1 {
                        pages = n;
                    }
                }
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = err {
            r.fail(&name, format!("{e:#}"));
            continue;
        }
        check_bind(r, &name, p, &pages);
        let Some(&(_, top)) = by.last() else { continue };
        r.ok_note(
            &name,
            format!(
                "{} faults/s, pages {}",
                by.iter()
                    .map(|(t, f)| format!("T={t}: {f:.0}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                fmt_pages(&pages)
            ),
        );
        let mut row = ctx.row("fault", p, "faults/s", top);
        row.variant = Some("page_fault2".into());
        row.by_threads = Some(by);
        row.pages = pages;
        out.push(row);
    }
    // Pages/s delivered: tierkit against the kernel, same weights.
    let Some(kw) = k else {
        r.skip("fault deliveries", "the kernel has no weighted interleave");
        return out;
    };
    let pages = s.map_size / PAGE_SIZE;
    let mut rates = Vec::new();
    for d in Delivery::ALL {
        let (policy, ready) = match d {
            Delivery::TierkitMmap => {
                if !policies.contains(&Policy::TierkitHmat) {
                    continue;
                }
                match ctx.prepare(&Policy::TierkitHmat, Workload::Triad) {
                    Ok(x) => (Policy::TierkitHmat, x),
                    Err(e) => {
                        r.fail("fault tierkit-mmap", format!("{e:#}"));
                        continue;
                    }
                }
            }
            _ => {
                if !policies.contains(&Policy::KernelWeighted) {
                    continue;
                }
                (
                    Policy::KernelWeighted,
                    Ready {
                        placement: Placement::KernelWeighted(ctx.memory),
                        nodemask: Some(nodes_of(ctx.memory)),
                        weights: Some(pairs(ctx.memory, &kw)),
                    },
                )
            }
        };
        let name = format!("fault {} {}", d.name(), policy.name());
        // One thread, on the DRAM node's first CPU.
        let cpu: Vec<u32> = ctx.cpus.first().copied().into_iter().collect();
        let (_, res) =
            workload::run_threads(&cpu, 1, |_| delivery_rate(d, pages, ctx.memory, s.reps));
        match res.into_iter().next().expect("one thread") {
            Ok((med, best, nodes)) => {
                r.ok_note(
                    &name,
                    format!(
                        "{med:.0} pages/s median, {best:.0} best, pages {}",
                        kernels::fmt_nodes(&nodes)
                    ),
                );
                rates.push((d, med));
                let mut row = ctx.row("fault", &policy, "pages/s", med);
                row.variant = Some(d.name().into());
                row.threads = Some(1);
                row.pages = nodes;
                row.nodemask = ready.nodemask;
                row.weights = ready.weights;
                out.push(row);
            }
            Err(e) => {
                r.fail(&name, format!("{e:#}"));
            }
        }
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
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flags = match Flags::parse(&args, &["help"]).and_then(|f| {
        f.check(KNOWN)?;
        Ok(f)
    }) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{BIN}: {e:#}");
            usage();
            return ExitCode::from(2);
        }
    };
    if flags.has("help") {
        usage();
        return ExitCode::SUCCESS;
    }
    let mut r = Report::new(BIN, "bench");
    let mut s = Settings::defaults();
    let parsed = (|| -> Result<()> {
        s.threads = flags.parse_or("threads", s.threads)?;
        s.duration = flags.parse_or("duration", s.duration)?;
        s.lookup_size = flags.size_or("lookup-size", s.lookup_size)?;
        s.stream_size = flags.size_or("stream-size", s.stream_size)?;
        s.fault_size = flags.size_or("fault-size", s.fault_size)?.max(PAGE_SIZE);
        s.map_size = flags.size_or("map-size", s.map_size)?.max(PAGE_SIZE);
        s.nuclides = flags.parse_or("nuclides", s.nuclides)?;
        s.reps = flags.parse_or("reps", s.reps)?;
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
    for w in &workloads {
        let t = sys::monotonic_ns();
        let rows = match w.as_str() {
            "lookup" => lookup(&ctx, &s, &policies, &mut r),
            "stream" => stream(&ctx, &s, &policies, &mut r),
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
    r.set("nodemask", json!(nodes_of(ctx.memory)));
    r.set("rows", serde_json::to_value(&all_rows).unwrap_or_default());
    r.finish()
}
