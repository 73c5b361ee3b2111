//! tk-test-vma: `MADV_DONTNEED` then a touch must map the same page again
//! (it was SIGBUS once): every operation a user may apply to a
//! `/dev/tierkit` mapping has a defined outcome, checked here one by one on
//! a 4 KiB-mode mapping (and `MADV_DONTNEED`, `VM_DONTDUMP` on a gigantic
//! one):
//!
//! - `MAP_PRIVATE` is `EINVAL`; every page of a new mapping reads zero
//!   before its first write (after a previous mapping dirtied the pages).
//! - `MADV_DONTNEED` returns 0 and the next touch (read or write) maps the
//!   same page again: contents, node (`move_pages`) and pfn
//!   (`/proc/self/pagemap`) unchanged, no SIGBUS.
//! - `MADV_FREE` and `MADV_WIPEONFORK` are `EINVAL` (mm/madvise.c: anonymous
//!   memory only); `MADV_REMOVE` is what `vfs_fallocate()` gives for a
//!   character device, `ENODEV` (fs/open.c checks the file type before
//!   looking for ->fallocate); the mapping is unchanged after each.
//! - `MADV_DONTFORK`: a forked child gets SIGSEGV touching it, the parent
//!   keeps its data.
//! - fork: parent and child share the pages, both ways.
//! - munmap of the middle: the rest stays mapped and intact; the pages
//!   stay held (stats) until the file is closed and every piece unmapped.
//! - mremap: moving keeps contents, nodes and pfns; shrinking works;
//!   growing is `EFAULT` (mm/mremap.c: VM_DONTEXPAND).
//! - mprotect(PROT_READ): a write is SIGSEGV; back to RW, writes work.
//! - `VM_DONTDUMP`: `dd` in the mapping's smaps VmFlags.
//! - `/proc/self/mem` reads and writes the mapping (access_remote_vm(),
//!   get_user_pages_remote() with FOLL_FORCE).
//! - get_user_pages: `vmsplice(2)` of the mapping into a pipe
//!   (iov_iter_extract_pages(), GUP-fast) reads its contents;
//!   `process_vm_readv(2)` too where the kernel has
//!   CONFIG_CROSS_MEMORY_ATTACH (the test guest does not: noted); plain
//!   `read(2)`/`write(2)` between a pipe and the mapping (copy_to/from_user).

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::vma::main()
}
