//! tk-test-runner-orphan: a test of /init's runner, not of tierkit. It
//! forks two children that never exit and exits 0 at once: one stays in
//! its process group, the other leaves it with setsid() (and so is found
//! only as /init's orphan). Both hold its output pipe. The runner must
//! find and kill both, report `left=2` and go on to the next test; xtask
//! counts a test that left processes behind as this test's pass.

fn main() {
    tierkit_guest::help!();
    tierkit_guest::tests::runner::orphan::main()
}
