//! The sweep of one operation over N = 1, 2, ... ([`Tester`]) and its
//! result ([`Sweep`]).

use super::*;

/// Result of one operation's sweep.
#[derive(Default)]
pub struct Sweep {
    /// Highest N at which a fault was injected (the number of points).
    pub points: u32,
    /// With strides, the number of points lies in `points..=points_upper`.
    pub points_upper: u32,
    /// Steps made (N values tried).
    pub steps: u32,
    pub injected_steps: u32,
    pub by_type: BTreeMap<String, u64>,
    pub errnos: BTreeMap<String, u64>,
    /// Faults injected but the call succeeded all the same.
    pub tolerated: u32,
    pub failures: Vec<String>,
    pub nr_failures: usize,
    pub seconds: f64,
    pub max_free_drift: i64,
    pub max_slab_drift: i64,
    pub max_settle_ms: u64,
    pub done: bool,
}

impl Sweep {
    pub fn fail(&mut self, n: u32, what: String) {
        self.nr_failures += 1;
        if self.failures.len() < MAX_LISTED {
            self.failures.push(format!("N={n}: {what}"));
        }
    }
}

pub struct Tester {
    pub fail: FailNth,
    pub kmsg: Kmsg,
}

impl Tester {
    /// One step at `n`: returns (succeeded, injected, took ms).
    pub fn step(
        &self,
        env: &Env,
        op: Op,
        n: u32,
        base: &MemSnapshot,
        sw: &mut Sweep,
    ) -> (bool, bool, u128) {
        let mut s = Step::new();
        if let Err(e) = prepare(env, op, &mut s) {
            sw.fail(n, format!("setting up: {e}"));
            return (false, false, 0);
        }
        let _ = self.kmsg.drain();
        let t0 = Instant::now();
        let armed = if op == Op::GiganticTouch {
            touch_armed(n, &s)
        } else {
            self.fail.run(n, || call(op, &mut s))
        };
        let armed = match armed {
            Ok(a) => a,
            Err(e) => {
                sw.fail(n, format!("fail-nth: {e}"));
                return (false, false, 0);
            }
        };
        let ms = t0.elapsed().as_millis();
        let lines = self.kmsg.drain();
        sw.steps += 1;
        let faults = injected_faults(&lines);
        if armed.injected {
            sw.injected_steps += 1;
            sw.points = sw.points.max(n);
            for (kind, _) in &faults {
                *sw.by_type.entry(kind.clone()).or_default() += 1;
            }
        }
        if armed.injected && faults.is_empty() {
            // fail_dump() is quiet for __GFP_NOWARN allocations.
            *sw.by_type.entry("quiet (__GFP_NOWARN)".into()).or_default() += 1;
        }
        if !armed.injected && !faults.is_empty() {
            sw.fail(
                n,
                format!(
                    "fail-nth says no fault was injected, the kernel log has {} FAULT_INJECTION report(s)",
                    faults.len()
                ),
            );
        }
        if faults.len() > 1 {
            sw.fail(
                n,
                format!("{} faults injected for one fail-nth", faults.len()),
            );
        }
        let crashes = crash_lines(&lines);
        if !crashes.is_empty() {
            sw.fail(n, format!("kernel reported: {}", crashes.join(" | ")));
        }
        let res = armed.value;
        match (&res, armed.injected) {
            (Ok(()), false) => sw.done = true,
            (Ok(()), true) => sw.tolerated += 1,
            (Err(e), inj) => {
                *sw.errnos.entry(errno_name(e)).or_default() += 1;
                if !inj {
                    sw.fail(
                        n,
                        format!("failed with {} without an injected fault", errno_name(e)),
                    );
                } else if !e.raw_os_error().is_some_and(|x| op.allowed().contains(&x)) {
                    sw.fail(
                        n,
                        format!("failed with {}, documented: ENOMEM", errno_name(e)),
                    );
                }
            }
        }
        if let Err(e) = effect(env, op, &s, &res) {
            sw.fail(n, e);
        }
        s.close();
        drop(s);
        if matches!(op, Op::WeightNode(_) | Op::Auto | Op::Bandwidth) {
            if let Err(e) = restore_wi(env) {
                sw.fail(n, e);
            }
        }
        if let Err(e) = usable(env.mem_mask) {
            sw.fail(n, format!("tierkit unusable afterwards: {e}"));
        }
        match held() {
            Ok(h) if h == env.baseline_held => {}
            Ok(h) => sw.fail(
                n,
                format!(
                    "tierkit still holds memory after closing: {}",
                    holdings_diff(&env.baseline_held, &h).join(", ")
                ),
            ),
            Err(e) => sw.fail(n, e),
        }
        match base.settled(FREE_TOL_PAGES, SLAB_TOL_KB, SETTLE_MS) {
            Ok((now, waited)) => {
                let (f, sl) = base.drift(&now);
                sw.max_free_drift = sw.max_free_drift.max(f);
                sw.max_slab_drift = sw.max_slab_drift.max(sl);
                sw.max_settle_ms = sw.max_settle_ms.max(waited);
                let l = base.losses(&now, FREE_TOL_PAGES, SLAB_TOL_KB);
                if !l.is_empty() {
                    sw.fail(
                        n,
                        format!(
                            "memory not given back ({waited} ms later): {}",
                            l.join("; ")
                        ),
                    );
                }
            }
            Err(e) => sw.fail(n, format!("{e:#}")),
        }
        (res.is_ok(), armed.injected, ms)
    }

    pub fn sweep(&self, env: &Env, op: Op) -> Sweep {
        let mut sw = Sweep::default();
        let t0 = Instant::now();
        let base = match MemSnapshot::take_drained_since(&env.start) {
            Ok(b) => b,
            Err(e) => {
                sw.fail(0, format!("{e:#}"));
                return sw;
            }
        };
        let mut n = 1u32;
        let mut stride = 1u32;
        let mut last_injected = 0u32;
        let mut slow_run = 0u32;
        let mut slow_total = 0u32;
        loop {
            if n > MAX_N {
                sw.fail(n, format!("still injecting after {MAX_N} points"));
                break;
            }
            let before = sw.nr_failures;
            let (ok, injected, ms) = self.step(env, op, n, &base, &mut sw);
            if sw.nr_failures > before && sw.nr_failures > 3 * MAX_LISTED {
                sw.fail(n, "too many failures, stopping this operation".into());
                break;
            }
            if injected {
                last_injected = n;
            }
            if ok && !injected {
                break;
            }
            if !ok && !injected {
                // Failed without a fault: reported; there is no end to find.
                break;
            }
            // Three slow steps in a row: one alone may be the host.
            slow_run = if ms > SLOW_STEP_MS { slow_run + 1 } else { 0 };
            slow_total += u32::from(ms > SLOW_STEP_MS);
            if slow_run >= 3 && slow_total >= SLOW_EXHAUSTIVE && n >= EXHAUSTIVE_UPTO {
                stride = if stride == 1 {
                    FIRST_STRIDE
                } else {
                    (stride * 4).min(MAX_STRIDE)
                };
            }
            n += stride;
        }
        // With strides the end lies in (last_injected, n]: bisect it, to
        // within BISECT_TO (each step of a slow call costs seconds, and the
        // points there are the same allocation over and over).
        sw.points_upper = sw.points;
        if sw.done {
            let (mut lo, mut hi) = (last_injected, n);
            while hi - lo > BISECT_TO {
                let mid = lo + (hi - lo) / 2;
                let (ok, injected, _) = self.step(env, op, mid, &base, &mut sw);
                if injected {
                    lo = mid;
                } else if ok {
                    hi = mid;
                } else {
                    break;
                }
            }
            sw.points_upper = hi - 1;
        }
        sw.seconds = t0.elapsed().as_secs_f64();
        sw
    }
}
