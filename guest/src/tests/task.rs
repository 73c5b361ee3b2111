//! The logic of `tk-test-task`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-task.rs` (its `--help`).

use crate::abi::ready::topology_and_weights;
use crate::abi::tk::{Tierkit, TK_MODE_INTERLEAVE, TK_MODE_WEIGHTED_INTERLEAVE};
use crate::harness::report::Report;
use crate::harness::rng::XorShift;
use crate::linux::errno::expect_errno;
use crate::linux::sys;
use crate::topology::interleave::{weight_sets, weight_table, WeightSet};
use crate::topology::weights::WeightDir;
use std::process::ExitCode;
use tierkit_core::interleave::{bulk_split, Nodemask, TaskState, Weights, MAX_NUMNODES};
use tierkit_core::uapi::{TkTaskNext, TK_IOC_TASK_NEXT, TK_TASK_NEXT_MAX};

const BIN: &str = "tk-test-task";

pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let Some((topo, wd)) = topology_and_weights(&mut r) else {
        return r.finish();
    };
    let saved = wd.snapshot();
    let sets = weight_sets(&topo);

    match (topo.dram_node(), topo.cxl_node()) {
        (Some(d), Some(c)) => issue_example(&mut r, &wd, d, c),
        _ => {
            r.skip(
                "bulk 10 pages {3,1} -> 8/2, then 0,1,0",
                "no DRAM + memory-only pair",
            );
        }
    }
    let mut calls = 0usize;
    for (i, set) in sets.iter().enumerate() {
        calls += against_model(&mut r, &wd, set, 0x9e37_79b9_7f4a_7c15 ^ i as u64);
    }
    if let Some(set) = sets.first() {
        refusals(&mut r, &wd, set);
    }
    match saved {
        Ok(s) => r.check("restore tierkit weights", s.restore()),
        Err(e) => r.fail("restore tierkit weights", format!("no snapshot: {e:#}")),
    };
    r.set("model_calls", serde_json::json!(calls));
    r.finish()
}

fn issue_example(r: &mut Report, wd: &WeightDir, d: u32, c: u32) {
    let set = WeightSet::new(&[(d, 3), (c, 1)]);
    let res = (|| -> Result<String, String> {
        wd.set_weights(&set.weights).map_err(|e| format!("{e:#}"))?;
        let t = Tierkit::open().map_err(|e| e.to_string())?;
        t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, set.nodemask)
            .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
        let b = t.bulk(10).map_err(|e| format!("TK_IOC_BULK: {e}"))?;
        let (nd, nc) = (b.per_node[d as usize], b.per_node[c as usize]);
        let others: u64 = b.per_node.iter().sum::<u64>() - nd - nc;
        if (nd, nc, others) != (8, 2, 0) {
            return Err(format!(
                "node {d}: {nd}, node {c}: {nc}, others {others}; expected 8, 2, 0"
            ));
        }
        if (b.il_prev, b.il_weight) != (d as i32, 1) {
            return Err(format!(
                "resume state ({}, {}), expected ({d}, 1)",
                b.il_prev, b.il_weight
            ));
        }
        let next = t
            .task_next(3)
            .map_err(|e| format!("TK_IOC_TASK_NEXT: {e}"))?;
        if next != [d as u8, c as u8, d as u8] {
            return Err(format!(
                "next three steps {next:?}, expected [{d}, {c}, {d}]"
            ));
        }
        Ok(format!("{nd}/{nc}, resume ({d},1), next {next:?}"))
    })();
    r.check_note(
        &format!("bulk 10 pages {} -> 8/2, then {d},{c},{d}", set.name()),
        res,
    );

    let res = (|| -> Result<(), String> {
        let t = Tierkit::open().map_err(|e| e.to_string())?;
        t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, set.nodemask)
            .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
        let got = t
            .task_next(8)
            .map_err(|e| format!("TK_IOC_TASK_NEXT: {e}"))?;
        let want: Vec<u8> = [d, d, d, c, d, d, d, c].iter().map(|&n| n as u8).collect();
        if got != want {
            return Err(format!("{got:?}, expected {want:?}"));
        }
        Ok(())
    })();
    r.check(
        &format!(
            "task path from fresh {}: {d},{d},{d},{c},{d},{d},{d},{c}",
            set.name()
        ),
        res,
    );
}

fn model_weights(set_weights: &[(u32, u8)]) -> Weights {
    Weights::from_table(weight_table(set_weights))
}

/// A mix of bulk calls and task steps, compared with the model after each
/// call. Returns the number of calls compared.
fn against_model(r: &mut Report, wd: &WeightDir, set: &WeightSet, seed: u64) -> usize {
    let name = format!("bulk + task vs bulk_split/TaskState {}", set.name());
    let mut calls = 0usize;
    let res = (|| -> Result<String, String> {
        wd.set_weights(&set.weights).map_err(|e| format!("{e:#}"))?;
        let mask = Nodemask(set.nodemask);
        let mut weights = model_weights(&set.weights);
        let t = Tierkit::open().map_err(|e| e.to_string())?;
        t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, set.nodemask)
            .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
        let mut st = TaskState::new();
        let mut rng = XorShift(seed | 1);
        let total = set.total() as u64;
        let mut pages = 0u64;
        for step in 0..40 {
            if step == 20 {
                // Change the weights mid-way: both sides use the new table
                // from the next call on, with the old il_weight.
                let new: Vec<(u32, u8)> =
                    set.weights.iter().map(|&(n, w)| (n, (w % 7) + 1)).collect();
                wd.set_weights(&new).map_err(|e| format!("{e:#}"))?;
                weights = model_weights(&new);
            }
            if step == 30 {
                // A new policy resets the task state.
                t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, set.nodemask)
                    .map_err(|e| format!("TK_IOC_SET_POLICY again: {e}"))?;
                st = TaskState::new();
            }
            calls += 1;
            if rng.below(3) == 0 {
                let k = 1 + rng.below(12) as usize;
                let got = t
                    .task_next(k)
                    .map_err(|e| format!("call {step}: TK_IOC_TASK_NEXT({k}): {e}"))?;
                let want: Vec<u8> = (0..k)
                    .map(|_| st.next(mask, &weights).map_or(255, |n| n as u8))
                    .collect();
                if got != want {
                    return Err(format!(
                        "call {step}: task_next({k}) {got:?}, model {want:?}"
                    ));
                }
            } else {
                // Sizes around multiples of the cycle and odd ones.
                let n = match rng.below(4) {
                    0 => 1 + rng.below(total.max(2)),
                    1 => total * (1 + rng.below(4)),
                    2 => total * (1 + rng.below(3)) + 1 + rng.below(total),
                    _ => 1 + rng.below(2000),
                };
                let got = t
                    .bulk(n)
                    .map_err(|e| format!("call {step}: TK_IOC_BULK({n}): {e}"))?;
                let mut want = [0u64; MAX_NUMNODES];
                let placed = bulk_split(&mut st, mask, &weights, n, &mut want);
                if placed != n {
                    return Err(format!("model placed {placed} of {n}"));
                }
                if got.per_node != want {
                    return Err(format!(
                        "call {step}: bulk({n}) per node {:?}, model {:?}",
                        nonzero(&got.per_node),
                        nonzero(&want)
                    ));
                }
                if (got.il_prev, got.il_weight) != (st.il_prev(), st.il_weight() as u32) {
                    return Err(format!(
                        "call {step}: bulk({n}) resume ({}, {}), model ({}, {})",
                        got.il_prev,
                        got.il_weight,
                        st.il_prev(),
                        st.il_weight()
                    ));
                }
                pages += n;
            }
        }
        Ok(format!("{calls} calls, {pages} pages in bulk"))
    })();
    r.check_note(&name, res);
    calls
}

fn nonzero(v: &[u64; MAX_NUMNODES]) -> Vec<(usize, u64)> {
    v.iter()
        .enumerate()
        .filter(|(_, &c)| c != 0)
        .map(|(n, &c)| (n, c))
        .collect()
}

fn refusals(r: &mut Report, wd: &WeightDir, set: &WeightSet) {
    let _ = wd.set_weights(&set.weights);
    let open_wi = || -> Result<Tierkit, String> {
        let t = Tierkit::open().map_err(|e| e.to_string())?;
        t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, set.nodemask)
            .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
        Ok(t)
    };
    let raw_next = |t: &Tierkit, count: u32| {
        let mut a = TkTaskNext {
            count,
            _pad: 0,
            nodes: [0; TK_TASK_NEXT_MAX],
        };
        // SAFETY: TK_IOC_TASK_NEXT is _IOWR(.., TkTaskNext).
        unsafe { sys::ioctl(t.fd(), TK_IOC_TASK_NEXT, &mut a) }
    };
    r.check(
        "refuse: TK_IOC_TASK_NEXT count 0 -> EINVAL",
        open_wi().and_then(|t| expect_errno(raw_next(&t, 0), libc::EINVAL)),
    );
    r.check(
        "refuse: TK_IOC_TASK_NEXT count 257 -> EINVAL",
        open_wi().and_then(|t| expect_errno(raw_next(&t, 257), libc::EINVAL)),
    );
    r.check(
        "accept: TK_IOC_TASK_NEXT count 256",
        open_wi().and_then(|t| raw_next(&t, 256).map(|_| ()).map_err(|e| e.to_string())),
    );
    r.check(
        "refuse: TK_IOC_BULK 0 pages -> EINVAL",
        open_wi().and_then(|t| expect_errno(t.bulk(0), libc::EINVAL)),
    );
    r.check(
        "refuse: TK_IOC_BULK 2^20 + 1 pages -> EINVAL",
        open_wi().and_then(|t| expect_errno(t.bulk((1 << 20) + 1), libc::EINVAL)),
    );
    r.check(
        "refuse: TK_IOC_TASK_NEXT without a policy -> EINVAL",
        Tierkit::open()
            .map_err(|e| e.to_string())
            .and_then(|t| expect_errno(t.task_next(1), libc::EINVAL)),
    );
    r.check(
        "refuse: TK_IOC_BULK without a policy -> EINVAL",
        Tierkit::open()
            .map_err(|e| e.to_string())
            .and_then(|t| expect_errno(t.bulk(1), libc::EINVAL)),
    );
    r.check(
        "refuse: TK_IOC_BULK on an interleave (unweighted) policy -> EINVAL",
        Tierkit::open().map_err(|e| e.to_string()).and_then(|t| {
            t.set_policy(TK_MODE_INTERLEAVE, set.nodemask)
                .map_err(|e| e.to_string())?;
            expect_errno(t.bulk(1), libc::EINVAL)
        }),
    );
}
