/* Inside the transaction layer: the access set shared by txn.c (local rows)
 * and txn_remote.c (other hosts' tuples in CXL memory). */
#ifndef PODDB_TXN_TXN_INT_H
#define PODDB_TXN_TXN_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "cxl/record.h"
#include "db/types.h"
#include "pod/pod.h"
#include "storage/table.h"
#include "txn/cc.h"
#include "txn/leaf_memo.h"
#include "txn/txn.h"
#include "util/arena.h"

enum {
    HELD_NONE = 0,
    HELD_READ = 1,
    HELD_WRITE = 2,
};

enum {
    ACC_INSERTED = 1 << 0, /* this transaction created the row */
    ACC_UPDATED = 1 << 1,  /* local: undo holds the before-image; remote: copy was written */
    ACC_DELETED = 1 << 2,
    ACC_LOADED = 1 << 3,   /* remote: copy holds the tuple; local: copy holds the CXL tuple */
};

/* One row or record this transaction locked. A local row (row != NULL) is
 * this host's; its lock may live in its CXL record (in_cxl). A remote
 * record (rec != NULL) is another host's tuple in CXL memory: the
 * transaction works on a private copy and writes it back at commit. */
struct access {
    struct pod_row *row;
    cxl_record *rec;
    pod_table *table;
    uint32_t part;
    uint8_t held;
    uint8_t flags;
    bool in_cxl;         /* local: the lock was taken in the row's CXL record */
    void *undo;          /* local: before-image of the tuple's bytes ulo..uhi-1 */
    uint32_t ulo, uhi;   /* ACC_UPDATED: the only bytes written (local: saved in undo;
                          * remote: written in copy) */
    void *copy;          /* remote: the tuple; local: a CXL-only tuple read under a shared lock */
    const void *key;     /* a copy: for the log, the index, the CXL index; NULL: a sentinel */
    uint64_t ev;         /* remote: the epoch-version read */
};

/* Another host's tuple: bytes lo..hi-1 of the copy are written (the range
 * the commit logs and publishes grows to cover them). */
static inline void txn_remote_written(struct access *a, uint32_t lo, uint32_t hi)
{
    if (!(a->flags & ACC_UPDATED)) {
        a->ulo = lo, a->uhi = hi;
    } else {
        if (lo < a->ulo) a->ulo = lo;
        if (hi > a->uhi) a->uhi = hi;
    }
    a->flags |= ACC_UPDATED;
}

static inline const void *access_id(const struct access *a)
{
    return a->row ? (const void *)a->row : (const void *)a->rec;
}


struct pod_txn {
    struct cc_txn_head head; /* first: the protocol's ops (cc.h) */
    pod_db *db;
    struct pod_worker *w;
    struct access *acc;
    uint32_t nacc, cap;
    /* Open-addressing index id -> access, built once a transaction has more
     * than LINEAR_MAX accesses (small ones search linearly: faster). */
    uint32_t *hidx;
    uint32_t hcap;          /* slots allocated: a power of two, or 0 */
    uint32_t hsize;         /* slots in use (a power of two <= hcap): grows with nacc */
    bool hvalid;
    /* A Bloom filter (one bit per id) of the ids added since txn_begin:
     * most lookups are of rows not yet touched, and a clear bit answers
     * them without a search. Removals leave their bit (a false "maybe"). */
    uint64_t seen[16];
    struct arena undo;      /* before-images (txn_undo_alloc) */
    int status;
    enum pod_abort_cause cause;
    uint64_t epoch;
    bool active;
    bool touched;           /* an operation on a table was asked for (txn_touched_tables) */
    uint32_t ops;           /* local row operations, to serve the inbox every few */
    char msg[256];
    struct leaf_memo memo;  /* leaves pod_prefetch and inserts reached (leaf_memo.h) */
    /* The local rows of the last pod_prefetch batch, until an access to a
     * row in CXL memory starts fetching their records (prefetch_records). */
    struct pod_row *pf_rows[BT_PREFETCH_MAX];
    uint32_t pf_n;
    /* The lock this attempt's conflict met (txn_note_lock; table NULL: none
     * noted), as it was then: what a call that gives up says it kept meeting. */
    struct lock_met {
        pod_table *t;
        uint32_t part;
        bool has_key;
        bool has_word;          /* a local row: its word */
        uint32_t word;
        cxl_off rec_off;        /* the record the lock lives in, or CXL_NULL */
        uint64_t rec;           /* its word */
        unsigned char key[BT_MAX_KEY_WIDTH];
    } met;
};

#define OP_RESTARTS 1000 /* bound on "start this operation over" loops */

/* Other hosts wait for this host's answers while its worker runs a long
 * transaction (TPC-C's StockLevel touches hundreds of rows): serve a few
 * inbox messages every SERVE_EVERY local row operations. Serving inside a
 * transaction is what a worker already does while it waits for a reply of
 * its own; a request for a row this transaction holds gets "busy". */
#define SERVE_EVERY 16
static inline void txn_serve_inbox(struct pod_txn *tx)
{
    if (tx->db->pod && (++tx->ops & (SERVE_EVERY - 1)) == 0) pod_serve(tx->w, 4);
}

int txn_conflict(struct pod_txn *tx, enum pod_abort_cause cause);
/* Note the lock a conflict met: key's (NULL: the partition's sentinel) local
 * row (NULL for another host's tuple) and the record it lives in (NULL: the
 * row's word; for a local row in CXL memory, NULL finds it by the shortcut).
 * Only on a conflict: a copy of the key and of the lock words. */
void txn_note_lock(struct pod_txn *tx, pod_table *t, uint32_t part, const void *key,
                   const struct pod_row *row, const cxl_record *rec);
void *txn_undo_alloc(struct pod_txn *tx, size_t n);
struct access *txn_find_access(struct pod_txn *tx, const void *id);
/* A new access with a copy of key (NULL for a sentinel); NULL (status set
 * to POD_E_NOMEM) when out of memory. The caller still holds the lock. */
struct access *txn_add_access(struct pod_txn *tx, struct pod_row *row, cxl_record *rec,
                              pod_table *t, uint32_t part, uint8_t held, const void *key);
/* Give back the newest access if this operation just took it for nothing. */
void txn_unlock_fresh(struct pod_txn *tx, struct access *a);

/* ---- txn_remote.c: partitions owned by another host ---- */

static inline bool txn_is_remote(const struct pod_txn *tx, const pod_table *t, uint32_t part)
{
    return tx->db->pod && t->parts[part].owner != (uint32_t)tx->db->opt.host_id;
}

enum remote_find { REMOTE_FOUND, REMOTE_MISSING };

/* Find and lock key's tuple in another host's partition (moving it into CXL
 * memory if needed); on MISSING with phantom protection the gap is locked.
 * POD_OK with *res, or a negative status. */
int remote_find(struct pod_txn *tx, pod_table *t, uint32_t part, const void *key, uint8_t want,
                enum remote_find *res, struct access **acc);
/* pod_prefetch's part for keys of other hosts' partitions (parts[i] of
 * keys[i], at most BT_PREFETCH_MAX): their CXL index paths and records,
 * where they are in CXL memory. A hint: never fails the transaction. */
void remote_prefetch(struct pod_txn *tx, pod_table *t, const uint32_t *parts,
                     const void *const *keys, unsigned n);
int remote_insert(struct pod_txn *tx, pod_table *t, uint32_t part, const void *key,
                  const void *tuple);
int remote_scan(struct pod_txn *tx, pod_table *t, uint32_t part, const void *lo, const void *hi,
                uint32_t limit, bool reverse, uint8_t want, pod_scan_fn fn, void *arg);
/* Commit (publish the copy, unlink a delete) or abort one remote access, and
 * release its lock. */
void remote_commit(struct pod_txn *tx, struct access *a, uint64_t epoch);
void remote_abort(struct pod_txn *tx, struct access *a);
void remote_release(struct pod_txn *tx, struct access *a);

#endif
