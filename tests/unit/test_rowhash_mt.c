/* The row hash beside each partition's tree (src/storage/rowhash.h): exact
 * answers against a reference, growth, chain lengths for the key shapes of
 * the workloads, and readers racing writers and resizes (a reader may miss a
 * row while it moves, never find a wrong one). */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "storage/rowhash.h"

#define KEY 16 /* key bytes stored after a zero-length tuple */

static struct pod_row *mkrow(uint64_t hi, uint64_t lo)
{
    struct pod_row *r = calloc(1, sizeof *r + KEY);
    for (int i = 0; i < 8; i++) {
        r->tuple[i] = (unsigned char)(hi >> (56 - 8 * i)); /* big-endian, as keys are */
        r->tuple[8 + i] = (unsigned char)(lo >> (56 - 8 * i));
    }
    return r;
}

static void keyof(unsigned char k[KEY], uint64_t hi, uint64_t lo)
{
    struct pod_row *r = mkrow(hi, lo);
    memcpy(k, r->tuple, KEY);
    free(r);
}

START_TEST(add_find_del_grow)
{
    struct row_hash h;
    rowhash_init(&h, 0, KEY);
    unsigned char k[KEY];
    keyof(k, 1, 1);
    ck_assert_ptr_null(rowhash_find(&h, k)); /* empty: no array yet */
    enum { N = 50000 };
    struct pod_row **rows = malloc(N * sizeof *rows);
    for (int i = 0; i < N; i++) {
        rows[i] = mkrow((uint64_t)i % 7, (uint64_t)i);
        rowhash_add(&h, rows[i]);
    }
    struct rowhash_stats st;
    rowhash_get_stats(&h, &st);
    ck_assert_uint_eq(st.rows, N);
    ck_assert_uint_ge(st.buckets, N); /* grew to load factor <= 1 */
    for (int i = 0; i < N; i++) {
        keyof(k, (uint64_t)i % 7, (uint64_t)i);
        ck_assert_ptr_eq(rowhash_find(&h, k), rows[i]);
    }
    keyof(k, 0, N + 1);
    ck_assert_ptr_null(rowhash_find(&h, k));
    for (int i = 0; i < N; i += 2) rowhash_del(&h, rows[i]);
    for (int i = 0; i < N; i++) {
        keyof(k, (uint64_t)i % 7, (uint64_t)i);
        ck_assert_ptr_eq(rowhash_find(&h, k), i % 2 ? rows[i] : NULL);
    }
    rowhash_del(&h, rows[0]); /* not in it: no effect */
    rowhash_get_stats(&h, &st);
    ck_assert_uint_eq(st.rows, N / 2);
    rowhash_destroy(&h);
    for (int i = 0; i < N; i++) free(rows[i]);
    free(rows);
}
END_TEST

/* TPC-C-like composite keys (warehouse, district, order, line) and dense
 * integers: chains stay short, or point lookups would walk rows. */
START_TEST(chains_stay_short)
{
    struct row_hash h;
    rowhash_init(&h, 0, KEY);
    enum { N = 200000 };
    struct pod_row **rows = malloc(N * sizeof *rows);
    for (int i = 0; i < N; i++) {
        uint64_t w = 1, d = (uint64_t)i % 10, l = (uint64_t)i / 10 % 15, o = (uint64_t)i / 150;
        rows[i] = mkrow(w << 32 | d, o << 8 | l);
        rowhash_add(&h, rows[i]);
    }
    struct rowhash_stats st;
    rowhash_get_stats(&h, &st);
    ck_assert_uint_eq(st.rows, N);
    ck_assert_msg(st.longest_chain <= 12, "longest chain %lu of %lu rows in %lu buckets",
                  (unsigned long)st.longest_chain, (unsigned long)st.rows,
                  (unsigned long)st.buckets);
    /* A good hash leaves about 1/e of the buckets empty at load factor 1. */
    double empty = (double)st.empty_buckets / (double)st.buckets;
    double load = (double)st.rows / (double)st.buckets;
    ck_assert_msg(empty < 1.25 * __builtin_exp(-load) + 0.02, "%.3f of the buckets empty at load %.2f",
                  empty, load);
    rowhash_destroy(&h);
    for (int i = 0; i < N; i++) free(rows[i]);
    free(rows);
}
END_TEST

/* Readers look up a fixed set of rows that are never removed while a writer
 * adds (forcing resizes) and removes others; a reader may miss (it would ask
 * the tree) but never gets a row with another key. */
static struct row_hash shared;
static struct pod_row *stable[1000];
static int stop;

static void *reader(void *arg)
{
    long *misses = arg;
    unsigned char k[KEY];
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        for (int i = 0; i < 1000; i++) {
            memcpy(k, stable[i]->tuple, KEY);
            struct pod_row *r = rowhash_find(&shared, k);
            if (!r) (*misses)++;
            else ck_assert_ptr_eq(r, stable[i]);
        }
    }
    return NULL;
}

START_TEST(readers_race_writers)
{
    rowhash_init(&shared, 0, KEY);
    for (int i = 0; i < 1000; i++) {
        stable[i] = mkrow(9, (uint64_t)i);
        rowhash_add(&shared, stable[i]);
    }
    long misses[2] = {0, 0};
    pthread_t th[2];
    stop = 0;
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, reader, &misses[i]);
    enum { N = 100000 };
    struct pod_row **rows = malloc(N * sizeof *rows);
    for (int i = 0; i < N; i++) {
        rows[i] = mkrow(3, (uint64_t)i);
        rowhash_add(&shared, rows[i]);
        if (i % 3 == 0) rowhash_del(&shared, rows[i]); /* never freed here: EBR's job */
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    unsigned char k[KEY];
    for (int i = 0; i < 1000; i++) { /* quiescent: no misses */
        memcpy(k, stable[i]->tuple, KEY);
        ck_assert_ptr_eq(rowhash_find(&shared, k), stable[i]);
    }
    rowhash_destroy(&shared);
    for (int i = 0; i < N; i++) free(rows[i]);
    for (int i = 0; i < 1000; i++) free(stable[i]);
    free(rows);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rowhash");
    TCase *tc = tcase_create("rowhash");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, add_find_del_grow);
    tcase_add_test(tc, chains_stay_short);
    tcase_add_test(tc, readers_race_writers);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
