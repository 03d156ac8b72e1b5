/* Procedures for the liveness tests (tests/unit/test_liveness_mp.c).
 *
 * live.stall(deadline_ms) rolls its transaction back as a conflict
 * (POD_CONFLICT, so the server retries it) until CLOCK_MONOTONIC reaches
 * deadline_ms (milliseconds, as live.now returns them), then commits. While
 * it retries it must hold back nobody: not the durable epoch, not the
 * replies of other calls, not the calls queued behind it.
 *
 * live.put_scan(k, lo, hi, reverse) writes (updates or inserts) key k of table gaps and then
 * scans [lo, hi] in one transaction, returning the rows seen: when k lies in
 * another host's partition, the owner must count this transaction's own
 * lock on k as its own when it marks the gaps around k for the scan.
 * Table gaps: 8-byte big-endian keys, partition key % 2 (odd keys are host
 * 1's in a pod of two). */
#include <time.h>

#include "poddb/proc.h"

static pod_table *gaps;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int live_stall(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)tx;
    (void)ctx;
    if (now_ms() < a->v[0].u.i64) return POD_CONFLICT;
    pod_result_i64(res, 1);
    return POD_OK;
}

static int live_now(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)tx;
    (void)a;
    (void)ctx;
    pod_result_i64(res, now_ms());
    return POD_OK;
}

static bool count_row(void *arg, const void *key, const void *tuple)
{
    (void)key;
    (void)tuple;
    ++*(int64_t *)arg;
    return true;
}

/* live.load(k): insert key k of gaps (status 2 if it exists). */
static int live_load(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    (void)ctx;
    unsigned char k[8];
    pod_key_u64(k, (uint64_t)a->v[0].u.i64);
    return pod_insert(tx, gaps, k, k);
}

static int live_put_scan(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    unsigned char k[8], lo[8], hi[8];
    pod_key_u64(k, (uint64_t)a->v[0].u.i64);
    pod_key_u64(lo, (uint64_t)a->v[1].u.i64);
    pod_key_u64(hi, (uint64_t)a->v[2].u.i64);
    int rc = pod_put(tx, gaps, k, k);
    if (rc == POD_NOT_FOUND) rc = pod_insert(tx, gaps, k, k);
    if (rc < 0) return rc;
    int64_t n = 0;
    POD_TRY(pod_scan(tx, gaps, lo, hi, 0, a->v[3].u.i64 ? POD_SCAN_REVERSE : 0, count_row, &n));
    pod_result_i64(res, n);
    return POD_OK;
}

int poddb_module_init(pod_db *db, char *err, size_t errlen)
{
    const pod_table_def td = {.name = "gaps", .key_size = 8, .tuple_size = 8, .nparts = 2,
                              .partition = pod_part_be64};
    if (!(gaps = pod_table_create(db, &td, err, errlen))) return -1;
    static const enum pod_type one_int[] = {POD_T_I64};
    static const enum pod_type four_ints[] = {POD_T_I64, POD_T_I64, POD_T_I64, POD_T_I64};
    const pod_proc_def defs[] = {
        {"live.stall", live_stall, NULL, 1, one_int, true},
        {"live.now", live_now, NULL, 0, NULL, true},
        {"live.load", live_load, NULL, 1, one_int, false},
        {"live.put_scan", live_put_scan, NULL, 4, four_ints, false},
    };
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
        if (pod_proc_register(db, &defs[i], err, errlen) < 0) return -1;
    return 0;
}
