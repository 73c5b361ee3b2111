// SPDX-License-Identifier: GPL-2.0
/*
 * tierkit C shim: /dev/tierkit's vm_operations: the 4 KiB fault handler, and gigantic
 * mappings (GiB-aligned addresses, one PUD per GiB at first touch).
 * Stays C: vm_operations_struct tables (fault, huge_fault, ...) the 7.3
 * crate has no vtable for, and static inline page-table and vma helpers.
 * Declared in src/shim.h, called from src/shim.rs.
 */
#include <linux/mm.h>
#include <linux/fs.h>
#include <linux/huge_mm.h>
#include <linux/mman.h>
#include <linux/mutex.h>
#include <linux/pagemap.h>
#include <linux/pgtable.h>
#include <linux/pid.h>
#include <linux/sched/task.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "shim.h"

/* --- /dev/tierkit mappings: the fault handler ----------------------------- */

/*
 * Every page of a tierkit mapping is inserted at mmap; a fault happens only
 * after the PTE was zapped (MADV_DONTNEED, or the kernel dropping it). The
 * file still holds the page, so the fault maps the same page again.
 */
static const struct vm_operations_struct tk_vm_ops_cow;
static const struct vm_operations_struct tk_gigantic_vm_ops;
static const struct vm_operations_struct tk_gigantic_vm_ops_movable;
static const struct vm_operations_struct tk_gigantic_vm_ops_cow;

/* In C: a vm_operations_struct callback: the 7.3 crate has no vm_operations vtable. */
static vm_fault_t tk_vm_fault(struct vm_fault *vmf)
{
	unsigned int flags = 0;
	int err;

	if (vmf->flags & FAULT_FLAG_WRITE)
		flags |= TK_FAULT_WRITE;
	if (vmf->vma->vm_ops == &tk_vm_ops_cow)
		flags |= TK_FAULT_COW;
	err = tk_mapping_fault(vmf->vma->vm_private_data, vmf->vma,
			       vmf->address & PAGE_MASK, vmf->pgoff, flags);

	if (err == 0 || err == -EBUSY)	/* -EBUSY: another fault mapped it */
		return VM_FAULT_NOPAGE;
	return err == -ENOMEM ? VM_FAULT_OOM : VM_FAULT_SIGBUS;
}

/* vm_insert_page() for tk_mapping_fault(), which holds the page's lock. */
/* In C: vm_insert_page() from the C fault path above (the kernel crate's needs its VmaMixedMap). */
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
/* In C: a vm_operations_struct callback: the 7.3 crate has no vm_operations vtable. */
static vm_fault_t tk_pfn_mkwrite(struct vm_fault *vmf)
{
	return 0;
}

/*
 * The backing counts its vmas (a rebalance passes over one that nobody
 * maps any more): the vma of ->mmap, then each open (a split, fork's
 * copy, mremap's new vma) and close. With a close hook the kernel never
 * removes such a vma by merging it (can_merge_remove_vma()), so every
 * vma that goes is closed.
 */
/* In C: a vm_operations_struct callback: the 7.3 crate has no vm_operations vtable. */
static void tk_vm_open(struct vm_area_struct *vma)
{
	tk_mapping_vma_open(vma->vm_private_data);
}

/* In C: a vm_operations_struct callback: the 7.3 crate has no vm_operations vtable. */
static void tk_vm_close(struct vm_area_struct *vma)
{
	tk_mapping_vma_close(vma->vm_private_data);
}

static const struct vm_operations_struct tk_vm_ops = {
	.open = tk_vm_open,
	.close = tk_vm_close,
	.fault = tk_vm_fault,
};

static const struct vm_operations_struct tk_vm_ops_movable = {
	.open = tk_vm_open,
	.close = tk_vm_close,
	.fault = tk_vm_fault,
	.pfn_mkwrite = tk_pfn_mkwrite,
};

/* --- copy-on-write after fork (module/src/mapping/cow.rs) ---------------- */

/*
 * A fork's snapshot (TK_IOC_SNAPSHOT) makes a page held by two backings,
 * the parent's and the child's. Its share count, the number of holders
 * less one, lives in page->private: tierkit's pages are neither in the
 * page cache nor on the LRU, so the field is the owner's (the allocator
 * hands it over 0, and it is 0 again when the last holder frees it; the
 * orphan list of shim_movable.c uses it only after the last holder let
 * go). Each holder has its own page reference. Only a holder can add a
 * share, under its backing's lock.
 */
static atomic_long_t *tk_share_count(struct page *page)
{
	BUILD_BUG_ON(sizeof(atomic_long_t) != sizeof(page->private));
	return (atomic_long_t *)&page->private;
}

void tk_page_share(struct page *page)
{
	get_page(page);
	atomic_long_inc(tk_share_count(page));
}

/* true: @page was shared; one share and the caller's reference are gone. */
bool tk_page_unshare(struct page *page)
{
	if (atomic_long_dec_if_positive(tk_share_count(page)) < 0)
		return false;
	put_page(page);
	return true;
}

bool tk_page_shared(struct page *page)
{
	return atomic_long_read(tk_share_count(page)) != 0;
}

/*
 * A write to a page a copy-on-write vma maps read-only (its vm_ops has
 * page_mkwrite, so the kernel keeps its PTEs write-protected until then,
 * vma_wants_writenotify()). tk_mapping_mkwrite() (Rust) copies the page
 * if it is still shared, replaces it in the backing and zaps it (-EAGAIN:
 * the fault is retried and maps the copy); 0: the page is the backing's
 * alone, and the kernel makes this PTE writable (finish_mkwrite_fault()
 * re-checks it under the page-table lock). The folio has no mapping, so
 * it is returned locked (do_page_mkwrite() would retry forever).
 */
static vm_fault_t tk_vm_page_mkwrite(struct vm_fault *vmf)
{
	int err = tk_mapping_mkwrite(vmf->vma->vm_private_data, vmf->pgoff, vmf->page);

	if (err == 0) {
		folio_lock(page_folio(vmf->page));
		return VM_FAULT_LOCKED;
	}
	if (err == -EAGAIN)
		return VM_FAULT_NOPAGE;
	return err == -ENOMEM ? VM_FAULT_OOM : VM_FAULT_SIGBUS;
}

/*
 * The vmas of a fork's snapshot (a file whose mmap took a snapshot): write
 * notified, so every PTE a fault maps is read-only until page_mkwrite.
 * Like the movable ops, they refuse long-term writable pins.
 */
static const struct vm_operations_struct tk_vm_ops_cow = {
	.open = tk_vm_open,
	.close = tk_vm_close,
	.fault = tk_vm_fault,
	.page_mkwrite = tk_vm_page_mkwrite,
};

void tk_vma_set_cow(struct vm_area_struct *vma, void *backing)
{
	vma->vm_ops = &tk_vm_ops_cow;
	vma->vm_private_data = backing;
}

/*
 * For a snapshot of current's @start..@end (TK_IOC_SNAPSHOT): current's
 * mmap_lock held for writing while each tierkit vma there (4 KiB or
 * gigantic) is made a copy-on-write one (its PTEs write-protected from then on until
 * page_mkwrite, as tk_vma_set_cow() and vma_set_page_prot() make the
 * snapshot's), then downgraded: 0 with the lock held for reading, or
 * -EINTR (a fatal signal) with it not held. O(vmas) under the write lock.
 */
/*
 * In C: vm_ops is a C table; vma_start_write() and the vma iterator are
 * inlines and macros. The new protection is vm_get_page_prot() of the
 * flags without VM_SHARED, as vma_set_page_prot() computes for a
 * write-notified vma, without its pgprot_modify(): on x86 that reads
 * _PAGE_CHG_MASK, whose _PAGE_CC is cc_mask, not exported on kernels with
 * ARCH_HAS_CC_PLATFORM (Debian's), and a tierkit vma's vm_page_prot has no
 * bit beyond vm_get_page_prot(vm_flags) to keep (mmap set it so, and
 * tierkit never changes caching or encryption bits).
 */
int tk_mmap_lock_cow_current(unsigned long start, unsigned long end)
{
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	VMA_ITERATOR(vmi, mm, start);

	if (mmap_write_lock_killable(mm))
		return -EINTR;
	for_each_vma_range(vmi, vma, end) {
		const struct vm_operations_struct *cow;

		if (vma->vm_ops == &tk_vm_ops || vma->vm_ops == &tk_vm_ops_movable)
			cow = &tk_vm_ops_cow;
		else if (vma->vm_ops == &tk_gigantic_vm_ops ||
			 vma->vm_ops == &tk_gigantic_vm_ops_movable)
			cow = &tk_gigantic_vm_ops_cow;
		else
			continue;
		if (vma_start_write_killable(vma)) {
			mmap_write_unlock(mm);
			return -EINTR;
		}
		vma->vm_ops = cow;
		WRITE_ONCE(vma->vm_page_prot,
			   vm_get_page_prot(vma->vm_flags & ~VM_SHARED));
	}
	mmap_write_downgrade(mm);
	return 0;
}

void tk_mmap_read_unlock_current(void)
{
	mmap_read_unlock(current->mm);
}

/*
 * With current's mmap_lock held: the backing of the tierkit vma of current
 * at @addr, the file page offset of @addr in it, the vma's end, its file's
 * private data (the TkFile) and whether it is a gigantic one; NULL if no
 * such vma is there.
 */
void *tk_vma_backing_at(unsigned long addr, unsigned long *pgoff, unsigned long *end,
			void **file_private, bool *gigantic)
{
	struct vm_area_struct *vma = vma_lookup(current->mm, addr);

	if (!vma || !vma->vm_file)
		return NULL;
	*gigantic = vma->vm_ops == &tk_gigantic_vm_ops ||
		    vma->vm_ops == &tk_gigantic_vm_ops_movable ||
		    vma->vm_ops == &tk_gigantic_vm_ops_cow;
	if (!*gigantic && vma->vm_ops != &tk_vm_ops && vma->vm_ops != &tk_vm_ops_movable &&
	    vma->vm_ops != &tk_vm_ops_cow)
		return NULL;
	*pgoff = vma->vm_pgoff + ((addr - vma->vm_start) >> PAGE_SHIFT);
	*end = vma->vm_end;
	*file_private = vma->vm_file->private_data;
	return vma->vm_private_data;
}

/*
 * Called at the end of ->mmap, with mmap_lock held for writing: the vma
 * gets tierkit's fault handler and @backing (see tk_mapping_page()).
 * @movable: its pages may be in ZONE_MOVABLE, now or after a rebalance or
 * an offline moved them (see tk_pfn_mkwrite()).
 */
/* In C: sets vm_ops and vm_flags: vm_flags_set() is an inline and vm_ops a C table. */
void tk_vma_set_backing(struct vm_area_struct *vma, void *backing, bool movable)
{
	vma->vm_ops = movable ? &tk_vm_ops_movable : &tk_vm_ops;
	vma->vm_private_data = backing;
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
/* In C: a file_operations callback over mm_get_unmapped_area(); no binding for the hook. */
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

/*
 * The address space with the file's id: a number no other open of
 * /dev/tierkit since the module was loaded has, which TK_IOC_MAPPED_FILE
 * returns so that a caller can tell whether two mappings are one file
 * (every file shares the device inode, so st_ino cannot tell).
 */
struct tk_file_mapping {
	struct address_space m;
	u64 id;
};

static atomic64_t tk_file_ids = ATOMIC64_INIT(0);

/* In C: replaces file->f_mapping with an address_space of its own: struct field work on C types with inline initialisers. */
int tk_file_own_mapping(struct file *file)
{
	struct tk_file_mapping *fm = kmalloc(sizeof(*fm), GFP_KERNEL);
	struct address_space *m;

	if (!fm)
		return -ENOMEM;
	fm->id = atomic64_inc_return(&tk_file_ids);
	m = &fm->m;
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
/* In C: releases the address_space made by tk_file_own_mapping(). */
void tk_file_put_mapping(struct file *file)
{
	struct address_space *m = file->f_mapping;

	if (m && m != file_inode(file)->i_mapping) {
		WARN_ON_ONCE(mapping_mapped(m));
		file->f_mapping = file_inode(file)->i_mapping;
		kfree(container_of(m, struct tk_file_mapping, m));
	}
}

/*
 * TK_IOC_MAPPED_FILE: the /dev/tierkit file that process @pid (a number in
 * the caller's pid namespace) maps at @addr, with a reference (the same
 * open file as the mapping's, as pidfd_getfd() hands over an fd's), the
 * bounds of that vma and the file's id. A /dev/tierkit file is one whose
 * f_op is tk_dev_fops (tk_file_use_dev_fops() gives it at open). @pid
 * may name any thread of the process.
 * ERR_PTR: -ESRCH no such process, or it has no mm any more (exiting, a
 * zombie, a kernel thread); -ENOENT nothing mapped at @addr; -ENODEV a
 * mapping that is not tierkit's; -EINTR a fatal signal while waiting for
 * the process's mmap_lock. The caller checks the privilege.
 */
struct file *tk_mapped_file(int pid, unsigned long addr, unsigned long *start,
			    unsigned long *end, u64 *id)
{
	struct vm_area_struct *vma;
	struct task_struct *task;
	struct mm_struct *mm;
	struct file *f;
	struct pid *p;

	p = find_get_pid(pid);
	if (!p)
		return ERR_PTR(-ESRCH);
	task = get_pid_task(p, PIDTYPE_PID);
	put_pid(p);
	if (!task)
		return ERR_PTR(-ESRCH);
	mm = get_task_mm(task);
	put_task_struct(task);
	if (!mm)
		return ERR_PTR(-ESRCH);
	if (mmap_read_lock_killable(mm)) {
		mmput(mm);
		return ERR_PTR(-EINTR);
	}
	vma = find_vma(mm, addr);
	if (!vma || vma->vm_start > addr) {
		f = ERR_PTR(-ENOENT);
	} else if (!vma->vm_file || vma->vm_file->f_op != &tk_dev_fops) {
		f = ERR_PTR(-ENODEV);
	} else {
		f = get_file(vma->vm_file);
		*start = vma->vm_start;
		*end = vma->vm_end;
		*id = container_of(f->f_mapping, struct tk_file_mapping, m)->id;
	}
	mmap_read_unlock(mm);
	mmput(mm);
	return f;
}

/* In C: swaps file->f_op for the C file_operations with get_unmapped_area; no vtable for it in the kernel crate. */
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
 * What @vmf's PUD slot holds now, read under the page-table lock: nothing,
 * the PUD leaf of the GiB at @pfn (writable or not), the leaf of another
 * GiB (one the backing held before a write copied it, not yet zapped), or
 * a PMD table that a 4 KiB fault's pmd_alloc() put there.
 */
enum tk_pud_slot { TK_PUD_NONE, TK_PUD_OURS_RO, TK_PUD_OURS_RW, TK_PUD_TABLE, TK_PUD_STALE };

/* In C: pud_offset() and the pud_* accessors are macros and inlines. */
static enum tk_pud_slot tk_pud_slot(struct vm_fault *vmf, unsigned long pfn)
{
	spinlock_t *ptl = pud_lock(vmf->vma->vm_mm, vmf->pud);
	pud_t pud = pudp_get(vmf->pud);
	enum tk_pud_slot slot;

	if (pud_none(pud))
		slot = TK_PUD_NONE;
	else if (pud_leaf(pud) && pud_pfn(pud) == pfn)
		slot = pud_write(pud) ? TK_PUD_OURS_RW : TK_PUD_OURS_RO;
	else if (pud_leaf(pud))
		slot = TK_PUD_STALE;
	else
		slot = TK_PUD_TABLE;
	spin_unlock(ptl);
	return slot;
}

/* Whether @vmf's PUD slot holds a page table, read under its lock. */
/* In C: pud_present() and pud_leaf() are inlines with no Rust helper. */
static bool tk_pud_is_table(struct vm_fault *vmf)
{
	spinlock_t *ptl = pud_lock(vmf->vma->vm_mm, vmf->pud);
	pud_t pud = pudp_get(vmf->pud);

	spin_unlock(ptl);
	return pud_present(pud) && !pud_leaf(pud);
}

/* The TK_FAULT_* flags of a fault in a gigantic vma. */
static unsigned int tk_gigantic_fault_flags(struct vm_fault *vmf)
{
	unsigned int flags = 0;

	if (vmf->flags & FAULT_FLAG_WRITE)
		flags |= TK_FAULT_WRITE;
	if (vmf->vma->vm_ops == &tk_gigantic_vm_ops_cow)
		flags |= TK_FAULT_COW;
	return flags;
}

/*
 * The first touch of a GiB (and a write to a GiB mapped read-only, see
 * wp_huge_pud()) comes here at PUD order: tk_gigantic_map_pud() (Rust,
 * mapping.rs) allocates and clears the GiB once, and it is mapped by one
 * special PUD. The PUD holds no reference (zap_huge_pud() and fork's
 * copy_huge_pud() take and drop none on a VM_MIXEDMAP vma): the file
 * holds the GiB's folio until release, after every vma of it is gone, or
 * until a copy on write replaces it and zaps it (mapping/gib.rs; which is
 * why the insert is made under the backing's lock), and get_user_pages()
 * takes its own references on that folio. Any failure is
 * SIGBUS for this GiB only. A smaller order falls back to
 * tk_gigantic_pte_fault().
 *
 * The clear sleeps for long, holding only the vma's lock (or mmap_lock
 * for reading). Meanwhile the process's other threads may fault in the
 * same GiB: after prctl(PR_SET_THP_DISABLE) (which takes mmap_lock for
 * writing, not the vma's lock) or a MADV_DONTNEED, the kernel does not
 * try the PUD and pmd_alloc()s a PMD table into the empty slot before it
 * calls tk_gigantic_pte_fault(). So the slot is read again under the
 * page-table lock after the sleep:
 * - a PMD table: the GiB is mapped by 4 KiB PTEs of the same folio here
 *   too (VM_FAULT_FALLBACK: the kernel walks into that table and calls
 *   tk_gigantic_pte_fault());
 * - empty: inserted with write == false. insert_pud() then installs the
 *   PUD (vm_page_prot: writable unless the vma tracks writes) or, if a
 *   table got there after the check, leaves the slot alone and the touch
 *   faults again into the table. With write == true it would WARN
 *   (pud_pfn() of a table is not our pfn).
 * - our PUD, read-only, and the touch writes: made writable by
 *   insert_pud(write == true), which is only reached after the lock just
 *   saw our PUD there (between the two only a zap followed by a 4 KiB
 *   fault's pmd_alloc() could change it, with no sleep in between).
 */
/*
 * The PUD insert of tk_gigantic_huge_fault(), called by
 * tk_gigantic_map_pud() (Rust) with the backing's lock held and the
 * backing seen to hold @pfn (and, for a @write, no other holder to share
 * it): a copy on write (mapping/gib.rs) replaces a GiB, and a snapshot
 * shares one, under that lock before it zaps, so this insert is either
 * zapped by them or sees their change. *@stale: the slot holds the leaf
 * of a GiB the backing no longer holds (replaced, not yet zapped); the
 * caller zaps it after the lock, and the access faults again.
 */
vm_fault_t tk_gigantic_insert_pud(struct vm_fault *vmf, unsigned long pfn, bool write,
				  bool *stale)
{
	vm_fault_t ret;

	switch (tk_pud_slot(vmf, pfn)) {
	case TK_PUD_TABLE:
		return VM_FAULT_FALLBACK;
	case TK_PUD_STALE:
		*stale = true;
		return VM_FAULT_NOPAGE;
	case TK_PUD_NONE:
		ret = vmf_insert_pfn_pud(vmf, pfn, false);
		if (ret != VM_FAULT_NOPAGE || !write)
			return ret;
		/* Writable already, or still to be made so: look again. */
		if (tk_pud_slot(vmf, pfn) != TK_PUD_OURS_RO)
			return VM_FAULT_NOPAGE;
		fallthrough;
	case TK_PUD_OURS_RO:
		return write ? vmf_insert_pfn_pud(vmf, pfn, true) : VM_FAULT_NOPAGE;
	case TK_PUD_OURS_RW:
	default:
		return VM_FAULT_NOPAGE;
	}
}

/* In C: a vm_operations_struct huge_fault callback: no vtable in the 7.3 crate. */
static vm_fault_t tk_gigantic_huge_fault(struct vm_fault *vmf, unsigned int order)
{
	struct vm_area_struct *vma = vmf->vma;
	unsigned long addr = vmf->address & PUD_MASK;
	unsigned long pgoff;

	if (order != PUD_ORDER)
		return VM_FAULT_FALLBACK;
	if (addr < vma->vm_start || addr + PUD_SIZE > vma->vm_end)
		return VM_FAULT_SIGBUS;
	pgoff = vma->vm_pgoff + ((addr - vma->vm_start) >> PAGE_SHIFT);
	return tk_gigantic_map_pud(vma->vm_private_data, vmf, pgoff, tk_gigantic_fault_flags(vmf));
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
/*
 * The PTE insert of tk_gigantic_pte_fault(), called by
 * tk_gigantic_map_pte() (Rust) with the backing's lock held and @page a
 * page of a GiB the backing holds (so it cannot be freed meanwhile: a
 * copy on write replaces a GiB under that lock and zaps it before it lets
 * go). The GiB's first touch may have slept. The kernel put a PMD table
 * into the PUD slot before calling us, and nothing frees page tables
 * while we hold the vma, so the slot cannot have become a PUD leaf;
 * checked under the page-table lock all the same, since vm_insert_page()
 * would walk a leaf as a table. The PTE itself is checked by
 * vm_insert_page() under its lock (-EBUSY: mapped).
 */
vm_fault_t tk_gigantic_insert_pte(struct vm_fault *vmf, struct page *page)
{
	int err;

	if (!tk_pud_is_table(vmf))
		return VM_FAULT_NOPAGE;
	err = vm_insert_page(vmf->vma, vmf->address & PAGE_MASK, page);
	if (err == 0 || err == -EBUSY)	/* -EBUSY: another fault mapped it */
		return VM_FAULT_NOPAGE;
	return vmf_error(err);
}

/*
 * A GiB that cannot be made is SIGBUS, as at a PUD fault: never
 * VM_FAULT_OOM, which the #PF handler answers by retrying the fault
 * (pagefault_out_of_memory() kills nothing outside a memcg OOM), so an
 * ENOMEM that lasts, no free aligned GiB on the node, would fault again
 * forever. Only vm_insert_page()'s ENOMEM, a page table, is the transient
 * shortage VM_FAULT_OOM is for.
 */
/* In C: a vm_operations_struct callback: no vtable in the 7.3 crate. */
static vm_fault_t tk_gigantic_pte_fault(struct vm_fault *vmf)
{
	return tk_gigantic_map_pte(vmf->vma->vm_private_data, vmf, vmf->pgoff,
				   vmf->address & PAGE_MASK, tk_gigantic_fault_flags(vmf));
}

/*
 * A write to a 4 KiB page of a GiB that a copy-on-write gigantic vma maps
 * read-only (tk_gigantic_pte_fault() in such a vma: its vm_page_prot is
 * read-only, vma_wants_writenotify()). As tk_vm_page_mkwrite():
 * tk_gigantic_mkwrite() (Rust) copies the whole GiB if it is still
 * shared (-EAGAIN: the old one zapped, the fault retried), 0 if the GiB
 * is the backing's alone (the PTE is made writable, the folio returned
 * locked: it has no mapping).
 */
static vm_fault_t tk_gigantic_page_mkwrite(struct vm_fault *vmf)
{
	int err = tk_gigantic_mkwrite(vmf->vma->vm_private_data, vmf->pgoff, vmf->page);

	if (err == 0) {
		folio_lock(page_folio(vmf->page));
		return VM_FAULT_LOCKED;
	}
	return err == -EAGAIN ? VM_FAULT_NOPAGE : VM_FAULT_SIGBUS;
}

/* As device-dax: a gigantic vma splits (munmap, mprotect, mremap) only at GiB boundaries. */
/* In C: a vm_operations_struct may_split callback: no vtable in the 7.3 crate. */
static int tk_gigantic_may_split(struct vm_area_struct *vma, unsigned long addr)
{
	return IS_ALIGNED(addr, PUD_SIZE) ? 0 : -EINVAL;
}

/*
 * mremap may move a gigantic vma only to a GiB-aligned address. Checked
 * first by tk_get_unmapped_area() (before any page table moves); this is
 * a second line.
 */
/* In C: a vm_operations_struct mremap callback: no vtable in the 7.3 crate. */
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
 * A gigantic vma after a fork's snapshot (TK_IOC_SNAPSHOT), the parent's
 * and the child's: write notified (page_mkwrite), so a PUD or PTE a fault
 * maps is read-only until a write fault, which copies a GiB that is still
 * shared (mapping/gib.rs). Refuses long-term writable pins, as the 4 KiB
 * copy-on-write vmas do.
 */
static const struct vm_operations_struct tk_gigantic_vm_ops_cow = {
	.fault = tk_gigantic_pte_fault,
	.huge_fault = tk_gigantic_huge_fault,
	.may_split = tk_gigantic_may_split,
	.mremap = tk_gigantic_mremap,
	.page_mkwrite = tk_gigantic_page_mkwrite,
};

/*
 * ->mmap of a gigantic mapping (mmap_lock held for writing; the vma is
 * VM_MIXEDMAP, its start GiB aligned): nothing is mapped yet. VM_HUGEPAGE
 * lets the PUD fault happen with transparent_hugepage=madvise too.
 * @movable: its GiBs may come from ZONE_MOVABLE (see tk_pfn_mkwrite()).
 */
/* In C: sets the C vm_operations and vm_flags_set() (an inline). */
void tk_vma_set_gigantic(struct vm_area_struct *vma, void *backing, bool movable)
{
	vm_flags_set(vma, VM_HUGEPAGE);
	vma->vm_ops = movable ? &tk_gigantic_vm_ops_movable : &tk_gigantic_vm_ops;
	vma->vm_private_data = backing;
}

/* ->mmap of a snapshot's gigantic part: as tk_vma_set_gigantic(), copy on write. */
/* In C: sets the C vm_operations and vm_flags_set() (an inline). */
void tk_vma_set_gigantic_cow(struct vm_area_struct *vma, void *backing)
{
	vm_flags_set(vma, VM_HUGEPAGE);
	vma->vm_ops = &tk_gigantic_vm_ops_cow;
	vma->vm_private_data = backing;
}
