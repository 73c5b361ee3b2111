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
//! `guest/src/init/cxl_setup.rs`); the region's dax device is onlined by kmem as a new
//! CPU-less node whose number the kernel picks (a CFMWS window without SRAT
//! memory gets a fresh node), and whose performance the kernel computes from
//! the generic port's HMAT entries plus the device's CDAT and link.
//!
//! With [`CxlInterleave`] (`--cxl-interleave WAYS[:GRANULARITY]`) the
//! devices come in groups of WAYS: each group shares one host bridge (one
//! `cxl-rp` root port per device, `port=0..WAYS-1`), one generic port and one
//! window (`cxl-fmw.<g>.interleave-granularity=`), and /init assembles one
//! region interleaved across the group's devices.

mod cxl;
mod perf;
mod qemu_args;
mod spec;
/// How hot-added memory (the CXL node of `--topology cxl`) is onlined:
/// `memhp_default_state=online_movable` or `online_kernel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CxlOnline {
    /// ZONE_MOVABLE, as `daxctl reconfigure-device --mode=system-ram` and
    /// the usual auto-online rules do on real systems: it can be offlined
    /// again, and the kernel refuses long-term pins there.
    Movable,
    /// ZONE_NORMAL: kernel allocations may land there; it cannot be
    /// offlined while they do.
    Kernel,
}

impl CxlOnline {
    /// The `memhp_default_state=` value.
    pub fn as_param(self) -> &'static str {
        match self {
            CxlOnline::Movable => "online_movable",
            CxlOnline::Kernel => "online_kernel",
        }
    }
}

#[cfg(test)]
mod tests;

use anyhow::{bail, Result};

pub use cxl::*;
pub use perf::*;
pub use spec::*;

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
    /// A cold-plugged DIMM, hot-removable, instead of boot memory
    /// ([`TopologySpec::hotplug_last_mem`]).
    pub dimm: bool,
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
    /// The kernel adds memory that ACPI describes as hot-pluggable
    /// (`CONFIG_ACPI_HOTPLUG_MEMORY`): a topology's hot-pluggable
    /// memory-only node ([`TopologySpec::hotplug_last_mem`]) is a DIMM.
    /// Without it, that node is boot memory like the others.
    pub mem_hotplug: bool,
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
            mem_hotplug: false,
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
        // Memory-only node j is near CPU node j % k; the last one may be a
        // DIMM, and only where it is the highest node (no CXL after it).
        let last = spec.mem_nodes as usize;
        let mem_nodes = (0..last)
            .map(|j| MemNode {
                size_gib: o.slow_gib,
                initiator: j % k as usize,
                perf: spec.mem_perf,
                dimm: o.mem_hotplug && spec.hotplug_last_mem && !spec.cxl && j + 1 == last,
            })
            .collect();
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
            mem_nodes,
            cxl,
            cxl_interleave: il,
            dram_perf: o.dram_perf.unwrap_or(spec.dram_perf),
        })
    }

    pub fn total_cpus(&self) -> u32 {
        self.cpu_nodes.iter().map(|n| n.cpus).sum()
    }

    /// DRAM and memory-only nodes (boot memory and DIMMs), not CXL.
    /// (u64: per-node sizes are u32 GiB, and their sum must not wrap.)
    pub fn total_mem_gib(&self) -> u64 {
        self.dram_gib() + self.mem_node_gib()
    }

    /// Boot memory (`-m`): [`Topology::total_mem_gib`] without the DIMMs.
    pub fn boot_mem_gib(&self) -> u64 {
        self.total_mem_gib() - self.dimm_gib()
    }

    /// Memory of the memory-only nodes that are DIMMs, GiB.
    pub fn dimm_gib(&self) -> u64 {
        self.mem_nodes
            .iter()
            .filter(|n| n.dimm)
            .map(|n| u64::from(n.size_gib))
            .sum()
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
                self.kind.spec().remote_dram
            }
        } else if target < k + m {
            let n = &self.mem_nodes[target - k];
            if n.initiator == init {
                n.perf
            } else {
                self.kind.spec().remote_mem
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
            let regions: Vec<tierkit_protocol::cxl::Region> = self
                .cxl_groups()
                .map(|g| tierkit_protocol::cxl::Region {
                    mib: g.iter().map(|d| d.size_mib()).sum(),
                    ways: il.ways.max(1),
                    granularity: (il.ways > 1).then_some(il.granularity),
                })
                .collect();
            tierkit_protocol::cxl::encode(&regions)
        })
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
                "node{}: {} GiB memory only ({} from node{}){}",
                k + j,
                m.size_gib,
                m.perf,
                m.initiator,
                if m.dimm {
                    ", a hot-pluggable DIMM (ZONE_MOVABLE)"
                } else {
                    ""
                }
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
