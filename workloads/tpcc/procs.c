/* The five TPC-C transactions (spec 2.4-2.8) as PodDB stored procedures.
 * Argument lists are in tpcc.h. Each runs as one serializable transaction
 * (strict 2PL NO_WAIT, next-key locking); conflicts are retried by pod_call.
 * Their range reads are scans, or point reads when t->point (docs/tpcc.md,
 * "Range reads"): the helpers below hide which. */
#include "workloads/tpcc/tpcc.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define ARG(i) (a->v[(i)].u.i64)

/* A row that must exist, read in place (pod_get_ref: *out points at the
 * tuple until the transaction ends). NOT_FOUND is a broken database, not
 * an outcome. */
static int must_read(pod_txn *tx, pod_table *t, const unsigned char *key, const void *out,
                     const char *what)
{
    int rc = pod_get_ref(tx, t, key, (const void **)out);
    if (rc < 0) return rc;
    if (rc != POD_OK) return pod_txn_fail(tx, POD_E_INTERNAL, "tpcc: %s: %s", what, pod_status_name(rc));
    return POD_OK;
}

/* A row that must exist, to change in place fields first..last of its
 * struct (pod_update_range: no copy in or out, only those bytes saved,
 * logged and published; what is written there through *out is the
 * transaction's write). */
static int must_update_range(pod_txn *tx, pod_table *t, const unsigned char *key, size_t off,
                             size_t len, void *out, const char *what)
{
    int rc = pod_update_range(tx, t, key, (uint32_t)off, (uint32_t)len, (void **)out);
    if (rc < 0) return rc;
    if (rc != POD_OK) return pod_txn_fail(tx, POD_E_INTERNAL, "tpcc: %s: %s", what, pod_status_name(rc));
    return POD_OK;
}
/* The bytes of fields first..last (in declaration order) of a struct. */
#define FIELDS(type, first, last)                                                      \
    offsetof(type, first), offsetof(type, last) + sizeof(((type *)0)->last) - offsetof(type, first)
#define must_update(tx, t, key, out, what, type, first, last) \
    must_update_range(tx, t, key, FIELDS(type, first, last), out, what)

static int must_put(pod_txn *tx, pod_table *t, const unsigned char *key, const void *tuple,
                    const char *what)
{
    int rc = pod_put(tx, t, key, tuple);
    if (rc < 0) return rc;
    if (rc != POD_OK) return pod_txn_fail(tx, POD_E_INTERNAL, "tpcc: put %s: %s", what, pod_status_name(rc));
    return POD_OK;
}

static int must_insert(pod_txn *tx, pod_table *t, const unsigned char *key, const void *tuple,
                       const char *what)
{
    int rc = pod_insert(tx, t, key, tuple);
    if (rc < 0) return rc;
    if (rc != POD_OK)
        return pod_txn_fail(tx, POD_E_INTERNAL, "tpcc: insert %s: %s", what, pod_status_name(rc));
    return POD_OK;
}

static int check_wd(pod_txn *tx, const struct tpcc *t, int64_t w, int64_t d)
{
    if (w < 1 || w > t->cfg.warehouses || d < 1 || d > TPCC_DISTRICTS)
        return pod_txn_fail(tx, POD_E_INVALID, "tpcc: no warehouse/district %" PRId64 "/%" PRId64,
                            w, d);
    return POD_OK;
}

/* ---- customer selection by id or by last name (spec 2.5.2.2, 2.6.2.2) ------------- */

#define NAME_CAP 256

struct name_scan {
    uint32_t ids[NAME_CAP];
    uint32_t n;        /* rows seen */
    uint32_t want;     /* second pass: stop at row number want (0-based) */
    bool second;
};

static bool name_visit(void *arg, const void *key, const void *tuple)
{
    (void)key;
    struct name_scan *s = arg;
    struct tpcc_customer_name cn;
    memcpy(&cn, tuple, sizeof cn);
    if (s->n < NAME_CAP) s->ids[s->n] = cn.c_id;
    else if (s->second) s->ids[0] = cn.c_id;
    s->n++;
    return !(s->second && s->n > s->want);
}

/* The customer with last name number `last` at position ceil(n/2) of those
 * sorted by C_FIRST; or c_id itself when it is not 0. */
static int pick_customer(pod_txn *tx, struct tpcc *t, uint32_t w, uint32_t d, uint32_t c_id,
                         uint32_t last, uint32_t *out)
{
    if (c_id) {
        if (c_id > t->cfg.customers_per_district)
            return pod_txn_fail(tx, POD_E_INVALID, "tpcc: no customer %u", c_id);
        *out = c_id;
        return POD_OK;
    }
    char name[TPCC_LAST_LEN + 1];
    tpcc_last_name(name, last);
    if (t->point) {
        unsigned char k[TPCC_K_NAME_LIST];
        const struct tpcc_name_list *nl;
        tpcc_k_name_list(k, w, d, name);
        int rc = pod_get_ref(tx, t->t[TPCC_NAME_LIST], k, (const void **)&nl);
        if (rc < 0) return rc;
        if (rc != POD_OK || !nl->n || nl->n > TPCC_NAME_CAP)
            return pod_txn_fail(tx, POD_E_INTERNAL, "tpcc: no customer named %s in %u/%u", name, w, d);
        *out = nl->c_id[(nl->n - 1) / 2];
        return POD_OK;
    }
    unsigned char lo[TPCC_K_CUST_NAME], hi[TPCC_K_CUST_NAME];
    tpcc_k_cust_name(lo, w, d, name, "", 0);
    tpcc_k_cust_name(hi, w, d, name, "", 0);
    memset(hi + 8 + TPCC_LAST_LEN, 0xff, TPCC_FIRST_LEN + 4);
    struct name_scan s = {0};
    POD_TRY(pod_scan(tx, t->t[TPCC_CUST_NAME], lo, hi, 0, 0, name_visit, &s));
    if (!s.n)
        return pod_txn_fail(tx, POD_E_INTERNAL, "tpcc: no customer named %s in %u/%u", name, w, d);
    uint32_t mid = (s.n - 1) / 2;
    if (mid < NAME_CAP) {
        *out = s.ids[mid];
        return POD_OK;
    }
    struct name_scan s2 = {.want = mid, .second = true};
    POD_TRY(pod_scan(tx, t->t[TPCC_CUST_NAME], lo, hi, mid + 1, 0, name_visit, &s2));
    *out = s2.ids[0];
    return POD_OK;
}

/* ---- NewOrder ------------------------------------------------------------------------ */

static int p_new_order(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct tpcc *t = ctx;
    int64_t w = ARG(0), d = ARG(1), c = ARG(2), n = ARG(3), entry = ARG(5);
    POD_TRY(check_wd(tx, t, w, d));
    if (c < 1 || c > t->cfg.customers_per_district || n < 1 || n > TPCC_MAX_OL ||
        a->v[4].len != (uint32_t)n * 12)
        return pod_txn_fail(tx, POD_E_INVALID, "tpcc.new_order: bad customer or lines");
    uint32_t lines[TPCC_MAX_OL * 3];
    memcpy(lines, a->v[4].u.bytes, (size_t)n * 12);
    bool all_local = true;
    for (int64_t i = 0; i < n; i++) {
        uint32_t sw = lines[3 * i + 1];
        if (sw < 1 || sw > t->cfg.warehouses)
            return pod_txn_fail(tx, POD_E_INVALID, "tpcc.new_order: no supply warehouse %u", sw);
        if (sw != (uint32_t)w) all_local = false;
    }

    unsigned char k[TPCC_K_CUST_NAME];
    const struct tpcc_warehouse *wh;
    tpcc_k_warehouse(k, (uint32_t)w);
    POD_TRY(must_read(tx, t->t[TPCC_WAREHOUSE], k, &wh, "warehouse"));
    struct tpcc_district *di;
    tpcc_k_district(k, (uint32_t)w, (uint32_t)d);
    POD_TRY(must_update(tx, t->t[TPCC_DISTRICT], k, &di, "district", struct tpcc_district,
                        d_next_o_id, d_next_o_id));
    uint32_t o_id = di->d_next_o_id++;
    const struct tpcc_customer *cu;
    tpcc_k_customer(k, (uint32_t)w, (uint32_t)d, (uint32_t)c);
    POD_TRY(must_read(tx, t->t[TPCC_CUSTOMER], k, &cu, "customer"));

    struct tpcc_order o = {.o_entry_d = entry, .o_w_id = (uint32_t)w, .o_d_id = (uint32_t)d,
                           .o_id = o_id, .o_c_id = (uint32_t)c, .o_carrier_id = 0,
                           .o_ol_cnt = (uint32_t)n, .o_all_local = all_local};
    tpcc_k_order(k, (uint32_t)w, (uint32_t)d, o_id);
    POD_TRY(must_insert(tx, t->t[TPCC_ORDER], k, &o, "order"));
    struct tpcc_new_order no = {(uint32_t)w, (uint32_t)d, o_id};
    POD_TRY(must_insert(tx, t->t[TPCC_NEW_ORDER], k, &no, "new_order"));
    if (t->point) {
        struct tpcc_last_order *lo;
        tpcc_k_customer(k, (uint32_t)w, (uint32_t)d, (uint32_t)c);
        POD_TRY(must_update(tx, t->t[TPCC_LAST_ORDER], k, &lo, "customer_last_order",
                            struct tpcc_last_order, o_id, o_id));
        lo->o_id = o_id;
    } else {
        struct tpcc_order_by_cust oc = {o_id};
        tpcc_k_order_cust(k, (uint32_t)w, (uint32_t)d, (uint32_t)c, o_id);
        POD_TRY(must_insert(tx, t->t[TPCC_ORDER_CUST], k, &oc, "oorder_by_customer"));
    }

    /* The items and stocks this order reads: looked up together first, so
     * that their cache misses overlap (pod_prefetch: a hint). */
    unsigned char ik[TPCC_MAX_OL][TPCC_K_ITEM], sk[TPCC_MAX_OL][TPCC_K_STOCK];
    for (int64_t i = 0; i < n; i++) {
        tpcc_k_item(ik[i], (uint32_t)w, lines[3 * i]);
        tpcc_k_stock(sk[i], lines[3 * i + 1], lines[3 * i]);
    }
    POD_TRY(pod_prefetch(tx, t->t[TPCC_ITEM], ik, (uint32_t)n));
    POD_TRY(pod_prefetch(tx, t->t[TPCC_STOCK], sk, (uint32_t)n));

    int64_t sum = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t i_id = lines[3 * i], sw = lines[3 * i + 1], qty = lines[3 * i + 2];
        const struct tpcc_item *it;
        /* ITEM is replicated per warehouse: read the home warehouse's copy. */
        tpcc_k_item(k, (uint32_t)w, i_id);
        int rc = pod_get_ref(tx, t->t[TPCC_ITEM], k, (const void **)&it);
        if (rc < 0) return rc;
        if (rc == POD_NOT_FOUND) {
            /* The 1% rollback (spec 2.4.2.3): an unused item id. */
            pod_result_i64(res, o_id);
            pod_result_i64(res, -1);
            return POD_USER_ABORT;
        }
        struct tpcc_stock *st;
        tpcc_k_stock(k, sw, i_id);
        POD_TRY(must_update(tx, t->t[TPCC_STOCK], k, &st, "stock", struct tpcc_stock, s_ytd,
                            s_remote_cnt));
        if (st->s_quantity >= (int32_t)qty + 10) st->s_quantity -= (int32_t)qty;
        else st->s_quantity = st->s_quantity - (int32_t)qty + 91;
        st->s_ytd += qty;
        st->s_order_cnt++;
        if (sw != (uint32_t)w) st->s_remote_cnt++;
        struct tpcc_order_line ol = {
            .ol_delivery_d = 0, .ol_amount = (int64_t)qty * it->i_price, .ol_w_id = (uint32_t)w,
            .ol_d_id = (uint32_t)d, .ol_o_id = o_id, .ol_number = (uint32_t)(i + 1),
            .ol_i_id = i_id, .ol_supply_w_id = sw, .ol_quantity = qty};
        memcpy(ol.ol_dist_info, st->s_dist[d - 1], sizeof ol.ol_dist_info);
        tpcc_k_order_line(k, (uint32_t)w, (uint32_t)d, o_id, (uint32_t)(i + 1));
        POD_TRY(must_insert(tx, t->t[TPCC_ORDER_LINE], k, &ol, "order_line"));
        sum += ol.ol_amount;
    }
    /* total = sum * (1 - c_discount) * (1 + w_tax + d_tax), rates in basis points */
    int64_t total = sum * (10000 - cu->c_discount) / 10000 * (10000 + wh->w_tax + di->d_tax) / 10000;
    pod_result_i64(res, o_id);
    pod_result_i64(res, total);
    return POD_OK;
}

/* ---- Payment --------------------------------------------------------------------------- */

static int p_payment(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct tpcc *t = ctx;
    int64_t w = ARG(0), d = ARG(1), cw = ARG(2), cd = ARG(3), amount = ARG(6);
    uint64_t hseq = (uint64_t)ARG(7);
    POD_TRY(check_wd(tx, t, w, d));
    POD_TRY(check_wd(tx, t, cw, cd));
    unsigned char k[TPCC_K_CUST_NAME];
    struct tpcc_warehouse *wh;
    tpcc_k_warehouse(k, (uint32_t)w);
    POD_TRY(must_update(tx, t->t[TPCC_WAREHOUSE], k, &wh, "warehouse", struct tpcc_warehouse, w_ytd,
                        w_ytd));
    wh->w_ytd += amount;
    struct tpcc_district *di;
    tpcc_k_district(k, (uint32_t)w, (uint32_t)d);
    POD_TRY(must_update(tx, t->t[TPCC_DISTRICT], k, &di, "district", struct tpcc_district, d_ytd,
                        d_ytd));
    di->d_ytd += amount;

    uint32_t c;
    POD_TRY(pick_customer(tx, t, (uint32_t)cw, (uint32_t)cd, (uint32_t)ARG(4), (uint32_t)ARG(5), &c));
    struct tpcc_customer *cu;
    tpcc_k_customer(k, (uint32_t)cw, (uint32_t)cd, c);
    POD_TRY(must_update(tx, t->t[TPCC_CUSTOMER], k, &cu, "customer", struct tpcc_customer,
                        c_balance, c_payment_cnt));
    cu->c_balance -= amount;
    cu->c_ytd_payment += amount;
    cu->c_payment_cnt++;
    if (memcmp(cu->c_credit, "BC", 2) == 0) {
        POD_TRY(must_update(tx, t->t[TPCC_CUSTOMER], k, &cu, "customer", struct tpcc_customer,
                            c_data, c_data));
        char data[sizeof cu->c_data];
        int n = snprintf(data, sizeof data, "%u %u %u %u %u %" PRId64 ".%02" PRId64 " |", c,
                         (unsigned)cd, (unsigned)cw, (unsigned)d, (unsigned)w, amount / 100,
                         amount % 100);
        if (n > 0 && (size_t)n < sizeof data) {
            size_t keep = sizeof data - 1 - (size_t)n;
            size_t old = strnlen(cu->c_data, sizeof cu->c_data - 1);
            if (old > keep) old = keep;
            memcpy(data + n, cu->c_data, old);
            data[(size_t)n + old] = 0;
            memcpy(cu->c_data, data, sizeof data);
        }
    }

    struct tpcc_history h = {.h_date = 1, .h_amount = amount, .h_c_id = c,
                             .h_c_d_id = (uint32_t)cd, .h_c_w_id = (uint32_t)cw,
                             .h_d_id = (uint32_t)d, .h_w_id = (uint32_t)w};
    snprintf(h.h_data, sizeof h.h_data, "%.10s    %.10s", wh->w_name, di->d_name);
    tpcc_k_history(k, (uint32_t)w, (uint32_t)d, c, hseq);
    POD_TRY(must_insert(tx, t->t[TPCC_HISTORY], k, &h, "history"));
    pod_result_i64(res, c);
    pod_result_i64(res, cu->c_balance);
    return POD_OK;
}

/* ---- the lines of an order ---------------------------------------------------------------- */

/* Order o's lines, cnt of them (its O_OL_CNT), to visit in order: a scan
 * of the order's key range, or point reads of lines 1..cnt. flags:
 * POD_SCAN_FOR_UPDATE or 0. Every line must exist. */
static int order_lines(pod_txn *tx, struct tpcc *t, uint32_t w, uint32_t d, uint32_t o,
                       uint32_t cnt, unsigned flags, pod_scan_fn visit, void *arg)
{
    unsigned char k[TPCC_K_ORDER_LINE];
    if (!t->point) {
        unsigned char hi[TPCC_K_ORDER_LINE];
        tpcc_k_order_line(k, w, d, o, 0);
        tpcc_k_order_line(hi, w, d, o, UINT32_MAX);
        return pod_scan(tx, t->t[TPCC_ORDER_LINE], k, hi, 0, flags, visit, arg);
    }
    for (uint32_t l = 1; l <= cnt; l++) {
        struct tpcc_order_line ol;
        const void *tuple = &ol;
        tpcc_k_order_line(k, w, d, o, l);
        int rc = (flags & POD_SCAN_FOR_UPDATE)
                     ? pod_get_for_update(tx, t->t[TPCC_ORDER_LINE], k, &ol)
                     : pod_get_ref(tx, t->t[TPCC_ORDER_LINE], k, &tuple);
        if (rc < 0) return rc;
        if (rc != POD_OK)
            return pod_txn_fail(tx, POD_E_INTERNAL, "tpcc: order line %u/%u/%u/%u: %s", w, d, o,
                                l, pod_status_name(rc));
        if (!visit(arg, k, tuple)) break;
    }
    return POD_OK;
}

/* ---- OrderStatus ------------------------------------------------------------------------- */

struct last_order {
    uint32_t o_id;
    bool found;
};

static bool last_order_visit(void *arg, const void *key, const void *tuple)
{
    (void)key;
    struct last_order *l = arg;
    struct tpcc_order_by_cust oc;
    memcpy(&oc, tuple, sizeof oc);
    l->o_id = oc.o_id;
    l->found = true;
    return false;
}

struct lines_out {
    pod_result *res;
    uint32_t n;
};

static bool status_line_visit(void *arg, const void *key, const void *tuple)
{
    (void)key;
    struct lines_out *l = arg;
    struct tpcc_order_line ol;
    memcpy(&ol, tuple, sizeof ol);
    pod_result_row(l->res);
    pod_result_i64(l->res, ol.ol_i_id);
    pod_result_i64(l->res, ol.ol_supply_w_id);
    pod_result_i64(l->res, ol.ol_quantity);
    pod_result_i64(l->res, ol.ol_amount);
    pod_result_i64(l->res, ol.ol_delivery_d);
    l->n++;
    return true;
}

static int p_order_status(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct tpcc *t = ctx;
    int64_t w = ARG(0), d = ARG(1);
    POD_TRY(check_wd(tx, t, w, d));
    uint32_t c;
    POD_TRY(pick_customer(tx, t, (uint32_t)w, (uint32_t)d, (uint32_t)ARG(2), (uint32_t)ARG(3), &c));
    unsigned char k[TPCC_K_ORDER_LINE], hi[TPCC_K_ORDER_LINE];
    const struct tpcc_customer *cu;
    tpcc_k_customer(k, (uint32_t)w, (uint32_t)d, c);
    POD_TRY(must_read(tx, t->t[TPCC_CUSTOMER], k, &cu, "customer"));
    struct last_order lo = {0};
    if (t->point) { /* CUSTOMER_LAST_ORDER, kept by NewOrder */
        const struct tpcc_last_order *l;
        POD_TRY(must_read(tx, t->t[TPCC_LAST_ORDER], k, &l, "customer_last_order"));
        lo = (struct last_order){l->o_id, true};
    } else {
        tpcc_k_order_cust(k, (uint32_t)w, (uint32_t)d, c, 0);
        tpcc_k_order_cust(hi, (uint32_t)w, (uint32_t)d, c, UINT32_MAX);
        POD_TRY(pod_scan(tx, t->t[TPCC_ORDER_CUST], k, hi, 1, POD_SCAN_REVERSE, last_order_visit,
                         &lo));
    }
    pod_result_i64(res, c);
    pod_result_i64(res, cu->c_balance);
    if (!lo.found) {
        pod_result_i64(res, 0);
        pod_result_i64(res, 0);
        pod_result_i64(res, 0);
        return POD_OK;
    }
    const struct tpcc_order *o;
    tpcc_k_order(k, (uint32_t)w, (uint32_t)d, lo.o_id);
    POD_TRY(must_read(tx, t->t[TPCC_ORDER], k, &o, "order"));
    pod_result_i64(res, lo.o_id);
    pod_result_i64(res, o->o_carrier_id);
    pod_result_i64(res, o->o_ol_cnt);
    struct lines_out lines = {res, 0};
    POD_TRY(order_lines(tx, t, (uint32_t)w, (uint32_t)d, lo.o_id, o->o_ol_cnt, 0,
                        status_line_visit, &lines));
    if (lines.n != o->o_ol_cnt)
        return pod_txn_fail(tx, POD_E_INTERNAL, "tpcc.order_status: order %u has %u lines, O_OL_CNT %u",
                            lo.o_id, lines.n, o->o_ol_cnt);
    return POD_OK;
}

/* ---- Delivery --------------------------------------------------------------------------- */

struct oldest {
    uint32_t o_id;
    bool found;
};

static bool oldest_visit(void *arg, const void *key, const void *tuple)
{
    (void)tuple;
    struct oldest *o = arg;
    o->o_id = pod_key_get_u32((const unsigned char *)key + 8);
    o->found = true;
    return false;
}

struct deliver_lines {
    struct tpcc_order_line ol[TPCC_MAX_OL];
    uint32_t n;
    bool overflow;
};

static bool deliver_line_visit(void *arg, const void *key, const void *tuple)
{
    (void)key;
    struct deliver_lines *l = arg;
    if (l->n == TPCC_MAX_OL) {
        l->overflow = true;
        return false;
    }
    memcpy(&l->ol[l->n++], tuple, sizeof l->ol[0]);
    return true;
}

/* Take district d's oldest NEW_ORDER out (*found false: it has none): the
 * first of a forward scan, or the one the district's NEW_ORDER_HEAD names,
 * which then moves on (new orders are the district's orders from there to
 * D_NEXT_O_ID - 1: ids are dense, a rolled-back NewOrder takes its id back). */
static int take_oldest_new_order(pod_txn *tx, struct tpcc *t, uint32_t w, uint32_t d,
                                 uint32_t *o_id, bool *found)
{
    unsigned char k[TPCC_K_NEW_ORDER];
    struct tpcc_new_order_head *head = NULL;
    *found = false;
    if (t->point) {
        tpcc_k_district(k, w, d);
        POD_TRY(must_update(tx, t->t[TPCC_NO_HEAD], k, &head, "new_order_head",
                            struct tpcc_new_order_head, no_o_id, no_o_id));
        *o_id = head->no_o_id;
    } else {
        unsigned char hi[TPCC_K_NEW_ORDER];
        tpcc_k_new_order(k, w, d, 0);
        tpcc_k_new_order(hi, w, d, UINT32_MAX);
        struct oldest old = {0};
        POD_TRY(pod_scan(tx, t->t[TPCC_NEW_ORDER], k, hi, 1, POD_SCAN_FOR_UPDATE, oldest_visit, &old));
        if (!old.found) return POD_OK;
        *o_id = old.o_id;
    }
    tpcc_k_new_order(k, w, d, *o_id);
    int rc = pod_delete(tx, t->t[TPCC_NEW_ORDER], k);
    if (rc < 0) return rc;
    if (head && rc == POD_NOT_FOUND) return POD_OK; /* the cursor is at D_NEXT_O_ID */
    if (rc != POD_OK) return pod_txn_fail(tx, POD_E_INTERNAL, "tpcc.delivery: delete new_order");
    if (head) head->no_o_id++;
    *found = true;
    return POD_OK;
}

static int p_delivery(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct tpcc *t = ctx;
    int64_t w = ARG(0), carrier = ARG(1), date = ARG(2);
    POD_TRY(check_wd(tx, t, w, 1));
    int64_t delivered = 0;
    for (uint32_t d = 1; d <= TPCC_DISTRICTS; d++) {
        unsigned char k[TPCC_K_ORDER_LINE];
        uint32_t o_id;
        bool found;
        POD_TRY(take_oldest_new_order(tx, t, (uint32_t)w, d, &o_id, &found));
        if (!found) continue; /* spec 2.7.4.2: skipped */
        struct tpcc_order *o;
        tpcc_k_order(k, (uint32_t)w, d, o_id);
        POD_TRY(must_update(tx, t->t[TPCC_ORDER], k, &o, "order", struct tpcc_order, o_carrier_id,
                            o_carrier_id));
        o->o_carrier_id = (uint32_t)carrier;
        struct deliver_lines dl;
        dl.n = 0;
        dl.overflow = false;
        POD_TRY(order_lines(tx, t, (uint32_t)w, d, o_id, o->o_ol_cnt, POD_SCAN_FOR_UPDATE,
                            deliver_line_visit, &dl));
        if (dl.overflow || dl.n != o->o_ol_cnt)
            return pod_txn_fail(tx, POD_E_INTERNAL, "tpcc.delivery: order %u/%u/%u: %u lines, O_OL_CNT %u",
                                (unsigned)w, d, o_id, dl.n, o->o_ol_cnt);
        int64_t sum = 0;
        for (uint32_t i = 0; i < dl.n; i++) {
            dl.ol[i].ol_delivery_d = date;
            sum += dl.ol[i].ol_amount;
            tpcc_k_order_line(k, (uint32_t)w, d, o_id, dl.ol[i].ol_number);
            POD_TRY(must_put(tx, t->t[TPCC_ORDER_LINE], k, &dl.ol[i], "order_line"));
        }
        struct tpcc_customer *cu;
        tpcc_k_customer(k, (uint32_t)w, d, o->o_c_id);
        POD_TRY(must_update(tx, t->t[TPCC_CUSTOMER], k, &cu, "customer", struct tpcc_customer,
                            c_balance, c_delivery_cnt));
        cu->c_balance += sum;
        cu->c_delivery_cnt++;
        delivered++;
    }
    pod_result_i64(res, delivered);
    return POD_OK;
}

/* ---- StockLevel ------------------------------------------------------------------------- */

/* The distinct items of the last 20 orders' lines (at most 20 x 15), with
 * a small open-addressing set beside them: a linear search per line was
 * ~0.6 us per transaction of the mix (~20 000 comparisons per StockLevel). */
#define RECENT_MAX (20 * TPCC_MAX_OL)
#define RECENT_SLOTS 1024 /* a power of two, over 3x RECENT_MAX */
struct recent_items {
    uint32_t ids[RECENT_MAX];
    uint32_t n;
    uint32_t slot[RECENT_SLOTS]; /* item id + 1; 0: empty */
};

static bool recent_visit(void *arg, const void *key, const void *tuple)
{
    (void)key;
    struct recent_items *r = arg;
    struct tpcc_order_line ol;
    memcpy(&ol, tuple, sizeof ol);
    uint32_t h = (ol.ol_i_id * 2654435761u) >> 22; /* Fibonacci hashing to 10 bits */
    for (;; h = (h + 1) & (RECENT_SLOTS - 1)) {
        if (r->slot[h] == ol.ol_i_id + 1) return true;
        if (r->slot[h] == 0) break;
    }
    if (r->n < RECENT_MAX) {
        r->slot[h] = ol.ol_i_id + 1;
        r->ids[r->n++] = ol.ol_i_id;
    }
    return true;
}

static int p_stock_level(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct tpcc *t = ctx;
    int64_t w = ARG(0), d = ARG(1), threshold = ARG(2);
    POD_TRY(check_wd(tx, t, w, d));
    unsigned char k[TPCC_K_ORDER_LINE], hi[TPCC_K_ORDER_LINE];
    const struct tpcc_district *di;
    tpcc_k_district(k, (uint32_t)w, (uint32_t)d);
    POD_TRY(must_read(tx, t->t[TPCC_DISTRICT], k, &di, "district"));
    uint32_t next = di->d_next_o_id;
    uint32_t from = next > 20 ? next - 20 : 1;
    if (next <= 1) {
        pod_result_i64(res, 0);
        return POD_OK;
    }
    struct recent_items *r = &(struct recent_items){.n = 0}; /* slots zeroed too */
    if (t->point) { /* each order's lines by key */
        for (uint32_t o_id = from; o_id < next; o_id++) {
            const struct tpcc_order *o;
            tpcc_k_order(k, (uint32_t)w, (uint32_t)d, o_id);
            POD_TRY(must_read(tx, t->t[TPCC_ORDER], k, &o, "order"));
            POD_TRY(order_lines(tx, t, (uint32_t)w, (uint32_t)d, o_id, o->o_ol_cnt, 0,
                                recent_visit, r));
        }
    } else {
        tpcc_k_order_line(k, (uint32_t)w, (uint32_t)d, from, 0);
        tpcc_k_order_line(hi, (uint32_t)w, (uint32_t)d, next - 1, UINT32_MAX);
        POD_TRY(pod_scan(tx, t->t[TPCC_ORDER_LINE], k, hi, 0, 0, recent_visit, r));
    }
    unsigned char sk[sizeof r->ids / sizeof r->ids[0]][TPCC_K_STOCK];
    for (uint32_t i = 0; i < r->n; i++) tpcc_k_stock(sk[i], (uint32_t)w, r->ids[i]);
    POD_TRY(pod_prefetch(tx, t->t[TPCC_STOCK], sk, r->n)); /* see p_new_order */
    int64_t low = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        const struct tpcc_stock *st;
        tpcc_k_stock(k, (uint32_t)w, r->ids[i]);
        POD_TRY(must_read(tx, t->t[TPCC_STOCK], k, &st, "stock"));
        if (st->s_quantity < threshold) low++;
    }
    pod_result_i64(res, low);
    return POD_OK;
}

/* ---- registration ----------------------------------------------------------------------- */

int tpcc_register_txns(pod_db *db, struct tpcc *t, char *err, size_t errlen)
{
    static const enum pod_type no_types[6] = {POD_T_I64, POD_T_I64, POD_T_I64,
                                              POD_T_I64, POD_T_BYTES, POD_T_I64};
    static const enum pod_type i64s[8] = {POD_T_I64, POD_T_I64, POD_T_I64, POD_T_I64,
                                          POD_T_I64, POD_T_I64, POD_T_I64, POD_T_I64};
    const pod_proc_def defs[TPCC_NTXNS] = {
        {tpcc_txn_names[TPCC_NEW_ORDER_TXN], p_new_order, t, 6, no_types, false},
        {tpcc_txn_names[TPCC_PAYMENT], p_payment, t, 8, i64s, false},
        {tpcc_txn_names[TPCC_ORDER_STATUS], p_order_status, t, 4, i64s, true},
        {tpcc_txn_names[TPCC_DELIVERY], p_delivery, t, 3, i64s, false},
        {tpcc_txn_names[TPCC_STOCK_LEVEL], p_stock_level, t, 3, i64s, true},
    };
    for (int i = 0; i < TPCC_NTXNS; i++) {
        t->proc[i] = pod_proc_register(db, &defs[i], err, errlen);
        if (t->proc[i] < 0) return -1;
    }
    return 0;
}
