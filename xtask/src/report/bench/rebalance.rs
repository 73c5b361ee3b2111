//! The rebalance section of `cargo xtask bench`'s report: the rows of
//! `tk-bench-rebalance` (a running triad's working set moved from the HMAT
//! weights to the measured ones), one per topology, in `report.json`'s
//! `rows` (workload `rebalance`, with `moved`, `minimum`, `before`,
//! `during`, `after`, `fresh`, ...) and as a table in `report.md`; and
//! the move speed measured beside it, one row per method (workload `move`:
//! tierkit's `TK_IOC_REBALANCE` and the kernel's `move_pages(2)` moving the
//! same number of pages between the same nodes, in us per page, with the
//! ratio), as a second table; and the target-share comparison (workload
//! `share`: tierkit's `TK_IOC_REBALANCE` and DAMON's paired push/pull
//! `migrate_hot` schemes with `node_eligible_mem_bp` goals taking working
//! sets of one size from one DRAM:CXL split to another: moves against the
//! minimum, the kernel's own count of bytes moved, the time until the
//! split is within 1% of the target, the final split, the pages moved
//! twice and the sweep's rate before, during and after), as a third, with
//! DAMON's figures over tierkit's.

use serde_json::Value;
use std::fmt::Write as _;

/// The rows of a `tk-bench-rebalance` record, labelled with `topology`.
pub fn rows_of(record: &Value, topology: &str) -> Vec<Value> {
    let mut rows: Vec<Value> = record
        .get("rows")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for r in rows.iter_mut() {
        if let Some(o) = r.as_object_mut() {
            o.insert("topology".into(), Value::String(topology.into()));
        }
    }
    rows
}

fn f(r: &Value, k: &str) -> f64 {
    r.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

fn workload(r: &Value) -> &str {
    r.get("workload").and_then(Value::as_str).unwrap_or("")
}

/// The markdown tables of `rows` (empty when there are none).
pub fn markdown(rows: &[Value]) -> String {
    let (moves, rows): (Vec<&Value>, Vec<&Value>) =
        rows.iter().partition(|r| workload(r) == "move");
    let (shares, rows): (Vec<&Value>, Vec<&Value>) =
        rows.into_iter().partition(|r| workload(r) == "share");
    let mut md = rebalance_table(&rows);
    if !moves.is_empty() {
        md.push_str(
            "### Move speed against the kernel's migration (`tk-bench-rebalance`)\n\n\
             | method | pages | node -> node | us per page (MB/s) | tierkit / move_pages(2) | runs, ms |\n\
             |---|---|---|---|---|---|\n",
        );
        for r in moves {
            let runs = r
                .get("runs_ms")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_f64)
                        .map(|v| format!("{v:.0}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            let _ = writeln!(
                md,
                "| {} | {} | {} -> {} | {:.1} ({:.0}) | {:.2} | {runs} |",
                r.get("policy").and_then(Value::as_str).unwrap_or("?"),
                r.get("pages").unwrap_or(&Value::Null),
                r.get("from").unwrap_or(&Value::Null),
                r.get("to").unwrap_or(&Value::Null),
                f(r, "measured"),
                f(r, "mbps"),
                f(r, "ratio"),
            );
        }
        md.push('\n');
    }
    md.push_str(&share_table(&shares));
    md
}

/// `a:b` of a two-element array field.
fn split(r: &Value, k: &str) -> String {
    match r.get(k).and_then(Value::as_array).map(Vec::as_slice) {
        Some([a, b]) => format!("{a}:{b}"),
        _ => "?".into(),
    }
}

/// `{:.0}` of `v`, or `-` when it is not a number (a window that did not
/// happen).
fn num0(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.0}")
    } else {
        "-".into()
    }
}

/// Seconds to within 1% of the target, or "not reached in N s"; then
/// whether the split stayed there: from when it held for the hold, or
/// that it did not by the end.
fn reached(r: &Value) -> String {
    let Some(s) = r.get("reached_s").and_then(Value::as_f64) else {
        return format!("not reached in {:.0} s", f(r, "bound_s"));
    };
    match r.get("settled_s").and_then(Value::as_f64) {
        Some(h) => format!("{s:.1} s (held {:.0} s from {h:.1} s)", f(r, "hold_s")),
        None => format!(
            "{s:.1} s (left it; not held {:.0} s by {:.0} s)",
            f(r, "hold_s"),
            f(r, "watched_s")
        ),
    }
}

/// The DRAM node's fewest and most pages once within 1%.
fn range(r: &Value) -> String {
    match r
        .get("dram_after_reached")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        Some([a, b]) => format!("{a}-{b}"),
        _ => "-".into(),
    }
}

fn share_table(rows: &[&Value]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut md = String::from(
        "### Target share: `TK_IOC_REBALANCE` against DAMON (`tk-bench-rebalance`)\n\n\
         | method | pages | DRAM:CXL pages start -> end (target) | moves / minimum | kernel's count of bytes moved | time to within 1% | DRAM pages once within 1% | pages moved twice | sweep k pages/s before / during / after |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let (moves, minimum) = (f(r, "moves"), f(r, "minimum"));
        let _ = writeln!(
            md,
            "| {} | {} | {} -> {} ({}) | {} / {} ({:.2}x) | {:.1} MiB | {} | {} | {} | {} / {} / {} |",
            r.get("policy").and_then(Value::as_str).unwrap_or("?"),
            r.get("pages").unwrap_or(&Value::Null),
            split(r, "split_start"),
            split(r, "split_end"),
            split(r, "split_target"),
            moves,
            minimum,
            moves / minimum,
            f(r, "kernel_bytes") / (1 << 20) as f64,
            reached(r),
            range(r),
            r.get("twice").unwrap_or(&Value::Null),
            num0(f(r, "before")),
            num0(f(r, "during")),
            num0(f(r, "after")),
        );
    }
    let by = |p: &str| {
        rows.iter()
            .find(|r| r.get("policy").and_then(Value::as_str) == Some(p))
    };
    if let (Some(t), Some(d)) = (by("tierkit-rebalance"), by("damon-migrate_hot")) {
        let time = match (
            d.get("reached_s").and_then(Value::as_f64),
            t.get("reached_s").and_then(Value::as_f64),
        ) {
            (Some(a), Some(b)) => format!("{:.2}x", a / b),
            (None, _) => format!("DAMON did not reach it in {:.0} s", f(d, "bound_s")),
            (_, None) => "tierkit did not reach it".into(),
        };
        let _ = writeln!(
            md,
            "\nDAMON / tierkit: moves {:.2}x, time to within 1% {time}; the sweep during / \
             before: tierkit {:.2}, DAMON {:.2}.",
            f(d, "moves") / f(t, "moves"),
            f(t, "during") / f(t, "before"),
            f(d, "during") / f(d, "before"),
        );
    }
    md.push('\n');
    md
}

fn rebalance_table(rows: &[&Value]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut md = String::from(
        "### Rebalancing a running workload (`tk-bench-rebalance`)\n\n\
         | weights | pages moved / minimum | triad MB/s before / during / after | after vs fresh (noise) | move | mbind(MPOL_MF_MOVE) moved / left off |\n\
         |---|---|---|---|---|---|\n",
    );
    for r in rows {
        let w = |k: &str| {
            r.get(k)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|p| Some(format!("{}:{}", p.get(0)?, p.get(1)?)))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default()
        };
        let (after, fresh) = (f(r, "after"), f(r, "fresh"));
        let _ = writeln!(
            md,
            "| {{{}}} -> {{{}}} | {} / {} | {:.0} / {:.0} / {:.0} | {:+.1}% ({:.1}%) | {:.1} ms, {:.0} MB/s (copy {:.0} MB/s) | {} / {} |",
            w("weights_before"),
            w("weights_after"),
            r.get("moved").unwrap_or(&Value::Null),
            r.get("minimum").unwrap_or(&Value::Null),
            f(r, "before"),
            f(r, "during"),
            after,
            (after / fresh - 1.0) * 100.0,
            f(r, "noise") * 100.0,
            f(r, "move_ms"),
            f(r, "move_mbps"),
            f(r, "copy_mbps"),
            r.get("mbind_moved").unwrap_or(&Value::Null),
            r.get("mbind_misplaced").unwrap_or(&Value::Null),
        );
    }
    md.push('\n');
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rows_are_labelled_and_tabled() {
        let rec = json!({"bin": "tk-bench-rebalance", "rows": [{
            "workload": "rebalance", "topology": "guess", "moved": 1536, "minimum": 1536,
            "before": 900.0, "during": 700.0, "after": 1000.0, "fresh": 1010.0,
            "noise": 0.02, "move_ms": 40.0, "move_mbps": 150.0, "copy_mbps": 2000.0,
            "mbind_moved": 0, "mbind_misplaced": 1536,
            "weights_before": [[0, 2], [2, 1]], "weights_after": [[0, 1], [2, 1]]}]});
        let rows = rows_of(&rec, "cxl");
        assert_eq!(rows[0]["topology"], "cxl");
        assert_eq!(rows[0]["workload"], "rebalance");
        let md = markdown(&rows);
        assert!(
            md.contains("| {0:2,2:1} -> {0:1,2:1} | 1536 / 1536 |"),
            "{md}"
        );
        assert!(md.contains("-1.0% (2.0%)"), "{md}");
        assert!(md.contains("| 0 / 1536 |"), "{md}");
        assert!(!md.contains("Move speed"), "{md}");
        assert_eq!(markdown(&[]), "");
    }

    #[test]
    fn move_rows_get_their_own_table() {
        let row = |policy: &str, us: f64| {
            json!({"workload": "move", "policy": policy, "unit": "us/page", "measured": us,
                   "pages": 16384, "from": 0, "to": 1, "mbps": 4096.0 / us, "ratio": 1.25,
                   "runs_ms": [820.4, 790.0, 801.0]})
        };
        let rec = json!({"bin": "tk-bench-rebalance", "rows": [
            row("tierkit-rebalance", 50.0), row("move_pages", 40.0)]});
        let md = markdown(&rows_of(&rec, "numa"));
        assert!(!md.contains("Rebalancing a running workload"), "{md}");
        assert!(
            md.contains(
                "| tierkit-rebalance | 16384 | 0 -> 1 | 50.0 (82) | 1.25 | 820, 790, 801 |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| move_pages | 16384 | 0 -> 1 | 40.0 (102) | 1.25 |"),
            "{md}"
        );
    }

    fn share_row(policy: &str, moves: u64, reached: Option<f64>, after: Option<f64>) -> Value {
        json!({"workload": "share", "policy": policy, "unit": "bytes",
               "measured": moves * 4096, "pages": 16384, "minimum": 5461,
               "moves": moves, "twice": if moves > 5461 { 12 } else { 0 },
               "kernel_bytes": 22_368_256u64, "reached_s": reached, "bound_s": 60.0,
               "settled_s": if moves > 5461 { None } else { reached }, "hold_s": 5.0,
               "watched_s": 60.2,
               "dram_after_reached": reached.map(|_| [5460, if moves > 5461 { 9000 } else { 5462 }]),
               "split_start": [10923, 5461], "split_end": [5470, 10914],
               "split_target": [5461, 10923], "before": 310.4, "during": 120.0,
               "after": after})
    }

    #[test]
    fn share_rows_get_their_own_table_with_damon_over_tierkit() {
        let rec = json!({"bin": "tk-bench-rebalance", "rows": [
            share_row("tierkit-rebalance", 5461, Some(2.04), Some(400.0)),
            share_row("damon-migrate_hot", 6000, None, None)]});
        let md = markdown(&rows_of(&rec, "cxl"));
        assert!(!md.contains("Rebalancing a running workload"), "{md}");
        assert!(!md.contains("Move speed"), "{md}");
        assert!(
            md.contains(
                "| tierkit-rebalance | 16384 | 10923:5461 -> 5470:10914 (5461:10923) | \
                 5461 / 5461 (1.00x) | 21.3 MiB | 2.0 s (held 5 s from 2.0 s) | 5460-5462 | 0 | \
                 310 / 120 / 400 |"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| damon-migrate_hot | 16384 | 10923:5461 -> 5470:10914 (5461:10923) | \
                 6000 / 5461 (1.10x) | 21.3 MiB | not reached in 60 s | - | 12 | 310 / 120 / - |"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "DAMON / tierkit: moves 1.10x, time to within 1% DAMON did not reach it in 60 s; \
                 the sweep during / before: tierkit 0.39, DAMON 0.39."
            ),
            "{md}"
        );
        let both = json!({"rows": [
            share_row("tierkit-rebalance", 5461, Some(2.0), Some(1.0)),
            share_row("damon-migrate_hot", 5462, Some(30.0), Some(1.0))]});
        let md = markdown(&rows_of(&both, "cxl"));
        assert!(md.contains("time to within 1% 15.00x"), "{md}");
        assert!(
            md.contains("| 30.0 s (left it; not held 5 s by 60 s) | 5460-9000 | 12 |"),
            "{md}"
        );
    }
}
