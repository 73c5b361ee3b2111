//! DAMON's target-share migration through the kernel's DAMON sysfs
//! interface (`/sys/kernel/mm/damon/admin`, Documentation/admin-guide/mm/
//! damon/usage.rst): one kdamond with one `paddr` context over the
//! physical memory of the given nodes, and one `migrate_hot` scheme per
//! node, each with a quota goal `node_eligible_mem_bp` for its node
//! (Documentation/mm/damon/design.rst, "Aim-oriented Feedback-driven
//! Auto-tuning"). The scheme that pushes hot memory to node `c` grows its
//! quota while `c` holds less than its share of the eligible (hot) memory;
//! the one that pulls to `d` grows while `d` holds less than its own: the
//! pair holds the split. The quotas are tuned by the default `consist`
//! tuner, with no time or size cap of their own.
//!
//! DAMON's `paddr` operations see only LRU folios (`damon_get_folio()`),
//! so a `/dev/tierkit` mapping, whose pages are not on the LRU, is out of
//! its reach: the comparison gives DAMON an anonymous working set.

use std::path::{Path, PathBuf};

/// The DAMON sysfs directory for privileged users.
pub const ADMIN: &str = "/sys/kernel/mm/damon/admin";

/// DAMON's monitoring intervals, in microseconds.
#[derive(Clone, Copy, Debug)]
pub struct Intervals {
    pub sample_us: u64,
    pub aggr_us: u64,
}

/// One scheme: `migrate_hot` to `nid`, with the goal that `nid` holds
/// `bp` (1/10,000) of the eligible memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Goal {
    pub nid: u32,
    pub bp: u32,
}

/// A scheme's statistics (`schemes/N/stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub nr_tried: u64,
    pub sz_tried: u64,
    pub nr_applied: u64,
    pub sz_applied: u64,
    pub qt_exceeds: u64,
}

fn put(p: &Path, v: &str) -> Result<(), String> {
    std::fs::write(p, v).map_err(|e| format!("write {v:?} to {}: {e}", p.display()))
}

fn get(p: &Path) -> Result<String, String> {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("read {}: {e}", p.display()))
}

/// Merges ascending `[start, end)` ranges that touch or overlap (DAMON's
/// regions of one target must not overlap and must ascend).
pub fn merge_ranges(mut r: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    r.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (s, e) in r {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// The physical address ranges of the online memory blocks of `nodes`,
/// merged.
pub fn node_ranges(nodes: &[u32]) -> Result<Vec<(u64, u64)>, String> {
    use crate::linux::memblock::{block_pfns, block_size, node_blocks};
    let bs = block_size().map_err(|e| format!("memory block size: {e}"))?;
    let page = crate::linux::sys::PAGE_SIZE as u64;
    let mut r = Vec::new();
    for &n in nodes {
        for b in node_blocks(n) {
            let (pfn, pages) = block_pfns(b, bs);
            r.push((pfn * page, (pfn + pages) * page));
        }
    }
    let r = merge_ranges(r);
    if r.is_empty() {
        return Err(format!("no memory blocks for nodes {nodes:?}"));
    }
    Ok(r)
}

/// A running kdamond of this module's making; turned off and removed
/// when dropped.
pub struct Kdamond {
    dir: PathBuf,
    schemes: usize,
}

impl Kdamond {
    /// Whether the kernel has DAMON's sysfs interface.
    pub fn available() -> bool {
        Path::new(ADMIN).join("kdamonds/nr_kdamonds").exists()
    }

    /// Configures and turns on one kdamond: `paddr` over `ranges`, a
    /// `migrate_hot` scheme per goal for regions accessed at least
    /// `min_accesses` times per aggregation, quotas reset (and goals
    /// evaluated) every `reset_ms`.
    pub fn start(
        ranges: &[(u64, u64)],
        iv: Intervals,
        goals: &[Goal],
        min_accesses: u32,
        reset_ms: u32,
    ) -> Result<Kdamond, String> {
        let k = Path::new(ADMIN).join("kdamonds");
        let nr = get(&k.join("nr_kdamonds"))?;
        if nr != "0" {
            return Err(format!(
                "DAMON is in use: kdamonds/nr_kdamonds is {nr}, not 0"
            ));
        }
        put(&k.join("nr_kdamonds"), "1")?;
        // From here on Drop removes the kdamond again.
        let kd = Kdamond {
            dir: k.join("0"),
            schemes: goals.len(),
        };
        kd.configure(ranges, iv, goals, min_accesses, reset_ms)?;
        put(&kd.dir.join("state"), "on")?;
        Ok(kd)
    }

    fn configure(
        &self,
        ranges: &[(u64, u64)],
        iv: Intervals,
        goals: &[Goal],
        min_accesses: u32,
        reset_ms: u32,
    ) -> Result<(), String> {
        let c = self.dir.join("contexts");
        put(&c.join("nr_contexts"), "1")?;
        let c = c.join("0");
        put(&c.join("operations"), "paddr")?;
        let a = c.join("monitoring_attrs");
        put(&a.join("intervals/sample_us"), &iv.sample_us.to_string())?;
        put(&a.join("intervals/aggr_us"), &iv.aggr_us.to_string())?;
        put(&a.join("nr_regions/min"), "10")?;
        put(&a.join("nr_regions/max"), "1000")?;
        let t = c.join("targets");
        put(&t.join("nr_targets"), "1")?;
        let r = t.join("0/regions");
        put(&r.join("nr_regions"), &ranges.len().to_string())?;
        for (i, (s, e)) in ranges.iter().enumerate() {
            put(&r.join(format!("{i}/start")), &s.to_string())?;
            put(&r.join(format!("{i}/end")), &e.to_string())?;
        }
        let s = c.join("schemes");
        put(&s.join("nr_schemes"), &goals.len().to_string())?;
        for (i, g) in goals.iter().enumerate() {
            let d = s.join(i.to_string());
            put(&d.join("action"), "migrate_hot")?;
            put(&d.join("target_nid"), &g.nid.to_string())?;
            let p = d.join("access_pattern");
            // The ranges are closed and default to [0, 0].
            put(&p.join("sz/max"), &u64::MAX.to_string())?;
            put(&p.join("nr_accesses/min"), &min_accesses.to_string())?;
            put(&p.join("nr_accesses/max"), &u32::MAX.to_string())?;
            put(&p.join("age/max"), &u32::MAX.to_string())?;
            let q = d.join("quotas");
            put(&q.join("reset_interval_ms"), &reset_ms.to_string())?;
            put(&q.join("goals/nr_goals"), "1")?;
            let gd = q.join("goals/0");
            put(&gd.join("target_metric"), "node_eligible_mem_bp")?;
            put(&gd.join("target_value"), &g.bp.to_string())?;
            put(&gd.join("nid"), &g.nid.to_string())?;
        }
        Ok(())
    }

    /// Each scheme's statistics, refreshed now.
    pub fn stats(&self) -> Result<Vec<Stats>, String> {
        put(&self.dir.join("state"), "update_schemes_stats")?;
        let base = self.dir.join("contexts/0/schemes");
        (0..self.schemes)
            .map(|i| {
                let st = base.join(format!("{i}/stats"));
                let n = |f: &str| -> Result<u64, String> {
                    get(&st.join(f))?.parse().map_err(|e| format!("{f}: {e}"))
                };
                Ok(Stats {
                    nr_tried: n("nr_tried")?,
                    sz_tried: n("sz_tried")?,
                    nr_applied: n("nr_applied")?,
                    sz_applied: n("sz_applied")?,
                    qt_exceeds: n("qt_exceeds")?,
                })
            })
            .collect()
    }

    /// Turns the kdamond off and removes it.
    pub fn stop(self) -> Result<(), String> {
        let r = self.remove();
        std::mem::forget(self);
        r
    }

    fn remove(&self) -> Result<(), String> {
        let state = self.dir.join("state");
        if get(&state).as_deref() == Ok("on") {
            put(&state, "off")?;
        }
        // Removing a kdamond that is still stopping fails with EBUSY.
        let nr = self.dir.parent().map(|k| k.join("nr_kdamonds"));
        let mut last = Ok(());
        for _ in 0..50 {
            last = nr.as_deref().map_or(Ok(()), |p| put(p, "0"));
            if last.is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        last
    }
}

impl Drop for Kdamond {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_when_they_touch_or_overlap() {
        assert_eq!(
            merge_ranges(vec![(8, 12), (0, 4), (4, 6), (10, 20), (30, 40)]),
            vec![(0, 6), (8, 20), (30, 40)]
        );
        assert_eq!(merge_ranges(vec![]), vec![]);
    }
}
