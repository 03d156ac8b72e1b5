/* SmallBank: tables, loader, the six transactions, the audit and the input
 * generator. See smallbank.h and docs/smallbank.md. */
#include "workloads/smallbank/smallbank.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workloads/common/procs.h"
#include "workloads/common/range.h"
#include "workloads/ycsb/ycsb.h"
#include "util/clock.h"
#include "util/mix.h"

#define ARG(i) (a->v[(i)].u.i64)

const char *const sb_table_names[SB_NTABLES] = {"accounts", "savings", "checking"};
const char *const sb_txn_names[SB_NTXNS] = {
    "smallbank.balance",    "smallbank.deposit_checking", "smallbank.transact_savings",
    "smallbank.amalgamate", "smallbank.write_check",      "smallbank.send_payment",
};

void sb_config_default(struct sb_config *c, uint64_t accounts, uint32_t nparts)
{
    memset(c, 0, sizeof *c);
    c->accounts = accounts < 2 ? 2 : accounts;
    c->nparts = nparts ? nparts : 1;
    if (c->nparts > c->accounts) c->nparts = (uint32_t)c->accounts;
    c->hot = c->accounts * 4 / 100 ? c->accounts * 4 / 100 : 1;
    c->hot_pct = 90;
    c->min_balance = 10000;  /* 100.00 */
    c->max_balance = 50000;  /* 500.00 */
    c->load_batch = 100;
    c->seed = 42;
}

/* ---- partitioning and random numbers ------------------------------------------------------ */

uint32_t sb_part_of(uint64_t id, uint64_t accounts, uint32_t nparts)
{
    return wl_part_of(id, accounts, nparts);
}

uint64_t sb_part_first(uint32_t p, uint64_t accounts, uint32_t nparts)
{
    return wl_part_first(p, accounts, nparts);
}

uint32_t sb_partition(const void *key, uint32_t nparts, void *ctx)
{
    const struct smallbank *s = ctx;
    return sb_part_of(pod_key_get_u64(key), s->cfg.accounts, nparts);
}

uint64_t sb_rand(uint64_t *s)
{
    return pod_rand(s);
}

static uint64_t below(uint64_t *rng, uint64_t n) { return n ? (sb_rand(rng) >> 11) % n : 0; }

int64_t sb_initial_balance(const struct sb_config *c, enum sb_table_id t, uint64_t id)
{
    uint64_t span = (uint64_t)(c->max_balance - c->min_balance) + 1;
    return c->min_balance + (int64_t)(pod_mix64(c->seed ^ ((uint64_t)t << 56) ^ id) % span);
}

/* ---- transactions ---------------------------------------------------------------------------- */

static int get_bal(pod_txn *tx, pod_table *t, const unsigned char *k, bool upd, int64_t *out)
{
    struct sb_balance b;
    int rc = upd ? pod_get_for_update(tx, t, k, &b) : pod_get(tx, t, k, &b);
    if (rc < 0) return rc;
    if (rc != POD_OK)
        return pod_txn_fail(tx, POD_E_INTERNAL, "smallbank: %s %" PRIu64 ": %s", pod_table_name(t),
                            pod_key_get_u64(k), pod_status_name(rc));
    *out = b.bal;
    return POD_OK;
}

static int put_bal(pod_txn *tx, pod_table *t, const unsigned char *k, int64_t v)
{
    struct sb_balance b = {v};
    int rc = pod_put(tx, t, k, &b);
    if (rc < 0) return rc;
    if (rc != POD_OK)
        return pod_txn_fail(tx, POD_E_INTERNAL, "smallbank: put %s: %s", pod_table_name(t),
                            pod_status_name(rc));
    return POD_OK;
}

/* The account lookup every transaction starts with (by id here; the spec looks
 * the name up): an unknown account rolls back. */
static int lookup(pod_txn *tx, const struct smallbank *s, int64_t id, unsigned char *k)
{
    if (id < 0 || (uint64_t)id >= s->cfg.accounts)
        return pod_txn_fail(tx, POD_USER_ABORT, "smallbank: no account %" PRId64, id);
    pod_key_u64(k, (uint64_t)id);
    struct sb_account acc;
    int rc = pod_get(tx, s->t[SB_ACCOUNTS], k, &acc);
    if (rc < 0) return rc;
    if (rc != POD_OK) return pod_txn_fail(tx, POD_USER_ABORT, "smallbank: no account %" PRId64, id);
    return POD_OK;
}

static int result(pod_result *res, int64_t net, int64_t value)
{
    pod_result_i64(res, net);
    pod_result_i64(res, value);
    return POD_OK;
}

static int p_balance(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct smallbank *s = ctx;
    unsigned char k[SB_KEY_SIZE];
    int64_t sav, chk;
    POD_TRY(lookup(tx, s, ARG(0), k));
    POD_TRY(get_bal(tx, s->t[SB_SAVINGS], k, false, &sav));
    POD_TRY(get_bal(tx, s->t[SB_CHECKING], k, false, &chk));
    return result(res, 0, sav + chk);
}

static int p_deposit_checking(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct smallbank *s = ctx;
    unsigned char k[SB_KEY_SIZE];
    int64_t chk, amount = ARG(1);
    if (amount < 0) return pod_txn_fail(tx, POD_USER_ABORT, "smallbank: negative deposit");
    POD_TRY(lookup(tx, s, ARG(0), k));
    POD_TRY(get_bal(tx, s->t[SB_CHECKING], k, true, &chk));
    POD_TRY(put_bal(tx, s->t[SB_CHECKING], k, chk + amount));
    return result(res, amount, chk + amount);
}

static int p_transact_savings(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct smallbank *s = ctx;
    unsigned char k[SB_KEY_SIZE];
    int64_t sav, amount = ARG(1);
    POD_TRY(lookup(tx, s, ARG(0), k));
    POD_TRY(get_bal(tx, s->t[SB_SAVINGS], k, true, &sav));
    if (sav + amount < 0) return pod_txn_fail(tx, POD_USER_ABORT, "smallbank: negative savings");
    POD_TRY(put_bal(tx, s->t[SB_SAVINGS], k, sav + amount));
    return result(res, amount, sav + amount);
}

static int p_amalgamate(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct smallbank *s = ctx;
    unsigned char k0[SB_KEY_SIZE], k1[SB_KEY_SIZE];
    int64_t sav0, chk0, chk1;
    if (ARG(0) == ARG(1)) return pod_txn_fail(tx, POD_USER_ABORT, "smallbank: same account");
    POD_TRY(lookup(tx, s, ARG(0), k0));
    POD_TRY(lookup(tx, s, ARG(1), k1));
    POD_TRY(get_bal(tx, s->t[SB_SAVINGS], k0, true, &sav0));
    POD_TRY(get_bal(tx, s->t[SB_CHECKING], k0, true, &chk0));
    POD_TRY(get_bal(tx, s->t[SB_CHECKING], k1, true, &chk1));
    POD_TRY(put_bal(tx, s->t[SB_SAVINGS], k0, 0));
    POD_TRY(put_bal(tx, s->t[SB_CHECKING], k0, 0));
    POD_TRY(put_bal(tx, s->t[SB_CHECKING], k1, chk1 + sav0 + chk0));
    return result(res, 0, chk1 + sav0 + chk0);
}

static int p_write_check(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct smallbank *s = ctx;
    unsigned char k[SB_KEY_SIZE];
    int64_t sav, chk, amount = ARG(1);
    if (amount < 0) return pod_txn_fail(tx, POD_USER_ABORT, "smallbank: negative check");
    POD_TRY(lookup(tx, s, ARG(0), k));
    POD_TRY(get_bal(tx, s->t[SB_SAVINGS], k, false, &sav));
    POD_TRY(get_bal(tx, s->t[SB_CHECKING], k, true, &chk));
    int64_t debit = sav + chk < amount ? amount + SB_OVERDRAFT_PENALTY : amount;
    POD_TRY(put_bal(tx, s->t[SB_CHECKING], k, chk - debit));
    return result(res, -debit, chk - debit);
}

static int p_send_payment(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct smallbank *s = ctx;
    unsigned char k0[SB_KEY_SIZE], k1[SB_KEY_SIZE];
    int64_t chk0, chk1, amount = ARG(2);
    if (amount < 0 || ARG(0) == ARG(1))
        return pod_txn_fail(tx, POD_USER_ABORT, "smallbank: bad payment");
    POD_TRY(lookup(tx, s, ARG(0), k0));
    POD_TRY(lookup(tx, s, ARG(1), k1));
    POD_TRY(get_bal(tx, s->t[SB_CHECKING], k0, true, &chk0));
    if (chk0 < amount) return pod_txn_fail(tx, POD_USER_ABORT, "smallbank: insufficient funds");
    POD_TRY(get_bal(tx, s->t[SB_CHECKING], k1, true, &chk1));
    POD_TRY(put_bal(tx, s->t[SB_CHECKING], k0, chk0 - amount));
    POD_TRY(put_bal(tx, s->t[SB_CHECKING], k1, chk1 + amount));
    return result(res, 0, chk0 - amount);
}

struct audit_acc {
    int64_t total;
    uint64_t rows;
};

static bool audit_visit(void *arg, const void *key, const void *tuple)
{
    (void)key;
    struct audit_acc *acc = arg;
    struct sb_balance b;
    memcpy(&b, tuple, sizeof b);
    acc->total += b.bal;
    acc->rows++;
    return true;
}

/* Add table t's rows in partition p to acc: one scan (scans stay in a
 * partition). */
static int audit_scan(pod_txn *tx, const struct smallbank *s, int t, uint32_t p,
                      struct audit_acc *acc)
{
    uint64_t first = sb_part_first(p, s->cfg.accounts, s->cfg.nparts);
    uint64_t end = sb_part_first(p + 1, s->cfg.accounts, s->cfg.nparts);
    if (end <= first) return POD_OK;
    unsigned char lo[SB_KEY_SIZE], hi[SB_KEY_SIZE];
    pod_key_u64(lo, first);
    pod_key_u64(hi, end - 1);
    return pod_scan(tx, s->t[t], lo, hi, 0, 0, audit_visit, acc);
}

static int audit_result(pod_result *res, const struct audit_acc *acc)
{
    pod_result_i64(res, acc->total);
    pod_result_i64(res, (int64_t)acc->rows);
    return POD_OK;
}

/* smallbank.audit(): both tables, every partition. */
static int p_audit(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)a;
    struct smallbank *s = ctx;
    struct audit_acc acc = {0, 0};
    for (int t = SB_SAVINGS; t <= SB_CHECKING; t++)
        for (uint32_t p = 0; p < s->cfg.nparts; p++) POD_TRY(audit_scan(tx, s, t, p, &acc));
    return audit_result(res, &acc);
}

/* smallbank.audit_partition(p): the same for one partition. */
static int p_audit_partition(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    struct smallbank *s = ctx;
    if (ARG(0) < 0 || ARG(0) >= s->cfg.nparts)
        return pod_txn_fail(tx, POD_E_INVALID, "smallbank.audit_partition: no partition %" PRId64,
                            ARG(0));
    struct audit_acc acc = {0, 0};
    for (int t = SB_SAVINGS; t <= SB_CHECKING; t++)
        POD_TRY(audit_scan(tx, s, t, (uint32_t)ARG(0), &acc));
    return audit_result(res, &acc);
}

static int ins(pod_txn *tx, pod_table *t, const unsigned char *k, const void *tuple)
{
    int rc = pod_insert(tx, t, k, tuple);
    if (rc < 0) return rc;
    if (rc != POD_OK)
        return pod_txn_fail(tx, POD_E_INTERNAL, "smallbank load: insert into %s: %s",
                            pod_table_name(t), pod_status_name(rc));
    return POD_OK;
}

/* smallbank.load(from, to) */
static int p_load(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)res;
    struct smallbank *s = ctx;
    if (ARG(0) < 0 || ARG(1) < ARG(0) || (uint64_t)ARG(1) > s->cfg.accounts)
        return pod_txn_fail(tx, POD_E_INVALID, "smallbank.load: bad range");
    if (ARG(1) > ARG(0)) {
        unsigned char k[SB_KEY_SIZE];
        pod_key_u64(k, (uint64_t)ARG(0));
        int done = wl_unit_loaded(tx, s->t[SB_ACCOUNTS], k);
        if (done) return done < 0 ? done : WL_UNIT_SKIPPED;
    }
    for (uint64_t id = (uint64_t)ARG(0); id < (uint64_t)ARG(1); id++) {
        unsigned char k[SB_KEY_SIZE];
        pod_key_u64(k, id);
        struct sb_account acc;
        memset(&acc, 0, sizeof acc);
        acc.id = id;
        snprintf(acc.name, sizeof acc.name, "c%" PRIu64, id);
        POD_TRY(ins(tx, s->t[SB_ACCOUNTS], k, &acc));
        struct sb_balance b = {sb_initial_balance(&s->cfg, SB_SAVINGS, id)};
        POD_TRY(ins(tx, s->t[SB_SAVINGS], k, &b));
        b.bal = sb_initial_balance(&s->cfg, SB_CHECKING, id);
        POD_TRY(ins(tx, s->t[SB_CHECKING], k, &b));
    }
    return POD_OK;
}

/* ---- registration ------------------------------------------------------------------------------ */

static const pod_column account_cols[] = {
    {"id", POD_COL_I64, 0, 8},
    {"name", POD_COL_BYTES, 8, SB_NAME_LEN},
};
static const pod_column balance_cols[] = {{"bal", POD_COL_I64, 0, 8}};

int sb_register(pod_db *db, const struct sb_config *cfg, char *err, size_t errlen)
{
    if (cfg->accounts < 2 || !cfg->nparts || cfg->nparts > cfg->accounts || !cfg->hot ||
        cfg->hot > cfg->accounts || cfg->hot_pct > 100 || cfg->min_balance < 0 ||
        cfg->max_balance < cfg->min_balance) {
        snprintf(err, errlen, "smallbank: bad configuration");
        return -1;
    }
    if (sb_get(db)) {
        snprintf(err, errlen, "smallbank: already registered");
        return -1;
    }
    for (int i = 0; i < SB_NTABLES; i++)
        if (pod_table_find(db, sb_table_names[i])) {
            snprintf(err, errlen, "smallbank: table %s exists", sb_table_names[i]);
            return -1;
        }
    struct smallbank *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "smallbank: out of memory");
        return -1;
    }
    s->cfg = *cfg;
    if (!s->cfg.load_batch) s->cfg.load_batch = 100;
    /* The tables keep s as their partition context: s lives until sb_free
     * (or forever if registration fails half-way: there is no drop). */
    bool any_table = false;
    for (int i = 0; i < SB_NTABLES; i++) {
        pod_table_def def = {
            .name = sb_table_names[i],
            .key_size = SB_KEY_SIZE,
            .tuple_size = i == SB_ACCOUNTS ? sizeof(struct sb_account) : sizeof(struct sb_balance),
            .ncols = i == SB_ACCOUNTS ? 2 : 1,
            .cols = i == SB_ACCOUNTS ? account_cols : balance_cols,
            .nparts = cfg->nparts,
            .partition = sb_partition,
            .partition_ctx = s,
            .expected_rows = cfg->accounts,
        };
        s->t[i] = pod_table_create(db, &def, err, errlen);
        if (!s->t[i]) {
            if (!any_table) free(s);
            return -1;
        }
        any_table = true;
    }
    static const enum pod_type i64s[3] = {POD_T_I64, POD_T_I64, POD_T_I64};
    static const pod_proc_fn fns[SB_NTXNS] = {p_balance,  p_deposit_checking, p_transact_savings,
                                              p_amalgamate, p_write_check,    p_send_payment};
    static const int nargs[SB_NTXNS] = {1, 2, 2, 2, 2, 3};
    for (int i = 0; i < SB_NTXNS; i++) {
        pod_proc_def d = {sb_txn_names[i], fns[i], s, nargs[i], i64s, i == SB_BALANCE};
        if ((s->proc[i] = pod_proc_register(db, &d, err, errlen)) < 0) return -1;
    }
    pod_proc_def audit = {"smallbank.audit", p_audit, s, 0, NULL, true};
    if ((s->proc_audit = pod_proc_register(db, &audit, err, errlen)) < 0) return -1;
    pod_proc_def load = {"smallbank.load", p_load, s, 2, i64s, false};
    if ((s->proc_load = pod_proc_register(db, &load, err, errlen)) < 0) return -1;
    pod_proc_def audit_p = {"smallbank.audit_partition", p_audit_partition, s, 1, i64s, true};
    if ((s->proc_audit_partition = pod_proc_register(db, &audit_p, err, errlen)) < 0) return -1;
    return 0;
}

struct smallbank *sb_get(pod_db *db) { return wl_ctx_get(db, sb_txn_names[0]); }

void sb_free(pod_db *db) { wl_ctx_free(db, sb_txn_names[0], "smallbank."); }

/* ---- loader and audit ----------------------------------------------------------------------------- */

int sb_load(pod_db *db, sb_progress_fn progress, void *progress_arg, char *err, size_t errlen)
{
    struct smallbank *x = sb_get(db);
    if (!x) {
        snprintf(err, errlen, "sb_load: sb_register first");
        return -1;
    }
    return wl_load_ranges(db, x->proc_load, x->cfg.accounts, x->cfg.nparts, x->cfg.load_batch,
                          progress, progress_arg, "smallbank.load", err, errlen);
}

/* smallbank.audit (p < 0) or smallbank.audit_partition(p): the balances'
 * total and the rows summed. */
static int audit_call(pod_db *db, struct pod_worker *wk, int64_t p, int64_t *total,
                      uint64_t *rows, char *err, size_t errlen)
{
    struct smallbank *s = sb_get(db);
    if (!s) {
        snprintf(err, errlen, "sb_audit: sb_register first");
        return -1;
    }
    pod_result *res = pod_result_new();
    if (!res) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    pod_value v[1] = {pod_v_i64(p)};
    pod_args args = {p < 0 ? 0 : 1, v};
    char msg[200];
    int rc = wl_call(db, wk, p < 0 ? s->proc_audit : s->proc_audit_partition, &args, res, msg,
                     sizeof msg);
    pod_value t, n;
    int ret = 0;
    if (rc < 0 || pod_result_get(res, 0, 0, &t) || pod_result_get(res, 0, 1, &n)) {
        if (p < 0)
            snprintf(err, errlen, "smallbank.audit: %s: %s", pod_status_name(rc), msg);
        else
            snprintf(err, errlen, "smallbank.audit_partition(%" PRId64 "): %s: %s", p,
                     pod_status_name(rc), msg);
        ret = -1;
    } else {
        *total = t.u.i64;
        *rows = (uint64_t)n.u.i64;
    }
    pod_result_free(res);
    return ret;
}

int sb_audit(pod_db *db, int64_t *total, char *err, size_t errlen)
{
    uint64_t rows;
    int64_t t;
    if (audit_call(db, NULL, -1, &t, &rows, err, errlen) != 0) return -1;
    uint64_t want = 2 * sb_get(db)->cfg.accounts;
    if (rows != want) {
        snprintf(err, errlen, "smallbank.audit: %" PRId64 " balance rows, expected %" PRIu64,
                 (int64_t)rows, want);
        return -1;
    }
    *total = t;
    return 0;
}

int sb_audit_partition(pod_db *db, struct pod_worker *wk, uint32_t p, int64_t *total,
                       uint64_t *rows, char *err, size_t errlen)
{
    return audit_call(db, wk, p, total, rows, err, errlen);
}

/* ---- input generation ---------------------------------------------------------------------------- */

uint64_t sb_pick_account(const struct sb_config *c, uint64_t *rng)
{
    if (below(rng, 100) < c->hot_pct) {
        uint64_t h = below(rng, c->hot);
        return (uint64_t)((unsigned __int128)h * c->accounts / c->hot);
    }
    return below(rng, c->accounts);
}

/* The mix: Balance 15, DepositChecking 15, TransactSavings 15, Amalgamate 15,
 * WriteCheck 25, SendPayment 15. */
static enum sb_txn draw_txn(uint64_t *rng)
{
    uint64_t x = below(rng, 100);
    return x < 15   ? SB_BALANCE
           : x < 30 ? SB_DEPOSIT_CHECKING
           : x < 45 ? SB_TRANSACT_SAVINGS
           : x < 60 ? SB_AMALGAMATE
           : x < 85 ? SB_WRITE_CHECK
                    : SB_SEND_PAYMENT;
}

/* The arguments of out->txn for accounts a0 (and a1). */
static void fill_args(struct sb_call *out, uint64_t *rng, uint64_t a0, uint64_t a1)
{
    out->args[0] = pod_v_i64((int64_t)a0);
    switch (out->txn) {
    case SB_BALANCE:
        out->nargs = 1;
        break;
    case SB_DEPOSIT_CHECKING:
    case SB_WRITE_CHECK:
        out->nargs = 2;
        out->args[1] = pod_v_i64(1 + (int64_t)below(rng, 10000)); /* 0.01 .. 100.00 */
        break;
    case SB_TRANSACT_SAVINGS:
        out->nargs = 2;
        out->args[1] = pod_v_i64((int64_t)below(rng, 20001) - 10000); /* -100.00 .. 100.00 */
        break;
    case SB_AMALGAMATE:
        out->nargs = 2;
        out->args[1] = pod_v_i64((int64_t)a1);
        break;
    case SB_SEND_PAYMENT:
        out->nargs = 3;
        out->args[1] = pod_v_i64((int64_t)a1);
        out->args[2] = pod_v_i64(1 + (int64_t)below(rng, 10000));
        break;
    default:
        break;
    }
}

void sb_next_call(const struct sb_config *c, uint64_t *rng, struct sb_call *out)
{
    memset(out, 0, sizeof *out);
    out->txn = draw_txn(rng);
    uint64_t a0 = sb_pick_account(c, rng), a1 = a0;
    if (out->txn == SB_AMALGAMATE || out->txn == SB_SEND_PAYMENT)
        while (a1 == a0) a1 = sb_pick_account(c, rng);
    fill_args(out, rng, a0, a1);
}

/* ---- partition-local generation (the benchmark driver) ----------------------------------- */

void sb_gen_init(struct sb_gen *g, const struct sb_config *cfg, double theta, uint32_t remote_pct)
{
    memset(g, 0, sizeof *g);
    g->cfg = *cfg;
    g->theta = theta;
    g->remote_pct = remote_pct;
    if (theta > 0) {
        uint64_t maxsize = 0;
        for (uint32_t p = 0; p < cfg->nparts; p++) {
            uint64_t n = sb_part_first(p + 1, cfg->accounts, cfg->nparts) -
                         sb_part_first(p, cfg->accounts, cfg->nparts);
            if (n > maxsize) maxsize = n;
        }
        ycsb_zipf_init(&g->zipf, maxsize, theta);
    }
}

uint64_t sb_pick_in_partition(const struct sb_gen *g, uint64_t *rng, uint32_t p)
{
    const struct sb_config *c = &g->cfg;
    uint64_t first = sb_part_first(p, c->accounts, c->nparts);
    uint64_t size = sb_part_first(p + 1, c->accounts, c->nparts) - first;
    if (size <= 1) return first;
    if (g->theta > 0) {
        for (;;) {
            uint64_t r = ycsb_zipf_next(&g->zipf, rng);
            if (r < size) return first + r; /* only the largest partitions have the last rank */
        }
    }
    if (below(rng, 100) < c->hot_pct) {
        /* The partition's share of the hot set, spread over its ids. */
        uint64_t hot = (uint64_t)((unsigned __int128)c->hot * size / c->accounts);
        if (!hot) hot = 1;
        return first + (uint64_t)((unsigned __int128)below(rng, hot) * size / hot);
    }
    return first + below(rng, size);
}

void sb_next_call_home(const struct sb_gen *g, uint64_t *rng, uint32_t home, struct sb_call *out)
{
    const struct sb_config *c = &g->cfg;
    home %= c->nparts;
    memset(out, 0, sizeof *out);
    out->txn = draw_txn(rng);
    uint64_t a0 = sb_pick_in_partition(g, rng, home), a1 = a0;
    if (out->txn == SB_AMALGAMATE || out->txn == SB_SEND_PAYMENT) {
        uint32_t p1 = home;
        if (c->nparts > 1 && below(rng, 100) < g->remote_pct) {
            p1 = wl_other_part(sb_rand(rng) >> 11, c->nparts, home, c->hosts);
            out->remote = true;
        }
        /* A partition of one account has no second account: take a neighbour's. */
        if (p1 == home && sb_part_first(home + 1, c->accounts, c->nparts) -
                                  sb_part_first(home, c->accounts, c->nparts) < 2) {
            p1 = (home + 1) % c->nparts;
            out->remote = p1 != home;
        }
        while (a1 == a0) a1 = sb_pick_in_partition(g, rng, p1);
    }
    fill_args(out, rng, a0, a1);
}
