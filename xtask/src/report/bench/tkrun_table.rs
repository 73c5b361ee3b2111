//! The bench report's tk-run table: the `tk-bench-run` record of one
//! topology (placement and triad throughput of numactl against tk-run,
//! time to first use of hugetlb against tk-run --gigantic) as Markdown.

use serde_json::Value;
use std::fmt::Write;

fn num(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}

fn text(v: &Value, k: &str) -> String {
    v.get(k)
        .and_then(Value::as_str)
        .unwrap_or("-")
        .replace('|', "\\|")
}

/// The section for `rec` (a `tk-bench-run` record).
pub fn markdown(rec: &Value) -> String {
    let mut md =
        String::from("### Unmodified programs: tk-run against the kernel (`tk-bench-run`)\n\n");
    let rows = |k: &str| {
        rec.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let placement = rows("placement");
    if !placement.is_empty() {
        md.push_str(
            "The triad (`tk-stream`, three malloc'd arrays) under each; pages: of its arrays, \
             where weighted interleave by address (ilx = address / 4096) puts them; \
             against numactl: tk-run's best triad over numactl's, and the noise it must be \
             within (the spread of repeats, at least 15%).\n\n\
             | run | weights | from | pages as the rule | triad MB/s | against numactl |\n\
             |---|---|---|---|---|---|\n",
        );
        for r in &placement {
            let pages = match (num(r, "agree"), num(r, "pages")) {
                (Some(a), Some(p)) => format!("{a:.0}/{p:.0}"),
                _ => text(r, "error"),
            };
            let against = match (num(r, "vs_numactl"), num(r, "noise")) {
                (Some(x), Some(n)) => format!("{x:.3} (noise {:.0}%)", n * 100.0),
                _ => "-".into(),
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} |",
                text(r, "run"),
                text(r, "weights"),
                text(r, "source"),
                pages,
                num(r, "mbps").map_or("-".into(), |m| format!("{m:.0}")),
                against
            );
        }
        md.push('\n');
    }
    let first = rows("first_use");
    if !first.is_empty() {
        md.push_str(
            "Time to first use of 1 GiB - 4 KiB malloc'd by `tk-stream -f` (tk-run: 1 GiB, the \
             least it makes a gigantic page; malloc until every 4 KiB page was written once), on \
             the DRAM node.\n\n| run | ms | note |\n|---|---|---|\n",
        );
        for r in &first {
            let _ = writeln!(
                md,
                "| {} | {} | {} |",
                text(r, "run"),
                num(r, "ms").map_or_else(|| text(r, "error"), |m| format!("{m:.1}")),
                text(r, "note")
            );
        }
        md.push('\n');
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn table() {
        let rec = json!({
            "placement": [
                {"run": "numactl", "weights": "0:3,1:1", "source": "kernel auto (HMAT)", "agree": 6144, "pages": 6144, "mbps": 812.4},
                {"run": "tk-run", "weights": "0:3,1:1", "source": "kernel auto (HMAT)", "agree": 6141, "pages": 6144, "mbps": 790.0, "vs_numactl": 0.9724, "noise": 0.15}
            ],
            "first_use": [{"run": "hugetlb", "ms": 1234.56}, {"run": "tk-run --gigantic", "error": "x"}]
        });
        let md = markdown(&rec);
        assert!(
            md.contains("| numactl | 0:3,1:1 | kernel auto (HMAT) | 6144/6144 | 812 | - |"),
            "{md}"
        );
        assert!(md.contains(
            "| tk-run | 0:3,1:1 | kernel auto (HMAT) | 6141/6144 | 790 | 0.972 (noise 15%) |"
        ));
        assert!(md.contains("| hugetlb | 1234.6 | - |"));
        assert!(md.contains("| tk-run --gigantic | x | - |"));
        assert_eq!(
            markdown(&json!({})),
            "### Unmodified programs: tk-run against the kernel (`tk-bench-run`)\n\n"
        );
    }
}
