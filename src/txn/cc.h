/* Concurrency control: one table of operations per protocol, chosen once per
 * database (pod_db.cc). The stored-procedure API of include/poddb/proc.h
 * (pod_get, pod_put, pod_scan, ...) and the worker's begin / commit / abort
 * (txn.h) call the protocol through it (src/txn/cc.c), so a procedure cannot
 * tell which protocol runs it. Protocols:
 *   tigon-2pl  strict 2PL NO_WAIT with next-key locking on this host's rows
 *              and on other hosts' tuples in CXL memory (txn.c; the CXL pod)
 *   rs-2pl     the same rules over any record store (rs2pl.c,
 *              src/store/record_store.h): records named by location and
 *              reached only through the store's operations
 *   ford       FORD-style over a record store (ford.c): writes locked,
 *              reads validated at commit, an undo log per compute node so
 *              that one that dies leaves nothing locked or half-applied
 *   motor      Motor-style MVCC (ford.c): ford over records that keep
 *              several versions, read from a snapshot without validation
 *
 * Every protocol's transaction starts with a pointer to its ops (struct
 * cc_txn_head): that is how cc.c finds the protocol of a pod_txn. */
#ifndef PODDB_TXN_CC_H
#define PODDB_TXN_CC_H

#include <stdbool.h>
#include <stdint.h>

#include "db/types.h"

#define CC_MSG_LEN 256 /* a transaction's message buffer (pod_txn_fail) */

struct pod_worker;

struct cc_ops {
    const char *name;
    /* a worker's transaction object, reused for every call it runs */
    pod_txn *(*txn_new)(pod_db *db, struct pod_worker *w);
    void (*txn_free)(pod_txn *tx);
    void (*begin)(pod_txn *tx);
    /* Commit; an optimistic protocol may fail here instead (status then
     * says so, and the caller aborts). */
    void (*commit)(pod_txn *tx);
    void (*abort)(pod_txn *tx);
    /* POD_OK, or the sticky POD_CONFLICT of this attempt, and its cause */
    int (*status)(const pod_txn *tx);
    enum pod_abort_cause (*abort_cause)(const pod_txn *tx);
    char *(*message)(pod_txn *tx); /* CC_MSG_LEN bytes */
    /* The lock the last attempt's conflict met, in words (for a call that
     * gives up). May be NULL. */
    void (*describe_conflict)(const pod_txn *tx, char *out, size_t n);
    bool (*touched_tables)(const pod_txn *tx);
    pod_db *(*db)(pod_txn *tx);
    /* The database's workers start for the first time (its tables are
     * created). May be NULL. */
    int (*start)(pod_db *db, char *err, size_t errlen);
    /* A table was created (before any worker runs). May be NULL. */
    int (*table_added)(pod_db *db, pod_table *t, char *err, size_t errlen);
    /* The database goes, its workers gone: what start made (cc_state).
     * May be NULL. */
    void (*stop)(pod_db *db);
    /* The messages this database sent to other compute nodes so far
     * (lotus: lock requests and releases). NULL: it sends none. */
    uint64_t (*messages)(pod_db *db);

    /* proc.h's operations; update_range with whole is pod_update_ref */
    int (*get)(pod_txn *tx, pod_table *t, const void *key, void *out, bool for_update);
    int (*get_ref)(pod_txn *tx, pod_table *t, const void *key, const void **tuple);
    int (*update_range)(pod_txn *tx, pod_table *t, const void *key, bool whole, uint32_t off,
                        uint32_t len, void **tuple);
    int (*put)(pod_txn *tx, pod_table *t, const void *key, const void *tuple);
    int (*insert)(pod_txn *tx, pod_table *t, const void *key, const void *tuple);
    int (*remove)(pod_txn *tx, pod_table *t, const void *key);
    int (*prefetch)(pod_txn *tx, pod_table *t, const void *keys, uint32_t n);
    int (*scan)(pod_txn *tx, pod_table *t, const void *lo, const void *hi, uint32_t limit,
                unsigned flags, pod_scan_fn fn, void *arg);
};

/* The first member of every protocol's transaction. */
struct cc_txn_head {
    const struct cc_ops *cc;
};

static inline const struct cc_ops *cc_of(const pod_txn *tx)
{
    return ((const struct cc_txn_head *)(const void *)tx)->cc;
}

/* The argument checks every protocol makes (cc.c), after its sticky status:
 * POD_OK, or the status to return (the message set). */
int cc_check_key(pod_txn *tx, const pod_db *db, const pod_table *t, const void *key);
/* pod_update_range's bytes off..off+len-1 lie within the tuple (len > 0). */
int cc_check_range(pod_txn *tx, const pod_table *t, uint32_t off, uint32_t len);
/* pod_scan's range: its partition to *part; 1 for an empty range (nothing
 * to visit, nothing to lock), or a negative status. */
int cc_check_scan(pod_txn *tx, const pod_db *db, const pod_table *t, const void *lo,
                  const void *hi, uint32_t *part);

/* The record store a worker's transactions use: a handle of its own when
 * the store makes them (record_store.h, attach), so that workers do not
 * take turns on the store; the database's store otherwise (or when the
 * handle cannot be made: said in the log). */
struct record_store *cc_store_handle(pod_db *db, struct pod_worker *w);

/* The epoch-version of a tuple written in epoch (SiloR: the same epoch
 * again is version + 1, a new epoch version 0). */
uint64_t txn_next_epoch_version(uint64_t ev, uint64_t epoch);

extern const struct cc_ops cc_tigon_2pl; /* txn.c */
extern const struct cc_ops cc_rs_2pl;    /* rs2pl.c */
extern const struct cc_ops cc_ford;      /* ford.c */
extern const struct cc_ops cc_motor;     /* ford.c: ford over multi-versioned records */
extern const struct cc_ops cc_lotus;     /* ford.c: motor's records, locks in compute nodes' tables */

#endif
