/* Deliberate damage for the benchmark tests: each procedure breaks one
 * invariant that `poddb-bench --check` must then report.
 *   test.corrupt_tpcc(w, d, delta)      D_YTD of district (w, d) += delta:
 *                                       TPC-C consistency condition 1
 *   test.corrupt_ycsb(id, delta)        column f0's counter of tuple id += delta
 *   test.corrupt_smallbank(id, delta)   checking balance of account id += delta
 * The workloads' tables are created after modules load, so they are looked
 * up at call time. Built as build/test/modules/bench_corrupt.so. */
#include "poddb/proc.h"
#include "workloads/smallbank/smallbank.h"
#include "workloads/tpcc/tpcc.h"
#include "workloads/ycsb/ycsb.h"

static int table(pod_txn *tx, const char *name, pod_table **out)
{
    if (!(*out = pod_table_find(pod_txn_db(tx), name)))
        return pod_txn_fail(tx, POD_E_INVALID, "no table %s (is the workload configured?)", name);
    return POD_OK;
}

static int must(pod_txn *tx, int rc, const char *what)
{
    if (rc < 0) return rc;
    if (rc != POD_OK) return pod_txn_fail(tx, POD_E_INVALID, "%s: %s", what, pod_status_name(rc));
    return POD_OK;
}

static int corrupt_tpcc(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    (void)ctx;
    pod_table *t;
    POD_TRY(table(tx, "district", &t));
    unsigned char k[TPCC_K_DISTRICT];
    tpcc_k_district(k, (uint32_t)a->v[0].u.i64, (uint32_t)a->v[1].u.i64);
    struct tpcc_district d;
    POD_TRY(must(tx, pod_get_for_update(tx, t, k, &d), "district"));
    d.d_ytd += a->v[2].u.i64;
    return must(tx, pod_put(tx, t, k, &d), "district");
}

static int corrupt_ycsb(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    (void)ctx;
    pod_table *t;
    POD_TRY(table(tx, "usertable", &t));
    unsigned char k[YCSB_KEY_SIZE];
    pod_key_u64(k, (uint64_t)a->v[0].u.i64);
    struct ycsb_tuple tu;
    POD_TRY(must(tx, pod_get_for_update(tx, t, k, &tu), "usertable"));
    int64_t c = ycsb_col_counter(&tu, 0) + a->v[1].u.i64;
    memcpy(tu.col[0], &c, sizeof c);
    return must(tx, pod_put(tx, t, k, &tu), "usertable");
}

static int corrupt_smallbank(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    (void)ctx;
    pod_table *t;
    POD_TRY(table(tx, "checking", &t));
    unsigned char k[SB_KEY_SIZE];
    pod_key_u64(k, (uint64_t)a->v[0].u.i64);
    struct sb_balance b;
    POD_TRY(must(tx, pod_get_for_update(tx, t, k, &b), "checking"));
    b.bal += a->v[1].u.i64;
    return must(tx, pod_put(tx, t, k, &b), "checking");
}

int poddb_module_init(pod_db *db, char *err, size_t errlen)
{
    static const enum pod_type i64s[3] = {POD_T_I64, POD_T_I64, POD_T_I64};
    const pod_proc_def defs[] = {
        {"test.corrupt_tpcc", corrupt_tpcc, NULL, 3, i64s, false},
        {"test.corrupt_ycsb", corrupt_ycsb, NULL, 2, i64s, false},
        {"test.corrupt_smallbank", corrupt_smallbank, NULL, 2, i64s, false},
    };
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
        if (pod_proc_register(db, &defs[i], err, errlen) < 0) return -1;
    return 0;
}
