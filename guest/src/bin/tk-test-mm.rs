//! tk-test-mm: what the kernel's other memory-management features do to
//! tierkit's mappings. Each check runs where the kernel has the feature
//! (tierkit's kernels have them all, `kconfig/features.config`; a
//! distribution kernel too) and skips with the reason elsewhere.
//!
//! Subjects: a 4 KiB-mode mapping of 8 MiB on the last memory node (the
//! memory-only or CXL node) and a gigantic GiB on the first. For each
//! feature, the outcome documented in Documentation/ABI/testing/dev-tierkit
//! ("Other memory-management features"), then: every page where it was
//! (pfn and node unchanged), the data intact, tierkit's holdings as before.
//!
//! - NUMA balancing on (`kernel.numa_balancing=1`, fast scanning): a
//!   task on the CPU node touches the mappings for 5 s; the scanner runs
//!   (`numa_pte_updates` grows, from an anonymous control mapping on the
//!   memory-only node) but
//!   skips tierkit's vmas (VM_MIXEDMAP): nothing moves.
//! - THP: `MADV_HUGEPAGE` is accepted, `MADV_COLLAPSE` is `EINVAL`;
//!   khugepaged scanning fast for 2 s changes nothing.
//! - KSM: `MADV_MERGEABLE` returns 0 and does not make the vma
//!   mergeable (shared and VM_MIXEDMAP: not KSM-compatible); ksmd running
//!   over identical pages for 2 s merges none of them.
//! - userfaultfd: `UFFDIO_REGISTER` of a tierkit mapping is `EINVAL`.
//! - Compaction: `vm.compact_memory` and proactive compaction with a
//!   pre-cleared pool range held: the pool keeps its range, the mappings
//!   their pages.
//! - DAMON: virtual-address monitoring of a task with tierkit mappings,
//!   with a `migrate_hot` scheme to the other node: tierkit's pages are
//!   not isolated and stay (DAMON_STAT, which a distribution kernel may
//!   run and which holds DAMON exclusively, is stopped meanwhile).
//! - Memory failure: `MADV_SOFT_OFFLINE` of a tierkit page is refused
//!   (`EIO` or `EBUSY`), the page stays. `MADV_HWPOISON` of a 4 KiB page
//!   (last, on a mapping of its own on node 0: the page is lost for the
//!   rest of the boot, and its memory block can never be onlined again):
//!   EBUSY, the task lives, the page is flagged and still reads its data,
//!   the rest keeps its data and every page goes back to tierkit's
//!   counters on close.
//!
//! Exit 0 if every check passed.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::mm::main()
}
