//! Calibration: what each memory node delivers, measured from its nearest
//! CPUs, next to what HMAT (or the CXL region's CDAT-derived `access1`)
//! claims, and the weights each gives with the kernel's formula.
//!
//! Per node, on a buffer of `size` bytes bound to it (`MPOL_BIND`, every
//! page faulted in, one untimed pass first):
//! - **read**: a sum over the buffer, T threads, each its own slice;
//! - **write**: a store loop over the buffer, T threads;
//! - **triad**: `a = b + s·c` over three thirds of it, T threads (bytes
//!   counted as STREAM does: 3 × 8 per element);
//! - **latency**: one thread chasing pointers through the buffer's cache
//!   lines in one random cycle (Sattolo), ns per load.
//!
//! The threads run on the CPUs of the node, or for a CPU-less node of the
//! nearest node with CPUs (`nodeN/distance`), one per CPU round robin.
//!
//! **Regime probe** (two or more nodes): the read kernel on a buffer whose
//! pages are spread over the nodes in proportion to their measured read
//! bandwidth (blocks bound with `MPOL_BIND`, the layout of weighted
//! interleave with those weights). There the two regimes differ most:
//! the parallel model predicts the sum of the bandwidths, the serial one
//! their mean. The regime whose prediction is closer (in log ratio) is the
//! one the model uses for this machine.

use super::{amounts_of, fmt_pages, part, Rng, SendPtr};
use super::{fmt_size, in_guest, nearest_cpu_node, node_cpus, run_threads, Placement, Region};
use crate::cxl::CxlBus;
use crate::node::{access1_bandwidth, Topology, NODE_SYSFS};
use crate::sys::monotonic_ns;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use tierkit_core::interleave::{bw_from_coords, Nodemask, Weights};
use tierkit_core::model::{self, Rates, Regime};

/// Calibration settings.
#[derive(Clone, Debug)]
pub struct Opts {
    /// Buffer per node, bytes.
    pub size: usize,
    /// Threads for the bandwidth kernels; 0 = every CPU of the nearest node.
    pub threads: usize,
    /// Seconds per timed measurement (at least one pass is always made).
    pub duration: f64,
    /// Only these nodes (default: every node with memory).
    pub nodes: Option<Vec<u32>>,
    /// Run the regime probe.
    pub probe: bool,
}

impl Opts {
    /// Guest defaults (`$TIERKIT_MODE` set): 24 MiB (the STREAM working set), 0.25 s, all CPUs of
    /// the nearest node. Bare metal: 1 GiB (larger than any LLC), 1 s.
    pub fn defaults() -> Opts {
        let (size, duration) = if in_guest() {
            (24 << 20, 0.25)
        } else {
            (1 << 30, 1.0)
        };
        Opts {
            size,
            threads: 0,
            duration,
            nodes: None,
            probe: true,
        }
    }
}

/// What firmware says about a node (access class 1: nearest CPU).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Hmat {
    pub read_mbps: u32,
    pub write_mbps: u32,
    pub read_latency_ns: Option<u32>,
    /// `node0 access1` or `region0 access1`.
    pub source: String,
}

/// One node's calibration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeCal {
    pub nid: u32,
    /// `dram` (has CPUs), `cxl` (a CXL region's node), `memory-only`.
    pub kind: String,
    /// The node whose CPUs ran the measurement, and the CPUs.
    pub cpu_node: u32,
    pub cpus: Vec<u32>,
    pub threads: usize,
    /// 10^6 bytes/s.
    pub read_mbps: f64,
    pub write_mbps: f64,
    pub triad_mbps: f64,
    /// ns per dependent load.
    pub latency_ns: f64,
    pub hmat: Option<Hmat>,
}

/// The regime probe's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// `(node, pages per cycle)`.
    pub pattern: Vec<(u32, u32)>,
    /// Pages per node as placed (move_pages).
    pub pages: Vec<(i32, usize)>,
    pub measured_mbps: f64,
    pub serial_mbps: f64,
    pub parallel_mbps: f64,
    pub regime: String,
}

/// A whole calibration, as `tk-calibrate --out` writes it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub size: usize,
    pub duration: f64,
    pub nodes: Vec<NodeCal>,
    pub probe: Option<Probe>,
    /// `parallel` or `serial`: the probe's verdict, else `parallel` (the
    /// hardware default) with a single node, or as forced by `--regime`.
    pub regime: String,
    /// Seconds the calibration took.
    pub elapsed_s: f64,
}

// ---------------------------------------------------------------------------
// Firmware figures
// ---------------------------------------------------------------------------

/// Node `nid`'s access1 read latency (ns): the node's
/// `access1/initiators/read_latency`, or its CXL region's `access1`.
pub fn access1_latency(nid: u32) -> Option<u32> {
    let p = format!("{NODE_SYSFS}/node{nid}/access1/initiators/read_latency");
    std::fs::read_to_string(p)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .or_else(|| {
            CxlBus::default()
                .region_of_node(nid)?
                .access
                .get(1)
                .copied()
                .flatten()
                .map(|a| a.read_lat)
        })
}

/// HMAT (or CXL region) figures for `nid`, `None` without either.
pub fn hmat_of(nid: u32) -> Option<Hmat> {
    let (read, write) = access1_bandwidth(nid)?;
    let on_node = std::path::Path::new(&format!(
        "{NODE_SYSFS}/node{nid}/access1/initiators/read_bandwidth"
    ))
    .exists();
    let source = if on_node {
        format!("node{nid} access1")
    } else {
        CxlBus::default()
            .region_of_node(nid)
            .map(|r| format!("{} access1", r.name))
            .unwrap_or_else(|| "access1".into())
    };
    Some(Hmat {
        read_mbps: read,
        write_mbps: write,
        read_latency_ns: access1_latency(nid),
        source,
    })
}

/// `dram`, `cxl` or `memory-only`.
pub fn node_kind(topo: &Topology, nid: u32, cxl_nodes: &[u32]) -> &'static str {
    if cxl_nodes.contains(&nid) {
        "cxl"
    } else if topo.cpu.contains(&nid) {
        "dram"
    } else {
        "memory-only"
    }
}

/// The kernel's auto weights (`reduce_interleave_weights`, each node's
/// bandwidth `min(read, write)` as `mempolicy_set_node_perf` takes it) for
/// `(nid, read, write)` entries over `memory` (nodes without an entry
/// count as 0 and get 1).
pub fn weights_from_bandwidth(entries: &[(u32, u32, u32)], memory: u64) -> [u8; 64] {
    let mut bw = [0u32; 64];
    for &(n, r, w) in entries {
        if n < 64 {
            bw[n as usize] = bw_from_coords(r, w);
        }
    }
    Weights::from_bandwidth(&bw, Nodemask(memory)).effective()
}

// ---------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------

/// The bandwidth kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BwKernel {
    Read,
    Write,
    Triad,
}

/// One pass of `k` by thread `i` of `threads` over `words` u64 words at
/// `base`; returns a value that depends on what was read.
fn pass(k: BwKernel, base: SendPtr, words: usize, i: usize, threads: usize, no: u64) -> u64 {
    match k {
        BwKernel::Read => {
            // SAFETY: `words` words of a live mapping; read only.
            let s = unsafe { std::slice::from_raw_parts(base.ptr() as *const u64, words) };
            let (lo, hi) = part(words, threads, i);
            let mut acc = [0u64; 4];
            let mut it = s[lo..hi].chunks_exact(4);
            for c in &mut it {
                acc[0] = acc[0].wrapping_add(c[0]);
                acc[1] = acc[1].wrapping_add(c[1]);
                acc[2] = acc[2].wrapping_add(c[2]);
                acc[3] = acc[3].wrapping_add(c[3]);
            }
            for &x in it.remainder() {
                acc[0] = acc[0].wrapping_add(x);
            }
            std::hint::black_box(acc.iter().fold(0u64, |a, &b| a.wrapping_add(b)))
        }
        BwKernel::Write => {
            // SAFETY: thread i writes only its own part of a live mapping.
            let s = unsafe { std::slice::from_raw_parts_mut(base.ptr() as *mut u64, words) };
            let (lo, hi) = part(words, threads, i);
            let v = std::hint::black_box(no.wrapping_mul(0x0101_0101_0101_0101) ^ 0x5A);
            for x in &mut s[lo..hi] {
                *x = v;
            }
            std::hint::black_box(s.get(lo).copied().unwrap_or(0))
        }
        BwKernel::Triad => {
            let n = words / 3;
            // SAFETY: three disjoint thirds of a live mapping; thread i
            // writes only its own part of `a`.
            let (a, b, c) = unsafe {
                let p = base.ptr() as *mut f64;
                (
                    std::slice::from_raw_parts_mut(p, n),
                    std::slice::from_raw_parts(p.add(n) as *const f64, n),
                    std::slice::from_raw_parts(p.add(2 * n) as *const f64, n),
                )
            };
            let (lo, hi) = part(n, threads, i);
            let s = std::hint::black_box(3.0f64);
            for ((x, &y), &z) in a[lo..hi].iter_mut().zip(&b[lo..hi]).zip(&c[lo..hi]) {
                *x = y + s * z;
            }
            std::hint::black_box(a.get(lo).copied().unwrap_or(0.0).to_bits())
        }
    }
}

/// Bytes one pass of `k` moves over a region of `len` bytes.
fn pass_bytes(k: BwKernel, len: usize) -> usize {
    match k {
        BwKernel::Read | BwKernel::Write => len / 8 * 8,
        BwKernel::Triad => len / 8 / 3 * 3 * 8,
    }
}

/// MB/s (10^6 bytes/s) of `k` over `region`, `threads` threads pinned to
/// `cpus`: one untimed pass, then as many passes as fill `duration`
/// seconds (at least one), timed together.
pub fn measure_bw(
    region: &Region,
    cpus: &[u32],
    threads: usize,
    duration: f64,
    k: BwKernel,
) -> f64 {
    let base = SendPtr(region.as_ptr());
    let words = region.len() / 8;
    let (warm_ns, _) = run_threads(cpus, threads, |i| pass(k, base, words, i, threads, 0));
    let passes = ((duration * 1e9 / warm_ns as f64).round() as u64).clamp(1, 1_000_000);
    let (ns, _) = run_threads(cpus, threads, |i| {
        let mut x = 0u64;
        for p in 0..passes {
            x = x.wrapping_add(pass(k, base, words, i, threads, p + 1));
        }
        x
    });
    pass_bytes(k, region.len()) as f64 * passes as f64 * 1e3 / ns as f64
}

/// Load latency (ns) by pointer chase through `region`'s 64-byte lines in
/// one random cycle, on one thread pinned to `cpu`.
pub fn measure_latency(region: &Region, cpu: Option<u32>, duration: f64, seed: u64) -> f64 {
    const LINE: usize = 64;
    let lines = region.len() / LINE;
    if lines < 2 {
        return 0.0;
    }
    // Sattolo's algorithm: a uniformly random single cycle.
    let mut perm: Vec<u32> = (0..lines as u32).collect();
    let mut rng = Rng::new(seed);
    for i in (1..lines).rev() {
        let j = rng.below(i as u64) as usize;
        perm.swap(i, j);
    }
    // perm as a cycle: line perm[k] -> perm[k+1].
    let mut next = vec![0u64; lines];
    for k in 0..lines {
        next[perm[k] as usize] = perm[(k + 1) % lines] as u64 * LINE as u64;
    }
    for (l, &nx) in next.iter().enumerate() {
        region.write_at(l * LINE, &[nx]);
    }
    drop(next);
    let base = SendPtr(region.as_ptr());
    let chase = move |steps: u64| -> u64 {
        let mut off = 0u64;
        for _ in 0..steps {
            // SAFETY: every stored offset is a line start inside the region.
            off = unsafe { std::ptr::read_volatile(base.ptr().add(off as usize) as *const u64) };
        }
        off
    };
    let cpus: Vec<u32> = cpu.into_iter().collect();
    let warm = (lines as u64).min(20_000);
    let (wns, _) = run_threads(&cpus, 1, |_| chase(warm));
    let per = wns as f64 / warm as f64;
    let steps = ((duration * 1e9 / per) as u64).clamp(1000, 100_000_000);
    let (ns, _) = run_threads(&cpus, 1, |_| std::hint::black_box(chase(steps)));
    ns as f64 / steps as f64
}

// ---------------------------------------------------------------------------
// The calibration
// ---------------------------------------------------------------------------

/// The CPUs that measure node `nid` (its own, else its nearest CPU node's)
/// and that node.
pub fn measuring_cpus(topo: &Topology, nid: u32) -> (u32, Vec<u32>) {
    let cn = nearest_cpu_node(topo, nid).unwrap_or(nid);
    (cn, node_cpus(cn))
}

/// Measures every memory node (or `opts.nodes`), then probes the regime.
/// `log` gets one line per step.
pub fn calibrate(topo: &Topology, opts: &Opts, log: &mut dyn FnMut(String)) -> Result<Calibration> {
    let t0 = monotonic_ns();
    let cxl_nodes = crate::cxl::cxl_nodes();
    let nodes: Vec<u32> = match &opts.nodes {
        Some(v) => v.clone(),
        None => topo.memory.clone(),
    };
    if nodes.is_empty() {
        bail!("no memory nodes to calibrate");
    }
    let mut out = Vec::new();
    for &nid in &nodes {
        let (cpu_node, cpus) = measuring_cpus(topo, nid);
        let threads = if opts.threads == 0 {
            cpus.len().max(1)
        } else {
            opts.threads
        };
        let region = Region::new(&Placement::Bind(nid), opts.size)
            .with_context(|| format!("{} bound to node {nid}", fmt_size(opts.size)))?;
        let pages = region.node_pages().unwrap_or_default();
        let off: usize = pages
            .iter()
            .filter(|p| p.0 != nid as i32)
            .map(|p| p.1)
            .sum();
        if off > 0 {
            bail!(
                "node {nid}: {off} pages of the bound buffer are elsewhere ({})",
                fmt_pages(&pages)
            );
        }
        let read = measure_bw(&region, &cpus, threads, opts.duration, BwKernel::Read);
        let write = measure_bw(&region, &cpus, threads, opts.duration, BwKernel::Write);
        let triad = measure_bw(&region, &cpus, threads, opts.duration, BwKernel::Triad);
        let lat = measure_latency(
            &region,
            cpus.first().copied(),
            opts.duration,
            0x1234 + nid as u64,
        );
        let n = NodeCal {
            nid,
            kind: node_kind(topo, nid, &cxl_nodes).into(),
            cpu_node,
            cpus: cpus.clone(),
            threads,
            read_mbps: read,
            write_mbps: write,
            triad_mbps: triad,
            latency_ns: lat,
            hmat: hmat_of(nid),
        };
        log(format!(
            "node {nid} ({}): read {:.0} write {:.0} triad {:.0} MB/s, latency {:.0} ns ({} thread(s) on node {cpu_node}'s CPUs, {})",
            n.kind,
            read,
            write,
            triad,
            lat,
            threads,
            fmt_size(region.len())
        ));
        out.push(n);
    }
    let mut cal = Calibration {
        size: opts.size,
        duration: opts.duration,
        nodes: out,
        probe: None,
        regime: Regime::Parallel.name().into(),
        elapsed_s: 0.0,
    };
    if opts.probe && cal.nodes.len() >= 2 {
        let p = probe(topo, &cal, opts)?;
        log(format!(
            "regime probe: read on pages {} (blocks {}): measured {:.0} MB/s, serial model {:.0}, parallel model {:.0} -> {}",
            fmt_pages(&p.pages),
            p.pattern
                .iter()
                .map(|(n, w)| format!("{n}:{w}"))
                .collect::<Vec<_>>()
                .join(","),
            p.measured_mbps,
            p.serial_mbps,
            p.parallel_mbps,
            p.regime
        ));
        cal.regime = p.regime.clone();
        cal.probe = Some(p);
    }
    cal.elapsed_s = (monotonic_ns() - t0) as f64 / 1e9;
    Ok(cal)
}

/// Pages per cycle for each node, in proportion to `bw`, the smallest
/// share 1 and none above 255.
pub fn proportional_pattern(bw: &[(u32, f64)]) -> Vec<(u32, u32)> {
    let min = bw
        .iter()
        .map(|b| b.1)
        .filter(|&b| b > 0.0)
        .fold(f64::INFINITY, f64::min);
    let max = bw.iter().map(|b| b.1).fold(0.0, f64::max);
    if !min.is_finite() || max <= 0.0 {
        return bw.iter().map(|b| (b.0, 1)).collect();
    }
    let scale = if max / min > 255.0 {
        255.0 / max
    } else {
        1.0 / min
    };
    bw.iter()
        .map(|&(n, b)| (n, ((b * scale).round() as u32).clamp(1, 255)))
        .collect()
}

/// The regime probe (see the module documentation).
pub fn probe(topo: &Topology, cal: &Calibration, opts: &Opts) -> Result<Probe> {
    let bw: Vec<(u32, f64)> = cal.nodes.iter().map(|n| (n.nid, n.read_mbps)).collect();
    let pattern = proportional_pattern(&bw);
    // The CPUs of the first DRAM node (or the first node's nearest).
    let first = cal
        .nodes
        .iter()
        .find(|n| n.kind == "dram")
        .unwrap_or(&cal.nodes[0]);
    let (_, cpus) = measuring_cpus(topo, first.nid);
    let region = Region::new(&Placement::Pattern(pattern.clone()), opts.size)
        .context("the regime probe's buffer")?;
    let pages = region.node_pages().unwrap_or_default();
    let measured = measure_bw(&region, &cpus, first.threads, opts.duration, BwKernel::Read);
    let rates = cal.rates(Workload::Read);
    let amounts = amounts_of(&pages);
    let serial = model::predict_amounts(Regime::Serial, &rates, &amounts);
    let parallel = model::predict_amounts(Regime::Parallel, &rates, &amounts);
    let err = |p: f64| {
        if p > 0.0 {
            (measured / p).ln().abs()
        } else {
            f64::INFINITY
        }
    };
    let regime = if err(serial) < err(parallel) {
        Regime::Serial
    } else {
        Regime::Parallel
    };
    Ok(Probe {
        pattern,
        pages,
        measured_mbps: measured,
        serial_mbps: serial,
        parallel_mbps: parallel,
        regime: regime.name().into(),
    })
}

/// The workloads the model has costs for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// The calibration's read kernel (the regime probe).
    Read,
    /// XSBench-style lookups: latency-bound.
    Lookup,
    Copy,
    Scale,
    Add,
    Triad,
}

impl Workload {
    /// `lookup`, `copy`, ...; `stream` and `bandwidth` mean triad.
    pub fn from_name(s: &str) -> Option<Workload> {
        Some(match s {
            "read" => Workload::Read,
            "lookup" | "xsbench" => Workload::Lookup,
            "copy" => Workload::Copy,
            "scale" => Workload::Scale,
            "add" => Workload::Add,
            "triad" | "stream" | "bandwidth" => Workload::Triad,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Workload::Read => "read",
            Workload::Lookup => "lookup",
            Workload::Copy => "copy",
            Workload::Scale => "scale",
            Workload::Add => "add",
            Workload::Triad => "triad",
        }
    }
}

impl Calibration {
    pub fn regime(&self) -> Regime {
        Regime::from_name(&self.regime).unwrap_or(Regime::Parallel)
    }

    pub fn node(&self, nid: u32) -> Option<&NodeCal> {
        self.nodes.iter().find(|n| n.nid == nid)
    }

    /// Nodemask of the calibrated nodes.
    pub fn mask(&self) -> u64 {
        crate::node::mask_of(&self.nodes.iter().map(|n| n.nid).collect::<Vec<_>>())
    }

    /// The model's per-node rates for `w`: MB/s for the streaming kernels
    /// (copy and scale read one array and write one: from read and write
    /// bandwidth; add and triad: the triad kernel, same mix of two reads
    /// and a write), and for the lookup `1/latency` relative to the first
    /// node (see [`Calibration::lookup_rates`] for absolute figures).
    pub fn rates(&self, w: Workload) -> Rates {
        let mut r = [0.0; 64];
        let lat0 = self.nodes.first().map(|n| n.latency_ns).unwrap_or(0.0);
        for n in &self.nodes {
            if n.nid >= 64 {
                continue;
            }
            r[n.nid as usize] = match w {
                Workload::Read => n.read_mbps,
                Workload::Copy | Workload::Scale => {
                    model::stream_rate(n.read_mbps, n.write_mbps, 1, 1)
                }
                Workload::Add | Workload::Triad => n.triad_mbps,
                Workload::Lookup => model::latency_rate(1.0, lat0, n.latency_ns),
            };
        }
        r
    }

    /// Lookups/s per node from the latencies, anchored at a measured rate
    /// `anchor_rate` on node `anchor`: `anchor_rate · lat_anchor / lat_i`.
    pub fn lookup_rates(&self, anchor: u32, anchor_rate: f64) -> Rates {
        let mut r = [0.0; 64];
        let Some(a) = self.node(anchor) else {
            return r;
        };
        for n in &self.nodes {
            if n.nid < 64 {
                r[n.nid as usize] = model::latency_rate(anchor_rate, a.latency_ns, n.latency_ns);
            }
        }
        r
    }

    /// `(nid, read, write)` MB/s as measured, for tierkit's `bandwidth`
    /// file (at least 1, so that a very slow node is not "no data").
    pub fn measured_entries(&self) -> Vec<(u32, u32, u32)> {
        self.nodes
            .iter()
            .map(|n| {
                (
                    n.nid,
                    (n.read_mbps.round() as u32).max(1),
                    (n.write_mbps.round() as u32).max(1),
                )
            })
            .collect()
    }

    /// `(nid, read, write)` MB/s from HMAT, for the nodes that have it.
    pub fn hmat_entries(&self) -> Vec<(u32, u32, u32)> {
        self.nodes
            .iter()
            .filter_map(|n| n.hmat.as_ref().map(|h| (n.nid, h.read_mbps, h.write_mbps)))
            .collect()
    }

    /// The model's recommendation for `w` over the calibrated nodes.
    pub fn recommend(&self, w: Workload) -> Option<model::Recommendation> {
        model::recommend(self.regime(), &self.rates(w), Nodemask(self.mask()), 255)
    }

    /// The table `tk-calibrate` prints: measured against HMAT, and the
    /// kernel formula's weights from each.
    pub fn table(&self, memory: u64) -> Vec<String> {
        let wm = weights_from_bandwidth(&self.measured_entries(), memory);
        let he = self.hmat_entries();
        let wh = (!he.is_empty()).then(|| weights_from_bandwidth(&he, memory));
        let mut v = vec![format!(
            "{:<4} {:<11} {:>4} {:>10} {:>10} {:>10} {:>8} | {:>10} {:>10} {:>8} | {:>7} {:>7}",
            "node",
            "kind",
            "T",
            "read MB/s",
            "write MB/s",
            "triad MB/s",
            "lat ns",
            "HMAT rd",
            "HMAT wr",
            "HMAT ns",
            "w(HMAT)",
            "w(meas)"
        )];
        for n in &self.nodes {
            let h = n.hmat.as_ref();
            let i = (n.nid as usize).min(63);
            v.push(format!(
                "{:<4} {:<11} {:>4} {:>10.0} {:>10.0} {:>10.0} {:>8.0} | {:>10} {:>10} {:>8} | {:>7} {:>7}",
                n.nid,
                n.kind,
                n.threads,
                n.read_mbps,
                n.write_mbps,
                n.triad_mbps,
                n.latency_ns,
                h.map_or("-".into(), |h| h.read_mbps.to_string()),
                h.map_or("-".into(), |h| h.write_mbps.to_string()),
                h.and_then(|h| h.read_latency_ns)
                    .map_or("-".into(), |l| l.to_string()),
                wh.map_or("-".into(), |w| w[i].to_string()),
                wm[i],
            ));
        }
        v
    }

    pub fn save(&self, path: &str) -> Result<()> {
        std::fs::write(path, serde_json::to_string_pretty(self)?)
            .with_context(|| format!("writing {path}"))
    }

    pub fn load(path: &str) -> Result<Calibration> {
        let s = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
        serde_json::from_str(&s).with_context(|| format!("parsing {path}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cal() -> Calibration {
        let node = |nid, kind: &str, rd, wr, tr, lat| NodeCal {
            nid,
            kind: kind.into(),
            read_mbps: rd,
            write_mbps: wr,
            triad_mbps: tr,
            latency_ns: lat,
            threads: 2,
            ..Default::default()
        };
        Calibration {
            nodes: vec![
                node(0, "dram", 3150.0, 13200.0, 4000.0, 235.0),
                node(2, "cxl", 30.0, 50.0, 35.0, 571.0),
            ],
            regime: "serial".into(),
            ..Default::default()
        }
    }

    #[test]
    fn weights_like_the_kernel() {
        // The cxl guest's HMAT: 20480 and 10240 MB/s -> 21:10.
        let w = weights_from_bandwidth(&[(0, 20480, 20480), (2, 10240, 10240)], 0b101);
        assert_eq!((w[0], w[2]), (21, 10));
        // Measured: 3150 vs 30 (min of read, write) -> 31:1.
        let c = cal();
        let w = weights_from_bandwidth(&c.measured_entries(), 0b101);
        assert_eq!((w[0], w[2]), (31, 1));
    }

    #[test]
    fn rates_per_workload() {
        let c = cal();
        let r = c.rates(Workload::Copy);
        assert!((r[0] - 2.0 / (1.0 / 3150.0 + 1.0 / 13200.0)).abs() < 1e-6);
        assert_eq!(c.rates(Workload::Triad)[2], 35.0);
        let l = c.rates(Workload::Lookup);
        assert_eq!(l[0], 1.0);
        assert!((l[2] - 235.0 / 571.0).abs() < 1e-12);
        let a = c.lookup_rates(0, 1000.0);
        assert!((a[2] - 1000.0 * 235.0 / 571.0).abs() < 1e-9);
        // Serial: the recommendation is DRAM alone.
        let rec = c.recommend(Workload::Triad).unwrap();
        assert_eq!(rec.mask, Nodemask(0b1));
        assert_eq!(Workload::from_name("stream"), Some(Workload::Triad));
        assert_eq!(Workload::from_name("nope"), None);
    }

    #[test]
    fn patterns() {
        assert_eq!(
            proportional_pattern(&[(0, 3000.0), (2, 30.0)]),
            vec![(0, 100), (2, 1)]
        );
        assert_eq!(
            proportional_pattern(&[(0, 13200.0), (2, 5.0)]),
            vec![(0, 255), (2, 1)]
        );
        assert_eq!(
            proportional_pattern(&[(0, 10.0), (1, 10.0)]),
            vec![(0, 1), (1, 1)]
        );
        assert_eq!(
            proportional_pattern(&[(0, 0.0), (1, 0.0)]),
            vec![(0, 1), (1, 1)]
        );
    }

    #[test]
    fn table_and_json_round_trip() {
        let c = cal();
        let t = c.table(0b101);
        assert_eq!(t.len(), 3);
        assert!(t[2].contains("cxl"), "{}", t[2]);
        let p = std::env::temp_dir().join(format!("tk-cal-{}.json", std::process::id()));
        let p = p.to_str().unwrap();
        c.save(p).unwrap();
        assert_eq!(Calibration::load(p).unwrap(), c);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn measures_on_the_host() {
        let r = Region::new(&Placement::Local, 1 << 20).unwrap();
        for k in [BwKernel::Read, BwKernel::Write, BwKernel::Triad] {
            let bw = measure_bw(&r, &[], 2, 0.01, k);
            assert!(bw > 0.0 && bw.is_finite(), "{k:?} {bw}");
        }
        let lat = measure_latency(&r, None, 0.01, 1);
        assert!(lat > 0.0 && lat < 1e6, "{lat}");
    }
}
