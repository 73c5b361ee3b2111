// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of the pool, on small ranges (2 MiB) of node 0 and without
//! the refill thread (the cases call [`GiganticPool::fill_one`] as the
//! thread would); the userspace test `tk-test-pool` checks the module's
//! 1 GiB pool, its thread, the shrinker under `drop_caches` and the fault
//! path. As in `clear/tests.rs`, each case records what it saw, frees its
//! pool, then asserts.

use super::*;

#[kunit_tests(tierkit_pool)]
mod tests {
    use super::*;
    use kernel::bindings;

    /// Pages of a test range: 2 MiB.
    const PAGES: u64 = 512;

    /// A test pool after the write `targets` and `fills` refills of node
    /// 0, and whether all of that succeeded; `None` without memory.
    fn pool(targets: &[u8], fills: usize) -> Option<(Pin<KBox<GiganticPool>>, bool)> {
        let p = KBox::pin_init(GiganticPool::new(PAGES, true), GFP_KERNEL).ok()?;
        let mut ok = p.store(targets).is_ok();
        for _ in 0..fills {
            ok &= p.fill_one(0, &never).is_ok();
        }
        Some((p, ok))
    }

    fn never() -> bool {
        false
    }

    /// What `show` prints.
    fn shown(p: &GiganticPool) -> KVec<u8> {
        let mut out = KVec::new();
        struct W<'a>(&'a mut KVec<u8>);
        impl core::fmt::Write for W<'_> {
            fn write_str(&mut self, s: &str) -> core::fmt::Result {
                self.0
                    .extend_from_slice(s.as_bytes(), GFP_KERNEL)
                    .map_err(|_| core::fmt::Error)
            }
        }
        let _ = core::fmt::write(&mut W(&mut out), format_args!("{}", Shown(p)));
        out
    }

    struct Shown<'a>(&'a GiganticPool);
    impl core::fmt::Display for Shown<'_> {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            self.0.show(f)
        }
    }

    /// Is every byte of `r` zero (`memchr_inv`)?
    fn all_zero(r: &GiganticRange) -> bool {
        // SAFETY: the range is ours and readable for `bytes()` bytes.
        unsafe { bindings::memchr_inv(r.as_ptr().cast(), 0, r.bytes() as usize).is_null() }
    }

    #[test]
    fn fills_to_target_and_take_gives_cleared_ranges() {
        let p = pool(b"0 2\n", 0);
        assert!(p.is_some());
        let Some((p, stored)) = p else { return };
        let first = p.next();
        let f1 = p.fill_one(0, &never);
        let f2 = p.fill_one(0, &never);
        let full = p.next();
        let line = shown(&p);
        let ready = p.ready(0);
        let r = p.take(0, true);
        let taken = r.as_ref().map(|r| (r.nid(), r.nr_pages(), all_zero(r)));
        let after = (p.ready(0), p.taken(), p.next());
        drop(r);
        drop(p);
        assert!(stored);
        assert_eq!(first, Refill::Now(0));
        assert_eq!((f1, f2), (Ok(()), Ok(())));
        assert_eq!(full, Refill::Idle);
        assert!(line.starts_with(b"0 2 2\n"));
        assert_eq!(ready, 2);
        // Poisoned with 0x5a before the clear: zero proves the clear.
        assert_eq!(taken, Some((0, PAGES, true)));
        assert_eq!(after, (1, 1, Refill::Now(0)));
    }

    #[test]
    fn bad_writes_change_nothing() {
        let p = pool(b"0 1", 0);
        assert!(p.is_some());
        let Some((p, ok)) = p else { return };
        let bad = [
            p.store(b""),
            p.store(b"\n \n"),
            p.store(b"x"),
            p.store(b"0"),
            p.store(b"0 1 2"),
            p.store(b"0 -1"),
            p.store(b"9999 1"),
            p.store(b"0 2\nx"),
            p.store(b"0 4294967295"),
            p.store(b"0 2\n0 4294967295"),
            p.store(b"0 \xff"),
        ];
        let line = shown(&p);
        drop(p);
        assert!(ok);
        for e in &bad[..8] {
            assert_eq!(*e, Err(EINVAL));
        }
        assert_eq!(bad[8], Err(ENOSPC));
        assert_eq!(bad[9], Err(ENOSPC));
        assert_eq!(bad[10], Err(EINVAL));
        assert!(line.starts_with(b"0 1 0\n"));
    }

    #[test]
    fn lower_target_and_shrink_give_ranges_back() {
        let p = pool(b"0 3", 3);
        assert!(p.is_some());
        let Some((p, filled)) = p else { return };
        let count = p.count(0);
        let lowered = (p.store(b"0 2"), p.ready(0));
        // The shrinker frees whole ranges covering what it asks for.
        let one = p.scan(0, 1);
        let after_one = (p.ready(0), p.shrunk());
        let paused = p.next();
        let rest = p.scan(0, 10_000);
        let empty = (p.ready(0), p.count(0), p.scan(0, 1), p.scan(999, 1));
        // A write ends the pause.
        let _ = p.store(b"0 2");
        let resumed = p.next();
        drop(p);
        assert!(filled);
        assert_eq!(count, 3 * PAGES);
        assert_eq!(lowered, (Ok(()), 2));
        assert_eq!(one, PAGES);
        assert_eq!(after_one, (1, 1));
        assert!(matches!(paused, Refill::At(t) if t > now_ns()));
        assert_eq!(rest, PAGES);
        assert_eq!(empty, (0, 0, 0, 0));
        assert_eq!(resumed, Refill::Now(0));
    }

    #[test]
    fn lowered_target_frees_the_range_being_cleared() {
        let p = pool(b"0 1", 0);
        assert!(p.is_some());
        let Some((p, stored)) = p else { return };
        // `stop` runs between clear steps: lower the target there, as a
        // write during the refill's clear does.
        let lowered = p.fill_one(0, &|| p.store(b"0 0").is_err());
        let after = (p.ready(0), p.next());
        let _ = p.store(b"0 1");
        let wanted = p.fill_one(0, &never);
        let ready = p.ready(0);
        drop(p);
        assert!(stored);
        assert_eq!(lowered, Err(EINTR));
        assert_eq!(after, (0, Refill::Idle));
        assert_eq!(wanted, Ok(()));
        assert_eq!(ready, 1);
    }

    #[test]
    fn an_offline_pauses_the_refill_and_the_range_being_filled_is_given_up() {
        let p = pool(b"0 1", 0);
        assert!(p.is_some());
        let Some((p, stored)) = p else { return };
        // `stop` runs between clear steps: an offline of node 0's memory
        // begins there, as the memory notifier's MEM_GOING_OFFLINE would.
        let given_up = p.fill_one(0, &|| {
            p.offlining(0);
            false
        });
        let after = (p.ready(0), p.next());
        // An offline with the range ready: the ready range stays (the
        // notifier's release_in() gives back those in the offlined range).
        let _ = p.store(b"0 1");
        let filled = p.fill_one(0, &never);
        p.offlining(0);
        let kept = (p.ready(0), p.next());
        drop(p);
        assert!(stored);
        assert_eq!(given_up, Err(EINTR));
        assert_eq!(after.0, 0);
        assert!(matches!(after.1, Refill::At(t) if t > now_ns()));
        assert_eq!(filled, Ok(()));
        assert_eq!(kept, (1, Refill::Idle));
    }

    #[test]
    fn offline_releases_overlapping_ranges_and_stop_frees() {
        let p = pool(b"0 2", 2);
        assert!(p.is_some());
        let Some((p, filled)) = p else { return };
        let pfns = p.ready_pfns(0);
        let none = p.release_in(0, 0);
        let one = pfns
            .first()
            .map(|&f| p.release_in(f + PAGES - 1, f + PAGES));
        let left = p.ready_pfns(0);
        let stopped = p.fill_one(0, &|| true);
        let after = p.ready(0);
        let missing = (
            p.take(1, true).is_none() || node::has_memory(1),
            p.take(999, true).is_none(),
        );
        drop(p);
        assert!(filled);
        assert_eq!(pfns.len(), 2);
        assert_eq!(none, 0);
        assert_eq!(one, Some(1));
        assert_eq!(left.len(), 1);
        assert_eq!(left.first(), pfns.get(1));
        assert_eq!(stopped, Err(EINTR));
        assert_eq!(after, 1);
        assert_eq!(missing, (true, true));
    }
}
