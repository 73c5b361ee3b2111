//! The rows of the benchmark report: one per topology × workload × policy
//! (fault rows also per `variant`), as `tk-workload` emits them in its
//! `TIERKIT-JSON` line under `rows` and `cargo xtask bench` collects them
//! into `target/tierkit/report/report.json`. One definition for both
//! sides: the guest's `tierkit_guest::tools::workload::rows` re-exports it, and
//! xtask's report reads it, without depending on the guest crate.

use serde::{Deserialize, Serialize};

/// The policies, by their report names.
pub const LOCAL: &str = "local";
pub const KERNEL_INTERLEAVE: &str = "kernel-interleave";
pub const KERNEL_WEIGHTED_HMAT: &str = "kernel-weighted-hmat";
pub const TIERKIT_WEIGHTED_HMAT: &str = "tierkit-weighted-hmat";
pub const TIERKIT_AUTO_MEASURED: &str = "tierkit-auto-measured";
pub const TIERKIT_OPTIMIZED: &str = "tierkit-optimized";

/// `bind:N`.
pub fn bind(n: u32) -> String {
    format!("bind:{n}")
}

/// One measurement.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// `numa`, `cxl`, ... (`cargo xtask bench` sets it from the boot;
    /// the guest guesses from the CXL bus).
    pub topology: String,
    /// `lookup`, `copy`, `scale`, `add`, `triad` or `fault`.
    pub workload: String,
    /// `local`, `bind:N`, `kernel-interleave`, `kernel-weighted-hmat`,
    /// `tierkit-weighted-hmat`, `tierkit-auto-measured`, `tierkit-optimized`.
    pub policy: String,
    /// `lookups/s`, `MB/s`, `faults/s`, `pages/s`.
    pub unit: String,
    pub measured: f64,
    /// The model's figure from the calibrated costs; `None` (null) where
    /// the model does not apply (fault rates).
    pub predicted: Option<f64>,
    /// `parallel` or `serial`.
    pub regime: String,
    /// The model's figure from `tk-calibrate`'s costs (measured before
    /// the workloads, not side by side with them), for comparison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_calibration: Option<f64>,
    /// Fault rows: `page_fault2`, `tierkit-mmap`, `page-by-page`,
    /// `map-populate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// Threads that ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// page_fault2: `(threads, faults/s)` for 1..N threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_threads: Option<Vec<(usize, f64)>>,
    /// Where the working set's pages were: `(node, pages)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pages: Vec<(i32, usize)>,
    /// The nodemask and weights of an interleaving policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodemask: Option<Vec<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<Vec<(u32, u8)>>,
    /// The lookup: loads per lookup that fall on each node (the model's
    /// traffic amounts; see `XsData::page_loads`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<Vec<(i32, f64)>>,
    /// Runs of physically consecutive pages in the working set (a
    /// diagnostic; see `Region::pfn_runs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pfn_runs: Option<usize>,
}

impl Row {
    /// Same nodes, page counts within 1% of each other.
    pub fn pages_close(&self, o: &Row) -> bool {
        self.pages.len() == o.pages.len()
            && self
                .pages
                .iter()
                .zip(&o.pages)
                .all(|(a, b)| a.0 == b.0 && a.1.abs_diff(b.1) * 100 <= a.1.max(b.1))
    }

    /// `predicted / measured - 1`, when both exist.
    pub fn error(&self) -> Option<f64> {
        let p = self.predicted?;
        (self.measured > 0.0 && p > 0.0).then(|| p / self.measured - 1.0)
    }
}

/// A figure with a sensible number of digits: 4.69 M, 3150, 12.5.
pub fn fmt_num(x: f64) -> String {
    let a = x.abs();
    if a >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

/// Text table of `rows` (one workload or several).
pub fn table(rows: &[Row]) -> Vec<String> {
    let mut v = vec![format!(
        "{:<8} {:<23} {:<13} {:>12} {:>12} {:>8}  {:<10} pages per node",
        "workload", "policy", "variant", "measured", "predicted", "error", "unit"
    )];
    for r in rows {
        v.push(format!(
            "{:<8} {:<23} {:<13} {:>12} {:>12} {:>8}  {:<10} {}",
            r.workload,
            r.policy,
            r.variant.as_deref().unwrap_or("-"),
            fmt_num(r.measured),
            r.predicted.map_or("-".into(), fmt_num),
            r.error()
                .map_or("-".into(), |e| format!("{:+.1}%", e * 100.0)),
            r.unit,
            r.pages
                .iter()
                .map(|(n, c)| format!("{n}:{c}"))
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_serialize_with_null_prediction() {
        let r = Row {
            topology: "cxl".into(),
            workload: "fault".into(),
            policy: bind(2),
            unit: "faults/s".into(),
            measured: 1000.0,
            predicted: None,
            regime: "serial".into(),
            ..Default::default()
        };
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["predicted"], serde_json::Value::Null);
        assert_eq!(j["policy"], "bind:2");
        assert!(j.get("variant").is_none());
        let back: Row = serde_json::from_value(j).unwrap();
        assert_eq!(back, r);
        assert_eq!(r.error(), None);
        let r = Row {
            measured: 100.0,
            predicted: Some(110.0),
            ..r
        };
        assert!((r.error().unwrap() - 0.1).abs() < 1e-12);
        assert_eq!(table(&[r]).len(), 2);
        assert_eq!(fmt_num(4_690_000.0), "4.69 M");
        assert_eq!(fmt_num(3150.4), "3150");
        assert_eq!(fmt_num(0.05), "0.050");
    }
}
