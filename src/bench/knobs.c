#include "bench/knobs.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workloads/smallbank/conf.h"
#include "workloads/tpcc/conf.h"
#include "workloads/ycsb/conf.h"

static const char *const wl_names[BENCH_NWL] = {"tpcc", "ycsb", "smallbank"};

const char *bench_wl_name(enum bench_wl w)
{
    return (unsigned)w < BENCH_NWL ? wl_names[w] : "unknown";
}

int bench_wl_parse(const char *name, size_t len)
{
    for (int i = 0; i < BENCH_NWL; i++)
        if (strlen(wl_names[i]) == len && memcmp(wl_names[i], name, len) == 0) return i;
    return -1;
}

bool bench_wl_enabled(const struct pod_config *c, enum bench_wl w)
{
    switch (w) {
    case BENCH_TPCC: return pod_tpcc_conf(c)->enabled;
    case BENCH_YCSB: return pod_ycsb_conf(c)->enabled;
    case BENCH_SMALLBANK: return pod_smallbank_conf(c)->enabled;
    default: return false;
    }
}

void bench_knobs_from_conf(struct bench_knobs *k, const struct pod_config *c, enum bench_wl wl)
{
    memset(k, 0, sizeof *k);
    k->wl = wl;
    const struct pod_tpcc_conf *t = pod_tpcc_conf(c);
    const struct pod_ycsb_conf *y = pod_ycsb_conf(c);
    const struct pod_smallbank_conf *b = pod_smallbank_conf(c);
    switch (wl) {
    case BENCH_TPCC:
        k->remote_new_order_pct = t->remote_new_order_pct;
        k->remote_payment_pct = t->remote_payment_pct;
        break;
    case BENCH_YCSB:
        k->read_pct = y->read_pct;
        k->multi_partition_pct = y->multi_partition_pct;
        k->scramble = y->scramble;
        k->theta = y->theta;
        break;
    case BENCH_SMALLBANK:
        k->hot_accounts = b->hot_accounts;
        k->hot_pct = b->hot_pct;
        k->remote_pct = b->remote_pct;
        k->theta = b->theta;
        break;
    default:
        break;
    }
}

/* ---- the knob table ------------------------------------------------------------- */

enum knob_type { K_PCT, K_COUNT, K_THETA, K_BOOL };

struct knob {
    enum bench_wl wl;
    const char *name;
    enum knob_type type;
    size_t off;
};

#define KNOB(w, n, t) {w, #n, t, offsetof(struct bench_knobs, n)}
static const struct knob knobs[] = {
    KNOB(BENCH_TPCC, remote_new_order_pct, K_PCT),
    KNOB(BENCH_TPCC, remote_payment_pct, K_PCT),
    KNOB(BENCH_YCSB, read_pct, K_PCT),
    KNOB(BENCH_YCSB, theta, K_THETA),
    KNOB(BENCH_YCSB, multi_partition_pct, K_PCT),
    KNOB(BENCH_YCSB, scramble, K_BOOL),
    KNOB(BENCH_SMALLBANK, hot_accounts, K_COUNT),
    KNOB(BENCH_SMALLBANK, hot_pct, K_PCT),
    KNOB(BENCH_SMALLBANK, theta, K_THETA),
    KNOB(BENCH_SMALLBANK, remote_pct, K_PCT),
};
#define NKNOBS (sizeof knobs / sizeof knobs[0])

const char *bench_knob_names(enum bench_wl wl)
{
    static char names[BENCH_NWL][160];
    if ((unsigned)wl >= BENCH_NWL) return "";
    if (!names[wl][0]) {
        size_t used = 0;
        for (size_t i = 0; i < NKNOBS; i++)
            if (knobs[i].wl == wl)
                used += (size_t)snprintf(names[wl] + used, sizeof names[wl] - used, "%s%s",
                                         used ? ", " : "", knobs[i].name);
    }
    return names[wl];
}

static const char *type_expect(enum knob_type t)
{
    switch (t) {
    case K_PCT: return "an integer in 0..100 (percent)";
    case K_COUNT: return "an integer of at least 1";
    case K_THETA: return "a number in [0, 1)";
    case K_BOOL: return "true or false";
    }
    return "";
}

/* Strict decimal parsers: the whole text, no sign, no blanks. */
static bool parse_u64(const char *s, uint64_t *out)
{
    if (*s < '0' || *s > '9') return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno) return false;
    *out = v;
    return true;
}

static bool parse_theta(const char *s, double *out)
{
    if (!((*s >= '0' && *s <= '9') || *s == '.')) return false;
    char *end;
    double v = strtod(s, &end);
    if (*end || !(v >= 0.0 && v < 1.0)) return false;
    *out = v;
    return true;
}

int bench_knobs_set(struct bench_knobs *k, const char *key, const char *value, char *err,
                    size_t errlen)
{
    const struct knob *kn = NULL;
    for (size_t i = 0; i < NKNOBS && !kn; i++)
        if (knobs[i].wl == k->wl && strcmp(knobs[i].name, key) == 0) kn = &knobs[i];
    if (!kn) {
        snprintf(err, errlen, "%s has no knob '%s' (its knobs: %s)", bench_wl_name(k->wl), key,
                 bench_knob_names(k->wl));
        return -1;
    }
    char *field = (char *)k + kn->off;
    uint64_t u = 0;
    double d = 0;
    bool ok = false;
    switch (kn->type) {
    case K_PCT:
        if ((ok = parse_u64(value, &u) && u <= 100)) *(uint32_t *)(void *)field = (uint32_t)u;
        break;
    case K_COUNT:
        if ((ok = parse_u64(value, &u) && u >= 1)) *(uint64_t *)(void *)field = u;
        break;
    case K_THETA:
        if ((ok = parse_theta(value, &d))) *(double *)(void *)field = d;
        break;
    case K_BOOL:
        ok = !strcmp(value, "true") || !strcmp(value, "false");
        if (ok) *(bool *)field = !strcmp(value, "true");
        break;
    }
    if (!ok) {
        snprintf(err, errlen, "%s knob %s: '%s' is not %s", bench_wl_name(k->wl), key, value,
                 type_expect(kn->type));
        return -1;
    }
    return 0;
}

int bench_knobs_apply(struct bench_knobs *k, const char *text, size_t len, char *err,
                      size_t errlen)
{
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && text[j] != ',') j++;
        char item[128];
        if (j - i >= sizeof item) {
            snprintf(err, errlen, "knob setting '%.40s...' is too long", text + i);
            return -1;
        }
        memcpy(item, text + i, j - i);
        item[j - i] = 0;
        char *eq = strchr(item, '=');
        if (!eq || eq == item) {
            snprintf(err, errlen, "knob setting '%s' is not KEY=VALUE", item);
            return -1;
        }
        *eq = 0;
        if (bench_knobs_set(k, item, eq + 1, err, errlen)) return -1;
        i = j + 1;
    }
    return 0;
}

void bench_knobs_format(const struct bench_knobs *k, char *buf, size_t n)
{
    size_t used = 0;
    if (n) buf[0] = 0;
    for (size_t i = 0; i < NKNOBS && used < n; i++) {
        if (knobs[i].wl != k->wl) continue;
        const char *field = (const char *)k + knobs[i].off;
        char v[32];
        switch (knobs[i].type) {
        case K_PCT: snprintf(v, sizeof v, "%" PRIu32, *(const uint32_t *)(const void *)field); break;
        case K_COUNT: snprintf(v, sizeof v, "%" PRIu64, *(const uint64_t *)(const void *)field); break;
        case K_THETA: snprintf(v, sizeof v, "%.10g", *(const double *)(const void *)field); break;
        case K_BOOL: snprintf(v, sizeof v, "%s", *(const bool *)field ? "true" : "false"); break;
        }
        used += (size_t)snprintf(buf + used, n - used, "%s%s=%s", used ? "," : "", knobs[i].name, v);
    }
}
