//! `cargo xtask module --kdir DIR`: tierkit.ko for a kernel someone else
//! built, from its installed headers tree (`/usr/src/linux-headers-$(uname
//! -r)`, what `/lib/modules/$(uname -r)/build` points to).
//!
//! A Rust module needs more than the headers: the kernel's Rust metadata
//! (`rust/libkernel.rmeta`, `rust/libmacros.so`, ...), made by the same
//! rustc and bindgen that built the kernel, so that the mangled names the
//! module calls are the ones the kernel exports. A tree that has them is
//! built against directly. Debian ships none, so for a Debian 7.3 kernel
//! xtask rebuilds them:
//! - the source: `linux-source-7.3` through the private apt configuration
//!   ([`crate::kernels::kernel::source`]), the source package the kernel was built from;
//! - the toolchain: a private trixie root ([`toolchain_root`], made once
//!   with mmdebstrap into `toolchain/trixie/`) with Debian's gcc-14, rustc,
//!   bindgen, whose versions must be the ones the headers' `.config`
//!   records;
//! - `make olddefconfig prepare modules_prepare` with the headers' `.config`
//!   into `kdir/<kernel.release>-<sha256(.config)[..12]>/`, inside that root;
//!   olddefconfig must not change a single option, and the Rust exports it
//!   generates must be the ones in the headers' `Module.symvers`;
//! - the headers' `utsrelease.h`, `kernel.release` and `Module.symvers`
//!   replace the rebuilt ones, so that vermagic is the kernel's and modpost
//!   checks against what the kernel really exports.
//!
//! The module is then built from a copy of `module/` in that dir (Kbuild
//! writes its objects next to the sources; `module/` keeps tierkit's own
//! kernel's) with no `LLVM=1`: Debian builds with gcc.

mod build;
mod prepare;
#[cfg(test)]
mod tests;
mod toolchain;

use crate::kernels::kconfig;
use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The kernel series tierkit's Rust code is written against.
pub const SERIES: (u32, u32) = (7, 3);
/// Marks a finished `kdir/<key>/` (written after every check passed).
const STAMP: &str = ".tierkit-prepared";

/// What an installed headers tree says about its kernel.
#[derive(Clone, Debug)]
pub struct Headers {
    pub dir: PathBuf,
    /// `include/config/kernel.release`: `7.3.4+deb13-amd64`.
    pub release: String,
    /// `7.3.4`.
    pub version: (u32, u32, u32),
    pub config: String,
    /// `<release>-<sha256(.config)[..12]>`: the prepared dir's name.
    pub key: String,
    /// `rust/libkernel.rmeta` and `rust/libmacros.so` are there.
    pub rust_metadata: bool,
}

/// How the module gets built against a headers tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// The tree has the Rust metadata: `make -C DIR M=...` with the host's
    /// toolchain (`LLVM=1` when the kernel was built with clang).
    Direct { llvm: bool },
    /// A Debian kernel without the metadata: rebuild it (module docs).
    RebuildDebian,
}

/// The first line of `include/config/kernel.release`.
pub fn parse_kernel_release(text: &str) -> Result<String> {
    let r = text.lines().next().unwrap_or("").trim();
    if r.is_empty() || r.contains(char::is_whitespace) || r.contains('/') {
        bail!("include/config/kernel.release does not hold a kernel release ({r:?})");
    }
    Ok(r.to_string())
}

/// `7.3.4` of `7.3.4+deb13-amd64`, `6.8.0` of `6.8.0-45-generic`, `7.3.0`
/// of `7.3-rc2`.
pub fn release_version(release: &str) -> Option<(u32, u32, u32)> {
    let end = release
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(release.len());
    let mut it = release[..end].split('.').filter(|s| !s.is_empty());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    let patch = it.next().map_or(Some(0), |s| s.parse().ok())?;
    Some((major, minor, patch))
}

/// The cache key of a prepared tree: `<release>-<sha256(.config)[..12]>`.
pub fn cache_key(release: &str, config: &str) -> String {
    format!("{release}-{}", kconfig::config_hash(config))
}

/// One line of `Module.symvers`: `crc symbol module export-type [namespace]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub crc: String,
    pub name: String,
    pub module: String,
    pub export: String,
}

pub fn parse_symvers(text: &str) -> Vec<Symbol> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split('\t');
            let (crc, name, module, export) = (f.next()?, f.next()?, f.next()?, f.next()?);
            (crc.starts_with("0x") && !name.is_empty()).then(|| Symbol {
                crc: crc.into(),
                name: name.into(),
                module: module.into(),
                export: export.into(),
            })
        })
        .collect()
}

/// Rust's exports (v0 mangling, `_R...`) from vmlinux.
pub fn rust_exports(syms: &[Symbol]) -> BTreeSet<String> {
    syms.iter()
        .filter(|s| s.module == "vmlinux" && s.name.starts_with("_R"))
        .map(|s| s.name.clone())
        .collect()
}

/// The symbols of the kernel's generated Rust export lists
/// (`rust/exports_*_generated.h`: `EXPORT_SYMBOL_RUST_GPL(_R...);`).
pub fn parse_rust_export_header(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let inner = l.strip_prefix("EXPORT_SYMBOL_RUST_GPL(")?;
            Some(inner.split(')').next()?.trim().to_string())
        })
        .filter(|s| !s.is_empty())
        .collect()
}

/// The lines of Kbuild's output that name a symbol modpost could not
/// resolve (`ERROR: modpost: "x" [.../tierkit.ko] undefined!`, or the
/// warning form).
pub fn undefined_symbols(output: &str) -> Vec<String> {
    output
        .lines()
        .filter(|l| l.contains("undefined!"))
        .map(|l| l.trim().to_string())
        .collect()
}

/// Reads and checks `dir` without changing anything; every refusal is one
/// line that says what is missing.
pub fn inspect(dir: &Path) -> Result<Headers> {
    let dir = dir
        .canonicalize()
        .map_err(|_| anyhow::anyhow!("--kdir {}: no such directory", dir.display()))?;
    let d = dir.display();
    if !dir.is_dir() {
        bail!("--kdir {d}: not a directory");
    }
    let config = fs::read_to_string(dir.join(".config")).map_err(|_| {
        anyhow::anyhow!(
            "--kdir {d} has no .config: not a kernel build or headers tree \
             (on Debian: apt-get install linux-headers-$(uname -r), then --kdir /lib/modules/$(uname -r)/build)"
        )
    })?;
    let release = match fs::read_to_string(dir.join("include/config/kernel.release")) {
        Ok(t) => parse_kernel_release(&t).map_err(|e| anyhow::anyhow!("--kdir {d}: {e}"))?,
        Err(_) => bail!(
            "--kdir {d} has no include/config/kernel.release: a source tree that was never \
             prepared (run `make prepare` there) or not a kernel tree"
        ),
    };
    let version = release_version(&release)
        .with_context(|| format!("--kdir {d}: cannot read a version from release {release}"))?;
    let cfg = kconfig::parse_config(&config);
    let rust_metadata =
        dir.join("rust/libkernel.rmeta").is_file() && dir.join("rust/libmacros.so").is_file();
    let h = Headers {
        key: cache_key(&release, &config),
        dir: dir.clone(),
        release,
        version,
        config,
        rust_metadata,
    };
    if (version.0, version.1) != SERIES {
        bail!(
            "--kdir {d}: kernel {} is unsupported: tierkit builds against Linux {}.{} only (its Rust code follows that kernel's crate)",
            h.release,
            SERIES.0,
            SERIES.1
        );
    }
    if cfg.get("CONFIG_RUST").map(String::as_str) != Some("y") {
        bail!(
            "--kdir {d}: kernel {} was built without Rust (CONFIG_RUST is not set): it cannot load a Rust module",
            h.release
        );
    }
    if !dir.join("Module.symvers").is_file() {
        bail!(
            "--kdir {d} has no Module.symvers: modpost could not check the module against the kernel's exports"
        );
    }
    plan(&h, &cfg)?;
    Ok(h)
}

/// How to build against `h`, or the one line that says what is missing.
pub fn plan(h: &Headers, cfg: &std::collections::BTreeMap<String, String>) -> Result<Plan> {
    let d = h.dir.display();
    if h.rust_metadata {
        return Ok(Plan::Direct {
            llvm: cfg.get("CONFIG_CC_IS_CLANG").map(String::as_str) == Some("y"),
        });
    }
    let signature = cfg
        .get("CONFIG_VERSION_SIGNATURE")
        .map(String::as_str)
        .unwrap_or("");
    let cc = cfg
        .get("CONFIG_CC_VERSION_TEXT")
        .map(String::as_str)
        .unwrap_or("");
    if signature.contains("Ubuntu") {
        bail!(
            "--kdir {d} has no Rust metadata (rust/libkernel.rmeta, rust/libmacros.so): on Ubuntu install linux-lib-rust-{}",
            h.release
        );
    }
    if h.release.contains("+deb") && cc.contains("(Debian ") {
        return Ok(Plan::RebuildDebian);
    }
    bail!(
        "--kdir {d} has no Rust metadata (rust/libkernel.rmeta, rust/libmacros.so) and is not a Debian kernel xtask can rebuild it for: \
         build the module in the kernel's own build tree (where `make` ran), or ask the distribution for its Rust metadata package"
    )
}

pub use build::{build_module, cmd_module};
pub use prepare::{config_changes, prepare, Prepared};
pub use toolchain::{in_root, toolchain_root, ROOT_PACKAGES};
