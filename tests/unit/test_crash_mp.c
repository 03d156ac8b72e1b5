/* The crash test of the durability layer: a 2-host pod of real poddb-server
 * processes runs a bank workload (tests/modules/bank.c) through the client
 * library, both servers are killed with SIGKILL at a random moment in the
 * middle of the workload (once each client has had transfers acknowledged in
 * this round, with calls still in flight), restarted, and the recovered state
 * is checked:
 *   - every transfer whose reply said ok (acknowledged) is present;
 *   - nothing is half-applied: every account's balance is exactly its initial
 *     balance plus the transfers present (acknowledged or not), and every
 *     account is in exactly one of accounts/parking;
 *   - the total is unchanged.
 * This repeats for several rounds (different kill points, state carried over),
 * with small checkpoints so that recovery also starts from checkpoints and
 * removes old segments. Under load the durable-epoch file lags (the loggers'
 * marks carry the durable epoch: docs/durability.md), and the test asserts
 * that the marks were used and that recoveries took the committed end from
 * them. Finally the pod stops cleanly and poddb-logdump
 * --verify finds no damage (torn tails are allowed, corrupt ones are not).
 *
 * Transfers go between accounts of any host (cross-host transactions through
 * the pod layer, pod-mode logging and recovery); PODDB_CRASH_CROSS=0 keeps
 * each client on its own host's accounts. PODDB_CRASH_ROUNDS sets the rounds.
 *
 * A second test checks a pod-mode checkpoint of tuples that live in CXL
 * memory and were written there by the other host: each client moves money
 * only between the other host's accounts (so the owner's DRAM copy is stale
 * and the CXL copy is the tuple); then only a few "hot" accounts are used
 * while both hosts take checkpoints, so the cold accounts' values are in the
 * checkpoints and nowhere else that recovery reads (log records older than a
 * checkpoint are skipped); SIGKILL, restart, and the same checks. */
#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/pod_harness.h"
#include "poddb/client.h"
#include "util/clock.h"
#include "helpers/testutil.h"

#define NHOSTS 2
#define NACCOUNTS 32 /* per host */
#define INITIAL 1000
#define DEPTH 8
#define ROUNDS 12      /* default of PODDB_CRASH_ROUNDS */
#define MIN_ACKS 40    /* per client and round before the kill may come */
#define HOT 6          /* accounts used in the checkpoint test's second phase */

struct pod {
    char dir[SH_PATH - 64];
    char conf[SH_PATH];
    char region[SH_PATH];
    char sock[NHOSTS][SH_PATH];
    char log[NHOSTS][SH_PATH];
    char logdir[NHOSTS][SH_PATH];
    pid_t pid[NHOSTS];
    long log_at[NHOSTS]; /* size of each server's output before its last start */
};

/* Which accounts a client's transfers use. */
enum mix {
    MIX_OWN,    /* its own host's accounts (PODDB_CRASH_CROSS=0) */
    MIX_CROSS,  /* from its own host's accounts to any host's */
    MIX_REMOTE, /* between the other host's accounts only: every write is remote */
};
static enum mix g_mix = MIX_CROSS;

/* Whether and how clients park own accounts (bank.park: a delete from
 * accounts and an insert into parking; bank.unpark the reverse). */
enum park {
    PARK_NONE,
    PARK_PAIRS, /* 8% of calls: park and unpark right away, usually in one epoch */
    PARK_APART, /* 30%: park or unpark an account, 3 in 4 of the other host (a remote delete);
                   accounts stay parked for a while */
};

struct client {
    pthread_t th;
    const struct pod *p;
    int host, round;
    enum mix mix;
    int naccts;      /* accounts 0..naccts-1 of a host are used */
    enum park park;  /* also park/unpark own accounts */
    bool stop;       /* atomic: send nothing more, end when every reply is in */
    uint64_t rng;
    uint64_t *acked; /* txids whose reply was ok */
    size_t nacked, cap; /* nacked: atomic (the main thread watches it) */
    uint64_t calls, replies, user_aborts, other_errors; /* calls, replies: atomic */
    char err[256];
};

static void write_conf(struct pod *p, const char *name)
{
    char mod[PATH_MAX];
    ck_assert_msg(realpath("build/test/modules/bank.so", mod) != NULL,
                  "build/test/modules/bank.so is not built (make test builds it)");
    ph_pod_paths(name, p->dir, sizeof p->dir, p->conf, sizeof p->conf, p->region,
                 sizeof p->region);
    for (int h = 0; h < NHOSTS; h++)
        ph_host_paths(p->dir, h, p->sock[h], sizeof p->sock[h], p->log[h], sizeof p->log[h],
                      p->logdir[h], sizeof p->logdir[h]);
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

static long file_len(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : 0;
}

/* What host h printed since its last start (free it). */
static char *host_output(const struct pod *p, int h)
{
    char *t = sh_slurp(p->log[h]);
    long n = (long)strlen(t), at = p->log_at[h] < n ? p->log_at[h] : n;
    memmove(t, t + at, (size_t)(n - at) + 1);
    return t;
}

/* The number printed just before `after` on the last line of text that
 * contains `line` (e.g. "1557 older than the checkpoint"); -1 if none. */
static long long number_before(const char *text, const char *line, const char *after)
{
    long long v = -1;
    for (const char *l = strstr(text, line); l; l = strstr(l + 1, line)) {
        const char *bol = l, *eol = strchr(l, '\n');
        while (bol > text && bol[-1] != '\n') bol--;
        const char *a = strstr(bol, after);
        if (!a || (eol && a > eol)) continue;
        const char *d = a;
        while (d > bol && d[-1] == ' ') d--;
        while (d > bol && d[-1] >= '0' && d[-1] <= '9') d--;
        v = strtoll(d, NULL, 10);
    }
    return v;
}

static void start_pod(struct pod *p)
{
    for (int h = 0; h < NHOSTS; h++) {
        p->log_at[h] = file_len(p->log[h]);
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

static uint64_t load_u64(const uint64_t *v) { return __atomic_load_n(v, __ATOMIC_RELAXED); }
static void bump(uint64_t *v) { __atomic_fetch_add(v, 1, __ATOMIC_RELAXED); }
static size_t acked_now(const struct client *cl)
{
    return __atomic_load_n(&cl->nacked, __ATOMIC_ACQUIRE);
}

/* A transfer's two accounts, by the client's mix. */
static void pick_accounts(struct client *cl, int64_t *from, int64_t *to)
{
    uint64_t n = (uint64_t)cl->naccts;
    int other = (cl->host + 1) % NHOSTS;
    int from_host = cl->mix == MIX_REMOTE ? other : cl->host;
    int to_host = cl->mix == MIX_OWN      ? cl->host
                  : cl->mix == MIX_REMOTE ? other
                                          : (int)(pod_rand(&cl->rng) % NHOSTS);
    uint64_t i = pod_rand(&cl->rng) % n;
    uint64_t j = (i + 1 + pod_rand(&cl->rng) % (n - 1)) % n; /* j != i */
    *from = acct_id(from_host, i);
    *to = acct_id(to_host, j);
}

static void *client_main(void *arg)
{
    struct client *cl = arg;
    pod_client *c = ph_connect(cl->p->sock[cl->host], 10000, cl->err, sizeof cl->err);
    if (!c) return NULL;
    uint64_t txid_of[2 * DEPTH * 4] = {0};
    const size_t ring = sizeof txid_of / sizeof txid_of[0];
    uint64_t seq = 0;
    for (;;) {
        bool stop = __atomic_load_n(&cl->stop, __ATOMIC_ACQUIRE);
        /* Keep DEPTH calls in flight (none more once told to stop). */
        while (!stop && pod_client_pending(c) < DEPTH) {
            uint64_t r = pod_rand(&cl->rng);
            if (cl->park == PARK_NONE || r % 100 < (cl->park == PARK_PAIRS ? 92u : 70u)) {
                int64_t from, to;
                pick_accounts(cl, &from, &to);
                int64_t txid = (int64_t)((((uint64_t)cl->round << 28 | seq++) << 1) | (uint64_t)cl->host);
                pod_value a[4] = {pod_v_i64(from), pod_v_i64(to),
                                  pod_v_i64(1 + (int64_t)(pod_rand(&cl->rng) % 50)),
                                  pod_v_i64(txid)};
                uint64_t id = pod_client_send(c, "bank.transfer", a, 4, 0);
                if (!id) goto out;
                txid_of[id % ring] = (uint64_t)txid;
                bump(&cl->calls);
            } else if (cl->park == PARK_APART) { /* mostly the other host's: remote deletes */
                int h = pod_rand(&cl->rng) % 4 ? (cl->host + 1) % NHOSTS : cl->host;
                pod_value a[1] = {pod_v_i64(acct_id(h, pod_rand(&cl->rng) % NACCOUNTS))};
                uint64_t id = pod_client_send(c, r & 1 ? "bank.park" : "bank.unpark", a, 1, 0);
                if (!id) goto out;
                txid_of[id % ring] = 0;
                bump(&cl->calls);
            } else {
                /* park then unpark right away: a delete and a re-insert of the
                 * same key, usually in one epoch */
                pod_value a[1] = {pod_v_i64(acct_id(cl->host, pod_rand(&cl->rng) % NACCOUNTS))};
                uint64_t id = pod_client_send(c, "bank.park", a, 1, 0);
                if (!id) goto out;
                txid_of[id % ring] = 0;
                if (!(id = pod_client_send(c, "bank.unpark", a, 1, 0))) goto out;
                txid_of[id % ring] = 0;
                bump(&cl->calls);
                bump(&cl->calls);
            }
        }
        if (stop && pod_client_pending(c) == 0) break;
        if (pod_client_flush(c) != 0) break;
        pod_reply *rp = pod_client_recv(c);
        if (!rp) break; /* the server is gone */
        bump(&cl->replies);
        uint64_t txid = txid_of[pod_reply_id(rp) % ring];
        int st = pod_reply_status(rp);
        if (st == POD_OK && txid) {
            if (cl->nacked == cl->cap) {
                cl->cap = cl->cap ? 2 * cl->cap : 1024;
                cl->acked = realloc(cl->acked, cl->cap * sizeof *cl->acked);
            }
            cl->acked[cl->nacked] = txid;
            __atomic_store_n(&cl->nacked, cl->nacked + 1, __ATOMIC_RELEASE);
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

/* The clients of one round; they add to the acknowledged lists. */
struct round {
    struct client cl[NHOSTS];
    size_t acked_before[NHOSTS];
};

static void start_clients(struct round *rd, const struct pod *p, int round, enum mix mix,
                          int naccts, enum park park, uint64_t *rng, uint64_t *acked[],
                          size_t nacked[], size_t cap[])
{
    memset(rd, 0, sizeof *rd);
    for (int h = 0; h < NHOSTS; h++) {
        rd->acked_before[h] = nacked[h];
        rd->cl[h] = (struct client){.p = p, .host = h, .round = round, .mix = mix,
                                    .naccts = naccts, .park = park, .rng = pod_rand(rng) | 1,
                                    .acked = acked[h], .nacked = nacked[h], .cap = cap[h]};
        ck_assert_int_eq(pthread_create(&rd->cl[h].th, NULL, client_main, &rd->cl[h]), 0);
    }
}

/* Wait until every client has had n transfers acknowledged in this round. */
static void wait_acks(struct round *rd, size_t n, int timeout_ms)
{
    uint64_t end = sh_now_ms() + (uint64_t)timeout_ms;
    for (int h = 0; h < NHOSTS; h++)
        while (acked_now(&rd->cl[h]) - rd->acked_before[h] < n) {
            ck_assert_msg(sh_now_ms() < end, "host %d: only %zu transfers acknowledged in %d ms "
                          "(%s)", h, acked_now(&rd->cl[h]) - rd->acked_before[h], timeout_ms,
                          rd->cl[h].err);
            sh_sleep_ms(5);
        }
}

/* Join the clients (after a kill, or after stop_clients) and take their lists back. */
static void join_clients(struct round *rd, const char *what, uint64_t *acked[], size_t nacked[],
                         size_t cap[], size_t *total_acked)
{
    for (int h = 0; h < NHOSTS; h++) {
        struct client *cl = &rd->cl[h];
        pthread_join(cl->th, NULL);
        ck_assert_msg(cl->other_errors == 0, "host %d: %" PRIu64 " unexpected errors (%s)", h,
                      cl->other_errors, cl->err);
        fprintf(stderr, "  %s, host %d's client: %" PRIu64 " calls, %" PRIu64 " replies (%" PRIu64
                " user aborts), %zu transfers acknowledged\n", what, h, cl->calls, cl->replies,
                cl->user_aborts, cl->nacked - rd->acked_before[h]);
        if (total_acked) *total_acked += cl->nacked - rd->acked_before[h];
        acked[h] = cl->acked;
        nacked[h] = cl->nacked;
        cap[h] = cl->cap;
    }
}

static void stop_clients(struct round *rd)
{
    for (int h = 0; h < NHOSTS; h++) __atomic_store_n(&rd->cl[h].stop, true, __ATOMIC_RELEASE);
}

/* Kill both servers now and say how much was going on at that moment. */
static void kill_pod(struct pod *p);
static void kill_mid_workload(struct pod *p, struct round *rd, int round)
{
    uint64_t calls[NHOSTS], replies[NHOSTS];
    size_t acks[NHOSTS];
    for (int h = 0; h < NHOSTS; h++) {
        calls[h] = load_u64(&rd->cl[h].calls);
        replies[h] = load_u64(&rd->cl[h].replies);
        acks[h] = acked_now(&rd->cl[h]) - rd->acked_before[h];
    }
    kill_pod(p);
    for (int h = 0; h < NHOSTS; h++) {
        fprintf(stderr, "round %d: SIGKILL with host %d's client at %zu transfers acknowledged "
                "in this round, %" PRIu64 " calls in flight\n", round, h, acks[h],
                calls[h] - replies[h]);
        ck_assert_msg(acks[h] > 0 && calls[h] > replies[h], "round %d: the kill did not come "
                      "mid-workload on host %d", round, h);
    }
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

static void init_bank(const struct pod *p)
{
    for (int h = 0; h < NHOSTS; h++) {
        pod_client *c = connect_to(p->sock[h]);
        pod_value a[3] = {pod_v_i64(h), pod_v_i64(NACCOUNTS), pod_v_i64(INITIAL)};
        pod_reply *r = pod_client_call(c, "bank.init", a, 3);
        ck_assert_msg(r && pod_reply_status(r) == POD_OK, "bank.init: %s",
                      r ? pod_reply_message(r) : pod_client_error(c));
        pod_reply_free(r);
        pod_client_close(c);
    }
}

/* A counter of sys.log or sys.pod on host h (-1: not reported). */
static long long sys_counter(const struct pod *p, int h, const char *proc, const char *name)
{
    pod_client *c = connect_to(p->sock[h]);
    pod_reply *r = pod_client_call(c, proc, NULL, 0);
    ck_assert_msg(r && pod_reply_status(r) == POD_OK, "%s on host %d: %s", proc, h,
                  r ? pod_reply_message(r) : pod_client_error(c));
    long long v = -1;
    for (int i = 0; i < pod_reply_nrows(r); i++) {
        const pod_value *k = pod_reply_value(r, i, 0), *val = pod_reply_value(r, i, 1);
        if (k && val && k->len == strlen(name) && memcmp(k->u.bytes, name, k->len) == 0) {
            char buf[32];
            snprintf(buf, sizeof buf, "%.*s", (int)val->len, (const char *)val->u.bytes);
            v = strtoll(buf, NULL, 10);
        }
    }
    pod_reply_free(r);
    pod_client_close(c);
    return v;
}

/* Stop the pod cleanly; the logs verify. */
static void stop_pod_and_verify_logs(struct pod *p)
{
    for (int h = 0; h < NHOSTS; h++) kill(p->pid[h], SIGTERM);
    for (int h = 0; h < NHOSTS; h++) {
        int st = sh_wait_exit(p->pid[h], 20000);
        ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "host %d did not stop cleanly (status %d):\n%s", h, st, sh_slurp(p->log[h]));
    }
    check_logs_clean(p);
    for (int h = 0; h < NHOSTS; h++) {
        char cmd[3 * SH_PATH];
        snprintf(cmd, sizeof cmd, "%s/poddb-logdump --verify %s >/dev/null", sh_bin_dir(),
                 p->logdir[h]);
        ck_assert_msg(system(cmd) == 0, "poddb-logdump --verify %s failed", p->logdir[h]);
    }
}

/* What the recovery of host h just did: from a checkpoint?, records routed. */
struct recovery_seen {
    bool checkpoint, chain; /* chain: a full checkpoint and deltas */
    long long before_ckpt, sent, received;
    long long end, recorded; /* the committed end, and what the durable-epoch file said */
};

static struct recovery_seen recovery_of(const struct pod *p, int h)
{
    char *t = host_output(p, h);
    struct recovery_seen r = {
        .checkpoint = strstr(t, "and a checkpoint") != NULL,
        .chain = strstr(t, "and a checkpoint (a full one and") != NULL,
        .before_ckpt = number_before(t, "recovery: done", "older than the checkpoint"),
        .sent = number_before(t, "sent to their owners", "records sent"),
        .received = number_before(t, "sent to their owners", "received"),
        .end = number_before(t, "committed end of the pod", " (this host recorded"),
        .recorded = number_before(t, "committed end of the pod", ", its loggers marked")};
    free(t);
    return r;
}

/* A new pod's paths and config (not started); returns the test's random seed. */
static uint64_t new_pod(struct pod *p, const char *name)
{
    memset(p, 0, sizeof *p);
    write_conf(p, name);
    return (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ pod_mono_ns();
}

START_TEST(crash_and_recover)
{
    struct pod p;
    uint64_t rng = new_pod(&p, "crash");
    const char *re = getenv("PODDB_CRASH_ROUNDS");
    int rounds = re && atoi(re) > 0 ? atoi(re) : ROUNDS;
    uint64_t *acked[NHOSTS] = {NULL};
    size_t nacked[NHOSTS] = {0}, cap[NHOSTS] = {0};
    size_t total_acked = 0;
    int from_ckpt[NHOSTS] = {0};
    long long routed = 0, by_marks = 0;
    int ends_from_marks = 0; /* recoveries whose committed end was above the file's */
    fprintf(stderr, "%d rounds, transfers %s\n", rounds,
            g_mix == MIX_CROSS ? "across hosts" : "within each host");
    for (int round = 0; round < rounds; round++) {
        start_pod(&p);
        if (round == 0) {
            init_bank(&p);
        } else {
            for (int h = 0; h < NHOSTS; h++) {
                struct recovery_seen r = recovery_of(&p, h);
                from_ckpt[h] += r.checkpoint;
                if (r.sent > 0) routed += r.sent;
                ends_from_marks += r.end > r.recorded && r.recorded >= 0;
                fprintf(stderr, "round %d: host %d recovered %s; %lld records sent to their "
                        "owners, %lld received\n", round, h,
                        r.checkpoint ? "from a checkpoint" : "from the log alone", r.sent,
                        r.received);
            }
            size_t extra = 0, present = verify_pod(&p, acked, nacked, &extra);
            fprintf(stderr, "round %d: %zu transfers present, all %zu acknowledged ones among "
                    "them (%zu committed without a reply), balances consistent\n", round,
                    present, nacked[0] + nacked[1], extra);
        }
        /* Run the workload; once both clients have had transfers acknowledged,
         * kill both servers at a random moment. */
        struct round rd;
        start_clients(&rd, &p, round, g_mix, NACCOUNTS, PARK_PAIRS, &rng, acked, nacked, cap);
        uint64_t t0 = sh_now_ms();
        wait_acks(&rd, MIN_ACKS, 60000);
        sh_sleep_ms(100 + (int)(pod_rand(&rng) % 2000));
        fprintf(stderr, "round %d: %llu ms of workload\n", round,
                (unsigned long long)(sh_now_ms() - t0));
        for (int h = 0; h < NHOSTS; h++) {
            long long m = sys_counter(&p, h, "sys.log", "persisted_by_marks");
            if (m > 0) by_marks += m;
        }
        kill_mid_workload(&p, &rd, round);
        join_clients(&rd, "after the kill", acked, nacked, cap, &total_acked);
        check_logs_clean(&p);
        if (getenv("PODDB_CRASH_VERBOSE"))
            for (int h = 0; h < NHOSTS; h++) sh_dump_log_path(p.log[h], "after the kill");
    }
    ck_assert_msg(total_acked > 0, "no transfer was ever acknowledged: the test proved nothing");
    /* the last recovery, then a clean stop, and the logs verify */
    start_pod(&p);
    for (int h = 0; h < NHOSTS; h++) from_ckpt[h] += recovery_of(&p, h).checkpoint;
    size_t extra = 0;
    size_t present = verify_pod(&p, acked, nacked, &extra);
    fprintf(stderr, "end: %zu transfers present, all %zu acknowledged ones among them; "
            "recoveries from a checkpoint: host 0 %d, host 1 %d of %d; %lld records routed\n",
            present, nacked[0] + nacked[1], from_ckpt[0], from_ckpt[1], rounds, routed);
    if (rounds >= 4)
        for (int h = 0; h < NHOSTS; h++)
            ck_assert_msg(from_ckpt[h] > 0, "host %d never recovered from a checkpoint", h);
    if (g_mix == MIX_CROSS && rounds >= 2)
        ck_assert_msg(routed > 0, "cross-host transfers, but no record was routed to its owner");
    /* The durable epoch advanced through the loggers' marks (no file write),
     * and recovery found the committed end in them: the checks above held
     * with the file lagging. */
    fprintf(stderr, "end: %lld durable-epoch advances through marks; %d recoveries ended above "
            "the recorded epoch\n", by_marks, ends_from_marks);
    ck_assert_msg(by_marks > 0, "the durable epoch never advanced through the marks");
    if (rounds >= 4)
        ck_assert_msg(ends_from_marks > 0, "no recovery took its committed end from the marks");
    stop_pod_and_verify_logs(&p);
    for (int h = 0; h < NHOSTS; h++) free(acked[h]);
    unlink(p.region);
}
END_TEST

/* A pod-mode checkpoint of tuples another host wrote in CXL memory. */
START_TEST(checkpoint_of_remote_writes)
{
    struct pod p;
    uint64_t rng = new_pod(&p, "ckpt");
    uint64_t *acked[NHOSTS] = {NULL};
    size_t nacked[NHOSTS] = {0}, cap[NHOSTS] = {0};
    start_pod(&p);
    init_bank(&p);
    /* Phase 1: every account is written by the other host only. */
    struct round rd;
    start_clients(&rd, &p, 0, MIX_REMOTE, NACCOUNTS, PARK_NONE, &rng, acked, nacked, cap);
    wait_acks(&rd, 300, 60000);
    stop_clients(&rd);
    join_clients(&rd, "phase 1 (all accounts, remote writes only)", acked, nacked, cap, NULL);
    long long ckpts[NHOSTS];
    for (int h = 0; h < NHOSTS; h++) {
        ckpts[h] = sys_counter(&p, h, "sys.log", "checkpoints");
        long long rw = sys_counter(&p, h, "sys.pod", "remote_writes");
        fprintf(stderr, "after phase 1: host %d wrote %lld tuples of the other host; "
                "%lld checkpoints so far\n", h, rw, ckpts[h]);
        ck_assert_int_gt(rw, 0);
    }
    /* Phase 2: only HOT accounts, until each host has taken two more
     * checkpoints (the second one started after phase 1 ended). */
    start_clients(&rd, &p, 1, MIX_REMOTE, HOT, PARK_NONE, &rng, acked, nacked, cap);
    uint64_t end = sh_now_ms() + 90000;
    for (int h = 0; h < NHOSTS; h++)
        while (sys_counter(&p, h, "sys.log", "checkpoints") < ckpts[h] + 2) {
            ck_assert_msg(sh_now_ms() < end, "host %d took no new checkpoints (%s)", h,
                          rd.cl[h].err);
            sh_sleep_ms(20);
        }
    for (int h = 0; h < NHOSTS; h++)
        fprintf(stderr, "phase 2: host %d has taken %lld checkpoints (checkpoint epoch %lld)\n",
                h, sys_counter(&p, h, "sys.log", "checkpoints"),
                sys_counter(&p, h, "sys.log", "checkpoint_epoch"));
    sh_sleep_ms((int)(pod_rand(&rng) % 200));
    kill_mid_workload(&p, &rd, 1);
    join_clients(&rd, "phase 2 (hot accounts), after the kill", acked, nacked, cap, NULL);
    check_logs_clean(&p);
    start_pod(&p);
    for (int h = 0; h < NHOSTS; h++) {
        struct recovery_seen r = recovery_of(&p, h);
        fprintf(stderr, "host %d recovered %s; %lld log records older than it skipped\n", h,
                r.checkpoint ? "from a checkpoint" : "from the log alone", r.before_ckpt);
        ck_assert_msg(r.checkpoint && r.before_ckpt > 0, "host %d did not recover from its "
                      "checkpoint:\n%s", h, sh_slurp(p.log[h]));
    }
    size_t extra = 0, present = verify_pod(&p, acked, nacked, &extra);
    fprintf(stderr, "recovered: %zu transfers present, all %zu acknowledged ones among them "
            "(%zu committed without a reply), balances consistent\n", present,
            nacked[0] + nacked[1], extra);
    stop_pod_and_verify_logs(&p);
    for (int h = 0; h < NHOSTS; h++) free(acked[h]);
    unlink(p.region);
}
END_TEST

/* Delta checkpoints (only what changed since the checkpoint before, and the
 * keys deleted since): the bank's clients park and unpark accounts (a delete
 * and an insert in each table; an account stays parked for a while, so that
 * checkpoints hold rows deleted later) while both hosts write a chain
 * of deltas; SIGKILL while each host's newest checkpoint is a delta, and
 * the recovered pod must hold every account in exactly one table with the
 * right balance: a delete left out of a delta would bring a parked account
 * back from an older checkpoint of the chain. Two rounds. */
/* Whether the file system of dir takes an O_DIRECT write of a page. */
static bool takes_odirect(const char *dir)
{
    char path[SH_PATH + 32];
    snprintf(path, sizeof path, "%s/odirect-probe", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0644);
    if (fd < 0) return false;
    void *page = NULL;
    bool ok = posix_memalign(&page, 4096, 4096) == 0;
    if (ok) {
        memset(page, 0, 4096);
        ok = pwrite(fd, page, 4096, 0) == 4096;
    }
    free(page);
    close(fd);
    unlink(path);
    return ok;
}

START_TEST(delta_checkpoints_keep_deletes)
{
    struct pod p;
    uint64_t rng = new_pod(&p, "delta");
    uint64_t *acked[NHOSTS] = {NULL};
    size_t nacked[NHOSTS] = {0}, cap[NHOSTS] = {0};
    start_pod(&p);
    init_bank(&p);
    int chains = 0;
    for (int round = 0; round < 2; round++) {
        struct round rd;
        start_clients(&rd, &p, round, MIX_CROSS, NACCOUNTS, PARK_APART, &rng, acked, nacked, cap);
        long long deltas0[NHOSTS], ckpts0[NHOSTS];
        for (int h = 0; h < NHOSTS; h++) {
            deltas0[h] = sys_counter(&p, h, "sys.log", "checkpoint_deltas");
            ckpts0[h] = sys_counter(&p, h, "sys.log", "checkpoints");
        }
        /* Until each host has taken 3 checkpoints in this life and its
         * newest is a delta with a delete or two behind it. */
        uint64_t end = sh_now_ms() + 90000;
        for (int h = 0; h < NHOSTS; h++)
            while (sys_counter(&p, h, "sys.log", "checkpoints") < ckpts0[h] + 3 ||
                   sys_counter(&p, h, "sys.log", "checkpoint_deltas") < 1) {
                ck_assert_msg(sh_now_ms() < end, "host %d wrote no delta checkpoint (%s)", h,
                              rd.cl[h].err);
                sh_sleep_ms(5);
            }
        for (int h = 0; h < NHOSTS; h++) {
            fprintf(stderr, "round %d: host %d: %lld checkpoints, %lld deltas in its chain "
                    "(%lld before)\n", round, h, sys_counter(&p, h, "sys.log", "checkpoints"),
                    sys_counter(&p, h, "sys.log", "checkpoint_deltas"), deltas0[h]);
            /* Every segment written with O_DIRECT where the file system takes it
             * (the padded files it leaves at the kill below are read back). */
            long long segs = sys_counter(&p, h, "sys.log", "segments"),
                      direct = sys_counter(&p, h, "sys.log", "direct_segments");
            ck_assert_int_gt(segs, 0);
            ck_assert_int_eq(direct, takes_odirect(p.logdir[h]) ? segs : 0);
        }
        kill_mid_workload(&p, &rd, round);
        join_clients(&rd, "after the kill", acked, nacked, cap, NULL);
        check_logs_clean(&p);
        start_pod(&p);
        for (int h = 0; h < NHOSTS; h++) chains += recovery_of(&p, h).chain;
        size_t extra = 0, present = verify_pod(&p, acked, nacked, &extra);
        fprintf(stderr, "round %d: %zu transfers present, all %zu acknowledged ones among them, "
                "balances consistent, every account in one table\n", round, present,
                nacked[0] + nacked[1]);
    }
    /* (A full checkpoint may finish between the poll and the kill; not on
     * all four recoveries.) */
    ck_assert_msg(chains > 0, "no recovery loaded a chain of delta checkpoints");
    stop_pod_and_verify_logs(&p);
    for (int h = 0; h < NHOSTS; h++) free(acked[h]);
    unlink(p.region);
}
END_TEST

static Suite *crash_suite(void)
{
    Suite *s = suite_create("crash");
    TCase *tc = tu_tcase(s, "sigkill", 300);
    tcase_add_test(tc, crash_and_recover);
    tc = tu_tcase(s, "checkpoint", 300);
    tcase_add_test(tc, checkpoint_of_remote_writes);
    tcase_add_test(tc, delta_checkpoints_keep_deletes);
    return s;
}

int main(void)
{
    sh_init();
    const char *cross = getenv("PODDB_CRASH_CROSS");
    if (cross && !atoi(cross)) g_mix = MIX_OWN;
    return tu_run(crash_suite());
}
