//! The bench report's per-mapping cost tables: the `tk-test-close-scale`
//! record of one topology (munmap of all and close of a file against its
//! number of one-page mappings; where the topology has a movable node, the
//! offline of a block against the mappings registered) as Markdown.

use serde_json::Value;
use std::fmt::Write;

/// The most ×4 mappings may cost (the test's assertion).
const MAX_RATIO: f64 = 5.0;
/// Times below this count as this in the ratios (the test's floor).
const FLOOR_S: f64 = 0.100;

/// The section for `rec` (a `tk-test-close-scale` record); empty without
/// rows.
pub fn markdown(rec: &Value) -> String {
    let rows: Vec<(f64, f64, f64)> = rec
        .get("rows")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| {
            Some((
                r.get("mappings")?.as_f64()?,
                r.get("munmap_s")?.as_f64()?,
                r.get("close_s")?.as_f64()?,
            ))
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut md = String::from(
        "### Per-mapping cost: munmap and close against the mapping count (`tk-test-close-scale`)\n\n\
         One file with N one-page mappings: the time to munmap them all, then to close the \
         file (its release frees every page and leaves the memory notifier's registry); \
         ×: against the previous row (times under 100 ms as 100 ms); the close, tierkit's work, \
         at most ×5 for ×4 mappings (munmap runs no tierkit code: shown, not held to it).\n\n\
         | mappings | munmap s | × | close s | × |\n|---|---|---|---|---|\n",
    );
    let mut prev: Option<(f64, f64, f64)> = None;
    for &(n, u, c) in &rows {
        let (ru, rc) = match prev {
            Some((_, pu, pc)) => (format!("{:.1}", ratio(pu, u)), mark(ratio(pc, c))),
            None => ("-".into(), "-".into()),
        };
        let _ = writeln!(md, "| {n:.0} | {u:.3} | {ru} | {c:.3} | {rc} |");
        prev = Some((n, u, c));
    }
    md.push('\n');
    md.push_str(&offline_markdown(rec));
    md
}

/// The offline table of `rec` (`offline_rows`); empty without rows.
fn offline_markdown(rec: &Value) -> String {
    let rows: Vec<(f64, f64, f64)> = rec
        .get("offline_rows")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| {
            Some((
                r.get("mappings")?.as_f64()?,
                r.get("refused_s")?.as_f64()?,
                r.get("offline_s")?.as_f64()?,
            ))
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut md = String::from(
        "### Per-mapping cost: offline against the mapping count (`tk-test-close-scale`)\n\n\
         N one-page mappings registered (pages on the node with CPUs); a ZONE_MOVABLE block \
         holds one page a pipe keeps after its file let go: its offline is EBUSY once the \
         memory notifier looked at every mapping; once the pipe is closed, the same block's \
         offline is done. Best of three; ×: against the previous row (times under 100 ms as \
         100 ms), at most ×5 for ×4 mappings.\n\n\
         | mappings | EBUSY s | × | offline s | × |\n|---|---|---|---|---|\n",
    );
    let mut prev: Option<(f64, f64)> = None;
    for &(n, b, o) in &rows {
        let (rb, ro) = match prev {
            Some((pb, po)) => (mark(ratio(pb, b)), mark(ratio(po, o))),
            None => ("-".into(), "-".into()),
        };
        let _ = writeln!(md, "| {n:.0} | {b:.3} | {rb} | {o:.3} | {ro} |");
        prev = Some((b, o));
    }
    md.push('\n');
    md
}

/// `b` against `a`, times under [`FLOOR_S`] as that.
fn ratio(a: f64, b: f64) -> f64 {
    b.max(FLOOR_S) / a.max(FLOOR_S)
}

/// A ratio, marked when it misses [`MAX_RATIO`].
fn mark(q: f64) -> String {
    if q <= MAX_RATIO {
        format!("{q:.1}")
    } else {
        format!("{q:.1} MISSED")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rows_and_ratios() {
        let rec = json!({"bin": "tk-test-close-scale", "rows": [
            {"mappings": 4096, "munmap_s": 0.010, "close_s": 0.050},
            {"mappings": 16384, "munmap_s": 0.900, "close_s": 0.880},
        ]});
        let md = markdown(&rec);
        assert!(md.contains("| 4096 | 0.010 | - | 0.050 | - |"), "{md}");
        assert!(
            md.contains("| 16384 | 0.900 | 9.0 | 0.880 | 8.8 MISSED |"),
            "{md}"
        );
        assert!(markdown(&json!({})).is_empty());
        assert!(!md.contains("offline"), "{md}");
    }

    #[test]
    fn offline_rows_and_ratios() {
        let rec = json!({"bin": "tk-test-close-scale",
        "rows": [{"mappings": 4096, "munmap_s": 0.010, "close_s": 0.050}],
        "offline_rows": [
            {"mappings": 4096, "refused_s": 0.020, "offline_s": 0.300},
            {"mappings": 16384, "refused_s": 0.600, "offline_s": 0.450},
        ]});
        let md = markdown(&rec);
        assert!(
            md.contains("| mappings | EBUSY s | × | offline s | × |"),
            "{md}"
        );
        assert!(md.contains("| 4096 | 0.020 | - | 0.300 | - |"), "{md}");
        assert!(
            md.contains("| 16384 | 0.600 | 6.0 MISSED | 0.450 | 1.5 |"),
            "{md}"
        );
    }
}
