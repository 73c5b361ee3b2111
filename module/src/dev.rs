// SPDX-License-Identifier: GPL-2.0

//! `/dev/tierkit`: a misc device whose open files carry a placement policy
//! and hand out pages placed by it. The ABI (ioctls in
//! `module/core/src/uapi.rs`, mmap) is documented in
//! `Documentation/ABI/testing/dev-tierkit`.

use crate::chunks::GIGANTIC_PAGES;
use crate::clear::{self, gigantic::GiganticMode};
use crate::interleave::{self, TaskState, MAX_NUMNODES};
use crate::mapping::cow::Snapshot;
use crate::mapping::{Backing, BackingPages, GiganticPlan, GiganticRanges};
use crate::placed;
use crate::shim;
use crate::state::{DeviceState, Stats, FILE_GIGANTIC, FILE_PAGES};
use crate::sync::{resched_killable, KillableMutex};
use crate::uapi::{
    self, TkBulk, TkClearBench, TkGigantic, TkMappedFile, TkPageRefs, TkPolicy, TkRebalance,
    TkSocketWeights, TkTaskNext, TkWalk,
};
use crate::wi::socket::{self, Caller};
use crate::wi::{Mode, Policy};
use core::ptr::NonNull;
use kernel::{
    bindings, container_of,
    error::to_result,
    ffi::{c_int, c_ulong, c_void},
    fs::{file::FileDescriptorReservation, File},
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    mm::virt::{flags as vm_flags, VmaMixedMap, VmaNew},
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    static_lock_class,
    sync::atomic::{Atomic, Relaxed},
    sync::{aref::ARef, Arc},
    transmute::{AsBytes, FromBytes},
    uaccess::UserSlice,
};

// SAFETY: `TkPolicy` is `repr(C)` with only integer fields and no padding
// (4 + 4 + 8 + 64 bytes): every bit pattern is valid.
unsafe impl FromBytes for TkPolicy {}
// SAFETY: as above, no padding and no interior mutability.
unsafe impl AsBytes for TkPolicy {}
// SAFETY: `repr(C)`, integers only, no padding (8 + 512 + 4 + 4 bytes).
unsafe impl FromBytes for TkBulk {}
// SAFETY: as above.
unsafe impl AsBytes for TkBulk {}
// SAFETY: `repr(C)`, integers only, no padding (4 + 4 + 256 bytes).
unsafe impl FromBytes for TkTaskNext {}
// SAFETY: as above.
unsafe impl AsBytes for TkTaskNext {}
// SAFETY: `repr(C)`, integers only, no padding (uapi.rs checks the size).
unsafe impl FromBytes for TkGigantic {}
// SAFETY: as above.
unsafe impl AsBytes for TkGigantic {}
// SAFETY: `repr(C)`, integers and a byte array, no padding (uapi.rs).
unsafe impl FromBytes for TkClearBench {}
// SAFETY: as above.
unsafe impl AsBytes for TkClearBench {}
// SAFETY: `repr(C)`, integers only, no padding (8 + 8 + 4 + 4, uapi.rs).
unsafe impl FromBytes for TkWalk {}
// SAFETY: as above.
unsafe impl AsBytes for TkWalk {}
// SAFETY: `repr(C)`, integers only, no padding (8 + 6 * 4, uapi.rs).
unsafe impl FromBytes for TkPageRefs {}
// SAFETY: as above.
unsafe impl AsBytes for TkPageRefs {}
// SAFETY: `repr(C)`, integers and a byte array, no padding (uapi.rs).
unsafe impl FromBytes for TkRebalance {}
// SAFETY: `repr(C)`, integers only, no padding (4 + 4 + 4 * 8, uapi.rs).
unsafe impl FromBytes for TkMappedFile {}
// SAFETY: as above.
unsafe impl AsBytes for TkMappedFile {}
// SAFETY: as above.
unsafe impl AsBytes for TkRebalance {}

mod snapshot;

/// The most 4 KiB pages one open file holds (1 GiB): a single `mmap` above
/// it is `EINVAL`, one that would take the file past it is `ENOMEM`.
pub(crate) const MAX_FILE_PAGES: usize = FILE_PAGES as usize;

/// The most gigantic pages (1 GiB each) one open file maps in gigantic mode.
pub(crate) const MAX_FILE_GIGANTIC: usize = FILE_GIGANTIC as usize;

/// The most pages one `TK_IOC_BULK` call allocates (4 GiB).
pub(crate) const MAX_BULK_PAGES: u64 = 1 << 20;

/// `EPERM` unless the caller has `CAP_SYS_ADMIN`: gigantic mode and the
/// clear benchmark take 1 GiB unmovable ranges, which no memory cgroup is
/// charged for (`alloc_contig_pages()` refuses `__GFP_ACCOUNT`).
fn require_sys_admin() -> Result {
    // SAFETY: no precondition.
    if unsafe { bindings::capable(bindings::CAP_SYS_ADMIN as c_int) } {
        Ok(())
    } else {
        Err(EPERM)
    }
}

/// The registered device and the state its files share.
///
/// # Invariants
///
/// Every `MiscDeviceRegistration<TkFile>` is the `reg` field of a `TkDevice`
/// (this is the only place that creates one), so `TkFile::open` can get back
/// to the `TkDevice` from the registration.
#[pin_data]
pub(crate) struct TkDevice {
    device: Arc<DeviceState>,
    #[pin]
    reg: MiscDeviceRegistration<TkFile>,
}

impl TkDevice {
    /// Registers `/dev/tierkit`, whose files share `device`.
    pub(crate) fn new(device: Arc<DeviceState>) -> impl PinInit<Self, Error> {
        try_pin_init!(TkDevice {
            // `device` is initialized before the device is registered, so
            // an early open() finds it.
            device,
            reg <- MiscDeviceRegistration::register(MiscDeviceOptions { name: c"tierkit" }),
        })
    }
}

/// What an open file has: policy, task state, pages.
struct FileState {
    /// Set by `TK_IOC_SET_POLICY`; `None` until then.
    policy: Option<Policy>,
    /// `il_prev`/`il_weight` for the task and bulk paths.
    task: TaskState,
    /// Set by the first successful `mmap`; the policy is fixed from then on.
    mapped: bool,
    /// The pages of every successful mapping, freed when the file is
    /// released. Boxed and pinned: a vma points at its `Backing`.
    mappings: KVec<Pin<KBox<Backing>>>,
    /// 4 KiB pages in `mappings` (4 KiB mode).
    nr_pages: usize,
    /// Gigantic mode (`TK_IOC_SET_GIGANTIC`): its parameters and counters.
    gigantic: Option<GiganticMode>,
    /// `TK_IOC_SNAPSHOT`s waiting for the child's `mmap` of this file.
    snapshots: KVec<Snapshot>,
    /// A snapshot's file: each `mmap` takes one, its vmas copy on write.
    cow: bool,
    /// The file's own per-socket tables (`TK_IOC_SOCKET_WEIGHTS`).
    sockets: crate::socket::SocketWeights,
}

/// An open `/dev/tierkit`.
///
/// Its state is behind a killable mutex: a task waiting for another's long
/// `TK_IOC_BULK` or `mmap` on the same file can be killed.
#[pin_data]
pub(crate) struct TkFile {
    device: Arc<DeviceState>,
    #[pin]
    state: KillableMutex<FileState>,
    /// Held for the whole of a `TK_IOC_REBALANCE`: two at once on one file
    /// would move pages back and forth between their policies.
    #[pin]
    rebalancing: KillableMutex<()>,
    /// Whether the file is in gigantic mode (`state.gigantic.is_some()`),
    /// readable without the lock by `tk_file_gigantic` (get_unmapped_area).
    gigantic: Atomic<bool>,
}

impl TkFile {
    /// `TK_IOC_SET_POLICY`.
    fn set_policy(&self, arg: usize) -> Result<isize> {
        let (mut reader, mut writer) =
            UserSlice::new(UserPtr::from_addr(arg), size_of::<TkPolicy>()).reader_writer();
        let mut p: TkPolicy = reader.read()?;
        // User memory is only touched outside the file's lock: mmap() takes
        // the lock under mmap_lock, and a fault here takes mmap_lock.
        {
            let mut st = self.state.lock()?;
            if st.mapped {
                return Err(EBUSY);
            }
            let policy = Policy::new(p.mode, p.flags, p.nodemask, &p.weights)?;
            st.policy = Some(policy);
            // do_set_mempolicy(): a new (weighted) interleave policy starts
            // before the first node.
            st.task = TaskState::new();
            p.nodemask = policy.mask.0;
            p.weights = policy.weights(|| self.device.wi.weights()).effective();
        }
        writer.write(&p)?;
        Ok(0)
    }

    /// The policy if it is weighted interleave, else `EINVAL`.
    fn weighted_policy(st: &FileState) -> Result<Policy> {
        match st.policy {
            Some(p) if p.mode == Mode::Weighted => Ok(p),
            _ => Err(EINVAL),
        }
    }

    /// `TK_IOC_TASK_NEXT`.
    fn task_next(&self, arg: usize) -> Result<isize> {
        let (mut reader, mut writer) =
            UserSlice::new(UserPtr::from_addr(arg), size_of::<TkTaskNext>()).reader_writer();
        let mut t: TkTaskNext = reader.read()?;
        let count = t.count as usize;
        if count == 0 || count > uapi::TK_TASK_NEXT_MAX {
            return Err(EINVAL);
        }
        {
            let mut st = self.state.lock()?;
            let policy = Self::weighted_policy(&st)?;
            let (mask, weights) = policy.placement(&st.sockets, &self.device.wi, Caller::current());
            for slot in t.nodes.iter_mut().take(count) {
                let nid = st.task.next(mask, &weights).ok_or(EINVAL)?;
                *slot = nid as u8;
            }
        }
        writer.write(&t)?;
        Ok(0)
    }

    /// `TK_IOC_BULK`.
    fn bulk(&self, arg: usize) -> Result<isize> {
        let (mut reader, mut writer) =
            UserSlice::new(UserPtr::from_addr(arg), size_of::<TkBulk>()).reader_writer();
        let mut b: TkBulk = reader.read()?;
        if b.nr_pages == 0 || b.nr_pages > MAX_BULK_PAGES {
            return Err(EINVAL);
        }
        {
            let mut st = self.state.lock()?;
            let policy = Self::weighted_policy(&st)?;
            let (mask, weights) = policy.placement(&st.sockets, &self.device.wi, Caller::current());
            let mut per_node = [0u64; MAX_NUMNODES];
            let mut task = st.task;
            placed::bulk(
                &self.device,
                mask,
                &weights,
                &mut task,
                b.nr_pages,
                &mut per_node,
            )?;
            st.task = task;
            b.per_node = per_node;
            b.il_prev = task.il_prev();
            b.il_weight = u32::from(task.il_weight());
        }
        writer.write(&b)?;
        Ok(0)
    }

    /// `TK_IOC_REBALANCE`: see `crate::rebalance`. The file's lock is held
    /// only to read and set its policy and to list its mappings; the pages
    /// are moved without it, so the file's other calls are not held up.
    /// One rebalance of a file at a time (a second waits, interruptibly:
    /// on a signal it returns `ERESTARTSYS` having done nothing).
    fn rebalance(&self, arg: usize) -> Result<isize> {
        let (mut reader, mut writer) =
            UserSlice::new(UserPtr::from_addr(arg), size_of::<TkRebalance>()).reader_writer();
        let mut r: TkRebalance = reader.read()?;
        let req = crate::rebalance::Request::new(&r)?;
        let dry_run = r.flags & uapi::TK_REBALANCE_F_DRY_RUN != 0;
        let _one_at_a_time = self.rebalancing.lock_interruptible()?;
        let (sel, backings) = {
            let mut st = self.state.lock()?;
            if st.gigantic.is_some() {
                return Err(EOPNOTSUPP);
            }
            let mut policy = st.policy.ok_or(EINVAL)?;
            if r.nodemask != 0 {
                policy.mask = interleave::effective_nodemask(
                    interleave::Nodemask(r.nodemask),
                    crate::wi::allowed_memory_nodes(),
                )?;
            }
            // New weights are the file's whole placement: its own
            // per-socket tables, which beat its flat weights, go too.
            let mut tables = st.sockets;
            if r.flags & uapi::TK_REBALANCE_F_WEIGHTS != 0 {
                policy = policy.with_own_weights(&r.weights)?;
                tables = crate::socket::SocketWeights::new();
            }
            let sel = policy.placed_selector(&tables, &self.device.wi, Caller::current())?;
            if !dry_run && (st.policy != Some(policy) || st.sockets != tables) {
                (st.policy, st.sockets) = (Some(policy), tables);
                // As TK_IOC_SET_POLICY: the task path starts afresh.
                st.task = TaskState::new();
            }
            r.nodemask = policy.mask.0;
            let mut backings: KVec<*const Backing> =
                KVec::with_capacity(st.mappings.len(), GFP_KERNEL)?;
            for b in st.mappings.iter() {
                backings.push(core::ptr::from_ref::<Backing>(b), GFP_KERNEL)?;
            }
            (sel, backings)
        };
        let refs: KVec<&Backing> = {
            let mut v = KVec::with_capacity(backings.len(), GFP_KERNEL)?;
            for &b in backings.iter() {
                // SAFETY: every pointer is to a pinned `Backing` in this
                // file's `mappings`, which only ever grows while the file is
                // open and is dropped at release; the ioctl holds a
                // reference to the file, so it is not released before this
                // call returns.
                v.push(unsafe { &*b }, GFP_KERNEL)?;
            }
            v
        };
        let res = crate::rebalance::run(&refs, |ilx| sel.node_for_ilx(ilx), &req, &mut r);
        if res.is_err() {
            pr_debug!(
                "rebalance stopped by a signal after {} of {} misplaced pages moved\n",
                r.moved,
                r.misplaced
            );
        }
        // Stopped by a signal, the counters still say what this call did
        // (the caller sees them after EINTR; a restarted call starts over).
        writer.write(&r)?;
        res?;
        Ok(0)
    }

    /// `TK_IOC_SOCKET_WEIGHTS`: see `wi::socket`.
    fn socket_weights(&self, arg: usize) -> Result<isize> {
        let (mut reader, mut writer) =
            UserSlice::new(UserPtr::from_addr(arg), size_of::<TkSocketWeights>()).reader_writer();
        let mut a: TkSocketWeights = reader.read()?;
        {
            let mut st = self.state.lock()?;
            let mapped = st.mapped;
            let (wi, tables) = (&self.device.wi, &mut st.sockets);
            socket::socket_weights_ioctl(&mut a, wi, tables, mapped, require_sys_admin)?;
        }
        writer.write(&a)?;
        Ok(0)
    }

    /// `TK_IOC_SET_GIGANTIC`: see `clear::gigantic::set_gigantic_ioctl`.
    fn set_gigantic(&self, arg: usize) -> Result<isize> {
        let (mut reader, mut writer) =
            UserSlice::new(UserPtr::from_addr(arg), size_of::<TkGigantic>()).reader_writer();
        let mut g: TkGigantic = reader.read()?;
        if g.flags != uapi::TK_GIGANTIC_F_QUERY {
            require_sys_admin()?;
        }
        {
            let mut st = self.state.lock()?;
            let mapped = st.mapped;
            clear::gigantic::set_gigantic_ioctl(&mut st.gigantic, mapped, &mut g)?;
            self.gigantic.store(st.gigantic.is_some(), Relaxed);
        }
        writer.write(&g)?;
        Ok(0)
    }

    /// `mmap` in gigantic mode: checks every argument and limit and
    /// reserves; nothing is allocated or mapped. GiB `i` of the mapping
    /// will be a cleared 1 GiB range on the node the policy picks now for
    /// `ilx = (pgoff >> 18) + i` (`get_vma_policy()` shifts both parts of
    /// the ilx by the folio order, 18 for 1 GiB), made and mapped by one
    /// PUD at its first touch (`mapping::tk_gigantic_map_pud`).
    ///
    /// Errors: `EINVAL` for a length that is not a whole number of GiB
    /// (or above 64 GiB), a file offset or start address that is not GiB
    /// aligned (`MAP_FIXED`), no gigantic mode, a node the placement
    /// cannot serve; `ENOMEM` past the file's or the global limit.
    fn mmap_gigantic(
        &self,
        st: &mut FileState,
        vma: &VmaNew,
        policy: Policy,
        pgoff: u64,
        nr_pages: usize,
        mapping: *mut bindings::address_space,
    ) -> Result<(Pin<KBox<Backing>>, bool)> {
        let per_range = GIGANTIC_PAGES as usize;
        if nr_pages == 0 || nr_pages % per_range != 0 {
            return Err(EINVAL);
        }
        if pgoff % GIGANTIC_PAGES != 0 || vma.start() % (per_range * PAGE_SIZE) != 0 {
            return Err(EINVAL);
        }
        let nr_ranges = nr_pages / per_range;
        if nr_ranges > MAX_FILE_GIGANTIC {
            return Err(EINVAL);
        }
        let gm = st.gigantic.as_mut().ok_or(EINVAL)?;
        if gm.nr_cleared() as usize + nr_ranges > MAX_FILE_GIGANTIC {
            return Err(ENOMEM);
        }
        let sel = policy.placed_selector(&st.sockets, &self.device.wi, Caller::current())?;
        let mut nids = KVec::with_capacity(nr_ranges, GFP_KERNEL)?;
        let mut slots = KVec::with_capacity(nr_ranges, GFP_KERNEL)?;
        // Whether a GiB may come from ZONE_MOVABLE (see the vm_ops in
        // shim_vma.c `tk_vma_set_gigantic()`).
        let mut movable = false;
        for i in 0..nr_ranges {
            let ilx = interleave::vma_ilx(pgoff, (i * per_range) as u64, 18);
            let nid = sel.node_for_ilx(ilx);
            // Placement and thread count for this node, before any work.
            gm.check_node(nid)?;
            // SAFETY: the shim range-checks `nid`.
            movable |= clear::range::MOVABLE_GIGANTIC.load(Relaxed)
                && unsafe { shim::tk_node_has_movable(nid as c_int) };
            nids.push(nid, GFP_KERNEL)?;
            slots.push(None, GFP_KERNEL)?;
        }
        let reservation = Stats::reserve(&self.device, nr_pages as u64)?;
        let plan = GiganticPlan {
            nids,
            params: *gm.params(),
            last: gm.last_slot(),
        };
        // vmf_insert_pfn_pud() needs VM_MIXEDMAP (or VM_PFNMAP, which
        // would stop MAP_POPULATE and get_user_pages()).
        let _ = vma.set_mixedmap();
        let backing = Backing::new(
            &self.device,
            mapping,
            pgoff,
            BackingPages::Gigantic(GiganticRanges {
                ranges: slots,
                state: self.device.clone(),
            }),
            Some(plan),
            reservation,
            movable,
        )?;
        gm.note_mapped(nr_ranges);
        Ok((backing, movable))
    }
}

/// Pages per `vm_insert_pages()` call (2 MiB): between calls, a
/// reschedule point and a fatal-signal check.
const INSERT_BATCH: usize = crate::sync::SIGNAL_CHECK_PAGES;

/// Maps `nr` pages at `addr` onward, page `k` being `page(k)`, with one
/// `vm_insert_pages()` call per [`INSERT_BATCH`] pages; `EINTR` on a fatal
/// signal. On failure the caller's mmap fails and the mmap path unmaps
/// what was inserted.
fn insert_all(
    vma: &VmaMixedMap,
    addr: usize,
    nr: usize,
    page: impl Fn(usize) -> Option<*mut bindings::page>,
) -> Result {
    let mut batch: KVec<*mut bindings::page> = KVec::with_capacity(INSERT_BATCH, GFP_KERNEL)?;
    let mut j = 0usize;
    while j < nr {
        batch.clear();
        let n = (nr - j).min(INSERT_BATCH);
        for k in j..j + n {
            batch
                .push_within_capacity(page(k).ok_or(EINVAL)?)
                .map_err(|_| ENOMEM)?;
        }
        insert_pages(vma, addr + j * PAGE_SIZE, &batch)?;
        j += n;
        resched_killable(j)?;
    }
    Ok(())
}

/// Maps `pages` at `addr` onward with one `vm_insert_pages()` call, which
/// takes the page-table lock once per batch instead of once per page as
/// `vm_insert_page()` (the only one the Rust crate wraps) does.
fn insert_pages(vma: &VmaMixedMap, addr: usize, pages: &[*mut bindings::page]) -> Result {
    let mut num = pages.len() as c_ulong;
    // SAFETY: `vma` has VM_MIXEDMAP set and is being set up in ->mmap with
    // the mmap lock held for writing (what `VmaMixedMap` from `VmaNew`
    // guarantees, as for `vm_insert_page()`). Every pointer in `pages` is a
    // valid order-0, non-anon, untyped page the caller holds a reference to
    // for the whole call; `vm_insert_pages()` only reads the array (the
    // `*mut` is the C signature's) and takes its own reference on each page
    // it maps. It checks that the range lies in the vma (`EFAULT`).
    let ret = unsafe {
        bindings::vm_insert_pages(vma.as_ptr(), addr, pages.as_ptr().cast_mut(), &mut num)
    };
    // insert_pages() (mm/memory.c) answers EFAULT when walk_to_pmd() cannot
    // allocate a PUD or PMD table. Our range always lies in the vma, so
    // EFAULT here only ever means that allocation failed: report ENOMEM,
    // as the ABI documents (found by fail-nth in tk-test-faults).
    to_result(ret).map_err(|e| if e == EFAULT { ENOMEM } else { e })
}

/// Whether the `/dev/tierkit` file whose `private_data` is `private` is in
/// gigantic mode, for shim_vma.c `tk_get_unmapped_area()`: it refuses a fixed
/// address that is not GiB aligned there, so that `mremap(MREMAP_FIXED)`
/// cannot move a PUD-mapped GiB to one (`move_page_tables()` would walk
/// the PUD leaf as a PMD table).
///
/// # Safety
///
/// `private` is the `private_data` of an open `/dev/tierkit` file: the
/// `TkFile` that `open` returned, alive while the file is.
#[no_mangle]
unsafe extern "C" fn tk_file_gigantic(private: *mut c_void) -> bool {
    // SAFETY: see the function's safety section; the miscdevice stores the
    // pointer of the pinned box `open` returned.
    let f = unsafe { &*private.cast::<TkFile>() };
    f.gigantic.load(Relaxed)
}

/// `TK_IOC_WALK`: what maps an address of the caller (see `TkWalk`).
/// Test builds only (`TIERKIT_TEST=1`).
#[cfg(tierkit_test)]
/// Independent of the file's state. Needs `CAP_SYS_ADMIN` (pfns).
fn walk(arg: usize) -> Result<isize> {
    require_sys_admin()?;
    let (mut reader, mut writer) =
        UserSlice::new(UserPtr::from_addr(arg), size_of::<TkWalk>()).reader_writer();
    let mut w: TkWalk = reader.read()?;
    let addr = c_ulong::try_from(w.addr).map_err(|_| EFAULT)?;
    let mut pfn: c_ulong = 0;
    let mut nid: c_int = -1;
    // SAFETY: process context (an ioctl), no lock held; `pfn` and `nid`
    // are valid for writes.
    let ret = unsafe { shim::tk_walk(addr, &mut pfn, &mut nid) };
    if ret < 0 {
        return Err(Error::from_errno(ret));
    }
    w.level = ret as u32;
    w.pfn = pfn as u64;
    w.nid = nid;
    writer.write(&w)?;
    Ok(0)
}

/// `TK_IOC_PAGE_REFS`: who holds the folio of a pfn (see `TkPageRefs`).
/// Test builds only (`TIERKIT_TEST=1`).
#[cfg(tierkit_test)]
/// Independent of the file's state. Needs `CAP_SYS_ADMIN` (pfns).
fn page_refs(arg: usize) -> Result<isize> {
    require_sys_admin()?;
    let (mut reader, mut writer) =
        UserSlice::new(UserPtr::from_addr(arg), size_of::<TkPageRefs>()).reader_writer();
    let mut p: TkPageRefs = reader.read()?;
    let pfn = c_ulong::try_from(p.pfn).map_err(|_| EINVAL)?;
    let (mut refcount, mut mapcount, mut nid): (c_int, c_int, c_int) = (0, 0, -1);
    let (mut order, mut flags): (kernel::ffi::c_uint, kernel::ffi::c_uint) = (0, 0);
    // SAFETY: every pointer is to a local, valid for writes.
    let ret = unsafe {
        shim::tk_page_refs(
            pfn,
            &mut refcount,
            &mut mapcount,
            &mut order,
            &mut nid,
            &mut flags,
        )
    };
    kernel::error::to_result(ret)?;
    p.refcount = refcount;
    p.mapcount = mapcount;
    p.order = order;
    p.nid = nid;
    p.flags = flags;
    p._pad = 0;
    writer.write(&p)?;
    Ok(0)
}

/// `TK_IOC_CLEAR_BENCH`: independent of the file's state, so it runs
/// without the file's lock. Needs `CAP_SYS_ADMIN`.
fn clear_bench(arg: usize) -> Result<isize> {
    require_sys_admin()?;
    let (mut reader, mut writer) =
        UserSlice::new(UserPtr::from_addr(arg), size_of::<TkClearBench>()).reader_writer();
    let mut a: TkClearBench = reader.read()?;
    clear::bench::bench(&mut a)?;
    writer.write(&a)?;
    Ok(0)
}

/// `TK_IOC_MAPPED_FILE`: a new descriptor (`O_CLOEXEC`) for the tierkit
/// file another process maps at an address (`shim_vma.c`
/// `tk_mapped_file()`), so that its pages can be rebalanced though the
/// process holds no descriptor of it. `CAP_SYS_ADMIN` only: the caller
/// gets another process's memory. The result is written back before the
/// descriptor is installed, so a failed write-back leaves no descriptor.
fn mapped_file(arg: usize) -> Result<isize> {
    require_sys_admin()?;
    let (mut reader, mut writer) =
        UserSlice::new(UserPtr::from_addr(arg), size_of::<TkMappedFile>()).reader_writer();
    let mut m: TkMappedFile = reader.read()?;
    if m.flags != 0 || m.pid <= 0 {
        return Err(EINVAL);
    }
    let addr = c_ulong::try_from(m.addr).map_err(|_| EINVAL)?;
    let (mut start, mut end, mut id): (c_ulong, c_ulong, u64) = (0, 0, 0);
    // SAFETY: process context; the out pointers are to locals.
    let raw = unsafe { shim::tk_mapped_file(m.pid, addr, &mut start, &mut end, &mut id) };
    let raw = NonNull::new(kernel::error::from_err_ptr(raw)?).ok_or(EINVAL)?;
    // SAFETY: `tk_mapped_file()` returned a valid file with a reference
    // that is now ours (`File` is `struct file`, transparent). A tierkit
    // file has no read/write, so no `fdget_pos` caller uses its position
    // without `f_pos_lock`.
    let file: ARef<File> = unsafe { ARef::from_raw(raw.cast()) };
    let fd = FileDescriptorReservation::get_unused_fd_flags(bindings::O_CLOEXEC)?;
    (m.start, m.end, m.id) = (start as u64, end as u64, id);
    writer.write(&m)?;
    let n = fd.reserved_fd();
    fd.fd_install(file);
    Ok(n as isize)
}

#[vtable]
impl MiscDevice for TkFile {
    type Ptr = Pin<KBox<Self>>;

    fn open(file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<Pin<KBox<Self>>> {
        // SAFETY: By the type invariant of `TkDevice`, `misc` is the `reg` field
        // of a pinned `TkDevice`, which outlives the registration and so
        // this call (misc_open() keeps the device registered meanwhile).
        let dev = unsafe { &*container_of!(core::ptr::from_ref(misc).cast_mut(), TkDevice, reg) };
        let me = KBox::try_pin_init(
            try_pin_init!(TkFile {
                device: dev.device.clone(),
                state <- KillableMutex::new(FileState {
                    policy: None,
                    task: TaskState::new(),
                    mapped: false,
                    mappings: KVec::new(),
                    nr_pages: 0,
                    gigantic: None,
                    snapshots: KVec::new(),
                    cow: false,
                    sockets: crate::socket::SocketWeights::new(),
                }, c"tierkit_file", static_lock_class!()),
                rebalancing <- KillableMutex::new((), c"tierkit_rebalance", static_lock_class!()),
                gigantic: Atomic::new(false),
            }),
            GFP_KERNEL,
        )?;
        // GiB-aligned addresses for gigantic mappings (the Rust
        // miscdevice has no get_unmapped_area hook).
        // SAFETY: `file` is the file being opened, in its ->open.
        unsafe { shim::tk_file_use_dev_fops(file.as_ptr()) };
        // An address space of its own, so that zapping a page of this
        // file never touches another file's vmas (see shim_vma.c).
        // SAFETY: as above; nothing is mapped yet.
        to_result(unsafe { shim::tk_file_own_mapping(file.as_ptr()) })?;
        Ok(me)
    }

    fn release(device: Self::Ptr, file: &File) {
        // The backings first: the memory notifier may use their address
        // space until they leave its registry.
        drop(device);
        // SAFETY: `file` is being released: the VFS unlinked every vma of it
        // first, and its backings are gone.
        unsafe { shim::tk_file_put_mapping(file.as_ptr()) };
    }

    fn ioctl(me: Pin<&TkFile>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        match cmd {
            uapi::TK_IOC_SET_POLICY => me.set_policy(arg),
            uapi::TK_IOC_TASK_NEXT => me.task_next(arg),
            uapi::TK_IOC_BULK => me.bulk(arg),
            uapi::TK_IOC_SET_GIGANTIC => me.set_gigantic(arg),
            uapi::TK_IOC_CLEAR_BENCH => clear_bench(arg),
            uapi::TK_IOC_REBALANCE => me.rebalance(arg),
            uapi::TK_IOC_SNAPSHOT => me.snapshot(arg),
            uapi::TK_IOC_MAPPED_FILE => mapped_file(arg),
            uapi::TK_IOC_SOCKET_WEIGHTS => me.socket_weights(arg),
            #[cfg(tierkit_test)]
            uapi::TK_IOC_WALK => walk(arg),
            #[cfg(tierkit_test)]
            uapi::TK_IOC_PAGE_REFS => page_refs(arg),
            _ => Err(ENOTTY),
        }
    }

    /// 4 KiB mode: allocates every page of the mapping on the node the
    /// file's policy picks for its ilx, then inserts them all. Gigantic
    /// mode: only checks and reserves (`mmap_gigantic`); each GiB is made
    /// at its first touch. See Documentation/ABI/testing/dev-tierkit.
    /// Every argument and limit is checked first; a failure frees
    /// everything this call took.
    fn mmap(me: Pin<&TkFile>, file: &File, vma: &VmaNew) -> Result {
        // A private mapping would copy a page on write, and the copy lands
        // wherever the task's own policy puts it. VM_MAYSHARE is what
        // MAP_SHARED sets; VM_SHARED is dropped for a read-only fd (do_mmap).
        if vma.flags() & vm_flags::MAYSHARE == 0 {
            return Err(EINVAL);
        }
        let start = vma.start();
        let nr_pages = (vma.end() - start) >> PAGE_SHIFT;
        // SAFETY: `vma` is being set up in ->mmap with the mmap lock held
        // for writing, so reading its `vm_pgoff` cannot race with a writer.
        // `VmaRef` has no accessor for it (7.3).
        let pgoff = unsafe { (*vma.as_ptr()).vm_pgoff } as u64;
        // SAFETY: `file` is a live open file; `f_mapping` is set at open
        // and stays valid while the file is.
        let mapping = unsafe { (*file.as_ptr()).f_mapping };

        let mut st = me.state.lock()?;
        let policy = st.policy.ok_or(EINVAL)?;
        // Room to keep the mapping, so nothing can fail after insertion.
        st.mappings.reserve(1, GFP_KERNEL)?;
        // Never grown by mremap, never in a core dump (it can be 64 GiB).
        vma.set_dontexpand();
        vma.set_dontdump();
        let gigantic = st.gigantic.is_some();
        // Whether its pages may be in ZONE_MOVABLE: a gigantic mapping's
        // GiBs with the movable_gigantic opt-in on a node that has such
        // memory (its first touches then honour this, see
        // `GiganticRange::alloc_for_mapping`), a 4 KiB one's wherever a
        // rebalance or an offline may move them (see small_may_be_movable).
        // A snapshot's file: its vmas copy on write, and refuse long-term
        // writable pins whatever `movable` says (write notified).
        let cow = st.cow;
        let mut gigantic = gigantic;
        let (backing, movable) = if cow {
            let (backing, giga) = me.mmap_snapshot(&mut st, vma, pgoff, nr_pages, mapping)?;
            gigantic = giga;
            (backing, true)
        } else if gigantic {
            me.mmap_gigantic(&mut st, vma, policy, pgoff, nr_pages, mapping)?
        } else {
            if nr_pages == 0 || nr_pages > MAX_FILE_PAGES {
                return Err(EINVAL);
            }
            if st.nr_pages + nr_pages > MAX_FILE_PAGES {
                return Err(ENOMEM);
            }
            // weighted_interleave_nid() reads the weights at each fault;
            // all of this mapping's "faults" happen now, so one snapshot
            // serves.
            let sel = policy.placed_selector(&st.sockets, &me.device.wi, Caller::current())?;
            let reservation = Stats::reserve(&me.device, nr_pages as u64)?;
            // Killable; frees everything on failure.
            let placed = placed::alloc_placed(&me.device, &sel, pgoff, nr_pages)?;
            let mixed = vma.set_mixedmap();
            // On failure the mmap path unmaps what was inserted
            // (__mmap_new_file_vma() -> unmap_region()) and `placed` frees
            // the pages.
            let raw = placed.raw_pages();
            insert_all(mixed, start, raw.len(), |k| raw.get(k).copied())?;
            let movable = small_may_be_movable();
            let len = placed.len();
            crate::pages::movable::window_delay();
            let backing = Backing::new(
                &me.device,
                mapping,
                pgoff,
                BackingPages::Small(placed),
                None,
                reservation,
                movable,
            )?;
            // Counted once nothing can fail any more: a failed mmap leaves
            // the file's budget as it was.
            st.nr_pages += len;
            (backing, movable)
        };
        let ptr = core::ptr::from_ref::<Backing>(&backing)
            .cast_mut()
            .cast::<c_void>();
        st.mappings
            .push_within_capacity(backing)
            .map_err(|_| ENOMEM)?;
        st.mapped = true;
        // SAFETY: in ->mmap with the mmap lock held for writing, on a
        // VM_MIXEDMAP vma. `ptr` is the boxed `Backing` now owned by the
        // file's state, which keeps it until the file is released, after
        // every vma of the file is gone.
        unsafe {
            match (cow, gigantic) {
                (true, true) => shim::tk_vma_set_gigantic_cow(vma.as_ptr(), ptr),
                (true, false) => shim::tk_vma_set_cow(vma.as_ptr(), ptr),
                (false, true) => shim::tk_vma_set_gigantic(vma.as_ptr(), ptr, movable),
                (false, false) => shim::tk_vma_set_backing(vma.as_ptr(), ptr, movable),
            }
        }
        Ok(())
    }
}

/// Whether a 4 KiB mapping made now may ever hold pages in ZONE_MOVABLE,
/// which decides its vmas for good (shim_vma.c `tk_pfn_mkwrite()`): where
/// its first pages landed does not say, since a rebalance moves pages to
/// whatever nodes the file's policy names then and an offline to the
/// nearest node with memory. So: whether any node with memory has
/// ZONE_MOVABLE memory now. A rebalance of a mapping made without takes
/// no page from ZONE_MOVABLE (memory onlined movable only later), and
/// counts a page with no other room on its target node as `no_memory`.
fn small_may_be_movable() -> bool {
    use crate::shim::node;
    (0..node::possible_nodes()).any(|nid| {
        // SAFETY: the shim range-checks `nid`.
        node::has_memory(nid) && unsafe { shim::tk_node_has_movable(nid as c_int) }
    })
}
