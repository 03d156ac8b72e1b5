/* YCSB (Tigon's variant): table, loader, ycsb.txn, ycsb.count, Zipfian
 * generator and the input generator. See ycsb.h and docs/ycsb.md. */
#include "workloads/ycsb/ycsb.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workloads/common/procs.h"
#include "workloads/common/range.h"
#include "util/clock.h"
#include "util/mix.h"

#define ARG(i) (a->v[(i)].u.i64)

static const char *const proc_names[3] = {"ycsb.txn", "ycsb.load", "ycsb.count"};

void ycsb_config_default(struct ycsb_config *c, uint64_t tuples, uint32_t nparts)
{
    memset(c, 0, sizeof *c);
    c->nparts = nparts ? nparts : 1;
    c->tuples = tuples < c->nparts ? c->nparts : tuples;
    c->read_pct = 50;
    c->theta = 0.99;
    c->multi_partition = 0.1;
    c->load_batch = 100;
    c->seed = 42;
}

/* ---- partitioning ----------------------------------------------------------------- */

uint32_t ycsb_part_of(uint64_t id, uint64_t tuples, uint32_t nparts)
{
    return wl_part_of(id, tuples, nparts);
}

/* The smallest id with id * nparts / tuples >= p: ceil(p * tuples / nparts). */
uint64_t ycsb_part_first(uint32_t p, uint64_t tuples, uint32_t nparts)
{
    return wl_part_first(p, tuples, nparts);
}

uint32_t ycsb_partition(const void *key, uint32_t nparts, void *ctx)
{
    const struct ycsb *y = ctx;
    return ycsb_part_of(pod_key_get_u64(key), y->cfg.tuples, nparts);
}

/* ---- random numbers and the Zipfian generator --------------------------------------- */

uint64_t ycsb_rand(uint64_t *s)
{
    return pod_rand(s);
}

double ycsb_rand_unit(uint64_t *rng) { return (double)(ycsb_rand(rng) >> 11) * 0x1.0p-53; }

static uint64_t uniform_below(uint64_t *rng, uint64_t n)
{
    return n ? (ycsb_rand(rng) >> 11) % n : 0;
}

double ycsb_zeta(uint64_t n, double theta)
{
    double s = 0;
    for (uint64_t i = 1; i <= n; i++) s += 1.0 / pow((double)i, theta);
    return s;
}

void ycsb_zipf_init(struct ycsb_zipf *z, uint64_t n, double theta)
{
    memset(z, 0, sizeof *z);
    z->n = n ? n : 1;
    z->theta = theta;
    z->alpha = 1.0 / (1.0 - theta);
    z->zetan = ycsb_zeta(z->n, theta);
    z->zeta2 = ycsb_zeta(2, theta);
    z->half_pow_theta = pow(0.5, theta);
    /* n <= 2: the two first branches of next() cover every draw. */
    z->eta = z->n <= 2 ? 0 : (1.0 - pow(2.0 / (double)z->n, 1.0 - theta)) / (1.0 - z->zeta2 / z->zetan);
}

uint64_t ycsb_zipf_next(const struct ycsb_zipf *z, uint64_t *rng)
{
    if (z->n <= 1) return 0;
    double u = ycsb_rand_unit(rng);
    double uz = u * z->zetan;
    if (uz < 1.0) return 0;
    if (uz < 1.0 + z->half_pow_theta) return 1;
    uint64_t r = (uint64_t)((double)z->n * pow(z->eta * u - z->eta + 1.0, z->alpha));
    return r >= z->n ? z->n - 1 : r;
}

/* ---- tuple contents ------------------------------------------------------------------- */

/* Column bytes 8..99 from a seed (bytes 0..7 are the counter). */
static void fill_col(unsigned char *col, uint64_t seed)
{
    uint64_t s = pod_mix64(seed) | 1;
    for (int i = 8; i < YCSB_COL_SIZE; i += 8) {
        uint64_t v = ycsb_rand(&s);
        int n = YCSB_COL_SIZE - i < 8 ? YCSB_COL_SIZE - i : 8;
        memcpy(col + i, &v, (size_t)n);
    }
}

/* ---- procedures ------------------------------------------------------------------------- */

/* ycsb.txn(ops, seed) */
static int p_txn(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct ycsb *y = ctx;
    const pod_value *ops = &a->v[0];
    if (ops->len % sizeof(struct ycsb_op) || ops->len / sizeof(struct ycsb_op) > YCSB_MAX_OPS)
        return pod_txn_fail(tx, POD_E_INVALID, "ycsb.txn: ops of %u bytes", ops->len);
    uint32_t n = ops->len / (uint32_t)sizeof(struct ycsb_op);
    uint64_t seed = (uint64_t)ARG(1);
    int64_t writes = 0;
    uint64_t sum = 0;
    /* The keys this transaction reads, looked up together first so that
     * their cache misses overlap (pod_prefetch: a hint). */
    unsigned char keys[YCSB_MAX_OPS][YCSB_KEY_SIZE];
    for (uint32_t i = 0; i < n; i++) {
        struct ycsb_op op;
        memcpy(&op, (const unsigned char *)ops->u.bytes + i * sizeof op, sizeof op);
        pod_key_u64(keys[i], op.id);
    }
    if (n) POD_TRY(pod_prefetch(tx, y->table, keys, n));
    for (uint32_t i = 0; i < n; i++) {
        struct ycsb_op op;
        memcpy(&op, (const unsigned char *)ops->u.bytes + i * sizeof op, sizeof op);
        if (op.id >= y->cfg.tuples || op.col >= YCSB_COLS)
            return pod_txn_fail(tx, POD_E_INVALID, "ycsb.txn: op %u: id %" PRIu64 " col %u", i,
                                op.id, op.col);
        unsigned char k[YCSB_KEY_SIZE];
        pod_key_u64(k, op.id);
        /* The tuple in place (no copy in or out): a read looks at every
         * column, an update rewrites one (only its bytes are saved, logged
         * and published). */
        struct ycsb_tuple *t;
        int rc = op.write ? pod_update_range(tx, y->table, k, op.col * YCSB_COL_SIZE,
                                             YCSB_COL_SIZE, (void **)&t)
                          : pod_get_ref(tx, y->table, k, (const void **)&t);
        if (rc < 0) return rc;
        if (rc != POD_OK)
            return pod_txn_fail(tx, POD_E_INTERNAL, "ycsb.txn: id %" PRIu64 ": %s", op.id,
                                pod_status_name(rc));
        if (!op.write) {
            for (int c = 0; c < YCSB_COLS; c++) sum += (uint64_t)t->col[c][8 + (i % 90)];
            continue;
        }
        int64_t cnt = ycsb_col_counter(t, (int)op.col) + 1;
        memcpy(t->col[op.col], &cnt, sizeof cnt);
        fill_col(t->col[op.col], seed ^ ((uint64_t)i << 56));
        writes++;
    }
    pod_result_i64(res, writes);
    pod_result_i64(res, (int64_t)sum);
    return POD_OK;
}

/* ycsb.load(from, to): ids from..to-1 */
static int p_load(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    struct ycsb *y = ctx;
    if (ARG(0) < 0 || ARG(1) < ARG(0) || (uint64_t)ARG(1) > y->cfg.tuples)
        return pod_txn_fail(tx, POD_E_INVALID, "ycsb.load: bad range");
    if (ARG(1) > ARG(0)) {
        unsigned char k[YCSB_KEY_SIZE];
        pod_key_u64(k, (uint64_t)ARG(0));
        int done = wl_unit_loaded(tx, y->table, k);
        if (done) return done < 0 ? done : WL_UNIT_SKIPPED;
    }
    struct ycsb_tuple t;
    for (uint64_t id = (uint64_t)ARG(0); id < (uint64_t)ARG(1); id++) {
        for (int c = 0; c < YCSB_COLS; c++) {
            memset(t.col[c], 0, 8);
            fill_col(t.col[c], y->cfg.seed ^ (id * YCSB_COLS + (uint64_t)c));
        }
        unsigned char k[YCSB_KEY_SIZE];
        pod_key_u64(k, id);
        int rc = pod_insert(tx, y->table, k, &t);
        if (rc < 0) return rc;
        if (rc != POD_OK)
            return pod_txn_fail(tx, POD_E_INTERNAL, "ycsb.load: insert %" PRIu64 ": %s", id,
                                pod_status_name(rc));
    }
    return POD_OK;
}

struct count_acc {
    uint64_t rows;
    int64_t sum;
};

static bool count_visit(void *arg, const void *key, const void *tuple)
{
    (void)key;
    struct count_acc *c = arg;
    const struct ycsb_tuple *t = tuple;
    c->rows++;
    for (int i = 0; i < YCSB_COLS; i++) c->sum += ycsb_col_counter(t, i);
    return true;
}

/* ycsb.count(partition) */
static int p_count(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct ycsb *y = ctx;
    if (ARG(0) < 0 || ARG(0) >= y->cfg.nparts)
        return pod_txn_fail(tx, POD_E_INVALID, "ycsb.count: no partition %" PRId64, ARG(0));
    uint32_t p = (uint32_t)ARG(0);
    uint64_t first = ycsb_part_first(p, y->cfg.tuples, y->cfg.nparts);
    uint64_t end = ycsb_part_first(p + 1, y->cfg.tuples, y->cfg.nparts);
    struct count_acc c = {0, 0};
    if (end > first) {
        unsigned char lo[YCSB_KEY_SIZE], hi[YCSB_KEY_SIZE];
        pod_key_u64(lo, first);
        pod_key_u64(hi, end - 1);
        POD_TRY(pod_scan(tx, y->table, lo, hi, 0, 0, count_visit, &c));
    }
    pod_result_i64(res, (int64_t)c.rows);
    pod_result_i64(res, c.sum);
    return POD_OK;
}

/* ---- registration -------------------------------------------------------------------------- */

static const pod_column cols[YCSB_COLS] = {
    {"f0", POD_COL_BYTES, 0 * YCSB_COL_SIZE, YCSB_COL_SIZE},
    {"f1", POD_COL_BYTES, 1 * YCSB_COL_SIZE, YCSB_COL_SIZE},
    {"f2", POD_COL_BYTES, 2 * YCSB_COL_SIZE, YCSB_COL_SIZE},
    {"f3", POD_COL_BYTES, 3 * YCSB_COL_SIZE, YCSB_COL_SIZE},
    {"f4", POD_COL_BYTES, 4 * YCSB_COL_SIZE, YCSB_COL_SIZE},
    {"f5", POD_COL_BYTES, 5 * YCSB_COL_SIZE, YCSB_COL_SIZE},
    {"f6", POD_COL_BYTES, 6 * YCSB_COL_SIZE, YCSB_COL_SIZE},
    {"f7", POD_COL_BYTES, 7 * YCSB_COL_SIZE, YCSB_COL_SIZE},
    {"f8", POD_COL_BYTES, 8 * YCSB_COL_SIZE, YCSB_COL_SIZE},
    {"f9", POD_COL_BYTES, 9 * YCSB_COL_SIZE, YCSB_COL_SIZE},
};

int ycsb_register(pod_db *db, const struct ycsb_config *cfg, char *err, size_t errlen)
{
    if (!cfg->nparts || cfg->tuples / cfg->nparts < YCSB_OPS || cfg->read_pct > 100 || cfg->theta < 0 ||
        cfg->theta >= 1 || cfg->multi_partition < 0 || cfg->multi_partition > 1) {
        snprintf(err, errlen, "ycsb: bad configuration");
        return -1;
    }
    if (ycsb_get(db)) {
        snprintf(err, errlen, "ycsb: already registered");
        return -1;
    }
    if (pod_table_find(db, "usertable")) {
        snprintf(err, errlen, "ycsb: table usertable exists");
        return -1;
    }
    struct ycsb *y = calloc(1, sizeof *y);
    if (!y) {
        snprintf(err, errlen, "ycsb: out of memory");
        return -1;
    }
    y->cfg = *cfg;
    if (!y->cfg.load_batch) y->cfg.load_batch = 100;
    pod_table_def def = {
        .name = "usertable",
        .key_size = YCSB_KEY_SIZE,
        .tuple_size = YCSB_TUPLE_SIZE,
        .ncols = YCSB_COLS,
        .cols = cols,
        .nparts = cfg->nparts,
        .partition = ycsb_partition,
        .partition_ctx = y,
        .expected_rows = cfg->tuples,
    };
    /* The table keeps y as its partition context: y lives until ycsb_free. */
    y->table = pod_table_create(db, &def, err, errlen);
    if (!y->table) {
        free(y);
        return -1;
    }
    static const enum pod_type txn_types[2] = {POD_T_BYTES, POD_T_I64};
    static const enum pod_type i64s[2] = {POD_T_I64, POD_T_I64};
    pod_proc_def defs[3] = {
        {proc_names[0], p_txn, y, 2, txn_types, false},
        {proc_names[1], p_load, y, 2, i64s, false},
        {proc_names[2], p_count, y, 1, i64s, true},
    };
    int *ids[3] = {&y->proc_txn, &y->proc_load, &y->proc_count};
    for (int i = 0; i < 3; i++) {
        int p = pod_proc_register(db, &defs[i], err, errlen);
        if (p < 0) {
            /* leaked on purpose if a procedure already holds y (no unregister) */
            if (i == 0) free(y);
            return -1;
        }
        *ids[i] = p;
    }
    return 0;
}

struct ycsb *ycsb_get(pod_db *db) { return wl_ctx_get(db, proc_names[0]); }

void ycsb_free(pod_db *db) { wl_ctx_free(db, proc_names[0], "ycsb."); }

/* ---- loader ------------------------------------------------------------------------------ */

int ycsb_load(pod_db *db, ycsb_progress_fn progress, void *progress_arg, char *err, size_t errlen)
{
    struct ycsb *x = ycsb_get(db);
    if (!x) {
        snprintf(err, errlen, "ycsb_load: ycsb_register first");
        return -1;
    }
    return wl_load_ranges(db, x->proc_load, x->cfg.tuples, x->cfg.nparts, x->cfg.load_batch,
                          progress, progress_arg, "ycsb.load", err, errlen);
}

/* wk NULL: on the admin worker. */
static int count_partition(pod_db *db, struct pod_worker *wk, const struct ycsb *y, uint32_t p,
                           pod_result *res, uint64_t *rows, int64_t *sum, char *err,
                           size_t errlen)
{
    pod_value v[1] = {pod_v_i64(p)};
    pod_args args = {1, v};
    char msg[200];
    int rc = wl_call(db, wk, y->proc_count, &args, res, msg, sizeof msg);
    pod_value r0, r1;
    if (rc < 0 || pod_result_get(res, 0, 0, &r0) || pod_result_get(res, 0, 1, &r1)) {
        snprintf(err, errlen, "ycsb.count(%u): %s: %s", p, pod_status_name(rc), msg);
        return -1;
    }
    *rows += (uint64_t)r0.u.i64;
    *sum += r1.u.i64;
    return 0;
}

int ycsb_count(pod_db *db, uint64_t *rows, int64_t *counter_sum, char *err, size_t errlen)
{
    struct ycsb *y = ycsb_get(db);
    if (!y) {
        snprintf(err, errlen, "ycsb_count: ycsb_register first");
        return -1;
    }
    pod_result *res = pod_result_new();
    if (!res) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    *rows = 0;
    *counter_sum = 0;
    int ret = 0;
    struct pod_worker *a = pod_admin_begin(db);
    for (uint32_t p = 0; p < y->cfg.nparts && ret == 0; p++)
        ret = count_partition(db, a, y, p, res, rows, counter_sum, err, errlen);
    pod_admin_end(db);
    pod_result_free(res);
    return ret;
}

int ycsb_count_partition(pod_db *db, struct pod_worker *wk, uint32_t p, uint64_t *rows,
                         int64_t *counter_sum, char *err, size_t errlen)
{
    struct ycsb *y = ycsb_get(db);
    if (!y) {
        snprintf(err, errlen, "ycsb_count: ycsb_register first");
        return -1;
    }
    if (p >= y->cfg.nparts) {
        snprintf(err, errlen, "ycsb_count: no partition %u", p);
        return -1;
    }
    pod_result *res = pod_result_new();
    if (!res) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    *rows = 0;
    *counter_sum = 0;
    int ret = count_partition(db, wk, y, p, res, rows, counter_sum, err, errlen);
    pod_result_free(res);
    return ret;
}

/* ---- input generation --------------------------------------------------------------------- */

void ycsb_gen_init(struct ycsb_gen *g, const struct ycsb_config *cfg)
{
    memset(g, 0, sizeof *g);
    g->cfg = *cfg;
    uint64_t maxsize = 0;
    for (uint32_t p = 0; p < cfg->nparts; p++) {
        uint64_t s = ycsb_part_first(p + 1, cfg->tuples, cfg->nparts) -
                     ycsb_part_first(p, cfg->tuples, cfg->nparts);
        if (s > maxsize) maxsize = s;
    }
    ycsb_zipf_init(&g->zipf, maxsize, cfg->theta);
}

/* FNV-1a 64 of the rank's bytes, as YCSB's scrambled Zipfian. */
static uint64_t fnv64(uint64_t v)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 8; i++, v >>= 8) {
        h ^= v & 0xff;
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t pick_key(const struct ycsb_gen *g, uint64_t *rng, uint32_t part)
{
    const struct ycsb_config *c = &g->cfg;
    uint64_t first = ycsb_part_first(part, c->tuples, c->nparts);
    uint64_t size = ycsb_part_first(part + 1, c->tuples, c->nparts) - first;
    for (;;) {
        uint64_t r = ycsb_zipf_next(&g->zipf, rng);
        if (r >= size) continue; /* only the largest partitions have the last rank */
        if (c->scramble) r = fnv64(r) % size;
        return first + r;
    }
}

void ycsb_next_call(const struct ycsb_gen *g, uint64_t *rng, uint32_t home, struct ycsb_call *out)
{
    const struct ycsb_config *c = &g->cfg;
    memset(out, 0, sizeof *out);
    home %= c->nparts;
    out->multi = c->nparts > 1 && c->multi_partition > 0 && ycsb_rand_unit(rng) < c->multi_partition;
    bool remote[YCSB_OPS] = {false};
    if (out->multi) {
        out->other_part = wl_other_part(ycsb_rand(rng) >> 11, c->nparts, home, c->hosts);
        /* half of the operations, at random positions */
        uint32_t pos[YCSB_OPS];
        for (uint32_t i = 0; i < YCSB_OPS; i++) pos[i] = i;
        for (uint32_t i = 0; i < YCSB_OPS / 2; i++) {
            uint32_t j = i + (uint32_t)uniform_below(rng, YCSB_OPS - i);
            uint32_t x = pos[i];
            pos[i] = pos[j];
            pos[j] = x;
            remote[pos[i]] = true;
        }
    }
    for (uint32_t i = 0; i < YCSB_OPS; i++) {
        uint32_t part = remote[i] ? out->other_part : home;
        uint64_t id;
        bool dup;
        do { /* distinct keys within a transaction (ycsb_register makes every
              * partition hold at least YCSB_OPS tuples) */
            id = pick_key(g, rng, part);
            dup = false;
            for (uint32_t j = 0; j < i; j++) dup |= out->ops[j].id == id;
        } while (dup);
        out->ops[i].id = id;
        out->ops[i].write = uniform_below(rng, 100) >= c->read_pct;
        out->ops[i].col = (uint32_t)uniform_below(rng, YCSB_COLS);
        out->nwrites += out->ops[i].write;
    }
    out->nargs = 2;
    out->args[0] = pod_v_bytes(out->ops, (uint32_t)sizeof out->ops);
    out->args[1] = pod_v_i64((int64_t)(ycsb_rand(rng) >> 1));
}
