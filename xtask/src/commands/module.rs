//! `cargo xtask module`: tierkit.ko against the cached kernel of each
//! profile, or against an installed kernel's headers (`--kdir`).

use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::boot::KernelRequest;
use crate::{kernels::module, say, util::setup};

/// `cargo xtask module` as asked.
pub enum ModuleRequest {
    /// `--kdir DIR`: a distribution's headers tree.
    Kdir(PathBuf),
    /// The module for each of these kernels (built, cached).
    Kernels(Vec<KernelRequest>),
}

/// `cargo xtask module`.
pub(crate) fn run(m: ModuleRequest) -> Result<ExitCode> {
    match m {
        ModuleRequest::Kdir(dir) => {
            let ko = crate::kernels::kdir::cmd_module(&dir)?;
            println!("{}", ko.display());
        }
        ModuleRequest::Kernels(kernels) => {
            setup::ensure()?;
            for k in &kernels {
                let kb = k.ensure()?;
                let m = module::build(&kb)?;
                say!("module ({} profile): {}", k.profile, m.ko.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
