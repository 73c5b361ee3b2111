//! The markers /init prints on the console (`TIERKIT-BOOT`, `TIERKIT-INSMOD
//! rc=N`, `TIERKIT-<KIND>-START name` ... `TIERKIT-<KIND> name rc=N`,
//! `TIERKIT-DONE`, ...; defined in [`tierkit_protocol::marker`], printed by
//! `userspace-tests/src/init/`) and the programs' output on the data
//! channel, read into [`Markers`].

use crate::printk;
use std::collections::BTreeMap;
use tierkit_protocol::marker::{self, ProgKind};

/// One guest program run by /init (`TIERKIT-<KIND>-START name` ...
/// `TIERKIT-<KIND> name rc=N`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProgRun {
    /// `USERTEST`, `DEMO` or `BENCH`.
    pub kind: String,
    pub name: String,
    /// `None`: the end marker never came.
    pub rc: Option<i32>,
    /// The end marker's `timeout=` and `left=`.
    pub ending: marker::Ending,
    pub start_s: Option<f64>,
    pub end_s: Option<f64>,
    /// Its output, from the data channel.
    pub output: Vec<String>,
    /// Parsed `TIERKIT-JSON {...}` lines of its output.
    pub json: Vec<serde_json::Value>,
    /// `TIERKIT-JSON` lines that did not parse.
    pub bad_json: Vec<String>,
}

/// Everything /init reported.
#[derive(Clone, Debug, Default)]
pub struct Markers {
    pub booted: bool,
    /// The printk time of each marker that starts or ends a phase of the
    /// boot ([`PHASE_TAGS`]), in order.
    pub stamps: Vec<(String, f64)>,
    pub insmod_rc: Option<i32>,
    pub rmmod_rc: Option<i32>,
    /// `TIERKIT-DONE fails=N`.
    pub done: Option<i32>,
    pub progs: Vec<ProgRun>,
    /// `TIERKIT-ERROR ...` texts.
    pub errors: Vec<String>,
    pub notes: Vec<String>,
    /// `TIERKIT-TOPO ...` lines.
    pub topology: Vec<String>,
    /// `TIERKIT-CXL ...` lines (the CXL region assembly, step by step),
    /// with their timestamps.
    pub cxl: Vec<(Option<f64>, String)>,
    /// `TIERKIT-KMEMLEAK leaks=N`: the kmemleak scan after rmmod (debug
    /// profile) ran and found N unreferenced objects.
    pub kmemleak_leaks: Option<u32>,
}

impl Markers {
    /// `cxl step=<name>: <what>` errors as (step, what).
    pub fn cxl_errors(&self) -> Vec<(&str, &str)> {
        self.errors
            .iter()
            .filter_map(|e| e.strip_prefix("cxl step="))
            .map(|r| r.split_once(": ").unwrap_or((r, "")))
            .collect()
    }

    /// Seconds from `TIERKIT-CXL setup` to `TIERKIT-CXL ready` (the region
    /// assembly and onlining), if both came.
    pub fn cxl_setup_secs(&self) -> Option<f64> {
        let at = |p: &str| {
            self.cxl
                .iter()
                .find(|(_, l)| l.starts_with(p))
                .and_then(|(t, _)| *t)
        };
        Some(at("ready")? - at("setup")?)
    }
}

/// Marker kinds of guest programs run by /init.
fn is_prog_kind(k: &str) -> bool {
    ProgKind::from_tag(k).is_some()
}

fn rc_of(s: &str) -> Option<i32> {
    marker::field(s, "rc").and_then(|v| v.parse().ok())
}

/// The markers whose times split a boot into phases
/// ([`crate::timings::guest_parts`]).
pub const PHASE_TAGS: [&str; 5] = ["BOOT", "INSMOD-START", "INSMOD", "RMMOD-START", "DONE"];

/// Reads markers from the console (timestamps, order with KTAP) and program
/// output from the data channel.
pub fn scan(console: &str, data: &str) -> Markers {
    let mut m = Markers::default();
    let mut by_name: BTreeMap<String, usize> = BTreeMap::new();
    for line in console.lines() {
        let (ts, text) = printk::split_seconds(line);
        let Some(i) = text.find(marker::PREFIX) else {
            continue;
        };
        let Some((tag, rest)) = marker::split(text[i..].trim_end()) else {
            continue;
        };
        if let Some(t) = ts.filter(|_| PHASE_TAGS.contains(&tag)) {
            m.stamps.push((tag.to_string(), t));
        }
        match tag {
            marker::BOOT => m.booted = true,
            marker::INSMOD => m.insmod_rc = rc_of(rest),
            marker::RMMOD => m.rmmod_rc = rc_of(rest),
            marker::DONE => {
                m.done = Some(
                    marker::field(rest, "fails")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0),
                )
            }
            marker::ERROR => m.errors.push(rest.to_string()),
            marker::NOTE => m.notes.push(rest.to_string()),
            marker::TOPO => m.topology.push(rest.to_string()),
            marker::CXL => m.cxl.push((ts, rest.to_string())),
            marker::KMEMLEAK => {
                m.kmemleak_leaks = marker::field(rest, "leaks").and_then(|v| v.parse().ok())
            }
            _ => {
                if let Some(kind) = tag.strip_suffix("-START").filter(|k| is_prog_kind(k)) {
                    let name = rest
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_string();
                    by_name.insert(format!("{kind}/{name}"), m.progs.len());
                    m.progs.push(ProgRun {
                        kind: kind.to_string(),
                        name,
                        start_s: ts,
                        ..Default::default()
                    });
                } else if is_prog_kind(tag) {
                    let name = rest.split_whitespace().next().unwrap_or_default();
                    if let Some(&i) = by_name.get(&format!("{tag}/{name}")) {
                        m.progs[i].rc = rc_of(rest);
                        m.progs[i].ending = marker::ending(rest);
                        m.progs[i].end_s = ts;
                    }
                }
            }
        }
    }
    // The data channel: START/end markers delimit each program's output.
    let mut cur: Option<usize> = None;
    for line in data.lines() {
        if let Some((tag, args)) = marker::split(line) {
            let name = args.split_whitespace().next().unwrap_or_default();
            if let Some(kind) = tag.strip_suffix("-START").filter(|k| is_prog_kind(k)) {
                cur = by_name.get(&format!("{kind}/{name}")).copied();
                continue;
            }
            if is_prog_kind(tag) {
                cur = None;
                continue;
            }
        }
        let Some(i) = cur else { continue };
        let p = &mut m.progs[i];
        let json = marker::line(marker::JSON, "");
        if let Some(j) = line.find(&format!("{json} ")) {
            let js = &line[j + json.len() + 1..];
            match serde_json::from_str(js) {
                Ok(v) => p.json.push(v),
                Err(_) => p.bad_json.push(js.to_string()),
            }
        }
        p.output.push(line.to_string());
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierkit_protocol::marker::{done, line, prog_start, rc_line, start};

    /// The lines /init builds with the protocol's functions read back.
    #[test]
    fn protocol_lines_read_back() {
        let k = ProgKind::UserTest;
        let lines = [
            line(marker::BOOT, "mode=test kernel=7.3.0 cpus=2"),
            line(
                marker::CXL,
                "setup: 1 region(s) over 1 device(s): 4096 (MiB[:ways:granularity])",
            ),
            line(marker::TOPO, "preempt: full"),
            line(&start(marker::INSMOD), ""),
            rc_line(marker::INSMOD, 0),
            prog_start(k, "tk-test-vma"),
            marker::prog_end_with(
                k,
                "tk-test-vma",
                3,
                marker::Ending {
                    timeout: Some(9),
                    left: 1,
                    ..Default::default()
                },
            ),
            line(marker::ERROR, "cxl step=commit: no"),
            rc_line(marker::RMMOD, 1),
            line(marker::KMEMLEAK, "leaks=4"),
            done(2),
        ];
        let console: String = lines
            .iter()
            .enumerate()
            .map(|(i, l)| format!("[    {i}.000000] {l}\n"))
            .collect();
        let data = format!(
            "{}\nok - x\n{} {{\"a\":1}}\n{}\n",
            lines[5],
            line(marker::JSON, ""),
            lines[6]
        );
        let m = scan(&console, &data);
        assert!(m.booted);
        assert_eq!(
            (m.insmod_rc, m.rmmod_rc, m.done),
            (Some(0), Some(1), Some(2))
        );
        assert_eq!(m.kmemleak_leaks, Some(4));
        assert_eq!(m.cxl_errors(), vec![("commit", "no")]);
        assert_eq!(m.topology, vec!["preempt: full"]);
        assert_eq!(m.cxl.len(), 1);
        assert_eq!(m.progs.len(), 1);
        let p = &m.progs[0];
        assert_eq!(
            (p.kind.as_str(), p.name.as_str(), p.rc),
            ("USERTEST", "tk-test-vma", Some(3))
        );
        assert_eq!((p.ending.timeout, p.ending.left), (Some(9), 1));
        assert_eq!(p.json.len(), 1);
        assert_eq!(p.output[0], "ok - x");
    }
}
