#include "engine/worker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <string.h>

#include "cxl/numa.h"
#include "engine/watchdog.h"
#include "log/txlog.h"
#include "pod/pod.h"
#include "txn/cc.h"
#include "txn/txn.h"
#include "util/lanes.h"
#include "util/log.h"
#include "util/clock.h"

/* The worker a thread (or a lane of one) runs for: lane-local, since a
 * thread's lanes are workers of their own. */
struct pod_worker *pod_current_worker(void) { return lanes_local(); }

/* Randomized exponential backoff after a conflict: up to 2^attempt
 * microseconds, capped at 1 ms; short waits spin (a sleep would cost more
 * than the wait), long ones sleep so the other core's work goes on, and the
 * thread's other lanes run meanwhile (lanes_sleep_ns does all three). */
static void backoff(struct pod_worker *w, int attempt)
{
    uint64_t cap_us = attempt < 10 ? (1ull << attempt) : 1024;
    lanes_sleep_ns(pod_rand(&w->rng) % (cap_us + 1) * 1000);
}

static void bump(uint64_t *c) { __atomic_store_n(c, *c + 1, __ATOMIC_RELAXED); }

static int check_args(const pod_proc_def *p, const pod_args *a, char *msg, size_t msglen)
{
    if (p->nargs >= 0 && a->n != p->nargs) {
        snprintf(msg, msglen, "%s takes %d argument%s, got %d", p->name, p->nargs,
                 p->nargs == 1 ? "" : "s", a->n);
        return POD_E_INVALID;
    }
    if (p->arg_types)
        for (int i = 0; i < a->n; i++)
            if (a->v[i].type != p->arg_types[i]) {
                static const char *const tn[] = {"null", "int64", "double", "bytes"};
                snprintf(msg, msglen, "%s: argument %d must be %s, got %s", p->name, i + 1,
                         tn[p->arg_types[i] & 3], tn[a->v[i].type & 3]);
                return POD_E_INVALID;
            }
    return POD_OK;
}

/* After a conflict: POD_CONFLICT to retry, or POD_E_RETRIES with msg set
 * when the call's budget (attempts, time) is spent. */
static int retry_or_give_up(struct pod_worker *w, const pod_proc_def *p, int attempt,
                            uint64_t started, char *msg, size_t msglen)
{
    const struct pod_db_options *o = &w->db->opt;
    uint64_t now = pod_mono_ns();
    uint64_t limit_ns = o->retry_timeout_ms * 1000000ull;
    bool out_of_time = limit_ns && now - started >= limit_ns;
    if (attempt + 1 < o->max_retries && !out_of_time) return POD_CONFLICT;
    char causes[256];
    pod_causes_text(w->call.by_cause, causes, sizeof causes);
    if (out_of_time)
        snprintf(msg, msglen, "%s: gave up after %.1f s of retries (engine.retry_timeout_ms: %llu; "
                 "%d conflicts: %s)", p->name, (double)(now - started) / 1e9,
                 (unsigned long long)o->retry_timeout_ms, attempt + 1, causes);
    else
        snprintf(msg, msglen, "%s: gave up after %d conflicts (engine.max_retries; %s)", p->name,
                 attempt + 1, causes);
    return POD_E_RETRIES;
}

/* A call gave up (msg says why): log which lock its last conflict met and
 * whether any other call of this host runs, once a second at most. A call
 * that meets the same lock for its whole budget while nothing else runs
 * points at a lock nobody holds any more. */
static void log_give_up(struct pod_worker *w, const char *msg)
{
    static uint64_t next_ns;
    uint64_t now = pod_mono_ns(), next = __atomic_load_n(&next_ns, __ATOMIC_RELAXED);
    if (now < next || !__atomic_compare_exchange_n(&next_ns, &next, now + 1000000000ull, false,
                                                   __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return;
    char met[384];
    txn_describe_conflict(w->tx, met, sizeof met);
    pod_warn("%s; its last conflict met the lock of %s; other calls running on this host: %d",
             msg, met, pod_calls_running(w->db) - 1);
}

int pod_call(struct pod_worker *w, int proc, const pod_args *args, pod_result *res, char *msg,
             size_t msglen)
{
    pod_db *db = w->db;
    char scratch[8];
    if (!msg) {
        msg = scratch;
        msglen = sizeof scratch;
    }
    msg[0] = 0;
    if (proc < 0 || proc >= (int)db->nprocs) {
        snprintf(msg, msglen, "no procedure with id %d", proc);
        return POD_E_INVALID;
    }
    const pod_proc_def *p = &db->procs[proc];
    struct pod_proc_stats *st = &w->stats[proc];
    int rc = check_args(p, args, msg, msglen);
    if (rc) {
        bump(&st->errors);
        return rc;
    }
    struct pod_worker *prev = lanes_local();
    lanes_set_local(w);
    struct pod_call_state *cs = &w->call;
    uint64_t started = pod_mono_ns();
    bool handed_off = false;
    for (int c = 0; c < POD_CAUSE_COUNT; c++) __atomic_store_n(&cs->by_cause[c], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&cs->conflicts, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&cs->proc, proc, __ATOMIC_RELAXED);
    pod_call_doing(w, POD_CALL_RUNNING);
    __atomic_store_n(&cs->started_ns, started, __ATOMIC_RELEASE);
    for (int attempt = 0;; attempt++) {
        /* Between transactions: other hosts' requests, and move-out. */
        if (db->pod) pod_between(w);
        /* A call that keeps retrying must not hold back the durable
         * epoch that others' replies wait for. */
        if (attempt) log_worker_retry_hook(db, w->id);
        pod_call_doing(w, POD_CALL_RUNNING);
        txn_begin(w->tx);
        pod_result_clear(res);
        rc = p->fn(w->tx, args, res, p->ctx);
        int ts = txn_status(w->tx);
        /* A procedure that ignored a conflict must not commit. */
        if (rc >= 0 && ts == POD_OK) {
            txn_commit(w->tx);
            /* An optimistic protocol validates at commit. */
            if ((ts = txn_status(w->tx)) == POD_OK) {
                bump(&st->commits);
                break;
            }
            rc = ts;
        }
        if (rc >= 0 || rc == POD_CONFLICT) rc = ts != POD_OK ? ts : rc;
        if (rc != POD_CONFLICT && txn_message(w->tx)[0])
            snprintf(msg, msglen, "%s", txn_message(w->tx));
        enum pod_abort_cause cause = txn_abort_cause(w->tx);
        txn_abort(w->tx);
        if (rc == POD_CONFLICT) {
            bump(&st->conflicts);
            bump(&st->by_cause[cause]);
            __atomic_store_n(&cs->by_cause[cause], cs->by_cause[cause] + 1, __ATOMIC_RELAXED);
            __atomic_store_n(&cs->conflicts, (uint32_t)attempt + 1, __ATOMIC_RELAXED);
            rc = retry_or_give_up(w, p, attempt, started, msg, msglen);
            if (rc == POD_E_RETRIES) {
                bump(&st->gave_up);
                log_give_up(w, msg);
                break;
            }
            if (!handed_off && w->on_retrying && pod_mono_ns() - started >= POD_RETRY_HANDOFF_NS) {
                handed_off = true;
                w->on_retrying(w, w->arg);
            }
            pod_call_doing(w, POD_CALL_BACKOFF);
            backoff(w, attempt);
            continue;
        }
        if (rc == POD_USER_ABORT) bump(&st->user_aborts);
        else bump(&st->errors);
        if (!msg[0]) snprintf(msg, msglen, "%s: %s", p->name, pod_status_name(rc));
        break;
    }
    __atomic_store_n(&cs->started_ns, 0, __ATOMIC_RELEASE);
    lanes_set_local(prev);
    return rc;
}

/* A worker's life on its lane (or thread). */
static void worker_run(struct pod_worker *w)
{
    lanes_set_local(w);
    w->body(w, w->arg);
    log_worker_idle_hook(w->db, w->id); /* no more commits from this worker */
    lanes_set_local(NULL);
}

static void lane_main(void *arg, unsigned lane)
{
    struct pod_worker *const *ws = arg;
    worker_run(ws[lane]);
}

/* A worker thread: workers[first .. first + lanes - 1] as its lanes. */
struct worker_thread {
    pod_db *db;
    int first;
};

static void *worker_main(void *arg)
{
    struct worker_thread t = *(struct worker_thread *)arg;
    free(arg);
    pod_db *db = t.db;
    struct pod_worker *w = db->workers[t.first];
    int lanes = db->opt.lanes > 1 ? db->opt.lanes : 1;
    char name[16];
    snprintf(name, sizeof name, "pod-worker%d", t.first / lanes % 1000);
    pthread_setname_np(pthread_self(), name);
    /* An idle worker may sleep POD_IDLE_POLL_NS at a time between polls of its
     * inbox; the default 50 us timer slack would let each sleep run to
     * twice that, and another host's request wait as long. */
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    if (w->cpu >= 0) {
        pod_err perr;
        if (cxl_pin_thread(&w->cpu, 1, &perr)) pod_warn("worker %d: %s; not pinned", w->id, perr.msg);
    }
    if (lanes == 1) {
        worker_run(w);
        return NULL;
    }
    pod_err e;
    if (lanes_run((unsigned)lanes, 0, lane_main, &db->workers[t.first], &e) != 0) {
        /* stacks could not be mapped: its workers would never run */
        fprintf(stderr, "worker thread %d cannot run its %d lanes: %s\n", t.first / lanes,
                lanes, e.msg);
        abort();
    }
    return NULL;
}

int pod_workers_start(pod_db *db, const int *cpus, int ncpus,
                      void (*body)(struct pod_worker *w, void *arg), void *arg, char *err,
                      size_t errlen)
{
    if (db->nrunning) {
        snprintf(err, errlen, "workers are already running");
        return -1;
    }
    if (!db->cc_started && db->cc->start && db->cc->start(db, err, errlen) != 0) return -1;
    db->cc_started = true;
    int lanes = db->opt.lanes > 1 ? db->opt.lanes : 1, nthreads = db->opt.nworkers / lanes;
    for (int i = 0; i < db->opt.nworkers; i++) {
        struct pod_worker *w = db->workers[i];
        w->body = body;
        w->arg = arg;
        w->cpu = ncpus > 0 ? cpus[i / lanes % ncpus] : -1; /* a thread's lanes share its CPU */
    }
    if (!db->threads && !(db->threads = calloc((size_t)nthreads, sizeof *db->threads))) {
        snprintf(err, errlen, "out of memory for %d worker threads", nthreads);
        return -1;
    }
    for (int i = 0; i < nthreads; i++) {
        struct worker_thread *t = malloc(sizeof *t);
        int rc = t ? 0 : ENOMEM;
        if (t) {
            *t = (struct worker_thread){db, i * lanes};
            rc = pthread_create(&db->threads[i], NULL, worker_main, t);
            if (rc) free(t);
        }
        if (rc) {
            snprintf(err, errlen, "cannot start worker thread %d: %s", i, strerror(rc));
            db->nrunning = i;
            pod_workers_join(db);
            return -1;
        }
        db->nrunning = i + 1;
    }
    return 0;
}

void pod_workers_join(pod_db *db)
{
    for (int i = 0; i < db->nrunning; i++) pthread_join(db->threads[i], NULL);
    db->nrunning = 0;
}

struct pod_worker *pod_admin_begin(pod_db *db)
{
    pthread_mutex_lock(&db->admin_lock);
    return db->admin;
}

void pod_admin_end(pod_db *db)
{
    log_worker_idle_hook(db, db->admin->id); /* logging hook: the admin worker goes idle */
    pthread_mutex_unlock(&db->admin_lock);
}
