/* poddb-bench's client mode: the transactions are generated here and sent
 * to the servers over their sockets, each connection with several calls in
 * flight (pipelining). A connection to host h is a terminal of h: its home
 * partitions are among those h owns, as in internal mode. */
#ifndef PODDB_BENCH_CLIENT_MODE_H
#define PODDB_BENCH_CLIENT_MODE_H

#include <stdbool.h>
#include <stdint.h>

#include "bench/driver.h"
#include "bench/results.h"
#include "conf/config.h"

struct bench_client_opts {
    int connections;          /* in all, dealt round robin over the hosts; 1..1024 */
    int depth;                /* calls in flight per connection */
    double duration_s, warmup_s;
    uint64_t session;         /* bench.session: makes generator ids unique */
    int timeout_ms;           /* give up on a reply after this long */
};

/* Called about every 100 ms from the calling thread: seconds since the
 * start, whether the measured window has begun, and the commits measured. */
typedef void (*bench_client_progress_fn)(void *arg, double elapsed_s, bool measuring,
                                         uint64_t measured_commits);

/* Run workload w for warmup + duration, then let every call in flight finish.
 * *out (bench_run_result_init first) gets the merged outcome; the conflict
 * counts are the servers' (sys.stats), not filled here. 0, or -1 and err when
 * a connection failed. */
int bench_client_run(const struct pod_config *c, const struct bench_workload *w,
                     const struct bench_client_opts *o, bench_client_progress_fn fn, void *arg,
                     struct bench_run_result *out, char *err, size_t errlen);

#endif
