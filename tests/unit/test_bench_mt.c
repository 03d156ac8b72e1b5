/* The benchmark driver (src/bench) in one process; also built with
 * ThreadSanitizer (make tsan), which checks the jobs' hand-offs.
 *
 *  - knobs: defaults from the config, key=value text, errors;
 *  - terminals: homes dealt among the host's partitions, and with the remote
 *    knobs at 0 every generated key is in a home partition, with them at 100
 *    the remote accesses go to another host's partition (all three
 *    workloads); results encode and decode losslessly;
 *  - host_*: the server's side without a server. The process is host 1 of a
 *    2-host pod; 3 worker threads loop like the server's (bench work when
 *    there is some), and the test calls the bench.* procedures through the
 *    admin worker as a client would: bench.load loads only the partitions
 *    host 1 owns (and a second load does nothing), bench.run runs the mix for
 *    BENCH_MT_MS ms (default 600), bench.check holds (TPC-C conditions 1-4,
 *    YCSB counters = committed read-modify-writes, SmallBank audit moved by
 *    the committed nets), a second job while one runs is refused, and
 *    bench.result of another job is an error; load_at_start loads when the
 *    host starts. */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/driver.h"
#include "bench/host.h"
#include "bench/knobs.h"
#include "bench/results.h"
#include "engine/db.h"
#include "engine/result.h"
#include "engine/worker.h"
#include "storage/table.h"
#include "util/clock.h"
#include "workloads/common/range.h"
#include "helpers/testutil.h"

#define NWORKERS 3

static int run_ms(void)
{
    const char *env = getenv("BENCH_MT_MS");
    return env && atoi(env) > 0 ? atoi(env) : 600;
}

static const char base_yaml[] =
    "region: {path: /dev/shm/poddb-test-bench-unused, kind: shm, size: 1GiB, hwcc_budget: 64MiB}\n"
    "host_defaults:\n"
    "  workers: 3\n"
    "  socket: /tmp/poddb-test-bench-{host}.sock\n"
    "  log_dir: /tmp/poddb-test-bench-{host}\n"
    "hosts: [{}, {}]\n"
    "workloads:\n"
    "  tpcc: {warehouses: 4, items: 200, customers_per_district: 30}\n"
    "  ycsb: {tuples: 4000, partitions: 4, theta: 0.7}\n"
    "  smallbank: {accounts: 2000, partitions: 4}\n";

/* The pod's config; with load_at_start, SmallBank is loaded when the host starts. */
static struct pod_config *config_with(bool load_at_start)
{
    static struct pod_config c;
    char text[sizeof base_yaml + 64];
    snprintf(text, sizeof text, "%s", base_yaml);
    if (load_at_start) {
        char *at = strstr(text, "partitions: 4}\n") + strlen("partitions: 4");
        snprintf(at, sizeof text - (size_t)(at - text), ", load_at_start: true}\n");
    }
    pod_err err = {{0}};
    ck_assert_msg(pod_config_parse("bench.yaml", text, strlen(text), &c, &err) == 0, "%s", err.msg);
    return &c;
}

static struct pod_config *config(void) { return config_with(false); }

/* ---- knobs ---------------------------------------------------------------------------- */

START_TEST(knobs)
{
    const struct pod_config *c = config();
    struct bench_knobs k;
    char err[256], text[256];
    bench_knobs_from_conf(&k, c, BENCH_TPCC);
    ck_assert_uint_eq(k.remote_new_order_pct, 10);
    ck_assert_uint_eq(k.remote_payment_pct, 15);
    ck_assert_int_eq(bench_knobs_apply(&k, "remote_new_order_pct=60,remote_payment_pct=90", 46,
                                       err, sizeof err), 0);
    bench_knobs_format(&k, text, sizeof text);
    ck_assert_str_eq(text, "remote_new_order_pct=60,remote_payment_pct=90");
    ck_assert_int_eq(bench_knobs_set(&k, "read_pct", "5", err, sizeof err), -1);
    ck_assert_str_eq(err, "tpcc has no knob 'read_pct' (its knobs: remote_new_order_pct, "
                          "remote_payment_pct)");
    ck_assert_int_eq(bench_knobs_set(&k, "remote_payment_pct", "101", err, sizeof err), -1);
    ck_assert_str_eq(err, "tpcc knob remote_payment_pct: '101' is not an integer in 0..100 "
                          "(percent)");
    ck_assert_int_eq(bench_knobs_apply(&k, "remote_payment_pct", 18, err, sizeof err), -1);
    ck_assert_str_eq(err, "knob setting 'remote_payment_pct' is not KEY=VALUE");

    bench_knobs_from_conf(&k, c, BENCH_YCSB);
    ck_assert(k.theta == 0.7 && k.read_pct == 50 && k.multi_partition_pct == 10 && !k.scramble);
    ck_assert_int_eq(bench_knobs_set(&k, "theta", "0.99", err, sizeof err), 0);
    ck_assert_int_eq(bench_knobs_set(&k, "theta", "1", err, sizeof err), -1);
    ck_assert_int_eq(bench_knobs_set(&k, "theta", "-0.1", err, sizeof err), -1);
    ck_assert_int_eq(bench_knobs_set(&k, "scramble", "true", err, sizeof err), 0);
    bench_knobs_format(&k, text, sizeof text);
    ck_assert_str_eq(text, "read_pct=50,theta=0.99,multi_partition_pct=10,scramble=true");
    /* What format writes, apply reads back. */
    struct bench_knobs k2;
    bench_knobs_from_conf(&k2, c, BENCH_YCSB);
    ck_assert_int_eq(bench_knobs_apply(&k2, text, strlen(text), err, sizeof err), 0);
    ck_assert(k2.theta == k.theta && k2.scramble && k2.read_pct == 50);

    bench_knobs_from_conf(&k, c, BENCH_SMALLBANK);
    ck_assert_uint_eq(k.hot_accounts, 80);
    ck_assert_int_eq(bench_knobs_set(&k, "hot_accounts", "0", err, sizeof err), -1);
    ck_assert_int_eq(bench_wl_parse("smallbank", 9), BENCH_SMALLBANK);
    ck_assert_int_eq(bench_wl_parse("kv", 2), -1);
}
END_TEST

/* ---- terminals -------------------------------------------------------------------------- */

static uint32_t ycsb_part(const struct bench_workload *w, uint64_t id)
{
    return wl_part_of(id, w->ycsb.cfg.tuples, w->nparts);
}

START_TEST(terminals)
{
    const struct pod_config *c = config();
    char err[256];
    struct bench_knobs k;
    struct bench_workload w;
    struct bench_terminal t;
    struct bench_call call;
    /* TPC-C, 4 warehouses on 2 hosts: host 1 owns partitions 1 and 3 (w 2, 4). */
    bench_knobs_from_conf(&k, c, BENCH_TPCC);
    k.remote_new_order_pct = k.remote_payment_pct = 0;
    ck_assert_int_eq(bench_workload_init(&w, c, &k, err, sizeof err), 0);
    ck_assert_uint_eq(bench_owned_count(&w, 1), 2);
    ck_assert_int_eq(bench_terminal_init(&t, &w, 1, 0, 1, 1, 42), 0);
    ck_assert_uint_eq(t.nhomes, 2);
    ck_assert_uint_eq(t.home_first, 1);
    ck_assert_uint_eq(t.home_step, 2);
    ck_assert_int_eq(bench_terminal_init(&t, &w, 1, 1, 2, 1, 42), 0);
    ck_assert(t.nhomes == 1 && t.home_first == 3);
    ck_assert_int_eq(bench_terminal_init(&t, &w, 1, 2, 3, 1, 42), 0); /* 3 terminals, 2 homes */
    ck_assert(t.nhomes == 1 && t.home_first == 1);
    ck_assert_int_eq(bench_terminal_init(&t, &w, 1, 0, 1, 1, 42), 0);
    int seen[TPCC_NTXNS] = {0};
    for (int i = 0; i < 5000; i++) {
        bench_next(&t, &call);
        seen[call.type]++;
        int64_t wh = call.args[0].u.i64;
        ck_assert_msg(wh == 2 || wh == 4, "home warehouse %" PRId64, wh);
        ck_assert(!call.remote);
        if (call.type == TPCC_NEW_ORDER_TXN)
            for (int l = 0; l < call.args[3].u.i64; l++)
                ck_assert_int_eq(call.u.tpcc.lines[3 * l + 1], wh);
        if (call.type == TPCC_PAYMENT) ck_assert_int_eq(call.args[2].u.i64, wh);
    }
    for (int ty = 0; ty < TPCC_NTXNS; ty++) ck_assert_int_gt(seen[ty], 0);
    /* Remote 100/100: the other warehouse is on the other host (1 or 3), both occur. */
    k.remote_new_order_pct = k.remote_payment_pct = 100;
    ck_assert_int_eq(bench_workload_init(&w, c, &k, err, sizeof err), 0);
    ck_assert_int_eq(bench_terminal_init(&t, &w, 1, 0, 1, 1, 42), 0);
    int remote_wh[5] = {0};
    for (int i = 0; i < 2000; i++) {
        bench_next(&t, &call);
        if (call.type == TPCC_PAYMENT) {
            ck_assert(call.remote);
            remote_wh[call.args[2].u.i64]++;
        }
        if (call.type == TPCC_NEW_ORDER_TXN) {
            ck_assert(call.remote);
            int remote_lines = 0;
            for (int l = 0; l < call.args[3].u.i64; l++) {
                uint32_t sw = call.u.tpcc.lines[3 * l + 1];
                if (sw == (uint32_t)call.args[0].u.i64) continue;
                remote_lines++;
                remote_wh[sw]++;
            }
            ck_assert_int_eq(remote_lines, 1);
        }
    }
    ck_assert_msg(remote_wh[1] > 0 && remote_wh[3] > 0 && !remote_wh[2] && !remote_wh[4],
                  "remote warehouses %d %d %d %d", remote_wh[1], remote_wh[2], remote_wh[3],
                  remote_wh[4]);
    k.remote_new_order_pct = k.remote_payment_pct = 0;
    /* A host without partitions has no terminals. */
    struct pod_config c3 = *c;
    c3.nhosts = 5;
    ck_assert_int_eq(bench_workload_init(&w, &c3, &k, err, sizeof err), 0);
    ck_assert_int_eq(bench_terminal_init(&t, &w, 4, 0, 1, 1, 42), -1);

    /* YCSB: every operation in the home partition; multi-partition: half in one other. */
    bench_knobs_from_conf(&k, c, BENCH_YCSB);
    k.multi_partition_pct = 0;
    ck_assert_int_eq(bench_workload_init(&w, c, &k, err, sizeof err), 0);
    ck_assert_int_eq(bench_terminal_init(&t, &w, 0, 0, 1, 1, 7), 0);
    for (int i = 0; i < 2000; i++) {
        bench_next(&t, &call);
        uint32_t home = ycsb_part(&w, call.u.ycsb.ops[0].id);
        ck_assert(home == 0 || home == 2);
        for (int o = 0; o < YCSB_OPS; o++) ck_assert_uint_eq(ycsb_part(&w, call.u.ycsb.ops[o].id), home);
    }
    k.multi_partition_pct = 100;
    ck_assert_int_eq(bench_workload_init(&w, c, &k, err, sizeof err), 0);
    ck_assert_int_eq(bench_terminal_init(&t, &w, 0, 0, 1, 1, 7), 0);
    int other_seen[4] = {0};
    for (int i = 0; i < 200; i++) {
        bench_next(&t, &call);
        ck_assert(call.remote);
        /* the other partition is on the other host (1 or 3), not host 0's 0 or 2 */
        ck_assert_uint_eq(call.u.ycsb.other_part % 2, 1);
        other_seen[call.u.ycsb.other_part]++;
        int other = 0;
        for (int o = 0; o < YCSB_OPS; o++)
            other += ycsb_part(&w, call.u.ycsb.ops[o].id) == call.u.ycsb.other_part;
        ck_assert_int_eq(other, YCSB_OPS / 2);
    }
    ck_assert(other_seen[1] > 0 && other_seen[3] > 0);

    /* SmallBank: both accounts at home; with remote 100 the second elsewhere. */
    bench_knobs_from_conf(&k, c, BENCH_SMALLBANK);
    ck_assert_int_eq(bench_workload_init(&w, c, &k, err, sizeof err), 0);
    ck_assert_int_eq(bench_terminal_init(&t, &w, 1, 0, 1, 1, 9), 0);
    for (int i = 0; i < 5000; i++) {
        bench_next(&t, &call);
        uint32_t p0 = wl_part_of((uint64_t)call.args[0].u.i64, 2000, 4);
        ck_assert(p0 == 1 || p0 == 3);
        if (call.type == SB_AMALGAMATE || call.type == SB_SEND_PAYMENT) {
            ck_assert_uint_eq(wl_part_of((uint64_t)call.args[1].u.i64, 2000, 4), p0);
            ck_assert_int_ne(call.args[0].u.i64, call.args[1].u.i64);
        }
    }
    k.remote_pct = 100;
    k.theta = 0.9;
    ck_assert_int_eq(bench_workload_init(&w, c, &k, err, sizeof err), 0);
    ck_assert_int_eq(bench_terminal_init(&t, &w, 1, 0, 1, 1, 9), 0);
    for (int i = 0; i < 2000; i++) {
        bench_next(&t, &call);
        if (call.type != SB_AMALGAMATE && call.type != SB_SEND_PAYMENT) continue;
        ck_assert(call.remote);
        /* host 1's partitions are 1 and 3: the second account is on host 0's 0 or 2 */
        ck_assert_uint_eq(wl_part_of((uint64_t)call.args[1].u.i64, 2000, 4) % 2, 0);
    }
    k.hot_accounts = 2001;
    ck_assert_int_eq(bench_workload_init(&w, c, &k, err, sizeof err), -1);
}
END_TEST

START_TEST(results_round_trip)
{
    struct bench_run_result r, back;
    bench_run_result_init(&r);
    r.wl = BENCH_SMALLBANK;
    r.host = 1;
    r.workers = 3;
    r.terminals = 2;
    r.measured_s = 1.5;
    r.measured.commits[5] = 77;
    r.measured.errors[0] = 3;
    r.all.net = -1234567;
    r.all.rmw_ops = 99;
    r.conflicts[POD_CAUSE_UPGRADE] = 5;
    r.gave_up = 1;
    for (uint64_t ns = 1000; ns < 100000000; ns = ns * 3 / 2) hist_add(&r.lat, ns);
    r.nsec = 2;
    r.per_sec = calloc(2, sizeof *r.per_sec);
    r.per_sec[1] = 41;
    snprintf(r.knobs, sizeof r.knobs, "hot_pct=90");
    snprintf(r.first_error, sizeof r.first_error, "an error");
    pod_result *res = pod_result_new();
    ck_assert_int_eq(bench_run_result_encode(&r, res), 0);
    struct bench_rows rows = bench_rows_of_result(res);
    char err[200];
    ck_assert_int_eq(bench_run_result_decode(&rows, &back, err, sizeof err), 0);
    ck_assert(back.wl == BENCH_SMALLBANK && back.host == 1 && back.workers == 3 &&
              back.terminals == 2 && back.measured_s == 1.5);
    ck_assert(memcmp(&back.measured, &r.measured, sizeof r.measured) == 0);
    ck_assert(memcmp(&back.all, &r.all, sizeof r.all) == 0);
    ck_assert(memcmp(&back.lat, &r.lat, sizeof r.lat) == 0);
    ck_assert(back.conflicts[POD_CAUSE_UPGRADE] == 5 && back.gave_up == 1);
    ck_assert(back.nsec == 2 && back.per_sec[1] == 41);
    ck_assert_str_eq(back.knobs, "hot_pct=90");
    ck_assert_str_eq(back.first_error, "an error");
    /* merging two hosts adds up */
    ck_assert_int_eq(bench_run_result_merge(&back, &r), 0);
    ck_assert(back.measured.commits[5] == 154 && back.per_sec[1] == 82 && back.lat.n == 2 * r.lat.n);
    bench_run_result_free(&back);
    bench_run_result_free(&r);

    struct bench_check_result ck = {.wl = BENCH_TPCC, .host = 1, .units = 2, .failures = 1,
                                    .sum = -5}, ck2;
    snprintf(ck.report, sizeof ck.report, "condition 1 fails: warehouse 2 district 7\n");
    pod_result_clear(res);
    ck_assert_int_eq(bench_check_result_encode(&ck, res), 0);
    ck_assert_int_eq(bench_check_result_decode(&rows, &ck2, err, sizeof err), 0);
    ck_assert(memcmp(&ck, &ck2, sizeof ck) == 0);

    /* something else is refused */
    pod_result_clear(res);
    pod_result_str(res, "pong");
    ck_assert_int_eq(bench_run_result_decode(&rows, &back, err, sizeof err), -1);
    ck_assert_int_eq(bench_check_result_decode(&rows, &ck2, err, sizeof err), -1);
    pod_result_free(res);
}
END_TEST

/* ---- the server's side, without a server ----------------------------------------------- */

struct loop {
    struct pod_bench *b;
    int stop;
};

static bool yield_when_stopping(void *arg)
{
    return __atomic_load_n(&((struct loop *)arg)->stop, __ATOMIC_ACQUIRE);
}

/* Like the server's worker_body, with a short sleep for its queue wait. */
static void worker_loop(struct pod_worker *w, void *arg)
{
    struct loop *l = arg;
    while (!__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE)) {
        if (pod_bench_has_work(l->b, w->id)) {
            pod_bench_work(l->b, w, yield_when_stopping, l);
        } else {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
}

struct host {
    pod_db *db;
    struct loop loop;
    pod_result *res;
    char msg[512];
};

static void host_start_with(struct host *h, int host_id, const struct pod_config *c)
{
    struct pod_db_options o = {.nworkers = NWORKERS, .host_id = host_id, .nhosts = c->nhosts,
                               .phantom_protection = true};
    char err[256];
    ck_assert_msg((h->db = pod_db_new(&o, err, sizeof err)) != NULL, "%s", err);
    ck_assert_msg((h->loop.b = pod_bench_new(h->db, c, host_id, err, sizeof err)) != NULL, "%s", err);
    h->loop.stop = 0;
    h->res = pod_result_new();
    ck_assert_int_eq(pod_workers_start(h->db, NULL, 0, worker_loop, &h->loop, err, sizeof err), 0);
}

static void host_start(struct host *h, int host_id) { host_start_with(h, host_id, config()); }

static void host_stop(struct host *h)
{
    __atomic_store_n(&h->loop.stop, 1, __ATOMIC_RELEASE);
    pod_workers_join(h->db);
    pod_bench_free(h->loop.b);
    pod_db_free(h->db);
    pod_result_free(h->res);
}

/* A bench.* call through the admin worker, as a client's call would be. */
static int call(struct host *h, const char *proc, const pod_value *args, int n)
{
    int p = pod_proc_find(h->db, proc);
    ck_assert_int_ge(p, 0);
    pod_args a = {n, args};
    struct pod_worker *adm = pod_admin_begin(h->db);
    int rc = pod_call(adm, p, &a, h->res, h->msg, sizeof h->msg);
    pod_admin_end(h->db);
    return rc;
}

static struct bench_status status(struct host *h)
{
    struct bench_status s;
    char err[128];
    ck_assert_int_eq(call(h, "bench.status", NULL, 0), POD_OK);
    struct bench_rows rows = bench_rows_of_result(h->res);
    ck_assert_int_eq(bench_status_decode(&rows, &s, err, sizeof err), 0);
    return s;
}

static struct bench_status wait_job(struct host *h)
{
    uint64_t end = pod_mono_ns() + 120000000000ull;
    for (;;) {
        struct bench_status s = status(h);
        if (strcmp(s.state, "running")) return s;
        ck_assert_msg(pod_mono_ns() < end, "job %s did not finish", s.job);
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
}

static uint64_t keys_in(pod_db *db, const char *table, uint32_t p)
{
    const pod_table *t = pod_table_find(db, table);
    bt_stats st;
    ck_assert(t && bt_get_stats(&t->parts[p].tree, &st) == BT_OK);
    return st.keys;
}

static void load(struct host *h, enum bench_wl wl)
{
    pod_value a[1] = {pod_v_str(bench_wl_name(wl))};
    ck_assert_msg(call(h, "bench.load", a, 1) == POD_OK, "%s", h->msg);
    struct bench_status s = wait_job(h);
    ck_assert_str_eq(s.state, "done");
    ck_assert_str_eq(s.wl[wl].state, "loaded");
    ck_assert_uint_eq(s.wl[wl].rows, s.wl[wl].total);
    ck_assert_uint_gt(s.wl[wl].rows, 0);
    /* a second load says so and does nothing */
    ck_assert_int_eq(call(h, "bench.load", a, 1), POD_OK);
    pod_value v;
    ck_assert_int_eq(pod_result_get(h->res, 0, 0, &v), 0);
    ck_assert(v.len == 6 && !memcmp(v.u.bytes, "loaded", 6));
}

static void run(struct host *h, enum bench_wl wl, const char *knobs, struct bench_run_result *r)
{
    pod_value a[5] = {pod_v_str(bench_wl_name(wl)), pod_v_i64(run_ms()), pod_v_i64(100),
                      pod_v_i64(3), pod_v_str(knobs)};
    ck_assert_msg(call(h, "bench.run", a, 5) == POD_OK, "%s", h->msg);
    pod_value id;
    ck_assert_int_eq(pod_result_get(h->res, 0, 1, &id), 0);
    /* one job at a time */
    pod_value cw[1] = {pod_v_str(bench_wl_name(wl))};
    ck_assert_int_eq(call(h, "bench.check", cw, 1), POD_E_INVALID);
    ck_assert_msg(strstr(h->msg, "busy with a run job"), "%s", h->msg);
    struct bench_status s = wait_job(h);
    ck_assert_str_eq(s.state, "done");
    pod_value other = pod_v_i64(id.u.i64 + 1);
    ck_assert_int_eq(call(h, "bench.result", &other, 1), POD_E_INVALID);
    ck_assert_msg(call(h, "bench.result", &id, 1) == POD_OK, "%s", h->msg);
    struct bench_rows rows = bench_rows_of_result(h->res);
    char err[200];
    ck_assert_int_eq(bench_run_result_decode(&rows, r, err, sizeof err), 0);
    fprintf(stderr, "%s on host 1: %" PRIu64 " commits, %" PRIu64 " user aborts, %" PRIu64
            " errors (%s)\n", bench_wl_name(wl), bench_tally_sum(r->measured.commits),
            bench_tally_sum(r->measured.user_aborts), bench_tally_sum(r->all.errors),
            r->first_error);
    ck_assert_int_eq(r->workers, NWORKERS);
    ck_assert_int_eq(r->terminals, NWORKERS);
    ck_assert_uint_gt(bench_tally_sum(r->measured.commits), 0);
    ck_assert_uint_eq(bench_tally_sum(r->all.errors), 0);
    ck_assert_uint_eq(r->measured.remote_calls, 0);
    uint64_t ps = 0;
    for (uint32_t i = 0; i < r->nsec; i++) ps += r->per_sec[i];
    ck_assert_uint_eq(ps, bench_tally_sum(r->measured.commits));
    ck_assert_uint_eq(r->lat.n, bench_tally_sum(r->measured.calls));
}

static struct bench_check_result check(struct host *h, enum bench_wl wl)
{
    pod_value a[1] = {pod_v_str(bench_wl_name(wl))};
    ck_assert_msg(call(h, "bench.check", a, 1) == POD_OK, "%s", h->msg);
    pod_value id;
    ck_assert_int_eq(pod_result_get(h->res, 0, 1, &id), 0);
    ck_assert_str_eq(wait_job(h).state, "done");
    ck_assert_msg(call(h, "bench.result", &id, 1) == POD_OK, "%s", h->msg);
    struct bench_check_result c;
    struct bench_rows rows = bench_rows_of_result(h->res);
    char err[200];
    ck_assert_int_eq(bench_check_result_decode(&rows, &c, err, sizeof err), 0);
    ck_assert_msg(c.failures == 0, "%s", c.report);
    ck_assert_uint_eq(c.units, 2); /* partitions 1 and 3 */
    return c;
}

START_TEST(host_tpcc)
{
    struct host h;
    host_start(&h, 1);
    /* not loaded yet: runs and checks are refused */
    pod_value a[5] = {pod_v_str("tpcc"), pod_v_i64(500), pod_v_i64(0), pod_v_i64(1), pod_v_str("")};
    ck_assert_int_eq(call(&h, "bench.run", a, 5), POD_E_INVALID);
    ck_assert_msg(strstr(h.msg, "tpcc is empty on host 1 (call bench.load first)"), "%s", h.msg);
    load(&h, BENCH_TPCC);
    ck_assert_uint_eq(keys_in(h.db, "stock", 0), 0);
    ck_assert_uint_eq(keys_in(h.db, "stock", 1), 200);
    ck_assert_uint_eq(keys_in(h.db, "stock", 2), 0);
    ck_assert_uint_eq(keys_in(h.db, "stock", 3), 200);
    check(&h, BENCH_TPCC);
    struct bench_run_result r;
    run(&h, BENCH_TPCC, "remote_new_order_pct=0,remote_payment_pct=0", &r);
    for (int ty = 0; ty < TPCC_NTXNS; ty++) ck_assert_uint_gt(r.all.commits[ty], 0);
    ck_assert_uint_eq(r.all.user_aborts[TPCC_NEW_ORDER_TXN], r.all.rollbacks);
    ck_assert_str_eq(r.knobs, "remote_new_order_pct=0,remote_payment_pct=0");
    bench_run_result_free(&r);
    check(&h, BENCH_TPCC);
    /* bad arguments */
    a[1] = pod_v_i64(50);
    ck_assert_int_eq(call(&h, "bench.run", a, 5), POD_E_INVALID);
    a[1] = pod_v_i64(500);
    a[4] = pod_v_str("read_pct=5");
    ck_assert_int_eq(call(&h, "bench.run", a, 5), POD_E_INVALID);
    ck_assert_msg(strstr(h.msg, "tpcc has no knob 'read_pct'"), "%s", h.msg);
    pod_value bad[1] = {pod_v_str("tpc-c")};
    ck_assert_int_eq(call(&h, "bench.load", bad, 1), POD_E_INVALID);
    host_stop(&h);
}
END_TEST

START_TEST(host_ycsb)
{
    struct host h;
    host_start(&h, 1);
    load(&h, BENCH_YCSB);
    ck_assert_uint_eq(keys_in(h.db, "usertable", 0), 0);
    ck_assert_uint_eq(keys_in(h.db, "usertable", 1), 1000);
    struct bench_check_result before = check(&h, BENCH_YCSB);
    ck_assert_uint_eq(before.rows, 2000);
    ck_assert_uint_eq(before.expected_rows, 2000);
    ck_assert_int_eq(before.sum, 0);
    struct bench_run_result r;
    run(&h, BENCH_YCSB, "multi_partition_pct=0,read_pct=50", &r);
    ck_assert_uint_gt(r.all.rmw_ops, 0);
    struct bench_check_result after = check(&h, BENCH_YCSB);
    ck_assert_int_eq(after.sum, (int64_t)r.all.rmw_ops);
    bench_run_result_free(&r);
    host_stop(&h);
}
END_TEST

START_TEST(host_smallbank)
{
    struct host h;
    host_start(&h, 1);
    load(&h, BENCH_SMALLBANK);
    ck_assert_uint_eq(keys_in(h.db, "checking", 2), 0);
    ck_assert_uint_eq(keys_in(h.db, "checking", 3), 500);
    struct bench_check_result before = check(&h, BENCH_SMALLBANK);
    ck_assert_uint_eq(before.rows, 2000);
    struct bench_run_result r;
    run(&h, BENCH_SMALLBANK, "remote_pct=0", &r);
    struct bench_check_result after = check(&h, BENCH_SMALLBANK);
    ck_assert_int_eq(after.sum - before.sum, r.all.net);
    for (int ty = 0; ty < SB_NTXNS; ty++) ck_assert_uint_gt(r.all.commits[ty], 0);
    bench_run_result_free(&r);
    host_stop(&h);
}
END_TEST

/* load_at_start: the server loads right after its workers start. */
START_TEST(host_autoload)
{
    struct host h;
    host_start_with(&h, 1, config_with(true));
    pod_bench_autoload(h.loop.b);
    struct bench_status s = wait_job(&h);
    ck_assert_str_eq(s.job, "load");
    ck_assert_str_eq(s.state, "done");
    ck_assert_str_eq(s.wl[BENCH_SMALLBANK].state, "loaded");
    ck_assert_str_eq(s.wl[BENCH_TPCC].state, "empty");
    ck_assert_uint_eq(keys_in(h.db, "accounts", 1), 500);
    check(&h, BENCH_SMALLBANK);
    host_stop(&h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bench");
    TCase *unit = tu_tcase(s, "unit", 60);
    tcase_add_test(unit, knobs);
    tcase_add_test(unit, terminals);
    tcase_add_test(unit, results_round_trip);
    TCase *host = tu_tcase(s, "host", 300);
    tcase_add_test(host, host_tpcc);
    tcase_add_test(host, host_ycsb);
    tcase_add_test(host, host_smallbank);
    tcase_add_test(host, host_autoload);
    return tu_run(s);
}
