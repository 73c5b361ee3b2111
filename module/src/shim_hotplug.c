// SPDX-License-Identifier: GPL-2.0
/*
 * tierkit C shim: the memory hotplug notifier: a memory block going offline
 * (tierkit moves its pages out, module/src/mapping.rs).
 * Stays C: <linux/memory.h> is not in the 7.3 bindings (bindings_helper.h),
 * so register_memory_notifier(), struct memory_notify and MEM_GOING_OFFLINE
 * are not reachable from Rust; notifier_from_errno() is a static inline.
 * The node notifier is Rust (module/src/wi/debugfs.rs).
 * Declared in src/shim.h, called from src/shim.rs.
 */
#include <linux/memory.h>
#include <linux/notifier.h>

#include "shim.h"

/* --- memory hotplug: blocks going offline --------------------------------- */

static tk_mem_event_fn tk_mem_event_cb;
static void *tk_mem_event_ctx;

/*
 * MEM_GOING_OFFLINE runs after the range is isolated (nothing new is
 * allocated there) and before the kernel migrates what it can: tierkit
 * moves its own pages out of the range here, or refuses (notifier error:
 * the offline fails at once with that errno). From then until the offline
 * ends or is cancelled, a tierkit page newly counted in the range is given
 * back and allocated again (shim_movable.c).
 */
/* In C: struct memory_notify and MEM_* come from <linux/memory.h>, not in the 7.3 bindings. */
static int tk_memory_notifier_call(struct notifier_block *nb,
				   unsigned long action, void *data)
{
	struct memory_notify *mn = data;

	switch (action) {
	case MEM_GOING_OFFLINE:
		/* Before anything is counted: see tk_movable_track(). */
		tk_movable_offlining(mn->start_pfn, mn->nr_pages);
		return notifier_from_errno(tk_mem_event_cb(tk_mem_event_ctx,
							   mn->start_pfn,
							   mn->nr_pages));
	case MEM_OFFLINE:
	case MEM_CANCEL_OFFLINE:
		tk_movable_offlining(0, 0);
		return NOTIFY_OK;
	default:
		return NOTIFY_OK;
	}
}

static struct notifier_block tk_memory_nb = {
	.notifier_call = tk_memory_notifier_call,
	.priority = 0,
};

/* One registration at a time: @cb(@ctx, start_pfn, nr_pages) until unregistered. */
/* In C: register_memory_notifier(): <linux/memory.h> is not in the 7.3 bindings. */
int tk_register_memory_notifier(tk_mem_event_fn cb, void *ctx)
{
	tk_mem_event_cb = cb;
	tk_mem_event_ctx = ctx;
	return register_memory_notifier(&tk_memory_nb);
}

/* In C: unregister_memory_notifier(): <linux/memory.h> is not in the 7.3 bindings. */
void tk_unregister_memory_notifier(void)
{
	unregister_memory_notifier(&tk_memory_nb);
}
