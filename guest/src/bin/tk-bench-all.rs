//! tk-bench-all: every benchmark in one boot, for `cargo xtask bench`
//! with no argument (guest mode `bench-all`). Runs, in this order, each as
//! a child process whose output goes straight through (so each prints its
//! own `TIERKIT-JSON` line):
//!
//! 1. `tk-bench-clear` (gigantic clearing);
//! 2. `tk-bench-wi` (pages/s of weighted placement);
//! 3. `tk-bench-gigantic` (time to first use of 1 GiB, tierkit's gigantic
//!    mode against hugetlb's first fault);
//! 4. `tk-calibrate --out /tmp/tierkit-calibration.json`;
//! 5. `tk-workload --calibration /tmp/tierkit-calibration.json`;
//! 6. `tk-bench-rebalance` (a running triad's working set moved from the
//!    HMAT weights to the measured ones);
//! 7. `tk-bench-run` (tk-run against the kernel on unmodified programs,
//!    with the calibration of step 4);
//! 8. `tk-test-close-scale` (munmap and close time against the number of
//!    a file's mappings).
//!
//! The two that clear whole GiBs (`clear`, `gigantic`) do not run on a CXL
//! topology by default: QEMU serves CXL memory access by access (about
//! 0.02 GB/s), so clearing 1 GiB there several times takes many minutes
//! per GiB and says nothing about CXL hardware (Documentation/dev-tools/topologies.md, "Slow memory");
//! the numa boot measures both on its DRAM and memory-only nodes.
//! `--with-cxl-clear`, or naming them in `--only`, runs them anyway.
//!
//! Then one `TIERKIT-JSON` line of its own with each program's exit code
//! and time. Exit 0 iff every program exited 0.
//!
//! Flags: `--only a,b` (names without `tk-`/`tk-bench-`: clear, wi,
//! gigantic, calibrate, workload, rebalance, run, scale; naming `clear` or `gigantic` runs it on
//! CXL too),
//! `--with-cxl-clear`. In the guest the same come from the kernel command
//! line (`cargo xtask bench --append ...`): `tierkit.bench=calibrate,workload`
//! selects programs, and `tierkit.<name>_args=--rounds,5` adds arguments
//! to one (commas for spaces), e.g. `tierkit.workload_args=--workloads,lookup+stream,--rounds,5`
//! (lists inside an argument take `+`).

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::benches::all::main()
}
