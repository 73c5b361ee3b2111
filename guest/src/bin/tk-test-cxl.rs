//! tk-test-cxl: the memory-only node of `--topology cxl` really is CXL
//! memory, brought up through the kernel's CXL stack.
//!
//! The regions are the ones the harness asked for (`tierkit.cxl=` on the
//! kernel command line: per fixed memory window its size, and with
//! `--cxl-interleave` its ways and granularity), and every memdev is the
//! target of exactly one region (one per device, or WAYS devices in one
//! interleaved region).
//!
//! For every CXL region (`/sys/bus/cxl/devices/region*`):
//! - it is a committed RAM region;
//! - its dax device is bound to kmem, as large as the region, and its
//!   `target_node` is a node with memory (N_MEMORY) and no CPUs;
//! - that node holds exactly the region: its memory blocks lie inside the
//!   region's host physical range and add up to its size, and its MemTotal
//!   matches (less the memmap, at most 1/64, should it sit on the node);
//! - the region has access1 performance (from the generic port's HMAT
//!   entries, the device's CDAT and the link), and the kernel's
//!   weighted-interleave auto weights are there for the node and are what
//!   `reduce_interleave_weights` makes of that bandwidth;
//! - one of its memory blocks goes offline and comes back online (memory
//!   hot-remove and hot-add on the CXL node).
//!
//! Without CXL devices (the numa topologies) every check is a `# SKIP`.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::cxl::main()
}
