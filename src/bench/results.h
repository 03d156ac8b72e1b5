/* What the bench.* procedures return (docs/benchmarks.md, "The bench.*
 * procedures"): a run's, a check's and the job status, each encoded as tagged
 * rows of a procedure result (the first value of a row names it) so that
 * poddb-cli shows them readably and fields can be added. The server encodes
 * into a pod_result; poddb-bench decodes a pod_reply, tests a pod_result.
 * Histograms and per-second series travel as bytes of uint64 in host byte
 * order (a pod's hosts share one architecture). */
#ifndef PODDB_BENCH_RESULTS_H
#define PODDB_BENCH_RESULTS_H

#include <stdbool.h>
#include <stdint.h>

#include "bench/driver.h"
#include "bench/knobs.h"
#include "engine/db.h"
#include "poddb/client.h"
#include "util/hist.h"

#define BENCH_MAX_SECONDS 86400  /* longest measured window (per-second series) */

struct bench_run_result {
    enum bench_wl wl;
    int host, workers, terminals;
    double measured_s;                  /* the measured window */
    struct bench_tally measured;        /* calls that started in the measured window */
    struct bench_tally all;             /* every call of the run, warmup included (checks) */
    uint64_t conflicts[POD_CAUSE_COUNT]; /* retried attempts in the window, by cause */
    uint64_t gave_up;                   /* calls that ended in POD_E_RETRIES (in errors) */
    struct hist lat;                    /* latency of the measured calls, ns */
    uint32_t nsec;                      /* entries in per_sec */
    uint64_t *per_sec;                  /* commits per second of the window (malloc'd) */
    char knobs[256];                    /* the knobs of the run (bench_knobs_format) */
    char first_error[256];              /* the first error message, or "" */
};

struct bench_check_result {
    enum bench_wl wl;
    int host;
    uint64_t units;                     /* warehouses / partitions checked */
    uint64_t failures;                  /* TPC-C: failed conditions; else failed checks */
    uint64_t rows, expected_rows;       /* YCSB tuples, SmallBank balance rows */
    int64_t sum;                        /* YCSB counter sum; SmallBank total balance (cents) */
    char report[2048];                  /* one line per failure */
};

struct bench_status {
    char job[8];                        /* none, load, run, check */
    char state[8];                      /* running, done, failed */
    uint64_t job_id;
    char phase[8];                      /* run: warmup, measure; else "" */
    double elapsed_s;
    uint64_t done, total;               /* load: rows; run: measured commits, 0; check: units */
    char msg[256];                      /* a failed job's reason */
    struct {
        bool enabled;
        char state[8];                  /* empty, loading, loaded, failed */
        uint64_t rows, total;           /* rows loaded of the host's partitions */
    } wl[BENCH_NWL];
};

void bench_run_result_init(struct bench_run_result *r);
void bench_run_result_free(struct bench_run_result *r);
/* Add b's counts into a (a run of several hosts or workers); per-second
 * series add up element by element. 0 or -1 (out of memory). */
int bench_run_result_merge(struct bench_run_result *a, const struct bench_run_result *b);

/* Reading rows from either side. */
struct bench_rows {
    const void *src;
    int (*nrows)(const void *src);
    const pod_value *(*get)(const void *src, int row, int col, pod_value *tmp);
};
struct bench_rows bench_rows_of_result(const pod_result *r);
struct bench_rows bench_rows_of_reply(const pod_reply *r);

int bench_run_result_encode(const struct bench_run_result *r, pod_result *res);
int bench_run_result_decode(const struct bench_rows *rows, struct bench_run_result *r, char *err,
                            size_t errlen);
int bench_check_result_encode(const struct bench_check_result *r, pod_result *res);
int bench_check_result_decode(const struct bench_rows *rows, struct bench_check_result *r,
                              char *err, size_t errlen);
int bench_status_encode(const struct bench_status *s, pod_result *res);
int bench_status_decode(const struct bench_rows *rows, struct bench_status *s, char *err,
                        size_t errlen);

#endif
