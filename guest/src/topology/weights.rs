//! Weighted-interleave weight files: the kernel's
//! `/sys/kernel/mm/mempolicy/weighted_interleave/{nodeN,auto}`
//! (Documentation/ABI/testing/sysfs-kernel-mm-mempolicy-weighted-interleave)
//! and tierkit's mirror of them, which has the same names, formats and
//! errors (mm/mempolicy.c `node_store`, `weighted_interleave_auto_store`).

use anyhow::{Context, Result};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use tierkit_core::interleave::{bw_from_coords, Nodemask, Weights};

/// The kernel's weight directory.
pub const KERNEL_WI_DIR: &str = "/sys/kernel/mm/mempolicy/weighted_interleave";

/// Where tierkit's weight directory may be, first match wins. The ABI
/// document in `Documentation/ABI/testing/` names the real one; the
/// environment variable `TIERKIT_WI_DIR` overrides all of them.
pub const TIERKIT_WI_DIRS: &[&str] = &[
    "/sys/kernel/debug/tierkit/weighted_interleave",
    "/sys/kernel/tierkit/weighted_interleave",
    "/sys/kernel/config/tierkit/weighted_interleave",
];

/// A directory of `nodeN` weight files and an `auto` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightDir {
    pub path: PathBuf,
}

/// Writes `value` to `path` in one `write(2)`, as `echo -n >` would, and
/// returns the raw error so callers can check the errno.
pub fn write_file(path: &Path, value: &str) -> io::Result<()> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)?;
    let n = f.write(value.as_bytes())?;
    if n != value.len() {
        return Err(io::Error::other(format!(
            "short write to {}: {n} of {}",
            path.display(),
            value.len()
        )));
    }
    Ok(())
}

/// Parses a weight file's content: a decimal `u8` and a newline.
pub fn parse_weight(s: &str) -> Result<u8> {
    s.trim()
        .parse::<u8>()
        .with_context(|| format!("bad weight {s:?}"))
}

/// Parses an `auto` file's content: `true` or `false` (`str_true_false`).
pub fn parse_auto(s: &str) -> Result<bool> {
    match s.trim() {
        "true" | "1" | "Y" | "y" => Ok(true),
        "false" | "0" | "N" | "n" => Ok(false),
        other => anyhow::bail!("bad auto value {other:?}"),
    }
}

impl WeightDir {
    pub fn new(path: impl Into<PathBuf>) -> WeightDir {
        WeightDir { path: path.into() }
    }

    /// The kernel's directory, if this kernel has weighted interleave.
    pub fn kernel() -> Option<WeightDir> {
        let d = WeightDir::new(KERNEL_WI_DIR);
        d.path.is_dir().then_some(d)
    }

    /// tierkit's directory: `$TIERKIT_WI_DIR`, else the first of
    /// [`TIERKIT_WI_DIRS`] that exists. Mounts debugfs first if needed.
    pub fn tierkit() -> Option<WeightDir> {
        if let Ok(p) = std::env::var("TIERKIT_WI_DIR") {
            let d = WeightDir::new(p);
            return d.path.is_dir().then_some(d);
        }
        crate::linux::kernel::ensure_debugfs();
        TIERKIT_WI_DIRS
            .iter()
            .map(WeightDir::new)
            .find(|d| d.path.is_dir())
    }

    pub fn node_path(&self, nid: u32) -> PathBuf {
        self.path.join(format!("node{nid}"))
    }

    pub fn auto_path(&self) -> PathBuf {
        self.path.join("auto")
    }

    /// The nodes that have a weight file, ascending.
    pub fn nodes(&self) -> Result<Vec<u32>> {
        let mut v = Vec::new();
        for e in
            fs::read_dir(&self.path).with_context(|| format!("listing {}", self.path.display()))?
        {
            let name = e?.file_name();
            if let Some(n) = name
                .to_str()
                .and_then(|s| s.strip_prefix("node"))
                .and_then(|s| s.parse().ok())
            {
                v.push(n);
            }
        }
        v.sort_unstable();
        Ok(v)
    }

    pub fn weight(&self, nid: u32) -> Result<u8> {
        let p = self.node_path(nid);
        let s = fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        parse_weight(&s).with_context(|| format!("in {}", p.display()))
    }

    /// Writes `value` (any string, so that bad inputs can be tested) to
    /// `nodeN`.
    pub fn write_weight_str(&self, nid: u32, value: &str) -> io::Result<()> {
        write_file(&self.node_path(nid), value)
    }

    pub fn set_weight(&self, nid: u32, w: u8) -> Result<()> {
        self.write_weight_str(nid, &w.to_string())
            .with_context(|| format!("writing {w} to {}", self.node_path(nid).display()))
    }

    /// Sets the weight of each `(node, weight)`.
    pub fn set_weights(&self, weights: &[(u32, u8)]) -> Result<()> {
        weights.iter().try_for_each(|&(n, w)| self.set_weight(n, w))
    }

    /// `None` when there is no `auto` file.
    pub fn auto(&self) -> Result<Option<bool>> {
        let p = self.auto_path();
        match fs::read_to_string(&p) {
            Ok(s) => parse_auto(&s).map(Some),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", p.display())),
        }
    }

    pub fn write_auto_str(&self, value: &str) -> io::Result<()> {
        write_file(&self.auto_path(), value)
    }

    /// tierkit's `bandwidth` file (Documentation/ABI/testing/debugfs-tierkit).
    pub fn bandwidth_path(&self) -> PathBuf {
        self.path.join("bandwidth")
    }

    /// Writes `(nid, read_mbps, write_mbps)` lines to tierkit's `bandwidth`
    /// file in one write, as `mempolicy_set_node_perf` would for each node.
    pub fn write_bandwidth(&self, entries: &[(u32, u32, u32)]) -> io::Result<()> {
        write_file(&self.bandwidth_path(), &bandwidth_text(entries))
    }

    /// Reads every node's weight as a 64-entry table (1 for nodes without a
    /// file).
    pub fn table(&self) -> Result<[u8; 64]> {
        let mut t = [1u8; 64];
        for n in self.nodes()? {
            if n < 64 {
                t[n as usize] = self.weight(n)?;
            }
        }
        Ok(t)
    }

    /// Reads `auto`, every node's weight and the bandwidth table (where
    /// there is one: tierkit's), to put back later.
    pub fn snapshot(&self) -> Result<WeightSnapshot> {
        let nodes = self.nodes()?;
        let weights = nodes
            .iter()
            .map(|&n| Ok((n, self.weight(n)?)))
            .collect::<Result<Vec<_>>>()?;
        let bandwidth = match fs::read_to_string(self.bandwidth_path()) {
            Ok(t) if !t.trim().is_empty() => Some(t),
            Ok(_) => None,
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).context("reading the bandwidth table"),
        };
        Ok(WeightSnapshot {
            dir: self.clone(),
            auto: self.auto()?,
            weights,
            bandwidth,
        })
    }
}

/// The text of a `bandwidth` write: one `NID READ WRITE` line per entry.
pub fn bandwidth_text(entries: &[(u32, u32, u32)]) -> String {
    entries
        .iter()
        .map(|(n, r, w)| format!("{n} {r} {w}\n"))
        .collect()
}

/// Saved weights, `auto` and bandwidth table of a [`WeightDir`].
#[derive(Clone, Debug)]
pub struct WeightSnapshot {
    pub dir: WeightDir,
    pub auto: Option<bool>,
    pub weights: Vec<(u32, u8)>,
    /// The `bandwidth` file's text (tierkit's table; `None` where there is
    /// no such file or nothing was ever written to it).
    pub bandwidth: Option<String>,
}

impl WeightSnapshot {
    /// Puts the bandwidth table back (a `tk-calibrate` writes measured
    /// figures there, from which `auto` would otherwise recompute), then
    /// the weights, then `auto=true` if it was true (which makes the
    /// kernel recompute the auto weights from its bandwidth table). If
    /// that fails with `ENODEV` (no bandwidth data; the kernel read `auto`
    /// as true only because no weight had ever been written), the saved
    /// weights stay, which are the values the kernel was using.
    pub fn restore(&self) -> Result<()> {
        if let Some(bw) = &self.bandwidth {
            write_file(&self.dir.bandwidth_path(), bw)
                .context("writing the bandwidth table back")?;
        }
        self.dir.set_weights(&self.weights)?;
        if self.auto == Some(true) {
            match self.dir.write_auto_str("true") {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENODEV) => {}
                Err(e) => return Err(e).context("writing true to auto"),
            }
        }
        Ok(())
    }

    /// Weights as text: `node0=25 node1=6 auto=true`.
    pub fn describe(&self) -> String {
        let mut s: Vec<String> = self
            .weights
            .iter()
            .map(|(n, w)| format!("node{n}={w}"))
            .collect();
        if let Some(a) = self.auto {
            s.push(format!("auto={a}"));
        }
        s.join(" ")
    }
}

/// Restores a [`WeightSnapshot`] when dropped, also on a panic, unless
/// [`RestoreOnDrop::done`] restored it already.
#[derive(Debug)]
pub struct RestoreOnDrop(Option<WeightSnapshot>);

impl RestoreOnDrop {
    pub fn new(s: WeightSnapshot) -> RestoreOnDrop {
        RestoreOnDrop(Some(s))
    }

    /// Restores now and returns the result; the drop then does nothing.
    pub fn done(&mut self) -> Result<()> {
        match self.0.take() {
            Some(s) => s.restore(),
            None => Ok(()),
        }
    }

    pub fn snapshot(&self) -> Option<&WeightSnapshot> {
        self.0.as_ref()
    }
}

impl Drop for RestoreOnDrop {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            if let Err(e) = s.restore() {
                eprintln!("# restoring {}: {e:#}", s.dir.path.display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(name: &str) -> WeightDir {
        let dir = std::env::temp_dir().join(format!("tk-wi-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("node0"), "25\n").unwrap();
        fs::write(dir.join("node1"), "6\n").unwrap();
        fs::write(dir.join("auto"), "true\n").unwrap();
        fs::write(dir.join("bandwidth"), "").unwrap();
        WeightDir::new(dir)
    }

    #[test]
    fn parse() {
        assert_eq!(parse_weight("255\n").unwrap(), 255);
        assert!(parse_weight("256\n").is_err());
        assert!(parse_weight("abc").is_err());
        assert!(parse_auto("true\n").unwrap());
        assert!(!parse_auto("false\n").unwrap());
        assert!(parse_auto("maybe").is_err());
    }

    #[test]
    fn read_write_snapshot_restore() {
        let d = fake("rw");
        assert_eq!(d.nodes().unwrap(), vec![0, 1]);
        assert_eq!(d.weight(0).unwrap(), 25);
        assert_eq!(d.auto().unwrap(), Some(true));
        let snap = d.snapshot().unwrap();
        assert_eq!(snap.describe(), "node0=25 node1=6 auto=true");
        d.set_weights(&[(0, 3), (1, 1)]).unwrap();
        assert_eq!(d.weight(0).unwrap(), 3);
        // A plain file does not recompute anything; restore writes it back.
        snap.restore().unwrap();
        assert_eq!(d.weight(0).unwrap(), 25);
        assert_eq!(d.weight(1).unwrap(), 6);
        assert_eq!(d.auto().unwrap(), Some(true));
        fs::remove_dir_all(&d.path).unwrap();
    }

    #[test]
    fn bandwidth_lines() {
        assert_eq!(
            bandwidth_text(&[(0, 200, 100), (1, 50, 50)]),
            "0 200 100\n1 50 50\n"
        );
        let d = fake("bw");
        d.write_bandwidth(&[(1, 5, 6)]).unwrap();
        assert_eq!(fs::read_to_string(d.bandwidth_path()).unwrap(), "1 5 6\n");
        let t = d.table().unwrap();
        assert_eq!((t[0], t[1], t[2]), (25, 6, 1));
        fs::remove_dir_all(&d.path).unwrap();
    }

    #[test]
    fn restore_on_drop() {
        let d = fake("guard");
        {
            let _g = RestoreOnDrop::new(d.snapshot().unwrap());
            d.set_weight(0, 9).unwrap();
        }
        assert_eq!(d.weight(0).unwrap(), 25);
        let mut g = RestoreOnDrop::new(d.snapshot().unwrap());
        d.set_weight(0, 9).unwrap();
        g.done().unwrap();
        d.set_weight(0, 8).unwrap();
        drop(g);
        assert_eq!(d.weight(0).unwrap(), 8);
        fs::remove_dir_all(&d.path).unwrap();
    }

    #[test]
    fn missing_auto_is_none() {
        let d = fake("noauto");
        fs::remove_file(d.auto_path()).unwrap();
        assert_eq!(d.auto().unwrap(), None);
        fs::remove_dir_all(&d.path).unwrap();
    }
}

/// The kernel's auto weights (`reduce_interleave_weights`, each node's
/// bandwidth `min(read, write)` as `mempolicy_set_node_perf` takes it) for
/// `(nid, read, write)` entries over `memory` (nodes without an entry
/// count as 0 and get 1).
pub fn weights_from_bandwidth(entries: &[(u32, u32, u32)], memory: u64) -> [u8; 64] {
    let mut bw = [0u32; 64];
    for &(n, r, w) in entries {
        if n < 64 {
            bw[n as usize] = bw_from_coords(r, w);
        }
    }
    Weights::from_bandwidth(&bw, Nodemask(memory)).effective()
}

/// A socket's table from `(nid, read, write)` entries over `memory`:
/// [`weights_from_bandwidth`], with the nodes outside `memory` at 0 (the
/// kernel's table gives every node a weight, 1 where it has no memory; a
/// socket's table weighs only the nodes it places on, and the ABI refuses
/// a weight for a node without memory).
pub fn table_from_bandwidth(entries: &[(u32, u32, u32)], memory: u64) -> [u8; 64] {
    let mut t = weights_from_bandwidth(entries, memory);
    for (n, w) in t.iter_mut().enumerate() {
        if memory >> n & 1 == 0 {
            *w = 0;
        }
    }
    t
}
