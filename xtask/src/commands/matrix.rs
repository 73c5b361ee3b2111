//! The boots of `cargo xtask test` as data, for CI engines that fan out:
//! `cargo xtask matrix` prints them as jobs (JSON), each an independent
//! `cargo xtask test ... --job ID` that boots exactly one of them;
//! `cargo xtask matrix --shard K/N` runs every N-th job here, one after the
//! other, and collects their results in `target/tierkit/shard-K-of-N/`;
//! `cargo xtask merge` ([`crate::merge`]) puts shards back together.

use anyhow::{bail, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::test::{self as testing, cmd_tests, Boot, TestRequest};
use crate::merge::{self, Combined};
// What `merge --expect` reads and writes too.
use crate::kernels::profile::{KernelKind, Profile};
pub use crate::merge::{read_job_ids, write_missing};
use crate::plan::topology::TopologyKind;
use crate::{say, util};

/// Which boots: the flags `test` selects its boots with.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub ci: bool,
    pub full: bool,
    pub profiles: Vec<Profile>,
    pub kernel: KernelKind,
    pub topology: Option<TopologyKind>,
}

impl Selection {
    /// The same flags for `cargo xtask test`.
    pub fn test_args(&self) -> Vec<String> {
        let mut v = vec!["test".to_string()];
        if self.ci {
            v.push("--ci".into());
            return v;
        }
        if self.full {
            v.push("--full".into());
        }
        if self.profiles.iter().any(|p| *p != Profile::Default) {
            v.push("--profile".into());
            v.push(
                self.profiles
                    .iter()
                    .map(|p| p.name())
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        if self.kernel != KernelKind::Tierkit {
            v.push("--kernel".into());
            v.push(self.kernel.name().into());
        }
        if let Some(t) = self.topology {
            v.push("--topology".into());
            v.push(t.name().into());
        }
        v
    }
}

/// The named matrices: each the boots of one `cargo xtask test` command
/// line ([`Named::selection`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Named {
    /// `test --ci`: what .ci/run boots (the default).
    Ci,
    /// `test`: the quick runs (numa, cxl).
    Quick,
    /// `test --full`: the default profile's whole suite on every run.
    Full,
    /// `test --profile debug`: the quick runs on the debug kernel.
    Debug,
    /// `test --full --profile debug`: the whole suite on the debug kernel.
    FullDebug,
    /// `test --kernel debian`: the quick runs on Debian's own kernel.
    Debian,
}

impl Named {
    /// The boots it names, as the flags of `test` select them.
    pub fn selection(self) -> Selection {
        let (ci, full, profiles, kernel) = match self {
            Named::Ci => (true, false, vec![], KernelKind::Tierkit),
            Named::Quick => (false, false, vec![], KernelKind::Tierkit),
            Named::Full => (false, true, vec![], KernelKind::Tierkit),
            Named::Debug => (false, false, vec![Profile::Debug], KernelKind::Tierkit),
            Named::FullDebug => (false, true, vec![Profile::Debug], KernelKind::Tierkit),
            Named::Debian => (false, false, vec![], KernelKind::Debian),
        };
        Selection {
            ci,
            full,
            profiles,
            kernel,
            topology: None,
        }
    }
}

/// What a job runs.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum JobKind {
    /// One boot of `test` (`test ... --job ID`).
    Boot,
    /// The tests of `run -- CMD` and `shell` ([`cmd_tests`]), which
    /// a whole `test` runs after its boots (`test ... --filter 'xtask-*'`).
    XtaskCmd,
}

/// The id of the job of the `run -- CMD` and `shell` tests (its results
/// are in `target/tierkit/test-xtask-cmd/`).
pub const CMD_JOB: &str = crate::report::kcidb::CMD_JOB;

/// One job: one boot, or the tests of `run -- CMD` and `shell`, as an
/// independent command.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Job {
    /// Stable id: the run directory's name after `test-` (`numa-full`,
    /// `numa-full-debug`, `cxl-debian`); also `test --job`'s value.
    pub id: String,
    /// For people: `debug numa-full`.
    pub name: String,
    pub kind: JobKind,
    /// The tests of a [`JobKind::XtaskCmd`] job (empty for a boot).
    pub tests: Vec<String>,
    pub profile: String,
    pub kernel: String,
    pub run: String,
    pub topology: String,
    /// The kernel it boots: `linux-source-7.3` (built by xtask) or
    /// Debian's release; with `kconfig/` it keys a CI cache of the build.
    pub kernel_version: String,
    /// The arguments after `cargo xtask`.
    pub args: Vec<String>,
    /// The whole command, `cargo xtask test ... --job ID --no-host-tests`.
    pub argv: Vec<String>,
    /// The same as one shell-quoted line.
    pub command: String,
    /// The boot itself: profile, kernel, run (`None` for the job of the
    /// `run -- CMD` and `shell` tests, which boots guests of its own).
    #[serde(skip)]
    pub boot: Option<Boot>,
}

/// The jobs of `boots` (as `sel` selected them), in order, then the job
/// of the `run -- CMD` and `shell` tests that the same `test` runs after
/// its boots ([`cmd_job`]), so that the jobs together count what one
/// `test` counts.
pub fn jobs(sel: &Selection, boots: &[Boot]) -> Vec<Job> {
    let mut v: Vec<Job> = boots
        .iter()
        .map(|(p, k, run)| {
            let id = testing::job_id(*p, *k, run);
            let mut args = sel.test_args();
            args.extend(["--job".into(), id.clone(), "--no-host-tests".into()]);
            Job {
                boot: Some((*p, *k, *run)),
                name: testing::run_label(*p, *k, run.name),
                kind: JobKind::Boot,
                tests: Vec::new(),
                profile: p.name().into(),
                kernel: k.name().into(),
                run: run.name.into(),
                topology: run.kind.name().into(),
                kernel_version: kernel_version(*k),
                ..job_command(id, args)
            }
        })
        .collect();
    v.extend(cmd_job(sel));
    v
}

/// `linux-source-7.3` (built by xtask) or Debian's release.
fn kernel_version(k: KernelKind) -> String {
    match k {
        KernelKind::Debian => crate::kernels::debian::RELEASE.into(),
        KernelKind::Tierkit => crate::kernels::kernel::DEFAULT_PACKAGE.into(),
    }
}

/// A job `id` running `cargo xtask ARGS`; the rest to be filled in.
fn job_command(id: String, args: Vec<String>) -> Job {
    let argv: Vec<String> = ["cargo", "xtask"]
        .iter()
        .map(|s| s.to_string())
        .chain(args.iter().cloned())
        .collect();
    Job {
        command: argv
            .iter()
            .map(|a| crate::util::validate::shell_quote(a))
            .collect::<Vec<_>>()
            .join(" "),
        id,
        name: String::new(),
        kind: JobKind::Boot,
        tests: Vec::new(),
        profile: String::new(),
        kernel: String::new(),
        run: String::new(),
        topology: String::new(),
        kernel_version: String::new(),
        args,
        argv,
        boot: None,
    }
}

/// The job of the `run -- CMD` and `shell` tests `sel`'s `test` runs
/// ([`cmd_tests::for_selection`]), if any: `test ... --filter 'xtask-*'
/// --no-host-tests`, which runs only them.
pub fn cmd_job(sel: &Selection) -> Option<Job> {
    let profiles = if sel.profiles.is_empty() {
        vec![Profile::Default]
    } else {
        sel.profiles.clone()
    };
    let tests = cmd_tests::for_selection(sel.ci, &profiles, sel.topology.map(|t| t.name()), None);
    if tests.is_empty() {
        return None;
    }
    let kernel = if sel.ci {
        KernelKind::Tierkit
    } else {
        sel.kernel
    };
    let mut args = sel.test_args();
    args.extend([
        "--filter".into(),
        "xtask-*".into(),
        "--no-host-tests".into(),
    ]);
    let mut topologies: Vec<&str> = tests.iter().map(|t| t.topology).collect();
    topologies.dedup();
    Some(Job {
        name: "xtask run/shell".into(),
        kind: JobKind::XtaskCmd,
        tests: tests.iter().map(|t| t.name.to_string()).collect(),
        profile: Profile::Default.name().into(),
        kernel: kernel.name().into(),
        run: CMD_JOB.into(),
        topology: topologies.join(","),
        kernel_version: kernel_version(kernel),
        ..job_command(CMD_JOB.into(), args)
    })
}

/// `--shard K/N`: the K-th of N shares (K from 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub k: usize,
    pub n: usize,
}

impl Shard {
    /// `K/N` with 1 <= K <= N.
    pub fn parse(s: &str) -> std::result::Result<Shard, String> {
        let (k, n) = s
            .split_once('/')
            .ok_or_else(|| "give K/N, e.g. 1/3 (the first of three shards)".to_string())?;
        let num = |x: &str, what: &str| {
            let x = x.trim();
            let digits = |d: &str| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit());
            x.parse::<usize>().map_err(|_| {
                if x.strip_prefix('-').is_some_and(digits) {
                    format!("{what} is negative ({x}): give K/N with 1 <= K <= N, e.g. 1/3")
                } else if digits(x) {
                    format!("{what} {x} is too large: give K/N with 1 <= K <= N, e.g. 1/3")
                } else {
                    format!("{what} must be a whole number, not {x:?}")
                }
            })
        };
        let (k, n) = (num(k, "K")?, num(n, "N")?);
        if n == 0 {
            return Err("N must be 1 or more".into());
        }
        if k == 0 || k > n {
            return Err(format!("K must be 1 to N ({n}), not {k}"));
        }
        Ok(Shard { k, n })
    }

    /// The jobs of this shard: K-1, K-1+N, K-1+2N, ... (0-based).
    pub fn pick<T: Clone>(&self, jobs: &[T]) -> Vec<T> {
        jobs.iter()
            .skip(self.k - 1)
            .step_by(self.n)
            .cloned()
            .collect()
    }

    /// `shard-K-of-N`.
    pub fn dir_name(&self) -> String {
        format!("shard-{}-of-{}", self.k, self.n)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

/// What `cargo xtask matrix` prints: `{"jobs": [...]}`.
pub fn to_json(jobs: &[Job]) -> String {
    #[derive(Serialize)]
    struct Matrix<'a> {
        jobs: &'a [Job],
    }
    serde_json::to_string_pretty(&Matrix { jobs }).expect("jobs serialize")
}

/// The files of a boot's run directory a shard keeps.
const KEPT: &[&str] = &[
    "results.json",
    "junit.xml",
    "kcidb.json",
    "console.log",
    "data.log",
    "qemu-cmd.txt",
];

/// Collects the results of `jobs` from the run directories under `runs`
/// (`<runs>/test-<id>/`) into `dest/<id>/`. A job without results (its
/// build or boot failed; `errors` may say why) gets a `results.json` and
/// `junit.xml` with one failure, `[harness] boot`, so that it still
/// counts.
pub fn collect(runs: &Path, jobs: &[Job], errors: &[(String, String)], dest: &Path) -> Result<()> {
    let _ = std::fs::remove_dir_all(dest);
    for job in jobs {
        let src = runs.join(format!("test-{}", job.id));
        let to = dest.join(&job.id);
        std::fs::create_dir_all(&to)?;
        let error = errors.iter().find(|(id, _)| id == &job.id).map(|(_, e)| e);
        if error.is_none() && src.join("results.json").is_file() {
            for f in KEPT {
                if src.join(f).is_file() {
                    std::fs::copy(src.join(f), to.join(f))?;
                }
            }
            continue;
        }
        let why = error
            .cloned()
            .unwrap_or_else(|| format!("no results in {}", src.display()));
        write_missing(&to, &job.id, why)?;
    }
    Ok(())
}

/// A shard's combination: the boots [`collect`] put in `dest`, their
/// summary, results, JUnit and KCIDB file written beside them
/// ([`Combined::write`]; `Some` problem, the report's own, if the KCIDB
/// file is invalid).
pub fn combine_shard(dest: &Path) -> Result<(Combined, Option<String>)> {
    let c = Combined::of(merge::find_boot_dirs(&[dest.to_path_buf()])?)?;
    let problem = c.write(dest)?;
    Ok((c, problem))
}

/// The output directory of shard `s`: `target/tierkit/shard-K-of-N/`.
pub fn shard_dir(s: Shard) -> PathBuf {
    util::out_dir().join(s.dir_name())
}

/// `cargo xtask matrix --shard K/N`: runs the shard's jobs one after the
/// other as `test` would (each job with the request its command line
/// makes: a boot, or the `run -- CMD` and `shell` tests), collects them
/// into [`shard_dir`] with the shard's combined summary, JUnit and KCIDB
/// file, and prints the totals line last.
pub(crate) fn run_shard(s: Shard, all: &[(Job, TestRequest)]) -> Result<ExitCode> {
    let picked = s.pick(all);
    let mine: Vec<Job> = picked.iter().map(|(j, _)| j.clone()).collect();
    if mine.is_empty() {
        bail!("--shard {s}: there are only {} jobs", all.len());
    }
    say!(
        "shard {s}: {} of {} jobs: {}",
        mine.len(),
        all.len(),
        mine.iter()
            .map(|j| j.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let wall = util::Timer::start();
    crate::util::setup::ensure()?;
    let mut errors: Vec<(String, String)> = Vec::new();
    let mut all_results = Vec::new();
    for (job, t) in picked {
        let mut results = testing::run_boots(&t.boots, None);
        if !t.cmd_tests.is_empty() {
            results.push(testing::run_cmd_tests(
                t.cmd_kernel,
                t.cmd_kvm,
                &t.cmd_tests,
            ));
        }
        for (_, r) in &results {
            if let Some(e) = &r.error {
                errors.push((job.id.clone(), e.clone()));
            }
        }
        all_results.extend(results);
    }
    let dest = shard_dir(s);
    collect(&util::out_dir(), &mine, &errors, &dest)?;
    let (c, problem) = combine_shard(&dest)?;
    println!();
    say!("shard {s}: results in {}", dest.display());
    let totals = c.totals;
    for l in &c.lines()[..c.boots.len()] {
        say!("{l}");
    }
    if let Some(p) = &problem {
        say!("error: the shard's KCIDB report: {p}");
    }
    testing::time_table(None, &all_results).report(wall.elapsed(), &dest);
    println!("{totals}");
    Ok(if totals.failed == 0 && problem.is_none() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_take_every_nth_job() {
        let v: Vec<u32> = (0..8).collect();
        let s = |k, n| Shard { k, n }.pick(&v);
        assert_eq!(s(1, 3), [0, 3, 6]);
        assert_eq!(s(2, 3), [1, 4, 7]);
        assert_eq!(s(3, 3), [2, 5]);
        assert_eq!(s(1, 1), v);
        assert_eq!(s(8, 8), [7]);
    }

    #[test]
    fn shard_parsing() {
        assert_eq!(Shard::parse("2/3"), Ok(Shard { k: 2, n: 3 }));
        assert!(Shard::parse("0/3")
            .unwrap_err()
            .contains("K must be 1 to N"));
        assert!(Shard::parse("4/3")
            .unwrap_err()
            .contains("K must be 1 to N"));
        assert!(Shard::parse("1/0").unwrap_err().contains("N must be"));
        assert!(Shard::parse("a/3").unwrap_err().contains("whole number"));
        assert!(Shard::parse("3").unwrap_err().contains("K/N"));
    }

    #[test]
    fn test_args_carry_the_selection() {
        let sel = Selection {
            full: true,
            profiles: vec![Profile::Default, Profile::Debug],
            kernel: KernelKind::Tierkit,
            ..Default::default()
        };
        assert_eq!(
            sel.test_args(),
            ["test", "--full", "--profile", "default,debug"]
        );
        let ci = Selection {
            ci: true,
            full: true,
            ..Default::default()
        };
        assert_eq!(ci.test_args(), ["test", "--ci"]);
    }
}
