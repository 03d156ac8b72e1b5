/* Phantoms and next-key locking (src/txn/txn.c, invariant 4); also built with
 * ThreadSanitizer by make tsan.
 *
 * A table of keys 0..999 starts with the even keys. Writers insert and
 * delete odd keys around the range [100,200] (each in its own transaction,
 * some inserts aborting after the insert), while readers run transactions
 * that look at the range twice: a forward scan twice, a reverse scan twice,
 * a limited scan twice (forward and reverse), a forward scan then a reverse
 * scan, and a lookup of an odd key twice; with protection on also a scan,
 * an insert or delete of their own in the range, and a scan that must show
 * exactly that change (committed or rolled back).
 *  - With phantom_protection on, both looks must agree in every transaction
 *    (and at least a minimum number of comparisons must have been made);
 *    once with the even keys, once with every 8th key (wider gaps).
 *  - With it off, the same workload must show the anomaly: at least one
 *    committed transaction whose second look saw a row the first did not.
 *  - Deterministic rounds with two workers in lock step: the reader does its
 *    first look, the writer tries one change, the reader looks again and
 *    commits. With protection on, a change inside the locked range fails
 *    with the expected conflict cause on every attempt (max_retries is small
 *    so the writer's call ends in POD_E_RETRIES) and succeeds once the reader
 *    committed; with it off, inserts commit at once and the reader's second
 *    look sees them. Changes outside the locked gaps commit in both modes,
 *    and row locks stop deletes and updates in both modes.
 *  - Stalls at the btree's race points (bt_race_point, defined here) open
 *    two windows deterministically: an insert into a gap whose next key the
 *    inserter holds shared (insert_into_own_gap_window), and a key appearing
 *    in a gap while a reader searches for and locks its next key
 *    (gap_appears_while_locking).
 * PHANTOM_MT_MS=N sets each random run's length (default 1500 ms, 3000
 * under TSan); PHANTOM_MT_SEED=N fixes the seed. */
#include <check.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "poddb/proc.h"
#include "engine/db.h"
#include "engine/result.h"
#include "engine/worker.h"
#include "storage/table.h" /* the index itself: to find a leaf boundary */
#include "util/clock.h"
#include "helpers/testutil.h"

#define NKEYS 1000
#define LO 100
#define HI 200
#define MAXROWS 128 /* rows a look at [LO,HI] can return */
#define DET_RETRIES 6

struct row {
    int64_t val; /* committed rows: val_of(key); an insert that aborts writes ABORTED_VAL */
};
#define ABORTED_VAL (-777)
static int64_t val_of(uint64_t k) { return (int64_t)k * 7 + 1; }

/* The table starts with the multiples of g_stride: 2 (the even keys), or 8
 * for the sparse variant, whose gaps leave room for a key to appear between
 * a looked-up key and the key after it. Set before any worker starts. */
static int g_stride = 2;


/* A key writers insert and delete: not a multiple of g_stride, in or right
 * next to [LO,HI] (stride 2: the odd keys 99..201). */
static int64_t changing_key(uint64_t *s)
{
    int64_t lo = LO - g_stride / 2, hi = HI + g_stride / 2;
    int64_t k = lo + (int64_t)(pod_rand(s) % (uint64_t)(hi - lo + 1));
    if (k % g_stride == 0) k++;
    return k;
}

/* ---- failures seen on worker threads ------------------------------------------- */

static void spin_us(int64_t us)
{
    if (us <= 0) return;
    uint64_t end = pod_mono_ns() + (uint64_t)us * 1000;
    while (pod_mono_ns() < end) sched_yield();
}

/* ---- the database --------------------------------------------------------------- */

enum { P_LOAD, P_INS, P_DEL, P_PUT, P_LOOK, P_DET_LOOK, P_WIN_A, P_WIN_B, P_GAP_R, P_COUNT };
static const char *const proc_names[P_COUNT] = {"load",  "insert", "delete", "put",  "look",
                                                "det_look", "win_a", "win_b", "gap_r"};

struct det; /* the deterministic rounds' shared state */

struct ph {
    pod_db *db;
    pod_table *t;
    int proc[P_COUNT];
    uint64_t write_attempts; /* atomic: attempts of insert/delete/put procedures */
    struct det *det;
};

static int64_t arg(const pod_args *a, int i) { return a->v[i].u.i64; }

static int p_load(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct ph *h = ctx;
    (void)a;
    (void)res;
    for (uint64_t k = 0; k < NKEYS; k += (uint64_t)g_stride) {
        unsigned char key[8];
        pod_key_u64(key, k);
        struct row r = {val_of(k)};
        int rc = pod_insert(tx, h->t, key, &r);
        if (rc < 0) return rc;
        if (rc != POD_OK) return pod_txn_fail(tx, POD_E_INTERNAL, "load: %s", pod_status_name(rc));
    }
    return POD_OK;
}

/* The start of a writing procedure: its attempt counted, the key of its first
 * argument in key. */
static struct ph *write_attempt(const pod_args *a, void *ctx, unsigned char key[8])
{
    struct ph *h = ctx;
    __atomic_fetch_add(&h->write_attempts, 1, __ATOMIC_RELAXED);
    pod_key_u64(key, (uint64_t)arg(a, 0));
    return h;
}

/* insert(key, abort_after): POD_OK or POD_EXISTS; abort_after rolls it back. */
static int p_ins(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    unsigned char key[8];
    struct ph *h = write_attempt(a, ctx, key);
    bool abort_after = arg(a, 1) != 0;
    struct row r = {abort_after ? ABORTED_VAL : val_of((uint64_t)arg(a, 0))};
    int rc = pod_insert(tx, h->t, key, &r);
    if (rc < 0) return rc;
    if (rc == POD_OK && abort_after) return POD_USER_ABORT;
    return rc;
}

/* delete(key): POD_OK or POD_NOT_FOUND. */
static int p_del(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    unsigned char key[8];
    struct ph *h = write_attempt(a, ctx, key);
    return pod_delete(tx, h->t, key);
}

/* put(key, val): overwrite. */
static int p_put(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    unsigned char key[8];
    struct ph *h = write_attempt(a, ctx, key);
    struct row r = {arg(a, 1)};
    return pod_put(tx, h->t, key, &r);
}

/* ---- looks: what a reader sees of [LO,HI] ----------------------------------------- */

enum look_kind {
    L_FWD,      /* forward scan twice */
    L_REV,      /* reverse scan twice */
    L_LIM_FWD,  /* forward scan with a limit, twice */
    L_LIM_REV,  /* reverse scan with a limit, twice */
    L_FWD_REV,  /* forward scan, then reverse scan (compared reversed) */
    L_GET,      /* pod_get of one key twice */
    L_NPLAIN,   /* the looks above; the two below only with phantom protection on */
    L_INS_SELF = L_NPLAIN, /* scan, insert a key of the range, scan: exactly that key more */
    L_DEL_SELF, /* scan, delete an odd key seen, scan: exactly that key less */
    L_COUNT
};
static const char *const look_names[L_COUNT] = {"fwd",     "rev", "lim_fwd",  "lim_rev",
                                                "fwd_rev", "get", "ins_self", "del_self"};

struct seen {
    uint64_t keys[MAXROWS];
    int n;
    int bad;   /* a row with a wrong value, out of range, out of order, or too many */
    bool reverse;
    int status; /* L_GET: POD_OK or POD_NOT_FOUND */
};

/* Note key k in s; bad: its row is wrong. Out of order or one key too many is
 * bad too. */
static bool note_key(struct seen *s, uint64_t k, bool bad)
{
    if (bad) s->bad++;
    if (s->n > 0 && (s->reverse ? k >= s->keys[s->n - 1] : k <= s->keys[s->n - 1])) s->bad++;
    if (s->n == MAXROWS) {
        s->bad++;
        return false;
    }
    s->keys[s->n++] = k;
    return true;
}

static bool collect(void *arg, const void *key, const void *tuple)
{
    uint64_t k = pod_key_get_u64(key);
    struct row r;
    memcpy(&r, tuple, sizeof r);
    return note_key(arg, k, r.val != val_of(k) || k < LO || k > HI);
}

/* For looks outside [LO,HI]: order and values only. */
static bool collect_any(void *arg, const void *key, const void *tuple)
{
    uint64_t k = pod_key_get_u64(key);
    struct row r;
    memcpy(&r, tuple, sizeof r);
    return note_key(arg, k, r.val != val_of(k));
}

/* One look; limit applies to the scans with a limit, key to L_GET. */
static int look_once(pod_txn *tx, struct ph *h, int kind, bool second, uint64_t key,
                     uint32_t limit, struct seen *s)
{
    unsigned char lo[8], hi[8];
    pod_key_u64(lo, LO);
    pod_key_u64(hi, HI);
    memset(s, 0, sizeof *s);
    switch (kind) {
    case L_FWD:
    case L_INS_SELF:
    case L_DEL_SELF: return pod_scan(tx, h->t, lo, hi, 0, 0, collect, s);
    case L_REV:
        s->reverse = true;
        return pod_scan(tx, h->t, lo, hi, 0, POD_SCAN_REVERSE, collect, s);
    case L_LIM_FWD: return pod_scan(tx, h->t, lo, hi, limit, 0, collect, s);
    case L_LIM_REV:
        s->reverse = true;
        return pod_scan(tx, h->t, lo, hi, limit, POD_SCAN_REVERSE, collect, s);
    case L_FWD_REV:
        s->reverse = second;
        return pod_scan(tx, h->t, lo, hi, 0, second ? POD_SCAN_REVERSE : 0, collect, s);
    case L_GET: {
        unsigned char k[8];
        pod_key_u64(k, key);
        struct row r;
        int rc = pod_get(tx, h->t, k, &r);
        if (rc < 0) return rc;
        s->status = rc;
        if (rc == POD_OK) {
            if (r.val != val_of(key)) s->bad++;
            s->keys[s->n++] = key;
        }
        return POD_OK;
    }
    }
    return pod_txn_fail(tx, POD_E_INVALID, "no look %d", kind);
}

/* The first look in ascending order (the second of L_FWD_REV is reversed). */
static void ascending(const struct seen *s, uint64_t *out)
{
    for (int i = 0; i < s->n; i++) out[i] = s->reverse ? s->keys[s->n - 1 - i] : s->keys[i];
}

/* Result row: equal (1/0), first count, second count, bad rows, first look
 * a subset of the second (1/0), the key the second saw that the first did
 * not (or -1). */
static void compare_looks(const struct seen *a, const struct seen *b, pod_result *res)
{
    uint64_t x[MAXROWS], y[MAXROWS];
    ascending(a, x);
    ascending(b, y);
    bool equal = a->n == b->n && a->status == b->status && memcmp(x, y, sizeof x[0] * a->n) == 0;
    /* Subset test on sorted arrays; record the first extra key of b. */
    bool subset = true;
    int64_t extra = -1;
    int i = 0, j = 0;
    while (i < a->n && j < b->n) {
        if (x[i] == y[j]) i++, j++;
        else if (x[i] > y[j]) {
            if (extra < 0) extra = (int64_t)y[j];
            j++;
        } else {
            subset = false;
            i++;
        }
    }
    if (i < a->n) subset = false;
    if (j < b->n && extra < 0) extra = (int64_t)y[j];
    pod_result_i64(res, equal);
    pod_result_i64(res, a->n);
    pod_result_i64(res, b->n);
    pod_result_i64(res, a->bad + b->bad);
    pod_result_i64(res, subset);
    pod_result_i64(res, extra);
}

/* The scanned range is locked: insert `key` if the first scan did not see
 * it (L_INS_SELF), or delete the first odd key it saw (L_DEL_SELF); the
 * second scan must show exactly that change (the first look, changed, is
 * compared with the second). Commits, or with arg 4 set rolls back after the
 * second scan. */
static int self_change(pod_txn *tx, struct ph *h, const pod_args *a, pod_result *res,
                       struct seen *s1)
{
    int kind = (int)arg(a, 0);
    uint64_t key = (uint64_t)arg(a, 1);
    struct seen want = *s1, s2;
    int pos = 0;
    unsigned char k[8];
    if (kind == L_INS_SELF) {
        while (pos < want.n && want.keys[pos] < key) pos++;
        if ((pos == want.n || want.keys[pos] != key) && want.n < MAXROWS && key >= LO &&
            key <= HI) {
            pod_key_u64(k, key);
            struct row r = {val_of(key)};
            int rc = pod_insert(tx, h->t, k, &r);
            if (rc < 0) return rc;
            /* The range is locked: nobody can have put the key there. */
            if (rc != POD_OK) want.bad++;
            memmove(&want.keys[pos + 1], &want.keys[pos], sizeof want.keys[0] * (want.n - pos));
            want.keys[pos] = key;
            want.n++;
        }
    } else {
        while (pos < want.n && want.keys[pos] % (uint64_t)g_stride == 0) pos++;
        if (pos < want.n) {
            pod_key_u64(k, want.keys[pos]);
            int rc = pod_delete(tx, h->t, k);
            if (rc < 0) return rc;
            if (rc != POD_OK) want.bad++;
            if ((rc = pod_get(tx, h->t, k, NULL)) < 0) return rc;
            if (rc != POD_NOT_FOUND) want.bad++;
            memmove(&want.keys[pos], &want.keys[pos + 1], sizeof want.keys[0] * (want.n - pos - 1));
            want.n--;
        }
    }
    POD_TRY(look_once(tx, h, kind, true, key, 0, &s2));
    compare_looks(&want, &s2, res);
    return arg(a, 4) ? POD_USER_ABORT : POD_OK;
}

/* look(kind, key, limit, spin_us, abort): look twice with a pause in between. */
static int p_look(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct ph *h = ctx;
    struct seen s1, s2;
    int kind = (int)arg(a, 0);
    uint64_t key = (uint64_t)arg(a, 1);
    uint32_t limit = (uint32_t)arg(a, 2);
    POD_TRY(look_once(tx, h, kind, false, key, limit, &s1));
    spin_us(arg(a, 3));
    if (kind == L_INS_SELF || kind == L_DEL_SELF) return self_change(tx, h, a, res, &s1);
    POD_TRY(look_once(tx, h, kind, true, key, limit, &s2));
    compare_looks(&s1, &s2, res);
    return POD_OK;
}

static struct ph *ph_new(int nworkers, bool protect, int max_retries)
{
    char err[256];
    struct ph *h = calloc(1, sizeof *h);
    ck_assert_ptr_nonnull(h);
    h->db = pod_db_new(&(struct pod_db_options){.nworkers = nworkers, .host_id = 0, .nhosts = 1,
                                                .phantom_protection = protect,
                                                .max_retries = max_retries, .store = tu_store},
                       err, sizeof err);
    ck_assert_msg(h->db, "pod_db_new: %s", err);
    tu_check_protocol(h->db);
    static const pod_column cols[] = {{"val", POD_COL_I64, 0, 8}};
    h->t = pod_table_create(h->db, &(pod_table_def){.name = "t", .key_size = 8,
                                                     .tuple_size = sizeof(struct row), .ncols = 1,
                                                     .cols = cols},
                            err, sizeof err);
    ck_assert_msg(h->t, "pod_table_create: %s", err);
    return h;
}

static void ph_free(struct ph *h)
{
    pod_db_free(h->db);
    free(h);
}

static int p_det_look(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx);
static int p_win_a(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx);
static int p_win_b(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx);
static int p_gap_r(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx);

static void ph_register(struct ph *h)
{
    static const pod_proc_fn fns[P_COUNT] = {p_load,     p_ins,   p_del,   p_put,  p_look,
                                             p_det_look, p_win_a, p_win_b, p_gap_r};
    static const int nargs[P_COUNT] = {0, 2, 1, 2, 5, 1, 0, 0, 0};
    static const enum pod_type i64s[5] = {POD_T_I64, POD_T_I64, POD_T_I64, POD_T_I64, POD_T_I64};
    char err[256];
    for (int p = 0; p < P_COUNT; p++) {
        char name[32];
        snprintf(name, sizeof name, "ph.%s", proc_names[p]);
        h->proc[p] = pod_proc_register(h->db, &(pod_proc_def){.name = name, .fn = fns[p],
                                                               .ctx = h, .nargs = nargs[p],
                                                               .arg_types = i64s},
                                       err, sizeof err);
        ck_assert_msg(h->proc[p] >= 0, "pod_proc_register: %s", err);
    }
    pod_result *res = pod_result_new();
    char msg[256];
    struct pod_worker *adm = pod_admin_begin(h->db);
    int rc = pod_call(adm, h->proc[P_LOAD], &(pod_args){0, NULL}, res, msg, sizeof msg);
    pod_admin_end(h->db);
    ck_assert_msg(rc == POD_OK, "load: %s", msg);
    pod_result_free(res);
}

static int64_t res_at(const pod_result *res, int col)
{
    pod_value v;
    if (pod_result_get(res, 0, col, &v) != 0 || v.type != POD_T_I64) return INT64_MIN;
    return v.u.i64;
}

/* ---- random workload -------------------------------------------------------------- */

struct rstats {
    uint64_t looks[L_COUNT];     /* committed looks, i.e. comparisons made */
    uint64_t differ[L_COUNT];    /* ... whose two looks differed */
    uint64_t inserts, deletes, aborted_inserts, writer_calls;
    int64_t example_extra;       /* a key a second look saw that the first did not */
    int example_kind;
};

struct rrun {
    struct ph *h;
    bool protect;
    uint64_t seed, deadline_ns;
    uint64_t max_iters;
    int spin_max_us;
    uint64_t anomalies; /* atomic: unprotected runs stop once enough were seen */
    /* atomic: the writers' work so far (an unprotected run stops early only
     * after as much as the checks below ask of every run) */
    uint64_t inserts, deletes, aborted_inserts;
    struct rstats st[8];
};

static void writer_iter(struct pod_worker *w, struct rrun *r, struct rstats *st, uint64_t *s,
                        pod_result *res)
{
    struct ph *h = r->h;
    /* Odd keys 99..201: inside the range and right at both of its edges. */
    int64_t k = changing_key(s);
    char msg[256];
    int rc;
    unsigned op = (unsigned)(pod_rand(s) % 10);
    st->writer_calls++;
    if (op < 5) {
        bool abort_after = op == 0;
        pod_value v[2] = {pod_v_i64(k), pod_v_i64(abort_after)};
        rc = pod_call(w, h->proc[P_INS], &(pod_args){2, v}, res, msg, sizeof msg);
        if (abort_after && (rc == POD_USER_ABORT || rc == POD_EXISTS)) {
            st->aborted_inserts += rc == POD_USER_ABORT;
            if (rc == POD_USER_ABORT) __atomic_fetch_add(&r->aborted_inserts, 1, __ATOMIC_RELAXED);
            return;
        }
        if (rc == POD_OK) {
            st->inserts++;
            __atomic_fetch_add(&r->inserts, 1, __ATOMIC_RELAXED);
        } else if (rc != POD_EXISTS) tu_fail("writer: insert %" PRId64 ": %s", k, msg);
    } else {
        pod_value v[1] = {pod_v_i64(k)};
        rc = pod_call(w, h->proc[P_DEL], &(pod_args){1, v}, res, msg, sizeof msg);
        if (rc == POD_OK) {
            st->deletes++;
            __atomic_fetch_add(&r->deletes, 1, __ATOMIC_RELAXED);
        } else if (rc != POD_NOT_FOUND) tu_fail("writer: delete %" PRId64 ": %s", k, msg);
    }
}

static void reader_iter(struct pod_worker *w, struct rrun *r, struct rstats *st, uint64_t *s,
                        pod_result *res)
{
    struct ph *h = r->h;
    int kind = (int)(pod_rand(s) % (r->protect ? L_COUNT : L_NPLAIN));
    int64_t key = changing_key(s);
    int64_t limit = 1 + (int64_t)(pod_rand(s) % 12);
    int64_t spin = r->spin_max_us ? (int64_t)(pod_rand(s) % (uint64_t)(r->spin_max_us + 1)) : 0;
    bool abort_after = kind >= L_NPLAIN && pod_rand(s) % 2;
    pod_value v[5] = {pod_v_i64(kind), pod_v_i64(key), pod_v_i64(limit), pod_v_i64(spin),
                      pod_v_i64(abort_after)};
    char msg[256];
    int rc = pod_call(w, h->proc[P_LOOK], &(pod_args){5, v}, res, msg, sizeof msg);
    if (rc != (abort_after ? POD_USER_ABORT : POD_OK)) {
        tu_fail("reader: look %s returned %s: %s", look_names[kind], pod_status_name(rc), msg);
        return;
    }
    int64_t equal = res_at(res, 0), n1 = res_at(res, 1), n2 = res_at(res, 2);
    int64_t bad = res_at(res, 3), subset = res_at(res, 4), extra = res_at(res, 5);
    st->looks[kind]++;
    if (bad) {
        tu_fail("reader: look %s (key %" PRId64 ") found %" PRId64 " bad rows: a wrong value (an "
                "aborted insert?), out of [%d,%d] or out of order, or (ins_self, del_self) its "
                "own insert or delete found the key other than its first scan had",
                look_names[kind], key, bad, LO, HI);
        return;
    }
    if (kind == L_LIM_FWD || kind == L_LIM_REV) {
        if (n1 > limit || n2 > limit)
            tu_fail("reader: limit %" PRId64 " scan returned %" PRId64 "/%" PRId64 " rows", limit,
                    n1, n2);
    }
    if (equal == 1) return;
    st->differ[kind]++;
    if (r->protect) {
        tu_fail("reader: phantom with protection on: look %s (key %" PRId64 ", limit %" PRId64
                ") saw %" PRId64 " then %" PRId64 " rows; extra key %" PRId64,
                look_names[kind], key, limit, n1, n2, extra);
        return;
    }
    /* Without phantom protection rows already seen are still locked: the
     * second look may only have more (for a limited scan: other rows,
     * because a new row can push the last one out). */
    if (kind != L_LIM_FWD && kind != L_LIM_REV && !subset)
        tu_fail("reader: look %s lost a row it had seen and still holds a lock on (%" PRId64
                " then %" PRId64 " rows)", look_names[kind], n1, n2);
    st->example_extra = extra;
    st->example_kind = kind;
    __atomic_fetch_add(&r->anomalies, 1, __ATOMIC_RELAXED);
}

static void random_body(struct pod_worker *w, void *arg)
{
    struct rrun *r = arg;
    struct rstats *st = &r->st[w->id];
    uint64_t s = r->seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1));
    if (!s) s = 1;
    pod_result *res = pod_result_new();
    bool writer = w->id % 2 == 0;
    for (uint64_t it = 0; it < r->max_iters && !tu_failed(); it++) {
        if ((it & 7) == 0) {
            if (pod_mono_ns() > r->deadline_ns) break;
            /* Unprotected: enough anomalies and writes seen, stop early. */
            if (!r->protect && __atomic_load_n(&r->anomalies, __ATOMIC_RELAXED) >= 20 &&
                __atomic_load_n(&r->inserts, __ATOMIC_RELAXED) > 50 &&
                __atomic_load_n(&r->deletes, __ATOMIC_RELAXED) > 50 &&
                __atomic_load_n(&r->aborted_inserts, __ATOMIC_RELAXED) > 0)
                break;
        }
        if (writer) writer_iter(w, r, st, &s, res);
        else reader_iter(w, r, st, &s, res);
    }
    pod_result_free(res);
}

static int run_ms(void) { return tu_env_ms("PHANTOM_MT_MS", TU_TSAN_OR(1500, 3000)); }

static uint64_t seed(void) { return tu_env_seed("PHANTOM_MT_SEED"); }

static void run_random(bool protect, int stride)
{
    g_stride = stride;
    tu_fail_reset();
    const int nworkers = 4;
    struct ph *h = ph_new(nworkers, protect, 0);
    ph_register(h);
    struct rrun *r = calloc(1, sizeof *r);
    ck_assert_ptr_nonnull(r);
    r->h = h;
    r->protect = protect;
    r->seed = seed();
    r->max_iters = 1000000;
    r->spin_max_us = protect ? 20 : 50;
    int ms = run_ms();
    uint64_t t0 = pod_mono_ns();
    r->deadline_ns = t0 + (uint64_t)ms * 1000000ull;
    fprintf(stderr, "phantom %s, base keys every %d: %d workers, up to %d ms, seed 0x%" PRIx64
            "\n", protect ? "protected" : "unprotected", stride, nworkers, ms, r->seed);
    double secs = tu_run_workers(h->db, random_body, r, r->seed);

    struct rstats tot = {.example_extra = -1};
    for (int i = 0; i < nworkers; i++) {
        for (int k = 0; k < L_COUNT; k++) {
            tot.looks[k] += r->st[i].looks[k];
            tot.differ[k] += r->st[i].differ[k];
        }
        tot.inserts += r->st[i].inserts;
        tot.deletes += r->st[i].deletes;
        tot.aborted_inserts += r->st[i].aborted_inserts;
        tot.writer_calls += r->st[i].writer_calls;
        if (r->st[i].example_extra >= 0) {
            tot.example_extra = r->st[i].example_extra;
            tot.example_kind = r->st[i].example_kind;
        }
    }
    uint64_t looks = 0, differ = 0;
    fprintf(stderr, "  %.2f s: writers %" PRIu64 " calls, %" PRIu64 " inserts, %" PRIu64
            " deletes, %" PRIu64 " aborted inserts\n  comparisons (differing):",
            secs, tot.writer_calls, tot.inserts, tot.deletes, tot.aborted_inserts);
    for (int k = 0; k < L_COUNT; k++) {
        fprintf(stderr, " %s %" PRIu64 " (%" PRIu64 ")", look_names[k], tot.looks[k],
                tot.differ[k]);
        looks += tot.looks[k];
        differ += tot.differ[k];
    }
    fprintf(stderr, "\n");
    for (int p = P_INS; p <= P_LOOK; p++) {
        struct pod_proc_stats st;
        pod_db_proc_stats(h->db, h->proc[p], &st);
        fprintf(stderr, "  %-7s commits %6" PRIu64 "  user_aborts %5" PRIu64 "  errors %" PRIu64
                "  conflicts %6" PRIu64 " (read_lock %" PRIu64 ", write_lock %" PRIu64
                ", upgrade %" PRIu64 ", next_key %" PRIu64 ")\n",
                proc_names[p], st.commits, st.user_aborts, st.errors, st.conflicts,
                st.by_cause[POD_CAUSE_READ_LOCK], st.by_cause[POD_CAUSE_WRITE_LOCK],
                st.by_cause[POD_CAUSE_UPGRADE], st.by_cause[POD_CAUSE_NEXT_KEY]);
        ck_assert_uint_eq(st.errors, 0);
        ck_assert_uint_eq(st.gave_up, 0);
    }
    ck_assert_uint_gt(tot.inserts, 50);
    ck_assert_uint_gt(tot.deletes, 50);
    ck_assert_uint_gt(tot.aborted_inserts, 0);
    if (protect) {
        ck_assert_uint_eq(differ, 0);
        /* Not vacuous: many comparisons of every kind, with writers active. */
        ck_assert_uint_ge(looks, 300);
        for (int k = 0; k < L_COUNT; k++)
            ck_assert_msg(tot.looks[k] >= 10, "only %" PRIu64 " %s comparisons", tot.looks[k],
                          look_names[k]);
        struct pod_proc_stats ins;
        pod_db_proc_stats(h->db, h->proc[P_INS], &ins);
        ck_assert_msg(ins.by_cause[POD_CAUSE_NEXT_KEY] > 0,
                      "no insert was ever stopped by a next-key lock");
    } else {
        ck_assert_msg(differ > 0,
                      "phantom_protection=false, yet no transaction saw its two looks at "
                      "[%d,%d] differ in %.2f s (%" PRIu64 " comparisons, %" PRIu64
                      " inserts): protection is not really off, or the test is too weak",
                      LO, HI, secs, looks, tot.inserts);
        fprintf(stderr, "  anomaly observed: %" PRIu64 " transactions; e.g. a %s look whose "
                "second pass saw key %" PRId64 "\n", differ, look_names[tot.example_kind],
                tot.example_extra);
    }
    free(r);
    ph_free(h);
}

START_TEST(random_protected) { run_random(true, 2); }
END_TEST

START_TEST(random_protected_sparse) { run_random(true, 8); }
END_TEST

START_TEST(random_unprotected_shows_phantoms) { run_random(false, 2); }
END_TEST

/* ---- deterministic rounds ---------------------------------------------------------- */

enum wop { W_INS, W_DEL, W_PUT };
enum expect {
    E_BLOCK,   /* the writer's every attempt conflicts; the reader sees no change */
    E_PHANTOM, /* the writer commits at once; the reader's second look sees it */
    E_COMMIT,  /* the writer commits at once; the reader's looks agree */
};
static const char *const expect_names[] = {"block", "phantom", "commit"};

struct round {
    int look;           /* enum look_kind */
    int64_t look_arg;   /* L_GET: the key; limited scans: the limit */
    int op;             /* enum wop */
    int64_t key;
    int protected_, unprotected; /* enum expect for each mode */
    int cause;          /* POD_CAUSE_* expected for E_BLOCK */
};

#define NK POD_CAUSE_NEXT_KEY
#define WL POD_CAUSE_WRITE_LOCK
static const struct round rounds[] = {
    /* Inserts into the scanned range, at its edges and in the gaps the
     * next-key locks cover just outside it (99: below 100; 201: the key
     * after the range, 202, is locked). */
    {L_FWD, 0, W_INS, 151, E_BLOCK, E_PHANTOM, NK},
    {L_FWD, 0, W_INS, 101, E_BLOCK, E_PHANTOM, NK},
    {L_FWD, 0, W_INS, 199, E_BLOCK, E_PHANTOM, NK},
    {L_FWD, 0, W_INS, 99, E_BLOCK, E_COMMIT, NK},
    {L_FWD, 0, W_INS, 201, E_BLOCK, E_COMMIT, NK},
    /* Gaps no lock of the scan covers. */
    {L_FWD, 0, W_INS, 97, E_COMMIT, E_COMMIT, 0},
    {L_FWD, 0, W_INS, 203, E_COMMIT, E_COMMIT, 0},
    /* Row locks hold in both modes. */
    {L_FWD, 0, W_DEL, 150, E_BLOCK, E_BLOCK, WL},
    {L_FWD, 0, W_PUT, 100, E_BLOCK, E_BLOCK, WL},
    {L_FWD, 0, W_DEL, 210, E_COMMIT, E_COMMIT, 0},
    {L_REV, 0, W_INS, 151, E_BLOCK, E_PHANTOM, NK},
    {L_REV, 0, W_INS, 101, E_BLOCK, E_PHANTOM, NK},
    {L_REV, 0, W_INS, 199, E_BLOCK, E_PHANTOM, NK},
    {L_REV, 0, W_INS, 201, E_BLOCK, E_COMMIT, NK},
    {L_REV, 0, W_INS, 97, E_COMMIT, E_COMMIT, 0},
    {L_REV, 0, W_DEL, 200, E_BLOCK, E_BLOCK, WL},
    {L_FWD_REV, 0, W_INS, 133, E_BLOCK, E_PHANTOM, NK},
    /* A limited scan locks only the rows it returned (and their gaps). */
    {L_LIM_FWD, 3, W_INS, 103, E_BLOCK, E_PHANTOM, NK},
    {L_LIM_FWD, 3, W_INS, 151, E_COMMIT, E_COMMIT, 0},
    {L_LIM_REV, 3, W_INS, 197, E_BLOCK, E_PHANTOM, NK},
    {L_LIM_REV, 3, W_INS, 151, E_COMMIT, E_COMMIT, 0},
    /* A lookup of a missing key locks the gap it would be in. */
    {L_GET, 151, W_INS, 151, E_BLOCK, E_PHANTOM, NK},
    {L_GET, 151, W_INS, 153, E_COMMIT, E_COMMIT, 0},
    {L_GET, 150, W_DEL, 150, E_BLOCK, E_BLOCK, WL},
    {L_GET, 150, W_PUT, 150, E_BLOCK, E_BLOCK, WL},
};
#define NROUNDS ((int)(sizeof rounds / sizeof rounds[0]))

struct det {
    bool protect;
    uint64_t first_done;   /* atomic: round+1 whose first look is done (reader -> writer) */
    uint64_t writer_done;  /* atomic: round+1 whose writer call returned */
    uint64_t reader_done;  /* atomic: round+1 whose reader call returned */
    uint64_t cleanup_done; /* atomic: round+1 whose writer cleaned up */
    /* Per round, written by one thread, read by main after join. */
    int writer_rc[64], after_rc[64];
    uint64_t writer_attempts[64];
    uint64_t writer_conflicts[64], writer_cause[64];
    int reader_rc[64];
    int64_t equal[64], n1[64], n2[64], extra[64], bad[64];
    int reader_timed_out[64];
    /* The writer's calls per procedure, by what pod_call returned. */
    uint64_t calls[P_COUNT], ok[P_COUNT], uaborts[P_COUNT], retries[P_COUNT], other[P_COUNT];
    int first_status[64], second_status[64];
};

static bool wait_for(const uint64_t *word, uint64_t want, int timeout_ms)
{
    uint64_t end = pod_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (__atomic_load_n(word, __ATOMIC_ACQUIRE) < want) {
        if (pod_mono_ns() > end) return false;
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    return true;
}

/* det_look(round): the round's first look, then wait (bounded) for the
 * writer's call to return, then the second look; all in one transaction. */
static int p_det_look(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct ph *h = ctx;
    struct det *d = h->det;
    int i = (int)arg(a, 0);
    const struct round *rd = &rounds[i];
    struct seen s1, s2;
    uint64_t key = rd->look == L_GET ? (uint64_t)rd->look_arg : 0;
    uint32_t limit = rd->look == L_GET ? 0 : (uint32_t)rd->look_arg;
    POD_TRY(look_once(tx, h, rd->look, false, key, limit, &s1));
    __atomic_store_n(&d->first_done, (uint64_t)i + 1, __ATOMIC_RELEASE);
    bool ok = wait_for(&d->writer_done, (uint64_t)i + 1, 5000);
    POD_TRY(look_once(tx, h, rd->look, true, key, limit, &s2));
    compare_looks(&s1, &s2, res);
    pod_result_i64(res, !ok);
    pod_result_i64(res, s1.status);
    pod_result_i64(res, s2.status);
    return POD_OK;
}

/* One call of the writer, tallied per procedure by outcome. */
static int counted_call(struct pod_worker *w, struct ph *h, int p, const pod_value *v, int n,
                        char *msg, size_t msglen, pod_result *res)
{
    int rc = pod_call(w, h->proc[p], &(pod_args){n, v}, res, msg, msglen);
    struct det *d = h->det;
    d->calls[p]++;
    if (rc >= 0) d->ok[p]++;
    else if (rc == POD_USER_ABORT) d->uaborts[p]++;
    else if (rc == POD_E_RETRIES) d->retries[p]++;
    else d->other[p]++;
    return rc;
}

static int writer_call(struct pod_worker *w, struct ph *h, int op, int64_t key, bool undo,
                       char *msg, size_t msglen, pod_result *res)
{
    pod_value ins[2] = {pod_v_i64(key), pod_v_i64(0)}, del[1] = {pod_v_i64(key)};
    /* W_PUT writes the same value back: a write that changes nothing a scan
     * compares, yet needs the exclusive lock. */
    pod_value put[2] = {pod_v_i64(key), pod_v_i64(val_of((uint64_t)key))};
    switch (op) {
    case W_INS:
        return undo ? counted_call(w, h, P_DEL, del, 1, msg, msglen, res)
                    : counted_call(w, h, P_INS, ins, 2, msg, msglen, res);
    case W_DEL:
        return undo ? counted_call(w, h, P_INS, ins, 2, msg, msglen, res)
                    : counted_call(w, h, P_DEL, del, 1, msg, msglen, res);
    case W_PUT: return counted_call(w, h, P_PUT, put, 2, msg, msglen, res);
    }
    return POD_E_INVALID;
}

static int proc_of(int op) { return op == W_INS ? P_INS : op == W_DEL ? P_DEL : P_PUT; }

static void det_writer(struct pod_worker *w, struct ph *h, struct det *d, pod_result *res)
{
    char msg[256];
    for (int i = 0; i < NROUNDS && !tu_failed(); i++) {
        const struct round *rd = &rounds[i];
        if (!wait_for(&d->first_done, (uint64_t)i + 1, 10000)) {
            tu_fail("round %d: the reader's first look never came", i);
            return;
        }
        struct pod_proc_stats before, after;
        int p = proc_of(rd->op);
        pod_db_proc_stats(h->db, h->proc[p], &before);
        __atomic_store_n(&h->write_attempts, 0, __ATOMIC_RELAXED);
        d->writer_rc[i] = writer_call(w, h, rd->op, rd->key, false, msg, sizeof msg, res);
        d->writer_attempts[i] = __atomic_load_n(&h->write_attempts, __ATOMIC_RELAXED);
        pod_db_proc_stats(h->db, h->proc[p], &after);
        d->writer_conflicts[i] = after.conflicts - before.conflicts;
        /* Only count conflicts of the expected cause. */
        d->writer_cause[i] = after.by_cause[rd->cause] - before.by_cause[rd->cause];
        __atomic_store_n(&d->writer_done, (uint64_t)i + 1, __ATOMIC_RELEASE);
        if (!wait_for(&d->reader_done, (uint64_t)i + 1, 10000)) {
            tu_fail("round %d: the reader never finished", i);
            return;
        }
        /* The reader committed: a blocked change now goes through. */
        d->after_rc[i] = d->writer_rc[i] == POD_OK
                             ? POD_OK
                             : writer_call(w, h, rd->op, rd->key, false, msg, sizeof msg, res);
        /* Back to the initial state for the next round. */
        int rc = POD_OK;
        if (d->after_rc[i] == POD_OK && rd->op != W_PUT)
            rc = writer_call(w, h, rd->op, rd->key, true, msg, sizeof msg, res);
        if (rc != POD_OK) tu_fail("round %d: cleanup: %s", i, msg);
        __atomic_store_n(&d->cleanup_done, (uint64_t)i + 1, __ATOMIC_RELEASE);
    }
}

static void det_reader(struct pod_worker *w, struct ph *h, struct det *d, pod_result *res)
{
    char msg[256];
    for (int i = 0; i < NROUNDS && !tu_failed(); i++) {
        if (!wait_for(&d->cleanup_done, (uint64_t)i, 10000)) {
            tu_fail("round %d: the writer never cleaned up", i);
            return;
        }
        pod_value v[1] = {pod_v_i64(i)};
        d->reader_rc[i] = pod_call(w, h->proc[P_DET_LOOK], &(pod_args){1, v}, res, msg, sizeof msg);
        if (d->reader_rc[i] == POD_OK) {
            d->equal[i] = res_at(res, 0);
            d->n1[i] = res_at(res, 1);
            d->n2[i] = res_at(res, 2);
            d->bad[i] = res_at(res, 3);
            d->extra[i] = res_at(res, 5);
            d->reader_timed_out[i] = (int)res_at(res, 6);
            d->first_status[i] = (int)res_at(res, 7);
            d->second_status[i] = (int)res_at(res, 8);
        } else {
            tu_fail("round %d: reader: %s", i, msg);
        }
        __atomic_store_n(&d->reader_done, (uint64_t)i + 1, __ATOMIC_RELEASE);
    }
}

static void det_body(struct pod_worker *w, void *arg)
{
    struct ph *h = arg;
    pod_result *res = pod_result_new();
    if (w->id == 0) det_reader(w, h, h->det, res);
    else det_writer(w, h, h->det, res);
    pod_result_free(res);
}

/* Rows of [LO,HI] a look of this kind returns from the initial state. */
static int64_t initial_rows(const struct round *rd)
{
    int64_t all = (HI - LO) / 2 + 1;
    switch (rd->look) {
    case L_LIM_FWD:
    case L_LIM_REV: return rd->look_arg < all ? rd->look_arg : all;
    case L_GET: return rd->look_arg % 2 == 0;
    default: return all;
    }
}

static void run_det(bool protect)
{
    g_stride = 2;
    tu_fail_reset();
    struct ph *h = ph_new(2, protect, DET_RETRIES);
    ph_register(h);
    struct det *d = calloc(1, sizeof *d);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_le(NROUNDS, 64);
    d->protect = protect;
    h->det = d;
    char err[256];
    uint64_t t0 = pod_mono_ns();
    ck_assert_msg(pod_workers_start(h->db, NULL, 0, det_body, h, err, sizeof err) == 0,
                  "pod_workers_start: %s", err);
    pod_workers_join(h->db);
    if (tu_failed()) ck_abort_msg("%s", tu_failure());
    fprintf(stderr, "deterministic rounds, phantom protection %s: %.2f s\n",
            protect ? "on" : "off", (double)(pod_mono_ns() - t0) / 1e9);
    for (int i = 0; i < NROUNDS; i++) {
        const struct round *rd = &rounds[i];
        int want = protect ? rd->protected_ : rd->unprotected;
        char what[96];
        snprintf(what, sizeof what, "round %d (%s look, %s %" PRId64 ", expect %s)", i,
                 look_names[rd->look], rd->op == W_INS ? "insert" : rd->op == W_DEL ? "delete"
                                                                                     : "put",
                 rd->key, expect_names[want]);
        fprintf(stderr, "  %-44s writer %-18s attempts %" PRIu64 " conflicts %" PRIu64
                " (expected cause %" PRIu64 "); looks %" PRId64 " -> %" PRId64 "%s\n",
                what, pod_status_name(d->writer_rc[i]), d->writer_attempts[i],
                d->writer_conflicts[i], d->writer_cause[i], d->n1[i], d->n2[i],
                d->equal[i] ? "" : " DIFFER");
        ck_assert_msg(d->reader_rc[i] == POD_OK, "%s: reader %s", what,
                      pod_status_name(d->reader_rc[i]));
        ck_assert_msg(!d->reader_timed_out[i], "%s: the writer's call never returned", what);
        ck_assert_msg(d->bad[i] == 0, "%s: the reader saw bad rows", what);
        ck_assert_msg(d->n1[i] == initial_rows(rd), "%s: first look returned %" PRId64
                      " rows, want %" PRId64, what, d->n1[i], initial_rows(rd));
        switch (want) {
        case E_BLOCK:
            ck_assert_msg(d->writer_rc[i] == POD_E_RETRIES, "%s: writer got %s", what,
                          pod_status_name(d->writer_rc[i]));
            ck_assert_msg(d->writer_attempts[i] == DET_RETRIES, "%s: %" PRIu64 " attempts", what,
                          d->writer_attempts[i]);
            ck_assert_msg(d->writer_conflicts[i] == DET_RETRIES &&
                          d->writer_cause[i] == DET_RETRIES,
                          "%s: %" PRIu64 " conflicts, %" PRIu64 " of cause %s", what,
                          d->writer_conflicts[i], d->writer_cause[i],
                          pod_abort_cause_name(rd->cause));
            ck_assert_msg(d->equal[i] == 1, "%s: the reader's looks differ", what);
            ck_assert_msg(d->after_rc[i] == POD_OK, "%s: after the reader committed, the writer "
                          "got %s", what, pod_status_name(d->after_rc[i]));
            break;
        case E_PHANTOM:
            ck_assert_msg(d->writer_rc[i] == POD_OK && d->writer_attempts[i] == 1,
                          "%s: writer got %s after %" PRIu64 " attempts", what,
                          pod_status_name(d->writer_rc[i]), d->writer_attempts[i]);
            ck_assert_msg(d->equal[i] == 0, "%s: the reader's looks agree", what);
            ck_assert_msg(d->extra[i] == rd->key, "%s: the second look's new key is %" PRId64,
                          what, d->extra[i]);
            if (rd->look == L_GET)
                ck_assert_msg(d->first_status[i] == POD_NOT_FOUND &&
                              d->second_status[i] == POD_OK, "%s: get gave %d then %d", what,
                              d->first_status[i], d->second_status[i]);
            else if (rd->look == L_LIM_FWD || rd->look == L_LIM_REV)
                ck_assert_int_eq(d->n2[i], d->n1[i]); /* the new row pushed one out */
            else
                ck_assert_int_eq(d->n2[i], d->n1[i] + 1);
            break;
        case E_COMMIT:
            ck_assert_msg(d->writer_rc[i] == POD_OK && d->writer_attempts[i] == 1,
                          "%s: writer got %s after %" PRIu64 " attempts", what,
                          pod_status_name(d->writer_rc[i]), d->writer_attempts[i]);
            ck_assert_msg(d->equal[i] == 1, "%s: the reader's looks differ", what);
            break;
        }
    }
    /* The statistics agree with the writer's own count. POD_E_RETRIES is
     * counted in gave_up, not in errors: calls = commits + user_aborts +
     * errors + gave_up. */
    for (int p = P_INS; p <= P_PUT; p++) {
        struct pod_proc_stats st;
        pod_db_proc_stats(h->db, h->proc[p], &st);
        fprintf(stderr, "  %-7s calls %" PRIu64 ": commits %" PRIu64 ", user_aborts %" PRIu64
                ", errors %" PRIu64 ", gave_up %" PRIu64 ", conflicts %" PRIu64 "\n",
                proc_names[p], d->calls[p], st.commits, st.user_aborts, st.errors, st.gave_up,
                st.conflicts);
        ck_assert_uint_eq(st.commits, d->ok[p]);
        ck_assert_uint_eq(st.user_aborts, d->uaborts[p]);
        ck_assert_uint_eq(st.gave_up, d->retries[p]);
        ck_assert_uint_eq(st.errors, d->other[p]);
        ck_assert_uint_eq(st.commits + st.user_aborts + st.errors + st.gave_up, d->calls[p]);
        ck_assert_uint_eq(st.conflicts, DET_RETRIES * d->retries[p]);
    }
    free(d);
    ph_free(h);
}

START_TEST(deterministic_protected) { run_det(true); }
END_TEST

START_TEST(deterministic_unprotected) { run_det(false); }
END_TEST

/* ---- the window of an insert into a gap the inserter itself holds ------------------
 *
 * Transaction A scanned [100,200] (a shared lock on every key, so on 106)
 * and now inserts 105 into the gap 106 covers. Its own shared lock on 106
 * must keep working as a gap lock for everyone else: a reader B that takes a
 * shared lock on 106 while A's insert is under way must either make A's
 * insert fail, or find 105 locked; it must never hold 106 with 105 missing
 * and later see 105 appear. The btree's race points stall A at its N-th
 * race point inside pod_insert (N = 1, 2, ...), and B scans [104,106] right
 * then, waits for A to commit, and scans again. */

static __thread int tls_stall_at, tls_points;
static __thread bool tls_counting; /* count race points only */
static uint64_t win_stalled, win_resume, win_a_done; /* atomic */

/* The second worker of a race: wait (up to 5 s) until the first one stalls
 * at its race point or has finished (*done); whether it stalled. */
static bool first_stalled(const uint64_t *done)
{
    uint64_t end = pod_mono_ns() + 5000000000ull;
    while (!__atomic_load_n(&win_stalled, __ATOMIC_ACQUIRE) &&
           !__atomic_load_n(done, __ATOMIC_ACQUIRE) && pod_mono_ns() < end)
        sched_yield();
    return __atomic_load_n(&win_stalled, __ATOMIC_ACQUIRE);
}

void bt_race_point(enum bt_race_where where)
{
    /* Never stall while holding node locks: B's scan would spin on them. */
    if (tls_counting) {
        tls_points++;
        return;
    }
    if (!tls_stall_at || where == BT_RACE_LOCKED) return;
    if (++tls_points != tls_stall_at) return;
    __atomic_store_n(&win_stalled, 1, __ATOMIC_RELEASE);
    wait_for(&win_resume, 1, 2000);
}

struct win {
    struct ph *h;
    int stall_at;
    int a_rc, a_insert_rc, a_points;
    int b_rc, b_skipped;
    int64_t b_equal, b_n1, b_n2, b_extra;
};

static struct win *g_win;

/* Worker 0: scan the range, then insert 105 with the stall armed. */
static int p_win_a(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct ph *h = ctx;
    (void)a;
    struct seen s;
    POD_TRY(look_once(tx, h, L_FWD, false, 0, 0, &s));
    unsigned char k[8];
    pod_key_u64(k, 105);
    struct row r = {val_of(105)};
    tls_points = 0;
    tls_stall_at = g_win->stall_at;
    int rc = pod_insert(tx, h->t, k, &r);
    tls_stall_at = 0;
    g_win->a_insert_rc = rc;
    g_win->a_points = tls_points;
    pod_result_i64(res, rc);
    return rc < 0 ? rc : POD_OK;
}

/* Worker 1: while A is stalled, scan [104,106]; after A is done, again. */
static int p_win_b(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct ph *h = ctx;
    (void)a;
    unsigned char lo[8], hi[8];
    pod_key_u64(lo, 104);
    pod_key_u64(hi, 106);
    struct seen s1, s2;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    POD_TRY(pod_scan(tx, h->t, lo, hi, 0, 0, collect, &s1));
    __atomic_store_n(&win_resume, 1, __ATOMIC_RELEASE);
    wait_for(&win_a_done, 1, 5000);
    POD_TRY(pod_scan(tx, h->t, lo, hi, 0, 0, collect, &s2));
    compare_looks(&s1, &s2, res);
    return POD_OK;
}

static void win_body(struct pod_worker *w, void *arg)
{
    struct win *v = arg;
    pod_result *res = pod_result_new();
    char msg[256];
    if (w->id == 0) {
        v->a_rc = pod_call(w, v->h->proc[P_WIN_A], &(pod_args){0, NULL}, res, msg, sizeof msg);
        __atomic_store_n(&win_a_done, 1, __ATOMIC_RELEASE);
    } else {
        /* Go when A is stalled; if A never stalls (fewer race points than
         * stall_at), there is nothing to test. */
        if (!first_stalled(&win_a_done)) {
            v->b_skipped = 1;
        } else {
            v->b_rc = pod_call(w, v->h->proc[P_WIN_B], &(pod_args){0, NULL}, res, msg, sizeof msg);
            if (v->b_rc == POD_OK) {
                v->b_equal = res_at(res, 0);
                v->b_n1 = res_at(res, 1);
                v->b_n2 = res_at(res, 2);
                v->b_extra = res_at(res, 5);
            }
        }
        __atomic_store_n(&win_resume, 1, __ATOMIC_RELEASE);
    }
    pod_result_free(res);
}

START_TEST(insert_into_own_gap_window)
{
    /* max_retries 1: a conflict ends a call (no second run of the scenario). */
    g_stride = 2;
    struct ph *h = ph_new(2, true, 1);
    ph_register(h);
    int tested = 0, phantoms = 0;
    for (int n = 1; n <= 24; n++) {
        struct win v = {.h = h, .stall_at = n};
        g_win = &v;
        win_stalled = win_resume = win_a_done = 0;
        char err[256];
        ck_assert_msg(pod_workers_start(h->db, NULL, 0, win_body, &v, err, sizeof err) == 0,
                      "pod_workers_start: %s", err);
        pod_workers_join(h->db);
        g_win = NULL;
        if (v.b_skipped) break; /* past the last race point of the insert */
        tested++;
        fprintf(stderr, "  stall at race point %2d of %d: A's insert %s (call %s); B %s, "
                "[104,106] %" PRId64 " -> %" PRId64 " rows%s\n", n, v.a_points,
                pod_status_name(v.a_insert_rc), pod_status_name(v.a_rc),
                pod_status_name(v.b_rc), v.b_n1, v.b_n2,
                v.b_rc == POD_OK && !v.b_equal ? " PHANTOM" : "");
        if (v.b_rc == POD_OK && !v.b_equal) phantoms++;
        /* Back to the initial state. */
        pod_result *res = pod_result_new();
        char msg[256];
        pod_value dv[1] = {pod_v_i64(105)};
        struct pod_worker *adm = pod_admin_begin(h->db);
        int rc = pod_call(adm, h->proc[P_DEL], &(pod_args){1, dv}, res, msg, sizeof msg);
        pod_admin_end(h->db);
        pod_result_free(res);
        ck_assert_msg(rc == POD_OK || rc == POD_NOT_FOUND, "cleanup: %s", msg);
    }
    ck_assert_int_gt(tested, 2);
    ck_assert_msg(phantoms == 0,
                  "phantom with protection on: transaction B held a shared lock on 106 (the "
                  "gap (104,106)) and saw 105 appear, inserted by A, which held a shared lock "
                  "on 106 too (%d of %d stall points)", phantoms, tested);
    ph_free(h);
}
END_TEST

/* ---- a key appearing in the gap a reader is about to lock ---------------------------
 *
 * Invariant 4: after locking the key found by a "next key" search, the
 * search is repeated, and if another key appeared in between the step is
 * taken again. Here the table holds every 8th key. Reader R's first look is
 * stalled at its N-th btree race point (N = 1, 2, ...) while writer W
 * inserts and commits g+5 into the gap (g, g+8) R is working on (w1). After
 * R's first look, W tries to insert a key R's looks cover (w2), then R looks
 * again. Whatever N, R's two looks must agree.
 * The race points are inside the btree's reads, so a stall inside one leaf
 * only makes the search restart and see g+5. The case that matters is a gap
 * at a leaf boundary: bt_next finds nothing more in g's leaf and descends
 * again from its high fence; stalled there, it returns g+8 although g+5 now
 * sits in the left leaf, and only the engine's repeated search notices. g is
 * picked at setup by counting the race points of bt_next (more than one
 * descent = the next key is in the next leaf). */

enum { GR_GET, GR_FWD, GR_REV };

struct gap_case {
    const char *name;
    int look;            /* GR_* */
    int64_t key, lo, hi; /* offsets from g. GR_GET: key; scans: [lo,hi] */
    int64_t w1, w2;      /* offsets from g; w2 == INT64_MIN: none */
};

static const struct gap_case gap_cases[] = {
    /* get g+1 finds next key g+8; g+5 appears; then g+1 is inserted. */
    {"get g+1", GR_GET, 1, 0, 0, 5, 1},
    /* A forward scan steps from g to g+8; g+5 appears on the way; then g+3. */
    {"scan [g,g+8]", GR_FWD, 0, 0, 8, 5, 3},
    /* A reverse scan steps down from g+8 to g; then g+3. */
    {"reverse scan [g,g+8]", GR_REV, 0, 0, 8, 5, 3},
    /* A reverse scan locks the key after hi=g+3 (g+8); g+5 appears; then g+2. */
    {"reverse scan [g-10,g+3]", GR_REV, 0, -10, 3, 5, 2},
};

struct gap_run {
    struct ph *h;
    const struct gap_case *c;
    int64_t g;
    int stall_at;
    int r_rc, r_points, w1_rc, w2_rc, w_skipped;
    int64_t equal, n1, n2, bad, extra;
};

static struct gap_run *g_gap;
static uint64_t gap_first_done, gap_w2_done; /* atomic */

static int gap_look(pod_txn *tx, struct ph *h, const struct gap_run *g, struct seen *s)
{
    memset(s, 0, sizeof *s);
    const struct gap_case *c = g->c;
    unsigned char lo[8], hi[8], k[8];
    pod_key_u64(lo, (uint64_t)(g->g + c->lo));
    pod_key_u64(hi, (uint64_t)(g->g + c->hi));
    switch (c->look) {
    case GR_GET: {
        pod_key_u64(k, (uint64_t)(g->g + c->key));
        int rc = pod_get(tx, h->t, k, NULL);
        if (rc < 0) return rc;
        s->status = rc;
        if (rc == POD_OK) s->keys[s->n++] = (uint64_t)(g->g + c->key);
        return POD_OK;
    }
    case GR_FWD: return pod_scan(tx, h->t, lo, hi, 0, 0, collect_any, s);
    default:
        s->reverse = true;
        return pod_scan(tx, h->t, lo, hi, 0, POD_SCAN_REVERSE, collect_any, s);
    }
}

static int p_gap_r(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct ph *h = ctx;
    (void)a;
    struct gap_run *g = g_gap;
    struct seen s1, s2;
    tls_points = 0;
    tls_stall_at = g->stall_at;
    int rc = gap_look(tx, h, g, &s1);
    tls_stall_at = 0;
    g->r_points = tls_points;
    __atomic_store_n(&gap_first_done, 1, __ATOMIC_RELEASE);
    if (rc < 0) return rc;
    wait_for(&gap_w2_done, 1, 5000);
    POD_TRY(gap_look(tx, h, g, &s2));
    compare_looks(&s1, &s2, res);
    return POD_OK;
}

static int gap_insert(struct pod_worker *w, struct ph *h, int64_t key, pod_result *res)
{
    char msg[256];
    pod_value v[2] = {pod_v_i64(key), pod_v_i64(0)};
    return pod_call(w, h->proc[P_INS], &(pod_args){2, v}, res, msg, sizeof msg);
}

static void gap_body(struct pod_worker *w, void *arg)
{
    struct gap_run *g = arg;
    pod_result *res = pod_result_new();
    char msg[256];
    if (w->id == 0) {
        g->r_rc = pod_call(w, g->h->proc[P_GAP_R], &(pod_args){0, NULL}, res, msg, sizeof msg);
        if (g->r_rc == POD_OK) {
            g->equal = res_at(res, 0);
            g->n1 = res_at(res, 1);
            g->n2 = res_at(res, 2);
            g->bad = res_at(res, 3);
            g->extra = res_at(res, 5);
        }
        __atomic_store_n(&gap_first_done, 1, __ATOMIC_RELEASE);
    } else {
        if (!first_stalled(&gap_first_done)) {
            g->w_skipped = 1; /* the first look has fewer race points than stall_at */
        } else {
            g->w1_rc = gap_insert(w, g->h, g->g + g->c->w1, res);
            __atomic_store_n(&win_resume, 1, __ATOMIC_RELEASE);
            wait_for(&gap_first_done, 1, 5000);
            g->w2_rc = g->c->w2 != INT64_MIN ? gap_insert(w, g->h, g->g + g->c->w2, res) : POD_OK;
        }
        __atomic_store_n(&win_resume, 1, __ATOMIC_RELEASE);
        __atomic_store_n(&gap_w2_done, 1, __ATOMIC_RELEASE);
    }
    pod_result_free(res);
}

/* Race points of one bt_next(g+1) on the quiet table. */
static int next_points(struct ph *h, int64_t g)
{
    unsigned char k[8];
    pod_key_u64(k, (uint64_t)(g + 1));
    tls_points = 0;
    tls_counting = true;
    uint64_t v;
    bt_status st = bt_next(&h->t->parts[0].tree, k, false, NULL, &v);
    tls_counting = false;
    ck_assert_int_eq(st, BT_OK);
    return tls_points;
}

START_TEST(gap_appears_while_locking)
{
    g_stride = 8;
    struct ph *h = ph_new(2, true, 1);
    ph_register(h);
    /* g = 160 (inside a leaf, probably) and a g at a leaf boundary. */
    int64_t gs[2] = {160, -1};
    int least = next_points(h, 160), pts[NKEYS / 8];
    for (int64_t g = 16; g < NKEYS - 16; g += 8) {
        pts[g / 8] = next_points(h, g);
        if (pts[g / 8] < least) least = pts[g / 8];
    }
    for (int64_t g = 16; g < NKEYS - 16 && gs[1] < 0; g += 8)
        if (pts[g / 8] > least) gs[1] = g;
    ck_assert_msg(gs[1] > 0, "no leaf boundary found among %d keys", NKEYS / 8);
    fprintf(stderr, "  gap at a leaf boundary: (%" PRId64 ",%" PRId64 ")\n", gs[1], gs[1] + 8);
    int bad = 0;
    char first_bad[200] = "";
    for (int gi = 0; gi < 2; gi++) {
        for (size_t ci = 0; ci < sizeof gap_cases / sizeof gap_cases[0]; ci++) {
            const struct gap_case *c = &gap_cases[ci];
            int tested = 0, w1_in = 0;
            for (int n = 1; n <= 40; n++) {
                struct gap_run g = {.h = h, .c = c, .g = gs[gi], .stall_at = n};
                g_gap = &g;
                win_stalled = win_resume = gap_first_done = gap_w2_done = 0;
                char err[256];
                ck_assert_msg(pod_workers_start(h->db, NULL, 0, gap_body, &g, err, sizeof err) == 0,
                              "pod_workers_start: %s", err);
                pod_workers_join(h->db);
                g_gap = NULL;
                if (g.w_skipped) break;
                tested++;
                w1_in += g.w1_rc == POD_OK;
                ck_assert_msg(g.bad == 0, "%s: rows out of order or with wrong values", c->name);
                bool differ = g.r_rc == POD_OK && !g.equal;
                fprintf(stderr, "  g=%-4" PRId64 " %-24s stall %2d/%2d: w1 %s, w2 %s; R %s, "
                        "%" PRId64 " -> %" PRId64 "%s\n", g.g, c->name, n, g.r_points,
                        pod_status_name(g.w1_rc), pod_status_name(g.w2_rc),
                        pod_status_name(g.r_rc), g.n1, g.n2, differ ? " PHANTOM" : "");
                if (differ && !bad++)
                    snprintf(first_bad, sizeof first_bad, "%s with g=%" PRId64 ", reader stalled "
                             "at race point %d: its second look saw %" PRId64, c->name, g.g, n,
                             g.extra);
                /* Back to the initial state. */
                pod_result *res = pod_result_new();
                char msg[256];
                struct pod_worker *adm = pod_admin_begin(h->db);
                for (int j = 0; j < 2; j++) {
                    int64_t off = j ? c->w2 : c->w1;
                    if (off == INT64_MIN) continue;
                    pod_value dv[1] = {pod_v_i64(g.g + off)};
                    int rc = pod_call(adm, h->proc[P_DEL], &(pod_args){1, dv}, res, msg,
                                      sizeof msg);
                    ck_assert_msg(rc == POD_OK || rc == POD_NOT_FOUND, "cleanup: %s", msg);
                }
                pod_admin_end(h->db);
                pod_result_free(res);
            }
            /* Not vacuous: some stall points let w1 in before R locked the gap. */
            ck_assert_msg(tested > 2 && w1_in > 0, "%s: %d stall points, w1 committed in %d",
                          c->name, tested, w1_in);
        }
    }
    ck_assert_msg(bad == 0, "phantom with protection on (%d cases): %s", bad, first_bad);
    ph_free(h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("phantom_mt");
    TCase *det = tu_tcase(s, "deterministic", 120);
    tcase_add_test(det, deterministic_protected);
    tcase_add_test(det, deterministic_unprotected);
    tcase_add_test(det, insert_into_own_gap_window);
    tcase_add_test(det, gap_appears_while_locking);
    TCase *mt = tu_tcase(s, "random", 120);
    tcase_add_test(mt, random_protected);
    tcase_add_test(mt, random_protected_sparse);
    tcase_add_test(mt, random_unprotected_shows_phantoms);
    /* The same through the record-store seam: rs-2pl over the array store
     * (the btree race points are the tables' own index: not here). */
    TCase *rs = tu_tcase(s, "record_store", 120);
    tcase_add_checked_fixture(rs, tu_use_array_store, NULL);
    tcase_add_test(rs, deterministic_protected);
    tcase_add_test(rs, deterministic_unprotected);
    tcase_add_test(rs, random_protected);
    tcase_add_test(rs, random_protected_sparse);
    tcase_add_test(rs, random_unprotected_shows_phantoms);
    return tu_run(s);
}
