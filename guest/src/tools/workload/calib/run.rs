//! The calibration run: every node measured in rounds, then the regime
//! probe ([`calibrate`]).

use super::*;

/// The CPUs that measure node `nid` (its own, else its nearest CPU node's)
/// and that node.
pub fn measuring_cpus(topo: &Topology, nid: u32) -> (u32, Vec<u32>) {
    let cn = nearest_cpu_node(topo, nid).unwrap_or(nid);
    (cn, node_cpus(cn))
}

/// One node being measured.
pub(super) struct NodeRun {
    pub(super) cal: NodeCal,
    pub(super) region: Region,
    pub(super) arrays: Arrays,
    pub(super) blocks: Vec<Block>,
    pub(super) chase_region: Region,
    pub(super) chase: Chase,
}

impl NodeRun {
    /// Node `nid`'s buffers (bound to it, every page on it), arrays,
    /// blocks and pointer chase, not yet timed; measured by `cpus` (of
    /// node `cpu_node`).
    fn new(
        topo: &Topology,
        opts: &Opts,
        nid: u32,
        cxl_nodes: &[u32],
        (cpu_node, cpus): (u32, Vec<u32>),
    ) -> Result<NodeRun> {
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
        Ok(NodeRun {
            cal: NodeCal {
                nid,
                kind: node_kind(topo, nid, cxl_nodes).into(),
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
        })
    }

    /// The node's figures: the best block of each kernel and the best
    /// latency; `log` gets its line.
    fn finish(self, opts: &Opts, log: &mut dyn FnMut(String)) -> NodeCal {
        let mut n = self.cal;
        let best = |k: Bw| {
            self.blocks
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
        n.latency_ns = self.chase.best_ns;
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
        fmt_size(self.region.len()),
        opts.rounds.max(1) + 1
    ));
        n
    }
}

/// Measures every memory node (or `opts.nodes`) in `opts.rounds` rounds
/// (each round: every kernel on every node, then the latency; the best
/// block of each counts), then probes the regime. `log` gets one line per
/// step.
pub fn calibrate(topo: &Topology, opts: &Opts, log: &mut dyn FnMut(String)) -> Result<Calibration> {
    let t0 = monotonic_ns();
    let cxl_nodes = crate::topology::cxl::cxl_nodes();
    let nodes = calibrated_nodes(topo, opts)?;
    let mut runs = nodes
        .iter()
        .map(|&nid| NodeRun::new(topo, opts, nid, &cxl_nodes, measuring_cpus(topo, nid)))
        .collect::<Result<Vec<_>>>()?;
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
        round(&mut runs);
        if let Some(p) = probe.as_mut() {
            p.round();
        }
    }
    let out: Vec<NodeCal> = runs.into_iter().map(|nr| nr.finish(opts, log)).collect();
    let mut cal = Calibration {
        size: opts.size,
        duration: opts.duration,
        rounds: opts.rounds.max(1),
        nodes: out,
        probe: None,
        regime: Regime::Parallel.name().into(),
        elapsed_s: 0.0,
        sockets: Vec::new(),
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

/// One round: every kernel on every node, then each node's latency.
fn round(runs: &mut [NodeRun]) {
    for nr in runs.iter_mut() {
        for b in nr.blocks.iter_mut() {
            b.run(&nr.arrays, &nr.cal.cpus, nr.cal.threads);
        }
        nr.chase.run(&nr.chase_region, nr.cal.cpus.first().copied());
    }
}

/// The nodes a calibration measures: `opts.nodes`, else every node with
/// memory.
fn calibrated_nodes(topo: &Topology, opts: &Opts) -> Result<Vec<u32>> {
    let nodes = opts.nodes.clone().unwrap_or_else(|| topo.memory.clone());
    if nodes.is_empty() {
        bail!("no memory nodes to calibrate");
    }
    Ok(nodes)
}

/// `--per-socket`: socket `socket`'s calibration. Every memory node (or
/// `opts.nodes`) measured as [`calibrate`] measures it, in the same rounds,
/// but by threads on `cpus` (the socket's CPUs, of its CPU nodes
/// `cpu_nodes`) whatever node is nearest; the socket's table is the
/// kernel's formula on those figures ([`table_from_bandwidth`]).
pub fn calibrate_socket(
    topo: &Topology,
    opts: &Opts,
    socket: u32,
    (cpu_nodes, cpus): (u64, Vec<u32>),
    log: &mut dyn FnMut(String),
) -> Result<SocketCal> {
    let nodes = calibrated_nodes(topo, opts)?;
    if cpus.is_empty() {
        bail!("socket {socket} has no CPU to measure from");
    }
    let cxl_nodes = crate::topology::cxl::cxl_nodes();
    let first = crate::topology::node::nodes_of(cpu_nodes)
        .first()
        .copied()
        .unwrap_or(0);
    let mut runs = nodes
        .iter()
        .map(|&nid| NodeRun::new(topo, opts, nid, &cxl_nodes, (first, cpus.clone())))
        .collect::<Result<Vec<_>>>()?;
    for _ in 0..opts.rounds.max(1) {
        round(&mut runs);
    }
    let mut prefixed = |l: String| log(format!("socket {socket}: {l}"));
    let out: Vec<NodeCal> = runs
        .into_iter()
        .map(|nr| nr.finish(opts, &mut prefixed))
        .collect();
    let sc = SocketCal {
        socket,
        cpu_nodes: crate::topology::node::nodes_of(cpu_nodes),
        cpus,
        nodes: out,
        weights: Vec::new(),
    };
    let mask = sc.mask();
    let t = table_from_bandwidth(&sc.measured_entries(), mask);
    Ok(SocketCal {
        weights: crate::topology::node::nodes_of(mask)
            .into_iter()
            .map(|n| (n, t[n as usize]))
            .collect(),
        ..sc
    })
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
    pub(super) pattern: Vec<(u32, u32)>,
    pub(super) pages: Vec<(i32, usize)>,
    pub(super) _region: Region,
    pub(super) arrays: Arrays,
    pub(super) block: Block,
    pub(super) cpus: Vec<u32>,
    pub(super) threads: usize,
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
