/* poddb-bench's control of a pod: one connection per host and the bench.*
 * and sys.stats calls made through them — load every host, check every host,
 * run internal mode on every host, follow jobs with progress, read the
 * statistics before and after a run. */
#ifndef PODDB_BENCH_CONTROL_H
#define PODDB_BENCH_CONTROL_H

#include <stdbool.h>
#include <stdint.h>

#include "bench/results.h"
#include "conf/config.h"
#include "poddb/client.h"

struct bench_pod {
    const struct pod_config *conf;
    int nhosts;
    pod_client *c[POD_MAX_HOSTS];
    char err[512];            /* the last failure, naming the host */
};

/* Connect to every host; replies wait at most timeout_ms. 0 or -1 (p->err). */
int bench_pod_connect(struct bench_pod *p, const struct pod_config *c, int timeout_ms);
void bench_pod_close(struct bench_pod *p);

/* A call on host h that must succeed: NULL with p->err on a transport error
 * or a negative status. Free the reply with pod_reply_free. */
pod_reply *bench_pod_call(struct bench_pod *p, int h, const char *proc, const pod_value *args,
                          int nargs);

/* Called about every interval while jobs run, with every host's status. */
typedef void (*bench_progress_fn)(void *arg, const struct bench_status *st, int nhosts);

/* Wait until job ids[h] no longer runs on any host. -1 (p->err) if one
 * failed or a host stopped answering. */
int bench_pod_wait(struct bench_pod *p, const uint64_t *ids, int interval_ms,
                   bench_progress_fn fn, void *arg);

/* Make sure every host has loaded its partitions of wl: bench.load on each
 * (unless may_load is false: then a host that is not loaded is an error),
 * and wait. *loaded_now tells whether anything was loaded. */
int bench_pod_load(struct bench_pod *p, enum bench_wl wl, bool may_load, bench_progress_fn fn,
                   void *arg, bool *loaded_now);

/* bench.check on every host; out[h] gets each host's result. */
int bench_pod_check(struct bench_pod *p, enum bench_wl wl, struct bench_check_result *out,
                    bench_progress_fn fn, void *arg);

/* A new session number (bench.session on host 0), or 0 (p->err). */
uint64_t bench_pod_session(struct bench_pod *p);

/* Internal mode: bench.run on every host, wait (progress every 200 ms), and
 * merge every host's result into *out (bench_run_result_init first). */
int bench_pod_run(struct bench_pod *p, enum bench_wl wl, double duration_s, double warmup_s,
                  uint64_t session, const char *knobs, bench_progress_fn fn, void *arg,
                  struct bench_run_result *out);

/* Pod statistics from sys.stats: rows [name, value] that a host of a pod of
 * several hosts adds (names below); a value is known only when every host
 * reports it. */
enum bench_pod_stat { BENCH_MOVED_IN, BENCH_MOVED_OUT, BENCH_HWCC_USED, BENCH_HWCC_QUOTA,
                      BENCH_WAITS, BENCH_WAIT_NS, BENCH_WAITS_LONG,
                      /* a compute node's record store (mode: dm): operations, round trips */
                      BENCH_STORE_READS, BENCH_STORE_WRITES, BENCH_STORE_CAS, BENCH_STORE_FAA,
                      BENCH_STORE_ROUND_TRIPS,
                      /* messages between compute nodes (lotus's lock requests) */
                      BENCH_CC_MESSAGES, BENCH_NPODSTATS };
extern const char *const bench_pod_stat_names[BENCH_NPODSTATS]; /* "pod.moved_in", ... */

struct bench_sysstats {
    bool known[BENCH_NPODSTATS];
    int64_t pod[BENCH_NPODSTATS];                  /* summed over hosts */
    struct pod_proc_stats procs[BENCH_MAX_TYPES];  /* the workload's procedures, summed */
};

int bench_pod_sysstats(struct bench_pod *p, enum bench_wl wl, struct bench_sysstats *out);

#endif
