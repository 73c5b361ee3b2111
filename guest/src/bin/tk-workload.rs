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
//! `crate::tools::workload::kernels`): XSBench-style lookups/s,
//! STREAM-style copy/scale/add/triad MB/s, and page_fault2-style faults/s
//! for 1..T threads plus pages/s delivered by tierkit's mmap against the
//! kernel's page-by-page faults and `MAP_POPULATE`.
//!
//! Predictions: the model (`tierkit_protocol::model`) in the calibration's
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
//! (deliveries), `--topology NAME` (the label in the rows), `--no-settle`
//! (no TLB settle before each timed block). Defaults are
//! small in tierkit's guest (`$TIERKIT_MODE` set) and larger elsewhere.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tools::workload::cli::main()
}
