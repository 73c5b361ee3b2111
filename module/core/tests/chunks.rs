//! Host tests of the chunk planning for gigantic clearing (`src/chunks.rs`).
//! They live here, outside `src/`, so the kernel build never sees them.
use proptest::prelude::*;
use tierkit_core::chunks::*;

#[test]
fn chunk_kib_values() {
    assert_eq!(chunk_pages_from_kib(0), Some(512));
    assert_eq!(chunk_pages_from_kib(4), Some(1));
    assert_eq!(chunk_pages_from_kib(3076), Some(769));
    assert_eq!(chunk_pages_from_kib(MAX_CHUNK_KIB), Some(8192));
    assert_eq!(chunk_pages_from_kib(MAX_CHUNK_KIB + 4), None);
    assert_eq!(chunk_pages_from_kib(6), None);
    assert_eq!(chunk_pages_from_kib(u32::MAX), None);
}

#[test]
fn zero_sizes_have_no_plan() {
    assert_eq!(ChunkPlan::new(0, 1), None);
    assert_eq!(ChunkPlan::new(1, 0), None);
}

#[test]
fn a_gigantic_page_in_3m_plus_4k_chunks() {
    // The KUnit matrix uses 3 MiB + 4 KiB chunks: 769 pages.
    let p = ChunkPlan::new(GIGANTIC_PAGES, 769).unwrap();
    assert_eq!(p.nr_chunks(), 341);
    assert_eq!(
        p.chunk(340),
        Some(Chunk {
            first_page: 340 * 769,
            nr_pages: 262_144 - 340 * 769
        })
    );
    assert_eq!(p.chunk(341), None);
    assert_eq!(p.chunk(u64::MAX), None);
}

#[test]
fn workers_never_exceed_chunks() {
    let p = ChunkPlan::new(16384, 8192).unwrap();
    assert_eq!(workers_for(&p, 8), 2);
    assert_eq!(workers_for(&p, 1), 1);
}

#[test]
fn mbps_units() {
    assert_eq!(mbps(1 << 30, 2_000_000_000), 536);
    assert_eq!(mbps(1, 0), 0);
    assert_eq!(mbps(u64::MAX, 1000), u64::MAX / 1000 * 1000);
    assert_eq!(mbps(64 << 30, 1_000_000_000), 68_719);
}

#[test]
fn auto_stops_at_max() {
    let mut a = AutoThreads::new(2);
    a.record(1, 100);
    a.record(2, 300);
    assert_eq!(a.next(), None);
    assert_eq!(a.best(), 2);
    assert_eq!(a.best_mbps(), 300);
    assert_eq!(AutoThreads::new(0).next(), Some(1));
}

#[test]
fn auto_keeps_fewest_workers_at_a_plateau() {
    let mut a = AutoThreads::new(8);
    a.record(1, 1000);
    a.record(2, 1040); // +4%: not a gain
    assert_eq!(a.next(), None);
    assert_eq!(a.best(), 1);
}

proptest! {
    /// Chunks cover `0..nr_pages` exactly once, in order, without overlap,
    /// each of `chunk_pages` except a shorter non-empty last one.
    #[test]
    fn chunks_cover_the_range_exactly_once(nr_pages in 1u64..3_000_000, chunk_pages in 1u32..20_000) {
        let p = ChunkPlan::new(nr_pages, chunk_pages).unwrap();
        let chunks: Vec<Chunk> = p.iter().collect();
        prop_assert_eq!(chunks.len() as u64, p.nr_chunks());
        let mut next = 0u64;
        for (i, c) in chunks.iter().enumerate() {
            prop_assert_eq!(c.first_page, next);
            prop_assert!(c.nr_pages > 0);
            if (i as u64) + 1 < p.nr_chunks() {
                prop_assert_eq!(c.nr_pages, chunk_pages);
            } else {
                prop_assert!(c.nr_pages <= chunk_pages);
            }
            next += c.nr_pages as u64;
        }
        prop_assert_eq!(next, nr_pages);
        prop_assert_eq!(p.chunk(p.nr_chunks()), None);
    }

    /// Against a page-by-page model: every page belongs to exactly one
    /// chunk (small ranges, so the model is cheap).
    #[test]
    fn every_page_in_exactly_one_chunk(nr_pages in 1u64..5000, chunk_pages in 1u32..700) {
        let p = ChunkPlan::new(nr_pages, chunk_pages).unwrap();
        let mut owner = vec![0u32; nr_pages as usize];
        for c in p.iter() {
            for pg in c.first_page..c.first_page + c.nr_pages as u64 {
                owner[pg as usize] += 1;
            }
        }
        prop_assert!(owner.iter().all(|&n| n == 1));
    }

    /// Claiming indices from a cursor in any interleaving (simulated by a
    /// permutation of who claims next) still clears every page once.
    #[test]
    fn cursor_claims_partition_the_range(nr_pages in 1u64..4000, chunk_pages in 1u32..600, workers in 1usize..9, seed in any::<u64>()) {
        let p = ChunkPlan::new(nr_pages, chunk_pages).unwrap();
        let mut cursor = 0u64;
        let mut cleared = vec![0u8; nr_pages as usize];
        let mut per_worker = vec![0u64; workers];
        let mut done = vec![false; workers];
        let mut x = seed | 1;
        while done.iter().any(|d| !d) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            let w = (x % workers as u64) as usize;
            if done[w] { continue; }
            let i = cursor;
            cursor += 1;
            match p.chunk(i) {
                Some(c) => {
                    for pg in c.first_page..c.first_page + c.nr_pages as u64 {
                        cleared[pg as usize] += 1;
                    }
                    per_worker[w] += c.nr_pages as u64;
                }
                None => done[w] = true,
            }
        }
        prop_assert!(cleared.iter().all(|&n| n == 1));
        prop_assert_eq!(per_worker.iter().sum::<u64>(), nr_pages);
    }

    /// The probe's choice is always a count it measured, within bounds,
    /// and it ends after at most `max` measurements.
    #[test]
    fn auto_choice_is_bounded(max in 1u32..64, bw in proptest::collection::vec(1u64..100_000, 64)) {
        let mut a = AutoThreads::new(max);
        let mut steps = 0;
        while let Some(w) = a.next() {
            prop_assert_eq!(w, steps + 1);
            a.record(w, bw[w as usize - 1]);
            steps += 1;
            prop_assert!(steps <= max);
        }
        prop_assert!(a.best() >= 1 && a.best() <= steps.max(1));
        prop_assert_eq!(a.best_mbps(), bw[a.best() as usize - 1]);
    }
}
