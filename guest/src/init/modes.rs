//! What a boot does with tierkit loaded (`tierkit.mode=`): the userspace
//! tests (`test`), the demos (`run`), one benchmark (`bench-<name>`), or
//! the user's command (`cmd`, `cargo xtask run -- CMD`) or shell
//! (`shell`).
//!
//! cmd and shell: [`files::CMD`] (written by xtask/src/commands/in_guest.rs)
//! names the host's working directory, QEMU's virtio-9p share
//! `tierkit-cwd`, mounted at the same path, the terminal and the command.
//! cmd: its stdout and stderr go to ttyS2 (raw), which xtask streams to
//! the host's stdout; `TIERKIT-CMD rc=N` is its status. shell: busybox sh
//! on the console with job control; `TIERKIT-SHELL rc=N` when it exits.

use super::runner::{run_all, run_prog, shell_rc, wait_reaping};
use super::{errno_text, Init};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use tierkit_protocol::cmd::CmdFile;
use tierkit_protocol::marker::{self, ProgKind};
use tierkit_protocol::param::{self, files};

/// The virtio-9p mount tag of the host's working directory.
pub const SHARE_TAG: &str = "tierkit-cwd";
pub const SHARE_OPTS: &str = "trans=virtio,version=9p2000.L,msize=262144,cache=mmap";
/// The serial port of the command's output.
pub const CMD_TTY: &str = "/dev/ttyS2";

/// What comes after the mode's work.
#[derive(Debug, PartialEq, Eq)]
pub enum After {
    /// rmmod and the kmemleak scan.
    Unload,
    /// The user's command or shell may leave tierkit in use: it stays.
    StayLoaded,
}

/// Runs the mode's work.
pub fn run_mode(init: &mut Init) -> After {
    let mode = init.params.mode.clone();
    match mode.as_str() {
        param::MODE_TEST => run_all(init, ProgKind::UserTest, "tk-test-"),
        param::MODE_RUN => run_all(init, ProgKind::Demo, "tk-demo"),
        param::MODE_CMD | param::MODE_SHELL => {
            user_cmd(init, mode == param::MODE_CMD);
            return After::StayLoaded;
        }
        m if m.starts_with(param::BENCH_PREFIX) => {
            let b = format!("tk-{m}");
            if is_executable(&init.root.at(&format!("/bin/{b}"))) {
                run_prog(init, ProgKind::Bench, &b);
            } else {
                init.error(&format!("no /bin/{b} in the initramfs for mode {m}"));
            }
        }
        m => init.error(&format!("unknown {}={m}", param::MODE)),
    }
    After::Unload
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Reads the command file and mounts the share at its working directory;
/// `Err((working directory, what failed))`.
fn share(init: &Init) -> Result<(CmdFile, PathBuf), (String, String)> {
    let bytes = std::fs::read(init.root.at(files::CMD)).map_err(|e| {
        (
            String::new(),
            format!("reading {}: {}", files::CMD, errno_text(&e)),
        )
    })?;
    let c = CmdFile::decode(&bytes).map_err(|e| (String::new(), format!("{}: {e}", files::CMD)))?;
    let cwd = PathBuf::from(os(&c.cwd));
    let shown = cwd.display().to_string();
    let mkdir = std::fs::create_dir_all(&cwd).map_err(|e| {
        let what = format!(
            "mkdir: can't create directory '{shown}': {}",
            errno_text(&e)
        );
        (shown.clone(), what)
    });
    mkdir?;
    let mounted = super::mounts::mount(SHARE_TAG, &cwd, "9p", Some(SHARE_OPTS)).map_err(|e| {
        let what = format!(
            "mount: mounting {SHARE_TAG} on {shown} failed: {}",
            errno_text(&e)
        );
        (shown.clone(), what)
    });
    mounted?;
    Ok((c, cwd))
}

/// The user's command or shell in the host's working directory.
pub fn user_cmd(init: &mut Init, is_cmd: bool) {
    let (c, cwd) = match share(init) {
        Ok(x) => x,
        Err((cwd, out)) => {
            let what = format!(
                "share: mounting the host's {cwd} (virtio-9p tag {SHARE_TAG}) failed: {out}"
            );
            init.error(&what);
            return;
        }
    };
    if is_cmd {
        run_cmd(init, &c, &cwd);
    } else {
        run_shell(init, &c, &cwd);
    }
}

fn os(b: &[u8]) -> &std::ffi::OsStr {
    std::ffi::OsStr::from_bytes(b)
}

/// `run -- CMD`: CMD with its output on ttyS2, raw.
fn run_cmd(init: &mut Init, c: &CmdFile, cwd: &Path) {
    let _ = Command::new("stty")
        .args(["-F", CMD_TTY, "raw", "-echo"])
        .stderr(Stdio::null())
        .status();
    init.tag(&marker::start(marker::CMD), "");
    let rc = match spawn_cmd(c, cwd) {
        Ok(rc) => rc,
        Err((rc, msg)) => {
            if let Ok(mut t) = std::fs::OpenOptions::new().write(true).open(CMD_TTY) {
                use std::io::Write;
                let _ = writeln!(t, "sh: {msg}");
            }
            rc
        }
    };
    init.mark(&marker::rc_line(marker::CMD, rc));
}

/// CMD's sh status, or (status, message) if it did not start: 127 not
/// found, 126 not executable, as sh says.
fn spawn_cmd(c: &CmdFile, cwd: &Path) -> Result<i32, (i32, String)> {
    let argv = c.argv.as_deref().unwrap_or_default();
    let Some((prog, args)) = argv.split_first() else {
        return Ok(0);
    };
    let tty = |()| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(CMD_TTY)
            .map_err(|e| (1, format!("{CMD_TTY}: {}", errno_text(&e))))
    };
    let out = tty(())?;
    let err = out.try_clone().map_err(|e| (1, errno_text(&e)))?;
    let name = String::from_utf8_lossy(prog).into_owned();
    let spawned = Command::new(os(prog))
        .args(args.iter().map(|a| os(a)))
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn();
    match spawned {
        Ok(child) => wait_reaping(child.id())
            .map(shell_rc)
            .map_err(|e| (1, errno_text(&e))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err((127, format!("{name}: not found")))
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            Err((126, format!("{name}: Permission denied")))
        }
        Err(e) => Err((126, format!("{name}: {}", errno_text(&e)))),
    }
}

/// `shell`: busybox sh with job control on the console.
fn run_shell(init: &mut Init, c: &CmdFile, cwd: &Path) {
    if let Some((rows, cols)) = c.size {
        if let Ok(tty) = std::fs::File::open("/dev/ttyS0") {
            let _ = Command::new("stty")
                .args(["rows", &rows.to_string(), "cols", &cols.to_string()])
                .stdin(tty)
                .stderr(Stdio::null())
                .status();
        }
    }
    println!(
        "tierkit shell: tierkit loaded, {} is the host's (9p); numactl, numastat, cxl, daxctl, ndctl on PATH; exit or Ctrl-D powers off",
        cwd.display()
    );
    init.tag(&marker::start(marker::SHELL), "");
    let rc = Command::new("setsid")
        .args(["cttyhack", "sh"])
        .current_dir(cwd)
        .env("TERM", os(&c.term))
        .env("PS1", "tierkit:\\w# ")
        .spawn()
        .and_then(|c| wait_reaping(c.id()))
        .map_or(127, shell_rc);
    init.mark(&marker::rc_line(marker::SHELL, rc));
}
