//! The report of `cargo xtask bench` with no name (issue 12): from the
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

use super::chart::{plot_err, NODE_COLORS};
use super::clear::{clear_summary, clear_svg, ClearData};
use super::gigantic::{gigantic_summary, gigantic_svg, GiganticData};
use super::wi::{wi_summary, wi_svg, WiData};
use anyhow::Result;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::Path;

use crate::util;

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

/// A row of `tk-workload` (userspace_tests::workload::rows::Row).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub topology: String,
    pub workload: String,
    pub policy: String,
    pub unit: String,
    pub measured: f64,
    pub predicted: Option<f64>,
    pub regime: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_calibration: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_threads: Option<Vec<(usize, f64)>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pages: Vec<(i32, usize)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodemask: Option<Vec<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<Vec<(u32, u8)>>,
    /// The lookup's loads per lookup on each node (the model's traffic
    /// split for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<Vec<(i32, f64)>>,
    /// Runs of physically consecutive pages of the working set.
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

    /// `predicted / measured - 1`.
    pub fn error(&self) -> Option<f64> {
        let p = self.predicted?;
        (self.measured > 0.0 && p > 0.0).then(|| p / self.measured - 1.0)
    }
}

/// A target of the issue, checked on one run.
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

/// One topology's parsed records.
#[derive(Clone, Debug, Default)]
struct Topo {
    name: String,
    ok: bool,
    seconds: f64,
    accel: String,
    cpu_model: String,
    detail: String,
    guest_view: Vec<String>,
    rows: Vec<Row>,
    calibration: Option<Value>,
    calib_weights: Option<Value>,
    workload_json: Option<Value>,
    programs: Vec<Value>,
    clear: Option<ClearData>,
    wi: Option<WiData>,
    gigantic: Option<GiganticData>,
    /// `tk-bench-rebalance`'s rows (see `super::rebalance`).
    rebalance: Vec<Value>,
    /// The `tk-bench-run` record (tk-run against the kernel).
    tkrun: Option<Value>,
    notes: Vec<String>,
}

/// The whole report.
#[derive(Clone, Debug, Default)]
pub struct Report {
    topos: Vec<Topo>,
    pub targets: Vec<Target>,
    meta: RunMeta,
}

/// The records of one program (`bin`) in a bench document.
fn records_of<'a>(doc: &'a Value, bin: &str) -> Vec<&'a Value> {
    doc.get("results")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| r.get("bin").and_then(Value::as_str) == Some(bin))
        .collect()
}

/// A copy of `doc` whose `results` hold only `bin`'s records (for the
/// parsers of `bench clear` and `bench wi`).
fn sub_doc(doc: &Value, bin: &str) -> Value {
    let mut d = doc.clone();
    d["results"] = Value::Array(records_of(doc, bin).into_iter().cloned().collect());
    d
}

fn s(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("?").to_string()
}

impl Topo {
    fn from_run(run: &TopoRun) -> Topo {
        let mut t = Topo {
            name: run.topology.clone(),
            ok: run.ok,
            seconds: run.seconds,
            ..Default::default()
        };
        let Some(doc) = &run.doc else {
            t.notes
                .push("no results: the guest wrote no bench records".into());
            return t;
        };
        t.accel = s(doc, "accel");
        t.cpu_model = s(doc, "cpu_model");
        t.detail = s(doc, "topology_detail");
        t.guest_view = doc
            .get("guest_topology")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(w) = records_of(doc, "tk-workload").into_iter().next() {
            match Vec::<Row>::deserialize(w.get("rows").cloned().unwrap_or(Value::Null)) {
                Ok(mut rows) => {
                    for r in rows.iter_mut() {
                        r.topology = t.name.clone();
                    }
                    t.rows = rows;
                }
                Err(e) => t.notes.push(format!("tk-workload rows: {e}")),
            }
            t.workload_json = Some(w.clone());
        } else {
            t.notes.push("no tk-workload record".into());
        }
        if let Some(c) = records_of(doc, "tk-calibrate").into_iter().next() {
            t.calibration = c.get("calibration").cloned();
            t.calib_weights = c.get("weights").cloned();
        } else {
            t.notes.push("no tk-calibrate record".into());
        }
        if let Some(a) = records_of(doc, "tk-bench-all").into_iter().next() {
            t.programs = a
                .get("programs")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for c in a
                .get("checks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if c.get("status").and_then(Value::as_str) != Some("ok") {
                    t.notes.push(format!(
                        "tk-bench-all: {} {}: {}",
                        s(c, "name"),
                        s(c, "status"),
                        s(c, "detail")
                    ));
                }
            }
        }
        if let Some(rb) = records_of(doc, "tk-bench-rebalance").into_iter().next() {
            t.rebalance = super::rebalance::rows_of(rb, &t.name);
        }
        if !records_of(doc, "tk-bench-clear").is_empty() {
            t.clear = ClearData::from_doc(&sub_doc(doc, "tk-bench-clear")).ok();
        }
        if !records_of(doc, "tk-bench-wi").is_empty() {
            t.wi = WiData::from_doc(&sub_doc(doc, "tk-bench-wi")).ok();
        }
        t.tkrun = records_of(doc, "tk-bench-run").into_iter().next().cloned();
        if !records_of(doc, "tk-bench-gigantic").is_empty() {
            match GiganticData::from_doc(&sub_doc(doc, "tk-bench-gigantic")) {
                Ok(g) => t.gigantic = Some(g),
                Err(e) => t.notes.push(format!("tk-bench-gigantic: {e:#}")),
            }
        }
        t
    }

    fn regime(&self) -> String {
        self.rows
            .first()
            .map(|r| r.regime.clone())
            .or_else(|| {
                self.calibration
                    .as_ref()
                    .and_then(|c| c.get("regime"))
                    .and_then(Value::as_str)
                    .map(String::from)
            })
            .unwrap_or_else(|| "?".into())
    }

    fn find(&self, workload: &str, policy: &str) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.workload == workload && r.policy == policy && r.variant.is_none())
    }
}

/// The model-checked workloads, in report order.
pub const MODELLED: [&str; 5] = ["lookup", "copy", "scale", "add", "triad"];

/// Accuracy bound, calibration-pays ratios, optimized slack.
pub const ACCURACY: f64 = 0.15;
pub const PAYS_BANDWIDTH: f64 = 3.0;
pub const PAYS_LOOKUP: f64 = 1.25;
pub const OPTIMIZED_SLACK: f64 = 0.10;

/// The issue's targets on one topology's rows.
fn targets_of(t: &Topo) -> Vec<Target> {
    let mut v = Vec::new();
    // Model accuracy: each predicted row.
    for w in MODELLED {
        let rows: Vec<&Row> = t
            .rows
            .iter()
            .filter(|r| r.workload == w && r.predicted.is_some())
            .collect();
        if rows.is_empty() {
            v.push(Target {
                target: "model accuracy".into(),
                topology: t.name.clone(),
                workload: w.into(),
                value: None,
                threshold: format!("|predicted/measured - 1| <= {ACCURACY}"),
                met: None,
                detail: "no predicted rows".into(),
            });
            continue;
        }
        let worst = rows
            .iter()
            .filter_map(|r| r.error().map(|e| (e, *r)))
            .max_by(|a, b| a.0.abs().total_cmp(&b.0.abs()));
        let within = rows
            .iter()
            .filter(|r| r.error().is_some_and(|e| e.abs() <= ACCURACY))
            .count();
        let (value, detail) = match worst {
            Some((e, r)) => (
                Some(e.abs()),
                format!(
                    "{within} of {} policies within {:.0}%; worst {} {:+.1}% ({} measured, {} predicted)",
                    rows.len(),
                    ACCURACY * 100.0,
                    r.policy,
                    e * 100.0,
                    num(r.measured),
                    num(r.predicted.unwrap_or(0.0))
                ),
            ),
            None => (None, "no usable prediction".into()),
        };
        v.push(Target {
            target: "model accuracy".into(),
            topology: t.name.clone(),
            workload: w.into(),
            value,
            threshold: format!("<= {ACCURACY}"),
            met: value.map(|x| x <= ACCURACY && within == rows.len()),
            detail: format!("{detail}; regime {}", t.regime()),
        });
    }
    // Calibration pays: cxl only.
    if t.name == "cxl" {
        for w in MODELLED {
            let need = if w == "lookup" {
                PAYS_LOOKUP
            } else {
                PAYS_BANDWIDTH
            };
            let a = t.find(w, "tierkit-auto-measured");
            let k = t.find(w, "kernel-weighted-hmat");
            let ratio = match (a, k) {
                (Some(a), Some(k)) if k.measured > 0.0 => Some(a.measured / k.measured),
                _ => None,
            };
            v.push(Target {
                target: "calibration pays".into(),
                topology: t.name.clone(),
                workload: w.into(),
                value: ratio,
                threshold: format!(">= {need}"),
                met: ratio.map(|r| r >= need),
                detail: match (a, k) {
                    (Some(a), Some(k)) => format!(
                        "tierkit-auto-measured {} {} (weights {}) / kernel-weighted-hmat {} (weights {})",
                        num(a.measured),
                        a.unit,
                        fmt_w(&a.weights),
                        num(k.measured),
                        fmt_w(&k.weights)
                    ),
                    _ => "a policy is missing".into(),
                },
            });
        }
    }
    // Optimized within 10% of the best measured.
    for w in MODELLED {
        let best = t
            .rows
            .iter()
            .filter(|r| r.workload == w && r.variant.is_none())
            .max_by(|a, b| a.measured.total_cmp(&b.measured));
        let opt = t.find(w, "tierkit-optimized");
        let ratio = match (opt, best) {
            (Some(o), Some(b)) if b.measured > 0.0 => Some(o.measured / b.measured),
            _ => None,
        };
        v.push(Target {
            target: "optimized weights".into(),
            topology: t.name.clone(),
            workload: w.into(),
            value: ratio,
            threshold: format!(">= {:.2} of the best", 1.0 - OPTIMIZED_SLACK),
            met: ratio.map(|r| r >= 1.0 - OPTIMIZED_SLACK),
            detail: match (opt, best) {
                (Some(o), Some(b)) => format!(
                    "tierkit-optimized {} (nodemask {}, weights {}) / best {} {}",
                    num(o.measured),
                    o.nodemask.as_ref().map_or("-".into(), |m| format!("{m:?}")),
                    fmt_w(&o.weights),
                    b.policy,
                    num(b.measured)
                ),
                _ => "a policy is missing".into(),
            },
        });
    }
    v
}

/// The noise floor: pairs of policies that place the working set
/// identically (`local` and `bind:<its node>`; the kernel's and tierkit's
/// weighted interleave with the HMAT weights), per workload: `(workload,
/// a, b, a/b)`. A model cannot be checked more finely than these differ.
pub fn noise_of(rows: &[Row]) -> Vec<(String, String, String, f64)> {
    let mut v = Vec::new();
    for w in MODELLED {
        let find = |p: &str| {
            rows.iter()
                .find(|r| r.workload == w && r.policy == p && r.variant.is_none())
        };
        let mut pairs = vec![(
            "kernel-weighted-hmat".to_string(),
            "tierkit-weighted-hmat".to_string(),
        )];
        if let Some(l) = find("local") {
            if let [(n, _)] = l.pages.as_slice() {
                pairs.insert(0, ("local".into(), format!("bind:{n}")));
            }
        }
        for (a, b) in pairs {
            if let (Some(x), Some(y)) = (find(&a), find(&b)) {
                if x.pages_close(y) && y.measured > 0.0 {
                    v.push((w.to_string(), a, b, x.measured / y.measured));
                }
            }
        }
    }
    v
}

/// The largest `|a/b - 1|` of [`noise_of`], if any.
pub fn noise_max(rows: &[Row]) -> Option<f64> {
    noise_of(rows)
        .iter()
        .map(|x| (x.3 - 1.0).abs().max(1.0 / x.3 - 1.0))
        .fold(None, |m, x| Some(m.map_or(x, |m: f64| m.max(x))))
}

/// 4.69 M, 3150, 12.5, 0.050.
pub fn num(x: f64) -> String {
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

fn fmt_w(w: &Option<Vec<(u32, u8)>>) -> String {
    match w {
        None => "-".into(),
        Some(v) => v
            .iter()
            .map(|(n, w)| format!("{n}:{w}"))
            .collect::<Vec<_>>()
            .join(","),
    }
}

fn fmt_pages(p: &[(i32, usize)]) -> String {
    p.iter()
        .map(|(n, c)| format!("{n}:{c}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn verdict(m: Option<bool>) -> &'static str {
    match m {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "n/a",
    }
}

/// The policies in report order, as they appear in `rows`.
fn policy_order(rows: &[Row]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in rows {
        if !v.contains(&r.policy) {
            v.push(r.policy.clone());
        }
    }
    v
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
                verdict(g.met),
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

    pub fn markdown(&self) -> String {
        let mut md = String::new();
        let _ = writeln!(md, "# tierkit: what placement does to real work\n");
        let _ = writeln!(
            md,
            "`cargo xtask bench`: {} topolog{} in {:.0} s; host load average (1/5/15 min) {} before, {} after. \
             One boot per topology, QEMU {}; figures from the same boot are comparable, absolute ones say \
             little about hardware.\n",
            self.topos.len(),
            if self.topos.len() == 1 { "y" } else { "ies" },
            self.meta.seconds,
            self.meta.load_before.as_deref().unwrap_or("?"),
            self.meta.load_after.as_deref().unwrap_or("?"),
            self.topos.first().map_or("?", |t| t.accel.as_str()),
        );
        // Targets first.
        let (m, x, n) = self.target_counts();
        let _ = writeln!(md, "## Targets\n\n{m} met, {x} missed, {n} not checked.\n");
        for t in &self.topos {
            if let Some(nm) = noise_max(&t.rows) {
                let _ = writeln!(
                    md,
                    "- `{}`: identical placements measured side by side differed by up to {:.0}% \
                     (the noise floor of this run).",
                    t.name,
                    nm * 100.0
                );
            }
        }
        md.push('\n');
        let _ = writeln!(
            md,
            "| topology | target | workload | value | threshold | verdict | detail |"
        );
        let _ = writeln!(md, "|---|---|---|---|---|---|---|");
        for g in &self.targets {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} |",
                g.topology,
                g.target,
                g.workload,
                g.value.map_or("-".into(), |x| format!("{x:.3}")),
                g.threshold.replace('|', "\\|"),
                verdict(g.met),
                g.detail.replace('|', "\\|")
            );
        }
        for t in &self.topos {
            let _ = writeln!(md, "\n## Topology `{}`\n", t.name);
            let _ = writeln!(
                md,
                "{} (-cpu {}), boot {:.0} s, guest {}, regime **{}**.\n",
                t.detail,
                t.cpu_model,
                t.seconds,
                if t.ok { "ok" } else { "FAILED" },
                t.regime()
            );
            for n in &t.notes {
                let _ = writeln!(md, "- note: {n}");
            }
            if !t.notes.is_empty() {
                md.push('\n');
            }
            md.push_str(&calibration_md(t));
            md.push_str(&workload_md(t));
            md.push_str(&fault_md(t));
            md.push_str(&super::rebalance::markdown(&t.rebalance));
            if let Some(c) = &t.clear {
                let _ = writeln!(md, "### Clearing (`tk-bench-clear`)\n\n```");
                for l in clear_summary(c).1 {
                    let _ = writeln!(md, "{l}");
                }
                let _ = writeln!(md, "```\n\n![clear](clear.svg)\n");
            }
            if let Some(w) = &t.wi {
                let _ = writeln!(md, "### Weighted placement (`tk-bench-wi`)\n\n```");
                for l in wi_summary(w).1 {
                    let _ = writeln!(md, "{l}");
                }
                let _ = writeln!(md, "```\n\n![wi](wi-{}.svg)\n", t.name);
            }
            if let Some(g) = &t.gigantic {
                let _ = writeln!(
                    md,
                    "### Gigantic pages at first touch (`tk-bench-gigantic`)\n\n```"
                );
                for l in gigantic_summary(g).1 {
                    let _ = writeln!(md, "{l}");
                }
                let _ = writeln!(md, "```\n\n![gigantic](gigantic-{}.svg)\n", t.name);
            }
            if let Some(v) = &t.tkrun {
                md.push_str(&super::tkrun_table::markdown(v));
            }
            if !t.programs.is_empty() {
                let _ = writeln!(
                    md,
                    "Programs: {}\n",
                    t.programs
                        .iter()
                        .map(|p| format!(
                            "{} rc={} {:.0} s",
                            s(p, "name"),
                            p.get("rc").map_or("?".into(), |r| r.to_string()),
                            p.get("seconds").and_then(Value::as_f64).unwrap_or(0.0)
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        md
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

fn calibration_md(t: &Topo) -> String {
    let mut md = String::new();
    let Some(c) = &t.calibration else {
        return md;
    };
    let _ = writeln!(md, "### Calibration (`tk-calibrate`)\n");
    let w = t.calib_weights.as_ref();
    let wt = |key: &str, nid: u64| -> String {
        w.and_then(|w| w.get(key))
            .and_then(Value::as_array)
            .and_then(|a| {
                a.iter().find_map(|p| {
                    let p = p.as_array()?;
                    (p.first()?.as_u64()? == nid).then(|| p.get(1)?.as_u64())?
                })
            })
            .map_or("-".into(), |x| x.to_string())
    };
    let _ = writeln!(
        md,
        "| node | kind | threads | read MB/s | write MB/s | copy MB/s | scale MB/s | add MB/s | triad MB/s | latency ns | HMAT read | HMAT write | HMAT latency | weight (HMAT) | weight (measured) |"
    );
    let _ = writeln!(
        md,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for n in c
        .get("nodes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let f = |k: &str| n.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        let nid = n.get("nid").and_then(Value::as_u64).unwrap_or(0);
        let h = n.get("hmat").filter(|h| !h.is_null());
        let hv = |k: &str| {
            h.and_then(|h| h.get(k))
                .and_then(Value::as_u64)
                .map_or("-".into(), |x| x.to_string())
        };
        let _ = writeln!(
            md,
            "| {nid} | {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {} | {} | {} | {} |",
            s(n, "kind"),
            n.get("threads").and_then(Value::as_u64).unwrap_or(0),
            f("read_mbps"),
            f("write_mbps"),
            f("copy_mbps"),
            f("scale_mbps"),
            f("add_mbps"),
            f("triad_mbps"),
            f("latency_ns"),
            hv("read_mbps"),
            hv("write_mbps"),
            hv("read_latency_ns"),
            wt("hmat", nid),
            wt("measured", nid)
        );
    }
    if let Some(p) = c.get("probe").filter(|p| !p.is_null()) {
        let f = |k: &str| p.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        let _ = writeln!(
            md,
            "\nRegime probe: read bandwidth on pages spread in proportion to the measured read bandwidth \
             ({}): measured {:.0} MB/s; serial model {:.0}, parallel model {:.0} → **{}**.",
            p.get("pages")
                .and_then(Value::as_array)
                .map(|a| a
                    .iter()
                    .filter_map(|x| {
                        let x = x.as_array()?;
                        Some(format!("node {}: {} pages", x.first()?, x.get(1)?))
                    })
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default(),
            f("measured_mbps"),
            f("serial_mbps"),
            f("parallel_mbps"),
            s(p, "regime")
        );
    }
    md.push('\n');
    md
}

fn workload_md(t: &Topo) -> String {
    let mut md = String::new();
    let rows: Vec<&Row> = t
        .rows
        .iter()
        .filter(|r| MODELLED.contains(&r.workload.as_str()))
        .collect();
    if rows.is_empty() {
        return md;
    }
    let _ = writeln!(
        md,
        "### Workloads (`tk-workload`): measured / predicted ({} regime)\n",
        t.regime()
    );
    let _ = writeln!(
        md,
        "| policy | pages per node | lookup (lookups/s) | copy (MB/s) | scale (MB/s) | add (MB/s) | triad (MB/s) | lookup loads per node | STREAM physical runs |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|");
    let owned: Vec<Row> = rows.iter().map(|r| (*r).clone()).collect();
    for p in policy_order(&owned) {
        let cell = |w: &str| -> String {
            match t.find(w, &p) {
                None => "-".into(),
                Some(r) => match r.error() {
                    Some(e) => format!(
                        "{} / {} ({:+.0}%)",
                        num(r.measured),
                        num(r.predicted.unwrap_or(0.0)),
                        e * 100.0
                    ),
                    None => num(r.measured),
                },
            }
        };
        let pages = t
            .find("triad", &p)
            .or_else(|| t.find("lookup", &p))
            .map(|r| fmt_pages(&r.pages))
            .unwrap_or_default();
        let traffic = t
            .find("lookup", &p)
            .and_then(|r| r.traffic.as_ref())
            .map_or("-".into(), |v| {
                v.iter()
                    .map(|(n, l)| format!("{n}:{l:.1}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            });
        let runs = t
            .find("triad", &p)
            .and_then(|r| r.pfn_runs)
            .map_or("-".into(), |x| x.to_string());
        let _ = writeln!(
            md,
            "| {p} | {pages} | {} | {} | {} | {} | {} | {traffic} | {runs} |",
            cell("lookup"),
            cell("copy"),
            cell("scale"),
            cell("add"),
            cell("triad")
        );
    }
    let _ = writeln!(
        md,
        "\nEach cell: measured / predicted (prediction error). Pages per node: the STREAM working set. \
         STREAM predictions: the model on those pages with each node's bandwidth for the kernel, \
         measured in the same rounds on a working set bound to the node. The lookup's: the model on \
         its loads per node (`lookup loads per node`, loads per lookup, from the pages each load \
         reads), with rates anchored at its DRAM-node rate (exact there by construction) and scaled by \
         the latency measured in the same rounds (see README, \"The bandwidth model\"). \
         `STREAM physical runs`: runs of physically consecutive pages in the STREAM working set (1: \
         contiguous, 4096: every page apart); under QEMU TCG a scattered working set runs slower on \
         the same node.\n"
    );
    let noise = noise_of(&t.rows);
    if !noise.is_empty() {
        let _ = writeln!(
            md,
            "Noise floor: policies that place the working set identically, measured side by side, differ by: {}. \
             A prediction cannot be judged more finely than that.\n",
            noise
                .iter()
                .map(|(w, a, b, r)| format!("{w} {a} / {b} = {r:.2}"))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    for w in MODELLED {
        if t.rows.iter().any(|r| r.workload == w) {
            let _ = write!(md, "![{w}]({}-{w}.svg) ", t.name);
        }
    }
    let _ = writeln!(md, "![model](model-{}.svg)\n", t.name);
    md
}

fn fault_md(t: &Topo) -> String {
    let mut md = String::new();
    let pf: Vec<&Row> = t
        .rows
        .iter()
        .filter(|r| r.workload == "fault" && r.variant.as_deref() == Some("page_fault2"))
        .collect();
    let del: Vec<&Row> = t
        .rows
        .iter()
        .filter(|r| r.workload == "fault" && r.unit == "pages/s")
        .collect();
    if pf.is_empty() && del.is_empty() {
        return md;
    }
    let _ = writeln!(md, "### Faults\n");
    if !pf.is_empty() {
        let maxt = pf
            .iter()
            .filter_map(|r| r.by_threads.as_ref().map(|b| b.len()))
            .max()
            .unwrap_or(1);
        let _ = write!(md, "page_fault2, faults/s:\n\n| policy | pages per node |");
        for i in 1..=maxt {
            let _ = write!(md, " {i} thread{} |", if i == 1 { "" } else { "s" });
        }
        let _ = write!(md, "\n|---|---|");
        for _ in 0..maxt {
            md.push_str("---|");
        }
        md.push('\n');
        for r in &pf {
            let _ = write!(md, "| {} | {} |", r.policy, fmt_pages(&r.pages));
            for i in 1..=maxt {
                let x = r
                    .by_threads
                    .as_ref()
                    .and_then(|b| b.iter().find(|x| x.0 == i))
                    .map_or("-".into(), |x| num(x.1));
                let _ = write!(md, " {x} |");
            }
            md.push('\n');
        }
        md.push('\n');
    }
    if !del.is_empty() {
        let tk = del
            .iter()
            .find(|r| r.variant.as_deref() == Some("tierkit-mmap"))
            .map(|r| r.measured);
        let _ = writeln!(
            md,
            "Pages/s delivered to userspace (map, write a byte per page; one thread, same weights):\n\n\
             | variant | policy | pages/s | tierkit / this | pages per node |\n|---|---|---|---|---|"
        );
        for r in &del {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                r.variant.as_deref().unwrap_or("-"),
                r.policy,
                num(r.measured),
                tk.map_or("-".into(), |t| format!("{:.2}", t / r.measured)),
                fmt_pages(&r.pages)
            );
        }
        let _ = writeln!(md, "\n![fault]({}-fault.svg)\n", t.name);
    }
    md
}

/// Bars of `rows`' measured figures per policy (and variant), with the
/// prediction as a black tick where there is one.
fn policy_svg(topology: &str, workload: &str, rows: &[&Row], regime: &str) -> Result<String> {
    let mut svg = String::new();
    {
        let n = rows.len() as u32;
        let last = n.max(2) - 1;
        let root = SVGBackend::with_string(&mut svg, (900, 110 + 46 * n)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let unit = rows.first().map_or("", |r| r.unit.as_str()).to_string();
        let xmax = rows
            .iter()
            .map(|r| r.measured.max(r.predicted.unwrap_or(0.0)))
            .fold(0.0, f64::max)
            .max(1e-9)
            * 1.45;
        let labels: Vec<String> = rows
            .iter()
            .map(|r| match &r.variant {
                Some(v) if workload == "fault" => format!("{} ({})", v, r.policy),
                _ => r.policy.clone(),
            })
            .collect();
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("{topology}: {workload}, {unit} per policy (tick: model, {regime} regime)"),
                ("sans-serif", 16),
            )
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(230)
            .build_cartesian_2d(0.0..xmax, (0u32..last).into_segmented())
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n as usize)
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) if *i <= last => labels
                    .get((last - *i) as usize)
                    .cloned()
                    .unwrap_or_default(),
                _ => String::new(),
            })
            .label_style(("sans-serif", 14))
            .x_label_formatter(&|x| num(*x))
            .x_max_light_lines(1)
            .x_desc(unit.as_str())
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(plot_err)?;
        for (k, r) in rows.iter().enumerate() {
            let i = last - k as u32;
            let c = if r.policy.starts_with("tierkit") {
                NODE_COLORS[0]
            } else {
                RGBColor(150, 150, 150)
            };
            let mut bar = Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(i)),
                    (r.measured, SegmentValue::Exact(i + 1)),
                ],
                c.filled(),
            );
            bar.set_margin(8, 8, 0, 0);
            chart.draw_series([bar]).map_err(plot_err)?;
            if let Some(p) = r.predicted {
                chart
                    .draw_series([PathElement::new(
                        vec![(p, SegmentValue::Exact(i)), (p, SegmentValue::Exact(i + 1))],
                        BLACK.stroke_width(3),
                    )])
                    .map_err(plot_err)?;
            }
            let text = match r.error() {
                Some(e) => format!(
                    "{}  (model {}, {:+.0}%)",
                    num(r.measured),
                    num(r.predicted.unwrap_or(0.0)),
                    e * 100.0
                ),
                None => num(r.measured),
            };
            chart
                .draw_series([Text::new(
                    text,
                    (
                        r.measured.max(r.predicted.unwrap_or(0.0)) + xmax * 0.01,
                        SegmentValue::CenterOf(i),
                    ),
                    TextStyle::from(("sans-serif", 13).into_font())
                        .pos(Pos::new(HPos::Left, VPos::Center)),
                )])
                .map_err(plot_err)?;
        }
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// Measured against predicted, log-log, one colour per workload, with the
/// diagonal and the ±15% band.
fn model_svg(topology: &str, rows: &[&Row], regime: &str) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 640)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let (plot, legend) = root.split_horizontally(660);
        let vals = rows
            .iter()
            .flat_map(|r| [r.measured, r.predicted.unwrap_or(r.measured)])
            .filter(|v| *v > 0.0);
        let lo = vals.clone().fold(f64::INFINITY, f64::min) / 2.0;
        let hi = vals.fold(0.0, f64::max) * 2.0;
        let (lo, hi) = if lo.is_finite() && hi > lo {
            (lo, hi)
        } else {
            (1.0, 10.0)
        };
        let mut chart = ChartBuilder::on(&plot)
            .caption(
                format!("{topology}: measured against predicted ({regime} regime)"),
                ("sans-serif", 16),
            )
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d((lo..hi).log_scale(), (lo..hi).log_scale())
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("predicted (unit of the workload)")
            .y_desc("measured")
            .x_label_formatter(&|x| num(*x))
            .y_label_formatter(&|y| num(*y))
            .label_style(("sans-serif", 13))
            .light_line_style(RGBColor(240, 240, 240))
            .draw()
            .map_err(plot_err)?;
        let grey = RGBColor(120, 120, 120);
        chart
            .draw_series(LineSeries::new([(lo, lo), (hi, hi)], grey.stroke_width(1)))
            .map_err(plot_err)?;
        for f in [1.0 + ACCURACY, 1.0 - ACCURACY] {
            chart
                .draw_series(DashedLineSeries::new(
                    [(lo, lo * f), (hi, hi * f)],
                    4,
                    4,
                    grey.stroke_width(1),
                ))
                .map_err(plot_err)?;
        }
        let mut ly = 40;
        for (k, w) in MODELLED.iter().enumerate() {
            let c = NODE_COLORS[k % NODE_COLORS.len()];
            let pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.workload == *w)
                .filter_map(|r| Some((r.predicted?, r.measured)))
                .filter(|p| p.0 > 0.0 && p.1 > 0.0)
                .collect();
            if pts.is_empty() {
                continue;
            }
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 5, c.filled())))
                .map_err(plot_err)?;
            legend
                .draw(&Circle::new((16, ly), 5, c.filled()))
                .map_err(plot_err)?;
            legend
                .draw(&Text::new(
                    (*w).to_string(),
                    (30, ly),
                    TextStyle::from(("sans-serif", 14).into_font())
                        .pos(Pos::new(HPos::Left, VPos::Center)),
                ))
                .map_err(plot_err)?;
            ly += 24;
        }
        for l in [
            "solid: measured = predicted".to_string(),
            format!("dashed: ±{:.0}%", ACCURACY * 100.0),
            "one point per policy".to_string(),
        ] {
            legend
                .draw(&Text::new(
                    l,
                    (10, ly + 10),
                    TextStyle::from(("sans-serif", 12).into_font())
                        .pos(Pos::new(HPos::Left, VPos::Center)),
                ))
                .map_err(plot_err)?;
            ly += 18;
        }
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(topo: &str, w: &str, p: &str, m: f64, pred: Option<f64>) -> Value {
        json!({"topology": "guess", "workload": w, "policy": p,
               "unit": if w == "lookup" { "lookups/s" } else { "MB/s" },
               "measured": m, "predicted": pred, "regime": "serial",
               "pages": [[0, 100]], "weights": [[0, 1], [2, 1]], "nodemask": [0, 2],
               "_t": topo})
    }

    fn doc(topo: &str, good: bool) -> Value {
        let f = if good { 1.0 } else { 0.5 };
        let mut rows = Vec::new();
        for w in MODELLED {
            rows.push(row(topo, w, "local", 1000.0, Some(1000.0)));
            rows.push(row(topo, w, "bind:0", 950.0, Some(1000.0)));
            rows.push(row(topo, w, "bind:2", 10.0, Some(11.0)));
            rows.push(row(topo, w, "kernel-weighted-hmat", 30.0, Some(31.0)));
            rows.push(row(
                topo,
                w,
                "tierkit-auto-measured",
                300.0 * f,
                Some(290.0),
            ));
            rows.push(row(topo, w, "tierkit-optimized", 950.0 * f, Some(1000.0)));
        }
        rows.push(
            json!({"topology": topo, "workload": "fault", "policy": "local", "unit": "faults/s",
            "measured": 1e5, "predicted": null, "regime": "serial", "variant": "page_fault2",
            "by_threads": [[1, 6e4], [2, 1e5]], "pages": [[0, 4096]]}),
        );
        for (v, p, m) in [
            ("tierkit-mmap", "tierkit-weighted-hmat", 1.2e5),
            ("page-by-page", "kernel-weighted-hmat", 9e4),
            ("map-populate", "kernel-weighted-hmat", 1.1e5),
        ] {
            rows.push(
                json!({"topology": topo, "workload": "fault", "policy": p, "unit": "pages/s",
                "measured": m, "predicted": null, "regime": "serial", "variant": v}),
            );
        }
        json!({
            "bench": "all", "topology": topo, "accel": "Tcg", "cpu_model": "max",
            "topology_detail": "node0 ...", "guest_topology": ["node0 cpus=0-1"],
            "results": [
                {"bin": "tk-calibrate", "ok": true, "calibration": {"regime": "serial", "nodes": [
                    {"nid": 0, "kind": "dram", "threads": 2, "read_mbps": 3150.0, "write_mbps": 13200.0,
                     "triad_mbps": 4000.0, "latency_ns": 235.0,
                     "hmat": {"read_mbps": 20480, "write_mbps": 20480, "read_latency_ns": 100, "source": "node0 access1"}},
                    {"nid": 2, "kind": "cxl", "threads": 2, "read_mbps": 30.0, "write_mbps": 50.0,
                     "copy_mbps": 31.0, "scale_mbps": 32.0, "add_mbps": 33.0,
                     "triad_mbps": 35.0, "latency_ns": 571.0, "hmat": null}],
                    "probe": {"pattern": [[0, 100], [2, 1]], "pages": [[0, 6000], [2, 60]],
                              "measured_mbps": 1500.0, "serial_mbps": 1480.0, "parallel_mbps": 3000.0,
                              "regime": "serial"}},
                 "weights": {"hmat": [[0, 21], [2, 10]], "measured": [[0, 31], [2, 1]]}},
                {"bin": "tk-workload", "ok": true, "rows": rows, "optimized": []},
                {"bin": "tk-bench-all", "ok": true, "checks": [
                    {"name": "tk-bench-clear", "status": "skip", "detail": "CXL topology"}],
                 "programs": [{"name": "tk-workload", "rc": 0, "seconds": 60.0}]},
                {"bin": "tk-bench-wi", "ok": true, "mib": 64, "reps": 5, "results": [
                    {"variant": "tierkit", "name": "tierkit mmap", "pages_per_s_median": 1e5,
                     "pages_per_s_best": 1.1e5, "tierkit_over_this": 1.0}]},
                {"bin": "tk-bench-gigantic", "ok": true, "reps": 5, "ratios": [], "rows": [
                    {"nid": 0, "kind": "dram", "variant": "tierkit", "threads": 1,
                     "median_ns": 230_000_000u64, "samples_ns": [230_000_000u64]},
                    {"nid": 0, "kind": "dram", "variant": "tierkit", "threads": 2,
                     "median_ns": 124_000_000u64, "samples_ns": [124_000_000u64]},
                    {"nid": 0, "kind": "dram", "variant": "hugetlb", "threads": 1,
                     "median_ns": 233_000_000u64, "samples_ns": [233_000_000u64]}],
                 "skipped": [{"nid": 2, "kind": "cxl", "variant": "hugetlb", "reason": "no free GiB"}]},
            ],
        })
    }

    fn runs(good: bool) -> Vec<TopoRun> {
        ["numa", "cxl"]
            .iter()
            .map(|t| TopoRun {
                topology: t.to_string(),
                ok: true,
                seconds: 100.0,
                doc: Some(doc(t, good)),
            })
            .collect()
    }

    #[test]
    fn targets_from_rows() {
        let rep = Report::build(&runs(true), &RunMeta::default());
        // Accuracy: bind:2 is 10% off, the rest within.
        let acc: Vec<&Target> = rep
            .targets
            .iter()
            .filter(|t| t.target == "model accuracy")
            .collect();
        assert_eq!(acc.len(), 10);
        assert!(acc.iter().all(|t| t.met == Some(true)), "{acc:?}");
        assert!((acc[0].value.unwrap() - 0.1).abs() < 1e-9);
        // Calibration pays on cxl only: 300 / 30 = 10.
        let pays: Vec<&Target> = rep
            .targets
            .iter()
            .filter(|t| t.target == "calibration pays")
            .collect();
        assert_eq!(pays.len(), 5);
        assert!(pays
            .iter()
            .all(|t| t.topology == "cxl" && t.met == Some(true)));
        assert!((pays[0].value.unwrap() - 10.0).abs() < 1e-9);
        // Optimized: 950 / 1000.
        let opt = rep
            .targets
            .iter()
            .find(|t| t.target == "optimized weights")
            .unwrap();
        assert!((opt.value.unwrap() - 0.95).abs() < 1e-9);
        assert_eq!(rep.target_counts(), (25, 0, 0));
        let n = noise_of(&rep.topos[0].rows);
        assert_eq!(n.len(), 5);
        assert!((n[0].3 - 1000.0 / 950.0).abs() < 1e-12);
        assert!((noise_max(&rep.topos[0].rows).unwrap() - 50.0 / 950.0).abs() < 1e-9);

        // Worse figures are reported as missed, not hidden.
        let rep = Report::build(&runs(false), &RunMeta::default());
        let (met, missed, _) = rep.target_counts();
        assert!(missed > 0 && met > 0);
        let opt = rep
            .targets
            .iter()
            .find(|t| t.target == "optimized weights")
            .unwrap();
        assert_eq!(opt.met, Some(false));
        let acc = rep
            .targets
            .iter()
            .find(|t| t.target == "model accuracy")
            .unwrap();
        assert_eq!(acc.met, Some(false));
        assert!(
            acc.detail.contains("worst tierkit-optimized"),
            "{}",
            acc.detail
        );
    }

    #[test]
    fn writes_the_report() {
        let dir = std::env::temp_dir().join(format!("xtask-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let rep = Report::build(&runs(true), &RunMeta::default());
        rep.write(&dir).unwrap();
        let j: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap())
                .unwrap();
        let rows = j["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 2 * (30 + 4));
        // Topology from the boot, not the guest's guess; null predictions.
        assert!(rows
            .iter()
            .all(|r| r["topology"] == "numa" || r["topology"] == "cxl"));
        assert!(rows
            .iter()
            .filter(|r| r["workload"] == "fault")
            .all(|r| r["predicted"].is_null()));
        for k in [
            "topology",
            "workload",
            "policy",
            "unit",
            "measured",
            "predicted",
            "regime",
        ] {
            assert!(rows.iter().all(|r| r.get(k).is_some()), "{k}");
        }
        let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
        for want in [
            "## Targets",
            "## Topology `cxl`",
            "| 2 | cxl | 2 | 30 | 50 | 31 | 32 | 33 | 35 | 571 | - | - | - | 10 | 1 |",
            "| tierkit-optimized | 0:100 | 950 / 1000 (+5%)",
            "Regime probe",
            "| tierkit-mmap | tierkit-weighted-hmat | 120000 | 1.00 |",
            "| local | 0:4096 | 60000 | 100000 |",
            "### Gigantic pages at first touch (`tk-bench-gigantic`)",
            "![gigantic](gigantic-cxl.svg)",
        ] {
            assert!(md.contains(want), "no {want:?} in\n{md}");
        }
        for f in [
            "cxl-lookup.svg",
            "numa-triad.svg",
            "model-cxl.svg",
            "cxl-fault.svg",
            "wi-cxl.svg",
            "gigantic-numa.svg",
        ] {
            let s = std::fs::read_to_string(dir.join(f)).unwrap();
            assert!(
                s.starts_with("<svg") && s.trim_end().ends_with("</svg>"),
                "{f}"
            );
        }
        let lines = rep.summary_lines().join("\n");
        assert!(
            lines.contains("targets: 25 met, 0 missed, 0 not checked"),
            "{lines}"
        );
        assert!(
            lines.contains("noise floor (identical placements, same run): lookup local/bind:0"),
            "{lines}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn missing_guest_results_are_notes() {
        let rep = Report::build(
            &[TopoRun {
                topology: "cxl".into(),
                ok: false,
                seconds: 1.0,
                doc: None,
            }],
            &RunMeta::default(),
        );
        assert!(rep.summary_lines().join("\n").contains("no results"));
        assert!(rep.targets.iter().all(|t| t.met.is_none()));
    }
}
