//! The logic of `tk-bench-gigantic`; what it does and how it is used are the doc of
//! `src/bin/tk-bench-gigantic.rs` (its `--help`).

use crate::abi::first_use::{self, Plan, Results};
use crate::abi::tk::MovableGigantic;
use crate::harness::report::Report;
use crate::topology::node::parse_list;
use clap::Parser;
use serde_json::json;
use std::fs;
use std::process::ExitCode;

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

pub fn main() -> ExitCode {
    if let Some(code) = first_use::child_requested() {
        return code;
    }
    let args = Args::parse();
    let (reps, max_threads) = (args.reps.max(1), args.max_threads);
    let mut r = Report::new(BIN, "bench");
    let Some(topo) = crate::abi::ready::tierkit_ready(&mut r) else {
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
    // With init_on_alloc=1 the allocator zeroes every page it hands out:
    // tierkit's clear is then that zeroing, and hugetlb's reservation
    // clears too (the total-cost table reads differently).
    r.set(
        "init_on_alloc",
        json!(crate::linux::kernel::init_on_alloc()),
    );
    out.into_report(&mut r);
    r.finish()
}
