/* HWcc record operations and the SWcc row protocol (cxl/record_ops.h;
 * docs/coherence.md).
 *
 * Every change of a record word is an atomic RMW on the whole word that keeps
 * the fields it does not own: fetch_or / fetch_and for single bits, a CAS loop
 * when the new value depends on a field (reader count, bitmap, row offset).
 * Latch release and the bitmap/dirty update of a row operation are one CAS
 * with release ordering, so other hosts see the bitmap change, the dirty bit
 * and the end of the latch together, after the row bytes reached memory. */
#include <sched.h>
#include <string.h>

#include "cxl/record_ops.h"
#include "util/log.h"
#include "util/cpu.h"

static __thread struct rec_stats tls_stats;

void rec_stats_get(struct rec_stats *out) { *out = tls_stats; }
void rec_stats_reset(void) { memset(&tls_stats, 0, sizeof tls_stats); }


/* ---- latch ------------------------------------------------------------------ */

/* Take the latch; on success *word is the record's value with the latch held. */
static bool latch_acquire_word(cxl_record *rec, uint32_t spin_bound, cxl_record *word)
{
    for (uint32_t i = 0;; i++) {
        /* Test before the RMW: spinning on a plain load keeps the line shared. */
        if (!(__atomic_load_n(rec, __ATOMIC_RELAXED) & REC_LATCH)) {
            cxl_record old = __atomic_fetch_or(rec, REC_LATCH, __ATOMIC_ACQUIRE);
            if (!(old & REC_LATCH)) {
                *word = old | REC_LATCH;
                return true;
            }
        }
        if (i >= spin_bound) return false;
        pod_cpu_relax();
        if ((i & 1023) == 1023) sched_yield();
    }
}

bool rec_latch_acquire(cxl_record *rec, uint32_t spin_bound)
{
    cxl_record w;
    return latch_acquire_word(rec, spin_bound, &w);
}

bool rec_latch_release(cxl_record *rec)
{
    return __atomic_fetch_and(rec, ~REC_LATCH, __ATOMIC_RELEASE) & REC_LATCH;
}

/* Release the latch and, in the same RMW, clear `clear` and set `set`. */
static void latch_release_update(cxl_record *rec, uint64_t clear, uint64_t set)
{
    cxl_record old = __atomic_load_n(rec, __ATOMIC_RELAXED), nw;
    do {
        nw = (old & ~(clear | REC_LATCH)) | set;
    } while (!__atomic_compare_exchange_n(rec, &old, nw, true, __ATOMIC_RELEASE,
                                          __ATOMIC_RELAXED));
}

/* ---- 2PL lock ------------------------------------------------------------- */

/* The CAS loop of the lock changes (a GNU statement expression): false,
 * changing nothing, when refuse holds of the word's current value old; else
 * the word becomes next (an expression of old) with the given ordering. */
#define LOCK_CHANGE(rec, refuse, next, order)                                                 \
    ({                                                                                        \
        cxl_record old = __atomic_load_n(rec, __ATOMIC_RELAXED);                              \
        bool changed_ = true;                                                                 \
        do {                                                                                  \
            if (refuse) {                                                                     \
                changed_ = false;                                                             \
                break;                                                                        \
            }                                                                                 \
        } while (!__atomic_compare_exchange_n(rec, &old, (next), true, order,                 \
                                              __ATOMIC_RELAXED));                             \
        changed_;                                                                             \
    })

bool rec_try_read_lock(cxl_record *rec)
{
    return LOCK_CHANGE(rec, (old & REC_LOCK_W) || (old & REC_LOCK_R_MASK) == REC_LOCK_R_MASK,
                       old + REC_LOCK_R_ONE, __ATOMIC_ACQUIRE);
}

bool rec_try_write_lock(cxl_record *rec)
{
    return LOCK_CHANGE(rec, old & REC_LOCK_MASK, old | REC_LOCK_W, __ATOMIC_ACQUIRE);
}

bool rec_try_upgrade(cxl_record *rec)
{
    return LOCK_CHANGE(rec, (old & REC_LOCK_MASK) != REC_LOCK_R_ONE,
                       (old & ~REC_LOCK_R_MASK) | REC_LOCK_W, __ATOMIC_ACQUIRE);
}

bool rec_release_read(cxl_record *rec)
{
    return LOCK_CHANGE(rec, !(old & REC_LOCK_R_MASK), old - REC_LOCK_R_ONE, __ATOMIC_RELEASE);
}

bool rec_release_write(cxl_record *rec)
{
    return LOCK_CHANGE(rec, !(old & REC_LOCK_W), old & ~REC_LOCK_W, __ATOMIC_RELEASE);
}

bool rec_downgrade(cxl_record *rec)
{
    return LOCK_CHANGE(rec, !(old & REC_LOCK_W), (old & ~REC_LOCK_W) + REC_LOCK_R_ONE,
                       __ATOMIC_RELEASE);
}

bool rec_init_lock(cxl_record *rec, bool write, unsigned readers)
{
    if (readers > (REC_LOCK_R_MASK >> REC_LOCK_R_SHIFT)) return false;
    uint64_t lock = write ? REC_LOCK_W : (uint64_t)readers << REC_LOCK_R_SHIFT;
    cxl_record old = __atomic_load_n(rec, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(rec, &old, (old & ~REC_LOCK_MASK) | lock, true,
                                        __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
    return true;
}

/* ---- flags and row offset ------------------------------------------------- */

bool rec_flag_set(cxl_record *rec, uint64_t flag)
{
    flag &= REC_FLAG_MASK;
    if ((__atomic_load_n(rec, __ATOMIC_RELAXED) & flag) == flag) return true;
    return (__atomic_fetch_or(rec, flag, __ATOMIC_ACQ_REL) & flag) == flag;
}

bool rec_flag_clear(cxl_record *rec, uint64_t flag)
{
    flag &= REC_FLAG_MASK;
    if (!(__atomic_load_n(rec, __ATOMIC_RELAXED) & flag)) return false;
    return (__atomic_fetch_and(rec, ~flag, __ATOMIC_ACQ_REL) & flag) == flag;
}

bool rec_set_row_off(cxl_record *rec, cxl_off row_off)
{
    if ((row_off & (CXL_LINE - 1)) || cxl_off_to_lines(row_off) > REC_ROW_MASK) return false;
    cxl_record old = __atomic_load_n(rec, __ATOMIC_RELAXED);
    do {
        if (!(old & REC_LATCH)) return false;
    } while (!__atomic_compare_exchange_n(rec, &old, (old & ~REC_ROW_MASK) | rec_make(row_off),
                                          true, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
    return true;
}

/* ---- SWcc row protocol ---------------------------------------------------- */

static inline uint64_t host_bit(int host)
{
    return host >= 0 && host < POD_MAX_HOSTS ? 1ull << (REC_BITMAP_SHIFT + host) : 0;
}

static inline uint64_t lines_of(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p;
    return ((a + len - 1) >> 6) - (a >> 6) + 1;
}

static void count_flush(const void *p, size_t len)
{
    tls_stats.flushes++;
    tls_stats.flushed_lines += lines_of(p, len);
}

/* The row of a latched record, or NULL if it is not in the area the variant
 * keeps rows in. */
static struct cxl_swcc_row *row_of(struct cxl_region *r, enum pod_coherence v, cxl_record w)
{
    cxl_off off = rec_row_off(w);
    enum cxl_area a;
    if (off == CXL_NULL || cxl_owner_of(r, off, &a) < 0) return NULL;
    if (a != (v == POD_COH_HWCC_ONLY ? CXL_HWCC : CXL_SWCC)) return NULL;
    return cxl_ptr(r, off);
}

/* Take the latch of a row operation (a timeout counted) and find the record's
 * row: 0 with the latch held, *w the record's word and *row its row;
 * REC_BUSY, or REC_EINVAL (the latch released) when the record names no row. */
static inline int op_latch(struct cxl_region *r, enum pod_coherence v, cxl_record *rec,
                           cxl_record *w, struct cxl_swcc_row **row)
{
    if (!latch_acquire_word(rec, REC_LATCH_SPINS, w)) {
        tls_stats.latch_timeouts++;
        return REC_BUSY;
    }
    if (!(*row = row_of(r, v, *w))) {
        rec_latch_release(rec);
        return REC_EINVAL;
    }
    return 0;
}

int rec_row_read(struct cxl_region *r, enum pod_coherence v, cxl_record *rec, void *tuple_out,
                 uint32_t tuple_size, uint32_t *valid, uint64_t *epoch_version)
{
    cxl_record w;
    struct cxl_swcc_row *row;
    int rc = op_latch(r, v, rec, &w, &row);
    if (rc) return rc;
    struct cxl_swcc_row hdr;
    size_t len = REC_ROW_HEADER + (size_t)tuple_size;
    if (v == POD_COH_HWCC_ONLY) {
        memcpy(&hdr, row, REC_ROW_HEADER);
        if (hdr.tuple_size != tuple_size) {
            rec_latch_release(rec);
            return REC_EINVAL;
        }
        if (tuple_out) memcpy(tuple_out, row->tuple, tuple_size);
        rec_latch_release(rec);
    } else {
        uint64_t mine = host_bit(r->host);
        bool had = (w & mine) != 0;
        if (!had || v == POD_COH_NO_SHARED_READER) {
            cxl_swcc_flush(&r->swcc, row, len);
            count_flush(row, len);
        }
        cxl_swcc_read(&r->swcc, &hdr, row, REC_ROW_HEADER);
        if (hdr.tuple_size != tuple_size) {
            /* Our copy is fresh now, but keep the bitmap as it was. */
            rec_latch_release(rec);
            return REC_EINVAL;
        }
        if (tuple_out) cxl_swcc_read(&r->swcc, tuple_out, row->tuple, tuple_size);
        if (v == POD_COH_NO_SHARED_READER) {
            if (had) latch_release_update(rec, mine, 0);
            else rec_latch_release(rec);
        } else {
            if (!had) latch_release_update(rec, 0, mine);
            else rec_latch_release(rec);
        }
    }
    if (valid) *valid = hdr.valid;
    if (epoch_version) *epoch_version = hdr.epoch_version;
    tls_stats.reads++;
    return REC_OK;
}

/* Copy the header and the tuple's bytes off..off+len-1 (none when bytes is
 * NULL) into the row and publish them. w is the latched record value (for
 * this host's bitmap bit). */
static void row_store(struct cxl_region *r, enum pod_coherence v, cxl_record w,
                      struct cxl_swcc_row *row, const struct cxl_swcc_row *hdr,
                      const void *bytes, uint32_t off, uint32_t len)
{
    if (!bytes) off = len = 0;
    bool whole = off == 0 && len == hdr->tuple_size;
    if (v == POD_COH_HWCC_ONLY) {
        memcpy(row, hdr, REC_ROW_HEADER);
        if (len) memcpy(row->tuple + off, bytes, len);
        return;
    }
    if (!whole && !(w & host_bit(r->host))) {
        /* The bitmap will say this host's copy of the row is current, but the
         * bytes not written here may be stale in its cache (and a write-back
         * publishes whole lines, stale neighbours included): refresh the row
         * first. */
        size_t rlen = REC_ROW_HEADER + (size_t)hdr->tuple_size;
        cxl_swcc_flush(&r->swcc, row, rlen);
        count_flush(row, rlen);
    }
    if (v == POD_COH_NON_TEMPORAL) {
        /* Non-temporal stores never merge with a cached copy: no flush needed
         * even for a partial line. One call (one fence) for small rows. */
        unsigned char buf[1024];
        if (off == 0 && REC_ROW_HEADER + (size_t)len <= sizeof buf) {
            memcpy(buf, hdr, REC_ROW_HEADER);
            if (len) memcpy(buf + REC_ROW_HEADER, bytes, len);
            cxl_swcc_nt_write(&r->swcc, row, buf, REC_ROW_HEADER + (size_t)len);
            tls_stats.nt_writes++;
        } else {
            cxl_swcc_nt_write(&r->swcc, row, hdr, REC_ROW_HEADER);
            cxl_swcc_nt_write(&r->swcc, row->tuple + off, bytes, len);
            tls_stats.nt_writes += 2;
        }
        return;
    }
    cxl_swcc_write(&r->swcc, row, hdr, REC_ROW_HEADER);
    if (len) cxl_swcc_write(&r->swcc, row->tuple + off, bytes, len);
    if (off == 0) {
        cxl_swcc_writeback(&r->swcc, row, REC_ROW_HEADER + (size_t)len);
        tls_stats.writebacks++;
    } else {
        cxl_swcc_writeback(&r->swcc, row, REC_ROW_HEADER);
        cxl_swcc_writeback(&r->swcc, row->tuple + off, len);
        tls_stats.writebacks += 2;
    }
}

int rec_row_write_range(struct cxl_region *r, enum pod_coherence v, cxl_record *rec,
                        const void *bytes, uint32_t off, uint32_t len, uint32_t tuple_size,
                        uint32_t valid, uint64_t epoch_version, bool dirty)
{
    if (bytes && (off > tuple_size || len > tuple_size - off)) return REC_EINVAL;
    cxl_record w;
    struct cxl_swcc_row *row;
    int rc = op_latch(r, v, rec, &w, &row);
    if (rc) return rc;
    struct cxl_swcc_row hdr = {.valid = valid, .tuple_size = tuple_size,
                               .epoch_version = epoch_version};
    row_store(r, v, w, row, &hdr, bytes, off, len);
    uint64_t set = dirty ? REC_DIRTY : 0, clear = dirty ? 0 : REC_DIRTY;
    if (v == POD_COH_HWCC_ONLY) latch_release_update(rec, clear, set); /* no bitmap */
    else latch_release_update(rec, clear | REC_BITMAP_MASK, host_bit(r->host) | set);
    tls_stats.writes++;
    return REC_OK;
}

void rec_row_prefetch_write(struct cxl_region *r, enum pod_coherence v, const cxl_record *rec,
                            uint32_t off, uint32_t len)
{
    if (v == POD_COH_NON_TEMPORAL || r->swcc.sim) return;
    cxl_record w = __atomic_load_n(rec, __ATOMIC_RELAXED);
    if (v != POD_COH_HWCC_ONLY && !(w & host_bit(r->host))) return;
    cxl_off row_off = rec_row_off(w);
    if (row_off == CXL_NULL) return;
    const char *row = cxl_ptr(r, row_off);
    pod_prefetch_write(row);
    uintptr_t p = ((uintptr_t)row + REC_ROW_HEADER + off) & ~(uintptr_t)(CXL_LINE - 1);
    if (p == (uintptr_t)row) p += CXL_LINE; /* the header's line: done */
    for (uintptr_t end = (uintptr_t)row + REC_ROW_HEADER + off + len; p < end; p += CXL_LINE)
        pod_prefetch_write((const void *)p);
}

int rec_row_write(struct cxl_region *r, enum pod_coherence v, cxl_record *rec, const void *tuple,
                  uint32_t tuple_size, uint32_t valid, uint64_t epoch_version)
{
    return rec_row_write_range(r, v, rec, tuple, 0, tuple_size, tuple_size, valid, epoch_version,
                               true);
}

cxl_off rec_create(struct cxl_region *r, enum pod_coherence v, const void *tuple,
                   uint32_t tuple_size, uint32_t valid, uint64_t epoch_version)
{
    if (r->host < 0 || !tuple) return CXL_NULL;
    enum cxl_area area = v == POD_COH_HWCC_ONLY ? CXL_HWCC : CXL_SWCC;
    cxl_off row_off = cxl_alloc(r, area, rec_row_alloc_size(tuple_size));
    if (row_off == CXL_NULL) return CXL_NULL;
    if (row_off & (CXL_LINE - 1)) {
        /* A row sharing a line with another object would publish that
         * object's stale bytes with its write-backs. */
        pod_error("rec_create: the allocator returned a row at %#llx, not cache-line aligned "
                  "(%llu bytes asked); refusing to place a tuple there",
                  (unsigned long long)row_off,
                  (unsigned long long)rec_row_alloc_size(tuple_size));
        cxl_free(r, area, row_off);
        return CXL_NULL;
    }
    cxl_off rec_off = cxl_alloc(r, CXL_HWCC, sizeof(cxl_record));
    if (rec_off == CXL_NULL) {
        cxl_free(r, area, row_off);
        return CXL_NULL;
    }
    struct cxl_swcc_row hdr = {.valid = valid, .tuple_size = tuple_size,
                               .epoch_version = epoch_version};
    /* w carries this host's bit: a full-row write needs no fresh copy anyway. */
    row_store(r, v, host_bit(r->host), cxl_ptr(r, row_off), &hdr, tuple, 0, tuple_size);
    cxl_record w = rec_make(row_off) | (v == POD_COH_HWCC_ONLY ? 0 : host_bit(r->host));
    __atomic_store_n((cxl_record *)cxl_ptr(r, rec_off), w, __ATOMIC_RELEASE);
    tls_stats.writes++;
    return rec_off;
}

int rec_destroy(struct cxl_region *r, cxl_off rec_off)
{
    enum cxl_area a;
    if (rec_off == CXL_NULL || cxl_owner_of(r, rec_off, &a) != r->host || a != CXL_HWCC)
        return -1;
    cxl_record w = __atomic_load_n((cxl_record *)cxl_ptr(r, rec_off), __ATOMIC_ACQUIRE);
    cxl_off row_off = rec_row_off(w);
    enum cxl_area ra;
    if (row_off != CXL_NULL && cxl_owner_of(r, row_off, &ra) == r->host) cxl_free(r, ra, row_off);
    cxl_free(r, CXL_HWCC, rec_off);
    return 0;
}
