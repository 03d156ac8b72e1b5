/* Lotus's lock table (src/dm/lock_table.h); also built with ThreadSanitizer
 * by make tsan.
 *
 * Single-thread cases pin the rules down: write locks exclude everything,
 * read locks share up to 127 holders, the only reader may upgrade, a
 * request or a release repeated by the same holder changes nothing, a
 * bucket whose 8 slots are taken refuses a ninth key, the last release
 * frees the slot whole, a compute node's locks go with release_cn, and the
 * shard map splits 4096 shards evenly. The concurrent case has threads of
 * two "compute nodes" lock and release random keys of a small key space
 * while a shadow count per key checks that a write lock is never shared
 * with anyone and that a read lock never meets a writer (LOCK_MT_MS, default
 * 1000 ms, 2000 under TSan; LOCK_MT_SEED). */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dm/lock_table.h"
#include "helpers/testutil.h"
#include "util/clock.h"

static struct lock_table *new_table(size_t bytes)
{
    pod_err e;
    struct lock_table *t = lock_table_new(bytes, &e);
    ck_assert_msg(t, "%s", e.msg);
    return t;
}

static uint64_t key_hash(uint64_t k) { return lt_key_hash(7, &k, sizeof k); }

START_TEST(modes)
{
    struct lock_table *t = new_table(1 << 16);
    uint64_t a = LT_HOLDER(1, 10), b = LT_HOLDER(2, 20), c = LT_HOLDER(2, 21);
    uint64_t k = key_hash(1);
    /* write excludes write and read; the same request again is fine */
    ck_assert_int_eq(lock_table_acquire(t, k, true, a), LT_OK);
    ck_assert_int_eq(lock_table_acquire(t, k, true, a), LT_OK);
    ck_assert_int_eq(lock_table_acquire(t, k, false, a), LT_OK); /* weaker: held already */
    ck_assert_int_eq(lock_table_acquire(t, k, true, b), LT_CONFLICT);
    ck_assert_int_eq(lock_table_acquire(t, k, false, b), LT_CONFLICT);
    lock_table_release(t, k, b); /* not b's: nothing */
    ck_assert_int_eq(lock_table_acquire(t, k, false, b), LT_CONFLICT);
    lock_table_release(t, k, a);
    lock_table_release(t, k, a); /* again: nothing */
    size_t locks, holders;
    lock_table_count(t, &locks, &holders);
    ck_assert_uint_eq(locks, 0);
    ck_assert_uint_eq(holders, 0);
    /* reads share; an upgrade needs to be the only reader */
    ck_assert_int_eq(lock_table_acquire(t, k, false, a), LT_OK);
    ck_assert_int_eq(lock_table_acquire(t, k, false, b), LT_OK);
    ck_assert_int_eq(lock_table_acquire(t, k, true, c), LT_CONFLICT);
    ck_assert_int_eq(lock_table_acquire(t, k, true, a), LT_CONFLICT);
    lock_table_count(t, &locks, &holders);
    ck_assert_uint_eq(locks, 1);
    ck_assert_uint_eq(holders, 2);
    lock_table_release(t, k, b);
    ck_assert_int_eq(lock_table_acquire(t, k, true, a), LT_OK); /* the only reader */
    ck_assert_int_eq(lock_table_acquire(t, k, false, b), LT_CONFLICT);
    lock_table_release(t, k, a);
    ck_assert_int_eq(lock_table_acquire(t, k, true, c), LT_OK);
    lock_table_release(t, k, c);
    /* 127 readers, not 128 */
    for (uint64_t i = 0; i < LT_MAX_READERS; i++)
        ck_assert_int_eq(lock_table_acquire(t, k, false, LT_HOLDER(3, i)), LT_OK);
    ck_assert_int_eq(lock_table_acquire(t, k, false, LT_HOLDER(3, 999)), LT_CONFLICT);
    for (uint64_t i = 0; i < LT_MAX_READERS; i++) lock_table_release(t, k, LT_HOLDER(3, i));
    lock_table_count(t, &locks, &holders);
    ck_assert_uint_eq(locks + holders, 0);
    lock_table_free(t);
}
END_TEST

START_TEST(full_bucket)
{
    struct lock_table *t = new_table(64); /* one bucket: every key in it */
    uint64_t h = LT_HOLDER(1, 1);
    for (uint64_t i = 0; i < LT_SLOTS; i++)
        ck_assert_int_eq(lock_table_acquire(t, key_hash(i), i % 2, h), LT_OK);
    ck_assert_int_eq(lock_table_acquire(t, key_hash(100), true, h), LT_FULL);
    ck_assert_int_eq(lock_table_acquire(t, key_hash(100), false, LT_HOLDER(1, 2)), LT_FULL);
    /* a key that has a slot is still served: read-locked ones share */
    ck_assert_int_eq(lock_table_acquire(t, key_hash(0), false, LT_HOLDER(1, 2)), LT_OK);
    /* the last release frees the slot whole: another key takes it */
    lock_table_release(t, key_hash(3), h);
    ck_assert_int_eq(lock_table_acquire(t, key_hash(100), true, h), LT_OK);
    lock_table_free(t);
}
END_TEST

START_TEST(release_cn)
{
    struct lock_table *t = new_table(1 << 12);
    for (uint64_t i = 0; i < 200; i++) {
        ck_assert_int_eq(lock_table_acquire(t, key_hash(i), i % 3 == 0, LT_HOLDER(1 + i % 2, i)),
                         LT_OK);
        if (i % 3) /* a reader of the other compute node too */
            ck_assert_int_eq(lock_table_acquire(t, key_hash(i), false, LT_HOLDER(2 - i % 2, i)),
                             LT_OK);
    }
    size_t n1 = lock_table_release_cn(t, 1);
    /* compute node 1 held every even key, and 67 odd ones as their second reader */
    ck_assert_uint_gt(n1, 100);
    for (uint64_t i = 0; i < 200; i++) {
        enum lt_result r = lock_table_acquire(t, key_hash(i), true, LT_HOLDER(3, 1000 + i));
        /* free now unless compute node 2 holds it */
        bool twos = i % 2 == 1 || i % 3 != 0;
        ck_assert_int_eq(r, twos ? LT_CONFLICT : LT_OK);
    }
    ck_assert_uint_eq(lock_table_release_cn(t, 1), 0);
    lock_table_release_cn(t, 2);
    lock_table_release_cn(t, 3);
    size_t locks, holders;
    lock_table_count(t, &locks, &holders);
    ck_assert_uint_eq(locks + holders, 0);
    lock_table_free(t);
}
END_TEST

START_TEST(shards)
{
    uint32_t owned[3] = {0};
    for (uint32_t s = 0; s < LT_SHARDS; s++) owned[lt_shard_owner(s, 3)]++;
    ck_assert(owned[0] >= 1365 && owned[1] >= 1365 && owned[2] >= 1365);
    ck_assert_uint_eq(owned[0] + owned[1] + owned[2], LT_SHARDS);
    ck_assert_uint_eq(lt_shard(4096 + 5), 5);
    ck_assert_uint_eq(lt_shard_owner(0, 2), 0);
    ck_assert_uint_eq(lt_shard_owner(LT_SHARDS - 1, 2), 1);
    /* hashes of one key agree; the table id is part of it */
    uint64_t k = 42;
    ck_assert(lt_key_hash(1, &k, 8) == lt_key_hash(1, &k, 8));
    ck_assert(lt_key_hash(1, &k, 8) != lt_key_hash(2, &k, 8));
}
END_TEST

/* ---- concurrent ---------------------------------------------------------------- */

#define NKEYS 64
#define NTHREADS 4

struct mt {
    struct lock_table *t;
    uint64_t deadline_ns, seed;
    int64_t shadow[NKEYS]; /* atomic: -1 per writer, +1 per reader */
    uint64_t granted[NTHREADS], refused[NTHREADS];
};

struct arg {
    struct mt *m;
    int id;
};

static void *body(void *p)
{
    struct arg *a = p;
    struct mt *m = a->m;
    uint64_t rng = m->seed + (uint64_t)a->id * 7919, txn = 0;
    uint32_t cn = 1 + (uint32_t)a->id % 2;
    while (pod_mono_ns() < m->deadline_ns && !tu_failed()) {
        uint64_t held[4];
        bool how[4];
        int n = 0;
        uint64_t h = LT_HOLDER(cn, ((uint64_t)a->id << 40) | txn++);
        for (int i = 0; i < 4; i++) { /* a transaction's locks, NO_WAIT */
            uint64_t k = tu_rand(&rng) % NKEYS;
            bool w = tu_rand(&rng) % 3 == 0;
            enum lt_result r = lock_table_acquire(m->t, key_hash(k), w, h);
            if (r != LT_OK) {
                m->refused[a->id]++;
                break;
            }
            bool again = false;
            for (int j = 0; j < n; j++) again |= held[j] == k;
            if (again) continue; /* held already (or upgraded): counted once */
            int64_t before = __atomic_fetch_add(&m->shadow[k], w ? -1 : 1, __ATOMIC_SEQ_CST);
            if (w ? before != 0 : before < 0)
                tu_fail("key %llu granted %s with shadow %lld", (unsigned long long)k,
                        w ? "write" : "read", (long long)before);
            held[n] = k, how[n] = w, n++;
            m->granted[a->id]++;
        }
        for (int j = 0; j < n; j++) { /* the shadow first: the lock still covers it */
            /* an upgraded read lock was counted as a read */
            __atomic_fetch_add(&m->shadow[held[j]], how[j] ? 1 : -1, __ATOMIC_SEQ_CST);
            lock_table_release(m->t, key_hash(held[j]), h);
        }
    }
    return NULL;
}

START_TEST(concurrent)
{
    tu_fail_reset();
    struct mt m = {.t = new_table(4096), .seed = tu_env_seed("LOCK_MT_SEED")};
    int ms = tu_env_ms("LOCK_MT_MS", TU_TSAN_OR(1000, 2000));
    m.deadline_ns = pod_mono_ns() + (uint64_t)ms * 1000000ull;
    pthread_t th[NTHREADS];
    struct arg args[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        args[i] = (struct arg){&m, i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, body, &args[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    ck_assert_msg(!tu_failed(), "%s", tu_failure());
    uint64_t granted = 0, refused = 0;
    for (int i = 0; i < NTHREADS; i++) granted += m.granted[i], refused += m.refused[i];
    fprintf(stderr, "lock table: %d ms, %d threads: %llu locks granted, %llu refused\n", ms,
            NTHREADS, (unsigned long long)granted, (unsigned long long)refused);
    ck_assert_uint_gt(granted, 0);
    ck_assert_uint_gt(refused, 0);
    size_t locks, holders;
    lock_table_count(m.t, &locks, &holders);
    ck_assert_uint_eq(locks + holders, 0);
    lock_table_free(m.t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lock_table");
    TCase *tc = tu_tcase(s, "lotus", 60);
    tcase_add_test(tc, modes);
    tcase_add_test(tc, full_bucket);
    tcase_add_test(tc, release_cn);
    tcase_add_test(tc, shards);
    tcase_add_test(tc, concurrent);
    return tu_run(s);
}
