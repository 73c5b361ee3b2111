//! The logic of `tk-demo-gigantic`; what it does and how it is used are the doc of
//! `src/bin/tk-demo-gigantic.rs` (its `--help`).

use crate::abi::first_use::{self, Plan, Results};
use crate::abi::tk::MovableGigantic;
use crate::harness::report::Report;
use serde_json::json;
use std::process::ExitCode;
use tierkit_core::uapi::TK_THREADS_AUTO;

const BIN: &str = "tk-demo-gigantic";

pub fn main() -> ExitCode {
    if let Some(code) = first_use::child_requested() {
        return code;
    }
    let mut r = Report::new(BIN, "demo");
    let Some(topo) = crate::abi::ready::tierkit_ready(&mut r) else {
        return r.finish();
    };
    println!();
    println!("time to first use of 1 GiB per node: tierkit (auto workers), tierkit from its pre-cleared pool, hugetlb");
    // A CXL node onlined `online_movable` has only ZONE_MOVABLE memory.
    let _movable = MovableGigantic::enable().ok();
    let cxl = crate::topology::cxl::cxl_nodes();
    let mut out = Results::default();
    for &nid in &topo.memory {
        let warm_up = !cxl.contains(&nid);
        if !warm_up {
            r.note(format!(
                "node {nid} is emulated CXL memory: no warm-ups (about 50 s per GiB cleared)"
            ));
        }
        let plan = Plan {
            reps: 1,
            threads: vec![TK_THREADS_AUTO],
            pool: true,
            warm_up,
        };
        let t0 = std::time::Instant::now();
        first_use::run_node(&mut r, &topo, nid, &plan, &mut out);
        r.note(format!(
            "node {nid}: {:.1} s for this node's measurements",
            t0.elapsed().as_secs_f64()
        ));
    }
    out.print(1);
    r.set("reps", json!(1));
    out.into_report(&mut r);
    r.finish()
}
