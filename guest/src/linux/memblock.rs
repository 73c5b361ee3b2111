//! Memory hotplug from userspace: memory blocks
//! (`/sys/devices/system/memory/memoryN`, Documentation/admin-guide/mm/
//! memory-hotplug.rst), which block holds a page (`/proc/self/pagemap`),
//! the zones of a node (`/proc/zoneinfo`), the kernel log (`/dev/kmsg`),
//! and onlining/offlining a block with a time limit, in a child process
//! that is killed when the limit passes (an offline that never finishes
//! must not take the test with it).

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::linux::kernel::NODE_SYSFS;
use crate::linux::sys::PAGE_SIZE;

/// Where the kernel lists memory blocks (drivers/base/memory.c).
pub const MEMORY_SYSFS: &str = "/sys/devices/system/memory";

/// Parses `block_size_bytes`: hex without `0x` (`8000000`).
pub fn parse_block_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let s = s.strip_prefix("0x").unwrap_or(s);
    u64::from_str_radix(s, 16).ok().filter(|&b| b > 0)
}

/// The memory block size in bytes.
pub fn block_size() -> io::Result<u64> {
    let p = Path::new(MEMORY_SYSFS).join("block_size_bytes");
    parse_block_size(&fs::read_to_string(&p)?)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("bad {}", p.display())))
}

/// The block (`memoryN`) holding page frame `pfn`.
pub fn block_of_pfn(pfn: u64, block_bytes: u64) -> u64 {
    pfn * PAGE_SIZE as u64 / block_bytes
}

/// The first pfn of block `block`, and how many pages it has.
pub fn block_pfns(block: u64, block_bytes: u64) -> (u64, u64) {
    let per = block_bytes / PAGE_SIZE as u64;
    (block * per, per)
}

/// The distinct blocks holding `pfns`, ascending, with how many of the
/// pfns each holds. `None` entries (pages not present) are left out.
pub fn blocks_of(pfns: &[Option<u64>], block_bytes: u64) -> Vec<(u64, usize)> {
    let mut m = std::collections::BTreeMap::new();
    for p in pfns.iter().flatten() {
        *m.entry(block_of_pfn(*p, block_bytes)).or_insert(0usize) += 1;
    }
    m.into_iter().collect()
}

/// `memoryN` directory.
pub fn block_dir(block: u64) -> PathBuf {
    Path::new(MEMORY_SYSFS).join(format!("memory{block}"))
}

fn read_trim(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// `memoryN/state`: `online`, `offline`, `going-offline`.
pub fn block_state(block: u64) -> Option<String> {
    read_trim(&block_dir(block).join("state"))
}

/// The zone of an online block (`valid_zones` of an online block is the
/// one zone it is in: `Normal`, `Movable`, `DMA32`; `none` if it spans
/// several). `None` for an offline block or when it cannot be read.
pub fn block_zone(block: u64) -> Option<String> {
    if block_state(block).as_deref() != Some("online") {
        return None;
    }
    let z = read_trim(&block_dir(block).join("valid_zones"))?;
    z.split_whitespace().next().map(str::to_string)
}

/// The node of a block (its `nodeN` link).
pub fn block_node(block: u64) -> Option<u32> {
    fs::read_dir(block_dir(block))
        .ok()?
        .filter_map(|e| e.ok())
        .find_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
}

/// The memory blocks (`memoryN`) of a node, ascending.
pub fn node_blocks(nid: u32) -> Vec<u64> {
    let mut v: Vec<u64> = fs::read_dir(format!("{NODE_SYSFS}/node{nid}"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str()?.strip_prefix("memory")?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// The value to write to `state` to online a block into `zone` again:
/// `online_movable` for `Movable`, `online_kernel` otherwise.
pub fn online_value(zone: &str) -> &'static str {
    if zone == "Movable" {
        "online_movable"
    } else {
        "online_kernel"
    }
}

/// The zones of one node, as in `/proc/zoneinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneInfo {
    pub nid: u32,
    /// `DMA`, `DMA32`, `Normal`, `Movable`, `Device`.
    pub zone: String,
    pub free: u64,
    pub present: u64,
    pub managed: u64,
}

/// Parses `/proc/zoneinfo` (mm/vmstat.c `zoneinfo_show_print`): a
/// `Node N, zone NAME` line starts each zone; `pages free`, `present` and
/// `managed` follow.
pub fn parse_zoneinfo(s: &str) -> Vec<ZoneInfo> {
    let mut out: Vec<ZoneInfo> = Vec::new();
    for l in s.lines() {
        let t = l.trim();
        if let Some(rest) = t.strip_prefix("Node ") {
            let mut it = rest.splitn(2, ',');
            let nid = it.next().and_then(|n| n.trim().parse().ok());
            let zone = it
                .next()
                .and_then(|z| z.trim().strip_prefix("zone"))
                .map(|z| z.trim().to_string());
            if let (Some(nid), Some(zone)) = (nid, zone) {
                out.push(ZoneInfo {
                    nid,
                    zone,
                    free: 0,
                    present: 0,
                    managed: 0,
                });
            }
            continue;
        }
        let Some(z) = out.last_mut() else { continue };
        let f: Vec<&str> = t.split_whitespace().collect();
        match f.as_slice() {
            ["pages", "free", n] => z.free = n.parse().unwrap_or(0),
            ["present", n] => z.present = n.parse().unwrap_or(0),
            ["managed", n] => z.managed = n.parse().unwrap_or(0),
            _ => {}
        }
    }
    out
}

/// The zones of `nid` with memory present.
pub fn node_zones(nid: u32) -> Vec<ZoneInfo> {
    parse_zoneinfo(&fs::read_to_string("/proc/zoneinfo").unwrap_or_default())
        .into_iter()
        .filter(|z| z.nid == nid && z.present > 0)
        .collect()
}

/// The pfn in one `/proc/PID/pagemap` entry (Documentation/admin-guide/mm/
/// pagemap.rst): bits 0-54 when bit 63 (present) is set; `None` when the
/// page is not present or the pfn is hidden (0, without CAP_SYS_ADMIN).
pub fn parse_pagemap_entry(e: u64) -> Option<u64> {
    if e >> 63 == 1 {
        Some(e & ((1 << 55) - 1)).filter(|&p| p != 0)
    } else {
        None
    }
}

/// The pfn of each of the `nr_pages` pages from `addr` (page aligned),
/// from `/proc/self/pagemap`; `None` where no page is mapped. Reading it
/// does not fault anything in.
pub fn pagemap_pfns(addr: usize, nr_pages: usize) -> io::Result<Vec<Option<u64>>> {
    let f = fs::File::open("/proc/self/pagemap")?;
    let mut buf = vec![0u8; nr_pages * 8];
    f.read_exact_at(&mut buf, (addr / PAGE_SIZE * 8) as u64)?;
    Ok(buf
        .chunks_exact(8)
        .map(|c| parse_pagemap_entry(u64::from_le_bytes(c.try_into().unwrap())))
        .collect())
}

/// How a timed write to a sysfs file ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The write returned success.
    Done,
    /// The write (or the open) failed with this errno.
    Failed(i32),
    /// The time limit passed; the child was sent SIGKILL and was reaped
    /// (`reaped`) or is still stuck in the kernel.
    TimedOut { reaped: bool },
}

impl Outcome {
    /// `done`, `EBUSY`, `timed out`, ...
    pub fn describe(&self) -> String {
        match *self {
            Outcome::Done => "done".into(),
            Outcome::Failed(e) => crate::linux::errno::errno_name(&io::Error::from_raw_os_error(e)),
            Outcome::TimedOut { reaped: true } => "timed out (child killed)".into(),
            Outcome::TimedOut { reaped: false } => {
                "timed out (child killed but still stuck in the kernel)".into()
            }
        }
    }
}

/// A timed write: how it ended and how long it took (until it returned,
/// or until the limit passed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timed {
    pub outcome: Outcome,
    pub elapsed: Duration,
}

/// Exit status a child uses when the errno does not fit.
const CHILD_OTHER: i32 = 255;

/// Writes `value` to `path` in one `write(2)` from a forked child, and
/// waits for it at most `limit`: a write that takes longer (an offline
/// that never ends) gets the child a SIGKILL (offlining checks for
/// signals between its rounds and then fails with `EINTR`), counted as
/// [`Outcome::TimedOut`]. After the kill the child gets `grace` to go.
///
/// Call only from a single-threaded process (the child runs nothing but
/// `open`, `write` and `_exit`).
pub fn write_timed(
    path: &Path,
    value: &str,
    limit: Duration,
    grace: Duration,
) -> io::Result<Timed> {
    let cpath = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let data = value.as_bytes().to_vec();
    let t0 = Instant::now();
    // SAFETY: fork(2); the child below only calls async-signal-safe
    // functions on memory prepared before the fork, then _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: the child: open/write/_exit on `cpath` and `data`, which
        // were allocated before the fork.
        unsafe {
            let fd = libc::open(cpath.as_ptr(), libc::O_WRONLY);
            if fd < 0 {
                let e = *libc::__errno_location();
                libc::_exit(if (1..255).contains(&e) {
                    e
                } else {
                    CHILD_OTHER
                });
            }
            let n = libc::write(fd, data.as_ptr().cast(), data.len());
            if n < 0 {
                let e = *libc::__errno_location();
                libc::_exit(if (1..255).contains(&e) {
                    e
                } else {
                    CHILD_OTHER
                });
            }
            libc::_exit(if n as usize == data.len() {
                0
            } else {
                CHILD_OTHER
            });
        }
    }
    let reap = |deadline: Instant| -> Option<i32> {
        loop {
            let mut status = 0;
            // SAFETY: waits for our own child, writes one int.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid {
                return Some(status);
            }
            if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return Some(-1);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    match reap(t0 + limit) {
        Some(status) => {
            let elapsed = t0.elapsed();
            let outcome = if status >= 0 && libc::WIFEXITED(status) {
                match libc::WEXITSTATUS(status) {
                    0 => Outcome::Done,
                    e => Outcome::Failed(e),
                }
            } else {
                Outcome::Failed(CHILD_OTHER)
            };
            Ok(Timed { outcome, elapsed })
        }
        None => {
            let elapsed = t0.elapsed();
            // SAFETY: signals our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let reaped = reap(Instant::now() + grace).is_some();
            Ok(Timed {
                outcome: Outcome::TimedOut { reaped },
                elapsed,
            })
        }
    }
}

/// Writes `value` (`offline`, `online_movable`, ...) to block `block`'s
/// `state` with [`write_timed`].
pub fn set_block_state(block: u64, value: &str, limit: Duration) -> io::Result<Timed> {
    write_timed(
        &block_dir(block).join("state"),
        value,
        limit,
        Duration::from_secs(10),
    )
}

/// The text of one `/dev/kmsg` record (`PRIO,SEQ,TS,FLAGS;TEXT\n`, then
/// ` KEY=VALUE` dictionary lines): `TEXT`.
pub fn parse_kmsg_record(rec: &str) -> Option<String> {
    let first = rec.lines().next()?;
    let (_, text) = first.split_once(';')?;
    Some(text.to_string())
}

/// The kernel log from now on (`/dev/kmsg`, Documentation/ABI/testing/
/// dev-kmsg).
pub struct Kmsg {
    fd: std::os::fd::OwnedFd,
}

impl Kmsg {
    /// Opens `/dev/kmsg` positioned after the last record: [`Kmsg::read_new`]
    /// then returns what the kernel logs from now on.
    pub fn open() -> io::Result<Kmsg> {
        use std::os::fd::FromRawFd;
        // SAFETY: open(2) with a NUL-terminated path.
        let fd = unsafe { libc::open(c"/dev/kmsg".as_ptr(), libc::O_RDONLY | libc::O_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is ours.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let k = Kmsg { fd };
        k.skip_to_end()?;
        Ok(k)
    }

    /// Forgets every record logged so far.
    pub fn skip_to_end(&self) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        // SAFETY: lseek on our fd; SEEK_END on /dev/kmsg moves past the
        // last record.
        if unsafe { libc::lseek(self.fd.as_raw_fd(), 0, libc::SEEK_END) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The text of every record logged since the last call (or the open).
    pub fn read_new(&self) -> Vec<String> {
        use std::os::fd::AsRawFd;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 8192];
        loop {
            // SAFETY: reads at most `buf.len()` bytes into `buf`.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                // EPIPE: records were overwritten; the next read goes on.
                if io::Error::last_os_error().raw_os_error() == Some(libc::EPIPE) {
                    continue;
                }
                break;
            }
            if n == 0 {
                break;
            }
            if let Some(t) = parse_kmsg_record(&String::from_utf8_lossy(&buf[..n as usize])) {
                out.push(t);
            }
        }
        out
    }
}

/// A node's distances to the online nodes, from `nodeN/distance` (one
/// number per online node, in `online` order), as `(node, distance)`.
pub fn node_distances(nid: u32, online: &[u32]) -> Vec<(u32, u32)> {
    let s = fs::read_to_string(format!("{NODE_SYSFS}/node{nid}/distance")).unwrap_or_default();
    parse_distances(&s, online)
}

/// [`node_distances`] on the file's text.
pub fn parse_distances(s: &str, online: &[u32]) -> Vec<(u32, u32)> {
    online
        .iter()
        .copied()
        .zip(s.split_whitespace().filter_map(|d| d.parse().ok()))
        .collect()
}

/// The node the kernel falls back to first from `nid` among `candidates`
/// (nodes with memory other than `nid`): mm/mm_init.c
/// `find_next_best_node()` for the first fallback, i.e. the smallest
/// `distance + (n < nid) + (n has CPUs)`, lowest id on ties. `distances`
/// as from [`node_distances`]; `cpu` the nodes with CPUs.
pub fn first_fallback(
    nid: u32,
    candidates: &[u32],
    distances: &[(u32, u32)],
    cpu: &[u32],
) -> Option<u32> {
    candidates
        .iter()
        .copied()
        .filter(|&n| n != nid)
        .filter_map(|n| {
            let d = distances.iter().find(|x| x.0 == n)?.1;
            Some((d + u32::from(n < nid) + u32::from(cpu.contains(&n)), n))
        })
        .min()
        .map(|x| x.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_numbers() {
        assert_eq!(parse_block_size("8000000\n"), Some(128 << 20));
        assert_eq!(parse_block_size("0x8000000"), Some(128 << 20));
        assert_eq!(parse_block_size("0"), None);
        assert_eq!(parse_block_size("zz"), None);
        let bs = 128 << 20;
        assert_eq!(block_of_pfn(0x8000, bs), 1);
        assert_eq!(block_of_pfn(0x7fff, bs), 0);
        assert_eq!(block_pfns(3, bs), (3 * 0x8000, 0x8000));
        let pfns = [Some(0x8001), None, Some(0x8002), Some(0x10000)];
        assert_eq!(blocks_of(&pfns, bs), vec![(1, 2), (2, 1)]);
        assert_eq!(online_value("Movable"), "online_movable");
        assert_eq!(online_value("Normal"), "online_kernel");
    }

    #[test]
    fn pagemap_entries() {
        assert_eq!(parse_pagemap_entry(1 << 63 | 0x1234), Some(0x1234));
        assert_eq!(parse_pagemap_entry(1 << 63), None);
        assert_eq!(parse_pagemap_entry(0x1234), None);
        // soft-dirty and exclusive bits do not leak into the pfn
        assert_eq!(
            parse_pagemap_entry(1 << 63 | 1 << 55 | 1 << 56 | 7),
            Some(7)
        );
        // Our own pages: present (root shows the pfn, others 0 = None).
        let m = crate::linux::sys::Mapping::anon(2 * PAGE_SIZE).unwrap();
        m.touch_pages();
        let p = pagemap_pfns(m.addr(), 2).unwrap();
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn zoneinfo() {
        let s = "Node 0, zone      DMA\n  per-node stats\n      nr_inactive_anon 0\n  pages free     3840\n        boost    0\n        min      8\n        spanned  4095\n        present  3998\n        managed  3840\n\
                 Node 2, zone  Movable\n  pages free     1040000\n        spanned  1048576\n        present  1048576\n        managed  1048576\n\
                 Node 2, zone   Normal\n  pages free     0\n        present  0\n        managed  0\n";
        let z = parse_zoneinfo(s);
        assert_eq!(z.len(), 3);
        assert_eq!(
            z[0],
            ZoneInfo {
                nid: 0,
                zone: "DMA".into(),
                free: 3840,
                present: 3998,
                managed: 3840
            }
        );
        assert_eq!(
            (z[1].nid, z[1].zone.as_str(), z[1].present),
            (2, "Movable", 1048576)
        );
        assert_eq!(z[2].present, 0);
    }

    #[test]
    fn kmsg_records() {
        assert_eq!(
            parse_kmsg_record("4,1234,5678,-;tierkit: refusing to offline\n SUBSYSTEM=x\n")
                .as_deref(),
            Some("tierkit: refusing to offline")
        );
        assert_eq!(parse_kmsg_record("garbage"), None);
    }

    #[test]
    fn fallback() {
        let d = parse_distances("20 10\n", &[0, 2]);
        assert_eq!(d, vec![(0, 20), (2, 10)]);
        assert_eq!(first_fallback(2, &[0, 2], &d, &[0]), Some(0));
        // A headless node at the same distance wins over one with CPUs.
        let d = parse_distances("20 20 10", &[0, 1, 2]);
        assert_eq!(first_fallback(2, &[0, 1, 2], &d, &[0]), Some(1));
        assert_eq!(first_fallback(2, &[2], &d, &[0]), None);
    }

    #[test]
    fn timed_writes() {
        let dir = std::env::temp_dir().join(format!("tk-memblock-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("state");
        fs::write(&f, "").unwrap();
        let t = write_timed(
            &f,
            "offline",
            Duration::from_secs(10),
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(t.outcome, Outcome::Done);
        assert_eq!(fs::read_to_string(&f).unwrap(), "offline");
        let t = write_timed(
            &dir.join("none/x"),
            "1",
            Duration::from_secs(10),
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(t.outcome, Outcome::Failed(libc::ENOENT));
        assert_eq!(t.outcome.describe(), "ENOENT");
        // A FIFO without a reader: open(O_WRONLY) blocks, like an offline
        // that never ends; the child is killed after the limit.
        let fifo = dir.join("fifo");
        let c = CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let t = write_timed(
            &fifo,
            "x",
            Duration::from_millis(200),
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(t.outcome, Outcome::TimedOut { reaped: true });
        assert!(t.elapsed >= Duration::from_millis(200), "{t:?}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
