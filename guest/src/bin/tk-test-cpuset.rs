//! tk-test-cpuset: tierkit's placement in a task's cpuset (cgroup v2
//! `cpuset.mems`), as the kernel's memory policies honour it. On a kernel
//! without cpusets (tierkit's own) it skips; Debian's kernel has them.
//!
//! With a cgroup whose cpuset allows only the first node with memory (A)
//! and the last other one (B) outside it, each check in a child that joins
//! the cgroup:
//! - control, outside the cpuset: a weighted policy over {A, B} places
//!   pages on both;
//! - a policy over {A, B} set inside: `TK_IOC_SET_POLICY` returns the
//!   effective nodemask {A} (`mpol_set_nodemask()`), and every page of a
//!   mapping, every `TK_IOC_TASK_NEXT` step and every `TK_IOC_BULK` page is
//!   on A;
//! - a policy over {B} set inside: `EINVAL`, as `set_mempolicy(2)`;
//! - a policy over {A, B} set outside and used by a task inside: every
//!   page, step and bulk page on A (the caller's cpuset cuts the file's
//!   nodes at each call);
//! - a policy over {B} set outside and used inside: on A, the cpuset's
//!   nodes (as `mpol_rebind_nodemask()` for static nodes).

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::cpuset::main()
}
