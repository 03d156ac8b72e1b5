/* Moving tuples out of CXL memory under CLOCK (Tigon §3.3): when this host's
 * HWcc use passes the configured threshold, a worker walks its partitions'
 * CXL indexes with a hand per partition; a record whose clock bit is set
 * (another host used it since the last pass) gets a second chance, any other
 * one that nobody has locked goes back to DRAM. With engine.moveback_rate
 * set (it is off by default, as in Tigon, where tuples move only under
 * memory pressure) the same hand goes on slowly below the threshold, so a
 * tuple no other host touched for a whole pass goes back too: a workload
 * that stopped sharing would otherwise pay for CXL memory on its local
 * accesses for good. The SWcc row is marked
 * invalid before the index entry goes, and the record stays write-locked
 * until cross-host EBR frees it, so a host holding a stale pointer fails to
 * lock it and looks the key up again. */
#include <stdlib.h>
#include <string.h>

#include "cxl/record_ops.h"
#include "db/types.h"
#include "pod/pod_int.h"
#include "pod/rowlock.h"
#include "storage/ebr.h"
#include "util/clock.h"
#include "util/log.h"

#define BATCH 64
#define MOVEOUT_BACKOFF_NS 200000ull /* after a pass that could move nothing out */
/* Compact an index whose HWcc bytes per key passed this (it never merges
 * nodes, so move-outs leave it sparse). */
#define COMPACT_BYTES_PER_KEY 32
#define COMPACT_MIN_BYTES (64u << 10)

struct candidates {
    int n;
    size_t ks;
    unsigned char key[BATCH][BT_MAX_KEY_WIDTH];
    cxl_off rec[BATCH];
};

static bool collect(void *arg, const void *key, uint64_t value)
{
    struct candidates *c = arg;
    memcpy(c->key[c->n], key, c->ks);
    c->rec[c->n] = value;
    return ++c->n < BATCH;
}

/* Move one tuple out. false if it is in use (locked, latched) right now. */
static bool evict(struct pod_worker *w, pod_table *t, uint32_t part, const void *key, cxl_off off)
{
    struct pod_host *ph = w->db->pod;
    struct pod_part_cxl *pc = t->parts[part].cxl;
    struct pod_row *row = table_lookup(t, part, key, NULL);
    if (!row || !pod_row_latch_try(row)) return false;
    cxl_record *rec = pod_rec(ph, off);
    bool done = false;
    if (rowlock_moved(row) && row_shortcut(row) == off &&
        rec_try_write_lock(rec)) {
        uint32_t valid = 1;
        uint64_t ev = row->epoch_version;
        if (!ph->conf->engine.dirty_tracking || (rec_load(rec) & REC_DIRTY)) {
            /* Written by another host: the CXL copy is the tuple. When it
             * cannot be read now (its latch stayed taken), the tuple stays
             * in CXL memory: moving it out would keep the older DRAM copy. */
            if (rec_row_read(ph->r, ph->coh, rec, row->tuple, t->tuple_size, &valid, &ev) != REC_OK) {
                rec_release_write(rec);
                pod_row_latch_release(row);
                return false;
            }
            row_set_epoch_version(row, ev);
            row_set_valid(row, valid);
        }
        rec_row_write(ph->r, ph->coh, rec, NULL, t->tuple_size, 0, ev);
        pod_forget_record(w, pc, key, rec);
        /* The row's own lock is live again (the latch and valid bits stay). */
        __atomic_fetch_and(&row->lock, ~LOCK_STATE, __ATOMIC_RELEASE);
        row_set_shortcut(row, CXL_NULL);
        pod_count(&ph->st.moved_out, 1);
        done = true;
    }
    pod_row_latch_release(row);
    return done;
}

static uint64_t hwcc_used(struct pod_host *ph)
{
    struct cxl_usage u;
    cxl_usage_get(ph->r, ph->host, CXL_HWCC, &u);
    return u.used;
}

/* One step of the hand over partition (t, part): up to BATCH entries from
 * the partition's cursor. Returns how many were moved out; *wrapped when the
 * hand went past the last key. */
static int sweep(struct pod_worker *w, pod_table *t, uint32_t part, bool *wrapped)
{
    struct pod_host *ph = w->db->pod;
    struct pod_part_cxl *pc = t->parts[part].cxl;
    struct candidates *c = malloc(sizeof *c);
    if (!c) return 0;
    c->n = 0;
    c->ks = t->key_size;
    cxl_index_scan_forward(pc->ix, w->id, pc->hand_set ? pc->hand : NULL, false, collect, c);
    *wrapped = c->n < BATCH;
    int out = 0;
    for (int i = 0; i < c->n; i++) {
        cxl_record *rec = pod_rec(ph, c->rec[i]);
        if (rec_load(rec) & REC_CLOCK) {
            rec_flag_clear(rec, REC_CLOCK); /* second chance */
            continue;
        }
        if (evict(w, t, part, c->key[i], c->rec[i])) out++;
    }
    if (c->n) {
        memcpy(pc->hand, c->key[c->n - 1], c->ks);
        pc->hand_set = !*wrapped;
    } else {
        pc->hand_set = false;
    }
    free(c);
    return out;
}

/* engine.eviction: random. A uniformly random key between the index's first
 * and last key (compared as big-endian numbers over the first 8 bytes where
 * they differ), then the first resident key at or after it. Keys that follow
 * a wide stretch of key space are picked more often; no clock bits are read. */
static uint64_t rand_next(void)
{
    static __thread uint64_t s;
    if (!s) s = pod_mono_ns() ^ ((uint64_t)(uintptr_t)&s << 16) ^ 0x9e3779b97f4a7c15ull;
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
}

static void random_key(const unsigned char *lo, const unsigned char *hi, size_t ks,
                       unsigned char *out)
{
    size_t d = 0;
    while (d < ks && lo[d] == hi[d]) d++;
    memcpy(out, lo, ks);
    if (d == ks) return; /* one key */
    uint64_t a = 0, b = 0;
    size_t n = ks - d < 8 ? ks - d : 8;
    for (size_t i = 0; i < n; i++) {
        a = a << 8 | lo[d + i];
        b = b << 8 | hi[d + i];
    }
    uint64_t span = b - a;
    uint64_t x = a + (span == UINT64_MAX ? rand_next() : rand_next() % (span + 1));
    for (size_t i = n; i-- > 0; x >>= 8) out[d + i] = (unsigned char)x;
    for (size_t i = d + n; i < ks; i++) out[i] = (unsigned char)rand_next();
}

/* One step of random eviction over (t, part): BATCH random picks. */
static int sweep_random(struct pod_worker *w, pod_table *t, uint32_t part)
{
    struct pod_part_cxl *pc = t->parts[part].cxl;
    unsigned char key[BT_MAX_KEY_WIDTH], lo[BT_MAX_KEY_WIDTH], hi[BT_MAX_KEY_WIDTH];
    uint64_t off;
    /* The bounds once per batch: keys that came or went since only skew the picks. */
    if (cxl_index_next(pc->ix, w->id, NULL, false, lo, &off) != BT_OK ||
        cxl_index_prev(pc->ix, w->id, NULL, false, hi, &off) != BT_OK)
        return 0; /* empty */
    int out = 0;
    for (int i = 0; i < BATCH; i++) {
        random_key(lo, hi, t->key_size, key);
        if (cxl_index_next(pc->ix, w->id, key, true, key, &off) != BT_OK &&
            cxl_index_next(pc->ix, w->id, NULL, false, key, &off) != BT_OK)
            break;
        if (evict(w, t, part, key, off)) out++;
    }
    return out;
}

static void maybe_compact(struct pod_worker *w, struct pod_part_cxl *pc)
{
    uint64_t keys = cxl_index_nkeys(pc->ix), bytes = cxl_index_hwcc_bytes(pc->ix);
    if (bytes >= COMPACT_MIN_BYTES && bytes > (keys + 1) * COMPACT_BYTES_PER_KEY &&
        cxl_index_compact(pc->ix, w->id) == BT_OK)
        pod_count(&w->db->pod->st.compactions, 1);
}

static uint32_t nparts_total(const pod_db *db)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < db->ntables; i++) n += db->tables[i]->nparts;
    return n;
}

/* The next partition of this host with tuples in CXL memory, from the
 * hand's partition cursor (moveout_lock held); false after a whole round of
 * the partitions without one. */
static bool next_resident_part(struct pod_host *ph, pod_db *db, pod_table **tp, uint32_t *partp)
{
    for (uint32_t step = 0, n = nparts_total(db); step < n; step++) {
        if (ph->moveout_table >= db->ntables) ph->moveout_table = 0;
        pod_table *t = db->tables[ph->moveout_table];
        uint32_t part = ph->moveout_part;
        if (++ph->moveout_part >= t->nparts) {
            ph->moveout_part = 0;
            ph->moveout_table++;
        }
        if (part >= t->nparts || t->parts[part].owner != (uint32_t)ph->host) continue;
        if (!__atomic_load_n(&t->parts[part].cxl->resident, __ATOMIC_RELAXED)) continue;
        *tp = t;
        *partp = part;
        return true;
    }
    return false;
}

void pod_moveback(struct pod_worker *w)
{
    struct pod_host *ph = w->db->pod;
    uint32_t rate = ph->conf->engine.moveback_rate;
    /* Random eviction does not know which tuples are cold. */
    if (!rate || ph->conf->engine.eviction != POD_EVICT_CLOCK) return;
    uint64_t now = pod_mono_ns();
    if (now < __atomic_load_n(&ph->moveback_next, __ATOMIC_RELAXED)) return;
    if (pthread_mutex_trylock(&ph->moveout_lock) != 0) return;
    __atomic_store_n(&ph->moveback_next, now + (uint64_t)BATCH * 1000000000ull / rate,
                     __ATOMIC_RELAXED);
    pod_table *t;
    uint32_t part;
    if (next_resident_part(ph, w->db, &t, &part)) {
        ebr_enter(w->db->ebr, w->id);
        bool wrapped;
        sweep(w, t, part, &wrapped);
        maybe_compact(w, t->parts[part].cxl);
        ebr_exit(w->db->ebr, w->id);
        xebr_collect(ph->x, w->id);
    }
    pthread_mutex_unlock(&ph->moveout_lock);
}

void pod_moveout(struct pod_worker *w, bool force)
{
    struct pod_host *ph = w->db->pod;
    pod_db *db = w->db;
    if (!force && pod_mono_ns() < __atomic_load_n(&ph->moveout_idle_until, __ATOMIC_RELAXED))
        return;
    if (pthread_mutex_trylock(&ph->moveout_lock) != 0) return;
    pod_count(&ph->st.moveout_runs, 1);
    /* Forced (an allocation failed): free at least a batch's worth. */
    uint64_t target = ph->moveout_to;
    int budget = force ? 4 * BATCH : 16 * BATCH; /* entries looked at per call: bounded work */
    int moved = 0;
    ebr_enter(db->ebr, w->id);
    pod_table *t;
    uint32_t part;
    for (uint32_t step = 0, n = 2 * nparts_total(db);
         step < n && budget > 0 && next_resident_part(ph, db, &t, &part); step++) {
        struct pod_part_cxl *pc = t->parts[part].cxl;
        bool wrapped = false, random = ph->conf->engine.eviction == POD_EVICT_RANDOM;
        while (budget > 0 && !wrapped) {
            if (random) {
                moved += sweep_random(w, t, part);
                wrapped = true; /* a batch per partition, then the next one */
            } else {
                moved += sweep(w, t, part, &wrapped);
            }
            budget -= BATCH;
            if (!force && hwcc_used(ph) < target) break;
        }
        maybe_compact(w, pc);
        if (!force && hwcc_used(ph) < target) break;
        if (force && moved >= BATCH) break;
    }
    ebr_exit(db->ebr, w->id);
    xebr_collect(ph->x, w->id);
    /* Nothing could go (every candidate locked or latched, as when one
     * transaction holds many remote tuples): back off for a while. */
    __atomic_store_n(&ph->moveout_idle_until, moved ? 0 : pod_mono_ns() + MOVEOUT_BACKOFF_NS,
                     __ATOMIC_RELAXED);
    pthread_mutex_unlock(&ph->moveout_lock);
}
