/* Record operations and the row protocol under threads of one host (also run
 * under ThreadSanitizer by make tsan).
 *
 *  - latch: threads increment a plain counter under the latch while other
 *    threads hammer the 2PL lock and flag bits of the same word: the count is
 *    exact, and every thread's lock/flag state is still what it left (no RMW
 *    lost another field's update);
 *  - bank, every variant, on a one-host region in simulated mode (the threads
 *    share the host's simulated cache): transfers under write locks NO_WAIT,
 *    audits under read locks on all accounts, one thread flipping the CLOCK
 *    and has-next bits of every record all the time. The total is exact, the
 *    versions add up, and no record lost its row offset. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cxl/record_ops.h"
#include "cxl/region.h"
#include "helpers/testutil.h"

#define MiB (1ull << 20)
#define NT 4

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- latch and concurrent field updates ------------------------------------ */

static cxl_record g_word;
static uint64_t g_counter; /* plain: protected by the latch */
static int g_stop;
enum { INCS = 20000 };

static void *latch_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < INCS; i++) {
        while (!rec_latch_acquire(&g_word, 1000)) sched_yield();
        g_counter++;
        ck_assert(rec_latch_release(&g_word));
    }
    return NULL;
}

/* Holds read locks and toggles a flag; checks its own effect survives. */
static void *field_worker(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    uint64_t flag = id == 0 ? REC_CLOCK : REC_HAS_NEXT;
    uint64_t seed = id + 1;
    long n = 0;
    while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE) || n < 1000) {
        n++;
        int k = (int)(tu_rand(&seed) % 5) + 1, got = 0;
        while (got < k && rec_try_read_lock(&g_word)) got++;
        ck_assert_uint_ge(rec_readers(rec_load(&g_word)), (unsigned)got);
        rec_flag_set(&g_word, flag);
        ck_assert(rec_load(&g_word) & flag); /* only this thread clears it */
        rec_flag_clear(&g_word, flag);
        ck_assert(!(rec_load(&g_word) & flag));
        for (int i = 0; i < got; i++) ck_assert(rec_release_read(&g_word));
    }
    return NULL;
}

/* Takes and drops the write lock and upgrades; the other lock users only read. */
static void *writer_worker(void *arg)
{
    (void)arg;
    long n = 0;
    while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE) || n < 1000) {
        n++;
        if (rec_try_write_lock(&g_word)) {
            ck_assert_uint_eq(rec_readers(rec_load(&g_word)), 0);
            ck_assert(rec_release_write(&g_word));
        }
        if (rec_try_read_lock(&g_word)) {
            if (rec_try_upgrade(&g_word)) ck_assert(rec_release_write(&g_word));
            else ck_assert(rec_release_read(&g_word));
        }
    }
    return NULL;
}

START_TEST(latch_excludes_and_fields_survive)
{
    const cxl_record row = rec_make(64 * 4242) | (0x5a5aull << REC_BITMAP_SHIFT) | REC_DIRTY;
    g_word = row;
    g_counter = 0;
    g_stop = 0;
    pthread_t lt[2], ft[2], wt;
    for (uintptr_t i = 0; i < 2; i++) pthread_create(&lt[i], NULL, latch_worker, NULL);
    for (uintptr_t i = 0; i < 2; i++) pthread_create(&ft[i], NULL, field_worker, (void *)i);
    pthread_create(&wt, NULL, writer_worker, NULL);
    for (int i = 0; i < 2; i++) pthread_join(lt[i], NULL);
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++) pthread_join(ft[i], NULL);
    pthread_join(wt, NULL);
    ck_assert_uint_eq(g_counter, 2 * INCS);
    ck_assert_uint_eq(g_word, row);
}
END_TEST

/* ---- bank ------------------------------------------------------------------ */

#define NACCT 12
#define INIT 1000
#define TSIZE 104 /* 16 + 104 = 120: two lines */

struct acct {
    int64_t bal;
    uint64_t ev;
    uint64_t fill[(TSIZE - 16) / 8];
};

static void acct_make(struct acct *a, int64_t bal, uint64_t ev)
{
    a->bal = bal;
    a->ev = ev;
    for (size_t i = 0; i < sizeof a->fill / 8; i++) a->fill[i] = (uint64_t)bal * 7 + ev + i;
}

static bool acct_ok(const struct acct *a, uint64_t ev)
{
    if (a->ev != ev) return false;
    for (size_t i = 0; i < sizeof a->fill / 8; i++)
        if (a->fill[i] != (uint64_t)a->bal * 7 + ev + i) return false;
    return true;
}

static struct {
    struct cxl_region *r;
    enum pod_coherence v;
    cxl_record *rec[NACCT];
    cxl_off row[NACCT];
    uint64_t commits, audits;
    int stop;
    double ms;
} B;

static void *bank_worker(void *arg)
{
    uint64_t seed = (uintptr_t)arg * 7919 + 1;
    const enum pod_coherence v = B.v;
    double t0 = now_ms();
    for (long it = 0; now_ms() - t0 < B.ms; it++) {
        if (it % 10 == 0) { /* audit */
            int got = 0;
            while (got < NACCT && rec_try_read_lock(B.rec[got])) got++;
            if (got == NACCT) {
                int64_t sum = 0;
                for (int i = 0; i < NACCT; i++) {
                    struct acct a;
                    uint64_t ev;
                    ck_assert_int_eq(rec_row_read(B.r, v, B.rec[i], &a, TSIZE, NULL, &ev), REC_OK);
                    ck_assert_msg(acct_ok(&a, ev), "torn account %d", i);
                    sum += a.bal;
                }
                ck_assert_int_eq(sum, NACCT * INIT);
                __atomic_fetch_add(&B.audits, 1, __ATOMIC_RELAXED);
            }
            for (int i = 0; i < got; i++) ck_assert(rec_release_read(B.rec[i]));
            continue;
        }
        int x = (int)(tu_rand(&seed) % NACCT), y;
        do y = (int)(tu_rand(&seed) % NACCT);
        while (y == x);
        /* x: read lock then upgrade; y: write lock */
        if (!rec_try_read_lock(B.rec[x])) continue;
        struct acct ax, ay;
        uint64_t ex, ey;
        ck_assert_int_eq(rec_row_read(B.r, v, B.rec[x], &ax, TSIZE, NULL, &ex), REC_OK);
        if (!rec_try_upgrade(B.rec[x])) {
            ck_assert(rec_release_read(B.rec[x]));
            sched_yield();
            continue;
        }
        if (!rec_try_write_lock(B.rec[y])) {
            ck_assert(rec_release_write(B.rec[x]));
            sched_yield();
            continue;
        }
        ck_assert_int_eq(rec_row_read(B.r, v, B.rec[y], &ay, TSIZE, NULL, &ey), REC_OK);
        ck_assert(acct_ok(&ax, ex) && acct_ok(&ay, ey));
        int64_t amt = (int64_t)(tu_rand(&seed) % 50);
        acct_make(&ax, ax.bal - amt, ex + 1);
        acct_make(&ay, ay.bal + amt, ey + 1);
        ck_assert_int_eq(rec_row_write(B.r, v, B.rec[x], &ax, TSIZE, 1, ex + 1), REC_OK);
        ck_assert_int_eq(rec_row_write(B.r, v, B.rec[y], &ay, TSIZE, 1, ey + 1), REC_OK);
        __atomic_fetch_add(&B.commits, 1, __ATOMIC_RELAXED);
        ck_assert(rec_release_write(B.rec[y]));
        ck_assert(rec_release_write(B.rec[x]));
    }
    return NULL;
}

/* The owner's CLOCK hand and next-key maintenance, in caricature. */
static void *flag_worker(void *arg)
{
    (void)arg;
    uint64_t seed = 99;
    while (!__atomic_load_n(&B.stop, __ATOMIC_ACQUIRE)) {
        cxl_record *rec = B.rec[tu_rand(&seed) % NACCT];
        if (tu_rand(&seed) & 1) rec_flag_set(rec, REC_CLOCK | REC_HAS_NEXT);
        else rec_flag_clear(rec, REC_CLOCK | REC_HAS_NEXT);
    }
    return NULL;
}

START_TEST(bank_threads_one_host)
{
    struct pod_config c;
    tu_make_config(&c, 1, 512 * MiB, 8 * MiB, true);
    pod_err err = {{0}};
    memset(&B, 0, sizeof B);
    B.r = cxl_region_open(&c, 0, CXL_OPEN_CREATE, &err);
    ck_assert_msg(B.r != NULL, "%s", err.msg);
    B.v = tu_variants[_i];
    const char *ms = getenv("RECORD_MT_MS");
    B.ms = ms ? atof(ms) : 400;
    for (int i = 0; i < NACCT; i++) {
        struct acct a;
        acct_make(&a, INIT, 0);
        cxl_off o = rec_create(B.r, B.v, &a, TSIZE, 1, 0);
        ck_assert_uint_ne(o, CXL_NULL);
        B.rec[i] = cxl_ptr(B.r, o);
        B.row[i] = rec_row_off(rec_load(B.rec[i]));
    }
    pthread_t t[NT], f;
    pthread_create(&f, NULL, flag_worker, NULL);
    for (uintptr_t i = 0; i < NT; i++) pthread_create(&t[i], NULL, bank_worker, (void *)i);
    for (int i = 0; i < NT; i++) pthread_join(t[i], NULL);
    __atomic_store_n(&B.stop, 1, __ATOMIC_RELEASE);
    pthread_join(f, NULL);
    int64_t sum = 0;
    uint64_t evs = 0;
    for (int i = 0; i < NACCT; i++) {
        cxl_record w = rec_load(B.rec[i]);
        ck_assert_uint_eq(rec_row_off(w), B.row[i]);
        ck_assert_uint_eq(w & (REC_LATCH | REC_LOCK_MASK), 0);
        struct acct a;
        uint64_t ev;
        ck_assert_int_eq(rec_row_read(B.r, B.v, B.rec[i], &a, TSIZE, NULL, &ev), REC_OK);
        ck_assert(acct_ok(&a, ev));
        sum += a.bal;
        evs += ev;
    }
    ck_assert_int_eq(sum, NACCT * INIT);
    ck_assert_uint_eq(evs, 2 * B.commits);
    printf("%-16s %d threads: %llu transfers, %llu audits\n", pod_coherence_name(B.v), NT,
           (unsigned long long)B.commits, (unsigned long long)B.audits);
    ck_assert_uint_gt(B.commits, 0);
    cxl_region_close(B.r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("record_mt");
    TCase *t = tu_tcase(s, "record_mt", 120);
    tcase_add_test(t, latch_excludes_and_fields_survive);
    tcase_add_loop_test(t, bank_threads_one_host, 0, 4);
    return tu_run(s);
}
