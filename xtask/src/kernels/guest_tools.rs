//! Dynamically linked programs in the guest: Debian's own binaries (trixie's
//! `numactl`, `numastat`, `cxl`, `daxctl`, `ndctl`) with exactly the shared
//! libraries they need, put into the initramfs.
//!
//! - [`ensure_root`]: a private trixie root holding some packages and their
//!   dependencies, made once with `mmdebstrap --variant=extract` (the
//!   packages are downloaded and unpacked, nothing is installed or run, so
//!   it needs no chroot) into `~/.cache/tierkit/guest-root/<hash>/`; the
//!   host's apt sources are never used. Cold: about 13 s and 26 MiB for
//!   [`TOOL_PACKAGES`].
//! - [`GuestFiles::add_elf`]: one ELF file of such a root, its `PT_INTERP`
//!   (the dynamic loader) and the closure of its `DT_NEEDED` libraries,
//!   resolved as the loader would (`DT_RPATH`/`DT_RUNPATH` with `$ORIGIN`,
//!   then the multiarch and default directories), read with `goblin`.
//!   Every file lands at the path the loader looks for it at, as a regular
//!   file (symbolic links in the root are followed inside the root, and
//!   merged-/usr paths such as `/lib64/ld-linux-x86-64.so.2` fall back to
//!   `/usr/lib64/...`).
//! - [`GuestFiles::entries`]: the initramfs entries, parent directories
//!   first ([`crate::kernels::initramfs::merge`] adds them to the archive).
//!
//! Libraries a program opens with `dlopen` (NSS modules, gconv, plug-ins)
//! are not `DT_NEEDED` and are not added: add them with [`GuestFiles::add_elf`]
//! by path if a program needs them.

use crate::kernels::initramfs::Entry;
use crate::say;
use crate::util;
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

/// The Debian suite of the guest tools (the kernel's, 7.3.4+deb13).
pub const SUITE: &str = "trixie";
const MIRROR: &str = "http://deb.debian.org/debian";
const STAMP: &str = ".tierkit-guest-root";

/// The packages of [`TOOLS`]: `numactl` has `numactl` and `numastat`;
/// ndctl's source builds `ndctl`, `daxctl` and `cxl`, one binary each.
pub const TOOL_PACKAGES: &[&str] = &["numactl", "ndctl", "daxctl", "cxl"];

/// The programs `run -- CMD` and `shell` put on the guest's PATH, as paths
/// in the root of [`TOOL_PACKAGES`].
pub const TOOLS: &[&str] = &[
    "/usr/bin/numactl",
    "/usr/bin/numastat",
    "/usr/bin/cxl",
    "/usr/bin/daxctl",
    "/usr/bin/ndctl",
];

/// Where a glibc loader without `/etc/ld.so.cache` looks for `DT_NEEDED`
/// libraries on Debian x86_64 (its trusted directories), in order.
pub const DEFAULT_LIB_DIRS: &[&str] = &[
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
];

/// A private trixie root with `packages` and their dependencies, made once
/// (cached by the sorted package list) with `mmdebstrap --variant=extract`.
pub fn ensure_root(packages: &[&str]) -> Result<PathBuf> {
    let mut list: Vec<&str> = packages.to_vec();
    list.sort_unstable();
    list.dedup();
    let want = list.join(",");
    let key = &util::sha256_hex(format!("{SUITE} {want}").as_bytes())[..12];
    let base = util::cache_dir()?.join("guest-root");
    let root = base.join(key);
    let stamp_ok = |r: &Path| fs::read_to_string(r.join(STAMP)).is_ok_and(|s| s.trim() == want);
    if stamp_ok(&root) {
        return Ok(root);
    }
    fs::create_dir_all(&base)?;
    let _lock = util::lock(&base.join(format!("{key}.lock")), "the guest tools root")?;
    if stamp_ok(&root) {
        return Ok(root);
    }
    let Some(tool) = util::which("mmdebstrap") else {
        bail!("the guest tools ({want}) come from a private {SUITE} root made with mmdebstrap: apt-get install mmdebstrap (or run `cargo xtask setup`)");
    };
    let t = util::Timer::start();
    let tmp = base.join(format!(".tmp-{key}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    let log = base.join(format!("{key}.log"));
    say!(
        "making a private Debian {SUITE} root with {want} for the guest (once; log: {})",
        log.display()
    );
    let pb = util::spinner(&format!("mmdebstrap {SUITE} {}", root.display()));
    let mut cmd = Command::new(tool);
    // Extracting needs no chroot: root mode when root, else a user namespace.
    let mode = if util::cmd_stdout("id", &["-u"]).is_some_and(|u| u == "0") {
        "--mode=root"
    } else {
        "--mode=unshare"
    };
    cmd.args([mode, "--variant=extract"])
        .arg(format!("--include={want}"))
        .arg(SUITE)
        .arg(&tmp)
        .arg(MIRROR);
    let res = util::run_logged(cmd, &log, |l| pb.set_message(l.to_string()));
    pb.finish_and_clear();
    if let Err(e) = res {
        let _ = fs::remove_dir_all(&tmp);
        return Err(e.context(format!("making the {SUITE} guest tools root failed")));
    }
    fs::write(tmp.join(STAMP), format!("{want}\n"))?;
    let _ = fs::remove_dir_all(&root);
    fs::rename(&tmp, &root)?;
    say!(
        "guest tools root ready in {} ({})",
        root.display(),
        util::fmt_dur(t.elapsed())
    );
    Ok(root)
}

/// `path` (absolute, as the guest sees it) resolved inside `root`: every
/// symbolic link is followed with `root` as `/`, and a missing `/lib`,
/// `/lib64`, `/bin` or `/sbin` path is looked up under `/usr` (a root made
/// by `--variant=extract` has no merged-/usr links). The host path of the
/// file, or `None`.
pub fn resolve_in_root(root: &Path, path: &str) -> Option<PathBuf> {
    resolve_links(root, Path::new(path), 0).or_else(|| {
        let merged = ["/lib/", "/lib64/", "/bin/", "/sbin/"]
            .iter()
            .any(|p| path.starts_with(p));
        merged
            .then(|| resolve_links(root, &Path::new("/usr").join(&path[1..]), 0))
            .flatten()
    })
}

/// Follows `path`'s components inside `root` (at most 40 links, as Linux).
fn resolve_links(root: &Path, path: &Path, depth: u32) -> Option<PathBuf> {
    if depth > 40 {
        return None;
    }
    let mut cur = PathBuf::from("/");
    let mut comps: Vec<Component> = path.components().collect();
    comps.reverse();
    while let Some(c) = comps.pop() {
        match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                cur.pop();
            }
            Component::Normal(n) => {
                let next = cur.join(n);
                let host = root.join(next.strip_prefix("/").ok()?);
                let meta = fs::symlink_metadata(&host).ok()?;
                if meta.file_type().is_symlink() {
                    let target = fs::read_link(&host).ok()?;
                    let rest: PathBuf = comps.iter().rev().collect();
                    let joined = if target.is_absolute() {
                        target.join(rest)
                    } else {
                        cur.join(target).join(rest)
                    };
                    return resolve_links(root, &joined, depth + 1);
                }
                cur = next;
            }
        }
    }
    let host = root.join(cur.strip_prefix("/").ok()?);
    host.exists().then_some(host)
}

/// What an ELF file asks of the loader.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ElfNeeds {
    /// `PT_INTERP`: `/lib64/ld-linux-x86-64.so.2`; `None`: static.
    pub interpreter: Option<String>,
    /// `DT_NEEDED`, in order.
    pub needed: Vec<String>,
    /// `DT_RPATH` then `DT_RUNPATH` directories (`$ORIGIN` unexpanded).
    pub search: Vec<String>,
}

/// Reads [`ElfNeeds`] from an x86_64 ELF file's bytes.
pub fn elf_needs(data: &[u8]) -> Result<ElfNeeds> {
    let elf = goblin::elf::Elf::parse(data).context("not an ELF file")?;
    if elf.header.e_machine != goblin::elf::header::EM_X86_64 || !elf.is_64 {
        bail!(
            "not an x86_64 ELF file (e_machine {})",
            elf.header.e_machine
        );
    }
    let split = |v: &[&str]| -> Vec<String> {
        v.iter()
            .flat_map(|s| s.split(':'))
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let mut search = split(&elf.rpaths);
    search.extend(split(&elf.runpaths));
    Ok(ElfNeeds {
        interpreter: elf.interpreter.map(str::to_string),
        needed: elf.libraries.iter().map(|s| s.to_string()).collect(),
        search,
    })
}

/// Files for the initramfs: absolute guest path -> (mode, contents).
#[derive(Clone, Debug, Default)]
pub struct GuestFiles {
    files: BTreeMap<String, (u32, Vec<u8>)>,
}

impl GuestFiles {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a file at `guest_path` (absolute).
    pub fn add_file(&mut self, guest_path: &str, mode: u32, data: Vec<u8>) {
        self.files.insert(guest_path.to_string(), (mode, data));
    }

    /// Adds the ELF file at `path` in `root` (absolute, as the root sees
    /// it) at `dest` (default: the same path), with its dynamic loader and
    /// every library of its `DT_NEEDED` closure at the paths the loader
    /// finds them at. A library that cannot be found is an error naming the
    /// file that needs it.
    pub fn add_elf(&mut self, root: &Path, path: &str, dest: Option<&str>) -> Result<()> {
        let host = resolve_in_root(root, path)
            .with_context(|| format!("{path} is not in {}", root.display()))?;
        let data = fs::read(&host).with_context(|| format!("reading {}", host.display()))?;
        let needs = elf_needs(&data).with_context(|| format!("{path} ({})", host.display()))?;
        self.add_file(dest.unwrap_or(path), 0o755, data);
        // Breadth first over (guest path of the object, what it needs).
        let mut queue = vec![(path.to_string(), needs)];
        let mut seen: BTreeSet<String> = BTreeSet::new();
        while let Some((obj, needs)) = queue.pop() {
            if let Some(interp) = &needs.interpreter {
                if seen.insert(interp.clone()) {
                    let h = resolve_in_root(root, interp).with_context(|| {
                        format!(
                            "{obj} needs the loader {interp}, which is not in {}",
                            root.display()
                        )
                    })?;
                    self.add_file(interp, 0o755, fs::read(&h)?);
                }
            }
            let origin = Path::new(&obj)
                .parent()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "/".into());
            for lib in &needs.needed {
                let (guest, h) =
                    find_library(root, lib, &needs.search, &origin).with_context(|| {
                        format!(
                            "{obj} needs {lib}, which is in none of {} inside {}",
                            needs
                                .search
                                .iter()
                                .map(String::as_str)
                                .chain(DEFAULT_LIB_DIRS.iter().copied())
                                .collect::<Vec<_>>()
                                .join(":"),
                            root.display()
                        )
                    })?;
                if !seen.insert(guest.clone()) {
                    continue;
                }
                let d = fs::read(&h).with_context(|| format!("reading {}", h.display()))?;
                let n = elf_needs(&d).with_context(|| format!("{guest} ({})", h.display()))?;
                self.add_file(&guest, 0o755, d);
                queue.push((guest, n));
            }
        }
        Ok(())
    }

    /// Guest paths added so far.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    /// Bytes of all files.
    pub fn size(&self) -> u64 {
        self.files.values().map(|(_, d)| d.len() as u64).sum()
    }

    /// The initramfs entries: every parent directory, then the files.
    pub fn entries(&self) -> Vec<Entry> {
        let mut dirs: BTreeSet<String> = BTreeSet::new();
        for p in self.files.keys() {
            let mut a = Path::new(p.trim_start_matches('/'));
            while let Some(parent) = a.parent() {
                if parent.as_os_str().is_empty() {
                    break;
                }
                dirs.insert(parent.display().to_string());
                a = parent;
            }
        }
        // BTreeSet order puts a parent before its children.
        let mut e: Vec<Entry> = dirs.into_iter().map(|path| Entry::Dir { path }).collect();
        for (p, (mode, data)) in &self.files {
            e.push(Entry::File {
                path: p.trim_start_matches('/').to_string(),
                mode: *mode,
                data: data.clone(),
            });
        }
        e
    }
}

/// Where the loader finds `lib` for an object in `origin` with `search`
/// (its RPATH/RUNPATH): the guest path and the host file. A name with a
/// `/` is a path.
fn find_library(
    root: &Path,
    lib: &str,
    search: &[String],
    origin: &str,
) -> Option<(String, PathBuf)> {
    if lib.contains('/') {
        return resolve_in_root(root, lib).map(|h| (lib.to_string(), h));
    }
    let dirs = search
        .iter()
        .map(|d| d.replace("$ORIGIN", origin).replace("${ORIGIN}", origin))
        .chain(DEFAULT_LIB_DIRS.iter().map(|d| d.to_string()));
    for d in dirs {
        let guest = format!("{}/{lib}", d.trim_end_matches('/'));
        if let Some(h) = resolve_in_root(root, &guest) {
            // A library of another architecture is skipped, as ld.so does.
            let ok = fs::read(&h).ok().is_some_and(|b| elf_needs(&b).is_ok());
            if ok {
                return Some((guest, h));
            }
        }
    }
    None
}

/// The guest tools of `run -- CMD` and `shell` ([`TOOLS`] from a root of
/// [`TOOL_PACKAGES`]) and what they need.
pub fn tools() -> Result<GuestFiles> {
    let root = ensure_root(TOOL_PACKAGES)?;
    let mut f = GuestFiles::new();
    for t in TOOLS {
        f.add_elf(&root, t, None)?;
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tk-gt-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn links_resolve_inside_the_root() {
        let r = tmp("links");
        fs::create_dir_all(r.join("usr/lib/x86_64-linux-gnu")).unwrap();
        fs::create_dir_all(r.join("usr/lib64")).unwrap();
        fs::write(r.join("usr/lib/x86_64-linux-gnu/libfoo.so.1.2"), b"x").unwrap();
        std::os::unix::fs::symlink(
            "libfoo.so.1.2",
            r.join("usr/lib/x86_64-linux-gnu/libfoo.so.1"),
        )
        .unwrap();
        // An absolute link means the root's path, not the host's.
        std::os::unix::fs::symlink(
            "/usr/lib/x86_64-linux-gnu/libfoo.so.1.2",
            r.join("usr/lib64/ld.so"),
        )
        .unwrap();
        let want = r.join("usr/lib/x86_64-linux-gnu/libfoo.so.1.2");
        assert_eq!(
            resolve_in_root(&r, "/usr/lib/x86_64-linux-gnu/libfoo.so.1"),
            Some(want.clone())
        );
        // Merged /usr: /lib64 is /usr/lib64.
        assert_eq!(resolve_in_root(&r, "/lib64/ld.so"), Some(want));
        assert_eq!(resolve_in_root(&r, "/lib64/nope"), None);
        let _ = fs::remove_dir_all(&r);
    }

    /// A host program (dynamically linked on Debian) and its closure from
    /// the host's own root `/`.
    #[test]
    fn host_closure() {
        let Ok(data) = fs::read("/bin/sh") else {
            return;
        };
        let Ok(n) = elf_needs(&data) else { return };
        let Some(interp) = n.interpreter.clone() else {
            return;
        };
        let mut f = GuestFiles::new();
        f.add_elf(Path::new("/"), "/bin/sh", Some("/usr/bin/xsh"))
            .unwrap();
        let paths: Vec<&str> = f.paths().collect();
        assert!(paths.contains(&"/usr/bin/xsh"), "{paths:?}");
        assert!(paths.contains(&interp.as_str()), "{paths:?}");
        assert!(paths.iter().any(|p| p.ends_with("/libc.so.6")), "{paths:?}");
        let e = f.entries();
        let pos = |p: &str| {
            e.iter()
                .position(|x| matches!(x, Entry::Dir { path } if path == p))
        };
        assert!(pos("usr").unwrap() < pos("usr/bin").unwrap());
        assert!(!e
            .iter()
            .any(|x| matches!(x, Entry::Dir { path } if path.starts_with('/'))));
    }

    #[test]
    fn not_elf_is_refused() {
        assert!(elf_needs(b"#!/bin/sh\n").is_err());
    }
}

/// `TIERKIT_GUEST_ROOT=<a root of TOOL_PACKAGES> cargo test -p xtask --lib
/// tools_closure -- --nocapture`: the closure of [`TOOLS`], printed.
#[cfg(test)]
#[test]
fn tools_closure() {
    let Some(root) = std::env::var_os("TIERKIT_GUEST_ROOT") else {
        return;
    };
    let mut f = GuestFiles::new();
    for t in TOOLS {
        f.add_elf(Path::new(&root), t, None).unwrap();
    }
    for p in f.paths() {
        println!("{p}");
    }
    println!("{} bytes", f.size());
}
