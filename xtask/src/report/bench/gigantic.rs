//! `bench gigantic`: time to first use of 1 GiB against tierkit's workers,
//! one line per node, with the node's hugetlb first fault (dotted) and
//! hugetlb ÷ tierkit at each point -> `gigantic.svg`.

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;
use serde::Deserialize;
use serde_json::{json, Value};

use super::chart::{draw_legend, draw_notes, plot_err, svg_chart, thread_tick, Style, NODE_COLORS};
use super::doc::{records, str_of, target_word};

/// One median of `tk-bench-gigantic` (its `rows`): `variant` is `tierkit`
/// (with `threads` workers), `pool` (tierkit's first fault taking a range
/// from its pre-cleared pool; `threads` 0) or `hugetlb` (the kernel's first
/// fault).
#[derive(Clone, Debug, Deserialize)]
pub struct GiganticRow {
    pub nid: u32,
    pub kind: String,
    pub variant: String,
    pub threads: u32,
    /// Median time from `mmap` until every 4 KiB page was touched, ns.
    pub median_ns: u64,
    #[serde(default)]
    pub samples_ns: Vec<u64>,
    /// Median busy time of all CPUs per GiB, until the system is back
    /// where it began (the GiB freed, the pool refilled), net of a null
    /// measurement's: what the page cost the machine, ns. Absent in
    /// records from before it was measured.
    #[serde(default)]
    pub cpu_net_ns: Option<u64>,
}

/// A (node, variant) `tk-bench-gigantic` could not measure, and why.
#[derive(Clone, Debug, Deserialize)]
pub struct GiganticSkip {
    pub nid: u32,
    pub kind: String,
    pub variant: String,
    pub reason: String,
}

/// What `bench gigantic` measured.
#[derive(Clone, Debug, Default)]
pub struct GiganticData {
    pub accel: String,
    pub cpu_model: String,
    pub topology: String,
    /// Timed repetitions per median.
    pub reps: u64,
    /// The guest booted with init_on_alloc=1 (`None`: not recorded).
    pub init_on_alloc: Option<bool>,
    pub rows: Vec<GiganticRow>,
    pub skipped: Vec<GiganticSkip>,
}

/// hugetlb ÷ tierkit first-fault targets, by worker count.
const GIGANTIC_TARGETS: [(u32, f64); 2] = [(1, 0.95), (2, 1.8)];
/// hugetlb ÷ tierkit-from-a-ready-pool first-fault target.
const GIGANTIC_POOL_TARGET: f64 = 20.0;

impl GiganticData {
    /// Reads the `tk-bench-gigantic` records of a bench document. `Err`
    /// when there is neither a row nor a skipped node.
    pub fn from_doc(doc: &Value) -> Result<GiganticData> {
        let mut d = GiganticData {
            accel: str_of(doc, "accel"),
            cpu_model: str_of(doc, "cpu_model"),
            topology: str_of(doc, "topology_detail"),
            ..Default::default()
        };
        for r in records(doc, "ratios") {
            d.reps = r.get("reps").and_then(Value::as_u64).unwrap_or(0);
            d.init_on_alloc = r.get("init_on_alloc").and_then(Value::as_bool);
            d.rows
                .extend(Vec::<GiganticRow>::deserialize(&r["rows"]).context("rows")?);
            if let Some(s) = r.get("skipped") {
                d.skipped
                    .extend(Vec::<GiganticSkip>::deserialize(s).context("skipped")?);
            }
        }
        if d.rows.is_empty() && d.skipped.is_empty() {
            return Err(anyhow!("no gigantic rows in the results"));
        }
        Ok(d)
    }

    /// Nodes in the order measured (or skipped), with their kind.
    fn nodes(&self) -> Vec<(u32, String)> {
        let mut v: Vec<(u32, String)> = Vec::new();
        let all = self
            .rows
            .iter()
            .map(|r| (r.nid, &r.kind))
            .chain(self.skipped.iter().map(|s| (s.nid, &s.kind)));
        for (nid, kind) in all {
            if !v.iter().any(|n| n.0 == nid) {
                v.push((nid, kind.clone()));
            }
        }
        v
    }

    /// The row of `variant` (`hugetlb` or `pool`) on `nid`.
    fn row(&self, nid: u32, variant: &str) -> Option<&GiganticRow> {
        self.rows
            .iter()
            .find(|r| r.nid == nid && r.variant == variant)
    }

    /// hugetlb's median on `nid`, ns.
    fn hugetlb_ns(&self, nid: u32) -> Option<u64> {
        self.row(nid, "hugetlb").map(|r| r.median_ns)
    }

    /// tierkit's median from a ready pool on `nid`, ns.
    fn pool_ns(&self, nid: u32) -> Option<u64> {
        self.row(nid, "pool").map(|r| r.median_ns)
    }

    /// tierkit's net CPU time with `threads` workers on `nid`, ns.
    fn tierkit_cpu(&self, nid: u32, threads: u32) -> Option<u64> {
        self.rows
            .iter()
            .find(|r| r.nid == nid && r.variant == "tierkit" && r.threads == threads)
            .and_then(|r| r.cpu_net_ns)
    }

    /// tierkit's (threads, median ns) on `nid`, by threads.
    fn tierkit(&self, nid: u32) -> Vec<(u32, u64)> {
        let mut v: Vec<(u32, u64)> = self
            .rows
            .iter()
            .filter(|r| r.nid == nid && r.variant == "tierkit")
            .map(|r| (r.threads, r.median_ns))
            .collect();
        v.sort_by_key(|x| x.0);
        v
    }
}

/// hugetlb ÷ tierkit time ratio (> 1: tierkit is faster).
fn first_use_ratio(hugetlb_ns: u64, tierkit_ns: u64) -> f64 {
    hugetlb_ns as f64 / tierkit_ns.max(1) as f64
}

/// The compact summary of `bench gigantic`: the node × variant × seconds
/// table with hugetlb ÷ tierkit (T workers, and from a ready pool), and the
/// targets (met, missed, or n/a when a side is missing; never faked).
pub fn gigantic_summary(d: &GiganticData) -> (Value, Vec<String>) {
    let mut lines = vec![
        format!(
            "summary: time to first use of 1 GiB (mmap .. every 4 KiB page touched), median of {}, {} -cpu {}, init_on_alloc={}",
            d.reps,
            d.accel,
            d.cpu_model,
            d.init_on_alloc.map_or("?", |b| if b { "1" } else { "0" })
        ),
        "  cpu s: busy time of all CPUs per GiB until the system is back where it began (the GiB freed, the pool refilled)".to_string(),
        format!(
            "  {:<14} {:<14} {:>9} {:>9} {:>16}",
            "node", "variant", "seconds", "cpu s", "hugetlb/tierkit"
        ),
    ];
    let cpu_s = |c: Option<u64>| c.map_or("-".to_string(), |c| format!("{:.3}", c as f64 / 1e9));
    let mut table = Vec::new();
    let mut targets = Vec::new();
    for (nid, kind) in d.nodes() {
        let node = format!("{nid} ({kind})");
        let huge = d.hugetlb_ns(nid);
        if let Some(h) = huge {
            let cpu = d.row(nid, "hugetlb").and_then(|r| r.cpu_net_ns);
            lines.push(format!(
                "  {node:<14} {:<14} {:>9.3} {:>9} {:>16}",
                "hugetlb",
                h as f64 / 1e9,
                cpu_s(cpu),
                "-"
            ));
            table.push(
                json!({"nid": nid, "kind": kind, "variant": "hugetlb", "threads": 1,
                              "seconds": h as f64 / 1e9, "cpu_ns": cpu}),
            );
        }
        let tk = d.tierkit(nid);
        for &(t, ns) in &tk {
            let ratio = huge.map(|h| first_use_ratio(h, ns));
            let cpu = d.tierkit_cpu(nid, t);
            lines.push(format!(
                "  {node:<14} {:<14} {:>9.3} {:>9} {:>16}",
                format!("tierkit T={t}"),
                ns as f64 / 1e9,
                cpu_s(cpu),
                ratio.map_or("-".into(), |x| format!("{x:.2}"))
            ));
            table.push(
                json!({"nid": nid, "kind": kind, "variant": "tierkit", "threads": t,
                              "seconds": ns as f64 / 1e9, "cpu_ns": cpu,
                              "hugetlb_over_tierkit": ratio}),
            );
        }
        let pool = d.pool_ns(nid);
        if let Some(ns) = pool {
            let ratio = huge.map(|h| first_use_ratio(h, ns));
            let cpu = d.row(nid, "pool").and_then(|r| r.cpu_net_ns);
            lines.push(format!(
                "  {node:<14} {:<14} {:>9.3} {:>9} {:>16}",
                "tierkit pool",
                ns as f64 / 1e9,
                cpu_s(cpu),
                ratio.map_or("-".into(), |x| format!("{x:.2}"))
            ));
            table.push(
                json!({"nid": nid, "kind": kind, "variant": "pool", "threads": 0,
                              "seconds": ns as f64 / 1e9, "cpu_ns": cpu,
                              "hugetlb_over_tierkit": ratio}),
            );
        }
        let goals = GIGANTIC_TARGETS
            .iter()
            .map(|&(t, goal)| {
                let ns = tk.iter().find(|x| x.0 == t).map(|x| x.1);
                ("tierkit", Some(t), format!("T={t}"), ns, goal)
            })
            .chain([("pool", None, "pool".to_string(), pool, GIGANTIC_POOL_TARGET)]);
        for (variant, t, label, tk_ns, goal) in goals {
            let ratio = match (huge, tk_ns) {
                (Some(h), Some(n)) => Some(first_use_ratio(h, n)),
                _ => None,
            };
            let met = ratio.map(|x| x >= goal);
            targets.push(
                json!({"nid": nid, "kind": kind, "variant": variant, "threads": t,
                       "target": goal, "hugetlb_over_tierkit": ratio, "met": met}),
            );
            lines.push(format!(
                "  target node {node} {label}: hugetlb / tierkit {} (target >= {goal}: {})",
                ratio.map_or("-".into(), |x| format!("{x:.2}")),
                target_word(met)
            ));
        }
    }
    for s in &d.skipped {
        lines.push(format!(
            "  node {} ({}) {}: skipped: {}",
            s.nid, s.kind, s.variant, s.reason
        ));
    }
    let v = json!({
        "reps": d.reps,
        "init_on_alloc": d.init_on_alloc,
        "table": table,
        "targets": targets,
        "skipped": d.skipped.iter().map(|s| json!({"nid": s.nid, "kind": s.kind,
            "variant": s.variant, "reason": s.reason})).collect::<Vec<_>>(),
    });
    (v, lines)
}

/// The SVG chart of `bench gigantic`: seconds to first use of 1 GiB
/// against tierkit's workers, one solid line per node, hugetlb's first
/// fault of the node dotted across and tierkit from a ready pool as a thin
/// line across (labelled at the right end); each tierkit point labelled
/// with its seconds and hugetlb ÷ tierkit.
pub fn gigantic_svg(d: &GiganticData) -> Result<String> {
    svg_chart((1000, 560), |root| {
        let (plot_area, legend_area) = root.split_horizontally(660);
        let tmax = d.rows.iter().map(|r| r.threads).max().unwrap_or(1).max(1);
        let ymax = d.rows.iter().map(|r| r.median_ns).max().unwrap_or(0) as f64 / 1e9;
        let ymax = if ymax > 0.0 { ymax * 1.2 } else { 1.0 };
        let (x0, x1) = (0.75, tmax as f64 + 0.5);
        let mut chart = ChartBuilder::on(&plot_area)
            .caption(
                "time to first use of 1 GiB: tierkit vs hugetlb",
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(x0..x1, 0.0..ymax)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels((tmax as usize + 1).min(17))
            .x_label_formatter(&thread_tick)
            .y_label_formatter(&|y| format!("{y:.2}"))
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 16))
            .x_desc("tierkit workers T")
            .y_desc("seconds (median)")
            .light_line_style(RGBColor(240, 240, 240))
            .draw()
            .map_err(plot_err)?;
        let nodes = d.nodes();
        let mut legend: Vec<(String, RGBColor, Style)> = Vec::new();
        for (i, (nid, kind)) in nodes.iter().enumerate() {
            let c = NODE_COLORS[i % NODE_COLORS.len()];
            let huge = d.hugetlb_ns(*nid);
            if let Some(h) = huge {
                let y = h as f64 / 1e9;
                chart
                    .draw_series(DashedLineSeries::new(
                        [(x0, y), (x1, y)],
                        2,
                        5,
                        c.stroke_width(2),
                    ))
                    .map_err(plot_err)?;
                legend.push((
                    format!("hugetlb first fault, node {nid} ({kind})"),
                    c,
                    Style::Kernel,
                ));
            }
            if let Some(p) = d.pool_ns(*nid) {
                let y = p as f64 / 1e9;
                chart
                    .draw_series(LineSeries::new([(x0, y), (x1, y)], c.stroke_width(1)))
                    .map_err(plot_err)?;
                let ratio = huge.map_or(String::new(), |h| {
                    format!(" (x{:.1})", first_use_ratio(h, p))
                });
                chart
                    .draw_series([Text::new(
                        format!("pool {y:.3} s{ratio}"),
                        (x1 - 0.3 * (x1 - x0), y + 0.02 * ymax),
                        ("sans-serif", 12).into_font().color(&c),
                    )])
                    .map_err(plot_err)?;
                legend.push((
                    format!("tierkit from a ready pool, node {nid} ({kind})"),
                    c,
                    Style::Thin,
                ));
            }
            let pts: Vec<(f64, f64)> = d
                .tierkit(*nid)
                .into_iter()
                .map(|(t, ns)| (t as f64, ns as f64 / 1e9))
                .collect();
            if pts.is_empty() {
                continue;
            }
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(3)))
                .map_err(plot_err)?;
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 5, c.filled())))
                .map_err(plot_err)?;
            chart
                .draw_series(pts.iter().map(|&(x, y)| {
                    let ratio = huge.map_or(String::new(), |h| {
                        format!(" (x{:.2})", h as f64 / 1e9 / y.max(1e-12))
                    });
                    Text::new(
                        format!("{y:.2} s{ratio}"),
                        (x + 0.03 * (x1 - x0), y),
                        ("sans-serif", 12).into_font().color(&c),
                    )
                }))
                .map_err(plot_err)?;
            legend.push((
                format!("tierkit, node {nid} ({kind})"),
                c,
                Style::TierkitLocal,
            ));
        }
        let lx = 10;
        let mut ly = draw_legend(&legend_area, lx, &legend)?;
        ly += 16;
        let mut notes = vec![
            "time from mmap until every 4 KiB page of the GiB was written once".to_string(),
            format!(
                "median of {} after an untimed warm-up; labels: seconds (hugetlb / tierkit)",
                d.reps
            ),
            format!("{}, -cpu {}", d.accel, d.cpu_model),
            format!("guest: {}", d.topology),
            "targets: hugetlb / tierkit >= 0.95 at T=1, >= 1.8 at T=2, >= 20 from a ready pool"
                .to_string(),
            "pool: the node's pool target set to 1 and the range ready (untimed); the fault takes it, no clear"
                .to_string(),
        ];
        for s in &d.skipped {
            notes.push(format!(
                "skipped node {} {}: {}",
                s.nid, s.variant, s.reason
            ));
        }
        draw_notes(&legend_area, lx, ly, notes)
    })
}
