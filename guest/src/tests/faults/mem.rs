//! Memory accounting: per-node free memory, slab counters, and tierkit's
//! holdings.

use super::*;

/// Free memory per node and the slab counters, at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemSnapshot {
    /// node -> free pages: the buddy allocator's (`pages free` of each
    /// zone in /proc/zoneinfo, what MemFree shows) plus the pages parked
    /// on the per-CPU lists (`count:` of each zone's pagesets), which
    /// MemFree does not count but which are free all the same. Without
    /// the second part, freeing a few thousand pages may not show in
    /// MemFree until the lists drain.
    pub free_pages: BTreeMap<u32, u64>,
    /// node -> MemFree (kB) of `/sys/devices/system/node/nodeN/meminfo`.
    pub memfree_kb: BTreeMap<u32, u64>,
    /// /proc/meminfo `Slab:` and `SUnreclaim:` (kB).
    pub slab_kb: u64,
    pub sunreclaim_kb: u64,
    /// cache -> (active objects, objects) of /proc/slabinfo (empty where
    /// it cannot be read). Objects in KASAN's quarantine count as active.
    pub slab_objs: BTreeMap<String, (u64, u64)>,
}

/// Where SLUB lists its caches, one directory each (aliases of merged
/// caches are symlinks to them).
pub const SLAB_SYSFS: &str = "/sys/kernel/slab";

/// Gives back what the slab caches hold for objects already freed: writes
/// `1` to `/sys/kernel/slab/<cache>/shrink` of every cache, which calls
/// `kmem_cache_shrink()` (mm/slab_common.c): under generic KASAN that
/// first takes the cache's objects out of the quarantine
/// (`kasan_cache_shrink()` -> `kasan_quarantine_remove_cache()`,
/// mm/kasan/generic.c, quarantine.c) and frees them, then releases the
/// cache's empty slabs to the page allocator. Without it, KASAN's
/// quarantine (up to 1/32 of RAM) keeps every freed object's slab pages
/// for a while, and `SUnreclaim` grows and free pages shrink by megabytes
/// per step although nothing leaked; the kmemleak objects of freed
/// allocations go the same way after their RCU grace period. On a kernel
/// without KASAN only the empty slabs are released. Objects still
/// allocated are untouched, so a leak stays visible. Returns how many
/// caches were shrunk; caches that refuse are skipped (errors ignored:
/// the snapshot that follows tells what matters).
pub fn drain_slab() -> usize {
    let Ok(dir) = fs::read_dir(SLAB_SYSFS) else {
        return 0;
    };
    let mut n = 0;
    for e in dir.flatten() {
        // Aliases are symlinks to the real cache's directory.
        if e.file_type().map_or(true, |t| t.is_symlink()) {
            continue;
        }
        if fs::write(e.path().join("shrink"), "1").is_ok() {
            n += 1;
        }
    }
    n
}

/// [`drain_slab`] for one cache, by its name in /proc/slabinfo (a
/// directory or an alias symlink in [`SLAB_SYSFS`]); false if refused.
pub fn shrink_cache(name: &str) -> bool {
    !name.contains('/') && fs::write(Path::new(SLAB_SYSFS).join(name).join("shrink"), "1").is_ok()
}

/// Parses /proc/slabinfo (version 2.1) into cache -> (active objects,
/// objects).
pub fn parse_slabinfo(s: &str) -> BTreeMap<String, (u64, u64)> {
    s.lines()
        .filter(|l| !l.starts_with("slabinfo") && !l.starts_with('#'))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let name = f.next()?;
            let active = f.next()?.parse().ok()?;
            let num = f.next()?.parse().ok()?;
            Some((name.to_string(), (active, num)))
        })
        .collect()
}

/// Parses /proc/zoneinfo into node -> (free pages, pages on per-CPU lists).
pub fn parse_zoneinfo(s: &str) -> Result<BTreeMap<u32, (u64, u64)>> {
    let mut m: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    let mut node: Option<u32> = None;
    for l in s.lines() {
        let t = l.trim();
        if let Some(rest) = t.strip_prefix("Node ") {
            let n = rest
                .split(',')
                .next()
                .and_then(|x| x.trim().parse().ok())
                .with_context(|| format!("bad zoneinfo header {t:?}"))?;
            node = Some(n);
            m.entry(n).or_default();
        } else if let Some(rest) = t.strip_prefix("pages free") {
            let n = node.context("zoneinfo: `pages free` before a Node line")?;
            let v: u64 = rest
                .trim()
                .parse()
                .with_context(|| format!("bad zoneinfo line {t:?}"))?;
            m.get_mut(&n).expect("entry made at header").0 += v;
        } else if let Some(rest) = t.strip_prefix("count:") {
            let n = node.context("zoneinfo: `count:` before a Node line")?;
            let v: u64 = rest
                .trim()
                .parse()
                .with_context(|| format!("bad zoneinfo line {t:?}"))?;
            m.get_mut(&n).expect("entry made at header").1 += v;
        }
    }
    Ok(m)
}

/// A `Key:   123 kB` field of a meminfo file (`Node N Key:` lines too).
pub fn meminfo_kb(s: &str, key: &str) -> Option<u64> {
    s.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        let k = k.split_whitespace().last()?;
        if k != key {
            return None;
        }
        v.split_whitespace().next()?.parse().ok()
    })
}

impl MemSnapshot {
    pub fn take() -> Result<MemSnapshot> {
        // tierkit's own background work first: a refill under way holds a
        // GiB outside every count.
        crate::abi::pool::quiet().map_err(anyhow::Error::msg)?;
        crate::linux::vma::fold_vmstat();
        let zi = fs::read_to_string("/proc/zoneinfo").context("reading /proc/zoneinfo")?;
        let zones = parse_zoneinfo(&zi)?;
        let mut snap = MemSnapshot::default();
        for (&n, &(free, pcp)) in &zones {
            snap.free_pages.insert(n, free + pcp);
            let p = format!("{}/node{n}/meminfo", crate::topology::node::NODE_SYSFS);
            if let Some(kb) = fs::read_to_string(&p)
                .ok()
                .and_then(|s| meminfo_kb(&s, "MemFree"))
            {
                snap.memfree_kb.insert(n, kb);
            }
        }
        let mi = fs::read_to_string("/proc/meminfo").context("reading /proc/meminfo")?;
        snap.slab_kb = meminfo_kb(&mi, "Slab").context("no Slab: in /proc/meminfo")?;
        snap.sunreclaim_kb =
            meminfo_kb(&mi, "SUnreclaim").context("no SUnreclaim: in /proc/meminfo")?;
        snap.slab_objs = fs::read_to_string("/proc/slabinfo")
            .map(|s| parse_slabinfo(&s))
            .unwrap_or_default();
        Ok(snap)
    }

    /// What is lower in `after` than in `self` beyond the tolerances:
    /// free pages per node more than `free_tol_pages` lower, `SUnreclaim`
    /// more than `slab_tol_kb` higher. Empty if nothing.
    pub fn losses(
        &self,
        after: &MemSnapshot,
        free_tol_pages: u64,
        slab_tol_kb: u64,
    ) -> Vec<String> {
        let mut v = Vec::new();
        for (&n, &before) in &self.free_pages {
            let now = after.free_pages.get(&n).copied().unwrap_or(0);
            if now + free_tol_pages < before {
                v.push(format!(
                    "node {n}: {} free pages fewer ({before} -> {now}, tolerance {free_tol_pages})",
                    before - now
                ));
            }
        }
        if after.sunreclaim_kb > self.sunreclaim_kb + slab_tol_kb {
            v.push(format!(
                "SUnreclaim grew by {} kB ({} -> {} kB, tolerance {slab_tol_kb} kB; Slab {} -> {} kB)",
                after.sunreclaim_kb - self.sunreclaim_kb,
                self.sunreclaim_kb,
                after.sunreclaim_kb,
                self.slab_kb,
                after.slab_kb
            ));
        }
        v
    }

    /// A snapshot once it is within the tolerances of `self` (see
    /// [`MemSnapshot::losses`]), or after `max_ms`: the kernel frees some
    /// things after a grace period or from a work item (page tables of a
    /// torn-down mapping go through RCU, a module's init memory through a
    /// work item), so a shortfall is measured again before it counts.
    /// Returns the snapshot and how long it waited (ms).
    pub fn settled(
        &self,
        free_tol_pages: u64,
        slab_tol_kb: u64,
        max_ms: u64,
    ) -> Result<(MemSnapshot, u64)> {
        let t0 = std::time::Instant::now();
        let mut first = true;
        loop {
            // A plain snapshot first (cheap; more slab and fewer free pages
            // than a drained one, so it cannot hide a loss), then drained
            // ones: see [`MemSnapshot::take_drained`].
            let now = if first {
                MemSnapshot::take()?
            } else {
                // Only the caches that grew since `self`: a full drain
                // costs an SRCU grace period per cache.
                let cur = MemSnapshot::take()?;
                for c in self.grown_caches(&cur) {
                    shrink_cache(&c);
                }
                MemSnapshot::take()?
            };
            first = false;
            let waited = t0.elapsed().as_millis() as u64;
            if self.losses(&now, free_tol_pages, slab_tol_kb).is_empty() || waited >= max_ms {
                return Ok((now, waited));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// A snapshot after [`drain_slab`]: objects already freed but still
    /// held by KASAN's quarantine, and empty slabs, given back first. Use
    /// it for a baseline that later drained snapshots are compared with
    /// (an undrained baseline would count the quarantine's contents as
    /// slack and could hide a leak of up to that size).
    pub fn take_drained() -> Result<MemSnapshot> {
        drain_slab();
        MemSnapshot::take()
    }

    /// A snapshot after shrinking the caches that grew since `drained`
    /// (itself from [`MemSnapshot::take_drained`]): what KASAN's
    /// quarantine took since then is given back, at the cost of a few
    /// caches rather than all of them (each costs an SRCU grace period).
    pub fn take_drained_since(drained: &MemSnapshot) -> Result<MemSnapshot> {
        let cur = MemSnapshot::take()?;
        for c in drained.grown_caches(&cur) {
            shrink_cache(&c);
        }
        MemSnapshot::take()
    }

    /// The caches with more active objects or more objects in `after`
    /// than in `self` (all of them if either has no slabinfo).
    pub fn grown_caches(&self, after: &MemSnapshot) -> Vec<String> {
        after
            .slab_objs
            .iter()
            .filter(|(c, &(a, n))| {
                self.slab_objs
                    .get(*c)
                    .is_none_or(|&(a0, n0)| a > a0 || n > n0)
            })
            .map(|(c, _)| c.clone())
            .collect()
    }

    /// Largest drop of free pages over the nodes (negative: every node
    /// gained), and the growth of SUnreclaim in kB.
    pub fn drift(&self, after: &MemSnapshot) -> (i64, i64) {
        let free = self
            .free_pages
            .iter()
            .map(|(n, &b)| b as i64 - after.free_pages.get(n).copied().unwrap_or(0) as i64)
            .max()
            .unwrap_or(0);
        (free, after.sunreclaim_kb as i64 - self.sunreclaim_kb as i64)
    }

    /// `node0 1234567 node1 765432 pages free, SUnreclaim 12345 kB`.
    pub fn describe(&self) -> String {
        let nodes: Vec<String> = self
            .free_pages
            .iter()
            .map(|(n, p)| format!("node{n} {p}"))
            .collect();
        format!(
            "{} pages free, Slab {} kB, SUnreclaim {} kB",
            nodes.join(" "),
            self.slab_kb,
            self.sunreclaim_kb
        )
    }
}

// ---------------------------------------------------------------------------
// tierkit's own counters
// ---------------------------------------------------------------------------

/// tierkit's limits file (Documentation/ABI/testing/debugfs-tierkit).
pub const LIMITS_PATH: &str = "/sys/kernel/debug/tierkit/limits";

/// What tierkit holds for open files, as comparable text keys: from
/// `stats`, every column but `allocated` (which only grows) per node
/// (`node0 held`, `node0 gigantic`, ...), and from `limits` (where the
/// module has it) `held_pages`.
pub fn parse_holdings(stats: &str, limits: Option<&str>) -> Result<BTreeMap<String, u64>> {
    let mut m = BTreeMap::new();
    let mut lines = stats.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines
        .next()
        .context("empty stats")?
        .split_whitespace()
        .collect();
    anyhow::ensure!(header.first() == Some(&"node"), "stats header {header:?}");
    for l in lines {
        let f: Vec<&str> = l.split_whitespace().collect();
        anyhow::ensure!(
            f.len() == header.len(),
            "stats line {l:?} for header {header:?}"
        );
        for (k, v) in header.iter().zip(&f).skip(1) {
            if *k != "allocated" {
                m.insert(
                    format!("node{} {k}", f[0]),
                    v.parse().with_context(|| format!("stats value {v:?}"))?,
                );
            }
        }
    }
    if let Some(l) = limits {
        for line in l.lines() {
            if let Some(v) = line.strip_prefix("held_pages") {
                m.insert(
                    "held_pages".into(),
                    v.trim()
                        .parse()
                        .with_context(|| format!("limits line {line:?}"))?,
                );
            }
        }
    }
    Ok(m)
}

/// [`parse_holdings`] of the live files.
pub fn holdings() -> Result<BTreeMap<String, u64>> {
    crate::linux::kernel::ensure_debugfs();
    let s = fs::read_to_string(crate::abi::tk::STATS_PATH)
        .with_context(|| format!("reading {}", crate::abi::tk::STATS_PATH))?;
    let l = fs::read_to_string(LIMITS_PATH).ok();
    parse_holdings(&s, l.as_deref())
}

/// The keys whose values differ, `key a -> b`.
pub fn holdings_diff(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> Vec<String> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| format!("{k} {:?} -> {:?}", a.get(k), b.get(k)))
        .collect()
}
