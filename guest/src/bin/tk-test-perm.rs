//! tk-test-perm: who may use tierkit (the documented decision: root only).
//!
//! - `/dev/tierkit` is root-only (0600) and every file under
//!   `/sys/kernel/debug/tierkit/` has no group or other permissions (0600
//!   or 0400).
//! - As `nobody` (uid/gid 65534, in a forked child): opening
//!   `/dev/tierkit` and every tierkit debugfs file, for reading and for
//!   writing, fails with `EACCES`. To test the files' own modes and not
//!   only debugfs' root-only mount, the debugfs root is made traversable
//!   (0755) for the duration if it is not, and restored after.
//! - With `/dev/tierkit` made 0666 by root (restored to its mode after):
//!   `nobody` may open it, `TK_IOC_SET_POLICY`, mmap in 4 KiB mode,
//!   `TK_IOC_BULK` and `TK_IOC_TASK_NEXT`; entering gigantic mode
//!   (`TK_IOC_SET_GIGANTIC` without the QUERY flag) and
//!   `TK_IOC_CLEAR_BENCH` are `EPERM` (CAP_SYS_ADMIN); the QUERY flag works.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::perm::main()
}
