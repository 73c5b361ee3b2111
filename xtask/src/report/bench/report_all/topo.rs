//! One topology's records in the report: a boot's bench document parsed
//! into [`Row`]s, calibration, the `clear`, `wi` and `gigantic` data, the
//! rebalance and tk-run records, and notes on what is missing.

use serde::Deserialize;
use serde_json::Value;

use super::{Row, TopoRun};
use crate::report::bench::clear::ClearData;
use crate::report::bench::gigantic::GiganticData;
use crate::report::bench::rebalance;
use crate::report::bench::wi::WiData;

/// One topology's parsed records.
#[derive(Clone, Debug, Default)]
pub(super) struct Topo {
    pub(super) name: String,
    pub(super) ok: bool,
    pub(super) seconds: f64,
    pub(super) accel: String,
    pub(super) cpu_model: String,
    pub(super) detail: String,
    pub(super) guest_view: Vec<String>,
    pub(super) rows: Vec<Row>,
    pub(super) calibration: Option<Value>,
    pub(super) calib_weights: Option<Value>,
    pub(super) workload_json: Option<Value>,
    pub(super) programs: Vec<Value>,
    pub(super) clear: Option<ClearData>,
    pub(super) wi: Option<WiData>,
    pub(super) gigantic: Option<GiganticData>,
    /// `tk-bench-rebalance`'s rows (see `super::rebalance`).
    pub(super) rebalance: Vec<Value>,
    /// The `tk-bench-run` record (tk-run against the kernel).
    pub(super) tkrun: Option<Value>,
    /// The `tk-test-close-scale` record (per-mapping cost).
    pub(super) scale: Option<Value>,
    pub(super) notes: Vec<String>,
}

/// The records of one program (`bin`) in a bench document.
pub(super) fn records_of<'a>(doc: &'a Value, bin: &str) -> Vec<&'a Value> {
    doc.get("results")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| r.get("bin").and_then(Value::as_str) == Some(bin))
        .collect()
}

/// A copy of `doc` whose `results` hold only `bin`'s records (for the
/// parsers of `bench clear` and `bench wi`).
pub(super) fn sub_doc(doc: &Value, bin: &str) -> Value {
    let mut d = doc.clone();
    d["results"] = Value::Array(records_of(doc, bin).into_iter().cloned().collect());
    d
}

pub(super) fn s(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("?").to_string()
}

impl Topo {
    pub(super) fn from_run(run: &TopoRun) -> Topo {
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
            t.rebalance = rebalance::rows_of(rb, &t.name);
        }
        if !records_of(doc, "tk-bench-clear").is_empty() {
            t.clear = ClearData::from_doc(&sub_doc(doc, "tk-bench-clear")).ok();
        }
        if !records_of(doc, "tk-bench-wi").is_empty() {
            t.wi = WiData::from_doc(&sub_doc(doc, "tk-bench-wi")).ok();
        }
        t.tkrun = records_of(doc, "tk-bench-run").into_iter().next().cloned();
        t.scale = records_of(doc, "tk-test-close-scale")
            .into_iter()
            .next()
            .cloned();
        if !records_of(doc, "tk-bench-gigantic").is_empty() {
            match GiganticData::from_doc(&sub_doc(doc, "tk-bench-gigantic")) {
                Ok(g) => t.gigantic = Some(g),
                Err(e) => t.notes.push(format!("tk-bench-gigantic: {e:#}")),
            }
        }
        t
    }

    pub(super) fn regime(&self) -> String {
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

    pub(super) fn find(&self, workload: &str, policy: &str) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.workload == workload && r.policy == policy && r.variant.is_none())
    }
}
