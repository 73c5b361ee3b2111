// SPDX-License-Identifier: GPL-2.0
/*
 * libtkrun.so's fork handlers (pthread_atfork): the child's tierkit
 * ranges made private copies before fork() returns in the parent.
 */
#define _GNU_SOURCE
#include "libtkrun.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>

/* --- fork ---------------------------------------------------------------
 * A tierkit mapping is MAP_SHARED: after a plain fork parent and child
 * would see each other's writes. The child therefore copies every range
 * into fresh tierkit memory (same offsets, so the same nodes) before
 * fork() returns in the parent: the parent waits for it on a pipe, so
 * nothing the parent writes after fork() reaches the child.
 */
static int fork_pipe[2] = { -1, -1 };

void fork_prepare(void)
{
	if (!lock_table())
		return;
	if (nranges == 0 || pipe2(fork_pipe, O_CLOEXEC))
		fork_pipe[0] = fork_pipe[1] = -1;
}

void fork_parent(void)
{
	char c;

	if (fork_pipe[1] >= 0) {
		close(fork_pipe[1]);
		while (read(fork_pipe[0], &c, 1) < 0 && errno == EINTR)
			;
		close(fork_pipe[0]);
		fork_pipe[0] = fork_pipe[1] = -1;
	}
	unlock_table();
}

void fork_child(void)
{
	for (int i = 0; i < nranges; i++) {
		struct range *r = &ranges[i];

		/* Not in the child (MADV_DONTFORK), wholly or in part: left as
		 * it is (madvise of an unmapped page is ENOMEM). */
		if (r->dontfork || syscall(SYS_madvise, r->start, r->len, MADV_NORMAL)) {
			table_del(i--);
			continue;
		}
		uintptr_t t = reserve(r->len, r->giga ? GIB : PAGE);

		if (t && tk_map_at(t, r->len, r->off, PROT_READ | PROT_WRITE, r->giga)) {
			sys_munmap((void *)t, r->len);
			t = 0;
		}
		if (!t) {
			/* The kernel's memory then: the copy is private all the same. */
			void *p = sys_mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			say_once(SAY_FORK, "fork: a tierkit range copied to the kernel's memory in the child");
			if (p == MAP_FAILED)
				continue;
			t = (uintptr_t)p;
			r->giga = 0;
		}
		memcpy((void *)t, (void *)r->start, r->len);
		if (r->prot != (PROT_READ | PROT_WRITE))
			mprotect((void *)t, r->len, r->prot);
		/* Over the shared mapping, piece by piece (one vma each). */
		size_t max = r->giga ? GIGA_PIECE : PIECE;

		for (size_t d = 0; d < r->len; d += max) {
			size_t n = r->len - d < max ? r->len - d : max;

			sys_mremap((void *)(t + d), n, n, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)(r->start + d));
		}
	}
	if (fork_pipe[1] >= 0) {
		ssize_t w = write(fork_pipe[1], "", 1);

		(void)w;
		close(fork_pipe[1]);
		close(fork_pipe[0]);
		fork_pipe[0] = fork_pipe[1] = -1;
	}
	pthread_mutex_init(&table_lock, NULL);
	in_lib = 0;
}
