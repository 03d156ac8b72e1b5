/* poddb-server: one per host. Attaches to the region, builds the host's
 * database (kv tables from the config, built-in and module procedures), and
 * serves stored-procedure calls on a Unix socket (and optionally TCP on
 * loopback) until SIGTERM/SIGINT. */
#ifndef PODDB_SERVER_SERVER_H
#define PODDB_SERVER_SERVER_H

#include <signal.h>
#include <stdint.h>

#include "conf/config.h"
#include "engine/db.h"
#include "engine/worker.h"
#include "log/log.h"

struct pod_server;

/* How poddb-server was asked to start. */
struct pod_server_flags {
    /* Start with an empty log directory even though the pod says this host
     * logged before (docs/durability.md, "An empty log directory"). */
    bool allow_empty_log;
};

/* Run the server for host `host` until a stop signal, with the background
 * job `job` (NULL: none; struct pod_worker_job, src/engine/worker.h), whose
 * work the workers do between client calls. Returns the exit status for main (0 on a clean
 * shutdown). */
int pod_server_main(const struct pod_config *c, int host, const struct pod_server_flags *f,
                    const struct pod_worker_job *job);

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
