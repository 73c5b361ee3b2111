//! The kernel command-line parameters of /init: xtask writes them
//! (`xtask/src/boot/qemu.rs`), /init reads them from `/proc/cmdline`.

/// `tierkit.mode=run|test|bench-<name>|cmd|shell`.
pub const MODE: &str = "tierkit.mode";
/// `tierkit.filter=GLOB[,GLOB...]`: the userspace tests to run.
pub const FILTER: &str = "tierkit.filter";
/// `tierkit.skip=GLOB[,GLOB...]`: userspace tests left out.
pub const SKIP: &str = "tierkit.skip";
/// `tierkit.cxl=MIB[:WAYS:GRAN][,...]`: the CXL regions to assemble
/// ([`crate::cxl`]).
pub const CXL: &str = "tierkit.cxl";
/// `tierkit.profile=debug`: kmemleak scans around the module's life.
pub const PROFILE: &str = "tierkit.profile";
/// The value of [`PROFILE`] that asks for the kmemleak scans.
pub const PROFILE_DEBUG: &str = "debug";
/// `tierkit.deadline_scale=N`: userspace tests' deadlines are N times
/// their own ([`crate::deadline`]); 1 when absent.
pub const DEADLINE_SCALE: &str = "tierkit.deadline_scale";
/// `kunit.filter_glob=GLOB`: read by the kernel's KUnit, not /init.
pub const KUNIT_FILTER: &str = "kunit.filter_glob";
/// `preempt=MODEL`: read by the kernel; /init reports whether it took.
pub const PREEMPT: &str = "preempt";

/// `tierkit.mode=`'s values: the mode of `cargo xtask bench <name>` is
/// [`BENCH_PREFIX`]`<name>`.
pub const MODE_RUN: &str = "run";
pub const MODE_TEST: &str = "test";
pub const MODE_CMD: &str = "cmd";
pub const MODE_SHELL: &str = "shell";
pub const BENCH_PREFIX: &str = "bench-";

/// `name=value`.
pub fn word(name: &str, value: &str) -> String {
    format!("{name}={value}")
}

/// The value of the last `name=` word of a command line (a later word
/// wins, as with the kernel's own parameters).
pub fn value<'a>(cmdline: &'a str, name: &str) -> Option<&'a str> {
    cmdline
        .split_whitespace()
        .filter_map(|w| w.strip_prefix(name)?.strip_prefix('='))
        .next_back()
}

/// Files of the initramfs that xtask writes for /init.
pub mod files {
    /// The command of `run -- CMD` and the terminal ([`crate::cmd`]).
    pub const CMD: &str = "/etc/tierkit/cmd";
    /// What the guest was built from (kernel, config, binaries): one line.
    pub const BUILD_INFO: &str = "/etc/tierkit/build-info";
    /// Modules /init loads before tierkit, `NN-<name>.ko` in load order.
    pub const PRE_MODULES: &str = "/lib/modules/pre";
    /// The module under test.
    pub const TIERKIT_KO: &str = "/lib/modules/tierkit.ko";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_from_a_command_line() {
        let c = "console=ttyS0 tierkit.mode=test tierkit.cxl=4096:2:256 tierkit.mode=bench-wi\n";
        assert_eq!(value(c, MODE), Some("bench-wi"));
        assert_eq!(value(c, CXL), Some("4096:2:256"));
        assert_eq!(value(c, FILTER), None);
        // A longer name with the same start is another parameter.
        assert_eq!(value("tierkit.modex=1", MODE), None);
        assert_eq!(word(SKIP, "a,b"), "tierkit.skip=a,b");
    }
}
