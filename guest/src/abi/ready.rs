//! The start of a test: the module present, the topology read, tierkit's
//! weight files found; each records its failed check in the test's
//! [`Report`] and returns `None`, and the caller then finishes.

use crate::abi::tk;
use crate::harness::report::Report;
use crate::linux::kernel::ensure_debugfs;
use crate::topology::node::Topology;
use crate::topology::weights;

/// The start of a test that needs the module: debugfs mounted,
/// `/dev/tierkit` present, the topology read and noted. On failure the
/// failed check is in `r` and the caller finishes.
pub fn tierkit_ready(r: &mut Report) -> Option<Topology> {
    ensure_debugfs();
    if !tk::Tierkit::present() {
        r.fail(
            "/dev/tierkit exists",
            "no /dev/tierkit: is tierkit.ko loaded?",
        );
        return None;
    }
    read_topology(r)
}

/// Reads the guest's NUMA topology and notes it in `r`; on failure records a
/// failed `topology` check and returns `None` (the caller then finishes).
pub fn read_topology(r: &mut Report) -> Option<Topology> {
    match Topology::read() {
        Ok(t) => {
            r.note(format!("topology: {}", t.describe()));
            Some(t)
        }
        Err(e) => {
            r.fail("topology", format!("{e:#}"));
            None
        }
    }
}

/// Checks that `/dev/tierkit` exists and returns tierkit's weight directory;
/// on failure records which of the two is missing and returns `None`.
pub fn tierkit_weight_dir(r: &mut Report) -> Option<weights::WeightDir> {
    if !tk::Tierkit::present() {
        r.fail(
            "open /dev/tierkit",
            "no /dev/tierkit (is tierkit.ko loaded?)",
        );
        return None;
    }
    let wd = weights::WeightDir::tierkit();
    if wd.is_none() {
        r.fail(
            "tierkit weight files",
            "no tierkit weighted_interleave directory (debugfs)",
        );
    }
    wd
}

/// [`read_topology`], then [`tierkit_weight_dir`]: the start of a test of
/// tierkit's weights. `None` (the failed check recorded) if either fails.
pub fn topology_and_weights(r: &mut Report) -> Option<(Topology, weights::WeightDir)> {
    let topo = read_topology(r)?;
    let wd = tierkit_weight_dir(r)?;
    Some((topo, wd))
}
