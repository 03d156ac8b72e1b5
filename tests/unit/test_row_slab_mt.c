/* Exact-size row slabs (src/storage/row_slab.c); also built with
 * ThreadSanitizer by make tsan.
 *
 * Rows are the exact size (no size class: 88-byte rows take 88 bytes of
 * chunk), zeroed, 8-byte aligned and disjoint; freed rows are reused before
 * a new chunk is taken, also when another thread freed them and when the
 * freeing thread has exited; a destroyed slab's id can be reused without the
 * threads' caches handing out its rows; and threads that allocate, check and
 * free rows while passing them to each other never see a row twice. With
 * huge pages on, a large slab's later chunks are 2 MiB-aligned 2 MiB ones. */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "storage/row_slab.h"
#include "helpers/testutil.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#define CHUNK (256u << 10)

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

START_TEST(exact_zeroed_disjoint)
{
    enum { N = 20000, BLOCK = 88 };
    static const unsigned char zero[BLOCK];
    struct row_slab *s = row_slab_new(BLOCK);
    ck_assert_ptr_nonnull(s);
    void **rows = malloc(N * sizeof *rows);
    for (int i = 0; i < N; i++) {
        rows[i] = row_slab_alloc(s);
        ck_assert_ptr_nonnull(rows[i]);
        ck_assert_uint_eq((uintptr_t)rows[i] % 8, 0);
        ck_assert(memcmp(rows[i], zero, BLOCK) == 0);
        memset(rows[i], 0xab, BLOCK);
    }
    qsort(rows, N, sizeof *rows, cmp_ptr);
    for (int i = 1; i < N; i++)
        if ((uintptr_t)rows[i] - (uintptr_t)rows[i - 1] < BLOCK) ck_abort_msg("rows %d and %d overlap", i - 1, i);
    /* Exact size: whole chunks of 88-byte rows, not 96-byte blocks. */
    uint64_t bytes = row_slab_bytes(s);
    ck_assert_uint_le(bytes, (uint64_t)N * BLOCK + CHUNK);
    ck_assert_uint_lt(bytes, (uint64_t)N * 96);
    /* Freed rows come back zeroed, and take no new memory. */
    for (int i = 0; i < N; i++) row_slab_free(s, rows[i]);
#if defined(__SANITIZE_ADDRESS__)
    ck_assert(__asan_address_is_poisoned((char *)rows[0] + 16));
#endif
    for (int i = 0; i < N; i++) {
        rows[i] = row_slab_alloc(s);
        ck_assert(memcmp(rows[i], zero, BLOCK) == 0);
    }
    ck_assert_uint_eq(row_slab_bytes(s), bytes);
    free(rows);
    row_slab_destroy(s);
}
END_TEST

/* With huge pages on, a slab takes 256 KiB chunks until it holds 16 MiB,
 * then 2 MiB chunks aligned to 2 MiB (a transparent huge page each; whether
 * the kernel backs them so is its business); off, it keeps to 256 KiB.
 * Rows stay exact, zeroed and disjoint either way, and destroy gives the
 * mapped chunks back (AddressSanitizer would see a leak or a bad free). */
START_TEST(large_slabs_take_huge_chunks)
{
    enum { BLOCK = 1024 };
    const uint64_t small = 16u << 20, huge = 2u << 20;
    for (int on = 1; on >= 0; on--) {
        row_slab_use_huge_pages(on);
        struct row_slab *s = row_slab_new(BLOCK);
        ck_assert_ptr_nonnull(s);
        size_t cap = (size_t)(small + 3 * huge) / BLOCK, n = 0;
        void **rows = malloc(cap * sizeof *rows);
        uint64_t bytes = 0;
        int huge_chunks = 0;
        while (bytes < small + 2 * huge && n < cap) {
            void *p = row_slab_alloc(s);
            ck_assert_ptr_nonnull(p);
            uint64_t b = row_slab_bytes(s);
            if (b != bytes) { /* p is the first row of a new chunk */
                uint64_t step = b - bytes;
                if (bytes < small || !on) {
                    ck_assert_uint_eq(step, CHUNK);
                } else {
                    ck_assert_uint_eq(step, huge);
                    ck_assert_uint_eq((uintptr_t)p % huge, 64); /* after the chunk's header */
                    huge_chunks++;
                }
                bytes = b;
            }
            ck_assert_uint_eq(*(unsigned char *)p, 0);
            memset(p, 0x5a, BLOCK);
            rows[n++] = p;
        }
        ck_assert_int_eq(huge_chunks, on ? 2 : 0);
        qsort(rows, n, sizeof *rows, cmp_ptr);
        for (size_t i = 1; i < n; i++)
            ck_assert_uint_ge((uintptr_t)rows[i] - (uintptr_t)rows[i - 1], BLOCK);
        for (size_t i = 0; i < n; i++) row_slab_free(s, rows[i]);
        free(rows);
        row_slab_destroy(s);
    }
}
END_TEST

START_TEST(bad_block_sizes)
{
    ck_assert_ptr_null(row_slab_new(8));
    ck_assert_ptr_null(row_slab_new(20));
    ck_assert_ptr_null(row_slab_new(ROW_SLAB_MAX_BLOCK + 8));
    struct row_slab *s = row_slab_new(ROW_SLAB_MAX_BLOCK);
    ck_assert_ptr_nonnull(s);
    void *r = row_slab_alloc(s);
    ck_assert_ptr_nonnull(r);
    memset(r, 1, ROW_SLAB_MAX_BLOCK);
    row_slab_free(s, r);
    row_slab_destroy(s);
}
END_TEST

/* ---- rows passed between threads ------------------------------------------- */

struct job {
    struct row_slab *s;
    void **rows;
    int n;
};

static void *alloc_all(void *arg)
{
    struct job *j = arg;
    for (int i = 0; i < j->n; i++) ck_assert_ptr_nonnull(j->rows[i] = row_slab_alloc(j->s));
    return NULL;
}

static void *free_all(void *arg)
{
    struct job *j = arg;
    for (int i = 0; i < j->n; i++) row_slab_free(j->s, j->rows[i]);
    return NULL;
}

static void run(void *(*fn)(void *), struct job *j)
{
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, fn, j), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
}

START_TEST(rows_freed_elsewhere_are_reused)
{
    enum { N = 10000 };
    struct job j = {row_slab_new(40), malloc(N * sizeof(void *)), N};
    run(alloc_all, &j);
    uint64_t bytes = row_slab_bytes(j.s);
    run(free_all, &j);   /* full batches go to the slab, the rest at the thread's exit */
    run(alloc_all, &j);  /* a third thread finds them all */
    ck_assert_uint_eq(row_slab_bytes(j.s), bytes);
    free_all(&j);        /* this thread's cache keeps them until the slab goes */
    free(j.rows);
    row_slab_destroy(j.s);
}
END_TEST

START_TEST(destroyed_slab_id_reused)
{
    struct row_slab *a = row_slab_new(64);
    void *r[200];
    for (int i = 0; i < 200; i++) r[i] = row_slab_alloc(a);
    for (int i = 0; i < 200; i++) row_slab_free(a, r[i]); /* in this thread's cache */
    row_slab_destroy(a);
    struct row_slab *b = row_slab_new(24); /* takes a's id */
    for (int i = 0; i < 200; i++) {
        r[i] = row_slab_alloc(b);
        memset(r[i], 0x5a, 24); /* a row of a's freed chunk: ASan's use-after-free */
    }
    ck_assert_uint_le(row_slab_bytes(b), CHUNK);
    for (int i = 0; i < 200; i++) row_slab_free(b, r[i]);
    row_slab_destroy(b);
}
END_TEST

/* Threads allocate rows, stamp them, pass some to a shared pool and free
 * rows taken from it after checking their stamp. */
enum { THREADS = 3, ROUNDS = 20000, BLOCK_MT = 48, POOL = 4096 };
static struct row_slab *mt_slab;
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *pool[POOL];
static int npool;

static void check_free(uint64_t *row)
{
    for (int w = 1; w < BLOCK_MT / 8; w++)
        if (row[w] != row[0] + (uint64_t)w) ck_abort_msg("a row was changed by someone else");
    row_slab_free(mt_slab, row);
}

static void *churn(void *arg)
{
    uint64_t id = (uintptr_t)arg, seq = 0;
    uint64_t *mine[64];
    int n = 0;
    unsigned x = (unsigned)id * 2654435761u + 1;
    for (int round = 0; round < ROUNDS; round++) {
        x = x * 1103515245u + 12345u;
        if (n < 64 && (x >> 16) % 3 != 0) {
            uint64_t *r = row_slab_alloc(mt_slab);
            if (!r) ck_abort_msg("out of memory");
            for (int w = 1; w < BLOCK_MT / 8; w++)
                if (r[w] != 0) ck_abort_msg("a new row is not zeroed");
            r[0] = (id << 40) | (seq += 16);
            for (int w = 1; w < BLOCK_MT / 8; w++) r[w] = r[0] + (uint64_t)w;
            mine[n++] = r;
        } else if (n > 0) {
            uint64_t *r = mine[--n], *other = NULL;
            pthread_mutex_lock(&pool_mu);
            if ((x >> 20) & 1 && npool < POOL) pool[npool++] = r, r = NULL;
            else if (npool > 0) other = pool[--npool];
            pthread_mutex_unlock(&pool_mu);
            if (r) check_free(r);
            if (other) check_free(other);
        }
    }
    while (n > 0) check_free(mine[--n]);
    return NULL;
}

START_TEST(threads_churn)
{
    mt_slab = row_slab_new(BLOCK_MT);
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, churn, (void *)(i + 1)), 0);
    for (int i = 0; i < THREADS; i++) ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    while (npool > 0) check_free(pool[--npool]);
    row_slab_destroy(mt_slab);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("row_slab");
    TCase *tc = tu_tcase(s, "single", 0);
    tcase_add_test(tc, exact_zeroed_disjoint);
    tcase_add_test(tc, bad_block_sizes);
    tcase_add_test(tc, large_slabs_take_huge_chunks);
    tcase_add_test(tc, destroyed_slab_id_reused);
    TCase *mt = tu_tcase(s, "threads", 120);
    tcase_add_test(mt, rows_freed_elsewhere_are_reused);
    tcase_add_test(mt, threads_churn);
    return tu_run(s);
}
