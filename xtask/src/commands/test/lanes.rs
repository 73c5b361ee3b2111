//! `test --lanes 2`: the boots of one `test` on two lanes at once. A TCG
//! guest keeps about one of the host's CPUs busy (its vCPUs are mostly
//! idle in turn), so on a host with two or more CPUs two guests run side
//! by side in little more than the time of the longer one.
//!
//! Lane 1 is this process, as without lanes: its boots print as they run.
//! Each boot of lane 2 is a child `cargo xtask test ... --job ID
//! --no-host-tests`, one after another, its output in
//! `target/tierkit/lanes/ID.log` (one line here when it starts and when it
//! ends, the whole log after lane 1's boots) and its [`GuestResult`] in
//! `ID.json` beside it: the summary, the time table and the combined KCIDB
//! file take it as if it had run here.
//!
//! A guest keeps every page of host memory it has touched, and a long boot
//! touches all of its RAM: two lanes run only where the host's memory
//! holds the largest guest of each lane at once ([`decide`]).

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::JoinHandle;

use super::{job_id, run_label, TestBoot};
use crate::boot::GuestResult;
use crate::kernels::profile::{KernelKind, Profile};
use crate::{say, util};

/// The variable that tells a child `test --job ID` where to write its
/// [`GuestResult`].
pub const RESULT_ENV: &str = "TIERKIT_LANE_RESULT";

/// The boots lane 2 takes, by job id: the debug profile's two long boots
/// (its whole suite on numa and its quick cxl run: together about as long
/// as every other boot of `--ci`; Documentation/results/tests.md, "CI").
/// With another set of boots, every second one.
fn second_lane(boots: &[TestBoot]) -> Vec<bool> {
    let ids: Vec<String> = boots.iter().map(id).collect();
    let long = ["numa-full-debug", "cxl-debug"];
    // Lane 1 keeps at least one boot: the host tests' result counts with
    // its first.
    if long.iter().all(|l| ids.iter().any(|i| i == l)) && ids.len() > long.len() {
        ids.iter().map(|i| long.contains(&i.as_str())).collect()
    } else {
        (0..boots.len()).map(|i| i % 2 == 1).collect()
    }
}

fn id(b: &TestBoot) -> String {
    job_id(b.req.kernel.profile, b.req.kernel.kind, &b.run)
}

/// The directory of lane 2's logs and results.
pub fn dir() -> PathBuf {
    util::out_dir().join("lanes")
}

/// `boots` split in two, each with its place in `boots` (the summary keeps
/// that order): lane 1's and lane 2's.
#[allow(clippy::type_complexity)]
pub fn split(boots: &[TestBoot]) -> (Vec<(usize, TestBoot)>, Vec<(usize, TestBoot)>) {
    let (two, one): (Vec<_>, Vec<_>) = boots
        .iter()
        .cloned()
        .enumerate()
        .zip(second_lane(boots))
        .partition(|(_, second)| *second);
    let strip = |v: Vec<((usize, TestBoot), bool)>| v.into_iter().map(|(b, _)| b).collect();
    (strip(one), strip(two))
}

/// This command's arguments for a child that boots job `id` alone:
/// `--lanes` and `--repeat` dropped (one boot, one round), then `--job ID
/// --no-host-tests`.
pub fn child_args(args: &[String], id: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
            continue;
        }
        if a == "--lanes" || a == "--repeat" {
            skip = true;
            continue;
        }
        if a.starts_with("--lanes=") || a.starts_with("--repeat=") || a == "--no-host-tests" {
            continue;
        }
        out.push(a.clone());
    }
    out.extend(["--job".into(), id.into(), "--no-host-tests".into()]);
    out
}

/// One boot of lane 2, as a child; its result, or one failure naming its
/// log.
fn run_child(b: &TestBoot) -> (String, GuestResult) {
    let (p, k): (Profile, KernelKind) = (b.req.kernel.profile, b.req.kernel.kind);
    let label = run_label(p, k, b.run.name);
    let id = id(b);
    let log = dir().join(format!("{id}.log"));
    let json = dir().join(format!("{id}.json"));
    say!("[lane 2] {label}: started (its output: {})", log.display());
    let r = match child(&id, &log, &json) {
        Ok(r) => r,
        Err(e) => GuestResult::failed(format!("{e:#} (its output: {})", log.display())),
    };
    say!(
        "[lane 2] {label}: {}{}",
        super::status(&r),
        super::times(&r)
    );
    (label, r)
}

fn child(id: &str, log: &Path, json: &Path) -> Result<GuestResult> {
    std::fs::create_dir_all(dir())?;
    let _ = std::fs::remove_file(json);
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let exe = std::env::current_exe().context("this xtask's own path")?;
    let status = Command::new(exe)
        .args(child_args(&args, id))
        .env(RESULT_ENV, json)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .status()
        .context("starting the child xtask")?;
    let text = std::fs::read_to_string(json).with_context(|| {
        format!(
            "the child `--job {id}` ({status}) left no {}",
            json.display()
        )
    })?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", json.display()))
}

/// GiB of the host's memory kept for everything but the guests (its
/// kernel, xtask, cargo and the host tests, the page cache of the
/// initramfs it reads) when two guests run at once.
const HOST_RESERVE_GIB: u64 = 2;

/// GiB each QEMU takes besides its guest's RAM (TCG's translation cache,
/// its own heap).
const QEMU_GIB: u64 = 1;

/// Whether `t` runs on two lanes: `--lanes 2`, more than one boot, and
/// memory for the largest guest of each lane at once ([`need_gib`]);
/// otherwise one line says why not, and the boots run one after another.
pub(crate) fn decide(t: &super::TestRequest) -> bool {
    if t.lanes < 2 || t.boots.len() < 2 {
        return false;
    }
    let need = need_gib(&t.boots);
    match crate::util::validate::Host::this().mem_total_gib {
        Some(have) if have >= need => true,
        have => {
            say!(
                "lanes: one lane: two guests at once may take {need} GiB with their QEMUs and the host's own {HOST_RESERVE_GIB} (a guest keeps every page it has touched, and most touch all of theirs), and this host has {}",
                have.map_or("an unknown amount".into(), |g| format!("{g} GiB"))
            );
            false
        }
    }
}

/// The guest RAM of a boot, GiB: its nodes' memory and its CXL devices'.
fn guest_gib(b: &TestBoot) -> u64 {
    crate::plan::topology::Topology::new(&b.req.topology)
        .map_or(u64::MAX / 4, |t| t.total_mem_gib() + t.cxl_gib())
}

/// What two lanes of `boots` need of the host: the largest guest of each
/// lane, [`QEMU_GIB`] for each QEMU, and [`HOST_RESERVE_GIB`].
pub fn need_gib(boots: &[TestBoot]) -> u64 {
    let (mine, theirs) = split(boots);
    let max = |v: &[(usize, TestBoot)]| v.iter().map(|(_, b)| guest_gib(b)).max().unwrap_or(0);
    max(&mine) + max(&theirs) + 2 * QEMU_GIB + HOST_RESERVE_GIB
}

/// Lane 2, started: its boots run one after another, each a child, while
/// this process runs lane 1's.
pub(crate) struct Second {
    mine: Vec<(usize, TestBoot)>,
    /// Each of lane 2's boots: its place in the boots, its job id, label
    /// and result.
    handle: JoinHandle<Vec<(usize, String, String, GuestResult)>>,
}

/// Splits `boots` ([`split`]) and starts lane 2.
pub(crate) fn begin(boots: &[TestBoot]) -> Second {
    let (mine, theirs) = split(boots);
    say!(
        "lanes: {} boot(s) here, {} at the same time on a second lane ({})",
        mine.len(),
        theirs.len(),
        dir().display()
    );
    let handle = std::thread::spawn(move || {
        theirs
            .into_iter()
            .map(|(i, b)| {
                let (label, r) = run_child(&b);
                (i, id(&b), label, r)
            })
            .collect()
    });
    Second { mine, handle }
}

type Results = Vec<(String, GuestResult)>;

impl Second {
    /// Lane 1's boots, for this process to run.
    pub(crate) fn mine(&self) -> Vec<TestBoot> {
        self.mine.iter().map(|(_, b)| b.clone()).collect()
    }

    /// Waits for lane 2, prints its logs, and returns every result in the
    /// order of the boots: `here` is lane 1's boots' results in their
    /// order, then anything else this process ran (the run/shell tests),
    /// which stays last.
    pub(crate) fn finish(self, mut here: Results) -> anyhow::Result<Results> {
        let done = self
            .handle
            .join()
            .map_err(|_| anyhow::anyhow!("lane 2's thread panicked"))?;
        print_logs(&done);
        let rest = here.split_off(self.mine.len().min(here.len()));
        let mut all: Vec<(usize, String, GuestResult)> = self
            .mine
            .iter()
            .zip(here)
            .map(|((i, _), (l, r))| (*i, l, r))
            .chain(done.into_iter().map(|(i, _, l, r)| (i, l, r)))
            .collect();
        all.sort_by_key(|(i, _, _)| *i);
        Ok(all
            .into_iter()
            .map(|(_, l, r)| (l, r))
            .chain(rest)
            .collect())
    }
}

/// Prints each of lane 2's logs, whole, after lane 1's boots.
fn print_logs(done: &[(usize, String, String, GuestResult)]) {
    for (_, id, label, _) in done {
        let log = dir().join(format!("{id}.log"));
        println!();
        say!(
            "===== lane 2: {label}: its output ({}) =====",
            log.display()
        );
        match std::fs::read_to_string(&log) {
            Ok(t) => print!("{t}"),
            Err(e) => say!("(cannot read {}: {e})", log.display()),
        }
    }
}

/// Writes `r` where the parent asked ([`RESULT_ENV`]), if it did.
pub(crate) fn write_result(r: &GuestResult) -> Result<()> {
    if let Some(p) = std::env::var_os(RESULT_ENV) {
        let p = PathBuf::from(p);
        util::write_atomic(&p, serde_json::to_string(r)?.as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn a_child_boots_one_job_without_lanes_rounds_or_host_tests() {
        assert_eq!(
            child_args(
                &s(&[
                    "test",
                    "--ci",
                    "--lanes",
                    "2",
                    "--filter",
                    "tk-test-a",
                    "--repeat=3"
                ]),
                "cxl-debug"
            ),
            s(&[
                "test",
                "--ci",
                "--filter",
                "tk-test-a",
                "--job",
                "cxl-debug",
                "--no-host-tests"
            ])
        );
        assert_eq!(
            child_args(&s(&["test", "--ci", "--no-host-tests", "--lanes=2"]), "x"),
            s(&["test", "--ci", "--job", "x", "--no-host-tests"])
        );
    }

    /// Every result in the order of the boots, whichever lane ran it, and
    /// what ran here after the boots last.
    #[test]
    fn results_keep_the_boots_order() {
        let f = crate::boot::GuestFlags::default();
        let boots: Vec<TestBoot> = crate::plan::runs::ci_boots()
            .iter()
            .take(3)
            .map(|b| TestBoot::new(&f, b).unwrap())
            .collect();
        let r = |l: &str| (l.to_string(), GuestResult::failed(l.into()));
        let second = Second {
            mine: vec![(0, boots[0].clone()), (2, boots[2].clone())],
            handle: std::thread::spawn(|| {
                vec![(
                    1,
                    "none".to_string(),
                    "b1".to_string(),
                    GuestResult::failed("b1".into()),
                )]
            }),
        };
        let all = second.finish(vec![r("b0"), r("b2"), r("cmd")]).unwrap();
        let labels: Vec<&str> = all.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels, ["b0", "b1", "b2", "cmd"]);
    }

    #[test]
    fn the_debug_profiles_two_long_boots_take_lane_2() {
        let f = crate::boot::GuestFlags::default();
        let boots: Vec<TestBoot> = crate::plan::runs::ci_boots()
            .iter()
            .map(|b| TestBoot::new(&f, b).unwrap())
            .collect();
        let (mine, theirs) = split(&boots);
        let ids: Vec<String> = theirs.iter().map(|(_, b)| id(b)).collect();
        assert_eq!(ids, ["numa-full-debug", "cxl-debug"]);
        assert_eq!(mine.len() + theirs.len(), boots.len());
        // cxl (8 GiB of DRAM, 4 of CXL memory) and its QEMU on each lane:
        // more than a 24 GiB host (23 whole GiB in MemTotal) has, which
        // runs them on one lane.
        assert_eq!(need_gib(&boots), 12 + 12 + 2 + 2);
    }
}
