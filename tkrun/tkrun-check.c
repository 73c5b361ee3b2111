// SPDX-License-Identifier: GPL-2.0
/*
 * tkrun-check: exercises what a program may do with big heap and mmap
 * memory (malloc, calloc, realloc across sizes, aligned allocation, mmap,
 * mremap, partial munmap, MAP_FIXED over a mapping, fork, threads) and
 * checks that the contents behave as anonymous private memory does. It
 * knows nothing of tierkit: it prints, for each big block, what
 * /proc/self/maps says backs it ("backing NAME PATH"), and one
 * "ok NAME" or "not ok NAME: WHY" line per check. Exit status 0 iff all
 * checks passed. Run under tk-run, the blocks should be tierkit's.
 *
 * Then what real programs do around it: a partial MADV_DONTFORK and
 * MADV_WIPEONFORK before fork, threads cancelled inside big mallocs, a
 * signal handler that maps memory, fork from a thread, guard pages and
 * read-only parts (mprotect) under fork, MADV_DONTNEED, munmap and msync,
 * and a shell pipeline forked and exec'd while a thread keeps writing.
 *
 * Usage: tkrun-check [MIB]   (size of the big blocks, default 4)
 *        tkrun-check -g MIB  (one block of MIB: every byte must read zero;
 *                             then "waiting" and a line on stdin to end)
 *        tkrun-check -G MIB  (the same, then a fork whose child exits at
 *                             once, and a fork with the block: each side
 *                             keeps its own contents)
 *        tkrun-check -W MIB  (three forks under a writer thread with one
 *                             block of MIB: tkrun-fork.c)
 *        tkrun-check -f MIB  (fork's cost with a block of MIB, every page
 *                             written: "fork_ms", "fork_exit_ms" (fork to
 *                             the child's exit, reaped), "fork_child_kib"
 *                             (MemAvailable the child's start took),
 *                             "fork_rss_kib" (the parent's VmRSS) and
 *                             "fork_child_rss_kib" (the child's at start))
 *        tkrun-check -c MIB  (fork as a snapshot under a writer thread, and
 *                             a fork that copies nothing, with blocks of
 *                             MIB: tkrun-fork.c)
 *        tkrun-check -t MIB  (fork's time with a written block of MIB
 *                             against the same fork with the kernel's
 *                             anonymous memory: tkrun-fork.c)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tkrun-check.h"

static size_t big;
static int failed;

void check(const char *name, int ok, const char *why)
{
	if (ok) {
		printf("ok %s\n", name);
	} else {
		printf("not ok %s: %s\n", name, why);
		failed = 1;
	}
	fflush(stdout);
}

/* The path of the mapping that holds addr ("[anon]" for none, "-" if
 * nothing maps it). */
static void backing(const void *addr, char *out, size_t n)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];

	snprintf(out, n, "-");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;
		int off = 0;

		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &s, &e, &off) < 2)
			continue;
		if ((uintptr_t)addr < s || (uintptr_t)addr >= e)
			continue;
		char *p = line + off;

		p[strcspn(p, "\n")] = 0;
		snprintf(out, n, "%s", *p ? p : "[anon]");
		break;
	}
	fclose(f);
}

void show(const char *name, const void *addr)
{
	char b[256];

	backing(addr, b, sizeof(b));
	printf("backing %s %s\n", name, b);
	fflush(stdout);
}

static void fill(void *p, size_t n, unsigned seed)
{
	unsigned char *c = p;

	for (size_t i = 0; i < n; i += 512)
		c[i] = (unsigned char)(seed + i / 512);
}

static int same(const void *p, size_t n, unsigned seed)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i += 512)
		if (c[i] != (unsigned char)(seed + i / 512))
			return 0;
	return 1;
}

static int zero(const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i += 256)
		if (c[i])
			return 0;
	return 1;
}

static void heap(void)
{
	char *p = malloc(big);

	show("malloc", p);
	fill(p, big, 1);
	check("malloc contents", same(p, big, 1), "pattern lost");
	check("malloc_usable_size", malloc_usable_size(p) >= big, "smaller than asked");
	free(p);

	char *z = calloc(big / 16, 16);

	show("calloc", z);
	check("calloc zeroed", z && zero(z, big), "not zero");
	free(z);

	char *s = malloc(1000);

	fill(s, 1000, 7);
	char *g = realloc(s, big);

	show("realloc-grown", g);
	check("realloc small->big keeps contents", g && same(g, 1000, 7), "pattern lost");
	fill(g, big, 8);
	char *h = realloc(g, 2 * big);

	show("realloc-doubled", h);
	check("realloc big->bigger keeps contents", h && same(h, big, 8), "pattern lost");
	char *k = realloc(h, 3000);

	show("realloc-shrunk", k);
	check("realloc big->small keeps contents", k && same(k, 3000, 8), "pattern lost");
	free(k);

	/* A moving realloc keeps every usable byte (glibc copies them). */
	char *u = malloc(big - big / 4 + 100);
	size_t un = malloc_usable_size(u);

	u[un - 1] = 'U';
	char *ug = realloc(u, 16 * big);

	check("realloc moving keeps the usable slack", ug && ug[un - 1] == 'U', "last usable byte lost");
	free(ug);

	void *al = NULL;
	int r = posix_memalign(&al, 2UL << 20, big);

	show("posix_memalign", al);
	check("posix_memalign 2 MiB aligned", r == 0 && ((uintptr_t)al & ((2UL << 20) - 1)) == 0,
	      "misaligned");
	fill(al, big, 9);
	check("posix_memalign contents", same(al, big, 9), "pattern lost");
	free(al);
	char *aa = aligned_alloc(65536, big);

	check("aligned_alloc 64 KiB aligned", aa && ((uintptr_t)aa & 65535) == 0, "misaligned");
	free(aa);
}

static void maps(void)
{
	char b[256];
	char *m = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	show("mmap", m);
	check("mmap zeroed", m != MAP_FAILED && zero(m, big), "not zero");
	fill(m, big, 11);
	char *g = mremap(m, big, 2 * big, MREMAP_MAYMOVE);

	show("mremap-grown", g);
	check("mremap grow keeps contents", g != MAP_FAILED && same(g, big, 11), "pattern lost");
	check("mremap grow: new part zero", g != MAP_FAILED && zero(g + big, big), "not zero");
	char *s = mremap(g, 2 * big, big / 2, 0);

	check("mremap shrink in place", s == g && same(s, big / 2, 11), "moved or lost");
	backing(s + big / 2, b, sizeof(b));
	check("mremap shrink: tail unmapped", strcmp(b, "-") == 0, b);
	char *dst = mmap(NULL, big, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *mv = mremap(s, big / 2, big / 2, MREMAP_MAYMOVE | MREMAP_FIXED, dst);

	show("mremap-moved", mv);
	check("mremap move (FIXED) keeps contents", mv == dst && same(mv, big / 2, 11), "lost");
	backing(s, b, sizeof(b));
	check("mremap move: old range unmapped", strcmp(b, "-") == 0, b);
	munmap(dst, big);
	/* Growing without MREMAP_MAYMOVE: same address or ENOMEM. */
	char *f = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	fill(f, big, 12);
	char *fg = mremap(f, big, 2 * big, 0);

	check("mremap grow in place: same address or ENOMEM",
	      (fg == f && same(f, big, 12) && zero(f + big, big)) || (fg == MAP_FAILED && errno == ENOMEM && same(f, big, 12)),
	      "moved or lost");
	munmap(f, fg == f ? 2 * big : big);

	/* Old size 0 duplicates a shared mapping; a private one cannot be. */
	char *o = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	errno = 0;
	char *dup = mremap(o, 0, big, MREMAP_MAYMOVE);

	check("mremap old size 0 of a private mapping: EINVAL", dup == MAP_FAILED && errno == EINVAL,
	      "duplicated");
	if (dup != MAP_FAILED)
		munmap(dup, big);
	munmap(o, big);

	/* MADV_DONTNEED: anonymous memory reads zero afterwards. */
	char *d = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	show("madvise", d);
	fill(d, big, 14);
	check("MADV_DONTNEED: zero afterwards, the rest kept",
	      madvise(d, big / 2, MADV_DONTNEED) == 0 && zero(d, big / 2) &&
		      same(d + big / 2, big / 2, (unsigned)(14 + big / 1024)),
	      "stale or lost contents");
	munmap(d, big);

	/* Partial munmap: the middle goes, both ends stay. */
	char *p = mmap(NULL, 4 * big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	show("mmap-partial", p);
	fill(p, 4 * big, 13);
	check("partial munmap", munmap(p + big, big) == 0, strerror(errno));
	backing(p + big, b, sizeof(b));
	check("partial munmap: middle unmapped", strcmp(b, "-") == 0, b);
	check("partial munmap: head intact", same(p, big, 13), "lost");
	check("partial munmap: tail intact",
	      same(p + 2 * big, 2 * big, (unsigned)(13 + 2 * big / 512)), "lost");

	/* MAP_FIXED over the tail's first part. */
	char *x = mmap(p + 2 * big, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);

	show("map-fixed", x);
	check("MAP_FIXED over it: zero", x == p + 2 * big && zero(x, big), "not zero");
	check("MAP_FIXED over it: the rest intact",
	      same(p + 3 * big, big, (unsigned)(13 + 3 * big / 512)), "lost");
	munmap(p, 4 * big);
}

static void forks(void)
{
	char *p = malloc(big);

	fill(p, big, 21);
	pid_t pid = fork();

	if (pid == 0) {
		/* The parent writes p[0] right after fork; the child must not see it. */
		usleep(200000);
		int ok = same(p, big, 21);

		show("fork-child", p);
		*(volatile char *)(p + 512) = 'C';
		_exit(ok ? 0 : 1);
	}
	/* volatile: a store right before free() is otherwise dead. */
	*(volatile char *)p = 'P';
	int st = 0;

	waitpid(pid, &st, 0);
	check("fork: child sees the contents at fork, not the parent's later write",
	      WIFEXITED(st) && WEXITSTATUS(st) == 0, "child saw a change");
	/* MADV_DONTFORK: the child has no such range. */
	char *nf = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	show("dontfork", nf);
	fill(nf, big, 22);
	madvise(nf, big, MADV_DONTFORK);
	pid = fork();
	if (pid == 0) {
		char b[256];

		backing(nf, b, sizeof(b));
		_exit(strcmp(b, "-") == 0 ? 0 : 1);
	}
	waitpid(pid, &st, 0);
	check("fork: a MADV_DONTFORK block is not in the child",
	      WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child has it");
	munmap(nf, big);
	check("fork: the parent does not see the child's write", *(volatile char *)(p + 512) == (char)(21 + 1),
	      "parent saw the child's write");
	show("fork-parent", p);
	free(p);
}

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;

	for (int i = 0; i < 20; i++) {
		char *p = malloc(big / 2 + 4096 * (size_t)i);

		if (!p)
			return (void *)1;
		fill(p, big / 2, seed + (unsigned)i);
		char *q = realloc(p, big + 4096 * (size_t)i);

		if (!q || !same(q, big / 2, seed + (unsigned)i))
			return (void *)1;
		free(q);
	}
	return NULL;
}

static void threads(void)
{
	pthread_t t[4];
	int bad = 0;

	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i * 40));
	for (int i = 0; i < 4; i++) {
		void *r;

		pthread_join(t[i], &r);
		bad |= r != NULL;
	}
	check("threads: 4 x 20 malloc/realloc/free, contents kept", !bad, "a thread saw a loss");
}

/* One big block: zero on arrival, writable, then held until told. */
/* fork with the block p of n bytes written with fill(5): the child sees
 * the contents at fork and not the parent's writes after it, and the
 * parent does not see the child's write. Under tk-run --gigantic this is
 * a gigantic range, which fork copies for the child (tk-run.md). */
static void fork_block(unsigned char *p, size_t n)
{
	int go[2];
	int st = 0;
	pid_t quick = fork();

	/* A child that exits at once: as fork + exec, it copies nothing. */
	if (quick == 0)
		_exit(0);
	if (quick > 0)
		waitpid(quick, &st, 0);
	if (pipe(go)) {
		check("fork with the block", 0, "pipe failed");
		return;
	}
	pid_t pid = fork();

	if (pid == 0) {
		char c;

		close(go[1]);
		/* Until the parent has written after the fork. */
		if (read(go[0], &c, 1) != 1)
			_exit(2);
		int ok = same(p, n, 5);

		p[512] = 'C';
		p[n - 512] = 'C';
		_exit(ok ? 0 : 1);
	}
	close(go[0]);
	/* A child that died is reported, not a SIGPIPE of this process. */
	signal(SIGPIPE, SIG_IGN);
	if (pid < 0) {
		close(go[1]);
		check("fork with the block", 0, "fork failed");
		return;
	}
	*(volatile unsigned char *)p = 'P';
	*(volatile unsigned char *)(p + n / 2) = 'P';
	if (write(go[1], "g", 1) != 1)
		kill(pid, SIGKILL);
	close(go[1]);
	waitpid(pid, &st, 0);
	check("fork with the block: the child sees it as at fork, not the parent's later writes",
	      WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      WIFEXITED(st) && WEXITSTATUS(st) == 1 ? "the child saw a change" : "the child died");
	p[0] = 5;
	p[n / 2] = (unsigned char)(5 + n / 2 / 512);
	check("fork with the block: the parent does not see the child's writes", same(p, n, 5),
	      "the parent saw the child's write");
}

static int one_block(size_t mib, int with_fork)
{
	size_t n = mib << 20;
	unsigned long *p = malloc(n);
	char line[16];

	if (!p) {
		check("big block", 0, "malloc failed");
		return 1;
	}
	show("block", p);
	printf("block %p %zu\n", (void *)p, n);
	int z = 1;

	for (size_t i = 0; i < n / sizeof(*p); i++)
		z &= p[i] == 0;
	check("big block: every byte zero", z, "a non-zero byte");
	fill(p, n, 5);
	check("big block: writable, contents kept", same(p, n, 5), "pattern lost");
	printf("waiting\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		line[0] = 0;
	if (with_fork)
		fork_block((unsigned char *)p, n);
	free(p);
	return failed;
}

/* The mode field of /proc/self/maps for addr ("rw-p"), or "-". */
static void perms(const void *addr, char *out)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];

	strcpy(out, "-");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long s, e;
		char m[8];

		if (sscanf(line, "%lx-%lx %7s", &s, &e, m) == 3 && (uintptr_t)addr >= s &&
		    (uintptr_t)addr < e) {
			strcpy(out, m);
			break;
		}
	}
	if (f)
		fclose(f);
}

/* Forks; the child runs fn and exits with its result; 1 iff it exited 0. */
static int in_child(int (*fn)(void *), void *arg)
{
	int st = 0;
	pid_t pid = fork();

	if (pid == 0)
		_exit(fn(arg) ? 0 : 1);
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* A partial MADV_DONTFORK (ibv_fork_init, DPDK): that page is absent in
 * the child, the rest is the child's own private copy. */
static int dontfork_child(void *arg)
{
	char *p = arg, m[8];

	perms(p + big, m);
	if (strcmp(m, "-") != 0 || !same(p, big, 31))
		return 0;
	p[0] = 'C';
	p[2 * big - 1] = 'C';
	return 1;
}

/* MADV_WIPEONFORK: the child reads zero there, the rest is copied. */
static int wipe_child(void *arg)
{
	char *p = arg;

	return zero(p, big) && same(p + big, big, (unsigned)(32 + big / 512));
}

static void fork_advice(void)
{
	char *p = mmap(NULL, 2 * big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	fill(p, 2 * big, 31);
	char last = p[2 * big - 1];

	check("MADV_DONTFORK of one page", madvise(p + big, 4096, MADV_DONTFORK) == 0, strerror(errno));
	int ok = in_child(dontfork_child, p);

	check("fork after a partial MADV_DONTFORK: that page absent in the child, the rest private",
	      ok && p[0] == (char)31 && p[2 * big - 1] == last, "the child's write reached the parent, or its copy was wrong");
	munmap(p, 2 * big);

	p = mmap(NULL, 2 * big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	fill(p, 2 * big, 32);
	check("MADV_WIPEONFORK", madvise(p, big, MADV_WIPEONFORK) == 0, strerror(errno));
	check("fork after MADV_WIPEONFORK: zero in the child, kept in the parent",
	      in_child(wipe_child, p) && same(p, 2 * big, 32), "wrong contents");
	munmap(p, 2 * big);
}

/* --- threads: cancellation, signals, fork from a thread ----------------- */

/* Where a block escapes to: a malloc and free the compiler can see are
 * otherwise left out. */
static char *volatile sink;

static void *alloc_loop(void *arg)
{
	(void)arg;
	for (;;) {
		char *p = malloc(big);

		sink = p;
		if (p)
			p[0] = 1;
		free(p);
		pthread_testcancel();
	}
	return NULL;
}

static volatile sig_atomic_t handled, handled_bad;

/* mmap and munmap are system calls, safe in a handler (malloc is not:
 * glibc's would deadlock on its own arena lock). */
static void mapping_handler(int sig)
{
	char *p = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	(void)sig;
	if (p != MAP_FAILED) {
		handled++;
		handled_bad |= !zero(p, big);
		memset(p, 7, 4096);
		munmap(p, big);
	}
}

static void *map_loop(void *arg)
{
	(void)arg;
	for (;;) {
		char *p = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p != MAP_FAILED) {
			p[0] = 1;
			munmap(p, big);
		}
		pthread_testcancel();
	}
	return NULL;
}

static void on_alarm(int sig)
{
	static const char m[] = "not ok threads: the process hung (deadlock)\n";
	ssize_t r = write(1, m, sizeof(m) - 1);

	(void)sig;
	(void)r;
	_exit(1);
}

static int nothing(void *arg)
{
	(void)arg;
	return 1;
}

static void *forker(void *arg)
{
	char *p = arg;

	return (void *)(uintptr_t)(in_child(nothing, NULL) && same(p, big, 41));
}

static void thread_safety(void)
{
	pthread_t t[4];

	signal(SIGALRM, on_alarm);
	alarm(60);
	/* Cancelled wherever they are: glibc's malloc is no cancellation
	 * point, so nothing may be left locked. */
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, alloc_loop, NULL);
		usleep(20000);
		for (int i = 0; i < 4; i++) {
			pthread_cancel(t[i]);
			pthread_join(t[i], NULL);
		}
	}
	char *p = malloc(big);

	check("threads cancelled inside big mallocs: malloc, free and fork go on",
	      p && in_child(nothing, NULL), "failed");
	free(p);

	/* A handler that maps and unmaps, run in the middle of the same. */
	signal(SIGUSR1, mapping_handler);
	pthread_create(&t[0], NULL, map_loop, NULL);
	for (int i = 0; i < 200; i++) {
		pthread_kill(t[0], SIGUSR1);
		usleep(500);
	}
	pthread_cancel(t[0]);
	pthread_join(t[0], NULL);
	check("a signal handler that maps and unmaps, during the same", handled > 0 && !handled_bad,
	      "the handler never ran or saw non-zero memory");

	/* fork from a thread while another mallocs. */
	p = malloc(big);
	fill(p, big, 41);
	pthread_create(&t[0], NULL, alloc_loop, NULL);
	void *r = NULL;

	pthread_create(&t[1], NULL, forker, p);
	pthread_join(t[1], &r);
	pthread_cancel(t[0]);
	pthread_join(t[0], NULL);
	check("fork from a thread while another mallocs", r != NULL, "failed");
	free(p);
	alarm(0);
}

/* --- guard pages and read-only parts (mprotect) ------------------------- */

static sigjmp_buf segv_jump;

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(segv_jump, 1);
}

/* 1 iff reading addr faults. */
static int faults(const volatile char *addr)
{
	struct sigaction sa = { .sa_handler = on_segv }, old;
	int f = 0;

	sigaction(SIGSEGV, &sa, &old);
	if (sigsetjmp(segv_jump, 1) == 0)
		(void)*addr;
	else
		f = 1;
	sigaction(SIGSEGV, &old, NULL);
	return f;
}

/* In the child: the guard still faults, the read-only page is readable
 * and read-only, the rest is the contents at fork. */
static int guard_child(void *arg)
{
	char *p = arg, m[8];

	perms(p, m);
	return faults(p + big) && m[0] == 'r' && m[1] == '-' && same(p, big, 51) &&
	       same(p + big + 4096, big - 4096, (unsigned)(51 + (big + 4096) / 512));
}

static void guard_pages(void)
{
	char *p = mmap(NULL, 2 * big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char m[8];

	fill(p, 2 * big, 51);
	check("mprotect a guard page (PROT_NONE) and a read-only page",
	      mprotect(p + big, 4096, PROT_NONE) == 0 && mprotect(p, 4096, PROT_READ) == 0, strerror(errno));
	check("guard page: a read faults", faults(p + big), "no fault");
	check("fork with a guard page and a read-only page", in_child(guard_child, p),
	      "the child died or saw wrong contents or protections");
	check("msync(MS_SYNC) over them", msync(p, 2 * big, MS_SYNC) == 0, strerror(errno));
	check("MADV_DODUMP over them", madvise(p, 2 * big, MADV_DODUMP) == 0, strerror(errno));
	check("MADV_DONTNEED over them: zero afterwards, protections kept",
	      madvise(p, 2 * big, MADV_DONTNEED) == 0 && zero(p, big) && zero(p + big + 4096, big - 4096) &&
		      faults(p + big),
	      "failed, stale contents or the guard lost");
	perms(p, m);
	check("MADV_DONTNEED: the read-only page stays read-only", m[1] == '-', m);
	check("munmap across the guard page", munmap(p + big - 4096, 3 * 4096) == 0, strerror(errno));
	check("mprotect back to read-write, then writable", mprotect(p, 4096, PROT_READ | PROT_WRITE) == 0 &&
	      (p[0] = 1) == 1, strerror(errno));
	munmap(p, 2 * big);

	/* Advice across a hole: ENOMEM, and the mapped parts advised. */
	p = mmap(NULL, 3 * big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	fill(p, 3 * big, 52);
	munmap(p + big, big);
	errno = 0;
	int r = madvise(p, 3 * big, MADV_DONTNEED);

	check("MADV_DONTNEED across a hole: ENOMEM, both parts zero",
	      r == -1 && errno == ENOMEM && zero(p, big) && zero(p + 2 * big, big), "wrong result or contents");
	munmap(p, 3 * big);
}

/* --- a shell pipeline forked and exec'd while a thread keeps writing ---- */

struct writer {
	char *p;
	volatile int stop;
	unsigned gen;
};

static void *writing(void *arg)
{
	struct writer *w = arg;

	while (!w->stop) {
		w->gen++;
		for (size_t i = 0; i < big; i += 4096)
			w->p[i] = (char)w->gen;
	}
	return NULL;
}

static void shell_pipeline(void)
{
	struct writer w = { .p = malloc(big) };
	pthread_t t;
	int bad = 0;

	pthread_create(&t, NULL, writing, &w);
	for (int i = 0; i < 20 && !bad; i++) {
		int st = 0;
		pid_t pid = fork();

		if (pid == 0) {
			execl("/bin/sh", "sh", "-c", "x=$(echo tk | cat | cat); [ \"$x\" = tk ]", (char *)NULL);
			_exit(127);
		}
		bad = pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	}
	w.stop = 1;
	pthread_join(t, NULL);
	int kept = 1;

	for (size_t i = 0; i < big; i += 4096)
		kept &= w.p[i] == (char)w.gen;
	check("20 x fork + exec of a sh pipeline while a thread writes", !bad, "a pipeline failed");
	check("the writer's block holds its last writes", kept, "lost writes");
	free(w.p);
}

int main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[1], "-f") == 0)
		return fork_cost((size_t)atoi(argv[2]));
	if (argc > 2 && (strcmp(argv[1], "-c") == 0 || strcmp(argv[1], "-W") == 0)) {
		(argv[1][1] == 'c' ? cow_checks : gigantic_writer)((size_t)atoi(argv[2]));
		printf("%s\n", failed ? "FAILED" : "PASSED");
		return failed;
	}
	if (argc > 2 && strcmp(argv[1], "-t") == 0)
		return fork_time((size_t)atoi(argv[2]));
	if (argc > 2 && strcmp(argv[1], "-g") == 0)
		return one_block((size_t)atoi(argv[2]), 0);
	if (argc > 2 && strcmp(argv[1], "-G") == 0)
		return one_block((size_t)atoi(argv[2]), 1);
	big = (size_t)(argc > 1 ? atoi(argv[1]) : 4) << 20;
	if (big == 0)
		big = 4UL << 20;
	heap();
	maps();
	forks();
	threads();
	fork_advice();
	thread_safety();
	guard_pages();
	shell_pipeline();
	printf("%s\n", failed ? "FAILED" : "PASSED");
	return failed;
}
