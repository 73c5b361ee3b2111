//! The facts of a boot, decided once by the judge: which run and job, the
//! kernel (its source, version and build), the topology, the accelerator
//! QEMU used, when it started and how long it took. The reports (KCIDB,
//! JUnit, results.json) only write them.

use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

use crate::boot::qemu::{Accel, GuestConfig};
use crate::judge::records::UserTest;
use crate::kernels::kernel::KernelBuild;
use crate::kernels::profile::{KernelKind, Profile};
use crate::util;

/// One boot's facts, as the reports write them.
#[derive(Clone, Debug)]
pub struct Boot {
    /// The job's id (`cargo xtask matrix`): the run directory's name after
    /// `test-`, e.g. `numa-full`, `numa-full-debug`, `cxl-debian`.
    pub job: String,
    /// The run of `xtask/src/plan/runs.rs`, e.g. `numa-full`.
    pub run: String,
    pub profile: Profile,
    pub kernel: KernelKind,
    /// `numa`, `cxl`, ...
    pub topology: String,
    /// The topology as `Topology::describe` tells it.
    pub topology_detail: String,
    /// `kvm` or `tcg`.
    pub accel: String,
    /// The kernel's source (`linux-source-7.3`, a `--kernel-src` tree's
    /// name, Debian's image) and `uname -r` version.
    pub kernel_source: KernelSource,
    /// The kernel's cache key and config hash.
    pub kernel_key: String,
    /// When the boot started (RFC 3339, UTC) and how long it took.
    pub start_time: String,
    pub duration_secs: f64,
}

impl Boot {
    /// The build's name: the profile, or the kernel for a kernel tierkit
    /// did not build.
    pub fn build_name(&self) -> &'static str {
        match self.kernel {
            KernelKind::Tierkit => self.profile.name(),
            k => k.name(),
        }
    }
}

impl Boot {
    /// The facts of a test boot in `run_dir` (named `test-<job>`) of `run`.
    pub fn of(
        run_dir: &Path,
        run: &str,
        cfg: &GuestConfig,
        kb: &KernelBuild,
        start_time: String,
        boot_time: Duration,
    ) -> Boot {
        Boot {
            job: run_dir
                .file_name()
                .and_then(|n| n.to_str())
                .map_or("", |n| n.trim_start_matches("test-"))
                .to_string(),
            run: run.to_string(),
            profile: cfg.kernel.profile,
            kernel: cfg.kernel.kind,
            topology: cfg.topology.kind.name().to_string(),
            topology_detail: cfg.topology.describe(),
            accel: accel_name(cfg.accel),
            kernel_source: KernelSource {
                name: match cfg.kernel.kind {
                    KernelKind::Debian => format!("Debian linux-image-{}", kb.version),
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
}

/// `kvm` or `tcg`.
pub fn accel_name(a: Accel) -> String {
    format!("{a:?}").to_lowercase()
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelSource {
    pub name: String,
    pub version: String,
}

/// The job of the `run -- CMD` and `shell` tests ([`crate::commands::test::cmd_tests`]).
pub const CMD_JOB: &str = "xtask-cmd";

/// The facts of the `run -- CMD` and `shell` tests: the default build of
/// one kernel, and per test the topology and accelerator of its boot.
#[derive(Clone, Debug)]
pub struct CmdTestsFacts {
    pub boot: Boot,
    /// (test, topology, accelerator).
    pub tests: Vec<(String, String, String)>,
}

impl CmdTestsFacts {
    /// A test's topology and accelerator (`numa` and the job's when it is
    /// not one of them, as a `[harness]` failure).
    pub fn of(&self, name: &str) -> (&str, &str) {
        self.tests
            .iter()
            .find(|(n, _, _)| n == name)
            .map_or(("numa", self.boot.accel.as_str()), |(_, t, a)| {
                (t.as_str(), a.as_str())
            })
    }

    /// Decided once, before the report: the kernel's version, and the
    /// accelerator each boot got: KVM when this host has it, but on cxl
    /// only with a QEMU that has the fix ([`crate::plan::accel`]).
    /// `topologies`: test name -> topology.
    pub fn decide(
        kernel: KernelKind,
        topologies: &[(&str, &str)],
        tests: &[UserTest],
        start_time: String,
    ) -> CmdTestsFacts {
        let version = match kernel {
            KernelKind::Debian => crate::kernels::debian::RELEASE.to_string(),
            KernelKind::Tierkit => util::cache_dir()
                .ok()
                .and_then(|c| {
                    let m = c
                        .join("src")
                        .join(crate::kernels::source::DEFAULT_PACKAGE)
                        .join("Makefile");
                    crate::kernels::kconfig::makefile_version(&std::fs::read_to_string(m).ok()?)
                        .ok()
                })
                .unwrap_or_else(|| "unknown".into()),
        };
        let name = match kernel {
            KernelKind::Debian => format!("Debian linux-image-{version}"),
            KernelKind::Tierkit => crate::kernels::source::DEFAULT_PACKAGE.to_string(),
        };
        let base = if crate::plan::accel::kvm_problem().is_none() {
            Accel::Kvm
        } else {
            Accel::Tcg
        };
        let qemu = util::cmd_stdout("qemu-system-x86_64", &["--version"])
            .and_then(|v| crate::plan::accel::parse_qemu_version(&v));
        let env = std::env::var(crate::plan::accel::OVERRIDE_ENV).ok();
        let accel_of = |topology: &str| {
            let cxl = topology == "cxl";
            accel_name(crate::plan::accel::decide(base, false, cxl, qemu, env.as_deref()).0)
        };
        let boot = Boot {
            job: CMD_JOB.into(),
            run: CMD_JOB.into(),
            profile: Profile::Default,
            kernel,
            topology: String::new(),
            topology_detail: String::new(),
            accel: accel_of("numa"),
            kernel_source: KernelSource { name, version },
            kernel_key: String::new(),
            start_time,
            duration_secs: tests.iter().map(|t| t.duration_ms as f64 / 1000.0).sum(),
        };
        let tests = topologies
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string(), accel_of(t)))
            .collect();
        CmdTestsFacts { boot, tests }
    }
}
