//! tk-test-pool: tierkit's pre-cleared gigantic pool on the DRAM node
//! (the first node with memory and CPUs), every step of
//! `tierkit_guest::tests::pool`: filling, the memory it takes, refused
//! writes, a first touch served from the pool, the refill, the shrinker
//! and its pause, emptying, and `rmmod` with a ready range.
//!
//! Exit 0 if every check passed.

use std::process::ExitCode;
use tierkit_guest::tests::pool::{self, Which};

fn main() -> ExitCode {
    tierkit_guest::help!();
    pool::main("tk-test-pool", Which::Dram)
}
