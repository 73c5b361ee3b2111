//! A boot that fails early fails fast: the console line after which the
//! guest will do nothing worth waiting for (a kernel panic), and the one
//! line that says why a boot never reached /init.
//!
//! With `panic=-1` and QEMU's `-no-reboot`, a panic ends QEMU at once; a
//! panic before the kernel has parsed `panic=` (or with `panic=0`) leaves
//! the guest halted until xtask's timeout. The live console stream
//! ([`crate::boot::qemu::boot`]) therefore stops the guest [`AFTER_PANIC`] after
//! a panic line (time for the panic's own trace to arrive), whatever QEMU
//! does.

use super::{classify, CrashKind};
use std::time::Duration;
use tierkit_protocol::marker::Marker;

/// How long the guest may go on after a panic line.
pub const AFTER_PANIC: Duration = Duration::from_secs(5);

/// Whether a console line (without its printk prefix) ends the boot.
pub fn ends_boot(text: &str) -> bool {
    classify(text) == Some(CrashKind::Panic)
}

/// The first console line that marks /init's start: the kernel's `Run
/// /init as init process`, or /init's `TIERKIT-BOOT`.
fn reached_init(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("Run /") || matches!(Marker::find(t), Some(Marker::Boot(_)))
}

/// Why a boot failed before /init, on one line: the panic's message with
/// the first kernel report before it (an oops, a BUG), the kernel's own
/// word on a missing root or init, else QEMU's first error; `None` when
/// the console says nothing about it.
pub fn early_reason(console: &str, qemu_stderr: &str) -> Option<String> {
    let mut first_report: Option<&str> = None;
    let mut init_failed: Option<&str> = None;
    let mut before_init = true;
    for line in console.lines() {
        let (_, text) = crate::judge::printk::split_seconds(line);
        let t = text.trim();
        if reached_init(t) {
            before_init = false;
        }
        let no_root = [
            "VFS: Cannot open root device",
            "No filesystem could mount root",
        ];
        if t.starts_with("Failed to execute ") || no_root.iter().any(|p| t.starts_with(p)) {
            init_failed.get_or_insert(t);
        }
        match classify(t) {
            Some(CrashKind::Panic) => {
                let when = if before_init {
                    "kernel panic before /init"
                } else {
                    "kernel panic"
                };
                let after = first_report
                    .or(init_failed)
                    .map(|r| format!(" (after: {r})"))
                    .unwrap_or_default();
                return Some(format!("{when}: {t}{after}"));
            }
            Some(_) => {
                first_report.get_or_insert(t);
            }
            None => {}
        }
    }
    if let Some(e) = qemu_stderr
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("qemu-system") || l.contains("error"))
    {
        return Some(format!("QEMU: {e}"));
    }
    init_failed.map(|t| format!("no init: {t}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_ends_the_boot_and_says_why_on_one_line() {
        assert!(ends_boot(
            "Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)"
        ));
        assert!(!ends_boot("Run /init as init process"));
        let missing_root = "\
[    0.930685] VFS: Cannot open root device \"vda\" or unknown-block(0,0): error -6
[    0.930700] Please append a correct \"root=\" boot option; here are the available partitions:
[    0.930800] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)
[    0.930900] CPU: 0 UID: 0 PID: 1 Comm: swapper/0 Not tainted 7.3.0-tierkit #1
";
        assert_eq!(
            early_reason(missing_root, "").as_deref(),
            Some("kernel panic before /init: Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0) (after: VFS: Cannot open root device \"vda\" or unknown-block(0,0): error -6)")
        );
        let bogus_init = "\
[    0.930685] Run /bogus as init process
[    0.930700] Failed to execute /bogus (error -2)
[    0.930800] Kernel panic - not syncing: Requested init /bogus failed (error -2).
";
        assert_eq!(
            early_reason(bogus_init, "").as_deref(),
            Some("kernel panic: Kernel panic - not syncing: Requested init /bogus failed (error -2). (after: Failed to execute /bogus (error -2))")
        );
        let oops = "\
[    0.500000] BUG: kernel NULL pointer dereference, address: 0000000000000008
[    0.500100] Oops: Oops: 0000 [#1] SMP NOPTI
[    0.500200] Kernel panic - not syncing: Fatal exception
";
        assert_eq!(
            early_reason(oops, "").as_deref(),
            Some("kernel panic before /init: Kernel panic - not syncing: Fatal exception (after: BUG: kernel NULL pointer dereference, address: 0000000000000008)")
        );
        let qemu = "qemu-system-x86_64: -object memory-backend-file,id=m1: can't open backing store /x: No such file or directory\n";
        assert_eq!(
            early_reason("", qemu).as_deref(),
            Some("QEMU: qemu-system-x86_64: -object memory-backend-file,id=m1: can't open backing store /x: No such file or directory")
        );
        assert_eq!(early_reason("[ 0.1] Linux version 7.3\n", ""), None);
    }
}
