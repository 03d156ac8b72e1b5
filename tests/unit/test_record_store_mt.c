/* The record-store seam (src/store/record_store.h): the array store passes
 * what every store must do (helpers/rs_conformance.h: index, walk, record
 * word from several threads, rows, batches); over a store without an
 * ordered index rs-2pl refuses next-key locking clearly, runs point
 * operations, and serves scans by walking the index: ranges, reverse
 * order, limits, a transaction's own inserts and deletes, and audits
 * running beside transfers that always see the exact total (RS_MT_MS,
 * RS_MT_SEED), and so do ford and motor (snapshot audits); and a transaction of a thousand accesses finds each of its
 * own again. Built with ThreadSanitizer by make tsan. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "engine/db.h"
#include "engine/result.h"
#include "txn/cc.h"
#include "engine/worker.h"
#include "helpers/rs_conformance.h"
#include "helpers/testutil.h"
#include "util/clock.h"

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

static pod_db *db_with(struct record_store *s, bool phantom, int nworkers, enum pod_cc_kind cc)
{
    char err[256];
    pod_db *db = pod_db_new(&(struct pod_db_options){.nworkers = nworkers, .host_id = 0,
                                                     .nhosts = 1, .phantom_protection = phantom,
                                                     .store = POD_STORE_GIVEN,
                                                     .given_store = s, .cc = cc,
                                                     .versions = 2},
                            err, sizeof err);
    ck_assert_msg(db, "pod_db_new: %s", err);
    return db;
}

static pod_db *db_on(struct record_store *s, bool phantom, int nworkers)
{
    return db_with(s, phantom, nworkers, POD_CC_RS_2PL);
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
    rsc_key(k, 9);
    int rc = pod_get(tx, t, k, &got);
    return rc == POD_NOT_FOUND ? POD_OK : pod_txn_fail(tx, POD_E_INTERNAL, "missing key: %d", rc);
}

/* ---- scans over a store without an ordered index (a walk, sorted) ---- */

#define NKEYS 40
#define INITIAL 100

/* scan(lo, hi, limit, reverse) -> rows, sum, 1 if the keys came in order */
struct seen {
    int rows;
    int64_t sum;
    bool ordered, reverse;
    uint64_t last;
};

static bool see_row(void *arg, const void *key, const void *tuple)
{
    struct seen *s = arg;
    uint64_t k = pod_key_get_u64(key);
    int64_t v;
    memcpy(&v, tuple, sizeof v);
    if (s->rows && (s->reverse ? k >= s->last : k <= s->last)) s->ordered = false;
    s->last = k;
    s->rows++;
    s->sum += v;
    return true;
}

static int p_scan(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    unsigned char lo[8], hi[8];
    rsc_key(lo, (uint64_t)a->v[0].u.i64);
    rsc_key(hi, (uint64_t)a->v[1].u.i64);
    bool reverse = a->v[3].u.i64 != 0;
    struct seen s = {.ordered = true, .reverse = reverse};
    POD_TRY(pod_scan(tx, ctx, lo, hi, (uint32_t)a->v[2].u.i64, reverse ? POD_SCAN_REVERSE : 0,
                     see_row, &s));
    pod_result_i64(res, s.rows);
    pod_result_i64(res, s.sum);
    pod_result_i64(res, s.ordered);
    return POD_OK;
}

/* load(): keys 0, 2, 4, ... of INITIAL each */
static int p_load(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)a, (void)res;
    for (uint64_t i = 0; i < NKEYS; i++) {
        unsigned char k[8];
        int64_t v = INITIAL;
        rsc_key(k, 2 * i);
        POD_TRY(pod_insert(tx, ctx, k, &v));
    }
    return POD_OK;
}

/* own(): inside one transaction, a scan sees its own insert and not its
 * own delete */
static int p_own(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)a, (void)res;
    unsigned char k[8], lo[8], hi[8];
    int64_t v = 5;
    rsc_key(k, 3);
    POD_TRY(pod_insert(tx, ctx, k, &v));
    rsc_key(k, 4);
    POD_TRY(pod_delete(tx, ctx, k));
    rsc_key(lo, 0);
    rsc_key(hi, 6);
    struct seen s = {.ordered = true};
    POD_TRY(pod_scan(tx, ctx, lo, hi, 0, 0, see_row, &s));
    /* 0, 2, 3 (ours), 6; not 4 (deleted by us) */
    if (s.rows != 4 || s.sum != 3 * INITIAL + 5 || !s.ordered)
        return pod_txn_fail(tx, POD_E_INTERNAL, "own scan: %d rows, sum %lld", s.rows,
                            (long long)s.sum);
    return POD_USER_ABORT;
}

/* sum(): every row the audits expect, read by key: rows, sum, 1 */
static int p_sum(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)a;
    int64_t rows = 0, sum = 0, v;
    unsigned char k[8];
    for (uint64_t i = 0; i < 2 * NKEYS; i++) { /* no miss: a miss is validated */
        if (i % 2 && i != 7) continue;
        rsc_key(k, i);
        int rc = pod_get(tx, ctx, k, &v);
        if (rc == POD_NOT_FOUND) continue;
        POD_TRY(rc);
        rows++;
        sum += v;
    }
    pod_result_i64(res, rows);
    pod_result_i64(res, sum);
    pod_result_i64(res, 1);
    return POD_OK;
}

/* move(from, to, amount): between two keys */
static int p_move(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    unsigned char kf[8], kt[8];
    int64_t f, t;
    rsc_key(kf, (uint64_t)a->v[0].u.i64);
    rsc_key(kt, (uint64_t)a->v[1].u.i64);
    POD_TRY(pod_get_for_update(tx, ctx, kf, &f));
    POD_TRY(pod_get_for_update(tx, ctx, kt, &t));
    f -= a->v[2].u.i64;
    t += a->v[2].u.i64;
    POD_TRY(pod_put(tx, ctx, kf, &f));
    POD_TRY(pod_put(tx, ctx, kt, &t));
    return POD_OK;
}

struct unordered_run {
    int scan, sum, move;
    uint64_t deadline_ns, seed;
    uint64_t audits[3], moves; /* audits: by scan, by reverse scan, by key */
};

static void scan_call(struct pod_worker *w, int proc, int64_t lo, int64_t hi, int64_t limit,
                      int64_t reverse, int64_t out[3])
{
    pod_value v[4] = {pod_v_i64(lo), pod_v_i64(hi), pod_v_i64(limit), pod_v_i64(reverse)};
    pod_result *res = pod_result_new();
    char msg[512];
    int rc = pod_call(w, proc, &(pod_args){4, v}, res, msg, sizeof msg);
    out[0] = -1;
    if (rc != POD_OK) {
        tu_fail("scan: %d %s", rc, msg);
    } else {
        for (int i = 0; i < 3; i++) {
            pod_value r;
            pod_result_get(res, 0, (uint32_t)i, &r);
            out[i] = r.u.i64;
        }
    }
    pod_result_free(res);
}

/* Worker 0 moves money between random even keys, and audits now and then;
 * the others audit the whole table (forward and reverse): every audit
 * sees the exact total, the keys in order. */
static void unordered_body(struct pod_worker *w, void *arg)
{
    struct unordered_run *r = arg;
    uint64_t rng = r->seed + (uint64_t)pod_worker_id(w) * 7919;
    char msg[512];
    pod_result *res = pod_result_new();
    while (pod_mono_ns() < r->deadline_ns && !tu_failed()) {
        uint64_t x = pod_rand(&rng);
        if (pod_worker_id(w) == 0 && x % 4) {
            int64_t from = 2 * (int64_t)(x % NKEYS), to = 2 * (int64_t)((x >> 8) % NKEYS);
            if (from == to) continue;
            pod_value v[3] = {pod_v_i64(from), pod_v_i64(to), pod_v_i64((int64_t)(x >> 16) % 7)};
            int rc = pod_call(w, r->move, &(pod_args){3, v}, res, msg, sizeof msg);
            if (rc == POD_OK) r->moves++; /* worker 0's alone */
            else if (rc != POD_E_RETRIES) tu_fail("move: %d %s", rc, msg);
            continue;
        }
        int64_t out[3];
        bool by_key = x & 2, reverse = !by_key && (x & 1);
        if (by_key) /* what motor reads as a snapshot, without validation */
            scan_call(w, r->sum, 0, 0, 0, 0, out);
        else
            scan_call(w, r->scan, 0, 2 * NKEYS, 0, reverse, out);
        if (out[0] < 0) break;
        /* the even keys and point's key 7 (42) */
        if (out[0] != NKEYS + 1 || out[1] != NKEYS * INITIAL + 42 || !out[2])
            tu_fail("audit: %lld rows, total %lld, in order %lld", (long long)out[0],
                    (long long)out[1], (long long)out[2]);
        __atomic_fetch_add(&r->audits[by_key ? 2 : reverse], 1, __ATOMIC_RELAXED);
    }
    pod_result_free(res);
}

/* Over a hash-only store under protocol cc (2 workers): point operations,
 * scans by walking the index, a transaction's own inserts and deletes, then
 * audits beside moves that always see the exact total. */
static void scans_and_audits(enum pod_cc_kind cc, const char *name)
{
    char err[256];
    pod_db *db = db_with(hash_only_store(), false, 2, cc);
    ck_assert_str_eq(db->cc->name, name);
    pod_table *t = table_of(db, err, sizeof err);
    ck_assert_msg(t, "%s", err);
    static const enum pod_type i4[] = {POD_T_I64, POD_T_I64, POD_T_I64, POD_T_I64};
    int point = pod_proc_register(db, &(pod_proc_def){.name = "point", .fn = p_point, .ctx = t},
                                  err, sizeof err);
    int scan = pod_proc_register(db, &(pod_proc_def){.name = "scan", .fn = p_scan, .ctx = t,
                                                     .nargs = 4, .arg_types = i4},
                                 err, sizeof err);
    int load = pod_proc_register(db, &(pod_proc_def){.name = "load", .fn = p_load, .ctx = t}, err,
                                 sizeof err);
    int own = pod_proc_register(db, &(pod_proc_def){.name = "own", .fn = p_own, .ctx = t}, err,
                                sizeof err);
    int move = pod_proc_register(db, &(pod_proc_def){.name = "move", .fn = p_move, .ctx = t,
                                                     .nargs = 3, .arg_types = i4},
                                 err, sizeof err);
    int sum = pod_proc_register(db, &(pod_proc_def){.name = "sum", .fn = p_sum, .ctx = t,
                                                    .nargs = 4, .arg_types = i4},
                                err, sizeof err);
    ck_assert(point >= 0 && scan >= 0 && load >= 0 && own >= 0 && move >= 0 && sum >= 0);
    pod_result *res = pod_result_new();
    struct pod_worker *w = pod_admin_begin(db);
    char msg[512];
    ck_assert_int_eq(pod_call(w, load, &(pod_args){0, NULL}, res, msg, sizeof msg), POD_OK);
    int rc = pod_call(w, point, &(pod_args){0, NULL}, res, msg, sizeof msg); /* adds key 7 */
    ck_assert_msg(rc == POD_OK, "point: %d %s", rc, msg);
    int64_t out[3];
    /* 10..30: the even keys 10..30 (11) */
    scan_call(w, scan, 10, 30, 0, 0, out);
    ck_assert_int_eq(out[0], 11);
    ck_assert_int_eq(out[1], 11 * INITIAL);
    ck_assert_int_eq(out[2], 1);
    scan_call(w, scan, 10, 30, 0, 1, out); /* reverse: descending */
    ck_assert_int_eq(out[0], 11);
    ck_assert_int_eq(out[2], 1);
    scan_call(w, scan, 0, 1000, 5, 0, out); /* a limit */
    ck_assert_int_eq(out[0], 5);
    scan_call(w, scan, 6, 8, 0, 0, out); /* 6, 7 (point's, 42), 8 */
    ck_assert_int_eq(out[0], 3);
    ck_assert_int_eq(out[1], 2 * INITIAL + 42);
    scan_call(w, scan, 81, 1000, 0, 0, out); /* past the last key */
    ck_assert_int_eq(out[0], 0);
    ck_assert_msg(!tu_failed(), "%s", tu_failure());
    rc = pod_call(w, own, &(pod_args){0, NULL}, res, msg, sizeof msg);
    ck_assert_msg(rc == POD_USER_ABORT, "own: %d %s", rc, msg);
    pod_admin_end(db);
    pod_result_free(res);

    /* Concurrent: moves and audits. */
    tu_fail_reset();
    struct unordered_run r = {.scan = scan, .sum = sum, .move = move,
                              .seed = tu_env_seed("RS_MT_SEED")};
    int ms = tu_env_ms("RS_MT_MS", TU_TSAN_OR(800, 1500));
    r.deadline_ns = pod_mono_ns() + (uint64_t)ms * 1000000ull;
    tu_run_workers(db, unordered_body, &r, r.seed);
    fprintf(stderr,
            "%s: unordered scans: %d ms, %llu audits forward, %llu reverse, %llu by key, "
            "%llu moves\n",
            name, ms, (unsigned long long)r.audits[0], (unsigned long long)r.audits[1],
            (unsigned long long)r.audits[2], (unsigned long long)r.moves);
    ck_assert_msg(!tu_failed(), "%s: %s", name, tu_failure());
    ck_assert_uint_gt(r.audits[0] + r.audits[1], 0);
    ck_assert_uint_gt(r.audits[2], 0);
    ck_assert_uint_gt(r.moves, 0);
    pod_db_free(db);
}

START_TEST(unordered_store_scans)
{
    char err[256];
    /* Next-key locking needs neighbours: refused at table creation. */
    pod_db *db = db_on(hash_only_store(), true, 1);
    ck_assert_ptr_null(table_of(db, err, sizeof err));
    ck_assert_msg(strstr(err, "hash-only") && strstr(err, "ordered index") &&
                      strstr(err, "phantom_protection"),
                  "%s", err);
    pod_db_free(db);
    scans_and_audits(POD_CC_RS_2PL, "rs-2pl");
}
END_TEST

/* The optimistic protocols: ford validates its audits' reads; motor's
 * audits read a snapshot (two versions a record) and commit without
 * validation, so a torn or inconsistent snapshot would show as a wrong
 * total; lotus locks every key first, in the lock table its workers
 * share (a store of one user). */
START_TEST(optimistic_scans)
{
    scans_and_audits(POD_CC_FORD, "ford");
    scans_and_audits(POD_CC_MOTOR, "motor");
    scans_and_audits(POD_CC_LOTUS, "lotus");
}
END_TEST

/* many(): a transaction past the access set's linear search: it reads
 * every even key, inserts odd ones between them (their next keys are its
 * own, upgraded and downgraded) and five after the last (each insert's
 * instant lock on the next key, the sentinel, taken and given back: an
 * access dropped from the index), then finds every key it touched again
 * and updates it: each lookup must find its own access. */
static int p_many(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)a, (void)res;
    unsigned char k[8];
    int64_t v;
    for (uint64_t i = 0; i < NKEYS; i++) {
        rsc_key(k, 2 * i);
        POD_TRY(pod_get(tx, ctx, k, &v));
    }
    for (uint64_t i = 0; i < 15; i++) {
        rsc_key(k, i < 10 ? 2 * i + 1 : 976 + i); /* 986..990, ascending */
        v = 1;
        POD_TRY(pod_insert(tx, ctx, k, &v));
    }
    for (uint64_t i = 0; i < 1000; i++) {
        rsc_key(k, i);
        int rc = pod_get(tx, ctx, k, &v);
        bool ours = (i < 2 * NKEYS && (i % 2 == 0 || i < 20)) || (i >= 986 && i <= 990);
        if (rc != (ours ? POD_OK : POD_NOT_FOUND))
            return pod_txn_fail(tx, POD_E_INTERNAL, "key %llu: %d", (unsigned long long)i, rc);
        if (rc == POD_OK) {
            v += 1;
            POD_TRY(pod_put(tx, ctx, k, &v));
        }
    }
    return POD_OK;
}

START_TEST(long_transaction)
{
    char err[256];
    pod_err e;
    struct record_store *rs = rs_array_new(&e);
    ck_assert_msg(rs, "%s", e.msg);
    pod_db *db = db_on(rs, true, 1);
    pod_table *t = table_of(db, err, sizeof err);
    ck_assert_msg(t, "%s", err);
    int load = pod_proc_register(db, &(pod_proc_def){.name = "load", .fn = p_load, .ctx = t}, err,
                                 sizeof err);
    int many = pod_proc_register(db, &(pod_proc_def){.name = "many", .fn = p_many, .ctx = t}, err,
                                 sizeof err);
    static const enum pod_type i4[] = {POD_T_I64, POD_T_I64, POD_T_I64, POD_T_I64};
    int scan = pod_proc_register(db, &(pod_proc_def){.name = "scan", .fn = p_scan, .ctx = t,
                                                     .nargs = 4, .arg_types = i4},
                                 err, sizeof err);
    ck_assert(load >= 0 && many >= 0 && scan >= 0);
    pod_result *res = pod_result_new();
    struct pod_worker *w = pod_admin_begin(db);
    char msg[512];
    ck_assert_int_eq(pod_call(w, load, &(pod_args){0, NULL}, res, msg, sizeof msg), POD_OK);
    int rc = pod_call(w, many, &(pod_args){0, NULL}, res, msg, sizeof msg);
    ck_assert_msg(rc == POD_OK, "many: %d %s", rc, msg);
    int64_t out[3];
    scan_call(w, scan, 0, 1000, 0, 0, out);
    ck_assert_msg(!tu_failed(), "%s", tu_failure());
    /* NKEYS even keys of INITIAL + 1, fifteen inserted of 2 */
    ck_assert_int_eq(out[0], NKEYS + 15);
    ck_assert_int_eq(out[1], NKEYS * (INITIAL + 1) + 15 * 2);
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
    tcase_add_test(tc, unordered_store_scans);
    tcase_add_test(tc, optimistic_scans);
    tcase_add_test(tc, long_transaction);
    return tu_run(s);
}
