// SPDX-License-Identifier: GPL-2.0
/*
 * libtkrun.so: tierkit placement for unmodified, dynamically linked
 * programs (LD_PRELOAD, set by tk-run). See Documentation/dev-tools/tk-run.md.
 *
 * Anonymous private mmaps and malloc-family chunks of at least
 * TKRUN_THRESHOLD bytes are mapped from /dev/tierkit instead: one open
 * file per <= 1 GiB piece (its pages go back when the last mapping of it
 * is gone), with the file's own weights (TK_POLICY_F_WEIGHTS, from
 * TKRUN_WEIGHTS) and file offset = the address, so page i sits where the
 * kernel's MPOL_WEIGHTED_INTERLEAVE would put an anonymous page at that
 * address. With TKRUN_GIGANTIC=1, chunks of 1 GiB or more are 1 GiB pages
 * of tierkit's gigantic mode. Everything else goes to the next definition
 * (glibc) via dlsym(RTLD_NEXT). A range table, under one mutex, remembers
 * what is tierkit's. Whatever tierkit cannot do falls back to the
 * kernel's own memory, with one "tk-run: ..." line on stderr.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/tierkit.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define PAGE 4096UL
#define GIB (1UL << 30)
#define MAX_RANGES 4096
/* Most 4 KiB pages one tierkit file takes (the ABI's per-file limit). */
#define PIECE GIB
/* Most GiBs of one gigantic mmap. */
#define GIGA_PIECE (64UL * GIB)

/* --- configuration (TKRUN_*), read once -------------------------------- */

static struct {
	const char *device; /* TKRUN_DEVICE: another device, for host tests */
	int place;          /* 4 KiB placement of chunks >= threshold */
	int gigantic;       /* chunks >= 1 GiB as gigantic pages */
	size_t threshold;
	uint64_t mask;
	uint8_t weights[TIERKIT_MAX_NODES];
} cfg;

static const char dev_tierkit[] = "/dev/tierkit";

/* --- the real allocator ------------------------------------------------ */

static struct {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*memalign)(size_t, size_t);
	size_t (*usable)(void *);
} real;

/* 0 not started, 1 resolving (dlsym may allocate: bump), 2 ready. */
static atomic_int init_state;
static __thread int init_thread;
/* Inside the library's own bookkeeping: a re-entry (a signal handler's
 * munmap) skips the table instead of taking the lock twice. */
static __thread int in_lib;

/* dlsym's own allocations while the real functions are being found. */
static _Alignas(16) unsigned char bump[65536];
static atomic_size_t bump_used;

static int in_bump(const void *p)
{
	return (const unsigned char *)p >= bump && (const unsigned char *)p < bump + sizeof(bump);
}

static void *bump_alloc(size_t n)
{
	size_t need = ((n + 15) & ~(size_t)15) + 16;
	size_t at = atomic_fetch_add(&bump_used, need);

	if (n > sizeof(bump) || at + need > sizeof(bump))
		return NULL;
	memcpy(bump + at, &n, sizeof(n));
	return bump + at + 16; /* zero: static storage, never reused */
}

static size_t bump_size(const void *p)
{
	size_t n;

	memcpy(&n, (const unsigned char *)p - 16, sizeof(n));
	return n;
}

/* --- messages: one line each, at most once, no stdio ------------------- */

enum { SAY_MAP, SAY_TABLE, SAY_FORK, SAY_GIGA_SPLIT, SAY_DONTUNMAP, SAY_CONFIG, SAY_N };
static atomic_int said[SAY_N];

static void say_once(int which, const char *msg)
{
	if (atomic_exchange(&said[which], 1))
		return;
	ssize_t r = write(2, "tk-run: ", 8);

	r = write(2, msg, strlen(msg));
	r = write(2, "\n", 1);
	(void)r;
}

/* --- raw system calls (never our own wrappers) -------------------------- */

static void *sys_mmap(void *a, size_t l, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, a, l, prot, flags, fd, off);
}

static int sys_munmap(void *a, size_t l)
{
	return (int)syscall(SYS_munmap, a, l);
}

static void *sys_mremap(void *o, size_t ol, size_t nl, int flags, void *na)
{
	return (void *)syscall(SYS_mremap, o, ol, nl, flags, na);
}

/* --- the range table --------------------------------------------------- */

enum { K_MMAP, K_MALLOC };

struct range {
	uintptr_t start;
	size_t len;     /* mapped bytes */
	size_t req;     /* malloc: bytes asked for */
	uint64_t off;   /* tierkit file offset of start */
	int prot;
	uint8_t kind;
	uint8_t giga;
	uint8_t dontfork; /* MADV_DONTFORK on all of it: the child has none */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct range ranges[MAX_RANGES];
static int nranges;
static atomic_int nr_live; /* nranges, for lock-free "nothing to do" */

static int lock_table(void)
{
	if (in_lib)
		return 0;
	in_lib = 1;
	pthread_mutex_lock(&lock);
	return 1;
}

static void unlock_table(void)
{
	pthread_mutex_unlock(&lock);
	in_lib = 0;
}

static int table_add(struct range r)
{
	if (nranges == MAX_RANGES)
		return 0;
	ranges[nranges++] = r;
	atomic_store(&nr_live, nranges);
	return 1;
}

static void table_del(int i)
{
	ranges[i] = ranges[--nranges];
	atomic_store(&nr_live, nranges);
}

/* The entry that contains [a, a + l), or -1. */
static int table_find(uintptr_t a, size_t l)
{
	for (int i = 0; i < nranges; i++)
		if (a >= ranges[i].start && a - ranges[i].start + l <= ranges[i].len)
			return i;
	return -1;
}

/* Drops [a, a + l) from the table: entries are trimmed or split. */
static void table_punch(uintptr_t a, size_t l)
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

/* --- tierkit mappings --------------------------------------------------- */

/* Maps [a, a + l) from tierkit, replacing the reservation there, with file
 * offset off for a: one file per piece, closed once mapped. 0 or -1. */
static int tk_map_at(uintptr_t a, size_t l, uint64_t off, int prot, int giga)
{
	size_t max = giga ? GIGA_PIECE : PIECE;

	for (size_t done = 0; done < l;) {
		size_t n = l - done < max ? l - done : max;
		int fd = open(cfg.device, O_RDWR | O_CLOEXEC);
		struct tk_policy p = { .mode = TK_MODE_WEIGHTED_INTERLEAVE,
				       .flags = TK_POLICY_F_WEIGHTS,
				       .nodemask = cfg.mask };
		struct tk_gigantic g = { .threads = TK_THREADS_AUTO,
					 .placement = TK_PLACE_LOCAL };
		void *m = MAP_FAILED;

		if (fd < 0)
			return -1;
		memcpy(p.weights, cfg.weights, sizeof(p.weights));
		/* A test device (TKRUN_DEVICE=/dev/zero on the host) takes
		 * no ioctls: MAP_SHARED of it is shared memory like tierkit's. */
		if (cfg.device != dev_tierkit ||
		    (ioctl(fd, TK_IOC_SET_POLICY, &p) == 0 &&
		     (!giga || ioctl(fd, TK_IOC_SET_GIGANTIC, &g) == 0)))
			m = sys_mmap((void *)(a + done), n, prot, MAP_SHARED | MAP_FIXED, fd,
				     cfg.device == dev_tierkit ? (off_t)(off + done) : 0);
		int e = errno;

		close(fd);
		if (m == MAP_FAILED) {
			errno = e;
			return -1;
		}
		done += n;
	}
	return 0;
}

/* A PROT_NONE reservation of l bytes aligned to al (a power of two). */
static uintptr_t reserve(size_t l, size_t al)
{
	size_t span = l + al - PAGE;

	if (span < l)
		return 0;
	void *r = sys_mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (r == MAP_FAILED)
		return 0;
	uintptr_t s = (uintptr_t)r, a = (s + al - 1) & ~(al - 1);

	if (a > s)
		sys_munmap(r, a - s);
	if (s + span > a + l)
		sys_munmap((void *)(a + l), s + span - (a + l));
	return a;
}

/* Whether a chunk of n bytes goes to tierkit, and as what. */
static int wants(size_t n, int *giga)
{
	*giga = cfg.gigantic && n >= GIB;
	return init_state == 2 && (*giga || (cfg.place && n >= cfg.threshold));
}

/* A new tierkit range for n bytes (rounded up), aligned to al; 0 if
 * tierkit cannot give it (the caller falls back). Table lock held. */
static uintptr_t tk_new(size_t n, size_t al, int prot, int kind, int giga)
{
	size_t unit = giga ? GIB : PAGE;
	size_t l = (n + unit - 1) & ~(unit - 1);

	if (l < n || l == 0)
		return 0;
	if (al < unit)
		al = unit;
	/* One page more, left unmapped after the range: consecutive ranges
	 * then sit l + 4 KiB apart, as glibc's own mmap'd chunks do (their
	 * header page), not an exact power of two apart, where same-index
	 * elements of arrays alias in set-indexed TLBs and caches (QEMU's
	 * direct-mapped software TLB runs a triad over 3 x 8 MiB 6x slower). */
	uintptr_t a = reserve(l + PAGE, al);

	if (!a)
		return 0;
	sys_munmap((void *)(a + l), PAGE);
	if (tk_map_at(a, l, a, prot, giga)) {
		sys_munmap((void *)a, l);
		say_once(SAY_MAP, giga ? "tierkit refused a gigantic mapping; using the kernel's memory for it and any like it"
				       : "tierkit refused a mapping; using the kernel's memory for it and any like it");
		return 0;
	}
	struct range r = { .start = a, .len = l, .req = n, .off = a, .prot = prot,
			   .kind = (uint8_t)kind, .giga = (uint8_t)giga };
	if (!table_add(r)) {
		sys_munmap((void *)a, l);
		say_once(SAY_TABLE, "range table full; further big chunks use the kernel's memory");
		return 0;
	}
	return a;
}

static void *tk_alloc(size_t n, size_t al, int prot, int kind)
{
	int giga;

	if (!wants(n, &giga) || !lock_table())
		return NULL;
	uintptr_t a = tk_new(n, al, prot, kind, giga);

	unlock_table();
	return (void *)a;
}

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
static size_t to_entry_end(uintptr_t a, size_t l)
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
static void giga_cut(uintptr_t a, size_t l)
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

/* --- initialization ---------------------------------------------------- */

static void fork_prepare(void);
static void fork_parent(void);
static void fork_child(void);

static void parse_config(void)
{
	const char *w = getenv("TKRUN_WEIGHTS"), *t = getenv("TKRUN_THRESHOLD");
	const char *g = getenv("TKRUN_GIGANTIC"), *p = getenv("TKRUN_PLACE");

	const char *d = getenv("TKRUN_DEVICE");

	cfg.device = d && *d ? d : dev_tierkit;
	cfg.threshold = 2UL << 20;
	if (t && *t)
		cfg.threshold = strtoull(t, NULL, 10);
	if (cfg.threshold < PAGE)
		cfg.threshold = PAGE;
	cfg.gigantic = g && *g == '1';
	cfg.place = !p || *p != '0';
	/* "N:W,N:W": the nodes named are the mask. */
	while (w && *w) {
		char *end;
		unsigned long nid = strtoul(w, &end, 10), wt;

		if (end == w || *end != ':' || nid >= TIERKIT_MAX_NODES)
			break;
		w = end + 1;
		wt = strtoul(w, &end, 10);
		if (end == w || wt == 0 || wt > 255)
			break;
		cfg.mask |= 1ULL << nid;
		cfg.weights[nid] = (uint8_t)wt;
		w = *end == ',' ? end + 1 : end;
	}
	if (!cfg.mask && (cfg.place || cfg.gigantic)) {
		say_once(SAY_CONFIG, "no usable TKRUN_WEIGHTS; the program runs on the kernel's memory");
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
static int ready(void)
{
	if (atomic_load(&init_state) != 2)
		init();
	return atomic_load(&init_state) == 2;
}

/* --- malloc and friends ------------------------------------------------ */

/* The tierkit malloc chunk starting at p: its entry copied, else 0. */
static int ours(const void *p, struct range *out)
{
	if (((uintptr_t)p & (PAGE - 1)) || atomic_load(&nr_live) == 0 || !lock_table())
		return 0;
	int i = table_find((uintptr_t)p, 1);
	int hit = i >= 0 && ranges[i].kind == K_MALLOC && ranges[i].start == (uintptr_t)p;

	if (hit)
		*out = ranges[i];
	unlock_table();
	return hit;
}

EXPORT void *malloc(size_t n)
{
	if (!ready())
		return bump_alloc(n);
	void *p = tk_alloc(n, PAGE, PROT_READ | PROT_WRITE, K_MALLOC);

	return p ? p : real.malloc(n);
}

EXPORT void free(void *p)
{
	struct range r;

	if (!p || in_bump(p))
		return;
	if (ours(p, &r)) {
		if (lock_table()) {
			int i = table_find(r.start, 1);

			if (i >= 0 && ranges[i].start == r.start)
				table_del(i);
			unlock_table();
		}
		sys_munmap((void *)r.start, r.len);
		return;
	}
	if (ready())
		real.free(p);
}

EXPORT void *calloc(size_t nm, size_t sz)
{
	size_t n;

	if (__builtin_mul_overflow(nm, sz, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	if (!ready())
		return bump_alloc(n);
	/* tierkit's pages are zeroed. */
	void *p = tk_alloc(n, PAGE, PROT_READ | PROT_WRITE, K_MALLOC);

	return p ? p : real.calloc(nm, sz);
}

EXPORT void *realloc(void *p, size_t n)
{
	struct range r;
	size_t have;
	void *q;

	if (!p)
		return malloc(n);
	if (in_bump(p)) {
		q = malloc(n);
		if (q)
			memcpy(q, p, bump_size(p) < n ? bump_size(p) : n);
		return q;
	}
	if (!ready())
		return NULL;
	if (ours(p, &r)) {
		if (n == 0) {
			free(p);
			return NULL;
		}
		int giga;

		/* Still tierkit's size class and it fits: keep it. */
		if (n <= r.len && wants(n, &giga) && giga == r.giga) {
			if (lock_table()) {
				int i = table_find(r.start, 1);

				if (i >= 0)
					ranges[i].req = n;
				unlock_table();
			}
			return p;
		}
		have = r.req;
	} else {
		int giga;

		if (!wants(n, &giga))
			return real.realloc(p, n);
		have = real.usable(p);
	}
	/* Across the threshold, or grown out of its mapping: move. */
	q = malloc(n);
	if (!q)
		return NULL;
	memcpy(q, p, have < n ? have : n);
	free(p);
	return q;
}

static void *aligned(size_t al, size_t n)
{
	if (!ready())
		return NULL;
	void *p = tk_alloc(n, al, PROT_READ | PROT_WRITE, K_MALLOC);

	return p ? p : real.memalign(al, n);
}

EXPORT void *memalign(size_t al, size_t n)
{
	if (al & (al - 1)) {
		errno = EINVAL;
		return NULL;
	}
	return aligned(al, n);
}

EXPORT int posix_memalign(void **out, size_t al, size_t n)
{
	if (al < sizeof(void *) || (al & (al - 1)))
		return EINVAL;
	void *p = aligned(al, n);

	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

EXPORT void *aligned_alloc(size_t al, size_t n)
{
	return memalign(al, n);
}

EXPORT void *valloc(size_t n)
{
	return aligned(PAGE, n);
}

EXPORT void *pvalloc(size_t n)
{
	return aligned(PAGE, (n + PAGE - 1) & ~(PAGE - 1));
}

EXPORT size_t malloc_usable_size(void *p)
{
	struct range r;

	if (!p)
		return 0;
	if (in_bump(p))
		return bump_size(p);
	if (ours(p, &r))
		return r.len;
	return ready() ? real.usable(p) : 0;
}

/* --- mmap, munmap, mremap ---------------------------------------------- */

EXPORT void *mmap(void *a, size_t l, int prot, int flags, int fd, off_t off)
{
	int fixed = flags & (MAP_FIXED | MAP_FIXED_NOREPLACE);
	int plain = (flags & MAP_TYPE) == MAP_PRIVATE && (flags & MAP_ANONYMOUS) &&
		    !(flags & (MAP_FIXED | MAP_FIXED_NOREPLACE | MAP_NORESERVE | MAP_HUGETLB |
			       MAP_GROWSDOWN | MAP_STACK)) &&
		    (prot & (PROT_READ | PROT_WRITE)) && !(prot & PROT_EXEC);

	if (plain && ready()) {
		void *p = tk_alloc(l, PAGE, prot, K_MMAP);

		if (p)
			return p;
	}
	if (fixed && atomic_load(&nr_live) && lock_table()) {
		giga_cut((uintptr_t)a, l);
		void *p = sys_mmap(a, l, prot, flags, fd, off);

		if (p != MAP_FAILED)
			table_punch((uintptr_t)p, (l + PAGE - 1) & ~(PAGE - 1));
		unlock_table();
		return p;
	}
	return sys_mmap(a, l, prot, flags, fd, off);
}

EXPORT void *mmap64(void *a, size_t l, int prot, int flags, int fd, off_t off)
{
	return mmap(a, l, prot, flags, fd, off);
}

EXPORT int munmap(void *a, size_t l)
{
	if (!atomic_load(&nr_live) || !lock_table())
		return sys_munmap(a, l);
	l = to_entry_end((uintptr_t)a, l);
	giga_cut((uintptr_t)a, l);
	int r = sys_munmap(a, l);

	if (r == 0)
		table_punch((uintptr_t)a, (l + PAGE - 1) & ~(PAGE - 1));
	unlock_table();
	return r;
}

/* mremap of (part of) tierkit entry i; table lock held. The ABI refuses
 * to grow a tierkit mapping, so growth maps more tierkit memory after it,
 * or a new range that the contents are copied to. */
static void *tk_mremap(int i, uintptr_t o, size_t ol, size_t nl, int flags, uintptr_t na)
{
	struct range r = ranges[i];
	size_t unit = r.giga ? GIB : PAGE;
	int fixed = flags & MREMAP_FIXED;

	ol = (ol + PAGE - 1) & ~(PAGE - 1);
	nl = (nl + PAGE - 1) & ~(PAGE - 1);
	if (flags & MREMAP_DONTUNMAP) {
		say_once(SAY_DONTUNMAP, "MREMAP_DONTUNMAP of a tierkit range is refused (EINVAL)");
		errno = EINVAL;
		return MAP_FAILED;
	}
	if (!fixed && nl <= ol) {
		if (nl < ol) {
			giga_cut(o + nl, ol - nl);
			sys_munmap((void *)(o + nl), ol - nl);
			table_punch(o + nl, ol - nl);
		}
		return (void *)o;
	}
	/* Grow in place: tierkit memory right after the entry, placed as if
	 * the entry had been that long from the start. */
	if (!fixed && o + ol == r.start + r.len) {
		size_t d = (nl - ol + unit - 1) & ~(unit - 1);
		void *x = sys_mmap((void *)(o + ol), d, PROT_NONE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);

		if (x == (void *)(o + ol)) {
			if (tk_map_at(o + ol, d, r.off + r.len, r.prot, r.giga) == 0) {
				ranges[i].len += d;
				return (void *)o;
			}
			sys_munmap(x, d);
		} else if (x != MAP_FAILED) {
			sys_munmap(x, d);
		}
	}
	if (!(flags & MREMAP_MAYMOVE)) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	/* Move: a new range (tierkit's if it can), the contents copied. */
	uintptr_t n = 0;
	int giga = r.giga && nl >= GIB;

	if (fixed) {
		if (na & (PAGE - 1) || (na < o + ol && o < na + nl)) {
			errno = EINVAL;
			return MAP_FAILED;
		}
		giga_cut(na, nl);
		if (sys_mmap((void *)na, nl, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
			     -1, 0) == MAP_FAILED)
			return MAP_FAILED;
		table_punch(na, nl);
		i = table_find(o, ol);
		if (i < 0 || (giga && (na & (GIB - 1))) ||
		    tk_map_at(na, nl, na, r.prot, giga) ||
		    !table_add((struct range){ .start = na, .len = nl, .req = nl, .off = na,
					       .prot = r.prot, .kind = K_MMAP, .giga = (uint8_t)giga })) {
			if (sys_mmap((void *)na, nl, r.prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
				return MAP_FAILED;
		}
		n = na;
	} else {
		n = tk_new(nl, PAGE, r.prot, K_MMAP, giga);
		if (!n) {
			void *p = sys_mmap(NULL, nl, r.prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			if (p == MAP_FAILED)
				return MAP_FAILED;
			n = (uintptr_t)p;
		}
	}
	memcpy((void *)n, (void *)o, ol < nl ? ol : nl);
	giga_cut(o, ol);
	sys_munmap((void *)o, ol);
	table_punch(o, ol);
	return (void *)n;
}

EXPORT void *mremap(void *o, size_t ol, size_t nl, int flags, ...)
{
	uintptr_t na = 0;
	va_list ap;

	if (flags & MREMAP_FIXED) {
		va_start(ap, flags);
		na = (uintptr_t)va_arg(ap, void *);
		va_end(ap);
	}
	if (!atomic_load(&nr_live) || !lock_table())
		return sys_mremap(o, ol, nl, flags, (void *)na);
	void *r;
	int i = table_find((uintptr_t)o, ol ? ol : 1);

	if (i >= 0 && !ol) {
		/* Old size 0 duplicates a shared mapping; anonymous private
		 * memory cannot be duplicated. */
		errno = EINVAL;
		r = MAP_FAILED;
	} else if (i >= 0) {
		ol = to_entry_end((uintptr_t)o, ol);
		r = tk_mremap(i, (uintptr_t)o, ol, nl, flags, na);
	} else {
		if (flags & MREMAP_FIXED)
			giga_cut(na, nl);
		r = sys_mremap(o, ol, nl, flags, (void *)na);
		if (r != MAP_FAILED && (flags & MREMAP_FIXED))
			table_punch((uintptr_t)r, (nl + PAGE - 1) & ~(PAGE - 1));
	}
	unlock_table();
	return r;
}

/* madvise on tierkit memory as on anonymous memory: MADV_DONTNEED reads
 * zero afterwards (the file would map the same pages again), MADV_FREE
 * may keep the contents (tierkit refuses it), MADV_DONTFORK/DOFORK are
 * remembered for fork. */
EXPORT int madvise(void *a, size_t l, int advice)
{
	int tracked = advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_DONTFORK ||
		      advice == MADV_DOFORK;

	if (!tracked || !atomic_load(&nr_live) || ((uintptr_t)a & (PAGE - 1)) || !lock_table())
		return (int)syscall(SYS_madvise, a, l, advice);
	int r = 0;
	int i = table_find((uintptr_t)a, l ? l : 1);

	if (i < 0) {
		r = (int)syscall(SYS_madvise, a, l, advice);
	} else if (advice == MADV_DONTNEED) {
		memset(a, 0, (l + PAGE - 1) & ~(PAGE - 1));
	} else if (advice == MADV_DONTFORK || advice == MADV_DOFORK) {
		r = (int)syscall(SYS_madvise, a, l, advice);
		if (r == 0 && (uintptr_t)a == ranges[i].start && l >= ranges[i].len)
			ranges[i].dontfork = advice == MADV_DONTFORK;
	}
	unlock_table();
	return r;
}

/* --- fork ---------------------------------------------------------------
 * A tierkit mapping is MAP_SHARED: after a plain fork parent and child
 * would see each other's writes. The child therefore copies every range
 * into fresh tierkit memory (same offsets, so the same nodes) before
 * fork() returns in the parent: the parent waits for it on a pipe, so
 * nothing the parent writes after fork() reaches the child.
 */
static int fork_pipe[2] = { -1, -1 };

static void fork_prepare(void)
{
	if (!lock_table())
		return;
	if (nranges == 0 || pipe2(fork_pipe, O_CLOEXEC))
		fork_pipe[0] = fork_pipe[1] = -1;
}

static void fork_parent(void)
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

static void fork_child(void)
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
	pthread_mutex_init(&lock, NULL);
	in_lib = 0;
}
