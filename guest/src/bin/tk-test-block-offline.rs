//! tk-test-block-offline: memory blocks that hold tierkit's pages go offline
//! (module/src/mapping.rs has the design).
//!
//! - **ZONE_MOVABLE** (the CXL node onlined `online_movable`): map 8 MiB
//!   of 4 KiB pages on the node, fill a per-page pattern, find every
//!   memory block holding them (`/proc/self/pagemap`), offline each (timed;
//!   a write that takes more than 60 s is killed and fails the check),
//!   then check every byte, every page's node (`move_pages`: the first
//!   fallback node of the CXL node, node 0 in the cxl guest), the pfns
//!   (none in an offlined block), tierkit's `held` statistics (moved from
//!   the CXL node to the fallback, totals equal), a forked child that
//!   shares the mapping (no PTE of its own left on an offlined block; it
//!   reads the moved contents), and `MADV_DONTNEED` + touch (the moved
//!   contents). Then the blocks go online again and a new mapping on the
//!   node works.
//! - **ZONE_MOVABLE at scale, timed against the kernel**: while another
//!   thread of the process runs (each TLB flush is then an IPI), a fresh
//!   64 MiB 4 KiB mapping on the node is filled and the block holding most
//!   of its pages is offlined, then the same for an anonymous mapping bound
//!   to the node (the kernel migrates its pages); one warm-up each, then
//!   three of each, alternating. Each time checks every page's contents
//!   and that no page is left in the block or on the node, and the block
//!   goes online again. Fails when tierkit's median offline time per page
//!   in the block is more than 1.5 times the kernel's.
//! - **Gigantic ranges on ZONE_MOVABLE**: without the `movable_gigantic`
//!   opt-in a 1 GiB mmap on the node fails with `ENOMEM` and a kernel
//!   message naming the opt-in; with it the mmap works, and offlining a
//!   block inside the range fails within 2 s with `EBUSY` and a kernel
//!   message naming tierkit and the range, which stays intact. The opt-in
//!   is put back to 0.
//! - **Kernel memory** (ZONE_NORMAL: numa's node 1, or the CXL node
//!   onlined `online_kernel`, else the DRAM node): offlining a block that
//!   holds tierkit pages fails within 2 s with `EBUSY`; pages, nodes and
//!   statistics unchanged.
//!
//! Parts that do not apply to the running topology print `# SKIP` with the
//! reason. Everything is put back: blocks online, opt-in 0, nothing mapped.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::block_offline::main()
}
