//! The report of `cargo xtask bench` with no name: from the
//! `TIERKIT-JSON` records of one `bench-all` boot per topology, write
//! `target/tierkit/report/`:
//!
//! - `report.json`: `{"rows": [...], "targets": [...], "calibration": {..},
//!   ...}`, one row per topology × workload × policy (fault rows also per
//!   variant) with `topology`, `workload`, `policy`, `unit`, `measured`,
//!   `predicted` (null where the model does not apply) and `regime`;
//! - `report.md`: the tables (calibration, workloads against the model,
//!   faults, targets, clearing, placement);
//! - SVG charts: `<topology>-<workload>.svg` (throughput per policy, the
//!   model's prediction as a tick), `model-<topology>.svg` (measured
//!   against predicted), `<topology>-fault.svg` (pages/s delivered),
//!   `clear.svg` (GB/s against threads), `wi-<topology>.svg`,
//!   `gigantic-<topology>.svg` (time to first use of 1 GiB against
//!   tierkit's workers, hugetlb's first fault dotted).
//!
//! The targets are checked as ratios of figures from the same boot:
//! - model accuracy: every prediction within 15% of its measurement, per
//!   topology, in the regime the calibration named;
//! - calibration pays (cxl): tierkit with auto weights from measurement
//!   at least 3x the kernel's weighted interleave with HMAT weights on the
//!   bandwidth kernels (each of copy, scale, add, triad) and 1.25x on the
//!   lookup kernel;
//! - optimized weights within 10% of the best policy measured, per
//!   workload and topology.

mod figures;
mod markdown;
mod svg;
mod targets;
#[cfg(test)]
mod tests;
mod topo;

use super::clear::{clear_summary, clear_svg};
use super::gigantic::{gigantic_summary, gigantic_svg};
use super::wi::{wi_summary, wi_svg};
use anyhow::Result;
use serde::Serialize;
use serde_json::{json, Value};
use std::path::Path;

use crate::util;
use figures::target_word;
use svg::{model_svg, policy_svg};
use targets::{noise_max, noise_of, targets_of, MODELLED};
use topo::Topo;

/// One boot of `cargo xtask bench`.
#[derive(Clone, Debug)]
pub struct TopoRun {
    pub topology: String,
    /// The guest's verdict (every program exited 0, no crash).
    pub ok: bool,
    pub seconds: f64,
    /// `target/tierkit/bench/all.json` of that boot.
    pub doc: Option<Value>,
}

/// About the whole command.
#[derive(Clone, Debug, Default)]
pub struct RunMeta {
    pub seconds: f64,
    /// The host's load average (1, 5, 15 min) before and after.
    pub load_before: Option<String>,
    pub load_after: Option<String>,
}

/// A row of `tk-workload`: one definition with the guest's
/// (`tierkit_guest::tools::workload::rows::Row`).
pub use tierkit_protocol::rows::Row;

/// A speed target, checked on one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Target {
    /// `model accuracy`, `calibration pays`, `optimized weights`.
    pub target: String,
    pub topology: String,
    /// The workload(s) it is about.
    pub workload: String,
    /// The figure compared with the threshold (a ratio, or the worst error).
    pub value: Option<f64>,
    /// `<= 0.15`, `>= 3`, ...
    pub threshold: String,
    /// `None`: could not be checked (a figure is missing).
    pub met: Option<bool>,
    pub detail: String,
}

/// The whole report.
#[derive(Clone, Debug, Default)]
pub struct Report {
    topos: Vec<Topo>,
    pub targets: Vec<Target>,
    meta: RunMeta,
}

impl Report {
    pub fn build(runs: &[TopoRun], meta: &RunMeta) -> Report {
        let topos: Vec<Topo> = runs.iter().map(Topo::from_run).collect();
        let targets = topos.iter().flat_map(targets_of).collect();
        Report {
            topos,
            targets,
            meta: meta.clone(),
        }
    }

    /// The lines printed at the end of `cargo xtask bench`.
    pub fn summary_lines(&self) -> Vec<String> {
        let mut v = Vec::new();
        for t in &self.topos {
            v.push(format!(
                "report [{}]: {} rows, regime {}, boot {:.0} s{}",
                t.name,
                t.rows.len(),
                t.regime(),
                t.seconds,
                if t.ok { "" } else { ", guest FAILED" }
            ));
            for n in &t.notes {
                v.push(format!("  note: {n}"));
            }
            let noise = noise_of(&t.rows);
            if !noise.is_empty() {
                v.push(format!(
                    "  noise floor (identical placements, same run): {}",
                    noise
                        .iter()
                        .map(|(w, a, b, r)| format!("{w} {a}/{b} {r:.2}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            if let Some(c) = &t.clear {
                v.extend(
                    clear_summary(c)
                        .1
                        .into_iter()
                        .map(|l| format!("  clear {l}")),
                );
            }
            if let Some(w) = &t.wi {
                v.extend(wi_summary(w).1.into_iter().map(|l| format!("  wi {l}")));
            }
            if let Some(g) = &t.gigantic {
                v.extend(
                    gigantic_summary(g)
                        .1
                        .into_iter()
                        .map(|l| format!("  gigantic {l}")),
                );
            }
        }
        v.push("targets (ratios from one run per topology):".into());
        for g in &self.targets {
            v.push(format!(
                "  [{}] {} {}: {} {} ({}) -- {}",
                g.topology,
                g.target,
                g.workload,
                g.value.map_or("-".into(), |x| format!("{x:.3}")),
                g.threshold,
                target_word(g.met),
                g.detail
            ));
        }
        let (m, x, n) = self.target_counts();
        v.push(format!("targets: {m} met, {x} missed, {n} not checked"));
        v
    }

    /// (met, missed, not checked).
    pub fn target_counts(&self) -> (usize, usize, usize) {
        let c = |w: Option<bool>| self.targets.iter().filter(|t| t.met == w).count();
        (c(Some(true)), c(Some(false)), c(None))
    }

    pub fn json(&self) -> Value {
        let mut rows: Vec<Value> = self
            .topos
            .iter()
            .flat_map(|t| t.rows.iter())
            .filter_map(|r| serde_json::to_value(r).ok())
            .collect();
        rows.extend(self.topos.iter().flat_map(|t| t.rebalance.iter().cloned()));
        let (m, x, n) = self.target_counts();
        json!({
            "rows": rows,
            "targets": self.targets,
            "targets_met": m, "targets_missed": x, "targets_not_checked": n,
            "topologies": self.topos.iter().map(|t| json!({
                "topology": t.name, "ok": t.ok, "seconds": t.seconds, "accel": t.accel,
                "cpu_model": t.cpu_model, "detail": t.detail, "regime": t.regime(),
                "noise": noise_of(&t.rows).iter().map(|(w, a, b, r)| json!({"workload": w, "a": a, "b": b, "a_over_b": r})).collect::<Vec<_>>(),
                "noise_max": noise_max(&t.rows),
                "calibration_in_run": t.workload_json.as_ref().and_then(|w| w.get("calibration_in_run").cloned()),
                "guest_view": t.guest_view, "calibration": t.calibration,
                "calibration_weights": t.calib_weights, "programs": t.programs, "notes": t.notes,
                "clear_summary": t.clear.as_ref().map(|c| clear_summary(c).0),
                "wi_summary": t.wi.as_ref().map(|w| wi_summary(w).0),
                "gigantic_summary": t.gigantic.as_ref().map(|g| gigantic_summary(g).0),
                "optimized": t.workload_json.as_ref().and_then(|w| w.get("optimized").cloned()),
                "settings": t.workload_json.as_ref().and_then(|w| w.get("settings").cloned()),
            })).collect::<Vec<_>>(),
            "seconds": self.meta.seconds,
            "host_load_before": self.meta.load_before,
            "host_load_after": self.meta.load_after,
        })
    }

    /// Writes report.json, report.md and the charts into `dir`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir)?;
        util::write_atomic(
            &dir.join("report.json"),
            serde_json::to_string_pretty(&self.json())?.as_bytes(),
        )?;
        util::write_atomic(&dir.join("report.md"), self.markdown().as_bytes())?;
        for t in &self.topos {
            for w in MODELLED {
                let rows: Vec<&Row> = t
                    .rows
                    .iter()
                    .filter(|r| r.workload == w && r.variant.is_none())
                    .collect();
                if rows.is_empty() {
                    continue;
                }
                let svg = policy_svg(&t.name, w, &rows, &t.regime())?;
                util::write_atomic(&dir.join(format!("{}-{w}.svg", t.name)), svg.as_bytes())?;
            }
            let pred: Vec<&Row> = t.rows.iter().filter(|r| r.error().is_some()).collect();
            if !pred.is_empty() {
                let svg = model_svg(&t.name, &pred, &t.regime())?;
                util::write_atomic(&dir.join(format!("model-{}.svg", t.name)), svg.as_bytes())?;
            }
            let del: Vec<&Row> = t
                .rows
                .iter()
                .filter(|r| r.workload == "fault" && r.unit == "pages/s")
                .collect();
            if !del.is_empty() {
                let svg = policy_svg(&t.name, "fault", &del, &t.regime())?;
                util::write_atomic(&dir.join(format!("{}-fault.svg", t.name)), svg.as_bytes())?;
            }
            if let Some(c) = &t.clear {
                util::write_atomic(&dir.join("clear.svg"), clear_svg(c)?.as_bytes())?;
            }
            if let Some(w) = &t.wi {
                util::write_atomic(
                    &dir.join(format!("wi-{}.svg", t.name)),
                    wi_svg(w)?.as_bytes(),
                )?;
            }
            if let Some(g) = &t.gigantic {
                util::write_atomic(
                    &dir.join(format!("gigantic-{}.svg", t.name)),
                    gigantic_svg(g)?.as_bytes(),
                )?;
            }
        }
        Ok(())
    }
}
