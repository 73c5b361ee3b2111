//! A fake guest file system for the host tests: sysfs of NUMA nodes and of
//! a CXL bus with one window and its devices, /bin, /lib/modules.

use super::cmdline::Params;
use super::{Init, Kernel, Out, Root};
use std::cell::RefCell;
use std::fs;
use std::io;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// A temporary directory, removed when dropped.
pub struct Tree(pub PathBuf);

impl Tree {
    pub fn new(name: &str) -> Tree {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let d = std::env::temp_dir().join(format!("tk-init-{name}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).expect("temp dir");
        Tree(d)
    }

    pub fn p(&self, abs: &str) -> PathBuf {
        self.0.join(abs.trim_start_matches('/'))
    }

    /// Writes `abs` (and its parents).
    pub fn file(&self, abs: &str, content: &str) {
        let p = self.p(abs);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(&p, content).expect("write");
    }

    pub fn dir(&self, abs: &str) {
        fs::create_dir_all(self.p(abs)).expect("mkdir");
    }

    /// `abs` -> `target` (both guest paths).
    pub fn link(&self, abs: &str, target: &str) {
        let p = self.p(abs);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        symlink(self.p(target), p).expect("symlink");
    }

    /// An executable shell script `/bin/<name>`.
    pub fn script(&self, name: &str, body: &str) {
        let abs = format!("/bin/{name}");
        self.file(&abs, &format!("#!/bin/sh\n{body}\n"));
        fs::set_permissions(self.p(&abs), fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    /// Two nodes: node0 with CPUs and 1 GiB, and the memory-only node2
    /// that region0's dax device feeds (`cxl_node_kb`: its MemTotal).
    pub fn numa(&self, cxl_node_kb: u64) {
        let n = "/sys/devices/system/node";
        self.file(&format!("{n}/online"), "0,2\n");
        self.file(&format!("{n}/has_memory"), "0,2\n");
        self.file(&format!("{n}/has_cpu"), "0\n");
        self.file(&format!("{n}/node0/cpulist"), "0-1\n");
        self.file(
            &format!("{n}/node0/meminfo"),
            "Node 0 MemTotal:  1048576 kB\n",
        );
        let a = format!("{n}/node0/access1/initiators");
        for (f, v) in [
            ("read_bandwidth", "20480"),
            ("write_bandwidth", "20480"),
            ("read_latency", "100"),
            ("write_latency", "100"),
        ] {
            self.file(&format!("{a}/{f}"), &format!("{v}\n"));
        }
        self.dir(&format!("{a}/node0"));
        self.file(&format!("{n}/node2/cpulist"), "\n");
        self.file(
            &format!("{n}/node2/meminfo"),
            &format!("Node 2 MemTotal:  {cxl_node_kb} kB\n"),
        );
        self.file("/proc/sys/kernel/osrelease", "7.3.0-tierkit\n");
        self.file(
            "/sys/kernel/debug/sched/preempt",
            "none voluntary (full) lazy\n",
        );
        self.file("/sys/kernel/mm/mempolicy/weighted_interleave/node0", "1\n");
    }

    /// One window (`decoder0.0`, 256-byte root granularity) on host bridge
    /// 0, whose port1 has `ways` root ports with a memdev of `per` bytes
    /// behind each; region0's files exist, as do its dax device (bound to
    /// kmem, node2) and its access1 performance.
    pub fn cxl_window(&self, ways: u32, per: u64) {
        let c = "/sys/bus/cxl/devices";
        self.file(&format!("{c}/decoder0.0/target_list"), "0\n");
        self.file(&format!("{c}/decoder0.0/create_ram_region"), "region0\n");
        self.file(&format!("{c}/decoder0.0/interleave_granularity"), "256\n");
        self.file(&format!("{c}/decoder0.0/interleave_ways"), "1\n");
        self.dir("/sys/devices/pci0000:0c");
        self.link(&format!("{c}/root0/dport0"), "/sys/devices/pci0000:0c");
        self.link(&format!("{c}/root0/port1/uport"), "/sys/devices/pci0000:0c");
        self.file(
            &format!("{c}/root0/port1/decoder1.0/interleave_ways"),
            "1\n",
        );
        for k in 0..ways {
            let rp = format!("/sys/devices/pci0000:0c/rp{k}");
            self.dir(&rp);
            // Listed in the opposite order to their dport ids.
            let ep = format!("{c}/root0/port1/endpoint{}", 9 - k);
            let mem = format!("mem{k}");
            self.link(&format!("{c}/root0/port1/dport{k}"), &rp);
            self.link(&format!("{ep}/uport"), &format!("{c}/{mem}"));
            self.link(&format!("{c}/endpoint{}", 9 - k), &ep);
            self.link(&format!("{ep}/parent_dport"), &rp);
            self.file(&format!("{c}/{mem}/ram/size"), &format!("{per:#x}\n"));
            let d = format!("decoder{}.0", 9 - k);
            self.file(&format!("{ep}/{d}/mode"), "none\n");
            self.link(&format!("{c}/{d}"), &format!("{ep}/{d}"));
            self.file(&format!("{c}/{d}/dpa_size"), "0\n");
            self.file(&format!("/sys/bus/cxl/devices/region0/target{k}"), "\n");
        }
        let r = "/sys/bus/cxl/devices/region0";
        for f in [
            "interleave_granularity",
            "interleave_ways",
            "size",
            "commit",
        ] {
            self.file(&format!("{r}/{f}"), "0\n");
        }
        self.file(&format!("{r}/mode"), "ram\n");
        self.file("/sys/bus/cxl/drivers/cxl_region/bind", "");
        self.dir(&format!("{r}/dax_region0/dax0.0"));
        self.file("/sys/bus/dax/devices/dax0.0/target_node", "2\n");
        self.dir("/sys/bus/dax/drivers/kmem");
        self.link(
            "/sys/bus/dax/devices/dax0.0/driver",
            "/sys/bus/dax/drivers/kmem",
        );
        for (f, v) in [
            ("read_bandwidth", "10240"),
            ("write_bandwidth", "10240"),
            ("read_latency", "400"),
            ("write_latency", "500"),
        ] {
            self.file(&format!("{r}/access1/{f}"), &format!("{v}\n"));
        }
    }

    /// An [`Init`] on this tree with `cmdline`, recording its output and
    /// its module loads in the returned log.
    pub fn init(&self, cmdline: &str) -> (Init, Rc<RefCell<Vec<String>>>) {
        let log = Rc::new(RefCell::new(Vec::new()));
        let k = FakeKernel {
            log: log.clone(),
            root: self.0.clone(),
        };
        let init = Init {
            root: Root(self.0.clone()),
            out: Out::recording(),
            params: Params::parse(cmdline),
            kernel: Box::new(k),
            fails: 0,
            wait_scale: 0,
            module: "tierkit",
        };
        (init, log)
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Records `insmod <guest path>` and `rmmod <name>`; a module file whose
/// content is `fail` is refused with EEXIST.
pub struct FakeKernel {
    pub log: Rc<RefCell<Vec<String>>>,
    pub root: PathBuf,
}

impl Kernel for FakeKernel {
    fn insmod(&mut self, ko: &Path) -> io::Result<()> {
        let rel = ko.strip_prefix(&self.root).unwrap_or(ko);
        self.log
            .borrow_mut()
            .push(format!("insmod /{}", rel.display()));
        if fs::read_to_string(ko)?.trim() == "fail" {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        Ok(())
    }

    fn rmmod(&mut self, name: &str) -> io::Result<()> {
        self.log.borrow_mut().push(format!("rmmod {name}"));
        Ok(())
    }
}
