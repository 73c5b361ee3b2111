//! Host tests of the QEMU command line, the boot options and the live
//! console filter.

use super::*;
use crate::kernels::profile::Profile;
use crate::plan::topology::{TopologyKind, TopologyOpts};

fn cfg(mode: Mode, filter: Option<&str>) -> GuestConfig {
    GuestConfig {
        topology: Topology::new(&TopologyOpts {
            dram_gib: 4,
            ..TopologyOpts::defaults(TopologyKind::NUMA)
        })
        .unwrap(),
        accel: Accel::Tcg,
        kernel: crate::kernels::kernel::KernelRequest {
            src: None,
            fresh_config: false,
            profile: Profile::Default,
            kind: crate::kernels::profile::KernelKind::Tierkit,
        },
        job: GuestJob {
            kunit: mode == Mode::Test,
            mode,
            filter: crate::plan::runs::Filter::both(filter),
            append: vec![],
            cxl_online: CxlOnline::Movable,
            cpu_model: "max".into(),
            timeout: Duration::from_secs(600),
            deadline_scale: 1,
        },
        extra_args: vec![],
    }
}

#[test]
fn cmdline_has_what_ktap_needs() {
    let c = kernel_cmdline(&cfg(Mode::Test, Some("tierkit_topology.*"))).unwrap();
    for w in [
        "console=ttyS0",
        "loglevel=7",
        "panic=-1",
        "oops=panic",
        "no_timer_check",
        "tierkit.mode=test",
        "kunit.filter_glob=tierkit_topology.*",
        "init_on_alloc=0",
        "memhp_default_state=online_movable",
    ] {
        assert!(c.split(' ').any(|x| x == w), "{w} in {c}");
    }
    let mut k = cfg(Mode::Test, None);
    k.job.cxl_online = CxlOnline::Kernel;
    let kc = kernel_cmdline(&k).unwrap();
    assert!(kc
        .split(' ')
        .any(|x| x == "memhp_default_state=online_kernel"));
    assert!(!kc.contains("online_movable"));
    assert!(!c.contains("quiet"));
    assert!(!c.contains("kunit_shutdown"));
    assert!(!c.contains("kunit.enable=0"));
    assert!(!c.contains("tierkit.cxl"));
    let b = kernel_cmdline(&cfg(Mode::Bench("clear".into()), None)).unwrap();
    assert!(b.contains("tierkit.mode=bench-clear") && b.contains("kunit.enable=0"));
    assert!(kernel_cmdline(&cfg(Mode::Test, Some("a b"))).is_err());
    let mut q = cfg(Mode::Run, None);
    q.job.append = vec!["quiet".into()];
    assert!(kernel_cmdline(&q).is_err());
}

#[test]
fn qemu_command_line() {
    let a = qemu_args(
        Path::new("/k/bzImage"),
        Path::new("/r/initramfs.cpio"),
        Path::new("/r/data.log"),
        &cfg(Mode::Run, None),
    )
    .unwrap();
    let has = |x: &str, y: &str| a.windows(2).any(|w| w[0] == x && w[1] == y);
    assert!(has("-machine", "q35,hmat=on"));
    assert!(has("-cpu", "max"));
    assert!(has("-accel", "tcg,thread=multi"));
    assert!(has("-serial", "stdio"));
    assert!(has("-serial", "file:/r/data.log"));
    assert!(has("-kernel", "/k/bzImage"));
    assert!(a.contains(&"-no-reboot".to_string()));
}

/// `qemu-cmd.txt` runs in a POSIX shell as the command ran, quotes
/// in `--append` and all.
#[test]
fn qemu_cmd_txt_is_quoted_for_sh() {
    let mut c = cfg(Mode::Run, None);
    c.job.append = vec!["foo=\"a b\"".into(), "it's".into()];
    let a = qemu_args(
        Path::new("/k/bz Image"),
        Path::new("/r/initramfs.cpio"),
        Path::new("/r/data.log"),
        &c,
    )
    .unwrap();
    let line = qemu_cmd_line("qemu-system-x86_64", &a);
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("printf '%s\\n' {line}"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{line}");
    let words: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let mut want = vec!["qemu-system-x86_64".to_string()];
    want.extend(a.iter().cloned());
    assert_eq!(words, want);
    assert!(words.last().unwrap().ends_with(" foo=\"a b\" it's"));
}

#[test]
fn cxl_command_line() {
    let mut c = cfg(Mode::Test, None);
    c.topology = Topology::new(&TopologyOpts {
        cxl_devs: vec![
            crate::plan::topology::CxlDevice::parse("4G").unwrap(),
            crate::plan::topology::CxlDevice::parse("2G").unwrap(),
        ],
        ..TopologyOpts::defaults(TopologyKind::CXL)
    })
    .unwrap();
    let line = kernel_cmdline(&c).unwrap();
    assert!(
        line.split(' ').any(|w| w == "tierkit.cxl=4096,2048"),
        "{line}"
    );
    // The default of --cxl-online.
    assert!(line.contains("memhp_default_state=online_movable"));
    let a = qemu_args(
        Path::new("/k/bzImage"),
        Path::new("/r/initramfs.cpio"),
        Path::new("/r/data.log"),
        &c,
    )
    .unwrap();
    let has = |x: &str, y: &str| a.windows(2).any(|w| w[0] == x && w[1] == y);
    assert!(has("-machine", "q35,hmat=on,cxl=on"));
    assert!(has("-m", "6G,maxmem=12G,slots=4"));
    assert!(has("-device", "pxb-cxl,bus_nr=28,bus=pcie.0,id=cxl.2"));
    assert_eq!(a.iter().filter(|x| x.starts_with("cxl-type3,")).count(), 2);
    // Topology arguments come before -cpu and the kernel.
    let m = a.iter().position(|x| x == "-M").unwrap();
    let k = a.iter().position(|x| x == "-kernel").unwrap();
    assert!(m < k);
}

#[test]
fn cxl_interleave_command_line() {
    let mut c = cfg(Mode::Run, None);
    c.topology = Topology::new(&TopologyOpts {
        cxl_interleave: Some(crate::plan::topology::CxlInterleave::parse("2:4096").unwrap()),
        ..TopologyOpts::defaults(TopologyKind::CXL)
    })
    .unwrap();
    let line = kernel_cmdline(&c).unwrap();
    assert!(
        line.split(' ').any(|w| w == "tierkit.cxl=4096:2:4096"),
        "{line}"
    );
    let a = qemu_args(
        Path::new("/k/bzImage"),
        Path::new("/r/initramfs.cpio"),
        Path::new("/r/data.log"),
        &c,
    )
    .unwrap();
    let has = |x: &str, y: &str| a.windows(2).any(|w| w[0] == x && w[1] == y);
    assert!(has(
        "-M",
        "cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G,cxl-fmw.0.interleave-granularity=4096"
    ));
    assert_eq!(a.iter().filter(|x| x.starts_with("pxb-cxl,")).count(), 1);
    assert_eq!(a.iter().filter(|x| x.starts_with("cxl-rp,")).count(), 2);
    assert_eq!(a.iter().filter(|x| x.starts_with("cxl-type3,")).count(), 2);
}

#[test]
fn streaming_filter() {
    let mut s = Streamer::new(false, false);
    assert!(s.filter("[    0.000000] Linux version 7.3.4").is_none());
    assert_eq!(
        s.filter("[    2.1] TIERKIT-TOPO node0 cpus=0-1").unwrap(),
        "  topology: node0 cpus=0-1"
    );
    assert_eq!(
        s.filter("[    2.2]     ok 1 node0_has_cpus_and_memory")
            .unwrap(),
        "      ok 1 node0_has_cpus_and_memory"
    );
    assert!(s.filter("[    2.3] not ok 1 tierkit_topology").is_some());
    assert!(s
        .filter("[    2.4] TIERKIT-USERTEST-START tk-test-a")
        .is_some());
    assert!(s.filter("hello from userspace").is_none());
    let mut r = Streamer::new(false, true);
    r.filter("[    2.4] TIERKIT-DEMO-START tk-demo");
    assert_eq!(r.filter("hello\r\n").unwrap(), "  hello");
    assert!(r.filter("TIERKIT-JSON {}").is_none());
    r.filter("[    2.5] TIERKIT-DEMO tk-demo rc=0");
    assert!(r.filter("SeaBIOS noise").is_none());
}

/// A report the old live list missed (UBSAN, hung task, RCU stall) is
/// shown whole, with where the run was.
#[test]
fn streaming_shows_every_kind_of_report_whole() {
    let mut s = Streamer::new(false, false);
    s.filter("[    2.0] TIERKIT-USERTEST-START tk-test-task");
    let head = s
        .filter("[    9.1] INFO: task tk-test-task:88 blocked for more than 60 seconds.")
        .unwrap();
    assert!(head.contains(">>> kernel hung task"), "{head}");
    assert!(
        head.contains("during userspace test tk-test-task"),
        "{head}"
    );
    // The rest of the report, which no pattern matches, is shown too.
    assert_eq!(
        s.filter("[    9.2] task:tk-test-task    state:D stack:0     pid:88")
            .unwrap(),
        "  task:tk-test-task    state:D stack:0     pid:88"
    );
    assert!(s
        .filter("[    9.3] ---[ end trace 0000000000000000 ]---")
        .is_some());
    assert!(s.filter("[    9.4] random: crng init done").is_none());

    let mut k = Streamer::new(false, false);
    k.filter("[    1.1] TIERKIT-INSMOD-START");
    k.filter("[    1.2]     KTAP version 1");
    k.filter("[    1.3]     # Subtest: tierkit_clear");
    let head = k
        .filter("[    1.4] UBSAN: shift-out-of-bounds in module/src/shim.c:40:12")
        .unwrap();
    assert!(
        head.contains("(during KUnit suite tierkit_clear, insmod tierkit.ko"),
        "{head}"
    );
    let rcu = k
        .filter("[   30.0] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:")
        .unwrap();
    assert!(rcu.contains(">>> kernel RCU stall"), "{rcu}");
}

#[test]
fn a_slower_guest_scales_the_tests_deadlines() {
    let mut c = cfg(Mode::Test, None);
    assert!(!kernel_cmdline(&c)
        .unwrap()
        .contains("tierkit.deadline_scale="));
    c.job.deadline_scale = 16;
    let line = kernel_cmdline(&c).unwrap();
    assert!(
        line.split_whitespace()
            .any(|w| w == "tierkit.deadline_scale=16"),
        "{line}"
    );
}

/// A guest that panics and does not exit (a panic before the kernel read
/// `panic=`) is stopped within seconds, not at its 600 s timeout.
#[test]
fn a_panic_that_does_not_end_qemu_ends_the_boot_within_seconds() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("xtask-panic-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let qemu = dir.join("fake-qemu");
    fs::write(
        &qemu,
        "#!/bin/sh\necho '[    0.100000] Linux version 7.3.4'\necho '[    0.200000] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)'\nexec sleep 600\n",
    )
    .unwrap();
    fs::set_permissions(&qemu, fs::Permissions::from_mode(0o755)).unwrap();
    let kernel = KernelBuild {
        src: dir.clone(),
        out_dir: dir.clone(),
        version: "7.3.4".into(),
        config_hash: String::new(),
        key: String::new(),
        bzimage: dir.join("bzImage"),
        profile: Profile::Default,
        debian: None,
    };
    let initramfs = Initramfs {
        path: dir.join("initramfs.cpio"),
        size: 0,
    };
    let began = std::time::Instant::now();
    let g = boot_with(
        qemu.to_str().unwrap(),
        &kernel,
        &initramfs,
        &cfg(Mode::Test, None),
        &dir,
        &mut Streamer::new(false, false),
    )
    .unwrap();
    let took = began.elapsed();
    fs::remove_dir_all(&dir).unwrap();
    assert!(!g.timed_out && g.exit.is_none(), "{g:?}");
    assert!(took < Duration::from_secs(15), "{took:?}");
    assert!(took >= console::fatal::AFTER_PANIC, "{took:?}");
    assert_eq!(
        console::fatal::early_reason(&g.console, &g.qemu_stderr).as_deref(),
        Some("kernel panic before /init: Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)")
    );
}
