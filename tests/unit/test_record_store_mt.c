/* The record-store seam (src/store/record_store.h): the array store passes
 * what every store must do (helpers/rs_conformance.h: index, record word
 * from several threads, rows, batches), and rs-2pl refuses clearly what a
 * store without an ordered index cannot serve (scans, next-key locking)
 * while its point operations run. Built with ThreadSanitizer by make tsan. */
#include <check.h>
#include <string.h>

#include "engine/db.h"
#include "engine/result.h"
#include "engine/worker.h"
#include "helpers/rs_conformance.h"
#include "helpers/testutil.h"

START_TEST(array_store_conforms)
{
    pod_err e;
    struct record_store *s = rs_array_new(&e);
    ck_assert_msg(s, "%s", e.msg);
    ck_assert(s->ops->ordered);
    rs_conformance(s);
    s->ops->destroy(s);
}
END_TEST

/* The array store with its index called unordered: a hash-only store. */
static struct rs_ops hash_only;
static struct record_store *hash_only_store(void)
{
    pod_err e;
    struct record_store *s = rs_array_new(&e);
    ck_assert_msg(s, "%s", e.msg);
    hash_only = *s->ops;
    hash_only.name = "hash-only";
    hash_only.ordered = false;
    s->ops = &hash_only;
    return s;
}

static pod_db *db_on(struct record_store *s, bool phantom)
{
    char err[256];
    pod_db *db = pod_db_new(&(struct pod_db_options){.nworkers = 1, .host_id = 0, .nhosts = 1,
                                                     .phantom_protection = phantom,
                                                     .store = POD_STORE_GIVEN,
                                                     .given_store = s},
                            err, sizeof err);
    ck_assert_msg(db, "pod_db_new: %s", err);
    return db;
}

static pod_table *table_of(pod_db *db, char *err, size_t errlen)
{
    return pod_table_create(db, &(pod_table_def){.name = "t", .key_size = 8, .tuple_size = 8},
                            err, errlen);
}

static int p_point(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)a, (void)res;
    pod_table *t = ctx;
    unsigned char k[8];
    int64_t v = 41, got = 0;
    rsc_key(k, 7);
    POD_TRY(pod_insert(tx, t, k, &v));
    v = 42;
    POD_TRY(pod_put(tx, t, k, &v));
    POD_TRY(pod_get(tx, t, k, &got));
    if (got != 42) return pod_txn_fail(tx, POD_E_INTERNAL, "read %lld", (long long)got);
    rsc_key(k, 8);
    int rc = pod_get(tx, t, k, &got);
    return rc == POD_NOT_FOUND ? POD_OK : pod_txn_fail(tx, POD_E_INTERNAL, "missing key: %d", rc);
}

static bool count_row(void *arg, const void *key, const void *tuple)
{
    (void)key, (void)tuple;
    ++*(int *)arg;
    return true;
}

static int p_scan(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)a, (void)res;
    int n = 0;
    unsigned char lo[8], hi[8];
    rsc_key(lo, 0);
    rsc_key(hi, 100);
    return pod_scan(tx, ctx, lo, hi, 0, 0, count_row, &n);
}

START_TEST(unordered_store_refuses_scans)
{
    char err[256];
    /* Next-key locking needs neighbours: refused at table creation. */
    pod_db *db = db_on(hash_only_store(), true);
    ck_assert_ptr_null(table_of(db, err, sizeof err));
    ck_assert_msg(strstr(err, "hash-only") && strstr(err, "ordered index") &&
                      strstr(err, "phantom_protection"),
                  "%s", err);
    pod_db_free(db);
    /* Without it: point operations run, a scan is refused by name. */
    db = db_on(hash_only_store(), false);
    pod_table *t = table_of(db, err, sizeof err);
    ck_assert_msg(t, "%s", err);
    int point = pod_proc_register(db, &(pod_proc_def){.name = "point", .fn = p_point, .ctx = t},
                                  err, sizeof err);
    int scan = pod_proc_register(db, &(pod_proc_def){.name = "scan", .fn = p_scan, .ctx = t}, err,
                                 sizeof err);
    ck_assert(point >= 0 && scan >= 0);
    pod_result *res = pod_result_new();
    struct pod_worker *w = pod_admin_begin(db);
    char msg[512];
    int rc = pod_call(w, point, &(pod_args){0, NULL}, res, msg, sizeof msg);
    ck_assert_msg(rc == POD_OK, "point: %d %s", rc, msg);
    rc = pod_call(w, scan, &(pod_args){0, NULL}, res, msg, sizeof msg);
    ck_assert_int_eq(rc, POD_E_INVALID);
    ck_assert_msg(strstr(msg, "hash-only") && strstr(msg, "no scans"), "%s", msg);
    pod_admin_end(db);
    pod_result_free(res);
    pod_db_free(db);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("record_store");
    TCase *tc = tu_tcase(s, "store", 60);
    tcase_add_test(tc, array_store_conforms);
    tcase_add_test(tc, unordered_store_refuses_scans);
    return tu_run(s);
}
