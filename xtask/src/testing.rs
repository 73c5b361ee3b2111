//! `cargo xtask test`: the host tests, then the boots of
//! [`crate::runs::TEST_RUNS`] for each profile, and the combined totals.

use anyhow::{Context, Result};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use crate::cli::GuestArgs;
use crate::guest::{guest_cmd, GuestRequest, GuestResult};
use crate::util::{self, fmt_dur, Timer};
use crate::{profile, report, runs, say};

/// Host tests: `cargo test --workspace` (the core crate's property tests,
/// the KTAP parser, xtask's own unit tests, ...).
pub(crate) fn host_tests() -> Result<(bool, Duration)> {
    let t = Timer::start();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let log = util::out_dir().join("host-tests.log");
    std::fs::create_dir_all(util::out_dir())?;
    say!(
        "host tests: cargo test --workspace (log: {})",
        log.display()
    );
    let mut cmd = Command::new(cargo);
    cmd.current_dir(util::repo_root())
        .args(["test", "--workspace"])
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .stdin(Stdio::null());
    let out = cmd.output().context("could not run cargo test")?;
    let mut text = String::from_utf8_lossy(&out.stderr).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stdout));
    std::fs::write(&log, &text)?;
    let (mut passed, mut failed) = (0usize, 0usize);
    for l in text.lines().filter(|l| l.starts_with("test result:")) {
        let num = |key: &str| {
            l.split(';')
                .find_map(|p| {
                    p.trim()
                        .trim_start_matches("test result: ok. ")
                        .trim_start_matches("test result: FAILED. ")
                        .strip_suffix(key)
                        .map(|n| n.trim().parse::<usize>().unwrap_or(0))
                })
                .unwrap_or(0)
        };
        passed += num(" passed");
        failed += num(" failed");
    }
    let ok = out.status.success();
    if ok {
        say!("host tests: {passed} passed ({})", fmt_dur(t.elapsed()));
    } else {
        eprintln!("{}", util::tail_lines(&text, 60));
        say!(
            "host tests FAILED ({failed} failed; log: {}); booting the guest anyway",
            log.display()
        );
    }
    Ok((ok, t.elapsed()))
}

/// The boots of one `test`, in order: each profile on each of its runs
/// ([`runs::select`]) on `--kernel`'s kernel, or with `ci`
/// [`runs::ci_boots`].
pub(crate) fn boots(
    g: &GuestArgs,
    profiles: &[profile::Profile],
    full: bool,
    ci: bool,
) -> Vec<(profile::Profile, profile::KernelKind, runs::TestRun)> {
    if ci {
        return runs::ci_boots();
    }
    let k = g.kernel_kind;
    profiles
        .iter()
        .flat_map(|&p| {
            runs::select(p, full, g.topology, g.cxl_online)
                .into_iter()
                .map(move |r| (p, k, r))
        })
        .collect()
}

/// The label of one boot of a `test` over several runs or profiles: the
/// run's name (`numa`, `cxl`, `cxl-kernel`), after the profile's unless
/// default (`debug numa`) and the kernel's unless tierkit's (`debian numa`).
pub(crate) fn run_label(profile: profile::Profile, k: profile::KernelKind, run: &str) -> String {
    let mut s = String::new();
    if k != profile::KernelKind::Tierkit {
        s.push_str(&format!("{k} "));
    }
    if profile != profile::Profile::Default {
        s.push_str(&format!("{profile} "));
    }
    s.push_str(run);
    s
}

/// `cargo xtask test`: each profile (in the order given) on each run of
/// [`runs::QUICK_RUNS`] or, `full`, [`runs::FULL_RUNS`] ([`runs::select`]); a summary per boot, then, when
/// there was more than one, one line per boot and the combined totals line
/// last.
pub(crate) fn test_all(
    g: &GuestArgs,
    host: Option<(bool, Duration)>,
    profiles: &[profile::Profile],
    full: bool,
    ci: bool,
) -> Result<ExitCode> {
    let mut boots = boots(g, profiles, full, ci);
    let cmd_tests = crate::cmd_tests::selected(g, profiles, ci);
    if crate::cmd_tests::filter_is_theirs(g.filter.as_deref()) {
        // `--filter 'xtask-*'`: only the tests of run -- CMD and shell.
        boots.clear();
    }
    if let ([(profile, k, run)], true) = (&boots[..], cmd_tests.is_empty()) {
        let (profile, k, run) = (*profile, *k, *run);
        let mut req = GuestRequest::for_run(g, profile, k, &run);
        req.host = host;
        return guest_cmd(g, req).map(|r| r.exit());
    }
    let mut results: Vec<(String, GuestResult)> = Vec::new();
    for (i, (profile, k, run)) in boots.iter().enumerate() {
        println!();
        let why = if k.has_kunit() {
            run.why.to_string()
        } else {
            format!(
                "{} (userspace tests only: no KUnit in this kernel)",
                run.why
            )
        };
        say!(
            "===== {}, {profile} profile, {k} kernel ({}/{}): {why} =====",
            run.name,
            i + 1,
            boots.len(),
        );
        let label = run_label(*profile, *k, run.name);
        let mut req = GuestRequest::for_run(g, *profile, *k, run);
        // Host tests count once, with the first boot.
        req.host = if i == 0 { host } else { None };
        req.label = Some(label.clone());
        let r = match guest_cmd(g, req) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("\nerror ({label}): {e}");
                for cause in e.chain().skip(1) {
                    eprintln!("  caused by: {cause}");
                }
                let t = report::Totals {
                    passed: 0,
                    failed: 1,
                    skipped: 0,
                };
                println!("{}", t.labelled(&label));
                GuestResult {
                    ok: false,
                    totals: Some(t),
                    boot: None,
                    cxl_setup: None,
                }
            }
        };
        results.push((label, r));
    }
    if !cmd_tests.is_empty() {
        println!();
        say!(
            "===== xtask run/shell: {} test(s) of `run -- CMD` and `shell` =====",
            cmd_tests.len()
        );
        let t = Timer::start();
        // --ci overrides --kernel: tierkit's own.
        let kernel = if ci {
            profile::KernelKind::Tierkit
        } else {
            g.kernel_kind
        };
        let r = match crate::cmd_tests::run_all(g, kernel, &cmd_tests) {
            Ok(tests) => GuestResult {
                ok: tests.iter().all(|t| t.passed),
                totals: Some(report::Totals::of(&crate::ktap::Run::default(), &tests)),
                boot: Some(t.elapsed()),
                cxl_setup: None,
            },
            Err(e) => {
                eprintln!("\nerror (xtask run/shell): {e:#}");
                GuestResult {
                    ok: false,
                    totals: Some(report::Totals {
                        passed: 0,
                        failed: 1,
                        skipped: 0,
                    }),
                    boot: None,
                    cxl_setup: None,
                }
            }
        };
        results.push(("xtask run/shell".into(), r));
    }
    println!();
    let mut all = report::Totals::default();
    for (label, r) in &results {
        let t = r.totals.unwrap_or_default();
        all = all + t;
        let mut time = r
            .boot
            .map(|b| format!(" (guest {}", fmt_dur(b)))
            .unwrap_or_default();
        if let Some(c) = r.cxl_setup {
            time.push_str(&format!(", CXL setup {c:.1} s"));
        }
        if !time.is_empty() {
            time.push(')');
        }
        let status = if r.ok { "ok" } else { "FAILED" };
        say!("{label}: {status}{time}: {}", t.labelled(label));
    }
    println!("{all}");
    Ok(if results.iter().all(|(_, r)| r.ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{KernelKind, Profile};

    #[test]
    fn labels_name_the_kernel_and_profile_unless_default() {
        assert_eq!(
            run_label(Profile::Default, KernelKind::Tierkit, "numa"),
            "numa"
        );
        assert_eq!(
            run_label(Profile::Debug, KernelKind::Tierkit, "cxl"),
            "debug cxl"
        );
        assert_eq!(
            run_label(Profile::Default, KernelKind::Debian, "numa"),
            "debian numa"
        );
    }
}
