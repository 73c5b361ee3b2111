//! tk-test-gup: every way the kernel takes a reference to a tierkit page
//! gives it back, and no page of a tierkit range leaves its owner while it
//! is mapped.
//!
//! Subjects, each a region of 16 pages (on a GiB, across a 2 MiB line):
//! - a 4 KiB-mode mapping on every memory node;
//! - a gigantic GiB on the first memory node, mapped by one PUD;
//! - the same with the GiB taken from the pre-cleared pool;
//! - a gigantic GiB touched with THP disabled (`MADV_NOHUGEPAGE`): mapped
//!   by 4 KiB PTEs of the same GiB folio; then THP on again,
//!   `MADV_DONTNEED`, and every later touch still works.
//!
//! Callers (`crate::tests::callers`): vmsplice, process_vm_readv and
//! process_vm_writev, /proc/self/mem, ptrace PEEKDATA/POKEDATA, O_DIRECT
//! on `/dev/ram0`, io_uring registered buffers with WRITE_FIXED and
//! READ_FIXED, read/write(2) (where a region's pages are in ZONE_MOVABLE,
//! the io_uring registration must be refused with EFAULT at once instead:
//! a long-term pin there would retry its migration forever). After each,
//! the region holds what it should
//! and every page's folio (`TK_IOC_PAGE_REFS`) has the references,
//! mapcount and order it had before, and is neither free nor anonymous.
//!
//! The reuse check, on every subject: vmsplice 16 pages, drain and close
//! the pipe, then a child allocates 64 MiB of anonymous memory bound to
//! the node and fills it. The region must still hold its data, the child
//! its own, and the region's pages their folio. (With a GiB of order-0
//! pages under a special PUD, slow GUP counted all 16 references on page 0
//! and the release freed pages 1-15 while still mapped: the child got
//! them.) While the pipe holds the pages, their folio holds 16 more
//! references (one folio for the GiB).
//!
//! At the end every mapping is gone: tierkit's stats show nothing held on
//! the nodes, and the nodes' free memory is back.
//!
//! Exit 0 if every check passed.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::gup::main()
}
