#include "util/hist.h"

#include <string.h>

void hist_init(struct hist *h)
{
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

/* Bucket of v: values below HIST_SUB map to themselves; above, the top bit's
 * position picks the power of two and the next 4 bits the sub-bucket. */
static unsigned bucket_of(uint64_t v)
{
    if (v < HIST_SUB) return (unsigned)v;
    unsigned top = 63u - (unsigned)__builtin_clzll(v); /* >= 4 */
    unsigned sub = (unsigned)(v >> (top - 4)) & (HIST_SUB - 1);
    return (top - 3) * HIST_SUB + sub;
}

static uint64_t bucket_upper(unsigned b)
{
    if (b < HIST_SUB) return b;
    unsigned top = b / HIST_SUB + 3, sub = b % HIST_SUB;
    return ((uint64_t)(HIST_SUB + sub + 1) << (top - 4)) - 1;
}

void hist_add(struct hist *h, uint64_t ns)
{
    unsigned b = bucket_of(ns);
    if (b >= HIST_BUCKETS) b = HIST_BUCKETS - 1;
    h->b[b]++;
    h->n++;
    h->sum += ns;
    if (ns < h->min) h->min = ns;
    if (ns > h->max) h->max = ns;
}

void hist_merge(struct hist *into, const struct hist *from)
{
    for (unsigned i = 0; i < HIST_BUCKETS; i++) into->b[i] += from->b[i];
    into->n += from->n;
    into->sum += from->sum;
    if (from->min < into->min) into->min = from->min;
    if (from->max > into->max) into->max = from->max;
}

uint64_t hist_quantile(const struct hist *h, double q)
{
    if (!h->n) return 0;
    uint64_t want = (uint64_t)(q * (double)h->n);
    if (want >= h->n) want = h->n - 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h->b[i];
        if (seen > want) {
            uint64_t u = bucket_upper(i);
            return u > h->max ? h->max : u;
        }
    }
    return h->max;
}

double hist_mean(const struct hist *h) { return h->n ? (double)h->sum / (double)h->n : 0.0; }
