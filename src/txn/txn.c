/* Transactions: strict two-phase locking with NO_WAIT and next-key locking
 * (Tigon §3.4 on one host).
 *
 * Invariants
 *  1. Every row a transaction reads or writes is locked by it until commit or
 *     abort (strict 2PL). A lock that is taken fails the operation at once with
 *     POD_CONFLICT and dooms the attempt (NO_WAIT): no waiting, no deadlock.
 *  2. Writes go in place under the exclusive lock; the first write of a row
 *     saves its before-image, which abort copies back.
 *  3. An inserted row enters the index at once, invalid and exclusively
 *     locked; commit makes it valid. A deleted row stays in the index, locked,
 *     until commit marks it invalid and removes it. So a row in the index whose
 *     lock can be taken and that is invalid is dead (its remover is done with
 *     it); an operation that meets one starts over.
 *  4. Next-key locking: the lock on key k also covers the gap between k's
 *     predecessor and k; the partition's sentinel covers the gap after the last
 *     key. A scan locks every key it visits and the key after its range; a
 *     lookup of a missing key locks the next key; an insert must find the next
 *     key unlocked by others (an instant exclusive lock, released at once:
 *     after the insert the new key itself is locked). After locking a key
 *     found by a "next key" search, the search is repeated: if another key
 *     appeared in between, the step is retried, so no gap is ever left
 *     unprotected.
 *  5. Every operation runs inside the worker's EBR critical section (entered
 *     at begin), so rows and index nodes found in the index stay readable even
 *     if another transaction retires them meanwhile. */
#include "txn/txn.h"

#include <stdarg.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cxl/record_ops.h"
#include "db/types.h"
#include "log/txlog.h"
#include "pod/pod_int.h"
#include "pod/rowlock.h"
#include "storage/ebr.h"
#include "storage/lock.h"
#include "txn/cc.h"
#include "txn/txn_int.h"
#include "util/arena.h"
#include "util/cpu.h"


/* The region whose records hold the locks of moved rows (NULL outside a pod). */
static inline const struct cxl_region *txn_region(const struct pod_txn *tx)
{
    return tx->db->pod ? pod_host_region(tx->db->pod) : NULL;
}

/* ---- lifecycle ------------------------------------------------------------ */

static pod_txn *tigon_txn_new(pod_db *db, struct pod_worker *w)
{
    struct pod_txn *tx = calloc(1, sizeof *tx);
    if (!tx) return NULL;
    tx->head.cc = &cc_tigon_2pl;
    tx->db = db;
    tx->w = w;
    tx->cap = 64;
    tx->acc = malloc(tx->cap * sizeof *tx->acc);
    if (!tx->acc) {
        free(tx);
        return NULL;
    }
    return tx;
}

static void tigon_txn_free(pod_txn *tx)
{
    free(tx->hidx);
    arena_free(&tx->undo);
    free(tx->acc);
    free(tx);
}

static void tigon_begin(pod_txn *tx)
{
    tx->nacc = 0;
    tx->hvalid = false;
    memset(tx->seen, 0, sizeof tx->seen);
    tx->status = POD_OK;
    tx->touched = false;
    tx->msg[0] = 0;
    arena_reset(&tx->undo);
    leaf_memo_begin(&tx->memo);
    tx->pf_n = 0;
    tx->met.t = NULL;
    tx->active = true;
    ebr_enter(tx->db->ebr, tx->w->id);
    /* Records and CXL index nodes of every host stay readable until exit. */
    if (tx->db->pod) xebr_enter(tx->db->pod->x, tx->w->id);
}

static int tigon_status(const pod_txn *tx) { return tx->status; }
static bool tigon_touched_tables(const pod_txn *tx) { return tx->touched; }
static enum pod_abort_cause tigon_abort_cause(const pod_txn *tx) { return tx->cause; }
static char *tigon_message(pod_txn *tx) { return tx->msg; }
static pod_db *tigon_db(pod_txn *tx) { return tx->db; }
_Static_assert(sizeof ((struct pod_txn *)0)->msg == CC_MSG_LEN, "the message buffer of cc.h");

int txn_conflict(struct pod_txn *tx, enum pod_abort_cause cause)
{
    if (tx->status == POD_OK) {
        tx->status = POD_CONFLICT;
        tx->cause = cause;
    }
    return POD_CONFLICT;
}
#define conflict txn_conflict

void txn_note_lock(struct pod_txn *tx, pod_table *t, uint32_t part, const void *key,
                   const struct pod_row *row, const cxl_record *rec)
{
    struct lock_met *m = &tx->met;
    m->t = t;
    m->part = part;
    m->has_key = key != NULL;
    if (key) memcpy(m->key, key, t->key_size);
    m->has_word = row != NULL;
    m->word = row ? __atomic_load_n(&row->lock, __ATOMIC_ACQUIRE) : 0;
    const struct cxl_region *r = txn_region(tx);
    if (!rec && row && r && (m->word & LOCK_MOVED)) rec = rowlock_record(r, row);
    m->rec_off = rec ? cxl_off_in(r, rec) : CXL_NULL;
    m->rec = rec ? rec_load(rec) : 0;
}

/* The lock the last conflict met, for a call that gave up: its table,
 * partition and key, where it lives and what its words held then. A
 * row's word counts only this host's workers' read locks; a record's,
 * every host's. */
static void tigon_describe_conflict(const pod_txn *tx, char *out, size_t n)
{
    const struct lock_met *m = &tx->met;
    if (!m->t) {
        snprintf(out, n, "none noted");
        return;
    }
    char key[2 * 24 + 4] = "the sentinel";
    if (m->has_key) {
        uint32_t ks = m->t->key_size < 24 ? m->t->key_size : 24;
        for (uint32_t i = 0; i < ks; i++) snprintf(key + 2 * i, 3, "%02x", m->key[i]);
        if (ks < m->t->key_size) memcpy(key + 2 * ks, "...", 4);
    }
    size_t k = (size_t)snprintf(out, n, "table %s partition %u (host %u's) key %s", m->t->name,
                                m->part, m->t->parts[m->part].owner, key);
    if (k < n && m->has_word)
        k += (size_t)snprintf(out + k, n - k, ", row word %#x (%s%s%s%u readers)", m->word,
                              (m->word & LOCK_W) ? "W, " : "",
                              (m->word & LOCK_MOVED) ? "MOVED, " : "",
                              (m->word & ROW_LATCH) ? "latched, " : "", m->word & LOCK_READERS);
    if (k < n && m->rec_off != CXL_NULL)
        snprintf(out + k, n - k, ", lock in the CXL record at %#llx: %#llx (%s%s%u readers)",
                 (unsigned long long)m->rec_off, (unsigned long long)m->rec,
                 (m->rec & REC_LOCK_W) ? "W, " : "", (m->rec & REC_LATCH) ? "latched, " : "",
                 (unsigned)((m->rec & REC_LOCK_R_MASK) >> REC_LOCK_R_SHIFT));
    else if (k < n && m->has_word)
        snprintf(out + k, n - k, ", lock in the row word");
}

/* Before-images live in the arena: reused from one attempt to the next,
 * pointers into it valid for the whole attempt. */
void *txn_undo_alloc(struct pod_txn *tx, size_t n) { return arena_alloc(&tx->undo, n); }

/* ---- the access set ------------------------------------------------------- */

#define LINEAR_MAX 16
#define HIDX_EMPTY UINT32_MAX

static uint32_t hash_id(const void *id, uint32_t mask)
{
    return (uint32_t)((((uintptr_t)id >> 3) * 0x9e3779b97f4a7c15ull) >> 32) & mask;
}

/* The id's bit in tx->seen. */
static inline uint32_t seen_bit(const void *id)
{
    return (uint32_t)((((uintptr_t)id >> 3) * 0x9e3779b97f4a7c15ull) >> 54); /* 0..1023 */
}

static void hidx_put(struct pod_txn *tx, uint32_t i)
{
    uint32_t mask = tx->hsize - 1, h = hash_id(access_id(&tx->acc[i]), mask);
    while (tx->hidx[h] != HIDX_EMPTY) h = (h + 1) & mask;
    tx->hidx[h] = i;
}

/* Take the newest access out of the index. Emptying its slot is enough: the
 * slot was free when every older access was placed, so it lies on no older
 * access's probe sequence. Each insert's instant lock on its next key is
 * given back this way; rebuilding the index at the next lookup instead made
 * ~13 rebuilds per NewOrder. */
static void hidx_remove_newest(struct pod_txn *tx)
{
    uint32_t mask = tx->hsize - 1, last = tx->nacc - 1;
    for (uint32_t h = hash_id(access_id(&tx->acc[last]), mask); tx->hidx[h] != HIDX_EMPTY;
         h = (h + 1) & mask)
        if (tx->hidx[h] == last) {
            tx->hidx[h] = HIDX_EMPTY;
            return;
        }
}

/* (Re)build the index for the current accesses with room to grow (load <= 1/4).
 * It uses as many slots as that needs, not all that an earlier big
 * transaction allocated: clearing those cost a TPC-C NewOrder 1.6% of its
 * worker's time once a StockLevel had grown them. false when out of memory:
 * callers fall back to the linear search. */
static bool hidx_build(struct pod_txn *tx)
{
    uint32_t want = 64;
    while (want < 4 * tx->nacc) want *= 2;
    if (want > tx->hcap) {
        uint32_t *n = realloc(tx->hidx, want * sizeof *n);
        if (!n) return false;
        tx->hidx = n;
        tx->hcap = want;
    }
    tx->hsize = want;
    memset(tx->hidx, 0xff, want * sizeof *tx->hidx);
    for (uint32_t i = 0; i < tx->nacc; i++) hidx_put(tx, i);
    tx->hvalid = true;
    return true;
}

struct access *txn_find_access(struct pod_txn *tx, const void *id)
{
    uint32_t b = seen_bit(id);
    if (!(tx->seen[b >> 6] & (1ull << (b & 63)))) return NULL;
    if (tx->nacc > LINEAR_MAX && (tx->hvalid || hidx_build(tx))) {
        uint32_t mask = tx->hsize - 1;
        for (uint32_t h = hash_id(id, mask); tx->hidx[h] != HIDX_EMPTY; h = (h + 1) & mask)
            if (access_id(&tx->acc[tx->hidx[h]]) == id) return &tx->acc[tx->hidx[h]];
        return NULL;
    }
    for (uint32_t i = tx->nacc; i-- > 0;)
        if (access_id(&tx->acc[i]) == id) return &tx->acc[i];
    return NULL;
}
#define find_access txn_find_access

struct access *txn_add_access(struct pod_txn *tx, struct pod_row *row, cxl_record *rec,
                              pod_table *t, uint32_t part, uint8_t held, const void *key)
{
    void *k = NULL;
    if (key) {
        if (!(k = txn_undo_alloc(tx, t->key_size))) {
            tx->status = POD_E_NOMEM;
            pod_txn_fail(tx, POD_E_NOMEM, "out of memory for a key");
            return NULL;
        }
        memcpy(k, key, t->key_size);
    }
    if (tx->nacc == tx->cap) {
        struct access *n = realloc(tx->acc, 2 * tx->cap * sizeof *n);
        if (!n) {
            tx->status = POD_E_NOMEM;
            pod_txn_fail(tx, POD_E_NOMEM, "out of memory for the access set");
            return NULL;
        }
        tx->acc = n;
        tx->cap *= 2;
    }
    struct access *a = &tx->acc[tx->nacc++];
    *a = (struct access){.row = row, .rec = rec, .table = t, .part = part, .held = held, .key = k};
    uint32_t b = seen_bit(access_id(a));
    tx->seen[b >> 6] |= 1ull << (b & 63);
    if (tx->hvalid) {
        if (4 * tx->nacc <= tx->hsize) hidx_put(tx, tx->nacc - 1);
        else tx->hvalid = false; /* rebuilt bigger at the next lookup */
    }
    return a;
}

/* ---- locking -------------------------------------------------------------- */

/* How this transaction finds the record of a local row in CXL memory: the
 * row's shortcut, or with engine.shortcut_pointers off (an ablation) the
 * partition's CXL index, searched for the row's key. */
static inline struct rowlock_at row_at(const struct pod_txn *tx, pod_table *t, uint32_t part,
                                       struct pod_row *row, const void *key)
{
    struct pod_host *ph = tx->db->pod;
    struct rowlock_at at = {txn_region(tx), NULL, NULL, tx->w->id};
    /* (A sentinel's record is in no index: its shortcut is the only way.) */
    if (ph && !ph->conf->engine.shortcut_pointers && row != t->parts[part].sentinel) {
        at.ix = t->parts[part].cxl->ix;
        at.key = key;
    }
    return at;
}

/* The record of a local row we hold locked while it is in CXL memory. */
static cxl_record *moved_record(const struct pod_txn *tx, struct access *a)
{
    struct rowlock_at at = row_at(tx, a->table, a->part, a->row, a->key);
    cxl_record *rec = rowlock_find(&at, a->row);
    /* Locked by us, the row cannot leave CXL memory: the index has it. */
    return rec ? rec : rowlock_record(at.r, a->row);
}

/* An access that took its lock in a row's HWcc record (the row is in CXL
 * memory): the other rows of the last pod_prefetch batch are likely there
 * too, and each of their locks will be a CAS on a record line that misses
 * after the row's own. Fetch those lines for writing now, so that the misses
 * overlap (in a long-lived YCSB pod, where nearly every row is in CXL memory,
 * the records' lock words were 13% of the owner's worker). Once per batch:
 * pf_n goes to 0.
 * The rows are readable: they were found inside this transaction's EBR
 * section; a record that moved out meanwhile is only a wasted prefetch. */
static void prefetch_records(struct pod_txn *tx)
{
    const struct cxl_region *r = txn_region(tx);
    for (uint32_t i = 0; i < tx->pf_n; i++) {
        struct pod_row *row = tx->pf_rows[i];
        if (!row || !rowlock_moved(row)) continue;
        cxl_record *rec = rowlock_record(r, row);
        if (rec) pod_prefetch_write(rec);
    }
    tx->pf_n = 0;
}

/* Take (or keep) a lock of mode `want` on the local row of key (NULL: the
 * partition's sentinel) for the rest of the transaction. *acc gets the
 * access entry, which keeps a copy of the key. POD_OK or POD_CONFLICT. */
static int lock_row(struct pod_txn *tx, pod_table *t, uint32_t part, struct pod_row *row,
                    const void *key, uint8_t want, enum pod_abort_cause read_cause,
                    struct access **acc)
{
    const struct cxl_region *r = txn_region(tx);
    struct access *a = find_access(tx, row);
    if (a && a->held >= want) {
        *acc = a;
        return POD_OK;
    }
    if (tx->db->opt.no_locking) { /* benchmark-only: track the access, touch no lock word */
        if (a) a->held = want;
        else if (!(a = txn_add_access(tx, row, NULL, t, part, want, key))) return POD_E_NOMEM;
        *acc = a;
        return POD_OK;
    }
    if (a && a->held == HELD_READ) { /* want write */
        if (!rowlock_upgrade(r, row, &a->in_cxl)) {
            txn_note_lock(tx, t, part, key, row, NULL);
            return conflict(tx, POD_CAUSE_UPGRADE);
        }
        a->held = HELD_WRITE;
        *acc = a;
        return POD_OK;
    }
    bool in_cxl;
    struct rowlock_at at = row_at(tx, t, part, row, key);
    if (!rowlock_try_at(&at, row, want, &in_cxl)) {
        txn_note_lock(tx, t, part, key, row, NULL);
        return conflict(tx, want == HELD_WRITE ? POD_CAUSE_WRITE_LOCK : read_cause);
    }
    if (in_cxl && tx->pf_n) prefetch_records(tx);
    if (a) {
        a->held = want;
        a->in_cxl = in_cxl;
    } else if (!(a = txn_add_access(tx, row, NULL, t, part, want, key))) {
        rowlock_release(r, row, want, in_cxl);
        return POD_E_NOMEM;
    } else {
        a->in_cxl = in_cxl;
    }
    *acc = a;
    return POD_OK;
}

static void release(struct pod_txn *tx, struct access *a)
{
    if (a->rec) remote_release(tx, a);
    else if (a->held != HELD_NONE && !tx->db->opt.no_locking)
        rowlock_release(txn_region(tx), a->row, a->held, a->in_cxl);
}

/* Give back a lock taken by this operation that turned out not to be needed
 * (a dead row, a next key that moved, an insert's instant lock on the next
 * key). Only the newest access can be one. */
void txn_unlock_fresh(struct pod_txn *tx, struct access *a)
{
    if (a != &tx->acc[tx->nacc - 1] || (a->flags & ~ACC_LOADED)) return;
    release(tx, a);
    if (tx->hvalid) hidx_remove_newest(tx);
    tx->nacc--;
}
#define unlock_fresh txn_unlock_fresh

/* The current tuple of a local row we hold locked. Once another host wrote
 * it in CXL memory (is-dirty), the CXL copy is the tuple: under a write lock
 * it is copied back to DRAM (nobody else can read the row meanwhile), under
 * a shared lock into a private copy. With engine.dirty_tracking off (an
 * ablation) the DRAM copy of a tuple in CXL memory is never trusted: the
 * CXL copy is read every time, until this transaction wrote the row. */
static const unsigned char *local_tuple(struct pod_txn *tx, struct access *a)
{
    struct pod_row *row = a->row;
    if (!tx->db->pod || (a->flags & ACC_INSERTED) || !rowlock_moved(row)) return row->tuple;
    /* A private copy read under the shared lock serves reads; once the lock
     * is exclusive, writes go to the row, so the row must be made current
     * first (below) or they would change a stale tuple (a lost update). */
    if ((a->flags & ACC_LOADED) && a->held != HELD_WRITE) return a->copy;
    struct pod_host *ph = tx->db->pod;
    cxl_record *rec = moved_record(tx, a);
    if (ph->conf->engine.dirty_tracking ? !(rec_load(rec) & REC_DIRTY)
                                        : (a->flags & ACC_UPDATED) != 0)
        return row->tuple;
    uint32_t tsz = a->table->tuple_size;
    if (a->held == HELD_WRITE) {
        uint64_t ev;
        uint32_t valid;
        if (rec_row_read(pod_host_region(ph), pod_host_coherence(ph), rec, row->tuple, tsz, &valid,
                         &ev) == REC_OK) {
            row_set_epoch_version(row, ev);
            row_set_valid(row, valid);
            rec_flag_clear(rec, REC_DIRTY);
        }
        return row->tuple;
    }
    if (!(a->copy = txn_undo_alloc(tx, tsz))) return row->tuple;
    rec_row_read(pod_host_region(ph), pod_host_coherence(ph), rec, a->copy, tsz, NULL, NULL);
    a->flags |= ACC_LOADED;
    return a->copy;
}

/* Whether a local row we hold locked is a live tuple. A row another host
 * inserted is valid only in CXL memory until the owner reads it back. */
static bool local_valid(struct pod_txn *tx, struct access *a)
{
    struct pod_row *row = a->row;
    if (row_valid(row) || (a->flags & ACC_INSERTED)) return true;
    if (!tx->db->pod || !rowlock_moved(row)) return false;
    struct pod_host *ph = tx->db->pod;
    cxl_record *rec = moved_record(tx, a);
    if (ph->conf->engine.dirty_tracking && !(rec_load(rec) & REC_DIRTY)) return false;
    uint32_t valid = 0;
    rec_row_read(pod_host_region(ph), pod_host_coherence(ph), rec, NULL, a->table->tuple_size,
                 &valid, NULL);
    return valid;
}

/* ---- argument checks ------------------------------------------------------ */

static int check_op(struct pod_txn *tx, pod_table *t, const void *key)
{
    tx->touched = true;
    if (tx->status != POD_OK) return tx->status;
    return cc_check_key(tx, tx->db, t, key);
}

/* ---- next-key locking ----------------------------------------------------- */

/* The row holding the smallest key > key (or the sentinel), with its key in
 * key_out (unset for the sentinel). */
static struct pod_row *next_row(pod_table *t, uint32_t part, const void *key, bool inclusive,
                                void *key_out, bool *is_end, bt_hint *hint)
{
    uint64_t v;
    bt_status st = bt_next_at(&t->parts[part].tree, key, inclusive, key_out, &v, hint);
    *is_end = st != BT_OK;
    return st == BT_OK ? (struct pod_row *)(uintptr_t)v : t->parts[part].sentinel;
}

/* Lock the gap after `key` (exclusive of key) in mode want, until commit.
 * Repeats the search after locking until the locked row is still the next. */
static int lock_gap_after(struct pod_txn *tx, pod_table *t, uint32_t part, const void *key,
                          bool inclusive, uint8_t want, bt_hint *hint)
{
    unsigned char k1[BT_MAX_KEY_WIDTH], k2[BT_MAX_KEY_WIDTH];
    for (int tries = 0; tries < OP_RESTARTS; tries++) {
        bool end1, end2;
        struct pod_row *r = next_row(t, part, key, inclusive, k1, &end1, hint);
        struct access *a;
        int rc = lock_row(tx, t, part, r, end1 ? NULL : k1, want, POD_CAUSE_NEXT_KEY, &a);
        if (rc) {
            if (rc == POD_CONFLICT) tx->cause = POD_CAUSE_NEXT_KEY;
            return rc;
        }
        struct pod_row *again = next_row(t, part, key, inclusive, k2, &end2, hint);
        if (again == r) return POD_OK;
        unlock_fresh(tx, a);
    }
    return conflict(tx, POD_CAUSE_NEXT_KEY);
}

/* ---- point operations ----------------------------------------------------- */

enum find_result { FOUND, MISSING };

/* Find and lock the row of key in mode want. On FOUND *acc is its access
 * (a row this transaction deleted counts as MISSING). On MISSING with phantom
 * protection, the gap where key would be is locked (shared). */
static int find_locked(struct pod_txn *tx, pod_table *t, const void *key, uint8_t want,
                       enum find_result *res, struct access **acc, uint32_t *part_out)
{
    uint32_t part = table_partition_of(t, key);
    *part_out = part;
    if (txn_is_remote(tx, t, part)) {
        enum remote_find rf;
        int rc = remote_find(tx, t, part, key, want, &rf, acc);
        *res = rf == REMOTE_FOUND ? FOUND : MISSING;
        return rc;
    }
    txn_serve_inbox(tx);
    bt_hint hint = {0};
    leaf_memo_get(&tx->memo, &t->parts[part].tree, key, t->key_size, &hint);
    for (int tries = 0; tries < OP_RESTARTS; tries++) {
        uint64_t v;
        struct pod_row *row = table_lookup(t, part, key, &hint);
        if (row) {
            struct access *a = find_access(tx, row);
            if (a && (a->flags & ACC_DELETED)) {
                *res = MISSING; /* our own delete: the key is gone for us */
                return POD_OK;
            }
            int rc = lock_row(tx, t, part, row, key, want, POD_CAUSE_READ_LOCK, &a);
            if (rc) return rc;
            if (local_valid(tx, a)) {
                *res = FOUND;
                *acc = a;
                return POD_OK;
            }
            unlock_fresh(tx, a); /* dead: its remover is taking it out of the index */
            continue;
        }
        if (tx->db->opt.phantom_protection) {
            int rc = lock_gap_after(tx, t, part, key, false, HELD_READ, &hint);
            if (rc) return rc;
            /* The key may have been inserted before the gap was locked. */
            if (bt_lookup_at(&t->parts[part].tree, key, &v, &hint) == BT_OK) continue;
        }
        *res = MISSING;
        return POD_OK;
    }
    return conflict(tx, POD_CAUSE_READ_LOCK);
}

static int get_impl(struct pod_txn *tx, pod_table *t, const void *key, void *out, uint8_t want)
{
    int rc = check_op(tx, t, key);
    if (rc) return rc;
    enum find_result fr;
    struct access *a;
    uint32_t part;
    if ((rc = find_locked(tx, t, key, want, &fr, &a, &part))) return rc;
    if (fr == MISSING) return POD_NOT_FOUND;
    if (out) memcpy(out, a->rec ? a->copy : local_tuple(tx, a), t->tuple_size);
    return POD_OK;
}

static int tigon_prefetch(pod_txn *tx, pod_table *t, const void *keys, uint32_t n)
{
    int rc = check_op(tx, t, keys);
    if (rc) return rc;
    const unsigned char *k = keys;
    /* This host's rows, and other hosts' tuples that are in CXL memory. */
    uint32_t parts[2][BT_PREFETCH_MAX];
    const void *batch[2][BT_PREFETCH_MAX];
    bt_hint hints[BT_PREFETCH_MAX];
    unsigned m[2] = {0, 0};
    for (uint32_t i = 0; i < n; i++) {
        const void *key = k + (size_t)i * t->key_size;
        uint32_t part = table_partition_of(t, key);
        int r = txn_is_remote(tx, t, part);
        parts[r][m[r]] = part;
        batch[r][m[r]++] = key;
        if (m[r] == BT_PREFETCH_MAX || i + 1 == n)
            for (int b = 0; b < 2; b++) {
                if (!m[b]) continue;
                if (b) {
                    remote_prefetch(tx, t, parts[b], batch[b], m[b]);
                } else {
                    table_prefetch(t, parts[b], batch[b], m[b], hints,
                                   tx->db->pod ? tx->pf_rows : NULL);
                    tx->pf_n = tx->db->pod ? m[b] : 0;
                    for (unsigned j = 0; j < m[b]; j++)
                        leaf_memo_put(&tx->memo, batch[b][j], t->key_size, &hints[j]);
                }
                m[b] = 0;
            }
    }
    return POD_OK;
}

static int tigon_get(pod_txn *tx, pod_table *t, const void *key, void *tuple_out,
                     bool for_update)
{
    return get_impl(tx, t, key, tuple_out, for_update ? HELD_WRITE : HELD_READ);
}

/* A local row written while in CXL memory is published at commit
 * (publish_moved): start fetching the CXL lines that copy will store into,
 * so that it does not wait for each of them then. */
static void prefetch_publish(struct pod_txn *tx, struct access *a, uint32_t lo, uint32_t hi)
{
    if (!a->in_cxl) return;
    struct pod_host *ph = tx->db->pod;
    rec_row_prefetch_write(pod_host_region(ph), pod_host_coherence(ph), moved_record(tx, a), lo,
                           hi - lo);
}

/* Save the before-image of bytes lo..hi-1 of a local row this transaction
 * holds exclusively, unless saved already: a->undo holds bytes ulo..uhi-1,
 * widened here to cover lo..hi-1 (the bytes outside the old range were not
 * written yet: only saved ranges are). False when out of memory. */
static bool save_before(struct pod_txn *tx, struct access *a, uint32_t lo, uint32_t hi)
{
    if (a->flags & ACC_UPDATED) {
        if (lo >= a->ulo && hi <= a->uhi) return true;
        prefetch_publish(tx, a, lo, hi);
        uint32_t nlo = lo < a->ulo ? lo : a->ulo, nhi = hi > a->uhi ? hi : a->uhi;
        unsigned char *u = txn_undo_alloc(tx, nhi - nlo);
        if (!u) return false;
        const unsigned char *row = a->row->tuple;
        memcpy(u, row + nlo, a->ulo - nlo);
        memcpy(u + (a->ulo - nlo), a->undo, a->uhi - a->ulo);
        memcpy(u + (a->uhi - nlo), row + a->uhi, nhi - a->uhi);
        a->undo = u, a->ulo = nlo, a->uhi = nhi;
        return true;
    }
    const unsigned char *cur = local_tuple(tx, a); /* refreshes DRAM if CXL is newer */
    prefetch_publish(tx, a, lo, hi);
    unsigned char *u = txn_undo_alloc(tx, hi - lo);
    if (!u) return false;
    memcpy(u, cur + lo, hi - lo);
    a->undo = u, a->ulo = lo, a->uhi = hi;
    a->flags |= ACC_UPDATED;
    return true;
}

/* Where a write of bytes lo..hi-1 of a row this transaction holds
 * exclusively goes: the row itself, after the before-image of those bytes
 * was saved, or for another host's tuple the transaction's copy, published
 * at commit. Returns the tuple; NULL (failed) when there is no memory for the
 * before-image. */
static unsigned char *writable_range(struct pod_txn *tx, struct access *a, uint32_t lo,
                                     uint32_t hi)
{
    if (a->rec) {
        txn_remote_written(a, lo, hi);
        return a->copy;
    }
    if (!(a->flags & ACC_INSERTED) && !save_before(tx, a, lo, hi)) {
        tx->status = POD_E_NOMEM;
        pod_txn_fail(tx, POD_E_NOMEM, "out of memory for a before-image");
        return NULL;
    }
    return a->row->tuple;
}

static void *writable_tuple(struct pod_txn *tx, pod_table *t, struct access *a)
{
    return writable_range(tx, a, 0, t->tuple_size);
}

static int write_row(struct pod_txn *tx, pod_table *t, struct access *a, const void *tuple)
{
    void *dst = writable_tuple(tx, t, a);
    if (!dst) return POD_E_NOMEM;
    memcpy(dst, tuple, t->tuple_size);
    return POD_OK;
}

/* Lock an existing row for an in-place call (out: where the caller's
 * pointer goes, checked). POD_OK with *a, POD_NOT_FOUND, or a status. */
static int lock_in_place(struct pod_txn *tx, pod_table *t, const void *key, const void *out,
                         uint8_t want, struct access **a)
{
    int rc = check_op(tx, t, key);
    if (rc) return rc;
    if (!out) return pod_txn_fail(tx, POD_E_INVALID, "%s: tuple is NULL", t->name);
    enum find_result fr;
    uint32_t part;
    if ((rc = find_locked(tx, t, key, want, &fr, a, &part))) return rc;
    return fr == MISSING ? POD_NOT_FOUND : POD_OK;
}

static int tigon_get_ref(pod_txn *tx, pod_table *t, const void *key, const void **tuple)
{
    struct access *a;
    int rc = lock_in_place(tx, t, key, tuple, HELD_READ, &a);
    if (rc == POD_OK) *tuple = a->rec ? a->copy : local_tuple(tx, a);
    return rc;
}

/* whole: pod_update_ref */
static int tigon_update_range(pod_txn *tx, pod_table *t, const void *key, bool whole,
                              uint32_t off, uint32_t len, void **tuple)
{
    int rc = check_op(tx, t, key);
    if (rc) return rc;
    if (whole) {
        struct access *a;
        rc = lock_in_place(tx, t, key, tuple, HELD_WRITE, &a);
        if (rc == POD_OK && !(*tuple = writable_tuple(tx, t, a))) return POD_E_NOMEM;
        return rc;
    }
    if ((rc = cc_check_range(tx, t, off, len))) return rc;
    struct access *a;
    if ((rc = lock_in_place(tx, t, key, tuple, HELD_WRITE, &a)) != POD_OK) return rc;
    return (*tuple = writable_range(tx, a, off, off + len)) ? POD_OK : POD_E_NOMEM;
}

static int tigon_put(pod_txn *tx, pod_table *t, const void *key, const void *tuple)
{
    int rc = check_op(tx, t, key);
    if (rc) return rc;
    if (!tuple) return pod_txn_fail(tx, POD_E_INVALID, "%s: tuple is NULL", t->name);
    enum find_result fr;
    struct access *a;
    uint32_t part;
    if ((rc = find_locked(tx, t, key, HELD_WRITE, &fr, &a, &part))) return rc;
    if (fr == MISSING) return POD_NOT_FOUND;
    return write_row(tx, t, a, tuple);
}

static int tigon_remove(pod_txn *tx, pod_table *t, const void *key)
{
    int rc = check_op(tx, t, key);
    if (rc) return rc;
    enum find_result fr;
    struct access *a;
    uint32_t part;
    if ((rc = find_locked(tx, t, key, HELD_WRITE, &fr, &a, &part))) return rc;
    if (fr == MISSING) return POD_NOT_FOUND;
    /* The row stays in the index, locked, until commit (invariant 3). */
    a->flags |= ACC_DELETED;
    return POD_OK;
}

static int tigon_insert(pod_txn *tx, pod_table *t, const void *key, const void *tuple)
{
    int rc = check_op(tx, t, key);
    if (rc) return rc;
    if (!tuple) return pod_txn_fail(tx, POD_E_INVALID, "%s: tuple is NULL", t->name);
    uint32_t part = table_partition_of(t, key);
    if (txn_is_remote(tx, t, part)) return remote_insert(tx, t, part, key, tuple);
    txn_serve_inbox(tx);
    const struct cxl_region *reg = txn_region(tx);
    /* The leaf of this transaction's last insert into the tree: a run of
     * inserts (an order's lines) goes on there without a descent. */
    bt_hint hint = {0};
    leaf_memo_get(&tx->memo, &t->parts[part].tree, NULL, 0, &hint);
    for (int tries = 0; tries < OP_RESTARTS; tries++) {
        struct pod_row *row = table_lookup(t, part, key, &hint);
        if (row) {
            struct access *a = find_access(tx, row);
            if (a && (a->flags & ACC_DELETED)) {
                /* Deleted and inserted again by us: an update of the row. */
                a->flags &= (uint8_t)~ACC_DELETED;
                return write_row(tx, t, a, tuple);
            }
            /* Present: a shared lock makes "exists" hold until commit. */
            if ((rc = lock_row(tx, t, part, row, key, HELD_READ, POD_CAUSE_READ_LOCK, &a)))
                return rc;
            if (local_valid(tx, a)) return POD_EXISTS;
            unlock_fresh(tx, a);
            continue;
        }
        /* The gap must not be locked by anyone else: an instant exclusive
         * lock on the next key, kept only if this transaction already had it. */
        struct access *gap = NULL;
        bool gap_fresh = false;
        struct access *downgrade = NULL; /* a shared lock of ours held exclusively for now */
        if (tx->db->opt.phantom_protection) {
            unsigned char k1[BT_MAX_KEY_WIDTH];
            bool end;
            struct pod_row *nr = next_row(t, part, key, false, k1, &end, &hint);
            struct access *had = find_access(tx, nr);
            uint8_t held = had ? had->held : HELD_NONE;
            if (held == HELD_READ) {
                /* Our shared lock does not keep other scanners out of the gap:
                 * hold it exclusively for the insert, then go back to shared.
                 * (Checking "only mine" without upgrading would let a scanner
                 * lock the gap between the check and the insert.) */
                if (!rowlock_upgrade(reg, nr, &had->in_cxl)) return conflict(tx, POD_CAUSE_NEXT_KEY);
                downgrade = had;
            } else if (held == HELD_NONE) {
                if ((rc = lock_row(tx, t, part, nr, end ? NULL : k1, HELD_WRITE,
                                   POD_CAUSE_NEXT_KEY, &gap))) {
                    tx->cause = POD_CAUSE_NEXT_KEY;
                    return rc;
                }
                gap_fresh = true;
            }
            bool end2;
            if (next_row(t, part, key, false, k1, &end2, &hint) != nr) {
                if (gap_fresh) unlock_fresh(tx, gap);
                if (downgrade) rowlock_downgrade(reg, downgrade->row, downgrade->in_cxl);
                continue;
            }
        }
        row = row_alloc(t);
        if (!row) {
            if (gap_fresh) unlock_fresh(tx, gap);
            if (downgrade) rowlock_downgrade(reg, downgrade->row, downgrade->in_cxl);
            tx->status = POD_E_NOMEM;
            return pod_txn_fail(tx, POD_E_NOMEM, "%s: out of memory for a row", t->name);
        }
        memcpy(row->tuple, tuple, t->tuple_size);
        row->lock = tx->db->opt.no_locking ? 0 : LOCK_W;
        bt_status st = table_index_insert(t, part, key, row, &hint);
        /* Still under the gap's lock: CXL memory must stop claiming the gap. */
        if (st == BT_OK && tx->db->pod) pod_local_inserted(tx->w, t, part, key);
        if (gap_fresh) unlock_fresh(tx, gap);
        if (downgrade) rowlock_downgrade(reg, downgrade->row, downgrade->in_cxl);
        if (st != BT_OK) {
            row_free(t, row);
            if (st == BT_EXISTS) continue; /* raced with an insert of the same key */
            tx->status = POD_E_NOMEM;
            return pod_txn_fail(tx, POD_E_NOMEM, "%s: index: %s", t->name, bt_status_name(st));
        }
        struct access *a = txn_add_access(tx, row, NULL, t, part, HELD_WRITE, key);
        if (!a) { /* cannot track it: take it out again */
            table_index_remove(t, part, key);
            ebr_retire(tx->db->ebr, tx->w->id, row, row_free_cb, (void *)t);
            return POD_E_NOMEM;
        }
        a->flags = ACC_INSERTED;
        leaf_memo_put(&tx->memo, NULL, 0, &hint);
        return POD_OK;
    }
    return conflict(tx, POD_CAUSE_NEXT_KEY);
}

/* ---- scans ------------------------------------------------------------------ */

struct scan_state {
    struct pod_txn *tx;
    pod_table *t;
    uint32_t part;
    const void *lo, *hi;
    uint32_t limit, count;
    uint8_t want;
    pod_scan_fn fn;
    void *arg;
    bt_hint hint; /* the leaf of the last step */
};

/* Visit one row found by the scan. Returns <0 on conflict, 0 to go on, 1 to stop. */
static int visit(struct scan_state *s, struct access *a, const void *key)
{
    if (a->flags & ACC_DELETED) return 0;
    s->count++;
    bool go_on = s->fn ? s->fn(s->arg, key, local_tuple(s->tx, a)) : true;
    return (!go_on || (s->limit && s->count >= s->limit)) ? 1 : 0;
}

/* scan_backward is its mirror image; the two stay apart because their phantom
 * protection differs (forward: each step's next row read again after its
 * lock; backward: the gap above hi locked before the first step). */
static int scan_forward(struct scan_state *s)
{
    struct pod_txn *tx = s->tx;
    pod_table *t = s->t;
    bool phantom = tx->db->opt.phantom_protection;
    unsigned char cur[BT_MAX_KEY_WIDTH], k1[BT_MAX_KEY_WIDTH], k2[BT_MAX_KEY_WIDTH];
    bool have_cur = s->lo != NULL, inclusive = true;
    if (have_cur) memcpy(cur, s->lo, t->key_size);
    int restarts = 0;
    for (;;) {
        bool end;
        struct pod_row *r =
            next_row(t, s->part, have_cur ? cur : NULL, inclusive, k1, &end, &s->hint);
        bool past = end || (s->hi && memcmp(k1, s->hi, t->key_size) > 0);
        if (past && !phantom) return POD_OK;
        /* Past the range: lock the next key, which covers the last gap. */
        uint8_t mode = past ? HELD_READ : s->want;
        struct access *a;
        int rc = lock_row(tx, t, s->part, r, end ? NULL : k1, mode,
                          past ? POD_CAUSE_NEXT_KEY : POD_CAUSE_READ_LOCK, &a);
        if (rc) return rc;
        if (phantom) {
            bool end2;
            struct pod_row *again =
                next_row(t, s->part, have_cur ? cur : NULL, inclusive, k2, &end2, &s->hint);
            if (again != r) { /* a key appeared before r: take that step again */
                unlock_fresh(tx, a);
                if (++restarts > OP_RESTARTS) return conflict(tx, POD_CAUSE_NEXT_KEY);
                continue;
            }
        }
        if (past) return POD_OK;
        if (!local_valid(tx, a)) { /* dead: being removed */
            unlock_fresh(tx, a);
            if (++restarts > OP_RESTARTS) return conflict(tx, POD_CAUSE_READ_LOCK);
            continue;
        }
        memcpy(cur, k1, t->key_size);
        have_cur = true;
        inclusive = false;
        if ((rc = visit(s, a, cur))) return rc < 0 ? rc : POD_OK;
    }
}

static struct pod_row *prev_row(pod_table *t, uint32_t part, const void *key, bool inclusive,
                                void *key_out, bt_hint *hint)
{
    uint64_t v;
    bt_status st = bt_prev_at(&t->parts[part].tree, key, inclusive, key_out, &v, hint);
    return st == BT_OK ? (struct pod_row *)(uintptr_t)v : NULL;
}

/* The mirror image of scan_forward, kept apart because the phantom protection
 * differs: here the gap above hi is locked before the first step. */
static int scan_backward(struct scan_state *s)
{
    struct pod_txn *tx = s->tx;
    pod_table *t = s->t;
    unsigned char cur[BT_MAX_KEY_WIDTH], k1[BT_MAX_KEY_WIDTH];
    /* The gap above hi is covered by the key after hi (invariant 4); every
     * gap below is covered by the key above it, already locked. */
    if (tx->db->opt.phantom_protection && s->hi) {
        int rc = lock_gap_after(tx, t, s->part, s->hi, false, HELD_READ, &s->hint);
        if (rc) return rc;
    } else if (tx->db->opt.phantom_protection) {
        struct access *a;
        int rc = lock_row(tx, t, s->part, t->parts[s->part].sentinel, NULL, HELD_READ,
                          POD_CAUSE_NEXT_KEY, &a);
        if (rc) return rc;
    }
    bool have_cur = s->hi != NULL, inclusive = true;
    if (have_cur) memcpy(cur, s->hi, t->key_size);
    int restarts = 0;
    for (;;) {
        struct pod_row *r = prev_row(t, s->part, have_cur ? cur : NULL, inclusive, k1, &s->hint);
        if (!r || (s->lo && memcmp(k1, s->lo, t->key_size) < 0)) return POD_OK;
        struct access *a;
        int rc = lock_row(tx, t, s->part, r, k1, s->want, POD_CAUSE_READ_LOCK, &a);
        if (rc) return rc;
        if (!local_valid(tx, a)) {
            unlock_fresh(tx, a);
            if (++restarts > OP_RESTARTS) return conflict(tx, POD_CAUSE_READ_LOCK);
            continue;
        }
        memcpy(cur, k1, t->key_size);
        have_cur = true;
        inclusive = false;
        if ((rc = visit(s, a, cur))) return rc < 0 ? rc : POD_OK;
    }
}

static int tigon_scan(pod_txn *tx, pod_table *t, const void *lo, const void *hi, uint32_t limit,
                      unsigned flags, pod_scan_fn fn, void *arg)
{
    tx->touched = true;
    if (tx->status != POD_OK) return tx->status;
    uint32_t part;
    int rc = cc_check_scan(tx, tx->db, t, lo, hi, &part);
    if (rc) return rc < 0 ? rc : POD_OK;
    uint8_t want = (flags & POD_SCAN_FOR_UPDATE) ? HELD_WRITE : HELD_READ;
    if (txn_is_remote(tx, t, part))
        return remote_scan(tx, t, part, lo, hi, limit, flags & POD_SCAN_REVERSE, want, fn, arg);
    struct scan_state s = {.tx = tx, .t = t, .part = part, .lo = lo, .hi = hi, .limit = limit,
                           .want = want, .fn = fn, .arg = arg};
    return (flags & POD_SCAN_REVERSE) ? scan_backward(&s) : scan_forward(&s);
}

/* ---- commit and abort ----------------------------------------------------- */

/* Take a local row out of its partition's index and hand it to EBR. We hold
 * its exclusive lock, so the index entry still points at it. A row in CXL
 * memory goes through the pod layer, which also takes it out of the CXL
 * index (and keeps its record locked until it is freed). */
static void remove_row(struct pod_txn *tx, struct access *a)
{
    if (a->in_cxl) {
        pod_unlink_moved(tx->w, a->table, a->part, a->key, a->row);
        a->held = HELD_NONE; /* dead: the lock is never released */
        return;
    }
    table_index_remove(a->table, a->part, a->key);
    ebr_retire(tx->db->ebr, tx->w->id, a->row, row_free_cb, (void *)a->table);
}


/* A local row written while in CXL memory: other hosts read the CXL copy. */
static void publish_moved(struct pod_txn *tx, struct access *a)
{
    struct pod_host *ph = tx->db->pod;
    cxl_record *rec = moved_record(tx, a);
    /* Only the bytes written: the rest of the CXL copy is the DRAM tuple
     * already (the row was made current before the first write). */
    rec_row_write_range(pod_host_region(ph), pod_host_coherence(ph), rec,
                        (const unsigned char *)a->row->tuple + a->ulo, a->ulo, a->uhi - a->ulo,
                        a->table->tuple_size, 1, a->row->epoch_version, false);
}

static void tigon_commit(pod_txn *tx)
{
    struct log_worker *lw = log_txn_worker(tx->db, tx->w->id);
    uint64_t epoch = log_commit_epoch(tx->db, lw);
    for (uint32_t i = 0; i < tx->nacc; i++) {
        struct access *a = &tx->acc[i];
        if (a->rec) continue; /* remote: below, with the release */
        if (a->flags & ACC_DELETED) {
            row_set_valid(a->row, 0);
            row_set_epoch_version(a->row, txn_next_epoch_version(a->row->epoch_version, epoch));
            log_txn_write(tx->db, lw, a->table, a->key, a->row->epoch_version, NULL);
        } else if (a->flags & (ACC_INSERTED | ACC_UPDATED)) {
            uint64_t base = a->row->epoch_version;
            const void *key = a->key;
            if (a->flags & ACC_INSERTED) {
                row_set_epoch_version(a->row, txn_next_epoch_version(log_insert_ev_floor(tx->db), epoch));
                log_txn_write(tx->db, lw, a->table, key, a->row->epoch_version, a->row->tuple);
            } else { /* the log needs only what changed since the before-image */
                row_set_epoch_version(a->row, txn_next_epoch_version(base, epoch));
                log_txn_update(tx->db, lw, a->table, key, a->row->epoch_version, base, a->undo,
                               a->ulo, a->uhi, a->row->tuple);
            }
            row_set_valid(a->row, 1);
            if (a->in_cxl) publish_moved(tx, a);
        }
    }
    /* Every write is visible before any lock goes. */
    for (uint32_t i = 0; i < tx->nacc; i++)
        if (tx->acc[i].rec) remote_commit(tx, &tx->acc[i], epoch);
    for (uint32_t i = 0; i < tx->nacc; i++) {
        struct access *a = &tx->acc[i];
        if (!a->rec && (a->flags & ACC_DELETED)) {
            log_row_removed(tx->db, a->table, a->key, a->row->epoch_version);
            remove_row(tx, a);
        }
        release(tx, a);
    }
    tx->nacc = 0;
    tx->active = false;
    if (tx->db->pod) xebr_exit(tx->db->pod->x, tx->w->id);
    ebr_exit(tx->db->ebr, tx->w->id);
}

static void tigon_abort(pod_txn *tx)
{
    for (uint32_t i = tx->nacc; i-- > 0;) {
        struct access *a = &tx->acc[i];
        if (a->rec) remote_abort(tx, a);
        else if (a->flags & ACC_INSERTED) remove_row(tx, a);
        else if (a->flags & ACC_UPDATED)
            memcpy((unsigned char *)a->row->tuple + a->ulo, a->undo, a->uhi - a->ulo);
    }
    for (uint32_t i = 0; i < tx->nacc; i++) release(tx, &tx->acc[i]);
    tx->nacc = 0;
    tx->active = false;
    if (tx->db->pod) xebr_exit(tx->db->pod->x, tx->w->id);
    ebr_exit(tx->db->ebr, tx->w->id);
}

const struct cc_ops cc_tigon_2pl = {
    .name = "tigon-2pl",
    .txn_new = tigon_txn_new,
    .txn_free = tigon_txn_free,
    .begin = tigon_begin,
    .commit = tigon_commit,
    .abort = tigon_abort,
    .status = tigon_status,
    .abort_cause = tigon_abort_cause,
    .message = tigon_message,
    .describe_conflict = tigon_describe_conflict,
    .touched_tables = tigon_touched_tables,
    .db = tigon_db,
    .get = tigon_get,
    .get_ref = tigon_get_ref,
    .update_range = tigon_update_range,
    .put = tigon_put,
    .insert = tigon_insert,
    .remove = tigon_remove,
    .prefetch = tigon_prefetch,
    .scan = tigon_scan,
};
