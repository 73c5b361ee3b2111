//! The guest's file systems, as a table: what the kernel's initramfs does
//! not mount itself.

use std::ffi::CString;
use std::io;
use std::path::Path;

/// One mount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mount {
    pub source: &'static str,
    pub target: &'static str,
    pub fstype: &'static str,
    /// Created first (`mkdir -p`).
    pub mkdir: bool,
    /// A failure is expected on some kernels (devtmpfs mounted by the
    /// kernel already, no hugetlbfs) and is not reported.
    pub quiet: bool,
}

const fn m(fstype: &'static str, target: &'static str, mkdir: bool, quiet: bool) -> Mount {
    Mount {
        source: fstype,
        target,
        fstype,
        mkdir,
        quiet,
    }
}

/// In this order: /sys before the debugfs below it, /dev before
/// /dev/hugepages.
pub const MOUNTS: &[Mount] = &[
    m("proc", "/proc", false, false),
    m("sysfs", "/sys", false, false),
    m("devtmpfs", "/dev", false, true),
    m("debugfs", "/sys/kernel/debug", false, false),
    m("tmpfs", "/tmp", false, false),
    m("hugetlbfs", "/dev/hugepages", true, true),
];

/// Directories made besides the mount points.
pub const DIRS: &[&str] = &["/root"];

/// `mount(2)`.
pub fn mount(source: &str, target: &Path, fstype: &str, data: Option<&str>) -> io::Result<()> {
    let c = |s: &str| CString::new(s).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL));
    let (src, ty) = (c(source)?, c(fstype)?);
    let tgt = CString::new(std::os::unix::ffi::OsStrExt::as_bytes(target.as_os_str()))
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let data = data.map(c).transpose()?;
    let dp = data
        .as_ref()
        .map_or(std::ptr::null(), |d| d.as_ptr().cast::<libc::c_void>());
    // SAFETY: every pointer is a NUL-terminated string (or null for no
    // data) that lives across the call.
    let r = unsafe { libc::mount(src.as_ptr(), tgt.as_ptr(), ty.as_ptr(), 0, dp) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Mounts [`MOUNTS`]; a failure that is not `quiet` is printed to the
/// console (as busybox mount did) and the rest still mounted.
pub fn mount_all() {
    for d in DIRS {
        let _ = std::fs::create_dir_all(d);
    }
    for mt in MOUNTS {
        let target = Path::new(mt.target);
        if mt.mkdir {
            let _ = std::fs::create_dir_all(target);
        }
        if let Err(e) = mount(mt.source, target, mt.fstype, None) {
            if !mt.quiet {
                let e = super::errno_text(&e);
                eprintln!("mount: mounting {} on {} failed: {e}", mt.source, mt.target);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_come_first() {
        for (i, a) in MOUNTS.iter().enumerate() {
            for b in &MOUNTS[i + 1..] {
                assert!(
                    !a.target.starts_with(&format!("{}/", b.target)),
                    "{} is mounted before its parent {}",
                    a.target,
                    b.target
                );
            }
        }
        assert_eq!(MOUNTS[0].target, "/proc");
        assert!(MOUNTS.iter().any(|m| m.fstype == "debugfs"));
    }
}
