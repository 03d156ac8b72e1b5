/* TPC-C (spec v5.11) as PodDB stored procedures: schema, keys, loader,
 * input generator, the five transactions and consistency conditions 1-4.
 * docs/tpcc.md describes the design and the deviations from the spec.
 *
 * Keys are big-endian composites that start with the warehouse id (u32), so
 * memcmp order is (w, d, ...) order and the partition function (warehouse
 * id - 1, read from the key's first 4 bytes) puts one warehouse in each
 * partition. Money is kept in cents (int64) so condition 1 is exact. */
#ifndef PODDB_WORKLOADS_TPCC_H
#define PODDB_WORKLOADS_TPCC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "poddb/proc.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TPCC_DISTRICTS 10      /* per warehouse (fixed, as in the spec) */
#define TPCC_MAX_OL 15         /* order lines per order: 5..15 */
#define TPCC_MIN_OL 5
#define TPCC_LAST_LEN 16       /* C_LAST as stored and in keys (spec: up to 16) */
#define TPCC_FIRST_LEN 16

/* ---- configuration ---------------------------------------------------------- */

/* How the transactions read their ranges (docs/tpcc.md, "Range reads"):
 * by scans of the ordered tables, or by key (the latest orders by their
 * ids, a district's oldest new order by a cursor, a customer's last order
 * and the customers of a last name from tables kept for it). AUTO: by key
 * when the store's index is not ordered (pod_table_ordered). */
enum tpcc_range_reads { TPCC_RANGE_AUTO, TPCC_RANGE_SCAN, TPCC_RANGE_POINT };

struct tpcc_config {
    uint32_t warehouses;              /* >= 1; one partition each */
    uint32_t items;                   /* spec 100000 */
    uint32_t customers_per_district;  /* spec 3000; also the initial orders per district */
    uint32_t new_orders_per_district; /* spec 900: the last ones of the initial orders */
    uint32_t remote_new_order_pct;    /* NewOrders with one remote supply warehouse (Tigon: 10) */
    uint32_t remote_payment_pct;      /* Payments of a remote customer (Tigon: 15) */
    uint32_t hosts;                   /* warehouse w lives on host (w - 1) % hosts: a
                                       * remote warehouse is on another host (0 or 1:
                                       * any other warehouse) */
    uint32_t load_batch;              /* rows per loading transaction (default 100) */
    uint64_t seed;                    /* loader data seed */
    enum tpcc_range_reads range_reads; /* default AUTO */
};

/* The spec's row counts for w warehouses, remote knobs 10/15. */
void tpcc_config_default(struct tpcc_config *c, uint32_t warehouses);
/* Scaled down: items, customers per district; new orders 30% of orders. */
void tpcc_config_scaled(struct tpcc_config *c, uint32_t warehouses, uint32_t items,
                        uint32_t customers_per_district);

/* ---- tuples ------------------------------------------------------------------- */

struct tpcc_warehouse {
    int64_t w_ytd;            /* cents */
    int32_t w_tax;            /* basis points (0..2000 = 0.0000..0.2000) */
    uint32_t w_id;
    char w_name[11], w_street_1[21], w_street_2[21], w_city[21], w_state[3], w_zip[10];
};

struct tpcc_district {
    int64_t d_ytd;
    int32_t d_tax;
    uint32_t d_w_id, d_id;
    uint32_t d_next_o_id;
    char d_name[11], d_street_1[21], d_street_2[21], d_city[21], d_state[3], d_zip[10];
};

struct tpcc_customer {
    int64_t c_credit_lim, c_balance, c_ytd_payment;
    int64_t c_since;
    uint32_t c_w_id, c_d_id, c_id;
    int32_t c_discount;       /* basis points (0..5000) */
    uint32_t c_payment_cnt, c_delivery_cnt;
    char c_first[TPCC_FIRST_LEN + 1], c_middle[3], c_last[TPCC_LAST_LEN + 1];
    char c_street_1[21], c_street_2[21], c_city[21], c_state[3], c_zip[10], c_phone[17];
    char c_credit[3];
    char c_data[501];
};

struct tpcc_customer_name {  /* CUSTOMER_BY_NAME value */
    uint32_t c_id;
};

struct tpcc_history {
    int64_t h_date, h_amount;
    uint32_t h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id;
    char h_data[25];
};

struct tpcc_new_order {
    uint32_t no_w_id, no_d_id, no_o_id;
};

struct tpcc_order {
    int64_t o_entry_d;
    uint32_t o_w_id, o_d_id, o_id, o_c_id;
    uint32_t o_carrier_id;    /* 0 = null */
    uint32_t o_ol_cnt;
    uint32_t o_all_local;
};

struct tpcc_order_by_cust {  /* ORDER_BY_CUSTOMER value */
    uint32_t o_id;
};

/* Read by key (range_reads POINT) only: */
struct tpcc_new_order_head { /* NEW_ORDER_HEAD value: a district's delivery cursor */
    uint32_t no_o_id;         /* its oldest undelivered order; D_NEXT_O_ID when none */
};

struct tpcc_last_order {     /* CUSTOMER_LAST_ORDER value */
    uint32_t o_id;            /* the customer's latest order */
};

/* Customers of one last name in one district (the loader's only: customers
 * are never added at run time). At most TPCC_NAME_CAP (a 512-byte tuple):
 * the loader's names give one name at most 86 customers with up to 3000
 * customers per district (the spec's count) and any number of warehouses,
 * 127 at ~4500; beyond, the loader fails, naming the district and the name
 * (docs/tpcc.md). */
#define TPCC_NAME_CAP 127
struct tpcc_name_list {      /* CUSTOMER_NAME_LIST value */
    uint32_t n;
    uint32_t c_id[TPCC_NAME_CAP]; /* sorted by C_FIRST, then C_ID */
};

struct tpcc_order_line {
    int64_t ol_delivery_d;    /* 0 = null */
    int64_t ol_amount;        /* cents */
    uint32_t ol_w_id, ol_d_id, ol_o_id, ol_number;
    uint32_t ol_i_id, ol_supply_w_id, ol_quantity;
    char ol_dist_info[25];
};

struct tpcc_item {
    int64_t i_price;          /* cents */
    uint32_t i_id, i_im_id;
    char i_name[25], i_data[51];
};

struct tpcc_stock {
    int64_t s_ytd;
    uint32_t s_w_id, s_i_id;
    int32_t s_quantity;
    uint32_t s_order_cnt, s_remote_cnt;
    char s_dist[TPCC_DISTRICTS][25];
    char s_data[51];
};

/* ---- keys (big-endian, warehouse first) ---------------------------------------- */

#define TPCC_K_WAREHOUSE 4   /* w */
#define TPCC_K_DISTRICT 8    /* w d */
#define TPCC_K_CUSTOMER 12   /* w d c */
#define TPCC_K_CUST_NAME 44  /* w d c_last[16] c_first[16] c */
#define TPCC_K_HISTORY 20    /* w d seq(u64) c — w, d: the paying district */
#define TPCC_K_NEW_ORDER 12  /* w d o */
#define TPCC_K_ORDER 12      /* w d o */
#define TPCC_K_ORDER_CUST 16 /* w d c o */
#define TPCC_K_ORDER_LINE 16 /* w d o ol */
#define TPCC_K_ITEM 8        /* w i: one copy of ITEM per warehouse partition */
#define TPCC_K_STOCK 8       /* w i */
#define TPCC_K_NO_HEAD 8     /* w d */
#define TPCC_K_LAST_ORDER 12 /* w d c */
#define TPCC_K_NAME_LIST 24  /* w d c_last[16] */

static inline void tpcc_k_warehouse(unsigned char *k, uint32_t w) { pod_key_u32(k, w); }
static inline void tpcc_k_district(unsigned char *k, uint32_t w, uint32_t d)
{
    pod_key_u32(k, w);
    pod_key_u32(k + 4, d);
}
static inline void tpcc_k_customer(unsigned char *k, uint32_t w, uint32_t d, uint32_t c)
{
    tpcc_k_district(k, w, d);
    pod_key_u32(k + 8, c);
}
static inline void tpcc_k_cust_name(unsigned char *k, uint32_t w, uint32_t d, const char *last,
                                    const char *first, uint32_t c)
{
    tpcc_k_district(k, w, d);
    pod_key_str(k + 8, last, TPCC_LAST_LEN);
    pod_key_str(k + 8 + TPCC_LAST_LEN, first, TPCC_FIRST_LEN);
    pod_key_u32(k + 8 + TPCC_LAST_LEN + TPCC_FIRST_LEN, c);
}
/* seq before c: a generator's payments append to their district's run
 * (HISTORY is never read by key; its leaves fill as appends do). */
static inline void tpcc_k_history(unsigned char *k, uint32_t w, uint32_t d, uint32_t c,
                                  uint64_t seq)
{
    tpcc_k_district(k, w, d);
    pod_key_u64(k + 8, seq);
    pod_key_u32(k + 16, c);
}
static inline void tpcc_k_new_order(unsigned char *k, uint32_t w, uint32_t d, uint32_t o)
{
    tpcc_k_customer(k, w, d, o);
}
static inline void tpcc_k_order(unsigned char *k, uint32_t w, uint32_t d, uint32_t o)
{
    tpcc_k_customer(k, w, d, o);
}
static inline void tpcc_k_order_cust(unsigned char *k, uint32_t w, uint32_t d, uint32_t c,
                                     uint32_t o)
{
    tpcc_k_customer(k, w, d, c);
    pod_key_u32(k + 12, o);
}
static inline void tpcc_k_order_line(unsigned char *k, uint32_t w, uint32_t d, uint32_t o,
                                     uint32_t ol)
{
    tpcc_k_customer(k, w, d, o);
    pod_key_u32(k + 12, ol);
}
static inline void tpcc_k_item(unsigned char *k, uint32_t w, uint32_t i)
{
    pod_key_u32(k, w);
    pod_key_u32(k + 4, i);
}
static inline void tpcc_k_stock(unsigned char *k, uint32_t w, uint32_t i)
{
    pod_key_u32(k, w);
    pod_key_u32(k + 4, i);
}

static inline void tpcc_k_name_list(unsigned char *k, uint32_t w, uint32_t d, const char *last)
{
    tpcc_k_district(k, w, d);
    pod_key_str(k + 8, last, TPCC_LAST_LEN);
}

/* The partition function of every TPC-C table: (w - 1) % nparts, w read
 * from the key's first 4 bytes. */
uint32_t tpcc_partition(const void *key, uint32_t nparts, void *ctx);

/* ---- tables and procedures ----------------------------------------------------- */

enum tpcc_table_id {
    TPCC_WAREHOUSE, TPCC_DISTRICT, TPCC_CUSTOMER, TPCC_CUST_NAME, TPCC_HISTORY,
    TPCC_NEW_ORDER, TPCC_ORDER, TPCC_ORDER_CUST, TPCC_ORDER_LINE, TPCC_ITEM, TPCC_STOCK,
    TPCC_NO_HEAD, TPCC_LAST_ORDER, TPCC_NAME_LIST, /* range_reads POINT only */
    TPCC_NTABLES
};
extern const char *const tpcc_table_names[TPCC_NTABLES];

enum tpcc_txn {
    TPCC_NEW_ORDER_TXN, TPCC_PAYMENT, TPCC_ORDER_STATUS, TPCC_DELIVERY, TPCC_STOCK_LEVEL,
    TPCC_NTXNS
};
extern const char *const tpcc_txn_names[TPCC_NTXNS]; /* "tpcc.new_order", ... */

/* The state the procedures share (their ctx): configuration, tables. */
struct tpcc {
    struct tpcc_config cfg;
    bool point;               /* ranges read by key (range_reads POINT, or AUTO on an
                               * unordered store); decided by tpcc_register */
    pod_table *t[TPCC_NTABLES]; /* NULL: a table this way of reading does not use
                                 * (CUST_NAME, ORDER_CUST when point; the last three when not) */
    int proc[TPCC_NTXNS];     /* procedure ids of the five transactions */
    int load_proc[6];         /* loader procedures (load.c); the last: point only */
    int check_proc[4];        /* the checker's read-only procedures (check.c); the last:
                               * point only */
};

/* Create the tables (if absent) and register the five transactions plus the
 * loader's and checker's procedures; before workers run. 0, or -1 and err. */
int tpcc_register(pod_db *db, const struct tpcc_config *cfg, char *err, size_t errlen);
/* The state tpcc_register made for db (NULL if none), and its release (call
 * before pod_db_free; the procedures must not run afterwards). */
struct tpcc *tpcc_get(pod_db *db);
void tpcc_free(pod_db *db);

/* Populate the database (tpcc_register first; no workers running): one
 * worker thread per range of warehouses through pod_workers_start, batches of
 * cfg->load_batch rows per transaction. progress (may be NULL) is called from
 * the loading threads, serialised, with the rows loaded so far. 0 or -1. */
typedef void (*tpcc_progress_fn)(uint64_t rows_loaded, void *arg);
int tpcc_load(pod_db *db, const struct tpcc_config *cfg, tpcc_progress_fn progress,
              void *progress_arg, char *err, size_t errlen);

/* Consistency conditions 1-4 (spec 3.3.2.1-4) per warehouse and district, as
 * read-only transactions through the admin worker (no workers may run: it
 * uses the admin worker, and pins the district to blame for condition 1 by
 * comparing D_YTD with HISTORY across transactions).
 * 0 if all hold, else -1 and a report naming condition, warehouse and
 * district of each failure. */
int tpcc_check(pod_db *db, const struct tpcc_config *cfg, char *report, size_t reportlen);

/* Conditions 1-4 of warehouse w only, through wk (a worker on the calling
 * thread, outside any transaction; NULL: the admin worker). Meaningful when
 * nothing writes to the warehouse meanwhile. Returns the number of failures
 * (0: all hold), described in report. */
struct pod_worker;
int tpcc_check_warehouse(pod_db *db, struct pod_worker *wk, uint32_t w, char *report,
                         size_t reportlen);

/* One call of a loader procedure: procedure id, int64 arguments, rows inserted. */
struct tpcc_load_unit {
    int proc;
    int nargs;
    int64_t args[4];
    uint64_t rows;
};

/* The loader calls that populate warehouse w (they only insert, so they may
 * run in any order and in parallel). Fills at most max units of out (out may
 * be NULL) and returns how many there are. */
size_t tpcc_load_units(const struct tpcc *t, uint32_t w, struct tpcc_load_unit *out, size_t max);
/* The rows those units report for one warehouse (an order with its lines
 * counts as 12: a progress measure, not an exact row count). */
uint64_t tpcc_load_rows(const struct tpcc_config *c);

/* ---- input generation (gen.c) ---------------------------------------------------- */

/* Run-time constants C for NURand (spec 2.1.6). */
struct tpcc_gen {
    struct tpcc_config cfg;
    uint32_t c_last, c_id, ol_i_id;
    uint32_t id;              /* 1..2^31-1: HISTORY keys are unique across generators */
    uint64_t hist_seq;
};

#define TPCC_MAX_ARGS 8

/* One transaction's inputs, ready for pod_call (args point into the struct:
 * do not copy it while the call runs). */
struct tpcc_call {
    enum tpcc_txn txn;
    int nargs;
    pod_value args[TPCC_MAX_ARGS];
    uint32_t lines[TPCC_MAX_OL * 3]; /* NewOrder: (i_id, supply_w, quantity) per line */
    bool rollback;            /* NewOrder: the last item id is invalid (1%) */
    bool remote;              /* NewOrder with a remote supply warehouse / remote Payment */
};

uint64_t tpcc_rand(uint64_t *rng);
/* Uniform in [lo, hi]. */
uint32_t tpcc_uniform(uint64_t *rng, uint32_t lo, uint32_t hi);
/* NURand(A, x, y) with the run constant C. */
uint32_t tpcc_nurand(uint64_t *rng, uint32_t A, uint32_t C, uint32_t x, uint32_t y);
/* The last name of number n (0..999): three syllables, spec 4.3.2.3. */
void tpcc_last_name(char out[TPCC_LAST_LEN + 1], uint32_t n);

void tpcc_gen_init(struct tpcc_gen *g, const struct tpcc_config *cfg, uint32_t id, uint64_t seed);
/* The next transaction of the standard mix (NewOrder 45, Payment 43,
 * OrderStatus 4, Delivery 4, StockLevel 4) for a terminal of home warehouse
 * home_w (and district: random). */
void tpcc_next_call(struct tpcc_gen *g, uint64_t *rng, uint32_t home_w, struct tpcc_call *out);
/* The inputs of one given transaction type. */
void tpcc_make_call(struct tpcc_gen *g, uint64_t *rng, uint32_t home_w, enum tpcc_txn txn,
                    struct tpcc_call *out);

/* ---- procedure arguments (all int64 unless noted) ------------------------------------
 * tpcc.new_order    (w, d, c, ol_cnt, lines: bytes of ol_cnt packed u32 triples
 *                    (i_id, supply_w, quantity) in host order, entry_date)
 *                   result: o_id, total (cents, after tax and discount); an invalid
 *                   i_id makes it POD_USER_ABORT after the reads (spec 2.4.2.3).
 * tpcc.payment      (w, d, c_w, c_d, c_id or 0, c_last number (0..999) used when
 *                    c_id is 0, amount cents, history seq)
 *                   result: c_id, c_balance
 * tpcc.order_status (w, d, c_id or 0, c_last number)
 *                   result row 0: c_id, c_balance, o_id, o_carrier_id, ol count;
 *                   then one row per line: i_id, supply_w, quantity, amount, delivery_d
 * tpcc.delivery     (w, carrier, delivery_date) result: orders delivered
 * tpcc.stock_level  (w, d, threshold) result: low-stock count */

/* ---- internal: shared by the files of workloads/tpcc ------------------------------ */

int tpcc_register_txns(pod_db *db, struct tpcc *t, char *err, size_t errlen);  /* procs.c */
int tpcc_register_load(pod_db *db, struct tpcc *t, char *err, size_t errlen);  /* load.c */
int tpcc_register_check(pod_db *db, struct tpcc *t, char *err, size_t errlen); /* check.c */
/* Random strings of length lo..hi (NUL-terminated; out has hi + 1 bytes). */
void tpcc_astring(uint64_t *rng, char *out, uint32_t lo, uint32_t hi);
void tpcc_nstring(uint64_t *rng, char *out, uint32_t lo, uint32_t hi);
/* The number of customer last names in use: customers per district / 3,
 * between 1 and 1000 (1000 at full scale). */
uint32_t tpcc_last_names(const struct tpcc_config *c);
/* Whether table i is used by this way of reading ranges (schema.c). */
bool tpcc_table_used(const struct tpcc *t, int i);

#ifdef __cplusplus
}
#endif
#endif
