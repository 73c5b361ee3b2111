//! The build cache's bookkeeping: `kernels/<key>/` is a finished build
//! when it holds the stamp [`STAMP`] (its Kbuild step count and time); a
//! build another process is running is waited for, and one finished by
//! hand with the same steps is adopted.

use super::{KernelConfig, STAMP};
use crate::{say, util};
use anyhow::Result;
use std::fs;
use std::path::Path;
use std::time::Duration;

/// Kbuild steps of a cold build of this config (used until one was counted).
const DEFAULT_STEPS: u64 = 1850;
/// What a finished build dir holds.
pub(super) const ARTIFACTS: [&str; 3] = ["arch/x86/boot/bzImage", "vmlinux", "Module.symvers"];

#[derive(serde::Serialize, serde::Deserialize, Default)]
pub(super) struct Stamp {
    pub(super) key: String,
    pub(super) version: String,
    pub(super) src: String,
    pub(super) steps: u64,
    pub(super) seconds: u64,
}

pub(super) fn read_stamp(dir: &Path) -> Option<Stamp> {
    serde_json::from_str(&fs::read_to_string(dir.join(STAMP)).ok()?).ok()
}

pub(super) fn write_stamp(dir: &Path, s: &Stamp) -> Result<()> {
    util::write_atomic(
        &dir.join(STAMP),
        serde_json::to_string_pretty(s)?.as_bytes(),
    )
}

/// PIDs of `make` processes (not ours) building into `out_dir`.
fn foreign_makes(out_dir: &Path) -> Vec<u32> {
    let me = std::process::id();
    let want_o = format!("O={}", out_dir.display());
    let mut pids = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return pids;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_make = args
            .first()
            .is_some_and(|a| a == "make" || a.ends_with("/make"));
        if is_make && args.iter().any(|a| a == &want_o) {
            pids.push(pid);
        }
    }
    pids
}

/// The most Kbuild steps a finished build here counted.
pub(super) fn expected_steps(kernels: &Path) -> u64 {
    fs::read_dir(kernels)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| read_stamp(&e.path()))
        .map(|s| s.steps)
        .filter(|&s| s > 0)
        .max()
        .unwrap_or(DEFAULT_STEPS)
}

/// Waits while another `make` (another shell, one started by hand) builds
/// into `out`.
pub(super) fn wait_for_foreign_make(out: &Path) {
    let others = foreign_makes(out);
    if !others.is_empty() {
        let pb = util::spinner(&format!(
            "another make (pid {others:?}) is building {}; waiting for it",
            out.display()
        ));
        while !foreign_makes(out).is_empty() {
            std::thread::sleep(Duration::from_secs(2));
        }
        pb.finish_and_clear();
    }
}

/// Whether all of [`ARTIFACTS`] are in `out`.
pub(super) fn artifacts_ok(out: &Path) -> bool {
    ARTIFACTS.iter().all(|a| out.join(a).is_file())
}

/// Whether `out` holds a build of `cfg` to use as it is: a stamped one
/// (`built`), or one started by hand with the same steps whose log ends
/// with `done` (adopted: stamped now). A `--kernel-src` tree's build is
/// always made again (the tree may have changed).
pub(super) fn reuse(cfg: &KernelConfig, out: &Path, built: bool) -> Result<bool> {
    if built && !cfg.src.custom {
        say!("kernel {} ({} profile, cached)", cfg.key, cfg.profile);
        return Ok(true);
    }
    if !built && artifacts_ok(out) && !cfg.src.custom {
        // A build started by hand with the same steps: its log ends with `done`.
        let log = fs::read_to_string(out.join("build.log")).unwrap_or_default();
        if log
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .is_some_and(|l| l.trim() == "done")
        {
            let steps = log
                .lines()
                .filter(|l| crate::kernels::kconfig::is_kbuild_step(l))
                .count() as u64;
            write_stamp(
                out,
                &Stamp {
                    key: cfg.key.clone(),
                    version: cfg.src.version.clone(),
                    src: cfg.src.dir.display().to_string(),
                    steps,
                    seconds: 0,
                },
            )?;
            say!(
                "kernel {} (adopted a finished build started by hand)",
                cfg.key
            );
            return Ok(true);
        }
    }
    Ok(false)
}
