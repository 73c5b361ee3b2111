//! /init against a fake guest file system ([`super::fake`]).

use super::cxl_setup::{assemble, Assembly};
use super::fake::Tree;

const GIB: u64 = 1 << 30;

fn has(lines: &[String], want: &str) -> bool {
    lines.iter().any(|l| l == want)
}

fn position(lines: &[String], want: &str) -> usize {
    lines
        .iter()
        .position(|l| l == want)
        .unwrap_or_else(|| panic!("no line {want:?} in {lines:#?}"))
}

#[test]
fn a_two_way_region_is_assembled_in_the_documented_order() {
    let t = Tree::new("cxl2");
    t.numa(4 * 1024 * 1024);
    t.cxl_window(2, 2 * GIB);
    let (mut init, _) = t.init("tierkit.mode=test tierkit.cxl=4096:2:4096");
    let mut a = Assembly::new(&init);
    assert!(assemble(&mut init, &mut a).is_ok(), "{:#?}", init.out.lines);
    let c = "/sys/bus/cxl/devices";
    let w = |p: &str, v: &str| (format!("{c}/{p}"), v.to_string());
    // Position 0 is the device behind dport0 (endpoint9), whatever the
    // endpoints' own numbers.
    let want = vec![
        w("decoder0.0/create_ram_region", "region0"),
        w("region0/interleave_granularity", "4096"),
        w("region0/interleave_ways", "2"),
        w("decoder9.0/mode", "ram"),
        w("decoder9.0/dpa_size", &(2 * GIB).to_string()),
        w("decoder8.0/mode", "ram"),
        w("decoder8.0/dpa_size", &(2 * GIB).to_string()),
        w("region0/size", &(4 * GIB).to_string()),
        w("region0/target0", "decoder9.0"),
        w("region0/target1", "decoder8.0"),
        w("region0/commit", "1"),
        (
            "/sys/bus/cxl/drivers/cxl_region/bind".into(),
            "region0".into(),
        ),
    ];
    assert_eq!(a.writes, want);
    let l = &init.out.lines;
    assert_eq!(
        l[0],
        "TIERKIT-CXL setup: 1 region(s) over 2 device(s): 4096:2:4096 (MiB[:ways:granularity])"
    );
    assert_eq!(
        l[1],
        "TIERKIT-CXL enumerated: decoder0.0 mem0 mem1 endpoint8 endpoint9"
    );
    assert_eq!(
        l[2],
        "TIERKIT-CXL region0: decoder0.0 -> mem0 mem1 (4096 MiB, 2-way, granularity 4096) via dport0:endpoint9/decoder9.0 dport1:endpoint8/decoder8.0"
    );
    assert_eq!(
        l[3],
        format!(
            "TIERKIT-CXL region0: committed (ways 2, granularity 4096, size {})",
            4 * GIB
        )
    );
    assert_eq!(l[4], "TIERKIT-CXL region0: bound to cxl_region");
    assert_eq!(
        l[5],
        "TIERKIT-CXL region0: dax0.0 (kmem) -> node2 online, 4194304 kB, cpus="
    );
    assert_eq!(a.regions, vec![("region0".to_string(), 4 * GIB)]);
    assert_eq!(init.fails, 0);
}

#[test]
fn a_one_way_region_takes_the_root_decoders_granularity() {
    let t = Tree::new("cxl1");
    t.numa(2 * 1024 * 1024);
    t.cxl_window(1, 2 * GIB);
    let (mut init, _) = t.init("tierkit.cxl=2048");
    assert!(super::cxl_setup::setup(&mut init), "{:#?}", init.out.lines);
    let l = &init.out.lines;
    assert!(has(l, "TIERKIT-CXL region0: decoder0.0 -> mem0 (2048 MiB, 1-way, granularity 256) via dport0:endpoint9/decoder9.0"), "{l:#?}");
    assert_eq!(
        l.last().map(String::as_str),
        Some("TIERKIT-CXL ready: 1 region(s) online")
    );
}

#[test]
fn a_memdev_of_the_wrong_size_fails_its_step_with_diagnostics() {
    let t = Tree::new("cxlsize");
    t.numa(4 * 1024 * 1024);
    t.cxl_window(2, GIB);
    let (mut init, log) = t.init("tierkit.mode=test tierkit.cxl=4096:2:4096");
    assert_eq!(init.run(), 1);
    let l = &init.out.lines;
    let e = l
        .iter()
        .find(|l| l.starts_with("TIERKIT-ERROR cxl step=memdev: "))
        .expect("memdev error");
    assert!(e.contains("mem0 (position 0 behind decoder0.0) has a volatile capacity of 0x40000000, expected 2147483648 bytes; kernel: root decoder0.0 interleave_ways=1 interleave_granularity=256 cap_ram=? cap_type3=?; host bridge port1 dports=0,1 (more: TIERKIT-CXL diag lines)"), "{e}");
    assert!(
        has(
            l,
            "TIERKIT-CXL diag: host bridge port1 decoder1.0(ways=1 granularity=? region=?)"
        ),
        "{l:#?}"
    );
    assert!(l.iter().any(|x| x.starts_with("TIERKIT-CXL diag: endpoint9 (mem0 below rp0) decoder9.0(ways=? granularity=? mode=none dpa_size=0 region=?)")), "{l:#?}");
    // tierkit is not loaded and no test runs.
    assert!(has(
        l,
        "TIERKIT-NOTE CXL setup failed: tierkit is not loaded and no test runs"
    ));
    assert_eq!(l.last().map(String::as_str), Some("TIERKIT-DONE fails=1"));
    assert!(!l.iter().any(|x| x.starts_with("TIERKIT-INSMOD")));
    assert!(log.borrow().is_empty());
}

#[test]
fn a_refused_write_names_its_step_and_file() {
    let t = Tree::new("cxlwrite");
    t.numa(4 * 1024 * 1024);
    t.cxl_window(2, 2 * GIB);
    // The kernel refuses the commit.
    let commit = t.p("/sys/bus/cxl/devices/region0/commit");
    std::fs::remove_file(&commit).unwrap();
    std::fs::create_dir(&commit).unwrap();
    let (mut init, _) = t.init("tierkit.cxl=4096:2:4096");
    assert!(!super::cxl_setup::setup(&mut init));
    let l = &init.out.lines;
    assert!(l.iter().any(|x| x.starts_with("TIERKIT-ERROR cxl step=commit: echo 1 > region0/commit: write error: Is a directory; kernel: root decoder0.0")), "{l:#?}");
    assert!(!l.iter().any(|x| x.contains("bound to cxl_region")));
}

#[test]
fn missing_devices_fail_enumeration_or_mapping() {
    let t = Tree::new("cxlmap");
    t.numa(4 * 1024 * 1024);
    t.cxl_window(1, 2 * GIB);
    // Two devices asked for, one there: enumeration gives up.
    let (mut init, _) = t.init("tierkit.cxl=4096:2:4096");
    assert!(!super::cxl_setup::setup(&mut init));
    let e = init
        .out
        .lines
        .iter()
        .find(|l| l.contains("step="))
        .cloned()
        .unwrap_or_default();
    assert_eq!(e, "TIERKIT-ERROR cxl step=enumerate: after 30 s: 1 root decoder(s), 1 memdev(s), 1 endpoint(s); expected 1 root decoder(s) and 2 memdev(s) and endpoint(s)");
    // The window's host bridge has no CXL port.
    std::fs::remove_file(t.p("/sys/bus/cxl/devices/root0/port1/uport")).unwrap();
    let (mut init, _) = t.init("tierkit.cxl=2048");
    assert!(!super::cxl_setup::setup(&mut init));
    let e = init
        .out
        .lines
        .iter()
        .find(|l| l.contains("step="))
        .cloned()
        .unwrap_or_default();
    assert!(
        e.starts_with("TIERKIT-ERROR cxl step=map: decoder0.0 targets host bridge 0 ("),
        "{e}"
    );
    assert!(
        e.contains("whose CXL port (none) has 0 endpoint(s), expected 1 (1-way region)"),
        "{e}"
    );
    // No CXL bus at all.
    let t = Tree::new("nocxl");
    t.numa(0);
    let (mut init, _) = t.init("tierkit.cxl=2048");
    assert!(!super::cxl_setup::setup(&mut init));
    assert!(init.out.lines[1].starts_with("TIERKIT-ERROR cxl step=enumerate: no "));
    assert!(init.out.lines[1]
        .ends_with("/sys/bus/cxl/devices: the kernel has no CXL bus (CONFIG_CXL_BUS)"));
}

/// A test boot: modules in order, insmod, the selected tests with their
/// markers and output, rmmod, DONE.
#[test]
fn a_test_boot_runs_the_selected_tests_between_insmod_and_rmmod() {
    let t = Tree::new("testrun");
    t.numa(4 * 1024 * 1024);
    t.cxl_window(1, 2 * GIB);
    for (f, c) in [
        ("10-kmem.ko", "k"),
        ("00-brd.ko", "b"),
        ("01-cxl_core.ko", "c"),
    ] {
        t.file(&format!("/lib/modules/pre/{f}"), c);
    }
    t.file("/lib/modules/tierkit.ko", "ko");
    t.dir("/tmp");
    t.script("tk-test-b", "echo 'not ok - b: broken'; exit 3");
    t.script(
        "tk-test-a",
        "echo 'ok - a'; echo 'TIERKIT-JSON {\"a\":1}' >&2",
    );
    t.script("tk-test-skipped", "exit 1");
    t.script("tk-demo", "exit 1");
    t.file("/bin/tk-test-plain", "not executable");
    t.file(
        "/sys/kernel/debug/tierkit/weighted_interleave/bandwidth",
        "",
    );
    t.file(
        "/sys/kernel/debug/tierkit/weighted_interleave/auto",
        "true\n",
    );
    t.file("/sys/kernel/debug/tierkit/weighted_interleave/node0", "1\n");
    let (mut init, log) =
        t.init("tierkit.mode=test tierkit.filter=tk-test-* tierkit.skip=*skipped tierkit.cxl=2048");
    assert_eq!(init.run(), 1);
    let l = init.out.lines.clone();
    assert_eq!(
        l[0],
        "TIERKIT-BOOT mode=test kernel=7.3.0-tierkit cpus=".to_string()
            + &std::thread::available_parallelism().unwrap().to_string()
    );
    assert_eq!(
        *log.borrow(),
        vec![
            "insmod /lib/modules/pre/00-brd.ko",
            "insmod /lib/modules/pre/01-cxl_core.ko",
            "insmod /lib/modules/pre/10-kmem.ko",
            "insmod /lib/modules/tierkit.ko",
            "rmmod tierkit",
        ]
    );
    assert_eq!(
        l[1],
        "TIERKIT-NOTE loaded 3 module(s) before tierkit: brd cxl_core kmem"
    );
    let order = [
        "TIERKIT-CXL ready: 1 region(s) online",
        "TIERKIT-TOPO nodes online=0,2 has_memory=0,2 has_cpu=0",
        "TIERKIT-TOPO node0 cpus=0-1 mem_total=1048576 kB hugepages_1g=0",
        "TIERKIT-TOPO node0 access1 initiators=node0 read_bw=20480MB/s write_bw=20480MB/s read_lat=100ns write_lat=100ns",
        "TIERKIT-TOPO node2 cpus=none mem_total=4194304 kB hugepages_1g=0",
        "TIERKIT-TOPO cxl region0 commit=1 mode=ram size=2048MiB target0=decoder9.0 dax=dax0.0 driver=kmem node=2",
        "TIERKIT-TOPO cxl region0 access1 read_bw=10240MB/s write_bw=10240MB/s read_lat=400ns write_lat=500ns",
        "TIERKIT-TOPO preempt: full",
        "TIERKIT-TOPO weighted_interleave node0=1",
        "TIERKIT-INSMOD-START",
        "TIERKIT-INSMOD rc=0",
        "TIERKIT-TOPO tierkit bandwidth: 0 20480 20480; 2 10240 10240 (MB/s, from node0 region0) -> auto=true node0=1",
        "TIERKIT-USERTEST-START tk-test-a",
        "TIERKIT-USERTEST tk-test-a rc=0",
        "TIERKIT-USERTEST-START tk-test-b",
        "TIERKIT-USERTEST tk-test-b rc=3",
        "TIERKIT-RMMOD-START",
        "TIERKIT-RMMOD rc=0",
        "TIERKIT-DONE fails=1",
    ];
    let at: Vec<usize> = order.iter().map(|o| position(&l, o)).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{l:#?}");
    assert_eq!(l.last().map(String::as_str), Some("TIERKIT-DONE fails=1"));
    assert!(!l
        .iter()
        .any(|x| x.contains("skipped") || x.contains("tk-demo") || x.contains("plain")));
    let data = String::from_utf8_lossy(&init.out.data_bytes).into_owned();
    let a = data.find("TIERKIT-USERTEST-START tk-test-a\nok - a\nTIERKIT-JSON {\"a\":1}\nTIERKIT-USERTEST tk-test-a rc=0\n");
    assert!(a.is_some(), "{data}");
    assert!(
        data.contains("not ok - b: broken\nTIERKIT-USERTEST tk-test-b rc=3\n"),
        "{data}"
    );
    let bw =
        std::fs::read_to_string(t.p("/sys/kernel/debug/tierkit/weighted_interleave/bandwidth"))
            .unwrap();
    assert_eq!(bw, "0 20480 20480\n2 10240 10240\n");
}

#[test]
fn failed_modules_and_modes_are_counted() {
    let t = Tree::new("fails");
    t.numa(0);
    t.file("/lib/modules/pre/00-brd.ko", "fail");
    t.file("/lib/modules/tierkit.ko", "fail");
    // A failed pre module skips the CXL set-up and stops the boot.
    let (mut init, log) = t.init("tierkit.cxl=2048");
    assert_eq!(init.run(), 2);
    let l = &init.out.lines;
    assert!(has(l, "TIERKIT-ERROR insmod 00-brd.ko failed (rc=1): insmod: can't insert '00-brd.ko': File exists"), "{l:#?}");
    assert!(!l.iter().any(|x| x.starts_with("TIERKIT-CXL")));
    assert_eq!(log.borrow().len(), 1);
    // Without CXL: tierkit.ko is refused, nothing runs, no rmmod.
    std::fs::remove_file(t.p("/lib/modules/pre/00-brd.ko")).unwrap();
    let (mut init, log) = t.init("tierkit.mode=bench-wi");
    assert_eq!(init.run(), 1);
    let l = &init.out.lines;
    assert!(has(l, "TIERKIT-INSMOD rc=1"));
    assert!(has(l, "TIERKIT-ERROR insmod /lib/modules/tierkit.ko failed (rc=1): insmod: can't insert '/lib/modules/tierkit.ko': File exists"));
    assert!(!l.iter().any(|x| x.starts_with("TIERKIT-RMMOD")));
    assert!(!log.borrow().iter().any(|x| x.starts_with("rmmod")));
    // A benchmark that is not there, an unknown mode, no test selected.
    t.file("/lib/modules/tierkit.ko", "ko");
    for (cmdline, want) in [
        (
            "tierkit.mode=bench-nope",
            "TIERKIT-ERROR no /bin/tk-bench-nope in the initramfs for mode bench-nope",
        ),
        (
            "tierkit.mode=walk",
            "TIERKIT-ERROR unknown tierkit.mode=walk",
        ),
        (
            "tierkit.mode=test tierkit.filter=tk-test-none",
            "TIERKIT-NOTE no /bin/tk-test-* matched filter 'tk-test-none'",
        ),
    ] {
        let (mut init, _) = t.init(cmdline);
        let fails = init.run();
        assert!(
            has(&init.out.lines, want),
            "{cmdline}: {:#?}",
            init.out.lines
        );
        assert_eq!(fails, u32::from(want.contains("ERROR")), "{cmdline}");
        assert!(has(&init.out.lines, "TIERKIT-RMMOD rc=0"));
    }
}

#[test]
fn the_debug_profile_scans_kmemleak_around_the_module() {
    let t = Tree::new("kmemleak");
    t.numa(0);
    t.file("/lib/modules/tierkit.ko", "ko");
    t.file(
        "/sys/kernel/debug/kmemleak",
        "unreferenced object 0xffff0001 (size 64):\n  comm \"insmod\"\nunreferenced object 0xffff0002 (size 8):\n",
    );
    let (mut init, _) = t.init("tierkit.mode=run tierkit.profile=debug");
    assert_eq!(init.run(), 1);
    let l = &init.out.lines;
    let base = position(l, "TIERKIT-KMEMLEAK-BASELINE");
    let note = position(
        l,
        "TIERKIT-NOTE kmemleak: 2 object(s) from boot and /init cleared before insmod",
    );
    let insmod = position(l, "TIERKIT-INSMOD-START");
    let rmmod = position(l, "TIERKIT-RMMOD rc=0");
    let scan = position(l, "TIERKIT-KMEMLEAK-SCAN");
    let obj = position(l, "unreferenced object 0xffff0002 (size 8):");
    let leaks = position(l, "TIERKIT-KMEMLEAK leaks=2");
    assert!(
        base < note && note < insmod && insmod < rmmod && rmmod < scan && scan < obj && obj < leaks
    );
    // No demo selected is a note; the leaks fail the run.
    assert!(has(l, "TIERKIT-NOTE no /bin/tk-demo* matched filter '*'"));
    assert_eq!(l.last().map(String::as_str), Some("TIERKIT-DONE fails=1"));
    // Without kmemleak in the kernel.
    std::fs::remove_file(t.p("/sys/kernel/debug/kmemleak")).unwrap();
    let (mut init, _) = t.init("tierkit.mode=run tierkit.profile=debug");
    init.run();
    assert!(init
        .out
        .lines
        .iter()
        .any(|x| x.starts_with("TIERKIT-ERROR kmemleak: no ")));
}

#[test]
fn preemption_models() {
    use super::topology::preempt_model;
    assert_eq!(preempt_model("none voluntary (full) lazy\n"), Some("full"));
    assert_eq!(preempt_model("(none) voluntary full"), Some("none"));
    assert_eq!(preempt_model("full"), None);
    let t = Tree::new("preempt");
    t.numa(0);
    let (mut init, _) = t.init("preempt=lazy");
    super::topology::print_topology(&mut init);
    assert!(has(&init.out.lines, "TIERKIT-TOPO preempt: full (the command line asks for preempt=lazy; this kernel offers: none voluntary (full) lazy)"), "{:#?}", init.out.lines);
}

#[test]
fn cmd_and_shell_keep_tierkit_loaded() {
    let t = Tree::new("cmd");
    t.numa(0);
    t.file("/lib/modules/tierkit.ko", "ko");
    for mode in ["cmd", "shell"] {
        // No command file: the share cannot be set up.
        let (mut init, log) = t.init(&format!("tierkit.mode={mode}"));
        assert_eq!(init.run(), 1);
        let l = &init.out.lines;
        assert!(
            l.iter().any(|x| x.starts_with("TIERKIT-ERROR share: mounting the host's  (virtio-9p tag tierkit-cwd) failed: reading /etc/tierkit/cmd: ")),
            "{l:#?}"
        );
        assert!(!l
            .iter()
            .any(|x| x.starts_with("TIERKIT-RMMOD") || x.starts_with("TIERKIT-CMD")));
        assert_eq!(l.last().map(String::as_str), Some("TIERKIT-DONE fails=1"));
        assert_eq!(*log.borrow(), vec!["insmod /lib/modules/tierkit.ko"]);
    }
}

/// The runner's deadlines and leftovers, on the programs of the runner's
/// own tests (their entries in `tierkit_protocol::deadline`): a test that
/// sleeps past its deadline, one whose child outlives it; the test after
/// them runs, and what each printed is kept.
#[test]
fn deadlines_and_leftovers_are_killed_and_the_run_goes_on() {
    let t = Tree::new("deadline");
    t.dir("/tmp");
    t.script(
        "tk-test-runner-orphan",
        "echo 'forking a child that never exits'; sleep 1000 & exit 0",
    );
    t.script(
        "tk-test-runner-sleep",
        "echo 'printed before the deadline'; sleep 1000; echo after-the-sleep",
    );
    t.script("tk-test-z", "echo 'ok - after them'");
    let (mut init, _) = t.init("tierkit.mode=test");
    let began = std::time::Instant::now();
    super::modes::run_mode(&mut init);
    // The sleep test's deadline of 2 s, the orphan's grace of 1 s, and
    // nowhere near the 1000 s of either sleep.
    assert!(began.elapsed().as_secs() < 15, "{:?}", began.elapsed());
    let l = &init.out.lines;
    let want = [
        "TIERKIT-USERTEST-START tk-test-runner-orphan",
        "TIERKIT-USERTEST tk-test-runner-orphan rc=0 left=1",
        "TIERKIT-USERTEST-START tk-test-runner-sleep",
        "TIERKIT-USERTEST tk-test-runner-sleep rc=137 timeout=2",
        "TIERKIT-USERTEST-START tk-test-z",
        "TIERKIT-USERTEST tk-test-z rc=0",
    ];
    assert_eq!(l.as_slice(), want, "{l:#?}");
    // Both are the verdicts their table entries expect.
    assert_eq!(init.fails, 0);
    let data = String::from_utf8_lossy(&init.out.data_bytes).into_owned();
    for s in [
        "forking a child that never exits",
        "tk-init: tk-test-runner-orphan: left 1 process(es) running after it exited: ",
        "printed before the deadline",
        "tk-init: tk-test-runner-sleep: timed out after 2 s: killed its process group",
        "ok - after them",
    ] {
        assert!(data.contains(s), "{s:?} not in {data}");
    }
    assert!(!data.contains("after-the-sleep"), "{data}");
    // No sleep of theirs is left on the host.
    let mine: Vec<_> = super::supervise::procs()
        .into_iter()
        .filter(|p| p.comm == "sleep" && p.state != 'Z')
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{}/cmdline", p.pid))
                .is_ok_and(|c| c.contains("1000"))
        })
        .collect();
    assert!(mine.is_empty(), "{mine:?}");
}

/// An ordinary test that times out or leaves a child fails, with its
/// reason in the marker.
#[test]
fn an_ordinary_test_that_leaves_a_child_fails() {
    let t = Tree::new("leftover");
    t.dir("/tmp");
    t.script(
        "tk-test-leaky",
        "sleep 1000 & sleep 1000 & echo 'ok - main part'",
    );
    let (mut init, _) = t.init("tierkit.mode=test");
    super::modes::run_mode(&mut init);
    assert_eq!(
        init.out.lines.last().map(String::as_str),
        Some("TIERKIT-USERTEST tk-test-leaky rc=0 left=2")
    );
    assert_eq!(init.fails, 1);
}

/// A process a test parks on purpose (named `tk-keep-alive`, as
/// `lifecycle::quarantine` names it) is counted but not killed.
#[test]
fn a_kept_process_is_counted_but_not_killed() {
    let t = Tree::new("keep");
    t.dir("/tmp");
    let keep = t.p("/tmp/tk-keep-alive");
    std::fs::copy("/bin/sleep", &keep).unwrap();
    t.script(
        "tk-test-parks",
        &format!(
            "{} 1000 >/dev/null 2>&1 & echo $! > {}.pid",
            keep.display(),
            keep.display()
        ),
    );
    let (mut init, _) = t.init("tierkit.mode=test");
    super::modes::run_mode(&mut init);
    assert_eq!(
        init.out.lines.last().map(String::as_str),
        Some("TIERKIT-USERTEST tk-test-parks rc=0 left=1")
    );
    let data = String::from_utf8_lossy(&init.out.data_bytes).into_owned();
    assert!(
        data.contains("but for the 1 named \"tk-keep-alive\""),
        "{data}"
    );
    let pid: i32 = std::fs::read_to_string(format!("{}.pid", keep.display()))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let alive = super::supervise::parse_stat(&stat).is_some_and(|p| p.state != 'Z');
    // SAFETY: kill(2) on the sleep this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    assert!(alive, "it was killed: {stat}");
}

/// tierkit's counters in a fake tree: `held` pages on node 0.
fn fake_stats(t: &super::fake::Tree, held: u64) {
    t.file(
        "/sys/kernel/debug/tierkit/stats",
        &format!("node allocated held gigantic pool\n0 9000 {held} 0 0\n"),
    );
    t.file(
        "/sys/kernel/debug/tierkit/limits",
        &format!("held_pages {held}\norphans 0\ngigantic_pool_filling 0\n"),
    );
}

/// A killed test whose pages come back seconds after the kill: /init
/// waits for them before the next test, and says how long.
#[test]
fn a_killed_tests_pages_are_waited_for_before_the_next_test() {
    let t = Tree::new("settle");
    t.dir("/tmp");
    fake_stats(&t, 0);
    let stats = t.p("/sys/kernel/debug/tierkit/stats");
    // It takes 4096 pages and is killed at its deadline of 2 s; the pages
    // come back 3 s later (from the host, as a process that takes seconds
    // to exit would give them back).
    t.script(
        "tk-test-runner-release",
        &format!(
            "sed -i 's/^0 9000 0 /0 9000 4096 /' {}; echo 'holding'; sleep 1000",
            stats.display()
        ),
    );
    t.script(
        "tk-test-z",
        &format!("cat {}; echo 'ok - after it'", stats.display()),
    );
    let back = {
        let t2 = t.p("/");
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs(5));
            let f = |abs: &str| t2.join(abs.trim_start_matches('/'));
            // Written whole and renamed into place, as a read of the
            // kernel's file is: a reader never sees it half written.
            let tmp = f("/sys/kernel/debug/tierkit/stats.tmp");
            std::fs::write(&tmp, "node allocated held gigantic pool\n0 9000 0 0 0\n").unwrap();
            std::fs::rename(&tmp, f("/sys/kernel/debug/tierkit/stats")).unwrap();
        })
    };
    let (mut init, _) = t.init("tierkit.mode=test");
    super::modes::run_mode(&mut init);
    back.join().unwrap();
    let l = &init.out.lines;
    let end = l
        .iter()
        .find(|x| x.starts_with("TIERKIT-USERTEST tk-test-runner-release "))
        .expect("its end marker");
    assert!(
        end.starts_with("TIERKIT-USERTEST tk-test-runner-release rc=137 timeout=2 waited="),
        "{l:#?}"
    );
    assert!(!end.contains("unreleased"), "{end}");
    assert_eq!(init.fails, 0, "{l:#?}");
    let data = String::from_utf8_lossy(&init.out.data_bytes).into_owned();
    assert!(
        data.contains("tk-init: tk-test-runner-release: waited "),
        "{data}"
    );
    // The next test saw the pages back.
    assert!(data.contains("0 9000 0 0 0\nok - after it"), "{data}");
}

/// A killed test whose pages never come back fails, whatever it
/// expected, with what is missing named; the next test runs.
#[test]
fn a_killed_test_whose_pages_never_come_back_fails() {
    let t = Tree::new("unreleased");
    t.dir("/tmp");
    fake_stats(&t, 0);
    let stats = t.p("/sys/kernel/debug/tierkit/stats");
    t.script(
        "tk-test-runner-sleep",
        &format!(
            "sed -i 's/^0 9000 0 /0 9000 4096 /' {}; sleep 1000",
            stats.display()
        ),
    );
    t.script("tk-test-z", "echo 'ok - after it'");
    let (mut init, _) = t.init("tierkit.mode=test");
    super::modes::run_mode(&mut init);
    let l = &init.out.lines;
    assert!(
        l.iter().any(|x| x.starts_with(
            "TIERKIT-USERTEST tk-test-runner-sleep rc=137 timeout=2 unreleased=1 waited=10"
        )),
        "{l:#?}"
    );
    assert_eq!(
        l.last().map(String::as_str),
        Some("TIERKIT-USERTEST tk-test-z rc=0")
    );
    assert_eq!(init.fails, 1);
    let data = String::from_utf8_lossy(&init.out.data_bytes).into_owned();
    assert!(
        data.contains("tk-init: tk-test-runner-sleep: what it held did not come back within 10 s after it was killed: tierkit node0 held Some(0) -> Some(4096)"),
        "{data}"
    );
}
