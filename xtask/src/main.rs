//! `cargo xtask`: builds Linux with Rust and tierkit, boots it in QEMU with
//! a CPU-less memory node, and reports KUnit and userspace results.
//!
//! Pipeline, one module per stage:
//! [`setup`] (host tools) -> [`kernel`] (source, config, build) ->
//! [`module`] (tierkit.ko) -> [`userspace`] (static guest binaries) ->
//! [`initramfs`] (cpio with `guest/init.sh`) -> [`qemu`] (+ [`topology`]) ->
//! [`verdict`] (markers, [`ktap`]) -> [`report`].

mod bench;
mod console;
mod initramfs;
mod kconfig;
mod kernel;
mod ktap;
mod module;
mod profile;
mod qemu;
mod report;
mod setup;
mod topology;
mod userspace;
mod util;
mod verdict;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use qemu::Mode;
use topology::{CxlDevice, CxlInterleave, Perf, Topology, TopologyKind, TopologyOpts};
use util::{fmt_dur, Timer};

const ABOUT: &str = "Build Linux 7.3 with Rust and the tierkit module, boot it in QEMU with a \
CPU-less memory node, and report the results.";

const AFTER_HELP: &str = "\
The two main commands:
  cargo xtask run     build everything (cached), boot, load tierkit, run the demos
  cargo xtask test    host tests, then boot, KUnit + userspace tests, summary, JSON, JUnit

  cargo xtask test --profile debug           the same on the debug kernel (KASAN, UBSAN,
                                             lockdep, kmemleak, ...; any report fails)
  cargo xtask test --profile default,debug   both, one combined totals line (.ci/run)

Cache: $TIERKIT_CACHE (default ~/.cache/tierkit). Output: target/tierkit/.
A fresh Debian 12 machine needs nothing else: missing tools are installed by
scripts/setup-host.sh on first use.";

#[derive(Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask", about = ABOUT, after_help = AFTER_HELP, version)]
struct Cli {
    /// Show every command xtask runs and, when a guest boots, its whole
    /// console.
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Check the host tools; install what is missing (scripts/setup-host.sh).
    Setup {
        /// Run scripts/setup-host.sh even if nothing seems missing.
        #[arg(long)]
        force: bool,
    },
    /// Fetch, configure and build the kernel (cached); print its KDIR.
    Kernel(KernelArgs),
    /// Build the module against the cached kernel (in module/, copied to
    /// target/tierkit/tierkit-<kernel key>.ko).
    Module(KernelArgs),
    /// Build everything the guest needs (kernel, module, guest binaries,
    /// initramfs) without booting.
    Build(KernelArgs),
    /// The main job: build (cached), boot the default topology, load
    /// tierkit and run the demos (/bin/tk-demo*): weighted placement per
    /// node and a 1 GiB clear per node. KUnit is off unless --kunit.
    Run(RunArgs),
    /// Run all tests: host tests, then boot with KUnit and the userspace
    /// tests (/bin/tk-test-*); print a summary and write JSON and JUnit XML.
    Test(TestArgs),
    /// Boot and run a benchmark (/bin/tk-bench-<name>); its `TIERKIT-JSON`
    /// lines go to target/tierkit/bench/<name>.json. With no name: every
    /// benchmark, one boot per topology (numa, then cxl; `--topology`
    /// picks one), and the report in target/tierkit/report/.
    Bench(BenchArgs),
}

#[derive(Args, Clone)]
struct KernelArgs {
    /// Use this kernel source tree (e.g. a git checkout; it must be clean:
    /// xtask builds out of tree). Default: Debian's linux-source-7.3.
    #[arg(long, value_name = "DIR", env = "TIERKIT_KERNEL_SRC")]
    kernel_src: Option<PathBuf>,
    /// Regenerate the kernel config even if an identical one is remembered.
    #[arg(long)]
    fresh_config: bool,
    /// Kernel configuration. `debug`: a second kernel, built and cached
    /// beside the default one, with kconfig/debug/*.config on top (KASAN,
    /// UBSAN, lockdep, kmemleak, DEBUG_VM/LIST/OBJECTS, soft-lockup,
    /// hung-task and RCU-stall detectors); the module is built with
    /// CLIPPY=1 and warnings as errors; the guest boots with panic_on_warn=1
    /// and short hang timeouts, and runs a kmemleak scan after rmmod. Any
    /// KASAN, UBSAN, lockdep, kmemleak, lockup, stall, BUG or WARNING
    /// report fails the run. Output goes to
    /// target/tierkit/<mode>-<topology>-debug/. `test`, `kernel`, `module`
    /// and `build` take several (`--profile default,debug`: one after the
    /// other, with one combined totals line for `test`).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        value_name = "PROFILE",
        default_value = "default"
    )]
    profile: Vec<profile::Profile>,
}

impl KernelArgs {
    /// The profiles asked for, in order, each once.
    fn profiles(&self) -> Vec<profile::Profile> {
        let mut v: Vec<profile::Profile> = Vec::new();
        for p in &self.profile {
            if !v.contains(p) {
                v.push(*p);
            }
        }
        if v.is_empty() {
            v.push(profile::Profile::Default);
        }
        v
    }

    /// The one profile of a command that boots once (`run`, `bench`).
    fn single_profile(&self, cmd: &str) -> Result<profile::Profile> {
        match self.profiles()[..] {
            [p] => Ok(p),
            ref many => anyhow::bail!(
                "`cargo xtask {cmd}` boots one kernel: give one --profile, not {}",
                many.iter().map(|p| p.name()).collect::<Vec<_>>().join(",")
            ),
        }
    }
}

#[derive(Args, Clone)]
struct GuestArgs {
    #[command(flatten)]
    kernel: KernelArgs,
    /// Guest NUMA topology [default: numa; `test`: numa, then cxl].
    #[arg(long, value_enum)]
    topology: Option<TopologyKind>,
    /// Guest CPUs in total (numa2 splits them over its two CPU nodes).
    /// At most 8: kconfig/base.config sets CONFIG_NR_CPUS=8, and the guest
    /// would silently ignore the rest.
    #[arg(long, default_value_t = 2, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=8))]
    cpus: u32,
    /// DRAM per CPU node, in whole GiB [default: 8G]. q35 splits RAM around
    /// the PCI hole below 4 GiB, early kernel allocations and the memmap sit
    /// in node 0, the CXL node's memmap too (64 MiB per 4 GiB, allocated on
    /// node 0 at hot-add), and the tests leave unmovable pages behind: 6 GiB
    /// once left no free, naturally aligned GiB for the gigantic tests.
    #[arg(long, value_parser = util::parse_gib, value_name = "SIZE")]
    dram: Option<u32>,
    /// Size of the memory-only node of numa and numa2, in whole GiB.
    #[arg(long, default_value = "3G", value_parser = util::parse_gib, value_name = "SIZE")]
    cxl_mem: u32,
    /// A CXL type-3 device of --topology cxl: whole GiB, optionally with
    /// the HMAT latency (ns) and bandwidth (GB/s) of its generic port, e.g.
    /// `4G` or `2G:300:5G`. Repeatable or comma-separated (`4G,2G`).
    /// [default: one 4G:250:10G]
    #[arg(long, alias = "cxl-devs", value_delimiter = ',', value_parser = CxlDevice::parse, value_name = "SIZE[:NS:GBS]")]
    cxl_dev: Vec<CxlDevice>,
    /// Interleave each CXL region of --topology cxl across WAYS devices
    /// behind one host bridge (one root port each), with GRANULARITY bytes
    /// (256 to 16384, power of two, e.g. `4K`; default 256) per device in
    /// turn: `2`, `2:256`, `2:4096`. WAYS is 1 or 2; the --cxl-dev devices
    /// (default: WAYS of 4/WAYS GiB, a 4 GiB region) are grouped in order,
    /// WAYS per region, of one size and performance each.
    /// [default: 1, a region per device]
    #[arg(long, value_parser = CxlInterleave::parse, value_name = "WAYS[:GRAN]")]
    cxl_interleave: Option<CxlInterleave>,
    /// HMAT latency (ns) and bandwidth (GB/s) of a CPU node's own DRAM,
    /// e.g. `100:20G` [default: numa, numa2: 100:200G; cxl: 100:20G].
    #[arg(long, value_parser = Perf::parse, value_name = "NS:GBS")]
    dram_perf: Option<Perf>,
    /// QEMU CPU model (`-cpu`), e.g. `max` or `max,erms=off`
    /// [default: max; cxl: max,erms=off,fsrm=off,fsrs=off].
    #[arg(long = "cpu", value_name = "MODEL")]
    cpu_model: Option<String>,
    /// Use KVM even if it does not look usable.
    #[arg(long, overrides_with = "no_kvm")]
    kvm: bool,
    /// Never use KVM (TCG).
    #[arg(long)]
    no_kvm: bool,
    /// Kill the guest after this many seconds [default: 600; bench: 1800;
    /// four times that with cxl].
    #[arg(long, value_name = "SECS")]
    timeout: Option<u64>,
    /// Only run matching tests: `kunit.filter_glob=GLOB` for KUnit
    /// (`suite` or `suite.test`), and a shell glob on userspace test names.
    #[arg(long, value_name = "GLOB")]
    filter: Option<String>,
    /// Extra kernel command line parameters (repeatable).
    #[arg(long, value_name = "ARGS")]
    append: Vec<String>,
    /// How the CXL node's memory is onlined (`memhp_default_state=`):
    /// `movable` (ZONE_MOVABLE, as real systems do, so it can be offlined
    /// again) or `kernel` (ZONE_NORMAL).
    #[arg(long, value_enum, default_value_t = qemu::CxlOnline::Movable, value_name = "ZONE")]
    cxl_online: qemu::CxlOnline,
}

#[derive(Args, Clone)]
struct RunArgs {
    #[command(flatten)]
    guest: GuestArgs,
    /// Also run the module's KUnit suites at insmod (`cargo xtask test`
    /// always does; they take a while under TCG).
    #[arg(long)]
    kunit: bool,
}

#[derive(Args, Clone)]
struct TestArgs {
    #[command(flatten)]
    guest: GuestArgs,
    /// Skip the host tests (`cargo test --workspace`).
    #[arg(long)]
    no_host_tests: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum BenchKind {
    /// Parallel gigantic-page clearing (/bin/tk-bench-clear).
    Clear,
    /// Weighted-interleave placement (/bin/tk-bench-wi).
    Wi,
}

#[derive(Args, Clone)]
struct BenchArgs {
    /// One benchmark; none: all of them and the report.
    #[arg(value_enum)]
    which: Option<BenchKind>,
    #[command(flatten)]
    guest: GuestArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    util::set_verbose(cli.verbose);
    util::setup_llvm_path();
    let is_test = matches!(cli.cmd, Cmd::Test(_));
    match real_main(cli) {
        Ok(code) => code,
        Err(e) => {
            // Not `{:?}`: with RUST_BACKTRACE set that adds xtask's own backtrace.
            eprintln!("\nerror: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            if is_test {
                // CI reads this line; a build or boot error is a failure too.
                println!(
                    "{}",
                    report::Totals {
                        passed: 0,
                        failed: 1,
                        skipped: 0
                    }
                );
            }
            ExitCode::FAILURE
        }
    }
}

fn real_main(cli: Cli) -> Result<ExitCode> {
    match cli.cmd {
        Cmd::Setup { force } => setup::cmd_setup(force).map(|_| ExitCode::SUCCESS),
        Cmd::Kernel(k) => {
            setup::ensure()?;
            for p in k.profiles() {
                kernel::cmd_kernel(k.kernel_src.as_deref(), k.fresh_config, p)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Module(k) => {
            setup::ensure()?;
            for p in k.profiles() {
                let kb = kernel::ensure(k.kernel_src.as_deref(), k.fresh_config, p)?;
                let m = module::build(&kb)?;
                say!("module ({p} profile): {}", m.ko.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Build(k) => {
            setup::ensure()?;
            for p in k.profiles() {
                let b = build_all(&k, p, &util::out_dir())?;
                say!(
                    "initramfs ({p} profile): {} ({} KiB)",
                    b.initramfs.path.display(),
                    b.initramfs.size / 1024
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Run(r) => {
            let kind = r.guest.topology.unwrap_or(TopologyKind::Numa);
            let p = r.guest.kernel.single_profile("run")?;
            guest_cmd(Mode::Run, &r.guest, p, kind, r.kunit, None, None).map(|g| g.exit())
        }
        Cmd::Test(t) => {
            setup::ensure()?;
            let host = if t.no_host_tests {
                None
            } else {
                Some(host_tests()?)
            };
            let profiles = t.guest.kernel.profiles();
            match (t.guest.topology, &profiles[..]) {
                (Some(kind), [p]) => {
                    guest_cmd(Mode::Test, &t.guest, *p, kind, true, host, None).map(|g| g.exit())
                }
                (Some(kind), _) => test_all(&t.guest, host, &profiles, &[kind]),
                (None, _) => test_all(&t.guest, host, &profiles, &TEST_TOPOLOGIES),
            }
        }
        Cmd::Bench(b) => {
            let Some(which) = b.which else {
                return bench::run_all(&b.guest);
            };
            let name = match which {
                BenchKind::Clear => "clear",
                BenchKind::Wi => "wi",
            };
            let kind = b.guest.topology.unwrap_or(TopologyKind::Numa);
            let p = b.guest.kernel.single_profile("bench")?;
            guest_cmd(
                Mode::Bench(name.into()),
                &b.guest,
                p,
                kind,
                false,
                None,
                None,
            )
            .map(|g| g.exit())
        }
    }
}

/// Everything built for a boot.
struct Built {
    kernel: kernel::KernelBuild,
    initramfs: initramfs::Initramfs,
    times: Vec<(&'static str, Duration)>,
}

/// Builds everything for `profile`; the initramfs goes to `dir`.
fn build_all(k: &KernelArgs, profile: profile::Profile, dir: &Path) -> Result<Built> {
    let mut times = Vec::new();
    let t = Timer::start();
    let kb = kernel::ensure(k.kernel_src.as_deref(), k.fresh_config, profile)?;
    times.push(("kernel", t.elapsed()));
    let t = Timer::start();
    let m = module::build(&kb)?;
    times.push(("module", t.elapsed()));
    let t = Timer::start();
    let bins = userspace::build()?;
    times.push(("guest binaries", t.elapsed()));
    let t = Timer::start();
    let info = format!(
        "kernel {} (config {}, source {}), guest binaries: {}",
        kb.key,
        kb.config_hash,
        kb.src.display(),
        bins.iter()
            .map(|b| b.name.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    );
    std::fs::create_dir_all(dir)?;
    let ir = initramfs::build(dir, &info, &m, &bins)?;
    times.push(("initramfs", t.elapsed()));
    Ok(Built {
        kernel: kb,
        initramfs: ir,
        times,
    })
}

/// Host tests: `cargo test --workspace` (the core crate's property tests,
/// the KTAP parser, xtask's own unit tests, ...).
fn host_tests() -> Result<(bool, Duration)> {
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

/// The topologies `cargo xtask test` runs without `--topology`.
const TEST_TOPOLOGIES: [TopologyKind; 2] = [TopologyKind::Numa, TopologyKind::Cxl];

/// The label of one boot of a `test` over several topologies or profiles:
/// `numa`, `cxl` (default profile), `debug numa`, `debug cxl`.
fn run_label(profile: profile::Profile, kind: TopologyKind) -> String {
    match profile {
        profile::Profile::Default => kind.to_string(),
        p => format!("{p} {kind}"),
    }
}

/// `cargo xtask test` over several boots: each profile (in the order given)
/// on each topology (numa, then cxl, without `--topology`); a summary per
/// boot, then one line per boot and the combined totals line last.
fn test_all(
    g: &GuestArgs,
    host: Option<(bool, Duration)>,
    profiles: &[profile::Profile],
    topologies: &[TopologyKind],
) -> Result<ExitCode> {
    let runs: Vec<(profile::Profile, TopologyKind)> = profiles
        .iter()
        .flat_map(|&p| topologies.iter().map(move |&k| (p, k)))
        .collect();
    let mut results: Vec<(String, GuestResult)> = Vec::new();
    for (i, &(profile, kind)) in runs.iter().enumerate() {
        println!();
        say!(
            "===== topology {kind}, {profile} profile ({}/{}) =====",
            i + 1,
            runs.len()
        );
        // Host tests count once, with the first boot.
        let h = if i == 0 { host } else { None };
        let label = run_label(profile, kind);
        let r = match guest_cmd(Mode::Test, g, profile, kind, true, h, Some(&label)) {
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
    println!();
    let mut all = report::Totals::default();
    for (label, r) in &results {
        let t = r.totals.unwrap_or_default();
        all = all.add(t);
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

/// What one boot came to.
struct GuestResult {
    ok: bool,
    /// KUnit plus userspace totals (`test`, `run --kunit`).
    totals: Option<report::Totals>,
    /// Wall time of the boot.
    boot: Option<Duration>,
    /// Seconds /init spent assembling and onlining CXL regions.
    cxl_setup: Option<f64>,
}

impl GuestResult {
    fn exit(&self) -> ExitCode {
        if self.ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }
}

/// Boots `kind` once in `mode` with the kernel of `profile` and reports.
/// `label`: one of several boots of one `test` (its totals line says which).
fn guest_cmd(
    mode: Mode,
    g: &GuestArgs,
    profile: profile::Profile,
    kind: TopologyKind,
    kunit: bool,
    host: Option<(bool, Duration)>,
    label: Option<&str>,
) -> Result<GuestResult> {
    setup::ensure()?;
    let total = Timer::start();
    let topo = Topology::new(&TopologyOpts {
        kind,
        cpus: g.cpus,
        dram_gib: g.dram.unwrap_or(topology::default_dram_gib(kind)),
        slow_gib: g.cxl_mem,
        // `test` without --topology: the CXL devices are cxl's.
        cxl_devs: if kind == TopologyKind::Cxl || g.topology.is_some() {
            g.cxl_dev.clone()
        } else {
            vec![]
        },
        cxl_interleave: g
            .cxl_interleave
            .filter(|_| kind == TopologyKind::Cxl || g.topology.is_some()),
        dram_perf: g.dram_perf,
    })?;
    for (i, gib) in topo.cxl_region_gib().into_iter().enumerate() {
        if gib < 2 {
            say!("note: CXL region {i} is {gib} GiB: QEMU puts CXL windows 256 MiB past a GiB boundary, so its node holds no aligned GiB and 1 GiB gigantic pages (tierkit_clear_gigantic, tk-test-gigantic) cannot be placed there; use 2G or more");
        }
    }
    let accel = qemu::choose_accel(if g.kvm {
        Some(true)
    } else if g.no_kvm {
        Some(false)
    } else {
        None
    });
    let mut default_timeout = if matches!(mode, Mode::Bench(_)) {
        1800
    } else {
        600
    };
    if kind == TopologyKind::Cxl {
        // QEMU emulates CXL memory access by access: every test that fills
        // or clears GiBs on the CXL node is some 100 times slower there.
        default_timeout *= 4;
    }
    // KASAN, lockdep and kmemleak slow the guest down several times.
    default_timeout *= profile.timeout_factor();
    let cfg = qemu::GuestConfig {
        topology: topo,
        cpu_model: g
            .cpu_model
            .clone()
            .unwrap_or_else(|| topology::default_cpu_model(kind).to_string()),
        accel,
        mode: mode.clone(),
        kunit,
        filter: g.filter.clone(),
        append: g.append.clone(),
        timeout: Duration::from_secs(g.timeout.unwrap_or(default_timeout)),
        profile,
        cxl_online: g.cxl_online,
    };
    let run_dir = util::out_dir().join(format!("{}-{}{}", mode.as_param(), kind, profile.suffix()));
    std::fs::create_dir_all(&run_dir)?;
    // Two boots of the same mode and topology would write the same logs.
    let _run_lock = util::lock(&run_dir.join(".lock"), "this run directory")?;
    for stale in [
        "console.log",
        "data.log",
        "results.json",
        "junit.xml",
        "qemu-stderr.log",
    ] {
        let _ = std::fs::remove_file(run_dir.join(stale));
    }
    let b = build_all(&g.kernel, profile, &run_dir)?;
    say!(
        "booting {} with {} ({:?}, -cpu {}), mode {}, {} profile",
        kind,
        cfg.topology.describe(),
        accel,
        cfg.cpu_model,
        mode.as_param(),
        profile
    );
    say!("console log: {}", run_dir.join("console.log").display());
    let mut streamer = qemu::Streamer::new(util::verbose(), !matches!(mode, Mode::Test));
    let t = Timer::start();
    let guest = qemu::boot(&b.kernel, &b.initramfs, &cfg, &run_dir, &mut streamer)?;
    let boot_time = t.elapsed();
    let mut outcome = verdict::evaluate(&guest, kunit, g.filter.as_deref(), profile);
    if let Some((false, _)) = host {
        let msg = format!(
            "host tests failed (see {})",
            util::out_dir().join("host-tests.log").display()
        );
        outcome.reasons.push(msg.clone());
        outcome.user_tests.push(report::UserTest {
            name: "[harness] host tests".into(),
            passed: false,
            skipped: false,
            rc: 1,
            output_tail: msg,
            duration_ms: 0,
        });
    }

    let mut times = b.times.clone();
    if let Some((_, d)) = host {
        times.insert(0, ("host tests", d));
    }
    times.push(("boot", boot_time));
    let timing: Vec<String> = times
        .iter()
        .map(|(n, d)| format!("{n} {}", fmt_dur(*d)))
        .collect();

    println!();
    if !guest.qemu_stderr.trim().is_empty() && util::verbose() {
        say!("QEMU stderr: {}", guest.qemu_stderr.trim());
    }
    say!("console: {}", guest.console_log.display());
    print_guest_view(kind, &outcome.markers);
    let result = |totals| GuestResult {
        ok: outcome.ok(),
        totals,
        boot: Some(boot_time),
        cxl_setup: outcome.markers.cxl_setup_secs(),
    };
    if let Mode::Bench(name) = &mode {
        write_bench(name, &cfg, &outcome, &guest.data_log)?;
        bench::report(name);
    }
    if !kunit {
        // Demos and benchmarks: their exit codes, crashes, the protocol.
        say!(
            "time: {} (total {})",
            timing.join(", "),
            fmt_dur(total.elapsed())
        );
        for p in &outcome.markers.progs {
            let rc =
                p.rc.map(|r| r.to_string())
                    .unwrap_or_else(|| "none (did not finish)".into());
            say!("{} {}: rc={rc}", p.kind.to_lowercase(), p.name);
        }
        for r in &outcome.reasons {
            say!("FAIL: {r}");
        }
        let status = if outcome.ok() { "ok" } else { "FAILED" };
        println!("tierkit {}: {status}", mode.as_param().replace('-', " "));
        return Ok(result(None));
    }
    let results = run_dir.join("results.json");
    let junit = run_dir.join("junit.xml");
    report::write_json(&results, &outcome.run, &outcome.user_tests)?;
    report::write_junit(
        &junit,
        &format!("tierkit-{kind}"),
        &outcome.run,
        &outcome.user_tests,
    )?;
    say!("results: {} and {}", results.display(), junit.display());
    say!(
        "time: {} (total {})",
        timing.join(", "),
        fmt_dur(total.elapsed())
    );
    if !outcome.ok() {
        // Reasons that the summary's tables do not show on their own.
        for r in &outcome.reasons {
            if r.lines().count() <= 2 {
                say!("FAIL: {r}");
            }
        }
    }
    println!();
    match label {
        Some(l) => report::print_summary_labelled(&outcome.run, &outcome.user_tests, l),
        None => report::print_summary(&outcome.run, &outcome.user_tests),
    }
    Ok(result(Some(report::Totals::of(
        &outcome.run,
        &outcome.user_tests,
    ))))
}

/// What the guest kernel saw (its `TIERKIT-TOPO` lines: nodes, memory,
/// CPUs, access0/access1 performance, CXL regions, weighted-interleave
/// weights), and how long the CXL regions took to come online.
fn print_guest_view(kind: TopologyKind, m: &verdict::Markers) {
    if m.topology.is_empty() {
        return;
    }
    say!("guest view ({kind}):");
    for l in &m.topology {
        println!("  {l}");
    }
    if let Some(s) = m.cxl_setup_secs() {
        println!("  CXL setup (enumerate, assemble, commit, online): {s:.1} s in the guest");
    }
}

/// Collects the `TIERKIT-JSON` lines of the bench programs into
/// `target/tierkit/bench/<name>.json`.
fn write_bench(
    name: &str,
    cfg: &qemu::GuestConfig,
    o: &verdict::Outcome,
    data_log: &Path,
) -> Result<()> {
    let results: Vec<&serde_json::Value> =
        o.markers.progs.iter().flat_map(|p| p.json.iter()).collect();
    let doc = serde_json::json!({
        "bench": name,
        "topology": cfg.topology.kind.to_string(),
        "topology_detail": cfg.topology.describe(),
        "guest_topology": o.markers.topology,
        "cpu_model": cfg.cpu_model,
        "accel": format!("{:?}", cfg.accel),
        "programs": o.markers.progs.iter().map(|p| serde_json::json!({"name": p.name, "rc": p.rc})).collect::<Vec<_>>(),
        "results": results,
    });
    let dir = util::out_dir().join("bench");
    let path = dir.join(format!("{name}.json"));
    util::write_atomic(&path, serde_json::to_string_pretty(&doc)?.as_bytes())?;
    say!(
        "bench results: {} ({} JSON records; raw output in {})",
        path.display(),
        results.len(),
        data_log.display()
    );
    Ok(())
}
