/* Header-only fixture for the durability tests (test_logger_mt.c,
 * test_recovery.c): a 1- or 2-host config on a unique /dev/shm region, a
 * database with one table "t" (8-byte big-endian keys, two partitions by
 * key % 2, 16-byte tuples) and put/delete/insert/tag procedures, a fresh log
 * directory removed at exit, and row inspection. */
#ifndef PODDB_TESTS_LOG_FIXTURE_H
#define PODDB_TESTS_LOG_FIXTURE_H

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cxl/region.h"
#include "engine/db.h"
#include "engine/result.h"
#include "engine/worker.h"
#include "log/log.h"
#include "log/segment.h"
#include "storage/table.h"
#include "testutil.h"

#define LF_TUPLE 16

struct lf_tuple {
    int64_t value;
    int64_t serial;
};

struct lf {
    struct pod_config conf;
    struct cxl_region *region;
    pod_db *db;
    pod_table *t;
    int p_put, p_del, p_ins, p_tag;
    char dir[POD_PATH_MAX];
};

static inline int lf_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag, (void)f;
    return remove(p);
}
static inline void lf_rm_rf(const char *p) { nftw(p, lf_rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

static char lf_dirs[8][POD_PATH_MAX];
static int lf_ndirs;
static pid_t lf_dir_owner;
/* The region of the pod that logs in dir: one per log directory, since a
 * directory is claimed by its pod's region path (log/claim.h) and a test
 * that reopens it must come back as the same pod. */
static inline void lf_region_of(const char *dir, char *out, size_t len)
{
    const char *base = strrchr(dir, '/');
    snprintf(out, len, "/dev/shm/%.200s-region", base ? base + 1 : dir);
}

static inline void lf_cleanup_dirs(void)
{
    if (getpid() != lf_dir_owner) return;
    for (int i = 0; i < lf_ndirs; i++) {
        char region[POD_PATH_MAX];
        lf_region_of(lf_dirs[i], region, sizeof region);
        unlink(region);
        lf_rm_rf(lf_dirs[i]);
    }
}

/* A fresh directory, removed at exit by the process that made it. */
static inline void lf_make_dir(char *out, size_t len)
{
    const char *tag = getenv("PODDB_TEST_TAG");
    snprintf(out, len, "/tmp/poddb-test-%s-dur-XXXXXX", tag ? tag : "manual");
    ck_assert_ptr_nonnull(mkdtemp(out));
    if (lf_dir_owner != getpid()) {
        lf_dir_owner = getpid();
        lf_ndirs = 0;
        atexit(lf_cleanup_dirs);
    }
    if (lf_ndirs < 8) snprintf(lf_dirs[lf_ndirs++], POD_PATH_MAX, "%s", out);
}

static inline void lf_key(unsigned char k[8], uint64_t v) { pod_key_u64(k, v); }

/* put(key, value): upsert. */
static inline int lf_put_proc(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    pod_table *t = ctx;
    unsigned char k[8];
    lf_key(k, (uint64_t)a->v[0].u.i64);
    struct lf_tuple tu = {a->v[1].u.i64, a->v[0].u.i64};
    int rc = pod_get_for_update(tx, t, k, NULL);
    if (rc < 0) return rc;
    return rc == POD_NOT_FOUND ? pod_insert(tx, t, k, &tu) : pod_put(tx, t, k, &tu);
}

static inline int lf_del_proc(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    unsigned char k[8];
    lf_key(k, (uint64_t)a->v[0].u.i64);
    return pod_delete(tx, ctx, k);
}

static inline int lf_ins_proc(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    unsigned char k[8];
    lf_key(k, (uint64_t)a->v[0].u.i64);
    struct lf_tuple tu = {a->v[1].u.i64, a->v[0].u.i64};
    return pod_insert(tx, ctx, k, &tu);
}

/* tag(key, x): the low byte of key's serial becomes x (pod_update_range of
 * the serial's 8 bytes: a PATCH at an offset inside the tuple). */
static inline int lf_tag_proc(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    unsigned char k[8], *tu;
    lf_key(k, (uint64_t)a->v[0].u.i64);
    int rc = pod_update_range(tx, ctx, k, 8, 8, (void **)&tu);
    if (rc) return rc;
    tu[8] = (unsigned char)a->v[1].u.i64; /* the serial, little-endian: its low byte */
    return POD_OK;
}

/* Config (nhosts hosts, `workers` workers and `loggers` loggers each), the
 * region attached as host `host` (region_path, or when NULL the log
 * directory's own: lf_region_of), the database with table t. log dirs: the
 * given one for `host` (made fresh when dir is NULL). */
static inline void lf_open_dirs(struct lf *f, int nhosts, int host, int workers, int loggers,
                                int epoch_ms, bool simulate_noncoherent, const char *region_path,
                                const char *dir, const char *const *all_dirs);

static inline void lf_open(struct lf *f, int nhosts, int host, int workers, int loggers,
                           int epoch_ms, bool simulate_noncoherent, const char *region_path,
                           const char *dir)
{
    lf_open_dirs(f, nhosts, host, workers, loggers, epoch_ms, simulate_noncoherent, region_path,
                 dir, NULL);
}

/* The same; all_dirs (nhosts entries, or NULL) are every host's log
 * directories, so that processes of one pod build identical configs. */
static inline void lf_open_dirs(struct lf *f, int nhosts, int host, int workers, int loggers,
                                int epoch_ms, bool simulate_noncoherent, const char *region_path,
                                const char *dir, const char *const *all_dirs)
{
    memset(f, 0, sizeof *f);
    tu_make_config(&f->conf, nhosts, 768ull << 20, 16ull << 20, simulate_noncoherent);
    f->conf.engine.epoch_ms = epoch_ms;
    for (int h = 0; h < nhosts; h++) {
        f->conf.hosts[h].workers = workers;
        f->conf.hosts[h].loggers = loggers;
    }
    if (dir) snprintf(f->dir, sizeof f->dir, "%s", dir);
    else lf_make_dir(f->dir, sizeof f->dir);
    if (region_path) snprintf(f->conf.region.path, sizeof f->conf.region.path, "%s", region_path);
    else lf_region_of(f->dir, f->conf.region.path, sizeof f->conf.region.path);
    snprintf(f->conf.hosts[host].log_dir, POD_PATH_MAX, "%s", f->dir);
    for (int h = 0; all_dirs && h < nhosts; h++) {
        snprintf(f->conf.hosts[h].log_dir, POD_PATH_MAX, "%s", all_dirs[h]);
        snprintf(f->conf.hosts[h].socket_path, POD_PATH_MAX, "%.200s/s.sock", all_dirs[h]);
    }
    pod_err err;
    f->region = cxl_region_open(&f->conf, host, CXL_OPEN_CREATE, &err);
    ck_assert_msg(f->region != NULL, "region: %s", err.msg);
    struct pod_db_options o = {.nworkers = workers, .host_id = host, .nhosts = nhosts,
                               .phantom_protection = true};
    char msg[256];
    f->db = pod_db_new(&o, msg, sizeof msg);
    ck_assert_msg(f->db != NULL, "%s", msg);
    pod_table_def def = {.name = "t", .key_size = 8, .tuple_size = LF_TUPLE, .nparts = 2,
                         .partition = pod_part_be64};
    f->t = pod_table_create(f->db, &def, msg, sizeof msg);
    ck_assert_msg(f->t != NULL, "%s", msg);
    static const enum pod_type t2[] = {POD_T_I64, POD_T_I64}, t1[] = {POD_T_I64};
    pod_proc_def put = {"put", lf_put_proc, f->t, 2, t2, false};
    pod_proc_def del = {"del", lf_del_proc, f->t, 1, t1, false};
    pod_proc_def ins = {"ins", lf_ins_proc, f->t, 2, t2, false};
    ck_assert_int_ge(pod_proc_register(f->db, &put, msg, sizeof msg), 0);
    ck_assert_int_ge(pod_proc_register(f->db, &del, msg, sizeof msg), 0);
    ck_assert_int_ge(pod_proc_register(f->db, &ins, msg, sizeof msg), 0);
    pod_proc_def tag = {"tag", lf_tag_proc, f->t, 2, t2, false};
    ck_assert_int_ge(pod_proc_register(f->db, &tag, msg, sizeof msg), 0);
    f->p_tag = pod_proc_find(f->db, "tag");
    f->p_put = pod_proc_find(f->db, "put");
    f->p_del = pod_proc_find(f->db, "del");
    f->p_ins = pod_proc_find(f->db, "ins");
}

static inline void lf_close(struct lf *f)
{
    pod_db_free(f->db);
    cxl_region_close(f->region);
    f->db = NULL;
    f->region = NULL;
}

static inline struct log_host_options lf_log_options(const struct lf *f, bool pod_mode)
{
    return (struct log_host_options){.conf = &f->conf, .host = f->region->host,
                                     .region = f->region, .db = f->db, .pod_mode = pod_mode};
}

/* The row of key (NULL when absent). */
static inline struct pod_row *lf_row(const struct lf *f, uint64_t key)
{
    unsigned char k[8];
    lf_key(k, key);
    uint64_t v;
    if (bt_lookup(&f->t->parts[table_partition_of(f->t, k)].tree, k, &v) != BT_OK) return NULL;
    return (struct pod_row *)(uintptr_t)v;
}

/* The committed value of key, or INT64_MIN when absent. */
static inline int64_t lf_value(const struct lf *f, uint64_t key)
{
    struct pod_row *r = lf_row(f, key);
    if (!r || !row_valid(r)) return INT64_MIN;
    return ((const struct lf_tuple *)r->tuple)->value;
}

#define LF_ABSENT INT64_MIN /* lf_value of a key without a committed row */

/* What lf_expect checks: key's value (LF_ABSENT: no committed row). */
struct lf_kv {
    uint64_t key;
    int64_t value;
};

/* lf_expect(f, {key, value}, ...): each key has its value; a failure names the key. */
#define lf_expect(f, ...)                                                                   \
    lf_expect_n(f, (const struct lf_kv[]){__VA_ARGS__},                                    \
                sizeof((const struct lf_kv[]){__VA_ARGS__}) / sizeof(struct lf_kv))
static inline void lf_expect_n(const struct lf *f, const struct lf_kv *want, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int64_t v = lf_value(f, want[i].key);
        ck_assert_msg(v == want[i].value, "key %" PRIu64 ": %" PRId64 ", want %" PRId64,
                      want[i].key, v, want[i].value);
    }
}

/* Run a procedure on the admin worker. */
static inline int lf_call(struct lf *f, int proc, int64_t a0, int64_t a1)
{
    pod_value v[2] = {pod_v_i64(a0), pod_v_i64(a1)};
    pod_args args = {proc == f->p_del ? 1 : 2, v};
    pod_result *res = pod_result_new();
    struct pod_worker *w = pod_admin_begin(f->db);
    char msg[256];
    int rc = pod_call(w, proc, &args, res, msg, sizeof msg);
    pod_admin_end(f->db);
    pod_result_free(res);
    return rc;
}

#endif
