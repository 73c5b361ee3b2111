//! tk-bench-clear: parallel gigantic-page clearing against the kernel's
//! serial clear and the memory-bandwidth limit, in one boot.
//!
//! For each node with memory (DRAM nodes and memory-only/CXL nodes), and
//! for `local` and, where the machine has a second node with CPUs,
//! `remote` placement:
//!
//! - **tierkit**: `TK_IOC_CLEAR_BENCH` of P gigantic pages (1 GiB each)
//!   with T = 1, 2, ... workers, up to the eligible CPUs; only the clear is
//!   timed (the module allocates and frees each range around it). One
//!   untimed clear first warms the node up (a VM's host backs guest RAM on
//!   first touch, and `alloc_contig_pages` returns the same GiB again);
//!   best of R;
//! - **memset limit**: a userspace `memset(0)` of a 1 GiB buffer bound to
//!   the node (`mbind(MPOL_BIND)`, pre-faulted), split over T threads pinned
//!   to the same CPUs the workers ran on; best of R;
//! - **store loop**: the same with a plain 8-byte store loop instead of
//!   libc's `memset` (which may itself use `rep stosb`); best of R. Under
//!   emulation the two differ by up to ten times;
//!
//! and once per node:
//!
//! - **kernel serial**: the first touch of a `MAP_HUGETLB | MAP_HUGE_1GB`
//!   page bound to the node, i.e. the kernel's own single-threaded
//!   `folio_zero_user()` of 1 GiB. It uses a free 1 GiB page of the node's
//!   pool (`hugepagesz=1G hugepages=N:1` on the command line), or reserves
//!   one at runtime through
//!   `/sys/devices/system/node/nodeN/hugepages/hugepages-1048576kB/nr_hugepages`
//!   right after tierkit freed its range there, and gives it back after;
//!   best of R.
//!
//! It prints a table with the ratios against their targets:
//! tierkit(1 worker)/kernel-serial time, tierkit/memset GB/s at each T, and
//! tierkit's T-worker speedup as a fraction of memset's T-thread speedup;
//! and one `TIERKIT-JSON` line for `cargo xtask bench clear`.
//!
//! Both tierkit and the kernel clear with `clear_pages()`; the variant the
//! kernel picked (`erms` = `rep stosb`, `rep_good` = `rep stosq`,
//! `unrolled`) is printed. Under TCG, `rep stosb` is emulated about ten
//! times slower than plain stores, and guest NUMA has no physical
//! locality: local against remote needs bare metal.
//!
//! Usage: `tk-bench-clear [P [R [MAX_THREADS]]]` (default P = 1, R = 3,
//! all CPUs).
//! Exit 0 unless a measurement failed; the targets are reported, not
//! enforced.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::benches::clear::main()
}
