//! The markers /init prints on the console (`TIERKIT-BOOT`, `TIERKIT-INSMOD
//! rc=N`, `TIERKIT-<KIND>-START name` ... `TIERKIT-<KIND> name rc=N`,
//! `TIERKIT-DONE`, ...; defined in [`tierkit_protocol::marker`], printed by
//! `guest/src/init/`) and the programs' output on the data
//! channel, read into [`Markers`].

use crate::judge::printk;
use std::collections::BTreeMap;
use tierkit_protocol::marker::{self, Marker, ProgKind, Step};

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
    /// `TIERKIT-BOOT mode=M`: what /init was asked to do (`test`, `run`,
    /// `bench-<name>`, ...).
    pub mode: Option<String>,
    /// The printk time of each marker that starts or ends a phase of the
    /// boot ([`phase_tag`]), in order.
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

/// The phase tag of `marker`, if its time splits a boot into phases
/// ([`crate::report::timings::guest_parts`]): `BOOT`, `INSMOD-START`,
/// `INSMOD`, `RMMOD-START`, `DONE`, spelled by the protocol
/// ([`Step::tag`], [`marker::start`]).
pub fn phase_tag(marker: &Marker) -> Option<String> {
    match *marker {
        Marker::Boot(_) => Some(marker::BOOT.to_string()),
        Marker::Start(s @ (Step::Insmod | Step::Rmmod)) => Some(marker::start(s.tag())),
        Marker::End {
            step: Step::Insmod, ..
        } => Some(Step::Insmod.tag().to_string()),
        Marker::Done { .. } => Some(marker::DONE.to_string()),
        _ => None,
    }
}

/// Reads markers from the console (timestamps, order with KTAP) and program
/// output from the data channel, each line by [`Marker::find`].
pub fn scan(console: &str, data: &str) -> Markers {
    let mut m = Markers::default();
    let mut by_name: BTreeMap<(ProgKind, String), usize> = BTreeMap::new();
    for line in console.lines() {
        let (ts, text) = printk::split_seconds(line);
        let Some(marker) = Marker::find(text) else {
            continue;
        };
        if let (Some(t), Some(tag)) = (ts, phase_tag(&marker)) {
            m.stamps.push((tag, t));
        }
        match marker {
            Marker::Boot(args) => {
                m.booted = true;
                m.mode = args
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("mode="))
                    .map(str::to_string);
            }
            Marker::End {
                step: Step::Insmod,
                rc,
            } => m.insmod_rc = rc,
            Marker::End {
                step: Step::Rmmod,
                rc,
            } => m.rmmod_rc = rc,
            Marker::Done { fails } => m.done = Some(fails as i32),
            Marker::Error(e) => m.errors.push(e.to_string()),
            Marker::Note(n) => m.notes.push(n.to_string()),
            Marker::Topo(t) => m.topology.push(t.to_string()),
            Marker::Cxl(c) => m.cxl.push((ts, c.to_string())),
            Marker::Kmemleak { leaks } => m.kmemleak_leaks = leaks,
            Marker::ProgStart { kind, name } => {
                by_name.insert((kind, name.to_string()), m.progs.len());
                m.progs.push(ProgRun {
                    kind: kind.tag().to_string(),
                    name: name.to_string(),
                    start_s: ts,
                    ..Default::default()
                });
            }
            Marker::ProgEnd {
                kind,
                name,
                rc,
                ending,
            } => {
                if let Some(&i) = by_name.get(&(kind, name.to_string())) {
                    m.progs[i].rc = rc;
                    m.progs[i].ending = ending;
                    m.progs[i].end_s = ts;
                }
            }
            _ => {}
        }
    }
    // The data channel: START/end markers, which /init writes at the start
    // of a line, delimit each program's output (a program may print marker
    // text inside its own lines).
    let mut cur: Option<usize> = None;
    for line in data.lines() {
        match Marker::parse(line) {
            Some(Marker::ProgStart { kind, name }) => {
                cur = by_name.get(&(kind, name.to_string())).copied();
                continue;
            }
            Some(Marker::ProgEnd { .. }) => {
                cur = None;
                continue;
            }
            _ => {}
        }
        let Some(i) = cur else { continue };
        let p = &mut m.progs[i];
        if let Some(Marker::Json(js)) = Marker::find(line) {
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
        // A program's own line that quotes an end marker is its output.
        let data = format!(
            "{}\nok - x\nexpected {}\n{} {{\"a\":1}}\n{}\n",
            lines[5],
            lines[6],
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
        assert_eq!(p.output.len(), 3, "{:?}", p.output);
    }
}
