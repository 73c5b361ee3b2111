//! What `cargo xtask run -- CMD` ([`super::run`]) and `cargo xtask shell`
//! ([`super::shell`]) share: the user's own work in the guest, with tierkit
//! loaded.
//!
//! - The host's working directory is shared read-write at the same absolute
//!   path through QEMU's virtio-9p (`-fsdev local` + `virtio-9p-pci`, mount
//!   tag [`SHARE_TAG`]). Not virtiofs: QEMU serves 9p itself, while
//!   virtiofs needs a virtiofsd daemon on the host and guest RAM in a shared
//!   memory backend, which would change the memory topology (HMAT nodes,
//!   CXL windows) the tests rely on.
//! - The command travels as a file in the initramfs, `/etc/tierkit/cmd`:
//!   NUL-separated fields ([`cmd_file`], [`tierkit_protocol::cmd`]), so any
//!   bytes but NUL pass as they are; the kernel command line only says
//!   `tierkit.mode=cmd` or `shell`.
//! - `run -- CMD`: CMD's stdout and stderr go to a third serial port (ttyS2,
//!   raw), written by QEMU to `cmd-out.log` in the run directory and copied
//!   to xtask's stdout as it grows; kernel reports go to stderr (the whole
//!   console with `-v`). xtask exits with CMD's status, or one of the
//!   codes of [`exit`] when the guest could not run it.
//! - `shell`: the console is QEMU's stdio (`-serial mon:stdio` with
//!   `signal=off`, so Ctrl-C reaches the guest; Ctrl-A x quits QEMU); QEMU
//!   puts the terminal in raw mode and restores it, and xtask restores the
//!   termios it saw before as well, should QEMU die. /init starts busybox sh
//!   with job control (`setsid cttyhack`); its exit powers the guest off.
//! - The guest tools ([`crate::kernels::guest_tools::TOOLS`]: numactl, numastat, cxl,
//!   daxctl, ndctl) are in these initramfs images only (11.7 MB), not in
//!   those of `test`, `bench` and the demos.

use crate::boot::qemu::{GuestConfig, Mode};
use crate::boot::{self, BootRequest};
use crate::util::{self, fmt_dur, Timer};
use crate::{kernels::guest_tools, say, util::setup};
use anyhow::{Context, Result};
use std::ffi::OsString;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tierkit_protocol::marker::{self, Marker, Step};

/// The virtio-9p mount tag of the shared working directory.
pub const SHARE_TAG: &str = "tierkit-cwd";
/// The command file in the initramfs (read by `/init`'s `user_cmd`).
pub const CMD_FILE: &str = tierkit_protocol::param::files::CMD;

/// [`exit`] for `cargo xtask help run` and `help shell`.
pub const EXIT_HELP: &str = "\
Exit status of `run -- CMD` and `shell`:
  0-255  CMD's (or the shell's) own status; killed by signal N: 128+N
  2      the command line was refused (nothing built or booted)
  248    xtask failed on the host: a build, the guest tools, QEMU not starting
  249    the guest could not set up: CXL region assembly or mounting the share
  250    the guest kernel panicked (an oops too: oops=panic)
  251    --timeout passed: QEMU killed
  252    the guest never reached /init, or stopped before CMD's status came
  253    insmod tierkit.ko failed: CMD did not run
xtask's last line on stderr says which (a CMD may exit with 248-253 itself).";

/// The exit codes of `run -- CMD` and `shell` other than CMD's own status.
/// CMD's status passes through as it is (0 to 255; killed by signal N:
/// 128+N, as sh reports it), so a CMD that exits with one of these itself
/// is told apart only by xtask's last line on stderr.
pub mod exit {
    /// The command line was refused before anything was built (every
    /// `cargo xtask` command; one `error:` line).
    pub const REFUSED: u8 = 2;
    /// xtask failed on the host: a build, the guest tools root, QEMU not
    /// starting.
    pub const HOST_ERROR: u8 = 248;
    /// The guest could not set up what CMD runs in: CXL region assembly
    /// (`--topology cxl`) or mounting the shared directory.
    pub const SETUP: u8 = 249;
    /// The guest kernel panicked (`oops=panic`: an oops or BUG too).
    pub const PANIC: u8 = 250;
    /// `--timeout` passed: QEMU was killed.
    pub const TIMEOUT: u8 = 251;
    /// The guest never reached /init, or stopped before CMD's status came.
    pub const NO_STATUS: u8 = 252;
    /// `insmod tierkit.ko` failed; CMD did not run.
    pub const INSMOD: u8 = 253;
}

/// Directories and files of the guest that the share, mounted at the
/// host's working directory, must not cover.
const GUEST_PATHS: &[&str] = &[
    "/init",
    "/bin/busybox",
    "/sbin/insmod",
    "/usr/bin/numactl",
    "/usr/sbin",
    "/lib64/ld-linux-x86-64.so.2",
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/lib/modules/tierkit.ko",
    "/etc/tierkit/cmd",
];
/// The guest's own file systems: a share below them would not be the host's.
const GUEST_MOUNTS: &[&str] = &["/proc", "/sys", "/dev"];

/// The working directory to share, or why it cannot be: unreadable, not
/// UTF-8 (QEMU's options are text), `/`, inside the guest's `/proc`,
/// `/sys` or `/dev`, or a parent of what the guest runs from (`/usr`,
/// `/lib`, ...).
pub fn check_share(cwd: Option<&Path>) -> std::result::Result<PathBuf, String> {
    let Some(cwd) = cwd else {
        return Err(
            "the current directory cannot be read (deleted?): run -- CMD and shell share it with the guest"
                .into(),
        );
    };
    let Some(s) = cwd.to_str() else {
        return Err(format!(
            "the current directory {} is not UTF-8: QEMU's -fsdev path= cannot carry it; cd to another to share",
            cwd.display()
        ));
    };
    let dir = Path::new(s);
    if !dir.is_absolute() || s.chars().any(char::is_control) {
        return Err(format!(
            "the current directory {s:?} cannot be shared: it must be an absolute path without control characters"
        ));
    }
    if dir == Path::new("/") {
        return Err("the current directory is /: sharing it would hide the guest's own /bin, /lib and /init; cd to a project directory".into());
    }
    if let Some(m) = GUEST_MOUNTS.iter().find(|m| dir.starts_with(m)) {
        return Err(format!(
            "the current directory {s} is under {m}, which the guest mounts itself; cd elsewhere to share"
        ));
    }
    if let Some(p) = GUEST_PATHS.iter().find(|p| Path::new(p).starts_with(dir)) {
        return Err(format!(
            "the current directory {s} would hide the guest's own {p} when shared at the same path; cd to a project directory"
        ));
    }
    Ok(dir.to_path_buf())
}

/// Why `shell` is refused when stdin is not a terminal (a pipe, a file,
/// /dev/null): QEMU would hand the guest's shell what the pipe holds and
/// then nothing, not even an end of input, and the shell would wait for
/// ever.
pub const SHELL_NEEDS_A_TERMINAL: &str = "`shell` needs a terminal on stdin, and stdin is a pipe or a file (the guest's shell would wait for input for ever); to run commands without a terminal: `cargo xtask run -- sh -c 'numactl -H; numastat'`";

/// The command of `run --`: at least a program name, not empty.
pub fn check_command(argv: &[OsString]) -> std::result::Result<(), String> {
    match argv.first() {
        None => {
            Err("`run --` needs a command after `--`, e.g. `cargo xtask run -- numactl -H`".into())
        }
        Some(p) if p.is_empty() => Err("`run -- ''`: the command's name is empty".into()),
        Some(p) if p.as_bytes().contains(&0) => Err("the command's name has a NUL byte".into()),
        Some(_) => Ok(()),
    }
}

/// The terminal the shell runs in: `TERM` (if plain) and its size.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Term {
    pub term: String,
    pub rows: u16,
    pub cols: u16,
}

impl Term {
    /// The host's: `$TERM` and stdin's window size, if a terminal.
    pub fn host() -> Term {
        let term = std::env::var("TERM")
            .ok()
            .filter(|t| {
                !t.is_empty()
                    && t.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c))
            })
            .unwrap_or_else(|| "vt100".into());
        // SAFETY: TIOCGWINSZ writes one `winsize` into `ws`, which lives
        // for the call; on failure `ws` stays zeroed.
        let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
        let ok = unsafe { libc::ioctl(libc::STDIN_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
        Term {
            term,
            rows: if ok { ws.ws_row } else { 0 },
            cols: if ok { ws.ws_col } else { 0 },
        }
    }
}

/// The contents of [`CMD_FILE`] ([`tierkit_protocol::cmd::CmdFile`]):
/// the working directory, the terminal, and with `argv` the command.
pub fn cmd_file(cwd: &Path, argv: Option<&[OsString]>, term: &Term) -> Result<Vec<u8>> {
    let c = tierkit_protocol::cmd::CmdFile {
        cwd: cwd.as_os_str().as_bytes().to_vec(),
        term: term.term.as_bytes().to_vec(),
        size: (term.rows > 0 && term.cols > 0).then_some((term.rows, term.cols)),
        argv: argv.map(|a| a.iter().map(|w| w.as_bytes().to_vec()).collect()),
    };
    c.encode()
        .context("the command, its working directory or TERM holds a NUL byte")
}

/// A value for a QEMU option (`path=...`): a comma is doubled.
fn qemu_opt(v: &str) -> String {
    v.replace(',', ",,")
}

/// QEMU's virtio-9p share of `dir`, read-write, files owned as on the host.
pub fn share_args(dir: &Path) -> Vec<String> {
    vec![
        "-fsdev".into(),
        format!(
            "local,id=tkshare,path={},security_model=none,multidevs=remap",
            qemu_opt(&dir.display().to_string())
        ),
        "-device".into(),
        // On the root bus: the last bus created may be a CXL host bridge
        // (pxb-cxl), which takes only bridges.
        format!("virtio-9p-pci,bus=pcie.0,fsdev=tkshare,mount_tag={SHARE_TAG}"),
    ]
}

/// `args` (of [`crate::boot::qemu::qemu_args`]) with the console on QEMU's stdio for a
/// person: serial and monitor multiplexed (`-serial mon:stdio`; Ctrl-A x
/// quits), Ctrl-C to the guest (`signal=off`), and a copy in `log`.
pub fn interactive_console(args: Vec<String>, log: &Path) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len() + 4);
    let mut i = 0;
    while i < args.len() {
        if args[i] == "-serial" && args.get(i + 1).is_some_and(|a| a == "stdio") {
            out.extend([
                "-chardev".into(),
                format!(
                    "stdio,id=con,mux=on,signal=off,logfile={},logappend=off",
                    qemu_opt(&log.display().to_string())
                ),
                "-serial".into(),
                "chardev:con".into(),
                "-mon".into(),
                "chardev=con,mode=readline".into(),
            ]);
            i += 2;
            continue;
        }
        out.push(args[i].clone());
        i += 1;
    }
    out
}

/// How a `run -- CMD` or `shell` boot ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    /// CMD (or the shell) exited with this status.
    Status(i32),
    Panic(String),
    Timeout,
    NoStatus(String),
    Insmod(String),
    Setup(String),
}

impl Ended {
    /// The exit code of `cargo xtask run -- CMD` / `shell`.
    pub fn code(&self) -> u8 {
        match self {
            Ended::Status(rc) => (*rc).clamp(0, 255) as u8,
            Ended::Panic(_) => exit::PANIC,
            Ended::Timeout => exit::TIMEOUT,
            Ended::NoStatus(_) => exit::NO_STATUS,
            Ended::Insmod(_) => exit::INSMOD,
            Ended::Setup(_) => exit::SETUP,
        }
    }
}

/// Judges a boot from its console and data channel (`/init`'s markers are
/// in both; the shell's console shows only warnings and worse).
///
/// `status` is the step whose end marker carries the command's status
/// ([`Step::Cmd`] or [`Step::Shell`]); every line is read by the protocol
/// crate's [`Marker::find`], as /init writes it.
pub fn judge(console: &str, data: &str, timed_out: bool, status: Step) -> Ended {
    // The data channel first: in a shell the console also has what was typed.
    let markers = || data.lines().chain(console.lines()).filter_map(Marker::find);
    let error = |prefix: &str| {
        markers().find_map(|m| match m {
            Marker::Error(e) => e.strip_prefix(prefix).map(str::to_string),
            _ => None,
        })
    };
    let end = |step: Step| {
        markers().find_map(|m| match m {
            Marker::End { step: s, rc } if s == step => Some(rc),
            _ => None,
        })
    };
    if let Some(l) = console
        .lines()
        .find(|l| l.contains("Kernel panic - not syncing"))
    {
        return Ended::Panic(crate::judge::printk::split_seconds(l).1.trim().to_string());
    }
    if timed_out {
        return Ended::Timeout;
    }
    if !markers().any(|m| matches!(m, Marker::Boot(_))) {
        return Ended::NoStatus("the guest never reached /init".into());
    }
    if let Some(e) = error("cxl step=") {
        return Ended::Setup(format!("CXL setup failed at step {e}"));
    }
    if let Some(e) = error("share: ") {
        return Ended::Setup(e);
    }
    if let Some(rc) = end(Step::Insmod).filter(|rc| *rc != Some(0)) {
        let ko = tierkit_protocol::param::files::TIERKIT_KO;
        let rc = rc.map_or("rc=?".to_string(), |rc| format!("rc={rc}"));
        let why = error(&format!("insmod {ko} ")).unwrap_or(rc);
        return Ended::Insmod(format!("insmod tierkit.ko {why}"));
    }
    match end(status).flatten() {
        Some(rc) => Ended::Status(rc),
        None => Ended::NoStatus(format!(
            "the guest stopped before the command's status came ({}; did it power off?)",
            marker::line(status.tag(), "")
        )),
    }
}

/// Copies `path` to stdout as QEMU writes it, until `stop` (then drains).
pub(super) fn follow(path: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut file: Option<fs::File> = None;
        let mut buf = vec![0u8; 1 << 16];
        let mut out = std::io::stdout();
        let mut out_ok = true;
        loop {
            let stopping = stop.load(Ordering::SeqCst);
            if file.is_none() {
                file = fs::File::open(&path).ok();
            }
            let mut got = 0;
            if let Some(f) = file.as_mut() {
                while let Ok(n) = f.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    got += n;
                    // A closed stdout (`| head`) ends the copy, not the guest.
                    out_ok = out_ok && out.write_all(&buf[..n]).is_ok();
                }
                out_ok = out_ok && out.flush().is_ok();
            }
            if stopping {
                break;
            }
            if got == 0 {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    })
}

/// Everything built for one `run -- CMD` or `shell` boot.
pub(super) struct Ready {
    pub(super) cfg: GuestConfig,
    pub(super) built: boot::Built,
    pub(super) run_dir: PathBuf,
    _lock: util::Lock,
}

/// Builds the boot `req` asks for (`run -- CMD` with `argv`, or `shell`).
pub(super) fn prepare(req: &BootRequest, argv: Option<&[OsString]>) -> Result<Ready> {
    setup::ensure()?;
    let cwd = check_share(std::env::current_dir().ok().as_deref()).map_err(anyhow::Error::msg)?;
    let (mode, kind, p) = (&req.job.mode, req.kind(), req.kernel.profile);
    let accel = req.kvm_accel();
    let mut cfg = boot::plan(req, accel)?;
    let run_dir = req.run_dir();
    fs::create_dir_all(&run_dir)?;
    let lock = util::lock(&run_dir.join(".lock"), "this run directory")?;
    for stale in ["console.log", "data.log", "cmd-out.log", "qemu-stderr.log"] {
        let _ = fs::remove_file(run_dir.join(stale));
    }
    cfg.extra_args = share_args(&cwd);
    if *mode == Mode::Cmd {
        cfg.extra_args.extend([
            "-serial".into(),
            format!("file:{}", run_dir.join("cmd-out.log").display()),
        ]);
    }
    let t = Timer::start();
    let mut files = guest_tools::tools()?;
    let tools = files.size();
    files.add_file(CMD_FILE, 0o644, cmd_file(&cwd, argv, &Term::host())?);
    let built = boot::build_all(
        &req.kernel,
        kind.spec().cxl,
        true,
        &run_dir,
        files.entries(),
    )?;
    if util::verbose() {
        say!(
            "initramfs {} KiB (guest tools {} KiB), built in {}",
            built.initramfs.size / 1024,
            tools / 1024,
            fmt_dur(t.elapsed())
        );
    }
    say!(
        "booting {kind} ({}, {:?}), {} kernel, {p} profile; {} shared at the same path",
        cfg.topology.describe(),
        accel,
        req.kernel.kind,
        cwd.display()
    );
    Ok(Ready {
        cfg,
        built,
        run_dir,
        _lock: lock,
    })
}

/// xtask's last line on stderr: what the exit code means.
pub(super) fn report(what: &str, ended: &Ended, took: Duration, run_dir: &Path) {
    let code = ended.code();
    let why = match ended {
        Ended::Status(rc) if what == "shell" => format!("the shell exited with {rc}"),
        Ended::Status(rc) => format!("the command exited with {rc}"),
        Ended::Panic(l) => format!("the guest kernel panicked: {l}"),
        Ended::Timeout => "the guest timed out (--timeout): QEMU killed".into(),
        Ended::NoStatus(w) | Ended::Insmod(w) | Ended::Setup(w) => w.clone(),
    };
    say!(
        "tierkit {what}: {why} (exit {code}; guest {}; logs in {})",
        fmt_dur(took),
        run_dir.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    #[test]
    fn shares() {
        let ok = |p: &str| check_share(Some(Path::new(p)));
        assert_eq!(ok("/work/a b,c").unwrap(), PathBuf::from("/work/a b,c"));
        assert!(ok("/tmp/x").is_ok());
        assert!(ok("/root").is_ok());
        assert!(ok("/usr/src/linux").is_ok());
        assert!(ok("/").unwrap_err().contains("is /"));
        assert!(ok("/usr").unwrap_err().contains("/usr/bin/numactl"));
        assert!(ok("/lib").unwrap_err().contains("hide"));
        assert!(ok("/proc/1").unwrap_err().contains("under /proc"));
        assert!(check_share(None).unwrap_err().contains("cannot be read"));
        let bad = PathBuf::from(OsString::from_vec(b"/work/\xff".to_vec()));
        assert!(check_share(Some(&bad)).unwrap_err().contains("not UTF-8"));
    }

    #[test]
    fn qemu_share_escapes_commas() {
        let a = share_args(Path::new("/w/a,b"));
        assert_eq!(a[0], "-fsdev");
        assert!(
            a[1].contains("path=/w/a,,b,security_model=none"),
            "{}",
            a[1]
        );
        assert!(a[3].ends_with("mount_tag=tierkit-cwd"));
    }

    #[test]
    fn console_for_a_person() {
        let a: Vec<String> = ["-x", "-serial", "stdio", "-serial", "file:/d"]
            .map(String::from)
            .to_vec();
        let b = interactive_console(a, Path::new("/r/console.log"));
        assert_eq!(b[0], "-x");
        assert!(b[2].starts_with("stdio,id=con,mux=on,signal=off,logfile=/r/console.log"));
        assert_eq!(
            &b[3..7],
            [
                "-serial",
                "chardev:con",
                "-mon",
                "chardev=con,mode=readline"
            ]
        );
        assert_eq!(&b[7..], ["-serial", "file:/d"]);
    }

    /// Every byte but NUL reaches the guest's argv as it was: /init reads
    /// the file back with the same [`tierkit_protocol::cmd::CmdFile`].
    #[test]
    fn command_file_round_trips_to_the_guest() {
        let words: Vec<OsString> = vec![
            "printf".into(),
            "%s\\0".into(),
            "a b".into(),
            "it's \"q\" $HOME `x` \\".into(),
            "".into(),
            "new\nline\ttab".into(),
            OsString::from_vec(b"\xff\xfe raw".to_vec()),
            "-- --x".into(),
        ];
        let term = Term {
            term: "xterm".into(),
            rows: 40,
            cols: 120,
        };
        let f = cmd_file(Path::new("/w/it's here"), Some(&words), &term).unwrap();
        let c = tierkit_protocol::cmd::CmdFile::decode(&f).unwrap();
        assert_eq!(c.cwd, b"/w/it's here");
        assert_eq!(c.term, b"xterm");
        assert_eq!(c.size, Some((40, 120)));
        let want: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        assert_eq!(c.argv, Some(want));
        let shell = cmd_file(Path::new("/w"), None, &Term::default()).unwrap();
        let c = tierkit_protocol::cmd::CmdFile::decode(&shell).unwrap();
        assert_eq!((c.argv, c.size), (None, None));
        let nul = [OsString::from_vec(b"a\0b".to_vec())];
        assert!(cmd_file(Path::new("/w"), Some(&nul), &term).is_err());
    }

    #[test]
    fn empty_commands_are_refused() {
        assert!(check_command(&[]).unwrap_err().contains("needs a command"));
        assert!(check_command(&["".into()]).is_err());
        assert!(check_command(&["true".into()]).is_ok());
    }

    #[test]
    fn verdicts() {
        let boot = "[ 1.0] TIERKIT-BOOT mode=cmd\n[ 2.0] TIERKIT-INSMOD rc=0\n";
        let j = |c: &str, t| judge(c, "", t, Step::Cmd);
        assert_eq!(
            j(&format!("{boot}[ 3.0] TIERKIT-CMD rc=3\n"), false),
            Ended::Status(3)
        );
        assert_eq!(
            j(&format!("{boot}[ 3.0] TIERKIT-CMD rc=0\n"), false).code(),
            0
        );
        let p = j(
            &format!("{boot}[ 3.0] Kernel panic - not syncing: Out of memory\n"),
            false,
        );
        assert_eq!(p.code(), exit::PANIC);
        assert!(matches!(p, Ended::Panic(l) if l == "Kernel panic - not syncing: Out of memory"));
        assert_eq!(j(boot, true).code(), exit::TIMEOUT);
        assert_eq!(j("", false).code(), exit::NO_STATUS);
        assert_eq!(j(boot, false).code(), exit::NO_STATUS);
        let ins = "[ 1.0] TIERKIT-BOOT mode=cmd\n[ 2.0] TIERKIT-INSMOD rc=1\n[ 2.0] TIERKIT-ERROR insmod /lib/modules/tierkit.ko failed (rc=1): x\n";
        assert_eq!(j(ins, false).code(), exit::INSMOD);
        let cxl = "[ 1.0] TIERKIT-BOOT mode=cmd\n[ 2.0] TIERKIT-ERROR cxl step=commit: no\n";
        assert_eq!(j(cxl, false).code(), exit::SETUP);
        let share = format!("{boot}[ 3.0] TIERKIT-ERROR share: mounting failed\n");
        assert_eq!(j(&share, false).code(), exit::SETUP);
        // The shell's markers come on the data channel.
        let data = "TIERKIT-BOOT mode=shell\nTIERKIT-INSMOD rc=0\nTIERKIT-SHELL rc=7\n";
        assert_eq!(judge("", data, false, Step::Shell), Ended::Status(7));
    }
}
