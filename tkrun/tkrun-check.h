/* SPDX-License-Identifier: GPL-2.0 */
/* tkrun-check's parts (tkrun-check.c, tkrun-fork.c). */
#ifndef TKRUN_CHECK_H
#define TKRUN_CHECK_H

#include <stddef.h>

/* One "ok NAME" or "not ok NAME: WHY" line; a failure fails the run. */
void check(const char *name, int ok, const char *why);
/* "backing NAME PATH": what /proc/self/maps says holds addr. */
void show(const char *name, const void *addr);
/* -f MIB: fork's time and memory with a written block of MIB. */
int fork_cost(size_t mib);
/* -c MIB: fork is a snapshot, and copies nothing, with blocks of MIB. */
void cow_checks(size_t mib);
/* -W MIB: three forks under a writer thread with one block of MIB. */
void gigantic_writer(size_t mib);
/* -t MIB: fork's time with a written block of MIB against the kernel's. */
int fork_time(size_t mib);

#endif
