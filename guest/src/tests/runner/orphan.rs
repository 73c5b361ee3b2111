//! The logic of `tk-test-runner-orphan`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-runner-orphan.rs` (its `--help`).

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

pub fn main() {
    let kept = child(false);
    let escaped = child(true);
    println!(
        "# tk-test-runner-orphan: left pid {kept} in the group and pid {escaped} in a session of its own; exiting 0"
    );
}
