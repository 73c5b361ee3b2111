//! tk-test-diff: the differential. For the same weights, nodemask and ilx,
//! tierkit places every page on the node the kernel's own
//! MPOL_WEIGHTED_INTERLEAVE (and MPOL_INTERLEAVE) places it.
//!
//! Kernel side: the same weights written to
//! `/sys/kernel/mm/mempolicy/weighted_interleave/nodeN`; a private
//! anonymous mapping with MADV_NOHUGEPAGE (a THP fault would shift the ilx
//! by the folio order, mm/mempolicy.c `get_vma_policy`), `mbind`, faulted
//! page by page in address order, then `move_pages(2)` with nodes = NULL.
//! Its ilx is `vm_pgoff + (addr - vm_start) >> PAGE_SHIFT` (get_vma_policy)
//! with `vm_pgoff = addr >> PAGE_SHIFT` for an anonymous private mapping
//! (mm/mmap.c do_mmap, mm/vma.c), i.e. `addr >> 12` for every page.
//!
//! tierkit side: `/dev/tierkit` mapped at file offset = the anonymous
//! mapping's address, so page i has the same ilx (Documentation/ABI/testing/
//! dev-tierkit). The two node sequences must be equal page by page, and
//! equal to tierkit-core's reference walk.
//!
//! Also: a shared anonymous (shmem) mapping, whose ilx is `i_ino + index`
//! (mm/shmem.c shmem_get_policy), against tierkit at offset i_ino; and the
//! auto weights: tierkit fed the HMAT bandwidth the kernel used
//! (`nodeN/access1/initiators`, or for a CXL node its region's `access1`)
//! computes the kernel's auto weights.
//!
//! The kernel's weights and `auto` are restored at the end.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::diff::main()
}
