//! The other children of a run: the weights writer, the clears and the
//! offliner, and the [`Kid`]s the parent waits for.

use super::*;

/// The weights child: random weight, `auto` and `bandwidth` writes, then
/// the firmware bandwidth back.
pub(super) fn weights_child(
    wd: &WeightDir,
    mem: &[u32],
    cfg: &Config,
    deadline: Instant,
    seed: u64,
) -> i32 {
    let mut rng = XorShift(seed ^ 0x5555);
    let (mut w, mut a, mut b) = (0u64, 0u64, 0u64);
    for _ in 0..cfg.weight_rounds {
        if Instant::now() >= deadline {
            break;
        }
        let nid = mem[rng.below(mem.len() as u64) as usize];
        match rng.below(4) {
            0 => {
                let _ = wd.write_auto_str(if rng.below(2) == 0 { "true" } else { "false" });
                a += 1;
            }
            1 => {
                let e: Vec<(u32, u32, u32)> = mem
                    .iter()
                    .map(|&n| {
                        (
                            n,
                            1000 + rng.below(50000) as u32,
                            1000 + rng.below(50000) as u32,
                        )
                    })
                    .collect();
                let _ = wd.write_bandwidth(&e);
                b += 1;
            }
            _ => {
                let _ = wd.set_weight(nid, 1 + rng.below(100) as u8);
                w += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The firmware bandwidth back, so that restoring auto=true recomputes
    // the original weights.
    let orig: Vec<(u32, u32, u32)> = mem
        .iter()
        .filter_map(|&n| crate::topology::node::access1_bandwidth(n).map(|(r, w)| (n, r, w)))
        .collect();
    if !orig.is_empty() {
        if let Err(e) = wd.write_bandwidth(&orig) {
            println!("# weights: restoring bandwidth {orig:?}: {e}");
        }
    }
    println!("# weights: weight writes={w} auto toggles={a} bandwidth writes={b}");
    send(&format!(
        "weights weight_writes {w} auto_toggles {a} bandwidth_writes {b}"
    ));
    0
}

/// A clear child: up to `clear_rounds` clears of one GiB on `nid`; sends
/// `clear key 1` after each, so a SIGKILL at the deadline loses nothing.
pub(super) fn clear_child(nid: u32, cfg: &Config, deadline: Instant) -> i32 {
    let tk = match Tierkit::open() {
        Ok(t) => t,
        Err(e) => {
            println!("# clear node {nid}: open: {e}");
            return 1;
        }
    };
    for _ in 0..cfg.clear_rounds {
        if Instant::now() >= deadline {
            break;
        }
        let t0 = Instant::now();
        match tk.clear_bench(tk::clear_bench_arg(nid as i32, 1, TK_PLACE_ANY, 1)) {
            Ok(_) => {
                println!(
                    "# clear node {nid}: 1 GiB in {:.1}s",
                    t0.elapsed().as_secs_f64()
                );
                send("clear clears 1");
            }
            // No free GiB now (memory in use, a block going offline).
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOMEM) | Some(libc::EBUSY)) => {
                println!(
                    "# clear node {nid}: no free GiB ({})",
                    crate::linux::errno::errno_name(&e)
                );
                send("clear clears_no_gib 1");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => {
                println!(
                    "# clear node {nid}: {}",
                    crate::linux::errno::errno_name(&e)
                );
                return 1;
            }
        }
    }
    0
}

/// The offline child: offline a random block of `blocks`, online it again,
/// until `deadline`. Sends `@offline BLOCK OUTCOME MS` and `@online ...`
/// per write. Fails (1) if a block cannot be onlined again.
pub(super) fn offline_child(blocks: &[u64], cfg: &Config, deadline: Instant, seed: u64) -> i32 {
    let mut rng = XorShift(seed ^ 0xa5a5);
    while Instant::now() < deadline {
        let b = blocks[rng.below(blocks.len() as u64) as usize];
        let t = match memblock::set_block_state(b, "offline", cfg.offline_limit) {
            Ok(t) => t,
            Err(e) => {
                println!("# offline memory{b}: {e}");
                return 1;
            }
        };
        let what = match t.outcome {
            Outcome::Done => "done".to_string(),
            Outcome::Failed(e) => {
                crate::linux::errno::errno_name(&std::io::Error::from_raw_os_error(e))
            }
            Outcome::TimedOut { .. } => "timeout".to_string(),
        };
        println!(
            "# offline memory{b}: {what} in {} ms",
            t.elapsed.as_millis()
        );
        send(&format!("@offline {b} {what} {}", t.elapsed.as_millis()));
        if matches!(t.outcome, Outcome::TimedOut { reaped: false }) {
            return 1;
        }
        if memblock::block_state(b).as_deref() != Some("online") {
            std::thread::sleep(Duration::from_millis(100 + rng.below(200)));
            let t = match memblock::set_block_state(b, "online_movable", cfg.offline_limit) {
                Ok(t) => t,
                Err(e) => {
                    println!("# online memory{b}: {e}");
                    return 1;
                }
            };
            println!(
                "# online memory{b}: {} in {} ms",
                t.outcome.describe(),
                t.elapsed.as_millis()
            );
            send(&format!(
                "@online {b} {} {}",
                t.outcome == Outcome::Done,
                t.elapsed.as_millis()
            ));
            if t.outcome != Outcome::Done {
                return 1;
            }
        }
        std::thread::sleep(Duration::from_millis(50 + rng.below(100)));
    }
    0
}

/// The online memory blocks of `nid` if every online block of it is in
/// ZONE_MOVABLE; the reason if not.
pub fn movable_blocks(nid: u32) -> Result<Vec<u64>, String> {
    let blocks: Vec<u64> = memblock::node_blocks(nid)
        .into_iter()
        .filter(|&b| memblock::block_state(b).as_deref() == Some("online"))
        .collect();
    if blocks.is_empty() {
        return Err(format!("node {nid} has no online memory block"));
    }
    let zones: std::collections::BTreeSet<String> = blocks
        .iter()
        .map(|&b| memblock::block_zone(b).unwrap_or_else(|| "?".into()))
        .collect();
    if zones.len() == 1 && zones.contains("Movable") {
        Ok(blocks)
    } else {
        Err(format!(
            "node {nid}'s blocks are in {zones:?}, not all ZONE_MOVABLE"
        ))
    }
}

/// A child of the run.
pub(super) struct Kid {
    pub(super) pid: i32,
    pub(super) what: String,
    pub(super) clear: bool,
    pub(super) status: Option<i32>,
    pub(super) killed_at_deadline: bool,
}
