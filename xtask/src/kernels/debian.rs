//! `--kernel debian`: Debian's own 7.3 kernel (`linux-image-7.3.4+deb13-amd64`
//! from trixie-backports) as the guest kernel, as a user's machine runs it.
//!
//! - its packages come through the private apt configuration
//!   ([`source::apt_download`]) into `apt/debs-debian/` (cached) and are
//!   extracted into `debian/<release>/` (vmlinuz, the modules, the headers;
//!   `depmod` writes the modules.dep Debian's postinst would);
//! - tierkit.ko is built against the headers as `cargo xtask module --kdir`
//!   does ([`kdir`]);
//! - the guest boots with the kernel's defaults (`init_on_alloc=1`: its
//!   allocator zeroes, tierkit takes that as the clear); its KUnit is off,
//!   so tierkit's suites stay on tierkit's kernels;
//! - every boot loads brd (`/dev/ram0`, which tk-test-gup uses) and zram
//!   (`/dev/zram0`, tk-test-memcg's swap), and
//!   `--topology cxl` needs Debian's CXL, DAX and kmem modules: the
//!   initramfs carries them (decompressed) in modules.dep's order
//!   ([`load_order`]), /init loads them before assembling regions, and QEMU
//!   gets `hypervisor=off` (Debian lacks CXL_REGION_INVALIDATION_TEST, so
//!   the kernel refuses a region commit in a VM).

use crate::kernels::kdir::{self, Prepared};
use crate::kernels::source;
use crate::say;
use crate::util;
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The kernel release Debian's 7.3 backport installs.
pub const RELEASE: &str = "7.3.4+deb13-amd64";
/// Its packages (the `linux-image-*` metapackage is these two and the
/// initramfs tooling), the headers and what the headers link to.
pub const PACKAGES: &[&str] = &[
    "linux-binary-7.3.4+deb13-amd64",
    "linux-modules-7.3.4+deb13-amd64",
    "linux-headers-7.3.4+deb13-amd64",
    "linux-headers-7.3.4+deb13-common",
    "linux-kbuild-7.3.4+deb13",
];
/// The modules `--topology cxl` needs, with their Kconfig symbols (a `=y`
/// one is built in); their dependencies come from modules.dep.
pub const CXL_MODULES: &[(&str, &str)] = &[
    ("cxl_acpi", "CONFIG_CXL_ACPI"),
    ("cxl_port", "CONFIG_CXL_PORT"),
    ("cxl_mem", "CONFIG_CXL_MEM"),
    ("cxl_pci", "CONFIG_CXL_PCI"),
    ("cxl_pmem", "CONFIG_CXL_PMEM"),
    ("device_dax", "CONFIG_DEV_DAX"),
    ("dax_hmem", "CONFIG_DEV_DAX_HMEM"),
    ("dax_cxl", "CONFIG_DEV_DAX_CXL"),
    ("kmem", "CONFIG_DEV_DAX_KMEM"),
];
const STAMP: &str = ".tierkit-extracted";

/// Userspace tests that need what a kernel config may lack: the test, the
/// Kconfig symbol it needs set, and what it does with it.
pub const TESTS_NEED: &[(&str, &str, &str)] = &[
    (
        "tk-test-faults",
        "CONFIG_FAILSLAB",
        "injects allocation failures through /sys/kernel/debug/failslab",
    ),
    (
        "tk-test-mmap-budget",
        "CONFIG_FAILSLAB",
        "fails a 4 KiB mmap's allocations through /sys/kernel/debug/failslab",
    ),
];

/// The tests of [`TESTS_NEED`] that cannot run on a kernel with `config`,
/// each with its reason.
pub fn unrunnable(config: &BTreeMap<String, String>) -> Vec<(&'static str, String)> {
    TESTS_NEED
        .iter()
        .filter(|(_, sym, _)| config.get(*sym).is_none_or(|v| v == "n"))
        .map(|(t, sym, what)| (*t, format!("it {what}, and Debian's kernel has {sym} off")))
        .collect()
}

/// Debian's kernel, extracted.
#[derive(Clone, Debug)]
pub struct DebianKernel {
    pub vmlinuz: PathBuf,
    /// `.../usr/lib/modules/<release>`.
    pub modules: PathBuf,
    /// The tree tierkit.ko was built against.
    pub prepared: Prepared,
}

/// `kernel/drivers/cxl/cxl_pci.ko.xz: kernel/drivers/cxl/core/cxl_core.ko.xz ...`:
/// each module's path and its dependencies' paths.
pub fn parse_modules_dep(text: &str) -> BTreeMap<String, Vec<String>> {
    text.lines()
        .filter_map(|l| {
            let (m, deps) = l.split_once(':')?;
            Some((
                m.trim().to_string(),
                deps.split_whitespace().map(str::to_string).collect(),
            ))
        })
        .collect()
}

/// `cxl_pci` of `kernel/drivers/cxl/cxl_pci.ko.xz` (modprobe's name: `-` is `_`).
pub fn module_name(path: &str) -> String {
    let file = path.rsplit('/').next().unwrap_or(path);
    let base = file.split(".ko").next().unwrap_or(file);
    base.replace('-', "_")
}

/// The paths to load for `wanted`, every module after its dependencies,
/// each once. A wanted module that is built in (`builtin`, from
/// modules.builtin) is skipped; one that is neither is an error.
pub fn load_order(
    dep: &BTreeMap<String, Vec<String>>,
    builtin: &BTreeSet<String>,
    wanted: &[&str],
) -> Result<Vec<String>> {
    let by_name: BTreeMap<String, &String> = dep.keys().map(|p| (module_name(p), p)).collect();
    let mut out: Vec<String> = Vec::new();
    fn visit(
        p: &str,
        dep: &BTreeMap<String, Vec<String>>,
        out: &mut Vec<String>,
        stack: &mut Vec<String>,
    ) -> Result<()> {
        if out.iter().any(|o| o == p) {
            return Ok(());
        }
        if stack.iter().any(|s| s == p) {
            bail!("modules.dep has a cycle through {p}");
        }
        stack.push(p.to_string());
        // modprobe loads the list from its end: the last is needed first.
        for d in dep.get(p).into_iter().flatten().rev() {
            visit(d, dep, out, stack)?;
        }
        stack.pop();
        out.push(p.to_string());
        Ok(())
    }
    for w in wanted {
        let w = w.replace('-', "_");
        match by_name.get(&w) {
            Some(p) => visit(p, dep, &mut out, &mut Vec::new())?,
            None if builtin.contains(&w) => {}
            None => bail!("module {w} is neither in modules.dep nor built in"),
        }
    }
    Ok(out)
}

/// The modules of `wanted` that the config builds in (`=y`): Debian's
/// packages carry no modules.builtin.
pub fn builtin_of(config: &BTreeMap<String, String>, wanted: &[(&str, &str)]) -> BTreeSet<String> {
    wanted
        .iter()
        .filter(|(_, sym)| config.get(*sym).is_some_and(|v| v == "y"))
        .map(|(m, _)| m.to_string())
        .collect()
}

fn find_deb(dir: &Path, package: &str) -> Option<PathBuf> {
    fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n.starts_with(&format!("{package}_")) && n.ends_with(".deb")
            })
        })
}

/// The debs, fetched once, extracted once, depmod'ed.
fn extract() -> Result<PathBuf> {
    let cache = util::cache_dir()?;
    let dir = cache.join("debian").join(RELEASE);
    if dir.join(STAMP).is_file() {
        return Ok(dir);
    }
    let _lock = util::lock(&cache.join("debian.lock"), "Debian's kernel packages")?;
    if dir.join(STAMP).is_file() {
        return Ok(dir);
    }
    let t = util::Timer::start();
    let debs = cache.join("apt").join("debs-debian");
    let missing: Vec<&str> = PACKAGES
        .iter()
        .copied()
        .filter(|p| find_deb(&debs, p).is_none())
        .collect();
    if !missing.is_empty() {
        source::apt_download(&cache, &missing, &debs, &missing.join(" "))?;
    }
    let tmp = cache
        .join("debian")
        .join(format!(".extract-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp)?;
    let pb = util::spinner(&format!("extracting Debian's kernel {RELEASE}"));
    for p in PACKAGES {
        let deb = find_deb(&debs, p)
            .with_context(|| format!("apt-get download left no {p}_*.deb in {}", debs.display()))?;
        let mut x = Command::new("dpkg");
        x.arg("-x").arg(&deb).arg(&tmp);
        util::run_captured(&mut x)?;
    }
    pb.finish_and_clear();
    // depmod -b reads BASE/lib/modules: Debian's merged /usr.
    if !tmp.join("lib").exists() {
        std::os::unix::fs::symlink("usr/lib", tmp.join("lib"))?;
    }
    let depmod = util::which("depmod")
        .or_else(|| util::which("/sbin/depmod"))
        .context("depmod not found (apt-get install kmod)")?;
    let mut d = Command::new(depmod);
    d.arg("-b").arg(&tmp).arg(RELEASE);
    util::run_captured(&mut d).context("depmod over Debian's modules failed")?;
    fs::write(tmp.join(STAMP), format!("{}\n", PACKAGES.join("\n")))?;
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.parent().unwrap_or(Path::new("/")))?;
    fs::rename(&tmp, &dir)?;
    say!(
        "Debian's kernel {RELEASE} extracted in {} ({})",
        dir.display(),
        util::fmt_dur(t.elapsed())
    );
    Ok(dir)
}

/// Debian's kernel and tierkit's metadata for it, ready to boot.
pub fn ensure() -> Result<DebianKernel> {
    let dir = extract()?;
    let modules = dir.join("usr/lib/modules").join(RELEASE);
    let vmlinuz = modules.join("vmlinuz");
    if !vmlinuz.is_file() {
        bail!(
            "{} is missing: linux-binary-{RELEASE} has no vmlinuz where Debian puts it",
            vmlinuz.display()
        );
    }
    let headers = kdir::inspect(&dir.join("usr/src").join(format!("linux-headers-{RELEASE}")))?;
    let prepared = kdir::prepare(&headers)?;
    Ok(DebianKernel {
        vmlinuz,
        modules,
        prepared,
    })
}

/// Modules every boot loads: brd, for tk-test-gup's O_DIRECT and io_uring
/// callers on `/dev/ram0` (tierkit's kernel builds it in); zram, for
/// tk-test-memcg's swap under a cgroup's pressure (`/dev/zram0`).
pub const BOOT_MODULES: &[(&str, &str)] = &[("brd", "CONFIG_BLK_DEV_RAM"), ("zram", "CONFIG_ZRAM")];

/// What the virtio-9p share of `run -- CMD` and `shell` needs (their
/// dependencies, netfs and 9pnet, come from modules.dep).
pub const SHARE_MODULES: &[(&str, &str)] = &[
    ("virtio_pci", "CONFIG_VIRTIO_PCI"),
    ("9pnet_virtio", "CONFIG_NET_9P_VIRTIO"),
    ("9p", "CONFIG_9P_FS"),
];

/// The modules a boot loads before tierkit ([`BOOT_MODULES`], with `cxl`
/// [`CXL_MODULES`], with `share` [`SHARE_MODULES`]) in load order,
/// decompressed: `(name, contents)`.
pub fn pre_modules(k: &DebianKernel, cxl: bool, share: bool) -> Result<Vec<(String, Vec<u8>)>> {
    let mut wanted: Vec<(&str, &str)> = BOOT_MODULES.to_vec();
    if cxl {
        wanted.extend_from_slice(CXL_MODULES);
    }
    if share {
        wanted.extend_from_slice(SHARE_MODULES);
    }
    let dep = parse_modules_dep(
        &fs::read_to_string(k.modules.join("modules.dep"))
            .with_context(|| format!("reading {}/modules.dep", k.modules.display()))?,
    );
    let config = crate::kernels::kconfig::parse_config(&k.prepared.headers.config);
    let builtin = builtin_of(&config, &wanted);
    let names: Vec<&str> = wanted.iter().map(|(m, _)| *m).collect();
    let order = load_order(&dep, &builtin, &names)?;
    let mut v = Vec::new();
    for p in order {
        let path = k.modules.join(&p);
        let data = if p.ends_with(".xz") {
            let out = Command::new("xz")
                .arg("-dc")
                .arg(&path)
                .output()
                .with_context(|| format!("xz -dc {}", path.display()))?;
            if !out.status.success() {
                bail!("xz -dc {} failed", path.display());
            }
            out.stdout
        } else {
            fs::read(&path).with_context(|| format!("reading {}", path.display()))?
        };
        v.push((module_name(&p), data));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEP: &str = "kernel/drivers/cxl/cxl_pci.ko.xz: kernel/drivers/cxl/core/cxl_core.ko.xz\n\
kernel/drivers/cxl/core/cxl_core.ko.xz:\n\
kernel/drivers/cxl/cxl_acpi.ko.xz: kernel/drivers/cxl/cxl_port.ko.xz kernel/drivers/cxl/core/cxl_core.ko.xz\n\
kernel/drivers/cxl/cxl_port.ko.xz: kernel/drivers/cxl/core/cxl_core.ko.xz\n\
kernel/drivers/dax/kmem.ko.xz: kernel/drivers/dax/device_dax.ko.xz\n\
kernel/drivers/dax/device_dax.ko.xz:\n\
kernel/drivers/dax/dax-cxl.ko.xz: kernel/drivers/dax/device_dax.ko.xz kernel/drivers/cxl/core/cxl_core.ko.xz\n";

    #[test]
    fn names() {
        assert_eq!(module_name("kernel/drivers/dax/dax-cxl.ko.xz"), "dax_cxl");
        assert_eq!(module_name("kernel/drivers/cxl/cxl_pci.ko"), "cxl_pci");
        assert_eq!(module_name("cxl_mem.ko.zst"), "cxl_mem");
    }

    #[test]
    fn dependencies_load_first_and_once() {
        let dep = parse_modules_dep(DEP);
        assert_eq!(dep.len(), 7);
        let config = crate::kernels::kconfig::parse_config("CONFIG_DAX=y\nCONFIG_DEV_DAX_KMEM=m\n");
        let builtin = builtin_of(
            &config,
            &[("dax", "CONFIG_DAX"), ("kmem", "CONFIG_DEV_DAX_KMEM")],
        );
        assert_eq!(builtin.iter().cloned().collect::<Vec<_>>(), ["dax"]);
        let o = load_order(
            &dep,
            &builtin,
            &["cxl_acpi", "cxl_pci", "dax", "dax_cxl", "kmem"],
        )
        .unwrap();
        let n: Vec<String> = o.iter().map(|p| module_name(p)).collect();
        assert_eq!(
            n,
            [
                "cxl_core",
                "cxl_port",
                "cxl_acpi",
                "cxl_pci",
                "device_dax",
                "dax_cxl",
                "kmem"
            ]
        );
        let e = load_order(&dep, &builtin, &["cxl_nope"]).unwrap_err();
        assert!(e.to_string().contains("cxl_nope is neither"), "{e}");
    }

    #[test]
    fn tests_that_need_what_the_kernel_lacks() {
        let debian =
            crate::kernels::kconfig::parse_config("# CONFIG_KUNIT is not set\nCONFIG_RUST=y\n");
        let u = unrunnable(&debian);
        let names: Vec<&str> = u.iter().map(|(t, _)| *t).collect();
        // KUnit off is no reason: the reload tests then have no suite
        // filter to set (no suite runs at load).
        assert_eq!(names, ["tk-test-faults", "tk-test-mmap-budget"]);
        assert!(u[0].1.contains("CONFIG_FAILSLAB off"), "{}", u[0].1);
        let full = crate::kernels::kconfig::parse_config("CONFIG_KUNIT=y\nCONFIG_FAILSLAB=y\n");
        assert!(unrunnable(&full).is_empty());
    }

    #[test]
    fn cycles_are_refused() {
        let dep = parse_modules_dep("a.ko: b.ko\nb.ko: a.ko\n");
        assert!(load_order(&dep, &BTreeSet::new(), &["a"]).is_err());
    }
}
