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
//!      a signal; a refused block goes offline when tried again (the
//!      offline paused the node's refill and made it give up the range
//!      it was filling), within 5 tries 1 s apart; the blocks are onlined
//!      again;
//!    - once the range is ready, every block of the node is offlined in
//!      ascending order, as a memory device's are (the ready range, kept
//!      as order-0 pages, does not fail the isolation of the blocks under
//!      it; the memory notifier gives it up and the pool reads `NID 1 0`)
//!      and onlined again: the refill thread, which found no memory on the
//!      node and looks again every 10 s, fills the pool to `NID 1 1`
//!      within 360 s;
//!    - a gigantic mapping on the node takes that ready range at its first
//!      touch (no clear), the target goes to 0, 16 of its pages are
//!      vmspliced into a pipe, and the mapping and file are closed: the
//!      offline of each block under the GiB is `EBUSY` within 10 s; once
//!      the pipe is drained every one goes offline; they are onlined again;
//!    - `NID 0`, and the node's memory is back;
//! 6. the kernel printed no crash report (oops, BUG, WARNING) meanwhile.
//!
//! In `SLOW_USER_TESTS`. Needs a free naturally aligned GiB on the node for
//! the refills (`--append 'hugepagesz=1G hugepages=0:1'` on a small guest:
//! the boot-time page is handed back for the test).
//!
//! Exit 0 if every check passed.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::pool_hostile::main()
}
