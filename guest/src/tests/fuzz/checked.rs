//! A checked run: what tk-fuzz and tk-test-fuzz do around [`run`].

use super::*;

/// Weight table state: `auto`, weights, bandwidth text.
pub(super) fn wi_state(wd: &crate::topology::weights::WeightDir) -> anyhow::Result<String> {
    let s = wd.snapshot()?;
    let bw = std::fs::read_to_string(wd.bandwidth_path())?;
    Ok(format!("{}; bandwidth {:?}", s.describe(), bw))
}

pub(super) fn held() -> Option<BTreeMap<String, u64>> {
    crate::tests::faults::holdings().ok()
}

/// Runs the fuzzer with `cfg` and records in `r`: the ABI checks of every
/// call, every worker finished (no crash, no hang), at least `min_calls`
/// calls, no kernel report in the log meanwhile, tierkit's held pages back
/// at the baseline once everything is closed, the weight table (auto,
/// weights, bandwidth) restored, tierkit usable. Adds the figures to the
/// JSON line. `None` if it could not start.
pub fn checked_run(
    r: &mut crate::harness::report::Report,
    cfg: &Config,
    min_calls: u64,
) -> Option<Outcome> {
    let env = match Env::discover() {
        Ok(e) => e,
        Err(e) => {
            r.fail("fuzz: environment", format!("{e:#}"));
            return None;
        }
    };
    let wd = crate::topology::weights::WeightDir::new(&env.wi);
    let (snap, bw, before, base) = match (
        wd.snapshot(),
        std::fs::read_to_string(wd.bandwidth_path()),
        wi_state(&wd),
        held(),
    ) {
        (Ok(s), Ok(b), Ok(t), Some(h)) => (s, b, t, h),
        (s, b, t, h) => {
            r.fail(
                "fuzz: save the weight table and stats",
                format!(
                    "{:?} {:?} {:?} {:?}",
                    s.err(),
                    b.err(),
                    t.err(),
                    h.is_some()
                ),
            );
            return None;
        }
    };
    note_config(r, cfg, &env);
    let kmsg = crate::tests::faults::Kmsg::open_at_end().ok();
    let out = match run(cfg, &env) {
        Ok(o) => o,
        Err(e) => {
            r.fail("fuzz: run", e.to_string());
            return None;
        }
    };
    let (calls, results) = check_outcome(r, &out, min_calls, kmsg);
    check_races(r, cfg, &env, &out);
    let saved = Saved {
        snap,
        bw,
        before,
        base,
    };
    check_put_back(r, &env, &wd, saved);
    set_figures(r, cfg, &out, calls, results);
    Some(out)
}

/// What was saved before the run, to put back and compare with after it.
struct Saved {
    snap: crate::topology::weights::WeightSnapshot,
    bw: String,
    before: String,
    base: BTreeMap<String, u64>,
}

/// The run's configuration noted, with the command that reproduces it.
fn note_config(r: &mut crate::harness::report::Report, cfg: &Config, env: &Env) {
    let nworkers = if cfg.only.is_some() {
        1
    } else {
        cfg.procs * cfg.threads
    };
    r.note(format!(
        "fuzz: seed {:#x}, {} calls over {nworkers} worker(s) ({} process(es) x {} thread(s){}), at most {} s, {} GiB call(s), debugfs writes {}{}",
        cfg.seed,
        cfg.calls,
        cfg.procs,
        cfg.threads,
        cfg.only.map_or(String::new(), |(p, t)| format!(", only worker {p}.{t}")),
        cfg.seconds,
        cfg.big,
        if cfg.debugfs_writes { "on" } else { "off" },
        if env.bandwidth_ok { "" } else { " (no valid bandwidth writes: the table lacks a memory node)" }
    ));
    r.note(format!(
        "fuzz: reproduce with: tk-fuzz --seed {:#x} --calls {} --seconds {} --procs {} --threads {} --big {}{}",
        cfg.seed,
        cfg.calls,
        cfg.seconds,
        cfg.procs,
        cfg.threads,
        cfg.big,
        if cfg.debugfs_writes { "" } else { " --no-debugfs-writes" }
    ));
}

/// The run's figures noted, and its checks: results as the ABI documents
/// them, every worker finished, at least `min_calls` calls, no kernel
/// report in `kmsg`. Gives the calls and the results by kind.
fn check_outcome(
    r: &mut crate::harness::report::Report,
    out: &Outcome,
    min_calls: u64,
    kmsg: Option<crate::tests::faults::Kmsg>,
) -> (u64, BTreeMap<String, u64>) {
    let calls = out.calls();
    r.note(format!(
        "fuzz: {calls} calls ({} operations) in {:.1} s, {:.0} calls/s",
        out.ops(),
        out.seconds,
        calls as f64 / out.seconds.max(1e-9)
    ));
    let mut by_op: Vec<String> = out
        .by_op()
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    by_op.sort();
    r.note(format!("fuzz: operations: {}", by_op.join(", ")));
    let results = out.results();
    for (k, v) in &results {
        r.note(format!("fuzz: {v:>7} {k}"));
    }
    let fails = out.failures();
    r.check(
        "fuzz: every result as the ABI documents it",
        if out.nr_failures() == 0 {
            Ok(())
        } else {
            Err(format!(
                "{} unexpected result(s): {}",
                out.nr_failures(),
                fails.iter().take(8).cloned().collect::<Vec<_>>().join("; ")
            ))
        },
    );
    let mut ends = out.crashed.clone();
    ends.extend(out.hung.iter().map(|h| format!("hung: {h}")));
    r.check(
        "fuzz: every worker finished",
        if ends.is_empty() {
            Ok(())
        } else {
            Err(ends.join("; "))
        },
    );
    r.check(
        &format!("fuzz: at least {min_calls} calls"),
        if calls >= min_calls {
            Ok(())
        } else {
            Err(format!(
                "{calls} calls in {:.1} s (the time bound stopped it)",
                out.seconds
            ))
        },
    );
    if let Some(k) = kmsg {
        let lines = k.drain();
        let bad = crate::tests::faults::crash_lines(&lines);
        r.check(
            "fuzz: no kernel report meanwhile",
            if bad.is_empty() {
                Ok(())
            } else {
                Err(bad.join(" | "))
            },
        );
    }
    (calls, results)
}

/// After the run: tierkit's holdings back at the baseline, the weight
/// table restored, tierkit usable.
fn check_put_back(
    r: &mut crate::harness::report::Report,
    env: &Env,
    wd: &crate::topology::weights::WeightDir,
    saved: Saved,
) {
    let Saved {
        snap,
        bw,
        before,
        base,
    } = saved;
    // Everything is closed: the workers' processes are gone, the parent
    // closed the shared files. Release runs at the last close; allow the
    // kernel a moment for deferred work.
    let mut now = held();
    for _ in 0..40 {
        if now.as_ref() == Some(&base) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        now = held();
    }
    r.check(
        "fuzz: held pages and ranges back to the baseline",
        match now {
            Some(h) if h == base => Ok(()),
            Some(h) => Err(format!(
                "tierkit still holds memory: {}",
                crate::tests::faults::holdings_diff(&base, &h).join(", ")
            )),
            None => Err("cannot read stats".to_string()),
        },
    );
    // Pages kept by the workers' pipes and rings after their files went
    // are tierkit's orphans until then; freed within about a second.
    let mut orphans = crate::tests::offline_held::orphans();
    for _ in 0..50 {
        if orphans == Ok(0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        orphans = crate::tests::offline_held::orphans();
    }
    r.check(
        "fuzz: every orphan page freed once its last holder let go",
        match orphans {
            Ok(0) => Ok(()),
            Ok(n) => Err(format!("{n} orphans left after 5 s")),
            Err(e) => Err(e),
        },
    );
    let restored = (|| -> anyhow::Result<()> {
        if !bw.is_empty() {
            crate::topology::weights::write_file(&wd.bandwidth_path(), &bw)?;
        }
        snap.restore()?;
        let after = wi_state(wd)?;
        anyhow::ensure!(after == before, "now {after}, was {before}");
        Ok(())
    })();
    r.check(
        "fuzz: weight table restored",
        restored.map_err(|e| format!("{e:#}")),
    );
    let usable = (|| -> Result<(), String> {
        let t = crate::abi::tk::Tierkit::open().map_err(|e| format!("open: {e}"))?;
        t.set_policy(crate::abi::tk::TK_MODE_WEIGHTED_INTERLEAVE, env.mem_mask)
            .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
        let m = t.map(1, 0).map_err(|e| format!("mmap: {e}"))?;
        if m.first_nonzero().is_some() {
            return Err("a fresh page is not zero".into());
        }
        Ok(())
    })();
    r.check("fuzz: tierkit usable afterwards", usable);
}

/// The run's figures for the JSON line.
fn set_figures(
    r: &mut crate::harness::report::Report,
    cfg: &Config,
    out: &Outcome,
    calls: u64,
    results: BTreeMap<String, u64>,
) {
    use serde_json::json;
    r.set("seed", json!(format!("{:#x}", cfg.seed)));
    r.set("calls", json!(calls));
    r.set("operations", json!(out.ops()));
    r.set("seconds", json!((out.seconds * 10.0).round() / 10.0));
    r.set("procs", json!(cfg.procs));
    r.set("threads", json!(cfg.threads));
    r.set("results", json!(results));
    r.set("unexpected", json!(out.nr_failures()));
    r.set("races", json!(out.races()));
}
