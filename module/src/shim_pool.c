// SPDX-License-Identifier: GPL-2.0
/*
 * tierkit C shim: the pre-cleared gigantic pool's C side: per-node capacity, the refill
 * kthread and the shrinker.
 * Declared in src/shim.h, called from src/shim.rs.
 */
#include <linux/mm.h>
#include <linux/cpumask.h>
#include <linux/kthread.h>
#include <linux/mmzone.h>
#include <linux/sched.h>
#include <linux/shrinker.h>
#include <linux/slab.h>
#include <linux/topology.h>
#include <linux/wait.h>

#include "shim.h"

#include "shim.h"

/* --- the pre-cleared gigantic pool (module/src/clear/ready.rs) ---------- */

/*
 * Managed pages of @nid in the zones a gigantic range may come from: the
 * kernel zones, and ZONE_MOVABLE too with @movable (tierkit's
 * movable_gigantic opt-in), as tk_alloc_contig() scans them.
 */
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

/*
 * The pool's refill thread: a kthread at nice 19 (as khugepaged), so that
 * it yields to everything else. It asks Rust how long to wait
 * (tk_pool_wait(): 0 = work is due now), sleeps that long or until
 * tk_pool_kick(), and otherwise refills one range (tk_pool_step()). The
 * Rust callbacks run in TASK_RUNNING and may sleep.
 */
struct tk_pool_thread {
	struct task_struct *task;
	wait_queue_head_t wq;
	atomic_t kicks;
	void *ctx;
};

/* The refill thread, known to the shrinker (see tk_pool_shrink_scan()). */
static struct task_struct *tk_pool_task;

static int tk_pool_threadfn(void *data)
{
	struct tk_pool_thread *t = data;

	sched_set_normal(current, MAX_NICE);
	while (!kthread_should_stop()) {
		int kicks = atomic_read(&t->kicks);
		long ms = tk_pool_wait(t->ctx);	/* 0: now, -1: until kicked */
		long timeout;

		if (!ms) {
			tk_pool_step(t->ctx);
			cond_resched();
			continue;
		}
		timeout = ms < 0 ? MAX_SCHEDULE_TIMEOUT : (long)msecs_to_jiffies(ms);
		wait_event_interruptible_timeout(t->wq,
			atomic_read(&t->kicks) != kicks || kthread_should_stop(),
			timeout);
	}
	return 0;
}

/* Starts the refill thread for @ctx (a Rust GiganticPool); NULL on failure. */
struct tk_pool_thread *tk_pool_thread_start(void *ctx)
{
	struct tk_pool_thread *t = kzalloc(sizeof(*t), GFP_KERNEL);
	struct task_struct *task;

	if (!t)
		return NULL;
	init_waitqueue_head(&t->wq);
	atomic_set(&t->kicks, 0);
	t->ctx = ctx;
	task = kthread_run(tk_pool_threadfn, t, "tierkit_pool");
	if (IS_ERR(task)) {
		kfree(t);
		return NULL;
	}
	t->task = task;
	WRITE_ONCE(tk_pool_task, task);
	return t;
}

/* Wakes the refill thread: a target went up or a range was taken. */
void tk_pool_kick(struct tk_pool_thread *t)
{
	atomic_inc(&t->kicks);
	wake_up(&t->wq);
}

/* Stops the thread (waits for its current step) and frees @t. */
void tk_pool_thread_stop(struct tk_pool_thread *t)
{
	WRITE_ONCE(tk_pool_task, NULL);
	kthread_stop(t->task);
	kfree(t);
}

/* kthread_should_stop() for the refill step's long clear. */
bool tk_kthread_should_stop(void)
{
	return kthread_should_stop();
}

/* Lets the current task run only on the CPUs of node @cpu_node. */
void tk_bind_to_node_cpus(int cpu_node)
{
	if (tk_node_online(cpu_node) && node_state(cpu_node, N_CPU))
		set_cpus_allowed_ptr(current, cpumask_of_node(cpu_node));
}

static unsigned long tk_pool_shrink_count(struct shrinker *s, struct shrink_control *sc)
{
	return tk_pool_count(s->private_data, sc->nid);
}

static unsigned long tk_pool_shrink_scan(struct shrinker *s, struct shrink_control *sc)
{
	unsigned long freed;

	/*
	 * Reclaim caused by the refill's own allocation (alloc_contig_pages()
	 * migrating pages out of the range) must not free the pool it fills.
	 */
	if (current == READ_ONCE(tk_pool_task))
		return SHRINK_STOP;
	freed = tk_pool_scan(s->private_data, sc->nid, sc->nr_to_scan);

	/* ~0UL: the pool was busy (try-lock), come back later. */
	return freed == ~0UL ? SHRINK_STOP : freed;
}

/*
 * A NUMA-aware shrinker over the pool @ctx, counting base pages (as the
 * huge zero page's shrinker does). NULL on failure.
 */
struct shrinker *tk_pool_shrinker_register(void *ctx)
{
	struct shrinker *s = shrinker_alloc(SHRINKER_NUMA_AWARE, "tierkit-gigantic-pool");

	if (!s)
		return NULL;
	s->count_objects = tk_pool_shrink_count;
	s->scan_objects = tk_pool_shrink_scan;
	s->seeks = DEFAULT_SEEKS;
	s->private_data = ctx;
	shrinker_register(s);
	return s;
}

/* Unregisters @s and waits for callbacks in flight. */
void tk_pool_shrinker_free(struct shrinker *s)
{
	shrinker_free(s);
}
