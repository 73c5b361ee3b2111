//! One guest boot: build what it needs (cached), boot it, judge it, report.
//! `run`, `test`, `bench` and `matrix --shard` each describe their boots
//! as [`BootRequest`]s: one self-contained value per boot, made from the
//! command's [`GuestFlags`], then planned (`plan`) into the QEMU stage's
//! [`qemu::GuestConfig`] and booted (`run`).

use anyhow::{bail, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::kernels::profile::{KernelKind, Profile};
use crate::plan::runs;
use crate::plan::topology::{CxlDevice, CxlInterleave, Perf, Topology, TopologyKind, TopologyOpts};
use crate::util::validate::Host;
use crate::util::{self, fmt_dur, Timer};
use crate::{
    judge::verdict, kernels::kconfig, kernels::kernel, report::bench, report::summary, say,
    util::setup,
};
use qemu::{CxlOnline, Mode};

mod build;
pub mod qemu;
mod results;

pub use crate::kernels::kernel::KernelRequest;
pub(crate) use build::{build_all, Built};
pub(crate) use results::no_kunit_line;

/// `--timeout`'s default, seconds, of `run`, `run -- CMD` and `test`,
/// times the topology's and the profile's factor.
pub const TIMEOUT_SECS: u64 = 600;
/// `--timeout`'s default of `bench`, seconds (times the same factors).
pub const BENCH_TIMEOUT_SECS: u64 = 1800;
/// `--cpus`'s default.
pub const DEFAULT_CPUS: u32 = 2;

/// The guest flags of one command (`run`, `shell`, `test`, `bench`) as
/// given: what each of its boots is made from. [`Default`]: no flag given.
#[derive(Clone, Debug)]
pub struct GuestFlags {
    /// `--kernel-src`.
    pub kernel_src: Option<PathBuf>,
    /// `--fresh-config`.
    pub fresh_config: bool,
    /// `--kernel`.
    pub kernel_kind: KernelKind,
    /// `--topology`; `None`: the command's own (numa, or `test`'s runs).
    pub topology: Option<TopologyKind>,
    pub cpus: u32,
    /// `--dram`, GiB per CPU node; `None`: the topology's.
    pub dram: Option<u32>,
    /// `--cxl-mem`, GiB; `None`: 3 GiB.
    pub cxl_mem: Option<u32>,
    pub cxl_dev: Vec<CxlDevice>,
    pub cxl_interleave: Option<CxlInterleave>,
    pub dram_perf: Option<Perf>,
    /// `--cpu`; `None`: the topology's model.
    pub cpu_model: Option<String>,
    /// `--kvm` (`Some(true)`) or `--no-kvm` (`Some(false)`).
    pub kvm: Option<bool>,
    /// `--timeout`, seconds.
    pub timeout: Option<u64>,
    /// `--filter`.
    pub filter: Option<String>,
    /// `--append`'s words.
    pub append: Vec<String>,
    /// `--cxl-online`.
    pub cxl_online: Option<CxlOnline>,
}

impl Default for GuestFlags {
    fn default() -> GuestFlags {
        GuestFlags {
            kernel_src: None,
            fresh_config: false,
            kernel_kind: KernelKind::Tierkit,
            topology: None,
            cpus: DEFAULT_CPUS,
            dram: None,
            cxl_mem: None,
            cxl_dev: Vec::new(),
            cxl_interleave: None,
            dram_perf: None,
            cpu_model: None,
            kvm: None,
            timeout: None,
            filter: None,
            append: Vec::new(),
            cxl_online: None,
        }
    }
}

impl GuestFlags {
    /// The kernel of `profile` on `--kernel`'s kernel.
    pub fn kernel(&self, profile: Profile) -> KernelRequest {
        KernelRequest {
            src: self.kernel_src.clone(),
            fresh_config: self.fresh_config,
            profile,
            kind: self.kernel_kind,
        }
    }
}

/// One boot as asked: what `run`, `test` and `bench` hand to `boot::run`.
/// Every value the boot needs is here, resolved, once: each stage's part
/// is its own type ([`KernelRequest`] the build's, [`TopologyOpts`] the
/// topology's, [`qemu::GuestJob`] QEMU's and the guest's).
#[derive(Clone, Debug)]
pub struct BootRequest {
    /// The kernel it boots (profile, whose kernel, its source).
    pub kernel: KernelRequest,
    /// The guest's topology, defaults applied: the topology stage's input.
    pub topology: TopologyOpts,
    /// What the guest does (mode, KUnit, filter, command line) and how
    /// QEMU runs it (CPU model, timeout).
    pub job: qemu::GuestJob,
    /// `--kvm` / `--no-kvm`.
    pub kvm: Option<bool>,
    /// Host-test outcome and time, reported with this boot.
    pub host: Option<(bool, Duration)>,
    /// One of several boots of one `test`: its name (totals line); `None`:
    /// the topology's.
    pub label: Option<String>,
    /// The run directory's name after `<mode>-`; `None`: the topology's.
    pub dir_name: Option<&'static str>,
}

/// The parts of a boot that differ between the boots of one command.
struct Shape<'a> {
    mode: Mode,
    profile: Profile,
    kernel: KernelKind,
    kind: TopologyKind,
    kunit: bool,
    /// A topology the command picked itself (`test`, `bench` without
    /// `--topology`): `--cxl-dev` and `--cxl-interleave` apply to its cxl
    /// boots only. Otherwise the topology is the user's, and they need it
    /// to be cxl.
    cxl_opts_on_cxl_only: bool,
    run: Option<&'a runs::TestRun>,
    /// Kernel command-line words before the run's and `--append`'s.
    append_first: &'a [&'a str],
}

impl BootRequest {
    /// A boot of `kind` with the command line's `--filter` and
    /// `--cxl-online` (default movable).
    pub fn new(
        f: &GuestFlags,
        mode: Mode,
        profile: Profile,
        kind: TopologyKind,
        kunit: bool,
    ) -> Result<BootRequest> {
        BootRequest::make(
            f,
            Shape {
                mode,
                profile,
                kernel: f.kernel_kind,
                kind,
                kunit,
                cxl_opts_on_cxl_only: false,
                run: None,
                append_first: &[],
            },
        )
    }

    /// `shell`'s boot; `quiet` (no `-v`): the console shows warnings and
    /// worse only, as it is the person's terminal.
    pub fn shell(
        f: &GuestFlags,
        profile: Profile,
        kind: TopologyKind,
        quiet: bool,
    ) -> Result<BootRequest> {
        let quiet: &[&str] = if quiet { &["loglevel=4"] } else { &[] };
        BootRequest::make(
            f,
            Shape {
                mode: Mode::Shell,
                profile,
                kernel: f.kernel_kind,
                kind,
                kunit: false,
                cxl_opts_on_cxl_only: false,
                run: None,
                append_first: quiet,
            },
        )
    }

    /// `bench` without a name on `kind` (default profile), one of the
    /// topologies it picks itself unless `--topology` was given.
    pub fn bench_all(f: &GuestFlags, kind: TopologyKind) -> Result<BootRequest> {
        BootRequest::make(
            f,
            Shape {
                mode: Mode::Bench(bench::ALL.into()),
                profile: Profile::Default,
                kernel: f.kernel_kind,
                kind,
                kunit: false,
                cxl_opts_on_cxl_only: f.topology.is_none(),
                run: None,
                append_first: &[],
            },
        )
    }

    /// The boot of one [`runs::TestRun`] on `kernel`'s kernel; `--filter`
    /// overrides its own selection, `--cxl-online` its zone only where the
    /// run leaves it open.
    pub fn for_run(
        f: &GuestFlags,
        profile: Profile,
        kernel: KernelKind,
        run: &runs::TestRun,
    ) -> Result<BootRequest> {
        BootRequest::make(
            f,
            Shape {
                mode: Mode::Test,
                profile,
                kernel,
                kind: run.kind,
                kunit: true,
                cxl_opts_on_cxl_only: f.topology.is_none(),
                run: Some(run),
                append_first: &[],
            },
        )
    }

    fn make(f: &GuestFlags, s: Shape) -> Result<BootRequest> {
        let kind = s.kind;
        let spec = kind.spec();
        if f.cxl_mem.is_some() && spec.mem_nodes == 0 && !s.cxl_opts_on_cxl_only {
            bail!(
                "--cxl-mem sizes the memory-only node of numa and numa2; --topology {kind} has none (its CXL memory is --cxl-dev)"
            );
        }
        let run = s.run;
        let cxl_interleave = run.and_then(|r| r.cxl_interleave).or(f.cxl_interleave);
        // `test` or `bench` without --topology: the CXL devices are cxl's.
        let cxl_opts = spec.cxl || !s.cxl_opts_on_cxl_only;
        let mut cpu_model = f
            .cpu_model
            .clone()
            .unwrap_or_else(|| spec.cpu_model.to_string());
        if spec.cxl && !cpu_model.contains("hypervisor=") {
            cpu_model.push_str(s.kernel.cxl_cpu_flags());
        }
        let mut timeout = if matches!(s.mode, Mode::Bench(_)) {
            BENCH_TIMEOUT_SECS
        } else {
            TIMEOUT_SECS
        };
        // KASAN, lockdep and kmemleak slow the guest down several times.
        let slower = spec.timeout_factor * s.profile.timeout_factor();
        timeout *= slower;
        let filter = match (&f.filter, run.and_then(|r| r.only)) {
            (None, Some(sel)) => sel.filter(),
            _ => runs::Filter::both(f.filter.as_deref()),
        };
        let debug_append = match run {
            Some(r) if s.profile == Profile::Debug => r.debug_append,
            _ => "",
        };
        let append = s
            .append_first
            .iter()
            .copied()
            .chain(run.map_or("", |r| r.append).split_whitespace())
            .chain(debug_append.split_whitespace())
            .map(str::to_string)
            .chain(f.append.iter().cloned())
            .collect();
        Ok(BootRequest {
            topology: TopologyOpts {
                kind,
                cpus: f.cpus,
                dram_gib: f.dram.unwrap_or(spec.dram_gib),
                slow_gib: f.cxl_mem.unwrap_or(spec.mem_gib),
                cxl_devs: if cxl_opts { f.cxl_dev.clone() } else { vec![] },
                cxl_interleave: cxl_interleave.filter(|_| cxl_opts),
                dram_perf: f.dram_perf,
                mem_hotplug: s.kernel.acpi_memory_hotplug(),
            },
            kernel: KernelRequest {
                kind: s.kernel,
                ..f.kernel(s.profile)
            },
            job: qemu::GuestJob {
                mode: s.mode,
                // Debian's kernel has no KUnit: its suites cannot run there.
                kunit: s.kunit && s.kernel.has_kunit(),
                filter,
                append,
                cxl_online: run
                    .and_then(|r| r.cxl_online)
                    .or(f.cxl_online)
                    .unwrap_or(CxlOnline::Movable),
                cpu_model,
                timeout: Duration::from_secs(f.timeout.unwrap_or(timeout)),
                deadline_scale: slower,
            },
            kvm: f.kvm,
            host: None,
            label: None,
            dir_name: run.map(|r| r.name),
        })
    }

    /// The topology it boots.
    pub fn kind(&self) -> TopologyKind {
        self.topology.kind
    }

    /// Its run directory, `target/tierkit/<mode>-<name><profile><kernel>`.
    pub fn run_dir(&self) -> PathBuf {
        util::out_dir().join(format!(
            "{}-{}{}{}",
            self.job.mode.as_param(),
            self.dir_name.unwrap_or(self.kind().name()),
            self.kernel.profile.suffix(),
            self.kernel.kind.suffix()
        ))
    }
}

/// What one boot came to (as JSON: a boot of `test --lanes`' second lane,
/// [`crate::commands::test::lanes`]).
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct GuestResult {
    pub(crate) ok: bool,
    /// KUnit plus userspace totals (`test`, `run --kunit`).
    pub(crate) totals: Option<summary::Totals>,
    /// Wall time of the boot.
    pub(crate) boot: Option<Duration>,
    /// Seconds /init spent assembling and onlining CXL regions.
    pub(crate) cxl_setup: Option<f64>,
    /// Where its results are (`test`: results.json, junit.xml, kcidb.json).
    pub(crate) run_dir: Option<PathBuf>,
    /// Why it could not be built or booted.
    pub(crate) error: Option<String>,
    /// Why a report of it could not be written or is not valid (KCIDB):
    /// the report's own problem, which fails the command but leaves the
    /// verdict and its totals as the judge made them.
    pub(crate) report_problem: Option<String>,
    /// Its steps and their times (`host tests`, `kernel`, `module`,
    /// `guest binaries`, `initramfs`, `guest`), for the time table.
    pub(crate) phases: Vec<(String, Duration)>,
    /// Its tests that took longest ([`crate::report::timings::slow_tests`]).
    pub(crate) slow_tests: Vec<(String, Duration)>,
    /// Its guest's phases ([`crate::report::timings::guest_parts`]).
    pub(crate) guest_parts: Vec<(String, Duration)>,
}

impl GuestResult {
    /// A boot that could not be built or booted: one failure, `error`.
    pub(crate) fn failed(error: String) -> GuestResult {
        GuestResult {
            ok: false,
            totals: Some(summary::Totals::ONE_FAILURE),
            boot: None,
            cxl_setup: None,
            run_dir: None,
            error: Some(error),
            report_problem: None,
            phases: Vec::new(),
            slow_tests: Vec::new(),
            guest_parts: Vec::new(),
        }
    }
}

impl GuestResult {
    pub(crate) fn exit(&self) -> ExitCode {
        if self.ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }
}

/// The boot `req` asks for, worked out without building or booting
/// anything: its topology and QEMU configuration (with `accel`). `cargo
/// xtask` calls it through [`check`] for every boot of a command before
/// any work, and [`run`] for the boot itself.
pub(crate) fn plan(req: &BootRequest, accel: qemu::Accel) -> Result<qemu::GuestConfig> {
    Ok(qemu::GuestConfig {
        topology: Topology::new(&req.topology)?,
        accel,
        kernel: req.kernel.clone(),
        job: req.job.clone(),
        extra_args: Vec::new(),
    })
}

/// Refuses, in one line, a boot that cannot work as asked: what
/// [`plan`] refuses (the topology's rules), a kernel command line that
/// cannot carry `--filter` and `--append`, and a guest bigger than the
/// host's memory (`MemTotal`). Builds and boots nothing.
pub(crate) fn check(req: &BootRequest, host: &Host) -> Result<()> {
    let cfg = plan(req, qemu::Accel::Tcg)?;
    qemu::kernel_cmdline(&cfg)?;
    check_memory(&cfg.topology, host)
}

/// A guest that the host cannot hold at all is refused; one that leaves
/// it little room gets a warning at boot (`MemAvailable`, [`run`]).
fn check_memory(t: &Topology, host: &Host) -> Result<()> {
    let Some(total) = host.mem_total_gib else {
        return Ok(());
    };
    let guest = t.total_mem_gib() + t.cxl_gib();
    if guest <= total {
        return Ok(());
    }
    // Name the flag that asks for the most.
    let dram = t.dram_gib();
    let slow = t.mem_node_gib();
    let cxl = t.cxl_gib();
    let flag = if dram >= slow && dram >= cxl {
        format!("--dram {}G", t.cpu_nodes.first().map_or(0, |n| n.dram_gib))
    } else if slow >= cxl {
        format!(
            "--cxl-mem {}G",
            t.mem_nodes.first().map_or(0, |n| n.size_gib)
        )
    } else {
        format!(
            "--cxl-dev {}",
            t.cxl
                .iter()
                .map(|d| format!("{}G", d.size_gib))
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    bail!(
        "{flag}: the {} guest would have {guest} GiB of memory ({dram} GiB DRAM on {} node(s), \
         {slow} GiB on memory-only nodes, {cxl} GiB CXL), more than this host's {total} GiB \
         (MemTotal in /proc/meminfo)",
        t.kind,
        t.cpu_nodes.len()
    )
}

/// Notes on a topology that will boot but not as one may expect: a CXL
/// region too small for a gigantic page, a host short of memory.
fn warn_about(topo: &Topology) {
    for (i, gib) in topo.cxl_region_gib().into_iter().enumerate() {
        if gib < 2 {
            say!("note: CXL region {i} is {gib} GiB: QEMU puts CXL windows 256 MiB past a GiB boundary, so its node holds no aligned GiB and 1 GiB gigantic pages (tierkit_gigantic, tk-test-gigantic) cannot be placed there; use 2G or more");
        }
    }
    let guest_gib = topo.total_mem_gib() + topo.cxl_gib();
    if let Some(avail) = util::host_mem_available_gib() {
        if avail < guest_gib + 1 {
            say!(
                "warning: the host has {avail} GiB available and this guest can touch {guest_gib} GiB: \
                 with other guests running, the host's OOM killer may kill QEMU mid-run"
            );
        }
    }
}

/// The run directory of `req`, locked (two boots of the same mode and
/// topology would write the same logs), without the last boot's logs.
fn claim_run_dir(req: &BootRequest) -> Result<(PathBuf, util::Lock)> {
    let run_dir = req.run_dir();
    std::fs::create_dir_all(&run_dir)?;
    let lock = util::lock(&run_dir.join(".lock"), "this run directory")?;
    for stale in [
        "console.log",
        "data.log",
        "results.json",
        "kcidb.json",
        "junit.xml",
        "qemu-stderr.log",
    ] {
        let _ = std::fs::remove_file(run_dir.join(stale));
    }
    Ok((run_dir, lock))
}

/// The boot and what was judged of it.
struct Booted {
    outcome: verdict::Outcome,
    boot_time: Duration,
    start_time: String,
    /// Build steps, the host tests and the boot, each with its time.
    times: Vec<(&'static str, Duration)>,
}

/// Boots `b` as `cfg` says and judges the guest: the verdict, the tests
/// this kernel could not run as skips, the host tests' failure.
fn boot_and_judge(
    req: &BootRequest,
    b: &Built,
    cfg: &qemu::GuestConfig,
    run_dir: &std::path::Path,
    harness_skips: &[(&'static str, String)],
) -> Result<(Booted, qemu::GuestRun)> {
    say!(
        "booting {} with {} ({:?}, -cpu {}), mode {}, {} kernel, {} profile",
        req.kind(),
        cfg.topology.describe(),
        cfg.accel,
        cfg.job.cpu_model,
        req.job.mode.as_param(),
        req.kernel.kind,
        req.kernel.profile
    );
    say!("console log: {}", run_dir.join("console.log").display());
    let mut streamer = qemu::Streamer::new(util::verbose(), !matches!(req.job.mode, Mode::Test));
    let t = Timer::start();
    let start_time = crate::report::kcidb::now_rfc3339();
    let guest = qemu::boot(&b.kernel, &b.initramfs, cfg, run_dir, &mut streamer)?;
    let boot_time = t.elapsed();
    let harness = verdict::Harness {
        skips: harness_skips.to_vec(),
        programs_filter: req.job.filter.user.clone(),
        host_tests_failed: matches!(req.host, Some((false, _)))
            .then(|| util::out_dir().join("host-tests.log")),
    };
    let outcome = verdict::judge(
        &guest,
        req.job.kunit,
        req.job.filter.describe().as_deref(),
        req.kernel.profile,
        &harness,
    );
    let mut times = b.times.clone();
    if let Some((_, d)) = req.host {
        times.insert(0, ("host tests", d));
    }
    times.push(("guest", boot_time));
    Ok((
        Booted {
            outcome,
            boot_time,
            start_time,
            times,
        },
        guest,
    ))
}

/// Boots once as `req` asks and reports.
pub(crate) fn run(req: BootRequest) -> Result<GuestResult> {
    setup::ensure()?;
    let total = Timer::start();
    // KVM and CXL memory onlined as RAM need a QEMU with the fix.
    let accel = crate::plan::accel::for_boot(
        req.kvm_accel(),
        req.kvm == Some(true),
        req.kind().spec().cxl,
    );
    let mut cfg = plan(&req, accel)?;
    warn_about(&cfg.topology);
    let (run_dir, _run_lock) = claim_run_dir(&req)?;
    let b = build_all(
        &req.kernel,
        req.kind().spec().cxl,
        false,
        &run_dir,
        Vec::new(),
    )?;
    // Tests that need what this kernel lacks are left out, each a skip
    // with its reason (not a failure, not silence).
    let harness_skips = if req.job.mode == Mode::Test {
        leave_out_unrunnable(&b.kernel, &mut cfg)
    } else {
        Vec::new()
    };
    let (mut booted, guest) = boot_and_judge(&req, &b, &cfg, &run_dir, &harness_skips)?;
    println!();
    if !guest.qemu_stderr.trim().is_empty() && util::verbose() {
        say!("QEMU stderr: {}", guest.qemu_stderr.trim());
    }
    say!("console: {}", guest.console_log.display());
    results::print_guest_view(req.kind(), &booted.outcome.markers);
    if let Mode::Bench(name) = &req.job.mode {
        results::write_bench(name, &cfg, &booted.outcome, &guest.data_log)?;
        bench::report(name);
    }
    if !req.job.kunit && req.job.mode != Mode::Test {
        return Ok(report_program_run(&req, &booted, &total));
    }
    let facts = crate::judge::facts::Boot::of(
        &run_dir,
        req.dir_name.unwrap_or(req.kind().name()),
        &cfg,
        &b.kernel,
        std::mem::take(&mut booted.start_time),
        booted.boot_time,
    );
    let problem = results::write_test_results(&run_dir, &facts, &booted.outcome)?;
    let mut r = report_test_run(&req, &booted, run_dir, &total);
    if let Some(p) = problem {
        say!("error: the KCIDB report: {p}");
        r.ok = false;
        r.report_problem = Some(p);
    }
    Ok(r)
}

impl BootRequest {
    /// The accelerator `--kvm` / `--no-kvm` ask for ([`qemu::choose_accel`]).
    pub(crate) fn kvm_accel(&self) -> qemu::Accel {
        qemu::choose_accel(self.kvm)
    }
}

/// `time: kernel 1 s, ..., boot 2 min (total 3 min)`.
fn timing(b: &Booted, total: &Timer) -> String {
    format!(
        "time: {} (total {})",
        b.times
            .iter()
            .map(|(n, d)| format!("{n} {}", fmt_dur(*d)))
            .collect::<Vec<_>>()
            .join(", "),
        fmt_dur(total.elapsed())
    )
}

/// What the boot came to, with the run directory for `test`'s results.
fn result(
    req: &BootRequest,
    b: &Booted,
    totals: Option<summary::Totals>,
    run_dir: Option<PathBuf>,
) -> GuestResult {
    let timed: Vec<(String, Duration)> =
        summary::timed_tests(&b.outcome.run, &b.outcome.user_tests)
            .into_iter()
            .map(|(ms, name)| (name, Duration::from_millis(ms)))
            .collect();
    GuestResult {
        ok: b.outcome.ok(),
        totals,
        boot: Some(b.boot_time),
        cxl_setup: b.outcome.markers.cxl_setup_secs(),
        run_dir: run_dir.filter(|_| req.job.mode == Mode::Test),
        error: None,
        report_problem: None,
        phases: b.times.iter().map(|(n, d)| (n.to_string(), *d)).collect(),
        slow_tests: crate::report::timings::slow_tests(&timed),
        guest_parts: crate::report::timings::guest_parts(&b.outcome.markers.stamps, b.boot_time),
    }
}

/// Demos and benchmarks: their exit codes, crashes, the protocol, and
/// `tierkit <mode>: ok` or `FAILED`.
fn report_program_run(req: &BootRequest, b: &Booted, total: &Timer) -> GuestResult {
    say!("{}", timing(b, total));
    for p in &b.outcome.markers.progs {
        let rc =
            p.rc.map(|r| r.to_string())
                .unwrap_or_else(|| "none (did not finish)".into());
        say!("{} {}: rc={rc}", p.kind.to_lowercase(), p.name);
    }
    for r in &b.outcome.reasons {
        say!("FAIL: {r}");
    }
    let status = if b.outcome.ok() { "ok" } else { "FAILED" };
    println!(
        "tierkit {}: {status}",
        req.job.mode.as_param().replace('-', " ")
    );
    result(req, b, None, None)
}

/// Tests: the reasons the summary's tables do not show, the summary and
/// its totals line.
fn report_test_run(req: &BootRequest, b: &Booted, run_dir: PathBuf, total: &Timer) -> GuestResult {
    let outcome = &b.outcome;
    say!("{}", timing(b, total));
    if !outcome.ok() {
        // Reasons that the summary's tables do not show on their own; of a
        // longer one (a boot that never reached /init, a timeout), its
        // first line, which says why.
        for r in &outcome.reasons {
            if r.lines().count() <= 2 {
                say!("FAIL: {r}");
            } else if let Some(first) = r.lines().next() {
                say!("FAIL: {first} (more below)");
            }
        }
    }
    println!();
    if !req.kernel.kind.has_kunit() {
        println!("{}", no_kunit_line(req.kernel.kind));
    }
    match &req.label {
        Some(l) => summary::print_summary_labelled(&outcome.run, &outcome.user_tests, l),
        None => summary::print_summary(&outcome.run, &outcome.user_tests),
    }
    let totals = summary::Totals::of(&outcome.run, &outcome.user_tests);
    result(req, b, Some(totals), Some(run_dir))
}

/// Tests that need what this kernel's config lacks (Debian's:
/// [`crate::kernels::debian::unrunnable`]) are left out of `cfg`'s selection, each
/// said in one line; returned with their reasons, to count as skips.
pub(crate) fn leave_out_unrunnable(
    kb: &kernel::KernelBuild,
    cfg: &mut qemu::GuestConfig,
) -> Vec<(&'static str, String)> {
    let Some(d) = &kb.debian else {
        return Vec::new();
    };
    let skips: Vec<(&'static str, String)> =
        crate::kernels::debian::unrunnable(&kconfig::parse_config(&d.prepared.headers.config))
            .into_iter()
            .filter(|(t, _)| cfg.job.filter.selects(t))
            .collect();
    if !skips.is_empty() {
        let mut skip: Vec<String> = cfg.job.filter.skip.iter().cloned().collect();
        skip.extend(skips.iter().map(|(t, _)| t.to_string()));
        cfg.job.filter.skip = Some(skip.join(","));
        for (t, why) in &skips {
            say!("skipping {t} on the {} kernel: {why}", cfg.kernel.kind);
        }
    }
    skips
}
