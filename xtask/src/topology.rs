//! Guest NUMA topologies and their QEMU arguments.
//!
//! Node ids: CPU+DRAM nodes first (0..k), then memory-only nodes. Every
//! memory-only node names a CPU node as its initiator (HMAT needs one), and
//! `-numa hmat-lb` entries give every (initiator, target) pair a latency and
//! a bandwidth, so the kernel's weighted-interleave auto weights follow them.
//!
//! `--topology cxl` has one CPU+DRAM node (node 0) and [`CxlDevice`]s: QEMU
//! `cxl-type3` volatile devices, each behind its own CXL host bridge
//! (`pxb-cxl`), root port (`cxl-rp`) and fixed memory window (`cxl-fmw`),
//! with an ACPI generic port (`acpi-generic-port`) whose proximity domain
//! (nodes 1..=n in QEMU, memory-less, CPU-less) carries the HMAT latency and
//! bandwidth from node 0 to the host bridge. The guest kernel's CXL drivers
//! assemble each device into a RAM region (the guest's /init does that, see
//! `guest/init.sh`); the region's dax device is onlined by kmem as a new
//! CPU-less node whose number the kernel picks (a CFMWS window without SRAT
//! memory gets a fresh node), and whose performance the kernel computes from
//! the generic port's HMAT entries plus the device's CDAT and link.
//!
//! With [`CxlInterleave`] (`--cxl-interleave WAYS[:GRANULARITY]`) the
//! devices come in groups of WAYS: each group shares one host bridge (one
//! `cxl-rp` root port per device, `port=0..WAYS-1`), one generic port and one
//! window (`cxl-fmw.<g>.interleave-granularity=`), and /init assembles one
//! region interleaved across the group's devices.

use anyhow::{bail, Result};
use std::fmt;

/// HMAT performance of one initiator -> target pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Perf {
    pub latency_ns: u32,
    /// GB/s as QEMU's `bandwidth=NG` takes it (the guest sees N*1024 MB/s).
    pub bandwidth_gbs: u32,
}

impl Perf {
    /// Parses `LATENCY:BANDWIDTH`, e.g. `100:20G` or `250ns:10G` (ns, GB/s).
    pub fn parse(s: &str) -> std::result::Result<Perf, String> {
        let (l, b) = s.split_once(':').ok_or_else(|| {
            format!("`{s}`: expected LATENCY_NS:BANDWIDTH_GBS, e.g. 100:20G or 250ns:10G")
        })?;
        let lat = l.trim().trim_end_matches("ns");
        let bw = b.trim().to_ascii_lowercase();
        let bw = bw
            .strip_suffix("gb/s")
            .or_else(|| bw.strip_suffix("gbs"))
            .or_else(|| bw.strip_suffix("gb"))
            .or_else(|| bw.strip_suffix('g'))
            .unwrap_or(&bw);
        let latency_ns: u32 = lat
            .parse()
            .map_err(|_| format!("`{s}`: latency `{l}` is not a whole number of ns"))?;
        let bandwidth_gbs: u32 = bw
            .parse()
            .map_err(|_| format!("`{s}`: bandwidth `{b}` is not a whole number of GB/s"))?;
        if latency_ns == 0 || bandwidth_gbs == 0 {
            return Err(format!("`{s}`: latency and bandwidth must be positive"));
        }
        Ok(Perf {
            latency_ns,
            bandwidth_gbs,
        })
    }
}

impl fmt::Display for Perf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ns, {} GB/s", self.latency_ns, self.bandwidth_gbs)
    }
}

/// DRAM next to the CPUs (numa, numa2).
pub const LOCAL_DRAM: Perf = Perf {
    latency_ns: 100,
    bandwidth_gbs: 200,
};
/// DRAM of another CPU node (numa2).
pub const REMOTE_DRAM: Perf = Perf {
    latency_ns: 150,
    bandwidth_gbs: 100,
};
/// A memory-only node (emulated CXL) seen from its initiator.
/// With LOCAL_DRAM, the kernel's auto weights read node0=25, node1=6.
pub const SLOW_MEM: Perf = Perf {
    latency_ns: 250,
    bandwidth_gbs: 50,
};
/// A memory-only node seen from a CPU node that is not its initiator.
pub const SLOW_MEM_REMOTE: Perf = Perf {
    latency_ns: 300,
    bandwidth_gbs: 40,
};
/// DRAM in the cxl topology: the figures of a DDR5 channel or two. With
/// [`CXL_DEV`] the kernel's auto weights read node0=21 for 10 on the CXL
/// node (one device).
pub const CXL_TOPO_DRAM: Perf = Perf {
    latency_ns: 100,
    bandwidth_gbs: 20,
};
/// A CXL device as its generic port's HMAT entry (CPU node -> host bridge).
/// The kernel adds the device's CDAT latency and the link's, and takes the
/// smallest bandwidth on the path (QEMU's CDAT and link are faster than
/// this), so the node reads 10240 MB/s and about 400 ns.
pub const CXL_DEV: Perf = Perf {
    latency_ns: 250,
    bandwidth_gbs: 10,
};

/// CXL window granularity (CFMWS): windows are multiples of 256 MiB.
pub const CXL_WINDOW_ALIGN_MIB: u64 = 256;
/// First PCI bus of the first CXL host bridge; each next one is
/// [`CXL_BUS_STRIDE`] higher (a host bridge owns the buses up to the next).
pub const CXL_FIRST_BUS: u32 = 12;
pub const CXL_BUS_STRIDE: u32 = 16;
/// At most this many CXL devices (bus numbers stay below 256).
pub const CXL_MAX_DEVICES: usize = 8;
/// Interleave ways `--cxl-interleave` accepts: 1 (every device its own
/// region) or 2 (two devices behind one host bridge, one region).
pub const CXL_MAX_WAYS: u32 = 2;
/// The region granularity with `--cxl-interleave WAYS` alone: QEMU's
/// window default, which `cxl create-region` also takes (the root decoder's).
pub const CXL_DEFAULT_GRANULARITY: u32 = 256;

/// `--cxl-interleave WAYS[:GRANULARITY]`: how a region spreads over the
/// devices behind one host bridge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CxlInterleave {
    /// Devices per region (and per host bridge): 1 or [`CXL_MAX_WAYS`].
    pub ways: u32,
    /// Bytes of host physical address space that go to one device before
    /// the next: a power of two from 256 to 16384 (CXL HDM decoders).
    pub granularity: u32,
}

impl CxlInterleave {
    /// One device per region (the default).
    pub const NONE: CxlInterleave = CxlInterleave {
        ways: 1,
        granularity: CXL_DEFAULT_GRANULARITY,
    };

    /// Parses `WAYS[:GRANULARITY]`, e.g. `2`, `2:256`, `2:4096` or `2:4K`
    /// (granularity in bytes; `K` = 1024).
    pub fn parse(s: &str) -> std::result::Result<CxlInterleave, String> {
        let (w, g) = match s.split_once(':') {
            Some((w, g)) => (w, Some(g)),
            None => (s, None),
        };
        let ways: u32 = w.trim().parse().map_err(|_| {
            format!("`{s}`: WAYS `{w}` is not a number (WAYS[:GRANULARITY], e.g. 2:4096)")
        })?;
        if !(1..=CXL_MAX_WAYS).contains(&ways) {
            return Err(format!(
                "`{s}`: {ways}-way interleave is not offered: WAYS is 1 or {CXL_MAX_WAYS} (devices behind one host bridge)"
            ));
        }
        let granularity = match g {
            None => CXL_DEFAULT_GRANULARITY,
            Some(g) => {
                let t = g.trim().to_ascii_lowercase();
                let (num, mul) = match t.strip_suffix('k') {
                    Some(n) => (n, 1024),
                    None => (t.as_str(), 1),
                };
                num.parse::<u32>()
                    .ok()
                    .and_then(|n| n.checked_mul(mul))
                    .ok_or_else(|| format!("`{s}`: GRANULARITY `{g}` is not a number of bytes"))?
            }
        };
        if !granularity.is_power_of_two() || !(256..=16384).contains(&granularity) {
            return Err(format!(
                "`{s}`: granularity {granularity} bytes: CXL decoders take a power of two from 256 to 16384"
            ));
        }
        Ok(CxlInterleave { ways, granularity })
    }
}

impl fmt::Display for CxlInterleave {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}-way, granularity {} bytes",
            self.ways, self.granularity
        )
    }
}

/// One guest topology, described once: adding a topology is one entry of
/// [`TOPOLOGIES`] (plus, for new hardware, its QEMU arguments in
/// [`Topology::qemu_args`] and its guest set-up in `guest/init.sh`).
#[derive(Debug)]
pub struct TopologySpec {
    /// Its `--topology` name.
    pub name: &'static str,
    /// What it is, for `--help`.
    pub about: &'static str,
    /// CPU+DRAM nodes (0..k); `--cpus` is split evenly over them.
    pub cpu_nodes: u32,
    /// Memory-only boot nodes after them, each with node 0 as its HMAT
    /// initiator and [`SLOW_MEM`] performance (`--cxl-mem` GiB each).
    pub mem_nodes: u32,
    /// QEMU CXL type-3 devices (`--cxl-dev`, `--cxl-interleave`), onlined
    /// by /init as new CPU-less nodes.
    pub cxl: bool,
    /// DRAM per CPU node, GiB, without `--dram`. A runtime 1 GiB contiguous
    /// range needs a free, naturally aligned GiB on node 0 after the other
    /// tests. q35 splits RAM around the PCI hole below 4 GiB; early
    /// allocations and node 0's memmap take part of the rest; with cxl the
    /// kernel also puts the CXL node's memmap (64 MiB per 4 GiB) on node 0.
    /// 6 GiB (7 with cxl) usually left one, but a full test run once left
    /// none; 8 GiB leaves several.
    pub dram_gib: u32,
    /// HMAT performance of a CPU node's own DRAM, without `--dram-perf`.
    pub dram_perf: Perf,
    /// QEMU `-cpu` without `--cpu`. QEMU 10 emulates CXL memory access by
    /// access (the fixed memory window is an I/O region that decodes each
    /// access to the device; there is no RAM fast path), so its cost is per
    /// access, not per byte. With ERMS, FSRM and FSRS the kernel's
    /// clear_page, copies and memset use `rep stosb`/`rep movsb`, which TCG
    /// runs one byte per access: 8 times slower on a CXL node than 8-byte
    /// stores (measured: 16 MiB through tmpfs on the CXL node in 3.3 s with
    /// `max`, 0.43 s with `max,erms=off,fsrm=off`).
    pub cpu_model: &'static str,
    /// Multiplies the guest timeout: every test that fills or clears GiBs on
    /// emulated CXL memory is some 100 times slower there.
    pub timeout_factor: u64,
}

/// The default QEMU `-cpu` of every topology: without ERMS, FSRM and FSRS
/// the kernel's clear_page, memset and copies use `rep stosq` and 8-byte
/// moves, which TCG runs 8 bytes per access instead of one (on DRAM a 1 GiB
/// clear-and-check KUnit case took 15 s instead of 33 s; on CXL memory,
/// emulated access by access, the gain is 8x).
pub const NO_REP_STOSB: &str = "max,erms=off,fsrm=off,fsrs=off";

/// Every topology `--topology` offers.
pub const TOPOLOGIES: [TopologySpec; 3] = [
    TopologySpec {
        name: "numa",
        about: "node0: CPUs + DRAM; node1: memory only, slower (HMAT), like CXL",
        cpu_nodes: 1,
        mem_nodes: 1,
        cxl: false,
        dram_gib: 8,
        dram_perf: LOCAL_DRAM,
        cpu_model: NO_REP_STOSB,
        timeout_factor: 1,
    },
    TopologySpec {
        name: "numa2",
        about: "node0: CPU0 + DRAM; node1: CPU1 + DRAM; node2: memory only \
                (local-versus-remote placement, benchmarks)",
        cpu_nodes: 2,
        mem_nodes: 1,
        cxl: false,
        dram_gib: 8,
        dram_perf: LOCAL_DRAM,
        cpu_model: NO_REP_STOSB,
        timeout_factor: 1,
    },
    TopologySpec {
        name: "cxl",
        about: "node0: CPUs + DRAM; QEMU cxl-type3 devices (--cxl-dev), assembled \
                into RAM regions by the kernel's CXL drivers and onlined as CPU-less nodes",
        cpu_nodes: 1,
        mem_nodes: 0,
        cxl: true,
        dram_gib: 8,
        dram_perf: CXL_TOPO_DRAM,
        cpu_model: NO_REP_STOSB,
        timeout_factor: 4,
    },
];

/// A topology: an entry of [`TOPOLOGIES`]. Equal when the names are.
#[derive(Clone, Copy, Debug)]
pub struct TopologyKind(&'static TopologySpec);

impl TopologyKind {
    pub const NUMA: TopologyKind = TopologyKind(&TOPOLOGIES[0]);
    pub const NUMA2: TopologyKind = TopologyKind(&TOPOLOGIES[1]);
    pub const CXL: TopologyKind = TopologyKind(&TOPOLOGIES[2]);

    /// Its `--topology` name.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// Its description.
    pub fn spec(self) -> &'static TopologySpec {
        self.0
    }

    /// The topology named `name`.
    pub fn by_name(name: &str) -> Option<TopologyKind> {
        TOPOLOGIES.iter().find(|t| t.name == name).map(TopologyKind)
    }

    /// clap's parser of `--topology`: the names of [`TOPOLOGIES`], each
    /// with its description in `--help`.
    pub fn value_parser() -> impl clap::builder::TypedValueParser<Value = TopologyKind> {
        use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
        PossibleValuesParser::new(
            TOPOLOGIES
                .iter()
                .map(|t| PossibleValue::new(t.name).help(t.about)),
        )
        .map(|s| TopologyKind::by_name(&s).expect("clap checked the name"))
    }
}

impl PartialEq for TopologyKind {
    fn eq(&self, o: &TopologyKind) -> bool {
        self.0.name == o.0.name
    }
}

impl Eq for TopologyKind {}

impl fmt::Display for TopologyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A node with CPUs and DRAM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuNode {
    pub cpus: u32,
    pub dram_gib: u32,
}

/// A node with memory and no CPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemNode {
    pub size_gib: u32,
    /// Index of the CPU node that is its HMAT initiator (and nearest node).
    pub initiator: usize,
    /// Performance from its initiator.
    pub perf: Perf,
}

/// An emulated CXL type-3 volatile memory device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CxlDevice {
    pub size_gib: u32,
    /// HMAT entry of its generic port, from node 0.
    pub perf: Perf,
}

impl CxlDevice {
    /// `--cxl-dev SIZE[:LATENCY_NS:BANDWIDTH_GBS]`, e.g. `4G` or
    /// `2G:300:5G`; without performance figures [`CXL_DEV`].
    pub fn parse(s: &str) -> std::result::Result<CxlDevice, String> {
        let (size, perf) = match s.split_once(':') {
            Some((a, b)) => (a, Some(Perf::parse(b)?)),
            None => (s, None),
        };
        Ok(CxlDevice {
            size_gib: crate::util::parse_gib(size)?,
            perf: perf.unwrap_or(CXL_DEV),
        })
    }

    pub fn size_mib(&self) -> u64 {
        u64::from(self.size_gib) * 1024
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pub kind: TopologyKind,
    pub cpu_nodes: Vec<CpuNode>,
    pub mem_nodes: Vec<MemNode>,
    pub cxl: Vec<CxlDevice>,
    /// How the CXL devices are grouped into regions (cxl).
    pub cxl_interleave: CxlInterleave,
    /// HMAT performance of a CPU node's own DRAM.
    pub dram_perf: Perf,
}

/// What the user asked for on the command line.
#[derive(Clone, Debug)]
pub struct TopologyOpts {
    pub kind: TopologyKind,
    /// Total guest CPUs.
    pub cpus: u32,
    /// DRAM per CPU node, GiB.
    pub dram_gib: u32,
    /// Size of the memory-only node (numa, numa2), GiB.
    pub slow_gib: u32,
    /// CXL devices (cxl); empty: one [`CxlDevice`] of 4 GiB, or with
    /// `cxl_interleave` WAYS devices of 4/WAYS GiB (a 4 GiB region).
    pub cxl_devs: Vec<CxlDevice>,
    /// `--cxl-interleave` (cxl); `None`: one region per device.
    pub cxl_interleave: Option<CxlInterleave>,
    /// HMAT figures of local DRAM; `None`: [`LOCAL_DRAM`], or
    /// [`CXL_TOPO_DRAM`] for cxl.
    pub dram_perf: Option<Perf>,
}

#[cfg(test)]
impl TopologyOpts {
    /// The defaults of `cargo xtask` for a topology kind.
    pub fn defaults(kind: TopologyKind) -> TopologyOpts {
        TopologyOpts {
            kind,
            cpus: 2,
            dram_gib: 6,
            slow_gib: 3,
            cxl_devs: vec![],
            cxl_interleave: None,
            dram_perf: None,
        }
    }
}

impl Topology {
    pub fn new(o: &TopologyOpts) -> Result<Topology> {
        if o.cpus == 0 {
            bail!("--cpus must be at least 1");
        }
        let spec = o.kind.spec();
        if !spec.cxl && !o.cxl_devs.is_empty() {
            bail!("--cxl-dev needs --topology cxl (got {})", o.kind);
        }
        if !spec.cxl && o.cxl_interleave.is_some() {
            bail!("--cxl-interleave needs --topology cxl (got {})", o.kind);
        }
        let il = o.cxl_interleave.unwrap_or(CxlInterleave::NONE);
        let k = spec.cpu_nodes;
        if o.cpus < k || !o.cpus.is_multiple_of(k) {
            bail!(
                "--topology {} splits --cpus evenly over {k} nodes: give a multiple of {k} (got {})",
                o.kind,
                o.cpus
            );
        }
        let per = CpuNode {
            cpus: o.cpus / k,
            dram_gib: o.dram_gib,
        };
        let mem = MemNode {
            size_gib: o.slow_gib,
            initiator: 0,
            perf: SLOW_MEM,
        };
        let cxl = if !spec.cxl {
            vec![]
        } else if o.cxl_devs.is_empty() {
            // One 4 GiB region either way.
            vec![
                CxlDevice {
                    size_gib: 4 / il.ways,
                    perf: CXL_DEV,
                };
                il.ways as usize
            ]
        } else {
            o.cxl_devs.clone()
        };
        if cxl.len() > CXL_MAX_DEVICES {
            bail!("at most {CXL_MAX_DEVICES} CXL devices (got {})", cxl.len());
        }
        let w = il.ways as usize;
        if !cxl.len().is_multiple_of(w) {
            bail!(
                "--cxl-interleave {}: {} CXL device(s) do not split into regions of {w} (give a multiple of {w} --cxl-dev)",
                il.ways,
                cxl.len()
            );
        }
        for (g, grp) in cxl.chunks(w).enumerate() {
            // Each device holds size/ways of the region and the group
            // shares one generic port (one HMAT entry).
            if grp.iter().any(|d| d != &grp[0]) {
                bail!(
                    "--cxl-interleave {}: the devices of region {g} ({}) differ; an interleaved region needs devices of one size and one latency/bandwidth (they share a host bridge)",
                    il.ways,
                    grp.iter()
                        .map(|d| format!("{} GiB, {}", d.size_gib, d.perf))
                        .collect::<Vec<_>>()
                        .join("; ")
                );
            }
        }
        Ok(Topology {
            kind: o.kind,
            cpu_nodes: vec![per; k as usize],
            mem_nodes: vec![mem; spec.mem_nodes as usize],
            cxl,
            cxl_interleave: il,
            dram_perf: o.dram_perf.unwrap_or(spec.dram_perf),
        })
    }

    pub fn total_cpus(&self) -> u32 {
        self.cpu_nodes.iter().map(|n| n.cpus).sum()
    }

    /// Boot memory (`-m`): DRAM and memory-only nodes, not CXL.
    /// (u64: per-node sizes are u32 GiB, and their sum must not wrap.)
    pub fn total_mem_gib(&self) -> u64 {
        self.dram_gib() + self.mem_node_gib()
    }

    /// DRAM of the CPU nodes together, GiB.
    pub fn dram_gib(&self) -> u64 {
        self.cpu_nodes.iter().map(|n| u64::from(n.dram_gib)).sum()
    }

    /// Memory of the memory-only nodes together, GiB.
    pub fn mem_node_gib(&self) -> u64 {
        self.mem_nodes.iter().map(|n| u64::from(n.size_gib)).sum()
    }

    /// Memory of the CXL devices, GiB.
    pub fn cxl_gib(&self) -> u64 {
        self.cxl.iter().map(|d| u64::from(d.size_gib)).sum()
    }

    /// The CXL devices grouped by region: each group shares a host bridge,
    /// a generic port and a window (one device each without interleave).
    pub fn cxl_groups(&self) -> std::slice::Chunks<'_, CxlDevice> {
        self.cxl.chunks(self.cxl_interleave.ways as usize)
    }

    /// The sizes of the CXL regions /init assembles, GiB, in window order.
    pub fn cxl_region_gib(&self) -> Vec<u32> {
        self.cxl_groups()
            .map(|g| g.iter().map(|d| d.size_gib).sum())
            .collect()
    }

    /// The fixed memory window of host bridge `g`: its devices' sizes
    /// added up and rounded up to 256 MiB, MiB.
    pub fn cxl_window_mib(&self, g: usize) -> u64 {
        let mib: u64 = self
            .cxl_groups()
            .nth(g)
            .map_or(0, |grp| grp.iter().map(|d| d.size_mib()).sum());
        mib.div_ceil(CXL_WINDOW_ALIGN_MIB) * CXL_WINDOW_ALIGN_MIB
    }

    /// QEMU nodes: CPU nodes, memory-only nodes, then one generic-port
    /// proximity domain per CXL host bridge.
    pub fn nr_nodes(&self) -> usize {
        self.cpu_nodes.len() + self.mem_nodes.len() + self.cxl_groups().len()
    }

    /// The QEMU node id of CXL host bridge `g`'s generic port.
    pub fn cxl_gp_node(&self, g: usize) -> usize {
        self.cpu_nodes.len() + self.mem_nodes.len() + g
    }

    /// SLIT distance between two nodes (numa, numa2; cxl has no SLIT).
    pub fn distance(&self, a: usize, b: usize) -> u32 {
        if a == b {
            return 10;
        }
        let k = self.cpu_nodes.len();
        match (a < k, b < k) {
            (true, true) => 20,
            (true, false) => {
                if self.mem_nodes[b - k].initiator == a {
                    25
                } else {
                    30
                }
            }
            (false, true) => self.distance(b, a),
            (false, false) => 30,
        }
    }

    /// HMAT performance from CPU node `init` to node `target`.
    pub fn perf(&self, init: usize, target: usize) -> Perf {
        let k = self.cpu_nodes.len();
        let m = self.mem_nodes.len();
        if target < k {
            if target == init {
                self.dram_perf
            } else {
                REMOTE_DRAM
            }
        } else if target < k + m {
            let n = &self.mem_nodes[target - k];
            if n.initiator == init {
                n.perf
            } else {
                SLOW_MEM_REMOTE
            }
        } else {
            // The host bridge's generic port: its devices share one figure.
            self.cxl[(target - k - m) * self.cxl_interleave.ways as usize].perf
        }
    }

    /// The guest's `tierkit.cxl=` parameter: per window (region), in their
    /// order, the region's size in MiB, and with interleave `:WAYS:GRAN`
    /// (bytes): `4096,2048`, or `4096:2:256` for one region over two 2 GiB
    /// devices; `None` without CXL.
    pub fn cxl_param(&self) -> Option<String> {
        (!self.cxl.is_empty()).then(|| {
            let il = self.cxl_interleave;
            self.cxl_groups()
                .map(|g| {
                    let mib: u64 = g.iter().map(|d| d.size_mib()).sum();
                    if il.ways > 1 {
                        format!("{mib}:{}:{}", il.ways, il.granularity)
                    } else {
                        mib.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join(",")
        })
    }

    /// `-machine`, `-smp`, `-m`, memory backends, `-numa` node, dist and
    /// hmat-lb arguments, and the CXL devices.
    pub fn qemu_args(&self) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        let mut push = |x: &str, y: String| {
            a.push(x.to_string());
            a.push(y);
        };
        let mut machine = String::from("q35,hmat=on");
        if !self.cxl.is_empty() {
            machine.push_str(",cxl=on");
        }
        push("-machine", machine);
        // One socket per CPU node: CPUs that share a last-level cache but not
        // a node make the kernel WARN (topology_sane).
        let per = self.cpu_nodes[0].cpus;
        if self.cpu_nodes.iter().all(|n| n.cpus == per) {
            push(
                "-smp",
                format!(
                    "{},sockets={},cores={per},threads=1",
                    self.total_cpus(),
                    self.cpu_nodes.len()
                ),
            );
        } else {
            push("-smp", self.total_cpus().to_string());
        }
        if self.cxl.is_empty() {
            push("-m", format!("{}G", self.total_mem_gib()));
        } else {
            // Room for hot-added memory, as the CXL checks of issue 5 ran.
            push(
                "-m",
                format!(
                    "{}G,maxmem={}G,slots=4",
                    self.total_mem_gib(),
                    self.total_mem_gib() + self.cxl_gib()
                ),
            );
        }
        let mut first_cpu = 0;
        for (i, n) in self.cpu_nodes.iter().enumerate() {
            push(
                "-object",
                format!("memory-backend-ram,id=m{i},size={}G", n.dram_gib),
            );
            let last = first_cpu + n.cpus - 1;
            let cpus = if last == first_cpu {
                format!("{first_cpu}")
            } else {
                format!("{first_cpu}-{last}")
            };
            push("-numa", format!("node,nodeid={i},cpus={cpus},memdev=m{i}"));
            first_cpu = last + 1;
        }
        let k = self.cpu_nodes.len();
        for (j, m) in self.mem_nodes.iter().enumerate() {
            let id = k + j;
            push(
                "-object",
                format!("memory-backend-ram,id=m{id},size={}G", m.size_gib),
            );
            push(
                "-numa",
                format!("node,nodeid={id},memdev=m{id},initiator={}", m.initiator),
            );
        }
        // CXL: per host bridge (one per device, or one per WAYS devices with
        // --cxl-interleave) its generic port (a memory-less proximity domain
        // that carries the HMAT figures) and a fixed memory window that
        // targets it; per device a root port of that bridge and the type-3
        // device with its volatile backend. An interleaved window gets the
        // region's granularity (the root decoder is 1-way: the host bridge's
        // decoder does the interleave).
        let il = self.cxl_interleave;
        let mut fmw = Vec::new();
        let mut i = 0;
        for (g, grp) in self.cxl_groups().enumerate() {
            let gp = self.cxl_gp_node(g);
            let hb = format!("cxl.{}", g + 1);
            push("-numa", format!("node,nodeid={gp}"));
            push(
                "-device",
                format!(
                    "pxb-cxl,bus_nr={},bus=pcie.0,id={hb}",
                    CXL_FIRST_BUS + CXL_BUS_STRIDE * g as u32
                ),
            );
            push(
                "-object",
                format!("acpi-generic-port,id=cxl-gp{g},pci-bus={hb},node={gp}"),
            );
            for (port, d) in grp.iter().enumerate() {
                let rp = format!("cxl_rp{i}");
                push(
                    "-object",
                    format!(
                        "memory-backend-ram,id=cxl-mem{i},share=on,size={}G",
                        d.size_gib
                    ),
                );
                push(
                    "-device",
                    format!(
                        "cxl-rp,port={port},bus={hb},id={rp},chassis=0,slot={}",
                        i + 2
                    ),
                );
                push(
                    "-device",
                    format!(
                        "cxl-type3,bus={rp},volatile-memdev=cxl-mem{i},id=cxl-vmem{i},sn={}",
                        i + 1
                    ),
                );
                i += 1;
            }
            let mut w = format!(
                "cxl-fmw.{g}.targets.0={hb},cxl-fmw.{g}.size={}",
                mib_size(self.cxl_window_mib(g))
            );
            if il.ways > 1 {
                w.push_str(&format!(
                    ",cxl-fmw.{g}.interleave-granularity={}",
                    il.granularity
                ));
            }
            fmw.push(w);
        }
        if !fmw.is_empty() {
            push("-M", fmw.join(","));
        }
        let n = self.nr_nodes();
        if self.cxl.is_empty() {
            for s in 0..n {
                for d in s + 1..n {
                    push(
                        "-numa",
                        format!("dist,src={s},dst={d},val={}", self.distance(s, d)),
                    );
                }
            }
        }
        for i in 0..k {
            for t in 0..n {
                let p = self.perf(i, t);
                push(
                    "-numa",
                    format!("hmat-lb,initiator={i},target={t},hierarchy=memory,data-type=access-latency,latency={}", p.latency_ns),
                );
                push(
                    "-numa",
                    format!("hmat-lb,initiator={i},target={t},hierarchy=memory,data-type=access-bandwidth,bandwidth={}G", p.bandwidth_gbs),
                );
            }
        }
        a
    }

    /// One line per node, for the harness output.
    pub fn describe(&self) -> String {
        let mut s = Vec::new();
        let mut cpu = 0;
        for (i, n) in self.cpu_nodes.iter().enumerate() {
            s.push(format!(
                "node{i}: CPUs {}-{} + {} GiB DRAM ({})",
                cpu,
                cpu + n.cpus - 1,
                n.dram_gib,
                self.dram_perf
            ));
            cpu += n.cpus;
        }
        let k = self.cpu_nodes.len();
        for (j, m) in self.mem_nodes.iter().enumerate() {
            s.push(format!(
                "node{}: {} GiB memory only ({} from node{})",
                k + j,
                m.size_gib,
                m.perf,
                m.initiator
            ));
        }
        let il = self.cxl_interleave;
        let w = il.ways as usize;
        for (i, d) in self.cxl.iter().enumerate() {
            s.push(format!(
                "cxl{i}: {} GiB type-3 volatile device, generic port node{} ({} from node0){}, its node is the kernel's choice",
                d.size_gib,
                self.cxl_gp_node(i / w),
                d.perf,
                if w > 1 {
                    format!(
                        ", root port {} of host bridge {} (region {}: {il})",
                        i % w,
                        i / w,
                        i / w
                    )
                } else {
                    String::new()
                }
            ));
        }
        s.join("; ")
    }
}

/// A size in MiB for QEMU: `4G` when whole GiB, else `768M`.
fn mib_size(mib: u64) -> String {
    if mib.is_multiple_of(1024) {
        format!("{}G", mib / 1024)
    } else {
        format!("{mib}M")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_topology_of_the_table_builds_with_its_defaults() {
        for t in &TOPOLOGIES {
            let k = TopologyKind::by_name(t.name).unwrap();
            assert_eq!(k.spec().name, t.name);
            let o = TopologyOpts {
                cpus: 2 * t.cpu_nodes,
                dram_gib: t.dram_gib,
                ..TopologyOpts::defaults(k)
            };
            let topo = Topology::new(&o).unwrap();
            assert_eq!(topo.cpu_nodes.len() as u32, t.cpu_nodes, "{}", t.name);
            assert_eq!(topo.mem_nodes.len() as u32, t.mem_nodes, "{}", t.name);
            assert_eq!(topo.cxl.is_empty(), !t.cxl, "{}", t.name);
            assert!(!topo.qemu_args().is_empty());
        }
        assert_eq!(TopologyKind::by_name("nope"), None);
        assert_ne!(TopologyKind::NUMA, TopologyKind::CXL);
    }

    fn opts(kind: TopologyKind, cpus: u32) -> TopologyOpts {
        TopologyOpts {
            cpus,
            dram_gib: 4,
            ..TopologyOpts::defaults(kind)
        }
    }

    fn has(args: &[String], flag: &str, val: &str) -> bool {
        args.windows(2).any(|w| w[0] == flag && w[1] == val)
    }

    /// Asserts that `args` has every `(flag, value)` pair, naming the
    /// missing ones.
    #[track_caller]
    fn assert_has(args: &[String], want: &[(&str, &str)]) {
        let missing: Vec<_> = want.iter().filter(|(f, v)| !has(args, f, v)).collect();
        assert!(missing.is_empty(), "missing {missing:?} in {args:?}");
    }

    #[test]
    fn default_numa_topology() {
        let t = Topology::new(&opts(TopologyKind::NUMA, 2)).unwrap();
        let a = t.qemu_args();
        assert_has(
            &a,
            &[
                ("-machine", "q35,hmat=on"),
                ("-smp", "2,sockets=1,cores=2,threads=1"),
                ("-m", "7G"),
                ("-object", "memory-backend-ram,id=m0,size=4G"),
                ("-object", "memory-backend-ram,id=m1,size=3G"),
                ("-numa", "node,nodeid=0,cpus=0-1,memdev=m0"),
                ("-numa", "node,nodeid=1,memdev=m1,initiator=0"),
                ("-numa", "dist,src=0,dst=1,val=25"),
                ("-numa", "hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-latency,latency=100"),
                ("-numa", "hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-bandwidth,bandwidth=200G"),
                ("-numa", "hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-latency,latency=250"),
                ("-numa", "hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-bandwidth,bandwidth=50G"),
            ],
        );
        // 2 backends, 2 nodes, 1 distance, 2x2 hmat-lb entries.
        assert_eq!(a.iter().filter(|x| *x == "-numa").count(), 2 + 1 + 4);
    }

    #[test]
    fn one_cpu() {
        let t = Topology::new(&opts(TopologyKind::NUMA, 1)).unwrap();
        assert!(has(
            &t.qemu_args(),
            "-numa",
            "node,nodeid=0,cpus=0,memdev=m0"
        ));
    }

    #[test]
    fn numa2_has_two_cpu_nodes_and_a_memory_node() {
        let t = Topology::new(&opts(TopologyKind::NUMA2, 2)).unwrap();
        let a = t.qemu_args();
        assert_has(
            &a,
            &[
                ("-m", "11G"),
                ("-smp", "2,sockets=2,cores=1,threads=1"),
                ("-numa", "node,nodeid=0,cpus=0,memdev=m0"),
                ("-numa", "node,nodeid=1,cpus=1,memdev=m1"),
                ("-numa", "node,nodeid=2,memdev=m2,initiator=0"),
                ("-numa", "dist,src=0,dst=1,val=20"),
                ("-numa", "dist,src=0,dst=2,val=25"),
                ("-numa", "dist,src=1,dst=2,val=30"),
                ("-numa", "hmat-lb,initiator=1,target=0,hierarchy=memory,data-type=access-latency,latency=150"),
                ("-numa", "hmat-lb,initiator=1,target=2,hierarchy=memory,data-type=access-bandwidth,bandwidth=40G"),
            ],
        );
        assert_eq!(t.distance(2, 0), 25);
        assert!(Topology::new(&opts(TopologyKind::NUMA2, 3)).is_err());
    }

    #[test]
    fn cxl_default_is_one_4g_device() {
        let t = Topology::new(&opts(TopologyKind::CXL, 2)).unwrap();
        let a = t.qemu_args();
        assert_has(
            &a,
            &[
                ("-machine", "q35,hmat=on,cxl=on"),
                ("-m", "4G,maxmem=8G,slots=4"),
                ("-object", "memory-backend-ram,id=m0,size=4G"),
                ("-numa", "node,nodeid=0,cpus=0-1,memdev=m0"),
            ],
        );
        // The generic port's proximity domain: no memory, no CPUs.
        assert_has(
            &a,
            &[
                ("-numa", "node,nodeid=1"),
                ("-object", "memory-backend-ram,id=cxl-mem0,share=on,size=4G"),
                ("-device", "pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1"),
                (
                    "-object",
                    "acpi-generic-port,id=cxl-gp0,pci-bus=cxl.1,node=1",
                ),
                (
                    "-device",
                    "cxl-rp,port=0,bus=cxl.1,id=cxl_rp0,chassis=0,slot=2",
                ),
                (
                    "-device",
                    "cxl-type3,bus=cxl_rp0,volatile-memdev=cxl-mem0,id=cxl-vmem0,sn=1",
                ),
                ("-M", "cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G"),
            ],
        );
        // HMAT: DRAM 100 ns / 20 GB/s, the generic port 250 ns / 10 GB/s.
        assert_has(
            &a,
            &[
                ("-numa", "hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-bandwidth,bandwidth=20G"),
                ("-numa", "hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-latency,latency=250"),
                ("-numa", "hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-bandwidth,bandwidth=10G"),
            ],
        );
        // No SLIT: the CXL node the kernel makes is not a QEMU node.
        assert!(!a.iter().any(|x| x.starts_with("dist,")));
        // 2 nodes + 2x2 hmat-lb entries.
        assert_eq!(a.iter().filter(|x| *x == "-numa").count(), 2 + 4);
        assert_eq!(t.cxl_param().as_deref(), Some("4096"));
        assert!(t.describe().contains("cxl0: 4 GiB"), "{}", t.describe());
    }

    #[test]
    fn cxl_two_devices_get_their_own_bridge_port_window_and_node() {
        let mut o = opts(TopologyKind::CXL, 2);
        o.dram_gib = 6;
        o.cxl_devs = vec![
            CxlDevice::parse("4G").unwrap(),
            CxlDevice::parse("2G:300:5G").unwrap(),
        ];
        o.dram_perf = Some(Perf::parse("90ns:40G").unwrap());
        let t = Topology::new(&o).unwrap();
        let a = t.qemu_args();
        assert_has(
            &a,
            &[
                ("-m", "6G,maxmem=12G,slots=4"),
                ("-numa", "node,nodeid=1"),
                ("-numa", "node,nodeid=2"),
                ("-device", "pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1"),
                ("-device", "pxb-cxl,bus_nr=28,bus=pcie.0,id=cxl.2"),
                (
                    "-object",
                    "acpi-generic-port,id=cxl-gp1,pci-bus=cxl.2,node=2",
                ),
                (
                    "-device",
                    "cxl-rp,port=0,bus=cxl.2,id=cxl_rp1,chassis=0,slot=3",
                ),
                (
                    "-device",
                    "cxl-type3,bus=cxl_rp1,volatile-memdev=cxl-mem1,id=cxl-vmem1,sn=2",
                ),
                ("-object", "memory-backend-ram,id=cxl-mem1,share=on,size=2G"),
            ],
        );
        // One -M with both windows, each targeting its own host bridge.
        assert!(has(
            &a,
            "-M",
            "cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G,cxl-fmw.1.targets.0=cxl.2,cxl-fmw.1.size=2G"
        ));
        assert_eq!(a.iter().filter(|x| *x == "-M").count(), 1);
        assert_has(
            &a,
            &[
                ("-numa", "hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-latency,latency=90"),
                ("-numa", "hmat-lb,initiator=0,target=2,hierarchy=memory,data-type=access-latency,latency=300"),
                ("-numa", "hmat-lb,initiator=0,target=2,hierarchy=memory,data-type=access-bandwidth,bandwidth=5G"),
            ],
        );
        assert_eq!(t.cxl_param().as_deref(), Some("4096,2048"));
        // Device ids are unique.
        let ids: Vec<&String> = a.iter().filter(|x| x.contains("id=cxl")).collect();
        let mut u = ids.clone();
        u.sort();
        u.dedup();
        assert_eq!(u.len(), ids.len());
    }

    #[test]
    fn cxl_windows_and_specs() {
        let d = CxlDevice::parse("3G").unwrap();
        assert_eq!(d.size_mib(), 3072);
        assert_eq!(d.perf, CXL_DEV);
        let w = |mib: u64| mib.div_ceil(CXL_WINDOW_ALIGN_MIB) * CXL_WINDOW_ALIGN_MIB;
        assert_eq!(w(1000), 1024);
        assert_eq!(mib_size(1280), "1280M");
        assert_eq!(mib_size(2048), "2G");
        assert!(CxlDevice::parse("512M").is_err());
        assert!(CxlDevice::parse("2G:300").is_err());
        assert!(CxlDevice::parse("2G:0:5G").is_err());
        let p = Perf::parse("250ns:10GB/s").unwrap();
        assert_eq!((p.latency_ns, p.bandwidth_gbs), (250, 10));
        assert!(Perf::parse("fast").is_err());
        // --cxl-dev only with --topology cxl, and not too many.
        let mut o = opts(TopologyKind::NUMA, 2);
        o.cxl_devs = vec![d.clone()];
        assert!(Topology::new(&o).is_err());
        let mut o = opts(TopologyKind::CXL, 2);
        o.cxl_devs = vec![d; CXL_MAX_DEVICES + 1];
        assert!(Topology::new(&o).is_err());
        // numa keeps its figures and has no CXL parameter.
        let t = Topology::new(&opts(TopologyKind::NUMA, 2)).unwrap();
        assert_eq!(t.dram_perf, LOCAL_DRAM);
        assert_eq!(t.cxl_param(), None);
    }

    #[test]
    fn cxl_interleave_two_devices_behind_one_host_bridge() {
        for (spec, gran) in [("2", 256), ("2:256", 256), ("2:4096", 4096), ("2:4K", 4096)] {
            let mut o = opts(TopologyKind::CXL, 2);
            o.cxl_interleave = Some(CxlInterleave::parse(spec).unwrap());
            let t = Topology::new(&o).unwrap();
            let a = t.qemu_args();
            // Default: two 2 GiB devices, one 4 GiB region.
            assert_eq!(t.cxl.len(), 2);
            assert!(t.cxl.iter().all(|d| d.size_gib == 2 && d.perf == CXL_DEV));
            assert_eq!(t.cxl_region_gib(), vec![4]);
            assert!(has(&a, "-m", "4G,maxmem=8G,slots=4"));
            // One host bridge, one generic port (node 1), one window.
            assert_eq!(a.iter().filter(|x| x.starts_with("pxb-cxl,")).count(), 1);
            assert!(has(&a, "-device", "pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1"));
            assert!(has(
                &a,
                "-object",
                "acpi-generic-port,id=cxl-gp0,pci-bus=cxl.1,node=1"
            ));
            assert_eq!(
                a.iter()
                    .filter(|x| x.starts_with("acpi-generic-port,"))
                    .count(),
                1
            );
            assert!(has(&a, "-numa", "node,nodeid=1"));
            assert!(!has(&a, "-numa", "node,nodeid=2"));
            // Two root ports of that bridge, port numbers 0 and 1, each with
            // its device and backend.
            for i in 0..2 {
                assert!(has(
                    &a,
                    "-device",
                    &format!(
                        "cxl-rp,port={i},bus=cxl.1,id=cxl_rp{i},chassis=0,slot={}",
                        i + 2
                    )
                ));
                assert!(has(
                    &a,
                    "-device",
                    &format!(
                        "cxl-type3,bus=cxl_rp{i},volatile-memdev=cxl-mem{i},id=cxl-vmem{i},sn={}",
                        i + 1
                    )
                ));
                assert!(has(
                    &a,
                    "-object",
                    &format!("memory-backend-ram,id=cxl-mem{i},share=on,size=2G")
                ));
            }
            // One window of the region's size, with its granularity.
            assert!(
                has(
                    &a,
                    "-M",
                    &format!(
                        "cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G,cxl-fmw.0.interleave-granularity={gran}"
                    )
                ),
                "{a:?}"
            );
            // HMAT for the one generic port; 2 nodes + 2x2 entries.
            assert!(has(
                &a,
                "-numa",
                "hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-bandwidth,bandwidth=10G"
            ));
            assert_eq!(a.iter().filter(|x| *x == "-numa").count(), 2 + 4);
            assert_eq!(
                t.cxl_param().as_deref(),
                Some(format!("4096:2:{gran}").as_str())
            );
            let d = t.describe();
            assert!(d.contains("root port 1 of host bridge 0"), "{d}");
            assert!(d.contains(&format!("granularity {gran} bytes")), "{d}");
        }
    }

    #[test]
    fn cxl_interleave_groups_given_devices() {
        let mut o = opts(TopologyKind::CXL, 2);
        o.cxl_interleave = Some(CxlInterleave::parse("2:4096").unwrap());
        o.cxl_devs = ["4G", "4G", "1G:300:5G", "1G:300:5G"]
            .iter()
            .map(|s| CxlDevice::parse(s).unwrap())
            .collect();
        let t = Topology::new(&o).unwrap();
        let a = t.qemu_args();
        assert_eq!(t.cxl_region_gib(), vec![8, 2]);
        assert_has(
            &a,
            &[
                ("-device", "pxb-cxl,bus_nr=28,bus=pcie.0,id=cxl.2"),
                ("-device", "cxl-rp,port=1,bus=cxl.2,id=cxl_rp3,chassis=0,slot=5"),
                ("-M", "cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=8G,cxl-fmw.0.interleave-granularity=4096,cxl-fmw.1.targets.0=cxl.2,cxl-fmw.1.size=2G,cxl-fmw.1.interleave-granularity=4096"),
            ],
        );
        // The second bridge's generic port (node 2) has the second pair's figures.
        assert!(has(
            &a,
            "-numa",
            "hmat-lb,initiator=0,target=2,hierarchy=memory,data-type=access-latency,latency=300"
        ));
        assert_eq!(t.cxl_param().as_deref(), Some("8192:2:4096,2048:2:4096"));
        let ids: Vec<&String> = a.iter().filter(|x| x.contains("id=cxl")).collect();
        let mut u = ids.clone();
        u.sort();
        u.dedup();
        assert_eq!(u.len(), ids.len());
        // An odd count, or a pair that differs, is refused.
        o.cxl_devs.pop();
        assert!(Topology::new(&o).is_err());
        o.cxl_devs = ["4G", "2G"]
            .iter()
            .map(|s| CxlDevice::parse(s).unwrap())
            .collect();
        let e = Topology::new(&o).unwrap_err().to_string();
        assert!(e.contains("differ"), "{e}");
        // Only with --topology cxl.
        let mut n = opts(TopologyKind::NUMA, 2);
        n.cxl_interleave = Some(CxlInterleave::parse("2").unwrap());
        assert!(Topology::new(&n).is_err());
        // 1-way is today's layout: no granularity in the window.
        let mut one = opts(TopologyKind::CXL, 2);
        one.cxl_interleave = Some(CxlInterleave::parse("1").unwrap());
        let t1 = Topology::new(&one).unwrap();
        assert!(has(
            &t1.qemu_args(),
            "-M",
            "cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G"
        ));
        assert_eq!(t1.cxl_param().as_deref(), Some("4096"));
    }

    #[test]
    fn cxl_interleave_specs() {
        let p = |s| CxlInterleave::parse(s);
        assert_eq!(
            p("2").unwrap(),
            CxlInterleave {
                ways: 2,
                granularity: 256
            }
        );
        assert_eq!(p("2:16k").unwrap().granularity, 16384);
        assert_eq!(p("1").unwrap(), CxlInterleave::NONE);
        for bad in ["0", "3", "4", "x", "2:128", "2:300", "2:32K", "2:", "2:abc"] {
            assert!(p(bad).is_err(), "{bad}");
        }
    }
}
