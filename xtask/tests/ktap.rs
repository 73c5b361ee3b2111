//! Host tests for the KTAP parser (`src/judge/ktap.rs`, `src/judge/ktap/`) and the reports
//! (`src/report/summary.rs`), on console logs under `testdata/ktap/`.
//!
//! The logs follow what Linux 7.3 prints on a serial console with
//! CONFIG_PRINTK_TIME: `lib/kunit/executor.c` (document header),
//! `lib/kunit/test.c` (suite header, result lines, `# name: pass:...` and
//! `# Totals:` stats), `lib/kunit/assert.c` (assertion messages),
//! `arch/x86/kernel/dumpstack.c` (oops), interleaved with other printk and
//! userspace output.

use xtask::{judge::ktap, judge::printk, report::summary};

use std::path::PathBuf;

use ktap::{CrashKind, Directive, Run, Status, Test};
use summary::{Totals, UserTest};

fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/ktap")
        .join(name)
}

fn parse(name: &str) -> Run {
    let bytes = std::fs::read(testdata(name)).unwrap_or_else(|e| panic!("reading {name}: {e}"));
    Run::parse(&String::from_utf8_lossy(&bytes))
}

fn suite<'a>(run: &'a Run, name: &str) -> &'a Test {
    run.suites()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no suite {name}"))
}

fn case<'a>(suite: &'a Test, name: &str) -> &'a Test {
    suite
        .subtests
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no case {name} in {}", suite.name))
}

fn suite_names(run: &Run) -> Vec<&str> {
    run.suites().map(|s| s.name.as_str()).collect()
}

fn counts(passed: usize, failed: usize, skipped: usize, crashed: usize) -> ktap::Counts {
    ktap::Counts {
        passed,
        failed,
        skipped,
        crashed,
    }
}

fn user_test(name: &str, rc: i32) -> UserTest {
    UserTest {
        name: name.to_string(),
        passed: rc == 0,
        skipped: false,
        rc,
        output_tail: format!("{name}: done\n{name}: rc={rc}\n"),
        duration_ms: 1234,
        reason: None,
        ..Default::default()
    }
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("tierkit-ktap-test-{}-{name}", std::process::id()))
}

// ---------------------------------------------------------------------------
// Captured logs
// ---------------------------------------------------------------------------

#[test]
fn passing_module_run_after_empty_boot_document() {
    let run = parse("pass_module.log");

    assert_eq!(run.documents.len(), 2);
    let boot = &run.documents[0];
    assert_eq!(boot.version.as_deref(), Some("KTAP version 1"));
    assert_eq!(boot.plan, Some(0));
    assert!(boot.suites.is_empty());
    assert!(boot.errors.is_empty());

    let module = &run.documents[1];
    assert_eq!(module.plan, Some(2));
    assert_eq!(suite_names(&run), ["tierkit_topology", "tierkit_core"]);

    let topo = suite(&run, "tierkit_topology");
    assert_eq!(topo.status, Status::Pass);
    assert_eq!(topo.number, Some(1));
    assert_eq!(topo.plan, Some(3));
    let names: Vec<&str> = topo.subtests.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["node1_is_online", "node1_has_memory", "node1_has_no_cpus"]
    );
    assert!(topo.subtests.iter().all(|c| c.status == Status::Pass));
    assert_eq!(topo.totals, Some(counts(3, 0, 0, 0)));
    assert!(topo
        .diagnostics
        .contains(&"# Totals: pass:3 fail:0 skip:0 total:3".to_string()));

    assert_eq!(run.counts(), counts(5, 0, 0, 0));
    assert!(run.crashes.is_empty());
    assert!(run.problems().is_empty(), "{:?}", run.problems());
    let failures = run.failures(true);
    assert!(failures.is_ok(), "{failures}");
    assert_eq!(failures.to_string(), "KUnit: all good");
}

#[test]
fn failed_assertions_keep_their_diagnostics() {
    let run = parse("assert_failure.log");
    let topo = suite(&run, "tierkit_topology");
    assert_eq!(topo.status, Status::Fail);
    assert_eq!(topo.counts(), counts(2, 2, 0, 0));

    let memory = case(topo, "node1_has_memory");
    assert_eq!(memory.status, Status::Fail);
    assert_eq!(memory.number, Some(2));
    assert_eq!(
        memory.diagnostics,
        [
            "# node1_has_memory: ASSERTION FAILED at module/tierkit.rs:61",
            "Expected node_present_pages(1) > 0 to be true, but is false",
        ]
    );

    // A multi-line printk record: every line has the time stamp, and the
    // relative indentation survives.
    let cpus = case(topo, "node1_has_no_cpus");
    assert_eq!(cpus.status, Status::Fail);
    assert_eq!(
        cpus.diagnostics,
        [
            "# node1_has_no_cpus: EXPECTATION FAILED at module/shim.c:70",
            "Expected cpus_on_node(1) == 0, but",
            "    cpus_on_node(1) == 2 (0x2)",
            "    0 == 0 (0x0)",
        ]
    );
    assert_eq!(case(topo, "weighted_interleave_auto").status, Status::Pass);

    let failures = run.failures(true);
    assert_eq!(
        failures.reasons,
        [
            "tierkit_topology.node1_has_memory failed",
            "tierkit_topology.node1_has_no_cpus failed",
        ]
    );
    assert_eq!(
        failures.to_string(),
        "KUnit run failed:\n  - tierkit_topology.node1_has_memory failed\n  \
         - tierkit_topology.node1_has_no_cpus failed"
    );
}

#[test]
fn skips_todo_and_skipped_suites() {
    let run = parse("skipped.log");
    assert_eq!(
        suite_names(&run),
        ["tierkit_cxl", "tierkit_gigantic", "tierkit_legacy"]
    );

    let cxl = suite(&run, "tierkit_cxl");
    assert_eq!(cxl.status, Status::Pass);
    let window = case(cxl, "cdat_window");
    assert_eq!(window.status, Status::Skip);
    assert_eq!(window.directive, Some(Directive::Skip));
    assert_eq!(
        window.reason.as_deref(),
        Some("no CXL memory device present")
    );
    // `# SKIP` without a reason.
    let dax = case(cxl, "region_is_dax");
    assert_eq!(dax.status, Status::Skip);
    assert_eq!(dax.reason, None);
    assert_eq!(cxl.totals, Some(counts(1, 0, 2, 0)));

    // A suite skipped as a whole prints only its result line.
    let gigantic = suite(&run, "tierkit_gigantic");
    assert_eq!(gigantic.status, Status::Skip);
    assert!(gigantic.subtests.is_empty());
    assert_eq!(gigantic.plan, None);
    assert!(gigantic.errors.is_empty(), "{:?}", gigantic.errors);
    assert_eq!(
        gigantic.reason.as_deref(),
        Some("CONFIG_CONTIG_ALLOC is not set")
    );
    assert_eq!(gigantic.counts(), counts(0, 0, 1, 0));

    // `not ok ... # TODO` is an expected failure, not a failure.
    let legacy = suite(&run, "tierkit_legacy");
    let todo = case(legacy, "known_broken_weights");
    assert_eq!(todo.status, Status::Skip);
    assert_eq!(todo.directive, Some(Directive::Todo));
    assert_eq!(todo.reason.as_deref(), Some("weights ABI v2 not merged"));
    assert_eq!(legacy.status, Status::Pass);

    assert_eq!(run.counts(), counts(2, 0, 4, 0));
    assert!(run.failures(true).is_ok(), "{}", run.failures(true));
}

#[test]
fn nested_parameterised_cases() {
    let run = parse("parameterized.log");
    let weights = suite(&run, "tierkit_weights");
    assert_eq!(weights.status, Status::Fail);
    assert_eq!(weights.subtests.len(), 3);

    // Array parameters print a plan; their diagnostics use the case name.
    let bw = case(weights, "weights_from_bandwidth");
    assert_eq!(bw.status, Status::Fail);
    assert_eq!(bw.plan, Some(3));
    let params: Vec<(&str, Status)> = bw
        .subtests
        .iter()
        .map(|c| (c.name.as_str(), c.status))
        .collect();
    assert_eq!(
        params,
        [
            ("bw 200:50 -> 25:6", Status::Pass),
            ("bw 100:100 -> 1:1", Status::Pass),
            ("bw 10:0 -> 1:0", Status::Fail),
        ]
    );
    assert_eq!(
        bw.subtests[2].diagnostics[0],
        "# weights_from_bandwidth: EXPECTATION FAILED at module/core/src/weights.rs:88"
    );
    assert_eq!(
        bw.diagnostics,
        ["# weights_from_bandwidth: pass:2 fail:1 skip:0 total:3"]
    );

    // A parameter generator prints no plan; that is not an error.
    let chunks = case(weights, "chunk_plan");
    assert_eq!(chunks.status, Status::Pass);
    assert_eq!(chunks.plan, None);
    assert!(chunks.errors.is_empty(), "{:?}", chunks.errors);
    assert_eq!(chunks.subtests.len(), 3);
    assert_eq!(chunks.subtests[2].status, Status::Skip);
    assert_eq!(
        chunks.subtests[2].reason.as_deref(),
        Some("1G pages unavailable")
    );

    // Leaf-level counts agree with KUnit's `# Totals:` line.
    assert_eq!(weights.counts(), counts(5, 1, 1, 0));
    assert_eq!(weights.totals, Some(counts(5, 1, 1, 0)));
    assert!(weights.errors.is_empty(), "{:?}", weights.errors);

    let leaves: Vec<String> = weights.leaves().into_iter().map(|(p, _)| p).collect();
    assert_eq!(leaves.len(), 7);
    assert_eq!(leaves[2], "weights_from_bandwidth.bw 10:0 -> 1:0");
    assert_eq!(leaves[6], "auto_reduction");

    assert_eq!(
        run.failures(true).reasons,
        ["tierkit_weights.weights_from_bandwidth.bw 10:0 -> 1:0 failed"]
    );
}

#[test]
fn plan_mismatches_fail_the_run() {
    let run = parse("plan_mismatch.log");
    assert_eq!(run.documents.len(), 4);

    let short = suite(&run, "tierkit_short");
    assert_eq!(short.subtests.len(), 3);
    assert_eq!(short.errors, ["plan mismatch: plan 1..4 but 3 results"]);

    let long = suite(&run, "tierkit_long");
    assert_eq!(long.subtests.len(), 3);
    assert_eq!(long.errors, ["plan mismatch: plan 1..2 but 3 results"]);

    // One suite more than the document planned.
    assert_eq!(
        run.documents[2].errors,
        ["plan mismatch: plan 1..1 but 2 suites"]
    );
    assert_eq!(run.documents[2].suites.len(), 2);

    // The last document announced two suites, then the log ended.
    assert_eq!(
        run.documents[3].errors,
        ["cut short: plan 1..2 but the log ends after 1 suite result(s)"]
    );

    // Every case passed, yet the run fails.
    assert_eq!(run.counts(), counts(9, 0, 0, 0));
    let failures = run.failures(true);
    assert!(!failures.is_ok());
    assert!(failures
        .reasons
        .contains(&"tierkit_short: plan mismatch: plan 1..4 but 3 results".to_string()));
    assert!(failures
        .reasons
        .iter()
        .any(|r| r.contains("plan 1..1 but 2 suites")));
    assert!(failures
        .reasons
        .iter()
        .any(|r| r.contains("cut short: plan 1..2")));
}

#[test]
fn oops_with_panic_cuts_the_suite_short() {
    let run = parse("oops_cut_short.log");

    // The BUG and its Oops/RIP/call trace are one report; the panic that
    // follows the end of the trace is another. The repeated registers after
    // `---[ end trace` are not a third.
    let kinds: Vec<CrashKind> = run.crashes.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [CrashKind::Bug, CrashKind::Panic]);
    let bug = &run.crashes[0];
    assert_eq!(
        bug.message,
        "BUG: kernel NULL pointer dereference, address: 0000000000000008"
    );
    assert_eq!(bug.line, 41);
    assert_eq!(
        bug.rip.as_deref(),
        Some("RIP: 0010:_RNvNtCsk3Xh8yTfu0D_7tierkit5clear11clear_chunk+0x2a/0xc0 [tierkit]")
    );
    assert_eq!(bug.call_trace[0], "? __die+0x23/0x70");
    assert!(bug
        .call_trace
        .contains(&"kunit_try_run_case+0x91/0x190".to_string()));
    assert_eq!(
        bug.during.as_deref(),
        Some("tierkit_clear.clear_gigantic_range")
    );
    assert_eq!(
        run.crashes[1].message,
        "Kernel panic - not syncing: Fatal exception"
    );

    // The suite never reported; the case that was running is a crashed
    // placeholder named after its `# clear_gigantic_range: ...` line.
    let clear = suite(&run, "tierkit_clear");
    assert_eq!(clear.status, Status::Crashed);
    assert_eq!(clear.number, None);
    assert_eq!(clear.subtests.len(), 2);
    assert_eq!(clear.subtests[0].status, Status::Pass);
    let running = &clear.subtests[1];
    assert_eq!(running.name, "clear_gigantic_range");
    assert_eq!(running.status, Status::Crashed);
    assert_eq!(running.number, None);
    assert!(running
        .diagnostics
        .iter()
        .any(|d| d.contains("allocating 1 GiB on node 1")));
    assert_eq!(
        clear.errors,
        ["cut short: the log ends after 1 of 3 planned results"]
    );
    assert_eq!(
        run.documents[1].errors,
        ["cut short: plan 1..2 but the log ends after 0 suite result(s)"]
    );

    assert_eq!(run.counts(), counts(1, 0, 0, 1));
    let reasons = run.failures(true).reasons;
    assert_eq!(
        reasons[0],
        "tierkit_clear.clear_gigantic_range crashed (no result line)"
    );
    assert!(reasons
        .iter()
        .any(|r| r
            .starts_with("kernel BUG at console line 41: BUG: kernel NULL pointer dereference")));
    assert!(reasons
        .iter()
        .any(|r| r.contains("Kernel panic - not syncing")));
}

#[test]
fn oops_caught_by_kunit_and_warning_in_passing_case() {
    let run = parse("oops_caught.log");

    let kinds: Vec<CrashKind> = run.crashes.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [CrashKind::Bug, CrashKind::Warning]);
    assert_eq!(
        run.crashes[0].during.as_deref(),
        Some("tierkit_clear.clear_gigantic_range")
    );
    let warning = &run.crashes[1];
    assert!(warning
        .message
        .starts_with("WARNING: module/wi/policy.rs:212 at "));
    assert_eq!(
        warning.during.as_deref(),
        Some("tierkit_wi.weights_update_races")
    );
    assert!(warning
        .rip
        .as_deref()
        .unwrap()
        .contains("update_weights+0x1b4/0x1e0"));

    // KUnit survived the oops and reported the case as failed.
    let clear = suite(&run, "tierkit_clear");
    assert_eq!(clear.status, Status::Fail);
    let faulted = case(clear, "clear_gigantic_range");
    assert_eq!(faulted.status, Status::Fail);
    assert!(faulted
        .diagnostics
        .iter()
        .any(|d| d.trim() == "# clear_gigantic_range: try faulted"));
    assert_eq!(case(clear, "clear_zero_pages").status, Status::Pass);
    assert!(run.documents.iter().all(|d| d.errors.is_empty()));

    // The warning does not fail its test, but it fails the run.
    let wi = suite(&run, "tierkit_wi");
    assert_eq!(wi.status, Status::Pass);
    let reasons = run.failures(true).reasons;
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert_eq!(reasons[0], "tierkit_clear.clear_gigantic_range failed");
    assert!(reasons[2].starts_with("kernel warning at console line 102: WARNING:"));
    assert!(reasons[2].ends_with("(during tierkit_wi.weights_update_races)"));
}

#[test]
fn timestamps_caller_ids_crlf_and_interleaved_noise() {
    let run = parse("noise_timestamps.log");
    let raw = std::fs::read_to_string(testdata("noise_timestamps.log")).unwrap();
    assert!(raw.contains("][    T1] "), "sample should carry caller ids");
    assert!(raw.contains("\r\n"), "sample should have CRLF line ends");

    assert_eq!(run.documents.len(), 2);
    assert_eq!(suite_names(&run), ["tierkit_topology", "tierkit_weights"]);
    assert!(run.problems().is_empty(), "{:?}", run.problems());
    assert!(run.crashes.is_empty());

    let topo = suite(&run, "tierkit_topology");
    let names: Vec<&str> = topo.subtests.iter().map(|c| c.name.as_str()).collect();
    // The second result follows a partial userspace line on the same line.
    assert_eq!(
        names,
        ["node1_is_online", "node1_has_memory", "node1_has_no_cpus"]
    );
    // Noise goes to the case that was running, without time stamps.
    assert!(topo.subtests[1]
        .diagnostics
        .contains(&"tierkit: node 1: 262144 present pages, 0 cpus".to_string()));
    assert!(topo.subtests[0]
        .diagnostics
        .contains(&"random: crng init done".to_string()));

    let weights = suite(&run, "tierkit_weights");
    assert_eq!(weights.subtests[0].subtests.len(), 2);
    assert_eq!(run.counts(), counts(5, 0, 0, 0));
    assert!(run.failures(true).is_ok(), "{}", run.failures(true));
}

#[test]
fn several_module_documents() {
    let run = parse("multiple_modules.log");
    assert_eq!(run.documents.len(), 4);
    let plans: Vec<Option<usize>> = run.documents.iter().map(|d| d.plan).collect();
    assert_eq!(plans, [Some(0), Some(1), Some(2), Some(1)]);
    assert_eq!(
        suite_names(&run),
        [
            "tierkit_topology",
            "tierkit_selftest_shim",
            "tierkit_selftest_abi",
            "tierkit_bench"
        ]
    );
    // Suite numbers restart with each document.
    let numbers: Vec<Option<usize>> = run.suites().map(|s| s.number).collect();
    assert_eq!(numbers, [Some(1), Some(1), Some(2), Some(1)]);

    // Attributes stay with the suite and the case.
    let shim = suite(&run, "tierkit_selftest_shim");
    assert_eq!(shim.diagnostics[0].trim(), "# module: tierkit_selftest");
    assert_eq!(
        case(shim, "shim_clear_pages").diagnostics,
        ["# shim_clear_pages.speed: slow"]
    );

    assert_eq!(run.counts(), counts(5, 0, 1, 0));
    assert!(run.failures(true).is_ok(), "{}", run.failures(true));
}

#[test]
fn missing_plans() {
    let run = parse("missing_plan.log");
    let doc = &run.documents[1];
    assert_eq!(doc.plan, None);
    assert_eq!(
        doc.errors,
        ["missing plan (no `1..N` line after the version line)"]
    );
    let topo = suite(&run, "tierkit_topology");
    assert_eq!(topo.status, Status::Pass);
    assert_eq!(topo.errors, ["missing plan (no `1..N` line)"]);
    assert_eq!(run.failures(true).reasons.len(), 2);
}

#[test]
fn no_suites_when_the_module_did_not_load() {
    let run = parse("no_module_suites.log");
    assert_eq!(run.documents.len(), 1);
    assert_eq!(run.suites().count(), 0);
    let failures = run.failures(true);
    assert_eq!(failures.reasons.len(), 1);
    assert!(failures.reasons[0].starts_with("no KUnit suite ran"));
    // Without expectations, an empty run is fine.
    assert!(run.failures(false).is_ok());
}

#[test]
fn legacy_tap14_and_suites_without_document_header() {
    let run = parse("legacy_tap14.log");
    assert_eq!(run.documents.len(), 2);
    assert_eq!(run.documents[0].version.as_deref(), Some("TAP version 14"));
    assert_eq!(run.documents[0].plan, Some(2));
    // The module's suites came without `TAP version` / `1..N`.
    assert_eq!(run.documents[1].version, None);
    assert_eq!(run.documents[1].plan, None);
    assert!(run.documents.iter().all(|d| d.errors.is_empty()));
    assert_eq!(
        suite_names(&run),
        [
            "kunit-resource-test",
            "example",
            "legacy_module_suite",
            "legacy_module_suite2"
        ]
    );

    // `ok 1 - name`: the dash is not part of the name.
    let example = suite(&run, "example");
    let simple = case(example, "example_simple_test");
    assert_eq!(simple.status, Status::Fail);
    let skip = case(example, "example_skip_test");
    assert_eq!(skip.status, Status::Skip);
    assert_eq!(skip.reason.as_deref(), Some("this test should be skipped"));

    assert!(run.problems().is_empty(), "{:?}", run.problems());
    assert_eq!(
        run.failures(true).reasons,
        ["example.example_simple_test failed"]
    );
}

// ---------------------------------------------------------------------------
// Small inline logs
// ---------------------------------------------------------------------------

#[test]
fn result_line_forms() {
    let log = "\
KTAP version 1
1..5
ok 1 check return code # rcode=0
not ok 2 slow test # TIMEOUT 30 seconds
ok 3 - dashed name # skip lower-case directive
not ok 4 expected failure # XFAIL known bug
ok 5 node#1 has memory
ok 12abc this is not a result line
";
    let run = Run::parse(log);
    let suites: Vec<&Test> = run.suites().collect();
    assert_eq!(suites.len(), 5);

    assert_eq!(suites[0].name, "check return code");
    assert_eq!(suites[0].status, Status::Pass);
    assert_eq!(suites[0].directive, None);
    assert_eq!(suites[0].reason.as_deref(), Some("rcode=0"));

    assert_eq!(suites[1].status, Status::Fail);
    assert_eq!(suites[1].directive, Some(Directive::Timeout));
    assert_eq!(suites[1].reason.as_deref(), Some("30 seconds"));

    assert_eq!(suites[2].name, "dashed name");
    assert_eq!(suites[2].status, Status::Skip);

    assert_eq!(suites[3].status, Status::Skip);
    assert_eq!(suites[3].directive, Some(Directive::Xfail));

    assert_eq!(suites[4].name, "node#1 has memory");
    assert!(run.problems().is_empty(), "{:?}", run.problems());
}

#[test]
fn printk_prefixes_are_stripped() {
    let log = "\
<6>[    0.500000] KTAP version 1\r
<6>[    0.500001] 1..1\r
[    1.000000][    C1]     KTAP version 1
[    1.000001][    T42]     # Subtest: prefixed
[    1.000002]     1..1
[12345.678901]     ok 1 works
[    1.000004] ok 1 prefixed
";
    let run = Run::parse(log);
    assert_eq!(suite_names(&run), ["prefixed"]);
    let s = suite(&run, "prefixed");
    assert_eq!(s.status, Status::Pass);
    assert_eq!(s.subtests[0].name, "works");
    assert!(run.failures(true).is_ok(), "{}", run.failures(true));
}

#[test]
fn new_document_interrupts_open_suite() {
    // The first module's suite stops mid-way; the next document must not be
    // mistaken for its child.
    let log = "\
KTAP version 1
1..1
    KTAP version 1
    # Subtest: first
    1..2
    ok 1 a
KTAP version 1
1..1
    KTAP version 1
    # Subtest: second
    1..1
    ok 1 b
ok 1 second
";
    let run = Run::parse(log);
    assert_eq!(run.documents.len(), 2);
    let first = suite(&run, "first");
    assert_eq!(first.status, Status::Crashed);
    assert_eq!(
        first.errors,
        ["cut short: another test or document starts after 1 of 2 planned results"]
    );
    assert_eq!(
        run.documents[0].errors,
        ["cut short: plan 1..1 but a new KTAP document starts after 0 suite result(s)"]
    );
    let second = suite(&run, "second");
    assert_eq!(second.status, Status::Pass);
    assert!(second.errors.is_empty());
    assert!(!run.failures(true).is_ok());
}

#[test]
fn missing_case_result_line_before_suite_result() {
    // A parameterised case whose own result line is missing: the suite's
    // result line must still close the suite.
    let log = "\
KTAP version 1
1..1
    KTAP version 1
    # Subtest: s
    1..1
        KTAP version 1
        # Subtest: p
        ok 1 one
ok 1 s
";
    let run = Run::parse(log);
    let s = suite(&run, "s");
    assert_eq!(s.number, Some(1));
    assert_eq!(s.status, Status::Crashed);
    let p = case(s, "p");
    assert_eq!(p.status, Status::Crashed);
    assert_eq!(p.subtests.len(), 1);
    assert_eq!(p.errors, ["missing result line (the next one is `ok 1 s`)"]);
}

#[test]
fn kunit_errors_and_empty_logs() {
    let run = Run::parse("[    0.1] kunit: disabled\n");
    assert_eq!(run.kunit_errors, ["kunit: disabled"]);
    let reasons = run.failures(false).reasons;
    assert_eq!(reasons, ["KUnit reported: kunit: disabled"]);

    let run = Run::parse("");
    assert!(run.documents.is_empty());
    assert!(run.failures(false).is_ok());
    assert!(!run.failures(true).is_ok());
}

#[test]
fn totals_disagreeing_with_results_are_reported() {
    // A dropped console line: KUnit counted three cases, two arrived.
    let log = "\
KTAP version 1
1..1
    KTAP version 1
    # Subtest: lossy
    1..3
    ok 1 a
    ok 3 c
# Totals: pass:3 fail:0 skip:0 total:3
ok 1 lossy
";
    let run = Run::parse(log);
    let errors = &suite(&run, "lossy").errors;
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(errors[0], "plan mismatch: plan 1..3 but 2 results");
    assert!(errors[1].starts_with(
        "KUnit's totals (pass:3 fail:0 skip:0) disagree with the results parsed (pass:2 "
    ));
    assert!(run
        .problems()
        .contains(&"lossy.c: expected test number 2, found 3".to_string()));
}

// ---------------------------------------------------------------------------
// Reports
// ---------------------------------------------------------------------------

#[test]
fn totals_count_leaves_and_userspace_tests() {
    let run = parse("parameterized.log");
    let users = [user_test("placement", 0), user_test("differential", 1)];
    let totals = Totals::of(&run, &users);
    assert_eq!(
        totals,
        Totals {
            passed: 6,
            failed: 2,
            skipped: 1
        }
    );
    assert_eq!(totals.to_string(), "tierkit: 6 passed, 2 failed, 1 skipped");

    // A crashed case counts as failed.
    let crashed = parse("oops_cut_short.log");
    assert_eq!(
        Totals::of(&crashed, &[]).to_string(),
        "tierkit: 1 passed, 1 failed, 0 skipped"
    );
}

#[test]
fn summary_names_a_failed_check_far_from_the_end_of_the_output() {
    let run = parse("oops_caught.log");
    let mut t = user_test("tk-test-long", 1);
    t.output_tail = (0..12)
        .map(|i| format!("ok - later check {i}"))
        .collect::<Vec<_>>()
        .join("\n");
    t.failed_checks = vec!["not ok - early check (spares 0 -> 1)".into()];
    let text = summary::format_summary(&run, &[t]);
    assert!(
        text.contains(
            "  FAIL userspace.tk-test-long (rc=1, 1234 ms)\n\
             \x20     not ok - early check (spares 0 -> 1)\n\
             \x20     [... the end of its output:]\n\
             \x20     ok - later check 2\n"
        ),
        "{text}"
    );
    assert!(text.contains("      ok - later check 11\n"), "{text}");
}

#[test]
fn summary_lists_suites_failures_and_totals() {
    let run = parse("oops_caught.log");
    let users = [user_test("placement", 0), user_test("zero_check", 3)];
    let text = summary::format_summary(&run, &users);

    let table: Vec<&str> = text.lines().take(4).collect();
    assert_eq!(table[0], "suite           passed  failed skipped");
    assert_eq!(table[1], "tierkit_clear        2       1       0");
    assert_eq!(table[2], "tierkit_wi           2       0       0");
    assert_eq!(table[3], "userspace            1       1       0");

    // The failed case shows KUnit's lines, not the oops dump between them.
    assert!(
        text.contains(
            "  FAIL tierkit_clear.clear_gigantic_range\n\
         \x20     [49 more console line(s) in the log]\n\
         \x20     # clear_gigantic_range: allocating 1 GiB on node 1\n\
         \x20     # clear_gigantic_range: try faulted\n"
        ),
        "{text}"
    );
    assert!(text.contains("  FAIL userspace.zero_check (rc=3, 1234 ms)\n      zero_check: done\n"));
    assert!(text.contains("\nKernel crashes:\n  kernel BUG at console line 41: "));
    assert!(
        text.ends_with("\ntierkit: 5 passed, 2 failed, 0 skipped\n"),
        "{text}"
    );
}

#[test]
fn summary_of_assertion_failure_and_skips() {
    let text = summary::format_summary(&parse("assert_failure.log"), &[]);
    assert!(
        text.contains(
            "  FAIL tierkit_topology.node1_has_memory\n\
         \x20     # node1_has_memory: ASSERTION FAILED at module/tierkit.rs:61\n\
         \x20     Expected node_present_pages(1) > 0 to be true, but is false\n"
        ),
        "{text}"
    );

    let text = summary::format_summary(&parse("skipped.log"), &[]);
    assert!(
        text.contains("\ntierkit_gigantic        0       0       1\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "\nSkipped:\n  tierkit_cxl.cdat_window: no CXL memory device present\n  \
             tierkit_cxl.region_is_dax\n  tierkit_gigantic: CONFIG_CONTIG_ALLOC is not set\n"
        ),
        "{text}"
    );

    let text = summary::format_summary(&parse("no_module_suites.log"), &[]);
    assert!(text.contains("(no KUnit suites ran)"));
}

#[test]
fn json_report_round_trips() {
    let run = parse("parameterized.log");
    let users = [user_test("placement", 0)];
    let path = temp_path("report.json");
    summary::write_json(&path, &run, &users).unwrap();
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();

    assert_eq!(value["totals"]["passed"], 6);
    assert_eq!(value["totals"]["failed"], 1);
    assert_eq!(value["totals"]["skipped"], 1);
    let suite = &value["kunit"]["documents"][1]["suites"][0];
    assert_eq!(suite["name"], "tierkit_weights");
    assert_eq!(suite["status"], "fail");
    assert_eq!(suite["cases"][0]["subcases"][2]["name"], "bw 10:0 -> 1:0");
    assert_eq!(suite["cases"][1]["subcases"][2]["directive"], "SKIP");
    assert_eq!(value["userspace"][0]["name"], "placement");
    assert_eq!(value["userspace"][0]["rc"], 0);
}

#[test]
fn junit_report_has_a_suite_per_kunit_suite_plus_kernel_and_userspace() {
    let run = parse("oops_caught.log");
    let users = [user_test("placement", 0), user_test("zero_check", 3)];
    let path = temp_path("junit.xml");
    summary::write_junit(&path, "tierkit", &run, &users).unwrap();
    let xml = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();

    for name in ["tierkit_clear", "tierkit_wi", "kernel", "userspace"] {
        assert!(
            xml.contains(&format!("<testsuite name=\"{name}\"")),
            "{name}: {xml}"
        );
    }
    assert!(xml.contains("<testcase name=\"clear_gigantic_range\" classname=\"tierkit_clear\""));
    assert!(xml.contains("<failure message=\"exit code 3\""), "{xml}");

    let report = summary::junit_report("tierkit", &run, &users);
    let suites: Vec<(&str, usize, usize, usize)> = report
        .test_suites
        .iter()
        .map(|s| (s.name.as_str(), s.tests, s.failures, s.errors))
        .collect();
    assert_eq!(
        suites,
        [
            ("tierkit_clear", 3, 1, 0),
            ("tierkit_wi", 2, 0, 0),
            ("kernel", 2, 0, 2),
            ("userspace", 2, 1, 0),
        ]
    );
}

#[test]
fn junit_marks_skips_and_crashes() {
    let report = summary::junit_report("tierkit", &parse("skipped.log"), &[]);
    let cxl = &report.test_suites[0];
    assert_eq!((cxl.tests, cxl.disabled), (3, 2));

    let report = summary::junit_report("tierkit", &parse("oops_cut_short.log"), &[]);
    let clear = &report.test_suites[0];
    assert_eq!(clear.name.as_str(), "tierkit_clear");
    // The crashed case, and the suite's KTAP problems.
    assert_eq!((clear.tests, clear.failures, clear.errors), (3, 0, 2));
}

/// The suite's `<testsuite>` element of `xml`, up to its end tag.
fn junit_suite<'a>(xml: &'a str, name: &str) -> &'a str {
    let start = xml
        .find(&format!("<testsuite name=\"{name}\""))
        .unwrap_or_else(|| panic!("no suite {name} in {xml}"));
    let len = xml[start..].find("</testsuite>").expect("closed");
    &xml[start..start + len]
}

/// The `<testcase>` element named `name` in `suite`, up to its end.
fn junit_case<'a>(suite: &'a str, name: &str) -> &'a str {
    let start = suite
        .find(&format!("<testcase name=\"{name}\""))
        .unwrap_or_else(|| panic!("no case {name} in {suite}"));
    let rest = &suite[start..];
    &rest[..rest.find("</testcase>").expect("closed")]
}

/// JUnit as kunit_tool writes it (tools/testing/kunit/kunit_junit.py):
/// per suite tests, failures, errors (crashed cases), skipped; a failed
/// case has `<failure>`, a skipped one `<skipped>` with its reason, a
/// crashed one `<error>`; the case's log in `<system-out>`; and tierkit's
/// `time` on every case and suite. A suite whose only failure is its own
/// counts it, as kunit_tool does, and shows it as a case of its name.
#[test]
fn junit_maps_ktap_as_kunit_tool_does_with_time() {
    let run = parse("suite_own_failure.log");
    let xml = summary::junit_report("tierkit", &run, &[])
        .to_string()
        .expect("serializes");
    let pool = junit_suite(&xml, "tierkit_pool");
    for attr in [
        r#"tests="3""#,
        r#"errors="0""#,
        r#"failures="1""#,
        r#"skipped="0""#,
        r#"time="0.599""#,
    ] {
        assert!(pool.contains(attr), "{attr}: {pool}");
    }
    let own = junit_case(pool, "tierkit_pool");
    assert!(
        own.contains(r#"<failure message="the suite failed after its cases passed""#),
        "{own}"
    );
    assert!(
        own.contains("free pages after the suite: 1020 below"),
        "{own}"
    );
    assert!(junit_case(pool, "pool_fills").contains(r#"time="0.200""#));

    let wi = junit_suite(&xml, "tierkit_wi");
    for attr in [
        r#"tests="3""#,
        r#"failures="1""#,
        r#"skipped="1""#,
        r#"errors="0""#,
    ] {
        assert!(wi.contains(attr), "{attr}: {wi}");
    }
    let failed = junit_case(wi, "auto_weights");
    assert!(
        failed.contains("<failure message=\"# auto_weights: ASSERTION FAILED"),
        "{failed}"
    );
    assert!(
        failed.contains("<system-out>") && failed.contains("w[1] == 5"),
        "{failed}"
    );
    let skipped = junit_case(wi, "node_offline");
    assert!(
        skipped.contains(r#"<skipped message="no CXL node">no CXL node</skipped>"#),
        "{skipped}"
    );
    // Every case and suite has its time.
    assert_eq!(xml.matches("<testcase ").count(), 6);
    assert_eq!(
        xml.matches("<testcase ").count() + xml.matches("<testsuite ").count(),
        xml.split('<')
            .filter(
                |e| (e.starts_with("testcase ") || e.starts_with("testsuite "))
                    && e.contains(" time=\"")
            )
            .count()
    );
    // The totals count the suite's own failure too, and the summary lists it.
    assert_eq!(
        Totals::of(&run, &[]).to_string(),
        "tierkit: 3 passed, 2 failed, 1 skipped"
    );
    let summary = summary::format_summary(&run, &[]);
    assert!(
        summary.contains("  FAIL tierkit_pool\n      # module: tierkit\n      # tierkit_pool: free pages after the suite"),
        "{summary}"
    );

    // A crashed case: <error>, counted in errors, its log kept.
    let xml = summary::junit_report("tierkit", &parse("oops_cut_short.log"), &[])
        .to_string()
        .expect("serializes");
    let clear = junit_suite(&xml, "tierkit_clear");
    assert!(
        clear.contains(r#"errors="2""#) && clear.contains(r#"failures="0""#),
        "{clear}"
    );
    let crashed = junit_case(clear, "clear_gigantic_range");
    assert!(crashed.contains("<error message=\"crashed"), "{crashed}");
    assert!(
        crashed.contains("<system-out>") && crashed.contains("allocating 1 GiB on node 1"),
        "{crashed}"
    );
}

/// Per-test times come from the printk timestamps: a case runs from the
/// line before it (the suite header or the previous result) to its result.
#[test]
fn case_durations_from_printk_timestamps() {
    let log = "\
[    4.000000] KTAP version 1
[    4.000100] 1..1
[    5.000000]     KTAP version 1
[    5.000000]     # Subtest: slow_suite
[    5.000100]     # module: tierkit
[    5.000200]     1..2
[    6.000000] tierkit: some output of the first case
[    7.500000]     ok 1 first
[    8.000000]     ok 2 second
[    8.100000]     # slow_suite: pass:2 fail:0 skip:0 total:2
[    8.100100] ok 1 slow_suite
";
    let run = Run::parse(log);
    let suite = run.suites().next().expect("one suite");
    let ms: Vec<Option<u64>> = suite.subtests.iter().map(|c| c.duration_ms).collect();
    assert_eq!(ms, vec![Some(2500), Some(500)]);

    let report = summary::junit_report("tierkit", &run, &[]);
    let xml = report.to_string().expect("junit serializes");
    assert!(
        xml.contains(r#"name="first""#) && xml.contains(r#"time="2.500""#),
        "{xml}"
    );

    let summary = summary::format_summary(&run, &[]);
    assert!(
        summary.contains("slowest 2: slow_suite.first 2.5 s, slow_suite.second 0.5 s"),
        "{summary}"
    );
}

#[test]
fn printk_timestamps_parse() {
    assert_eq!(printk::micros("[   12.345678] x"), Some(12_345_678));
    assert_eq!(printk::micros("<6>[    1.5] y"), Some(1_500_000));
    assert_eq!(printk::micros("[    0.000001]"), Some(1));
    assert_eq!(printk::micros("no timestamp"), None);
    assert_eq!(printk::micros("[abc.def] z"), None);
}
