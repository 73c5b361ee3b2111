//! The calls that change what tierkit re-checks after it slept: THP state
//! flipped for the whole process (`prctl(PR_SET_THP_DISABLE)`, the other
//! threads faulting meanwhile through the kernel's accesses) or for a
//! mapping (`MADV_HUGEPAGE`, `MADV_NOHUGEPAGE`), and a paced rebalance
//! during which a child stops and continues the process.

use super::*;

impl Worker<'_> {
    pub(super) fn op_race(&mut self, o: &mut Rng) {
        match o.below(3) {
            0 => {
                let on = o.below(2) as libc::c_ulong;
                // SAFETY: prctl with integer arguments only.
                let r =
                    sys_res(unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, on, 0, 0, 0) } as i64);
                self.record("prctl PR_SET_THP_DISABLE", r);
                if r.is_err() {
                    self.fail(format!("prctl(PR_SET_THP_DISABLE, {on}) -> {}", res_str(r)));
                }
            }
            1 => {
                let slot = o.below(MAP_SLOTS as u64) as usize;
                let Some(m) = self.maps[slot] else { return };
                let advice = *o.pick(&[libc::MADV_HUGEPAGE, libc::MADV_NOHUGEPAGE]);
                // SAFETY: a mapping this worker made; advice changes no data.
                let r =
                    sys_res(unsafe { libc::madvise(m.addr as *mut c_void, m.len, advice) } as i64);
                self.record("madvise THP", r);
            }
            _ => self.stopped_rebalance(o),
        }
    }

    /// A rebalance paced at 20 pages/s (budget 4) while a child sends this
    /// process SIGSTOP and then SIGCONT: the kernel restarts the call,
    /// which ends as any rebalance may (never with a restart code seen by
    /// userspace, never hung in D).
    fn stopped_rebalance(&mut self, o: &mut Rng) {
        let f = self.pick_fd(o);
        let delay_us = o.range(1, 50) * 1000;
        // SAFETY: the child makes only async-signal-safe calls (usleep,
        // getppid, kill, _exit), as required after fork in a
        // multithreaded process.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: as above.
            unsafe {
                let parent = libc::getppid();
                libc::usleep(delay_us as u32);
                libc::kill(parent, libc::SIGSTOP);
                libc::usleep(20_000);
                libc::kill(parent, libc::SIGCONT);
                libc::_exit(0);
            }
        }
        if pid < 0 {
            self.record("stopped rebalance fork", Err(errno()));
            return;
        }
        let mut a = TkRebalance {
            rate_pages: 20,
            budget_pages: 4,
            ..Default::default()
        };
        // SAFETY: TK_IOC_REBALANCE is _IOWR(.., TkRebalance); `a` is ours.
        let r = sys_res(unsafe { libc::ioctl(f.fd, TK_IOC_REBALANCE as _, &mut a) } as i64);
        let mut st = 0;
        // SAFETY: our own child.
        unsafe { libc::waitpid(pid, &mut st, 0) };
        self.record(&format!("stopped rebalance {:?}", f.kind), r);
        // ERESTARTSYS..ERESTART_RESTARTBLOCK (512..=516) must never reach
        // userspace.
        if matches!(r, Err(e) if (512..=516).contains(&e)) {
            self.fail(format!(
                "paced rebalance under SIGSTOP/SIGCONT -> {}",
                res_str(r)
            ));
        }
    }
}
