/* PodDB stored-procedure API: everything a workload writer needs.
 *
 * A stored procedure is a C function that runs inside one transaction:
 *
 *     static int transfer(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
 *     {
 *         struct account from, to;
 *         POD_TRY(pod_get_for_update(tx, accounts, key_from, &from));
 *         ...
 *         POD_TRY(pod_put(tx, accounts, key_from, &from));
 *         pod_result_i64(res, from.balance);
 *         return POD_OK;
 *     }
 *
 * Return POD_OK to commit, POD_USER_ABORT to roll back without retry (the
 * caller sees "aborted"), or pass on any negative status an operation
 * returned (POD_TRY does that): POD_CONFLICT rolls back and the engine runs the
 * procedure again after a randomized backoff; other errors roll back and are
 * reported. Transactions are serializable: strict two-phase locking with
 * NO_WAIT (a lock that is taken makes the operation fail with POD_CONFLICT at
 * once) and next-key locking against phantoms.
 *
 * A procedure must be deterministic only in what it writes through this API;
 * it may be run several times, so it must not have side effects outside it. */
#ifndef PODDB_PROC_H
#define PODDB_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes -------------------------------------------------------- */

enum pod_status {
    POD_OK = 0,
    POD_NOT_FOUND = 1,    /* no such key (an outcome, not an error) */
    POD_EXISTS = 2,       /* insert of a key that is present */
    POD_CONFLICT = -1,    /* a lock was taken: the transaction is rolled back and retried */
    POD_USER_ABORT = -2,  /* the procedure chose to roll back; not retried */
    POD_E_INVALID = -3,   /* bad argument (wrong table, key size, ...); message set */
    POD_E_NOMEM = -4,     /* out of memory */
    POD_E_INTERNAL = -5,  /* a bug or an unexpected state; message set */
    POD_E_RETRIES = -6,   /* gave up retrying conflicts (engine.max_retries or retry_timeout_ms) */
    POD_E_LIMIT = -7,     /* the transaction can never fit a hard limit (named in the message) */
    POD_E_NOT_DURABLE = -8, /* no reply within engine.durable_wait_ms: the pod's durable epoch
                             * stopped (the message says why if known); the outcome is
                             * unknown: the call may have committed, but it is not acknowledged */
    POD_E_AUTH = -9,      /* a TCP connection without the host's token (sys.auth); it is closed */
};

/* Pass on a negative status: `POD_TRY(pod_get(...));` */
#define POD_TRY(expr)                          \
    do {                                       \
        int pod_try_rc_ = (expr);              \
        if (pod_try_rc_ < 0) return pod_try_rc_; \
    } while (0)

const char *pod_status_name(int status);

/* ---- typed values ------------------------------------------------------- */

enum pod_type { POD_T_NULL = 0, POD_T_I64 = 1, POD_T_F64 = 2, POD_T_BYTES = 3 };

typedef struct pod_value {
    enum pod_type type;
    uint32_t len;           /* POD_T_BYTES: byte count */
    union {
        int64_t i64;
        double f64;
        const void *bytes;  /* POD_T_BYTES: not NUL-terminated */
    } u;
} pod_value;

typedef struct pod_args {
    int n;
    const pod_value *v;
} pod_args;

static inline pod_value pod_v_i64(int64_t x) { pod_value v = {POD_T_I64, 0, {.i64 = x}}; return v; }
static inline pod_value pod_v_f64(double x) { pod_value v = {POD_T_F64, 0, {.f64 = x}}; return v; }
static inline pod_value pod_v_bytes(const void *p, uint32_t n)
{
    pod_value v = {POD_T_BYTES, n, {.bytes = p}};
    return v;
}
static inline pod_value pod_v_str(const char *s) { return pod_v_bytes(s, (uint32_t)strlen(s)); }

/* ---- results: rows of typed values --------------------------------------- */

typedef struct pod_result pod_result;

/* Append a value to the current row (the first row exists from the start). */
int pod_result_i64(pod_result *r, int64_t v);
int pod_result_f64(pod_result *r, double v);
int pod_result_bytes(pod_result *r, const void *p, uint32_t n);
int pod_result_str(pod_result *r, const char *s);
/* Start a new row (for row sets, e.g. the rows of a scan). */
int pod_result_row(pod_result *r);
/* Forget everything added (the engine does this before every retry). */
void pod_result_clear(pod_result *r);
int pod_result_nrows(const pod_result *r);
int pod_result_ncols(const pod_result *r, int row);
/* Copy value (row, col) to *out; byte values point into the result and stay
 * valid until it changes. Returns 0, or -1 when there is no such value. */
int pod_result_get(const pod_result *r, int row, int col, pod_value *out);

/* ---- tables --------------------------------------------------------------- */

typedef struct pod_db pod_db;
typedef struct pod_table pod_table;
typedef struct pod_txn pod_txn;

enum pod_col_type { POD_COL_I64 = 1, POD_COL_F64 = 2, POD_COL_BYTES = 3, POD_COL_I32 = 4 };

typedef struct pod_column {
    const char *name;
    enum pod_col_type type;
    uint32_t offset;  /* in the tuple */
    uint32_t size;    /* bytes: 8 for I64/F64, 4 for I32, the width for BYTES */
} pod_column;

/* Maps a key to a partition 0..nparts-1. Partition p lives on host
 * p % hosts (pod_table_part_host below says which). */
typedef uint32_t (*pod_partition_fn)(const void *key, uint32_t nparts, void *ctx);

#define POD_MAX_TUPLE_SIZE (16u << 20) /* bytes */

typedef struct pod_table_def {
    const char *name;
    uint32_t key_size;      /* bytes, 1..255; keys compare with memcmp */
    uint32_t tuple_size;    /* bytes, 1..POD_MAX_TUPLE_SIZE */
    uint32_t ncols;         /* may be 0: the tuple is opaque bytes */
    const pod_column *cols;
    uint32_t nparts;        /* 0 means 1 */
    pod_partition_fn partition; /* NULL: everything in partition 0 */
    void *partition_ctx;
    /* Bytes per node of the table's DRAM index; 0: 512 (more for keys
     * wider than 48 bytes). Point lookups in random order do best with 512;
     * tables read by range scans or filled in key order (TPC-C's orders and
     * order lines) ran faster with 1024: a scan or an append crosses half as
     * many leaves. A multiple of 8 from 64 to 16384 that holds at least 4
     * keys. */
    uint32_t index_node_size;
    /* Rows the table is expected to hold; 0: not known. A store with a
     * hash index (disaggregated memory, docs/dm.md) sizes it for this
     * many; never a limit. */
    uint64_t expected_rows;
} pod_table_def;

/* Built-in partition functions. pod_part_be64 reads the key's first 8 bytes
 * as a big-endian integer v and returns v % nparts (ctx unused). */
uint32_t pod_part_be64(const void *key, uint32_t nparts, void *ctx);

/* Create a table (before workers run). NULL and a message in err on failure. */
pod_table *pod_table_create(pod_db *db, const pod_table_def *def, char *err, size_t errlen);
pod_table *pod_table_find(pod_db *db, const char *name);
const char *pod_table_name(const pod_table *t);
uint32_t pod_table_key_size(const pod_table *t);
uint32_t pod_table_tuple_size(const pod_table *t);
uint32_t pod_table_ncols(const pod_table *t);
const pod_column *pod_table_col(const pod_table *t, uint32_t i);
int pod_table_col_index(const pod_table *t, const char *name); /* -1 if none */
/* Whether pod_scan on t is served by an ordered index (a B+-tree: a scan
 * visits only its range). False on a store whose index is a hash (the
 * disaggregated-memory mode, docs/dm.md): a scan there reads the table's
 * whole index, so a procedure that can should read by key instead. */
bool pod_table_ordered(const pod_table *t);

/* ---- the pod: hosts and placement -------------------------------------------
 * The pod has pod_db_nhosts(db) hosts, numbered from 0; this server is host
 * pod_db_host_id(db). Partition part of table t lives on host
 * pod_table_part_host(t, part) (part % hosts; -1 when the table has no such
 * partition): a transaction reaches any partition, but its own host's are the
 * cheap ones. Fixed for the life of the server; in a procedure, the db is
 * pod_txn_db(tx). */
int pod_db_nhosts(const pod_db *db);
int pod_db_host_id(const pod_db *db);
int pod_table_part_host(const pod_table *t, uint32_t part);

/* ---- operations inside a transaction ------------------------------------
 * key: key_size bytes; tuple: tuple_size bytes. Each returns POD_OK, an
 * outcome (POD_NOT_FOUND, POD_EXISTS) or a negative status to pass on. Once an
 * operation returned POD_CONFLICT every later one does too. */

pod_db *pod_txn_db(pod_txn *tx);
/* Read with a shared lock. */
int pod_get(pod_txn *tx, pod_table *t, const void *key, void *tuple_out);
/* Read with an exclusive lock (use before pod_put to avoid an upgrade). */
int pod_get_for_update(pod_txn *tx, pod_table *t, const void *key, void *tuple_out);
/* The same without a copy, for tuples read or changed in part: *tuple
 * points at the row's tuple_size bytes, valid until the transaction ends or
 * itself writes or deletes the key. pod_get_ref reads with a shared lock
 * (do not write through the pointer); pod_update_ref takes an exclusive
 * lock, saves the before-image, and what the procedure then writes there is
 * the transaction's write of the row, as if by pod_put (undone on abort). */
int pod_get_ref(pod_txn *tx, pod_table *t, const void *key, const void **tuple);
int pod_update_ref(pod_txn *tx, pod_table *t, const void *key, void **tuple);
/* pod_update_ref that will write only the tuple's bytes off .. off + len - 1:
 * *tuple points at the whole tuple (read any of it), but only those bytes
 * are saved for an abort, compared for the log and published to other
 * hosts, so a write outside them is lost or half-done: write there only
 * after another pod_update_range covering it (or pod_update_ref). Several
 * ranges of one row in one transaction are fine. A range past the tuple, or
 * len 0, is POD_E_INVALID. For wide tuples of which a transaction changes a
 * few fields (YCSB's column, TPC-C's counters). */
int pod_update_range(pod_txn *tx, pod_table *t, const void *key, uint32_t off, uint32_t len,
                     void **tuple);
/* Overwrite an existing row (POD_NOT_FOUND if there is none). */
int pod_put(pod_txn *tx, pod_table *t, const void *key, const void *tuple);
/* Insert a new row (POD_EXISTS if the key is present). */
int pod_insert(pod_txn *tx, pod_table *t, const void *key, const void *tuple);
/* Delete a row (POD_NOT_FOUND if there is none). */
int pod_delete(pod_txn *tx, pod_table *t, const void *key);

/* A hint: the transaction is about to read these n keys of t (n * key_size
 * bytes, one after another). Their index paths and rows (for other hosts'
 * partitions: CXL index paths and records, where the tuples are in CXL
 * memory) are looked up together and brought into the cache, so that the
 * reads that follow do not each wait for memory in turn. Two or more keys of
 * one other host's partition that are not in CXL memory yet are asked for in
 * one request, and the call waits for that host's reply (docs/pod.md). Takes
 * no lock and reads nothing into the transaction. POD_OK, or a negative
 * status for a bad table or NULL keys. */
int pod_prefetch(pod_txn *tx, pod_table *t, const void *keys, uint32_t n);

/* Called per row of a scan, in order, with a shared lock held on the row.
 * Return true to go on, false to stop. */
typedef bool (*pod_scan_fn)(void *arg, const void *key, const void *tuple);

enum pod_scan_flags {
    POD_SCAN_REVERSE = 1 << 0,  /* from hi down to lo */
    POD_SCAN_FOR_UPDATE = 1 << 1, /* exclusive locks on the rows visited */
};

/* Visit the rows with lo <= key <= hi (lo or hi NULL: unbounded), at most
 * limit rows (0: no limit). lo and hi must lie in the same partition (a scan
 * does not cross partitions). With phantom protection on, the scanned range
 * stays exactly as seen until commit. */
int pod_scan(pod_txn *tx, pod_table *t, const void *lo, const void *hi, uint32_t limit,
             unsigned flags, pod_scan_fn fn, void *arg);

/* Set the message returned with a negative status (printf style). */
int pod_txn_fail(pod_txn *tx, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- procedures ------------------------------------------------------------ */

typedef int (*pod_proc_fn)(pod_txn *tx, const pod_args *args, pod_result *res, void *ctx);

typedef struct pod_proc_def {
    const char *name;       /* "tpcc.new_order", "kv.get", ... */
    pod_proc_fn fn;
    void *ctx;
    int nargs;              /* -1: any number */
    const enum pod_type *arg_types; /* nargs entries, or NULL: not checked */
    bool read_only;
} pod_proc_def;

int pod_proc_register(pod_db *db, const pod_proc_def *def, char *err, size_t errlen);

/* A shared object listed in the config exports this symbol; the server calls
 * it once at start to create tables and register procedures. */
typedef int (*pod_module_init_fn)(pod_db *db, char *err, size_t errlen);
#define POD_MODULE_INIT_SYMBOL "poddb_module_init"

/* ---- procedures by number ------------------------------------------------------
 * Procedures are numbered 0..pod_proc_count(db)-1 in the order they were
 * registered (pod_proc_register returns the number); the number is what
 * pod_call takes. For the code around a workload: its loader, its checks, a
 * benchmark driver. */

/* The number of the procedure called name, or -1 when there is none. */
int pod_proc_find(const pod_db *db, const char *name);
int pod_proc_count(const pod_db *db);
/* Its name, or NULL when there is no procedure proc. */
const char *pod_proc_name(const pod_db *db, int proc);
/* The ctx it was registered with (and every call of it gets), or NULL when
 * there is no procedure proc. */
void *pod_proc_ctx(const pod_db *db, int proc);
/* Replace that ctx: only while no worker can call proc (before the workers
 * start, after they stopped), e.g. to clear it when the workload frees what
 * it pointed to. */
void pod_proc_set_ctx(pod_db *db, int proc, void *ctx);

/* ---- running procedures from C ----------------------------------------------
 * A call runs on a worker: one of the database's worker threads (the
 * server's, or those of pod_workers_start), each running one call at a time,
 * or the admin worker that a setup thread takes with pod_admin_begin. */

struct pod_worker;

/* A result for pod_call, empty; NULL when out of memory. */
pod_result *pod_result_new(void);
void pod_result_free(pod_result *r);

/* Run procedure proc as one transaction on worker w (the calling thread's),
 * retrying conflicts with randomized backoff. Returns the procedure's status
 * (POD_OK or an outcome when it committed); on a negative status msg (may be
 * NULL) gets the reason. */
int pod_call(struct pod_worker *w, int proc, const pod_args *args, pod_result *res, char *msg,
             size_t msglen);

/* The admin worker, for a thread that is not a worker (a loader's caller, a
 * test): callers take turns, pod_admin_end gives it back. */
struct pod_worker *pod_admin_begin(pod_db *db);
void pod_admin_end(pod_db *db);

/* Run body(worker, arg) on each of the database's pod_db_nworkers(db)
 * worker threads, started now (no worker may be running: the server's are
 * not started yet or have stopped); worker i is pinned to cpus[i % ncpus]
 * when ncpus > 0. 0, or -1 with a message in err. pod_workers_join waits
 * until every body returned. */
int pod_workers_start(pod_db *db, const int *cpus, int ncpus,
                      void (*body)(struct pod_worker *w, void *arg), void *arg, char *err,
                      size_t errlen);
void pod_workers_join(pod_db *db);

/* The database's worker threads, and for one worker its database and its
 * number 0..pod_db_nworkers(db)-1 (the admin worker's is pod_db_nworkers(db)). */
int pod_db_nworkers(const pod_db *db);
pod_db *pod_worker_db(const struct pod_worker *w);
int pod_worker_id(const struct pod_worker *w);

/* ---- keys: encodings whose memcmp order is the natural order ------------ */

static inline void pod_key_u64(void *dst, uint64_t v)
{
    unsigned char *p = (unsigned char *)dst;
    for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (unsigned char)v;
}
static inline void pod_key_u32(void *dst, uint32_t v)
{
    unsigned char *p = (unsigned char *)dst;
    for (int i = 3; i >= 0; i--, v >>= 8) p[i] = (unsigned char)v;
}
static inline void pod_key_u16(void *dst, uint16_t v)
{
    unsigned char *p = (unsigned char *)dst;
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}
/* Signed integers: flip the sign bit so negative numbers sort first. */
static inline void pod_key_i64(void *dst, int64_t v) { pod_key_u64(dst, (uint64_t)v ^ (1ull << 63)); }
static inline void pod_key_i32(void *dst, int32_t v) { pod_key_u32(dst, (uint32_t)v ^ (1u << 31)); }
/* A string padded with zero bytes to width (longer strings are cut). */
static inline void pod_key_str(void *dst, const char *s, size_t width)
{
    size_t n = 0;
    for (; n < width && s[n]; n++) ((char *)dst)[n] = s[n];
    memset((char *)dst + n, 0, width - n);
}
static inline uint64_t pod_key_get_u64(const void *src)
{
    const unsigned char *p = (const unsigned char *)src;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return v;
}
static inline uint32_t pod_key_get_u32(const void *src)
{
    const unsigned char *p = (const unsigned char *)src;
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline int64_t pod_key_get_i64(const void *src)
{
    return (int64_t)(pod_key_get_u64(src) ^ (1ull << 63));
}

#ifdef __cplusplus
}
#endif
#endif
