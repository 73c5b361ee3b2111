// SPDX-License-Identifier: GPL-2.0

//! The state of the whole device: what `/dev/tierkit`'s files, the debugfs
//! files and the memory notifier share.
//!
//! [`DeviceState`] owns the weight table ([`Wi`], weighted-interleave
//! policy), the page statistics and limits ([`Stats`]), the registry of
//! live mappings ([`Registry`], for the memory notifier in
//! [`crate::mapping`]) and the pre-cleared gigantic pool
//! ([`GiganticPool`]). It is built once at module load; KUnit tests build
//! their own.
//!
//! The parts know nothing of the whole: `wi` and `clear` do not import
//! this module, and `mapping` and `pages` reach the parts through it.

use crate::chunks::GIGANTIC_PAGES;
use crate::clear::ready::GiganticPool;
use crate::debugfs::{DebugfsDir, DebugfsFile};
use crate::interleave::MAX_NUMNODES;
use crate::shim::node::possible_nodes;
use crate::wi::Wi;
use kernel::{
    bindings,
    ffi::c_void,
    fmt, new_condvar, new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, CondVar, Mutex,
    },
    types::Opaque,
};

/// The device's state (see the module docs).
#[pin_data]
pub(crate) struct DeviceState {
    /// The weight table.
    pub(crate) wi: Arc<Wi>,
    /// Per-node page counts and the global limit.
    pub(crate) stats: Stats,
    /// The pages of every live mapping, for the memory notifier.
    #[pin]
    pub(crate) mappings: Registry,
    /// The pre-cleared 1 GiB ranges gigantic faults take from.
    pub(crate) pool: Arc<GiganticPool>,
}

impl DeviceState {
    /// The initial state: the weight table as the kernel's at boot
    /// ([`Wi::new`]), no pages, no mappings, an empty pool of 1 GiB ranges.
    ///
    /// Errors: `ENOMEM`.
    pub(crate) fn new() -> Result<Arc<Self>> {
        let wi = Arc::pin_init(Wi::new(), GFP_KERNEL)?;
        let pool = Arc::pin_init(GiganticPool::new(GIGANTIC_PAGES, false), GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(DeviceState {
                wi,
                stats: Stats::new(),
                mappings <- Registry::new(),
                pool,
            }),
            GFP_KERNEL,
        )
    }
}

/// Every live mapping's [`crate::mapping::Backing`], by address, for the
/// memory notifier: an xarray indexed by a registration id (ids grow and
/// are never reused), so adding and removing a mapping cost O(log n) and a
/// walk can drop the lock between mappings and resume after the last id it
/// visited.
///
/// # Invariants
///
/// - `xa` is an initialized xarray. Every entry in it is the address of a
///   live, pinned `Backing`: only [`Registry::add`] puts one in, and its
///   caller guarantees that the backing calls [`Registry::remove`] before
///   it is freed. So whoever holds `inner`'s lock may dereference every
///   entry it reads.
/// - While `inner.visiting` is a backing's id, a walker uses that backing
///   without the lock, and [`Registry::remove`] of that id waits until
///   the walker is done with it, so the backing is alive meanwhile.
#[pin_data(PinnedDrop)]
pub(crate) struct Registry {
    #[pin]
    xa: Opaque<bindings::xarray>,
    /// The next id, and the id a walker is using (0: none).
    #[pin]
    inner: Mutex<RegistryIds>,
    /// Signalled when a walker is done with a backing.
    #[pin]
    visited: CondVar,
    /// One walker at a time (offlines are serialized by the kernel's
    /// `mem_hotplug_lock` already; KUnit callers are not).
    #[pin]
    walk: Mutex<()>,
}

/// The ids of a [`Registry`].
pub(crate) struct RegistryIds {
    next: u64,
    visiting: u64,
}

// SAFETY: the xarray is only used through its own locking (and `inner`'s),
// from any thread.
unsafe impl Send for Registry {}
// SAFETY: as above.
unsafe impl Sync for Registry {}

impl Registry {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Registry {
            // SAFETY: `xa` is valid while the closure is called.
            xa <- Opaque::ffi_init(|xa| unsafe { bindings::xa_init_flags(xa, 0) }),
            inner <- new_mutex!(RegistryIds { next: 1, visiting: 0 }, "tierkit_backings"),
            visited <- new_condvar!("tierkit_backings_visited"),
            walk <- new_mutex!((), "tierkit_backings_walk"),
        })
    }

    /// Registers the backing at `addr` and runs `then` with its id, with
    /// the lock still held (so that no walker sees the backing before
    /// `then` has marked it registered). The id is what [`Registry::remove`]
    /// takes.
    ///
    /// # Safety
    ///
    /// `addr` is the address of a pinned `Backing` that stays alive until
    /// it has called [`Registry::remove`] with the id given to `then`.
    pub(crate) unsafe fn add(&self, addr: usize, then: impl FnOnce(u64)) -> Result {
        let mut ids = self.inner.lock();
        let id = ids.next;
        // SAFETY: `xa` is initialized (type invariant); a backing's address
        // is aligned, so it is a pointer entry, not a value entry.
        let old = unsafe {
            bindings::xa_store(
                self.xa.get(),
                id as usize,
                addr as *mut c_void,
                bindings::GFP_KERNEL,
            )
        };
        // SAFETY: `old` is what xa_store() returned.
        kernel::error::to_result(unsafe { bindings::xa_err(old) })?;
        ids.next += 1;
        then(id);
        Ok(())
    }

    /// Removes the backing of id `id`; it is not looked at again after this
    /// returns (a walker using it is waited for).
    pub(crate) fn remove(&self, id: u64) {
        let mut ids = self.inner.lock();
        // SAFETY: `xa` is initialized (type invariant).
        unsafe { bindings::xa_erase(self.xa.get(), id as usize) };
        while ids.visiting == id {
            self.visited.wait(&mut ids);
        }
    }

    /// Runs `f` on every registered backing's address, in id order, without
    /// the lock: each is alive until `f` has returned for it (type
    /// invariant). A backing registered during the walk may be skipped; its
    /// pages were allocated before the walk began or are outside what the
    /// walker looks for (the memory notifier's range is isolated).
    pub(crate) fn for_each(&self, mut f: impl FnMut(usize) -> Result) -> Result {
        let _one = self.walk.lock();
        let mut index = 0usize;
        loop {
            let addr = {
                let mut ids = self.inner.lock();
                // SAFETY: `xa` is initialized (type invariant).
                let p = unsafe {
                    bindings::xa_find(self.xa.get(), &mut index, usize::MAX, bindings::XA_PRESENT)
                };
                if p.is_null() {
                    return Ok(());
                }
                // INVARIANT: `remove` of this id now waits for us.
                ids.visiting = index as u64;
                p as usize
            };
            let res = f(addr);
            self.inner.lock().visiting = 0;
            self.visited.notify_all();
            res?;
            index = index.checked_add(1).ok_or(EOVERFLOW)?;
        }
    }
}

#[pinned_drop]
impl PinnedDrop for Registry {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: `xa` is initialized; its entries are not owned (every
        // backing removed itself before the state it holds could drop).
        unsafe { bindings::xa_destroy(self.xa.get()) };
    }
}

/// The device-wide read-only files `stats` and `limits` in the debugfs
/// root. Documented in `Documentation/ABI/testing/debugfs-tierkit`.
pub(crate) struct StatsFiles {
    _stats: DebugfsFile<Arc<DeviceState>>,
    _limits: DebugfsFile<Arc<DeviceState>>,
}

impl StatsFiles {
    /// Creates `stats` and `limits` (mode 0400) under `root`.
    pub(crate) fn new(root: &DebugfsDir, state: &Arc<DeviceState>) -> Result<Self> {
        let stats = root.file(c"stats", 0o400, state.clone(), stats_show, None)?;
        let limits = root.file(c"limits", 0o400, state.clone(), limits_show, None)?;
        Ok(StatsFiles {
            _stats: stats,
            _limits: limits,
        })
    }
}

fn stats_show(state: &Arc<DeviceState>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    state.stats.show(f, &state.pool)
}

fn limits_show(state: &Arc<DeviceState>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    state.stats.show_limits(f, &state.pool)
}

/// Pages allocated per node: cumulative, and currently owned by open files;
/// and the global limit on what open files may hold.
pub(crate) struct Stats {
    allocated: [Atomic<u64>; MAX_NUMNODES],
    held: [Atomic<u64>; MAX_NUMNODES],
    /// 1 GiB ranges held by files in gigantic mode, per node.
    gigantic: [Atomic<u64>; MAX_NUMNODES],
    /// 4 KiB pages reserved by open files (a gigantic range counts
    /// 2^18), against `global_pages`.
    reserved: Atomic<u64>,
    /// Gigantic faults that failed (SIGBUS for that GiB), cumulative.
    gigantic_fault_failed: Atomic<u64>,
    /// The most 4 KiB pages all files together may hold: 3/4 of RAM.
    global_pages: u64,
}

/// Pages one file holds at most in 4 KiB mode (`MAX_FILE_PAGES`, dev.rs).
pub(crate) const FILE_PAGES: u64 = 1 << 18;
/// 1 GiB ranges one file holds at most in gigantic mode.
pub(crate) const FILE_GIGANTIC: u64 = 64;

/// A share of the global limit, taken by [`Stats::reserve`] before a
/// mapping allocates and given back on drop (when the file lets go of its
/// pages, or when the mapping fails).
pub(crate) struct Reservation {
    state: Arc<DeviceState>,
    pages: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.state.stats.reserved.fetch_sub(self.pages, Relaxed);
    }
}

impl Stats {
    fn new() -> Self {
        // SAFETY: no precondition.
        let total = unsafe { crate::shim::tk_totalram_pages() } as u64;
        Stats {
            allocated: core::array::from_fn(|_| Atomic::new(0)),
            held: core::array::from_fn(|_| Atomic::new(0)),
            gigantic: core::array::from_fn(|_| Atomic::new(0)),
            reserved: Atomic::new(0),
            gigantic_fault_failed: Atomic::new(0),
            global_pages: total / 4 * 3,
        }
    }

    /// Reserves `pages` 4 KiB pages of the global limit for `state`'s
    /// files.
    ///
    /// Errors: `ENOMEM` if all files together would hold more than the
    /// limit (nothing is reserved then).
    pub(crate) fn reserve(state: &Arc<DeviceState>, pages: u64) -> Result<Reservation> {
        let s = &state.stats;
        let mut cur = s.reserved.load(Relaxed);
        loop {
            let new = cur.checked_add(pages).ok_or(ENOMEM)?;
            if new > s.global_pages {
                return Err(ENOMEM);
            }
            match s.reserved.cmpxchg(cur, new, Relaxed) {
                Ok(_) => {
                    return Ok(Reservation {
                        state: state.clone(),
                        pages,
                    })
                }
                Err(seen) => cur = seen,
            }
        }
    }

    /// Counts a 1 GiB range on `nid` held (`true`) or given back.
    pub(crate) fn gigantic(&self, nid: usize, held: bool) {
        if let Some(g) = self.gigantic.get(nid) {
            if held {
                g.add(1, Relaxed);
            } else {
                g.fetch_sub(1, Relaxed);
            }
        }
    }

    /// Counts a gigantic fault that failed (the task got SIGBUS).
    pub(crate) fn gigantic_fault_failed(&self) {
        self.gigantic_fault_failed.add(1, Relaxed);
    }

    /// The `limits` file: `KEY VALUE` lines; `gigantic_fault_failed` is
    /// the cumulative number of gigantic faults that ended in SIGBUS,
    /// `gigantic_cow_copies` of GiBs a write copied after a fork's
    /// snapshot, `gigantic_cow_spares` the spare GiBs held now for such
    /// copies (`crate::mapping::gib`),
    /// `gigantic_pool_taken` of faults served from `pool`'s ready ranges,
    /// `gigantic_pool_shrunk` of ranges its shrinker gave back,
    /// `gigantic_pool_filling` the refills under way, `orphans` of pages
    /// (or 1 GiB folios) in ZONE_MOVABLE tierkit keeps because another
    /// holder still has them (`crate::pages::movable`).
    pub(crate) fn show_limits(
        &self,
        f: &mut fmt::Formatter<'_>,
        pool: &GiganticPool,
    ) -> fmt::Result {
        writeln!(f, "file_pages {FILE_PAGES}")?;
        writeln!(f, "file_gigantic {FILE_GIGANTIC}")?;
        writeln!(f, "global_pages {}", self.global_pages)?;
        writeln!(f, "held_pages {}", self.reserved.load(Relaxed))?;
        writeln!(
            f,
            "gigantic_fault_failed {}",
            self.gigantic_fault_failed.load(Relaxed)
        )?;
        writeln!(
            f,
            "gigantic_cow_copies {}",
            crate::mapping::COW_COPIES.load(Relaxed)
        )?;
        writeln!(
            f,
            "gigantic_cow_spares {}",
            crate::mapping::COW_SPARES.load(Relaxed)
        )?;
        writeln!(f, "gigantic_pool_taken {}", pool.taken())?;
        writeln!(f, "gigantic_pool_shrunk {}", pool.shrunk())?;
        writeln!(f, "gigantic_pool_filling {}", pool.filling())?;
        writeln!(f, "orphans {}", crate::pages::movable::orphans())
    }

    /// Counts `n` pages allocated on `nid`; `held` if a file keeps them.
    pub(crate) fn add(&self, nid: usize, n: u64, held: bool) {
        if let Some(a) = self.allocated.get(nid) {
            a.add(n, Relaxed);
        }
        if held {
            if let Some(h) = self.held.get(nid) {
                h.add(n, Relaxed);
            }
        }
    }

    /// Counts `n` held pages of `nid` given back.
    pub(crate) fn release(&self, nid: usize, n: u64) {
        if let Some(h) = self.held.get(nid) {
            h.fetch_sub(n, Relaxed);
        }
    }

    /// Cumulative pages allocated on `nid`.
    pub(crate) fn allocated(&self, nid: usize) -> u64 {
        self.allocated.get(nid).map_or(0, |a| a.load(Relaxed))
    }

    /// Pages of `nid` currently held by open files.
    pub(crate) fn held(&self, nid: usize) -> u64 {
        self.held.get(nid).map_or(0, |h| h.load(Relaxed))
    }

    /// 1 GiB ranges of `nid` currently held by files in gigantic mode.
    pub(crate) fn gigantic_held(&self, nid: usize) -> u64 {
        self.gigantic.get(nid).map_or(0, |g| g.load(Relaxed))
    }

    /// The `stats` file: a header, then "NID ALLOCATED HELD GIGANTIC POOL"
    /// per node (POOL: `pool`'s ready 1 GiB ranges of the node).
    pub(crate) fn show(&self, f: &mut fmt::Formatter<'_>, pool: &GiganticPool) -> fmt::Result {
        writeln!(f, "node allocated held gigantic pool")?;
        for nid in 0..possible_nodes() {
            writeln!(
                f,
                "{} {} {} {} {}",
                nid,
                self.allocated(nid),
                self.held(nid),
                self.gigantic_held(nid),
                pool.ready(nid)
            )?;
        }
        Ok(())
    }
}
