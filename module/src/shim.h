/* SPDX-License-Identifier: GPL-2.0 */
/* Prototypes of the tierkit C shim (shim.c); the Rust side is shim.rs. */
#ifndef TIERKIT_SHIM_H
#define TIERKIT_SHIM_H

#include <linux/types.h>
#include <linux/workqueue.h>

struct page;
struct mutex;
struct seq_file;
struct dentry;
struct vm_area_struct;

/* A debugfs file's callbacks (module/src/debugfs.rs builds these). */
struct tk_dbg_attr {
	int (*show)(void *ctx, struct seq_file *m);
	int (*store)(void *ctx, const char *buf, size_t len);
	void *ctx;
};

bool tk_cpu_online(int cpu);
int tk_node_next_cpu(int nid, int prev);
unsigned int tk_nr_cpus_node(int nid);
int tk_cpu_package(int cpu);
int tk_nr_node_ids(void);
bool tk_node_online(int nid);
bool tk_node_has_memory(int nid);
u64 tk_current_mems_allowed(void);
bool tk_node_has_cpu(int nid);
unsigned long tk_node_free_pages(int nid);
struct page *tk_alloc_pages_node(int nid, gfp_t gfp, unsigned int order);
unsigned long tk_page_to_pfn(const struct page *page);
struct page *tk_pfn_to_page(unsigned long pfn);
void *tk_page_address(const struct page *page);
void tk_clear_pages(void *addr, unsigned int npages);
const char *tk_clear_pages_variant(void);
bool tk_init_on_alloc(void);
struct page *tk_alloc_contig(unsigned long nr_pages, int nid, bool movable, bool folio);
int tk_folio_ref_count(struct page *page);
int tk_contig_to_folio(struct page *page, unsigned long nr_pages);
#if IS_ENABLED(CONFIG_KUNIT)
void tk_test_page_ref_add(struct page *page, int nr);
int tk_test_pin_bias(void);
#endif
bool tk_node_has_movable(int nid);
gfp_t tk_gfp_highuser_movable(void);
struct page *tk_alloc_page_away(int nid);
struct page *tk_alloc_page_on(int nid, bool movable);
void tk_page_move_charge(struct page *old, struct page *new);
bool tk_page_ref_freeze(struct page *page, int expected);
void tk_page_ref_unfreeze(struct page *page, int count);
void tk_copy_page(struct page *dst, struct page *src);
bool tk_page_maybe_dma_pinned(struct page *page);
struct address_space;
void tk_free_contig(struct page *page, unsigned long nr_pages);
void tk_cond_resched(void);
u64 tk_ktime_get_ns(void);
void tk_sleep_interruptible_ms(unsigned int ms);
struct workqueue_struct *tk_alloc_workqueue(const char *name);

gfp_t tk_gfp_noretry(void);
gfp_t tk_gfp_retry_mayfail(void);

bool tk_fatal_signal_pending(void);
int tk_mutex_lock_killable(struct mutex *lock);
int tk_mutex_lock_interruptible(struct mutex *lock);
void tk_set_freezable(void);
unsigned long tk_totalram_pages(void);

struct dentry *tk_debugfs_dir(const char *name, struct dentry *parent);
struct dentry *tk_debugfs_file(const char *name, umode_t mode,
			       struct dentry *parent, struct tk_dbg_attr *attr);
void tk_debugfs_remove(struct dentry *d);

/* Implemented in Rust (module/src/mapping.rs): map the page at @pgoff, or -errno. */
#define TK_FAULT_WRITE 1	/* a write fault */
#define TK_FAULT_COW 2		/* a copy-on-write vma (tk_vma_set_cow()) */
int tk_mapping_fault(void *backing, struct vm_area_struct *vma, unsigned long addr,
		     unsigned long pgoff, unsigned int flags);
/* Implemented in Rust (module/src/mapping/cow.rs): 0, -EAGAIN (copied), -errno. */
int tk_mapping_mkwrite(void *backing, unsigned long pgoff, struct page *page);
void tk_page_share(struct page *page);
bool tk_page_unshare(struct page *page);
bool tk_page_shared(struct page *page);
void tk_vma_set_cow(struct vm_area_struct *vma, void *backing);
int tk_mmap_lock_cow_current(unsigned long start, unsigned long end);
void tk_mmap_read_unlock_current(void);
void *tk_vma_backing_at(unsigned long addr, unsigned long *pgoff, unsigned long *end,
			void **file_private, bool *gigantic);
int tk_vm_insert_page(struct vm_area_struct *vma, unsigned long addr, struct page *page);
/* Implemented in Rust (module/src/mapping.rs): a vma of @backing made, gone. */
void tk_mapping_vma_open(void *backing);
void tk_mapping_vma_close(void *backing);

typedef int (*tk_mem_event_fn)(void *ctx, unsigned long start_pfn, unsigned long nr_pages);
int tk_register_memory_notifier(tk_mem_event_fn cb, void *ctx);
void tk_unregister_memory_notifier(void);

/* tierkit's pages in ZONE_MOVABLE (shim_movable.c, module/src/pages/movable.rs). */
int tk_movable_track(struct page *page, unsigned long nr_pages);
void tk_movable_put(struct page *page, unsigned long nr_pages);
unsigned long tk_movable_busy(unsigned long start_pfn, unsigned long nr_pages);
void tk_movable_offlining(unsigned long start_pfn, unsigned long nr_pages);
unsigned long tk_movable_orphans(void);
void tk_movable_exit(void);
struct page *tk_pfn_to_online_page(unsigned long pfn);
void tk_vma_set_backing(struct vm_area_struct *vma, void *backing, bool movable);

/* Test fills (KUnit suites of clear/ and wi/). */
void tk_memset64(void *addr, u64 value, size_t count);

/* /dev/tierkit gigantic mappings (module/src/dev.rs, mapping.rs). */
struct file;
void tk_file_use_dev_fops(struct file *file);
int tk_file_own_mapping(struct file *file);
void tk_file_put_mapping(struct file *file);
struct file *tk_mapped_file(int pid, unsigned long addr, unsigned long *start,
			    unsigned long *end, u64 *id);
void tk_vma_set_gigantic(struct vm_area_struct *vma, void *backing, bool movable);
/* Implemented in Rust (mapping.rs): the pfn of the GiB at @pgoff, or -errno. */
void tk_vma_set_gigantic_cow(struct vm_area_struct *vma, void *backing);
vm_fault_t tk_gigantic_map_pud(void *backing, struct vm_fault *vmf, unsigned long pgoff,
			       unsigned int flags);
vm_fault_t tk_gigantic_map_pte(void *backing, struct vm_fault *vmf, unsigned long pgoff,
			       unsigned long addr, unsigned int flags);
/* Called by those two, the backing's lock held (shim_vma.c). */
vm_fault_t tk_gigantic_insert_pud(struct vm_fault *vmf, unsigned long pfn, bool write,
				  bool *stale);
vm_fault_t tk_gigantic_insert_pte(struct vm_fault *vmf, struct page *page);
/* Implemented in Rust (mapping/gib.rs): copy on write of a shared GiB. */
int tk_gigantic_mkwrite(void *backing, unsigned long pgoff, struct page *page);
/* Implemented in Rust (dev.rs): is the file with this private_data gigantic? */
bool tk_file_gigantic(void *private_data);
/* What tk_walk() found at an address (uapi TK_WALK_*). */
#define TK_WALK_NONE	0
#define TK_WALK_PTE	1
#define TK_WALK_PMD	2
#define TK_WALK_PUD	3
int tk_walk(unsigned long addr, unsigned long *pfn, int *nid);

/* tk_page_refs() flags (uapi TK_PAGE_*). */
#define TK_PAGE_BUDDY	1
#define TK_PAGE_ANON	2
int tk_page_refs(unsigned long pfn, int *refcount, int *mapcount,
		 unsigned int *order, int *nid, unsigned int *flags);

/* The pre-cleared gigantic pool (module/src/clear/ready.rs, refill.rs). */
unsigned long tk_node_gigantic_capacity(int nid, bool movable);
void tk_bind_to_node_cpus(int cpu_node);
unsigned int tk_shrinker_numa_aware(void);

#endif /* TIERKIT_SHIM_H */
