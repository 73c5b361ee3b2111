// SPDX-License-Identifier: GPL-2.0
/*
 * tierkit C shim: what the pre-cleared gigantic pool needs from C.
 * Stays C: NODE_DATA(), zone_managed_pages(), node_state() and
 * cpumask_of_node() are macros or static inlines, SHRINKER_NUMA_AWARE a
 * macro bindgen cannot evaluate, and prep_compound_page() is not exported
 * (its parts are inlines of mm/internal.h, which Kbuild lets this file
 * include from the kernel's source tree). The refill kthread and the shrinker are
 * Rust (module/src/clear/refill.rs).
 * Declared in src/shim.h, called from src/shim.rs.
 */
#include <linux/mm.h>
#include <linux/cpumask.h>
#include <linux/mmzone.h>
#include <linux/sched.h>
#include <linux/shrinker.h>
#include <linux/topology.h>

#include "mm/internal.h"
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

/* Freeze attempts per page before tk_contig_to_folio() gives up. */
#define TK_FREEZE_TRIES 100

/*
 * Makes @nr_pages order-0 pages of tk_alloc_contig(..., folio = false)
 * (naturally aligned, each with one reference, the caller's) one compound
 * folio of order ilog2(@nr_pages) whose head holds that one reference, as
 * alloc_contig_frozen_pages(__GFP_COMP) makes one: every page frozen, then
 * prep_compound_page()'s steps, then the head unfrozen. The contents are
 * not touched. Returns 0; -EINVAL for a bad size; -EBUSY when a page kept
 * another reference (a speculative one, as compaction's scan takes) past
 * TK_FREEZE_TRIES tries: the pages are then left as they were.
 *
 * The pool keeps its ready ranges as order-0 pages, so that no compound
 * page straddles a memory block: isolate_single_pageblock() fails an
 * offline's isolation, before any memory notifier runs, when one that is
 * not hugetlb does. A range becomes a folio when a mapping takes it.
 */
/* In C: prep_compound_tail() and prep_compound_head() are inlines of mm/internal.h, page_ref_freeze() an inline; prep_compound_page() is not exported. */
int tk_contig_to_folio(struct page *page, unsigned long nr_pages)
{
	unsigned int order = ilog2(nr_pages);
	unsigned long i;
	int tries;

	if (!is_power_of_2(nr_pages) || !order || order > MAX_FOLIO_ORDER)
		return -EINVAL;
	for (i = 0; i < nr_pages; i++) {
		for (tries = 0; !page_ref_freeze(page + i, 1); tries++) {
			if (tries == TK_FREEZE_TRIES) {
				while (i--)
					page_ref_unfreeze(page + i, 1);
				return -EBUSY;
			}
			cond_resched();
		}
		if (!(i % 4096))
			cond_resched();
	}
	__SetPageHead(page);
	for (i = 1; i < nr_pages; i++) {
		prep_compound_tail(page + i, page, order);
		if (!(i % 4096))
			cond_resched();
	}
	prep_compound_head(page, order);
	page_ref_unfreeze(page, 1);
	return 0;
}
