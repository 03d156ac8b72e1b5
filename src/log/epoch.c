/* The epoch thread of a host: advances E when it is the lowest live host,
 * computes and persists the pod durable epoch. See epoch.h. */
#include "log/epoch.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/log.h"

#define LIVENESS_REFRESH_NS (100ull * 1000 * 1000)
#define POLL_MIN_NS (100ull * 1000)
#define POLL_MAX_NS (1000ull * 1000)
#define WARN_EVERY_NS (5ull * 1000 * 1000 * 1000)
#define SLOW_SYNC_NS (1000ull * 1000 * 1000)
#define QUIET_SLEEP_NS (1000ull * 1000 * 1000) /* the longest sleep of a quiet pod */
#define WATCH_EVERY_NS (1000ull * 1000 * 1000)  /* the log directory's whole check */

struct log_epochs {
    struct log_epoch_options o;
    struct cxl_control *ctl;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, nudged;
    uint64_t persisted;           /* atomic */
    /* atomic: how persisted grew (log_epochs_persist_counts) */
    uint64_t by_file, by_marks, by_empty;
    bool watching;                /* atomic: the thread's current sleep is a poll */
    uint64_t period_ns, poll_ns;
    /* liveness cache */
    bool alive[POD_MAX_HOSTS];
    uint64_t alive_at;
    uint64_t warned_at;
    /* the log directory and the hosts that logged (epoch.h) */
    uint64_t watched_at, hosts_at, hosts_warned_at;
    uint32_t logging_hosts; /* the config's hosts that log (mask) */
    bool listed;            /* every running host that logs lists this one */
};

static void refresh_liveness(struct log_epochs *le, uint64_t now)
{
    if (now - le->alive_at < LIVENESS_REFRESH_NS && le->alive_at) return;
    for (int h = 0; h < le->o.conf->nhosts; h++) le->alive[h] = cxl_host_alive(le->o.region, h);
    le->alive_at = now;
}

/* The lowest live host id advances E. */
static bool is_leader(const struct log_epochs *le)
{
    for (int h = 0; h < le->o.host; h++)
        if (le->alive[h]) return false;
    return true;
}

/* The minimum over the loggers of every host that logs. alive: cached
 * liveness (a host it calls dead is checked again), or NULL to check now.
 * *dead: a dead host was met (0 returned in pod mode); *lost: a host whose
 * log directory was lost (0 returned in pod mode, or when it is this one;
 * whether it runs or not: what it logged since is nowhere). */
static uint64_t compute_durable(struct cxl_region *r, const struct pod_config *c, bool pod_mode,
                                const bool *alive, int *dead, int *lost)
{
    struct cxl_control *ctl = r->ctl;
    *dead = *lost = -1;
    /* E first: a logger word read afterwards that is still UINT64_MAX (its
     * host runs no transaction) stands for "nothing below E pending". */
    uint64_t d = __atomic_load_n(&ctl->global_epoch.v, __ATOMIC_SEQ_CST);
    for (int h = 0; h < c->nhosts; h++) {
        if (c->hosts[h].loggers == 0) continue;
        if ((pod_mode || h == r->host) &&
            __atomic_load_n(&ctl->hosts[h].log_dir_lost, __ATOMIC_ACQUIRE)) {
            *lost = h;
            return 0;
        }
        uint32_t st = __atomic_load_n(&ctl->hosts[h].state, __ATOMIC_ACQUIRE);
        if (st == CXL_HOST_FREE) continue;
        /* The cache may predate the host's start (its slot was free then):
         * "dead" is always checked again now. */
        if (h != r->host && !(alive && alive[h]) && !cxl_host_alive(r, h)) {
            *dead = h;
            if (pod_mode) return 0;
            continue;
        }
        for (int l = 0; l < c->hosts[h].loggers; l++) {
            uint64_t v = __atomic_load_n(&ctl->logger[h][l].durable, __ATOMIC_SEQ_CST);
            if (v < d) d = v;
        }
    }
    return d;
}

/* Every logger of every host of the pod has a durable mark at d or above
 * (ctl->logger[h][l].marked; src/log/logger.c writes them with its blocks): then
 * recovery finds every epoch below d committed in the logs themselves, and
 * the durable-epoch file need not be written for d (docs/durability.md,
 * "Marks"). A host that is not there, or does not log, says no. */
static bool marks_cover(const struct cxl_region *r, const struct pod_config *c, uint64_t d)
{
    const struct cxl_control *ctl = r->ctl;
    for (int h = 0; h < c->nhosts; h++) {
        if (c->hosts[h].loggers == 0) return false;
        if (__atomic_load_n(&ctl->hosts[h].state, __ATOMIC_ACQUIRE) == CXL_HOST_FREE) return false;
        for (int l = 0; l < c->hosts[h].loggers; l++)
            if (__atomic_load_n(&ctl->logger[h][l].marked, __ATOMIC_SEQ_CST) < d) return false;
    }
    return true;
}

/* Some logger of the pod wrote a record of epoch p or later. Read after the
 * durable words (compute_durable): a logger stores its written word before
 * it publishes the durable epoch that covers the record. When none did,
 * raising the recorded epoch from p to d records nothing: the logs hold no
 * record in between, and a reply released meanwhile read only values of
 * epochs below p. Stale words of hosts that are gone only make this say yes. */
static bool records_from(const struct cxl_region *r, const struct pod_config *c, uint64_t p)
{
    const struct cxl_control *ctl = r->ctl;
    for (int h = 0; h < c->nhosts; h++)
        for (int l = 0; l < c->hosts[h].loggers; l++) {
            uint64_t w = __atomic_load_n(&ctl->logger[h][l].written, __ATOMIC_SEQ_CST);
            if (w && w >= p) return true; /* 0: none (epochs start at 1) */
        }
    return false;
}

/* Some logger of the pod wrote a record of one of the last WRITING_EPOCHS
 * epochs before e: commits are under way, and an idle logger of ours that
 * learns of E late holds back their replies. In an idle pod nobody waits for
 * our loggers, and watching E closely for them only costs CPU
 * (docs/durability.md). A logger writes an epoch's records after it ended,
 * so under load its word trails E by one or two: the window must be wider
 * than that, or a busy pod would look quiet between two writes. */
#define WRITING_EPOCHS 4
static bool pod_writing(const struct cxl_region *r, const struct pod_config *c, uint64_t e)
{
    return records_from(r, c, e > WRITING_EPOCHS ? e - WRITING_EPOCHS : 1);
}

uint64_t log_pod_durable_now(struct cxl_region *r, const struct pod_config *c, bool pod_mode)
{
    int dead, lost;
    return compute_durable(r, c, pod_mode, NULL, &dead, &lost);
}

/* With the cached liveness (the thread runs every poll period). */
static uint64_t pod_durable(struct log_epochs *le, uint64_t now, bool *frozen)
{
    int dead, lost;
    uint64_t d = compute_durable(le->o.region, le->o.conf, le->o.pod_mode, le->alive, &dead, &lost);
    *frozen = (dead >= 0 && le->o.pod_mode) || lost >= 0;
    if (lost >= 0) {
        /* This host's own loss is told by its watch (logdir_watch_remind). */
        if (lost != le->o.host && now - le->warned_at > WARN_EVERY_NS) {
            pod_error("the log directory of host %d was lost: the pod durable epoch "
                      "is frozen at %llu and no reply is released any more; stop the pod (host "
                      "%d's log says what happened; docs/durability.md, \"The log directory "
                      "watched\")", lost,
                      (unsigned long long)__atomic_load_n(&le->ctl->pod_durable_epoch.v,
                                                          __ATOMIC_ACQUIRE), lost);
            le->warned_at = now;
        }
    } else if (*frozen && now - le->warned_at > WARN_EVERY_NS) {
        pod_error("host %d died: the pod durable epoch is frozen at %llu and no reply is "
                  "released any more; restart the whole pod to recover", dead,
                  (unsigned long long)__atomic_load_n(&le->ctl->pod_durable_epoch.v,
                                                      __ATOMIC_ACQUIRE));
        le->warned_at = now;
    }
    return d;
}

/* ---- the hosts that logged (epoch.h) ---------------------------------------- */

/* Add the hosts whose loggers wrote records to this host's record of them,
 * and publish it in the slot. */
static void record_hosts(struct log_epochs *le, uint64_t now)
{
    const struct pod_config *c = le->o.conf;
    uint32_t have = durable_file_hosts(le->o.durable), seen = 0;
    if ((have & le->logging_hosts) == le->logging_hosts || logdir_watch_lost(le->o.watch)) return;
    for (int h = 0; h < c->nhosts; h++)
        for (int l = 0; l < c->hosts[h].loggers; l++)
            if (__atomic_load_n(&le->ctl->logger[h][l].written, __ATOMIC_ACQUIRE)) {
                seen |= 1u << h;
                break;
            }
    if ((have | seen) == have) return;
    pod_err err;
    if (durable_file_add_hosts(le->o.durable, seen, &err) == 0) {
        __atomic_store_n(&le->ctl->hosts[le->o.host].log_hosts, have | seen, __ATOMIC_SEQ_CST);
    } else if (now - le->hosts_warned_at > WARN_EVERY_NS) {
        pod_error("%s: the hosts that wrote log records cannot be recorded, and such a host "
                  "persists nothing until every running host lists it", err.msg);
        le->hosts_warned_at = now;
    }
}

/* Every other running host that logs lists this one among the hosts that
 * logged (or this one wrote no record yet): only then may a reply of its
 * records go, so that its log cannot vanish unnoticed (log/emptylog.h). */
static bool listed_by_peers(struct log_epochs *le)
{
    if (le->listed) return true;
    const struct pod_config *c = le->o.conf;
    const struct cxl_control *ctl = le->ctl;
    int me = le->o.host;
    bool wrote = false;
    for (int l = 0; l < c->hosts[me].loggers && !wrote; l++)
        wrote = __atomic_load_n(&ctl->logger[me][l].written, __ATOMIC_ACQUIRE) != 0;
    if (!wrote) return true;
    for (int g = 0; g < c->nhosts; g++) {
        if (g == me || c->hosts[g].loggers == 0 || !le->alive[g] ||
            __atomic_load_n(&ctl->hosts[g].state, __ATOMIC_ACQUIRE) != CXL_HOST_RUNNING)
            continue;
        if (!(__atomic_load_n(&ctl->hosts[g].log_hosts, __ATOMIC_ACQUIRE) >> me & 1)) return false;
    }
    le->listed = true;
    return true;
}

/* The durable-epoch file just written is still the directory's. */
static bool durable_file_verified(struct log_epochs *le)
{
    if (!le->o.watch) return true;
    struct stat st;
    if (durable_file_stat(le->o.durable, &st) != 0) return false;
    return logdir_watch_file(le->o.watch, DURABLE_FILE_NAME, &st) == LOGDIR_INTACT;
}

/* ---- a quiet pod ---------------------------------------------------------- */

static void ring_bell(struct cxl_host_slot *hs)
{
    __atomic_fetch_add(&hs->epoch_bell, 1, __ATOMIC_SEQ_CST);
    /* Not private: the threads of every host process meet on the word. */
    syscall(SYS_futex, &hs->epoch_bell, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

void log_epochs_wake_quiet(struct cxl_region *r, const struct pod_config *c)
{
    for (int h = 0; h < c->nhosts && h < POD_MAX_HOSTS; h++)
        if (__atomic_load_n(&r->ctl->hosts[h].epoch_quiet, __ATOMIC_SEQ_CST))
            ring_bell(&r->ctl->hosts[h]);
}

/* Nobody needs E to move: no host holds replies, no logger wrote a record of
 * the last epochs, and every live host runs on this kernel (so that its
 * log_epochs_wake_quiet reaches us). */
static bool pod_quiet(const struct log_epochs *le, uint64_t e)
{
    const struct pod_config *c = le->o.conf;
    for (int h = 0; h < c->nhosts && h < POD_MAX_HOSTS; h++)
        if (__atomic_load_n(&le->ctl->hosts[h].reply_waiters, __ATOMIC_SEQ_CST) > 0) return false;
    return !pod_writing(le->o.region, c, e) && cxl_hosts_share_kernel(le->o.region);
}

static bool nudged_or_stopped(struct log_epochs *le)
{
    pthread_mutex_lock(&le->mu);
    bool v = le->nudged || le->stop;
    pthread_mutex_unlock(&le->mu);
    return v;
}

/* Sleep while the pod stays quiet (at most QUIET_SLEEP_NS). The quiet flag
 * is raised before the last look at the pod, and wakers raise their count
 * or write their records before they look at the flag: one of the two sees
 * the other. */
static void quiet_sleep(struct log_epochs *le, uint64_t e)
{
    struct cxl_host_slot *me = &le->ctl->hosts[le->o.host];
    __atomic_store_n(&me->epoch_quiet, 1, __ATOMIC_SEQ_CST);
    uint32_t bell = __atomic_load_n(&me->epoch_bell, __ATOMIC_SEQ_CST);
    if (pod_quiet(le, e) && !nudged_or_stopped(le)) {
        struct timespec ts = {(time_t)(QUIET_SLEEP_NS / 1000000000ull),
                              (long)(QUIET_SLEEP_NS % 1000000000ull)};
        syscall(SYS_futex, &me->epoch_bell, FUTEX_WAIT, bell, &ts, NULL, 0);
    }
    __atomic_store_n(&me->epoch_quiet, 0, __ATOMIC_SEQ_CST);
}

static void *epoch_main(void *arg)
{
    struct log_epochs *le = arg;
    pthread_setname_np(pthread_self(), "pod-epoch");
    struct cxl_control *ctl = le->ctl;
    uint64_t next_tick = pod_mono_ns() + le->period_ns;
    uint64_t persist_warned = 0, e_seen = 0;
    pthread_mutex_lock(&le->mu);
    while (!le->stop) {
        pthread_mutex_unlock(&le->mu);
        uint64_t now = pod_mono_ns();
        refresh_liveness(le, now);
        if (le->o.watch && now - le->watched_at >= WATCH_EVERY_NS) {
            le->watched_at = now;
            logdir_watch_check(le->o.watch);
            logdir_watch_remind(le->o.watch);
        }
        if (le->o.durable && now - le->hosts_at >= le->period_ns) {
            le->hosts_at = now;
            record_hosts(le, now);
        }
        if (now >= next_tick) {
            if (is_leader(le)) {
                uint64_t e = __atomic_load_n(&ctl->global_epoch.v, __ATOMIC_ACQUIRE);
                __atomic_compare_exchange_n(&ctl->global_epoch.v, &e, e + 1, false,
                                            __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE);
            }
            next_tick += le->period_ns;
            if (next_tick <= now) next_tick = now + le->period_ns; /* we were descheduled */
        }
        uint64_t e_now = __atomic_load_n(&ctl->global_epoch.v, __ATOMIC_ACQUIRE);
        if (e_now != e_seen) {
            e_seen = e_now;
            if (le->o.on_epoch) le->o.on_epoch(le->o.epoch_arg);
        }
        bool frozen;
        uint64_t d = pod_durable(le, now, &frozen);
        if (!frozen && d) {
            log_atomic_max(&ctl->pod_durable_epoch.v, d);
            uint64_t p = __atomic_load_n(&le->persisted, __ATOMIC_RELAXED);
            /* Nothing once the log directory is lost (dirwatch.h). */
            if (le->o.durable && d > p && !logdir_watch_lost(le->o.watch) &&
                listed_by_peers(le)) {
                pod_err err;
                uint64_t t0 = pod_mono_ns();
                bool marked = marks_cover(le->o.region, le->o.conf, d);
                bool empty = !marked && !records_from(le->o.region, le->o.conf,
                                                      durable_file_epoch(le->o.durable));
                int wrc = marked || empty ? 0 : durable_file_write(le->o.durable, d, &err);
                /* The file was synced: is it still in the directory? (The
                 * loggers checked theirs before they published.) */
                bool checked = wrc == 0 && (marked || empty || durable_file_verified(le));
                if (checked)
                    __atomic_fetch_add(marked  ? &le->by_marks
                                       : empty ? &le->by_empty
                                               : &le->by_file,
                                       1, __ATOMIC_RELAXED);
                uint64_t dt = pod_mono_ns() - t0;
                if (dt > SLOW_SYNC_NS)
                    pod_warn("recording durable epoch %llu took %.0f ms (replies wait for it)",
                             (unsigned long long)d, (double)dt / 1e6);
                if (checked) {
                    /* seq_cst: on_durable's read of the waiters' count must
                     * not pass it (src/server/server.c, on_durable). */
                    __atomic_store_n(&le->persisted, d, __ATOMIC_SEQ_CST);
                    if (le->o.on_durable) le->o.on_durable(le->o.arg, d);
                } else if (wrc != 0 && now - persist_warned > WARN_EVERY_NS) {
                    pod_error("%s; replies wait until it can be written", err.msg);
                    persist_warned = now;
                }
            }
        }
        /* Sleep until the next tick or poll, or a nudge (epoch.h:
         * log_epochs_watch says when it polls). "Not watching" is
         * stored before the question is asked: a worker that goes idle
         * meanwhile either is seen idle here or sees false and nudges
         * (log_epochs_watch). */
        __atomic_store_n(&le->watching, false, __ATOMIC_SEQ_CST);
        bool watch = (le->o.waiters && __atomic_load_n(le->o.waiters, __ATOMIC_SEQ_CST) > 0) ||
                     (le->o.needs_watch && le->o.needs_watch(le->o.epoch_arg) &&
                      pod_writing(le->o.region, le->o.conf, e_seen));
        if (watch) __atomic_store_n(&le->watching, true, __ATOMIC_SEQ_CST);
        if (!watch && pod_quiet(le, e_seen)) {
            quiet_sleep(le, e_seen);
            pthread_mutex_lock(&le->mu);
            /* Awake (or never asleep: nudged, or no longer quiet): the next
             * round looks at everything, so a nudge is served, and ticks at
             * once if the sleep outlasted the tick. */
            le->nudged = false;
            continue;
        }
        uint64_t wake = now + (watch ? le->poll_ns : le->period_ns);
        if (next_tick < wake) wake = next_tick;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t abs = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec +
                       (wake > now ? wake - now : 0);
        ts.tv_sec = (time_t)(abs / 1000000000ull);
        ts.tv_nsec = (long)(abs % 1000000000ull);
        pthread_mutex_lock(&le->mu);
        while (!le->stop && !le->nudged)
            if (pthread_cond_timedwait(&le->cv, &le->mu, &ts) == ETIMEDOUT) break;
        le->nudged = false;
    }
    pthread_mutex_unlock(&le->mu);
    return NULL;
}

struct log_epochs *log_epochs_start(const struct log_epoch_options *o, pod_err *err)
{
    struct log_epochs *le = calloc(1, sizeof *le);
    if (!le) {
        pod_err_set(err, "out of memory");
        return NULL;
    }
    le->o = *o;
    le->ctl = o->region->ctl;
    int ms = o->epoch_ms > 0 ? o->epoch_ms : o->conf->engine.epoch_ms;
    le->period_ns = (uint64_t)ms * 1000000ull;
    le->poll_ns = le->period_ns / 4;
    if (le->poll_ns < POLL_MIN_NS) le->poll_ns = POLL_MIN_NS;
    if (le->poll_ns > POLL_MAX_NS) le->poll_ns = POLL_MAX_NS;
    le->persisted = o->durable ? durable_file_epoch(o->durable) : UINT64_MAX;
    for (int h = 0; h < o->conf->nhosts; h++)
        if (o->conf->hosts[h].loggers > 0) le->logging_hosts |= 1u << h;
    /* Epoch 0 is never used: a row's epoch-version 0 means "never written". */
    log_atomic_max(&le->ctl->global_epoch.v, o->start_epoch > 1 ? o->start_epoch : 1);
    pthread_mutex_init(&le->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&le->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&le->th, NULL, epoch_main, le);
    if (rc) {
        pod_err_set(err, "cannot start the epoch thread: %s", strerror(rc));
        pthread_mutex_destroy(&le->mu);
        pthread_cond_destroy(&le->cv);
        free(le);
        return NULL;
    }
    return le;
}

void log_epochs_stop(struct log_epochs *le)
{
    if (!le) return;
    pthread_mutex_lock(&le->mu);
    le->stop = true;
    pthread_cond_signal(&le->cv);
    pthread_mutex_unlock(&le->mu);
    ring_bell(&le->ctl->hosts[le->o.host]); /* out of a quiet sleep */
    pthread_join(le->th, NULL);
    pthread_mutex_destroy(&le->mu);
    pthread_cond_destroy(&le->cv);
    free(le);
}

uint64_t log_epochs_persisted(const struct log_epochs *le)
{
    return __atomic_load_n(&le->persisted, __ATOMIC_SEQ_CST);
}

void log_epochs_persist_counts(const struct log_epochs *le, uint64_t *by_file, uint64_t *by_marks,
                               uint64_t *empty)
{
    *by_file = __atomic_load_n(&le->by_file, __ATOMIC_RELAXED);
    *by_marks = __atomic_load_n(&le->by_marks, __ATOMIC_RELAXED);
    *empty = __atomic_load_n(&le->by_empty, __ATOMIC_RELAXED);
}

void log_epochs_watch(struct log_epochs *le)
{
    if (!__atomic_load_n(&le->watching, __ATOMIC_SEQ_CST)) log_epochs_nudge(le);
}

void log_epochs_nudge(struct log_epochs *le)
{
    pthread_mutex_lock(&le->mu);
    le->nudged = true;
    pthread_cond_signal(&le->cv);
    pthread_mutex_unlock(&le->mu);
    struct cxl_host_slot *me = &le->ctl->hosts[le->o.host];
    if (__atomic_load_n(&me->epoch_quiet, __ATOMIC_SEQ_CST)) ring_bell(me);
}
