/* TPC-C input generation: random helpers, NURand, last names, the standard
 * mix 45/43/4/4/4 and the two remote knobs (spec 2.4.1, 2.5.1, 2.6.1, 2.7.1,
 * 2.8.1, 4.3.2). */
#include "workloads/tpcc/tpcc.h"
#include "util/clock.h"
#include "workloads/common/range.h"

#include <string.h>

uint64_t tpcc_rand(uint64_t *s)
{
    return pod_rand(s);
}

uint32_t tpcc_uniform(uint64_t *rng, uint32_t lo, uint32_t hi)
{
    if (hi <= lo) return lo;
    return lo + (uint32_t)((tpcc_rand(rng) >> 11) % ((uint64_t)hi - lo + 1));
}

uint32_t tpcc_nurand(uint64_t *rng, uint32_t A, uint32_t C, uint32_t x, uint32_t y)
{
    if (y <= x) return x;
    return (((tpcc_uniform(rng, 0, A) | tpcc_uniform(rng, x, y)) + C) % (y - x + 1)) + x;
}

static const char *const syllables[10] = {"BAR", "OUGHT", "ABLE", "PRI", "PRES",
                                          "ESE", "ANTI", "CALLY", "ATION", "EING"};

void tpcc_last_name(char out[TPCC_LAST_LEN + 1], uint32_t n)
{
    n %= 1000;
    out[0] = 0;
    size_t len = 0;
    const uint32_t parts[3] = {n / 100, (n / 10) % 10, n % 10};
    for (int i = 0; i < 3; i++) {
        size_t l = strlen(syllables[parts[i]]);
        memcpy(out + len, syllables[parts[i]], l); /* at most 3 * 5 = 15 chars */
        len += l;
    }
    out[len] = 0;
}

void tpcc_astring(uint64_t *rng, char *out, uint32_t lo, uint32_t hi)
{
    static const char cs[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint32_t n = tpcc_uniform(rng, lo, hi);
    for (uint32_t i = 0; i < n; i++) out[i] = cs[tpcc_uniform(rng, 0, sizeof cs - 2)];
    out[n] = 0;
}

void tpcc_nstring(uint64_t *rng, char *out, uint32_t lo, uint32_t hi)
{
    uint32_t n = tpcc_uniform(rng, lo, hi);
    for (uint32_t i = 0; i < n; i++) out[i] = (char)('0' + tpcc_uniform(rng, 0, 9));
    out[n] = 0;
}

/* 1000 names for 3000 customers in the spec; scaled down, a third of the
 * customers (at least 1), so that a name still has ~3 customers. */
uint32_t tpcc_last_names(const struct tpcc_config *c)
{
    uint32_t n = c->customers_per_district / 3;
    return n < 1 ? 1 : n > 1000 ? 1000 : n;
}

void tpcc_gen_init(struct tpcc_gen *g, const struct tpcc_config *cfg, uint32_t id, uint64_t seed)
{
    memset(g, 0, sizeof *g);
    g->cfg = *cfg;
    g->id = id ? id : 1;
    uint64_t s = seed ^ 0x5851f42d4c957f2dull;
    g->c_last = tpcc_uniform(&s, 0, 255);
    g->c_id = tpcc_uniform(&s, 0, 1023);
    g->ol_i_id = tpcc_uniform(&s, 0, 8191);
}

static uint32_t pick_customer(struct tpcc_gen *g, uint64_t *rng)
{
    return tpcc_nurand(rng, 1023, g->c_id, 1, g->cfg.customers_per_district);
}

static uint32_t pick_last(struct tpcc_gen *g, uint64_t *rng)
{
    return tpcc_nurand(rng, 255, g->c_last, 0, tpcc_last_names(&g->cfg) - 1);
}

static uint32_t other_warehouse(uint64_t *rng, uint32_t home, uint32_t nw, uint32_t hosts)
{
    return wl_other_part(tpcc_rand(rng) >> 11, nw, home - 1, hosts) + 1;
}

static int64_t fake_now(uint64_t *rng) { return (int64_t)(tpcc_rand(rng) >> 33) + 1; }

void tpcc_make_call(struct tpcc_gen *g, uint64_t *rng, uint32_t w, enum tpcc_txn txn,
                    struct tpcc_call *out)
{
    const struct tpcc_config *c = &g->cfg;
    uint32_t nw = c->warehouses;
    memset(out, 0, sizeof *out);
    out->txn = txn;
    uint32_t d = tpcc_uniform(rng, 1, TPCC_DISTRICTS);
    switch (txn) {
    case TPCC_NEW_ORDER_TXN: {
        uint32_t cid = pick_customer(g, rng);
        uint32_t n = tpcc_uniform(rng, TPCC_MIN_OL, TPCC_MAX_OL);
        out->rollback = tpcc_uniform(rng, 1, 100) == 1;
        /* Tigon's knob: this share of NewOrders has (exactly) one line supplied
         * by another warehouse; the spec instead makes each line remote at 1%. */
        out->remote = nw > 1 && tpcc_uniform(rng, 1, 100) <= c->remote_new_order_pct;
        uint32_t remote_line = out->remote ? tpcc_uniform(rng, 0, n - 1) : n;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t item = tpcc_nurand(rng, 8191, g->ol_i_id, 1, c->items);
            out->lines[3 * i] = item;
            out->lines[3 * i + 1] = i == remote_line ? other_warehouse(rng, w, nw, c->hosts) : w;
            out->lines[3 * i + 2] = tpcc_uniform(rng, 1, 10);
        }
        if (out->rollback) out->lines[3 * (n - 1)] = c->items + 1; /* unused item id */
        out->nargs = 6;
        out->args[0] = pod_v_i64(w);
        out->args[1] = pod_v_i64(d);
        out->args[2] = pod_v_i64(cid);
        out->args[3] = pod_v_i64(n);
        out->args[4] = pod_v_bytes(out->lines, n * 3 * (uint32_t)sizeof(uint32_t));
        out->args[5] = pod_v_i64(fake_now(rng));
        break;
    }
    case TPCC_PAYMENT: {
        uint32_t cw = w, cd = d;
        out->remote = nw > 1 && tpcc_uniform(rng, 1, 100) <= c->remote_payment_pct;
        if (out->remote) {
            cw = other_warehouse(rng, w, nw, c->hosts);
            cd = tpcc_uniform(rng, 1, TPCC_DISTRICTS);
        }
        bool by_name = tpcc_uniform(rng, 1, 100) <= 60;
        out->nargs = 8;
        out->args[0] = pod_v_i64(w);
        out->args[1] = pod_v_i64(d);
        out->args[2] = pod_v_i64(cw);
        out->args[3] = pod_v_i64(cd);
        out->args[4] = pod_v_i64(by_name ? 0 : pick_customer(g, rng));
        out->args[5] = pod_v_i64(by_name ? pick_last(g, rng) : 0);
        out->args[6] = pod_v_i64(tpcc_uniform(rng, 100, 500000)); /* 1.00 .. 5000.00 */
        out->args[7] = pod_v_i64((int64_t)(((uint64_t)g->id << 32) | (uint32_t)++g->hist_seq));
        break;
    }
    case TPCC_ORDER_STATUS: {
        bool by_name = tpcc_uniform(rng, 1, 100) <= 60;
        out->nargs = 4;
        out->args[0] = pod_v_i64(w);
        out->args[1] = pod_v_i64(d);
        out->args[2] = pod_v_i64(by_name ? 0 : pick_customer(g, rng));
        out->args[3] = pod_v_i64(by_name ? pick_last(g, rng) : 0);
        break;
    }
    case TPCC_DELIVERY:
        out->nargs = 3;
        out->args[0] = pod_v_i64(w);
        out->args[1] = pod_v_i64(tpcc_uniform(rng, 1, 10));
        out->args[2] = pod_v_i64(fake_now(rng));
        break;
    case TPCC_STOCK_LEVEL:
        out->nargs = 3;
        out->args[0] = pod_v_i64(w);
        out->args[1] = pod_v_i64(d);
        out->args[2] = pod_v_i64(tpcc_uniform(rng, 10, 20));
        break;
    default:
        break;
    }
}

void tpcc_next_call(struct tpcc_gen *g, uint64_t *rng, uint32_t home_w, struct tpcc_call *out)
{
    uint32_t x = tpcc_uniform(rng, 1, 100);
    enum tpcc_txn t = x <= 45   ? TPCC_NEW_ORDER_TXN
                      : x <= 88 ? TPCC_PAYMENT
                      : x <= 92 ? TPCC_ORDER_STATUS
                      : x <= 96 ? TPCC_DELIVERY
                                : TPCC_STOCK_LEVEL;
    tpcc_make_call(g, rng, home_w, t, out);
}
