//! Arguments are checked before any work (they were checked after it).

use super::*;

/// Arguments are checked before anything is taken.
pub fn arguments_checked_first(r: &mut Report, topo: &Topology, dram: u32) {
    let cpus = online_cpus();
    let res = (|| -> Result<(), String> {
        let tk = Tierkit::open().map_err(|e| e.to_string())?;
        tk.set_policy(TK_MODE_INTERLEAVE, 1 << dram)
            .map_err(|e| format!("TK_IOC_SET_POLICY: {}", errno_name(&e)))?;
        let t0 = monotonic_ns();
        let res = tk.set_gigantic(gigantic_arg(4096, TK_PLACE_LOCAL));
        let dt = monotonic_ns() - t0;
        match res {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
            Err(e) => Err(format!("failed with {}, expected EINVAL", errno_name(&e))),
            Ok(_) => {
                // The old behaviour: accepted, and the mmap found out.
                let b = vma::node_free_kb(dram);
                let t1 = monotonic_ns();
                let m = tk.map(GIB_PAGES, 0);
                let mdt = monotonic_ns() - t1;
                let a = vma::node_free_kb(dram);
                Err(format!(
                    "accepted ({} us); the 1 GiB mmap then gave {} after {:.1} ms, node {dram} MemFree {} MiB -> {} MiB",
                    dt / 1000,
                    m.as_ref().map_or_else(errno_name, |_| "success".into()),
                    mdt as f64 / 1e6,
                    b.unwrap_or(0) / MIB_KB,
                    a.unwrap_or(0) / MIB_KB
                ))
            }
        }
    })();
    r.check("arguments: TK_IOC_SET_GIGANTIC threads=4096 is EINVAL", res);

    // The boundary: a fixed count is checked against the online CPUs.
    let res = (|| -> Result<(), String> {
        let tk = Tierkit::open().map_err(|e| e.to_string())?;
        expect_errno(
            tk.set_gigantic(gigantic_arg(cpus + 1, TK_PLACE_LOCAL)),
            libc::EINVAL,
        )
        .map_err(|e| format!("threads={}: {e}", cpus + 1))?;
        let tk = Tierkit::open().map_err(|e| e.to_string())?;
        tk.set_gigantic(gigantic_arg(cpus, TK_PLACE_LOCAL))
            .map_err(|e| format!("threads={cpus}: {}", errno_name(&e)))?;
        Ok(())
    })();
    r.check(
        &format!("arguments: SET_GIGANTIC threads={} (online CPUs + 1) is EINVAL, threads={cpus} is accepted", cpus + 1),
        res,
    );

    let name = "arguments: remote placement with one CPU node: 1 GiB mmap is EINVAL in < 5 ms and takes nothing";
    if topo.cpu.len() > 1 {
        r.skip(
            name,
            format!(
                "{} nodes with CPUs: remote placement has a node here",
                topo.cpu.len()
            ),
        );
        return;
    }
    // One attempt: Ok, or Err with whether only the time was over (a
    // host stall under TCG: retried, see ATTEMPTS).
    let attempt = || -> Result<String, (String, bool)> {
        let tk = Tierkit::open().map_err(|e| (e.to_string(), false))?;
        tk.set_policy(TK_MODE_INTERLEAVE, 1 << dram)
            .map_err(|e| (format!("TK_IOC_SET_POLICY: {}", errno_name(&e)), false))?;
        tk.set_gigantic(gigantic_arg(1, TK_PLACE_REMOTE))
            .map_err(|e| {
                (
                    format!(
                        "SET_GIGANTIC placement=remote threads=1: {} (expected to be accepted)",
                        errno_name(&e)
                    ),
                    false,
                )
            })?;
        let base_free = vma::node_free_kb(dram);
        let base_held = Held::now();
        let t0 = monotonic_ns();
        let m = tk.map(GIB_PAGES, 0);
        let dt = monotonic_ns() - t0;
        let free = vma::node_free_kb(dram).unwrap_or(0);
        let held = Held::now();
        let mut errs = Vec::new();
        match &m {
            Ok(_) => errs.push("mmap succeeded, expected EINVAL".to_string()),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(e) => errs.push(format!(
                "mmap failed with {}, expected EINVAL",
                errno_name(e)
            )),
        }
        drop(m);
        let slow = dt > 5_000_000;
        let base = base_free.unwrap_or(0);
        if free + TOL_KB < base {
            errs.push(format!(
                "node {dram} MemFree {} MiB right after the mmap, {} MiB before (tolerance {} MiB)",
                free / MIB_KB,
                base / MIB_KB,
                TOL_KB / MIB_KB
            ));
        }
        if held != base_held {
            errs.push(format!(
                "stats [{}], before [{}]",
                held.map(|h| h.describe()).unwrap_or_default(),
                base_held.map(|h| h.describe()).unwrap_or_default()
            ));
        }
        if let Ok(q) = query(&tk) {
            if q.nr_cleared != 0 {
                errs.push(format!("nr_cleared {}", q.nr_cleared));
            }
        }
        if errs.is_empty() && !slow {
            Ok(format!(
                "EINVAL in {:.3} ms, MemFree {} -> {} MiB",
                dt as f64 / 1e6,
                base / MIB_KB,
                free / MIB_KB
            ))
        } else {
            let only_slow = errs.is_empty();
            if slow {
                errs.push(format!("mmap took {:.1} ms", dt as f64 / 1e6));
            }
            Err((errs.join("; "), only_slow))
        }
    };
    let mut slow = Vec::new();
    let mut res = Err(String::new());
    for _ in 0..ATTEMPTS {
        match attempt() {
            Ok(n) if slow.is_empty() => res = Ok(n),
            Ok(n) => res = Ok(format!("{n}; earlier attempts: {}", slow.join(", "))),
            Err((e, true)) => {
                slow.push(e);
                res = Err(format!("{ATTEMPTS} attempts: {}", slow.join(", ")));
                continue;
            }
            Err((e, false)) => res = Err(e),
        }
        break;
    }
    r.check_note(name, res);
}
