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

use kernel::prelude::*;

mod shim;

module! {
    type: TierKit,
    name: "tierkit",
    authors: ["tierkit developers"],
    description: "Weighted-interleave placement and parallel gigantic-page clearing",
    license: "GPL",
}

struct TierKit;

impl kernel::Module for TierKit {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        pr_info!("tierkit: loaded ({} possible nodes)\n", shim::node::nr_node_ids());
        Ok(TierKit)
    }
}

impl Drop for TierKit {
    fn drop(&mut self) {
        pr_info!("tierkit: unloaded\n");
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
        let cpuless = (0..n).filter(|&nid| node::has_memory(nid) && !node::has_cpu(nid)).count();
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
