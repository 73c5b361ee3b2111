// SPDX-License-Identifier: GPL-2.0
/*
 * tierkit's C boundary, the general part: what the 7.3 kernel crate and its
 * bindings do not reach (nodes and CPUs, pages and folios, gfp flags,
 * scheduling). Most functions wrap one static inline or macro; some hold
 * logic that needs many of them at once (the allocation of a replacement
 * page with a nodemask, the contiguous allocation of a gigantic range,
 * the move of a memory cgroup charge). Each says on the line above it
 * which missing binding keeps it here. Declared in src/shim.h and
 * src/shim.rs with the same signature; keep the three in sync. The shim's
 * other files each hold one job: shim_hotplug.c (the memory notifier),
 * shim_debugfs.c, shim_vma.c (vm_operations, gigantic mappings),
 * shim_pool.c (what the pool needs from C), shim_movable.c (ZONE_MOVABLE
 * bookkeeping) and shim_walk.c (test interfaces). What the kernel crate
 * reaches is Rust: the pool's kthread and shrinker (clear/refill.rs), the
 * node notifier (wi/debugfs.rs), nr_cpu_ids, signal_pending(),
 * numa_nearest_node(),
 * page_to_nid(), capable(), unmap_mapping_pages() and
 * kthread_freezable_should_stop().
 */
#include <linux/capability.h>
#include <linux/cpumask.h>
#include <linux/cpuset.h>
#include <linux/freezer.h>
#include <linux/fs.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pagemap.h>
#include <linux/string.h>
#include <linux/gfp.h>
#include <linux/highmem.h>
#include <linux/memcontrol.h>
#include <linux/log2.h>
#include <linux/slab.h>
#include <linux/wait.h>
#include <linux/mm.h>
#include <linux/pgtable.h>
#include <linux/sched/mm.h>
#include <linux/mmzone.h>
#include <linux/nodemask.h>
#include <linux/numa.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/timekeeping.h>
#include <linux/topology.h>
#include <linux/vmstat.h>
#include <linux/workqueue.h>
#include <asm/cpufeature.h>

#include "shim.h"

/* --- nodes and CPUs ------------------------------------------------------ */

/* In C: cpu_online() is a cpumask inline; kernel::cpu has only nr_cpu_ids() and CpuId. */
bool tk_cpu_online(int cpu)
{
	return cpu >= 0 && cpu < nr_cpu_ids && cpu_online(cpu);
}

/* Next online CPU of @nid after @prev (-1 to start); >= nr_cpu_ids at the end. */
/* In C: cpumask_of_node() is an arch macro; kernel::cpumask cannot name a node's mask. */
int tk_node_next_cpu(int nid, int prev)
{
	const struct cpumask *m = cpumask_of_node(nid);
	int cpu = prev;

	for (;;) {
		cpu = cpumask_next(cpu, m);
		if (cpu >= nr_cpu_ids || cpu_online(cpu))
			return cpu;
	}
}

/* In C: nr_cpus_node() and cpumask_of_node() are macros; no node API in the kernel crate. */
unsigned int tk_nr_cpus_node(int nid)
{
	return cpumask_weight_and(cpumask_of_node(nid), cpu_online_mask);
}

/* In C: topology_physical_package_id() is an arch macro; no topology API in the kernel crate. */
int tk_cpu_package(int cpu)
{
	if (cpu < 0 || cpu >= nr_cpu_ids || !cpu_online(cpu))
		return -1;
	return topology_physical_package_id(cpu);
}

/* In C: nr_node_ids is a macro when MAX_NUMNODES is 1; no node API in the kernel crate. */
int tk_nr_node_ids(void)
{
	return nr_node_ids;
}

/* In C: node_online() is a node_state() inline; no node API in the kernel crate. */
bool tk_node_online(int nid)
{
	return nid >= 0 && nid < nr_node_ids && node_online(nid);
}

/* In C: node_state(N_MEMORY) is an inline; no node API in the kernel crate. */
bool tk_node_has_memory(int nid)
{
	return nid >= 0 && nid < nr_node_ids && node_state(nid, N_MEMORY);
}

/*
 * The nodes 0..63 that current's cpuset allows (cpuset_current_mems_allowed:
 * current->mems_allowed, or node_states[N_MEMORY] without CONFIG_CPUSETS).
 * One word, read once: read_mems_allowed_begin() uses static keys that are
 * not exported to modules, and the seqcount is not needed for a single
 * word. A cpuset change writes the union of the old and new nodes, then
 * the new ones, so any value read is nodes the task was allowed.
 */
/* In C: current->mems_allowed is a task_struct field under CONFIG_CPUSETS, a macro over node_states otherwise; no cpuset API in the kernel crate. */
u64 tk_current_mems_allowed(void)
{
	return READ_ONCE(cpuset_current_mems_allowed.bits[0]);
}

/* In C: node_state(N_CPU) is an inline; no node API in the kernel crate. */
bool tk_node_has_cpu(int nid)
{
	return nid >= 0 && nid < nr_node_ids && node_state(nid, N_CPU);
}

/*
 * Free pages on @nid, summed over its zones (pages): what the buddy
 * allocator holds, read with the per-CPU deltas of NR_FREE_PAGES folded in
 * (zone_page_state_snapshot(); zone_page_state() lags by up to the stat
 * threshold per CPU), plus the pages parked on the per-CPU free lists,
 * which NR_FREE_PAGES does not count but which are free all the same (as
 * show_free_areas() sums "free_pcp"). An allocation that refills a per-CPU
 * list (rmqueue_bulk() takes up to batch << alloc_factor pages, thousands
 * once the list's high mark has grown) then moves pages from one term to
 * the other instead of showing as a drop.
 */
/* In C: NODE_DATA() and zone_page_state() are a macro and an inline; no zone binding. */
unsigned long tk_node_free_pages(int nid)
{
	unsigned long sum = 0;
	int i, cpu;

	if (!tk_node_online(nid) || !NODE_DATA(nid))
		return 0;
	for (i = 0; i < MAX_NR_ZONES; i++) {
		struct zone *zone = &NODE_DATA(nid)->node_zones[i];

		if (!populated_zone(zone))
			continue;
		sum += zone_page_state_snapshot(zone, NR_FREE_PAGES);
		for_each_online_cpu(cpu)
			sum += READ_ONCE(per_cpu_ptr(zone->per_cpu_pageset, cpu)->count);
	}
	return sum;
}

/* --- pages --------------------------------------------------------------- */

/* alloc_pages_node() with __GFP_THISNODE: never falls back to another node. */
/* In C: alloc_pages_node() is an inline; kernel::page::Page::alloc_page takes no node or order. */
struct page *tk_alloc_pages_node(int nid, gfp_t gfp, unsigned int order)
{
	return alloc_pages_node(nid, gfp | __GFP_THISNODE | __GFP_NOWARN, order);
}

/* In C: page_to_pfn() is a memory-model macro with no Rust helper. */
unsigned long tk_page_to_pfn(const struct page *page)
{
	return page_to_pfn(page);
}

/* In C: pfn_to_page() is a memory-model macro with no Rust helper. */
struct page *tk_pfn_to_page(unsigned long pfn)
{
	return pfn_to_page(pfn);
}

/* In C: page_address() of a raw struct page: the kernel crate reaches it only through its own Page. */
void *tk_page_address(const struct page *page)
{
	return page_address(page);
}

/* The kernel's own clear_pages(): rep stosb / rep stosq / unrolled movq. */
/* In C: clear_pages() is an x86 inline (alternatives); no Rust helper. */
void tk_clear_pages(void *addr, unsigned int npages)
{
	clear_pages(addr, npages);
}

/* Which clear_pages() variant the alternatives picked on this CPU. */
/* In C: boot_cpu_has() and the X86_FEATURE_* bits are macros; no Rust binding. */
const char *tk_clear_pages_variant(void)
{
	if (boot_cpu_has(X86_FEATURE_ERMS))
		return "erms";
	if (boot_cpu_has(X86_FEATURE_REP_GOOD))
		return "rep_good";
	return "unrolled";
}

/* Is init_on_alloc on? Then the allocator zeroes what it hands out. */
/* In C: want_init_on_alloc() is a static-key inline; no Rust helper. */
bool tk_init_on_alloc(void)
{
	return want_init_on_alloc(GFP_KERNEL);
}

/*
 * A physically contiguous, naturally aligned range of @nr_pages on @nid,
 * never another node's memory. With @folio it is one compound folio of
 * that order (a 1 GiB range: what a PUD maps), whose head holds the only
 * reference; without, @nr_pages order-0 pages with one reference each.
 *
 * The range must be a folio when a PUD maps it: slow GUP
 * (follow_huge_pud() and __get_user_pages()) takes the references of
 * every 4 KiB page it hands out from a PUD leaf on page_folio() of the
 * first, and releases each on page_folio() of its own page. With order-0
 * pages that frees pages 1..N-1 of a multi-page GUP while they are still
 * mapped; on one folio the two sides balance.
 *
 * With init_on_alloc on, the allocator zeroes the range in
 * post_alloc_hook() (tk_init_on_alloc() tells the caller so, and the
 * caller does not clear it again).
 */
/* In C: alloc_contig_pages() is an alloc_hooks() macro; no Rust binding. */
struct page *tk_alloc_contig(unsigned long nr_pages, int nid, bool movable, bool folio)
{
	/*
	 * alloc_contig_pages() scans the zones up to gfp_zone(gfp):
	 * GFP_KERNEL never reaches ZONE_MOVABLE, __GFP_MOVABLE | __GFP_HIGHMEM
	 * does (tierkit's movable_gigantic opt-in).
	 */
	gfp_t gfp = GFP_KERNEL | __GFP_THISNODE | __GFP_NOWARN;
	struct page *page;

	if (movable)
		gfp |= __GFP_MOVABLE | __GFP_HIGHMEM;
	if (!folio)
		return alloc_contig_pages(nr_pages, gfp, nid, NULL);
	if (ilog2(nr_pages) > MAX_FOLIO_ORDER || !is_power_of_2(nr_pages))
		return NULL;
	/* As hugetlb's alloc_gigantic_frozen_folio(); the folio starts frozen. */
	page = alloc_contig_frozen_pages(nr_pages, gfp | __GFP_COMP, nid, NULL);
	if (page)
		folio_ref_unfreeze(page_folio(page), 1);
	return page;
}

/* Drops the reference tk_alloc_contig() gave: the range goes back to the
 * buddy allocator now, or, for a folio that GUP still holds (a pipe after
 * vmsplice, an O_DIRECT request in flight), when the last holder puts it. */
/* In C: PageHead(), page_folio() and folio_put() are macros and inlines with no Rust helper. */
void tk_free_contig(struct page *page, unsigned long nr_pages)
{
	if (PageHead(page))
		folio_put(page_folio(page));
	else
		free_contig_range(page_to_pfn(page), nr_pages);
}

/* References to the folio of @page (a test and debug read-out). */
/* In C: page_folio() and folio_ref_count() are inlines with no Rust helper. */
int tk_folio_ref_count(struct page *page)
{
	return folio_ref_count(page_folio(page));
}

#if IS_ENABLED(CONFIG_KUNIT)
/*
 * For KUnit: @nr more (or, negative, fewer) references on @page's folio,
 * as another holder would take them; GUP_PIN_COUNTING_BIAS of them is how
 * a FOLL_PIN of an order-0 page counts.
 */
/* In C: page_ref_add() is an inline with no Rust helper. */
void tk_test_page_ref_add(struct page *page, int nr)
{
	if (nr >= 0)
		folio_ref_add(page_folio(page), nr);
	else
		folio_ref_sub(page_folio(page), -nr);
}

/* In C: GUP_PIN_COUNTING_BIAS, read where the pin helpers are (folio inlines with no Rust helper). */
int tk_test_pin_bias(void)
{
	return GUP_PIN_COUNTING_BIAS;
}
#endif

/* Does @nid have memory in ZONE_MOVABLE (e.g. hotplugged online_movable)? */
/* In C: NODE_DATA() and zone_managed_pages() are a macro and an inline; no zone binding. */
bool tk_node_has_movable(int nid)
{
	if (!tk_node_online(nid) || !NODE_DATA(nid))
		return false;
	return zone_managed_pages(&NODE_DATA(nid)->node_zones[ZONE_MOVABLE]) > 0;
}

/* GFP_HIGHUSER_MOVABLE: a user page that may come from ZONE_MOVABLE. */
/* In C: GFP_HIGHUSER_MOVABLE combines __GFP_* macros bindgen does not evaluate. */
gfp_t tk_gfp_highuser_movable(void)
{
	return GFP_HIGHUSER_MOVABLE;
}

/*
 * An order-0 page from @nid's zonelist restricted to @nmask, kernel zones
 * first, then ZONE_MOVABLE if @movable, charged to nobody yet: a move
 * keeps the page's charge, which tk_page_move_charge() hands from the old
 * page to this one when the move commits, as the kernel's migration does
 * with mem_cgroup_migrate(). A cgroup at memory.max thus pays nothing for
 * a move, as for the kernel's own, and nothing is charged twice meanwhile.
 */
/* In C: __folio_alloc() is an alloc_hooks() macro; no Rust binding. */
static struct page *tk_alloc_page_for(int nid, nodemask_t *nmask, bool movable, gfp_t extra)
{
	struct folio *folio;
	gfp_t gfp = __GFP_NOWARN | extra;

	folio = __folio_alloc(GFP_KERNEL | gfp, 0, nid, nmask);
	if (!folio && movable)
		folio = __folio_alloc(GFP_HIGHUSER_MOVABLE | gfp, 0, nid, nmask);
	return folio ? &folio->page : NULL;
}

/*
 * Hands @old's memory cgroup charge to @new, a page from
 * tk_alloc_page_away() or tk_alloc_page_on() that takes @old's place.
 * tierkit's pages are charged as kernel memory (__GFP_ACCOUNT): the
 * charge is the obj_cgroup reference in memcg_data (MEMCG_DATA_KMEM),
 * which moves whole, as mem_cgroup_migrate() moves a user folio's
 * (commit to the new folio, clear the old); @old is then freed
 * uncharged and @new uncharges at its own free. An uncharged @old leaves
 * @new uncharged. Caller: @old's references frozen, @new not shared.
 */
/* In C: page_folio() is an inline, and memcg_data exists only under CONFIG_MEMCG (#ifdef). */
void tk_page_move_charge(struct page *old, struct page *new)
{
#ifdef CONFIG_MEMCG
	struct folio *o = page_folio(old), *n = page_folio(new);

	if (WARN_ON_ONCE(n->memcg_data))
		return;
	n->memcg_data = o->memcg_data;
	o->memcg_data = 0;
#endif
}

/*
 * A replacement for a page of @nid that is going offline: on the nearest
 * other node with memory, in @nid's zonelist order, as do_migrate_range()
 * picks (N_MEMORY without @nid; @nid itself if it is the only one); the
 * old page's charge follows it (tk_page_move_charge()): the mapping's
 * owner keeps paying for its page, and neither the owner's nor an
 * offliner's cgroup limit refuses the move.
 */
/* In C: builds a nodemask (nodemask_t macros) for the allocator; no nodemask binding. */
struct page *tk_alloc_page_away(int nid)
{
	nodemask_t nmask = node_states[N_MEMORY];

	node_clear(nid, nmask);
	if (nodes_empty(nmask))
		node_set(nid, nmask);
	return tk_alloc_page_for(nid, &nmask, true, 0);
}

/*
 * A page on @nid and nowhere else, to take the place of a page a
 * rebalance moves there; that page's charge follows it
 * (tk_page_move_charge()). From ZONE_MOVABLE only if @movable: the
 * mapping's vmas refuse long-term pins (tk_vma_set_backing()). A
 * move is optional, so as the kernel's NUMA-balancing migration
 * (alloc_misplaced_dst_folio()): no reclaim retries, no reserves, never
 * the OOM killer (__GFP_NORETRY), and only @nid (__GFP_THISNODE); a node
 * without a free page leaves the page where it is.
 */
/* In C: the allocator with a node and gfp flags: alloc_hooks() macros, no Rust binding. */
struct page *tk_alloc_page_on(int nid, bool movable)
{
	nodemask_t nmask = NODE_MASK_NONE;

	if (nid < 0 || nid >= MAX_NUMNODES || !node_state(nid, N_MEMORY))
		return NULL;
	node_set(nid, nmask);
	return tk_alloc_page_for(nid, &nmask, movable,
				 __GFP_THISNODE | __GFP_NORETRY | __GFP_NOMEMALLOC);
}

/*
 * Freezes @page's references at @expected (folio_ref_freeze(): to 0 if
 * and only if they are exactly @expected), as the kernel's migration does
 * before it copies a folio: a reference someone else took (a ptrace
 * POKEDATA or /proc/PID/mem write in progress, get_page_unless_zero() of a
 * pfn walker) could still be used to write the old page after the copy.
 * false: somebody holds one; the page was not touched.
 */
/* In C: page_ref_freeze() is an inline with no Rust helper. */
bool tk_page_ref_freeze(struct page *page, int expected)
{
	return folio_ref_freeze(page_folio(page), expected);
}

/* In C: page_ref_unfreeze() is an inline with no Rust helper. */
void tk_page_ref_unfreeze(struct page *page, int count)
{
	folio_ref_unfreeze(page_folio(page), count);
}

/* In C: copy_highpage() is an inline with no Rust helper. */
void tk_copy_page(struct page *dst, struct page *src)
{
	copy_highpage(dst, src);
}

/* A page someone may be doing DMA to (FOLL_PIN): it must not be moved. */
/* In C: folio_maybe_dma_pinned() and page_folio() are inlines with no Rust helper. */
bool tk_page_maybe_dma_pinned(struct page *page)
{
	return folio_maybe_dma_pinned(page_folio(page));
}

/* --- scheduling, time, workqueues ---------------------------------------- */

/* In C: cond_resched() is a macro (preempt model); the kernel crate has no binding for it. */
void tk_cond_resched(void)
{
	cond_resched();
}

/*
 * Sleeps up to @ms milliseconds in TASK_INTERRUPTIBLE: any signal wakes it
 * early, a stop signal finds the task in T, the freezer can freeze it, and
 * it does not count in the load average.
 */
/* In C: schedule_timeout_interruptible() with msecs_to_jiffies(): no interruptible sleep in kernel::time. */
void tk_sleep_interruptible_ms(unsigned int ms)
{
	schedule_timeout_interruptible(msecs_to_jiffies(ms));
}

/* In C: ktime_get_ns() is an inline, and kernel::time::Instant keeps its nanoseconds private. */
u64 tk_ktime_get_ns(void)
{
	return ktime_get_ns();
}

/* In C: alloc_workqueue() is a variadic macro; kernel::workqueue offers only the system queues. */
struct workqueue_struct *tk_alloc_workqueue(const char *name)
{
	/*
	 * Per-CPU (bound) workqueue, so queue_work_on() really runs on that
	 * CPU; 7.3 warns unless WQ_PERCPU or WQ_UNBOUND is explicit. Clearing
	 * work is long and CPU bound: WQ_CPU_INTENSIVE keeps it out of the
	 * pool's concurrency management. Not WQ_HIGHPRI: nice -20 workers
	 * clearing for seconds starve the CPU's ordinary work (under the
	 * debug kernel on emulated CXL memory, vmstat_shepherd waited 32 s
	 * behind two of them: a workqueue lockup report).
	 */
	return alloc_workqueue("%s", WQ_PERCPU | WQ_CPU_INTENSIVE, 0, name);
}

/*
 * __GFP_RETRY_MAYFAIL, which the Rust bindings do not export: tierkit's
 * pages for userspace are allocated in a syscall (mmap, TK_IOC_BULK), so
 * a shortage must fail the call with ENOMEM, not invoke the OOM killer;
 * for a charge past memory.max, try_charge_memcg() then fails the charge
 * instead of running the memcg OOM killer.
 */
/* In C: __GFP_RETRY_MAYFAIL is a macro over ___GFP_* bits bindgen does not evaluate. */
gfp_t tk_gfp_retry_mayfail(void)
{
	return __GFP_RETRY_MAYFAIL;
}

/* __GFP_NORETRY, which the Rust bindings do not export. */
/* In C: __GFP_NORETRY is a macro over ___GFP_* bits bindgen does not evaluate. */
gfp_t tk_gfp_noretry(void)
{
	return __GFP_NORETRY;
}

/* --- reliability: signals, locks, capabilities, limits ------------------- */

/* fatal_signal_pending(current): long loops back out when this is true. */
/* In C: fatal_signal_pending() is an inline; kernel::task offers only signal_pending(). */
bool tk_fatal_signal_pending(void)
{
	return fatal_signal_pending(current);
}

/* mutex_lock_killable() is a macro under CONFIG_DEBUG_LOCK_ALLOC. */
/* In C: mutex_lock_killable() is a macro under CONFIG_DEBUG_LOCK_ALLOC; kernel::sync::Mutex has no killable lock. */
int tk_mutex_lock_killable(struct mutex *lock)
{
	return mutex_lock_killable(lock);
}

/* In C: mutex_lock_interruptible() is a macro under CONFIG_DEBUG_LOCK_ALLOC; kernel::sync::Mutex has none. */
int tk_mutex_lock_interruptible(struct mutex *lock)
{
	return mutex_lock_interruptible(lock);
}

/* set_freezable() for a kthread (kthreads are not freezable by default). */
/* In C: set_freezable(): <linux/freezer.h> is not in the kernel crate's bindings. */
void tk_set_freezable(void)
{
	set_freezable();
}

/* totalram_pages(): the base of tierkit's global limit. */
/* In C: totalram_pages() is an inline over an atomic; no Rust helper. */
unsigned long tk_totalram_pages(void)
{
	return totalram_pages();
}

/* --- test fills (KUnit suites of clear/ and wi/) ------------------------- */

/*
 * memset64(): on x86_64 an inline `rep stosq`, 8 bytes per iteration. The
 * exported memset() uses `rep stosb` on CPUs with FSRS, which QEMU's TCG
 * runs one byte at a time.
 */
/* In C: memset64() is an x86 inline (rep stosq); no Rust helper. */
void tk_memset64(void *addr, u64 value, size_t count)
{
	memset64(addr, value, count);
}
