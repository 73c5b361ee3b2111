//! The checks after a stress run: the children's exits, the counts they
//! sent, the offline/online cycles, and what must be back to the baseline.

use super::*;

/// The lines the children sent: counts per tag and in total, and the
/// offline and online attempts.
pub(super) struct Counts {
    pub(super) per: BTreeMap<String, BTreeMap<String, u64>>,
    pub(super) totals: BTreeMap<String, u64>,
    pub(super) offlines: Vec<Value>,
    pub(super) onlines: Vec<Value>,
}

impl Counts {
    pub(super) fn parse(text: &str) -> Counts {
        let mut per: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        let mut totals: BTreeMap<String, u64> = BTreeMap::new();
        let mut offlines: Vec<Value> = Vec::new();
        let mut onlines: Vec<Value> = Vec::new();
        for l in text.lines() {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["@offline", b, what, ms] => offlines.push(json!({
                    "block": b.parse::<u64>().unwrap_or(0), "outcome": what, "ms": ms.parse::<u64>().unwrap_or(0)
                })),
                ["@online", b, ok, ms] => onlines.push(json!({
                    "block": b.parse::<u64>().unwrap_or(0), "ok": *ok == "true", "ms": ms.parse::<u64>().unwrap_or(0)
                })),
                [tag, rest @ ..] => {
                    for kv in rest.chunks(2) {
                        if let [k, v] = kv {
                            let v = v.parse::<u64>().unwrap_or(0);
                            *per.entry(tag.to_string()).or_default().entry(k.to_string()).or_default() += v;
                            *totals.entry(k.to_string()).or_default() += v;
                        }
                    }
                }
                [] => {}
            }
        }
        Counts {
            per,
            totals,
            offlines,
            onlines,
        }
    }
}

/// One check per child: exited 0, or a clear ended by our SIGKILL at the
/// deadline (counted in `clears_killed_at_deadline`).
pub(super) fn check_kids(r: &mut Report, kids: &[Kid], c: &mut Counts) {
    let (per, totals) = (&c.per, &mut c.totals);
    for k in kids {
        let name = format!("stress: {}", k.what);
        let tag = if k.what.starts_with("mapper ") {
            k.what
                .split_whitespace()
                .nth(1)
                .map(|i| format!("mapper{i}"))
        } else {
            None
        };
        let note = tag
            .and_then(|t| per.get(&t))
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        match k.status {
            _ if k.pid < 0 => {
                r.fail(&name, "fork failed");
            }
            Some(st)
                if libc::WIFSIGNALED(st)
                    && k.clear
                    && k.killed_at_deadline
                    && libc::WTERMSIG(st) == libc::SIGKILL =>
            {
                *totals
                    .entry("clears_killed_at_deadline".into())
                    .or_default() += 1;
                r.ok_note(&name, "still clearing at the deadline: ended by SIGKILL");
            }
            Some(st) if libc::WIFSIGNALED(st) => {
                r.fail(
                    &name,
                    format!(
                        "killed by signal {}{}",
                        libc::WTERMSIG(st),
                        if k.killed_at_deadline {
                            " (ours: it did not stop)"
                        } else {
                            ""
                        }
                    ),
                );
            }
            Some(st) if libc::WEXITSTATUS(st) != 0 => {
                r.fail(&name, format!("exit {} ({note})", libc::WEXITSTATUS(st)));
            }
            _ => {
                r.ok_note(
                    &name,
                    if note.is_empty() {
                        "exited 0".to_string()
                    } else {
                        note
                    },
                );
            }
        }
    }
}

/// The counts in the JSON, the operations line and the check that the
/// mappers mapped and raced.
pub(super) fn report_counts(r: &mut Report, c: &Counts, dur: f64, nr_kids: usize) {
    let (per, totals) = (&c.per, &c.totals);
    r.set(
        "mappers",
        json!(per
            .iter()
            .filter(|(t, _)| t.starts_with("mapper"))
            .map(|(t, m)| (t.clone(), json!(m)))
            .collect::<serde_json::Map<_, _>>()),
    );
    r.set("ops", json!(totals));
    r.set("duration_s", json!(dur));
    r.set("children", json!(nr_kids));
    r.set("offlines", Value::Array(c.offlines.clone()));
    r.set("onlines", Value::Array(c.onlines.clone()));
    println!("# stress totals: {totals:?}");
    r.ok_note(
        "stress: operations",
        format!(
            "{}; {dur:.1} s",
            totals
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    r.check_note("stress: the mappers mapped and raced", {
        let g = |k: &str| totals.get(k).copied().unwrap_or(0);
        if g("maps") > 0 && g("race_close") > 0 && g("race_munmap") > 0 {
            Ok(format!("{} maps, {} pages", g("maps"), g("pages")))
        } else {
            Err(format!(
                "maps {}, race_close {}, race_munmap {}",
                g("maps"),
                g("race_close"),
                g("race_munmap")
            ))
        }
    });
}

/// Offline/online: at least one block went offline; none timed out or
/// failed other than EBUSY (a block holding a gigantic range, or pages
/// someone pinned); every block online again.
pub(super) fn check_offline(r: &mut Report, cfg: &Config, bl: &[u64], n: u32, c: &Counts) {
    let (offlines, onlines) = (&c.offlines, &c.onlines);
    let outcome = |v: &Value| v["outcome"].as_str().unwrap_or("").to_string();
    let ms: Vec<u64> = offlines
        .iter()
        .map(|v| v["ms"].as_u64().unwrap_or(0))
        .collect();
    let done = offlines.iter().filter(|v| outcome(v) == "done").count();
    let busy = offlines.iter().filter(|v| outcome(v) == "EBUSY").count();
    let bad: Vec<String> = offlines
        .iter()
        .filter(|v| !matches!(outcome(v).as_str(), "done" | "EBUSY"))
        .map(|v| format!("memory{} {} after {} ms", v["block"], outcome(v), v["ms"]))
        .collect();
    let times = offlines
        .iter()
        .map(|v| format!("memory{} {} {} ms", v["block"], outcome(v), v["ms"]))
        .collect::<Vec<_>>()
        .join(", ");
    r.check_note(
        &format!(
            "stress: memory blocks of node {n} offline and online meanwhile, each within {} s",
            cfg.offline_limit.as_secs()
        ),
        if !bad.is_empty() {
            Err(format!("{}; all: {times}", bad.join(", ")))
        } else if done == 0 {
            Err(format!("no block went offline: {times}"))
        } else {
            Ok(format!(
                "{} offlines ({done} done, {busy} EBUSY), {} onlines, longest {} ms: {times}",
                offlines.len(),
                onlines.len(),
                ms.iter().max().copied().unwrap_or(0)
            ))
        },
    );
    let mut left = Vec::new();
    for &b in bl {
        if memblock::block_state(b).as_deref() != Some("online") {
            left.push(b);
            let _ = memblock::set_block_state(b, "online_movable", cfg.offline_limit);
        }
    }
    r.check(
        "stress: every block online again",
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("left offline: {left:?}"))
        },
    );
}

/// Holdings: every file is closed, every range freed.
pub(super) fn check_holdings(r: &mut Report, hold0: &Result<BTreeMap<String, u64>, anyhow::Error>) {
    let t0 = Instant::now();
    let hold = loop {
        let h = faults::holdings();
        let same = matches!((hold0, &h), (Ok(a), Ok(b)) if a == b);
        if same || t0.elapsed() > Duration::from_secs(3) {
            break h;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    r.check_note(
        "stress: stats held/gigantic and limits held_pages back to the baseline",
        match (hold0, &hold) {
            (Ok(a), Ok(b)) if !a.contains_key("held_pages") => {
                Err(format!("no held_pages in {}: {b:?}", faults::LIMITS_PATH))
            }
            (Ok(a), Ok(b)) => {
                let d = faults::holdings_diff(a, b);
                if d.is_empty() {
                    Ok(b.iter()
                        .map(|(k, v)| format!("{k} {v}"))
                        .collect::<Vec<_>>()
                        .join(", "))
                } else {
                    Err(d.join(", "))
                }
            }
            (a, b) => Err(format!(
                "cannot read: before {:?}, after {:?}",
                a.as_ref().err(),
                b.as_ref().err()
            )),
        },
    );
}

/// Free memory per node: back within 1% of the node's free pages at the
/// start (at least 1024 pages), after the offline/online cycles.
pub(super) fn check_free_pages(r: &mut Report, mem0: &anyhow::Result<MemSnapshot>) {
    r.check_note(
        "stress: free pages of every node back within 1%",
        match mem0 {
            Err(e) => Err(format!("{e:#}")),
            Ok(m0) => {
                let tol = m0
                    .free_pages
                    .values()
                    .filter(|&&p| p > 0)
                    .min()
                    .copied()
                    .unwrap_or(0)
                    / 100;
                let tol = tol.max(1024);
                match m0.settled(tol, u64::MAX / 4, 5000) {
                    Err(e) => Err(format!("{e:#}")),
                    Ok((m1, waited)) => {
                        let l = m0.losses(&m1, tol, u64::MAX / 4);
                        if l.is_empty() {
                            Ok(format!(
                                "tolerance {tol} pages, waited {waited} ms: {} -> {}",
                                m0.describe(),
                                m1.describe()
                            ))
                        } else {
                            Err(l.join("; "))
                        }
                    }
                }
            }
        },
    );
}

/// A final open+mmap, and no kernel report in the log.
pub(super) fn check_final(r: &mut Report, all: u64, kmsg: Option<Kmsg>) {
    r.check(
        "stress: a final open+mmap works",
        Tierkit::open()
            .and_then(|t| {
                t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, all)?;
                let m = t.map(16, 0)?;
                m.touch_pages();
                Ok(())
            })
            .map_err(|e| e.to_string()),
    );
    match kmsg {
        None => {
            r.fail("stress: no kernel report", "cannot open /dev/kmsg");
        }
        Some(k) => {
            let lines = k.drain();
            let crash = faults::crash_lines(&lines);
            r.check_note(
                "stress: no kernel report",
                if crash.is_empty() {
                    Ok(format!("{} kernel log lines", lines.len()))
                } else {
                    Err(crash.join(" | "))
                },
            );
        }
    }
}
