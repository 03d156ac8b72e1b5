/* Shared by workloads whose rows are ids 0..n-1 split into ranges: range
 * partitioning and a loader that fills the partitions in parallel. */
#ifndef PODDB_WORKLOADS_COMMON_RANGE_H
#define PODDB_WORKLOADS_COMMON_RANGE_H

#include <stddef.h>
#include <stdint.h>

#include "poddb/proc.h"

/* First id of partition p when ids 0..n-1 are split into nparts ranges
 * (n for p >= nparts). */
uint64_t wl_part_first(uint32_t p, uint64_t n, uint32_t nparts);

/* The partition of id (ids >= n fall in the last one). */
uint32_t wl_part_of(uint64_t id, uint64_t n, uint32_t nparts);

/* A partition other than home for a cross-partition access, the r-th (mod
 * their number) of the candidates: with hosts > 1 (partition p on host
 * p % hosts) only partitions of other hosts, so that the access is remote;
 * with hosts 0 or 1 any other partition. nparts >= 2. */
uint32_t wl_other_part(uint64_t r, uint32_t nparts, uint32_t home, uint32_t hosts);

typedef void (*wl_progress_fn)(uint64_t rows_loaded, void *arg);

/* Load ids [0, n): call procedure proc_load(from, to) for batches of at most
 * `batch` ids, with the partitions spread over the database's workers (which
 * must not be running). progress (may be NULL) gets the running total, from
 * one thread at a time. `what` names the loader in messages. 0 or -1 with err. */
int wl_load_ranges(pod_db *db, int proc_load, uint64_t n, uint32_t nparts, uint64_t batch,
                   wl_progress_fn progress, void *progress_arg, const char *what, char *err,
                   size_t errlen);

#endif
