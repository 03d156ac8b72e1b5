#include "engine/worker.h"

#include <stdio.h>
#include <sys/prctl.h>
#include <string.h>
#include <time.h>

#include "cxl/numa.h"
#include "log/txlog.h"
#include "pod/pod.h"
#include "txn/txn.h"
#include "util/log.h"
#include "util/clock.h"

static __thread struct pod_worker *tls_worker;

struct pod_worker *pod_current_worker(void) { return tls_worker; }

/* Randomized exponential backoff after a conflict: up to 2^attempt
 * microseconds, capped at 1 ms; short waits spin (a sleep would cost more
 * than the wait), long ones sleep so the other core's work goes on. */
static void backoff(struct pod_worker *w, int attempt)
{
    uint64_t cap_us = attempt < 10 ? (1ull << attempt) : 1024;
    uint64_t us = pod_rand(&w->rng) % (cap_us + 1);
    if (us < 20) {
        for (uint64_t i = 0; i < us * 100; i++) __asm__ __volatile__("" ::: "memory");
        return;
    }
    struct timespec ts = {0, (long)(us * 1000)};
    nanosleep(&ts, NULL);
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
    struct pod_worker *prev = tls_worker;
    tls_worker = w;
    for (int attempt = 0;; attempt++) {
        /* Between transactions: other hosts' requests, and move-out. */
        if (db->pod) pod_between(w);
        txn_begin(w->tx);
        pod_result_clear(res);
        rc = p->fn(w->tx, args, res, p->ctx);
        int ts = txn_status(w->tx);
        /* A procedure that ignored a conflict must not commit. */
        if (rc >= 0 && ts == POD_OK) {
            txn_commit(w->tx);
            bump(&st->commits);
            break;
        }
        if (rc >= 0 || rc == POD_CONFLICT) rc = ts != POD_OK ? ts : rc;
        if (rc != POD_CONFLICT && txn_message(w->tx)[0])
            snprintf(msg, msglen, "%s", txn_message(w->tx));
        enum pod_abort_cause cause = txn_abort_cause(w->tx);
        txn_abort(w->tx);
        if (rc == POD_CONFLICT) {
            bump(&st->conflicts);
            bump(&st->by_cause[cause]);
            if (attempt + 1 >= db->opt.max_retries) {
                bump(&st->gave_up);
                snprintf(msg, msglen, "%s: gave up after %d conflicts", p->name, attempt + 1);
                rc = POD_E_RETRIES;
                break;
            }
            backoff(w, attempt);
            continue;
        }
        if (rc == POD_USER_ABORT) bump(&st->user_aborts);
        else bump(&st->errors);
        if (!msg[0]) snprintf(msg, msglen, "%s: %s", p->name, pod_status_name(rc));
        break;
    }
    tls_worker = prev;
    return rc;
}

static void *worker_main(void *arg)
{
    struct pod_worker *w = arg;
    tls_worker = w;
    char name[16];
    snprintf(name, sizeof name, "pod-worker%d", w->id % 1000);
    pthread_setname_np(pthread_self(), name);
    /* An idle worker sleeps IDLE_POLL_US at a time between polls of its
     * inbox; the default 50 us timer slack would let each sleep run to
     * twice that, and another host's request wait as long. */
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    if (w->cpu >= 0) {
        pod_err perr;
        if (cxl_pin_thread(&w->cpu, 1, &perr)) pod_warn("worker %d: %s; not pinned", w->id, perr.msg);
    }
    w->body(w, w->arg);
    log_worker_idle_hook(w->db, w->id); /* no more commits from this thread */
    tls_worker = NULL;
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
    for (int i = 0; i < db->opt.nworkers; i++) {
        struct pod_worker *w = db->workers[i];
        w->body = body;
        w->arg = arg;
        w->cpu = ncpus > 0 ? cpus[i % ncpus] : -1;
    }
    for (int i = 0; i < db->opt.nworkers; i++) {
        struct pod_worker *w = db->workers[i];
        int rc = pthread_create(&w->thread, NULL, worker_main, w);
        if (rc) {
            snprintf(err, errlen, "cannot start worker %d: %s", i, strerror(rc));
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
    for (int i = 0; i < db->nrunning; i++) pthread_join(db->workers[i]->thread, NULL);
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
