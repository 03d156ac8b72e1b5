/* Worker threads: each runs stored procedures to completion, one at a time. */
#ifndef PODDB_ENGINE_WORKER_H
#define PODDB_ENGINE_WORKER_H

#include "engine/db.h"

/* A call that has retried this long gives back the calls queued behind it
 * (pod_worker.on_retrying). */
#define POD_RETRY_HANDOFF_NS (1000ull * 1000)

/* Run body(worker, arg) on each of db->opt.nworkers new threads; worker i is
 * pinned to cpus[i % ncpus] when ncpus > 0. */
int pod_workers_start(pod_db *db, const int *cpus, int ncpus,
                      void (*body)(struct pod_worker *w, void *arg), void *arg, char *err,
                      size_t errlen);
void pod_workers_join(pod_db *db);

/* The worker of the calling setup thread (loaders, tests); callers serialise
 * on db->admin_lock through pod_admin_begin/end. */
struct pod_worker *pod_admin_begin(pod_db *db);
void pod_admin_end(pod_db *db);

/* Run a procedure as one transaction, retrying conflicts with randomized
 * backoff. Returns the procedure's status (POD_OK or an outcome when it
 * committed); on a negative status msg (may be NULL) gets the reason. */
int pod_call(struct pod_worker *w, int proc, const pod_args *args, pod_result *res, char *msg,
             size_t msglen);

/* The worker running on this thread, or NULL. */
struct pod_worker *pod_current_worker(void);

#endif
