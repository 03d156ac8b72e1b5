/* YCSB (workloads/ycsb) on one host; also built with ThreadSanitizer.
 *
 *  - zipf: the Zipfian generator's most frequent rank gets 1/zeta(n, theta)
 *    of the draws (±20%) for theta 0.99 and 0.7; theta 0 is uniform;
 *  - mix: 20000 tuples in 2 partitions, 3 workers, phases 50/50 with theta
 *    0.7 and 0.99 and multi_partition 0.1 and 1.0, then 95/5; YCSB_MT_MS ms
 *    (default 2000) in all. Every phase commits, no errors; conflicts are
 *    counted; at the end the sum of all column counters (each committed RMW
 *    increments one) equals the RMW ops the workers saw committed, exactly.
 * YCSB_MT_SEED=N fixes the seed. */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "poddb/proc.h"
#include "engine/db.h"
#include "engine/result.h"
#include "engine/worker.h"
#include "util/clock.h"
#include "workloads/ycsb/ycsb.h"
#include "helpers/testutil.h"

#define NWORKERS 3
#define MAX_CALLS_PER_WORKER 2000000

static uint64_t seed(void) { return tu_env_seed("YCSB_MT_SEED"); }

static int run_ms(void) { return tu_env_ms("YCSB_MT_MS", 2000); }

/* ---- the Zipfian generator -------------------------------------------------------------- */

static void zipf_top_share(double theta)
{
    enum { N = 1000, DRAWS = 200000 };
    struct ycsb_zipf z;
    ycsb_zipf_init(&z, N, theta);
    static uint32_t cnt[N];
    memset(cnt, 0, sizeof cnt);
    uint64_t rng = seed();
    for (int i = 0; i < DRAWS; i++) {
        uint64_t r = ycsb_zipf_next(&z, &rng);
        ck_assert_uint_lt(r, N);
        cnt[r]++;
    }
    double expect = DRAWS / ycsb_zeta(N, theta);
    double expect1 = expect / pow(2.0, theta);
    fprintf(stderr, "zipf theta %.2f: rank0 %u (expected %.0f), rank1 %u (expected %.0f)\n", theta,
            cnt[0], expect, cnt[1], expect1);
    ck_assert_msg(cnt[0] > 0.8 * expect && cnt[0] < 1.2 * expect, "theta %.2f: rank 0 %u vs %.0f",
                  theta, cnt[0], expect);
    ck_assert_msg(cnt[1] > 0.8 * expect1 && cnt[1] < 1.2 * expect1,
                  "theta %.2f: rank 1 %u vs %.0f", theta, cnt[1], expect1);
    for (int i = 1; i < N; i++) ck_assert_uint_le(cnt[i], cnt[0]);
}

START_TEST(zipf)
{
    zipf_top_share(0.99);
    zipf_top_share(0.7);
    /* theta 0: uniform, 200 draws per item on average */
    enum { N = 1000, DRAWS = 200000 };
    struct ycsb_zipf z;
    ycsb_zipf_init(&z, N, 0.0);
    static uint32_t cnt[N];
    memset(cnt, 0, sizeof cnt);
    uint64_t rng = seed();
    for (int i = 0; i < DRAWS; i++) cnt[ycsb_zipf_next(&z, &rng)]++;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (int i = 0; i < N; i++) {
        lo = cnt[i] < lo ? cnt[i] : lo;
        hi = cnt[i] > hi ? cnt[i] : hi;
    }
    fprintf(stderr, "zipf theta 0: counts %u..%u (mean 200)\n", lo, hi);
    ck_assert_uint_gt(lo, 120);
    ck_assert_uint_lt(hi, 290);
    /* tiny n */
    ycsb_zipf_init(&z, 1, 0.99);
    ck_assert_uint_eq(ycsb_zipf_next(&z, &rng), 0);
    ycsb_zipf_init(&z, 2, 0.99);
    for (int i = 0; i < 1000; i++) ck_assert_uint_lt(ycsb_zipf_next(&z, &rng), 2);
}
END_TEST

/* ---- the generator's shape ---------------------------------------------------------------- */

START_TEST(gen_shape)
{
    struct ycsb_config cfg;
    ycsb_config_default(&cfg, 20000, 2);
    cfg.multi_partition = 1.0;
    struct ycsb_gen g;
    ycsb_gen_init(&g, &cfg);
    uint64_t rng = seed();
    for (int n = 0; n < 2000; n++) {
        struct ycsb_call c;
        uint32_t home = (uint32_t)n % 2;
        ycsb_next_call(&g, &rng, home, &c);
        ck_assert(c.multi);
        ck_assert_uint_eq(c.other_part, 1 - home);
        int remote = 0;
        for (int i = 0; i < YCSB_OPS; i++) {
            uint32_t p = ycsb_part_of(c.ops[i].id, cfg.tuples, cfg.nparts);
            ck_assert(p == home || p == c.other_part);
            remote += p != home;
            for (int j = 0; j < i; j++) ck_assert_uint_ne(c.ops[i].id, c.ops[j].id);
        }
        ck_assert_int_eq(remote, YCSB_OPS / 2);
    }
    cfg.multi_partition = 0;
    cfg.scramble = true;
    ycsb_gen_init(&g, &cfg);
    for (int n = 0; n < 2000; n++) {
        struct ycsb_call c;
        ycsb_next_call(&g, &rng, 1, &c);
        ck_assert(!c.multi);
        for (int i = 0; i < YCSB_OPS; i++)
            ck_assert_uint_eq(ycsb_part_of(c.ops[i].id, cfg.tuples, cfg.nparts), 1);
    }
    /* partition ranges cover the ids exactly */
    for (uint32_t np = 1; np <= 7; np++)
        for (uint64_t id = 0; id < 100; id++) {
            uint32_t p = ycsb_part_of(id, 100, np);
            ck_assert_uint_le(ycsb_part_first(p, 100, np), id);
            ck_assert_uint_gt(ycsb_part_first(p + 1, 100, np), id);
        }
}
END_TEST

/* ---- the mix on 3 workers ------------------------------------------------------------------- */

struct tally {
    uint64_t calls, ok, multi, writes;
};

struct run {
    pod_db *db;
    struct ycsb *y;
    struct ycsb_gen gen;
    uint64_t seed, deadline_ns;
    int phase;
    struct tally tl[NWORKERS];
};

static void mix_body(struct pod_worker *w, void *arg)
{
    struct run *r = arg;
    struct tally *t = &r->tl[w->id];
    uint64_t rng = (r->seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1 + 8 * r->phase))) | 1;
    uint32_t home = (uint32_t)w->id % r->gen.cfg.nparts;
    pod_result *res = pod_result_new();
    if (!res) {
        tu_fail("worker %d: out of memory", w->id);
        return;
    }
    struct ycsb_call call;
    for (int i = 0; i < MAX_CALLS_PER_WORKER && !tu_failed(); i++) {
        if ((i & 7) == 0 && pod_mono_ns() > r->deadline_ns) break;
        ycsb_next_call(&r->gen, &rng, home, &call);
        pod_args args = {call.nargs, call.args};
        char msg[256];
        int rc = pod_call(w, r->y->proc_txn, &args, res, msg, sizeof msg);
        t->calls++;
        t->multi += call.multi;
        if (rc < 0) {
            tu_fail("worker %d: ycsb.txn: %s: %s", w->id, pod_status_name(rc), msg);
            break;
        }
        pod_value v;
        if (pod_result_get(res, 0, 0, &v) != 0 || v.type != POD_T_I64 ||
            (uint64_t)v.u.i64 != call.nwrites) {
            tu_fail("worker %d: ycsb.txn returned a wrong write count", w->id);
            break;
        }
        t->ok++;
        t->writes += (uint64_t)v.u.i64;
    }
    pod_result_free(res);
}

START_TEST(mix)
{
    tu_fail_reset();
    char err[256];
    struct ycsb_config cfg;
    ycsb_config_default(&cfg, 20000, 2);
    pod_db *db = tu_db_new(NWORKERS);
    ck_assert_msg(ycsb_register(db, &cfg, err, sizeof err) == 0, "ycsb_register: %s", err);
    struct tu_progress pr = {0};
    uint64_t t0 = pod_mono_ns();
    ck_assert_msg(ycsb_load(db, tu_progress, &pr, err, sizeof err) == 0, "%s", err);
    fprintf(stderr, "ycsb: loaded %" PRIu64 " tuples in %.2f s (%" PRIu64 " progress calls)\n",
            pr.rows, (double)(pod_mono_ns() - t0) / 1e9, pr.calls);
    ck_assert_uint_eq(pr.rows, cfg.tuples);
    uint64_t rows;
    int64_t sum;
    ck_assert_msg(ycsb_count(db, &rows, &sum, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(rows, cfg.tuples);
    ck_assert_int_eq(sum, 0);

    struct phase {
        uint32_t read_pct;
        double theta, mp;
    } phases[] = {
        {50, 0.7, 0.1}, {50, 0.7, 1.0}, {50, 0.99, 0.1}, {50, 0.99, 1.0}, {95, 0.99, 0.1},
    };
    int nphases = (int)(sizeof phases / sizeof phases[0]);
    struct run *r = calloc(1, sizeof *r);
    ck_assert_ptr_nonnull(r);
    r->db = db;
    r->y = ycsb_get(db);
    r->seed = seed();
    int ms = run_ms() / nphases;
    if (ms < 50) ms = 50;
    uint64_t total_writes = 0, total_conflicts = 0;
    struct pod_proc_stats before = {0};
    for (int ph = 0; ph < nphases; ph++) {
        struct ycsb_config c = cfg;
        c.read_pct = phases[ph].read_pct;
        c.theta = phases[ph].theta;
        c.multi_partition = phases[ph].mp;
        ycsb_gen_init(&r->gen, &c);
        memset(r->tl, 0, sizeof r->tl);
        r->phase = ph;
        r->deadline_ns = pod_mono_ns() + (uint64_t)ms * 1000000ull;
        double secs = tu_run_workers(db, mix_body, r, r->seed);
        struct tally tot = {0};
        for (int i = 0; i < NWORKERS; i++) {
            tot.calls += r->tl[i].calls;
            tot.ok += r->tl[i].ok;
            tot.multi += r->tl[i].multi;
            tot.writes += r->tl[i].writes;
        }
        struct pod_proc_stats st;
        pod_db_proc_stats(db, r->y->proc_txn, &st);
        uint64_t commits = st.commits - before.commits, conflicts = st.conflicts - before.conflicts;
        fprintf(stderr, "ycsb %u/%u theta %.2f mp %.1f: %" PRIu64 " commits (%.0f/s), %" PRIu64
                " multi-partition, %" PRIu64 " RMW ops, %" PRIu64 " conflicts\n",
                c.read_pct, 100 - c.read_pct, c.theta, c.multi_partition, commits,
                (double)commits / secs, tot.multi, tot.writes, conflicts);
        ck_assert_uint_gt(commits, 0);
        ck_assert_uint_eq(commits, tot.ok);
        ck_assert_uint_eq(st.errors, 0);
        ck_assert_uint_eq(st.gave_up, 0);
        ck_assert_uint_eq(st.user_aborts, 0);
        if (c.multi_partition == 1.0) ck_assert_uint_eq(tot.multi, tot.calls);
        if (c.multi_partition == 0.1 && tot.calls >= 1000) {
            ck_assert_uint_gt(tot.multi * 100, tot.calls * 5);
            ck_assert_uint_lt(tot.multi * 100, tot.calls * 15);
        }
        total_writes += tot.writes;
        total_conflicts += conflicts;
        before = st;
    }
    pod_db_print_stats(db, stderr);
    ck_assert_msg(ycsb_count(db, &rows, &sum, err, sizeof err) == 0, "%s", err);
    fprintf(stderr, "ycsb: counter sum %" PRId64 ", committed RMW ops %" PRIu64
            ", conflicts %" PRIu64 "\n", sum, total_writes, total_conflicts);
    ck_assert_uint_eq(rows, cfg.tuples);
    ck_assert_uint_gt(total_writes, 0);
    ck_assert_msg((uint64_t)sum == total_writes, "seed 0x%" PRIx64 ": counters %" PRId64
                  " != committed RMW ops %" PRIu64, r->seed, sum, total_writes);
    free(r);
    ycsb_free(db);
    pod_db_free(db);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ycsb_mt");
    TCase *single = tu_tcase(s, "single", 60);
    tcase_add_test(single, zipf);
    tcase_add_test(single, gen_shape);
    TCase *mt = tu_tcase(s, "threads", 120);
    tcase_add_test(mt, mix);
    return tu_run(s);
}
