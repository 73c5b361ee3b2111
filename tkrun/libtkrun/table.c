// SPDX-License-Identifier: GPL-2.0
/*
 * libtkrun.so's range table: what is tierkit's, under one mutex, and the
 * gigantic entries that an unmap or remap cuts inside a GiB (copied to the
 * kernel's memory first: a 1 GiB page cannot be split).
 */
#define _GNU_SOURCE
#include "libtkrun.h"

#include <string.h>
#include <sys/mman.h>

/* --- the range table --------------------------------------------------- */

pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
struct range ranges[MAX_RANGES];
int nranges;
atomic_int nr_live;

int lock_table(void)
{
	if (in_lib)
		return 0;
	in_lib = 1;
	pthread_mutex_lock(&table_lock);
	return 1;
}

void unlock_table(void)
{
	pthread_mutex_unlock(&table_lock);
	in_lib = 0;
}

int table_add(struct range r)
{
	if (nranges == MAX_RANGES)
		return 0;
	ranges[nranges++] = r;
	atomic_store(&nr_live, nranges);
	return 1;
}

void table_del(int i)
{
	ranges[i] = ranges[--nranges];
	atomic_store(&nr_live, nranges);
}

/* The entry that contains [a, a + l), or -1. */
int table_find(uintptr_t a, size_t l)
{
	for (int i = 0; i < nranges; i++)
		if (a >= ranges[i].start && a - ranges[i].start + l <= ranges[i].len)
			return i;
	return -1;
}

/* Drops [a, a + l) from the table: entries are trimmed or split. */
void table_punch(uintptr_t a, size_t l)
{
	uintptr_t b = a + l;

	for (int i = 0; i < nranges; i++) {
		struct range *r = &ranges[i];
		uintptr_t s = r->start, e = r->start + r->len;

		if (b <= s || a >= e)
			continue;
		if (a > s && b < e) {
			struct range right = *r;

			right.start = b;
			right.len = e - b;
			right.off += b - s;
			right.kind = K_MMAP;
			r->len = a - s;
			r->kind = K_MMAP;
			if (!table_add(right))
				say_once(SAY_TABLE, "range table full; a split tierkit range is no longer tracked");
		} else if (a <= s && b >= e) {
			table_del(i--);
		} else if (a <= s) {
			r->off += b - s;
			r->start = b;
			r->len = e - b;
			r->kind = K_MMAP;
		} else {
			r->len = a - s;
			r->kind = K_MMAP;
		}
	}
}

/* --- gigantic entries ------------------------------------------------- */

/* Replaces gigantic entry i by a copy in the kernel's anonymous memory
 * (a GiB page cannot be split). Table lock held. */
static void giga_demote(int i)
{
	struct range r = ranges[i];
	void *n = sys_mmap(NULL, r.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	say_once(SAY_GIGA_SPLIT, "part of a 1 GiB page unmapped or remapped: that range is copied to the kernel's memory");
	if (n == MAP_FAILED)
		return;
	memcpy(n, (void *)r.start, r.len);
	if (r.prot != (PROT_READ | PROT_WRITE))
		mprotect(n, r.len, r.prot);
	if (sys_mremap(n, r.len, r.len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)r.start) == MAP_FAILED) {
		sys_munmap(n, r.len);
		return;
	}
	table_del(i);
}

/* A length that ends where a gigantic entry's caller thinks it ends (its
 * req) reaches to the entry's real end (rounded up to a GiB). */
size_t to_entry_end(uintptr_t a, size_t l)
{
	uintptr_t b = a + ((l + PAGE - 1) & ~(PAGE - 1));

	for (int i = 0; i < nranges; i++) {
		struct range *r = &ranges[i];

		if (r->giga && a >= r->start && b == r->start + ((r->req + PAGE - 1) & ~(PAGE - 1)))
			return r->start + r->len - a;
	}
	return l;
}

/* Demotes the gigantic entries that [a, a + l) cuts inside a GiB. */
void giga_cut(uintptr_t a, size_t l)
{
	uintptr_t b = a + ((l + PAGE - 1) & ~(PAGE - 1));

	for (int i = 0; i < nranges; i++) {
		struct range *r = &ranges[i];
		uintptr_t s = r->start, e = s + r->len;

		if (!r->giga || b <= s || a >= e)
			continue;
		if ((a > s && (a & (GIB - 1))) || (b < e && (b & (GIB - 1))))
			giga_demote(i--);
	}
}

