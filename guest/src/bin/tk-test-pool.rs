//! tk-test-pool: tierkit's pre-cleared gigantic pool on the DRAM node
//! (the first node with memory and CPUs), every step of
//! `userspace_tests::pool_test`: filling, the memory it takes, refused
//! writes, a first touch served from the pool, the refill, the shrinker
//! and its pause, emptying, and `rmmod` with a ready range.
//!
//! Exit 0 if every check passed.

use std::process::ExitCode;
use userspace_tests::pool_test::{self, Which};

fn main() -> ExitCode {
    userspace_tests::help!();
    pool_test::main("tk-test-pool", Which::Dram)
}
