// SPDX-License-Identifier: GPL-2.0

//! Rate-limited kernel log messages, as `pr_*_ratelimited()` with the
//! kernel's default state (`DEFAULT_RATELIMIT_INTERVAL`, 5 s, and
//! `DEFAULT_RATELIMIT_BURST`, 10): the 7.3 `kernel` crate has no such
//! macros. Every message a user can trigger again and again (a failing
//! fault, a refused offline, a refill that cannot find memory) goes
//! through one, so that no user can flood the log.

use crate::shim;
use kernel::sync::atomic::{Atomic, Relaxed};

/// Window of one burst.
const INTERVAL_NS: u64 = 5_000_000_000;
/// Messages per window.
const BURST: u32 = 10;

/// The state of one call site.
pub(crate) struct Ratelimit {
    begin_ns: Atomic<u64>,
    printed: Atomic<u32>,
    missed: Atomic<u32>,
}

impl Ratelimit {
    pub(crate) const fn new() -> Self {
        Self {
            begin_ns: Atomic::new(0),
            printed: Atomic::new(0),
            missed: Atomic::new(0),
        }
    }

    /// `Some(missed)` when this message may print (`missed`: how many
    /// were dropped since the last window began), `None` when it must be
    /// dropped.
    pub(crate) fn allow(&self) -> Option<u32> {
        // SAFETY: no precondition.
        let now = unsafe { shim::tk_ktime_get_ns() }.max(1);
        let begin = self.begin_ns.load(Relaxed);
        let mut missed = 0;
        if (begin == 0 || now.saturating_sub(begin) > INTERVAL_NS)
            && self.begin_ns.cmpxchg(begin, now, Relaxed).is_ok()
        {
            missed = self.missed.xchg(0, Relaxed);
            self.printed.store(0, Relaxed);
        }
        if self.printed.fetch_add(1, Relaxed) < BURST {
            Some(missed)
        } else {
            self.missed.fetch_add(1, Relaxed);
            None
        }
    }
}

/// `pr_warn!` / `pr_err!` / `pr_info!` at most [`BURST`] times per 5 s
/// from this call site; the first message of a later window says how many
/// were dropped.
macro_rules! ratelimited {
    ($pr:ident, $($arg:tt)*) => {{
        static RL: $crate::ratelimit::Ratelimit = $crate::ratelimit::Ratelimit::new();
        if let Some(missed) = RL.allow() {
            if missed > 0 {
                ::kernel::$pr!("{} messages suppressed\n", missed);
            }
            ::kernel::$pr!($($arg)*);
        }
    }};
}
pub(crate) use ratelimited;
