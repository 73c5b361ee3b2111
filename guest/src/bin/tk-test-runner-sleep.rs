//! tk-test-runner-sleep: a test of /init's runner, not of tierkit. It
//! prints a line, then sleeps far past its deadline (2 s,
//! `tierkit_protocol::deadline`). The runner must kill its process group
//! at the deadline, keep the line, report `timeout=2` and go on to the
//! next test; xtask counts that verdict as this test's pass.

fn main() {
    tierkit_guest::help!();
    tierkit_guest::tests::runner::sleep::main()
}
