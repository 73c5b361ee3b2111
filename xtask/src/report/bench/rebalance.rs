//! The rebalance section of `cargo xtask bench`'s report: the rows of
//! `tk-bench-rebalance` (a running triad's working set moved from the HMAT
//! weights to the measured ones), one per topology, in `report.json`'s
//! `rows` (workload `rebalance`, with `moved`, `minimum`, `before`,
//! `during`, `after`, `fresh`, ...) and as a table in `report.md`.

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

/// The markdown table of `rows` (empty when there are none).
pub fn markdown(rows: &[Value]) -> String {
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
        assert_eq!(markdown(&[]), "");
    }
}
