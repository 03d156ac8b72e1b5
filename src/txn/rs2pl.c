/* rs-2pl: strict two-phase locking with NO_WAIT and next-key locking over a
 * record store (src/store/record_store.h). The rules are those of txn.c
 * (tigon-2pl), with the locks in the record words (cxl/record.h: the write
 * bit and the reader count) and every record reached by location through
 * the store's operations only, so that the protocol runs unchanged over any
 * memory a store reaches.
 *
 *  1. Every record a transaction reads or writes is locked by it until
 *     commit or abort; a lock that is taken fails the operation at once
 *     with POD_CONFLICT (NO_WAIT).
 *  2. A transaction works on private copies of the tuples it locked (read
 *     once, under the lock); commit writes the bytes it changed back and
 *     then releases its locks, as one batch. Abort writes nothing.
 *  3. An insert allocates a record, locks it exclusively, marks its row
 *     invalid and enters it in the index; commit makes it valid, abort
 *     takes it out again. A delete keeps the record in the index, locked,
 *     until commit marks it invalid and removes it. A record in the index
 *     whose lock was taken and whose row is invalid is dead: the operation
 *     starts over.
 *  4. Next-key locking: the lock on key k covers the gap below k down to its
 *     predecessor; the table's sentinel record (in no index entry) covers
 *     the gap after the last key. Scans lock every key they visit and the
 *     key after the range; a lookup of a missing key locks the next key; an
 *     insert takes an instant exclusive lock on the next key. After locking
 *     a key found by a neighbour search the search is repeated, and the step
 *     is retried if another key appeared meanwhile.
 * Records are reclaimed by the store (record_store.h, free): a location a
 * transaction found stays safe to look at.
 *
 * A store without an ordered index (a hash: the dm store) serves scans by
 * walking the table's index: the keys in the range are collected, sorted
 * and then each is found and locked as a point read. Such a store cannot
 * run next-key locking, so the database refuses phantom protection on it,
 * and such a scan neither sees nor blocks inserts that commit after its walk.
 *
 * Not here yet: logging (a database that logs runs tigon-2pl), pod_prefetch
 * (a hint; it returns POD_OK), the benchmark-only no_locking option. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cxl/record.h"
#include "storage/table.h"
#include "store/record_store.h"
#include "txn/cc.h"
#include "txn/op_buf.h"
#include "txn/walk_scan.h"
#include "util/arena.h"

#define OP_RESTARTS 1000 /* bound on "start this operation over" loops */
/* The access set is searched linearly up to this many entries, through a
 * hash of locations beyond (audits and scans lock thousands). */
#define LINEAR_ACCESSES 16u

enum { HELD_NONE = 0, HELD_READ = 1, HELD_WRITE = 2 };
enum {
    F_INSERTED = 1 << 0, /* created by this transaction */
    F_UPDATED = 1 << 1,  /* bytes ulo..uhi-1 of the copy were written */
    F_DELETED = 1 << 2,
};

/* A record this transaction locked. */
struct access {
    rs_loc loc;
    pod_table *table;
    uint8_t held, flags;
    bool loaded;          /* copy holds the tuple (head too) */
    uint32_t ulo, uhi;
    unsigned char *copy;  /* the tuple (tuple_size bytes) */
    unsigned char *key;   /* NULL: the table's sentinel */
    struct rs_row_head head;
};

struct rs_txn {
    struct cc_txn_head head;
    pod_db *db;
    struct pod_worker *w;
    struct record_store *rs;
    struct access *acc;
    uint32_t nacc, cap;
    /* Open addressing on loc once nacc passes LINEAR_ACCESSES: a slot
     * holds an index into acc + 1, 0 when empty; hcap (a power of two, 0:
     * not in use) of hslots' hbuf. */
    uint32_t *hslots, hcap, hbuf;
    struct arena mem;     /* keys and tuple copies of this attempt */
    struct op_buf ops;    /* commit's batch */
    int status;
    enum pod_abort_cause cause;
    bool touched;
    char msg[CC_MSG_LEN];
};

static inline struct rs_txn *X(pod_txn *tx) { return (struct rs_txn *)(void *)tx; }
static inline const struct rs_txn *CX(const pod_txn *tx)
{
    return (const struct rs_txn *)(const void *)tx;
}
static inline const struct rs_ops *OPS(const struct rs_txn *x) { return x->rs->ops; }

static int conflict(struct rs_txn *x, enum pod_abort_cause cause)
{
    if (x->status == POD_OK) {
        x->status = POD_CONFLICT;
        x->cause = cause;
    }
    return POD_CONFLICT;
}

static int nomem(struct rs_txn *x, const char *what)
{
    x->status = POD_E_NOMEM;
    return pod_txn_fail((pod_txn *)(void *)x, POD_E_NOMEM, "out of memory for %s", what);
}

/* ---- locks in the record word ------------------------------------------------ */

/* The CASes below start from a guess of the word (no lock held, no flag
 * set: the common case) rather than a read of it: over RDMA that saves a
 * round trip, and a wrong guess costs nothing, as the failed CAS returns
 * the word. */
static bool try_lock(struct rs_txn *x, rs_loc loc, uint8_t want)
{
    uint64_t w = 0;
    for (;;) {
        uint64_t nw;
        if (want == HELD_WRITE) {
            if (w & REC_LOCK_MASK) return false;
            nw = w | REC_LOCK_W;
        } else {
            if ((w & REC_LOCK_W) || rec_readers(w) == REC_LOCK_R_MASK >> REC_LOCK_R_SHIFT)
                return false;
            nw = w + REC_LOCK_R_ONE;
        }
        if (OPS(x)->word_cas(x->rs, loc, &w, nw)) return true;
    }
}

/* Shared (ours alone) to exclusive. */
static bool try_upgrade(struct rs_txn *x, rs_loc loc)
{
    uint64_t w = REC_LOCK_R_ONE; /* our read lock alone */
    for (;;) {
        if ((w & REC_LOCK_W) || rec_readers(w) != 1) return false;
        if (OPS(x)->word_cas(x->rs, loc, &w, (w - REC_LOCK_R_ONE) | REC_LOCK_W)) return true;
    }
}

/* What releasing a lock of mode held adds to the word. */
static uint64_t release_add(uint8_t held)
{
    return held == HELD_WRITE ? (uint64_t)0 - REC_LOCK_W : (uint64_t)0 - REC_LOCK_R_ONE;
}

static void unlock(struct rs_txn *x, rs_loc loc, uint8_t held)
{
    OPS(x)->word_faa(x->rs, loc, release_add(held));
}

/* Exclusive (taken by try_upgrade) back to shared. */
static void downgrade(struct rs_txn *x, rs_loc loc)
{
    OPS(x)->word_faa(x->rs, loc, REC_LOCK_R_ONE - REC_LOCK_W);
}

/* ---- the access set ------------------------------------------------------------ */

static uint32_t slot_of(const struct rs_txn *x, rs_loc loc)
{
    return (uint32_t)((loc * 0x9E3779B97F4A7C15ull) >> 32) & (x->hcap - 1);
}

static struct access *find_access(struct rs_txn *x, rs_loc loc)
{
    if (!x->hcap) {
        for (uint32_t i = x->nacc; i-- > 0;)
            if (x->acc[i].loc == loc) return &x->acc[i];
        return NULL;
    }
    for (uint32_t h = slot_of(x, loc);; h = (h + 1) & (x->hcap - 1)) {
        uint32_t v = x->hslots[h];
        if (!v) return NULL;
        if (x->acc[v - 1].loc == loc) return &x->acc[v - 1];
    }
}

static void hash_put(struct rs_txn *x, uint32_t i)
{
    uint32_t h = slot_of(x, x->acc[i].loc);
    while (x->hslots[h]) h = (h + 1) & (x->hcap - 1);
    x->hslots[h] = i + 1;
}

/* After acc[nacc - 1] was added: index it once the set is past linear
 * search, at most half full. False when memory ran out. */
static bool hash_added(struct rs_txn *x)
{
    if (x->nacc <= LINEAR_ACCESSES) return true;
    if (x->hcap && 2 * x->nacc <= x->hcap) {
        hash_put(x, x->nacc - 1);
        return true;
    }
    uint32_t cap = x->hcap ? 2 * x->hcap : 4 * LINEAR_ACCESSES;
    while (2 * x->nacc > cap) cap *= 2;
    if (cap > x->hbuf) {
        uint32_t *b = realloc(x->hslots, cap * sizeof *b);
        if (!b) return false;
        x->hslots = b;
        x->hbuf = cap;
    }
    x->hcap = cap;
    memset(x->hslots, 0, cap * sizeof *x->hslots);
    for (uint32_t i = 0; i < x->nacc; i++) hash_put(x, i);
    return true;
}

/* acc[nacc - 1] is about to be dropped. Emptying its slot is enough: the
 * slot was free when every older access was placed, so it lies on no older
 * access's probe sequence (as in txn.c). */
static void hash_drop_last(struct rs_txn *x)
{
    if (!x->hcap) return;
    for (uint32_t h = slot_of(x, x->acc[x->nacc - 1].loc);; h = (h + 1) & (x->hcap - 1))
        if (x->hslots[h] == x->nacc) {
            x->hslots[h] = 0;
            return;
        }
}

static struct access *add_access(struct rs_txn *x, rs_loc loc, pod_table *t, uint8_t held,
                                 const void *key)
{
    if (x->nacc == x->cap) {
        uint32_t cap = x->cap ? x->cap * 2 : 64;
        struct access *a = realloc(x->acc, cap * sizeof *a);
        if (!a) return NULL;
        x->acc = a;
        x->cap = cap;
    }
    unsigned char *k = NULL, *copy = arena_alloc(&x->mem, t->tuple_size ? t->tuple_size : 1);
    if (!copy) return NULL;
    if (key) {
        if (!(k = arena_alloc(&x->mem, t->key_size))) return NULL;
        memcpy(k, key, t->key_size);
    }
    struct access *a = &x->acc[x->nacc++];
    *a = (struct access){.loc = loc, .table = t, .held = held, .copy = copy, .key = k};
    if (!hash_added(x)) {
        x->nacc--;
        return NULL;
    }
    return a;
}

/* Take (or keep) a lock of mode want on the record at loc (key: its key, NULL
 * for the sentinel). *fresh: this call added the access (so that a step
 * that turns out not to need it may give it back: drop_fresh). */
static int lock_rec(struct rs_txn *x, pod_table *t, rs_loc loc, const void *key, uint8_t want,
                    enum pod_abort_cause read_cause, struct access **acc, bool *fresh)
{
    *fresh = false;
    struct access *a = find_access(x, loc);
    if (a && a->held >= want) {
        *acc = a;
        return POD_OK;
    }
    if (a) { /* shared, want exclusive */
        if (!try_upgrade(x, loc)) return conflict(x, POD_CAUSE_UPGRADE);
        a->held = HELD_WRITE;
        *acc = a;
        return POD_OK;
    }
    if (!try_lock(x, loc, want))
        return conflict(x, want == HELD_WRITE ? POD_CAUSE_WRITE_LOCK : read_cause);
    if (!(a = add_access(x, loc, t, want, key))) {
        unlock(x, loc, want);
        return nomem(x, "the access set");
    }
    *acc = a;
    *fresh = true;
    return POD_OK;
}

/* Give back the newest access, added by this step for nothing. */
static void drop_fresh(struct rs_txn *x, struct access *a, bool fresh)
{
    if (!fresh || a != &x->acc[x->nacc - 1]) return;
    unlock(x, a->loc, a->held);
    hash_drop_last(x);
    x->nacc--;
}

/* The tuple and header of a locked record, read once. */
static void load(struct rs_txn *x, struct access *a)
{
    if (a->loaded || !a->key) return;
    OPS(x)->row_read(x->rs, a->loc, &a->head, a->copy, 0, a->table->tuple_size);
    a->loaded = true;
}

/* Valid for this transaction: its own insert, or a committed row it did not delete. */
static bool valid_for_us(struct rs_txn *x, struct access *a)
{
    if (a->flags & F_INSERTED) return !(a->flags & F_DELETED);
    load(x, a);
    return a->head.valid && !(a->flags & F_DELETED);
}

/* ---- next-key locking ----------------------------------------------------------- */

static rs_loc sentinel_of(const struct rs_txn *x, const pod_table *t)
{
    return OPS(x)->sentinel(x->rs, t->id);
}

/* The record after key (inclusive: at or after; key NULL: the first), its
 * key to key_out; the sentinel (*end) when there is none. */
static rs_loc next_rec(struct rs_txn *x, pod_table *t, const void *key, bool inclusive,
                       void *key_out, bool *end)
{
    rs_loc loc;
    *end = OPS(x)->neighbour(x->rs, t->id, key, inclusive, false, key_out, &loc) != RS_OK;
    return *end ? sentinel_of(x, t) : loc;
}

/* Lock the gap after key (want), until commit: the search is repeated after
 * the lock until the locked record is still the next. */
static int lock_gap_after(struct rs_txn *x, pod_table *t, const void *key, uint8_t want)
{
    unsigned char k1[BT_MAX_KEY_WIDTH], k2[BT_MAX_KEY_WIDTH];
    for (int tries = 0; tries < OP_RESTARTS; tries++) {
        bool end1, end2, fresh;
        rs_loc r = next_rec(x, t, key, false, k1, &end1);
        struct access *a;
        int rc = lock_rec(x, t, r, end1 ? NULL : k1, want, POD_CAUSE_NEXT_KEY, &a, &fresh);
        if (rc) {
            if (rc == POD_CONFLICT) x->cause = POD_CAUSE_NEXT_KEY;
            return rc;
        }
        if (next_rec(x, t, key, false, k2, &end2) == r) return POD_OK;
        drop_fresh(x, a, fresh);
    }
    return conflict(x, POD_CAUSE_NEXT_KEY);
}

/* ---- point operations --------------------------------------------------------- */

static int check_op(struct rs_txn *x, pod_table *t, const void *key)
{
    x->touched = true;
    if (x->status != POD_OK) return x->status;
    return cc_check_key((pod_txn *)(void *)x, x->db, t, key);
}

/* Find and lock key's record in mode want: *acc, or NULL when the key is
 * missing for this transaction (then, with phantom protection, the gap
 * where it would be is locked shared). */
static int find_locked(struct rs_txn *x, pod_table *t, const void *key, uint8_t want,
                       struct access **acc)
{
    *acc = NULL;
    for (int tries = 0; tries < OP_RESTARTS; tries++) {
        rs_loc loc;
        if (OPS(x)->lookup(x->rs, t->id, key, &loc) == RS_OK) {
            struct access *a = find_access(x, loc);
            if (a && (a->flags & F_DELETED)) return POD_OK; /* our own delete */
            bool fresh;
            int rc = lock_rec(x, t, loc, key, want, POD_CAUSE_READ_LOCK, &a, &fresh);
            if (rc) return rc;
            if (valid_for_us(x, a)) {
                *acc = a;
                return POD_OK;
            }
            drop_fresh(x, a, fresh); /* dead: its remover is taking it out */
            continue;
        }
        if (x->db->opt.phantom_protection) {
            int rc = lock_gap_after(x, t, key, HELD_READ);
            if (rc) return rc;
            /* The key may have been inserted before the gap was locked. */
            if (OPS(x)->lookup(x->rs, t->id, key, &loc) == RS_OK) continue;
        }
        return POD_OK;
    }
    return conflict(x, POD_CAUSE_READ_LOCK);
}

/* Bytes lo..hi-1 of the copy will be written. */
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

static int rs_get(pod_txn *tx, pod_table *t, const void *key, void *out, bool for_update)
{
    struct rs_txn *x = X(tx);
    int rc = check_op(x, t, key);
    if (rc) return rc;
    struct access *a;
    if ((rc = find_locked(x, t, key, for_update ? HELD_WRITE : HELD_READ, &a))) return rc;
    if (!a) return POD_NOT_FOUND;
    if (out) memcpy(out, a->copy, t->tuple_size);
    return POD_OK;
}

static int rs_get_ref(pod_txn *tx, pod_table *t, const void *key, const void **tuple)
{
    struct rs_txn *x = X(tx);
    int rc = check_op(x, t, key);
    if (rc) return rc;
    if (!tuple) return pod_txn_fail(tx, POD_E_INVALID, "%s: tuple is NULL", t->name);
    struct access *a;
    if ((rc = find_locked(x, t, key, HELD_READ, &a))) return rc;
    if (!a) return POD_NOT_FOUND;
    *tuple = a->copy;
    return POD_OK;
}

static int rs_update_range(pod_txn *tx, pod_table *t, const void *key, bool whole, uint32_t off,
                           uint32_t len, void **tuple)
{
    struct rs_txn *x = X(tx);
    int rc = check_op(x, t, key);
    if (rc) return rc;
    if (!whole && (rc = cc_check_range(tx, t, off, len))) return rc;
    if (!tuple) return pod_txn_fail(tx, POD_E_INVALID, "%s: tuple is NULL", t->name);
    struct access *a;
    if ((rc = find_locked(x, t, key, HELD_WRITE, &a))) return rc;
    if (!a) return POD_NOT_FOUND;
    if (whole) written(a, 0, t->tuple_size);
    else written(a, off, off + len);
    *tuple = a->copy;
    return POD_OK;
}

static int rs_put(pod_txn *tx, pod_table *t, const void *key, const void *tuple)
{
    struct rs_txn *x = X(tx);
    int rc = check_op(x, t, key);
    if (rc) return rc;
    if (!tuple) return pod_txn_fail(tx, POD_E_INVALID, "%s: tuple is NULL", t->name);
    struct access *a;
    if ((rc = find_locked(x, t, key, HELD_WRITE, &a))) return rc;
    if (!a) return POD_NOT_FOUND;
    memcpy(a->copy, tuple, t->tuple_size);
    written(a, 0, t->tuple_size);
    return POD_OK;
}

static int rs_remove(pod_txn *tx, pod_table *t, const void *key)
{
    struct rs_txn *x = X(tx);
    int rc = check_op(x, t, key);
    if (rc) return rc;
    struct access *a;
    if ((rc = find_locked(x, t, key, HELD_WRITE, &a))) return rc;
    if (!a) return POD_NOT_FOUND;
    a->flags |= F_DELETED; /* stays in the index, locked, until commit */
    return POD_OK;
}

static int rs_insert(pod_txn *tx, pod_table *t, const void *key, const void *tuple)
{
    struct rs_txn *x = X(tx);
    int rc = check_op(x, t, key);
    if (rc) return rc;
    if (!tuple) return pod_txn_fail(tx, POD_E_INVALID, "%s: tuple is NULL", t->name);
    for (int tries = 0; tries < OP_RESTARTS; tries++) {
        rs_loc loc;
        if (OPS(x)->lookup(x->rs, t->id, key, &loc) == RS_OK) {
            struct access *a = find_access(x, loc);
            if (a && (a->flags & F_DELETED)) {
                /* Deleted and inserted again by us: an update of the row. */
                a->flags &= (uint8_t)~F_DELETED;
                memcpy(a->copy, tuple, t->tuple_size);
                written(a, 0, t->tuple_size);
                return POD_OK;
            }
            /* Present: a shared lock makes "exists" hold until commit. */
            bool fresh;
            if ((rc = lock_rec(x, t, loc, key, HELD_READ, POD_CAUSE_READ_LOCK, &a, &fresh)))
                return rc;
            if (valid_for_us(x, a)) return POD_EXISTS;
            drop_fresh(x, a, fresh);
            continue;
        }
        /* The gap must not be locked by anyone else: an instant exclusive
         * lock on the next key (kept if this transaction already held it). */
        struct access *gap = NULL, *shared = NULL; /* ours shared, exclusive for now */
        bool gap_fresh = false;
        unsigned char k1[BT_MAX_KEY_WIDTH];
        if (x->db->opt.phantom_protection) {
            bool end, end2;
            rs_loc nr = next_rec(x, t, key, false, k1, &end);
            struct access *had = find_access(x, nr);
            if (had && had->held == HELD_READ) {
                /* Ours shared does not keep other scanners out of the gap:
                 * exclusive for the insert, then shared again. */
                if (!try_upgrade(x, nr)) return conflict(x, POD_CAUSE_NEXT_KEY);
                shared = had;
            } else if (!had) {
                if ((rc = lock_rec(x, t, nr, end ? NULL : k1, HELD_WRITE, POD_CAUSE_NEXT_KEY,
                                   &gap, &gap_fresh))) {
                    x->cause = POD_CAUSE_NEXT_KEY;
                    return rc;
                }
            }
            if (next_rec(x, t, key, false, k1, &end2) != nr) {
                if (gap) drop_fresh(x, gap, gap_fresh);
                if (shared) downgrade(x, shared->loc);
                continue;
            }
        }
        int st = OPS(x)->alloc(x->rs, t->id, key, &loc);
        if (st == RS_OK) {
            uint64_t zero = 0;
            OPS(x)->word_cas(x->rs, loc, &zero, REC_LOCK_W); /* nobody knows it yet */
            struct rs_row_head h = {0, 0};
            OPS(x)->row_write(x->rs, loc, &h, tuple, 0, t->tuple_size);
            st = OPS(x)->index_insert(x->rs, t->id, key, loc);
            if (st != RS_OK) OPS(x)->free(x->rs, t->id, loc);
        }
        /* The new key's own lock covers the gap below it from now on. */
        if (gap) drop_fresh(x, gap, gap_fresh);
        if (shared) downgrade(x, shared->loc);
        if (st == RS_EXISTS) continue; /* raced with an insert of the same key */
        if (st != RS_OK) return nomem(x, "a record");
        struct access *a = add_access(x, loc, t, HELD_WRITE, key);
        if (!a) { /* cannot track it: take it out again */
            OPS(x)->index_remove(x->rs, t->id, key);
            OPS(x)->free(x->rs, t->id, loc);
            return nomem(x, "the access set");
        }
        memcpy(a->copy, tuple, t->tuple_size);
        a->flags = F_INSERTED;
        a->loaded = true;
        return POD_OK;
    }
    return conflict(x, POD_CAUSE_NEXT_KEY);
}

static int rs_prefetch(pod_txn *tx, pod_table *t, const void *keys, uint32_t n)
{
    (void)n;
    return check_op(X(tx), t, keys);
}

/* ---- scans ---------------------------------------------------------------------- */

struct scan {
    struct rs_txn *x;
    pod_table *t;
    const void *lo, *hi;
    uint32_t limit, count;
    uint8_t want;
    pod_scan_fn fn;
    void *arg;
};

/* Visit one record of the range: <0 a status, 0 go on, 1 stop. */
static int visit(struct scan *s, struct access *a)
{
    if (a->flags & F_DELETED) return 0;
    s->count++;
    bool go_on = s->fn ? s->fn(s->arg, a->key, a->copy) : true;
    return (!go_on || (s->limit && s->count >= s->limit)) ? 1 : 0;
}

/* As txn.c's scan_forward / scan_backward: forward, each step's next key is
 * searched again after its lock; backward, the gap above hi is locked
 * before the first step. */
static int scan_dir(struct scan *s, bool backward)
{
    struct rs_txn *x = s->x;
    pod_table *t = s->t;
    bool phantom = x->db->opt.phantom_protection;
    unsigned char cur[BT_MAX_KEY_WIDTH], k1[BT_MAX_KEY_WIDTH], k2[BT_MAX_KEY_WIDTH];
    const void *from = backward ? s->hi : s->lo;
    if (backward && phantom) { /* the gap above hi: the key after hi, or the sentinel */
        struct access *a;
        bool fresh;
        int rc = s->hi ? lock_gap_after(x, t, s->hi, HELD_READ)
                       : lock_rec(x, t, sentinel_of(x, t), NULL, HELD_READ, POD_CAUSE_NEXT_KEY,
                                  &a, &fresh);
        if (rc) return rc;
    }
    bool have_cur = from != NULL, inclusive = true;
    if (have_cur) memcpy(cur, from, t->key_size);
    int restarts = 0;
    for (;;) {
        rs_loc r;
        bool end = OPS(x)->neighbour(x->rs, t->id, have_cur ? cur : NULL, inclusive, backward,
                                     k1, &r) != RS_OK;
        bool past = end || (backward ? s->lo && memcmp(k1, s->lo, t->key_size) < 0
                                     : s->hi && memcmp(k1, s->hi, t->key_size) > 0);
        if (past && (backward || !phantom)) return POD_OK;
        if (end) r = sentinel_of(x, t);
        /* Forward past the range: the next key's lock covers the last gap. */
        uint8_t mode = past ? HELD_READ : s->want;
        struct access *a;
        bool fresh;
        int rc = lock_rec(x, t, r, end ? NULL : k1, mode,
                          past ? POD_CAUSE_NEXT_KEY : POD_CAUSE_READ_LOCK, &a, &fresh);
        if (rc) return rc;
        if (phantom && !backward) {
            rs_loc again;
            bool end2 = OPS(x)->neighbour(x->rs, t->id, have_cur ? cur : NULL, inclusive, false,
                                          k2, &again) != RS_OK;
            if ((end2 ? sentinel_of(x, t) : again) != r) { /* a key appeared before r */
                drop_fresh(x, a, fresh);
                if (++restarts > OP_RESTARTS) return conflict(x, POD_CAUSE_NEXT_KEY);
                continue;
            }
        }
        if (past) return POD_OK;
        if (!valid_for_us(x, a) && !(a->flags & F_DELETED)) { /* dead: being removed */
            drop_fresh(x, a, fresh);
            if (++restarts > OP_RESTARTS) return conflict(x, POD_CAUSE_READ_LOCK);
            continue;
        }
        memcpy(cur, k1, t->key_size);
        have_cur = true;
        inclusive = false;
        if ((rc = visit(s, a))) return rc < 0 ? rc : POD_OK;
    }
}

/* A scan over a store without an ordered index: walk it, sort the keys in
 * the range, then find and lock each as a point read (a key gone since the
 * walk is skipped; phantom protection is off on such a store). */
static int scan_walked(struct scan *s, bool backward)
{
    struct rs_txn *x = s->x;
    pod_table *t = s->t;
    unsigned char *keys;
    size_t n;
    if (walk_scan_keys(x->rs, t->id, t->key_size, s->lo, s->hi, &keys, &n) != RS_OK)
        return nomem(x, "a scan");
    int rc = POD_OK;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *key = keys + (backward ? n - 1 - i : i) * t->key_size;
        struct access *a;
        if ((rc = find_locked(x, t, key, s->want, &a))) break;
        if (!a) continue;
        if ((rc = visit(s, a))) {
            if (rc > 0) rc = POD_OK; /* the callback or the limit ended it */
            break;
        }
    }
    free(keys);
    return rc;
}

static int rs_scan(pod_txn *tx, pod_table *t, const void *lo, const void *hi, uint32_t limit,
                   unsigned flags, pod_scan_fn fn, void *arg)
{
    struct rs_txn *x = X(tx);
    x->touched = true;
    if (x->status != POD_OK) return x->status;
    uint32_t part;
    int rc = cc_check_scan(tx, x->db, t, lo, hi, &part);
    if (rc) return rc < 0 ? rc : POD_OK;
    struct scan s = {.x = x, .t = t, .lo = lo, .hi = hi, .limit = limit, .fn = fn, .arg = arg,
                     .want = (flags & POD_SCAN_FOR_UPDATE) ? HELD_WRITE : HELD_READ};
    if (!OPS(x)->ordered) return scan_walked(&s, flags & POD_SCAN_REVERSE);
    return scan_dir(&s, flags & POD_SCAN_REVERSE);
}

/* ---- commit and abort ----------------------------------------------------------- */

static void end_attempt(struct rs_txn *x)
{
    x->nacc = 0;
    x->hcap = 0;
}

/* Release every lock (one by one when the batch cannot be had). */
static void release_all(struct rs_txn *x, uint32_t n)
{
    for (uint32_t i = 0; i < x->nacc; i++) {
        struct access *a = &x->acc[i];
        if (a->held == HELD_NONE) continue;
        struct rs_op *o = op_buf_next(&x->ops, &n);
        if (!o) {
            unlock(x, a->loc, a->held);
            continue;
        }
        o->kind = RS_OP_FAA;
        o->loc = a->loc;
        o->add = release_add(a->held);
    }
    if (n) OPS(x)->batch(x->rs, x->ops.ops, n);
}

static void rs_commit(pod_txn *tx)
{
    struct rs_txn *x = X(tx);
    uint64_t epoch = x->db->epoch;
    uint32_t n = 0;
    /* The rows first, then (release_all) the locks: one batch. */
    for (uint32_t i = 0; i < x->nacc; i++) {
        struct access *a = &x->acc[i];
        if (!(a->flags & (F_INSERTED | F_UPDATED | F_DELETED))) continue;
        uint64_t base = (a->flags & F_INSERTED) ? 0 : a->head.epoch_version;
        a->head.epoch_version = txn_next_epoch_version(base, epoch);
        a->head.valid = !(a->flags & F_DELETED);
        if (a->flags & F_DELETED) {
            OPS(x)->row_write(x->rs, a->loc, &a->head, NULL, 0, 0);
            OPS(x)->index_remove(x->rs, a->table->id, a->key);
            OPS(x)->free(x->rs, a->table->id, a->loc);
            continue;
        }
        uint32_t lo = (a->flags & F_INSERTED) ? 0 : a->ulo;
        uint32_t hi = (a->flags & F_INSERTED) ? a->table->tuple_size : a->uhi;
        struct rs_op *o = op_buf_next(&x->ops, &n);
        if (!o) { /* no room for the batch: now */
            OPS(x)->row_write(x->rs, a->loc, &a->head, a->copy + lo, lo, hi - lo);
            continue;
        }
        *o = (struct rs_op){.kind = RS_OP_WRITE, .loc = a->loc, .head = &a->head,
                            .buf = a->copy + lo, .off = lo, .len = hi - lo};
    }
    release_all(x, n);
    end_attempt(x);
}

static void rs_abort(pod_txn *tx)
{
    struct rs_txn *x = X(tx);
    for (uint32_t i = x->nacc; i-- > 0;) {
        struct access *a = &x->acc[i];
        if (!(a->flags & F_INSERTED)) continue;
        /* Never valid: out of the index, and the record is given back. */
        OPS(x)->index_remove(x->rs, a->table->id, a->key);
        OPS(x)->free(x->rs, a->table->id, a->loc);
    }
    release_all(x, 0);
    end_attempt(x);
}

/* ---- lifecycle ------------------------------------------------------------------ */

static pod_txn *rs_txn_new(pod_db *db, struct pod_worker *w)
{
    struct rs_txn *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->head.cc = &cc_rs_2pl;
    x->db = db;
    x->w = w;
    x->rs = cc_store_handle(db, w);
    return (pod_txn *)(void *)x;
}

static void rs_txn_free(pod_txn *tx)
{
    struct rs_txn *x = X(tx);
    arena_free(&x->mem);
    free(x->acc);
    free(x->hslots);
    op_buf_free(&x->ops);
    free(x);
}

static void rs_begin(pod_txn *tx)
{
    struct rs_txn *x = X(tx);
    x->nacc = 0;
    x->hcap = 0;
    x->status = POD_OK;
    x->touched = false;
    x->msg[0] = 0;
    arena_reset(&x->mem);
}

static int rs_status(const pod_txn *tx) { return CX(tx)->status; }
static enum pod_abort_cause rs_abort_cause(const pod_txn *tx) { return CX(tx)->cause; }
static char *rs_message(pod_txn *tx) { return X(tx)->msg; }
static bool rs_touched_tables(const pod_txn *tx) { return CX(tx)->touched; }
static pod_db *rs_db(pod_txn *tx) { return X(tx)->db; }

/* The table's records in the store (with its sentinel: record_store.h). */
static int rs_table_added(pod_db *db, pod_table *t, char *err, size_t errlen)
{
    struct record_store *rs = db->store;
    if (db->log) {
        snprintf(err, errlen, "rs-2pl does not log yet: a logging database runs tigon-2pl");
        return -1;
    }
    if (db->opt.phantom_protection && !rs->ops->ordered) {
        snprintf(err, errlen, "the %s record store has no ordered index: next-key locking "
                 "(phantom_protection) cannot run on it", rs->ops->name);
        return -1;
    }
    pod_err e;
    struct rs_table_def def = {.id = t->id, .key_size = t->key_size, .tuple_size = t->tuple_size,
                               .rows_hint = t->expected_rows};
    if (rs->ops->table_add(rs, &def, &e) != 0) {
        snprintf(err, errlen, "%s", e.msg);
        return -1;
    }
    return 0;
}

const struct cc_ops cc_rs_2pl = {
    .name = "rs-2pl",
    .txn_new = rs_txn_new,
    .txn_free = rs_txn_free,
    .begin = rs_begin,
    .commit = rs_commit,
    .abort = rs_abort,
    .status = rs_status,
    .abort_cause = rs_abort_cause,
    .message = rs_message,
    .touched_tables = rs_touched_tables,
    .db = rs_db,
    .table_added = rs_table_added,
    .get = rs_get,
    .get_ref = rs_get_ref,
    .update_range = rs_update_range,
    .put = rs_put,
    .insert = rs_insert,
    .remove = rs_remove,
    .prefetch = rs_prefetch,
    .scan = rs_scan,
};
