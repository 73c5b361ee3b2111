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
 * Usage: tkrun-check [MIB]   (size of the big blocks, default 4)
 *        tkrun-check -g MIB  (one block of MIB: every byte must read zero;
 *                             then "waiting" and a line on stdin to end)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static size_t big;
static int failed;

static void check(const char *name, int ok, const char *why)
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

static void show(const char *name, const void *addr)
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
static int one_block(size_t mib)
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
	free(p);
	return failed;
}

int main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[1], "-g") == 0)
		return one_block((size_t)atoi(argv[2]));
	big = (size_t)(argc > 1 ? atoi(argv[1]) : 4) << 20;
	if (big == 0)
		big = 4UL << 20;
	heap();
	maps();
	forks();
	threads();
	printf("%s\n", failed ? "FAILED" : "PASSED");
	return failed;
}
