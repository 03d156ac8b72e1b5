/* poddb-server: one per host. Attaches to the region, builds the host's
 * database (kv tables from the config, built-in and module procedures), and
 * serves stored-procedure calls on a Unix socket (and optionally TCP on
 * loopback) until SIGTERM/SIGINT. */
#ifndef PODDB_SERVER_SERVER_H
#define PODDB_SERVER_SERVER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf/config.h"
#include "engine/db.h"
#include "log/log.h"

struct pod_server;

/* How poddb-server was asked to start. */
struct pod_server_flags {
    /* Start with an empty log directory even though the pod says this host
     * logged before (docs/durability.md, "An empty log directory"). */
    bool allow_empty_log;
};

struct pod_worker;

/* A background job: work the server's workers do between client calls (the
 * benchmark jobs, src/bench/host.h). The server knows nothing of what the
 * work is; it calls the hook, which the program that starts the server
 * passes to pod_server_main:
 *   - open, before the workers start (after the built-in and module
 *     procedures are registered): create what the job needs in db (tables,
 *     procedures). wake(wake_arg) wakes the workers sleeping for calls, to
 *     be called when work appears. Returns the job's state, or NULL with a
 *     message in err (the server does not start);
 *   - started, once the workers run;
 *   - has_work(job, worker): whether worker 0..nworkers-1 has work now. Cheap
 *     when there is none; called with the server's queue lock held;
 *   - work(job, w, yield, arg), on worker w outside any transaction, when
 *     has_work said so: do some work and return as soon as yield(arg) is
 *     true (calls are queued, or the server stops). The socket's calls come
 *     first: a worker takes the queued calls before it asks again;
 *   - close, after the workers stopped (also after a failed start). */
struct pod_server_job {
    void *(*open)(pod_db *db, const struct pod_config *c, int host, void (*wake)(void *arg),
                  void *wake_arg, char *err, size_t errlen);
    void (*started)(void *job);
    bool (*has_work)(void *job, int worker);
    void (*work)(void *job, struct pod_worker *w, bool (*yield)(void *arg), void *arg);
    void (*close)(void *job);
};

/* Run the server for host `host` until a stop signal, with the background
 * job `job` (NULL: none). Returns the exit status for main (0 on a clean
 * shutdown). */
int pod_server_main(const struct pod_config *c, int host, const struct pod_server_flags *f,
                    const struct pod_server_job *job);

/* For built-in procedures (sys.*): the running server of this process. */
struct pod_server_info {
    const struct pod_config *conf;
    int host;
    uint64_t started_ns;
    uint64_t connections_total, connections_open;
    uint64_t requests_total, bad_frames;
    uint64_t calls_handed_back; /* queued behind a call that kept retrying, given to others */
    /* Limits (docs/configuration.md, "server"): bytes the connections make
     * the server hold now (atomic), connections closed for
     * server.max_conn_buffered and for server.max_buffered, and replies
     * answered POD_E_NOT_DURABLE after engine.durable_wait_ms; and how
     * often the server did not run for a second or more (that time is not
     * counted against the wait). */
    uint64_t buffered;
    uint64_t conn_limit_closes, server_limit_closes;
    uint64_t not_durable_replies;
    uint64_t stalls;
    uint64_t auth_timeouts; /* TCP connections closed for server.auth_timeout_ms */
    struct log_recovery_stats recovery; /* what recovery did at startup */
};
const struct pod_server_info *pod_server_info(void);

/* Built-in procedures and kv tables (builtin_kv.c, builtin_sys.c). */
int pod_builtin_kv_init(pod_db *db, const struct pod_config *c, char *err, size_t errlen);
int pod_builtin_sys_init(pod_db *db, char *err, size_t errlen);
/* Load the shared objects listed in the config (modules.c). */
int pod_modules_load(pod_db *db, const struct pod_config *c, char *err, size_t errlen);

#endif
