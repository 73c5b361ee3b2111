//! `tierkit.ko`: an out-of-tree build against the cached kernel.

use crate::kernel::KernelBuild;
use crate::say;
use crate::util::{self, show_cmd};
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The built module.
#[derive(Clone, Debug)]
pub struct ModuleBuild {
    pub ko: PathBuf,
}

/// The `make` that builds the module: the same one `make KDIR=...` runs.
pub fn make_command(kernel: &KernelBuild) -> Command {
    let mut cmd = Command::new("make");
    cmd.arg("-C")
        .arg(&kernel.out_dir)
        .arg(format!("M={}", util::repo_root().join("module").display()))
        .args(["LLVM=1", "ARCH=x86_64"])
        .arg(format!("-j{}", util::nproc()));
    cmd
}

/// Builds `module/tierkit.ko` (incremental; about a second when unchanged).
pub fn build(kernel: &KernelBuild) -> Result<ModuleBuild> {
    let mut cmd = make_command(kernel);
    let shown = show_cmd(&cmd);
    if util::verbose() {
        say!("$ {shown}");
    }
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("could not start `{shown}`"))?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        bail!("building tierkit.ko failed: `{shown}` ({}):\n{}", out.status, util::tail_lines(&text, 80));
    }
    // Compiler warnings are worth seeing even when the build succeeds.
    if util::verbose() || text.contains("warning") {
        eprint!("{text}");
    }
    let ko = util::repo_root().join("module/tierkit.ko");
    if !ko.is_file() {
        bail!("`{shown}` succeeded but {} does not exist", ko.display());
    }
    Ok(ModuleBuild { ko })
}
