//! The pacing of a rebalance (`TK_IOC_REBALANCE`'s `rate_pages` and
//! `budget_pages`): when the next page may move, and whether it may move at
//! all. Pure arithmetic, host-tested; `module/src/rebalance.rs` sleeps and
//! checks signals around it.

/// What to do before moving the next page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Move it now.
    Go,
    /// Move it once the clock reads this many ns.
    WaitUntil(u64),
    /// The budget is spent: leave it (and every later page) where it is.
    Spent,
}

/// Before the next page of a walk that started at `start_ns`, has tried
/// `tried` pages (moved or not) and moved `moved`, and may try
/// `rate_pages` per second (0: no limit) and move `budget_pages` in all
/// (0: no limit), at `now_ns`. `tried` pages at `rate_pages`/s take
/// `tried / rate_pages` s, so the next may go at `start + tried * 1e9 /
/// rate`: the pace holds over the whole walk, not page by page, and a slow
/// page is not followed by a sleep.
pub fn next(
    start_ns: u64,
    now_ns: u64,
    tried: u64,
    moved: u64,
    rate_pages: u32,
    budget_pages: u64,
) -> Next {
    if budget_pages != 0 && moved >= budget_pages {
        return Next::Spent;
    }
    if rate_pages == 0 {
        return Next::Go;
    }
    // Rounded up: never a nanosecond early. u64 (no 128-bit division in
    // the kernel): a walk moves at most a file's 2^18 pages, far below the
    // saturation at 1.8e10 pages.
    let due = start_ns.saturating_add(
        tried
            .saturating_mul(1_000_000_000)
            .div_ceil(u64::from(rate_pages)),
    );
    if now_ns >= due {
        Next::Go
    } else {
        Next::WaitUntil(due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn examples() {
        assert_eq!(next(0, 0, 0, 0, 0, 0), Next::Go);
        assert_eq!(next(0, 0, 10, 10, 0, 10), Next::Spent);
        assert_eq!(next(0, 0, 9, 9, 0, 10), Next::Go);
        // The budget counts moved pages; the rate every page tried.
        assert_eq!(next(0, 0, 30, 9, 0, 10), Next::Go);
        // 200 pages/s: page 101 may go at 0.5 s.
        assert_eq!(next(0, 0, 100, 0, 200, 0), Next::WaitUntil(500_000_000));
        assert_eq!(next(0, 500_000_000, 100, 7, 200, 0), Next::Go);
        assert_eq!(next(7, 0, u64::MAX, 0, 1, 0), Next::WaitUntil(u64::MAX));
        assert_eq!(next(0, 0, 1, 1, 3, 0), Next::WaitUntil(333_333_334));
    }

    proptest! {
        /// Walking a clock that jumps to each due time moves exactly
        /// `min(budget, pages)` pages, never faster than the rate.
        #[test]
        fn the_rate_and_budget_hold(rate in 1u32..5000, budget in 0u64..500, start in 0u64..1 << 40) {
            let mut now = start;
            let mut moved = 0u64;
            for _ in 0..400 {
                match next(start, now, moved, moved, rate, budget) {
                    Next::Go => moved += 1,
                    Next::WaitUntil(t) => { prop_assert!(t > now); now = t; }
                    Next::Spent => break,
                }
                // Never more than the rate allows since the start, plus the
                // page that may go at once.
                let allowed = (u128::from(now - start) * u128::from(rate) / 1_000_000_000) as u64 + 1;
                prop_assert!(moved <= allowed, "moved {moved} by {} ns at {rate}/s", now - start);
            }
            if budget != 0 {
                prop_assert!(moved <= budget);
            }
        }
    }
}
