// SPDX-License-Identifier: GPL-2.0
/*
 * libtkrun.so's madvise, mprotect, pkey_mprotect and msync: on tierkit
 * ranges they give what they give on anonymous private memory. The table
 * keeps, per part of a range, its protection (so that fork, MADV_DONTNEED
 * and a cut gigantic range can read and write it) and its fork behaviour
 * (MADV_DONTFORK, MADV_WIPEONFORK), splitting entries as the kernel
 * splits vmas.
 */
#define _GNU_SOURCE
#include "libtkrun.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

static int sys_madvise(uintptr_t a, size_t l, int advice)
{
	return (int)syscall(SYS_madvise, a, l, advice);
}

/* Entries start at a and at b, and giga_cut made gigantic ones whole:
 * [a, b) is then a run of whole entries (and gaps). 0 if the table is
 * full (said once). */
static int split_at(uintptr_t a, uintptr_t b)
{
	giga_cut(a, b - a);
	if (table_split(a) && table_split(b))
		return 1;
	say_once(SAY_TABLE, "range table full; an mprotect or madvise of part of a tierkit range is not tracked");
	return 0;
}

struct advice {
	int advice;
	int prot;
	int pkey;
	int hole; /* an unmapped part: ENOMEM at the end, as the kernel says */
};

/* Advice that anonymous memory takes and that only hints: where the
 * kernel refuses it for a tierkit mapping (a VM_IO device mapping), the
 * result is anonymous memory's, 0. */
static int hint(int advice)
{
	switch (advice) {
	case MADV_NORMAL: case MADV_RANDOM: case MADV_SEQUENTIAL: case MADV_WILLNEED:
	case MADV_DODUMP: case MADV_DONTDUMP: case MADV_HUGEPAGE: case MADV_NOHUGEPAGE:
	case MADV_MERGEABLE: case MADV_UNMERGEABLE: case MADV_COLD: case MADV_PAGEOUT:
	case MADV_POPULATE_READ: case MADV_POPULATE_WRITE:
		return 1;
	}
	return 0;
}

/* MADV_DONTNEED on tierkit memory: anonymous memory reads zero after it,
 * whatever its protection; the tierkit file would map the same pages
 * again, so the library clears them. */
static void clear(uintptr_t a, size_t l, const struct range *r)
{
	if (r->prot != (PROT_READ | PROT_WRITE))
		sys_mprotect((void *)a, l, PROT_READ | PROT_WRITE);
	memset((void *)a, 0, l);
	if (r->prot != (PROT_READ | PROT_WRITE))
		sys_protect((void *)a, l, r->prot, r->pkey);
}

static int advise_piece(uintptr_t a, size_t l, int i, void *ctx)
{
	struct advice *c = ctx;
	int adv = c->advice;

	if (i < 0) {
		if (sys_madvise(a, l, adv) == 0)
			return 0;
		c->hole |= errno == ENOMEM;
		return errno == ENOMEM ? 0 : errno;
	}
	switch (adv) {
	case MADV_DONTNEED:
		clear(a, l, &ranges[i]);
		return 0;
	case MADV_FREE:
		/* Allowed to keep the contents; tierkit refuses the advice. */
		return 0;
	case MADV_DONTFORK: case MADV_DOFORK:
		ranges[i].dontfork = adv == MADV_DONTFORK;
		return 0;
	case MADV_WIPEONFORK: case MADV_KEEPONFORK:
		ranges[i].wipe = adv == MADV_WIPEONFORK;
		return 0;
	}
	if (sys_madvise(a, l, adv) == 0 || (errno == EINVAL && hint(adv)))
		return 0;
	return errno;
}

EXPORT int madvise(void *a, size_t l, int advice)
{
	uintptr_t s = (uintptr_t)a, b = s + ((l + PAGE - 1) & ~(PAGE - 1));

	if (!atomic_load(&nr_live) || (s & (PAGE - 1)) || b <= s || !lock_table())
		return sys_madvise(s, l, advice);
	struct advice c = { .advice = advice };
	int e = 0;
	int marks = advice == MADV_DONTFORK || advice == MADV_DOFORK || advice == MADV_WIPEONFORK ||
		    advice == MADV_KEEPONFORK;

	/* The kernel marks the vmas (or says ENOMEM for a hole) first. */
	if ((advice == MADV_DONTFORK || advice == MADV_DOFORK) && sys_madvise(s, l, advice))
		e = errno;
	else if (!marks || split_at(s, b))
		e = table_walk(s, b - s, advise_piece, &c);
	if (!e && c.hole)
		e = ENOMEM;
	unlock_table();
	if (e) {
		errno = e;
		return -1;
	}
	return 0;
}

EXPORT int posix_madvise(void *a, size_t l, int advice)
{
	/* POSIX_MADV_DONTNEED is a no-op in glibc; the others are hints. */
	if (advice == POSIX_MADV_DONTNEED)
		return 0;
	return madvise(a, l, advice) ? errno : 0;
}

static int protect_piece(uintptr_t a, size_t l, int i, void *ctx)
{
	struct advice *c = ctx;

	(void)a;
	(void)l;
	if (i >= 0) {
		ranges[i].prot = c->prot;
		if (c->pkey >= 0)
			ranges[i].pkey = c->pkey;
	}
	return 0;
}

static int protect(void *a, size_t l, int prot, int pkey)
{
	uintptr_t s = (uintptr_t)a, b = s + ((l + PAGE - 1) & ~(PAGE - 1));

	if (!atomic_load(&nr_live) || (s & (PAGE - 1)) || b <= s || !lock_table())
		return sys_protect(a, l, prot, pkey);
	/* A gigantic range cut inside a GiB goes to the kernel's memory first. */
	giga_cut(s, b - s);
	int r = sys_protect(a, l, prot, pkey);
	struct advice c = { .prot = prot, .pkey = pkey };

	if (r == 0 && split_at(s, b))
		table_walk(s, b - s, protect_piece, &c);
	unlock_table();
	return r;
}

EXPORT int mprotect(void *a, size_t l, int prot)
{
	return protect(a, l, prot, -1);
}

EXPORT int pkey_mprotect(void *a, size_t l, int prot, int pkey)
{
	if (pkey < 0)
		return sys_mprotect(a, l, prot);
	return protect(a, l, prot, pkey);
}

static int sync_piece(uintptr_t a, size_t l, int i, void *ctx)
{
	/* Anonymous memory has nothing to write back. */
	if (i >= 0)
		return 0;
	return syscall(SYS_msync, a, l, *(int *)ctx) ? errno : 0;
}

EXPORT int msync(void *a, size_t l, int flags)
{
	uintptr_t s = (uintptr_t)a, b = s + ((l + PAGE - 1) & ~(PAGE - 1));
	int valid = !(flags & ~(MS_ASYNC | MS_SYNC | MS_INVALIDATE)) &&
		    (flags & (MS_ASYNC | MS_SYNC)) != (MS_ASYNC | MS_SYNC) && !(s & (PAGE - 1)) && b > s;

	if (!valid || !atomic_load(&nr_live) || !lock_table())
		return (int)syscall(SYS_msync, a, l, flags);
	int e = table_walk(s, b - s, sync_piece, &flags);

	unlock_table();
	if (e) {
		errno = e;
		return -1;
	}
	return 0;
}
