//! After `cargo xtask bench <name>`: read `target/tierkit/bench/<name>.json`
//! (written by `write_bench` in main.rs), add a compact `summary` of the
//! ratios the issues ask for, print it, and draw an SVG chart next to it:
//!
//! - `clear`: GB/s against threads, one line per (node, placement) for
//!   tierkit, plus the userspace `memset` of the same size with the same
//!   threads (dashed) and the kernel's serial clear (dotted, one thread,
//!   drawn across) of each node -> `clear.svg`;
//! - `wi`: pages/s delivered to userspace per variant, as bars -> `wi.svg`;
//! - `gigantic`: seconds to first use of 1 GiB against tierkit's workers,
//!   one line per node, with the node's hugetlb first fault (dotted) and
//!   hugetlb ÷ tierkit at each point -> `gigantic.svg`.
//!
//! The charts use plotters' SVG backend without its `ttf` feature: text is
//! written as `<text>` elements and laid out by the viewer, so no font file
//! or fontconfig is needed on the host.

use anyhow::{anyhow, Context, Result};
use plotters::coord::ranged1d::SegmentValue;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

use crate::qemu::Mode;
use crate::topology::TopologyKind;
use crate::util::{fmt_dur, Timer};
use crate::{say, util};
use std::process::ExitCode;

mod rebalance;
mod report_all;
mod tkrun_table;
pub use report_all::{Report, RunMeta, TopoRun};

/// One tierkit row of `tk-bench-clear` (see its `rows`).
#[derive(Clone, Debug, Deserialize)]
pub struct ClearRow {
    pub nid: u32,
    pub kind: String,
    pub placement: String,
    pub threads: u32,
    pub tierkit_mbps: u64,
    #[serde(default)]
    pub memset_mbps: Option<u64>,
    #[serde(default)]
    pub store_loop_mbps: Option<u64>,
    #[serde(default)]
    pub tierkit_speedup: Option<f64>,
    #[serde(default)]
    pub memset_speedup: Option<f64>,
    #[serde(default)]
    pub speedup_fraction_of_memset: Option<f64>,
    #[serde(default)]
    pub tierkit_over_memset: Option<f64>,
    #[serde(default)]
    pub elapsed_ns: u64,
    #[serde(default)]
    pub bytes: u64,
}

/// The kernel's serial clear of 1 GiB on one node.
#[derive(Clone, Debug, Deserialize)]
pub struct KernelSerial {
    pub nid: u32,
    pub kind: String,
    pub elapsed_ns: u64,
    pub mbps: u64,
    #[serde(default)]
    pub source: Option<String>,
}

/// What `bench clear` measured.
#[derive(Clone, Debug, Default)]
pub struct ClearData {
    pub variant: String,
    pub accel: String,
    pub cpu_model: String,
    pub topology: String,
    pub rows: Vec<ClearRow>,
    pub serial: Vec<KernelSerial>,
}

/// One variant of `tk-bench-wi`.
#[derive(Clone, Debug, Deserialize)]
pub struct WiResult {
    pub variant: String,
    pub name: String,
    pub pages_per_s_median: f64,
    #[serde(default)]
    pub pages_per_s_best: f64,
    #[serde(default)]
    pub tierkit_over_this: f64,
}

/// What `bench wi` measured.
#[derive(Clone, Debug, Default)]
pub struct WiData {
    pub accel: String,
    pub cpu_model: String,
    pub mib: u64,
    pub reps: u64,
    pub results: Vec<WiResult>,
}

fn str_of(doc: &Value, key: &str) -> String {
    doc.get(key)
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string()
}

/// The program records (`results`) of a bench document that carry `key`.
fn records<'a>(doc: &'a Value, key: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    doc.get("results")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(move |r| r.get(key).is_some())
}

impl ClearData {
    pub fn from_doc(doc: &Value) -> Result<ClearData> {
        let mut d = ClearData {
            accel: str_of(doc, "accel"),
            cpu_model: str_of(doc, "cpu_model"),
            topology: str_of(doc, "topology_detail"),
            ..Default::default()
        };
        for r in records(doc, "rows") {
            if let Some(v) = r.get("variant").and_then(Value::as_str) {
                d.variant = v.to_string();
            }
            d.rows
                .extend(Vec::<ClearRow>::deserialize(&r["rows"]).context("rows")?);
            if let Some(s) = r.get("kernel_serial") {
                d.serial
                    .extend(Vec::<KernelSerial>::deserialize(s).context("kernel_serial")?);
            }
        }
        if d.rows.is_empty() {
            return Err(anyhow!("no tierkit rows in the results"));
        }
        Ok(d)
    }

    /// (nid, kind, placement) in the order measured.
    fn series(&self) -> Vec<(u32, String, String)> {
        let mut v: Vec<(u32, String, String)> = Vec::new();
        for r in &self.rows {
            let k = (r.nid, r.kind.clone(), r.placement.clone());
            if !v.contains(&k) {
                v.push(k);
            }
        }
        v
    }

    /// Nodes in the order measured, with their kind.
    fn nodes(&self) -> Vec<(u32, String)> {
        let mut v: Vec<(u32, String)> = Vec::new();
        for (nid, kind, _) in self.series() {
            if !v.iter().any(|n| n.0 == nid) {
                v.push((nid, kind));
            }
        }
        v
    }

    fn max_threads(&self) -> u32 {
        self.rows.iter().map(|r| r.threads).max().unwrap_or(1)
    }

    /// memset GB/s per thread count on `nid` (from the local rows, which
    /// ran it on the CPUs tierkit used; else from any).
    fn memset_line(&self, nid: u32) -> Vec<(u32, f64)> {
        let mut pts: Vec<(u32, f64)> = Vec::new();
        for pref in ["local", ""] {
            for r in self
                .rows
                .iter()
                .filter(|r| r.nid == nid && (pref.is_empty() || r.placement == pref))
            {
                if let Some(m) = r.memset_mbps {
                    if !pts.iter().any(|p| p.0 == r.threads) {
                        pts.push((r.threads, m as f64 / 1000.0));
                    }
                }
            }
        }
        pts.sort_by_key(|p| p.0);
        pts
    }
}

impl WiData {
    pub fn from_doc(doc: &Value) -> Result<WiData> {
        let mut d = WiData {
            accel: str_of(doc, "accel"),
            cpu_model: str_of(doc, "cpu_model"),
            ..Default::default()
        };
        for r in records(doc, "results") {
            d.mib = r.get("mib").and_then(Value::as_u64).unwrap_or(0);
            d.reps = r.get("reps").and_then(Value::as_u64).unwrap_or(0);
            d.results
                .extend(Vec::<WiResult>::deserialize(&r["results"]).context("results")?);
        }
        if d.results.is_empty() {
            return Err(anyhow!("no variants in the results"));
        }
        Ok(d)
    }
}

/// The compact summary of `bench clear`, for the JSON and the terminal.
pub fn clear_summary(d: &ClearData) -> (Value, Vec<String>) {
    let mut lines = vec![format!(
        "summary: clear_pages variant {}, {} -cpu {}",
        d.variant, d.accel, d.cpu_model
    )];
    let mut serial = Vec::new();
    for s in &d.serial {
        let one = d
            .rows
            .iter()
            .find(|r| r.nid == s.nid && r.placement == "local" && r.threads == 1);
        let ratio = one.map(|r| {
            // Time per GiB, as tk-bench-clear computes it.
            let per_gib = r.elapsed_ns as f64 / (r.bytes as f64 / (1u64 << 30) as f64).max(1e-9);
            per_gib / s.elapsed_ns.max(1) as f64
        });
        let met = ratio.map(|x| x <= 1.10);
        lines.push(format!(
            "  node {} ({}): kernel serial {:.2} GB/s; tierkit 1 worker / kernel serial time = {} (target <= 1.10: {})",
            s.nid,
            s.kind,
            s.mbps as f64 / 1000.0,
            ratio.map_or("-".into(), |x| format!("{x:.2}")),
            verdict(met)
        ));
        serial.push(json!({
            "nid": s.nid, "kind": s.kind, "kernel_serial_gbps": s.mbps as f64 / 1000.0,
            "tierkit1_over_kernel_serial_time": ratio, "met": met, "page": s.source,
        }));
    }
    let mut scaling = Vec::new();
    for (nid, kind, place) in d.series() {
        let Some(top) = d
            .rows
            .iter()
            .filter(|r| r.nid == nid && r.placement == place)
            .max_by_key(|r| r.threads)
        else {
            continue;
        };
        let frac = top.speedup_fraction_of_memset;
        let met = (top.threads > 1).then(|| frac.map(|f| f >= 0.90)).flatten();
        let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        lines.push(if top.threads > 1 {
            format!(
                "  node {nid} ({kind}) {place} T={}: tierkit {:.2} GB/s, speedup {}x vs memset {}x = {} of memset's (target >= 0.90: {}); tierkit/memset GB/s {}",
                top.threads,
                top.tierkit_mbps as f64 / 1000.0,
                f(top.tierkit_speedup),
                f(top.memset_speedup),
                f(frac),
                verdict(met),
                f(top.tierkit_over_memset)
            )
        } else {
            format!(
                "  node {nid} ({kind}) {place} T=1 only (one eligible CPU): tierkit {:.2} GB/s; tierkit/memset GB/s {}",
                top.tierkit_mbps as f64 / 1000.0,
                f(top.tierkit_over_memset)
            )
        });
        scaling.push(json!({
            "nid": nid, "kind": kind, "placement": place, "threads": top.threads,
            "tierkit_gbps": top.tierkit_mbps as f64 / 1000.0,
            "memset_gbps": top.memset_mbps.map(|m| m as f64 / 1000.0),
            "store_loop_gbps": top.store_loop_mbps.map(|m| m as f64 / 1000.0),
            "tierkit_speedup": top.tierkit_speedup, "memset_speedup": top.memset_speedup,
            "speedup_fraction_of_memset": frac, "tierkit_over_memset": top.tierkit_over_memset,
            "met": met,
        }));
    }
    let v = json!({
        "variant": d.variant,
        "kernel_serial": serial,
        "scaling_at_max_threads": scaling,
    });
    (v, lines)
}

fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "missed",
        None => "n/a",
    }
}

/// The compact summary of `bench wi`.
pub fn wi_summary(d: &WiData) -> (Value, Vec<String>) {
    let mut lines = vec![format!(
        "summary: {} MiB x {} reps, median pages/s ({} -cpu {})",
        d.mib, d.reps, d.accel, d.cpu_model
    )];
    let mut v = Vec::new();
    for r in &d.results {
        lines.push(format!(
            "  {:<36} {:>9.0} pages/s   tierkit / this = {:.2}",
            r.name, r.pages_per_s_median, r.tierkit_over_this
        ));
        v.push(
            json!({"variant": r.variant, "pages_per_s_median": r.pages_per_s_median,
                      "tierkit_over_this": r.tierkit_over_this}),
        );
    }
    (json!({ "variants": v }), lines)
}

/// Colours per node (tierkit, memset and kernel lines of a node share one).
const NODE_COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
];

/// An x-axis label of a chart against worker threads: whole numbers from
/// 1 on, nothing between them.
fn thread_tick(x: &f64) -> String {
    let r = x.round();
    if (x - r).abs() < 1e-6 && r >= 1.0 {
        format!("{r}")
    } else {
        String::new()
    }
}

fn plot_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing the chart: {e:?}")
}

/// The legend's line styles.
#[derive(Clone, Copy)]
enum Style {
    /// Thick solid line with dots: tierkit (local placement).
    TierkitLocal,
    /// Solid line with triangles: tierkit, other placements.
    TierkitOther,
    /// Long dashes with squares: userspace memset.
    Memset,
    /// Dotted: the kernel's own (serial clear, hugetlb first fault).
    Kernel,
    /// Thin solid line: tierkit from a ready pool.
    Thin,
}

/// Draws `legend` (label, colour, style) one entry per 24 px from y = 50
/// at x = `lx` of `area`; returns the y below the last entry.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    lx: i32,
    legend: &[(String, RGBColor, Style)],
) -> Result<i32> {
    let mut ly = 50;
    let font = ("sans-serif", 14).into_font();
    for (label, c, style) in legend {
        let (a, b) = ((lx, ly), (lx + 40, ly));
        match style {
            Style::TierkitLocal => {
                area.draw(&PathElement::new(vec![a, b], c.stroke_width(3)))
                    .map_err(plot_err)?;
                area.draw(&Circle::new((lx + 20, ly), 5, c.filled()))
                    .map_err(plot_err)?;
            }
            Style::TierkitOther => {
                area.draw(&PathElement::new(vec![a, b], c.stroke_width(2)))
                    .map_err(plot_err)?;
                area.draw(&TriangleMarker::new((lx + 20, ly), 6, c.stroke_width(2)))
                    .map_err(plot_err)?;
            }
            Style::Memset => {
                area.draw(&DashedPathElement::new(vec![a, b], 8, 5, c.stroke_width(2)))
                    .map_err(plot_err)?;
                area.draw(&Rectangle::new(
                    [(lx + 16, ly - 4), (lx + 24, ly + 4)],
                    c.filled(),
                ))
                .map_err(plot_err)?;
            }
            Style::Kernel => {
                area.draw(&DashedPathElement::new(vec![a, b], 2, 5, c.stroke_width(2)))
                    .map_err(plot_err)?;
            }
            Style::Thin => {
                area.draw(&PathElement::new(vec![a, b], c.stroke_width(1)))
                    .map_err(plot_err)?;
            }
        }
        area.draw(&Text::new(
            label.clone(),
            (lx + 50, ly),
            TextStyle::from(font.clone()).pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(plot_err)?;
        ly += 24;
    }
    Ok(ly)
}

/// The SVG chart of `bench clear`: GB/s against threads.
pub fn clear_svg(d: &ClearData) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let (plot_area, legend_area) = root.split_horizontally(660);
        let tmax = d.max_threads();
        let mut ymax: f64 = 0.0;
        for r in &d.rows {
            ymax = ymax.max(r.tierkit_mbps as f64 / 1000.0);
            ymax = ymax.max(r.memset_mbps.unwrap_or(0) as f64 / 1000.0);
        }
        for s in &d.serial {
            ymax = ymax.max(s.mbps as f64 / 1000.0);
        }
        let ymax = if ymax > 0.0 { ymax * 1.15 } else { 1.0 };
        let (x0, x1) = (0.75, tmax as f64 + 0.25);
        let mut chart = ChartBuilder::on(&plot_area)
            .caption(
                "tierkit: clearing 1 GiB, GB/s against threads",
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
            .y_max_light_lines(1)
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 16))
            .x_desc("threads (workers)")
            .y_desc("GB/s")
            .light_line_style(RGBColor(240, 240, 240))
            .draw()
            .map_err(plot_err)?;

        let nodes = d.nodes();
        let color = |nid: u32| {
            let i = nodes.iter().position(|n| n.0 == nid).unwrap_or(0);
            NODE_COLORS[i % NODE_COLORS.len()]
        };
        let mut legend: Vec<(String, RGBColor, Style)> = Vec::new();

        // Reference lines first, tierkit on top.
        for s in &d.serial {
            let c = color(s.nid);
            let y = s.mbps as f64 / 1000.0;
            chart
                .draw_series(DashedLineSeries::new(
                    [(x0, y), (x1, y)],
                    2,
                    5,
                    c.stroke_width(2),
                ))
                .map_err(plot_err)?;
            legend.push((
                format!("kernel serial, node {} ({}), 1 thread", s.nid, s.kind),
                c,
                Style::Kernel,
            ));
        }
        for (nid, kind) in &nodes {
            let pts: Vec<(f64, f64)> = d
                .memset_line(*nid)
                .into_iter()
                .map(|(t, g)| (t as f64, g))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let c = color(*nid);
            chart
                .draw_series(DashedLineSeries::new(pts.clone(), 8, 5, c.stroke_width(2)))
                .map_err(plot_err)?;
            chart
                .draw_series(pts.iter().map(|&p| {
                    EmptyElement::at(p)
                        + Rectangle::new([(-4, -4), (4, 4)], ShapeStyle::from(c).filled())
                }))
                .map_err(plot_err)?;
            legend.push((format!("memset, node {nid} ({kind})"), c, Style::Memset));
        }
        let series = d.series();
        let step = if tmax == 1 { 0.05 } else { 0.012 };
        for (k, (nid, kind, place)) in series.iter().cloned().enumerate() {
            let c = color(nid);
            // Dodge: series side by side at each T, so equal figures (one
            // CPU per node, or no locality under TCG) do not hide each other.
            let dx = (k as f64 - (series.len() as f64 - 1.0) / 2.0) * step * (x1 - x0);
            let mut pts: Vec<(f64, f64)> = d
                .rows
                .iter()
                .filter(|r| r.nid == nid && r.placement == place)
                .map(|r| (r.threads as f64 + dx, r.tierkit_mbps as f64 / 1000.0))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let local = place == "local";
            let width = if local { 3 } else { 2 };
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(width)))
                .map_err(plot_err)?;
            if local {
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 5, c.filled())))
                    .map_err(plot_err)?;
            } else {
                chart
                    .draw_series(
                        pts.iter()
                            .map(|&p| TriangleMarker::new(p, 6, ShapeStyle::from(WHITE).filled())),
                    )
                    .map_err(plot_err)?;
                chart
                    .draw_series(
                        pts.iter()
                            .map(|&p| TriangleMarker::new(p, 6, c.stroke_width(2))),
                    )
                    .map_err(plot_err)?;
            }
            // The figure next to each tierkit point, while they fit.
            if series.len() <= 3 {
                chart
                    .draw_series(pts.iter().map(|&(x, y)| {
                        Text::new(
                            format!("{y:.2}"),
                            (x + 0.03 * (x1 - x0), y),
                            ("sans-serif", 12).into_font().color(&c),
                        )
                    }))
                    .map_err(plot_err)?;
            }
            legend.push((
                format!("tierkit, node {nid} ({kind}), {place}"),
                c,
                if local {
                    Style::TierkitLocal
                } else {
                    Style::TierkitOther
                },
            ));
        }

        // The legend, beside the plot (never over a line).
        let lx = 10;
        let mut ly = draw_legend(&legend_area, lx, &legend)?;
        ly += 16;
        let small = ("sans-serif", 12).into_font();
        let mut notes = vec![
            format!("clear_pages variant: {}", d.variant),
            format!("{}, -cpu {}", d.accel, d.cpu_model),
            format!("guest: {}", d.topology),
            "best of R; memset: same CPUs, 1 GiB on the node".to_string(),
            "kernel serial: first touch of a 1 GiB hugetlb page".to_string(),
        ];
        if series.len() <= 3 {
            notes.push("labels: tierkit GB/s".to_string());
        }
        if d.accel.eq_ignore_ascii_case("tcg") {
            notes.push(
                "TCG: emulated stores, no physical NUMA locality; local vs remote needs bare metal"
                    .to_string(),
            );
        }
        for note in notes {
            for part in wrap(&note, 56) {
                legend_area
                    .draw(&Text::new(
                        part,
                        (lx, ly),
                        TextStyle::from(small.clone()).pos(Pos::new(HPos::Left, VPos::Center)),
                    ))
                    .map_err(plot_err)?;
                ly += 16;
            }
        }
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

// ---------------------------------------------------------------------------
// `bench gigantic`: time to first use of 1 GiB (issue 10)
// ---------------------------------------------------------------------------

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
    pub rows: Vec<GiganticRow>,
    pub skipped: Vec<GiganticSkip>,
}

/// hugetlb ÷ tierkit targets of issue 10, by worker count.
const GIGANTIC_TARGETS: [(u32, f64); 2] = [(1, 0.95), (2, 1.8)];
/// hugetlb ÷ tierkit-from-a-ready-pool target of issue 10.
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

    /// hugetlb's median on `nid`, ns.
    fn hugetlb_ns(&self, nid: u32) -> Option<u64> {
        self.rows
            .iter()
            .find(|r| r.nid == nid && r.variant == "hugetlb")
            .map(|r| r.median_ns)
    }

    /// tierkit's median from a ready pool on `nid`, ns.
    fn pool_ns(&self, nid: u32) -> Option<u64> {
        self.rows
            .iter()
            .find(|r| r.nid == nid && r.variant == "pool")
            .map(|r| r.median_ns)
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
            "summary: time to first use of 1 GiB (mmap .. every 4 KiB page touched), median of {}, {} -cpu {}",
            d.reps, d.accel, d.cpu_model
        ),
        format!(
            "  {:<14} {:<14} {:>9} {:>16}",
            "node", "variant", "seconds", "hugetlb/tierkit"
        ),
    ];
    let mut table = Vec::new();
    let mut targets = Vec::new();
    for (nid, kind) in d.nodes() {
        let node = format!("{nid} ({kind})");
        let huge = d.hugetlb_ns(nid);
        if let Some(h) = huge {
            lines.push(format!(
                "  {node:<14} {:<14} {:>9.3} {:>16}",
                "hugetlb",
                h as f64 / 1e9,
                "-"
            ));
            table.push(
                json!({"nid": nid, "kind": kind, "variant": "hugetlb", "threads": 1,
                              "seconds": h as f64 / 1e9}),
            );
        }
        let tk = d.tierkit(nid);
        for &(t, ns) in &tk {
            let ratio = huge.map(|h| first_use_ratio(h, ns));
            lines.push(format!(
                "  {node:<14} {:<14} {:>9.3} {:>16}",
                format!("tierkit T={t}"),
                ns as f64 / 1e9,
                ratio.map_or("-".into(), |x| format!("{x:.2}"))
            ));
            table.push(
                json!({"nid": nid, "kind": kind, "variant": "tierkit", "threads": t,
                              "seconds": ns as f64 / 1e9, "hugetlb_over_tierkit": ratio}),
            );
        }
        let pool = d.pool_ns(nid);
        if let Some(ns) = pool {
            let ratio = huge.map(|h| first_use_ratio(h, ns));
            lines.push(format!(
                "  {node:<14} {:<14} {:>9.3} {:>16}",
                "tierkit pool",
                ns as f64 / 1e9,
                ratio.map_or("-".into(), |x| format!("{x:.2}"))
            ));
            table.push(
                json!({"nid": nid, "kind": kind, "variant": "pool", "threads": 0,
                              "seconds": ns as f64 / 1e9, "hugetlb_over_tierkit": ratio}),
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
                verdict(met)
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
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
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
        let small = ("sans-serif", 12).into_font();
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
        for note in notes {
            for part in wrap(&note, 56) {
                legend_area
                    .draw(&Text::new(
                        part,
                        (lx, ly),
                        TextStyle::from(small.clone()).pos(Pos::new(HPos::Left, VPos::Center)),
                    ))
                    .map_err(plot_err)?;
                ly += 16;
            }
        }
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// Splits `s` at spaces into lines of at most about `width` characters.
fn wrap(s: &str, width: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for w in s.split(' ') {
        if !cur.is_empty() && cur.len() + 1 + w.len() > width {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(w);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Short bar labels for the `wi` variants.
fn wi_label(r: &WiResult) -> String {
    match r.variant.as_str() {
        "tierkit" => "tierkit mmap (weighted)".into(),
        "kernel_weighted_interleave" => "anon MPOL_WEIGHTED_INTERLEAVE".into(),
        "kernel_interleave" => "anon MPOL_INTERLEAVE".into(),
        "kernel_local" => "anon default (local)".into(),
        _ => r.name.clone(),
    }
}

/// The SVG chart of `bench wi`: median pages/s per variant, as bars.
pub fn wi_svg(d: &WiData) -> Result<String> {
    let mut svg = String::new();
    {
        let n = d.results.len() as u32;
        // Integer coordinates include their end: 0..=last is n segments.
        let last = n.max(2) - 1;
        // Top to bottom in the order measured (tierkit first).
        let row = |i: usize| last - i as u32;
        let root = SVGBackend::with_string(&mut svg, (900, 120 + 70 * n)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let xmax = d
            .results
            .iter()
            .map(|r| r.pages_per_s_median.max(r.pages_per_s_best))
            .fold(0.0, f64::max)
            .max(1.0)
            * 1.5;
        let labels: Vec<String> = d.results.iter().map(wi_label).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "tierkit weighted interleave: pages/s delivered to userspace ({} MiB, median of {}; {}, -cpu {})",
                    d.mib, d.reps, d.accel, d.cpu_model
                ),
                ("sans-serif", 16),
            )
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(260)
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
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 15))
            .x_label_formatter(&|x| format!("{:.0}", x))
            .x_max_light_lines(1)
            .x_desc("pages/s (bar: median; black tick: best)")
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(plot_err)?;
        for (k, r) in d.results.iter().enumerate() {
            let i = row(k);
            let c = if r.variant == "tierkit" {
                NODE_COLORS[0]
            } else {
                RGBColor(150, 150, 150)
            };
            let mut bar = Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(i)),
                    (r.pages_per_s_median, SegmentValue::Exact(i + 1)),
                ],
                c.filled(),
            );
            bar.set_margin(12, 12, 0, 0);
            chart.draw_series([bar]).map_err(plot_err)?;
            if r.pages_per_s_best > 0.0 {
                chart
                    .draw_series([PathElement::new(
                        vec![
                            (r.pages_per_s_best, SegmentValue::Exact(i)),
                            (r.pages_per_s_best, SegmentValue::Exact(i + 1)),
                        ],
                        BLACK.stroke_width(2),
                    )])
                    .map_err(plot_err)?;
            }
            let text = if r.variant == "tierkit" {
                format!("{:.0}", r.pages_per_s_median)
            } else {
                format!(
                    "{:.0}  (tierkit / this = {:.2})",
                    r.pages_per_s_median, r.tierkit_over_this
                )
            };
            chart
                .draw_series([Text::new(
                    text,
                    (
                        r.pages_per_s_median.max(r.pages_per_s_best) + xmax * 0.01,
                        SegmentValue::CenterOf(i),
                    ),
                    TextStyle::from(("sans-serif", 15).into_font())
                        .pos(Pos::new(HPos::Left, VPos::Center)),
                )])
                .map_err(plot_err)?;
        }
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// Adds the summary to `<dir>/<name>.json`, prints it, and draws
/// `<dir>/<name>.svg`. Returns the chart's path.
pub fn finish(name: &str, dir: &Path) -> Result<PathBuf> {
    let json_path = dir.join(format!("{name}.json"));
    let text = std::fs::read_to_string(&json_path)
        .with_context(|| format!("reading {}", json_path.display()))?;
    let mut doc: Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", json_path.display()))?;
    let (summary, lines, svg) = match name {
        "clear" => {
            let d = ClearData::from_doc(&doc)?;
            let (s, l) = clear_summary(&d);
            (s, l, clear_svg(&d)?)
        }
        "wi" => {
            let d = WiData::from_doc(&doc)?;
            let (s, l) = wi_summary(&d);
            (s, l, wi_svg(&d)?)
        }
        "gigantic" => {
            let d = GiganticData::from_doc(&doc)?;
            let (s, l) = gigantic_summary(&d);
            (s, l, gigantic_svg(&d)?)
        }
        other => return Err(anyhow!("no chart for bench {other}")),
    };
    doc["summary"] = summary;
    util::write_atomic(&json_path, serde_json::to_string_pretty(&doc)?.as_bytes())?;
    let svg_path = dir.join(format!("{name}.svg"));
    util::write_atomic(&svg_path, svg.as_bytes())?;
    println!();
    for l in lines {
        println!("{l}");
    }
    Ok(svg_path)
}

/// [`finish`], reporting instead of failing: a missing chart does not
/// make the benchmark fail.
pub fn report(name: &str) {
    if name == ALL {
        // `cargo xtask bench` with no name: `run_all` writes the report.
        return;
    }
    let dir = util::out_dir().join("bench");
    match finish(name, &dir) {
        Ok(p) => say!("bench chart: {}", p.display()),
        Err(e) => say!("bench chart: not drawn: {e:#}"),
    }
}

// ---------------------------------------------------------------------------
// `cargo xtask bench` with no name: every benchmark, one boot per topology,
// and the report (issue 12)
// ---------------------------------------------------------------------------

/// The guest mode (`bench-all`, `/bin/tk-bench-all`) and the name of its
/// results file, `target/tierkit/bench/all.json`.
pub const ALL: &str = "all";

/// The topologies `cargo xtask bench` boots without `--topology`.
const REPORT_TOPOLOGIES: [TopologyKind; 2] = [TopologyKind::NUMA, TopologyKind::CXL];

/// `cargo xtask bench` with no name.
pub(crate) fn run_all(g: &crate::cli::GuestArgs) -> Result<ExitCode> {
    let kinds = all_kinds(g);
    let total = Timer::start();
    let load_before = loadavg();
    let report_dir = util::out_dir().join("report");
    std::fs::create_dir_all(&report_dir)?;
    let bench_json = util::out_dir().join("bench").join(format!("{ALL}.json"));
    let mut runs = Vec::new();
    for (i, &kind) in kinds.iter().enumerate() {
        println!();
        say!(
            "===== bench: topology {kind} ({}/{}) =====",
            i + 1,
            kinds.len()
        );
        let _ = std::fs::remove_file(&bench_json);
        let t = Timer::start();
        let label = kind.to_string();
        let mut req = all_request(g, kind);
        req.label = Some(label);
        let ok = match crate::guest::guest_cmd(g, req) {
            Ok(r) => r.ok,
            Err(e) => {
                eprintln!("\nerror ({kind}): {e:#}");
                false
            }
        };
        let secs = t.elapsed().as_secs_f64();
        let doc = std::fs::read_to_string(&bench_json)
            .ok()
            .and_then(|s| serde_json::from_str::<Value>(&s).ok());
        if let Some(d) = &doc {
            util::write_atomic(
                &report_dir.join(format!("raw-{kind}.json")),
                serde_json::to_string_pretty(d)?.as_bytes(),
            )?;
        }
        runs.push(TopoRun {
            topology: kind.to_string(),
            ok,
            seconds: secs,
            doc,
        });
    }
    let meta = RunMeta {
        seconds: total.elapsed().as_secs_f64(),
        load_before,
        load_after: loadavg(),
    };
    let rep = Report::build(&runs, &meta);
    rep.write(&report_dir)?;
    println!();
    for l in rep.summary_lines() {
        println!("{l}");
    }
    say!("report: {}", report_dir.join("report.md").display());
    let ok = runs.iter().all(|r| r.ok);
    println!(
        "tierkit bench: {} ({} topolog{}, {})",
        if ok { "ok" } else { "FAILED" },
        runs.len(),
        if runs.len() == 1 { "y" } else { "ies" },
        fmt_dur(total.elapsed())
    );
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The topologies `bench` without a name boots: `--topology`'s, or
/// [`REPORT_TOPOLOGIES`].
pub(crate) fn all_kinds(g: &crate::cli::GuestArgs) -> Vec<TopologyKind> {
    match g.topology {
        Some(k) => vec![k],
        None => REPORT_TOPOLOGIES.to_vec(),
    }
}

/// The boot of `bench` without a name on `kind` (default profile).
pub(crate) fn all_request(
    g: &crate::cli::GuestArgs,
    kind: TopologyKind,
) -> crate::guest::GuestRequest {
    let mut req = crate::guest::GuestRequest::new(
        Mode::Bench(ALL.into()),
        g,
        crate::profile::Profile::Default,
        kind,
        false,
    );
    req.cxl_opts_on_cxl_only = g.topology.is_none();
    req
}

/// `/proc/loadavg`'s first three figures.
fn loadavg() -> Option<String> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clear_doc() -> Value {
        let row = |nid: u32, kind: &str, place: &str, t: u32, tk: u64, ms: u64| {
            json!({
                "nid": nid, "kind": kind, "placement": place, "threads": t, "workers": t,
                "cpu_node": 0, "elapsed_ns": (1u64 << 30) * 1000 / tk, "bytes": 1u64 << 30,
                "tierkit_mbps": tk, "memset_mbps": ms, "store_loop_mbps": 6500,
                "tierkit_speedup": if t == 1 { 1.0 } else { 1.58 },
                "memset_speedup": if t == 1 { 1.0 } else { 1.18 },
                "tierkit_over_memset": tk as f64 / ms as f64,
                "speedup_fraction_of_memset": if t == 1 { 1.0 } else { 1.34 },
            })
        };
        json!({
            "bench": "clear", "accel": "Tcg", "cpu_model": "max", "topology": "numa",
            "topology_detail": "node0: 2 CPUs + 6G, node1: 3G memory-only",
            "results": [{
                "bin": "tk-bench-clear", "kind": "bench", "ok": true, "checks": [],
                "variant": "erms", "nr_gigantic": 1,
                "rows": [
                    row(0, "dram", "local", 1, 610, 530),
                    row(0, "dram", "local", 2, 960, 620),
                    row(0, "dram", "remote", 1, 520, 530),
                    row(1, "cxl", "local", 1, 490, 550),
                    row(1, "cxl", "local", 2, 820, 660),
                ],
                "kernel_serial": [
                    {"nid": 0, "kind": "dram", "elapsed_ns": 1_760_000_000u64, "mbps": 610, "source": "reserved at runtime"},
                    {"nid": 1, "kind": "cxl", "elapsed_ns": 1_990_000_000u64, "mbps": 540, "source": "reserved at runtime"},
                ],
            }],
        })
    }

    fn wi_doc() -> Value {
        let v = |key: &str, name: &str, med: f64, best: f64, ratio: f64| {
            json!({"variant": key, "name": name, "elapsed_ns": [1, 2, 3],
                   "pages_per_s_median": med, "pages_per_s_best": best,
                   "tierkit_over_this": ratio, "per_node": [[0, 13216], [1, 3168]]})
        };
        json!({
            "bench": "wi", "accel": "Tcg", "cpu_model": "max",
            "results": [{
                "bin": "tk-bench-wi", "kind": "bench", "ok": true, "mib": 64, "reps": 5,
                "results": [
                    v("tierkit", "tierkit mmap (weighted interleave)", 96930.0, 122024.0, 1.0),
                    v("kernel_weighted_interleave", "anon MPOL_WEIGHTED_INTERLEAVE", 77706.0, 82238.0, 1.25),
                    v("kernel_interleave", "anon MPOL_INTERLEAVE", 74792.0, 80000.0, 1.30),
                    v("kernel_local", "anon default (local)", 83545.0, 90000.0, 1.16),
                ],
            }],
        })
    }

    fn tmp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("xtask-bench-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn clear_chart_and_summary() {
        let dir = tmp_dir("clear");
        std::fs::write(dir.join("clear.json"), clear_doc().to_string()).unwrap();
        let svg_path = finish("clear", &dir).unwrap();
        assert_eq!(svg_path, dir.join("clear.svg"));
        let svg = std::fs::read_to_string(&svg_path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        assert!(svg.trim_end().ends_with("</svg>"));
        for name in [
            "tierkit, node 0 (dram), local",
            "tierkit, node 0 (dram), remote",
            "tierkit, node 1 (cxl), local",
            "memset, node 0 (dram)",
            "memset, node 1 (cxl)",
            "kernel serial, node 0 (dram), 1 thread",
            "kernel serial, node 1 (cxl), 1 thread",
            "GB/s against threads",
            "clear_pages variant: erms",
            "\n0.96\n",
        ] {
            assert!(svg.contains(name), "no {name:?} in the SVG");
        }
        // The summary went into the JSON; the rest of it is untouched.
        let doc: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("clear.json")).unwrap())
                .unwrap();
        assert_eq!(doc["bench"], "clear");
        let s = &doc["summary"];
        assert_eq!(s["variant"], "erms");
        let k0 = &s["kernel_serial"][0];
        let r = k0["tierkit1_over_kernel_serial_time"].as_f64().unwrap();
        assert!((r - 1.0).abs() < 0.01, "{r}");
        assert_eq!(k0["met"], true);
        let sc = s["scaling_at_max_threads"].as_array().unwrap();
        assert_eq!(sc.len(), 3);
        assert_eq!(sc[0]["threads"], 2);
        assert_eq!(sc[0]["met"], true);
        // One thread only: no speedup target to meet.
        assert_eq!(sc[1]["placement"], "remote");
        assert_eq!(sc[1]["met"], Value::Null);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn clear_summary_lines() {
        let d = ClearData::from_doc(&clear_doc()).unwrap();
        let (_, lines) = clear_summary(&d);
        let text = lines.join("\n");
        assert!(text.contains("clear_pages variant erms"), "{text}");
        assert!(
            text.contains("node 0 (dram): kernel serial 0.61 GB/s; tierkit 1 worker / kernel serial time = 1.00 (target <= 1.10: met)"),
            "{text}"
        );
        assert!(
            text.contains("node 0 (dram) local T=2: tierkit 0.96 GB/s, speedup 1.58x vs memset 1.18x = 1.34 of memset's (target >= 0.90: met)"),
            "{text}"
        );
    }

    #[test]
    fn wi_chart_and_summary() {
        let dir = tmp_dir("wi");
        std::fs::write(dir.join("wi.json"), wi_doc().to_string()).unwrap();
        let svg_path = finish("wi", &dir).unwrap();
        let svg = std::fs::read_to_string(&svg_path).unwrap();
        assert!(svg.starts_with("<svg"));
        for name in [
            "tierkit mmap (weighted)",
            "anon MPOL_WEIGHTED_INTERLEAVE",
            "anon MPOL_INTERLEAVE",
            "anon default (local)",
            "96930",
            "tierkit / this = 1.25",
        ] {
            assert!(svg.contains(name), "no {name:?} in the SVG");
        }
        let doc: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("wi.json")).unwrap()).unwrap();
        assert_eq!(doc["summary"]["variants"].as_array().unwrap().len(), 4);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn no_rows_is_an_error_not_a_panic() {
        let doc = json!({"bench": "clear", "results": [{"bin": "tk-bench-clear", "ok": false}]});
        assert!(ClearData::from_doc(&doc).is_err());
        assert!(WiData::from_doc(&json!({})).is_err());
    }

    fn gigantic_doc() -> Value {
        let tk = |nid: u32, kind: &str, t: u32, ns: u64| {
            json!({"nid": nid, "kind": kind, "variant": "tierkit", "threads": t,
                   "placement": "local", "workers": t, "cpu_node": 0,
                   "samples_ns": [ns, ns + 1, ns - 1], "median_ns": ns})
        };
        let huge = |nid: u32, kind: &str, ns: u64| {
            json!({"nid": nid, "kind": kind, "variant": "hugetlb", "threads": 1,
                   "page": "reserved at runtime", "samples_ns": [ns], "median_ns": ns})
        };
        json!({
            "bench": "gigantic", "accel": "Tcg", "cpu_model": "max", "topology": "numa",
            "topology_detail": "node0: 2 CPUs + 4G, node1: 2G memory-only",
            "results": [{
                "bin": "tk-bench-gigantic", "kind": "bench", "ok": true, "checks": [],
                "reps": 3,
                "rows": [
                    tk(0, "dram", 1, 1_110_000_000),
                    tk(0, "dram", 2, 610_000_000),
                    huge(0, "dram", 1_050_000_000),
                    json!({"nid": 0, "kind": "dram", "variant": "pool", "threads": 0,
                           "workers": 0, "samples_ns": [42_000_000u64], "median_ns": 42_000_000u64}),
                    tk(1, "cxl", 1, 1_000_000_000),
                ],
                "ratios": [],
                "skipped": [{"nid": 1, "kind": "cxl", "variant": "hugetlb",
                             "reason": "no 1 GiB hugetlb page could be reserved"},
                            {"nid": 1, "kind": "cxl", "variant": "pool",
                             "reason": "ENOSPC"}],
            }],
        })
    }

    #[test]
    fn gigantic_summary_table_and_targets() {
        let d = GiganticData::from_doc(&gigantic_doc()).unwrap();
        assert_eq!(d.reps, 3);
        let (v, lines) = gigantic_summary(&d);
        let text = lines.join("\n");
        // The issue's own figures: 1.05 / 1.11 = 0.95 (just short of 0.95),
        // 1.05 / 0.61 = 1.72.
        assert!(
            text.contains("0 (dram)       hugetlb            1.050                -"),
            "{text}"
        );
        assert!(
            text.contains("0 (dram)       tierkit T=2        0.610             1.72"),
            "{text}"
        );
        assert!(
            text.contains(
                "target node 0 (dram) T=1: hugetlb / tierkit 0.95 (target >= 0.95: missed)"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "target node 0 (dram) T=2: hugetlb / tierkit 1.72 (target >= 1.8: missed)"
            ),
            "{text}"
        );
        // No hugetlb on node 1: no ratio, no verdict, and the reason shown.
        assert!(
            text.contains("target node 1 (cxl) T=1: hugetlb / tierkit - (target >= 0.95: n/a)"),
            "{text}"
        );
        assert!(
            text.contains("node 1 (cxl) hugetlb: skipped: no 1 GiB hugetlb page"),
            "{text}"
        );
        // From a ready pool: 1.05 / 0.042 = 25.
        assert!(
            text.contains("0 (dram)       tierkit pool       0.042            25.00"),
            "{text}"
        );
        assert!(
            text.contains("target node 0 (dram) pool: hugetlb / tierkit 25.00 (target >= 20: met)"),
            "{text}"
        );
        assert!(
            text.contains("target node 1 (cxl) pool: hugetlb / tierkit - (target >= 20: n/a)"),
            "{text}"
        );
        assert!(
            text.contains("node 1 (cxl) pool: skipped: ENOSPC"),
            "{text}"
        );
        assert!(!text.contains("not built"), "{text}");
        let t = v["targets"].as_array().unwrap();
        assert_eq!(t.len(), 6);
        assert_eq!(t[0]["met"], false);
        assert_eq!(t[2]["variant"], "pool");
        assert_eq!(t[2]["met"], true);
        assert_eq!(t[3]["met"], Value::Null);
        assert_eq!(t[5]["met"], Value::Null);
        let r = t[1]["hugetlb_over_tierkit"].as_f64().unwrap();
        assert!((r - 1.05 / 0.61).abs() < 1e-9, "{r}");
        assert_eq!(v["table"].as_array().unwrap().len(), 5);
    }

    #[test]
    fn gigantic_target_met_when_faster() {
        let mut doc = gigantic_doc();
        // tierkit T=2 at 0.5 s against hugetlb's 1.05 s: 2.1 >= 1.8.
        doc["results"][0]["rows"][1]["median_ns"] = json!(500_000_000u64);
        let d = GiganticData::from_doc(&doc).unwrap();
        let (v, _) = gigantic_summary(&d);
        assert_eq!(v["targets"][1]["met"], true);
    }

    #[test]
    fn gigantic_chart() {
        let dir = tmp_dir("gigantic");
        std::fs::write(dir.join("gigantic.json"), gigantic_doc().to_string()).unwrap();
        let svg_path = finish("gigantic", &dir).unwrap();
        assert_eq!(svg_path, dir.join("gigantic.svg"));
        let svg = std::fs::read_to_string(&svg_path).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        for name in [
            "time to first use of 1 GiB: tierkit vs hugetlb",
            "tierkit, node 0 (dram)",
            "tierkit, node 1 (cxl)",
            "hugetlb first fault, node 0 (dram)",
            "0.61 s (x1.72)",
            "skipped node 1 hugetlb",
            "tierkit from a ready pool, node 0 (dram)",
            "pool 0.042 s (x25.0)",
            "&gt;= 20 from a ready pool",
        ] {
            assert!(svg.contains(name), "no {name:?} in the SVG");
        }
        assert!(!svg.contains("hugetlb first fault, node 1"));
        assert!(!svg.contains("ready pool, node 1"));
        assert!(!svg.contains("not built"));
        let doc: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("gigantic.json")).unwrap())
                .unwrap();
        assert_eq!(doc["bench"], "gigantic");
        assert_eq!(doc["summary"]["targets"].as_array().unwrap().len(), 6);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn gigantic_no_rows_is_an_error() {
        let doc =
            json!({"bench": "gigantic", "results": [{"bin": "tk-bench-gigantic", "ok": false}]});
        assert!(GiganticData::from_doc(&doc).is_err());
    }

    #[test]
    fn wraps_at_spaces() {
        assert_eq!(wrap("a bb ccc dddd", 6), vec!["a bb", "ccc", "dddd"]);
    }
}
