// SPDX-License-Identifier: GPL-2.0
/*
 * libtkrun.so's calls on /dev/tierkit: a range mapped from tierkit files
 * (one per piece, with the file's own weights, offset = address), the
 * reservation it replaces, and a new tierkit range for a chunk.
 */
#define _GNU_SOURCE
#include "libtkrun.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

/* --- tierkit mappings --------------------------------------------------- */

/* Sets every per-socket table of cfg on fd (before it is mapped). 0 or -1. */
static int set_sockets(int fd)
{
	for (unsigned int s = 0; s < TK_MAX_SOCKETS; s++) {
		struct tk_socket_weights sw = { .op = TK_SOCKET_SET, .socket = s,
						.nr_nodes = cfg.nr_nodes };

		if (!(cfg.sockets & (1U << s)))
			continue;
		memcpy(sw.weights, cfg.socket_weights[s], sizeof(sw.weights));
		if (ioctl(fd, TK_IOC_SOCKET_WEIGHTS, &sw))
			return -1;
	}
	return 0;
}

/* Maps [a, a + l) from tierkit, replacing the reservation there, with file
 * offset off for a: one file per piece, closed once mapped, with the
 * file's own weights and per-socket tables. 0 or -1. */
int tk_map_at(uintptr_t a, size_t l, uint64_t off, int prot, int giga)
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
		    (ioctl(fd, TK_IOC_SET_POLICY, &p) == 0 && set_sockets(fd) == 0 &&
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
uintptr_t reserve(size_t l, size_t al)
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
int wants(size_t n, int *giga)
{
	*giga = cfg.gigantic && n >= GIB;
	return init_state == 2 && (*giga || (cfg.place && n >= cfg.threshold));
}

/* A new tierkit range for n bytes (rounded up), aligned to al; 0 if
 * tierkit cannot give it (the caller falls back). Table lock held. */
uintptr_t tk_new(size_t n, size_t al, int prot, int kind, int giga)
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
	struct range r = { .start = a, .len = l, .req = n, .clen = l, .off = a, .prot = prot,
			   .pkey = -1, .kind = (uint8_t)kind, .giga = (uint8_t)giga };
	if (!table_add(r)) {
		sys_munmap((void *)a, l);
		say_once(SAY_TABLE, "range table full; further big chunks use the kernel's memory");
		return 0;
	}
	return a;
}

void *tk_alloc(size_t n, size_t al, int prot, int kind)
{
	int giga;

	if (!wants(n, &giga) || !lock_table())
		return NULL;
	uintptr_t a = tk_new(n, al, prot, kind, giga);

	unlock_table();
	return (void *)a;
}
