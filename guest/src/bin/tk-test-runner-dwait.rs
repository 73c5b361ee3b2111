//! tk-test-runner-dwait: a test of /init's runner, not of tierkit. It
//! hangs in an uninterruptible kernel wait: clone(CLONE_VM | CLONE_VFORK),
//! vfork's own flags, with a child that never execs or exits leaves the
//! parent in `wait_for_vfork_done()`
//! (state D, TASK_KILLABLE: only SIGKILL ends it). A forked watcher
//! prints the parent's state and wait channel once it is D. The runner
//! must kill the process group at the deadline (2 s,
//! `tierkit_protocol::deadline`), keep what it printed, report `timeout=2`
//! and go on; xtask counts that verdict as this test's pass.

fn main() {
    tierkit_guest::help!();
    tierkit_guest::tests::runner::dwait::main()
}
