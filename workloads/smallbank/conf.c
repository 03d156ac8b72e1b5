/* Parses `workloads.smallbank` (conf.h) with the config loader's getters. */
#include "workloads/smallbank/conf.h"

#include "conf/section.h"

#define MAX_ROWS (1LL << 40)

enum { SB_ACCOUNTS, SB_PARTITIONS, SB_HOT, SB_HOT_PCT, SB_THETA, SB_REMOTE, SB_LOAD,
       SB_NKEYS };
static const struct conf_key smallbank_keys[SB_NKEYS] = {
    [SB_ACCOUNTS] = {"accounts", false, "an integer in 2..1099511627776"},
    [SB_PARTITIONS] = {"partitions", false, "an integer in 1..4096, at most the accounts"},
    [SB_HOT] = {"hot_accounts", false, "an integer in 1..accounts"},
    [SB_HOT_PCT] = {"hot_pct", false, CONF_PCT_EXPECT},
    [SB_THETA] = {"theta", false, CONF_THETA_EXPECT},
    [SB_REMOTE] = {"remote_pct", false, CONF_PCT_EXPECT},
    [SB_LOAD] = {"load_at_start", false, CONF_BOOL_EXPECT},
};

_Static_assert(sizeof(struct pod_smallbank_conf) <= POD_SECTION_BYTES, "POD_SECTION_BYTES");

static int parse(const struct conf_reader *r, const struct conf_item *w, int nhosts, void *out)
{
    struct pod_smallbank_conf *b = out;
    struct conf_item it[SB_NKEYS];
    int64_t n;
    if (conf_read_section(r, w, smallbank_keys, SB_NKEYS, it) < 0) return -1;
    *b = (struct pod_smallbank_conf){.enabled = true, .accounts = 100000,
                                     .partitions = (uint32_t)nhosts, .hot_pct = 90};
    if (it[SB_ACCOUNTS].value) {
        if (conf_get_i64(r, &it[SB_ACCOUNTS], 2, MAX_ROWS, &n) < 0) return -1;
        b->accounts = (uint64_t)n;
    }
    if ((it[SB_PARTITIONS].value &&
         conf_get_u32(r, &it[SB_PARTITIONS], 1, 4096, &b->partitions) < 0) ||
        (it[SB_HOT_PCT].value && conf_get_u32(r, &it[SB_HOT_PCT], 0, 100, &b->hot_pct) < 0) ||
        (it[SB_THETA].value && conf_get_theta(r, &it[SB_THETA], &b->theta) < 0) ||
        (it[SB_REMOTE].value && conf_get_u32(r, &it[SB_REMOTE], 0, 100, &b->remote_pct) < 0) ||
        (it[SB_LOAD].value && conf_get_bool(r, &it[SB_LOAD], &b->load_at_start) < 0))
        return -1;
    b->hot_accounts = b->accounts * 4 / 100 ? b->accounts * 4 / 100 : 1;
    if (it[SB_HOT].value) {
        if (conf_get_i64(r, &it[SB_HOT], 1, (int64_t)b->accounts, &n) < 0) return -1;
        b->hot_accounts = (uint64_t)n;
    }
    if (b->partitions > b->accounts) {
        const struct conf_item *at =
            it[SB_PARTITIONS].value ? &it[SB_PARTITIONS] : &it[SB_ACCOUNTS];
        const struct ynode *where = at->value ? at->value : w->key;
        return conf_fail(r, where, at->value ? at->path : "workloads.smallbank.accounts",
                         "%u partitions for %llu accounts (expected at most one partition per "
                         "account)", b->partitions, (unsigned long long)b->accounts);
    }
    return 0;
}

static void digest(const void *value, uint64_t *h)
{
    const struct pod_smallbank_conf *b = value;
    conf_digest_u64(h, b->accounts);
    conf_digest_u64(h, b->partitions);
    conf_digest_u64(h, b->hot_accounts);
    conf_digest_u64(h, b->hot_pct);
    conf_digest_double(h, b->theta);
    conf_digest_u64(h, b->remote_pct);
    conf_digest_u64(h, b->load_at_start);
}

const struct conf_section smallbank_conf_section = {
    .name = "smallbank",
    .expect = "a mapping of SmallBank settings (empty: every default)",
    .size = sizeof(struct pod_smallbank_conf),
    .parse = parse,
    .digest = digest,
};

const struct pod_smallbank_conf *pod_smallbank_conf(const struct pod_config *c)
{
    return pod_config_section(c, &smallbank_conf_section);
}
