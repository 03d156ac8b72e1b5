/* The database of one host: tables, procedures, workers, statistics. */
#ifndef PODDB_ENGINE_DB_H
#define PODDB_ENGINE_DB_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "poddb/proc.h"
#include "storage/btree.h"

#define POD_MAX_TABLES 256
#define POD_MAX_PROCS 256

/* Why a transaction attempt was rolled back and retried. */
enum pod_abort_cause {
    POD_CAUSE_READ_LOCK = 0, /* a shared lock was denied: a writer holds the row */
    POD_CAUSE_WRITE_LOCK,    /* an exclusive lock was denied */
    POD_CAUSE_UPGRADE,       /* shared -> exclusive denied: other readers */
    POD_CAUSE_NEXT_KEY,      /* a next-key (gap) lock was denied */
    POD_CAUSE_REMOTE_BUSY,   /* the owner host could not move a tuple now (it was locked) */
    POD_CAUSE_HWCC_FULL,     /* the owner host's HWcc memory was full */
    POD_CAUSE_COUNT
};
const char *pod_abort_cause_name(enum pod_abort_cause c);
/* "read_lock 3, remote_busy 11350": the causes counted in by_cause
 * (POD_CAUSE_COUNT entries), or "none". */
void pod_causes_text(const uint32_t *by_cause, char *out, size_t len);

struct pod_proc_stats {
    uint64_t commits;
    uint64_t user_aborts;      /* the procedure returned POD_USER_ABORT */
    uint64_t errors;           /* other negative statuses */
    uint64_t conflicts;        /* attempts rolled back and retried */
    uint64_t gave_up;          /* calls that ended in POD_E_RETRIES (not counted in errors) */
    uint64_t by_cause[POD_CAUSE_COUNT];
};

/* Where the records of a database live, and so which concurrency control runs
 * it (src/txn/cc.h). */
enum pod_store_kind {
    POD_STORE_TABLES = 0, /* this host's tables in DRAM and the pod's CXL region: tigon-2pl */
    POD_STORE_ARRAY,      /* an in-process record store (src/store/record_store.h): rs-2pl */
    POD_STORE_GIVEN,      /* the record store in pod_db_options.given_store: rs-2pl */
};

struct pod_db_options {
    int nworkers;              /* worker threads (EBR slots); 1..POD_MAX_WORKERS */
    int host_id, nhosts;       /* which partitions are local: p % nhosts == host_id */
    bool phantom_protection;   /* next-key locking on scans, inserts and misses */
    bool no_locking;           /* BENCHMARK ONLY: local rows are never locked (not isolated) */
    int max_retries;           /* attempts per call; 0 = default (100000) */
    uint64_t retry_timeout_ms; /* a call stops retrying after this long; 0 = no limit */
    enum pod_store_kind store;
    struct record_store *given_store; /* POD_STORE_GIVEN: the caller's, destroyed with the db */
};

struct pod_worker;
struct log_host; /* logging hook */

struct pod_db {
    struct pod_db_options opt;
    pod_table *tables[POD_MAX_TABLES];
    uint32_t ntables;
    pod_proc_def procs[POD_MAX_PROCS];
    uint32_t nprocs;
    struct ebr_domain *ebr;
    bt_space space;            /* where local index nodes live */
    uint64_t epoch;            /* commit epoch when there is no log layer (unit tests) */
    struct log_host *log;      /* logging hook: the durability layer (src/log/log.h); NULL: none */
    pthread_mutex_t admin_lock;
    struct pod_worker *admin;  /* for setup code outside the workers */
    struct pod_worker **workers;
    int nrunning;
    struct pod_host *pod;      /* in a pod of several hosts (src/pod/pod.h), else NULL */
    const struct cc_ops *cc;   /* the concurrency control (src/txn/cc.h) */
    void *cc_state;            /* the protocol's own, per database */
    struct record_store *store; /* POD_STORE_ARRAY's records, else NULL */
};

pod_db *pod_db_new(const struct pod_db_options *o, char *err, size_t errlen);
/* No worker may be running. */
void pod_db_free(pod_db *db);

int pod_proc_find(const pod_db *db, const char *name);
/* Sum of the statistics of every worker (and the admin worker) for one procedure. */
void pod_db_proc_stats(const pod_db *db, int proc, struct pod_proc_stats *out);

/* Print one line per procedure that ran: commits, user aborts, errors,
 * conflicts (retried attempts) by cause, calls that gave up. */
void pod_db_print_stats(const pod_db *db, FILE *out);

#endif
