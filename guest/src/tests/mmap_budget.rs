//! The logic of `tk-test-mmap-budget`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-mmap-budget.rs` (its `--help`).

use crate::abi::ready::tierkit_ready;
use crate::abi::tk::{Tierkit, TK_MODE_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::errno::errno_name;
use crate::tests::faults::{FailNth, FaultKnobs};
use std::process::ExitCode;

const BIN: &str = "tk-test-mmap-budget";
/// The test hook that fails the next `Backing::new()`.
const FAIL_BACKING: &str = "/sys/kernel/debug/tierkit/test/fail_next_backing";
/// The file's budget of 4 KiB pages (module/src/state.rs `FILE_PAGES`).
const FILE_PAGES: usize = 1 << 18;
/// Pages per stepped `mmap`.
const STEP_PAGES: usize = 32;
/// More allocation points than a 32-page `mmap` has.
const MAX_STEPS: u32 = 1000;

/// Steps the 32-page `mmap` through its allocation points; returns the
/// pages of the budget used (calls that succeeded) and the faults injected.
fn sweep(tk: &Tierkit) -> Result<(usize, u32), String> {
    let fail = FailNth::open().map_err(|e| format!("fail-nth: {e}"))?;
    let mut used = 0;
    let mut injected = 0;
    for n in 1..=MAX_STEPS {
        let a = fail
            .run(n, || tk.map(STEP_PAGES, 0))
            .map_err(|e| format!("fail-nth {n}: {e}"))?;
        match (a.value, a.injected) {
            (Ok(m), inj) => {
                used += STEP_PAGES;
                drop(m);
                if !inj {
                    return Ok((used, injected));
                }
                injected += 1;
            }
            (Err(_), true) => injected += 1,
            (Err(e), false) => {
                return Err(format!(
                    "mmap failed with no fault injected (step {n}): {}",
                    errno_name(&e)
                ))
            }
        }
    }
    Err(format!(
        "the mmap still met a fault after {MAX_STEPS} steps"
    ))
}

/// Fails one 32-page `mmap` at `Backing::new()` through the test hook.
fn fail_backing(tk: &Tierkit) -> Result<(), String> {
    std::fs::write(FAIL_BACKING, "1").map_err(|e| format!("arming {FAIL_BACKING}: {e}"))?;
    let res = tk.map(STEP_PAGES, 0);
    let left = std::fs::read_to_string(FAIL_BACKING).unwrap_or_default();
    let _ = std::fs::write(FAIL_BACKING, "0");
    match res {
        Ok(_) => Err("the mmap succeeded with Backing::new() failing".into()),
        Err(e) if e.raw_os_error() != Some(libc::ENOMEM) => Err(format!(
            "the mmap failed with {}, not ENOMEM",
            errno_name(&e)
        )),
        Err(_) if left.trim() != "0" => {
            Err(format!("the hook reads {left:?} after the mmap, not 0"))
        }
        Err(_) => Ok(()),
    }
}

fn rest_maps(tk: &Tierkit, used: usize) -> Result<String, String> {
    let rest = FILE_PAGES - used;
    let m = tk.map(rest, 0).map_err(|e| {
        format!(
            "mmap of the budget's remaining {rest} pages: {}",
            errno_name(&e)
        )
    })?;
    // SAFETY: `m` maps `rest` readable pages.
    let (first, last) = unsafe { (m.as_ptr().read(), m.as_ptr().add(rest * 4096 - 1).read()) };
    if first != 0 || last != 0 {
        return Err(format!(
            "a fresh page reads {first:#x} / {last:#x}, not zero"
        ));
    }
    match tk.map(1, 0) {
        Ok(_) => Err("a page past the budget was mapped".into()),
        Err(e) if e.raw_os_error() == Some(libc::ENOMEM) => {
            Ok(format!("{rest} pages mapped after the sweep"))
        }
        Err(e) => Err(format!(
            "a page past the budget: {}, not ENOMEM",
            errno_name(&e)
        )),
    }
}

pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let Some(topo) = tierkit_ready(&mut r) else {
        return r.finish();
    };
    let name = "a failed mmap leaves the file's budget as it was";
    if let Some(why) = FaultKnobs::missing() {
        r.skip(name, why);
        return r.finish();
    }
    if !std::path::Path::new(FAIL_BACKING).exists() {
        r.skip(
            name,
            format!("no {FAIL_BACKING} (not a test build of tierkit)"),
        );
        return r.finish();
    }
    let tk = match Tierkit::open() {
        Ok(tk) => tk,
        Err(e) => {
            r.fail(name, format!("open: {}", errno_name(&e)));
            return r.finish();
        }
    };
    if let Err(e) = tk.set_policy(TK_MODE_INTERLEAVE, topo.memory_mask()) {
        r.fail(name, format!("TK_IOC_SET_POLICY: {}", errno_name(&e)));
        return r.finish();
    }
    let knobs = match FaultKnobs::systematic(1) {
        Ok(k) => k,
        Err(e) => {
            r.fail(name, format!("fault injection knobs: {e:#}"));
            return r.finish();
        }
    };
    let swept = sweep(&tk);
    drop(knobs);
    let res = swept.and_then(|(used, injected)| {
        if injected == 0 {
            return Err("no fault was injected".into());
        }
        fail_backing(&tk)?;
        rest_maps(&tk, used)
            .map(|s| format!("{injected} faults injected, one Backing::new() failed; {s}"))
    });
    r.check_note(name, res);
    r.finish()
}
