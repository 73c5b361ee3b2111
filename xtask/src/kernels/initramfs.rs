//! The guest's initramfs: a newc cpio written in Rust (no root needed).
//!
//! Layout:
//! - `/init`: the `tk-init` guest binary (`guest/src/bin/tk-init.rs`,
//!   its steps in `guest/src/init/`);
//! - `/etc/tierkit/build-info`: what the guest was built from, one line
//!   (/init prints it on the console);
//! - `/bin/busybox` (static) and a symlink for each of its applets (the
//!   shell of `cargo xtask shell`, and tools tests call);
//! - `/lib/modules/tierkit.ko`;
//! - `/lib/modules/pre/NN-<name>.ko`: modules /init loads first, in that
//!   order (Debian's CXL, DAX and kmem drivers under `--kernel debian`);
//! - `/bin/<name>` for every userspace binary (`tk-test-*`, `tk-demo*`,
//!   `tk-bench-*`, ...);
//! - `/dev/console`, so the kernel can open the console for /init before
//!   /init mounts devtmpfs over /dev.

use crate::kernels::module::ModuleBuild;
use crate::kernels::userspace::GuestBinary;
use crate::util;
use crate::util::setup::BUSYBOX;
use anyhow::{bail, Context, Result};
use cpio::newc::{Builder, ModeFileType};
use std::io::Write;
use std::path::{Path, PathBuf};
use tierkit_protocol::param::files;

/// The guest binary that is `/init`.
pub const INIT_BINARY: &str = "tk-init";

/// The written archive.
#[derive(Clone, Debug)]
pub struct Initramfs {
    pub path: PathBuf,
    pub size: u64,
}

/// One archive entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Dir {
        path: String,
    },
    File {
        path: String,
        mode: u32,
        data: Vec<u8>,
    },
    Symlink {
        path: String,
        target: String,
    },
    CharDev {
        path: String,
        mode: u32,
        major: u32,
        minor: u32,
    },
}

impl Entry {
    fn path(&self) -> &str {
        match self {
            Entry::Dir { path }
            | Entry::File { path, .. }
            | Entry::Symlink { path, .. }
            | Entry::CharDev { path, .. } => path,
        }
    }
}

/// Busybox applet links (`usr/bin/awk`, `sbin/insmod`, ...) from
/// `busybox --list-full`.
pub(crate) fn busybox_links() -> Result<Vec<String>> {
    let list = util::cmd_stdout(BUSYBOX, &["--list-full"])
        .with_context(|| format!("`{BUSYBOX} --list-full` failed"))?;
    Ok(list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && *l != "bin/busybox")
        .map(str::to_string)
        .collect())
}

/// Everything that goes into the archive, in order (directories first).
pub fn entries(
    init: Vec<u8>,
    info: &str,
    busybox: Vec<u8>,
    links: &[String],
    ko: Vec<u8>,
    bins: &[(String, Vec<u8>)],
    pre: &[(String, Vec<u8>)],
) -> Vec<Entry> {
    let mut e = Vec::new();
    for d in [
        "bin",
        "sbin",
        "usr",
        "usr/bin",
        "usr/sbin",
        "dev",
        "proc",
        "sys",
        "tmp",
        "root",
        "etc",
        "mnt",
        "lib",
        "lib/modules",
    ] {
        e.push(Entry::Dir { path: d.into() });
    }
    e.push(Entry::CharDev {
        path: "dev/console".into(),
        mode: 0o600,
        major: 5,
        minor: 1,
    });
    e.push(Entry::File {
        path: "init".into(),
        mode: 0o755,
        data: init,
    });
    e.push(Entry::Dir {
        path: "etc/tierkit".into(),
    });
    e.push(Entry::File {
        path: files::BUILD_INFO.trim_start_matches('/').into(),
        mode: 0o644,
        data: format!("{info}\n").into_bytes(),
    });
    e.push(Entry::File {
        path: "bin/busybox".into(),
        mode: 0o755,
        data: busybox,
    });
    for l in links {
        e.push(Entry::Symlink {
            path: l.clone(),
            target: "/bin/busybox".into(),
        });
    }
    e.push(Entry::File {
        path: files::TIERKIT_KO.trim_start_matches('/').into(),
        mode: 0o644,
        data: ko,
    });
    let pre_dir = files::PRE_MODULES.trim_start_matches('/');
    if !pre.is_empty() {
        e.push(Entry::Dir {
            path: pre_dir.into(),
        });
    }
    for (i, (name, data)) in pre.iter().enumerate() {
        e.push(Entry::File {
            // /init loads them in the order of their names.
            path: format!("{pre_dir}/{i:02}-{name}.ko"),
            mode: 0o644,
            data: data.clone(),
        });
    }
    for (name, data) in bins {
        e.push(Entry::File {
            path: format!("bin/{name}"),
            mode: 0o755,
            data: data.clone(),
        });
    }
    e
}

/// `base` with `extra` added: a directory both have is kept once, and a
/// file or link of `extra` replaces one of `base` at the same path (a
/// busybox applet link that a real program takes over).
pub fn merge(base: Vec<Entry>, extra: Vec<Entry>) -> Vec<Entry> {
    let dirs: std::collections::HashSet<String> = base
        .iter()
        .filter(|e| matches!(e, Entry::Dir { .. }))
        .map(|e| e.path().to_string())
        .collect();
    let taken: std::collections::HashSet<String> = extra
        .iter()
        .filter(|e| !matches!(e, Entry::Dir { .. }))
        .map(|e| e.path().to_string())
        .collect();
    let mut out: Vec<Entry> = base
        .into_iter()
        .filter(|e| !taken.contains(e.path()))
        .collect();
    out.extend(
        extra
            .into_iter()
            .filter(|e| !(matches!(e, Entry::Dir { .. }) && dirs.contains(e.path()))),
    );
    out
}

/// Serializes entries as a newc archive.
pub fn write_cpio<W: Write>(entries: &[Entry], mut w: W) -> Result<W> {
    let mut seen = std::collections::HashSet::new();
    for (i, en) in entries.iter().enumerate() {
        if !seen.insert(en.path().to_string()) {
            bail!("initramfs: duplicate entry {}", en.path());
        }
        let b = Builder::new(en.path())
            .ino(i as u32 + 1)
            .uid(0)
            .gid(0)
            .mtime(0);
        let (b, data): (Builder, &[u8]) = match en {
            Entry::Dir { .. } => (
                b.mode(0o755)
                    .set_mode_file_type(ModeFileType::Directory)
                    .nlink(2),
                &[],
            ),
            Entry::File { mode, data, .. } => (
                b.mode(*mode).set_mode_file_type(ModeFileType::Regular),
                data,
            ),
            Entry::Symlink { target, .. } => (
                b.mode(0o777).set_mode_file_type(ModeFileType::Symlink),
                target.as_bytes(),
            ),
            Entry::CharDev {
                mode, major, minor, ..
            } => (
                b.mode(*mode)
                    .set_mode_file_type(ModeFileType::Char)
                    .rdev_major(*major)
                    .rdev_minor(*minor),
                &[],
            ),
        };
        let size = u32::try_from(data.len()).context("initramfs entry larger than 4 GiB")?;
        let mut writer = b.write(w, size);
        writer.write_all(data)?;
        w = writer.finish()?;
    }
    Ok(cpio::newc::trailer(w)?)
}

/// Writes `dir/initramfs.cpio`; `extra` (guest tools, the command of
/// `run -- CMD`) is added with [`merge`].
pub fn build(
    dir: &Path,
    info: &str,
    module: &ModuleBuild,
    bins: &[GuestBinary],
    pre: &[(String, Vec<u8>)],
    extra: Vec<Entry>,
) -> Result<Initramfs> {
    let busybox = std::fs::read(BUSYBOX)
        .with_context(|| format!("reading {BUSYBOX} (apt-get install busybox-static)"))?;
    let ko =
        std::fs::read(&module.ko).with_context(|| format!("reading {}", module.ko.display()))?;
    let mut progs = Vec::new();
    let mut init = None;
    for b in bins {
        let data =
            std::fs::read(&b.path).with_context(|| format!("reading {}", b.path.display()))?;
        if b.name == INIT_BINARY {
            init = Some(data);
        } else {
            progs.push((b.name.clone(), data));
        }
    }
    let Some(init) = init else {
        bail!("no {INIT_BINARY} among the guest binaries: it is the guest's /init");
    };
    let links = busybox_links()?;
    let all = merge(entries(init, info, busybox, &links, ko, &progs, pre), extra);
    let buf = write_cpio(&all, Vec::new())?;
    let path = dir.join("initramfs.cpio");
    util::write_atomic(&path, &buf)?;
    Ok(Initramfs {
        path,
        size: buf.len() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn archive_round_trips() {
        let all = entries(
            b"\x7fELF init".to_vec(),
            "built by test",
            b"BB".to_vec(),
            &["bin/sh".to_string(), "sbin/insmod".to_string()],
            b"KO".to_vec(),
            &[("tk-test-a".to_string(), b"ELF".to_vec())],
            &[
                ("cxl_core".to_string(), b"K1".to_vec()),
                ("cxl_acpi".to_string(), b"K2".to_vec()),
            ],
        );
        let buf = write_cpio(&all, Vec::new()).unwrap();
        let mut cur = Cursor::new(buf);
        let mut names = Vec::new();
        loop {
            let r = cpio::newc::Reader::new(cur).unwrap();
            if r.entry().is_trailer() {
                break;
            }
            let e = r.entry();
            names.push((e.name().to_string(), e.mode(), e.file_size()));
            cur = r.finish().unwrap();
        }
        let get = |n: &str| names.iter().find(|x| x.0 == n).cloned().unwrap();
        assert_eq!(get("init").1, 0o100755);
        assert_eq!(get("init").2, 9);
        assert_eq!(
            get("etc/tierkit/build-info").2,
            "built by test\n".len() as u32
        );
        assert_eq!(get("bin/sh").1, 0o120777);
        assert_eq!(get("bin/sh").2, "/bin/busybox".len() as u32);
        assert_eq!(get("dev/console").1, 0o020600);
        assert_eq!(get("lib/modules/tierkit.ko").2, 2);
        assert_eq!(get("bin/tk-test-a").1, 0o100755);
        assert_eq!(get("bin").1, 0o040755);
        // Modules loaded before tierkit keep their order in their names.
        assert_eq!(get("lib/modules/pre/00-cxl_core.ko").2, 2);
        assert_eq!(get("lib/modules/pre/01-cxl_acpi.ko").1, 0o100644);
    }

    #[test]
    fn merged_entries_replace_links_and_share_dirs() {
        let base = vec![
            Entry::Dir { path: "usr".into() },
            Entry::Symlink {
                path: "usr/bin/x".into(),
                target: "/bin/busybox".into(),
            },
        ];
        let extra = vec![
            Entry::Dir { path: "usr".into() },
            Entry::Dir {
                path: "usr/lib".into(),
            },
            Entry::File {
                path: "usr/bin/x".into(),
                mode: 0o755,
                data: b"ELF".to_vec(),
            },
        ];
        let m = merge(base, extra);
        assert_eq!(m.len(), 3);
        assert!(write_cpio(&m, Vec::new()).is_ok());
        assert!(matches!(&m[2], Entry::File { path, .. } if path == "usr/bin/x"));
    }

    #[test]
    fn duplicates_are_refused() {
        let e = vec![
            Entry::Dir { path: "bin".into() },
            Entry::Dir { path: "bin".into() },
        ];
        assert!(write_cpio(&e, Vec::new()).is_err());
    }
}
