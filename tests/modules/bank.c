/* A bank for the crash test (tests/unit/test_crash_mp.c): accounts with
 * balances, transfers that move money and record themselves, and accounts
 * that are "parked" (deleted from accounts, inserted into parking) and back,
 * so that keys are deleted and inserted again, often within one epoch.
 *
 * Every table has one partition per host (pod_part_be64: key % nparts), and
 * host h's client only uses keys with key % nhosts == h, so each host's data
 * lives in partitions it owns.
 *
 *   bank.init(host, n, initial)          accounts host + nhosts*i, i < n
 *   bank.transfer(from, to, amount, txid) -> ok, or user abort (parked or short)
 *   bank.park(acct), bank.unpark(acct)   -> ok, or user abort
 *   bank.dump(host) -> rows ["A", id, balance], ["P", id, balance],
 *                           ["T", txid, from, to, amount] of the host's partitions */
#include "poddb/proc.h"

static pod_table *accounts, *parking, *transfers;
static uint32_t nparts;

struct xfer {
    int64_t from, to, amount;
};

static void key(unsigned char k[8], int64_t v) { pod_key_u64(k, (uint64_t)v); }

static int init(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    int64_t host = a->v[0].u.i64, n = a->v[1].u.i64, initial = a->v[2].u.i64, made = 0;
    for (int64_t i = 0; i < n; i++) {
        unsigned char k[8];
        key(k, host + (int64_t)nparts * i);
        int rc = pod_insert(tx, accounts, k, &initial);
        if (rc < 0) return rc;
        made += rc == POD_OK;
    }
    pod_result_i64(res, made);
    return POD_OK;
}

static int transfer(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    (void)res;
    struct xfer x = {a->v[0].u.i64, a->v[1].u.i64, a->v[2].u.i64};
    if (x.from == x.to) return pod_txn_fail(tx, POD_E_INVALID, "a transfer to the same account");
    unsigned char kf[8], kt[8], kx[8];
    key(kf, x.from);
    key(kt, x.to);
    key(kx, a->v[3].u.i64);
    int64_t bf, bt;
    int rc = pod_get_for_update(tx, accounts, kf, &bf);
    if (rc < 0) return rc;
    if (rc == POD_NOT_FOUND) return pod_txn_fail(tx, POD_USER_ABORT, "account parked");
    if ((rc = pod_get_for_update(tx, accounts, kt, &bt)) < 0) return rc;
    if (rc == POD_NOT_FOUND) return pod_txn_fail(tx, POD_USER_ABORT, "account parked");
    if (bf < x.amount) return pod_txn_fail(tx, POD_USER_ABORT, "insufficient funds");
    bf -= x.amount;
    bt += x.amount;
    POD_TRY(pod_put(tx, accounts, kf, &bf));
    POD_TRY(pod_put(tx, accounts, kt, &bt));
    if ((rc = pod_insert(tx, transfers, kx, &x)) < 0) return rc;
    if (rc == POD_EXISTS) return pod_txn_fail(tx, POD_E_INVALID, "transfer id used twice");
    return POD_OK;
}

/* Move acct's row from `from` to `to` (delete + insert). */
static int move(pod_txn *tx, pod_table *from, pod_table *to, int64_t acct)
{
    unsigned char k[8];
    key(k, acct);
    int64_t b;
    int rc = pod_get_for_update(tx, from, k, &b);
    if (rc < 0) return rc;
    if (rc == POD_NOT_FOUND) return pod_txn_fail(tx, POD_USER_ABORT, "not there");
    POD_TRY(pod_delete(tx, from, k));
    if ((rc = pod_insert(tx, to, k, &b)) < 0) return rc;
    if (rc == POD_EXISTS) return pod_txn_fail(tx, POD_E_INVALID, "account in both tables");
    return POD_OK;
}

static int park(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    (void)res;
    return move(tx, accounts, parking, a->v[0].u.i64);
}

static int unpark(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    (void)res;
    return move(tx, parking, accounts, a->v[0].u.i64);
}

struct dump_ctx {
    pod_result *res;
    const char *tag;
    int rows;
};

static bool dump_row(void *arg, const void *k, const void *tuple)
{
    struct dump_ctx *d = arg;
    if (d->rows++) pod_result_row(d->res);
    pod_result_str(d->res, d->tag);
    pod_result_i64(d->res, (int64_t)pod_key_get_u64(k));
    if (d->tag[0] == 'T') {
        const struct xfer *x = tuple;
        pod_result_i64(d->res, x->from);
        pod_result_i64(d->res, x->to);
        pod_result_i64(d->res, x->amount);
    } else {
        pod_result_i64(d->res, *(const int64_t *)tuple);
    }
    return true;
}

static int dump(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    uint64_t host = (uint64_t)a->v[0].u.i64;
    unsigned char lo[8], hi[8];
    pod_key_u64(lo, host);
    pod_key_u64(hi, UINT64_MAX - (nparts - 1) + host); /* the largest key of this partition */
    struct dump_ctx d = {res, "A", 0};
    POD_TRY(pod_scan(tx, accounts, lo, hi, 0, 0, dump_row, &d));
    d.tag = "P";
    POD_TRY(pod_scan(tx, parking, lo, hi, 0, 0, dump_row, &d));
    d.tag = "T";
    POD_TRY(pod_scan(tx, transfers, lo, hi, 0, 0, dump_row, &d));
    return POD_OK;
}

int poddb_module_init(pod_db *db, char *err, size_t errlen)
{
    (void)db;
    /* The number of hosts is not part of the module API: the test runs
     * 2-host pods, and keys are spread by key % 2. */
    nparts = 2;
    pod_table_def acc = {.name = "bank_accounts", .key_size = 8, .tuple_size = sizeof(int64_t),
                         .nparts = nparts, .partition = pod_part_be64};
    pod_table_def par = {.name = "bank_parking", .key_size = 8, .tuple_size = sizeof(int64_t),
                         .nparts = nparts, .partition = pod_part_be64};
    pod_table_def trx = {.name = "bank_transfers", .key_size = 8, .tuple_size = sizeof(struct xfer),
                         .nparts = nparts, .partition = pod_part_be64};
    if (!(accounts = pod_table_create(db, &acc, err, errlen)) ||
        !(parking = pod_table_create(db, &par, err, errlen)) ||
        !(transfers = pod_table_create(db, &trx, err, errlen)))
        return -1;
    static const enum pod_type t1[] = {POD_T_I64}, t3[] = {POD_T_I64, POD_T_I64, POD_T_I64},
                               t4[] = {POD_T_I64, POD_T_I64, POD_T_I64, POD_T_I64};
    const pod_proc_def defs[] = {
        {"bank.init", init, NULL, 3, t3, false},
        {"bank.transfer", transfer, NULL, 4, t4, false},
        {"bank.park", park, NULL, 1, t1, false},
        {"bank.unpark", unpark, NULL, 1, t1, false},
        {"bank.dump", dump, NULL, 1, t1, true},
    };
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
        if (pod_proc_register(db, &defs[i], err, errlen) < 0) return -1;
    return 0;
}
