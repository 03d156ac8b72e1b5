/* Parses `workloads.tpcc` (conf.h) with the config loader's getters. */
#include "workloads/tpcc/conf.h"

#include "conf/section.h"

enum { TP_WAREHOUSES, TP_ITEMS, TP_CUSTOMERS, TP_REMOTE_NO, TP_REMOTE_PAY, TP_LOAD, TP_RANGE_READS,
       TP_NKEYS };
/* In the order of enum tpcc_range_reads. */
static const char *const range_reads_names[] = {"auto", "scan", "point"};
static const struct conf_key tpcc_keys[TP_NKEYS] = {
    [TP_WAREHOUSES] = {"warehouses", false, "an integer in 1..10000"},
    [TP_ITEMS] = {"items", false, "an integer in 1..1000000"},
    [TP_CUSTOMERS] = {"customers_per_district", false, "an integer in 10..100000"},
    [TP_REMOTE_NO] = {"remote_new_order_pct", false, CONF_PCT_EXPECT},
    [TP_REMOTE_PAY] = {"remote_payment_pct", false, CONF_PCT_EXPECT},
    [TP_LOAD] = {"load_at_start", false, CONF_BOOL_EXPECT},
    [TP_RANGE_READS] = {"range_reads", false, "auto, scan or point"},
};

_Static_assert(sizeof(struct pod_tpcc_conf) <= POD_SECTION_BYTES, "POD_SECTION_BYTES");

static int parse(const struct conf_reader *r, const struct conf_item *w, int nhosts, void *out)
{
    struct pod_tpcc_conf *t = out;
    struct conf_item it[TP_NKEYS];
    if (conf_read_section(r, w, tpcc_keys, TP_NKEYS, it) < 0) return -1;
    *t = (struct pod_tpcc_conf){.enabled = true, .warehouses = (uint32_t)nhosts, .items = 100000,
                                .customers_per_district = 3000, .remote_new_order_pct = 10,
                                .remote_payment_pct = 15};
    if ((it[TP_WAREHOUSES].value &&
         conf_get_u32(r, &it[TP_WAREHOUSES], 1, 10000, &t->warehouses) < 0) ||
        (it[TP_ITEMS].value && conf_get_u32(r, &it[TP_ITEMS], 1, 1000000, &t->items) < 0) ||
        (it[TP_CUSTOMERS].value &&
         conf_get_u32(r, &it[TP_CUSTOMERS], 10, 100000, &t->customers_per_district) < 0) ||
        (it[TP_REMOTE_NO].value &&
         conf_get_u32(r, &it[TP_REMOTE_NO], 0, 100, &t->remote_new_order_pct) < 0) ||
        (it[TP_REMOTE_PAY].value &&
         conf_get_u32(r, &it[TP_REMOTE_PAY], 0, 100, &t->remote_payment_pct) < 0) ||
        (it[TP_LOAD].value && conf_get_bool(r, &it[TP_LOAD], &t->load_at_start) < 0))
        return -1;
    int rr = 0;
    if (it[TP_RANGE_READS].value &&
        conf_get_enum(r, &it[TP_RANGE_READS], range_reads_names, 3, &rr) < 0)
        return -1;
    t->range_reads = (uint32_t)rr;
    return 0;
}

static void digest(const void *value, uint64_t *h)
{
    const struct pod_tpcc_conf *t = value;
    conf_digest_u64(h, t->warehouses);
    conf_digest_u64(h, t->items);
    conf_digest_u64(h, t->customers_per_district);
    conf_digest_u64(h, t->remote_new_order_pct);
    conf_digest_u64(h, t->remote_payment_pct);
    conf_digest_u64(h, t->load_at_start);
    if (t->range_reads) conf_digest_u64(h, t->range_reads); /* auto: the digest as before */
}

const struct conf_section tpcc_conf_section = {
    .name = "tpcc",
    .expect = "a mapping of TPC-C settings (empty: every default)",
    .size = sizeof(struct pod_tpcc_conf),
    .parse = parse,
    .digest = digest,
};

const struct pod_tpcc_conf *pod_tpcc_conf(const struct pod_config *c)
{
    return pod_config_section(c, &tpcc_conf_section);
}
