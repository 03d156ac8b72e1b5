/* ford: the protocol of FORD (Zhang et al., FAST '22), the baseline of the
 * disaggregated-memory papers, over a record store (record_store.h) that
 * several compute nodes share.
 *
 *  1. A record read for reading only is read without a lock: one READ of
 *     its word, header and tuple (in this order: record_store.h). A word
 *     that is locked fails the read (NO_WAIT); the header's version is kept.
 *  2. A record read for writing (or written, inserted, deleted) is locked at
 *     once, its lock word CASed 0 -> this compute node's owner word and the
 *     row read behind it in one batch. A lock that is taken fails the
 *     operation (NO_WAIT).
 *  3. Commit: (a) every record read without a lock is read again (word and
 *     header): unlocked and the same version, or the transaction fails
 *     validation; (b) the undo log, the before-images of every locked
 *     record the transaction changes, is written to the compute node's log
 *     and placed, in the same batch as (a) (a failed validation's abort
 *     marks it done before releasing anything); (c) the new rows are written (tuple, then header with the
 *     next version) and placed on every memory node; (d) the log is marked
 *     done and (e) the locks are released (WRITEs of 0 in the same batch,
 *     which the store does not release before the mark is placed). Deleted records leave the index
 *     after that and keep a word that says so for good (REMOVED).
 *  Serializable: at validation every record written is locked and every
 *  record read is unchanged since it was read, so the transaction takes
 *  effect at that instant, as under 2PL with all its locks held then. A
 *  lookup of a missing key locks nothing (no phantom protection: the store
 *  is a hash; the database refuses phantom_protection with ford).
 *
 * A compute node that dies (record_store.h, "compute nodes sharing the
 * store"): the owner word of a lock names its slot and incarnation. Who
 * meets a lock whose owner died recovers that owner first (owner_check):
 * its log, when not marked done, names records it was writing, each still
 * locked by it: their before-images are written back, with a version past
 * any the dead one wrote, and their locks released (rolled back: the
 * transaction was never acknowledged, as replies go out after commit
 * returns). A log marked done means the rows were all placed: nothing to
 * undo. Then the owner's incarnation is stale, and any lock it still holds
 * (taken while executing, or not yet released after a done log) is taken
 * over by the next to meet it: a valid row is simply unlocked; an invalid
 * one (an insert that never committed, or a committed delete) leaves the
 * index. A compute node that restarts recovers its own previous run before
 * its workers start.
 *
 * motor (Motor, Zhang et al., OSDI '24, as the DM papers describe it) is the
 * same protocol over multi-versioned records, in this file as a mode of it
 * (struct ford_txn.nver): a record's tuple in the store is a consecutive
 * version table (CVT) of nver cells, each a header (commit timestamp,
 * valid, a checksum) and a whole tuple; the record's header holds the
 * newest committed cell's timestamp and valid. Timestamps come from a clock
 * record of the pod (its word; FAA takes a commit timestamp, a READ a start
 * timestamp). What changes from ford:
 *  - A read without a lock is a snapshot read: the cell with the largest
 *    timestamp at or before the transaction's start timestamp, whatever
 *    the lock word says. A cell marked INVISIBLE (a commit in progress) is
 *    waited for; a checksum that does not match (a torn read: the fabric
 *    does not place or read a record's bytes in any order) is read again.
 *  - A transaction that locked nothing, found every key it looked for and
 *    scanned nothing commits without validation: its reads are one
 *    snapshot. (A missing key or a scan is validated as under ford: a key
 *    deleted after the snapshot has left the index.)
 *  - Commit: (a) validation as ford's and (b) a log of metadata only (which
 *    cell of which record; the older versions are the undo) and the new
 *    cells, written INVISIBLE into the oldest cell (never the newest
 *    committed one), all placed; (c) a commit timestamp (FAA); (d) each new
 *    cell's timestamp and the record's header, placed; (e) the log done and
 *    the locks released, as ford.
 *  Snapshot reads are consistent: a writer whose commit timestamp is at or
 *  before a reader's start placed its INVISIBLE cells before it took the
 *  timestamp, so before the reader took its own and read the record: the
 *  reader sees the cell, INVISIBLE (and waits) or visible. Recovery of a
 *  dead compute node's log rolls forward (a cell of it is visible, so it
 *  may have been read) or back (its cells marked GONE: lost to snapshots).
 *
 * The lock word (cxl/record.h's record word):
 *   0                                free
 *   W | owner slot << 55 | inc       locked by that compute node's incarnation (bits 0-31)
 *   DEAD | W                         REMOVED: out of the index; a lookup that finds it retries */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cxl/record.h"
#include "dm/lock_service.h"
#include "log/crc32c.h"
#include "storage/table.h"
#include "store/record_store.h"
#include "txn/access_map.h"
#include "txn/cc.h"
#include "txn/op_buf.h"
#include "txn/walk_scan.h"
#include "util/arena.h"
#include "util/crashpoint.h"
#include "util/lanes.h"
#include "util/log.h"

#define OP_RESTARTS 1000
#define LINEAR_ACCESSES 16u
#define LOG_CHUNK (32u << 10) /* the log is written in pieces of at most this */
#define DEFAULT_LOG_BYTES (1u << 20)

#define FW_LOCK REC_LOCK_W
#define FW_DEAD REC_LATCH
#define FW_OWNER_SHIFT REC_LOCK_R_SHIFT
#define FW_REMOVED (FW_DEAD | FW_LOCK)

static inline uint64_t owner_word(uint32_t slot, uint32_t inc)
{
    return FW_LOCK | (uint64_t)slot << FW_OWNER_SHIFT | inc;
}
static inline uint32_t word_slot(uint64_t w) { return (uint32_t)(w >> FW_OWNER_SHIFT) & 0x7f; }
static inline uint32_t word_inc(uint64_t w) { return (uint32_t)w; }

/* ---- the undo log (a record of the compute node's own: rs_member.log) ----
 * head, then n entries, each followed by its key and its before-image
 * bytes, each padded to 8. state says whether it is to be undone. */
#define ULOG_ACTIVE 0x4f444e55ull /* "UNDO" */
struct ulog_head {
    uint64_t state;          /* ULOG_ACTIVE << 32 | incarnation; 0: done */
    uint32_t n, bytes;       /* entries; bytes after the head */
    uint32_t crc, pad;       /* crc32c of those bytes */
};
struct ulog_entry {
    rs_loc loc;
    uint32_t table, flags;   /* F_* */
    uint32_t lo, hi;         /* the before-image: tuple bytes lo..hi-1 */
    uint32_t valid;          /* the header before */
    uint32_t key_size;       /* the key's bytes (before padding), which follow */
    uint64_t new_ev;         /* the version the transaction writes */
};

enum { A_READ = 1, A_WRITE = 2 };
enum {
    F_INSERTED = 1 << 0,
    F_UPDATED = 1 << 1,
    F_DELETED = 1 << 2,
    F_ABSENT = 1 << 3,       /* motor: read, and not in the snapshot */
};

/* ---- motor's records: a CVT of nver cells, each a header and a tuple ----
 * A cell's ts: EMPTY (never written), GONE (its version is lost: a commit
 * that was rolled back wrote it), INVISIBLE (a commit in progress), or the
 * commit timestamp (>= MV_TS_FIRST) of the version it holds. The checksum
 * covers ts, valid and the tuple: a cell read while it changes fails it. */
#define MV_EMPTY 0ull
#define MV_GONE 1ull
#define MV_TS_FIRST 2ull
#define MV_INVISIBLE UINT64_MAX
#define MV_CLOCK_TABLE POD_MAX_TABLES /* the clock record's table: no table of the database's */
#define MV_READ_WAITS 200             /* re-reads of a cell INVISIBLE or torn, then the lock asked */
struct mv_cell {
    uint64_t ts;
    uint32_t valid, crc;
};

struct access {
    rs_loc loc;
    pod_table *table;
    uint8_t mode, flags;
    uint32_t ulo, uhi;
    unsigned char *copy;     /* the tuple */
    unsigned char *before;   /* A_WRITE, not inserted: the tuple as locked (the undo log's) */
    unsigned char *key;
    struct rs_row_head head; /* as read, or as locked */
    uint64_t ev_read;        /* the version first read (validation, upgrade); motor: its ts */
    uint32_t valid_read;
    uint32_t wcell;          /* motor, A_WRITE: the cell the commit writes */
};

/* A key's location found ahead (pod_prefetch), tried first by find. */
struct hint {
    const pod_table *table;
    const unsigned char *key;
    rs_loc loc;
};

struct ford_txn {
    struct cc_txn_head head;
    pod_db *db;
    struct pod_worker *w;
    struct record_store *rs;
    uint64_t mine;           /* this compute node's owner word */
    struct access *acc;
    uint32_t nacc, cap;
    struct access_map map;
    struct arena mem;
    struct op_buf ops;
    unsigned char *log;      /* the undo log being built */
    uint32_t log_cap;
    struct hint *hints;      /* in mem */
    uint32_t nhints, hints_cap;
    int status;
    enum pod_abort_cause cause;
    bool touched;
    bool log_active;         /* the log holds this transaction, not marked done */
    /* motor (nver > 0: the versions of a record; 0 under ford) */
    uint32_t nver;
    uint64_t t_start;        /* the snapshot's timestamp; 0 until the first read */
    /* a key looked for was not there, or a scan walked the index as it is
     * now (a key deleted since the snapshot is gone from it): what it read
     * is no snapshot, commit validates */
    bool missed;
    bool cells_written;      /* the commit's INVISIBLE cells are out: abort marks them GONE */
    bool too_old;            /* the conflict: the snapshot's version was overwritten */
    unsigned char *cvt;      /* a record's CVT as read */
    uint32_t cvt_cap;
    /* lotus (lotus != NULL): the locks asked for, held until commit or
     * abort gives them back, in the compute nodes' lock tables */
    struct lotus_db *lotus;
    struct lock_client *lk;  /* this worker's requests to the other compute nodes */
    struct lotus_lock *locks;
    uint32_t nlocks, locks_cap;
    struct access_map lockmap; /* hash -> index in locks, past LINEAR_ACCESSES of them */
    uint64_t holder;         /* LT_HOLDER of this attempt */
    uint64_t attempts;
    uint32_t unreachable;    /* the conflict: this compute node's lock service did not answer */
    uint64_t conflict_word;
    char msg[CC_MSG_LEN];
};

static inline struct ford_txn *X(pod_txn *tx) { return (struct ford_txn *)(void *)tx; }
static inline const struct ford_txn *CX(const pod_txn *tx)
{
    return (const struct ford_txn *)(const void *)tx;
}
static inline const struct rs_ops *OPS(const struct ford_txn *x) { return x->rs->ops; }
/* Where this worker's undo log starts in the compute node's log record:
 * each worker has its own (the admin worker the last). */
static inline uint32_t log_base(const struct ford_txn *x)
{
    return (uint32_t)x->w->id * x->db->member.log_bytes;
}

static int conflict(struct ford_txn *x, enum pod_abort_cause cause, uint64_t word)
{
    if (x->status == POD_OK) {
        x->status = POD_CONFLICT;
        x->cause = cause;
        x->conflict_word = word;
    }
    return POD_CONFLICT;
}

static int nomem(struct ford_txn *x, const char *what)
{
    x->status = POD_E_NOMEM;
    return pod_txn_fail((pod_txn *)(void *)x, POD_E_NOMEM, "out of memory for %s", what);
}

/* Give back the record word's lock (ford, motor; under lotus the word is
 * not a lock). */
static void unlock_word(struct ford_txn *x, rs_loc loc)
{
    if (x->mine) OPS(x)->word_faa(x->rs, loc, (uint64_t)0 - x->mine);
}

/* ---- the access set ------------------------------------------------------------ */

static struct access *find_access(struct ford_txn *x, rs_loc loc)
{
    if (x->nacc <= LINEAR_ACCESSES) {
        for (uint32_t i = x->nacc; i-- > 0;)
            if (x->acc[i].loc == loc) return &x->acc[i];
        return NULL;
    }
    int64_t i = access_map_find(&x->map, loc);
    return i < 0 ? NULL : &x->acc[i];
}

static struct access *add_access(struct ford_txn *x, rs_loc loc, pod_table *t, uint8_t mode,
                                 const void *key)
{
    if (x->nacc == x->cap) {
        uint32_t cap = x->cap ? x->cap * 2 : 64;
        struct access *a = realloc(x->acc, cap * sizeof *a);
        if (!a) return NULL;
        x->acc = a;
        x->cap = cap;
    }
    unsigned char *copy = arena_alloc(&x->mem, t->tuple_size ? t->tuple_size : 1);
    unsigned char *k = arena_alloc(&x->mem, t->key_size);
    if (!copy || !k) return NULL;
    memcpy(k, key, t->key_size);
    if (x->nacc >= LINEAR_ACCESSES) { /* the map covers every access from here on */
        if (!x->map.n)
            for (uint32_t i = 0; i < x->nacc; i++)
                if (!access_map_put(&x->map, x->acc[i].loc, i)) return NULL;
        if (!access_map_put(&x->map, loc, x->nacc)) return NULL;
    }
    struct access *a = &x->acc[x->nacc++];
    *a = (struct access){.loc = loc, .table = t, .mode = mode, .copy = copy, .key = k};
    return a;
}

/* ---- motor's versions --------------------------------------------------------------- */

static inline uint32_t mv_cell_bytes(const pod_table *t)
{
    return (uint32_t)sizeof(struct mv_cell) + ((t->tuple_size + 7) & ~7u);
}

static uint32_t mv_crc(uint64_t ts, uint32_t valid, const void *tuple, uint32_t n)
{
    unsigned char h[12];
    memcpy(h, &ts, 8);
    memcpy(h + 8, &valid, 4);
    return crc32c(crc32c(0, h, sizeof h), tuple, n);
}

static inline struct mv_cell mv_header(uint64_t ts, uint32_t valid, const void *tuple, uint32_t n)
{
    return (struct mv_cell){.ts = ts, .valid = valid, .crc = mv_crc(ts, valid, tuple, n)};
}

/* What a CVT holds: cells by kind (-1: none). */
struct mv_view {
    int newest, oldest;  /* the committed cells of the largest and smallest ts */
    int snap;            /* the committed cell of the largest ts at or before the snapshot's */
    int empty, gone, invisible;
    bool torn;           /* a cell's checksum failed */
};

static void mv_view(const unsigned char *cvt, uint32_t nver, const pod_table *t, uint64_t at,
                    struct mv_view *v)
{
    uint32_t cell = mv_cell_bytes(t);
    *v = (struct mv_view){-1, -1, -1, -1, -1, -1, false};
    uint64_t newest = 0, oldest = UINT64_MAX, snap = 0;
    for (uint32_t i = 0; i < nver; i++) {
        const unsigned char *c = cvt + (size_t)i * cell;
        struct mv_cell h;
        memcpy(&h, c, sizeof h);
        int *first = h.ts == MV_EMPTY ? &v->empty : h.ts == MV_GONE ? &v->gone
                     : h.ts == MV_INVISIBLE ? &v->invisible : NULL;
        if (first) {
            if (*first < 0) *first = (int)i;
            continue;
        }
        if (mv_crc(h.ts, h.valid, c + sizeof h, t->tuple_size) != h.crc) {
            v->torn = true;
            continue;
        }
        if (h.ts > newest) newest = h.ts, v->newest = (int)i;
        if (h.ts < oldest) oldest = h.ts, v->oldest = (int)i;
        if (h.ts <= at && h.ts > snap) snap = h.ts, v->snap = (int)i;
    }
}

/* The cell a commit writes, its lock held: an unused one, else the oldest
 * version (never the newest: a snapshot may need it). */
static int mv_write_cell(const struct mv_view *v)
{
    if (v->empty >= 0) return v->empty;
    if (v->gone >= 0) return v->gone;
    if (v->invisible >= 0) return v->invisible; /* left by a commit that never finished */
    return v->oldest != v->newest ? v->oldest : -1;
}

static bool mv_room(struct ford_txn *x, uint32_t bytes)
{
    if (bytes <= x->cvt_cap) return true;
    unsigned char *b = realloc(x->cvt, bytes);
    if (!b) return false;
    x->cvt = b;
    x->cvt_cap = bytes;
    return true;
}

/* a's record as read (x->cvt) by its lock holder: the newest version to the
 * copy, the cell to write. False when the CVT has no cell to write. */
static bool mv_locked(struct ford_txn *x, struct access *a)
{
    struct mv_view v;
    mv_view(x->cvt, x->nver, a->table, UINT64_MAX, &v);
    int w = mv_write_cell(&v);
    if (w < 0) return false;
    a->wcell = (uint32_t)w;
    if (v.newest >= 0)
        memcpy(a->copy, x->cvt + (size_t)v.newest * mv_cell_bytes(a->table) + sizeof(struct mv_cell),
               a->table->tuple_size);
    return true;
}

/* Mark GONE the cells of key's record that a commit left INVISIBLE (its lock
 * is held by the caller): what snapshots cannot read any more. */
static void mv_clear_invisible(struct record_store *rs, uint32_t nver, const pod_table *t,
                               rs_loc loc)
{
    uint32_t cell = mv_cell_bytes(t);
    for (uint32_t i = 0; i < nver; i++) {
        struct mv_cell h;
        rs->ops->row_read(rs, loc, NULL, &h, i * cell, sizeof h);
        if (h.ts != MV_INVISIBLE) continue;
        struct mv_cell gone = {.ts = MV_GONE};
        rs->ops->row_write(rs, loc, NULL, &gone, i * cell, sizeof gone);
    }
}

/* ---- recovery of a compute node that died ------------------------------------------ */

static pod_table *table_by_id(pod_db *db, uint32_t id)
{
    return id < db->ntables ? db->tables[id] : NULL;
}

/* The versions of a record under db's protocol: 0 under ford. */
static uint32_t db_versions(const pod_db *db)
{
    return db->cc == &cc_motor || db->cc == &cc_lotus ? db->opt.versions : 0;
}

/* What a record's word holds while compute node `owner` (its owner word)
 * has it locked: that word, or 0 under lotus (the lock is in a lock table). */
static inline uint64_t held_word(const pod_db *db, uint64_t owner)
{
    return db->cc == &cc_lotus ? 0 : owner;
}

/* The log entry at *at of buf: *e, its key and before-image; *at moves past it. */
static void log_entry(const unsigned char *buf, uint32_t *at, struct ulog_entry *e,
                      const unsigned char **key, const unsigned char **before)
{
    memcpy(e, buf + *at, sizeof *e);
    *at += sizeof *e;
    *key = buf + *at;
    *at += (e->key_size + 7) & ~7u;
    *before = buf + *at;
    *at += (e->hi - e->lo + 7) & ~7u;
}

/* motor: the n entries of a dead compute node's log (still locked by it,
 * theirs, or done with) rolled forward when one of its new cells is visible
 * (a reader may have seen the commit: its timestamp is in every cell then),
 * else back (the new cells GONE, the inserts out of the index). */
static uint32_t mv_undo(pod_db *db, struct record_store *rs, const unsigned char *buf, uint32_t n,
                        uint64_t theirs, uint64_t *forward)
{
    const struct rs_ops *o = rs->ops;
    uint32_t nver = db_versions(db);
    uint64_t ts = 0;
    for (uint32_t i = 0, at = 0; i < n && !ts; i++) {
        struct ulog_entry e;
        const unsigned char *key, *before;
        log_entry(buf, &at, &e, &key, &before);
        pod_table *t = table_by_id(db, e.table);
        if (!t || o->word_read(rs, e.loc) != theirs) continue;
        struct mv_cell h;
        struct rs_row_head rh;
        o->row_read(rs, e.loc, &rh, &h, e.lo * mv_cell_bytes(t), sizeof h);
        /* its own new cell, made visible: the ts of no older version is at
         * or past the record's newest */
        if (h.ts >= MV_TS_FIRST && h.ts != MV_INVISIBLE && h.ts >= rh.epoch_version) ts = h.ts;
    }
    uint32_t done = 0;
    unsigned char *cell = NULL;
    for (uint32_t i = 0, at = 0; i < n; i++) {
        struct ulog_entry e;
        const unsigned char *key, *before;
        log_entry(buf, &at, &e, &key, &before);
        pod_table *t = table_by_id(db, e.table);
        if (!t || o->word_read(rs, e.loc) != theirs) continue;
        uint32_t cb = mv_cell_bytes(t), off = e.lo * cb;
        if (ts) { /* forward: every new cell gets the commit's timestamp */
            unsigned char *c = realloc(cell, cb);
            if (!c) {
                pod_warn("motor: out of memory rolling a commit forward; that record stays "
                         "locked");
                continue;
            }
            cell = c;
            o->row_read(rs, e.loc, NULL, cell, off, cb);
            struct mv_cell h;
            memcpy(&h, cell, sizeof h);
            h = mv_header(ts, h.valid, cell + sizeof h, t->tuple_size);
            struct rs_row_head rh = {.valid = h.valid, .epoch_version = ts};
            o->row_write(rs, e.loc, &rh, &h, off, sizeof h);
            if (e.flags & F_DELETED) {
                o->index_remove(rs, t->id, key);
                o->word_faa(rs, e.loc, FW_REMOVED - theirs);
            } else {
                o->word_faa(rs, e.loc, (uint64_t)0 - theirs);
            }
        } else if (e.flags & F_INSERTED) { /* never existed */
            o->index_remove(rs, t->id, key);
            o->word_faa(rs, e.loc, FW_REMOVED - theirs);
        } else {
            mv_clear_invisible(rs, nver, t, e.loc);
            o->word_faa(rs, e.loc, (uint64_t)0 - theirs);
        }
        done++;
    }
    free(cell);
    *forward = ts;
    return done;
}

/* Write back the before-images of dead's log, when it is to be undone: the
 * records it names are still locked by dead (rows are written only after
 * the log is placed, and the log is marked done before any lock is
 * released). Then mark the log done. */
static void undo_log(pod_db *db, struct record_store *rs, const struct rs_member *dead,
                     uint32_t base)
{
    const struct rs_ops *o = rs->ops;
    struct ulog_head h;
    o->row_read(rs, dead->log, NULL, &h, base, sizeof h);
    if (h.state != (ULOG_ACTIVE << 32 | dead->incarnation)) return; /* done, or another run's */
    unsigned char *buf = h.bytes <= dead->log_bytes - sizeof h ? malloc(h.bytes ? h.bytes : 1)
                                                                 : NULL;
    if (!buf) {
        pod_warn("ford: the undo log of compute node slot %u is unreadable (%u bytes); left as "
                 "it is", dead->slot, h.bytes);
        return;
    }
    for (uint32_t off = 0; off < h.bytes; off += LOG_CHUNK) {
        uint32_t len = h.bytes - off < LOG_CHUNK ? h.bytes - off : LOG_CHUNK;
        o->row_read(rs, dead->log, NULL, buf + off, base + (uint32_t)sizeof h + off, len);
    }
    if (crc32c(0, buf, h.bytes) != h.crc) { /* torn: it died writing it, before any row */
        free(buf);
        return;
    }
    uint64_t theirs = held_word(db, owner_word(dead->slot, dead->incarnation));
    uint32_t undone = 0;
    if (db_versions(db)) {
        uint64_t ts;
        undone = mv_undo(db, rs, buf, h.n, theirs, &ts);
        free(buf);
        uint64_t done = 0;
        o->row_write(rs, dead->log, NULL, &done, base, sizeof done);
        if (ts)
            pod_info("motor: rolled forward a commit compute node slot %u (incarnation %u) was "
                     "making when it died (a version of it was visible, timestamp %" PRIu64
                     "): %u record%s", dead->slot, dead->incarnation, ts, undone,
                     undone == 1 ? "" : "s");
        else
            pod_info("motor: rolled back a commit compute node slot %u (incarnation %u) was "
                     "making when it died: %u record%s", dead->slot, dead->incarnation, undone,
                     undone == 1 ? "" : "s");
        return;
    }
    for (uint32_t i = 0, at = 0; i < h.n; i++) {
        struct ulog_entry e;
        const unsigned char *key, *before;
        log_entry(buf, &at, &e, &key, &before);
        pod_table *t = table_by_id(db, e.table);
        if (!t) {
            pod_warn("ford: undo log of slot %u names table %u, which this compute node does "
                     "not have; that record stays locked", dead->slot, e.table);
            continue;
        }
        if (o->word_read(rs, e.loc) != theirs) continue;
        if (e.flags & F_INSERTED) { /* never existed */
            o->index_remove(rs, t->id, key);
            o->word_faa(rs, e.loc, FW_REMOVED - theirs);
        } else {
            /* The version moves past what the dead one wrote: a reader that
             * saw its half-written row fails validation. */
            struct rs_row_head rh = {.valid = e.valid, .epoch_version = e.new_ev + 1};
            struct rs_op ops[2] = {
                {.kind = RS_OP_WRITE, .loc = e.loc, .head = &rh, .buf = (void *)before,
                 .off = e.lo, .len = e.hi - e.lo},
                {.kind = RS_OP_FAA, .loc = e.loc, .add = (uint64_t)0 - theirs},
            };
            o->batch(rs, ops, 2);
        }
        undone++;
    }
    free(buf);
    uint64_t done = 0;
    o->row_write(rs, dead->log, NULL, &done, base, sizeof done);
    pod_info("ford: rolled back a transaction compute node slot %u (incarnation %u) was "
             "committing when it died: %u record%s restored", dead->slot, dead->incarnation,
             undone, undone == 1 ? "" : "s");
}

/* Every worker's log of dead: the transactions it had in flight lock
 * disjoint records, so they are undone in any order. */
static void recover(pod_db *db, struct record_store *rs, const struct rs_member *dead)
{
    for (uint32_t i = 0; i < dead->nlogs; i++) undo_log(db, rs, dead, i * dead->log_bytes);
    rs->ops->owner_recovered(rs, dead);
    pod_info("ford: compute node slot %u (host %u, incarnation %u) recovered: its locks are "
             "stale", dead->slot, dead->slot - 1, dead->incarnation);
}

/* ---- locks ----------------------------------------------------------------------- */

enum got { GOT_OK, GOT_CONFLICT, GOT_RESTART };

/* The word w, locked by someone else, was met: a conflict while its owner
 * lives; GOT_RESTART once its owner is recovered (then a stale lock can be
 * taken over: take_over). */
static enum got owner_dead(struct ford_txn *x, uint64_t w, bool *stale)
{
    *stale = false;
    if (!OPS(x)->owner_check || !word_slot(w)) return GOT_CONFLICT;
    struct rs_member dead;
    switch (OPS(x)->owner_check(x->rs, word_slot(w), word_inc(w), &dead)) {
    case RS_OWNER_LIVE: return GOT_CONFLICT;
    case RS_OWNER_RECOVER: recover(x->db, x->rs, &dead); return GOT_RESTART;
    case RS_OWNER_STALE: break;
    }
    *stale = true;
    return GOT_RESTART;
}

/* A stale lock w on key's record at loc: take it over. A valid row is only
 * unlocked (its writer never got to write it, or wrote it all); an invalid
 * one (an insert never committed, a committed delete) leaves the index. */
static void take_over(struct ford_txn *x, pod_table *t, rs_loc loc, const void *key, uint64_t w)
{
    uint64_t seen = w;
    if (!OPS(x)->word_cas(x->rs, loc, &seen, x->mine)) return; /* someone was first */
    /* motor: a commit whose log was never whole left its cells INVISIBLE */
    if (x->nver) mv_clear_invisible(x->rs, x->nver, t, loc);
    struct rs_row_head h;
    OPS(x)->row_read(x->rs, loc, &h, NULL, 0, 0);
    if (h.valid) {
        OPS(x)->word_faa(x->rs, loc, (uint64_t)0 - x->mine);
        return;
    }
    OPS(x)->index_remove(x->rs, t->id, key);
    OPS(x)->word_faa(x->rs, loc, FW_REMOVED - x->mine);
}

/* What to do about word w found on key's record (not ours). */
static enum got met(struct ford_txn *x, pod_table *t, rs_loc loc, const void *key, uint64_t w,
                    enum pod_abort_cause cause)
{
    if (w & FW_DEAD) return GOT_RESTART;
    bool stale;
    enum got g = owner_dead(x, w, &stale);
    if (stale) take_over(x, t, loc, key, w);
    if (g == GOT_CONFLICT) conflict(x, cause, w);
    return g;
}

/* ---- lotus: record locks in the compute nodes' lock tables ------------------------
 * A key's lock lives at the compute node that owns its shard (the owner of
 * its table's partition, else a hash of the key: lt_shard); taking it is a
 * call on this compute node's own table or a request to the owner's lock
 * service (src/dm/lock_service.h), never an atomic on a memory node. */
#define LOTUS_TABLE_BYTES (8u << 20)
#define LOTUS_TIMEOUT_MS 2000
#define LOTUS_WATCH_MS 100  /* the janitor's look at the other compute nodes */
#define LOTUS_GRACE_MS 1000 /* a restarted compute node's wait before it serves locks */
/* A holder: the compute node's slot, and its incarnation (24 bits), the
 * worker (8) and the attempt (24) in the transaction bits. */
#define LOTUS_INC_MASK LT_HOLDER(0xff, 0xffffffull << 32)
#define LOTUS_RUN(slot, inc) LT_HOLDER(slot, (uint64_t)((inc) & 0xffffff) << 32)

struct lotus_db {
    struct lock_service *svc; /* this compute node's; NULL when the store has no members */
    struct lock_table *table; /* svc's, or the one the database's workers share */
    const char *provider;
    uint32_t me, ncn;         /* this compute node's slot; the pod's compute nodes */
    /* The janitor: finds the compute nodes that died, has their logs
     * recovered and gives back their locks in this one's table. */
    pod_db *db;
    struct record_store *h;   /* its handle of the store */
    pthread_t janitor;
    bool janitor_on, stop;
    uint32_t gen[RS_MAX_MEMBERS];      /* bumped when slot s is found gone */
    uint32_t seen_inc[RS_MAX_MEMBERS]; /* the run of s found gone last */
    uint32_t done_inc[RS_MAX_MEMBERS]; /* the run of s whose locks were given back here */
    uint64_t messages;        /* requests and releases sent to other compute nodes */
};

struct lotus_lock {
    uint64_t hash;
    uint32_t owner;           /* slot of the compute node whose table has it */
    uint32_t gen;             /* the owner's gen when asked: changed, the lock may be lost */
    bool write;
};

static uint32_t lotus_owner(const struct ford_txn *x, const pod_table *t, const void *key,
                            uint64_t hash)
{
    const struct lotus_db *L = x->lotus;
    if (!L->svc || L->ncn <= 1) return L->me;
    if (t->nparts > 1) { /* the critical field: the partition's (TPC-C: the warehouse) */
        uint32_t host = t->parts[table_partition_of(t, key)].owner;
        if (host < L->ncn) return host + 1;
    }
    return lt_shard_owner(lt_shard(hash >> 40), L->ncn) + 1;
}

static struct lock_client *lotus_client(struct ford_txn *x, uint32_t owner)
{
    struct lotus_db *L = x->lotus;
    pod_err e;
    if (!x->lk) {
        if (!(x->lk = lock_client_new(L->provider, L->me, (uint32_t)x->w->id, LOTUS_TIMEOUT_MS,
                                      &e))) {
            pod_warn("lotus: %s", e.msg);
            return NULL;
        }
        if (x->db->opt.msg_rtt_ns) lock_client_model_rtt(x->lk, x->db->opt.msg_rtt_ns);
    }
    if (!lock_client_knows(x->lk, owner)) {
        unsigned char name[RS_DIR_NAME_MAX];
        size_t len = sizeof name;
        uint32_t inc;
        bool connected;
        if (OPS(x)->dir_lookup(x->rs, owner, name, &len, &inc, &connected) != 1 || !connected ||
            lock_client_owner(x->lk, owner, name, len, &e) != 0)
            return NULL; /* not running: its locks are not to be had now */
    }
    return x->lk;
}

/* The transaction's lock of hash, or NULL (find_access's way). */
static struct lotus_lock *lotus_find(struct ford_txn *x, uint64_t hash)
{
    if (x->nlocks <= LINEAR_ACCESSES) {
        for (uint32_t i = 0; i < x->nlocks; i++)
            if (x->locks[i].hash == hash) return &x->locks[i];
        return NULL;
    }
    int64_t i = access_map_find(&x->lockmap, hash);
    return i < 0 ? NULL : &x->locks[i];
}

/* The lock of t's key, for writing or reading: GOT_OK or GOT_CONFLICT
 * (the status set). Kept in x->locks even when refused: abort gives back
 * whatever was asked for. */
static enum got lotus_lock(struct ford_txn *x, const pod_table *t, const void *key, bool write)
{
    /* 0 is the lock map's empty key: that hash shares hash 1's lock (a
     * false conflict at worst, the same on every compute node) */
    uint64_t hash = lt_key_hash(t->id, key, t->key_size) ?: 1;
    struct lotus_lock *l = lotus_find(x, hash);
    if (l && (l->write || !write)) return GOT_OK;
    if (!l) {
        if (x->nlocks == x->locks_cap) {
            uint32_t cap = x->locks_cap ? x->locks_cap * 2 : 32;
            struct lotus_lock *n = realloc(x->locks, cap * sizeof *n);
            if (!n) {
                nomem(x, "the lock set");
                return GOT_CONFLICT;
            }
            x->locks = n;
            x->locks_cap = cap;
        }
        if (x->nlocks >= LINEAR_ACCESSES) { /* the map covers every lock from here on */
            bool ok = true;
            if (!x->lockmap.n)
                for (uint32_t i = 0; i < x->nlocks && ok; i++)
                    ok = access_map_put(&x->lockmap, x->locks[i].hash, i);
            if (!ok || !access_map_put(&x->lockmap, hash, x->nlocks)) {
                nomem(x, "the lock set");
                return GOT_CONFLICT;
            }
        }
        l = &x->locks[x->nlocks++];
        *l = (struct lotus_lock){.hash = hash, .owner = lotus_owner(x, t, key, hash)};
        l->gen = __atomic_load_n(&x->lotus->gen[l->owner % RS_MAX_MEMBERS], __ATOMIC_ACQUIRE);
    }
    enum lt_result r;
    if (l->owner == x->lotus->me) {
        r = lock_table_acquire(x->lotus->table, hash, write, x->holder);
    } else {
        struct lock_client *c = lotus_client(x, l->owner);
        uint32_t granted;
        pod_err e;
        if (c) __atomic_fetch_add(&x->lotus->messages, 1, __ATOMIC_RELAXED);
        int rc = c ? lock_client_acquire(c, l->owner, x->holder, &hash, write, 1, &granted, &r,
                                         &e)
                   : -1;
        if (rc < 0) { /* it may have taken it: released with the rest, then forgotten */
            x->unreachable = l->owner;
            conflict(x, write ? POD_CAUSE_WRITE_LOCK : POD_CAUSE_READ_LOCK, 0);
            return GOT_CONFLICT;
        }
        if (rc == 0) r = LT_OK;
    }
    if (r == LT_NOMEM) {
        nomem(x, "a lock");
        return GOT_CONFLICT;
    }
    if (r != LT_OK) {
        conflict(x, write ? POD_CAUSE_WRITE_LOCK : POD_CAUSE_READ_LOCK, 0);
        return GOT_CONFLICT;
    }
    l->write = l->write || write;
    return GOT_OK;
}

static void lotus_send_release(struct ford_txn *x, uint32_t owner, const uint64_t *hash,
                               uint32_t n)
{
    pod_err e;
    if (!n || !x->lk || !lock_client_knows(x->lk, owner)) return;
    __atomic_fetch_add(&x->lotus->messages, 1, __ATOMIC_RELAXED);
    if (lock_client_release(x->lk, owner, x->holder, hash, n, &e) != 0)
        pod_warn("lotus: giving back %u locks at compute node slot %u: %s (they go when it "
                 "restarts)", n, owner, e.msg);
}

/* Every lock asked for, given back: the own table's at once, the others'
 * in one request per owner (not waited for). */
static void lotus_release(struct ford_txn *x)
{
    struct lotus_db *L = x->lotus;
    uint64_t batch[LK_BATCH];
    for (uint32_t i = 0; i < x->nlocks; i++) {
        struct lotus_lock *l = &x->locks[i];
        if (l->owner == UINT32_MAX) continue; /* sent with an earlier one's */
        if (l->owner == L->me) {
            lock_table_release(L->table, l->hash, x->holder);
            continue;
        }
        uint32_t owner = l->owner, n = 0;
        for (uint32_t j = i; j < x->nlocks; j++) {
            if (x->locks[j].owner != owner) continue;
            batch[n++] = x->locks[j].hash;
            x->locks[j].owner = UINT32_MAX;
            if (n == LK_BATCH) {
                lotus_send_release(x, owner, batch, n);
                n = 0;
            }
        }
        lotus_send_release(x, owner, batch, n);
    }
    x->nlocks = 0;
    access_map_clear(&x->lockmap);
    /* an owner that did not answer: its address is looked up again next
     * time (after the release, which follows the request it may yet take) */
    if (x->unreachable && x->lk) lock_client_forget(x->lk, x->unreachable);
}

/* Before a commit writes: every compute node whose table has one of its
 * locks still runs (the janitor has not found it gone since), else the
 * lock may have been lost with it and the commit aborts. */
static bool lotus_locks_hold(struct ford_txn *x)
{
    for (uint32_t i = 0; i < x->nlocks; i++) {
        const struct lotus_lock *l = &x->locks[i];
        if (l->owner == x->lotus->me ||
            __atomic_load_n(&x->lotus->gen[l->owner % RS_MAX_MEMBERS], __ATOMIC_ACQUIRE) == l->gen)
            continue;
        x->unreachable = l->owner;
        conflict(x, POD_CAUSE_WRITE_LOCK, 0);
        return false;
    }
    return true;
}

/* Lock the record (CAS 0 -> ours) and read its row behind the lock, one batch. */
static enum got lock_and_read(struct ford_txn *x, struct access *a, const void *key)
{
    uint32_t n = 0;
    struct rs_op *c = op_buf_next(&x->ops, &n), *r = op_buf_next(&x->ops, &n);
    if (!c || !r) {
        nomem(x, "a batch");
        return GOT_CONFLICT;
    }
    c = &x->ops.ops[0], r = &x->ops.ops[1];
    *c = (struct rs_op){.kind = RS_OP_CAS, .loc = a->loc, .expected = 0, .desired = x->mine};
    *r = (struct rs_op){.kind = RS_OP_READ, .loc = a->loc, .head = &a->head, .buf = a->copy,
                        .len = a->table->tuple_size};
    uint64_t w = 0;
    if (x->lotus) { /* locked already (lotus_lock): the READ alone, with the word */
        *c = *r;
        c->word = &w;
        r = c;
    }
    if (x->nver) { /* the whole CVT */
        uint32_t bytes = x->nver * mv_cell_bytes(a->table);
        if (!mv_room(x, bytes)) {
            nomem(x, "a record's versions");
            return GOT_CONFLICT;
        }
        r->buf = x->cvt;
        r->len = bytes;
    }
    OPS(x)->batch(x->rs, x->ops.ops, x->lotus ? 1 : 2);
    if (x->lotus && (w & FW_DEAD)) return GOT_RESTART; /* removed: look it up again */
    if (!x->lotus && !x->ops.ops[0].ok)
        return met(x, a->table, a->loc, key, x->ops.ops[0].old, POD_CAUSE_WRITE_LOCK);
    if (x->nver && !mv_locked(x, a)) {
        unlock_word(x, a->loc);
        pod_txn_fail((pod_txn *)(void *)x, POD_E_INVALID, "%s: a record without a cell to write",
                     a->table->name);
        x->status = POD_E_INVALID;
        return GOT_CONFLICT;
    }
    return GOT_OK;
}

/* A snapshot read of a's record (motor): the version at the transaction's
 * start timestamp to the copy, or F_ABSENT when the record had none then
 * (inserted later, or deleted). A cell INVISIBLE or torn is read again;
 * after MV_READ_WAITS the lock's owner is asked (it may have died). */
static enum got mv_read(struct ford_txn *x, struct access *a, const void *key)
{
    pod_table *t = a->table;
    uint32_t cell = mv_cell_bytes(t), bytes = x->nver * cell;
    if (!mv_room(x, bytes)) {
        nomem(x, "a record's versions");
        return GOT_CONFLICT;
    }
    if (!x->t_start) x->t_start = OPS(x)->word_read(x->rs, x->db->clock);
    for (int i = 0;; i++) {
        uint64_t w;
        struct rs_op r = {.kind = RS_OP_READ, .loc = a->loc, .word = &w, .head = &a->head,
                          .buf = x->cvt, .len = bytes};
        OPS(x)->batch(x->rs, &r, 1);
        if (w & FW_DEAD) return GOT_RESTART;
        struct mv_view v;
        mv_view(x->cvt, x->nver, t, x->t_start, &v);
        if (v.invisible >= 0 || v.torn) {
            if (i < MV_READ_WAITS) {
                lanes_sleep_ns(20000);
                continue;
            }
            if (w) return met(x, t, a->loc, key, w, POD_CAUSE_READ_LOCK);
            conflict(x, POD_CAUSE_READ_LOCK, 0);
            return GOT_CONFLICT;
        }
        if (v.snap >= 0) {
            struct mv_cell h;
            memcpy(&h, x->cvt + (size_t)v.snap * cell, sizeof h);
            memcpy(a->copy, x->cvt + (size_t)v.snap * cell + sizeof h, t->tuple_size);
            a->ev_read = h.ts;
            a->valid_read = h.valid;
            if (!h.valid) a->flags |= F_ABSENT;
        } else if (v.empty >= 0 && v.gone < 0) { /* no version was ever overwritten */
            a->ev_read = 0;
            a->valid_read = 0;
            a->flags |= F_ABSENT;
        } else {
            x->too_old = true;
            conflict(x, POD_CAUSE_VALIDATION, 0);
            return GOT_CONFLICT;
        }
        return GOT_OK;
    }
}

/* ---- point operations --------------------------------------------------------- */

static int check_op(struct ford_txn *x, pod_table *t, const void *key)
{
    x->touched = true;
    if (x->status != POD_OK) return x->status;
    return cc_check_key((pod_txn *)(void *)x, x->db, t, key);
}

/* The tuple as locked, for the undo log (the copy takes the new bytes). */
static bool keep_before(struct ford_txn *x, struct access *a)
{
    if (!(a->before = arena_alloc(&x->mem, a->table->tuple_size ? a->table->tuple_size : 1)))
        return false;
    memcpy(a->before, a->copy, a->table->tuple_size);
    return true;
}

static void drop_last(struct ford_txn *x)
{
    access_map_drop(&x->map, x->acc[x->nacc - 1].loc);
    x->nacc--;
}

/* Where pod_prefetch found key, or 0. */
static rs_loc hinted(const struct ford_txn *x, const pod_table *t, const void *key)
{
    for (uint32_t i = 0; i < x->nhints; i++)
        if (x->hints[i].table == t && memcmp(x->hints[i].key, key, t->key_size) == 0)
            return x->hints[i].loc;
    return 0;
}

/* key's record, read (want A_READ) or locked (A_WRITE): *acc, or NULL when
 * the key is missing for this transaction. */
static int find(struct ford_txn *x, pod_table *t, const void *key, uint8_t want,
                struct access **acc)
{
    *acc = NULL;
    /* lotus locks first, whether the key is there or not: a lock on a
     * missing key keeps it missing (an insert takes it for writing) */
    if (x->lotus && lotus_lock(x, t, key, want == A_WRITE) != GOT_OK) return x->status;
    for (int tries = 0; tries < OP_RESTARTS; tries++) {
        rs_loc loc = tries ? 0 : hinted(x, t, key); /* a restart looks again */
        if (!loc && OPS(x)->lookup(x->rs, t->id, key, &loc) != RS_OK) {
            x->missed = true;
            return POD_OK;
        }
        struct access *a = find_access(x, loc);
        if (a) {
            if (a->flags & (F_DELETED | F_ABSENT)) return POD_OK;
            if (want == A_WRITE && a->mode == A_READ) {
                /* Lock it now; what was read must still be what is there. */
                enum got g = lock_and_read(x, a, key);
                if (g == GOT_RESTART) continue;
                if (g != GOT_OK) return x->status;
                a->mode = A_WRITE;
                if (a->head.epoch_version != a->ev_read || a->head.valid != a->valid_read)
                    return conflict(x, POD_CAUSE_VALIDATION, 0);
                if (!x->nver && !keep_before(x, a)) return nomem(x, "a before-image");
            }
            *acc = a;
            return POD_OK;
        }
        if (!(a = add_access(x, loc, t, want, key))) return nomem(x, "the access set");
        enum got g;
        if (want == A_WRITE) {
            g = lock_and_read(x, a, key);
        } else if (x->nver) {
            g = mv_read(x, a, key);
            if (g == GOT_OK) {
                *acc = (a->flags & F_ABSENT) ? NULL : a; /* kept: commit may validate it */
                return POD_OK;
            }
        } else {
            uint64_t w;
            struct rs_op r = {.kind = RS_OP_READ, .loc = loc, .word = &w, .head = &a->head,
                              .buf = a->copy, .len = t->tuple_size};
            OPS(x)->batch(x->rs, &r, 1);
            g = w ? met(x, t, loc, key, w, POD_CAUSE_READ_LOCK) : GOT_OK;
        }
        if (g != GOT_OK) {
            drop_last(x);
            if (g == GOT_RESTART) continue;
            return x->status;
        }
        if (!a->head.valid) { /* being removed, or taken over and found dead: again */
            if (want == A_WRITE) unlock_word(x, loc);
            drop_last(x);
            continue;
        }
        a->ev_read = a->head.epoch_version;
        a->valid_read = a->head.valid;
        if (want == A_WRITE) pod_crash_point("ford-locked");
        if (want == A_WRITE && !x->nver && !keep_before(x, a)) {
            unlock_word(x, loc);
            drop_last(x);
            return nomem(x, "a before-image");
        }
        *acc = a;
        return POD_OK;
    }
    return conflict(x, want == A_WRITE ? POD_CAUSE_WRITE_LOCK : POD_CAUSE_READ_LOCK, 0);
}

static void written(struct access *a, uint32_t lo, uint32_t hi)
{
    if (!(a->flags & (F_UPDATED | F_INSERTED))) {
        a->ulo = lo, a->uhi = hi;
    } else if (a->flags & F_UPDATED) {
        if (lo < a->ulo) a->ulo = lo;
        if (hi > a->uhi) a->uhi = hi;
    }
    a->flags |= F_UPDATED;
}

static int ford_get(pod_txn *tx, pod_table *t, const void *key, void *out, bool for_update)
{
    struct ford_txn *x = X(tx);
    int rc = check_op(x, t, key);
    if (rc) return rc;
    struct access *a;
    if ((rc = find(x, t, key, for_update ? A_WRITE : A_READ, &a))) return rc;
    if (!a) return POD_NOT_FOUND;
    if (out) memcpy(out, a->copy, t->tuple_size);
    return POD_OK;
}

static int ford_get_ref(pod_txn *tx, pod_table *t, const void *key, const void **tuple)
{
    struct ford_txn *x = X(tx);
    int rc = check_op(x, t, key);
    if (rc) return rc;
    if (!tuple) return pod_txn_fail(tx, POD_E_INVALID, "%s: tuple is NULL", t->name);
    struct access *a;
    if ((rc = find(x, t, key, A_READ, &a))) return rc;
    if (!a) return POD_NOT_FOUND;
    *tuple = a->copy;
    return POD_OK;
}

static int ford_update_range(pod_txn *tx, pod_table *t, const void *key, bool whole,
                             uint32_t off, uint32_t len, void **tuple)
{
    struct ford_txn *x = X(tx);
    int rc = check_op(x, t, key);
    if (rc) return rc;
    if (!whole && (rc = cc_check_range(tx, t, off, len))) return rc;
    if (!tuple) return pod_txn_fail(tx, POD_E_INVALID, "%s: tuple is NULL", t->name);
    struct access *a;
    if ((rc = find(x, t, key, A_WRITE, &a))) return rc;
    if (!a) return POD_NOT_FOUND;
    if (whole) written(a, 0, t->tuple_size);
    else written(a, off, off + len);
    *tuple = a->copy;
    return POD_OK;
}

static int ford_put(pod_txn *tx, pod_table *t, const void *key, const void *tuple)
{
    struct ford_txn *x = X(tx);
    int rc = check_op(x, t, key);
    if (rc) return rc;
    if (!tuple) return pod_txn_fail(tx, POD_E_INVALID, "%s: tuple is NULL", t->name);
    struct access *a;
    if ((rc = find(x, t, key, A_WRITE, &a))) return rc;
    if (!a) return POD_NOT_FOUND;
    memcpy(a->copy, tuple, t->tuple_size);
    written(a, 0, t->tuple_size);
    return POD_OK;
}

static int ford_remove(pod_txn *tx, pod_table *t, const void *key)
{
    struct ford_txn *x = X(tx);
    int rc = check_op(x, t, key);
    if (rc) return rc;
    struct access *a;
    if ((rc = find(x, t, key, A_WRITE, &a))) return rc;
    if (!a) return POD_NOT_FOUND;
    a->flags |= F_DELETED;
    return POD_OK;
}

static int ford_insert(pod_txn *tx, pod_table *t, const void *key, const void *tuple)
{
    struct ford_txn *x = X(tx);
    int rc = check_op(x, t, key);
    if (rc) return rc;
    if (!tuple) return pod_txn_fail(tx, POD_E_INVALID, "%s: tuple is NULL", t->name);
    if (x->lotus && lotus_lock(x, t, key, true) != GOT_OK) return x->status;
    for (int tries = 0; tries < OP_RESTARTS; tries++) {
        rs_loc loc;
        if (OPS(x)->lookup(x->rs, t->id, key, &loc) == RS_OK) {
            struct access *a = find_access(x, loc);
            if (a && (a->flags & F_DELETED)) { /* deleted and inserted again by us */
                a->flags &= (uint8_t)~F_DELETED;
                memcpy(a->copy, tuple, t->tuple_size);
                written(a, 0, t->tuple_size);
                return POD_OK;
            }
            /* Present: read it, so that validation makes "exists" hold. */
            if ((rc = find(x, t, key, A_READ, &a))) return rc;
            if (a) return POD_EXISTS;
            /* motor: not in the snapshot, but its record is (being inserted, or
             * removed): not ours to insert now */
            if (x->nver && (a = find_access(x, loc)) && (a->flags & F_ABSENT))
                return conflict(x, POD_CAUSE_WRITE_LOCK, 0);
            continue;
        }
        int st = OPS(x)->alloc(x->rs, t->id, key, &loc);
        if (st != RS_OK) return nomem(x, "a record");
        uint64_t zero = 0;
        if (x->mine) OPS(x)->word_cas(x->rs, loc, &zero, x->mine); /* nobody knows it yet */
        struct rs_row_head h = {0, 0};
        if (!x->nver) OPS(x)->row_write(x->rs, loc, &h, tuple, 0, t->tuple_size);
        st = OPS(x)->index_insert(x->rs, t->id, key, loc);
        if (st != RS_OK) {
            OPS(x)->word_faa(x->rs, loc, FW_REMOVED - x->mine);
            OPS(x)->free(x->rs, t->id, loc);
            if (st == RS_EXISTS) continue;
            return nomem(x, "an index entry");
        }
        struct access *a = add_access(x, loc, t, A_WRITE, key);
        if (!a) {
            OPS(x)->index_remove(x->rs, t->id, key);
            OPS(x)->word_faa(x->rs, loc, FW_REMOVED - x->mine);
            return nomem(x, "the access set");
        }
        memcpy(a->copy, tuple, t->tuple_size);
        a->flags = F_INSERTED;
        a->wcell = 0; /* motor: its cells are EMPTY */
        return POD_OK;
    }
    return conflict(x, POD_CAUSE_WRITE_LOCK, 0);
}

/* The keys' index entries, looked up in one go (rs_ops.lookup_many): the
 * operations that follow on these keys start from their locations (a
 * location found stale is looked up again, as any). A hint: keys not found
 * are looked up when used. */
static int ford_prefetch(pod_txn *tx, pod_table *t, const void *keys, uint32_t n)
{
    struct ford_txn *x = X(tx);
    int rc = check_op(x, t, keys);
    if (rc || !OPS(x)->lookup_many || n < 2) return rc;
    rs_loc *locs = arena_alloc(&x->mem, (size_t)n * sizeof *locs);
    unsigned char *kc = arena_alloc(&x->mem, (size_t)n * t->key_size);
    if (!locs || !kc) return nomem(x, "a prefetch");
    memcpy(kc, keys, (size_t)n * t->key_size);
    if (x->nhints + n > x->hints_cap) {
        uint32_t cap = x->hints_cap ? x->hints_cap : 16;
        while (cap < x->nhints + n) cap *= 2;
        struct hint *h = arena_alloc(&x->mem, (size_t)cap * sizeof *h);
        if (!h) return nomem(x, "a prefetch");
        if (x->nhints) memcpy(h, x->hints, x->nhints * sizeof *h);
        x->hints = h;
        x->hints_cap = cap;
    }
    if (OPS(x)->lookup_many(x->rs, t->id, kc, n, locs) != RS_OK) return POD_OK;
    for (uint32_t i = 0; i < n; i++) {
        const unsigned char *k = kc + (size_t)i * t->key_size;
        if (!locs[i] || hinted(x, t, k)) continue;
        x->hints[x->nhints++] = (struct hint){.table = t, .key = k, .loc = locs[i]};
    }
    return POD_OK;
}

/* ---- scans: a walk of the index, then point reads ------------------------------------ */

static int ford_scan(pod_txn *tx, pod_table *t, const void *lo, const void *hi, uint32_t limit,
                     unsigned flags, pod_scan_fn fn, void *arg)
{
    struct ford_txn *x = X(tx);
    x->touched = true;
    if (x->status != POD_OK) return x->status;
    uint32_t part;
    int rc = cc_check_scan(tx, x->db, t, lo, hi, &part);
    if (rc) return rc < 0 ? rc : POD_OK;
    x->missed = true;
    unsigned char *keys;
    size_t nkeys;
    if (walk_scan_keys(x->rs, t->id, t->key_size, lo, hi, &keys, &nkeys) != RS_OK)
        return nomem(x, "a scan");
    bool backward = flags & POD_SCAN_REVERSE;
    uint8_t want = (flags & POD_SCAN_FOR_UPDATE) ? A_WRITE : A_READ;
    uint32_t count = 0;
    rc = POD_OK;
    for (size_t i = 0; i < nkeys; i++) {
        const unsigned char *key = keys + (backward ? nkeys - 1 - i : i) * t->key_size;
        struct access *a;
        if ((rc = find(x, t, key, want, &a))) break;
        if (!a) continue;
        count++;
        if ((fn && !fn(arg, a->key, a->copy)) || (limit && count >= limit)) break;
    }
    free(keys);
    return rc;
}

/* ---- commit and abort ----------------------------------------------------------- */

static bool changes(const struct access *a)
{
    return a->flags & (F_INSERTED | F_UPDATED | F_DELETED);
}

/* (a) the records read without a lock: unchanged and unlocked. */
/* (a) The records read without a lock, read again: READs of word and
 * header appended to x->ops from *k; what they bring lands in *v. */
struct validation {
    uint32_t n;
    uint64_t *words;
    struct rs_row_head *heads;
};

static int validation_ops(struct ford_txn *x, uint32_t *k, struct validation *v)
{
    v->n = 0;
    for (uint32_t i = 0; i < x->nacc; i++)
        if (x->acc[i].mode == A_READ) v->n++;
    if (!v->n) return POD_OK;
    v->heads = arena_alloc(&x->mem, v->n * sizeof *v->heads);
    v->words = arena_alloc(&x->mem, v->n * sizeof *v->words);
    if (!v->heads || !v->words) return nomem(x, "validation");
    for (uint32_t i = 0, j = 0; i < x->nacc; i++) {
        struct access *a = &x->acc[i];
        if (a->mode != A_READ) continue;
        struct rs_op *o = op_buf_next(&x->ops, k);
        if (!o) return nomem(x, "validation");
        *o = (struct rs_op){.kind = RS_OP_READ, .loc = a->loc, .word = &v->words[j],
                            .head = &v->heads[j]};
        j++;
    }
    return POD_OK;
}

/* Each record read without a lock is unlocked and of the version read. */
static bool validation_holds(struct ford_txn *x, const struct validation *v)
{
    for (uint32_t i = 0, j = 0; j < v->n && i < x->nacc; i++) {
        struct access *a = &x->acc[i];
        if (a->mode != A_READ) continue;
        if (v->words[j] || v->heads[j].epoch_version != a->ev_read ||
            v->heads[j].valid != a->valid_read) {
            conflict(x, POD_CAUSE_VALIDATION, v->words[j]);
            return false;
        }
        j++;
    }
    return true;
}

static bool log_room(struct ford_txn *x, uint32_t need)
{
    if (need <= x->log_cap) return true;
    uint32_t cap = x->log_cap ? x->log_cap : 4096;
    while (cap < need) cap *= 2;
    unsigned char *l = realloc(x->log, cap);
    if (!l) return false;
    x->log = l;
    x->log_cap = cap;
    return true;
}

/* (b) the undo log of the changed records: its WRITEs, and a SYNC that
 * places them before any row is written, appended to x->ops from *k.
 * POD_OK, or the status that fails the commit. */
static int log_ops(struct ford_txn *x, uint64_t epoch, uint32_t *k)
{
    const struct rs_member *me = &x->db->member;
    uint32_t at = sizeof(struct ulog_head), n = 0;
    for (uint32_t i = 0; i < x->nacc; i++) {
        struct access *a = &x->acc[i];
        if (!changes(a)) continue;
        uint32_t lo = (a->flags & F_UPDATED) ? a->ulo : 0;
        uint32_t hi = (a->flags & F_UPDATED) ? a->uhi : 0;
        if (a->flags & (F_INSERTED | F_DELETED)) lo = hi = 0; /* only the header counts */
        if (x->nver) lo = hi = a->wcell; /* motor: the cell written, no before-image */
        uint32_t ks = (a->table->key_size + 7) & ~7u, bs = (hi - lo + 7) & ~7u;
        uint64_t need = (uint64_t)at + sizeof(struct ulog_entry) + ks + bs;
        if (need > me->log_bytes) {
            x->status = POD_E_INVALID;
            return pod_txn_fail((pod_txn *)(void *)x, POD_E_INVALID,
                                "the transaction's undo log needs more than the %u bytes of this "
                                "compute node's log (dm.undo_log_size)", me->log_bytes);
        }
        if (!log_room(x, (uint32_t)need)) return nomem(x, "the undo log");
        struct ulog_entry e = {.loc = a->loc, .table = a->table->id, .flags = a->flags,
                               .lo = lo, .hi = hi, .valid = a->head.valid,
                               .key_size = a->table->key_size,
                               .new_ev = txn_next_epoch_version(a->head.epoch_version, epoch)};
        memcpy(x->log + at, &e, sizeof e);
        memset(x->log + at + sizeof e, 0, ks + bs);
        memcpy(x->log + at + sizeof e, a->key, a->table->key_size);
        if (hi > lo) memcpy(x->log + at + sizeof e + ks, a->before + lo, hi - lo);
        at = (uint32_t)need;
        n++;
    }
    struct ulog_head h = {.state = ULOG_ACTIVE << 32 | me->incarnation, .n = n,
                          .bytes = at - (uint32_t)sizeof h};
    h.crc = crc32c(0, x->log + sizeof h, h.bytes);
    memcpy(x->log, &h, sizeof h);
    for (uint32_t off = 0; off < at; off += LOG_CHUNK) {
        struct rs_op *o = op_buf_next(&x->ops, k);
        if (!o) return nomem(x, "the undo log");
        *o = (struct rs_op){.kind = RS_OP_WRITE, .loc = me->log, .buf = x->log + off,
                            .off = log_base(x) + off,
                            .len = at - off < LOG_CHUNK ? at - off : LOG_CHUNK};
    }
    struct rs_op *o = op_buf_next(&x->ops, k);
    if (!o) return nomem(x, "the undo log");
    o->kind = RS_OP_SYNC; /* placed before a row is written */
    return POD_OK;
}

/* motor (b): each changed record's new cell, INVISIBLE, appended to x->ops
 * from *k. */
static int mv_cell_ops(struct ford_txn *x, uint32_t *k)
{
    for (uint32_t i = 0; i < x->nacc; i++) {
        struct access *a = &x->acc[i];
        if (!changes(a)) continue;
        uint32_t cb = mv_cell_bytes(a->table), tsz = a->table->tuple_size;
        unsigned char *c = arena_alloc(&x->mem, cb);
        struct rs_op *o = op_buf_next(&x->ops, k);
        if (!c || !o) return nomem(x, "a new version");
        uint32_t valid = !(a->flags & F_DELETED);
        struct mv_cell h = mv_header(MV_INVISIBLE, valid, a->copy, tsz);
        memcpy(c, &h, sizeof h);
        memcpy(c + sizeof h, a->copy, tsz);
        memset(c + sizeof h + tsz, 0, cb - sizeof h - tsz);
        *o = (struct rs_op){.kind = RS_OP_WRITE, .loc = a->loc, .buf = c,
                            .off = a->wcell * cb, .len = cb};
    }
    return POD_OK;
}

/* motor (c), (d): the commit timestamp, then every new cell made visible
 * with it and each record's header saying it is the newest, placed. */
static void mv_publish(struct ford_txn *x)
{
    uint64_t ts = OPS(x)->word_faa(x->rs, x->db->clock, 1) + 1;
    uint32_t n = 0;
    for (uint32_t i = 0; i < x->nacc; i++) {
        struct access *a = &x->acc[i];
        if (!changes(a)) continue;
        uint32_t cb = mv_cell_bytes(a->table);
        a->head.valid = !(a->flags & F_DELETED);
        a->head.epoch_version = ts;
        struct mv_cell *h = arena_alloc(&x->mem, sizeof *h);
        struct rs_op *o = h ? op_buf_next(&x->ops, &n) : NULL;
        if (!o) { /* out of memory: one at a time */
            struct mv_cell hh = mv_header(ts, a->head.valid, a->copy, a->table->tuple_size);
            OPS(x)->row_write(x->rs, a->loc, &a->head, &hh, a->wcell * cb, sizeof hh);
            continue;
        }
        *h = mv_header(ts, a->head.valid, a->copy, a->table->tuple_size);
        *o = (struct rs_op){.kind = RS_OP_WRITE, .loc = a->loc, .head = &a->head, .buf = h,
                            .off = a->wcell * cb, .len = sizeof *h};
    }
    struct rs_op *o = n ? op_buf_next(&x->ops, &n) : NULL;
    if (o) o->kind = RS_OP_SYNC; /* every cell visible before the log is done */
    if (n) OPS(x)->batch(x->rs, x->ops.ops, n);
}

/* (c) ford: the rows written in place, placed. */
static void ford_rows(struct ford_txn *x, uint64_t epoch)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < x->nacc; i++) {
        struct access *a = &x->acc[i];
        if (!changes(a)) continue;
        a->head.epoch_version = txn_next_epoch_version(a->head.epoch_version, epoch);
        a->head.valid = !(a->flags & F_DELETED);
        uint32_t lo = (a->flags & F_INSERTED) ? 0 : a->ulo;
        uint32_t hi = (a->flags & F_INSERTED) ? a->table->tuple_size
                      : (a->flags & F_UPDATED) ? a->uhi : lo;
        if (a->flags & F_DELETED) lo = hi = 0;
        struct rs_op *o = op_buf_next(&x->ops, &n);
        if (!o) {
            OPS(x)->row_write(x->rs, a->loc, &a->head, a->copy + lo, lo, hi - lo);
            continue;
        }
        *o = (struct rs_op){.kind = RS_OP_WRITE, .loc = a->loc, .head = &a->head,
                            .buf = a->copy + lo, .off = lo, .len = hi - lo};
    }
    struct rs_op *o = n ? op_buf_next(&x->ops, &n) : NULL;
    if (o) o->kind = RS_OP_SYNC; /* every row placed before the log is done */
    if (n) OPS(x)->batch(x->rs, x->ops.ops, n);
}

/* Nothing locked, every key looked for found, no scan: a snapshot (motor)
 * needs no validation. */
static bool snapshot_only(const struct ford_txn *x)
{
    if (!x->nver || x->missed) return false;
    for (uint32_t i = 0; i < x->nacc; i++)
        if (x->acc[i].mode == A_WRITE) return false;
    return true;
}

static void ford_commit(pod_txn *tx)
{
    struct ford_txn *x = X(tx);
    uint64_t epoch = x->db->epoch;
    bool any = false;
    for (uint32_t i = 0; i < x->nacc && !any; i++) any = changes(&x->acc[i]);
    if (snapshot_only(x) || (x->lotus && !any)) { /* lotus: every read was locked */
        if (x->lotus && !lotus_locks_hold(x)) return; /* the caller aborts */
        if (x->lotus) lotus_release(x);
        x->nacc = 0;
        access_map_clear(&x->map);
        return;
    }
    bool logged = any && x->db->member.slot;
    /* (a) and (b) in one batch: the log written while the reads are
     * checked. A validation that fails leaves a log to mark done before
     * any lock is released (ford_abort). */
    struct validation v = {0};
    uint32_t k = 0;
    if (x->lotus && !lotus_locks_hold(x)) return; /* the caller aborts */
    if (!x->lotus && validation_ops(x, &k, &v) != POD_OK) return; /* the caller aborts */
    if (any && x->nver && mv_cell_ops(x, &k) != POD_OK) return;
    if (logged && log_ops(x, epoch, &k) != POD_OK) return;
    if (any && x->nver && !logged) { /* the new cells placed before the timestamp */
        struct rs_op *o = op_buf_next(&x->ops, &k);
        if (!o) {
            nomem(x, "a batch");
            return;
        }
        o->kind = RS_OP_SYNC;
    }
    if (k) OPS(x)->batch(x->rs, x->ops.ops, k);
    x->log_active = logged;
    x->cells_written = any && x->nver;
    if (!validation_holds(x, &v)) return;
    if (logged) pod_crash_point("ford-log-written");
    /* (c) the rows (motor: the timestamp, the cells made visible), placed */
    if (any && x->nver) mv_publish(x);
    else if (any) ford_rows(x, epoch);
    if (logged) pod_crash_point("ford-rows-written");
    /* (d) the log done, (e) the locks released */
    uint32_t n = 0;
    struct rs_op *o;
    uint64_t done = 0;
    if (logged) {
        struct rs_op *o = op_buf_next(&x->ops, &n);
        if (o) *o = (struct rs_op){.kind = RS_OP_WRITE, .loc = x->db->member.log, .buf = &done,
                                   .off = log_base(x), .len = sizeof done};
        else OPS(x)->row_write(x->rs, x->db->member.log, NULL, &done, log_base(x), sizeof done);
    }
    /* A lock we hold is changed by nobody else (others' CASes fail on it),
     * so a WRITE of 0 releases it, in the same batch as the done mark: the
     * store posts no release before what precedes the first one is placed
     * (record_store.h), on one memory node by its queue's order, on
     * several by placing the mark first. */
    static const uint64_t unlocked = 0;
    for (uint32_t i = 0; i < x->nacc; i++) {
        struct access *a = &x->acc[i];
        if (a->mode != A_WRITE || (a->flags & F_DELETED) || !x->mine) continue;
        struct rs_op *o = op_buf_next(&x->ops, &n);
        if (!o) {
            unlock_word(x, a->loc);
            continue;
        }
        *o = (struct rs_op){.kind = RS_OP_WRITE, .loc = a->loc, .word = (uint64_t *)&unlocked};
    }
    /* the log marked done before commit returns: a later transaction's lock
     * must not find this log still to be undone */
    if (logged && (o = op_buf_next(&x->ops, &n))) o->kind = RS_OP_SYNC;
    if (n) OPS(x)->batch(x->rs, x->ops.ops, n);
    x->log_active = false;
    /* deleted records: out of the index, then REMOVED for good */
    for (uint32_t i = 0; i < x->nacc; i++) {
        struct access *a = &x->acc[i];
        if (!(a->flags & F_DELETED)) continue;
        OPS(x)->index_remove(x->rs, a->table->id, a->key);
        OPS(x)->word_faa(x->rs, a->loc, FW_REMOVED - x->mine);
        OPS(x)->free(x->rs, a->table->id, a->loc);
    }
    if (x->lotus) lotus_release(x);
    x->nacc = 0;
    access_map_clear(&x->map);
}

static void ford_abort(pod_txn *tx)
{
    struct ford_txn *x = X(tx);
    uint32_t n = 0;
    /* A log written for a commit whose validation failed: marked done and
     * placed before any lock is released, or its recovery could restore
     * before-images over what later transactions write to these records
     * once they are free. */
    /* motor: the new cells it wrote INVISIBLE are GONE, placed with the
     * mark, before any lock is released */
    static const struct mv_cell gone = {.ts = MV_GONE};
    for (uint32_t i = 0; x->cells_written && i < x->nacc; i++) {
        struct access *a = &x->acc[i];
        if (!changes(a)) continue;
        struct rs_op *o = op_buf_next(&x->ops, &n);
        uint32_t off = a->wcell * mv_cell_bytes(a->table);
        if (o)
            *o = (struct rs_op){.kind = RS_OP_WRITE, .loc = a->loc, .buf = (void *)&gone,
                                .off = off, .len = sizeof gone};
        else
            OPS(x)->row_write(x->rs, a->loc, NULL, &gone, off, sizeof gone);
    }
    uint64_t done = 0;
    struct rs_op *o = x->log_active ? op_buf_next(&x->ops, &n) : NULL;
    if (o)
        *o = (struct rs_op){.kind = RS_OP_WRITE, .loc = x->db->member.log, .buf = &done,
                            .off = log_base(x), .len = sizeof done};
    struct rs_op *sync = n ? op_buf_next(&x->ops, &n) : NULL;
    if (sync) sync->kind = RS_OP_SYNC;
    if (n) OPS(x)->batch(x->rs, x->ops.ops, n);
    if (x->log_active && !o) /* out of memory for the batch: the mark after the cells */
        OPS(x)->row_write(x->rs, x->db->member.log, NULL, &done, log_base(x), sizeof done);
    n = 0;
    x->log_active = false;
    x->cells_written = false;
    for (uint32_t i = 0; i < x->nacc; i++) {
        struct access *a = &x->acc[i];
        if (a->mode != A_WRITE) continue;
        if (a->flags & F_INSERTED) { /* never valid: out of the index, REMOVED */
            OPS(x)->index_remove(x->rs, a->table->id, a->key);
            OPS(x)->word_faa(x->rs, a->loc, FW_REMOVED - x->mine);
            OPS(x)->free(x->rs, a->table->id, a->loc);
            continue;
        }
        if (!x->mine) continue;
        struct rs_op *o = op_buf_next(&x->ops, &n);
        if (!o) {
            unlock_word(x, a->loc);
            continue;
        }
        *o = (struct rs_op){.kind = RS_OP_FAA, .loc = a->loc, .add = (uint64_t)0 - x->mine};
    }
    if (n) OPS(x)->batch(x->rs, x->ops.ops, n);
    if (x->lotus) lotus_release(x);
    x->nacc = 0;
    access_map_clear(&x->map);
}

/* ---- lifecycle ------------------------------------------------------------------ */

static pod_txn *ford_txn_new(pod_db *db, struct pod_worker *w)
{
    struct ford_txn *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->db = db;
    x->w = w;
    x->rs = cc_store_handle(db, w);
    x->head.cc = db->cc; /* ford, motor or lotus */
    x->nver = db_versions(db);
    return (pod_txn *)(void *)x;
}

static void ford_txn_free(pod_txn *tx)
{
    struct ford_txn *x = X(tx);
    arena_free(&x->mem);
    access_map_free(&x->map);
    free(x->acc);
    op_buf_free(&x->ops);
    free(x->log);
    free(x->cvt);
    lock_client_free(x->lk);
    free(x->locks);
    access_map_free(&x->lockmap);
    free(x);
}

static void ford_begin(pod_txn *tx)
{
    struct ford_txn *x = X(tx);
    x->nacc = 0;
    access_map_clear(&x->map);
    x->status = POD_OK;
    x->touched = false;
    x->msg[0] = 0;
    x->conflict_word = 0;
    /* The owner word: this compute node's slot and incarnation (slot 1,
     * incarnation 1 on a store of one user). */
    const struct rs_member *me = &x->db->member;
    x->mine = me->slot ? owner_word(me->slot, me->incarnation) : owner_word(1, 1);
    x->t_start = 0;
    x->missed = x->cells_written = x->too_old = false;
    if (x->db->cc == &cc_lotus) {
        /* lotus: reads are locked, the newest committed version is theirs;
         * records' words are no locks; holders are named per attempt */
        x->lotus = x->db->cc_state;
        x->t_start = MV_INVISIBLE - 1;
        x->mine = 0;
        x->nlocks = 0;
        access_map_clear(&x->lockmap);
        x->unreachable = 0;
        x->holder = LOTUS_RUN(x->lotus->me, me->incarnation) |
                    ((uint64_t)x->w->id & 0xff) << 24 | (++x->attempts & 0xffffff);
    }
    arena_reset(&x->mem);
    x->hints = NULL;
    x->nhints = x->hints_cap = 0;
}

static int ford_status(const pod_txn *tx) { return CX(tx)->status; }
static enum pod_abort_cause ford_abort_cause(const pod_txn *tx) { return CX(tx)->cause; }
static char *ford_message(pod_txn *tx) { return X(tx)->msg; }
static bool ford_touched_tables(const pod_txn *tx) { return CX(tx)->touched; }
static pod_db *ford_db(pod_txn *tx) { return X(tx)->db; }

static void ford_describe_conflict(const pod_txn *tx, char *out, size_t n)
{
    uint64_t w = CX(tx)->conflict_word;
    if (CX(tx)->unreachable)
        snprintf(out, n, "the lock service of compute node slot %u (host %u) did not answer "
                         "(lotus)", CX(tx)->unreachable, CX(tx)->unreachable - 1);
    else if (CX(tx)->lotus && CX(tx)->cause != POD_CAUSE_VALIDATION)
        snprintf(out, n, "a key locked by another transaction (lotus: in a compute node's lock "
                         "table)");
    else if (CX(tx)->too_old)
        snprintf(out, n, "the version of a record at the transaction's snapshot was overwritten "
                         "(dm.versions: %u)", CX(tx)->nver);
    else if (w & FW_LOCK)
        snprintf(out, n, "a record locked by compute node slot %u (host %u, incarnation %u)",
                 word_slot(w), word_slot(w) - 1, word_inc(w));
    else
        snprintf(out, n, "%s", CX(tx)->cause == POD_CAUSE_VALIDATION
                                   ? "a record read without a lock changed before commit"
                                   : "a record being inserted or removed");
}

/* The first start of the workers: join the store's compute nodes, and
 * recover this slot's previous run if it died. */
static int ford_start(pod_db *db, char *err, size_t errlen)
{
    struct record_store *rs = db->store;
    if (!rs->ops->member_join) return 0;
    struct rs_member prev;
    pod_err e;
    uint32_t bytes = db->opt.undo_log_bytes ? db->opt.undo_log_bytes : DEFAULT_LOG_BYTES;
    /* a log per worker and one for the admin worker (loaders, tests) */
    uint32_t nlogs = (uint32_t)db->opt.nworkers + 1;
    if (rs->ops->member_join(rs, (uint32_t)db->opt.host_id + 1, bytes, nlogs, &db->member, &prev,
                             &e) != 0) {
        snprintf(err, errlen, "%s", e.msg);
        return -1;
    }
    if (prev.slot) recover(db, rs, &prev);
    pod_info("%s: compute node slot %u (incarnation %u), %u undo logs of %u bytes", db->cc->name,
             db->member.slot, db->member.incarnation, db->member.nlogs, db->member.log_bytes);
    return 0;
}

/* motor: the pod's clock, a record of a table of its own whose word counts
 * commit timestamps (the first compute node makes it, the others find it). */
static int mv_clock(pod_db *db, char *err, size_t errlen)
{
    struct record_store *rs = db->store;
    const struct rs_ops *o = rs->ops;
    pod_err e;
    struct rs_table_def def = {.id = MV_CLOCK_TABLE, .key_size = 8, .tuple_size = 8,
                               .rows_hint = 1};
    if (o->table_add(rs, &def, &e) != 0) {
        snprintf(err, errlen, "motor's clock: %s", e.msg);
        return -1;
    }
    static const uint64_t key = 0;
    for (int tries = 0; tries < 100; tries++) {
        if (o->lookup(rs, MV_CLOCK_TABLE, &key, &db->clock) == RS_OK) return 0;
        rs_loc loc;
        if (o->alloc(rs, MV_CLOCK_TABLE, &key, &loc) != RS_OK) break;
        o->word_faa(rs, loc, MV_TS_FIRST); /* timestamps start past EMPTY and GONE */
        int st = o->index_insert(rs, MV_CLOCK_TABLE, &key, loc);
        if (st == RS_OK) {
            db->clock = loc;
            return 0;
        }
        o->free(rs, MV_CLOCK_TABLE, loc);
        if (st != RS_EXISTS) break;
    }
    snprintf(err, errlen, "motor: the pod's clock record cannot be made (the memory is full)");
    return -1;
}

static int ford_table_added(pod_db *db, pod_table *t, char *err, size_t errlen)
{
    struct record_store *rs = db->store;
    if (db->log) {
        snprintf(err, errlen, "%s does not log: a logging database runs tigon-2pl", db->cc->name);
        return -1;
    }
    if (db->opt.phantom_protection) {
        snprintf(err, errlen, "%s does not lock gaps: phantom_protection cannot run with it",
                 db->cc->name);
        return -1;
    }
    pod_err e;
    struct rs_table_def def = {.id = t->id, .key_size = t->key_size, .tuple_size = t->tuple_size,
                               .rows_hint = t->expected_rows};
    uint32_t nver = db_versions(db);
    if (nver) { /* motor: the store's tuple is the record's CVT */
        uint64_t bytes = (uint64_t)nver * mv_cell_bytes(t);
        if (bytes > (1u << 24)) {
            snprintf(err, errlen, "%s: %u versions of %u-byte tuples are %llu bytes, more than "
                     "a record holds (16 MiB)", t->name, nver, t->tuple_size,
                     (unsigned long long)bytes);
            return -1;
        }
        def.tuple_size = (uint32_t)bytes;
    }
    if (rs->ops->table_add(rs, &def, &e) != 0) {
        snprintf(err, errlen, "%s", e.msg);
        return -1;
    }
    return 0;
}

/* motor, lotus: the clock is found (or made) with the first table, before
 * any transaction runs. */
static int motor_table_added(pod_db *db, pod_table *t, char *err, size_t errlen)
{
    if (db->opt.versions < 2 || db->opt.versions > 255) {
        snprintf(err, errlen, "%s keeps 2..255 versions of a record, not %u", db->cc->name,
                 db->opt.versions);
        return -1;
    }
    if (!db->clock && mv_clock(db, err, errlen) != 0) return -1;
    return ford_table_added(db, t, err, errlen);
}

/* lotus, with the first table: a lock table the database's transactions
 * share (those of its admin worker too, which may run before the workers
 * start); start puts the lock service's in its place when the store has
 * members. */
static int lotus_table_added(pod_db *db, pod_table *t, char *err, size_t errlen)
{
    if (!db->cc_state) {
        struct lotus_db *L = calloc(1, sizeof *L);
        pod_err e;
        if (!L || !(L->table = lock_table_new(LOTUS_TABLE_BYTES, &e))) {
            free(L);
            snprintf(err, errlen, "lotus: out of memory for the lock table");
            return -1;
        }
        L->me = 1;
        L->ncn = 1;
        db->cc_state = L;
    }
    return motor_table_added(db, t, err, errlen);
}

/* lotus's janitor: a compute node whose run no longer holds its
 * connection died (or stopped). Its transactions' logs are rolled back or
 * forward (by this one, or by whoever claimed them: owner_check), then its
 * locks in this compute node's table go; the transactions here that hold
 * locks in its table abort at commit (gen). */
static void lotus_watch(struct lotus_db *L)
{
    const struct rs_ops *o = L->h->ops;
    for (uint32_t s = 1; s <= L->ncn && s < RS_MAX_MEMBERS; s++) {
        unsigned char name[RS_DIR_NAME_MAX];
        size_t len = sizeof name;
        uint32_t inc;
        bool connected;
        if (s == L->me || o->dir_lookup(L->h, s, name, &len, &inc, &connected) != 1 || connected ||
            L->done_inc[s] == inc)
            continue;
        if (L->seen_inc[s] != inc) {
            L->seen_inc[s] = inc;
            __atomic_fetch_add(&L->gen[s], 1, __ATOMIC_ACQ_REL);
        }
        struct rs_member dead;
        switch (o->owner_check(L->h, s, inc, &dead)) {
        case RS_OWNER_LIVE: continue; /* being recovered by another, or not yet seen dead */
        case RS_OWNER_RECOVER: recover(L->db, L->h, &dead); break;
        case RS_OWNER_STALE: break;
        }
        size_t n = lock_table_release_match(L->table, LOTUS_INC_MASK, LOTUS_RUN(s, inc));
        L->done_inc[s] = inc;
        pod_info("lotus: compute node slot %u (host %u, incarnation %u) is gone: %zu of its locks "
                 "given back here", s, s - 1, inc, n);
    }
}

static void *lotus_janitor(void *arg)
{
    struct lotus_db *L = arg;
    while (!__atomic_load_n(&L->stop, __ATOMIC_ACQUIRE)) {
        lotus_watch(L);
        for (int i = 0; i < LOTUS_WATCH_MS / 10 && !__atomic_load_n(&L->stop, __ATOMIC_ACQUIRE);
             i++)
            usleep(10000);
    }
    return NULL;
}

/* lotus: this compute node's lock service, after ford's start, when the
 * store has members; its previous run's locks given back at the others. */
static int lotus_start(pod_db *db, char *err, size_t errlen)
{
    if (ford_start(db, err, errlen) != 0) return -1;
    struct record_store *rs = db->store;
    const struct rs_ops *o = rs->ops;
    struct lotus_db *L = db->cc_state;
    if (!L) return 0; /* no table: no transaction takes a lock */
    pod_err e;
    L->provider = o->msg_provider && db->member.slot ? o->msg_provider(rs) : NULL;
    if (!L->provider) return 0;
    L->me = db->member.slot;
    L->ncn = db->opt.nhosts > 0 ? (uint32_t)db->opt.nhosts : 1;
    L->db = db;
    unsigned char name[RS_DIR_NAME_MAX];
    size_t len = sizeof name;
    uint32_t inc;
    bool connected;
    /* A previous run of this slot served locks: the transactions of the
     * others that hold some of them abort at commit once their janitor
     * finds it gone (LOTUS_WATCH_MS); serving only after LOTUS_GRACE_MS
     * leaves them that time (its table starts empty). */
    if (o->dir_lookup(rs, L->me, name, &len, &inc, &connected) == 1) {
        pod_info("lotus: this compute node's previous run served locks: serving in %d ms",
                 LOTUS_GRACE_MS);
        usleep(LOTUS_GRACE_MS * 1000);
    }
    L->svc = lock_service_start(&(struct lock_service_opts){.provider = L->provider,
                                                            .table_bytes = LOTUS_TABLE_BYTES},
                                &e);
    if (!L->svc) goto fail;
    lock_table_free(L->table); /* the admin worker's, empty between its transactions */
    L->table = lock_service_table(L->svc);
    len = sizeof name;
    if (lock_service_name(L->svc, name, &len, &e) != 0 ||
        o->dir_publish(rs, L->me, name, len, &e) != 0)
        goto fail;
    /* A previous run of this slot may hold locks at the others: its
     * transactions are rolled back or forward (ford_start), their locks go. */
    struct lock_client *c = lock_client_new(L->provider, L->me, UINT32_MAX, LOTUS_TIMEOUT_MS, &e);
    if (!c) goto fail;
    for (uint32_t s = 1; s <= L->ncn; s++) {
        len = sizeof name;
        size_t released = 0;
        if (s == L->me || o->dir_lookup(rs, s, name, &len, &inc, &connected) != 1 || !connected)
            continue;
        if (lock_client_owner(c, s, name, len, &e) != 0 ||
            lock_client_release_cn(c, s, &released, &e) != 0)
            pod_warn("lotus: compute node slot %u did not give back this one's previous locks: %s",
                     s, e.msg);
        else if (released)
            pod_info("lotus: compute node slot %u gave back %zu locks of this one's previous run",
                     s, released);
    }
    lock_client_free(c);
    if (!(L->h = o->attach ? o->attach(rs, &e) : rs)) goto fail;
    if (pthread_create(&L->janitor, NULL, lotus_janitor, L) != 0) {
        pod_err_set(&e, "cannot start the janitor thread");
        goto fail;
    }
    L->janitor_on = true;
    pod_info("lotus: lock service of compute node slot %u of %u up (%u MiB lock table)", L->me,
             L->ncn, LOTUS_TABLE_BYTES >> 20);
    return 0;
fail:
    snprintf(err, errlen, "lotus: %s", e.msg);
    return -1;
}

static uint64_t lotus_messages(pod_db *db)
{
    struct lotus_db *L = db->cc_state;
    return L ? __atomic_load_n(&L->messages, __ATOMIC_RELAXED) : 0;
}

static void lotus_stop(pod_db *db)
{
    struct lotus_db *L = db->cc_state;
    if (!L) return;
    if (L->janitor_on) {
        __atomic_store_n(&L->stop, true, __ATOMIC_RELEASE);
        pthread_join(L->janitor, NULL);
    }
    if (L->svc) lock_service_stop(L->svc);
    else lock_table_free(L->table);
    free(L);
    db->cc_state = NULL;
}

/* The operations ford and motor share. */
#define FORD_FAMILY_OPS \
    .txn_new = ford_txn_new, \
    .txn_free = ford_txn_free, \
    .begin = ford_begin, \
    .commit = ford_commit, \
    .abort = ford_abort, \
    .status = ford_status, \
    .abort_cause = ford_abort_cause, \
    .message = ford_message, \
    .describe_conflict = ford_describe_conflict, \
    .touched_tables = ford_touched_tables, \
    .db = ford_db, \
    .get = ford_get, \
    .get_ref = ford_get_ref, \
    .update_range = ford_update_range, \
    .put = ford_put, \
    .insert = ford_insert, \
    .remove = ford_remove, \
    .prefetch = ford_prefetch, \
    .scan = ford_scan

const struct cc_ops cc_ford = {
    .name = "ford",
    .start = ford_start,
    .table_added = ford_table_added,
    FORD_FAMILY_OPS,
};

/* motor: the same operations over multi-versioned records (struct ford_txn.nver). */
const struct cc_ops cc_motor = {
    .name = "motor",
    .start = ford_start,
    .table_added = motor_table_added,
    FORD_FAMILY_OPS,
};

/* lotus: motor's records, the locks in the compute nodes' lock tables. */
const struct cc_ops cc_lotus = {
    .name = "lotus",
    .start = lotus_start,
    .stop = lotus_stop,
    .messages = lotus_messages,
    .table_added = lotus_table_added,
    FORD_FAMILY_OPS,
};
