// SPDX-License-Identifier: GPL-2.0
/*
 * libtkrun.so's mmap, munmap and mremap: big anonymous private mappings
 * from tierkit, and tierkit ranges that behave as anonymous private
 * memory when they are unmapped or remapped.
 */
#define _GNU_SOURCE
#include "libtkrun.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>

/* --- mmap, munmap, mremap ---------------------------------------------- */

EXPORT void *mmap(void *a, size_t l, int prot, int flags, int fd, off_t off)
{
	int fixed = flags & (MAP_FIXED | MAP_FIXED_NOREPLACE);
	int plain = (flags & MAP_TYPE) == MAP_PRIVATE && (flags & MAP_ANONYMOUS) &&
		    !(flags & (MAP_FIXED | MAP_FIXED_NOREPLACE | MAP_NORESERVE | MAP_HUGETLB |
			       MAP_GROWSDOWN | MAP_STACK)) &&
		    (prot & (PROT_READ | PROT_WRITE)) && !(prot & PROT_EXEC);

	if (plain && ready()) {
		void *p = tk_alloc(l, PAGE, prot, K_MMAP);

		if (p)
			return p;
	}
	if (fixed && atomic_load(&nr_live) && lock_table()) {
		giga_cut((uintptr_t)a, l);
		void *p = sys_mmap(a, l, prot, flags, fd, off);

		if (p != MAP_FAILED)
			table_punch((uintptr_t)p, (l + PAGE - 1) & ~(PAGE - 1));
		unlock_table();
		return p;
	}
	return sys_mmap(a, l, prot, flags, fd, off);
}

EXPORT void *mmap64(void *a, size_t l, int prot, int flags, int fd, off_t off)
{
	return mmap(a, l, prot, flags, fd, off);
}

EXPORT int munmap(void *a, size_t l)
{
	if (!atomic_load(&nr_live) || !lock_table())
		return sys_munmap(a, l);
	l = to_entry_end((uintptr_t)a, l);
	giga_cut((uintptr_t)a, l);
	int r = sys_munmap(a, l);

	if (r == 0)
		table_punch((uintptr_t)a, (l + PAGE - 1) & ~(PAGE - 1));
	unlock_table();
	return r;
}

/* mremap of (part of) tierkit entry i; table lock held. The ABI refuses
 * to grow a tierkit mapping, so growth maps more tierkit memory after it,
 * or a new range that the contents are copied to. */
static void *tk_mremap(int i, uintptr_t o, size_t ol, size_t nl, int flags, uintptr_t na)
{
	struct range r = ranges[i];
	size_t unit = r.giga ? GIB : PAGE;
	int fixed = flags & MREMAP_FIXED;

	ol = (ol + PAGE - 1) & ~(PAGE - 1);
	nl = (nl + PAGE - 1) & ~(PAGE - 1);
	if (flags & MREMAP_DONTUNMAP) {
		say_once(SAY_DONTUNMAP, "MREMAP_DONTUNMAP of a tierkit range is refused (EINVAL)");
		errno = EINVAL;
		return MAP_FAILED;
	}
	if (!fixed && nl <= ol) {
		if (nl < ol) {
			giga_cut(o + nl, ol - nl);
			sys_munmap((void *)(o + nl), ol - nl);
			table_punch(o + nl, ol - nl);
		}
		return (void *)o;
	}
	/* Grow in place: tierkit memory right after the entry, placed as if
	 * the entry had been that long from the start. */
	if (!fixed && o + ol == r.start + r.len) {
		size_t d = (nl - ol + unit - 1) & ~(unit - 1);
		void *x = sys_mmap((void *)(o + ol), d, PROT_NONE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);

		if (x == (void *)(o + ol)) {
			if (tk_map_at(o + ol, d, r.off + r.len, r.prot, r.giga) == 0) {
				ranges[i].len += d;
				return (void *)o;
			}
			sys_munmap(x, d);
		} else if (x != MAP_FAILED) {
			sys_munmap(x, d);
		}
	}
	if (!(flags & MREMAP_MAYMOVE)) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	/* Move: a new range (tierkit's if it can), the contents copied. */
	uintptr_t n = 0;
	int giga = r.giga && nl >= GIB;

	if (fixed) {
		if (na & (PAGE - 1) || (na < o + ol && o < na + nl)) {
			errno = EINVAL;
			return MAP_FAILED;
		}
		giga_cut(na, nl);
		if (sys_mmap((void *)na, nl, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
			     -1, 0) == MAP_FAILED)
			return MAP_FAILED;
		table_punch(na, nl);
		i = table_find(o, ol);
		if (i < 0 || (giga && (na & (GIB - 1))) ||
		    tk_map_at(na, nl, na, PROT_READ | PROT_WRITE, giga) ||
		    !table_add((struct range){ .start = na, .len = nl, .req = nl, .off = na,
					       .prot = PROT_READ | PROT_WRITE, .pkey = -1,
					       .kind = K_MMAP, .giga = (uint8_t)giga })) {
			if (sys_mmap((void *)na, nl, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
				     -1, 0) == MAP_FAILED)
				return MAP_FAILED;
		}
		n = na;
	} else {
		n = tk_new(nl, PAGE, PROT_READ | PROT_WRITE, K_MMAP, giga);
		if (!n) {
			void *p = sys_mmap(NULL, nl, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			if (p == MAP_FAILED)
				return MAP_FAILED;
			n = (uintptr_t)p;
		}
	}
	/* Copied readable and writable, then given the old protection. */
	if (!(r.prot & PROT_READ))
		sys_mprotect((void *)o, ol, PROT_READ);
	memcpy((void *)n, (void *)o, ol < nl ? ol : nl);
	if (r.prot != (PROT_READ | PROT_WRITE) || r.pkey >= 0) {
		int j = table_find(n, nl);

		sys_protect((void *)n, nl, r.prot, r.pkey);
		if (j >= 0) {
			ranges[j].prot = r.prot;
			ranges[j].pkey = r.pkey;
		}
	}
	giga_cut(o, ol);
	sys_munmap((void *)o, ol);
	table_punch(o, ol);
	return (void *)n;
}

EXPORT void *mremap(void *o, size_t ol, size_t nl, int flags, ...)
{
	uintptr_t na = 0;
	va_list ap;

	if (flags & MREMAP_FIXED) {
		va_start(ap, flags);
		na = (uintptr_t)va_arg(ap, void *);
		va_end(ap);
	}
	if (!atomic_load(&nr_live) || !lock_table())
		return sys_mremap(o, ol, nl, flags, (void *)na);
	void *r;
	int i = table_find((uintptr_t)o, ol ? ol : 1);

	if (i >= 0 && !ol) {
		/* Old size 0 duplicates a shared mapping; anonymous private
		 * memory cannot be duplicated. */
		errno = EINVAL;
		r = MAP_FAILED;
	} else if (i >= 0) {
		ol = to_entry_end((uintptr_t)o, ol);
		r = tk_mremap(i, (uintptr_t)o, ol, nl, flags, na);
	} else {
		if (flags & MREMAP_FIXED)
			giga_cut(na, nl);
		r = sys_mremap(o, ol, nl, flags, (void *)na);
		if (r != MAP_FAILED && (flags & MREMAP_FIXED))
			table_punch((uintptr_t)r, (nl + PAGE - 1) & ~(PAGE - 1));
	}
	unlock_table();
	return r;
}
