/* SmallBank (workloads/smallbank) on one host; also built with ThreadSanitizer.
 *
 *  - single: each transaction's effect on a few accounts through the admin
 *    worker (WriteCheck's overdraft penalty, SendPayment's and
 *    TransactSavings' user aborts, Amalgamate), audit deltas = nets;
 *  - mix: 1000 accounts in 2 partitions, 3 workers for SMALLBANK_MT_MS ms
 *    (default 2000) of the standard mix with 90% of the picks from the 4%
 *    hot set; every transaction type commits, no errors; at the end the audit
 *    equals the initial total plus the sum of the committed transactions'
 *    net amounts, exactly.
 * SMALLBANK_MT_SEED=N fixes the seed. */
#include <check.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "poddb/proc.h"
#include "engine/db.h"
#include "engine/result.h"
#include "engine/worker.h"
#include "util/clock.h"
#include "workloads/smallbank/smallbank.h"
#include "helpers/testutil.h"

#define NWORKERS 3
#define MAX_CALLS_PER_WORKER 5000000

static uint64_t seed(void) { return tu_env_seed("SMALLBANK_MT_SEED"); }

static int run_ms(void) { return tu_env_ms("SMALLBANK_MT_MS", 2000); }

static pod_db *sb_db(const struct sb_config *cfg, int nworkers)
{
    char err[256];
    pod_db *db = tu_db_new(nworkers);
    ck_assert_msg(sb_register(db, cfg, err, sizeof err) == 0, "sb_register: %s", err);
    struct tu_progress pr = {0};
    ck_assert_msg(sb_load(db, tu_progress, &pr, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(pr.rows, cfg->accounts);
    ck_assert_uint_gt(pr.calls, 0);
    return db;
}

static void sb_db_free(pod_db *db)
{
    sb_free(db);
    pod_db_free(db);
}

static int64_t audit(pod_db *db)
{
    char err[256];
    int64_t t = 0;
    ck_assert_msg(sb_audit(db, &t, err, sizeof err) == 0, "%s", err);
    return t;
}

static int admin_call(pod_db *db, enum sb_txn txn, int64_t a0, int64_t a1, int64_t a2,
                      int64_t *net, int64_t *value)
{
    struct smallbank *s = sb_get(db);
    static const int nargs[SB_NTXNS] = {1, 2, 2, 2, 2, 3};
    pod_value v[3] = {pod_v_i64(a0), pod_v_i64(a1), pod_v_i64(a2)};
    pod_args args = {nargs[txn], v};
    pod_result *res = pod_result_new();
    char msg[256];
    struct pod_worker *w = pod_admin_begin(db);
    int rc = pod_call(w, s->proc[txn], &args, res, msg, sizeof msg);
    pod_admin_end(db);
    if (rc >= 0) {
        pod_value x;
        ck_assert_int_eq(pod_result_get(res, 0, 0, &x), 0);
        *net = x.u.i64;
        ck_assert_int_eq(pod_result_get(res, 0, 1, &x), 0);
        *value = x.u.i64;
    }
    pod_result_free(res);
    return rc;
}

START_TEST(single)
{
    struct sb_config cfg;
    sb_config_default(&cfg, 10, 2);
    pod_db *db = sb_db(&cfg, 1);
    int64_t total = audit(db), expect = 0;
    for (uint64_t i = 0; i < cfg.accounts; i++)
        expect += sb_initial_balance(&cfg, SB_SAVINGS, i) + sb_initial_balance(&cfg, SB_CHECKING, i);
    ck_assert_int_eq(total, expect);
    int64_t sav3 = sb_initial_balance(&cfg, SB_SAVINGS, 3);
    int64_t chk3 = sb_initial_balance(&cfg, SB_CHECKING, 3);
    int64_t chk7 = sb_initial_balance(&cfg, SB_CHECKING, 7);
    int64_t net, v;

    ck_assert_int_eq(admin_call(db, SB_BALANCE, 3, 0, 0, &net, &v), POD_OK);
    ck_assert_int_eq(net, 0);
    ck_assert_int_eq(v, sav3 + chk3);
    ck_assert_int_eq(admin_call(db, SB_BALANCE, 10, 0, 0, &net, &v), POD_USER_ABORT);

    ck_assert_int_eq(admin_call(db, SB_DEPOSIT_CHECKING, 3, 250, 0, &net, &v), POD_OK);
    ck_assert_int_eq(net, 250);
    chk3 += 250;
    ck_assert_int_eq(v, chk3);
    ck_assert_int_eq(audit(db), total + 250);

    /* TransactSavings can't make savings negative */
    ck_assert_int_eq(admin_call(db, SB_TRANSACT_SAVINGS, 3, -sav3 - 1, 0, &net, &v), POD_USER_ABORT);
    ck_assert_int_eq(admin_call(db, SB_TRANSACT_SAVINGS, 3, -100, 0, &net, &v), POD_OK);
    ck_assert_int_eq(net, -100);
    sav3 -= 100;
    ck_assert_int_eq(v, sav3);

    /* SendPayment needs the funds in checking */
    ck_assert_int_eq(admin_call(db, SB_SEND_PAYMENT, 3, 7, chk3 + 1, &net, &v), POD_USER_ABORT);
    ck_assert_int_eq(admin_call(db, SB_SEND_PAYMENT, 3, 7, 1000, &net, &v), POD_OK);
    ck_assert_int_eq(net, 0);
    chk3 -= 1000;
    chk7 += 1000;
    ck_assert_int_eq(v, chk3);

    /* WriteCheck within the balance: no penalty */
    ck_assert_int_eq(admin_call(db, SB_WRITE_CHECK, 3, 500, 0, &net, &v), POD_OK);
    ck_assert_int_eq(net, -500);
    chk3 -= 500;
    ck_assert_int_eq(v, chk3);
    /* ... beyond it: checking goes negative, with the 1.00 penalty */
    int64_t big = sav3 + chk3 + 1;
    ck_assert_int_eq(admin_call(db, SB_WRITE_CHECK, 3, big, 0, &net, &v), POD_OK);
    ck_assert_int_eq(net, -big - SB_OVERDRAFT_PENALTY);
    chk3 -= big + SB_OVERDRAFT_PENALTY;
    ck_assert_int_eq(v, chk3);
    ck_assert_int_lt(v, 0);

    /* Amalgamate moves everything of 3 into 7's checking */
    ck_assert_int_eq(admin_call(db, SB_AMALGAMATE, 3, 7, 0, &net, &v), POD_OK);
    ck_assert_int_eq(net, 0);
    ck_assert_int_eq(v, chk7 + sav3 + chk3);
    ck_assert_int_eq(admin_call(db, SB_BALANCE, 3, 0, 0, &net, &v), POD_OK);
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(admin_call(db, SB_AMALGAMATE, 3, 3, 0, &net, &v), POD_USER_ABORT);

    ck_assert_int_eq(audit(db), total + 250 - 100 - 500 - big - SB_OVERDRAFT_PENALTY);
    pod_db_print_stats(db, stderr);
    sb_db_free(db);
}
END_TEST

/* ---- the mix on 3 workers ---------------------------------------------------------------- */

struct tally {
    uint64_t calls, ok, user_aborts;
    int64_t net;
};

struct run {
    pod_db *db;
    struct smallbank *s;
    struct sb_config cfg;
    uint64_t seed, deadline_ns;
    struct tally tl[NWORKERS][SB_NTXNS];
};

static void mix_body(struct pod_worker *w, void *arg)
{
    struct run *r = arg;
    struct tally *tl = r->tl[w->id];
    uint64_t rng = (r->seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1))) | 1;
    pod_result *res = pod_result_new();
    if (!res) {
        tu_fail("worker %d: out of memory", w->id);
        return;
    }
    struct sb_call call;
    for (int i = 0; i < MAX_CALLS_PER_WORKER && !tu_failed(); i++) {
        if ((i & 7) == 0 && pod_mono_ns() > r->deadline_ns) break;
        sb_next_call(&r->cfg, &rng, &call);
        pod_args args = {call.nargs, call.args};
        char msg[256];
        int rc = pod_call(w, r->s->proc[call.txn], &args, res, msg, sizeof msg);
        struct tally *t = &tl[call.txn];
        t->calls++;
        if (rc == POD_USER_ABORT) {
            t->user_aborts++;
            if (call.txn != SB_TRANSACT_SAVINGS && call.txn != SB_SEND_PAYMENT)
                tu_fail("%s aborted: %s", sb_txn_names[call.txn], msg);
            continue;
        }
        if (rc < 0) {
            tu_fail("worker %d: %s: %s: %s", w->id, sb_txn_names[call.txn], pod_status_name(rc),
                    msg);
            break;
        }
        pod_value v;
        if (pod_result_get(res, 0, 0, &v) != 0 || v.type != POD_T_I64) {
            tu_fail("%s: no net amount", sb_txn_names[call.txn]);
            break;
        }
        t->ok++;
        t->net += v.u.i64;
    }
    pod_result_free(res);
}

START_TEST(mix)
{
    tu_fail_reset();
    struct sb_config cfg;
    sb_config_default(&cfg, 1000, 2);
    pod_db *db = sb_db(&cfg, NWORKERS);
    int64_t initial = audit(db);
    struct run *r = calloc(1, sizeof *r);
    ck_assert_ptr_nonnull(r);
    r->db = db;
    r->s = sb_get(db);
    r->cfg = cfg;
    r->seed = seed();
    int ms = run_ms();
    uint64_t t0 = pod_mono_ns();
    r->deadline_ns = t0 + (uint64_t)ms * 1000000ull;
    fprintf(stderr, "smallbank: %" PRIu64 " accounts (%" PRIu64 " hot, %u%%), %u partitions, "
            "%d workers, %d ms, seed 0x%" PRIx64 "\n", cfg.accounts, cfg.hot, cfg.hot_pct,
            cfg.nparts, NWORKERS, ms, r->seed);
    double secs = tu_run_workers(db, mix_body, r, r->seed);
    pod_db_print_stats(db, stderr);
    int64_t net = 0;
    uint64_t all = 0, conflicts = 0;
    for (int x = 0; x < SB_NTXNS; x++) {
        struct tally tot = {0};
        for (int i = 0; i < NWORKERS; i++) {
            tot.calls += r->tl[i][x].calls;
            tot.ok += r->tl[i][x].ok;
            tot.user_aborts += r->tl[i][x].user_aborts;
            tot.net += r->tl[i][x].net;
        }
        struct pod_proc_stats st;
        pod_db_proc_stats(db, r->s->proc[x], &st);
        fprintf(stderr, "  %-28s calls %8" PRIu64 "  commits %8" PRIu64 "  user_aborts %6" PRIu64
                "  conflicts %6" PRIu64 "  net %+" PRId64 "\n", sb_txn_names[x], tot.calls,
                st.commits, st.user_aborts, st.conflicts, tot.net);
        ck_assert_msg(st.commits > 0, "%s never committed", sb_txn_names[x]);
        ck_assert_uint_eq(st.commits, tot.ok);
        ck_assert_uint_eq(st.user_aborts, tot.user_aborts);
        ck_assert_uint_eq(st.errors, 0);
        ck_assert_uint_eq(st.gave_up, 0);
        net += tot.net;
        all += tot.calls;
        conflicts += st.conflicts;
    }
    int64_t final = audit(db);
    fprintf(stderr, "  %.2f s, %" PRIu64 " transactions (%.0f/s), %" PRIu64 " conflicts; audit: "
            "initial %" PRId64 " + net %" PRId64 " = %" PRId64 ", final %" PRId64 "\n", secs, all,
            (double)all / secs, conflicts, initial, net, initial + net, final);
    ck_assert_msg(final == initial + net, "seed 0x%" PRIx64 ": audit %" PRId64 " != %" PRId64,
                  r->seed, final, initial + net);
    /* the mix (loose bounds): WriteCheck 25%, the others 15% */
    if (all >= 4000) {
        uint64_t wc = 0;
        for (int i = 0; i < NWORKERS; i++) wc += r->tl[i][SB_WRITE_CHECK].calls;
        ck_assert_uint_gt(wc * 100, all * 20);
        ck_assert_uint_lt(wc * 100, all * 30);
    }
    free(r);
    sb_db_free(db);
}
END_TEST

START_TEST(hot_picks)
{
    struct sb_config cfg;
    sb_config_default(&cfg, 1000, 2);
    ck_assert_uint_eq(cfg.hot, 40);
    uint64_t rng = seed(), hot = 0, part1 = 0;
    for (int i = 0; i < 100000; i++) {
        uint64_t a = sb_pick_account(&cfg, &rng);
        ck_assert_uint_lt(a, cfg.accounts);
        hot += a % (cfg.accounts / cfg.hot) == 0;
        part1 += sb_part_of(a, cfg.accounts, cfg.nparts) == 1;
    }
    /* 90% from the hot set, plus the cold picks that land on a hot id (0.4%) */
    ck_assert_uint_gt(hot, 89000);
    ck_assert_uint_lt(hot, 92000);
    ck_assert_uint_gt(part1, 45000);
    ck_assert_uint_lt(part1, 55000);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("smallbank_mt");
    TCase *tc1 = tu_tcase(s, "single", 60);
    tcase_add_test(tc1, single);
    tcase_add_test(tc1, hot_picks);
    TCase *mt = tu_tcase(s, "threads", 120);
    tcase_add_test(mt, mix);
    return tu_run(s);
}
