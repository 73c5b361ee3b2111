//! What the running kernel says about itself: its command line
//! ([`kernel_param`]), where sysfs lists its nodes, debugfs, THP and
//! `init_on_alloc`.

use crate::linux::sys;
use std::path::Path;

/// Where the kernel lists its NUMA nodes (drivers/base/node.c).
pub const NODE_SYSFS: &str = "/sys/devices/system/node";

/// The value of the kernel command-line parameter `key` (`key=value` in
/// `/proc/cmdline`); the last occurrence wins, as the kernel's own parsing
/// leaves it for module and core parameters. `None` without the file or
/// the parameter.
pub fn kernel_param(key: &str) -> Option<String> {
    let cmdline = std::fs::read_to_string("/proc/cmdline").ok()?;
    tierkit_protocol::param::value(&cmdline, key).map(str::to_string)
}

/// Mounts debugfs on `/sys/kernel/debug` if nothing is mounted there yet
/// (as root; errors are ignored, the caller then finds no files).
pub fn ensure_debugfs() {
    let mounted = std::fs::read_to_string("/proc/mounts")
        .map(|m| {
            m.lines()
                .any(|l| l.split_whitespace().nth(1) == Some("/sys/kernel/debug"))
        })
        .unwrap_or(true);
    if !mounted && Path::new("/sys/kernel/debug").is_dir() {
        // SAFETY: plain mount(2) with NUL-terminated static strings.
        unsafe {
            libc::mount(
                c"none".as_ptr(),
                c"/sys/kernel/debug".as_ptr(),
                c"debugfs".as_ptr(),
                0,
                std::ptr::null(),
            );
        }
    }
}

/// A one-line description of the THP setup that matters for the kernel
/// side of a comparison: the global mode and whether `madvise` exists.
pub fn thp_note() -> String {
    let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "no THP".into());
    // madvise(0, 0, MADV_NORMAL) is a no-op that only tells whether the
    // syscall exists.
    // SAFETY: an empty range; MADV_NORMAL changes nothing.
    let madv = match unsafe { sys::madvise(std::ptr::null_mut(), 0, libc::MADV_NORMAL) } {
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
            "no madvise (CONFIG_ADVISE_SYSCALLS=n): THP off per process with PR_SET_THP_DISABLE"
        }
        _ => "MADV_NOHUGEPAGE per mapping",
    };
    format!("THP enabled: {mode}; {madv}")
}

/// Whether the kernel zeroes every page it allocates (`init_on_alloc`):
/// from the boot's `mem auto-init: ..., heap alloc:on|off` line in the
/// kernel log, else from the last `init_on_alloc=` of `/proc/cmdline`;
/// `None` if neither says. With it on, tierkit takes the allocator's
/// zeroing as a gigantic range's clear (`last_workers` 0).
pub fn init_on_alloc() -> Option<bool> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/kmsg")
    {
        let mut buf = vec![0u8; 8192];
        while let Ok(n) = f.read(&mut buf) {
            if n == 0 {
                break;
            }
            let rec = String::from_utf8_lossy(&buf[..n]);
            if let Some(i) = rec.find("heap alloc:") {
                return Some(rec[i + "heap alloc:".len()..].starts_with("on"));
            }
        }
    }
    kernel_param("init_on_alloc").map(|v| matches!(v.as_str(), "1" | "y" | "Y" | "on"))
}
