//! The names a command line refers to in the guest, known before anything
//! is built or booted: the tests and demos `--filter` selects from (the
//! KUnit suites and cases of module/src, the `tk-test-*` and `tk-demo*`
//! binaries of guest/src/bin, the `xtask-*` tests), and the
//! programs `run -- CMD` can name (the guest's /bin, busybox's applets,
//! Debian's tools, or a file of the shared directory).
//!
//! `--filter` is one dialect everywhere: comma-separated globs of the
//! kernel's `glob_match()` ([`tierkit_protocol::select`]).

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use tierkit_protocol::select::{glob_match, kunit_selects};

/// The tests and demos of this source tree.
#[derive(Clone, Debug, Default)]
pub struct Tests {
    /// Each KUnit suite with its cases.
    pub kunit: Vec<(String, Vec<String>)>,
    /// The userspace tests (`tk-test-*`).
    pub user: Vec<String>,
    /// The demos `run` runs (`tk-demo*`).
    pub demos: Vec<String>,
    /// The tests of `run -- CMD` and `shell` (`xtask-*`).
    pub xtask: Vec<String>,
}

/// The KUnit suites of a Rust source text: each `#[kunit_tests(NAME)]`
/// with the `#[test]` functions that follow it, up to the next suite.
pub fn kunit_suites(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut test_next = false;
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("#[kunit_tests(") {
            if let Some(name) = rest.strip_suffix(")]") {
                out.push((name.to_string(), Vec::new()));
            }
            continue;
        }
        if line == "#[test]" {
            test_next = true;
            continue;
        }
        if test_next && !line.starts_with("#[") {
            test_next = false;
            let f = line.strip_prefix("pub ").unwrap_or(line);
            if let (Some(f), Some(suite)) = (f.strip_prefix("fn "), out.last_mut()) {
                let name: String = f
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                suite.1.push(name);
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = fs::read_dir(dir) else {
        return;
    };
    for e in rd.filter_map(Result::ok) {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The stems of `dir`'s `*.rs` files that start with `prefix`, sorted.
fn bins(dir: &Path, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| {
                let name = e.ok()?.file_name().into_string().ok()?;
                Some(name.strip_suffix(".rs")?.to_string())
            })
            .filter(|n| n.starts_with(prefix))
            .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

impl Tests {
    /// The tests of the source tree at `root`.
    pub fn of_tree(root: &Path) -> Tests {
        let mut files = Vec::new();
        rust_files(&root.join("module/src"), &mut files);
        files.sort();
        let kunit = files
            .iter()
            .filter_map(|f| fs::read_to_string(f).ok())
            .flat_map(|t| kunit_suites(&t))
            .collect();
        let bin = root.join("guest/src/bin");
        Tests {
            kunit,
            user: bins(&bin, "tk-test-"),
            demos: bins(&bin, "tk-demo"),
            xtask: Vec::new(),
        }
    }

    /// With the tests of `run -- CMD` and `shell`, which the command layer
    /// knows ([`Tests::xtask`]; the plan does not look up at commands).
    pub fn with_xtask<'a>(mut self, names: impl IntoIterator<Item = &'a str>) -> Tests {
        self.xtask = names.into_iter().map(str::to_string).collect();
        self
    }

    /// This checkout's.
    pub fn here() -> Tests {
        Tests::of_tree(&crate::util::repo_root())
    }

    /// Whether the glob selects a KUnit case.
    fn selects_kunit(&self, glob: &str) -> bool {
        self.kunit
            .iter()
            .any(|(s, cases)| cases.iter().any(|c| kunit_selects(glob, s, c)))
    }

    /// `test --filter LIST`: every glob of the list selects a test, and at
    /// most one selects KUnit cases (`kunit.filter_glob=` takes one).
    pub fn check_test_filter(&self, list: &str) -> Result<(), String> {
        let mut kunit_globs = Vec::new();
        for g in list.split(',') {
            let k = self.selects_kunit(g);
            if k {
                kunit_globs.push(g);
            }
            let other = self
                .user
                .iter()
                .chain(&self.xtask)
                .any(|n| glob_match(g, n));
            if !k && !other {
                return Err(format!(
                    "--filter {list}: {g} selects no test: no KUnit suite or suite.case ({}), userspace test ({} tk-test-*) or xtask test ({} xtask-*) matches it",
                    self.kunit.iter().map(|s| s.0.as_str()).collect::<Vec<_>>().join(" "),
                    self.user.len(),
                    self.xtask.len()
                ));
            }
        }
        if let [_, _, ..] = kunit_globs[..] {
            return Err(format!(
                "--filter {list}: {} each select KUnit cases, but kunit.filter_glob= takes one glob; give one glob for KUnit (a class joins suites: 'tierkit_[wc]*')",
                kunit_globs.join(" and ")
            ));
        }
        Ok(())
    }

    /// `run --filter LIST`: every glob selects a demo, or with `kunit`
    /// (`run --kunit`) a KUnit case.
    ///
    /// The refusal suggests a command line only where it would be
    /// accepted: `run --kunit` for a list of demos and KUnit cases, `test`
    /// for a glob of userspace tests.
    pub fn check_demo_filter(&self, list: &str, kunit: bool) -> Result<(), String> {
        let Some(g) = list.split(',').find(|g| {
            !(self.demos.iter().any(|d| glob_match(g, d)) || (kunit && self.selects_kunit(g)))
        }) else {
            return Ok(());
        };
        let instead = if !kunit && self.check_demo_filter(list, true).is_ok() {
            format!("; KUnit runs with --kunit: `cargo xtask run --kunit --filter '{list}'`")
        } else if self.user.iter().any(|u| glob_match(g, u)) {
            format!("; userspace tests run with `cargo xtask test --filter '{g}'`")
        } else if kunit {
            " and no KUnit case".to_string()
        } else {
            String::new()
        };
        Err(format!(
            "--filter {list}: {g} selects no demo (`run` runs {}){instead}",
            self.demos.join(" ")
        ))
    }

    /// The `kunit.filter_glob=` of a `--filter` list: its glob that selects
    /// KUnit cases, or (none does) the list itself, which selects none.
    pub fn kunit_glob(&self, list: &str) -> String {
        list.split(',')
            .find(|g| self.selects_kunit(g))
            .unwrap_or(list)
            .to_string()
    }
}

/// The directories of the guest's programs.
const PATH_DIRS: &[&str] = &["/bin", "/sbin", "/usr/bin", "/usr/sbin"];

/// The programs on the guest's PATH: its /bin (the guest binaries), the
/// busybox applets (`None` if busybox is not installed yet: unknown),
/// tk-run's test programs and Debian's tools.
pub fn guest_programs(root: &Path) -> Option<Vec<String>> {
    let mut v: Vec<String> = crate::kernels::initramfs::busybox_links()
        .ok()?
        .iter()
        .map(|l| format!("/{l}"))
        .collect();
    v.push("/bin/busybox".to_string());
    v.extend(
        bins(&root.join("guest/src/bin"), "tk-")
            .into_iter()
            .map(|b| format!("/bin/{b}")),
    );
    v.extend(crate::kernels::tkrun::guest_programs().map(str::to_string));
    v.extend(
        crate::kernels::guest_tools::TOOLS
            .iter()
            .map(|t| t.to_string()),
    );
    Some(v)
}

/// `run -- CMD`: CMD names a program the guest has, when that is
/// knowable: a path in the shared directory `cwd` (relative paths are
/// relative to it) must exist there; another absolute path must be one of
/// `programs`; a bare name must be the name of one of `programs`
/// (`None`: the guest's programs are not known yet, only paths are
/// checked).
pub fn check_guest_command(
    cmd: &OsString,
    cwd: &Path,
    programs: Option<&[String]>,
) -> Result<(), String> {
    let s = cmd.to_string_lossy();
    if s.contains('/') {
        let host = cwd.join(Path::new(cmd));
        let shared = host.starts_with(cwd);
        if shared && !host.exists() {
            return Err(format!(
                "{s}: no such file in the shared directory {} (the guest sees it at the same path)",
                cwd.display()
            ));
        }
        // Unknown programs: any path of the PATH directories may be a
        // busybox applet.
        let known = match programs {
            Some(p) => p.iter().any(|x| *x == s),
            None => host
                .parent()
                .is_some_and(|d| PATH_DIRS.iter().any(|p| d == Path::new(p))),
        };
        if !shared && !known {
            return Err(format!(
                "{s}: no such program in the guest: it is outside the shared directory {} and none of the guest's own programs (busybox's applets, the tk-* programs, tk-stream, tkrun-check, numactl, numastat, cxl, daxctl, ndctl)",
                cwd.display()
            ));
        }
        return Ok(());
    }
    if let Some(p) = programs {
        if !p.iter().any(|x| x.rsplit('/').next() == Some(&s)) {
            // `./NAME` only where the shared directory has it.
            let own = if cwd.join(cmd).is_file() {
                format!("give its path, e.g. ./{s}")
            } else {
                format!("give its path in the shared directory {}", cwd.display())
            };
            return Err(format!(
                "{s}: no such program on the guest's PATH (busybox's applets, the tk-* programs, tk-stream, tkrun-check, numactl, numastat, cxl, daxctl, ndctl); a program of your own: {own}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suites_and_cases_from_source() {
        let text = "#[kunit_tests(tierkit_a)]\nmod t {\n    fn helper() {}\n    #[test]\n    fn one() {}\n    #[test]\n    #[cfg(x)]\n    pub fn two_2() {}\n}\n#[kunit_tests(tierkit_b)]\nmod u {\n    #[test]\n    fn three() {}\n}\n";
        assert_eq!(
            kunit_suites(text),
            [
                (
                    "tierkit_a".to_string(),
                    vec!["one".to_string(), "two_2".to_string()]
                ),
                ("tierkit_b".to_string(), vec!["three".to_string()])
            ]
        );
    }

    /// This tree has suites with cases, userspace tests and demos (its
    /// xtask tests: tests/cli.rs, `test --filter xtask-*`): a move of their sources must move this reader too.
    #[test]
    fn this_tree_has_every_kind() {
        let t = Tests::here();
        assert!(t
            .kunit
            .iter()
            .any(|(s, c)| s == "tierkit_topology" && !c.is_empty()));
        assert!(t.kunit.iter().any(|(s, _)| s == "tierkit_gigantic"));
        assert!(t.user.iter().any(|n| n == "tk-test-vma"));
        assert!(t.demos.iter().any(|n| n == "tk-demo"));
    }

    #[test]
    fn filters_are_checked_against_the_tests() {
        let t = Tests::here().with_xtask(["xtask-run-false"]);
        for ok in [
            "tierkit_wi*",
            "tierkit_topology.*",
            "tk-test-vma",
            "tk-test-gup,tk-test-memcg",
            "xtask-*",
            "tierkit_[!g]*",
            "tierkit_wi*,tk-test-run",
            "*",
        ] {
            assert_eq!(t.check_test_filter(ok), Ok(()), "{ok}");
        }
        let e = t.check_test_filter("no-such-test").unwrap_err();
        assert!(e.contains("no-such-test selects no test"), "{e}");
        let e = t.check_test_filter("tk-test-vma,tk-tset-gup").unwrap_err();
        assert!(e.contains("tk-tset-gup selects no test"), "{e}");
        let e = t
            .check_test_filter("tierkit_wi*,tierkit_clear*")
            .unwrap_err();
        assert!(e.contains("kunit.filter_glob= takes one glob"), "{e}");
        assert_eq!(t.kunit_glob("tk-test-vma,tierkit_wi*"), "tierkit_wi*");
        assert_eq!(t.kunit_glob("tk-test-vma"), "tk-test-vma");
        assert_eq!(t.check_demo_filter("tk-demo-g*", false), Ok(()));
        assert!(t.check_demo_filter("tk-test-vma", true).is_err());
        assert!(t.check_demo_filter("tierkit_wi*", false).is_err());
        assert_eq!(t.check_demo_filter("tierkit_wi*", true), Ok(()));
    }

    /// Every run's own selection selects what it names, in the same
    /// dialect as `--filter`.
    #[test]
    fn every_runs_selection_selects_tests() {
        let t = Tests::here();
        let runs = crate::plan::runs::QUICK_RUNS
            .iter()
            .chain(crate::plan::runs::FULL_RUNS);
        for sel in runs.filter_map(|r| r.only) {
            for list in [sel.kunit, sel.user, sel.skip] {
                if !list.is_empty() {
                    assert_eq!(t.check_test_filter(list), Ok(()), "{sel:?}");
                }
            }
            if !sel.kunit.is_empty() {
                assert!(t.selects_kunit(sel.kunit), "{}", sel.kunit);
            }
        }
    }

    #[test]
    fn commands_the_guest_has() {
        let progs: Vec<String> = ["/bin/sh", "/usr/bin/numactl", "/bin/tk-demo"]
            .map(String::from)
            .to_vec();
        let cwd = crate::util::repo_root();
        let ok = |c: &str| check_guest_command(&c.into(), &cwd, Some(&progs));
        assert_eq!(ok("numactl"), Ok(()));
        assert_eq!(ok("/bin/tk-demo"), Ok(()));
        assert_eq!(ok("./README.md"), Ok(()));
        assert_eq!(ok("xtask/Cargo.toml"), Ok(()));
        assert!(ok("/no/such/cmd")
            .unwrap_err()
            .contains("no such program in the guest"));
        assert!(ok("./no-such")
            .unwrap_err()
            .contains("no such file in the shared"));
        assert!(ok("no-such-cmd")
            .unwrap_err()
            .contains("no such program on the guest's PATH"));
        // Unknown programs: only the shared paths are checked.
        assert_eq!(check_guest_command(&"anything".into(), &cwd, None), Ok(()));
        assert!(check_guest_command(&"./no-such".into(), &cwd, None).is_err());
        assert!(check_guest_command(&"/no/such/cmd".into(), &cwd, None).is_err());
        assert_eq!(
            check_guest_command(&"/usr/bin/awk".into(), &cwd, None),
            Ok(())
        );
    }

    /// tk-run's test programs are in every initramfs (`/usr/bin/tk-stream`,
    /// `/usr/bin/tkrun-check`), so `run -- tk-stream` is no unknown
    /// program: it was refused before anything was built.
    #[test]
    fn tkrun_programs_are_on_the_guests_path() {
        let tk: Vec<&str> = crate::kernels::tkrun::guest_programs().collect();
        assert_eq!(tk, ["/usr/bin/tk-stream", "/usr/bin/tkrun-check"]);
        // As when busybox is not installed on the host: no applets.
        let root = crate::util::repo_root();
        let mut progs = vec!["/bin/busybox".to_string()];
        progs.extend(tk.iter().map(|p| p.to_string()));
        for cmd in ["tk-stream", "tkrun-check", "/usr/bin/tk-stream"] {
            assert_eq!(
                check_guest_command(&cmd.into(), &root, Some(&progs)),
                Ok(()),
                "{cmd}"
            );
        }
        if let Some(all) = guest_programs(&root) {
            for p in tk {
                assert!(
                    all.iter().any(|x| x == p),
                    "{p} not among the guest's programs"
                );
            }
        }
    }
}
