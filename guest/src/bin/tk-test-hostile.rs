//! tk-test-hostile: regression tests for faults that hostile use found
//! (arguments checked only after the work, a failed call leaving GiBs
//! pinned, SIGKILL not honoured) and for the limits that bound what
//! userspace can make tierkit hold. Each check is named after what it
//! guards and keeps the minimal input that showed the fault.
//!
//! - arguments (checked before any work; they were checked after it):
//!   `TK_IOC_SET_GIGANTIC` with threads=4096 is `EINVAL` (threads are
//!   checked against the online CPUs); remote placement is accepted, but on
//!   a topology with one CPU node the following 1 GiB mmap is `EINVAL` in
//!   under 5 ms and takes no memory.
//! - out of memory (a failed call leaves nothing; it once left GiBs
//!   pinned): gigantic mmap of more GiBs than a node can supply (node 0:
//!   8 GiB, the input that showed the fault; the memory-only node: its size
//!   rounded up) either fails with `ENOMEM` at once (the global limit;
//!   `nr_cleared` is then 0), or (gigantic mode makes each GiB at its first
//!   touch) touching every GiB is SIGBUS at the first GiB the node cannot
//!   supply, counted in `gigantic_fault_failed`; after the file is closed,
//!   stats `held`/`gigantic` and the node's MemFree are back, and a 1 GiB
//!   mmap on that node succeeds. The same for a 4 KiB mmap and a
//!   `TK_IOC_BULK` that run out of the node's memory part-way.
//! - kill (SIGKILL is honoured; it once was not): `TK_IOC_BULK` of 524288
//!   pages, a second task blocked in `TK_IOC_TASK_NEXT` on the same file, a
//!   1 GiB 4 KiB-mode mmap, a gigantic 1 GiB mmap with one worker: SIGKILL
//!   50 ms in, and the task is reaped within 150 ms (gigantic: 300 ms more
//!   than the reap of a task holding an already cleared gigantic GiB,
//!   measured in the same run: giving a GiB back takes over a second under
//!   KASAN) of the kill, with nothing left held and MemFree back.
//! - limits: `/sys/kernel/debug/tierkit/limits` (`file_pages`,
//!   `file_gigantic`, `global_pages`, `held_pages`), the 4th stats column,
//!   and an mmap past `global_pages` fails with `ENOMEM` at once and takes
//!   nothing.
//!
//! The latency bounds are for DRAM (numa topology, node with CPUs); on
//! every topology the kill tests use the first node with CPUs and memory.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::hostile::main()
}
