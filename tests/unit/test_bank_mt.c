/* The bank invariant under concurrency (strict 2PL NO_WAIT with next-key
 * locking, src/txn/txn.c); also built with ThreadSanitizer by make tsan.
 *
 * N accounts start with 1000 each. W workers run a random mix of
 *  - transfer: move a random amount between two distinct accounts, either
 *    with pod_get_for_update (checks the balance before writing) or with
 *    pod_get then pod_put (a shared lock upgraded to exclusive; checks the
 *    balance after writing, so an overdraw rolls back written rows); about
 *    10% choose to abort after writing (POD_USER_ABORT: undo must restore);
 *  - audit: a scan of the whole table (forward or reverse) summing every
 *    balance; every committed audit must see exactly N*1000;
 *  - park: take money from an account into a newly inserted temporary row
 *    (keys >= TEMP_BASE, same table and partition), sometimes aborting after
 *    the insert; unpark: find a temporary row with a FOR_UPDATE scan, delete
 *    it and credit its money to an account. The audit scan meets these
 *    inserts and deletes, and the money in flight keeps the total exact only
 *    if the scan sees every committed row and none of the uncommitted ones.
 * At the end the admin worker audits again, and the per-procedure statistics
 * must agree with what the workers saw: commits = calls that returned >= 0,
 * user_aborts = calls that returned POD_USER_ABORT, and nothing else.
 * One summary line per procedure is printed (commits, aborts, conflicts by
 * cause). BANK_MT_MS=N sets each concurrent run's length (default 1500 ms,
 * 3000 under TSan); BANK_MT_SEED=N fixes the seed. */
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
#include "util/clock.h"
#include "helpers/testutil.h"

#define INITIAL 1000
#define TEMP_BASE (1ull << 40)
#define TEMP_MAX (TEMP_BASE + (1ull << 32))
#define TEMP_SHIFT 24 /* temp key = TEMP_BASE + (worker << TEMP_SHIFT) + seq */
#define MAX_W 8

struct account {
    int64_t balance;
    int64_t owner; /* the account's own number; -1 for a temporary row */
};

/* Why a call ended, as the procedure left it in the result's first value. */
enum { R_OK = 0, R_OVERDRAW = 1, R_FORCED = 2, R_NONE = 3 };

enum { P_LOAD, P_TRANSFER, P_AUDIT, P_PARK, P_UNPARK, P_COUNT };
static const char *const proc_names[P_COUNT] = {"load", "transfer", "audit", "park", "unpark"};

/* ---- failures seen on worker threads ------------------------------------------- */

/* ---- the bank ---------------------------------------------------------------------- */

struct bank {
    pod_db *db;
    pod_table *t;
    int naccounts;
    int proc[P_COUNT];
};

static int64_t arg(const pod_args *a, int i) { return a->v[i].u.i64; }

static int get_acct(pod_txn *tx, struct bank *b, uint64_t k, struct account *out, bool upd)
{
    unsigned char key[8];
    pod_key_u64(key, k);
    int rc = upd ? pod_get_for_update(tx, b->t, key, out) : pod_get(tx, b->t, key, out);
    if (rc < 0) return rc;
    if (rc != POD_OK)
        return pod_txn_fail(tx, POD_E_INTERNAL, "key %" PRIu64 ": %s", k, pod_status_name(rc));
    return POD_OK;
}

static int put_acct(pod_txn *tx, struct bank *b, uint64_t k, const struct account *acc)
{
    unsigned char key[8];
    pod_key_u64(key, k);
    int rc = pod_put(tx, b->t, key, acc);
    if (rc < 0) return rc;
    if (rc != POD_OK)
        return pod_txn_fail(tx, POD_E_INTERNAL, "put %" PRIu64 ": %s", k, pod_status_name(rc));
    return POD_OK;
}

/* load(n): accounts 0..n-1 with INITIAL each. */
static int p_load(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct bank *b = ctx;
    for (int64_t i = 0; i < arg(a, 0); i++) {
        unsigned char key[8];
        pod_key_u64(key, (uint64_t)i);
        struct account acc = {INITIAL, i};
        int rc = pod_insert(tx, b->t, key, &acc);
        if (rc < 0) return rc;
        if (rc != POD_OK)
            return pod_txn_fail(tx, POD_E_INTERNAL, "load %" PRId64 ": %s", i, pod_status_name(rc));
    }
    pod_result_i64(res, R_OK);
    return POD_OK;
}

/* transfer(from, to, amount, mode, force_abort). mode 0: exclusive reads,
 * balance checked before writing. mode 1: shared reads upgraded by the puts,
 * balance checked after writing (an overdraw rolls back written rows), and
 * the writes read back. */
static int p_transfer(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct bank *b = ctx;
    uint64_t from = (uint64_t)arg(a, 0), to = (uint64_t)arg(a, 1);
    int64_t amount = arg(a, 2), mode = arg(a, 3), force = arg(a, 4);
    struct account f, t;
    POD_TRY(get_acct(tx, b, from, &f, mode == 0));
    POD_TRY(get_acct(tx, b, to, &t, mode == 0));
    if (f.owner != (int64_t)from || t.owner != (int64_t)to)
        return pod_txn_fail(tx, POD_E_INTERNAL, "transfer: rows %" PRIu64 "/%" PRIu64
                            " carry owners %" PRId64 "/%" PRId64, from, to, f.owner, t.owner);
    if (f.balance < 0 || t.balance < 0)
        return pod_txn_fail(tx, POD_E_INTERNAL, "transfer: negative balance read: %" PRId64
                            " / %" PRId64, f.balance, t.balance);
    if (mode == 0 && f.balance < amount) {
        pod_result_i64(res, R_OVERDRAW);
        return POD_USER_ABORT;
    }
    f.balance -= amount;
    t.balance += amount;
    POD_TRY(put_acct(tx, b, from, &f));
    POD_TRY(put_acct(tx, b, to, &t));
    if (mode == 1) {
        struct account f2, t2;
        POD_TRY(get_acct(tx, b, from, &f2, false));
        POD_TRY(get_acct(tx, b, to, &t2, false));
        if (f2.balance != f.balance || t2.balance != t.balance)
            return pod_txn_fail(tx, POD_E_INTERNAL, "transfer: own writes not read back");
        if (f.balance < 0) {
            pod_result_i64(res, R_OVERDRAW);
            return POD_USER_ABORT;
        }
    }
    if (force) {
        pod_result_i64(res, R_FORCED);
        return POD_USER_ABORT;
    }
    pod_result_i64(res, R_OK);
    return POD_OK;
}

struct audit {
    int64_t sum, naccts, ntemp, nneg, nbad;
    uint64_t last;
    bool have_last, reverse;
};

static bool audit_visit(void *arg, const void *key, const void *tuple)
{
    struct audit *s = arg;
    struct account acc;
    memcpy(&acc, tuple, sizeof acc);
    uint64_t k = pod_key_get_u64(key);
    if (s->have_last && (s->reverse ? k >= s->last : k <= s->last)) s->nbad++;
    s->last = k;
    s->have_last = true;
    if (k < TEMP_BASE) {
        s->naccts++;
        if (acc.owner != (int64_t)k) s->nbad++;
    } else {
        s->ntemp++;
        if (acc.owner != -1) s->nbad++;
    }
    if (acc.balance < 0) s->nneg++;
    s->sum += acc.balance;
    return true;
}

/* audit(reverse): result sum, accounts, temporary rows, negative balances,
 * rows out of order or with a wrong owner. */
static int p_audit(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct bank *b = ctx;
    struct audit s = {.reverse = arg(a, 0) != 0};
    POD_TRY(pod_scan(tx, b->t, NULL, NULL, 0, s.reverse ? POD_SCAN_REVERSE : 0, audit_visit, &s));
    pod_result_i64(res, s.sum);
    pod_result_i64(res, s.naccts);
    pod_result_i64(res, s.ntemp);
    pod_result_i64(res, s.nneg);
    pod_result_i64(res, s.nbad);
    return POD_OK;
}

/* park(account, amount, temp_key, force_abort): move amount into a new row. */
static int p_park(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct bank *b = ctx;
    uint64_t acct = (uint64_t)arg(a, 0), tk = (uint64_t)arg(a, 2);
    int64_t amount = arg(a, 1);
    struct account acc;
    POD_TRY(get_acct(tx, b, acct, &acc, true));
    if (acc.balance < amount) {
        pod_result_i64(res, R_OVERDRAW);
        return POD_USER_ABORT;
    }
    acc.balance -= amount;
    POD_TRY(put_acct(tx, b, acct, &acc));
    unsigned char key[8];
    pod_key_u64(key, tk);
    struct account tmp = {amount, -1};
    int rc = pod_insert(tx, b->t, key, &tmp);
    if (rc < 0) return rc;
    if (rc != POD_OK)
        return pod_txn_fail(tx, POD_E_INTERNAL, "park: insert %" PRIu64 ": %s", tk,
                            pod_status_name(rc));
    if (arg(a, 3)) {
        pod_result_i64(res, R_FORCED);
        return POD_USER_ABORT;
    }
    pod_result_i64(res, R_OK);
    return POD_OK;
}

struct first_row {
    uint64_t key;
    struct account acc;
    int n;
};

static bool first_visit(void *arg, const void *key, const void *tuple)
{
    struct first_row *f = arg;
    f->key = pod_key_get_u64(key);
    memcpy(&f->acc, tuple, sizeof f->acc);
    f->n++;
    return false;
}

/* unpark(start, account, force_abort): the first temporary row at or after
 * start (else the first one at all) goes back to account. */
static int p_unpark(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct bank *b = ctx;
    unsigned char lo[8], base[8], hi[8];
    pod_key_u64(lo, (uint64_t)arg(a, 0));
    pod_key_u64(base, TEMP_BASE);
    pod_key_u64(hi, TEMP_MAX);
    struct first_row f = {0};
    POD_TRY(pod_scan(tx, b->t, lo, hi, 1, POD_SCAN_FOR_UPDATE, first_visit, &f));
    if (!f.n) POD_TRY(pod_scan(tx, b->t, base, hi, 1, POD_SCAN_FOR_UPDATE, first_visit, &f));
    if (!f.n) {
        pod_result_i64(res, R_NONE);
        return POD_OK;
    }
    if (f.n != 1 || f.key < TEMP_BASE || f.acc.owner != -1 || f.acc.balance < 0)
        return pod_txn_fail(tx, POD_E_INTERNAL, "unpark: bad temporary row %" PRIu64, f.key);
    unsigned char key[8];
    pod_key_u64(key, f.key);
    int rc = pod_delete(tx, b->t, key);
    if (rc < 0) return rc;
    if (rc != POD_OK)
        return pod_txn_fail(tx, POD_E_INTERNAL, "unpark: delete %" PRIu64 ": %s", f.key,
                            pod_status_name(rc));
    /* Deleted: invisible to this transaction from now on. */
    if ((rc = pod_get(tx, b->t, key, NULL)) != POD_NOT_FOUND) {
        if (rc < 0) return rc;
        return pod_txn_fail(tx, POD_E_INTERNAL, "unpark: deleted row still found");
    }
    uint64_t acct = (uint64_t)arg(a, 1);
    struct account acc;
    POD_TRY(get_acct(tx, b, acct, &acc, true));
    acc.balance += f.acc.balance;
    POD_TRY(put_acct(tx, b, acct, &acc));
    if (arg(a, 2)) {
        pod_result_i64(res, R_FORCED);
        return POD_USER_ABORT;
    }
    pod_result_i64(res, R_OK);
    return POD_OK;
}

static const pod_proc_fn proc_fns[P_COUNT] = {p_load, p_transfer, p_audit, p_park, p_unpark};
static const int proc_nargs[P_COUNT] = {1, 5, 1, 4, 3};

static struct bank *bank_new(int nworkers, int naccounts)
{
    char err[256];
    struct bank *b = calloc(1, sizeof *b);
    ck_assert_ptr_nonnull(b);
    b->naccounts = naccounts;
    b->db = tu_db_new(nworkers);
    static const pod_column cols[] = {
        {"balance", POD_COL_I64, 0, 8},
        {"owner", POD_COL_I64, 8, 8},
    };
    b->t = pod_table_create(b->db, &(pod_table_def){.name = "accounts", .key_size = 8,
                                                     .tuple_size = sizeof(struct account),
                                                     .ncols = 2, .cols = cols},
                            err, sizeof err);
    ck_assert_msg(b->t, "pod_table_create: %s", err);
    static const enum pod_type i64s[5] = {POD_T_I64, POD_T_I64, POD_T_I64, POD_T_I64, POD_T_I64};
    for (int p = 0; p < P_COUNT; p++) {
        char name[32];
        snprintf(name, sizeof name, "bank.%s", proc_names[p]);
        b->proc[p] = pod_proc_register(b->db, &(pod_proc_def){.name = name, .fn = proc_fns[p],
                                                               .ctx = b, .nargs = proc_nargs[p],
                                                               .arg_types = i64s},
                                       err, sizeof err);
        ck_assert_msg(b->proc[p] >= 0, "pod_proc_register: %s", err);
    }
    return b;
}

static void bank_free(struct bank *b)
{
    pod_db_free(b->db);
    free(b);
}

/* A call from the main thread through the admin worker. */
static int admin_call(struct bank *b, int p, const pod_value *v, int n, pod_result *res)
{
    char msg[256];
    pod_args args = {n, v};
    struct pod_worker *a = pod_admin_begin(b->db);
    int rc = pod_call(a, b->proc[p], &args, res, msg, sizeof msg);
    pod_admin_end(b->db);
    if (rc < 0 && rc != POD_USER_ABORT) fprintf(stderr, "admin %s: %s\n", proc_names[p], msg);
    return rc;
}

static int64_t res_i64(const pod_result *res, int col)
{
    pod_value v;
    ck_assert_int_eq(pod_result_get(res, 0, col, &v), 0);
    ck_assert_int_eq(v.type, POD_T_I64);
    return v.u.i64;
}

/* Audit from the main thread; returns the number of temporary rows. */
static int64_t admin_audit(struct bank *b, bool reverse)
{
    pod_result *res = pod_result_new();
    pod_value v[1] = {pod_v_i64(reverse)};
    ck_assert_int_eq(admin_call(b, P_AUDIT, v, 1, res), POD_OK);
    ck_assert_int_eq(res_i64(res, 0), (int64_t)b->naccounts * INITIAL);
    ck_assert_int_eq(res_i64(res, 1), b->naccounts);
    ck_assert_int_eq(res_i64(res, 3), 0);
    ck_assert_int_eq(res_i64(res, 4), 0);
    int64_t ntemp = res_i64(res, 2);
    pod_result_free(res);
    return ntemp;
}

static void bank_load(struct bank *b)
{
    pod_result *res = pod_result_new();
    pod_value v[1] = {pod_v_i64(b->naccounts)};
    ck_assert_int_eq(admin_call(b, P_LOAD, v, 1, res), POD_OK);
    pod_result_free(res);
    ck_assert_int_eq(admin_audit(b, false), 0);
}

/* ---- single thread: undo ------------------------------------------------------------ */

START_TEST(undo_single_thread)
{
    struct bank *b = bank_new(1, 4);
    bank_load(b);
    pod_result *res = pod_result_new();
    /* Forced abort after writing, both modes. */
    for (int mode = 0; mode < 2; mode++) {
        pod_value v[5] = {pod_v_i64(0), pod_v_i64(1), pod_v_i64(300), pod_v_i64(mode),
                          pod_v_i64(1)};
        ck_assert_int_eq(admin_call(b, P_TRANSFER, v, 5, res), POD_USER_ABORT);
        ck_assert_int_eq(res_i64(res, 0), R_FORCED);
    }
    /* Overdraw: checked before writing (mode 0), after writing (mode 1). */
    for (int mode = 0; mode < 2; mode++) {
        pod_value v[5] = {pod_v_i64(2), pod_v_i64(3), pod_v_i64(1001), pod_v_i64(mode),
                          pod_v_i64(0)};
        ck_assert_int_eq(admin_call(b, P_TRANSFER, v, 5, res), POD_USER_ABORT);
        ck_assert_int_eq(res_i64(res, 0), R_OVERDRAW);
    }
    /* A park that aborts after its insert leaves no row behind. */
    pod_value pv[4] = {pod_v_i64(1), pod_v_i64(10), pod_v_i64((int64_t)TEMP_BASE + 5),
                       pod_v_i64(1)};
    ck_assert_int_eq(admin_call(b, P_PARK, pv, 4, res), POD_USER_ABORT);
    ck_assert_int_eq(admin_audit(b, false), 0);
    ck_assert_int_eq(admin_audit(b, true), 0);
    /* Committed park, an unpark that aborts, then a committed one. */
    pv[3] = pod_v_i64(0);
    ck_assert_int_eq(admin_call(b, P_PARK, pv, 4, res), POD_OK);
    ck_assert_int_eq(admin_audit(b, false), 1);
    pod_value uv[3] = {pod_v_i64((int64_t)TEMP_BASE + 100), pod_v_i64(2), pod_v_i64(1)};
    ck_assert_int_eq(admin_call(b, P_UNPARK, uv, 3, res), POD_USER_ABORT);
    ck_assert_int_eq(admin_audit(b, true), 1);
    uv[2] = pod_v_i64(0);
    ck_assert_int_eq(admin_call(b, P_UNPARK, uv, 3, res), POD_OK);
    ck_assert_int_eq(res_i64(res, 0), R_OK);
    ck_assert_int_eq(admin_audit(b, false), 0);
    ck_assert_int_eq(admin_call(b, P_UNPARK, uv, 3, res), POD_OK);
    ck_assert_int_eq(res_i64(res, 0), R_NONE);
    /* A committed transfer moves the money. */
    pod_value tv[5] = {pod_v_i64(0), pod_v_i64(3), pod_v_i64(1000), pod_v_i64(1), pod_v_i64(0)};
    ck_assert_int_eq(admin_call(b, P_TRANSFER, tv, 5, res), POD_OK);
    ck_assert_int_eq(admin_audit(b, false), 0);
    pod_result_free(res);
    bank_free(b);
}
END_TEST

/* ---- concurrent runs --------------------------------------------------------------- */

struct tally {
    uint64_t calls, ok, user_aborts, other;
};

struct wstate {
    struct tally t[P_COUNT];
    uint64_t forced, overdraw;          /* user aborts by reason (all procedures) */
    uint64_t parked, unparked, none;    /* committed parks / unparks; unparks with nothing */
    uint64_t audits, reverse_audits;    /* committed audits checked */
    uint64_t max_temp;
};

struct run {
    struct bank *b;
    uint64_t seed;
    uint64_t deadline_ns;
    uint64_t max_iters;
    struct wstate ws[MAX_W];
};

static int call_counted(struct pod_worker *w, struct run *r, struct wstate *ws, int p,
                        const pod_value *v, int n, pod_result *res)
{
    char msg[256];
    pod_args args = {n, v};
    int rc = pod_call(w, r->b->proc[p], &args, res, msg, sizeof msg);
    struct tally *t = &ws->t[p];
    t->calls++;
    if (rc >= 0) {
        t->ok++;
    } else if (rc == POD_USER_ABORT) {
        t->user_aborts++;
        pod_value why;
        if (pod_result_get(res, 0, 0, &why) != 0) {
            tu_fail("worker %d: %s aborted without a reason in its result", w->id, proc_names[p]);
        } else if (why.u.i64 == R_FORCED) {
            ws->forced++;
        } else if (why.u.i64 == R_OVERDRAW) {
            ws->overdraw++;
        } else {
            tu_fail("worker %d: %s aborted with reason %" PRId64, w->id, proc_names[p], why.u.i64);
        }
    } else {
        t->other++;
        tu_fail("worker %d: %s returned %s: %s", w->id, proc_names[p], pod_status_name(rc), msg);
    }
    return rc;
}

static void bank_body(struct pod_worker *w, void *arg)
{
    struct run *r = arg;
    struct bank *b = r->b;
    struct wstate *ws = &r->ws[w->id];
    uint64_t s = r->seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1));
    if (!s) s = 1;
    pod_result *res = pod_result_new();
    if (!res) {
        tu_fail("worker %d: pod_result_new failed", w->id);
        return;
    }
    uint64_t seq = 0;
    int64_t n = b->naccounts;
    for (uint64_t it = 0; it < r->max_iters && !tu_failed(); it++) {
        if ((it & 15) == 0 && pod_mono_ns() > r->deadline_ns) break;
        unsigned op = (unsigned)(pod_rand(&s) % 100);
        if (op < 62) {
            int64_t from = (int64_t)(pod_rand(&s) % (uint64_t)n);
            int64_t to = (int64_t)(pod_rand(&s) % (uint64_t)(n - 1));
            if (to >= from) to++;
            /* Mostly affordable amounts, sometimes more than anyone has. */
            int64_t amount = pod_rand(&s) % 8 == 0 ? 1 + (int64_t)(pod_rand(&s) % 3000)
                                                : 1 + (int64_t)(pod_rand(&s) % 300);
            int64_t mode = (int64_t)(pod_rand(&s) % 2);
            int64_t force = pod_rand(&s) % 10 == 0;
            pod_value v[5] = {pod_v_i64(from), pod_v_i64(to), pod_v_i64(amount), pod_v_i64(mode),
                              pod_v_i64(force)};
            call_counted(w, r, ws, P_TRANSFER, v, 5, res);
        } else if (op < 74) {
            bool reverse = pod_rand(&s) % 2;
            pod_value v[1] = {pod_v_i64(reverse)};
            if (call_counted(w, r, ws, P_AUDIT, v, 1, res) == POD_OK) {
                pod_value sum, na, nt, nneg, nbad;
                if (pod_result_get(res, 0, 0, &sum) || pod_result_get(res, 0, 1, &na) ||
                    pod_result_get(res, 0, 2, &nt) || pod_result_get(res, 0, 3, &nneg) ||
                    pod_result_get(res, 0, 4, &nbad)) {
                    tu_fail("worker %d: audit result incomplete", w->id);
                } else if (sum.u.i64 != n * INITIAL || na.u.i64 != n || nneg.u.i64 != 0 ||
                           nbad.u.i64 != 0) {
                    tu_fail("worker %d: %s audit saw sum %" PRId64 " (want %" PRId64
                            "), %" PRId64 " accounts (want %" PRId64 "), %" PRId64
                            " temporary rows, %" PRId64 " negative, %" PRId64 " out of order "
                            "or with a wrong owner",
                            w->id, reverse ? "reverse" : "forward", sum.u.i64, n * INITIAL,
                            na.u.i64, n, nt.u.i64, nneg.u.i64, nbad.u.i64);
                } else {
                    ws->audits++;
                    ws->reverse_audits += reverse;
                    if ((uint64_t)nt.u.i64 > ws->max_temp) ws->max_temp = (uint64_t)nt.u.i64;
                }
            }
        } else if (op < 87) {
            int64_t acct = (int64_t)(pod_rand(&s) % (uint64_t)n);
            int64_t amount = 1 + (int64_t)(pod_rand(&s) % 200);
            int64_t tk = (int64_t)(TEMP_BASE + ((uint64_t)w->id << TEMP_SHIFT) + seq++);
            int64_t force = pod_rand(&s) % 10 == 0;
            pod_value v[4] = {pod_v_i64(acct), pod_v_i64(amount), pod_v_i64(tk), pod_v_i64(force)};
            if (call_counted(w, r, ws, P_PARK, v, 4, res) == POD_OK) ws->parked++;
        } else {
            int wid = (int)(pod_rand(&s) % MAX_W);
            int64_t start = (int64_t)(TEMP_BASE + ((uint64_t)wid << TEMP_SHIFT));
            int64_t acct = (int64_t)(pod_rand(&s) % (uint64_t)n);
            int64_t force = pod_rand(&s) % 10 == 0;
            pod_value v[3] = {pod_v_i64(start), pod_v_i64(acct), pod_v_i64(force)};
            if (call_counted(w, r, ws, P_UNPARK, v, 3, res) == POD_OK) {
                pod_value why;
                if (pod_result_get(res, 0, 0, &why) == 0 && why.u.i64 == R_OK) ws->unparked++;
                else ws->none++;
            }
        }
    }
    pod_result_free(res);
}

static int run_ms(void) { return tu_env_ms("BANK_MT_MS", TU_TSAN_OR(1500, 3000)); }

static uint64_t seed(void) { return tu_env_seed("BANK_MT_SEED"); }

static void run_bank(int nworkers, int naccounts, bool hot)
{
    tu_fail_reset();
    struct bank *b = bank_new(nworkers, naccounts);
    bank_load(b);
    struct run *r = calloc(1, sizeof *r);
    ck_assert_ptr_nonnull(r);
    r->b = b;
    r->seed = seed();
    r->max_iters = 2000000;
    int ms = run_ms();
    uint64_t t0 = pod_mono_ns();
    r->deadline_ns = t0 + (uint64_t)ms * 1000000ull;
    fprintf(stderr, "bank: %d accounts, %d workers, %d ms, seed 0x%" PRIx64 "\n", naccounts,
            nworkers, ms, r->seed);
    double secs = tu_run_workers(b->db, bank_body, r, r->seed);

    /* Sum the workers' own counts; add the admin calls (load, audits). */
    struct wstate tot = {0};
    for (int i = 0; i < nworkers; i++) {
        struct wstate *ws = &r->ws[i];
        for (int p = 0; p < P_COUNT; p++) {
            tot.t[p].calls += ws->t[p].calls;
            tot.t[p].ok += ws->t[p].ok;
            tot.t[p].user_aborts += ws->t[p].user_aborts;
            tot.t[p].other += ws->t[p].other;
        }
        tot.forced += ws->forced;
        tot.overdraw += ws->overdraw;
        tot.parked += ws->parked;
        tot.unparked += ws->unparked;
        tot.none += ws->none;
        tot.audits += ws->audits;
        tot.reverse_audits += ws->reverse_audits;
        if (ws->max_temp > tot.max_temp) tot.max_temp = ws->max_temp;
    }
    /* The final state, read by the admin worker: exact sum, and every
     * committed park not yet unparked is still there. */
    int64_t ntemp = admin_audit(b, false);
    ck_assert_int_eq(admin_audit(b, true), ntemp);
    ck_assert_int_eq(ntemp, (int64_t)(tot.parked - tot.unparked));
    tot.t[P_LOAD].calls++, tot.t[P_LOAD].ok++;
    tot.t[P_AUDIT].calls += 3, tot.t[P_AUDIT].ok += 3;

    uint64_t all_conflicts = 0, user_aborts = 0;
    for (int p = 0; p < P_COUNT; p++) {
        struct pod_proc_stats st;
        pod_db_proc_stats(b->db, b->proc[p], &st);
        uint64_t by = 0;
        for (int c = 0; c < POD_CAUSE_COUNT; c++) by += st.by_cause[c];
        fprintf(stderr,
                "  %-8s calls %7" PRIu64 "  commits %7" PRIu64 "  user_aborts %6" PRIu64
                "  errors %" PRIu64 "  gave_up %" PRIu64 "  conflicts %6" PRIu64
                " (read_lock %" PRIu64 ", write_lock %" PRIu64 ", upgrade %" PRIu64
                ", next_key %" PRIu64 ")\n",
                proc_names[p], tot.t[p].calls, st.commits, st.user_aborts, st.errors, st.gave_up,
                st.conflicts, st.by_cause[POD_CAUSE_READ_LOCK], st.by_cause[POD_CAUSE_WRITE_LOCK],
                st.by_cause[POD_CAUSE_UPGRADE], st.by_cause[POD_CAUSE_NEXT_KEY]);
        ck_assert_uint_eq(st.commits, tot.t[p].ok);
        ck_assert_uint_eq(st.user_aborts, tot.t[p].user_aborts);
        ck_assert_uint_eq(st.errors + st.gave_up, tot.t[p].other);
        ck_assert_uint_eq(st.errors, 0);
        ck_assert_uint_eq(st.gave_up, 0);
        ck_assert_uint_eq(st.commits + st.user_aborts + st.errors + st.gave_up, tot.t[p].calls);
        ck_assert_uint_eq(by, st.conflicts);
        all_conflicts += st.conflicts;
        user_aborts += st.user_aborts;
    }
    ck_assert_uint_eq(user_aborts, tot.forced + tot.overdraw);
    fprintf(stderr,
            "  %.2f s: %" PRIu64 " audits (%" PRIu64 " reverse), %" PRIu64 " forced and %" PRIu64
            " overdraw aborts, %" PRIu64 " parked, %" PRIu64 " unparked, %" PRId64
            " temporary rows left (peak seen %" PRIu64 ")\n",
            secs, tot.audits, tot.reverse_audits, tot.forced, tot.overdraw, tot.parked,
            tot.unparked, ntemp, tot.max_temp);

    /* The run did what it is meant to do. */
    struct pod_proc_stats tr;
    pod_db_proc_stats(b->db, b->proc[P_TRANSFER], &tr);
    ck_assert_uint_gt(tr.commits, 100);
    ck_assert_uint_gt(tot.audits, 10);
    ck_assert_uint_gt(tot.reverse_audits, 0);
    ck_assert_uint_gt(tot.forced, 0);
    ck_assert_uint_gt(tot.overdraw, 0);
    ck_assert_uint_gt(tot.parked, 0);
    ck_assert_uint_gt(tot.unparked, 0);
    for (int p = P_TRANSFER; p < P_COUNT; p++) {
        struct pod_proc_stats st;
        pod_db_proc_stats(b->db, b->proc[p], &st);
        ck_assert_msg(st.commits > 0, "%s never committed", proc_names[p]);
    }
    if (hot) {
        ck_assert_uint_gt(tr.conflicts, 0);
        ck_assert_uint_gt(all_conflicts, 0);
    }
    free(r);
    bank_free(b);
}

START_TEST(bank_64_accounts) { run_bank(4, 64, false); }
END_TEST

START_TEST(bank_8_accounts_hot) { run_bank(4, 8, true); }
END_TEST

START_TEST(bank_2_accounts_hottest) { run_bank(3, 2, true); }
END_TEST

int main(void)
{
    Suite *s = suite_create("bank_mt");
    TCase *single = tu_tcase(s, "single", 0);
    tcase_add_test(single, undo_single_thread);
    TCase *mt = tu_tcase(s, "threads", 120);
    tcase_add_test(mt, bank_64_accounts);
    tcase_add_test(mt, bank_8_accounts_hot);
    tcase_add_test(mt, bank_2_accounts_hottest);
    /* The same through the record-store seam: rs-2pl over the array store. */
    TCase *rs = tu_tcase(s, "record_store", 120);
    tcase_add_checked_fixture(rs, tu_use_array_store, NULL);
    tcase_add_test(rs, undo_single_thread);
    tcase_add_test(rs, bank_64_accounts);
    tcase_add_test(rs, bank_8_accounts_hot);
    tcase_add_test(rs, bank_2_accounts_hottest);
    return tu_run(s);
}
