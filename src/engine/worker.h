/* Worker threads: each runs stored procedures to completion, one at a time. */
#ifndef PODDB_ENGINE_WORKER_H
#define PODDB_ENGINE_WORKER_H

#include <pthread.h>

#include "engine/db.h"

struct pod_txn;

/* What a call's worker is doing, for whoever looks (struct pod_call_state). */
enum {
    POD_CALL_RUNNING = -1,  /* an attempt runs */
    POD_CALL_BACKOFF = -2,  /* between attempts after a conflict */
    /* >= 0: the attempt waits for the reply of that host */
};

/* The call a worker runs now, as the watchdog and sys.stats see it. The
 * worker writes it (relaxed atomics, no lock); readers may see a mix of
 * two moments, which is good enough for a report. */
struct pod_call_state {
    uint64_t started_ns;     /* pod_mono_ns() when it started; 0: none runs */
    int32_t proc;
    int32_t doing;           /* POD_CALL_RUNNING, POD_CALL_BACKOFF or a host */
    uint32_t conflicts;      /* attempts rolled back so far */
    uint32_t by_cause[POD_CAUSE_COUNT];
};

/* A call that has retried this long gives back the calls queued behind it
 * (pod_worker.on_retrying). */
#define POD_RETRY_HANDOFF_NS (1000ull * 1000)

struct pod_worker {
    pod_db *db;
    int id;                 /* 0..nworkers-1, or nworkers for the admin worker */
    pthread_t thread;
    struct pod_txn *tx;
    uint64_t rng;
    struct pod_proc_stats stats[POD_MAX_PROCS]; /* written by this worker only */
    void (*body)(struct pod_worker *w, void *arg);
    void *arg;
    int cpu;                /* -1: not pinned */
    struct pod_call_state call;
    /* Called with arg once per call from the retry loop when the call has
     * kept retrying for POD_RETRY_HANDOFF_NS (NULL: nothing to do): the
     * server gives the calls it took with this one back to the queue, so
     * that another worker runs them meanwhile. */
    void (*on_retrying)(struct pod_worker *w, void *arg);
};

/* Say what the worker's call does now (POD_CALL_RUNNING, POD_CALL_BACKOFF,
 * or the host whose reply it waits for). */
static inline void pod_call_doing(struct pod_worker *w, int doing)
{
    __atomic_store_n(&w->call.doing, doing, __ATOMIC_RELAXED);
}

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
