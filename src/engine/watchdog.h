/* The liveness watchdog: a thread that looks at every worker's running call
 * (struct pod_call_state) and logs a call that has not finished within the
 * configured time — its procedure, how long, its conflicts by cause and
 * what it is doing now (an attempt, backing off, waiting for a host's
 * reply) — and again each time that much more time passes. It changes
 * nothing: a call ends by committing, failing, or spending its retry budget
 * (engine.max_retries, engine.retry_timeout_ms). */
#ifndef PODDB_ENGINE_WATCHDOG_H
#define PODDB_ENGINE_WATCHDOG_H

#include <stdint.h>

#include "engine/worker.h"
#include "util/err.h"

struct pod_watchdog;

/* Start watching db's workers (and its admin worker); slow_ms > 0. */
struct pod_watchdog *pod_watchdog_start(pod_db *db, uint64_t slow_ms, pod_err *err);
/* Stop and join the thread (NULL: nothing). */
void pod_watchdog_stop(struct pod_watchdog *wd);

/* The oldest call running now on any worker of db: its age in ns (0 when
 * none runs), a copy of its state in *out and its worker in *worker. */
uint64_t pod_oldest_call(const pod_db *db, struct pod_call_state *out, int *worker);
/* Calls running now on db's workers. */
int pod_calls_running(const pod_db *db);

/* "tpcc.new_order on worker 0 has run for 12.3 s: 11500 conflicts
 * (remote_busy 11350, next_key 150); now waiting for host 1's reply". */
void pod_call_describe(const pod_db *db, const struct pod_call_state *cs, int worker,
                       uint64_t age_ns, char *out, size_t len);

#endif
