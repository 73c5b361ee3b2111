//! tk-test-rebalance-speed: tierkit moves pages between nodes at the
//! kernel's own migration speed.
//!
//! On a DRAM node and a memory-only node (numa: node 1; cxl: the CXL
//! node), in one run: `TK_IOC_REBALANCE` moves every page of a 64 MiB
//! `/dev/tierkit` mapping from the DRAM node to the other (a new nodemask),
//! and `move_pages(2)` moves every page of a 64 MiB anonymous mapping
//! between the same nodes. One warm-up of each, then three repetitions of
//! each, alternating which goes first; each repetition checks that every
//! page is on the target node and kept its contents. Measured twice: the
//! mover alone, and with another thread of the process running on another
//! CPU (as a workload whose pages move: every TLB flush is then an IPI).
//!
//! Fails when tierkit's median time per page moved is more than 1.5 times
//! `move_pages(2)`'s, in either.
//!
//! Flags: `--size BYTES` (default 64M), `--reps N` (default 3).

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::rebalance_speed::main()
}
