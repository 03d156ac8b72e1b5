/* The pod across real processes: 2 and 4 poddb-server processes share one
 * region in simulated non-coherent mode, with a HWcc threshold so low that
 * the owners move tuples out between almost every two transactions. Clients
 * of every host run, at once:
 *   - transfers between accounts of different hosts (the total must stay
 *     exact: no lost or torn update across hosts, through move-in/out), a
 *     third of them reading both accounts before updating them in place, a
 *     third updating only parts of the tuples (pod_update_range);
 *   - inserts and deletes of events on other hosts' partitions, each with a
 *     per-partition counter updated in the same transaction;
 *   - checks that scan a partition forward, backward and forward again in
 *     one transaction and read its counter: all four must agree (a phantom,
 *     or an insert/delete seen before or after its commit, breaks that);
 *   - reads of every account in one transaction, prefetched 16 at a time
 *     (other hosts move several in per request: POD_MSG_MOVE_MANY), which
 *     must see the exact total.
 * Every coherence variant runs the same test (tests/modules/podbank.c has
 * the procedures). range_writes_recovered runs it with logging on, kills
 * both servers and checks that recovery brings every account back byte for
 * byte (other hosts' PATCH records included). Every run also checks that
 * sys.pod's wait quantiles agree with its count of waits; wait_quantiles
 * checks the quantile helpers on a histogram made up for it. */
#include <check.h>
#include <pthread.h>

#include "helpers/pod_harness.h"
#include "pod/pod.h"
#include "helpers/testutil.h"

#define NACCT 240
#define NPARTS 8
#define BALANCE 100
#define RUN_MS 2500
#define MAX_HOSTS 4

struct pod {
    char dir[SH_PATH - 64];
    char conf[SH_PATH];
    char region[SH_PATH];
    char sock[MAX_HOSTS][SH_PATH];
    char log[MAX_HOSTS][SH_PATH];
    pid_t pid[MAX_HOSTS];
    int nhosts;
};

static const char *modules_dir(void)
{
    const char *m = getenv("PODDB_MODULES");
    return m && *m ? m : "build/test/modules";
}

/* A threshold that makes move-out run all the time. */
#define LOW_THRESHOLD "  moveout_threshold: 0.01\n"

/* Start every host of p (its config written) and wait until each answers. */
static void spawn_hosts(struct pod *p)
{
    for (int h = 0; h < p->nhosts; h++) {
        p->pid[h] = sh_spawn_host(p->conf, h, p->log[h]);
        ck_assert(p->pid[h] > 0);
    }
    for (int h = 0; h < p->nhosts; h++) ph_wait_up(p->pid[h], p->sock[h], p->log[h], h);
}

/* engine: the lines of the engine section after coherence (each "  key: value\n");
 * loggers: per host (0: no logging). */
static void pod_start_logged(struct pod *p, int nhosts, int workers, const char *coherence,
                             const char *engine, int loggers)
{
    sh_adopt();
    memset(p, 0, sizeof *p);
    p->nhosts = nhosts;
    ph_pod_paths("pod", p->dir, sizeof p->dir, p->conf, sizeof p->conf, p->region,
                 sizeof p->region);
    char mod[SH_PATH];
    ck_assert(realpath(modules_dir(), mod) != NULL);
    FILE *f = fopen(p->conf, "w");
    ck_assert(f != NULL);
    fprintf(f,
            "region:\n  path: %s\n  kind: shm\n  size: 3GiB\n  hwcc_budget: 2MiB\n"
            "  simulate_noncoherent: true\n"
            "host_defaults:\n  workers: %d\n  loggers: %d\n  socket: %s/h{host}.sock\n"
            "  log_dir: %s/log-{host}\n"
            "hosts:\n",
            p->region, workers, loggers, p->dir, p->dir);
    for (int h = 0; h < nhosts; h++) fprintf(f, "  - {}\n");
    fprintf(f, "modules:\n  - %s/podbank.so\n", mod);
    fprintf(f, "engine:\n  coherence: %s\n%s", coherence, engine);
    ck_assert(fclose(f) == 0);
    char dir[sizeof p->dir];
    memcpy(dir, p->dir, sizeof dir); /* not an argument that aliases the destination */
    for (int h = 0; h < nhosts; h++) {
        snprintf(p->sock[h], sizeof p->sock[h], "%s/h%d.sock", dir, h);
        snprintf(p->log[h], sizeof p->log[h], "%s/server-%d.log", dir, h);
    }
    spawn_hosts(p);
}

static void pod_start(struct pod *p, int nhosts, int workers, const char *coherence,
                      const char *engine)
{
    pod_start_logged(p, nhosts, workers, coherence, engine, 0);
}

static void pod_stop(struct pod *p)
{
    for (int h = 0; h < p->nhosts; h++) kill(p->pid[h], SIGTERM);
    for (int h = 0; h < p->nhosts; h++) ph_reap(p->pid[h], p->log[h], h);
    unlink(p->region);
}

static pod_client *connect_to(const struct pod *p, int h)
{
    char err[256];
    pod_client *c = pod_client_connect(p->sock[h], err, sizeof err);
    ck_assert_msg(c != NULL, "connect to host %d: %s", h, err);
    pod_client_set_timeout(c, 60000);
    return c;
}

/* Call proc(args) and return the reply, failing the test on any error. */
static pod_reply *must(pod_client *c, const char *proc, const pod_value *args, int n)
{
    pod_reply *r = pod_client_call(c, proc, args, n);
    ck_assert_msg(r != NULL, "%s: %s", proc, pod_client_error(c));
    ck_assert_msg(pod_reply_status(r) >= 0, "%s: %s", proc, pod_reply_message(r));
    return r;
}

static int64_t col(pod_reply *r, int row, int c)
{
    const pod_value *v = pod_reply_value(r, row, c);
    ck_assert(v != NULL && v->type == POD_T_I64);
    return v->u.i64;
}

struct client_arg {
    const struct pod *p;
    int host;
    uint64_t deadline_ms;
    uint64_t seed;
    char failure[512];
    long transfers, inserts, deletes, checks, totals;
};

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *client(void *argp)
{
    struct client_arg *a = argp;
    char err[256];
    pod_client *c = pod_client_connect(a->p->sock[a->host], err, sizeof err);
    if (!c) {
        snprintf(a->failure, sizeof a->failure, "connect: %s", err);
        return NULL;
    }
    pod_client_set_timeout(c, 60000);
    int nh = a->p->nhosts;
    uint64_t seq = (uint64_t)a->host << 40;
    while (sh_now_ms() < a->deadline_ms && !a->failure[0]) {
        uint64_t r = next_rand(&a->seed) % 100;
        const char *proc;
        pod_value v[3];
        int n;
        if (r < 55) { /* a transfer whose accounts live on two different hosts */
            int64_t from = (int64_t)(next_rand(&a->seed) % NACCT), to;
            do to = (int64_t)(next_rand(&a->seed) % NACCT);
            while ((to % NPARTS) % nh == (from % NPARTS) % nh);
            v[0] = pod_v_i64(from);
            v[1] = pod_v_i64(to);
            v[2] = pod_v_i64((int64_t)(next_rand(&a->seed) % 7) + 1);
            /* A third read each account before updating it in place, a
             * third update parts of the accounts' tuples. */
            proc = r % 3 == 0 ? "pb.transfer" : r % 3 == 1 ? "pb.transfer_ref" : "pb.transfer_range";
            n = 3;
            a->transfers++;
        } else if (r < 75) {
            v[0] = pod_v_i64((int64_t)(next_rand(&a->seed) % NPARTS));
            v[1] = pod_v_i64((int64_t)(++seq));
            proc = "pb.ins";
            n = 2;
            a->inserts++;
        } else if (r < 90) {
            v[0] = pod_v_i64((int64_t)(next_rand(&a->seed) % NPARTS));
            proc = "pb.del";
            n = 1;
            a->deletes++;
        } else if (r < 96) {
            v[0] = pod_v_i64((int64_t)(next_rand(&a->seed) % NPARTS));
            proc = "pb.check";
            n = 1;
            a->checks++;
        } else { /* every account in one transaction, prefetched 16 at a time */
            v[0] = pod_v_i64(NACCT);
            proc = "pb.total";
            n = 1;
            a->totals++;
        }
        pod_reply *rep = pod_client_call(c, proc, v, n);
        if (!rep) {
            snprintf(a->failure, sizeof a->failure, "%s: %s", proc, pod_client_error(c));
            break;
        }
        if (pod_reply_status(rep) < 0) {
            snprintf(a->failure, sizeof a->failure, "%s on host %d: %s", proc, a->host,
                     pod_reply_message(rep));
        } else if (strcmp(proc, "pb.total") == 0) {
            const pod_value *sum = pod_reply_value(rep, 0, 0), *found = pod_reply_value(rep, 0, 1);
            if (!sum || !found || sum->u.i64 != (int64_t)NACCT * BALANCE || found->u.i64 != NACCT)
                snprintf(a->failure, sizeof a->failure,
                         "pb.total from host %d during the run: %lld in %lld accounts, expected "
                         "%lld in %d", a->host, sum ? (long long)sum->u.i64 : -1,
                         found ? (long long)found->u.i64 : -1, (long long)NACCT * BALANCE, NACCT);
        } else if (strcmp(proc, "pb.check") == 0) {
            pod_value x[4] = {{0}};
            for (int i = 0; i < 4; i++)
                if (pod_reply_value(rep, 0, i)) x[i] = *pod_reply_value(rep, 0, i);
            if (x[0].u.i64 != x[1].u.i64 || x[0].u.i64 != x[2].u.i64 || x[0].u.i64 != x[3].u.i64)
                snprintf(a->failure, sizeof a->failure,
                         "partition %lld from host %d: forward %lld, backward %lld, again %lld, "
                         "counter %lld",
                         (long long)v[0].u.i64, a->host, (long long)x[0].u.i64,
                         (long long)x[1].u.i64, (long long)x[2].u.i64, (long long)x[3].u.i64);
        }
        pod_reply_free(rep);
    }
    pod_client_close(c);
    return NULL;
}

/* The value of row `name` of a [name, value] procedure (sys.pod, sys.config). */
static char *kv_of(pod_client *c, const char *proc, const char *name, char *buf, size_t n)
{
    pod_reply *r = must(c, proc, NULL, 0);
    buf[0] = 0;
    for (int i = 0; i < pod_reply_nrows(r); i++) {
        const pod_value *k = pod_reply_value(r, i, 0), *v = pod_reply_value(r, i, 1);
        if (k && v && k->len == strlen(name) && memcmp(k->u.bytes, name, k->len) == 0)
            snprintf(buf, n, "%.*s", (int)v->len, (const char *)v->u.bytes);
    }
    pod_reply_free(r);
    return buf;
}

static int64_t stat_of(pod_client *c, const char *name)
{
    pod_reply *r = must(c, "sys.pod", NULL, 0);
    int64_t out = -1;
    for (int i = 0; i < pod_reply_nrows(r); i++) {
        const pod_value *k = pod_reply_value(r, i, 0), *v = pod_reply_value(r, i, 1);
        if (!k || !v) continue;
        if (k->len == strlen(name) && memcmp(k->u.bytes, name, k->len) == 0) {
            char buf[32] = {0};
            memcpy(buf, v->u.bytes, v->len < 31 ? v->len : 31);
            out = strtoll(buf, NULL, 10);
        }
    }
    pod_reply_free(r);
    return out;
}

/* A client per host for RUN_MS (client()); fails the test on any failure.
 * Returns the transfers run. */
static long run_clients(const struct pod *p, const char *what)
{
    struct client_arg args[MAX_HOSTS];
    pthread_t th[MAX_HOSTS];
    uint64_t deadline = sh_now_ms() + RUN_MS;
    for (int h = 0; h < p->nhosts; h++) {
        args[h] = (struct client_arg){p, h, deadline, 0x9e3779b97f4a7c15ull * (uint64_t)(h + 1),
                                      {0}, 0, 0, 0, 0, 0};
        ck_assert(pthread_create(&th[h], NULL, client, &args[h]) == 0);
    }
    for (int h = 0; h < p->nhosts; h++) pthread_join(th[h], NULL);
    long transfers = 0;
    for (int h = 0; h < p->nhosts; h++) {
        if (args[h].failure[0]) { /* the servers' logs say why (a crash, a report) */
            for (int s = 0; s < p->nhosts; s++) {
                char *t = sh_slurp(p->log[s]);
                size_t n = strlen(t);
                fprintf(stderr, "--- host %d's log (end) ---\n%s\n", s, t + (n > 6000 ? n - 6000 : 0));
                free(t);
            }
        }
        ck_assert_msg(!args[h].failure[0], "%s (%s, %d hosts)", args[h].failure, what, p->nhosts);
        transfers += args[h].transfers;
    }
    return transfers;
}

/* engine: "key: value" of one engine setting to run with, or NULL; every
 * host must report it in sys.config. */
static void run_pod_with(int nhosts, int workers, const char *coherence, const char *engine)
{
    struct pod p;
    char extra[160] = LOW_THRESHOLD, key[64] = "", want[64] = "";
    if (engine) {
        snprintf(extra, sizeof extra, LOW_THRESHOLD "  %s\n", engine);
        ck_assert(sscanf(engine, "%63[^:]: %63s", key, want) == 2);
    }
    pod_start(&p, nhosts, workers, coherence, extra);
    pod_client *c[MAX_HOSTS];
    for (int h = 0; h < nhosts; h++) {
        c[h] = connect_to(&p, h);
        if (engine) {
            char name[80], got[64];
            snprintf(name, sizeof name, "engine.%s", key);
            ck_assert_msg(strcmp(kv_of(c[h], "sys.config", name, got, sizeof got), want) == 0,
                          "host %d: sys.config %s is '%s', expected '%s'", h, name, got, want);
        }
        pod_value v[3] = {pod_v_i64(h), pod_v_i64(nhosts), pod_v_i64(NACCT)};
        pod_reply_free(must(c[h], "pb.load", v, 3));
    }
    long transfers = run_clients(&p, coherence);
    /* The total, read in one transaction from every host. */
    for (int h = 0; h < nhosts; h++) {
        pod_value v = pod_v_i64(NACCT);
        pod_reply *r = must(c[h], "pb.total", &v, 1);
        ck_assert_msg(col(r, 0, 1) == NACCT, "host %d sees %lld accounts", h,
                      (long long)col(r, 0, 1));
        ck_assert_msg(col(r, 0, 0) == (int64_t)NACCT * BALANCE,
                      "host %d: total %lld, expected %lld (%s)", h, (long long)col(r, 0, 0),
                      (long long)NACCT * BALANCE, coherence);
        pod_reply_free(r);
    }
    for (int part = 0; part < NPARTS; part++) {
        pod_value v = pod_v_i64(part);
        pod_reply *r = must(c[part % nhosts], "pb.check", &v, 1);
        ck_assert_msg(col(r, 0, 0) == col(r, 0, 3), "partition %d: %lld events, counter %lld",
                      part, (long long)col(r, 0, 0), (long long)col(r, 0, 3));
        pod_reply_free(r);
    }
    /* Tuples really moved: in on request, and out under the threshold. */
    int64_t in = 0, out = 0, batched = 0;
    for (int h = 0; h < nhosts; h++) {
        in += stat_of(c[h], "moved_in");
        out += stat_of(c[h], "moved_out");
        batched += stat_of(c[h], "moved_batched");
    }
    ck_assert_msg(in > 0 && out > 0, "moved in %lld, out %lld", (long long)in, (long long)out);
    /* pb.total's prefetches asked for several accounts of a partition at once. */
    ck_assert_msg(batched > 0 && batched <= in, "moved in %lld, of them batched %lld",
                  (long long)in, (long long)batched);
    ck_assert_msg(transfers > 10, "only %ld transfers ran", transfers);
    /* The reply waits' histogram agrees with their count. */
    for (int h = 0; h < nhosts; h++) {
        int64_t waits = stat_of(c[h], "waits"), p50 = stat_of(c[h], "wait_us_p50"),
                p99 = stat_of(c[h], "wait_us_p99"), over = stat_of(c[h], "waits_over_128us");
        ck_assert_int_ge(waits, 0);
        ck_assert_msg(waits ? p50 >= 2 && p50 <= p99 : p50 == 0 && p99 == 0,
                      "host %d: %lld waits, p50 %lld us, p99 %lld us", h, (long long)waits,
                      (long long)p50, (long long)p99);
        ck_assert_msg(over >= 0 && over <= waits, "host %d: %lld of %lld waits over 128 us", h,
                      (long long)over, (long long)waits);
    }
    fprintf(stderr, "  pod %d hosts x %d workers, %s%s%s: %ld transfers, moved in %lld (%lld "
            "batched), out %lld\n", nhosts, workers, coherence, engine ? ", " : "",
            engine ? engine : "", transfers, (long long)in, (long long)batched, (long long)out);
    for (int h = 0; h < nhosts; h++) pod_client_close(c[h]);
    pod_stop(&p);
}

static void run_pod(int nhosts, int workers, const char *coherence)
{
    run_pod_with(nhosts, workers, coherence, NULL);
}

static const char *const variants[] = {"full", "non-temporal", "no-shared-reader", "hwcc-only"};

START_TEST(two_hosts)
{
    run_pod(2, 1, variants[_i]);
}
END_TEST

START_TEST(four_hosts)
{
    run_pod(4, 1, variants[_i]);
}
END_TEST

/* Several workers per host: the owner's handlers, local transactions and
 * move-outs race on the same rows and has-next-key bits. */
START_TEST(two_workers)
{
    run_pod(2, 2, "full");
}
END_TEST

/* A remote scan over more keys than an operation may restart (OP_RESTARTS,
 * 1000): its bound counts restarts, not the keys it visits. Partition 1's
 * events are inserted on its owner, host 1; host 0 scans them (forward,
 * backward, forward) through CXL memory, moving the range in as it goes. */
START_TEST(long_remote_scan)
{
    struct pod p;
    pod_start(&p, 2, 1, "full", LOW_THRESHOLD);
    pod_client *c[2] = {connect_to(&p, 0), connect_to(&p, 1)};
    for (int h = 0; h < 2; h++) {
        pod_value v[3] = {pod_v_i64(h), pod_v_i64(2), pod_v_i64(NACCT)};
        pod_reply_free(must(c[h], "pb.load", v, 3));
    }
    enum { EVENTS = 1500 };
    for (int i = 0; i < EVENTS; i++) {
        pod_value v[2] = {pod_v_i64(1), pod_v_i64(i + 1)};
        pod_reply_free(must(c[1], "pb.ins", v, 2));
    }
    pod_value part = pod_v_i64(1);
    pod_reply *r = must(c[0], "pb.check", &part, 1);
    for (int k = 0; k < 4; k++)
        ck_assert_msg(col(r, 0, k) == EVENTS, "host 0's scan of partition 1: column %d is %lld, "
                      "expected %d", k, (long long)col(r, 0, k), EVENTS);
    pod_reply_free(r);
    ck_assert_msg(stat_of(c[0], "remote_reads") > 0, "host 0 read nothing through CXL memory");
    for (int h = 0; h < 2; h++) pod_client_close(c[h]);
    pod_stop(&p);
}
END_TEST

/* Below the move-out threshold, tuples no other host uses any more go back
 * to DRAM at engine.moveback_rate (docs/pod.md); at rate 0 they stay in CXL
 * memory. Host 0 reads every account once, which moves host 1's in. */
START_TEST(cold_tuples_move_back)
{
    static const char *const engines[] = {"  moveout_threshold: 1\n  moveback_rate: 0\n",
                                          "  moveout_threshold: 1\n  moveback_rate: 1000000\n"};
    struct pod p;
    pod_start(&p, 2, 1, "full", engines[_i]);
    pod_client *c[2] = {connect_to(&p, 0), connect_to(&p, 1)};
    for (int h = 0; h < 2; h++) {
        pod_value v[3] = {pod_v_i64(h), pod_v_i64(2), pod_v_i64(NACCT)};
        pod_reply_free(must(c[h], "pb.load", v, 3));
    }
    pod_value n = pod_v_i64(NACCT);
    pod_reply *r = must(c[0], "pb.total", &n, 1);
    ck_assert_int_eq(col(r, 0, 0), (int64_t)NACCT * BALANCE);
    pod_reply_free(r);
    int64_t in = stat_of(c[1], "moved_in");
    ck_assert_msg(in > 0, "host 0's reads moved nothing of host 1's into CXL memory");
    uint64_t deadline = sh_now_ms() + (_i ? 30000 : 1000);
    while (sh_now_ms() < deadline && stat_of(c[1], "resident") > 0) sh_sleep_ms(20);
    int64_t resident = stat_of(c[1], "resident"), out = stat_of(c[1], "moved_out");
    if (_i == 0)
        ck_assert_msg(resident == in && out == 0,
                      "rate 0: %lld of %lld tuples left CXL memory below the threshold",
                      (long long)(in - resident), (long long)in);
    else
        ck_assert_msg(resident == 0 && out == in,
                      "rate 1000000: %lld of %lld tuples still in CXL memory after 30 s "
                      "(%lld moved out)", (long long)resident, (long long)in, (long long)out);
    /* Back in DRAM, the accounts still add up, read from both hosts. */
    for (int h = 0; h < 2; h++) {
        r = must(c[h], "pb.total", &n, 1);
        ck_assert_int_eq(col(r, 0, 0), (int64_t)NACCT * BALANCE);
        pod_reply_free(r);
    }
    for (int h = 0; h < 2; h++) pod_client_close(c[h]);
    pod_stop(&p);
}
END_TEST

/* pb.digest from host h: {balances, update counts, hash, accounts}. */
static void digest_of(pod_client *c, int64_t out[4])
{
    pod_value n = pod_v_i64(NACCT);
    pod_reply *r = must(c, "pb.digest", &n, 1);
    for (int i = 0; i < 4; i++) out[i] = col(r, 0, i);
    pod_reply_free(r);
}

/* The workload of the pod test with logging on, then SIGKILL and a restart:
 * every account comes back byte for byte. Updates of part of another host's
 * tuple are logged by the writer as PATCH records made from the version it
 * read, and recovery routes them to the owner and applies them on the
 * versions the owner's log (or another host's) brought back. */
START_TEST(range_writes_recovered)
{
    struct pod p;
    pod_start_logged(&p, 2, 1, "full", LOW_THRESHOLD, 1);
    pod_client *c[2] = {connect_to(&p, 0), connect_to(&p, 1)};
    for (int h = 0; h < 2; h++) {
        pod_value v[3] = {pod_v_i64(h), pod_v_i64(2), pod_v_i64(NACCT)};
        pod_reply_free(must(c[h], "pb.load", v, 3));
    }
    long transfers = run_clients(&p, "logged");
    /* Then each account's last write: a range transfer run by the host that
     * does not own it (accounts i and i + 2 share an owner: even ones host
     * 0, odd ones host 1), so the records that decide the recovered state
     * are the other host's PATCHes (from's balance, to's count and balance). */
    for (int i = 0; i + 2 < NACCT; i += 4)
        for (int k = 0; k < 2; k++) {
            pod_value v[3] = {pod_v_i64(i + k), pod_v_i64(i + k + 2), pod_v_i64(1)};
            pod_reply_free(must(c[1 - k], "pb.transfer_range", v, 3));
        }
    int64_t before[4], after[4];
    digest_of(c[0], before);
    ck_assert_int_eq(before[0], (int64_t)NACCT * BALANCE);
    ck_assert_int_eq(before[3], NACCT);
    ck_assert_msg(stat_of(c[0], "remote_writes") > 0 && stat_of(c[1], "remote_writes") > 0,
                  "no host wrote the other's tuples");
    for (int h = 0; h < 2; h++) pod_client_close(c[h]);
    /* Every call was answered, so all of it is durable: a crash loses nothing. */
    for (int h = 0; h < 2; h++) kill(p.pid[h], SIGKILL);
    for (int h = 0; h < 2; h++) ck_assert(sh_wait_exit(p.pid[h], 10000) != -1);
    /* What the killed servers logged (on a loaded machine host 1 may see
     * host 0 die, an error, before its own kill) is kept aside: the
     * restarted servers' logs must be clean on their own. */
    for (int h = 0; h < 2; h++) {
        char killed[sizeof p.log[h] + 8];
        snprintf(killed, sizeof killed, "%s.killed", p.log[h]);
        ck_assert_int_eq(rename(p.log[h], killed), 0);
    }
    unlink(p.region);
    spawn_hosts(&p);
    for (int h = 0; h < 2; h++) {
        c[h] = connect_to(&p, h);
        digest_of(c[h], after);
        ck_assert_msg(memcmp(before, after, sizeof before) == 0,
                      "host %d after recovery: balances %lld, updates %lld, hash %llx, accounts "
                      "%lld; before the crash %lld, %lld, %llx, %lld", h, (long long)after[0],
                      (long long)after[1], (unsigned long long)after[2], (long long)after[3],
                      (long long)before[0], (long long)before[1], (unsigned long long)before[2],
                      (long long)before[3]);
        char buf[32];
        ck_assert_str_eq(kv_of(c[h], "sys.log", "recovery.patches_lost", buf, sizeof buf), "0");
        ck_assert_msg(atoll(kv_of(c[h], "sys.log", "recovery.records_applied", buf, sizeof buf)) > 0,
                      "host %d applied no log records", h);
    }
    for (int part = 0; part < NPARTS; part++) {
        pod_value v = pod_v_i64(part);
        pod_reply *r = must(c[part % 2], "pb.check", &v, 1);
        ck_assert_msg(col(r, 0, 0) == col(r, 0, 3), "partition %d after recovery: %lld events, "
                      "counter %lld", part, (long long)col(r, 0, 0), (long long)col(r, 0, 3));
        pod_reply_free(r);
    }
    fprintf(stderr, "  pod 2 hosts, logged: %ld transfers, %lld updates recovered exactly\n",
            transfers, (long long)after[1]);
    for (int h = 0; h < 2; h++) pod_client_close(c[h]);
    pod_stop(&p);
}
END_TEST

/* The ablation knobs (docs/pod.md): each setting keeps the bank exact and
 * the scans consistent. */
static const char *const ablations[] = {"eviction: random", "shortcut_pointers: false",
                                        "dirty_tracking: false"};

START_TEST(ablation)
{
    run_pod_with(2, 2, "full", ablations[_i]);
}
END_TEST

/* Quantiles of the reply waits' histogram (pod_wait_quantile_us). */
START_TEST(wait_quantiles)
{
    struct pod_host_stats st = {0};
    ck_assert_uint_eq(pod_wait_quantile_us(&st, 0.5), 0);
    st.wait_hist[2] = 98; /* [4, 8) us */
    st.wait_hist[9] = 1;  /* [512, 1024) us */
    st.wait_hist[POD_WAIT_BUCKETS - 1] = 1;
    ck_assert_uint_eq(pod_wait_quantile_us(&st, 0.5), 8);
    ck_assert_uint_eq(pod_wait_quantile_us(&st, 0.98), 8);
    ck_assert_uint_eq(pod_wait_quantile_us(&st, 0.99), 1024);
    ck_assert_uint_eq(pod_wait_quantile_us(&st, 1.0), 2ull << (POD_WAIT_BUCKETS - 1));
    ck_assert_uint_eq(pod_waits_at_least(&st, 128), 2);
    ck_assert_uint_eq(pod_waits_at_least(&st, 4), 100);
    ck_assert_uint_eq(pod_waits_at_least(&st, 1024), 1);
}
END_TEST

int main(void)
{
    sh_init();
    Suite *s = suite_create("pod_mp");
    TCase *tc = tu_tcase(s, "pod", 180);
    tcase_add_loop_test(tc, two_hosts, 0, 4);
    tcase_add_loop_test(tc, four_hosts, 0, 4);
    TCase *ts = tu_tcase(s, "stats", 0);
    tcase_add_test(ts, wait_quantiles);
    TCase *tw = tu_tcase(s, "workers", 180);
    tcase_add_test(tw, two_workers);
    tcase_add_test(tw, long_remote_scan);
    tcase_add_loop_test(tw, cold_tuples_move_back, 0, 2);
    tcase_add_loop_test(tw, ablation, 0, 3);
    tcase_add_test(tw, range_writes_recovered);
    return tu_run(s);
}
