//! The table of topologies ([`TOPOLOGIES`]): one [`TopologySpec`] per
//! `--topology` (nodes, CXL, defaults), and [`TopologyKind`], a reference
//! into it.

use std::fmt;

use super::perf::*;

/// One guest topology, described once: adding a topology is one entry of
/// [`TOPOLOGIES`] (plus, for new hardware, its QEMU arguments in
/// [`super::Topology::qemu_args`] and its guest set-up in the guest's /init (`guest/src/init/`)).
#[derive(Debug)]
pub struct TopologySpec {
    /// Its `--topology` name.
    pub name: &'static str,
    /// What it is, for `--help`.
    pub about: &'static str,
    /// CPU+DRAM nodes (0..k); `--cpus` is split evenly over them.
    pub cpu_nodes: u32,
    /// Memory-only boot nodes after them: node `k + j` has CPU node
    /// `j % cpu_nodes` as its HMAT initiator and [`TopologySpec::mem_perf`]
    /// from it.
    pub mem_nodes: u32,
    /// Size of each memory-only node, GiB, without `--cxl-mem`.
    pub mem_gib: u32,
    /// Its last memory-only node is a cold-plugged DIMM (`pc-dimm`) when
    /// the kernel adds memory from ACPI
    /// ([`super::TopologyOpts::mem_hotplug`]): the kernel's ACPI memory
    /// hotplug driver adds it at boot, `memhp_default_state=online_movable`
    /// puts it in ZONE_MOVABLE, and it can go offline whole. Only the last
    /// one, and only without CXL: QEMU's SRAT gives the hot-pluggable range
    /// one proximity domain, the highest node's, and Linux keeps a node's
    /// HMAT figures only for a domain SRAT gives memory to (a DIMM of
    /// another node would have none).
    pub hotplug_last_mem: bool,
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
    /// HMAT performance of another CPU node's DRAM.
    pub remote_dram: Perf,
    /// HMAT performance of a memory-only node from its initiator.
    pub mem_perf: Perf,
    /// HMAT performance of a memory-only node from any other CPU node.
    pub remote_mem: Perf,
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
    /// emulated CXL memory is far slower there (Documentation/results/
    /// topologies.md, "Slow memory").
    pub timeout_factor: u64,
}

/// The default QEMU `-cpu` of every topology: without ERMS, FSRM and FSRS
/// the kernel's clear_page, memset and copies use `rep stosq` and 8-byte
/// moves, which TCG runs 8 bytes per access instead of one (on DRAM a 1 GiB
/// clear-and-check KUnit case took 15 s instead of 33 s; on CXL memory,
/// emulated access by access, the gain is 8x).
pub const NO_REP_STOSB: &str = "max,erms=off,fsrm=off,fsrs=off";

/// `--cxl-mem`'s default but for socket2, GiB.
pub const DEFAULT_MEM_GIB: u32 = 3;

/// Every topology `--topology` offers.
pub const TOPOLOGIES: [TopologySpec; 4] = [
    TopologySpec {
        name: "numa",
        about: "node0: CPUs + DRAM; node1: memory only, slower (HMAT), like CXL",
        cpu_nodes: 1,
        mem_nodes: 1,
        mem_gib: DEFAULT_MEM_GIB,
        hotplug_last_mem: false,
        cxl: false,
        dram_gib: 8,
        dram_perf: LOCAL_DRAM,
        remote_dram: REMOTE_DRAM,
        mem_perf: SLOW_MEM,
        remote_mem: SLOW_MEM_REMOTE,
        cpu_model: NO_REP_STOSB,
        timeout_factor: 1,
    },
    TopologySpec {
        name: "numa2",
        about: "node0: CPU0 + DRAM; node1: CPU1 + DRAM; node2: memory only \
                (local-versus-remote placement, benchmarks)",
        cpu_nodes: 2,
        mem_nodes: 1,
        mem_gib: DEFAULT_MEM_GIB,
        hotplug_last_mem: false,
        cxl: false,
        dram_gib: 8,
        dram_perf: LOCAL_DRAM,
        remote_dram: REMOTE_DRAM,
        mem_perf: SLOW_MEM,
        remote_mem: SLOW_MEM_REMOTE,
        cpu_model: NO_REP_STOSB,
        timeout_factor: 1,
    },
    TopologySpec {
        name: "cxl",
        about: "node0: CPUs + DRAM; QEMU cxl-type3 devices (--cxl-dev), assembled \
                into RAM regions by the kernel's CXL drivers and onlined as CPU-less nodes",
        cpu_nodes: 1,
        mem_nodes: 0,
        mem_gib: DEFAULT_MEM_GIB,
        hotplug_last_mem: false,
        cxl: true,
        dram_gib: 8,
        dram_perf: CXL_TOPO_DRAM,
        remote_dram: REMOTE_DRAM,
        mem_perf: SLOW_MEM,
        remote_mem: SLOW_MEM_REMOTE,
        cpu_model: NO_REP_STOSB,
        timeout_factor: 4,
    },
    TopologySpec {
        name: "socket2",
        about: "two sockets: node0 CPU0 + DRAM, node1 CPU1 + DRAM, node2 memory only \
                near socket 0, node3 memory only near socket 1 (HMAT 300/100 GB/s \
                local, 150/50 remote; per-socket weights); on a kernel with ACPI memory \
                hotplug (Debian's) node3 is a DIMM in ZONE_MOVABLE that can go offline whole",
        cpu_nodes: 2,
        mem_nodes: 2,
        mem_gib: 2,
        hotplug_last_mem: true,
        cxl: false,
        dram_gib: 2,
        dram_perf: SOCKET_DRAM,
        remote_dram: SOCKET_DRAM_REMOTE,
        mem_perf: SOCKET_MEM,
        remote_mem: SOCKET_MEM_REMOTE,
        cpu_model: NO_REP_STOSB,
        timeout_factor: 1,
    },
];

/// A topology: an entry of [`TOPOLOGIES`]. Equal when the names are.
#[derive(Clone, Copy, Debug)]
pub struct TopologyKind(&'static TopologySpec);

impl TopologyKind {
    pub const NUMA: TopologyKind = TopologyKind(&TOPOLOGIES[0]);
    pub const NUMA2: TopologyKind = TopologyKind(&TOPOLOGIES[1]);
    pub const CXL: TopologyKind = TopologyKind(&TOPOLOGIES[2]);
    pub const SOCKET2: TopologyKind = TopologyKind(&TOPOLOGIES[3]);

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
