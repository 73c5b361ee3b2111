//! After `cargo xtask bench <name>`: read `target/tierkit/bench/<name>.json`
//! (written by `write_bench` in boot/results.rs), add a compact `summary` of the
//! ratios against their targets, print it, and draw an SVG chart next to it:
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
use serde_json::Value;
use std::path::{Path, PathBuf};

use crate::{say, util};

mod chart;
mod clear;
mod doc;
mod gigantic;
mod rebalance;
mod report_all;
mod scale_table;
#[cfg(test)]
mod tests;
mod tkrun_table;
mod wi;
pub use clear::{clear_summary, clear_svg, ClearData, ClearRow, KernelSerial};
pub use gigantic::{gigantic_summary, gigantic_svg, GiganticData, GiganticRow, GiganticSkip};
pub use report_all::{Report, RunMeta, TopoRun};
pub use wi::{wi_summary, wi_svg, WiData, WiResult};

/// The guest mode (`bench-all`, `/bin/tk-bench-all`) and the name of its
/// results file, `target/tierkit/bench/all.json`.
pub const ALL: &str = "all";

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
        // `cargo xtask bench` with no name: commands/bench.rs writes the report.
        return;
    }
    let dir = util::out_dir().join("bench");
    match finish(name, &dir) {
        Ok(p) => say!("bench chart: {}", p.display()),
        Err(e) => say!("bench chart: not drawn: {e:#}"),
    }
}
