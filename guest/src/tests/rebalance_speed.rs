//! The logic of `tk-test-rebalance-speed`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-rebalance-speed.rs` (its `--help`).

use crate::abi::ready::tierkit_ready;
use crate::benches::move_speed;
use crate::harness::report::Report;
use crate::linux::sys::PAGE_SIZE;
use crate::tools::workload::Flags;
use std::process::ExitCode;

const BIN: &str = "tk-test-rebalance-speed";
/// tierkit's time per page moved may be at most this many times
/// `move_pages(2)`'s.
pub const MAX_RATIO: f64 = 1.5;

pub fn main() -> ExitCode {
    let flags = match Flags::from_args(BIN, &[], &["size", "reps"]) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let mut r = Report::new(BIN, "test");
    let (size, reps) = match (
        flags.size_or("size", 64 << 20),
        flags.parse_or("reps", 3usize),
    ) {
        (Ok(s), Ok(n)) => (s, n.max(1)),
        (Err(e), _) | (_, Err(e)) => {
            r.fail("flags", format!("{e:#}"));
            return r.finish();
        }
    };
    let Some(topo) = tierkit_ready(&mut r) else {
        return r.finish();
    };
    let (Some(d), Some(c)) = (topo.dram_node(), topo.cxl_node()) else {
        r.skip("move speed", "no DRAM + memory-only node pair");
        return r.finish();
    };
    for running in [false, true] {
        let name = format!(
            "time per page moved at most {MAX_RATIO}x move_pages(2)'s{}",
            if running {
                ", a thread running on another CPU"
            } else {
                ", alone"
            }
        );
        match move_speed::measure(d, c, size / PAGE_SIZE, reps, running) {
            Ok(s) => {
                let line = s.summary(d, c);
                r.check(
                    &name,
                    if s.ratio() <= MAX_RATIO {
                        Ok(())
                    } else {
                        Err(format!("ratio {:.2}: {line}", s.ratio()))
                    },
                );
                r.note(line);
            }
            Err(e) => {
                r.fail(&name, e);
            }
        }
    }
    r.finish()
}
