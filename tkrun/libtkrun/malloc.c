// SPDX-License-Identifier: GPL-2.0
/*
 * libtkrun.so's malloc family: chunks of at least the threshold from
 * tierkit (zeroed: calloc needs no clearing), the rest from the C
 * library's; free, realloc and malloc_usable_size know both.
 */
#define _GNU_SOURCE
#include "libtkrun.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

/* --- malloc and friends ------------------------------------------------ */

/* The tierkit malloc chunk starting at p: its entry copied, else 0. */
static int ours(const void *p, struct range *out)
{
	if (((uintptr_t)p & (PAGE - 1)) || atomic_load(&nr_live) == 0 || !lock_table())
		return 0;
	int i = table_find((uintptr_t)p, 1);
	int hit = i >= 0 && ranges[i].kind == K_MALLOC && ranges[i].start == (uintptr_t)p;

	if (hit)
		*out = ranges[i];
	unlock_table();
	return hit;
}

EXPORT void *malloc(size_t n)
{
	if (!ready())
		return bump_alloc(n);
	void *p = tk_alloc(n, PAGE, PROT_READ | PROT_WRITE, K_MALLOC);

	return p ? p : real.malloc(n);
}

EXPORT void free(void *p)
{
	struct range r;

	if (!p || in_bump(p))
		return;
	if (ours(p, &r)) {
		/* Every part of it (an mprotect or madvise may have split it). */
		if (lock_table()) {
			table_punch(r.start, r.clen);
			unlock_table();
		}
		sys_munmap((void *)r.start, r.clen);
		return;
	}
	if (ready())
		real.free(p);
}

EXPORT void *calloc(size_t nm, size_t sz)
{
	size_t n;

	if (__builtin_mul_overflow(nm, sz, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	if (!ready())
		return bump_alloc(n);
	/* tierkit's pages are zeroed. */
	void *p = tk_alloc(n, PAGE, PROT_READ | PROT_WRITE, K_MALLOC);

	return p ? p : real.calloc(nm, sz);
}

EXPORT void *realloc(void *p, size_t n)
{
	struct range r;
	size_t have;
	void *q;

	if (!p)
		return malloc(n);
	if (in_bump(p)) {
		q = malloc(n);
		if (q)
			memcpy(q, p, bump_size(p) < n ? bump_size(p) : n);
		return q;
	}
	if (!ready())
		return NULL;
	if (ours(p, &r)) {
		if (n == 0) {
			free(p);
			return NULL;
		}
		int giga;

		/* Still tierkit's size class and it fits: keep it. */
		if (n <= r.clen && wants(n, &giga) && giga == r.giga) {
			if (lock_table()) {
				int i = table_find(r.start, 1);

				if (i >= 0)
					ranges[i].req = n;
				unlock_table();
			}
			return p;
		}
		/* Every usable byte, as glibc copies them. */
		have = r.clen;
	} else {
		int giga;

		if (!wants(n, &giga))
			return real.realloc(p, n);
		have = real.usable(p);
	}
	/* Across the threshold, or grown out of its mapping: move. */
	q = malloc(n);
	if (!q)
		return NULL;
	memcpy(q, p, have < n ? have : n);
	free(p);
	return q;
}

static void *aligned(size_t al, size_t n)
{
	if (!ready())
		return NULL;
	void *p = tk_alloc(n, al, PROT_READ | PROT_WRITE, K_MALLOC);

	return p ? p : real.memalign(al, n);
}

EXPORT void *memalign(size_t al, size_t n)
{
	if (al & (al - 1)) {
		errno = EINVAL;
		return NULL;
	}
	return aligned(al, n);
}

EXPORT int posix_memalign(void **out, size_t al, size_t n)
{
	if (al < sizeof(void *) || (al & (al - 1)))
		return EINVAL;
	void *p = aligned(al, n);

	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

EXPORT void *aligned_alloc(size_t al, size_t n)
{
	return memalign(al, n);
}

EXPORT void *valloc(size_t n)
{
	return aligned(PAGE, n);
}

EXPORT void *pvalloc(size_t n)
{
	return aligned(PAGE, (n + PAGE - 1) & ~(PAGE - 1));
}

EXPORT size_t malloc_usable_size(void *p)
{
	struct range r;

	if (!p)
		return 0;
	if (in_bump(p))
		return bump_size(p);
	if (ours(p, &r))
		return r.clen;
	return ready() ? real.usable(p) : 0;
}
