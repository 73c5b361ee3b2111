//! tk-test-faults: systematic fault injection into every tierkit operation,
//! as syzkaller does it, with the kernel's own machinery
//! (`CONFIG_FAULT_INJECTION`, `FAILSLAB`, `FAIL_PAGE_ALLOC`, the per-task
//! `/proc/thread-self/fail-nth`; Documentation/fault-injection/).
//!
//! `failslab` and `fail_page_alloc` are set so that sleeping and order-0
//! allocations can fail (`ignore-gfp-wait=N`, `min-order=0`,
//! `ignore-gfp-highmem=N`, `verbose=1`: one `FAULT_INJECTION: forcing a
//! failure.` line and one `name failslab|fail_page_alloc, ...` line per
//! injected fault, read back from `/dev/kmsg` to count faults per type; no
//! stack dump) and restored afterwards. For each operation, for N = 1, 2,
//! ...: write N to `fail-nth`, make the one call, read `fail-nth` back (0 iff
//! the Nth allocation of the call was made to fail), and stop at the first
//! N for which the call succeeds without an injected fault: the operation
//! has N - 1 injection points.
//!
//! Operations: `open(/dev/tierkit)`, `TK_IOC_SET_POLICY`, `mmap` in 4 KiB
//! mode (32 pages over every memory node), `mmap` in gigantic mode (1 GiB on
//! the node with most free memory; skipped with the reason if no GiB can be
//! had), `TK_IOC_BULK` (32 pages), `TK_IOC_TASK_NEXT` (256 steps),
//! `TK_IOC_SET_GIGANTIC`, `TK_IOC_CLEAR_BENCH` (one range),
//! `TK_IOC_REBALANCE` (32 pages over every memory node asked onto one; a
//! page whose new page fails stays and is counted), the first touch
//! of a gigantic mapping (the fault allocates, clears and maps the GiB; a
//! forked child arms its own `fail-nth` and touches, and a failure is
//! SIGBUS for it, reported as EFAULT), and a write to each debugfs file
//! (`weighted_interleave/nodeN`, `auto`, `bandwidth`, `gigantic/pool`).
//!
//! At every step:
//! - the call succeeded, or failed with a documented errno (ENOMEM: each
//!   fault here is a failed allocation), never without an injected fault;
//! - a failed debugfs write changed nothing (weight, auto, bandwidth, the
//!   table), a successful one did what it says;
//! - the kernel printed no BUG/WARNING/oops (from `/dev/kmsg`);
//! - after the call's files are closed and its mappings unmapped: tierkit
//!   is usable (a fresh open, `TK_IOC_SET_POLICY` and a one-page mmap that
//!   reads zero), what it holds (`held` and `gigantic` of every node in
//!   `stats`, `held_pages` in `limits`) is back at the baseline,
//!   and each node's free pages and `SUnreclaim` are within
//!   [`FREE_TOL_PAGES`] / [`SLAB_TOL_KB`] of where they were before the
//!   operation's first step (see there for why these tolerances), measured
//!   again for up to [`SETTLE_MS`] if not (page tables of a torn-down
//!   mapping are freed after an RCU grace period).
//!   Slab is measured with what is already freed given back: the caches
//!   are shrunk through `/sys/kernel/slab/<cache>/shrink` (all of them for
//!   the test's start, then those that grew since; see
//!   `faults::drain_slab`), which also empties KASAN's quarantine of their
//!   objects. Without that, on a KASAN kernel freed objects stay in the
//!   quarantine (up to 1/32 of RAM) and SUnreclaim grows by megabytes per
//!   step with nothing leaked; objects still allocated stay counted.
//!
//! Calls that take long (a gigantic mmap or a clear benchmark allocate and
//! clear 1 GiB, seconds under TCG) are not stepped through one N at a time
//! past N = [`EXHAUSTIVE_UPTO`] and past the first [`SLOW_EXHAUSTIVE`]
//! slow steps, once three steps in a row took more than [`SLOW_STEP_MS`]
//! each: from there N grows by 16, 64, 256, 256, ... (the
//! points after a gigantic clear are the page-table allocations of
//! inserting 262144 pages, one code path), and once a call succeeds the
//! end is bisected to within [`BISECT_TO`] points. The summary says how many
//! points there were (a range then: `531..545`; the JSON's `points` is the
//! lower bound, `points_upper` the upper) and how many were exercised.
//!
//! The weight table (`auto`, weights, bandwidth) is put back as it was.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::faults::main()
}
