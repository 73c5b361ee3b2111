//! Bandwidth, STREAM-style: the four kernels, their arrays and the
//! timed blocks.

use super::*;

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
    pub(super) base: SendPtr,
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
    pub(super) unsafe fn slices(&self) -> (&mut [f64], &mut [f64], &mut [f64]) {
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
    pub(super) passes: u64,
    pub(super) next_no: u64,
    /// MB/s (10^6 bytes/s) of a pass at the best time of each chunk.
    pub best: f64,
    /// Per thread, the best time of each chunk of its part.
    pub(super) mins: Vec<ChunkMins>,
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
    pub(super) want: (f64, f64, f64),
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
