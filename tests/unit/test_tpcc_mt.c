/* TPC-C on one host (workloads/tpcc): load, the standard mix with remote
 * knobs 10/15 on 3 worker threads, consistency conditions 1-4; also built
 * with ThreadSanitizer by make tsan.
 *
 *  - tpcc_mix: 2 warehouses at small scale, 3 workers for TPCC_MT_MS ms
 *    (default 3000) or a bounded number of calls each, then the checker must
 *    pass, every transaction type must have committed, NewOrder's user aborts
 *    must be ~1%, and the workers' own counts must agree with the engine's
 *    statistics (printed with pod_db_print_stats);
 *  - single: by-name selection picks the middle customer, a NewOrder with an
 *    invalid item rolls back without a trace, a Delivery empties the oldest
 *    NEW_ORDER of each district;
 *  - corrupt: one district's D_YTD changed by an admin procedure makes the
 *    checker report condition 1 for that warehouse and district;
 *  - names_overflow: reading by key, a last name with more customers than
 *    a customer_name_list row holds fails the loader, naming it.
 * mix and single run twice: range reads by scans (the default here: the
 * engine's index is ordered) and by key (tpcc.range_reads point, the way of
 * the dm mode's hash index), each with its own tables.
 * TPCC_MT_SEED=N fixes the seed. */
#include <check.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "poddb/proc.h"
#include "engine/db.h"
#include "engine/result.h"
#include "engine/worker.h"
#include "workloads/tpcc/tpcc.h"
#include "util/clock.h"
#include "helpers/testutil.h"

#define NWORKERS 3
#define MAX_CALLS_PER_WORKER 200000

static uint64_t seed(void) { return tu_env_seed("TPCC_MT_SEED"); }

static int run_ms(void) { return tu_env_ms("TPCC_MT_MS", 3000); }

/* point: range reads by key (else the default: scans on this ordered index). */
static void small_config(struct tpcc_config *c, uint32_t warehouses, bool point)
{
    /* items 100000 -> 1000, customers (and initial orders) per district 3000 -> 90:
     * 30 last names, ~3 customers each, 27 NEW_ORDER rows per district. */
    tpcc_config_scaled(c, warehouses, 1000, 90);
    c->range_reads = point ? TPCC_RANGE_POINT : TPCC_RANGE_AUTO;
}

static pod_db *tpcc_db(const struct tpcc_config *cfg, int nworkers)
{
    char err[256];
    pod_db *db = tu_db_new(nworkers);
    ck_assert_msg(tpcc_register(db, cfg, err, sizeof err) == 0, "tpcc_register: %s", err);
    const struct tpcc *t = tpcc_get(db);
    ck_assert_int_eq(t->point, cfg->range_reads == TPCC_RANGE_POINT);
    for (int i = 0; i < TPCC_NTABLES; i++) ck_assert_int_eq(t->t[i] != NULL, tpcc_table_used(t, i));
    struct tu_progress pr = {0};
    uint64_t t0 = pod_mono_ns();
    ck_assert_msg(tpcc_load(db, cfg, tu_progress, &pr, err, sizeof err) == 0, "tpcc_load: %s",
                  err);
    fprintf(stderr, "tpcc: loaded %u warehouses, %" PRIu64 " rows in %.2f s (%" PRIu64
            " progress calls)\n", cfg->warehouses, pr.rows, (double)(pod_mono_ns() - t0) / 1e9,
            pr.calls);
    ck_assert_uint_gt(pr.calls, 0);
    ck_assert_uint_gt(pr.rows, 0);
    char report[2048];
    ck_assert_msg(tpcc_check(db, cfg, report, sizeof report) == 0, "after load: %s", report);
    return db;
}

static void tpcc_db_free(pod_db *db)
{
    tpcc_free(db);
    pod_db_free(db);
}

static int admin_call(pod_db *db, const char *name, const pod_value *v, int n, pod_result *res,
                      char *msg, size_t msglen)
{
    int p = pod_proc_find(db, name);
    ck_assert_msg(p >= 0, "no procedure %s", name);
    pod_args args = {n, v};
    struct pod_worker *a = pod_admin_begin(db);
    int rc = pod_call(a, p, &args, res, msg, msglen);
    pod_admin_end(db);
    return rc;
}

static int64_t res_i64(const pod_result *res, int row, int col)
{
    pod_value v;
    ck_assert_int_eq(pod_result_get(res, row, col, &v), 0);
    ck_assert_int_eq(v.type, POD_T_I64);
    return v.u.i64;
}

/* ---- the standard mix ---------------------------------------------------------------- */

struct tally {
    uint64_t calls, ok, user_aborts, rollbacks_asked, remote;
};

struct run {
    pod_db *db;
    struct tpcc *t;
    struct tpcc_config cfg;
    uint64_t seed, deadline_ns;
    struct tally tl[NWORKERS][TPCC_NTXNS];
};

static void mix_body(struct pod_worker *w, void *arg)
{
    struct run *r = arg;
    struct tally *tl = r->tl[w->id];
    uint64_t rng = r->seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1));
    struct tpcc_gen g;
    tpcc_gen_init(&g, &r->cfg, (uint32_t)w->id + 1, r->seed);
    uint32_t home = (uint32_t)w->id % r->cfg.warehouses + 1;
    pod_result *res = pod_result_new();
    struct tpcc_call *call = malloc(sizeof *call);
    if (!res || !call) {
        tu_fail("worker %d: out of memory", w->id);
        free(call);
        pod_result_free(res);
        return;
    }
    for (int i = 0; i < MAX_CALLS_PER_WORKER && !tu_failed(); i++) {
        if ((i & 7) == 0 && pod_mono_ns() > r->deadline_ns) break;
        tpcc_next_call(&g, &rng, home, call);
        pod_args args = {call->nargs, call->args};
        char msg[256];
        int rc = pod_call(w, r->t->proc[call->txn], &args, res, msg, sizeof msg);
        struct tally *t = &tl[call->txn];
        t->calls++;
        t->rollbacks_asked += call->rollback;
        t->remote += call->remote;
        if (rc >= 0) {
            t->ok++;
            if (call->rollback) tu_fail("new_order with an invalid item committed");
        } else if (rc == POD_USER_ABORT) {
            t->user_aborts++;
            if (call->txn != TPCC_NEW_ORDER_TXN || !call->rollback)
                tu_fail("%s aborted unasked", tpcc_txn_names[call->txn]);
        } else {
            tu_fail("worker %d: %s: %s: %s", w->id, tpcc_txn_names[call->txn],
                    pod_status_name(rc), msg);
        }
    }
    free(call);
    pod_result_free(res);
}

START_TEST(tpcc_mix)
{
    tu_fail_reset();
    struct tpcc_config cfg;
    small_config(&cfg, 2, _i);
    pod_db *db = tpcc_db(&cfg, NWORKERS);
    struct run *r = calloc(1, sizeof *r);
    ck_assert_ptr_nonnull(r);
    r->db = db;
    r->t = tpcc_get(db);
    r->cfg = cfg;
    r->seed = seed();
    int ms = run_ms();
    uint64_t t0 = pod_mono_ns();
    r->deadline_ns = t0 + (uint64_t)ms * 1000000ull;
    fprintf(stderr, "tpcc: %u warehouses, %d workers, %d ms, remote %u/%u, range reads by %s, "
            "seed 0x%" PRIx64 "\n", cfg.warehouses, NWORKERS, ms, cfg.remote_new_order_pct,
            cfg.remote_payment_pct, _i ? "key" : "scans", r->seed);
    double secs = tu_run_workers(db, mix_body, r, r->seed);

    pod_db_print_stats(db, stderr);
    struct tally tot[TPCC_NTXNS] = {0};
    uint64_t all = 0;
    for (int i = 0; i < NWORKERS; i++)
        for (int x = 0; x < TPCC_NTXNS; x++) {
            tot[x].calls += r->tl[i][x].calls;
            tot[x].ok += r->tl[i][x].ok;
            tot[x].user_aborts += r->tl[i][x].user_aborts;
            tot[x].rollbacks_asked += r->tl[i][x].rollbacks_asked;
            tot[x].remote += r->tl[i][x].remote;
        }
    for (int x = 0; x < TPCC_NTXNS; x++) {
        struct pod_proc_stats st;
        pod_db_proc_stats(db, r->t->proc[x], &st);
        fprintf(stderr, "  %-18s calls %7" PRIu64 "  commits %7" PRIu64 "  user_aborts %5" PRIu64
                "  remote %6" PRIu64 "  conflicts %6" PRIu64 "\n", tpcc_txn_names[x],
                tot[x].calls, st.commits, st.user_aborts, tot[x].remote, st.conflicts);
        ck_assert_msg(st.commits > 0, "%s never committed", tpcc_txn_names[x]);
        ck_assert_uint_eq(st.commits, tot[x].ok);
        ck_assert_uint_eq(st.user_aborts, tot[x].user_aborts);
        ck_assert_uint_eq(st.errors, 0);
        ck_assert_uint_eq(st.gave_up, 0);
        all += tot[x].calls;
    }
    fprintf(stderr, "  %.2f s, %" PRIu64 " transactions (%.0f/s)\n", secs, all, (double)all / secs);
    /* The mix: NewOrder 45%, Payment 43%, the others 4% each (loose bounds). */
    if (all >= 2000) {
        ck_assert_uint_gt(tot[TPCC_NEW_ORDER_TXN].calls * 100, all * 40);
        ck_assert_uint_lt(tot[TPCC_NEW_ORDER_TXN].calls * 100, all * 50);
        ck_assert_uint_gt(tot[TPCC_PAYMENT].calls * 100, all * 38);
        ck_assert_uint_lt(tot[TPCC_PAYMENT].calls * 100, all * 48);
    }
    /* Remote shares with 2 warehouses: 10% of NewOrders, 15% of Payments. */
    ck_assert_uint_gt(tot[TPCC_NEW_ORDER_TXN].remote, 0);
    ck_assert_uint_gt(tot[TPCC_PAYMENT].remote, 0);
    /* NewOrder's 1% rollback: exactly the calls with an invalid item. */
    uint64_t no = tot[TPCC_NEW_ORDER_TXN].calls, ua = tot[TPCC_NEW_ORDER_TXN].user_aborts;
    ck_assert_uint_eq(ua, tot[TPCC_NEW_ORDER_TXN].rollbacks_asked);
    if (no >= 1000) {
        double rate = (double)ua / (double)no;
        ck_assert_msg(rate >= 0.002 && rate <= 0.03, "NewOrder user abort rate %.4f", rate);
    }
    char report[4096];
    ck_assert_msg(tpcc_check(db, &cfg, report, sizeof report) == 0, "seed 0x%" PRIx64 ": %s",
                  r->seed, report);
    free(r);
    tpcc_db_free(db);
}
END_TEST

/* customers(w, d): one row per customer: c_id, c_first, c_last. */
static bool cust_visit(void *arg, const void *key, const void *tuple)
{
    (void)key;
    pod_result *res = arg;
    struct tpcc_customer cu;
    memcpy(&cu, tuple, sizeof cu);
    if (pod_result_ncols(res, pod_result_nrows(res) - 1) > 0) pod_result_row(res);
    pod_result_i64(res, cu.c_id);
    pod_result_str(res, cu.c_first);
    pod_result_str(res, cu.c_last);
    return true;
}

static int p_customers(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct tpcc *t = ctx;
    unsigned char lo[TPCC_K_CUSTOMER], hi[TPCC_K_CUSTOMER];
    tpcc_k_customer(lo, (uint32_t)a->v[0].u.i64, (uint32_t)a->v[1].u.i64, 0);
    tpcc_k_customer(hi, (uint32_t)a->v[0].u.i64, (uint32_t)a->v[1].u.i64, UINT32_MAX);
    return pod_scan(tx, t->t[TPCC_CUSTOMER], lo, hi, 0, 0, cust_visit, res);
}

/* The spec's choice, recomputed from CUSTOMER: of the customers with last
 * name number `name`, sorted by C_FIRST, the one at position ceil(n/2). */
static int64_t middle_customer(pod_db *db, uint32_t w, uint32_t d, uint32_t name)
{
    char want[TPCC_LAST_LEN + 1], msg[256];
    tpcc_last_name(want, name);
    pod_result *res = pod_result_new();
    pod_value v[2] = {pod_v_i64(w), pod_v_i64(d)};
    ck_assert_int_eq(admin_call(db, "test.customers", v, 2, res, msg, sizeof msg), POD_OK);
    struct cand { char first[TPCC_FIRST_LEN + 1]; int64_t c; } cand[256];
    int n = 0;
    for (int row = 0; row < pod_result_nrows(res); row++) {
        pod_value f, l;
        ck_assert_int_eq(pod_result_get(res, row, 1, &f), 0);
        ck_assert_int_eq(pod_result_get(res, row, 2, &l), 0);
        if (l.len != strlen(want) || memcmp(l.u.bytes, want, l.len) != 0) continue;
        ck_assert_int_lt(n, 256);
        snprintf(cand[n].first, sizeof cand[n].first, "%.*s", (int)f.len, (const char *)f.u.bytes);
        cand[n].c = res_i64(res, row, 0);
        /* insertion sort by (c_first, c_id), the index's order */
        for (int j = n; j > 0; j--) {
            int cmp = strcmp(cand[j - 1].first, cand[j].first);
            if (cmp < 0 || (cmp == 0 && cand[j - 1].c < cand[j].c)) break;
            struct cand x = cand[j];
            cand[j] = cand[j - 1];
            cand[j - 1] = x;
        }
        n++;
    }
    pod_result_free(res);
    ck_assert_int_gt(n, 0);
    return cand[(n + 1) / 2 - 1].c;
}

/* set_last_order(w, d, c, o): customer c's CUSTOMER_LAST_ORDER := o (reading by key). */
static int p_set_last_order(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    struct tpcc *t = ctx;
    unsigned char k[TPCC_K_LAST_ORDER];
    tpcc_k_customer(k, (uint32_t)a->v[0].u.i64, (uint32_t)a->v[1].u.i64, (uint32_t)a->v[2].u.i64);
    struct tpcc_last_order lo = {(uint32_t)a->v[3].u.i64};
    return pod_put(tx, t->t[TPCC_LAST_ORDER], k, &lo);
}

/* ---- single calls ------------------------------------------------------------------------ */

/* StockLevel's distinct items, counted another way: every item of the last
 * 20 orders' lines marked in a bitmap (args w, d, items). */
struct marks {
    uint8_t *seen;
    int64_t distinct;
};

static bool mark_item(void *arg, const void *key, const void *tuple)
{
    (void)key;
    struct marks *m = arg;
    struct tpcc_order_line ol;
    memcpy(&ol, tuple, sizeof ol);
    if (!m->seen[ol.ol_i_id]) m->distinct++;
    m->seen[ol.ol_i_id] = 1;
    return true;
}

static int p_distinct_recent(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct tpcc *t = ctx;
    uint32_t w = (uint32_t)a->v[0].u.i64, d = (uint32_t)a->v[1].u.i64;
    unsigned char k[TPCC_K_ORDER_LINE], hi[TPCC_K_ORDER_LINE];
    struct tpcc_district di;
    tpcc_k_district(k, w, d);
    int rc = pod_get(tx, t->t[TPCC_DISTRICT], k, &di);
    if (rc != POD_OK) return rc < 0 ? rc : pod_txn_fail(tx, POD_E_INTERNAL, "no district");
    uint32_t next = di.d_next_o_id, from = next > 20 ? next - 20 : 1;
    tpcc_k_order_line(k, w, d, from, 0);
    tpcc_k_order_line(hi, w, d, next - 1, UINT32_MAX);
    struct marks m = {calloc((size_t)a->v[2].u.i64 + 1, 1), 0};
    if (!m.seen) return pod_txn_fail(tx, POD_E_NOMEM, "no memory");
    rc = pod_scan(tx, t->t[TPCC_ORDER_LINE], k, hi, 0, 0, mark_item, &m);
    free(m.seen);
    if (rc != POD_OK) return rc;
    pod_result_i64(res, m.distinct);
    return POD_OK;
}

START_TEST(tpcc_single)
{
    struct tpcc_config cfg;
    small_config(&cfg, 2, _i);
    pod_db *db = tpcc_db(&cfg, 1);
    pod_result *res = pod_result_new();
    char msg[256], err[256];
    static const enum pod_type i64s[3] = {POD_T_I64, POD_T_I64, POD_T_I64};
    ck_assert_msg(pod_proc_register(db, &(pod_proc_def){"test.customers", p_customers,
                                                        tpcc_get(db), 2, i64s, true},
                                    err, sizeof err) >= 0, "%s", err);
    ck_assert_msg(pod_proc_register(db, &(pod_proc_def){"test.distinct_recent", p_distinct_recent,
                                                        tpcc_get(db), 3, i64s, true},
                                    err, sizeof err) >= 0, "%s", err);

    /* By name: the middle one (ceil(n/2)) of the customers with that name,
     * sorted by C_FIRST; order_status and payment agree. */
    for (uint32_t name = 0; name < tpcc_last_names(&cfg); name++) {
        pod_value v[4] = {pod_v_i64(1), pod_v_i64(3), pod_v_i64(0), pod_v_i64(name)};
        ck_assert_int_eq(admin_call(db, "tpcc.order_status", v, 4, res, msg, sizeof msg), POD_OK);
        int64_t c = res_i64(res, 0, 0);
        ck_assert_int_gt(res_i64(res, 0, 2), 0);           /* the customer's last order */
        ck_assert_int_eq(pod_result_nrows(res), 1 + res_i64(res, 0, 4)); /* + its lines */
        ck_assert_int_eq(middle_customer(db, 1, 3, name), c);
        pod_value pv[8] = {pod_v_i64(1), pod_v_i64(3), pod_v_i64(1), pod_v_i64(3), pod_v_i64(0),
                           pod_v_i64(name), pod_v_i64(100), pod_v_i64((1ll << 50) + name)};
        ck_assert_int_eq(admin_call(db, "tpcc.payment", pv, 8, res, msg, sizeof msg), POD_OK);
        ck_assert_int_eq(res_i64(res, 0, 0), c);
    }

    /* An invalid item rolls the NewOrder back: D_NEXT_O_ID unchanged. */
    uint32_t lines[6 * 3];
    for (int i = 0; i < 6; i++) {
        lines[3 * i] = (uint32_t)i + 1;
        lines[3 * i + 1] = i == 2 ? 2 : 1;
        lines[3 * i + 2] = 5;
    }
    lines[3 * 5] = cfg.items + 1;
    pod_value nv[6] = {pod_v_i64(1), pod_v_i64(4), pod_v_i64(7), pod_v_i64(6),
                       pod_v_bytes(lines, sizeof lines), pod_v_i64(1)};
    ck_assert_int_eq(admin_call(db, "tpcc.new_order", nv, 6, res, msg, sizeof msg), POD_USER_ABORT);
    char report[2048];
    ck_assert_msg(tpcc_check(db, &cfg, report, sizeof report) == 0, "%s", report);
    lines[3 * 5] = 6;
    ck_assert_int_eq(admin_call(db, "tpcc.new_order", nv, 6, res, msg, sizeof msg), POD_OK);
    ck_assert_int_eq(res_i64(res, 0, 0), cfg.customers_per_district + 1);
    ck_assert_int_gt(res_i64(res, 0, 1), 0);
    /* Customer 7's latest order is the new one, with 6 undelivered lines. */
    pod_value ov[4] = {pod_v_i64(1), pod_v_i64(4), pod_v_i64(7), pod_v_i64(0)};
    ck_assert_int_eq(admin_call(db, "tpcc.order_status", ov, 4, res, msg, sizeof msg), POD_OK);
    ck_assert_int_eq(res_i64(res, 0, 2), cfg.customers_per_district + 1);
    ck_assert_int_eq(res_i64(res, 0, 3), 0);
    ck_assert_int_eq(pod_result_nrows(res), 7);
    ck_assert_int_eq(res_i64(res, 3, 1), 2); /* line 3's supply warehouse */
    ck_assert_int_eq(res_i64(res, 3, 4), 0); /* not delivered */

    /* Deliveries: every district has cfg.new_orders_per_district undelivered
     * orders (district 4 of warehouse 1 one more); each delivery takes one per
     * district until none is left. */
    uint32_t rounds = cfg.new_orders_per_district + 1;
    for (uint32_t i = 0; i < rounds; i++) {
        pod_value dv[3] = {pod_v_i64(1), pod_v_i64(3), pod_v_i64(1000 + i)};
        ck_assert_int_eq(admin_call(db, "tpcc.delivery", dv, 3, res, msg, sizeof msg), POD_OK);
        ck_assert_int_eq(res_i64(res, 0, 0), i + 1 < rounds ? TPCC_DISTRICTS : 1);
    }
    pod_value dv[3] = {pod_v_i64(1), pod_v_i64(3), pod_v_i64(5000)};
    ck_assert_int_eq(admin_call(db, "tpcc.delivery", dv, 3, res, msg, sizeof msg), POD_OK);
    ck_assert_int_eq(res_i64(res, 0, 0), 0);
    ck_assert_int_eq(admin_call(db, "tpcc.order_status", ov, 4, res, msg, sizeof msg), POD_OK);
    ck_assert_int_eq(res_i64(res, 0, 3), 3);   /* carrier */
    ck_assert_int_eq(res_i64(res, 3, 4), 1000 + rounds - 1); /* delivery date */
    pod_value sv[3] = {pod_v_i64(1), pod_v_i64(4), pod_v_i64(200)};
    ck_assert_int_eq(admin_call(db, "tpcc.stock_level", sv, 3, res, msg, sizeof msg), POD_OK);
    ck_assert_int_gt(res_i64(res, 0, 0), 0); /* every stock is below 200 */
    /* With a threshold above every quantity StockLevel counts the distinct
     * items of the last 20 orders: the same number a bitmap finds. */
    for (int64_t d = 1; d <= 10; d++) {
        pod_value all[3] = {pod_v_i64(1), pod_v_i64(d), pod_v_i64(INT32_MAX)};
        ck_assert_int_eq(admin_call(db, "tpcc.stock_level", all, 3, res, msg, sizeof msg), POD_OK);
        int64_t counted = res_i64(res, 0, 0);
        pod_value mv[3] = {pod_v_i64(1), pod_v_i64(d), pod_v_i64(cfg.items)};
        ck_assert_int_eq(admin_call(db, "test.distinct_recent", mv, 3, res, msg, sizeof msg),
                         POD_OK);
        ck_assert_int_gt(counted, 20); /* 20 orders of 5..15 lines over 1000 items */
        ck_assert_int_eq(counted, res_i64(res, 0, 0));
    }
    ck_assert_msg(tpcc_check(db, &cfg, report, sizeof report) == 0, "%s", report);
    if (_i) {
        /* Reading by key, the checker also finds a last order that is not the customer's. */
        static const enum pod_type i64s4[4] = {POD_T_I64, POD_T_I64, POD_T_I64, POD_T_I64};
        ck_assert_msg(pod_proc_register(db, &(pod_proc_def){"test.set_last_order",
                                                            p_set_last_order, tpcc_get(db), 4,
                                                            i64s4, false},
                                        err, sizeof err) >= 0, "%s", err);
        pod_value lv[4] = {pod_v_i64(2), pod_v_i64(5), pod_v_i64(9), pod_v_i64(1)};
        ck_assert_int_eq(admin_call(db, "test.set_last_order", lv, 4, res, msg, sizeof msg), POD_OK);
        ck_assert_int_eq(tpcc_check(db, &cfg, report, sizeof report), -1);
        ck_assert_msg(strstr(report, "the last order fails: warehouse 2 district 5 customer 9: "
                                     "customer_last_order names order 1, whose O_C_ID is "),
                      "%s", report);
    }
    pod_result_free(res);
    tpcc_db_free(db);
}
END_TEST

/* ---- the checker finds a corrupted district ------------------------------------------------ */

static int p_corrupt(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    struct tpcc *t = ctx;
    unsigned char k[TPCC_K_DISTRICT];
    tpcc_k_district(k, (uint32_t)a->v[0].u.i64, (uint32_t)a->v[1].u.i64);
    struct tpcc_district di;
    int rc = pod_get_for_update(tx, t->t[TPCC_DISTRICT], k, &di);
    if (rc != POD_OK) return rc < 0 ? rc : pod_txn_fail(tx, POD_E_INTERNAL, "no district");
    di.d_ytd += a->v[2].u.i64;
    return pod_put(tx, t->t[TPCC_DISTRICT], k, &di);
}

START_TEST(tpcc_corrupt)
{
    struct tpcc_config cfg;
    small_config(&cfg, 2, false);
    pod_db *db = tpcc_db(&cfg, 2);
    char err[256], msg[256], report[2048];
    static const enum pod_type i64s[3] = {POD_T_I64, POD_T_I64, POD_T_I64};
    ck_assert_msg(pod_proc_register(db, &(pod_proc_def){"test.corrupt_district", p_corrupt,
                                                        tpcc_get(db), 3, i64s, false},
                                    err, sizeof err) >= 0, "%s", err);
    pod_result *res = pod_result_new();
    pod_value v[3] = {pod_v_i64(2), pod_v_i64(7), pod_v_i64(123)};
    ck_assert_int_eq(admin_call(db, "test.corrupt_district", v, 3, res, msg, sizeof msg), POD_OK);
    ck_assert_int_eq(tpcc_check(db, &cfg, report, sizeof report), -1);
    fprintf(stderr, "tpcc corrupt: %s", report);
    ck_assert_msg(strstr(report, "condition 1 fails: warehouse 2 district 7:"), "%s", report);
    ck_assert_msg(!strstr(report, "warehouse 1"), "%s", report);
    ck_assert_msg(!strstr(report, "condition 2") && !strstr(report, "condition 3") &&
                  !strstr(report, "condition 4"), "%s", report);
    v[2] = pod_v_i64(-123);
    ck_assert_int_eq(admin_call(db, "test.corrupt_district", v, 3, res, msg, sizeof msg), POD_OK);
    ck_assert_msg(tpcc_check(db, &cfg, report, sizeof report) == 0, "%s", report);
    pod_result_free(res);
    tpcc_db_free(db);
}
END_TEST

/* ---- reading by key: a last name too common for its list ------------------------------------- */

START_TEST(tpcc_names_overflow)
{
    /* 6000 customers per district: 1000 names, 130 customers of the most
     * common one in district 1 of warehouse 1 (more than TPCC_NAME_CAP). */
    struct tpcc_config cfg;
    tpcc_config_scaled(&cfg, 1, 10, 6000);
    cfg.range_reads = TPCC_RANGE_POINT;
    char err[256], msg[256];
    pod_db *db = tu_db_new(1);
    ck_assert_msg(tpcc_register(db, &cfg, err, sizeof err) == 0, "tpcc_register: %s", err);
    pod_result *res = pod_result_new();
    pod_value v[2] = {pod_v_i64(1), pod_v_i64(1)};
    ck_assert_int_lt(admin_call(db, "tpcc.load_names", v, 2, res, msg, sizeof msg), 0);
    fprintf(stderr, "tpcc names overflow: %s\n", msg);
    ck_assert_msg(strstr(msg, "of district 1/1 are named") && strstr(msg, "more than the 127"),
                  "%s", msg);
    pod_result_free(res);
    tpcc_db_free(db);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tpcc_mt");
    TCase *single = tu_tcase(s, "single", 60);
    tcase_add_loop_test(single, tpcc_single, 0, 2);
    tcase_add_test(single, tpcc_corrupt);
    tcase_add_test(single, tpcc_names_overflow);
    TCase *mt = tu_tcase(s, "threads", 120);
    tcase_add_loop_test(mt, tpcc_mix, 0, 2);
    return tu_run(s);
}
