//! tk-test-memcg: tierkit's 4 KiB pages under memory cgroups (v2).
//!
//! - Charged: a task in a cgroup that maps 32 MiB in 4 KiB mode raises the
//!   cgroup's `memory.current` by at least that much; after `munmap` and
//!   `close` it is back.
//! - Bounded: a task in a cgroup with `memory.max` = 64 MiB that maps
//!   128 MiB gets `ENOMEM` from `mmap` (tierkit allocates with
//!   `__GFP_RETRY_MAYFAIL`, so the charge fails instead of the memcg OOM
//!   killer running); no task is killed (`oom_kill` in `memory.events`
//!   stays 0) and nothing stays charged.
//! - Gigantic ranges are charged to no cgroup (they need CAP_SYS_ADMIN,
//!   as hugetlb's pool pages are uncharged unless the cgroup is mounted
//!   with `memory_hugetlb_accounting`): a GiB made by a task whose
//!   cgroup has 16 MiB of room leaves `memory.current` within 16 MiB of
//!   where it was, and nobody is OOM-killed.
//! - A rebalance keeps each page's charge (as the kernel's migration): a
//!   task with 64 KiB of room left (its per-CPU charge stocks drained by a
//!   write of `memory.high`, so that the room is all there is) moves its
//!   8 MiB from one node to another, 32 pages a batch, twice the room:
//!   every page moves, `no_memory` 0, `memory.current` stays.
//! - Offline keeps the owner's charge (where a node's memory is
//!   `ZONE_MOVABLE`, as the cxl topology's CXL node): an owner in one
//!   cgroup maps 16 MiB on that node and is then held at `memory.max`
//!   with no room (its stocks drained, `memory.max` = `memory.current`);
//!   an offliner in a cgroup with
//!   `memory.max` = 4 MiB offlines every block holding those pages. The
//!   offline succeeds, tierkit moves the pages to another node, the
//!   owner's `memory.current` stays where it was, the offliner's stays
//!   under its limit, and the owner's data is intact. The blocks come
//!   back online after.
//!
//! - Swap (where the kernel has zram and swap, as Debian's): a task in a
//!   cgroup with `memory.max` = 32 MiB maps 8 MiB of tierkit pages and
//!   writes 64 MiB of anonymous memory twice over, with a 256 MiB zram
//!   swap device on: the anonymous pages swap out and back intact
//!   (`pswpout`, `pswpin`), tierkit's pages (not on the LRU, never
//!   reclaimed) keep their pfns and data, and nobody is OOM-killed.
//!
//! Exit 0 if every check passed.

use std::process::ExitCode;

fn main() -> ExitCode {
    tierkit_guest::help!();
    tierkit_guest::tests::memcg::main()
}
