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

struct pod_config;

/* A background job: work a server's workers do between client calls (the
 * benchmark jobs, src/bench/host.h). The worker loop (src/server/server.c)
 * knows nothing of what the work is; it calls the hook that the program
 * starting the server passes to pod_server_main:
 *   - open, before the workers start (after the built-in and module
 *     procedures are registered): create what the job needs in db (tables,
 *     procedures). wake(wake_arg) wakes the workers sleeping for calls, to
 *     be called when work appears. Returns the job's state, or NULL with a
 *     message in err (the server does not start);
 *   - started, once the workers run (may be NULL);
 *   - has_work(job, worker): whether worker 0..nworkers-1 has work now. Cheap
 *     when there is none; called with the server's queue lock held;
 *   - work(job, w, yield, arg), on worker w outside any transaction, when
 *     has_work said so: do some work and return as soon as yield(arg) is
 *     true (calls are queued, or the server stops). The socket's calls come
 *     first: a worker takes the queued calls before it asks again;
 *   - close, after the workers stopped (also after a failed start). */
struct pod_worker_job {
    void *(*open)(pod_db *db, const struct pod_config *c, int host, void (*wake)(void *arg),
                  void *wake_arg, char *err, size_t errlen);
    void (*started)(void *job);
    bool (*has_work)(void *job, int worker);
    void (*work)(void *job, struct pod_worker *w, bool (*yield)(void *arg), void *arg);
    void (*close)(void *job);
};

#endif
