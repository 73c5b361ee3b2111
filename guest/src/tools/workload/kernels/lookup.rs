//! Lookup, XSBench-style: the cross-section data, its views and the
//! timed lookups.

use super::*;

/// Cross sections per gridpoint (total, elastic, absorption, fission,
/// nu-fission).
pub const XS: usize = 5;
/// f64 per gridpoint: the energy and the cross sections.
pub(super) const GP: usize = 1 + XS;
/// Materials; material 0 is the fuel.
pub const MATERIALS: usize = 12;
/// Share of the nuclides in each material (the fuel holds half).
pub(super) const MAT_SHARE: [f64; MATERIALS] = [
    0.5, 0.08, 0.06, 0.06, 0.4, 0.3, 0.3, 0.3, 0.3, 0.3, 0.13, 0.13,
];
/// How often each material is drawn.
pub(super) const MAT_PROB: [f64; MATERIALS] = [
    0.14, 0.05, 0.27, 0.13, 0.15, 0.07, 0.07, 0.05, 0.01, 0.02, 0.03, 0.01,
];
/// Lookups per thread that go into the verification hash.
pub const VERIFY_LOOKUPS: u64 = 256;

/// The random draws of thread `t`'s lookups start from seed
/// `LOOKUP_SEED + t` in every block.
pub const LOOKUP_SEED: u64 = 0xC0FFEE;

/// Lookups per timed chunk (see [`ChunkMins`]).
pub const LOOKUP_CHUNK: u64 = 64;

/// Problem size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XsParams {
    pub nuclides: usize,
    pub gridpoints: usize,
    pub seed: u64,
}

impl XsParams {
    /// The gridpoints per nuclide that make the working set about `bytes`
    /// (at least 16).
    pub fn for_size(bytes: usize, nuclides: usize) -> XsParams {
        let nuclides = nuclides.clamp(2, 1000);
        let per_point = GP * 8 + 8 + nuclides * 4;
        XsParams {
            nuclides,
            gridpoints: (bytes / (nuclides * per_point)).max(16),
            seed: 42,
        }
    }

    pub fn union_len(&self) -> usize {
        self.nuclides * self.gridpoints
    }

    /// Byte offsets of (gridpoints, union energies, index) in the working
    /// set, and its total size.
    pub fn layout(&self) -> (usize, usize, usize, usize) {
        let a = |x: usize| x.div_ceil(64) * 64;
        let grid = 0;
        let uni = a(self.nuclides * self.gridpoints * GP * 8);
        let idx = uni + a(self.union_len() * 8);
        let end = idx + a(self.union_len() * self.nuclides * 4);
        (grid, uni, idx, end)
    }
}

/// One material: its nuclides and their concentrations.
#[derive(Clone, Debug)]
pub struct Material {
    pub nuclides: Vec<u32>,
    pub conc: Vec<f64>,
}

/// The problem, built in ordinary (local) memory, to be copied into a
/// working set under each placement.
#[derive(Clone, Debug)]
pub struct XsData {
    pub p: XsParams,
    /// `[nuclide][gridpoint][energy, xs...]`.
    pub grid: Vec<f64>,
    /// Union energies, ascending.
    pub union: Vec<f64>,
    /// `[union point][nuclide]`: gridpoint index.
    pub index: Vec<u32>,
    pub materials: Vec<Material>,
    /// Cumulative material probabilities.
    pub cdf: [f64; MATERIALS],
}

impl XsData {
    pub fn generate(p: XsParams) -> XsData {
        let (n, g) = (p.nuclides, p.gridpoints);
        let mut rng = Rng::new(p.seed);
        let mut grid = vec![0.0f64; n * g * GP];
        let mut energies = vec![0.0f64; g];
        for nuc in 0..n {
            for e in energies.iter_mut() {
                *e = rng.next_f64();
            }
            energies.sort_by(f64::total_cmp);
            for (j, &e) in energies.iter().enumerate() {
                let at = (nuc * g + j) * GP;
                grid[at] = e;
                for x in 1..GP {
                    grid[at + x] = rng.next_f64();
                }
            }
        }
        // The unionized grid: every energy, with its nuclide, sorted.
        let mut all: Vec<(f64, u32)> = (0..n * g).map(|k| (grid[k * GP], (k / g) as u32)).collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        let union: Vec<f64> = all.iter().map(|x| x.0).collect();
        // Sweep: per nuclide, the last gridpoint at or below each union
        // energy (0 before its first one).
        let mut index = vec![0u32; union.len() * n];
        let mut cur = vec![0u32; n];
        for (u, &e) in union.iter().enumerate() {
            for nuc in 0..n {
                let mut j = cur[nuc] as usize;
                while j + 1 < g && grid[(nuc * g + j + 1) * GP] <= e {
                    j += 1;
                }
                cur[nuc] = j as u32;
                index[u * n + nuc] = j as u32;
            }
        }
        // Materials: distinct random nuclides, random concentrations.
        let mut materials = Vec::with_capacity(MATERIALS);
        for share in MAT_SHARE {
            let k = ((n as f64 * share).round() as usize).clamp(1, n);
            let mut pool: Vec<u32> = (0..n as u32).collect();
            for i in 0..k {
                let j = i + rng.below((n - i) as u64) as usize;
                pool.swap(i, j);
            }
            pool.truncate(k);
            pool.sort_unstable();
            let conc = (0..k).map(|_| rng.next_f64()).collect();
            materials.push(Material {
                nuclides: pool,
                conc,
            });
        }
        let total: f64 = MAT_PROB.iter().sum();
        let mut cdf = [0.0; MATERIALS];
        let mut acc = 0.0;
        for (i, pr) in MAT_PROB.iter().enumerate() {
            acc += pr / total;
            cdf[i] = acc;
        }
        cdf[MATERIALS - 1] = 1.0;
        XsData {
            p,
            grid,
            union,
            index,
            materials,
            cdf,
        }
    }

    /// Copies the grids into `region` (at least `layout().3` bytes).
    pub fn copy_into(&self, region: &Region) -> Result<XsView> {
        let (g, u, i, end) = self.p.layout();
        if region.len() < end {
            bail!("working set of {} bytes, need {end}", region.len());
        }
        region.write_at(g, &self.grid);
        region.write_at(u, &self.union);
        region.write_at(i, &self.index);
        let base = region.as_ptr();
        // SAFETY: offsets inside the region (checked above), aligned to 64.
        Ok(unsafe {
            XsView {
                grid: SendPtr(base.add(g)),
                union: SendPtr(base.add(u)),
                index: SendPtr(base.add(i)),
                p: self.p,
            }
        })
    }

    /// Loads from the working set per lookup, on average.
    pub fn loads_per_lookup(&self) -> f64 {
        let (r, q) = self.load_mix();
        r + q
    }

    /// Loads from the working set per lookup, on average, as `(random,
    /// streamed)`: random are the binary search's steps (counted on 4096
    /// random energies) and, per nuclide of the material (averaged over
    /// the material probabilities), its index and the first word of its
    /// two gridpoints; streamed are the other eleven words of the two
    /// adjacent gridpoints (energy and five cross sections each), which
    /// follow in the same or the next cache line.
    pub fn load_mix(&self) -> (f64, f64) {
        let nu = self.union.len();
        let mut rng = Rng::new(7);
        let samples = 4096u64;
        let mut steps = 0u64;
        for _ in 0..samples {
            let e = rng.next_f64();
            let (mut lo, mut hi) = (0usize, nu - 1);
            while hi - lo > 1 {
                steps += 1;
                let mid = (lo + hi) / 2;
                if self.union[mid] > e {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
        }
        let mut prev = 0.0;
        let mut nuclides = 0.0;
        for (m, &c) in self.cdf.iter().enumerate() {
            nuclides += (c - prev) * self.materials[m].nuclides.len() as f64;
            prev = c;
        }
        (
            steps as f64 / samples as f64 + nuclides * 2.0,
            nuclides * (2 * GP - 1) as f64,
        )
    }

    /// The loads per lookup that fall on each 4 KiB page of the working
    /// set (page `k` = bytes `k·4096 ..` of [`XsParams::layout`]), on
    /// average over the first `samples` lookups of the timed ones'
    /// sequence (thread 0's seed): the addresses [`XsView::lookup`] reads,
    /// replayed on the host copy, each word counted once (the binary
    /// search's union energies, each nuclide's index, and the twelve words
    /// of its two gridpoints). The lookup's traffic is far from uniform
    /// over the pages (the first steps of every binary search read the
    /// same few union pages), so with few pages on a slow node its share
    /// of the loads, not of the pages, is what the model needs.
    pub fn page_loads(&self, samples: u64) -> Vec<f64> {
        let (g_off, u_off, i_off, end) = self.p.layout();
        let (n, g) = (self.p.nuclides, self.p.gridpoints);
        let nu = self.union.len();
        let mut count = vec![0u64; end.div_ceil(PAGE_SIZE)];
        let mut hit = |byte: usize| {
            if let Some(c) = count.get_mut(byte / PAGE_SIZE) {
                *c += 1;
            }
        };
        let mut rng = Rng::new(LOOKUP_SEED);
        for _ in 0..samples {
            let e = rng.next_f64();
            let mat = self.pick_material(rng.next_f64());
            let (mut lo, mut hi) = (0usize, nu - 1);
            while hi - lo > 1 {
                let mid = (lo + hi) / 2;
                hit(u_off + mid * 8);
                if self.union[mid] > e {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            for &nuc in &self.materials[mat].nuclides {
                let nuc = nuc as usize;
                hit(i_off + (lo * n + nuc) * 4);
                let j = (self.index[lo * n + nuc] as usize).min(g - 2);
                for w in 0..2 * GP {
                    hit(g_off + ((nuc * g + j) * GP + w) * 8);
                }
            }
        }
        count
            .into_iter()
            .map(|c| c as f64 / samples.max(1) as f64)
            .collect()
    }

    /// The material for a uniform draw `x` in [0, 1).
    pub fn pick_material(&self, x: f64) -> usize {
        self.cdf
            .iter()
            .position(|&c| x < c)
            .unwrap_or(MATERIALS - 1)
    }
}

/// The grids inside a working set.
#[derive(Clone, Copy, Debug)]
pub struct XsView {
    pub(super) grid: SendPtr,
    pub(super) union: SendPtr,
    pub(super) index: SendPtr,
    pub(super) p: XsParams,
}

impl XsView {
    /// One lookup: macroscopic cross sections of material `mat` at energy
    /// `e`.
    ///
    /// # Safety
    /// The region the view was made from must still be mapped.
    #[inline]
    pub unsafe fn lookup(&self, d: &XsData, e: f64, mat: usize) -> [f64; XS] {
        let (n, g) = (self.p.nuclides, self.p.gridpoints);
        let nu = self.p.union_len();
        let union = self.union.ptr() as *const f64;
        let index = self.index.ptr() as *const u32;
        let grid = self.grid.ptr() as *const f64;
        // Binary search: the last union point at or below e (0 below all).
        let (mut lo, mut hi) = (0usize, nu - 1);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            // SAFETY: mid < nu.
            if unsafe { *union.add(mid) } > e {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        let mut macro_xs = [0.0f64; XS];
        let m = &d.materials[mat];
        for (k, &nuc) in m.nuclides.iter().enumerate() {
            let nuc = nuc as usize;
            // SAFETY: lo < nu, nuc < n: inside the index grid.
            let j = (unsafe { *index.add(lo * n + nuc) } as usize).min(g - 2);
            // SAFETY: j + 1 < g: both gridpoints inside the nuclide's grid.
            let (a, b) = unsafe {
                let a = grid.add((nuc * g + j) * GP);
                (
                    std::slice::from_raw_parts(a, GP),
                    std::slice::from_raw_parts(a.add(GP), GP),
                )
            };
            let span = b[0] - a[0];
            let f = if span > 0.0 { (b[0] - e) / span } else { 0.0 };
            let c = m.conc[k];
            for x in 0..XS {
                macro_xs[x] += c * (b[x + 1] - f * (b[x + 1] - a[x + 1]));
            }
        }
        macro_xs
    }
}

/// The result of [`run_lookups`].
#[derive(Clone, Debug, PartialEq)]
pub struct LookupResult {
    pub lookups: u64,
    pub ns: u64,
    pub per_s: f64,
    /// Hash of the first [`VERIFY_LOOKUPS`] lookups of each thread.
    pub verify: u64,
    /// Per thread, the time of each [`LOOKUP_CHUNK`] lookups, ns (every
    /// block draws the same lookups in the same order: see [`ChunkMins`]).
    pub chunks: Vec<Vec<u64>>,
}

/// Lookups/s from per-thread [`ChunkMins`] of [`LookupResult::chunks`]:
/// the threads' rates summed (0 when nothing was timed).
pub fn lookup_rate(mins: &[ChunkMins]) -> f64 {
    mins.iter()
        .filter(|m| !m.is_empty())
        .map(|m| (m.len() as u64 * LOOKUP_CHUNK) as f64 * 1e9 / m.total_ns() as f64)
        .sum()
}

/// Lookups on `threads` threads pinned to `cpus` for `duration` seconds
/// (each thread does at least [`VERIFY_LOOKUPS`]). The caller warms up
/// (a first, short call).
pub fn run_lookups(
    d: &XsData,
    v: &XsView,
    cpus: &[u32],
    threads: usize,
    duration: f64,
) -> LookupResult {
    let span = v.grid;
    let len = v.p.layout().3;
    let run = |dur: f64| {
        run_threads_settled(cpus, threads, span, len, |t| {
            let mut rng = Rng::new(LOOKUP_SEED + t as u64);
            let deadline = monotonic_ns() + (dur * 1e9) as u64;
            let mut n = 0u64;
            let mut h = 0u64;
            let mut chunks = Vec::new();
            let mut t0 = monotonic_ns();
            loop {
                for _ in 0..LOOKUP_CHUNK {
                    let e = rng.next_f64();
                    let mat = d.pick_material(rng.next_f64());
                    // SAFETY: the region outlives the threads.
                    let xs = unsafe { v.lookup(d, e, mat) };
                    if n < VERIFY_LOOKUPS {
                        let mut best = 0;
                        for x in 1..XS {
                            if xs[x] > xs[best] {
                                best = x;
                            }
                        }
                        h = h.wrapping_mul(31).wrapping_add(best as u64 + 1);
                    } else {
                        std::hint::black_box(xs);
                    }
                    n += 1;
                }
                let t1 = monotonic_ns();
                chunks.push(t1 - t0);
                t0 = t1;
                if n >= VERIFY_LOOKUPS && t1 >= deadline {
                    break;
                }
            }
            (n, h, chunks)
        })
    };
    let (ns, res) = run(duration);
    let lookups: u64 = res.iter().map(|r| r.0).sum();
    let verify = res
        .iter()
        .fold(0u64, |a, r| a.wrapping_mul(1_000_003).wrapping_add(r.1));
    LookupResult {
        lookups,
        ns,
        per_s: lookups as f64 * 1e9 / ns as f64,
        verify,
        chunks: res.into_iter().map(|r| r.2).collect(),
    }
}
