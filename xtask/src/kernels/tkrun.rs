//! tk-run's C parts for the guest: `libtkrun.so` (the preload library,
//! `tkrun/libtkrun/*.c`) and the two unmodified test programs `tk-stream`
//! and `tkrun-check` (`tkrun/*.c`), built with the host's gcc against its
//! glibc (bookworm's 2.36; the guest gets trixie's 2.41 and its loader
//! from the private root of [`guest_tools`], with numactl). See
//! Documentation/dev-tools/tk-run.md.

use crate::kernels::guest_tools::{self, elf_needs, GuestFiles};
use crate::util::{self, show_cmd};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the library lands in the guest (`tk-run --lib`'s default).
pub const GUEST_LIB: &str = "/lib/tierkit/libtkrun.so";

/// The programs the parts put on the guest's PATH (`/usr/bin/tk-stream`,
/// `/usr/bin/tkrun-check`), in every initramfs.
pub fn guest_programs() -> impl Iterator<Item = &'static str> {
    PARTS
        .iter()
        .map(|p| p.3)
        .filter(|g| g.starts_with("/usr/bin/"))
}

/// Flags for every C file: warnings are errors.
const CFLAGS: &[&str] = &["-O2", "-g", "-Wall", "-Wextra", "-Werror"];

/// The preload library's C files in `tkrun/libtkrun/`, by job (their
/// private header is `libtkrun.h` there): configuration and start, the
/// range table, the /dev/tierkit calls, the malloc family, the mmap
/// family, madvise/mprotect/msync, fork.
const LIB_SOURCES: &[&str] = &[
    "libtkrun/init.c",
    "libtkrun/table.c",
    "libtkrun/device.c",
    "libtkrun/malloc.c",
    "libtkrun/mmap.c",
    "libtkrun/advice.c",
    "libtkrun/fork.c",
];

/// `(sources in tkrun/, output name, extra flags, guest path)`.
const PARTS: &[(&[&str], &str, &[&str], &str)] = &[
    (
        LIB_SOURCES,
        "libtkrun.so",
        &["-shared", "-fPIC", "-fvisibility=hidden"],
        GUEST_LIB,
    ),
    (&["tk-stream.c"], "tk-stream", &[], "/usr/bin/tk-stream"),
    (
        &["tkrun-check.c", "tkrun-fork.c"],
        "tkrun-check",
        &["-pthread"],
        "/usr/bin/tkrun-check",
    ),
];

/// One built file and where it goes in the guest.
#[derive(Clone, Debug)]
pub struct Part {
    pub path: PathBuf,
    pub guest: &'static str,
}

/// Compiles the parts into `out` (gcc, a second or so each under load),
/// as make would: a part whose output is newer than its sources and every
/// header it may include (`tkrun/**/*.h`, `include/uapi/**`), and was made
/// by the same command (kept beside it in `NAME.cmd`), is left as it is.
pub fn build_into(out: &Path) -> Result<Vec<Part>> {
    let root = util::repo_root();
    std::fs::create_dir_all(out)?;
    // One build at a time in `out`: two boots of one checkout at once
    // (`test --lanes 2`) would otherwise both run gcc on the same output,
    // and one could pack the other's half-written file.
    let _lock = util::lock(&out.join(".lock"), "the tk-run build")?;
    let headers = newest_mtime(&[root.join("tkrun"), root.join("include/uapi")], |p| {
        p.extension().is_some_and(|e| e == "h")
    });
    let mut parts = Vec::new();
    for (sources, name, extra, guest) in PARTS {
        let path = out.join(name);
        let mut cmd = Command::new("gcc");
        cmd.args(CFLAGS)
            .args(*extra)
            .arg("-I")
            .arg(root.join("include/uapi"))
            .arg("-o")
            .arg(&path)
            .args(sources.iter().map(|src| root.join("tkrun").join(src)));
        let shown = show_cmd(&cmd);
        let stamp = out.join(format!("{name}.cmd"));
        let inputs: Vec<PathBuf> = sources.iter().map(|s| root.join("tkrun").join(s)).collect();
        // A file that cannot be read: rebuild.
        let newest = match (newest_mtime(&inputs, |_| true), &headers) {
            (Ok(s), Ok(h)) => s.max(*h),
            _ => None,
        };
        let made = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
        let same_cmd = std::fs::read_to_string(&stamp).is_ok_and(|c| c == shown);
        if same_cmd && made.is_some_and(|m| newest.is_some_and(|n| m > n)) {
            parts.push(Part { path, guest });
            continue;
        }
        let _ = std::fs::remove_file(&stamp);
        let st = cmd
            .stdin(std::process::Stdio::null())
            .status()
            .with_context(|| {
                format!("could not start `{shown}` (apt-get install gcc libc6-dev)")
            })?;
        if !st.success() {
            bail!("`{shown}` failed ({st}); compiler output above");
        }
        std::fs::write(&stamp, &shown)?;
        parts.push(Part { path, guest });
    }
    Ok(parts)
}

/// The newest modification time of the files `keep` accepts under `paths`
/// (files or directories, walked whole); `None` if there is none.
fn newest_mtime(
    paths: &[PathBuf],
    keep: impl Fn(&Path) -> bool + Copy,
) -> std::io::Result<Option<std::time::SystemTime>> {
    let mut newest = None;
    for p in paths {
        let meta = std::fs::metadata(p)?;
        let t = if meta.is_dir() {
            let sub = std::fs::read_dir(p)?
                .map(|e| e.map(|e| e.path()))
                .collect::<std::io::Result<Vec<PathBuf>>>()?;
            newest_mtime(&sub, keep)?
        } else if keep(p) {
            Some(meta.modified()?)
        } else {
            None
        };
        newest = newest.max(t);
    }
    Ok(newest)
}

/// [`build_into`] `target/tkrun`.
pub fn build() -> Result<Vec<Part>> {
    build_into(&util::target_dir().join("tkrun"))
}

/// Adds the parts, numactl, and the glibc, loader and libgcc_s they need
/// (from the root of [`guest_tools::TOOL_PACKAGES`]) to `f`.
pub fn add_guest_files(f: &mut GuestFiles) -> Result<()> {
    let parts = build()?;
    let root = guest_tools::ensure_root(guest_tools::TOOL_PACKAGES)?;
    f.add_elf(&root, "/usr/bin/numactl", None)?;
    f.add_elf(&root, "/lib/x86_64-linux-gnu/libc.so.6", None)?;
    // glibc dlopens it to unwind a cancelled thread (pthread_cancel,
    // pthread_exit): a threaded program needs it though no DT_NEEDED names it.
    f.add_elf(&root, "/lib/x86_64-linux-gnu/libgcc_s.so.1", None)?;
    for p in parts {
        let data =
            std::fs::read(&p.path).with_context(|| format!("reading {}", p.path.display()))?;
        let needs = elf_needs(&data)?;
        for lib in &needs.needed {
            if lib != "libc.so.6" && lib != "ld-linux-x86-64.so.2" {
                bail!(
                    "{} needs {lib}; only glibc is in the guest for it",
                    p.path.display()
                );
            }
        }
        f.add_file(p.guest, 0o755, data);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second build with nothing changed runs no gcc (the outputs keep
    /// their times); another command for a part (its `.cmd` stamp differs)
    /// rebuilds that part.
    #[test]
    fn parts_are_rebuilt_only_when_out_of_date() {
        if Command::new("gcc").arg("--version").output().is_err() {
            eprintln!("no gcc: skipped");
            return;
        }
        let out = std::env::temp_dir().join(format!("tkrun-stamp-{}", std::process::id()));
        let mtimes = |parts: &[Part]| -> Vec<std::time::SystemTime> {
            parts
                .iter()
                .map(|p| std::fs::metadata(&p.path).unwrap().modified().unwrap())
                .collect()
        };
        let first = mtimes(&build_into(&out).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let second = mtimes(&build_into(&out).unwrap());
        assert_eq!(first, second);
        std::fs::write(out.join("tk-stream.cmd"), "gcc -O0 something else").unwrap();
        let third = mtimes(&build_into(&out).unwrap());
        assert_eq!(third[0], first[0]);
        assert!(third[1] > first[1]);
        assert_eq!(third[2], first[2]);
        let _ = std::fs::remove_dir_all(&out);
    }

    /// The library's bookkeeping on the host: with TKRUN_DEVICE=/dev/zero
    /// its "tierkit" mappings are shared memory (no placement), which is
    /// what makes fork, mremap and MAP_FIXED hard; tkrun-check must pass
    /// with every big block on the device, and without the library too.
    #[test]
    fn library_passes_the_checks_on_the_host() {
        if Command::new("gcc").arg("--version").output().is_err() {
            eprintln!("no gcc: skipped");
            return;
        }
        let out = std::env::temp_dir().join(format!("tkrun-host-{}", std::process::id()));
        let parts = build_into(&out).unwrap();
        let lib = &parts[0].path;
        let check = &parts[2].path;
        let run = |preload: bool| {
            let mut c = Command::new(check);
            c.arg("4");
            if preload {
                c.env("LD_PRELOAD", lib)
                    .env("TKRUN_WEIGHTS", "0:1")
                    .env("TKRUN_DEVICE", "/dev/zero");
            }
            let o = c.output().unwrap();
            (
                o.status.success(),
                String::from_utf8_lossy(&o.stdout).into_owned(),
            )
        };
        let (ok, text) = run(false);
        assert!(ok, "{text}");
        let (ok, text) = run(true);
        assert!(ok, "{text}");
        for name in [
            "malloc",
            "calloc",
            "realloc-grown",
            "mmap",
            "mremap-grown",
            "fork-child",
        ] {
            let line = format!("backing {name} /dev/zero");
            assert!(text.contains(&line), "{line} missing:\n{text}");
        }
        // Above the threshold only: with 64 MiB, no block of 4 to 16 MiB
        // is on the device.
        let o = Command::new(check)
            .arg("4")
            .env("LD_PRELOAD", lib)
            .env("TKRUN_WEIGHTS", "0:1")
            .env("TKRUN_DEVICE", "/dev/zero")
            .env("TKRUN_THRESHOLD", (64u64 << 20).to_string())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success() && text.contains("PASSED"), "{text}");
        assert!(
            !text.contains(" /dev/zero"),
            "a block below the threshold on the device:\n{text}"
        );
        // A device that cannot be mapped (as when tierkit refuses): every
        // block falls back to the kernel's memory, the checks still pass,
        // and stderr says so in one line, once.
        let o = Command::new(check)
            .arg("4")
            .env("LD_PRELOAD", lib)
            .env("TKRUN_WEIGHTS", "0:1")
            .env("TKRUN_DEVICE", "/dev/null")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success() && text.contains("PASSED"), "{text}{err}");
        assert!(
            !text.contains(" /dev/null\n"),
            "a block on /dev/null:\n{text}"
        );
        assert_eq!(
            err,
            "tk-run: tierkit refused a mapping; using the kernel's memory for it and any like it\n"
        );
        let stream = Command::new(&parts[1].path)
            .args(["-n", "300000", "-r", "2"])
            .env("LD_PRELOAD", lib)
            .env("TKRUN_WEIGHTS", "0:1")
            .env("TKRUN_DEVICE", "/dev/zero")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&stream.stdout);
        assert!(
            stream.status.success() && text.contains("check ok"),
            "{text}"
        );
        let _ = std::fs::remove_dir_all(&out);
    }
}
