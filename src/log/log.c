/* The durability layer of one host; see log.h, and txlog.h for the
 * transactions' side. */
#include "log/log.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "db/types.h"
#include "log/emptylog.h"
#include "log/log_priv.h"
#include "log/txlog.h"
#include "storage/table.h"
#include "util/clock.h"
#include "util/log.h"

#define STOP_WAIT_NS (3ull * 1000 * 1000 * 1000)

int log_owner_of(const struct log_host *lh, const pod_table *t, const void *key)
{
    if (!lh->o.pod_mode) return lh->o.host;
    return (int)t->parts[table_partition_of(t, key)].owner;
}

/* A logger published progress: replies of this host that wait for it are
 * released sooner if the epoch thread looks now. With none waiting its next
 * tick is soon enough (whoever holds the first reply nudges it:
 * log_host_waiters_add), and an idle pod's threads stay asleep. */
static void nudge_epochs(void *arg)
{
    struct log_host *lh = arg;
    if (lh->epochs && __atomic_load_n(lh->waiters, __ATOMIC_SEQ_CST) > 0)
        log_epochs_nudge(lh->epochs);
}

/* A logger wrote records of a new epoch: a pod whose epoch threads sleep
 * because it was quiet must advance E again (epoch.h). */
static void records_written(void *arg)
{
    struct log_host *lh = arg;
    log_epochs_wake_quiet(lh->o.region, lh->o.conf);
}

/* Every worker of logger l is idle: no commit of theirs will hand a buffer
 * over (and wake the logger) when E grows. */
static bool logger_idle(const struct log_host *lh, int l)
{
    for (int i = l; i < lh->nworkers; i += lh->nloggers)
        if (__atomic_load_n(&lh->workers[i].epoch, __ATOMIC_SEQ_CST) != UINT64_MAX) return false;
    return true;
}

/* E grew: a logger whose workers are all idle publishes it (nothing of
 * theirs is pending). The others wait for their workers' hand-overs: until
 * a busy worker commits in the new epoch, its logger could not publish
 * more anyway, and each wake-up preempts a worker where the threads share
 * the workers' cores. */
static void wake_loggers(void *arg)
{
    struct log_host *lh = arg;
    pthread_mutex_lock(&lh->loggers_mu);
    for (int l = 0; l < lh->nloggers; l++)
        if (lh->loggers[l] && logger_idle(lh, l)) logger_wake(lh->loggers[l]);
    pthread_mutex_unlock(&lh->loggers_mu);
}

/* A logger whose workers are all idle learns of E only from the epoch
 * thread (no commit of theirs hands a buffer over). */
static bool loggers_need_watch(void *arg)
{
    struct log_host *lh = arg;
    if (!lh->logging) return false;
    for (int l = 0; l < lh->nloggers; l++)
        if (logger_idle(lh, l)) return true;
    return false;
}

/* This host's words in the region, left by its previous life until its log
 * was found fit to start with (a host that fails to start leaves them, so
 * that a dead host's go on holding the others back). Until its loggers run,
 * this host has no transaction whose records are pending: do not hold back
 * the pod durable epoch (recovery may take a while). UINT64_MAX reads as
 * "nothing below E pending" (epoch.c). */
static void reset_words(struct log_host *lh)
{
    struct cxl_control *ctl = lh->o.region->ctl;
    int h = lh->o.host;
    for (int l = 0; l < POD_MAX_LOGGERS; l++) {
        __atomic_store_n(&ctl->logger[h][l].durable, UINT64_MAX, __ATOMIC_SEQ_CST);
        /* No mark of this life yet (a value left by an earlier life is at
         * most where recovery made the new one start, but say nothing). */
        __atomic_store_n(&ctl->logger[h][l].marked, 0, __ATOMIC_SEQ_CST);
        /* Every record the logs keep is below the recorded durable epoch
         * once recovery is done (it cuts the rest). */
        __atomic_store_n(&ctl->logger[h][l].written, 0, __ATOMIC_SEQ_CST);
    }
    lh->words_reset = true;
}

struct log_host *log_host_open(const struct log_host_options *o, pod_err *err)
{
    struct log_host *lh = calloc(1, sizeof *lh);
    if (!lh) {
        pod_err_set(err, "out of memory");
        return NULL;
    }
    lh->o = *o;
    pthread_mutex_init(&lh->loggers_mu, NULL);
    pthread_mutex_init(&lh->deleted.mu, NULL);
    const struct pod_host_conf *hc = &o->conf->hosts[o->host];
    snprintf(lh->dir, sizeof lh->dir, "%s", hc->log_dir);
    lh->logging = hc->loggers > 0;
    lh->nloggers = hc->loggers;
    lh->nworkers = o->db->opt.nworkers + 1; /* + the admin worker */
    lh->epoch_word = &o->region->ctl->global_epoch.v;
    /* The count of replies waiting lives in the region, where quiet epoch
     * threads of other hosts look for it (epoch.c); a past life's is void. */
    lh->waiters = &o->region->ctl->hosts[o->host].reply_waiters;
    __atomic_store_n(lh->waiters, 0, __ATOMIC_SEQ_CST);
    lh->delete_hwm = &o->region->ctl->delete_ev_hwm.v;
    lh->start_epoch = 1;
    lh->workers = aligned_alloc(64, (size_t)lh->nworkers * sizeof *lh->workers);
    if (!lh->workers) {
        pod_err_set(err, "out of memory");
        goto fail;
    }
    for (int i = 0; i < lh->nworkers; i++) log_worker_init(&lh->workers[i], NULL);
    if (!lh->logging) {
        reset_words(lh);
        struct logdir d;
        pod_err ignore;
        if (logdir_scan(lh->dir, &d, &ignore) == 0) {
            if (d.nsegs || d.nckpts)
                pod_warn("loggers: 0, so the history in %s (%d segments) is not recovered and "
                         "nothing new is logged", lh->dir, d.nsegs);
            logdir_free(&d);
        }
        return lh;
    }

    for (uint32_t i = 0; i < o->db->ntables; i++) {
        const pod_table *t = o->db->tables[i];
        if (t->tuple_size > SEG_MAX_TUPLE) {
            pod_err_set(err, "table %s: tuples of %" PRIu32 " bytes are larger than a log record "
                        "can carry (%u bytes); set loggers: 0 for this pod or make the tuples "
                        "smaller", t->name, t->tuple_size, SEG_MAX_TUPLE);
            goto fail;
        }
    }
    /* What the region remembers of this host's past lives, before its words
     * are reset: evidence if its log directory turns out empty. */
    struct emptylog_region past;
    emptylog_region_look(o->region, o->conf, o->host, &past);
    if (logdir_prepare(lh->dir, err)) goto fail;
    if (!(lh->claim = logdir_claim(lh->dir, o->conf->region.path, o->host, err))) goto fail;
    if (!(lh->watch = logdir_watch_new(lh->dir, logdir_claim_lock_fd(lh->claim),
                                       &o->region->ctl->hosts[o->host].log_dir_lost, err)))
        goto fail;
    if (durable_file_read(lh->dir, &lh->drec, err)) goto fail;
    if (logdir_scan(lh->dir, &lh->listing, err)) goto fail;
    bool history = lh->listing.nsegs > 0 || lh->drec.exists;
    for (int i = 0; i < lh->listing.nckpts; i++) history = history || !lh->listing.ckpts[i].tmp;
    if (!history &&
        emptylog_check(o->conf, o->host, &past, o->allow_empty_log, &lh->lost_history, err)) {
        /* Its log is gone: the pod's durable epoch stays frozen for it
         * until it starts with a log (epoch.c). */
        __atomic_store_n(&o->region->ctl->hosts[o->host].log_dir_lost, 1, __ATOMIC_SEQ_CST);
        goto fail;
    }
    reset_words(lh);
    lh->logged_hosts = lh->drec.hosts | (history ? 1u << o->host : 0);
    for (int i = 0; i < lh->listing.nsegs; i++) {
        const struct logdir_seg *s = &lh->listing.segs[i];
        if (s->logger < POD_MAX_LOGGERS && s->seq >= lh->next_seq[s->logger])
            lh->next_seq[s->logger] = s->seq + 1;
    }
    for (int i = 0; i < lh->listing.nckpts; i++)
        if (lh->listing.ckpts[i].seq >= lh->next_ckpt_seq)
            lh->next_ckpt_seq = lh->listing.ckpts[i].seq + 1;
    return lh;
fail:
    log_host_free(lh);
    return NULL;
}

/* The epoch thread; it persists the durable epoch when the host logs. */
static int start_epochs(struct log_host *lh, void (*on_durable)(void *arg, uint64_t persisted),
                        void *arg, pod_err *err)
{
    struct log_epoch_options eo = {
        .region = lh->o.region, .conf = lh->o.conf, .host = lh->o.host,
        .epoch_ms = lh->o.epoch_ms, .pod_mode = lh->o.pod_mode, .start_epoch = lh->start_epoch,
        .durable = lh->durable, .on_durable = on_durable, .on_epoch = wake_loggers,
        .needs_watch = loggers_need_watch, .waiters = lh->waiters,
        .arg = arg, .epoch_arg = lh, .watch = lh->watch};
    return (lh->epochs = log_epochs_start(&eo, err)) ? 0 : -1;
}

int log_host_start(struct log_host *lh, void (*on_durable)(void *arg, uint64_t persisted),
                   void *arg, pod_err *err)
{
    struct cxl_control *ctl = lh->o.region->ctl;
    lh->on_durable = on_durable;
    lh->on_durable_arg = arg;
    /* E first: the loggers publish it as their starting durable epoch. */
    log_atomic_max(lh->epoch_word, lh->start_epoch > 1 ? lh->start_epoch : 1);
    if (lh->logging) {
        /* Leftovers: unfinished or superseded checkpoints, segments the
         * checkpoint covers (before any logger holds a segment open). */
        log_remove_obsolete(lh, log_checkpoint_horizon(lh), NULL);
        if (!(lh->durable = durable_file_open(lh->dir, (uint32_t)lh->o.host,
                                              lh->drec.exists ? lh->drec.epoch : 0, err)) ||
            durable_file_add_hosts(lh->durable, lh->logged_hosts, err))
            return -1;
        /* This host starts with a log: what the region said of a lost one
         * is past (epoch.c froze the pod's durable epoch for it). */
        struct cxl_host_slot *slot = &ctl->hosts[lh->o.host];
        __atomic_store_n(&slot->log_hosts, durable_file_hosts(lh->durable), __ATOMIC_SEQ_CST);
        __atomic_store_n(&slot->log_dir_lost, 0, __ATOMIC_SEQ_CST);
        /* The epoch thread first: the loggers nudge it (it sees their words
         * as "nothing pending" until they start). */
        if (start_epochs(lh, on_durable, arg, err)) return -1;
        /* The epoch thread wakes the loggers when E grows, and hand-overs
         * do; the poll is a safety net, not the way they learn of E. */
        int epoch_ms = lh->o.epoch_ms > 0 ? lh->o.epoch_ms : lh->o.conf->engine.epoch_ms;
        uint64_t poll_ns = (uint64_t)epoch_ms * 1000000ull;
        for (int l = 0; l < lh->nloggers; l++) {
            struct log_worker *mine[POD_MAX_WORKERS + 1];
            int n = 0;
            for (int i = l; i < lh->nworkers; i += lh->nloggers) mine[n++] = &lh->workers[i];
            struct logger_options lo = {
                .dir = lh->dir, .host = (uint32_t)lh->o.host, .id = (uint32_t)l,
                .first_seq = lh->next_seq[l], .global_epoch = lh->epoch_word,
                .durable_word = &ctl->logger[lh->o.host][l].durable,
                .marked_word = &ctl->logger[lh->o.host][l].marked,
                .written_word = &ctl->logger[lh->o.host][l].written,
                .nloggers = (uint32_t)lh->nloggers, .workers = mine,
                .nworkers = n, .poll_ns = poll_ns, .on_progress = nudge_epochs,
                .on_written = records_written, .arg = lh, .watch = lh->watch};
            struct logger *lg = logger_start(&lo, err);
            if (!lg) return -1;
            pthread_mutex_lock(&lh->loggers_mu);
            lh->loggers[l] = lg;
            pthread_mutex_unlock(&lh->loggers_mu);
            for (int i = 0; i < n; i++) mine[i]->lg = lg;
        }
    }
    if (!lh->epochs && start_epochs(lh, on_durable, arg, err)) return -1;
    if (lh->logging && lh->o.checkpoint_after && !(lh->ckpt = checkpointer_start(lh, err)))
        return -1;
    lh->started = true;
    lh->o.db->log = lh; /* transactions log from now on */
    return 0;
}

bool log_host_logging(const struct log_host *lh) { return lh->logging; }

uint64_t log_host_persisted(const struct log_host *lh)
{
    return lh->epochs ? log_epochs_persisted(lh->epochs) : 0;
}

void log_host_waiters_add(struct log_host *lh, int64_t n)
{
    int64_t was = __atomic_fetch_add(lh->waiters, n, __ATOMIC_SEQ_CST);
    if (was <= 0 && was + n > 0 && lh->epochs) {
        log_epochs_nudge(lh->epochs);
        log_epochs_wake_quiet(lh->o.region, lh->o.conf); /* E must move for these replies */
    }
}

int64_t log_host_waiters(const struct log_host *lh)
{
    return __atomic_load_n(lh->waiters, __ATOMIC_SEQ_CST);
}

/* Append "; " (unless first) and the formatted text to buf[*n..len). */
static void say(char *buf, size_t len, size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void say(char *buf, size_t len, size_t *n, const char *fmt, ...)
{
    if (*n + 1 >= len) return;
    if (*n) *n += (size_t)snprintf(buf + *n, len - *n, "; ");
    if (*n + 1 >= len) {
        *n = len - 1;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *n, len - *n, fmt, ap);
    va_end(ap);
    *n = k < 0 ? *n : *n + (size_t)k < len ? *n + (size_t)k : len - 1;
}

/* A host whose heartbeat is older than this is "not beating". */
#define STALE_HEARTBEAT_NS (1000ull * 1000 * 1000)

void log_host_why_not_durable(struct log_host *lh, char *buf, size_t len)
{
    if (!len) return;
    buf[0] = '\0';
    size_t n = 0;
    struct cxl_region *r = lh->o.region;
    const struct pod_config *c = lh->o.conf;
    struct cxl_control *ctl = r->ctl;
    int me = lh->o.host;
    if (logdir_watch_lost(lh->watch)) {
        char why[512];
        logdir_watch_why(lh->watch, why, sizeof why);
        say(buf, len, &n, "the log directory of host %d (this host) was lost: %s", me, why);
    }
    for (int h = 0; h < c->nhosts; h++) {
        if (h == me || c->hosts[h].loggers == 0) continue;
        if (lh->o.pod_mode && __atomic_load_n(&ctl->hosts[h].log_dir_lost, __ATOMIC_ACQUIRE))
            say(buf, len, &n, "the log directory of host %d was lost (host %d's log says what "
                "happened)", h, h);
    }
    uint64_t e = __atomic_load_n(&ctl->global_epoch.v, __ATOMIC_ACQUIRE);
    uint64_t now = pod_real_ns();
    for (int h = 0; h < c->nhosts; h++) {
        uint32_t st = __atomic_load_n(&ctl->hosts[h].state, __ATOMIC_ACQUIRE);
        if (st == CXL_HOST_FREE) continue;
        if (h != me && lh->o.pod_mode && !cxl_host_alive(r, h)) {
            say(buf, len, &n, "host %d died (the pod acknowledges nothing more until it is "
                "restarted)", h);
            continue;
        }
        uint64_t low = UINT64_MAX;
        int low_l = 0;
        for (int l = 0; l < c->hosts[h].loggers; l++) {
            uint64_t v = __atomic_load_n(&ctl->logger[h][l].durable, __ATOMIC_ACQUIRE);
            if (v < low) {
                low = v;
                low_l = l;
            }
        }
        uint64_t beat = __atomic_load_n(&ctl->hosts[h].heartbeat_ns, __ATOMIC_ACQUIRE);
        bool stale = h != me && beat && now > beat + STALE_HEARTBEAT_NS;
        /* A logger a few epochs behind is only busy; further behind, stuck
         * (unless its log directory was lost: said above). */
        bool lost = h == me ? logdir_watch_lost(lh->watch)
                            : __atomic_load_n(&ctl->hosts[h].log_dir_lost, __ATOMIC_ACQUIRE);
        if (low != UINT64_MAX && low + 2 < e && !lost)
            say(buf, len, &n, "host %d's logger %d has made only the epochs below %llu durable "
                "while the global epoch is %llu%s", h, low_l, (unsigned long long)low,
                (unsigned long long)e, h == me ? " (this host: a slow or failing disk? its log "
                "says more)" : "");
        if (stale)
            say(buf, len, &n, "host %d (pid %d) has not beaten its heartbeat for %.1f s: its "
                "process is stopped or hung", h, (int)ctl->hosts[h].pid,
                (double)(now - beat) / 1e9);
    }
    uint64_t pod_d = __atomic_load_n(&ctl->pod_durable_epoch.v, __ATOMIC_ACQUIRE);
    uint64_t mine = log_host_persisted(lh);
    if (lh->logging && mine != UINT64_MAX && pod_d > mine + 1)
        say(buf, len, &n, "this host has not recorded the pod's durable epoch %llu (it is at "
            "%llu: its log says why)", (unsigned long long)pod_d, (unsigned long long)mine);
}

uint64_t log_host_close_epoch(struct log_host *lh)
{
    uint64_t e = __atomic_load_n(lh->epoch_word, __ATOMIC_SEQ_CST);
    log_atomic_max(lh->epoch_word, e + 1);
    return e;
}

uint64_t log_host_epoch(const struct log_host *lh)
{
    return __atomic_load_n(lh->epoch_word, __ATOMIC_ACQUIRE);
}

void log_host_get_stats(const struct log_host *lh, struct log_host_stats *out)
{
    memset(out, 0, sizeof *out);
    struct cxl_control *ctl = lh->o.region->ctl;
    out->global_epoch = __atomic_load_n(&ctl->global_epoch.v, __ATOMIC_ACQUIRE);
    out->pod_durable_epoch = __atomic_load_n(&ctl->pod_durable_epoch.v, __ATOMIC_ACQUIRE);
    out->persisted_epoch = lh->logging ? log_host_persisted(lh) : 0;
    if (lh->logging && lh->epochs)
        log_epochs_persist_counts(lh->epochs, &out->persisted_by_file, &out->persisted_by_marks,
                                  &out->persisted_empty);
    out->dir_lost = logdir_watch_lost(lh->watch);
    if (out->dir_lost) logdir_watch_why(lh->watch, out->dir_lost_why, sizeof out->dir_lost_why);
    out->dir_lost_host = -1;
    for (int h = lh->o.conf->nhosts; h-- > 0;)
        if (__atomic_load_n(&ctl->hosts[h].log_dir_lost, __ATOMIC_ACQUIRE)) out->dir_lost_host = h;
    for (int l = 0; l < lh->nloggers; l++) {
        if (!lh->loggers[l]) continue;
        struct logger_stats s;
        logger_get_stats(lh->loggers[l], &s);
        out->records += s.records;
        out->bytes += s.bytes;
        out->blocks += s.blocks;
        out->syncs += s.syncs;
        out->sync_ns += s.sync_ns;
        if (s.sync_ns_max > out->sync_ns_max) out->sync_ns_max = s.sync_ns_max;
        out->segments += s.segments;
        out->write_errors += s.write_errors;
        out->direct_segments += s.direct_segments;
    }
    if (lh->ckpt) checkpointer_stats(lh->ckpt, out);
}

int log_host_request_checkpoint(struct log_host *lh, bool full, uint64_t *done_at, pod_err *err)
{
    if (!lh->logging) {
        pod_err_set(err, "logging is off (loggers: 0): there is nothing to checkpoint");
        return -1;
    }
    if (!lh->ckpt) {
        pod_err_set(err, "checkpoints are off (engine.checkpoint_after: 0)");
        return -1;
    }
    *done_at = checkpointer_request(lh->ckpt, full);
    return 0;
}

void log_host_stop(struct log_host *lh)
{
    if (!lh) return;
    lh->o.db->log = NULL;
    if (lh->ckpt) checkpointer_stop(lh->ckpt);
    lh->ckpt = NULL;
    for (int i = 0; i < lh->nworkers; i++)
        if (lh->workers[i].lg) log_worker_idle(&lh->workers[i]);
    /* Close the current epoch now rather than at the next tick, and give it
     * (bounded) time to become durable: a clean stop leaves every commit
     * durable unless another host holds the pod durable epoch back. */
    bool lost = logdir_watch_lost(lh->watch);
    if (lost)
        pod_warn("stop: the log directory %s was lost, so nothing committed since became "
                 "durable", lh->dir);
    if (lh->started && lh->logging && lh->epochs && !lost) {
        uint64_t e = log_host_close_epoch(lh);
        uint64_t deadline = pod_mono_ns() + STOP_WAIT_NS;
        while (log_epochs_persisted(lh->epochs) <= e && pod_mono_ns() < deadline) {
            struct timespec nap = {0, 500000};
            nanosleep(&nap, NULL);
        }
        if (log_epochs_persisted(lh->epochs) <= e)
            pod_warn("stop: epoch %" PRIu64 " did not become durable within %llu ms (another "
                     "host holds the pod durable epoch back); its commits are not durable", e,
                     (unsigned long long)(STOP_WAIT_NS / 1000000));
    }
    for (int l = 0; l < lh->nloggers; l++) {
        struct logger *lg = lh->loggers[l];
        if (!lg) continue;
        pthread_mutex_lock(&lh->loggers_mu);
        lh->loggers[l] = NULL;
        pthread_mutex_unlock(&lh->loggers_mu);
        logger_stop(lg); /* writes, syncs and publishes the rest */
    }
    for (int i = 0; i < lh->nworkers; i++) lh->workers[i].lg = NULL;
    /* One more durable-epoch update covering the final flush, then nothing of
     * ours is pending any more. */
    if (lh->epochs) {
        log_epochs_nudge(lh->epochs);
        log_epochs_stop(lh->epochs);
        lh->epochs = NULL;
    }
    for (int l = 0; l < POD_MAX_LOGGERS && lh->words_reset; l++) {
        /* Marks first: the other hosts must not count a stopped host's
         * marks as covering epochs it will never mark. With its directory
         * lost, its records are not durable: the durable epoch stays. */
        __atomic_store_n(&lh->o.region->ctl->logger[lh->o.host][l].marked, 0, __ATOMIC_SEQ_CST);
        if (!lost)
            __atomic_store_n(&lh->o.region->ctl->logger[lh->o.host][l].durable, UINT64_MAX,
                             __ATOMIC_SEQ_CST);
    }
    lh->started = false;
}

void log_host_free(struct log_host *lh)
{
    if (!lh) return;
    log_host_stop(lh);
    if (lh->workers)
        for (int i = 0; i < lh->nworkers; i++) log_worker_fini(&lh->workers[i]);
    free(lh->workers);
    durable_file_close(lh->durable);
    logdir_free(&lh->listing);
    logdir_watch_free(lh->watch);
    logdir_release(lh->claim); /* last: nothing of this host writes the directory now */
    pthread_mutex_destroy(&lh->loggers_mu);
    pthread_mutex_destroy(&lh->deleted.mu);
    free(lh->deleted.buf);
    free(lh);
}

/* ---- the transactions' side (txlog.h) ------------------------------------------- */

struct log_worker *log_txn_worker(pod_db *db, int worker_id)
{
    struct log_host *lh = db->log;
    if (!lh || !lh->logging || worker_id < 0 || worker_id >= lh->nworkers) return NULL;
    return &lh->workers[worker_id];
}

uint64_t log_commit_epoch(pod_db *db, struct log_worker *lw)
{
    struct log_host *lh = db->log;
    if (!lh) return __atomic_load_n(&db->epoch, __ATOMIC_ACQUIRE);
    if (!lw) return __atomic_load_n(lh->epoch_word, __ATOMIC_SEQ_CST);
    return log_worker_commit_epoch(lw, lh->epoch_word);
}

uint64_t log_insert_ev_floor(pod_db *db)
{
    struct log_host *lh = db->log;
    return lh ? __atomic_load_n(lh->delete_hwm, __ATOMIC_SEQ_CST) : 0;
}

void log_txn_write(pod_db *db, struct log_worker *lw, const pod_table *t, const void *key,
                   uint64_t ev, const void *tuple)
{
    struct log_host *lh = db->log;
    if (!lh) return;
    if (!tuple) log_atomic_max(lh->delete_hwm, ev);
    if (!lw) return;
    struct log_record rec = {
        .table_id = t->id, .kind = tuple ? LOG_PUT : LOG_DELETE, .key_len = (uint16_t)t->key_size,
        .tuple_len = tuple ? t->tuple_size : 0, .epoch_version = ev, .key = key, .tuple = tuple};
    log_worker_append(lw, &rec);
}

void log_row_removed(pod_db *db, const pod_table *t, const void *key, uint64_t ev)
{
    struct log_host *lh = db->log;
    if (lh && __atomic_load_n(&lh->deleted.on, __ATOMIC_ACQUIRE))
        log_deleted_note(&lh->deleted, t, key, ev);
}

/* [*lo, *hi): the bytes where a and b differ (*lo == *hi when none do). */
static void diff_range(const unsigned char *a, const unsigned char *b, uint32_t n, uint32_t *lo,
                       uint32_t *hi)
{
    uint32_t i = 0, j = n;
    uint64_t x, y;
    for (; i + 8 <= n; i += 8) {
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        if (x != y) break;
    }
    while (i < n && a[i] == b[i]) i++;
    for (; j >= i + 8; j -= 8) {
        memcpy(&x, a + j - 8, 8);
        memcpy(&y, b + j - 8, 8);
        if (x != y) break;
    }
    while (j > i && a[j - 1] == b[j - 1]) j--;
    *lo = i;
    *hi = j;
}

void log_txn_update(pod_db *db, struct log_worker *lw, const pod_table *t, const void *key,
                    uint64_t ev, uint64_t base_ev, const void *before, uint32_t blo, uint32_t bhi,
                    const void *after)
{
    if (!db->log || !lw) return;
    uint32_t lo = 0, hi = bhi - blo;
    if (before) diff_range(before, (const unsigned char *)after + blo, bhi - blo, &lo, &hi);
    lo += blo, hi += blo;
    uint32_t len = LOG_PATCH_HEADER + (hi - lo);
    if (len >= t->tuple_size) { /* not smaller: the whole tuple */
        log_txn_write(db, lw, t, key, ev, after);
        return;
    }
    struct log_record rec = {.table_id = t->id, .kind = LOG_PATCH,
                             .key_len = (uint16_t)t->key_size, .tuple_len = len,
                             .epoch_version = ev, .key = key};
    log_worker_append_patch(lw, &rec, base_ev, lo, (const unsigned char *)after + lo);
}

void log_worker_idle_hook(pod_db *db, int worker_id)
{
    struct log_worker *lw = log_txn_worker(db, worker_id);
    if (!lw || !lw->lg || lw->epoch_local == UINT64_MAX) return;
    log_worker_idle(lw);
    /* Its logger may now depend on the epoch thread to learn of E. */
    struct log_host *lh = db->log;
    if (lh->epochs) log_epochs_watch(lh->epochs);
}

void log_worker_retry_hook(pod_db *db, int worker_id)
{
    struct log_worker *lw = log_txn_worker(db, worker_id);
    if (!lw || lw->epoch_local == UINT64_MAX ||
        __atomic_load_n(db->log->epoch_word, __ATOMIC_ACQUIRE) == lw->epoch_local)
        return; /* idle already, or still in the epoch of its last commit */
    log_worker_idle_hook(db, worker_id);
}

uint64_t log_last_commit_epoch(pod_db *db, int worker_id)
{
    struct log_worker *lw = log_txn_worker(db, worker_id);
    return lw ? lw->commit_epoch : 0;
}
