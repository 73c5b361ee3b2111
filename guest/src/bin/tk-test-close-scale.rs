//! tk-test-close-scale: the cost of tierkit's per-mapping work does not
//! grow with the number of mappings the device has (no device-wide list
//! walked per item; module/src/state.rs `Registry`).
//!
//! One file, policy on the first node with CPUs, gets 4,096, 16,384 and
//! 65,536 one-page mappings (vm.max_map_count raised for the last, put
//! back after); for each count: the time to `munmap` them all, then to
//! `close()` the file (its release frees every mapping's page and drops
//! it from the memory notifier's registry). Four times the mappings must
//! make the close, tierkit's work, cost at most five times the time (times
//! under 100 ms count as 100 ms: below that the guest's noise rules, as it
//! shares its host's CPUs; each time is the best of three rounds). The
//! munmap times are shown, not asserted: munmap runs no tierkit code (the
//! kernel's own cost of removing a vma). The rows are printed in the
//! JSON line (`rows`: mappings, munmap_s, close_s) for the benchmark table.
//!
//! Offline (where a memory-only node is all ZONE_MOVABLE, as the cxl
//! topology's): with the same counts of one-page mappings registered (their
//! pages on the first node with CPUs), a page of another file on the
//! movable node is kept by a pipe after its file let go; the offline of its
//! block is `EBUSY` (the notifier looked at every mapping first), and once
//! the pipe is closed the offline is done; the block is onlined again.
//! Each time is the best of three; ×4 mappings must cost at most ×5 for
//! both (the same floor). JSON: `offline_rows` (mappings, refused_s,
//! offline_s).

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::close_scale::main()
}
