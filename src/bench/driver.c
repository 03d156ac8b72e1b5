#include "bench/driver.h"

#include <stdio.h>
#include <string.h>

#include "util/clock.h"
#include "util/mix.h"
#include "workloads/common/range.h"
#include "workloads/smallbank/conf.h"
#include "workloads/tpcc/conf.h"
#include "workloads/ycsb/conf.h"

void bench_tpcc_config(const struct pod_config *c, struct tpcc_config *out)
{
    const struct pod_tpcc_conf *t = pod_tpcc_conf(c);
    tpcc_config_scaled(out, t->warehouses, t->items, t->customers_per_district);
    out->remote_new_order_pct = t->remote_new_order_pct;
    out->remote_payment_pct = t->remote_payment_pct;
    out->range_reads = (enum tpcc_range_reads)t->range_reads;
    out->hosts = (uint32_t)c->nhosts;
}

void bench_ycsb_config(const struct pod_config *c, struct ycsb_config *out)
{
    const struct pod_ycsb_conf *y = pod_ycsb_conf(c);
    ycsb_config_default(out, y->tuples, y->partitions);
    out->read_pct = y->read_pct;
    out->theta = y->theta;
    out->multi_partition = y->multi_partition_pct / 100.0;
    out->scramble = y->scramble;
    out->hosts = (uint32_t)c->nhosts;
}

void bench_smallbank_config(const struct pod_config *c, struct sb_config *out)
{
    const struct pod_smallbank_conf *b = pod_smallbank_conf(c);
    sb_config_default(out, b->accounts, b->partitions);
    out->hot = b->hot_accounts;
    out->hot_pct = b->hot_pct;
    out->hosts = (uint32_t)c->nhosts;
}

int bench_workload_init(struct bench_workload *w, const struct pod_config *c,
                        const struct bench_knobs *k, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    if (!bench_wl_enabled(c, k->wl)) {
        snprintf(err, errlen, "%s: workload %s is not in the config (add it under workloads:)",
                 c->source, bench_wl_name(k->wl));
        return -1;
    }
    w->wl = k->wl;
    w->knobs = *k;
    w->nhosts = c->nhosts;
    switch (k->wl) {
    case BENCH_TPCC:
        bench_tpcc_config(c, &w->tpcc);
        w->tpcc.remote_new_order_pct = k->remote_new_order_pct;
        w->tpcc.remote_payment_pct = k->remote_payment_pct;
        w->nparts = w->tpcc.warehouses;
        break;
    case BENCH_YCSB: {
        struct ycsb_config y;
        bench_ycsb_config(c, &y);
        y.read_pct = k->read_pct;
        y.theta = k->theta;
        y.multi_partition = k->multi_partition_pct / 100.0;
        y.scramble = k->scramble;
        ycsb_gen_init(&w->ycsb, &y);
        w->nparts = y.nparts;
        break;
    }
    case BENCH_SMALLBANK: {
        struct sb_config s;
        bench_smallbank_config(c, &s);
        if (k->hot_accounts < 1 || k->hot_accounts > s.accounts) {
            snprintf(err, errlen, "smallbank knob hot_accounts: %llu is out of range (1..%llu)",
                     (unsigned long long)k->hot_accounts, (unsigned long long)s.accounts);
            return -1;
        }
        s.hot = k->hot_accounts;
        s.hot_pct = k->hot_pct;
        sb_gen_init(&w->sb, &s, k->theta, k->remote_pct);
        w->nparts = s.nparts;
        break;
    }
    default:
        snprintf(err, errlen, "unknown workload");
        return -1;
    }
    return 0;
}

/* ---- transaction types --------------------------------------------------------------- */

static const char *const ycsb_types[1] = {"ycsb.txn"};

int bench_ntypes(enum bench_wl wl)
{
    switch (wl) {
    case BENCH_TPCC: return TPCC_NTXNS;
    case BENCH_YCSB: return 1;
    case BENCH_SMALLBANK: return SB_NTXNS;
    default: return 0;
    }
}

const char *bench_type_name(enum bench_wl wl, int type)
{
    if (type < 0 || type >= bench_ntypes(wl)) return "?";
    switch (wl) {
    case BENCH_TPCC: return tpcc_txn_names[type];
    case BENCH_YCSB: return ycsb_types[type];
    case BENCH_SMALLBANK: return sb_txn_names[type];
    default: return "?";
    }
}

/* ---- ownership ------------------------------------------------------------------------- */

uint32_t bench_owned_count(const struct bench_workload *w, int host)
{
    uint32_t h = (uint32_t)host, n = (uint32_t)w->nhosts;
    return w->nparts > h ? (w->nparts - h + n - 1) / n : 0;
}

/* ---- terminals ---------------------------------------------------------------------------- */

int bench_terminal_init(struct bench_terminal *t, const struct bench_workload *w, int host,
                        int term, int nterms, uint32_t gen_id, uint64_t seed)
{
    memset(t, 0, sizeof *t);
    t->w = w;
    uint32_t owned = bench_owned_count(w, host);
    if (!owned || nterms < 1 || term < 0) return -1;
    uint32_t k0, kstep, count;
    if ((uint32_t)nterms <= owned) {
        k0 = (uint32_t)term;
        kstep = (uint32_t)nterms;
        count = (owned - k0 + kstep - 1) / kstep;
    } else {
        k0 = (uint32_t)term % owned;
        kstep = 1;
        count = 1;
    }
    t->home_first = (uint32_t)host + k0 * (uint32_t)w->nhosts;
    t->home_step = kstep * (uint32_t)w->nhosts;
    t->nhomes = count;
    t->rng = pod_mix64(seed ^ pod_mix64(((uint64_t)host << 32) | (uint32_t)term)) | 1;
    if (w->wl == BENCH_TPCC) tpcc_gen_init(&t->tpcc, &w->tpcc, gen_id, t->rng);
    return 0;
}

static uint32_t pick_home(struct bench_terminal *t)
{
    uint32_t i = t->nhomes > 1 ? (uint32_t)((pod_rand(&t->rng) >> 11) % t->nhomes) : 0;
    return t->home_first + i * t->home_step;
}

void bench_next(struct bench_terminal *t, struct bench_call *c)
{
    const struct bench_workload *w = t->w;
    uint32_t home = pick_home(t);
    c->wl = w->wl;
    c->remote = c->rollback = false;
    c->nwrites = 0;
    switch (w->wl) {
    case BENCH_TPCC:
        tpcc_next_call(&t->tpcc, &t->rng, home + 1, &c->u.tpcc);
        c->type = c->u.tpcc.txn;
        c->remote = c->u.tpcc.remote;
        c->rollback = c->u.tpcc.rollback;
        c->nargs = c->u.tpcc.nargs;
        c->args = c->u.tpcc.args;
        break;
    case BENCH_YCSB:
        ycsb_next_call(&w->ycsb, &t->rng, home, &c->u.ycsb);
        c->type = 0;
        c->remote = c->u.ycsb.multi;
        c->nwrites = c->u.ycsb.nwrites;
        c->nargs = c->u.ycsb.nargs;
        c->args = c->u.ycsb.args;
        break;
    case BENCH_SMALLBANK:
        sb_next_call_home(&w->sb, &t->rng, home, &c->u.sb);
        c->type = c->u.sb.txn;
        c->remote = c->u.sb.remote;
        c->nargs = c->u.sb.nargs;
        c->args = c->u.sb.args;
        break;
    default:
        c->type = 0;
        c->nargs = 0;
        c->args = NULL;
        break;
    }
}

/* ---- tallies ------------------------------------------------------------------------------ */

void bench_tally_add(struct bench_tally *t, const struct bench_call *c, int status, int64_t value0)
{
    int ty = c->type >= 0 && c->type < BENCH_MAX_TYPES ? c->type : 0;
    t->calls[ty]++;
    if (c->remote) t->remote_calls++;
    if (status >= 0) {
        t->commits[ty]++;
        if (c->remote) t->remote_commits++;
        t->rmw_ops += c->nwrites;
        if (c->wl == BENCH_SMALLBANK) t->net += value0;
    } else if (status == POD_USER_ABORT) {
        t->user_aborts[ty]++;
        if (c->rollback) t->rollbacks++;
    } else {
        t->errors[ty]++;
    }
}

void bench_tally_merge(struct bench_tally *into, const struct bench_tally *from)
{
    for (int i = 0; i < BENCH_MAX_TYPES; i++) {
        into->calls[i] += from->calls[i];
        into->commits[i] += from->commits[i];
        into->user_aborts[i] += from->user_aborts[i];
        into->errors[i] += from->errors[i];
    }
    into->rollbacks += from->rollbacks;
    into->remote_calls += from->remote_calls;
    into->remote_commits += from->remote_commits;
    into->rmw_ops += from->rmw_ops;
    into->net += from->net;
}

uint64_t bench_tally_sum(const uint64_t v[BENCH_MAX_TYPES])
{
    uint64_t s = 0;
    for (int i = 0; i < BENCH_MAX_TYPES; i++) s += v[i];
    return s;
}
