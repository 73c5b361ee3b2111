// SPDX-License-Identifier: GPL-2.0
/*
 * tierkit C shim: test interfaces, built only with TIERKIT_TEST=1:
 * TK_IOC_WALK's page-table walk and TK_IOC_PAGE_REFS.
 * Stays C: the page-table walk (pgd_offset() ... pte_offset_map()) and the
 * folio accessors are macros and static inlines.
 * Declared in src/shim.h, called from src/shim.rs.
 */
#include <linux/mm.h>
#include <linux/huge_mm.h>
#include <linux/mmap_lock.h>
#include <linux/pgtable.h>
#include <linux/sched/mm.h>

#include "shim.h"

#ifdef TIERKIT_TEST
/*
 * What maps @addr in current's page tables, for tests: TK_WALK_* level,
 * and for a PUD or PMD leaf the pfn of the 4 KiB page at @addr and its
 * node. TK_WALK_PTE means a PTE table covers @addr (its entries are not
 * read). -EFAULT if no vma covers @addr, -EINTR on a fatal signal. The
 * mmap lock (read) with a vma covering @addr keeps the tables down to
 * the PMD.
 */
/* In C: pgd_offset() ... pmd_offset() and the leaf tests are macros and inlines. */
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
	if (*pfn) {
		struct page *page = tk_pfn_to_online_page(*pfn);

		if (page)
			*nid = page_to_nid(page);
	}
	return level;
}

/*
 * Who holds the folio of @pfn, for tests (TK_IOC_PAGE_REFS): -EINVAL if
 * @pfn has no struct page or its section is offline (the memmap of an
 * offline block is not to be read: DEBUG_VM poisons it). A snapshot: the folio may be freed or split
 * right after, so only fields that stay meaningful are read. The first
 * page of a free buddy block reports TK_PAGE_BUDDY, any other free page
 * a refcount of 0.
 */
/* In C: folio_ref_count(), folio_mapcount() and pfn_to_online_page() are inlines and macros. */
int tk_page_refs(unsigned long pfn, int *refcount, int *mapcount,
		 unsigned int *order, int *nid, unsigned int *flags)
{
	struct page *page;
	struct folio *folio;

	*refcount = *mapcount = 0;
	*order = 0;
	*flags = 0;
	*nid = NUMA_NO_NODE;
	page = tk_pfn_to_online_page(pfn);
	if (!page)
		return -EINVAL;
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
