#include "workloads/common/range.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>


uint64_t wl_part_first(uint32_t p, uint64_t n, uint32_t nparts)
{
    if (p >= nparts) return n;
    unsigned __int128 x = (unsigned __int128)p * n;
    return (uint64_t)((x + nparts - 1) / nparts);
}

uint32_t wl_part_of(uint64_t id, uint64_t n, uint32_t nparts)
{
    if (nparts <= 1 || !n) return 0;
    if (id >= n) return nparts - 1;
    return (uint32_t)((unsigned __int128)id * nparts / n);
}

uint32_t wl_other_part(uint64_t r, uint32_t nparts, uint32_t home, uint32_t hosts)
{
    if (hosts <= 1) {
        uint32_t k = (uint32_t)(r % (nparts - 1));
        return k >= home ? k + 1 : k;
    }
    /* Excluded: home's host h holds partitions h, h + hosts, h + 2 hosts, ...;
     * each block [b hosts, (b+1) hosts) holds hosts - 1 candidates, in order. */
    uint32_t h = home % hosts;
    uint32_t same = h < nparts ? (nparts - 1 - h) / hosts + 1 : 0;
    uint32_t k = (uint32_t)(r % (nparts - same));
    uint32_t b = k / (hosts - 1), j = k % (hosts - 1);
    return b * hosts + j + (j >= h ? 1 : 0);
}

struct load_run {
    int proc_load;
    uint64_t n, batch;
    uint32_t nparts;
    wl_progress_fn progress;
    void *progress_arg;
    const char *what;
    pthread_mutex_t lock;
    uint64_t rows;
    int failed;
    char err[256];
};

static void load_failed(struct load_run *r, const char *fmt, const char *a, const char *b)
{
    if (!__atomic_exchange_n(&r->failed, 1, __ATOMIC_ACQ_REL))
        snprintf(r->err, sizeof r->err, fmt, r->what, a, b);
}

static void load_body(struct pod_worker *wk, void *arg)
{
    struct load_run *r = arg;
    pod_result *res = pod_result_new();
    if (!res) {
        pthread_mutex_lock(&r->lock);
        load_failed(r, "%s: %s%s", "out of memory", "");
        pthread_mutex_unlock(&r->lock);
        return;
    }
    uint32_t nw = (uint32_t)pod_db_nworkers(pod_worker_db(wk));
    for (uint32_t p = (uint32_t)pod_worker_id(wk); p < r->nparts; p += nw) {
        uint64_t end = wl_part_first(p + 1, r->n, r->nparts);
        for (uint64_t i = wl_part_first(p, r->n, r->nparts); i < end; i += r->batch) {
            if (__atomic_load_n(&r->failed, __ATOMIC_ACQUIRE)) goto out;
            uint64_t to = i + r->batch < end ? i + r->batch : end;
            pod_value v[2] = {pod_v_i64((int64_t)i), pod_v_i64((int64_t)to)};
            pod_args args = {2, v};
            char msg[200];
            int rc = pod_call(wk, r->proc_load, &args, res, msg, sizeof msg);
            pthread_mutex_lock(&r->lock);
            if (rc < 0) {
                load_failed(r, "%s: %s: %s", pod_status_name(rc), msg);
            } else {
                r->rows += to - i;
                if (r->progress) r->progress(r->rows, r->progress_arg);
            }
            pthread_mutex_unlock(&r->lock);
        }
    }
out:
    pod_result_free(res);
}

int wl_load_ranges(pod_db *db, int proc_load, uint64_t n, uint32_t nparts, uint64_t batch,
                   wl_progress_fn progress, void *progress_arg, const char *what, char *err,
                   size_t errlen)
{
    struct load_run *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "%s: out of memory", what);
        return -1;
    }
    *r = (struct load_run){.proc_load = proc_load, .n = n, .batch = batch ? batch : 1,
                           .nparts = nparts ? nparts : 1, .progress = progress,
                           .progress_arg = progress_arg, .what = what};
    pthread_mutex_init(&r->lock, NULL);
    int rc = pod_workers_start(db, NULL, 0, load_body, r, err, errlen);
    if (rc == 0) {
        pod_workers_join(db);
        if (r->failed) {
            snprintf(err, errlen, "%s", r->err);
            rc = -1;
        }
    }
    pthread_mutex_destroy(&r->lock);
    free(r);
    return rc;
}
