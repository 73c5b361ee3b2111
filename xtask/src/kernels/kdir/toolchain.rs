//! The private trixie root with Debian's kernel toolchain (gcc-14, rustc,
//! bindgen: [`ROOT_PACKAGES`]), made once with mmdebstrap, and commands run
//! inside it ([`in_root`]).

use crate::kernels::source;
use crate::say;
use crate::util;
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

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
pub(super) const ROOT_SUITE: &str = "trixie";
const ROOT_MIRROR: &str = "http://deb.debian.org/debian";

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
        .join(source::DEFAULT_PACKAGE)
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
