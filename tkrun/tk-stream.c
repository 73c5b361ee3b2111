// SPDX-License-Identifier: GPL-2.0
/*
 * tk-stream: a STREAM-like triad (a[i] = b[i] + s * c[i]) over three
 * malloc'd arrays of doubles, reporting the best bandwidth. It knows
 * nothing of tierkit: tk-run places its arrays.
 *
 * Usage: tk-stream [-n ELEMENTS] [-r ROUNDS] [-w]
 *        tk-stream -f BYTES [-w]
 *   -n  elements per array (default 4194304: 32 MiB each)
 *   -r  timed rounds, the best is reported (default 5)
 *   -w  after the rounds, print "waiting" and wait for a line on stdin
 *       before freeing (so another process can look at the pages, or
 *       move them), then check every element and print
 *       "held check ok|FAILED, N of ELEMENTS elements wrong"
 *   -f  time to first use instead: malloc BYTES and write one byte in
 *       every 4 KiB page; prints "first-use NS ns BYTES bytes ADDR"
 * Output: one "array NAME ADDR BYTES" line per array, then
 *   "triad MBPS MB/s best of R, N elements, check ok|FAILED".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void hold(int wait)
{
	char line[16];

	if (!wait)
		return;
	printf("waiting\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		line[0] = 0;
}

/* malloc, then one write per 4 KiB page: the time until all of it is usable. */
static int first_use(size_t bytes, int wait)
{
	double t0 = now();
	volatile char *p = malloc(bytes);

	if (!p) {
		fprintf(stderr, "tk-stream: out of memory for %zu bytes\n", bytes);
		return 1;
	}
	for (size_t i = 0; i < bytes; i += 4096)
		p[i] = 1;
	double t = now() - t0;

	printf("first-use %.0f ns %zu bytes %p\n", t * 1e9, bytes, (void *)p);
	fflush(stdout);
	hold(wait);
	free((void *)p);
	return 0;
}

int main(int argc, char **argv)
{
	size_t n = 4194304, first = 0;
	int rounds = 5, wait = 0, opt;

	while ((opt = getopt(argc, argv, "n:r:wf:")) != -1) {
		switch (opt) {
		case 'n': n = strtoull(optarg, NULL, 0); break;
		case 'r': rounds = atoi(optarg); break;
		case 'w': wait = 1; break;
		case 'f': first = strtoull(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: %s [-n ELEMENTS] [-r ROUNDS] [-w] | -f BYTES [-w]\n", argv[0]);
			return 2;
		}
	}
	if (first)
		return first_use(first, wait);
	if (n == 0 || rounds < 1) {
		fprintf(stderr, "tk-stream: -n and -r must be positive\n");
		return 2;
	}
	size_t bytes = n * sizeof(double);
	double *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);

	if (!a || !b || !c) {
		fprintf(stderr, "tk-stream: out of memory for 3 x %zu bytes\n", bytes);
		return 1;
	}
	printf("array a %p %zu\narray b %p %zu\narray c %p %zu\n", (void *)a, bytes, (void *)b,
	       bytes, (void *)c, bytes);
	fflush(stdout);
	for (size_t i = 0; i < n; i++) {
		a[i] = 1.0;
		b[i] = 2.0;
		c[i] = 0.5 * (double)(i & 1023);
	}
	const double s = 3.0;
	double best = 0.0;

	for (int r = 0; r < rounds; r++) {
		double t0 = now();

		for (size_t i = 0; i < n; i++)
			a[i] = b[i] + s * c[i];
		double t = now() - t0;

		/* Three arrays move per element: two read, one written. */
		if (t > 0 && 3.0 * (double)bytes / t / 1e6 > best)
			best = 3.0 * (double)bytes / t / 1e6;
	}
	int ok = 1;

	for (size_t i = 0; i < n; i += 4099)
		if (a[i] != b[i] + s * c[i])
			ok = 0;
	printf("triad %.0f MB/s best of %d, %zu elements, check %s\n", best, rounds, n,
	       ok ? "ok" : "FAILED");
	fflush(stdout);
	hold(wait);
	if (wait) {
		/* Every element again: the pages may have moved meanwhile. */
		size_t bad = 0;

		for (size_t i = 0; i < n; i++)
			if (b[i] != 2.0 || c[i] != 0.5 * (double)(i & 1023) ||
			    a[i] != b[i] + s * c[i])
				bad++;
		printf("held check %s, %zu of %zu elements wrong\n", bad ? "FAILED" : "ok", bad, n);
		ok = ok && !bad;
	}
	free(a);
	free(b);
	free(c);
	return ok ? 0 : 1;
}
