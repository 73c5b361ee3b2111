//! Latency: a pointer chase through a bound buffer's cache lines in one
//! random cycle (Sattolo), ns per load.

use super::*;

/// Bytes per pointer-chase element: one cache line.
pub(super) const LINE: usize = 64;

/// Writes one random cycle through `region`'s 64-byte lines (Sattolo's
/// algorithm): the first word of each line holds the byte offset of the
/// next.
pub fn prepare_chase(region: &Region, seed: u64) {
    let lines = region.len() / LINE;
    if lines < 2 {
        return;
    }
    let mut perm: Vec<u32> = (0..lines as u32).collect();
    let mut rng = Rng::new(seed);
    for i in (1..lines).rev() {
        let j = rng.below(i as u64) as usize;
        perm.swap(i, j);
    }
    let mut next = vec![0u64; lines];
    for k in 0..lines {
        next[perm[k] as usize] = perm[(k + 1) % lines] as u64 * LINE as u64;
    }
    for (l, &nx) in next.iter().enumerate() {
        region.write_at(l * LINE, &[nx]);
    }
}

/// Follows `steps` pointers from offset 0.
pub(super) fn chase(base: SendPtr, steps: u64) -> u64 {
    chase_from(base, 0, steps)
}

/// `steps` loads of the cycle from offset `off`; returns where it ended.
pub(super) fn chase_from(base: SendPtr, mut off: u64, steps: u64) -> u64 {
    for _ in 0..steps {
        // SAFETY: every stored offset is a line start inside the region.
        off = unsafe { std::ptr::read_volatile(base.ptr().add(off as usize) as *const u64) };
    }
    off
}

/// Loads per timed chunk of a pointer chase.
pub(super) const CHASE_CHUNK: u64 = 256;

/// A latency measurement that can be repeated in rounds: every block
/// walks the same cycle from the same start, timed chunk by chunk
/// ([`CHASE_CHUNK`] loads), and `best_ns` is the time per load at each
/// chunk's best time over the blocks so far ([`ChunkMins`]).
#[derive(Clone, Debug)]
pub struct Chase {
    pub(super) steps: u64,
    pub best_ns: f64,
    pub(super) mins: ChunkMins,
}

impl Chase {
    /// Builds the cycle in `region` and sizes a block of `duration` s.
    pub fn new(region: &Region, cpu: Option<u32>, duration: f64, seed: u64) -> Chase {
        prepare_chase(region, seed);
        let base = SendPtr(region.as_ptr());
        let cpus: Vec<u32> = cpu.into_iter().collect();
        let warm = ((region.len() / LINE) as u64).clamp(1, 20_000);
        let (ns, _) = run_threads_settled(&cpus, 1, base, region.len(), |_| chase(base, warm));
        let per = ns as f64 / warm as f64;
        Chase {
            steps: ((duration * 1e9 / per) as u64)
                .clamp(1000, 100_000_000)
                .div_ceil(CHASE_CHUNK)
                * CHASE_CHUNK,
            best_ns: f64::INFINITY,
            mins: ChunkMins::default(),
        }
    }

    /// One timed block on one thread pinned to `cpu`: ns per load of the
    /// whole block (`best_ns` is updated from the chunks).
    pub fn run(&mut self, region: &Region, cpu: Option<u32>) -> f64 {
        let base = SendPtr(region.as_ptr());
        let cpus: Vec<u32> = cpu.into_iter().collect();
        let chunks = self.steps / CHASE_CHUNK;
        let (ns, res) = run_threads_settled(&cpus, 1, base, region.len(), |_| {
            let mut times = Vec::with_capacity(chunks as usize);
            let mut off = 0u64;
            let mut t0 = monotonic_ns();
            for _ in 0..chunks {
                off = chase_from(base, off, CHASE_CHUNK);
                let t1 = monotonic_ns();
                times.push(t1 - t0);
                t0 = t1;
            }
            std::hint::black_box(off);
            times
        });
        if let Some(times) = res.first() {
            self.mins.add(times);
        }
        if !self.mins.is_empty() {
            self.best_ns =
                self.mins.total_ns() as f64 / (self.mins.len() as u64 * CHASE_CHUNK) as f64;
        }
        ns as f64 / self.steps as f64
    }
}

/// Load latency (ns) by pointer chase through `region` (best of one
/// block, after sizing): for one-off measurements.
pub fn measure_latency(region: &Region, cpu: Option<u32>, duration: f64, seed: u64) -> f64 {
    let mut c = Chase::new(region, cpu, duration, seed);
    c.run(region, cpu)
}
