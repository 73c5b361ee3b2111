//! tk-bench-wi: pages per second delivered to userspace, side by side in
//! one run on the same guest:
//!
//! - tierkit: `mmap` of `/dev/tierkit` (MAP_SHARED, weighted interleave),
//!   which allocates, zeroes and inserts every page during the call;
//! - an anonymous private mapping under the kernel's
//!   MPOL_WEIGHTED_INTERLEAVE, under MPOL_INTERLEAVE, and under the default
//!   (local) policy, each with MADV_NOHUGEPAGE and faulted page by page.
//!
//! Each variant is timed from the `mmap` call until one byte of every page
//! has been written (for tierkit that write hits pages already mapped; for
//! the anonymous mappings it is the fault that allocates and zeroes).
//! `munmap` and freeing are not timed. Variants run round-robin, `reps`
//! times; the table shows the median and best rate and the ratio of
//! tierkit's median to each. Weights are the kernel's current ones (its
//! auto weights on an HMAT topology), copied to tierkit; the kernel's are
//! not changed.
//!
//! Usage: `tk-bench-wi [MIB [REPS]]` (default 64 MiB, 5 repetitions).
//! ns per node selection is benchmarked on the host (module/core benches).

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::benches::wi::main()
}
