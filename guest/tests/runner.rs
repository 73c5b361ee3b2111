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
    run_as(name, bin, true)
}

/// [`run`]; `judged`: check [`deadline::judge`]'s verdict (not for a test
/// whose verdict needs /init's wait for tierkit's counters).
fn run_as(name: &str, bin: &str, judged: bool) -> (supervise::Supervised, String, i32) {
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
    let verdict = deadline::judge(&d, rc, s.ending);
    assert!(!judged || verdict.is_ok(), "{name}: {verdict:?} {s:?}");
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

    // Its child is kept (named tk-keep-alive) and lets go of the pages
    // by itself seconds after the kill; /init's wait for tierkit's
    // counters is in the guest (the host has no module).
    let (s, out, _) = run_as(
        "tk-test-runner-release",
        env!("CARGO_BIN_EXE_tk-test-runner-release"),
        false,
    );
    assert_eq!((s.ending.timeout, s.ending.left), (Some(2), 1));
    assert!(
        out.contains("pages of anonymous memory mapped and touched"),
        "{out}"
    );
    assert!(!out.contains("woke up"), "{out}");
    let kept = |me| {
        supervise::procs()
            .into_iter()
            .filter(|p| p.ppid == me && p.state != 'Z' && p.comm == "tk-keep-alive")
            .count()
    };
    assert_eq!(kept(me), 1, "the kept child is not there");
    let t = std::time::Instant::now();
    while kept(me) > 0 && t.elapsed() < Duration::from_secs(10) {
        supervise::reap_ended(0, true);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(kept(me), 0, "the kept child did not let go by itself");
    assert!(t.elapsed() >= Duration::from_secs(2), "{:?}", t.elapsed());

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
