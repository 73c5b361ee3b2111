/* SPDX-License-Identifier: GPL-2.0 */
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
 *
 * The library's private header; its files, by job:
 *   init.c    configuration (TKRUN_*), the real allocator, the bump
 *             allocator of dlsym's own allocations, the one-line messages
 *   table.c   the range table, and gigantic entries cut inside a GiB
 *   device.c  /dev/tierkit: files mapped with their policy, new ranges
 *   malloc.c  the malloc family
 *   mmap.c    the mmap, munmap and mremap interposers
 *   advice.c  the madvise, mprotect, pkey_mprotect and msync interposers
 *   fork.c    the fork handlers (copy-on-write snapshots, or copies)
 */
#ifndef TKRUN_LIBTKRUN_H
#define TKRUN_LIBTKRUN_H

#include <linux/tierkit.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/* Nothing below leaves the library but what EXPORT marks. */
#pragma GCC visibility push(hidden)

#define EXPORT __attribute__((visibility("default")))
#define PAGE 4096UL
#define GIB (1UL << 30)
#define MAX_RANGES 4096
/* Most 4 KiB pages one tierkit file takes (the ABI's per-file limit). */
#define PIECE GIB
/* Most GiBs of one gigantic mmap. */
#define GIGA_PIECE (64UL * GIB)

/* --- init.c: configuration (TKRUN_*), read once ------------------------- */

struct tkrun_config {
	const char *device; /* TKRUN_DEVICE: another device, for host tests */
	int place;          /* 4 KiB placement of chunks >= threshold */
	int gigantic;       /* chunks >= 1 GiB as gigantic pages */
	int verbose;        /* TKRUN_VERBOSE=1 (tk-run --verbose): say more */
	size_t threshold;
	uint64_t mask;
	uint8_t weights[TIERKIT_MAX_NODES];
	/* TKRUN_SOCKET_WEIGHTS: bit s, socket s has a table, set on every
	 * file (TK_IOC_SOCKET_WEIGHTS) with nr_nodes (TKRUN_NR_NODE_IDS). */
	unsigned int sockets;
	unsigned int nr_nodes;
	uint8_t socket_weights[TK_MAX_SOCKETS][TIERKIT_MAX_NODES];
};

extern struct tkrun_config cfg;
extern const char dev_tierkit[];

/* --- init.c: the real allocator ----------------------------------------- */

struct tkrun_real {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*memalign)(size_t, size_t);
	size_t (*usable)(void *);
};

extern struct tkrun_real real;

/* 0 not started, 1 resolving (dlsym may allocate: bump), 2 ready. */
extern atomic_int init_state;
/* Inside the library's own bookkeeping (the table lock held, signals
 * blocked, cancellation disabled): a re-entry skips the table. */
extern __thread int in_lib;

/* Called by every entry point: 1 when the real functions may be used. */
int ready(void);

/* dlsym's own allocations while the real functions are being found. */
int in_bump(const void *p);
void *bump_alloc(size_t n);
size_t bump_size(const void *p);

/* --- init.c: messages: one line each, at most once, no stdio ------------ */

enum { SAY_MAP, SAY_TABLE, SAY_FORK, SAY_FORK_GIGA, SAY_FORK_WAIT, SAY_GIGA_SPLIT, SAY_DONTUNMAP, SAY_CONFIG, SAY_N };

void say_once(int which, const char *msg);
/* Under TKRUN_VERBOSE=1 only: msg, every time. */
void say_verbose(const char *msg);

/* --- raw system calls (never our own wrappers) -------------------------- */

static inline void *sys_mmap(void *a, size_t l, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, a, l, prot, flags, fd, off);
}

static inline int sys_munmap(void *a, size_t l)
{
	return (int)syscall(SYS_munmap, a, l);
}

static inline int sys_mprotect(void *a, size_t l, int prot)
{
	return (int)syscall(SYS_mprotect, a, l, prot);
}

/* pkey -1: mprotect (the range's protection key stays). */
static inline int sys_protect(void *a, size_t l, int prot, int pkey)
{
	return pkey < 0 ? sys_mprotect(a, l, prot) : (int)syscall(SYS_pkey_mprotect, a, l, prot, pkey);
}

static inline void *sys_mremap(void *o, size_t ol, size_t nl, int flags, void *na)
{
	return (void *)syscall(SYS_mremap, o, ol, nl, flags, na);
}

/* --- table.c: the range table ------------------------------------------- */

enum { K_MMAP, K_MALLOC };

/* One tierkit range with one protection and one fork behaviour, as a
 * vma: mprotect and madvise on part of a range split it. A malloc chunk
 * split so is its first entry (K_MALLOC, clen) and the rest (K_MMAP). */
struct range {
	uintptr_t start;
	size_t len;     /* mapped bytes */
	size_t req;     /* malloc: bytes asked for */
	size_t clen;    /* K_MALLOC: bytes of the whole chunk from start */
	uint64_t off;   /* tierkit file offset of start */
	int prot;
	int pkey;       /* pkey_mprotect's key, or -1 */
	uint8_t kind;
	uint8_t giga;
	uint8_t dontfork; /* MADV_DONTFORK: the child has none of it */
	uint8_t wipe;     /* MADV_WIPEONFORK: the child's reads zero */
	uint8_t snap;     /* during a fork: its copy-on-write snapshot is taken */
};

extern pthread_mutex_t table_lock;
extern struct range ranges[MAX_RANGES];
extern int nranges;
extern atomic_int nr_live; /* nranges, for lock-free "nothing to do" */

int lock_table(void);
void unlock_table(void);
void leave_lib(void);
int table_add(struct range r);
void table_del(int i);
int table_find(uintptr_t a, size_t l);
void table_punch(uintptr_t a, size_t l);
int table_split(uintptr_t a);
int table_walk(uintptr_t a, size_t l, int (*fn)(uintptr_t, size_t, int, void *), void *ctx);
size_t to_entry_end(uintptr_t a, size_t l);
void giga_cut(uintptr_t a, size_t l);

/* --- device.c: tierkit mappings ----------------------------------------- */

int tk_map_at(uintptr_t a, size_t l, uint64_t off, int prot, int giga);
uintptr_t reserve(size_t l, size_t al);
int wants(size_t n, int *giga);
uintptr_t tk_new(size_t n, size_t al, int prot, int kind, int giga);
void *tk_alloc(size_t n, size_t al, int prot, int kind);

/* --- fork.c: the fork handlers ------------------------------------------ */

void fork_prepare(void);
void fork_parent(void);
void fork_child(void);

#pragma GCC visibility pop

#endif /* TKRUN_LIBTKRUN_H */
