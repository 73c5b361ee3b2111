//! `bench clear`: GB/s clearing 1 GiB against threads, one line per (node,
//! placement) for tierkit, the userspace `memset` of the same size with the
//! same threads (dashed) and the kernel's serial clear (dotted, one thread,
//! drawn across) of each node -> `clear.svg`.

use anyhow::{anyhow, Context, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use serde::Deserialize;
use serde_json::{json, Value};

use super::chart::{draw_legend, draw_notes, plot_err, svg_chart, thread_tick, Style, NODE_COLORS};
use super::doc::{records, str_of, target_word};

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
            target_word(met)
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
                target_word(met),
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

/// The SVG chart of `bench clear`: GB/s against threads.
pub fn clear_svg(d: &ClearData) -> Result<String> {
    svg_chart((1000, 560), |root| {
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
        draw_tierkit_series(&mut chart, d, &series, &color, (x0, x1), &mut legend)?;

        // The legend, beside the plot (never over a line).
        let lx = 10;
        let mut ly = draw_legend(&legend_area, lx, &legend)?;
        ly += 16;
        draw_notes(&legend_area, lx, ly, clear_notes(d, series.len()))
    })
}

/// The tierkit lines of [`clear_svg`], one per (node, kind, placement) of
/// `series`, dodged side by side, with their legend entries.
fn draw_tierkit_series<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    d: &ClearData,
    series: &[(u32, String, String)],
    color: &impl Fn(u32) -> RGBColor,
    (x0, x1): (f64, f64),
    legend: &mut Vec<(String, RGBColor, Style)>,
) -> Result<()> {
    let tmax = d.max_threads();
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
    Ok(())
}

/// The notes under the legend of [`clear_svg`] (`series`: how many
/// tierkit lines it draws).
fn clear_notes(d: &ClearData, series: usize) -> Vec<String> {
    let mut notes = vec![
        format!("clear_pages variant: {}", d.variant),
        format!("{}, -cpu {}", d.accel, d.cpu_model),
        format!("guest: {}", d.topology),
        "best of R; memset: same CPUs, 1 GiB on the node".to_string(),
        "kernel serial: first touch of a 1 GiB hugetlb page".to_string(),
    ];
    if series <= 3 {
        notes.push("labels: tierkit GB/s".to_string());
    }
    if d.accel.eq_ignore_ascii_case("tcg") {
        notes.push(
            "TCG: emulated stores, no physical NUMA locality; local vs remote needs bare metal"
                .to_string(),
        );
    }
    notes
}
