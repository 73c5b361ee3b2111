//! The guest programs /init runs: `/bin/NAME` in /tmp, stdin from
//! /dev/null, stdout and stderr together to the console and the data
//! channel, between `TIERKIT-<KIND>-START NAME` and `TIERKIT-<KIND> NAME
//! rc=N` (a killed program: 128+signal, as sh reports it; `timeout=S` and
//! `left=K` when /init killed it at its deadline or killed what it left
//! running, [`super::supervise`]; `unreleased=1` when what a killed test
//! held did not come back, [`super::settle`]).

use super::{settle, supervise, Init};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;
use tierkit_protocol::deadline;
use tierkit_protocol::marker::{self, Ending, ProgKind};

/// An exit status as sh's `$?`.
pub fn shell_rc(s: ExitStatus) -> i32 {
    s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
}

/// Waits for the child `pid` and returns its status, reaping on the way
/// any other process that ended: as PID 1, /init inherits orphans, and
/// sh's `waitpid(-1)` reaped them so (a zombie keeps its /proc entry).
/// Not PID 1 (host tests): only `pid`, leaving others' children alone.
pub fn wait_reaping(pid: u32) -> std::io::Result<ExitStatus> {
    let which = if std::process::id() == 1 {
        -1
    } else {
        pid as libc::pid_t
    };
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes the status into our local.
        let r = unsafe { libc::waitpid(which, &mut status, 0) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r as u32 == pid {
            return Ok(ExitStatus::from_raw(status));
        }
    }
}

/// Whether /init reaps every orphan: PID 1 (the guest), or a subreaper.
fn reaps_orphans() -> bool {
    let mut on: libc::c_int = 0;
    // SAFETY: PR_GET_CHILD_SUBREAPER writes an int to the pointer.
    let r = unsafe { libc::prctl(libc::PR_GET_CHILD_SUBREAPER, &mut on as *mut libc::c_int) };
    std::process::id() == 1 || (r == 0 && on != 0)
}

/// What /init waits for after a test ([`settle::wait`]): tierkit's
/// counters from before it, and the most it waits.
pub struct Settle {
    pub base: Option<settle::Holdings>,
    pub bound: Duration,
}

/// Runs `cmd` under [`supervise::run`] (its own process group, killed at
/// `deadline`, nothing left behind), copying its output to the console
/// (our stdout) and the data channel, /init's notes about it last; its sh
/// status (127 or 126 if it could not start) and how it ended. With
/// `after`, waits for what it held to come back first ([`settle`]).
pub fn run_copying(
    init: &mut Init,
    cmd: Command,
    deadline: Option<Duration>,
    after: Option<Settle>,
) -> (i32, Ending) {
    let prog = cmd.get_program().to_string_lossy().into_owned();
    let copy = init.out.has_data();
    let stdout = std::io::stdout();
    let out = &mut init.out;
    let mut sink = |b: &[u8]| {
        let _ = stdout.lock().write_all(b);
        if copy {
            out.data(b);
        }
    };
    let orphans = reaps_orphans();
    let ran = supervise::run(cmd, deadline, orphans, &mut sink);
    let mut s = match ran {
        Ok(s) => s,
        Err(e) => {
            let l = format!("sh: {prog}: {}\n", super::errno_text(&e));
            sink(l.as_bytes());
            let rc = if e.kind() == std::io::ErrorKind::PermissionDenied {
                126
            } else {
                127
            };
            return (rc, Ending::default());
        }
    };
    if let Some(a) = after {
        let o = settle::wait(&init.root, a.base.as_ref(), &s, a.bound, &mut || {
            supervise::reap_ended(s.pid, orphans)
        });
        s.ending = settle::with_outcome(s.ending, &o);
        s.notes.extend(o.notes);
    }
    let name = prog.rsplit('/').next().unwrap_or(&prog);
    for n in &s.notes {
        sink(format!("tk-init: {name}: {n}\n").as_bytes());
    }
    let _ = stdout.lock().flush();
    // Killed and never reaped: as sh reports a SIGKILL.
    let rc = s.status.map_or(128 + libc::SIGKILL, shell_rc);
    (rc, s.ending)
}

/// Runs `/bin/NAME` with its markers. A test has its deadline
/// ([`deadline::of`]); it fails unless [`deadline::judge`] passes it.
pub fn run_prog(init: &mut Init, kind: ProgKind, name: &str) -> i32 {
    init.mark(&marker::prog_start(kind, name));
    let mut cmd = Command::new(init.root.at(&format!("/bin/{name}")));
    cmd.current_dir(init.root.at("/tmp")).stdin(Stdio::null());
    let d = deadline::of(name);
    let test = kind == ProgKind::UserTest;
    let scale = init.params.deadline_scale;
    let secs = test.then(|| d.secs_at(scale));
    let after = test.then(|| Settle {
        base: settle::holdings(&init.root),
        bound: Duration::from_secs(d.settle_secs_at(scale).into()),
    });
    let (rc, ending) = run_copying(
        init,
        cmd,
        secs.map(|s| Duration::from_secs(s.into())),
        after,
    );
    init.mark(&marker::prog_end_with(kind, name, rc, ending));
    let passed = if kind == ProgKind::UserTest {
        deadline::judge(&d, rc, ending).is_ok()
    } else {
        rc == 0 && ending == Ending::default()
    };
    if !passed {
        init.fails += 1;
    }
    rc
}

/// The executables of /bin whose names start with `prefix`, in glob
/// order, that `tierkit.filter=` and `tierkit.skip=` select.
pub fn selected(init: &Init, prefix: &str) -> Vec<String> {
    let bin = init.root.at("/bin");
    super::names_with_prefix(&bin, prefix)
        .into_iter()
        .filter(|n| {
            std::fs::metadata(bin.join(n))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .filter(|n| init.params.selects(n))
        .collect()
}

/// Runs every selected `/bin/<prefix>*`, or notes that none matched.
pub fn run_all(init: &mut Init, kind: ProgKind, prefix: &str) {
    let names = selected(init, prefix);
    if names.is_empty() {
        let f = init.params.filter.clone().unwrap_or_else(|| "*".into());
        init.note(&format!("no /bin/{prefix}* matched filter '{f}'"));
    }
    for n in names {
        run_prog(init, kind, &n);
    }
}
