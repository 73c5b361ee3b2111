//! Combining the results of several boots: `cargo xtask merge DIR...`
//! (the shards of `cargo xtask matrix --shard`, downloaded from CI) and the
//! combined KCIDB file of a `test` over several boots.
//!
//! A boot's results are a directory with its `results.json` (and, when it
//! got that far, `junit.xml` and `kcidb.json`): a run directory
//! `target/tierkit/test-<job>/`, or `<shard dir>/<job>/`. The job is the
//! directory's name without `test-`.

use anyhow::{bail, Context, Result};
use quick_junit::Report;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::report::summary::{Totals, UserTest};
use crate::{report::kcidb, say, util};

/// One boot's results on disk.
#[derive(Clone, Debug)]
pub struct BootDir {
    pub job: String,
    pub dir: PathBuf,
    pub totals: Totals,
}

/// The part of `results.json` merge reads.
#[derive(Deserialize)]
struct ResultsTotals {
    totals: Totals,
}

impl BootDir {
    /// The boot whose results are in `dir` (its `results.json`).
    pub fn read(dir: &Path) -> Result<BootDir> {
        let path = dir.join("results.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let r: ResultsTotals =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .with_context(|| format!("{}: no directory name", dir.display()))?;
        Ok(BootDir {
            job: name.strip_prefix("test-").unwrap_or(name).to_string(),
            dir: dir.to_path_buf(),
            totals: r.totals,
        })
    }
}

/// Whether `dir` holds one boot's results: a `results.json` that is not a
/// combination's (those of a shard or a merge list their `boots`).
fn is_boot_dir(dir: &Path) -> bool {
    #[derive(Deserialize)]
    struct Probe {
        boots: Option<serde_json::Value>,
    }
    let Ok(text) = std::fs::read_to_string(dir.join("results.json")) else {
        return false;
    };
    serde_json::from_str::<Probe>(&text).is_ok_and(|p| p.boots.is_none())
}

/// Every boot directory under `roots` ([`is_boot_dir`]; not looked into
/// further), in path order. A job found twice is refused.
pub fn find_boot_dirs(roots: &[PathBuf]) -> Result<Vec<BootDir>> {
    fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<()> {
        if is_boot_dir(dir) {
            out.push(dir.to_path_buf());
            return Ok(());
        }
        if depth == 0 {
            return Ok(());
        }
        let mut subdirs: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        subdirs.sort();
        for d in subdirs {
            walk(&d, depth - 1, out)?;
        }
        Ok(())
    }
    let mut dirs = Vec::new();
    for root in roots {
        walk(root, 4, &mut dirs)?;
    }
    let mut boots: Vec<BootDir> = Vec::new();
    for d in dirs {
        let b = BootDir::read(&d)?;
        if let Some(other) = boots.iter().find(|o| o.job == b.job) {
            bail!(
                "job {} is in both {} and {}: give each shard's results once",
                b.job,
                other.dir.display(),
                b.dir.display()
            );
        }
        boots.push(b);
    }
    Ok(boots)
}

/// Several boots' results as one.
pub struct Combined {
    pub boots: Vec<BootDir>,
    pub totals: Totals,
    /// Every boot's `kcidb.json`, combined ([`kcidb::combine`]).
    pub kcidb: kcidb::Document,
    /// Every boot's `junit.xml`: each suite renamed `<job>/<suite>`.
    pub junit: Report,
}

/// One boot's per-job line of a summary.
#[derive(Serialize)]
struct BootLine<'a> {
    job: &'a str,
    dir: String,
    totals: Totals,
}

impl Combined {
    /// Reads and combines `boots`.
    pub fn of(boots: Vec<BootDir>) -> Result<Combined> {
        let mut totals = Totals::default();
        let mut docs = Vec::new();
        let mut junit = Report::new("tierkit");
        for b in &boots {
            totals = totals + b.totals;
            let k = b.dir.join("kcidb.json");
            if k.is_file() {
                docs.push(kcidb::read(&k)?);
            }
            let j = b.dir.join("junit.xml");
            if j.is_file() {
                let text = std::fs::read_to_string(&j)
                    .with_context(|| format!("reading {}", j.display()))?;
                let r = Report::deserialize_from_str(&text)
                    .with_context(|| format!("parsing {}", j.display()))?;
                for mut s in r.test_suites {
                    s.name = format!("{}/{}", b.job, s.name.as_str()).into();
                    junit.add_test_suite(s);
                }
            }
        }
        Ok(Combined {
            kcidb: kcidb::combine(&docs),
            boots,
            totals,
            junit,
        })
    }

    /// The lines a summary prints: one per boot, the totals line last.
    pub fn lines(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .boots
            .iter()
            .map(|b| {
                let status = if b.totals.failed == 0 { "ok" } else { "FAILED" };
                format!("{}: {status}: {}", b.job, b.totals.labelled(&b.job))
            })
            .collect();
        v.push(self.totals.to_string());
        v
    }

    /// Writes `kcidb.json`, `junit.xml`, `results.json` (totals and each
    /// boot's) and `summary.txt` into `out`, and validates the KCIDB file:
    /// `Some` problem (the report's own) if it is invalid.
    pub fn write(&self, out: &Path) -> Result<Option<String>> {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        let k = out.join("kcidb.json");
        kcidb::write(&k, &self.kcidb)?;
        let mut xml = self.junit.to_string()?;
        xml.push('\n');
        util::write_atomic(&out.join("junit.xml"), xml.as_bytes())?;
        let boots: Vec<BootLine> = self
            .boots
            .iter()
            .map(|b| BootLine {
                job: &b.job,
                dir: b.dir.display().to_string(),
                totals: b.totals,
            })
            .collect();
        let json = serde_json::json!({ "totals": self.totals, "boots": boots });
        util::write_atomic(
            &out.join("results.json"),
            format!("{}\n", serde_json::to_string_pretty(&json)?).as_bytes(),
        )?;
        util::write_atomic(
            &out.join("summary.txt"),
            format!("{}\n", self.lines().join("\n")).as_bytes(),
        )?;
        Ok(kcidb::check_files(&[k.as_path()]))
    }
}

/// The combined KCIDB file of a `test` over several boots: every
/// `kcidb.json` of `dirs` into `path`, validated; `Some` problem (the
/// report's own, not a test's) if that did not work.
pub fn write_combined_kcidb(dirs: &[&Path], path: &Path) -> Option<String> {
    let mut docs = Vec::new();
    for d in dirs {
        let k = d.join("kcidb.json");
        if k.is_file() {
            match kcidb::read(&k) {
                Ok(doc) => docs.push(doc),
                Err(e) => return Some(format!("{e:#}")),
            }
        }
    }
    if let Err(e) = kcidb::write(path, &kcidb::combine(&docs)) {
        return Some(format!("writing {}: {e:#}", path.display()));
    }
    say!("KCIDB of every boot: {}", path.display());
    kcidb::check_files(&[path])
}

/// The default `--out` of `merge`.
pub fn default_out() -> PathBuf {
    util::out_dir().join("merged")
}

/// `cargo xtask merge DIR...`: the boots under `roots` as one summary,
/// JUnit and KCIDB file in `out`; the totals line last.
pub fn cmd_merge(roots: &[PathBuf], out: &Path, expect: Option<&Path>) -> Result<ExitCode> {
    let mut boots = find_boot_dirs(roots)?;
    if let Some(file) = expect {
        // Expected jobs without results (their runner died, their upload
        // failed) count as one failure each.
        let missing_dir = out.join("missing");
        let _ = std::fs::remove_dir_all(&missing_dir);
        for id in read_job_ids(file)? {
            if !boots.iter().any(|b| b.job == id) {
                let to = missing_dir.join(&id);
                let why = format!("no results for job {id} under {}", show_paths(roots));
                say!("{why}");
                write_missing(&to, &id, why)?;
                boots.push(BootDir::read(&to)?);
            }
        }
    }
    if boots.is_empty() {
        bail!("no results.json under {}", show_paths(roots));
    }
    let c = Combined::of(boots)?;
    let problem = c.write(out)?;
    say!(
        "merged {} boot(s) into {}: summary.txt, results.json, junit.xml, kcidb.json",
        c.boots.len(),
        out.display()
    );
    if let Some(p) = &problem {
        say!("error: the merged KCIDB report: {p}");
    }
    for l in &c.lines() {
        println!("{l}");
    }
    Ok(if c.totals.failed == 0 && problem.is_none() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn show_paths(p: &[PathBuf]) -> String {
    p.iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Refuses, in one line, `merge`'s arguments that cannot work: a DIR that
/// is not a directory or holds no results, an `--out` that is a file.
pub fn check_args(roots: &[PathBuf], out: Option<&Path>, expect: Option<&Path>) -> Result<()> {
    if let Some(e) = expect {
        read_job_ids(e).map_err(|err| anyhow::anyhow!("--expect {err:#}"))?;
    }
    for r in roots {
        if !r.is_dir() {
            bail!("merge {}: not a directory", r.display());
        }
        // With --expect, a directory without results is every job missing.
        if expect.is_none() && find_boot_dirs(std::slice::from_ref(r))?.is_empty() {
            bail!(
                "merge {}: no results.json under it (a shard's output directory, or a run directory of `cargo xtask test`)",
                r.display()
            );
        }
    }
    if let Some(o) = out {
        if o.exists() && !o.is_dir() {
            bail!("--out {}: not a directory", o.display());
        }
    }
    find_boot_dirs(roots).map(|_| ())
}

/// The results of a job that left none: `results.json`, `junit.xml` and
/// `kcidb.json` ([`crate::report::kcidb::missing_document`]) in `to` with one
/// failure, `[harness] boot`, saying `why`.
pub fn write_missing(to: &Path, id: &str, why: String) -> Result<()> {
    std::fs::create_dir_all(to)?;
    let failure = UserTest {
        name: "[harness] boot".into(),
        passed: false,
        skipped: false,
        rc: 1,
        output_tail: why,
        duration_ms: 0,
        reason: None,
        ..Default::default()
    };
    let run = crate::judge::ktap::Run::default();
    let failures = std::slice::from_ref(&failure);
    crate::report::summary::write_json(&to.join("results.json"), &run, failures)?;
    crate::report::summary::write_junit(
        &to.join("junit.xml"),
        &format!("tierkit-{id}"),
        &run,
        failures,
    )?;
    let doc = crate::report::kcidb::missing_document(
        &crate::report::kcidb::Source::of_repo(),
        id,
        &failure,
    );
    crate::report::kcidb::write(&to.join("kcidb.json"), &doc)
}

/// The job ids of a `cargo xtask matrix` JSON file: `{"jobs": [...]}` or
/// the bare list (what the GitHub workflow passes on).
pub fn read_job_ids(path: &Path) -> Result<Vec<String>> {
    #[derive(serde::Deserialize)]
    struct Id {
        id: String,
    }
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum List {
        Wrapped { jobs: Vec<Id> },
        Bare(Vec<Id>),
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let list: List = serde_json::from_str(&text)
        .with_context(|| format!("{}: not the JSON of cargo xtask matrix", path.display()))?;
    let ids = match list {
        List::Wrapped { jobs } | List::Bare(jobs) => jobs,
    };
    Ok(ids.into_iter().map(|j| j.id).collect())
}
