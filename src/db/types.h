/* The database of one host as data: struct pod_db, its workers, options and
 * statistics, and the hooks through which the layers below the engine reach
 * the ones above them. Types and inline field access only: the functions
 * that create and run a db are in engine/db.h and engine/worker.h.
 *
 * Every layer of the engine uses these types (storage/ below them, then pod/,
 * log/, txn/, engine/: docs/architecture.md, "Layers"), so they sit in a
 * header of their own that includes nothing of those layers. */
#ifndef PODDB_DB_TYPES_H
#define PODDB_DB_TYPES_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "poddb/proc.h"
#include "storage/btree.h"
#include "store/record_store.h"

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
    POD_CAUSE_VALIDATION,    /* a record read without a lock changed before commit (ford) */
    POD_CAUSE_COUNT
};

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

/* The concurrency control over a record store (ARRAY, GIVEN). */
enum pod_cc_kind {
    POD_CC_RS_2PL = 0,    /* 2PL NO_WAIT (src/txn/rs2pl.c) */
    POD_CC_FORD,          /* FORD-style optimistic reads, undo logs (src/txn/ford.c) */
    POD_CC_MOTOR,         /* ford over multi-versioned records, snapshot reads (src/txn/ford.c) */
    POD_CC_LOTUS,         /* motor's records, locks in lock tables of the compute nodes (ford.c) */
};

struct pod_db_options {
    int nworkers;              /* workers (EBR slots); 1..POD_MAX_WORKERS */
    /* Workers per thread, run as lanes (src/util/lanes.h): while one waits
     * for its memory it yields the thread to the next, so that a thread
     * keeps several transactions in flight. nworkers is a multiple of it;
     * 0 or 1: a thread per worker. Only over a store whose handles let a
     * lane yield in an operation (the dm store). */
    int lanes;
    int host_id, nhosts;       /* which partitions are local: p % nhosts == host_id */
    bool phantom_protection;   /* next-key locking on scans, inserts and misses */
    bool no_locking;           /* BENCHMARK ONLY: local rows are never locked (not isolated) */
    int max_retries;           /* attempts per call; 0 = default (100000) */
    uint64_t retry_timeout_ms; /* a call stops retrying after this long; 0 = no limit */
    enum pod_store_kind store;
    /* POD_STORE_GIVEN: the caller's; the database owns it from the call on
     * (destroyed with it, or at once when pod_db_new fails) */
    struct record_store *given_store;
    enum pod_cc_kind cc;       /* ARRAY, GIVEN: the protocol over the store */
    uint32_t undo_log_bytes;   /* ford on a shared store: each compute node's undo log */
    uint32_t versions;         /* motor: the versions a record keeps (2..) */
    uint64_t msg_rtt_ns;       /* lotus under the NIC model: a lock request's least round trip */
};

struct pod_worker;
struct log_host;
struct ebr_domain;

/* What the pod and durability layers need done by the layers above them.
 * They sit below the engine and the transaction layer (a transaction locks
 * rows the pod layer moved and logs its commits; log/checkpoint.c reads rows
 * where the pod layer put them), so they cannot call up directly without an
 * include cycle. pod_db_new (engine/db.c) fills every hook in when it creates
 * the db, so none is ever NULL; each is called where the code called the
 * function across modules before, never per row access of a transaction. */
struct pod_db_hooks {
    /* log_row_removed (log/txlog.h): a row of this host whose delete another
     * host committed in CXL memory leaves its index (pod/movement.c). */
    void (*row_removed)(pod_db *db, const pod_table *t, const void *key, uint64_t ev);
    /* pod_admin_begin / pod_admin_end (engine/worker.h): the admin worker,
     * whose EBR slots keep rows readable while log/checkpoint.c reads them. */
    struct pod_worker *(*admin_begin)(pod_db *db);
    void (*admin_end)(pod_db *db);
    /* Run body(worker, arg) on each of the db's worker threads (pinned as
     * pod_workers_start pins them) and return once every one returned; 0, or
     * -1 with err set when the threads cannot start (log/recovery.c's
     * replay, which needs the workers' EBR slots). */
    int (*run_workers)(pod_db *db, const int *cpus, int ncpus,
                       void (*body)(struct pod_worker *w, void *arg), void *arg, char *err,
                       size_t errlen);
};

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
    pthread_t *threads;        /* the workers' threads (opt.lanes workers each) */
    int nrunning;              /* of them */
    struct pod_host *pod;      /* in a pod of several hosts (src/pod/pod.h), else NULL */
    const struct cc_ops *cc;   /* the concurrency control (src/txn/cc.h) */
    struct record_store *store; /* rs-2pl's records (ARRAY, GIVEN), else NULL */
    /* this database's place among the users of a shared store (slot 0: it
     * has none), set when its workers first start (cc_ops.start) */
    struct rs_member member;
    rs_loc clock;              /* motor: the pod's clock record (commit timestamps) */
    void *cc_state;            /* the protocol's own (lotus: its lock service); cc_ops.stop frees it */
    bool cc_started;
    struct pod_db_hooks hooks;
};

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

struct pod_txn;

/* A worker thread of the db (engine/worker.h runs them), or the admin
 * worker of setup code. */
struct pod_worker {
    pod_db *db;
    int id;                 /* 0..nworkers-1, or nworkers for the admin worker */
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

#endif
