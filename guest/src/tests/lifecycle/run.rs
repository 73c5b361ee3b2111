//! The run: the phases of `tk-test-lifecycle` in order.

use super::*;

pub fn run(r: &mut Report, mem_mask: u64, wd: &WeightDir) {
    if !Path::new(KO).exists() {
        r.fail("module file", format!("no {KO}"));
        return;
    }
    match module_line(MODULE) {
        Some(m) if m.state == "Live" && m.refcnt == 0 => {}
        other => {
            r.fail(
                "tierkit loaded and unused at the start",
                format!("/proc/modules: {other:?}"),
            );
            return;
        }
    }
    let table = match TierkitWeights::save(wd) {
        Ok(t) => t,
        Err(e) => {
            r.fail("save the weight table", e);
            return;
        }
    };
    r.note(format!("weight table as /init left it: {}", table.before));
    let start = match MemSnapshot::take() {
        Ok(s) => s,
        Err(e) => {
            r.fail("memory counters", format!("{e:#}"));
            return;
        }
    };
    r.note(format!("start: {}", start.describe()));
    let mut kf = match KunitFilter::set(NO_SUITES) {
        Ok(k) => {
            r.ok_note("KUnit suites off for the reloads", k.describe(NO_SUITES));
            Some(k)
        }
        Err(e) => {
            r.fail(
                "KUnit suites off for the reloads",
                format!(
                    "writing {}: {e}; every load would run all suites (~25 s), not cycling",
                    crate::tests::faults::KUNIT_FILTER_GLOB
                ),
            );
            None
        }
    };
    if kf.is_some() {
        phases(r, mem_mask, &start);
    }

    // Leave it loaded, with the weight table /init set.
    if module_line(MODULE).is_none() {
        r.check(
            "tierkit loaded again at the end",
            load().map_err(|e| errno_name(&e)),
        );
    }
    r.check("tierkit works at the end", works(mem_mask));
    r.check("weight table as /init set it", table.restore());
    if let Some(k) = kf.as_mut() {
        r.check_note(
            "KUnit filter_glob restored",
            k.restore()
                .map(|v| v.unwrap_or_default())
                .map_err(|e| e.to_string()),
        );
    }
    match MemSnapshot::take() {
        Ok(end) => {
            r.note(format!("end: {}", end.describe()));
            let mut bad = Vec::new();
            for (n, &b) in &start.free_pages {
                let e = end.free_pages.get(n).copied().unwrap_or(0);
                let tol = (b as f64 * END_TOLERANCE) as u64;
                if e + tol < b {
                    bad.push(format!(
                        "node {n}: {b} -> {e} free pages ({:.2}% lost, tolerance 1%)",
                        (b - e) as f64 * 100.0 / b as f64
                    ));
                }
            }
            r.check(
                "free memory per node within 1% of the start",
                if bad.is_empty() {
                    Ok(())
                } else {
                    Err(bad.join("; "))
                },
            );
        }
        Err(e) => {
            r.fail(
                "free memory per node within 1% of the start",
                format!("{e:#}"),
            );
        }
    }
}

pub fn phases(r: &mut Report, mem_mask: u64, start: &MemSnapshot) {
    // Unloading with nothing held.
    if let Err(e) = unload() {
        r.fail(
            "unload tierkit",
            format!(
                "{} (refcnt {:?})",
                errno_name(&e),
                module_line(MODULE).map(|m| m.refcnt)
            ),
        );
        return;
    }
    r.check("unload tierkit", gone());
    unload_cycles(r, mem_mask);
    load_injection(r, mem_mask, start);
}

/// [`cycles`] unload/load cycles, each holding something across an unload
/// attempt: one check for the cycles, one per kind of hold.
fn unload_cycles(r: &mut Report, mem_mask: u64) {
    let t0 = Instant::now();
    let mut failures: Vec<(Hold, String)> = Vec::new();
    let mut debugfs_unloads = Vec::new();
    let mut counts = std::collections::BTreeMap::new();
    let mut done = 0;
    let cycles = cycles();
    for i in 0..cycles {
        match cycle(i, mem_mask, &mut debugfs_unloads) {
            Ok(h) => *counts.entry(h.name()).or_insert(0u32) += 1,
            Err(e) => {
                failures.push((Hold::of_cycle(i), format!("cycle {i}: {e}")));
                // Start the next cycle unloaded.
                if module_line(MODULE).is_some() && unload().is_err() {
                    failures.push((Hold::Nothing, "cannot unload; cycles stopped".into()));
                    break;
                }
            }
        }
        done = i + 1;
    }
    let secs = t0.elapsed().as_secs_f64();
    r.note(format!(
        "{done} cycles in {secs:.1} s ({:.0} ms each); held: {counts:?}",
        secs * 1000.0 / f64::from(done.max(1))
    ));
    for h in [
        Hold::Nothing,
        Hold::Device,
        Hold::Mapping,
        Hold::Stats,
        Hold::WeightFile,
    ] {
        let name = if h == Hold::Nothing {
            format!("{cycles} unload/load cycles")
        } else {
            format!("unload refused with {} held, done once released", h.name())
        };
        let f: Vec<&String> = failures
            .iter()
            .filter(|(k, _)| *k == h)
            .map(|(_, e)| e)
            .collect();
        if f.is_empty() {
            r.ok(&name);
        } else {
            let more = if f.len() > 3 {
                format!(" (and {} more)", f.len() - 3)
            } else {
                String::new()
            };
            r.fail(
                &name,
                format!(
                    "{}{more}",
                    f.iter()
                        .take(3)
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            );
        }
    }
    if !debugfs_unloads.is_empty() {
        r.note(format!(
            "an unload succeeded with a debugfs file open in {} cycle(s): {}",
            debugfs_unloads.len(),
            debugfs_unloads.join(", ")
        ));
    }

    r.set("cycles", json!(done));
    r.set("cycles_seconds", json!((secs * 10.0).round() / 10.0));
    r.set(
        "unload_with_debugfs_open_cycles",
        json!(debugfs_unloads.len()),
    );
}

/// Fault injection into the load (`finit_module`), with the console's log
/// level lowered during the sweep; the knobs put back.
fn load_injection(r: &mut Report, mem_mask: u64, start: &MemSnapshot) {
    if let Some(why) = FaultKnobs::missing() {
        r.skip("fault injection into finit_module", why);
        return;
    }
    if module_line(MODULE).is_some() {
        let _ = unload();
    }
    let mut knobs = match FaultKnobs::systematic(2) {
        Ok(k) => k,
        Err(e) => {
            r.fail("fault injection into finit_module", format!("{e:#}"));
            return;
        }
    };
    // The first fault past tierkit's init may hit KUnit's suite filter,
    // which then prints KUNIT_FILTER_ENOMEM; the harness reads every
    // `kunit module:` line on the console as a KUnit failure. So during
    // the sweep the console shows only levels 0-2 (panic, BUG), and every
    // step reads the whole log from /dev/kmsg itself: a WARNING, BUG, oops
    // or any other KUnit error there fails this test, with the line.
    let console = ConsoleLevel::set(3);
    if let Err(e) = &console {
        r.note(format!("cannot lower the console log level ({e}): KUnit's message, if the sweep provokes it, reaches the harness"));
    }
    let base = MemSnapshot::take().unwrap_or_else(|_| start.clone());
    let swept = load_sweep(mem_mask, &base);
    if let Ok(mut c) = console {
        r.check(
            "console log level restored",
            c.restore().map(|_| ()).map_err(|e| e.to_string()),
        );
    }
    match swept {
        Ok(sw) => report_load_sweep(r, &sw),
        Err(e) => {
            r.fail("fault injection into finit_module", e);
        }
    }
    r.check("restore fault-injection knobs", knobs.restore());
}

/// The check of a finished load sweep, its summary and its JSON fields.
fn report_load_sweep(r: &mut Report, sw: &LoadSweep) {
    let errnos: Vec<String> = sw.errnos.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let summary = format!(
        "{} injection points, {} failed loads ({}), {} tolerated{}, {}, {:.1} s",
        sw.points,
        sw.failed_loads,
        errnos.join(", "),
        sw.tolerated.len(),
        if sw.tolerated.is_empty() {
            String::new()
        } else {
            format!(" [{}]", sw.tolerated.join("; "))
        },
        match &sw.stopped_after_init {
            Some(s) => format!("stopped at the first fault after tierkit's init: {s}"),
            None => "ended with a load without a fault".into(),
        },
        sw.seconds
    );
    r.note(format!("finit_module: {summary}"));
    if sw.failures.is_empty() {
        r.ok_note("fault injection into finit_module", summary);
    } else {
        r.fail("fault injection into finit_module", sw.failures.join("; "));
    }
    r.set(
        "insmod_injection",
        json!({
            "points": sw.points,
            "failed_loads": sw.failed_loads,
            "tolerated": sw.tolerated.len(),
            "errnos": sw.errnos,
            "stopped_after_init": sw.stopped_after_init,
            "seconds": (sw.seconds * 10.0).round() / 10.0,
        }),
    );
    r.set("injection_points", json!({"finit_module": sw.points}));
}
