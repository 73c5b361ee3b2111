//! From console and data logs to a verdict.
//!
//! The KTAP part is [`crate::ktap`]'s; this module reads the markers /init
//! prints (see `guest/init.sh`) and adds what only the harness knows: QEMU
//! failures, timeouts, insmod/rmmod failures, guest programs that failed or
//! never finished, and a guest that never printed `TIERKIT-DONE`. Kernel
//! reports are found by [`crate::console`]'s patterns (in the KTAP crash
//! scan) and named with the KUnit case or the phase of /init that was
//! running ([`console::Phases`]).

use crate::console::{self, Phases};
use crate::ktap;
use crate::printk;
use crate::profile::Profile;
use crate::qemu::GuestRun;
use crate::report::UserTest;
use std::collections::BTreeMap;

/// One guest program run by /init (`TIERKIT-<KIND>-START name` ...
/// `TIERKIT-<KIND> name rc=N`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProgRun {
    /// `USERTEST`, `DEMO` or `BENCH`.
    pub kind: String,
    pub name: String,
    /// `None`: the end marker never came.
    pub rc: Option<i32>,
    pub start_s: Option<f64>,
    pub end_s: Option<f64>,
    /// Its output, from the data channel.
    pub output: Vec<String>,
    /// Parsed `TIERKIT-JSON {...}` lines of its output.
    pub json: Vec<serde_json::Value>,
    /// `TIERKIT-JSON` lines that did not parse.
    pub bad_json: Vec<String>,
}

/// Everything /init reported.
#[derive(Clone, Debug, Default)]
pub struct Markers {
    pub booted: bool,
    pub insmod_rc: Option<i32>,
    pub rmmod_rc: Option<i32>,
    /// `TIERKIT-DONE fails=N`.
    pub done: Option<i32>,
    pub progs: Vec<ProgRun>,
    /// `TIERKIT-ERROR ...` texts.
    pub errors: Vec<String>,
    pub notes: Vec<String>,
    /// `TIERKIT-TOPO ...` lines.
    pub topology: Vec<String>,
    /// `TIERKIT-CXL ...` lines (the CXL region assembly, step by step),
    /// with their timestamps.
    pub cxl: Vec<(Option<f64>, String)>,
    /// `TIERKIT-KMEMLEAK leaks=N`: the kmemleak scan after rmmod (debug
    /// profile) ran and found N unreferenced objects.
    pub kmemleak_leaks: Option<u32>,
}

impl Markers {
    /// `cxl step=<name>: <what>` errors as (step, what).
    pub fn cxl_errors(&self) -> Vec<(&str, &str)> {
        self.errors
            .iter()
            .filter_map(|e| e.strip_prefix("cxl step="))
            .map(|r| r.split_once(": ").unwrap_or((r, "")))
            .collect()
    }

    /// Seconds from `TIERKIT-CXL setup` to `TIERKIT-CXL ready` (the region
    /// assembly and onlining), if both came.
    pub fn cxl_setup_secs(&self) -> Option<f64> {
        let at = |p: &str| {
            self.cxl
                .iter()
                .find(|(_, l)| l.starts_with(p))
                .and_then(|(t, _)| *t)
        };
        Some(at("ready")? - at("setup")?)
    }
}

/// Marker kinds of guest programs run by /init.
fn is_prog_kind(k: &str) -> bool {
    matches!(k, "USERTEST" | "DEMO" | "BENCH")
}

fn rc_of(s: &str) -> Option<i32> {
    s.split_whitespace()
        .find_map(|w| w.strip_prefix("rc="))
        .and_then(|v| v.parse().ok())
}

/// Reads markers from the console (timestamps, order with KTAP) and program
/// output from the data channel.
pub fn scan(console: &str, data: &str) -> Markers {
    let mut m = Markers::default();
    let mut by_name: BTreeMap<String, usize> = BTreeMap::new();
    for line in console.lines() {
        let (ts, text) = printk::split_seconds(line);
        let Some(i) = text.find("TIERKIT-") else {
            continue;
        };
        let t = text[i..].trim_end();
        let (tag, rest) = t.split_once(' ').unwrap_or((t, ""));
        let tag = &tag["TIERKIT-".len()..];
        match tag {
            "BOOT" => m.booted = true,
            "INSMOD" => m.insmod_rc = rc_of(rest),
            "RMMOD" => m.rmmod_rc = rc_of(rest),
            "DONE" => {
                m.done = Some(
                    rest.split_whitespace()
                        .find_map(|w| w.strip_prefix("fails="))
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0),
                )
            }
            "ERROR" => m.errors.push(rest.to_string()),
            "NOTE" => m.notes.push(rest.to_string()),
            "TOPO" => m.topology.push(rest.to_string()),
            "CXL" => m.cxl.push((ts, rest.to_string())),
            "KMEMLEAK" => {
                m.kmemleak_leaks = rest
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("leaks="))
                    .and_then(|v| v.parse().ok())
            }
            _ => {
                if let Some(kind) = tag.strip_suffix("-START").filter(|k| is_prog_kind(k)) {
                    let name = rest
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_string();
                    by_name.insert(format!("{kind}/{name}"), m.progs.len());
                    m.progs.push(ProgRun {
                        kind: kind.to_string(),
                        name,
                        start_s: ts,
                        ..Default::default()
                    });
                } else if is_prog_kind(tag) {
                    let name = rest.split_whitespace().next().unwrap_or_default();
                    if let Some(&i) = by_name.get(&format!("{tag}/{name}")) {
                        m.progs[i].rc = rc_of(rest);
                        m.progs[i].end_s = ts;
                    }
                }
            }
        }
    }
    // The data channel: START/end markers delimit each program's output.
    let mut cur: Option<usize> = None;
    for line in data.lines() {
        if let Some(rest) = line.strip_prefix("TIERKIT-") {
            let (tag, args) = rest.split_once(' ').unwrap_or((rest, ""));
            let name = args.split_whitespace().next().unwrap_or_default();
            if let Some(kind) = tag.strip_suffix("-START").filter(|k| is_prog_kind(k)) {
                cur = by_name.get(&format!("{kind}/{name}")).copied();
                continue;
            }
            if is_prog_kind(tag) {
                cur = None;
                continue;
            }
        }
        let Some(i) = cur else { continue };
        let p = &mut m.progs[i];
        if let Some(j) = line.find("TIERKIT-JSON ") {
            let js = &line[j + "TIERKIT-JSON ".len()..];
            match serde_json::from_str(js) {
                Ok(v) => p.json.push(v),
                Err(_) => p.bad_json.push(js.to_string()),
            }
        }
        p.output.push(line.to_string());
    }
    m
}

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

/// Judges a boot: KTAP (via [`ktap::Run::verdict`]) plus the /init protocol.
/// `kunit`: KUnit ran (not `kunit.enable=0`), so the module's suites must
/// report. `filter` is `--filter`: with it, a run without KUnit suites is
/// fine as long as some test (KUnit or userspace) ran. `profile` debug: the
/// kmemleak scan after rmmod must have run.
pub fn evaluate(guest: &GuestRun, kunit: bool, filter: Option<&str>, profile: Profile) -> Outcome {
    let mut run = ktap::Run::parse(&guest.console);
    name_report_phases(&mut run, &guest.console);
    let markers = scan(&guest.console, &guest.data);
    let mut reasons: Vec<String> = Vec::new();
    let mut harness: Vec<UserTest> = Vec::new();
    let mut fail = |name: &str, msg: String, reasons: &mut Vec<String>| {
        reasons.push(msg.clone());
        harness.push(harness_failure(name, msg));
    };

    if guest.timed_out {
        fail(
            "timeout",
            format!(
                "the guest hung: no TIERKIT-DONE within {:.0} s, QEMU killed. Last console lines:\n{}",
                guest.elapsed.as_secs_f64(),
                last_lines(&guest.console, 15)
            ),
            &mut reasons,
        );
    }
    if !markers.booted {
        fail(
            "boot",
            format!(
                "the guest never reached /init (QEMU exit: {}). Last console lines:\n{}{}",
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
            ),
            &mut reasons,
        );
    } else {
        // CXL region assembly failed: /init says which step and skips the
        // rest (tierkit is not loaded).
        let cxl_errors = markers.cxl_errors();
        for (step, what) in &cxl_errors {
            fail(
                &format!("cxl {step}"),
                format!("CXL setup failed at step `{step}`: {what}"),
                &mut reasons,
            );
        }
        match markers.insmod_rc {
            None if !cxl_errors.is_empty() => {}
            Some(0) => {}
            Some(rc) => {
                let why = markers.errors.iter().find(|e| e.contains("insmod")).cloned();
                let msg = why.unwrap_or_else(|| format!("insmod tierkit.ko failed (rc={rc})"));
                fail("insmod", format!("{msg}; the kernel's messages are in the console log"), &mut reasons);
            }
            None if guest.timed_out => {
                fail("insmod", "insmod tierkit.ko never returned: hung in module init or in a KUnit suite".into(), &mut reasons)
            }
            None => fail("insmod", "insmod tierkit.ko never returned: the guest died in module init or in a KUnit suite".into(), &mut reasons),
        }
        for p in &markers.progs {
            match p.rc {
                Some(0) => {}
                Some(rc) if p.kind == "USERTEST" => {
                    reasons.push(format!("userspace test {} failed (rc={rc})", p.name))
                }
                Some(rc) => reasons.push(format!(
                    "{} {} failed (rc={rc})",
                    p.kind.to_lowercase(),
                    p.name
                )),
                None => fail(
                    &p.name,
                    format!(
                        "{} {} started but never finished",
                        p.kind.to_lowercase(),
                        p.name
                    ),
                    &mut reasons,
                ),
            }
            if !p.bad_json.is_empty() {
                fail(
                    &p.name,
                    format!(
                        "{}: {} TIERKIT-JSON line(s) are not valid JSON, e.g. {}",
                        p.name,
                        p.bad_json.len(),
                        p.bad_json[0].chars().take(200).collect::<String>()
                    ),
                    &mut reasons,
                );
            }
        }
        if markers.insmod_rc == Some(0) && markers.rmmod_rc.is_some_and(|rc| rc != 0) {
            let why = markers.errors.iter().find(|e| e.contains("rmmod")).cloned();
            fail(
                "rmmod",
                why.unwrap_or_else(|| "rmmod tierkit failed".into()),
                &mut reasons,
            );
        }
        for e in &markers.errors {
            if !e.contains("insmod") && !e.contains("rmmod") && !e.starts_with("cxl step=") {
                fail("guest", format!("guest error: {e}"), &mut reasons);
            }
        }
        if profile == Profile::Debug && markers.rmmod_rc == Some(0) {
            let reported = run
                .crashes
                .iter()
                .filter(|c| c.kind == console::CrashKind::Kmemleak)
                .count();
            match markers.kmemleak_leaks {
                None if !markers.errors.iter().any(|e| e.starts_with("kmemleak")) => fail(
                    "kmemleak",
                    "the kmemleak scan after rmmod never reported (no TIERKIT-KMEMLEAK marker)"
                        .into(),
                    &mut reasons,
                ),
                // Each object is a kernel report of its own (quoted with the
                // crashes); this catches a report the console lost.
                Some(n) if n as usize > reported => fail(
                    "kmemleak",
                    format!(
                        "kmemleak found {n} unreferenced object(s) after rmmod, {reported} of them in the console log"
                    ),
                    &mut reasons,
                ),
                _ => {}
            }
        }
        if markers.done.is_none() && !guest.timed_out {
            fail(
                "done",
                format!(
                    "the guest stopped before TIERKIT-DONE ({}). Last console lines:\n{}",
                    why_stopped(guest.exit),
                    last_lines(&guest.console, 15)
                ),
                &mut reasons,
            );
        }
    }

    // KTAP: failed or crashed tests, kernel crashes, short plans. Suites are
    // expected whenever KUnit runs (not in bench mode, which turns it off).
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
        let kv = run.verdict(kunit_on && filter.is_none());
        reasons.extend(kv.reasons.iter().cloned());
    }
    if let Some(f) = filter {
        let usertests = markers
            .progs
            .iter()
            .filter(|p| p.kind == "USERTEST")
            .count();
        if kunit_on && markers.done.is_some() && run.suites().next().is_none() && usertests == 0 {
            reasons.push(format!(
                "--filter '{f}' matched no KUnit suite and no userspace test"
            ));
        }
    }

    let mut user_tests: Vec<UserTest> = markers
        .progs
        .iter()
        .filter(|p| p.kind == "USERTEST" && p.rc.is_some())
        .map(|p| UserTest {
            name: p.name.clone(),
            passed: p.rc == Some(0),
            skipped: p.rc == Some(0) && all_skipped(&p.json),
            rc: p.rc.unwrap_or(-1),
            output_tail: p.output[p.output.len().saturating_sub(40)..].join("\n"),
            duration_ms: match (p.start_s, p.end_s) {
                (Some(a), Some(b)) if b >= a => ((b - a) * 1000.0) as u64,
                _ => 0,
            },
        })
        .collect();
    user_tests.extend(harness);
    // A failed run must show at least one failure in the totals line.
    if !reasons.is_empty() && crate::report::Totals::of(&run, &user_tests).failed == 0 {
        user_tests.push(harness_failure("verdict", reasons.join("\n")));
    }
    Outcome {
        run,
        markers,
        user_tests,
        reasons,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_qemu_killed_from_outside_is_named() {
        use std::os::unix::process::ExitStatusExt;
        use std::process::ExitStatus;
        assert!(why_stopped(Some(ExitStatus::from_raw(9))).contains("OOM killer"));
        assert!(why_stopped(Some(ExitStatus::from_raw(15))).contains("signal 15"));
        assert!(why_stopped(Some(ExitStatus::from_raw(0))).contains("crash or power-off"));
        assert!(why_stopped(None).contains("crash or power-off"));
    }
    use std::path::PathBuf;
    use std::time::Duration;

    const GOOD: &str = "\
[    0.100000] KTAP version 1
[    0.100001] 1..0
[    1.000000] TIERKIT-BOOT mode=test kernel=7.3.4 cpus=2
[    1.000100] TIERKIT-TOPO node0 cpus=0-1 mem_total=4000000 kB hugepages_1g=0
[    1.100000] TIERKIT-INSMOD-START
[    1.200000] KTAP version 1
[    1.200001] 1..1
[    1.200002]     KTAP version 1
[    1.200003]     # Subtest: tierkit_topology
[    1.200004]     # module: tierkit
[    1.200005]     1..2
[    1.200006]     ok 1 node0_has_cpus_and_memory
[    1.200007]     ok 2 a_cpuless_memory_node_exists
[    1.200008] # tierkit_topology: pass:2 fail:0 skip:0 total:2
[    1.200009] # Totals: pass:2 fail:0 skip:0 total:2
[    1.200010] ok 1 tierkit_topology
[    1.300000] TIERKIT-INSMOD rc=0
[    1.400000] TIERKIT-USERTEST-START tk-test-a
hello from a
[    1.900000] TIERKIT-USERTEST tk-test-a rc=0
[    2.000000] TIERKIT-RMMOD rc=0
[    2.100000] TIERKIT-DONE fails=0
[    2.200000] reboot: Power down
";
    const GOOD_DATA: &str = "TIERKIT-USERTEST-START tk-test-a\nhello from a\nTIERKIT-JSON {\"x\": 1}\nTIERKIT-USERTEST tk-test-a rc=0\n";

    fn guest(console: &str, data: &str, timed_out: bool) -> GuestRun {
        GuestRun {
            console_log: PathBuf::from("/tmp/console.log"),
            data_log: PathBuf::from("/tmp/data.log"),
            console: console.into(),
            data: data.into(),
            exit: None,
            timed_out,
            elapsed: Duration::from_secs(3),
            qemu_stderr: String::new(),
        }
    }

    #[test]
    fn a_good_run_passes() {
        let o = evaluate(&guest(GOOD, GOOD_DATA, false), true, None, Profile::Default);
        assert!(o.ok(), "{:?}", o.reasons);
        assert_eq!(o.user_tests.len(), 1);
        assert_eq!(o.user_tests[0].duration_ms, 500);
        assert_eq!(o.markers.progs[0].json, vec![serde_json::json!({"x": 1})]);
        assert_eq!(o.markers.progs[0].output[0], "hello from a");
        assert_eq!(o.markers.topology.len(), 1);
        let t = crate::report::Totals::of(&o.run, &o.user_tests);
        assert_eq!((t.passed, t.failed), (3, 0));
    }

    #[test]
    fn failing_usertest_fails() {
        let c = GOOD.replace("tk-test-a rc=0", "tk-test-a rc=3");
        let o = evaluate(&guest(&c, GOOD_DATA, false), true, None, Profile::Default);
        assert!(!o.ok());
        assert!(o
            .reasons
            .iter()
            .any(|r| r.contains("tk-test-a failed (rc=3)")));
        assert_eq!(crate::report::Totals::of(&o.run, &o.user_tests).failed, 1);
    }

    #[test]
    fn failing_kunit_case_fails() {
        let c = GOOD
            .replace("    ok 2 a_cpuless", "    not ok 2 a_cpuless")
            .replace("ok 1 tierkit_topology", "not ok 1 tierkit_topology");
        let o = evaluate(&guest(&c, GOOD_DATA, false), true, None, Profile::Default);
        assert!(!o.ok());
        assert_eq!(crate::report::Totals::of(&o.run, &o.user_tests).failed, 1);
    }

    #[test]
    fn insmod_failure_fails() {
        let c = "[ 1.0] TIERKIT-BOOT mode=test\n[ 1.1] TIERKIT-INSMOD rc=1\n[ 1.1] TIERKIT-ERROR insmod /lib/modules/tierkit.ko failed (rc=1): Invalid module format\n[ 1.2] TIERKIT-DONE fails=1\n";
        let o = evaluate(&guest(c, "", false), true, None, Profile::Default);
        assert!(!o.ok());
        assert!(
            o.reasons[0].contains("Invalid module format"),
            "{:?}",
            o.reasons
        );
        assert!(crate::report::Totals::of(&o.run, &o.user_tests).failed >= 1);
    }

    #[test]
    fn missing_done_and_timeout_fail() {
        let cut = GOOD.split("[    2.000000]").next().unwrap();
        let o = evaluate(&guest(cut, GOOD_DATA, false), true, None, Profile::Default);
        assert!(
            o.reasons.iter().any(|r| r.contains("TIERKIT-DONE")),
            "{:?}",
            o.reasons
        );
        let o = evaluate(&guest(cut, GOOD_DATA, true), true, None, Profile::Default);
        assert!(
            o.reasons.iter().any(|r| r.contains("hung")),
            "{:?}",
            o.reasons
        );
        assert!(crate::report::Totals::of(&o.run, &o.user_tests).failed >= 1);
    }

    #[test]
    fn never_booted_fails() {
        let o = evaluate(
            &guest(
                "[    1.7] Kernel panic - not syncing: VFS: Unable to mount root fs\n",
                "",
                false,
            ),
            true,
            None,
            Profile::Default,
        );
        assert!(o.reasons.iter().any(|r| r.contains("never reached /init")));
    }

    #[test]
    fn unfinished_program_and_bad_json() {
        let c = GOOD.replace("[    1.900000] TIERKIT-USERTEST tk-test-a rc=0\n", "");
        let d = "TIERKIT-USERTEST-START tk-test-a\nTIERKIT-JSON {broken\n";
        let o = evaluate(&guest(&c, d, false), true, None, Profile::Default);
        assert!(o.reasons.iter().any(|r| r.contains("never finished")));
        assert!(o.reasons.iter().any(|r| r.contains("not valid JSON")));
    }

    #[test]
    fn filter_may_exclude_kunit_but_not_everything() {
        let only_user = "[ 1.0] TIERKIT-BOOT mode=test\n[ 1.1] TIERKIT-INSMOD rc=0\n[ 1.2] TIERKIT-USERTEST-START tk-test-a\n[ 1.3] TIERKIT-USERTEST tk-test-a rc=0\n[ 1.4] TIERKIT-RMMOD rc=0\n[ 1.5] TIERKIT-DONE fails=0\n";
        let o = evaluate(
            &guest(only_user, "", false),
            true,
            Some("tk-test-a"),
            Profile::Default,
        );
        assert!(o.ok(), "{:?}", o.reasons);
        let nothing = "[ 1.0] TIERKIT-BOOT mode=test\n[ 1.1] TIERKIT-INSMOD rc=0\n[ 1.4] TIERKIT-RMMOD rc=0\n[ 1.5] TIERKIT-DONE fails=0\n";
        let o = evaluate(
            &guest(nothing, "", false),
            true,
            Some("typo*"),
            Profile::Default,
        );
        assert!(
            o.reasons.iter().any(|r| r.contains("matched no")),
            "{:?}",
            o.reasons
        );
        let o = evaluate(&guest(nothing, "", false), true, None, Profile::Default);
        assert!(
            o.reasons.iter().any(|r| r.contains("no KUnit suite ran")),
            "{:?}",
            o.reasons
        );
    }

    #[test]
    fn cxl_step_failure_is_named_and_skips_the_rest() {
        let c = "\
[ 1.0] TIERKIT-BOOT mode=test kernel=7.3.4 cpus=2
[ 1.1] TIERKIT-CXL setup: 1 device(s) of 4096 MiB
[ 1.2] TIERKIT-CXL region0: decoder0.0 -> mem0 (4096 MiB) via endpoint2/decoder2.0
[ 1.3] TIERKIT-ERROR cxl step=commit: echo 1 > region0/commit: sh: write error: No such device or address
[ 1.4] TIERKIT-NOTE CXL setup failed: tierkit is not loaded and no test runs
[ 1.5] TIERKIT-DONE fails=1
";
        let o = evaluate(&guest(c, "", false), true, None, Profile::Default);
        assert!(!o.ok());
        assert_eq!(o.markers.cxl.len(), 2);
        assert!(
            o.reasons[0].starts_with("CXL setup failed at step `commit`"),
            "{:?}",
            o.reasons
        );
        // Named in the harness output, and no second complaint about insmod.
        assert!(o
            .user_tests
            .iter()
            .any(|t| t.name == "[harness] cxl commit"));
        assert!(
            !o.reasons.iter().any(|r| r.contains("insmod")),
            "{:?}",
            o.reasons
        );
        assert!(crate::report::Totals::of(&o.run, &o.user_tests).failed >= 1);
    }

    #[test]
    fn cxl_interleave_failure_keeps_the_kernels_reason() {
        // From a guest with --cxl-interleave 2 and tierkit.cxl=4096:2:128.
        let c = "\
[ 1.0] TIERKIT-BOOT mode=test kernel=7.3.4 cpus=2
[ 1.1] TIERKIT-CXL setup: 1 region(s) over 2 device(s): 4096:2:128 (MiB[:ways:granularity])
[ 1.2] TIERKIT-CXL region0: decoder0.0 -> mem0 mem1 (4096 MiB, 2-way, granularity 128) via dport0:endpoint2/decoder2.0 dport1:endpoint3/decoder3.0
[ 1.3] TIERKIT-ERROR cxl step=granularity: echo 128 > region0/interleave_granularity: sh: write error: Invalid argument; kernel: root decoder0.0 interleave_ways=1 interleave_granularity=256 cap_ram=1 cap_type3=1; host bridge port1 dports=0,1 (more: TIERKIT-CXL diag lines)
[ 1.4] TIERKIT-CXL diag: host bridge port1 decoder1.0(ways=1 granularity=256 targets=0 region=)
[ 1.5] TIERKIT-NOTE CXL setup failed: tierkit is not loaded and no test runs
[ 1.6] TIERKIT-DONE fails=1
";
        let o = evaluate(&guest(c, "", false), true, None, Profile::Default);
        assert!(!o.ok());
        assert!(o
            .user_tests
            .iter()
            .any(|t| t.name == "[harness] cxl granularity"));
        let r = &o.reasons[0];
        assert!(
            r.starts_with("CXL setup failed at step `granularity`"),
            "{r}"
        );
        assert!(
            r.contains("Invalid argument") && r.contains("interleave_granularity=256"),
            "{r}"
        );
        assert!(
            !o.reasons.iter().any(|r| r.contains("insmod")),
            "{:?}",
            o.reasons
        );
    }

    #[test]
    fn cxl_setup_time_and_skipped_programs() {
        let c = GOOD.replace(
            "[    1.000100] TIERKIT-TOPO",
            "[    1.000050] TIERKIT-CXL setup: 1 device(s) of 4096 MiB\n[    3.500050] TIERKIT-CXL ready: 1 region(s) online\n[    1.000100] TIERKIT-TOPO",
        );
        let d = GOOD_DATA.replace(
            "TIERKIT-JSON {\"x\": 1}",
            "ok - cxl regions # SKIP no CXL devices\nTIERKIT-JSON {\"kind\":\"test\",\"passed\":0,\"failed\":0,\"skipped\":1}",
        );
        let o = evaluate(&guest(&c, &d, false), true, None, Profile::Default);
        assert!(o.ok(), "{:?}", o.reasons);
        assert!((o.markers.cxl_setup_secs().unwrap() - 2.5).abs() < 1e-6);
        assert!(o.user_tests[0].passed && o.user_tests[0].skipped);
        let t = crate::report::Totals::of(&o.run, &o.user_tests);
        assert_eq!((t.passed, t.failed, t.skipped), (2, 0, 1));
        let s = crate::report::format_summary(&o.run, &o.user_tests);
        assert!(s.contains("userspace.tk-test-a: no CXL devices"), "{s}");
    }

    #[test]
    fn bench_mode_ignores_disabled_kunit() {
        let c = "[ 0.1] kunit: disabled\n[ 1.0] TIERKIT-BOOT mode=bench-wi\n[ 1.1] KTAP version 1\n[ 1.1] 1..8\n[ 1.1] TIERKIT-INSMOD rc=0\n[ 1.2] TIERKIT-BENCH-START tk-bench-wi\n[ 1.3] TIERKIT-BENCH tk-bench-wi rc=0\n[ 1.4] TIERKIT-RMMOD rc=0\n[ 1.5] TIERKIT-DONE fails=0\n";
        let d = "TIERKIT-BENCH-START tk-bench-wi\nTIERKIT-JSON {\"a\": 2}\nTIERKIT-BENCH tk-bench-wi rc=0\n";
        let o = evaluate(&guest(c, d, false), false, None, Profile::Default);
        assert!(o.ok(), "{:?}", o.reasons);
        assert_eq!(o.markers.progs[0].json.len(), 1);
        let bad = c.replace("tk-bench-wi rc=0", "tk-bench-wi rc=2");
        assert!(!evaluate(&guest(&bad, d, false), false, None, Profile::Default).ok());
    }

    // ---- kernel reports of the debug profile --------------------------------
    // Real report formats of Linux 7.3 (mm/kasan/report.c, lib/ubsan.c,
    // kernel/locking/lockdep.c, kernel/hung_task.c, kernel/rcu/tree_stall.h,
    // kernel/watchdog.c, mm/kmemleak.c) in whole console logs.

    const KASAN_LOG: &str = include_str!("../testdata/console/kasan_in_kunit_case.log");
    const DEBUG_LOG: &str = include_str!("../testdata/console/debug_run_reports.log");
    const DEBUG_DATA: &str = include_str!("../testdata/console/debug_run_reports.data");
    const UBSAN_LOG: &str = include_str!("../testdata/console/ubsan_in_usertest.log");

    /// The kernel report among the reasons that contains `needle`.
    fn reason_with<'a>(o: &'a Outcome, needle: &str) -> &'a str {
        o.reasons
            .iter()
            .find(|r| r.starts_with("kernel ") && r.contains(needle))
            .unwrap_or_else(|| panic!("no reason with `{needle}` in {:#?}", o.reasons))
    }

    #[test]
    fn kasan_report_fails_the_run_and_names_the_kunit_case() {
        let o = evaluate(&guest(KASAN_LOG, "", false), true, None, Profile::Debug);
        assert!(!o.ok());
        let r = reason_with(&o, "BUG: KASAN: slab-use-after-free");
        assert!(
            r.starts_with("kernel KASAN report at console line 30: "),
            "{r}"
        );
        // The panic cut the case short before its result line; its name
        // comes from the Rust KUnit wrapper in the call trace.
        assert!(
            r.ends_with("(during KUnit tierkit_clear.failing_worker_eio)"),
            "{r}"
        );
        let panic = reason_with(&o, "Kernel panic - not syncing: KASAN: panic_on_warn set");
        assert!(panic.starts_with("kernel panic at console line"), "{panic}");
        assert!(o
            .reasons
            .iter()
            .any(|r| r.contains("crashed (no result line)")));

        // The quote: the bad access, then the module's frames, not KASAN's.
        let kasan = &o.run.crashes[0];
        assert_eq!(kasan.kind, console::CrashKind::Kasan);
        assert_eq!(
            kasan.details,
            ["Read of size 8 at addr ffff888006f3c218 by task kunit_try_catch/112"]
        );
        let quote = crate::report::quote_crash(kasan);
        assert!(
            quote[1].contains("7tierkit5clear4pool11worker_done+0x5c/0x90"),
            "{quote:#?}"
        );
        assert!(!quote.iter().any(|l| l.starts_with("kasan_report")));
        // The allocation and free traces are not the access's.
        assert!(!kasan
            .call_trace
            .iter()
            .any(|f| f.contains("kasan_save_stack")));
        let summary = crate::report::format_summary(&o.run, &o.user_tests);
        assert!(
            summary.contains("Kernel crashes:\n  kernel KASAN report at console line 30: BUG: KASAN: slab-use-after-free in "),
            "{summary}"
        );
        assert!(summary.contains("      Read of size 8 at addr ffff888006f3c218"));
        assert!(crate::report::Totals::of(&o.run, &o.user_tests).failed >= 1);
    }

    #[test]
    fn every_debug_report_is_named_with_what_was_running() {
        let o = evaluate(
            &guest(DEBUG_LOG, DEBUG_DATA, false),
            true,
            None,
            Profile::Debug,
        );
        assert!(!o.ok());
        let kinds: Vec<console::CrashKind> = o.run.crashes.iter().map(|c| c.kind).collect();
        use console::CrashKind as K;
        assert_eq!(
            kinds,
            [
                K::Lockdep,
                K::HungTask,
                K::RcuStall,
                K::SoftLockup,
                K::Kmemleak,
                K::Kmemleak
            ]
        );
        let r = reason_with(&o, "possible circular locking dependency");
        assert!(
            r.starts_with("kernel lockdep report at console line"),
            "{r}"
        );
        assert!(
            r.ends_with("(during KUnit tierkit_wi_files.files_follow_hotplug)"),
            "{r}"
        );
        assert!(o.run.crashes[0]
            .details
            .contains(&"kunit_try_catch/97 is trying to acquire lock:".to_string()));
        let r = reason_with(&o, "blocked for more than 60 seconds");
        assert!(r.starts_with("kernel hung task at console line"), "{r}");
        assert!(r.ends_with("(during userspace test tk-test-task)"), "{r}");
        let r = reason_with(&o, "rcu_preempt detected stalls");
        assert!(
            r.ends_with("(during userspace test tk-test-gigantic)"),
            "{r}"
        );
        let r = reason_with(&o, "soft lockup - CPU#1 stuck for 11s");
        assert!(
            r.ends_with("(during userspace test tk-test-gigantic)"),
            "{r}"
        );
        assert_eq!(
            o.run.crashes[3].rip.as_deref(),
            Some("RIP: 0010:_RNvNtNtCsd1dMp4c1AgC_7tierkit5clear4pool11clear_chunk+0x77/0x1a0 [tierkit]")
        );
        let r = reason_with(&o, "unreferenced object 0xffff888007d3e600 (size 192)");
        assert!(
            r.starts_with("kernel kmemleak report at console line"),
            "{r}"
        );
        assert!(r.contains("(during kmemleak scan after rmmod"), "{r}");
        // Who allocated it and where, without the hex dump.
        let leak = &o.run.crashes[4];
        assert_eq!(
            leak.details,
            ["comm \"insmod\", pid 94, jiffies 4294682917"]
        );
        assert!(leak.call_trace[1].contains("7tierkit2wi12weight_table"));
        assert_eq!(o.markers.kmemleak_leaks, Some(2));
        // Every test passed, yet the run fails and says so in its totals.
        assert!(o
            .run
            .suites()
            .all(|s| s.status == crate::ktap::Status::Pass));
        assert!(o
            .user_tests
            .iter()
            .filter(|t| !t.name.starts_with('['))
            .all(|t| t.passed));
        assert!(crate::report::Totals::of(&o.run, &o.user_tests).failed >= 1);
    }

    #[test]
    fn ubsan_report_names_the_userspace_test() {
        let o = evaluate(&guest(UBSAN_LOG, "", false), true, None, Profile::Debug);
        let r = reason_with(
            &o,
            "UBSAN: shift-out-of-bounds in /work/main/module/src/shim.c:41:25",
        );
        assert!(
            r.starts_with("kernel UBSAN report at console line 14: "),
            "{r}"
        );
        assert!(r.ends_with("(during userspace test tk-test-diff)"), "{r}");
        assert_eq!(
            o.run.crashes[0].details,
            ["shift exponent 64 is too large for 64-bit type 'unsigned long'"]
        );
        let quote = crate::report::quote_crash(&o.run.crashes[0]);
        assert_eq!(quote[1], "tk_nodemask_bit+0x5e/0x70 [tierkit]");
        assert!(o
            .reasons
            .iter()
            .any(|r| r.contains("UBSAN: panic_on_warn set")));
        assert!(o
            .reasons
            .iter()
            .any(|r| r.contains("tk-test-diff started but never finished")));
    }

    #[test]
    fn debug_profile_needs_the_kmemleak_scan() {
        // A clean debug run passes...
        let clean = GOOD.replace(
            "[    2.100000] TIERKIT-DONE",
            "[    2.050000] TIERKIT-KMEMLEAK-SCAN\n[    2.060000] TIERKIT-KMEMLEAK leaks=0\n[    2.100000] TIERKIT-DONE",
        );
        let o = evaluate(&guest(&clean, GOOD_DATA, false), true, None, Profile::Debug);
        assert!(o.ok(), "{:?}", o.reasons);
        // ... one without the scan after rmmod does not,
        let o = evaluate(&guest(GOOD, GOOD_DATA, false), true, None, Profile::Debug);
        assert!(!o.ok());
        assert!(o.user_tests.iter().any(|t| t.name == "[harness] kmemleak"));
        // (the default profile does not scan)
        assert!(evaluate(&guest(GOOD, GOOD_DATA, false), true, None, Profile::Default).ok());
        // ... nor one whose leaks did not all reach the console.
        let lost = clean.replace("leaks=0", "leaks=3");
        let o = evaluate(&guest(&lost, GOOD_DATA, false), true, None, Profile::Debug);
        assert!(
            o.reasons
                .iter()
                .any(|r| r.contains("3 unreferenced object(s) after rmmod, 0 of them")),
            "{:?}",
            o.reasons
        );
    }

    #[test]
    fn the_live_stream_announces_every_debug_report() {
        let mut s = crate::qemu::Streamer::new(false, false);
        let shown: Vec<String> = DEBUG_LOG.lines().filter_map(|l| s.filter(l)).collect();
        let heads: Vec<&String> = shown.iter().filter(|l| l.contains(">>> kernel ")).collect();
        assert_eq!(heads.len(), 6, "{heads:#?}");
        assert!(heads[0].contains("lockdep report (during KUnit suite tierkit_wi_files"));
        assert!(heads[1].contains("hung task (during userspace test tk-test-task)"));
        assert!(heads[2].contains("RCU stall (during userspace test tk-test-gigantic)"));
        assert!(heads[3].contains("soft lockup"));
        assert!(heads[4].contains("kmemleak report (during kmemleak scan after rmmod"));
        // The lines of a report come with it.
        assert!(shown
            .iter()
            .any(|l| l.contains("but task is already holding lock:")));
        assert!(shown.iter().any(|l| l.contains("comm \"insmod\", pid 94")));
    }

    /// Captured from `cargo xtask test --profile debug --topology cxl`: insmod
    /// waiting in KUnit's executor while a case dirties 1 GiB of the CXL node.
    const HUNG_EXECUTOR_LOG: &str =
        include_str!("../testdata/console/hung_task_kunit_executor.log");

    #[test]
    fn kunits_own_wait_is_noted_but_a_hung_module_task_fails() {
        let run = ktap::Run::parse(HUNG_EXECUTOR_LOG);
        assert_eq!(run.crashes.len(), 1, "{:#?}", run.crashes);
        let c = &run.crashes[0];
        assert_eq!(c.kind, console::CrashKind::HungTask);
        assert!(c.not_a_failure.is_some());
        let v = run.verdict(false);
        assert!(
            !v.reasons.iter().any(|r| r.starts_with("kernel ")),
            "{:?}",
            v.reasons
        );
        let s = crate::report::format_summary(&run, &[]);
        assert!(s.contains("Kernel reports that are not failures:\n  console line 14: INFO: task insmod:215 blocked for more than 61 seconds."), "{s}");
        assert!(!s.contains("Kernel crashes:"));

        // The same report from a task blocked in the module fails the run.
        let in_module = HUNG_EXECUTOR_LOG.replace(
            "kunit_try_catch_run+0x14c/0x650",
            "_RNvMNtCsd1dMp4c1AgC_7tierkit3devNtB2_6TkFile10task_next+0x4d/0x1f0 [tierkit]",
        );
        let run = ktap::Run::parse(&in_module);
        assert!(run.crashes[0].not_a_failure.is_none());
        assert!(run
            .verdict(false)
            .reasons
            .iter()
            .any(|r| r.starts_with("kernel hung task at console line 14: INFO: task insmod:215")));
    }
}
