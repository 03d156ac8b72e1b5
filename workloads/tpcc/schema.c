/* TPC-C tables, partitioning, configuration and registration. */
#include "workloads/tpcc/tpcc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workloads/common/procs.h"

const char *const tpcc_table_names[TPCC_NTABLES] = {
    "warehouse", "district", "customer", "customer_by_name", "history", "new_order",
    "oorder",    "oorder_by_customer", "order_line", "item", "stock",
    "new_order_head", "customer_last_order", "customer_name_list",
};

const char *const tpcc_txn_names[TPCC_NTXNS] = {
    "tpcc.new_order", "tpcc.payment", "tpcc.order_status", "tpcc.delivery", "tpcc.stock_level",
};

void tpcc_config_default(struct tpcc_config *c, uint32_t warehouses)
{
    memset(c, 0, sizeof *c);
    c->warehouses = warehouses ? warehouses : 1;
    c->items = 100000;
    c->customers_per_district = 3000;
    c->new_orders_per_district = 900;
    c->remote_new_order_pct = 10;
    c->remote_payment_pct = 15;
    c->load_batch = 100;
    c->seed = 42;
}

void tpcc_config_scaled(struct tpcc_config *c, uint32_t warehouses, uint32_t items,
                        uint32_t customers_per_district)
{
    tpcc_config_default(c, warehouses);
    c->items = items ? items : 1;
    c->customers_per_district = customers_per_district ? customers_per_district : 1;
    c->new_orders_per_district = c->customers_per_district * 3 / 10;
}

uint32_t tpcc_partition(const void *key, uint32_t nparts, void *ctx)
{
    (void)ctx;
    uint32_t w = pod_key_get_u32(key);
    return w - 1 < nparts ? w - 1 : nparts ? (w - 1) % nparts : 0;
}

static const uint32_t key_sizes[TPCC_NTABLES] = {
    TPCC_K_WAREHOUSE, TPCC_K_DISTRICT, TPCC_K_CUSTOMER, TPCC_K_CUST_NAME,
    TPCC_K_HISTORY,   TPCC_K_NEW_ORDER, TPCC_K_ORDER,   TPCC_K_ORDER_CUST,
    TPCC_K_ORDER_LINE, TPCC_K_ITEM,     TPCC_K_STOCK,
    TPCC_K_NO_HEAD,   TPCC_K_LAST_ORDER, TPCC_K_NAME_LIST,
};

static const uint32_t tuple_sizes[TPCC_NTABLES] = {
    sizeof(struct tpcc_warehouse),     sizeof(struct tpcc_district),
    sizeof(struct tpcc_customer),      sizeof(struct tpcc_customer_name),
    sizeof(struct tpcc_history),       sizeof(struct tpcc_new_order),
    sizeof(struct tpcc_order),         sizeof(struct tpcc_order_by_cust),
    sizeof(struct tpcc_order_line),    sizeof(struct tpcc_item),
    sizeof(struct tpcc_stock),
    sizeof(struct tpcc_new_order_head), sizeof(struct tpcc_last_order),
    sizeof(struct tpcc_name_list),
};

#define COL(name, type, st, field) \
    {name, type, (uint32_t)offsetof(struct st, field), (uint32_t)sizeof(((struct st *)0)->field)}

/* Columns of the tables a client most likely looks at (the others are opaque). */
static const pod_column warehouse_cols[] = {
    COL("w_ytd", POD_COL_I64, tpcc_warehouse, w_ytd),
    COL("w_tax", POD_COL_I32, tpcc_warehouse, w_tax),
    COL("w_id", POD_COL_I32, tpcc_warehouse, w_id),
    COL("w_name", POD_COL_BYTES, tpcc_warehouse, w_name),
};
static const pod_column district_cols[] = {
    COL("d_ytd", POD_COL_I64, tpcc_district, d_ytd),
    COL("d_tax", POD_COL_I32, tpcc_district, d_tax),
    COL("d_w_id", POD_COL_I32, tpcc_district, d_w_id),
    COL("d_id", POD_COL_I32, tpcc_district, d_id),
    COL("d_next_o_id", POD_COL_I32, tpcc_district, d_next_o_id),
};
static const pod_column customer_cols[] = {
    COL("c_credit_lim", POD_COL_I64, tpcc_customer, c_credit_lim),
    COL("c_balance", POD_COL_I64, tpcc_customer, c_balance),
    COL("c_ytd_payment", POD_COL_I64, tpcc_customer, c_ytd_payment),
    COL("c_id", POD_COL_I32, tpcc_customer, c_id),
    COL("c_payment_cnt", POD_COL_I32, tpcc_customer, c_payment_cnt),
    COL("c_delivery_cnt", POD_COL_I32, tpcc_customer, c_delivery_cnt),
    COL("c_first", POD_COL_BYTES, tpcc_customer, c_first),
    COL("c_last", POD_COL_BYTES, tpcc_customer, c_last),
};

bool tpcc_table_used(const struct tpcc *t, int i)
{
    if (i == TPCC_CUST_NAME || i == TPCC_ORDER_CUST) return !t->point;
    if (i == TPCC_NO_HEAD || i == TPCC_LAST_ORDER || i == TPCC_NAME_LIST) return t->point;
    return true;
}

/* The rows table i holds after loading: the size of a hash index
 * (pod_table_def.expected_rows; an ordered index ignores it). */
static uint64_t loaded_rows(const struct tpcc_config *c, int i)
{
    uint64_t d = (uint64_t)c->warehouses * TPCC_DISTRICTS;
    switch (i) {
    case TPCC_WAREHOUSE: return c->warehouses;
    case TPCC_DISTRICT: case TPCC_NO_HEAD: return d;
    case TPCC_NEW_ORDER: return d * c->new_orders_per_district;
    case TPCC_ORDER_LINE: return d * c->customers_per_district * (TPCC_MIN_OL + TPCC_MAX_OL) / 2;
    case TPCC_ITEM: case TPCC_STOCK: return (uint64_t)c->warehouses * c->items;
    case TPCC_NAME_LIST: return d * tpcc_last_names(c);
    default: return d * c->customers_per_district; /* per customer, per order */
    }
}

/* The way of reading ranges, once the first table tells what the store's
 * index is. */
static void choose_reads(struct tpcc *t, const pod_table *first)
{
    t->point = t->cfg.range_reads == TPCC_RANGE_POINT ||
               (t->cfg.range_reads == TPCC_RANGE_AUTO && !pod_table_ordered(first));
}

static int create_tables(pod_db *db, struct tpcc *t, char *err, size_t errlen)
{
    for (int i = 0; i < TPCC_NTABLES; i++) {
        if (i > 0 && !tpcc_table_used(t, i)) continue;
        pod_table *tab = pod_table_find(db, tpcc_table_names[i]);
        if (tab) {
            if (pod_table_key_size(tab) != key_sizes[i] ||
                pod_table_tuple_size(tab) != tuple_sizes[i]) {
                snprintf(err, errlen, "table %s exists with another layout", tpcc_table_names[i]);
                return -1;
            }
            t->t[i] = tab;
            if (i == 0) choose_reads(t, tab);
            continue;
        }
        pod_table_def def = {
            .name = tpcc_table_names[i],
            .key_size = key_sizes[i],
            .tuple_size = tuple_sizes[i],
            .nparts = t->cfg.warehouses,
            .partition = tpcc_partition,
            .expected_rows = loaded_rows(&t->cfg, i),
        };
        /* Scanned or filled in key order: bigger leaves (see pod_table_def). */
        if (i == TPCC_CUST_NAME || i == TPCC_HISTORY || i == TPCC_NEW_ORDER ||
            i == TPCC_ORDER || i == TPCC_ORDER_CUST || i == TPCC_ORDER_LINE)
            def.index_node_size = 1024;
        if (i == TPCC_WAREHOUSE) def.ncols = 4, def.cols = warehouse_cols;
        if (i == TPCC_DISTRICT) def.ncols = 5, def.cols = district_cols;
        if (i == TPCC_CUSTOMER) def.ncols = 8, def.cols = customer_cols;
        t->t[i] = pod_table_create(db, &def, err, errlen);
        if (!t->t[i]) return -1;
        if (i == 0) choose_reads(t, t->t[i]);
    }
    return 0;
}

int tpcc_register(pod_db *db, const struct tpcc_config *cfg, char *err, size_t errlen)
{
    if (!cfg->warehouses || !cfg->items || !cfg->customers_per_district ||
        cfg->new_orders_per_district > cfg->customers_per_district) {
        snprintf(err, errlen, "tpcc: bad configuration");
        return -1;
    }
    if (tpcc_get(db)) {
        snprintf(err, errlen, "tpcc: already registered");
        return -1;
    }
    struct tpcc *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "tpcc: out of memory");
        return -1;
    }
    t->cfg = *cfg;
    if (!t->cfg.load_batch) t->cfg.load_batch = 100;
    /* The first registered procedure carries t: tpcc_free finds it there. If a
     * later step fails, the procedures registered so far stay (there is no
     * unregister) and keep t alive. */
    if (create_tables(db, t, err, errlen) != 0) {
        free(t);
        return -1;
    }
    if (tpcc_register_txns(db, t, err, errlen) != 0) {
        if (pod_proc_find(db, tpcc_txn_names[0]) < 0) free(t);
        return -1;
    }
    if (tpcc_register_load(db, t, err, errlen) != 0) return -1;
    if (tpcc_register_check(db, t, err, errlen) != 0) return -1;
    return 0;
}

struct tpcc *tpcc_get(pod_db *db) { return wl_ctx_get(db, tpcc_txn_names[0]); }

void tpcc_free(pod_db *db) { wl_ctx_free(db, tpcc_txn_names[0], "tpcc."); }
