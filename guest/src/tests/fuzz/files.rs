//! The files: the device and debugfs files a worker opens, shares and
//! closes, and the calls on them (debugfs writes and reads, open/close/dup,
//! and the other file syscalls).

use super::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dbg {
    Node(u32),
    Auto,
    Bandwidth,
    Stats,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FdKind {
    /// /dev/tierkit opened for reading (and maybe writing).
    Dev,
    /// /dev/tierkit opened write-only (mmap needs read access).
    DevWo,
    DevPath,
    Debugfs(Dbg),
    Bad,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Fd {
    pub(super) fd: i32,
    pub(super) kind: FdKind,
    pub(super) name: &'static str,
}

/// Files opened by the parent before the fork (every worker's), or by a
/// process before its threads (its threads').
#[derive(Clone, Debug, Default)]
pub(super) struct SharedFds {
    pub(super) fds: Vec<Fd>,
}

pub(super) fn open_c(path: &str, flags: i32) -> io::Result<i32> {
    let p = CString::new(path).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: NUL-terminated path.
    let fd = unsafe { libc::open(p.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(fd)
    }
}

pub(super) fn dbg_path(env: &Env, d: Dbg) -> PathBuf {
    match d {
        Dbg::Node(n) => env.wi.join(format!("node{n}")),
        Dbg::Auto => env.wi.join("auto"),
        Dbg::Bandwidth => env.wi.join("bandwidth"),
        Dbg::Stats => PathBuf::from(crate::abi::tk::STATS_PATH),
    }
}

pub(super) fn open_global(env: &Env) -> io::Result<SharedFds> {
    let mut s = SharedFds::default();
    let mut add = |path: &str, flags: i32, kind: FdKind, name: &'static str| -> io::Result<()> {
        let fd = open_c(path, flags)?;
        s.fds.push(Fd { fd, kind, name });
        Ok(())
    };
    let dev = crate::abi::tk::DEV_PATH;
    add(dev, libc::O_RDWR, FdKind::Dev, "global dev A")?;
    add(dev, libc::O_RDWR, FdKind::Dev, "global dev B")?;
    add(dev, libc::O_RDONLY, FdKind::Dev, "global dev ro")?;
    let p = |d: Dbg| dbg_path(env, d).to_string_lossy().into_owned();
    add(
        &p(Dbg::Stats),
        libc::O_RDONLY,
        FdKind::Debugfs(Dbg::Stats),
        "global stats",
    )?;
    add(
        &p(Dbg::Auto),
        libc::O_RDWR,
        FdKind::Debugfs(Dbg::Auto),
        "global auto",
    )?;
    add(
        &p(Dbg::Bandwidth),
        libc::O_RDWR,
        FdKind::Debugfs(Dbg::Bandwidth),
        "global bandwidth",
    )?;
    if let Some(&n) = env.mem_nodes.first() {
        add(
            &p(Dbg::Node(n)),
            libc::O_RDWR,
            FdKind::Debugfs(Dbg::Node(n)),
            "global nodeN",
        )?;
    }
    Ok(s)
}

pub(super) fn close_all(s: &SharedFds) {
    for f in &s.fds {
        // SAFETY: fds opened by `open_global`, closed once.
        unsafe { libc::close(f.fd) };
    }
}

/// One debugfs call of [`Worker::op_debugfs`]: the file, and how the call
/// is made.
struct DbgIo {
    fd: i32,
    d: Dbg,
    /// The op opened the file itself (fresh): the ABI's answer is checked.
    own: bool,
    /// The call described, for failures.
    what: String,
    at: Option<i64>,
    bad_buf: bool,
    bad_ptr: usize,
}

impl Worker<'_> {
    pub(super) fn op_debugfs(&mut self, o: &mut Rng) {
        let mut targets = vec![Dbg::Auto, Dbg::Bandwidth, Dbg::Stats];
        targets.extend(self.env.mem_nodes.iter().map(|&n| Dbg::Node(n)));
        let d = *o.pick(&targets);
        let fresh = o.bool();
        let write = self.cfg.debugfs_writes && o.chance(7, 10);
        let (payload, class) = match d {
            Dbg::Node(_) => weight_payload(o),
            Dbg::Auto => auto_payload(o),
            Dbg::Bandwidth => bandwidth_payload(o, self.env),
            Dbg::Stats => (random_payload(o), Class::Unknown),
        };
        let at: Option<i64> = if o.chance(3, 4) {
            None
        } else {
            Some(o.pick_or(&[0, 1, 4096, 1 << 40], |o| o.next_u64() as i64 & i64::MAX))
        };
        let bad_buf = o.chance(1, 10);
        let bad_ptr = *o.pick(&[0usize, 0xffff_8880_0000_0000, self.arena.none as usize]);
        let rlen = *o.pick(&[0usize, 1, 7, 64, 4096, 8192]);
        let flags = *o.pick(&[
            libc::O_RDWR,
            libc::O_WRONLY,
            libc::O_RDONLY,
            libc::O_RDWR | libc::O_APPEND,
        ]);

        let Some((fd, name, own)) = self.debugfs_fd(d, fresh, write, flags) else {
            return;
        };
        let what = format!(
            "{} {:?} ({name}) {:?}{}{}",
            if write { "write" } else { "read" },
            d,
            String::from_utf8_lossy(&payload[..payload.len().min(40)]),
            if payload.len() > 40 {
                format!("... ({} bytes)", payload.len())
            } else {
                String::new()
            },
            at.map_or(String::new(), |a| format!(" at {a}"))
        );
        let io = DbgIo {
            fd,
            d,
            own,
            what,
            at,
            bad_buf,
            bad_ptr,
        };
        if write {
            self.debugfs_write(&io, &payload, class);
        } else {
            self.debugfs_read(&io, rlen);
        }
        if own {
            // SAFETY: the fd this op opened.
            let r = sys_res(unsafe { libc::close(fd) } as i64);
            self.record("close debugfs", r);
        }
    }

    /// The debugfs file of `d`: opened now (`fresh`, for writing if
    /// `write`), or the shared one. Gives its fd, how it was had, and
    /// whether this op owns (and closes) it; `None` if there is none.
    fn debugfs_fd(
        &mut self,
        d: Dbg,
        fresh: bool,
        write: bool,
        flags: i32,
    ) -> Option<(i32, &'static str, bool)> {
        Some(if fresh {
            let path = dbg_path(self.env, d);
            let fl = match (write, flags) {
                (false, _) => libc::O_RDONLY,
                (true, libc::O_RDONLY) => libc::O_WRONLY,
                (true, f) => f,
            };
            let r = open_c(path.to_str().unwrap_or_default(), fl);
            self.record(
                "open debugfs",
                r.as_ref()
                    .map(|&f| f as i64)
                    .map_err(|e| e.raw_os_error().unwrap_or(0)),
            );
            match r {
                Ok(fd) => (fd, "fresh", true),
                Err(_) => return None,
            }
        } else {
            let Some(f) = self
                .shared
                .iter()
                .find(|f| f.kind == FdKind::Debugfs(d))
                .copied()
            else {
                // No shared file for this one (node files but the first).
                return None;
            };
            (f.fd, f.name, false)
        })
    }

    /// A write of `payload` (of class `class`) to a debugfs file; on a
    /// fresh file at position 0 from a good buffer, the answer the ABI
    /// fixes.
    fn debugfs_write(&mut self, io: &DbgIo, payload: &[u8], class: Class) {
        let DbgIo {
            fd,
            d,
            own,
            ref what,
            at,
            bad_buf,
            bad_ptr,
        } = *io;
        let buf = if bad_buf {
            bad_ptr as *const u8
        } else {
            let b = &mut self.arena.big[..payload.len()];
            b.copy_from_slice(payload);
            b.as_ptr()
        };
        // SAFETY: `buf` is ours for `payload.len()` bytes, or a bad
        // pointer the kernel must refuse.
        let r = sys_res(unsafe {
            match at {
                None => libc::write(fd, buf as *const c_void, payload.len()),
                Some(a) => libc::pwrite(fd, buf as *const c_void, payload.len(), a),
            }
        } as i64);
        self.record(&format!("debugfs write {}", dbg_name(d)), r);
        if bad_buf && !payload.is_empty() && r.is_ok() {
            self.fail(format!(
                "{what} from {bad_ptr:#x} succeeded, expected EFAULT"
            ));
        }
        // Semantics only on a fresh file written at position 0 from a
        // good buffer: then the ABI fixes the answer.
        // Documented: a write of more than 4096 bytes is EINVAL; an
        // empty write returns 0 and changes nothing (sysfs_kf_write()).
        let class = if payload.len() > 4096 {
            Class::Invalid
        } else if payload.is_empty() {
            Class::Valid
        } else {
            class
        };
        if own && at.is_none() && !bad_buf && d != Dbg::Stats {
            match (class, r) {
                (Class::Valid, Ok(n)) if n as usize != payload.len() => {
                    self.fail(format!("{what} wrote {n} of {} bytes", payload.len()))
                }
                (Class::Valid, Err(e))
                    if !(e == libc::ENOMEM || (e == libc::ENODEV && d == Dbg::Auto)) =>
                {
                    self.fail(format!("{what} -> {}, expected success", errno_str(e)))
                }
                (Class::Invalid, Ok(_)) => self.fail(format!("{what} succeeded, expected EINVAL")),
                (Class::Invalid, Err(e)) if e != libc::EINVAL => {
                    self.fail(format!("{what} -> {}, expected EINVAL", errno_str(e)))
                }
                _ => {}
            }
        }
        if d == Dbg::Stats && r.is_ok() && !payload.is_empty() {
            self.fail(format!("{what} succeeded: stats is read-only"));
        }
    }

    /// A read of `rlen` bytes from a debugfs file; into a bad buffer it
    /// returns no data.
    fn debugfs_read(&mut self, io: &DbgIo, rlen: usize) {
        let DbgIo {
            fd,
            d,
            ref what,
            at,
            bad_buf,
            bad_ptr,
            ..
        } = *io;
        let buf = if bad_buf {
            bad_ptr as *mut u8
        } else {
            self.arena.big.as_mut_ptr()
        };
        // SAFETY: `buf` has at least `rlen` bytes (`big` is 64 KiB), or
        // is a bad pointer the kernel must refuse.
        let r = sys_res(unsafe {
            match at {
                None => libc::read(fd, buf as *mut c_void, rlen),
                Some(a) => libc::pread(fd, buf as *mut c_void, rlen, a),
            }
        } as i64);
        self.record(&format!("debugfs read {}", dbg_name(d)), r);
        if bad_buf && rlen > 0 && matches!(r, Ok(n) if n > 0) {
            self.fail(format!(
                "{what} into {bad_ptr:#x} returned data, expected EFAULT"
            ));
        }
    }

    pub(super) fn op_openclose(&mut self, o: &mut Rng) {
        let k = o.below(OWN_FDS as u64) as usize;
        let which = o.weighted(&[55, 15, 15, 15]);
        let flags = *o.pick(&[
            libc::O_RDWR,
            libc::O_RDWR,
            libc::O_RDONLY,
            libc::O_WRONLY,
            libc::O_RDWR | libc::O_NONBLOCK,
            libc::O_RDWR | libc::O_TRUNC,
            libc::O_RDWR | libc::O_APPEND,
            libc::O_RDWR | libc::O_DIRECT,
            libc::O_RDWR | libc::O_CREAT,
        ]);
        let dup_from = o.below(16) as usize;
        let mut targets = vec![Dbg::Auto, Dbg::Bandwidth, Dbg::Stats];
        targets.extend(self.env.mem_nodes.iter().map(|&n| Dbg::Node(n)));
        let d = *o.pick(&targets);
        if let Some(f) = self.own[k].take() {
            // SAFETY: an fd this worker opened and tracks.
            let r = sys_res(unsafe { libc::close(f.fd) } as i64);
            self.record("close", r);
            return;
        }
        let (r, kind, name) = match which {
            0 => {
                let r = open_c(crate::abi::tk::DEV_PATH, flags);
                let kind = if flags & libc::O_ACCMODE == libc::O_WRONLY {
                    FdKind::DevWo
                } else {
                    FdKind::Dev
                };
                (r, kind, "own dev")
            }
            1 => (
                open_c(crate::abi::tk::DEV_PATH, libc::O_PATH),
                FdKind::DevPath,
                "own dev O_PATH",
            ),
            2 => {
                let devs: Vec<Fd> = self
                    .shared
                    .iter()
                    .copied()
                    .filter(|f| f.kind == FdKind::Dev)
                    .collect();
                let src = devs[dup_from % devs.len()];
                // SAFETY: dup of a shared fd this process holds.
                let fd = unsafe { libc::fcntl(src.fd, libc::F_DUPFD_CLOEXEC, 0) };
                let r = if fd < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(fd)
                };
                (r, FdKind::Dev, "own dup of a shared dev")
            }
            _ => (
                open_c(
                    dbg_path(self.env, d).to_str().unwrap_or_default(),
                    libc::O_RDWR,
                ),
                FdKind::Debugfs(d),
                "own debugfs",
            ),
        };
        self.record(
            &format!("open {name}"),
            r.as_ref()
                .map(|&f| f as i64)
                .map_err(|e| e.raw_os_error().unwrap_or(0)),
        );
        if let Ok(fd) = r {
            self.own[k] = Some(Fd { fd, kind, name });
        }
    }

    pub(super) fn op_misc(&mut self, o: &mut Rng) {
        let f = self.pick_fd(o);
        let what = o.below(14);
        if what >= 12 {
            self.op_race(o);
            return;
        }
        let n = *o.pick(&[0usize, 1, 64, 4096]);
        let arg = o.next_u64();
        let rw = self.arena.rw;
        // fork is slow under TCG (it copies every mapping): 1 in 8 of its
        // draws, about 0.1% of the operations.
        if what == 11 && arg >> 61 == 0 {
            let slot = (arg % MAP_SLOTS as u64) as usize;
            self.op_fork(self.maps[slot]);
            return;
        }
        // SAFETY (all below): the buffers are our arena (at least a page);
        // the fd is ours or bad.
        let what = if what == 11 { 3 } else { what };
        let r = match what {
            0 => sys_res(unsafe { libc::read(f.fd, rw as *mut c_void, n) } as i64),
            1 => sys_res(unsafe { libc::write(f.fd, rw as *const c_void, n) } as i64),
            2 => sys_res(
                unsafe { libc::lseek(f.fd, arg as i64 & 0xffff, (arg >> 32) as i32 & 3) } as i64,
            ),
            3 => {
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                sys_res(unsafe { libc::fstat(f.fd, &mut st) } as i64)
            }
            4 => {
                let mut p = libc::pollfd {
                    fd: f.fd,
                    events: libc::POLLIN | libc::POLLOUT,
                    revents: 0,
                };
                sys_res(unsafe { libc::poll(&mut p, 1, 0) } as i64)
            }
            5 => sys_res(unsafe {
                libc::fcntl(
                    f.fd,
                    libc::F_SETFL,
                    (arg as i32) & (libc::O_NONBLOCK | libc::O_APPEND),
                )
            } as i64),
            6 => sys_res(unsafe { libc::fsync(f.fd) } as i64),
            7 => sys_res(unsafe { libc::ftruncate(f.fd, arg as i64 & 0xffff) } as i64),
            8 => sys_res(unsafe { libc::fallocate(f.fd, 0, 0, 4096) } as i64),
            9 => sys_res(unsafe { libc::flock(f.fd, libc::LOCK_SH | libc::LOCK_NB) } as i64),
            _ => {
                let iov = [libc::iovec {
                    iov_base: rw as *mut c_void,
                    iov_len: n,
                }];
                sys_res(unsafe { libc::readv(f.fd, iov.as_ptr(), 1) } as i64)
            }
        };
        let names = [
            "read",
            "write",
            "lseek",
            "fstat",
            "poll",
            "fcntl",
            "fsync",
            "ftruncate",
            "fallocate",
            "flock",
            "readv",
        ];
        self.record(&format!("{} {:?}", names[what as usize], f.kind), r);
        // poll ignores negative fds and flags others with POLLNVAL; flock
        // may be ENOSYS (no CONFIG_FILE_LOCKING).
        if f.kind == FdKind::Bad && !matches!(what, 4 | 9) && r != Err(libc::EBADF) {
            self.fail(format!(
                "{}({}) -> {}, expected EBADF",
                names[what as usize],
                f.fd,
                res_str(r)
            ));
        }
    }
}

pub(super) fn dbg_name(d: Dbg) -> &'static str {
    match d {
        Dbg::Node(_) => "nodeN",
        Dbg::Auto => "auto",
        Dbg::Bandwidth => "bandwidth",
        Dbg::Stats => "stats",
    }
}
