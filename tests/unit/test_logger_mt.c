/* Loggers, worker log buffers and epochs (src/log/logger.c, log.c, epoch.c;
 * docs/durability.md), also run under ThreadSanitizer:
 *  - round trip: two workers append while E advances every millisecond;
 *    every record arrives exactly once, every block holds one epoch, segments
 *    rotate, the logger knows the epochs of the segments it closed (those
 *    in their block headers), and once the workers are idle the durable
 *    epoch reaches E;
 *  - a logger never calls an epoch durable while a worker may still commit
 *    in it; the hand-over at the epoch boundary makes it durable; an idle
 *    worker holds nothing back;
 *  - transactions through the log layer: the state rebuilt from the log by
 *    recovery equals the state that was logged (values and epoch-versions),
 *    also with checkpoints asked for (log_host_request_checkpoint, full and
 *    delta in turn) while the transactions run;
 *  - a key deleted and inserted again within one epoch gets a larger
 *    epoch-version than its delete, so recovery keeps the insert;
 *  - the checkpointer's choice of full or delta (checkpoint_policy_delta):
 *    every other one full where every row changes, deltas while the data
 *    grows, full once the chain is twice the live data or 32 deltas long. */
#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helpers/log_fixture.h"
#include "log/durable_file.h"
#include "log/logdir.h"
#include "log/log_priv.h"
#include "log/logger.h"
#include "helpers/testutil.h"

static void nap_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Every record of every segment in dir, in file order, to fn. */
static void each_record(const char *dir, void (*fn)(void *, const struct log_record *,
                                                    const struct seg_block_info *),
                        void *arg, uint64_t *nsegs)
{
    struct logdir d;
    pod_err err;
    ck_assert_msg(logdir_scan(dir, &d, &err) == 0, "%s", err.msg);
    if (nsegs) *nsegs = (uint64_t)d.nsegs;
    for (int i = 0; i < d.nsegs; i++) {
        char p[POD_PATH_MAX + SEG_NAME_MAX + 2];
        snprintf(p, sizeof p, "%s/%s", dir, d.segs[i].name);
        struct seg_reader *r = seg_reader_open(p, &err);
        ck_assert_msg(r != NULL, "%s", err.msg);
        struct log_record rec;
        int rc;
        while ((rc = seg_reader_next(r, &rec, &err)) == 1) fn(arg, &rec, seg_reader_block(r));
        ck_assert_int_eq(rc, 0);
        ck_assert_int_eq(seg_reader_tail_status(r)->kind, SEG_TAIL_CLEAN);
        seg_reader_close(r);
    }
    logdir_free(&d);
}

/* ---- the logger alone ------------------------------------------------------------ */

#define RT_WORKERS 2
#define RT_RECORDS 20000

struct rt_worker {
    pthread_t th;
    struct log_worker *lw;
    uint64_t *E;
    int id;
};

static void *rt_main(void *arg)
{
    struct rt_worker *w = arg;
    unsigned char tuple[100];
    for (uint32_t i = 0; i < RT_RECORDS; i++) {
        uint64_t e = log_worker_commit_epoch(w->lw, w->E);
        unsigned char k[8];
        lf_key(k, (uint64_t)w->id << 32 | i);
        memset(tuple, (int)(i & 0xff), sizeof tuple);
        struct log_record rec = {.table_id = 1, .kind = LOG_PUT, .key_len = 8,
                                 .tuple_len = i % 5 ? sizeof tuple : 0, .key = k, .tuple = tuple,
                                 .epoch_version = log_ev_make((uint32_t)e, i)};
        log_worker_append(w->lw, &rec);
    }
    log_worker_idle(w->lw);
    return NULL;
}

struct rt_check {
    uint8_t *seen; /* [RT_WORKERS * RT_RECORDS] */
    uint64_t records, mixed_blocks;
};

static void rt_visit(void *arg, const struct log_record *r, const struct seg_block_info *b)
{
    struct rt_check *c = arg;
    uint64_t k = pod_key_get_u64(r->key);
    uint32_t w = (uint32_t)(k >> 32), i = (uint32_t)k;
    ck_assert_uint_lt(w, RT_WORKERS);
    ck_assert_uint_lt(i, RT_RECORDS);
    ck_assert_uint_eq(log_ev_version(r->epoch_version), i);
    ck_assert_uint_eq(r->tuple_len, i % 5 ? 100 : 0);
    if (r->tuple_len) ck_assert_uint_eq(((const unsigned char *)r->tuple)[99], i & 0xff);
    c->seen[w * RT_RECORDS + i]++;
    c->records++;
    if (b->epoch_lo != b->epoch_hi) c->mixed_blocks++;
}

/* The epochs the logger remembers of each segment it closed are those
 * read back from the file; a forgotten one is unknown. */
static void check_closed_epochs(struct logger *lg, const char *dir)
{
    struct logdir d;
    pod_err err;
    ck_assert_msg(logdir_scan(dir, &d, &err) == 0, "%s", err.msg);
    int closed = 0;
    for (int i = 0; i < d.nsegs; i++) {
        uint64_t lo, hi, flo, fhi;
        char p[POD_PATH_MAX + SEG_NAME_MAX + 2];
        snprintf(p, sizeof p, "%s/%s", dir, d.segs[i].name);
        /* Every segment below the open one was closed (the open one may be
         * closed too, until the next write opens another). */
        if (!logger_closed_epochs(lg, d.segs[i].seq, &lo, &hi)) {
            ck_assert_msg(d.segs[i].seq >= logger_open_seq(lg), "segment %s", p);
            continue;
        }
        ck_assert_msg(seg_peek_epochs(p, &flo, &fhi, &err) == 0, "%s", err.msg);
        ck_assert_uint_le(lo, hi);
        ck_assert_uint_eq(lo, flo);
        ck_assert_uint_eq(hi, fhi);
        closed++;
    }
    ck_assert_int_gt(closed, 0);
    uint64_t lo, hi;
    logger_forget_closed(lg, d.segs[0].seq);
    ck_assert(!logger_closed_epochs(lg, d.segs[0].seq, &lo, &hi));
    logdir_free(&d);
}

START_TEST(test_logger_round_trip)
{
    char dir[POD_PATH_MAX];
    lf_make_dir(dir, sizeof dir);
    uint64_t E = 5, durable = 0;
    struct log_worker *lw = aligned_alloc(64, RT_WORKERS * sizeof *lw);
    struct log_worker *arr[RT_WORKERS];
    for (int i = 0; i < RT_WORKERS; i++) {
        log_worker_init(&lw[i], NULL);
        arr[i] = &lw[i];
    }
    struct logger_options o = {.dir = dir, .host = 0, .id = 0, .first_seq = 0, .global_epoch = &E,
                               .durable_word = &durable, .workers = arr, .nworkers = RT_WORKERS,
                               .poll_ns = 200000, .segment_bytes = 256 << 10};
    pod_err err;
    struct logger *lg = logger_start(&o, &err);
    ck_assert_msg(lg != NULL, "%s", err.msg);
    ck_assert_uint_eq(__atomic_load_n(&durable, __ATOMIC_ACQUIRE), 5);
    struct rt_worker w[RT_WORKERS];
    for (int i = 0; i < RT_WORKERS; i++) {
        lw[i].lg = lg;
        w[i] = (struct rt_worker){.lw = &lw[i], .E = &E, .id = i};
        ck_assert_int_eq(pthread_create(&w[i].th, NULL, rt_main, &w[i]), 0);
    }
    uint64_t last_durable = 0;
    for (int t = 0; t < 200; t++) {
        __atomic_fetch_add(&E, 1, __ATOMIC_SEQ_CST);
        uint64_t d = __atomic_load_n(&durable, __ATOMIC_ACQUIRE);
        ck_assert_uint_ge(d, last_durable); /* never backwards */
        ck_assert_uint_le(d, __atomic_load_n(&E, __ATOMIC_ACQUIRE));
        last_durable = d;
        nap_us(1000);
    }
    for (int i = 0; i < RT_WORKERS; i++) pthread_join(w[i].th, NULL);
    /* every worker idle: the durable epoch catches up with E. The workers'
     * last records may be of the current epoch, which durable >= E does not
     * cover: close it first, so that durable >= E means all of them. */
    uint64_t e = __atomic_add_fetch(&E, 1, __ATOMIC_SEQ_CST);
    ck_assert_msg(tu_wait_u64(&durable, e, 5000), "durable %" PRIu64 ", E %" PRIu64,
                  __atomic_load_n(&durable, __ATOMIC_ACQUIRE), e);
    struct logger_stats st;
    logger_get_stats(lg, &st);
    ck_assert_uint_eq(st.records, RT_WORKERS * RT_RECORDS);
    ck_assert_uint_gt(st.syncs, 0);
    check_closed_epochs(lg, dir);
    logger_stop(lg);
    struct rt_check c = {calloc(RT_WORKERS * RT_RECORDS, 1), 0, 0};
    uint64_t nsegs;
    each_record(dir, rt_visit, &c, &nsegs);
    ck_assert_uint_eq(c.records, RT_WORKERS * RT_RECORDS);
    for (int i = 0; i < RT_WORKERS * RT_RECORDS; i++) ck_assert_uint_eq(c.seen[i], 1);
    ck_assert_uint_eq(c.mixed_blocks, 0);
    ck_assert_uint_gt(nsegs, 1); /* rotated */
    free(c.seen);
    for (int i = 0; i < RT_WORKERS; i++) log_worker_fini(&lw[i]);
    free(lw);
}
END_TEST

struct one_check {
    uint64_t epoch;
    int found;
};

static void find_epoch(void *arg, const struct log_record *r, const struct seg_block_info *b)
{
    (void)b;
    struct one_check *c = arg;
    if (log_ev_epoch(r->epoch_version) == c->epoch) c->found++;
}

START_TEST(test_durable_waits_for_the_epoch_boundary)
{
    char dir[POD_PATH_MAX];
    lf_make_dir(dir, sizeof dir);
    uint64_t E = 10, durable = 0;
    struct log_worker *lw = aligned_alloc(64, sizeof *lw);
    log_worker_init(lw, NULL);
    struct logger_options o = {.dir = dir, .global_epoch = &E, .durable_word = &durable,
                               .workers = &lw, .nworkers = 1, .poll_ns = 100000};
    pod_err err;
    struct logger *lg = logger_start(&o, &err);
    ck_assert_ptr_nonnull(lg);
    lw->lg = lg;
    /* A commit in epoch 10 ... */
    uint64_t e = log_worker_commit_epoch(lw, &E);
    ck_assert_uint_eq(e, 10);
    unsigned char k[8] = {1};
    struct log_record rec = {.table_id = 0, .kind = LOG_DELETE, .key_len = 8, .key = k,
                             .epoch_version = log_ev_make(10, 0)};
    log_worker_append(lw, &rec);
    /* ... while E moves on: the worker may still commit in 10, so 10 is not durable. */
    __atomic_store_n(&E, 12, __ATOMIC_SEQ_CST);
    nap_us(30000);
    ck_assert_uint_le(__atomic_load_n(&durable, __ATOMIC_ACQUIRE), 10);
    /* Its next commit sees the new epoch and hands the buffer over. */
    ck_assert_uint_eq(log_worker_commit_epoch(lw, &E), 12);
    ck_assert(tu_wait_u64(&durable, 12, 5000));
    struct one_check c = {10, 0};
    each_record(dir, find_epoch, &c, NULL);
    ck_assert_int_eq(c.found, 1); /* on disk before 12 was published */
    /* Idle: nothing held back any more. */
    log_worker_idle(lw);
    __atomic_store_n(&E, 20, __ATOMIC_SEQ_CST);
    ck_assert(tu_wait_u64(&durable, 20, 5000));
    logger_stop(lg);
    log_worker_fini(lw);
    free(lw);
}
END_TEST

/* ---- transactions through the log layer ----------------------------------------------- */

#define TX_KEYS 300
#define TX_CALLS 1500

struct tx_arg {
    struct lf *f;
};

static void tx_body(struct pod_worker *w, void *arg)
{
    struct lf *f = ((struct tx_arg *)arg)->f;
    pod_result *res = pod_result_new();
    char msg[256];
    for (int i = 0; i < TX_CALLS; i++) {
        int64_t key = (int64_t)w->id * 100000 + i % TX_KEYS;
        pod_value v[2] = {pod_v_i64(key), pod_v_i64(i)};
        int proc = i % 7 == 3   ? f->p_del
                   : i % 11 == 5 ? f->p_ins
                   : i % 5 == 1  ? f->p_tag
                                 : f->p_put;
        pod_args a = {proc == f->p_del ? 1 : 2, v};
        int rc = pod_call(w, proc, &a, res, msg, sizeof msg);
        ck_assert_msg(rc >= 0 || rc == POD_NOT_FOUND, "%s", msg);
    }
    pod_result_free(res);
}

/* Ask for a checkpoint and wait until it is written. */
static void checkpoint_now(struct log_host *lh, bool full)
{
    pod_err err;
    uint64_t done_at;
    struct log_host_stats st;
    ck_assert_msg(log_host_request_checkpoint(lh, full, &done_at, &err) == 0, "%s", err.msg);
    log_host_get_stats(lh, &st);
    ck_assert_uint_gt(done_at, st.checkpoints);
    for (int i = 0; i < 20000 && st.checkpoints < done_at; i++) {
        ck_assert_uint_eq(st.checkpoint_failures, 0);
        nap_us(1000);
        log_host_get_stats(lh, &st);
    }
    ck_assert_uint_ge(st.checkpoints, done_at);
    ck_assert_uint_eq(st.checkpoint_failures, 0);
    if (full) ck_assert(!st.last_checkpoint.delta); /* the one asked for, or a later one */
    ck_assert_uint_gt(st.last_checkpoint.bytes, 0);
}

#define REQUESTS 6

struct requester {
    pthread_t th;
    struct log_host *lh;
};

/* Checkpoints asked for while the workers run: full and delta in turn. */
static void *request_main(void *arg)
{
    struct requester *r = arg;
    for (int i = 0; i < REQUESTS; i++) checkpoint_now(r->lh, i % 2 == 0);
    return NULL;
}

/* Transactions through the log layer, then recovery into a fresh database:
 * the state rebuilt equals the state logged. With checkpoints, a thread
 * asks for checkpoints while the transactions run (sys.checkpoint's path;
 * none come from the log's growth) and for a last delta once they are done,
 * and recovery starts from the checkpoints. */
static void recover_logged_state(bool checkpoints)
{
    struct lf f;
    lf_open(&f, 1, 0, 2, 2, 1, false, NULL, NULL);
    struct log_host_options o = lf_log_options(&f, false);
    if (checkpoints) o.checkpoint_after = UINT64_C(1) << 40;
    pod_err err;
    struct log_host *lh = log_host_open(&o, &err);
    ck_assert_msg(lh != NULL, "%s", err.msg);
    ck_assert_int_eq(log_host_recover(lh, NULL, &err), 0);
    ck_assert_msg(log_host_start(lh, NULL, NULL, &err) == 0, "%s", err.msg);
    uint64_t done_at;
    if (!checkpoints) {
        ck_assert_int_eq(log_host_request_checkpoint(lh, false, &done_at, &err), -1);
        ck_assert_msg(strstr(err.msg, "checkpoint_after: 0") != NULL, "%s", err.msg);
    }
    struct requester rq = {.lh = lh};
    if (checkpoints) ck_assert_int_eq(pthread_create(&rq.th, NULL, request_main, &rq), 0);
    struct tx_arg ta = {&f};
    char msg[256];
    ck_assert_int_eq(pod_workers_start(f.db, NULL, 0, tx_body, &ta, msg, sizeof msg), 0);
    pod_workers_join(f.db);
    struct log_host_stats cst = {0};
    if (checkpoints) {
        pthread_join(rq.th, NULL);
        checkpoint_now(lh, false);
        log_host_get_stats(lh, &cst);
        ck_assert_uint_eq(cst.checkpoints, REQUESTS + 1);
        ck_assert(!cst.checkpoint_running);
    }
    /* Everything durable before the layer stops (a clean shutdown). */
    uint64_t e = log_host_epoch(lh);
    for (int i = 0; i < 5000 && log_host_persisted(lh) <= e; i++) nap_us(1000);
    ck_assert_uint_gt(log_host_persisted(lh), e);
    log_host_free(lh);
    /* The state as logged ... */
    enum { N = 2 * TX_KEYS };
    int64_t val[N];
    struct lf_tuple tup[N];
    uint64_t ev[N];
    int present = 0;
    for (int i = 0; i < N; i++) {
        uint64_t key = (uint64_t)(i / TX_KEYS) * 100000 + (uint64_t)(i % TX_KEYS);
        struct pod_row *r = lf_row(&f, key);
        val[i] = lf_value(&f, key);
        ev[i] = r && row_valid(r) ? r->epoch_version : 0;
        if (ev[i]) memcpy(&tup[i], r->tuple, sizeof tup[i]);
        present += val[i] != INT64_MIN;
    }
    ck_assert_int_gt(present, 0);
    ck_assert_int_lt(present, N); /* some keys end deleted */
    /* The last checkpoint saw the final state: every row written, or (a
     * delta) left out as in the chain before it. */
    if (checkpoints)
        ck_assert_uint_eq(cst.last_checkpoint.rows + cst.last_checkpoint.unchanged,
                          (uint64_t)present);
    char dir[POD_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", f.dir);
    lf_close(&f);
    /* ... is what recovery rebuilds. */
    lf_open(&f, 1, 0, 1, 2, 1, false, NULL, dir);
    o = lf_log_options(&f, false);
    ck_assert_ptr_nonnull(lh = log_host_open(&o, &err));
    struct log_recovery_stats st;
    ck_assert_msg(log_host_recover(lh, &st, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(st.records_discarded, 0);
    ck_assert_uint_eq(st.rows, (uint64_t)present);
    if (checkpoints) ck_assert_uint_gt(st.checkpoint_epoch, 0);
    else ck_assert_uint_eq(st.checkpoint_epoch, 0);
    for (int i = 0; i < N; i++) {
        uint64_t key = (uint64_t)(i / TX_KEYS) * 100000 + (uint64_t)(i % TX_KEYS);
        ck_assert_msg(lf_value(&f, key) == val[i], "key %" PRIu64 ": %" PRId64 " != %" PRId64, key,
                      lf_value(&f, key), val[i]);
        if (!ev[i]) continue;
        ck_assert_uint_eq(lf_row(&f, key)->epoch_version, ev[i]);
        const struct lf_tuple *got = (const void *)lf_row(&f, key)->tuple;
        ck_assert_msg(got->serial == tup[i].serial, "key %" PRIu64 ": serial %#" PRIx64 " != %#" PRIx64,
                      key, (uint64_t)got->serial, (uint64_t)tup[i].serial);
    }
    log_host_free(lh);
    lf_close(&f);
}

START_TEST(test_recovered_state_equals_logged_state)
{
    recover_logged_state(false);
}
END_TEST

START_TEST(test_requested_checkpoints)
{
    recover_logged_state(true);
}
END_TEST

struct key_trail {
    uint64_t key;
    uint64_t ev[8];
    uint8_t kind[8];
    int n;
};

static void trail(void *arg, const struct log_record *r, const struct seg_block_info *b)
{
    (void)b;
    struct key_trail *t = arg;
    if (pod_key_get_u64(r->key) == t->key && t->n < 8) {
        t->ev[t->n] = r->epoch_version;
        t->kind[t->n++] = r->kind;
    }
}

START_TEST(test_delete_and_insert_in_one_epoch)
{
    struct lf f;
    lf_open(&f, 1, 0, 1, 1, 10000, false, NULL, NULL); /* E stays put for 10 s */
    struct log_host_options o = lf_log_options(&f, false);
    pod_err err;
    struct log_host *lh = log_host_open(&o, &err);
    ck_assert_ptr_nonnull(lh);
    ck_assert_int_eq(log_host_recover(lh, NULL, &err), 0);
    ck_assert_int_eq(log_host_start(lh, NULL, NULL, &err), 0);
    uint64_t e0 = log_host_epoch(lh);
    ck_assert_int_eq(lf_call(&f, f.p_put, 7, 1), POD_OK);
    ck_assert_int_eq(lf_call(&f, f.p_put, 7, 2), POD_OK);
    ck_assert_int_eq(lf_call(&f, f.p_del, 7, 0), POD_OK);
    ck_assert_int_eq(lf_call(&f, f.p_ins, 7, 3), POD_OK);
    ck_assert_uint_eq(log_host_epoch(lh), e0); /* all in one epoch */
    log_host_free(lh);
    struct key_trail t = {.key = 7};
    each_record(f.dir, trail, &t, NULL);
    ck_assert_int_eq(t.n, 4);
    ck_assert_int_eq(t.kind[2], LOG_DELETE);
    for (int i = 1; i < 4; i++)
        ck_assert_msg(t.ev[i] > t.ev[i - 1], "record %d of key 7: ev %" PRIx64 " after %" PRIx64,
                      i, t.ev[i], t.ev[i - 1]);
    char dir[POD_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", f.dir);
    lf_close(&f);
    lf_open(&f, 1, 0, 1, 1, 10, false, NULL, dir);
    o = lf_log_options(&f, false);
    ck_assert_ptr_nonnull(lh = log_host_open(&o, &err));
    ck_assert_int_eq(log_host_recover(lh, NULL, &err), 0);
    ck_assert_int_eq(lf_value(&f, 7), 3);
    log_host_free(lh);
    lf_close(&f);
}
END_TEST

/* A run of checkpoints under the policy: live[i] is the live data at the
 * i-th checkpoint, changed[i] what changed since the one before (what a
 * delta writes); kinds gets 'F' or 'D' for each. The first one is full. */
static void policy_run(int n, const uint64_t *live, const uint64_t *changed, char *kinds)
{
    uint64_t base = 0, chain = 0, last = 0, ndeltas = 0, live_est = 0;
    for (int i = 0; i < n; i++) {
        bool delta = i > 0 && checkpoint_policy_delta(base, chain, last, live_est, ndeltas);
        kinds[i] = delta ? 'D' : 'F';
        if (delta) {
            chain += changed[i];
            last = changed[i];
            ndeltas++;
        } else {
            base = live[i];
            chain = last = ndeltas = 0;
        }
        live_est = live[i];
    }
    kinds[n] = 0;
}

START_TEST(test_checkpoint_policy)
{
    enum { N = 40 };
    uint64_t live[N], changed[N];
    char kinds[N + 1];
    /* Every row changes between checkpoints (YCSB): full, delta in turn. */
    for (int i = 0; i < N; i++) live[i] = changed[i] = 1000;
    policy_run(6, live, changed, kinds);
    ck_assert_str_eq(kinds, "FDFDFD");
    /* The data doubles between checkpoints, most of the change new rows
     * (TPC-C): deltas, until a chain of 32. */
    for (int i = 0; i < N; i++) {
        live[i] = (uint64_t)1000 << i;
        /* the new half, and a quarter of the old rows changed */
        changed[i] = i ? live[i] - live[i - 1] + live[i - 1] / 4 : live[i];
    }
    policy_run(35, live, changed, kinds);
    ck_assert_str_eq(kinds, "FDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDFD");
    /* Fixed data, 40% of it changing between checkpoints: the chain
     * reaches twice the data after two deltas. */
    for (int i = 0; i < N; i++) live[i] = 1000, changed[i] = 400;
    policy_run(7, live, changed, kinds);
    ck_assert_str_eq(kinds, "FDDFDDF");
    /* The data shrinks to a tenth: full again once a scan has seen it (the
     * chain would be mostly stale). */
    uint64_t shrink[3] = {1000, 100, 100}, ch[3] = {1000, 50, 50};
    policy_run(3, shrink, ch, kinds);
    ck_assert_str_eq(kinds, "FDF");
}
END_TEST

static Suite *logger_suite(void)
{
    Suite *s = suite_create("logger");
    TCase *tc = tu_tcase(s, "logger", 120);
    tcase_add_test(tc, test_logger_round_trip);
    tcase_add_test(tc, test_durable_waits_for_the_epoch_boundary);
    tcase_add_test(tc, test_recovered_state_equals_logged_state);
    tcase_add_test(tc, test_requested_checkpoints);
    tcase_add_test(tc, test_delete_and_insert_in_one_epoch);
    tcase_add_test(tc, test_checkpoint_policy);
    return s;
}

int main(void)
{
    return tu_run(logger_suite());
}
