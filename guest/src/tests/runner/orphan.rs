//! tk-test-runner-orphan: a test of /init's runner, not of tierkit. It
//! forks two children that never exit and exits 0 at once: one stays in
//! its process group, the other leaves it with setsid() (and so is found
//! only as /init's orphan). Both hold its output pipe. The runner must
//! find and kill both, report `left=2` and go on to the next test; xtask
//! counts a test that left processes behind as this test's pass.

/// Forks a child that pauses forever (after setsid() with `escape`).
fn child(escape: bool) -> libc::pid_t {
    // SAFETY: the process is single-threaded here; the child only makes
    // async-signal-safe calls and never returns.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: plain syscalls.
        unsafe {
            if escape {
                libc::setsid();
            }
            loop {
                libc::pause();
            }
        }
    }
    pid
}

fn main() {
    userspace_tests::help!();
    let kept = child(false);
    let escaped = child(true);
    println!(
        "# tk-test-runner-orphan: left pid {kept} in the group and pid {escaped} in a session of its own; exiting 0"
    );
}
