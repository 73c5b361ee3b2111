//! The pure parts of the pre-cleared gigantic pool
//! (`/sys/kernel/debug/tierkit/gigantic/pool`, `module/src/clear/ready.rs`):
//! parsing a write, the per-node bound, and which node the refill thread
//! fills next. There is no upstream counterpart: pre-zeroing huge pages was
//! proposed in 2026 and not merged.

/// Why a write to the `pool` file was refused (`EINVAL` in the kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolLineError {
    /// Not two unsigned decimal fields `NID COUNT`, or a field above
    /// `u32::MAX`.
    Malformed,
    /// The write has no line with content.
    Empty,
}

fn parse_u32(s: &str) -> Result<u32, PoolLineError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(PoolLineError::Malformed);
    }
    s.parse().map_err(|_| PoolLineError::Malformed)
}

/// One line `NID COUNT`: two unsigned decimal numbers separated by ASCII
/// whitespace, with optional whitespace around them. Returns `(nid, count)`.
///
/// Errors: [`PoolLineError::Malformed`] for anything else (signs, hex,
/// a third field, an empty line, a number above `u32::MAX`).
pub fn parse_pool_line(line: &str) -> Result<(u32, u32), PoolLineError> {
    let mut it = line.split_ascii_whitespace();
    let (Some(nid), Some(count), None) = (it.next(), it.next(), it.next()) else {
        return Err(PoolLineError::Malformed);
    };
    Ok((parse_u32(nid)?, parse_u32(count)?))
}

/// Calls `apply(nid, count)` for each line of `buf` with content, in
/// order, after parsing all of them and passing all to `check`: on any
/// error `apply` is never called, so a bad write changes nothing.
///
/// Errors: [`PoolLineError::Malformed`] for a bad line (lines of only
/// whitespace are skipped), [`PoolLineError::Empty`] when no line has
/// content.
pub fn for_each_pool_line<E>(
    buf: &str,
    mut check: impl FnMut(u32, u32) -> Result<(), E>,
    mut apply: impl FnMut(u32, u32),
) -> Result<(), PoolWriteError<E>> {
    let lines = || buf.split('\n').filter(|l| !l.trim_ascii().is_empty());
    if lines().next().is_none() {
        return Err(PoolWriteError::Line(PoolLineError::Empty));
    }
    // Syntax first, then the caller's checks, then the changes.
    for l in lines() {
        parse_pool_line(l).map_err(PoolWriteError::Line)?;
    }
    for l in lines() {
        if let Ok((nid, count)) = parse_pool_line(l) {
            check(nid, count).map_err(PoolWriteError::Check)?;
        }
    }
    for l in lines() {
        if let Ok((nid, count)) = parse_pool_line(l) {
            apply(nid, count);
        }
    }
    Ok(())
}

/// The error of [`for_each_pool_line`]: a syntax error, or the caller's
/// check refusing a line (a node without memory, a count it cannot hold).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolWriteError<E> {
    Line(PoolLineError),
    Check(E),
}

/// The most ranges of `range_pages` a node whose eligible zones manage
/// `capacity_pages` may keep in its pool: what fits, less one range, so
/// that a full pool never takes a node's last GiB (at most `u32::MAX`, the
/// pool counts' type).
pub fn max_pool_count(capacity_pages: u64, range_pages: u64) -> u32 {
    if range_pages == 0 {
        return 0;
    }
    let fits = (capacity_pages / range_pages).saturating_sub(1);
    u32::try_from(fits).unwrap_or(u32::MAX)
}

/// One node's pool, as [`next_refill`] sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolNode {
    pub target: u32,
    pub ready: u32,
    /// No refill before this time (ns, the kernel's monotonic clock):
    /// after a shrink or a failed allocation.
    pub paused_until_ns: u64,
    /// The node is in N_MEMORY now.
    pub has_memory: bool,
}

/// What the refill thread does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refill {
    /// Fill one range on this node now.
    Now(usize),
    /// Nothing is due before this time (ns); sleep until then or a kick.
    At(u64),
    /// Every pool of a node with memory is full, but a node without
    /// memory now is short: sleep until a kick or a while (the node may
    /// come back online, and nothing else wakes the thread then).
    NoMemory,
    /// Every pool is full: sleep until a kick.
    Idle,
}

/// Which node to fill next at time `now_ns`: among the nodes with memory
/// whose pool is short of its target and not paused, the one with the
/// fewest ready ranges (lowest id on a tie), so pools fill evenly;
/// otherwise the earliest end of a pause; otherwise [`Refill::NoMemory`]
/// if a node without memory is short, or idle.
pub fn next_refill(nodes: &[PoolNode], now_ns: u64) -> Refill {
    let short = || {
        nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.has_memory && n.ready < n.target)
    };
    let due = short()
        .filter(|(_, n)| n.paused_until_ns <= now_ns)
        .min_by_key(|&(i, n)| (n.ready, i));
    if let Some((i, _)) = due {
        return Refill::Now(i);
    }
    match short().map(|(_, n)| n.paused_until_ns).min() {
        Some(t) => Refill::At(t),
        None if nodes.iter().any(|n| !n.has_memory && n.ready < n.target) => Refill::NoMemory,
        None => Refill::Idle,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines() {
        assert_eq!(parse_pool_line("0 1"), Ok((0, 1)));
        assert_eq!(parse_pool_line("  2\t17 "), Ok((2, 17)));
        for bad in [
            "",
            "0",
            "0 1 2",
            "-1 1",
            "0 -1",
            "0 +1",
            "0x1 1",
            "0 4294967296",
            "a b",
        ] {
            assert_eq!(
                parse_pool_line(bad),
                Err(PoolLineError::Malformed),
                "{bad:?}"
            );
        }
    }
}
