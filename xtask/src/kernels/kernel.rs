//! The test kernel: source, config, build, all cached outside the repo.
//!
//! Stages, each a function with a typed value in hand, one file each:
//! [`source`] -> [`KernelSource`] (`source.rs`: Debian's package through a
//! private apt configuration, or `--kernel-src`), [`configure`] ->
//! [`KernelConfig`] (`config.rs`), [`build`] -> [`KernelBuild`]
//! (`build.rs`); `cache.rs` is the build cache's bookkeeping (stamps,
//! builds started by hand or by another process).
//!
//! Cache layout (`$TIERKIT_CACHE`, default `~/.cache/tierkit`):
//! - `apt/`: a private apt configuration and state (never the system's);
//! - `src/linux-source-7.3/`: the extracted Debian source;
//! - `stage/<source id>[-<profile>]/`: a scratch `O=` dir where the config is
//!   generated (one per [`Profile`]: `linux-source-7.3`, `linux-source-7.3-debug`);
//! - `configs/<fingerprint>.config`: final configs by input fingerprint;
//! - `kernels/<version>-<sha256(.config)[..12]>/`: `O=` build dirs; a build is
//!   complete when it holds the stamp `.tierkit-built`. A `--kernel-src`
//!   tree adds `-custom-<hash of its path>`: a build dir belongs to one tree.

use crate::kernels::kconfig;
use crate::kernels::profile::{KernelKind, Profile};
use crate::say;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::process::Command;

mod build;
mod cache;
mod config;

pub use super::source::{check_custom_source, source, KernelSource, DEFAULT_PACKAGE};
pub use build::build;
pub use config::{configure, fragments};

/// Marks a finished build; written only after `make` succeeded.
pub const STAMP: &str = ".tierkit-built";
const ARCH: &str = "ARCH=x86_64";
const LLVM: &str = "LLVM=1";

/// The final, checked `.config` for a source.
#[derive(Clone, Debug)]
pub struct KernelConfig {
    pub src: KernelSource,
    pub text: String,
    /// First 12 hex digits of sha256(.config).
    pub hash: String,
    /// `<version>-<hash>`: the build dir's name.
    pub key: String,
    pub profile: Profile,
}

/// A built kernel: `out_dir` is the KDIR for module builds.
#[derive(Clone, Debug)]
pub struct KernelBuild {
    pub src: PathBuf,
    pub out_dir: PathBuf,
    pub version: String,
    pub config_hash: String,
    pub key: String,
    pub bzimage: PathBuf,
    /// The profile whose fragments made the config.
    pub profile: Profile,
    /// Debian's kernel (`--kernel debian`) rather than one xtask built.
    pub debian: Option<crate::kernels::debian::DebianKernel>,
}

/// The kernel to build (or fetch): `--kernel-src`, `--fresh-config`, one
/// `--profile` and `--kernel`.
#[derive(Clone, Debug)]
pub struct KernelRequest {
    /// `--kernel-src`; `None`: Debian's linux-source-7.3.
    pub src: Option<PathBuf>,
    /// Regenerate the config even if an identical one is remembered.
    pub fresh_config: bool,
    pub profile: Profile,
    /// Whose kernel: tierkit's own or Debian's as shipped.
    pub kind: KernelKind,
}

impl KernelRequest {
    /// The kernel: built (cached) for tierkit, fetched for Debian.
    pub fn ensure(&self) -> Result<KernelBuild> {
        match self.kind {
            KernelKind::Tierkit => ensure(self.src.as_deref(), self.fresh_config, self.profile),
            KernelKind::Debian => ensure_debian(),
        }
    }
}

/// Source, config and build: what every subcommand that boots calls.
pub fn ensure(
    kernel_src: Option<&Path>,
    fresh_config: bool,
    profile: Profile,
) -> Result<KernelBuild> {
    let src = source(kernel_src)?;
    let cfg = configure(&src, fresh_config, profile)?;
    build(&cfg)
}

/// `make -C <source> O=<out> ARCH=x86_64 LLVM=1`.
pub(super) fn kmake(src: &KernelSource, out: &Path) -> Command {
    let mut cmd = Command::new("make");
    cmd.arg("-C")
        .arg(&src.dir)
        .arg(format!("O={}", out.display()))
        .args([ARCH, LLVM]);
    cmd
}

/// Debian's kernel (`--kernel debian`): fetched, extracted, its Rust
/// metadata rebuilt ([`crate::kernels::debian::ensure`]); `out_dir` is the tree the
/// module builds against, `bzimage` Debian's vmlinuz.
pub fn ensure_debian() -> Result<KernelBuild> {
    let d = crate::kernels::debian::ensure()?;
    let h = &d.prepared.headers;
    Ok(KernelBuild {
        src: d.prepared.dir.clone(),
        out_dir: d.prepared.dir.clone(),
        version: h.release.clone(),
        config_hash: kconfig::config_hash(&h.config),
        key: h.key.clone(),
        bzimage: d.vmlinuz.clone(),
        profile: Profile::Default,
        debian: Some(d),
    })
}

/// `cargo xtask kernel`.
pub fn cmd_kernel(kernel_src: Option<&Path>, fresh_config: bool, profile: Profile) -> Result<()> {
    let k = ensure(kernel_src, fresh_config, profile)?;
    say!("kernel {} from {}", k.version, k.src.display());
    say!("bzImage: {}", k.bzimage.display());
    println!("KDIR={}", k.out_dir.display());
    // The top-level Makefile sets LLVM=1 and PATH itself (see its header).
    say!(
        "build the module by hand with: make KDIR={}",
        k.out_dir.display()
    );
    Ok(())
}
