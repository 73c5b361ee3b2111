//! tk-test-pool-cxl: tierkit's pre-cleared gigantic pool on the first
//! memory-only node (the emulated CXL node of `--topology cxl`, where
//! filling one range takes tens of seconds; numa's memory-only node
//! otherwise; skipped without one): filling, the memory it takes, refused
//! writes, a first touch served from the pool, the refill and emptying
//! (`tierkit_guest::tests::pool`; the shrinker and `rmmod` are
//! `tk-test-pool`'s). In `SLOW_USER_TESTS`: `cargo xtask test --full`.
//!
//! Exit 0 if every check passed.

use std::process::ExitCode;
use tierkit_guest::tests::pool::{self, Which};

fn main() -> ExitCode {
    tierkit_guest::help!();
    pool::main("tk-test-pool-cxl", Which::MemoryOnly)
}
