//! tk-demo-gigantic: what `cargo xtask run` shows of gigantic mode: the
//! time to first use of 1 GiB (from `mmap` until every 4 KiB page was written once)
//! on each memory node, tierkit against the kernel's hugetlb first fault.
//!
//! The short plan of `tk-bench-gigantic` (the same code,
//! `userspace_tests::first_use`): per node, tierkit with the worker count
//! it picks (`TK_THREADS_AUTO`), tierkit from a ready pool (the node's pool
//! target set to 1 and the range ready, untimed; the fault takes it) and
//! hugetlb, one timed run each after an untimed warm-up. On a node made of
//! an emulated CXL region the warm-ups are left out: QEMU forwards every
//! access there to the device, so one clear of 1 GiB takes about 50 s and
//! the host's first-touch cost (about 1 s per GiB) is lost in it.
//!
//! A node where a side cannot get a free naturally aligned GiB is skipped
//! with the reason (on a small guest: `--append 'hugepagesz=1G
//! hugepages=0:1,1:1'`, see `first_use`). `cargo xtask bench gigantic`
//! has the full series and medians.
//!
//! Exit 0 unless a measurement failed.

use serde_json::json;
use std::process::ExitCode;
use tierkit_core::uapi::TK_THREADS_AUTO;
use userspace_tests::first_use::{self, Plan, Results};
use userspace_tests::report::Report;
use userspace_tests::tk::MovableGigantic;

const BIN: &str = "tk-demo-gigantic";

fn main() -> ExitCode {
    userspace_tests::help!();
    if let Some(code) = first_use::child_requested() {
        return code;
    }
    let mut r = Report::new(BIN, "demo");
    let Some(topo) = userspace_tests::tierkit_ready(&mut r) else {
        return r.finish();
    };
    println!();
    println!("time to first use of 1 GiB per node: tierkit (auto workers), tierkit from its pre-cleared pool, hugetlb");
    // A CXL node onlined `online_movable` has only ZONE_MOVABLE memory.
    let _movable = MovableGigantic::enable().ok();
    let cxl = userspace_tests::cxl::cxl_nodes();
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
