//! `cargo xtask kernel`: fetch, configure and build each kernel asked for
//! (cached); print its KDIR.

use anyhow::Result;
use std::process::ExitCode;

use crate::boot::KernelRequest;
use crate::{kernels::kernel, util::setup};

/// `cargo xtask kernel`: `kernels` one after the other.
pub(crate) fn run(kernels: &[KernelRequest]) -> Result<ExitCode> {
    setup::ensure()?;
    for k in kernels {
        kernel::cmd_kernel(k.src.as_deref(), k.fresh_config, k.profile)?;
    }
    Ok(ExitCode::SUCCESS)
}
