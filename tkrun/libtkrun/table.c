// SPDX-License-Identifier: GPL-2.0
/*
 * libtkrun.so's range table: what is tierkit's, under one mutex, and the
 * gigantic entries that an unmap or remap cuts inside a GiB (copied to the
 * kernel's memory first: a 1 GiB page cannot be split).
 */
#define _GNU_SOURCE
#include "libtkrun.h"

#include <signal.h>
#include <string.h>
#include <sys/mman.h>

/* --- the range table --------------------------------------------------- */

pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
struct range ranges[MAX_RANGES];
int nranges;
atomic_int nr_live;

static __thread sigset_t saved_mask;
static __thread int saved_cancel;

/* The table lock, with signals blocked and cancellation disabled while
 * it is held: a handler cannot re-enter the library half-way (its
 * munmap or mmap waits until the table is consistent), and the open,
 * close and read calls under it are no cancellation points (glibc's own
 * malloc is none). Signals are blocked first and unblocked last: a
 * handler that runs in between finds nothing of this thread's saved.
 * 0 on a re-entry from the library itself. */
int lock_table(void)
{
	sigset_t all, old;
	int c;

	if (in_lib)
		return 0;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &c);
	saved_mask = old;
	saved_cancel = c;
	in_lib = 1;
	pthread_mutex_lock(&table_lock);
	return 1;
}

/* What lock_table changed for this thread, put back (but the mutex). */
void leave_lib(void)
{
	sigset_t old = saved_mask;
	int c;

	in_lib = 0;
	pthread_setcancelstate(saved_cancel, &c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void unlock_table(void)
{
	pthread_mutex_unlock(&table_lock);
	leave_lib();
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

/* Makes a an entry boundary: the entry that holds it inside is split in
 * two (the second an K_MMAP part of a malloc chunk). 0 if the table is
 * full. */
int table_split(uintptr_t a)
{
	for (int i = 0; i < nranges; i++) {
		struct range *r = &ranges[i];

		if (a <= r->start || a >= r->start + r->len)
			continue;
		struct range right = *r;

		right.start = a;
		right.len = r->start + r->len - a;
		right.off += a - r->start;
		right.kind = K_MMAP;
		right.req = right.clen = 0;
		if (!table_add(right))
			return 0;
		r->len = a - r->start;
		return 1;
	}
	return 1;
}

/* Calls fn on each piece of [a, a + l) in address order: the part of
 * entry i in it, or a gap between entries (i = -1). Stops at the first
 * non-zero result, which it returns. */
int table_walk(uintptr_t a, size_t l, int (*fn)(uintptr_t, size_t, int, void *), void *ctx)
{
	uintptr_t b = a + l;

	for (uintptr_t cur = a; cur < b;) {
		uintptr_t next = b;
		int at = -1;

		for (int i = 0; i < nranges; i++) {
			uintptr_t s = ranges[i].start, e = s + ranges[i].len;

			if (cur >= s && cur < e) {
				at = i;
				next = e < b ? e : b;
				break;
			}
			if (s > cur && s < next)
				next = s;
		}
		int r = fn(cur, next - cur, at, ctx);

		if (r)
			return r;
		cur = next;
	}
	return 0;
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
	if (!(r.prot & PROT_READ))
		sys_mprotect((void *)r.start, r.len, PROT_READ);
	memcpy(n, (void *)r.start, r.len);
	if (r.prot != (PROT_READ | PROT_WRITE) || r.pkey >= 0)
		sys_protect(n, r.len, r.prot, r.pkey);
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

