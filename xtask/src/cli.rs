//! The command line: clap's definitions of every subcommand and flag, and
//! the dispatch to [`crate::guest`] (one boot) and [`crate::testing`]
//! (`test`'s boots).

use anyhow::Result;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::guest::{build_all, guest_cmd, GuestRequest};
use crate::qemu::{self, Mode};
use crate::topology::{CxlDevice, CxlInterleave, Perf, TopologyKind};
use crate::validate::{self, Host};
use crate::{bench, kernel, module, profile, report, say, setup, testing, user_cmd, util};

const ABOUT: &str = "Build Linux 7.3 with Rust and the tierkit module, boot it in QEMU with a \
CPU-less memory node, and report the results.";

const AFTER_HELP: &str = "\
The two main commands:
  cargo xtask run     build everything (cached), boot, load tierkit, run the demos
  cargo xtask test    host tests, then the quick runs (numa, cxl): KUnit + userspace tests,
                      summary, JSON, JUnit

  cargo xtask run -- CMD [ARGS...]           run your command in the guest (tierkit loaded,
                                             this directory shared); exits with its status
  cargo xtask shell                          an interactive shell there

  cargo xtask test --full                    everything (the slow reliability tests, 1 GiB
                                             on CXL memory, the short cxl-kernel,
                                             cxl-interleave and numa-init-on-alloc runs)
  cargo xtask test --profile debug           on the debug kernel (KASAN, UBSAN, lockdep,
                                             kmemleak, ...; any report fails)
  cargo xtask test --ci                      what .ci/run runs: --full, then debug numa-full
                                             and debug cxl (quick), then Debian's kernel on
                                             numa and cxl (quick); one totals line
  cargo xtask test --kernel debian           on Debian's own 7.3 kernel (userspace tests)
  cargo xtask module --kdir DIR              tierkit.ko for an installed kernel's headers
  cargo xtask matrix [--shard K/N]           the boots of --ci as CI jobs (JSON; each is
                                             `test --ci --job ID`), or run a share of them
  cargo xtask merge DIR...                   shards' results as one summary, JUnit, KCIDB
  cargo xtask lava                           LAVA job definitions for the same boots

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
    /// target/tierkit/tierkit-<kernel key>.ko), or with --kdir against an
    /// installed kernel's headers (a distribution kernel).
    Module(ModuleArgs),
    /// Build everything the guest needs (kernel, module, guest binaries,
    /// initramfs) without booting.
    Build(KernelArgs),
    /// The main job: build (cached), boot the default topology, load
    /// tierkit and run the demos (/bin/tk-demo*): weighted placement per
    /// node and a 1 GiB clear per node. KUnit is off unless --kunit.
    ///
    /// `cargo xtask run [flags] -- CMD [ARGS...]` runs CMD instead of the
    /// demos, in the current directory, which the guest shares read-write
    /// at the same path (QEMU virtio-9p); on cxl after the CXL regions are
    /// online. numactl, numastat, cxl, daxctl and ndctl (Debian trixie's)
    /// are on the guest's PATH. CMD's stdout and stderr stream to stdout,
    /// its stdin is /dev/null; kernel reports go to stderr (-v: the whole
    /// console). xtask exits with CMD's status (exit codes below).
    #[command(after_long_help = user_cmd::EXIT_HELP)]
    Run(RunArgs),
    /// An interactive shell (busybox sh, job control) on the guest's
    /// console, tierkit loaded, in the current directory shared as for
    /// `run -- CMD` (same tools on PATH). `exit` or Ctrl-D powers the guest
    /// off; Ctrl-C goes to the guest; Ctrl-A x quits QEMU. Kernel messages
    /// below warnings are off (-v: all); no timeout unless --timeout is
    /// given. xtask exits with the shell's status (exit codes below).
    #[command(after_long_help = user_cmd::EXIT_HELP)]
    Shell(ShellArgs),
    /// Run all tests: host tests, then boot with KUnit and the userspace
    /// tests (/bin/tk-test-*); print a summary and write JSON and JUnit XML.
    ///
    /// Without --topology it boots the quick runs (xtask/src/runs.rs,
    /// QUICK_RUNS): numa (every tierkit KUnit suite, the userspace tests
    /// but the slow ones) and cxl (placement on the CXL node in
    /// ZONE_MOVABLE). --full (CI) boots numa-full and cxl-full (the whole
    /// suite) and three short runs: cxl-kernel (the CXL node as kernel
    /// memory), cxl-interleave (one region across two devices) and
    /// numa-init-on-alloc (init_on_alloc=1). With --topology: that
    /// topology's first run, one boot.
    /// Results: target/tierkit/test-<run>[-debug]/{results.json,junit.xml}.
    Test(TestArgs),
    /// Boot and run a benchmark (/bin/tk-bench-<name>); its `TIERKIT-JSON`
    /// lines go to target/tierkit/bench/<name>.json. With no name: every
    /// benchmark, one boot per topology (numa, then cxl; `--topology`
    /// picks one), and the report in target/tierkit/report/.
    Bench(BenchArgs),
    /// The boots of `test` as CI jobs: print them as JSON (`{"jobs":
    /// [...]}`, each one boot as an independent `cargo xtask test ... --job
    /// ID` command with a stable id), or with --shard K/N run every N-th of
    /// them here, one after the other, into target/tierkit/shard-K-of-N/.
    /// Without a selection flag: the boots of `test --ci`.
    Matrix(crate::matrix::MatrixArgs),
    /// Combine the results of several shards (or run directories) into one
    /// summary, JUnit and KCIDB file, and print the totals line.
    Merge(crate::merge::MergeArgs),
    /// Write LAVA job definitions (generated with tuxlava) that boot the
    /// same kernel and initramfs as the selected jobs, one per job, into
    /// target/tierkit/lava/.
    Lava(crate::lava::LavaArgs),
}

#[derive(Args, Clone)]
pub(crate) struct KernelArgs {
    /// Use this kernel source tree (e.g. a git checkout; it must be clean:
    /// xtask builds out of tree). Default: Debian's linux-source-7.3.
    #[arg(long, value_name = "DIR", env = "TIERKIT_KERNEL_SRC")]
    pub(crate) kernel_src: Option<PathBuf>,
    /// Regenerate the kernel config even if an identical one is remembered.
    #[arg(long)]
    pub(crate) fresh_config: bool,
    /// Kernel configuration. `debug`: a second kernel, built and cached
    /// beside the default one, with kconfig/debug/*.config on top (KASAN,
    /// UBSAN, lockdep, kmemleak, DEBUG_VM/LIST/OBJECTS, soft-lockup,
    /// hung-task and RCU-stall detectors); the module is built with
    /// CLIPPY=1 and warnings as errors; the guest boots with panic_on_warn=1
    /// and short hang timeouts, and runs a kmemleak scan after rmmod. Any
    /// KASAN, UBSAN, lockdep, kmemleak, lockup, stall, BUG or WARNING
    /// report fails the run. Output goes to
    /// target/tierkit/<mode>-<run>-debug/. `test`, `kernel`, `module`
    /// and `build` take several (`--profile default,debug`: one after the
    /// other, with one combined totals line for `test`).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        value_name = "PROFILE",
        default_value = "default"
    )]
    pub(crate) profile: Vec<profile::Profile>,
}

impl GuestArgs {
    /// The accelerator `--kvm` / `--no-kvm` ask for ([`qemu::choose_accel`]).
    pub(crate) fn accel(&self) -> qemu::Accel {
        qemu::choose_accel(if self.kvm {
            Some(true)
        } else if self.no_kvm {
            Some(false)
        } else {
            None
        })
    }
}

impl KernelArgs {
    /// The profiles asked for, in order, each once.
    pub(crate) fn profiles(&self) -> Vec<profile::Profile> {
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
    pub(crate) fn single_profile(&self, cmd: &str) -> Result<profile::Profile> {
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
pub(crate) struct ModuleArgs {
    #[command(flatten)]
    pub(crate) kernel: KernelArgs,
    /// Build against this installed kernel's headers instead, e.g.
    /// /lib/modules/$(uname -r)/build (Debian: linux-headers-$(uname -r)).
    /// A tree without the kernel's Rust metadata (Debian ships none) gets
    /// it rebuilt once from Debian's linux-source-7.3 with Debian's own
    /// toolchain in a private trixie root (cached in ~/.cache/tierkit);
    /// the module goes to target/tierkit/tierkit-<release>-<config hash>.ko.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["kernel_src", "profile"])]
    pub(crate) kdir: Option<PathBuf>,
}

#[derive(Args, Clone)]
pub(crate) struct GuestArgs {
    #[command(flatten)]
    pub(crate) kernel: KernelArgs,
    /// Guest NUMA topology, an entry of TOPOLOGIES (xtask/src/topology/spec.rs)
    /// [default: numa; `test`: the runs of xtask/src/runs.rs].
    #[arg(long, value_parser = TopologyKind::value_parser())]
    pub(crate) topology: Option<TopologyKind>,
    /// Guest CPUs in total (numa2 splits them over its two CPU nodes).
    /// At most 8: kconfig/base.config sets CONFIG_NR_CPUS=8, and the guest
    /// would silently ignore the rest.
    #[arg(long, default_value_t = 2, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=8))]
    pub(crate) cpus: u32,
    /// DRAM per CPU node, in whole GiB [default: 8G]. q35 splits RAM around
    /// the PCI hole below 4 GiB, early kernel allocations and the memmap sit
    /// in node 0, the CXL node's memmap too (64 MiB per 4 GiB, allocated on
    /// node 0 at hot-add), and the tests leave unmovable pages behind: 6 GiB
    /// once left no free, naturally aligned GiB for the gigantic tests.
    #[arg(long, value_parser = util::parse_gib, value_name = "SIZE")]
    pub(crate) dram: Option<u32>,
    /// Size of the memory-only node of numa and numa2, in whole GiB
    /// [default: 3G].
    #[arg(long, value_parser = util::parse_gib, value_name = "SIZE")]
    pub(crate) cxl_mem: Option<u32>,
    /// A CXL type-3 device of --topology cxl: whole GiB, optionally with
    /// the HMAT latency (ns) and bandwidth (GB/s) of its generic port, e.g.
    /// `4G` or `2G:300:5G`. Repeatable or comma-separated (`4G,2G`).
    /// [default: one 4G:250:10G]
    #[arg(long, alias = "cxl-devs", value_delimiter = ',', value_parser = CxlDevice::parse, value_name = "SIZE[:NS:GBS]")]
    pub(crate) cxl_dev: Vec<CxlDevice>,
    /// Interleave each CXL region of --topology cxl across WAYS devices
    /// behind one host bridge (one root port each), with GRANULARITY bytes
    /// (256 to 16384, power of two, e.g. `4K`; default 256) per device in
    /// turn: `2`, `2:256`, `2:4096`. WAYS is 1 or 2; the --cxl-dev devices
    /// (default: WAYS of 4/WAYS GiB, a 4 GiB region) are grouped in order,
    /// WAYS per region, of one size and performance each.
    /// [default: 1, a region per device]
    #[arg(long, value_parser = CxlInterleave::parse, value_name = "WAYS[:GRAN]")]
    pub(crate) cxl_interleave: Option<CxlInterleave>,
    /// HMAT latency (ns) and bandwidth (GB/s) of a CPU node's own DRAM,
    /// e.g. `100:20G` [default: numa, numa2: 100:200G; cxl: 100:20G].
    #[arg(long, value_parser = Perf::parse, value_name = "NS:GBS")]
    pub(crate) dram_perf: Option<Perf>,
    /// QEMU CPU model (`-cpu`), e.g. `max` or `max,erms=off`
    /// [default: max,erms=off,fsrm=off,fsrs=off: see topology/spec.rs NO_REP_STOSB].
    #[arg(long = "cpu", value_name = "MODEL", value_parser = validate::parse_cpu_model)]
    pub(crate) cpu_model: Option<String>,
    /// Use KVM even if it does not look usable.
    #[arg(long, overrides_with = "no_kvm")]
    pub(crate) kvm: bool,
    /// Never use KVM (TCG).
    #[arg(long)]
    pub(crate) no_kvm: bool,
    /// Kill the guest after this many seconds [default: 600; bench: 1800;
    /// four times that with cxl].
    #[arg(long, value_name = "SECS", value_parser = validate::parse_timeout)]
    pub(crate) timeout: Option<u64>,
    /// Only run matching tests: `kunit.filter_glob=GLOB` for KUnit
    /// (`suite` or `suite.test`), and a shell glob on userspace test names.
    #[arg(long, value_name = "GLOB", value_parser = validate::parse_filter)]
    pub(crate) filter: Option<String>,
    /// Extra kernel command line parameters (repeatable).
    #[arg(long, value_name = "ARGS", value_parser = validate::parse_append)]
    pub(crate) append: Vec<String>,
    /// How the CXL node's memory is onlined (`memhp_default_state=`):
    /// `movable` (ZONE_MOVABLE, as real systems do, so it can be offlined
    /// again) or `kernel` (ZONE_NORMAL).
    /// [default: movable; `test --full` also boots a short cxl run with
    /// `kernel` unless this is given]
    #[arg(long, value_enum, value_name = "ZONE")]
    pub(crate) cxl_online: Option<qemu::CxlOnline>,
    /// The guest kernel: `tierkit` (tierkit's own, built from Debian's
    /// linux-source-7.3 with kconfig/*.config) or `debian` (Debian's
    /// linux-image-7.3.4+deb13-amd64 as shipped, fetched through the
    /// private apt configuration; tierkit.ko is built against its headers
    /// as `module --kdir` does). Debian's kernel has KUnit off: `test`
    /// runs the userspace tests there and says so.
    #[arg(
        long = "kernel",
        value_enum,
        value_name = "KERNEL",
        default_value = "tierkit"
    )]
    pub(crate) kernel_kind: profile::KernelKind,
}

#[derive(Args, Clone)]
struct RunArgs {
    #[command(flatten)]
    guest: GuestArgs,
    /// Also run the module's KUnit suites at insmod (`cargo xtask test`
    /// always does; they take a while under TCG).
    #[arg(long)]
    kunit: bool,
    /// The command to run in the guest instead of the demos (after `--`).
    #[arg(last = true, value_name = "CMD", value_parser = clap::value_parser!(OsString))]
    cmd: Vec<OsString>,
}

#[derive(Args, Clone)]
struct ShellArgs {
    #[command(flatten)]
    guest: GuestArgs,
}

#[derive(Args, Clone)]
struct TestArgs {
    #[command(flatten)]
    guest: GuestArgs,
    /// Skip the host tests (`cargo test --workspace`).
    #[arg(long)]
    no_host_tests: bool,
    /// Everything: the whole suite on numa and cxl, with the slow
    /// reliability tests and the 1 GiB work on CXL memory, plus short runs
    /// with the CXL node as kernel memory, with one region across two CXL
    /// devices, and with init_on_alloc=1 (xtask/src/runs.rs, FULL_RUNS).
    /// CI runs this (see --ci). Without it: the quick runs (QUICK_RUNS).
    #[arg(long)]
    full: bool,
    /// What .ci/run boots (xtask/src/runs.rs, ci_boots): the default
    /// profile's full runs, then the debug profile's whole suite on numa
    /// and its quick cxl run, then Debian's kernel (--kernel debian) on the
    /// quick numa and cxl runs; one combined totals line. Overrides --full,
    /// --profile, --topology and --kernel.
    #[arg(long)]
    ci: bool,
    /// Boot only the job ID of the selected boots (`cargo xtask matrix`
    /// lists them: the run directory's name after `test-`, e.g.
    /// `numa-full`, `numa-full-debug`, `cxl-debian`).
    #[arg(long, value_name = "ID", value_parser = parse_job_id)]
    job: Option<String>,
}

/// A job id: lower-case letters, digits and `-`.
pub(crate) fn parse_job_id(s: &str) -> std::result::Result<String, String> {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        Ok(s.to_string())
    } else {
        Err("a job id is lower-case letters, digits and '-', e.g. numa-full-debug (cargo xtask matrix lists them)".into())
    }
}

/// The boots `t` asks for, `--job` applied.
fn test_boots(t: &TestArgs) -> Result<Vec<testing::Boot>> {
    let all = testing::boots(&t.guest, &t.guest.kernel.profiles(), t.full, t.ci);
    testing::select_job(all, t.job.as_deref())
}

/// A `test` command line (`args` after `cargo xtask`) parsed: its guest
/// flags and its boots. What `matrix --shard` runs each job with.
pub(crate) fn parse_test(args: &[String]) -> Result<(GuestArgs, Vec<testing::Boot>)> {
    let argv = std::iter::once("cargo xtask".to_string()).chain(args.iter().cloned());
    let cli = Cli::try_parse_from(argv).map_err(|e| anyhow::anyhow!(clap_error_line(&e)))?;
    match cli.cmd {
        Cmd::Test(t) => {
            let boots = test_boots(&t)?;
            Ok((t.guest, boots))
        }
        _ => anyhow::bail!("not a test command: {}", args.join(" ")),
    }
}

/// The jobs `select` asks for (`matrix`, `lava`).
pub(crate) fn select_jobs(select: &crate::matrix::SelectArgs) -> Result<Vec<crate::matrix::Job>> {
    let sel = select.selection();
    let (_, boots) = parse_test(&sel.test_args())?;
    Ok(crate::matrix::jobs(&sel, &boots))
}

/// Every job's command line checked as `cargo xtask test` checks its own;
/// `shard`, given, must pick at least one job.
pub(crate) fn check_jobs(
    jobs: &[crate::matrix::Job],
    shard: Option<crate::matrix::Shard>,
    host: &Host,
) -> std::result::Result<(), String> {
    if let Some(s) = shard {
        if s.pick(jobs).is_empty() {
            return Err(format!(
                "--shard {s}: there are only {} jobs, so shard {} of {} would run none",
                jobs.len(),
                s.k,
                s.n
            ));
        }
    }
    for j in jobs {
        let argv = std::iter::once("cargo xtask".to_string()).chain(j.args.iter().cloned());
        check_args(argv, host).map_err(|e| format!("job {}: {e}", j.id))?;
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum BenchKind {
    /// Parallel gigantic-page clearing (/bin/tk-bench-clear).
    Clear,
    /// Weighted-interleave placement (/bin/tk-bench-wi).
    Wi,
    /// Time to first use of 1 GiB: tierkit's gigantic mode against
    /// hugetlb's first fault (/bin/tk-bench-gigantic).
    Gigantic,
}

#[derive(Args, Clone)]
struct BenchArgs {
    /// One benchmark; none: all of them and the report.
    #[arg(value_enum)]
    which: Option<BenchKind>,
    #[command(flatten)]
    guest: GuestArgs,
}

/// `cargo xtask`'s entry point.
pub fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => return clap_refusal(e),
    };
    // Bad input is refused here, in one line, before anything is built,
    // booted or tested.
    if let Err(why) = check_dash_dash(&args).and_then(|()| validate(&cli, &Host::this())) {
        eprintln!("error: {why}");
        return ExitCode::from(user_cmd::exit::REFUSED);
    }
    util::set_verbose(cli.verbose);
    util::setup_llvm_path();
    // Commands whose last line is a totals line.
    let is_test = matches!(&cli.cmd, Cmd::Test(_) | Cmd::Merge(_))
        || matches!(&cli.cmd, Cmd::Matrix(m) if m.shard.is_some());
    let in_guest =
        matches!(&cli.cmd, Cmd::Run(r) if !r.cmd.is_empty()) || matches!(cli.cmd, Cmd::Shell(_));
    match real_main(cli) {
        Ok(code) => code,
        Err(e) => {
            // Not `{:?}`: with RUST_BACKTRACE set that adds xtask's own backtrace.
            eprintln!("\nerror: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            if in_guest {
                return ExitCode::from(user_cmd::exit::HOST_ERROR);
            }
            if is_test {
                // CI reads this line; a build or boot error is a failure too.
                println!("{}", report::Totals::ONE_FAILURE);
            }
            ExitCode::FAILURE
        }
    }
}

/// A value clap refused: one line (`error: invalid value '9' for '--cpus
/// <N>': 9 is not in 1..=8`), exit code 2. Everything else (`--help`,
/// `--version`, an unknown flag with clap's suggestion) as clap prints it.
fn clap_refusal(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::ValueValidation | ErrorKind::InvalidValue => {
            eprintln!("error: {}", clap_error_line(&e));
            ExitCode::from(2)
        }
        _ => e.exit(),
    }
}

/// The first line of clap's message, without `error: `, with the possible
/// values (which clap puts on lines of their own) at its end.
fn clap_error_line(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    let mut line = first.strip_prefix("error: ").unwrap_or(first).to_string();
    // `the following required arguments were not provided:`: name them.
    if let Some(ContextValue::Strings(missing)) = e.get(ContextKind::InvalidArg) {
        if line.ends_with(':') {
            line = format!("{line} {}", missing.join(", "));
        }
    }
    // clap quotes the value as given; a newline in it would split the line.
    if let (Some(ContextValue::String(arg)), Some(ContextValue::String(value))) = (
        e.get(ContextKind::InvalidArg),
        e.get(ContextKind::InvalidValue),
    ) {
        if !value.chars().any(char::is_control) {
            return with_possible_values(line, e);
        }
        let value: String = value
            .chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect();
        line = format!("invalid value '{value}' for '{arg}'");
        if let Some(why) = std::error::Error::source(e) {
            line.push_str(&format!(": {why}"));
        }
    }
    with_possible_values(line, e)
}

/// `line`, and the possible values of `e`'s flag if clap knows them.
fn with_possible_values(mut line: String, e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    if let Some(ContextValue::Strings(v)) = e.get(ContextKind::ValidValue) {
        if !v.is_empty() {
            line.push_str(&format!(" (possible values: {})", v.join(", ")));
        }
    }
    line
}

/// Parses `args` (the program name first) and checks every value and
/// every boot they ask for, as [`main`] does before any work, without
/// building, booting or testing anything: `Err` is the one line `cargo
/// xtask` prints for them. `--help` and `--version` are `Ok`. The host's
/// memory is `host`'s (tests give their own).
pub fn check_args<I, T>(args: I, host: &Host) -> std::result::Result<(), String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::error::ErrorKind;
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            return Ok(())
        }
        Err(e) => return Err(clap_error_line(&e)),
    };
    check_dash_dash(&args)?;
    validate(&cli, host)
}

/// `cargo xtask run --` with nothing after `--` (clap reads it as no
/// command, i.e. the demos).
fn check_dash_dash(args: &[OsString]) -> std::result::Result<(), String> {
    match args.iter().position(|a| a == "--") {
        Some(i) if i + 1 == args.len() => user_cmd::check_command(&[]),
        _ => Ok(()),
    }
}

/// The checks of [`check_args`] on a parsed command line: `--kernel-src`
/// and `--profile`, then each boot's request as the command will make it
/// ([`crate::guest::check`]: topology, kernel command line, memory).
fn validate(cli: &Cli, host: &Host) -> std::result::Result<(), String> {
    let one_line = |e: anyhow::Error| e.to_string().lines().collect::<Vec<_>>().join(" ");
    let kernel = match &cli.cmd {
        Cmd::Setup { .. } => return Ok(()),
        Cmd::Matrix(m) => {
            let jobs = select_jobs(&m.select).map_err(one_line)?;
            return check_jobs(&jobs, m.shard, host);
        }
        Cmd::Lava(l) => return crate::lava::check_args(l, host).map_err(one_line),
        Cmd::Merge(m) => {
            return crate::merge::check_args(&m.dirs, m.out.as_deref(), m.expect.as_deref())
                .map_err(one_line)
        }
        Cmd::Module(m) => {
            if let Some(dir) = &m.kdir {
                return crate::kdir::inspect(dir).map(|_| ()).map_err(one_line);
            }
            &m.kernel
        }
        Cmd::Kernel(k) | Cmd::Build(k) => k,
        Cmd::Run(r) => &r.guest.kernel,
        Cmd::Shell(s) => &s.guest.kernel,
        Cmd::Test(t) => &t.guest.kernel,
        Cmd::Bench(b) => &b.guest.kernel,
    };
    if let Some(dir) = &kernel.kernel_src {
        kernel::check_custom_source(dir).map_err(one_line)?;
    }
    check_in_guest(&cli.cmd, host)?;
    let guest = match &cli.cmd {
        Cmd::Run(r) => Some(&r.guest),
        Cmd::Shell(s) => Some(&s.guest),
        Cmd::Test(t) if !t.ci => Some(&t.guest),
        Cmd::Bench(b) => Some(&b.guest),
        _ => None,
    };
    if let Some(g) = guest.filter(|g| g.kernel_kind == profile::KernelKind::Debian) {
        if g.kernel.kernel_src.is_some() {
            return Err(
                "--kernel debian boots Debian's own kernel: --kernel-src is for --kernel tierkit"
                    .into(),
            );
        }
        if g.kernel.profiles() != [profile::Profile::Default] {
            return Err("--kernel debian boots Debian's kernel as shipped: --profile is for --kernel tierkit (debug is tierkit's own kernel config)".into());
        }
    }
    let boots = requests(&cli.cmd).map_err(one_line)?;
    let several = boots.len() > 1;
    for (g, req) in &boots {
        crate::guest::check(g, req, host).map_err(|e| {
            let e = one_line(e);
            match (&req.label, several) {
                (Some(l), true) => format!("{l}: {e}"),
                _ => e,
            }
        })?;
    }
    Ok(())
}

/// `run -- CMD` and `shell`: a command, a working directory the guest can
/// share, and no flag that selects tests or demos.
fn check_in_guest(cmd: &Cmd, host: &Host) -> std::result::Result<(), String> {
    let g = match cmd {
        Cmd::Run(r) if !r.cmd.is_empty() => {
            user_cmd::check_command(&r.cmd)?;
            &r.guest
        }
        Cmd::Shell(s) => &s.guest,
        _ => return Ok(()),
    };
    if g.filter.is_some() {
        return Err(
            "--filter selects tests and demos: with `run -- CMD` and `shell` only the command runs"
                .into(),
        );
    }
    user_cmd::check_share(host.cwd.as_deref()).map(|_| ())
}

/// Every boot `cmd` asks for, as [`real_main`] hands them to
/// [`guest_cmd`] (labelled, for messages, when there are several).
fn requests(cmd: &Cmd) -> Result<Vec<(&GuestArgs, GuestRequest)>> {
    Ok(match cmd {
        Cmd::Setup { .. }
        | Cmd::Kernel(_)
        | Cmd::Module(_)
        | Cmd::Build(_)
        | Cmd::Matrix(_)
        | Cmd::Merge(_)
        | Cmd::Lava(_) => vec![],
        Cmd::Run(r) => vec![(&r.guest, run_request(r)?)],
        Cmd::Shell(s) => {
            let kind = s.guest.topology.unwrap_or(TopologyKind::NUMA);
            let p = s.guest.kernel.single_profile("shell")?;
            vec![(
                &s.guest,
                GuestRequest::new(Mode::Shell, &s.guest, p, kind, false),
            )]
        }
        Cmd::Bench(b) => match b.which {
            Some(which) => vec![(&b.guest, bench_request(b, which)?)],
            None => {
                if let Some(p) = b
                    .guest
                    .kernel
                    .profiles()
                    .into_iter()
                    .find(|&p| p != profile::Profile::Default)
                {
                    anyhow::bail!(
                        "--profile {p}: `cargo xtask bench` without a name boots the default profile only; name a benchmark (clear, wi, gigantic) for another"
                    );
                }
                bench::all_kinds(&b.guest)
                    .into_iter()
                    .map(|k| {
                        let mut req = bench::all_request(&b.guest, k);
                        req.label = Some(format!("bench on {k}"));
                        (&b.guest, req)
                    })
                    .collect()
            }
        },
        Cmd::Test(t) => test_boots(t)?
            .into_iter()
            .map(|(p, k, run)| {
                let mut req = GuestRequest::for_run(&t.guest, p, k, &run);
                let kernel = match k {
                    profile::KernelKind::Tierkit => String::new(),
                    k => format!(", {k} kernel"),
                };
                req.label = Some(format!("test run {} ({p} profile{kernel})", run.name));
                (&t.guest, req)
            })
            .collect(),
    })
}

/// `run`'s one boot.
fn run_request(r: &RunArgs) -> Result<GuestRequest> {
    let kind = r.guest.topology.unwrap_or(TopologyKind::NUMA);
    let p = r.guest.kernel.single_profile("run")?;
    let mode = if r.cmd.is_empty() {
        Mode::Run
    } else {
        Mode::Cmd
    };
    Ok(GuestRequest::new(mode, &r.guest, p, kind, r.kunit))
}

/// `bench <which>`'s one boot.
fn bench_request(b: &BenchArgs, which: BenchKind) -> Result<GuestRequest> {
    let name = match which {
        BenchKind::Clear => "clear",
        BenchKind::Wi => "wi",
        BenchKind::Gigantic => "gigantic",
    };
    let kind = b.guest.topology.unwrap_or(TopologyKind::NUMA);
    let p = b.guest.kernel.single_profile("bench")?;
    Ok(GuestRequest::new(
        Mode::Bench(name.into()),
        &b.guest,
        p,
        kind,
        false,
    ))
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
        Cmd::Module(ModuleArgs {
            kdir: Some(dir), ..
        }) => {
            let ko = crate::kdir::cmd_module(&dir)?;
            println!("{}", ko.display());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Module(ModuleArgs { kernel: k, .. }) => {
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
                let b = build_all(
                    &k,
                    p,
                    profile::KernelKind::Tierkit,
                    false,
                    false,
                    &util::out_dir(),
                    Vec::new(),
                )?;
                say!(
                    "initramfs ({p} profile): {} ({} KiB)",
                    b.initramfs.path.display(),
                    b.initramfs.size / 1024
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Run(r) if !r.cmd.is_empty() => {
            user_cmd::run(&r.guest, r.kunit, &r.cmd).map(ExitCode::from)
        }
        Cmd::Shell(s) => user_cmd::shell(&s.guest).map(ExitCode::from),
        Cmd::Run(r) => {
            let req = run_request(&r)?;
            guest_cmd(&r.guest, req).map(|g| g.exit())
        }
        Cmd::Test(t) => {
            setup::ensure()?;
            let host = if t.no_host_tests {
                None
            } else {
                Some(testing::host_tests()?)
            };
            let mut boots = test_boots(&t)?;
            // The tests of run -- CMD and shell boot guests of their own:
            // part of a whole test, never of one --job (a matrix shard).
            let cmd_tests = match t.job {
                Some(_) => Vec::new(),
                None => crate::cmd_tests::selected(&t.guest, &t.guest.kernel.profiles(), t.ci),
            };
            if crate::cmd_tests::filter_is_theirs(t.guest.filter.as_deref()) {
                // `--filter 'xtask-*'`: only the tests of run -- CMD and shell.
                boots.clear();
            }
            // --ci overrides --kernel: tierkit's own.
            let cmd_kernel = if t.ci {
                profile::KernelKind::Tierkit
            } else {
                t.guest.kernel_kind
            };
            testing::test_all(&t.guest, host, &boots, &cmd_tests, cmd_kernel)
        }
        Cmd::Matrix(m) => {
            let jobs = select_jobs(&m.select)?;
            match m.shard {
                None => {
                    println!("{}", crate::matrix::to_json(&jobs));
                    Ok(ExitCode::SUCCESS)
                }
                Some(s) => crate::matrix::run_shard(s, &jobs, parse_test),
            }
        }
        Cmd::Merge(m) => {
            let out = m.out.unwrap_or_else(crate::merge::default_out);
            crate::merge::cmd_merge(&m.dirs, &out, m.expect.as_deref())
        }
        Cmd::Lava(l) => crate::lava::cmd_lava(&l),
        Cmd::Bench(b) => {
            let Some(which) = b.which else {
                return bench::run_all(&b.guest);
            };
            let req = bench_request(&b, which)?;
            guest_cmd(&b.guest, req).map(|g| g.exit())
        }
    }
}
