//! cgroup v2 for the tests: the hierarchy mounted at `/sys/fs/cgroup`, a
//! controller enabled for the root's children, and a child cgroup that a
//! process joins and that is removed when dropped.

use crate::harness::report::Report;
use std::fs;
use std::path::{Path, PathBuf};

/// Where cgroup2 is (or is mounted).
pub const CGROUP: &str = "/sys/fs/cgroup";

/// cgroup2 mounted at [`CGROUP`] with `controller` enabled for the root's
/// children; `Ok(false)`: the kernel has no cgroup2 or not that controller.
pub fn ready(controller: &str) -> Result<bool, String> {
    let root = Path::new(CGROUP);
    if !root.join("cgroup.controllers").exists() {
        let _ = fs::create_dir_all(root);
        let src = std::ffi::CString::new("none").map_err(|e| e.to_string())?;
        let dst = std::ffi::CString::new(CGROUP).map_err(|e| e.to_string())?;
        let fstype = std::ffi::CString::new("cgroup2").map_err(|e| e.to_string())?;
        // SAFETY: NUL-terminated strings; no data.
        let r = unsafe {
            libc::mount(
                src.as_ptr(),
                dst.as_ptr(),
                fstype.as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            return if e.raw_os_error() == Some(libc::ENODEV) {
                Ok(false)
            } else {
                Err(format!("mount cgroup2: {e}"))
            };
        }
    }
    let ctl = fs::read_to_string(root.join("cgroup.controllers")).map_err(|e| e.to_string())?;
    if !ctl.split_whitespace().any(|c| c == controller) {
        return Ok(false);
    }
    fs::write(
        root.join("cgroup.subtree_control"),
        format!("+{controller}"),
    )
    .map_err(|e| format!("+{controller}: {e}"))?;
    Ok(true)
}

/// [`ready`] for a test: true when `controller` is ready; otherwise `r`
/// holds a skip of `name` saying `absent` (the kernel has no such
/// controller), or a failure of "cgroup2 with the `controller` controller".
pub fn ready_for(r: &mut Report, controller: &str, name: &str, absent: &str) -> bool {
    match ready(controller) {
        Ok(true) => true,
        Ok(false) => {
            r.skip(name, absent);
            false
        }
        Err(e) => {
            r.fail(&format!("cgroup2 with the {controller} controller"), e);
            false
        }
    }
}

/// A cgroup under the root, removed on drop.
pub struct Cg {
    dir: PathBuf,
}

impl Cg {
    pub fn new(name: &str) -> Result<Cg, String> {
        let dir = Path::new(CGROUP).join(name);
        let _ = fs::remove_dir(&dir);
        fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        Ok(Cg { dir })
    }

    pub fn set(&self, file: &str, v: &str) -> Result<(), String> {
        fs::write(self.dir.join(file), v).map_err(|e| format!("{file} = {v}: {e}"))
    }

    pub fn read_u64(&self, file: &str, key: Option<&str>) -> Result<u64, String> {
        let s = fs::read_to_string(self.dir.join(file)).map_err(|e| format!("{file}: {e}"))?;
        let v = match key {
            None => s.trim(),
            Some(k) => s
                .lines()
                .find_map(|l| l.strip_prefix(k)?.strip_prefix(' '))
                .ok_or(format!("no {k} in {file}"))?,
        };
        v.trim().parse().map_err(|e| format!("{file}: {e}"))
    }

    /// `memory.current`.
    pub fn current(&self) -> Result<u64, String> {
        self.read_u64("memory.current", None)
    }

    /// Moves the calling process into the cgroup.
    pub fn join(&self) -> bool {
        fs::write(self.dir.join("cgroup.procs"), "0").is_ok()
    }
}

impl Drop for Cg {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.dir);
    }
}
