/* The benchmark workloads inside one server (docs/benchmarks.md): creates
 * the tables and procedures of the workloads in the config's `workloads:`
 * section, and serves the bench.* procedures that load the host's own
 * partitions, run a workload on the host's workers for a while (internal
 * mode: the workers generate the transactions themselves, no socket in the
 * path) and check its consistency.
 *
 * A procedure cannot run other transactions, so bench.load/run/check start a
 * job and return at once; the server's workers do the job's work between
 * client calls through pod_bench_work, which runs every transaction with
 * pod_call (the normal call path), and poddb-bench follows with bench.status
 * and collects bench.result. One job at a time per host.
 *
 * The server runs it as its background job (struct pod_worker_job in
 * src/engine/worker.h; poddb-server passes pod_bench_job):
 *   - pod_bench_new before the workers start, pod_bench_free after they stop;
 *   - pod_bench_set_waker: a function that wakes sleeping workers (a job
 *     started); a sleeping worker re-checks pod_bench_has_work;
 *   - each worker calls pod_bench_work when pod_bench_has_work says so, with
 *     a yield function that says when calls are queued (or the server stops):
 *     the work returns then, so clients of the socket are served during a run. */
#ifndef PODDB_BENCH_HOST_H
#define PODDB_BENCH_HOST_H

#include <stdbool.h>
#include <stddef.h>

#include "conf/config.h"
#include "engine/db.h"
#include "engine/worker.h"

struct pod_worker;
struct pod_bench;

/* Create the configured workloads' tables and procedures and the bench.*
 * procedures (before the workers start). NULL and a message on failure. */
struct pod_bench *pod_bench_new(pod_db *db, const struct pod_config *c, int host, char *err,
                                size_t errlen);
/* After the workers stopped (before pod_db_free). */
void pod_bench_free(struct pod_bench *b);

void pod_bench_set_waker(struct pod_bench *b, void (*wake)(void *arg), void *arg);

/* Start loading the workloads whose config says load_at_start (the workers
 * must be running). */
void pod_bench_autoload(struct pod_bench *b);

/* Whether worker `worker` (0..nworkers-1) has bench work now. Cheap when no
 * job runs; may be called with the server's queue lock held. */
bool pod_bench_has_work(struct pod_bench *b, int worker);

/* Do bench work on worker w (the calling thread, outside any transaction)
 * until yield(arg) is true, its part of the job is done, or ~10 ms passed. */
void pod_bench_work(struct pod_bench *b, struct pod_worker *w, bool (*yield)(void *arg),
                    void *arg);

/* The above as the server's background job hook: open is pod_bench_new
 * and pod_bench_set_waker, started pod_bench_autoload, close pod_bench_free. */
extern const struct pod_worker_job pod_bench_job;

#endif
