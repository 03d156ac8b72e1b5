/* The record store: the memory that a transaction's shared records live in,
 * behind one small table of operations chosen once per server. Concurrency
 * control above it (src/txn/cc.h) names records by location, never by
 * pointer, and touches them only through these operations, so that the
 * same protocol runs over memory it can load from (the CXL region, an
 * in-process array) and over memory it reaches with one-sided RDMA READ /
 * WRITE / CAS / FAA (a memory node).
 *
 * A record has the layout of cxl/record.h: an 8-byte record word (the 2PL
 * lock bits and flags of REC_*; changed only with word_cas / word_faa) and a
 * row: a header (is-valid, epoch-version) and the table's tuple. An index per
 * table maps a key (key_size bytes, compared with memcmp) to the location of
 * its record.
 *
 * Every worker of a database uses its store at once: the operations are
 * thread-safe. They are synchronous: when one returns, it is done and
 * visible to every other user of the store. `batch` posts several at once and returns
 * when all are done: a store over RDMA rings one doorbell for them; one over
 * loads and stores just runs them in order. Word operations are atomic and
 * ordered (a successful CAS acquires, an FAA releases): a row written under
 * a lock and the lock's release reach the next holder together. */
#ifndef PODDB_STORE_RECORD_STORE_H
#define PODDB_STORE_RECORD_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* Where a record is (backend-defined: an offset in a region or in a memory
 * node's pool). 0 is no record. */
typedef uint64_t rs_loc;

enum rs_status {
    RS_OK = 0,
    RS_MISSING = 1,   /* no such key (lookup, remove), no neighbour (end of the table) */
    RS_EXISTS = 2,    /* index_insert of a key that is present */
    RS_NOMEM = -1,    /* the store is full or out of memory */
};

/* The row's header as the protocols see it (cxl_swcc_row's fields). */
struct rs_row_head {
    uint32_t valid;          /* 1: committed and present */
    uint64_t epoch_version;  /* epoch << 32 | version */
};

struct rs_table_def {
    uint32_t id;             /* the table's id (pod_table.id): 0.. */
    uint32_t key_size, tuple_size;
    uint64_t rows_hint;      /* rows it is expected to hold (0: not known): a
                                hash index is sized for it; never a limit */
};

/* What a store has sent to its memory since it opened: operations by kind
 * and round trips (waits for a batch to complete), over every user of this
 * handle. */
struct rs_counters {
    uint64_t reads, writes, cas, faa, round_trips;
};

/* A user of a store shared by several processes (a compute node): its
 * slot and incarnation, which a protocol writes into the lock words it
 * takes, and its undo logs, nlogs of log_bytes each in one record of its
 * own (named by location, read and written with row_read / row_write as
 * raw bytes: head NULL; log i is the tuple's bytes i * log_bytes ..
 * (i + 1) * log_bytes - 1), one per worker so that its transactions in
 * flight side by side each have one; only it writes them while it lives. */
struct rs_member {
    uint32_t slot;            /* 1..RS_MAX_MEMBERS-1 */
    uint32_t incarnation;     /* > 0; a later start of the slot has a later one */
    rs_loc log;
    uint32_t log_bytes;       /* of each log */
    uint32_t nlogs;
};
#define RS_MAX_MEMBERS 64u

/* What owner_check found of the owner of a lock (slot, incarnation). */
enum rs_owner {
    RS_OWNER_LIVE,     /* it runs, or is being recovered: the lock is held */
    RS_OWNER_STALE,    /* it was recovered: its locks are left over, anyone may clear them */
    RS_OWNER_RECOVER,  /* it died and the caller now recovers it (*dead): roll its undo
                          log back or forward, then owner_recovered */
};

/* walk's visitor: false stops the walk. */
typedef bool (*rs_walk_fn)(void *arg, const void *key, rs_loc loc);

/* One operation of a batch. */
enum rs_op_kind {
    RS_OP_READ,
    RS_OP_WRITE,
    RS_OP_CAS,
    RS_OP_FAA,
    /* no operation of its own (no loc): when the batch returns, every WRITE
     * of it is placed in its memory (not only sent), on every memory node */
    RS_OP_SYNC,
};
struct rs_op {
    enum rs_op_kind kind;
    rs_loc loc;
    /* READ / WRITE: bytes off..off+len-1 of the tuple, and the header (NULL:
     * READ does not read it, WRITE leaves it as it is). A WRITE places the
     * tuple's bytes before the header, a READ reads the word (when word is
     * not NULL), the header and the tuple in this order, which a protocol
     * that reads without a lock relies on (a writer's new version is seen
     * only with its whole tuple; ford.c). */
    struct rs_row_head *head;
    /* READ: the word too (when not NULL). WRITE: with word not NULL, only
     * the record word is written, to *word (8 bytes at once): how the
     * holder of an exclusive lock that nobody else changes may release it
     * in the same run as its other WRITEs. */
    uint64_t *word;
    void *buf;
    uint32_t off, len;
    /* CAS: expected (updated with the value found) and desired; FAA: add;
     * both leave the word's old value in old, CAS its success in ok */
    uint64_t expected, desired, add, old;
    bool ok;
};

#define RS_DIR_NAME_MAX 112 /* a message address in the members' directory */

struct record_store;

struct rs_ops {
    const char *name;
    /* neighbour works (an ordered index): scans and next-key locking. A
     * store with a hash index only serves point operations. */
    bool ordered;
    /* A table's records and index; before any other operation on it. Every
     * user of the store that adds the same table gets the same table (a
     * store shared by several processes checks that they agree). */
    int (*table_add)(struct record_store *s, const struct rs_table_def *def, pod_err *err);
    /* The table's sentinel: a record in no index entry, the same for every
     * user of the store, whose lock stands for the gap after the table's
     * last key (next-key locking). */
    rs_loc (*sentinel)(struct record_store *s, uint32_t table);

    /* ---- index: key -> location ---- */
    int (*lookup)(struct record_store *s, uint32_t table, const void *key, rs_loc *loc);
    /* lookup of n keys (keys: n of the table's key_size bytes, one after the
     * other) at once: locs[i] the i-th key's location, 0 when missing. NULL
     * when the store has nothing faster than n lookups. RS_OK, or RS_NOMEM. */
    int (*lookup_many)(struct record_store *s, uint32_t table, const void *keys, uint32_t n,
                       rs_loc *locs);
    /* The entry after key (inclusive: at or after; key NULL: the first) or,
     * backward, before it (key NULL: the last): its key to key_out (may be
     * NULL) and location. RS_MISSING at the table's end. */
    int (*neighbour)(struct record_store *s, uint32_t table, const void *key, bool inclusive,
                     bool backward, void *key_out, rs_loc *loc);
    int (*index_insert)(struct record_store *s, uint32_t table, const void *key, rs_loc loc);
    int (*index_remove)(struct record_store *s, uint32_t table, const void *key);
    /* Every entry of the table's index, in no particular order, until fn
     * returns false: what a store without an ordered index offers for
     * scans (the caller filters and sorts). An entry present for the whole
     * walk is visited exactly once (entries never move); one inserted or
     * removed meanwhile may or may not be. RS_OK, or RS_NOMEM. */
    int (*walk)(struct record_store *s, uint32_t table, rs_walk_fn fn, void *arg);

    /* ---- the record word ---- */
    uint64_t (*word_read)(struct record_store *s, rs_loc loc);
    /* True if *expected was the word and it is now desired; else false with
     * the word found in *expected. */
    bool (*word_cas)(struct record_store *s, rs_loc loc, uint64_t *expected, uint64_t desired);
    /* Add (modulo 2^64), returning the old word. */
    uint64_t (*word_faa)(struct record_store *s, rs_loc loc, uint64_t add);

    /* ---- the row ---- */
    /* head (may be NULL) and tuple bytes off..off+len-1 to buf */
    void (*row_read)(struct record_store *s, rs_loc loc, struct rs_row_head *head, void *buf,
                     uint32_t off, uint32_t len);
    /* head (NULL: kept) and bytes off..off+len-1 of the tuple from buf */
    void (*row_write)(struct record_store *s, rs_loc loc, const struct rs_row_head *head,
                      const void *buf, uint32_t off, uint32_t len);
    /* A record of the table for key (table's key_size bytes; it may place
     * the record: the dm store puts it on the key's memory node): word 0,
     * row invalid, tuple zero. */
    int (*alloc)(struct record_store *s, uint32_t table, const void *key, rs_loc *loc);
    /* Give back a record that no index entry names any more, once no
     * transaction can still reach it (the backend's reclamation). */
    void (*free)(struct record_store *s, uint32_t table, rs_loc loc);

    /* ---- several operations that complete together ----
     * The ops on one record take effect in their order. A release (a WRITE
     * of the word alone, an FAA) takes effect only once every op before
     * the batch's first release is placed, on every memory node: a
     * commit's last write (ford's undo log marked done) comes before any
     * of its locks is seen free. */
    void (*batch)(struct record_store *s, struct rs_op *ops, uint32_t n);

    /* A handle of the store for one user (a worker), which it uses alone:
     * the same records, its own connection to the memory and its own
     * scratch, so that its operations never wait for another user's (and
     * one in flight may leave the thread to another user: lanes). The
     * store's other operations work on it as on the store; it lives until
     * the store is destroyed. NULL when the store serves every user as
     * well by itself. */
    struct record_store *(*attach)(struct record_store *s, pod_err *err);

    /* ---- compute nodes sharing the store (NULL: the store has one user) ---- */
    /* Join as slot (1..RS_MAX_MEMBERS-1), with nlogs undo logs of
     * log_bytes: *me. When the slot's previous incarnation died without
     * being recovered, *prev is it (prev->slot 0 otherwise; its logs may be
     * fewer or smaller) and the caller must recover it and call
     * owner_recovered(prev) before it takes a lock. */
    int (*member_join)(struct record_store *s, uint32_t slot, uint32_t log_bytes, uint32_t nlogs,
                       struct rs_member *me, struct rs_member *prev, pod_err *err);
    /* The owner (slot, incarnation) of a lock: see enum rs_owner; on
     * RS_OWNER_RECOVER, *dead is it, claimed by this caller. */
    enum rs_owner (*owner_check)(struct record_store *s, uint32_t slot, uint32_t incarnation,
                                 struct rs_member *dead);
    /* dead (from owner_check or member_join) has been recovered: its locks
     * are stale from now on. */
    void (*owner_recovered)(struct record_store *s, const struct rs_member *dead);
    /* The members' message addresses (Lotus's lock services): the fabric
     * provider they use (NULL: none, the members share one process), and
     * a directory of one address per slot. dir_publish sets this member's
     * (slot's) entry, with its incarnation; dir_lookup reads slot's: 1
     * with the address in name (*len bytes, at most RS_DIR_NAME_MAX), the
     * incarnation that wrote it and whether that run still holds its
     * connection (false: it died, or stopped); 0 when the slot has none. */
    const char *(*msg_provider)(struct record_store *s);
    int (*dir_publish)(struct record_store *s, uint32_t slot, const void *name, size_t len,
                       pod_err *err);
    int (*dir_lookup)(struct record_store *s, uint32_t slot, void *name, size_t *len,
                      uint32_t *incarnation, bool *connected);

    /* The store's counters; NULL when it keeps none (memory it reaches
     * with loads and stores has no operations worth counting). */
    void (*counters)(struct record_store *s, struct rs_counters *out);

    void (*destroy)(struct record_store *s);
};

/* What every backend's instance starts with. */
struct record_store {
    const struct rs_ops *ops;
};

/* The batch of a store that completes each operation when it is posted. */
void rs_batch_in_order(struct record_store *s, struct rs_op *ops, uint32_t n);

/* ---- the in-process array store (src/store/array_store.c) ----
 * Records in memory of this process, in the layout of cxl/record.h (the word
 * beside its row), indexed by a B+-tree per table: the reference backend
 * that a protocol is first run on, and what unit tests use in place of a
 * region or a memory node. Records are kept until the store is destroyed
 * (free only counts them): a transaction that still holds a location it
 * found may always look at it. */
struct record_store *rs_array_new(pod_err *err);

#endif
