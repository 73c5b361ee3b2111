//! Reliability helpers for `tk-test-faults`, `tk-test-lifecycle` and the
//! fuzzer: the kernel's fault injection (per-task `fail-nth`, the
//! `failslab` and `fail_page_alloc` knobs in debugfs), `/dev/kmsg`,
//! per-node free memory and slab counters, and loading and unloading a
//! module with `finit_module(2)` / `delete_module(2)`.
//!
//! Fault injection (Linux 7.3 `Documentation/fault-injection/`,
//! `lib/fault-inject.c`, `mm/failslab.c`, `mm/fail_page_alloc.c`): writing N
//! to `/proc/thread-self/fail-nth` makes the Nth `should_fail()` call of
//! this task fail, whatever the probability knobs say; reading the file
//! back gives 0 if that happened and the remaining count otherwise. Which
//! calls count is up to each fault type's own filter, so [`FaultKnobs`] sets
//! `ignore-gfp-wait=N` on both (sleeping allocations may fail) and
//! `min-order=0` on `fail_page_alloc` (order-0 pages may fail), and puts the
//! old values back when dropped. With `probability` 0 (the default) nothing
//! fails outside an armed `fail-nth`.
//!
//! Here: fault injection ([`FailNth`], [`FaultKnobs`]); `/dev/kmsg` and the
//! console level in `kmsg.rs`, memory and tierkit's holdings in `mem.rs`,
//! modules in `modules.rs`.

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

mod kmsg;
mod mem;
mod modules;
pub mod sweep;

use self::sweep::run;
use crate::abi::ready::topology_and_weights;
use crate::harness::report::Report;
pub use kmsg::*;
pub use mem::*;
pub use modules::*;
use std::process::ExitCode;

#[cfg(test)]
mod tests;

/// Where debugfs keeps the fault-injection knobs.
pub const FAILSLAB_DIR: &str = "/sys/kernel/debug/failslab";
pub const FAIL_PAGE_ALLOC_DIR: &str = "/sys/kernel/debug/fail_page_alloc";

fn cvt(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

// ---------------------------------------------------------------------------
// fail-nth
// ---------------------------------------------------------------------------

/// This thread's `/proc/thread-self/fail-nth`.
///
/// Between [`FailNth::arm`] and [`FailNth::disarm`] every allocation the
/// thread makes counts, including those of page faults on its own memory
/// and of any syscall: the code in between must be the one call under
/// test, on memory that is already faulted in. [`FailNth::run`] does that.
#[derive(Debug)]
pub struct FailNth {
    fd: OwnedFd,
}

/// The outcome of one armed call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Armed<T> {
    pub value: T,
    /// `fail-nth` read 0 afterwards: the Nth fault point was reached and
    /// that allocation failed.
    pub injected: bool,
}

impl FailNth {
    /// Opens the calling thread's file (fails without
    /// `CONFIG_FAULT_INJECTION`).
    pub fn open() -> io::Result<FailNth> {
        // SAFETY: a NUL-terminated path; the fd is owned below.
        let fd = unsafe {
            libc::open(
                c"/proc/thread-self/fail-nth".as_ptr(),
                libc::O_RDWR | libc::O_CLOEXEC,
            )
        };
        cvt(fd as libc::c_long)?;
        // SAFETY: a fresh fd we own.
        Ok(FailNth {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    fn write_num(&self, n: u32) -> io::Result<()> {
        // Formatted on the stack: no allocation between arm and the call.
        let mut buf = [0u8; 12];
        let mut i = buf.len();
        let mut v = n;
        loop {
            i -= 1;
            buf[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        let s = &buf[i..];
        // SAFETY: writes `s.len()` bytes from a live buffer.
        let r = unsafe { libc::pwrite(self.fd.as_raw_fd(), s.as_ptr().cast(), s.len(), 0) };
        cvt(r as libc::c_long).map(|_| ())
    }

    /// The raw fd, for a signal handler that reads [`remaining`](Self::remaining)
    /// by hand.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Makes the `n`th fault point from now fail (`n` >= 1).
    pub fn arm(&self, n: u32) -> io::Result<()> {
        self.write_num(n)
    }

    /// Reads the remaining count: 0 iff the armed fault was injected.
    pub fn remaining(&self) -> io::Result<u32> {
        let mut buf = [0u8; 16];
        // SAFETY: reads at most `buf.len()` bytes into a live buffer.
        let r = unsafe { libc::pread(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        let n = cvt(r as libc::c_long)? as usize;
        let mut v: u32 = 0;
        for &b in &buf[..n] {
            if b.is_ascii_digit() {
                v = v.saturating_mul(10).saturating_add(u32::from(b - b'0'));
            }
        }
        Ok(v)
    }

    /// Nothing fails any more.
    pub fn disarm(&self) -> io::Result<()> {
        self.write_num(0)
    }

    /// Arms `n`, runs `op`, reads whether the fault was injected, disarms.
    /// `op` should be a single syscall on prepared, faulted-in memory.
    pub fn run<T>(&self, n: u32, op: impl FnOnce() -> T) -> io::Result<Armed<T>> {
        self.arm(n)?;
        let value = op();
        let rem = self.remaining();
        let dis = self.disarm();
        let rem = rem?;
        dis?;
        Ok(Armed {
            value,
            injected: rem == 0,
        })
    }
}

// ---------------------------------------------------------------------------
// failslab / fail_page_alloc knobs
// ---------------------------------------------------------------------------

/// Knobs of `failslab` and `fail_page_alloc` set for systematic injection,
/// restored (value by value, as read before) when dropped or on
/// [`FaultKnobs::restore`].
#[derive(Debug)]
pub struct FaultKnobs {
    saved: Vec<(PathBuf, String)>,
}

impl FaultKnobs {
    /// Why [`FaultKnobs::systematic`] cannot work on this kernel: a
    /// directory of debugfs's fault-injection knobs is missing
    /// (`CONFIG_FAILSLAB`, `CONFIG_FAIL_PAGE_ALLOC` off, as on Debian's).
    pub fn missing() -> Option<String> {
        crate::linux::kernel::ensure_debugfs();
        [FAILSLAB_DIR, FAIL_PAGE_ALLOC_DIR]
            .into_iter()
            .find(|d| !Path::new(d).is_dir())
            .map(|d| format!("no {d} (this kernel has no such fault injection)"))
    }

    /// Sets `ignore-gfp-wait=N` on both (GFP_KERNEL allocations may fail),
    /// `min-order=0` and `ignore-gfp-highmem=N` on `fail_page_alloc`, and
    /// `verbose` on both: 0 prints nothing, 1 one `FAULT_INJECTION: forcing
    /// a failure.` line and a `name ...` line per injected fault, 2 also a
    /// stack dump (`dump_stack()`, no `WARNING:`/`BUG:` line). Fails if a
    /// knob is missing (no `CONFIG_FAILSLAB`/`CONFIG_FAIL_PAGE_ALLOC`/
    /// `CONFIG_FAULT_INJECTION_DEBUG_FS`) or if a `probability` is not 0
    /// (then faults would be injected into every task, not only ours).
    pub fn systematic(verbose: u32) -> Result<FaultKnobs> {
        crate::linux::kernel::ensure_debugfs();
        let mut k = FaultKnobs { saved: Vec::new() };
        for dir in [FAILSLAB_DIR, FAIL_PAGE_ALLOC_DIR] {
            let p = Path::new(dir).join("probability");
            let prob = fs::read_to_string(&p).with_context(|| {
                format!("reading {} (fault injection in debugfs?)", p.display())
            })?;
            if prob.trim() != "0" {
                bail!(
                    "{} is {}: faults would hit every task; set it to 0 first",
                    p.display(),
                    prob.trim()
                );
            }
        }
        let v = verbose.to_string();
        let settings: [(&str, &str, &str); 6] = [
            (FAILSLAB_DIR, "ignore-gfp-wait", "N"),
            (FAILSLAB_DIR, "verbose", &v),
            (FAIL_PAGE_ALLOC_DIR, "ignore-gfp-wait", "N"),
            (FAIL_PAGE_ALLOC_DIR, "ignore-gfp-highmem", "N"),
            (FAIL_PAGE_ALLOC_DIR, "min-order", "0"),
            (FAIL_PAGE_ALLOC_DIR, "verbose", &v),
        ];
        for (dir, name, val) in settings {
            k.set(&Path::new(dir).join(name), val)?;
        }
        Ok(k)
    }

    /// Sets one knob, remembering its old value the first time.
    pub fn set(&mut self, path: &Path, value: &str) -> Result<()> {
        if !self.saved.iter().any(|(p, _)| p == path) {
            let old =
                fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            self.saved
                .push((path.to_path_buf(), old.trim().to_string()));
        }
        fs::write(path, value).with_context(|| format!("writing {value} to {}", path.display()))
    }

    /// Changes `verbose` of both fault types.
    pub fn set_verbose(&mut self, verbose: u32) -> Result<()> {
        let v = verbose.to_string();
        self.set(&Path::new(FAILSLAB_DIR).join("verbose"), &v)?;
        self.set(&Path::new(FAIL_PAGE_ALLOC_DIR).join("verbose"), &v)
    }

    /// Writes every saved value back (in reverse order) and checks it.
    pub fn restore(&mut self) -> Result<()> {
        let mut errs = Vec::new();
        while let Some((p, old)) = self.saved.pop() {
            // debugfs bools read back as Y/N and accept the same.
            if let Err(e) = fs::write(&p, &old) {
                errs.push(format!("writing {old} to {}: {e}", p.display()));
                continue;
            }
            match fs::read_to_string(&p) {
                Ok(now) if now.trim() == old => {}
                Ok(now) => errs.push(format!(
                    "{} reads {} after restoring {old}",
                    p.display(),
                    now.trim()
                )),
                Err(e) => errs.push(format!("reading {}: {e}", p.display())),
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            bail!("{}", errs.join("; "))
        }
    }

    /// The saved `(path, old value)` pairs.
    pub fn saved(&self) -> &[(PathBuf, String)] {
        &self.saved
    }
}

impl Drop for FaultKnobs {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("# restoring fault-injection knobs: {e:#}");
        }
    }
}

const BIN: &str = "tk-test-faults";

/// `tk-test-faults`'s `main`.
pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let Some((topo, wd)) = topology_and_weights(&mut r) else {
        return r.finish();
    };
    run(&mut r, &topo, wd);
    r.finish()
}
