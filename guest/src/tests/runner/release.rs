//! The logic of `tk-test-runner-release`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-runner-release.rs` (its `--help`).

use crate::abi::tk::Tierkit;
use crate::linux::sys::Mapping;
use std::time::{Duration, Instant};

/// How long the child keeps the pages after its parent died: longer than
/// the runner's one-second stability window, shorter than its bound for
/// the runner's own tests (`RUNNER_SETTLE_SECS`).
const HOLD: Duration = Duration::from_secs(3);

const PAGES: usize = 4096;

fn keep(parent: libc::pid_t, m: &Mapping) -> ! {
    // SAFETY: plain syscalls in the forked child.
    unsafe {
        libc::setsid();
        libc::prctl(
            libc::PR_SET_NAME,
            crate::init::supervise::KEEP_COMM.as_ptr(),
        );
        // Not the output pipe: /init reads it to its end.
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        for fd in 0..3 {
            libc::dup2(null, fd);
        }
    }
    // SAFETY: getppid(2) takes no arguments.
    while unsafe { libc::getppid() } == parent {
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    while t.elapsed() < HOLD {
        // Keep the pages in use.
        std::hint::black_box(m.as_ptr());
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: _exit(2) ends the process; the mapping goes with it.
    unsafe { libc::_exit(0) }
}

pub fn main() {
    // A file with a policy (interleave over node 0) maps; one without
    // does not.
    let tk = Tierkit::open().and_then(|tk| {
        tk.set_policy(crate::abi::tk::TK_MODE_INTERLEAVE, 1)?;
        Ok(tk)
    });
    let m = match &tk {
        Ok(tk) => tk.map(PAGES, 0),
        Err(_) => Mapping::anon(PAGES * 4096),
    }
    .expect("mmap");
    // SAFETY: the mapping is PAGES pages long, readable and writable.
    unsafe { std::ptr::write_bytes(m.as_ptr(), 0x5a, m.len()) };
    let me = std::process::id() as libc::pid_t;
    // SAFETY: single-threaded; the child runs `keep` and never returns.
    if unsafe { libc::fork() } == 0 {
        keep(me, &m);
    }
    println!(
        "# tk-test-runner-release: {PAGES} pages of {} mapped and touched; a child keeps them {} s after this process is killed; sleeping for an hour",
        if tk.is_ok() { "/dev/tierkit" } else { "anonymous memory" },
        HOLD.as_secs()
    );
    std::thread::sleep(Duration::from_secs(3600));
    println!("# tk-test-runner-release: woke up: the runner did not kill it");
}
