//! Build profiles: the default kernel, and `--profile debug`, a second
//! kernel configuration with the kernel's sanitizers and lock, memory and
//! hang checkers, built and cached beside the default one.
//!
//! What a profile changes, stage by stage:
//! - kernel config: the fragments in `kconfig/*.config`, plus for `debug`
//!   those in `kconfig/debug/*.config` (the default never reads that
//!   folder); the build is cached under its own key, as every config is;
//! - module: `debug` builds with `CLIPPY=1` and warnings as errors
//!   ([`Profile::module_make_args`]);
//! - guest: `debug` adds command-line parameters
//!   ([`Profile::kernel_cmdline`]) and `tierkit.profile=debug`, on which
//!   /init wraps insmod and rmmod in kmemleak scans;
//! - output: `target/tierkit/<mode>-<topology>-debug/`.

use clap::ValueEnum;
use std::fmt;

/// `--profile`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Profile {
    /// The default kernel: tinyconfig plus kconfig/*.config.
    #[default]
    Default,
    /// The default kernel plus kconfig/debug/*.config: KASAN, UBSAN,
    /// lockdep, kmemleak, DEBUG_VM/LIST/OBJECTS, soft-lockup, hung-task
    /// and RCU-stall detectors with short timeouts, panic_on_warn; the
    /// module is built with clippy, warnings as errors.
    Debug,
}

/// `watchdog_thresh`: the soft-lockup detector reports a CPU that has not
/// scheduled for twice this many seconds (kernel default 10, i.e. 20 s).
pub const WATCHDOG_THRESH: u32 = 5;
/// Seconds before an RCU grace period held up by a CPU or a task is
/// reported (kernel default 21).
pub const RCU_STALL_SECS: u32 = 10;
/// Seconds a task may stay in D state before the hung-task detector
/// reports it (kernel default 120). It must exceed the longest
/// uninterruptible wait the suite makes on purpose: KUnit's executor waits
/// for each case in `wait_for_completion_timeout()` (D state) from insmod's
/// context.
pub const HUNG_TASK_SECS: u32 = 60;

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Default => "default",
            Profile::Debug => "debug",
        }
    }

    /// Subfolders of `kconfig/` whose `*.config` fragments this profile
    /// merges after `kconfig/*.config`.
    pub fn fragment_dirs(self) -> &'static [&'static str] {
        match self {
            Profile::Default => &[],
            Profile::Debug => &["debug"],
        }
    }

    /// Appended to per-profile names: config stage dirs and run dirs.
    pub fn suffix(self) -> &'static str {
        match self {
            Profile::Default => "",
            Profile::Debug => "-debug",
        }
    }

    /// Extra `make` arguments of the module build. `debug`: clippy
    /// (`CLIPPY=1` runs clippy-driver instead of rustc, with the kernel's
    /// lint set from its Makefile), every Rust warning an error
    /// (`KRUSTFLAGS`, appended to the kernel's own rustc flags last),
    /// diagnostics as JSON so that xtask can list them, and C warnings
    /// (the shim) as errors too.
    pub fn module_make_args(self) -> Vec<String> {
        match self {
            Profile::Default => vec![],
            Profile::Debug => vec![
                "CLIPPY=1".into(),
                "KRUSTFLAGS=-Dwarnings --error-format=json".into(),
                "KCFLAGS=-Werror".into(),
            ],
        }
    }

    /// Kernel command line parameters of the profile.
    pub fn kernel_cmdline(self) -> Vec<String> {
        match self {
            Profile::Default => vec![],
            Profile::Debug => vec![
                tierkit_protocol::param::word(
                    tierkit_protocol::param::PROFILE,
                    tierkit_protocol::param::PROFILE_DEBUG,
                ),
                // Asked for; x86 kernels since 7.0 refuse it (see
                // kconfig/debug/debug.config), and /init reports the model
                // the guest actually runs.
                "preempt=none".into(),
                // 4-level paging. With LA57 (QEMU's `-cpu max` has it),
                // identify_cpu() zeroes boot_cpu_data's capability words
                // before alternatives are patched, so for that window
                // pgtable_l5_enabled() is false: an interrupt then takes
                // its irq_desc in the 5-level direct map for an address
                // KASAN has no shadow for, and reports a wild-memory-access
                // in do_raw_spin_lock() from handle_edge_irq() at 0.005 s
                // (one of three debug boots on 2026-12-02; not tierkit's).
                "no5lvl".into(),
                "panic_on_warn=1".into(),
                format!("watchdog_thresh={WATCHDOG_THRESH}"),
                format!("rcupdate.rcu_cpu_stall_timeout={RCU_STALL_SECS}"),
                format!("sysctl.kernel.hung_task_timeout_secs={HUNG_TASK_SECS}"),
            ],
        }
    }

    /// How much longer than the default a guest may take before xtask
    /// kills it.
    pub fn timeout_factor(self) -> u64 {
        match self {
            Profile::Default => 1,
            Profile::Debug => 4,
        }
    }
}

/// `--kernel`: whose kernel the guest boots. Orthogonal to [`Profile`],
/// which configures tierkit's own kernel: Debian's comes configured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum KernelKind {
    /// tierkit's kernel: Debian's linux-source-7.3 (or --kernel-src),
    /// tinyconfig plus kconfig/*.config, built with LLVM.
    #[default]
    Tierkit,
    /// Debian's own linux-image-7.3.4+deb13-amd64 (trixie-backports), as
    /// a user runs it: gcc-built, KUnit off, init_on_alloc=1 by default,
    /// CXL/DAX/kmem as modules; tierkit.ko built against its headers.
    Debian,
}

impl KernelKind {
    pub fn name(self) -> &'static str {
        match self {
            KernelKind::Tierkit => "tierkit",
            KernelKind::Debian => "debian",
        }
    }

    /// Appended to run directories after the profile's.
    pub fn suffix(self) -> &'static str {
        match self {
            KernelKind::Tierkit => "",
            KernelKind::Debian => "-debian",
        }
    }

    /// Whether the kernel runs tierkit's KUnit suites (CONFIG_KUNIT).
    pub fn has_kunit(self) -> bool {
        self == KernelKind::Tierkit
    }

    /// What the guest gets on the command line that the kernel's own
    /// defaults would not give. tierkit's kernel: `init_on_alloc=0` (the
    /// allocator must not zero gigantic ranges serially). Debian's: nothing,
    /// it boots as shipped.
    pub fn kernel_cmdline(self) -> &'static [&'static str] {
        match self {
            KernelKind::Tierkit => &["init_on_alloc=0"],
            KernelKind::Debian => &[],
        }
    }

    /// Whether the kernel adds the memory ACPI describes as hot-pluggable
    /// (`CONFIG_ACPI_HOTPLUG_MEMORY`, the driver of the ACPI memory devices
    /// a QEMU `pc-dimm` is): Debian's does; tierkit's is built without it
    /// (kconfig/), so a topology's hot-pluggable node stays boot memory there
    /// ([`crate::plan::topology::TopologyOpts::mem_hotplug`]).
    pub fn acpi_memory_hotplug(self) -> bool {
        self == KernelKind::Debian
    }

    /// QEMU `-cpu` flags the kernel needs on a topology with CXL devices:
    /// Debian's kernel (no CXL_REGION_INVALIDATION_TEST) refuses to commit
    /// a region when it sees a hypervisor, as it could not flush the CPU
    /// caches of the region's range.
    pub fn cxl_cpu_flags(self) -> &'static str {
        match self {
            KernelKind::Tierkit => "",
            KernelKind::Debian => ",hypervisor=off",
        }
    }
}

impl fmt::Display for KernelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_profile_changes_nothing() {
        let p = Profile::default();
        assert_eq!(p, Profile::Default);
        assert!(p.fragment_dirs().is_empty());
        assert!(p.module_make_args().is_empty());
        assert!(p.kernel_cmdline().is_empty());
        assert_eq!(p.suffix(), "");
        assert_eq!(p.timeout_factor(), 1);
    }

    #[test]
    fn kernels() {
        assert_eq!(KernelKind::default(), KernelKind::Tierkit);
        assert_eq!(KernelKind::Tierkit.kernel_cmdline(), ["init_on_alloc=0"]);
        // Debian's kernel boots with its own defaults (init_on_alloc=1).
        assert!(KernelKind::Debian.kernel_cmdline().is_empty());
        assert!(!KernelKind::Debian.has_kunit() && KernelKind::Tierkit.has_kunit());
        assert_eq!(KernelKind::Debian.suffix(), "-debian");
        assert_eq!(KernelKind::Tierkit.suffix(), "");
        assert_eq!(KernelKind::Debian.cxl_cpu_flags(), ",hypervisor=off");
        assert_eq!(KernelKind::Tierkit.cxl_cpu_flags(), "");
    }

    #[test]
    fn debug_profile() {
        let p = Profile::Debug;
        assert_eq!(p.fragment_dirs(), ["debug"]);
        let m = p.module_make_args();
        assert!(m.contains(&"CLIPPY=1".to_string()));
        assert!(m
            .iter()
            .any(|a| a.starts_with("KRUSTFLAGS=") && a.contains("-Dwarnings")));
        let c = p.kernel_cmdline();
        for w in [
            "preempt=none",
            "no5lvl",
            "panic_on_warn=1",
            "tierkit.profile=debug",
        ] {
            assert!(c.iter().any(|x| x == w), "{w} in {c:?}");
        }
        assert!(c.iter().any(|x| x.starts_with("watchdog_thresh=")));
        assert!(c
            .iter()
            .any(|x| x.starts_with("rcupdate.rcu_cpu_stall_timeout=")));
        assert!(c
            .iter()
            .any(|x| x.starts_with("sysctl.kernel.hung_task_timeout_secs=")));
    }
}
