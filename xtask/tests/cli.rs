//! Host tests of `cargo xtask`'s input checks: every flag with a value of
//! `run`, `test`, `bench`, `kernel`, `module` and `build`, driven through
//! [`xtask::cli::check_args`], the parse-and-validate step `main` runs
//! before any work. Nothing here builds, boots or runs host tests: a bad
//! value must be refused by that step alone, with one line that names the
//! flag and why.

use std::path::PathBuf;
use xtask::cli::check_args;
use xtask::util::validate::Host;

/// A host with `gib` GiB of memory (`MemTotal`).
fn host(gib: u64) -> Host {
    Host {
        mem_total_gib: Some(gib),
        cwd: Some(PathBuf::from("/work/project")),
        stdin_is_terminal: true,
    }
}

const BIG: u64 = 64;

fn check_on(h: &Host, args: &[&str]) -> Result<(), String> {
    check_args(
        std::iter::once("cargo xtask").chain(args.iter().copied()),
        h,
    )
}

/// `args` are accepted (on a 64 GiB host).
#[track_caller]
fn accepted(args: &[&str]) {
    if let Err(e) = check_on(&host(BIG), args) {
        panic!("{args:?} refused: {e}");
    }
}

/// `args` are refused (on a 64 GiB host) with one line naming `flag` and
/// saying `why`; returns the line.
#[track_caller]
fn refused(args: &[&str], flag: &str, why: &str) -> String {
    refused_on(&host(BIG), args, flag, why)
}

#[track_caller]
fn refused_on(h: &Host, args: &[&str], flag: &str, why: &str) -> String {
    match check_on(h, args) {
        Ok(()) => panic!("{args:?} accepted, but {flag} should be refused ({why})"),
        Err(e) => {
            assert!(!e.contains('\n'), "{args:?}: more than one line: {e:?}");
            assert!(e.contains(flag), "{args:?}: {e:?} does not name {flag}");
            assert!(e.contains(why), "{args:?}: {e:?} does not say {why:?}");
            e
        }
    }
}

/// The commands that boot, each with `args` after it.
fn each_boot_cmd(args: &[&str], f: impl Fn(&[&str])) {
    for cmd in [&["run"][..], &["test"], &["bench"], &["bench", "clear"]] {
        let v: Vec<&str> = cmd.iter().chain(args).copied().collect();
        f(&v);
    }
}

#[test]
fn defaults_are_accepted() {
    for args in [
        &["run"][..],
        &["run", "--kunit", "--topology", "cxl"],
        &["test"],
        &["test", "--full"],
        &["test", "--ci"],
        &["test", "--profile", "default,debug", "--no-host-tests"],
        &["test", "--topology", "numa2", "--cpus", "4"],
        &["bench"],
        &["bench", "wi", "--profile", "debug"],
        &["kernel"],
        &["module", "--profile", "debug"],
        &["build", "--profile", "default,debug"],
        &["setup"],
        &["--help"],
        &["run", "--help"],
    ] {
        accepted(args);
    }
    // Good values of every flag checked below.
    accepted(&[
        "run",
        "--kunit",
        "--topology",
        "cxl",
        "--cpus",
        "4",
        "--dram",
        "8G",
        "--cxl-dev",
        "2G:300:5G,2G:300:5G",
        "--cxl-interleave",
        "2:4K",
        "--dram-perf",
        "100:20G",
        "--cpu",
        "max,erms=off",
        "--timeout",
        "60",
        "--filter",
        "tierkit_topology.*",
        "--append",
        "foo=\"a b\" bar",
        "--append",
        "baz",
        "--cxl-online",
        "kernel",
    ]);
}

#[test]
fn timeout() {
    each_boot_cmd(&["--timeout", "0"], |a| {
        refused(a, "--timeout", "at least 1");
    });
    refused(&["run", "--timeout", "ten"], "--timeout", "whole number");
    refused(&["run", "--timeout=-1"], "--timeout", "negative");
    refused(&["run", "--timeout=10s"], "--timeout", "whole number");
    refused(
        &["run", "--timeout", "18446744073709551615"],
        "--timeout",
        "more than a week",
    );
    accepted(&["run", "--timeout", "1"]);
}

#[test]
fn cpu_model() {
    each_boot_cmd(&["--cpu", ""], |a| {
        refused(a, "--cpu", "empty");
    });
    refused(&["run", "--cpu", "  "], "--cpu", "empty");
    refused(&["run", "--cpu", "max erms=off"], "--cpu", "a space");
    refused(&["run", "--cpu", "help"], "--cpu", "list its CPU models");
    accepted(&["run", "--cpu", "max"]);
}

#[test]
fn append() {
    each_boot_cmd(&["--append", "foo=\"bar"], |a| {
        refused(a, "--append", "unbalanced double quote");
    });
    refused(
        &["run", "--append", "a=\"x\" b=\"y"],
        "--append",
        "unbalanced",
    );
    refused(&["run", "--append", "foo=1\nbar=2"], "--append", "newline");
    refused(&["run", "--append", "foo=\0"], "--append", "NUL");
    refused(&["run", "--append", ""], "--append", "empty");
    // xtask's own parameters: a second value would contradict the first.
    for (own, by) in [
        ("tierkit.mode=test", "the command"),
        ("tierkit.filter=x", "--filter"),
        ("kunit.filter_glob=tierkit_wi*", "--filter"),
        ("tierkit.cxl=4096", "--cxl-dev"),
        ("tierkit.profile=debug", "--profile"),
        ("tierkit.deadline_scale=4", "--profile"),
        ("tierkit.skip=tk-test-vma", "selection"),
    ] {
        each_boot_cmd(&["--append", own], |a| {
            refused(a, "--append", "is xtask's own");
        });
        refused(
            &["run", "--append", &format!("foo=1 {own}")],
            "--append",
            by,
        );
    }
    // The guest programs' own tierkit.* words, and kernel parameters
    // xtask sets before --append so that a later one wins, pass.
    accepted(&["bench", "--append", "tierkit.bench=calibrate,run"]);
    accepted(&[
        "run",
        "--append",
        "init_on_alloc=1 memhp_default_state=online",
    ]);
    accepted(&["run", "--append", "tierkit.modex=1"]);
    refused(&["test", "--append", "quiet"], "--append", "`quiet`");
    refused(
        &["run", "--append", "kunit_shutdown=poweroff"],
        "--append",
        "kunit_shutdown",
    );
    // Each is fine alone; together the command line is too long for x86.
    let long = format!("x={}", "y".repeat(1000));
    accepted(&["run", "--append", &long]);
    refused(
        &["run", "--append", &long, "--append", &long],
        "--append",
        "COMMAND_LINE_SIZE",
    );
}

#[test]
fn filter() {
    refused(&["run", "--filter", ""], "--filter", "empty");
    refused(&["test", "--filter", ""], "--filter", "empty");
    refused(
        &["bench", "--filter", ""],
        "--filter",
        "runs its benchmarks whole",
    );
    refused(
        &["test", "--filter", "tk-test-cxl tk-test-vma"],
        "--filter",
        "a space",
    );
    refused(&["test", "--filter", "a\"b"], "--filter", "double quote");
    refused(&["test", "--filter", "a\tb"], "--filter", "a tab");
    refused(&["test", "--filter", "a\nb"], "--filter", "newline");
    for empty_glob in [
        ",",
        "tk-test-vma,",
        ",tk-test-vma",
        "tk-test-vma,,tk-test-cxl",
    ] {
        refused(
            &["test", "--filter", empty_glob],
            "--filter",
            "an empty glob",
        );
        refused(
            &["run", "--filter", empty_glob],
            "--filter",
            "an empty glob",
        );
    }
    accepted(&["test", "--filter", "tk-test-cxl,tk-test-vma"]);
}

#[test]
fn dram() {
    each_boot_cmd(&["--dram", "512M"], |a| {
        refused(a, "--dram", "whole GiB");
    });
    refused(&["run", "--dram", "0G"], "--dram", "at least 1 GiB");
    refused(&["run", "--dram", "1.5G"], "--dram", "whole GiB");
    refused(&["run", "--dram", ""], "--dram", "whole GiB");
    each_boot_cmd(&["--dram", "100000G"], |a| {
        refused(a, "--dram 100000G", "more than this host's 64 GiB");
    });
    // Per node: numa2 has two of them (and u32 sizes must not wrap).
    refused(
        &["run", "--topology", "numa2", "--dram", "4294967295G"],
        "--dram",
        "8589934593 GiB",
    );
    let small = host(16);
    refused_on(&small, &["run", "--dram", "14G"], "--dram 14G", "17 GiB");
    assert!(check_on(&small, &["run", "--dram", "13G"]).is_ok());
    refused_on(
        &small,
        &["run", "--topology", "numa2", "--cpus", "2", "--dram", "7G"],
        "--dram 7G",
        "the numa2 guest would have 17 GiB",
    );
    // Unknown host memory: not checked.
    assert!(check_on(&Host::default(), &["run", "--dram", "100000G"]).is_ok());
}

#[test]
fn cxl_mem() {
    each_boot_cmd(&["--cxl-mem", "0"], |a| {
        refused(a, "--cxl-mem", "at least 1 GiB");
    });
    refused(&["run", "--cxl-mem", "2T"], "--cxl-mem", "whole GiB");
    refused(
        &["run", "--topology", "cxl", "--cxl-mem", "4G"],
        "--cxl-mem",
        "has none",
    );
    refused(
        &["bench", "wi", "--topology", "cxl", "--cxl-mem", "4G"],
        "--cxl-mem",
        "has none",
    );
    // `test` and `bench` without --topology: the numa boots take it.
    accepted(&["test", "--cxl-mem", "4G"]);
    accepted(&["bench", "--cxl-mem", "4G"]);
    accepted(&[
        "run",
        "--topology",
        "numa2",
        "--cpus",
        "2",
        "--cxl-mem",
        "4G",
    ]);
    refused(
        &["run", "--cxl-mem", "1000G"],
        "--cxl-mem 1000G",
        "more than this host's",
    );
}

#[test]
fn cxl_dev() {
    refused(
        &["run", "--topology", "cxl", "--cxl-dev", "3M"],
        "--cxl-dev",
        "whole GiB",
    );
    refused(
        &["run", "--topology", "cxl", "--cxl-dev", "4G:300"],
        "--cxl-dev",
        "LATENCY_NS:BANDWIDTH_GBS",
    );
    refused(
        &["run", "--topology", "cxl", "--cxl-dev", "4G:0:5G"],
        "--cxl-dev",
        "positive",
    );
    refused(
        &["run", "--cxl-dev", "4G"],
        "--cxl-dev",
        "needs --topology cxl",
    );
    refused(
        &["test", "--topology", "numa", "--cxl-online", "kernel"],
        "--cxl-online",
        "needs --topology cxl",
    );
    refused(
        &["bench", "clear", "--topology", "numa", "--cxl-dev", "4G"],
        "--cxl-dev",
        "needs --topology cxl",
    );
    refused(
        &[
            "run",
            "--topology",
            "cxl",
            "--cxl-dev",
            "1G,1G,1G,1G,1G,1G,1G,1G,1G",
        ],
        "CXL devices",
        "at most 8",
    );
    refused(
        &["run", "--topology", "cxl", "--cxl-dev", "40G,40G"],
        "--cxl-dev 40G,40G",
        "more than this host's",
    );
    // `test` and `bench` without --topology: the devices are the cxl
    // boots'.
    accepted(&["test", "--cxl-dev", "4G,2G"]);
    accepted(&["bench", "--cxl-dev", "4G,2G"]);
    accepted(&["test", "--full", "--cxl-interleave", "2"]);
}

#[test]
fn cxl_interleave() {
    for (v, why) in [
        ("3", "WAYS is 1 or 2"),
        ("x", "not a number"),
        ("2:100", "power of two"),
        ("2:32K", "power of two"),
    ] {
        refused(
            &["run", "--topology", "cxl", "--cxl-interleave", v],
            "--cxl-interleave",
            why,
        );
    }
    refused(
        &["run", "--cxl-interleave", "2"],
        "--cxl-interleave",
        "needs --topology cxl",
    );
    refused(
        &[
            "run",
            "--topology",
            "cxl",
            "--cxl-dev",
            "4G",
            "--cxl-interleave",
            "2",
        ],
        "--cxl-interleave",
        "multiple of 2",
    );
}

/// A later boot of a multi-boot `test` is checked before the first is
/// built: here the numa run is fine and the cxl run is not.
#[test]
fn test_checks_every_boot_up_front() {
    let e = refused(
        &["test", "--cxl-dev", "4G,2G", "--cxl-interleave", "2"],
        "--cxl-interleave",
        "differ",
    );
    assert!(e.starts_with("test run cxl (default profile): "), "{e}");
    let e = refused(
        &[
            "test",
            "--full",
            "--cxl-dev",
            "4G,2G",
            "--cxl-interleave",
            "2",
        ],
        "--cxl-interleave",
        "differ",
    );
    assert!(
        e.starts_with("test run cxl-full (default profile): "),
        "{e}"
    );
    // --ci's last boot is the debug profile's cxl run.
    refused(
        &[
            "test",
            "--ci",
            "--cxl-dev",
            "4G,2G",
            "--cxl-interleave",
            "2",
        ],
        "test run cxl",
        "differ",
    );
    // The debug profile's own kernel parameters count for the length of
    // its command line: the longest --append the default profile's boots
    // take is too long for the debug profile's.
    let append = |n: usize| format!("x={}", "y".repeat(n));
    let longest = (1000..2100)
        .take_while(|&n| check_on(&host(BIG), &["test", "--full", "--append", &append(n)]).is_ok())
        .last()
        .expect("a 1000-byte --append fits");
    assert!(longest < 2047, "{longest}");
    refused(
        &["test", "--full", "--append", &append(longest + 1)],
        "--append",
        "COMMAND_LINE_SIZE",
    );
    refused(
        &[
            "test",
            "--full",
            "--profile",
            "default,debug",
            "--append",
            &append(longest),
        ],
        "test run numa-full (debug profile)",
        "COMMAND_LINE_SIZE",
    );
}

#[test]
fn dram_perf() {
    for (v, why) in [
        ("100", "LATENCY_NS:BANDWIDTH_GBS"),
        ("0:20G", "positive"),
        ("x:20G", "latency"),
        ("100:y", "bandwidth"),
    ] {
        each_boot_cmd(&["--dram-perf", v], |a| {
            refused(a, "--dram-perf", why);
        });
    }
}

#[test]
fn cpus() {
    for v in ["0", "9", "x", ""] {
        each_boot_cmd(&["--cpus", v], |a| {
            refused(a, "--cpus", "");
        });
    }
    refused(
        &["run", "--topology", "numa2", "--cpus", "3"],
        "--cpus",
        "multiple of 2",
    );
    refused(
        &["test", "--topology", "numa2", "--cpus", "1"],
        "--cpus",
        "multiple of 2",
    );
}

#[test]
fn topology_cxl_online_and_bench_name() {
    each_boot_cmd(&["--topology", "numa3"], |a| {
        refused(a, "--topology", "possible values: numa, numa2, cxl");
    });
    each_boot_cmd(&["--cxl-online", "normal"], |a| {
        refused(a, "--cxl-online", "possible values: movable, kernel");
    });
    refused(
        &["bench", "memcpy"],
        "[WHICH]",
        "possible values: clear, wi, gigantic",
    );
}

#[test]
fn profile() {
    for cmd in ["run", "test", "bench", "kernel", "module", "build"] {
        refused(
            &[cmd, "--profile", "fast"],
            "--profile",
            "possible values: default, debug",
        );
        refused(&[cmd, "--profile", ""], "--profile", "");
    }
    refused(
        &["run", "--profile", "default,debug"],
        "--profile",
        "boots one kernel",
    );
    refused(
        &["bench", "clear", "--profile", "debug,default"],
        "--profile",
        "boots one kernel",
    );
    refused(
        &["bench", "--profile", "debug"],
        "--profile debug",
        "default profile only",
    );
}

/// A scratch directory of this test process.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("xtask-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

#[test]
fn kernel_src() {
    let missing = "/nonexistent/tierkit-kernel-src";
    let empty = scratch("empty");
    let fake = scratch("fake");
    for d in ["scripts/kconfig", "rust", "arch/x86"] {
        std::fs::create_dir_all(fake.join(d)).unwrap();
    }
    std::fs::write(
        fake.join("Makefile"),
        "VERSION = 7\nPATCHLEVEL = 3\nSUBLEVEL = 0\n",
    )
    .unwrap();
    std::fs::write(fake.join("scripts/kconfig/merge_config.sh"), "").unwrap();
    let fake_s = fake.to_str().unwrap();
    for cmd in ["run", "test", "bench", "kernel", "module", "build"] {
        refused(
            &[cmd, "--kernel-src", missing],
            "--kernel-src",
            "no such directory",
        );
        refused(&[cmd, "--kernel-src", ""], "--kernel-src", "");
        refused(
            &[cmd, "--kernel-src", empty.to_str().unwrap()],
            "--kernel-src",
            "no top-level Makefile",
        );
        accepted(&[cmd, "--kernel-src", fake_s]);
    }
    std::fs::write(fake.join(".config"), "").unwrap();
    refused(
        &["build", "--kernel-src", fake_s],
        "--kernel-src",
        "configured or built in place (it has .config)",
    );
    let _ = std::fs::remove_dir_all(&empty);
    let _ = std::fs::remove_dir_all(&fake);
}

#[test]
fn kdir() {
    refused(
        &["module", "--kdir", "/nonexistent/tierkit-kdir"],
        "--kdir",
        "no such directory",
    );
    let empty = scratch("kdir-empty");
    let e = empty.to_str().unwrap();
    refused(&["module", "--kdir", e], "--kdir", "has no .config");
    std::fs::write(empty.join(".config"), "CONFIG_RUST=y\n").unwrap();
    refused(
        &["module", "--kdir", e],
        "--kdir",
        "has no include/config/kernel.release",
    );
    // --kdir is a kernel someone else built: tierkit's own kernel's flags
    // do not apply.
    refused(
        &["module", "--kdir", e, "--profile", "debug"],
        "--kdir",
        "cannot be used with",
    );
    let _ = std::fs::remove_dir_all(&empty);
}

#[test]
fn kernel_debian() {
    accepted(&["test", "--kernel", "debian"]);
    accepted(&["test", "--kernel", "debian", "--full", "--topology", "numa"]);
    accepted(&["run", "--kernel", "debian", "--topology", "cxl"]);
    accepted(&["test", "--kernel", "tierkit", "--profile", "debug"]);
    for cmd in ["run", "test"] {
        refused(
            &[cmd, "--kernel", "debian", "--profile", "debug"],
            "--kernel debian",
            "--profile is for --kernel tierkit",
        );
    }
    refused(&["test", "--kernel", "ubuntu"], "--kernel", "invalid value");
    // Debian's kernel has KUnit off: a KUnit-only glob or --kunit would
    // boot for nothing.
    refused(
        &["run", "--kernel", "debian", "--kunit"],
        "--kunit",
        "KUnit off",
    );
    for list in ["tierkit_wi*", "tk-test-vma,tierkit_topology.*"] {
        refused(
            &["test", "--kernel", "debian", "--filter", list],
            "--filter",
            "selects no userspace or xtask-* test, and Debian's kernel has KUnit off",
        );
    }
    accepted(&[
        "test",
        "--kernel",
        "debian",
        "--filter",
        "tk-test-vma,xtask-run-false",
    ]);
    accepted(&["test", "--filter", "tierkit_wi*"]);
    // --ci boots its own kernels (runs::ci_boots): a --kernel beside it
    // would be ignored.
    refused(
        &["test", "--ci", "--kernel", "debian"],
        "'--ci' cannot be used with",
        "--kernel",
    );
}

/// `--ci` is a set of boots of its own: a flag that selects other boots
/// beside it is refused, not ignored (`.ci/run --topology cxl` would
/// otherwise run all of CI).
#[test]
fn ci_takes_no_other_selection() {
    for other in [
        &["--full"][..],
        &["--topology", "cxl"],
        &["--profile", "debug"],
        &["--profile", "default"],
        &["--kernel", "tierkit"],
    ] {
        let args: Vec<&str> = ["test", "--ci"].iter().chain(other).copied().collect();
        refused(&args, "'--ci' cannot be used with", other[0]);
    }
    accepted(&["test", "--ci", "--no-host-tests", "--job", "socket2"]);
    accepted(&["test", "--ci", "--filter", "xtask-*", "--repeat", "2"]);
}

/// `--cxl-online` where no boot has CXL memory: `run`, `shell` and
/// `bench NAME` boot numa unless `--topology` says otherwise.
#[test]
fn cxl_online_needs_a_cxl_boot() {
    for args in [
        &["run", "--cxl-online", "kernel"][..],
        &["shell", "--cxl-online", "kernel"],
        &["bench", "clear", "--cxl-online", "movable"],
        &["run", "--topology", "numa2", "--cxl-online", "kernel"],
    ] {
        refused(args, "--cxl-online", "needs --topology cxl");
    }
    accepted(&["run", "--topology", "cxl", "--cxl-online", "kernel"]);
    accepted(&["test", "--cxl-online", "kernel"]);
    accepted(&["bench", "--cxl-online", "kernel"]);
}

/// A flag given to a command that does not take it names the commands
/// that do: `test --kunit` is `run`'s flag (`test` always runs KUnit),
/// not a misspelling.
#[test]
fn a_flag_of_another_command_names_it() {
    refused(&["test", "--kunit"], "'--kunit'", "is a flag of `run`");
    refused(&["bench", "--kunit=1"], "'--kunit'", "is a flag of `run`");
    refused(&["kernel", "--topology", "cxl"], "'--topology'", "`run`");
    refused(&["merge", "--filter", "x"], "'--filter'", "`test`");
    let e = refused(&["test", "--bogus"], "--bogus", "unexpected argument");
    assert!(!e.contains("is a flag of"), "{e}");
}

/// Every whole-number flag says what is wrong with a number: negative,
/// out of range however many digits, or no number at all (not clap's
/// `invalid digit found in string`, `number too large to fit in target
/// type`, or `unexpected argument '-1'`).
#[test]
fn numbers_say_what_is_wrong() {
    for (args, flag, why) in [
        (
            &["test", "--repeat", "-1"][..],
            "--repeat",
            "-1 is negative",
        ),
        (&["test", "--repeat", "x"], "--repeat", "not a whole number"),
        (
            &["test", "--repeat", "99999999999999999999"],
            "--repeat",
            "not in 1..=1000",
        ),
        (
            &["run", "--cpus", "99999999999999999999"],
            "--cpus",
            "not in 1..=8",
        ),
        (&["run", "--cpus", "-3"], "--cpus", "-3 is negative"),
        (&["run", "--dram", "-1G"], "--dram", "cannot be negative"),
        (
            &["run", "--cxl-mem", "-2G"],
            "--cxl-mem",
            "cannot be negative",
        ),
        (
            &["run", "--dram", "99999999999999999999G"],
            "--dram",
            "more than any host has",
        ),
        (&["matrix", "--shard", "-1/3"], "--shard", "K is negative"),
        (&["lava", "--shard", "1/-2"], "--shard", "N is negative"),
        (
            &["matrix", "--shard", "99999999999999999999/3"],
            "--shard",
            "is too large",
        ),
    ] {
        let e = refused(args, flag, why);
        for clap_words in ["invalid digit", "too large to fit", "unexpected argument"] {
            assert!(!e.contains(clap_words), "{args:?}: {e}");
        }
    }
    accepted(&["test", "--repeat", "+2"]);
}

/// A 64 GiB host whose current directory is `cwd` (`None`: unreadable).
fn host_in(cwd: Option<&str>) -> Host {
    Host {
        mem_total_gib: Some(BIG),
        cwd: cwd.map(PathBuf::from),
        stdin_is_terminal: true,
    }
}

#[test]
fn run_cmd_and_shell_are_accepted() {
    for args in [
        &["run", "--", "numactl", "-H"][..],
        &["run", "--topology", "cxl", "--", "cxl", "list", "-M"],
        &["run", "--kunit", "--", "sh", "-c", "echo 'a b' \"c\""],
        &["run", "--kernel", "debian", "--", "true"],
        &["run", "-v", "--", "echo", "--weird-name"],
        &["shell"],
        &["shell", "--topology", "cxl", "--cpus", "4"],
        &["help", "shell"],
    ] {
        accepted(args);
    }
    // A share below /root, /tmp or /usr/src is fine.
    for cwd in ["/root/project", "/tmp/x", "/usr/src/linux", "/work/a b,c"] {
        assert!(
            check_on(&host_in(Some(cwd)), &["run", "--", "true"]).is_ok(),
            "{cwd}"
        );
    }
}

#[test]
fn run_with_nothing_after_dash_dash() {
    refused(&["run", "--"], "`run --`", "needs a command after `--`");
    refused(
        &["run", "--topology", "cxl", "--"],
        "`run --`",
        "needs a command",
    );
    refused(&["run", "--", ""], "`run -- ''`", "empty");
}

#[test]
fn run_cmd_refuses_filter() {
    refused(
        &["run", "--filter", "tk-*", "--", "true"],
        "--filter",
        "only the command runs",
    );
    refused(
        &["shell", "--filter", "x"],
        "--filter",
        "only the command runs",
    );
}

#[test]
fn run_cmd_and_shell_refuse_a_cwd_they_cannot_share() {
    for (cwd, why) in [
        (Some("/"), "the current directory is /"),
        (Some("/proc/self"), "under /proc"),
        (Some("/sys/kernel"), "under /sys"),
        (Some("/usr"), "would hide the guest's own /usr/bin/numactl"),
        (Some("/lib"), "would hide the guest's own"),
        (Some("/etc"), "would hide the guest's own /etc/tierkit/cmd"),
        (None, "cannot be read"),
    ] {
        for args in [&["run", "--", "true"][..], &["shell"]] {
            refused_on(&host_in(cwd), args, "current directory", why);
        }
        // The demos share nothing: the same directory is fine for them.
        assert!(check_on(&host_in(cwd), &["run"]).is_ok(), "{cwd:?}");
    }
}

/// `shell` with stdin a pipe or a file (`echo exit | cargo xtask shell`,
/// CI) is refused before anything is built: the guest's shell would wait
/// for input for ever. `run -- CMD`, whose stdin is /dev/null, and the
/// demos run as they are.
#[test]
fn shell_needs_a_terminal_on_stdin() {
    let piped = Host {
        stdin_is_terminal: false,
        ..host(BIG)
    };
    for args in [&["shell"][..], &["shell", "--topology", "cxl"]] {
        refused_on(&piped, args, "`shell`", "needs a terminal on stdin");
    }
    for args in [
        &["run"][..],
        &["run", "--", "true"],
        &["test"],
        &["help", "shell"],
    ] {
        assert_eq!(check_on(&piped, args), Ok(()), "{args:?}");
    }
}

#[test]
fn shell_takes_one_profile() {
    refused(
        &["shell", "--profile", "default,debug"],
        "shell",
        "one --profile",
    );
}

// ---------------------------------------------------------------------------
// The CI commands: test --job, matrix, merge, lava
// ---------------------------------------------------------------------------

#[test]
fn ci_commands_answer_help_and_take_good_values() {
    for args in [
        &["matrix", "--help"][..],
        &["merge", "--help"],
        &["lava", "--help"],
        &["matrix"],
        &["matrix", "--ci"],
        &["matrix", "--full"],
        &["matrix", "--profile", "default,debug", "--full"],
        &["matrix", "--kernel", "debian"],
        &["matrix", "--topology", "cxl"],
        &["matrix", "--shard", "1/3"],
        &["matrix", "--shard", "9/9"],
        &["matrix", "ci"],
        &["matrix", "quick"],
        &["matrix", "full"],
        &["matrix", "full-debug", "--shard", "2/2"],
        &["matrix", "debian"],
        &["lava", "debug"],
        &["test", "--ci", "--job", "numa-full-debug"],
        &["test", "--job", "cxl"],
        &[
            "test",
            "--full",
            "--profile",
            "debug",
            "--job",
            "cxl-full-debug",
        ],
        &["test", "--kernel", "debian", "--job", "numa-debian"],
        &["lava"],
        &[
            "lava",
            "--shard",
            "2/3",
            "--artifact-url",
            "https://ci.example.org/r/1",
        ],
        &[
            "lava",
            "--job",
            "cxl-debian",
            "--artifact-url",
            "file:///srv/lava",
        ],
    ] {
        accepted(args);
    }
}

#[test]
fn job() {
    refused(
        &["test", "--job", "Numa Full"],
        "--job",
        "lower-case letters",
    );
    refused(&["test", "--job", ""], "--job", "lower-case letters");
    refused(
        &["test", "--ci", "--job", "numa"],
        "--job numa",
        "its jobs are numa-full, cxl-full",
    );
    // The quick runs have no numa-full.
    refused(
        &["test", "--job", "numa-full"],
        "--job numa-full",
        "its jobs are numa, cxl",
    );
    refused(&["lava", "--job", "nope"], "--job nope", "no such job");
    refused(&["lava", "--job", "NOPE"], "--job", "lower-case letters");
    // `cargo xtask matrix` lists the run/shell tests as job xtask-cmd,
    // which is no boot: the refusal gives that job's own command.
    refused(
        &["test", "--ci", "--job", "xtask-cmd"],
        "--job xtask-cmd",
        "its command is `cargo xtask test --ci --filter 'xtask-*' --no-host-tests`",
    );
    refused(
        &["test", "--job", "xtask-cmd"],
        "--job xtask-cmd",
        "its command is `cargo xtask test --filter 'xtask-*' --no-host-tests`",
    );
}

#[test]
fn shard() {
    for cmd in ["matrix", "lava"] {
        refused(
            &[cmd, "--shard", "0/3"],
            "--shard",
            "K must be 1 to N (3), not 0",
        );
        refused(&[cmd, "--shard", "4/3"], "--shard", "K must be 1 to N");
        refused(&[cmd, "--shard", "1/0"], "--shard", "N must be 1 or more");
        refused(&[cmd, "--shard", "x/3"], "--shard", "whole number");
        refused(&[cmd, "--shard", "2"], "--shard", "K/N");
    }
    // 12 boots in --ci, then matrix's xtask-cmd job (LAVA boots only the
    // 12): a fourteenth (thirteenth) shard would have none.
    accepted(&["matrix", "--shard", "13/13"]);
    refused(
        &["matrix", "--shard", "14/14"],
        "--shard 14/14",
        "only 13 jobs",
    );
    accepted(&["lava", "--shard", "12/12"]);
    refused(
        &["lava", "--shard", "13/13"],
        "--shard 13/13",
        "only 12 jobs",
    );
}

#[test]
fn matrix_selection() {
    refused(
        &["matrix", "--profile", "fast"],
        "--profile",
        "possible values",
    );
    refused(
        &["matrix", "--kernel", "ubuntu"],
        "--kernel",
        "possible values",
    );
    refused(&["matrix", "--topology", "ring"], "--topology", "ring");
    refused(&["matrix", "--ci", "--full"], "--ci", "cannot be used with");
    refused(&["matrix", "nightly"], "nightly", "possible values");
    refused(
        &["matrix", "full", "--kernel", "debian"],
        "",
        "cannot be used with",
    );
    refused(
        &["matrix", "--kernel", "debian", "--profile", "debug"],
        "--kernel debian",
        "--profile is for --kernel tierkit",
    );
}

#[test]
fn merge_dirs_and_out() {
    refused(&["merge"], "DIR", "required");
    refused(
        &["merge", "/nonexistent/shard"],
        "/nonexistent/shard",
        "not a directory",
    );
    let empty = scratch("merge-empty");
    let e = empty.to_str().unwrap();
    refused(&["merge", e], e, "no results.json under it");
    let full = scratch("merge-full");
    let boot = full.join("test-numa");
    std::fs::create_dir_all(&boot).unwrap();
    std::fs::write(
        boot.join("results.json"),
        r#"{"totals": {"passed": 1, "failed": 0, "skipped": 0}}"#,
    )
    .unwrap();
    let f = full.to_str().unwrap();
    accepted(&["merge", f]);
    accepted(&["merge", f, "--out", e]);
    let file = full.join("a-file");
    std::fs::write(&file, "").unwrap();
    let file_s = file.to_str().unwrap();
    refused(&["merge", f, "--out", file_s], "--out", "not a directory");
    refused(&["merge", f, f], "job numa", "is in both");
    refused(&["lava", "--out", file_s], "--out", "not a directory");
    // --expect: the JSON of `cargo xtask matrix`.
    refused(
        &["merge", f, "--expect", "/nonexistent/jobs.json"],
        "--expect",
        "reading",
    );
    refused(
        &["merge", f, "--expect", file_s],
        "--expect",
        "not the JSON of cargo xtask matrix",
    );
    let jobs = full.join("jobs.json");
    std::fs::write(&jobs, r#"{"jobs": [{"id": "numa"}]}"#).unwrap();
    accepted(&["merge", f, "--expect", jobs.to_str().unwrap()]);
    // Every job missing: counted, not refused.
    accepted(&["merge", e, "--expect", jobs.to_str().unwrap()]);
}

#[test]
fn artifact_url() {
    for bad in [
        "ftp://x.org/r",
        "https://",
        "https://x.org/a b",
        "/srv/lava",
        "https://x.org/\"q",
    ] {
        refused(
            &["lava", "--artifact-url", bad],
            "--artifact-url",
            "http://, https:// or file:///",
        );
    }
}

/// A negative or too long `--timeout` is told as such, not as clap's
/// unknown flag or "not a whole number".
#[test]
fn timeout_negative_or_past_u64() {
    refused(&["test", "--timeout", "-5"], "--timeout", "-5 is negative");
    refused(&["run", "--timeout", "-5"], "--timeout", "negative");
    refused(
        &["test", "--timeout", "99999999999999999999"],
        "--timeout",
        "more than a week",
    );
    refused(&["run", "--cpus", "-1"], "--cpus", "not in 1..=8");
}

/// `--kernel debian` with `--kernel-src DIR` is refused for the pair,
/// whatever DIR holds.
#[test]
fn kernel_debian_refuses_kernel_src_before_judging_it() {
    let e = refused(
        &["test", "--kernel", "debian", "--kernel-src", "/tmp"],
        "--kernel-src",
        "is for --kernel tierkit",
    );
    assert!(!e.contains("/tmp"), "{e}");
}

#[test]
fn kvm_and_no_kvm_conflict() {
    for cmd in ["run", "test", "shell"] {
        refused(&[cmd, "--kvm", "--no-kvm"], "--kvm", "cannot be used with");
        refused(&[cmd, "--no-kvm", "--kvm"], "--kvm", "cannot be used with");
    }
    accepted(&["test", "--kvm"]);
    accepted(&["test", "--no-kvm"]);
}

/// `--filter` is checked against the tests before anything boots, in the
/// one dialect (the kernel's glob_match()).
#[test]
fn filter_selects_a_test() {
    refused(
        &["test", "--filter", "no-such-test"],
        "--filter",
        "no-such-test selects no test",
    );
    refused(
        &["test", "--filter", "tk-test-vma,tk-test-nope"],
        "--filter",
        "tk-test-nope selects no test",
    );
    refused(
        &["test", "--filter", "tierkit_wi*,tierkit_clear*"],
        "--filter",
        "kunit.filter_glob= takes one glob",
    );
    refused(
        &["run", "--filter", "tk-test-vma"],
        "--filter",
        "selects no demo",
    );
    for ok in [
        "tierkit_[!g]*",
        "tierkit_[wc]*",
        "tierkit_topology.*",
        "tierkit_wi*,tk-test-run",
        "tk-test-[cv]*",
        "xtask-*",
    ] {
        accepted(&["test", "--filter", ok]);
    }
    accepted(&["run", "--filter", "tk-demo-g*"]);
    // bench runs its benchmarks whole: a --filter would be ignored.
    refused(
        &["bench", "--filter", "tk-*"],
        "--filter",
        "runs its benchmarks whole",
    );
    refused(
        &["bench", "clear", "--filter", "x"],
        "--filter",
        "runs its benchmarks whole",
    );
}

/// `run -- CMD` names a program the guest has, or a file of the share.
#[test]
fn run_cmd_names_a_program_the_guest_has() {
    refused(
        &["run", "--", "/no/such/cmd"],
        "/no/such/cmd",
        "no such program in the guest",
    );
    let here = env!("CARGO_MANIFEST_DIR");
    let h = host_in(Some(here));
    refused_on(
        &h,
        &["run", "--", "./no-such-file"],
        "./no-such-file",
        "no such file in the shared directory",
    );
    assert_eq!(check_on(&h, &["run", "--", "./Cargo.toml"]), Ok(()));
    assert_eq!(
        check_on(&h, &["run", "--", &format!("{here}/src/main.rs")]),
        Ok(())
    );
    assert_eq!(
        check_on(&h, &["run", "--", "/usr/bin/numactl", "-H"]),
        Ok(())
    );
    assert_eq!(check_on(&h, &["run", "--", "/bin/tk-demo"]), Ok(()));
}

/// What `cargo xtask` itself prints for a refusal: exactly one `error:`
/// line on stderr, nothing on stdout, exit status 2, and nothing built or
/// booted (each answers within seconds). clap's own errors included.
#[test]
fn every_refusal_is_one_line() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let cases: &[&[&str]] = &[
        &["test", "--bogus"],
        &["test", "--ful"],
        &["tset"],
        &["merge"],
        &["module", "--kdir", "/tmp", "--profile", "debug"],
        &["test", "--full", "--full"],
        &["test", "--timeout", "-5"],
        &["test", "--timeout", "99999999999999999999"],
        &["test", "--timeout", "5", "6"],
        &["test", "--kernel", "debian", "--kernel-src", "/tmp"],
        &["test", "--kvm", "--no-kvm"],
        &["test", "--filter", "no-such-test"],
        &["test", "--topology", "foo"],
        &["run", "--cpus", "9"],
        &["run", "--", "/no/such/cmd"],
        &["run", "--"],
        &["bench", "nope"],
        &["bench", "--filter", "x"],
        &["matrix", "--shard", "9/2"],
        &["shell"],
        &["run", "--filter", ""],
        &["test", "--ci", "--topology", "cxl"],
        &["run", "--cxl-online", "kernel"],
        &["test", "--repeat", "-1"],
        &["run", "--dram", "-1G"],
        &["matrix", "--shard", "-1/3"],
        &["test", "--filter", "tk-test-vma,"],
        &["test", "--kunit"],
        &["run", "--kernel", "debian", "--kunit"],
        &["test", "--job", "xtask-cmd"],
        &["test", "--ci", "--job", "xtask-cmd"],
    ];
    // The environment variables xtask reads, set to what cannot work: the
    // refusal names the variable, not only the path or a bare OS error.
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let file_below = format!("{file}/cache");
    let env_cases: &[(&str, &str, &[&str], &str)] = &[
        ("TIERKIT_CACHE", file, &["kernel"], "$TIERKIT_CACHE"),
        ("TIERKIT_CACHE", &file_below, &["build"], "$TIERKIT_CACHE"),
        ("XDG_CACHE_HOME", file, &["run"], "$XDG_CACHE_HOME"),
        (
            "TIERKIT_KERNEL_SRC",
            "/no/such/src",
            &["kernel"],
            "$TIERKIT_KERNEL_SRC",
        ),
        (
            "TIERKIT_KERNEL_SRC",
            env!("CARGO_MANIFEST_DIR"),
            &["run", "--kernel", "debian"],
            "$TIERKIT_KERNEL_SRC",
        ),
    ];
    let all = cases.iter().map(|a| (None, *a, "error: ")).chain(
        env_cases
            .iter()
            .map(|(k, v, a, why)| (Some((*k, *v)), *a, *why)),
    );
    for (env, args, why) in all {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
        cmd.env_remove("TIERKIT_CACHE")
            .env_remove("TIERKIT_KERNEL_SRC");
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(60) {
                let _ = child.kill();
                panic!("{args:?} was not refused: still running after 60 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            out.stdout.is_empty(),
            "{args:?}: stdout {:?}",
            String::from_utf8_lossy(&out.stdout)
        );
        let lines: Vec<&str> = err.lines().collect();
        assert!(
            lines.len() == 1 && lines[0].starts_with("error: "),
            "{env:?} {args:?}: not one error line:\n{err}"
        );
        assert!(
            err.contains(why),
            "{env:?} {args:?}: {err} does not name {why}"
        );
    }
}

/// The examples a refusal suggests: each `cargo xtask ...` command line
/// in backquotes, and each value after `e.g.` put in place of the refused
/// one (`bad`: its index in `args`).
fn suggestions(args: &[&str], bad: usize, refusal: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (i, quoted) in refusal.split('`').enumerate() {
        if let Some(rest) = quoted.strip_prefix("cargo xtask ").filter(|_| i % 2 == 1) {
            out.push(shlex::split(rest).unwrap_or_else(|| panic!("{quoted:?} does not split")));
        }
    }
    for eg in refusal.split("e.g. ").skip(1) {
        let end = eg.find([';', '(', ')']).unwrap_or(eg.len());
        for value in eg[..end].split(" or ").map(str::trim) {
            if value.starts_with('`') {
                continue;
            }
            let value = value.trim_end_matches([',', '.']);
            let value = shlex::split(value)
                .and_then(|v| <[String; 1]>::try_from(v).ok())
                .unwrap_or_else(|| panic!("{args:?}: example {value:?} is not one word"));
            let [value] = value;
            let mut a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            a[bad] = value;
            out.push(a);
        }
    }
    out
}

/// Every example a refusal suggests is accepted by the command it is
/// printed for: misuse of each command, each example run back through
/// the same check.
#[test]
fn every_suggested_example_is_accepted() {
    let cases: &[(&[&str], usize)] = &[
        (&["run", "--filter", ""], 2),
        (&["test", "--filter", ""], 2),
        (&["run", "--filter", "tk-test-vma"], 2),
        (&["run", "--filter", "tierkit_wi*"], 2),
        (&["run", "--filter", "tierkit_wi*,tk-demo"], 2),
        (&["run", "--kunit", "--filter", "nope"], 3),
        (&["test", "--filter", "nope"], 2),
        (&["run", "--filter", "a b"], 2),
        (&["run", "--timeout", "ten"], 2),
        (&["test", "--timeout", "0"], 2),
        (&["run", "--cpu", ""], 2),
        (&["run", "--cpu", "max erms=off"], 2),
        (&["run", "--append", ""], 2),
        (&["run", "--append", "foo=\"bar"], 2),
        (&["run", "--dram", "512M"], 2),
        (&["run", "--cxl-mem", "2T"], 2),
        (&["run", "--topology", "cxl", "--cxl-dev", "3M"], 4),
        (&["run", "--topology", "cxl", "--cxl-dev", "4G:300"], 4),
        (&["run", "--dram-perf", "100"], 2),
        (&["run", "--topology", "cxl", "--cxl-interleave", "x"], 4),
        (&["run", "--", "no-such-cmd"], 2),
        (&["run", "--"], 1),
        (&["test", "--job", "NUMA"], 2),
        (&["lava", "--job", "NUMA"], 2),
        (&["test", "--job", "nope"], 2),
        (&["test", "--job", "xtask-cmd"], 2),
        (&["test", "--ci", "--job", "xtask-cmd"], 3),
        (&["test", "--kernel", "debian", "--job", "xtask-cmd"], 4),
        (&["matrix", "--shard", "x"], 2),
        (&["shell", "--filter", "x"], 2),
        (&["bench", "--filter", "x"], 2),
    ];
    let mut tried = 0;
    for (args, bad) in cases {
        let why = match check_on(&host(BIG), args) {
            Ok(()) => panic!("{args:?} accepted"),
            Err(e) => e,
        };
        for s in suggestions(args, *bad, &why) {
            let s: Vec<&str> = s.iter().map(String::as_str).collect();
            if let Err(e) = check_on(&host(BIG), &s) {
                panic!("{args:?} suggests {s:?}, which is refused: {e}\n(the refusal: {why})");
            }
            tried += 1;
        }
    }
    assert!(tried >= 15, "only {tried} examples found");
}
