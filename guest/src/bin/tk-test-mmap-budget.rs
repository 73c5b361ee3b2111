//! tk-test-mmap-budget: a 4 KiB `mmap` that fails leaves the file's page
//! budget as it was (Documentation/ABI/testing/dev-tierkit: a call that
//! fails leaves nothing behind; 262144 pages, 1 GiB, per file).
//!
//! One file, policy over every memory node:
//! 1. With `failslab` and `fail_page_alloc` set for systematic injection
//!    (see `faults`), a 32-page `mmap` is made with its 1st, 2nd, ...
//!    allocation failing (`fail-nth`) until one succeeds without an
//!    injected fault.
//! 2. The test hook `test/fail_next_backing` fails the next mapping's
//!    `Backing::new()`, the last step of the mmap that can fail, after its
//!    pages are taken and inserted; a 32-page `mmap` must then fail with
//!    ENOMEM, the hook consumed. (Step 1 does not reach that point: the
//!    sweep passes with the budget counted before it.)
//! 3. The file must still map exactly the rest of its budget (262144
//!    minus the pages of the calls that succeeded) in one `mmap`, whose
//!    first and last pages read zero, and a further one-page `mmap` must
//!    fail with ENOMEM (the budget is exact, not merely larger). A budget
//!    that counted the pages of a failed call refuses the large `mmap`.
//!
//! Needs `CONFIG_FAILSLAB` and `CONFIG_FAIL_PAGE_ALLOC` and a test build
//! of tierkit (skipped without, as on Debian's kernel), and 1 GiB free
//! over the memory nodes.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::mmap_budget::main()
}
