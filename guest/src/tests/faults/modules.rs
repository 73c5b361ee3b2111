//! Modules: loading and unloading with `finit_module(2)` /
//! `delete_module(2)`, tierkit's weights across a reload, and kunit's
//! filter.

use super::*;

/// `finit_module(fd, params, flags)`.
pub fn finit_module(fd: RawFd, params: &str, flags: i32) -> io::Result<()> {
    let p = CString::new(params).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `p` is NUL-terminated and lives across the call.
    let r = unsafe { libc::syscall(libc::SYS_finit_module, fd, p.as_ptr(), flags) };
    cvt(r).map(|_| ())
}

/// `delete_module(name, flags)` (`O_NONBLOCK` is the usual flag; the
/// kernel then refuses a module in use with `EWOULDBLOCK` at once).
pub fn delete_module(name: &str, flags: i32) -> io::Result<()> {
    let n = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `n` is NUL-terminated and lives across the call.
    let r = unsafe { libc::syscall(libc::SYS_delete_module, n.as_ptr(), flags) };
    cvt(r).map(|_| ())
}

/// A module's line of /proc/modules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleLine {
    pub size: u64,
    /// Its reference count (`module_refcount`).
    pub refcnt: i64,
    /// `Live`, `Loading` or `Unloading`.
    pub state: String,
}

/// Parses `name size refcnt users state addr` lines.
pub fn parse_proc_modules(s: &str, name: &str) -> Option<ModuleLine> {
    s.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 5 || f[0] != name {
            return None;
        }
        Some(ModuleLine {
            size: f[1].parse().ok()?,
            refcnt: f[2].parse().ok()?,
            state: f[4].to_string(),
        })
    })
}

/// `name`'s line of /proc/modules, `None` if it is not loaded.
pub fn module_line(name: &str) -> Option<ModuleLine> {
    parse_proc_modules(&fs::read_to_string("/proc/modules").ok()?, name)
}

/// tierkit's module name and the guest's copy of it.
pub const TIERKIT_MODULE: &str = "tierkit";
pub const TIERKIT_KO: &str = "/lib/modules/tierkit.ko";

/// `finit_module(2)` of [`TIERKIT_KO`] without parameters.
pub fn load_tierkit() -> io::Result<()> {
    let f = fs::File::open(TIERKIT_KO)?;
    finit_module(f.as_raw_fd(), "", 0)
}

/// `delete_module("tierkit", O_NONBLOCK)`: refused at once
/// (`EWOULDBLOCK`) while tierkit is in use.
pub fn unload_tierkit() -> io::Result<()> {
    delete_module(TIERKIT_MODULE, libc::O_NONBLOCK)
}

/// tierkit's weight table as /init left it (weights, `auto`, the
/// `bandwidth` file), which an unload loses: saved before a reload,
/// written back after it.
#[derive(Clone, Debug)]
pub struct TierkitWeights {
    /// The weights, `auto` and the bandwidth table.
    pub(super) saved: crate::topology::weights::WeightSnapshot,
    /// [`TierkitWeights::text`] when saved.
    pub before: String,
}

impl TierkitWeights {
    /// The weight table and bandwidth of `wd` as one text, to compare.
    pub fn text(wd: &crate::topology::weights::WeightDir) -> Result<String, String> {
        let s = wd.snapshot().map_err(|e| format!("{e:#}"))?;
        let bw = fs::read_to_string(wd.bandwidth_path()).map_err(|e| e.to_string())?;
        Ok(format!("{}; bandwidth {:?}", s.describe(), bw))
    }

    /// Saves `wd`'s table.
    pub fn save(wd: &crate::topology::weights::WeightDir) -> Result<TierkitWeights, String> {
        match (wd.snapshot(), Self::text(wd)) {
            (Ok(saved), Ok(before)) => Ok(TierkitWeights { saved, before }),
            (s, t) => Err(format!("{:?} {:?}", s.err(), t.err())),
        }
    }

    /// Writes the table back into the loaded module (`WeightSnapshot::
    /// restore`: bandwidth first, then the saved weights and `auto`);
    /// `Err` if the text then differs from the saved one.
    pub fn restore(&self) -> Result<(), String> {
        let wd = crate::topology::weights::WeightDir::tierkit().ok_or("no weight directory")?;
        let s = crate::topology::weights::WeightSnapshot {
            dir: wd.clone(),
            ..self.saved.clone()
        };
        s.restore().map_err(|e| format!("{e:#}"))?;
        let now = Self::text(&wd)?;
        if now != self.before {
            return Err(format!("now {now}, was {}", self.before));
        }
        Ok(())
    }
}

/// The KUnit executor's `filter_glob` parameter (lib/kunit/executor.c,
/// mode 0600): which suites a module's KUnit tests run at load time
/// (`kunit_module_init()` filters with it, `*.*` when unset).
pub const KUNIT_FILTER_GLOB: &str = "/sys/module/kunit/parameters/filter_glob";

/// The value read when the parameter was never set (`param_get_charp`
/// prints a NULL pointer so).
pub const KUNIT_FILTER_UNSET: &str = "(null)";

/// Sets KUnit's `filter_glob` and puts the old value back when dropped. A
/// parameter that was unset cannot be unset again through sysfs: it is
/// restored as `*.*`, which is what `kunit_module_init()` uses for an
/// unset one (lib/kunit/test.c), so later module loads run the same
/// suites.
#[derive(Debug)]
pub struct KunitFilter {
    pub(super) old: Option<String>,
}

impl KunitFilter {
    /// The value to write back for what was read.
    pub fn restore_value(old: &str) -> &str {
        if old == KUNIT_FILTER_UNSET {
            "*.*"
        } else {
            old
        }
    }

    /// Whether the kernel has KUnit (built in, or its module loaded).
    pub fn present() -> bool {
        std::path::Path::new("/sys/module/kunit").exists()
    }

    /// What the filter does, for a report: the glob written, or why none.
    pub fn describe(&self, glob: &str) -> String {
        if self.old.is_some() {
            format!("{KUNIT_FILTER_GLOB} = {glob}")
        } else {
            "no KUnit in this kernel (no /sys/module/kunit): no suite runs at load".to_string()
        }
    }

    pub fn read() -> io::Result<String> {
        Ok(fs::read_to_string(KUNIT_FILTER_GLOB)?
            .trim_end_matches('\n')
            .to_string())
    }

    /// Sets the filter; on a kernel without KUnit (no `/sys/module/kunit`,
    /// as Debian's) no suite runs at load anyway, and nothing is written.
    pub fn set(glob: &str) -> io::Result<KunitFilter> {
        if !Self::present() {
            return Ok(KunitFilter { old: None });
        }
        let old = Self::read()?;
        fs::write(KUNIT_FILTER_GLOB, glob)?;
        Ok(KunitFilter { old: Some(old) })
    }

    /// Restores now; returns what was written.
    pub fn restore(&mut self) -> io::Result<Option<String>> {
        match self.old.take() {
            Some(old) => {
                let v = Self::restore_value(&old).to_string();
                fs::write(KUNIT_FILTER_GLOB, &v)?;
                Ok(Some(v))
            }
            None => Ok(None),
        }
    }
}

impl Drop for KunitFilter {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("# restoring {KUNIT_FILTER_GLOB}: {e}");
        }
    }
}
