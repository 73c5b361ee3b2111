//! tk-test-offline: memory blocks that hold tierkit's pages go offline
//! (module/src/mapping.rs has the design).
//!
//! - **ZONE_MOVABLE** (the CXL node onlined `online_movable`): map 8 MiB
//!   of 4 KiB pages on the node, fill a per-page pattern, find every
//!   memory block holding them (`/proc/self/pagemap`), offline each (timed;
//!   a write that takes more than 60 s is killed and fails the check),
//!   then check every byte, every page's node (`move_pages`: the first
//!   fallback node of the CXL node, node 0 in the cxl guest), the pfns
//!   (none in an offlined block), tierkit's `held` statistics (moved from
//!   the CXL node to the fallback, totals equal), a forked child that
//!   shares the mapping (no PTE of its own left on an offlined block; it
//!   reads the moved contents), and `MADV_DONTNEED` + touch (the moved
//!   contents). Then the blocks go online again and a new mapping on the
//!   node works.
//! - **Gigantic ranges on ZONE_MOVABLE**: without the `movable_gigantic`
//!   opt-in a 1 GiB mmap on the node fails with `ENOMEM` and a kernel
//!   message naming the opt-in; with it the mmap works, and offlining a
//!   block inside the range fails within 2 s with `EBUSY` and a kernel
//!   message naming tierkit and the range, which stays intact. The opt-in
//!   is put back to 0.
//! - **Kernel memory** (ZONE_NORMAL: numa's node 1, or the CXL node
//!   onlined `online_kernel`, else the DRAM node): offlining a block that
//!   holds tierkit pages fails within 2 s with `EBUSY`; pages, nodes and
//!   statistics unchanged.
//!
//! Parts that do not apply to the running topology print `# SKIP` with the
//! reason. Everything is put back: blocks online, opt-in 0, nothing mapped.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;
use tierkit_core::uapi::{TkGigantic, TK_GIGANTIC_BYTES, TK_PLACE_LOCAL, TK_WALK_PUD};
use userspace_tests::memblock::{
    self, block_node, block_of_pfn, block_state, block_zone, blocks_of, first_fallback,
    node_blocks, node_distances, node_zones, online_value, pagemap_pfns, set_block_state, Kmsg,
    Outcome, Timed,
};
use userspace_tests::node::{fmt_mask, Topology};
use userspace_tests::report::Report;
use userspace_tests::sys::{monotonic_ns, Mapping, PAGE_SIZE};
use userspace_tests::tk::{self, read_stats, stats_of, NodeStats, Tierkit, TK_MODE_INTERLEAVE};
use userspace_tests::weights::write_file;
use userspace_tests::{errno_name, status_str, tierkit_ready};

const BIN: &str = "tk-test-offline";
/// 4 KiB pages mapped for the offline checks: 8 MiB (CXL memory is slow
/// under QEMU: keep the pattern small).
const PAGES: usize = 2048;
/// Pages of the second mapping, after onlining.
const PAGES_AGAIN: usize = 256;
/// An offline that takes longer is killed and counts as hung.
const OFFLINE_LIMIT: Duration = Duration::from_secs(60);
/// A refused offline must come back within this.
const PROMPT: Duration = Duration::from_secs(2);
const GIB_PAGES: usize = (TK_GIGANTIC_BYTES as usize) / PAGE_SIZE;
const MOVABLE_GIGANTIC: &str = "/sys/kernel/debug/tierkit/movable_gigantic";

/// Word `j` of page `i` of the pattern: distinct for every word of every
/// page, and never zero for the pages used here.
fn pattern(i: usize, j: usize) -> u64 {
    ((i as u64) << 32 | j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xC3A5_C85C_97CB_3127
}

const WORDS: usize = PAGE_SIZE / 8;

/// The words of page `i` of `m`.
fn page_words(m: &Mapping, i: usize) -> &[u64] {
    assert!(i < m.nr_pages());
    // SAFETY: page `i` lies inside the live, page-aligned, readable
    // mapping; the test is single-threaded, nothing writes it meanwhile.
    unsafe { std::slice::from_raw_parts(m.as_ptr().add(i * PAGE_SIZE).cast::<u64>(), WORDS) }
}

/// Writes the pattern into page `i` of `m`.
fn fill_page(m: &Mapping, i: usize) {
    assert!(i < m.nr_pages());
    // SAFETY: page `i` lies inside the live, page-aligned, writable
    // mapping, and no reference to it is alive.
    let p = unsafe { m.as_ptr().add(i * PAGE_SIZE).cast::<u64>() };
    for j in 0..WORDS {
        // SAFETY: in bounds of the page, see above.
        unsafe { p.add(j).write(pattern(i, j)) };
    }
}

/// Checks pages `pages` of `m` against the pattern; the error names how
/// many pages differ and the first word that does.
fn verify_pages(m: &Mapping, pages: impl Iterator<Item = usize>) -> Result<String, String> {
    let (mut bad, mut n, mut first) = (0usize, 0usize, None);
    for i in pages {
        n += 1;
        let w = page_words(m, i);
        if let Some(j) = (0..WORDS).find(|&j| w[j] != pattern(i, j)) {
            bad += 1;
            first.get_or_insert(format!(
                "page {i} word {j}: {:#018x}, expected {:#018x}",
                w[j],
                pattern(i, j)
            ));
        }
    }
    match first {
        None => Ok(format!("{n} pages, {} KiB", n * PAGE_SIZE / 1024)),
        Some(f) => Err(format!("{bad} of {n} pages differ; first: {f}")),
    }
}

/// Every page of `m` is on `nid` (`move_pages`).
fn check_nodes(m: &Mapping, nid: u32) -> Result<String, String> {
    let nodes = m.page_nodes().map_err(|e| format!("move_pages: {e}"))?;
    let bad: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i] != nid as i32)
        .collect();
    if bad.is_empty() {
        return Ok(format!("{} pages on node {nid}", nodes.len()));
    }
    Err(format!(
        "{} of {} pages not on node {nid}: {}",
        bad.len(),
        nodes.len(),
        bad.iter()
            .take(4)
            .map(|&i| format!("page {i} on {}", status_str(nodes[i])))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

/// A forked child that shares the mapping: fork copies the PTEs of a
/// `VM_MIXEDMAP` mapping, so the child maps the very pages the parent
/// does, and a move must zap its PTEs too (else it would keep a freed
/// page mapped). It reports how many of its PTEs are present, waits for
/// the offline, then checks in its own address space: no PTE left on an
/// offlined block, every byte, every page's node.
struct Sharer {
    pid: libc::pid_t,
    go: std::fs::File,
    result: std::io::BufReader<std::fs::File>,
}

fn pipe() -> std::io::Result<(std::fs::File, std::fs::File)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are ours.
    Ok(unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    })
}

/// The child's side of [`Sharer`]: one line on `out` when ready, then,
/// after reading `TARGET BLOCK...` from `go`, one result line.
fn sharer_child(m: &Mapping, block_bytes: u64, go: std::fs::File, mut out: std::fs::File) -> ! {
    use std::io::{BufRead, Write};
    let present = pagemap_pfns(m.addr(), m.nr_pages())
        .map(|p| p.iter().flatten().count())
        .unwrap_or(0);
    let _ = writeln!(out, "ready {present}");
    let mut line = String::new();
    let _ = std::io::BufReader::new(go).read_line(&mut line);
    let nums: Vec<u64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let res = (|| -> Result<String, String> {
        let (&target, offlined) = nums.split_first().ok_or("no target from the parent")?;
        let pfns = pagemap_pfns(m.addr(), m.nr_pages()).map_err(|e| e.to_string())?;
        let still = pfns.iter().flatten().count();
        let stale: Vec<u64> = pfns
            .iter()
            .flatten()
            .copied()
            .filter(|&p| offlined.contains(&block_of_pfn(p, block_bytes)))
            .collect();
        if !stale.is_empty() {
            return Err(format!(
                "{} of its PTEs still map pfns in offlined blocks (first {:#x})",
                stale.len(),
                stale[0]
            ));
        }
        let v = verify_pages(m, 0..m.nr_pages())?;
        let n = check_nodes(m, target as u32)?;
        Ok(format!(
            "{present} PTEs present before the offline, {still} after; {v}; {n}"
        ))
    })();
    let _ = match res {
        Ok(s) => writeln!(out, "ok {s}"),
        Err(e) => writeln!(out, "err {e}"),
    };
    // SAFETY: ends the forked child without running the parent's exit
    // handlers.
    unsafe { libc::_exit(0) }
}

impl Sharer {
    /// Forks the child; returns it once it has looked at its PTEs, with
    /// how many were present.
    fn spawn(m: &Mapping, block_bytes: u64) -> Result<(Sharer, usize), String> {
        use std::io::BufRead;
        let (go_r, go_w) = pipe().map_err(|e| format!("pipe: {e}"))?;
        let (res_r, res_w) = pipe().map_err(|e| format!("pipe: {e}"))?;
        // SAFETY: the test is single-threaded; the child runs Rust code on
        // its copy of the address space and ends with _exit.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(format!("fork: {}", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            drop(go_w);
            drop(res_r);
            sharer_child(m, block_bytes, go_r, res_w);
        }
        drop(go_r);
        drop(res_w);
        let mut s = Sharer {
            pid,
            go: go_w,
            result: std::io::BufReader::new(res_r),
        };
        let mut line = String::new();
        let _ = s.result.read_line(&mut line);
        match line.trim().strip_prefix("ready ") {
            Some(n) => Ok((s, n.parse().unwrap_or(0))),
            None => Err(format!("child said {line:?}")),
        }
    }

    /// Tells the child the target node and the offlined blocks, and
    /// returns its verdict (waiting at most `limit`).
    fn check(mut self, target: u32, offlined: &[u64], limit: Duration) -> Result<String, String> {
        use std::io::{BufRead, Write};
        use std::os::fd::AsRawFd;
        let mut msg = target.to_string();
        for b in offlined {
            msg.push_str(&format!(" {b}"));
        }
        writeln!(self.go, "{msg}").map_err(|e| format!("pipe: {e}"))?;
        let mut pfd = libc::pollfd {
            fd: self.result.get_ref().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, limit.as_millis() as i32) };
        let mut line = String::new();
        if ready > 0 {
            let _ = self.result.read_line(&mut line);
        }
        if line.is_empty() {
            // SAFETY: our own child.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
        let mut status = 0;
        // SAFETY: reaps our own child.
        unsafe { libc::waitpid(self.pid, &mut status, 0) };
        let line = line.trim();
        if let Some(ok) = line.strip_prefix("ok ") {
            Ok(ok.to_string())
        } else if let Some(e) = line.strip_prefix("err ") {
            Err(e.to_string())
        } else if line.is_empty() {
            Err(format!(
                "no answer within {} (status {status:#x}: killed by a signal = it faulted)",
                secs(limit)
            ))
        } else {
            Err(format!("child said {line:?}"))
        }
    }
}

/// The kind of memory a node has, from its zones in `/proc/zoneinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    /// All of it in ZONE_MOVABLE.
    Movable,
    /// None of it in ZONE_MOVABLE (Normal, DMA32, ...).
    Kernel(Vec<String>),
    /// Both.
    Mixed(Vec<String>),
    None,
}

fn node_kind(nid: u32) -> Kind {
    let zones: Vec<String> = node_zones(nid).into_iter().map(|z| z.zone).collect();
    let movable = zones.iter().any(|z| z == "Movable");
    match (zones.is_empty(), movable, zones.len()) {
        (true, _, _) => Kind::None,
        (false, true, 1) => Kind::Movable,
        (false, true, _) => Kind::Mixed(zones),
        (false, false, _) => Kind::Kernel(zones),
    }
}

/// The test's state: the report, and what it must put back.
struct T {
    r: Report,
    topo: Topology,
    block_bytes: u64,
    /// Blocks this test took offline and has not yet onlined: block ->
    /// the zone to put it back into.
    to_online: BTreeMap<u64, String>,
    /// The opt-in was set to 1 and must go back to 0.
    opt_in_set: bool,
    /// A state write did not return even after SIGKILL: no more hotplug.
    stuck: bool,
    /// Every offline attempt, for the JSON line.
    offlines: Vec<Value>,
    kmsg: Option<Kmsg>,
}

impl T {
    /// Kernel log lines since the last call.
    fn log(&self) -> Vec<String> {
        self.kmsg.as_ref().map(Kmsg::read_new).unwrap_or_default()
    }

    fn skip_log(&self) {
        let _ = self.log();
    }

    /// Offlines `block` with the time limit and records the attempt.
    fn offline(&mut self, what: &str, block: u64, pages: usize) -> Option<Timed> {
        if self.stuck {
            self.r.fail(
                &format!("{what}: offline memory{block}"),
                "not tried: an earlier state write is stuck in the kernel",
            );
            return None;
        }
        let zone = block_zone(block).unwrap_or_else(|| "?".into());
        let t = match set_block_state(block, "offline", OFFLINE_LIMIT) {
            Ok(t) => t,
            Err(e) => {
                self.r.fail(
                    &format!("{what}: offline memory{block}"),
                    format!("fork: {e}"),
                );
                return None;
            }
        };
        if t.outcome == Outcome::Done {
            self.to_online.insert(block, zone.clone());
        }
        if let Outcome::TimedOut { reaped } = t.outcome {
            self.stuck |= !reaped;
            // A killed offline backs out (EINTR), but look.
            if block_state(block).as_deref() == Some("offline") {
                self.to_online.insert(block, zone.clone());
            }
        }
        self.r.note(format!(
            "{what}: offline memory{block} (zone {zone}, {pages} tierkit pages): {} after {}",
            t.outcome.describe(),
            secs(t.elapsed)
        ));
        self.offlines.push(json!({
            "case": what,
            "block": block,
            "zone": zone,
            "tierkit_pages": pages,
            "outcome": t.outcome.describe(),
            "seconds": t.elapsed.as_secs_f64(),
        }));
        Some(t)
    }

    /// Onlines every block this test took offline, into its old zone.
    fn online_all(&mut self, what: &str) {
        let blocks: Vec<(u64, String)> = std::mem::take(&mut self.to_online).into_iter().collect();
        for (b, zone) in blocks {
            let name = format!("{what}: online memory{b} again ({})", online_value(&zone));
            if self.stuck {
                self.r.fail(
                    &name,
                    "not tried: an earlier state write is stuck in the kernel",
                );
                continue;
            }
            let res = match set_block_state(b, online_value(&zone), OFFLINE_LIMIT) {
                Err(e) => Err(format!("fork: {e}")),
                Ok(t) if t.outcome != Outcome::Done => {
                    if let Outcome::TimedOut { reaped: false } = t.outcome {
                        self.stuck = true;
                    }
                    Err(format!(
                        "{} after {}",
                        t.outcome.describe(),
                        secs(t.elapsed)
                    ))
                }
                Ok(t) => {
                    let (st, z) = (block_state(b), block_zone(b));
                    if st.as_deref() != Some("online") || z.as_deref() != Some(zone.as_str()) {
                        Err(format!(
                            "state {st:?}, zone {z:?} (expected online, {zone})"
                        ))
                    } else {
                        Ok(format!("{}, zone {zone}", secs(t.elapsed)))
                    }
                }
            };
            if res.is_err() {
                // Keep it on the list for the final restore attempt.
                self.to_online.insert(b, zone);
            }
            self.r.check_note(&name, res);
        }
    }

    /// Sets the `movable_gigantic` opt-in.
    fn set_opt_in(&mut self, on: bool) -> Result<(), String> {
        let v = if on { "1" } else { "0" };
        write_file(Path::new(MOVABLE_GIGANTIC), v)
            .map_err(|e| format!("writing {v} to {MOVABLE_GIGANTIC}: {}", errno_name(&e)))?;
        self.opt_in_set = on;
        let now = read_opt_in();
        if now.as_deref() != Some(v) {
            return Err(format!(
                "{MOVABLE_GIGANTIC} reads {now:?} after writing {v}"
            ));
        }
        Ok(())
    }
}

fn read_opt_in() -> Option<String> {
    std::fs::read_to_string(MOVABLE_GIGANTIC)
        .ok()
        .map(|s| s.trim().to_string())
}

fn held(stats: &[NodeStats], nid: u32) -> u64 {
    stats_of(stats, nid).1
}

fn total_held(stats: &[NodeStats]) -> u64 {
    stats.iter().map(|s| s.held).sum()
}

/// `held` of every node that has some, for messages: `0:2048 2:0`.
fn fmt_held(stats: &[NodeStats], nodes: &[u32]) -> String {
    nodes
        .iter()
        .map(|&n| format!("{n}:{}", held(stats, n)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Opens `/dev/tierkit` with an interleave policy on `nid` alone.
fn open_on(r: &mut Report, what: &str, nid: u32) -> Option<Tierkit> {
    let tk = match Tierkit::open() {
        Ok(t) => t,
        Err(e) => {
            r.fail(&format!("{what}: open /dev/tierkit"), errno_name(&e));
            return None;
        }
    };
    match tk.set_policy(TK_MODE_INTERLEAVE, 1u64 << nid) {
        Ok(p) if p.nodemask == 1u64 << nid => Some(tk),
        Ok(p) => {
            r.fail(
                &format!("{what}: TK_IOC_SET_POLICY on node {nid}"),
                format!("effective mask {}", fmt_mask(p.nodemask)),
            );
            None
        }
        Err(e) => {
            r.fail(
                &format!("{what}: TK_IOC_SET_POLICY on node {nid}"),
                errno_name(&e),
            );
            None
        }
    }
}

/// Maps `pages` 4 KiB pages on `nid` and fills them with the pattern.
fn map_filled(t: &mut T, what: &str, nid: u32, pages: usize) -> Option<(Tierkit, Mapping)> {
    let tk = open_on(&mut t.r, what, nid)?;
    let t0 = monotonic_ns();
    let m = match tk.map(pages, 0) {
        Ok(m) => m,
        Err(e) => {
            let log = t.log().join(" | ");
            t.r.fail(
                &format!("{what}: mmap {} KiB on node {nid}", pages * 4),
                format!("{} (kernel log: {log})", errno_name(&e)),
            );
            return None;
        }
    };
    let map_s = (monotonic_ns() - t0) as f64 / 1e9;
    let t1 = monotonic_ns();
    for i in 0..pages {
        fill_page(&m, i);
    }
    t.r.ok_note(
        &format!(
            "{what}: mmap {} KiB on node {nid} and fill a pattern",
            pages * 4
        ),
        format!(
            "mmap {map_s:.3} s, fill {:.3} s",
            (monotonic_ns() - t1) as f64 / 1e9
        ),
    );
    Some((tk, m))
}

/// The pfn of every page of `m`, all present; else a failed check.
fn all_pfns(r: &mut Report, what: &str, m: &Mapping) -> Option<Vec<u64>> {
    match pagemap_pfns(m.addr(), m.nr_pages()) {
        Ok(p) if p.iter().all(Option::is_some) => Some(p.into_iter().flatten().collect()),
        Ok(p) => {
            r.fail(
                &format!("{what}: pfns from /proc/self/pagemap"),
                format!(
                    "{} of {} pages show no pfn (not root?)",
                    p.iter().filter(|x| x.is_none()).count(),
                    p.len()
                ),
            );
            None
        }
        Err(e) => {
            r.fail(
                &format!("{what}: pfns from /proc/self/pagemap"),
                e.to_string(),
            );
            None
        }
    }
}

/// Offlining a block of kernel memory that holds tierkit pages: `EBUSY`
/// at once, nothing changes.
fn kernel_case(t: &mut T, k: u32) {
    let what = format!("kernel memory node {k}");
    let zones: Vec<String> = node_zones(k).into_iter().map(|z| z.zone).collect();
    t.r.note(format!("{what}: zones {}", zones.join(" ")));
    let Some(s0) = read_stats() else {
        t.r.fail(&format!("{what}: read {}", tk::STATS_PATH), "unreadable");
        return;
    };
    let Some((_tk, m)) = map_filled(t, &what, k, PAGES) else {
        return;
    };
    t.r.check_note(
        &format!("{what}: every page on node {k}"),
        check_nodes(&m, k),
    );
    let Some(pfns) = all_pfns(&mut t.r, &what, &m) else {
        return;
    };
    let blocks = blocks_of(
        &pfns.iter().copied().map(Some).collect::<Vec<_>>(),
        t.block_bytes,
    );
    t.r.note(format!(
        "{what}: the pages are in {}",
        blocks
            .iter()
            .map(|(b, n)| format!(
                "memory{b} ({n} pages, zone {})",
                block_zone(*b).unwrap_or_else(|| "?".into())
            ))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    t.skip_log();
    for &(b, n) in &blocks {
        let name = format!("{what}: offline memory{b} holding {n} tierkit pages is EBUSY at once");
        let Some(tm) = t.offline(&what, b, n) else {
            continue;
        };
        let res = match tm.outcome {
            Outcome::Failed(e) if e == libc::EBUSY && tm.elapsed < PROMPT => {
                Ok(format!("EBUSY in {}", secs(tm.elapsed)))
            }
            Outcome::Failed(e) if e == libc::EBUSY => Err(format!(
                "EBUSY, but after {} (limit {})",
                secs(tm.elapsed),
                secs(PROMPT)
            )),
            o => Err(format!("{} after {}", o.describe(), secs(tm.elapsed))),
        };
        t.r.check_note(&name, res);
        let st = block_state(b);
        t.r.check(
            &format!("{what}: memory{b} still online"),
            if st.as_deref() == Some("online") {
                Ok(())
            } else {
                Err(format!("state {st:?}"))
            },
        );
    }
    let log: Vec<String> = t
        .log()
        .into_iter()
        .filter(|l| l.contains("offlin"))
        .collect();
    if !log.is_empty() {
        t.r.note(format!("{what}: kernel log: {}", log.join(" | ")));
    }
    t.online_all(&what);
    t.r.check_note(
        &format!("{what}: contents intact"),
        verify_pages(&m, 0..PAGES),
    );
    t.r.check_note(
        &format!("{what}: every page still on node {k}"),
        check_nodes(&m, k),
    );
    let after = pagemap_pfns(m.addr(), PAGES).unwrap_or_default();
    t.r.check(
        &format!("{what}: the pages did not move"),
        if after.iter().copied().eq(pfns.iter().copied().map(Some)) {
            Ok(())
        } else {
            Err("pfns changed".to_string())
        },
    );
    let s1 = read_stats().unwrap_or_default();
    t.r.check(
        &format!("{what}: stats unchanged"),
        if held(&s1, k) == held(&s0, k) + PAGES as u64
            && total_held(&s1) == total_held(&s0) + PAGES as u64
        {
            Ok(())
        } else {
            Err(format!(
                "held {} before the mmap, {} now (expected +{PAGES} on node {k} and in total)",
                fmt_held(&s0, &t.topo.memory),
                fmt_held(&s1, &t.topo.memory)
            ))
        },
    );
}

/// The 4 KiB pages on ZONE_MOVABLE move when their blocks go offline.
fn movable_case(t: &mut T, c: u32) {
    let what = format!("movable node {c}");
    let online = t.topo.online.clone();
    let target = first_fallback(c, &t.topo.memory, &node_distances(c, &online), &t.topo.cpu);
    let Some(target) = target else {
        t.r.fail(
            &format!("{what}: a node to move to"),
            "no other node with memory",
        );
        return;
    };
    t.r.note(format!(
        "{what}: offlined pages should move to node {target} (first fallback in node {c}'s zonelist, distances {:?})",
        node_distances(c, &online)
    ));
    let Some(s0) = read_stats() else {
        t.r.fail(&format!("{what}: read {}", tk::STATS_PATH), "unreadable");
        return;
    };
    let Some((tk, m)) = map_filled(t, &what, c, PAGES) else {
        return;
    };
    t.r.check_note(
        &format!("{what}: every page on node {c}"),
        check_nodes(&m, c),
    );
    let s1 = read_stats().unwrap_or_default();
    t.r.check(
        &format!("{what}: stats count the pages on node {c}"),
        if held(&s1, c) == held(&s0, c) + PAGES as u64 {
            Ok(())
        } else {
            Err(format!(
                "held {} before, {} after the mmap",
                fmt_held(&s0, &t.topo.memory),
                fmt_held(&s1, &t.topo.memory)
            ))
        },
    );
    let Some(pfns) = all_pfns(&mut t.r, &what, &m) else {
        return;
    };
    let blocks = blocks_of(
        &pfns.iter().copied().map(Some).collect::<Vec<_>>(),
        t.block_bytes,
    );
    let desc: Vec<String> = blocks
        .iter()
        .map(|(b, n)| {
            format!(
                "memory{b} ({n} pages, node {}, zone {})",
                block_node(*b).map_or("?".into(), |x| x.to_string()),
                block_zone(*b).unwrap_or_else(|| "?".into())
            )
        })
        .collect();
    t.r.check_note(
        &format!("{what}: the pages' blocks are node {c}'s, in ZONE_MOVABLE"),
        if blocks
            .iter()
            .all(|(b, _)| block_node(*b) == Some(c) && block_zone(*b).as_deref() == Some("Movable"))
        {
            Ok(desc.join(", "))
        } else {
            Err(desc.join(", "))
        },
    );
    let sharer = match Sharer::spawn(&m, t.block_bytes) {
        Ok((sh, present)) => {
            t.r.note(format!(
                "{what}: a forked child shares the mapping ({present} of {PAGES} PTEs present in it)"
            ));
            Some(sh)
        }
        Err(e) => {
            t.r.fail(&format!("{what}: fork a child sharing the mapping"), e);
            None
        }
    };
    t.skip_log();
    let mut offlined = Vec::new();
    for &(b, n) in &blocks {
        let name = format!("{what}: offline memory{b} holding {n} tierkit pages");
        let Some(tm) = t.offline(&what, b, n) else {
            continue;
        };
        let res = match tm.outcome {
            Outcome::Done => {
                let st = block_state(b);
                if st.as_deref() == Some("offline") {
                    offlined.push(b);
                    Ok(secs(tm.elapsed))
                } else {
                    Err(format!("the write succeeded but state reads {st:?}"))
                }
            }
            Outcome::TimedOut { .. } => Err(format!(
                "hung: {} (limit {})",
                tm.outcome.describe(),
                secs(OFFLINE_LIMIT)
            )),
            o => Err(format!("{} after {}", o.describe(), secs(tm.elapsed))),
        };
        t.r.check_note(&name, res);
    }
    let log: Vec<String> = t
        .log()
        .into_iter()
        .filter(|l| l.contains("tierkit") || l.contains("offlin"))
        .collect();
    if !log.is_empty() {
        t.r.note(format!("{what}: kernel log: {}", log.join(" | ")));
    }
    // Before anything touches the mapping: the moved pages' PTEs are gone.
    let pm = pagemap_pfns(m.addr(), PAGES).unwrap_or_default();
    let unmapped = pm.iter().filter(|p| p.is_none()).count();
    t.r.note(format!(
        "{what}: after the offline, before the next touch, {unmapped} of {PAGES} pages are unmapped"
    ));
    t.r.check_note(
        &format!("{what}: every byte intact after the offline"),
        verify_pages(&m, 0..PAGES),
    );
    t.r.check_note(
        &format!("{what}: every page now on node {target}"),
        check_nodes(&m, target),
    );
    let after = pagemap_pfns(m.addr(), PAGES).unwrap_or_default();
    let inside: Vec<u64> = after
        .iter()
        .flatten()
        .copied()
        .filter(|&p| offlined.contains(&block_of_pfn(p, t.block_bytes)))
        .collect();
    t.r.check(
        &format!("{what}: no page left in an offlined block"),
        if after.len() != PAGES || after.iter().any(Option::is_none) {
            Err(format!(
                "{} of {PAGES} pages show no pfn",
                PAGES - after.iter().flatten().count()
            ))
        } else if inside.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} pages still in offlined blocks, first pfn {:#x}",
                inside.len(),
                inside[0]
            ))
        },
    );
    let s2 = read_stats().unwrap_or_default();
    t.r.check_note(
        &format!("{what}: stats: held moved from node {c} to node {target}"),
        if held(&s2, c) == held(&s0, c)
            && held(&s2, target) == held(&s1, target) + PAGES as u64
            && total_held(&s2) == total_held(&s1)
        {
            Ok(format!(
                "held {} -> {}",
                fmt_held(&s1, &t.topo.memory),
                fmt_held(&s2, &t.topo.memory)
            ))
        } else {
            Err(format!(
                "held before the mmap {}, after it {}, after the offline {} (expected node {c} back to {}, node {target} +{PAGES}, same total)",
                fmt_held(&s0, &t.topo.memory),
                fmt_held(&s1, &t.topo.memory),
                fmt_held(&s2, &t.topo.memory),
                held(&s0, c)
            ))
        },
    );
    if let Some(sh) = sharer {
        t.r.check_note(
            &format!("{what}: the forked child sees the moved pages"),
            sh.check(target, &offlined, OFFLINE_LIMIT),
        );
    }
    // SAFETY: the mapping is ours; MADV_DONTNEED drops the PTEs, the
    // file keeps the pages (dev-tierkit).
    let dn =
        unsafe { userspace_tests::sys::madvise(m.as_ptr().cast(), m.len(), libc::MADV_DONTNEED) };
    t.r.check_note(
        &format!("{what}: MADV_DONTNEED + touch after the move: the moved contents"),
        match dn {
            Err(e) => Err(format!("madvise: {}", errno_name(&e))),
            Ok(()) => verify_pages(&m, 0..PAGES)
                .and_then(|v| check_nodes(&m, target).map(|n| format!("{v}, {n}"))),
        },
    );
    t.online_all(&what);
    drop(m);
    drop(tk);
    // A new mapping on the node, with the blocks back.
    if let Some((_tk2, m2)) = map_filled(t, &format!("{what} after onlining"), c, PAGES_AGAIN) {
        t.r.check_note(
            &format!("{what} after onlining: every page on node {c}"),
            check_nodes(&m2, c),
        );
        t.r.check_note(
            &format!("{what} after onlining: contents"),
            verify_pages(&m2, 0..PAGES_AGAIN),
        );
    }
    let s3 = read_stats().unwrap_or_default();
    t.r.check(
        &format!("{what}: stats back to the start once the files are closed"),
        if t.topo.memory.iter().all(|&n| held(&s3, n) == held(&s0, n)) {
            Ok(())
        } else {
            Err(format!(
                "held {} at the start, {} now",
                fmt_held(&s0, &t.topo.memory),
                fmt_held(&s3, &t.topo.memory)
            ))
        },
    );
}

/// Whether node `c` has a naturally aligned GiB of online blocks of its
/// own and a GiB free; the reason if not.
fn aligned_gib(c: u32, block_bytes: u64) -> Result<String, String> {
    let per = (TK_GIGANTIC_BYTES / block_bytes).max(1);
    let blocks: Vec<u64> = node_blocks(c)
        .into_iter()
        .filter(|&b| block_state(b).as_deref() == Some("online"))
        .collect();
    let gibs: Vec<u64> = blocks
        .iter()
        .filter(|&&b| b % per == 0 && (b..b + per).all(|x| blocks.contains(&x)))
        .map(|&b| b / per)
        .collect();
    let free: u64 = node_zones(c).iter().map(|z| z.free).sum();
    if gibs.is_empty() {
        return Err(format!(
            "node {c} has no naturally aligned GiB of online memory blocks ({} blocks of {} MiB)",
            blocks.len(),
            block_bytes >> 20
        ));
    }
    if free < GIB_PAGES as u64 {
        return Err(format!(
            "node {c} has {} MiB free, less than 1 GiB",
            (free * PAGE_SIZE as u64) >> 20
        ));
    }
    Ok(format!(
        "{} aligned GiB(s) of blocks, {} MiB free",
        gibs.len(),
        (free * PAGE_SIZE as u64) >> 20
    ))
}

fn gigantic_file(r: &mut Report, what: &str, c: u32) -> Option<Tierkit> {
    let tk = open_on(r, what, c)?;
    let g = TkGigantic {
        threads: 1,
        placement: TK_PLACE_LOCAL,
        ..Default::default()
    };
    if let Err(e) = tk.set_gigantic(g) {
        r.fail(&format!("{what}: TK_IOC_SET_GIGANTIC"), errno_name(&e));
        return None;
    }
    Some(tk)
}

/// Gigantic ranges on the movable node `c`, without and with the opt-in.
fn gigantic_case(t: &mut T, c: u32) {
    let what = format!("gigantic on movable node {c}");
    let v = read_opt_in();
    t.r.check(
        &format!("{what}: movable_gigantic is 0 by default"),
        match v.as_deref() {
            Some("0") => Ok(()),
            None => Err(format!("cannot read {MOVABLE_GIGANTIC}")),
            Some(x) => Err(format!("reads {x:?}")),
        },
    );
    if v.is_none() {
        return;
    }
    if v.as_deref() != Some("0") {
        t.opt_in_set = true;
        if let Err(e) = t.set_opt_in(false) {
            t.r.fail(&format!("{what}: set movable_gigantic to 0"), e);
            return;
        }
    }

    // Without the opt-in. Gigantic mmap only reserves; the GiB is made at
    // its first touch, which fails: SIGBUS (in a child).
    if let Some(tk) = gigantic_file(&mut t.r, &format!("{what} without opt-in"), c) {
        t.skip_log();
        let t0 = monotonic_ns();
        let res = tk.map(GIB_PAGES, 0).and_then(|m| {
            let p = m.as_ptr();
            userspace_tests::vma::fork_run(|| {
                // SAFETY: our writable mapping; the fault is expected to SIGBUS.
                unsafe { std::ptr::write_volatile(p, 1) };
                0
            })
        });
        let el = (monotonic_ns() - t0) as f64 / 1e9;
        let log = t.log();
        t.r.check_note(
            &format!("{what} without opt-in: the first touch of a 1 GiB mapping is SIGBUS"),
            match &res {
                Ok(userspace_tests::vma::Exit::Signal(libc::SIGBUS)) => Ok(format!("{el:.3} s")),
                Ok(e) => Err(format!("the child: {e} after {el:.3} s, expected SIGBUS")),
                Err(e) => Err(format!("mmap or fork: {} after {el:.3} s", errno_name(e))),
            },
        );
        drop(res);
        let hit = log.iter().find(|l| l.contains("movable_gigantic"));
        t.r.check_note(
            &format!("{what} without opt-in: the kernel log names movable_gigantic"),
            match hit {
                Some(l) => Ok(l.clone()),
                None => Err(format!("kernel log: {}", log.join(" | "))),
            },
        );
    }

    // With the opt-in.
    let name = format!("{what} with opt-in");
    if let Err(why) = aligned_gib(c, t.block_bytes) {
        for n in [
            "mmap 1 GiB",
            "offline a block inside the range is EBUSY at once",
            "the kernel log names tierkit and the range",
            "the range is intact",
        ] {
            t.r.skip(&format!("{name}: {n}"), &why);
        }
        return;
    }
    if let Err(e) = t.set_opt_in(true) {
        t.r.fail(&format!("{name}: echo 1 > movable_gigantic"), e);
        return;
    }
    t.r.ok(&format!("{name}: echo 1 > movable_gigantic"));
    gigantic_opt_in(t, &name, c);
    let res = t.set_opt_in(false);
    t.r.check(&format!("{what}: movable_gigantic back to 0"), res);
}

fn gigantic_opt_in(t: &mut T, name: &str, c: u32) {
    let Some(tk) = gigantic_file(&mut t.r, name, c) else {
        return;
    };
    t.skip_log();
    let t0 = monotonic_ns();
    let m = match tk.map(GIB_PAGES, 0) {
        Ok(m) => m,
        Err(e) => {
            let log = t.log().join(" | ");
            t.r.fail(
                &format!("{name}: mmap 1 GiB"),
                format!("{} (kernel log: {log})", errno_name(&e)),
            );
            return;
        }
    };
    t.r.ok_note(
        &format!("{name}: mmap 1 GiB"),
        format!("{:.1} s", (monotonic_ns() - t0) as f64 / 1e9),
    );
    // The first touch makes the GiB (in a child: a GiB that cannot be made
    // is SIGBUS for the toucher); one PUD leaf maps it (TK_IOC_WALK:
    // pagemap would zap the PUD and show nothing).
    // SAFETY: `m` is a live mapping of ours.
    if let Err(e) = unsafe { userspace_tests::vma::make_gigantic(m.as_ptr(), m.len()) } {
        let log = t.log().join(" | ");
        t.r.fail(
            &format!("{name}: the first touch makes the GiB"),
            format!("{e} (kernel log: {log})"),
        );
        return;
    }
    fill_page(&m, 0);
    let w = tk.walk(m.addr()).ok();
    let p0 = w.map_or(0, |w| w.pfn);
    let contiguous =
        w.is_some_and(|w| w.level == TK_WALK_PUD) && p0 != 0 && p0 % GIB_PAGES as u64 == 0;
    let node = block_of_pfn(p0, t.block_bytes);
    t.r.check_note(
        &format!("{name}: one aligned GiB on node {c}"),
        if !contiguous {
            Err(format!(
                "pfns not one aligned contiguous GiB (first {p0:#x})"
            ))
        } else if block_node(node) != Some(c) {
            Err(format!("memory{node} is on node {:?}", block_node(node)))
        } else {
            Ok(format!(
                "pfn {p0:#x}.., zone {}",
                block_zone(node).unwrap_or_else(|| "?".into())
            ))
        },
    );
    if p0 == 0 {
        return;
    }
    let mid = GIB_PAGES / 2;
    let b = block_of_pfn(p0 + mid as u64, t.block_bytes);
    let (bfirst, _) = memblock::block_pfns(b, t.block_bytes);
    let in_block = (bfirst - p0) as usize;
    let mut spots = vec![0, in_block, mid, GIB_PAGES - 1];
    spots.sort_unstable();
    spots.dedup();
    for &i in &spots {
        fill_page(&m, i);
    }
    t.skip_log();
    let Some(tm) = t.offline(name, b, GIB_PAGES) else {
        return;
    };
    let log = t.log();
    t.r.check_note(
        &format!("{name}: offline memory{b} inside the range is EBUSY at once"),
        match tm.outcome {
            Outcome::Failed(e) if e == libc::EBUSY && tm.elapsed < PROMPT => {
                Ok(format!("EBUSY in {}", secs(tm.elapsed)))
            }
            o => Err(format!(
                "{} after {} (expected EBUSY within {})",
                o.describe(),
                secs(tm.elapsed),
                secs(PROMPT)
            )),
        },
    );
    // A block strictly inside the GiB is refused by the kernel's own
    // isolation (the GiB's folio straddles both its edges) before any
    // notifier runs, so nothing is logged for it. The GiB's last block
    // ends where the folio ends: the kernel gets to tierkit's notifier,
    // which refuses it and names the range.
    let last = block_of_pfn(p0 + GIB_PAGES as u64 - 1, t.block_bytes);
    t.skip_log();
    let log = match t.offline(name, last, GIB_PAGES) {
        Some(tl) => {
            t.r.check_note(
                &format!("{name}: offline memory{last}, the range's last block, is EBUSY at once"),
                match tl.outcome {
                    Outcome::Failed(e) if e == libc::EBUSY && tl.elapsed < PROMPT => {
                        Ok(format!("EBUSY in {}", secs(tl.elapsed)))
                    }
                    o => Err(format!("{} after {}", o.describe(), secs(tl.elapsed))),
                },
            );
            t.log()
        }
        None => log,
    };
    let range = format!("{p0:#x}");
    let hit = log
        .iter()
        .find(|l| l.contains("tierkit") && l.contains(&range));
    t.r.check_note(
        &format!("{name}: the kernel log names tierkit and the range"),
        match hit {
            Some(l) => Ok(l.clone()),
            None => Err(format!(
                "no line with 'tierkit' and {range}; kernel log: {}",
                log.join(" | ")
            )),
        },
    );
    let st = block_state(b);
    t.r.check(
        &format!("{name}: memory{b} still online"),
        if st.as_deref() == Some("online") {
            Ok(())
        } else {
            Err(format!("state {st:?}"))
        },
    );
    t.online_all(name);
    let zeros = [1usize, GIB_PAGES - 2];
    let zero_ok = zeros
        .iter()
        .all(|&i| page_words(&m, i).iter().all(|&w| w == 0));
    t.r.check_note(
        &format!("{name}: the range is intact"),
        verify_pages(&m, spots.iter().copied()).and_then(|v| {
            if zero_ok {
                Ok(format!(
                    "{v} of pattern at pages {spots:?}, pages {zeros:?} zero"
                ))
            } else {
                Err(format!("a page of {zeros:?} is no longer zero"))
            }
        }),
    );
    t.r.check_note(
        &format!("{name}: every page on node {c}"),
        match tk.walk(m.addr() + (GIB_PAGES - 1) * PAGE_SIZE) {
            Ok(w)
                if w.level == TK_WALK_PUD
                    && w.nid == c as i32
                    && w.pfn == p0 + GIB_PAGES as u64 - 1 =>
            {
                Ok(format!("one PUD at pfn {p0:#x} on node {c}"))
            }
            Ok(w) => Err(format!("walk: {w:?}")),
            Err(e) => Err(format!("TK_IOC_WALK: {}", errno_name(&e))),
        },
    );
}

fn main() -> ExitCode {
    userspace_tests::help!();
    let mut r = Report::new(BIN, "test");
    let Some(topo) = tierkit_ready(&mut r) else {
        return r.finish();
    };
    let block_bytes = match memblock::block_size() {
        Ok(b) => b,
        Err(e) => {
            r.fail("memory block size", e.to_string());
            return r.finish();
        }
    };
    r.note(format!("memory block size {} MiB", block_bytes >> 20));
    let kmsg = match Kmsg::open() {
        Ok(k) => Some(k),
        Err(e) => {
            r.fail("open /dev/kmsg", e.to_string());
            None
        }
    };
    let start = read_stats().unwrap_or_default();
    let mut t = T {
        r,
        topo: topo.clone(),
        block_bytes,
        to_online: BTreeMap::new(),
        opt_in_set: false,
        stuck: false,
        offlines: Vec::new(),
        kmsg,
    };

    let cxl = topo.cxl_node();
    let kinds: Vec<(u32, Kind)> = topo.memory.iter().map(|&n| (n, node_kind(n))).collect();
    for (n, k) in &kinds {
        t.r.note(format!("node {n}: {k:?}"));
    }
    let kind_of = |n: u32| kinds.iter().find(|x| x.0 == n).map(|x| x.1.clone());

    // Kernel memory: the memory-only node if it is kernel memory, else
    // the DRAM node.
    let kernel_node = cxl
        .filter(|&c| matches!(kind_of(c), Some(Kind::Kernel(_))))
        .or_else(|| {
            topo.dram_node()
                .filter(|&d| matches!(kind_of(d), Some(Kind::Kernel(_))))
        });
    match kernel_node {
        Some(k) => kernel_case(&mut t, k),
        None => {
            t.r.skip(
                "kernel memory: offline a block holding tierkit pages is EBUSY at once",
                "no node whose memory is all kernel zones",
            );
        }
    }

    let why_not_movable = match cxl {
        None => Some("no memory-only node (numa, numa2 or cxl topology needed)".to_string()),
        Some(c) => match kind_of(c) {
            Some(Kind::Movable) => None,
            Some(Kind::Kernel(z)) => Some(format!(
                "node {c}'s memory is in ZONE_{}, not ZONE_MOVABLE (boot memory or onlined as kernel memory; --topology cxl --cxl-online movable has a movable node)",
                z.join("/").to_uppercase()
            )),
            Some(Kind::Mixed(z)) => Some(format!(
                "node {c}'s memory is in several zones ({}), not all in ZONE_MOVABLE (a block onlined online_kernel?): tierkit's pages would go to the kernel zone",
                z.join(", ")
            )),
            _ => Some(format!("node {c} has no zone with memory")),
        },
    };
    match (cxl, why_not_movable) {
        (Some(c), None) => {
            movable_case(&mut t, c);
            gigantic_case(&mut t, c);
        }
        (_, Some(why)) => {
            for n in [
                "movable: offline every block holding tierkit pages",
                "movable: contents, nodes and stats after the offline",
                "movable: MADV_DONTNEED + touch after the move",
                "movable: online again and map again",
                "gigantic on movable: without opt-in, ENOMEM naming movable_gigantic",
                "gigantic on movable: with opt-in, offline inside the range is EBUSY at once",
            ] {
                t.r.skip(n, &why);
            }
        }
        _ => {}
    }

    // Put everything back.
    if !t.to_online.is_empty() {
        t.online_all("restore");
    }
    if t.opt_in_set {
        if let Err(e) = t.set_opt_in(false) {
            t.r.fail("restore: movable_gigantic back to 0", e);
        }
    }
    let end = read_stats().unwrap_or_default();
    let opt = read_opt_in();
    t.r.check(
        "everything put back: blocks online, opt-in 0, nothing held",
        if !t.to_online.is_empty() {
            Err(format!(
                "blocks still offline: {:?}",
                t.to_online.keys().collect::<Vec<_>>()
            ))
        } else if opt.is_some() && opt.as_deref() != Some("0") {
            Err(format!("movable_gigantic reads {opt:?}"))
        } else if total_held(&end) != total_held(&start) {
            Err(format!(
                "held {} at the start, {} at the end",
                fmt_held(&start, &topo.memory),
                fmt_held(&end, &topo.memory)
            ))
        } else {
            Ok(())
        },
    );
    let offlines = std::mem::take(&mut t.offlines);
    t.r.set("offlines", Value::Array(offlines));
    t.r.finish()
}
