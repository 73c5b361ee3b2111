//! tk-test-offline-held: a ZONE_MOVABLE block that holds tierkit pages no
//! registered mapping answers for is refused at once (`EBUSY`), never
//! left to `offline_pages()`'s endless retry under `mem_hotplug_lock`
//! (module/src/pages/movable.rs has the design). Needs a memory-only node
//! all in ZONE_MOVABLE (`--topology cxl`, the default `online_movable`).
//!
//! - **pipe**: `vmsplice()` 16 pages of a 4 KiB mapping into a pipe, leave
//!   it undrained, `munmap` and close the file: `orphans` in `limits` grows
//!   by 16, the offline of each block holding them is EBUSY within 2 s;
//!   closing the pipe frees them (`orphans` back to 0 within 5 s) and the
//!   blocks then go offline and online again.
//! - **mmap window**: a child maps 65,536 pages on the node while
//!   `test/movable_register_delay_ms` holds it 10 s between inserting the
//!   pages and registering the mapping; the node's blocks are offlined
//!   (those that look like they hold the pages first, `TK_IOC_PAGE_REFS`)
//!   until one refuses: EBUSY within 2 s; the child's mmap succeeds.
//! - **bulk window**: the same with `TK_IOC_BULK` of 65,536 pages.
//! - **O_DIRECT in flight**, **process_vm_readv in flight**, **io_uring
//!   read in flight**: 16 pages of a 4 KiB mapping, followed by an
//!   anonymous page registered with userfaultfd, are the buffer of a
//!   `pread` of `/dev/ram0` opened `O_DIRECT`, the source of a
//!   `process_vm_readv` into that page, or the buffer of an io_uring
//!   `IORING_OP_READ` of `/dev/ram0`: the call pins the 16 pages and waits
//!   in the fault on the last page. `munmap` and close: `orphans` grows by
//!   16, each block's offline is EBUSY within 2 s; the fault resolved
//!   (`UFFDIO_ZEROPAGE`), the call returns every byte, the orphans are
//!   freed within 5 s and the blocks go offline. (`PTRACE_PEEKDATA` and
//!   `/proc/PID/mem` hold a page only for the copy into a kernel buffer,
//!   with no sleep between the reference and its put:
//!   `__access_remote_vm()`.)
//! - **io_uring fixed buffer**: `IORING_REGISTER_BUFFERS` over 16 pages on
//!   the node is `EFAULT` (a long-term writable pin in ZONE_MOVABLE,
//!   refused), so no registered buffer holds them: after `munmap` and close
//!   no orphan is left and the blocks go offline.
//!
//! Each offline runs in a child killed after 20 s, so a kernel that spins
//! fails the check instead of hanging the test. Everything is put back:
//! blocks online, the hook 0, nothing held.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::offline_held::main()
}
