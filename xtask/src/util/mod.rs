//! Small shared helpers: paths, commands, hashing, atomic files, progress.

pub mod elf;
pub mod pyenv;
pub mod setup;
pub mod validate;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use std::collections::VecDeque;
use std::ffi::OsStr;
use std::fs;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static VERBOSE: AtomicBool = AtomicBool::new(false);

pub fn set_verbose(v: bool) {
    VERBOSE.store(v, Ordering::Relaxed);
}

pub fn verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed)
}

/// `[xtask] ...` status line on stderr.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        eprintln!("[xtask] {}", format!($($arg)*));
    }};
}

/// The repository root (the workspace containing `xtask/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask has a parent")
        .to_path_buf()
}

/// Cargo's target directory for the workspace.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) if !d.is_empty() => {
            let p = PathBuf::from(d);
            if p.is_absolute() {
                p
            } else {
                repo_root().join(p)
            }
        }
        _ => repo_root().join("target"),
    }
}

/// `target/tierkit`: everything xtask writes for a run (logs, initramfs, results).
pub fn out_dir() -> PathBuf {
    target_dir().join("tierkit")
}

/// The cache outside the repository: `$TIERKIT_CACHE` or `~/.cache/tierkit`.
pub fn cache_dir() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("TIERKIT_CACHE") {
        if !d.is_empty() {
            return Ok(PathBuf::from(d));
        }
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        if !d.is_empty() {
            return Ok(PathBuf::from(d).join("tierkit"));
        }
    }
    let home = std::env::var_os("HOME").context("neither $TIERKIT_CACHE nor $HOME is set")?;
    Ok(PathBuf::from(home).join(".cache").join("tierkit"))
}

pub fn sha256_hex(data: &[u8]) -> String {
    let d = Sha256::digest(data);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `data` to `path` through a temporary file and a rename, so that
/// `path` never holds a partial file.
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    let dir = path.parent().context("path has no parent")?;
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name().and_then(OsStr::to_str).unwrap_or("file"),
        std::process::id()
    ));
    fs::write(&tmp, data).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    Ok(())
}

/// An exclusive advisory lock held for the life of the value.
pub struct Lock(#[allow(dead_code)] fs::File);

/// Takes the `flock(2)` lock `path` (made if missing) on `what`, waiting
/// with a line that names the process holding it: the holder writes its
/// PID into the file. Runs from several checkouts share the cache this way
/// (`~/.cache/tierkit`: the kernel build, its source, the guest tools, ...).
pub fn lock(path: &Path, what: &str) -> Result<Lock> {
    use std::io::{Read, Seek, Write};
    if let Some(d) = path.parent() {
        fs::create_dir_all(d)?;
    }
    let mut f = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .with_context(|| format!("opening lock {}", path.display()))?;
    match f.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = f.read_to_string(&mut holder);
            let pid = match holder.trim() {
                "" => String::new(),
                p => format!(" (pid {p})"),
            };
            say!("waiting for {what} of another run{pid}: {}", path.display());
            f.lock()
                .with_context(|| format!("locking {}", path.display()))?;
        }
        Err(fs::TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("locking {}", path.display()))
        }
    }
    // Who holds it, for the next one's message.
    let _ = f.set_len(0);
    let _ = f.rewind();
    let _ = write!(f, "{}", std::process::id());
    Ok(Lock(f))
}

/// Renders a command for messages: `make -C /x O=/y`.
pub fn show_cmd(cmd: &Command) -> String {
    let mut s = String::new();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            if k == "PATH" {
                continue;
            }
            s.push_str(&format!("{}={} ", k.to_string_lossy(), v.to_string_lossy()));
        }
    }
    s.push_str(&cmd.get_program().to_string_lossy());
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&crate::util::validate::shell_quote(&a.to_string_lossy()));
    }
    s
}

/// Runs a command to completion, capturing stdout and stderr together, and
/// fails with the command line and the last 40 lines of its output.
pub fn run_captured(cmd: &mut Command) -> Result<String> {
    run_captured_tail(cmd, 40)
}

/// [`run_captured`], showing the last `tail` lines of output on failure.
pub fn run_captured_tail(cmd: &mut Command, tail: usize) -> Result<String> {
    let shown = show_cmd(cmd);
    if verbose() {
        say!("$ {shown}");
    }
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("could not start `{shown}`"))?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        bail!(
            "`{shown}` failed ({}):\n{}",
            out.status,
            tail_lines(&text, tail)
        );
    }
    Ok(text)
}

/// Runs a command, returning its stdout as a trimmed string ("" on failure).
pub fn cmd_stdout(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

pub fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(n);
    lines[start..].join("\n")
}

/// Is `name` an executable on `$PATH` (or an existing path)?
pub fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        let p = dir.join(name);
        if let Ok(md) = fs::metadata(&p) {
            use std::os::unix::fs::PermissionsExt;
            if md.is_file() && md.permissions().mode() & 0o111 != 0 {
                return Some(p);
            }
        }
    }
    None
}

/// Prepends the directory of the LLVM toolchain (Debian's `/usr/lib/llvm-19/bin`)
/// to `$PATH` of this process, so that `LLVM=1` finds `clang`, `ld.lld`, ...
/// Every kernel and module `make` inherits it.
pub fn setup_llvm_path() {
    let Some(dir) = llvm_dir() else { return };
    let cur = std::env::var_os("PATH").unwrap_or_default();
    let mut parts: Vec<PathBuf> = std::env::split_paths(&cur).collect();
    if parts.first() == Some(&dir) {
        return;
    }
    parts.retain(|p| p != &dir);
    parts.insert(0, dir);
    let joined = std::env::join_paths(parts).expect("PATH entries contain no ':'");
    // SAFETY (of the environment): called at startup, before any thread is spawned.
    unsafe { std::env::set_var("PATH", joined) };
}

/// Debian's versioned LLVM directory, if installed.
pub fn llvm_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("TIERKIT_LLVM_DIR") {
        return Some(PathBuf::from(d));
    }
    for v in ["19", "20", "21", "18"] {
        let d = PathBuf::from(format!("/usr/lib/llvm-{v}/bin"));
        if d.join("clang").is_file() && d.join("ld.lld").is_file() {
            return Some(d);
        }
    }
    None
}

pub fn nproc() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

pub fn is_tty() -> bool {
    std::io::stderr().is_terminal()
}

/// How long a step may run before [`say_if_slow`] says what it is.
pub const SLOW_STEP: Duration = Duration::from_secs(3);

/// Says `what` (what is being built, and why it takes time) if the step
/// is still running after [`SLOW_STEP`]: a warm, cached step stays quiet,
/// a cold one is not silent. The step ends when the guard is dropped.
pub fn say_if_slow(what: String) -> SlowStep {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(SLOW_STEP) {
            say!("{what}");
        }
    });
    SlowStep { _done: tx }
}

/// The guard of [`say_if_slow`]: dropping it ends the step.
pub struct SlowStep {
    _done: std::sync::mpsc::Sender<()>,
}

pub fn spinner(msg: &str) -> indicatif::ProgressBar {
    let pb = indicatif::ProgressBar::new_spinner();
    if !is_tty() {
        pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        say!("{msg}");
    }
    pb.set_style(
        indicatif::ProgressStyle::with_template("{spinner:.green} [{elapsed_precise}] {msg}")
            .expect("valid template"),
    );
    pb.set_message(msg.to_string());
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}

/// Runs a long command with stdout+stderr going to `log`, calling `on_line`
/// for every line (to drive a progress bar). Fails with the command, the tail
/// of its output and the log path.
pub fn run_logged(mut cmd: Command, log: &Path, mut on_line: impl FnMut(&str)) -> Result<()> {
    let shown = show_cmd(&cmd);
    let mut logf = fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    writeln!(logf, "$ {shown}")?;
    let (reader, writer) = std::io::pipe().context("creating a pipe")?;
    cmd.stdin(Stdio::null())
        .stdout(writer.try_clone()?)
        .stderr(writer);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("could not start `{shown}`"))?;
    // Drop our copies of the write end, or the read below never sees EOF.
    drop(cmd);
    let mut tail = VecDeque::new();
    let mut r = BufReader::new(reader);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = r.read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        logf.write_all(&buf)?;
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim_end();
        on_line(line);
        if tail.len() == 60 {
            tail.pop_front();
        }
        tail.push_back(line.to_string());
    }
    let status = child.wait()?;
    if !status.success() {
        let t: Vec<&str> = tail.iter().map(|s| s.as_str()).collect();
        bail!(
            "`{shown}` failed ({status}). Last lines:\n{}\nfull log: {}",
            t[t.len().saturating_sub(40)..].join("\n"),
            log.display()
        );
    }
    Ok(())
}

/// Formats a duration like `1m23s` or `4.2s`.
pub fn fmt_dur(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 60.0 {
        format!("{}m{:02}s", (s / 60.0) as u64, (s as u64) % 60)
    } else {
        format!("{s:.1}s")
    }
}

/// A stopwatch for the per-stage timings printed at the end.
pub struct Timer(Instant);

impl Timer {
    pub fn start() -> Self {
        Timer(Instant::now())
    }
    pub fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }
}

/// Parses a guest memory size given in whole GiB: `4`, `4G`, `4GiB`, `4g`.
pub fn parse_gib(s: &str) -> std::result::Result<u32, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let num = lower
        .strip_suffix("gib")
        .or_else(|| lower.strip_suffix("gb"))
        .or_else(|| lower.strip_suffix('g'))
        .unwrap_or(&lower);
    let digits = |x: &str| !x.is_empty() && x.chars().all(|c| c.is_ascii_digit());
    match num.parse::<u32>() {
        Ok(0) => Err(format!("`{s}`: size must be at least 1 GiB")),
        Ok(n) => Ok(n),
        Err(_) if num.strip_prefix('-').is_some_and(digits) => {
            Err(format!("`{s}`: a size cannot be negative: give whole GiB, e.g. 4G"))
        }
        Err(_) if digits(num) => Err(format!(
            "`{s}`: more than {} GiB, more than any host has",
            u32::MAX
        )),
        Err(_) => Err(format!(
            "`{s}`: guest memory sizes are whole GiB (e.g. 4G), because nodes hold 1 GiB gigantic pages"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second taker waits for the first, and the lock file names the
    /// holder's PID for the waiting message.
    #[test]
    fn a_lock_waits_for_its_holder_and_names_it() {
        let p = std::env::temp_dir().join(format!("xtask-lock-{}", std::process::id()));
        let held = lock(&p, "the test").unwrap();
        assert_eq!(
            fs::read_to_string(&p).unwrap(),
            std::process::id().to_string()
        );
        let (tx, rx) = std::sync::mpsc::channel();
        let p2 = p.clone();
        let t = std::thread::spawn(move || {
            let _second = lock(&p2, "the test").unwrap();
            tx.send(()).unwrap();
        });
        assert!(rx
            .recv_timeout(std::time::Duration::from_millis(300))
            .is_err());
        drop(held);
        rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        t.join().unwrap();
        fs::remove_file(&p).unwrap();
    }

    #[test]
    fn gib_sizes() {
        assert_eq!(parse_gib("4"), Ok(4));
        assert_eq!(parse_gib("4G"), Ok(4));
        assert_eq!(parse_gib("3GiB"), Ok(3));
        assert_eq!(parse_gib("16g"), Ok(16));
        assert!(parse_gib("512M").is_err());
        assert!(parse_gib("0G").is_err());
        assert!(parse_gib("1.5G").is_err());
    }

    #[test]
    fn sha() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}

/// `MemAvailable` of the host's `/proc/meminfo`, in whole GiB.
pub fn host_mem_available_gib() -> Option<u64> {
    parse_mem_available_gib(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// The `MemAvailable:  N kB` line of a `/proc/meminfo` text, in whole GiB.
pub fn parse_mem_available_gib(meminfo: &str) -> Option<u64> {
    crate::util::validate::parse_meminfo_gib(meminfo, "MemAvailable")
}

#[cfg(test)]
mod meminfo_tests {
    #[test]
    fn mem_available() {
        let t = "MemTotal:       24558172 kB\nMemFree:  1 kB\nMemAvailable:   12582912 kB\n";
        assert_eq!(super::parse_mem_available_gib(t), Some(12));
        assert_eq!(super::parse_mem_available_gib("MemFree: 1 kB\n"), None);
    }
}
