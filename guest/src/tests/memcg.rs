//! The logic of `tk-test-memcg`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-memcg.rs` (its `--help`).

use crate::abi::tk::{Tierkit, TK_MODE_INTERLEAVE};
use crate::harness::report::Report;
use crate::linux::cgroup::{self, Cg};
use crate::linux::memblock;
use crate::linux::sys::PAGE_SIZE;
use crate::linux::vma::{self, check_pattern, fill_pattern, Exit};
use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

const BIN: &str = "tk-test-memcg";
const MIB: u64 = 1 << 20;

/// In a child: joins `cg` and maps `pages` 4 KiB pages on `nid`. `Err` is
/// the child's exit code: 2 cgroup, 3 open, 4 policy, 5 mmap, 12 ENOMEM.
fn mapped_in(
    cg: &Cg,
    nid: u32,
    pages: usize,
) -> Result<(Tierkit, crate::linux::sys::Mapping), i32> {
    if !cg.join() {
        return Err(2);
    }
    let tk = Tierkit::open().map_err(|_| 3)?;
    tk.set_policy(TK_MODE_INTERLEAVE, 1 << nid).map_err(|_| 4)?;
    let m = tk.map(pages, 0).map_err(|e| {
        if e.raw_os_error() == Some(libc::ENOMEM) {
            12
        } else {
            5
        }
    })?;
    Ok((tk, m))
}

/// A child in `cg` that maps `bytes` of 4 KiB pages on `nid` and exits
/// with 0 when it got them, 12 on ENOMEM.
fn map_in(cg: &Cg, nid: u32, bytes: u64) -> Result<Exit, String> {
    vma::fork_run(
        || match mapped_in(cg, nid, (bytes / PAGE_SIZE as u64) as usize) {
            Ok(_) => 0,
            Err(code) => code,
        },
    )
    .map_err(|e| format!("fork: {e}"))
}

fn charged(r: &mut Report, nid: u32) {
    let res = (|| -> Result<String, String> {
        let cg = Cg::new("tk-owner")?;
        let base = cg.current()?;
        let pages = (32 * MIB / PAGE_SIZE as u64) as usize;
        let mut child = vma::spawn_synced(|ready| {
            let m = match mapped_in(&cg, nid, pages) {
                Ok(m) => m,
                Err(code) => return code,
            };
            ready();
            vma::sleep_ms(3000);
            drop(m);
            0
        })
        .map_err(|e| e.to_string())?;
        let held = cg.current()?;
        let _ = child.kill_and_reap();
        let mut after = cg.current()?;
        for _ in 0..50 {
            if after <= base + 2 * MIB {
                break;
            }
            vma::sleep_ms(20);
            after = cg.current()?;
        }
        if held < base + 32 * MIB {
            return Err(format!(
                "memory.current {base} -> {held} while 32 MiB are mapped"
            ));
        }
        if after > base + 2 * MIB {
            return Err(format!(
                "memory.current {base} -> {held} -> {after} after munmap and close"
            ));
        }
        Ok(format!(
            "{} MiB while mapped, {} MiB after",
            (held - base) / MIB,
            after.saturating_sub(base) / MIB
        ))
    })();
    r.check_note(
        &format!(
            "node {nid}: a 32 MiB mapping is charged to its task's cgroup, and uncharged at close"
        ),
        res,
    );
}

fn bounded(r: &mut Report, nid: u32) {
    let res = (|| -> Result<String, String> {
        let cg = Cg::new("tk-tight")?;
        cg.set("memory.max", &(64 * MIB).to_string())?;
        cg.set("memory.swap.max", "0").ok();
        let exit = map_in(&cg, nid, 128 * MIB)?;
        let kills = cg.read_u64("memory.events", Some("oom_kill"))?;
        let left = cg.current()?;
        match exit {
            Exit::Code(12) if kills == 0 && left < 2 * MIB => {
                Ok(format!("ENOMEM; oom_kill 0; {left} bytes left charged"))
            }
            e => Err(format!(
                "the child: {e} (12 = ENOMEM); oom_kill {kills}; memory.current {left}"
            )),
        }
    })();
    r.check_note(&format!("node {nid}: mapping 128 MiB in a cgroup with memory.max 64 MiB is ENOMEM, nobody is OOM-killed"), res);
}

/// A gigantic GiB (CAP_SYS_ADMIN) is charged to no cgroup: made by a
/// task whose cgroup is at `memory.max`, it costs no OOM kill.
fn gigantic_uncharged(r: &mut Report, nid: u32) {
    let name = format!(
        "node {nid}: a mapped gigantic GiB is charged to no cgroup; made at memory.max, nobody is OOM-killed"
    );
    let res = (|| -> Result<String, String> {
        let cg = Cg::new("tk-owner")?;
        let base = cg.current()?;
        cg.set("memory.max", &(base + 16 * MIB).to_string())?;
        cg.set("memory.swap.max", "0").ok();
        let exit = vma::fork_run(|| {
            if !cg.join() {
                return 2;
            }
            let Ok(tk) = Tierkit::gigantic_on(nid) else {
                return 3;
            };
            let Ok(m) = crate::linux::sys::Mapping::new(1 << 30, libc::MAP_SHARED, tk.fd(), 0)
            else {
                return 4;
            };
            // SAFETY: our mapping; the first touch happens in a child.
            if unsafe { vma::make_gigantic(m.as_ptr(), 1 << 30) }.is_err() {
                return 12;
            }
            // SAFETY: made: maps the PUD here.
            unsafe { std::ptr::write_volatile(m.as_ptr(), 1) };
            let Ok(cur) = cg.current() else { return 5 };
            if cur > base + 16 * MIB {
                return 6;
            }
            0
        })
        .map_err(|e| e.to_string())?;
        match exit {
            Exit::Code(0) => Ok(format!(
                "memory.current stayed within 16 MiB of {} MiB",
                base / MIB
            )),
            Exit::Code(12) => Err("no free aligned GiB on the node (skip)".into()),
            e => Err(format!(
                "the child: {e} (6: memory.current grew by more than 16 MiB)"
            )),
        }
        .and_then(
            |note| match cg.read_u64("memory.events", Some("oom_kill"))? {
                0 => Ok(note),
                k => Err(format!("oom_kill {k} in a cgroup at memory.max")),
            },
        )
    })();
    match res {
        Err(e) if e.ends_with("(skip)") => {
            r.skip(&name, e);
        }
        res => {
            r.check_note(&name, res);
        }
    }
}

/// A task whose cgroup has 64 KiB (16 pages) of room left rebalances its
/// 8 MiB from node `a` to node `b`: a move keeps the page's charge (the
/// kernel's migration moves it too), so every page moves, none counts as
/// `no_memory`, `memory.current` stays and nobody is OOM-killed.
///
/// The room is real: before `memory.max` is set, a write of
/// `memory.high` = 0 drains the cgroup's per-CPU charge stocks (up to
/// `MEMCG_CHARGE_BATCH`, 64 pages, per CPU, counted in `memory.current`)
/// and reclaims what it can, and `memory.high` goes back to `max`. The
/// parent writes those files while the child waits in read(2): a child
/// that wrote them itself refilled its stock with up to 63 pages, counted
/// in the `memory.current` the room was set from, which a charge then
/// took as room. And it
/// is less than a batch's moves: every page of the 8 MiB is misplaced, so
/// each batch of 32 file pages moves 32. A move that charged its new page
/// before the old one was freed needs a batch's 32 pages of room and gets
/// `no_memory` for half of every batch. (To `a` and `b` alike only every
/// other page moves, 16 a batch, which exactly fits the room: that passed
/// on such code.)
fn rebalance_at_max(r: &mut Report, a: u32, b: u32) {
    /// The cgroup's room left: 16 pages, half a move batch.
    const ROOM: u64 = 64 * 1024;
    let res = (|| -> Result<String, String> {
        let cg = Cg::new("tk-rebalance")?;
        cg.set("memory.swap.max", "0").ok();
        let pages = (8 * MIB / PAGE_SIZE as u64) as usize;
        let (rd, wr) = go_pipe()?;
        let mut child = vma::spawn_synced(|ready| {
            let Ok((tk, m)) = mapped_in(&cg, a, pages) else {
                return 2;
            };
            // SAFETY: our mapping of `pages` pages.
            unsafe { fill_pattern(m.as_ptr(), 0, pages, 3) };
            ready();
            // The parent sets the room; this task allocates nothing
            // meanwhile, so no charge stock of its own refills.
            if !wait_go(&rd, &wr) {
                return 3;
            }
            let arg = tierkit_core::uapi::TkRebalance {
                nodemask: 1 << b,
                ..Default::default()
            };
            let Ok(done) = tk.rebalance(arg) else {
                return 4;
            };
            let all = pages as u64;
            if done.misplaced != all || done.moved != all || done.no_memory != 0 {
                eprintln!("rebalance at memory.max: {done:?}");
                return 5;
            }
            // SAFETY: as above.
            if unsafe { check_pattern(m.as_ptr(), 0, pages, 3) }.is_err() {
                return 6;
            }
            0
        })
        .map_err(|e| e.to_string())?;
        drop(rd);
        let cur = drained_current(&cg)?;
        cg.set("memory.max", &(cur + ROOM).to_string())?;
        go(wr);
        let exit = child.wait().map_err(|e| e.to_string())?;
        let kills = cg.read_u64("memory.events", Some("oom_kill"))?;
        match exit {
            Exit::Code(0) if kills == 0 => Ok(format!(
                "moved {pages} of {pages} with {} KiB of room; oom_kill 0",
                ROOM >> 10
            )),
            e => Err(format!(
                "the child: {e} (5: not every page moved, see stderr; 6: data); oom_kill {kills}"
            )),
        }
    })();
    r.check_note(
        &format!("node {a} to {b}: a rebalance in a cgroup at memory.max moves every misplaced page, charges nothing more"),
        res,
    );
}

/// A pipe whose read end a child blocks on in [`wait_go`] (read(2)
/// allocates nothing, where a path lookup's dentry, charged to a cgroup
/// with no room, would call the memcg OOM killer).
fn go_pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe(2) writes two fds.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: fresh fds of our own, each owned once.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// In the child: closes its copy of the write end `wr`, then waits for
/// the parent's byte; false on EOF (the parent's end closed without it).
fn wait_go(rd: &OwnedFd, wr: &OwnedFd) -> bool {
    // SAFETY: the child's own copy of the fd (the parent's stays open),
    // not used again in the child.
    unsafe { libc::close(wr.as_raw_fd()) };
    let mut b = 0u8;
    // SAFETY: one byte into `b`, from the pipe's read end.
    unsafe { libc::read(rd.as_raw_fd(), (&raw mut b).cast(), 1) == 1 }
}

/// In the parent: lets the child go on.
fn go(wr: OwnedFd) {
    // SAFETY: one byte from `b` into our pipe's write end.
    let _ = unsafe { libc::write(wr.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
}

/// `memory.current` of `cg` with its per-CPU charge stocks drained (a
/// write of `memory.high` = 0, by this task, so charged to its own
/// cgroup, then `max`): what the cgroup's pages really use.
fn drained_current(cg: &Cg) -> Result<u64, String> {
    cg.set("memory.high", "0")?;
    cg.set("memory.high", "max")?;
    // drain_all_stock() drains the other CPUs' stocks from a work item.
    vma::sleep_ms(200);
    cg.current()
}

/// The owner's pages on `nid` go offline by an offliner in a tight cgroup,
/// the owner's own cgroup at `memory.max` with no room at all (its stocks
/// drained as in [`rebalance_at_max`], `memory.max` set to
/// `memory.current`): the moves charge neither, so every block goes
/// offline. A move that charged its new page to the owner before it freed
/// the old one (one page at a time) fails there, and the offline with it.
fn offline_keeps_charge(r: &mut Report, nid: u32) {
    let name = format!(
        "node {nid}: offlining the blocks under a mapping keeps its charge with the owner's cgroup"
    );
    let res = (|| -> Result<String, String> {
        let owner = Cg::new("tk-owner")?;
        let offliner = Cg::new("tk-offliner")?;
        offliner.set("memory.max", &(4 * MIB).to_string())?;
        let pages = (16 * MIB / PAGE_SIZE as u64) as usize;
        const PFNS: &str = "/tmp/tk-memcg-pfns";
        let (rd, wr) = go_pipe()?;
        let mut child = vma::spawn_synced(|ready| {
            let (_tk, m) = match mapped_in(&owner, nid, pages) {
                Ok(tm) => tm,
                Err(code) => return code,
            };
            // SAFETY: our mapping.
            unsafe { fill_pattern(m.as_ptr(), 0, pages, 0xc9) };
            let Ok(pfns) = memblock::pagemap_pfns(m.addr(), pages) else {
                return 6;
            };
            let text: String = pfns.iter().flatten().map(|p| format!("{p}\n")).collect();
            if fs::write(PFNS, text).is_err() {
                return 7;
            }
            ready();
            // Until the parent has offlined and onlined the blocks.
            let _ = wait_go(&rd, &wr);
            // SAFETY: our mapping.
            match unsafe { check_pattern(m.as_ptr(), 0, pages, 0xc9) } {
                Ok(()) => 0,
                Err(_) => 8,
            }
        })
        .map_err(|e| e.to_string())?;
        drop(rd);
        let text = fs::read_to_string(PFNS).map_err(|e| format!("{PFNS}: {e}"))?;
        let pfns: Vec<Option<u64>> = text.lines().map(|l| l.parse().ok()).collect();
        let bs = memblock::block_size().map_err(|e| e.to_string())?;
        let blocks = memblock::blocks_of(&pfns, bs);
        let before = drained_current(&owner)?;
        owner.set("memory.max", &before.to_string())?;
        // The offliner: a child in the tight cgroup writes each block's state.
        let off = vma::fork_run(|| {
            if !offliner.join() {
                return 2;
            }
            for &(b, _) in &blocks {
                match memblock::set_block_state(b, "offline", Duration::from_secs(120)) {
                    Ok(t) if t.outcome == memblock::Outcome::Done => {}
                    Ok(t) => {
                        eprintln!("offline memory{b}: {}", t.outcome.describe());
                        return 1;
                    }
                    Err(_) => return 3,
                }
            }
            0
        })
        .map_err(|e| e.to_string())?;
        let after = owner.current()?;
        let off_cur = offliner.current()?;
        owner.set("memory.max", "max")?;
        for &(b, _) in &blocks {
            let _ = memblock::set_block_state(b, "online_movable", Duration::from_secs(60));
        }
        go(wr);
        let data = child.wait().map_err(|e| e.to_string())?;
        let _ = fs::remove_file(PFNS);
        if off != Exit::Code(0) {
            return Err(format!(
                "the offliner in a 4 MiB cgroup, the owner at memory.max: {off} (1: an offline failed, see its stderr)"
            ));
        }
        if after + 2 * MIB < before || after > before + 2 * MIB {
            return Err(format!("owner's memory.current {before} -> {after}"));
        }
        if off_cur >= 4 * MIB {
            return Err(format!("offliner's memory.current {off_cur}"));
        }
        if data != Exit::Code(0) {
            return Err(format!(
                "the owner after the move: {data} (8: its data changed)"
            ));
        }
        Ok(format!(
            "{} blocks offline; owner {} -> {} MiB; offliner {} KiB; data intact",
            blocks.len(),
            before / MIB,
            after / MIB,
            off_cur / 1024
        ))
    })();
    r.check_note(&name, res);
}

/// The zram device the swap check uses.
const ZRAM: &str = "/sys/block/zram0";

/// A zram swap device of `size` bytes, swapped off and reset when dropped.
struct ZramSwap;

impl ZramSwap {
    /// `Ok(None)`: no zram here (the reason).
    fn new(size: u64) -> Result<Result<ZramSwap, String>, String> {
        if !Path::new(ZRAM).exists() {
            return Ok(Err(
                "no /sys/block/zram0 (CONFIG_ZRAM; Debian's kernel has it as a module, loaded at boot)"
                    .into(),
            ));
        }
        let _ = fs::write(format!("{ZRAM}/reset"), "1");
        fs::write(format!("{ZRAM}/disksize"), size.to_string())
            .map_err(|e| format!("zram0 disksize: {e}"))?;
        let run = |cmd: &str| -> Result<(), String> {
            let out = std::process::Command::new(cmd)
                .arg("/dev/zram0")
                .output()
                .map_err(|e| format!("{cmd}: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "{cmd} /dev/zram0: {} {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        };
        run("mkswap")?;
        // The device is set up: from here, drop swaps it off and resets it.
        let dev = ZramSwap;
        match run("swapon") {
            Err(e) if e.contains("Function not implemented") || e.contains("Invalid argument") => {
                Ok(Err(format!("no swap in this kernel (CONFIG_SWAP): {e}")))
            }
            Err(e) => Err(e),
            Ok(()) => Ok(Ok(dev)),
        }
    }
}

impl Drop for ZramSwap {
    fn drop(&mut self) {
        let _ = std::process::Command::new("swapoff")
            .arg("/dev/zram0")
            .status();
        let _ = fs::write(format!("{ZRAM}/reset"), "1");
    }
}

/// `pswpin` and `pswpout` of /proc/vmstat.
fn swap_counts() -> (u64, u64) {
    let s = fs::read_to_string("/proc/vmstat").unwrap_or_default();
    let get = |k: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or(0)
    };
    (get("pswpin"), get("pswpout"))
}

/// Swap under a cgroup's memory pressure, with tierkit pages charged to
/// the same cgroup: a child in a cgroup with `memory.max` = 32 MiB maps
/// 8 MiB of tierkit pages on `nid` and writes 64 MiB of anonymous memory,
/// twice over. Its anonymous pages go to a zram swap device and come back
/// intact (`pswpout` and `pswpin` grow); tierkit's pages, which are not on
/// the LRU and cannot be reclaimed, stay where they were (same pfns) with
/// their data; nobody is OOM-killed; the charge goes with the child.
fn swap_under_pressure(r: &mut Report, nid: u32) {
    let name = format!(
        "node {nid}: swap (zram) under a cgroup's pressure: anonymous pages go out and back intact, tierkit's pages stay put with their data"
    );
    let swap = match ZramSwap::new(256 * MIB) {
        Ok(Ok(s)) => s,
        Ok(Err(why)) => {
            r.skip(&name, why);
            return;
        }
        Err(e) => {
            r.fail(&name, e);
            return;
        }
    };
    let res = (|| -> Result<String, String> {
        let cg = Cg::new("tk-swap")?;
        cg.set("memory.max", &(32 * MIB).to_string())?;
        let (in0, out0) = swap_counts();
        let exit = vma::fork_run(|| {
            let (_tk, m) = match mapped_in(&cg, nid, (8 * MIB / PAGE_SIZE as u64) as usize) {
                Ok(f) => f,
                Err(code) => return code,
            };
            // SAFETY: the child's own writable tierkit mapping.
            unsafe { fill_pattern(m.as_ptr(), 0, m.nr_pages(), 0x31) };
            let pfns = |m: &crate::linux::sys::Mapping| -> Vec<Option<u64>> {
                (0..m.nr_pages())
                    .map(|i| vma::pagemap_pfn(m.addr() + i * PAGE_SIZE).ok().flatten())
                    .collect()
            };
            let before = pfns(&m);
            let Ok(anon) = crate::linux::sys::Mapping::anon((64 * MIB) as usize) else {
                return 20;
            };
            for round in 0..2u64 {
                // SAFETY: the child's own anonymous mapping.
                unsafe { fill_pattern(anon.as_ptr(), 0, anon.nr_pages(), 0x40 + round) };
                // SAFETY: as above.
                if unsafe { check_pattern(anon.as_ptr(), 0, anon.nr_pages(), 0x40 + round) }
                    .is_err()
                {
                    return 21;
                }
            }
            // SAFETY: the tierkit mapping, as above.
            if unsafe { check_pattern(m.as_ptr(), 0, m.nr_pages(), 0x31) }.is_err() {
                return 22;
            }
            if pfns(&m) != before || before.iter().any(Option::is_none) {
                return 23;
            }
            0
        })
        .map_err(|e| format!("fork: {e}"))?;
        let (in1, out1) = swap_counts();
        let kills = cg.read_u64("memory.events", Some("oom_kill"))?;
        let left = cg.current()?;
        match exit {
            Exit::Code(0) if out1 > out0 && in1 > in0 && kills == 0 => Ok(format!(
                "pswpout +{}, pswpin +{}; tierkit's 2048 pages kept their pfns and data; oom_kill 0; {} KiB left charged",
                out1 - out0,
                in1 - in0,
                left / 1024
            )),
            e => Err(format!(
                "the child: {e} (21 anonymous data lost, 22 tierkit data lost, 23 tierkit pages moved); pswpout +{}, pswpin +{}, oom_kill {kills}",
                out1 - out0,
                in1 - in0
            )),
        }
    })();
    drop(swap);
    r.check_note(&name, res);
}

pub fn main() -> ExitCode {
    let mut r = Report::new(BIN, "test");
    let Some(topo) = crate::abi::ready::tierkit_ready(&mut r) else {
        return r.finish();
    };
    if !cgroup::ready_for(
        &mut r,
        "memory",
        "memory cgroups",
        "the kernel has no memory controller (CONFIG_MEMCG)",
    ) {
        return r.finish();
    }
    let first = topo.memory.first().copied().unwrap_or(0);
    // The first node's boot-time GiB, if any, is handed back while this
    // test makes its GiBs there (`first_use::BootPool`).
    let _boot = crate::abi::first_use::BootPool::release(first);
    charged(&mut r, first);
    bounded(&mut r, first);
    gigantic_uncharged(&mut r, first);
    match topo.memory.get(1) {
        Some(&second) => rebalance_at_max(&mut r, first, second),
        None => {
            r.skip("a rebalance at memory.max", "one node with memory");
        }
    }
    swap_under_pressure(&mut r, first);
    let movable: Vec<u32> = topo
        .memory
        .iter()
        .copied()
        .filter(|&n| {
            memblock::node_zones(n)
                .iter()
                .any(|z| z.zone == "Movable" && z.present > 0)
        })
        .collect();
    match movable.first() {
        Some(&n) => offline_keeps_charge(&mut r, n),
        None => {
            r.skip(
                "offlining keeps the owner's charge",
                "no node with ZONE_MOVABLE memory here (the cxl topology has one)",
            );
        }
    }
    r.finish()
}
