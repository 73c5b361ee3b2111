// SPDX-License-Identifier: GPL-2.0
/*
 * libtkrun.so's fork handlers (pthread_atfork): the child's tierkit
 * ranges made copy-on-write snapshots of the parent's, or private copies
 * before fork() returns in the parent.
 */
#define _GNU_SOURCE
#include "libtkrun.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* --- fork ---------------------------------------------------------------
 * A tierkit mapping is MAP_SHARED: after a plain fork parent and child
 * would see each other's writes. So the prepare handler asks tierkit for
 * a copy-on-write snapshot of each range (TK_IOC_SNAPSHOT, one ioctl per
 * piece as the range was mapped: <= 1 GiB of 4 KiB pages, <= 64 GiB of a
 * gigantic range; all into one new file): from then on the pages, or
 * GiBs, are shared copy-on-write between the parent's mapping and the
 * snapshot, and nothing either side writes reaches the other. The child
 * maps the snapshot over each range; no page is copied until one side
 * writes it while the other still shares it (a GiB is copied whole, into
 * a spare GiB the snapshot took on its node).
 * Parts under MADV_DONTFORK are not in the child (the kernel left them
 * out), parts under MADV_WIPEONFORK get fresh tierkit memory (zero), every
 * part keeps its protection and key.
 *
 * A range tierkit cannot snapshot (a gigantic one with no spare GiB to be
 * had, a kernel without the ioctl, a test device, no file descriptor
 * left) is copied by the child
 * into fresh tierkit memory (same offsets, so the same nodes) before
 * fork() returns in the parent, which waits for it: nothing the parent's
 * forking thread writes after fork() reaches the child. The wait needs no
 * file descriptor (a process at RLIMIT_NOFILE forks too): a shared page
 * the child writes its pid to, then "done" (a futex); the parent also
 * stops waiting when the child has exited (waitid with WNOWAIT, which
 * leaves it to be reaped) or is no longer its child.
 */
struct fork_sync {
	atomic_int done;
	atomic_int pid;
};

static struct fork_sync *fork_sync;
static int fork_locked;
static int snap_fd = -1;

/* The pieces a range was mapped in (tk_map_at()), and is snapshot in. */
static size_t piece_of(const struct range *r)
{
	return r->giga ? GIGA_PIECE : PIECE;
}

/* Entry r's snapshot into snap_fd, piece by piece: 1 if every piece is. */
static int snapshot_entry(const struct range *r)
{
	size_t max = piece_of(r);

	for (size_t d = 0; d < r->len; d += max) {
		struct tk_snapshot s = { .addr = r->start + d,
					 .len = r->len - d < max ? r->len - d : max };

		if (ioctl(snap_fd, TK_IOC_SNAPSHOT, &s))
			return 0;
	}
	return 1;
}

void fork_prepare(void)
{
	int wait = 0;

	fork_locked = lock_table();
	fork_sync = NULL;
	snap_fd = -1;
	if (!fork_locked || nranges == 0)
		return;
	if (cfg.device == dev_tierkit)
		snap_fd = open(cfg.device, O_RDWR | O_CLOEXEC);
	for (int i = 0; i < nranges; i++) {
		struct range *r = &ranges[i];

		r->snap = 0;
		if (r->dontfork || r->wipe)
			continue; /* the child reads nothing of the parent's */
		if (snap_fd >= 0 && snapshot_entry(r)) {
			r->snap = 1;
			if (r->giga)
				say_verbose("fork: a gigantic range shared copy-on-write");
			continue;
		}
		if (snap_fd >= 0 && r->giga)
			say_once(SAY_FORK_GIGA, "fork: tierkit could not share a gigantic range (no spare GiB on its node); the child gets a copy made at fork");
		if (r->giga)
			say_verbose("fork: a gigantic range copied for the child");
		wait = 1;
	}
	if (!wait)
		return;
	void *p = sys_mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		say_once(SAY_FORK_WAIT, "fork: no page to wait on; the parent goes on while the child copies");
	else
		fork_sync = p;
}

static int child_gone(pid_t pid)
{
	siginfo_t si;

	si.si_pid = 0;
	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT))
		return 1; /* ECHILD: reaped by another thread, or never ours */
	return si.si_pid == pid;
}

void fork_parent(void)
{
	struct fork_sync *s = fork_sync;

	if (!fork_locked)
		return;
	while (s && !atomic_load(&s->done)) {
		struct timespec ts = { 0, 20 * 1000 * 1000 };

		syscall(SYS_futex, &s->done, FUTEX_WAIT, 0, &ts, NULL, 0);
		if (atomic_load(&s->pid) && !atomic_load(&s->done) && child_gone(atomic_load(&s->pid)))
			break;
	}
	if (s)
		sys_munmap(s, PAGE);
	fork_sync = NULL;
	if (snap_fd >= 0)
		close(snap_fd);
	snap_fd = -1;
	unlock_table();
}

/* The child's snapshot of entry r (fork_prepare() took it): mapped at a
 * free address piece by piece, with the part's protection and key, then
 * moved over the shared mapping. 0, or -1 with nothing changed. */
static int map_snapshot(const struct range *r)
{
	size_t max = piece_of(r);
	uintptr_t t = reserve(r->len, r->giga ? GIB : PAGE);

	if (!t)
		return -1;
	for (size_t d = 0; d < r->len; d += max) {
		size_t n = r->len - d < max ? r->len - d : max;

		if (sys_mmap((void *)(t + d), n, r->prot, MAP_SHARED | MAP_FIXED, snap_fd,
			     (off_t)(r->off + d)) == MAP_FAILED) {
			sys_munmap((void *)t, r->len);
			return -1;
		}
	}
	if (r->pkey >= 0)
		sys_protect((void *)t, r->len, r->prot, r->pkey);
	for (size_t d = 0; d < r->len; d += max) {
		size_t n = r->len - d < max ? r->len - d : max;

		sys_mremap((void *)(t + d), n, n, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)(r->start + d));
	}
	return 0;
}

/* The child's own copy of entry r (table lock held, other threads gone). */
static void copy_entry(struct range *r)
{
	size_t max = r->giga ? GIGA_PIECE : PIECE;

	if (r->wipe) {
		/* Fresh tierkit memory right over the shared one: zero. */
		if (tk_map_at(r->start, r->len, r->off, r->prot, r->giga) == 0) {
			if (r->pkey >= 0)
				sys_protect((void *)r->start, r->len, r->prot, r->pkey);
			return;
		}
	}
	uintptr_t t = reserve(r->len, r->giga ? GIB : PAGE);

	if (t && tk_map_at(t, r->len, r->off, PROT_READ | PROT_WRITE, r->giga)) {
		sys_munmap((void *)t, r->len);
		t = 0;
	}
	/*
	 * A gigantic copy's GiBs are made at first touch, and a GiB that
	 * cannot be made (no free aligned GiB on the node) is SIGBUS: fault
	 * them in first, where a failure is an error, not the child's death,
	 * and take the kernel's memory then.
	 */
	if (t && r->giga &&
	    syscall(SYS_madvise, (void *)t, r->len, MADV_POPULATE_WRITE) != 0) {
		sys_munmap((void *)t, r->len);
		t = 0;
	}
	if (!t) {
		/* The kernel's memory then: the copy is private all the same. */
		void *p = sys_mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		say_once(SAY_FORK, "fork: a tierkit range copied to the kernel's memory in the child");
		if (p == MAP_FAILED)
			return;
		t = (uintptr_t)p;
		r->giga = 0;
	}
	if (r->wipe)
		;
	else if (r->prot & PROT_READ)
		memcpy((void *)t, (void *)r->start, r->len);
	else if (sys_mprotect((void *)r->start, r->len, PROT_READ) == 0)
		memcpy((void *)t, (void *)r->start, r->len);
	if (r->prot != (PROT_READ | PROT_WRITE) || r->pkey >= 0)
		sys_protect((void *)t, r->len, r->prot, r->pkey);
	/* Over the shared mapping, piece by piece (one vma each). */
	for (size_t d = 0; d < r->len; d += max) {
		size_t n = r->len - d < max ? r->len - d : max;

		sys_mremap((void *)(t + d), n, n, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)(r->start + d));
	}
}

void fork_child(void)
{
	struct fork_sync *s = fork_sync;

	if (!fork_locked)
		return;
	if (s)
		atomic_store(&s->pid, (int)getpid());
	for (int i = 0; i < nranges; i++) {
		/* Not in the child (MADV_DONTFORK): the kernel left it out. */
		if (ranges[i].dontfork) {
			table_del(i--);
			continue;
		}
		if (!ranges[i].snap)
			copy_entry(&ranges[i]);
		else if (map_snapshot(&ranges[i])) {
			if (ranges[i].giga)
				say_verbose("fork: a shared gigantic range could not be mapped in the child, which copied it");
			copy_entry(&ranges[i]);
		}
	}
	if (snap_fd >= 0)
		close(snap_fd);
	snap_fd = -1;
	if (s) {
		atomic_store(&s->done, 1);
		syscall(SYS_futex, &s->done, FUTEX_WAKE, 1, NULL, NULL, 0);
		sys_munmap(s, PAGE);
	}
	fork_sync = NULL;
	pthread_mutex_init(&table_lock, NULL);
	leave_lib();
}
