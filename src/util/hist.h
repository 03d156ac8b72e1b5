/* A latency histogram: log-linear buckets (16 per power of two, so about 4%
 * resolution) over nanoseconds, up to ~1 hour. Recording is one increment;
 * histograms of several threads are merged for percentiles. */
#ifndef PODDB_UTIL_HIST_H
#define PODDB_UTIL_HIST_H

#include <stdint.h>

#define HIST_SUB 16
#define HIST_BUCKETS (64 * HIST_SUB)

struct hist {
    uint64_t n, sum, min, max;
    uint64_t b[HIST_BUCKETS];
};

void hist_init(struct hist *h);
void hist_add(struct hist *h, uint64_t ns);
void hist_merge(struct hist *into, const struct hist *from);
/* The value below which a fraction q (0..1) of the samples fall (bucket upper bound). */
uint64_t hist_quantile(const struct hist *h, double q);
double hist_mean(const struct hist *h);

#endif
