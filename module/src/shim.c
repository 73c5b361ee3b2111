// SPDX-License-Identifier: GPL-2.0
/*
 * tierkit C shim: one-line wrappers around static inline functions and
 * macros that Rust cannot call. Each wrapper is declared in src/shim.rs
 * with the same signature; keep the two in sync.
 */
#include <linux/capability.h>
#include <linux/cpumask.h>
#include <linux/debugfs.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pagemap.h>
#include <linux/seq_file.h>
#include <linux/string.h>
#include <linux/gfp.h>
#include <linux/highmem.h>
#include <linux/memory.h>
#include <linux/huge_mm.h>
#include <linux/kthread.h>
#include <linux/memcontrol.h>
#include <linux/log2.h>
#include <linux/shrinker.h>
#include <linux/slab.h>
#include <linux/wait.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/mmap_lock.h>
#include <linux/pgtable.h>
#include <linux/sched/mm.h>
#include <linux/mmzone.h>
#include <linux/node.h>
#include <linux/nodemask.h>
#include <linux/notifier.h>
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

unsigned int tk_nr_cpu_ids(void)
{
	return nr_cpu_ids;
}

bool tk_cpu_online(int cpu)
{
	return cpu >= 0 && cpu < nr_cpu_ids && cpu_online(cpu);
}

/* Next online CPU of @nid after @prev (-1 to start); >= nr_cpu_ids at the end. */
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

unsigned int tk_nr_cpus_node(int nid)
{
	return cpumask_weight_and(cpumask_of_node(nid), cpu_online_mask);
}

int tk_nr_node_ids(void)
{
	return nr_node_ids;
}

bool tk_node_online(int nid)
{
	return nid >= 0 && nid < nr_node_ids && node_online(nid);
}

bool tk_node_has_memory(int nid)
{
	return nid >= 0 && nid < nr_node_ids && node_state(nid, N_MEMORY);
}

bool tk_node_has_cpu(int nid)
{
	return nid >= 0 && nid < nr_node_ids && node_state(nid, N_CPU);
}

/* numa_nearest_node(nid, N_CPU): the node whose CPUs are nearest @nid. */
int tk_nearest_cpu_node(int nid)
{
	return numa_nearest_node(nid, N_CPU);
}

/* Free pages on @nid, summed over its zones (pages). */
unsigned long tk_node_free_pages(int nid)
{
	unsigned long sum = 0;
	int i;

	if (!tk_node_online(nid) || !NODE_DATA(nid))
		return 0;
	for (i = 0; i < MAX_NR_ZONES; i++)
		sum += zone_page_state(&NODE_DATA(nid)->node_zones[i], NR_FREE_PAGES);
	return sum;
}

/* --- pages --------------------------------------------------------------- */

/* alloc_pages_node() with __GFP_THISNODE: never falls back to another node. */
struct page *tk_alloc_pages_node(int nid, gfp_t gfp, unsigned int order)
{
	return alloc_pages_node(nid, gfp | __GFP_THISNODE | __GFP_NOWARN, order);
}

unsigned long tk_page_to_pfn(const struct page *page)
{
	return page_to_pfn(page);
}

struct page *tk_pfn_to_page(unsigned long pfn)
{
	return pfn_to_page(pfn);
}

void *tk_page_address(const struct page *page)
{
	return page_address(page);
}

int tk_page_to_nid(const struct page *page)
{
	return page_to_nid(page);
}

/* The kernel's own clear_pages(): rep stosb / rep stosq / unrolled movq. */
void tk_clear_pages(void *addr, unsigned int npages)
{
	clear_pages(addr, npages);
}

/* Which clear_pages() variant the alternatives picked on this CPU. */
const char *tk_clear_pages_variant(void)
{
	if (boot_cpu_has(X86_FEATURE_ERMS))
		return "erms";
	if (boot_cpu_has(X86_FEATURE_REP_GOOD))
		return "rep_good";
	return "unrolled";
}

/* Is init_on_alloc on? Then the allocator zeroes what it hands out. */
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
void tk_free_contig(struct page *page, unsigned long nr_pages)
{
	if (PageHead(page))
		folio_put(page_folio(page));
	else
		free_contig_range(page_to_pfn(page), nr_pages);
}

/* References to the folio of @page (a test and debug read-out). */
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
void tk_test_page_ref_add(struct page *page, int nr)
{
	if (nr >= 0)
		folio_ref_add(page_folio(page), nr);
	else
		folio_ref_sub(page_folio(page), -nr);
}

int tk_test_pin_bias(void)
{
	return GUP_PIN_COUNTING_BIAS;
}
#endif

/* Does @nid have memory in ZONE_MOVABLE (e.g. hotplugged online_movable)? */
bool tk_node_has_movable(int nid)
{
	if (!tk_node_online(nid) || !NODE_DATA(nid))
		return false;
	return zone_managed_pages(&NODE_DATA(nid)->node_zones[ZONE_MOVABLE]) > 0;
}

/* GFP_HIGHUSER_MOVABLE: a user page that may come from ZONE_MOVABLE. */
gfp_t tk_gfp_highuser_movable(void)
{
	return GFP_HIGHUSER_MOVABLE;
}

/*
 * An order-0 page from @nid's zonelist restricted to @nmask, kernel zones
 * first, then ZONE_MOVABLE if @movable, charged to @old's memory cgroup
 * (set_active_memcg(), as the kernel's migration keeps a folio's charge
 * with mem_cgroup_migrate()). __GFP_NORETRY: a charge the owner's cgroup
 * cannot take fails rather than reclaiming or OOM-killing there.
 */
static struct page *tk_alloc_page_charged(int nid, nodemask_t *nmask,
					  struct page *old, bool movable,
					  gfp_t extra)
{
	struct mem_cgroup *memcg = NULL, *prev;
	struct folio *folio;
	gfp_t gfp = __GFP_ACCOUNT | __GFP_NOWARN | extra;

#ifdef CONFIG_MEMCG
	rcu_read_lock();
	memcg = folio_memcg(page_folio(old));
	if (memcg && !css_tryget(&memcg->css))
		memcg = NULL;
	rcu_read_unlock();
	if (memcg)
		gfp |= __GFP_NORETRY;
#endif
	/* An uncharged page's replacement is not charged to the caller. */
	if (!memcg)
		gfp &= ~__GFP_ACCOUNT;
	prev = set_active_memcg(memcg);
	folio = __folio_alloc(GFP_KERNEL | gfp, 0, nid, nmask);
	if (!folio && movable)
		folio = __folio_alloc(GFP_HIGHUSER_MOVABLE | gfp, 0, nid, nmask);
	set_active_memcg(prev);
	mem_cgroup_put(memcg);
	return folio ? &folio->page : NULL;
}

/*
 * A replacement for @old, a page of @nid that is going offline: on the
 * nearest other node with memory, in @nid's zonelist order, as
 * do_migrate_range() picks (N_MEMORY without @nid; @nid itself if it is
 * the only one), charged to @old's memory cgroup: the mapping's owner
 * keeps paying for its page, and an offliner in a small cgroup is not
 * refused.
 */
struct page *tk_alloc_page_away(int nid, struct page *old)
{
	nodemask_t nmask = node_states[N_MEMORY];

	node_clear(nid, nmask);
	if (nodes_empty(nmask))
		node_set(nid, nmask);
	return tk_alloc_page_charged(nid, &nmask, old, true, 0);
}

/*
 * A page on @nid and nowhere else, to take the place of @old when a
 * rebalance moves it there, charged to @old's memory cgroup. From
 * ZONE_MOVABLE only if @movable: the mapping's vmas refuse long-term pins
 * only if they were set up with pages there (tk_vma_set_backing()). A
 * move is optional, so as the kernel's NUMA-balancing migration
 * (alloc_misplaced_dst_folio()): no reclaim retries, no reserves, never
 * the OOM killer (__GFP_NORETRY), and only @nid (__GFP_THISNODE); a node
 * without a free page leaves the page where it is.
 */
struct page *tk_alloc_page_on(int nid, struct page *old, bool movable)
{
	nodemask_t nmask = NODE_MASK_NONE;

	if (nid < 0 || nid >= MAX_NUMNODES || !node_state(nid, N_MEMORY))
		return NULL;
	node_set(nid, nmask);
	return tk_alloc_page_charged(nid, &nmask, old, movable,
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
bool tk_page_ref_freeze(struct page *page, int expected)
{
	return folio_ref_freeze(page_folio(page), expected);
}

void tk_page_ref_unfreeze(struct page *page, int count)
{
	folio_ref_unfreeze(page_folio(page), count);
}

void tk_copy_page(struct page *dst, struct page *src)
{
	copy_highpage(dst, src);
}

/* A page someone may be doing DMA to (FOLL_PIN): it must not be moved. */
bool tk_page_maybe_dma_pinned(struct page *page)
{
	return folio_maybe_dma_pinned(page_folio(page));
}

/* Zap every PTE of @mapping's mappings that maps file page @pgoff. */
void tk_unmap_mapping_page(struct address_space *mapping, unsigned long pgoff)
{
	unmap_mapping_pages(mapping, pgoff, 1, true);
}

/* @nr pages from @pgoff: one walk and one TLB flush for all of them. */
void tk_unmap_mapping_pages(struct address_space *mapping, unsigned long pgoff,
			    unsigned long nr)
{
	unmap_mapping_pages(mapping, pgoff, nr, true);
}

bool tk_signal_pending(void)
{
	return signal_pending(current);
}

/* --- scheduling, time, workqueues ---------------------------------------- */

void tk_cond_resched(void)
{
	cond_resched();
}

/* Sleeps up to @ms milliseconds; a fatal signal wakes it early. */
void tk_sleep_killable_ms(unsigned int ms)
{
	schedule_timeout_killable(msecs_to_jiffies(ms));
}

u64 tk_ktime_get_ns(void)
{
	return ktime_get_ns();
}

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
gfp_t tk_gfp_retry_mayfail(void)
{
	return __GFP_RETRY_MAYFAIL;
}

/* __GFP_NORETRY, which the Rust bindings do not export. */
gfp_t tk_gfp_noretry(void)
{
	return __GFP_NORETRY;
}

/* --- reliability: signals, locks, capabilities, limits ------------------- */

/* fatal_signal_pending(current): long loops back out when this is true. */
bool tk_fatal_signal_pending(void)
{
	return fatal_signal_pending(current);
}

/* mutex_lock_killable() is a macro under CONFIG_DEBUG_LOCK_ALLOC. */
int tk_mutex_lock_killable(struct mutex *lock)
{
	return mutex_lock_killable(lock);
}

/* capable(CAP_SYS_ADMIN): gigantic mode and the clear benchmark need it. */
bool tk_capable_sys_admin(void)
{
	return capable(CAP_SYS_ADMIN);
}

/* totalram_pages(): the base of tierkit's global limit. */
unsigned long tk_totalram_pages(void)
{
	return totalram_pages();
}

/* --- debugfs files that pin the module ------------------------------------ */

/*
 * The Rust debugfs file operations of 7.3 carry no owner, so an open
 * debugfs file does not pin the module, and closing it after rmmod runs
 * full_proxy_release() on file operations that are gone. These do: the
 * debugfs proxy takes a reference on fops->owner for every open file
 * (fops_get() in full_proxy_open_regular()), so rmmod is refused while one
 * is open. The show/store callbacks are Rust's (module/src/debugfs.rs).
 */
static int tk_dbg_show(struct seq_file *m, void *v)
{
	const struct tk_dbg_attr *a = m->private;

	return a->show(a->ctx, m);
}

static int tk_dbg_open(struct inode *inode, struct file *file)
{
	int ret = single_open(file, tk_dbg_show, inode->i_private);

	/*
	 * seq_open() clears FMODE_PWRITE; the sysfs files tierkit mirrors
	 * accept pwrite(2) at any offset (kernfs_fop_open() restores it).
	 */
	if (!ret && (file->f_mode & FMODE_WRITE))
		file->f_mode |= FMODE_PWRITE;
	return ret;
}

/* A write is taken whole, at most a page, NUL-terminated (as sysfs). */
static ssize_t tk_dbg_write(struct file *file, const char __user *ubuf,
			    size_t len, loff_t *ppos)
{
	const struct tk_dbg_attr *a = file_inode(file)->i_private;
	char *buf;
	int ret;

	/* As sysfs_kf_write(): an empty write does nothing and returns 0. */
	if (!len)
		return 0;
	if (len > PAGE_SIZE)
		return -EINVAL;
	buf = memdup_user_nul(ubuf, len);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	ret = a->store(a->ctx, buf, len);
	kfree(buf);
	return ret < 0 ? ret : len;
}

static const struct file_operations tk_dbg_ro_fops = {
	.owner = THIS_MODULE,
	.open = tk_dbg_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.release = single_release,
};

static const struct file_operations tk_dbg_rw_fops = {
	.owner = THIS_MODULE,
	.open = tk_dbg_open,
	.read = seq_read,
	.write = tk_dbg_write,
	.llseek = seq_lseek,
	.release = single_release,
};

struct dentry *tk_debugfs_dir(const char *name, struct dentry *parent)
{
	return debugfs_create_dir(name, parent);
}

/* Read-only when @attr has no store callback. */
struct dentry *tk_debugfs_file(const char *name, umode_t mode,
			       struct dentry *parent, struct tk_dbg_attr *attr)
{
	return debugfs_create_file(name, mode, parent, attr,
				   attr->store ? &tk_dbg_rw_fops : &tk_dbg_ro_fops);
}

/* debugfs_remove(): recursive; waits for callbacks in flight. */
void tk_debugfs_remove(struct dentry *d)
{
	debugfs_remove(d);
}

/* --- /dev/tierkit mappings: the fault handler ----------------------------- */

/*
 * Every page of a tierkit mapping is inserted at mmap; a fault happens only
 * after the PTE was zapped (MADV_DONTNEED, or the kernel dropping it). The
 * file still holds the page, so the fault maps the same page again.
 */
static vm_fault_t tk_vm_fault(struct vm_fault *vmf)
{
	int err = tk_mapping_fault(vmf->vma->vm_private_data, vmf->vma,
				   vmf->address & PAGE_MASK, vmf->pgoff);

	if (err == 0 || err == -EBUSY)	/* -EBUSY: another fault mapped it */
		return VM_FAULT_NOPAGE;
	return err == -ENOMEM ? VM_FAULT_OOM : VM_FAULT_SIGBUS;
}

/* vm_insert_page() for tk_mapping_fault(), which holds the page's lock. */
int tk_vm_insert_page(struct vm_area_struct *vma, unsigned long addr, struct page *page)
{
	return vm_insert_page(vma, addr, page);
}

/*
 * Mappings whose pages may be in ZONE_MOVABLE get a pfn_mkwrite, which
 * makes the kernel treat the vma as needing dirty tracking
 * (vma_needs_dirty_tracking()), so a long-term writable pin (FOLL_PIN |
 * FOLL_LONGTERM | FOLL_WRITE: io_uring fixed buffers, RDMA, VFIO) fails
 * at once with EFAULT in check_vma_flags(). Without it such a pin finds a
 * page in ZONE_MOVABLE that it must migrate first, cannot isolate it (a
 * driver's page is not on the LRU), and __gup_longterm_locked() retries
 * forever. Shorter pins (O_DIRECT, vmsplice, process_vm_*) are unaffected.
 * The only cost: PTEs a fault maps later are write-protected until their
 * first write (wp_page_shared(), no page_mkwrite: reused at once).
 * tierkit maps no special PTEs in these vmas, so this is never called for
 * one; it lets a write fault map the pfn writable as without it.
 */
static vm_fault_t tk_pfn_mkwrite(struct vm_fault *vmf)
{
	return 0;
}

static const struct vm_operations_struct tk_vm_ops = {
	.fault = tk_vm_fault,
};

static const struct vm_operations_struct tk_vm_ops_movable = {
	.fault = tk_vm_fault,
	.pfn_mkwrite = tk_pfn_mkwrite,
};

/*
 * Called at the end of ->mmap, with mmap_lock held for writing: the vma
 * gets tierkit's fault handler and @backing (see tk_mapping_page()).
 * @movable: some of its pages are in ZONE_MOVABLE (see tk_pfn_mkwrite()).
 */
void tk_vma_set_backing(struct vm_area_struct *vma, void *backing, bool movable)
{
	vma->vm_ops = movable ? &tk_vm_ops_movable : &tk_vm_ops;
	vma->vm_private_data = backing;
}

/* Is @page in ZONE_MOVABLE? */
bool tk_page_in_movable_zone(struct page *page)
{
	return page_zonenum(page) == ZONE_MOVABLE;
}

/* --- test fills (KUnit suites of clear/ and wi/) ------------------------- */

/*
 * memset64(): on x86_64 an inline `rep stosq`, 8 bytes per iteration. The
 * exported memset() uses `rep stosb` on CPUs with FSRS, which QEMU's TCG
 * runs one byte at a time.
 */
void tk_memset64(void *addr, u64 value, size_t count)
{
	memset64(addr, value, count);
}

/* --- /dev/tierkit gigantic mappings: one PUD per GiB at first touch ------- */

/*
 * The Rust miscdevice of 7.3 builds /dev/tierkit's file_operations without
 * .get_unmapped_area. tk_file_use_dev_fops(), called from the Rust open(),
 * points the file at a copy of them that has it (as misc_open() itself
 * swaps f_op with replace_fops()). The copy keeps .owner (this module), so
 * the module reference misc_open() took for the file's f_op is the one
 * fput() drops; the copy lives in the module, which cannot go while a file
 * is open.
 */
static struct file_operations tk_dev_fops;
static DEFINE_MUTEX(tk_dev_fops_lock);
static bool tk_dev_fops_ready;

/*
 * As drivers/dax/device.c dax_get_unmapped_area(): a mapping of at least
 * 1 GiB whose file offset is GiB aligned gets a GiB-aligned address, so
 * each GiB can be one PUD. MAP_FIXED and a hint the kernel cannot honour
 * aligned get the usual search; gigantic mmap then refuses an unaligned
 * start (EINVAL).
 */
static unsigned long tk_get_unmapped_area(struct file *filp, unsigned long addr,
					  unsigned long len, unsigned long pgoff,
					  unsigned long flags)
{
	unsigned long off = pgoff << PAGE_SHIFT, len_align, got;

	/*
	 * A gigantic file never gets a fixed address that is not GiB
	 * aligned: gigantic mmap refuses it anyway, and mremap(MREMAP_FIXED)
	 * asks here before move_page_tables(), which would walk a PUD leaf
	 * it cannot move whole as if it were a PMD table.
	 */
	if ((flags & MAP_FIXED) && !IS_ALIGNED(addr, PUD_SIZE) &&
	    tk_file_gigantic(filp->private_data))
		return -EINVAL;
	if ((flags & MAP_FIXED) || len < PUD_SIZE || !IS_ALIGNED(off, PUD_SIZE))
		goto out;
	if (addr) {
		if (!IS_ALIGNED(addr, PUD_SIZE))
			goto out;
		got = mm_get_unmapped_area(filp, addr, len, pgoff, flags);
		if (got == addr)
			return got;
	}
	len_align = len + PUD_SIZE;
	if (len_align < len)
		goto out;
	got = mm_get_unmapped_area(filp, 0, len_align, pgoff, flags);
	if (!IS_ERR_VALUE(got))
		return ALIGN(got, PUD_SIZE);
out:
	return mm_get_unmapped_area(filp, addr, len, pgoff, flags);
}

/*
 * Every open of /dev/tierkit gets an address space of its own. The device
 * inode's i_mapping is shared by every file opened through it, so
 * unmap_mapping_pages() on it (a page moved by a rebalance or an offline)
 * would zap every file's vmas at those offsets, other processes' too: a
 * partial zap of another file's PUD-mapped GiB without its mmap_lock
 * WARNs in zap_pud_range() and splits that GiB. With its own address
 * space (as guest_memfd has with an inode per file), a file's vmas are
 * the only ones in its i_mmap tree. It is set up as inode_init_always()
 * sets up an inode's: empty a_ops, the inode as host, an invalidate_lock.
 * The VFS unlinks every vma from it before ->release, which frees it.
 */
static struct lock_class_key tk_mapping_invalidate_key;

int tk_file_own_mapping(struct file *file)
{
	struct address_space *m = kmalloc(sizeof(*m), GFP_KERNEL);

	if (!m)
		return -ENOMEM;
	address_space_init_once(m);
	m->a_ops = &empty_aops;
	m->host = file_inode(file);
	mapping_set_gfp_mask(m, GFP_HIGHUSER_MOVABLE);
	init_rwsem(&m->invalidate_lock);
	lockdep_set_class_and_name(&m->invalidate_lock, &tk_mapping_invalidate_key,
				   "tierkit_mapping.invalidate_lock");
	file->f_mapping = m;
	return 0;
}

/* In ->release: the address space tk_file_own_mapping() gave @file. */
void tk_file_put_mapping(struct file *file)
{
	struct address_space *m = file->f_mapping;

	if (m && m != file_inode(file)->i_mapping) {
		WARN_ON_ONCE(mapping_mapped(m));
		file->f_mapping = file_inode(file)->i_mapping;
		kfree(m);
	}
}

void tk_file_use_dev_fops(struct file *file)
{
	mutex_lock(&tk_dev_fops_lock);
	if (!tk_dev_fops_ready) {
		tk_dev_fops = *file->f_op;
		tk_dev_fops.get_unmapped_area = tk_get_unmapped_area;
		tk_dev_fops_ready = true;
	}
	mutex_unlock(&tk_dev_fops_lock);
	if (WARN_ON_ONCE(tk_dev_fops.owner != file->f_op->owner))
		return;
	file->f_op = &tk_dev_fops;
}

/*
 * The first touch of a GiB (and a write to a GiB mapped read-only, see
 * wp_huge_pud()) comes here at PUD order: tk_gigantic_fault() (Rust,
 * mapping.rs) allocates and clears the GiB once, and it is mapped by one
 * special PUD. The PUD holds no reference (zap_huge_pud() and fork's
 * copy_huge_pud() take and drop none on a VM_MIXEDMAP vma): the file
 * holds the GiB's folio until release, after every vma of it is gone, and
 * get_user_pages() takes its own references on that folio. Any failure is
 * SIGBUS for this GiB only. A smaller order falls back to
 * tk_gigantic_pte_fault().
 */
static vm_fault_t tk_gigantic_huge_fault(struct vm_fault *vmf, unsigned int order)
{
	struct vm_area_struct *vma = vmf->vma;
	unsigned long addr = vmf->address & PUD_MASK;
	unsigned long pgoff, pfn = 0;

	if (order != PUD_ORDER)
		return VM_FAULT_FALLBACK;
	if (addr < vma->vm_start || addr + PUD_SIZE > vma->vm_end)
		return VM_FAULT_SIGBUS;
	pgoff = vma->vm_pgoff + ((addr - vma->vm_start) >> PAGE_SHIFT);
	if (tk_gigantic_fault(vma->vm_private_data, pgoff, &pfn))
		return VM_FAULT_SIGBUS;
	return vmf_insert_pfn_pud(vmf, pfn, vmf->flags & FAULT_FLAG_WRITE);
}

/*
 * A 4 KiB fault in a gigantic mapping: the kernel did not try the PUD
 * (THP disabled for the process or the vma: PR_SET_THP_DISABLE,
 * MADV_NOHUGEPAGE, transparent_hugepage=never), or a PMD table already
 * sits in the PUD slot (pmd_alloc() of such an earlier fault put it there,
 * and nothing frees page tables before munmap), so it never will for this
 * GiB. The GiB is made as at a PUD fault, and its 4 KiB page at @addr is
 * mapped by a PTE with vm_insert_page(): a normal PTE that holds a
 * reference on the GiB's folio and its rmap, both dropped by the zap.
 * Contents, node and lifetime are the GiB's; only the page size differs.
 */
static vm_fault_t tk_gigantic_pte_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	unsigned long addr = vmf->address & PAGE_MASK;
	struct page *page = NULL;
	int err;

	/*
	 * A GiB that cannot be made is SIGBUS, as at a PUD fault: never
	 * VM_FAULT_OOM, which the #PF handler answers by retrying the fault
	 * (pagefault_out_of_memory() kills nothing outside a memcg OOM), so
	 * an ENOMEM that lasts, no free aligned GiB on the node, would fault
	 * again forever. Only vm_insert_page()'s ENOMEM, a page table, is the
	 * transient shortage VM_FAULT_OOM is for.
	 */
	if (tk_gigantic_pte_page(vma->vm_private_data, vmf->pgoff, addr, &page))
		return VM_FAULT_SIGBUS;
	err = vm_insert_page(vma, addr, page);
	if (err == 0 || err == -EBUSY)	/* -EBUSY: another fault mapped it */
		return VM_FAULT_NOPAGE;
	return vmf_error(err);
}

/* As device-dax: a gigantic vma splits (munmap, mprotect, mremap) only at GiB boundaries. */
static int tk_gigantic_may_split(struct vm_area_struct *vma, unsigned long addr)
{
	return IS_ALIGNED(addr, PUD_SIZE) ? 0 : -EINVAL;
}

/*
 * mremap may move a gigantic vma only to a GiB-aligned address. Checked
 * first by tk_get_unmapped_area() (before any page table moves); this is
 * a second line.
 */
static int tk_gigantic_mremap(struct vm_area_struct *vma)
{
	return IS_ALIGNED(vma->vm_start, PUD_SIZE) ? 0 : -EINVAL;
}

static const struct vm_operations_struct tk_gigantic_vm_ops = {
	.fault = tk_gigantic_pte_fault,
	.huge_fault = tk_gigantic_huge_fault,
	.may_split = tk_gigantic_may_split,
	.mremap = tk_gigantic_mremap,
};

static const struct vm_operations_struct tk_gigantic_vm_ops_movable = {
	.fault = tk_gigantic_pte_fault,
	.huge_fault = tk_gigantic_huge_fault,
	.may_split = tk_gigantic_may_split,
	.mremap = tk_gigantic_mremap,
	.pfn_mkwrite = tk_pfn_mkwrite,
};

/*
 * ->mmap of a gigantic mapping (mmap_lock held for writing; the vma is
 * VM_MIXEDMAP, its start GiB aligned): nothing is mapped yet. VM_HUGEPAGE
 * lets the PUD fault happen with transparent_hugepage=madvise too.
 * @movable: its GiBs may come from ZONE_MOVABLE (see tk_pfn_mkwrite()).
 */
void tk_vma_set_gigantic(struct vm_area_struct *vma, void *backing, bool movable)
{
	vm_flags_set(vma, VM_HUGEPAGE);
	vma->vm_ops = movable ? &tk_gigantic_vm_ops_movable : &tk_gigantic_vm_ops;
	vma->vm_private_data = backing;
}

#ifdef TIERKIT_TEST
/*
 * What maps @addr in current's page tables, for tests: TK_WALK_* level,
 * and for a PUD or PMD leaf the pfn of the 4 KiB page at @addr and its
 * node. TK_WALK_PTE means a PTE table covers @addr (its entries are not
 * read). -EFAULT if no vma covers @addr, -EINTR on a fatal signal. The
 * mmap lock (read) with a vma covering @addr keeps the tables down to
 * the PMD.
 */
int tk_walk(unsigned long addr, unsigned long *pfn, int *nid)
{
	struct mm_struct *mm = current->mm;
	int level = TK_WALK_NONE;
	pgd_t *pgd;
	p4d_t *p4d;
	pud_t *pudp, pud;
	pmd_t *pmdp, pmd;

	*pfn = 0;
	*nid = NUMA_NO_NODE;
	if (!mm)
		return -EFAULT;
	if (mmap_read_lock_killable(mm))
		return -EINTR;
	if (!vma_lookup(mm, addr)) {
		mmap_read_unlock(mm);
		return -EFAULT;
	}
	pgd = pgd_offset(mm, addr);
	if (pgd_none(*pgd) || pgd_bad(*pgd))
		goto out;
	p4d = p4d_offset(pgd, addr);
	if (p4d_none(*p4d) || p4d_bad(*p4d))
		goto out;
	pudp = pud_offset(p4d, addr);
	pud = pudp_get(pudp);
	if (pud_none(pud) || !pud_present(pud))
		goto out;
	if (pud_leaf(pud)) {
		level = TK_WALK_PUD;
		*pfn = pud_pfn(pud) + ((addr & ~PUD_MASK) >> PAGE_SHIFT);
		goto out;
	}
	if (pud_bad(pud))
		goto out;
	pmdp = pmd_offset(pudp, addr);
	pmd = pmdp_get_lockless(pmdp);
	if (pmd_none(pmd) || !pmd_present(pmd))
		goto out;
	if (pmd_leaf(pmd)) {
		level = TK_WALK_PMD;
		*pfn = pmd_pfn(pmd) + ((addr & ~PMD_MASK) >> PAGE_SHIFT);
		goto out;
	}
	/*
	 * A PTE table: 4 KiB pages (or none) map this 2 MiB. The PTE itself
	 * is not read (pte_offset_map_lock() is not exported); for the test
	 * it is enough that no PUD or PMD leaf maps the address.
	 */
	level = TK_WALK_PTE;
out:
	mmap_read_unlock(mm);
	if (*pfn && pfn_valid(*pfn))
		*nid = page_to_nid(pfn_to_page(*pfn));
	return level;
}

/*
 * Who holds the folio of @pfn, for tests (TK_IOC_PAGE_REFS): -EINVAL if
 * @pfn has no struct page. A snapshot: the folio may be freed or split
 * right after, so only fields that stay meaningful are read. The first
 * page of a free buddy block reports TK_PAGE_BUDDY, any other free page
 * a refcount of 0.
 */
int tk_page_refs(unsigned long pfn, int *refcount, int *mapcount,
		 unsigned int *order, int *nid, unsigned int *flags)
{
	struct page *page;
	struct folio *folio;

	*refcount = *mapcount = 0;
	*order = 0;
	*flags = 0;
	*nid = NUMA_NO_NODE;
	if (!pfn_valid(pfn))
		return -EINVAL;
	page = pfn_to_page(pfn);
	*nid = page_to_nid(page);
	if (PageBuddy(page)) {
		*flags = TK_PAGE_BUDDY;
		return 0;
	}
	folio = page_folio(page);
	*refcount = folio_ref_count(folio);
	if (*refcount <= 0)	/* free (inside a larger buddy block) or frozen */
		return 0;
	*order = folio_order(folio);
	*mapcount = folio_mapcount(folio);
	if (folio_test_anon(folio))
		*flags |= TK_PAGE_ANON;
	return 0;
}

#endif /* TIERKIT_TEST */

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
