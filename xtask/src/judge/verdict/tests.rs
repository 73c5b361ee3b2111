//! Host tests of the verdict: marker scans and evaluated boots (timeouts,
//! failed insmod, programs, kmemleak, KTAP, `--filter`).

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
    let t = crate::report::summary::Totals::of(&o.run, &o.user_tests);
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
        .any(|r| r.contains("tk-test-a failed: exit code 3")));
    assert_eq!(
        crate::report::summary::Totals::of(&o.run, &o.user_tests).failed,
        1
    );
}

#[test]
fn failing_kunit_case_fails() {
    let c = GOOD
        .replace("    ok 2 a_cpuless", "    not ok 2 a_cpuless")
        .replace("ok 1 tierkit_topology", "not ok 1 tierkit_topology");
    let o = evaluate(&guest(&c, GOOD_DATA, false), true, None, Profile::Default);
    assert!(!o.ok());
    assert_eq!(
        crate::report::summary::Totals::of(&o.run, &o.user_tests).failed,
        1
    );
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
    assert!(crate::report::summary::Totals::of(&o.run, &o.user_tests).failed >= 1);
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
    assert!(crate::report::summary::Totals::of(&o.run, &o.user_tests).failed >= 1);
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
    assert!(o.reasons.iter().any(|r| r.starts_with(
        "the guest never reached /init: kernel panic before /init: Kernel panic - not syncing: VFS: Unable to mount root fs\n"
    )), "{:?}", o.reasons);
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
    // KUnit on, and off (Debian's kernel): a filter that ran nothing fails.
    for kunit in [true, false] {
        let o = evaluate(
            &guest(nothing, "", false),
            kunit,
            Some("typo*"),
            Profile::Default,
        );
        assert!(
            o.reasons.iter().any(|r| r.contains("matched no")),
            "kunit {kunit}: {:?}",
            o.reasons
        );
    }
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
    assert!(crate::report::summary::Totals::of(&o.run, &o.user_tests).failed >= 1);
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
    let t = crate::report::summary::Totals::of(&o.run, &o.user_tests);
    assert_eq!((t.passed, t.failed, t.skipped), (2, 0, 1));
    let s = crate::report::summary::format_summary(&o.run, &o.user_tests);
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

const KASAN_LOG: &str = include_str!("../../../testdata/console/kasan_in_kunit_case.log");
const DEBUG_LOG: &str = include_str!("../../../testdata/console/debug_run_reports.log");
const DEBUG_DATA: &str = include_str!("../../../testdata/console/debug_run_reports.data");
const UBSAN_LOG: &str = include_str!("../../../testdata/console/ubsan_in_usertest.log");

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
    let quote = crate::report::summary::quote_crash(kasan);
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
    let summary = crate::report::summary::format_summary(&o.run, &o.user_tests);
    assert!(
        summary.contains("Kernel crashes:\n  kernel KASAN report at console line 30: BUG: KASAN: slab-use-after-free in "),
        "{summary}"
    );
    assert!(summary.contains("      Read of size 8 at addr ffff888006f3c218"));
    assert!(crate::report::summary::Totals::of(&o.run, &o.user_tests).failed >= 1);
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
        Some(
            "RIP: 0010:_RNvNtNtCsd1dMp4c1AgC_7tierkit5clear4pool11clear_chunk+0x77/0x1a0 [tierkit]"
        )
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
        .all(|s| s.status == crate::judge::ktap::Status::Pass));
    assert!(o
        .user_tests
        .iter()
        .filter(|t| !t.name.starts_with('['))
        .all(|t| t.passed));
    assert!(crate::report::summary::Totals::of(&o.run, &o.user_tests).failed >= 1);
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
    let quote = crate::report::summary::quote_crash(&o.run.crashes[0]);
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
    let mut s = crate::boot::qemu::Streamer::new(false, false);
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
    include_str!("../../../testdata/console/hung_task_kunit_executor.log");

#[test]
fn kunits_own_wait_is_noted_but_a_hung_module_task_fails() {
    let run = ktap::Run::parse(HUNG_EXECUTOR_LOG);
    assert_eq!(run.crashes.len(), 1, "{:#?}", run.crashes);
    let c = &run.crashes[0];
    assert_eq!(c.kind, console::CrashKind::HungTask);
    assert!(c.not_a_failure.is_some());
    let v = run.failures(false);
    assert!(
        !v.reasons.iter().any(|r| r.starts_with("kernel ")),
        "{:?}",
        v.reasons
    );
    let s = crate::report::summary::format_summary(&run, &[]);
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
        .failures(false)
        .reasons
        .iter()
        .any(|r| r.starts_with("kernel hung task at console line 14: INFO: task insmod:215")));
}

/// GOOD with `tk-test-a` replaced by `name`, ending with `end` (its end
/// marker's arguments after the name), and `out` as its output.
fn with_prog(name: &str, end: Option<&str>, out: &str) -> (String, String) {
    let end_line = |e: &str| format!("[    1.900000] TIERKIT-USERTEST {name} {e}\n");
    let c = GOOD.replace(
        "[    1.900000] TIERKIT-USERTEST tk-test-a rc=0\n",
        &end.map(end_line).unwrap_or_default(),
    );
    let c = c.replace("START tk-test-a", &format!("START {name}"));
    let d = format!(
        "TIERKIT-USERTEST-START {name}\n{out}{}",
        end.map(|e| format!("TIERKIT-USERTEST {name} {e}\n"))
            .unwrap_or_default()
    );
    (c, d)
}

#[test]
fn a_failed_check_early_in_a_long_output_is_kept() {
    let mut out = String::from("ok - a\nnot ok - b (spares 0 -> 1)\n");
    for i in 0..60 {
        out.push_str(&format!("ok - later {i}\n"));
    }
    let (c, d) = with_prog("tk-test-a", Some("rc=1"), &out);
    let o = evaluate(&guest(&c, &d, false), true, None, Profile::Default);
    let t = &o.user_tests[0];
    assert!(!t.output_tail.contains("not ok"), "{}", t.output_tail);
    assert_eq!(t.failed_checks, ["not ok - b (spares 0 -> 1)"]);
}

#[test]
fn a_test_killed_at_its_deadline_fails_with_its_output_kept() {
    let out = "ok 1 - first half\ntk-init: tk-test-a: timed out after 120 s: killed its process group 99\n";
    let (c, d) = with_prog("tk-test-a", Some("rc=137 timeout=120"), out);
    let o = evaluate(&guest(&c, &d, false), true, None, Profile::Default);
    assert!(
        o.reasons
            .iter()
            .any(|r| r == "userspace test tk-test-a failed: timed out after 120 s"),
        "{:?}",
        o.reasons
    );
    let t = &o.user_tests[0];
    assert_eq!((t.passed, t.rc), (false, 137));
    assert_eq!(t.reason.as_deref(), Some("timed out after 120 s"));
    assert!(
        t.output_tail.contains("ok 1 - first half"),
        "{}",
        t.output_tail
    );
    // The same text in every report: JUnit's and KCIDB's message.
    let recs = crate::judge::records::walk(&o.run, &o.user_tests);
    let r = recs.iter().find(|r| r.name == "tk-test-a").expect("record");
    assert_eq!(r.message.as_deref(), Some("timed out after 120 s"));
    assert!(r.output.as_deref().unwrap_or("").contains("first half"));
    let (c, d) = with_prog("tk-test-a", Some("rc=0 left=2"), "ok 1 - x\n");
    let o = evaluate(&guest(&c, &d, false), true, None, Profile::Default);
    assert_eq!(
        o.user_tests[0].reason.as_deref(),
        Some("left 2 process(es) running after it exited")
    );
    assert!(!o.ok());
}

#[test]
fn the_runners_own_tests_pass_only_with_their_expected_verdict() {
    let out = "# printed before the deadline\n";
    let (c, d) = with_prog("tk-test-runner-sleep", Some("rc=137 timeout=2"), out);
    let o = evaluate(&guest(&c, &d, false), true, None, Profile::Default);
    assert!(o.ok(), "{:?}", o.reasons);
    assert!(o.user_tests[0].passed);
    assert!(o.user_tests[0]
        .reason
        .as_deref()
        .is_some_and(|r| r.starts_with("timed out after 2 s, as")));
    // It exited by itself: the runner did not do its job.
    let (c, d) = with_prog("tk-test-runner-sleep", Some("rc=0"), out);
    let o = evaluate(&guest(&c, &d, false), true, None, Profile::Default);
    assert!(!o.ok() && !o.user_tests[0].passed);
    // Killed, but what it printed is gone.
    let (c, d) = with_prog("tk-test-runner-dwait", Some("rc=137 timeout=2"), "");
    let o = evaluate(&guest(&c, &d, false), true, None, Profile::Default);
    assert!(!o.ok());
    let (c, d) = with_prog("tk-test-runner-orphan", Some("rc=0 left=2"), out);
    assert!(evaluate(&guest(&c, &d, false), true, None, Profile::Default).ok());
    let (c, d) = with_prog("tk-test-runner-orphan", Some("rc=0"), out);
    assert!(!evaluate(&guest(&c, &d, false), true, None, Profile::Default).ok());
    // Killed, and /init waited for what it held: a pass; without the
    // wait, or with what it held never back, a failure.
    let release = |args| {
        let (c, d) = with_prog("tk-test-runner-release", Some(args), out);
        evaluate(&guest(&c, &d, false), true, None, Profile::Default)
    };
    assert!(release("rc=137 timeout=2 left=1 waited=3").ok());
    assert!(!release("rc=137 timeout=2 left=1").ok());
    let o = release("rc=137 timeout=2 left=1 unreleased=1 waited=10");
    assert!(!o.ok());
    assert_eq!(
        o.user_tests[0].reason.as_deref(),
        Some(tierkit_protocol::deadline::UNRELEASED)
    );
    // An ordinary test whose pages never came back fails for it.
    let (c, d) = with_prog("tk-test-vma", Some("rc=137 timeout=120 unreleased=1"), out);
    assert!(!evaluate(&guest(&c, &d, false), true, None, Profile::Default).ok());
}

#[test]
fn the_boot_timeout_names_the_running_test_and_keeps_its_output() {
    let (c, d) = with_prog("tk-test-a", None, "ok 1 - before the hang\n");
    let c = c
        .split("[    2.000000]")
        .next()
        .unwrap_or_default()
        .to_string();
    let o = evaluate(&guest(&c, &d, true), true, None, Profile::Default);
    assert!(
        o.reasons
            .iter()
            .any(|r| r.contains("no TIERKIT-DONE within 3 s while userspace test tk-test-a ran")),
        "{:?}",
        o.reasons
    );
    let t = o
        .user_tests
        .iter()
        .find(|t| t.name == "tk-test-a")
        .expect("kept");
    assert!(!t.passed);
    assert!(t.output_tail.contains("before the hang"));
    assert_eq!(
        t.reason.as_deref(),
        Some("did not finish: the boot ended while it ran")
    );
    // The KUnit suite that finished before is kept too.
    assert_eq!(o.run.counts().passed, 2);
}

/// `run` (the demos): a boot that ran no demo, or none that `--filter`
/// names, fails in one line; it said `ok` before.
#[test]
fn run_fails_when_what_it_was_asked_for_did_not_run() {
    let boot = |demos: &[&str]| {
        let mut c = String::from(
            "[ 1.0] TIERKIT-BOOT mode=run kernel=7.3.4 cpus=2\n[ 1.1] TIERKIT-INSMOD rc=0\n",
        );
        for d in demos {
            c.push_str(&format!(
                "[ 1.2] TIERKIT-DEMO-START {d}\n[ 1.3] TIERKIT-DEMO {d} rc=0\n"
            ));
        }
        c.push_str("[ 1.4] TIERKIT-RMMOD rc=0\n[ 1.5] TIERKIT-DONE fails=0\n");
        c
    };
    let judged = |console: &str, kunit: bool, filter: Option<&str>| {
        let h = Harness {
            programs_filter: filter.map(str::to_string),
            ..Harness::default()
        };
        judge(
            &guest(console, "", false),
            kunit,
            filter,
            Profile::Default,
            &h,
        )
    };
    let o = judged(&boot(&["tk-demo", "tk-demo-gigantic"]), false, None);
    assert!(o.ok(), "{:?}", o.reasons);
    let o = judged(&boot(&["tk-demo-gigantic"]), false, Some("tk-demo-g*"));
    assert!(o.ok(), "{:?}", o.reasons);
    let o = judged(&boot(&[]), false, None);
    assert!(
        !o.ok() && o.reasons[0].contains("no demo ran"),
        "{:?}",
        o.reasons
    );
    let o = judged(&boot(&["tk-demo"]), false, Some("tk-demo,tk-demo-gigantic"));
    assert_eq!(o.reasons.len(), 1, "{:?}", o.reasons);
    assert!(
        o.reasons[0].contains("tk-demo-gigantic ran nothing in this boot"),
        "{:?}",
        o.reasons
    );
    assert!(o.user_tests.iter().any(|t| !t.passed));
    // With --kunit a glob may name KUnit cases instead.
    let ktap = GOOD.lines().take(2).chain(GOOD.lines().skip(5).take(11));
    let with_kunit: String = ktap.map(|l| format!("{l}\n")).collect::<String>() + &boot(&[]);
    let o = judged(&with_kunit, true, Some("tierkit_topology.*"));
    assert!(o.ok(), "{:?}", o.reasons);
    let o = judged(&with_kunit, true, Some("tierkit_wi*"));
    assert!(
        o.reasons
            .iter()
            .any(|r| r.contains("no demo and no KUnit case")),
        "{:?}",
        o.reasons
    );
}

/// A benchmark boot whose program never ran, or ran and wrote no
/// results, fails; one with results passes.
#[test]
fn bench_fails_without_its_results() {
    let boot = |prog: bool| {
        let mut c = String::from(
            "[ 1.0] TIERKIT-BOOT mode=bench-wi kernel=7.3.4 cpus=2\n[ 1.1] TIERKIT-INSMOD rc=0\n",
        );
        if prog {
            c.push_str(
                "[ 1.2] TIERKIT-BENCH-START tk-bench-wi\n[ 1.3] TIERKIT-BENCH tk-bench-wi rc=0\n",
            );
        }
        c.push_str("[ 1.4] TIERKIT-RMMOD rc=0\n[ 1.5] TIERKIT-DONE fails=0\n");
        c
    };
    let judged = |console: &str, data: &str| {
        judge(
            &guest(console, data, false),
            false,
            None,
            Profile::Default,
            &Harness::default(),
        )
    };
    let data = "TIERKIT-BENCH-START tk-bench-wi\nTIERKIT-JSON {\"x\": 1}\nTIERKIT-BENCH tk-bench-wi rc=0\n";
    let o = judged(&boot(true), data);
    assert!(o.ok(), "{:?}", o.reasons);
    let o = judged(&boot(true), "");
    assert!(
        o.reasons.iter().any(|r| r.contains("wrote no results")),
        "{:?}",
        o.reasons
    );
    let o = judged(&boot(false), "");
    assert!(
        o.reasons.iter().any(|r| r.contains("never ran")),
        "{:?}",
        o.reasons
    );
}
