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
//! 7. The target share against DAMON (`benches::target_share`): working
//!    sets of `--share-size` that start at DRAM:CXL 2:1 are sent to 1:2,
//!    a `/dev/tierkit` mapping by `TK_IOC_REBALANCE`, an anonymous one by
//!    DAMON's paired push/pull `migrate_hot` schemes (`paddr`, quota goals
//!    `node_eligible_mem_bp`, set up through /sys/kernel/mm/damon/admin;
//!    DAMON's `paddr` operations see only LRU folios, so not tierkit's
//!    pages), each watched for at most `--share-seconds` while a thread
//!    sweeps the working set: moves seen (every page's frame, sampled)
//!    against the minimum, the kernel's count of bytes moved, the time to
//!    a split within 1% of the target, the final split, pages moved twice
//!    and the sweep's rate before, during and after. One row per method
//!    (workload `share`). Not reaching the target in time is a measured
//!    result, not a failure; a page that lost its contents is.
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
//! default 64M), `--share-size BYTES` (the target share's working sets,
//! default 64M), `--share-seconds S` (its bound per method, default 60),
//! `--share-only` (step 7 alone).

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::benches::rebalance::main()
}
