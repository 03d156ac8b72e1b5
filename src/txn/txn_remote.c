/* Transactions on another host's partitions (Tigon Algorithm 1, §3.4):
 * find the tuple in the owner's CXL index, lock its HWcc record (NO_WAIT),
 * read its SWcc row into a private copy, write the copy back at commit. A
 * tuple that is not in CXL memory is requested from the owner over the
 * rings (src/pod/movement.c serves the request), then looked up again.
 *
 * Next-key locking (§3.4.2) runs on the CXL index: the gap between a key x
 * and its next CXL key y is known to hold no key of the owner's local index
 * when x's has-next-key bit is set (x = the partition's head: the sentinel's
 * bit), and y's lock covers it. The bit is checked again after y is locked:
 * an owner insert into the gap needs y's lock exclusively and clears x's bit
 * before it lets it go, so a bit still set then proves the gap empty. When
 * the bit is clear, the owner is asked to move the keys around the gap in and
 * mark it.
 *
 * A record we fail to lock may be one the owner just moved out (it keeps the
 * record write-locked until it is freed): if the index no longer maps the key
 * to it, the step starts over instead of aborting. */
#include <string.h>

#include "cxl/layout.h"
#include "cxl/record_ops.h"
#include "log/txlog.h"
#include "pod/pod_int.h"
#include "txn/txn_int.h"
#include "util/log.h"

#define MAX_REQUESTS 64 /* requests to the owner per operation before giving up */

/* Outcomes of the steps below besides POD_OK and negative statuses. */
#define RESTART 1 /* look again: the tuple moved or died meanwhile */
#define STOP 2    /* a scan's callback or limit ended it */

static struct pod_host *host_of(struct pod_txn *tx) { return tx->db->pod; }

static int fail_internal(struct pod_txn *tx, const pod_err *e)
{
    tx->status = POD_E_INTERNAL;
    return pod_txn_fail(tx, POD_E_INTERNAL, "%s", e->msg);
}

static int owner_of(const pod_table *t, uint32_t part) { return (int)t->parts[part].owner; }

/* What this transaction's own tuples take of owner's CXL memory: in HWcc
 * the records (under hwcc-only with their rows) and about one half-full
 * leaf slot of the CXL index each; in SWcc the rows otherwise. An estimate
 * (the allocator rounds up), used only to tell a transaction that can never
 * fit from one that meets others' tuples. */
struct footprint {
    uint64_t hwcc, swcc;
    uint32_t tuples;
};

static struct footprint footprint_at(const struct pod_txn *tx, int owner)
{
    bool rows_in_hwcc = tx->db->pod->coh == POD_COH_HWCC_ONLY;
    struct footprint f = {0, 0, 0};
    for (uint32_t i = 0; i < tx->nacc; i++) {
        const struct access *a = &tx->acc[i];
        if (!a->rec || !a->key || (int)a->table->parts[a->part].owner != owner) continue;
        uint64_t row = rec_row_alloc_size(a->table->tuple_size);
        f.hwcc += sizeof(cxl_record) + 2 * ((uint64_t)a->table->key_size + 8);
        if (rows_in_hwcc) f.hwcc += row;
        else f.swcc += row;
        f.tuples++;
    }
    return f;
}

/* The owner's CXL memory is full even after its move-out: with this
 * transaction's own tuples holding half of the area or more, retrying
 * cannot help (they stay until it ends): fail with the limit named.
 * Otherwise others' tuples fill it: a conflict, retried. */
static int owner_full(struct pod_txn *tx, int owner)
{
    const struct cxl_superblock *sb = host_of(tx)->r->sb;
    struct footprint f = footprint_at(tx, owner);
    const char *area = NULL;
    uint64_t used = 0, cap = 0;
    if (f.hwcc >= sb->hwcc_quota / 2) {
        area = "HWcc quota", used = f.hwcc, cap = sb->hwcc_quota;
    } else if (f.swcc >= sb->swcc_slice_size / 2) {
        area = "SWcc slice", used = f.swcc, cap = sb->swcc_slice_size;
    }
    if (!area) return txn_conflict(tx, POD_CAUSE_HWCC_FULL);
    tx->status = POD_E_LIMIT;
    return pod_txn_fail(tx, POD_E_LIMIT,
                        "host %d's %s (%llu bytes) cannot hold this transaction: it holds %u of "
                        "that host's tuples in CXL memory (about %llu bytes, half the %s or more) "
                        "and needs more; touch fewer per transaction or raise region.hwcc_budget",
                        owner, area, (unsigned long long)cap, f.tuples, (unsigned long long)used,
                        area);
}

/* The reply of an owner that could not do it now. */
static int reply_status(struct pod_txn *tx, int owner, int rs, const pod_err *e,
                        enum pod_abort_cause busy)
{
    switch (rs) {
    case POD_RS_BUSY: return txn_conflict(tx, busy);
    case POD_RS_NOMEM: return owner_full(tx, owner);
    default: return fail_internal(tx, e);
    }
}

static struct pod_part_cxl *part_cxl(struct pod_txn *tx, pod_table *t, uint32_t part)
{
    pod_err e;
    struct pod_part_cxl *pc = pod_part(host_of(tx), t, part, tx->w->id, &e);
    if (!pc) fail_internal(tx, &e);
    return pc;
}

/* Look key up in the CXL index: its record's offset, or CXL_NULL. */
static cxl_off ix_lookup(struct pod_txn *tx, const struct pod_part_cxl *pc, const void *key)
{
    uint64_t v;
    return cxl_index_lookup(pc->ix, tx->w->id, key, &v) == BT_OK ? v : CXL_NULL;
}

/* Of the prefetched keys not in CXL memory (offs[i] == 0), ask each
 * partition's owner to move in those of two or more at once: one round trip
 * instead of one per key when the transaction reaches them (the owner
 * serves requests between its own operations, so every round trip waits
 * for it). One key is left to the access itself, which asks just the same.
 * A hint: the reply is not needed and failures are left to the accesses. */
static void request_moves(struct pod_txn *tx, pod_table *t, const uint32_t *parts,
                          const void *const *keys, const uint64_t *offs, unsigned n)
{
    size_t ks = t->key_size;
    unsigned per_msg = (unsigned)(POD_MSG_KEY_MAX / ks);
    bool done[BT_PREFETCH_MAX] = {false};
    for (unsigned i = 0; i < n; i++) {
        if (offs[i] || done[i]) continue;
        struct pod_req_msg rq;
        pod_req_init(&rq, t, parts[i], NULL, 0);
        unsigned c = 0;
        for (unsigned j = i; j < n && c < per_msg; j++) {
            if (offs[j] || done[j] || parts[j] != parts[i]) continue;
            memcpy(rq.key + c++ * ks, keys[j], ks);
            done[j] = true;
        }
        if (c < 2) continue;
        rq.count = (uint16_t)c;
        rq.key_len = (uint16_t)(c * ks);
        pod_err e;
        pod_request(tx->w, owner_of(t, parts[i]), POD_MSG_MOVE_MANY, &rq, NULL, &e);
    }
}

void remote_prefetch(struct pod_txn *tx, pod_table *t, const uint32_t *parts,
                     const void *const *keys, unsigned n)
{
    const bt_tree *trees[BT_PREFETCH_MAX];
    const void *mine[BT_PREFETCH_MAX];
    uint32_t mparts[BT_PREFETCH_MAX];
    uint64_t offs[BT_PREFETCH_MAX];
    unsigned m = 0;
    for (unsigned i = 0; i < n && m < BT_PREFETCH_MAX; i++) {
        pod_err e;
        struct pod_part_cxl *pc = pod_part(host_of(tx), t, parts[i], tx->w->id, &e);
        if (!pc) continue; /* the real access reports it */
        trees[m] = cxl_index_tree(pc->ix);
        mparts[m] = parts[i];
        mine[m++] = keys[i];
    }
    if (!m) return;
    bt_prefetch(trees, mine, m, offs, NULL);
    for (unsigned i = 0; i < m; i++)
        if (offs[i]) __builtin_prefetch(pod_rec(host_of(tx), offs[i]));
    request_moves(tx, t, mparts, mine, offs, m);
}

/* The next CXL key after key (>= with inclusive; key NULL: the first):
 * offset and key, or CXL_NULL for "past the last". */
static cxl_off ix_next(struct pod_txn *tx, const struct pod_part_cxl *pc, const void *key,
                       bool inclusive, void *key_out)
{
    uint64_t v;
    return cxl_index_next(pc->ix, tx->w->id, key, inclusive, key_out, &v) == BT_OK ? v : CXL_NULL;
}

static cxl_off ix_prev(struct pod_txn *tx, const struct pod_part_cxl *pc, const void *key,
                       bool inclusive, void *key_out)
{
    uint64_t v;
    return cxl_index_prev(pc->ix, tx->w->id, key, inclusive, key_out, &v) == BT_OK ? v : CXL_NULL;
}

/* The record of an offset, the sentinel for CXL_NULL. */
static cxl_record *rec_or_sentinel(struct pod_txn *tx, const struct pod_part_cxl *pc, cxl_off off)
{
    return off ? pod_rec(host_of(tx), off) : pc->sentinel;
}

static bool has_next(const cxl_record *rec) { return rec_load(rec) & REC_HAS_NEXT; }

/* The offset that names rec (the sentinel has one too) in a request. */
static cxl_off rec_name(struct pod_txn *tx, const struct pod_part_cxl *pc, cxl_off off)
{
    return off ? off : cxl_off_in(host_of(tx)->r, pc->sentinel);
}

/* Before asking the owner about the gap that ends at the CXL key at yoff
 * (CXL_NULL: the end): if this transaction holds that key's lock (a write or
 * insert of its own), say so, or the owner's gap check would wait for our
 * lock while we wait for its reply (POD_RQ_GAP_HELD). */
static void note_held(struct pod_txn *tx, const struct pod_part_cxl *pc, cxl_off yoff,
                      struct pod_req_msg *rq)
{
    if (!txn_find_access(tx, rec_or_sentinel(tx, pc, yoff))) return;
    rq->flags |= POD_RQ_GAP_HELD;
    rq->rec = rec_name(tx, pc, yoff);
}

/* Lock rec (the tuple of key, or the sentinel when key is NULL) in mode want
 * for the rest of the transaction. POD_OK, RESTART (the record is no longer
 * key's: look again), or POD_CONFLICT. */
static int lock_rec(struct pod_txn *tx, pod_table *t, uint32_t part, struct pod_part_cxl *pc,
                    cxl_record *rec, const void *key, uint8_t want, enum pod_abort_cause cause,
                    struct access **acc)
{
    struct access *a = txn_find_access(tx, rec);
    if (a && a->held >= want) {
        *acc = a;
        return POD_OK;
    }
    bool ok = a ? rec_try_upgrade(rec)
                : want == HELD_WRITE ? rec_try_write_lock(rec) : rec_try_read_lock(rec);
    if (!ok) {
        if (!a && key && pod_rec(host_of(tx), ix_lookup(tx, pc, key)) != rec) return RESTART;
        txn_note_lock(tx, t, part, key, NULL, rec);
        return txn_conflict(tx, a ? POD_CAUSE_UPGRADE
                                  : want == HELD_WRITE ? POD_CAUSE_WRITE_LOCK : cause);
    }
    if (a) {
        a->held = want;
    } else {
        if (!(a = txn_add_access(tx, NULL, rec, t, part, want, key))) {
            if (want == HELD_WRITE) rec_release_write(rec);
            else rec_release_read(rec);
            return POD_E_NOMEM;
        }
    }
    if (rec != pc->sentinel) rec_flag_set(rec, REC_CLOCK); /* recently used by a non-owner */
    *acc = a;
    return POD_OK;
}

/* Read a locked record's row into the access's copy (once). POD_OK, RESTART
 * (the row is not valid: dead), or a negative status. */
static int load(struct pod_txn *tx, struct access *a)
{
    if (a->flags & ACC_LOADED) return POD_OK;
    struct pod_host *ph = host_of(tx);
    uint32_t tsz = a->table->tuple_size;
    if (!a->copy && !(a->copy = txn_undo_alloc(tx, tsz))) {
        tx->status = POD_E_NOMEM;
        return pod_txn_fail(tx, POD_E_NOMEM, "out of memory for a tuple copy");
    }
    uint32_t valid;
    int rc = rec_row_read(ph->r, ph->coh, a->rec, a->copy, tsz, &valid, &a->ev);
    if (rc == REC_BUSY) return txn_conflict(tx, POD_CAUSE_READ_LOCK);
    if (rc != REC_OK) {
        tx->status = POD_E_INTERNAL;
        return pod_txn_fail(tx, POD_E_INTERNAL, "%s: a CXL row does not hold a %u-byte tuple",
                            a->table->name, tsz);
    }
    pod_count(&ph->st.remote_reads, 1);
    if (!valid && !(a->flags & ACC_INSERTED)) return RESTART;
    a->flags |= ACC_LOADED;
    return POD_OK;
}

/* Ask the owner for key (or a range from it). POD_OK when the owner did it
 * (ABSENT included: *absent set), else a negative status. */
static int ask_owner(struct pod_txn *tx, pod_table *t, uint32_t part, int type,
                     const struct pod_req_msg *rq, bool *absent, cxl_off *rec)
{
    pod_err e = {{0}};
    cxl_off r = CXL_NULL;
    int rs = pod_request(tx->w, owner_of(t, part), type, rq, &r, &e);
    if (absent) *absent = rs == POD_RS_ABSENT;
    if (rec) *rec = r;
    if (rs >= 0) return POD_OK;
    return reply_status(tx, owner_of(t, part), rs, &e, POD_CAUSE_REMOTE_BUSY);
}

/* Lock the record of key (want) and load its tuple: POD_OK (*a its access),
 * RESTART (lock or load met a move: the caller looks the key up again), or a
 * negative status. */
static int lock_and_load(struct pod_txn *tx, pod_table *t, uint32_t part,
                         struct pod_part_cxl *pc, cxl_record *rec, const void *key, uint8_t want,
                         struct access **a)
{
    int rc = lock_rec(tx, t, part, pc, rec, key, want, POD_CAUSE_READ_LOCK, a);
    if (rc) return rc;
    if ((rc = load(tx, *a)) == RESTART) txn_unlock_fresh(tx, *a);
    return rc;
}

/* With key missing from the CXL index: lock the gap where it would be, if
 * the index knows the gap is complete. POD_OK (locked: key is absent), RESTART
 * (ask the owner), or a negative status. */
static int lock_gap(struct pod_txn *tx, pod_table *t, uint32_t part, struct pod_part_cxl *pc,
                    const void *key)
{
    unsigned char ykey[BT_MAX_KEY_WIDTH];
    cxl_off xoff = ix_prev(tx, pc, key, false, NULL);
    cxl_record *x = rec_or_sentinel(tx, pc, xoff);
    if (!has_next(x)) return RESTART;
    cxl_off yoff = ix_next(tx, pc, key, true, ykey);
    if (yoff && memcmp(ykey, key, t->key_size) == 0) return RESTART; /* appeared */
    struct access *a;
    int rc = lock_rec(tx, t, part, pc, rec_or_sentinel(tx, pc, yoff), yoff ? ykey : NULL,
                      HELD_READ, POD_CAUSE_NEXT_KEY, &a);
    if (rc) return rc;
    if (has_next(x) && ix_prev(tx, pc, key, false, NULL) == xoff &&
        ix_next(tx, pc, key, true, NULL) == yoff)
        return POD_OK;
    txn_unlock_fresh(tx, a);
    return RESTART;
}

int remote_find(struct pod_txn *tx, pod_table *t, uint32_t part, const void *key, uint8_t want,
                enum remote_find *res, struct access **acc)
{
    struct pod_part_cxl *pc = part_cxl(tx, t, part);
    if (!pc) return tx->status;
    bool phantom = tx->db->opt.phantom_protection;
    int requests = 0;
    for (int tries = 0; tries < OP_RESTARTS; tries++) {
        cxl_off off = ix_lookup(tx, pc, key);
        if (off) {
            cxl_record *rec = pod_rec(host_of(tx), off);
            struct access *a = txn_find_access(tx, rec);
            if (a && (a->flags & ACC_DELETED)) {
                *res = REMOTE_MISSING; /* our own delete */
                return POD_OK;
            }
            int rc = lock_and_load(tx, t, part, pc, rec, key, want, &a);
            if (rc == RESTART) continue;
            if (rc) return rc;
            *res = REMOTE_FOUND;
            *acc = a;
            return POD_OK;
        }
        if (phantom) {
            int rc = lock_gap(tx, t, part, pc, key);
            if (rc == POD_OK) {
                *res = REMOTE_MISSING;
                return POD_OK;
            }
            if (rc < 0) return rc;
        }
        if (++requests > MAX_REQUESTS) break;
        struct pod_req_msg rq;
        pod_req_init(&rq, t, part, key, POD_RQ_INCLUSIVE);
        if (phantom) note_held(tx, pc, ix_next(tx, pc, key, true, NULL), &rq);
        bool absent;
        int rc = ask_owner(tx, t, part, POD_MSG_MOVE_IN, &rq, &absent, NULL);
        if (rc) return rc;
        if (absent && !phantom) {
            *res = REMOTE_MISSING;
            return POD_OK;
        }
    }
    return txn_conflict(tx, POD_CAUSE_REMOTE_BUSY);
}

/* Has the owner take the write-locked record of key out of its indexes; the
 * owner takes the write lock over and never releases it. */
static void unlink_record(struct pod_txn *tx, pod_table *t, uint32_t part, const void *key,
                          cxl_record *rec)
{
    pod_err e;
    if (pod_send_unlink(tx->w, owner_of(t, part), t, part, key, cxl_off_in(host_of(tx)->r, rec),
                        &e))
        pod_error("%s: %s (the tuple stays locked)", t->name, e.msg);
}

int remote_insert(struct pod_txn *tx, pod_table *t, uint32_t part, const void *key,
                  const void *tuple)
{
    struct pod_part_cxl *pc = part_cxl(tx, t, part);
    if (!pc) return tx->status;
    int requests = 0;
    for (int tries = 0; tries < OP_RESTARTS; tries++) {
        cxl_off off = ix_lookup(tx, pc, key);
        if (off) {
            cxl_record *rec = pod_rec(host_of(tx), off);
            struct access *a = txn_find_access(tx, rec);
            if (a && (a->flags & ACC_DELETED)) { /* deleted and inserted again by us */
                a->flags &= (uint8_t)~ACC_DELETED;
                memcpy(a->copy, tuple, t->tuple_size);
                txn_remote_written(a, 0, t->tuple_size);
                return POD_OK;
            }
            /* Present: a shared lock makes "exists" hold until commit. */
            int rc = lock_and_load(tx, t, part, pc, rec, key, HELD_READ, &a);
            if (rc == RESTART) continue;
            return rc ? rc : POD_EXISTS;
        }
        if (++requests > MAX_REQUESTS) break;
        struct pod_req_msg rq;
        pod_req_init(&rq, t, part, key, 0);
        /* If we hold the gap's next key ourselves (a scan, a read, a write
         * or an insert of ours), the owner cannot lock it: hold it
         * exclusively for the insert. With the gap not known to be complete
         * that key may not be the owner's next local key; then an upgrade
         * that fails costs nothing (the owner locks its next key itself). */
        struct access *gap = NULL;
        bool downgrade = false;
        cxl_off yoff = ix_next(tx, pc, key, false, NULL);
        cxl_record *y = rec_or_sentinel(tx, pc, yoff);
        if ((gap = txn_find_access(tx, y))) {
            bool complete = has_next(rec_or_sentinel(tx, pc, ix_prev(tx, pc, key, false, NULL)));
            if (gap->held == HELD_READ) {
                downgrade = rec_try_upgrade(y);
                if (!downgrade && complete) return txn_conflict(tx, POD_CAUSE_NEXT_KEY);
            }
            if (gap->held == HELD_WRITE || downgrade) {
                rq.flags |= POD_RQ_GAP_HELD;
                rq.rec = rec_name(tx, pc, yoff);
            }
        }
        cxl_off rec_off;
        pod_err e = {{0}};
        int rs = pod_request(tx->w, owner_of(t, part), POD_MSG_PREP_INSERT, &rq, &rec_off, &e);
        if (downgrade) rec_downgrade(y);
        if (rs == POD_RS_EXISTS) continue; /* moved in: lock it above */
        if (rs < 0) return reply_status(tx, owner_of(t, part), rs, &e, POD_CAUSE_NEXT_KEY);
        /* The owner made an invalid tuple, write-locked for us. */
        cxl_record *rec = pod_rec(host_of(tx), rec_off);
        struct access *a = txn_add_access(tx, NULL, rec, t, part, HELD_WRITE, key);
        void *copy = a ? txn_undo_alloc(tx, t->tuple_size) : NULL;
        if (!copy) {
            if (a) a->flags = ACC_INSERTED; /* the abort unlinks it */
            else unlink_record(tx, t, part, key, rec); /* untracked: unlink it now */
            tx->status = POD_E_NOMEM;
            return pod_txn_fail(tx, POD_E_NOMEM, "out of memory for an insert");
        }
        memcpy(copy, tuple, t->tuple_size);
        a->copy = copy;
        a->flags = ACC_INSERTED | ACC_LOADED;
        pod_count(&host_of(tx)->st.remote_writes, 1);
        return POD_OK;
    }
    return txn_conflict(tx, POD_CAUSE_REMOTE_BUSY);
}

/* ---- scans ---------------------------------------------------------------- */

struct rscan {
    struct pod_txn *tx;
    pod_table *t;
    uint32_t part;
    struct pod_part_cxl *pc;
    const void *lo, *hi;
    uint32_t limit, count;
    uint8_t want;
    pod_scan_fn fn;
    void *arg;
    int requests;
};

/* Ask the owner to move in the keys from `from` on (the scan's direction). */
static int ask_range(struct rscan *s, const void *from, bool inclusive, bool reverse)
{
    if (++s->requests > MAX_REQUESTS) return txn_conflict(s->tx, POD_CAUSE_REMOTE_BUSY);
    struct pod_req_msg rq;
    pod_req_init(&rq, s->t, s->part, from,
                 (uint16_t)((inclusive ? POD_RQ_INCLUSIVE : 0) | (reverse ? POD_RQ_REVERSE : 0)));
    /* The gap asked about ends at the first key at or after from (forward),
     * or at the key above the next one down (reverse; from NULL: the end). */
    if (from || !reverse)
        note_held(s->tx, s->pc, ix_next(s->tx, s->pc, from, reverse ? !inclusive : inclusive, NULL),
                  &rq);
    else
        note_held(s->tx, s->pc, CXL_NULL, &rq);
    uint32_t left = s->limit ? s->limit - s->count : 16;
    rq.count = (uint16_t)(left < POD_RANGE_MAX ? left : POD_RANGE_MAX);
    return ask_owner(s->tx, s->t, s->part, POD_MSG_MOVE_RANGE, &rq, NULL, NULL);
}

/* Lock, load and visit one tuple of the range. POD_OK to go on, STOP,
 * RESTART, or a negative status. */
static int rvisit(struct rscan *s, cxl_record *rec, const void *key)
{
    struct access *a;
    int rc = lock_rec(s->tx, s->t, s->part, s->pc, rec, key, s->want, POD_CAUSE_READ_LOCK, &a);
    if (rc) return rc;
    if ((rc = load(s->tx, a)) == RESTART) {
        txn_unlock_fresh(s->tx, a);
        return RESTART;
    }
    if (rc) return rc;
    if (a->flags & ACC_DELETED) return POD_OK;
    s->count++;
    bool go_on = s->fn ? s->fn(s->arg, key, a->copy) : true;
    return (!go_on || (s->limit && s->count >= s->limit)) ? STOP : POD_OK;
}

/* rscan_backward is its mirror image; the two stay apart because the gaps
 * they must find complete lie on opposite sides of a key (forward: the gap
 * below the next key, locked with it; backward: the gap above, whose upper
 * key is locked first). */
static int rscan_forward(struct rscan *s)
{
    struct pod_txn *tx = s->tx;
    size_t ks = s->t->key_size;
    bool phantom = tx->db->opt.phantom_protection;
    unsigned char cur[BT_MAX_KEY_WIDTH], ykey[BT_MAX_KEY_WIDTH];
    bool have_cur = s->lo != NULL, inclusive = true;
    if (have_cur) memcpy(cur, s->lo, ks);
    /* x: the record before the current position (the head at the start). */
    bool x_known = false;
    cxl_record *x = NULL;
    /* Bounded by restarts of one step (a step taken again: a range moved in
     * that move-out took back, a lock that raced), not by the keys visited. */
    for (int restarts = 0; restarts < OP_RESTARTS;) {
        const void *from = have_cur ? cur : NULL;
        if (!x_known) x = rec_or_sentinel(tx, s->pc, from ? ix_prev(tx, s->pc, from, !inclusive, NULL) : 0);
        if (!has_next(x)) {
            int rc = ask_range(s, from, inclusive, false);
            if (rc) return rc;
            restarts++;
            continue;
        }
        cxl_off yoff = ix_next(tx, s->pc, from, inclusive, ykey);
        bool past = !yoff || (s->hi && memcmp(ykey, s->hi, ks) > 0);
        if (past && !phantom) return POD_OK;
        cxl_record *y = rec_or_sentinel(tx, s->pc, yoff);
        struct access *a;
        int rc = lock_rec(tx, s->t, s->part, s->pc, y, yoff ? ykey : NULL,
                          past ? HELD_READ : s->want,
                          past ? POD_CAUSE_NEXT_KEY : POD_CAUSE_READ_LOCK, &a);
        if (rc == RESTART) {
            restarts++;
            continue;
        }
        if (rc) return rc;
        /* Still complete, and still the next key? */
        if (!has_next(x) || ix_next(tx, s->pc, from, inclusive, NULL) != yoff) {
            txn_unlock_fresh(tx, a);
            restarts++;
            continue;
        }
        if (past) return POD_OK;
        rc = rvisit(s, y, ykey);
        if (rc == RESTART) {
            restarts++;
            continue;
        }
        if (rc) return rc < 0 ? rc : POD_OK;
        memcpy(cur, ykey, ks);
        have_cur = true;
        inclusive = false;
        x = y; /* locked by us: it stays */
        x_known = true;
        restarts = 0; /* a step done */
    }
    return txn_conflict(tx, POD_CAUSE_NEXT_KEY);
}

/* The mirror image of rscan_forward, kept apart because the gap it needs
 * complete lies above each key, covered by the key above's lock. */
static int rscan_backward(struct rscan *s)
{
    struct pod_txn *tx = s->tx;
    size_t ks = s->t->key_size;
    bool phantom = tx->db->opt.phantom_protection;
    unsigned char cur[BT_MAX_KEY_WIDTH], xkey[BT_MAX_KEY_WIDTH], ykey[BT_MAX_KEY_WIDTH];
    bool have_cur = s->hi != NULL, inclusive = true; /* cur: the upper end still to visit */
    if (have_cur) memcpy(cur, s->hi, ks);
    bool top_locked = !phantom;
    /* Bounded by restarts of one step (a step taken again: a range moved in
     * that move-out took back, a lock that raced), not by the keys visited. */
    for (int restarts = 0; restarts < OP_RESTARTS;) {
        const void *from = have_cur ? cur : NULL;
        /* x: the next CXL key down. The gap between x and the key above it
         * must be complete; that key's lock (ours: visited, or locked as the
         * key after hi) covers it. */
        cxl_off xoff = ix_prev(tx, s->pc, from, inclusive, xkey);
        cxl_record *x = rec_or_sentinel(tx, s->pc, xoff);
        if (!has_next(x)) {
            int rc = ask_range(s, from, inclusive, true);
            if (rc) return rc;
            restarts++;
            continue;
        }
        if (!top_locked) { /* the key after hi (or the end) covers the top gap */
            cxl_off yoff = from ? ix_next(tx, s->pc, from, false, ykey) : CXL_NULL;
            struct access *a;
            int rc = lock_rec(tx, s->t, s->part, s->pc, rec_or_sentinel(tx, s->pc, yoff),
                              yoff ? ykey : NULL, HELD_READ, POD_CAUSE_NEXT_KEY, &a);
            if (rc == RESTART) {
                restarts++;
                continue;
            }
            if (rc) return rc;
            if (!has_next(x) || ix_prev(tx, s->pc, from, inclusive, NULL) != xoff ||
                (from && ix_next(tx, s->pc, from, false, NULL) != yoff)) {
                txn_unlock_fresh(tx, a);
                restarts++;
                continue;
            }
            top_locked = true;
        }
        if (!xoff || (s->lo && memcmp(xkey, s->lo, ks) < 0)) return POD_OK;
        int rc = rvisit(s, x, xkey);
        if (rc == RESTART) {
            restarts++;
            continue;
        }
        if (rc) return rc < 0 ? rc : POD_OK;
        memcpy(cur, xkey, ks);
        have_cur = true;
        inclusive = false;
        restarts = 0; /* a step done */
    }
    return txn_conflict(tx, POD_CAUSE_NEXT_KEY);
}

int remote_scan(struct pod_txn *tx, pod_table *t, uint32_t part, const void *lo, const void *hi,
                uint32_t limit, bool reverse, uint8_t want, pod_scan_fn fn, void *arg)
{
    struct pod_part_cxl *pc = part_cxl(tx, t, part);
    if (!pc) return tx->status;
    struct rscan s = {tx, t, part, pc, lo, hi, limit, 0, want, fn, arg, 0};
    return reverse ? rscan_backward(&s) : rscan_forward(&s);
}

/* ---- commit and abort ------------------------------------------------------ */

static void unlink(struct pod_txn *tx, struct access *a)
{
    unlink_record(tx, a->table, a->part, a->key, a->rec);
    a->held = HELD_NONE;
}

void remote_commit(struct pod_txn *tx, struct access *a, uint64_t epoch)
{
    struct pod_host *ph = host_of(tx);
    struct log_worker *lw = log_txn_worker(tx->db, tx->w->id);
    if (a->flags & ACC_DELETED) {
        uint64_t ev = txn_next_epoch_version(a->ev, epoch);
        if (!(a->flags & ACC_INSERTED))
            rec_row_write(ph->r, ph->coh, a->rec, NULL, a->table->tuple_size, 0, ev);
        log_txn_write(tx->db, lw, a->table, a->key, ev, NULL);
        unlink(tx, a);
    } else if (a->flags & (ACC_INSERTED | ACC_UPDATED)) {
        if ((a->flags & ACC_INSERTED) && log_insert_ev_floor(tx->db) > a->ev)
            a->ev = log_insert_ev_floor(tx->db);
        uint64_t base = a->ev;
        a->ev = txn_next_epoch_version(a->ev, epoch);
        /* An update logs and publishes only the bytes it wrote (a PATCH made
         * from the version it read); an insert, the whole tuple. */
        uint32_t lo = 0, hi = a->table->tuple_size;
        if (a->flags & ACC_INSERTED) {
            log_txn_write(tx->db, lw, a->table, a->key, a->ev, a->copy);
        } else {
            lo = a->ulo, hi = a->uhi;
            log_txn_update(tx->db, lw, a->table, a->key, a->ev, base, NULL, lo, hi, a->copy);
        }
        if (rec_row_write_range(ph->r, ph->coh, a->rec, (const unsigned char *)a->copy + lo, lo,
                                hi - lo, a->table->tuple_size, 1, a->ev, true) != REC_OK)
            pod_error("%s: a committed write to host %d's tuple could not be published (its "
                      "latch stayed taken)", a->table->name, owner_of(a->table, a->part));
        pod_count(&ph->st.remote_writes, 1);
    }
}

void remote_abort(struct pod_txn *tx, struct access *a)
{
    if (a->flags & ACC_INSERTED) unlink(tx, a); /* the owner removes the invalid tuple */
}

void remote_release(struct pod_txn *tx, struct access *a)
{
    (void)tx;
    if (a->held == HELD_WRITE) rec_release_write(a->rec);
    else if (a->held == HELD_READ) rec_release_read(a->rec);
}
