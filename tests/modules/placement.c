/* A module that places keys by asking the pod where it runs, instead of
 * taking the host and the number of hosts as arguments (tests/modules/
 * podbank.c does that): a table of 8 partitions, key k in partition k % 8.
 * Used by tests/integration/modules.sh on a pod of 2 hosts. */
#include "poddb/proc.h"

#define NPARTS 8

static pod_table *placed;

/* place.where() -> [this host, hosts] */
static int where(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)a;
    (void)ctx;
    pod_db *db = pod_txn_db(tx);
    pod_result_i64(res, pod_db_host_id(db));
    pod_result_i64(res, pod_db_nhosts(db));
    return POD_OK;
}

/* place.owner(k) -> the host whose partition holds key k */
static int owner(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)tx;
    (void)ctx;
    pod_result_i64(res, pod_table_part_host(placed, (uint32_t)((uint64_t)a->v[0].u.i64 % NPARTS)));
    return POD_OK;
}

/* place.load(n) -> how many of the keys 0..n-1 this host owns and inserted
 * (keys already there are left alone) */
static int load(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    int self = pod_db_host_id(pod_txn_db(tx));
    int64_t made = 0;
    for (int64_t k = 0; k < a->v[0].u.i64; k++) {
        if (pod_table_part_host(placed, (uint32_t)(k % NPARTS)) != self) continue;
        unsigned char key[8];
        pod_key_u64(key, (uint64_t)k);
        int rc = pod_insert(tx, placed, key, &k);
        POD_TRY(rc);
        made += rc == POD_OK;
    }
    pod_result_i64(res, made);
    return POD_OK;
}

int poddb_module_init(pod_db *db, char *err, size_t errlen)
{
    pod_table_def def = {.name = "placed", .key_size = 8, .tuple_size = sizeof(int64_t),
                         .nparts = NPARTS, .partition = pod_part_be64};
    if (!(placed = pod_table_create(db, &def, err, errlen))) return -1;
    static const enum pod_type one_i64[] = {POD_T_I64};
    const pod_proc_def procs[] = {
        {"place.where", where, NULL, 0, NULL, true},
        {"place.owner", owner, NULL, 1, one_i64, true},
        {"place.load", load, NULL, 1, one_i64, false},
    };
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++)
        if (pod_proc_register(db, &procs[i], err, errlen) < 0) return -1;
    return 0;
}
