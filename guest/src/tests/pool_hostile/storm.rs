//! Step 3: the storm of writers, a reader, the shrinker and children
//! making gigantic mappings, and what must hold after it.

use super::*;

/// How long the storm of step 3 lasts.
pub const STORM: Duration = Duration::from_secs(20);

/// What the storm saw.
#[derive(Default)]
pub struct Storm {
    pub writes_ok: AtomicU64,
    pub writes_refused: AtomicU64,
    pub reads: AtomicU64,
    pub drops: AtomicU64,
    /// A read that broke a rule, or a write with an unexpected errno.
    pub bad: std::sync::Mutex<Vec<String>>,
}

impl Storm {
    pub fn bad(&self, s: String) {
        if let Ok(mut v) = self.bad.lock() {
            if v.len() < 10 {
                v.push(s);
            }
        }
    }
}

/// Step 3.
pub fn storm(r: &mut Report, nid: u32, start_kb: u64) {
    let fills_before = fills_before_storm(r, nid, start_kb);
    let max = (vma::node_memtotal_kb(nid).unwrap_or(0) >> 20)
        .saturating_sub(1)
        .min(2);
    r.note(format!(
        "storm of {} s on node {nid}, targets 0..={max}",
        STORM.as_secs()
    ));
    let st = Arc::new(Storm::default());
    let stop = Arc::new(AtomicBool::new(false));
    let threads = storm_threads(nid, max, &st, &stop);
    let mut t = touch_children(nid);
    stop.store(true, Relaxed);
    for th in threads {
        if th.join().is_err() {
            t.other.push("a storm thread panicked".into());
        }
    }
    let Touches {
        i,
        made,
        sigbus,
        killed,
        other,
    } = t;
    let bad = st.bad.lock().map(|v| v.clone()).unwrap_or_default();
    let summary = format!(
        "{} writes taken, {} refused as meant, {} reads, {} drop_caches, {i} mappings: {made} made, {sigbus} SIGBUS (no GiB), {killed} SIGKILLed",
        st.writes_ok.load(Relaxed),
        st.writes_refused.load(Relaxed),
        st.reads.load(Relaxed),
        st.drops.load(Relaxed),
    );
    r.check_note(
        "the storm: every write answered as meant, every read within the bounds",
        if bad.is_empty() && other.is_empty() && st.writes_ok.load(Relaxed) > 0 {
            Ok(summary)
        } else {
            Err(format!("{summary}; {bad:?} {other:?}"))
        },
    );
    after_storm(r, nid, start_kb, fills_before);
}

/// Whether the node has a free aligned GiB at all (on a small guest
/// only the boot-time hugetlb page handed back): if a range fills
/// before the storm, one must fill after it.
pub fn fills_before_storm(r: &mut Report, nid: u32, start_kb: u64) -> bool {
    let fills_before = match pool::Target::filled(nid, 1) {
        Ok((t, d)) => {
            drop(t);
            r.note(format!(
                "before the storm `{nid} 1` filled in {:.1} s",
                d.as_secs_f64()
            ));
            let _ = memory_back(nid, start_kb);
            true
        }
        Err(e) => {
            let _ = pool::set_target(nid, 0);
            r.note(format!("before the storm `{nid} 1` did not fill: {e}"));
            false
        }
    };
    fills_before
}

/// The storm's threads until `stop`: three writers of random targets (some
/// refused as meant), a reader checking the bounds, a `drop_caches` loop.
pub fn storm_threads(
    nid: u32,
    max: u64,
    st: &Arc<Storm>,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    let mut threads = Vec::new();
    for w in 0..3u64 {
        let (st, stop) = (st.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut x = Rng::new(0x9e37_79b9_7f4a_7c15 ^ (w + 1));
            while !stop.load(Relaxed) {
                let v = x.next_u64();
                let text = match v % 4 {
                    0 => format!("{nid} {}\n{nid} {}\n", v % (max + 1), (v >> 8) % (max + 1)),
                    1 => format!("{nid} {}\n9999 1\n", v % (max + 1)),
                    _ => format!("{nid} {}\n", v % (max + 1)),
                };
                match pool::write(&text) {
                    Ok(()) => st.writes_ok.fetch_add(1, Relaxed),
                    Err(e) if v % 4 == 1 && e.raw_os_error() == Some(libc::EINVAL) => {
                        st.writes_refused.fetch_add(1, Relaxed)
                    }
                    Err(e) => {
                        st.bad(format!("write {text:?}: {}", errno_name(&e)));
                        0
                    }
                };
                std::thread::sleep(Duration::from_millis(v % 50));
            }
        }));
    }
    {
        let (st, stop) = (st.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            while !stop.load(Relaxed) {
                match pool::state(nid) {
                    Ok((t, rd)) if t <= max && rd <= max => {
                        st.reads.fetch_add(1, Relaxed);
                    }
                    Ok((t, rd)) => {
                        st.bad(format!("read `{nid} {t} {rd}` with targets at most {max}"))
                    }
                    Err(e) => st.bad(format!("read: {e:#}")),
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }));
    }
    {
        let (st, stop) = (st.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            while !stop.load(Relaxed) {
                match std::fs::write("/proc/sys/vm/drop_caches", "3\n") {
                    Ok(()) => {
                        st.drops.fetch_add(1, Relaxed);
                    }
                    Err(e) => st.bad(format!("drop_caches: {e}")),
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        }));
    }
    threads
}

/// What the children of [`touch_children`] did: mappings made, and how
/// the children ended.
pub struct Touches {
    pub i: u32,
    pub made: u32,
    pub sigbus: u32,
    pub killed: u32,
    pub other: Vec<String>,
}

/// For the storm's length, children make the GiB of a gigantic mapping;
/// every other one is SIGKILLed after a short while.
pub fn touch_children(nid: u32) -> Touches {
    // Every other child is SIGKILLed during the first touch if it is slow.
    let (mut made, mut sigbus, mut killed, mut other) = (0, 0, 0, Vec::new());
    let mut x = Rng::new(0x1234_5678);
    let t0 = Instant::now();
    let mut i = 0;
    while t0.elapsed() < STORM {
        i += 1;
        let tk = match Tierkit::gigantic_on(nid) {
            Ok(t) => t,
            Err(e) => {
                other.push(format!("gigantic file: {}", errno_name(&e)));
                break;
            }
        };
        let m = match tk.map(TK_GIGANTIC_BYTES as usize / crate::linux::sys::PAGE_SIZE, 0) {
            Ok(m) => m,
            Err(e) => {
                other.push(format!("mmap: {}", errno_name(&e)));
                break;
            }
        };
        let addr = m.as_ptr() as usize;
        let child = vma::spawn_synced(|ready| {
            ready();
            // SAFETY: the parent's live shared mapping, inherited; a
            // SIGBUS ends this child only.
            unsafe { std::ptr::read_volatile(addr as *const u8) };
            0
        });
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                other.push(format!("fork: {e}"));
                break;
            }
        };
        let exit = if i % 2 == 0 {
            vma::sleep_ms(x.next_u64() % 400);
            child.kill_and_reap().map(|(e, _)| e)
        } else {
            child.wait()
        };
        match exit {
            Ok(vma::Exit::Code(0)) => made += 1,
            Ok(vma::Exit::Signal(s)) if s == libc::SIGBUS => sigbus += 1,
            Ok(vma::Exit::Signal(s)) if s == libc::SIGKILL => killed += 1,
            Ok(e) => other.push(format!("child ended: {e}")),
            Err(e) => other.push(format!("wait: {e}")),
        }
        drop(m);
        drop(tk);
        vma::sleep_ms(x.next_u64() % 200);
    }
    Touches {
        i,
        made,
        sigbus,
        killed,
        other,
    }
}

/// After the storm the pool is not wedged (a range still fills, if one
/// filled before), and `NID 0` empties it and gives the memory back.
pub fn after_storm(r: &mut Report, nid: u32, start_kb: u64, fills_before: bool) {
    // The pool is not wedged: a write ends any shrink pause and fills.
    let what = "after the storm `NID 1` still fills a range";
    if fills_before {
        let res = pool::set_target(nid, 1)
            .map_err(|e| errno_name(&e))
            .and_then(|_| pool::wait_for(nid, 1, 1, pool::fill_timeout(nid) * 2))
            .map(|d| format!("`{nid} 1 1` after {:.1} s", d.as_secs_f64()));
        r.check_note(what, res);
    } else {
        r.skip(
            what,
            "no range filled before the storm either (no free aligned GiB on the node)",
        );
    }
    let res = pool::set_target(nid, 0)
        .map_err(|e| errno_name(&e))
        .and_then(|_| state(nid))
        .and_then(|s| match s {
            (0, 0) => Ok(()),
            (t, rd) => Err(format!("`{nid} {t} {rd}` right after the write")),
        })
        .and_then(|_| memory_back(nid, start_kb));
    r.check_note(
        "after the storm `NID 0` empties the pool, the node's memory is back",
        res,
    );
}
