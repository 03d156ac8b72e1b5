/* The crash test of the durability issue: a 2-host pod of real poddb-server
 * processes runs a bank workload (tests/modules/bank.c) through the client
 * library, both servers are killed with SIGKILL at a random moment, restarted,
 * and the recovered state is checked:
 *   - every transfer whose reply said ok (acknowledged) is present;
 *   - nothing is half-applied: every account's balance is exactly its initial
 *     balance plus the transfers present (acknowledged or not), and every
 *     account is in exactly one of accounts/parking;
 *   - the total is unchanged.
 * This repeats for several rounds (different kill points, state carried over),
 * with small checkpoints so that recovery also starts from checkpoints and
 * removes old segments. Finally the pod stops cleanly and poddb-logdump
 * --verify finds no damage (torn tails are allowed, corrupt ones are not).
 *
 * Each host's client moves money between its own host's accounts. With
 * PODDB_CRASH_CROSS=1 transfers also go to the other host's accounts: that
 * needs cross-host transactions (the pod layer) and pod-mode recovery. */
#include <check.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/server_harness.h"
#include "poddb/client.h"
#include "util/clock.h"

#define NHOSTS 2
#define NACCOUNTS 32 /* per host */
#define INITIAL 1000
#define DEPTH 8
#define ROUNDS 6

struct pod {
    char dir[SH_PATH - 64];
    char conf[SH_PATH];
    char region[SH_PATH];
    char sock[NHOSTS][SH_PATH];
    char log[NHOSTS][SH_PATH];
    char logdir[NHOSTS][SH_PATH];
    pid_t pid[NHOSTS];
};

/* PODDB_CRASH_CROSS=1: transfers go to accounts of any host (cross-host
 * transactions through the pod layer), not only the client's own host's. */
static bool g_cross;

struct client {
    pthread_t th;
    const struct pod *p;
    int host, round;
    uint64_t rng;
    uint64_t *acked; /* txids whose reply was ok */
    size_t nacked, cap;
    uint64_t sent, replies, user_aborts, other_errors;
    char err[256];
};

static void write_conf(struct pod *p)
{
    char mod[PATH_MAX];
    ck_assert_msg(realpath("build/test/modules/bank.so", mod) != NULL,
                  "build/test/modules/bank.so is not built (make test builds it)");
    snprintf(p->dir, sizeof p->dir, "%s/crash-%d", sh_root, (int)getpid());
    ck_assert_int_eq(mkdir(p->dir, 0700), 0);
    snprintf(p->conf, sizeof p->conf, "%s/pod.yaml", p->dir);
    snprintf(p->region, sizeof p->region, "/dev/shm/poddb-srvtest-%d-crash", (int)sh_main_pid);
    char dir[sizeof p->dir];
    memcpy(dir, p->dir, sizeof dir);
    for (int h = 0; h < NHOSTS; h++) {
        snprintf(p->sock[h], sizeof p->sock[h], "%s/pod-%d.sock", dir, h);
        snprintf(p->log[h], sizeof p->log[h], "%s/server-%d.log", dir, h);
        snprintf(p->logdir[h], sizeof p->logdir[h], "%s/log-%d", dir, h);
    }
    FILE *f = fopen(p->conf, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "region:\n  path: %s\n  kind: shm\n  size: 768MiB\n  hwcc_budget: 16MiB\n"
            "host_defaults:\n  workers: 1\n  loggers: 1\n  socket: %s/pod-{host}.sock\n"
            "  log_dir: %s/log-{host}\n"
            "hosts:\n  - {}\n  - {}\n"
            "modules:\n  - %s\n"
            "engine:\n  epoch_ms: 5\n  checkpoint_after: 64KiB\n",
            p->region, p->dir, p->dir, mod);
    ck_assert_int_eq(fclose(f), 0);
}

static void start_pod(struct pod *p)
{
    for (int h = 0; h < NHOSTS; h++) {
        p->pid[h] = sh_spawn_host(p->conf, h, p->log[h]);
        ck_assert_int_gt(p->pid[h], 0);
    }
    for (int h = 0; h < NHOSTS; h++) {
        uint64_t end = sh_now_ms() + 60000;
        bool up = false;
        while (!up && sh_now_ms() < end) {
            int st;
            if (waitpid(p->pid[h], &st, WNOHANG) == p->pid[h]) {
                sh_forget(p->pid[h]);
                char *t = sh_slurp(p->log[h]);
                ck_abort_msg("host %d exited at start (status %d):\n%s", h, st, t);
            }
            up = access(p->sock[h], F_OK) == 0 && sh_ping(p->sock[h], 5000);
            if (!up) sh_sleep_ms(20);
        }
        if (!up) {
            char *t = sh_slurp(p->log[h]);
            ck_abort_msg("host %d did not come up:\n%s", h, t);
        }
    }
}

static pod_client *connect_to(const char *sock)
{
    char err[256];
    pod_client *c = pod_client_connect(sock, err, sizeof err);
    ck_assert_msg(c != NULL, "connect %s: %s", sock, err);
    pod_client_set_timeout(c, 30000);
    return c;
}

static int64_t acct_id(int host, uint64_t i) { return host + NHOSTS * (int64_t)i; }

/* ---- the workload ---------------------------------------------------------------- */

static void *client_main(void *arg)
{
    struct client *cl = arg;
    char err[256];
    pod_client *c = pod_client_connect(cl->p->sock[cl->host], err, sizeof err);
    if (!c) {
        snprintf(cl->err, sizeof cl->err, "connect: %.200s", err);
        return NULL;
    }
    pod_client_set_timeout(c, 10000);
    uint64_t txid_of[2 * DEPTH * 4] = {0};
    const size_t ring = sizeof txid_of / sizeof txid_of[0];
    uint64_t seq = 0;
    for (;;) {
        /* Keep DEPTH calls in flight. */
        while (pod_client_pending(c) < DEPTH) {
            uint64_t r = pod_rand(&cl->rng);
            if (r % 100 < 92) {
                int64_t from = acct_id(cl->host, pod_rand(&cl->rng) % NACCOUNTS);
                int to_host = g_cross ? (int)(pod_rand(&cl->rng) % NHOSTS) : cl->host;
                int64_t to = acct_id(to_host, (uint64_t)(from / NHOSTS + 1 +
                                                         pod_rand(&cl->rng) % (NACCOUNTS - 1)) %
                                                  NACCOUNTS);
                int64_t txid = (int64_t)((((uint64_t)cl->round << 28 | seq++) << 1) | (uint64_t)cl->host);
                pod_value a[4] = {pod_v_i64(from), pod_v_i64(to),
                                  pod_v_i64(1 + (int64_t)(pod_rand(&cl->rng) % 50)),
                                  pod_v_i64(txid)};
                uint64_t id = pod_client_send(c, "bank.transfer", a, 4, 0);
                if (!id) goto out;
                txid_of[id % ring] = (uint64_t)txid;
            } else {
                /* park then unpark right away: a delete and a re-insert of the
                 * same key, usually in one epoch */
                pod_value a[1] = {pod_v_i64(acct_id(cl->host, pod_rand(&cl->rng) % NACCOUNTS))};
                uint64_t id = pod_client_send(c, "bank.park", a, 1, 0);
                if (!id) goto out;
                txid_of[id % ring] = 0;
                if (!(id = pod_client_send(c, "bank.unpark", a, 1, 0))) goto out;
                txid_of[id % ring] = 0;
            }
            cl->sent++;
        }
        if (pod_client_flush(c) != 0) break;
        pod_reply *rp = pod_client_recv(c);
        if (!rp) break; /* the server is gone */
        cl->replies++;
        uint64_t txid = txid_of[pod_reply_id(rp) % ring];
        int st = pod_reply_status(rp);
        if (st == POD_OK && txid) {
            if (cl->nacked == cl->cap) {
                cl->cap = cl->cap ? 2 * cl->cap : 1024;
                cl->acked = realloc(cl->acked, cl->cap * sizeof *cl->acked);
            }
            cl->acked[cl->nacked++] = txid;
        } else if (st == POD_USER_ABORT) {
            cl->user_aborts++;
        } else if (st != POD_OK) {
            cl->other_errors++;
            snprintf(cl->err, sizeof cl->err, "status %d: %.200s", st, pod_reply_message(rp));
        }
        pod_reply_free(rp);
    }
out:
    pod_client_close(c);
    return NULL;
}

/* ---- checking a recovered pod ------------------------------------------------------ */

struct xfer {
    int64_t txid, from, to, amount;
};

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

struct state {
    int64_t balance[NHOSTS][NACCOUNTS];
    int seen[NHOSTS][NACCOUNTS];
    struct xfer *xs;
    size_t nx, cap;
};

/* Add host h's partitions (bank.dump) to st. */
static void dump_host(const struct pod *p, int h, struct state *st)
{
    pod_client *c = connect_to(p->sock[h]);
    pod_value a[1] = {pod_v_i64(h)};
    pod_reply *r = pod_client_call(c, "bank.dump", a, 1);
    ck_assert_msg(r && pod_reply_status(r) == POD_OK, "bank.dump on host %d: %s", h,
                  r ? pod_reply_message(r) : pod_client_error(c));
    for (int i = 0; i < pod_reply_nrows(r); i++) {
        const pod_value *tag = pod_reply_value(r, i, 0);
        if (!tag) continue;
        int64_t id = pod_reply_value(r, i, 1)->u.i64;
        if (*(const char *)tag->u.bytes == 'T') {
            if (st->nx == st->cap) {
                st->cap = st->cap ? 2 * st->cap : 4096;
                st->xs = realloc(st->xs, st->cap * sizeof *st->xs);
            }
            st->xs[st->nx++] = (struct xfer){id, pod_reply_value(r, i, 2)->u.i64,
                                             pod_reply_value(r, i, 3)->u.i64,
                                             pod_reply_value(r, i, 4)->u.i64};
            continue;
        }
        ck_assert_msg(id >= 0 && id % NHOSTS == h && id / NHOSTS < NACCOUNTS,
                      "host %d: unexpected account %" PRId64, h, id);
        st->seen[h][id / NHOSTS]++;
        st->balance[h][id / NHOSTS] = pod_reply_value(r, i, 2)->u.i64;
    }
    pod_reply_free(r);
    pod_client_close(c);
}

/* Check the recovered pod: every account once, balances = initial + the
 * transfers present, the total, and every acknowledged transfer present.
 * Returns the transfers present; *unacked: those present without an ack. */
static size_t verify_pod(const struct pod *p, uint64_t *const acked[], const size_t nacked[],
                         size_t *unacked)
{
    struct state st;
    memset(&st, 0, sizeof st);
    for (int h = 0; h < NHOSTS; h++) dump_host(p, h, &st);
    int64_t want[NHOSTS][NACCOUNTS], total = 0;
    for (int h = 0; h < NHOSTS; h++)
        for (int k = 0; k < NACCOUNTS; k++) {
            ck_assert_msg(st.seen[h][k] == 1, "account %" PRId64 " appears %d times (accounts + "
                          "parking): a park/unpark was half-applied", acct_id(h, (uint64_t)k),
                          st.seen[h][k]);
            want[h][k] = INITIAL;
        }
    for (size_t i = 0; i < st.nx; i++) {
        want[st.xs[i].from % NHOSTS][st.xs[i].from / NHOSTS] -= st.xs[i].amount;
        want[st.xs[i].to % NHOSTS][st.xs[i].to / NHOSTS] += st.xs[i].amount;
    }
    for (int h = 0; h < NHOSTS; h++)
        for (int k = 0; k < NACCOUNTS; k++) {
            ck_assert_msg(st.balance[h][k] == want[h][k], "account %" PRId64 " has %" PRId64
                          " but its transfers say %" PRId64 ": a transfer was half-applied",
                          acct_id(h, (uint64_t)k), st.balance[h][k], want[h][k]);
            total += st.balance[h][k];
        }
    ck_assert_msg(total == (int64_t)NHOSTS * NACCOUNTS * INITIAL, "total %" PRId64 " != %d",
                  total, NHOSTS * NACCOUNTS * INITIAL);
    int64_t *txids = malloc((st.nx + 1) * sizeof *txids);
    for (size_t i = 0; i < st.nx; i++) txids[i] = st.xs[i].txid;
    qsort(txids, st.nx, sizeof *txids, cmp_i64);
    size_t found = 0;
    for (int h = 0; h < NHOSTS; h++)
        for (size_t i = 0; i < nacked[h]; i++) {
            int64_t t = (int64_t)acked[h][i];
            ck_assert_msg(bsearch(&t, txids, st.nx, sizeof *txids, cmp_i64) != NULL,
                          "acknowledged transfer %" PRId64 " (host %d) is missing after recovery",
                          t, h);
            found++;
        }
    *unacked = st.nx - found;
    free(txids);
    free(st.xs);
    return st.nx;
}

static void sh_dump_log_path(const char *path, const char *why)
{
    char *t = sh_slurp(path);
    fprintf(stderr, "---- %s: %s ----\n%s---- end ----\n", why, path, t);
    free(t);
}

static void kill_pod(struct pod *p)
{
    for (int h = 0; h < NHOSTS; h++) kill(p->pid[h], SIGKILL);
    for (int h = 0; h < NHOSTS; h++) {
        sh_wait_exit(p->pid[h], 10000);
        p->pid[h] = 0;
    }
}

static void check_logs_clean(const struct pod *p)
{
    for (int h = 0; h < NHOSTS; h++) {
        static const char *const marks[] = {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                                            "runtime error", "ThreadSanitizer"};
        for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
            ck_assert_msg(!sh_file_contains(p->log[h], marks[i]), "host %d's log has '%s':\n%s",
                          h, marks[i], sh_slurp(p->log[h]));
        ck_assert_msg(!sh_file_contains(p->log[h], "CORRUPT"),
                      "host %d's recovery met corrupt log data:\n%s", h, sh_slurp(p->log[h]));
    }
}

START_TEST(crash_and_recover)
{
    struct pod p;
    memset(&p, 0, sizeof p);
    write_conf(&p);
    uint64_t rng = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ pod_mono_ns();
    uint64_t *acked[NHOSTS] = {NULL};
    size_t nacked[NHOSTS] = {0}, cap[NHOSTS] = {0};
    size_t total_acked = 0;
    for (int round = 0; round < ROUNDS; round++) {
        start_pod(&p);
        if (round == 0) {
            for (int h = 0; h < NHOSTS; h++) {
                pod_client *c = connect_to(p.sock[h]);
                pod_value a[3] = {pod_v_i64(h), pod_v_i64(NACCOUNTS), pod_v_i64(INITIAL)};
                pod_reply *r = pod_client_call(c, "bank.init", a, 3);
                ck_assert_msg(r && pod_reply_status(r) == POD_OK, "bank.init: %s",
                              r ? pod_reply_message(r) : pod_client_error(c));
                pod_reply_free(r);
                pod_client_close(c);
            }
        } else {
            size_t extra = 0, present = verify_pod(&p, acked, nacked, &extra);
            fprintf(stderr, "round %d: %zu transfers present, all %zu acknowledged ones among "
                    "them (%zu committed without a reply), balances consistent\n", round,
                    present, nacked[0] + nacked[1], extra);
        }
        /* run the workload and kill both servers at a random moment */
        struct client cl[NHOSTS];
        memset(cl, 0, sizeof cl);
        for (int h = 0; h < NHOSTS; h++) {
            cl[h] = (struct client){.p = &p, .host = h, .round = round,
                                    .rng = pod_rand(&rng) | 1, .acked = acked[h],
                                    .nacked = nacked[h], .cap = cap[h]};
            ck_assert_int_eq(pthread_create(&cl[h].th, NULL, client_main, &cl[h]), 0);
        }
        int run_ms = 150 + (int)(pod_rand(&rng) % 600);
        sh_sleep_ms(run_ms);
        kill_pod(&p);
        for (int h = 0; h < NHOSTS; h++) {
            pthread_join(cl[h].th, NULL);
            ck_assert_msg(cl[h].other_errors == 0, "host %d: %" PRIu64 " unexpected errors (%s)", h,
                          cl[h].other_errors, cl[h].err);
            fprintf(stderr, "round %d, host %d: killed after %d ms: %" PRIu64 " calls sent, %" PRIu64
                    " replies, %zu transfers acknowledged in this round\n", round, h, run_ms,
                    cl[h].sent, cl[h].replies, cl[h].nacked - nacked[h]);
            total_acked += cl[h].nacked - nacked[h];
            acked[h] = cl[h].acked;
            nacked[h] = cl[h].nacked;
            cap[h] = cl[h].cap;
        }
        check_logs_clean(&p);
        if (getenv("PODDB_CRASH_VERBOSE"))
            for (int h = 0; h < NHOSTS; h++) sh_dump_log_path(p.log[h], "after the kill");
    }
    ck_assert_msg(total_acked > 0, "no transfer was ever acknowledged: the test proved nothing");
    /* the last recovery, then a clean stop, and the logs verify */
    start_pod(&p);
    size_t extra = 0;
    verify_pod(&p, acked, nacked, &extra);
    for (int h = 0; h < NHOSTS; h++) kill(p.pid[h], SIGTERM);
    for (int h = 0; h < NHOSTS; h++) {
        int st = sh_wait_exit(p.pid[h], 20000);
        ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "host %d did not stop cleanly (status %d):\n%s", h, st, sh_slurp(p.log[h]));
    }
    check_logs_clean(&p);
    for (int h = 0; h < NHOSTS; h++) {
        char cmd[3 * SH_PATH];
        snprintf(cmd, sizeof cmd, "%s/poddb-logdump --verify %s >/dev/null", sh_bin_dir(),
                 p.logdir[h]);
        ck_assert_msg(system(cmd) == 0, "poddb-logdump --verify %s failed", p.logdir[h]);
    }
    for (int h = 0; h < NHOSTS; h++) free(acked[h]);
    unlink(p.region);
}
END_TEST

static Suite *crash_suite(void)
{
    Suite *s = suite_create("crash");
    TCase *tc = tcase_create("sigkill");
    tcase_add_test(tc, crash_and_recover);
    tcase_set_timeout(tc, 300);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    sh_init();
    g_cross = getenv("PODDB_CRASH_CROSS") && atoi(getenv("PODDB_CRASH_CROSS"));
    SRunner *sr = srunner_create(crash_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
