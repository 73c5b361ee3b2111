//! The report's targets, checked as ratios of figures from the same boot:
//! model accuracy, calibration pays, optimized weights near the best; and
//! the noise between repeated measurements.

use super::figures::{fmt_w, num};
use super::topo::Topo;
use super::{Row, Target};

/// The model-checked workloads, in report order.
pub const MODELLED: [&str; 5] = ["lookup", "copy", "scale", "add", "triad"];

/// Accuracy bound, calibration-pays ratios, optimized slack.
pub const ACCURACY: f64 = 0.15;
pub const PAYS_BANDWIDTH: f64 = 3.0;
pub const PAYS_LOOKUP: f64 = 1.25;
pub const OPTIMIZED_SLACK: f64 = 0.10;

/// The speed targets on one topology's rows.
pub(super) fn targets_of(t: &Topo) -> Vec<Target> {
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
