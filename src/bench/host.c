/* Jobs of the bench.* procedures on one host (host.h; docs/benchmarks.md).
 *
 * A job (load, run or check) is published as b->cur under b->lock. Load and
 * check jobs are a list of units (one loader call; one warehouse or
 * partition to check) that workers take with an atomic counter; the worker
 * that finishes the last unit finalizes the job. A run job has one slot per
 * worker: each worker generates and calls transactions until the run's end,
 * then merges its slot into the job's result; the last one finalizes. Job
 * memory is reference counted so that a new job can replace a finished one
 * while a worker is still on its way out of the old. */
#include "bench/host.h"

#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/driver.h"
#include "bench/results.h"
#include "engine/result.h"
#include "engine/worker.h"
#include "storage/table.h"
#include "util/clock.h"
#include "util/log.h"
#include "workloads/common/procs.h"
#include "workloads/smallbank/conf.h"
#include "workloads/tpcc/conf.h"
#include "workloads/ycsb/conf.h"

#define SLICE_NS 10000000ull /* pod_bench_work returns at least this often */

enum job_kind { JOB_NONE, JOB_LOAD, JOB_RUN, JOB_CHECK };
static const char *const job_names[] = {"none", "load", "run", "check"};
enum job_state { JS_RUNNING = 1, JS_DONE, JS_FAILED };
static const char *const state_names[] = {"", "running", "done", "failed"};
enum load_state { LS_EMPTY, LS_LOADING, LS_LOADED, LS_FAILED };
static const char *const load_names[] = {"empty", "loading", "loaded", "failed"};

struct unit {
    enum bench_wl wl;
    uint32_t part;            /* check units: the partition */
    int proc, nargs;          /* load units: the loader call */
    int64_t args[4];
    uint64_t rows;
};

/* One worker's part of a run (touched by that worker only until it merges). */
struct slot {
    bool joined, measuring, has_homes;
    struct bench_terminal term;
    struct bench_run_result r;
    struct pod_proc_stats st0[BENCH_MAX_TYPES];
    uint64_t measured_commits; /* atomic: read by bench.status */
    pod_result *res;
};

struct job {
    int refs;                 /* under b->lock: workers inside pod_bench_work */
    uint64_t id;
    enum job_kind kind;
    int state;                /* atomic */
    int *wdone;               /* per worker: nothing more to do (atomic) */
    uint64_t t_start;
    char msg[256];            /* why it failed (under lock) */
    pthread_mutex_t lock;
    /* load and check */
    struct unit *units;
    size_t nunits, next, finished; /* next, finished: atomic */
    uint64_t rows_done, rows_total; /* rows_done: atomic */
    bool loads[BENCH_NWL];
    int failed;               /* atomic: a unit failed */
    struct bench_check_result check; /* under lock */
    /* run */
    struct bench_workload w;
    int proc[BENCH_MAX_TYPES];
    uint64_t session, t_measure, t_end;
    uint32_t nsec;
    struct slot *slots;
    int nslots;
    int active;               /* atomic: workers not finished */
    struct bench_run_result result; /* under lock */
};

struct pod_bench {
    pod_db *db;
    const struct pod_config *conf;
    int host, nworkers;
    pthread_mutex_t lock;
    struct job *cur;          /* the current or last job (under lock) */
    uint64_t next_id;         /* under lock */
    int busy;                 /* atomic: a job is running (fast path of has_work) */
    uint64_t session;         /* atomic: last session handed out */
    struct {
        bool enabled;
        int state;            /* atomic: enum load_state */
        uint64_t rows, total; /* rows: atomic */
        uint64_t kept;        /* atomic: of rows, those an earlier load left (WL_UNIT_SKIPPED) */
        char msg[256];        /* why loading failed */
    } wl[BENCH_NWL];
    void (*wake)(void *);
    void *wake_arg;
};

static int64_t arg_i64(const pod_args *a, int i) { return a->v[i].u.i64; }

/* ---- jobs ------------------------------------------------------------------------------ */

static void job_free(struct job *j)
{
    if (!j) return;
    for (int i = 0; j->slots && i < j->nslots; i++) {
        bench_run_result_free(&j->slots[i].r);
        pod_result_free(j->slots[i].res);
    }
    free(j->slots);
    bench_run_result_free(&j->result);
    free(j->units);
    free(j->wdone);
    pthread_mutex_destroy(&j->lock);
    free(j);
}

static struct job *job_new(struct pod_bench *b, enum job_kind kind)
{
    struct job *j = calloc(1, sizeof *j);
    if (!j || !(j->wdone = calloc((size_t)b->nworkers, sizeof *j->wdone))) {
        free(j);
        return NULL;
    }
    j->kind = kind;
    j->state = JS_RUNNING;
    j->t_start = pod_mono_ns();
    pthread_mutex_init(&j->lock, NULL);
    bench_run_result_init(&j->result);
    return j;
}

/* Make j the current job unless one is running (b->lock held). */
static int job_publish(struct pod_bench *b, struct job *j)
{
    struct job *old = b->cur;
    if (old && __atomic_load_n(&old->state, __ATOMIC_ACQUIRE) == JS_RUNNING) return -1;
    j->id = ++b->next_id;
    b->cur = j;
    __atomic_store_n(&b->busy, 1, __ATOMIC_RELEASE);
    if (old && old->refs == 0) job_free(old);
    return 0;
}

static void wake_workers(struct pod_bench *b)
{
    if (b->wake) b->wake(b->wake_arg);
}

/* The job's end (called once, by the worker that finished it). busy drops
 * first: once the state says done a new job may be published, and its busy
 * flag must not be overwritten. */
static void job_finish(struct pod_bench *b, struct job *j, bool failed)
{
    __atomic_store_n(&b->busy, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&j->state, failed ? JS_FAILED : JS_DONE, __ATOMIC_RELEASE);
}

static void job_fail(struct job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void job_fail(struct job *j, const char *fmt, ...)
{
    pthread_mutex_lock(&j->lock);
    if (!__atomic_exchange_n(&j->failed, 1, __ATOMIC_ACQ_REL)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(j->msg, sizeof j->msg, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&j->lock);
}

/* ---- ownership --------------------------------------------------------------------------- */

/* The tables of a workload (one is enough: they share the partitioning). */
static pod_table *wl_table(pod_db *db, enum bench_wl wl)
{
    switch (wl) {
    case BENCH_TPCC: return tpcc_get(db) ? tpcc_get(db)->t[TPCC_WAREHOUSE] : NULL;
    case BENCH_YCSB: return ycsb_get(db) ? ycsb_get(db)->table : NULL;
    case BENCH_SMALLBANK: return sb_get(db) ? sb_get(db)->t[SB_ACCOUNTS] : NULL;
    default: return NULL;
    }
}

static bool owns(struct pod_bench *b, enum bench_wl wl, uint32_t p)
{
    const pod_table *t = wl_table(b->db, wl);
    return t && p < t->nparts && t->parts[p].owner == (uint32_t)b->host;
}

static uint32_t owned_parts(struct pod_bench *b, enum bench_wl wl)
{
    const pod_table *t = wl_table(b->db, wl);
    uint32_t n = 0;
    for (uint32_t p = 0; t && p < t->nparts; p++) n += owns(b, wl, p);
    return n;
}

/* ---- load -------------------------------------------------------------------------------- */

static int add_unit(struct job *j, size_t *cap, const struct unit *u)
{
    if (j->nunits == *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        struct unit *n = realloc(j->units, nc * sizeof *n);
        if (!n) return -1;
        j->units = n;
        *cap = nc;
    }
    j->units[j->nunits++] = *u;
    j->rows_total += u->rows;
    return 0;
}

/* Loader calls of batch ids per call over [first, end) of a range-partitioned workload. */
static int range_units(struct job *j, size_t *cap, enum bench_wl wl, int proc, uint64_t first,
                       uint64_t end, uint64_t batch, uint64_t rows_per_id)
{
    for (uint64_t i = first; i < end; i += batch) {
        uint64_t to = i + batch < end ? i + batch : end;
        struct unit u = {.wl = wl, .proc = proc, .nargs = 2,
                         .args = {(int64_t)i, (int64_t)to}, .rows = (to - i) * rows_per_id};
        if (add_unit(j, cap, &u)) return -1;
    }
    return 0;
}

static int load_units(struct pod_bench *b, struct job *j, enum bench_wl wl)
{
    size_t cap = j->nunits;
    uint64_t before = j->rows_total;
    const pod_table *t = wl_table(b->db, wl);
    for (uint32_t p = 0; t && p < t->nparts; p++) {
        if (!owns(b, wl, p)) continue;
        if (wl == BENCH_TPCC) {
            struct tpcc *tp = tpcc_get(b->db);
            size_t n = tpcc_load_units(tp, p + 1, NULL, 0);
            struct tpcc_load_unit *lu = malloc(n * sizeof *lu);
            if (!lu) return -1;
            tpcc_load_units(tp, p + 1, lu, n);
            for (size_t i = 0; i < n; i++) {
                struct unit u = {.wl = wl, .part = p, .proc = lu[i].proc, .nargs = lu[i].nargs,
                                 .rows = lu[i].rows};
                memcpy(u.args, lu[i].args, sizeof u.args);
                if (add_unit(j, &cap, &u)) {
                    free(lu);
                    return -1;
                }
            }
            free(lu);
        } else if (wl == BENCH_YCSB) {
            const struct ycsb *y = ycsb_get(b->db);
            if (range_units(j, &cap, wl, y->proc_load, ycsb_part_first(p, y->cfg.tuples, t->nparts),
                            ycsb_part_first(p + 1, y->cfg.tuples, t->nparts), y->cfg.load_batch, 1))
                return -1;
        } else {
            const struct smallbank *s = sb_get(b->db);
            if (range_units(j, &cap, wl, s->proc_load, sb_part_first(p, s->cfg.accounts, t->nparts),
                            sb_part_first(p + 1, s->cfg.accounts, t->nparts), s->cfg.load_batch, 3))
                return -1;
        }
    }
    b->wl[wl].total = j->rows_total - before;
    return 0;
}

/* Start loading the workloads of want[] that are empty. Returns 0 (started, or
 * nothing to do), or -1 with err (busy, out of memory). b->lock held. */
static int start_load(struct pod_bench *b, const bool want[BENCH_NWL], char *err, size_t errlen)
{
    struct job *j = job_new(b, JOB_LOAD);
    if (!j) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int w = 0; w < BENCH_NWL; w++) {
        if (!want[w] || __atomic_load_n(&b->wl[w].state, __ATOMIC_ACQUIRE) != LS_EMPTY) continue;
        size_t before = j->nunits;
        if (load_units(b, j, (enum bench_wl)w)) {
            job_free(j);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        j->loads[w] = j->nunits > before;
        /* A host that owns none of the workload's partitions has nothing to load. */
        if (!j->loads[w]) __atomic_store_n(&b->wl[w].state, LS_LOADED, __ATOMIC_RELEASE);
    }
    bool any = false;
    for (int w = 0; w < BENCH_NWL; w++) any |= j->loads[w];
    if (!any) {
        job_free(j);
        return 0;
    }
    if (job_publish(b, j)) {
        job_free(j);
        snprintf(err, errlen, "host %d is busy with a %s job (see bench.status)", b->host,
                 job_names[b->cur->kind]);
        return -1;
    }
    for (int w = 0; w < BENCH_NWL; w++) {
        if (!j->loads[w]) continue;
        __atomic_store_n(&b->wl[w].rows, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&b->wl[w].kept, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&b->wl[w].state, LS_LOADING, __ATOMIC_RELEASE);
        uint32_t n = owned_parts(b, (enum bench_wl)w);
        pod_info("bench: loading %s on host %d: %" PRIu64 " rows in %u partition%s",
                 bench_wl_name((enum bench_wl)w), b->host, b->wl[w].total, n, n == 1 ? "" : "s");
    }
    return 0;
}

static void finish_load(struct pod_bench *b, struct job *j)
{
    bool failed = __atomic_load_n(&j->failed, __ATOMIC_ACQUIRE);
    double s = (double)(pod_mono_ns() - j->t_start) / 1e9;
    for (int w = 0; w < BENCH_NWL; w++) {
        if (!j->loads[w]) continue;
        __atomic_store_n(&b->wl[w].state, failed ? LS_FAILED : LS_LOADED, __ATOMIC_RELEASE);
        if (failed) snprintf(b->wl[w].msg, sizeof b->wl[w].msg, "%s", j->msg);
        if (failed)
            pod_error("bench: loading %s on host %d failed: %s", bench_wl_name((enum bench_wl)w),
                      b->host, j->msg);
        else if (b->wl[w].kept)
            pod_info("bench: loaded %s on host %d: %" PRIu64 " rows in %.1f s, %" PRIu64
                     " of them there before (an earlier load's, kept)",
                     bench_wl_name((enum bench_wl)w), b->host, b->wl[w].rows, s, b->wl[w].kept);
        else
            pod_info("bench: loaded %s on host %d: %" PRIu64 " rows in %.1f s",
                     bench_wl_name((enum bench_wl)w), b->host, b->wl[w].rows, s);
    }
    job_finish(b, j, failed);
}

static void load_unit(struct pod_bench *b, struct job *j, struct pod_worker *w, pod_result *res,
                      const struct unit *u)
{
    char msg[200];
    int rc = wl_call_i64(b->db, w, u->proc, u->args, u->nargs, res, msg, sizeof msg);
    if (rc < 0) {
        job_fail(j, "%s: %s", pod_status_name(rc), msg);
        return;
    }
    __atomic_fetch_add(&j->rows_done, u->rows, __ATOMIC_RELAXED);
    __atomic_fetch_add(&b->wl[u->wl].rows, u->rows, __ATOMIC_RELAXED);
    if (rc == WL_UNIT_SKIPPED) __atomic_fetch_add(&b->wl[u->wl].kept, u->rows, __ATOMIC_RELAXED);
}

/* ---- check ------------------------------------------------------------------------------- */

static void report_line(struct bench_check_result *c, const char *text)
{
    size_t used = strlen(c->report);
    if (used + 1 < sizeof c->report)
        snprintf(c->report + used, sizeof c->report - used, "%s%s", text,
                 text[0] && text[strlen(text) - 1] != '\n' ? "\n" : "");
}

static void check_unit(struct pod_bench *b, struct job *j, struct pod_worker *w,
                       const struct unit *u)
{
    char rep[1024] = "";
    uint64_t rows = 0;
    int64_t sum = 0;
    int failures = 0;
    switch (u->wl) {
    case BENCH_TPCC:
        failures = tpcc_check_warehouse(b->db, w, u->part + 1, rep, sizeof rep);
        break;
    case BENCH_YCSB:
        failures = ycsb_count_partition(b->db, w, u->part, &rows, &sum, rep, sizeof rep) ? 1 : 0;
        break;
    case BENCH_SMALLBANK:
        failures = sb_audit_partition(b->db, w, u->part, &sum, &rows, rep, sizeof rep) ? 1 : 0;
        break;
    default:
        break;
    }
    pthread_mutex_lock(&j->lock);
    j->check.units++;
    j->check.failures += (uint64_t)failures;
    j->check.rows += rows;
    j->check.sum += sum;
    if (failures) report_line(&j->check, rep);
    pthread_mutex_unlock(&j->lock);
}

static void finish_check(struct pod_bench *b, struct job *j)
{
    struct bench_check_result *c = &j->check;
    if (c->wl != BENCH_TPCC && c->rows != c->expected_rows) {
        char line[160];
        snprintf(line, sizeof line, "host %d: %" PRIu64 " %s rows in its partitions, expected %" PRIu64,
                 b->host, c->rows, c->wl == BENCH_YCSB ? "usertable" : "savings and checking",
                 c->expected_rows);
        report_line(c, line);
        c->failures++;
    }
    pod_info("bench: check of %s on host %d: %s (%" PRIu64 " partition%s, %.1f s)",
             bench_wl_name(c->wl), b->host, c->failures ? "FAILED" : "passed", c->units,
             c->units == 1 ? "" : "s", (double)(pod_mono_ns() - j->t_start) / 1e9);
    job_finish(b, j, false);
}

static int start_check(struct pod_bench *b, enum bench_wl wl, uint64_t *id, char *err,
                       size_t errlen)
{
    struct job *j = job_new(b, JOB_CHECK);
    if (!j) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    j->check.wl = wl;
    j->check.host = b->host;
    const pod_table *t = wl_table(b->db, wl);
    size_t cap = 0;
    for (uint32_t p = 0; p < t->nparts; p++) {
        if (!owns(b, wl, p)) continue;
        struct unit u = {.wl = wl, .part = p};
        if (add_unit(j, &cap, &u)) {
            job_free(j);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        if (wl == BENCH_YCSB) {
            const struct ycsb *y = ycsb_get(b->db);
            j->check.expected_rows += ycsb_part_first(p + 1, y->cfg.tuples, t->nparts) -
                                      ycsb_part_first(p, y->cfg.tuples, t->nparts);
        } else if (wl == BENCH_SMALLBANK) {
            const struct smallbank *s = sb_get(b->db);
            j->check.expected_rows += 2 * (sb_part_first(p + 1, s->cfg.accounts, t->nparts) -
                                           sb_part_first(p, s->cfg.accounts, t->nparts));
        }
    }
    if (job_publish(b, j)) {
        job_free(j);
        snprintf(err, errlen, "host %d is busy with a %s job (see bench.status)", b->host,
                 job_names[b->cur->kind]);
        return -1;
    }
    *id = j->id;
    if (!j->nunits) finish_check(b, j); /* the host owns no partition */
    return 0;
}

/* ---- run --------------------------------------------------------------------------------- */

static void finish_run(struct pod_bench *b, struct job *j)
{
    struct bench_run_result *r = &j->result;
    r->measured_s = (double)(j->t_end - j->t_measure) / 1e9;
    uint64_t commits = bench_tally_sum(r->measured.commits);
    pod_info("bench: run of %s on host %d done: %" PRIu64 " commits in %.1f s (%.0f/s)%s%s",
             bench_wl_name(j->w.wl), b->host, commits, r->measured_s,
             r->measured_s > 0 ? (double)commits / r->measured_s : 0.0,
             r->first_error[0] ? "; first error: " : "", r->first_error);
    job_finish(b, j, false);
}

static void run_worker_done(struct pod_bench *b, struct job *j, struct pod_worker *w,
                            struct slot *s)
{
    int ntypes = bench_ntypes(j->w.wl);
    for (int ty = 0; s->measuring && ty < ntypes; ty++) {
        const struct pod_proc_stats *st = &w->stats[j->proc[ty]];
        for (int c = 0; c < POD_CAUSE_COUNT; c++)
            s->r.conflicts[c] += st->by_cause[c] - s->st0[ty].by_cause[c];
        s->r.gave_up += st->gave_up - s->st0[ty].gave_up;
    }
    pthread_mutex_lock(&j->lock);
    int rc = bench_run_result_merge(&j->result, &s->r);
    pthread_mutex_unlock(&j->lock);
    if (rc) job_fail(j, "out of memory merging the results");
    __atomic_store_n(&j->wdone[w->id], 1, __ATOMIC_RELEASE);
    if (__atomic_sub_fetch(&j->active, 1, __ATOMIC_ACQ_REL) == 0) finish_run(b, j);
}

static void run_work(struct pod_bench *b, struct job *j, struct pod_worker *w,
                     bool (*yield)(void *), void *arg)
{
    struct slot *s = &j->slots[w->id];
    if (!s->joined) {
        s->joined = true;
        uint32_t gen = (uint32_t)(j->session << BENCH_SLOT_BITS) |
                       (uint32_t)(b->host * POD_MAX_WORKERS + w->id);
        s->has_homes = bench_terminal_init(&s->term, &j->w, b->host, w->id, b->nworkers, gen,
                                           j->session * 0x9e3779b97f4a7c15ull) == 0;
        s->r.terminals = s->has_homes;
    }
    uint64_t slice_end = pod_mono_ns() + SLICE_NS;
    struct bench_call call;
    char msg[256];
    for (;;) {
        uint64_t now = pod_mono_ns();
        if (now >= j->t_end || !s->has_homes) {
            run_worker_done(b, j, w, s);
            return;
        }
        if (now >= slice_end || yield(arg)) return;
        if (!s->measuring && now >= j->t_measure) {
            for (int ty = 0; ty < bench_ntypes(j->w.wl); ty++) s->st0[ty] = w->stats[j->proc[ty]];
            s->measuring = true;
        }
        bench_next(&s->term, &call);
        pod_args a = {call.nargs, call.args};
        uint64_t t0 = pod_mono_ns();
        int rc = pod_call(w, j->proc[call.type], &a, s->res, msg, sizeof msg);
        uint64_t t1 = pod_mono_ns();
        pod_value v0 = {0};
        if (rc < 0 || pod_result_get(s->res, 0, 0, &v0) || v0.type != POD_T_I64) v0.u.i64 = 0;
        bench_tally_add(&s->r.all, &call, rc, v0.u.i64);
        if (rc < 0 && rc != POD_USER_ABORT && !s->r.first_error[0])
            snprintf(s->r.first_error, sizeof s->r.first_error, "%s", msg);
        if (s->measuring && t0 >= j->t_measure && t0 < j->t_end) {
            bench_tally_add(&s->r.measured, &call, rc, v0.u.i64);
            hist_add(&s->r.lat, t1 - t0);
            if (rc >= 0) {
                __atomic_fetch_add(&s->measured_commits, 1, __ATOMIC_RELAXED);
                /* by the second it ended in; one that ends after the window counts in the last */
                uint64_t sec = (t1 - j->t_measure) / 1000000000ull;
                s->r.per_sec[sec < s->r.nsec ? sec : s->r.nsec - 1]++;
            }
        }
    }
}

static int start_run(struct pod_bench *b, enum bench_wl wl, int64_t duration_ms,
                     int64_t warmup_ms, uint64_t session, const pod_value *knobs, uint64_t *id,
                     char *err, size_t errlen)
{
    struct bench_knobs k;
    bench_knobs_from_conf(&k, b->conf, wl);
    if (bench_knobs_apply(&k, knobs->u.bytes, knobs->len, err, errlen)) return -1;
    struct job *j = job_new(b, JOB_RUN);
    if (!j) goto nomem;
    if (bench_workload_init(&j->w, b->conf, &k, err, errlen)) {
        job_free(j);
        return -1;
    }
    for (int ty = 0; ty < bench_ntypes(wl); ty++)
        if ((j->proc[ty] = pod_proc_find(b->db, bench_type_name(wl, ty))) < 0) {
            snprintf(err, errlen, "procedure %s is not registered", bench_type_name(wl, ty));
            job_free(j);
            return -1;
        }
    j->session = session;
    j->nsec = (uint32_t)((duration_ms + 999) / 1000);
    if (!(j->slots = calloc((size_t)b->nworkers, sizeof *j->slots))) goto nomem_job;
    j->nslots = b->nworkers;
    for (int i = 0; i < b->nworkers; i++) {
        struct slot *s = &j->slots[i];
        bench_run_result_init(&s->r);
        s->r.wl = wl;
        s->r.host = b->host;
        s->r.workers = 1;
        s->r.nsec = j->nsec;
        if (!(s->r.per_sec = calloc(j->nsec ? j->nsec : 1, sizeof *s->r.per_sec)) ||
            !(s->res = pod_result_new()))
            goto nomem_job;
    }
    j->result.wl = wl;
    j->result.host = b->host;
    bench_knobs_format(&k, j->result.knobs, sizeof j->result.knobs);
    j->active = b->nworkers;
    j->t_measure = j->t_start + (uint64_t)warmup_ms * 1000000ull;
    j->t_end = j->t_measure + (uint64_t)duration_ms * 1000000ull;
    if (job_publish(b, j)) {
        snprintf(err, errlen, "host %d is busy with a %s job (see bench.status)", b->host,
                 job_names[b->cur->kind]);
        job_free(j);
        return -1;
    }
    *id = j->id;
    pod_info("bench: running %s on host %d for %.1f s after %.1f s warmup (%s)", bench_wl_name(wl),
             b->host, (double)duration_ms / 1e3, (double)warmup_ms / 1e3, j->result.knobs);
    return 0;
nomem_job:
    job_free(j);
nomem:
    snprintf(err, errlen, "out of memory");
    return -1;
}

/* ---- the worker's side ---------------------------------------------------------------------- */

bool pod_bench_has_work(struct pod_bench *b, int worker)
{
    if (!b || !__atomic_load_n(&b->busy, __ATOMIC_ACQUIRE)) return false;
    pthread_mutex_lock(&b->lock);
    struct job *j = b->cur;
    bool yes = j && worker >= 0 && worker < b->nworkers &&
               __atomic_load_n(&j->state, __ATOMIC_ACQUIRE) == JS_RUNNING &&
               !__atomic_load_n(&j->wdone[worker], __ATOMIC_ACQUIRE) &&
               (j->kind == JOB_RUN || __atomic_load_n(&j->next, __ATOMIC_RELAXED) < j->nunits);
    pthread_mutex_unlock(&b->lock);
    return yes;
}

/* Load and check: take units until there are none, the slice ends or calls wait. */
static void unit_work(struct pod_bench *b, struct job *j, struct pod_worker *w,
                      bool (*yield)(void *), void *arg)
{
    pod_result *res = pod_result_new();
    if (!res) return;
    uint64_t slice_end = pod_mono_ns() + SLICE_NS;
    while (!yield(arg) && pod_mono_ns() < slice_end) {
        size_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_ACQ_REL);
        if (i >= j->nunits) {
            __atomic_store_n(&j->wdone[w->id], 1, __ATOMIC_RELEASE);
            break;
        }
        if (!__atomic_load_n(&j->failed, __ATOMIC_ACQUIRE)) {
            if (j->kind == JOB_LOAD) load_unit(b, j, w, res, &j->units[i]);
            else check_unit(b, j, w, &j->units[i]);
        }
        if (__atomic_add_fetch(&j->finished, 1, __ATOMIC_ACQ_REL) == j->nunits) {
            if (j->kind == JOB_LOAD) finish_load(b, j);
            else finish_check(b, j);
        }
    }
    pod_result_free(res);
}

void pod_bench_work(struct pod_bench *b, struct pod_worker *w, bool (*yield)(void *), void *arg)
{
    pthread_mutex_lock(&b->lock);
    struct job *j = b->cur;
    if (j) j->refs++;
    pthread_mutex_unlock(&b->lock);
    if (!j) return;
    if (w->id >= 0 && w->id < b->nworkers &&
        __atomic_load_n(&j->state, __ATOMIC_ACQUIRE) == JS_RUNNING &&
        !__atomic_load_n(&j->wdone[w->id], __ATOMIC_ACQUIRE)) {
        if (j->kind == JOB_RUN) run_work(b, j, w, yield, arg);
        else unit_work(b, j, w, yield, arg);
    }
    pthread_mutex_lock(&b->lock);
    bool drop = --j->refs == 0 && j != b->cur;
    pthread_mutex_unlock(&b->lock);
    if (drop) job_free(j);
}

/* ---- the bench.* procedures --------------------------------------------------------------- */

/* The workload named by argument i, configured on this pod. */
static int arg_wl(pod_txn *tx, struct pod_bench *b, const pod_value *v, enum bench_wl *out)
{
    int w = bench_wl_parse(v->u.bytes, v->len);
    if (w < 0)
        return pod_txn_fail(tx, POD_E_INVALID, "unknown workload '%.*s' (expected tpcc, ycsb or "
                            "smallbank)", (int)(v->len > 40 ? 40 : v->len),
                            (const char *)v->u.bytes);
    if (!b->wl[w].enabled)
        return pod_txn_fail(tx, POD_E_INVALID, "workload %s is not in the config %s (add it "
                            "under workloads:)", bench_wl_name((enum bench_wl)w), b->conf->source);
    *out = (enum bench_wl)w;
    return POD_OK;
}

static int need_loaded(pod_txn *tx, struct pod_bench *b, enum bench_wl wl)
{
    int st = __atomic_load_n(&b->wl[wl].state, __ATOMIC_ACQUIRE);
    if (st == LS_LOADED) return POD_OK;
    return pod_txn_fail(tx, POD_E_INVALID, "%s is %s on host %d (call bench.load first)",
                        bench_wl_name(wl), load_names[st], b->host);
}

/* bench.session() -> session number (1..BENCH_MAX_SESSION) */
static int p_session(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)tx;
    (void)a;
    struct pod_bench *b = ctx;
    uint64_t s = __atomic_add_fetch(&b->session, 1, __ATOMIC_ACQ_REL);
    pod_result_i64(res, (int64_t)(s % BENCH_MAX_SESSION + 1));
    return POD_OK;
}

/* bench.load(workload) -> [state, rows of the host's partitions]: "started",
 * "loading" (already under way) or "loaded" (nothing done). */
static int p_load(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct pod_bench *b = ctx;
    enum bench_wl wl;
    POD_TRY(arg_wl(tx, b, &a->v[0], &wl));
    char err[256];
    const char *what = "started";
    pthread_mutex_lock(&b->lock);
    int st = __atomic_load_n(&b->wl[wl].state, __ATOMIC_ACQUIRE);
    if (st == LS_FAILED) {
        pthread_mutex_unlock(&b->lock);
        return pod_txn_fail(tx, POD_E_INTERNAL, "loading %s failed earlier on host %d: %s "
                            "(restart the pod to start from empty tables)", bench_wl_name(wl),
                            b->host, b->wl[wl].msg);
    }
    if (st == LS_EMPTY) {
        bool want[BENCH_NWL] = {false};
        want[wl] = true;
        if (start_load(b, want, err, sizeof err)) {
            pthread_mutex_unlock(&b->lock);
            return pod_txn_fail(tx, POD_E_INVALID, "%s", err);
        }
        if (__atomic_load_n(&b->wl[wl].state, __ATOMIC_ACQUIRE) == LS_LOADED) what = "loaded";
    } else {
        what = st == LS_LOADED ? "loaded" : "loading";
    }
    uint64_t total = b->wl[wl].total;
    pthread_mutex_unlock(&b->lock);
    if (!strcmp(what, "started")) wake_workers(b);
    pod_result_str(res, what);
    pod_result_i64(res, (int64_t)total);
    return POD_OK;
}

/* bench.run(workload, duration_ms, warmup_ms, session, knobs) -> ["run", job id] */
static int p_run(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct pod_bench *b = ctx;
    enum bench_wl wl;
    POD_TRY(arg_wl(tx, b, &a->v[0], &wl));
    int64_t dur = arg_i64(a, 1), warm = arg_i64(a, 2), session = arg_i64(a, 3);
    if (dur < 100 || dur > (int64_t)BENCH_MAX_SECONDS * 1000)
        return pod_txn_fail(tx, POD_E_INVALID, "bench.run: duration %" PRId64 " ms is out of "
                            "range (100..%d)", dur, BENCH_MAX_SECONDS * 1000);
    if (warm < 0 || warm > 3600000)
        return pod_txn_fail(tx, POD_E_INVALID, "bench.run: warmup %" PRId64 " ms is out of "
                            "range (0..3600000)", warm);
    if (session < 1 || session > BENCH_MAX_SESSION)
        return pod_txn_fail(tx, POD_E_INVALID, "bench.run: session %" PRId64 " is out of range "
                            "(1..%u; from bench.session)", session, BENCH_MAX_SESSION);
    POD_TRY(need_loaded(tx, b, wl));
    char err[256];
    uint64_t id = 0;
    pthread_mutex_lock(&b->lock);
    int rc = start_run(b, wl, dur, warm, (uint64_t)session, &a->v[4], &id, err, sizeof err);
    pthread_mutex_unlock(&b->lock);
    if (rc) return pod_txn_fail(tx, POD_E_INVALID, "%s", err);
    wake_workers(b);
    pod_result_str(res, "run");
    pod_result_i64(res, (int64_t)id);
    return POD_OK;
}

/* bench.check(workload) -> ["check", job id] */
static int p_check(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct pod_bench *b = ctx;
    enum bench_wl wl;
    POD_TRY(arg_wl(tx, b, &a->v[0], &wl));
    POD_TRY(need_loaded(tx, b, wl));
    char err[256];
    uint64_t id = 0;
    pthread_mutex_lock(&b->lock);
    int rc = start_check(b, wl, &id, err, sizeof err);
    pthread_mutex_unlock(&b->lock);
    if (rc) return pod_txn_fail(tx, POD_E_INVALID, "%s", err);
    wake_workers(b);
    pod_result_str(res, "check");
    pod_result_i64(res, (int64_t)id);
    return POD_OK;
}

/* bench.status() -> the job row and one row per configured workload. */
static int p_status(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)tx;
    (void)a;
    struct pod_bench *b = ctx;
    struct bench_status s;
    memset(&s, 0, sizeof s);
    pthread_mutex_lock(&b->lock);
    struct job *j = b->cur;
    uint64_t now = pod_mono_ns();
    snprintf(s.job, sizeof s.job, "%s", job_names[j ? j->kind : JOB_NONE]);
    if (j) {
        int st = __atomic_load_n(&j->state, __ATOMIC_ACQUIRE);
        snprintf(s.state, sizeof s.state, "%s", state_names[st]);
        s.job_id = j->id;
        s.elapsed_s = (double)(now - j->t_start) / 1e9;
        if (j->kind == JOB_RUN) {
            snprintf(s.phase, sizeof s.phase, "%s", now < j->t_measure ? "warmup" : "measure");
            for (int i = 0; i < j->nslots; i++)
                s.done += __atomic_load_n(&j->slots[i].measured_commits, __ATOMIC_RELAXED);
        } else if (j->kind == JOB_LOAD) {
            s.done = __atomic_load_n(&j->rows_done, __ATOMIC_RELAXED);
            s.total = j->rows_total;
        } else {
            s.done = __atomic_load_n(&j->finished, __ATOMIC_RELAXED);
            s.total = j->nunits;
        }
        if (st == JS_FAILED) {
            pthread_mutex_lock(&j->lock);
            snprintf(s.msg, sizeof s.msg, "%s", j->msg);
            pthread_mutex_unlock(&j->lock);
        }
    }
    for (int w = 0; w < BENCH_NWL; w++) {
        s.wl[w].enabled = b->wl[w].enabled;
        snprintf(s.wl[w].state, sizeof s.wl[w].state, "%s",
                 load_names[__atomic_load_n(&b->wl[w].state, __ATOMIC_ACQUIRE)]);
        s.wl[w].rows = __atomic_load_n(&b->wl[w].rows, __ATOMIC_RELAXED);
        s.wl[w].total = b->wl[w].total;
    }
    pthread_mutex_unlock(&b->lock);
    return bench_status_encode(&s, res) ? POD_E_NOMEM : POD_OK;
}

/* bench.result(job id) -> the rows of a finished run or check. */
static int p_result(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct pod_bench *b = ctx;
    uint64_t id = (uint64_t)arg_i64(a, 0);
    int rc = POD_OK;
    pthread_mutex_lock(&b->lock);
    struct job *j = b->cur;
    int st = j ? __atomic_load_n(&j->state, __ATOMIC_ACQUIRE) : 0;
    if (!j || j->id != id || j->kind == JOB_LOAD) {
        rc = pod_txn_fail(tx, POD_E_INVALID, "bench.result: job %" PRIu64 " is not the last run "
                          "or check of host %d (the last job is %" PRIu64 ")", id, b->host,
                          j ? j->id : 0);
    } else if (st == JS_RUNNING) {
        rc = pod_txn_fail(tx, POD_E_INVALID, "bench.result: job %" PRIu64 " is still running",
                          id);
    } else if (st == JS_FAILED || __atomic_load_n(&j->failed, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&j->lock);
        rc = pod_txn_fail(tx, POD_E_INTERNAL, "bench.result: job %" PRIu64 " failed: %s", id,
                          j->msg);
        pthread_mutex_unlock(&j->lock);
    } else {
        pthread_mutex_lock(&j->lock);
        int erc = j->kind == JOB_RUN ? bench_run_result_encode(&j->result, res)
                                     : bench_check_result_encode(&j->check, res);
        pthread_mutex_unlock(&j->lock);
        if (erc) rc = pod_txn_fail(tx, POD_E_NOMEM, "bench.result: out of memory");
    }
    pthread_mutex_unlock(&b->lock);
    return rc;
}

static int register_procs(pod_db *db, struct pod_bench *b, char *err, size_t errlen)
{
    static const enum pod_type t_wl[1] = {POD_T_BYTES};
    static const enum pod_type t_run[5] = {POD_T_BYTES, POD_T_I64, POD_T_I64, POD_T_I64,
                                           POD_T_BYTES};
    static const enum pod_type t_id[1] = {POD_T_I64};
    const pod_proc_def defs[] = {
        {"bench.session", p_session, b, 0, NULL, true},
        {"bench.load", p_load, b, 1, t_wl, true},
        {"bench.run", p_run, b, 5, t_run, true},
        {"bench.check", p_check, b, 1, t_wl, true},
        {"bench.status", p_status, b, 0, NULL, true},
        {"bench.result", p_result, b, 1, t_id, true},
    };
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
        if (pod_proc_register(db, &defs[i], err, errlen) < 0) return -1;
    return 0;
}

/* ---- setup ------------------------------------------------------------------------------- */

static void free_workloads(pod_db *db)
{
    tpcc_free(db);
    ycsb_free(db);
    sb_free(db);
}

struct pod_bench *pod_bench_new(pod_db *db, const struct pod_config *c, int host, char *err,
                                size_t errlen)
{
    struct pod_bench *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    b->db = db;
    b->conf = c;
    b->host = host;
    b->nworkers = db->opt.nworkers;
    pthread_mutex_init(&b->lock, NULL);
    /* Sessions start from the clock so that a restarted host 0 does not hand
     * out the numbers of the runs before it (TPC-C HISTORY keys). */
    b->session = (pod_real_ns() / 1000000000ull) % BENCH_MAX_SESSION;
    for (int w = 0; w < BENCH_NWL; w++) {
        if (!bench_wl_enabled(c, (enum bench_wl)w)) continue;
        int rc;
        if (w == BENCH_TPCC) {
            struct tpcc_config tc;
            bench_tpcc_config(c, &tc);
            rc = tpcc_register(db, &tc, err, errlen);
        } else if (w == BENCH_YCSB) {
            struct ycsb_config yc;
            bench_ycsb_config(c, &yc);
            rc = ycsb_register(db, &yc, err, errlen);
        } else {
            struct sb_config sc;
            bench_smallbank_config(c, &sc);
            rc = sb_register(db, &sc, err, errlen);
        }
        if (rc) goto fail;
        b->wl[w].enabled = true;
        /* Terminals pick their homes as p % hosts (bench/driver.c): the tables must agree. */
        const pod_table *t = wl_table(db, (enum bench_wl)w);
        for (uint32_t p = 0; p < t->nparts; p++)
            if (t->parts[p].owner != p % (uint32_t)c->nhosts) {
                snprintf(err, errlen, "bench: partition %u of %s is owned by host %u, not %u: "
                         "the driver assumes partition p on host p %% hosts", p, t->name,
                         t->parts[p].owner, p % (uint32_t)c->nhosts);
                goto fail;
            }
    }
    if (register_procs(db, b, err, errlen)) goto fail;
    return b;
fail:
    free_workloads(db);
    pthread_mutex_destroy(&b->lock);
    free(b);
    return NULL;
}

void pod_bench_free(struct pod_bench *b)
{
    if (!b) return;
    job_free(b->cur);
    free_workloads(b->db);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

void pod_bench_set_waker(struct pod_bench *b, void (*wake)(void *), void *arg)
{
    b->wake = wake;
    b->wake_arg = arg;
}

void pod_bench_autoload(struct pod_bench *b)
{
    const struct pod_tpcc_conf *t = pod_tpcc_conf(b->conf);
    const struct pod_ycsb_conf *y = pod_ycsb_conf(b->conf);
    const struct pod_smallbank_conf *sb = pod_smallbank_conf(b->conf);
    bool want[BENCH_NWL] = {t->enabled && t->load_at_start, y->enabled && y->load_at_start,
                            sb->enabled && sb->load_at_start};
    char err[256];
    pthread_mutex_lock(&b->lock);
    int rc = start_load(b, want, err, sizeof err);
    pthread_mutex_unlock(&b->lock);
    if (rc) pod_error("bench: cannot load at start: %s", err);
    else wake_workers(b);
}

/* ---- the server's background job -------------------------------------------------- */

static void *job_open(pod_db *db, const struct pod_config *c, int host, void (*wake)(void *),
                      void *wake_arg, char *err, size_t errlen)
{
    struct pod_bench *b = pod_bench_new(db, c, host, err, errlen);
    if (b) pod_bench_set_waker(b, wake, wake_arg);
    return b;
}

static void job_started(void *b) { pod_bench_autoload(b); }
static bool job_has_work(void *b, int worker) { return pod_bench_has_work(b, worker); }
static void job_work(void *b, struct pod_worker *w, bool (*yield)(void *), void *arg)
{
    pod_bench_work(b, w, yield, arg);
}
static void job_close(void *b) { pod_bench_free(b); }

const struct pod_worker_job pod_bench_job = {
    .open = job_open,
    .started = job_started,
    .has_work = job_has_work,
    .work = job_work,
    .close = job_close,
};
