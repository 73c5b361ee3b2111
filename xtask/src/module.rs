//! `tierkit.ko`: an out-of-tree build against the cached kernel.

use crate::kernel::KernelBuild;
use crate::util::{self, show_cmd};
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::Command;

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
        .args(kernel.profile.module_make_args())
        .arg(format!("-j{}", util::nproc()));
    cmd
}

/// Builds `module/tierkit.ko` (incremental; about a second when unchanged).
pub fn build(kernel: &KernelBuild) -> Result<ModuleBuild> {
    // Kbuild writes its objects into module/: one build at a time.
    let _lock = util::lock(&util::out_dir().join("module.lock"), "the module build")?;
    let mut cmd = make_command(kernel);
    let shown = show_cmd(&cmd);
    // 80 lines: a Rust compile error with its notes is long.
    let text =
        util::run_captured_tail(&mut cmd, 80).with_context(|| "building tierkit.ko failed")?;
    // Compiler warnings are worth seeing even when the build succeeds.
    if util::verbose() || text.contains("warning") {
        eprint!("{text}");
    }
    let built = util::repo_root().join("module/tierkit.ko");
    if !built.is_file() {
        bail!("`{shown}` succeeded but {} does not exist", built.display());
    }
    // A copy per kernel, taken under the lock: a concurrent build against
    // another kernel cannot swap it before the initramfs is written.
    let ko = util::out_dir().join(format!("tierkit-{}.ko", kernel.key));
    util::write_atomic(&ko, &std::fs::read(&built)?)?;
    Ok(ModuleBuild { ko })
}
