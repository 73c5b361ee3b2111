//! tk-test-rebalance: `TK_IOC_REBALANCE` moves exactly the pages of a live
//! mapping whose node changes under new weights, and nothing is lost.
//!
//! On a DRAM node and a memory-only node (numa: node 1; cxl: the CXL
//! node), with an 8 MiB mapping placed under tierkit weights {1,1}:
//! - after the weights become {3,1}, a dry run counts the pages whose node
//!   changes (the minimum, from tierkit-core's reference model) and moves
//!   none;
//! - the rebalance, with a thread writing every page meanwhile (each round
//!   to a word of its own), moves exactly the minimum; every page is then
//!   on the node the new weights give its ilx (move_pages), its pattern and
//!   every round's write are there, and the per-node `held` statistics
//!   moved by the same counts;
//! - a second call moves nothing;
//! - a budget stops the moves at the budget, and the next call moves the
//!   rest;
//! - a child paced at 50 pages/s is killed once it has moved a page; the
//!   pages it moved stay moved, and the parent's call moves the remainder
//!   only;
//! - a new nodemask ({DRAM} only) moves every page to DRAM, and the task
//!   path follows it;
//! - the file's own weights {1,3} given to the rebalance
//!   (`TK_REBALANCE_F_WEIGHTS`) move its pages to them, and tierkit's
//!   global table is untouched;
//! - a rebalance of one file zaps no other file's page: another file
//!   mapped at the same offsets keeps every page mapped
//!   (`/proc/self/pagemap`), on its node;
//! - another process's mapping, its file taken by address
//!   (`TK_IOC_MAPPED_FILE`) as `tk-calibrate --apply PID` does: the
//!   minimum moves, `numa_maps`
//!   shows the new placement, and the process finds its pages on the new
//!   nodes with their contents;
//! - SIGSTOP while one caller is paced and another waits for the file's
//!   rebalance: both in T at once; after SIGCONT, SIGUSR1 handlers run
//!   and both calls end with EINTR;
//! - a mapping placed on the DRAM node alone and rebalanced to both
//!   nodes moves every page bound for the memory-only node (on cxl, its
//!   ZONE_MOVABLE), none counted as `no_memory`;
//! - a mapping unmapped before the call is neither moved nor counted;
//! - refusals: unknown flags and no policy (EINVAL), gigantic mode
//!   (EOPNOTSUPP), a mask of nodes without memory (EINVAL).
//!
//! tierkit's weights are put back at the end.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::rebalance::main()
}
