/* The owner's side of data movement: moving tuples into CXL memory on
 * request, preparing remote inserts, unlinking dead tuples, and the
 * has-next-key bits (src/pod/pod.h explains them; docs/pod.md the protocol).
 *
 * Everything here runs on a worker thread of the owner host (serving its
 * inbox between transactions or while it waits for a reply of its own), so
 * it never waits for another host: a lock it needs and cannot take at once
 * makes it answer "busy" and the requester aborts and retries (NO_WAIT).
 *
 * The row latch (row->latch) orders the movements of one row: move-in,
 * move-out, unlink and setting the row's has-next-key bit each hold it, so a
 * bit is never set on a record that was already taken out of the index. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cxl/record_ops.h"
#include "db/types.h"
#include "pod/pod_int.h"
#include "pod/rowlock.h"
#include "storage/ebr.h"
#include "util/cpu.h"
#include "util/log.h"


static struct pod_row *local_row(const bt_tree *tree, const void *key)
{
    uint64_t v;
    return bt_lookup(tree, key, &v) == BT_OK ? (struct pod_row *)(uintptr_t)v : NULL;
}

static void rec_free_cb(void *ctx, void *rec)
{
    struct pod_host *ph = ctx;
    rec_destroy(ph->r, cxl_off_in(ph->r, rec));
}

void pod_forget_record(struct pod_worker *w, struct pod_part_cxl *pc, const void *key,
                       cxl_record *rec)
{
    struct pod_host *ph = w->db->pod;
    rec_flag_clear(rec, REC_HAS_NEXT);
    uint64_t off;
    if (cxl_index_prev(pc->ix, w->id, key, false, NULL, &off) == BT_OK)
        rec_flag_clear(pod_rec(ph, off), REC_HAS_NEXT);
    else
        rec_flag_clear(pc->sentinel, REC_HAS_NEXT);
    cxl_index_remove(pc->ix, w->id, key, NULL);
    xebr_retire(ph->x, w->id, rec, rec_free_cb, ph);
    __atomic_fetch_sub(&pc->resident, 1, __ATOMIC_RELAXED);
}

/* The skip test is sound because `resident` never reads lower than the number
 * of records in the partition's index: a record is counted before it enters
 * the index and uncounted after it left. (Counting it after the move-in let a
 * move-out of that same record run first, and for that moment the counter
 * read 0 while a record with its bit set was in the index.) */
void pod_local_inserted(struct pod_worker *w, pod_table *t, uint32_t part, const void *key)
{
    struct pod_host *ph = w->db->pod;
    struct pod_part_cxl *pc = t->parts[part].cxl;
    if (!__atomic_load_n(&pc->resident, __ATOMIC_ACQUIRE) &&
        !(rec_load(pc->sentinel) & REC_HAS_NEXT))
        return; /* nothing in CXL memory claims this gap */
    uint64_t v;
    if (bt_prev(&t->parts[part].tree, key, false, NULL, &v) == BT_OK) {
        struct pod_row *pred = (struct pod_row *)(uintptr_t)v;
        if (rowlock_moved(pred)) {
            cxl_record *rec = rowlock_record(ph->r, pred);
            if (rec) rec_flag_clear(rec, REC_HAS_NEXT);
        }
    } else {
        rec_flag_clear(pc->sentinel, REC_HAS_NEXT);
    }
}

/* Move a local row into CXL memory (or find it there: *fresh false, when
 * fresh is not NULL). Caller is inside its EBR and cross-host EBR critical
 * sections. */
static int move_in(struct pod_worker *w, pod_table *t, uint32_t part, struct pod_row *row,
                   const void *key, cxl_off *out, bool *fresh)
{
    if (fresh) *fresh = false;
    struct pod_host *ph = w->db->pod;
    struct pod_part_cxl *pc = t->parts[part].cxl;
    if (!pod_row_latch_try(row)) return POD_RS_BUSY; /* being moved or unlinked right now */
    if (rowlock_moved(row)) {
        *out = row_shortcut(row);
        pod_row_latch_release(row);
        return POD_RS_OK;
    }
    /* A read lock of our own keeps writers out while the tuple is copied. */
    if (!lock_try_read(&row->lock)) {
        pod_row_latch_release(row);
        return POD_RS_BUSY;
    }
    int status = POD_RS_OK;
    if (!row_valid(row)) { /* dead: its remover is taking it out */
        status = POD_RS_BUSY;
        goto undo_read;
    }
    cxl_off off = rec_create(ph->r, ph->coh, row->tuple, t->tuple_size, 1, row->epoch_version);
    if (off == CXL_NULL) {
        pod_moveout(w, true);
        off = rec_create(ph->r, ph->coh, row->tuple, t->tuple_size, 1, row->epoch_version);
    }
    if (off == CXL_NULL) {
        status = POD_RS_NOMEM;
        goto undo_read;
    }
    cxl_record *rec = pod_rec(ph, off);
    /* Write-locked until the lock state moves in: nobody who finds it in the
     * index can lock it before the row's own word is frozen. */
    rec_init_lock(rec, true, 0);
    /* Requested right now: the first move-out pass must not take it back
     * before the requester has used it (CLOCK gives it its second chance). */
    rec_flag_set(rec, REC_CLOCK);
    /* Counted before anyone can find it (see pod_local_inserted). */
    pod_count(&pc->resident, 1);
    bt_status st = cxl_index_insert(pc->ix, w->id, key, off);
    if (st != BT_OK) {
        __atomic_fetch_sub(&pc->resident, 1, __ATOMIC_RELAXED);
        rec_destroy(ph->r, off);
        status = st == BT_NOMEM ? POD_RS_NOMEM : POD_RS_BUSY;
        goto undo_read;
    }
    /* Our own read lock stays behind in the frozen word; the others move
     * into the record before the latch goes (rowlock_release_moved_read). */
    rec_init_lock(rec, false, rowlock_freeze(row, off));
    pod_row_latch_release(row);
    pod_count(&ph->st.moved_in, 1);
    if (fresh) *fresh = true;
    *out = off;
    return POD_RS_OK;
undo_read:
    lock_release_read(&row->lock);
    pod_row_latch_release(row);
    return status;
}

/* A run of local keys to move in, in ascending order: entry 0 and the last
 * may be the partition's head/end (the sentinel). */
struct chain {
    int n;
    struct pod_row *row[POD_RANGE_MAX + 2];
    bool sentinel[POD_RANGE_MAX + 2];
    unsigned char key[POD_RANGE_MAX + 2][BT_MAX_KEY_WIDTH];
};

static void chain_add(struct chain *c, struct pod_row *row, const void *key, size_t ks)
{
    c->row[c->n] = row;
    c->sentinel[c->n] = row == NULL;
    if (row) memcpy(c->key[c->n], key, ks);
    c->n++;
}

/* Collect: forward, the largest key before the range (or the head), then up
 * to count + 1 keys (the range's keys and the next one, or the end).
 * Reverse: the smallest key after the range (or the end), then up to
 * count + 1 keys going down (or the head); then reversed. */
static void chain_build(struct chain *c, pod_table *t, uint32_t part, const struct pod_req_msg *rq)
{
    const bt_tree *tree = &t->parts[part].tree;
    size_t ks = t->key_size;
    bool has = rq->flags & POD_RQ_HAS_KEY, incl = rq->flags & POD_RQ_INCLUSIVE;
    bool rev = rq->flags & POD_RQ_REVERSE;
    int count = rq->count > POD_RANGE_MAX ? POD_RANGE_MAX : rq->count;
    unsigned char cur[BT_MAX_KEY_WIDTH];
    uint64_t v;
    c->n = 0;
    bt_status st;
    if (!has) st = BT_NOT_FOUND;
    else if (!rev) st = bt_prev(tree, rq->key, !incl, cur, &v);
    else st = bt_next(tree, rq->key, !incl, cur, &v);
    chain_add(c, st == BT_OK ? (struct pod_row *)(uintptr_t)v : NULL, cur, ks);
    bool have_cur = st == BT_OK;
    for (int i = 0; i <= count; i++) {
        st = rev ? bt_prev(tree, have_cur ? cur : NULL, false, cur, &v)
                 : bt_next(tree, have_cur ? cur : NULL, false, cur, &v);
        if (st != BT_OK) {
            chain_add(c, NULL, NULL, ks);
            break;
        }
        chain_add(c, (struct pod_row *)(uintptr_t)v, cur, ks);
        have_cur = true;
    }
    if (rev) { /* ascending order */
        for (int i = 0, j = c->n - 1; i < j; i++, j--) {
            struct pod_row *r = c->row[i];
            c->row[i] = c->row[j];
            c->row[j] = r;
            bool s = c->sentinel[i];
            c->sentinel[i] = c->sentinel[j];
            c->sentinel[j] = s;
            unsigned char tmp[BT_MAX_KEY_WIDTH];
            memcpy(tmp, c->key[i], ks);
            memcpy(c->key[i], c->key[j], ks);
            memcpy(c->key[j], tmp, ks);
        }
    }
}

/* Whether the requester holds b's lock itself (it said so with GAP_HELD,
 * and b's record is the one it named and is locked in a mode that mode
 * covers: REC_LOCK_MASK for any, REC_LOCK_W for exclusive). Such a lock
 * guards b as well as one we would take: nobody else can insert into the
 * gap before b or move b out while the requester holds it. Waiting for it
 * instead would make the requester's own request fail for good: it waits
 * for our reply and releases nothing before it. */
static bool held_by_requester(const struct pod_host *ph, struct pod_row *b,
                              const struct pod_req_msg *rq, cxl_record mode)
{
    return (rq->flags & POD_RQ_GAP_HELD) && rq->rec && rowlock_moved(b) &&
           row_shortcut(b) == rq->rec && (rec_load(pod_rec(ph, rq->rec)) & mode);
}

/* Mark the gap (a, b) complete: under a shared lock on b, which any insert
 * into the gap must take exclusively, check that b is a's next local key and
 * still in CXL memory, and set a's has-next-key bit. false if b's lock was
 * taken, or b was moved out since the chain moved it in and cannot be moved
 * in again now. A lock on b that the requester holds (held_by_requester)
 * serves as ours.
 *
 * "Still in CXL memory" matters: another worker's move-out may take b out
 * between move_in and here. b's removal cleared a's bit, and setting it now
 * would claim that a's next CXL key c follows a with nothing between, while
 * b is in between (in DRAM). Worse, the claim then outlives b: a later
 * insert between b and c clears the bit of its predecessor b, which is not
 * in CXL memory, so every key inserted there is skipped by remote scans. Our
 * shared lock on b (in its record, or moved there with the readers) keeps a
 * move-out of b away until the bit is set; b's removal then clears it. */
static bool mark_gap(struct pod_worker *w, pod_table *t, uint32_t part, const struct chain *c,
                     int i, const struct pod_req_msg *rq)
{
    struct pod_host *ph = w->db->pod;
    struct pod_row *b = c->sentinel[i + 1] ? t->parts[part].sentinel : c->row[i + 1];
    bool in_cxl = false, ours = !held_by_requester(ph, b, rq, REC_LOCK_MASK);
    if (ours && !rowlock_try(ph->r, b, ROWLOCK_READ, &in_cxl)) return false;
    cxl_off boff;
    /* Moved out meanwhile: in again (our shared lock moves into its record). */
    if (!c->sentinel[i + 1] && !rowlock_moved(b) &&
        move_in(w, t, part, b, c->key[i + 1], &boff, NULL) != POD_RS_OK) {
        if (ours) rowlock_release(ph->r, b, ROWLOCK_READ, in_cxl);
        return false;
    }
    uint64_t v;
    bt_status st = bt_next(&t->parts[part].tree, c->sentinel[i] ? NULL : c->key[i], false, NULL,
                           &v);
    struct pod_row *next = st == BT_OK ? (struct pod_row *)(uintptr_t)v : t->parts[part].sentinel;
    if (next == b) {
        if (c->sentinel[i]) {
            rec_flag_set(t->parts[part].cxl->sentinel, REC_HAS_NEXT);
        } else if (pod_row_latch_try(c->row[i])) {
            /* Only on the live record: not on one that was just moved out. */
            if (rowlock_moved(c->row[i])) rec_flag_set(rowlock_record(ph->r, c->row[i]), REC_HAS_NEXT);
            pod_row_latch_release(c->row[i]);
        }
    }
    if (ours) rowlock_release(ph->r, b, ROWLOCK_READ, in_cxl);
    return true;
}

/* Move the chain in and mark its gaps. Busy when a tuple could not be moved
 * in, or when the gap the requester needs next could not be marked: the
 * first (forward) or the last (reverse, ascending order). The other gaps are
 * marked where they can be; one that could not is asked about again when the
 * requester reaches it (it may hold that gap's upper key itself, and says so
 * then). */
static int move_chain(struct pod_worker *w, pod_table *t, uint32_t part,
                      const struct pod_req_msg *rq)
{
    struct chain *c = malloc(sizeof *c);
    if (!c) return POD_RS_NOMEM;
    chain_build(c, t, part, rq);
    int status = POD_RS_OK;
    for (int i = 0; i < c->n && status == POD_RS_OK; i++) {
        if (c->sentinel[i]) continue;
        cxl_off off;
        int st = move_in(w, t, part, c->row[i], c->key[i], &off, NULL);
        if (st != POD_RS_OK) status = st;
    }
    int needed = (rq->flags & POD_RQ_REVERSE) ? c->n - 2 : 0;
    for (int i = 0; i + 1 < c->n && status == POD_RS_OK; i++)
        if (!mark_gap(w, t, part, c, i, rq) && i == needed) status = POD_RS_BUSY;
    free(c);
    return status;
}

/* A transaction's prefetch of several keys that are not in CXL memory:
 * move in those that exist and are free now, so that its accesses find
 * them there instead of asking one at a time. Absent and busy keys are
 * left to the transaction's own requests, which handle gaps and conflicts. */
static int move_many(struct pod_worker *w, pod_table *t, uint32_t part,
                     const struct pod_req_msg *rq)
{
    const bt_tree *tree = &t->parts[part].tree;
    for (unsigned i = 0; i < rq->count; i++) {
        const unsigned char *key = rq->key + (size_t)i * t->key_size;
        struct pod_row *row = local_row(tree, key);
        if (!row) continue;
        cxl_off off;
        bool fresh;
        int st = move_in(w, t, part, row, key, &off, &fresh);
        if (st == POD_RS_NOMEM) return POD_RS_NOMEM;
        if (fresh) pod_count(&w->db->pod->st.moved_batched, 1);
    }
    return POD_RS_OK;
}

void pod_unlink_moved(struct pod_worker *w, pod_table *t, uint32_t part, const void *key,
                      struct pod_row *row)
{
    struct pod_host *ph = w->db->pod;
    struct pod_part_cxl *pc = t->parts[part].cxl;
    /* A move-out or a bit-setter holds the latch only briefly (and cannot
     * move this row: its record is write-locked). */
    while (!pod_row_latch_try(row)) pod_cpu_relax();
    cxl_record *rec = rowlock_record(ph->r, row);
    rec_row_write(ph->r, ph->coh, rec, NULL, t->tuple_size, 0, row->epoch_version);
    pod_forget_record(w, pc, key, rec);
    row_set_valid(row, 0);
    table_index_remove(t, part, key);
    ebr_retire(w->db->ebr, w->id, row, row_free_cb, t);
    /* The latch and the record's write lock are never released: the row and
     * the record are dead, and whoever still finds them fails to lock them. */
}

/* Prepare a remote insert: a new row, invalid, moved in and write-locked
 * for the requester, which fills it at commit. */
static int prep_insert(struct pod_worker *w, pod_table *t, uint32_t part,
                       const struct pod_req_msg *rq, cxl_off *out)
{
    struct pod_host *ph = w->db->pod;
    struct pod_part_cxl *pc = t->parts[part].cxl;
    const bt_tree *tree = &t->parts[part].tree;
    struct pod_row *row = local_row(tree, rq->key);
    if (row) {
        if (!row_valid(row)) return POD_RS_BUSY;
        int st = move_in(w, t, part, row, rq->key, out, NULL);
        return st == POD_RS_OK ? POD_RS_EXISTS : st;
    }
    /* The gap must not be locked by anyone but the requester. */
    uint64_t v;
    struct pod_row *next = bt_next(tree, rq->key, false, NULL, &v) == BT_OK
                               ? (struct pod_row *)(uintptr_t)v
                               : t->parts[part].sentinel;
    bool gap_locked = false, in_cxl = false;
    if (!held_by_requester(ph, next, rq, REC_LOCK_W)) {
        if (!rowlock_try(ph->r, next, ROWLOCK_WRITE, &in_cxl)) return POD_RS_BUSY;
        gap_locked = true;
    }
    int status = POD_RS_OK;
    struct pod_row *nrow = row_alloc(t);
    cxl_off off = nrow ? rec_create(ph->r, ph->coh, nrow->tuple, t->tuple_size, 0, 0) : CXL_NULL;
    if (nrow && off == CXL_NULL) {
        pod_moveout(w, true);
        off = rec_create(ph->r, ph->coh, nrow->tuple, t->tuple_size, 0, 0);
    }
    if (off == CXL_NULL) {
        row_free(t, nrow);
        status = POD_RS_NOMEM;
        goto out;
    }
    rec_init_lock(pod_rec(ph, off), true, 0); /* the requester's write lock */
    rec_flag_set(pod_rec(ph, off), REC_CLOCK); /* as a move-in: used right away */
    row_set_shortcut(nrow, off);
    nrow->lock = LOCK_MOVED;
    if (table_index_insert(t, part, rq->key, nrow, NULL) != BT_OK) {
        rec_destroy(ph->r, off);
        row_free(t, nrow);
        status = POD_RS_BUSY; /* inserted meanwhile by the owner */
        goto out;
    }
    pod_local_inserted(w, t, part, rq->key);
    pod_count(&pc->resident, 1); /* before anyone can find it (see pod_local_inserted) */
    if (cxl_index_insert(pc->ix, w->id, rq->key, off) != BT_OK) {
        __atomic_fetch_sub(&pc->resident, 1, __ATOMIC_RELAXED);
        table_index_remove(t, part, rq->key);
        ebr_retire(w->db->ebr, w->id, nrow, row_free_cb, t);
        rec_destroy(ph->r, off);
        status = POD_RS_NOMEM;
        goto out;
    }
    pod_count(&ph->st.moved_in, 1);
    *out = off;
out:
    if (gap_locked) rowlock_release(ph->r, next, ROWLOCK_WRITE, in_cxl);
    return status;
}

static void unlink_req(struct pod_worker *w, pod_table *t, uint32_t part,
                       const struct pod_req_msg *rq)
{
    struct pod_host *ph = w->db->pod;
    struct pod_row *row = local_row(&t->parts[part].tree, rq->key);
    if (!row || !rowlock_moved(row) ||
        row_shortcut(row) != rq->rec) {
        pod_error("unlink of table %s partition %u: the key's record is not %#llx (protocol bug)",
                  t->name, part, (unsigned long long)rq->rec);
        return;
    }
    /* Another host's committed delete wrote the record's epoch-version (an
     * insert it gave up never did: 0), which the next checkpoint records. */
    uint64_t ev = 0;
    uint32_t valid = 1;
    int rc;
    while ((rc = rec_row_read(ph->r, ph->coh, pod_rec(ph, rq->rec), NULL, t->tuple_size, &valid,
                              &ev)) == REC_BUSY)
        pod_cpu_relax();
    if (rc == REC_OK && !valid && ev) w->db->hooks.row_removed(w->db, t, rq->key, ev);
    pod_unlink_moved(w, t, part, rq->key, row);
}

static void reply(struct pod_worker *w, const struct cxl_msg *m, int status, cxl_off rec,
                  const char *msg)
{
    struct pod_host *ph = w->db->pod;
    struct cxl_msg out;
    out.type = POD_MSG_REPLY;
    out.from_worker = (uint16_t)w->id;
    out.req_id = m->req_id;
    struct pod_reply_msg *rp = (struct pod_reply_msg *)out.data;
    rp->status = status;
    rp->reserved = 0;
    rp->rec = rec;
    size_t n = msg ? strnlen(msg, sizeof rp->msg - 1) : 0;
    memcpy(rp->msg, msg ? msg : "", n);
    rp->msg[n] = 0;
    out.len = (uint16_t)(offsetof(struct pod_reply_msg, msg) + n + 1);
    if (status == POD_RS_BUSY) pod_count(&ph->st.busy_replies, 1);
    if (status == POD_RS_NOMEM) pod_count(&ph->st.nomem_replies, 1);
    int rc = cxl_reply_post(ph->r, m->from_host, m->from_worker, &out);
    if (rc != CXL_RING_OK && rc != CXL_RING_STALE)
        pod_warn("reply to host %u worker %u: %s", m->from_host, m->from_worker,
                 cxl_ring_strerror(rc));
}

void pod_handle(struct pod_worker *w, const struct cxl_msg *m)
{
    pod_db *db = w->db;
    struct pod_host *ph = db->pod;
    const struct pod_req_msg *rq = (const struct pod_req_msg *)m->data;
    char msg[160];
    if (m->len < offsetof(struct pod_req_msg, key) || rq->table >= db->ntables ||
        rq->part >= db->tables[rq->table]->nparts ||
        db->tables[rq->table]->parts[rq->part].owner != (uint32_t)ph->host ||
        ((rq->flags & POD_RQ_HAS_KEY) && rq->key_len != db->tables[rq->table]->key_size) ||
        (m->type == POD_MSG_MOVE_MANY &&
         (rq->key_len > POD_MSG_KEY_MAX || m->len < offsetof(struct pod_req_msg, key) + rq->key_len ||
          rq->key_len != (uint32_t)rq->count * db->tables[rq->table]->key_size))) {
        snprintf(msg, sizeof msg, "message type %u of %u bytes for table %u partition %u: not "
                 "a partition this host owns, or keys of the wrong length", m->type, m->len,
                 rq->table, rq->part);
        if (m->type != POD_MSG_UNLINK) reply(w, m, POD_RS_ERROR, CXL_NULL, msg);
        else pod_error("%s", msg);
        return;
    }
    pod_table *t = db->tables[rq->table];
    uint32_t part = rq->part;
    ebr_enter(db->ebr, w->id);
    xebr_enter(ph->x, w->id);
    int status = POD_RS_ERROR;
    cxl_off rec = CXL_NULL;
    switch (m->type) {
    case POD_MSG_MOVE_IN: {
        struct pod_row *row = local_row(&t->parts[part].tree, rq->key);
        if (row) {
            status = move_in(w, t, part, row, rq->key, &rec, NULL);
        } else if (db->opt.phantom_protection) {
            struct pod_req_msg around = *rq;
            around.flags = (uint16_t)(POD_RQ_HAS_KEY | POD_RQ_INCLUSIVE | (rq->flags & POD_RQ_GAP_HELD));
            around.count = 0;
            status = move_chain(w, t, part, &around);
            if (status == POD_RS_OK) status = POD_RS_ABSENT;
        } else {
            status = POD_RS_ABSENT;
        }
        break;
    }
    case POD_MSG_MOVE_RANGE: status = move_chain(w, t, part, rq); break;
    case POD_MSG_MOVE_MANY: status = move_many(w, t, part, rq); break;
    case POD_MSG_PREP_INSERT: status = prep_insert(w, t, part, rq, &rec); break;
    case POD_MSG_UNLINK: unlink_req(w, t, part, rq); break;
    default:
        snprintf(msg, sizeof msg, "unknown message type %u", m->type);
        break;
    }
    xebr_exit(ph->x, w->id);
    ebr_exit(db->ebr, w->id);
    if (m->type != POD_MSG_UNLINK) reply(w, m, status, rec, status == POD_RS_ERROR ? msg : NULL);
}
