//! tk-bench-gigantic: time to first use of 1 GiB, tierkit's gigantic mode
//! and from its pre-cleared pool, against the kernel's hugetlb first
//! fault. The measurements are in `crate::abi::first_use` (shared
//! with `tk-demo-gigantic`).
//!
//! For each node with memory, the time from `mmap` until every 4 KiB page
//! of the GiB has been written once: tierkit with T = 1 .. all online CPUs
//! (or `MAX_THREADS`) workers, tierkit from a ready pool (untimed: the
//! node's pool target set to 1 and the range ready; timed: the same `mmap`
//! and touches, whose first fault takes the pre-cleared range), and the
//! kernel's hugetlb first fault of a `MAP_HUGETLB | MAP_HUGE_1GB` page
//! bound to the node. Each (node, variant) is measured once untimed first,
//! then R times; the figure is the median. On a small guest reserve 1 GiB
//! pages at boot (`--append 'hugepagesz=1G hugepages=0:1,1:1'`), see
//! `first_use`.
//!
//! It prints `hugetlb ÷ tierkit` (time ratio: > 1 means tierkit is faster)
//! per node and T and `hugetlb ÷ pool` per node, with their targets
//! (>= 0.95 at T=1, >= 1.8 at T=2, >= 20 from a ready pool) reported as met
//! or missed but not enforced, and one `TIERKIT-JSON` line for `cargo xtask
//! bench gigantic`. A node where no 1 GiB tierkit range, pool range or
//! hugetlb page can be had is skipped with the reason.
//!
//! Usage: `tk-bench-gigantic [R [MAX_THREADS]]` (default R = 5, all CPUs).
//! Exit 0 unless a measurement failed.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::benches::gigantic::main()
}
