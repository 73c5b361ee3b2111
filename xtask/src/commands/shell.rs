//! `cargo xtask shell`: an interactive shell on the guest's console, with
//! tierkit loaded and the working directory shared ([`super::in_guest`]).

use anyhow::{bail, Context, Result};
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::in_guest::{interactive_console, judge, prepare, report};
use crate::boot::qemu;
use crate::boot::BootRequest;
use crate::say;
use crate::util::Timer;

/// `cargo xtask shell` as asked.
pub struct ShellRequest {
    pub boot: BootRequest,
    /// `--timeout`, given explicitly: a person's shell has none by default.
    pub timeout: Option<Duration>,
}

/// `cargo xtask shell`: the shell's exit status, or a code of
/// [`super::in_guest::exit`].
pub(crate) fn run(s: ShellRequest) -> Result<u8> {
    let r = prepare(&s.boot, None)?;
    let data_log = r.run_dir.join("data.log");
    let console_log = r.run_dir.join("console.log");
    let args = qemu::qemu_args(
        &r.built.kernel.bzimage,
        &r.built.initramfs.path,
        &data_log,
        &r.cfg,
    )?;
    let args = interactive_console(args, &console_log);
    let program = "qemu-system-x86_64";
    fs::write(
        r.run_dir.join("qemu-cmd.txt"),
        format!("{}\n", qemu::qemu_cmd_line(program, &args)),
    )?;
    say!("the guest's console follows; `exit` or Ctrl-D powers it off, Ctrl-A x quits QEMU");
    let stdin = std::io::stdin();
    let saved = nix::sys::termios::tcgetattr(&stdin).ok();
    let stderr_log = fs::File::create(r.run_dir.join("qemu-stderr.log"))?;
    let mut cmd = Command::new(program);
    // SAFETY: the closure runs in the forked child before exec and only
    // calls prctl(2), which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let t = Timer::start();
    let status = cmd
        .args(&args)
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(stderr_log)
        .spawn()
        .with_context(|| format!("could not start {program} (cargo xtask setup installs it)"))
        .and_then(|child| wait_until(child, s.timeout));
    if let Some(saved) = &saved {
        let _ = nix::sys::termios::tcsetattr(&stdin, nix::sys::termios::SetArg::TCSANOW, saved);
    }
    let (status, timed_out) = status?;
    let read = |p: &Path| {
        fs::read(p)
            .map(|b| String::from_utf8_lossy(&b).replace('\r', ""))
            .unwrap_or_default()
    };
    let console = read(&console_log);
    if console.trim().is_empty() {
        bail!(
            "QEMU failed to start ({status}): {}",
            read(&r.run_dir.join("qemu-stderr.log")).trim()
        );
    }
    let ended = judge(
        &console,
        &read(&data_log),
        timed_out,
        tierkit_protocol::marker::Step::Shell,
    );
    report("shell", &ended, t.elapsed(), &r.run_dir);
    Ok(ended.code())
}

/// Waits for QEMU; with `timeout` (the shell's `--timeout`, given
/// explicitly: a person's shell has none) kills it then. Its status, and
/// whether it was killed.
fn wait_until(
    mut child: std::process::Child,
    timeout: Option<Duration>,
) -> Result<(std::process::ExitStatus, bool)> {
    let Some(t) = timeout else {
        return Ok((child.wait()?, false));
    };
    let until = std::time::Instant::now() + t;
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok((st, false));
        }
        if std::time::Instant::now() >= until {
            let _ = child.kill();
            return Ok((child.wait()?, true));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
