// SPDX-License-Identifier: GPL-2.0
/*
 * tierkit C shim: node and memory hotplug notifiers: a node gaining or losing memory (the
 * weight table) and a memory block going offline (tierkit moves its pages out).
 * Declared in src/shim.h, called from src/shim.rs.
 */
#include <linux/memory.h>
#include <linux/node.h>
#include <linux/notifier.h>

#include "shim.h"

#include "shim.h"

/* --- weighted interleave: node hotplug ---------------------------------- */

static tk_node_event_fn tk_node_event_cb;
static void *tk_node_event_ctx;

/* Like mm/mempolicy.c wi_node_notifier(): a node gained or lost memory. */
static int tk_node_notifier_call(struct notifier_block *nb,
				 unsigned long action, void *data)
{
	struct node_notify *nn = data;

	switch (action) {
	case NODE_ADDED_FIRST_MEMORY:
		tk_node_event_cb(tk_node_event_ctx, nn->nid, true);
		break;
	case NODE_REMOVED_LAST_MEMORY:
		tk_node_event_cb(tk_node_event_ctx, nn->nid, false);
		break;
	}
	return NOTIFY_OK;
}

static struct notifier_block tk_node_nb = {
	.notifier_call = tk_node_notifier_call,
	.priority = 0,
};

/* One registration at a time: @cb(@ctx, nid, added) until unregistered. */
int tk_register_node_notifier(tk_node_event_fn cb, void *ctx)
{
	tk_node_event_cb = cb;
	tk_node_event_ctx = ctx;
	return register_node_notifier(&tk_node_nb);
}

void tk_unregister_node_notifier(void)
{
	unregister_node_notifier(&tk_node_nb);
}

/* --- memory hotplug: blocks going offline --------------------------------- */

static tk_mem_event_fn tk_mem_event_cb;
static void *tk_mem_event_ctx;

/*
 * MEM_GOING_OFFLINE runs after the range is isolated (nothing new is
 * allocated there) and before the kernel migrates what it can: tierkit
 * moves its own pages out of the range here, or refuses (notifier error:
 * the offline fails at once with that errno).
 */
static int tk_memory_notifier_call(struct notifier_block *nb,
				   unsigned long action, void *data)
{
	struct memory_notify *mn = data;

	if (action != MEM_GOING_OFFLINE)
		return NOTIFY_OK;
	return notifier_from_errno(tk_mem_event_cb(tk_mem_event_ctx, mn->start_pfn,
						   mn->nr_pages));
}

static struct notifier_block tk_memory_nb = {
	.notifier_call = tk_memory_notifier_call,
	.priority = 0,
};

/* One registration at a time: @cb(@ctx, start_pfn, nr_pages) until unregistered. */
int tk_register_memory_notifier(tk_mem_event_fn cb, void *ctx)
{
	tk_mem_event_cb = cb;
	tk_mem_event_ctx = ctx;
	return register_memory_notifier(&tk_memory_nb);
}

void tk_unregister_memory_notifier(void)
{
	unregister_memory_notifier(&tk_memory_nb);
}

/*
 * __GFP_RETRY_MAYFAIL, which the Rust bindings do not export: tierkit's
 * pages for userspace are allocated in a syscall (mmap, TK_IOC_BULK), so
 * a shortage must fail the call with ENOMEM, not invoke the OOM killer;
 * for a charge past memory.max, try_charge_memcg() then fails the charge
 * instead of running the memcg OOM killer.
 */
