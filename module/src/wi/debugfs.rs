// SPDX-License-Identifier: GPL-2.0

//! The weight files: `/sys/kernel/debug/tierkit/weighted_interleave/`
//! `{nodeN,auto,bandwidth}`.
//! Documented in `Documentation/ABI/testing/debugfs-tierkit`.
//!
//! # Why debugfs
//!
//! The files mirror `/sys/kernel/mm/mempolicy/weighted_interleave/` (same
//! names, formats and errors), but the Rust kernel crate of 7.3 has no
//! sysfs/kobject abstraction. debugfs write callbacks return their error to
//! `write(2)`, so `EINVAL` and `ENODEV` reach the writer exactly as from
//! the kernel's sysfs files. The files are made by [`crate::debugfs`],
//! whose file operations pin the module while a file is open (those of
//! the 7.3 `kernel::debugfs` do not). Only the path and the mode (0600
//! for writable files, 0400 for read-only ones) differ from sysfs.
//!
//! # Hotplug
//!
//! As mm/mempolicy.c does with `hotplug_node_notifier(wi_node_notifier)`,
//! a node notifier (`register_node_notifier()`) adds `nodeN` when node N
//! gets its first memory (`NODE_ADDED_FIRST_MEMORY`) and removes it when the
//! node loses its last (`NODE_REMOVED_LAST_MEMORY`); the weight itself is
//! kept in the table and shows again if the node returns.

use super::{possible_nodes, Wi};
use crate::debugfs::{DebugfsDir, DebugfsFile};
use crate::interleave::MAX_NUMNODES;
use crate::shim;
use kernel::{
    bindings, container_of,
    ffi::{c_int, c_ulong, c_void},
    fmt, new_mutex,
    prelude::*,
    str::CString,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
    types::Opaque,
};

/// Mode of the read-write files: root only, as the kernel's sysfs
/// weight files are writable by root only.
const MODE_RW: u16 = 0o600;

/// The data behind one `nodeN` file.
struct NodeAttr {
    nid: usize,
    wi: Arc<Wi>,
}

/// `node_show()`: the weight and a newline.
fn node_show(a: &NodeAttr, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "{}", a.wi.weight(a.nid))
}

/// `node_store()`: see [`Wi::node_store`].
fn node_store(a: &NodeAttr, buf: &[u8]) -> Result {
    a.wi.node_store(a.nid, buf)
}

/// `weighted_interleave_auto_show()`: "true" or "false" and a newline.
fn auto_show(wi: &Arc<Wi>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "{}", if wi.is_auto() { "true" } else { "false" })
}

/// `weighted_interleave_auto_store()`: see [`Wi::auto_store_with`].
fn auto_store(wi: &Arc<Wi>, buf: &[u8]) -> Result {
    wi.auto_store(buf)
}

fn bandwidth_show(wi: &Arc<Wi>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    wi.bandwidth_show(f)
}

fn bandwidth_store(wi: &Arc<Wi>, buf: &[u8]) -> Result {
    wi.bandwidth_store(buf)
}

/// The `nodeN` files that exist, indexed by node.
struct NodeFiles {
    files: KVec<Option<DebugfsFile<NodeAttr>>>,
}

/// All of tierkit's weighted-interleave debugfs files, and the node
/// notifier that keeps the `nodeN` files in step with memory hotplug.
///
/// Fields drop in declaration order: every file before the directory that
/// holds it (removing a directory removes its files, and their dentries
/// must not be removed twice).
///
/// # Invariants
///
/// While `notifier` is true, `nb` (pinned in this object, calling
/// [`node_notifier_call`]) is registered on the node notifier chain.
#[pin_data(PinnedDrop)]
pub(crate) struct WiFiles {
    wi: Arc<Wi>,
    /// The node notifier's block.
    #[pin]
    nb: Opaque<bindings::notifier_block>,
    #[pin]
    nodes: Mutex<NodeFiles>,
    _auto: DebugfsFile<Arc<Wi>>,
    _bandwidth: DebugfsFile<Arc<Wi>>,
    /// Set through `&self` once the notifier is registered: the notifier
    /// may already run on another CPU with a `&WiFiles`, so no `&mut`.
    notifier: Atomic<bool>,
    dir: DebugfsDir,
}

// SAFETY: `nb` is only used by the notifier chain (under its own lock) and
// by registration and unregistration; the other fields are `Send` and `Sync`.
unsafe impl Send for WiFiles {}
// SAFETY: as above; `&WiFiles` does not touch `nb`.
unsafe impl Sync for WiFiles {}

impl WiFiles {
    /// Creates `weighted_interleave/{auto,bandwidth}` under `root`,
    /// registers the node notifier, and creates `nodeN` for every
    /// node that has memory.
    pub(crate) fn new(root: &DebugfsDir, wi: Arc<Wi>) -> Result<Pin<KBox<WiFiles>>> {
        Self::new_with(root, wi, true)
    }

    /// [`WiFiles::new`], optionally without the node notifier (KUnit
    /// tests build their own `WiFiles` and call [`node_event`] themselves).
    pub(crate) fn new_with(
        root: &DebugfsDir,
        wi: Arc<Wi>,
        notify: bool,
    ) -> Result<Pin<KBox<WiFiles>>> {
        let dir = DebugfsDir::new(c"weighted_interleave", Some(root))?;
        let auto = dir.file(c"auto", MODE_RW, wi.clone(), auto_show, Some(auto_store))?;
        let bandwidth = dir.file(
            c"bandwidth",
            MODE_RW,
            wi.clone(),
            bandwidth_show,
            Some(bandwidth_store),
        )?;
        let mut files = KVec::with_capacity(MAX_NUMNODES, GFP_KERNEL)?;
        for _ in 0..MAX_NUMNODES {
            files.push(None, GFP_KERNEL)?;
        }
        let this = KBox::pin_init(
            pin_init!(WiFiles {
                wi,
                nb: Opaque::new(bindings::notifier_block {
                    notifier_call: Some(node_notifier_call),
                    next: core::ptr::null_mut(),
                    priority: 0,
                }),
                nodes <- new_mutex!(NodeFiles { files }, "tierkit_wi_files"),
                _auto: auto,
                _bandwidth: bandwidth,
                notifier: Atomic::new(false),
                dir,
            }),
            GFP_KERNEL,
        )?;
        if notify {
            // SAFETY: `nb` is a valid notifier block, pinned in `this`,
            // which unregisters it in its drop before it goes away
            // (INVARIANT below); it is on no chain yet.
            let ret = unsafe { bindings::register_node_notifier(this.nb.get()) };
            kernel::error::to_result(ret)?;
            // INVARIANT: registered just above.
            this.notifier.store(true, Relaxed);
        }
        for nid in 0..possible_nodes() {
            if shim::node::has_memory(nid) {
                this.add_node(nid)?;
            }
        }
        Ok(this)
    }

    /// Creates `nodeN` if it does not exist yet (`sysfs_wi_node_add()`).
    /// A failure leaves no file and is returned: module init fails with it
    /// (as `add_weighted_interleave_group()` does), the hotplug notifier
    /// logs it (as `wi_node_notifier()` does).
    pub(crate) fn add_node(&self, nid: usize) -> Result {
        if nid >= MAX_NUMNODES {
            pr_warn!("node{} is beyond tierkit's 64 nodes, no weight file\n", nid);
            return Ok(());
        }
        let mut nodes = self.nodes.lock();
        if nodes.files.get(nid).is_some_and(|f| f.is_some()) {
            return Ok(());
        }
        let file = CString::try_from_fmt(fmt!("node{nid}")).and_then(|name| {
            self.dir.file(
                &name,
                MODE_RW,
                NodeAttr {
                    nid,
                    wi: self.wi.clone(),
                },
                node_show,
                Some(node_store),
            )
        });
        if let Some(slot) = nodes.files.get_mut(nid) {
            *slot = Some(file?);
        }
        Ok(())
    }

    /// Removes `nodeN` if it exists (`sysfs_wi_node_delete()`).
    pub(crate) fn remove_node(&self, nid: usize) {
        let old = {
            let mut nodes = self.nodes.lock();
            nodes.files.get_mut(nid).and_then(|slot| slot.take())
        };
        // Removed outside the lock: debugfs_remove() waits for readers.
        drop(old);
    }

    /// Whether `nodeN` exists.
    pub(crate) fn has_node(&self, nid: usize) -> bool {
        self.nodes
            .lock()
            .files
            .get(nid)
            .is_some_and(|f| f.is_some())
    }
}

#[pinned_drop]
impl PinnedDrop for WiFiles {
    fn drop(self: Pin<&mut Self>) {
        if self.notifier.load(Relaxed) {
            // SAFETY: By the type invariant, `nb` is registered; after
            // this no callback runs or is running (the chain's rwsem), so
            // `self` may go.
            unsafe { bindings::unregister_node_notifier(self.nb.get()) };
        }
    }
}

/// The node notifier's callback (`register_node_notifier()`'s chain, in
/// process context): like mm/mempolicy.c's `wi_node_notifier()`, a node
/// that gained its first memory or lost its last one.
///
/// # Safety
///
/// `nb` is the `nb` of a live [`WiFiles`] (the notifier is unregistered
/// before the `WiFiles` is dropped) and `data` a `struct node_notify`, as
/// the node chain passes them.
unsafe extern "C" fn node_notifier_call(
    nb: *mut bindings::notifier_block,
    action: c_ulong,
    data: *mut c_void,
) -> c_int {
    // SAFETY: see the function's safety section; `Opaque` is
    // `repr(transparent)`.
    let files =
        unsafe { &*container_of!(nb.cast::<Opaque<bindings::notifier_block>>(), WiFiles, nb) };
    // SAFETY: see the function's safety section.
    let nid = unsafe { (*data.cast::<bindings::node_notify>()).nid };
    if action == bindings::NODE_ADDED_FIRST_MEMORY as c_ulong {
        node_event(files, nid, true);
    } else if action == bindings::NODE_REMOVED_LAST_MEMORY as c_ulong {
        node_event(files, nid, false);
    }
    bindings::NOTIFY_OK as c_int
}

/// Node `nid` gained its first memory (`added`) or lost its last: its
/// `nodeN` file is added or removed. Ids tierkit cannot name are ignored.
pub(crate) fn node_event(files: &WiFiles, nid: c_int, added: bool) {
    let Ok(nid) = usize::try_from(nid) else {
        return;
    };
    // The clearing workers' best count depends on the node's memory.
    crate::clear::forget_auto(nid);
    if added {
        if let Err(e) = files.add_node(nid) {
            pr_err!("failed to add weight file for node{}: {:?}\n", nid, e);
        }
    } else {
        files.remove_node(nid);
    }
}
