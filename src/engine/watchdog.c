#include "engine/watchdog.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/log.h"

struct pod_watchdog {
    pod_db *db;
    uint64_t slow_ns;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    /* Per worker (the admin last): the call last reported (its start) and
     * how many times, so that each call is logged once per slow_ns. */
    uint64_t *seen_start;
    uint32_t *reports;
};

/* Worker i of db, the admin worker after the others. */
static struct pod_worker *worker_at(const pod_db *db, int i)
{
    return i < db->opt.nworkers ? db->workers[i] : db->admin;
}

/* A copy of w's call; its age (0: none runs). */
static uint64_t call_of(const struct pod_worker *w, uint64_t now, struct pod_call_state *out)
{
    uint64_t started = __atomic_load_n(&w->call.started_ns, __ATOMIC_ACQUIRE);
    if (!started) return 0;
    out->started_ns = started;
    out->proc = __atomic_load_n(&w->call.proc, __ATOMIC_RELAXED);
    out->doing = __atomic_load_n(&w->call.doing, __ATOMIC_RELAXED);
    out->conflicts = __atomic_load_n(&w->call.conflicts, __ATOMIC_RELAXED);
    for (int c = 0; c < POD_CAUSE_COUNT; c++)
        out->by_cause[c] = __atomic_load_n(&w->call.by_cause[c], __ATOMIC_RELAXED);
    return now > started ? now - started : 1;
}

uint64_t pod_oldest_call(const pod_db *db, struct pod_call_state *out, int *worker)
{
    uint64_t now = pod_mono_ns(), oldest = 0;
    for (int i = 0; i <= db->opt.nworkers; i++) {
        struct pod_worker *w = worker_at(db, i);
        struct pod_call_state cs;
        uint64_t age = w ? call_of(w, now, &cs) : 0;
        if (age > oldest) {
            oldest = age;
            if (out) *out = cs;
            if (worker) *worker = w->id;
        }
    }
    return oldest;
}

int pod_calls_running(const pod_db *db)
{
    int n = 0;
    for (int i = 0; i <= db->opt.nworkers; i++) {
        struct pod_worker *w = worker_at(db, i);
        if (w && __atomic_load_n(&w->call.started_ns, __ATOMIC_RELAXED)) n++;
    }
    return n;
}

void pod_call_describe(const pod_db *db, const struct pod_call_state *cs, int worker,
                       uint64_t age_ns, char *out, size_t len)
{
    char causes[256], doing[64];
    pod_causes_text(cs->by_cause, causes, sizeof causes);
    if (cs->doing >= 0) snprintf(doing, sizeof doing, "waiting for host %d's reply", cs->doing);
    else if (cs->doing == POD_CALL_BACKOFF) snprintf(doing, sizeof doing, "backing off after a conflict");
    else snprintf(doing, sizeof doing, "running an attempt");
    const char *name = cs->proc >= 0 && (uint32_t)cs->proc < db->nprocs ? db->procs[cs->proc].name : "?";
    snprintf(out, len, "%s on worker %d has run for %.1f s: %u conflicts (%s); now %s", name,
             worker, (double)age_ns / 1e9, cs->conflicts, causes, doing);
}

static void look(struct pod_watchdog *wd)
{
    pod_db *db = wd->db;
    uint64_t now = pod_mono_ns();
    for (int i = 0; i <= db->opt.nworkers; i++) {
        struct pod_worker *w = worker_at(db, i);
        struct pod_call_state cs;
        uint64_t age = w ? call_of(w, now, &cs) : 0;
        if (!age) continue;
        if (cs.started_ns != wd->seen_start[i]) {
            wd->seen_start[i] = cs.started_ns;
            wd->reports[i] = 0;
        }
        if (age < wd->slow_ns * (wd->reports[i] + 1)) continue;
        wd->reports[i]++;
        char text[512];
        pod_call_describe(db, &cs, w->id, age, text, sizeof text);
        pod_warn("slow call: %s", text);
    }
}

static void *watchdog_main(void *arg)
{
    struct pod_watchdog *wd = arg;
    /* Looks four times per period, at most once a second: a slow call is
     * reported within a quarter of the period (or a second) of passing it. */
    uint64_t every_ns = wd->slow_ns / 4;
    if (every_ns > 1000000000ull) every_ns = 1000000000ull;
    pthread_mutex_lock(&wd->mu);
    while (!wd->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t abs = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + every_ns;
        ts.tv_sec = (time_t)(abs / 1000000000ull);
        ts.tv_nsec = (long)(abs % 1000000000ull);
        int rc = pthread_cond_timedwait(&wd->cv, &wd->mu, &ts);
        if (wd->stop) break;
        if (rc == ETIMEDOUT) {
            pthread_mutex_unlock(&wd->mu);
            look(wd);
            pthread_mutex_lock(&wd->mu);
        }
    }
    pthread_mutex_unlock(&wd->mu);
    return NULL;
}

struct pod_watchdog *pod_watchdog_start(pod_db *db, uint64_t slow_ms, pod_err *err)
{
    struct pod_watchdog *wd = calloc(1, sizeof *wd);
    int n = db->opt.nworkers + 1;
    if (wd) {
        wd->seen_start = calloc((size_t)n, sizeof *wd->seen_start);
        wd->reports = calloc((size_t)n, sizeof *wd->reports);
    }
    if (!wd || !wd->seen_start || !wd->reports) {
        pod_err_set(err, "out of memory for the watchdog");
        goto fail;
    }
    wd->db = db;
    wd->slow_ns = (slow_ms ? slow_ms : 1) * 1000000ull;
    pthread_mutex_init(&wd->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&wd->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&wd->thread, NULL, watchdog_main, wd);
    if (rc) {
        pod_err_set(err, "cannot start the watchdog thread: %s", strerror(rc));
        pthread_cond_destroy(&wd->cv);
        pthread_mutex_destroy(&wd->mu);
        goto fail;
    }
    pthread_setname_np(wd->thread, "pod-watchdog");
    return wd;
fail:
    if (wd) {
        free(wd->seen_start);
        free(wd->reports);
    }
    free(wd);
    return NULL;
}

void pod_watchdog_stop(struct pod_watchdog *wd)
{
    if (!wd) return;
    pthread_mutex_lock(&wd->mu);
    wd->stop = true;
    pthread_cond_signal(&wd->cv);
    pthread_mutex_unlock(&wd->mu);
    pthread_join(wd->thread, NULL);
    pthread_cond_destroy(&wd->cv);
    pthread_mutex_destroy(&wd->mu);
    free(wd->seen_start);
    free(wd->reports);
    free(wd);
}
