// SPDX-License-Identifier: GPL-2.0

//! tierkit: a companion module for Linux's tiered-memory work (DRAM plus CXL).
//!
//! - weighted interleave: a node selector with the exact semantics of
//!   `MPOL_WEIGHTED_INTERLEAVE` (mm/mempolicy.c), and `/dev/tierkit`, which
//!   hands userspace pages placed by it;
//! - gigantic-page clearing: clear a 1 GiB contiguous range with several
//!   kernel workers on CPUs near the memory.
//!
//! The pure algorithms live in `module/core/` and are compiled both here and
//! on the host, where they are property-tested.

use kernel::{prelude::*, sync::Arc};

// The pure code of `module/core/` is a library shared with the host crate:
// its `pub` items are its API there, and not every one is used here.
#[expect(dead_code, unreachable_pub)]
#[path = "../core/src/chunks.rs"]
mod chunks;
#[expect(dead_code, unreachable_pub)]
#[path = "../core/src/interleave.rs"]
mod interleave;
#[expect(dead_code, unreachable_pub)]
#[path = "../core/src/nodemask.rs"]
mod nodemask;
#[expect(unreachable_pub)]
#[path = "../core/src/pace.rs"]
mod pace;
#[expect(unreachable_pub)]
#[path = "../core/src/pool_cmd.rs"]
mod pool_cmd;
#[expect(dead_code, unreachable_pub)]
#[path = "../core/src/socket.rs"]
mod socket;
#[expect(dead_code, unreachable_pub)]
#[path = "../core/src/uapi.rs"]
mod uapi;
#[expect(dead_code, unreachable_pub)]
#[path = "../core/src/weights.rs"]
mod weights;
#[expect(dead_code, unreachable_pub)]
#[path = "../core/src/wi_table.rs"]
mod wi_table;

mod clear;
mod debugfs;
mod dev;
mod mapping;
mod pages;
mod placed;
mod ratelimit;
mod rebalance;
mod shim;
mod state;
mod sync;
mod wi;

module! {
    type: TierKit,
    name: "tierkit",
    authors: ["tierkit developers"],
    description: "Weighted-interleave placement and parallel gigantic-page clearing",
    license: "GPL",
}

/// The module: the device's state, its debugfs files and `/dev/tierkit`.
///
/// Fields drop in declaration order: the pool's refill thread and
/// shrinker first (which frees every ready range), then its file, the
/// memory notifier, the weight files (and the node notifier), the `stats`
/// and `limits` files, then the device, then the debugfs root. Every open
/// file, `/dev/tierkit` or debugfs, holds a reference on the module (their
/// file operations have an owner), so `rmmod` is refused while one is open,
/// and a mapping holds its file.
struct TierKit {
    _pool_worker: clear::refill::PoolWorker,
    _pool_file: debugfs::DebugfsFile<Arc<clear::ready::GiganticPool>>,
    _gigantic_dir: debugfs::DebugfsDir,
    _mem_notifier: mapping::MemoryNotifier,
    _wi_files: Pin<KBox<wi::debugfs::WiFiles>>,
    _stats_files: state::StatsFiles,
    _movable_gigantic: debugfs::DebugfsFile<()>,
    #[cfg(tierkit_test)]
    _register_delay: debugfs::DebugfsFile<()>,
    #[cfg(tierkit_test)]
    _fail_backing: debugfs::DebugfsFile<()>,
    #[cfg(tierkit_test)]
    _test_dir: debugfs::DebugfsDir,
    _dev: Pin<KBox<dev::TkDevice>>,
    _debugfs: debugfs::DebugfsDir,
    /// Last: tierkit's orphan pages, once nothing else can give one back.
    _movable: pages::movable::MovableExit,
}

/// `movable_gigantic` read: "0" or "1".
fn movable_gigantic_show(_: &(), f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
    let on = clear::range::MOVABLE_GIGANTIC.load(kernel::sync::atomic::Relaxed);
    writeln!(f, "{}", u8::from(on))
}

/// `test/movable_register_delay_ms` read: the delay in decimal.
#[cfg(tierkit_test)]
fn register_delay_show(_: &(), f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
    let ms = pages::movable::REGISTER_DELAY_MS.load(kernel::sync::atomic::Relaxed);
    writeln!(f, "{}", ms)
}

/// `test/movable_register_delay_ms` write: 0..=10000.
#[cfg(tierkit_test)]
fn register_delay_store(_: &(), buf: &[u8]) -> Result {
    let s = core::str::from_utf8(buf).map_err(|_| EINVAL)?.trim();
    let ms: u32 = s.parse().map_err(|_| EINVAL)?;
    if ms > 10_000 {
        return Err(EINVAL);
    }
    pages::movable::REGISTER_DELAY_MS.store(ms, kernel::sync::atomic::Relaxed);
    Ok(())
}

/// `test/fail_next_backing` read: "1" while armed, else "0".
#[cfg(tierkit_test)]
fn fail_backing_show(_: &(), f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
    let on = mapping::FAIL_NEXT_BACKING.load(kernel::sync::atomic::Relaxed);
    writeln!(f, "{}", on)
}

/// `test/fail_next_backing` write: "1" arms, "0" disarms.
#[cfg(tierkit_test)]
fn fail_backing_store(_: &(), buf: &[u8]) -> Result {
    let s = core::str::from_utf8(buf).map_err(|_| EINVAL)?.trim();
    let on: u32 = match s {
        "0" => 0,
        "1" => 1,
        _ => return Err(EINVAL),
    };
    mapping::FAIL_NEXT_BACKING.store(on, kernel::sync::atomic::Relaxed);
    Ok(())
}

/// `movable_gigantic` write: "0" or "1" (kstrtobool() spellings: y/n,
/// on/off too); anything else is `EINVAL`.
fn movable_gigantic_store(_: &(), buf: &[u8]) -> Result {
    let s = core::str::from_utf8(buf).map_err(|_| EINVAL)?.trim();
    let on = match s {
        "1" | "y" | "Y" | "on" => true,
        "0" | "n" | "N" | "off" => false,
        _ => return Err(EINVAL),
    };
    clear::range::MOVABLE_GIGANTIC.store(on, kernel::sync::atomic::Relaxed);
    Ok(())
}

impl kernel::Module for TierKit {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let debugfs = debugfs::DebugfsDir::new(c"tierkit", None)?;
        let device = state::DeviceState::new()?;
        let wi_files = wi::debugfs::WiFiles::new(&debugfs, device.wi.clone())?;
        let stats_files = state::StatsFiles::new(&debugfs, &device)?;
        let movable_gigantic = debugfs.file(
            c"movable_gigantic",
            0o600,
            (),
            movable_gigantic_show,
            Some(movable_gigantic_store),
        )?;
        #[cfg(tierkit_test)]
        let test_dir = debugfs::DebugfsDir::new(c"test", Some(&debugfs))?;
        #[cfg(tierkit_test)]
        let register_delay = test_dir.file(
            c"movable_register_delay_ms",
            0o600,
            (),
            register_delay_show,
            Some(register_delay_store),
        )?;
        #[cfg(tierkit_test)]
        let fail_backing = test_dir.file(
            c"fail_next_backing",
            0o600,
            (),
            fail_backing_show,
            Some(fail_backing_store),
        )?;
        let mem_notifier = mapping::MemoryNotifier::register(device.clone())?;
        let gigantic_dir = debugfs::DebugfsDir::new(c"gigantic", Some(&debugfs))?;
        let pool_file = gigantic_dir.file(
            c"pool",
            0o600,
            device.pool.clone(),
            |pool, f| pool.show(f),
            Some(|pool, buf| pool.store(buf)),
        )?;
        let pool_worker = clear::refill::PoolWorker::start(device.pool.clone())?;
        let dev = KBox::pin_init(dev::TkDevice::new(device), GFP_KERNEL)?;
        pr_info!(
            "loaded ({} possible nodes, memory on {:#x})\n",
            shim::node::nr_node_ids(),
            wi::memory_nodes().0
        );
        Ok(TierKit {
            _pool_worker: pool_worker,
            _pool_file: pool_file,
            _gigantic_dir: gigantic_dir,
            _mem_notifier: mem_notifier,
            _wi_files: wi_files,
            _stats_files: stats_files,
            _movable_gigantic: movable_gigantic,
            #[cfg(tierkit_test)]
            _register_delay: register_delay,
            #[cfg(tierkit_test)]
            _fail_backing: fail_backing,
            #[cfg(tierkit_test)]
            _test_dir: test_dir,
            _dev: dev,
            _debugfs: debugfs,
            _movable: pages::movable::MovableExit,
        })
    }
}

impl Drop for TierKit {
    fn drop(&mut self) {
        pr_info!("unloaded\n");
    }
}

/// Facts of the running kernel that every tierkit test relies on: the
/// default topology has node 0 with CPUs and memory, and at least one
/// memory-only node (emulated CXL).
#[kunit_tests(tierkit_topology)]
mod topology_tests {
    use crate::shim::node;

    #[test]
    fn node0_has_cpus_and_memory() {
        assert!(node::online(0));
        assert!(node::has_memory(0));
        assert!(node::has_cpu(0));
        assert!(node::nr_cpus(0) >= 1);
    }

    #[test]
    fn a_cpuless_memory_node_exists() {
        let n = node::nr_node_ids();
        let cpuless = (0..n)
            .filter(|&nid| node::has_memory(nid) && !node::has_cpu(nid))
            .count();
        assert!(cpuless >= 1);
    }

    #[test]
    fn free_pages_are_counted_per_node() {
        assert!(node::free_pages(0) > 0);
        // An id past nr_node_ids has no memory and no free pages.
        let past = node::nr_node_ids() + 1;
        assert!(!node::has_memory(past));
        assert_eq!(node::free_pages(past), 0);
    }
}
