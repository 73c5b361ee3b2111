//! Fault injection into the module's load, N = 1, 2, ...: each failed
//! load leaves nothing behind ([`load_sweep`]), with the stack of each
//! injected fault shortened for the report.

use super::*;

/// Fault injection into `finit_module`; the module is not loaded before and
/// after. Returns (points, injected steps, post-init stop reason).
pub struct LoadSweep {
    pub points: u32,
    pub failed_loads: u32,
    pub tolerated: Vec<String>,
    pub stopped_after_init: Option<String>,
    pub errnos: std::collections::BTreeMap<String, u32>,
    pub failures: Vec<String>,
    pub seconds: f64,
}

pub fn top_frames(lines: &[String], from: usize) -> String {
    // The guess unwinder (CONFIG_UNWINDER_GUESS) marks every frame `? `
    // and may list stale ones: good enough to say where a fault landed.
    const MACHINERY: &[&str] = &[
        "dump_stack",
        "should_fail",
        "fail_dump",
        "slab_",
        "kmem_cache_alloc",
        "__kmalloc",
        "kmalloc",
        "__alloc",
        "alloc_pages",
        "prepare_alloc",
        "__kmem",
        "kvmalloc",
        "__kvmalloc",
        "krealloc",
        "__do_kmalloc",
        "___slab",
        "__slab",
        "kstrdup",
        "kmemdup",
    ];
    lines[from..]
        .iter()
        .map(|l| l.trim().trim_start_matches("? "))
        .skip_while(|l| !l.starts_with("Call Trace:"))
        .filter(|l| l.contains("+0x"))
        .filter(|l| !MACHINERY.iter().any(|f| l.starts_with(f)))
        .take(4)
        .map(short_frame)
        .collect::<Vec<_>>()
        .join(" < ")
}

/// `name+0x12/0x34 [mod]` with a Rust v0 symbol shortened to its last
/// identifiers (`_RNv...6Module4init` -> `Module::init`).
pub fn short_frame(f: &str) -> String {
    let (sym, rest) = f.split_once('+').unwrap_or((f, ""));
    let m = if rest.contains("[tierkit]") {
        " [tierkit]"
    } else {
        ""
    };
    if !sym.starts_with("_R") {
        return format!("{sym}{m}");
    }
    let b = sym.as_bytes();
    let mut idents = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_digit()) {
            let mut j = i;
            let mut n = 0usize;
            while j < b.len() && b[j].is_ascii_digit() {
                n = n * 10 + usize::from(b[j] - b'0');
                j += 1;
            }
            if n >= 3 && j + n <= b.len() {
                let id = &sym[j..j + n];
                if id.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
                    idents.push(id);
                    i = j + n;
                    continue;
                }
            }
            i = j;
        } else {
            i += 1;
        }
    }
    let k = idents.len().saturating_sub(2);
    format!("{}{m}", idents[k..].join("::"))
}

/// The stack `fail_dump()` printed after line `from`: up to the next
/// `FAULT_INJECTION` report.
pub fn trace_of(lines: &[String], from: usize) -> Vec<String> {
    let end = lines[from + 1..]
        .iter()
        .position(|l| l.contains("FAULT_INJECTION: forcing a failure"))
        .map_or(lines.len(), |p| from + 1 + p);
    lines[from..end].to_vec()
}

pub fn load_sweep(mem_mask: u64, base: &MemSnapshot) -> Result<LoadSweep, String> {
    let fail = FailNth::open().map_err(|e| format!("fail-nth: {e}"))?;
    let kmsg = Kmsg::open_at_end().map_err(|e| format!("/dev/kmsg: {e}"))?;
    let f = File::open(KO).map_err(|e| format!("{KO}: {e}"))?;
    let mut sw = LoadSweep {
        points: 0,
        failed_loads: 0,
        tolerated: Vec::new(),
        stopped_after_init: None,
        errnos: Default::default(),
        failures: Vec::new(),
        seconds: 0.0,
    };
    let t0 = Instant::now();
    let fd = f.as_raw_fd();
    let mut n = 1;
    loop {
        if n > MAX_N {
            sw.failures
                .push(format!("still injecting after {MAX_N} points"));
            break;
        }
        let _ = kmsg.drain();
        let a = fail
            .run(n, || finit_module(fd, "", 0))
            .map_err(|e| format!("fail-nth: {e}"))?;
        let lines = kmsg.drain();
        // A fault in KUnit's suite filter after tierkit's init makes KUnit
        // say so: the kernel's own, correct answer to the fault (this
        // step's stack shows where it landed; the sweep ends with it).
        let kunit_fault = lines.iter().any(|l| l.contains("kunit_filter_suites"))
            && lines
                .iter()
                .any(|l| l.contains("FAULT_INJECTION: forcing a failure"));
        let crashes: Vec<String> = crash_lines(&lines)
            .into_iter()
            .filter(|l| !(kunit_fault && l.trim() == KUNIT_FILTER_ENOMEM))
            .collect();
        if !crashes.is_empty() {
            sw.failures
                .push(format!("N={n}: kernel reported: {}", crashes.join(" | ")));
        }
        if a.injected {
            sw.points = n;
        }
        let faults = injected_faults(&lines);
        let trace = faults
            .first()
            .map(|&(_, i)| trace_of(&lines, i))
            .unwrap_or_default();
        // The module notifiers (KUnit's first) run after the init: a
        // fault there is past tierkit. The guess unwinder may leave stale
        // frames, so evidence of the notifier chain wins.
        let after_init = trace
            .iter()
            .any(|l| l.contains("kunit_") || l.contains("blocking_notifier_call_chain"));
        let in_init = !after_init && trace.iter().any(|l| l.contains("do_one_initcall"));
        let frames = faults
            .first()
            .map_or(String::new(), |&(_, i)| top_frames(&lines, i));
        match (a.value, a.injected) {
            (Ok(()), false) => {
                unload().map_err(|e| format!("unload after the clean load: {}", errno_name(&e)))?;
                break;
            }
            (Ok(()), true) => {
                // The load went through although an allocation failed.
                let w = works(mem_mask);
                let unl = unload();
                if let Err(e) = w {
                    sw.failures.push(format!(
                        "N={n}: loaded despite a failed allocation ({frames}) but does not work: {e}"
                    ));
                }
                if let Err(e) = unl {
                    sw.failures
                        .push(format!("N={n}: unload: {}", errno_name(&e)));
                }
                if in_init || trace.is_empty() {
                    sw.tolerated.push(format!(
                        "N={n} {}",
                        if frames.is_empty() {
                            "(no stack: __GFP_NOWARN)".into()
                        } else {
                            frames
                        }
                    ));
                } else {
                    sw.stopped_after_init = Some(format!("N={n} ({frames})"));
                    break;
                }
            }
            (Err(e), inj) => {
                sw.failed_loads += 1;
                *sw.errnos.entry(errno_name(&e)).or_default() += 1;
                if !inj {
                    sw.failures.push(format!(
                        "N={n}: finit_module failed with {} without an injected fault",
                        errno_name(&e)
                    ));
                    break;
                }
                // finit_module(2): ENOMEM for an allocation; the loader
                // passes on what the module's init returns, ENOMEM too.
                if e.raw_os_error() != Some(libc::ENOMEM) {
                    sw.failures.push(format!(
                        "N={n}: finit_module failed with {} ({frames}), expected ENOMEM",
                        errno_name(&e)
                    ));
                }
                if let Err(g) = gone() {
                    sw.failures
                        .push(format!("N={n}: after the failed load: {g}"));
                    // Loaded after all (it said it failed): unload for the
                    // next step.
                    let _ = unload();
                }
            }
        }
        if let Ok((now, waited)) = base.settled(STEP_FREE_TOL_PAGES, STEP_SLAB_TOL_KB, 2000) {
            let l = base.losses(&now, STEP_FREE_TOL_PAGES, STEP_SLAB_TOL_KB);
            if !l.is_empty() {
                sw.failures.push(format!(
                    "N={n}: memory not given back ({waited} ms later): {}",
                    l.join("; ")
                ));
            }
        }
        if sw.failures.len() > 12 {
            sw.failures.push("too many failures, stopping".into());
            break;
        }
        n += 1;
    }
    sw.seconds = t0.elapsed().as_secs_f64();
    Ok(sw)
}
