/* Loggers and worker log buffers; see logger.h. */
#include "log/logger.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/log.h"

#define BUFS_PER_WORKER 8
#define CLOSED_MAX 4096
#define RETRY_NS (100ull * 1000 * 1000)
#define WARN_EVERY_NS (5ull * 1000 * 1000 * 1000)
#define SLOW_SYNC_NS (1000ull * 1000 * 1000)
#define IDLE_POLL_FACTOR 20 /* the safety-net poll of a logger whose workers are all idle */

struct log_buf {
    struct log_buf *next;
    uint64_t epoch_lo, epoch_hi;
    uint32_t nrec;
    bool pooled;        /* a standard-size buffer (else one record's own, freed after use) */
    size_t len, cap;
    unsigned char data[];
};

struct logger {
    struct logger_options o;
    char dir[4096];
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* wakes the logger: a hand-over, or stop */
    pthread_cond_t free_cv; /* wakes workers waiting for a buffer */
    struct log_buf *q_head, *q_tail; /* handed over, not written (under mu) */
    struct log_buf *free;            /* recycled buffers (under mu) */
    int nbufs, max_bufs;             /* pooled buffers allocated (under mu) */
    int waiters;                     /* workers waiting for a buffer (under mu) */
    bool stop;
    bool woken;                      /* logger_wake since it last looked (under mu) */
    /* the logger thread's own */
    struct seg_writer *w;
    uint64_t w_seq;    /* w's sequence number */
    uint64_t seq;
    uint64_t open_seq; /* atomic: the segment written now, or the next one */
    uint64_t mark_seq; /* atomic: the segment of the last durable mark (UINT64_MAX: none) */
    uint64_t marked;   /* through of the last mark written (durable once synced) */
    bool mark_unsynced; /* a mark was written since the last sync */
    /* A mark made durable by a sync, published with the durable epoch once
     * the directory is verified (its segment and through). */
    bool mark_ready;
    uint64_t ready_seq, ready_through;
    /* The watch: the segment being written (its fstat), the one the last
     * sync made durable (verified before anything is published), and
     * whether the directory was lost (then nothing is written any more). */
    struct stat w_st;
    char verify_name[SEG_NAME_MAX];
    struct stat verify_st;
    bool need_verify, lost;
    /* The epochs of segments this logger closed (under mu), oldest first:
     * the checkpointer's clean-up takes them from here, since reading them
     * back costs a disk read per block header past the page cache (up to
     * 1.6 s per clean-up). At most CLOSED_MAX; older ones are read from the
     * file. */
    struct closed_seg { uint64_t seq, lo, hi; } *closed;
    size_t nclosed, closed_cap;
    struct log_buf *pend_head, *pend_tail; /* written, not synced */
    uint64_t pend_bytes;
    uint64_t durable;
    uint64_t warned_at;
    struct logger_stats st;  /* fields read by others with atomics */
};

/* ---- buffers ---------------------------------------------------------------- */

static struct log_buf *buf_alloc(size_t cap, bool pooled)
{
    struct log_buf *b = malloc(sizeof *b + cap);
    if (!b) return NULL;
    b->next = NULL;
    b->cap = cap;
    b->pooled = pooled;
    b->len = 0;
    b->nrec = 0;
    b->epoch_lo = UINT64_MAX;
    b->epoch_hi = 0;
    return b;
}

static void buf_reset(struct log_buf *b)
{
    b->next = NULL;
    b->len = 0;
    b->nrec = 0;
    b->epoch_lo = UINT64_MAX;
    b->epoch_hi = 0;
}

/* A buffer of at least need bytes for a worker; waits while every pooled
 * buffer is in flight. NULL only when out of memory. */
static struct log_buf *get_buf(struct logger *lg, size_t need)
{
    if (need > LOG_BUF_BYTES) return buf_alloc(need, false);
    pthread_mutex_lock(&lg->mu);
    struct log_buf *b;
    for (;;) {
        if ((b = lg->free)) {
            lg->free = b->next;
            break;
        }
        if (lg->nbufs < lg->max_bufs) {
            lg->nbufs++;
            pthread_mutex_unlock(&lg->mu);
            b = buf_alloc(LOG_BUF_BYTES, true);
            if (b) return b;
            pthread_mutex_lock(&lg->mu);
            lg->nbufs--;
            if (!lg->free && lg->nbufs == 0) break; /* nothing will come back */
            continue;
        }
        /* Every buffer is in flight: wait for a sync, and make sure the
         * logger syncs now rather than at the end of the epoch. */
        lg->waiters++;
        pthread_cond_signal(&lg->cv);
        pthread_cond_wait(&lg->free_cv, &lg->mu);
        lg->waiters--;
    }
    pthread_mutex_unlock(&lg->mu);
    if (b) buf_reset(b);
    return b;
}

/* Queue the worker's buffer for its logger without waking it: a buffer
 * that merely filled up waits for the logger's next wake-up, since nothing
 * in it can become durable before its epoch ends anyway, and every wake-up
 * preempts a worker where the threads share its cores. The worker wakes
 * its logger once it has published a new epoch or gone idle (only then can
 * the logger publish more), and when it runs short of buffers (get_buf). */
static void handover(struct log_worker *lw)
{
    struct log_buf *b = lw->cur;
    if (!b || b->nrec == 0) return;
    struct logger *lg = lw->lg;
    lw->cur = NULL;
    pthread_mutex_lock(&lg->mu);
    if (lg->q_tail) lg->q_tail->next = b;
    else lg->q_head = b;
    lg->q_tail = b;
    pthread_mutex_unlock(&lg->mu);
}

/* Give written-and-synced buffers back (pooled ones to the free list). */
static void recycle(struct logger *lg, struct log_buf *list)
{
    if (!list) return;
    pthread_mutex_lock(&lg->mu);
    while (list) {
        struct log_buf *n = list->next;
        if (list->pooled) {
            list->next = lg->free;
            lg->free = list;
        } else {
            free(list);
        }
        list = n;
    }
    pthread_cond_broadcast(&lg->free_cv);
    pthread_mutex_unlock(&lg->mu);
}

/* ---- worker side ------------------------------------------------------------- */

void log_worker_init(struct log_worker *lw, struct logger *lg)
{
    memset(lw, 0, sizeof *lw);
    lw->epoch = lw->epoch_local = UINT64_MAX;
    lw->lg = lg;
}

void log_worker_fini(struct log_worker *lw)
{
    free(lw->cur);
    lw->cur = NULL;
}

uint64_t log_worker_commit_epoch(struct log_worker *lw, const uint64_t *global_epoch)
{
    uint64_t e = __atomic_load_n(global_epoch, __ATOMIC_SEQ_CST);
    if (e != lw->epoch_local) {
        /* Everything buffered is of an older epoch: hand it over before
         * saying so. Then read E again: a logger may have read E before our
         * store (while we looked idle) and must not see a commit below it. */
        bool was_busy = lw->epoch_local != UINT64_MAX;
        handover(lw);
        __atomic_store_n(&lw->epoch, e, __ATOMIC_SEQ_CST);
        lw->epoch_local = e;
        e = __atomic_load_n(global_epoch, __ATOMIC_SEQ_CST);
        /* Our older epoch held the logger back; coming from idle, nothing did. */
        if (was_busy && lw->lg) logger_wake(lw->lg);
    }
    lw->commit_epoch = e;
    return e;
}

/* The buffer the next `need` bytes of records go to (handing the current
 * one over when they do not fit). */
static struct log_buf *room_for(struct log_worker *lw, size_t need)
{
    struct log_buf *b = lw->cur;
    if (b && b->len + need > b->cap) {
        handover(lw);
        b = NULL;
    }
    if (!b && !(b = lw->cur = get_buf(lw->lg, need))) {
        pod_error("out of memory for a %zu-byte log buffer: a committed transaction cannot "
                  "be logged; stopping (fail-stop)", need > LOG_BUF_BYTES ? need : LOG_BUF_BYTES);
        abort();
    }
    return b;
}

/* Account for the record of `need` bytes just encoded at the buffer's end. */
static void appended(struct log_worker *lw, struct log_buf *b, const struct log_record *rec,
                     size_t need)
{
    b->len += need;
    b->nrec++;
    uint64_t e = log_ev_epoch(rec->epoch_version);
    if (e < b->epoch_lo) b->epoch_lo = e;
    if (e > b->epoch_hi) b->epoch_hi = e;
    __atomic_store_n(&lw->records, lw->records + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&lw->bytes, lw->bytes + need, __ATOMIC_RELAXED);
}

void log_worker_append(struct log_worker *lw, const struct log_record *rec)
{
    size_t need = seg_record_size(rec->key_len, rec->tuple_len);
    struct log_buf *b = room_for(lw, need);
    seg_record_encode(b->data + b->len, rec);
    appended(lw, b, rec, need);
}

void log_worker_append_patch(struct log_worker *lw, const struct log_record *rec,
                             uint64_t base_ev, uint32_t offset, const void *bytes)
{
    size_t need = seg_record_size(rec->key_len, rec->tuple_len);
    struct log_buf *b = room_for(lw, need);
    seg_patch_encode(b->data + b->len, rec, base_ev, offset, bytes);
    appended(lw, b, rec, need);
}

void log_worker_idle(struct log_worker *lw)
{
    if (lw->epoch_local == UINT64_MAX) return;
    handover(lw);
    __atomic_store_n(&lw->epoch, UINT64_MAX, __ATOMIC_SEQ_CST);
    lw->epoch_local = UINT64_MAX;
    if (lw->lg) logger_wake(lw->lg);
}

/* ---- the logger thread ------------------------------------------------------- */

static void count(uint64_t *c, uint64_t d) { __atomic_store_n(c, *c + d, __ATOMIC_RELAXED); }

static void warn_rate_limited(struct logger *lg, const char *what, const char *msg)
{
    uint64_t now = pod_mono_ns();
    if (now - lg->warned_at < WARN_EVERY_NS) return;
    lg->warned_at = now;
    pod_error("logger %" PRIu32 ": %s: %s; durability waits, retrying in a new segment", lg->o.id,
              what, msg);
}

/* After a failed write or sync: abandon the segment (what it holds stays on
 * disk and is read at recovery up to its first bad block), and queue the
 * unsynced buffers to be written again, into a new segment. */
static void abandon_segment(struct logger *lg, struct log_buf *unwritten)
{
    seg_writer_abandon(lg->w);
    lg->w = NULL;
    count(&lg->st.write_errors, 1);
    if (lg->mark_unsynced) { /* not durable: mark again in the next segment */
        lg->mark_unsynced = false;
        lg->marked = 0;
    }
    if (lg->pend_tail) {
        lg->pend_tail->next = unwritten;
        unwritten = lg->pend_head;
    }
    lg->pend_head = lg->pend_tail = NULL;
    lg->pend_bytes = 0;
    pthread_mutex_lock(&lg->mu);
    struct log_buf *t = unwritten;
    while (t && t->next) t = t->next;
    if (t) {
        t->next = lg->q_head;
        lg->q_head = unwritten;
        if (!lg->q_tail) lg->q_tail = t;
    }
    pthread_mutex_unlock(&lg->mu);
}

/* Close the segment being written; once it is complete on disk, remember
 * its epochs. */
static void close_segment(struct logger *lg)
{
    pod_err err;
    uint64_t lo, hi;
    seg_writer_epochs(lg->w, &lo, &hi);
    int rc = seg_writer_close(lg->w, &err);
    lg->w = NULL;
    if (rc != 0) {
        pod_warn("logger %" PRIu32 ": %s", lg->o.id, err.msg);
        return;
    }
    pthread_mutex_lock(&lg->mu);
    if (lg->nclosed == CLOSED_MAX) {
        memmove(lg->closed, lg->closed + 1, (CLOSED_MAX - 1) * sizeof *lg->closed);
        lg->nclosed--;
    }
    if (lg->nclosed == lg->closed_cap) {
        size_t cap = lg->closed_cap ? 2 * lg->closed_cap : 16;
        struct closed_seg *c = realloc(lg->closed, cap * sizeof *c);
        if (c) {
            lg->closed = c;
            lg->closed_cap = cap;
        }
    }
    if (lg->nclosed < lg->closed_cap) /* else out of memory: read from the file */
        lg->closed[lg->nclosed++] = (struct closed_seg){lg->w_seq, lo, hi};
    pthread_mutex_unlock(&lg->mu);
}

/* The segment just opened (lg->w) is in the directory claimed: one made in
 * a directory that replaced it is removed again, lest that directory look
 * like a log at the next start. -1 (lg->w closed) when it is not. */
static int new_segment_claimed(struct logger *lg)
{
    if (!lg->o.watch) return 0;
    char name[SEG_NAME_MAX];
    seg_format_name(name, sizeof name, lg->o.host, lg->o.id, lg->seq);
    if (seg_writer_stat(lg->w, &lg->w_st) != 0) memset(&lg->w_st, 0, sizeof lg->w_st);
    if (logdir_watch_file(lg->o.watch, name, &lg->w_st) != LOGDIR_LOST) return 0;
    unlink(seg_writer_path(lg->w));
    seg_writer_abandon(lg->w);
    lg->w = NULL;
    return -1;
}

/* Write the list; on an error the rest goes back to the queue. 0 or -1. */
static int write_all(struct logger *lg, struct log_buf *list)
{
    pod_err err;
    while (list) {
        if (!lg->w) {
            uint64_t e = __atomic_load_n(lg->o.global_epoch, __ATOMIC_ACQUIRE);
            __atomic_store_n(&lg->open_seq, lg->seq, __ATOMIC_RELEASE);
            if (!(lg->w = seg_writer_open(lg->o.dir, lg->o.host, lg->o.id, lg->seq, e, &err))) {
                /* A removed directory refuses new files: say why at once. */
                if (lg->o.watch) logdir_watch_file(lg->o.watch, NULL, NULL);
                warn_rate_limited(lg, "cannot open a log segment", err.msg);
                lg->seq++; /* whatever is left of it stays unused */
                abandon_segment(lg, list);
                return -1;
            }
            if (new_segment_claimed(lg) != 0) {
                lg->seq++;
                abandon_segment(lg, list);
                return -1;
            }
            lg->w_seq = lg->seq++;
            count(&lg->st.segments, 1);
            /* Past the page cache: nothing reads a segment while it is
             * written. Where the file system refuses O_DIRECT the segment is
             * written through the page cache. */
            if (seg_writer_go_direct(lg->w, LOG_DIRECT_EARLY_BYTES, &err) != 0)
                pod_warn("logger %" PRIu32 ": %s; writing the segment through the page cache",
                         lg->o.id, err.msg);
            else if (seg_writer_is_direct(lg->w))
                count(&lg->st.direct_segments, 1);
            seg_writer_preallocate(lg->w, lg->o.segment_bytes + LOG_BUF_BYTES);
        }
        struct log_buf *b = list;
        if (seg_writer_write_block(lg->w, b->data, b->len, b->nrec, b->epoch_lo, b->epoch_hi,
                                   &err) != 0) {
            warn_rate_limited(lg, "write failed", err.msg);
            abandon_segment(lg, list);
            return -1;
        }
        /* Before the sync and the durable epoch it publishes: the epoch
         * thread reads these after the durable words (epoch.c). */
        uint64_t *ww = lg->o.written_word;
        if (ww && b->epoch_hi > __atomic_load_n(ww, __ATOMIC_RELAXED)) {
            __atomic_store_n(ww, b->epoch_hi, __ATOMIC_SEQ_CST);
            if (lg->o.on_written) lg->o.on_written(lg->o.arg);
        }
        list = b->next;
        b->next = NULL;
        if (lg->pend_tail) lg->pend_tail->next = b;
        else lg->pend_head = b;
        lg->pend_tail = b;
        lg->pend_bytes += b->len;
        count(&lg->st.blocks, 1);
        count(&lg->st.records, b->nrec);
        count(&lg->st.bytes, b->len + SEG_BLOCK_HEADER_SIZE);
    }
    return 0;
}

static int sync_pending(struct logger *lg)
{
    if (!lg->pend_head) return 0;
    pod_err err;
    uint64_t t0 = pod_mono_ns();
    if (seg_writer_sync(lg->w, &err) != 0) {
        warn_rate_limited(lg, "fdatasync failed", err.msg);
        abandon_segment(lg, NULL);
        return -1;
    }
    uint64_t dt = pod_mono_ns() - t0;
    count(&lg->st.syncs, 1);
    count(&lg->st.sync_ns, dt);
    if (dt > lg->st.sync_ns_max) __atomic_store_n(&lg->st.sync_ns_max, dt, __ATOMIC_RELAXED);
    if (dt > SLOW_SYNC_NS)
        pod_warn("logger %" PRIu32 ": fdatasync of %s took %.0f ms (replies wait for it)",
                 lg->o.id, seg_writer_path(lg->w), (double)dt / 1e6);
    if (lg->mark_unsynced) {
        lg->mark_unsynced = false;
        lg->mark_ready = true;
        lg->ready_seq = lg->w_seq;
        lg->ready_through = lg->marked;
    }
    if (lg->o.watch) {
        seg_format_name(lg->verify_name, sizeof lg->verify_name, lg->o.host, lg->o.id, lg->w_seq);
        lg->verify_st = lg->w_st;
        lg->need_verify = true;
    }
    struct log_buf *done = lg->pend_head;
    lg->pend_head = lg->pend_tail = NULL;
    lg->pend_bytes = 0;
    recycle(lg, done);
    if (seg_writer_size(lg->w) >= lg->o.segment_bytes)
        close_segment(lg); /* the next write opens the next segment */
    return 0;
}

/* Nothing is published before the directory and the segment the last sync
 * made durable are verified (dirwatch.h): an fdatasync into a removed
 * directory succeeds. False: not now (lost, or it could not tell). */
static bool verified(struct logger *lg)
{
    if (!lg->o.watch) return true;
    if (!lg->need_verify) return !logdir_watch_lost(lg->o.watch);
    if (logdir_watch_file(lg->o.watch, lg->verify_name, &lg->verify_st) != LOGDIR_INTACT)
        return false;
    lg->need_verify = false;
    return true;
}

/* The directory is lost: nothing written from now on could be recovered.
 * Write nothing more (the open file goes, and with it its disk space), give
 * every buffer back so that the workers go on, publish nothing. */
static void go_lost(struct logger *lg, struct log_buf *list)
{
    if (!lg->lost) {
        lg->lost = true;
        seg_writer_abandon(lg->w);
        lg->w = NULL;
        lg->mark_unsynced = lg->mark_ready = false;
        struct log_buf *p = lg->pend_head;
        lg->pend_head = lg->pend_tail = NULL;
        lg->pend_bytes = 0;
        recycle(lg, p);
    }
    recycle(lg, list);
}

/* The `through` of the last durable mark, for the epoch thread. */
static void publish_mark(struct logger *lg)
{
    if (!lg->mark_ready) return;
    lg->mark_ready = false;
    __atomic_store_n(&lg->mark_seq, lg->ready_seq, __ATOMIC_RELEASE);
    if (lg->o.marked_word) __atomic_store_n(lg->o.marked_word, lg->ready_through, __ATOMIC_SEQ_CST);
}

static void publish(struct logger *lg, uint64_t d)
{
    if (d <= lg->durable) return;
    lg->durable = d;
    __atomic_store_n(lg->o.durable_word, d, __ATOMIC_SEQ_CST);
    __atomic_store_n(&lg->st.durable, d, __ATOMIC_RELAXED);
    if (lg->o.on_progress) lg->o.on_progress(lg->o.arg);
}

/* Every worker of this logger published idle (nothing buffered). */
static bool workers_idle(const struct logger *lg)
{
    for (int i = 0; i < lg->o.nworkers; i++)
        if (__atomic_load_n(&lg->o.workers[i]->epoch, __ATOMIC_SEQ_CST) != UINT64_MAX) return false;
    return true;
}

static void *logger_main(void *arg)
{
    struct logger *lg = arg;
    char name[16];
    snprintf(name, sizeof name, "pod-logger%u", (unsigned)(lg->o.id % 1000));
    pthread_setname_np(pthread_self(), name);
    bool last = false;
    while (!last) {
        pthread_mutex_lock(&lg->mu);
        if (!lg->q_head && !lg->stop && !lg->woken) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            /* With every worker idle nothing of theirs can be pending, and
             * the epoch thread wakes us when E grows (log.c, wake_loggers):
             * the safety-net poll can be rare, so that an idle pod sleeps. */
            uint64_t poll = workers_idle(lg) ? lg->o.poll_ns * IDLE_POLL_FACTOR : lg->o.poll_ns;
            uint64_t abs = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + poll;
            ts.tv_sec = (time_t)(abs / 1000000000ull);
            ts.tv_nsec = (long)(abs % 1000000000ull);
            pthread_cond_timedwait(&lg->cv, &lg->mu, &ts);
        }
        last = lg->stop;
        lg->woken = false;
        bool starved = lg->waiters > 0;
        pthread_mutex_unlock(&lg->mu);
        /* Order matters (logger.h): E, then the workers' epochs, then the queue. */
        uint64_t d = __atomic_load_n(lg->o.global_epoch, __ATOMIC_SEQ_CST);
        for (int i = 0; i < lg->o.nworkers; i++) {
            uint64_t we = __atomic_load_n(&lg->o.workers[i]->epoch, __ATOMIC_SEQ_CST);
            if (we < d) d = we;
        }
        pthread_mutex_lock(&lg->mu);
        struct log_buf *list = lg->q_head;
        lg->q_head = lg->q_tail = NULL;
        pthread_mutex_unlock(&lg->mu);
        if (lg->lost || logdir_watch_lost(lg->o.watch)) {
            go_lost(lg, list);
            continue;
        }
        if (write_all(lg, list) != 0) {
            struct timespec nap = {0, (long)RETRY_NS};
            nanosleep(&nap, NULL);
            last = false; /* never stop with unsynced records while the disk may recover */
            continue;
        }
        bool advance = d > lg->durable;
        bool sync = lg->pend_head && (advance || last || starved ||
                                      lg->pend_bytes >= LOG_SYNC_EARLY_BYTES);
        /* The sync makes a mark durable with the blocks: with every logger's
         * mark at d, epochs below d are committed without the durable-epoch
         * file's own sync (docs/durability.md, "Marks"). A failed write is
         * no error: the epoch thread then writes the file. */
        if (sync && d > lg->marked && lg->o.marked_word) {
            pod_err err;
            if (seg_writer_write_mark(lg->w, d, lg->o.nloggers, lg->o.id, &err) == 0) {
                lg->marked = d;
                lg->mark_unsynced = true;
            }
        }
        if (sync && sync_pending(lg) != 0) {
            last = false;
            continue;
        }
        if (!lg->pend_head && verified(lg)) {
            publish_mark(lg);
            publish(lg, d);
        }
    }
    if (lg->w) close_segment(lg);
    return NULL;
}

struct logger *logger_start(const struct logger_options *o, pod_err *err)
{
    struct logger *lg = calloc(1, sizeof *lg);
    if (!lg) {
        pod_err_set(err, "out of memory");
        return NULL;
    }
    lg->o = *o;
    lg->o.workers = malloc((size_t)(o->nworkers > 0 ? o->nworkers : 1) * sizeof *lg->o.workers);
    if (!lg->o.workers) {
        pod_err_set(err, "out of memory");
        free(lg);
        return NULL;
    }
    if (o->nworkers > 0) memcpy(lg->o.workers, o->workers, (size_t)o->nworkers * sizeof *o->workers);
    snprintf(lg->dir, sizeof lg->dir, "%s", o->dir);
    lg->o.dir = lg->dir;
    if (!lg->o.segment_bytes) lg->o.segment_bytes = LOG_SEGMENT_BYTES;
    if (!lg->o.poll_ns) lg->o.poll_ns = 1000000;
    lg->seq = lg->open_seq = o->first_seq;
    lg->mark_seq = UINT64_MAX;
    lg->max_bufs = BUFS_PER_WORKER * (o->nworkers > 0 ? o->nworkers : 1) + 2;
    pthread_mutex_init(&lg->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&lg->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&lg->free_cv, NULL);
    /* Nothing of ours is pending yet. */
    lg->durable = __atomic_load_n(o->global_epoch, __ATOMIC_SEQ_CST);
    __atomic_store_n(o->durable_word, lg->durable, __ATOMIC_SEQ_CST);
    lg->st.durable = lg->durable;
    int rc = pthread_create(&lg->th, NULL, logger_main, lg);
    if (rc) {
        pod_err_set(err, "cannot start logger %" PRIu32 ": %s", o->id, strerror(rc));
        pthread_mutex_destroy(&lg->mu);
        pthread_cond_destroy(&lg->cv);
        pthread_cond_destroy(&lg->free_cv);
        free(lg->o.workers);
        free(lg);
        return NULL;
    }
    return lg;
}

void logger_stop(struct logger *lg)
{
    if (!lg) return;
    pthread_mutex_lock(&lg->mu);
    lg->stop = true;
    pthread_cond_signal(&lg->cv);
    pthread_mutex_unlock(&lg->mu);
    pthread_join(lg->th, NULL);
    for (struct log_buf *b = lg->free, *n; b; b = n) {
        n = b->next;
        free(b);
    }
    pthread_mutex_destroy(&lg->mu);
    pthread_cond_destroy(&lg->cv);
    pthread_cond_destroy(&lg->free_cv);
    free(lg->closed);
    free(lg->o.workers);
    free(lg);
}

void logger_wake(struct logger *lg)
{
    pthread_mutex_lock(&lg->mu);
    lg->woken = true;
    pthread_cond_signal(&lg->cv);
    pthread_mutex_unlock(&lg->mu);
}

uint64_t logger_open_seq(const struct logger *lg)
{
    return __atomic_load_n(&lg->open_seq, __ATOMIC_ACQUIRE);
}

uint64_t logger_mark_seq(const struct logger *lg)
{
    uint64_t m = __atomic_load_n(&lg->mark_seq, __ATOMIC_ACQUIRE), o = logger_open_seq(lg);
    return m < o ? m : o;
}

/* The index of seq in lg->closed (mu held), or -1. */
static ptrdiff_t closed_find(const struct logger *lg, uint64_t seq)
{
    size_t lo = 0, hi = lg->nclosed;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (lg->closed[mid].seq < seq) lo = mid + 1;
        else hi = mid;
    }
    return lo < lg->nclosed && lg->closed[lo].seq == seq ? (ptrdiff_t)lo : -1;
}

bool logger_closed_epochs(struct logger *lg, uint64_t seq, uint64_t *lo, uint64_t *hi)
{
    pthread_mutex_lock(&lg->mu);
    ptrdiff_t i = closed_find(lg, seq);
    if (i >= 0) {
        *lo = lg->closed[i].lo;
        *hi = lg->closed[i].hi;
    }
    pthread_mutex_unlock(&lg->mu);
    return i >= 0;
}

void logger_forget_closed(struct logger *lg, uint64_t seq)
{
    pthread_mutex_lock(&lg->mu);
    ptrdiff_t i = closed_find(lg, seq);
    if (i >= 0) {
        memmove(lg->closed + i, lg->closed + i + 1,
                (lg->nclosed - (size_t)i - 1) * sizeof *lg->closed);
        lg->nclosed--;
    }
    pthread_mutex_unlock(&lg->mu);
}

void logger_get_stats(const struct logger *lg, struct logger_stats *out)
{
    const uint64_t *src = (const uint64_t *)&lg->st;
    uint64_t *dst = (uint64_t *)out;
    for (size_t i = 0; i < sizeof *out / sizeof(uint64_t); i++)
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}
