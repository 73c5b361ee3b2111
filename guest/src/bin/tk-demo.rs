//! tk-demo: what `cargo xtask run` shows on the default DRAM + CXL guest.
//!
//! 1. Weighted placement. tierkit gets the kernel's auto weights: from the
//!    same HMAT bandwidth the kernel used (`nodeN/access1/initiators`,
//!    written to tierkit's `bandwidth` file, then `auto=true`), or else a
//!    copy of the kernel's weights. A `/dev/tierkit` mapping over the
//!    memory nodes is then queried with move_pages(2): per-node counts and
//!    a picture of the first 64 pages, next to the kernel's own
//!    MPOL_WEIGHTED_INTERLEAVE for the same ilx.
//! 2. Gigantic clearing (`TK_IOC_CLEAR_BENCH`): a 1 GiB range on each node
//!    cleared with 1 worker, then with the worker count tierkit picks, and
//!    the speedup. Skipped with a note where the ioctl or the memory is
//!    missing.
//!
//! Usage: `tk-demo [PAGES]` (default 1024).

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tools::demo::main()
}
