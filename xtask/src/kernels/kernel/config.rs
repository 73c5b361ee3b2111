//! The kernel's `.config`: the fragments of `kconfig/` merged for a
//! profile, generated in a scratch `O=` dir, checked, and remembered by
//! the fingerprint of everything it depends on.

use super::{kmake, KernelConfig, KernelSource, ARCH, LLVM};
use crate::kernels::kconfig::{self, Requirement};
use crate::kernels::profile::Profile;
use crate::say;
use crate::util::{self, cmd_stdout};
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The fragments of a profile, in merge order: `kconfig/*.config` sorted by
/// name (as the shell glob sorts), then for each of the profile's folders
/// (`kconfig/debug/`) its `*.config`, sorted. Subfolders of `kconfig/` are
/// never read by the default profile.
pub fn fragments(profile: Profile) -> Result<Vec<PathBuf>> {
    fragments_in(&util::repo_root().join("kconfig"), profile)
}

fn fragments_in(kconfig: &Path, profile: Profile) -> Result<Vec<PathBuf>> {
    let list = |dir: &Path| -> Result<Vec<PathBuf>> {
        let mut v: Vec<PathBuf> = fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "config"))
            .collect();
        v.sort();
        if v.is_empty() {
            bail!("no *.config fragments in {}", dir.display());
        }
        Ok(v)
    };
    let mut all = list(kconfig)?;
    for sub in profile.fragment_dirs() {
        all.extend(
            list(&kconfig.join(sub))
                .with_context(|| format!("the {profile} profile's kernel config fragments"))?,
        );
    }
    Ok(all)
}

/// `make rustavailable`, turned into an actionable message.
fn check_rust(src: &KernelSource, stage: &Path) -> Result<()> {
    let mut cmd = kmake(src, stage);
    cmd.arg("rustavailable");
    if let Err(e) = util::run_captured(&mut cmd) {
        bail!(
            "the kernel says Rust is not available ({e:#})\n\
             Fix: `cargo xtask setup` installs everything; by hand: `rustup component add rust-src`, \
             `cargo install --locked bindgen-cli`, `apt-get install clang-19 lld-19 llvm-19 libclang-19-dev` \
             (xtask puts /usr/lib/llvm-19/bin first on PATH). A rustc much newer than the kernel \
             knows can also fail: see Documentation/rust/quick-start.rst in the kernel tree."
        );
    }
    Ok(())
}

/// What the final .config depends on besides the kernel's Kconfig files:
/// the fragments and every tool Kconfig probes. Hashing these lets a warm run
/// skip regenerating the config (about 15 s).
fn config_fingerprint(src: &KernelSource, frags: &[(String, String)]) -> Result<String> {
    let mut h = String::from("tierkit-config-v1\n");
    h.push_str(&format!(
        "{ARCH} {LLVM}\nsrc={}\nversion={}\n",
        src.dir.display(),
        src.version
    ));
    h.push_str(&format!(
        "Makefile={}\n",
        util::sha256_hex(&fs::read(src.dir.join("Makefile"))?)
    ));
    if src.custom {
        // The user's tree may change under us: hash every Kconfig file and
        // the configs tinyconfig reads.
        h.push_str(&format!("kconfig={}\n", hash_kconfig_files(&src.dir)?));
    }
    for (name, text) in frags {
        h.push_str(&format!(
            "fragment {name} {}\n",
            util::sha256_hex(text.as_bytes())
        ));
    }
    for (prog, args) in [
        ("clang", &["--version"][..]),
        ("ld.lld", &["--version"][..]),
        ("rustc", &["--version", "--verbose"][..]),
        ("bindgen", &["--version"][..]),
        ("pahole", &["--version"][..]),
        ("rustc", &["--print", "sysroot"][..]),
    ] {
        h.push_str(&format!(
            "{prog} {args:?}: {}\n",
            cmd_stdout(prog, args).unwrap_or_default()
        ));
    }
    h.push_str(&format!(
        "rust-src={}\n",
        crate::util::setup::rust_src().is_some()
    ));
    Ok(util::sha256_hex(h.as_bytes())[..24].to_string())
}

fn hash_kconfig_files(dir: &Path) -> Result<String> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
        for e in fs::read_dir(d)? {
            let e = e?;
            let ft = e.file_type()?;
            let p = e.path();
            if ft.is_dir() {
                let n = e.file_name();
                if n != ".git" {
                    walk(&p, out)?;
                }
            } else if ft.is_file() {
                let n = e.file_name();
                let n = n.to_string_lossy();
                let in_configs = p.parent().is_some_and(|pp| pp.ends_with("configs"));
                if n.starts_with("Kconfig") || (in_configs && n.ends_with(".config")) {
                    out.push(p);
                }
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk(dir, &mut files)?;
    files.sort();
    let mut all = Vec::new();
    for f in files {
        all.extend_from_slice(f.to_string_lossy().as_bytes());
        all.extend_from_slice(&fs::read(&f)?);
    }
    Ok(util::sha256_hex(&all))
}

/// tinyconfig + the profile's fragments (merge_config.sh) + olddefconfig,
/// then checks that Kconfig kept every option the fragments ask for.
pub fn configure(src: &KernelSource, fresh: bool, profile: Profile) -> Result<KernelConfig> {
    let cache = util::cache_dir()?;
    let stage_name = format!("{}{}", src.id, profile.suffix());
    let stage = cache.join("stage").join(&stage_name);
    fs::create_dir_all(&stage).with_context(|| format!("creating {}", stage.display()))?;
    let _lock = util::lock(
        &cache.join("stage").join(format!("{stage_name}.lock")),
        "the config stage",
    )?;
    check_rust(src, &stage)?;

    let root = util::repo_root();
    let frag_paths = fragments(profile)?;
    let mut frags = Vec::new();
    for p in &frag_paths {
        let name = p.strip_prefix(&root).unwrap_or(p).display().to_string();
        let text = fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        frags.push((name, text));
    }
    let reqs =
        kconfig::merge_requirements(frags.iter().map(|(n, t)| kconfig::parse_fragment(n, t)));

    let fp = config_fingerprint(src, &frags)?;
    let memo = cache.join("configs").join(format!("{fp}.config"));
    let text = match fs::read_to_string(&memo) {
        Ok(t) if !fresh => {
            if util::verbose() {
                say!(
                    "config: reusing {} (same fragments, source and toolchain)",
                    memo.display()
                );
            }
            check_config(&t, &reqs, &stage)?;
            t
        }
        _ => {
            let t = generate_config(src, &stage, &frag_paths, profile)?;
            check_config(&t, &reqs, &stage)?;
            // Remembered only once it passed the check.
            util::write_atomic(&memo, t.as_bytes())?;
            t
        }
    };
    let hash = kconfig::config_hash(&text);
    let mut key = kconfig::cache_key(&src.version, &text);
    if src.custom {
        // An O= build dir belongs to one source tree: objects of another tree
        // with the same version and config must never be taken for current.
        key = format!("{key}-{}", src.id);
    }
    Ok(KernelConfig {
        src: src.clone(),
        text,
        hash,
        key,
        profile,
    })
}

fn generate_config(
    src: &KernelSource,
    stage: &Path,
    frags: &[PathBuf],
    profile: Profile,
) -> Result<String> {
    let t = util::Timer::start();
    let extra: String = profile
        .fragment_dirs()
        .iter()
        .map(|d| format!(" + kconfig/{d}/*.config"))
        .collect();
    let pb = util::spinner(&format!(
        "configuring the {profile} kernel: tinyconfig + kconfig/*.config{extra} + olddefconfig"
    ));
    let log = stage.join("config.log");
    let mut all_out = String::new();
    let mut step = |mut cmd: Command| -> Result<()> {
        let out = util::run_captured(&mut cmd)?;
        all_out.push_str(&out);
        Ok(())
    };
    let _ = fs::remove_file(stage.join(".config"));
    let mut tiny = kmake(src, stage);
    tiny.arg("tinyconfig");
    step(tiny)?;
    let mut merge = Command::new(src.dir.join("scripts/kconfig/merge_config.sh"));
    merge
        .current_dir(&src.dir)
        .env("KCONFIG_CONFIG", stage.join(".config"))
        .arg("-m")
        .arg("-O")
        .arg(stage)
        .arg(stage.join(".config"))
        .args(frags);
    step(merge)?;
    let mut olddef = kmake(src, stage);
    olddef.arg("olddefconfig");
    step(olddef)?;
    let _ = fs::write(&log, &all_out);
    pb.finish_and_clear();
    if util::verbose() {
        say!(
            "kernel config generated in {} (log: {})",
            util::fmt_dur(t.elapsed()),
            log.display()
        );
    }
    fs::read_to_string(stage.join(".config"))
        .with_context(|| format!("reading {}/.config", stage.display()))
}

fn check_config(text: &str, reqs: &[Requirement], stage: &Path) -> Result<()> {
    let cfg = kconfig::parse_config(text);
    let dropped = kconfig::check(reqs, &cfg);
    if !dropped.is_empty() {
        let list: Vec<String> = dropped.iter().map(|d| format!("  {d}")).collect();
        bail!(
            "Kconfig dropped {} option(s) that tierkit's fragments ask for, usually because a \
             dependency is unmet:\n{}\nThe generated config is {}/.config. Find the missing \
             dependency with `make -C <kernel source> O={} ARCH=x86_64 LLVM=1 menuconfig` \
             (press / and type the symbol), then add it to the fragment.",
            dropped.len(),
            list.join("\n"),
            stage.display(),
            stage.display()
        );
    }
    // Checked separately too: a gigantic range must not be zeroed serially
    // by the allocator (init_on_alloc), whatever the fragments say.
    if cfg
        .get("CONFIG_INIT_ON_ALLOC_DEFAULT_ON")
        .is_some_and(|v| v == "y")
    {
        bail!("CONFIG_INIT_ON_ALLOC_DEFAULT_ON=y: the allocator would zero gigantic ranges serially; keep `# CONFIG_INIT_ON_ALLOC_DEFAULT_ON is not set` in kconfig/mm.config");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_fragments_only_in_the_debug_profile() {
        let d = std::env::temp_dir().join(format!("tierkit-frags-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(d.join("debug")).unwrap();
        for f in [
            "base.config",
            "mm.config",
            "debug/debug.config",
            "debug/x.config",
        ] {
            fs::write(d.join(f), "CONFIG_X=y\n").unwrap();
        }
        fs::write(d.join("README"), "").unwrap();
        let names = |p: Profile| -> Vec<String> {
            fragments_in(&d, p)
                .unwrap()
                .iter()
                .map(|f| f.strip_prefix(&d).unwrap().display().to_string())
                .collect()
        };
        assert_eq!(names(Profile::Default), ["base.config", "mm.config"]);
        assert_eq!(
            names(Profile::Debug),
            [
                "base.config",
                "mm.config",
                "debug/debug.config",
                "debug/x.config"
            ]
        );
        fs::remove_file(d.join("debug/debug.config")).unwrap();
        fs::remove_file(d.join("debug/x.config")).unwrap();
        let e = fragments_in(&d, Profile::Debug).unwrap_err();
        assert!(format!("{e:#}").contains("debug profile"), "{e:#}");
        let _ = fs::remove_dir_all(&d);
    }

    /// The repository's own fragments: the debug one exists and is not read
    /// by the default profile.
    #[test]
    fn repository_fragments() {
        let default = fragments(Profile::Default).unwrap();
        assert!(default
            .iter()
            .all(|f| !f.to_string_lossy().contains("/debug/")));
        let debug = fragments(Profile::Debug).unwrap();
        assert!(debug.ends_with(&[util::repo_root().join("kconfig/debug/debug.config")]));
        assert_eq!(debug.len(), default.len() + 1);
    }
}
