//! Rebalancing another process's `/dev/tierkit` mappings
//! (`tk-calibrate --apply PID`): its tierkit files are found in
//! `/proc/PID/fd`, taken over with `pidfd_getfd(2)` (the same open file,
//! so the same policy and mappings; opening `/proc/PID/fd/N` would open the
//! device anew), and given `TK_IOC_REBALANCE`. Placement before and after
//! is read from `/proc/PID/numa_maps`.

use crate::tk::Tierkit;
use std::collections::BTreeMap;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use tierkit_core::uapi::TkRebalance;

/// The fd numbers of `pid` that are open on `/dev/tierkit`.
pub fn tierkit_fds(pid: i32) -> io::Result<Vec<i32>> {
    let mut fds = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        let e = e?;
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        if target.as_os_str() == crate::tk::DEV_PATH {
            if let Some(n) = e.file_name().to_str().and_then(|s| s.parse().ok()) {
                fds.push(n);
            }
        }
    }
    fds.sort_unstable();
    Ok(fds)
}

/// `pidfd_getfd(pidfd_open(pid), fd)`: the same open file as `pid`'s `fd`.
/// Needs ptrace access to `pid` (root has it).
pub fn grab(pid: i32, fd: i32) -> io::Result<Tierkit> {
    // SAFETY: plain syscalls with integer arguments.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd we own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
    use std::os::fd::AsRawFd;
    // SAFETY: as above.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd we own.
    Ok(Tierkit::from_fd(unsafe {
        OwnedFd::from_raw_fd(got as i32)
    }))
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

/// One file's rebalance: its fd in the target and what the call did.
#[derive(Clone, Copy, Debug)]
pub struct Applied {
    pub fd: i32,
    pub result: TkRebalance,
}

/// Rebalances every `/dev/tierkit` file of `pid` with `arg`.
pub fn apply(pid: i32, arg: TkRebalance) -> io::Result<Vec<Applied>> {
    let mut out = Vec::new();
    for fd in tierkit_fds(pid)? {
        let t = grab(pid, fd)?;
        let result = match t.rebalance(arg) {
            // A file without a policy has nothing placed: nothing to do.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && arg.flags == 0 => continue,
            // Gigantic mode: its GiBs stay where mmap put them.
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => continue,
            r => r?,
        };
        out.push(Applied { fd, result });
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
}
