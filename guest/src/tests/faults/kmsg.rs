//! `/dev/kmsg` (what the kernel logged since a point, injected faults and
//! crash lines in it) and the console log level.

use super::*;

/// A reader of `/dev/kmsg` that starts at the end of the log: what the
/// kernel prints from now on, record by record.
#[derive(Debug)]
pub struct Kmsg {
    pub(super) fd: OwnedFd,
}

impl Kmsg {
    pub fn open_at_end() -> io::Result<Kmsg> {
        // SAFETY: NUL-terminated path; the fd is owned below.
        let fd = unsafe {
            libc::open(
                c"/dev/kmsg".as_ptr(),
                libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        cvt(fd as libc::c_long)?;
        // SAFETY: a fresh fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: plain lseek on our fd.
        cvt(unsafe { libc::lseek(fd.as_raw_fd(), 0, libc::SEEK_END) } as libc::c_long)?;
        Ok(Kmsg { fd })
    }

    /// Every record printed since the last call, message text only (the
    /// `prio,seq,ts,flags;` header and the `KEY=value` dictionary lines
    /// removed). Records lost to a ring-buffer overrun are skipped, and
    /// counted as one `<kmsg: records lost>` entry.
    pub fn drain(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 8192];
        loop {
            // SAFETY: reads into a live buffer of `buf.len()` bytes.
            let r = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if r < 0 {
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::EPIPE) => {
                        out.push("<kmsg: records lost>".to_string());
                        continue;
                    }
                    Some(libc::EINTR) => continue,
                    _ => break,
                }
            }
            if r == 0 {
                break;
            }
            let rec = String::from_utf8_lossy(&buf[..r as usize]);
            let first = rec.lines().next().unwrap_or("");
            let msg = first.split_once(';').map_or(first, |(_, m)| m);
            out.push(msg.to_string());
        }
        out
    }
}

/// What `fail_dump()` printed in `lines`: the `name ...` line that follows
/// each `FAULT_INJECTION: forcing a failure.` (verbose >= 1), as
/// `(fault type, index of its line)`.
pub fn injected_faults(lines: &[String]) -> Vec<(String, usize)> {
    let mut v = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.contains("FAULT_INJECTION: forcing a failure") {
            // One record with a newline (which /dev/kmsg escapes as
            // `\x0a`), or two records.
            let name_line = l
                .replace("\\x0a", "\n")
                .split('\n')
                .nth(1)
                .map(str::to_string)
                .or_else(|| lines.get(i + 1).cloned())
                .unwrap_or_default();
            let kind = name_line
                .trim()
                .strip_prefix("name ")
                .and_then(|s| s.split(',').next())
                .unwrap_or("?")
                .to_string();
            v.push((kind, i));
        }
    }
    v
}

/// Lines of `lines` that the harness (xtask/src/judge/console.rs `PATTERNS`)
/// would count as a kernel crash report, or that look like one, except
/// the `RIP:` lines of a stack dump printed because a fault was injected
/// (see [`InjectedDumps`]): `fail_dump()` with `verbose=2` and the
/// `page allocation failure` warning after an injected page allocation
/// failure print a plain `dump_stack()`, whose user-mode registers
/// (`RIP: 0033:...`) are not a report. Every other marker counts wherever
/// it stands.
pub fn crash_lines(lines: &[String]) -> Vec<String> {
    let mut dumps = InjectedDumps::default();
    lines
        .iter()
        .filter(|l| {
            let in_dump = dumps.observe(l);
            let t = l.trim_start();
            if t.starts_with("RIP: ") {
                return !in_dump;
            }
            t.starts_with("BUG: ")
                || t.contains(": BUG: ")
                || t.starts_with("kernel BUG at ")
                || t.starts_with("UBSAN: ")
                || t.starts_with("Oops")
                || t.contains("general protection fault")
                || t.starts_with("Unable to handle kernel")
                || t.starts_with("WARNING: ")
                || t.starts_with("Kernel panic")
                || t.starts_with("kunit module: ")
        })
        .cloned()
        .collect()
}

pub use tierkit_protocol::kmsg::InjectedDumps;

/// The message KUnit's module notifier prints when an allocation of its
/// suite filter fails (lib/kunit/test.c `kunit_module_init`).
pub const KUNIT_FILTER_ENOMEM: &str = "kunit module: error filtering suites: -12";

// ---------------------------------------------------------------------------
// Console log level
// ---------------------------------------------------------------------------

/// `/proc/sys/kernel/printk`: its first field is the console log level.
pub const PRINTK_PATH: &str = "/proc/sys/kernel/printk";

/// Lowers the console log level (the first field of
/// `/proc/sys/kernel/printk`) and puts the old one back when dropped.
/// Messages below the level still go to the log buffer and `/dev/kmsg`;
/// only the serial console does not print them.
#[derive(Debug)]
pub struct ConsoleLevel {
    pub(super) old: Option<String>,
}

impl ConsoleLevel {
    pub fn set(level: u32) -> io::Result<ConsoleLevel> {
        let cur = fs::read_to_string(PRINTK_PATH)?;
        let old = cur.split_whitespace().next().unwrap_or("7").to_string();
        fs::write(PRINTK_PATH, level.to_string())?;
        Ok(ConsoleLevel { old: Some(old) })
    }

    /// Restores now; returns the level written back.
    pub fn restore(&mut self) -> io::Result<Option<String>> {
        match self.old.take() {
            Some(o) => {
                fs::write(PRINTK_PATH, &o)?;
                Ok(Some(o))
            }
            None => Ok(None),
        }
    }
}

impl Drop for ConsoleLevel {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("# restoring {PRINTK_PATH}: {e}");
        }
    }
}
