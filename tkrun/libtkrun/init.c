// SPDX-License-Identifier: GPL-2.0
/*
 * libtkrun.so's start: the configuration (TKRUN_*), the real allocator
 * found with dlsym(RTLD_NEXT), the bump allocator that serves dlsym's own
 * allocations meanwhile, and the one-line messages.
 */
#define _GNU_SOURCE
#include "libtkrun.h"

#include <dlfcn.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* --- configuration (TKRUN_*), read once -------------------------------- */

struct tkrun_config cfg;

const char dev_tierkit[] = "/dev/tierkit";

/* --- the real allocator ------------------------------------------------ */

struct tkrun_real real;

atomic_int init_state;
static __thread int init_thread;
__thread int in_lib;

/* dlsym's own allocations while the real functions are being found. */
static _Alignas(16) unsigned char bump[65536];
static atomic_size_t bump_used;

int in_bump(const void *p)
{
	return (const unsigned char *)p >= bump && (const unsigned char *)p < bump + sizeof(bump);
}

void *bump_alloc(size_t n)
{
	size_t need = ((n + 15) & ~(size_t)15) + 16;
	size_t at = atomic_fetch_add(&bump_used, need);

	if (n > sizeof(bump) || at + need > sizeof(bump))
		return NULL;
	memcpy(bump + at, &n, sizeof(n));
	return bump + at + 16; /* zero: static storage, never reused */
}

size_t bump_size(const void *p)
{
	size_t n;

	memcpy(&n, (const unsigned char *)p - 16, sizeof(n));
	return n;
}

/* --- messages: one line each, at most once, no stdio ------------------- */

static atomic_int said[SAY_N];

/* One write, so that a line is never split by another writer's. */
static void say(const char *msg)
{
	char line[256] = "tk-run: ";
	size_t n = strlen(line), m = strlen(msg);

	if (m > sizeof(line) - n - 1)
		m = sizeof(line) - n - 1;
	memcpy(line + n, msg, m);
	line[n + m] = '\n';
	ssize_t r = write(2, line, n + m + 1);

	(void)r;
}

void say_once(int which, const char *msg)
{
	if (!atomic_exchange(&said[which], 1))
		say(msg);
}

void say_verbose(const char *msg)
{
	if (cfg.verbose)
		say(msg);
}

/* --- initialization ---------------------------------------------------- */

/* "N:W[,N:W...]" into w (weights 1..255, nodes below TIERKIT_MAX_NODES),
 * up to the end or the first character of stop; the node mask, 0 if bad. */
static uint64_t parse_table(const char **s, char stop, uint8_t *w)
{
	uint64_t mask = 0;

	while (**s && **s != stop) {
		char *end;
		unsigned long nid = strtoul(*s, &end, 10), wt;

		if (end == *s || *end != ':' || nid >= TIERKIT_MAX_NODES)
			return 0;
		*s = end + 1;
		wt = strtoul(*s, &end, 10);
		if (end == *s || wt == 0 || wt > 255 || (*end && *end != ',' && *end != stop))
			return 0;
		mask |= 1ULL << nid;
		w[nid] = (uint8_t)wt;
		*s = *end == ',' ? end + 1 : end;
	}
	return mask;
}

/* TKRUN_SOCKET_WEIGHTS, "S=N:W,N:W;S=...": 0, or -1 if it is bad. */
static int parse_sockets(const char *s, const char *nr)
{
	if (!s || !*s)
		return 0;
	cfg.nr_nodes = nr ? (unsigned int)strtoul(nr, NULL, 10) : 0;
	if (!cfg.nr_nodes || cfg.nr_nodes > TIERKIT_MAX_NODES)
		return -1;
	while (*s) {
		char *end;
		unsigned long sock = strtoul(s, &end, 10);

		if (end == s || *end != '=' || sock >= TK_MAX_SOCKETS)
			return -1;
		s = end + 1;
		if (!parse_table(&s, ';', cfg.socket_weights[sock]))
			return -1;
		cfg.sockets |= 1U << sock;
		if (*s == ';')
			s++;
	}
	return 0;
}

static void parse_config(void)
{
	const char *w = getenv("TKRUN_WEIGHTS"), *t = getenv("TKRUN_THRESHOLD");
	const char *g = getenv("TKRUN_GIGANTIC"), *p = getenv("TKRUN_PLACE");

	const char *d = getenv("TKRUN_DEVICE"), *v = getenv("TKRUN_VERBOSE");

	cfg.device = d && *d ? d : dev_tierkit;
	cfg.threshold = 2UL << 20;
	if (t && *t)
		cfg.threshold = strtoull(t, NULL, 10);
	if (cfg.threshold < PAGE)
		cfg.threshold = PAGE;
	cfg.gigantic = g && *g == '1';
	cfg.verbose = v && *v == '1';
	cfg.place = !p || *p != '0';
	/* "N:W,N:W": the nodes named are the mask. */
	if (w)
		cfg.mask = parse_table(&w, '\0', cfg.weights);
	if (!cfg.mask && (cfg.place || cfg.gigantic)) {
		say_once(SAY_CONFIG, "no usable TKRUN_WEIGHTS; the program runs on the kernel's memory");
		cfg.place = cfg.gigantic = 0;
	}
	if (parse_sockets(getenv("TKRUN_SOCKET_WEIGHTS"), getenv("TKRUN_NR_NODE_IDS"))) {
		say_once(SAY_CONFIG, "bad TKRUN_SOCKET_WEIGHTS; the program runs on the kernel's memory");
		cfg.place = cfg.gigantic = 0;
	}
}

static void init(void)
{
	int expect = 0;

	if (!atomic_compare_exchange_strong(&init_state, &expect, 1)) {
		while (atomic_load(&init_state) != 2 && !init_thread)
			sched_yield();
		return;
	}
	init_thread = 1;
	real.malloc = dlsym(RTLD_NEXT, "malloc");
	real.free = dlsym(RTLD_NEXT, "free");
	real.calloc = dlsym(RTLD_NEXT, "calloc");
	real.realloc = dlsym(RTLD_NEXT, "realloc");
	real.memalign = dlsym(RTLD_NEXT, "memalign");
	real.usable = dlsym(RTLD_NEXT, "malloc_usable_size");
	if (!real.malloc || !real.free || !real.calloc || !real.realloc || !real.memalign ||
	    !real.usable) {
		static const char m[] = "tk-run: libtkrun.so cannot find the C library's malloc\n";
		ssize_t r = write(2, m, sizeof(m) - 1);

		(void)r;
		_exit(127);
	}
	parse_config();
	if (cfg.place || cfg.gigantic)
		pthread_atfork(fork_prepare, fork_parent, fork_child);
	init_thread = 0;
	atomic_store(&init_state, 2);
}

__attribute__((constructor)) static void tkrun_ctor(void)
{
	if (atomic_load(&init_state) == 0)
		init();
}

/* Called by every entry point: 1 when the real functions may be used. */
int ready(void)
{
	if (atomic_load(&init_state) != 2)
		init();
	return atomic_load(&init_state) == 2;
}
