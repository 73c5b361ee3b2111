// SPDX-License-Identifier: GPL-2.0

//! The weight files: `/sys/kernel/debug/tierkit/weighted_interleave/`
//! `{nodeN,auto,bandwidth}` and `/sys/kernel/debug/tierkit/stats`.
//! Documented in `Documentation/ABI/testing/debugfs-tierkit`.
//!
//! # Why debugfs
//!
//! The files mirror `/sys/kernel/mm/mempolicy/weighted_interleave/` (same
//! names, formats and errors), but the Rust kernel crate of 7.3 has no
//! sysfs/kobject abstraction. Its debugfs has read-write callback files
//! whose write callback returns a `Result`, and the error is what `write(2)`
//! returns (rust/kernel/debugfs/file_ops.rs), so `EINVAL` and `ENODEV`
//! reach the writer exactly as from the kernel's sysfs files. A kobject in
//! the C shim would have mirrored the location too, at the price of the
//! whole ABI in C; debugfs keeps it in Rust. (Only the path and the mode,
//! 0600, differ.)
//!
//! # Hotplug
//!
//! As mm/mempolicy.c does with `hotplug_node_notifier(wi_node_notifier)`,
//! a node notifier (registered through the C shim) adds `nodeN` when node N
//! gets its first memory (`NODE_ADDED_FIRST_MEMORY`) and removes it when the
//! node loses its last (`NODE_REMOVED_LAST_MEMORY`); the weight itself is
//! kept in the table and shows again if the node returns.

use super::{possible_nodes, Wi};
use crate::interleave::MAX_NUMNODES;
use crate::shim;
use kernel::{
    debugfs::{Dir, File},
    ffi::{c_int, c_void},
    fmt, new_mutex,
    prelude::*,
    str::CString,
    sync::{Arc, Mutex},
    uaccess::UserSliceReader,
};

/// The most bytes one write to a weight file may carry: a page, as sysfs.
const MAX_WRITE: usize = 4096;

/// Reads a whole write into a buffer.
fn read_write_buf(r: &mut UserSliceReader) -> Result<KVec<u8>> {
    let len = r.len();
    if len > MAX_WRITE {
        return Err(EINVAL);
    }
    let mut buf = KVec::from_elem(0u8, len, GFP_KERNEL)?;
    r.read_slice(&mut buf)?;
    Ok(buf)
}

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
fn node_store(a: &NodeAttr, r: &mut UserSliceReader) -> Result {
    let buf = read_write_buf(r)?;
    a.wi.node_store(a.nid, &buf)
}

/// `weighted_interleave_auto_show()`: "true" or "false" and a newline.
fn auto_show(wi: &Arc<Wi>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "{}", if wi.is_auto() { "true" } else { "false" })
}

/// `weighted_interleave_auto_store()`: see [`Wi::auto_store_with`].
fn auto_store(wi: &Arc<Wi>, r: &mut UserSliceReader) -> Result {
    let buf = read_write_buf(r)?;
    wi.auto_store(&buf)
}

fn bandwidth_show(wi: &Arc<Wi>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    wi.bandwidth_show(f)
}

fn bandwidth_store(wi: &Arc<Wi>, r: &mut UserSliceReader) -> Result {
    let buf = read_write_buf(r)?;
    wi.bandwidth_store(&buf)
}

fn stats_show(wi: &Arc<Wi>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    wi.stats.show(f)
}

/// The `nodeN` files that exist, indexed by node.
struct NodeFiles {
    files: KVec<Option<Pin<KBox<File<NodeAttr>>>>>,
}

/// All of tierkit's weighted-interleave debugfs files, and the node
/// notifier that keeps the `nodeN` files in step with memory hotplug.
///
/// # Invariants
///
/// While `notifier` is true, the C shim's node notifier is registered with
/// a pointer to this (pinned) object.
#[pin_data(PinnedDrop)]
pub(crate) struct WiFiles {
    wi: Arc<Wi>,
    dir: Dir,
    #[pin]
    nodes: Mutex<NodeFiles>,
    _auto: Pin<KBox<File<Arc<Wi>>>>,
    _bandwidth: Pin<KBox<File<Arc<Wi>>>>,
    _stats: Pin<KBox<File<Arc<Wi>>>>,
    notifier: bool,
}

impl WiFiles {
    /// Creates `weighted_interleave/{auto,bandwidth}` and `stats` under
    /// `root`, registers the node notifier, and creates `nodeN` for every
    /// node that has memory.
    pub(crate) fn new(root: &Dir, wi: Arc<Wi>) -> Result<Pin<KBox<WiFiles>>> {
        Self::new_with(root, wi, true)
    }

    /// [`WiFiles::new`], optionally without the node notifier (the C shim
    /// holds one registration; KUnit tests build their own `WiFiles`).
    pub(crate) fn new_with(root: &Dir, wi: Arc<Wi>, notify: bool) -> Result<Pin<KBox<WiFiles>>> {
        let dir = root.subdir(c"weighted_interleave");
        let auto = KBox::pin_init(
            dir.read_write_callback_file(c"auto", wi.clone(), &auto_show, &auto_store),
            GFP_KERNEL,
        )?;
        let bandwidth = KBox::pin_init(
            dir.read_write_callback_file(
                c"bandwidth",
                wi.clone(),
                &bandwidth_show,
                &bandwidth_store,
            ),
            GFP_KERNEL,
        )?;
        let stats = KBox::pin_init(
            root.read_callback_file(c"stats", wi.clone(), &stats_show),
            GFP_KERNEL,
        )?;
        let mut files = KVec::with_capacity(MAX_NUMNODES, GFP_KERNEL)?;
        for _ in 0..MAX_NUMNODES {
            files.push(None, GFP_KERNEL)?;
        }
        let mut this = KBox::pin_init(
            pin_init!(WiFiles {
                wi,
                dir,
                nodes <- new_mutex!(NodeFiles { files }, "tierkit_wi_files"),
                _auto: auto,
                _bandwidth: bandwidth,
                _stats: stats,
                notifier: false,
            }),
            GFP_KERNEL,
        )?;
        if notify {
            let ctx = this.ctx();
            // SAFETY: `ctx` points to a pinned `WiFiles`, which unregisters
            // the notifier in its drop before it goes away (INVARIANT below).
            let ret = unsafe { shim::tk_register_node_notifier(Some(node_event), ctx) };
            kernel::error::to_result(ret)?;
            // INVARIANT: registered just above.
            // SAFETY: `notifier` is not structurally pinned; nothing moves.
            unsafe { this.as_mut().get_unchecked_mut().notifier = true };
        }
        for nid in 0..possible_nodes() {
            if shim::node::has_memory(nid) {
                this.add_node(nid);
            }
        }
        Ok(this)
    }

    /// The pointer the node notifier passes back to [`node_event`].
    pub(crate) fn ctx(&self) -> *mut c_void {
        core::ptr::from_ref::<WiFiles>(self)
            .cast_mut()
            .cast::<c_void>()
    }

    /// Creates `nodeN` if it does not exist yet (`sysfs_wi_node_add()`);
    /// a failure is logged, as the kernel logs it, and leaves no file.
    pub(crate) fn add_node(&self, nid: usize) {
        if nid >= MAX_NUMNODES {
            pr_warn!("node{} is beyond tierkit's 64 nodes, no weight file\n", nid);
            return;
        }
        let mut nodes = self.nodes.lock();
        if nodes.files.get(nid).is_some_and(|f| f.is_some()) {
            return;
        }
        let file = CString::try_from_fmt(fmt!("node{nid}")).and_then(|name| {
            KBox::pin_init(
                self.dir.read_write_callback_file(
                    &name,
                    NodeAttr {
                        nid,
                        wi: self.wi.clone(),
                    },
                    &node_show,
                    &node_store,
                ),
                GFP_KERNEL,
            )
        });
        match file {
            Ok(file) => {
                if let Some(slot) = nodes.files.get_mut(nid) {
                    *slot = Some(file);
                }
            }
            Err(e) => pr_err!("failed to add weight file for node{}: {:?}\n", nid, e),
        }
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
        if self.notifier {
            // SAFETY: By the type invariant, the notifier is registered
            // (in `new`, pointing at `self`); after this no
            // callback runs or is running, so `self` may go.
            unsafe { shim::tk_unregister_node_notifier() };
        }
    }
}

/// The node notifier's callback (called by the C shim from
/// `register_node_notifier()`'s chain, in process context).
///
/// # Safety
///
/// `ctx` is the pointer `WiFiles::new` registered, still valid (the
/// notifier is unregistered before the `WiFiles` is dropped).
pub(crate) unsafe extern "C" fn node_event(ctx: *mut c_void, nid: c_int, added: bool) {
    // SAFETY: see the function's safety section.
    let files = unsafe { &*ctx.cast::<WiFiles>() };
    let Ok(nid) = usize::try_from(nid) else {
        return;
    };
    if added {
        files.add_node(nid);
    } else {
        files.remove_node(nid);
    }
}
