//! Booting the guest: accelerator choice, kernel command line, the QEMU
//! command, and a run with a timeout that streams the console.
//!
//! Serial ports: ttyS0 is the console (QEMU's stdout, read line by line,
//! written to `console.log`); ttyS1 is the data channel (`data.log`), where
//! /init copies the output of guest programs, whole lines only.

use crate::judge::console::{self, CrashKind, Phases};
use crate::kernels::initramfs::Initramfs;
use crate::kernels::kernel::KernelBuild;
use crate::plan::topology::Topology;
use crate::say;
use crate::util;
use anyhow::{bail, Context, Result};
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tierkit_protocol::marker::{self, Marker};
use tierkit_protocol::param;

/// What the guest's /init does (`tierkit.mode=`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Load tierkit (KUnit runs) and run the demos `/bin/tk-demo*`.
    Run,
    /// Load tierkit (KUnit runs) and run the tests `/bin/tk-test-*`.
    Test,
    /// Load tierkit (KUnit off) and run `/bin/tk-bench-<name>`.
    Bench(String),
    /// `run -- CMD`: load tierkit and run the user's command in the shared
    /// working directory ([`crate::commands::in_guest`]).
    Cmd,
    /// `shell`: load tierkit and start an interactive shell on the console.
    Shell,
}

impl Mode {
    pub fn as_param(&self) -> String {
        match self {
            Mode::Run => param::MODE_RUN.into(),
            Mode::Test => param::MODE_TEST.into(),
            Mode::Bench(b) => format!("{}{b}", param::BENCH_PREFIX),
            Mode::Cmd => param::MODE_CMD.into(),
            Mode::Shell => param::MODE_SHELL.into(),
        }
    }
}

pub use crate::plan::accel::{choose_accel, kvm_problem, Accel};
pub use crate::plan::topology::CxlOnline;

/// What the guest is asked to do, and how QEMU runs it: the part of a
/// boot's request ([`crate::boot::BootRequest`]) that this stage reads.
#[derive(Clone, Debug)]
pub struct GuestJob {
    pub mode: Mode,
    /// Run KUnit suites (at insmod); off: `kunit.enable=0`.
    pub kunit: bool,
    /// Which tests: `kunit.filter_glob=` and `tierkit.filter=`.
    pub filter: crate::plan::runs::Filter,
    /// Extra kernel command line: the run's words, then `--append`'s.
    pub append: Vec<String>,
    /// `--cxl-online`: the zone hot-added (CXL) memory is onlined into.
    pub cxl_online: CxlOnline,
    /// QEMU's `-cpu` model.
    pub cpu_model: String,
    /// QEMU is killed after this long.
    pub timeout: Duration,
    /// `tierkit.deadline_scale=`: userspace tests' deadlines are this many
    /// times their own, as `timeout` is for a slower topology or kernel.
    pub deadline_scale: u64,
}

/// Everything about one guest boot except the kernel and initramfs: the
/// request's kernel and job, with what planning made of the rest (the
/// topology's layout, the accelerator).
#[derive(Clone, Debug)]
pub struct GuestConfig {
    pub topology: Topology,
    pub accel: Accel,
    /// The kernel booted: `--profile`'s and `--kernel`'s command-line
    /// parameters ([`crate::kernels::profile::Profile::kernel_cmdline`],
    /// [`crate::kernels::profile::KernelKind`]).
    pub kernel: crate::kernels::kernel::KernelRequest,
    pub job: GuestJob,
    /// More QEMU arguments, after the two serial ports (`run -- CMD`: a
    /// third one and the virtio-9p share, [`crate::commands::in_guest`]).
    pub extra_args: Vec<String>,
}

/// The kernel command line. No `quiet` (it hides KTAP, printed at
/// KERN_INFO) and no `kunit_shutdown` (it powers off before module suites).
/// `no_timer_check`, as KVM guests set it for themselves (kvmclock): under
/// TCG on a loaded host, check_timer()'s wait for the first timer
/// interrupt can end first, and the boot panicked "IO-APIC + timer
/// doesn't work!" at 0.04 s by chance.
pub fn kernel_cmdline(cfg: &GuestConfig) -> Result<String> {
    let mut p: Vec<String> = [
        "console=ttyS0",
        "loglevel=7",
        "printk.devkmsg=on",
        "panic=-1",
        "oops=panic",
        "no_timer_check",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    p.extend(
        cfg.kernel
            .kind
            .kernel_cmdline()
            .iter()
            .map(|s| s.to_string()),
    );
    // Before --append, so that a later memhp_default_state there wins.
    p.push(format!(
        "memhp_default_state={}",
        cfg.job.cxl_online.as_param()
    ));
    p.push(param::word(param::MODE, &cfg.job.mode.as_param()));
    if cfg.job.deadline_scale > 1 {
        p.push(param::word(
            param::DEADLINE_SCALE,
            &cfg.job.deadline_scale.to_string(),
        ));
    }
    if let Some(c) = cfg.topology.cxl_param() {
        // /init assembles one region per window, in this order (per device,
        // or interleaved over WAYS devices: `MIB:WAYS:GRANULARITY`).
        p.push(param::word(param::CXL, &c));
    }
    // A kernel without KUnit would hand kunit.* to /init as unknown.
    let no_filter = None;
    let kunit_filter = if cfg.kernel.kind.has_kunit() {
        &cfg.job.filter.kunit
    } else {
        &no_filter
    };
    for (f, name) in [
        (kunit_filter, param::KUNIT_FILTER),
        (&cfg.job.filter.user, param::FILTER),
        (&cfg.job.filter.skip, param::SKIP),
    ] {
        let Some(f) = f else { continue };
        if let Err(why) = crate::util::validate::check_filter(f) {
            bail!("--filter {}: {why}", crate::util::validate::shell_quote(f));
        }
        p.push(param::word(name, f));
    }
    if !cfg.job.kunit && cfg.kernel.kind.has_kunit() {
        // The module's suites run under `cargo xtask test`; demos and
        // benchmarks don't wait for them.
        p.push("kunit.enable=0".into());
    }
    p.extend(cfg.kernel.profile.kernel_cmdline());
    for a in &cfg.job.append {
        if let Err(why) = crate::util::validate::check_append(a) {
            bail!("--append {}: {why}", crate::util::validate::shell_quote(a));
        }
        p.push(a.clone());
    }
    let line = p.join(" ");
    if line.len() > crate::util::validate::KERNEL_CMDLINE_MAX {
        bail!(
            "--append/--filter: the kernel command line would be {} bytes, more than the {} x86 keeps (COMMAND_LINE_SIZE); the rest would be cut off",
            line.len(),
            crate::util::validate::KERNEL_CMDLINE_MAX
        );
    }
    Ok(line)
}

/// The QEMU command line (without the program name).
pub fn qemu_args(
    kernel: &Path,
    initrd: &Path,
    data_log: &Path,
    cfg: &GuestConfig,
) -> Result<Vec<String>> {
    let mut a: Vec<String> = vec![
        "-nodefaults".into(),
        "-no-user-config".into(),
        "-display".into(),
        "none".into(),
    ];
    a.extend(cfg.topology.qemu_args());
    a.push("-cpu".into());
    a.push(cfg.job.cpu_model.clone());
    a.push("-accel".into());
    a.push(match cfg.accel {
        Accel::Kvm => "kvm".into(),
        Accel::Tcg => "tcg,thread=multi".into(),
    });
    a.extend([
        "-serial".into(),
        "stdio".into(),
        "-serial".into(),
        format!("file:{}", data_log.display()),
        "-no-reboot".into(),
        "-kernel".into(),
        kernel.display().to_string(),
        "-initrd".into(),
        initrd.display().to_string(),
        "-append".into(),
        kernel_cmdline(cfg)?,
    ]);
    a.extend(cfg.extra_args.iter().cloned());
    Ok(a)
}

/// `program args...` quoted for a POSIX shell, as `qemu-cmd.txt` holds it.
pub fn qemu_cmd_line(program: &str, args: &[String]) -> String {
    crate::util::validate::shell_join(
        std::iter::once(program).chain(args.iter().map(String::as_str)),
    )
}

/// What came out of one boot.
#[derive(Debug)]
pub struct GuestRun {
    pub console_log: PathBuf,
    pub data_log: PathBuf,
    pub console: String,
    pub data: String,
    /// QEMU's exit status; `None` when it was killed.
    pub exit: Option<ExitStatus>,
    pub timed_out: bool,
    pub elapsed: Duration,
    pub qemu_stderr: String,
}

/// How many lines of a kernel report the live stream shows (the whole
/// report is in console.log and quoted in the summary).
const LIVE_REPORT_LINES: usize = 60;

/// Decides which console lines to show live when not `-v`.
pub struct Streamer {
    pub verbose: bool,
    /// Show lines that guest programs print (run and bench modes).
    pub show_userspace: bool,
    /// Print what is shown on stderr (`run -- CMD`: stdout is CMD's).
    pub to_stderr: bool,
    /// Unless verbose, show kernel reports only (`run -- CMD`).
    pub reports_only: bool,
    in_program: bool,
    /// Console lines seen so far.
    line_no: usize,
    /// Where the run is (insmod, which userspace test, ...).
    phases: Phases,
    /// The KUnit suite whose KTAP header came last and whose result did not.
    suite: Option<String>,
    /// Lines of the kernel report being shown, if one is open.
    report_lines: Option<usize>,
    /// Stack dumps of injected faults, whose `RIP:` is not a report.
    injected: console::InjectedDumps,
}

impl Streamer {
    pub fn new(verbose: bool, show_userspace: bool) -> Self {
        Streamer {
            verbose,
            show_userspace,
            to_stderr: false,
            reports_only: false,
            in_program: false,
            line_no: 0,
            phases: Phases::default(),
            suite: None,
            report_lines: None,
            injected: console::InjectedDumps::default(),
        }
    }

    /// Where the run is, for the headline of a kernel report.
    fn whereabouts(&self) -> String {
        match &self.suite {
            Some(s) => format!("KUnit suite {s}, {}", self.phases.current()),
            None => self.phases.current().to_string(),
        }
    }

    /// The line to print for a console line, if any. A kernel report
    /// ([`console::PATTERNS`]) gets a headline with where the run is, and
    /// is shown whole (up to `LIVE_REPORT_LINES` lines).
    pub fn filter(&mut self, raw: &str) -> Option<String> {
        let raw = raw.trim_end_matches(['\r', '\n']);
        self.line_no += 1;
        self.phases.observe(self.line_no, raw);
        let (ts, text) = crate::judge::printk::split_seconds(raw);
        let t = text.trim_start();
        if let Some(name) = t.strip_prefix("# Subtest: ") {
            if text.len() - t.len() == 4 {
                self.suite = Some(name.trim().to_string());
            }
        } else if (t.starts_with("ok ") || t.starts_with("not ok ")) && text.len() == t.len() {
            self.suite = None;
        }
        if let Some(kind) = console::ClassifyInjected::classify(&mut self.injected, text) {
            let continues = self.report_lines.is_some() && kind == CrashKind::Other;
            if !continues {
                self.report_lines = Some(0);
                let head = format!("  >>> kernel {kind} (during {}): {}", self.whereabouts(), t);
                if self.verbose {
                    return Some(format!("{head}\n{raw}"));
                }
                return Some(head);
            }
        }
        if let Some(n) = self.report_lines {
            if console::ends_report(text) || n >= LIVE_REPORT_LINES {
                self.report_lines = None;
            } else {
                self.report_lines = Some(n + 1);
            }
            if !self.verbose {
                return Some(format!("  {text}"));
            }
        }
        if self.reports_only && !self.verbose {
            return None;
        }
        let marker = Marker::find(text);
        match marker {
            Some(Marker::ProgStart { .. }) => self.in_program = true,
            Some(Marker::ProgEnd { .. }) => self.in_program = false,
            _ => {}
        }
        if self.verbose {
            return Some(raw.to_string());
        }
        if ts.is_none() {
            // Not a printk record: userspace output (or firmware noise).
            // TIERKIT-JSON records are for the harness (bench/*.json).
            let json = matches!(marker, Some(Marker::Json(_)));
            let show = self.in_program && self.show_userspace && !json;
            return show.then(|| format!("  {text}"));
        }
        if t.starts_with("Command line:") {
            // Printed again as "Kernel command line:".
            return None;
        }
        if let Some(m) = marker {
            return match m {
                Marker::Topo(topo) => Some(format!("  topology: {topo}")),
                Marker::Json(_) => None,
                _ => marker::locate(text).map(|m| format!("  {m}")),
            };
        }
        let ktap_result = t.starts_with("ok ") || t.starts_with("not ok ");
        // Kernel reports are handled above, by the table in console.rs.
        let interesting = [
            "ASSERTION FAILED",
            "EXPECTATION FAILED",
            "Call Trace:",
            "Dynamic Preempt",
            "tierkit",
            "kunit",
        ];
        if ktap_result || interesting.iter().any(|k| text.contains(k)) {
            return Some(format!("  {text}"));
        }
        None
    }
}

/// Boots the guest and waits for it to power off, to crash (`panic=-1` and
/// `-no-reboot` make QEMU exit) or to time out.
pub fn boot(
    kernel: &KernelBuild,
    initramfs: &Initramfs,
    cfg: &GuestConfig,
    run_dir: &Path,
    streamer: &mut Streamer,
) -> Result<GuestRun> {
    boot_with(
        "qemu-system-x86_64",
        kernel,
        initramfs,
        cfg,
        run_dir,
        streamer,
    )
}

/// [`boot`] with `qemu` as the QEMU program (a stand-in in the tests).
fn boot_with(
    qemu: &str,
    kernel: &KernelBuild,
    initramfs: &Initramfs,
    cfg: &GuestConfig,
    run_dir: &Path,
    streamer: &mut Streamer,
) -> Result<GuestRun> {
    let console_log = run_dir.join("console.log");
    let data_log = run_dir.join("data.log");
    let _ = fs::remove_file(&data_log);
    let args = qemu_args(&kernel.bzimage, &initramfs.path, &data_log, cfg)?;
    // A command a POSIX shell runs as is (`sh qemu-cmd.txt`).
    let shown = qemu_cmd_line(qemu, &args);
    fs::write(run_dir.join("qemu-cmd.txt"), format!("{shown}\n"))?;
    if util::verbose() {
        say!("$ {shown}");
    }
    let mut child = spawn_qemu(qemu, &args)?;
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if tx.send(String::from_utf8_lossy(&buf).into_owned()).is_err() {
                        break;
                    }
                }
            }
        }
    });

    let mut log = fs::File::create(&console_log)
        .with_context(|| format!("creating {}", console_log.display()))?;
    let mut console = String::new();
    let start = Instant::now();
    let deadline = start + cfg.job.timeout;
    let mut timed_out = false;
    let mut done_at: Option<Instant> = None;
    // A panic: the guest is over, whether or not QEMU exits by itself.
    let mut panic_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        // After TIERKIT-DONE the guest powers off; don't wait long for it.
        let mut limit = match done_at {
            Some(t) => deadline.min(t + Duration::from_secs(15)),
            None => deadline,
        };
        if let Some(t) = panic_at {
            limit = limit.min(t + console::fatal::AFTER_PANIC);
        }
        if now >= limit {
            if done_at.is_none() && panic_at.is_none() {
                timed_out = true;
            }
            break;
        }
        match rx.recv_timeout(limit - now) {
            Ok(line) => {
                let clean = line.replace('\r', "");
                log.write_all(clean.as_bytes())?;
                console.push_str(&clean);
                if !clean.ends_with('\n') {
                    console.push('\n');
                }
                if matches!(Marker::find(&clean), Some(Marker::Done { .. })) {
                    done_at = Some(Instant::now());
                }
                if panic_at.is_none()
                    && console::fatal::ends_boot(crate::judge::printk::split_seconds(&clean).1)
                {
                    panic_at = Some(Instant::now());
                }
                if let Some(s) = streamer.filter(&clean) {
                    if streamer.to_stderr {
                        eprintln!("{s}");
                    } else {
                        println!("{s}");
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let exit = stop_qemu(&mut child, timed_out, done_at, panic_at, cfg)?;
    log.flush()?;
    let qemu_stderr = err_thread.join().unwrap_or_default();
    let _ = fs::write(run_dir.join("qemu-stderr.log"), &qemu_stderr);
    let data = fs::read(&data_log)
        .map(|b| String::from_utf8_lossy(&b).replace('\r', ""))
        .unwrap_or_default();
    if console.trim().is_empty() && !timed_out {
        bail!(
            "QEMU refused the {} topology or failed to start (exit: {}):\n{}\ncommand: {}",
            cfg.topology.kind,
            exit.map(|e| e.to_string())
                .unwrap_or_else(|| "killed".into()),
            qemu_stderr.trim(),
            run_dir.join("qemu-cmd.txt").display()
        );
    }
    Ok(GuestRun {
        console_log,
        data_log,
        console,
        data,
        exit,
        timed_out,
        elapsed: start.elapsed(),
        qemu_stderr,
    })
}

/// Starts QEMU with `args`, its stdout and stderr piped; it dies with xtask.
fn spawn_qemu(qemu: &str, args: &[String]) -> Result<std::process::Child> {
    let mut cmd = Command::new(qemu);
    // SAFETY: the closure runs in the forked child before exec and only
    // calls prctl(2), which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            // QEMU dies with xtask (Ctrl-C, a CI job timeout, SIGTERM) instead
            // of living on as an orphaned multi-GiB guest.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("could not start {qemu} (cargo xtask setup installs it)"))
}

/// Ends QEMU after the console loop: killed when the guest timed out, did
/// not power off within 15 s of TIERKIT-DONE or went on
/// [`console::fatal::AFTER_PANIC`] after a kernel panic, else waited for (10 s at
/// most, then killed). Its exit status; `None` when it was killed.
fn stop_qemu(
    child: &mut std::process::Child,
    timed_out: bool,
    done_at: Option<Instant>,
    panic_at: Option<Instant>,
    cfg: &GuestConfig,
) -> Result<Option<ExitStatus>> {
    let panicked = panic_at.is_some_and(|t| t.elapsed() >= console::fatal::AFTER_PANIC);
    if panicked && child.try_wait()?.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        say!(
            "guest still running {} s after a kernel panic: killed QEMU",
            console::fatal::AFTER_PANIC.as_secs()
        );
        return Ok(None);
    }
    Ok(
        if timed_out || done_at.is_some_and(|t| t.elapsed() >= Duration::from_secs(15)) {
            let _ = child.kill();
            let _ = child.wait();
            if timed_out {
                say!(
                    "guest timed out after {} s: killed QEMU (--timeout SECS to change)",
                    cfg.job.timeout.as_secs()
                );
            } else {
                say!("guest did not power off after TIERKIT-DONE: killed QEMU");
            }
            None
        } else {
            // QEMU closed its stdout: it is exiting.
            let wait_until = Instant::now() + Duration::from_secs(10);
            loop {
                if let Some(st) = child.try_wait()? {
                    break Some(st);
                }
                if Instant::now() >= wait_until {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        },
    )
}

#[cfg(test)]
mod tests;
