//! tk-test-lifecycle: unloading and loading tierkit, over and over, with
//! and without its files held, and with faults injected into the load.
//!
//! - [`CYCLES`] cycles of `delete_module(2)` + `finit_module(2)` of
//!   `/lib/modules/tierkit.ko`. Every cycle checks that the loaded module
//!   works (open, `TK_IOC_SET_POLICY`, a mapping that reads zero, its
//!   debugfs files) and that an unloaded one left nothing behind
//!   (/proc/modules, /dev/tierkit, /sys/kernel/debug/tierkit). Some cycles
//!   hold something across the `delete_module(O_NONBLOCK)`: an open
//!   `/dev/tierkit`, a live mapping of it whose fd is closed, an open
//!   `/sys/kernel/debug/tierkit/stats`, an open weight file. The unload
//!   must then be refused (`EWOULDBLOCK`, or `EBUSY`; delete_module(2)),
//!   the module must still work, and the unload must succeed once the
//!   file is closed or the mapping unmapped. (A debugfs file open across
//!   an unload once let the unload succeed, and the close then oopsed.
//!   Should an unload succeed with a debugfs file held, this test
//!   fails and hands the file to a child that keeps it open, so that the
//!   close does not take the guest down with it.)
//! - Fault injection into the load (`fail-nth`, as tk-test-faults): for N
//!   = 1, 2, ...: `finit_module` with the Nth allocation failing. Each
//!   failed load must leave the module not loaded, with an errno
//!   `finit_module(2)` documents for it, and memory given back. The sweep
//!   ends at the first N whose fault lands after tierkit's init returned
//!   (the kernel's module notifiers, e.g. KUnit's suite filter, whose own
//!   failure message the harness counts as a KUnit error), or at the first
//!   load without an injected fault. Where each fault landed comes from the
//!   stack `fail_dump()` prints with `verbose=2` (a plain `dump_stack()`,
//!   nothing the harness reads as a crash): inside the init
//!   (`do_one_initcall`) or after it (the module notifier chain, KUnit's
//!   suite filter). A fault in that filter makes KUnit print `kunit module:
//!   error filtering suites: -12`, which the harness would count as a KUnit
//!   failure; so during this sweep the console prints only log levels 0-2
//!   (`/proc/sys/kernel/printk`, put back after), and the test reads every
//!   step's messages from `/dev/kmsg` itself and fails on any BUG, WARNING,
//!   oops or KUnit error, except that one message after a fault injected
//!   into KUnit's filter.
//! - Each `finit_module` would run all of tierkit's KUnit suites (about
//!   25 s under TCG): KUnit's `filter_glob` parameter is writable at run
//!   time (lib/kunit/executor.c, 0600) and `kunit_module_init()` filters
//!   with it at every load, so the test sets it to a glob no suite matches
//!   and puts it back afterwards (an unset parameter reads `(null)` and is
//!   put back as `*.*`, what KUnit uses when it is unset).
//!
//! At the end tierkit is loaded again with the weight table as /init set it
//! (bandwidth, auto, weights, compared), and every node's free memory is
//! within 1% of the start.

use serde_json::json;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;
use userspace_tests::faults::{
    crash_lines, finit_module, injected_faults, load_tierkit as load, module_line,
    unload_tierkit as unload, ConsoleLevel, FailNth, FaultKnobs, Kmsg, KunitFilter, MemSnapshot,
    TierkitWeights, KUNIT_FILTER_ENOMEM, TIERKIT_KO, TIERKIT_MODULE,
};
use userspace_tests::report::Report;
use userspace_tests::tk::{self, Tierkit, TK_MODE_WEIGHTED_INTERLEAVE};
use userspace_tests::weights::WeightDir;
use userspace_tests::{errno_name, read_topology, tierkit_weight_dir};

const BIN: &str = "tk-test-lifecycle";
const MODULE: &str = TIERKIT_MODULE;
const KO: &str = TIERKIT_KO;
const DEBUGFS_DIR: &str = "/sys/kernel/debug/tierkit";
/// Unload/load cycles.
const CYCLES: u32 = 100;
/// A KUnit filter no suite matches.
const NO_SUITES: &str = "tk-lifecycle-runs-no-kunit-suite";
/// Free memory per node at the end, within this fraction of the start.
const END_TOLERANCE: f64 = 0.01;
/// Per fault-injection step: free pages a node may have lost, and
/// SUnreclaim growth, against the start of the sweep (as tk-test-faults,
/// plus room for the module loader's own caches).
const STEP_FREE_TOL_PAGES: u64 = 1024;
const STEP_SLAB_TOL_KB: u64 = 2048;
/// No load has this many fault points.
const MAX_N: u32 = 5000;

/// What a cycle holds across the refused unload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hold {
    Nothing,
    Device,
    Mapping,
    Stats,
    WeightFile,
}

impl Hold {
    fn of_cycle(i: u32) -> Hold {
        match i % 10 {
            1 => Hold::Device,
            3 => Hold::Mapping,
            5 => Hold::Stats,
            7 => Hold::WeightFile,
            _ => Hold::Nothing,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Hold::Nothing => "nothing",
            Hold::Device => "an open /dev/tierkit",
            Hold::Mapping => "a mapping of /dev/tierkit (fd closed)",
            Hold::Stats => "an open debugfs stats file",
            Hold::WeightFile => "an open debugfs weight file",
        }
    }

    fn is_debugfs(self) -> bool {
        matches!(self, Hold::Stats | Hold::WeightFile)
    }
}

/// Something held open across an unload.
enum Held {
    File(File),
    Map(userspace_tests::sys::Mapping),
}

/// The module is loaded and works: /proc/modules says Live, a file opens,
/// takes a policy, maps a page that reads zero, and the debugfs files are
/// there.
fn works(mem_mask: u64) -> Result<(), String> {
    match module_line(MODULE) {
        Some(m) if m.state == "Live" => {}
        Some(m) => return Err(format!("/proc/modules says {}", m.state)),
        None => return Err("not in /proc/modules".into()),
    }
    let t = Tierkit::open().map_err(|e| format!("open /dev/tierkit: {e}"))?;
    t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, mem_mask)
        .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
    let m = t.map(1, 0).map_err(|e| format!("mmap: {e}"))?;
    if m.first_nonzero().is_some() {
        return Err("a fresh page is not zero".into());
    }
    drop(m);
    drop(t);
    if tk::read_stats().is_none() {
        return Err(format!("no {}", tk::STATS_PATH));
    }
    let wd = WeightDir::tierkit().ok_or("no weighted_interleave directory in debugfs")?;
    let mut missing: Vec<String> = ["auto", "bandwidth"]
        .iter()
        .filter(|f| !wd.path.join(f).exists())
        .map(|f| f.to_string())
        .collect();
    missing.extend(
        userspace_tests::node::nodes_of(mem_mask)
            .into_iter()
            .filter(|&n| !wd.node_path(n).exists())
            .map(|n| format!("node{n}")),
    );
    if !missing.is_empty() {
        return Err(format!("weighted_interleave/ lacks {}", missing.join(", ")));
    }
    Ok(())
}

/// Nothing of the module is left: no /proc/modules line, no device node, no
/// debugfs directory.
fn gone() -> Result<(), String> {
    if let Some(m) = module_line(MODULE) {
        return Err(format!("still in /proc/modules ({})", m.state));
    }
    if Path::new(tk::DEV_PATH).exists() {
        return Err(format!("{} still exists", tk::DEV_PATH));
    }
    if Path::new(DEBUGFS_DIR).exists() {
        return Err(format!("{DEBUGFS_DIR} still exists"));
    }
    Ok(())
}

fn refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EWOULDBLOCK) | Some(libc::EBUSY)
    )
}

/// Keeps `f` open in a child that does nothing else, forever: closing a
/// debugfs file of an unloaded module calls into freed module text (an
/// oops in `full_proxy_release()`), which with oops=panic ends the guest.
/// The child closes everything else (so nobody waits for its output) and
/// sleeps.
fn quarantine(f: File) -> String {
    let keep = f.as_raw_fd();
    // SAFETY: fork in a single-threaded process; the child only makes
    // async-signal-safe calls.
    match unsafe { libc::fork() } {
        0 => {
            // SAFETY: plain syscalls on fds of this process.
            unsafe {
                libc::setsid();
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
                for fd in 0..3 {
                    libc::dup2(null, fd);
                }
                for fd in 3..1024 {
                    if fd != keep {
                        libc::close(fd);
                    }
                }
                loop {
                    libc::pause();
                }
            }
        }
        pid if pid > 0 => {
            // The child's copy keeps the file open; ours may go.
            std::mem::forget(f);
            // SAFETY: our copy of the fd.
            unsafe { libc::close(keep) };
            format!("the file is kept open by pid {pid}, which never exits")
        }
        _ => {
            std::mem::forget(f);
            "fork failed; the file is leaked open in this process".into()
        }
    }
}

fn hold(h: Hold, wd: &WeightDir, mem_mask: u64) -> Result<Option<Held>, String> {
    Ok(match h {
        Hold::Nothing => None,
        Hold::Device => Some(Held::File(
            File::open(tk::DEV_PATH).map_err(|e| format!("open /dev/tierkit: {e}"))?,
        )),
        Hold::Mapping => {
            let t = Tierkit::open().map_err(|e| format!("open /dev/tierkit: {e}"))?;
            t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, mem_mask)
                .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
            let m = t.map(4, 0).map_err(|e| format!("mmap: {e}"))?;
            m.touch_pages();
            drop(t);
            Some(Held::Map(m))
        }
        Hold::Stats => Some(Held::File(
            File::open(tk::STATS_PATH).map_err(|e| format!("open stats: {e}"))?,
        )),
        Hold::WeightFile => {
            let n = wd
                .nodes()
                .map_err(|e| format!("{e:#}"))?
                .first()
                .copied()
                .ok_or("no weight file")?;
            Some(Held::File(
                File::options()
                    .read(true)
                    .write(true)
                    .open(wd.node_path(n))
                    .map_err(|e| format!("open node{n}: {e}"))?,
            ))
        }
    })
}

/// One cycle: load, check, hold, refused unload, release, unload.
fn cycle(i: u32, mem_mask: u64, debugfs_unloads: &mut Vec<String>) -> Result<Hold, String> {
    let h = Hold::of_cycle(i);
    load().map_err(|e| format!("finit_module: {}", errno_name(&e)))?;
    works(mem_mask).map_err(|e| format!("after loading: {e}"))?;
    let wd = WeightDir::tierkit().ok_or("no weight directory")?;
    let held = hold(h, &wd, mem_mask)?;
    if let Some(held) = held {
        match unload() {
            Err(e) if refused(&e) => {}
            Err(e) => {
                return Err(format!(
                    "unload with {} held: {} (expected EWOULDBLOCK or EBUSY)",
                    h.name(),
                    errno_name(&e)
                ))
            }
            Ok(()) => {
                let what = match held {
                    Held::File(f) if h.is_debugfs() => quarantine(f),
                    Held::File(f) => {
                        drop(f);
                        String::new()
                    }
                    Held::Map(m) => {
                        drop(m);
                        String::new()
                    }
                };
                if h.is_debugfs() {
                    debugfs_unloads.push(format!("cycle {i}: {}", h.name()));
                }
                // Load it again so that the cycles and later tests go on.
                let _ = load();
                return Err(format!(
                    "unload succeeded with {} held{}",
                    h.name(),
                    if what.is_empty() {
                        String::new()
                    } else {
                        format!("; {what}")
                    }
                ));
            }
        }
        works(mem_mask).map_err(|e| format!("after the refused unload: {e}"))?;
        drop(held);
    }
    unload().map_err(|e| {
        format!(
            "unload after releasing {}: {} (refcnt {:?})",
            h.name(),
            errno_name(&e),
            module_line(MODULE).map(|m| m.refcnt)
        )
    })?;
    gone().map_err(|e| format!("after unloading: {e}"))?;
    Ok(h)
}

/// Fault injection into `finit_module`; the module is not loaded before and
/// after. Returns (points, injected steps, post-init stop reason).
struct LoadSweep {
    points: u32,
    failed_loads: u32,
    tolerated: Vec<String>,
    stopped_after_init: Option<String>,
    errnos: std::collections::BTreeMap<String, u32>,
    failures: Vec<String>,
    seconds: f64,
}

fn top_frames(lines: &[String], from: usize) -> String {
    // The guess unwinder (CONFIG_UNWINDER_GUESS) marks every frame `? `
    // and may list stale ones: good enough to say where a fault landed.
    const MACHINERY: &[&str] = &[
        "dump_stack",
        "should_fail",
        "fail_dump",
        "slab_",
        "kmem_cache_alloc",
        "__kmalloc",
        "kmalloc",
        "__alloc",
        "alloc_pages",
        "prepare_alloc",
        "__kmem",
        "kvmalloc",
        "__kvmalloc",
        "krealloc",
        "__do_kmalloc",
        "___slab",
        "__slab",
        "kstrdup",
        "kmemdup",
    ];
    lines[from..]
        .iter()
        .map(|l| l.trim().trim_start_matches("? "))
        .skip_while(|l| !l.starts_with("Call Trace:"))
        .filter(|l| l.contains("+0x"))
        .filter(|l| !MACHINERY.iter().any(|f| l.starts_with(f)))
        .take(4)
        .map(short_frame)
        .collect::<Vec<_>>()
        .join(" < ")
}

/// `name+0x12/0x34 [mod]` with a Rust v0 symbol shortened to its last
/// identifiers (`_RNv...6Module4init` -> `Module::init`).
fn short_frame(f: &str) -> String {
    let (sym, rest) = f.split_once('+').unwrap_or((f, ""));
    let m = if rest.contains("[tierkit]") {
        " [tierkit]"
    } else {
        ""
    };
    if !sym.starts_with("_R") {
        return format!("{sym}{m}");
    }
    let b = sym.as_bytes();
    let mut idents = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_digit()) {
            let mut j = i;
            let mut n = 0usize;
            while j < b.len() && b[j].is_ascii_digit() {
                n = n * 10 + usize::from(b[j] - b'0');
                j += 1;
            }
            if n >= 3 && j + n <= b.len() {
                let id = &sym[j..j + n];
                if id.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
                    idents.push(id);
                    i = j + n;
                    continue;
                }
            }
            i = j;
        } else {
            i += 1;
        }
    }
    let k = idents.len().saturating_sub(2);
    format!("{}{m}", idents[k..].join("::"))
}

/// The stack `fail_dump()` printed after line `from`: up to the next
/// `FAULT_INJECTION` report.
fn trace_of(lines: &[String], from: usize) -> Vec<String> {
    let end = lines[from + 1..]
        .iter()
        .position(|l| l.contains("FAULT_INJECTION: forcing a failure"))
        .map_or(lines.len(), |p| from + 1 + p);
    lines[from..end].to_vec()
}

fn load_sweep(mem_mask: u64, base: &MemSnapshot) -> Result<LoadSweep, String> {
    let fail = FailNth::open().map_err(|e| format!("fail-nth: {e}"))?;
    let kmsg = Kmsg::open_at_end().map_err(|e| format!("/dev/kmsg: {e}"))?;
    let f = File::open(KO).map_err(|e| format!("{KO}: {e}"))?;
    let mut sw = LoadSweep {
        points: 0,
        failed_loads: 0,
        tolerated: Vec::new(),
        stopped_after_init: None,
        errnos: Default::default(),
        failures: Vec::new(),
        seconds: 0.0,
    };
    let t0 = Instant::now();
    let fd = f.as_raw_fd();
    let mut n = 1;
    loop {
        if n > MAX_N {
            sw.failures
                .push(format!("still injecting after {MAX_N} points"));
            break;
        }
        let _ = kmsg.drain();
        let a = fail
            .run(n, || finit_module(fd, "", 0))
            .map_err(|e| format!("fail-nth: {e}"))?;
        let lines = kmsg.drain();
        // A fault in KUnit's suite filter after tierkit's init makes KUnit
        // say so: the kernel's own, correct answer to the fault (this
        // step's stack shows where it landed; the sweep ends with it).
        let kunit_fault = lines.iter().any(|l| l.contains("kunit_filter_suites"))
            && lines
                .iter()
                .any(|l| l.contains("FAULT_INJECTION: forcing a failure"));
        let crashes: Vec<String> = crash_lines(&lines)
            .into_iter()
            .filter(|l| !(kunit_fault && l.trim() == KUNIT_FILTER_ENOMEM))
            .collect();
        if !crashes.is_empty() {
            sw.failures
                .push(format!("N={n}: kernel reported: {}", crashes.join(" | ")));
        }
        if a.injected {
            sw.points = n;
        }
        let faults = injected_faults(&lines);
        let trace = faults
            .first()
            .map(|&(_, i)| trace_of(&lines, i))
            .unwrap_or_default();
        // The module notifiers (KUnit's first) run after the init: a
        // fault there is past tierkit. The guess unwinder may leave stale
        // frames, so evidence of the notifier chain wins.
        let after_init = trace
            .iter()
            .any(|l| l.contains("kunit_") || l.contains("blocking_notifier_call_chain"));
        let in_init = !after_init && trace.iter().any(|l| l.contains("do_one_initcall"));
        let frames = faults
            .first()
            .map_or(String::new(), |&(_, i)| top_frames(&lines, i));
        match (a.value, a.injected) {
            (Ok(()), false) => {
                unload().map_err(|e| format!("unload after the clean load: {}", errno_name(&e)))?;
                break;
            }
            (Ok(()), true) => {
                // The load went through although an allocation failed.
                let w = works(mem_mask);
                let unl = unload();
                if let Err(e) = w {
                    sw.failures.push(format!(
                        "N={n}: loaded despite a failed allocation ({frames}) but does not work: {e}"
                    ));
                }
                if let Err(e) = unl {
                    sw.failures
                        .push(format!("N={n}: unload: {}", errno_name(&e)));
                }
                if in_init || trace.is_empty() {
                    sw.tolerated.push(format!(
                        "N={n} {}",
                        if frames.is_empty() {
                            "(no stack: __GFP_NOWARN)".into()
                        } else {
                            frames
                        }
                    ));
                } else {
                    sw.stopped_after_init = Some(format!("N={n} ({frames})"));
                    break;
                }
            }
            (Err(e), inj) => {
                sw.failed_loads += 1;
                *sw.errnos.entry(errno_name(&e)).or_default() += 1;
                if !inj {
                    sw.failures.push(format!(
                        "N={n}: finit_module failed with {} without an injected fault",
                        errno_name(&e)
                    ));
                    break;
                }
                // finit_module(2): ENOMEM for an allocation; the loader
                // passes on what the module's init returns, ENOMEM too.
                if e.raw_os_error() != Some(libc::ENOMEM) {
                    sw.failures.push(format!(
                        "N={n}: finit_module failed with {} ({frames}), expected ENOMEM",
                        errno_name(&e)
                    ));
                }
                if let Err(g) = gone() {
                    sw.failures
                        .push(format!("N={n}: after the failed load: {g}"));
                    // Loaded after all (it said it failed): unload for the
                    // next step.
                    let _ = unload();
                }
            }
        }
        if let Ok((now, waited)) = base.settled(STEP_FREE_TOL_PAGES, STEP_SLAB_TOL_KB, 2000) {
            let l = base.losses(&now, STEP_FREE_TOL_PAGES, STEP_SLAB_TOL_KB);
            if !l.is_empty() {
                sw.failures.push(format!(
                    "N={n}: memory not given back ({waited} ms later): {}",
                    l.join("; ")
                ));
            }
        }
        if sw.failures.len() > 12 {
            sw.failures.push("too many failures, stopping".into());
            break;
        }
        n += 1;
    }
    sw.seconds = t0.elapsed().as_secs_f64();
    Ok(sw)
}

fn main() -> ExitCode {
    userspace_tests::help!();
    let mut r = Report::new(BIN, "test");
    let Some(topo) = read_topology(&mut r) else {
        return r.finish();
    };
    let Some(wd) = tierkit_weight_dir(&mut r) else {
        return r.finish();
    };
    run(&mut r, topo.memory_mask(), &wd);
    r.finish()
}

fn run(r: &mut Report, mem_mask: u64, wd: &WeightDir) {
    if !Path::new(KO).exists() {
        r.fail("module file", format!("no {KO}"));
        return;
    }
    match module_line(MODULE) {
        Some(m) if m.state == "Live" && m.refcnt == 0 => {}
        other => {
            r.fail(
                "tierkit loaded and unused at the start",
                format!("/proc/modules: {other:?}"),
            );
            return;
        }
    }
    let table = match TierkitWeights::save(wd) {
        Ok(t) => t,
        Err(e) => {
            r.fail("save the weight table", e);
            return;
        }
    };
    r.note(format!("weight table as /init left it: {}", table.before));
    let start = match MemSnapshot::take() {
        Ok(s) => s,
        Err(e) => {
            r.fail("memory counters", format!("{e:#}"));
            return;
        }
    };
    r.note(format!("start: {}", start.describe()));
    let mut kf = match KunitFilter::set(NO_SUITES) {
        Ok(k) => {
            r.ok_note("KUnit suites off for the reloads", k.describe(NO_SUITES));
            Some(k)
        }
        Err(e) => {
            r.fail(
                "KUnit suites off for the reloads",
                format!(
                    "writing {}: {e}; every load would run all suites (~25 s), not cycling",
                    userspace_tests::faults::KUNIT_FILTER_GLOB
                ),
            );
            None
        }
    };
    if kf.is_some() {
        phases(r, mem_mask, &start);
    }

    // Leave it loaded, with the weight table /init set.
    if module_line(MODULE).is_none() {
        r.check(
            "tierkit loaded again at the end",
            load().map_err(|e| errno_name(&e)),
        );
    }
    r.check("tierkit works at the end", works(mem_mask));
    r.check("weight table as /init set it", table.restore());
    if let Some(k) = kf.as_mut() {
        r.check_note(
            "KUnit filter_glob restored",
            k.restore()
                .map(|v| v.unwrap_or_default())
                .map_err(|e| e.to_string()),
        );
    }
    match MemSnapshot::take() {
        Ok(end) => {
            r.note(format!("end: {}", end.describe()));
            let mut bad = Vec::new();
            for (n, &b) in &start.free_pages {
                let e = end.free_pages.get(n).copied().unwrap_or(0);
                let tol = (b as f64 * END_TOLERANCE) as u64;
                if e + tol < b {
                    bad.push(format!(
                        "node {n}: {b} -> {e} free pages ({:.2}% lost, tolerance 1%)",
                        (b - e) as f64 * 100.0 / b as f64
                    ));
                }
            }
            r.check(
                "free memory per node within 1% of the start",
                if bad.is_empty() {
                    Ok(())
                } else {
                    Err(bad.join("; "))
                },
            );
        }
        Err(e) => {
            r.fail(
                "free memory per node within 1% of the start",
                format!("{e:#}"),
            );
        }
    }
}

fn phases(r: &mut Report, mem_mask: u64, start: &MemSnapshot) {
    // Unloading with nothing held.
    if let Err(e) = unload() {
        r.fail(
            "unload tierkit",
            format!(
                "{} (refcnt {:?})",
                errno_name(&e),
                module_line(MODULE).map(|m| m.refcnt)
            ),
        );
        return;
    }
    r.check("unload tierkit", gone());

    // The cycles.
    let t0 = Instant::now();
    let mut failures: Vec<(Hold, String)> = Vec::new();
    let mut debugfs_unloads = Vec::new();
    let mut counts = std::collections::BTreeMap::new();
    let mut done = 0;
    for i in 0..CYCLES {
        match cycle(i, mem_mask, &mut debugfs_unloads) {
            Ok(h) => *counts.entry(h.name()).or_insert(0u32) += 1,
            Err(e) => {
                failures.push((Hold::of_cycle(i), format!("cycle {i}: {e}")));
                // Start the next cycle unloaded.
                if module_line(MODULE).is_some() && unload().is_err() {
                    failures.push((Hold::Nothing, "cannot unload; cycles stopped".into()));
                    break;
                }
            }
        }
        done = i + 1;
    }
    let secs = t0.elapsed().as_secs_f64();
    r.note(format!(
        "{done} cycles in {secs:.1} s ({:.0} ms each); held: {counts:?}",
        secs * 1000.0 / f64::from(done.max(1))
    ));
    for h in [
        Hold::Nothing,
        Hold::Device,
        Hold::Mapping,
        Hold::Stats,
        Hold::WeightFile,
    ] {
        let name = if h == Hold::Nothing {
            format!("{CYCLES} unload/load cycles")
        } else {
            format!("unload refused with {} held, done once released", h.name())
        };
        let f: Vec<&String> = failures
            .iter()
            .filter(|(k, _)| *k == h)
            .map(|(_, e)| e)
            .collect();
        if f.is_empty() {
            r.ok(&name);
        } else {
            let more = if f.len() > 3 {
                format!(" (and {} more)", f.len() - 3)
            } else {
                String::new()
            };
            r.fail(
                &name,
                format!(
                    "{}{more}",
                    f.iter()
                        .take(3)
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            );
        }
    }
    if !debugfs_unloads.is_empty() {
        r.note(format!(
            "an unload succeeded with a debugfs file open in {} cycle(s): {}",
            debugfs_unloads.len(),
            debugfs_unloads.join(", ")
        ));
    }

    r.set("cycles", json!(done));
    r.set("cycles_seconds", json!((secs * 10.0).round() / 10.0));
    r.set(
        "unload_with_debugfs_open_cycles",
        json!(debugfs_unloads.len()),
    );

    // Fault injection into the load.
    if let Some(why) = FaultKnobs::missing() {
        r.skip("fault injection into finit_module", why);
        return;
    }
    if module_line(MODULE).is_some() {
        let _ = unload();
    }
    let mut knobs = match FaultKnobs::systematic(2) {
        Ok(k) => k,
        Err(e) => {
            r.fail("fault injection into finit_module", format!("{e:#}"));
            return;
        }
    };
    // The first fault past tierkit's init may hit KUnit's suite filter,
    // which then prints KUNIT_FILTER_ENOMEM; the harness reads every
    // `kunit module:` line on the console as a KUnit failure. So during
    // the sweep the console shows only levels 0-2 (panic, BUG), and every
    // step reads the whole log from /dev/kmsg itself: a WARNING, BUG, oops
    // or any other KUnit error there fails this test, with the line.
    let console = ConsoleLevel::set(3);
    if let Err(e) = &console {
        r.note(format!("cannot lower the console log level ({e}): KUnit's message, if the sweep provokes it, reaches the harness"));
    }
    let base = MemSnapshot::take().unwrap_or_else(|_| start.clone());
    let swept = load_sweep(mem_mask, &base);
    if let Ok(mut c) = console {
        r.check(
            "console log level restored",
            c.restore().map(|_| ()).map_err(|e| e.to_string()),
        );
    }
    match swept {
        Ok(sw) => {
            let errnos: Vec<String> = sw.errnos.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let summary = format!(
                "{} injection points, {} failed loads ({}), {} tolerated{}, {}, {:.1} s",
                sw.points,
                sw.failed_loads,
                errnos.join(", "),
                sw.tolerated.len(),
                if sw.tolerated.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", sw.tolerated.join("; "))
                },
                match &sw.stopped_after_init {
                    Some(s) => format!("stopped at the first fault after tierkit's init: {s}"),
                    None => "ended with a load without a fault".into(),
                },
                sw.seconds
            );
            r.note(format!("finit_module: {summary}"));
            if sw.failures.is_empty() {
                r.ok_note("fault injection into finit_module", summary);
            } else {
                r.fail("fault injection into finit_module", sw.failures.join("; "));
            }
            r.set(
                "insmod_injection",
                json!({
                    "points": sw.points,
                    "failed_loads": sw.failed_loads,
                    "tolerated": sw.tolerated.len(),
                    "errnos": sw.errnos,
                    "stopped_after_init": sw.stopped_after_init,
                    "seconds": (sw.seconds * 10.0).round() / 10.0,
                }),
            );
            r.set("injection_points", json!({"finit_module": sw.points}));
        }
        Err(e) => {
            r.fail("fault injection into finit_module", e);
        }
    }
    r.check("restore fault-injection knobs", knobs.restore());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames() {
        assert_eq!(
            short_frame("_RNvXCs4rjbLuOLWz_7tierkitNtB2_7TierKitNtNtCs1EKtwoKEMO2_6kernel6module6Module4init+0x23/0x283 [tierkit]"),
            "Module::init [tierkit]"
        );
        assert_eq!(short_frame("do_one_initcall+0x5a/0x1f0"), "do_one_initcall");
        let lines: Vec<String> = [
            "FAULT_INJECTION: forcing a failure.",
            "Call Trace:",
            " <TASK>",
            " ? dump_stack_lvl+0x29/0x60",
            " ? should_fail_ex+0x15a/0x170",
            " ? __kmalloc_noprof+0x10/0x20",
            " ? __debugfs_create_file+0x1/0x2",
            " ? do_one_initcall+0x5a/0x1f0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            top_frames(&lines, 0),
            "__debugfs_create_file < do_one_initcall"
        );
        assert_eq!(trace_of(&lines, 0).len(), lines.len());
    }
}
