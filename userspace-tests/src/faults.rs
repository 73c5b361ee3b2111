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

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

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
    /// Sets `ignore-gfp-wait=N` on both (GFP_KERNEL allocations may fail),
    /// `min-order=0` and `ignore-gfp-highmem=N` on `fail_page_alloc`, and
    /// `verbose` on both: 0 prints nothing, 1 one `FAULT_INJECTION: forcing
    /// a failure.` line and a `name ...` line per injected fault, 2 also a
    /// stack dump (`dump_stack()`, no `WARNING:`/`BUG:` line). Fails if a
    /// knob is missing (no `CONFIG_FAILSLAB`/`CONFIG_FAIL_PAGE_ALLOC`/
    /// `CONFIG_FAULT_INJECTION_DEBUG_FS`) or if a `probability` is not 0
    /// (then faults would be injected into every task, not only ours).
    /// Why [`FaultKnobs::systematic`] cannot work on this kernel: a
    /// directory of debugfs's fault-injection knobs is missing
    /// (`CONFIG_FAILSLAB`, `CONFIG_FAIL_PAGE_ALLOC` off, as on Debian's).
    pub fn missing() -> Option<String> {
        crate::ensure_debugfs();
        [FAILSLAB_DIR, FAIL_PAGE_ALLOC_DIR]
            .into_iter()
            .find(|d| !Path::new(d).is_dir())
            .map(|d| format!("no {d} (this kernel has no such fault injection)"))
    }

    pub fn systematic(verbose: u32) -> Result<FaultKnobs> {
        crate::ensure_debugfs();
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

// ---------------------------------------------------------------------------
// /dev/kmsg
// ---------------------------------------------------------------------------

/// A reader of `/dev/kmsg` that starts at the end of the log: what the
/// kernel prints from now on, record by record.
#[derive(Debug)]
pub struct Kmsg {
    fd: OwnedFd,
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

/// Lines of `lines` that the harness (xtask/src/console.rs `PATTERNS`)
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

pub use tierkit_core::kmsg::InjectedDumps;

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
    old: Option<String>,
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

// ---------------------------------------------------------------------------
// Memory accounting
// ---------------------------------------------------------------------------

/// Free memory per node and the slab counters, at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemSnapshot {
    /// node -> free pages: the buddy allocator's (`pages free` of each
    /// zone in /proc/zoneinfo, what MemFree shows) plus the pages parked
    /// on the per-CPU lists (`count:` of each zone's pagesets), which
    /// MemFree does not count but which are free all the same. Without
    /// the second part, freeing a few thousand pages may not show in
    /// MemFree until the lists drain.
    pub free_pages: BTreeMap<u32, u64>,
    /// node -> MemFree (kB) of `/sys/devices/system/node/nodeN/meminfo`.
    pub memfree_kb: BTreeMap<u32, u64>,
    /// /proc/meminfo `Slab:` and `SUnreclaim:` (kB).
    pub slab_kb: u64,
    pub sunreclaim_kb: u64,
    /// cache -> (active objects, objects) of /proc/slabinfo (empty where
    /// it cannot be read). Objects in KASAN's quarantine count as active.
    pub slab_objs: BTreeMap<String, (u64, u64)>,
}

/// Where SLUB lists its caches, one directory each (aliases of merged
/// caches are symlinks to them).
pub const SLAB_SYSFS: &str = "/sys/kernel/slab";

/// Gives back what the slab caches hold for objects already freed: writes
/// `1` to `/sys/kernel/slab/<cache>/shrink` of every cache, which calls
/// `kmem_cache_shrink()` (mm/slab_common.c): under generic KASAN that
/// first takes the cache's objects out of the quarantine
/// (`kasan_cache_shrink()` -> `kasan_quarantine_remove_cache()`,
/// mm/kasan/generic.c, quarantine.c) and frees them, then releases the
/// cache's empty slabs to the page allocator. Without it, KASAN's
/// quarantine (up to 1/32 of RAM) keeps every freed object's slab pages
/// for a while, and `SUnreclaim` grows and free pages shrink by megabytes
/// per step although nothing leaked; the kmemleak objects of freed
/// allocations go the same way after their RCU grace period. On a kernel
/// without KASAN only the empty slabs are released. Objects still
/// allocated are untouched, so a leak stays visible. Returns how many
/// caches were shrunk; caches that refuse are skipped (errors ignored:
/// the snapshot that follows tells what matters).
pub fn drain_slab() -> usize {
    let Ok(dir) = fs::read_dir(SLAB_SYSFS) else {
        return 0;
    };
    let mut n = 0;
    for e in dir.flatten() {
        // Aliases are symlinks to the real cache's directory.
        if e.file_type().map_or(true, |t| t.is_symlink()) {
            continue;
        }
        if fs::write(e.path().join("shrink"), "1").is_ok() {
            n += 1;
        }
    }
    n
}

/// [`drain_slab`] for one cache, by its name in /proc/slabinfo (a
/// directory or an alias symlink in [`SLAB_SYSFS`]); false if refused.
pub fn shrink_cache(name: &str) -> bool {
    !name.contains('/') && fs::write(Path::new(SLAB_SYSFS).join(name).join("shrink"), "1").is_ok()
}

/// Parses /proc/slabinfo (version 2.1) into cache -> (active objects,
/// objects).
pub fn parse_slabinfo(s: &str) -> BTreeMap<String, (u64, u64)> {
    s.lines()
        .filter(|l| !l.starts_with("slabinfo") && !l.starts_with('#'))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let name = f.next()?;
            let active = f.next()?.parse().ok()?;
            let num = f.next()?.parse().ok()?;
            Some((name.to_string(), (active, num)))
        })
        .collect()
}

/// Parses /proc/zoneinfo into node -> (free pages, pages on per-CPU lists).
pub fn parse_zoneinfo(s: &str) -> Result<BTreeMap<u32, (u64, u64)>> {
    let mut m: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    let mut node: Option<u32> = None;
    for l in s.lines() {
        let t = l.trim();
        if let Some(rest) = t.strip_prefix("Node ") {
            let n = rest
                .split(',')
                .next()
                .and_then(|x| x.trim().parse().ok())
                .with_context(|| format!("bad zoneinfo header {t:?}"))?;
            node = Some(n);
            m.entry(n).or_default();
        } else if let Some(rest) = t.strip_prefix("pages free") {
            let n = node.context("zoneinfo: `pages free` before a Node line")?;
            let v: u64 = rest
                .trim()
                .parse()
                .with_context(|| format!("bad zoneinfo line {t:?}"))?;
            m.get_mut(&n).expect("entry made at header").0 += v;
        } else if let Some(rest) = t.strip_prefix("count:") {
            let n = node.context("zoneinfo: `count:` before a Node line")?;
            let v: u64 = rest
                .trim()
                .parse()
                .with_context(|| format!("bad zoneinfo line {t:?}"))?;
            m.get_mut(&n).expect("entry made at header").1 += v;
        }
    }
    Ok(m)
}

/// A `Key:   123 kB` field of a meminfo file (`Node N Key:` lines too).
pub fn meminfo_kb(s: &str, key: &str) -> Option<u64> {
    s.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        let k = k.split_whitespace().last()?;
        if k != key {
            return None;
        }
        v.split_whitespace().next()?.parse().ok()
    })
}

impl MemSnapshot {
    pub fn take() -> Result<MemSnapshot> {
        let zi = fs::read_to_string("/proc/zoneinfo").context("reading /proc/zoneinfo")?;
        let zones = parse_zoneinfo(&zi)?;
        let mut snap = MemSnapshot::default();
        for (&n, &(free, pcp)) in &zones {
            snap.free_pages.insert(n, free + pcp);
            let p = format!("{}/node{n}/meminfo", crate::node::NODE_SYSFS);
            if let Some(kb) = fs::read_to_string(&p)
                .ok()
                .and_then(|s| meminfo_kb(&s, "MemFree"))
            {
                snap.memfree_kb.insert(n, kb);
            }
        }
        let mi = fs::read_to_string("/proc/meminfo").context("reading /proc/meminfo")?;
        snap.slab_kb = meminfo_kb(&mi, "Slab").context("no Slab: in /proc/meminfo")?;
        snap.sunreclaim_kb =
            meminfo_kb(&mi, "SUnreclaim").context("no SUnreclaim: in /proc/meminfo")?;
        snap.slab_objs = fs::read_to_string("/proc/slabinfo")
            .map(|s| parse_slabinfo(&s))
            .unwrap_or_default();
        Ok(snap)
    }

    /// What is lower in `after` than in `self` beyond the tolerances:
    /// free pages per node more than `free_tol_pages` lower, `SUnreclaim`
    /// more than `slab_tol_kb` higher. Empty if nothing.
    pub fn losses(
        &self,
        after: &MemSnapshot,
        free_tol_pages: u64,
        slab_tol_kb: u64,
    ) -> Vec<String> {
        let mut v = Vec::new();
        for (&n, &before) in &self.free_pages {
            let now = after.free_pages.get(&n).copied().unwrap_or(0);
            if now + free_tol_pages < before {
                v.push(format!(
                    "node {n}: {} free pages fewer ({before} -> {now}, tolerance {free_tol_pages})",
                    before - now
                ));
            }
        }
        if after.sunreclaim_kb > self.sunreclaim_kb + slab_tol_kb {
            v.push(format!(
                "SUnreclaim grew by {} kB ({} -> {} kB, tolerance {slab_tol_kb} kB; Slab {} -> {} kB)",
                after.sunreclaim_kb - self.sunreclaim_kb,
                self.sunreclaim_kb,
                after.sunreclaim_kb,
                self.slab_kb,
                after.slab_kb
            ));
        }
        v
    }

    /// A snapshot once it is within the tolerances of `self` (see
    /// [`MemSnapshot::losses`]), or after `max_ms`: the kernel frees some
    /// things after a grace period or from a work item (page tables of a
    /// torn-down mapping go through RCU, a module's init memory through a
    /// work item), so a shortfall is measured again before it counts.
    /// Returns the snapshot and how long it waited (ms).
    pub fn settled(
        &self,
        free_tol_pages: u64,
        slab_tol_kb: u64,
        max_ms: u64,
    ) -> Result<(MemSnapshot, u64)> {
        let t0 = std::time::Instant::now();
        let mut first = true;
        loop {
            // A plain snapshot first (cheap; more slab and fewer free pages
            // than a drained one, so it cannot hide a loss), then drained
            // ones: see [`MemSnapshot::take_drained`].
            let now = if first {
                MemSnapshot::take()?
            } else {
                // Only the caches that grew since `self`: a full drain
                // costs an SRCU grace period per cache.
                let cur = MemSnapshot::take()?;
                for c in self.grown_caches(&cur) {
                    shrink_cache(&c);
                }
                MemSnapshot::take()?
            };
            first = false;
            let waited = t0.elapsed().as_millis() as u64;
            if self.losses(&now, free_tol_pages, slab_tol_kb).is_empty() || waited >= max_ms {
                return Ok((now, waited));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// A snapshot after [`drain_slab`]: objects already freed but still
    /// held by KASAN's quarantine, and empty slabs, given back first. Use
    /// it for a baseline that later drained snapshots are compared with
    /// (an undrained baseline would count the quarantine's contents as
    /// slack and could hide a leak of up to that size).
    pub fn take_drained() -> Result<MemSnapshot> {
        drain_slab();
        MemSnapshot::take()
    }

    /// A snapshot after shrinking the caches that grew since `drained`
    /// (itself from [`MemSnapshot::take_drained`]): what KASAN's
    /// quarantine took since then is given back, at the cost of a few
    /// caches rather than all of them (each costs an SRCU grace period).
    pub fn take_drained_since(drained: &MemSnapshot) -> Result<MemSnapshot> {
        let cur = MemSnapshot::take()?;
        for c in drained.grown_caches(&cur) {
            shrink_cache(&c);
        }
        MemSnapshot::take()
    }

    /// The caches with more active objects or more objects in `after`
    /// than in `self` (all of them if either has no slabinfo).
    pub fn grown_caches(&self, after: &MemSnapshot) -> Vec<String> {
        after
            .slab_objs
            .iter()
            .filter(|(c, &(a, n))| {
                self.slab_objs
                    .get(*c)
                    .is_none_or(|&(a0, n0)| a > a0 || n > n0)
            })
            .map(|(c, _)| c.clone())
            .collect()
    }

    /// Largest drop of free pages over the nodes (negative: every node
    /// gained), and the growth of SUnreclaim in kB.
    pub fn drift(&self, after: &MemSnapshot) -> (i64, i64) {
        let free = self
            .free_pages
            .iter()
            .map(|(n, &b)| b as i64 - after.free_pages.get(n).copied().unwrap_or(0) as i64)
            .max()
            .unwrap_or(0);
        (free, after.sunreclaim_kb as i64 - self.sunreclaim_kb as i64)
    }

    /// `node0 1234567 node1 765432 pages free, SUnreclaim 12345 kB`.
    pub fn describe(&self) -> String {
        let nodes: Vec<String> = self
            .free_pages
            .iter()
            .map(|(n, p)| format!("node{n} {p}"))
            .collect();
        format!(
            "{} pages free, Slab {} kB, SUnreclaim {} kB",
            nodes.join(" "),
            self.slab_kb,
            self.sunreclaim_kb
        )
    }
}

// ---------------------------------------------------------------------------
// tierkit's own counters
// ---------------------------------------------------------------------------

/// tierkit's limits file (Documentation/ABI/testing/debugfs-tierkit).
pub const LIMITS_PATH: &str = "/sys/kernel/debug/tierkit/limits";

/// What tierkit holds for open files, as comparable text keys: from
/// `stats`, every column but `allocated` (which only grows) per node
/// (`node0 held`, `node0 gigantic`, ...), and from `limits` (where the
/// module has it) `held_pages`.
pub fn parse_holdings(stats: &str, limits: Option<&str>) -> Result<BTreeMap<String, u64>> {
    let mut m = BTreeMap::new();
    let mut lines = stats.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines
        .next()
        .context("empty stats")?
        .split_whitespace()
        .collect();
    anyhow::ensure!(header.first() == Some(&"node"), "stats header {header:?}");
    for l in lines {
        let f: Vec<&str> = l.split_whitespace().collect();
        anyhow::ensure!(
            f.len() == header.len(),
            "stats line {l:?} for header {header:?}"
        );
        for (k, v) in header.iter().zip(&f).skip(1) {
            if *k != "allocated" {
                m.insert(
                    format!("node{} {k}", f[0]),
                    v.parse().with_context(|| format!("stats value {v:?}"))?,
                );
            }
        }
    }
    if let Some(l) = limits {
        for line in l.lines() {
            if let Some(v) = line.strip_prefix("held_pages") {
                m.insert(
                    "held_pages".into(),
                    v.trim()
                        .parse()
                        .with_context(|| format!("limits line {line:?}"))?,
                );
            }
        }
    }
    Ok(m)
}

/// [`parse_holdings`] of the live files.
pub fn holdings() -> Result<BTreeMap<String, u64>> {
    crate::ensure_debugfs();
    let s = fs::read_to_string(crate::tk::STATS_PATH)
        .with_context(|| format!("reading {}", crate::tk::STATS_PATH))?;
    let l = fs::read_to_string(LIMITS_PATH).ok();
    parse_holdings(&s, l.as_deref())
}

/// The keys whose values differ, `key a -> b`.
pub fn holdings_diff(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> Vec<String> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| format!("{k} {:?} -> {:?}", a.get(k), b.get(k)))
        .collect()
}

// ---------------------------------------------------------------------------
// Modules
// ---------------------------------------------------------------------------

/// `finit_module(fd, params, flags)`.
pub fn finit_module(fd: RawFd, params: &str, flags: i32) -> io::Result<()> {
    let p = CString::new(params).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `p` is NUL-terminated and lives across the call.
    let r = unsafe { libc::syscall(libc::SYS_finit_module, fd, p.as_ptr(), flags) };
    cvt(r).map(|_| ())
}

/// `delete_module(name, flags)` (`O_NONBLOCK` is the usual flag; the
/// kernel then refuses a module in use with `EWOULDBLOCK` at once).
pub fn delete_module(name: &str, flags: i32) -> io::Result<()> {
    let n = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `n` is NUL-terminated and lives across the call.
    let r = unsafe { libc::syscall(libc::SYS_delete_module, n.as_ptr(), flags) };
    cvt(r).map(|_| ())
}

/// A module's line of /proc/modules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleLine {
    pub size: u64,
    /// Its reference count (`module_refcount`).
    pub refcnt: i64,
    /// `Live`, `Loading` or `Unloading`.
    pub state: String,
}

/// Parses `name size refcnt users state addr` lines.
pub fn parse_proc_modules(s: &str, name: &str) -> Option<ModuleLine> {
    s.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 5 || f[0] != name {
            return None;
        }
        Some(ModuleLine {
            size: f[1].parse().ok()?,
            refcnt: f[2].parse().ok()?,
            state: f[4].to_string(),
        })
    })
}

/// `name`'s line of /proc/modules, `None` if it is not loaded.
pub fn module_line(name: &str) -> Option<ModuleLine> {
    parse_proc_modules(&fs::read_to_string("/proc/modules").ok()?, name)
}

/// tierkit's module name and the guest's copy of it.
pub const TIERKIT_MODULE: &str = "tierkit";
pub const TIERKIT_KO: &str = "/lib/modules/tierkit.ko";

/// `finit_module(2)` of [`TIERKIT_KO`] without parameters.
pub fn load_tierkit() -> io::Result<()> {
    let f = fs::File::open(TIERKIT_KO)?;
    finit_module(f.as_raw_fd(), "", 0)
}

/// `delete_module("tierkit", O_NONBLOCK)`: refused at once
/// (`EWOULDBLOCK`) while tierkit is in use.
pub fn unload_tierkit() -> io::Result<()> {
    delete_module(TIERKIT_MODULE, libc::O_NONBLOCK)
}

/// tierkit's weight table as /init left it (weights, `auto`, the
/// `bandwidth` file), which an unload loses: saved before a reload,
/// written back after it.
#[derive(Clone, Debug)]
pub struct TierkitWeights {
    saved: crate::weights::WeightSnapshot,
    bandwidth: String,
    /// [`TierkitWeights::text`] when saved.
    pub before: String,
}

impl TierkitWeights {
    /// The weight table and bandwidth of `wd` as one text, to compare.
    pub fn text(wd: &crate::weights::WeightDir) -> Result<String, String> {
        let s = wd.snapshot().map_err(|e| format!("{e:#}"))?;
        let bw = fs::read_to_string(wd.bandwidth_path()).map_err(|e| e.to_string())?;
        Ok(format!("{}; bandwidth {:?}", s.describe(), bw))
    }

    /// Saves `wd`'s table.
    pub fn save(wd: &crate::weights::WeightDir) -> Result<TierkitWeights, String> {
        match (
            wd.snapshot(),
            fs::read_to_string(wd.bandwidth_path()),
            Self::text(wd),
        ) {
            (Ok(saved), Ok(bandwidth), Ok(before)) => Ok(TierkitWeights {
                saved,
                bandwidth,
                before,
            }),
            (s, b, t) => Err(format!("{:?} {:?} {:?}", s.err(), b.err(), t.err())),
        }
    }

    /// Writes the table back into the loaded module: bandwidth first (it
    /// recomputes the auto weights), then the saved weights and `auto`;
    /// `Err` if the text then differs from the saved one.
    pub fn restore(&self) -> Result<(), String> {
        let wd = crate::weights::WeightDir::tierkit().ok_or("no weight directory")?;
        let s = crate::weights::WeightSnapshot {
            dir: wd.clone(),
            ..self.saved.clone()
        };
        if !self.bandwidth.is_empty() {
            crate::weights::write_file(&wd.bandwidth_path(), &self.bandwidth)
                .map_err(|e| format!("writing bandwidth: {e}"))?;
        }
        s.restore().map_err(|e| format!("{e:#}"))?;
        let now = Self::text(&wd)?;
        if now != self.before {
            return Err(format!("now {now}, was {}", self.before));
        }
        Ok(())
    }
}

/// The KUnit executor's `filter_glob` parameter (lib/kunit/executor.c,
/// mode 0600): which suites a module's KUnit tests run at load time
/// (`kunit_module_init()` filters with it, `*.*` when unset).
pub const KUNIT_FILTER_GLOB: &str = "/sys/module/kunit/parameters/filter_glob";

/// The value read when the parameter was never set (`param_get_charp`
/// prints a NULL pointer so).
pub const KUNIT_FILTER_UNSET: &str = "(null)";

/// Sets KUnit's `filter_glob` and puts the old value back when dropped. A
/// parameter that was unset cannot be unset again through sysfs: it is
/// restored as `*.*`, which is what `kunit_module_init()` uses for an
/// unset one (lib/kunit/test.c), so later module loads run the same
/// suites.
#[derive(Debug)]
pub struct KunitFilter {
    old: Option<String>,
}

impl KunitFilter {
    /// The value to write back for what was read.
    pub fn restore_value(old: &str) -> &str {
        if old == KUNIT_FILTER_UNSET {
            "*.*"
        } else {
            old
        }
    }

    /// Whether the kernel has KUnit (built in, or its module loaded).
    pub fn present() -> bool {
        std::path::Path::new("/sys/module/kunit").exists()
    }

    /// What the filter does, for a report: the glob written, or why none.
    pub fn describe(&self, glob: &str) -> String {
        if self.old.is_some() {
            format!("{KUNIT_FILTER_GLOB} = {glob}")
        } else {
            "no KUnit in this kernel (no /sys/module/kunit): no suite runs at load".to_string()
        }
    }

    pub fn read() -> io::Result<String> {
        Ok(fs::read_to_string(KUNIT_FILTER_GLOB)?
            .trim_end_matches('\n')
            .to_string())
    }

    /// Sets the filter; on a kernel without KUnit (no `/sys/module/kunit`,
    /// as Debian's) no suite runs at load anyway, and nothing is written.
    pub fn set(glob: &str) -> io::Result<KunitFilter> {
        if !Self::present() {
            return Ok(KunitFilter { old: None });
        }
        let old = Self::read()?;
        fs::write(KUNIT_FILTER_GLOB, glob)?;
        Ok(KunitFilter { old: Some(old) })
    }

    /// Restores now; returns what was written.
    pub fn restore(&mut self) -> io::Result<Option<String>> {
        match self.old.take() {
            Some(old) => {
                let v = Self::restore_value(&old).to_string();
                fs::write(KUNIT_FILTER_GLOB, &v)?;
                Ok(Some(v))
            }
            None => Ok(None),
        }
    }
}

impl Drop for KunitFilter {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("# restoring {KUNIT_FILTER_GLOB}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zoneinfo() {
        let s = "Node 0, zone      DMA\n  per-node stats\n      nr_free_pages 9\n  pages free     3840\n        min      33\n  pagesets\n    cpu: 0\n              count: 5\n              high:  12\n    cpu: 1\n              count: 7\n\
                 Node 0, zone   Normal\n  pages free     100\n  pagesets\n    cpu: 0\n              count: 1\n\
                 Node 1, zone   Normal\n  pages free     42\n";
        let m = parse_zoneinfo(s).unwrap();
        assert_eq!(m[&0], (3940, 13));
        assert_eq!(m[&1], (42, 0));
        assert!(parse_zoneinfo("  pages free 3\n").is_err());
    }

    #[test]
    fn meminfo() {
        let s = "MemTotal:       100 kB\nSlab:            2000 kB\nSUnreclaim:      1500 kB\n";
        assert_eq!(meminfo_kb(s, "Slab"), Some(2000));
        assert_eq!(meminfo_kb(s, "SUnreclaim"), Some(1500));
        assert_eq!(meminfo_kb(s, "Nope"), None);
        let n = "Node 1 MemTotal:       3094744 kB\nNode 1 MemFree:        3000000 kB\n";
        assert_eq!(meminfo_kb(n, "MemFree"), Some(3_000_000));
    }

    #[test]
    fn slabinfo() {
        let s = "slabinfo - version: 2.1\n# name            <active_objs> <num_objs> <objsize>\nkmalloc-64  100 128 64 64 1 : tunables 0 0 0 : slabdata 2 2 0\nfilp 10 20 256 16 1 : tunables 0 0 0 : slabdata 1 1 0\n";
        let m = parse_slabinfo(s);
        assert_eq!(m.len(), 2);
        assert_eq!(m["kmalloc-64"], (100, 128));
        let a = MemSnapshot {
            slab_objs: m.clone(),
            ..Default::default()
        };
        let mut b = a.clone();
        assert!(a.grown_caches(&b).is_empty());
        b.slab_objs.insert("filp".into(), (11, 20));
        b.slab_objs.insert("new".into(), (1, 1));
        assert_eq!(
            a.grown_caches(&b),
            vec!["filp".to_string(), "new".to_string()]
        );
    }

    #[test]
    fn injected_dumps_are_not_reports() {
        let l: Vec<String> = [
            "FAULT_INJECTION: forcing a failure.",
            "name failslab, interval 1, probability 0, space 0, times 0",
            "CPU: 1 UID: 0 PID: 90 Comm: tk-test-lifecyc Tainted: G O N 7.3.4 #1",
            "Call Trace:",
            " <TASK>",
            " dump_stack_lvl+0x5d/0x80",
            "RIP: 0033:0x7f8d28fa6b99",
            " </TASK>",
            "tk-test-lifecyc: page allocation failure: order:0, mode:0xcc0(GFP_KERNEL)",
            "CPU: 1 UID: 0 PID: 90 Comm: tk-test-lifecyc",
            "RIP: 0033:0x7f8d28fa6b99",
            " </TASK>",
            "Mem-Info:",
            "RIP: 0010:tk_bad+0x1/0x2 [tierkit]",
            "WARNING: CPU: 0 PID: 1 at mm/x.c:1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let c = crash_lines(&l);
        assert_eq!(
            c,
            vec![
                "RIP: 0010:tk_bad+0x1/0x2 [tierkit]".to_string(),
                "WARNING: CPU: 0 PID: 1 at mm/x.c:1".to_string()
            ]
        );
        // A real report inside a dump still counts.
        let l2: Vec<String> = [
            "FAULT_INJECTION: forcing a failure.",
            "CPU: 1 UID: 0 PID: 90",
            "BUG: KASAN: slab-use-after-free in f+0x1/0x2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(crash_lines(&l2).len(), 1);
        // Without a fault report, a dump's RIP counts.
        assert_eq!(crash_lines(&["RIP: 0033:0x1".to_string()]).len(), 1);
    }

    #[test]
    fn losses_and_drift() {
        let mut a = MemSnapshot::default();
        a.free_pages.insert(0, 1000);
        a.free_pages.insert(1, 500);
        a.sunreclaim_kb = 100;
        let mut b = a.clone();
        assert!(a.losses(&b, 0, 0).is_empty());
        b.free_pages.insert(1, 400);
        b.sunreclaim_kb = 300;
        assert!(a.losses(&b, 100, 200).is_empty());
        let l = a.losses(&b, 99, 199);
        assert_eq!(l.len(), 2, "{l:?}");
        assert!(l[0].starts_with("node 1: 100 free pages fewer"), "{l:?}");
        assert_eq!(a.drift(&b), (100, 200));
    }

    #[test]
    fn holdings_parse() {
        let m = parse_holdings(
            "node allocated held gigantic\n0 1536 1024 1\n1 512 0 0\n",
            Some("file_pages 262144\nheld_pages 286168\n"),
        )
        .unwrap();
        assert_eq!(m["node0 held"], 1024);
        assert_eq!(m["node0 gigantic"], 1);
        assert_eq!(m["node1 held"], 0);
        assert_eq!(m["held_pages"], 286168);
        assert!(!m.contains_key("node0 allocated"));
        let old = parse_holdings("node allocated held\n0 5 2\n", None).unwrap();
        assert_eq!(old.len(), 1);
        assert!(parse_holdings("node a b\n0 1\n", None).is_err());
        let mut n = m.clone();
        n.insert("node1 held".into(), 3);
        assert_eq!(
            holdings_diff(&m, &n),
            vec!["node1 held Some(0) -> Some(3)".to_string()]
        );
    }

    #[test]
    fn proc_modules() {
        let s = "tierkit 90112 1 - Live 0xffffffffc0000000\nother 1 0 - Loading 0x0\n";
        let m = parse_proc_modules(s, "tierkit").unwrap();
        assert_eq!((m.refcnt, m.state.as_str()), (1, "Live"));
        assert_eq!(parse_proc_modules(s, "other").unwrap().state, "Loading");
        assert_eq!(parse_proc_modules(s, "tier"), None);
    }

    #[test]
    fn kmsg_faults() {
        let lines: Vec<String> = [
            "FAULT_INJECTION: forcing a failure.\\x0aname failslab, interval 1, probability 0, space 0, times 0",
            "something",
            "FAULT_INJECTION: forcing a failure.",
            "name fail_page_alloc, interval 1, probability 0, space 0, times 0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let f = injected_faults(&lines);
        assert_eq!(
            f,
            vec![
                ("failslab".to_string(), 0),
                ("fail_page_alloc".to_string(), 2)
            ]
        );
        assert!(crash_lines(&lines).is_empty());
        let bad = vec!["WARNING: CPU: 0 PID: 1 at mm/x.c:1".to_string()];
        assert_eq!(crash_lines(&bad).len(), 1);
    }

    #[test]
    fn kunit_restore_value() {
        assert_eq!(KunitFilter::restore_value("(null)"), "*.*");
        assert_eq!(KunitFilter::restore_value("tierkit_wi*"), "tierkit_wi*");
    }
}
