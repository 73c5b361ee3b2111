//! The logic of `tk-test-runner-dwait`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-runner-dwait.rs` (its `--help`).

use std::time::{Duration, Instant};

/// The state letter and wait channel of `pid`.
fn state(pid: libc::pid_t) -> (char, String) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let s = stat
        .rsplit_once(')')
        .and_then(|(_, r)| r.trim_start().chars().next())
        .unwrap_or('?');
    let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
    (s, wchan)
}

fn watch(parent: libc::pid_t) -> ! {
    let t = Instant::now();
    loop {
        let (s, wchan) = state(parent);
        if s == 'D' || t.elapsed() > Duration::from_secs(1) {
            println!("# tk-test-runner-dwait: pid {parent} is in state {s} (wchan {wchan})");
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

pub fn main() {
    let me = std::process::id() as libc::pid_t;
    // SAFETY: single-threaded; the watcher child runs its own copy.
    if unsafe { libc::fork() } == 0 {
        watch(me);
    }
    println!("# tk-test-runner-dwait: pid {me} enters a vfork wait for a child that never execs");
    let mut stack = vec![0u8; 64 * 1024];
    // SAFETY: the child runs `pause_forever` on its own stack (the top of
    // `stack`, which outlives it: we return only after it is gone) and
    // touches nothing of ours.
    let pid = unsafe {
        libc::clone(
            pause_forever,
            stack.as_mut_ptr().add(stack.len()).cast(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            std::ptr::null_mut(),
        )
    };
    println!(
        "# tk-test-runner-dwait: the vfork wait ended (clone: {pid}): the runner did not kill it"
    );
}

extern "C" fn pause_forever(_: *mut libc::c_void) -> libc::c_int {
    loop {
        // SAFETY: pause(2) takes no arguments.
        unsafe { libc::pause() };
    }
}
