//! tk-test-gigantic: a parallel-cleared gigantic region from `/dev/tierkit`
//! is all zero, on the right node, one physically contiguous, naturally
//! aligned GiB, made at its first touch and mapped by one PUD.
//!
//! For each node with memory: open `/dev/tierkit`, set a single-node policy
//! (`TK_IOC_SET_POLICY`), switch to gigantic mode (`TK_IOC_SET_GIGANTIC`),
//! `mmap` 1 GiB `MAP_SHARED`, and check
//!
//! - `mmap` returns a GiB-aligned address and maps nothing yet
//!   (`TK_IOC_WALK`: no page table entry), and no clear happened yet;
//! - every byte is zero (a full scan: the first touch clears the GiB);
//! - `TK_IOC_WALK` at every 4 KiB page: a PUD leaf maps it, its pfn is
//!   first pfn + page index, the first pfn is 1 GiB aligned, its node is
//!   the policy's (`/proc/self/pagemap` cannot show this: reading it
//!   splits, i.e. zaps, the PUD; `move_pages(2)` finds no struct page
//!   behind a special PUD);
//! - `TK_IOC_SET_GIGANTIC` with `TK_GIGANTIC_F_QUERY` reports the clear
//!   (node, workers, time), and changing parameters after `mmap` is `EBUSY`.
//!
//! On the first node, the semantics of Documentation/ABI/testing/dev-tierkit
//! (VMA operations): `MAP_POPULATE`, partial `munmap`/`mprotect`/`mremap`
//! (`EINVAL`), `mremap` to an unaligned (`EINVAL`) and an aligned new
//! address, `mprotect`, `fork` (shared),
//! `MADV_DONTNEED` (the same GiB comes back, contents kept), `VM_DONTDUMP`,
//! and a 4 KiB fault (THP disabled in a child): the GiB's 4 KiB page
//! mapped by a PTE, in the same GiB the parent maps by one PUD; and, in a
//! child, one thread's `prctl(PR_SET_THP_DISABLE)` and 4 KiB touch while
//! another thread's first touch clears the GiB: both writes land in the
//! one GiB, mapped once, and the kernel does not warn.
//!
//! Then it fills the region with a pattern, closes the file (the range is
//! freed), and maps a gigantic page on the same node again: fresh guest RAM
//! is zero anyway, but a range that held the pattern must come back zero
//! only because tierkit cleared it. The second round reports whether the
//! same range came back. On an emulated CXL node (a GiB's clear, fill and
//! scan take minutes under QEMU) one round without the pattern: the KUnit
//! `tierkit_clear` matrices clear patterned ranges of that node.
//!
//! Last, on the memory-only node with the least free memory (not an
//! emulated CXL node, where a clear takes minutes; skipped where there is
//! none), with every GiB it can give taken: a 4 KiB fault (THP disabled) of one more GiB is SIGBUS at
//! once and counted, never a fault retried without end.
//!
//! Exit 0 if every check passed.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::gigantic::main()
}
