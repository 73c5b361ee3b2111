//! tk-demo-gigantic: what `cargo xtask run` shows of gigantic mode: the
//! time to first use of 1 GiB (from `mmap` until every 4 KiB page was written once)
//! on each memory node, tierkit against the kernel's hugetlb first fault.
//!
//! The short plan of `tk-bench-gigantic` (the same code,
//! `crate::abi::first_use`): per node, tierkit with the worker count
//! it picks (`TK_THREADS_AUTO`), tierkit from a ready pool (the node's pool
//! target set to 1 and the range ready, untimed; the fault takes it) and
//! hugetlb, one timed run each after an untimed warm-up. On a node made of
//! an emulated CXL region the warm-ups are left out: QEMU forwards every
//! access there to the device, so one clear of 1 GiB takes about 50 s and
//! the host's first-touch cost (about 1 s per GiB) is lost in it.
//!
//! A node where a side cannot get a free naturally aligned GiB is skipped
//! with the reason (on a small guest: `--append 'hugepagesz=1G
//! hugepages=0:1,1:1'`, see `first_use`). `cargo xtask bench gigantic`
//! has the full series and medians.
//!
//! Exit 0 unless a measurement failed.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tools::demo_gigantic::main()
}
