/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * tierkit: the userspace ABI of /dev/tierkit (ioctl numbers, argument
 * layouts, constants).
 *
 * This header mirrors module/core/src/uapi.rs, which the module is built
 * from; module/core/tests/uapi_header.rs compiles it and checks every
 * constant, struct size and field offset against the Rust definitions.
 * The semantics are documented in Documentation/ABI/testing/dev-tierkit
 * and Documentation/ABI/testing/dev-tierkit-clear.
 *
 * All structs are x86_64 little endian, with explicit padding: none has
 * implicit padding.
 */
#ifndef _UAPI_LINUX_TIERKIT_H
#define _UAPI_LINUX_TIERKIT_H

#include <linux/ioctl.h>
#include <linux/types.h>

/* The ioctl "type" byte, unassigned in ioctl-number.rst. */
#define TIERKIT_IOC_MAGIC		0xB9

/* Highest node id + 1 that the ABI can name: nodemasks are one __u64. */
#define TIERKIT_MAX_NODES		64

/* --- weighted interleave ------------------------------------------------ */

/* tk_policy.mode: MPOL_WEIGHTED_INTERLEAVE semantics, tierkit's weights. */
#define TK_MODE_WEIGHTED_INTERLEAVE	0
/* tk_policy.mode: MPOL_INTERLEAVE semantics (every weight 1). */
#define TK_MODE_INTERLEAVE		1

/* tk_policy.flags: weights[] is also an input, the file's own weights. */
#define TK_POLICY_F_WEIGHTS		(1U << 0)

/* TK_IOC_SET_POLICY: sets the open file's policy; before mmap. */
struct tk_policy {
	__u32 mode;			/* in: TK_MODE_* */
	__u32 flags;			/* in: 0 or TK_POLICY_F_WEIGHTS */
	__u64 nodemask;			/* in: bit N = node N; out: effective mask */
	__u8  weights[TIERKIT_MAX_NODES];	/* in with TK_POLICY_F_WEIGHTS; out: weight of each node */
};

/* TK_IOC_BULK: runs the bulk path for nr_pages pages. */
struct tk_bulk {
	__u64 nr_pages;			/* in: 1..2^20 */
	__u64 per_node[TIERKIT_MAX_NODES];	/* out: pages placed on node n */
	__s32 il_prev;			/* out: -1 = before the first node */
	__u32 il_weight;		/* out */
};

/* Most nodes one TK_IOC_TASK_NEXT call returns. */
#define TK_TASK_NEXT_MAX		256

/* TK_IOC_TASK_NEXT: count steps of the task path. */
struct tk_task_next {
	__u32 count;			/* in: 1..TK_TASK_NEXT_MAX */
	__u32 _pad;
	__u8  nodes[TK_TASK_NEXT_MAX];	/* out: nodes[0..count) */
};

/* --- gigantic clearing -------------------------------------------------- */

/* Bytes in one gigantic page (1 GiB). */
#define TK_GIGANTIC_BYTES		(1ULL << 30)

/* Worker placement (tk_gigantic.placement, tk_clear_bench.placement). */
#define TK_PLACE_LOCAL			0	/* CPUs of the memory's (or nearest CPU) node */
#define TK_PLACE_REMOTE			1	/* CPUs of the nearest other CPU node */
#define TK_PLACE_ANY			2	/* any online CPU */

/* threads value: tierkit picks the worker count (0 is EINVAL, not auto). */
#define TK_THREADS_AUTO			0xffffffffU

/* tk_gigantic.flags: only read the last_* fields back; change nothing. */
#define TK_GIGANTIC_F_QUERY		(1U << 0)

/* TK_IOC_SET_GIGANTIC: switches the open file into gigantic mode. */
struct tk_gigantic {
	__u32 threads;			/* in: 1..eligible CPUs or TK_THREADS_AUTO */
	__u32 placement;		/* in: TK_PLACE_* */
	__u32 chunk_kib;		/* in: multiple of 4, <= 32768; 0 = 2048 */
	__u32 flags;			/* in: 0 or TK_GIGANTIC_F_QUERY */
	__u64 last_elapsed_ns;		/* out */
	__u32 last_workers;		/* out */
	__s32 last_nid;			/* out: -1 before the first */
	__s32 last_cpu_node;		/* out: -1 for TK_PLACE_ANY */
	__u32 nr_cleared;		/* out: 1 GiB ranges mmap reserved */
};

/* Most gigantic ranges one TK_IOC_CLEAR_BENCH call clears. */
#define TK_CLEAR_BENCH_MAX		64

/* TK_IOC_CLEAR_BENCH: clears nr_gigantic 1 GiB ranges on nid, timed. */
struct tk_clear_bench {
	__s32 nid;			/* in */
	__u32 threads;			/* in: as tk_gigantic.threads */
	__u32 placement;		/* in: TK_PLACE_* */
	__u32 nr_gigantic;		/* in: 1..TK_CLEAR_BENCH_MAX */
	__u32 chunk_kib;		/* in: as tk_gigantic.chunk_kib */
	__u32 workers;			/* out */
	__s32 cpu_node;			/* out: -1 for TK_PLACE_ANY */
	__u32 _pad;
	__u64 elapsed_ns;		/* out: sum over the ranges */
	__u64 bytes;			/* out */
	__u64 mbps;			/* out: 10^6 bytes/s */
	char  variant[16];		/* out: NUL-terminated clear_pages() variant */
};

/*
 * TK_IOC_WALK: what maps addr in the caller's page tables (CAP_SYS_ADMIN).
 * Test builds only (make TIERKIT_TEST=1); otherwise ENOTTY.
 */
#define TK_WALK_NONE			0
#define TK_WALK_PTE			1
#define TK_WALK_PMD			2
#define TK_WALK_PUD			3

struct tk_walk {
	__u64 addr;			/* in */
	__u64 pfn;			/* out: of the 4 KiB page at addr */
	__u32 level;			/* out: TK_WALK_* */
	__s32 nid;			/* out: -1 if none */
};

/*
 * TK_IOC_PAGE_REFS: who holds the folio of pfn (CAP_SYS_ADMIN; a snapshot).
 * Test builds only (make TIERKIT_TEST=1); otherwise ENOTTY.
 */
#define TK_PAGE_BUDDY			1	/* free in the buddy allocator */
#define TK_PAGE_ANON			2	/* an anonymous folio */

struct tk_page_refs {
	__u64 pfn;			/* in */
	__s32 refcount;			/* out: folio_ref_count() */
	__s32 mapcount;			/* out: folio_mapcount() */
	__u32 order;			/* out: folio_order() */
	__s32 nid;			/* out */
	__u32 flags;			/* out: TK_PAGE_* */
	__u32 _pad;
};

/*
 * TK_IOC_REBALANCE: moves every 4 KiB page of the file's mappings whose
 * node differs from the one the file's policy picks for its ilx now (see
 * Documentation/ABI/testing/dev-tierkit).
 */
#define TK_REBALANCE_F_DRY_RUN		1	/* count, move nothing */
#define TK_REBALANCE_F_WEIGHTS		2	/* weights: the file's own */

struct tk_rebalance {
	__u32 flags;			/* in: TK_REBALANCE_F_* */
	__u32 rate_pages;		/* in: most pages tried per second, 0: no limit */
	__u64 nodemask;			/* in: new mask, 0: keep; out: effective */
	__u64 budget_pages;		/* in: most pages moved, 0: no limit */
	__u8  weights[TIERKIT_MAX_NODES];	/* in: with TK_REBALANCE_F_WEIGHTS */
	__u64 looked;			/* out: pages looked at */
	__u64 misplaced;		/* out: off their target node when looked at */
	__u64 moved;			/* out */
	__u64 no_memory;		/* out: stayed, no page on the target node */
	__u64 busy;			/* out: stayed, pinned or referenced */
	__u64 elapsed_ns;		/* out */
};

/*
 * TK_IOC_MAPPED_FILE: returns a new fd (O_CLOEXEC) for the /dev/tierkit
 * file that process pid maps at addr, the same open file as that
 * mapping's; needs CAP_SYS_ADMIN (see Documentation/ABI/testing/dev-tierkit).
 */
struct tk_mapped_file {
	__s32 pid;			/* in: a thread of the process */
	__u32 flags;			/* in: 0 */
	__u64 addr;			/* in: an address inside the mapping */
	__u64 start;			/* out: the vma's start */
	__u64 end;			/* out: its end */
	__u64 id;			/* out: the open file's id */
};

/* --- ioctls ------------------------------------------------------------- */

#define TK_IOC_SET_POLICY	_IOWR(TIERKIT_IOC_MAGIC, 1, struct tk_policy)
#define TK_IOC_BULK		_IOWR(TIERKIT_IOC_MAGIC, 2, struct tk_bulk)
#define TK_IOC_TASK_NEXT	_IOWR(TIERKIT_IOC_MAGIC, 3, struct tk_task_next)
#define TK_IOC_SET_GIGANTIC	_IOWR(TIERKIT_IOC_MAGIC, 4, struct tk_gigantic)
#define TK_IOC_CLEAR_BENCH	_IOWR(TIERKIT_IOC_MAGIC, 5, struct tk_clear_bench)
#define TK_IOC_WALK		_IOWR(TIERKIT_IOC_MAGIC, 6, struct tk_walk)
#define TK_IOC_PAGE_REFS	_IOWR(TIERKIT_IOC_MAGIC, 7, struct tk_page_refs)
#define TK_IOC_REBALANCE	_IOWR(TIERKIT_IOC_MAGIC, 8, struct tk_rebalance)
#define TK_IOC_MAPPED_FILE	_IOWR(TIERKIT_IOC_MAGIC, 10, struct tk_mapped_file)

/*
 * TK_IOC_SNAPSHOT, on a new file: a copy-on-write snapshot of the caller's
 * 4 KiB tierkit mappings at addr..addr + len for a child it is about to
 * fork, which maps the file at the same offset and length (see
 * Documentation/ABI/testing/dev-tierkit).
 */
struct tk_snapshot {
	__u64 addr;			/* in: page aligned */
	__u64 len;			/* in: bytes, at most 1 GiB */
};

#define TK_IOC_SNAPSHOT		_IOWR(TIERKIT_IOC_MAGIC, 9, struct tk_snapshot)

/*
 * TK_IOC_SOCKET_WEIGHTS: reads or sets one socket's weight table,
 * device-wide (TK_SOCKET_F_DEVICE) or the open file's; an allocation places
 * by the table of the socket it runs on (see
 * Documentation/ABI/testing/dev-tierkit).
 */
#define TK_SOCKET_GET			0
#define TK_SOCKET_SET			1
#define TK_SOCKET_CLEAR			2
#define TK_SOCKET_F_DEVICE		(1U << 0)
#define TK_MAX_SOCKETS			8

struct tk_socket_weights {
	__u32 op;			/* in: TK_SOCKET_* */
	__u32 flags;			/* in: 0 or TK_SOCKET_F_DEVICE */
	__u32 socket;			/* in: physical package id */
	__u32 nr_nodes;			/* in (SET): nr_node_ids; out: nr_node_ids */
	__u64 cpu_nodes;		/* out: the socket's CPU nodes */
	__s32 this_socket;		/* out: the caller's socket */
	__u32 has_table;		/* out: 1 if the socket has a table */
	__u8 weights[TIERKIT_MAX_NODES]; /* in (SET), out: 0..255 per node */
};

#define TK_IOC_SOCKET_WEIGHTS	_IOWR(TIERKIT_IOC_MAGIC, 11, struct tk_socket_weights)

#endif /* _UAPI_LINUX_TIERKIT_H */
