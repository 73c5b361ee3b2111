//! The runner's own test programs (`tk-test-runner-*`) under /init's
//! supervisor, on the host: each ends as its entry in
//! `tierkit_protocol::deadline` expects, what it printed is kept, and
//! nothing of it is left running. One test in this binary: it makes the
//! process a child subreaper, as /init is, and reaps every child.

use std::process::Command;
use std::time::Duration;
use tierkit_guest::init::supervise;
use tierkit_protocol::deadline;

fn run(name: &str, bin: &str) -> (supervise::Supervised, String, i32) {
    let d = deadline::of(name);
    let mut out = Vec::new();
    let s = supervise::run(
        Command::new(bin),
        Some(Duration::from_secs(d.secs_at(1).into())),
        true,
        &mut |b| out.extend_from_slice(b),
    )
    .expect("starts");
    let rc = s.status.map_or(137, |st| {
        use std::os::unix::process::ExitStatusExt;
        st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
    });
    let judged = deadline::judge(&d, rc, s.ending);
    assert!(judged.is_ok(), "{name}: {judged:?} {s:?}");
    (s, String::from_utf8_lossy(&out).into_owned(), rc)
}

#[test]
fn the_runners_own_tests_end_as_expected_and_leave_nothing() {
    // SAFETY: prctl(2) with an int argument.
    assert_eq!(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) }, 0);
    let me = std::process::id() as i32;
    // A child of ours from before (as a process an earlier test parked is
    // /init's): not any test's leftover.
    let mut earlier = Command::new("sleep").arg("60").spawn().expect("sleep");

    let (s, out, rc) = run(
        "tk-test-runner-sleep",
        env!("CARGO_BIN_EXE_tk-test-runner-sleep"),
    );
    assert_eq!((s.ending.timeout, s.ending.left, rc), (Some(2), 0, 137));
    assert!(out.contains("printed before the deadline"), "{out}");
    assert!(!out.contains("woke up"), "{out}");

    let (s, out, rc) = run(
        "tk-test-runner-orphan",
        env!("CARGO_BIN_EXE_tk-test-runner-orphan"),
    );
    // The child in its group and the one that left it with setsid().
    assert_eq!((s.ending.timeout, s.ending.left, rc), (None, 2, 0));
    assert!(out.contains("in a session of its own"), "{out}");

    let (s, out, _) = run(
        "tk-test-runner-dwait",
        env!("CARGO_BIN_EXE_tk-test-runner-dwait"),
    );
    assert_eq!((s.ending.timeout, s.ending.left), (Some(2), 0));
    assert!(out.contains("is in state D"), "{out}");
    assert!(!out.contains("the vfork wait ended"), "{out}");

    assert!(
        earlier.try_wait().expect("wait").is_none(),
        "the earlier child was killed"
    );
    earlier.kill().expect("kill");
    earlier.wait().expect("reap");

    // Nothing of theirs is left: no child of ours but zombies.
    std::thread::sleep(Duration::from_millis(200));
    let left: Vec<_> = supervise::procs()
        .into_iter()
        .filter(|p| p.ppid == me && p.state != 'Z')
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
