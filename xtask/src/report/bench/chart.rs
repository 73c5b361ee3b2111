//! What the bench charts share: the SVG frame ([`svg_chart`]), node
//! colours, the threads axis, the legend's line styles and notes, text
//! wrapping, and plotters' errors as [`anyhow::Error`]s.

use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// An SVG chart of `size` pixels: a white drawing area that `draw` paints,
/// presented; returns the SVG text.
pub(super) fn svg_chart(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<()>,
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        draw(&root)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// Colours per node (tierkit, memset and kernel lines of a node share one).
pub(super) const NODE_COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
];

/// An x-axis label of a chart against worker threads: whole numbers from
/// 1 on, nothing between them.
pub(super) fn thread_tick(x: &f64) -> String {
    let r = x.round();
    if (x - r).abs() < 1e-6 && r >= 1.0 {
        format!("{r}")
    } else {
        String::new()
    }
}

pub(super) fn plot_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing the chart: {e:?}")
}

/// The legend's line styles.
#[derive(Clone, Copy)]
pub(super) enum Style {
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
pub(super) fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
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

/// Splits `s` at spaces into lines of at most about `width` characters.
pub(super) fn wrap(s: &str, width: usize) -> Vec<String> {
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

/// Draws `notes` in small type from y = `ly` at x = `lx` of `area`, each
/// wrapped at about 56 characters, one line per 16 px.
pub(super) fn draw_notes<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    lx: i32,
    mut ly: i32,
    notes: Vec<String>,
) -> Result<()> {
    let small = ("sans-serif", 12).into_font();
    for note in notes {
        for part in wrap(&note, 56) {
            area.draw(&Text::new(
                part,
                (lx, ly),
                TextStyle::from(small.clone()).pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(plot_err)?;
            ly += 16;
        }
    }
    Ok(())
}
