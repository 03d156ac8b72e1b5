#include "bench/control.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"

const char *const bench_pod_stat_names[BENCH_NPODSTATS] = {
    "pod.moved_in",  "pod.moved_out",  "pod.hwcc_used", "pod.hwcc_quota",
    "pod.waits",     "pod.wait_ns",    "pod.waits_over_128us",
    "store.reads",   "store.writes",   "store.cas",     "store.faa",
    "store.round_trips", "cc.messages"};

int bench_pod_connect(struct bench_pod *p, const struct pod_config *c, int timeout_ms)
{
    memset(p, 0, sizeof *p);
    p->conf = c;
    p->nhosts = c->nhosts;
    for (int h = 0; h < c->nhosts; h++) {
        char err[256];
        if (!(p->c[h] = pod_client_connect(c->hosts[h].socket_path, err, sizeof err))) {
            snprintf(p->err, sizeof p->err, "host %d: %s (is its poddb-server running?)", h, err);
            bench_pod_close(p);
            return -1;
        }
        pod_client_set_timeout(p->c[h], timeout_ms);
    }
    return 0;
}

void bench_pod_close(struct bench_pod *p)
{
    for (int h = 0; h < POD_MAX_HOSTS; h++) {
        if (p->c[h]) pod_client_close(p->c[h]);
        p->c[h] = NULL;
    }
}

pod_reply *bench_pod_call(struct bench_pod *p, int h, const char *proc, const pod_value *args,
                          int nargs)
{
    pod_reply *r = pod_client_call(p->c[h], proc, args, nargs);
    if (!r) {
        snprintf(p->err, sizeof p->err, "host %d: %s: %s", h, proc, pod_client_error(p->c[h]));
        return NULL;
    }
    if (pod_reply_status(r) < 0) {
        snprintf(p->err, sizeof p->err, "host %d: %s: %s", h, proc, pod_reply_message(r));
        pod_reply_free(r);
        return NULL;
    }
    return r;
}

static int status_of(struct bench_pod *p, int h, struct bench_status *st)
{
    pod_reply *r = bench_pod_call(p, h, "bench.status", NULL, 0);
    if (!r) return -1;
    struct bench_rows rows = bench_rows_of_reply(r);
    char err[128];
    int rc = bench_status_decode(&rows, st, err, sizeof err);
    if (rc) snprintf(p->err, sizeof p->err, "host %d: bench.status: %s", h, err);
    pod_reply_free(r);
    return rc;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int bench_pod_wait(struct bench_pod *p, const uint64_t *ids, int interval_ms,
                   bench_progress_fn fn, void *arg)
{
    struct bench_status st[POD_MAX_HOSTS];
    for (;;) {
        bool running = false;
        for (int h = 0; h < p->nhosts; h++) {
            if (status_of(p, h, &st[h])) return -1;
            if (st[h].job_id != ids[h]) {
                snprintf(p->err, sizeof p->err, "host %d: job %" PRIu64 " was replaced by job %"
                         PRIu64 " (another poddb-bench on the same pod?)", h, ids[h],
                         st[h].job_id);
                return -1;
            }
            if (!strcmp(st[h].state, "failed")) {
                snprintf(p->err, sizeof p->err, "host %d: %s job failed: %s", h, st[h].job,
                         st[h].msg);
                return -1;
            }
            running |= !strcmp(st[h].state, "running");
        }
        if (fn) fn(arg, st, p->nhosts);
        if (!running) return 0;
        sleep_ms(interval_ms);
    }
}

int bench_pod_load(struct bench_pod *p, enum bench_wl wl, bool may_load, bench_progress_fn fn,
                   void *arg, bool *loaded_now)
{
    uint64_t ids[POD_MAX_HOSTS] = {0};
    bool wait = false;
    *loaded_now = false;
    pod_value a[1] = {pod_v_str(bench_wl_name(wl))};
    for (int h = 0; h < p->nhosts; h++) {
        struct bench_status st;
        if (status_of(p, h, &st)) return -1;
        if (!st.wl[wl].enabled) {
            snprintf(p->err, sizeof p->err, "host %d does not serve %s: its config has no "
                     "workloads.%s (every host must run the same config)", h, bench_wl_name(wl),
                     bench_wl_name(wl));
            return -1;
        }
        if (!strcmp(st.wl[wl].state, "loaded")) {
            ids[h] = st.job_id;
            continue;
        }
        if (!may_load && strcmp(st.wl[wl].state, "loading")) {
            snprintf(p->err, sizeof p->err, "host %d: %s is %s (run without --no-load to load it)",
                     h, bench_wl_name(wl), st.wl[wl].state);
            return -1;
        }
        pod_reply *r = bench_pod_call(p, h, "bench.load", a, 1);
        if (!r) return -1;
        pod_reply_free(r);
        if (status_of(p, h, &st)) return -1;
        ids[h] = st.job_id;
        wait = *loaded_now = true;
    }
    return wait ? bench_pod_wait(p, ids, 250, fn, arg) : 0;
}

int bench_pod_check(struct bench_pod *p, enum bench_wl wl, struct bench_check_result *out,
                    bench_progress_fn fn, void *arg)
{
    uint64_t ids[POD_MAX_HOSTS];
    pod_value a[1] = {pod_v_str(bench_wl_name(wl))};
    for (int h = 0; h < p->nhosts; h++) {
        pod_reply *r = bench_pod_call(p, h, "bench.check", a, 1);
        if (!r) return -1;
        const pod_value *v = pod_reply_value(r, 0, 1);
        ids[h] = v && v->type == POD_T_I64 ? (uint64_t)v->u.i64 : 0;
        pod_reply_free(r);
    }
    if (bench_pod_wait(p, ids, 100, fn, arg)) return -1;
    for (int h = 0; h < p->nhosts; h++) {
        pod_value id = pod_v_i64((int64_t)ids[h]);
        pod_reply *r = bench_pod_call(p, h, "bench.result", &id, 1);
        if (!r) return -1;
        struct bench_rows rows = bench_rows_of_reply(r);
        char err[128];
        int rc = bench_check_result_decode(&rows, &out[h], err, sizeof err);
        pod_reply_free(r);
        if (rc) {
            snprintf(p->err, sizeof p->err, "host %d: bench.result: %s", h, err);
            return -1;
        }
    }
    return 0;
}

uint64_t bench_pod_session(struct bench_pod *p)
{
    pod_reply *r = bench_pod_call(p, 0, "bench.session", NULL, 0);
    if (!r) return 0;
    const pod_value *v = pod_reply_value(r, 0, 0);
    uint64_t s = v && v->type == POD_T_I64 && v->u.i64 > 0 ? (uint64_t)v->u.i64 : 0;
    pod_reply_free(r);
    if (!s) snprintf(p->err, sizeof p->err, "host 0: bench.session: no session number");
    return s;
}

int bench_pod_run(struct bench_pod *p, enum bench_wl wl, double duration_s, double warmup_s,
                  uint64_t session, const char *knobs, bench_progress_fn fn, void *arg,
                  struct bench_run_result *out)
{
    uint64_t ids[POD_MAX_HOSTS];
    pod_value a[5] = {pod_v_str(bench_wl_name(wl)), pod_v_i64((int64_t)(duration_s * 1000)),
                      pod_v_i64((int64_t)(warmup_s * 1000)), pod_v_i64((int64_t)session),
                      pod_v_str(knobs)};
    for (int h = 0; h < p->nhosts; h++) {
        pod_reply *r = bench_pod_call(p, h, "bench.run", a, 5);
        if (!r) return -1;
        const pod_value *v = pod_reply_value(r, 0, 1);
        ids[h] = v && v->type == POD_T_I64 ? (uint64_t)v->u.i64 : 0;
        pod_reply_free(r);
    }
    if (bench_pod_wait(p, ids, 200, fn, arg)) return -1;
    for (int h = 0; h < p->nhosts; h++) {
        pod_value id = pod_v_i64((int64_t)ids[h]);
        pod_reply *r = bench_pod_call(p, h, "bench.result", &id, 1);
        if (!r) return -1;
        struct bench_rows rows = bench_rows_of_reply(r);
        struct bench_run_result one;
        char err[160];
        int rc = bench_run_result_decode(&rows, &one, err, sizeof err);
        pod_reply_free(r);
        if (rc) {
            snprintf(p->err, sizeof p->err, "host %d: bench.result: %s", h, err);
            return -1;
        }
        rc = bench_run_result_merge(out, &one);
        bench_run_result_free(&one);
        if (rc) {
            snprintf(p->err, sizeof p->err, "out of memory");
            return -1;
        }
    }
    out->host = -1; /* the whole pod */
    return 0;
}

/* ---- sys.stats ------------------------------------------------------------------------ */

static bool i64_at(const pod_reply *r, int row, int col, int64_t *out)
{
    const pod_value *v = pod_reply_value(r, row, col);
    if (!v || v->type != POD_T_I64) return false;
    *out = v->u.i64;
    return true;
}

static bool name_is(const pod_value *v, const char *name)
{
    return v && v->type == POD_T_BYTES && v->len == strlen(name) && !memcmp(v->u.bytes, name, v->len);
}

int bench_pod_sysstats(struct bench_pod *p, enum bench_wl wl, struct bench_sysstats *out)
{
    memset(out, 0, sizeof *out);
    int seen[BENCH_NPODSTATS] = {0};
    int ntypes = bench_ntypes(wl);
    for (int h = 0; h < p->nhosts; h++) {
        pod_reply *r = bench_pod_call(p, h, "sys.stats", NULL, 0);
        if (!r) return -1;
        for (int row = 1; row < pod_reply_nrows(r); row++) {
            const pod_value *name = pod_reply_value(r, row, 0);
            int64_t v;
            for (int s = 0; s < BENCH_NPODSTATS; s++)
                if (name_is(name, bench_pod_stat_names[s]) && i64_at(r, row, 1, &v)) {
                    out->pod[s] += v;
                    seen[s]++;
                }
            /* procedure rows: name, commits, user_aborts, errors, conflicts, by cause..., gave_up */
            for (int t = 0; t < ntypes; t++) {
                if (!name_is(name, bench_type_name(wl, t))) continue;
                struct pod_proc_stats *ps = &out->procs[t];
                int64_t x[5 + POD_CAUSE_COUNT];
                bool ok = true;
                for (int c = 0; c < 5 + POD_CAUSE_COUNT && ok; c++) ok = i64_at(r, row, 1 + c, &x[c]);
                if (!ok) continue;
                ps->commits += (uint64_t)x[0];
                ps->user_aborts += (uint64_t)x[1];
                ps->errors += (uint64_t)x[2];
                ps->conflicts += (uint64_t)x[3];
                for (int c = 0; c < POD_CAUSE_COUNT; c++) ps->by_cause[c] += (uint64_t)x[4 + c];
                ps->gave_up += (uint64_t)x[4 + POD_CAUSE_COUNT];
            }
        }
        pod_reply_free(r);
    }
    for (int s = 0; s < BENCH_NPODSTATS; s++) out->known[s] = seen[s] == p->nhosts;
    return 0;
}
