//! From console and data logs to a verdict.
//!
//! The KTAP part is [`crate::judge::ktap`]'s; this module reads the markers /init
//! prints (see `tierkit_protocol::marker`) and adds what only the harness knows: QEMU
//! failures, timeouts, insmod/rmmod failures, guest programs that failed or
//! never finished, and a guest that never printed `TIERKIT-DONE`. Kernel
//! reports are found by [`crate::judge::console`]'s patterns (in the KTAP crash
//! scan) and named with the KUnit case or the phase of /init that was
//! running ([`console::Phases`]).

mod markers;
#[cfg(test)]
mod tests;

use crate::boot::qemu::GuestRun;
use crate::judge::console::{self, Phases};
use crate::judge::ktap;
use crate::judge::records::UserTest;
use crate::kernels::profile::Profile;
pub use markers::{phase_tag, scan, Markers, ProgRun};
use tierkit_protocol::deadline;

/// The verdict of one boot.
pub struct Outcome {
    pub run: ktap::Run,
    pub markers: Markers,
    /// Userspace tests plus harness checks that failed (as failed entries,
    /// so that the totals line counts them).
    pub user_tests: Vec<UserTest>,
    /// Why the run failed; empty when it passed.
    pub reasons: Vec<String>,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.reasons.is_empty()
    }
}

fn harness_failure(name: &str, msg: String) -> UserTest {
    UserTest {
        name: format!("[harness] {name}"),
        passed: false,
        skipped: false,
        rc: -1,
        output_tail: msg,
        duration_ms: 0,
        reason: None,
        ..Default::default()
    }
}

/// A test program's summary (`TIERKIT-JSON` with `kind: test`) says it
/// checked nothing: no check passed or failed and at least one was skipped.
fn all_skipped(json: &[serde_json::Value]) -> bool {
    json.iter()
        .rev()
        .find(|v| v.get("kind").and_then(|k| k.as_str()) == Some("test"))
        .is_some_and(|v| {
            let n = |k: &str| v.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
            n("passed") == 0 && n("failed") == 0 && n("skipped") > 0
        })
}

fn last_lines(s: &str, n: usize) -> String {
    crate::util::tail_lines(s, n)
}

/// Names what ran when each kernel report came: `KUnit <suite.case>` from
/// the KTAP stream, else the phase of /init (`userspace test tk-test-x`,
/// `insmod tierkit.ko (...)`, `kmemleak scan after rmmod (...)`, ...).
fn name_report_phases(run: &mut ktap::Run, console: &str) {
    let phases = Phases::scan(console);
    for c in &mut run.crashes {
        c.during = Some(match c.during.take() {
            Some(test) => format!("KUnit {test}"),
            None => phases.at(c.line).to_string(),
        });
    }
}

/// Why QEMU ended before the guest's last line, from its exit status: a
/// signal from outside (the host's OOM killer, when several guests share a
/// small host, sends SIGKILL) or the guest's own crash or power-off.
fn why_stopped(exit: Option<std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match exit.and_then(|e| e.signal()) {
        Some(9) => "QEMU was killed by SIGKILL from outside the guest: on a busy host \
                    most likely the kernel's OOM killer (see the host's `dmesg`); \
                    run fewer guests at once"
            .into(),
        Some(sig) => format!("QEMU was killed by signal {sig} from outside the guest"),
        None => "crash or power-off inside the guest".into(),
    }
}

/// What a boot's checks found: why it failed, and the harness checks among
/// those reasons as failed [`UserTest`]s (so that the totals line counts
/// them).
#[derive(Default)]
struct Findings {
    reasons: Vec<String>,
    harness: Vec<UserTest>,
}

impl Findings {
    /// The harness check `name` failed with `msg`.
    fn fail(&mut self, name: &str, msg: String) {
        self.reasons.push(msg.clone());
        self.harness.push(harness_failure(name, msg));
    }
}

/// What the harness knows of a boot besides its console: the tests this
/// kernel could not run (skips, with their reasons) and whether the host
/// tests failed.
#[derive(Clone, Debug, Default)]
pub struct Harness {
    pub skips: Vec<(&'static str, String)>,
    /// The globs /init matched its programs against (`--filter`'s list;
    /// `None`: all of them): in `run` mode each must have run a demo, or
    /// with KUnit reported a case.
    pub programs_filter: Option<String>,
    /// `Some(log)`: the host tests failed; their log.
    pub host_tests_failed: Option<std::path::PathBuf>,
}

/// The one verdict of a boot: [`evaluate`] of its console, with what the
/// harness knows ([`Harness`]). Nothing after this adds to it: the
/// reports only write it.
pub fn judge(
    guest: &GuestRun,
    kunit: bool,
    filter: Option<&str>,
    profile: Profile,
    harness: &Harness,
) -> Outcome {
    let mut outcome = evaluate(guest, kunit, filter, profile);
    let mut found = Findings::default();
    match outcome.markers.mode.as_deref() {
        Some(tierkit_protocol::param::MODE_RUN) => check_demos(
            &outcome,
            kunit,
            harness.programs_filter.as_deref(),
            &mut found,
        ),
        Some(m) if m.starts_with(tierkit_protocol::param::BENCH_PREFIX) => {
            check_bench(&outcome.markers, &mut found)
        }
        _ => {}
    }
    outcome.reasons.extend(found.reasons);
    outcome.user_tests.extend(found.harness);
    for (t, why) in &harness.skips {
        outcome.user_tests.push(UserTest {
            name: t.to_string(),
            passed: true,
            skipped: true,
            rc: 0,
            output_tail: format!("ok - {t} # SKIP {why}"),
            duration_ms: 0,
            reason: None,
            ..Default::default()
        });
    }
    if let Some(log) = &harness.host_tests_failed {
        let msg = format!("host tests failed (see {})", log.display());
        outcome.reasons.push(msg.clone());
        outcome.user_tests.push(harness_failure("host tests", msg));
    }
    outcome
}

/// Judges a boot: KTAP (via [`ktap::Run::verdict`]) plus the /init protocol.
/// `kunit`: KUnit ran (not `kunit.enable=0`), so the module's suites must
/// report. `filter` is `--filter`: with it, a run without KUnit suites is
/// fine as long as some test (KUnit or userspace) ran. `profile` debug: the
/// kmemleak scan after rmmod must have run.
pub fn evaluate(guest: &GuestRun, kunit: bool, filter: Option<&str>, profile: Profile) -> Outcome {
    let mut run = ktap::Run::parse(&guest.console);
    name_report_phases(&mut run, &guest.console);
    let markers = scan(&guest.console, &guest.data);
    let mut found = Findings::default();

    if guest.timed_out {
        let running = match markers.progs.iter().rev().find(|p| p.rc.is_none()) {
            Some(p) if p.kind == "USERTEST" => format!(" while userspace test {} ran", p.name),
            Some(p) => format!(" while {} {} ran", p.kind.to_lowercase(), p.name),
            None => String::new(),
        };
        found.fail(
            "timeout",
            format!(
                "the guest hung: no TIERKIT-DONE within {:.0} s{running}, QEMU killed. Last console lines:\n{}",
                guest.elapsed.as_secs_f64(),
                last_lines(&guest.console, 15)
            ),
        );
    }
    if !markers.booted {
        found.fail("boot", never_booted(guest));
    } else {
        check_init(guest, &run, &markers, profile, &mut found);
    }
    check_ktap(&run, &markers, kunit, filter, &mut found.reasons);

    let Findings { reasons, harness } = found;
    let mut user_tests = user_tests_of(&markers);
    user_tests.extend(harness);
    // A failed run must show at least one failure in the totals line.
    if !reasons.is_empty() && crate::judge::records::Totals::of(&run, &user_tests).failed == 0 {
        user_tests.push(harness_failure("verdict", reasons.join("\n")));
    }
    Outcome {
        run,
        markers,
        user_tests,
        reasons,
    }
}

/// Why the guest never reached /init: QEMU's exit, the last console lines
/// and QEMU's stderr.
fn never_booted(guest: &GuestRun) -> String {
    let why = console::fatal::early_reason(&guest.console, &guest.qemu_stderr)
        .map(|r| format!(": {r}"))
        .unwrap_or_default();
    format!(
        "the guest never reached /init{why}\n(QEMU exit: {}). Last console lines:\n{}{}",
        guest
            .exit
            .map(|e| e.to_string())
            .unwrap_or_else(|| "killed".into()),
        last_lines(&guest.console, 20),
        if guest.qemu_stderr.trim().is_empty() {
            String::new()
        } else {
            format!("\nQEMU: {}", guest.qemu_stderr.trim())
        }
    )
}

/// The /init protocol of a guest that booted: CXL set-up, insmod, the
/// programs, rmmod, guest errors, the kmemleak scan (debug profile) and
/// `TIERKIT-DONE`.
fn check_init(
    guest: &GuestRun,
    run: &ktap::Run,
    markers: &Markers,
    profile: Profile,
    found: &mut Findings,
) {
    check_cxl_and_insmod(guest, markers, found);
    check_programs(markers, found);
    if markers.insmod_rc == Some(0) && markers.rmmod_rc.is_some_and(|rc| rc != 0) {
        let why = markers.errors.iter().find(|e| e.contains("rmmod")).cloned();
        found.fail(
            "rmmod",
            why.unwrap_or_else(|| "rmmod tierkit failed".into()),
        );
    }
    for e in &markers.errors {
        if !e.contains("insmod") && !e.contains("rmmod") && !e.starts_with("cxl step=") {
            found.fail("guest", format!("guest error: {e}"));
        }
    }
    if profile == Profile::Debug && markers.rmmod_rc == Some(0) {
        check_kmemleak(run, markers, found);
    }
    if markers.done.is_none() && !guest.timed_out {
        found.fail(
            "done",
            format!(
                "the guest stopped before TIERKIT-DONE ({}). Last console lines:\n{}",
                why_stopped(guest.exit),
                last_lines(&guest.console, 15)
            ),
        );
    }
}

/// CXL region assembly and `insmod tierkit.ko`.
fn check_cxl_and_insmod(guest: &GuestRun, markers: &Markers, found: &mut Findings) {
    // CXL region assembly failed: /init says which step and skips the
    // rest (tierkit is not loaded).
    let cxl_errors = markers.cxl_errors();
    for (step, what) in &cxl_errors {
        found.fail(
            &format!("cxl {step}"),
            format!("CXL setup failed at step `{step}`: {what}"),
        );
    }
    match markers.insmod_rc {
        None if !cxl_errors.is_empty() => {}
        Some(0) => {}
        Some(rc) => {
            let why = markers
                .errors
                .iter()
                .find(|e| e.contains("insmod"))
                .cloned();
            let msg = why.unwrap_or_else(|| format!("insmod tierkit.ko failed (rc={rc})"));
            found.fail(
                "insmod",
                format!("{msg}; the kernel's messages are in the console log"),
            );
        }
        None if guest.timed_out => found.fail(
            "insmod",
            "insmod tierkit.ko never returned: hung in module init or in a KUnit suite".into(),
        ),
        None => found.fail(
            "insmod",
            "insmod tierkit.ko never returned: the guest died in module init or in a KUnit suite"
                .into(),
        ),
    }
}

/// The guest programs' exit codes, deadlines and leftovers, the ones that
/// never finished, and `TIERKIT-JSON` lines that are not JSON.
fn check_programs(markers: &Markers, found: &mut Findings) {
    for p in &markers.progs {
        match (p.rc, p.kind == "USERTEST") {
            (Some(_), true) => {
                if let Err(why) = user_verdict(p) {
                    found
                        .reasons
                        .push(format!("userspace test {} failed: {why}", p.name));
                }
            }
            (None, true) => found.reasons.push(format!(
                "userspace test {} started but never finished",
                p.name
            )),
            (Some(rc), false) => {
                if rc != 0 || p.ending != Default::default() {
                    let d = deadline::Deadline {
                        expect: deadline::Expect::Pass,
                        ..deadline::of("")
                    };
                    let why = deadline::judge(&d, rc, p.ending).err().unwrap_or_default();
                    found.reasons.push(format!(
                        "{} {} failed: {why}",
                        p.kind.to_lowercase(),
                        p.name
                    ));
                }
            }
            (None, false) => found.fail(
                &p.name,
                format!(
                    "{} {} started but never finished",
                    p.kind.to_lowercase(),
                    p.name
                ),
            ),
        }
        if !p.bad_json.is_empty() {
            found.fail(
                &p.name,
                format!(
                    "{}: {} TIERKIT-JSON line(s) are not valid JSON, e.g. {}",
                    p.name,
                    p.bad_json.len(),
                    p.bad_json[0].chars().take(200).collect::<String>()
                ),
            );
        }
    }
}

/// A finished userspace test's verdict ([`deadline::judge`] on its status
/// and ending): `Ok` with a note for a test of the runner that ended as it
/// expects, which must also have kept what it printed.
fn user_verdict(p: &ProgRun) -> Result<Option<String>, String> {
    let d = deadline::of(&p.name);
    let note = deadline::judge(&d, p.rc.unwrap_or(-1), p.ending)?;
    if d.expect != deadline::Expect::Pass && p.output.is_empty() {
        return Err("its output before the runner killed it was lost".into());
    }
    Ok(note)
}

/// The debug profile's kmemleak scan after rmmod: it reported, and every
/// object it found is in the console log.
fn check_kmemleak(run: &ktap::Run, markers: &Markers, found: &mut Findings) {
    let reported = run
        .crashes
        .iter()
        .filter(|c| c.kind == console::CrashKind::Kmemleak)
        .count();
    match markers.kmemleak_leaks {
        None if !markers.errors.iter().any(|e| e.starts_with("kmemleak")) => found.fail(
            "kmemleak",
            "the kmemleak scan after rmmod never reported (no TIERKIT-KMEMLEAK marker)".into(),
        ),
        // Each object is a kernel report of its own (quoted with the
        // crashes); this catches a report the console lost.
        Some(n) if n as usize > reported => found.fail(
            "kmemleak",
            format!(
                "kmemleak found {n} unreferenced object(s) after rmmod, {reported} of them in the console log"
            ),
        ),
        _ => {}
    }
}

/// KTAP: failed or crashed tests, kernel crashes, short plans. Suites are
/// expected whenever KUnit runs (not in bench mode, which turns it off).
fn check_ktap(
    run: &ktap::Run,
    markers: &Markers,
    kunit: bool,
    filter: Option<&str>,
    reasons: &mut Vec<String>,
) {
    let kunit_on = kunit && markers.insmod_rc == Some(0);
    if !kunit {
        // `kunit.enable=0`: the module's KTAP header comes without results,
        // by design. Only kernel crashes count.
        let failing: Vec<&ktap::Crash> = run.failing_crashes().collect();
        reasons.extend(failing.iter().take(20).map(|c| c.to_string()));
        if failing.len() > 20 {
            reasons.push(format!(
                "... and {} more kernel reports (all of them in the console log)",
                failing.len() - 20
            ));
        }
    } else {
        let kv = run.failures(kunit_on && filter.is_none());
        reasons.extend(kv.reasons.iter().cloned());
    }
    if let Some(f) = filter {
        let usertests = markers
            .progs
            .iter()
            .filter(|p| p.kind == "USERTEST")
            .count();
        // KUnit off (Debian's kernel) too: a filter that ran nothing
        // tested nothing.
        let loaded = markers.insmod_rc == Some(0);
        let tests_mode = markers.mode.as_deref() != Some(tierkit_protocol::param::MODE_RUN);
        if loaded
            && tests_mode
            && markers.done.is_some()
            && run.suites().next().is_none()
            && usertests == 0
        {
            reasons.push(format!(
                "--filter '{f}' matched no KUnit suite and no userspace test"
            ));
        }
    }
}

/// `run` (the demos): what was asked for ran. Without `filter`, at least
/// one demo; with it, each glob a demo or (`kunit`) a KUnit case that
/// reported. A boot that failed before the demos is failed already.
fn check_demos(o: &Outcome, kunit: bool, filter: Option<&str>, found: &mut Findings) {
    use tierkit_protocol::marker::ProgKind;
    use tierkit_protocol::select::{glob_match, kunit_selects};
    let m = &o.markers;
    if m.done.is_none() || m.insmod_rc != Some(0) {
        return;
    }
    let demos: Vec<&str> = m
        .progs
        .iter()
        .filter(|p| p.kind == ProgKind::Demo.tag())
        .map(|p| p.name.as_str())
        .collect();
    let Some(list) = filter else {
        if demos.is_empty() {
            found.fail(
                "demos",
                "no demo ran: the guest has no /bin/tk-demo* (see its TIERKIT-NOTE)".into(),
            );
        }
        return;
    };
    let reported = |g: &str| {
        kunit
            && o.run.suites().any(|s| {
                glob_match(g, &s.name)
                    || s.subtests
                        .iter()
                        .any(|c| kunit_selects(g, &s.name, &c.name))
            })
    };
    for g in list.split(',') {
        if !demos.iter().any(|d| glob_match(g, d)) && !reported(g) {
            let what = if kunit {
                "no demo and no KUnit case"
            } else {
                "no demo"
            };
            found.fail(
                "filter",
                format!(
                    "--filter {list}: {g} ran nothing in this boot ({what}; ran: {})",
                    if demos.is_empty() {
                        "none".to_string()
                    } else {
                        demos.join(" ")
                    }
                ),
            );
        }
    }
}

/// A benchmark boot: its program ran and wrote results (`TIERKIT-JSON`
/// records, which `target/tierkit/bench/<name>.json` holds). A boot that
/// failed before it is failed already.
fn check_bench(m: &Markers, found: &mut Findings) {
    use tierkit_protocol::marker::ProgKind;
    if m.done.is_none() || m.insmod_rc != Some(0) {
        return;
    }
    let bench = m.progs.iter().find(|p| p.kind == ProgKind::Bench.tag());
    match bench {
        None if m.errors.is_empty() => found.fail(
            "bench",
            "the benchmark never ran (no TIERKIT-BENCH-START)".into(),
        ),
        Some(p) if p.rc == Some(0) && p.json.is_empty() => found.fail(
            &p.name,
            format!("{} wrote no results (no TIERKIT-JSON record)", p.name),
        ),
        _ => {}
    }
}

/// The userspace tests, as [`UserTest`]s: the finished ones with their
/// verdict, and one that was running when the boot ended, failed with
/// what it printed so far.
fn user_tests_of(markers: &Markers) -> Vec<UserTest> {
    markers
        .progs
        .iter()
        .filter(|p| p.kind == "USERTEST")
        .map(|p| {
            let verdict = match p.rc {
                Some(_) => user_verdict(p),
                None => Err("did not finish: the boot ended while it ran".into()),
            };
            let passed = verdict.is_ok();
            UserTest {
                name: p.name.clone(),
                passed,
                skipped: passed && p.rc == Some(0) && all_skipped(&p.json),
                rc: p.rc.unwrap_or(-1),
                output_tail: p.output[p.output.len().saturating_sub(40)..].join("\n"),
                failed_checks: p
                    .output
                    .iter()
                    .filter(|l| l.starts_with("not ok"))
                    .take(crate::judge::records::FAILED_CHECKS)
                    .cloned()
                    .collect(),
                duration_ms: match (p.start_s, p.end_s) {
                    (Some(a), Some(b)) if b >= a => ((b - a) * 1000.0) as u64,
                    _ => 0,
                },
                reason: verdict.unwrap_or_else(Some),
            }
        })
        .collect()
}
