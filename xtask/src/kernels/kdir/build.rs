//! The module built against a prepared tree ([`build_module`]): a copy of
//! `module/` in it, `make` in the private root or on the host.

use super::toolchain::in_root;
use super::{inspect, prepare, undefined_symbols, Prepared};
use crate::say;
use crate::util::{self, show_cmd};
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Build outputs Kbuild leaves next to the sources: not copied.
pub(super) fn is_build_output(name: &str) -> bool {
    name.ends_with(".o")
        || name.ends_with(".ko")
        || name.ends_with(".cmd")
        || name.ends_with(".mod")
        || name.ends_with(".mod.c")
        || name.ends_with(".rmeta")
        || name.ends_with(".d")
        || name == "Module.symvers"
        || name == "modules.order"
}

/// Copies `from` into `to`, writing only files whose content changed (so
/// that Kbuild's incremental build sees unchanged sources as unchanged).
fn sync_tree(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to)?;
    for e in fs::read_dir(from)?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let (src, dst) = (e.path(), to.join(&name));
        let ft = e.file_type()?;
        if ft.is_dir() {
            sync_tree(&src, &dst)?;
        } else if ft.is_file() && !is_build_output(&name) {
            let data = fs::read(&src)?;
            if fs::read(&dst).ok().as_deref() != Some(&data[..]) {
                fs::write(&dst, &data)?;
            }
        }
    }
    Ok(())
}

/// Builds tierkit.ko against `p`; returns the copy in `target/tierkit/`.
/// `test_interfaces`: build with `TIERKIT_TEST=1` (TK_IOC_WALK,
/// TK_IOC_PAGE_REFS, debugfs test/), as the guests' tests need; a real
/// machine's module (`cargo xtask module --kdir`) is built without them.
pub fn build_module(p: &Prepared, test_interfaces: bool) -> Result<PathBuf> {
    let h = &p.headers;
    let (mdir, mut a): (PathBuf, Vec<String>) = match &p.root {
        Some(_) => {
            let m = p.dir.join("tierkit-module");
            sync_tree(&util::repo_root().join("module"), &m)?;
            (m, vec!["make".into()])
        }
        None => {
            // The host toolchain: a copy too, never module/'s objects.
            let m = util::out_dir().join(format!("module-{}", h.key));
            sync_tree(&util::repo_root().join("module"), &m)?;
            (m, vec!["make".into()])
        }
    };
    let _lock = util::lock(&mdir.with_extension("lock"), "this module build")?;
    a.extend([
        "-C".into(),
        p.dir.display().to_string(),
        format!("M={}", mdir.display()),
    ]);
    a.extend(p.make_vars.iter().cloned());
    if test_interfaces {
        a.push("TIERKIT_TEST=1".into());
    }
    a.push(format!("-j{}", util::nproc()));
    let mut cmd = match &p.root {
        Some(r) => in_root(r, &a)?,
        None => {
            let mut c = Command::new(&a[0]);
            c.args(&a[1..]);
            c
        }
    };
    let shown = show_cmd(&cmd);
    let text = util::run_captured_tail(&mut cmd, 80)
        .with_context(|| format!("building tierkit.ko against {} failed", h.dir.display()))?;
    let log = mdir.join("build.log");
    fs::write(&log, &text)?;
    let warnings = text
        .lines()
        .filter(|l| l.starts_with("warning:") && !l.contains("warnings emitted"))
        .count();
    if util::verbose() {
        eprint!("{text}");
    } else if warnings > 0 {
        say!(
            "tierkit.ko for {}: {warnings} compiler warning(s) (output: {})",
            h.release,
            log.display()
        );
    }
    let undefined = undefined_symbols(&text);
    if !undefined.is_empty() {
        bail!(
            "modpost could not resolve {} symbol(s) against {}'s Module.symvers: {}",
            undefined.len(),
            h.release,
            undefined.join("; ")
        );
    }
    let built = mdir.join("tierkit.ko");
    if !built.is_file() {
        bail!("`{shown}` succeeded but {} does not exist", built.display());
    }
    let vermagic = util::cmd_stdout("modinfo", &["-F", "vermagic", &built.display().to_string()])
        .unwrap_or_default();
    if !vermagic.starts_with(&format!("{} ", h.release)) {
        bail!(
            "{} has vermagic {vermagic:?}, not kernel {}'s: the kernel would refuse it",
            built.display(),
            h.release
        );
    }
    let ko = util::out_dir().join(format!("tierkit-{}.ko", h.key));
    util::write_atomic(&ko, &fs::read(&built)?)?;
    say!(
        "tierkit.ko for {} (vermagic {vermagic}): {}",
        h.release,
        ko.display()
    );
    Ok(ko)
}

/// `cargo xtask module --kdir DIR`.
pub fn cmd_module(dir: &Path) -> Result<PathBuf> {
    let h = inspect(dir)?;
    let p = prepare(&h)?;
    build_module(&p, false)
}
