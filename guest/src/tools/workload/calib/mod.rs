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
//!
//! Here: the options, the saved figures and the firmware's; the latency
//! chase in `latency.rs`, the run in `run.rs` ([`calibrate`]), what a
//! calibration gives in `figures.rs`.

use super::kernels::{Arrays, Block, Bw, ChunkMins};
use super::{amounts_of, fmt_pages, Rng, SendPtr};
use super::{
    fmt_size, in_guest, nearest_cpu_node, node_cpus, run_threads_settled, Placement, Region,
};
use crate::linux::sys::monotonic_ns;
use crate::topology::cxl::CxlBus;
use crate::topology::node::{access1_bandwidth, Topology, NODE_SYSFS};
pub use crate::topology::weights::{table_from_bandwidth, weights_from_bandwidth};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use tierkit_core::interleave::Nodemask;
use tierkit_protocol::model::{self, Rates, Regime};

mod figures;
mod latency;
mod run;

pub use latency::*;
pub use run::*;

#[cfg(test)]
mod tests;

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
    /// `--per-socket`: every node measured again from each socket's CPUs,
    /// one weight table per socket (none in a file written without it, or
    /// by an older tk-calibrate).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sockets: Vec<SocketCal>,
}

/// One socket's calibration (`tk-calibrate --per-socket`): each memory
/// node measured by threads on this socket's CPUs, and the socket's weight
/// table from those figures ([`table_from_bandwidth`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SocketCal {
    /// The socket: its CPU package id (`physical_package_id`).
    pub socket: u32,
    /// Its CPU nodes and CPUs: every node's figures are from these CPUs.
    pub cpu_nodes: Vec<u32>,
    pub cpus: Vec<u32>,
    pub nodes: Vec<NodeCal>,
    /// `(node, weight)`, weights 1..=255, one entry per measured node:
    /// the socket's table.
    pub weights: Vec<(u32, u8)>,
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
