//! Chunk planning for parallel gigantic-page clearing.
//!
//! A range of `nr_pages` base pages is cut into chunks of `chunk_pages`
//! pages; the last chunk is shorter when `chunk_pages` does not divide the
//! range. Workers claim chunk indices from a shared atomic cursor, so the
//! plan itself is a pure function of the index: [`ChunkPlan::chunk`].
//!
//! The thread-count probe of `TK_THREADS_AUTO` ([`AutoThreads`]) is planning
//! too, and lives here so that the host can test it.
//!
//! Used by `module/src/clear/` (compiled into `tierkit.ko`) and tested on the
//! host with proptest. `core::` only, no allocation.

/// Bytes in a base page (x86_64 `PAGE_SIZE`).
pub const PAGE_BYTES: u64 = 4096;

/// Pages in one gigantic page (1 GiB / 4 KiB = 2^18).
pub const GIGANTIC_PAGES: u64 = 1 << 18;

/// Default clearing chunk when `chunk_kib` is 0: 2 MiB, one PMD.
pub const DEFAULT_CHUNK_KIB: u32 = 2048;

/// Largest clearing chunk: 32 MiB, the kernel's own
/// `PROCESS_PAGES_NON_PREEMPT_BATCH` (include/linux/mm.h). `clear_pages()`
/// does not reschedule, so a worker calls `cond_resched()` between chunks and
/// a chunk must stay short enough for a non-preemptible kernel.
pub const MAX_CHUNK_KIB: u32 = 32 * 1024;

/// The chunk size in pages for a `chunk_kib` ABI value: 0 means
/// [`DEFAULT_CHUNK_KIB`]; otherwise a multiple of 4 KiB up to
/// [`MAX_CHUNK_KIB`]. `None` for anything else.
pub const fn chunk_pages_from_kib(chunk_kib: u32) -> Option<u32> {
    let kib = if chunk_kib == 0 {
        DEFAULT_CHUNK_KIB
    } else {
        chunk_kib
    };
    if kib % 4 != 0 || kib > MAX_CHUNK_KIB {
        return None;
    }
    Some(kib / 4)
}

/// One chunk: pages `first_page .. first_page + nr_pages` of the range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Index of the chunk's first page within the range.
    pub first_page: u64,
    /// Pages in the chunk: `chunk_pages`, or fewer for the last chunk.
    pub nr_pages: u32,
}

/// How a range of `nr_pages` is split into chunks of `chunk_pages`.
///
/// # Invariants
///
/// `nr_pages > 0` and `chunk_pages > 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkPlan {
    nr_pages: u64,
    chunk_pages: u32,
}

impl ChunkPlan {
    /// A plan for `nr_pages` pages in chunks of `chunk_pages`; `None` if
    /// either is zero.
    pub const fn new(nr_pages: u64, chunk_pages: u32) -> Option<Self> {
        if nr_pages == 0 || chunk_pages == 0 {
            return None;
        }
        // INVARIANT: both are non-zero.
        Some(Self {
            nr_pages,
            chunk_pages,
        })
    }

    /// Pages in the whole range.
    pub const fn nr_pages(&self) -> u64 {
        self.nr_pages
    }

    /// Pages in every chunk but possibly the last.
    pub const fn chunk_pages(&self) -> u32 {
        self.chunk_pages
    }

    /// Number of chunks: `ceil(nr_pages / chunk_pages)`.
    pub const fn nr_chunks(&self) -> u64 {
        self.nr_pages.div_ceil(self.chunk_pages as u64)
    }

    /// Chunk `index`, or `None` once `index >= nr_chunks()` (the cursor has
    /// run past the end: the worker is done).
    pub const fn chunk(&self, index: u64) -> Option<Chunk> {
        if index >= self.nr_chunks() {
            return None;
        }
        let first_page = index * self.chunk_pages as u64;
        let left = self.nr_pages - first_page;
        let nr_pages = if left < self.chunk_pages as u64 {
            left as u32
        } else {
            self.chunk_pages
        };
        Some(Chunk {
            first_page,
            nr_pages,
        })
    }

    /// Every chunk in order.
    pub fn iter(&self) -> impl Iterator<Item = Chunk> + '_ {
        (0..self.nr_chunks()).filter_map(|i| self.chunk(i))
    }
}

/// Workers worth starting for `threads` requested on a plan: never more than
/// there are chunks, since a worker without a chunk only costs a wake-up.
pub fn workers_for(plan: &ChunkPlan, threads: u32) -> u32 {
    let chunks = plan.nr_chunks();
    if u64::from(threads) > chunks {
        chunks as u32
    } else {
        threads
    }
}

/// Bandwidth in MB/s (10^6 bytes per second) of `bytes` in `elapsed_ns`;
/// 0 for a zero time.
pub const fn mbps(bytes: u64, elapsed_ns: u64) -> u64 {
    if elapsed_ns == 0 {
        return 0;
    }
    // bytes * 1000 / ns = bytes / us = MB/s. No u128: the kernel has no
    // 128-bit division (`__udivti3`). Exact below 18 PB, then to 1000 MB/s.
    match bytes.checked_mul(1000) {
        Some(b) => b / elapsed_ns,
        None => (bytes / elapsed_ns).saturating_mul(1000),
    }
}

/// A gain counts only above this many percent: the probe of `auto` stops
/// adding workers when one more worker raises bandwidth by 5% or less.
pub const AUTO_MIN_GAIN_PCT: u64 = 5;

/// The `TK_THREADS_AUTO` probe: try 1, 2, ... workers on a probe slice and
/// stop at the first count that does not beat the best so far by more than
/// [`AUTO_MIN_GAIN_PCT`], or at `max_workers`.
///
/// ```
/// use tierkit_core::chunks::AutoThreads;
/// let mut a = AutoThreads::new(4);
/// assert_eq!(a.next(), Some(1));
/// a.record(1, 1000);
/// assert_eq!(a.next(), Some(2));
/// a.record(2, 1900);
/// a.record(3, 1950); // +2.6%: stop
/// assert_eq!(a.next(), None);
/// assert_eq!(a.best(), 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AutoThreads {
    max_workers: u32,
    tried: u32,
    best_workers: u32,
    best_mbps: u64,
    done: bool,
}

impl AutoThreads {
    /// A probe that may go up to `max_workers` (at least 1).
    pub const fn new(max_workers: u32) -> Self {
        let max_workers = if max_workers == 0 { 1 } else { max_workers };
        Self {
            max_workers,
            tried: 0,
            best_workers: 1,
            best_mbps: 0,
            done: false,
        }
    }

    /// The worker count to measure next, or `None` when the probe is over.
    pub const fn next(&self) -> Option<u32> {
        if self.done || self.tried >= self.max_workers {
            None
        } else {
            Some(self.tried + 1)
        }
    }

    /// Records the bandwidth measured with `workers` (the value [`next`]
    /// returned).
    ///
    /// [`next`]: AutoThreads::next
    pub fn record(&mut self, workers: u32, mbps: u64) {
        self.tried = workers;
        if workers <= 1 || self.best_mbps == 0 {
            if mbps >= self.best_mbps {
                self.best_workers = workers.max(1);
                self.best_mbps = mbps;
            }
            return;
        }
        // Gain in percent over the best so far, in integers.
        let threshold = self.best_mbps + self.best_mbps * AUTO_MIN_GAIN_PCT / 100;
        if mbps > threshold {
            self.best_workers = workers;
            self.best_mbps = mbps;
        } else {
            self.done = true;
        }
    }

    /// The chosen worker count: the fewest workers reaching the best
    /// bandwidth seen.
    pub const fn best(&self) -> u32 {
        self.best_workers
    }

    /// The bandwidth measured for [`best`](AutoThreads::best).
    pub const fn best_mbps(&self) -> u64 {
        self.best_mbps
    }
}
