/* The row word (src/storage/row.h) shared by the 2PL lock (src/storage/lock.h),
 * the row latch (src/pod/pod_int.h) and the valid bit; also built with
 * ThreadSanitizer by make tsan.
 *
 * One thread takes and releases the latch, another takes and releases
 * locks (write, read, upgrade, downgrade), at the same time on one word. As
 * each is the only user of its bits, every attempt must succeed and the
 * valid bit must stay set: an operation that wrote back a stale word (a
 * plain store of a value read before the other thread changed its bit) shows
 * up as a latch or lock that cannot be taken, or a valid bit gone.
 *
 * The hand-over of a row's read locks into its CXL record (move-in,
 * rowlock_freeze): a reader that lets go, or fails to upgrade and lets go,
 * after the word froze and before the readers reached the record must not
 * stay counted in the record. */
#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cxl/record_ops.h"
#include "cxl/region.h"
#include "pod/pod_int.h"
#include "pod/rowlock.h"
#include "storage/lock.h"
#include "helpers/testutil.h"

#define MiB (1ull << 20)

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

/* A transaction's reader on the row being moved in: _i 0 lets go, 1 first
 * tries to upgrade (pod_put after pod_get). */
static struct {
    struct cxl_region *r;
    struct pod_row row;
    bool upgrade, done;
} H;

static void *hand_over_reader(void *arg)
{
    (void)arg;
    bool in_cxl = false;
    int held = ROWLOCK_READ;
    if (H.upgrade && rowlock_upgrade(H.r, &H.row, &in_cxl)) held = ROWLOCK_WRITE;
    rowlock_release(H.r, &H.row, held, in_cxl);
    __atomic_store_n(&H.done, true, __ATOMIC_RELEASE);
    return NULL;
}

START_TEST(read_lock_let_go_during_hand_over)
{
    struct pod_config c;
    tu_make_config(&c, 1, 512 * MiB, 8 * MiB, false);
    pod_err err = {{0}};
    memset(&H, 0, sizeof H);
    H.upgrade = _i == 1;
    H.r = cxl_region_open(&c, 0, CXL_OPEN_CREATE, &err);
    ck_assert_msg(H.r != NULL, "%s", err.msg);
    uint64_t tuple = 42;
    cxl_off off = rec_create(H.r, POD_COH_FULL, &tuple, sizeof tuple, 1, 0);
    ck_assert_uint_ne(off, CXL_NULL);
    cxl_record *rec = cxl_ptr(H.r, off);
    row_set_valid(&H.row, 1);
    ck_assert(lock_try_read(&H.row.lock)); /* the transaction's */
    /* move_in up to the hand-over: latch, its own read lock, the guard. */
    ck_assert(pod_row_latch_try(&H.row));
    ck_assert(lock_try_read(&H.row.lock));
    ck_assert(rec_init_lock(rec, true, 0));
    unsigned readers = rowlock_freeze(&H.row, off);
    ck_assert_uint_eq(readers, 1);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, hand_over_reader, NULL), 0);
    /* The reader may let go now; it has no reader in the record yet. */
    for (int ms = 0; ms < 200 && !__atomic_load_n(&H.done, __ATOMIC_ACQUIRE); ms++)
        usleep(1000);
    ck_assert(rec_init_lock(rec, false, readers));
    pod_row_latch_release(&H.row);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_msg((rec_load(rec) & REC_LOCK_MASK) == 0,
                  "the record still counts %llu reader(s) after the only one let go",
                  (unsigned long long)((rec_load(rec) & REC_LOCK_R_MASK) >> REC_LOCK_R_SHIFT));
    ck_assert(rec_try_write_lock(rec));
    cxl_region_close(H.r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("row_word");
    TCase *tc = tu_tcase(s, "threads", 120);
    tcase_add_test(tc, lock_and_latch_share_the_word);
    tcase_add_loop_test(tc, read_lock_let_go_during_hand_over, 0, 2);
    return tu_run(s);
}
