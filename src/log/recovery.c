/* Recovery: replay the committed history of a host's log directory into its
 * tables (docs/durability.md).
 *
 *  1. The committed end D: the durable-epoch record (pod mode: the largest
 *     over the pod's hosts, route.c), or the smallest of the loggers' last
 *     marks where that is larger (durable_view, log_durable_combine). Every
 *     epoch below D was acknowledged or could have been; everything at or
 *     above D is discarded.
 *  2. Read, on every replay thread in parallel (one file at a time each): the
 *     newest complete checkpoint (with, when it is a delta, those before it
 *     back to the nearest full one: logdir_ckpt_chain) and every segment of
 *     this host, each up to
 *     its first torn or corrupt block (a warning; the records before it are
 *     kept). Records of epochs >= D are dropped; the others are copied into
 *     per-thread lists by destination: the replay thread that owns the key
 *     (a hash of table and key), or in pod mode another host (route.c).
 *  3. Apply, each thread its own keys: the highest epoch-version wins
 *     (table_install); a delete leaves a tombstone so an older put met later
 *     cannot revive the key; segment records older than the checkpoint's
 *     start epoch are skipped (the checkpoint already reflects them). Then
 *     the patches (updates that logged only the bytes they changed), sorted
 *     by key and epoch-version, each onto the version it was made from. The
 *     indexes are rebuilt as a side effect (they are never logged). Then the
 *     tombstones go.
 *  4. Cut the logs back to committed history: a segment holding records of
 *     epochs >= D gets its committed records after the first such block
 *     copied into a new segment, then is truncated there. Without this, the
 *     next life of the pod (whose epochs start at D or above) could make those
 *     stale records look committed. The record is raised to D before the
 *     cut, and after it to the largest mark the loggers wrote, where the
 *     next life starts, so that no mark of this life speaks for the next. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db/types.h"
#include "log/crc32c.h"
#include "log/log_priv.h"
#include "log/recbuf.h"
#include "log/route.h"
#include "storage/ebr.h"
#include "storage/table_load.h"
#include "util/clock.h"
#include "util/log.h"

#define PROGRESS_NS (1000ull * 1000 * 1000)
#define EBR_BATCH 256

struct rfile {
    char path[POD_PATH_MAX + SEG_NAME_MAX + 2];
    bool ckpt;
    uint32_t logger;
    uint64_t seq;
    /* results of reading it */
    enum seg_tail_kind tail;
    uint64_t size, good_bytes, records;
    uint64_t cut_off;      /* offset of the first block with an epoch >= D (0: none) */
};

struct recovery_ctx {
    struct log_host *lh;
    pod_db *db;
    int n;                       /* replay threads */
    pthread_barrier_t bar;
    struct logrec_list *lists;      /* [n src][n dst] */
    struct logrec_list *out;        /* [n src][POD_MAX_HOSTS] (pod mode) */
    struct rfile *files;
    int nfiles;
    int next_file;               /* atomic */
    uint64_t D, Es;
    struct route *route;
    struct log_recovery_stats *st; /* counters updated with atomics */
    uint64_t bytes_read;         /* atomic */
    uint64_t t0, next_print;     /* next_print atomic */
    pthread_mutex_t err_lock;
    bool failed;                 /* atomic */
    pod_err err;
};

static void add(uint64_t *c, uint64_t d) { __atomic_fetch_add(c, d, __ATOMIC_RELAXED); }
static uint64_t get(const uint64_t *c) { return __atomic_load_n(c, __ATOMIC_RELAXED); }

static void fail(struct recovery_ctx *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void fail(struct recovery_ctx *x, const char *fmt, ...)
{
    pthread_mutex_lock(&x->err_lock);
    if (!x->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(x->err.msg, sizeof x->err.msg, fmt, ap);
        va_end(ap);
        __atomic_store_n(&x->failed, true, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&x->err_lock);
}

static bool failed(struct recovery_ctx *x)
{
    return __atomic_load_n(&x->failed, __ATOMIC_ACQUIRE);
}

static void progress(struct recovery_ctx *x, const char *phase, bool force)
{
    uint64_t now = pod_mono_ns(), at = __atomic_load_n(&x->next_print, __ATOMIC_RELAXED);
    if (!force && (now < at || !__atomic_compare_exchange_n(&x->next_print, &at,
                                                            now + PROGRESS_NS, false,
                                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED)))
        return;
    double s = (double)(now - x->t0) / 1e9;
    uint64_t rd = get(&x->st->records_read), ap = get(&x->st->records_applied);
    pod_info("recovery: %s: %" PRIu64 " records read (%.1f MiB), %" PRIu64 " applied, %.2f s, "
             "%.0f records/s", phase, rd, (double)get(&x->bytes_read) / 1048576.0, ap, s,
             s > 0 ? (double)rd / s : 0.0);
}

static uint32_t shard_of(const struct log_record *r, int n)
{
    uint32_t h = crc32c(crc32c(0, &r->table_id, sizeof r->table_id), r->key, r->key_len);
    return h % (uint32_t)n;
}

/* Check a record against the table it names; NULL (after fail) if it does not fit. */
static pod_table *table_for(struct recovery_ctx *x, const struct rfile *f,
                            const struct log_record *r)
{
    if (r->table_id >= x->db->ntables) {
        fail(x, "%s: a record names table id %" PRIu32 ", but this server has %" PRIu32
             " tables: the tables (config or modules) changed since the log was written",
             f->path, r->table_id, x->db->ntables);
        return NULL;
    }
    pod_table *t = x->db->tables[r->table_id];
    if (r->key_len != t->key_size || (r->kind == LOG_PUT && r->tuple_len != t->tuple_size)) {
        fail(x, "%s: a record of table id %" PRIu32 " has a %u-byte key and a %" PRIu32
             "-byte tuple, but table %s has %" PRIu32 "-byte keys and %" PRIu32 "-byte tuples: "
             "the tables changed since the log was written", f->path, r->table_id, r->key_len,
             r->tuple_len, t->name, t->key_size, t->tuple_size);
        return NULL;
    }
    if (r->kind == LOG_PATCH) {
        struct log_patch pa = log_patch_parse(r->tuple, r->tuple_len);
        if (f->ckpt || pa.offset > t->tuple_size || pa.len > t->tuple_size - pa.offset) {
            fail(x, "%s: a PATCH record of table %s %s", f->path, t->name,
                 f->ckpt ? "in a checkpoint (which holds whole tuples only)"
                         : "reaches past the end of its tuple");
            return NULL;
        }
    }
    return t;
}

/* Read one file into the thread's lists. */
static void read_file(struct recovery_ctx *x, int self, struct rfile *f)
{
    pod_err err;
    struct seg_reader *r = seg_reader_open(f->path, &err);
    if (!r) {
        if (f->ckpt) {
            fail(x, "the checkpoint cannot be read: %s", err.msg);
        } else {
            pod_warn("recovery: %s; the segment is skipped", err.msg);
            add(&x->st->corrupt_tails, 1);
        }
        return;
    }
    struct log_record rec;
    int rc;
    uint64_t n = 0;
    while (!failed(x) && (rc = seg_reader_next(r, &rec, &err)) == 1) {
        n++;
        uint64_t e = log_ev_epoch(rec.epoch_version);
        if (e >= x->D) {
            if (f->ckpt) {
                fail(x, "%s: the checkpoint holds a record of epoch %" PRIu64 ", not below the "
                     "committed end %" PRIu64 ": it is not valid", f->path, e, x->D);
                break;
            }
            /* (Records of this block read before this one may be committed:
             * cut_file re-reads everything from the block on.) */
            const struct seg_block_info *b = seg_reader_block(r);
            if (!f->cut_off) f->cut_off = b->offset;
            add(&x->st->records_discarded, 1);
            continue;
        }
        pod_table *t = table_for(x, f, &rec);
        if (!t) break;
        int owner = log_owner_of(x->lh, t, rec.key);
        struct logrec_list *dst = owner == x->lh->o.host
                                   ? &x->lists[self * x->n + (int)shard_of(&rec, x->n)]
                                   : &x->out[self * POD_MAX_HOSTS + owner];
        if (!logrec_list_add(dst, &rec, f->ckpt)) {
            fail(x, "out of memory holding the log records for replay");
            break;
        }
        uint64_t ep = e;
        if (ep < __atomic_load_n(&x->st->epoch_lo, __ATOMIC_RELAXED))
            __atomic_store_n(&x->st->epoch_lo, ep, __ATOMIC_RELAXED); /* approximate under races */
        if (ep > __atomic_load_n(&x->st->epoch_hi, __ATOMIC_RELAXED))
            __atomic_store_n(&x->st->epoch_hi, ep, __ATOMIC_RELAXED);
        if ((n & 4095) == 0) progress(x, "reading", false);
    }
    const struct seg_reader_stats *s = seg_reader_stats(r);
    const struct seg_tail_status *ts = seg_reader_tail_status(r);
    f->tail = ts->kind;
    f->size = s->file_size;
    f->good_bytes = s->good_bytes;
    f->records = n;
    add(&x->st->records_read, n);
    add(&x->bytes_read, s->good_bytes);
    add(&x->st->files, 1);
    add(&x->st->bytes, s->file_size);
    if (!failed(x) && rc < 0) fail(x, "recovery: %s", err.msg);
    if (!failed(x) && ts->kind == SEG_TAIL_TORN) {
        add(&x->st->torn_tails, 1);
        pod_warn("recovery: %s: torn tail at offset %" PRIu64 " (%" PRIu64 " bytes ignored): %s; "
                 "its history ends at the last complete block", f->path, ts->offset,
                 s->file_size - ts->offset, ts->reason);
    } else if (!failed(x) && ts->kind == SEG_TAIL_CORRUPT) {
        add(&x->st->corrupt_tails, 1);
        if (f->ckpt)
            fail(x, "the checkpoint %s is damaged at offset %" PRIu64 ": %s", f->path, ts->offset,
                 ts->reason);
        else
            pod_warn("recovery: %s: CORRUPT data at offset %" PRIu64 " (%" PRIu64 " bytes "
                     "ignored): %s; its history ends at the last good block", f->path,
                     ts->offset, s->file_size - ts->offset, ts->reason);
    }
    seg_reader_close(r);
}

/* Patches in replay order: by key, and along each key's chain of versions. */
static int patch_cmp(const void *pa, const void *pb)
{
    const struct logrec_entry *a = *(const struct logrec_entry *const *)pa;
    const struct logrec_entry *b = *(const struct logrec_entry *const *)pb;
    if (a->table_id != b->table_id) return a->table_id < b->table_id ? -1 : 1;
    int c = memcmp(a->data, b->data, a->key_len);
    if (c) return c;
    return a->ev < b->ev ? -1 : a->ev > b->ev;
}

struct apply_counts {
    uint64_t applied, older, before_ckpt, patches_lost, k;
};

/* Every EBR_BATCH records: leave the critical section for a moment (so that
 * retired index nodes can go) and report progress. */
static void apply_tick(struct recovery_ctx *x, struct pod_worker *w, struct apply_counts *c)
{
    if (++c->k % EBR_BATCH) return;
    ebr_exit(x->db->ebr, w->id);
    add(&x->st->records_applied, c->applied);
    c->applied = 0;
    progress(x, "applying", false);
    ebr_enter(x->db->ebr, w->id);
}

/* A patch applies to the version it was made from, so the patches of a key
 * go after its whole values (the highest of which wins as usual), in order
 * of epoch-version; one whose base version is missing (a record of the
 * chain was lost in a damaged segment) is counted and left out. */
static void apply_patches(struct recovery_ctx *x, struct pod_worker *w,
                          const struct logrec_entry **p, size_t n, struct apply_counts *c)
{
    if (n == 0) return;
    qsort(p, n, sizeof *p, patch_cmp);
    for (size_t i = 0; i < n && !failed(x); i++) {
        const struct logrec_entry *e = p[i];
        struct log_patch pa = log_patch_parse(e->data + e->key_len, e->tuple_len);
        switch (table_patch(x->db->tables[e->table_id], e->data, e->ev, pa.base_ev, pa.offset,
                            pa.bytes, pa.len)) {
        case TABLE_INSTALLED: c->applied++; break;
        case TABLE_NOT_NEWER: c->older++; break;
        default: c->patches_lost++; break;
        }
        apply_tick(x, w, c);
    }
}

/* Apply the records meant for replay thread self. */
static void apply_mine(struct recovery_ctx *x, struct pod_worker *w, struct logrec_list *tombs)
{
    int self = w->id;
    struct apply_counts c = {0};
    const struct logrec_entry **patches = NULL;
    size_t npatches = 0, cap = 0;
    ebr_enter(x->db->ebr, w->id);
    for (int src = 0; src < x->n && !failed(x); src++) {
        struct logrec_iter it;
        for (const struct logrec_entry *e = logrec_first(&x->lists[src * x->n + self], &it); e;
             e = logrec_next(&it)) {
            if (!e->from_ckpt && log_ev_epoch(e->ev) < x->Es) {
                c.before_ckpt++;
                continue;
            }
            if (e->kind == LOG_PATCH) { /* after the whole values (the lists stay until the end) */
                if (npatches == cap) {
                    cap = cap ? 2 * cap : 4096;
                    const struct logrec_entry **np = realloc(patches, cap * sizeof *np);
                    if (!np) {
                        fail(x, "out of memory sorting the logged updates");
                        break;
                    }
                    patches = np;
                }
                patches[npatches++] = e;
                continue;
            }
            pod_table *t = x->db->tables[e->table_id];
            const void *tuple = e->kind == LOG_PUT ? e->data + e->key_len : NULL;
            enum table_install_result r = table_install(t, e->data, e->ev, tuple);
            if (r == TABLE_INSTALL_NOMEM) {
                fail(x, "out of memory replaying table %s", t->name);
                break;
            }
            if (r == TABLE_NOT_NEWER) c.older++;
            else c.applied++;
            if (r == TABLE_INSTALLED && !tuple && !logrec_list_add_entry(tombs, e)) {
                fail(x, "out of memory replaying table %s", t->name);
                break;
            }
            apply_tick(x, w, &c);
        }
    }
    if (!failed(x)) apply_patches(x, w, patches, npatches, &c);
    ebr_exit(x->db->ebr, w->id);
    free(patches);
    add(&x->st->records_applied, c.applied);
    add(&x->st->records_older, c.older);
    add(&x->st->records_before_checkpoint, c.before_ckpt);
    add(&x->st->patches_lost, c.patches_lost);
}

static void drop_tombstones(struct recovery_ctx *x, struct pod_worker *w,
                            struct logrec_list *tombs)
{
    uint64_t dropped = 0, k = 0;
    struct logrec_iter it;
    ebr_enter(x->db->ebr, w->id);
    for (const struct logrec_entry *e = logrec_first(tombs, &it); e; e = logrec_next(&it)) {
        dropped += (uint64_t)table_drop_tombstone(x->db->tables[e->table_id], e->data, x->db->ebr,
                                                      w->id);
        if (++k % EBR_BATCH == 0) {
            ebr_exit(x->db->ebr, w->id);
            ebr_enter(x->db->ebr, w->id);
        }
    }
    ebr_exit(x->db->ebr, w->id);
    add(&x->st->tombstones_removed, dropped);
}

/* Records other hosts route here go to the replay thread owning the key. */
static bool deliver(void *ctx, const struct logrec_entry *e)
{
    struct recovery_ctx *x = ctx;
    if (e->table_id >= x->db->ntables) return false;
    struct log_record r = {.table_id = e->table_id, .key = e->data, .key_len = e->key_len};
    add(&x->st->records_received, 1);
    return logrec_list_add_entry(&x->lists[0 * x->n + (int)shard_of(&r, x->n)], e);
}

static void replay_body(struct pod_worker *w, void *arg)
{
    struct recovery_ctx *x = arg;
    int self = w->id;
    /* read */
    for (;;) {
        int i = __atomic_fetch_add(&x->next_file, 1, __ATOMIC_RELAXED);
        if (i >= x->nfiles || failed(x)) break;
        read_file(x, self, &x->files[i]);
    }
    pthread_barrier_wait(&x->bar);
    /* pod mode: send and receive through the region (thread 0; the rest wait) */
    if (self == 0 && x->route && !failed(x)) {
        pod_err err;
        struct logrec_list out[POD_MAX_HOSTS];
        memset(out, 0, sizeof out);
        /* Join the threads' outboxes per host (moving the chunk lists). */
        for (int h = 0; h < POD_MAX_HOSTS; h++)
            for (int t = 0; t < x->n; t++) {
                struct logrec_list *l = &x->out[t * POD_MAX_HOSTS + h];
                if (!l->head) continue;
                if (out[h].tail) out[h].tail->next = l->head;
                else out[h].head = l->head;
                out[h].tail = l->tail;
                out[h].count += l->count;
                out[h].bytes += l->bytes;
                memset(l, 0, sizeof *l);
            }
        for (int h = 0; h < POD_MAX_HOSTS; h++) add(&x->st->records_sent, out[h].count);
        if (route_send(x->route, out, &err) != 0 ||
            route_receive(x->route, deliver, x, &err) != 0)
            fail(x, "%s", err.msg);
        for (int h = 0; h < POD_MAX_HOSTS; h++) logrec_list_free(&out[h]);
        cxl_thread_detach(x->lh->o.region); /* this thread allocated the staging areas */
    }
    pthread_barrier_wait(&x->bar);
    /* apply */
    struct logrec_list tombs = {0};
    if (!failed(x)) apply_mine(x, w, &tombs);
    pthread_barrier_wait(&x->bar);
    if (!failed(x)) drop_tombstones(x, w, &tombs);
    logrec_list_free(&tombs);
}

/* ---- cutting the logs back to committed history -------------------------------- */

static int truncate_file(const char *path, uint64_t off, pod_err *err)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        pod_err_set(err, "cannot open %s to truncate it: %s", path, strerror(errno));
        return -1;
    }
    int rc = 0;
    if (ftruncate(fd, (off_t)off) != 0 || fdatasync(fd) != 0) {
        pod_err_set(err, "cannot truncate %s to %" PRIu64 " bytes: %s", path, off, strerror(errno));
        rc = -1;
    }
    close(fd);
    return rc;
}

/* Copy the committed records at or after f->cut_off into a new segment of
 * the same logger, then truncate f at cut_off. */
static int cut_file(struct log_host *lh, struct rfile *f, uint64_t D, uint64_t *salvaged,
                    pod_err *err)
{
    struct seg_writer *w = NULL;
    uint64_t n = 0;
    struct seg_reader *r = seg_reader_open(f->path, err);
    if (!r) return -1;
    struct log_record rec;
    int rc;
    while ((rc = seg_reader_next(r, &rec, err)) == 1) {
        if (seg_reader_block(r)->offset < f->cut_off || log_ev_epoch(rec.epoch_version) >= D)
            continue;
        if (!w && !(w = seg_writer_open(lh->dir, (uint32_t)lh->o.host, f->logger,
                                        log_take_seq(lh, f->logger), D, err))) {
            rc = -1;
            break;
        }
        if (seg_writer_append(w, &rec, err) != 0) {
            rc = -1;
            break;
        }
        n++;
    }
    seg_reader_close(r);
    if (rc < 0) {
        seg_writer_abandon(w);
        return -1;
    }
    if (w && seg_writer_close(w, err) != 0) return -1;
    if (truncate_file(f->path, f->cut_off, err)) return -1;
    *salvaged += n;
    pod_info("recovery: %s cut back to %" PRIu64 " bytes (uncommitted epochs >= %" PRIu64
             " removed%s%" PRIu64 " committed records after them moved to a new segment)",
             f->path, f->cut_off, D, n ? "; " : ", ", n);
    return 0;
}

/* ---- the whole ------------------------------------------------------------------- */

static int add_file(struct recovery_ctx *x, int *cap, const char *dir, const char *name,
                    bool ckpt, uint32_t logger, uint64_t seq)
{
    if (x->nfiles == *cap) {
        *cap = *cap ? 2 * *cap : 32;
        struct rfile *n = realloc(x->files, (size_t)*cap * sizeof *n);
        if (!n) return -1;
        x->files = n;
    }
    struct rfile *f = &x->files[x->nfiles++];
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s/%s", dir, name);
    f->ckpt = ckpt;
    f->logger = logger;
    f->seq = seq;
    return 0;
}

/* The last mark of segment path (*found false when it has none). A mark
 * counts only with every block before it verified, so the whole segment is
 * read; a segment whose header is bad has none. *older: the segment is of a
 * format without marks (so are the logger's earlier ones). -1 on an I/O
 * error. */
static int last_mark(const char *path, bool *found, bool *older, uint64_t *through,
                     uint32_t *nloggers, pod_err *err)
{
    *found = *older = false;
    pod_err ignore;
    struct seg_reader *r = seg_reader_open(path, &ignore);
    if (!r) return 0; /* recovery's read reports it */
    if (seg_reader_header(r)->version < 4) {
        *older = true;
        seg_reader_close(r);
        return 0;
    }
    struct log_record rec;
    int rc;
    while ((rc = seg_reader_next(r, &rec, err)) == 1) {
    }
    const struct seg_reader_stats *st = seg_reader_stats(r);
    if (rc == 0 && st->marks) {
        *found = true;
        *through = st->mark_through;
        *nloggers = st->mark_nloggers;
    }
    seg_reader_close(r);
    return rc;
}

/* What this host's log says about the committed end: its durable-epoch
 * record and its loggers' marks, each logger's last one (in its newest
 * segment that has one). The marks count only when every logger of the
 * host (as many as the marks say it had) has one. */
static int durable_view(struct log_host *lh, struct log_durable_view *v, pod_err *err)
{
    memset(v, 0, sizeof *v);
    v->recorded = lh->drec.exists ? lh->drec.epoch : 0;
    v->hosts = lh->logged_hosts;
    const struct logdir *ld = &lh->listing;
    uint64_t marks[POD_MAX_LOGGERS];
    bool have[POD_MAX_LOGGERS] = {false}, done[POD_MAX_LOGGERS] = {false};
    uint32_t n = 0;
    char path[POD_PATH_MAX + SEG_NAME_MAX + 2];
    bool segments = false;
    for (int i = 0; i < ld->nsegs; i++) segments = segments || ld->segs[i].host == (uint32_t)lh->o.host;
    /* No segment, no record: this host bounds nothing (a host that starts
     * with an empty log directory by --allow-empty-log must not make the
     * others' marks count for nothing: log/emptylog.h). */
    if (!segments) {
        v->marked = UINT64_MAX;
        return 0;
    }
    for (int i = ld->nsegs - 1; i >= 0; i--) { /* newest first per logger (logdir order) */
        const struct logdir_seg *s = &ld->segs[i];
        if (s->host != (uint32_t)lh->o.host || s->logger >= POD_MAX_LOGGERS || done[s->logger])
            continue;
        snprintf(path, sizeof path, "%s/%s", lh->dir, s->name);
        bool found;
        uint32_t nl = 0;
        /* A segment of a format without marks ends this logger's walk too. */
        if (last_mark(path, &found, &done[s->logger], &marks[s->logger], &nl, err)) return -1;
        if (!found) continue;
        done[s->logger] = true;
        have[s->logger] = true;
        if (nl > n) n = nl;
        if (marks[s->logger] > v->marked_max) v->marked_max = marks[s->logger];
    }
    if (n == 0 || n > POD_MAX_LOGGERS) return 0;
    v->marked = UINT64_MAX;
    for (uint32_t l = 0; l < n; l++) {
        if (!have[l]) {
            v->marked = 0;
            break;
        }
        if (marks[l] < v->marked) v->marked = marks[l];
    }
    return 0;
}

/* Record epoch in this host's durable-epoch file (created if needed). */
static int record_durable(struct log_host *lh, uint64_t epoch, pod_err *err)
{
    struct durable_file *f = durable_file_open(lh->dir, (uint32_t)lh->o.host, epoch, err);
    if (!f) return -1;
    int rc = durable_file_write(f, epoch, err);
    durable_file_close(f);
    return rc;
}

int log_host_recover(struct log_host *lh, struct log_recovery_stats *stp, pod_err *err)
{
    struct log_recovery_stats local;
    struct log_recovery_stats *st = stp ? stp : &local;
    memset(st, 0, sizeof *st);
    st->epoch_lo = UINT64_MAX;
    /* A host that does not log has no history, but in pod mode it still owns
     * partitions that others' logs may hold records of. */
    if (!lh->logging && !lh->o.pod_mode) return 0;
    const struct logdir *ld = &lh->listing;
    int *chain = ld->nckpts ? malloc((size_t)ld->nckpts * sizeof *chain) : NULL;
    int nchain = 0;
    struct seg_header newest = {0};
    if (ld->nckpts && !chain) {
        pod_err_set(err, "out of memory");
        return -1;
    }
    if (ld->nckpts && logdir_ckpt_chain(lh->dir, ld, (uint32_t)lh->o.host, chain, &nchain,
                                        &newest, err)) {
        free(chain);
        return -1;
    }
    bool history = ld->nsegs > 0 || nchain || lh->drec.exists;
    struct recovery_ctx x = {.lh = lh, .db = lh->o.db, .st = st};
    struct log_durable_view view = {0};
    if (lh->logging && durable_view(lh, &view, err)) {
        free(chain);
        return -1;
    }
    uint64_t start;
    log_durable_combine(&view, 1, &x.D, &start);
    if (lh->o.pod_mode) {
        /* Hosts recover together once any of them has history: records of
         * this host's tuples may sit in their logs. */
        /* A host started empty by --allow-empty-log recovers with the pod
         * (rather than serve at once, as a host new to the pod does). */
        bool skipped;
        if (!(x.route = route_begin(lh, &view, history || lh->lost_history, 0, &x.D, &start,
                                    &skipped, err))) {
            free(chain);
            return skipped ? 0 : -1;
        }
        history = true;
    }
    if (!history) {
        route_end(x.route);
        free(chain);
        return 0;
    }
    st->ran = true;
    x.t0 = pod_mono_ns();
    x.next_print = x.t0 + PROGRESS_NS;
    pthread_mutex_init(&x.err_lock, NULL);
    int cap = 0, rc = -1;
    if (ld->nsegs && x.D == 0 && !lh->o.pod_mode)
        pod_warn("recovery: %s has log segments but no %s record: no transaction was ever "
                 "acknowledged as durable, so every record is discarded", lh->dir,
                 DURABLE_FILE_NAME);
    for (int i = 0; i < nchain; i++) {
        const struct logdir_ckpt *ck = &ld->ckpts[chain[i]];
        if (add_file(&x, &cap, lh->dir, ck->name, true, SEG_LOGGER_CHECKPOINT, ck->seq)) goto nomem;
    }
    if (nchain) x.Es = newest.first_epoch;
    for (int i = 0; i < ld->nsegs; i++) {
        const struct logdir_seg *s = &ld->segs[i];
        if (s->host != (uint32_t)lh->o.host) {
            pod_warn("recovery: %s/%s belongs to host %" PRIu32 ", not to this host %d: ignored",
                     lh->dir, s->name, s->host, lh->o.host);
            continue;
        }
        if (add_file(&x, &cap, lh->dir, s->name, false, s->logger, s->seq)) goto nomem;
    }
    st->durable_epoch = x.D;
    st->checkpoint_epoch = x.Es;
    char chain_s[48] = "";
    if (nchain > 1) snprintf(chain_s, sizeof chain_s, " (a full one and %d deltas)", nchain - 1);
    pod_info("recovery: %s: %d segment%s%s%s, committed end: epoch %" PRIu64
             " (epochs >= %" PRIu64 " are discarded)%s", lh->dir, ld->nsegs,
             ld->nsegs == 1 ? "" : "s", nchain ? " and a checkpoint" : "", chain_s, x.D, x.D,
             nchain ? "" : "; no checkpoint");
    x.n = lh->o.db->opt.nworkers;
    x.lists = calloc((size_t)x.n * (size_t)x.n, sizeof *x.lists);
    x.out = calloc((size_t)x.n * POD_MAX_HOSTS, sizeof *x.out);
    if (!x.lists || !x.out) goto nomem;
    pthread_barrier_init(&x.bar, NULL, (unsigned)x.n);
    char msg[256];
    if (lh->o.db->hooks.run_workers(lh->o.db, lh->o.cpus, lh->o.ncpus, replay_body, &x, msg,
                                    sizeof msg)) {
        pthread_barrier_destroy(&x.bar);
        pod_err_set(err, "recovery: %s", msg);
        goto out;
    }
    pthread_barrier_destroy(&x.bar);
    if (x.failed) {
        pod_err_set(err, "recovery failed: %s", x.err.msg);
        goto out;
    }
    /* The committed end goes into the durable-epoch file before the cut:
     * cutting may take away the marks it was found from. */
    if (lh->logging && x.D > view.recorded && record_durable(lh, x.D, err)) goto out;
    /* Cut the logs back to committed history before anything new is written. */
    for (int i = 0; i < x.nfiles; i++) {
        struct rfile *f = &x.files[i];
        if (f->ckpt || !f->cut_off) continue;
        if (cut_file(lh, f, x.D, &st->salvaged_records, err)) goto out;
        st->truncated_files++;
    }
    /* Then the epoch the next life starts at: every epoch below it is
     * committed now (those from x.D on hold no record any more), and every
     * mark left in the logs is at or below it. */
    if (lh->logging && start > x.D && record_durable(lh, start, err)) goto out;
    for (uint32_t t = 0; t < lh->o.db->ntables; t++) {
        pod_table *tb = lh->o.db->tables[t];
        for (uint32_t p = 0; p < tb->nparts; p++) {
            bt_stats bs;
            if (bt_get_stats(&tb->parts[p].tree, &bs) == BT_OK) st->rows += bs.keys;
        }
    }
    lh->start_epoch = start > 1 ? start : 1;
    lh->ckpt_epoch = x.Es;
    if (nchain) __atomic_store_n(&lh->o.region->ctl->checkpoint_epoch[lh->o.host].v, x.Es,
                             __ATOMIC_RELEASE);
    st->seconds = (double)(pod_mono_ns() - x.t0) / 1e9;
    if (st->epoch_lo == UINT64_MAX) st->epoch_lo = st->epoch_hi = 0;
    pod_info("recovery: done in %.3f s: %" PRIu64 " files, %.1f MiB, %" PRIu64 " records read "
             "(%.0f records/s, %.1f MiB/s); %" PRIu64 " applied, %" PRIu64 " superseded, %" PRIu64
             " older than the checkpoint, %" PRIu64 " of uncommitted epochs discarded; committed "
             "epochs %" PRIu64 "..%" PRIu64 "; %" PRIu64 " rows; %" PRIu64 " torn and %" PRIu64 " corrupt tails",
             st->seconds, st->files, (double)st->bytes / 1048576.0, st->records_read,
             st->seconds > 0 ? (double)st->records_read / st->seconds : 0.0,
             st->seconds > 0 ? (double)x.bytes_read / 1048576.0 / st->seconds : 0.0,
             st->records_applied, st->records_older, st->records_before_checkpoint,
             st->records_discarded, st->epoch_lo, st->epoch_hi, st->rows, st->torn_tails,
             st->corrupt_tails);
    if (st->patches_lost)
        pod_warn("recovery: %" PRIu64 " logged updates could not be replayed: the version they "
                 "change was lost with a damaged segment (above); those rows keep the last value "
                 "recovered before the loss", st->patches_lost);
    if (lh->o.pod_mode)
        pod_info("recovery: %" PRIu64 " records sent to their owners, %" PRIu64 " received",
                 st->records_sent, st->records_received);
    rc = 0;
    goto out;
nomem:
    pod_err_set(err, "out of memory starting recovery");
out:
    route_end(x.route);
    if (x.lists)
        for (int i = 0; i < x.n * x.n; i++) logrec_list_free(&x.lists[i]);
    if (x.out)
        for (int i = 0; i < x.n * POD_MAX_HOSTS; i++) logrec_list_free(&x.out[i]);
    free(x.lists);
    free(x.out);
    free(x.files);
    free(chain);
    pthread_mutex_destroy(&x.err_lock);
    return rc;
}
