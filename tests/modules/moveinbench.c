/* Procedures for the move-in micro-benchmark (tools/poddb-moveinbench.c):
 * a table of 8-byte keys over 2 partitions per host count, loaded by each
 * owner into its own DRAM, and a procedure that reads keys of another
 * host's partition one by one and times each read. A key not in CXL memory
 * yet costs a full move-in: the CXL index misses, the requester asks the
 * owner (POD_MSG_MOVE_IN over the rings) and waits for the reply, then finds
 * the record, locks it and reads its SWcc row. So each time is one
 * cross-host move-in round trip until the tuple is usable. */
#include <time.h>
#include <unistd.h>

#include "poddb/proc.h"

static pod_table *mb;

/* mb.load(host, hosts, first, count): insert the keys first..first+count-1
 * whose partition (key % hosts) this host owns. -> keys inserted. */
static int load(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    int64_t host = a->v[0].u.i64, hosts = a->v[1].u.i64, first = a->v[2].u.i64,
            count = a->v[3].u.i64;
    if (hosts < 1 || host < 0 || host >= hosts || first < 0 || count < 0)
        return pod_txn_fail(tx, POD_E_INVALID, "mb.load: bad host/hosts/first/count");
    int64_t made = 0;
    for (int64_t k = first; k < first + count; k++) {
        if (k % hosts != host) continue;
        unsigned char key[8];
        pod_key_u64(key, (uint64_t)k);
        int64_t v = k;
        POD_TRY(pod_insert(tx, mb, key, &v));
        made++;
    }
    pod_result_i64(res, made);
    return POD_OK;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* mb.get(first, count, stride, gap_us): read the keys first, first+stride,
 * ... (count of them), pausing gap_us between two reads (0: back to back).
 * -> one row per key: its read time in ns. */
static int get(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    int64_t first = a->v[0].u.i64, count = a->v[1].u.i64, stride = a->v[2].u.i64,
            gap = a->v[3].u.i64;
    if (first < 0 || count < 0 || count > 100000 || stride < 1 || gap < 0)
        return pod_txn_fail(tx, POD_E_INVALID, "mb.get: bad first/count/stride/gap_us");
    for (int64_t i = 0; i < count; i++) {
        if (gap && i) usleep((useconds_t)gap);
        uint64_t k = (uint64_t)(first + i * stride);
        unsigned char key[8];
        pod_key_u64(key, k);
        int64_t v = -1;
        uint64_t t0 = now_ns();
        int rc = pod_get(tx, mb, key, &v);
        uint64_t t1 = now_ns();
        if (rc < 0) return rc;
        if (rc != POD_OK || v != (int64_t)k)
            return pod_txn_fail(tx, POD_E_INTERNAL, "mb.get: key %llu not found (was it loaded?)",
                                (unsigned long long)k);
        if (i) pod_result_row(res);
        pod_result_i64(res, (int64_t)(t1 - t0));
    }
    return POD_OK;
}

static uint32_t part_mod(const void *key, uint32_t nparts, void *ctx)
{
    (void)ctx;
    return (uint32_t)(pod_key_get_u64(key) % nparts);
}

int poddb_module_init(pod_db *db, char *err, size_t errlen)
{
    /* One partition per host of a 2-host pod: partition p is owned by host p. */
    pod_table_def d = {.name = "mb", .key_size = 8, .tuple_size = 8, .nparts = 2,
                       .partition = part_mod};
    if (!(mb = pod_table_create(db, &d, err, errlen))) return -1;
    static const enum pod_type i4[] = {POD_T_I64, POD_T_I64, POD_T_I64, POD_T_I64};
    const pod_proc_def defs[] = {
        {"mb.load", load, NULL, 4, i4, false},
        {"mb.get", get, NULL, 4, i4, true},
    };
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
        if (pod_proc_register(db, &defs[i], err, errlen) < 0) return -1;
    return 0;
}
