// SPDX-License-Identifier: GPL-2.0

//! `TK_IOC_REBALANCE`: moves the 4 KiB pages of a file's live mappings to
//! the nodes its policy picks for them now.
//!
//! A weight change does not move pages the kernel has placed (its weight
//! files say so), and `mbind(MPOL_MF_MOVE)` only moves pages that sit
//! outside the new nodemask. tierkit knows each page's ilx (its file page
//! offset, as `alloc_placed()` used it), so for the weights in force now
//! each page has exactly one target node, and only the pages that are not
//! on it move: the minimum. The moves are batched as an offline's are, by
//! the same walk (module/src/mapping/moves.rs: pick under the lock,
//! allocate without it, one zap per batch, then freeze, copy, swap).
//!
//! The walk is paced (`rate_pages`), bounded (`budget_pages`) and
//! interruptible: its sleeps are `TASK_INTERRUPTIBLE`, and any signal ends
//! the call before its next batch with `ERESTARTSYS` (a fatal one with
//! `EINTR`), its counters written back. A stop signal and `SIGCONT`
//! restart the call, as a handler installed with `SA_RESTART` does;
//! another handler makes it return `EINTR`. A page that cannot move is
//! counted and left where it is, so a call never fails half-way for one
//! page, and a later (or restarted) call finishes the job without moving
//! any page twice.

use crate::mapping::{Backing, RebalanceCounts};
use crate::pace::Next;
use crate::shim;
use crate::sync::{fatal_signal_pending, signal_pending};
use crate::uapi::{TkRebalance, TK_REBALANCE_F_DRY_RUN, TK_REBALANCE_F_WEIGHTS};
use kernel::prelude::*;

/// Longest single sleep of the pacing, so that a signal is seen promptly
/// even if the sleep is not woken by it.
const MAX_SLEEP_MS: u64 = 100;

/// What one call asks for, checked.
pub(crate) struct Request {
    dry_run: bool,
    rate_pages: u32,
    budget_pages: u64,
}

impl Request {
    /// The request in `r`: `EINVAL` for unknown flags.
    pub(crate) fn new(r: &TkRebalance) -> Result<Request> {
        if r.flags & !(TK_REBALANCE_F_DRY_RUN | TK_REBALANCE_F_WEIGHTS) != 0 {
            return Err(EINVAL);
        }
        Ok(Request {
            dry_run: r.flags & TK_REBALANCE_F_DRY_RUN != 0,
            rate_pages: r.rate_pages,
            budget_pages: r.budget_pages,
        })
    }
}

/// Walks `backings`, moving each misplaced page to `target(ilx)`, as
/// `req` allows. The counters are written to `out` also when the walk is
/// cut short by a signal (`ERESTARTSYS`, `EINTR` for a fatal one).
pub(crate) fn run(
    backings: &[&Backing],
    target: impl Fn(u64) -> usize,
    req: &Request,
    out: &mut TkRebalance,
) -> Result {
    // SAFETY: no precondition.
    let start = unsafe { shim::tk_ktime_get_ns() };
    let mut counts = RebalanceCounts::default();
    let mut result = Ok(());
    for b in backings {
        result = b.rebalance(&target, &mut counts, req.dry_run, |c| pace(req, start, c));
        if result.is_err() {
            break;
        }
    }
    out.looked = counts.looked;
    out.misplaced = counts.misplaced;
    out.moved = counts.moved;
    out.no_memory = counts.no_memory;
    out.busy = counts.busy;
    // SAFETY: no precondition.
    out.elapsed_ns = unsafe { shim::tk_ktime_get_ns() }.saturating_sub(start);
    result
}

/// Called before each batch of moves: how many pages may move now (0 once
/// the budget is spent: the walk then only counts; 1 at a time under a
/// rate, after sleeping as long as the rate asks for the pages tried so
/// far, `crate::pace::next`), `EINTR` on a fatal signal, or
/// `ERESTARTSYS` on any other: the walk is restartable, so it does not
/// keep a stopped, traced or freezing task waiting out its pace.
fn pace(req: &Request, start: u64, c: &RebalanceCounts) -> Result<u64> {
    loop {
        if fatal_signal_pending() {
            return Err(EINTR);
        }
        if signal_pending() {
            return Err(ERESTARTSYS);
        }
        // SAFETY: no precondition.
        let now = unsafe { shim::tk_ktime_get_ns() };
        // The rate paces every attempt (a page that stayed cost an
        // allocation or a zap too); the budget counts moved pages.
        let tried = c.moved + c.no_memory + c.busy;
        match crate::pace::next(start, now, tried, c.moved, req.rate_pages, req.budget_pages) {
            Next::Go if req.rate_pages != 0 => return Ok(1),
            Next::Go if req.budget_pages != 0 => return Ok(req.budget_pages - c.moved),
            Next::Go => return Ok(u64::MAX),
            Next::Spent => return Ok(0),
            Next::WaitUntil(due) => {
                let ms = ((due - now) / 1_000_000).clamp(1, MAX_SLEEP_MS);
                // SAFETY: process context (an ioctl), no spinlock held.
                unsafe { shim::tk_sleep_interruptible_ms(ms as u32) };
            }
        }
    }
}
