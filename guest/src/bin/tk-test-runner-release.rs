//! tk-test-runner-release: a test of /init's runner, not of tierkit. It
//! maps and touches 4096 pages of /dev/tierkit (tierkit's `held` grows by
//! 4096), forks a child that keeps the mapping, and sleeps past its
//! deadline (2 s, `tierkit_protocol::deadline`). The child leaves the
//! process group with setsid() and takes the name /init does not kill
//! (`tk-keep-alive`): it stands for a process whose exit, and so the
//! release of the test's pages, ends seconds after the kill. It lets go
//! [`HOLD`] after its parent died. The runner must kill the group at the
//! deadline, then wait for tierkit's counters to come back before the
//! next test (`timeout=2 left=1 waited=W`, W at least 1, no
//! `unreleased=1`); xtask counts that verdict as this test's pass.
//! Without /dev/tierkit (the host tests) it maps anonymous memory.

fn main() {
    tierkit_guest::help!();
    tierkit_guest::tests::runner::release::main()
}
