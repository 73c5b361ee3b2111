// SPDX-License-Identifier: GPL-2.0
/*
 * tierkit C shim: what the pre-cleared gigantic pool needs from C.
 * Stays C: NODE_DATA(), zone_managed_pages(), node_state() and
 * cpumask_of_node() are macros or static inlines, SHRINKER_NUMA_AWARE a
 * macro bindgen cannot evaluate. The refill kthread and the shrinker are
 * Rust (module/src/clear/refill.rs).
 * Declared in src/shim.h, called from src/shim.rs.
 */
#include <linux/mm.h>
#include <linux/cpumask.h>
#include <linux/mmzone.h>
#include <linux/sched.h>
#include <linux/shrinker.h>
#include <linux/topology.h>

#include "shim.h"

/* --- the pre-cleared gigantic pool (module/src/clear/ready.rs) ---------- */

/*
 * Managed pages of @nid in the zones a gigantic range may come from: the
 * kernel zones, and ZONE_MOVABLE too with @movable (tierkit's
 * movable_gigantic opt-in), as tk_alloc_contig() scans them.
 */
/* In C: NODE_DATA() and zone_managed_pages() are a macro and an inline; no zone binding. */
unsigned long tk_node_gigantic_capacity(int nid, bool movable)
{
	unsigned long pages = 0;
	int z, last = movable ? ZONE_MOVABLE : ZONE_NORMAL;

	if (!tk_node_online(nid) || !NODE_DATA(nid))
		return 0;
	for (z = 0; z <= last; z++)
		pages += zone_managed_pages(&NODE_DATA(nid)->node_zones[z]);
	return pages;
}

/* Lets the current task run only on the CPUs of node @cpu_node. */
/* In C: cpumask_of_node() is an arch macro; kernel::cpumask cannot name a node's mask. */
void tk_bind_to_node_cpus(int cpu_node)
{
	if (tk_node_online(cpu_node) && node_state(cpu_node, N_CPU))
		set_cpus_allowed_ptr(current, cpumask_of_node(cpu_node));
}

/* SHRINKER_NUMA_AWARE: BIT(2), a macro bindgen cannot evaluate. */
/* In C: SHRINKER_NUMA_AWARE is a macro bindgen cannot evaluate. */
unsigned int tk_shrinker_numa_aware(void)
{
	return SHRINKER_NUMA_AWARE;
}
