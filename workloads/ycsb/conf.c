/* Parses `workloads.ycsb` (conf.h) with the config loader's getters. */
#include "workloads/ycsb/conf.h"

#include "conf/section.h"

#define MAX_ROWS (1LL << 40)

enum { YC_TUPLES, YC_PARTITIONS, YC_READ_PCT, YC_THETA, YC_MP, YC_SCRAMBLE, YC_LOAD, YC_NKEYS };
static const struct conf_key ycsb_keys[YC_NKEYS] = {
    [YC_TUPLES] = {"tuples", false, "an integer in 10..1099511627776, at least 10 per partition"},
    [YC_PARTITIONS] = {"partitions", false, "an integer in 1..4096"},
    [YC_READ_PCT] = {"read_pct", false, CONF_PCT_EXPECT},
    [YC_THETA] = {"theta", false, CONF_THETA_EXPECT},
    [YC_MP] = {"multi_partition_pct", false, CONF_PCT_EXPECT},
    [YC_SCRAMBLE] = {"scramble", false, CONF_BOOL_EXPECT},
    [YC_LOAD] = {"load_at_start", false, CONF_BOOL_EXPECT},
};

_Static_assert(sizeof(struct pod_ycsb_conf) <= POD_SECTION_BYTES, "POD_SECTION_BYTES");

static int parse(const struct conf_reader *r, const struct conf_item *w, int nhosts, void *out)
{
    struct pod_ycsb_conf *y = out;
    struct conf_item it[YC_NKEYS];
    int64_t n;
    if (conf_read_section(r, w, ycsb_keys, YC_NKEYS, it) < 0) return -1;
    *y = (struct pod_ycsb_conf){.enabled = true, .tuples = 1000000, .partitions = (uint32_t)nhosts,
                                .read_pct = 50, .theta = 0.99, .multi_partition_pct = 10};
    if (it[YC_TUPLES].value) {
        if (conf_get_i64(r, &it[YC_TUPLES], 10, MAX_ROWS, &n) < 0) return -1;
        y->tuples = (uint64_t)n;
    }
    if ((it[YC_PARTITIONS].value &&
         conf_get_u32(r, &it[YC_PARTITIONS], 1, 4096, &y->partitions) < 0) ||
        (it[YC_READ_PCT].value && conf_get_u32(r, &it[YC_READ_PCT], 0, 100, &y->read_pct) < 0) ||
        (it[YC_THETA].value && conf_get_theta(r, &it[YC_THETA], &y->theta) < 0) ||
        (it[YC_MP].value && conf_get_u32(r, &it[YC_MP], 0, 100, &y->multi_partition_pct) < 0) ||
        (it[YC_SCRAMBLE].value && conf_get_bool(r, &it[YC_SCRAMBLE], &y->scramble) < 0) ||
        (it[YC_LOAD].value && conf_get_bool(r, &it[YC_LOAD], &y->load_at_start) < 0))
        return -1;
    /* A transaction picks 10 distinct keys in a partition. */
    if (y->tuples / y->partitions < 10) {
        const struct conf_item *at = it[YC_TUPLES].value ? &it[YC_TUPLES] : &it[YC_PARTITIONS];
        const struct ynode *where = at->value ? at->value : w->key;
        return conf_fail(r, where, at->value ? at->path : "workloads.ycsb.tuples",
                         "%llu tuples in %u partitions are fewer than 10 per partition "
                         "(expected at least %llu tuples)",
                         (unsigned long long)y->tuples, y->partitions,
                         10ULL * y->partitions);
    }
    return 0;
}

static void digest(const void *value, uint64_t *h)
{
    const struct pod_ycsb_conf *y = value;
    conf_digest_u64(h, y->tuples);
    conf_digest_u64(h, y->partitions);
    conf_digest_u64(h, y->read_pct);
    conf_digest_double(h, y->theta);
    conf_digest_u64(h, y->multi_partition_pct);
    conf_digest_u64(h, y->scramble);
    conf_digest_u64(h, y->load_at_start);
}

const struct conf_section ycsb_conf_section = {
    .name = "ycsb",
    .expect = "a mapping of YCSB settings (empty: every default)",
    .size = sizeof(struct pod_ycsb_conf),
    .parse = parse,
    .digest = digest,
};

const struct pod_ycsb_conf *pod_ycsb_conf(const struct pod_config *c)
{
    return pod_config_section(c, &ycsb_conf_section);
}
