//! tk-test-run-apply: `tk-calibrate --apply PID` reaches a tk-run program
//! (Documentation/dev-tools/tk-run.md, "Rebalancing a running program").
//!
//! `tk-stream -w` runs under `tk-run --weights D:1` (every page of its
//! three malloc'd arrays on the DRAM node D) and holds them; then
//! `tk-calibrate --apply PID --weights D:1,S:2` (S: the first other node
//! with memory):
//! - exits 0, and its JSON line says three files, moved = misplaced =
//!   the pages the new rule sends to S, none stayed;
//! - every page of the three arrays is where the new weights' rule puts it
//!   (`move_pages(2)` on the pid; a control: the weights swapped disagree);
//! - `numa_maps` shows exactly `moved` pages on S;
//! - a second apply with the same weights moves nothing and exits 0;
//! - the program's own check of every element after the moves passes.
//!
//! Refusals, each a non-zero exit with its reason: a pid with no tierkit
//! mapping (this test's), a pid that does not exist, and the program's
//! pid without CAP_SYS_ADMIN (dropped from the bounding set before exec).

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::run_apply::main()
}
