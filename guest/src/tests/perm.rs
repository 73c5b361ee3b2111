//! The logic of `tk-test-perm`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-perm.rs` (its `--help`).

use crate::abi::tk::{self, Tierkit, TK_MODE_WEIGHTED_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::vma::{self, Exit};
use crate::{linux::errno::errno_name, linux::errno::expect_errno};
use std::fs;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tierkit_core::uapi::{TkGigantic, TK_GIGANTIC_F_QUERY, TK_PLACE_LOCAL};

const BIN: &str = "tk-test-perm";
const NOBODY: u32 = 65534;
const DEBUGFS: &str = "/sys/kernel/debug";
const TK_DEBUGFS: &str = "/sys/kernel/debug/tierkit";

/// Sets a path's mode for as long as it lives, then puts the old one back.
struct ModeGuard {
    path: PathBuf,
    old: u32,
}

impl ModeGuard {
    fn set(path: &Path, mode: u32) -> std::io::Result<ModeGuard> {
        let old = fs::metadata(path)?.permissions().mode() & 0o7777;
        fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
        Ok(ModeGuard {
            path: path.into(),
            old,
        })
    }
}

impl Drop for ModeGuard {
    fn drop(&mut self) {
        if let Err(e) = fs::set_permissions(&self.path, fs::Permissions::from_mode(self.old)) {
            println!(
                "# could not restore mode {:o} of {}: {e}",
                self.old,
                self.path.display()
            );
        }
    }
}

/// Every regular file under `dir`.
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        match fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => files_under(&p, out),
            Ok(m) if m.is_file() => out.push(p),
            _ => {}
        }
    }
}

/// Runs `f` as nobody in a child; `f` returns `(name, Ok(note)|Err(why))`
/// checks, which the parent records in `r`.
fn as_nobody(
    r: &mut Report,
    what: &str,
    f: impl FnOnce() -> Vec<(String, Result<String, String>)>,
) {
    let mut p = match vma::Pipe::new() {
        Ok(p) => p,
        Err(e) => {
            r.fail(what, format!("pipe: {e}"));
            return;
        }
    };
    let wr = p.wr;
    let exit = vma::fork_run(|| {
        if let Err(e) = vma::become_user(NOBODY, NOBODY) {
            let l = format!("become nobody\tFAIL\t{e}\n");
            // SAFETY: a local string.
            let _ = unsafe { vma::write_all_fd(wr, l.as_ptr(), l.len()) };
            return 2;
        }
        let mut out = String::new();
        for (name, res) in f() {
            let (st, d) = match res {
                Ok(n) => ("OK", n),
                Err(e) => ("FAIL", e),
            };
            out += &format!("{name}\t{st}\t{}\n", d.replace(['\n', '\t'], " "));
        }
        // SAFETY: a local string.
        let _ = unsafe { vma::write_all_fd(wr, out.as_ptr(), out.len()) };
        0
    });
    p.close_wr();
    let mut text = String::new();
    // SAFETY: `p.rd` is our open read end; the File takes it over.
    let mut f = unsafe { <fs::File as std::os::fd::FromRawFd>::from_raw_fd(p.rd) };
    p.rd = -1;
    let _ = f.read_to_string(&mut text);
    match exit {
        Ok(Exit::Code(0)) | Ok(Exit::Code(2)) => {}
        other => {
            r.fail(what, format!("the child as nobody: {other:?}"));
        }
    }
    for l in text.lines() {
        let v: Vec<&str> = l.splitn(3, '\t').collect();
        if v.len() != 3 {
            continue;
        }
        if v[1] == "OK" {
            r.ok_note(v[0], v[2]);
        } else {
            r.fail(v[0], v[2]);
        }
    }
}

fn open_errno(path: &Path, write: bool) -> Result<String, String> {
    let r = fs::OpenOptions::new()
        .read(!write)
        .write(write)
        .custom_flags(libc::O_NONBLOCK)
        .open(path);
    expect_errno(r, libc::EACCES).map(|_| String::new())
}

pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let Some(topo) = crate::abi::ready::tierkit_ready(&mut r) else {
        return r.finish();
    };
    // SAFETY: getuid has no memory effects.
    if unsafe { libc::getuid() } != 0 {
        r.skip("perm", "not root: cannot set up the non-root user");
        return r.finish();
    }

    let dev = Path::new(tk::DEV_PATH);
    let files = root_only(&mut r, dev);
    nobody_refused(&mut r, &files);

    // The device opened to everyone by the administrator.
    let guard = match ModeGuard::set(dev, 0o666) {
        Ok(g) => g,
        Err(e) => {
            r.fail("perm: chmod 0666 /dev/tierkit", e.to_string());
            return r.finish();
        }
    };
    let mask = topo.memory_mask();
    let dram = topo.dram_node().unwrap_or(0);
    as_nobody(&mut r, "perm: nobody with /dev/tierkit 0666", || {
        open_to_everyone(mask, dram)
    });
    drop(guard);
    r.check(
        "perm: /dev/tierkit back to 0600",
        match fs::metadata(dev) {
            Ok(m) if m.mode() & 0o777 == 0o600 => Ok(()),
            Ok(m) => Err(format!("mode {:o}", m.mode() & 0o777)),
            Err(e) => Err(e.to_string()),
        },
    );
    r.finish()
}

/// `/dev/tierkit` and every tierkit debugfs file are root-only; gives the
/// debugfs files.
fn root_only(r: &mut Report, dev: &Path) -> Vec<PathBuf> {
    r.check_note(
        "perm: /dev/tierkit is root-only (0600, owner root)",
        match fs::metadata(dev) {
            Ok(m) if m.mode() & 0o777 == 0o600 && m.uid() == 0 => {
                Ok(format!("{:o}", m.mode() & 0o777))
            }
            Ok(m) => Err(format!("mode {:o} uid {}", m.mode() & 0o777, m.uid())),
            Err(e) => Err(e.to_string()),
        },
    );
    let mut files = Vec::new();
    files_under(Path::new(TK_DEBUGFS), &mut files);
    files.sort();
    let loose: Vec<String> = files
        .iter()
        .filter_map(|p| {
            let m = fs::metadata(p).ok()?;
            (m.mode() & 0o077 != 0 || m.uid() != 0)
                .then(|| format!("{} {:o} uid {}", p.display(), m.mode() & 0o777, m.uid()))
        })
        .collect();
    r.check_note(
        "perm: every tierkit debugfs file is root-only (no group/other bits)",
        if files.is_empty() {
            Err(format!("no files under {TK_DEBUGFS}"))
        } else if loose.is_empty() {
            Ok(format!("{} files", files.len()))
        } else {
            Err(loose.join(", "))
        },
    );
    files
}

/// As nobody, opening `/dev/tierkit` or any of the debugfs `files` is
/// EACCES.
fn nobody_refused(r: &mut Report, files: &[PathBuf]) {
    // Make the debugfs root traversable, so that the files' own modes
    // decide (restored when `_dbg` drops).
    let root_mode = fs::metadata(DEBUGFS).map(|m| m.mode() & 0o777).unwrap_or(0);
    let _dbg = if root_mode & 0o005 != 0o005 {
        match ModeGuard::set(Path::new(DEBUGFS), root_mode | 0o055) {
            Ok(g) => Some(g),
            Err(e) => {
                r.note(format!(
                    "could not chmod {DEBUGFS}: {e}; its own mode refuses nobody"
                ));
                None
            }
        }
    } else {
        None
    };
    let wfiles: Vec<(PathBuf, bool, bool)> = files
        .iter()
        .map(|p| {
            let m = fs::metadata(p).map(|m| m.mode()).unwrap_or(0);
            (p.clone(), m & 0o400 != 0, m & 0o200 != 0)
        })
        .collect();
    as_nobody(r, "perm: nobody", || {
        let mut v = vec![(
            "perm: nobody: open /dev/tierkit is EACCES".to_string(),
            fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(tk::DEV_PATH)
                .map(|_| String::new())
                .map_or_else(
                    |e| expect_errno::<()>(Err(e), libc::EACCES).map(|_| String::new()),
                    |_| Err("opened".to_string()),
                ),
        )];
        let mut bad = Vec::new();
        let mut n = 0;
        for (p, rd, wr) in &wfiles {
            for write in [false, true] {
                if (write && !wr) || (!write && !rd) {
                    continue;
                }
                n += 1;
                if let Err(e) = open_errno(p, write) {
                    bad.push(format!(
                        "{} for {}: {e}",
                        p.display(),
                        if write { "writing" } else { "reading" }
                    ));
                }
            }
        }
        v.push((
            "perm: nobody: open of every tierkit debugfs file is EACCES".to_string(),
            if bad.is_empty() {
                Ok(format!("{n} opens"))
            } else {
                Err(bad.join("; "))
            },
        ));
        v
    });
    drop(_dbg);
}

/// The checks run as nobody with `/dev/tierkit` 0666: the calls that need
/// CAP_SYS_ADMIN are EPERM, the others work.
fn open_to_everyone(mask: u64, dram: u32) -> Vec<(String, Result<String, String>)> {
    let mut v = Vec::new();
    let pre = "perm: nobody with /dev/tierkit 0666";
    let tk = match Tierkit::open() {
        Ok(t) => {
            v.push((format!("{pre}: open"), Ok(String::new())));
            t
        }
        Err(e) => {
            v.push((format!("{pre}: open"), Err(errno_name(&e))));
            return v;
        }
    };
    // Gigantic mode and the bench on a file of their own, so that an
    // accepted SET_GIGANTIC does not change the 4 KiB file.
    let gtk = match Tierkit::open() {
        Ok(t) => t,
        Err(e) => {
            v.push((format!("{pre}: open a second file"), Err(errno_name(&e))));
            return v;
        }
    };
    v.push((
        format!("{pre}: TK_IOC_SET_GIGANTIC entering gigantic mode is EPERM"),
        expect_errno(
            gtk.set_gigantic(TkGigantic {
                threads: 1,
                placement: TK_PLACE_LOCAL,
                ..Default::default()
            }),
            libc::EPERM,
        )
        .map(|_| String::new()),
    ));
    v.push((
        format!("{pre}: TK_IOC_SET_GIGANTIC with TK_GIGANTIC_F_QUERY works"),
        gtk.set_gigantic(TkGigantic {
            flags: TK_GIGANTIC_F_QUERY,
            ..Default::default()
        })
        .map(|_| String::new())
        .map_err(|e| errno_name(&e)),
    ));
    v.push((
        format!("{pre}: TK_IOC_CLEAR_BENCH is EPERM"),
        expect_errno(
            gtk.clear_bench(tk::clear_bench_arg(dram as i32, 1, TK_PLACE_LOCAL, 1)),
            libc::EPERM,
        )
        .map(|_| String::new()),
    ));
    v.push((
        format!("{pre}: TK_IOC_SET_POLICY"),
        tk.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, mask)
            .map(|_| String::new())
            .map_err(|e| errno_name(&e)),
    ));
    v.push((
        format!("{pre}: TK_IOC_BULK"),
        tk.bulk(64)
            .map(|b| format!("{} pages", b.per_node.iter().sum::<u64>()))
            .map_err(|e| errno_name(&e)),
    ));
    v.push((
        format!("{pre}: TK_IOC_TASK_NEXT"),
        tk.task_next(8)
            .map(|n| format!("{n:?}"))
            .map_err(|e| errno_name(&e)),
    ));
    v.push((
        format!("{pre}: mmap in 4 KiB mode"),
        tk.map(16, 0).map_err(|e| errno_name(&e)).and_then(|m| {
            m.touch_pages();
            if m.first_nonzero() == Some(0) {
                Ok("16 pages written".to_string())
            } else {
                Err("write not seen".to_string())
            }
        }),
    ));
    v
}
