/* The row word (src/storage/row.h) shared by the 2PL lock (src/storage/lock.h),
 * the row latch (src/pod/pod_int.h) and the valid bit; also built with
 * ThreadSanitizer by make tsan.
 *
 * One thread takes and releases the latch, another takes and releases
 * locks (write, read, upgrade, downgrade), at the same time on one word. As
 * each is the only user of its bits, every attempt must succeed and the
 * valid bit must stay set: an operation that wrote back a stale word (a
 * plain store of a value read before the other thread changed its bit) shows
 * up as a latch or lock that cannot be taken, or a valid bit gone. */
#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "pod/pod_int.h"
#include "storage/lock.h"
#include "helpers/testutil.h"

enum { ROUNDS = 2000000 };
static struct pod_row row;
static bool go;

static void wait_go(void)
{
    while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE)) {
    }
}

static void *latcher(void *arg)
{
    (void)arg;
    wait_go();
    for (int i = 0; i < ROUNDS; i++) {
        if (!pod_row_latch_try(&row)) ck_abort_msg("round %d: the latch was not free", i);
        pod_row_latch_release(&row);
    }
    return NULL;
}

static void *locker(void *arg)
{
    (void)arg;
    uint32_t *w = &row.lock;
    wait_go();
    for (int i = 0; i < ROUNDS; i++) {
        switch (i % 3) {
        case 0:
            if (!lock_try_write(w)) ck_abort_msg("round %d: write lock refused", i);
            lock_release_write(w);
            break;
        case 1:
            if (!lock_try_read(w) || !lock_try_upgrade(w)) ck_abort_msg("round %d: upgrade refused", i);
            lock_downgrade(w);
            lock_release_read(w);
            break;
        default:
            if (!lock_try_read(w)) ck_abort_msg("round %d: read lock refused", i);
            lock_release_read(w);
        }
        if (!row_valid(&row)) ck_abort_msg("round %d: the valid bit was lost", i);
    }
    return NULL;
}

START_TEST(lock_and_latch_share_the_word)
{
    row_set_valid(&row, 1);
    pthread_t a, b;
    ck_assert_int_eq(pthread_create(&a, NULL, latcher, NULL), 0);
    ck_assert_int_eq(pthread_create(&b, NULL, locker, NULL), 0);
    __atomic_store_n(&go, true, __ATOMIC_RELEASE);
    ck_assert_int_eq(pthread_join(a, NULL), 0);
    ck_assert_int_eq(pthread_join(b, NULL), 0);
    ck_assert_uint_eq(row.lock, ROW_VALID);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("row_word");
    TCase *tc = tu_tcase(s, "threads", 120);
    tcase_add_test(tc, lock_and_latch_share_the_word);
    return tu_run(s);
}
