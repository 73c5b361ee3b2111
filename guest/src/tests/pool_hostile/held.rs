//! Step 5's last part: a GiB of the pool's, held by a pipe after its file
//! is closed, keeps the memory under it from going offline until the pipe
//! is drained.

use super::*;
use crate::tests::offline_held::{orphans, wait_orphans};

/// How long a refused offline may take: at once, not a retry loop.
const REFUSED_WITHIN: Duration = Duration::from_secs(10);

/// Pages of the GiB put in the pipe.
const SPLICED: usize = 16;

/// With the pool of node `c` holding a ready range (`c 1 1`): a gigantic
/// mapping on `c` takes it at its first touch (no clear), the target goes
/// to 0, [`SPLICED`] pages of the GiB are vmspliced into a pipe, and the
/// mapping and its file are closed. The GiB is then tierkit's orphan:
/// the offline of each block under it is `EBUSY` within
/// [`REFUSED_WITHIN`] (never a retry until a signal); once the pipe is
/// drained and closed the orphan is freed and every block goes offline;
/// the blocks are onlined again.
pub fn pipe_holds_gib(r: &mut Report, c: u32) {
    let what = format!("node {c}: a GiB of the pool held by a pipe after its file is closed");
    let res = (|| -> Result<String, String> {
        let tk =
            Tierkit::gigantic_on(c).map_err(|e| format!("gigantic file: {}", errno_name(&e)))?;
        let pages = TK_GIGANTIC_BYTES as usize / crate::linux::sys::PAGE_SIZE;
        let m = tk
            .map(pages, 0)
            .map_err(|e| format!("mmap: {}", errno_name(&e)))?;
        // SAFETY: our live mapping; the first touch takes the ready range.
        unsafe { std::ptr::read_volatile(m.as_ptr()) };
        pool::set_target(c, 0).map_err(|e| format!("`{c} 0`: {}", errno_name(&e)))?;
        let taken = state(c)?;
        if taken != (0, 0) {
            return Err(format!(
                "after the touch the pool reads {taken:?}, not `{c} 0 0`"
            ));
        }
        pool::wait_quiet(Duration::from_secs(120))?;
        // TK_IOC_WALK: /proc/self/pagemap would zap the PUD and show none.
        let w = tk
            .walk(m.addr())
            .map_err(|e| format!("TK_IOC_WALK: {}", errno_name(&e)))?;
        if w.level != tierkit_core::uapi::TK_WALK_PUD {
            return Err(format!(
                "the GiB is not mapped by a PUD (level {})",
                w.level
            ));
        }
        let first = w.pfn;
        let bs = memblock::block_size().map_err(|e| e.to_string())?;
        let per = bs / crate::linux::sys::PAGE_SIZE as u64;
        let blocks: Vec<u64> = (0..TK_GIGANTIC_BYTES / bs)
            .map(|i| first / per + i)
            .collect();
        let mut fds = [0i32; 2];
        // SAFETY: pipe(2) writes two fds.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
            return Err(format!("pipe: {}", std::io::Error::last_os_error()));
        }
        let len = SPLICED * crate::linux::sys::PAGE_SIZE;
        let iov = libc::iovec {
            iov_base: m.as_ptr().cast(),
            iov_len: len,
        };
        // SAFETY: one iovec inside the live mapping; the pipe takes
        // references to its pages (no SPLICE_F_GIFT).
        let n = unsafe { libc::vmsplice(fds[1], &iov, 1, 0) };
        let base = orphans()?;
        drop(m);
        drop(tk);
        let held = orphans()?;
        let refused = if n != len as isize {
            Err(format!(
                "vmsplice: {n} ({})",
                std::io::Error::last_os_error()
            ))
        } else if held <= base {
            Err(format!("orphans {base} -> {held} after munmap and close"))
        } else {
            offline_each(&blocks, REFUSED_WITHIN, false)
        };
        let mut buf = vec![0u8; len];
        // SAFETY: our pipe's read end, `len` bytes of `buf`.
        let drained = unsafe { libc::read(fds[0], buf.as_mut_ptr().cast(), len) };
        // SAFETY: our own pipe's fds.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        // The orphan is freed within a second of its last other holder
        // letting go; until then the GiB folio still fails the isolation
        // of the blocks under it.
        let gone = if drained != len as isize {
            Err(format!("drained {drained} of {len} bytes"))
        } else if !wait_orphans(base, Duration::from_secs(5)).is_ok_and(|n| n <= base) {
            Err(format!(
                "orphans not back to {base} within 5 s of the drain"
            ))
        } else {
            offline_each(&blocks, OFFLINE_LIMIT, true)
        };
        let offline: Vec<u64> = blocks
            .iter()
            .copied()
            .filter(|&b| memblock::block_state(b).as_deref() == Some("offline"))
            .collect();
        let back =
            online_movable(&offline).map_err(|not_back| format!("not online again: {not_back:?}"));
        let refused = refused?;
        let gone = gone?;
        back?;
        Ok(format!(
            "orphans {base} -> {held}; {} blocks under pfn {first:#x}: EBUSY after {refused}; drained, offline after {gone}",
            blocks.len()
        ))
    })();
    r.check_note(
        &format!(
            "{what}: each block's offline EBUSY within {} s, offline once the pipe is drained",
            REFUSED_WITHIN.as_secs()
        ),
        res,
    );
}

/// Offlines each of `blocks` within `limit`: all done (`done`) or all
/// refused; the slowest time, or what went otherwise.
fn offline_each(blocks: &[u64], limit: Duration, done: bool) -> Result<String, String> {
    let mut worst = Duration::ZERO;
    let mut other = Vec::new();
    for &b in blocks {
        match memblock::set_block_state(b, "offline", limit) {
            Ok(t)
                if matches!(t.outcome, Outcome::Done) == done
                    && matches!(t.outcome, Outcome::Done | Outcome::Failed(libc::EBUSY)) =>
            {
                worst = worst.max(t.elapsed)
            }
            Ok(t) => other.push(format!(
                "memory{b}: {} after {:.1} s",
                t.outcome.describe(),
                t.elapsed.as_secs_f64()
            )),
            Err(e) => other.push(format!("memory{b}: {e}")),
        }
    }
    if other.is_empty() {
        Ok(format!("at most {:.2} s", worst.as_secs_f64()))
    } else {
        Err(format!(
            "{}: {other:?}",
            if done { "not offlined" } else { "not refused" }
        ))
    }
}
