//! tierkit's pre-cleared gigantic pool:
//! `/sys/kernel/debug/tierkit/gigantic/pool`, see
//! Documentation/ABI/testing/debugfs-tierkit.
//!
//! A write is one or more `NID COUNT` lines: tierkit then keeps COUNT
//! pre-cleared 1 GiB ranges ready on node NID, filled in the background by
//! the `tierkit_pool` kthread; a gigantic fault takes a ready range of its
//! node instead of clearing one. Every line is checked before any is
//! applied (`EINVAL`: malformed, or not an online node with memory;
//! `ENOSPC`: more ranges than the node can hold). Reading gives one
//! `NID TARGET READY` line per node with memory or a non-zero target.

use std::io::{self, Write};
use std::time::{Duration, Instant};

/// The pool file (root only, 0600).
pub const POOL_PATH: &str = "/sys/kernel/debug/tierkit/gigantic/pool";

/// How long a node's pool may take to fill one 1 GiB range: about 1 s per
/// GiB on DRAM under TCG (120 s leave room for a loaded host and the debug
/// kernel), tens of seconds on an emulated CXL node, where QEMU forwards
/// every access to the device.
pub const FILL_TIMEOUT_DRAM: Duration = Duration::from_secs(120);
/// See [`FILL_TIMEOUT_DRAM`].
pub const FILL_TIMEOUT_CXL: Duration = Duration::from_secs(240);

/// One line of the pool file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolLine {
    pub nid: u32,
    /// 1 GiB ranges tierkit keeps ready on the node.
    pub target: u64,
    /// Pre-cleared 1 GiB ranges waiting now.
    pub ready: u64,
}

/// Parses the pool file's `NID TARGET READY` lines.
pub fn parse_pool(s: &str) -> anyhow::Result<Vec<PoolLine>> {
    let mut out = Vec::new();
    for l in s.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let f: Vec<&str> = l.split_whitespace().collect();
        anyhow::ensure!(f.len() == 3, "bad pool line {l:?}");
        out.push(PoolLine {
            nid: f[0].parse()?,
            target: f[1].parse()?,
            ready: f[2].parse()?,
        });
    }
    Ok(out)
}

/// Whether the module has the pool file.
pub fn present() -> bool {
    crate::linux::kernel::ensure_debugfs();
    std::path::Path::new(POOL_PATH).exists()
}

/// Reads and parses [`POOL_PATH`].
pub fn read() -> anyhow::Result<Vec<PoolLine>> {
    crate::linux::kernel::ensure_debugfs();
    parse_pool(&std::fs::read_to_string(POOL_PATH)?)
}

/// `(target, ready)` of `nid`; `(0, 0)` when the file has no line for it.
pub fn of(lines: &[PoolLine], nid: u32) -> (u64, u64) {
    lines
        .iter()
        .find(|l| l.nid == nid)
        .map_or((0, 0), |l| (l.target, l.ready))
}

/// `(target, ready)` of `nid` now.
pub fn state(nid: u32) -> anyhow::Result<(u64, u64)> {
    Ok(of(&read()?, nid))
}

/// Writes `text` to the pool file in one `write(2)`; the errno is the
/// module's answer (`EINVAL`, `ENOSPC`).
pub fn write(text: &str) -> io::Result<()> {
    let n = write_bytes(text.as_bytes())?;
    if n != text.len() {
        return Err(io::Error::other(format!(
            "short write to {POOL_PATH}: {n} of {} bytes",
            text.len()
        )));
    }
    Ok(())
}

/// One `write(2)` of `b` to the pool file (any bytes, for hostile
/// input); `Ok` is the count the module took.
pub fn write_bytes(b: &[u8]) -> io::Result<usize> {
    crate::linux::kernel::ensure_debugfs();
    std::fs::OpenOptions::new()
        .write(true)
        .open(POOL_PATH)?
        .write(b)
}

/// The whole pool file, for "nothing changed" comparisons.
pub fn snapshot() -> Result<Vec<PoolLine>, String> {
    read().map_err(|e| format!("{POOL_PATH}: {e:#}"))
}

/// A write of `b` fails with `errno` and leaves the file as it was (every
/// line is checked before any is applied).
pub fn refused_unchanged(b: &[u8], errno: i32) -> Result<(), String> {
    let before = snapshot()?;
    crate::linux::errno::expect_errno(write_bytes(b), errno)?;
    let after = snapshot()?;
    if after != before {
        return Err(format!("the file changed: {before:?} -> {after:?}"));
    }
    Ok(())
}

/// Sets node `nid`'s target to `count` ranges.
pub fn set_target(nid: u32, count: u64) -> io::Result<()> {
    write(&format!("{nid} {count}\n"))
}

/// How long filling one range on `nid` may take: [`FILL_TIMEOUT_CXL`] on a
/// node made of a CXL region, else [`FILL_TIMEOUT_DRAM`].
pub fn fill_timeout(nid: u32) -> Duration {
    if crate::topology::cxl::cxl_nodes().contains(&nid) {
        FILL_TIMEOUT_CXL
    } else {
        FILL_TIMEOUT_DRAM
    }
}

/// Waits until `nid` has `target` as its target and `ready` ranges ready,
/// polling every 50 ms for at most `timeout`. Returns how long it took;
/// `Err` says what the file showed last.
pub fn wait_for(nid: u32, target: u64, ready: u64, timeout: Duration) -> Result<Duration, String> {
    let t0 = Instant::now();
    loop {
        let now = state(nid).map_err(|e| format!("reading {POOL_PATH}: {e:#}"))?;
        if now == (target, ready) {
            return Ok(t0.elapsed());
        }
        if t0.elapsed() >= timeout {
            return Err(format!(
                "after {:.0} s node {nid} reads `{nid} {} {}`, expected `{nid} {target} {ready}`",
                timeout.as_secs_f64(),
                now.0,
                now.1
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until tierkit's pool refill holds no range outside the pool
/// (`gigantic_pool_filling 0` in the `limits` file): a refill under way
/// holds a GiB that no free-memory count sees until it lands in the pool
/// or, its target lowered meanwhile, is freed; under a loaded host that
/// took longer than any fixed settling time. Every check of free memory
/// quiesces it first. Returns at once without the module or the counter;
/// `Err` after `timeout` (a refill that never ends).
pub fn wait_quiet(timeout: Duration) -> Result<(), String> {
    let t0 = Instant::now();
    loop {
        let filling = crate::linux::vma::read_limits()
            .ok()
            .and_then(|l| crate::linux::vma::limit(&l, "gigantic_pool_filling"));
        match filling {
            None | Some(0) => return Ok(()),
            Some(n) if t0.elapsed() >= timeout => {
                return Err(format!(
                    "the pool's refill still holds {n} range(s) after {:.0} s",
                    timeout.as_secs_f64()
                ))
            }
            Some(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// [`wait_quiet`] for as long as a range may take to fill on any node
/// ([`FILL_TIMEOUT_CXL`]).
pub fn quiet() -> Result<(), String> {
    wait_quiet(FILL_TIMEOUT_CXL)
}

/// Node `nid`'s free memory (kB, [`crate::linux::vma::node_free_kb`]) once the
/// pool is [`quiet`]: the baseline of a check that memory comes back.
pub fn quiet_free_kb(nid: u32) -> Result<u64, String> {
    quiet()?;
    crate::linux::vma::node_free_kb(nid).ok_or_else(|| format!("no meminfo of node {nid}"))
}

/// A node's pool target, set while the value lives and put back to 0 on
/// drop (its ready ranges go back to the kernel, and a refill under way
/// ends: [`quiet`]).
#[derive(Debug)]
pub struct Target {
    nid: u32,
}

impl Target {
    /// Sets `nid`'s target to `count`.
    pub fn set(nid: u32, count: u64) -> io::Result<Target> {
        set_target(nid, count)?;
        Ok(Target { nid })
    }

    /// Sets the target to `count`, waits for that many ready ranges
    /// ([`fill_timeout`] each). Returns the value and the time it took.
    pub fn filled(nid: u32, count: u64) -> Result<(Target, Duration), String> {
        let t = Target::set(nid, count).map_err(|e| {
            format!(
                "write `{nid} {count}` to {POOL_PATH}: {}",
                crate::linux::errno::errno_name(&e)
            )
        })?;
        let d = wait_for(nid, count, count, fill_timeout(nid) * count.max(1) as u32)?;
        Ok((t, d))
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = set_target(self.nid, 0);
        let _ = quiet();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_lines() {
        let p = parse_pool("0 1 1\n1 0 0\n\n").unwrap();
        assert_eq!(
            p,
            vec![
                PoolLine {
                    nid: 0,
                    target: 1,
                    ready: 1
                },
                PoolLine {
                    nid: 1,
                    target: 0,
                    ready: 0
                }
            ]
        );
        assert_eq!(of(&p, 0), (1, 1));
        assert_eq!(of(&p, 7), (0, 0));
        assert!(parse_pool("0 1\n").is_err());
        assert!(parse_pool("0 1 x\n").is_err());
        assert!(parse_pool("0 1 1 1\n").is_err());
        assert_eq!(parse_pool("").unwrap(), vec![]);
    }

    #[test]
    fn timeouts() {
        assert!(FILL_TIMEOUT_CXL > FILL_TIMEOUT_DRAM);
        // A host without CXL regions: every node is DRAM.
        if !std::path::Path::new("/sys/bus/cxl").exists() {
            assert_eq!(fill_timeout(0), FILL_TIMEOUT_DRAM);
        }
    }
}
