//! One step of a sweep: the call's arguments made before it is armed
//! ([`Step`], [`prepare`]), the call ([`call`]), and what is checked after
//! it ([`effect`], [`unchanged`], [`usable`], [`held`]).

use super::*;

/// The arguments and results of one step; everything the armed call
/// touches is allocated and written before it is armed.
pub struct Step {
    pub fd: i32,
    pub map: *mut c_void,
    pub map_len: usize,
    pub policy: TkPolicy,
    pub bulk: TkBulk,
    pub next: TkTaskNext,
    pub gig: TkGigantic,
    pub bench: TkClearBench,
    pub rebal: TkRebalance,
    pub wbuf: Vec<u8>,
    pub before: Option<WiState>,
}

impl Step {
    pub fn new() -> Box<Step> {
        Box::new(Step {
            fd: -1,
            map: std::ptr::null_mut(),
            map_len: 0,
            policy: tk::policy(0, 0),
            bulk: TkBulk {
                nr_pages: 0,
                per_node: [0; TIERKIT_MAX_NODES],
                il_prev: 0,
                il_weight: 0,
            },
            next: TkTaskNext {
                count: 0,
                _pad: 0,
                nodes: [0; TK_TASK_NEXT_MAX],
            },
            gig: TkGigantic::default(),
            bench: TkClearBench::default(),
            rebal: TkRebalance::default(),
            wbuf: Vec::new(),
            before: None,
        })
    }

    pub fn close(&mut self) {
        if !self.map.is_null() {
            // SAFETY: a mapping this step made and nothing else uses.
            unsafe { libc::munmap(self.map, self.map_len) };
            self.map = std::ptr::null_mut();
        }
        if self.fd >= 0 {
            // SAFETY: an fd this step opened.
            unsafe { libc::close(self.fd) };
            self.fd = -1;
        }
    }
}

impl Drop for Step {
    fn drop(&mut self) {
        self.close();
    }
}

pub fn open_raw(path: &std::ffi::CStr, flags: i32) -> Result<i32, String> {
    // SAFETY: NUL-terminated path.
    let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        Err(format!("open {path:?}: {}", io::Error::last_os_error()))
    } else {
        Ok(fd)
    }
}

pub fn ioctl_raw<T>(fd: i32, req: u32, arg: &mut T) -> io::Result<()> {
    // SAFETY: `arg` is the `_IOWR` argument of `req`, live across the call.
    let r = unsafe { libc::ioctl(fd, req as _, arg as *mut T) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

pub fn node_file(wd: &WeightDir, op: Op) -> std::path::PathBuf {
    match op {
        Op::WeightNode(n) => wd.node_path(n),
        Op::Auto => wd.auto_path(),
        Op::Pool => POOL_PATH.into(),
        _ => wd.bandwidth_path(),
    }
}

/// Sets up everything the armed call needs (nothing of it under fault
/// injection).
pub fn prepare(env: &Env, op: Op, s: &mut Step) -> Result<(), String> {
    let dev = c"/dev/tierkit";
    match op {
        Op::Open => {}
        Op::SetPolicy | Op::Mmap4k | Op::Bulk | Op::TaskNext => {
            s.fd = open_raw(dev, libc::O_RDWR)?;
            s.policy = tk::policy(TK_MODE_WEIGHTED_INTERLEAVE, env.mem_mask);
            if op != Op::SetPolicy {
                let mut p = s.policy;
                ioctl_raw(s.fd, TK_IOC_SET_POLICY, &mut p)
                    .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
            }
            s.bulk.nr_pages = BULK_PAGES;
            s.next.count = TK_TASK_NEXT_MAX as u32;
        }
        Op::MmapGigantic | Op::GiganticTouch => {
            s.fd = open_raw(dev, libc::O_RDWR)?;
            let mut p = tk::policy(TK_MODE_INTERLEAVE, 1u64 << env.big_nid);
            ioctl_raw(s.fd, TK_IOC_SET_POLICY, &mut p)
                .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
            let mut g = gigantic_arg();
            ioctl_raw(s.fd, TK_IOC_SET_GIGANTIC, &mut g)
                .map_err(|e| format!("TK_IOC_SET_GIGANTIC: {e}"))?;
            if op == Op::GiganticTouch {
                call(Op::MmapGigantic, s).map_err(|e| format!("mmap: {e}"))?;
            }
        }
        Op::SetGigantic => {
            s.fd = open_raw(dev, libc::O_RDWR)?;
            s.gig = gigantic_arg();
        }
        Op::Rebalance => {
            // 32 pages over every memory node, then all of them asked onto
            // the lowest one: each page elsewhere takes a page allocation.
            s.fd = open_raw(dev, libc::O_RDWR)?;
            let mut p = tk::policy(TK_MODE_WEIGHTED_INTERLEAVE, env.mem_mask);
            ioctl_raw(s.fd, TK_IOC_SET_POLICY, &mut p)
                .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
            call(Op::Mmap4k, s).map_err(|e| format!("mmap: {e}"))?;
            s.rebal = TkRebalance {
                nodemask: env.mem_mask & env.mem_mask.wrapping_neg(),
                ..Default::default()
            };
        }
        Op::ClearBench => {
            s.fd = open_raw(dev, libc::O_RDWR)?;
            s.bench = tk::clear_bench_arg(env.big_nid as i32, clear_threads(), TK_PLACE_ANY, 1);
        }
        Op::WeightNode(n) => {
            env.wd
                .set_weight(n, 3)
                .map_err(|e| format!("setting node{n} to 3: {e:#}"))?;
            s.wbuf = b"7\n".to_vec();
        }
        Op::Auto => {
            env.wd
                .write_auto_str("false")
                .map_err(|e| format!("writing false to auto: {e}"))?;
            s.wbuf = b"true\n".to_vec();
        }
        Op::Bandwidth => {
            // Auto mode, so that the write recomputes the weights.
            restore_wi(env)?;
            env.wd
                .write_auto_str("true")
                .map_err(|e| format!("writing true to auto: {e}"))?;
            s.wbuf = env.bw_new.as_bytes().to_vec();
        }
        Op::Pool => {
            // Target 0 on the node: the write changes the pool's state
            // (and nothing is cleared in the background meanwhile).
            s.wbuf = format!("{} 0\n", env.big_nid).into_bytes();
        }
    }
    if op.is_write() {
        s.before = Some(wi_state(&env.wd)?);
        let p = std::ffi::CString::new(node_file(&env.wd, op).as_os_str().as_encoded_bytes())
            .map_err(|e| e.to_string())?;
        s.fd = open_raw(&p, libc::O_WRONLY)?;
    }
    Ok(())
}

/// Gigantic mode with two workers (one where there is one CPU), on any
/// CPU: the clears of the sweep cost seconds each under TCG.
pub fn gigantic_arg() -> TkGigantic {
    TkGigantic {
        threads: clear_threads(),
        placement: TK_PLACE_ANY,
        ..Default::default()
    }
}

/// Two clearing workers, or one on a one-CPU machine.
pub fn clear_threads() -> u32 {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| crate::topology::node::parse_list(&s).ok())
        .map_or(1, |c| c.len().clamp(1, 2) as u32)
}

/// The one call under fault injection: a single syscall on prepared
/// memory (`s` was written in full by `prepare`).
pub fn call(op: Op, s: &mut Step) -> io::Result<()> {
    match op {
        Op::Open => {
            // SAFETY: NUL-terminated path.
            let fd =
                unsafe { libc::open(c"/dev/tierkit".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            s.fd = fd;
            Ok(())
        }
        Op::SetPolicy => ioctl_raw(s.fd, TK_IOC_SET_POLICY, &mut s.policy),
        Op::Bulk => ioctl_raw(s.fd, TK_IOC_BULK, &mut s.bulk),
        Op::TaskNext => ioctl_raw(s.fd, TK_IOC_TASK_NEXT, &mut s.next),
        Op::SetGigantic => ioctl_raw(s.fd, TK_IOC_SET_GIGANTIC, &mut s.gig),
        Op::ClearBench => ioctl_raw(s.fd, TK_IOC_CLEAR_BENCH, &mut s.bench),
        Op::Rebalance => ioctl_raw(s.fd, TK_IOC_REBALANCE, &mut s.rebal),
        Op::Mmap4k | Op::MmapGigantic => {
            let len = if op == Op::Mmap4k { MMAP_4K_BYTES } else { GIB };
            // SAFETY: a new shared mapping of our fd; no fixed address.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    s.fd,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            s.map = p;
            s.map_len = len;
            Ok(())
        }
        Op::GiganticTouch => Err(io::Error::other("the first touch runs in a child")),
        Op::WeightNode(_) | Op::Auto | Op::Bandwidth | Op::Pool => {
            // SAFETY: writes `wbuf.len()` bytes from a live buffer.
            let r = unsafe { libc::write(s.fd, s.wbuf.as_ptr().cast(), s.wbuf.len()) };
            if r < 0 {
                Err(io::Error::last_os_error())
            } else if r as usize != s.wbuf.len() {
                Err(io::Error::other(format!(
                    "short write {r} of {}",
                    s.wbuf.len()
                )))
            } else {
                Ok(())
            }
        }
    }
}

/// What a call must have done (or not done) besides its return value.
pub fn effect(env: &Env, op: Op, s: &Step, res: &io::Result<()>) -> Result<(), String> {
    match op {
        Op::SetPolicy if res.is_ok() && s.policy.nodemask != env.mem_mask => {
            return Err(format!(
                "effective mask {:#x}, expected {:#x}",
                s.policy.nodemask, env.mem_mask
            ));
        }
        Op::Bulk if res.is_ok() => {
            let sum: u64 = s.bulk.per_node.iter().sum();
            if sum != BULK_PAGES {
                return Err(format!("per_node adds up to {sum}, expected {BULK_PAGES}"));
            }
        }
        Op::Mmap4k if res.is_ok() => {
            // SAFETY: the mapping made by the call, readable for its length.
            let sl = unsafe { std::slice::from_raw_parts(s.map as *const u64, s.map_len / 8) };
            if let Some(i) = sl.iter().position(|&w| w != 0) {
                return Err(format!("mapped page {} is not zero", i * 8 / PAGE_SIZE));
            }
        }
        Op::Rebalance if res.is_ok() => {
            // A page whose new page could not be had stays and is counted;
            // nothing else may be lost.
            let a = &s.rebal;
            if a.moved + a.no_memory != a.misplaced || a.busy != 0 || a.looked != 32 {
                return Err(format!(
                    "looked {} misplaced {} moved {} no_memory {} busy {}",
                    a.looked, a.misplaced, a.moved, a.no_memory, a.busy
                ));
            }
            // SAFETY: the mapping made by prepare, readable for its length.
            let sl = unsafe { std::slice::from_raw_parts(s.map as *const u64, s.map_len / 8) };
            if let Some(i) = sl.iter().position(|&w| w != 0) {
                return Err(format!(
                    "page {} is not zero after the move",
                    i * 8 / PAGE_SIZE
                ));
            }
        }
        Op::WeightNode(n) => {
            let w = env.wd.weight(n).map_err(|e| format!("{e:#}"))?;
            let want = if res.is_ok() { 7 } else { 3 };
            if w != want {
                return Err(format!(
                    "node{n} reads {w} after the write {}, expected {want}",
                    if res.is_ok() { "succeeded" } else { "failed" }
                ));
            }
            if res.is_ok() && env.wd.auto().map_err(|e| format!("{e:#}"))? == Some(true) {
                return Err(format!("auto still reads true after a write to node{n}"));
            }
            if res.is_err() {
                unchanged(env, s)?;
            }
        }
        Op::Auto | Op::Bandwidth => {
            if res.is_err() {
                unchanged(env, s)?;
            } else if op == Op::Auto && env.wd.auto().map_err(|e| format!("{e:#}"))? != Some(true) {
                return Err("auto does not read true after writing true".into());
            } else if op == Op::Bandwidth {
                let now = std::fs::read_to_string(env.wd.bandwidth_path())
                    .map_err(|e| format!("reading bandwidth: {e}"))?;
                if now != env.bw_new {
                    return Err(format!("bandwidth reads {now:?}, wrote {:?}", env.bw_new));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

pub fn unchanged(env: &Env, s: &Step) -> Result<(), String> {
    let now = wi_state(&env.wd)?;
    match &s.before {
        Some(b) if *b != now => Err(format!(
            "the failed write changed the weight table: {b:?} -> {now:?}"
        )),
        _ => Ok(()),
    }
}

/// A fresh open, a policy and a one-page mapping that reads zero.
pub fn usable(mem_mask: u64) -> Result<(), String> {
    let t = Tierkit::open().map_err(|e| format!("open: {e}"))?;
    t.set_policy(TK_MODE_WEIGHTED_INTERLEAVE, mem_mask)
        .map_err(|e| format!("TK_IOC_SET_POLICY: {e}"))?;
    let m = t.map(1, 0).map_err(|e| format!("mmap of one page: {e}"))?;
    if m.first_nonzero().is_some() {
        return Err("a fresh page is not zero".into());
    }
    Ok(())
}

/// tierkit's held pages and ranges per node, and its global held_pages.
pub fn held() -> Result<BTreeMap<String, u64>, String> {
    holdings().map_err(|e| format!("{e:#}"))
}

/// Writes the original bandwidth back, and `true` to `auto` if that is
/// how the table was (which recomputes the weights from it).
pub fn restore_wi(env: &Env) -> Result<(), String> {
    if !env.bw_orig.is_empty() {
        write_file(&env.wd.bandwidth_path(), &env.bw_orig)
            .map_err(|e| format!("restoring bandwidth: {e}"))?;
    }
    if env.orig_auto == Some(true) && !env.bw_orig.is_empty() {
        env.wd
            .write_auto_str("true")
            .map_err(|e| format!("writing true to auto: {e}"))?;
    }
    Ok(())
}
