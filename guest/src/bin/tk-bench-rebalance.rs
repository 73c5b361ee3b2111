//! tk-bench-rebalance: a running STREAM triad's working set moved from the
//! HMAT weights to the measured ones while it runs, measured side by side
//! in one run.
//!
//! 1. Calibrate the DRAM node and the memory-only node (as tk-calibrate
//!    does) and compute the kernel's auto weights from HMAT and from the
//!    measurement.
//! 2. Map the working set through `/dev/tierkit` under the HMAT weights;
//!    a thread runs the triad on it without pause.
//! 3. Set the measured weights and `TK_IOC_REBALANCE` the file while the
//!    triad runs: pages moved against the minimum (the pages whose node
//!    the new weights change, by tierkit-core's reference model), the move
//!    time and MB/s against the target node's calibrated copy bandwidth,
//!    and the triad's MB/s before, during and after.
//! 4. Two fresh working sets placed with the measured weights, measured in
//!    alternating blocks with the rebalanced one ("after" and "fresh"; the
//!    second fresh one gives the run's noise floor: how far identical
//!    placements differ).
//! 5. The same weight change on an anonymous working set under the
//!    kernel's `MPOL_WEIGHTED_INTERLEAVE` and `mbind(MPOL_MF_MOVE)`: how
//!    many pages the kernel moves and how many end off the new weights'
//!    node.
//! 6. The move speed, side by side: `TK_IOC_REBALANCE` moving every page
//!    of a `/dev/tierkit` mapping from the DRAM node to the memory-only
//!    one, and `move_pages(2)` moving as many pages of an anonymous mapping
//!    between the same nodes (one warm-up each, then the median of three,
//!    alternating; every page's node and contents checked). One row per
//!    method (workload `move`, us/page, with `ratio`: tierkit's over the
//!    kernel's).
//!
//! One row per topology in the `TIERKIT-JSON` line (`rows`, workload
//! `rebalance`, MB/s, with `moved`, `minimum`, `before`, `during`,
//! `after`, `fresh`, `move_ms`, `move_mbps`, `copy_mbps`, `mbind_moved`,
//! `mbind_misplaced`). Checks: moved == minimum; the working set's data
//! intact (STREAM's own check); every page on its new node. tierkit's and
//! the kernel's weights are put back at the end.
//!
//! Flags: `--size BYTES` (working set, default 24M), `--seconds S` per
//! phase (default 1.5), `--move-size BYTES` (the move speed's mappings,
//! default 64M).

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::benches::rebalance::main()
}
