//! tk-test-node-offline: the CXL node loses all its memory while tierkit
//! holds pages there, then gets it back (the semantics are in
//! Documentation/ABI/testing/dev-tierkit).
//!
//! On a node whose memory is all ZONE_MOVABLE (the cxl topology's CXL node,
//! `--cxl-online movable`):
//! 1. File A maps 64 pages with weighted interleave over DRAM and the CXL
//!    node and fills a per-page pattern; file B maps 16 pages with the CXL
//!    node alone; file C sets the CXL node alone as its policy and maps
//!    nothing.
//! 2. Every memory block of the node goes offline (each timed; more than
//!    60 s is killed and fails).
//! 3. The node has left N_MEMORY (`has_memory`), and its weight files are
//!    gone: the kernel's and tierkit's.
//! 4. Existing mappings: every byte intact, no page on the node
//!    (`move_pages`), tierkit's `held` is 0 on the node.
//! 5. File C keeps its mask: `TK_IOC_TASK_NEXT` still returns the node; an
//!    mmap and `TK_IOC_BULK` fail with `ENOMEM` and leave nothing held. A
//!    new policy naming only the node is `EINVAL`; one naming DRAM and the
//!    node returns DRAM alone.
//! 6. The blocks come back online (`online_movable`): `has_memory` and the
//!    weight files are back, and file C's old policy maps pages on the node
//!    again, zeroed.
//!
//! 7. Regression (tk-test-stress on cxl found an offline that never
//!    returned): with the `movable_gigantic` opt-in, a child runs
//!    `TK_IOC_CLEAR_BENCH` of 1 GiB on the node; while its range is held,
//!    every block of the node goes offline, each within 30 s: the blocks
//!    of the range with `EBUSY` within 5 s and a kernel message naming
//!    tierkit, the others done. Then the child is killed and the blocks
//!    come back.
//! 8. The same window before a new range is known: with a test delay of
//!    5 s between a movable allocation and its registration
//!    (`test/movable_register_delay_ms`), every offline of the node's
//!    blocks in that window is `EBUSY` at once, none hangs.
//! 9. A page a pipe holds a reference to (`vmsplice`) is not moved: its
//!    block's offline is `EBUSY` until the pipe is drained, then goes
//!    through with the data intact.
//!
//! 10. A rebalance onto the node while it goes away: a file placed with
//!     its own weights 3:1 (DRAM:node) is rebalanced to 1:3 at 100
//!     pages/s; once pages arrive on the node, every block goes offline.
//!     Each block goes offline within 60 s (a page the rebalance put
//!     there is moved away again, none is allocated in a block being
//!     offlined), the call's counts add up (moved + no_memory + busy =
//!     misplaced), no page is left on the node and the data is intact;
//!     with the blocks back, a second call finishes the job.
//!
//! Skipped, with the reason, where no such node exists (numa, or the CXL
//! node onlined as kernel memory). Everything is put back on every path.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::node_offline::main()
}
