//! One guest boot: build what it needs (cached), boot it, judge it, report.
//! `run`, `test` and `bench` each describe their boot as a `GuestRequest`.

use anyhow::{bail, Result};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use crate::cli::{GuestArgs, KernelArgs};
use crate::qemu::{self, Mode};
use crate::runs;
use crate::topology::{self, Topology, TopologyKind, TopologyOpts};
use crate::util::{self, fmt_dur, Timer};
use crate::validate::Host;
use crate::{
    bench, initramfs, kconfig, kernel, module, profile, report, say, setup, userspace, verdict,
};

/// `--cxl-mem`'s default, GiB.
const DEFAULT_CXL_MEM_GIB: u32 = 3;

/// Everything built for a boot.
pub(crate) struct Built {
    pub(crate) kernel: kernel::KernelBuild,
    pub(crate) initramfs: initramfs::Initramfs,
    pub(crate) times: Vec<(&'static str, Duration)>,
}

/// Builds everything for `profile`; the initramfs goes to `dir`, with
/// `extra` in it. `cxl` and `share` (the virtio-9p share of `run -- CMD`
/// and `shell`) say which of Debian's modules /init loads first.
pub(crate) fn build_all(
    k: &KernelArgs,
    profile: profile::Profile,
    which: profile::KernelKind,
    cxl: bool,
    share: bool,
    dir: &Path,
    extra: Vec<initramfs::Entry>,
) -> Result<Built> {
    let mut times = Vec::new();
    let t = Timer::start();
    let kb = match which {
        profile::KernelKind::Tierkit => {
            kernel::ensure(k.kernel_src.as_deref(), k.fresh_config, profile)?
        }
        profile::KernelKind::Debian => kernel::ensure_debian()?,
    };
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
    // Debian's brd, CXL, DAX, kmem and 9p drivers are modules: /init loads them.
    let pre = match &kb.debian {
        Some(d) => crate::debian::pre_modules(d, cxl, share)?,
        None => Vec::new(),
    };
    // tk-run's library and test programs, numactl and glibc, in every
    // initramfs; `extra`'s files replace them where both have one.
    let mut tk = crate::guest_tools::GuestFiles::new();
    crate::tkrun::add_guest_files(&mut tk)?;
    let extra = initramfs::merge(tk.entries(), extra);
    let ir = initramfs::build(dir, &info, &m, &bins, &pre, extra)?;
    times.push(("initramfs", t.elapsed()));
    Ok(Built {
        kernel: kb,
        initramfs: ir,
        times,
    })
}

/// One boot as asked: what `run`, `test` and `bench` hand to [`guest_cmd`].
pub(crate) struct GuestRequest {
    pub mode: Mode,
    pub profile: profile::Profile,
    pub kind: TopologyKind,
    /// `--kernel`.
    pub kernel: profile::KernelKind,
    /// Run the module's KUnit suites at insmod.
    pub kunit: bool,
    pub cxl_online: qemu::CxlOnline,
    /// `--cxl-interleave`, or the run's own.
    pub cxl_interleave: Option<topology::CxlInterleave>,
    pub filter: runs::Filter,
    /// Host-test outcome and time, reported with this boot.
    pub host: Option<(bool, Duration)>,
    /// One of several boots of one `test`: its name (totals line, run
    /// directory `target/tierkit/<mode>-<name>`); `None`: the topology's.
    pub label: Option<String>,
    /// The run directory's name after `<mode>-`; `None`: the topology's.
    pub dir_name: Option<&'static str>,
    /// Kernel command-line words of the run, before `--append`'s.
    pub append: Vec<String>,
    /// One of the topologies a command boots on its own (`test`, `bench`
    /// without `--topology`): `--cxl-dev` and `--cxl-interleave` apply to
    /// its cxl boots only. Otherwise the topology is the user's, and they
    /// need it to be cxl.
    pub cxl_opts_on_cxl_only: bool,
}

impl GuestRequest {
    /// A boot of `kind` with the command line's `--filter` and
    /// `--cxl-online` (default movable).
    pub(crate) fn new(
        mode: Mode,
        g: &GuestArgs,
        profile: profile::Profile,
        kind: TopologyKind,
        kunit: bool,
    ) -> GuestRequest {
        GuestRequest {
            mode,
            profile,
            kind,
            kernel: g.kernel_kind,
            // Debian's kernel has no KUnit: its suites cannot run there.
            kunit: kunit && g.kernel_kind.has_kunit(),
            cxl_online: g.cxl_online.unwrap_or(qemu::CxlOnline::Movable),
            cxl_interleave: g.cxl_interleave,
            filter: runs::Filter::both(g.filter.as_deref()),
            host: None,
            label: None,
            dir_name: None,
            append: Vec::new(),
            cxl_opts_on_cxl_only: false,
        }
    }

    /// The boot of one [`runs::TestRun`]; `--filter` overrides its own
    /// selection, `--cxl-online` its zone only where the run leaves it open.
    pub(crate) fn for_run(
        g: &GuestArgs,
        profile: profile::Profile,
        kernel: profile::KernelKind,
        run: &runs::TestRun,
    ) -> GuestRequest {
        let mut req = GuestRequest::new(Mode::Test, g, profile, run.kind, true);
        req.kernel = kernel;
        req.kunit = kernel.has_kunit();
        if let Some(z) = run.cxl_online {
            req.cxl_online = z;
        }
        if run.cxl_interleave.is_some() {
            req.cxl_interleave = run.cxl_interleave;
        }
        if let (None, Some(sel)) = (&g.filter, run.only) {
            req.filter = sel.filter();
        }
        req.dir_name = Some(run.name);
        req.cxl_opts_on_cxl_only = g.topology.is_none();
        let debug = if profile == profile::Profile::Debug {
            run.debug_append
        } else {
            ""
        };
        req.append = run
            .append
            .split_whitespace()
            .chain(debug.split_whitespace())
            .map(str::to_string)
            .collect();
        req
    }
}

/// What one boot came to.
pub(crate) struct GuestResult {
    pub(crate) ok: bool,
    /// KUnit plus userspace totals (`test`, `run --kunit`).
    pub(crate) totals: Option<report::Totals>,
    /// Wall time of the boot.
    pub(crate) boot: Option<Duration>,
    /// Seconds /init spent assembling and onlining CXL regions.
    pub(crate) cxl_setup: Option<f64>,
    /// Where its results are (`test`: results.json, junit.xml, kcidb.json).
    pub(crate) run_dir: Option<std::path::PathBuf>,
    /// Why it could not be built or booted.
    pub(crate) error: Option<String>,
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
/// any work, and [`guest_cmd`] for the boot itself.
pub(crate) fn plan(
    g: &GuestArgs,
    req: &GuestRequest,
    accel: qemu::Accel,
) -> Result<qemu::GuestConfig> {
    let kind = req.kind;
    // `test` or `bench` without --topology: the CXL devices are cxl's.
    let cxl_opts = kind.spec().cxl || !req.cxl_opts_on_cxl_only;
    if g.cxl_mem.is_some() && kind.spec().mem_nodes == 0 && !req.cxl_opts_on_cxl_only {
        bail!(
            "--cxl-mem sizes the memory-only node of numa and numa2; --topology {kind} has none (its CXL memory is --cxl-dev)"
        );
    }
    let topology = Topology::new(&TopologyOpts {
        kind,
        cpus: g.cpus,
        dram_gib: g.dram.unwrap_or(kind.spec().dram_gib),
        slow_gib: g.cxl_mem.unwrap_or(DEFAULT_CXL_MEM_GIB),
        cxl_devs: if cxl_opts { g.cxl_dev.clone() } else { vec![] },
        cxl_interleave: req.cxl_interleave.filter(|_| cxl_opts),
        dram_perf: g.dram_perf,
    })?;
    let mut default_timeout = if matches!(req.mode, Mode::Bench(_)) {
        1800
    } else {
        600
    };
    default_timeout *= kind.spec().timeout_factor;
    // KASAN, lockdep and kmemleak slow the guest down several times.
    default_timeout *= req.profile.timeout_factor();
    Ok(qemu::GuestConfig {
        topology,
        cpu_model: {
            let m = g
                .cpu_model
                .clone()
                .unwrap_or_else(|| kind.spec().cpu_model.to_string());
            if kind.spec().cxl && !m.contains("hypervisor=") {
                format!("{m}{}", req.kernel.cxl_cpu_flags())
            } else {
                m
            }
        },
        accel,
        mode: req.mode.clone(),
        kunit: req.kunit,
        filter: req.filter.clone(),
        append: req.append.iter().chain(g.append.iter()).cloned().collect(),
        timeout: Duration::from_secs(g.timeout.unwrap_or(default_timeout)),
        profile: req.profile,
        cxl_online: req.cxl_online,
        kernel: req.kernel,
        extra_args: Vec::new(),
    })
}

/// Refuses, in one line, a boot that cannot work as asked: what
/// [`plan`] refuses (the topology's rules), a kernel command line that
/// cannot carry `--filter` and `--append`, and a guest bigger than the
/// host's memory (`MemTotal`). Builds and boots nothing.
pub(crate) fn check(g: &GuestArgs, req: &GuestRequest, host: &Host) -> Result<()> {
    let cfg = plan(g, req, qemu::Accel::Tcg)?;
    qemu::kernel_cmdline(&cfg)?;
    check_memory(&cfg.topology, host)
}

/// A guest that the host cannot hold at all is refused; one that leaves
/// it little room gets a warning at boot (`MemAvailable`, [`guest_cmd`]).
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

/// Boots once as `req` asks and reports.
pub(crate) fn guest_cmd(g: &GuestArgs, req: GuestRequest) -> Result<GuestResult> {
    setup::ensure()?;
    let total = Timer::start();
    let accel = g.accel();
    // KVM and CXL memory onlined as RAM need a QEMU with the fix.
    let accel = crate::accel::for_boot(accel, g.kvm, req.kind.spec().cxl);
    let mut cfg = plan(g, &req, accel)?;
    let GuestRequest {
        mode,
        profile,
        kind,
        kernel: which,
        kunit,
        filter,
        host,
        label,
        dir_name,
        ..
    } = req;
    let label = label.as_deref();
    let topo = &cfg.topology;
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
    let run_dir = util::out_dir().join(format!(
        "{}-{}{}{}",
        mode.as_param(),
        dir_name.unwrap_or(kind.name()),
        profile.suffix(),
        which.suffix()
    ));
    std::fs::create_dir_all(&run_dir)?;
    // Two boots of the same mode and topology would write the same logs.
    let _run_lock = util::lock(&run_dir.join(".lock"), "this run directory")?;
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
    let b = build_all(
        &g.kernel,
        profile,
        which,
        kind.spec().cxl,
        false,
        &run_dir,
        Vec::new(),
    )?;
    // Tests that need what this kernel lacks are left out, each a skip
    // with its reason (not a failure, not silence).
    let harness_skips = if mode == Mode::Test {
        leave_out_unrunnable(&b.kernel, &mut cfg)
    } else {
        Vec::new()
    };
    say!(
        "booting {} with {} ({:?}, -cpu {}), mode {}, {} kernel, {} profile",
        kind,
        cfg.topology.describe(),
        accel,
        cfg.cpu_model,
        mode.as_param(),
        which,
        profile
    );
    say!("console log: {}", run_dir.join("console.log").display());
    let mut streamer = qemu::Streamer::new(util::verbose(), !matches!(mode, Mode::Test));
    let t = Timer::start();
    let start_time = crate::kcidb::now_rfc3339();
    let guest = qemu::boot(&b.kernel, &b.initramfs, &cfg, &run_dir, &mut streamer)?;
    let boot_time = t.elapsed();
    let mut outcome = verdict::evaluate(&guest, kunit, filter.describe().as_deref(), profile);
    for (t, why) in &harness_skips {
        outcome.user_tests.push(report::UserTest {
            name: t.to_string(),
            passed: true,
            skipped: true,
            rc: 0,
            output_tail: format!("ok - {t} # SKIP {why}"),
            duration_ms: 0,
        });
    }
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
    let result = |o: &verdict::Outcome, totals| GuestResult {
        ok: o.ok(),
        totals,
        boot: Some(boot_time),
        cxl_setup: o.markers.cxl_setup_secs(),
        run_dir: (mode == Mode::Test).then(|| run_dir.clone()),
        error: None,
    };
    if let Mode::Bench(name) = &mode {
        write_bench(name, &cfg, &outcome, &guest.data_log)?;
        bench::report(name);
    }
    if !kunit && mode != Mode::Test {
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
        return Ok(result(&outcome, None));
    }
    let boot = kcidb_boot(
        &run_dir,
        dir_name.unwrap_or(kind.name()),
        &cfg,
        &b.kernel,
        start_time,
        boot_time,
    );
    write_test_results(&run_dir, &boot, &mut outcome)?;
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
    if !which.has_kunit() {
        println!("{}", no_kunit_line(which));
    }
    match label {
        Some(l) => report::print_summary_labelled(&outcome.run, &outcome.user_tests, l),
        None => report::print_summary(&outcome.run, &outcome.user_tests),
    }
    Ok(result(
        &outcome,
        Some(report::Totals::of(&outcome.run, &outcome.user_tests)),
    ))
}

/// Tests that need what this kernel's config lacks (Debian's:
/// [`crate::debian::unrunnable`]) are left out of `cfg`'s selection, each
/// said in one line; returned with their reasons, to count as skips.
pub(crate) fn leave_out_unrunnable(
    kb: &kernel::KernelBuild,
    cfg: &mut qemu::GuestConfig,
) -> Vec<(&'static str, String)> {
    let Some(d) = &kb.debian else {
        return Vec::new();
    };
    let skips: Vec<(&'static str, String)> =
        crate::debian::unrunnable(&kconfig::parse_config(&d.prepared.headers.config))
            .into_iter()
            .filter(|(t, _)| cfg.filter.selects(t))
            .collect();
    if !skips.is_empty() {
        let mut skip: Vec<String> = cfg.filter.skip.iter().cloned().collect();
        skip.extend(skips.iter().map(|(t, _)| t.to_string()));
        cfg.filter.skip = Some(skip.join(","));
        for (t, why) in &skips {
            say!("skipping {t} on the {} kernel: {why}", cfg.kernel);
        }
    }
    skips
}

/// Writes a test boot's `kcidb.json` (validated: an invalid one is a
/// `[harness] kcidb` failure of the boot), `results.json` and `junit.xml`.
fn write_test_results(
    run_dir: &Path,
    boot: &crate::kcidb::Boot,
    outcome: &mut verdict::Outcome,
) -> Result<()> {
    let results = run_dir.join("results.json");
    let junit = run_dir.join("junit.xml");
    let kcidb = run_dir.join("kcidb.json");
    if let Some(f) = crate::kcidb::write_boot(&kcidb, boot, &outcome.run, &outcome.user_tests) {
        outcome.reasons.push(f.output_tail.clone());
        outcome.user_tests.push(f);
    }
    report::write_json(&results, &outcome.run, &outcome.user_tests)?;
    report::write_junit(
        &junit,
        &format!("tierkit-{}", boot.run),
        &outcome.run,
        &outcome.user_tests,
    )?;
    say!(
        "results: {}, {} and {}",
        results.display(),
        junit.display(),
        kcidb.display()
    );
    Ok(())
}

/// The boot as its KCIDB file tells it (`run_dir` named `test-<job>`).
fn kcidb_boot(
    run_dir: &Path,
    run: &str,
    cfg: &qemu::GuestConfig,
    kb: &kernel::KernelBuild,
    start_time: String,
    boot_time: Duration,
) -> crate::kcidb::Boot {
    crate::kcidb::Boot {
        job: run_dir
            .file_name()
            .and_then(|n| n.to_str())
            .map_or("", |n| n.trim_start_matches("test-"))
            .to_string(),
        run: run.to_string(),
        profile: cfg.profile,
        kernel: cfg.kernel,
        topology: cfg.topology.kind.name().to_string(),
        topology_detail: cfg.topology.describe(),
        accel: format!("{:?}", cfg.accel).to_lowercase(),
        kernel_source: crate::kcidb::KernelSource {
            name: match cfg.kernel {
                profile::KernelKind::Debian => format!("Debian linux-image-{}", kb.version),
                _ => kb
                    .src
                    .file_name()
                    .map_or("linux".into(), |n| n.to_string_lossy().into_owned()),
            },
            version: kb.version.clone(),
        },
        kernel_key: kb.key.clone(),
        start_time,
        duration_secs: boot_time.as_secs_f64(),
    }
}

/// The summary's line for a kernel without KUnit: not a failure.
pub(crate) fn no_kunit_line(k: profile::KernelKind) -> String {
    format!(
        "KUnit: not run on the {k} kernel (CONFIG_KUNIT is off there); tierkit's KUnit suites run on tierkit's own kernels (--kernel tierkit)"
    )
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
