// SPDX-License-Identifier: GPL-2.0
/*
 * tierkit C shim: the bookkeeping that lets the memory notifier answer for
 * every tierkit page in ZONE_MOVABLE, from its allocation until it is back
 * in the allocator (module/src/pages/movable.rs has the Rust side and the
 * invariant).
 *
 * - Per memory section, a count of tierkit's pages in ZONE_MOVABLE there
 *   (an xarray indexed by section number; the counters are never freed
 *   before module exit, so a reader needs no lock).
 * - Orphans: pages (or 1 GiB folios) whose tierkit owner let go while
 *   someone else still held a reference (a pipe, O_DIRECT, io_uring, a
 *   ptrace peek). tierkit keeps its own reference and the count, and frees
 *   them once its reference is the only one left: at the next offline of
 *   their block, or by a delayed work that looks once a second while there
 *   are any.
 *
 * Stays C: page_ref_freeze(), page_zonenum(),
 * pfn_to_section_nr() and the delayed work are static inlines and macros.
 * Declared in src/shim.h, called from src/pages/movable.rs.
 */
#include <linux/list.h>
#include <linux/memory_hotplug.h>
#include <linux/mm.h>
#include <linux/mmzone.h>
#include <linux/page_ref.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>

#include "shim.h"

static DEFINE_XARRAY(tk_movable_counts);
/*
 * The pfns an offline is taking down, from its MEM_GOING_OFFLINE until its
 * MEM_OFFLINE or MEM_CANCEL_OFFLINE (offlines are serialized by
 * mem_hotplug_lock, so there is one at most); both 0 otherwise.
 */
static unsigned long tk_offlining_start, tk_offlining_end;
static DEFINE_SPINLOCK(tk_orphan_lock);
static LIST_HEAD(tk_orphans);
static unsigned long tk_nr_orphans;

static void tk_orphan_work_fn(struct work_struct *work);
static DECLARE_DELAYED_WORK(tk_orphan_work, tk_orphan_work_fn);

/* How long the orphan work waits before it looks again. */
#define TK_ORPHAN_PERIOD HZ

/* In C: page_zonenum() is an inline with no Rust helper. */
static bool tk_is_movable(struct page *page)
{
	return page_zonenum(page) == ZONE_MOVABLE;
}

/* The counter of @pfn's section; made (GFP_KERNEL) if @create. */
/* In C: pfn_to_section_nr() is a macro; the xarray of counters is kept beside it. */
static atomic_long_t *tk_section_count(unsigned long pfn, bool create)
{
	unsigned long sec = pfn_to_section_nr(pfn);
	atomic_long_t *c = xa_load(&tk_movable_counts, sec);
	void *old;

	if (c || !create)
		return c;
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return NULL;
	old = xa_cmpxchg(&tk_movable_counts, sec, NULL, c, GFP_KERNEL);
	if (xa_is_err(old)) {
		kfree(c);
		return NULL;
	}
	if (old) {
		kfree(c);
		return old;
	}
	return c;
}

/* Adds @delta to the counts of pfns @pfn..@pfn + @nr (counters exist). */
/* In C: walks sections with the SECTION macros; no Rust binding. */
static void tk_count_range(unsigned long pfn, unsigned long nr, long delta)
{
	unsigned long end = pfn + nr;

	while (pfn < end) {
		unsigned long next = min(end, ALIGN(pfn + 1, PAGES_PER_SECTION));
		atomic_long_t *c = tk_section_count(pfn, false);

		if (!WARN_ON_ONCE(!c))
			atomic_long_add(delta * (long)(next - pfn), c);
		pfn = next;
	}
}

/* In C: page_zonenum() and the per-section counts (macros) above. */
int tk_movable_track(struct page *page, unsigned long nr_pages)
{
	unsigned long pfn = page_to_pfn(page), end = pfn + nr_pages, p;

	if (!tk_is_movable(page))
		return 0;
	for (p = pfn; p < end; p = ALIGN(p + 1, PAGES_PER_SECTION))
		if (!tk_section_count(p, true))
			return -ENOMEM;
	tk_count_range(pfn, nr_pages, 1);
	/*
	 * An offline marks its range (tk_movable_offlining()), then its
	 * notifier reads the counts, with a full barrier between. Either it
	 * sees this page counted, or the range is seen marked here: then the
	 * page is given back and the caller allocates again (the range is
	 * isolated: nothing is allocated from it any more).
	 */
	smp_mb__after_atomic();
	if (pfn < READ_ONCE(tk_offlining_end) &&
	    end > READ_ONCE(tk_offlining_start)) {
		tk_count_range(pfn, nr_pages, -1);
		return -EAGAIN;
	}
	return 0;
}

/* Drops tierkit's reference to @page if it is the only one: true if freed. */
/* In C: page_ref_freeze() and folio_put() are inlines with no Rust helper. */
static bool tk_try_free(struct page *page, unsigned long nr_pages)
{
	struct folio *folio = page_folio(page);

	if (!folio_ref_freeze(folio, 1))
		return false;
	folio_ref_unfreeze(folio, 1);
	if (tk_is_movable(page))
		tk_count_range(page_to_pfn(page), nr_pages, -1);
	if (folio_test_large(folio))
		folio_put(folio);
	else
		__free_pages(page, 0);
	return true;
}

/* In C: page_ref_freeze() and the orphan list, under the section macros above. */
void tk_movable_put(struct page *page, unsigned long nr_pages)
{
	if (!tk_is_movable(page)) {
		if (PageHead(page))
			folio_put(page_folio(page));
		else
			__free_pages(page, 0);
		return;
	}
	if (tk_try_free(page, nr_pages))
		return;
	/* Someone else holds it: keep it, and its count, until they let go. */
	page->private = nr_pages;
	spin_lock(&tk_orphan_lock);
	list_add_tail(&page->lru, &tk_orphans);
	tk_nr_orphans++;
	spin_unlock(&tk_orphan_lock);
	/* Pending already: it looks within a period anyway. */
	queue_delayed_work(system_dfl_wq, &tk_orphan_work, TK_ORPHAN_PERIOD);
}

/*
 * Frees the orphans in pfns @start..@end (all if @end is 0) whose only
 * reference left is tierkit's. Returns how many orphans are left in total.
 */
/* In C: page_ref_freeze() on the orphans: an inline with no Rust helper. */
static unsigned long tk_orphans_reap(unsigned long start, unsigned long end)
{
	struct page *page, *next;
	unsigned long left;
	LIST_HEAD(mine);
	LIST_HEAD(kept);

	spin_lock(&tk_orphan_lock);
	list_for_each_entry_safe(page, next, &tk_orphans, lru) {
		unsigned long pfn = page_to_pfn(page);

		if (end && (pfn + page->private <= start || pfn >= end))
			continue;
		list_move_tail(&page->lru, &mine);
		tk_nr_orphans--;
	}
	spin_unlock(&tk_orphan_lock);
	list_for_each_entry_safe(page, next, &mine, lru) {
		unsigned long nr = page->private;

		list_del(&page->lru);
		page->private = 0;
		if (!tk_try_free(page, nr)) {
			page->private = nr;
			list_add_tail(&page->lru, &kept);
		}
		cond_resched();
	}
	spin_lock(&tk_orphan_lock);
	list_for_each_entry_safe(page, next, &kept, lru) {
		list_move_tail(&page->lru, &tk_orphans);
		tk_nr_orphans++;
	}
	left = tk_nr_orphans;
	spin_unlock(&tk_orphan_lock);
	return left;
}

/* In C: a delayed_work callback: DECLARE_DELAYED_WORK and the timer macros have no binding. */
static void tk_orphan_work_fn(struct work_struct *work)
{
	if (tk_orphans_reap(0, 0))
		queue_delayed_work(system_dfl_wq, &tk_orphan_work,
				   TK_ORPHAN_PERIOD);
}

/* In C: queues the orphan reap: delayed_work macros have no binding. */
void tk_movable_offlining(unsigned long start_pfn, unsigned long nr_pages)
{
	WRITE_ONCE(tk_offlining_start, start_pfn);
	WRITE_ONCE(tk_offlining_end, start_pfn + nr_pages);
	/* Pairs with the barrier in tk_movable_track(). */
	smp_mb();
}

/* In C: pfn_to_section_nr() over a range: macros with no Rust binding. */
unsigned long tk_movable_busy(unsigned long start_pfn, unsigned long nr_pages)
{
	unsigned long end = start_pfn + nr_pages, pfn, busy = 0;

	tk_orphans_reap(start_pfn, end);
	/* Pairs with the barrier in tk_movable_track(). */
	smp_mb();
	for (pfn = ALIGN_DOWN(start_pfn, PAGES_PER_SECTION); pfn < end;
	     pfn += PAGES_PER_SECTION) {
		atomic_long_t *c = tk_section_count(pfn, false);

		if (c)
			busy += atomic_long_read(c);
	}
	return busy;
}

/* In C: reads the orphan count kept by the C code above. */
unsigned long tk_movable_orphans(void)
{
	unsigned long n;

	spin_lock(&tk_orphan_lock);
	n = tk_nr_orphans;
	spin_unlock(&tk_orphan_lock);
	return n;
}

/* In C: cancel_delayed_work_sync() of the C delayed work above. */
void tk_movable_exit(void)
{
	struct page *page, *next;
	atomic_long_t *c;
	unsigned long sec;
	LIST_HEAD(left);

	cancel_delayed_work_sync(&tk_orphan_work);
	tk_orphans_reap(0, 0);
	/*
	 * What is still held by others becomes theirs: tierkit puts its
	 * reference, and the last holder frees the page. No notifier answers
	 * for it any more (see the Rust side's limits).
	 */
	spin_lock(&tk_orphan_lock);
	list_splice_init(&tk_orphans, &left);
	tk_nr_orphans = 0;
	spin_unlock(&tk_orphan_lock);
	list_for_each_entry_safe(page, next, &left, lru) {
		list_del(&page->lru);
		page->private = 0;
		if (PageHead(page))
			folio_put(page_folio(page));
		else
			put_page(page);
	}
	xa_for_each(&tk_movable_counts, sec, c)
		kfree(c);
	xa_destroy(&tk_movable_counts);
}

/*
 * The struct page of @pfn if its section is online, else NULL: every pfn
 * walker of the module goes through this (an offline section's memmap is
 * poisoned under DEBUG_VM).
 */
/* In C: pfn_to_online_page() is a macro over the section macros; no Rust helper. */
struct page *tk_pfn_to_online_page(unsigned long pfn)
{
	return pfn_to_online_page(pfn);
}
