/* TPC-C consistency conditions 1-4 (spec 3.3.2.1-3.3.2.4), one read-only
 * transaction per warehouse ("tpcc.check_warehouse"), run through the admin
 * worker. Every district is read with scans inside its warehouse's partition. */
#include "workloads/tpcc/tpcc.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>


struct order_agg {
    int64_t n, max_o, sum_ol;
};

static bool order_visit(void *arg, const void *key, const void *tuple)
{
    (void)key;
    struct order_agg *g = arg;
    struct tpcc_order o;
    memcpy(&o, tuple, sizeof o);
    g->n++;
    if (o.o_id > g->max_o) g->max_o = o.o_id;
    g->sum_ol += o.o_ol_cnt;
    return true;
}

struct no_agg {
    int64_t n, min_o, max_o;
};

static bool no_visit(void *arg, const void *key, const void *tuple)
{
    (void)tuple;
    struct no_agg *g = arg;
    int64_t o = pod_key_get_u32((const unsigned char *)key + 8);
    if (!g->n || o < g->min_o) g->min_o = o;
    if (o > g->max_o) g->max_o = o;
    g->n++;
    return true;
}

static bool history_visit(void *arg, const void *key, const void *tuple)
{
    (void)key;
    struct tpcc_history h;
    memcpy(&h, tuple, sizeof h);
    *(int64_t *)arg += h.h_amount;
    return true;
}

static bool count_visit(void *arg, const void *key, const void *tuple)
{
    (void)key;
    (void)tuple;
    (*(int64_t *)arg)++;
    return true;
}

/* The engine keeps a transaction's locks in a list, so the checker keeps its
 * transactions small: W_YTD with the D_YTDs; per district the counters and
 * NEW_ORDER/HISTORY aggregates; ORDER_LINE counts in ranges of orders
 * (condition 4 holds per order, so it holds per range). */

/* check_ytd(w): w_ytd, d_ytd of districts 1..10. */
static int p_check_ytd(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct tpcc *t = ctx;
    uint32_t w = (uint32_t)a->v[0].u.i64;
    if (w < 1 || w > t->cfg.warehouses)
        return pod_txn_fail(tx, POD_E_INVALID, "tpcc.check: no warehouse %u", w);
    unsigned char k[TPCC_K_DISTRICT];
    struct tpcc_warehouse wh;
    tpcc_k_warehouse(k, w);
    int rc = pod_get(tx, t->t[TPCC_WAREHOUSE], k, &wh);
    if (rc < 0) return rc;
    if (rc != POD_OK) return pod_txn_fail(tx, POD_E_INTERNAL, "no warehouse row %u", w);
    pod_result_i64(res, wh.w_ytd);
    for (uint32_t d = 1; d <= TPCC_DISTRICTS; d++) {
        struct tpcc_district di;
        tpcc_k_district(k, w, d);
        rc = pod_get(tx, t->t[TPCC_DISTRICT], k, &di);
        if (rc < 0) return rc;
        if (rc != POD_OK) return pod_txn_fail(tx, POD_E_INTERNAL, "no district row %u/%u", w, d);
        pod_result_i64(res, di.d_ytd);
    }
    return POD_OK;
}

static bool last_visit(void *arg, const void *key, const void *tuple)
{
    (void)tuple;
    *(int64_t *)arg = pod_key_get_u32((const unsigned char *)key + 8);
    return false;
}

/* check_district(w, d): d_next_o_id, max O_ID, NEW_ORDER rows, min NO_O_ID,
 * max NO_O_ID, sum of the district's HISTORY amounts, the delivery cursor
 * (NEW_ORDER_HEAD; -1 reading by scans). */
static int p_check_district(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct tpcc *t = ctx;
    uint32_t w = (uint32_t)a->v[0].u.i64, d = (uint32_t)a->v[1].u.i64;
    if (w < 1 || w > t->cfg.warehouses || d < 1 || d > TPCC_DISTRICTS)
        return pod_txn_fail(tx, POD_E_INVALID, "tpcc.check: no district %u/%u", w, d);
    unsigned char k[TPCC_K_HISTORY], lo[TPCC_K_HISTORY], hi[TPCC_K_HISTORY];
    struct tpcc_district di;
    tpcc_k_district(k, w, d);
    int rc = pod_get(tx, t->t[TPCC_DISTRICT], k, &di);
    if (rc < 0) return rc;
    if (rc != POD_OK) return pod_txn_fail(tx, POD_E_INTERNAL, "no district row %u/%u", w, d);
    int64_t max_o = 0;
    tpcc_k_order(lo, w, d, 0);
    tpcc_k_order(hi, w, d, UINT32_MAX);
    POD_TRY(pod_scan(tx, t->t[TPCC_ORDER], lo, hi, 1, POD_SCAN_REVERSE, last_visit, &max_o));
    struct no_agg ng = {0};
    POD_TRY(pod_scan(tx, t->t[TPCC_NEW_ORDER], lo, hi, 0, 0, no_visit, &ng));
    int64_t hsum = 0;
    tpcc_k_history(lo, w, d, 0, 0);
    tpcc_k_history(hi, w, d, UINT32_MAX, UINT64_MAX);
    POD_TRY(pod_scan(tx, t->t[TPCC_HISTORY], lo, hi, 0, 0, history_visit, &hsum));
    pod_result_i64(res, di.d_next_o_id);
    pod_result_i64(res, max_o);
    pod_result_i64(res, ng.n);
    pod_result_i64(res, ng.min_o);
    pod_result_i64(res, ng.max_o);
    pod_result_i64(res, hsum);
    int64_t head = -1;
    if (t->point) {
        struct tpcc_new_order_head h;
        tpcc_k_district(k, w, d);
        rc = pod_get(tx, t->t[TPCC_NO_HEAD], k, &h);
        if (rc < 0) return rc;
        if (rc != POD_OK) return pod_txn_fail(tx, POD_E_INTERNAL, "no new_order_head row %u/%u", w, d);
        head = h.no_o_id;
    }
    pod_result_i64(res, head);
    return POD_OK;
}

/* The arguments (w, d, from, to) of a check over a range of a district. */
static int range_args(pod_txn *tx, const struct tpcc *t, const pod_args *a, uint32_t *w,
                      uint32_t *d, uint32_t *from, uint32_t *to)
{
    *w = (uint32_t)a->v[0].u.i64, *d = (uint32_t)a->v[1].u.i64;
    *from = (uint32_t)a->v[2].u.i64, *to = (uint32_t)a->v[3].u.i64;
    if (*w < 1 || *w > t->cfg.warehouses || *d < 1 || *d > TPCC_DISTRICTS)
        return pod_txn_fail(tx, POD_E_INVALID, "tpcc.check: no district %u/%u", *w, *d);
    return POD_OK;
}

/* check_lines(w, d, from, to): orders with O_ID in [from, to], their sum of
 * O_OL_CNT, the ORDER_LINE rows of those orders. */
static int p_check_lines(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct tpcc *t = ctx;
    uint32_t w, d, from, to;
    POD_TRY(range_args(tx, t, a, &w, &d, &from, &to));
    unsigned char lo[TPCC_K_ORDER_LINE], hi[TPCC_K_ORDER_LINE];
    struct order_agg og = {0};
    tpcc_k_order(lo, w, d, from);
    tpcc_k_order(hi, w, d, to);
    POD_TRY(pod_scan(tx, t->t[TPCC_ORDER], lo, hi, 0, 0, order_visit, &og));
    int64_t nol = 0;
    tpcc_k_order_line(lo, w, d, from, 0);
    tpcc_k_order_line(hi, w, d, to, UINT32_MAX);
    POD_TRY(pod_scan(tx, t->t[TPCC_ORDER_LINE], lo, hi, 0, 0, count_visit, &nol));
    pod_result_i64(res, og.n);
    pod_result_i64(res, og.sum_ol);
    pod_result_i64(res, nol);
    return POD_OK;
}

/* check_last_orders(w, d, from, to), reading by key: per customer c in
 * [from, to] one row if its CUSTOMER_LAST_ORDER names an order that is
 * missing or another customer's: c, that o_id, its O_C_ID (0: missing). */
static int p_check_last_orders(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct tpcc *t = ctx;
    uint32_t w, d, from, to;
    POD_TRY(range_args(tx, t, a, &w, &d, &from, &to));
    bool first = true;
    for (uint32_t c = from; c <= to && c <= t->cfg.customers_per_district; c++) {
        unsigned char k[TPCC_K_ORDER];
        struct tpcc_last_order lo;
        struct tpcc_order o = {0};
        tpcc_k_customer(k, w, d, c);
        int rc = pod_get(tx, t->t[TPCC_LAST_ORDER], k, &lo);
        if (rc < 0) return rc;
        if (rc != POD_OK) lo.o_id = 0;
        tpcc_k_order(k, w, d, lo.o_id);
        if (rc == POD_OK && (rc = pod_get(tx, t->t[TPCC_ORDER], k, &o)) < 0) return rc;
        if (rc == POD_OK && o.o_c_id == c) continue;
        if (!first) pod_result_row(res);
        first = false;
        pod_result_i64(res, c);
        pod_result_i64(res, lo.o_id);
        pod_result_i64(res, rc == POD_OK ? o.o_c_id : 0);
    }
    return POD_OK;
}

enum { C_YTD, C_DISTRICT, C_LINES, C_LAST_ORDERS, C_COUNT };
static const char *const check_names[C_COUNT] = {"tpcc.check_ytd", "tpcc.check_district",
                                                 "tpcc.check_lines", "tpcc.check_last_orders"};

int tpcc_register_check(pod_db *db, struct tpcc *t, char *err, size_t errlen)
{
    static const enum pod_type i64s[4] = {POD_T_I64, POD_T_I64, POD_T_I64, POD_T_I64};
    static const pod_proc_fn fns[C_COUNT] = {p_check_ytd, p_check_district, p_check_lines,
                                             p_check_last_orders};
    static const int nargs[C_COUNT] = {1, 2, 4, 4};
    for (int i = 0; i < (t->point ? C_COUNT : C_LAST_ORDERS); i++) {
        pod_proc_def def = {check_names[i], fns[i], t, nargs[i], i64s, true};
        t->check_proc[i] = pod_proc_register(db, &def, err, errlen);
        if (t->check_proc[i] < 0) return -1;
    }
    return 0;
}

/* ---- the report ------------------------------------------------------------------------- */

struct report {
    char *buf;
    size_t cap, len;
    int failures;
};

static void say(struct report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct report *r, const char *fmt, ...)
{
    if (!r->buf || !r->cap || r->len >= r->cap - 1) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(r->buf + r->len, r->cap - r->len, fmt, ap);
    va_end(ap);
    if (n > 0) r->len += (size_t)n < r->cap - r->len ? (size_t)n : r->cap - r->len - 1;
}

static int64_t val(const pod_result *res, int row, int col)
{
    pod_value v;
    if (pod_result_get(res, row, col, &v) != 0 || v.type != POD_T_I64) return INT64_MIN;
    return v.u.i64;
}

#define LINES_CHUNK 256 /* orders per check_lines transaction */

/* Through the worker of the caller's thread, or the admin worker (wk NULL). */
static int call(pod_db *db, struct pod_worker *wk, int proc, const int64_t *iv, int n,
                pod_result *res, char *msg, size_t msglen)
{
    pod_value v[4];
    for (int i = 0; i < n; i++) v[i] = pod_v_i64(iv[i]);
    pod_args args = {n, v};
    if (wk) return pod_call(wk, proc, &args, res, msg, msglen);
    struct pod_worker *a = pod_admin_begin(db);
    int rc = pod_call(a, proc, &args, res, msg, msglen);
    pod_admin_end(db);
    return rc;
}

/* Reading by key: every customer's CUSTOMER_LAST_ORDER names one of its
 * orders (in ranges of LINES_CHUNK customers); failures are added to r. */
static void check_last_orders(pod_db *db, struct pod_worker *wk, const struct tpcc *t, uint32_t w,
                              int d, pod_result *res, struct report *r)
{
    char msg[200];
    for (int64_t from = 1; from <= t->cfg.customers_per_district; from += LINES_CHUNK) {
        int64_t v[4] = {w, d, from, from + LINES_CHUNK - 1};
        if (call(db, wk, t->check_proc[C_LAST_ORDERS], v, 4, res, msg, sizeof msg) < 0) {
            say(r, "warehouse %u district %d: %s: %s\n", w, d, check_names[C_LAST_ORDERS], msg);
            r->failures++;
            return;
        }
        for (int row = 0; row < pod_result_nrows(res); row++) {
            if (val(res, row, 0) == INT64_MIN) continue; /* no rows: one empty row */
            say(r, "the last order fails: warehouse %u district %d customer %" PRId64
                ": customer_last_order names order %" PRId64 ", whose O_C_ID is %" PRId64 "\n",
                w, d, val(res, row, 0), val(res, row, 1), val(res, row, 2));
            r->failures++;
        }
    }
}

/* Conditions 1-4 of warehouse w; failures are added to r. */
static void check_one(pod_db *db, struct pod_worker *wk, const struct tpcc *t, uint32_t w,
                      pod_result *res, struct report *r)
{
    int64_t v[4] = {w, 0, 0, 0};
    char msg[200];
    if (call(db, wk, t->check_proc[C_YTD], v, 1, res, msg, sizeof msg) < 0) {
        say(r, "warehouse %u: %s: %s\n", w, check_names[C_YTD], msg);
        r->failures++;
        return;
    }
    int64_t w_ytd = val(res, 0, 0), sum_d_ytd = 0, d_ytd[TPCC_DISTRICTS + 1] = {0};
    int64_t hist[TPCC_DISTRICTS + 1] = {0};
    for (int d = 1; d <= TPCC_DISTRICTS; d++) sum_d_ytd += d_ytd[d] = val(res, 0, d);
    for (int d = 1; d <= TPCC_DISTRICTS; d++) {
        v[1] = d;
        if (call(db, wk, t->check_proc[C_DISTRICT], v, 2, res, msg, sizeof msg) < 0) {
            say(r, "warehouse %u district %d: %s: %s\n", w, d, check_names[C_DISTRICT], msg);
            r->failures++;
            continue;
        }
        int64_t next = val(res, 0, 0), max_o = val(res, 0, 1), nno = val(res, 0, 2);
        int64_t min_no = val(res, 0, 3), max_no = val(res, 0, 4);
        hist[d] = val(res, 0, 5);
        int64_t head = val(res, 0, 6);
        /* Delivery's cursor: the oldest new order, D_NEXT_O_ID when none. */
        if (t->point && head != (nno > 0 ? min_no : next)) {
            say(r, "the delivery cursor fails: warehouse %u district %d: NEW_ORDER_HEAD = %" PRId64
                ", min(NO_O_ID) = %" PRId64 ", D_NEXT_O_ID = %" PRId64 "\n",
                w, d, head, nno > 0 ? min_no : -1, next);
            r->failures++;
        }
        if (next - 1 != max_o || (nno > 0 && max_no != max_o)) {
            say(r, "condition 2 fails: warehouse %u district %d: D_NEXT_O_ID - 1 = %" PRId64
                ", max(O_ID) = %" PRId64 ", max(NO_O_ID) = %" PRId64 "\n",
                w, d, next - 1, max_o, nno > 0 ? max_no : -1);
            r->failures++;
        }
        if (nno > 0 && max_no - min_no + 1 != nno) {
            say(r, "condition 3 fails: warehouse %u district %d: max(NO_O_ID) - min(NO_O_ID) + 1 = %" PRId64
                ", NEW_ORDER rows = %" PRId64 "\n", w, d, max_no - min_no + 1, nno);
            r->failures++;
        }
        int64_t sum_ol = 0, nol = 0;
        bool ok = true;
        for (int64_t from = 1; from <= max_o; from += LINES_CHUNK) {
            int64_t lv[4] = {w, d, from, from + LINES_CHUNK - 1};
            if (call(db, wk, t->check_proc[C_LINES], lv, 4, res, msg, sizeof msg) < 0) {
                say(r, "warehouse %u district %d: %s: %s\n", w, d, check_names[C_LINES], msg);
                r->failures++;
                ok = false;
                break;
            }
            sum_ol += val(res, 0, 1);
            nol += val(res, 0, 2);
        }
        if (ok && sum_ol != nol) {
            say(r, "condition 4 fails: warehouse %u district %d: sum(O_OL_CNT) = %" PRId64
                ", ORDER_LINE rows = %" PRId64 "\n", w, d, sum_ol, nol);
            r->failures++;
        }
        if (t->point) check_last_orders(db, wk, t, w, d, res, r);
    }
    if (w_ytd != sum_d_ytd) {
        /* Condition 1 is per warehouse; the district(s) to blame are those
         * whose D_YTD differs from the sum of their HISTORY amounts (each
         * payment adds the same amount to W_YTD, D_YTD and a HISTORY row;
         * exact when no transactions run). */
        int named = 0;
        for (int d = 1; d <= TPCC_DISTRICTS; d++) {
            if (d_ytd[d] == hist[d]) continue;
            say(r, "condition 1 fails: warehouse %u district %d: W_YTD = %" PRId64
                ", sum(D_YTD) = %" PRId64 "; this district's D_YTD = %" PRId64
                " is off by %" PRId64 " from its HISTORY\n",
                w, d, w_ytd, sum_d_ytd, d_ytd[d], d_ytd[d] - hist[d]);
            named++;
        }
        if (!named)
            say(r, "condition 1 fails: warehouse %u district ?: W_YTD = %" PRId64
                ", sum(D_YTD) = %" PRId64 "\n", w, w_ytd, sum_d_ytd);
        r->failures++;
    }
}

int tpcc_check_warehouse(pod_db *db, struct pod_worker *wk, uint32_t w, char *report,
                         size_t reportlen)
{
    struct report r = {report, reportlen, 0, 0};
    if (report && reportlen) report[0] = 0;
    struct tpcc *t = tpcc_get(db);
    if (!t) {
        say(&r, "tpcc_check: tpcc_register first\n");
        return 1;
    }
    if (w < 1 || w > t->cfg.warehouses) {
        say(&r, "tpcc_check: no warehouse %u\n", w);
        return 1;
    }
    pod_result *res = pod_result_new();
    if (!res) {
        say(&r, "tpcc_check: out of memory\n");
        return 1;
    }
    check_one(db, wk, t, w, res, &r);
    pod_result_free(res);
    return r.failures;
}

int tpcc_check(pod_db *db, const struct tpcc_config *cfg, char *report, size_t reportlen)
{
    struct report r = {report, reportlen, 0, 0};
    if (report && reportlen) report[0] = 0;
    struct tpcc *t = tpcc_get(db);
    if (!t) {
        say(&r, "tpcc_check: tpcc_register first\n");
        return -1;
    }
    uint32_t nw = cfg ? cfg->warehouses : t->cfg.warehouses;
    pod_result *res = pod_result_new();
    if (!res) {
        say(&r, "tpcc_check: out of memory\n");
        return -1;
    }
    for (uint32_t w = 1; w <= nw; w++) check_one(db, NULL, t, w, res, &r);
    pod_result_free(res);
    return r.failures ? -1 : 0;
}
