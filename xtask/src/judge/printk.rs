//! The `printk` prefix of a console line, read in one place: an optional
//! `<6>` level (as in /dev/kmsg dumps), the `[   12.345678]` time stamp
//! (CONFIG_PRINTK_TIME) and an optional `[    T1]` caller id
//! (CONFIG_PRINTK_CALLER).
//!
//! One grammar (`bracket`, `is_caller_id`, `is_stamp`) serves three
//! readings, each what its callers have always relied on:
//!
//! - [`split_seconds`] (the live console stream, the verdict's markers, the
//!   panic line of `run -- CMD`): up to two `[...]` groups at the start,
//!   each a time stamp (digits and dots) or a caller id, in either order,
//!   white space before each and one space after each allowed; the time
//!   stamp in seconds. A line without them is returned whole.
//! - [`strip_prefix`] (KTAP lines): a strict `[ seconds.micros]` time stamp
//!   anywhere in the line (after a level, or after userspace's partial
//!   line), the caller id right after it, carriage returns removed.
//! - [`micros`] (KTAP case durations): a strict time stamp at the start,
//!   after any `<...>` level, in microseconds.

/// `[inner]` at the start of `s`: the text up to the first `]`, and what
/// follows that `]`.
fn bracket(s: &str) -> Option<(&str, &str)> {
    s.strip_prefix('[')?.split_once(']')
}

/// A caller id's text: `T` (task) or `C` (CPU) and its number, as in
/// `[    T1]` with the spaces removed.
fn is_caller_id(id: &str) -> bool {
    let mut chars = id.chars();
    let digits = match chars.next() {
        Some('T' | 'C') => chars.as_str(),
        _ => return false,
    };
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A strict time stamp's text: `seconds.fraction`, both one or more digits.
fn is_stamp(stamp: &str) -> bool {
    let Some((secs, frac)) = stamp.split_once('.') else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(secs) && digits(frac)
}

/// Strips the printk prefix: `[    1.234567] ` (and a caller id `[    T1] `).
pub fn split_seconds(line: &str) -> (Option<f64>, &str) {
    let mut s = line;
    let mut ts = None;
    for _ in 0..2 {
        let Some((inner, after)) = bracket(s.trim_start()) else {
            break;
        };
        let inner = inner.trim();
        let is_ts = !inner.is_empty() && inner.chars().all(|c| c.is_ascii_digit() || c == '.');
        if !is_ts && !is_caller_id(inner) {
            break;
        }
        if is_ts && ts.is_none() {
            ts = inner.parse().ok();
        }
        s = after.strip_prefix(' ').unwrap_or(after);
    }
    (ts, s)
}

/// Remove what `printk` puts before the message on the console: an optional
/// `<6>` level (as in /dev/kmsg dumps), the `[    1.234567]` time stamp
/// (CONFIG_PRINTK_TIME), an optional `[    T1]` caller id
/// (CONFIG_PRINTK_CALLER), and the one space after them. Carriage returns
/// from the serial line go too.
///
/// A time stamp that starts later in the line is honoured as well: when
/// userspace wrote a partial line, the kernel's message follows it. (A
/// level holds no `[`, so looking for the time stamp anywhere skips it.)
pub fn strip_prefix(raw: &str) -> &str {
    let raw = raw.trim_end_matches('\r');
    let raw = raw.trim_start_matches('\r');
    let Some(mut s) = after_stamp(raw) else {
        return raw;
    };
    // Caller id: [    T1] or [    C0].
    if let Some((id, after)) = bracket(s) {
        if is_caller_id(id.trim_start_matches(' ')) {
            s = after;
        }
    }
    s.strip_prefix(' ').unwrap_or(s)
}

/// Find the first `[ seconds.micros]` time stamp and return what follows it.
fn after_stamp(s: &str) -> Option<&str> {
    s.match_indices('[').find_map(|(i, _)| {
        let (stamp, after) = bracket(&s[i..])?;
        is_stamp(stamp.trim_start_matches(' ')).then_some(after)
    })
}

/// The printk timestamp of a console line in microseconds (`[   12.345678]`,
/// after an optional `<N>` level), `None` if it has none.
pub fn micros(raw: &str) -> Option<u64> {
    let s = raw.trim_start_matches('\r');
    let s = match s.strip_prefix('<') {
        Some(rest) => rest.split_once('>').map_or(s, |(_, after)| after),
        None => s,
    };
    let (stamp, _) = bracket(s)?;
    let (secs, frac) = stamp.trim_start_matches(' ').split_once('.')?;
    let secs: u64 = secs.parse().ok()?;
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Scale the fraction to microseconds whatever its number of digits.
    let frac_us = format!("{frac:0<6}")[..6].parse::<u64>().ok()?;
    Some(secs * 1_000_000 + frac_us)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printk_prefix() {
        assert_eq!(
            split_seconds("[    1.234567] TIERKIT-DONE fails=0"),
            (Some(1.234567), "TIERKIT-DONE fails=0")
        );
        assert_eq!(split_seconds("[    1.5] [    T1] ok 1 x").1, "ok 1 x");
        assert_eq!(split_seconds("    ok 1 node0"), (None, "    ok 1 node0"));
        assert_eq!(
            split_seconds("[    2.000000]     ok 1 node0").1,
            "    ok 1 node0"
        );
        assert_eq!(split_seconds("[x] hello").1, "[x] hello");
    }

    /// Where the three readings differ, each keeps its own answer.
    #[test]
    fn readings_differ_where_their_callers_need() {
        // Caller id right after the time stamp (the kernel's own form).
        let line = "[    1.500000][    T1] ok 1 x";
        assert_eq!(split_seconds(line), (Some(1.5), "ok 1 x"));
        assert_eq!(strip_prefix(line), "ok 1 x");
        // A space between them: only split_seconds skips the caller id.
        let line = "[    1.500000] [    T1] ok 1 x";
        assert_eq!(split_seconds(line).1, "ok 1 x");
        assert_eq!(strip_prefix(line), "[    T1] ok 1 x");
        // Caller id first.
        assert_eq!(split_seconds("[    C0] [    2.5] x"), (Some(2.5), "x"));
        assert_eq!(strip_prefix("[    C0][    2.5] x"), "x");
        // A time stamp later in the line (userspace's partial line).
        let line = "partial[    3.000001] ok 2 y";
        assert_eq!(split_seconds(line), (None, line));
        assert_eq!(strip_prefix(line), "ok 2 y");
        assert_eq!(micros(line), None);
        // A level: strip_prefix and micros look past it, split_seconds does not.
        let line = "<6>[    0.500000] KTAP version 1\r";
        assert_eq!(strip_prefix(line), "KTAP version 1");
        assert_eq!(micros(line), Some(500_000));
        assert_eq!(split_seconds(line), (None, line));
        // A time stamp without a fraction is one only to split_seconds.
        assert_eq!(split_seconds("[    7] x"), (Some(7.0), "x"));
        assert_eq!(strip_prefix("[    7] x"), "[    7] x");
        assert_eq!(micros("[    7] x"), None);
        // No time stamp: strip_prefix still drops carriage returns.
        assert_eq!(strip_prefix("\rhello\r\r"), "hello");
        assert_eq!(split_seconds("\rhello\r"), (None, "\rhello\r"));
        // More than nine fraction digits are no time stamp to micros.
        assert_eq!(micros("[    1.0000000001] x"), None);
        assert_eq!(strip_prefix("[    1.0000000001] x"), "x");
    }
}
