/* YCSB as in Tigon (§4.1) as PodDB stored procedures: schema, loader, the
 * transaction procedure, a Zipfian key generator and the input generator.
 * docs/ycsb.md describes the design.
 *
 * One table "usertable": key 8 bytes (big-endian id 0..tuples-1), tuple ten
 * 100-byte columns (1000 bytes), range partitioned over nparts partitions:
 * partition(id) = id * nparts / tuples. A transaction is YCSB_OPS operations,
 * each a read (pod_get) or a read-modify-write of one column
 * (pod_get_for_update + pod_put). The first 8 bytes of every column hold a
 * counter (int64, host order) that each committed RMW of that column
 * increments, so the sum of all counters equals the number of committed RMW
 * operations (checked by the tests through ycsb.count). */
#ifndef PODDB_WORKLOADS_YCSB_H
#define PODDB_WORKLOADS_YCSB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "poddb/proc.h"

#ifdef __cplusplus
extern "C" {
#endif

#define YCSB_COLS 10
#define YCSB_COL_SIZE 100
#define YCSB_TUPLE_SIZE (YCSB_COLS * YCSB_COL_SIZE)
#define YCSB_KEY_SIZE 8
#define YCSB_OPS 10          /* operations per transaction (Tigon) */
#define YCSB_MAX_OPS 64      /* what ycsb.txn accepts */

struct ycsb_config {
    uint64_t tuples;          /* >= nparts * YCSB_OPS */
    uint32_t nparts;          /* >= 1 */
    uint32_t read_pct;        /* share of reads among the operations: 50, 95, ... */
    double theta;             /* Zipfian skew, 0 <= theta < 1 (0: uniform) */
    double multi_partition;   /* 0..1: share of multi-partition transactions */
    bool scramble;            /* hash Zipfian ranks over the partition (YCSB's
                               * "scrambled zipfian"); off: rank r is the r-th id */
    uint32_t hosts;           /* partition p lives on host p % hosts: a multi-
                               * partition transaction's other partition is
                               * on another host (0 or 1: any other one) */
    uint32_t load_batch;      /* tuples per loading transaction (default 100) */
    uint64_t seed;            /* loader data seed */
};

/* tuples, nparts; 50% reads, theta 0.99, 10% multi-partition, no scramble. */
void ycsb_config_default(struct ycsb_config *c, uint64_t tuples, uint32_t nparts);

struct ycsb_tuple {
    unsigned char col[YCSB_COLS][YCSB_COL_SIZE];
};

static inline int64_t ycsb_col_counter(const struct ycsb_tuple *t, int c)
{
    int64_t v;
    memcpy(&v, t->col[c], sizeof v);
    return v;
}

/* Partition of id and the id range [first, end) of partition p. */
uint32_t ycsb_part_of(uint64_t id, uint64_t tuples, uint32_t nparts);
uint64_t ycsb_part_first(uint32_t p, uint64_t tuples, uint32_t nparts);
/* The table's partition function (ctx: the struct ycsb). */
uint32_t ycsb_partition(const void *key, uint32_t nparts, void *ctx);

/* ---- tables and procedures -------------------------------------------------------- */

struct ycsb {
    struct ycsb_config cfg;
    pod_table *table;
    int proc_txn;             /* "ycsb.txn" */
    int proc_load;            /* "ycsb.load" */
    int proc_count;           /* "ycsb.count" */
};

/* Procedure arguments:
 * ycsb.txn   (ops: bytes, n packed struct ycsb_op in host order; seed: i64
 *             for the written values) result: number of RMW ops done, then
 *             a checksum of the bytes read (i64)
 * ycsb.load  (from, to) inserts ids from..to-1 (i64)
 * ycsb.count (partition) read-only scan: result rows, sum of all column
 *             counters */
struct ycsb_op {
    uint64_t id;
    uint32_t write;           /* 0: read, 1: read-modify-write of column col */
    uint32_t col;
};

/* Create the table (if absent) and register the procedures. 0, or -1 and err. */
int ycsb_register(pod_db *db, const struct ycsb_config *cfg, char *err, size_t errlen);
struct ycsb *ycsb_get(pod_db *db);
/* Release the state (before pod_db_free; the procedures must not run afterwards). */
void ycsb_free(pod_db *db);

/* Populate the table (no workers running): one worker thread per range of
 * partitions (pod_workers_start), cfg.load_batch tuples per transaction.
 * progress (may be NULL) is called serialised with the tuples loaded so far. */
typedef void (*ycsb_progress_fn)(uint64_t rows_loaded, void *arg);
int ycsb_load(pod_db *db, ycsb_progress_fn progress, void *progress_arg, char *err,
              size_t errlen);

/* Rows and the sum of all column counters over every partition, as read-only
 * transactions through the admin worker (no workers may run). 0 or -1. */
int ycsb_count(pod_db *db, uint64_t *rows, int64_t *counter_sum, char *err, size_t errlen);
/* The same for partition p only, through wk (a worker on the calling thread,
 * outside any transaction; NULL: the admin worker). */
struct pod_worker;
int ycsb_count_partition(pod_db *db, struct pod_worker *wk, uint32_t p, uint64_t *rows,
                         int64_t *counter_sum, char *err, size_t errlen);

/* ---- Zipfian generator (Gray et al., SIGMOD 1994, as in YCSB) ------------------------ */

struct ycsb_zipf {
    uint64_t n;
    double theta, alpha, zetan, zeta2, eta, half_pow_theta;
};

/* zeta(n, theta) = sum_{i=1..n} 1 / i^theta */
double ycsb_zeta(uint64_t n, double theta);
/* Precomputes zeta(n, theta) (O(n), once). n >= 1, 0 <= theta < 1. */
void ycsb_zipf_init(struct ycsb_zipf *z, uint64_t n, double theta);
/* A rank in 0..n-1; rank 0 is the most frequent. */
uint64_t ycsb_zipf_next(const struct ycsb_zipf *z, uint64_t *rng);

/* ---- input generation -------------------------------------------------------------------- */

uint64_t ycsb_rand(uint64_t *rng);
/* Uniform double in [0, 1). */
double ycsb_rand_unit(uint64_t *rng);

struct ycsb_gen {
    struct ycsb_config cfg;
    struct ycsb_zipf zipf;    /* over the largest partition's size */
};

/* One transaction's inputs, ready for pod_call (args point into the struct). */
struct ycsb_call {
    int nargs;
    pod_value args[2];
    struct ycsb_op ops[YCSB_OPS];
    uint32_t nwrites;
    bool multi;               /* half of the ops go to one other partition */
    uint32_t other_part;
};

/* O(tuples / nparts): computes zeta once; generators may be copied. */
void ycsb_gen_init(struct ycsb_gen *g, const struct ycsb_config *cfg);
/* The next transaction of a terminal of home partition home. */
void ycsb_next_call(const struct ycsb_gen *g, uint64_t *rng, uint32_t home, struct ycsb_call *out);

#ifdef __cplusplus
}
#endif
#endif
