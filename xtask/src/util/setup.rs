//! Host tool check and `scripts/setup-host.sh`.
//!
//! Every subcommand calls [`ensure`] first: on a fresh Debian 12 machine it
//! runs the setup script once, then checks again.

use crate::say;
use crate::util::{self, cmd_stdout, which};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The minimum QEMU major version (`cxl-type3,volatile-memdev`, HMAT fixes).
pub const QEMU_MIN_MAJOR: u32 = 10;

/// One thing the host lacks.
#[derive(Debug)]
pub struct Missing {
    pub what: String,
    pub fix: String,
}

fn miss(list: &mut Vec<Missing>, what: impl Into<String>, fix: impl Into<String>) {
    list.push(Missing {
        what: what.into(),
        fix: fix.into(),
    });
}

/// Checks every tool xtask uses. Returns what is missing.
pub fn check() -> Vec<Missing> {
    let mut m = Vec::new();
    for (tool, pkg) in [
        ("make", "make"),
        ("flex", "flex"),
        ("bison", "bison"),
        ("bc", "bc"),
        ("python3", "python3"),
        ("apt-get", "apt"),
        ("dpkg", "dpkg"),
        ("tar", "tar"),
        ("xz", "xz-utils"),
        // The private trixie roots of --kernel debian, module --kdir and
        // the guest tools of run -- CMD and shell.
        ("mmdebstrap", "mmdebstrap"),
        // The test of `cargo xtask shell` drives it in a tmux pane.
        ("tmux", "tmux"),
    ] {
        if which(tool).is_none() {
            miss(
                &mut m,
                format!("`{tool}`"),
                format!("apt-get install {pkg}"),
            );
        }
    }
    for (tool, pkg) in [
        ("clang", "clang-19"),
        ("ld.lld", "lld-19"),
        ("llvm-ar", "llvm-19"),
        ("llvm-nm", "llvm-19"),
        ("llvm-objcopy", "llvm-19"),
    ] {
        if which(tool).is_none() {
            miss(
                &mut m,
                format!("`{tool}` (LLVM=1 toolchain; looked in /usr/lib/llvm-19/bin and $PATH)"),
                format!("apt-get install {pkg}"),
            );
        }
    }
    // xtask's venv (KCIDB validation, tuxlava): python3 -m venv needs ensurepip.
    if which("python3").is_some()
        && crate::util::cmd_stdout("python3", &["-c", "import venv, ensurepip"]).is_none()
    {
        miss(
            &mut m,
            "python3's venv module (xtask's venv for the KCIDB check, xtask/src/util/pyenv.rs)",
            "apt-get install python3-venv",
        );
    }
    if !Path::new("/usr/share/keyrings/debian-archive-keyring.gpg").exists() {
        miss(
            &mut m,
            "Debian's archive keyring (the private apt configuration that fetches the kernel source checks signatures with it)",
            "apt-get install debian-archive-keyring",
        );
    }
    if !libclang_present() {
        miss(
            &mut m,
            "libclang (needed by bindgen)",
            "apt-get install libclang-19-dev",
        );
    }
    if !Path::new("/usr/include/libelf.h").exists() {
        miss(
            &mut m,
            "libelf headers (objtool)",
            "apt-get install libelf-dev",
        );
    }
    if !Path::new("/usr/include/stdio.h").exists() || !static_libc_present() {
        miss(
            &mut m,
            "glibc headers and libc.a (host tools, static guest binaries)",
            "apt-get install libc6-dev",
        );
    }
    match busybox_static() {
        Ok(()) => {}
        Err(e) => miss(&mut m, e, "apt-get install busybox-static"),
    }
    if which("rustc").is_none() || which("cargo").is_none() {
        miss(
            &mut m,
            "rustc/cargo",
            "install rustup from https://rustup.rs",
        );
    } else if rust_src().is_none() {
        miss(
            &mut m,
            "the rust-src component (the kernel builds core/alloc from source)",
            "rustup component add rust-src",
        );
    }
    if which("bindgen").is_none() {
        miss(
            &mut m,
            "`bindgen` (bindgen-cli)",
            "cargo install --locked bindgen-cli",
        );
    }
    match qemu_version() {
        None => miss(
            &mut m,
            "qemu-system-x86_64",
            "apt-get install -t bookworm-backports qemu-system-x86 (after adding bookworm-backports)",
        ),
        Some((maj, min)) if maj < QEMU_MIN_MAJOR => miss(
            &mut m,
            format!("qemu-system-x86_64 >= {QEMU_MIN_MAJOR}.0 (found {maj}.{min})"),
            "apt-get install -t bookworm-backports qemu-system-x86 (after adding bookworm-backports)",
        ),
        Some(_) => {}
    }
    m
}

fn libclang_present() -> bool {
    if let Some(d) = std::env::var_os("LIBCLANG_PATH") {
        return Path::new(&d).exists();
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(llvm) = util::llvm_dir() {
        if let Some(p) = llvm.parent() {
            dirs.push(p.join("lib"));
        }
    }
    dirs.push("/usr/lib/x86_64-linux-gnu".into());
    dirs.iter().any(|d| {
        std::fs::read_dir(d).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("libclang"))
        })
    })
}

fn static_libc_present() -> bool {
    [
        "/usr/lib/x86_64-linux-gnu/libc.a",
        "/usr/lib64/libc.a",
        "/usr/lib/libc.a",
    ]
    .iter()
    .any(|p| Path::new(p).exists())
}

/// `$(rustc --print sysroot)/lib/rustlib/src/rust/library`, if present.
pub fn rust_src() -> Option<PathBuf> {
    let sysroot = cmd_stdout("rustc", &["--print", "sysroot"])?;
    let lib = PathBuf::from(sysroot).join("lib/rustlib/src/rust/library");
    lib.join("core/src/lib.rs").is_file().then_some(lib)
}

/// `/bin/busybox` must exist and be static: the initramfs has no libc.
pub fn busybox_static() -> std::result::Result<(), String> {
    let p = Path::new(BUSYBOX);
    if !p.exists() {
        return Err(format!("{BUSYBOX} (busybox-static)"));
    }
    match crate::util::elf::elf_is_static(p) {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!("{BUSYBOX} is dynamically linked (the `busybox` package); the guest needs busybox-static")),
        Err(e) => Err(format!("{BUSYBOX}: {e:#}")),
    }
}

pub const BUSYBOX: &str = "/bin/busybox";

/// QEMU's (major, minor) version.
pub fn qemu_version() -> Option<(u32, u32)> {
    let out = cmd_stdout("qemu-system-x86_64", &["--version"])?;
    parse_qemu_version(&out)
}

fn parse_qemu_version(out: &str) -> Option<(u32, u32)> {
    let rest = out.split("version ").nth(1)?;
    let mut it = rest
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty());
    let maj = it.next()?.parse().ok()?;
    let min = it.next()?.parse().ok()?;
    Some((maj, min))
}

fn print_missing(m: &[Missing]) {
    for x in m {
        say!("  missing: {}  (fix: {})", x.what, x.fix);
    }
}

/// Runs `scripts/setup-host.sh`.
pub fn run_script() -> Result<()> {
    let script = util::repo_root().join("scripts/setup-host.sh");
    say!(
        "running {} (installs packages; needs root or sudo)",
        script.display()
    );
    // Nothing it runs reads stdin (apt-get -y, noninteractive; sudo asks
    // on the terminal itself): a pipe into xtask is never taken for answers.
    let status = Command::new("bash")
        .arg(&script)
        .stdin(std::process::Stdio::null())
        .status()
        .with_context(|| format!("could not run {}", script.display()))?;
    if !status.success() {
        bail!(
            "{} failed ({status}); see its output above",
            script.display()
        );
    }
    Ok(())
}

/// Checks the host; runs the setup script when something is missing and
/// checks again. Fails naming each tool still missing and how to get it.
pub fn ensure() -> Result<()> {
    let m = check();
    if m.is_empty() {
        return Ok(());
    }
    say!(
        "the host is missing {} thing(s); running the setup script:",
        m.len()
    );
    print_missing(&m);
    run_script()?;
    util::setup_llvm_path();
    let m = check();
    if !m.is_empty() {
        print_missing(&m);
        bail!(
            "still missing after scripts/setup-host.sh: {}",
            m.iter()
                .map(|x| x.what.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

/// `cargo xtask setup`.
pub fn cmd_setup(force: bool) -> Result<()> {
    let m = check();
    if m.is_empty() && !force {
        say!(
            "host ready: every tool is present (clang: {}, qemu: {})",
            util::llvm_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_else(|| "$PATH".into()),
            qemu_version()
                .map(|(a, b)| format!("{a}.{b}"))
                .unwrap_or_default()
        );
        return Ok(());
    }
    print_missing(&m);
    run_script()?;
    util::setup_llvm_path();
    let m = check();
    if !m.is_empty() {
        print_missing(&m);
        bail!("still missing after scripts/setup-host.sh");
    }
    say!("host ready");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qemu_versions() {
        assert_eq!(
            parse_qemu_version(
                "QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)\nCopyright"
            ),
            Some((10, 0))
        );
        assert_eq!(
            parse_qemu_version("QEMU emulator version 7.2.19 (Debian 1:7.2+dfsg-7+deb12u16)"),
            Some((7, 2))
        );
        assert_eq!(parse_qemu_version("garbage"), None);
    }
}
