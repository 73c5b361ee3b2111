//! The kernel source: Debian's linux-source-7.3, fetched once through a
//! private apt configuration (never the system's), or the user's
//! `--kernel-src` tree, checked without touching it.

use crate::kernels::kconfig;
use crate::say;
use crate::util;
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Debian's package with the default kernel source.
pub const DEFAULT_PACKAGE: &str = "linux-source-7.3";

/// A kernel source tree.
#[derive(Clone, Debug)]
pub struct KernelSource {
    pub dir: PathBuf,
    /// `make kernelversion`, e.g. `7.3.4`.
    pub version: String,
    /// Given with `--kernel-src` (the user's tree may change between runs).
    pub custom: bool,
    /// Names the scratch dir: `linux-source-7.3` or `custom-<hash of path>`.
    pub id: String,
}

/// The private apt configuration's only source.
const APT_SOURCE: &str = "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie-backports main\n";

/// The default Debian source, fetched once, or the user's `--kernel-src`.
pub fn source(kernel_src: Option<&Path>) -> Result<KernelSource> {
    match kernel_src {
        Some(dir) => custom_source(dir),
        None => debian_source(),
    }
}

/// Checks a `--kernel-src` tree without touching it: a kernel with Rust
/// support and x86, never configured or built in place. Returns its
/// canonical path and version; errors are one line.
pub fn check_custom_source(dir: &Path) -> Result<(PathBuf, String)> {
    let dir = dir
        .canonicalize()
        .with_context(|| format!("--kernel-src {}: no such directory", dir.display()))?;
    let bad = |why: String| -> Result<(PathBuf, String)> {
        bail!(
            "--kernel-src {} is not a usable kernel tree: {why}",
            dir.display()
        )
    };
    let makefile = match fs::read_to_string(dir.join("Makefile")) {
        Ok(m) => m,
        Err(_) => return bad("it has no top-level Makefile".into()),
    };
    let version = match kconfig::makefile_version(&makefile) {
        Ok(v) => v,
        Err(e) => return bad(format!("its Makefile is not the kernel's ({e})")),
    };
    if !dir.join("scripts/kconfig/merge_config.sh").is_file() {
        return bad("scripts/kconfig/merge_config.sh is missing".into());
    }
    if !dir.join("rust").is_dir() {
        return bad(format!(
            "it has no rust/ directory (kernel {version} predates Rust support, 6.1+ needed)"
        ));
    }
    if !dir.join("arch/x86").is_dir() {
        return bad("arch/x86 is missing".into());
    }
    // The kernel refuses O= builds from a tree that was configured in place.
    let dirty: Vec<&str> = [".config", "include/config", "arch/x86/include/generated"]
        .into_iter()
        .filter(|p| dir.join(p).exists())
        .collect();
    if !dirty.is_empty() {
        bail!(
            "--kernel-src {d} was configured or built in place (it has {}): the kernel refuses the \
             out-of-tree (O=) builds xtask makes (\"The source tree is not clean\"); save its .config \
             and run `make -C {d} mrproper`, or use a clean checkout (`git -C {d} worktree add ../linux-tierkit`)",
            dirty.join(", "),
            d = dir.display()
        );
    }
    Ok((dir, version))
}

fn custom_source(dir: &Path) -> Result<KernelSource> {
    let (dir, version) = check_custom_source(dir)?;
    let id = format!(
        "custom-{}",
        &util::sha256_hex(dir.to_string_lossy().as_bytes())[..10]
    );
    say!("kernel source: {} (version {version})", dir.display());
    Ok(KernelSource {
        dir,
        version,
        custom: true,
        id,
    })
}

fn debian_source() -> Result<KernelSource> {
    let cache = util::cache_dir()?;
    let dir = cache.join("src").join(DEFAULT_PACKAGE);
    if !dir.join("Makefile").is_file() {
        let _lock = util::lock(&cache.join("src.lock"), "the kernel source")?;
        if !dir.join("Makefile").is_file() {
            fetch_debian_source(&cache, &dir)?;
        }
    }
    let version = kconfig::makefile_version(&fs::read_to_string(dir.join("Makefile"))?)
        .with_context(|| format!("{}/Makefile", dir.display()))?;
    Ok(KernelSource {
        dir,
        version,
        custom: false,
        id: DEFAULT_PACKAGE.into(),
    })
}

/// apt-get options that make apt use only `apt_dir`: its own sources,
/// state, cache and preferences, no system status and no locking.
fn apt_options(c: &Path) -> Vec<String> {
    let d = c.display();
    [
        format!("Dir::Etc={d}/etc"),
        format!("Dir::Etc::SourceList={d}/etc/sources.list"),
        format!("Dir::Etc::SourceParts={d}/etc/sources.list.d"),
        format!("Dir::State={d}/state"),
        format!("Dir::Cache={d}/cache"),
        format!("Dir::Etc::Preferences={d}/etc/preferences"),
        format!("Dir::Etc::PreferencesParts={d}/etc/preferences.d"),
        "APT::Architecture=amd64".into(),
        "Debug::NoLocking=1".into(),
        "Dir::State::status=/dev/null".into(),
        "APT::Sandbox::User=root".into(),
        // Without it `apt-get update` only warns when the mirror is
        // unreachable, and the user sees "Unable to locate package" later.
        "APT::Update::Error-Mode=any".into(),
    ]
    .into_iter()
    .flat_map(|o| ["-o".to_string(), o])
    .collect()
}

/// The private apt configuration in `cache/apt` (its dirs and its only
/// source), then `apt-get update` and `apt-get download PACKAGES` into
/// `dest`. `what` names the download in the spinner.
pub(crate) fn apt_download(cache: &Path, packages: &[&str], dest: &Path, what: &str) -> Result<()> {
    let c = cache.join("apt");
    for d in [
        "state/lists/partial",
        "cache/archives/partial",
        "etc/sources.list.d",
        "etc/preferences.d",
    ] {
        fs::create_dir_all(c.join(d))
            .with_context(|| format!("creating {}", c.join(d).display()))?;
    }
    fs::create_dir_all(dest).with_context(|| format!("creating {}", dest.display()))?;
    fs::write(c.join("etc/sources.list"), APT_SOURCE)?;
    let pb = util::spinner(&format!(
        "fetching {what} from trixie-backports (private apt config in {})",
        c.display()
    ));
    let mut update = Command::new("apt-get");
    update.args(apt_options(&c)).arg("update");
    util::run_logged(update, &cache.join("fetch.log"), |_| {}).context(
        "apt-get update with the private configuration failed (is deb.debian.org reachable?)",
    )?;
    let mut dl = Command::new("apt-get");
    dl.args(apt_options(&c))
        .arg("download")
        .args(packages)
        .current_dir(dest);
    util::run_logged(dl, &cache.join("fetch-download.log"), |l| {
        pb.set_message(format!("apt-get download: {l}"))
    })
    .with_context(|| format!("apt-get download {} failed", packages.join(" ")))?;
    pb.finish_and_clear();
    Ok(())
}

/// Downloads `linux-source-7.3` through a private apt configuration and
/// extracts it to `dest` atomically (temp dir + rename).
fn fetch_debian_source(cache: &Path, dest: &Path) -> Result<()> {
    let t = util::Timer::start();
    let debs = cache.join("apt").join("debs");
    fs::create_dir_all(&debs)?;
    let mut deb = find_deb(&debs)?;
    if deb.is_none() {
        apt_download(cache, &[DEFAULT_PACKAGE], &debs, DEFAULT_PACKAGE)?;
        deb = find_deb(&debs)?;
    }
    let deb = deb.with_context(|| {
        format!(
            "apt-get download left no {DEFAULT_PACKAGE}_*.deb in {}",
            debs.display()
        )
    })?;
    let parent = dest.parent().context("source dir has no parent")?;
    fs::create_dir_all(parent)?;
    let tmp = parent.join(format!(".extract-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(tmp.join("deb"))?;
    let pb = util::spinner(&format!(
        "extracting {}",
        deb.file_name().unwrap_or_default().to_string_lossy()
    ));
    let result = (|| -> Result<()> {
        let mut x = Command::new("dpkg");
        x.arg("-x").arg(&deb).arg(tmp.join("deb"));
        util::run_captured(&mut x)?;
        let tarball = tmp
            .join("deb/usr/src")
            .join(format!("{DEFAULT_PACKAGE}.tar.xz"));
        if !tarball.is_file() {
            bail!(
                "{} holds no usr/src/{DEFAULT_PACKAGE}.tar.xz",
                deb.display()
            );
        }
        let mut tar = Command::new("tar");
        tar.arg("-xf").arg(&tarball).arg("-C").arg(&tmp);
        util::run_captured(&mut tar)?;
        let extracted = tmp.join(DEFAULT_PACKAGE);
        if !extracted.join("Makefile").is_file() {
            bail!(
                "{} did not yield {DEFAULT_PACKAGE}/Makefile",
                tarball.display()
            );
        }
        fs::rename(&extracted, dest)
            .with_context(|| format!("renaming {} to {}", extracted.display(), dest.display()))?;
        Ok(())
    })();
    let _ = fs::remove_dir_all(&tmp);
    pb.finish_and_clear();
    result?;
    say!(
        "kernel source ready in {} ({})",
        dest.display(),
        util::fmt_dur(t.elapsed())
    );
    Ok(())
}

fn find_deb(debs: &Path) -> Result<Option<PathBuf>> {
    let mut found: Vec<PathBuf> = fs::read_dir(debs)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n.starts_with(&format!("{DEFAULT_PACKAGE}_")) && n.ends_with(".deb")
            })
        })
        .collect();
    // The newest download wins: file names do not sort as Debian versions
    // do (7.3.10 < 7.3.4 as text).
    found.sort_by_key(|p| fs::metadata(p).and_then(|m| m.modified()).ok());
    Ok(found.pop())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apt_is_private() {
        let o = apt_options(Path::new("/c/apt"));
        assert!(o.iter().any(|s| s == "Dir::State::status=/dev/null"));
        assert!(o
            .iter()
            .any(|s| s == "Dir::Etc::SourceList=/c/apt/etc/sources.list"));
        assert_eq!(o.iter().filter(|s| *s == "-o").count(), 12);
        assert!(o.iter().any(|s| s == "APT::Update::Error-Mode=any"));
        assert!(APT_SOURCE.contains("trixie-backports") && !APT_SOURCE.contains("sid"));
    }
}
