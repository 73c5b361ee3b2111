//! The three workload kernels of `tk-workload`.
//!
//! **Lookup, XSBench-style** (written from the algorithm of Tramm et al.,
//! "XSBench - The Development and Verification of a Performance
//! Abstraction for Monte Carlo Reactor Analysis", PHYSOR 2014; no code
//! copied). N nuclides each have G energy gridpoints (sorted random
//! energies in [0, 1)) with five cross sections each. The **unionized
//! energy grid** holds all N·G energies sorted, and for every union point
//! and nuclide the index of that nuclide's gridpoint at or below the union
//! energy. A lookup draws a random energy and a random material (12
//! materials, the fuel holding half of the nuclides, drawn with fixed
//! probabilities), finds the energy in the union grid by **binary
//! search**, and for each nuclide of the material reads its index, the
//! two bracketing gridpoints, interpolates the five cross sections and
//! adds them, weighted by the nuclide's concentration, into the
//! macroscopic cross sections. Memory: N·G·48 bytes of gridpoints, N·G·8
//! of union energies and N·G·N·4 of indices, almost all of it touched at
//! random: latency-bound. Threads draw independently; lookups/s counts
//! them all. The first lookups of each thread are hashed (the index of
//! the largest macroscopic cross section), so that every placement can be
//! checked to compute the same results.
//!
//! **Bandwidth, STREAM-style**: arrays a, b, c of n doubles; copy
//! `c = a`, scale `b = s·c`, add `c = a + b`, triad `a = b + s·c`; each
//! thread its own contiguous part; MB/s counted as STREAM does (16, 16,
//! 24, 24 bytes per element); each chunk's best time over the timed
//! blocks ([`ChunkMins`]); results checked.
//!
//! **Faults, will-it-scale page_fault2-style**: each thread maps a private
//! mapping of its own shared-memory file, writes one byte per page (a
//! copy-on-write fault that allocates an anonymous page under the
//! thread's memory policy), unmaps, and again; faults/s summed over the
//! threads. And pages/s delivered to userspace: tierkit's `mmap` (every
//! page allocated at once) against the kernel faulting page by page and
//! the kernel's batched `MAP_POPULATE`.

use super::{fmt_pages, part, run_threads, run_threads_settled, Region, Rng, SendPtr};
use crate::sys::{self, monotonic_ns, Mapping, PAGE_SIZE};
use crate::tk::{Tierkit, TK_MODE_WEIGHTED_INTERLEAVE};
use anyhow::{bail, Context, Result};

// ---------------------------------------------------------------------------
// Lookup (XSBench-style)
// ---------------------------------------------------------------------------

/// Cross sections per gridpoint (total, elastic, absorption, fission,
/// nu-fission).
pub const XS: usize = 5;
/// f64 per gridpoint: the energy and the cross sections.
const GP: usize = 1 + XS;
/// Materials; material 0 is the fuel.
pub const MATERIALS: usize = 12;
/// Share of the nuclides in each material (the fuel holds half).
const MAT_SHARE: [f64; MATERIALS] = [
    0.5, 0.08, 0.06, 0.06, 0.4, 0.3, 0.3, 0.3, 0.3, 0.3, 0.13, 0.13,
];
/// How often each material is drawn.
const MAT_PROB: [f64; MATERIALS] = [
    0.14, 0.05, 0.27, 0.13, 0.15, 0.07, 0.07, 0.05, 0.01, 0.02, 0.03, 0.01,
];
/// Lookups per thread that go into the verification hash.
pub const VERIFY_LOOKUPS: u64 = 256;

/// The random draws of thread `t`'s lookups start from seed
/// `LOOKUP_SEED + t` in every block.
pub const LOOKUP_SEED: u64 = 0xC0FFEE;

/// Lookups per timed chunk (see [`ChunkMins`]).
pub const LOOKUP_CHUNK: u64 = 64;

/// The best time of each chunk of a repeated piece of work.
///
/// Every timed block of a measurement does the same work in the same
/// order (the same lookups, the same array slices, the same pointer
/// chase), timed chunk by chunk (about 0.1 to a few ms each). Interference
/// from the rest of the machine (another process on the CPU, or, for a
/// guest, the host descheduling the vCPU) only ever makes a chunk slower,
/// so the least time of each chunk over the blocks, summed, is the time
/// of the whole work with the interference removed at chunk granularity:
/// on a shared host a whole block of 0.1 s is rarely left alone, while
/// each 0.1 ms chunk is in some block. The same estimator serves every
/// policy and node, so figures stay comparable with each other and with
/// the model's inputs. A block that did less work (a deadline-bound one)
/// counts on the chunks it shares with the others.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChunkMins {
    mins: Vec<u64>,
}

impl ChunkMins {
    /// Merges one block's chunk times (ns, in order).
    pub fn add(&mut self, times: &[u64]) {
        if self.mins.is_empty() {
            self.mins = times.to_vec();
            return;
        }
        self.mins.truncate(times.len());
        for (m, &t) in self.mins.iter_mut().zip(times) {
            if t < *m {
                *m = t;
            }
        }
    }

    /// Chunks with a time.
    pub fn len(&self) -> usize {
        self.mins.len()
    }

    /// Whether no block was added.
    pub fn is_empty(&self) -> bool {
        self.mins.is_empty()
    }

    /// Σ of the best chunk times, ns (at least 1 when there are chunks).
    pub fn total_ns(&self) -> u64 {
        if self.mins.is_empty() {
            0
        } else {
            self.mins.iter().sum::<u64>().max(1)
        }
    }
}

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
    grid: SendPtr,
    union: SendPtr,
    index: SendPtr,
    p: XsParams,
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

// ---------------------------------------------------------------------------
// Bandwidth (STREAM-style)
// ---------------------------------------------------------------------------

/// The bandwidth kernels over three arrays a, b, c of n doubles: STREAM's
/// four, and the calibration's plain read and write of all three.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bw {
    /// Sum of every word of a, b and c (integer adds).
    Read,
    /// A store of a normal double to every element of a, b and c.
    Write,
    /// `c = a`.
    Copy,
    /// `b = s·c`.
    Scale,
    /// `c = a + b`.
    Add,
    /// `a = b + s·c`.
    Triad,
}

/// STREAM's scalar.
pub const SCALAR: f64 = 3.0;

impl Bw {
    /// STREAM's kernels, in the order they run.
    pub const STREAM: [Bw; 4] = [Bw::Copy, Bw::Scale, Bw::Add, Bw::Triad];
    /// Every kernel, in the calibration's order.
    pub const ALL: [Bw; 6] = [Bw::Read, Bw::Write, Bw::Copy, Bw::Scale, Bw::Add, Bw::Triad];

    pub fn name(self) -> &'static str {
        match self {
            Bw::Read => "read",
            Bw::Write => "write",
            Bw::Copy => "copy",
            Bw::Scale => "scale",
            Bw::Add => "add",
            Bw::Triad => "triad",
        }
    }

    /// Bytes counted per element, as STREAM counts them (16 for copy and
    /// scale, 24 for add and triad; read and write touch all three arrays).
    pub fn bytes_per_element(self) -> usize {
        match self {
            Bw::Copy | Bw::Scale => 16,
            _ => 24,
        }
    }

    /// The scalars after one application to `(a, b, c)` (for checking).
    pub fn apply(self, v: (f64, f64, f64), write: f64) -> (f64, f64, f64) {
        let (a, b, c) = v;
        match self {
            Bw::Read => v,
            Bw::Write => (write, write, write),
            Bw::Copy => (a, b, a),
            Bw::Scale => (a, SCALAR * c, c),
            Bw::Add => (a, b, a + b),
            Bw::Triad => (b + SCALAR * c, b, c),
        }
    }
}

/// Three arrays of `n` doubles in a region (a, b, c one after the other).
#[derive(Clone, Copy, Debug)]
pub struct Arrays {
    base: SendPtr,
    pub n: usize,
}

impl Arrays {
    /// The arrays of `region`: `n = len / 24`.
    pub fn new(region: &Region) -> Arrays {
        Arrays {
            base: SendPtr(region.as_ptr()),
            n: region.len() / 24,
        }
    }

    /// # Safety
    /// The region must still be mapped; callers write disjoint parts.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slices(&self) -> (&mut [f64], &mut [f64], &mut [f64]) {
        let p = self.base.ptr() as *mut f64;
        let n = self.n;
        // SAFETY: three disjoint thirds of a live mapping (caller's
        // contract for liveness and for disjoint writes across threads).
        unsafe {
            (
                std::slice::from_raw_parts_mut(p, n),
                std::slice::from_raw_parts_mut(p.add(n), n),
                std::slice::from_raw_parts_mut(p.add(2 * n), n),
            )
        }
    }

    /// The arrays' memory: for [`super::settle`].
    pub fn span(&self) -> (SendPtr, usize) {
        (self.base, 24 * self.n)
    }

    /// a = 1, b = 2, c = 0 (STREAM's start), `threads` threads on `cpus`.
    pub fn init(&self, cpus: &[u32], threads: usize) -> (f64, f64, f64) {
        run_threads(cpus, threads, |t| {
            // SAFETY: thread t writes only its part.
            let (a, b, c) = unsafe { self.slices() };
            let (lo, hi) = part(self.n, threads, t);
            a[lo..hi].fill(1.0);
            b[lo..hi].fill(2.0);
            c[lo..hi].fill(0.0);
        });
        (1.0, 2.0, 0.0)
    }

    /// The value [`Bw::Write`] stores in pass `no`.
    pub fn write_value(no: u64) -> f64 {
        1.0 + (no % 7) as f64
    }

    /// One pass of `k` by thread `t` of `threads` (pass number `no`);
    /// returns something that depends on what was read.
    pub fn pass(&self, k: Bw, t: usize, threads: usize, no: u64) -> u64 {
        let (lo, hi) = part(self.n, threads, t);
        self.pass_range(k, lo, hi, no)
    }

    /// `k` over elements `lo..hi` of the arrays (pass number `no`): a
    /// pass of one thread is its part, in one piece or in chunks.
    pub fn pass_range(&self, k: Bw, lo: usize, hi: usize, no: u64) -> u64 {
        // SAFETY: the region outlives the benchmark threads; each thread
        // writes only elements inside its own part of each array.
        let (a, b, c) = unsafe { self.slices() };
        let hi = hi.min(self.n);
        let lo = lo.min(hi);
        let s = std::hint::black_box(SCALAR);
        match k {
            Bw::Read => {
                let mut acc = [0u64; 4];
                for arr in [&a[lo..hi], &b[lo..hi], &c[lo..hi]] {
                    let mut it = arr.chunks_exact(4);
                    for q in &mut it {
                        acc[0] = acc[0].wrapping_add(q[0].to_bits());
                        acc[1] = acc[1].wrapping_add(q[1].to_bits());
                        acc[2] = acc[2].wrapping_add(q[2].to_bits());
                        acc[3] = acc[3].wrapping_add(q[3].to_bits());
                    }
                    for x in it.remainder() {
                        acc[0] = acc[0].wrapping_add(x.to_bits());
                    }
                }
                return std::hint::black_box(acc.iter().fold(0, |x, &y| x.wrapping_add(y)));
            }
            Bw::Write => {
                let v = std::hint::black_box(Self::write_value(no));
                for arr in [&mut a[lo..hi], &mut b[lo..hi], &mut c[lo..hi]] {
                    for x in arr.iter_mut() {
                        *x = v;
                    }
                }
            }
            Bw::Copy => c[lo..hi].copy_from_slice(&a[lo..hi]),
            Bw::Scale => {
                for (x, &y) in b[lo..hi].iter_mut().zip(&c[lo..hi]) {
                    *x = s * y;
                }
            }
            Bw::Add => {
                for ((x, &y), &z) in c[lo..hi].iter_mut().zip(&a[lo..hi]).zip(&b[lo..hi]) {
                    *x = y + z;
                }
            }
            Bw::Triad => {
                for ((x, &y), &z) in a[lo..hi].iter_mut().zip(&b[lo..hi]).zip(&c[lo..hi]) {
                    *x = y + s * z;
                }
            }
        }
        std::hint::black_box(a.get(lo).map_or(0, |x| x.to_bits()))
    }

    /// Elements (of a sample of about 4096) that differ from `want`.
    pub fn errors(&self, want: (f64, f64, f64)) -> usize {
        // SAFETY: read only, no thread running.
        let (a, b, c) = unsafe { self.slices() };
        let step = (self.n / 4096).max(1);
        (0..self.n)
            .step_by(step)
            .filter(|&i| a[i] != want.0 || b[i] != want.1 || c[i] != want.2)
            .count()
    }
}

/// Elements per timed chunk of a bandwidth pass (256 KiB of each array).
pub const STREAM_CHUNK: usize = 32 << 10;

/// A bandwidth measurement that can be repeated in rounds: one untimed
/// pass fixes how many passes fill a block of `duration` seconds; each
/// [`Block::run`] then times one block, chunk by chunk
/// ([`STREAM_CHUNK`] elements of a thread's part), and `best` is the MB/s
/// of the chunks' best times over every pass so far ([`ChunkMins`]).
#[derive(Clone, Debug)]
pub struct Block {
    pub kernel: Bw,
    passes: u64,
    next_no: u64,
    /// MB/s (10^6 bytes/s) of a pass at the best time of each chunk.
    pub best: f64,
    /// Per thread, the best time of each chunk of its part.
    mins: Vec<ChunkMins>,
    /// MB/s of the untimed first pass (a rough estimate).
    pub warm: f64,
    /// Every block's MB/s.
    pub all: Vec<f64>,
}

impl Block {
    /// The untimed pass (which also sizes the block).
    pub fn new(arr: &Arrays, k: Bw, cpus: &[u32], threads: usize, duration: f64) -> Block {
        let (b, l) = arr.span();
        let (ns, _) = run_threads_settled(cpus, threads, b, l, |t| arr.pass(k, t, threads, 0));
        Block {
            kernel: k,
            passes: ((duration * 1e9 / ns as f64).round() as u64).clamp(1, 1_000_000),
            next_no: 1,
            best: 0.0,
            warm: (k.bytes_per_element() * arr.n) as f64 * 1e3 / ns as f64,
            all: Vec::new(),
            mins: Vec::new(),
        }
    }

    /// One timed block; returns its MB/s (as a whole block; `best` is
    /// updated from the chunks).
    pub fn run(&mut self, arr: &Arrays, cpus: &[u32], threads: usize) -> f64 {
        let (first, passes, k) = (self.next_no, self.passes, self.kernel);
        let (b, l) = arr.span();
        let (ns, res) = run_threads_settled(cpus, threads, b, l, |t| {
            let (lo, hi) = part(arr.n, threads, t);
            let mut mins = vec![u64::MAX; (hi - lo).div_ceil(STREAM_CHUNK)];
            let mut x = 0u64;
            for p in 0..passes {
                let mut t0 = monotonic_ns();
                for (i, m) in mins.iter_mut().enumerate() {
                    let s = lo + i * STREAM_CHUNK;
                    let e = (s + STREAM_CHUNK).min(hi);
                    x = x.wrapping_add(arr.pass_range(k, s, e, first + p));
                    let t1 = monotonic_ns();
                    *m = (*m).min(t1 - t0);
                    t0 = t1;
                }
            }
            std::hint::black_box(x);
            (hi - lo, mins)
        });
        self.next_no += passes;
        if self.mins.len() != res.len() {
            self.mins = vec![ChunkMins::default(); res.len()];
        }
        for (m, (_, times)) in self.mins.iter_mut().zip(&res) {
            m.add(times);
        }
        // Σ over threads of each thread's bytes at its best chunk times.
        let bpe = k.bytes_per_element() as f64;
        self.best = self
            .mins
            .iter()
            .zip(&res)
            .filter(|(m, _)| !m.is_empty())
            .map(|(m, (elems, _))| bpe * *elems as f64 * 1e3 / m.total_ns() as f64)
            .sum();
        let mbps = (k.bytes_per_element() * arr.n) as f64 * passes as f64 * 1e3 / ns as f64;
        self.all.push(mbps);
        mbps
    }

    /// The value the last write pass stored.
    pub fn last_write_value(&self) -> f64 {
        Arrays::write_value(self.next_no - 1)
    }
}

/// STREAM on one working set, as a sequence of rounds (see `tk-workload`):
/// the arrays, their expected scalars, and a [`Block`] per kernel.
#[derive(Debug)]
pub struct Stream {
    pub arrays: Arrays,
    pub blocks: Vec<Block>,
    want: (f64, f64, f64),
}

impl Stream {
    /// Initializes the arrays and sizes the blocks (one untimed pass of
    /// each kernel).
    pub fn new(region: &Region, cpus: &[u32], threads: usize, duration: f64) -> Stream {
        let arrays = Arrays::new(region);
        let mut want = arrays.init(cpus, threads);
        let blocks = Bw::STREAM
            .iter()
            .map(|&k| {
                let b = Block::new(&arrays, k, cpus, threads, duration);
                want = k.apply(want, 0.0);
                b
            })
            .collect();
        Stream {
            arrays,
            blocks,
            want,
        }
    }

    /// One round: timed blocks of each kernel, in STREAM's order, as many
    /// as fill `min_time` seconds per kernel (at least one; a working set
    /// on fast memory gets more samples than one on slow memory).
    pub fn round(&mut self, cpus: &[u32], threads: usize, min_time: f64) {
        for b in self.blocks.iter_mut() {
            let t0 = monotonic_ns();
            loop {
                b.run(&self.arrays, cpus, threads);
                self.want = b.kernel.apply(self.want, 0.0);
                if (monotonic_ns() - t0) as f64 >= min_time * 1e9 {
                    break;
                }
            }
        }
    }

    /// Best MB/s per kernel (copy, scale, add, triad).
    pub fn best(&self) -> [f64; 4] {
        let mut m = [0.0; 4];
        for (i, b) in self.blocks.iter().enumerate() {
            m[i] = b.best;
        }
        m
    }

    /// Sampled elements with a wrong value (0 when the results are right).
    pub fn errors(&self) -> usize {
        self.arrays.errors(self.want)
    }
}

// ---------------------------------------------------------------------------
// Faults (page_fault2-style) and pages/s delivered
// ---------------------------------------------------------------------------

/// A thread memory policy for `set_mempolicy(2)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskPolicy {
    pub mode: i32,
    pub mask: u64,
}

impl TaskPolicy {
    pub const DEFAULT: TaskPolicy = TaskPolicy {
        mode: sys::MPOL_DEFAULT,
        mask: 0,
    };

    pub fn apply(&self) -> Result<()> {
        sys::set_mempolicy(self.mode, self.mask)
            .with_context(|| format!("set_mempolicy({}, {:#x})", self.mode, self.mask))
    }
}

/// A shared-memory file of `len` bytes, every page present (written by the
/// caller's thread, under its policy).
fn filled_memfd(len: usize) -> Result<std::fs::File> {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    // SAFETY: memfd_create with a NUL-terminated name; the fd is ours.
    let fd = unsafe { libc::memfd_create(c"tk-page-fault2".as_ptr(), 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("memfd_create");
    }
    // SAFETY: a fresh fd nobody else owns.
    let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
    let page = vec![0x11u8; PAGE_SIZE];
    for _ in 0..len / PAGE_SIZE {
        f.write_all(&page).context("filling the file")?;
    }
    Ok(f)
}

/// One page_fault2 iteration: map `len` bytes of `fd` private, write a byte
/// per page, optionally query the nodes, unmap. Returns the pages.
fn fault_iteration(fd: i32, len: usize, query: bool) -> Result<(usize, Vec<(i32, usize)>)> {
    let m = Mapping::new(len, libc::MAP_PRIVATE, fd, 0).context("mmap MAP_PRIVATE")?;
    m.touch_pages();
    let nodes = if query {
        crate::per_node_counts(&m.page_nodes().unwrap_or_default())
    } else {
        Vec::new()
    };
    Ok((m.nr_pages(), nodes))
}

/// page_fault2 with `threads` threads, each under `policy`, for
/// `duration` seconds: faults/s, and where thread 0's first copy went.
pub fn page_fault2(
    cpus: &[u32],
    threads: usize,
    len: usize,
    duration: f64,
    policy: TaskPolicy,
) -> Result<(f64, Vec<(i32, usize)>)> {
    use std::os::fd::AsRawFd;
    let files: Vec<std::fs::File> = (0..threads.max(1))
        .map(|_| filled_memfd(len))
        .collect::<Result<_>>()?;
    // Untimed first iteration per thread (and the placement check).
    let (_, warm) = run_threads(cpus, threads, |t| -> Result<Vec<(i32, usize)>> {
        policy.apply()?;
        let r = fault_iteration(files[t].as_raw_fd(), len, t == 0);
        TaskPolicy::DEFAULT.apply()?;
        Ok(r?.1)
    });
    let mut nodes = Vec::new();
    for (t, r) in warm.into_iter().enumerate() {
        let n = r?;
        if t == 0 {
            nodes = n;
        }
    }
    let (ns, res) = run_threads(cpus, threads, |t| -> Result<u64> {
        let fd = files[t].as_raw_fd();
        policy.apply()?;
        let deadline = monotonic_ns() + (duration * 1e9) as u64;
        let mut faults = 0u64;
        loop {
            faults += fault_iteration(fd, len, false)?.0 as u64;
            if monotonic_ns() >= deadline {
                break;
            }
        }
        TaskPolicy::DEFAULT.apply()?;
        Ok(faults)
    });
    let mut faults = 0u64;
    for r in res {
        faults += r?;
    }
    Ok((faults as f64 * 1e9 / ns as f64, nodes))
}

/// How pages reach userspace, for the pages/s comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// `mmap` of `/dev/tierkit` (weighted interleave, tierkit's weights):
    /// every page allocated, zeroed and mapped during the call.
    TierkitMmap,
    /// Anonymous private mapping, `mbind(MPOL_WEIGHTED_INTERLEAVE)`, one
    /// fault per page.
    KernelFault,
    /// Anonymous private mapping with `MAP_POPULATE` under the thread's
    /// `MPOL_WEIGHTED_INTERLEAVE`: the kernel's batched path.
    KernelPopulate,
}

impl Delivery {
    pub const ALL: [Delivery; 3] = [
        Delivery::TierkitMmap,
        Delivery::KernelFault,
        Delivery::KernelPopulate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Delivery::TierkitMmap => "tierkit-mmap",
            Delivery::KernelFault => "page-by-page",
            Delivery::KernelPopulate => "map-populate",
        }
    }
}

/// One timed delivery of `pages` pages over `mask`: from `mmap` until one
/// byte of every page is written (`munmap` and freeing not timed).
/// Returns `(ns, pages per node)`.
pub fn deliver(
    d: Delivery,
    pages: usize,
    mask: u64,
    query: bool,
) -> Result<(u64, Vec<(i32, usize)>)> {
    let len = pages * PAGE_SIZE;
    let q = |m: &Mapping| -> Vec<(i32, usize)> {
        if query {
            crate::per_node_counts(&m.page_nodes().unwrap_or_default())
        } else {
            Vec::new()
        }
    };
    match d {
        Delivery::TierkitMmap => {
            let t = Tierkit::open().context("open /dev/tierkit")?;
            t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, mask)
                .context("TK_IOC_SET_POLICY")?;
            let t0 = monotonic_ns();
            let m = t.map(pages, 0).context("mmap /dev/tierkit")?;
            m.touch_pages();
            let ns = monotonic_ns() - t0;
            Ok((ns, q(&m)))
        }
        Delivery::KernelFault => {
            let t0 = monotonic_ns();
            let m = Mapping::anon(len).context("mmap")?;
            m.no_huge().context("MADV_NOHUGEPAGE")?;
            m.mbind(sys::MPOL_WEIGHTED_INTERLEAVE, mask, 0)
                .context("mbind")?;
            m.touch_pages();
            let ns = monotonic_ns() - t0;
            Ok((ns, q(&m)))
        }
        Delivery::KernelPopulate => {
            let pol = TaskPolicy {
                mode: sys::MPOL_WEIGHTED_INTERLEAVE,
                mask,
            };
            pol.apply()?;
            let t0 = monotonic_ns();
            let m = Mapping::new(
                len,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            );
            let r = m.map(|m| {
                m.touch_pages();
                (monotonic_ns() - t0, m)
            });
            TaskPolicy::DEFAULT.apply()?;
            let (ns, m) = r.context("mmap MAP_POPULATE")?;
            Ok((ns, q(&m)))
        }
    }
}

/// `0:768 1:256`, or `?` when unknown.
pub fn fmt_nodes(p: &[(i32, usize)]) -> String {
    if p.is_empty() {
        "?".into()
    } else {
        fmt_pages(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Placement;

    fn small() -> XsData {
        XsData::generate(XsParams {
            nuclides: 6,
            gridpoints: 50,
            seed: 3,
        })
    }

    #[test]
    fn union_grid_indices_bracket_every_energy() {
        let d = small();
        let (n, g) = (d.p.nuclides, d.p.gridpoints);
        assert_eq!(d.union.len(), n * g);
        assert!(d.union.windows(2).all(|w| w[0] <= w[1]));
        for (u, &e) in d.union.iter().enumerate() {
            for nuc in 0..n {
                let j = d.index[u * n + nuc] as usize;
                let ej = d.grid[(nuc * g + j) * GP];
                // The gridpoint is at or below e, unless e is below the
                // nuclide's first; the next one is above e.
                assert!(ej <= e || j == 0, "u {u} nuc {nuc}");
                if j + 1 < g {
                    assert!(d.grid[(nuc * g + j + 1) * GP] > e, "u {u} nuc {nuc}");
                }
            }
        }
        assert_eq!(d.materials.len(), MATERIALS);
        assert_eq!(d.materials[0].nuclides.len(), 3);
        assert!((d.cdf[MATERIALS - 1] - 1.0).abs() < 1e-12);
        assert_eq!(d.pick_material(0.0), 0);
        assert_eq!(d.pick_material(0.9999999), MATERIALS - 1);
    }

    /// A lookup by linear scans, straight from the definition.
    fn ref_lookup(d: &XsData, e: f64, mat: usize) -> [f64; XS] {
        let g = d.p.gridpoints;
        let m = &d.materials[mat];
        let mut out = [0.0; XS];
        for (k, &nuc) in m.nuclides.iter().enumerate() {
            let nuc = nuc as usize;
            let at = |j: usize| &d.grid[(nuc * g + j) * GP..(nuc * g + j + 1) * GP];
            let mut j = (0..g).rev().find(|&j| at(j)[0] <= e).unwrap_or(0);
            j = j.min(g - 2);
            let (a, b) = (at(j), at(j + 1));
            let f = (b[0] - e) / (b[0] - a[0]);
            for x in 0..XS {
                out[x] += m.conc[k] * (b[x + 1] - f * (b[x + 1] - a[x + 1]));
            }
        }
        out
    }

    #[test]
    fn lookups_match_the_reference() {
        let d = small();
        let r = Region::new(&Placement::Local, d.p.layout().3).unwrap();
        let v = d.copy_into(&r).unwrap();
        let mut rng = Rng::new(9);
        for _ in 0..500 {
            let e = rng.next_f64();
            let mat = d.pick_material(rng.next_f64());
            // SAFETY: r is alive.
            let got = unsafe { v.lookup(&d, e, mat) };
            let want = ref_lookup(&d, e, mat);
            for x in 0..XS {
                assert!(
                    (got[x] - want[x]).abs() <= 1e-9 * want[x].abs().max(1.0),
                    "{got:?} {want:?}"
                );
            }
        }
        let a = run_lookups(&d, &v, &[], 2, 0.02);
        let b = run_lookups(&d, &v, &[], 2, 0.01);
        let l = d.loads_per_lookup();
        let (rnd, seq) = d.load_mix();
        assert!(
            (rnd + seq - l).abs() < 1e-9 && seq > rnd * 0.5,
            "{rnd} {seq}"
        );
        // log2(300) ~ 8.2 steps, plus 13 loads per nuclide.
        assert!(l > 8.0 + 13.0 && l < 9.0 + 13.0 * 6.0, "{l}");
        assert!(a.lookups >= 2 * VERIFY_LOOKUPS && a.per_s > 0.0);
        assert_eq!(a.verify, b.verify);
        // Chunk times: every lookup of each thread is in one.
        assert_eq!(a.chunks.len(), 2);
        assert_eq!(
            a.chunks.iter().map(|c| c.len() as u64).sum::<u64>() * LOOKUP_CHUNK,
            a.lookups
        );
        let mut m = vec![ChunkMins::default(); 2];
        for res in [&a, &b] {
            for (m, c) in m.iter_mut().zip(&res.chunks) {
                m.add(c);
            }
        }
        assert!(lookup_rate(&m) >= b.per_s.min(a.per_s) * 0.99);
        // Loads per page add up to the loads per lookup (each nuclide's
        // index and twelve gridpoint words, and the search's steps).
        let pl = d.page_loads(2000);
        assert_eq!(pl.len(), d.p.layout().3.div_ceil(PAGE_SIZE));
        let (r0, s0) = d.load_mix();
        let total: f64 = pl.iter().sum();
        assert!(
            (total - (r0 + s0)).abs() < 0.05 * (r0 + s0),
            "{total} {r0} {s0}"
        );
        // Not uniform: the page of the search's first step is read by
        // every lookup.
        let (_, u_off, _, _) = d.p.layout();
        let mid_page = (u_off + (d.union.len() - 1) / 2 * 8) / PAGE_SIZE;
        assert!(pl[mid_page] >= 1.0, "{}", pl[mid_page]);
    }

    #[test]
    fn chunk_mins_take_each_chunks_best() {
        let mut m = ChunkMins::default();
        assert!(m.is_empty() && m.total_ns() == 0);
        assert_eq!(lookup_rate(&[m.clone()]), 0.0);
        m.add(&[10, 50, 30]);
        m.add(&[20, 40, 35]);
        assert_eq!((m.len(), m.total_ns()), (3, 10 + 40 + 30));
        // A shorter block counts on the common prefix only.
        m.add(&[5, 60]);
        assert_eq!((m.len(), m.total_ns()), (2, 5 + 40));
        // Two threads: rates add. 2 chunks of LOOKUP_CHUNK in 45 ns.
        let r = lookup_rate(&[m.clone(), m]);
        let one = (2 * LOOKUP_CHUNK) as f64 * 1e9 / 45.0;
        assert!((r - 2.0 * one).abs() < 1e-6 * r, "{r}");
    }

    #[test]
    fn chunked_block_is_no_slower_than_its_blocks() {
        // 3 MiB: 131072 elements per array, 4 chunks of STREAM_CHUNK.
        let r = Region::new(&Placement::Local, 3 << 20).unwrap();
        let a = Arrays::new(&r);
        let mut want = a.init(&[], 2);
        let mut b = Block::new(&a, Bw::Triad, &[], 2, 0.002);
        want = Bw::Triad.apply(want, 0.0);
        let mut whole: f64 = 0.0;
        for _ in 0..3 {
            whole = whole.max(b.run(&a, &[], 2));
            want = Bw::Triad.apply(want, 0.0);
        }
        assert_eq!(b.mins.len(), 2);
        assert!(b.mins.iter().all(|m| m.len() == 2), "{:?}", b.mins);
        assert!(b.best >= whole && b.best.is_finite(), "{} {whole}", b.best);
        // Chunked passes compute what whole passes do.
        assert_eq!(a.errors(want), 0);
    }

    #[test]
    fn sizes() {
        let p = XsParams::for_size(32 << 20, 34);
        let total = p.layout().3;
        assert!(total <= 32 << 20 && total > 30 << 20, "{total}");
        assert_eq!(XsParams::for_size(1, 34).gridpoints, 16);
    }

    #[test]
    fn stream_checks_out() {
        let r = Region::new(&Placement::Local, 3 << 20).unwrap();
        let mut s = Stream::new(&r, &[], 2, 0.005);
        assert_eq!(s.errors(), 0);
        for _ in 0..3 {
            s.round(&[], 2, 0.01);
        }
        assert_eq!(s.errors(), 0);
        assert!(s.best().iter().all(|&m| m > 0.0), "{:?}", s.best());
        // A wrong expectation is noticed.
        s.want.0 += 1.0;
        assert!(s.errors() > 0);
    }

    #[test]
    fn every_kernel_keeps_normal_values() {
        let r = Region::new(&Placement::Local, 3 * 8 * 1000).unwrap();
        let a = Arrays::new(&r);
        let mut want = a.init(&[], 1);
        for (no, k) in Bw::ALL.iter().cycle().take(30).enumerate() {
            a.pass(*k, 0, 1, no as u64);
            want = k.apply(want, Arrays::write_value(no as u64));
            assert_eq!(a.errors(want), 0, "{k:?}");
            assert!(want.0.is_normal() && want.1.is_normal());
        }
        let mut b = Block::new(&a, Bw::Read, &[], 1, 0.001);
        assert!(b.run(&a, &[], 1) > 0.0);
        assert_eq!(b.all.len(), 1);
        assert_eq!(Bw::Copy.bytes_per_element(), 16);
    }

    #[test]
    fn faults_on_the_host() {
        let (rate, nodes) = page_fault2(&[], 2, 64 * PAGE_SIZE, 0.01, TaskPolicy::DEFAULT).unwrap();
        assert!(rate > 0.0);
        if !nodes.is_empty() {
            assert_eq!(nodes.iter().map(|n| n.1).sum::<usize>(), 64);
        }
        // Weighted interleave needs Linux 6.9; an older host says EINVAL.
        if let Ok((ns, nodes)) = deliver(Delivery::KernelFault, 16, 0b1, true) {
            assert!(ns > 0);
            assert_eq!(nodes.iter().map(|n| n.1).sum::<usize>(), 16);
        }
    }
}
