/* Recovery (src/log/recovery.c, route.c, durable_file.c; docs/durability.md)
 * from log directories written record by record:
 *  - records of epochs at or above the recorded durable epoch are discarded,
 *    and the segment is cut back (committed records after the cut are moved
 *    to a new segment), so a second recovery finds the same state;
 *  - the highest epoch-version wins, whatever the file and order; a delete
 *    beats an older put met later; a key deleted and inserted again lives;
 *  - a torn tail and a corrupt record end that file's history at the last
 *    good block, with a warning, keeping everything before it;
 *  - a checkpoint is loaded and log records older than its start epoch are
 *    skipped;
 *  - the durable-epoch record: a torn slot falls back to the other, two bad
 *    slots are refused, no record means nothing was committed;
 *  - the loggers' marks: with every logger's, history ends at the smallest
 *    when the record lags; the record is brought up to it before the cut and
 *    to the largest mark after it (where the next life starts); a logger
 *    without a mark leaves the record alone (log_durable_combine for pods);
 *  - a log naming a table the server does not have is refused;
 *  - pod mode (two processes on one region, simulated non-coherent SWcc): the
 *    hosts agree on the larger durable epoch and each record is replayed by
 *    the owner of its partition; a host without history does not wait for the
 *    others, and a host with history that comes after it refuses to start;
 *    one host's log torn while the other's is intact: history ends at the
 *    pod-wide durable epoch on both, nothing below it is lost. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/log_fixture.h"
#include "log/durable_file.h"
#include "log/logdir.h"
#include "log/route.h"
#include "helpers/testutil.h"

struct rec {
    uint64_t key;
    uint8_t kind;     /* LOG_PUT / LOG_DELETE / LOG_PATCH */
    uint32_t epoch, version;
    int64_t value;    /* a PATCH sets the tuple's value field (its first 8 bytes) */
    bool new_block;   /* start a new block before this record */
    uint32_t base_epoch, base_version; /* a PATCH's base version */
};

#define PUT(k, e, v, val) {k, LOG_PUT, e, v, val, false, 0, 0}
#define DEL(k, e, v) {k, LOG_DELETE, e, v, 0, false, 0, 0}
#define PUTB(k, e, v, val) {k, LOG_PUT, e, v, val, true, 0, 0}
#define DELB(k, e, v) {k, LOG_DELETE, e, v, 0, true, 0, 0}
#define PATCH(k, e, v, be, bv, val) {k, LOG_PATCH, e, v, val, false, be, bv}
/* A mark: every record of epochs below `through` is before it (one of n loggers). */
#define MARK(through, n) {through, 0, n, 0, 0, false, 0, 0}

static void write_records(struct seg_writer *w, const struct rec *r, int n)
{
    pod_err err;
    for (int i = 0; i < n; i++) {
        if (r[i].kind == 0) {
            ck_assert_int_eq(seg_writer_write_mark(w, r[i].key, r[i].epoch, 0, &err), 0);
            continue;
        }
        if (r[i].new_block) ck_assert_int_eq(seg_writer_flush_block(w, &err), 0);
        unsigned char k[8];
        lf_key(k, r[i].key);
        struct lf_tuple tu = {r[i].value, (int64_t)r[i].key};
        unsigned char patch[LOG_PATCH_HEADER + 8];
        log_patch_put_header(patch, log_ev_make(r[i].base_epoch, r[i].base_version), 0);
        memcpy(patch + LOG_PATCH_HEADER, &r[i].value, 8);
        struct log_record lr = {.table_id = 0, .kind = r[i].kind, .key_len = 8,
                                .tuple_len = r[i].kind == LOG_PUT     ? LF_TUPLE
                                             : r[i].kind == LOG_PATCH ? sizeof patch
                                                                      : 0,
                                .epoch_version = log_ev_make(r[i].epoch, r[i].version),
                                .key = k,
                                .tuple = r[i].kind == LOG_PATCH ? (const void *)patch : &tu};
        ck_assert_msg(seg_writer_append(w, &lr, &err) == 0, "%s", err.msg);
    }
}

static void write_seg(const char *dir, uint32_t logger, uint64_t seq, const struct rec *r, int n)
{
    pod_err err;
    struct seg_writer *w = seg_writer_open(dir, 0, logger, seq, 1, &err);
    ck_assert_msg(w != NULL, "%s", err.msg);
    write_records(w, r, n);
    ck_assert_int_eq(seg_writer_close(w, &err), 0);
}

/* A checkpoint file ckpt-0-<seq>.log (.tmp: unfinished) with start epoch es;
 * a delta since epoch `since` when that is not 0. */
static void write_ckpt_since(const char *dir, uint64_t seq, bool tmp, uint64_t es,
                             uint64_t since, const struct rec *r, int n)
{
    pod_err err;
    char name[SEG_NAME_MAX];
    seg_format_ckpt_name(name, sizeof name, 0, seq, tmp);
    struct seg_header h = {.host = 0, .logger = SEG_LOGGER_CHECKPOINT, .seq = seq,
                           .first_epoch = es, .ckpt_flags = since ? SEG_CKPT_DELTA : 0,
                           .since_epoch = since};
    struct seg_writer *w = seg_writer_open_named(dir, name, &h, &err);
    ck_assert_msg(w != NULL, "%s", err.msg);
    write_records(w, r, n);
    ck_assert_int_eq(seg_writer_close(w, &err), 0);
}

static void write_ckpt(const char *dir, uint64_t seq, bool tmp, uint64_t es, const struct rec *r,
                       int n)
{
    write_ckpt_since(dir, seq, tmp, es, 0, r, n);
}

static void write_durable(const char *dir, uint64_t epoch)
{
    pod_err err;
    struct durable_file *f = durable_file_open(dir, 0, 0, &err);
    ck_assert_msg(f != NULL, "%s", err.msg);
    ck_assert_int_eq(durable_file_write(f, epoch, &err), 0);
    durable_file_close(f);
}

static uint64_t file_size(const char *dir, const char *name)
{
    char p[POD_PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat sb;
    return stat(p, &sb) == 0 ? (uint64_t)sb.st_size : UINT64_MAX;
}

/* Open a db on dir and recover; returns 0 or -1 (err filled). */
static int recover(struct lf *f, const char *dir, int workers, struct log_recovery_stats *st,
                   pod_err *err, struct log_host **keep)
{
    lf_open(f, 1, 0, workers, 1, 10, false, NULL, dir);
    struct log_host_options o = lf_log_options(f, false);
    struct log_host *lh = log_host_open(&o, err);
    if (!lh) return -1;
    int rc = log_host_recover(lh, st, err);
    if (keep && rc == 0) *keep = lh;
    else log_host_free(lh);
    return rc;
}

/* ---- committed history only ---------------------------------------------------------- */

START_TEST(test_uncommitted_discarded_and_cut)
{
    char dir[POD_PATH_MAX];
    lf_make_dir(dir, sizeof dir);
    const struct rec r[] = {
        PUT(1, 5, 0, 11), PUTB(2, 9, 3, 22),  /* committed */
        PUTB(3, 10, 0, 33), PUT(1, 12, 0, 99), /* a block of uncommitted epochs */
        PUTB(4, 8, 0, 44),                     /* committed, after the cut */
    };
    write_seg(dir, 0, 0, r, 5);
    write_durable(dir, 10);
    uint64_t before = file_size(dir, "seg-0-0-0000000000.log");
    struct lf f;
    struct log_recovery_stats st;
    pod_err err;
    ck_assert_msg(recover(&f, dir, 1, &st, &err, NULL) == 0, "%s", err.msg);
    ck_assert(st.ran);
    ck_assert_uint_eq(st.durable_epoch, 10);
    lf_expect(&f, {1, 11}, {2, 22}, {3, LF_ABSENT}, {4, 44});
    ck_assert_uint_eq(lf_row(&f, 2)->epoch_version, log_ev_make(9, 3));
    ck_assert_uint_eq(st.records_discarded, 2);
    ck_assert_uint_eq(st.truncated_files, 1);
    ck_assert_uint_eq(st.salvaged_records, 1);
    ck_assert_uint_lt(file_size(dir, "seg-0-0-0000000000.log"), before);
    ck_assert_uint_ne(file_size(dir, "seg-0-0-0000000001.log"), UINT64_MAX);
    lf_close(&f);
    /* Recovering again finds the same state and nothing more to discard. */
    ck_assert_msg(recover(&f, dir, 2, &st, &err, NULL) == 0, "%s", err.msg);
    ck_assert_uint_eq(st.records_discarded, 0);
    ck_assert_uint_eq(st.truncated_files, 0);
    lf_expect(&f, {1, 11}, {3, LF_ABSENT}, {4, 44});
    lf_close(&f);
}
END_TEST

START_TEST(test_new_life_starts_at_durable_epoch)
{
    char dir[POD_PATH_MAX];
    lf_make_dir(dir, sizeof dir);
    const struct rec r[] = {PUT(1, 40, 0, 1)};
    write_seg(dir, 0, 0, r, 1);
    write_durable(dir, 41);
    struct lf f;
    struct log_recovery_stats st;
    pod_err err;
    struct log_host *lh = NULL;
    ck_assert_msg(recover(&f, dir, 1, &st, &err, &lh) == 0, "%s", err.msg);
    ck_assert_int_eq(log_host_start(lh, NULL, NULL, &err), 0);
    ck_assert_uint_ge(log_host_epoch(lh), 41);
    /* A new write of the key gets a larger epoch-version than the recovered one. */
    ck_assert_int_eq(lf_call(&f, f.p_put, 1, 2), POD_OK);
    ck_assert_uint_gt(lf_row(&f, 1)->epoch_version, log_ev_make(40, 0));
    log_host_free(lh);
    lf_close(&f);
}
END_TEST

START_TEST(test_no_durable_record_discards_everything)
{
    char dir[POD_PATH_MAX];
    lf_make_dir(dir, sizeof dir);
    const struct rec r[] = {PUT(1, 5, 0, 11), PUTB(2, 6, 0, 22)};
    write_seg(dir, 0, 0, r, 2);
    struct lf f;
    struct log_recovery_stats st;
    pod_err err;
    ck_assert_msg(recover(&f, dir, 1, &st, &err, NULL) == 0, "%s", err.msg);
    ck_assert_uint_eq(st.records_discarded, 2);
    lf_expect(&f, {1, LF_ABSENT});
    ck_assert_uint_eq(file_size(dir, "seg-0-0-0000000000.log"), SEG_HEADER_SIZE);
    lf_close(&f);
}
END_TEST

/* ---- marks: the committed end from the logs themselves ------------------------------ */

START_TEST(test_durable_combine)
{
    uint64_t end, start;
    /* One host: the larger of record and marks; the next life starts above
     * every mark. */
    struct log_durable_view one = {.recorded = 6, .marked = 10, .marked_max = 11};
    log_durable_combine(&one, 1, &end, &start);
    ck_assert_uint_eq(end, 10);
    ck_assert_uint_eq(start, 11);
    one = (struct log_durable_view){.recorded = 12, .marked = 10, .marked_max = 11};
    log_durable_combine(&one, 1, &end, &start);
    ck_assert_uint_eq(end, 12);
    ck_assert_uint_eq(start, 12);
    /* A pod: marks count only as far as every host's go; records the largest. */
    struct log_durable_view pod[3] = {{.recorded = 5, .marked = 20, .marked_max = 22},
                                      {.recorded = 8, .marked = 15, .marked_max = 30},
                                      {.recorded = 3, .marked = 18, .marked_max = 18}};
    log_durable_combine(pod, 3, &end, &start);
    ck_assert_uint_eq(end, 15);
    ck_assert_uint_eq(start, 30);
    pod[1].marked = 0; /* a host whose loggers did not all mark */
    log_durable_combine(pod, 3, &end, &start);
    ck_assert_uint_eq(end, 8);
    ck_assert_uint_eq(start, 30);
    struct log_durable_view none = {0};
    log_durable_combine(&none, 1, &end, &start);
    ck_assert_uint_eq(end, 0);
    ck_assert_uint_eq(start, 0);
}
END_TEST

/* Two loggers whose marks run ahead of a lagging durable-epoch record: the
 * history ends at the smaller of their last marks; the record is brought up
 * to it before the cut and to the larger after it, where the next life
 * starts, so a second recovery finds the same state though the cut took
 * logger 0's last mark away. */
START_TEST(test_marks_end_history)
{
    char dir[POD_PATH_MAX];
    lf_make_dir(dir, sizeof dir);
    const struct rec l0[] = {PUT(1, 5, 0, 11), PUT(2, 9, 0, 22), MARK(10, 2),
                             PUTB(3, 10, 0, 33), PUT(4, 12, 0, 44), MARK(13, 2)};
    const struct rec l1[] = {PUT(5, 7, 0, 55), MARK(11, 2), PUTB(6, 11, 0, 66)};
    write_seg(dir, 0, 0, l0, 6);
    write_seg(dir, 1, 0, l1, 3);
    write_durable(dir, 6);
    /* Logger 0 marked up to 13, logger 1 up to 11: epochs below 11 are
     * committed, though the record says 6. */
    struct lf f;
    struct log_recovery_stats st;
    pod_err err;
    struct log_host *lh = NULL;
    ck_assert_msg(recover(&f, dir, 1, &st, &err, &lh) == 0, "%s", err.msg);
    ck_assert_uint_eq(st.durable_epoch, 11);
    lf_expect(&f, {1, 11},
                  {2, 22},         /* epochs 9 and 10: above the record, below the marks */
                  {3, 33},
                  {5, 55},
                  {4, LF_ABSENT},
                  {6, LF_ABSENT});
    ck_assert_uint_eq(st.records_discarded, 2);
    ck_assert_uint_eq(st.truncated_files, 2);
    struct durable_record dr;
    ck_assert_int_eq(durable_file_read(dir, &dr, &err), 0);
    ck_assert_uint_eq(dr.epoch, 13); /* the next life starts above every mark */
    ck_assert_int_eq(log_host_start(lh, NULL, NULL, &err), 0);
    ck_assert_uint_ge(log_host_epoch(lh), 13);
    log_host_free(lh);
    lf_close(&f);
    /* Again: the same state (the marks the cut left are below the record). */
    ck_assert_msg(recover(&f, dir, 2, &st, &err, NULL) == 0, "%s", err.msg);
    ck_assert_uint_ge(st.durable_epoch, 13); /* the new life's clean stop may have raised it */
    ck_assert_uint_eq(st.records_discarded, 0);
    lf_expect(&f, {2, 22},
                  {3, 33},         /* from the copy the cut made */
                  {4, LF_ABSENT},
                  {6, LF_ABSENT});
    lf_close(&f);
}
END_TEST

/* Marks count only when every logger the marks name has one. */
START_TEST(test_marks_need_every_logger)
{
    char dir[POD_PATH_MAX];
    lf_make_dir(dir, sizeof dir);
    const struct rec l0[] = {PUT(1, 5, 0, 11), PUT(2, 9, 0, 22), MARK(10, 2)};
    write_seg(dir, 0, 0, l0, 3);
    write_durable(dir, 6);
    struct lf f;
    struct log_recovery_stats st;
    pod_err err;
    ck_assert_msg(recover(&f, dir, 1, &st, &err, NULL) == 0, "%s", err.msg);
    ck_assert_uint_eq(st.durable_epoch, 6);
    lf_expect(&f, {1, 11}, {2, LF_ABSENT});
    lf_close(&f);
}
END_TEST

/* ---- highest epoch-version wins ---------------------------------------------------- */

START_TEST(test_highest_ev_wins)
{
    char dir[POD_PATH_MAX];
    lf_make_dir(dir, sizeof dir);
    const struct rec l0[] = {
        PUT(1, 5, 1, 100),  /* newer than logger 1's */
        DEL(2, 6, 0),       /* newer than logger 1's put */
        PUTB(5, 3, 0, 1), DEL(5, 4, 0), PUT(5, 4, 1, 555), /* deleted, inserted again */
    };
    const struct rec l0b[] = {PUT(3, 6, 0, 333)}; /* older than logger 1's delete */
    const struct rec l1[] = {
        PUT(1, 5, 0, 200), PUT(2, 5, 0, 222), DEL(3, 7, 0), PUT(4, 2, 0, 444), PUT(4, 2, 7, 447),
        PUT(4, 2, 3, 443),
    };
    write_seg(dir, 0, 0, l0, 5);
    write_seg(dir, 0, 1, l0b, 1);
    write_seg(dir, 1, 0, l1, 6);
    write_durable(dir, 100);
    struct lf f;
    struct log_recovery_stats st;
    pod_err err;
    ck_assert_msg(recover(&f, dir, 2, &st, &err, NULL) == 0, "%s", err.msg);
    lf_expect(&f, {1, 100}, {2, LF_ABSENT});
    ck_assert_ptr_null(lf_row(&f, 2)); /* tombstones are removed from the index */
    lf_expect(&f, {3, LF_ABSENT}, {4, 447}, {5, 555});
    ck_assert_uint_eq(st.records_read, 12);
    ck_assert_uint_eq(st.tombstones_removed, 2);
    lf_close(&f);
}
END_TEST

/* ---- updates logged as patches ------------------------------------------------------ */

/* A patch goes onto the version it was made from, whatever order the
 * loggers' files hold the chain in; a whole value or a delete newer than a
 * patch wins over it; a patch whose base is missing is counted, not applied. */
START_TEST(test_patches_replay_along_their_chain)
{
    char dir[POD_PATH_MAX];
    lf_make_dir(dir, sizeof dir);
    const struct rec l0[] = {
        PATCH(1, 6, 0, 5, 1, 12),           /* the end of key 1's chain */
        PUT(2, 5, 0, 20), PATCH(2, 5, 1, 5, 0, 21),
        PATCH(3, 6, 0, 5, 0, 31),
        PUT(4, 5, 0, 40), PATCH(4, 6, 1, 6, 0, 41), /* 6.0 of key 4 was never logged */
        PATCH(5, 12, 0, 9, 0, 51),           /* uncommitted (D = 10): discarded */
    };
    const struct rec l1[] = {
        PUT(1, 5, 0, 10),
        PUT(2, 7, 0, 30),                    /* newer than key 2's patch */
        PUT(3, 5, 0, 30), DEL(3, 7, 0),      /* deleted after its patch */
        PUT(5, 9, 0, 50),
    };
    const struct rec l2[] = {PATCH(1, 5, 1, 5, 0, 11), PATCH(6, 5, 0, 4, 0, 60)}; /* 6: no row */
    write_seg(dir, 0, 0, l0, (int)(sizeof l0 / sizeof *l0));
    write_seg(dir, 1, 0, l1, (int)(sizeof l1 / sizeof *l1));
    write_seg(dir, 2, 0, l2, (int)(sizeof l2 / sizeof *l2));
    write_durable(dir, 10);
    for (int workers = 1; workers <= 2; workers++) {
        struct lf f;
        struct log_recovery_stats st;
        pod_err err;
        ck_assert_msg(recover(&f, dir, workers, &st, &err, NULL) == 0, "%s", err.msg);
        lf_expect(&f, {1, 12});
        ck_assert_uint_eq(lf_row(&f, 1)->epoch_version, log_ev_make(6, 0));
        lf_expect(&f, {2, 30},
                      {3, LF_ABSENT},
                      {4, 40},         /* kept at the last version it had */
                      {5, 50},
                      {6, LF_ABSENT});
        /* The rest of the tuple (the serial field) is the whole value's. */
        ck_assert_int_eq(((const struct lf_tuple *)lf_row(&f, 1)->tuple)->serial, 1);
        ck_assert_uint_eq(st.patches_lost, 2); /* key 4's and key 6's */
        ck_assert_uint_eq(st.records_discarded, (workers == 1 ? 1u : 0u)); /* then cut off */
        lf_close(&f);
    }
}
END_TEST

/* A patch after a checkpoint goes onto the checkpoint's value; one older
 * than the checkpoint is skipped like any record the checkpoint reflects. */
START_TEST(test_patch_onto_checkpoint)
{
    char dir[POD_PATH_MAX];
    lf_make_dir(dir, sizeof dir);
    pod_err err;
    const struct rec ck[] = {PUT(1, 19, 2, 100)};
    write_ckpt(dir, 1, false, 20, ck, 1);
    const struct rec r[] = {
        PATCH(1, 19, 2, 19, 1, 99),  /* reflected by the checkpoint */
        PATCH(1, 21, 0, 19, 2, 101),
        PATCH(1, 21, 1, 21, 0, 102),
    };
    write_seg(dir, 0, 0, r, 3);
    write_durable(dir, 30);
    struct lf f;
    struct log_recovery_stats st;
    ck_assert_msg(recover(&f, dir, 2, &st, &err, NULL) == 0, "%s", err.msg);
    lf_expect(&f, {1, 102});
    ck_assert_uint_eq(st.records_before_checkpoint, 1);
    ck_assert_uint_eq(st.patches_lost, 0);
    lf_close(&f);
}
END_TEST

/* ---- damaged tails ----------------------------------------------------------------- */

static void seg_path(char *out, size_t len, const char *dir, uint32_t logger, uint64_t seq)
{
    char name[SEG_NAME_MAX];
    seg_format_name(name, sizeof name, 0, logger, seq);
    snprintf(out, len, "%s/%s", dir, name);
}

START_TEST(test_torn_tail_keeps_what_is_before)
{
    char dir[POD_PATH_MAX], path[POD_PATH_MAX + 64];
    lf_make_dir(dir, sizeof dir);
    const struct rec r[] = {PUT(1, 5, 0, 1), PUTB(2, 6, 0, 2), PUTB(3, 7, 0, 3)};
    write_seg(dir, 0, 0, r, 3);
    seg_path(path, sizeof path, dir, 0, 0);
    uint64_t size = file_size(dir, "seg-0-0-0000000000.log");
    ck_assert_int_eq(truncate(path, (off_t)(size - 10)), 0); /* the last block cut short */
    write_durable(dir, 100);
    struct lf f;
    struct log_recovery_stats st;
    pod_err err;
    ck_assert_msg(recover(&f, dir, 1, &st, &err, NULL) == 0, "%s", err.msg);
    ck_assert_uint_eq(st.torn_tails, 1);
    ck_assert_uint_eq(st.corrupt_tails, 0);
    lf_expect(&f, {1, 1}, {2, 2}, {3, LF_ABSENT});
    lf_close(&f);
}
END_TEST

START_TEST(test_corrupt_record_ends_that_file)
{
    char dir[POD_PATH_MAX], path[POD_PATH_MAX + 64];
    lf_make_dir(dir, sizeof dir);
    const struct rec r[] = {PUT(1, 5, 0, 1), PUTB(2, 6, 0, 2), PUTB(3, 7, 0, 3)};
    write_seg(dir, 0, 0, r, 3);
    const struct rec later[] = {PUT(4, 8, 0, 4)};
    write_seg(dir, 0, 1, later, 1);
    /* Flip a byte of block 2's record (its tuple), leaving the file's length. */
    seg_path(path, sizeof path, dir, 0, 0);
    uint64_t logrec_size = seg_record_size(8, LF_TUPLE);
    uint64_t block = SEG_BLOCK_HEADER_SIZE + logrec_size;
    uint64_t off = SEG_HEADER_SIZE + block + SEG_BLOCK_HEADER_SIZE + 30;
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    unsigned char b;
    ck_assert_int_eq(pread(fd, &b, 1, (off_t)off), 1);
    b ^= 0x40;
    ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)off), 1);
    close(fd);
    write_durable(dir, 100);
    struct lf f;
    struct log_recovery_stats st;
    pod_err err;
    ck_assert_msg(recover(&f, dir, 1, &st, &err, NULL) == 0, "%s", err.msg);
    ck_assert_uint_eq(st.corrupt_tails, 1);
    lf_expect(&f, {1, 1},          /* before the damage: kept */
                  {2, LF_ABSENT},  /* the damaged block */
                  {3, LF_ABSENT},  /* after it in that file */
                  {4, 4});         /* other files are read */
    lf_close(&f);
}
END_TEST

/* ---- checkpoints --------------------------------------------------------------------- */

START_TEST(test_checkpoint_and_log_tail)
{
    char dir[POD_PATH_MAX];
    lf_make_dir(dir, sizeof dir);
    pod_err err;
    const struct rec ck[] = {PUT(1, 15, 0, 1), PUT(2, 18, 0, 2)};
    write_ckpt(dir, 3, false, 20, ck, 2);
    const struct rec r[] = {
        PUT(1, 10, 0, -1),  /* older than the checkpoint start: skipped */
        PUT(3, 19, 0, -3),  /* idem (the checkpoint reflects epochs below 20) */
        PUTB(1, 25, 0, 11), /* after: applied */
        PUT(4, 21, 0, 44),
    };
    write_seg(dir, 0, 0, r, 4);
    write_durable(dir, 30);
    /* an unfinished checkpoint is ignored */
    const struct rec junk[] = {PUT(9, 22, 0, 9)};
    write_ckpt(dir, 4, true, 20, junk, 1);
    struct lf f;
    struct log_recovery_stats st;
    ck_assert_msg(recover(&f, dir, 2, &st, &err, NULL) == 0, "%s", err.msg);
    ck_assert_uint_eq(st.checkpoint_epoch, 20);
    ck_assert_uint_eq(st.records_before_checkpoint, 2);
    lf_expect(&f, {1, 11}, {2, 2}, {3, LF_ABSENT}, {4, 44}, {9, LF_ABSENT});
    lf_close(&f);
}
END_TEST

/* A delta checkpoint holds what changed since the checkpoint before it and
 * the keys deleted since: recovery loads the chain back to the full one
 * (oldest first does not matter: the highest epoch-version wins, a DELETE
 * leaves a tombstone) and skips log records older than the newest start. */
START_TEST(test_delta_checkpoint_chain)
{
    char dir[POD_PATH_MAX];
    lf_make_dir(dir, sizeof dir);
    pod_err err;
    /* an older full checkpoint the chain does not reach: not loaded */
    const struct rec old[] = {PUT(7, 5, 0, 7)};
    write_ckpt(dir, 1, false, 10, old, 1);
    const struct rec full[] = {PUT(1, 15, 0, 1), PUT(2, 18, 0, 2), PUT(3, 12, 0, 3)};
    write_ckpt(dir, 2, false, 20, full, 3);
    const struct rec d1[] = {PUT(1, 22, 0, 10), DEL(2, 24, 0), PUT(5, 21, 0, 5)};
    write_ckpt_since(dir, 3, false, 30, 20, d1, 3);
    const struct rec d2[] = {PUT(5, 33, 0, 50), DEL(3, 35, 0)};
    write_ckpt_since(dir, 4, false, 40, 30, d2, 2);
    const struct rec r[] = {
        PUT(6, 31, 0, -6),  /* older than the newest start (40): skipped */
        PUTB(1, 41, 0, 100),
    };
    write_seg(dir, 0, 0, r, 2);
    write_durable(dir, 50);
    struct lf f;
    struct log_recovery_stats st;
    ck_assert_msg(recover(&f, dir, 2, &st, &err, NULL) == 0, "%s", err.msg);
    ck_assert_uint_eq(st.checkpoint_epoch, 40);
    ck_assert_uint_eq(st.records_before_checkpoint, 1);
    lf_expect(&f, {1, 100}, {2, LF_ABSENT}, {3, LF_ABSENT}, {5, 50}, {6, LF_ABSENT},
                  {7, LF_ABSENT});
    lf_close(&f);

    /* logdir_ckpt_chain names seq 2, 3, 4 */
    struct logdir d;
    ck_assert_int_eq(logdir_scan(dir, &d, &err), 0);
    int chain[8], n = 0;
    struct seg_header newest;
    ck_assert_msg(logdir_ckpt_chain(dir, &d, 0, chain, &n, &newest, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(n, 3);
    ck_assert_uint_eq(d.ckpts[chain[0]].seq, 2);
    ck_assert_uint_eq(d.ckpts[chain[2]].seq, 4);
    ck_assert_uint_eq(newest.first_epoch, 40);
    ck_assert(newest.ckpt_flags & SEG_CKPT_DELTA);
    ck_assert_uint_eq(newest.since_epoch, 30);
    logdir_free(&d);
}
END_TEST

/* A delta whose predecessor is gone cannot be used: recovery stops and says
 * why rather than recover a database without the rows only that one held. */
START_TEST(test_delta_checkpoint_broken_chain)
{
    char dir[POD_PATH_MAX];
    lf_make_dir(dir, sizeof dir);
    pod_err err;
    const struct rec full[] = {PUT(1, 15, 0, 1)};
    write_ckpt(dir, 2, false, 20, full, 1);
    const struct rec d2[] = {PUT(5, 33, 0, 50)};
    write_ckpt_since(dir, 4, false, 40, 30, d2, 1); /* seq 3 (since 20, start 30) missing */
    write_durable(dir, 50);
    struct lf f;
    struct log_recovery_stats st;
    ck_assert_int_eq(recover(&f, dir, 1, &st, &err, NULL), -1);
    ck_assert_msg(strstr(err.msg, "is missing") != NULL, "%s", err.msg);
    lf_close(&f);

    char dir2[POD_PATH_MAX];
    lf_make_dir(dir2, sizeof dir2);
    write_ckpt_since(dir2, 4, false, 40, 30, d2, 1); /* only a delta */
    write_durable(dir2, 50);
    ck_assert_int_eq(recover(&f, dir2, 1, &st, &err, NULL), -1);
    ck_assert_msg(strstr(err.msg, "no checkpoint before it") != NULL, "%s", err.msg);
    lf_close(&f);
}
END_TEST

/* ---- the durable-epoch record ---------------------------------------------------------- */

START_TEST(test_durable_record_slots)
{
    char dir[POD_PATH_MAX], path[POD_PATH_MAX + 64];
    lf_make_dir(dir, sizeof dir);
    pod_err err;
    struct durable_file *df = durable_file_open(dir, 0, 0, &err);
    ck_assert_ptr_nonnull(df);
    ck_assert_int_eq(durable_file_write(df, 5, &err), 0);
    ck_assert_int_eq(durable_file_write(df, 9, &err), 0);
    ck_assert_int_eq(durable_file_write(df, 7, &err), 0); /* never backwards */
    durable_file_close(df);
    struct durable_record rec;
    ck_assert_int_eq(durable_file_read(dir, &rec, &err), 0);
    ck_assert(rec.exists);
    ck_assert_uint_eq(rec.epoch, 9);
    ck_assert_int_eq(rec.valid_slots, 2);
    /* The slot written last is torn: the other one's value is used. */
    snprintf(path, sizeof path, "%s/%s", dir, DURABLE_FILE_NAME);
    int fd = open(path, O_RDWR);
    off_t newest = (off_t)((rec.seq & 1) * DURABLE_SLOT_SIZE);
    ck_assert_int_eq(pwrite(fd, "\0\0\0\0", 4, newest + 24), 4);
    ck_assert_int_eq(durable_file_read(dir, &rec, &err), 0);
    ck_assert_uint_eq(rec.epoch, 5);
    ck_assert_int_eq(rec.valid_slots, 1);
    /* Both damaged: refused, and the server would not start. */
    ck_assert_int_eq(pwrite(fd, "garbage!", 8, (off_t)DURABLE_SLOT_SIZE - newest), 8);
    close(fd);
    ck_assert_int_eq(durable_file_read(dir, &rec, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "damaged"));
    struct lf f;
    lf_open(&f, 1, 0, 1, 1, 10, false, NULL, dir);
    struct log_host_options o = lf_log_options(&f, false);
    ck_assert_ptr_null(log_host_open(&o, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "damaged"));
    lf_close(&f);
}
END_TEST

START_TEST(test_unknown_table_refused)
{
    char dir[POD_PATH_MAX];
    lf_make_dir(dir, sizeof dir);
    pod_err err;
    struct seg_writer *w = seg_writer_open(dir, 0, 0, 0, 1, &err);
    unsigned char k[8] = {0};
    struct log_record lr = {.table_id = 7, .kind = LOG_DELETE, .key_len = 8,
                            .epoch_version = log_ev_make(3, 0), .key = k};
    ck_assert_int_eq(seg_writer_append(w, &lr, &err), 0);
    ck_assert_int_eq(seg_writer_close(w, &err), 0);
    write_durable(dir, 10);
    struct lf f;
    struct log_recovery_stats st;
    ck_assert_int_eq(recover(&f, dir, 1, &st, &err, NULL), -1);
    ck_assert_msg(strstr(err.msg, "tables") != NULL, "%s", err.msg);
    lf_close(&f);
}
END_TEST

/* ---- pod mode: agreement and routing through the region ------------------------------ */

struct pod_child {
    const char *region;
    char dir[POD_PATH_MAX];
    int host;
    const char *all_dirs[2];
};

static int pod_child(void *arg)
{
    struct pod_child *c = arg;
    struct lf f;
    lf_open_dirs(&f, 2, c->host, 2, 1, 10, true, c->region, c->dir, c->all_dirs);
    struct log_host_options o = lf_log_options(&f, true);
    pod_err err;
    struct log_host *lh = log_host_open(&o, &err);
    if (!lh) {
        fprintf(stderr, "host %d: %s\n", c->host, err.msg);
        return 1;
    }
    struct log_recovery_stats st;
    if (log_host_recover(lh, &st, &err)) {
        fprintf(stderr, "host %d: %s\n", c->host, err.msg);
        return 2;
    }
    int bad = 0;
    /* Host h owns keys with key % 2 == h. Host 0 logged keys 10..19, host 1
     * keys 20..29 (value = key * 10); the other host's keys arrive by routing. */
    for (uint64_t k = 10; k < 30; k++) {
        int64_t want = (k % 2 == (uint64_t)c->host) ? (int64_t)k * 10 : INT64_MIN;
        if (k == 25) want = INT64_MIN; /* epoch 60: above every host's durable epoch */
        if (lf_value(&f, k) != want) {
            fprintf(stderr, "host %d: key %" PRIu64 " = %" PRId64 ", want %" PRId64 "\n", c->host,
                    k, lf_value(&f, k), want);
            bad++;
        }
    }
    if (st.durable_epoch != 50) {
        fprintf(stderr, "host %d: agreed durable epoch %" PRIu64 ", want 50\n", c->host,
                st.durable_epoch);
        bad++;
    }
    if (st.records_sent != 5 || st.records_received != 5) {
        fprintf(stderr, "host %d: sent %" PRIu64 " received %" PRIu64 "\n", c->host,
                st.records_sent, st.records_received);
        bad++;
    }
    log_host_free(lh);
    lf_close(&f);
    return bad ? 3 : 0;
}

START_TEST(test_pod_mode_routing)
{
    char region[POD_PATH_MAX];
    tu_unique_shm_path(region, sizeof region, "route");
    struct pod_child c[2] = {{region, "", 0, {NULL, NULL}}, {region, "", 1, {NULL, NULL}}};
    for (int h = 0; h < 2; h++) {
        lf_make_dir(c[h].dir, sizeof c[h].dir);
        struct rec r[10];
        for (int i = 0; i < 10; i++) {
            uint64_t k = (uint64_t)(10 * (h + 1) + i);
            /* host 1's key 25 is of epoch 60; epoch 45 is committed thanks to host 0 */
            r[i] = (struct rec)PUT(k, k == 25 ? 60 : k == 23 ? 45 : 30, 0, (int64_t)k * 10);
        }
        pod_err err;
        struct seg_writer *w = seg_writer_open(c[h].dir, (uint32_t)h, 0, 0, 1, &err);
        ck_assert_msg(w != NULL, "%s", err.msg);
        write_records(w, r, 10);
        ck_assert_int_eq(seg_writer_close(w, &err), 0);
        struct durable_file *df = durable_file_open(c[h].dir, (uint32_t)h, 0, &err);
        ck_assert_int_eq(durable_file_write(df, h == 0 ? 50 : 40, &err), 0);
        durable_file_close(df);
    }
    for (int h = 0; h < 2; h++) c[h].all_dirs[0] = c[0].dir, c[h].all_dirs[1] = c[1].dir;
    /* The first host formats the region; start it first. */
    int p0 = tu_fork(pod_child, &c[0]);
    usleep(200000);
    int p1 = tu_fork(pod_child, &c[1]);
    ck_assert_int_eq(tu_wait_child(p0, 60000), 0);
    ck_assert_int_eq(tu_wait_child(p1, 60000), 0);
}
END_TEST

/* Pod mode, a host without history and nobody recovering: it does not wait
 * for the others (a 2-host config with one host started is usable); a host
 * with history that comes later refuses to start instead of recovering alone. */
struct skip_child {
    const char *region;
    const char *all_dirs[2];
    int host;
    bool want_ok;
    const char *ready, *release; /* marker files: "recovered", "you may exit" */
};

static int skip_child(void *arg)
{
    struct skip_child *c = arg;
    struct lf f;
    lf_open_dirs(&f, 2, c->host, 1, 1, 10, false, c->region, c->all_dirs[c->host], c->all_dirs);
    struct log_host_options o = lf_log_options(&f, true);
    pod_err err;
    struct log_host *lh = log_host_open(&o, &err);
    if (!lh) return 1;
    struct log_recovery_stats st;
    int rc = log_host_recover(lh, &st, &err);
    int bad = 0;
    if (c->want_ok && (rc != 0 || st.ran)) {
        fprintf(stderr, "host %d: rc %d ran %d: %s\n", c->host, rc, st.ran, err.msg);
        bad = 2;
    }
    if (!c->want_ok && (rc == 0 || !strstr(err.msg, "pod"))) {
        fprintf(stderr, "host %d: rc %d, want a refusal: %s\n", c->host, rc, err.msg);
        bad = 3;
    }
    if (c->ready) { /* stay attached (serving) until told */
        close(open(c->ready, O_CREAT | O_WRONLY, 0600));
        for (int i = 0; i < 3000 && access(c->release, F_OK) != 0; i++) usleep(10000);
    }
    log_host_free(lh);
    lf_close(&f);
    return bad;
}

START_TEST(test_pod_mode_without_history)
{
    char region[POD_PATH_MAX], d0[POD_PATH_MAX], d1[POD_PATH_MAX];
    tu_unique_shm_path(region, sizeof region, "skip");
    lf_make_dir(d0, sizeof d0);
    lf_make_dir(d1, sizeof d1);
    char ready[POD_PATH_MAX + 16], release[POD_PATH_MAX + 16];
    snprintf(ready, sizeof ready, "%s/ready", d0);
    snprintf(release, sizeof release, "%s/release", d0);
    struct skip_child a = {region, {d0, d1}, 0, true, ready, release};
    int pa = tu_fork(skip_child, &a);
    for (int i = 0; i < 2000 && access(ready, F_OK) != 0; i++) usleep(10000);
    ck_assert_msg(access(ready, F_OK) == 0, "host 0 did not start without waiting");
    /* host 1 has history */
    write_durable(d1, 5);
    struct skip_child b = {region, {d0, d1}, 1, false, NULL, NULL};
    int rb = tu_wait_child(tu_fork(skip_child, &b), 20000);
    close(open(release, O_CREAT | O_WRONLY, 0600));
    ck_assert_int_eq(rb, 0);
    ck_assert_int_eq(tu_wait_child(pa, 20000), 0);
}
END_TEST

/* Pod mode, one host's log torn while the other's is intact. Host 0's last
 * block (epoch 52) was being written when the pod died: its tail is torn.
 * Host 1's log is intact and also holds epoch-52 records, but committed
 * history ends at the pod-wide durable epoch (50, the larger recorded
 * value): those are discarded too. (An epoch that is not committed may have
 * lost records on any host, so keeping part of it could leave a transaction
 * half there.) Everything below 50, wherever it was logged and whoever owns
 * it, is kept. */
struct torn_child {
    const char *region;
    const char *all_dirs[2];
    int host;
    int64_t want[30];     /* value of keys 10..29 this host owns (INT64_MIN: absent) */
    uint64_t torn, discarded, truncated;
};

static int torn_child(void *arg)
{
    struct torn_child *c = arg;
    struct lf f;
    lf_open_dirs(&f, 2, c->host, 2, 1, 10, true, c->region, c->all_dirs[c->host], c->all_dirs);
    struct log_host_options o = lf_log_options(&f, true);
    pod_err err;
    struct log_host *lh = log_host_open(&o, &err);
    struct log_recovery_stats st;
    if (!lh || log_host_recover(lh, &st, &err)) {
        fprintf(stderr, "host %d: %s\n", c->host, err.msg);
        return 1;
    }
    int bad = 0;
    for (uint64_t k = 10; k < 30; k++) {
        if (k % 2 != (uint64_t)c->host) continue;
        if (lf_value(&f, k) != c->want[k]) {
            fprintf(stderr, "host %d: key %" PRIu64 " = %" PRId64 ", want %" PRId64 "\n", c->host,
                    k, lf_value(&f, k), c->want[k]);
            bad++;
        }
    }
    if (st.durable_epoch != 50 || st.torn_tails != c->torn || st.corrupt_tails != 0 ||
        st.records_discarded != c->discarded || st.truncated_files != c->truncated) {
        fprintf(stderr, "host %d: durable %" PRIu64 " torn %" PRIu64 " corrupt %" PRIu64
                " discarded %" PRIu64 " truncated %" PRIu64 "; want 50 %" PRIu64 " 0 %" PRIu64
                " %" PRIu64 "\n", c->host, st.durable_epoch, st.torn_tails, st.corrupt_tails,
                st.records_discarded, st.truncated_files, c->torn, c->discarded, c->truncated);
        bad++;
    }
    log_host_free(lh);
    lf_close(&f);
    return bad ? 3 : 0;
}

static void write_host_seg(const char *dir, uint32_t host, const struct rec *r, int n)
{
    pod_err err;
    struct seg_writer *w = seg_writer_open(dir, host, 0, 0, 1, &err);
    ck_assert_msg(w != NULL, "%s", err.msg);
    write_records(w, r, n);
    ck_assert_int_eq(seg_writer_close(w, &err), 0);
}

static void write_host_durable(const char *dir, uint32_t host, uint64_t epoch)
{
    pod_err err;
    struct durable_file *df = durable_file_open(dir, host, 0, &err);
    ck_assert_msg(df != NULL, "%s", err.msg);
    ck_assert_int_eq(durable_file_write(df, epoch, &err), 0);
    durable_file_close(df);
}

static void run_torn_pair(struct torn_child c[2])
{
    int p0 = tu_fork(torn_child, &c[0]);
    usleep(200000); /* the first host formats the region */
    int p1 = tu_fork(torn_child, &c[1]);
    ck_assert_int_eq(tu_wait_child(p0, 60000), 0);
    ck_assert_int_eq(tu_wait_child(p1, 60000), 0);
}

START_TEST(test_pod_mode_one_host_torn)
{
    char region[POD_PATH_MAX], d0[POD_PATH_MAX], d1[POD_PATH_MAX];
    tu_unique_shm_path(region, sizeof region, "torn");
    lf_make_dir(d0, sizeof d0);
    lf_make_dir(d1, sizeof d1);
    /* Keys: host h owns key % 2 == h. */
    const struct rec h0[] = {
        PUT(10, 20, 0, 100), PUT(11, 20, 0, 110),  /* 11: host 1's tuple, logged here */
        PUTB(12, 30, 0, 120), PUT(13, 30, 0, 130),
        PUTB(14, 52, 0, 140), PUT(15, 52, 0, 150), /* the block being written: torn below */
    };
    const struct rec h1[] = {
        PUT(21, 25, 0, 210), PUT(20, 25, 0, 200),
        PUTB(10, 45, 0, 101),                      /* host 0's tuple, newer than host 0's record */
        PUTB(23, 52, 0, 230), PUT(12, 52, 0, 999), /* intact, but of epoch 52 >= 50 */
    };
    write_host_seg(d0, 0, h0, 6);
    write_host_seg(d1, 1, h1, 5);
    char path[POD_PATH_MAX + 64], name[SEG_NAME_MAX];
    seg_format_name(name, sizeof name, 0, 0, 0);
    snprintf(path, sizeof path, "%s/%s", d0, name);
    ck_assert_int_eq(truncate(path, (off_t)(file_size(d0, name) - 10)), 0);
    write_host_durable(d0, 0, 50);
    write_host_durable(d1, 1, 48); /* host 1 had not recorded 50 yet */
    struct torn_child c[2] = {{region, {d0, d1}, 0, {0}, 1, 0, 0},
                              {region, {d0, d1}, 1, {0}, 0, 2, 1}};
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 30; k++) c[h].want[k] = INT64_MIN;
    c[0].want[10] = 101; /* host 1's committed write of host 0's tuple */
    c[0].want[12] = 120; /* not host 1's 999 of epoch 52 */
    c[0].want[20] = 200;
    c[1].want[11] = 110; /* host 0's write of host 1's tuple */
    c[1].want[13] = 130;
    c[1].want[21] = 210; /* 15 (torn) and 23 (epoch 52) are absent */
    run_torn_pair(c);
    /* Again: the same state; host 1's log was cut back, host 0's tail is
     * still torn (it is never appended to again). */
    unlink(region);
    c[1].discarded = c[1].truncated = 0;
    run_torn_pair(c);
    unlink(region);
}
END_TEST

static Suite *recovery_suite(void)
{
    Suite *s = suite_create("recovery");
    TCase *tc = tu_tcase(s, "recovery", 120);
    tcase_add_test(tc, test_uncommitted_discarded_and_cut);
    tcase_add_test(tc, test_new_life_starts_at_durable_epoch);
    tcase_add_test(tc, test_no_durable_record_discards_everything);
    tcase_add_test(tc, test_durable_combine);
    tcase_add_test(tc, test_marks_end_history);
    tcase_add_test(tc, test_marks_need_every_logger);
    tcase_add_test(tc, test_highest_ev_wins);
    tcase_add_test(tc, test_patches_replay_along_their_chain);
    tcase_add_test(tc, test_patch_onto_checkpoint);
    tcase_add_test(tc, test_torn_tail_keeps_what_is_before);
    tcase_add_test(tc, test_corrupt_record_ends_that_file);
    tcase_add_test(tc, test_checkpoint_and_log_tail);
    tcase_add_test(tc, test_delta_checkpoint_chain);
    tcase_add_test(tc, test_delta_checkpoint_broken_chain);
    tcase_add_test(tc, test_durable_record_slots);
    tcase_add_test(tc, test_unknown_table_refused);
    tcase_add_test(tc, test_pod_mode_routing);
    tcase_add_test(tc, test_pod_mode_without_history);
    tcase_add_test(tc, test_pod_mode_one_host_torn);
    return s;
}

int main(void)
{
    return tu_run(recovery_suite());
}
