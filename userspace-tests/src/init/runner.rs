//! The guest programs /init runs: `/bin/NAME` in /tmp, stdin from
//! /dev/null, stdout and stderr together to the console and the data
//! channel, between `TIERKIT-<KIND>-START NAME` and `TIERKIT-<KIND> NAME
//! rc=N` (a killed program: 128+signal, as sh reports it).

use super::Init;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};
use tierkit_protocol::marker::{self, ProgKind};

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

/// A pipe (read end, write end), close-on-exec.
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 fills in.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both are fresh descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Runs `cmd` with stdout and stderr into one pipe and copies what comes
/// to the console (our stdout) and the data channel; its sh status, or
/// 127 if it could not start.
pub fn run_copying(init: &mut Init, mut cmd: Command) -> i32 {
    let prog = cmd.get_program().to_string_lossy().into_owned();
    let spawned = pipe().and_then(|(r, w)| {
        let w2 = w.try_clone()?;
        cmd.stdout(Stdio::from(w)).stderr(Stdio::from(w2));
        let child = cmd.spawn();
        // Our copies of the write end go, so that EOF comes when the
        // program (and whatever it left running) closes its own.
        drop(cmd);
        Ok((child?, r))
    });
    let (child, r) = match spawned {
        Ok(x) => x,
        Err(e) => {
            let l = format!("sh: {prog}: {}\n", super::errno_text(&e));
            print!("{l}");
            init.out.data(l.as_bytes());
            return if e.kind() == std::io::ErrorKind::PermissionDenied {
                126
            } else {
                127
            };
        }
    };
    let mut src = std::fs::File::from(r);
    let mut buf = [0u8; 8192];
    let copy = init.out.has_data();
    let stdout = std::io::stdout();
    loop {
        match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let _ = stdout.lock().write_all(&buf[..n]);
                if copy {
                    init.out.data(&buf[..n]);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    let _ = stdout.lock().flush();
    wait_reaping(child.id()).map_or(127, shell_rc)
}

/// Runs `/bin/NAME` with its markers; a non-zero status is a failure.
pub fn run_prog(init: &mut Init, kind: ProgKind, name: &str) -> i32 {
    init.mark(&marker::prog_start(kind, name));
    let mut cmd = Command::new(init.root.at(&format!("/bin/{name}")));
    cmd.current_dir(init.root.at("/tmp")).stdin(Stdio::null());
    let rc = run_copying(init, cmd);
    init.mark(&marker::prog_end(kind, name, rc));
    if rc != 0 {
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
