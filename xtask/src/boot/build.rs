//! What a boot builds: the kernel (cached), the module, the guest binaries
//! and the initramfs. `build`, `lava`, `run -- CMD` and `shell` use it too.

use anyhow::Result;
use std::path::Path;
use std::time::Duration;

use crate::kernels::kernel::{self, KernelRequest};
use crate::util::Timer;
use crate::{kernels::initramfs, kernels::module, kernels::userspace};

/// Everything built for a boot.
pub(crate) struct Built {
    pub(crate) kernel: kernel::KernelBuild,
    pub(crate) initramfs: initramfs::Initramfs,
    pub(crate) times: Vec<(&'static str, Duration)>,
}

/// Builds everything for `k`; the initramfs goes to `dir`, with `extra` in
/// it. `cxl` and `share` (the virtio-9p share of `run -- CMD` and `shell`)
/// say which of Debian's modules /init loads first.
pub(crate) fn build_all(
    k: &KernelRequest,
    cxl: bool,
    share: bool,
    dir: &Path,
    extra: Vec<initramfs::Entry>,
) -> Result<Built> {
    let mut times = Vec::new();
    let t = Timer::start();
    let kb = k.ensure()?;
    times.push(("kernel", t.elapsed()));
    let t = Timer::start();
    let m = module::build(&kb)?;
    times.push(("module", t.elapsed()));
    let t = Timer::start();
    let bins = userspace::build()?;
    times.push(("guest binaries", t.elapsed()));
    let t = Timer::start();
    let info = format!(
        "kernel {} (config {}, source {}), guest binaries: {}",
        kb.key,
        kb.config_hash,
        kb.src.display(),
        bins.iter()
            .map(|b| b.name.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    );
    std::fs::create_dir_all(dir)?;
    // Debian's brd, CXL, DAX, kmem and 9p drivers are modules: /init loads them.
    let pre = match &kb.debian {
        Some(d) => crate::kernels::debian::pre_modules(d, cxl, share)?,
        None => Vec::new(),
    };
    // tk-run's library and test programs, numactl and glibc, in every
    // initramfs; `extra`'s files replace them where both have one.
    let mut tk = crate::kernels::guest_tools::GuestFiles::new();
    crate::kernels::tkrun::add_guest_files(&mut tk)?;
    let extra = initramfs::merge(tk.entries(), extra);
    let ir = initramfs::build(dir, &info, &m, &bins, &pre, extra)?;
    times.push(("initramfs", t.elapsed()));
    Ok(Built {
        kernel: kb,
        initramfs: ir,
        times,
    })
}
