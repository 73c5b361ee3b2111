//! tk-bench-gigantic: time to first use of 1 GiB, tierkit's gigantic mode
//! and from its pre-cleared pool, against the kernel's hugetlb first
//! fault. The measurements are in `userspace_tests::first_use` (shared
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
//! per node and T and `hugetlb ÷ pool` per node, with the targets
//! (>= 0.95 at T=1, >= 1.8 at T=2, >= 20 from a ready pool) reported as met
//! or missed but not enforced, and one `TIERKIT-JSON` line for `cargo xtask
//! bench gigantic`. A node where no 1 GiB tierkit range, pool range or
//! hugetlb page can be had is skipped with the reason.
//!
//! Usage: `tk-bench-gigantic [R [MAX_THREADS]]` (default R = 5, all CPUs).
//! Exit 0 unless a measurement failed.

use clap::Parser;
use serde_json::json;
use std::fs;
use std::process::ExitCode;
use userspace_tests::first_use::{self, Plan, Results};
use userspace_tests::node::parse_list;
use userspace_tests::report::Report;
use userspace_tests::tk::MovableGigantic;

const BIN: &str = "tk-bench-gigantic";

/// The arguments: `[R [MAX_THREADS]]`.
#[derive(Parser)]
#[command(disable_help_flag = true)]
struct Args {
    /// R: repetitions.
    #[arg(default_value_t = 5)]
    reps: usize,
    /// The most worker threads.
    #[arg(default_value_t = u32::MAX)]
    max_threads: u32,
}

fn main() -> ExitCode {
    userspace_tests::help!();
    if let Some(code) = first_use::child_requested() {
        return code;
    }
    let args = Args::parse();
    let (reps, max_threads) = (args.reps.max(1), args.max_threads);
    let mut r = Report::new(BIN, "bench");
    let Some(topo) = userspace_tests::tierkit_ready(&mut r) else {
        return r.finish();
    };
    let ncpus = fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_list(&s).ok())
        .map_or(1, |v| v.len() as u32)
        .min(max_threads)
        .max(1);
    // Gigantic ranges on a CXL node onlined `online_movable` need the
    // opt-in.
    let _movable = MovableGigantic::enable().ok();
    let plan = Plan {
        reps,
        threads: (1..=ncpus).collect(),
        pool: true,
        warm_up: true,
    };
    let mut out = Results::default();
    for &nid in &topo.memory {
        first_use::run_node(&mut r, &topo, nid, &plan, &mut out);
    }
    out.print(reps);
    r.set("reps", json!(reps));
    out.into_report(&mut r);
    r.finish()
}
