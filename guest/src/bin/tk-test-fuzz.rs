//! tk-test-fuzz: the fuzzer (`crate::tests::fuzz`, also `tk-fuzz`) with
//! fixed bounds, in `cargo xtask test`.
//!
//! - A run of [`CALLS`] calls with seed [`SEED`] by [`PROCS`] processes x
//!   [`THREADS`] threads on shared and separate files, bounded by
//!   [`SECONDS`], with [`BIG`] GiB-sized calls; every result checked where
//!   the ABI fixes it, at least 100,000 calls, tierkit's held pages and
//!   weight table back afterwards (see `fuzz::checked_run`).
//! - Replay: worker 1.1's stream of the same seed run alone, twice (what
//!   `tk-fuzz --only 1.1` does), makes the same calls with the same
//!   results, call for call counted by kind and outcome: a failing seed
//!   reproduces.
//! - Differential fuzzing of the weight files: [`DIFF_WRITES`] random
//!   payloads (the fuzzer's, and NULs, empty and page-sized writes) written
//!   with `write(2)` to a fresh open of the kernel's
//!   `/sys/kernel/mm/mempolicy/weighted_interleave/{nodeN,auto}` and of
//!   tierkit's debugfs mirror, which promises the same formats and errors
//!   (Documentation/ABI/testing/debugfs-tierkit): the result (bytes or
//!   errno) and the weights and `auto` read back afterwards must be the
//!   same. Both tables are put back afterwards.
//! - Regression cases: minimal inputs the fuzzer found, each as a named
//!   check (see [`regressions`]).

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::fuzz::suite::main()
}
