/* What every built-in workload does with its procedures: find the context
 * they share, free it, and call one from a given worker or, without one,
 * from the database's admin worker. */
#ifndef PODDB_WORKLOADS_COMMON_PROCS_H
#define PODDB_WORKLOADS_COMMON_PROCS_H

#include <stddef.h>

#include "poddb/proc.h"

/* The context of the registered procedure `first` (every procedure of the
 * workload shares it), or NULL when the workload is not registered. */
void *wl_ctx_get(pod_db *db, const char *first);

/* Free that context and clear it in every procedure whose name starts with
 * prefix (like "ycsb."): none of them may run from then on. */
void wl_ctx_free(pod_db *db, const char *first, const char *prefix);

/* pod_call of proc on wk, or on the admin worker when wk is NULL. */
int wl_call(pod_db *db, struct pod_worker *wk, int proc, const pod_args *args, pod_result *res,
            char *msg, size_t msglen);

/* A loader unit (one transaction) whose first row, key of t, is there
 * already was committed whole before: 1 (the unit has nothing to do), 0,
 * or a negative status. So loading a workload again (after its servers
 * restarted on tables that kept their rows) goes on where it stopped. */
int wl_unit_loaded(pod_txn *tx, pod_table *t, const void *key);
/* What a loader unit returns when wl_unit_loaded found it done: an outcome
 * (it commits, having written nothing), so that the loader can say how much
 * of a load was there before. */
#define WL_UNIT_SKIPPED 1

/* wl_call with nargs (0..4) integer arguments, as the loaders' units hold them. */
int wl_call_i64(pod_db *db, struct pod_worker *wk, int proc, const int64_t *args, int nargs,
                pod_result *res, char *msg, size_t msglen);

#endif
