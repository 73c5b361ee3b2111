//! The userspace ABI of `/dev/tierkit`: ioctl numbers and argument layouts.
//!
//! Shared verbatim by the module and by `tierkit-guest`, so both sides agree
//! by construction. Documented for users in `Documentation/ABI/testing/dev-tierkit`.
//! The errors below are each ioctl's own; every ioctl can also fail with
//! `ENOTTY` (an unknown command), `EFAULT` (the argument cannot be read or
//! written back) and, while it waits for the file's lock, `EINTR` (see
//! the ABI document).
//! All structs are `#[repr(C)]`, little-endian x86_64, with explicit padding.

/// The ioctl "type" byte. 0xB9 is unassigned in
/// `Documentation/userspace-api/ioctl/ioctl-number.rst` (7.3).
pub const TIERKIT_IOC_MAGIC: u32 = 0xB9;

const IOC_NRBITS: u32 = 8;
const IOC_TYPEBITS: u32 = 8;
const IOC_SIZEBITS: u32 = 14;
const IOC_NRSHIFT: u32 = 0;
const IOC_TYPESHIFT: u32 = IOC_NRSHIFT + IOC_NRBITS;
const IOC_SIZESHIFT: u32 = IOC_TYPESHIFT + IOC_TYPEBITS;
const IOC_DIRSHIFT: u32 = IOC_SIZESHIFT + IOC_SIZEBITS;
const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// `_IOWR(TIERKIT_IOC_MAGIC, nr, size)` as in `include/uapi/asm-generic/ioctl.h`.
pub const fn iowr(nr: u32, size: usize) -> u32 {
    ((IOC_READ | IOC_WRITE) << IOC_DIRSHIFT)
        | (TIERKIT_IOC_MAGIC << IOC_TYPESHIFT)
        | (nr << IOC_NRSHIFT)
        | ((size as u32) << IOC_SIZESHIFT)
}

/// `_IOR(TIERKIT_IOC_MAGIC, nr, size)`.
pub const fn ior(nr: u32, size: usize) -> u32 {
    (IOC_READ << IOC_DIRSHIFT)
        | (TIERKIT_IOC_MAGIC << IOC_TYPESHIFT)
        | (nr << IOC_NRSHIFT)
        | ((size as u32) << IOC_SIZESHIFT)
}

/// Highest node id + 1 that the ABI can name: nodemasks are one `u64`.
pub const TIERKIT_MAX_NODES: usize = 64;

// ---------------------------------------------------------------------------
// Weighted interleave (owner: module/src/wi, module/src/dev.rs)
// ---------------------------------------------------------------------------

/// `TkPolicy::mode`: `MPOL_WEIGHTED_INTERLEAVE` semantics (mm/mempolicy.c
/// `weighted_interleave_nid`), using tierkit's global weight table.
pub const TK_MODE_WEIGHTED_INTERLEAVE: u32 = 0;
/// `TkPolicy::mode`: `MPOL_INTERLEAVE` semantics (mm/mempolicy.c
/// `interleave_nid`): every node in the mask has weight 1.
pub const TK_MODE_INTERLEAVE: u32 = 1;
/// `TkPolicy::flags`: `weights` is also an input, the file's own weight
/// table (weighted mode only; every node of the effective mask needs
/// 1..=255). The file then never reads tierkit's global table.
pub const TK_POLICY_F_WEIGHTS: u32 = 1 << 0;

/// Argument of [`TK_IOC_SET_POLICY`].
///
/// In: `mode`, `flags` (0 or [`TK_POLICY_F_WEIGHTS`]: then `weights` too)
/// and the requested `nodemask` (bit N = node N). Out: `nodemask` becomes
/// the effective mask (requested ∩ N_MEMORY, as `mpol_set_nodemask` does),
/// and `weights` the weight of each node the file places by (its own, or
/// the global table at the time of the call). Errors: `EINVAL` for an
/// unknown mode or flag, [`TK_POLICY_F_WEIGHTS`] with interleave mode, a
/// zero own weight of a node in the mask, or an effective mask that is
/// empty; `EBUSY` once the file has been mapped.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TkPolicy {
    pub mode: u32,
    pub flags: u32,
    pub nodemask: u64,
    pub weights: [u8; TIERKIT_MAX_NODES],
}

/// Sets the open file's policy. Must come before `mmap`.
pub const TK_IOC_SET_POLICY: u32 = iowr(1, core::mem::size_of::<TkPolicy>());

/// Argument of [`TK_IOC_BULK`]: run the bulk path
/// (mm/mempolicy.c `alloc_pages_bulk_weighted_interleave`) for `nr_pages`
/// pages against the open file's task state (`il_prev`, `il_weight`),
/// allocating real pages on each node and freeing them before returning.
///
/// In: `nr_pages` (1..=2^20). Out: `per_node[n]` pages placed on node `n`,
/// verified with `page_to_nid`; `il_prev` and `il_weight` the resume state
/// left behind (`il_prev` = -1 for "before the first node").
/// Errors: `EINVAL` for 0 or too many pages or a file without a weighted
/// interleave policy; `ENOMEM` if an allocation fails (all pages are freed
/// and the task state is left unchanged); `EIO` if a page is not on the
/// node it was asked for; `EINTR` on a fatal signal (checked every 512
/// pages; everything is freed, the task state is unchanged).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TkBulk {
    pub nr_pages: u64,
    pub per_node: [u64; TIERKIT_MAX_NODES],
    pub il_prev: i32,
    pub il_weight: u32,
}

/// Runs the bulk path. See [`TkBulk`].
pub const TK_IOC_BULK: u32 = iowr(2, core::mem::size_of::<TkBulk>());

/// Most nodes one [`TK_IOC_TASK_NEXT`] call returns.
pub const TK_TASK_NEXT_MAX: usize = 256;

/// Argument of [`TK_IOC_TASK_NEXT`]: the task path
/// (mm/mempolicy.c `weighted_interleave_nodes`), `count` steps against the
/// open file's task state. In: `count` (1..=256). Out: `nodes[0..count]`.
/// Errors: `EINVAL` for a bad count or no weighted-interleave policy.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TkTaskNext {
    pub count: u32,
    pub _pad: u32,
    pub nodes: [u8; TK_TASK_NEXT_MAX],
}

/// Steps the task path. See [`TkTaskNext`].
pub const TK_IOC_TASK_NEXT: u32 = iowr(3, core::mem::size_of::<TkTaskNext>());

// ---------------------------------------------------------------------------
// Gigantic clearing (owner: module/src/clear)
// ---------------------------------------------------------------------------
// Documented for users in `Documentation/ABI/testing/dev-tierkit-clear`.

/// Bytes in one gigantic page (1 GiB).
pub const TK_GIGANTIC_BYTES: u64 = 1 << 30;

/// Worker placement: CPUs of the memory's node, or of the nearest node with
/// CPUs when the memory's node has none (`numa_nearest_node(nid, N_CPU)`),
/// which is what a CXL node looks like.
pub const TK_PLACE_LOCAL: u32 = 0;
/// Worker placement: CPUs of a node other than the one `local` would use:
/// of those nodes with CPUs, the nearest to the memory by `node_distance`
/// (lowest id on ties). `EINVAL` when there is no such node.
pub const TK_PLACE_REMOTE: u32 = 1;
/// Worker placement: any online CPU.
pub const TK_PLACE_ANY: u32 = 2;

/// `threads` value asking tierkit to pick the worker count: the first
/// clear of a node with a placement clears a 64 MiB probe slice with 1, 2,
/// ... workers and stops adding workers once one more raises the bandwidth
/// by 5% or less; later clears of that node and placement reuse the count
/// until the placement's eligible CPUs change or the node's memory does.
/// Zero is not "auto": a zero thread count is `EINVAL`.
pub const TK_THREADS_AUTO: u32 = u32::MAX;

/// `TkGigantic::flags`: only read the `last_*` fields back; change nothing.
/// Allowed at any time, also after `mmap`.
pub const TK_GIGANTIC_F_QUERY: u32 = 1 << 0;

/// Argument of [`TK_IOC_SET_GIGANTIC`]: switch the open file into gigantic
/// mode. Each 1 GiB of a later `mmap` is one physically contiguous,
/// naturally aligned gigantic range, placed on the node the file's policy
/// selects for `ilx = pgoff / 2^18 + i` (the ilx counts gigantic pages, as
/// the kernel's `get_vma_policy` shifts the ilx by the folio order). `mmap`
/// only checks and reserves; each GiB is allocated, cleared in parallel
/// (or taken from the pre-cleared pool) and mapped by one PUD at its first
/// touch (see Documentation/ABI/testing/dev-tierkit, gigantic mode).
///
/// In: `threads` (1..=eligible CPUs, or [`TK_THREADS_AUTO`]), `placement`
/// (`TK_PLACE_*`), `chunk_kib` (clearing chunk: a multiple of 4 up to
/// 32768, 0 = 2048), `flags` (0 or [`TK_GIGANTIC_F_QUERY`]).
/// Out (always written back): the `last_*` fields describe the gigantic
/// range most recently cleared for this file (`last_nid` = -1 before the
/// first), and `nr_cleared` counts the 1 GiB ranges that successful
/// `mmap` calls of this file reserved (made or not yet).
/// Errors: `EPERM` without `CAP_SYS_ADMIN` (flags 0; the query needs
/// none), `EINVAL` for bad values (thread count, including one above the
/// online CPUs, placement, chunk, flags; a thread count above the eligible
/// CPUs of a node is reported at `mmap`, where the node is known), `EBUSY`
/// to change the parameters once mapped.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TkGigantic {
    pub threads: u32,
    pub placement: u32,
    pub chunk_kib: u32,
    pub flags: u32,
    pub last_elapsed_ns: u64,
    pub last_workers: u32,
    pub last_nid: i32,
    pub last_cpu_node: i32,
    pub nr_cleared: u32,
}

/// Switches the open file into gigantic mode. See [`TkGigantic`].
pub const TK_IOC_SET_GIGANTIC: u32 = iowr(4, core::mem::size_of::<TkGigantic>());

/// Most gigantic ranges one [`TK_IOC_CLEAR_BENCH`] call clears.
pub const TK_CLEAR_BENCH_MAX: u32 = 64;

/// Argument of [`TK_IOC_CLEAR_BENCH`]: allocate `nr_gigantic` 1 GiB ranges
/// on node `nid` one at a time, clear each with `threads` workers placed per
/// `placement`, free it, and report the clearing time. Allocation and
/// freeing are not timed; with [`TK_THREADS_AUTO`] a probe that is due
/// runs on the first range, is not timed either, and its choice is used for
/// every range.
/// No side effect on the system other than the time taken.
///
/// In: `nid`, `threads` (1..=eligible CPUs, or [`TK_THREADS_AUTO`]),
/// `placement`, `nr_gigantic` (1..=[`TK_CLEAR_BENCH_MAX`]), `chunk_kib`
/// (as in [`TkGigantic`]).
/// Out: `elapsed_ns` (sum over ranges), `bytes`, `mbps` (MB/s, 10^6
/// bytes/s), `workers` actually used, `cpu_node` whose CPUs ran the
/// workers (-1 for `any`), `variant` the NUL-terminated `clear_pages`
/// variant the kernel picked ("erms", "rep_good", "unrolled").
/// Needs `CAP_SYS_ADMIN`.
/// Errors: `EPERM` without it; `EINVAL` (node id out of range, offline or
/// memoryless node, bad thread count, placement, chunk or `nr_gigantic`,
/// `remote` without a remote node), `ENOMEM` (no free naturally aligned
/// GiB on the node), `EINTR` (a fatal signal during the clear).
/// With `init_on_alloc` on, the allocator zeroes each range first and the
/// benchmark still times tierkit's own clear.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TkClearBench {
    pub nid: i32,
    pub threads: u32,
    pub placement: u32,
    pub nr_gigantic: u32,
    pub chunk_kib: u32,
    pub workers: u32,
    pub cpu_node: i32,
    pub _pad: u32,
    pub elapsed_ns: u64,
    pub bytes: u64,
    pub mbps: u64,
    pub variant: [u8; 16],
}

/// Runs one clearing benchmark. See [`TkClearBench`].
pub const TK_IOC_CLEAR_BENCH: u32 = iowr(5, core::mem::size_of::<TkClearBench>());

/// [`TkWalk::level`]: nothing maps the address.
pub const TK_WALK_NONE: u32 = 0;
/// [`TkWalk::level`]: a PTE table covers the address (4 KiB pages, or
/// nothing yet; the entry is not read and `pfn` is 0).
pub const TK_WALK_PTE: u32 = 1;
/// [`TkWalk::level`]: a 2 MiB PMD leaf maps the address.
pub const TK_WALK_PMD: u32 = 2;
/// [`TkWalk::level`]: a 1 GiB PUD leaf maps the address.
pub const TK_WALK_PUD: u32 = 3;

/// Argument of [`TK_IOC_WALK`]: what maps `addr` in the caller's page
/// tables (a test tool: it proves that a gigantic GiB is one PUD leaf,
/// which `/proc/self/pagemap` cannot show: reading it zaps the PUD).
/// Needs `CAP_SYS_ADMIN` (it shows pfns). Independent of the file's state.
/// Test builds only (`make TIERKIT_TEST=1`, as xtask builds the module);
/// a plain build answers `ENOTTY`.
///
/// In: `addr`. Out: `level` (`TK_WALK_*`); for a PUD or PMD leaf `pfn`
/// of the 4 KiB page at `addr` and `nid` its node (else 0 and -1).
/// Errors: `EPERM`, `EFAULT` (no vma covers `addr`), `EINTR`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TkWalk {
    pub addr: u64,
    pub pfn: u64,
    pub level: u32,
    pub nid: i32,
}

/// Walks the caller's page tables at one address. See [`TkWalk`].
pub const TK_IOC_WALK: u32 = iowr(6, core::mem::size_of::<TkWalk>());

/// [`TkPageRefs::flags`]: the page is free in the buddy allocator (the
/// other fields are then 0).
pub const TK_PAGE_BUDDY: u32 = 1;
/// [`TkPageRefs::flags`]: the page belongs to an anonymous folio.
pub const TK_PAGE_ANON: u32 = 2;

/// Argument of [`TK_IOC_PAGE_REFS`]: who holds the folio of one pfn, a
/// test tool beside [`TK_IOC_WALK`] (it proves that a caller of
/// `get_user_pages()` gave back every reference it took, and that no page
/// of a tierkit range went back to the allocator while mapped). Needs
/// `CAP_SYS_ADMIN`. A snapshot: the folio may change right after. Test
/// builds only, as [`TK_IOC_WALK`].
///
/// In: `pfn`. Out: `refcount` (`folio_ref_count()`), `mapcount`
/// (`folio_mapcount()`: PTEs and rmap-counted PMD/PUD entries; a special
/// PUD counts none), `order` (`folio_order()`), `nid`, `flags`
/// (`TK_PAGE_*`). Errors: `EPERM`, `EINVAL` (no struct page for `pfn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TkPageRefs {
    pub pfn: u64,
    pub refcount: i32,
    pub mapcount: i32,
    pub order: u32,
    pub nid: i32,
    pub flags: u32,
    pub _pad: u32,
}

/// Reads the references of one pfn's folio. See [`TkPageRefs`].
pub const TK_IOC_PAGE_REFS: u32 = iowr(7, core::mem::size_of::<TkPageRefs>());

// ---------------------------------------------------------------------------
// Rebalancing a live mapping (owner: module/src/rebalance.rs)
// ---------------------------------------------------------------------------

/// [`TkRebalance::flags`]: count what would move, move nothing.
pub const TK_REBALANCE_F_DRY_RUN: u32 = 1 << 0;
/// [`TkRebalance::flags`]: `weights` is the file's new own weight table,
/// as `TK_POLICY_F_WEIGHTS` sets it (weighted mode; every node of the mask
/// 1..=255).
pub const TK_REBALANCE_F_WEIGHTS: u32 = 1 << 1;

/// Argument of [`TK_IOC_REBALANCE`]: move every 4 KiB page of the open
/// file's mappings whose node differs from the one the file's policy picks
/// for its ilx now, with the weights in force now (the file's own, or
/// tierkit's table, auto or manual), and, with a non-zero `nodemask`, the
/// file's policy narrowed or widened to that mask first (as
/// `TK_IOC_SET_POLICY` would set it: the requested mask ∩ N_MEMORY), and
/// with [`TK_REBALANCE_F_WEIGHTS`] the file's own weights set to `weights`
/// first. Later `TK_IOC_TASK_NEXT` and `TK_IOC_BULK` calls follow the new
/// policy too.
///
/// Each page is moved as an offline moves it: its PTEs are zapped under the
/// mapping's lock, its references frozen, its contents copied to a page on
/// the target node (charged to the old page's memory cgroup), and the new
/// page takes its place; the next touch faults it in. A write that races
/// with the move either lands before the zap, and is copied, or faults and
/// waits for the move, and lands in the new page: no write is lost.
///
/// A page that cannot move stays where it is and is counted: `no_memory`
/// (the target node, or the owner's memory cgroup, has no page to give),
/// `busy` (pinned for DMA, or a reference other than the mapping's is held).
/// The call is killable: on a fatal signal it stops with `EINTR` after the
/// page in hand, every page moved so far stays moved, and a later call
/// moves the rest and no page twice.
///
/// In: `flags` ([`TK_REBALANCE_F_DRY_RUN`], [`TK_REBALANCE_F_WEIGHTS`]),
/// `nodemask` (0: keep the file's), `rate_pages` (most misplaced pages
/// tried per second, moved or not, 0: no limit), `budget_pages` (most
/// pages this call moves, 0: no limit), `weights` (with
/// [`TK_REBALANCE_F_WEIGHTS`]).
/// Out: `looked` pages looked at, `misplaced` how many were off their
/// target node when looked at (the minimum to move), `moved`, `no_memory`,
/// `busy`, `elapsed_ns`, and `nodemask` the effective mask.
/// Errors: `EINVAL` for unknown flags, a file without a policy, a
/// `nodemask` with no node that has memory, or own weights for a file not
/// in weighted mode or with a zero weight in the mask; `EOPNOTSUPP` for a
/// file in gigantic mode (its 1 GiB ranges stay where they are); `EINTR`;
/// `ENOMEM` if the call cannot allocate its own list of the file's
/// mappings.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TkRebalance {
    pub flags: u32,
    pub rate_pages: u32,
    pub nodemask: u64,
    pub budget_pages: u64,
    pub weights: [u8; TIERKIT_MAX_NODES],
    pub looked: u64,
    pub misplaced: u64,
    pub moved: u64,
    pub no_memory: u64,
    pub busy: u64,
    pub elapsed_ns: u64,
}

impl Default for TkRebalance {
    fn default() -> Self {
        TkRebalance {
            flags: 0,
            rate_pages: 0,
            nodemask: 0,
            budget_pages: 0,
            weights: [0; TIERKIT_MAX_NODES],
            looked: 0,
            misplaced: 0,
            moved: 0,
            no_memory: 0,
            busy: 0,
            elapsed_ns: 0,
        }
    }
}

/// Moves a file's pages to the nodes its policy picks now. See
/// [`TkRebalance`].
pub const TK_IOC_REBALANCE: u32 = iowr(8, core::mem::size_of::<TkRebalance>());

// ---------------------------------------------------------------------------
// Copy-on-write for fork (owner: module/src/mapping/cow.rs)
// ---------------------------------------------------------------------------

/// Argument of [`TK_IOC_SNAPSHOT`], called on a new file (no policy or the
/// same as the source's, nothing mapped): a copy-on-write snapshot of the
/// caller's 4 KiB tierkit mappings at `addr..addr + len` (page aligned, at
/// most 1 GiB, one or more vmas whose file offsets follow on), for a
/// child the caller is about to fork. Every page gets a second holder, the
/// snapshot, and the caller's PTEs there are zapped: from then on neither
/// side's writes reach the other. The new file takes the source's policy.
/// The child maps the new file `MAP_SHARED` at the same file offset with
/// the same length (one `mmap` per snapshot; a file may hold several); that
/// `mmap` allocates nothing, and a write to a page either side still shares
/// copies it on the same node, charged to the writer's memory cgroup. The
/// snapshot reserves its full size of the global limit; a page that may be
/// pinned for DMA is copied at once. A snapshot no `mmap` took goes with
/// the file.
///
/// Errors: `EINVAL` for a bad range, an address that is not a 4 KiB
/// tierkit mapping (gigantic ones too), a hole, offsets that do not follow
/// on, a source with another policy, or a file already mapped; `ENOMEM`
/// past the global limit; `EINTR` on a fatal signal.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TkSnapshot {
    pub addr: u64,
    pub len: u64,
}

/// A copy-on-write snapshot for a fork. See [`TkSnapshot`].
pub const TK_IOC_SNAPSHOT: u32 = iowr(9, core::mem::size_of::<TkSnapshot>());

/// Argument of [`TK_IOC_MAPPED_FILE`]: a new file descriptor (the call's
/// return value, `O_CLOEXEC`) in the caller for the `/dev/tierkit` file
/// that process `pid` maps at `addr`: the same open file as that mapping's
/// (its policy, its pages), as `pidfd_getfd(2)` hands over an fd's, so
/// that [`TK_IOC_REBALANCE`] can move the pages of a process that holds
/// no descriptor of the file (tk-run's library closes each once mapped).
///
/// In: `pid` (any thread of the process, in the caller's pid namespace),
/// `flags` (0), `addr` (any address inside the mapping).
/// Out: `start`, `end` (the vma), `id` (the file's, the same for every
/// mapping of one open file and for no other open since the module was
/// loaded: every file shares the device inode, so `st_ino` cannot tell).
/// Errors: `EPERM` without `CAP_SYS_ADMIN`; `EINVAL` for non-zero flags
/// or a pid of 0 or less; `ESRCH` no such process, or it has no memory
/// any more (it exited); `ENOENT` nothing mapped at `addr`; `ENODEV` a
/// mapping that is not tierkit's; `EMFILE` no descriptor free; `EINTR` a
/// fatal signal while waiting for the process's `mmap_lock`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TkMappedFile {
    pub pid: i32,
    pub flags: u32,
    pub addr: u64,
    pub start: u64,
    pub end: u64,
    pub id: u64,
}

/// Opens the tierkit file another process maps at an address. See
/// [`TkMappedFile`].
pub const TK_IOC_MAPPED_FILE: u32 = iowr(10, core::mem::size_of::<TkMappedFile>());

// ---------------------------------------------------------------------------
// Per-socket weights (owner: module/src/wi/socket.rs)
// ---------------------------------------------------------------------------

/// [`TkSocketWeights::op`]: read the socket's table (and the caller's
/// socket, the socket's CPU nodes).
pub const TK_SOCKET_GET: u32 = 0;
/// [`TkSocketWeights::op`]: set the socket's table.
pub const TK_SOCKET_SET: u32 = 1;
/// [`TkSocketWeights::op`]: remove the socket's table (the socket falls
/// back to the flat weights).
pub const TK_SOCKET_CLEAR: u32 = 2;
/// [`TkSocketWeights::flags`]: the device-wide tables (needs
/// `CAP_SYS_ADMIN` to set or clear), not the open file's.
pub const TK_SOCKET_F_DEVICE: u32 = 1 << 0;
/// Most sockets a table can be set for: socket ids `0..TK_MAX_SOCKETS`.
pub const TK_MAX_SOCKETS: u32 = 8;

/// Argument of [`TK_IOC_SOCKET_WEIGHTS`]: one socket's weight table,
/// device-wide ([`TK_SOCKET_F_DEVICE`]) or the open file's. A socket is a
/// CPU package (`physical_package_id` of its CPUs). An allocation places
/// by the table of the socket of the CPU it runs on, restricted to the
/// nodes the table weighs above 0; see
/// Documentation/mm/weighted-interleave.md for which CPU counts on each
/// path and for the fallbacks.
///
/// In: `op` (`TK_SOCKET_*`), `flags`, `socket`; for [`TK_SOCKET_SET`]
/// `nr_nodes` (must be `nr_node_ids`) and `weights[0..nr_nodes]` (0..=255,
/// 0: not a candidate from this socket; non-zero only on nodes with memory;
/// not all 0). Out (every op): `nr_nodes` = `nr_node_ids`, `cpu_nodes` the
/// socket's CPU nodes, `this_socket` the caller's socket at the call,
/// `has_table` 1 if the socket has a table at that level, and `weights`
/// the table (zeros without one).
/// Errors: `EINVAL` for an unknown op or flag, a size mismatch (`nr_nodes`
/// not `nr_node_ids`, or a weight past it) or a table of all zeros;
/// `ENOENT` for a socket with no online CPU or `>= TK_MAX_SOCKETS`;
/// `ENXIO` for a weight on a node without memory; `EPERM` to change the
/// device-wide tables without `CAP_SYS_ADMIN`; `EBUSY` to change a file's
/// tables once it is mapped.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TkSocketWeights {
    pub op: u32,
    pub flags: u32,
    pub socket: u32,
    pub nr_nodes: u32,
    pub cpu_nodes: u64,
    pub this_socket: i32,
    pub has_table: u32,
    pub weights: [u8; TIERKIT_MAX_NODES],
}

impl Default for TkSocketWeights {
    fn default() -> Self {
        TkSocketWeights {
            op: TK_SOCKET_GET,
            flags: 0,
            socket: 0,
            nr_nodes: 0,
            cpu_nodes: 0,
            this_socket: -1,
            has_table: 0,
            weights: [0; TIERKIT_MAX_NODES],
        }
    }
}

/// Reads or sets one socket's weight table. See [`TkSocketWeights`].
pub const TK_IOC_SOCKET_WEIGHTS: u32 = iowr(11, core::mem::size_of::<TkSocketWeights>());

// The layouts are the ABI, and the module's `FromBytes`/`AsBytes` impls
// (module/src/dev.rs) rely on them having no padding: each size below is
// the sum of the field sizes, checked at compile time in the kernel build
// and on the host alike. `include/uapi/linux/tierkit.h` mirrors them
// (module/core/tests/uapi_header.rs compares the two).
const _: () = assert!(core::mem::size_of::<TkPolicy>() == 80); // 4 + 4 + 8 + 64
const _: () = assert!(core::mem::size_of::<TkBulk>() == 528); // 8 + 512 + 4 + 4
const _: () = assert!(core::mem::size_of::<TkTaskNext>() == 264); // 4 + 4 + 256
const _: () = assert!(core::mem::size_of::<TkGigantic>() == 40); // 4 * 4 + 8 + 4 * 4
const _: () = assert!(core::mem::size_of::<TkClearBench>() == 72); // 8 * 4 + 3 * 8 + 16
const _: () = assert!(TK_IOC_SET_POLICY == 0xc050_b901);
const _: () = assert!(TK_IOC_BULK == 0xc210_b902);
const _: () = assert!(TK_IOC_TASK_NEXT == 0xc108_b903);
const _: () = assert!(TK_IOC_SET_GIGANTIC == 0xc028_b904);
const _: () = assert!(TK_IOC_CLEAR_BENCH == 0xc048_b905);
const _: () = assert!(core::mem::size_of::<TkWalk>() == 24); // 8 + 8 + 4 + 4
const _: () = assert!(TK_IOC_WALK == 0xc018_b906);
const _: () = assert!(core::mem::size_of::<TkPageRefs>() == 32); // 8 + 6 * 4
const _: () = assert!(TK_IOC_PAGE_REFS == 0xc020_b907);
const _: () = assert!(core::mem::size_of::<TkRebalance>() == 136); // 4 + 4 + 2 * 8 + 64 + 6 * 8
const _: () = assert!(TK_IOC_REBALANCE == 0xc088_b908);
const _: () = assert!(core::mem::size_of::<TkSnapshot>() == 16); // 2 * 8
const _: () = assert!(TK_IOC_SNAPSHOT == 0xc010_b909);
const _: () = assert!(core::mem::size_of::<TkMappedFile>() == 40); // 4 + 4 + 4 * 8
const _: () = assert!(TK_IOC_MAPPED_FILE == 0xc028_b90a);
const _: () = assert!(core::mem::size_of::<TkSocketWeights>() == 96); // 4 * 4 + 8 + 2 * 4 + 64
const _: () = assert!(TK_IOC_SOCKET_WEIGHTS == 0xc060_b90b);

#[cfg(test)]
mod clear_abi_tests {
    use super::*;

    #[test]
    fn clear_structs_have_stable_sizes() {
        assert_eq!(core::mem::size_of::<TkGigantic>(), 40);
        assert_eq!(core::mem::size_of::<TkClearBench>(), 72);
        assert_eq!(TK_IOC_SET_GIGANTIC, 0xc028_b904);
        assert_eq!(TK_IOC_CLEAR_BENCH, 0xc048_b905);
    }
}
