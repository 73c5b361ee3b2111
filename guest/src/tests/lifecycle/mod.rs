//! The checks of `tk-test-lifecycle` (see its doc): tierkit's module
//! loaded and unloaded while it is used. Here: what a cycle holds across
//! an unload attempt ([`Hold`], [`cycle`]) and what is checked after it
//! ([`works`], [`gone`]); the fault-injection sweep of the module's load
//! in `load_sweep.rs`, the run and its phases in `run.rs`.

mod load_sweep;
mod run;

pub use load_sweep::*;
pub use run::*;

use crate::abi::ready::topology_and_weights;
use crate::abi::tk::{self, Tierkit, TK_MODE_WEIGHTED_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::errno::errno_name;
use crate::tests::faults::{
    crash_lines, finit_module, injected_faults, load_tierkit as load, module_line,
    unload_tierkit as unload, ConsoleLevel, FailNth, FaultKnobs, Kmsg, KunitFilter, MemSnapshot,
    TierkitWeights, KUNIT_FILTER_ENOMEM, TIERKIT_KO, TIERKIT_MODULE,
};
use crate::topology::weights::WeightDir;
use serde_json::json;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

pub const MODULE: &str = TIERKIT_MODULE;

pub const KO: &str = TIERKIT_KO;

pub const DEBUGFS_DIR: &str = "/sys/kernel/debug/tierkit";

/// Unload/load cycles.
pub const CYCLES: u32 = 100;

/// Unload/load cycles on the debug kernel (`tierkit.profile=debug`): each
/// load there costs about ten times as much (KASAN, lockdep), and KASAN and
/// kmemleak report a use after free or a leak at its first occurrence, which
/// the default kernel needs many cycles to show in free memory. Every kind
/// of hold is still held twice.
pub const DEBUG_CYCLES: u32 = 20;

/// The cycles this kernel gets: [`DEBUG_CYCLES`] on the debug profile.
pub fn cycles() -> u32 {
    if crate::init::cmdline::debug_profile() {
        DEBUG_CYCLES
    } else {
        CYCLES
    }
}

/// A KUnit filter no suite matches.
pub const NO_SUITES: &str = "tk-lifecycle-runs-no-kunit-suite";

/// Free memory per node at the end, within this fraction of the start.
pub const END_TOLERANCE: f64 = 0.01;

/// Per fault-injection step: free pages a node may have lost, and
/// SUnreclaim growth, against the start of the sweep (as tk-test-faults,
/// plus room for the module loader's own caches).
pub const STEP_FREE_TOL_PAGES: u64 = 1024;

pub const STEP_SLAB_TOL_KB: u64 = 2048;

/// No load has this many fault points.
pub const MAX_N: u32 = 5000;

/// What a cycle holds across the refused unload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    Nothing,
    Device,
    Mapping,
    Stats,
    WeightFile,
}

impl Hold {
    pub fn of_cycle(i: u32) -> Hold {
        match i % 10 {
            1 => Hold::Device,
            3 => Hold::Mapping,
            5 => Hold::Stats,
            7 => Hold::WeightFile,
            _ => Hold::Nothing,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Hold::Nothing => "nothing",
            Hold::Device => "an open /dev/tierkit",
            Hold::Mapping => "a mapping of /dev/tierkit (fd closed)",
            Hold::Stats => "an open debugfs stats file",
            Hold::WeightFile => "an open debugfs weight file",
        }
    }

    pub fn is_debugfs(self) -> bool {
        matches!(self, Hold::Stats | Hold::WeightFile)
    }
}

/// Something held open across an unload.
pub enum Held {
    File(File),
    Map(crate::linux::sys::Mapping),
}

/// The module is loaded and works: /proc/modules says Live, a file opens,
/// takes a policy, maps a page that reads zero, and the debugfs files are
/// there.
pub fn works(mem_mask: u64) -> Result<(), String> {
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
        crate::topology::node::nodes_of(mem_mask)
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
pub fn gone() -> Result<(), String> {
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

pub fn refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EWOULDBLOCK) | Some(libc::EBUSY)
    )
}

/// Keeps `f` open in a child that does nothing else, forever: closing a
/// debugfs file of an unloaded module calls into freed module text (an
/// oops in `full_proxy_release()`), which with oops=panic ends the guest.
/// The child closes everything else (so nobody waits for its output) and
/// sleeps, named [`crate::init::supervise::KEEP_COMM`] so that /init's
/// runner counts it as left behind but does not kill it.
pub fn quarantine(f: File) -> String {
    let keep = f.as_raw_fd();
    // SAFETY: fork in a single-threaded process; the child only makes
    // async-signal-safe calls.
    match unsafe { libc::fork() } {
        0 => {
            // SAFETY: plain syscalls on fds of this process.
            unsafe {
                libc::setsid();
                libc::prctl(
                    libc::PR_SET_NAME,
                    crate::init::supervise::KEEP_COMM.as_ptr(),
                );
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

pub fn hold(h: Hold, wd: &WeightDir, mem_mask: u64) -> Result<Option<Held>, String> {
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
pub fn cycle(i: u32, mem_mask: u64, debugfs_unloads: &mut Vec<String>) -> Result<Hold, String> {
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

const BIN: &str = "tk-test-lifecycle";

/// `tk-test-lifecycle`'s `main`.
pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let Some((topo, wd)) = topology_and_weights(&mut r) else {
        return r.finish();
    };
    run(&mut r, topo.memory_mask(), &wd);
    r.finish()
}
