//! `report.md`: the run, the targets, and per topology the calibration,
//! the workloads against the model, faults, clearing, placement, rebalance
//! and tk-run tables.

use serde_json::Value;
use std::fmt::Write as _;

use super::figures::{fmt_pages, num, target_word};
use super::targets::{noise_max, noise_of, MODELLED};
use super::topo::{s, Topo};
use super::{Report, Row};
use crate::report::bench::clear::clear_summary;
use crate::report::bench::gigantic::gigantic_summary;
use crate::report::bench::wi::wi_summary;
use crate::report::bench::{rebalance, scale_table, tkrun_table};

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
                target_word(g.met),
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
            md.push_str(&rebalance::markdown(&t.rebalance));
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
                md.push_str(&tkrun_table::markdown(v));
            }
            if let Some(v) = &t.scale {
                md.push_str(&scale_table::markdown(v));
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
