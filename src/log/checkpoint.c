/* Checkpoints: what keeps recovery time and disk use bounded on a long run
 * (docs/durability.md, "Log housekeeping").
 *
 * After every `checkpoint_after` bytes of log (and at least twice the size of
 * a full checkpoint: checkpoint_due), a thread writes every valid row
 * of the tables this host owns, with its epoch-version, into
 * ckpt-<host>-<seq>.tmp (the segment format; the header's logger field is
 * SEG_LOGGER_CHECKPOINT and first_epoch is Es, the epoch E when the scan
 * started). The scan is fuzzy: transactions go on, and each row is read under
 * a shared lock, so it is some committed value. Every transaction that
 * committed in an epoch below Es released its locks before the scan read its
 * rows, so the checkpoint reflects it (or a later value of the row); writes
 * of epochs >= Es stay in the log.
 *
 * A delta checkpoint (run_checkpoint decides) writes only the rows whose
 * epoch-version is at or above the previous checkpoint's Es, and every
 * checkpoint writes the keys deleted since the previous one took the list
 * (struct log_deleted) as DELETE records. Recovery loads the chain back to
 * the newest full checkpoint (logdir_ckpt_chain).
 *
 * When the scan ends at epoch Ef, the file is synced, and once the persisted
 * durable epoch is above Ef (every value in it is committed) it is renamed to
 * .log: from then on recovery loads it and skips log records of epochs below
 * Es. Segments whose every record is below Es (in pod mode: below every
 * host's checkpoint epoch, since records of a host's tuples may sit in another
 * host's log) and the checkpoints before the chain are then removed.
 *
 * In a pod, this host writes the partitions it owns, and a tuple that lives
 * in CXL memory is read there when another host wrote it (scan_partition).
 * Records of this host's tuples in other hosts' logs are skipped at recovery
 * against this host's Es like its own (the owner replays them). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>

#include "db/types.h"
#include "log/log_priv.h"
#include "pod/row_snapshot.h"
#include "storage/table.h"
#include "util/clock.h"
#include "util/cpu.h"
#include "util/log.h"

#define CHECK_EVERY_NS (100ull * 1000 * 1000)
#define ROWS_PER_CHUNK 256 /* rows per EBR critical section */
#define ROWS_PER_BATCH 16  /* rows gathered and prefetched together */
#define FLUSH_BYTES (1u << 20)
/* Written back to disk while the scan goes on (seg_writer_pace; a direct
 * writer writes every 256 KiB by itself, this is for the buffered fallback):
 * measured, a 500 MiB checkpoint synced at its end held the loggers'
 * fdatasyncs up for a second or two on ext4, and YCSB fell to a quarter
 * meanwhile. */
#define WRITEBACK_BYTES (4u << 20)
#define CKPT_NICE 10 /* the thread's nice value (ckpt_main) */
#define MAX_DELTAS 32 /* deltas in a chain at most (bounds the files recovery opens) */
#define DELETED_HEADER 12u /* table id, epoch-version: struct log_deleted's entries */

struct checkpointer {
    struct log_host *lh;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;               /* under mu; also read atomically by the scan */
    bool requested;          /* under mu: log_host_request_checkpoint asked for one */
    bool request_full;       /* under mu: ... a full one */
    bool running;            /* under mu: a checkpoint is being written */
    struct checkpoint_summary last; /* under mu: the last one written */
    uint64_t failures;       /* atomic: checkpoints that failed */
    uint64_t count, epoch, removed, deltas; /* atomic; deltas: since the last full one */
    uint64_t busy_waits;     /* atomic: naps for a row a writer held */
    uint64_t logged_at_last;
    uint64_t full_bytes;     /* what a full checkpoint would take now (estimated after a delta) */
    uint64_t base_bytes;     /* size of the last full one (the chain's first) */
    uint64_t chain_bytes;    /* sizes of the deltas written since the last full one */
    uint64_t delta_bytes;    /* size of the last delta (0 after a full one) */
    uint64_t last_es;        /* start epoch of the last checkpoint written (0: none yet) */
    bool force_full;         /* the deleted keys since last_es are not all known */
    unsigned char *del_buf;  /* the deleted keys taken from lh->deleted (or its spare) */
    size_t del_len, del_cap;
    unsigned char keys[ROWS_PER_BATCH][BT_MAX_KEY_WIDTH]; /* the batch being read */
};

static bool stopping(struct checkpointer *c) { return __atomic_load_n(&c->stop, __ATOMIC_ACQUIRE); }

static uint64_t logged_bytes(const struct log_host *lh)
{
    uint64_t b = 0;
    for (int l = 0; l < lh->nloggers; l++) {
        struct logger_stats s;
        if (!lh->loggers[l]) continue;
        logger_get_stats(lh->loggers[l], &s);
        b += s.bytes;
    }
    return b;
}

/* Write the block being built once it holds FLUSH_BYTES, starting its
 * writeback (seg_writer_pace). */
static int flush_if_full(struct seg_writer *w, pod_err *err)
{
    if (seg_writer_pending(w) < FLUSH_BYTES) return 0;
    return seg_writer_flush_block(w, err) != 0 || seg_writer_pace(w, WRITEBACK_BYTES, err) != 0
               ? -1
               : 0;
}

/* A partition's scan, one EBR critical section at a time: the tree hands
 * its entries over a leaf at a time (bt_scan_forward: one descent per leaf),
 * they are gathered ROWS_PER_BATCH at a time and prefetched, since each row
 * is a cache miss of its own, then read and written. */
struct part_scan {
    struct checkpointer *c;
    pod_table *t;
    uint32_t p;
    uint64_t min_ev;
    struct seg_writer *w;
    uint64_t *rows, *older;
    pod_err *err;
    struct pod_row *batch[ROWS_PER_BATCH];
    int n;                   /* rows gathered into batch (their keys: c->keys) */
    int left;                /* rows this critical section may still read */
    bool stopped;            /* the visitor stopped the tree's scan */
    bool busy;               /* a writer held cur's row: read it again after a nap */
    int rc;                  /* -1: a write error or a bad tuple (err) */
    unsigned char cur[BT_MAX_KEY_WIDTH]; /* where the next section starts */
    bool have_cur;           /* false: at the partition's first key */
    bool cur_inclusive;      /* cur itself is still to be read */
};

/* Read the gathered rows and write them. false when a row was held (cur is
 * its key) or on an error. */
static bool write_batch(struct part_scan *s)
{
    struct checkpointer *c = s->c;
    pod_db *db = c->lh->o.db;
    int n = s->n;
    s->n = 0;
    for (int i = 0; i < n; i++) {
        if (s->min_ev && pod_row_unchanged(s->batch[i], s->min_ev)) {
            (*s->older)++; /* in the checkpoints before this delta */
            continue;
        }
        /* The tuple is read straight into the checkpoint's block. */
        unsigned char *tuple = seg_writer_reserve(s->w, (uint16_t)s->t->key_size,
                                                  s->t->tuple_size, s->err);
        if (!tuple) {
            s->rc = -1;
            return false;
        }
        uint64_t ev = 0;
        enum pod_snapshot_status st;
        for (int tries = 0;
             (st = pod_row_snapshot(db, s->t, s->batch[i], s->min_ev, tuple, &ev)) ==
                 POD_SNAP_BUSY &&
             tries < 64;
             tries++)
            pod_cpu_relax();
        if (st == POD_SNAP_BUSY) {
            memcpy(s->cur, c->keys[i], s->t->key_size);
            s->have_cur = s->cur_inclusive = s->busy = true;
            return false;
        }
        if (st == POD_SNAP_ERROR) {
            pod_err_set(s->err, "table %s partition %" PRIu32 ": a tuple in CXL memory does "
                        "not fit the table", s->t->name, s->p);
            s->rc = -1;
            return false;
        }
        if (st == POD_SNAP_ABSENT) continue;
        if (st == POD_SNAP_OLDER) { /* in the checkpoints before this delta */
            (*s->older)++;
            continue;
        }
        struct log_record rec = {.table_id = s->t->id, .kind = LOG_PUT,
                                 .key_len = (uint16_t)s->t->key_size,
                                 .tuple_len = s->t->tuple_size, .epoch_version = ev,
                                 .key = c->keys[i], .tuple = tuple};
        if ((s->rc = seg_writer_commit(s->w, &rec, s->err)) != 0) return false;
        (*s->rows)++;
    }
    if (n) {
        memcpy(s->cur, c->keys[n - 1], s->t->key_size);
        s->have_cur = true;
        s->cur_inclusive = false;
    }
    s->left -= n;
    return true;
}

static bool visit_row(void *arg, const void *key, uint64_t value)
{
    struct part_scan *s = arg;
    memcpy(s->c->keys[s->n], key, s->t->key_size);
    s->batch[s->n] = (struct pod_row *)(uintptr_t)value;
    /* A full checkpoint copies every row: all its lines (a full TPC-C
     * checkpoint 3-7% less CPU than with the header's line alone, measured
     * with tools/experiments/ckptcost.sh). A delta leaves most rows out
     * after reading their header. */
    const char *row = (const char *)s->batch[s->n];
    size_t end = s->min_ev ? 1 : sizeof(struct pod_row) + s->t->tuple_size;
    for (size_t off = 0; off < end; off += 64) __builtin_prefetch(row + off);
    __builtin_prefetch(row + end - 1);
    if (++s->n < ROWS_PER_BATCH) return true;
    if (write_batch(s) && s->left > 0) return true;
    s->stopped = true;
    return false;
}

/* Write every valid row of one partition. -1 on a write error (err) or stop.
 *
 * Each row is read under a shared lock, wherever the tuple lives (its
 * owner's DRAM, or CXL memory where another host may have written it:
 * src/pod/row_snapshot.h). A row a writer holds is waited for: skipping it
 * could lose a value older than Es. NO_WAIT gives no queue, so the scan
 * retries a few times, then leaves its critical sections (so that it holds
 * back neither reclamation nor the admin worker), naps and looks the key up
 * again: a row that was deleted meanwhile (its lock is never released) is
 * then no longer in the tree. */
static int scan_partition(struct checkpointer *c, pod_table *t, uint32_t p, uint64_t min_ev,
                          struct seg_writer *w, uint64_t *rows, uint64_t *older, pod_err *err)
{
    pod_db *db = c->lh->o.db;
    struct part_scan s = {.c = c, .t = t, .p = p, .min_ev = min_ev, .w = w, .rows = rows,
                          .older = older, .err = err};
    for (bool done = false; !done;) {
        if (stopping(c)) {
            pod_err_set(err, "stopped");
            return -1;
        }
        struct pod_worker *aw = db->hooks.admin_begin(db); /* its EBR slots keep rows readable */
        pod_snapshot_enter(db, aw->id);
        s.n = 0;
        s.left = ROWS_PER_CHUNK;
        s.stopped = s.busy = false;
        bt_scan_forward(&t->parts[p].tree, s.have_cur ? s.cur : NULL,
                        !s.have_cur || s.cur_inclusive, visit_row, &s);
        /* The scan reached the partition's end unless the visitor stopped it
         * (a full section, a held row or an error); a last partial batch is
         * still to be read. */
        if (!s.stopped) done = write_batch(&s);
        pod_snapshot_exit(db, aw->id);
        db->hooks.admin_end(db);
        if (s.rc) return -1;
        if (s.busy) {
            __atomic_fetch_add(&c->busy_waits, 1, __ATOMIC_RELAXED);
            struct timespec nap = {0, 20000};
            nanosleep(&nap, NULL);
        }
        if (flush_if_full(w, err)) return -1;
    }
    return 0;
}

/* ---- deleted keys ------------------------------------------------------------ */

void log_deleted_note(struct log_deleted *d, const pod_table *t, const void *key, uint64_t ev)
{
    size_t need = DELETED_HEADER + t->key_size;
    pthread_mutex_lock(&d->mu);
    if (d->len + need > d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 64 * 1024;
        while (cap < d->len + need) cap *= 2;
        unsigned char *nb = realloc(d->buf, cap);
        if (!nb) {
            d->lost = true; /* the next checkpoints are full ones (take_deleted) */
            pthread_mutex_unlock(&d->mu);
            return;
        }
        d->buf = nb;
        d->cap = cap;
    }
    unsigned char *p = d->buf + d->len;
    memcpy(p, &t->id, 4);
    memcpy(p + 4, &ev, 8);
    memcpy(p + DELETED_HEADER, key, t->key_size);
    d->len += need;
    pthread_mutex_unlock(&d->mu);
}

/* Take the list (the checkpointer's empty spare buffer takes its place). */
static bool take_deleted(struct checkpointer *c)
{
    struct log_deleted *d = &c->lh->deleted;
    pthread_mutex_lock(&d->mu);
    unsigned char *b = d->buf;
    size_t cap = d->cap;
    d->buf = c->del_buf;
    d->cap = c->del_cap;
    c->del_buf = b;
    c->del_cap = cap;
    c->del_len = d->len;
    d->len = 0;
    bool lost = d->lost;
    d->lost = false;
    pthread_mutex_unlock(&d->mu);
    return !lost;
}

/* The taken list as DELETE records. */
static int write_deleted(struct checkpointer *c, struct seg_writer *w, uint64_t *n, pod_err *err)
{
    pod_db *db = c->lh->o.db;
    for (size_t off = 0; off < c->del_len;) {
        const unsigned char *p = c->del_buf + off;
        uint32_t id;
        uint64_t ev;
        memcpy(&id, p, 4);
        memcpy(&ev, p + 4, 8);
        const pod_table *t = db->tables[id];
        struct log_record rec = {.table_id = id, .kind = LOG_DELETE,
                                 .key_len = (uint16_t)t->key_size, .epoch_version = ev,
                                 .key = p + DELETED_HEADER};
        if (seg_writer_append(w, &rec, err) != 0) return -1;
        (*n)++;
        off += DELETED_HEADER + t->key_size;
        if (flush_if_full(w, err)) return -1;
    }
    return 0;
}

/* The epoch below which every host's segments are covered by a checkpoint. */
uint64_t log_checkpoint_horizon(const struct log_host *lh)
{
    if (!lh->o.pod_mode) return lh->ckpt_epoch;
    uint64_t h = UINT64_MAX;
    const struct pod_config *conf = lh->o.conf;
    for (int i = 0; i < conf->nhosts; i++) {
        if (conf->hosts[i].loggers == 0) continue;
        uint64_t e = __atomic_load_n(&lh->o.region->ctl->checkpoint_epoch[i].v, __ATOMIC_ACQUIRE);
        if (e < h) h = e;
    }
    return h == UINT64_MAX ? 0 : h;
}

void log_remove_obsolete(struct log_host *lh, uint64_t hzn, uint64_t *removed)
{
    struct logdir d;
    pod_err err;
    if (logdir_scan(lh->dir, &d, &err)) {
        pod_warn("checkpoint: %s", err.msg);
        return;
    }
    /* Keep the chain recovery would load (the newest checkpoint and, when it
     * is a delta, those back to the nearest full one): every older one. */
    int *chain = d.nckpts ? calloc((size_t)d.nckpts, sizeof *chain) : NULL;
    int nchain = 0, oldest = d.nckpts;
    struct seg_header newest;
    if (d.nckpts && (!chain || logdir_ckpt_chain(lh->dir, &d, (uint32_t)lh->o.host, chain,
                                                  &nchain, &newest, &err))) {
        pod_warn("checkpoint: %s; no checkpoint is removed",
                 chain ? err.msg : "out of memory");
        nchain = 0;
        oldest = -1;
    } else if (nchain) {
        oldest = chain[0];
    }
    free(chain);
    char path[POD_PATH_MAX + SEG_NAME_MAX + 2];
    int n = 0;
    for (int i = 0; i < d.nckpts; i++) {
        const struct logdir_ckpt *k = &d.ckpts[i];
        if (k->host != (uint32_t)lh->o.host) continue;
        if (k->tmp ? lh->ckpt != NULL : i >= oldest) continue; /* a .tmp may be being written */
        snprintf(path, sizeof path, "%s/%s", lh->dir, k->name);
        if (unlink(path) == 0) n++;
    }
    for (int i = 0; hzn && i < d.nsegs; i++) {
        const struct logdir_seg *s = &d.segs[i];
        if (s->host != (uint32_t)lh->o.host) continue;
        struct logger *lg = s->logger < (uint32_t)lh->nloggers ? lh->loggers[s->logger] : NULL;
        /* Never a segment a logger may still append to, nor the one with
         * its last durable mark (recovery may need it: docs/durability.md). */
        if (lg && s->seq >= logger_mark_seq(lg)) continue;
        snprintf(path, sizeof path, "%s/%s", lh->dir, s->name);
        uint64_t lo, hi;
        /* The epochs of a segment this server wrote are known without
         * reading its block headers back from disk. */
        if (!(lg && logger_closed_epochs(lg, s->seq, &lo, &hi)) &&
            seg_peek_epochs(path, &lo, &hi, &err) != 0)
            continue;
        if (lo <= hi && hi >= hzn) continue; /* records the checkpoint does not cover */
        if (unlink(path) == 0) {
            n++;
            if (lg) logger_forget_closed(lg, s->seq);
        }
    }
    logdir_free(&d);
    if (n && seg_fsync_dir(lh->dir, &err)) pod_warn("checkpoint: %s", err.msg);
    if (removed) *removed += (uint64_t)n;
}

/* A run ends: written (sum) or failed. The count, the summary and the
 * running flag change together, so that what checkpointer_request reads of
 * them is consistent: a request counts on the run after the one running. */
static void end_run(struct checkpointer *c, const struct checkpoint_summary *sum)
{
    pthread_mutex_lock(&c->mu);
    if (sum) {
        c->last = *sum;
        __atomic_fetch_add(&c->count, 1, __ATOMIC_RELAXED);
    } else if (!stopping(c)) {
        __atomic_fetch_add(&c->failures, 1, __ATOMIC_RELAXED);
    }
    c->running = false;
    pthread_mutex_unlock(&c->mu);
}

/* Full again when another delta like the last would make the chain (the
 * full one and its deltas, which recovery reads) more than twice the live
 * data: where nearly every row changes between checkpoints (YCSB) every
 * other checkpoint is full; where the data mostly grows (TPC-C's inserts)
 * the chain holds little that is stale, and a full checkpoint, which
 * writes every row again, would be wasted (a 60 s TPC-C run: 2.68 s of
 * checkpoint CPU on a host with the older rule, 1.95 s with this one). */
bool checkpoint_policy_delta(uint64_t base, uint64_t chain, uint64_t last, uint64_t live,
                             uint64_t ndeltas)
{
    return ndeltas < MAX_DELTAS && base + chain + last <= 2 * live;
}

static int run_checkpoint(struct checkpointer *c)
{
    struct log_host *lh = c->lh;
    pod_db *db = lh->o.db;
    pod_err err;
    uint64_t t0 = pod_mono_ns(), cpu0 = pod_thread_cpu_ns(), seq = lh->next_ckpt_seq++;
    uint64_t busy0 = __atomic_load_n(&c->busy_waits, __ATOMIC_RELAXED);
    uint64_t es = __atomic_load_n(lh->epoch_word, __ATOMIC_SEQ_CST);
    /* A delta holds the rows written since the last checkpoint's start
     * (every earlier write is in that one or the chain before it) and the
     * keys deleted since the last one took the list. */
    bool delta = c->last_es && !c->force_full &&
                 checkpoint_policy_delta(c->base_bytes, c->chain_bytes, c->delta_bytes,
                                         c->full_bytes, c->deltas);
    uint64_t min_ev = delta ? log_ev_make((uint32_t)c->last_es, 0) : 0;
    char tmp[SEG_NAME_MAX], fin[SEG_NAME_MAX];
    char a[POD_PATH_MAX + SEG_NAME_MAX + 2], b[POD_PATH_MAX + SEG_NAME_MAX + 2];
    seg_format_ckpt_name(tmp, sizeof tmp, (uint32_t)lh->o.host, seq, true);
    seg_format_ckpt_name(fin, sizeof fin, (uint32_t)lh->o.host, seq, false);
    struct seg_header h = {.host = (uint32_t)lh->o.host, .logger = SEG_LOGGER_CHECKPOINT,
                           .seq = seq, .first_epoch = es,
                           .ckpt_flags = delta ? SEG_CKPT_DELTA : 0,
                           .since_epoch = delta ? c->last_es : 0};
    /* Nothing goes into a directory that was lost (or into one put in its place). */
    if (logdir_watch_lost(lh->watch)) {
        pod_err_set(&err, "the log directory %s was lost", lh->dir);
        goto fail;
    }
    struct seg_writer *w = seg_writer_open_named(lh->dir, tmp, &h, &err);
    if (!w) goto fail;
    /* Past the page cache like the log: nothing reads the file while it is
     * written; a writer that cannot is paced through the page cache instead. */
    if (seg_writer_go_direct(w, SEG_DIRECT_EARLY_BYTES, &err) != 0) goto fail_w;
    uint64_t rows = 0, older = 0, deleted = 0;
    for (uint32_t i = 0; i < db->ntables; i++) {
        pod_table *t = db->tables[i];
        for (uint32_t p = 0; p < t->nparts; p++) {
            if (lh->o.pod_mode && t->parts[p].owner != (uint32_t)lh->o.host) continue;
            if (scan_partition(c, t, p, min_ev, w, &rows, &older, &err)) goto fail_w;
        }
    }
    /* Every key deleted before the scan passed it left the tree after it
     * went into the list (log_row_removed), so the list now has every delete
     * the scan could not see. A full checkpoint needs them too: it may hold
     * a row deleted after the scan read it, at an epoch >= es, whose DELETE
     * leaves the log with the next checkpoint. */
    bool complete = take_deleted(c); /* if not, the next one is full (below, or fail:) */
    if (!complete && delta) {
        pod_err_set(&err, "a deleted key could not be kept (out of memory): the next "
                    "checkpoint is a full one");
        goto fail_w;
    }
    if (write_deleted(c, w, &deleted, &err)) goto fail_w;
    uint64_t bytes = seg_writer_size(w) + seg_writer_pending(w);
    if (seg_writer_close(w, &err) != 0) goto fail_file;
    /* Valid only once every value in it is committed. */
    uint64_t ef = __atomic_load_n(lh->epoch_word, __ATOMIC_SEQ_CST);
    /* Counted as a reply that waits: a quiet pod moves E on for it (epoch.h). */
    log_host_waiters_add(lh, 1);
    bool stopped = false;
    while (log_host_persisted(lh) <= ef && !(stopped = stopping(c))) {
        struct timespec nap = {0, 1000000};
        nanosleep(&nap, NULL);
    }
    log_host_waiters_add(lh, -1);
    if (stopped) {
        pod_err_set(&err, "stopped before its epochs were durable");
        goto fail_file;
    }
    snprintf(a, sizeof a, "%s/%s", lh->dir, tmp);
    snprintf(b, sizeof b, "%s/%s", lh->dir, fin);
    if (rename(a, b) != 0) {
        pod_err_set(&err, "cannot rename %s to %s: %s", a, b, strerror(errno));
        goto fail_file;
    }
    if (seg_fsync_dir(lh->dir, &err)) goto fail; /* the rename may not be durable: keep logs */
    if (delta) {
        c->chain_bytes += bytes;
        c->delta_bytes = bytes;
        /* The rows left out would take as much room as the ones written
         * (the data grows: TPC-C doubles in tens of seconds). */
        if (rows) c->full_bytes = (uint64_t)((double)bytes * (double)(rows + older) / (double)rows);
    } else {
        c->full_bytes = c->base_bytes = bytes;
        c->chain_bytes = c->delta_bytes = 0;
    }
    __atomic_store_n(&c->deltas, delta ? c->deltas + 1 : 0, __ATOMIC_RELAXED);
    c->last_es = es;
    c->force_full = !complete;
    lh->ckpt_epoch = es;
    __atomic_store_n(&lh->o.region->ctl->checkpoint_epoch[lh->o.host].v, es, __ATOMIC_RELEASE);
    __atomic_store_n(&c->epoch, es, __ATOMIC_RELAXED);
    uint64_t removed = 0;
    log_remove_obsolete(lh, log_checkpoint_horizon(lh), &removed);
    __atomic_fetch_add(&c->removed, removed, __ATOMIC_RELAXED);
    struct checkpoint_summary sum = {.delta = delta, .rows = rows, .unchanged = older,
                                     .deleted = deleted, .bytes = bytes,
                                     .ns = pod_mono_ns() - t0,
                                     .cpu_ns = pod_thread_cpu_ns() - cpu0};
    end_run(c, &sum);
    pod_info("checkpoint %s%s: %" PRIu64 " rows (%" PRIu64 " unchanged left out), %" PRIu64
             " deleted keys, %.1f MiB, epochs %" PRIu64 "..%" PRIu64 ", %.2f s (%.3f s of CPU, %"
             PRIu64 " waits for locked rows); %" PRIu64 " obsolete files removed",
             fin, delta ? " (delta)" : "", rows, older, deleted, (double)bytes / 1048576.0, es,
             ef, (double)sum.ns / 1e9, (double)sum.cpu_ns / 1e9,
             __atomic_load_n(&c->busy_waits, __ATOMIC_RELAXED) - busy0, removed);
    return 0;
fail_w:
    seg_writer_abandon(w);
fail_file:
    snprintf(a, sizeof a, "%s/%s", lh->dir, tmp);
    unlink(a);
fail:
    /* The deleted keys taken (if any) are in no checkpoint: the next one
     * cannot be a delta of the last. */
    c->force_full = true;
    end_run(c, NULL);
    if (!stopping(c)) pod_warn("checkpoint %s failed: %s; the log is kept", tmp, err.msg);
    return -1;
}

/* Log bytes between checkpoints: checkpoint_after, and at least twice the
 * size of a full checkpoint. Every checkpoint reads all the live data (a
 * delta writes only what changed), so when the data is larger than
 * checkpoint_after, checkpointing after every checkpoint_after bytes of log
 * would scan more than the loggers write; this way a full checkpoint costs at
 * most half of what logging does, and recovery reads about twice the data
 * at most in checkpoints (run_checkpoint) and twice the data (or
 * checkpoint_after) of log. */
static uint64_t checkpoint_due(const struct checkpointer *c)
{
    uint64_t due = c->lh->o.checkpoint_after;
    return c->full_bytes > due / 2 ? 2 * c->full_bytes : due;
}

static void *ckpt_main(void *arg)
{
    struct checkpointer *c = arg;
    pthread_setname_np(pthread_self(), "pod-ckpt");
    /* Behind the workers when they want the CPU (it still gets a share: a
     * 500 MiB checkpoint beside YCSB took as long as at nice 0, and the
     * workers' dip during it was smaller). A failure only leaves it at the
     * normal priority. */
    (void)setpriority(PRIO_PROCESS, (id_t)gettid(), CKPT_NICE);
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        if (!c->requested) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t abs =
                (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + CHECK_EVERY_NS;
            ts.tv_sec = (time_t)(abs / 1000000000ull);
            ts.tv_nsec = (long)(abs % 1000000000ull);
            pthread_cond_timedwait(&c->cv, &c->mu, &ts);
            if (c->stop) break;
        }
        /* A request is taken here, before the checkpoint that serves it
         * starts (its Es is then at least the epoch of the request). */
        bool asked = c->requested;
        if (asked && c->request_full) c->force_full = true;
        c->requested = c->request_full = false;
        uint64_t logged = logged_bytes(c->lh);
        bool run = asked || logged - c->logged_at_last >= checkpoint_due(c);
        c->running = run;
        pthread_mutex_unlock(&c->mu);
        if (run) {
            c->logged_at_last = logged;
            run_checkpoint(c); /* clears running (end_run) */
        }
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

struct checkpointer *checkpointer_start(struct log_host *lh, pod_err *err)
{
    struct checkpointer *c = calloc(1, sizeof *c);
    if (!c) {
        pod_err_set(err, "out of memory");
        return NULL;
    }
    c->lh = lh;
    __atomic_store_n(&lh->deleted.on, true, __ATOMIC_RELEASE); /* before any transaction logs */
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&c->th, NULL, ckpt_main, c);
    if (rc) {
        pod_err_set(err, "cannot start the checkpoint thread: %s", strerror(rc));
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv);
        free(c);
        return NULL;
    }
    return c;
}

void checkpointer_stop(struct checkpointer *c)
{
    if (!c) return;
    __atomic_store_n(&c->lh->deleted.on, false, __ATOMIC_RELEASE);
    pthread_mutex_lock(&c->mu);
    __atomic_store_n(&c->stop, true, __ATOMIC_RELEASE);
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->th, NULL);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->del_buf);
    free(c);
}

uint64_t checkpointer_request(struct checkpointer *c, bool full)
{
    pthread_mutex_lock(&c->mu);
    /* A pending request has not started yet: it serves this one too. */
    uint64_t done_at = __atomic_load_n(&c->count, __ATOMIC_RELAXED) + (c->running ? 2 : 1);
    c->requested = true;
    c->request_full |= full;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return done_at;
}

void checkpointer_stats(struct checkpointer *c, struct log_host_stats *out)
{
    out->checkpoint_deltas = __atomic_load_n(&c->deltas, __ATOMIC_RELAXED);
    out->checkpoints = __atomic_load_n(&c->count, __ATOMIC_RELAXED);
    out->checkpoint_epoch = __atomic_load_n(&c->epoch, __ATOMIC_RELAXED);
    out->segments_removed = __atomic_load_n(&c->removed, __ATOMIC_RELAXED);
    out->checkpoint_failures = __atomic_load_n(&c->failures, __ATOMIC_RELAXED);
    pthread_mutex_lock(&c->mu);
    out->checkpoint_running = c->running || c->requested;
    out->last_checkpoint = c->last;
    pthread_mutex_unlock(&c->mu);
}
