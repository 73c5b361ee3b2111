//! tk-test-pool-hostile: tierkit's pre-cleared gigantic pool
//! (`/sys/kernel/debug/tierkit/gigantic/pool`) against a hostile root
//! user, on the DRAM node (the first node with memory and CPUs):
//!
//! 1. odd writes: 1 MiB and one byte over a page (`EINVAL`), a page of
//!    valid lines (taken), NUL bytes (`EINVAL`), `pwrite(2)` at an offset
//!    and after `lseek` (taken whole), duplicate and many lines for one
//!    node (the last wins), node ids beyond any node or not online
//!    (`EINVAL`); refused writes change nothing;
//! 2. an open pool file pins the module: `rmmod` is refused
//!    (`EWOULDBLOCK`), the fd still writes, closing it is harmless;
//! 3. a storm of about 20 s: threads writing conflicting targets (one and
//!    several lines), a reader, `echo 3 > /proc/sys/vm/drop_caches` in a
//!    loop (the shrinker), and children making the GiB of a gigantic
//!    mapping on the node (taken from the pool or cleared at fault time),
//!    some SIGKILLed during the first touch. Every read shows READY at most
//!    the node's bound; afterwards `NID 1` still fills a range (if one
//!    filled before the storm), `NID 0` empties the pool and the node's
//!    free memory is back;
//! 4. `rmmod` while the refill thread is allocating or clearing a range
//!    (the target set 0, 20, 60 and 150 ms before; a GiB of DRAM fills in
//!    0.1 to 1 s): `rmmod` succeeds, no `tierkit_pool` thread is left, the
//!    node's memory is back, the module loads again (KUnit's suites off,
//!    the weight table put back) with an empty pool and one refill thread;
//! 5. (a memory-only node whose blocks are all ZONE_MOVABLE: `--topology
//!    cxl`, `--cxl-online movable`; `movable_gigantic` on) while the
//!    refill thread clears a range for the node (tens of seconds on
//!    emulated CXL memory):
//!    - `NID 0` gives the node's memory back within a few seconds: the
//!      range being cleared is no longer wanted and is freed (it used to
//!      be freed only once its whole clear was done);
//!    - with `NID 1` again, every block of the node is offlined in turn:
//!      each offline ends (done, or `EBUSY` for the blocks under the range
//!      being cleared) within [`OFFLINE_LIMIT`] instead of retrying until
//!      a signal; the blocks are onlined again, `NID 0`, and the node's
//!      memory is back;
//! 6. the kernel printed no crash report (oops, BUG, WARNING) meanwhile.
//!
//! In `SLOW_USER_TESTS`. Needs a free naturally aligned GiB on the node for
//! the refills (`--append 'hugepagesz=1G hugepages=0:1'` on a small guest:
//! the boot-time page is handed back for the test).
//!
//! Exit 0 if every check passed.

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierkit_core::uapi::TK_GIGANTIC_BYTES;
use userspace_tests::faults::{self, Kmsg, KunitFilter, TierkitWeights};
use userspace_tests::first_use::BootPool;
use userspace_tests::fuzz::Rng;
use userspace_tests::memblock::{self, Outcome};
use userspace_tests::node::Topology;
use userspace_tests::pool::{self, POOL_PATH};
use userspace_tests::pool_test::memory_back;
use userspace_tests::report::Report;
use userspace_tests::tk::MovableGigantic;
use userspace_tests::tk::Tierkit;
use userspace_tests::{errno_name, expect_errno, vma};

/// How long the storm of step 3 lasts.
const STORM: Duration = Duration::from_secs(20);
/// How long offlining one block may take in step 5.
const OFFLINE_LIMIT: Duration = Duration::from_secs(45);
/// A KUnit filter no suite matches (the reloads run no suite).
const NO_SUITES: &str = "tk-test-pool-hostile-runs-no-kunit-suite";

/// `(target, ready)` of `nid`.
fn state(nid: u32) -> Result<(u64, u64), String> {
    pool::state(nid).map_err(|e| format!("{e:#}"))
}

/// Checks that a write of `b` fails with `errno` and changes nothing.
fn refused(r: &mut Report, what: &str, b: &[u8], errno: i32) {
    r.check(
        &format!("{what}: refused, nothing changes"),
        pool::refused_unchanged(b, errno),
    );
}

/// Checks that writing `b` (whole) leaves `nid` at target `want`, then
/// empties the node's pool again.
fn taken(r: &mut Report, what: &str, nid: u32, b: &[u8], want: u64, pwrite_at: Option<u64>) {
    let res = (|| {
        let n = match pwrite_at {
            None => pool::write_bytes(b),
            Some(off) => OpenOptions::new()
                .write(true)
                .open(POOL_PATH)
                .and_then(|f| f.write_at(b, off)),
        }
        .map_err(|e| format!("write: {}", errno_name(&e)))?;
        if n != b.len() {
            return Err(format!("wrote {n} of {} bytes", b.len()));
        }
        match state(nid)? {
            (t, _) if t == want => Ok(()),
            (t, rd) => Err(format!("reads `{nid} {t} {rd}`, expected target {want}")),
        }
    })();
    let _ = pool::set_target(nid, 0);
    r.check(what, res);
}

/// Step 1.
fn odd_writes(r: &mut Report, topo: &Topology, nid: u32) {
    let page = userspace_tests::sys::PAGE_SIZE;
    refused(
        r,
        "a 1 MiB write of valid lines",
        format!("{nid} 0\n").repeat((1 << 20) / 4).as_bytes(),
        libc::EINVAL,
    );
    let mut over = format!("{nid} 0\n").into_bytes();
    over.resize(page + 1, b' ');
    refused(
        r,
        "a valid line padded to a page plus one byte",
        &over,
        libc::EINVAL,
    );
    // `NID 1`, blanks, then `NID 0`: exactly a page, the last line whole.
    let mut exact = format!("{nid} 1\n").into_bytes();
    let tail = format!("\n{nid} 0\n").into_bytes();
    exact.resize(page - tail.len(), b' ');
    exact.extend_from_slice(&tail);
    taken(
        r,
        "a write of exactly one page (`NID 1`, blanks, `NID 0`): taken whole, the last line wins",
        nid,
        &exact,
        0,
        None,
    );
    refused(
        r,
        "a NUL byte after a valid line",
        format!("{nid} 1\0").as_bytes(),
        libc::EINVAL,
    );
    refused(
        r,
        "a NUL byte inside a number",
        format!("{nid} \x001\n").as_bytes(),
        libc::EINVAL,
    );
    refused(r, "only NUL bytes", b"\0\0\0\0", libc::EINVAL);
    refused(
        r,
        "a valid line, then a line of NULs",
        format!("{nid} 1\n\0\0\n").as_bytes(),
        libc::EINVAL,
    );
    refused(r, "node 4294967295", b"4294967295 1\n", libc::EINVAL);
    refused(
        r,
        "node 4294967296 (above u32)",
        b"4294967296 1\n",
        libc::EINVAL,
    );
    refused(r, "node 1024", b"1024 1\n", libc::EINVAL);
    let past = topo.online.iter().max().map_or(1, |m| m + 1);
    refused(
        r,
        &format!("node {past} (past the online nodes)"),
        format!("{past} 1\n").as_bytes(),
        libc::EINVAL,
    );
    if let Some(&m) = topo.online.iter().find(|n| !topo.memory.contains(n)) {
        refused(
            r,
            &format!("memoryless node {m}, then a good line"),
            format!("{m} 0\n{nid} 1\n").as_bytes(),
            libc::EINVAL,
        );
    }
    taken(
        r,
        "`NID 1` then `NID 0` in one write: the later line wins",
        nid,
        format!("{nid} 1\n{nid} 0\n").as_bytes(),
        0,
        None,
    );
    taken(
        r,
        "`NID 0`, `NID 1`, `NID 0` in one write: the last wins",
        nid,
        format!("{nid} 0\n{nid} 1\n{nid} 0\n").as_bytes(),
        0,
        None,
    );
    let mut many = String::new();
    for i in 0..400 {
        many.push_str(&format!("{nid} {}\n", i % 2));
    }
    many.push_str(&format!("{nid} 1\n"));
    taken(
        r,
        "401 lines for the node in one write (under a page): the last (`NID 1`) wins",
        nid,
        many.as_bytes(),
        1,
        None,
    );
    taken(
        r,
        "pwrite(2) at offset 12345: taken whole",
        nid,
        format!("{nid} 1\n").as_bytes(),
        1,
        Some(12345),
    );
    let res = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .open(POOL_PATH)
            .map_err(|e| errno_name(&e))?;
        f.seek(SeekFrom::Start(1 << 40))
            .map_err(|e| format!("lseek: {}", errno_name(&e)))?;
        f.write_all(format!("{nid} 1\n").as_bytes())
            .map_err(|e| format!("write: {}", errno_name(&e)))?;
        match state(nid)? {
            (1, _) => Ok(()),
            (t, rd) => Err(format!("reads `{nid} {t} {rd}`")),
        }
    })();
    let _ = pool::set_target(nid, 0);
    r.check("lseek to 1 TiB, then write: taken whole", res);
    r.check(
        "an empty write returns 0 and changes nothing",
        match pool::write_bytes(b"") {
            Ok(0) => Ok(()),
            Ok(n) => Err(format!("returned {n}")),
            Err(e) => Err(errno_name(&e)),
        },
    );
    let res = state(nid).and_then(|s| match s {
        (0, _) => pool::wait_for(nid, 0, 0, Duration::from_secs(5)).map(|_| ()),
        (t, rd) => Err(format!("`{nid} {t} {rd}`")),
    });
    r.check("after the odd writes the node is back to `NID 0 0`", res);
}

/// Step 2.
fn open_fd_pins(r: &mut Report, nid: u32) {
    let f = match OpenOptions::new().write(true).open(POOL_PATH) {
        Ok(f) => f,
        Err(e) => {
            r.fail("open the pool file", errno_name(&e));
            return;
        }
    };
    r.check(
        "rmmod with the pool file open: EWOULDBLOCK (the fd pins the module)",
        expect_errno(faults::unload_tierkit(), libc::EWOULDBLOCK),
    );
    r.check(
        "the open fd still writes after the refused rmmod",
        (&f).write(format!("{nid} 0\n").as_bytes())
            .map(|_| ())
            .map_err(|e| errno_name(&e)),
    );
    drop(f);
    r.check(
        "tierkit still loaded and Live after the fd is closed",
        match faults::module_line(faults::TIERKIT_MODULE) {
            Some(m) if m.state == "Live" => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
}

/// What the storm saw.
#[derive(Default)]
struct Storm {
    writes_ok: AtomicU64,
    writes_refused: AtomicU64,
    reads: AtomicU64,
    drops: AtomicU64,
    /// A read that broke a rule, or a write with an unexpected errno.
    bad: std::sync::Mutex<Vec<String>>,
}

impl Storm {
    fn bad(&self, s: String) {
        if let Ok(mut v) = self.bad.lock() {
            if v.len() < 10 {
                v.push(s);
            }
        }
    }
}

/// Step 3.
fn storm(r: &mut Report, nid: u32, start_kb: u64) {
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
fn fills_before_storm(r: &mut Report, nid: u32, start_kb: u64) -> bool {
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
fn storm_threads(
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
struct Touches {
    i: u32,
    made: u32,
    sigbus: u32,
    killed: u32,
    other: Vec<String>,
}

/// For the storm's length, children make the GiB of a gigantic mapping;
/// every other one is SIGKILLed after a short while.
fn touch_children(nid: u32) -> Touches {
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
        let m = match tk.map(
            TK_GIGANTIC_BYTES as usize / userspace_tests::sys::PAGE_SIZE,
            0,
        ) {
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
fn after_storm(r: &mut Report, nid: u32, start_kb: u64, fills_before: bool) {
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

/// Pids of the `tierkit_pool` threads.
fn pool_threads() -> Vec<u32> {
    let Ok(d) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    d.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim_end() == "tierkit_pool")
        })
        .collect()
}

/// Step 4. Returns false if tierkit could not be loaded again.
fn rmmod_mid_refill(r: &mut Report, topo: &Topology, nid: u32, start_kb: u64) -> bool {
    let Some(wd) = userspace_tests::tierkit_weight_dir(r) else {
        return true;
    };
    let table = match TierkitWeights::save(&wd) {
        Ok(t) => t,
        Err(e) => {
            r.fail("save the weight table", e);
            return true;
        }
    };
    let mut kf = match KunitFilter::set(NO_SUITES) {
        Ok(k) => k,
        Err(e) => {
            r.fail("KUnit suites off for the reloads", e.to_string());
            return true;
        }
    };
    for delay_ms in [0, 20, 60, 150] {
        let name = |what: &str| format!("rmmod {delay_ms} ms after `{nid} 1`: {what}");
        if let Err(e) = pool::set_target(nid, 1) {
            r.fail(&name("write `NID 1`"), errno_name(&e));
            return true;
        }
        vma::sleep_ms(delay_ms);
        let seen = state(nid)
            .map(|(t, rd)| format!("`{nid} {t} {rd}`"))
            .unwrap_or_default();
        let t0 = Instant::now();
        let res = faults::unload_tierkit();
        let took = t0.elapsed();
        if let Err(e) = res {
            r.fail(&name("rmmod succeeds"), errno_name(&e));
            let _ = pool::set_target(nid, 0);
            return true;
        }
        r.ok_note(
            &name("rmmod succeeds"),
            format!(
                "the file read {seen} before; rmmod took {:.2} s",
                took.as_secs_f64()
            ),
        );
        let left = pool_threads();
        r.check(
            &name("no tierkit_pool thread is left"),
            if left.is_empty() {
                Ok(())
            } else {
                Err(format!("pids {left:?}"))
            },
        );
        r.check_note(
            &name("the node's memory is back"),
            memory_back(nid, start_kb),
        );
        if !r.check(
            &name("tierkit loads again"),
            faults::load_tierkit().map_err(|e| errno_name(&e)),
        ) {
            return false;
        }
        r.check("weight table as /init set it", table.restore());
        r.check_note(
            &name("after the reload the pool is empty"),
            pool::snapshot().and_then(|lines| {
                let nids: Vec<u32> = lines.iter().map(|l| l.nid).collect();
                match lines.iter().find(|l| l.target != 0 || l.ready != 0) {
                    _ if nids != topo.memory => {
                        Err(format!("nodes {nids:?}, expected {:?}", topo.memory))
                    }
                    Some(l) => Err(format!("`{} {} {}`", l.nid, l.target, l.ready)),
                    None => Ok(format!("{} nodes, all `NID 0 0`", lines.len())),
                }
            }),
        );
        let threads = pool_threads();
        r.check(
            &name("after the reload one tierkit_pool thread runs"),
            if threads.len() == 1 {
                Ok(())
            } else {
                Err(format!("pids {threads:?}"))
            },
        );
    }
    r.check_note(
        "KUnit filter_glob restored",
        kf.restore()
            .map(|v| v.unwrap_or_default())
            .map_err(|e| e.to_string()),
    );
    true
}

/// Step 5.
fn offline_mid_refill(r: &mut Report, topo: &Topology) {
    let what = "memory offline while the refill clears a range";
    let Some(c) = topo.cxl_node() else {
        r.skip(what, "no memory-only node");
        return;
    };
    let blocks = memblock::node_blocks(c);
    if blocks.is_empty()
        || blocks
            .iter()
            .any(|&b| memblock::block_zone(b).as_deref() != Some("Movable"))
    {
        r.skip(
            what,
            format!("node {c}'s blocks are not all online in ZONE_MOVABLE (--topology cxl)"),
        );
        return;
    }
    if vma::node_memtotal_kb(c).unwrap_or(0) < 2 << 20 {
        r.skip(
            what,
            format!("node {c} is under 2 GiB: no room for a ready range"),
        );
        return;
    }
    let _movable = match MovableGigantic::enable() {
        Ok(m) => m,
        Err(e) => {
            r.fail("enable movable_gigantic", errno_name(&e));
            return;
        }
    };
    let Some(start_kb) = vma::node_free_kb(c) else {
        r.fail(&format!("node {c}: free memory"), "no node meminfo");
        return;
    };
    // A target lowered during the clear: the range is freed within a step.
    if let Err(e) = pool::set_target(c, 1) {
        r.fail(&format!("node {c}: write `NID 1`"), errno_name(&e));
        return;
    }
    vma::sleep_ms(3000);
    match state(c) {
        Ok((1, 0)) => {
            let t0 = Instant::now();
            let res = pool::set_target(c, 0)
                .map_err(|e| errno_name(&e))
                .and_then(|_| memory_back(c, start_kb))
                .map(|m| format!("{m} after {:.1} s", t0.elapsed().as_secs_f64()));
            r.check_note(
                &format!("node {c}: `NID 0` during the refill's clear frees the range being cleared at once"),
                res,
            );
        }
        other => {
            let _ = pool::set_target(c, 0);
            r.skip(
                &format!("node {c}: `NID 0` during the refill's clear frees the range being cleared at once"),
                format!("3 s after `{c} 1` the pool read {other:?}, not `{c} 1 0` (filled already, or no range)"),
            );
            let _ = memory_back(c, start_kb);
        }
    }
    if let Err(e) = pool::set_target(c, 1) {
        r.fail(&format!("node {c}: write `NID 1`"), errno_name(&e));
        return;
    }
    // Past the allocation, inside the clear (tens of seconds).
    vma::sleep_ms(3000);
    let before = state(c)
        .map(|(t, rd)| format!("`{c} {t} {rd}`"))
        .unwrap_or_default();
    let (mut done, mut refused, mut hung) = (Vec::new(), Vec::new(), Vec::new());
    for &b in &blocks {
        match memblock::set_block_state(b, "offline", OFFLINE_LIMIT) {
            Ok(t) => match t.outcome {
                Outcome::Done => done.push(b),
                Outcome::Failed(_) => refused.push(format!("memory{b}: {}", t.outcome.describe())),
                Outcome::TimedOut { .. } => hung.push(format!(
                    "memory{b}: {} after {:.0} s",
                    t.outcome.describe(),
                    t.elapsed.as_secs_f64()
                )),
            },
            Err(e) => refused.push(format!("memory{b}: fork: {e}")),
        }
    }
    r.check_note(
        &format!(
            "node {c}: every offline of its blocks during the refill ends within {} s",
            OFFLINE_LIMIT.as_secs()
        ),
        if hung.is_empty() {
            Ok(format!(
                "pool read {before} before; {} of {} blocks offlined, refused: {refused:?}",
                done.len(),
                blocks.len()
            ))
        } else {
            Err(format!(
                "pool read {before} before; stuck: {hung:?}; refused: {refused:?}"
            ))
        },
    );
    let mut not_back = Vec::new();
    for &b in &done {
        match memblock::set_block_state(b, "online_movable", OFFLINE_LIMIT) {
            Ok(t) if t.outcome == Outcome::Done => {}
            Ok(t) => not_back.push(format!("memory{b}: {}", t.outcome.describe())),
            Err(e) => not_back.push(format!("memory{b}: {e}")),
        }
    }
    r.check(
        &format!("node {c}: the offlined blocks online again (online_movable)"),
        if not_back.is_empty() {
            Ok(())
        } else {
            Err(format!("{not_back:?}"))
        },
    );
    let res = pool::set_target(c, 0)
        .map_err(|e| errno_name(&e))
        .and_then(|_| pool::wait_for(c, 0, 0, Duration::from_secs(5)).map(|_| ()))
        .and_then(|_| memory_back(c, start_kb));
    r.check_note(
        &format!("node {c}: `NID 0` empties the pool, the node's memory is back"),
        res,
    );
}

fn main() -> ExitCode {
    userspace_tests::help!();
    let mut r = Report::new("tk-test-pool-hostile", "test");
    let Some(topo) = userspace_tests::tierkit_ready(&mut r) else {
        return r.finish();
    };
    let Some(nid) = topo.dram_node() else {
        r.skip(
            "the pool against a hostile user",
            "no node with memory and CPUs",
        );
        return r.finish();
    };
    if !pool::present() {
        r.fail("the pool file exists", format!("no {POOL_PATH}"));
        return r.finish();
    }
    let kmsg = Kmsg::open_at_end();
    let boot = BootPool::release(nid);
    if let Some(n) = boot.restore {
        r.note(format!(
            "node {nid}: {n} boot-time 1 GiB hugetlb page(s) handed back for the test"
        ));
    }
    let Some(start_kb) = vma::node_free_kb(nid) else {
        r.fail("free memory", "no node meminfo");
        return r.finish();
    };
    odd_writes(&mut r, &topo, nid);
    open_fd_pins(&mut r, nid);
    storm(&mut r, nid, start_kb);
    let loaded = rmmod_mid_refill(&mut r, &topo, nid, start_kb);
    if loaded {
        r.check_note(
            "at the end the node's free memory is back",
            memory_back(nid, start_kb),
        );
        offline_mid_refill(&mut r, &topo);
    }
    match kmsg {
        Ok(k) => {
            let crashes = faults::crash_lines(&k.drain());
            r.check(
                "the kernel printed no oops, BUG or WARNING meanwhile",
                if crashes.is_empty() {
                    Ok(())
                } else {
                    Err(format!("{crashes:?}"))
                },
            );
        }
        Err(e) => {
            r.fail("open /dev/kmsg", e.to_string());
        }
    }
    drop(boot);
    r.finish()
}
