//! The `ioctl` calls: tierkit's command numbers and their neighbours, and
//! the checks of each command's result against the ABI.

use super::*;

pub(super) const KNOWN: [u32; 7] = [
    TK_IOC_SET_POLICY,
    TK_IOC_BULK,
    TK_IOC_TASK_NEXT,
    TK_IOC_SET_GIGANTIC,
    TK_IOC_CLEAR_BENCH,
    TK_IOC_REBALANCE,
    TK_IOC_SNAPSHOT,
];
pub(super) const KNOWN_NAMES: [&str; 7] = [
    "SET_POLICY",
    "BULK",
    "TASK_NEXT",
    "SET_GIGANTIC",
    "CLEAR_BENCH",
    "REBALANCE",
    "SNAPSHOT",
];

/// ioctl types the VFS handles itself before the driver sees the call
/// (fs/ioctl.c `do_vfs_ioctl`: FIOCLEX & co. `'T'`, FIFREEZE/FITHAW `'X'`,
/// FS_IOC_GETFLAGS/SETFLAGS/FIEMAP `'f'`, FICLONE `0x94`, FS_IOC_GETFSUUID
/// `0x15`, FIGETBSZ/FIBMAP `0`). The fuzzer never makes them: they are not
/// tierkit's, and some act on the file system under the file (freeze
/// devtmpfs or debugfs, make /dev/tierkit immutable).
pub(super) const VFS_TYPES: [u32; 6] = [0x00, 0x15, 0x54, 0x58, 0x66, 0x94];

pub fn ioc(dir: u32, ty: u32, nr: u32, size: u32) -> u32 {
    (dir << 30) | ((size & 0x3fff) << 16) | ((ty & 0xff) << 8) | (nr & 0xff)
}

/// A random ioctl number: one of tierkit's (40%), one of them with another
/// size or direction, another number of its magic, or anything outside the
/// VFS's own types.
pub fn gen_cmd(o: &mut Rng) -> u32 {
    match o.weighted(&[40, 15, 20, 25]) {
        0 => *o.pick(&KNOWN),
        1 => {
            let c = *o.pick(&KNOWN);
            let size = (c >> 16) & 0x3fff;
            let dir = c >> 30;
            match o.below(4) {
                0 => ioc(dir, 0xB9, c & 0xff, size + 1),
                1 => ioc(dir, 0xB9, c & 0xff, size.saturating_sub(1)),
                2 => ioc((dir + 1 + o.below(3) as u32) & 3, 0xB9, c & 0xff, size),
                _ => ioc(dir, 0xB9, c & 0xff, o.below(0x4000) as u32),
            }
        }
        2 => ioc(
            o.below(4) as u32,
            0xB9,
            o.below(256) as u32,
            o.below(0x4000) as u32,
        ),
        _ => loop {
            let c = o.next_u64() as u32;
            if !VFS_TYPES.contains(&((c >> 8) & 0xff)) {
                break c;
            }
        },
    }
}

impl Worker<'_> {
    pub(super) fn op_ioctl(&mut self, o: &mut Rng) {
        let f = self.pick_fd(o);
        let cmd = gen_cmd(o);
        let known = KNOWN.iter().position(|&c| c == cmd);
        let size = match known {
            Some(_) => ((cmd >> 16) & 0x3fff) as usize,
            None => (((cmd >> 16) & 0x3fff) as usize).min(2 * PAGE),
        };
        let (ak, ptr) = self.gen_arg(o, known, size.max(1));
        // The struct (or random bytes) for a valid pointer.
        let mut input = vec![0u8; size.min(2 * PAGE)];
        o.fill(&mut input);
        match known {
            Some(0) => {
                let mut p = TkPolicy {
                    mode: o.pick_or(&[0, 0, 0, 1, 1, 2], |o| o.next_u64() as u32),
                    flags: if o.chance(8, 10) {
                        0
                    } else if o.chance(1, 2) {
                        tierkit_core::uapi::TK_POLICY_F_WEIGHTS
                    } else {
                        o.next_u64() as u32
                    },
                    nodemask: self.gen_mask(o),
                    weights: [0; 64],
                };
                // Own weights (any byte, 0 among them) with the flag.
                if p.flags == tierkit_core::uapi::TK_POLICY_F_WEIGHTS {
                    o.fill(&mut p.weights);
                }
                put(&mut input, &p);
            }
            Some(1) => {
                let nr: u64 = match o.below(8) {
                    0 => 0,
                    1 => 1,
                    2..=4 => o.range(2, 64),
                    5 => o.range(65, 1024),
                    6 => (1 << 20) + 1,
                    _ => o.pick_or(&[u64::MAX, 1 << 40], |o| o.next_u64() | 1 << 21),
                };
                let b = TkBulk {
                    nr_pages: nr,
                    ..zeroed_bulk()
                };
                put(&mut input, &b);
            }
            Some(2) => {
                let t = TkTaskNext {
                    count: o.pick_or(&[0, 1, 8, 256, 257, u32::MAX], |o| o.next_u64() as u32),
                    _pad: o.next_u64() as u32,
                    nodes: [0; 256],
                };
                put(&mut input, &t);
            }
            Some(3) => {
                let g = TkGigantic {
                    threads: o.pick_or(&[0, 1, 2, 3, TK_THREADS_AUTO, 4096], |o| {
                        o.next_u64() as u32
                    }),
                    placement: o.pick_or(&[0, 1, 2, 3], |o| o.next_u64() as u32),
                    chunk_kib: o
                        .pick_or(&[0, 4, 2048, 32768, 32772, 3, 6], |o| o.next_u64() as u32),
                    flags: o.pick_or(&[0, 0, 1, 1, 2, 3], |o| o.next_u64() as u32),
                    ..Default::default()
                };
                put(&mut input, &g);
            }
            Some(4) => {
                // Never a valid benchmark here (each clears GiBs): the
                // range count is always out of 1..=64 (see op_big).
                let c = TkClearBench {
                    nid: o.pick_or(&[0, 1, -1, 64, 1 << 20], |o| o.next_u64() as i32),
                    threads: o.pick_or(&[0, 1, TK_THREADS_AUTO], |o| o.next_u64() as u32),
                    placement: o.pick_or(&[0, 1, 2, 3], |o| o.next_u64() as u32),
                    nr_gigantic: o.pick_or(&[0, 65, u32::MAX], |o| {
                        o.range(65, u64::from(u32::MAX)) as u32
                    }),
                    chunk_kib: o.pick_or(&[0, 4, 3], |o| o.next_u64() as u32),
                    ..Default::default()
                };
                put(&mut input, &c);
            }
            Some(5) => {
                // Never a slow pace: a rate of 1 page/s over a file's
                // hundreds of misplaced pages would stall the run.
                let mut a = TkRebalance {
                    flags: o.pick_or(&[0, 0, 0, 1, 2, 3], |o| o.next_u64() as u32),
                    rate_pages: o.pick_or(&[0, 0, 100_000], |o| o.range(50_000, 1 << 30) as u32),
                    nodemask: o.pick_or(&[0, 0], |o| self.gen_mask(o)),
                    budget_pages: o.pick_or(&[0, 0, 1, 16], |o| o.next_u64()),
                    ..Default::default()
                };
                // Own weights: all set (valid for any mask), or random
                // bytes (zeros among them are EINVAL for a node of the mask).
                match o.below(3) {
                    0 => a.weights = [0; 64],
                    1 => a
                        .weights
                        .iter_mut()
                        .for_each(|w| *w = o.range(1, 255) as u8),
                    _ => o.fill(&mut a.weights),
                }
                put(&mut input, &a);
            }
            Some(6) => {
                let s = self.gen_snapshot(o);
                put(&mut input, &s);
            }
            _ => {}
        }
        if ak == ArgKind::Valid {
            // SAFETY: `ptr .. ptr + input.len()` lies in `rw` (gen_arg).
            unsafe { std::ptr::copy_nonoverlapping(input.as_ptr(), ptr as *mut u8, input.len()) };
        }
        // SAFETY: the kernel checks the pointer; a valid one points into
        // our own arena, never into memory Rust uses.
        let r = sys_res(unsafe { libc::ioctl(f.fd, cmd as _, ptr) } as i64);
        let name = known.map_or("other", |i| KNOWN_NAMES[i]);
        self.record(&format!("ioctl {name}"), r);
        let what = format!(
            "ioctl({} [{:?}], {cmd:#010x} {name}, {ak:?} {ptr:#x})",
            f.name, f.kind
        );
        match f.kind {
            FdKind::Bad | FdKind::DevPath => self.expect(&what, r, libc::EBADF),
            FdKind::Debugfs(_) => self.expect(&what, r, libc::ENOTTY),
            FdKind::Dev | FdKind::DevWo => match known {
                None => self.expect(&what, r, libc::ENOTTY),
                Some(i) => match ak {
                    ArgKind::Fault => self.expect(&what, r, libc::EFAULT),
                    ArgKind::ReadOnly => {
                        let ok =
                            matches!(r, Err(e) if e == libc::EFAULT || documented(i).contains(&e));
                        if !ok {
                            self.fail(format!(
                                "{what} -> {}, expected EFAULT or a documented error",
                                res_str(r)
                            ));
                        }
                    }
                    ArgKind::Valid => self.check_valid_ioctl(i, &what, r, &input, ptr),
                },
            },
        }
    }

    /// A `TK_IOC_SNAPSHOT` argument: mostly a part of one of this
    /// worker's mappings (4 KiB, gigantic or not tierkit's; a snapshot
    /// that succeeds makes those vmas copy-on-write while the other
    /// threads fault, unmap and protect them, and holds its pages until
    /// the fd is closed), else an unaligned, empty, huge or wrapping
    /// range.
    fn gen_snapshot(&mut self, o: &mut Rng) -> TkSnapshot {
        let slot = o.below(MAP_SLOTS as u64) as usize;
        match (self.maps[slot], o.below(10)) {
            (Some(m), 0..=6) => {
                let pages = (m.len / PAGE).max(1) as u64;
                let first = o.below(pages);
                let n = match o.below(3) {
                    0 => pages - first,
                    1 => 1,
                    _ => o.range(1, pages - first),
                };
                TkSnapshot {
                    addr: (m.addr + first as usize * PAGE) as u64,
                    len: n * PAGE as u64,
                }
            }
            (m, _) => TkSnapshot {
                addr: m.map_or(0, |m| m.addr as u64) + o.pick_or(&[0, 1, 0x800], |o| o.next_u64()),
                len: o.pick_or(&[0, 1, PAGE as u64 + 1, 1 << 30, 1 << 40, u64::MAX], |o| {
                    o.next_u64()
                }),
            },
        }
    }

    pub(super) fn gen_mask(&mut self, o: &mut Rng) -> u64 {
        let n = self.env.nr_node_ids.min(63);
        match o.below(9) {
            0 => self.env.mem_mask,
            1 => 0,
            2 => u64::MAX,
            3 => 1u64 << n,
            4 => 1 << 63,
            5 => 1u64 << *o.pick(&self.env.mem_nodes),
            6 => !self.env.mem_mask,
            7 => o.next_u64(),
            _ => self.env.mem_mask | 1 << 63,
        }
    }

    pub(super) fn check_valid_ioctl(
        &mut self,
        i: usize,
        what: &str,
        r: Result<i64, i32>,
        input: &[u8],
        ptr: usize,
    ) {
        if let Err(e) = r {
            if !documented(i).contains(&e) {
                self.fail(format!(
                    "{what} -> {}, not a documented error",
                    errno_str(e)
                ));
                return;
            }
        }
        match i {
            0 => self.check_policy(what, r, input, ptr),
            1 => self.check_bulk(what, r, input, ptr),
            2 => self.check_task_next(what, r, input, ptr),
            3 => self.check_set_gigantic(what, r, input),
            5 => self.check_rebalance(what, r, input, ptr),
            4 => self.check_clear_bench(what, r, input),
            _ => {}
        }
    }

    /// TK_IOC_SET_POLICY: the mask is the requested one within N_MEMORY;
    /// invalid modes, flags and masks are EINVAL.
    fn check_policy(&mut self, what: &str, r: Result<i64, i32>, input: &[u8], ptr: usize) {
        let mem = self.env.mem_mask;
        let p: TkPolicy = get(input);
        // TK_POLICY_F_WEIGHTS: weighted mode, and a weight for
        // every node of the effective mask.
        let own_ok = p.mode == 0
            && crate::topology::node::nodes_of(p.nodemask & mem)
                .iter()
                .all(|&n| p.weights[n as usize] != 0);
        let valid = p.nodemask & mem != 0
            && ((p.mode <= 1 && p.flags == 0)
                || (p.flags == tierkit_core::uapi::TK_POLICY_F_WEIGHTS && own_ok));
        match r {
            Ok(_) => {
                // SAFETY: `ptr` is in our arena and holds a TkPolicy.
                let out: TkPolicy = unsafe { std::ptr::read_unaligned(ptr as *const TkPolicy) };
                if !valid {
                    self.fail(format!(
                        "{what} mode {} flags {:#x} mask {:#x} succeeded, expected EINVAL",
                        p.mode, p.flags, p.nodemask
                    ));
                } else if out.nodemask != p.nodemask & mem {
                    self.fail(format!(
                        "{what} mask {:#x} returned {:#x}, expected {:#x}",
                        p.nodemask,
                        out.nodemask,
                        p.nodemask & mem
                    ));
                }
            }
            Err(libc::EINVAL) if valid => self.fail(format!(
                "{what} mode {} flags {:#x} mask {:#x} -> EINVAL, expected success",
                p.mode, p.flags, p.nodemask
            )),
            Err(_) => {}
        }
    }

    /// TK_IOC_BULK: `per_node` adds up to `nr_pages`, all on memory nodes; a
    /// count out of range is EINVAL.
    fn check_bulk(&mut self, what: &str, r: Result<i64, i32>, input: &[u8], ptr: usize) {
        let mem = self.env.mem_mask;
        let b: TkBulk = get(input);
        let valid = (1..=1 << 20).contains(&b.nr_pages);
        match r {
            Ok(_) => {
                // SAFETY: as above, a TkBulk.
                let out: TkBulk = unsafe { std::ptr::read_unaligned(ptr as *const TkBulk) };
                let sum: u64 = out.per_node.iter().sum();
                let off: u64 = out
                    .per_node
                    .iter()
                    .enumerate()
                    .filter(|&(n, _)| mem & (1 << n) == 0)
                    .map(|(_, &c)| c)
                    .sum();
                if !valid {
                    self.fail(format!(
                        "{what} nr_pages {} succeeded, expected EINVAL",
                        b.nr_pages
                    ));
                } else if sum != b.nr_pages || off != 0 {
                    self.fail(format!(
                        "{what} nr_pages {}: per_node adds up to {sum}, {off} off memory nodes",
                        b.nr_pages
                    ));
                }
            }
            Err(libc::EIO) => self.fail(format!("{what} -> EIO: a page not on its node")),
            Err(_) => {}
        }
    }

    /// TK_IOC_TASK_NEXT: every node returned is a memory node; a count out of
    /// range is EINVAL.
    fn check_task_next(&mut self, what: &str, r: Result<i64, i32>, input: &[u8], ptr: usize) {
        let mem = self.env.mem_mask;
        let t: TkTaskNext = get(input);
        if r.is_ok() {
            // SAFETY: as above, a TkTaskNext.
            let out: TkTaskNext = unsafe { std::ptr::read_unaligned(ptr as *const TkTaskNext) };
            if !(1..=256).contains(&t.count) {
                self.fail(format!(
                    "{what} count {} succeeded, expected EINVAL",
                    t.count
                ));
            } else if let Some(&n) = out.nodes[..t.count as usize]
                .iter()
                .find(|&&n| mem & (1u64 << (n & 63)) == 0 || n >= 64)
            {
                self.fail(format!(
                    "{what} count {} returned node {n}, not a memory node",
                    t.count
                ));
            }
        }
    }

    /// TK_IOC_SET_GIGANTIC: valid settings are accepted (or EBUSY), invalid
    /// ones EINVAL; a query always succeeds.
    fn check_set_gigantic(&mut self, what: &str, r: Result<i64, i32>, input: &[u8]) {
        let g: TkGigantic = get(input);
        let set_valid = g.flags == 0
            && (g.threads == TK_THREADS_AUTO || (1..=self.env.online_cpus).contains(&g.threads))
            && g.placement <= 2
            && g.chunk_kib.is_multiple_of(4)
            && g.chunk_kib <= 32768;
        match r {
            Ok(_) if g.flags != 1 && !set_valid => self.fail(format!(
                "{what} threads {} placement {} chunk {} flags {:#x} succeeded, expected EINVAL",
                g.threads, g.placement, g.chunk_kib, g.flags
            )),
            Err(e) if g.flags == 1 => self.fail(format!(
                "{what} TK_GIGANTIC_F_QUERY -> {}, expected success at any time",
                errno_str(e)
            )),
            Err(libc::EINVAL) if set_valid => self.fail(format!(
                "{what} threads {} placement {} chunk {} flags 0 -> EINVAL, expected success or EBUSY",
                g.threads, g.placement, g.chunk_kib
            )),
            _ => {}
        }
    }

    /// TK_IOC_REBALANCE: the counts are consistent, a dry run moves nothing,
    /// the budget holds, the mask is within N_MEMORY.
    fn check_rebalance(&mut self, what: &str, r: Result<i64, i32>, input: &[u8], ptr: usize) {
        let mem = self.env.mem_mask;
        let a: TkRebalance = get(input);
        if r.is_ok() {
            // SAFETY: as above, a TkRebalance.
            let out: TkRebalance = unsafe { std::ptr::read_unaligned(ptr as *const TkRebalance) };
            let dry = a.flags & TK_REBALANCE_F_DRY_RUN != 0;
            let known = TK_REBALANCE_F_DRY_RUN | TK_REBALANCE_F_WEIGHTS;
            let mask = out.nodemask & mem;
            let own_zero = a.flags & TK_REBALANCE_F_WEIGHTS != 0
                && (0..64).any(|n| mask & (1u64 << n) != 0 && a.weights[n] == 0);
            let why = if a.flags & !known != 0 {
                Some("unknown flags accepted, expected EINVAL".to_string())
            } else if own_zero {
                Some("a zero own weight for a node of the mask accepted".into())
            } else if a.nodemask != 0 && a.nodemask & mem == 0 {
                Some("a mask without memory nodes accepted, expected EINVAL".into())
            } else if out.moved > out.misplaced || out.misplaced > out.looked {
                Some("moved > misplaced or misplaced > looked".into())
            } else if out.moved + out.no_memory + out.busy > out.misplaced {
                Some("moved + no_memory + busy > misplaced".into())
            } else if dry && out.moved != 0 {
                Some("a dry run moved pages".into())
            } else if a.budget_pages != 0 && out.moved > a.budget_pages {
                Some("moved past the budget".into())
            } else if out.nodemask & !mem != 0 || out.nodemask == 0 {
                Some(format!(
                    "effective mask {:#x} is not within N_MEMORY",
                    out.nodemask
                ))
            } else {
                None
            };
            if let Some(why) = why {
                self.fail(format!("{what} {a:?} -> {out:?}: {why}"));
            }
        }
    }

    /// TK_IOC_CLEAR_BENCH: a range count out of 1..=64 is EINVAL.
    fn check_clear_bench(&mut self, what: &str, r: Result<i64, i32>, input: &[u8]) {
        let c: TkClearBench = get(input);
        if !(1..=64).contains(&c.nr_gigantic) && r != Err(libc::EINVAL) {
            self.fail(format!(
                "{what} nr_gigantic {} -> {}, expected EINVAL",
                c.nr_gigantic,
                res_str(r)
            ));
        }
    }
}

/// Errnos Documentation/ABI/testing/dev-tierkit* documents for command `i`
/// (of [`KNOWN`]), plus ENOMEM (any allocation).
pub(super) fn documented(i: usize) -> &'static [i32] {
    match i {
        0 => &[libc::EINVAL, libc::EBUSY, libc::ENOMEM],
        1 => &[libc::EINVAL, libc::ENOMEM],
        2 => &[libc::EINVAL, libc::ENOMEM],
        3 => &[libc::EINVAL, libc::EBUSY, libc::ENOMEM],
        5 => &[libc::EINVAL, libc::EOPNOTSUPP, libc::ENOMEM],
        6 => &[libc::EINVAL, libc::EBUSY, libc::ENOMEM],
        _ => &[libc::EINVAL, libc::ENOMEM],
    }
}

pub(super) fn zeroed_bulk() -> TkBulk {
    TkBulk {
        nr_pages: 0,
        per_node: [0; 64],
        il_prev: 0,
        il_weight: 0,
    }
}

/// Writes `v`'s bytes at the start of `buf` (as much as fits).
pub(super) fn put<T: Copy>(buf: &mut [u8], v: &T) {
    let n = std::mem::size_of::<T>().min(buf.len());
    // SAFETY: reads `n` <= size_of::<T>() bytes of a live `T` (the ABI
    // structs have no padding, so every byte is initialized).
    let src = unsafe { std::slice::from_raw_parts(v as *const T as *const u8, n) };
    buf[..n].copy_from_slice(src);
}

/// Reads a `T` from the start of `buf` (zeros past its end).
pub(super) fn get<T: Copy>(buf: &[u8]) -> T {
    let mut tmp = vec![0u8; std::mem::size_of::<T>()];
    let n = tmp.len().min(buf.len());
    tmp[..n].copy_from_slice(&buf[..n]);
    // SAFETY: `tmp` holds size_of::<T>() bytes; T is one of the ABI structs,
    // for which every bit pattern is valid.
    unsafe { std::ptr::read_unaligned(tmp.as_ptr() as *const T) }
}
