//! tk-test-fuzz: the fuzzer (`userspace_tests::fuzz`, also `tk-fuzz`) with
//! fixed bounds, in `cargo xtask test`.
//!
//! - A run of [`CALLS`] calls with seed [`SEED`] by [`PROCS`] processes x
//!   [`THREADS`] threads on shared and separate files, bounded by
//!   [`SECONDS`], with [`BIG`] GiB-sized calls; every result checked where
//!   the ABI fixes it, at least 100,000 calls, tierkit's held pages and
//!   weight table back afterwards (see `fuzz::checked_run`).
//! - Regression cases: minimal inputs the fuzzer found, each as a named
//!   check (none so far in the module; see the list in [`regressions`]).

use std::process::ExitCode;
use userspace_tests::fuzz::{checked_run, Config};
use userspace_tests::report::Report;

const BIN: &str = "tk-test-fuzz";
/// "tierkit1" in ASCII: fixed, so that every run makes the same calls.
const SEED: u64 = 0x7469_6572_6b69_7431;
const CALLS: u64 = 120_000;
const SECONDS: f64 = 240.0;
const PROCS: u32 = 2;
const THREADS: u32 = 2;
const BIG: u32 = 1;
/// The floor.
const MIN_CALLS: u64 = 100_000;

fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let cfg = Config {
        seed: SEED,
        calls: CALLS,
        seconds: SECONDS,
        threads: THREADS,
        procs: PROCS,
        big: BIG,
        only: None,
        debugfs_writes: true,
    };
    checked_run(&mut r, &cfg, MIN_CALLS);
    regressions(&mut r);
    r.finish()
}

/// Minimal failing inputs found by the fuzzer, kept as named checks.
fn regressions(_r: &mut Report) {}
