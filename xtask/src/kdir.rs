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
//!   ([`kernel::source`]), the source package the kernel was built from;
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

use crate::kconfig;
use crate::kernel;
use crate::say;
use crate::util::{self, show_cmd};
use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The kernel series tierkit's Rust code is written against.
pub const SERIES: (u32, u32) = (7, 3);
/// Marks a finished `kdir/<key>/` (written after every check passed).
const STAMP: &str = ".tierkit-prepared";
/// Marks a finished toolchain root; holds the package list it was made with.
const ROOT_STAMP: &str = ".tierkit-root";
/// Debian's kernel build toolchain for 7.3.4+deb13 (trixie's versions).
pub const ROOT_PACKAGES: &[&str] = &[
    "rustc",
    "rust-src",
    "bindgen",
    "gcc-14",
    "dwarves",
    "libclang-19-dev",
    "make",
    "bc",
    "flex",
    "bison",
    "libelf-dev",
    "libssl-dev",
    "libc6-dev",
    "cpio",
    "kmod",
    "xz-utils",
    "python3",
    // certs/Kconfig probes `openssl list -key-managers` (ML-DSA signing).
    "openssl",
];
const ROOT_SUITE: &str = "trixie";
const ROOT_MIRROR: &str = "http://deb.debian.org/debian";

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

// --- the toolchain root --------------------------------------------------------

/// The private trixie root with Debian's kernel toolchain, made once.
pub fn toolchain_root() -> Result<PathBuf> {
    let base = util::cache_dir()?.join("toolchain");
    let root = base.join(ROOT_SUITE);
    let want = ROOT_PACKAGES.join(",");
    let stamp_ok =
        |r: &Path| fs::read_to_string(r.join(ROOT_STAMP)).is_ok_and(|s| s.trim() == want);
    if stamp_ok(&root) {
        return Ok(root);
    }
    fs::create_dir_all(&base)?;
    let _lock = util::lock(
        &base.join(format!("{ROOT_SUITE}.lock")),
        "the toolchain root",
    )?;
    if stamp_ok(&root) {
        return Ok(root);
    }
    if fs::read_to_string(root.join(ROOT_STAMP)).is_ok() {
        // A root made with an older list: add what is missing.
        say!("adding packages to the toolchain root {}", root.display());
        let mut a: Vec<String> = ["apt-get", "install", "-y", "-qq", "--no-install-recommends"]
            .map(String::from)
            .to_vec();
        a.extend(ROOT_PACKAGES.iter().map(|s| s.to_string()));
        let mut up = in_root(&root, &["apt-get".into(), "update".into(), "-qq".into()])?;
        util::run_captured(&mut up).context("apt-get update in the toolchain root failed")?;
        let mut c = in_root(&root, &a)?;
        util::run_captured(&mut c).context("apt-get install in the toolchain root failed")?;
        fs::write(root.join(ROOT_STAMP), format!("{want}\n"))?;
        return Ok(root);
    }
    let Some(tool) = util::which("mmdebstrap") else {
        bail!("making the private {ROOT_SUITE} toolchain root needs mmdebstrap: apt-get install mmdebstrap (or run `cargo xtask setup`)");
    };
    let t = util::Timer::start();
    let tmp = base.join(format!(".tmp-{ROOT_SUITE}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    let log = base.join(format!("{ROOT_SUITE}.log"));
    say!(
        "making a private Debian {ROOT_SUITE} root with the kernel's toolchain (gcc-14, rustc, bindgen; a few minutes once; log: {})",
        log.display()
    );
    let pb = util::spinner(&format!("mmdebstrap {ROOT_SUITE} {}", root.display()));
    let mut cmd = Command::new(tool);
    let mode = if is_root() {
        "--mode=root"
    } else {
        "--mode=unshare"
    };
    cmd.args([mode, "--variant=apt"])
        .arg(format!("--include={want}"))
        .arg(ROOT_SUITE)
        .arg(&tmp)
        .arg(ROOT_MIRROR);
    let res = util::run_logged(cmd, &log, |l| pb.set_message(l.to_string()));
    pb.finish_and_clear();
    if let Err(e) = res {
        let _ = fs::remove_dir_all(&tmp);
        return Err(e.context(format!("making the {ROOT_SUITE} toolchain root failed")));
    }
    fs::write(tmp.join(ROOT_STAMP), format!("{want}\n"))?;
    let _ = fs::remove_dir_all(&root);
    fs::rename(&tmp, &root)?;
    say!(
        "toolchain root ready in {} ({})",
        root.display(),
        util::fmt_dur(t.elapsed())
    );
    Ok(root)
}

fn is_root() -> bool {
    util::cmd_stdout("id", &["-u"]).is_some_and(|u| u == "0")
}

/// Enters the root: bind-mounts each `DIR` given before `--` at its own
/// path, then /proc and /dev, and runs the rest in a clean environment.
const IN_ROOT_SH: &str = r#"set -e
R=$1; shift
while [ "$1" != -- ]; do
	mkdir -p "$R$1"
	mount --bind "$1" "$R$1"
	shift
done
shift
mkdir -p "$R/proc" "$R/dev"
mount -t proc proc "$R/proc"
mount --rbind /dev "$R/dev"
exec chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
"#;

/// The directories a command in the root sees at their own paths: the
/// cache and where the kernel source really is (a symlink in the cache
/// may point out of it).
fn root_binds() -> Result<Vec<PathBuf>> {
    let cache = util::cache_dir()?;
    let cache = cache.canonicalize().unwrap_or(cache);
    let mut v = vec![cache.clone()];
    if let Ok(real) = cache
        .join("src")
        .join(kernel::DEFAULT_PACKAGE)
        .canonicalize()
    {
        if !real.starts_with(&cache) {
            v.push(real);
        }
    }
    Ok(v)
}

/// A command run inside `root` (chroot in a private mount namespace, so
/// the mounts go away with it), with [`root_binds`] at their own paths so
/// that paths mean the same inside and out.
pub fn in_root(root: &Path, args: &[String]) -> Result<Command> {
    let script = root
        .parent()
        .context("the toolchain root has no parent")?
        .join("in-root.sh");
    if fs::read_to_string(&script).ok().as_deref() != Some(IN_ROOT_SH) {
        util::write_atomic(&script, IN_ROOT_SH.as_bytes())?;
    }
    let mut cmd = Command::new("unshare");
    if !is_root() {
        // A user namespace may mount proc only in a PID namespace of its
        // own (untested here: this project's machines run as root).
        cmd.args(["--map-root-user", "--pid", "--fork"]);
    }
    cmd.args(["--mount", "--propagation", "private", "--", "sh"])
        .arg(&script)
        .arg(root)
        .args(root_binds()?)
        .arg("--")
        .args(args);
    Ok(cmd)
}

/// Debian's make variables for its kernels (the headers' Makefile:
/// `ARCH=x86`, `CROSS_COMPILE=x86_64-linux-gnu-`, `CC=...gcc-14`).
fn debian_make_vars(cfg: &std::collections::BTreeMap<String, String>) -> Result<Vec<String>> {
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
    let mut src = kernel::source(None)?;
    // Paths in the root are the real ones (see root_binds).
    src.dir = src.dir.canonicalize().unwrap_or(src.dir);
    let v = format!("{}.{}.{}", h.version.0, h.version.1, h.version.2);
    if src.version != v {
        bail!(
            "kernel {} is {v}, but {} holds {} ({}): the Rust metadata must come from the kernel's own source",
            h.release,
            kernel::DEFAULT_PACKAGE,
            src.version,
            src.dir.display()
        );
    }
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
        if kernel::is_kbuild_step(l) {
            pb.set_message(l.trim().to_string())
        }
    });
    pb.finish_and_clear();
    res.with_context(|| format!("`{shown}` failed"))?;
    // The rebuilt Rust exports against the kernel's.
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
    util::write_atomic(
        &out.join(STAMP),
        format!(
            "release={}\nheaders={}\nsource={}\nrust_exports={}\nseconds={}\n",
            h.release,
            h.dir.display(),
            src.dir.display(),
            theirs.len(),
            t.elapsed().as_secs()
        )
        .as_bytes(),
    )?;
    say!(
        "kernel metadata for {} ready in {} ({}; all {} Rust exports reproduced)",
        h.release,
        out.display(),
        util::fmt_dur(t.elapsed()),
        theirs.len()
    );
    Ok(prepared)
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

// --- the module --------------------------------------------------------------

/// Build outputs Kbuild leaves next to the sources: not copied.
fn is_build_output(name: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_release_and_version() {
        assert_eq!(
            parse_kernel_release("7.3.4+deb13-amd64\n").unwrap(),
            "7.3.4+deb13-amd64"
        );
        assert!(parse_kernel_release("\n").is_err());
        assert!(parse_kernel_release("7.3 4").is_err());
        assert_eq!(release_version("7.3.4+deb13-amd64"), Some((7, 3, 4)));
        assert_eq!(release_version("6.8.0-45-generic"), Some((6, 8, 0)));
        assert_eq!(release_version("7.3-rc2"), Some((7, 3, 0)));
        assert_eq!(release_version("7.3.4"), Some((7, 3, 4)));
        assert_eq!(release_version("x7.3"), None);
        assert_eq!(release_version("7"), None);
    }

    #[test]
    fn cache_key_follows_release_and_config() {
        let a = cache_key("7.3.4+deb13-amd64", "CONFIG_RUST=y\n");
        assert!(a.starts_with("7.3.4+deb13-amd64-"));
        assert_eq!(a.len(), "7.3.4+deb13-amd64-".len() + 12);
        assert_ne!(
            a,
            cache_key("7.3.4+deb13-amd64", "CONFIG_RUST=y\nCONFIG_X=y\n")
        );
        assert_ne!(a, cache_key("7.3.4+deb13-cloud-amd64", "CONFIG_RUST=y\n"));
        assert_eq!(a, cache_key("7.3.4+deb13-amd64", "CONFIG_RUST=y\n"));
    }

    const SYMVERS: &str =
        "0x00000000\t_RNvNtCs1234_6kernel5alloc3foo\tvmlinux\tEXPORT_SYMBOL_GPL\t\n\
0x12345678\tkmalloc_trace\tvmlinux\tEXPORT_SYMBOL\t\n\
0x00000000\t_RNvCsabc_4core3bar\tvmlinux\tEXPORT_SYMBOL_GPL\t\n\
0x00000000\t_RNvCsx_3cxl3baz\tdrivers/cxl/core/cxl_core\tEXPORT_SYMBOL_GPL\tCXL\n\
garbage line\n";

    #[test]
    fn symvers_and_rust_exports() {
        let s = parse_symvers(SYMVERS);
        assert_eq!(s.len(), 4);
        assert_eq!(s[1].name, "kmalloc_trace");
        assert_eq!(s[3].module, "drivers/cxl/core/cxl_core");
        let r = rust_exports(&s);
        assert_eq!(
            r.into_iter().collect::<Vec<_>>(),
            ["_RNvCsabc_4core3bar", "_RNvNtCs1234_6kernel5alloc3foo"]
        );
        let h = parse_rust_export_header(
            "/* generated */\nEXPORT_SYMBOL_RUST_GPL(_RNvCsabc_4core3bar);\n#include <x>\n",
        );
        assert_eq!(h.into_iter().collect::<Vec<_>>(), ["_RNvCsabc_4core3bar"]);
    }

    #[test]
    fn modpost_undefined_lines() {
        let out = "  MODPOST Module.symvers\nWARNING: modpost: \"_RNvfoo\" [/x/tierkit.ko] undefined!\n  LD [M]  tierkit.ko\n";
        assert_eq!(undefined_symbols(out).len(), 1);
        assert!(undefined_symbols("  LD [M]  tierkit.ko\n").is_empty());
    }

    #[test]
    fn config_changes_lists_each_difference() {
        let a = kconfig::parse_config("CONFIG_A=y\nCONFIG_B=m\n# CONFIG_C is not set\n");
        let b = kconfig::parse_config("CONFIG_A=y\nCONFIG_C=y\n");
        assert_eq!(
            config_changes(&a, &b),
            ["CONFIG_B: m -> unset", "CONFIG_C: unset -> y"]
        );
        assert!(config_changes(&a, &a).is_empty());
    }

    /// A fake headers tree in a temp dir.
    fn tree(name: &str, release: &str, config: &str, symvers: bool, rust: bool) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tierkit-kdir-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(d.join("include/config")).unwrap();
        fs::write(d.join(".config"), config).unwrap();
        fs::write(
            d.join("include/config/kernel.release"),
            format!("{release}\n"),
        )
        .unwrap();
        if symvers {
            fs::write(d.join("Module.symvers"), SYMVERS).unwrap();
        }
        if rust {
            fs::create_dir_all(d.join("rust")).unwrap();
            fs::write(d.join("rust/libkernel.rmeta"), "").unwrap();
            fs::write(d.join("rust/libmacros.so"), "").unwrap();
        }
        d
    }

    const DEBIAN: &str = "CONFIG_CC_VERSION_TEXT=\"x86_64-linux-gnu-gcc-14 (Debian 14.2.0-19) 14.2.0\"\nCONFIG_RUST=y\n";

    #[test]
    fn refusals_are_one_line_and_say_what_is_missing() {
        let e = |d: &Path| {
            let m = format!("{:#}", inspect(d).unwrap_err());
            assert_eq!(m.lines().count(), 1, "{m}");
            m
        };
        assert!(e(Path::new("/nonexistent/kdir")).contains("no such directory"));
        let empty = std::env::temp_dir().join(format!("tierkit-kdir-empty-{}", std::process::id()));
        fs::create_dir_all(&empty).unwrap();
        assert!(e(&empty).contains("has no .config"));
        let old = tree("old", "6.12.48+deb13-amd64", DEBIAN, true, false);
        assert!(e(&old).contains("kernel 6.12.48+deb13-amd64 is unsupported"));
        let norust = tree("norust", "7.3.4+deb13-amd64", "CONFIG_X=y\n", true, false);
        assert!(e(&norust).contains("built without Rust"));
        let nosym = tree("nosym", "7.3.4+deb13-amd64", DEBIAN, false, false);
        assert!(e(&nosym).contains("no Module.symvers"));
        let ubuntu = tree(
            "ubuntu",
            "7.3.0-5-generic",
            "CONFIG_VERSION_SIGNATURE=\"Ubuntu 7.3.0-5.5-generic 7.3.0\"\nCONFIG_RUST=y\n",
            true,
            false,
        );
        assert!(e(&ubuntu).contains("install linux-lib-rust-7.3.0-5-generic"));
        let other = tree("other", "7.3.1-arch1", "CONFIG_RUST=y\n", true, false);
        assert!(e(&other).contains("not a Debian kernel"));
        for d in [empty, old, norust, nosym, ubuntu, other] {
            let _ = fs::remove_dir_all(d);
        }
    }

    #[test]
    fn plans() {
        let deb = tree("deb", "7.3.4+deb13-amd64", DEBIAN, true, false);
        let h = inspect(&deb).unwrap();
        assert_eq!(h.release, "7.3.4+deb13-amd64");
        assert_eq!(h.key, cache_key("7.3.4+deb13-amd64", DEBIAN));
        assert_eq!(
            plan(&h, &kconfig::parse_config(&h.config)).unwrap(),
            Plan::RebuildDebian
        );
        let own = tree(
            "own",
            "7.3.4",
            "CONFIG_RUST=y\nCONFIG_CC_IS_CLANG=y\n",
            true,
            true,
        );
        let h = inspect(&own).unwrap();
        assert_eq!(
            plan(&h, &kconfig::parse_config(&h.config)).unwrap(),
            Plan::Direct { llvm: true }
        );
        assert_eq!(
            debian_make_vars(&kconfig::parse_config(DEBIAN)).unwrap(),
            [
                "ARCH=x86",
                "CROSS_COMPILE=x86_64-linux-gnu-",
                "CC=x86_64-linux-gnu-gcc-14",
                "HOSTCC=gcc-14"
            ]
        );
        assert!(debian_make_vars(&kconfig::parse_config("CONFIG_RUST=y\n")).is_err());
        for d in [deb, own] {
            let _ = fs::remove_dir_all(d);
        }
    }

    #[test]
    fn build_outputs_are_not_copied() {
        for n in [
            "tierkit.ko",
            "src/.tierkit.o.cmd",
            "tierkit.mod.c",
            "Module.symvers",
            "x.o",
        ] {
            assert!(is_build_output(n), "{n}");
        }
        for n in ["Kbuild", "Makefile", "tierkit.rs", "shim.c", "core.rs"] {
            assert!(!is_build_output(n), "{n}");
        }
    }
}
