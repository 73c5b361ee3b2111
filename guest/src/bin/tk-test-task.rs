//! tk-test-task: the task path (`TK_IOC_TASK_NEXT`, mm/mempolicy.c
//! `weighted_interleave_nodes`) and the bulk path (`TK_IOC_BULK`,
//! `alloc_pages_bulk_weighted_interleave`) through the module, against
//! tierkit-core's model (`TaskState::next`, `bulk_split`).
//!
//! - The worked example: fresh {0,1} weights {3,1}, 10 pages in bulk ->
//!   8 on DRAM, 2 on CXL, resume (DRAM, 1); then three single steps go
//!   DRAM, CXL, DRAM.
//! - A fresh task path walks 0,0,0,1,0,0,0,1.
//! - For each weight set, a pseudo-random mix of bulk sizes and task steps,
//!   with a weight change and a policy reset in the middle, compared call
//!   by call: per-node counts, `il_prev`, `il_weight`, and each node.
//! - Bad counts and a file without a weighted policy are refused.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::task::main()
}
