/* The simulated SWcc cache under concurrency (also run under ThreadSanitizer).
 *
 * Host A: several threads share one simulated view. Each thread owns some lines
 * (written whole through wview or cxl_swcc_write, published under a latch) and
 * one 8-byte slot in each of a few shared lines (written with cxl_swcc_write
 * without a latch; any thread publishes a shared line under its latch). Threads
 * also view, flush and write back ranges that other threads' lines share bitmap
 * words and stripes with.
 * Host B: one thread with its own view of the same memory that, under the
 * latch, flushes and reads random lines and checks they are whole and never go
 * backwards. At the end B flushes everything and must see every final value.
 *
 * The latches stand in for HWcc latches: they are the only synchronisation
 * between the hosts, as in the real protocol. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cxl/coherence.h"
#include "helpers/testutil.h"

enum {
    NT = 4,                          /* host A threads */
    OWN = 24,                        /* lines owned by each thread */
    NSHARED = 6,                     /* lines with one slot per thread */
    NLINES = NT * OWN + NSHARED,
    AREA = NLINES * 64 + 64,         /* plus one line at the end left alone */
    ITERS = 20000,
    SLOTS = 8,                       /* slots NT..7 of a shared line are canaries */
};

static int g_fd;
static char *g_map_a, *g_map_b;
static struct cxl_swcc A, B;
static unsigned g_latch[NLINES];
static int g_done;

static uint64_t g_own_final[NLINES];             /* written by owner only */
static uint64_t g_slot_final[NSHARED][NT];       /* written by slot owner only */

static const uint64_t CANARY = 0xc0ffee00c0ffee00ULL;

static void latch(size_t line)
{
    unsigned z;
    while (z = 0, !__atomic_compare_exchange_n(&g_latch[line], &z, 1, false, __ATOMIC_ACQUIRE,
                                               __ATOMIC_RELAXED))
        sched_yield();
}

static void unlatch(size_t line)
{
    __atomic_store_n(&g_latch[line], 0, __ATOMIC_RELEASE);
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

/* An owned line holding counter c: every word derives from (line, c), so a torn
 * or mixed line is detected. */
static void make_line(uint64_t w[8], size_t line, uint64_t c)
{
    for (int k = 0; k < 8; k++) w[k] = (c << 16) | ((uint64_t)line << 4) | (uint64_t)k;
}

static uint64_t line_counter(const uint64_t w[8], size_t line)
{
    uint64_t c = w[0] >> 16;
    uint64_t ref[8];
    make_line(ref, line, c);
    ck_assert_msg(memcmp(ref, w, 64) == 0, "line %zu is torn or corrupt (w0 %#llx, w7 %#llx)",
                  line, (unsigned long long)w[0], (unsigned long long)w[7]);
    return c;
}

static size_t shared_line(size_t i)
{
    return NT * OWN + i;
}

static void *host_a_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    uint64_t seed = 0x1234567ULL * (uint64_t)(t + 1);
    uint64_t ctr[OWN] = {0}, slot[NSHARED] = {0};
    size_t first = (size_t)t * OWN;
    char *base = A.base;

    for (int it = 0; it < ITERS; it++) {
        uint64_t r = rnd(&seed);
        size_t k = (size_t)(r >> 8) % OWN, line = first + k;
        size_t si = (size_t)(r >> 20) % NSHARED, sl = shared_line(si);
        uint64_t w[8];
        switch (r % 8) {
        case 0:
        case 1: { /* update an owned line and publish it under its latch */
            latch(line);
            make_line(w, line, ++ctr[k]);
            if (r & 0x100000000ULL) {
                memcpy(cxl_swcc_wview(&A, base + line * 64, 64), w, 64);
            } else {
                /* two half-line writes: the first fills the line, the second
                 * finds it valid and dirty */
                cxl_swcc_write(&A, base + line * 64, w, 32);
                cxl_swcc_write(&A, base + line * 64 + 32, w + 4, 32);
            }
            /* read-your-writes before publishing */
            ck_assert_uint_eq(line_counter(cxl_swcc_view(&A, base + line * 64, 64), line), ctr[k]);
            if (r & 0x200000000ULL) cxl_swcc_writeback(&A, base + line * 64, 64);
            else cxl_swcc_flush(&A, base + line * 64, 64);
            unlatch(line);
            break;
        }
        case 2: /* read an owned line: always the last value written */
        case 3: {
            const uint64_t *v = cxl_swcc_view(&A, base + line * 64, 64);
            ck_assert_uint_eq(line_counter(v, line), ctr[k]);
            break;
        }
        case 4:
        case 5: { /* bump my slot of a shared line, unpublished */
            uint64_t v = ++slot[si];
            cxl_swcc_write(&A, base + sl * 64 + (size_t)t * 8, &v, 8);
            uint64_t got[SLOTS];
            cxl_swcc_read(&A, got, base + sl * 64, 64);
            ck_assert_uint_eq(got[t], v);
            for (int c = NT; c < SLOTS; c++) ck_assert_uint_eq(got[c], CANARY);
            break;
        }
        case 6: /* publish a shared line (everyone's slots) */
            latch(sl);
            if (r & 0x100000000ULL) cxl_swcc_writeback(&A, base + sl * 64, 64);
            else cxl_swcc_flush(&A, base + sl * 64, 64);
            unlatch(sl);
            break;
        case 7: /* drop all my lines: they are clean outside the latch, so this
                 * only invalidates (no shared-memory write, no latch needed) */
            cxl_swcc_flush(&A, base + first * 64, OWN * 64);
            break;
        }
    }
    memcpy(&g_own_final[first], ctr, sizeof ctr);
    for (size_t i = 0; i < NSHARED; i++) g_slot_final[i][t] = slot[i];
    return NULL;
}

static void *host_b_thread(void *arg)
{
    (void)arg;
    uint64_t seed = 0xabcdefULL;
    uint64_t seen_own[NLINES] = {0}, seen_slot[NSHARED][NT] = {{0}};
    long reads = 0;
    while (!__atomic_load_n(&g_done, __ATOMIC_ACQUIRE) || reads < 1000) {
        size_t line = (size_t)(rnd(&seed) >> 8) % NLINES;
        uint64_t w[8];
        latch(line);
        cxl_swcc_flush(&B, B.base + line * 64, 64);
        cxl_swcc_read(&B, w, B.base + line * 64, 64);
        unlatch(line);
        if (line < NT * OWN) {
            uint64_t c = line_counter(w, line);
            ck_assert_msg(c >= seen_own[line], "line %zu went back from %llu to %llu", line,
                          (unsigned long long)seen_own[line], (unsigned long long)c);
            seen_own[line] = c;
        } else {
            size_t si = line - NT * OWN;
            for (int t = 0; t < NT; t++) {
                ck_assert(w[t] >= seen_slot[si][t]);
                seen_slot[si][t] = w[t];
            }
            for (int c = NT; c < SLOTS; c++) ck_assert_uint_eq(w[c], CANARY);
        }
        reads++;
    }
    return NULL;
}

START_TEST(test_sim_threads_and_two_hosts)
{
    g_fd = memfd_create("swcc-mt", 0);
    ck_assert_int_ge(g_fd, 0);
    ck_assert_int_eq(ftruncate(g_fd, AREA), 0);
    g_map_a = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_SHARED, g_fd, 0);
    g_map_b = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_SHARED, g_fd, 0);
    ck_assert(g_map_a != MAP_FAILED && g_map_b != MAP_FAILED);
    for (size_t l = 0; l < NT * OWN; l++) make_line((uint64_t *)(g_map_a + l * 64), l, 0);
    for (size_t i = 0; i < NSHARED; i++)
        for (int c = NT; c < SLOTS; c++)
            ((uint64_t *)(g_map_a + shared_line(i) * 64))[c] = CANARY;
    memset(g_map_a + NLINES * 64, 0x5a, 64);
    pod_err err = {{0}};
    ck_assert_msg(cxl_swcc_init(&A, g_map_a, AREA, true, &err) == 0, "%s", err.msg);
    ck_assert_msg(cxl_swcc_init(&B, g_map_b, AREA, true, &err) == 0, "%s", err.msg);

    pthread_t ta[NT], tb;
    ck_assert_int_eq(pthread_create(&tb, NULL, host_b_thread, NULL), 0);
    for (int t = 0; t < NT; t++)
        ck_assert_int_eq(pthread_create(&ta[t], NULL, host_a_thread, (void *)(intptr_t)t), 0);
    for (int t = 0; t < NT; t++) pthread_join(ta[t], NULL);
    __atomic_store_n(&g_done, 1, __ATOMIC_RELEASE);
    pthread_join(tb, NULL);

    /* Owned lines were always published: B sees their final values now. */
    cxl_swcc_flush(&B, B.base, AREA);
    const uint64_t *vb = cxl_swcc_view(&B, B.base, AREA);
    for (size_t l = 0; l < NT * OWN; l++)
        ck_assert_uint_eq(line_counter(vb + l * 8, l), g_own_final[l]);
    /* Slots may still sit dirty in A's cache; after A's write-back B, which
     * cached them just now, still sees the old ones until it flushes. */
    uint64_t before[NSHARED][SLOTS];
    for (size_t i = 0; i < NSHARED; i++) memcpy(before[i], vb + shared_line(i) * 8, 64);
    cxl_swcc_writeback(&A, A.base, AREA);
    for (size_t i = 0; i < NSHARED; i++)
        ck_assert_int_eq(memcmp(before[i], cxl_swcc_view(&B, B.base + shared_line(i) * 64, 64),
                                64),
                         0);
    cxl_swcc_flush(&B, B.base, AREA);
    vb = cxl_swcc_view(&B, B.base, AREA);
    int stale = 0;
    for (size_t i = 0; i < NSHARED; i++) {
        for (int t = 0; t < NT; t++) {
            ck_assert_uint_eq(vb[shared_line(i) * 8 + (size_t)t], g_slot_final[i][t]);
            stale += before[i][t] != g_slot_final[i][t];
        }
        for (int c = NT; c < SLOTS; c++) ck_assert_uint_eq(vb[shared_line(i) * 8 + (size_t)c], CANARY);
    }
    /* the untouched last line is intact */
    for (int b = 0; b < 64; b++) ck_assert_uint_eq((unsigned char)g_map_b[NLINES * 64 + b], 0x5a);
    (void)stale; /* usually > 0, but not guaranteed */

    cxl_swcc_fini(&A);
    cxl_swcc_fini(&B);
    munmap(g_map_a, AREA);
    munmap(g_map_b, AREA);
    close(g_fd);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("swcc_sim_mt");
    TCase *tc = tu_tcase(s, "mt", 120);
    tcase_add_test(tc, test_sim_threads_and_two_hosts);
    return tu_run(s);
}
