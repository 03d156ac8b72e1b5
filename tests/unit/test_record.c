/* HWcc record operations and the SWcc row protocol in one process.
 *
 *  - every record operation against a model, on random words: it changes only
 *    its own field and returns what the model says;
 *  - 2PL rules: readers share, a writer is alone, upgrade only for the sole
 *    reader, the 128th reader is refused;
 *  - the latch bound: an acquire of a held latch gives up;
 *  - the row protocol on a one-host region (simulated non-coherent), every
 *    variant: values, bitmap and dirty bit, flush/write-back counts per
 *    operation, header-only writes, size checks, REC_BUSY;
 *  - what one record costs in HWcc memory, and a full HWcc quota. */
#include <check.h>
#include <mimalloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cxl/record_ops.h"
#include "cxl/region.h"
#include "helpers/testutil.h"

#define MiB (1ull << 20)

/* ---- record word operations against a model ------------------------------ */

enum op { RL, WL, UP, RR, RW, LA, LR, FS, FC, SRO, NOPS };

/* A random word, biased so that every op's success and failure cases occur:
 * reader counts near 0, 1 and 127 are frequent. */
static cxl_record random_word(uint64_t *s)
{
    cxl_record w = tu_rand(s);
    switch (tu_rand(s) % 4) {
    case 0: w &= ~REC_LOCK_MASK; break;
    case 1: w = (w & ~REC_LOCK_MASK) | REC_LOCK_R_ONE; break;
    case 2: w = (w & ~REC_LOCK_MASK) | REC_LOCK_R_MASK; break;
    default: break;
    }
    if (tu_rand(s) % 2) w &= ~REC_LATCH;
    return w;
}

START_TEST(ops_touch_only_their_field)
{
    uint64_t s = 12345;
    unsigned ok_count[NOPS] = {0}, fail_count[NOPS] = {0};
    for (int it = 0; it < 200000; it++) {
        cxl_record w = random_word(&s), rec = w, want = w;
        enum op op = (enum op)(tu_rand(&s) % NOPS);
        unsigned readers = rec_readers(w);
        bool got = false, exp = false;
        uint64_t f = 0;
        cxl_off off = 0;
        switch (op) {
        case RL:
            exp = !(w & REC_LOCK_W) && readers < 127;
            if (exp) want = w + REC_LOCK_R_ONE;
            got = rec_try_read_lock(&rec);
            break;
        case WL:
            exp = !(w & REC_LOCK_MASK);
            if (exp) want = w | REC_LOCK_W;
            got = rec_try_write_lock(&rec);
            break;
        case UP:
            exp = (w & REC_LOCK_MASK) == REC_LOCK_R_ONE;
            if (exp) want = (w & ~REC_LOCK_R_MASK) | REC_LOCK_W;
            got = rec_try_upgrade(&rec);
            break;
        case RR:
            exp = readers > 0;
            if (exp) want = w - REC_LOCK_R_ONE;
            got = rec_release_read(&rec);
            break;
        case RW:
            exp = (w & REC_LOCK_W) != 0;
            want = w & ~REC_LOCK_W;
            got = rec_release_write(&rec);
            break;
        case LA:
            exp = !(w & REC_LATCH);
            want = w | REC_LATCH;
            got = rec_latch_acquire(&rec, 0);
            break;
        case LR:
            exp = (w & REC_LATCH) != 0;
            want = w & ~REC_LATCH;
            got = rec_latch_release(&rec);
            break;
        case FS:
        case FC: {
            /* a non-empty set of flags plus garbage bits that must be ignored */
            do f = tu_rand(&s) & REC_FLAG_MASK;
            while (!f);
            uint64_t fm = f;
            f |= tu_rand(&s) & ~REC_FLAG_MASK;
            exp = (w & fm) == fm;
            want = op == FS ? w | fm : w & ~fm;
            got = op == FS ? rec_flag_set(&rec, f) : rec_flag_clear(&rec, f);
            break;
        }
        case SRO: {
            off = (tu_rand(&s) & REC_ROW_MASK) << 6;
            if (tu_rand(&s) % 8 == 0) off |= 1 + tu_rand(&s) % 63; /* unaligned */
            if (tu_rand(&s) % 16 == 0) off |= 1ull << 42;       /* too far */
            exp = (w & REC_LATCH) && !(off & 63) && off < (1ull << 42);
            if (exp) want = (w & ~REC_ROW_MASK) | (off >> 6);
            got = rec_set_row_off(&rec, off);
            break;
        }
        default: break;
        }
        ck_assert_msg(got == exp, "op %d on %#llx (flag %#llx off %#llx): returned %d, want %d",
                      op, (unsigned long long)w, (unsigned long long)f, (unsigned long long)off,
                      got, exp);
        ck_assert_msg(rec == want, "op %d on %#llx: left %#llx, want %#llx", op,
                      (unsigned long long)w, (unsigned long long)rec, (unsigned long long)want);
        (got ? ok_count : fail_count)[op]++;
    }
    for (int op = 0; op < NOPS; op++)
        ck_assert_msg(ok_count[op] > 100 && fail_count[op] > 100,
                      "op %d: %u successes, %u failures: the random words miss a case", op,
                      ok_count[op], fail_count[op]);
}
END_TEST

START_TEST(lock_rules)
{
    /* Start from a word whose other fields are all set, to see them survive. */
    const cxl_record others = ~(REC_LOCK_MASK | REC_LATCH);
    cxl_record rec = others;
    ck_assert(rec_try_read_lock(&rec));
    ck_assert(rec_try_read_lock(&rec));
    ck_assert_uint_eq(rec_readers(rec), 2);
    ck_assert(!rec_try_write_lock(&rec));
    ck_assert(!rec_try_upgrade(&rec)); /* two readers */
    ck_assert(rec_release_read(&rec));
    ck_assert(rec_try_upgrade(&rec)); /* the sole reader */
    ck_assert_uint_eq(rec_readers(rec), 0);
    ck_assert(rec & REC_LOCK_W);
    ck_assert(!rec_try_read_lock(&rec));
    ck_assert(!rec_try_write_lock(&rec));
    ck_assert(!rec_try_upgrade(&rec));
    ck_assert(!rec_release_read(&rec)); /* not a reader: nothing changes */
    ck_assert(rec_release_write(&rec));
    ck_assert(!rec_release_write(&rec));
    ck_assert_uint_eq(rec, others);
    ck_assert(!rec_try_upgrade(&rec)); /* no reader at all */

    /* 127 readers saturate the field; the 128th is a conflict, not an overflow. */
    for (int i = 0; i < 127; i++) ck_assert(rec_try_read_lock(&rec));
    ck_assert_uint_eq(rec_readers(rec), 127);
    ck_assert(!rec_try_read_lock(&rec));
    ck_assert(!rec_try_write_lock(&rec));
    ck_assert(!rec_try_upgrade(&rec));
    ck_assert_uint_eq(rec & ~REC_LOCK_MASK, others);
    for (int i = 0; i < 127; i++) ck_assert(rec_release_read(&rec));
    ck_assert(!rec_release_read(&rec));
    ck_assert_uint_eq(rec, others);

    /* The latch and the lock are independent bits. */
    ck_assert(rec_latch_acquire(&rec, 0));
    ck_assert(rec_try_write_lock(&rec));
    ck_assert(rec_latch_release(&rec));
    ck_assert(!rec_try_read_lock(&rec));
    ck_assert(rec_release_write(&rec));
    ck_assert_uint_eq(rec, others);
}
END_TEST

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

START_TEST(latch_bound)
{
    cxl_record rec = REC_DIRTY | REC_CLOCK | rec_make(64 * 99);
    ck_assert(rec_latch_acquire(&rec, 0));
    const cxl_record held = rec;
    ck_assert(!rec_latch_acquire(&rec, 0));
    ck_assert(!rec_latch_acquire(&rec, 1000));
    ck_assert_uint_eq(rec, held);
    double t0 = now_ms();
    ck_assert(!rec_latch_acquire(&rec, REC_LATCH_SPINS));
    double dt = now_ms() - t0;
    printf("latch: giving up after REC_LATCH_SPINS = %u spins took %.1f ms\n", REC_LATCH_SPINS,
           dt);
    ck_assert_uint_eq(rec, held);
    ck_assert(rec_latch_release(&rec));
    ck_assert(!rec_latch_release(&rec));
    ck_assert(rec_latch_acquire(&rec, 0));
    ck_assert(rec_latch_release(&rec));
    ck_assert_uint_eq(rec, held & ~REC_LATCH);
}
END_TEST

/* ---- the row protocol on a one-host region -------------------------------- */

#define TSIZE 120 /* 16 + 120 = 136 bytes: three cache lines */

struct tup {
    int64_t val;
    uint64_t fill[(TSIZE - 8) / 8];
};

static void tup_make(struct tup *t, int64_t val)
{
    t->val = val;
    for (size_t i = 0; i < sizeof t->fill / 8; i++) t->fill[i] = (uint64_t)val * 31 + i;
}

static bool tup_ok(const struct tup *t)
{
    for (size_t i = 0; i < sizeof t->fill / 8; i++)
        if (t->fill[i] != (uint64_t)t->val * 31 + i) return false;
    return true;
}

static struct cxl_region *open1(struct pod_config *c, bool sim, uint64_t budget)
{
    tu_make_config(c, 1, 512 * MiB, budget, sim);
    pod_err err = {{0}};
    struct cxl_region *r = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err);
    ck_assert_msg(r != NULL, "%s", err.msg);
    return r;
}

/* Counter deltas of one operation. */
struct delta {
    uint64_t flushes, writebacks, nt_writes;
};

static struct delta since(const struct rec_stats *a)
{
    struct rec_stats b;
    rec_stats_get(&b);
    return (struct delta){b.flushes - a->flushes, b.writebacks - a->writebacks,
                          b.nt_writes - a->nt_writes};
}

#define EXPECT(d, f, wb, nt, what)                                                           \
    ck_assert_msg((d).flushes == (f) && (d).writebacks == (wb) && (d).nt_writes == (nt),     \
                  "%s, %s: %llu flushes %llu write-backs %llu nt writes, want %d %d %d",    \
                  pod_coherence_name(v), what, (unsigned long long)(d).flushes,              \
                  (unsigned long long)(d).writebacks, (unsigned long long)(d).nt_writes, f, wb, \
                  nt)

static int64_t read_val(struct cxl_region *r, enum pod_coherence v, cxl_record *rec,
                        uint32_t *valid, uint64_t *ev)
{
    struct tup t;
    ck_assert_int_eq(rec_row_read(r, v, rec, &t, TSIZE, valid, ev), REC_OK);
    ck_assert_msg(tup_ok(&t), "torn tuple");
    return t.val;
}

START_TEST(row_protocol_one_host)
{
    enum pod_coherence v = tu_variants[_i];
    struct pod_config c;
    struct cxl_region *r = open1(&c, true, 8 * MiB);
    const bool swcc = v != POD_COH_HWCC_ONLY;
    const uint64_t me = 1ull << REC_BITMAP_SHIFT; /* host 0 */
    struct tup t;
    struct rec_stats st;
    uint32_t valid;
    uint64_t ev;

    tup_make(&t, 7);
    rec_stats_get(&st);
    cxl_off ro = rec_create(r, v, &t, TSIZE, 1, 0x500000000ull);
    ck_assert_uint_ne(ro, CXL_NULL);
    struct delta d = since(&st);
    EXPECT(d, 0, v == POD_COH_FULL || v == POD_COH_NO_SHARED_READER,
           v == POD_COH_NON_TEMPORAL, "create");
    enum cxl_area a;
    ck_assert_int_eq(cxl_owner_of(r, ro, &a), 0);
    ck_assert_int_eq(a, CXL_HWCC);
    cxl_record *rec = cxl_ptr(r, ro);
    cxl_record w = rec_load(rec);
    ck_assert_int_eq(cxl_owner_of(r, rec_row_off(w), &a), 0);
    ck_assert_int_eq(a, swcc ? CXL_SWCC : CXL_HWCC);
    ck_assert_uint_eq(rec_row_off(w) % 64, 0);
    ck_assert_uint_eq(w & ~REC_ROW_MASK, (swcc ? me : 0)); /* only the creator's bit */

    /* The creator's copy is current: FULL and NT read without a flush. */
    rec_stats_get(&st);
    ck_assert_int_eq(read_val(r, v, rec, &valid, &ev), 7);
    ck_assert_uint_eq(valid, 1);
    ck_assert_uint_eq(ev, 0x500000000ull);
    EXPECT(since(&st), v == POD_COH_NO_SHARED_READER, 0, 0, "read, own bit set");
    w = rec_load(rec);
    ck_assert_uint_eq(w & REC_BITMAP_MASK, (v == POD_COH_FULL || v == POD_COH_NON_TEMPORAL ? me : 0));
    ck_assert_uint_eq(w & (REC_LATCH | REC_DIRTY), 0);

    /* A reader whose bit is clear flushes once, then keeps its bit (FULL, NT). */
    if (swcc) {
        __atomic_fetch_and(rec, ~REC_BITMAP_MASK, __ATOMIC_RELAXED);
        rec_stats_get(&st);
        ck_assert_int_eq(read_val(r, v, rec, NULL, NULL), 7);
        EXPECT(since(&st), 1, 0, 0, "read, own bit clear");
        rec_stats_get(&st);
        ck_assert_int_eq(read_val(r, v, rec, NULL, NULL), 7);
        EXPECT(since(&st), v == POD_COH_NO_SHARED_READER, 0, 0, "second read");
        struct rec_stats s2;
        rec_stats_get(&s2);
        ck_assert_uint_eq(s2.flushed_lines - st.flushed_lines,
                          (v == POD_COH_NO_SHARED_READER ? 3 : 0));
    }

    /* Write: publish, bitmap = only the writer, dirty. */
    __atomic_fetch_or(rec, 0xfffeull << REC_BITMAP_SHIFT, __ATOMIC_RELAXED); /* other hosts */
    __atomic_fetch_or(rec, REC_CLOCK | REC_HAS_NEXT | REC_LOCK_W, __ATOMIC_RELAXED);
    tup_make(&t, 8);
    rec_stats_get(&st);
    ck_assert_int_eq(rec_row_write(r, v, rec, &t, TSIZE, 1, 0x500000001ull), REC_OK);
    EXPECT(since(&st), 0, v == POD_COH_FULL || v == POD_COH_NO_SHARED_READER,
           v == POD_COH_NON_TEMPORAL, "write");
    w = rec_load(rec);
    ck_assert_uint_eq(w & REC_BITMAP_MASK, (swcc ? me : 0xfffeull << REC_BITMAP_SHIFT));
    ck_assert_uint_eq(w & (REC_DIRTY | REC_CLOCK | REC_HAS_NEXT | REC_LOCK_W | REC_LATCH),
                      REC_DIRTY | REC_CLOCK | REC_HAS_NEXT | REC_LOCK_W);
    ck_assert(rec_release_write(rec));
    rec_stats_get(&st);
    ck_assert_int_eq(read_val(r, v, rec, &valid, &ev), 8);
    ck_assert_uint_eq(ev, 0x500000001ull);
    EXPECT(since(&st), v == POD_COH_NO_SHARED_READER, 0, 0, "read after own write");

    /* What memory holds, as another host would see it after a flush. */
    if (swcc) {
        struct cxl_swcc_row *row = cxl_ptr(r, rec_row_off(rec_load(rec)));
        struct tup mem;
        memcpy(&mem, row->tuple, TSIZE);
        ck_assert_int_eq(mem.val, 8);
        ck_assert(tup_ok(&mem));
        ck_assert_uint_eq(row->epoch_version, 0x500000001ull);
    }

    /* Header-only write (a delete): keeps the tuple bytes. With the bit clear,
     * every SWcc variant refreshes the row first: the write sets the bit, so
     * this host's cached copy must be current (and FULL and NSR write back
     * whole lines). */
    if (swcc) __atomic_fetch_and(rec, ~REC_BITMAP_MASK, __ATOMIC_RELAXED);
    rec_stats_get(&st);
    ck_assert_int_eq(rec_row_write(r, v, rec, NULL, TSIZE, 0, 0x600000000ull), REC_OK);
    EXPECT(since(&st), swcc,
           v == POD_COH_FULL || v == POD_COH_NO_SHARED_READER, v == POD_COH_NON_TEMPORAL,
           "header-only write, own bit clear");
    ck_assert_int_eq(read_val(r, v, rec, &valid, &ev), 8);
    ck_assert_uint_eq(valid, 0);
    ck_assert_uint_eq(ev, 0x600000000ull);
    rec_stats_get(&st);
    ck_assert_int_eq(rec_row_write(r, v, rec, NULL, TSIZE, 1, 0x600000001ull), REC_OK);
    /* (NSR: the read in between gave the bit up, so the refresh happens again.) */
    EXPECT(since(&st), v == POD_COH_NO_SHARED_READER,
           v == POD_COH_FULL || v == POD_COH_NO_SHARED_READER, v == POD_COH_NON_TEMPORAL,
           "header-only write after a read");
    ck_assert_int_eq(read_val(r, v, rec, &valid, &ev), 8);
    ck_assert_uint_eq(valid, 1);

    /* Header only, without the tuple. */
    ck_assert_int_eq(rec_row_read(r, v, rec, NULL, TSIZE, &valid, NULL), REC_OK);
    ck_assert_uint_eq(valid, 1);

    /* A wrong size is refused and leaves the bitmap alone. */
    w = rec_load(rec);
    ck_assert_int_eq(rec_row_read(r, v, rec, &t, TSIZE - 8, NULL, NULL), REC_EINVAL);
    ck_assert_uint_eq(rec_load(rec), w);
    /* The wrong variant is refused: the row is in the other area. */
    enum pod_coherence other = swcc ? POD_COH_HWCC_ONLY : POD_COH_FULL;
    ck_assert_int_eq(rec_row_read(r, other, rec, &t, TSIZE, NULL, NULL), REC_EINVAL);
    ck_assert_int_eq(rec_row_write(r, other, rec, &t, TSIZE, 1, 0), REC_EINVAL);
    ck_assert_uint_eq(rec_load(rec), w);

    /* A latch held by someone else: the row operations give up. */
    ck_assert(rec_latch_acquire(rec, 0));
    rec_stats_get(&st);
    ck_assert_int_eq(rec_row_read(r, v, rec, &t, TSIZE, NULL, NULL), REC_BUSY);
    ck_assert_int_eq(rec_row_write(r, v, rec, &t, TSIZE, 1, 0), REC_BUSY);
    struct rec_stats s2;
    rec_stats_get(&s2);
    ck_assert_uint_eq(s2.latch_timeouts - st.latch_timeouts, 2);
    ck_assert_uint_eq(s2.reads + s2.writes, st.reads + st.writes);
    ck_assert(rec_latch_release(rec));
    ck_assert_uint_eq(rec_load(rec), w);

    /* A range write publishes the header and bytes off..off+len-1 only; the
     * other bytes stay. With the bit clear every SWcc variant refreshes the
     * row first (the write sets the bit); FULL and NSR write back the
     * header's line and the range's lines, NT stores both. */
    {
        struct tup nine, want, got;
        tup_make(&nine, 9);
        tup_make(&want, 8);
        const uint32_t ranges[2][2] = {{64, 24}, {4, 8}}; /* fill[6..8]; val's high half + fill[0] */
        for (int k = 0; k < 2; k++) {
            uint32_t off = ranges[k][0], len = ranges[k][1];
            if (k == 0 && swcc) __atomic_fetch_and(rec, ~REC_BITMAP_MASK, __ATOMIC_RELAXED);
            rec_stats_get(&st);
            /* k 0 as another host (is-dirty set), k 1 as the owner (cleared). */
            ck_assert_int_eq(rec_row_write_range(r, v, rec, (unsigned char *)&nine + off, off, len,
                                                 TSIZE, 1, 0x600000002ull + (uint64_t)k, k == 0),
                             REC_OK);
            ck_assert_uint_eq(rec_load(rec) & REC_DIRTY, k == 0 ? REC_DIRTY : 0);
            ck_assert(!(rec_load(rec) & REC_LATCH));
            EXPECT(since(&st), k == 0 && swcc,
                   (v == POD_COH_FULL || v == POD_COH_NO_SHARED_READER) ? 2 : 0,
                   v == POD_COH_NON_TEMPORAL ? 2 : 0, "range write");
            memcpy((unsigned char *)&want + off, (unsigned char *)&nine + off, len);
            if (swcc) ck_assert_uint_eq(rec_load(rec) & REC_BITMAP_MASK, me);
        }
        ck_assert_int_eq(rec_row_read(r, v, rec, &got, TSIZE, &valid, &ev), REC_OK);
        ck_assert_uint_eq(ev, 0x600000003ull);
        ck_assert_uint_eq(valid, 1);
        ck_assert(memcmp(&got, &want, TSIZE) == 0);
        if (swcc) { /* what memory holds, as another host would see it */
            struct cxl_swcc_row *row = cxl_ptr(r, rec_row_off(rec_load(rec)));
            ck_assert(memcmp(row->tuple, &want, TSIZE) == 0);
            ck_assert_uint_eq(row->epoch_version, 0x600000003ull);
        }
        w = rec_load(rec);
        ck_assert_int_eq(rec_row_write_range(r, v, rec, &nine, 100, 21, TSIZE, 1, 0, true),
                         REC_EINVAL);
        ck_assert_uint_eq(rec_load(rec), w);
    }

    /* Destroy frees both allocations. */
    struct cxl_usage uh0, us0, uh1, us1;
    cxl_usage_get(r, 0, CXL_HWCC, &uh0);
    cxl_usage_get(r, 0, CXL_SWCC, &us0);
    ck_assert_int_eq(rec_destroy(r, ro), 0);
    cxl_usage_get(r, 0, CXL_HWCC, &uh1);
    cxl_usage_get(r, 0, CXL_SWCC, &us1);
    ck_assert_uint_eq(uh0.objects - uh1.objects, (swcc ? 1 : 2));
    ck_assert_uint_eq(us0.objects - us1.objects, (swcc ? 1 : 0));
    ck_assert_int_eq(rec_destroy(r, CXL_NULL), -1);
    cxl_off sw = cxl_alloc(r, CXL_SWCC, 64); /* not a record: refused */
    ck_assert_int_eq(rec_destroy(r, sw), -1);
    cxl_free(r, CXL_SWCC, sw);
    cxl_region_close(r);
}
END_TEST

/* Bytes of HWcc memory one CXL-resident tuple costs for its record: what the
 * quota is charged, and how densely the records fill mimalloc's 64 KiB pages
 * (N fills a whole number of pages of 8-byte blocks). */
static int cmp_off(const void *a, const void *b)
{
    cxl_off x = *(const cxl_off *)a, y = *(const cxl_off *)b;
    return x < y ? -1 : x > y;
}

START_TEST(hwcc_bytes_per_record)
{
    enum { N = 8 * 8144 }; /* mimalloc 2.0.9 puts 8144 8-byte blocks in a 64 KiB page */
    struct pod_config c;
    struct cxl_region *r = open1(&c, false, 32 * MiB);
    printf("mi_good_size(8) = %zu, mi_good_size(%u) = %zu (SWcc row of a %d-byte tuple)\n",
           mi_good_size(8), (unsigned)rec_row_alloc_size(TSIZE),
           mi_good_size(rec_row_alloc_size(TSIZE)), TSIZE);
    ck_assert_uint_eq(mi_good_size(8), 8);
    static cxl_off offs[N], sorted[N];
    struct tup t;
    tup_make(&t, 1);
    for (int vi = 0; vi < 4; vi++) {
        enum pod_coherence v = tu_variants[vi];
        struct cxl_usage u0, u1;
        cxl_usage_get(r, 0, CXL_HWCC, &u0);
        for (int i = 0; i < N; i++) {
            offs[i] = rec_create(r, v, &t, TSIZE, 1, 0);
            ck_assert_uint_ne(offs[i], CXL_NULL);
        }
        cxl_usage_get(r, 0, CXL_HWCC, &u1);
        memcpy(sorted, offs, sizeof offs);
        qsort(sorted, N, sizeof sorted[0], cmp_off);
        int pages = 1;
        for (int i = 1; i < N; i++) {
            ck_assert_uint_ge(sorted[i] - sorted[i - 1], 8); /* no overlap */
            if (sorted[i] >> 16 != sorted[i - 1] >> 16) pages++;
        }
        double charged = (double)(u1.used - u0.used) / N;
        double paged = (double)pages * 65536 / N;
        printf("%-16s HWcc per tuple: %.2f bytes charged to the quota; the records fill %d "
               "64 KiB pages = %.2f bytes each (+0.2%% mimalloc segment headers)\n",
               pod_coherence_name(v), charged, pages, paged);
        if (v != POD_COH_HWCC_ONLY) {
            ck_assert_msg(charged == 8.0, "%.2f", charged);
            ck_assert_msg(paged <= 8.25, "records are spread: %.2f bytes each", paged);
        } else {
            ck_assert_msg(charged == 8.0 + (double)rec_row_alloc_size(TSIZE), "%.2f", charged);
        }
        for (int i = 0; i < N; i++) ck_assert_int_eq(rec_destroy(r, offs[i]), 0);
        cxl_usage_get(r, 0, CXL_HWCC, &u1);
        ck_assert_uint_eq(u1.used, u0.used);
    }
    cxl_region_close(r);
}
END_TEST

/* When the HWcc quota is used up, rec_create fails cleanly and leaks nothing. */
START_TEST(create_fails_cleanly_when_hwcc_is_full)
{
    struct pod_config c;
    struct cxl_region *r = open1(&c, true, 4 * MiB);
    enum { BIG = 4000 };
    static unsigned char tuple[BIG];
    memset(tuple, 0x5a, sizeof tuple);
    int n = 0;
    struct cxl_usage u0, u1;
    for (;; n++) {
        cxl_usage_get(r, 0, CXL_HWCC, &u0);
        cxl_off o = rec_create(r, POD_COH_HWCC_ONLY, tuple, BIG, 1, 0);
        if (o == CXL_NULL) break;
        ck_assert_int_lt(n, 100000);
    }
    cxl_usage_get(r, 0, CXL_HWCC, &u1);
    ck_assert_int_gt(n, 10);
    ck_assert_uint_eq(u1.used, u0.used);
    ck_assert_uint_eq(u1.objects, u0.objects);
    ck_assert_uint_ge(u1.failures, 1);
    /* Small SWcc-resident tuples still fit their 8 bytes... until they do not. */
    cxl_off o = rec_create(r, POD_COH_FULL, tuple, 64, 1, 0);
    if (o != CXL_NULL) ck_assert_int_eq(rec_destroy(r, o), 0);
    ck_assert_uint_eq(rec_create(r, POD_COH_FULL, NULL, 64, 1, 0), CXL_NULL);
    cxl_region_close(r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("record");
    TCase *t = tu_tcase(s, "record", 120);
    tcase_add_test(t, ops_touch_only_their_field);
    tcase_add_test(t, lock_rules);
    tcase_add_test(t, latch_bound);
    tcase_add_loop_test(t, row_protocol_one_host, 0, 4);
    tcase_add_test(t, hwcc_bytes_per_record);
    tcase_add_test(t, create_fails_cleanly_when_hwcc_is_full);
    return tu_run(s);
}
