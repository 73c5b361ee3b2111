// SPDX-License-Identifier: GPL-2.0
/*
 * tkrun-check's fork measurements (-f) and copy-on-write checks (-c, and
 * -W for a gigantic block), as anonymous private memory behaves under the
 * kernel's fork:
 * - a snapshot: a thread keeps writing a counter to the first and the
 *   last word of a block while the main thread forks; each child must see
 *   both words from one moment (equal, or the first one ahead by one: the
 *   writer writes the first, then the last), no older than the counter
 *   before fork() and no newer than after it, and unchanged 20 ms later;
 * - no copy: the child of a process with a written block starts without
 *   taking a quarter of the block from MemAvailable, and a child that
 *   writes every page leaves the parent's block as it was;
 * - copy on write only: the parent reads every page while the child
 *   shares them without taking a quarter of the block from MemAvailable,
 *   then writes every page, and the child still reads the old contents;
 * - the time (-t): fork with a written block costs at most FORK_TIMES
 *   times fork with the same block of the kernel's anonymous memory
 *   (MAP_NORESERVE, which tk-run leaves to the kernel), measured side by
 *   side in one process.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tkrun-check.h"

static long meminfo_kib(const char *path, const char *key)
{
	FILE *f = fopen(path, "r");
	char line[128];
	long kib = -1;
	size_t k = strlen(key);

	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, key, k) == 0 && sscanf(line + k, " %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

static long mem_available_kib(void)
{
	return meminfo_kib("/proc/meminfo", "MemAvailable:");
}

static long rss_kib(void)
{
	return meminfo_kib("/proc/self/status", "VmRSS:");
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* fork's time and memory with a written block of mib MiB. */
int fork_cost(size_t mib)
{
	size_t n = mib << 20;
	char *p = malloc(n);
	int fds[2], st = 0;
	long before, child[2] = { -1, -1 };

	if (!p || pipe(fds))
		return 1;
	for (size_t i = 0; i < n; i += 4096)
		p[i] = (char)i;
	show("fork-cost", p);
	long rss = rss_kib();

	before = mem_available_kib();
	double t0 = now_ms();
	pid_t pid = fork();

	if (pid == 0) {
		long now[2] = { mem_available_kib(), rss_kib() };
		ssize_t w = write(fds[1], now, sizeof(now));

		_exit(w == sizeof(now) ? 0 : 1);
	}
	double t1 = now_ms();

	if (pid < 0 || read(fds[0], child, sizeof(child)) != sizeof(child) || waitpid(pid, &st, 0) != pid)
		return 1;
	double t2 = now_ms();

	printf("fork_ms %.3f\nfork_exit_ms %.3f\nfork_child_kib %ld\nfork_rss_kib %ld\nfork_child_rss_kib %ld\n",
	       t1 - t0, t2 - t0, before - child[0], rss, child[1]);
	free(p);
	return !WIFEXITED(st) || WEXITSTATUS(st) != 0;
}

struct hammer {
	volatile uint64_t *p;
	size_t words;
	atomic_uint_fast64_t gen;
	atomic_int stop;
};

static void *hammering(void *arg)
{
	struct hammer *h = arg;

	while (!atomic_load(&h->stop)) {
		uint64_t g = atomic_fetch_add(&h->gen, 1) + 1;

		h->p[0] = g;
		h->p[h->words - 1] = g;
	}
	return NULL;
}

/* One fork under the writer: the child's two words, then again 20 ms on. */
static int fork_under(struct hammer *h, uint64_t got[4], uint64_t *before, uint64_t *after)
{
	int fds[2], st = 0;

	if (pipe(fds))
		return -1;
	*before = atomic_load(&h->gen);
	pid_t pid = fork();

	if (pid == 0) {
		uint64_t v[4] = { h->p[0], h->p[h->words - 1] };
		struct timespec ts = { 0, 20 * 1000 * 1000 };

		nanosleep(&ts, NULL);
		v[2] = h->p[0];
		v[3] = h->p[h->words - 1];
		_exit(write(fds[1], v, sizeof(v)) == sizeof(v) ? 0 : 1);
	}
	*after = atomic_load(&h->gen);
	close(fds[1]);
	int ok = pid > 0 && read(fds[0], got, 4 * sizeof(uint64_t)) == 4 * sizeof(uint64_t) &&
		 waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;

	close(fds[0]);
	return ok ? 0 : -1;
}

/* forks forks of a process whose thread keeps writing block p of n bytes. */
static void writer_forks(volatile uint64_t *p, size_t n, int forks)
{
	struct hammer h = { .p = p, .words = n / 8 };
	int moment = 1, bounds = 1, stable = 1, ran = 1;
	char why[160] = "";
	pthread_t t;

	if (!h.p || pthread_create(&t, NULL, hammering, &h)) {
		check("fork under a writer thread: start", 0, "no block or thread");
		return;
	}
	show("cow-snapshot", (const void *)h.p);
	while (atomic_load(&h.gen) < 1000)
		;
	for (int i = 0; i < forks && ran; i++) {
		uint64_t v[4], before, after;

		if (fork_under(&h, v, &before, &after)) {
			ran = 0;
			break;
		}
		if (v[0] != v[1] && v[0] != v[1] + 1) {
			moment = 0;
			snprintf(why, sizeof(why), "first word %llu, last %llu",
				 (unsigned long long)v[0], (unsigned long long)v[1]);
		}
		if (v[0] + 1 < before || v[0] > after)
			bounds = 0;
		if (v[2] != v[0] || v[3] != v[1])
			stable = 0;
	}
	atomic_store(&h.stop, 1);
	pthread_join(t, NULL);
	check("fork under a writer thread: every child ran", ran, "fork, pipe or a child failed");
	check("fork under a writer thread: the child's block is one moment's", moment, why);
	check("fork under a writer thread: no write after fork() reaches the child", bounds,
	      "a value from before the fork's start or after it returned");
	check("fork under a writer thread: the child's block stays as it was", stable,
	      "the parent's later writes reached the child");
}

static void snapshot_under_writer(size_t n)
{
	volatile uint64_t *p = malloc(n);

	writer_forks(p, n, 10);
	free((void *)p);
}

/*
 * -W MIB: three forks under a writer thread with one block of MIB (under
 * tk-run --gigantic, a gigantic range: a 1 GiB page shared copy-on-write,
 * which the writer's first write after each fork copies whole).
 */
void gigantic_writer(size_t mib)
{
	size_t n = (mib ? mib : 1024) << 20;
	volatile uint64_t *p = malloc(n);

	if (p)
		memset((void *)p, 1, n);
	writer_forks(p, n, 3);
	free((void *)p);
}

static void fork_copies_nothing(size_t n)
{
	unsigned char *p = malloc(n);
	int fds[2], st = 0;
	long before, child = -1;

	if (!p || pipe(fds)) {
		check("fork copies nothing: start", 0, "no block or pipe");
		return;
	}
	for (size_t i = 0; i < n; i += 4096)
		p[i] = (unsigned char)(i >> 12);
	show("cow-cost", p);
	before = mem_available_kib();
	pid_t pid = fork();

	if (pid == 0) {
		long now = mem_available_kib();

		_exit(write(fds[1], &now, sizeof(now)) == sizeof(now) ? 0 : 1);
	}
	int ok = pid > 0 && read(fds[0], &child, sizeof(child)) == sizeof(child) &&
		 waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	char why[160];

	snprintf(why, sizeof(why), "the child's start took %ld KiB of MemAvailable (block %zu KiB)",
		 before - child, n >> 10);
	check("fork copies nothing: the child's start takes under a quarter of the block",
	      ok && before - child < (long)(n >> 12), why);
	pid = fork();
	if (pid == 0) {
		int mine = 1;

		for (size_t i = 0; i < n; i += 4096)
			p[i] = 0x5a;
		for (size_t i = 0; i < n; i += 4096)
			mine &= p[i] == 0x5a;
		_exit(mine ? 0 : 1);
	}
	ok = pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	int kept = 1;

	for (size_t i = 0; i < n; i += 4096)
		kept &= p[i] == (unsigned char)(i >> 12);
	check("fork: a child that writes every page sees its own writes", ok, "the child's check failed");
	check("fork: a child's writes to every page leave the parent's block", kept,
	      "the parent read the child's writes");
	close(fds[0]);
	close(fds[1]);
	free(p);
}

/* The parent reads every page the child shares, then writes every page. */
static void parent_reads_copy_nothing(size_t n)
{
	volatile unsigned char *p = malloc(n);
	int go[2], st = 0;
	unsigned sum = 0, mine = 1;

	if (!p || pipe(go)) {
		check("fork: the parent's reads copy nothing: start", 0, "no block or pipe");
		return;
	}
	for (size_t i = 0; i < n; i += 4096)
		p[i] = (unsigned char)(i >> 12);
	show("cow-read", (const void *)p);
	pid_t pid = fork();

	if (pid == 0) {
		char c;
		int kept = read(go[0], &c, 1) == 1;

		for (size_t i = 0; i < n; i += 4096)
			kept &= p[i] == (unsigned char)(i >> 12);
		_exit(kept ? 0 : 1);
	}
	long before = mem_available_kib();

	for (size_t i = 0; i < n; i += 4096)
		sum += p[i];
	long took = before - mem_available_kib();

	for (size_t i = 0; i < n; i += 4096)
		p[i] = 0xa5;
	for (size_t i = 0; i < n; i += 4096)
		mine &= p[i] == 0xa5;
	int ok = pid > 0 && write(go[1], "x", 1) == 1 && waitpid(pid, &st, 0) == pid &&
		 WIFEXITED(st) && WEXITSTATUS(st) == 0;
	char why[160];

	snprintf(why, sizeof(why), "the parent's reads took %ld KiB of MemAvailable (block %zu KiB, sum %u)",
		 took, n >> 10, sum);
	check("fork: the parent's reads of every shared page take under a quarter of the block",
	      pid > 0 && took < (long)(n >> 12), why);
	check("fork: the parent's writes after its reads stay its own", ok && mine,
	      mine ? "the child read the parent's writes" : "the parent lost its writes");
	close(go[0]);
	close(go[1]);
	free((void *)p);
}

void cow_checks(size_t mib)
{
	size_t n = (mib ? mib : 64) << 20;

	snapshot_under_writer(n);
	fork_copies_nothing(n);
	parent_reads_copy_nothing(n);
}

/*
 * The bound of -t. The kernel's fork of n bytes of anonymous memory costs
 * a PTE copy and a reference per page; tk-run's a reference and a share
 * count per page and the zap of the parent's PTE (each page's
 * write-protection), a few times that per page, under TCG as natively.
 */
#define FORK_TIMES 8

/* The fastest of three forks of this process, to fork()'s return, each
 * after a write to every page of p..p + n (as a program that works
 * between its forks): ms. */
static double fork_ms_best(char *p, size_t n)
{
	double best = -1;

	for (int i = 0; i < 3; i++) {
		int st;

		for (size_t j = 0; j < n; j += 4096)
			p[j] = (char)(i + (j >> 12));
		double t0 = now_ms();
		pid_t pid = fork();

		if (pid == 0)
			_exit(0);
		double t = now_ms() - t0;

		if (pid < 0 || waitpid(pid, &st, 0) != pid)
			return -1;
		if (best < 0 || t < best)
			best = t;
	}
	return best;
}

/* A block of n bytes, every page written; tierkit's unless kernel. */
static char *written_block(size_t n, int kernel)
{
	char *p = kernel ? mmap(NULL, n, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
			 : malloc(n);

	if (p == MAP_FAILED || !p)
		return NULL;
	if (kernel)
		madvise(p, n, MADV_NOHUGEPAGE); /* PTEs, as tierkit's are */
	for (size_t i = 0; i < n; i += 4096)
		p[i] = (char)(i >> 12);
	show(kernel ? "time-kernel" : "time-cow", p);
	return p;
}

/* -t MIB: fork's time with a block of MIB, against the kernel's own. */
int fork_time(size_t mib)
{
	size_t n = (mib ? mib : 1024) << 20;
	char *k = written_block(n, 1);
	double tk = k ? fork_ms_best(k, n) : -1;

	if (k)
		munmap(k, n);
	char *c = written_block(n, 0);
	double tc = c ? fork_ms_best(c, n) : -1;
	char why[160];

	free(c);
	printf("fork_kernel_ms %.3f\nfork_tkrun_ms %.3f\n", tk, tc);
	snprintf(why, sizeof(why), "%.1f ms against the kernel's %.1f ms", tc, tk);
	check("fork with a written block costs at most 8 times the kernel's fork of as much anonymous memory",
	      tk > 0 && tc > 0 && tc <= FORK_TIMES * tk, why);
	return !(tk > 0 && tc > 0 && tc <= FORK_TIMES * tk);
}
