//! A headers tree made complete ([`prepare`]): as it is when it has the
//! Rust metadata, else Debian's rebuilt from the kernel's source with
//! Debian's toolchain in the private root, checked against the headers'
//! `.config` and `Module.symvers`.

use super::toolchain::{in_root, toolchain_root, ROOT_SUITE};
use super::{parse_rust_export_header, parse_symvers, plan, rust_exports, Headers, Plan, STAMP};
use crate::kernels::kconfig;
use crate::kernels::source;
use crate::say;
use crate::util::{self, show_cmd};
use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Debian's make variables for its kernels (the headers' Makefile:
/// `ARCH=x86`, `CROSS_COMPILE=x86_64-linux-gnu-`, `CC=...gcc-14`).
pub(super) fn debian_make_vars(
    cfg: &std::collections::BTreeMap<String, String>,
) -> Result<Vec<String>> {
    let cc_text = cfg
        .get("CONFIG_CC_VERSION_TEXT")
        .map(|s| s.trim_matches('"'))
        .unwrap_or("");
    let cc = cc_text.split_whitespace().next().unwrap_or("");
    if !cc.starts_with("x86_64-linux-gnu-gcc") {
        bail!("CONFIG_CC_VERSION_TEXT {cc_text:?}: not a Debian x86_64 gcc kernel");
    }
    Ok(vec![
        "ARCH=x86".into(),
        "CROSS_COMPILE=x86_64-linux-gnu-".into(),
        format!("CC={cc}"),
        "HOSTCC=gcc-14".into(),
    ])
}

/// The root's tools against what the kernel's `.config` recorded: one
/// line per mismatch.
fn check_toolchain(
    root: &Path,
    cfg: &std::collections::BTreeMap<String, String>,
) -> Result<Vec<String>> {
    let mut bad = Vec::new();
    let vars = debian_make_vars(cfg)?;
    let cc = vars[2].trim_start_matches("CC=").to_string();
    for (sym, prog) in [
        ("CONFIG_CC_VERSION_TEXT", cc.as_str()),
        ("CONFIG_RUSTC_VERSION_TEXT", "rustc"),
        ("CONFIG_BINDGEN_VERSION_TEXT", "bindgen"),
    ] {
        let want = cfg.get(sym).map(|s| s.trim_matches('"')).unwrap_or("");
        let mut c = in_root(root, &[prog.to_string(), "--version".into()])?;
        let got = c
            .stdin(Stdio::null())
            .output()
            .map(|o| {
                let mut t = String::from_utf8_lossy(&o.stdout).into_owned();
                t.push_str(&String::from_utf8_lossy(&o.stderr));
                t.lines().next().unwrap_or("").trim().to_string()
            })
            .unwrap_or_default();
        if got != want {
            bad.push(format!(
                "{sym}: the kernel was built with {want:?}, the {ROOT_SUITE} root has {got:?}"
            ));
        }
    }
    Ok(bad)
}

/// A headers tree made complete: the dir the module builds against.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub headers: Headers,
    /// `make -C` here.
    pub dir: PathBuf,
    /// `None`: the host's toolchain; else the root to build in.
    pub root: Option<PathBuf>,
    pub make_vars: Vec<String>,
}

/// Whatever `h` needs before a module can be built against it.
pub fn prepare(h: &Headers) -> Result<Prepared> {
    let cfg = kconfig::parse_config(&h.config);
    match plan(h, &cfg)? {
        Plan::Direct { llvm } => Ok(Prepared {
            headers: h.clone(),
            dir: h.dir.clone(),
            root: None,
            make_vars: if llvm { vec!["LLVM=1".into()] } else { vec![] },
        }),
        Plan::RebuildDebian => rebuild_debian(h, &cfg),
    }
}

fn rebuild_debian(
    h: &Headers,
    cfg: &std::collections::BTreeMap<String, String>,
) -> Result<Prepared> {
    let cache = util::cache_dir()?;
    fs::create_dir_all(&cache)?;
    // The root sees the cache at its real path (root_binds).
    let kdirs = cache.canonicalize().unwrap_or(cache).join("kdir");
    let out = kdirs.join(&h.key);
    let vars = debian_make_vars(cfg)?;
    let root = toolchain_root()?;
    let prepared = Prepared {
        headers: h.clone(),
        dir: out.clone(),
        root: Some(root.clone()),
        make_vars: vars.clone(),
    };
    if out.join(STAMP).is_file() {
        say!(
            "kernel metadata for {} (cached in {})",
            h.release,
            out.display()
        );
        return Ok(prepared);
    }
    fs::create_dir_all(&kdirs)?;
    let _lock = util::lock(
        &kdirs.join(format!("{}.lock", h.key)),
        "this kernel's metadata",
    )?;
    if out.join(STAMP).is_file() {
        return Ok(prepared);
    }
    let src = kernel_own_source(h)?;
    let bad = check_toolchain(&root, cfg)?;
    if !bad.is_empty() {
        bail!(
            "the private {ROOT_SUITE} root ({}) does not have the toolchain kernel {} was built with: {}",
            root.display(),
            h.release,
            bad.join("; ")
        );
    }
    let t = util::Timer::start();
    fs::create_dir_all(&out)?;
    fs::write(out.join(".config"), &h.config)?;
    let make = |targets: &[&str]| -> Result<Command> {
        let mut a: Vec<String> = vec![
            "make".into(),
            "-C".into(),
            src.dir.display().to_string(),
            format!("O={}", out.display()),
        ];
        a.extend(vars.iter().cloned());
        a.push(format!("-j{}", util::nproc()));
        a.extend(targets.iter().map(|s| s.to_string()));
        in_root(&root, &a)
    };
    let log = out.join("prepare.log");
    let mut c = make(&["olddefconfig"])?;
    util::run_captured(&mut c).context("make olddefconfig with the headers' .config failed")?;
    let after = fs::read_to_string(out.join(".config"))?;
    let changed = config_changes(cfg, &kconfig::parse_config(&after));
    if !changed.is_empty() {
        bail!(
            "make olddefconfig changed {} option(s) of kernel {}'s .config ({}): the source or the toolchain is not the kernel's",
            changed.len(),
            h.release,
            changed.iter().take(8).cloned().collect::<Vec<_>>().join(", ")
        );
    }
    say!(
        "rebuilding the Rust metadata of {} (make prepare modules_prepare with Debian's toolchain, -j{}; a few minutes once; log: {})",
        h.release,
        util::nproc(),
        log.display()
    );
    let pb = util::spinner("make prepare modules_prepare");
    let c = make(&["prepare", "modules_prepare"])?;
    let shown = show_cmd(&c);
    let res = util::run_logged(c, &log, |l| {
        if kconfig::is_kbuild_step(l) {
            pb.set_message(l.trim().to_string())
        }
    });
    pb.finish_and_clear();
    res.with_context(|| format!("`{shown}` failed"))?;
    let rust_exports = check_rust_exports(h, &out)?;
    install_kernel_files(h, &out)?;
    util::write_atomic(
        &out.join(STAMP),
        format!(
            "release={}\nheaders={}\nsource={}\nrust_exports={}\nseconds={}\n",
            h.release,
            h.dir.display(),
            src.dir.display(),
            rust_exports,
            t.elapsed().as_secs()
        )
        .as_bytes(),
    )?;
    say!(
        "kernel metadata for {} ready in {} ({}; all {} Rust exports reproduced)",
        h.release,
        out.display(),
        util::fmt_dur(t.elapsed()),
        rust_exports
    );
    Ok(prepared)
}

/// The kernel source of the private apt configuration, which must be the
/// version of the kernel `h` is for: the Rust metadata must come from it.
fn kernel_own_source(h: &Headers) -> Result<source::KernelSource> {
    let mut src = source::source(None)?;
    // Paths in the root are the real ones (see root_binds).
    src.dir = src.dir.canonicalize().unwrap_or(src.dir);
    let v = format!("{}.{}.{}", h.version.0, h.version.1, h.version.2);
    if src.version != v {
        bail!(
            "kernel {} is {v}, but {} holds {} ({}): the Rust metadata must come from the kernel's own source",
            h.release,
            source::DEFAULT_PACKAGE,
            src.version,
            src.dir.display()
        );
    }
    Ok(src)
}

/// The Rust exports rebuilt in `out` against the kernel's (the headers'
/// `Module.symvers`): every one of the kernel's must be there. Returns how
/// many the kernel has.
fn check_rust_exports(h: &Headers, out: &Path) -> Result<usize> {
    let theirs = rust_exports(&parse_symvers(&fs::read_to_string(
        h.dir.join("Module.symvers"),
    )?));
    let mut ours = BTreeSet::new();
    for e in fs::read_dir(out.join("rust"))?.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with("exports_") && n.ends_with("_generated.h") {
            ours.extend(parse_rust_export_header(&fs::read_to_string(e.path())?));
        }
    }
    let missing: Vec<&String> = theirs.difference(&ours).collect();
    if !missing.is_empty() {
        bail!(
            "the rebuilt Rust metadata lacks {} of the kernel's {} Rust exports (e.g. {}): rustc, bindgen or the source differ from the kernel's",
            missing.len(),
            theirs.len(),
            missing[0]
        );
    }
    Ok(theirs.len())
}

/// The headers' vmlinux (BTF), `utsrelease.h`, `kernel.release` and
/// `Module.symvers` over the rebuilt ones in `out`.
fn install_kernel_files(h: &Headers, out: &Path) -> Result<()> {
    // Debian's headers carry a vmlinux (BTF only) for the modules' BTF.
    if h.dir.join("vmlinux").is_file() {
        fs::copy(h.dir.join("vmlinux"), out.join("vmlinux"))?;
    }
    for f in [
        "include/generated/utsrelease.h",
        "include/config/kernel.release",
        "Module.symvers",
    ] {
        let from = h.dir.join(f);
        fs::copy(&from, out.join(f))
            .with_context(|| format!("copying {} into {}", from.display(), out.display()))?;
    }
    Ok(())
}

/// Options whose value differs between two configs, `SYM: a -> b`.
pub fn config_changes(
    before: &std::collections::BTreeMap<String, String>,
    after: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    keys.into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| {
            let v = |m: &std::collections::BTreeMap<String, String>| {
                m.get(k).cloned().unwrap_or_else(|| "unset".into())
            };
            format!("{k}: {} -> {}", v(before), v(after))
        })
        .collect()
}
