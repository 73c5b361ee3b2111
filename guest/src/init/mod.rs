//! The guest's `/init` (`src/bin/tk-init.rs`), split by job. It follows
//! the protocol of [`tierkit_protocol`]: marker lines on `/dev/kmsg` and
//! the data channel `/dev/ttyS1`, the parameters of the kernel command
//! line, `TIERKIT-DONE fails=N` last. In order:
//!
//! 1. [`mounts`]: /proc, /sys, /dev, debugfs, /tmp, hugetlbfs;
//! 2. [`cmdline`]: `tierkit.mode=` and the rest; `TIERKIT-BOOT`;
//! 3. [`modules`]: the modules of `/lib/modules/pre` (`--kernel debian`);
//! 4. [`cxl_setup`]: one RAM region per window (`tierkit.cxl=`);
//! 5. [`topology`]: `TIERKIT-TOPO` lines; a failed CXL set-up ends here;
//! 6. [`kmemleak`]: the baseline scan (`tierkit.profile=debug`);
//! 7. insmod tierkit.ko (its KUnit suites run), tierkit's bandwidth;
//! 8. [`modes`]: the tests ([`runner`], each under [`supervise`]: its own
//!    process group, a deadline, nothing left behind), demos, a benchmark, or the user's
//!    command or shell (then tierkit stays loaded);
//! 9. rmmod, the kmemleak scan, `TIERKIT-DONE fails=N`; the binary then
//!    powers off.
//!
//! Everything reads and writes below a [`Root`], `/` in the guest and a
//! fake tree in a temporary directory in the host tests; module loading
//! goes through [`Kernel`], which the tests replace.

use std::panic::AssertUnwindSafe;

pub mod cmdline;
pub mod cxl_setup;
pub mod kmemleak;
pub mod modes;
pub mod modules;
pub mod mounts;
pub mod out;
pub mod runner;
pub mod settle;
pub mod supervise;
pub mod topology;

#[cfg(test)]
mod fake;
#[cfg(test)]
mod tests;

use crate::topology::cxl::CxlBus;
use cmdline::Params;
pub use out::Out;
use std::io;
use std::path::{Path, PathBuf};
use tierkit_protocol::marker;

/// Where the guest's file system starts: `/`, or a fake tree.
#[derive(Clone, Debug)]
pub struct Root(pub PathBuf);

impl Root {
    /// The guest path `abs` (`/sys/...`) below this root.
    pub fn at(&self, abs: &str) -> PathBuf {
        self.0.join(abs.trim_start_matches('/'))
    }

    /// The CXL and dax buses below this root.
    pub fn cxl_bus(&self) -> CxlBus {
        CxlBus {
            cxl: self.at(crate::topology::cxl::CXL_SYSFS),
            dax: self.at(crate::topology::cxl::DAX_SYSFS),
        }
    }

    /// A file's content without its trailing newlines (as `$(cat F)`),
    /// `None` if it cannot be read.
    pub fn read(&self, abs: &str) -> Option<String> {
        read_text(&self.at(abs))
    }
}

/// A file's content without its trailing newlines, as `$(cat F)` gives it.
/// Bytes that are not UTF-8 (a hostile command line, a task's `comm` in a
/// kmemleak report) become U+FFFD rather than losing the whole file.
pub fn read_text(p: &Path) -> Option<String> {
    std::fs::read(p).ok().map(|b| {
        String::from_utf8_lossy(&b)
            .trim_end_matches('\n')
            .to_string()
    })
}

/// The last component of what `p` resolves to (`basename $(readlink -f
/// P)`), empty if it does not resolve.
pub fn resolved_name(p: &Path) -> String {
    std::fs::canonicalize(p)
        .ok()
        .and_then(|c| Some(c.file_name()?.to_string_lossy().into_owned()))
        .unwrap_or_default()
}

/// The names in `dir` starting with `prefix`, sorted as a shell glob
/// sorts them.
pub fn names_with_prefix(dir: &Path, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The text of an error as a shell command prints it: `Invalid argument`
/// rather than `Invalid argument (os error 22)`.
pub fn errno_text(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => {
            let s = e.to_string();
            let suffix = format!(" (os error {n})");
            s.strip_suffix(&suffix).map_or(s.clone(), str::to_string)
        }
        None => e.to_string(),
    }
}

/// Module loading: the kernel's syscalls in the guest, a record in tests.
pub trait Kernel {
    /// `finit_module(2)` of the file `ko`.
    fn insmod(&mut self, ko: &Path) -> io::Result<()>;
    /// `delete_module(2)` of `name`, not waiting for its users.
    fn rmmod(&mut self, name: &str) -> io::Result<()>;
}

/// The running kernel.
pub struct GuestKernel;

impl Kernel for GuestKernel {
    fn insmod(&mut self, ko: &Path) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::open(ko)?;
        crate::tests::faults::finit_module(f.as_raw_fd(), "", 0)
    }

    fn rmmod(&mut self, name: &str) -> io::Result<()> {
        crate::tests::faults::delete_module(name, libc::O_NONBLOCK)
    }
}

/// /init's state.
pub struct Init {
    pub root: Root,
    pub out: Out,
    pub params: Params,
    pub kernel: Box<dyn Kernel>,
    /// Failures so far: `TIERKIT-DONE fails=N`.
    pub fails: u32,
    /// Waits for the kernel (CXL enumeration, onlining) are this many
    /// times their length: 1 in the guest, 0 (one look) in tests.
    pub wait_scale: u32,
    /// The loaded-module name, for rmmod.
    pub module: &'static str,
}

impl Init {
    /// /init in the guest: `/`, the real marker channels, the kernel
    /// command line from /proc.
    pub fn guest() -> Init {
        let root = Root("/".into());
        let cmdline = root.read("/proc/cmdline").unwrap_or_default();
        Init {
            params: Params::parse(&cmdline),
            root,
            out: Out::guest(),
            kernel: Box::new(GuestKernel),
            fails: 0,
            wait_scale: 1,
            module: crate::tests::faults::TIERKIT_MODULE,
        }
    }

    /// A marker line.
    pub fn mark(&mut self, line: &str) {
        self.out.mark(line);
    }

    /// `TIERKIT-<tag> args`.
    pub fn tag(&mut self, tag: &str, args: &str) {
        self.out.mark(&marker::line(tag, args));
    }

    /// `TIERKIT-ERROR what`; it counts as a failure.
    pub fn error(&mut self, what: &str) {
        self.tag(marker::ERROR, what);
        self.fails += 1;
    }

    /// `TIERKIT-NOTE what`.
    pub fn note(&mut self, what: &str) {
        self.tag(marker::NOTE, what);
    }

    /// `TIERKIT-TOPO what`.
    pub fn topo(&mut self, what: &str) {
        self.tag(marker::TOPO, what);
    }

    /// Calls `ok` every 0.1 s until it holds; false after `secs` seconds
    /// (times [`Init::wait_scale`]; at least one call).
    pub fn wait_until(&self, secs: u32, mut ok: impl FnMut() -> bool) -> bool {
        let mut left = secs * 10 * self.wait_scale;
        loop {
            if ok() {
                return true;
            }
            if left <= 1 {
                return false;
            }
            left -= 1;
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// Everything /init does between the mounts and the power-off, ending
    /// with `TIERKIT-DONE fails=N`; returns N.
    pub fn run(&mut self) -> u32 {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let kernel = self
            .root
            .read("/proc/sys/kernel/osrelease")
            .unwrap_or_default();
        let boot = format!("mode={} kernel={kernel} cpus={cpus}", self.params.mode);
        self.tag(marker::BOOT, &boot);
        let mut cxl_ok = modules::pre_modules(self);
        if cxl_ok && self.params.cxl.is_some() {
            cxl_ok = cxl_setup::setup(self);
        }
        topology::print_topology(self);
        if !cxl_ok {
            self.note("CXL setup failed: tierkit is not loaded and no test runs");
            self.fails += 1;
            return self.done();
        }
        if self.params.debug {
            kmemleak::baseline(self);
        }
        if modules::insmod_tierkit(self) {
            topology::tierkit_bandwidth(self);
            if modes::run_mode(self) == modes::After::StayLoaded {
                // The user's command may leave tierkit in use.
                return self.done();
            }
            if modules::rmmod_tierkit(self) && self.params.debug {
                kmemleak::check(self);
            }
        }
        self.done()
    }

    fn done(&mut self) -> u32 {
        let line = marker::done(self.fails);
        self.mark(&line);
        self.fails
    }
}

/// Powers off; reboots if that fails (`poweroff -f`, `reboot -f`). Never
/// returns: PID 1 must not exit.
fn power_off() -> ! {
    // SAFETY: sync(2) takes no arguments.
    unsafe { libc::sync() };
    // SAFETY: reboot(2) with a valid command; it returns only on failure.
    unsafe { libc::reboot(libc::RB_POWER_OFF) };
    std::thread::sleep(std::time::Duration::from_secs(2));
    // SAFETY: as above.
    unsafe { libc::reboot(libc::RB_AUTOBOOT) };
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

/// `tk-init`'s `main`.
pub fn main() {
    if std::process::id() != 1 {
        eprintln!("tk-init is the guest's /init (PID 1): it mounts, loads modules and powers off");
        std::process::exit(2);
    }
    // PID 1 inherits every orphan anyway; a subreaper says so to the
    // runner (`init::supervise`), which finds a test's escaped children
    // among its own.
    // SAFETY: prctl(2) with an int argument.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) };
    std::env::set_var("PATH", "/bin:/sbin:/usr/bin:/usr/sbin");
    std::env::set_var("HOME", "/root");
    mounts::mount_all();
    let mut init = Init::guest();
    std::env::set_var("TIERKIT_MODE", &init.params.mode);
    if let Some(info) = init.root.read(tierkit_protocol::param::files::BUILD_INFO) {
        println!("tierkit /init: {info}");
    }
    let ran = std::panic::catch_unwind(AssertUnwindSafe(|| init.run()));
    if let Err(p) = ran {
        let why = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        let mut out = crate::init::Out::guest();
        out.mark(&tierkit_protocol::marker::line(
            tierkit_protocol::marker::ERROR,
            &format!("/init panicked: {why}"),
        ));
        out.mark(&tierkit_protocol::marker::done(init.fails + 1));
    }
    power_off();
}
