//! Rebalancing another process's tierkit memory (`tk-calibrate --apply
//! PID`): its `/dev/tierkit` mappings are read from `/proc/PID/maps`, the
//! open file of each is taken with `TK_IOC_MAPPED_FILE` (the same open
//! file as the mapping's, whether or not the process still holds a
//! descriptor of it: tk-run's library closes each once mapped), once per
//! file (by the id the call returns: every tierkit file shares the device
//! inode, so the inode cannot tell), and each is given `TK_IOC_REBALANCE`
//! with the new weights, one descriptor open at a time. Placement before
//! and after is read from `/proc/PID/numa_maps`.

use crate::abi::tk::{self, Tierkit};
use std::collections::BTreeMap;
use std::io;
use tierkit_core::uapi::{TkRebalance, TK_REBALANCE_F_WEIGHTS};

/// `(start, end)` of the `/dev/tierkit` lines of a `/proc/PID/maps` text.
pub fn parse_maps(text: &str) -> Vec<(u64, u64)> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let range = f.next()?;
            if f.nth(4)? != tk::DEV_PATH {
                return None;
            }
            let (s, e) = range.split_once('-')?;
            Some((
                u64::from_str_radix(s, 16).ok()?,
                u64::from_str_radix(e, 16).ok()?,
            ))
        })
        .collect()
}

/// Pages per node of the `/dev/tierkit` mappings in a `numa_maps` text
/// (the `N<node>=<pages>` fields of their lines).
pub fn parse_numa_maps(text: &str) -> BTreeMap<u32, u64> {
    let mut out = BTreeMap::new();
    for l in text.lines().filter(|l| l.contains("file=/dev/tierkit")) {
        for f in l.split_whitespace() {
            let Some(rest) = f.strip_prefix('N') else {
                continue;
            };
            if let Some((n, c)) = rest.split_once('=') {
                if let (Ok(n), Ok(c)) = (n.parse::<u32>(), c.parse::<u64>()) {
                    *out.entry(n).or_default() += c;
                }
            }
        }
    }
    out
}

/// [`parse_numa_maps`] of `/proc/PID/numa_maps`.
pub fn placement(pid: i32) -> io::Result<BTreeMap<u32, u64>> {
    Ok(parse_numa_maps(&std::fs::read_to_string(format!(
        "/proc/{pid}/numa_maps"
    ))?))
}

/// `node:pages` pairs, for messages.
pub fn fmt_placement(p: &BTreeMap<u32, u64>) -> String {
    if p.is_empty() {
        return "-".into();
    }
    p.iter()
        .map(|(n, c)| format!("{n}:{c}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A [`TkRebalance`] that makes a file's policy weighted interleave over
/// the nodes of `weights` with these weights (its own table, as
/// `TK_POLICY_F_WEIGHTS` sets it), whatever it had.
pub fn to_weights(weights: &[(u32, u8)]) -> TkRebalance {
    let mut a = TkRebalance {
        flags: TK_REBALANCE_F_WEIGHTS,
        ..Default::default()
    };
    for &(n, w) in weights {
        a.nodemask |= 1 << n;
        a.weights[n as usize] = w;
    }
    a
}

/// What happened to one open tierkit file of the process.
#[derive(Clone, Copy, Debug)]
pub enum Outcome {
    /// `TK_IOC_REBALANCE`'s counters.
    Rebalanced(TkRebalance),
    /// A file in gigantic mode: its GiBs stay on the nodes chosen at mmap
    /// (`EOPNOTSUPP`).
    Gigantic,
}

/// One open file: its id, its mappings in the process and the outcome.
#[derive(Clone, Copy, Debug)]
pub struct Applied {
    pub id: u64,
    /// Its mappings in the process, and their bytes.
    pub mappings: usize,
    pub bytes: u64,
    pub outcome: Outcome,
}

/// Why nothing (or not all) could be done.
#[derive(Debug)]
pub enum ApplyError {
    /// No such process, or it exited before or while its files were taken.
    Gone(String),
    /// The caller lacks `CAP_SYS_ADMIN`.
    NotPermitted,
    /// Anything else, with what was being done.
    Other(String),
}

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApplyError::Gone(s) | ApplyError::Other(s) => f.write_str(s),
            ApplyError::NotPermitted => f.write_str(
                "taking another process's tierkit files needs CAP_SYS_ADMIN (run as root)",
            ),
        }
    }
}

/// What [`apply`] did: the files, and the mappings that went away between
/// reading `/proc/PID/maps` and taking their file (unmapped meanwhile).
#[derive(Debug, Default)]
pub struct Report {
    pub files: Vec<Applied>,
    pub gone_mappings: usize,
}

impl Report {
    /// The sum of the counters of the rebalanced files.
    pub fn total(&self) -> TkRebalance {
        let mut t = TkRebalance::default();
        for a in &self.files {
            if let Outcome::Rebalanced(r) = a.outcome {
                t.looked += r.looked;
                t.misplaced += r.misplaced;
                t.moved += r.moved;
                t.no_memory += r.no_memory;
                t.busy += r.busy;
                t.elapsed_ns += r.elapsed_ns;
            }
        }
        t
    }

    /// Files in gigantic mode and their bytes.
    pub fn gigantic(&self) -> (usize, u64) {
        self.files
            .iter()
            .filter(|a| matches!(a.outcome, Outcome::Gigantic))
            .fold((0, 0), |(n, b), a| (n + 1, b + a.bytes))
    }
}

/// Rebalances every tierkit file `pid` maps with `arg` (see the module's
/// doc). An error before any file was rebalanced leaves everything as it
/// was; one after leaves the files done so far rebalanced.
pub fn apply(pid: i32, arg: TkRebalance) -> Result<Report, ApplyError> {
    let gone = |what: &str| ApplyError::Gone(format!("process {pid} {what}"));
    let maps = match std::fs::read_to_string(format!("/proc/{pid}/maps")) {
        Ok(t) => t,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH)) => {
            return Err(gone("does not exist"))
        }
        Err(e) => return Err(ApplyError::Other(format!("/proc/{pid}/maps: {e}"))),
    };
    let ranges = parse_maps(&maps);
    let mut out = Report::default();
    if ranges.is_empty() {
        return Ok(out);
    }
    let ctl = Tierkit::open().map_err(|e| ApplyError::Other(format!("{}: {e}", tk::DEV_PATH)))?;
    let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
    for (i, &(start, _)) in ranges.iter().enumerate() {
        let (file, m) = match ctl.mapped_file(pid, start) {
            Ok(x) => x,
            Err(e) => match e.raw_os_error() {
                Some(libc::ESRCH) => {
                    return Err(gone(&format!(
                        "exited while its tierkit files were being taken ({i} of {} \
                         mappings done, {} file(s) rebalanced)",
                        ranges.len(),
                        out.files.len()
                    )))
                }
                Some(libc::EPERM) => return Err(ApplyError::NotPermitted),
                // Unmapped (or replaced) since maps was read.
                Some(libc::ENOENT | libc::ENODEV) => {
                    out.gone_mappings += 1;
                    continue;
                }
                _ => {
                    return Err(ApplyError::Other(format!(
                        "TK_IOC_MAPPED_FILE at {start:#x}: {}",
                        crate::linux::errno::errno_name(&e)
                    )))
                }
            },
        };
        let bytes = m.end - m.start;
        if let Some(&k) = seen.get(&m.id) {
            out.files[k].mappings += 1;
            out.files[k].bytes += bytes;
            continue;
        }
        let outcome = match file.rebalance(arg) {
            Ok(r) => Outcome::Rebalanced(r),
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Outcome::Gigantic,
            Err(e) => {
                return Err(ApplyError::Other(format!(
                "TK_IOC_REBALANCE of the file mapped at {:#x}: {} ({} file(s) rebalanced before)",
                m.start,
                crate::linux::errno::errno_name(&e),
                seen.len()
            )))
            }
        };
        seen.insert(m.id, out.files.len());
        out.files.push(Applied {
            id: m.id,
            mappings: 1,
            bytes,
            outcome,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numa_maps_counts_only_tierkit_lines() {
        let text = "\
7f0000000000 default file=/dev/tierkit mapped=2048 mapmax=2 N0=1536 N1=512 kernelpagesize_kB=4
7f1000000000 default anon=10 dirty=10 N0=10 kernelpagesize_kB=4
7f2000000000 default file=/dev/tierkit mapped=4 N2=4 kernelpagesize_kB=4
";
        let p = parse_numa_maps(text);
        assert_eq!(p.get(&0), Some(&1536));
        assert_eq!(p.get(&1), Some(&512));
        assert_eq!(p.get(&2), Some(&4));
        assert_eq!(fmt_placement(&p), "0:1536 1:512 2:4");
    }

    #[test]
    fn maps_lines_of_tierkit_only() {
        let text = "\
55d0c0000000-55d0c0021000 rw-p 00000000 00:00 0                          [heap]
7f0000000000-7f0000801000 rw-s 7f0000000000 00:05 17                     /dev/tierkit
7f1000000000-7f1000001000 ---s 7f1000000000 00:05 17                     /dev/tierkit
7f2000000000-7f2040000000 rw-s 7f2000000000 00:05 17                     /dev/tierkit (deleted)
7f3000000000-7f3000001000 r--p 00000000 08:01 99                         /usr/lib/dev/tierkit
7fff00000000-7fff00021000 rw-p 00000000 00:00 0                          [stack]
";
        assert_eq!(
            parse_maps(text),
            [
                (0x7f00_0000_0000, 0x7f00_0080_1000),
                (0x7f10_0000_0000, 0x7f10_0000_1000),
                (0x7f20_0000_0000, 0x7f20_4000_0000),
            ]
        );
    }

    #[test]
    fn weights_set_mask_and_table() {
        let a = to_weights(&[(0, 1), (2, 3)]);
        assert_eq!(a.flags, TK_REBALANCE_F_WEIGHTS);
        assert_eq!(a.nodemask, 0b101);
        assert_eq!((a.weights[0], a.weights[1], a.weights[2]), (1, 0, 3));
    }
}
