//! The command line: clap's definitions of every subcommand and flag, and
//! the one line a value clap refuses is told in. The checks that need more
//! than one flag are [`super::check`]'s; the dispatch is [`super`]'s.

use anyhow::Result;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;

use crate::boot::qemu;
use crate::boot::GuestFlags;
use crate::commands::in_guest;
use crate::kernels::profile::{KernelKind, Profile};
use crate::matrix::{self, Selection, Shard};
use crate::plan::topology::{CxlDevice, CxlInterleave, Perf, TopologyKind};
use crate::{util, util::validate};

const ABOUT: &str = "Build Linux 7.3 with Rust and the tierkit module, boot it in QEMU with a \
CPU-less memory node, and report the results.";

const AFTER_HELP: &str = "\
The two main commands:
  cargo xtask run     build everything (cached), boot, load tierkit, run the demos
  cargo xtask test    host tests, then the quick runs (numa, cxl): KUnit + userspace tests,
                      then a guest per xtask-* test of run -- CMD and shell (tmux);
                      summary, JSON, JUnit

  cargo xtask run -- CMD [ARGS...]           run your command in the guest (tierkit loaded,
                                             this directory shared); exits with its status
  cargo xtask shell                          an interactive shell there

  cargo xtask test --full                    everything (the slow reliability tests, 1 GiB
                                             on CXL memory, the short cxl-kernel,
                                             cxl-interleave, numa-init-on-alloc and
                                             socket2 runs)
  cargo xtask test --profile debug           on the debug kernel (KASAN, UBSAN, lockdep,
                                             kmemleak, ...; any report fails)
  cargo xtask test --ci                      what .ci/run runs: --full, then debug numa-full,
                                             debug cxl (quick) and debug socket2, then Debian's kernel on
                                             numa and cxl (quick) and socket2; one totals line
  cargo xtask test --kernel debian           on Debian's own 7.3 kernel (userspace tests)
  cargo xtask module --kdir DIR              tierkit.ko for an installed kernel's headers
  cargo xtask matrix [--shard K/N]           the boots of --ci as CI jobs (JSON; each is
                                             `test --ci --job ID`), or run a share of them
  cargo xtask merge DIR...                   shards' results as one summary, JUnit, KCIDB
  cargo xtask lava                           LAVA job definitions for the same boots

Cache: $TIERKIT_CACHE (default $XDG_CACHE_HOME/tierkit or ~/.cache/tierkit).
Output: target/tierkit/. Run inside the checkout (`cargo xtask` is its alias).
A first run on Debian 12 x86_64 needs root or sudo (scripts/setup-host.sh
installs the missing packages), host RAM of at least the guest's size (checked
before anything is built) and a cold kernel build (README.md, Quick start).";

#[derive(Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask", about = ABOUT, after_help = AFTER_HELP, version)]
pub(super) struct Cli {
    /// Show every command xtask runs and, when a guest boots, its whole
    /// console.
    #[arg(short, long, global = true)]
    pub(super) verbose: bool,
    #[command(subcommand)]
    pub(super) cmd: Cmd,
}

#[derive(Subcommand)]
pub(super) enum Cmd {
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
    #[command(after_long_help = in_guest::EXIT_HELP)]
    Run(RunArgs),
    /// An interactive shell (busybox sh, job control) on the guest's
    /// console, tierkit loaded, in the current directory shared as for
    /// `run -- CMD` (same tools on PATH).
    ///
    /// `exit` or Ctrl-D powers the guest
    /// off; Ctrl-C goes to the guest; Ctrl-A x quits QEMU. Kernel messages
    /// below warnings are off (-v: all); no timeout unless --timeout is
    /// given. xtask exits with the shell's status (exit codes below).
    #[command(after_long_help = in_guest::EXIT_HELP)]
    Shell(ShellArgs),
    /// Run all tests: host tests, then boot with KUnit and the userspace
    /// tests (/bin/tk-test-*); print a summary and write JSON and JUnit XML.
    ///
    /// Without --topology it boots the quick runs (xtask/src/plan/runs.rs,
    /// QUICK_RUNS): numa (KUnit `tierkit_[!g]*`: every tierkit suite but
    /// the 1 GiB one; the userspace tests but the slow ones) and cxl
    /// (placement on the CXL node in ZONE_MOVABLE). --full (CI) boots
    /// numa-full and cxl-full (the whole suite) and four short runs:
    /// cxl-kernel (the CXL node as kernel memory), cxl-interleave (one
    /// region across two devices), numa-init-on-alloc (init_on_alloc=1) and
    /// socket2 (two sockets, per-socket weights). With --topology: that
    /// topology's first run, one boot (none in the table, as numa2: the
    /// whole suite there). Then the tests of `run -- CMD` and
    /// `shell` (xtask/src/commands/test/cmd_tests.rs), a guest each; with
    /// --topology, only those --filter names (of that topology);
    /// `xtask-shell` needs tmux.
    /// Results: target/tierkit/test-<run>[-debug|-debian]/{results.json,junit.xml,
    /// kcidb.json}; the time table in target/tierkit/timings.json.
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
    Matrix(MatrixArgs),
    /// Combine the results of several shards (or run directories) into one
    /// summary, JUnit and KCIDB file, and print the totals line.
    Merge(MergeArgs),
    /// Write LAVA job definitions (generated with tuxlava) that boot the
    /// same kernel and initramfs as the selected jobs, one per job, into
    /// target/tierkit/lava/.
    Lava(LavaArgs),
}

#[derive(Args, Clone)]
pub(super) struct KernelArgs {
    /// Use this kernel source tree (e.g. a git checkout; it must be clean:
    /// xtask builds out of tree). Default: Debian's linux-source-7.3.
    #[arg(long, value_name = "DIR", env = "TIERKIT_KERNEL_SRC")]
    pub(super) kernel_src: Option<PathBuf>,
    /// Regenerate the kernel config even if an identical one is remembered.
    #[arg(long)]
    pub(super) fresh_config: bool,
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
    pub(super) profile: Vec<Profile>,
}

impl KernelArgs {
    /// The profiles asked for, in order, each once.
    pub(super) fn profiles(&self) -> Vec<Profile> {
        let mut v: Vec<Profile> = Vec::new();
        for p in &self.profile {
            if !v.contains(p) {
                v.push(*p);
            }
        }
        if v.is_empty() {
            v.push(Profile::Default);
        }
        v
    }

    /// The one profile of a command that boots once (`run`, `bench`).
    pub(super) fn single_profile(&self, cmd: &str) -> Result<Profile> {
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
pub(super) struct ModuleArgs {
    #[command(flatten)]
    pub(super) kernel: KernelArgs,
    /// Build against this installed kernel's headers instead, e.g.
    /// /lib/modules/$(uname -r)/build (Debian: linux-headers-$(uname -r)).
    /// A tree without the kernel's Rust metadata (Debian ships none) gets
    /// it rebuilt once from Debian's linux-source-7.3 with Debian's own
    /// toolchain in a private trixie root (cached in ~/.cache/tierkit);
    /// the module goes to target/tierkit/tierkit-<release>-<config hash>.ko.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["kernel_src", "profile"])]
    pub(super) kdir: Option<PathBuf>,
}

#[derive(Args, Clone)]
pub(super) struct GuestArgs {
    #[command(flatten)]
    pub(super) kernel: KernelArgs,
    /// Guest NUMA topology, an entry of TOPOLOGIES (xtask/src/plan/topology/spec.rs)
    /// [default: numa; `test`: the runs of xtask/src/plan/runs.rs].
    #[arg(long, value_parser = TopologyKind::value_parser())]
    pub(super) topology: Option<TopologyKind>,
    /// Guest CPUs in total (numa2 splits them over its two CPU nodes).
    /// At most 8: kconfig/base.config sets CONFIG_NR_CPUS=8, and the guest
    /// would silently ignore the rest.
    #[arg(long, default_value_t = crate::boot::DEFAULT_CPUS, value_name = "N",
          value_parser = validate::parse_cpus, allow_negative_numbers = true)]
    pub(super) cpus: u32,
    /// DRAM per CPU node, in whole GiB [default: 8G; socket2: 2G]. q35 splits RAM around
    /// the PCI hole below 4 GiB, early kernel allocations and the memmap sit
    /// in node 0, the CXL node's memmap too (64 MiB per 4 GiB, allocated on
    /// node 0 at hot-add), and the tests leave unmovable pages behind: 6 GiB
    /// once left no free, naturally aligned GiB for the gigantic tests.
    #[arg(long, value_parser = util::parse_gib, value_name = "SIZE", allow_hyphen_values = true)]
    pub(super) dram: Option<u32>,
    /// Size of each memory-only node of numa, numa2 and socket2, in whole
    /// GiB [default: 3G; socket2: 2G].
    #[arg(long, value_parser = util::parse_gib, value_name = "SIZE", allow_hyphen_values = true)]
    pub(super) cxl_mem: Option<u32>,
    /// A CXL type-3 device of --topology cxl: whole GiB, optionally with
    /// the HMAT latency (ns) and bandwidth (GB/s) of its generic port, e.g.
    /// `4G` or `2G:300:5G`. Repeatable or comma-separated (`4G,2G`).
    /// [default: one 4G:250:10G]
    #[arg(long, alias = "cxl-devs", value_delimiter = ',', value_parser = CxlDevice::parse, value_name = "SIZE[:NS:GBS]")]
    pub(super) cxl_dev: Vec<CxlDevice>,
    /// Interleave each CXL region of --topology cxl across WAYS devices
    /// behind one host bridge (one root port each), with GRANULARITY bytes
    /// (256 to 16384, power of two, e.g. `4K`; default 256) per device in
    /// turn: `2`, `2:256`, `2:4096`. WAYS is 1 or 2; the --cxl-dev devices
    /// (default: WAYS of 4/WAYS GiB, a 4 GiB region) are grouped in order,
    /// WAYS per region, of one size and performance each.
    /// [default: 1, a region per device]
    #[arg(long, value_parser = CxlInterleave::parse, value_name = "WAYS[:GRAN]")]
    pub(super) cxl_interleave: Option<CxlInterleave>,
    /// HMAT latency (ns) and bandwidth (GB/s) of a CPU node's own DRAM,
    /// e.g. `100:20G` [default: numa, numa2: 100:200G; cxl: 100:20G; socket2: 100:300G].
    #[arg(long, value_parser = Perf::parse, value_name = "NS:GBS")]
    pub(super) dram_perf: Option<Perf>,
    /// QEMU CPU model (`-cpu`), e.g. `max` or `max,erms=off`
    /// [default: max,erms=off,fsrm=off,fsrs=off: see topology/spec.rs NO_REP_STOSB].
    #[arg(long = "cpu", value_name = "MODEL", value_parser = validate::parse_cpu_model)]
    pub(super) cpu_model: Option<String>,
    /// Use KVM even if it does not look usable.
    #[arg(long, conflicts_with = "no_kvm")]
    pub(super) kvm: bool,
    /// Never use KVM (TCG).
    #[arg(long)]
    pub(super) no_kvm: bool,
    /// Kill the guest after this many seconds (each command's default:
    /// [`super::help`]).
    #[arg(long, value_name = "SECS", value_parser = validate::parse_timeout, allow_negative_numbers = true)]
    pub(super) timeout: Option<u64>,
    /// Only run matching tests (each command's text: [`super::help`]).
    #[arg(long, value_name = "GLOB[,GLOB]", value_parser = validate::parse_filter)]
    pub(super) filter: Option<String>,
    /// Extra kernel command line parameters (repeatable).
    #[arg(long, value_name = "ARGS", value_parser = validate::parse_append)]
    pub(super) append: Vec<String>,
    /// How the CXL node's memory is onlined (`memhp_default_state=`):
    /// `movable` (ZONE_MOVABLE, as real systems do, so it can be offlined
    /// again) or `kernel` (ZONE_NORMAL).
    /// [default: movable; `test --full` also boots a short cxl run with
    /// `kernel` unless this is given]
    #[arg(long, value_enum, value_name = "ZONE")]
    pub(super) cxl_online: Option<qemu::CxlOnline>,
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
    pub(super) kernel_kind: KernelKind,
}

impl GuestArgs {
    /// The guest flags as the commands below take them.
    pub(super) fn flags(&self) -> GuestFlags {
        GuestFlags {
            kernel_src: self.kernel.kernel_src.clone(),
            fresh_config: self.kernel.fresh_config,
            kernel_kind: self.kernel_kind,
            topology: self.topology,
            cpus: self.cpus,
            dram: self.dram,
            cxl_mem: self.cxl_mem,
            cxl_dev: self.cxl_dev.clone(),
            cxl_interleave: self.cxl_interleave,
            dram_perf: self.dram_perf,
            cpu_model: self.cpu_model.clone(),
            kvm: if self.kvm {
                Some(true)
            } else if self.no_kvm {
                Some(false)
            } else {
                None
            },
            timeout: self.timeout,
            filter: self.filter.clone(),
            append: self.append.clone(),
            cxl_online: self.cxl_online,
        }
    }
}

#[derive(Args, Clone)]
pub(super) struct RunArgs {
    #[command(flatten)]
    pub(super) guest: GuestArgs,
    /// Also run the module's KUnit suites at insmod (`cargo xtask test`
    /// always does; they take a while under TCG).
    #[arg(long)]
    pub(super) kunit: bool,
    /// The command to run in the guest instead of the demos (after `--`).
    #[arg(last = true, value_name = "CMD", value_parser = clap::value_parser!(OsString))]
    pub(super) cmd: Vec<OsString>,
}

#[derive(Args, Clone)]
pub(super) struct ShellArgs {
    #[command(flatten)]
    pub(super) guest: GuestArgs,
}

#[derive(Args, Clone)]
pub(super) struct TestArgs {
    #[command(flatten)]
    pub(super) guest: GuestArgs,
    /// Skip the host tests (`cargo test --workspace`).
    #[arg(long)]
    pub(super) no_host_tests: bool,
    /// Everything: the whole suite on numa and cxl, with the slow
    /// reliability tests and the 1 GiB work on CXL memory, plus short runs
    /// with the CXL node as kernel memory, with one region across two CXL
    /// devices, with init_on_alloc=1, and on two sockets (xtask/src/plan/runs.rs,
    /// FULL_RUNS).
    /// CI runs this (see --ci). Without it: the quick runs (QUICK_RUNS).
    #[arg(long)]
    pub(super) full: bool,
    /// What .ci/run boots (xtask/src/plan/runs.rs, ci_boots): the default
    /// profile's full runs, then the debug profile's whole suite on numa,
    /// its quick cxl run and its socket2 run, then Debian's kernel (--kernel debian) on the
    /// quick numa and cxl runs and on socket2; one combined totals line. Not with --full,
    /// --profile, --topology or --kernel, which select other boots.
    #[arg(long, conflicts_with_all = ["full", "profile", "kernel_kind", "topology"])]
    pub(super) ci: bool,
    /// Boot only the job ID of the selected boots (`cargo xtask matrix`
    /// lists them: the run directory's name after `test-`, e.g.
    /// `numa-full`, `numa-full-debug`, `cxl-debian`).
    #[arg(long, value_name = "ID", value_parser = parse_job_id)]
    pub(super) job: Option<String>,
    /// Run the boots (and the run/shell tests) N times in a row, the host
    /// tests once; stop at the first round that fails, its results left in
    /// its run directories. Shows that a check does not pass by chance:
    /// `test --ci --job numa-init-on-alloc --no-host-tests --repeat 10`.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = validate::parse_repeat, allow_negative_numbers = true)]
    pub(super) repeat: u32,
    /// Boot N guests at once (1 or 2; default: 2 with --ci on a host with
    /// at least 2 CPUs, else 1), where the host's memory holds the largest
    /// guest of each lane, their QEMUs and 2 GiB (else one lane, said in
    /// one line).
    /// Lane 2 takes the debug profile's two long boots, each a child `test
    /// --job ID` whose output is printed whole after lane 1's boots
    /// (target/tierkit/lanes/). A TCG guest keeps about one host CPU busy.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=2))]
    pub(super) lanes: Option<u32>,
}

/// A job id: lower-case letters, digits and `-`.
pub(super) fn parse_job_id(s: &str) -> std::result::Result<String, String> {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        Ok(s.to_string())
    } else {
        Err(
            "a job id is lower-case letters, digits and '-' (`cargo xtask matrix` lists them)"
                .into(),
        )
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(super) enum BenchKind {
    /// Parallel gigantic-page clearing (/bin/tk-bench-clear).
    Clear,
    /// Weighted-interleave placement (/bin/tk-bench-wi).
    Wi,
    /// Time to first use of 1 GiB: tierkit's gigantic mode against
    /// hugetlb's first fault (/bin/tk-bench-gigantic).
    Gigantic,
}

#[derive(Args, Clone)]
pub(super) struct BenchArgs {
    /// One benchmark; none: all of them and the report.
    #[arg(value_enum)]
    pub(super) which: Option<BenchKind>,
    #[command(flatten)]
    pub(super) guest: GuestArgs,
}

/// `matrix`'s and `lava`'s flags that pick the boots, as `test` does.
#[derive(Args, Clone, Debug, Default)]
pub(super) struct SelectArgs {
    /// A named matrix (the boots of one `test` command line); instead of
    /// the flags below.
    #[arg(
        value_enum,
        value_name = "MATRIX",
        conflicts_with_all = ["ci", "full", "profile", "kernel_kind", "topology"]
    )]
    pub(super) matrix: Option<matrix::Named>,
    /// The boots of `cargo xtask test --ci` (xtask/src/plan/runs.rs, ci_boots);
    /// the default when no other of these flags is given.
    #[arg(long, conflicts_with_all = ["full", "profile", "kernel_kind", "topology"])]
    pub(super) ci: bool,
    /// The boots of `cargo xtask test --full`.
    #[arg(long)]
    pub(super) full: bool,
    /// The boots of `cargo xtask test --profile PROFILE[,PROFILE]`.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "PROFILE")]
    pub(super) profile: Vec<Profile>,
    /// The boots of `cargo xtask test --kernel KERNEL`.
    #[arg(long = "kernel", value_enum, value_name = "KERNEL")]
    pub(super) kernel_kind: Option<KernelKind>,
    /// The boot of `cargo xtask test --topology TOPOLOGY`.
    #[arg(long, value_parser = TopologyKind::value_parser())]
    pub(super) topology: Option<TopologyKind>,
}

impl SelectArgs {
    /// As a [`Selection`]: the named matrix, or `--ci` unless another flag
    /// was given.
    pub(super) fn selection(&self) -> Selection {
        if let Some(m) = self.matrix {
            return m.selection();
        }
        let other = self.full
            || !self.profile.is_empty()
            || self.kernel_kind.is_some()
            || self.topology.is_some();
        Selection {
            ci: self.ci || !other,
            full: self.full,
            profiles: self.profile.clone(),
            kernel: self.kernel_kind.unwrap_or_default(),
            topology: self.topology,
        }
    }
}

/// `cargo xtask matrix`.
#[derive(Args, Clone)]
pub(super) struct MatrixArgs {
    #[command(flatten)]
    pub(super) select: SelectArgs,
    /// Run the K-th of N shares of the jobs here instead of listing them
    /// (jobs K, K+N, K+2N, ..., counting from 1), one after the other as
    /// `test` would; results in target/tierkit/shard-K-of-N/.
    #[arg(long, value_name = "K/N", value_parser = Shard::parse, allow_hyphen_values = true)]
    pub(super) shard: Option<Shard>,
}

/// `cargo xtask merge`.
#[derive(Args, Clone)]
pub(super) struct MergeArgs {
    /// Directories with results: the shards' `target/tierkit/shard-K-of-N/`
    /// of `matrix --shard` (as CI downloads them), or run directories of
    /// `test`; searched for `results.json` a few levels down.
    #[arg(required = true, value_name = "DIR")]
    pub(super) dirs: Vec<PathBuf>,
    /// Where the merged summary.txt, results.json, junit.xml and kcidb.json
    /// go [default: target/tierkit/merged].
    #[arg(long, value_name = "DIR")]
    pub(super) out: Option<PathBuf>,
    /// The job list of `cargo xtask matrix` (its JSON, or the bare `jobs`
    /// list): a job without results counts as one failure.
    #[arg(long, value_name = "FILE")]
    pub(super) expect: Option<PathBuf>,
}

/// `cargo xtask lava`.
#[derive(Args, Clone)]
pub(super) struct LavaArgs {
    #[command(flatten)]
    pub(super) select: SelectArgs,
    /// Only the jobs of shard K of N (as `matrix --shard`).
    #[arg(long, value_name = "K/N", value_parser = Shard::parse, allow_hyphen_values = true)]
    pub(super) shard: Option<Shard>,
    /// Only the job ID (`cargo xtask matrix` lists them).
    #[arg(long, value_name = "ID", value_parser = parse_job_id, conflicts_with = "shard")]
    pub(super) job: Option<String>,
    /// Where the lab downloads the artifacts: BASE/<job>/bzImage and
    /// BASE/<job>/initramfs.cpio (upload target/tierkit/lava/ there)
    /// [default: file:// paths on this machine].
    #[arg(long, value_name = "URL", value_parser = crate::lava::parse_artifact_url)]
    pub(super) artifact_url: Option<String>,
    /// Output directory [default: target/tierkit/lava].
    #[arg(long, value_name = "DIR")]
    pub(super) out: Option<PathBuf>,
}
