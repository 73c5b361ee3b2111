//! The report's own charts: a workload's throughput per policy with the
//! model's prediction as a tick, and measured against predicted.

use anyhow::Result;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::figures::num;
use super::targets::{ACCURACY, MODELLED};
use super::Row;
use crate::report::bench::chart::{plot_err, svg_chart, NODE_COLORS};

/// Bars of `rows`' measured figures per policy (and variant), with the
/// prediction as a black tick where there is one.
pub(super) fn policy_svg(
    topology: &str,
    workload: &str,
    rows: &[&Row],
    regime: &str,
) -> Result<String> {
    let n = rows.len() as u32;
    let last = n.max(2) - 1;
    svg_chart((900, 110 + 46 * n), |root| {
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
        let mut chart = ChartBuilder::on(root)
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
        Ok(())
    })
}

/// Measured against predicted, log-log, one colour per workload, with the
/// diagonal and the ±15% band.
pub(super) fn model_svg(topology: &str, rows: &[&Row], regime: &str) -> Result<String> {
    svg_chart((900, 640), |root| {
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
        Ok(())
    })
}
