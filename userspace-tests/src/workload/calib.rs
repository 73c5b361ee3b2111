//! Calibration: what each memory node delivers, measured from its nearest
//! CPUs, next to what HMAT (or the CXL region's CDAT-derived `access1`)
//! claims, and the weights each gives with the kernel's formula.
//!
//! Per node, on a buffer of `size` bytes bound to it (`MPOL_BIND`, every
//! page faulted in), as three arrays of doubles, T threads each on its own
//! part, one untimed pass first:
//! - **read**: a sum of every word; **write**: a store to every word;
//! - STREAM's **copy**, **scale**, **add** and **triad** (the workloads'
//!   own kernels: under emulation floating point costs far more than a
//!   plain load, so read and write alone would not predict them);
//! - **latency**: one thread chasing pointers through a second bound
//!   buffer's cache lines in one random cycle (Sattolo), ns per load.
//!
//! Every measurement is repeated in rounds, round robin over the nodes;
//! every block does the same work, timed in chunks, and each chunk's best
//! time counts (`kernels::ChunkMins`): on a loaded machine interference
//! only ever slows a chunk down.
//!
//! The threads run on the CPUs of the node, or for a CPU-less node of the
//! nearest node with CPUs (`nodeN/distance`), one per CPU round robin.
//!
//! **Regime probe** (two or more nodes): the read kernel on a buffer whose
//! pages are spread over the nodes in proportion to their read bandwidth
//! (from a first round; blocks bound with `MPOL_BIND`, the layout of
//! weighted interleave with those weights), timed in the further rounds,
//! side by side with the nodes. There the two regimes differ most:
//! the parallel model predicts the sum of the bandwidths, the serial one
//! their mean. The regime whose prediction is closer (in log ratio) is the
//! one the model uses for this machine.

use super::kernels::{Arrays, Block, Bw, ChunkMins};
use super::{amounts_of, fmt_pages, Rng, SendPtr};
use super::{
    fmt_size, in_guest, nearest_cpu_node, node_cpus, run_threads_settled, Placement, Region,
};
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
    /// Rounds: every measurement is repeated this many times, round robin
    /// over the nodes, and the best counts.
    pub rounds: usize,
}

impl Opts {
    /// Guest defaults (`$TIERKIT_MODE` set): 16 MiB (the STREAM working
    /// set), 0.15 s per block, 3 rounds, one thread (a block of T threads
    /// needs T free host CPUs at once, and the host is shared). Bare
    /// metal: 1 GiB (larger than any LLC), 1 s per block, every CPU of the
    /// nearest node.
    pub fn defaults() -> Opts {
        let (size, duration, threads) = if in_guest() {
            (16 << 20, 0.15, 1)
        } else {
            (1 << 30, 1.0, 0)
        };
        Opts {
            size,
            threads,
            duration,
            nodes: None,
            probe: true,
            rounds: 3,
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
    /// 10^6 bytes/s, each the best of the rounds: a plain read and a
    /// plain write of the three arrays, and STREAM's four kernels.
    pub read_mbps: f64,
    pub write_mbps: f64,
    #[serde(default)]
    pub copy_mbps: f64,
    #[serde(default)]
    pub scale_mbps: f64,
    #[serde(default)]
    pub add_mbps: f64,
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
    #[serde(default)]
    pub rounds: usize,
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
// Latency
// ---------------------------------------------------------------------------

/// Bytes per pointer-chase element: one cache line.
const LINE: usize = 64;

/// Writes one random cycle through `region`'s 64-byte lines (Sattolo's
/// algorithm): the first word of each line holds the byte offset of the
/// next.
pub fn prepare_chase(region: &Region, seed: u64) {
    let lines = region.len() / LINE;
    if lines < 2 {
        return;
    }
    let mut perm: Vec<u32> = (0..lines as u32).collect();
    let mut rng = Rng::new(seed);
    for i in (1..lines).rev() {
        let j = rng.below(i as u64) as usize;
        perm.swap(i, j);
    }
    let mut next = vec![0u64; lines];
    for k in 0..lines {
        next[perm[k] as usize] = perm[(k + 1) % lines] as u64 * LINE as u64;
    }
    for (l, &nx) in next.iter().enumerate() {
        region.write_at(l * LINE, &[nx]);
    }
}

/// Follows `steps` pointers from offset 0.
fn chase(base: SendPtr, steps: u64) -> u64 {
    chase_from(base, 0, steps)
}

/// `steps` loads of the cycle from offset `off`; returns where it ended.
fn chase_from(base: SendPtr, mut off: u64, steps: u64) -> u64 {
    for _ in 0..steps {
        // SAFETY: every stored offset is a line start inside the region.
        off = unsafe { std::ptr::read_volatile(base.ptr().add(off as usize) as *const u64) };
    }
    off
}

/// Loads per timed chunk of a pointer chase.
const CHASE_CHUNK: u64 = 256;

/// A latency measurement that can be repeated in rounds: every block
/// walks the same cycle from the same start, timed chunk by chunk
/// ([`CHASE_CHUNK`] loads), and `best_ns` is the time per load at each
/// chunk's best time over the blocks so far ([`ChunkMins`]).
#[derive(Clone, Debug)]
pub struct Chase {
    steps: u64,
    pub best_ns: f64,
    mins: ChunkMins,
}

impl Chase {
    /// Builds the cycle in `region` and sizes a block of `duration` s.
    pub fn new(region: &Region, cpu: Option<u32>, duration: f64, seed: u64) -> Chase {
        prepare_chase(region, seed);
        let base = SendPtr(region.as_ptr());
        let cpus: Vec<u32> = cpu.into_iter().collect();
        let warm = ((region.len() / LINE) as u64).clamp(1, 20_000);
        let (ns, _) = run_threads_settled(&cpus, 1, base, region.len(), |_| chase(base, warm));
        let per = ns as f64 / warm as f64;
        Chase {
            steps: ((duration * 1e9 / per) as u64)
                .clamp(1000, 100_000_000)
                .div_ceil(CHASE_CHUNK)
                * CHASE_CHUNK,
            best_ns: f64::INFINITY,
            mins: ChunkMins::default(),
        }
    }

    /// One timed block on one thread pinned to `cpu`: ns per load of the
    /// whole block (`best_ns` is updated from the chunks).
    pub fn run(&mut self, region: &Region, cpu: Option<u32>) -> f64 {
        let base = SendPtr(region.as_ptr());
        let cpus: Vec<u32> = cpu.into_iter().collect();
        let chunks = self.steps / CHASE_CHUNK;
        let (ns, res) = run_threads_settled(&cpus, 1, base, region.len(), |_| {
            let mut times = Vec::with_capacity(chunks as usize);
            let mut off = 0u64;
            let mut t0 = monotonic_ns();
            for _ in 0..chunks {
                off = chase_from(base, off, CHASE_CHUNK);
                let t1 = monotonic_ns();
                times.push(t1 - t0);
                t0 = t1;
            }
            std::hint::black_box(off);
            times
        });
        if let Some(times) = res.first() {
            self.mins.add(times);
        }
        if !self.mins.is_empty() {
            self.best_ns =
                self.mins.total_ns() as f64 / (self.mins.len() as u64 * CHASE_CHUNK) as f64;
        }
        ns as f64 / self.steps as f64
    }
}

/// Load latency (ns) by pointer chase through `region` (best of one
/// block, after sizing): for one-off measurements.
pub fn measure_latency(region: &Region, cpu: Option<u32>, duration: f64, seed: u64) -> f64 {
    let mut c = Chase::new(region, cpu, duration, seed);
    c.run(region, cpu)
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

/// One node being measured.
struct NodeRun {
    cal: NodeCal,
    region: Region,
    arrays: Arrays,
    blocks: Vec<Block>,
    chase_region: Region,
    chase: Chase,
}

/// Measures every memory node (or `opts.nodes`) in `opts.rounds` rounds
/// (each round: every kernel on every node, then the latency; the best
/// block of each counts), then probes the regime. `log` gets one line per
/// step.
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
    let mut runs = Vec::new();
    for &nid in &nodes {
        let (cpu_node, cpus) = measuring_cpus(topo, nid);
        let threads = if opts.threads == 0 {
            cpus.len().max(1)
        } else {
            opts.threads
        };
        let bound = |what: &str| -> Result<Region> {
            let region = Region::new(&Placement::Bind(nid), opts.size)
                .with_context(|| format!("{what}: {} bound to node {nid}", fmt_size(opts.size)))?;
            let pages = region.node_pages().unwrap_or_default();
            let off: usize = pages
                .iter()
                .filter(|p| p.0 != nid as i32)
                .map(|p| p.1)
                .sum();
            if off > 0 {
                bail!(
                    "node {nid}: {off} pages of the bound {what} are elsewhere ({})",
                    fmt_pages(&pages)
                );
            }
            Ok(region)
        };
        let region = bound("buffer")?;
        let chase_region = bound("pointer-chase buffer")?;
        let arrays = Arrays::new(&region);
        arrays.init(&cpus, threads);
        let blocks = Bw::ALL
            .iter()
            .map(|&k| Block::new(&arrays, k, &cpus, threads, opts.duration))
            .collect();
        let chase = Chase::new(
            &chase_region,
            cpus.first().copied(),
            opts.duration,
            0x1234 + nid as u64,
        );
        runs.push(NodeRun {
            cal: NodeCal {
                nid,
                kind: node_kind(topo, nid, &cxl_nodes).into(),
                cpu_node,
                cpus,
                threads,
                hmat: hmat_of(nid),
                ..Default::default()
            },
            region,
            arrays,
            blocks,
            chase_region,
            chase,
        });
    }
    // The regime probe, sized from the first (untimed) read passes and
    // measured in the same rounds as the nodes.
    let mut probe = None;
    if opts.probe && runs.len() >= 2 {
        let bw: Vec<(u32, f64)> = runs
            .iter()
            .map(|nr| (nr.cal.nid, nr.blocks[0].warm))
            .collect();
        let first = runs
            .iter()
            .find(|nr| nr.cal.kind == "dram")
            .unwrap_or(&runs[0]);
        probe = Some(ProbeRun::new(
            &bw,
            &first.cal.cpus,
            first.cal.threads,
            opts,
        )?);
    }
    for _ in 0..opts.rounds.max(1) {
        for nr in runs.iter_mut() {
            for b in nr.blocks.iter_mut() {
                b.run(&nr.arrays, &nr.cal.cpus, nr.cal.threads);
            }
            nr.chase.run(&nr.chase_region, nr.cal.cpus.first().copied());
        }
        if let Some(p) = probe.as_mut() {
            p.round();
        }
    }
    let mut out = Vec::new();
    for nr in runs {
        let mut n = nr.cal;
        let best = |k: Bw| {
            nr.blocks
                .iter()
                .find(|b| b.kernel == k)
                .map_or(0.0, |b| b.best)
        };
        n.read_mbps = best(Bw::Read);
        n.write_mbps = best(Bw::Write);
        n.copy_mbps = best(Bw::Copy);
        n.scale_mbps = best(Bw::Scale);
        n.add_mbps = best(Bw::Add);
        n.triad_mbps = best(Bw::Triad);
        n.latency_ns = nr.chase.best_ns;
        log(format!(
            "node {} ({}): read {:.0} write {:.0} copy {:.0} scale {:.0} add {:.0} triad {:.0} MB/s, latency {:.0} ns \
             ({} thread(s) on node {}'s CPUs, {}, best of {} rounds)",
            n.nid,
            n.kind,
            n.read_mbps,
            n.write_mbps,
            n.copy_mbps,
            n.scale_mbps,
            n.add_mbps,
            n.triad_mbps,
            n.latency_ns,
            n.threads,
            n.cpu_node,
            fmt_size(nr.region.len()),
            opts.rounds.max(1) + 1
        ));
        out.push(n);
    }
    let mut cal = Calibration {
        size: opts.size,
        duration: opts.duration,
        rounds: opts.rounds.max(1),
        nodes: out,
        probe: None,
        regime: Regime::Parallel.name().into(),
        elapsed_s: 0.0,
    };
    if let Some(pr) = probe {
        let p = pr.finish(&cal);
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

/// The regime probe while it runs (see the module documentation).
pub struct ProbeRun {
    pattern: Vec<(u32, u32)>,
    pages: Vec<(i32, usize)>,
    _region: Region,
    arrays: Arrays,
    block: Block,
    cpus: Vec<u32>,
    threads: usize,
}

impl ProbeRun {
    /// The probe's buffer, its pages spread in proportion to `bw`
    /// (`(node, read MB/s)`, a first estimate), read by `threads` threads
    /// on `cpus`.
    pub fn new(bw: &[(u32, f64)], cpus: &[u32], threads: usize, opts: &Opts) -> Result<ProbeRun> {
        let pattern = proportional_pattern(bw);
        let region = Region::new(&Placement::Pattern(pattern.clone()), opts.size)
            .context("the regime probe's buffer")?;
        let pages = region.node_pages().unwrap_or_default();
        let arrays = Arrays::new(&region);
        arrays.init(cpus, threads);
        let block = Block::new(&arrays, Bw::Read, cpus, threads, opts.duration);
        Ok(ProbeRun {
            pattern,
            pages,
            _region: region,
            arrays,
            block,
            cpus: cpus.to_vec(),
            threads,
        })
    }

    /// One timed block.
    pub fn round(&mut self) {
        self.block.run(&self.arrays, &self.cpus, self.threads);
    }

    /// The verdict, against the nodes' read bandwidth of the same rounds.
    pub fn finish(&self, cal: &Calibration) -> Probe {
        let measured = self.block.best;
        let rates = cal.rates(Workload::Read);
        let amounts = amounts_of(&self.pages);
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
        Probe {
            pattern: self.pattern.clone(),
            pages: self.pages.clone(),
            measured_mbps: measured,
            serial_mbps: serial,
            parallel_mbps: parallel,
            regime: regime.name().into(),
        }
    }
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

    /// The model's per-node rates for `w`: for the streaming kernels the
    /// node's calibrated MB/s of the same kernel (a calibration file
    /// without STREAM's kernels falls back to read and write, and to triad
    /// for add); for the lookup `1/latency` relative to the first node
    /// (what the recommendation needs; [`Calibration::lookup_rates`] gives
    /// absolute figures).
    pub fn rates(&self, w: Workload) -> Rates {
        let mut r = [0.0; 64];
        let lat0 = self.nodes.first().map(|n| n.latency_ns).unwrap_or(0.0);
        for n in &self.nodes {
            if n.nid >= 64 {
                continue;
            }
            let rw = || model::stream_rate(n.read_mbps, n.write_mbps, 1, 1);
            let or = |x: f64, f: f64| if x > 0.0 { x } else { f };
            r[n.nid as usize] = match w {
                Workload::Read => n.read_mbps,
                Workload::Copy => or(n.copy_mbps, rw()),
                Workload::Scale => or(n.scale_mbps, rw()),
                Workload::Add => or(n.add_mbps, n.triad_mbps),
                Workload::Triad => n.triad_mbps,
                Workload::Lookup => model::latency_rate(1.0, lat0, n.latency_ns),
            };
        }
        r
    }

    /// Whether loads from node `n` gain nothing from locality: a
    /// sequential word costs at least a quarter of a dependent random load
    /// (`8 bytes / read bandwidth >= latency / 4`). True of QEMU's CXL
    /// window, which it serves access by access; false of any DRAM or CXL
    /// hardware (a word streams in about a nanosecond, a miss takes about
    /// a hundred).
    pub fn no_locality(n: &NodeCal) -> bool {
        n.read_mbps > 0.0 && n.latency_ns > 0.0 && 8e3 / n.read_mbps >= n.latency_ns / 4.0
    }

    /// Lookups/s per node for a lookup of `loads = (random, streamed)`
    /// loads from the working set (see `XsData::load_mix`), anchored at a
    /// measured rate `anchor_rate` on node `anchor`:
    ///
    /// - a node with locality: `anchor_rate · lat_anchor / lat_i`: the
    ///   lookup is latency-bound and keeps the same number of loads in
    ///   flight everywhere, so its rate scales with the inverse latency;
    /// - a node without locality ([`Calibration::no_locality`]): every load
    ///   is paid in turn, a random one at the node's latency and a
    ///   streamed one at a word of its read bandwidth:
    ///   `1 / (random · lat_i + streamed · 8 B / read_i)`, times the
    ///   threads in the parallel regime (in the serial one they take
    ///   turns).
    pub fn lookup_rates(
        &self,
        anchor: u32,
        anchor_rate: f64,
        loads: (f64, f64),
        threads: usize,
    ) -> Rates {
        let mut r = [0.0; 64];
        let Some(a) = self.node(anchor) else {
            return r;
        };
        let par = match self.regime() {
            Regime::Parallel => threads.max(1) as f64,
            Regime::Serial => 1.0,
        };
        for n in &self.nodes {
            if n.nid >= 64 {
                continue;
            }
            let ns = loads.0 * n.latency_ns + loads.1 * 8e3 / n.read_mbps.max(1e-9);
            r[n.nid as usize] = if n.nid != anchor && Self::no_locality(n) && ns > 0.0 {
                par * 1e9 / ns
            } else {
                model::latency_rate(anchor_rate, a.latency_ns, n.latency_ns)
            };
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
            "{:<4} {:<11} {:>3} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} | {:>8} {:>8} {:>7} | {:>7} {:>7}",
            "node",
            "kind",
            "T",
            "read",
            "write",
            "copy",
            "scale",
            "add",
            "triad",
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
                "{:<4} {:<11} {:>3} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>7.0} | {:>8} {:>8} {:>7} | {:>7} {:>7}",
                n.nid,
                n.kind,
                n.threads,
                n.read_mbps,
                n.write_mbps,
                n.copy_mbps,
                n.scale_mbps,
                n.add_mbps,
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
            copy_mbps: 0.0,
            scale_mbps: tr * 0.5,
            add_mbps: 0.0,
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
        // Copy: no figure (an old file): from read and write; scale: its own.
        let r = c.rates(Workload::Copy);
        assert!((r[0] - 2.0 / (1.0 / 3150.0 + 1.0 / 13200.0)).abs() < 1e-6);
        assert_eq!(c.rates(Workload::Scale)[0], 2000.0);
        assert_eq!(c.rates(Workload::Add)[0], 4000.0);
        assert_eq!(c.rates(Workload::Triad)[2], 35.0);
        let l = c.rates(Workload::Lookup);
        assert_eq!(l[0], 1.0);
        assert!((l[2] - 235.0 / 571.0).abs() < 1e-12);
        // QEMU's CXL: 8 B / 30 MB/s = 267 ns a word, latency 571: no
        // locality, every load paid. DRAM: 2.5 ns a word against 235.
        assert!(Calibration::no_locality(&c.nodes[1]));
        assert!(!Calibration::no_locality(&c.nodes[0]));
        // 30 random loads at 571 ns, 90 streamed words at 8 B / 30 MB/s.
        let ns = 30.0 * 571.0 + 90.0 * 8e3 / 30.0;
        let a = c.lookup_rates(0, 1000.0, (30.0, 90.0), 2);
        assert_eq!(a[0], 1000.0);
        assert!((a[2] - 1e9 / ns).abs() < 1e-6, "{}", a[2]);
        // Parallel regime: the threads add up; with locality, the ratio.
        let mut p = c.clone();
        p.regime = "parallel".into();
        assert!((p.lookup_rates(0, 1000.0, (30.0, 90.0), 2)[2] - 2e9 / ns).abs() < 1e-6);
        p.nodes[1].read_mbps = 10_000.0;
        assert!(
            (p.lookup_rates(0, 1000.0, (30.0, 90.0), 2)[2] - 1000.0 * 235.0 / 571.0).abs() < 1e-9
        );
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
        let lat = measure_latency(&r, None, 0.01, 1);
        assert!(lat > 0.0 && lat < 1e6, "{lat}");
        // The whole calibration on this host's nodes, tiny.
        let topo = Topology::read().unwrap();
        if !topo.memory.is_empty() {
            let o = Opts {
                size: 1 << 20,
                threads: 2,
                duration: 0.002,
                nodes: None,
                probe: true,
                rounds: 2,
            };
            let mut lines = Vec::new();
            let c = calibrate(&topo, &o, &mut |l| lines.push(l)).unwrap();
            assert_eq!(c.nodes.len(), topo.memory.len());
            let n = &c.nodes[0];
            for x in [
                n.read_mbps,
                n.write_mbps,
                n.copy_mbps,
                n.scale_mbps,
                n.add_mbps,
                n.triad_mbps,
                n.latency_ns,
            ] {
                assert!(x > 0.0 && x.is_finite(), "{n:?}");
            }
            assert!(lines[0].contains("best of 3 rounds"), "{lines:?}");
        }
    }
}
