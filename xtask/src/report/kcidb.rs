//! KCIDB output: the results of `cargo xtask test` in the Kernel CI
//! reporting schema v5.3 (the `kcidb-io` package's `kcidb_io.schema.v05_03`),
//! so that a KernelCI dashboard or any KCIDB consumer can take them.
//!
//! One document per boot, `target/tierkit/<run dir>/kcidb.json`, beside
//! `results.json`; a `test` over several boots also writes their
//! combination ([`combine`]) to `target/tierkit/kcidb.json`.
//!
//! Objects, all with the origin [`ORIGIN`] (`tierkit`):
//! - one checkout: tierkit's git commit (`tierkit:<commit>`, `+dirty` when
//!   the work tree has uncommitted changes), with the kernel sources booted
//!   in `misc.kernel_sources`;
//! - one build per kernel (`tierkit:<commit12>:<default|debug|debian>`);
//! - one test per [`records::walk`] record, the same list JUnit is written
//!   from: KUnit leaf cases, kernel reports and KTAP problems, userspace
//!   tests (`tierkit:<commit12>:<boot start>:<job>:<n>`).

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

use crate::judge::ktap::Run;
use crate::judge::records::UserTest;
use crate::judge::records::{self, Outcome, Record};
use crate::kernels::profile::{KernelKind, Profile};
use crate::util;

/// The KCIDB origin of everything tierkit reports.
pub const ORIGIN: &str = "tierkit";
/// The schema version written.
pub const VERSION: Version = Version { major: 5, minor: 3 };
/// The schema's `maxLength` of a `log_excerpt`, in characters.
pub const LOG_EXCERPT_MAX: usize = 16384;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
}

/// A KCIDB report: `version` and the objects.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Document {
    pub version: Version,
    #[serde(default)]
    pub checkouts: Vec<Checkout>,
    #[serde(default)]
    pub builds: Vec<Build>,
    #[serde(default)]
    pub tests: Vec<Test>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkout {
    pub id: String,
    pub origin: String,
    pub tree_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_commit_hash: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_repository_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_repository_branch: Option<String>,
    pub misc: CheckoutMisc,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckoutMisc {
    /// Uncommitted changes in the work tree when the tests ran.
    pub dirty: bool,
    /// The kernel sources the builds came from.
    pub kernel_sources: Vec<KernelSource>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Build {
    pub checkout_id: String,
    pub id: String,
    pub origin: String,
    pub architecture: String,
    pub config_name: String,
    pub status: String,
    pub misc: serde_json::Value,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Test {
    pub build_id: String,
    pub id: String,
    pub origin: String,
    pub path: String,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration: Option<f64>,
    pub log_excerpt: String,
    pub environment: Environment,
    pub misc: TestMisc,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub comment: String,
    pub misc: serde_json::Value,
}

/// Where a test ran: the boot ([`Boot::job`]) and the test's own names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestMisc {
    pub job: String,
    pub run: String,
    pub profile: String,
    pub kernel: String,
    pub topology: String,
    /// The record's group and name as tierkit prints them (the `path` has
    /// every character KCIDB does not allow replaced by `_`).
    pub group: String,
    pub name: String,
}

/// The source tree the tests ran from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Source {
    pub commit: Option<String>,
    pub dirty: bool,
    pub repository_url: Option<String>,
    pub branch: Option<String>,
}

impl Source {
    /// tierkit's own git work tree (`util::repo_root`); nothing if git
    /// is missing or this is no work tree.
    pub fn of_repo() -> Source {
        let root = util::repo_root();
        let git = |args: &[&str]| {
            let mut v = vec!["-C", root.to_str().unwrap_or(".")];
            v.extend_from_slice(args);
            util::cmd_stdout("git", &v).filter(|s| !s.is_empty())
        };
        Source {
            commit: git(&["rev-parse", "HEAD"]),
            dirty: git(&["status", "--porcelain", "--untracked-files=no"]).is_some(),
            repository_url: git(&["remote", "get-url", "origin"]).and_then(|u| https_url(&u)),
            branch: git(&["rev-parse", "--abbrev-ref", "HEAD"]).filter(|b| b != "HEAD"),
        }
    }

    /// The checkout's id: `tierkit:<commit>[+dirty]`.
    pub fn checkout_id(&self) -> String {
        let commit = self.commit.as_deref().unwrap_or("unknown");
        let dirty = if self.dirty { "+dirty" } else { "" };
        format!("{ORIGIN}:{commit}{dirty}")
    }

    fn short(&self) -> &str {
        self.commit
            .as_deref()
            .map_or("unknown", |c| &c[..c.len().min(12)])
    }
}

/// A git remote as the `https://` URL KCIDB wants: `https://` as is,
/// `git@host:path` and `ssh://[user@]host/path` rewritten; `None` for
/// anything else (a local path, `file://`).
pub fn https_url(remote: &str) -> Option<String> {
    let r = remote.trim();
    if r.starts_with("https://") {
        return Some(r.to_string());
    }
    let (host, path) = if let Some(rest) = r.strip_prefix("ssh://") {
        // ssh://[user@]host[:port]/path
        let rest = rest.split_once('@').map_or(rest, |(_, h)| h);
        let (host, path) = rest.split_once('/')?;
        (host.split(':').next()?, path)
    } else if !r.contains("://") {
        // user@host:path
        let (user_host, path) = r.split_once(':')?;
        (user_host.split_once('@')?.1, path)
    } else {
        return None;
    };
    (!host.is_empty() && !path.is_empty()).then(|| format!("https://{host}/{path}"))
}

pub use crate::judge::facts::{Boot, CmdTestsFacts, KernelSource};

/// Now, as KCIDB's `date-time`.
pub fn now_rfc3339() -> String {
    chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A test path component: KCIDB allows `[a-zA-Z0-9_-]`; anything else
/// becomes `_`. Empty components are dropped.
fn path_of(r: &Record) -> String {
    r.path()
        .split('.')
        .filter(|c| !c.is_empty())
        .map(|c| {
            c.chars()
                .map(|ch| {
                    if ch.is_ascii_alphanumeric() || ch == '_' || ch == '-' {
                        ch
                    } else {
                        '_'
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join(".")
}

fn status_of(o: Outcome) -> &'static str {
    match o {
        Outcome::Pass => "PASS",
        Outcome::Skip => "SKIP",
        Outcome::Fail => "FAIL",
        Outcome::Error => "ERROR",
    }
}

/// The record's status line, message, then its console lines (a KUnit
/// case's, from `console`, the boot's console log) or else its
/// description and output, at most [`LOG_EXCERPT_MAX`] characters: the
/// head (status and message) is kept, and the end of the rest (where the
/// failure usually is).
pub fn log_excerpt(r: &Record, job: &str, console: Option<&[&str]>) -> String {
    let mut head = format!("{} {} ({job})", status_of(r.outcome), r.path());
    if let Some(m) = &r.message {
        head.push('\n');
        head.push_str(m);
    }
    let lines = match (console, r.console_lines) {
        (Some(c), Some((from, to))) if from >= 1 && to <= c.len() => {
            Some(c[from - 1..to].join("\n"))
        }
        _ => None,
    };
    let body: Vec<&str> = match &lines {
        Some(l) => vec![l.as_str()],
        None => [&r.description, &r.output]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect(),
    };
    let text = if body.is_empty() {
        head
    } else {
        bound(&head, &body.join("\n"))
    };
    // The schema allows no NUL anywhere.
    text.replace('\0', "\u{fffd}")
}

/// `head`, a newline and `body`, cut to [`LOG_EXCERPT_MAX`] characters by
/// leaving out the start of `body` (and, if `head` alone is too long, its
/// end).
fn bound(head: &str, body: &str) -> String {
    let head: String = head.chars().take(LOG_EXCERPT_MAX / 2).collect();
    let total = head.chars().count() + 1 + body.chars().count();
    if total <= LOG_EXCERPT_MAX {
        return format!("{head}\n{body}");
    }
    let marker = "[... earlier output cut ...]\n";
    let room = LOG_EXCERPT_MAX - head.chars().count() - 1 - marker.chars().count();
    let skip = body.chars().count() - room;
    let tail: String = body.chars().skip(skip).collect();
    format!("{head}\n{marker}{tail}")
}

/// The KCIDB document of one boot: its checkout, its build and a test per
/// [`records::walk`] record.
pub fn document(src: &Source, boot: &Boot, run: &Run, extra: &[UserTest]) -> Document {
    document_with_console(src, boot, run, extra, None)
}

/// [`document`], the KUnit cases' log excerpts with their lines of
/// `console` (the boot's console log).
pub fn document_with_console(
    src: &Source,
    boot: &Boot,
    run: &Run,
    extra: &[UserTest],
    console: Option<&str>,
) -> Document {
    let console: Option<Vec<&str>> = console.map(|c| c.lines().collect());
    let checkout_id = src.checkout_id();
    let build_id = format!("{ORIGIN}:{}:{}", src.short(), boot.build_name());
    let stamp: String = boot
        .start_time
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    let checkout = Checkout {
        id: checkout_id.clone(),
        origin: ORIGIN.into(),
        tree_name: "tierkit".into(),
        git_commit_hash: src.commit.clone(),
        git_repository_url: src.repository_url.clone(),
        git_repository_branch: src.branch.clone(),
        misc: CheckoutMisc {
            dirty: src.dirty,
            kernel_sources: vec![boot.kernel_source.clone()],
        },
    };
    let build = Build {
        checkout_id,
        id: build_id.clone(),
        origin: ORIGIN.into(),
        architecture: "x86_64".into(),
        config_name: boot.build_name().into(),
        status: "PASS".into(),
        misc: serde_json::json!({
            "profile": boot.profile.name(),
            "kernel": boot.kernel.name(),
            "kernel_source": boot.kernel_source,
            "kernel_key": boot.kernel_key,
        }),
    };
    let environment = Environment {
        comment: format!("QEMU x86_64 ({}): {}", boot.accel, boot.topology_detail),
        misc: serde_json::json!({ "topology": boot.topology, "accel": boot.accel }),
    };
    let tests = records::walk(run, extra)
        .iter()
        .enumerate()
        .map(|(n, r)| Test {
            build_id: build_id.clone(),
            id: format!("{ORIGIN}:{}:{stamp}:{}:{n}", src.short(), boot.job),
            origin: ORIGIN.into(),
            path: path_of(r),
            status: status_of(r.outcome).into(),
            start_time: Some(boot.start_time.clone()),
            duration: r.duration_ms.map(|ms| ms as f64 / 1000.0),
            log_excerpt: log_excerpt(r, &boot.job, console.as_deref()),
            environment: environment.clone(),
            misc: TestMisc {
                job: boot.job.clone(),
                run: boot.run.clone(),
                profile: boot.profile.name().into(),
                kernel: boot.kernel.name().into(),
                topology: boot.topology.clone(),
                group: r.group.clone(),
                name: r.name.clone(),
            },
        })
        .collect();
    Document {
        version: VERSION,
        checkouts: vec![checkout],
        builds: vec![build],
        tests,
    }
}

/// Several documents as one: each checkout and build once (by id; a
/// checkout's kernel sources are the union), every test.
pub fn combine<'a>(docs: impl IntoIterator<Item = &'a Document>) -> Document {
    let mut out = Document {
        version: VERSION,
        checkouts: Vec::new(),
        builds: Vec::new(),
        tests: Vec::new(),
    };
    for d in docs {
        for c in &d.checkouts {
            match out.checkouts.iter_mut().find(|o| o.id == c.id) {
                Some(o) => {
                    for k in &c.misc.kernel_sources {
                        if !o.misc.kernel_sources.contains(k) {
                            o.misc.kernel_sources.push(k.clone());
                        }
                    }
                }
                None => out.checkouts.push(c.clone()),
            }
        }
        for b in &d.builds {
            if !out.builds.iter().any(|o| o.id == b.id) {
                out.builds.push(b.clone());
            }
        }
        out.tests.extend(d.tests.iter().cloned());
    }
    out
}

/// Writes `doc` to `path` (pretty JSON, atomically).
pub fn write(path: &Path, doc: &Document) -> Result<()> {
    let mut text = serde_json::to_string_pretty(doc)?;
    text.push('\n');
    util::write_atomic(path, text.as_bytes())
}

/// Reads a document `write` wrote.
pub fn read(path: &Path) -> Result<Document> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Writes one boot's `kcidb.json` to `path` and validates it with
/// kcidb-io ([`crate::util::pyenv::validate_kcidb`]); `Some` problem when
/// that did not work: the report's own, which leaves the verdict as it is.
pub fn write_boot(path: &Path, boot: &Boot, run: &Run, extra: &[UserTest]) -> Option<String> {
    // The KUnit cases' excerpts come from the console log beside it.
    let console = std::fs::read(path.with_file_name("console.log"))
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned());
    let doc = document_with_console(&Source::of_repo(), boot, run, extra, console.as_deref());
    if let Err(e) = write(path, &doc) {
        return Some(format!("writing {}: {e:#}", path.display()));
    }
    let failure = check_files(&[path]);
    if failure.is_none() {
        crate::say!(
            "KCIDB: {} is valid (kcidb-io, schema v{}.{}; {} tests)",
            path.display(),
            VERSION.major,
            VERSION.minor,
            doc.tests.len()
        );
    }
    failure
}

/// Validates KCIDB files; `Some` problem naming each invalid one (or why
/// the validator could not run).
pub fn check_files(files: &[&Path]) -> Option<String> {
    match crate::util::pyenv::validate_kcidb(files) {
        Ok(bad) if bad.is_empty() => None,
        Ok(bad) => Some(
            bad.iter()
                .map(|(f, why)| format!("{} is not valid KCIDB v5.3: {why}", f.display()))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        Err(e) => Some(format!(
            "could not validate {}: {e:#}",
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The KCIDB document of a job that left no results (its build or boot
/// failed, its runner died): the `[harness] boot` failure as its one test,
/// of the build its id names (`-debug`, `-debian`, or the default).
pub fn missing_document(src: &Source, job: &str, failure: &UserTest) -> Document {
    let kernel = if job.ends_with("-debian") {
        KernelKind::Debian
    } else {
        KernelKind::Tierkit
    };
    let run = job.trim_end_matches("-debian");
    let profile = if run.ends_with("-debug") {
        Profile::Debug
    } else {
        Profile::Default
    };
    let run = run.trim_end_matches("-debug");
    let topology = run.split('-').next().unwrap_or(run);
    let boot = Boot {
        job: job.into(),
        run: run.into(),
        profile,
        kernel,
        topology: topology.into(),
        topology_detail: "no results: the job did not finish".into(),
        accel: "unknown".into(),
        kernel_source: KernelSource {
            name: "unknown".into(),
            version: "unknown".into(),
        },
        kernel_key: String::new(),
        start_time: now_rfc3339(),
        duration_secs: 0.0,
    };
    let mut doc = document(src, &boot, &Run::default(), std::slice::from_ref(failure));
    doc.checkouts[0].misc.kernel_sources.clear();
    doc
}

pub use crate::judge::facts::CMD_JOB;

/// The KCIDB document of the `run -- CMD` and `shell` tests: each a test
/// (`userspace.<name>`) of the default build of the facts' kernel, with the
/// topology and accelerator of its boot ([`CmdTestsFacts`]) in its `misc`
/// and environment.
pub fn cmd_tests_document(src: &Source, facts: &CmdTestsFacts, tests: &[UserTest]) -> Document {
    let mut doc = document(src, &facts.boot, &Run::default(), tests);
    for t in &mut doc.tests {
        let name = t.misc.name.trim_start_matches("[harness] ");
        let (topology, accel) = facts.of(name);
        t.misc.topology = topology.into();
        t.environment.comment = format!(
            "QEMU x86_64 ({accel}): the default {topology} topology, booted by `cargo xtask run`/`shell`"
        );
        t.environment.misc = serde_json::json!({ "topology": topology, "accel": accel });
    }
    doc
}

/// Writes the `run -- CMD` and `shell` tests' `kcidb.json` to `path`
/// ([`cmd_tests_document`]) and validates it; `Some` problem (its own,
/// not a test's) when that did not work.
pub fn write_cmd_tests(path: &Path, facts: &CmdTestsFacts, tests: &[UserTest]) -> Option<String> {
    let doc = cmd_tests_document(&Source::of_repo(), facts, tests);
    if let Err(e) = write(path, &doc) {
        return Some(format!("writing {}: {e:#}", path.display()));
    }
    check_files(&[path])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remotes_become_https_urls() {
        let u = |s: &str| https_url(s);
        assert_eq!(
            u("https://github.com/o/tierkit.git").as_deref(),
            Some("https://github.com/o/tierkit.git")
        );
        assert_eq!(
            u("git@github.com:o/tierkit.git").as_deref(),
            Some("https://github.com/o/tierkit.git")
        );
        assert_eq!(
            u("ssh://git@example.org:2222/o/tierkit").as_deref(),
            Some("https://example.org/o/tierkit")
        );
        assert_eq!(u("/srv/git/tierkit.git"), None);
        assert_eq!(u("file:///srv/git/tierkit.git"), None);
    }

    fn record(group: &str, name: &str) -> Record {
        Record {
            group: group.into(),
            name: name.into(),
            outcome: Outcome::Fail,
            message: Some("exit code 1".into()),
            kind: None,
            description: None,
            duration_ms: None,
            output: None,
            console_lines: None,
        }
    }

    #[test]
    fn paths_keep_only_what_kcidb_allows() {
        assert_eq!(
            path_of(&record("tierkit_wi", "alloc.size=2M node=1")),
            "tierkit_wi.alloc.size_2M_node_1"
        );
        assert_eq!(
            path_of(&record("userspace", "[harness] host tests")),
            "userspace._harness__host_tests"
        );
        assert_eq!(path_of(&record("a", "b..c")), "a.b.c");
    }

    #[test]
    fn log_excerpts_are_bounded_and_keep_the_head_and_the_end() {
        let mut r = record("userspace", "tk-test-x");
        let long: String = "0123456789\n".repeat(5000);
        r.output = Some(format!("{long}LAST LINE"));
        let e = log_excerpt(&r, "numa", None);
        assert!(e.chars().count() <= LOG_EXCERPT_MAX, "{}", e.len());
        assert!(e.starts_with("FAIL userspace.tk-test-x (numa)\nexit code 1\n"));
        assert!(e.ends_with("LAST LINE"));
        assert!(e.contains("earlier output cut"));
        r.output = Some("a\0b".into());
        assert!(!log_excerpt(&r, "numa", None).contains('\0'));
        // A KUnit case's own console lines, when the log is given.
        let console = [
            "boot",
            "    # Subtest: s",
            "    # x: diag",
            "    ok 1 x",
            "next",
        ];
        r.console_lines = Some((3, 4));
        let e = log_excerpt(&r, "numa", Some(&console));
        assert!(e.ends_with("    # x: diag\n    ok 1 x"), "{e}");
        assert!(!e.contains("LAST LINE"));
        // Lines the log does not have: the output instead.
        r.console_lines = Some((3, 9));
        assert!(log_excerpt(&r, "numa", Some(&console)).ends_with("a\u{fffd}b"));
    }
}
