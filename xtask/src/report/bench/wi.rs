//! `bench wi`: pages/s delivered to userspace per variant (tierkit's
//! weighted interleave against the kernel's policies), as bars -> `wi.svg`.

use anyhow::{anyhow, Context, Result};
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Deserialize;
use serde_json::{json, Value};

use super::chart::{plot_err, svg_chart, NODE_COLORS};
use super::doc::{records, str_of};

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
    let n = d.results.len() as u32;
    // Integer coordinates include their end: 0..=last is n segments.
    let last = n.max(2) - 1;
    // Top to bottom in the order measured (tierkit first).
    let row = |i: usize| last - i as u32;
    svg_chart((900, 120 + 70 * n), |root| {
        let xmax = d
            .results
            .iter()
            .map(|r| r.pages_per_s_median.max(r.pages_per_s_best))
            .fold(0.0, f64::max)
            .max(1.0)
            * 1.5;
        let labels: Vec<String> = d.results.iter().map(wi_label).collect();
        let mut chart = ChartBuilder::on(root)
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
        Ok(())
    })
}
