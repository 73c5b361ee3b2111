//! `cargo xtask build`: everything the guest needs (kernel, module, guest
//! binaries, initramfs) for each kernel asked for, without booting.

use anyhow::Result;
use std::process::ExitCode;

use crate::boot::{build_all, KernelRequest};
use crate::{say, util, util::setup};

/// `cargo xtask build`: `kernels` one after the other.
pub(crate) fn run(kernels: &[KernelRequest]) -> Result<ExitCode> {
    setup::ensure()?;
    for k in kernels {
        let b = build_all(k, false, false, &util::out_dir(), Vec::new())?;
        say!(
            "initramfs ({} profile): {} ({} KiB)",
            k.profile,
            b.initramfs.path.display(),
            b.initramfs.size / 1024
        );
    }
    Ok(ExitCode::SUCCESS)
}
