/* The TPC-C loader (spec 4.3.3.1): per-warehouse procedures, each inserting a
 * batch of rows in one transaction, called in parallel by one worker thread
 * per range of warehouses (pod_workers_start). Row contents come from an rng
 * seeded by the row's identity, so a retried batch writes the same rows and
 * every warehouse's ITEM copy is identical. */
#include "workloads/tpcc/tpcc.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workloads/common/procs.h"

#define ARG(i) (a->v[(i)].u.i64)
/* Return at once when the unit (not empty) was loaded before: key, its
 * first row, is there (wl_unit_loaded). */
#define UNIT_LOADED(tx, table, key, nonempty)                                                   \
    do {                                                                                          \
        int done_ = (nonempty) ? wl_unit_loaded((tx), (table), (key)) : 0;                        \
        if (done_) return done_ < 0 ? done_ : WL_UNIT_SKIPPED;                                    \
    } while (0)

/* L_NAMES: range_reads POINT only. */
enum { L_ITEMS, L_STOCK, L_WAREHOUSE, L_CUSTOMERS, L_ORDERS, L_NAMES, L_COUNT };
static const char *const load_names[L_COUNT] = {
    "tpcc.load_items", "tpcc.load_stock", "tpcc.load_warehouse", "tpcc.load_customers",
    "tpcc.load_orders", "tpcc.load_names",
};
static const int load_nargs[L_COUNT] = {3, 3, 1, 4, 4, 2};

static uint64_t row_seed(const struct tpcc *t, uint64_t kind, uint64_t w, uint64_t d, uint64_t id)
{
    uint64_t x = t->cfg.seed ^ (kind * 0x9e3779b97f4a7c15ull);
    x ^= (w << 40) ^ (d << 32) ^ id;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x | 1;
}

static int ins(pod_txn *tx, pod_table *t, const unsigned char *k, const void *tuple)
{
    int rc = pod_insert(tx, t, k, tuple);
    if (rc < 0) return rc;
    if (rc != POD_OK)
        return pod_txn_fail(tx, POD_E_INTERNAL, "tpcc load: insert into %s: %s", pod_table_name(t),
                            pod_status_name(rc));
    return POD_OK;
}

/* "ORIGINAL" somewhere in 10% of the data strings (spec 4.3.3.1). */
static void data_string(uint64_t *rng, char *out, uint32_t lo, uint32_t hi)
{
    tpcc_astring(rng, out, lo, hi);
    if (tpcc_uniform(rng, 1, 10) == 1) {
        size_t n = strlen(out);
        size_t at = tpcc_uniform(rng, 0, (uint32_t)(n - 8));
        memcpy(out + at, "ORIGINAL", 8);
    }
}

static void address(uint64_t *rng, char *s1, char *s2, char *city, char *state, char *zip)
{
    tpcc_astring(rng, s1, 10, 20);
    tpcc_astring(rng, s2, 10, 20);
    tpcc_astring(rng, city, 10, 20);
    tpcc_astring(rng, state, 2, 2);
    tpcc_nstring(rng, zip, 4, 4);
    strcat(zip, "11111");
}

/* load_items(w, from, to): ITEM rows from..to of warehouse w's copy. */
static int p_load_items(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    struct tpcc *t = ctx;
    uint32_t w = (uint32_t)ARG(0);
    unsigned char k0[TPCC_K_ITEM];
    tpcc_k_item(k0, w, (uint32_t)ARG(1));
    UNIT_LOADED(tx, t->t[TPCC_ITEM], k0, ARG(1) <= ARG(2));
    for (int64_t i = ARG(1); i <= ARG(2); i++) {
        uint64_t rng = row_seed(t, L_ITEMS, 0, 0, (uint64_t)i);
        struct tpcc_item it = {0};
        it.i_id = (uint32_t)i;
        it.i_im_id = tpcc_uniform(&rng, 1, 10000);
        tpcc_astring(&rng, it.i_name, 14, 24);
        it.i_price = tpcc_uniform(&rng, 100, 10000);
        data_string(&rng, it.i_data, 26, 50);
        unsigned char k[TPCC_K_ITEM];
        tpcc_k_item(k, w, (uint32_t)i);
        POD_TRY(ins(tx, t->t[TPCC_ITEM], k, &it));
    }
    return POD_OK;
}

/* load_stock(w, from, to) */
static int p_load_stock(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    struct tpcc *t = ctx;
    uint32_t w = (uint32_t)ARG(0);
    unsigned char k0[TPCC_K_STOCK];
    tpcc_k_stock(k0, w, (uint32_t)ARG(1));
    UNIT_LOADED(tx, t->t[TPCC_STOCK], k0, ARG(1) <= ARG(2));
    for (int64_t i = ARG(1); i <= ARG(2); i++) {
        uint64_t rng = row_seed(t, L_STOCK, w, 0, (uint64_t)i);
        struct tpcc_stock st = {0};
        st.s_w_id = w;
        st.s_i_id = (uint32_t)i;
        st.s_quantity = (int32_t)tpcc_uniform(&rng, 10, 100);
        for (int d = 0; d < TPCC_DISTRICTS; d++) tpcc_astring(&rng, st.s_dist[d], 24, 24);
        data_string(&rng, st.s_data, 26, 50);
        unsigned char k[TPCC_K_STOCK];
        tpcc_k_stock(k, w, (uint32_t)i);
        POD_TRY(ins(tx, t->t[TPCC_STOCK], k, &st));
    }
    return POD_OK;
}

/* The first order of a district that is not delivered when loaded. */
static uint32_t first_new_order(const struct tpcc_config *c)
{
    return c->customers_per_district - c->new_orders_per_district + 1;
}

/* load_warehouse(w): the WAREHOUSE row and its DISTRICT rows (and, reading
 * by key, their NEW_ORDER_HEAD rows). */
static int p_load_warehouse(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    struct tpcc *t = ctx;
    uint32_t w = (uint32_t)ARG(0);
    unsigned char k0[TPCC_K_DISTRICT];
    tpcc_k_warehouse(k0, w);
    UNIT_LOADED(tx, t->t[TPCC_WAREHOUSE], k0, true);
    uint64_t rng = row_seed(t, L_WAREHOUSE, w, 0, 0);
    struct tpcc_warehouse wh = {0};
    wh.w_id = w;
    /* 300,000.00 at full scale: the sum of the districts' D_YTD */
    wh.w_ytd = (int64_t)TPCC_DISTRICTS * t->cfg.customers_per_district * 1000;
    wh.w_tax = (int32_t)tpcc_uniform(&rng, 0, 2000);
    tpcc_astring(&rng, wh.w_name, 6, 10);
    address(&rng, wh.w_street_1, wh.w_street_2, wh.w_city, wh.w_state, wh.w_zip);
    unsigned char k[TPCC_K_DISTRICT];
    tpcc_k_warehouse(k, w);
    POD_TRY(ins(tx, t->t[TPCC_WAREHOUSE], k, &wh));
    for (uint32_t d = 1; d <= TPCC_DISTRICTS; d++) {
        struct tpcc_district di = {0};
        di.d_w_id = w;
        di.d_id = d;
        /* 30,000.00 at full scale: the sum of the district's initial HISTORY
         * amounts (10.00 per customer), so D_YTD = sum(H_AMOUNT) holds too. */
        di.d_ytd = (int64_t)t->cfg.customers_per_district * 1000;
        di.d_tax = (int32_t)tpcc_uniform(&rng, 0, 2000);
        di.d_next_o_id = t->cfg.customers_per_district + 1;
        tpcc_astring(&rng, di.d_name, 6, 10);
        address(&rng, di.d_street_1, di.d_street_2, di.d_city, di.d_state, di.d_zip);
        tpcc_k_district(k, w, d);
        POD_TRY(ins(tx, t->t[TPCC_DISTRICT], k, &di));
        if (t->point) {
            struct tpcc_new_order_head head = {first_new_order(&t->cfg)};
            POD_TRY(ins(tx, t->t[TPCC_NO_HEAD], k, &head));
        }
    }
    return POD_OK;
}

/* Customer c's names, the first draws of its rng (seeded by row_seed). */
static void customer_names(const struct tpcc *t, uint64_t *rng, uint32_t c, uint32_t *last_no,
                           char first[TPCC_FIRST_LEN + 1])
{
    /* Every name once in order for the first customers, NURand beyond
     * (4.3.2.3, 4.3.3.1: 1000 names, then NURand(255, 0, 999)). */
    uint32_t names = tpcc_last_names(&t->cfg);
    *last_no = c <= names ? c - 1 : tpcc_nurand(rng, 255, 157, 0, names - 1);
    tpcc_astring(rng, first, 8, 16);
}

/* load_customers(w, d, from, to): CUSTOMER, CUSTOMER_BY_NAME (reading by
 * scans) and one HISTORY row each (history sequence 0: generators use ids >= 1). */
static int p_load_customers(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    struct tpcc *t = ctx;
    uint32_t w = (uint32_t)ARG(0), d = (uint32_t)ARG(1);
    unsigned char k0[TPCC_K_CUST_NAME];
    tpcc_k_customer(k0, w, d, (uint32_t)ARG(2));
    UNIT_LOADED(tx, t->t[TPCC_CUSTOMER], k0, ARG(2) <= ARG(3));
    for (int64_t ci = ARG(2); ci <= ARG(3); ci++) {
        uint32_t c = (uint32_t)ci;
        uint64_t rng = row_seed(t, L_CUSTOMERS, w, d, c);
        struct tpcc_customer cu = {0};
        cu.c_w_id = w;
        cu.c_d_id = d;
        cu.c_id = c;
        uint32_t last_no;
        customer_names(t, &rng, c, &last_no, cu.c_first);
        tpcc_last_name(cu.c_last, last_no);
        strcpy(cu.c_middle, "OE");
        address(&rng, cu.c_street_1, cu.c_street_2, cu.c_city, cu.c_state, cu.c_zip);
        tpcc_nstring(&rng, cu.c_phone, 16, 16);
        cu.c_since = 1;
        strcpy(cu.c_credit, tpcc_uniform(&rng, 1, 10) == 1 ? "BC" : "GC");
        cu.c_credit_lim = 5000000;
        cu.c_discount = (int32_t)tpcc_uniform(&rng, 0, 5000);
        cu.c_balance = -1000;
        cu.c_ytd_payment = 1000;
        cu.c_payment_cnt = 1;
        cu.c_delivery_cnt = 0;
        tpcc_astring(&rng, cu.c_data, 300, 500);
        unsigned char k[TPCC_K_CUST_NAME];
        tpcc_k_customer(k, w, d, c);
        POD_TRY(ins(tx, t->t[TPCC_CUSTOMER], k, &cu));
        if (!t->point) {
            struct tpcc_customer_name cn = {c};
            tpcc_k_cust_name(k, w, d, cu.c_last, cu.c_first, c);
            POD_TRY(ins(tx, t->t[TPCC_CUST_NAME], k, &cn));
        }
        struct tpcc_history h = {.h_date = 1, .h_amount = 1000, .h_c_id = c, .h_c_d_id = d,
                                 .h_c_w_id = w, .h_d_id = d, .h_w_id = w};
        tpcc_astring(&rng, h.h_data, 12, 24);
        tpcc_k_history(k, w, d, c, 0);
        POD_TRY(ins(tx, t->t[TPCC_HISTORY], k, &h));
    }
    return POD_OK;
}

/* A customer as the name list orders them: by C_FIRST (as the key of
 * CUSTOMER_BY_NAME compares it), then C_ID. */
struct named {
    uint32_t last_no, c;
    unsigned char first[TPCC_FIRST_LEN];
};

static int named_cmp(const void *a, const void *b)
{
    const struct named *x = a, *y = b;
    if (x->last_no != y->last_no) return x->last_no < y->last_no ? -1 : 1;
    int r = memcmp(x->first, y->first, TPCC_FIRST_LEN);
    if (r) return r;
    return x->c < y->c ? -1 : x->c > y->c;
}

/* load_names(w, d): the district's CUSTOMER_NAME_LIST rows, from the
 * customers' names as load_customers draws them (reading by key only). */
static int p_load_names(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    struct tpcc *t = ctx;
    uint32_t w = (uint32_t)ARG(0), d = (uint32_t)ARG(1), n = t->cfg.customers_per_district;
    /* the district's first list: that of the name of customer 1 */
    {
        uint64_t rng = row_seed(t, L_CUSTOMERS, w, d, 1);
        uint32_t last_no;
        char first[TPCC_FIRST_LEN + 1], last[TPCC_LAST_LEN + 1];
        customer_names(t, &rng, 1, &last_no, first);
        tpcc_last_name(last, last_no);
        unsigned char k0[TPCC_K_NAME_LIST];
        tpcc_k_name_list(k0, w, d, last);
        UNIT_LOADED(tx, t->t[TPCC_NAME_LIST], k0, n > 0);
    }
    struct named *cs = malloc(n * sizeof *cs);
    if (!cs) return pod_txn_fail(tx, POD_E_NOMEM, "tpcc load: out of memory");
    for (uint32_t c = 1; c <= n; c++) {
        uint64_t rng = row_seed(t, L_CUSTOMERS, w, d, c);
        char first[TPCC_FIRST_LEN + 1];
        cs[c - 1].c = c;
        customer_names(t, &rng, c, &cs[c - 1].last_no, first);
        pod_key_str(cs[c - 1].first, first, TPCC_FIRST_LEN);
    }
    qsort(cs, n, sizeof *cs, named_cmp);
    int rc = POD_OK;
    for (uint32_t i = 0, j; i < n && rc == POD_OK; i = j) {
        struct tpcc_name_list nl = {0};
        for (j = i; j < n && cs[j].last_no == cs[i].last_no; j++)
            if (nl.n < TPCC_NAME_CAP) nl.c_id[nl.n++] = cs[j].c;
        char last[TPCC_LAST_LEN + 1];
        tpcc_last_name(last, cs[i].last_no);
        if (j - i > TPCC_NAME_CAP) {
            rc = pod_txn_fail(tx, POD_E_INVALID, "tpcc load: %u customers of district %u/%u are "
                              "named %s, more than the %d a customer_name_list row holds: use "
                              "fewer customers per district or tpcc.range_reads: scan",
                              j - i, w, d, last, TPCC_NAME_CAP);
            break;
        }
        unsigned char k[TPCC_K_NAME_LIST];
        tpcc_k_name_list(k, w, d, last);
        rc = ins(tx, t->t[TPCC_NAME_LIST], k, &nl);
    }
    free(cs);
    return rc;
}

/* load_orders(w, d, from, to): ORDER rows from..to with their ORDER_LINEs,
 * each customer's order (ORDER_BY_CUSTOMER reading by scans, else
 * CUSTOMER_LAST_ORDER) and, for the last new_orders_per_district,
 * NEW_ORDER rows. O_C_ID is a permutation of the customers per district. */
static int p_load_orders(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    struct tpcc *t = ctx;
    uint32_t w = (uint32_t)ARG(0), d = (uint32_t)ARG(1);
    uint32_t n = t->cfg.customers_per_district;
    uint32_t first_new = first_new_order(&t->cfg);
    unsigned char k0[TPCC_K_ORDER_LINE];
    tpcc_k_order(k0, w, d, (uint32_t)ARG(2));
    UNIT_LOADED(tx, t->t[TPCC_ORDER], k0, ARG(2) <= ARG(3));
    uint32_t *perm = malloc(n * sizeof *perm);
    if (!perm) return pod_txn_fail(tx, POD_E_NOMEM, "tpcc load: out of memory");
    uint64_t prng = row_seed(t, L_ORDERS + 100, w, d, 0);
    for (uint32_t i = 0; i < n; i++) perm[i] = i + 1;
    for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t j = tpcc_uniform(&prng, 0, i);
        uint32_t x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    int rc = POD_OK;
    for (int64_t oi = ARG(2); oi <= ARG(3) && rc == POD_OK; oi++) {
        uint32_t o = (uint32_t)oi;
        uint64_t rng = row_seed(t, L_ORDERS, w, d, o);
        bool delivered = o < first_new;
        struct tpcc_order ord = {0};
        ord.o_w_id = w;
        ord.o_d_id = d;
        ord.o_id = o;
        ord.o_c_id = perm[o - 1];
        ord.o_entry_d = 1;
        ord.o_carrier_id = delivered ? tpcc_uniform(&rng, 1, 10) : 0;
        ord.o_ol_cnt = tpcc_uniform(&rng, TPCC_MIN_OL, TPCC_MAX_OL);
        ord.o_all_local = 1;
        unsigned char k[TPCC_K_ORDER_LINE];
        tpcc_k_order(k, w, d, o);
        if ((rc = ins(tx, t->t[TPCC_ORDER], k, &ord)) != POD_OK) break;
        if (t->point) {
            struct tpcc_last_order lo = {o}; /* a customer's only order */
            tpcc_k_customer(k, w, d, ord.o_c_id);
            rc = ins(tx, t->t[TPCC_LAST_ORDER], k, &lo);
        } else {
            struct tpcc_order_by_cust oc = {o};
            tpcc_k_order_cust(k, w, d, ord.o_c_id, o);
            rc = ins(tx, t->t[TPCC_ORDER_CUST], k, &oc);
        }
        if (rc != POD_OK) break;
        if (!delivered) {
            struct tpcc_new_order no = {w, d, o};
            tpcc_k_new_order(k, w, d, o);
            if ((rc = ins(tx, t->t[TPCC_NEW_ORDER], k, &no)) != POD_OK) break;
        }
        for (uint32_t l = 1; l <= ord.o_ol_cnt && rc == POD_OK; l++) {
            struct tpcc_order_line ol = {0};
            ol.ol_w_id = w;
            ol.ol_d_id = d;
            ol.ol_o_id = o;
            ol.ol_number = l;
            ol.ol_i_id = tpcc_uniform(&rng, 1, t->cfg.items);
            ol.ol_supply_w_id = w;
            ol.ol_quantity = 5;
            ol.ol_delivery_d = delivered ? ord.o_entry_d : 0;
            ol.ol_amount = delivered ? 0 : tpcc_uniform(&rng, 1, 999999);
            tpcc_astring(&rng, ol.ol_dist_info, 24, 24);
            tpcc_k_order_line(k, w, d, o, l);
            rc = ins(tx, t->t[TPCC_ORDER_LINE], k, &ol);
        }
    }
    free(perm);
    return rc;
}

int tpcc_register_load(pod_db *db, struct tpcc *t, char *err, size_t errlen)
{
    static const enum pod_type i64s[4] = {POD_T_I64, POD_T_I64, POD_T_I64, POD_T_I64};
    static const pod_proc_fn fns[L_COUNT] = {p_load_items, p_load_stock, p_load_warehouse,
                                             p_load_customers, p_load_orders, p_load_names};
    for (int i = 0; i < (t->point ? L_COUNT : L_NAMES); i++) {
        pod_proc_def def = {load_names[i], fns[i], t, load_nargs[i], i64s, false};
        t->load_proc[i] = pod_proc_register(db, &def, err, errlen);
        if (t->load_proc[i] < 0) return -1;
    }
    return 0;
}

/* ---- the parallel loader ------------------------------------------------------------ */

struct load_run {
    struct tpcc *t;
    tpcc_progress_fn progress;
    void *progress_arg;
    pthread_mutex_t lock;
    uint64_t rows;          /* under lock */
    int failed;             /* atomic */
    char err[256];          /* the first failure, under lock */
};

static int load_call(struct pod_worker *w, struct load_run *r, pod_result *res,
                     const struct tpcc_load_unit *u)
{
    char msg[200];
    int rc = wl_call_i64(pod_worker_db(w), w, u->proc, u->args, u->nargs, res, msg, sizeof msg);
    pthread_mutex_lock(&r->lock);
    if (rc < 0) {
        if (!__atomic_exchange_n(&r->failed, 1, __ATOMIC_ACQ_REL))
            snprintf(r->err, sizeof r->err, "%s: %s: %s", pod_proc_name(pod_worker_db(w), u->proc),
                     pod_status_name(rc), msg);
    } else {
        r->rows += u->rows;
        if (r->progress) r->progress(r->rows, r->progress_arg);
    }
    pthread_mutex_unlock(&r->lock);
    return rc < 0 ? -1 : 0;
}

static bool load_failed(struct load_run *r) { return __atomic_load_n(&r->failed, __ATOMIC_ACQUIRE); }

static void unit(struct tpcc_load_unit *out, size_t max, size_t *n, int proc, int nargs,
                 const int64_t *args, uint64_t rows)
{
    if (out && *n < max) {
        out[*n] = (struct tpcc_load_unit){.proc = proc, .nargs = nargs, .rows = rows};
        for (int i = 0; i < nargs; i++) out[*n].args[i] = args[i];
    }
    (*n)++;
}

size_t tpcc_load_units(const struct tpcc *t, uint32_t w, struct tpcc_load_unit *out, size_t max)
{
    const struct tpcc_config *c = &t->cfg;
    size_t n = 0;
    uint32_t b = c->load_batch ? c->load_batch : 100;
    for (uint32_t i = 1; i <= c->items; i += b) {
        uint32_t to = i + b - 1 < c->items ? i + b - 1 : c->items;
        int64_t v[3] = {w, i, to};
        unit(out, max, &n, t->load_proc[L_ITEMS], 3, v, to - i + 1);
        unit(out, max, &n, t->load_proc[L_STOCK], 3, v, to - i + 1);
    }
    int64_t wv[1] = {w};
    unit(out, max, &n, t->load_proc[L_WAREHOUSE], 1, wv, 1 + TPCC_DISTRICTS);
    uint32_t cust = c->customers_per_district;
    uint32_t ob = b / 10 ? b / 10 : 1; /* an order is ~11 rows */
    for (uint32_t d = 1; d <= TPCC_DISTRICTS; d++) {
        for (uint32_t i = 1; i <= cust; i += b) {
            uint32_t to = i + b - 1 < cust ? i + b - 1 : cust;
            int64_t v[4] = {w, d, i, to};
            unit(out, max, &n, t->load_proc[L_CUSTOMERS], 4, v, 3ull * (to - i + 1));
        }
        for (uint32_t i = 1; i <= cust; i += ob) {
            uint32_t to = i + ob - 1 < cust ? i + ob - 1 : cust;
            int64_t v[4] = {w, d, i, to};
            unit(out, max, &n, t->load_proc[L_ORDERS], 4, v, 12ull * (to - i + 1));
        }
        if (t->point) {
            int64_t v[2] = {w, d};
            unit(out, max, &n, t->load_proc[L_NAMES], 2, v, tpcc_last_names(c));
        }
    }
    return n;
}

uint64_t tpcc_load_rows(const struct tpcc_config *c)
{
    struct tpcc t = {.cfg = *c};
    size_t n = tpcc_load_units(&t, 1, NULL, 0);
    struct tpcc_load_unit *u = malloc(n * sizeof *u);
    uint64_t rows = 0;
    if (!u) return 0;
    tpcc_load_units(&t, 1, u, n);
    for (size_t i = 0; i < n; i++) rows += u[i].rows;
    free(u);
    return rows;
}

static void load_warehouse(struct pod_worker *wk, struct load_run *r, pod_result *res, uint32_t w)
{
    size_t n = tpcc_load_units(r->t, w, NULL, 0);
    struct tpcc_load_unit *u = malloc(n * sizeof *u);
    if (!u) {
        pthread_mutex_lock(&r->lock);
        if (!__atomic_exchange_n(&r->failed, 1, __ATOMIC_ACQ_REL))
            snprintf(r->err, sizeof r->err, "out of memory");
        pthread_mutex_unlock(&r->lock);
        return;
    }
    tpcc_load_units(r->t, w, u, n);
    for (size_t i = 0; i < n && !load_failed(r); i++)
        if (load_call(wk, r, res, &u[i])) break;
    free(u);
}

static void load_body(struct pod_worker *wk, void *arg)
{
    struct load_run *r = arg;
    pod_result *res = pod_result_new();
    if (!res) {
        pthread_mutex_lock(&r->lock);
        if (!__atomic_exchange_n(&r->failed, 1, __ATOMIC_ACQ_REL))
            snprintf(r->err, sizeof r->err, "out of memory");
        pthread_mutex_unlock(&r->lock);
        return;
    }
    int nw = pod_db_nworkers(pod_worker_db(wk));
    for (uint32_t w = 1 + (uint32_t)pod_worker_id(wk); w <= r->t->cfg.warehouses && !load_failed(r);
         w += (uint32_t)nw)
        load_warehouse(wk, r, res, w);
    pod_result_free(res);
}

int tpcc_load(pod_db *db, const struct tpcc_config *cfg, tpcc_progress_fn progress,
              void *progress_arg, char *err, size_t errlen)
{
    struct tpcc *t = tpcc_get(db);
    if (!t) {
        snprintf(err, errlen, "tpcc_load: tpcc_register first");
        return -1;
    }
    if (cfg && (cfg->warehouses != t->cfg.warehouses || cfg->items != t->cfg.items ||
                cfg->customers_per_district != t->cfg.customers_per_district)) {
        snprintf(err, errlen, "tpcc_load: configuration differs from the registered one");
        return -1;
    }
    struct load_run *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    r->t = t;
    r->progress = progress;
    r->progress_arg = progress_arg;
    pthread_mutex_init(&r->lock, NULL);
    int rc = pod_workers_start(db, NULL, 0, load_body, r, err, errlen);
    if (rc == 0) {
        pod_workers_join(db);
        if (r->failed) {
            snprintf(err, errlen, "tpcc_load: %s", r->err);
            rc = -1;
        }
    }
    pthread_mutex_destroy(&r->lock);
    free(r);
    return rc;
}
