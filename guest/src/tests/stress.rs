//! The logic of `tk-test-stress`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-stress.rs` (its `--help`).

use crate::abi::ready::read_topology;
use crate::harness::report::Report;
use crate::tools::stress::{run, Config};
use std::process::ExitCode;

/// `tk-test-stress`'s `main`.
pub fn main() -> ExitCode {
    let mut r = Report::new("tk-test-stress", "test");
    let Some(topo) = read_topology(&mut r) else {
        return r.finish();
    };
    run(&mut r, &topo, &Config::suite());
    r.finish()
}
