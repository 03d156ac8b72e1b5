/* A host's log directory removed under a running 2-host pod of real
 * poddb-server processes (docs/durability.md, "The log directory watched"
 * and "An empty log directory"):
 *   - removed_while_writing: puts are acknowledged through both hosts; then
 *     host 1's log directory is removed (rm -rf) while the servers run. No
 *     put is acknowledged any more, through either host (the clients time
 *     out), host 1's log says what happened, and sys.stats shows
 *     log.dir_lost on host 1 and log.dir_lost_host 1 on both.
 *   - empty_restart_refused: the same, then SIGKILL of both servers and a
 *     restart: host 1 refuses its empty log directory, naming host 0's
 *     durable-epoch record as the evidence; started with --allow-empty-log
 *     (before host 0) it waits for the pod, comes up, says so, and every
 *     put acknowledged through host 0 is there.
 *   - rejoin_refused: the same removal, but only host 1 is killed; its
 *     restart is refused on the region's evidence, and host 0 still
 *     acknowledges nothing.
 *   - empty_starts_allowed: a host that never logged may start with an
 *     empty directory, and a pod whose every log directory was removed
 *     with its region starts afresh.
 *   - removed_answers_not_durable: with engine.durable_wait_ms set, the puts
 *     after the removal are not left hanging: through either host they are
 *     answered POD_E_NOT_DURABLE within a bounded time, with a message
 *     naming host 1's lost log directory and saying that the outcome is
 *     unknown.
 * Every wait is bounded generously (a loaded 2-core machine): what must not
 * happen is checked with a client timeout of several seconds. */
#include <check.h>
#include <ftw.h>
#include <inttypes.h>

#include "helpers/pod_harness.h"

#define NHOSTS 2
#define NKEYS 120          /* puts per host before the removal */
#define QUIET_MS 4000      /* a put that must not be acknowledged waits this long */
#define UP_MS 60000

struct pod {
    long log_at[NHOSTS]; /* size of each server's output before its last start */
    char dir[SH_PATH - 64];
    char conf[SH_PATH];
    char region[SH_PATH];
    char sock[NHOSTS][SH_PATH];
    char log[NHOSTS][SH_PATH];
    char logdir[NHOSTS][SH_PATH];
    pid_t pid[NHOSTS];
};

/* More lines of the engine section of the next pods (or NULL). */
static const char *engine_extra;

static void new_pod(struct pod *p, const char *name)
{
    memset(p, 0, sizeof *p);
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
            "tables:\n  - name: kv\n    key_size: 16\n    value_size: 32\n    partitions: 4\n"
            "engine:\n  epoch_ms: 10\n%s",
            p->region, p->dir, p->dir, engine_extra ? engine_extra : "");
    ck_assert_int_eq(fclose(f), 0);
}

static long log_size(const struct pod *p, int h)
{
    struct stat st;
    return stat(p->log[h], &st) == 0 ? (long)st.st_size : 0;
}

/* What host h printed since its last start (free it). */
static char *output(const struct pod *p, int h)
{
    char *t = sh_slurp(p->log[h]);
    long n = (long)strlen(t), at = p->log_at[h] < n ? p->log_at[h] : n;
    memmove(t, t + at, (size_t)(n - at) + 1);
    return t;
}

static void spawn(struct pod *p, int h, const char *arg)
{
    p->log_at[h] = log_size(p, h);
    sh_spawn_arg = arg;
    p->pid[h] = sh_spawn_host(p->conf, h, p->log[h]);
    sh_spawn_arg = NULL;
    ck_assert_int_gt(p->pid[h], 0);
}

static void start_pod(struct pod *p)
{
    for (int h = 0; h < NHOSTS; h++) spawn(p, h, NULL);
    for (int h = 0; h < NHOSTS; h++) ph_wait_up(p->pid[h], p->sock[h], p->log[h], h);
}

/* Host 0 has a log history and host 1 none: host 0 first, and host 1 once
 * host 0 is recovering (a host without history that finds nobody
 * recovering serves at once, and one with history then refuses to join
 * it), host 1 with arg (may be NULL). */
static void start_pod_host0_first(struct pod *p, const char *arg)
{
    spawn(p, 0, NULL);
    uint64_t end = sh_now_ms() + UP_MS;
    for (;;) {
        char *t = output(p, 0);
        bool waiting = strstr(t, "waiting for host 1") != NULL;
        free(t);
        if (waiting) break;
        ck_assert_msg(sh_now_ms() < end, "host 0 did not start recovering:\n%s",
                      sh_slurp(p->log[0]));
        sh_sleep_ms(50);
    }
    spawn(p, 1, arg);
    for (int h = 0; h < NHOSTS; h++) ph_wait_up(p->pid[h], p->sock[h], p->log[h], h);
}

/* SIGTERM to every host: each stops cleanly, and its output since its
 * last start has no sanitizer report or error line. */
static void stop_pod(struct pod *p)
{
    for (int h = 0; h < NHOSTS; h++) kill(p->pid[h], SIGTERM);
    for (int h = 0; h < NHOSTS; h++) {
        int st = sh_wait_exit(p->pid[h], 30000);
        if (st == -1) {
            kill(p->pid[h], SIGKILL);
            sh_wait_exit(p->pid[h], 5000);
        }
        p->pid[h] = 0;
        char *t = output(p, h);
        static const char *const marks[] = {"ERROR: AddressSanitizer", "runtime error", "error:"};
        for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
            ck_assert_msg(!strstr(t, marks[i]), "host %d's log has \"%s\":\n%s", h, marks[i], t);
        ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "host %d did not stop cleanly (status %#x):\n%s", h, st, t);
        free(t);
    }
}

static void kill_host(struct pod *p, int h)
{
    if (p->pid[h] <= 0) return;
    kill(p->pid[h], SIGKILL);
    sh_wait_exit(p->pid[h], 20000);
    p->pid[h] = 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(path) == 0 ? 0 : -1;
}

/* rm -rf dir */
static void remove_dir(const char *dir)
{
    ck_assert_msg(nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0, "cannot remove %s", dir);
}

static pod_client *connect_to(const char *sock, int timeout_ms)
{
    char err[256];
    pod_client *c = pod_client_connect(sock, err, sizeof err);
    ck_assert_msg(c != NULL, "connect %s: %s", sock, err);
    pod_client_set_timeout(c, timeout_ms);
    return c;
}

static void key_of(char *k, size_t n, int via, int i) { snprintf(k, n, "k%d-%d", via, i); }

/* kv.put of key (via, i) through *c: POD_OK, another status, or -1000 when
 * no reply came (timeout: the connection is closed, *c NULL). */
static int put(pod_client **c, int via, int i)
{
    char k[32], v[32];
    key_of(k, sizeof k, via, i);
    snprintf(v, sizeof v, "v%d", i);
    pod_value a[3] = {pod_v_str("kv"), pod_v_str(k), pod_v_str(v)};
    pod_reply *r = pod_client_call(*c, "kv.put", a, 3);
    if (!r) {
        pod_client_close(*c);
        *c = NULL;
        return -1000;
    }
    int st = pod_reply_status(r);
    pod_reply_free(r);
    return st;
}

/* Key (via, i) is there (checked through host h). */
static bool present(const struct pod *p, int h, int via, int i)
{
    char k[32], v[32];
    key_of(k, sizeof k, via, i);
    snprintf(v, sizeof v, "v%d", i);
    pod_client *c = connect_to(p->sock[h], 30000);
    pod_value a[2] = {pod_v_str("kv"), pod_v_str(k)};
    pod_reply *r = pod_client_call(c, "kv.get", a, 2);
    ck_assert_msg(r != NULL, "kv.get %s on host %d: %s", k, h, pod_client_error(c));
    const pod_value *val = pod_reply_value(r, 0, 0);
    bool yes = pod_reply_status(r) == POD_OK && val && val->len == strlen(v) &&
               memcmp(val->u.bytes, v, val->len) == 0;
    pod_reply_free(r);
    pod_client_close(c);
    return yes;
}

/* NKEYS puts through each host, every one acknowledged. */
static void write_keys(const struct pod *p)
{
    for (int h = 0; h < NHOSTS; h++) {
        pod_client *c = connect_to(p->sock[h], 30000);
        for (int i = 0; i < NKEYS; i++) {
            int st = put(&c, h, i);
            ck_assert_msg(st == POD_OK, "put %d through host %d: status %d", i, h, st);
        }
        pod_client_close(c);
    }
}

/* A row [name, i64] of sys.stats on host h (-1000: not reported). */
static long long stat_of(const struct pod *p, int h, const char *name)
{
    pod_client *c = connect_to(p->sock[h], 30000);
    pod_reply *r = pod_client_call(c, "sys.stats", NULL, 0);
    ck_assert_msg(r && pod_reply_status(r) == POD_OK, "sys.stats on host %d: %s", h,
                  r ? pod_reply_message(r) : pod_client_error(c));
    long long v = -1000;
    for (int i = 1; i < pod_reply_nrows(r); i++) {
        const pod_value *k = pod_reply_value(r, i, 0), *val = pod_reply_value(r, i, 1);
        if (k && val && k->type == POD_T_BYTES && k->len == strlen(name) &&
            memcmp(k->u.bytes, name, k->len) == 0 && val->type == POD_T_I64)
            v = val->u.i64;
    }
    pod_reply_free(r);
    pod_client_close(c);
    return v;
}

/* Wait until host h's log has text (the test fails after timeout_ms). */
static void wait_log(const struct pod *p, int h, const char *text, int timeout_ms)
{
    uint64_t end = sh_now_ms() + (uint64_t)timeout_ms;
    while (!sh_file_contains(p->log[h], text)) {
        ck_assert_msg(sh_now_ms() < end, "host %d's log never said \"%s\":\n%s", h, text,
                      sh_slurp(p->log[h]));
        sh_sleep_ms(50);
    }
}

/* Host h's server exits by itself within timeout_ms; its exit status. */
static int wait_exit(struct pod *p, int h, int timeout_ms)
{
    int st = sh_wait_exit(p->pid[h], timeout_ms);
    ck_assert_msg(st != -1, "host %d did not exit:\n%s", h, sh_slurp(p->log[h]));
    p->pid[h] = 0;
    return st;
}

/* Start a pod, write through both hosts, remove host 1's log directory, and
 * check that nothing is acknowledged any more and that the servers say why. */
static void write_then_remove(struct pod *p)
{
    start_pod(p);
    write_keys(p);
    remove_dir(p->logdir[1]);
    fprintf(stderr, "removed %s with %d puts acknowledged through each host\n", p->logdir[1],
            NKEYS);
    /* Host 1 first: its logger finds the directory gone after the sync
     * that would make the put durable. Then host 0: the pod's durable epoch
     * is frozen, so its replies wait too. */
    for (int h = NHOSTS; h-- > 0;) {
        pod_client *c = connect_to(p->sock[h], QUIET_MS);
        int st = put(&c, h, NKEYS);
        ck_assert_msg(st != POD_OK, "a put through host %d was acknowledged after host 1's log "
                      "directory was removed:\n%s", h, sh_slurp(p->log[1]));
        ck_assert_msg(st == -1000, "a put through host %d failed with status %d instead of "
                      "waiting", h, st);
        pod_client_close(c);
    }
    wait_log(p, 1, "was lost while the server ran", 30000);
    ck_assert_int_eq(stat_of(p, 1, "log.dir_lost"), 1);
    for (int h = 0; h < NHOSTS; h++) {
        ck_assert_int_eq(stat_of(p, h, "log.dir_lost_host"), 1);
        if (h == 0) ck_assert_int_eq(stat_of(p, h, "log.dir_lost"), 0);
    }
    /* Still nothing acknowledged, seconds later. */
    pod_client *c = connect_to(p->sock[1], QUIET_MS);
    ck_assert_int_eq(put(&c, 1, NKEYS + 1), -1000);
    pod_client_close(c);
    wait_log(p, 0, "the log directory of host 1 was lost", 30000);
}

START_TEST(removed_while_writing)
{
    struct pod p;
    new_pod(&p, "removed");
    write_then_remove(&p);
    for (int h = 0; h < NHOSTS; h++) kill_host(&p, h);
    unlink(p.region);
}
END_TEST

START_TEST(empty_restart_refused)
{
    struct pod p;
    new_pod(&p, "restart");
    write_then_remove(&p);
    for (int h = 0; h < NHOSTS; h++) kill_host(&p, h);
    /* Restart: host 0 recovers and waits for host 1; host 1 refuses. */
    spawn(&p, 0, NULL);
    spawn(&p, 1, NULL);
    int st = wait_exit(&p, 1, UP_MS);
    char *t = output(&p, 1);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0 &&
                      strstr(t, "refuses to start with an empty log directory") &&
                      strstr(t, "host 0's record, lists host 1 among the hosts that logged") &&
                      strstr(t, "--allow-empty-log"),
                  "host 1 did not refuse its empty log directory (status %#x):\n%s", st, t);
    free(t);
    ck_assert_msg(sh_alive(&(struct sh_server){.pid = p.pid[0]}),
                  "host 0 did not wait for host 1:\n%s", sh_slurp(p.log[0]));
    kill_host(&p, 0);
    /* Going on without host 1's log. Host 1 first: started so, it waits
     * for the pod to recover with it (a host new to the pod would serve at
     * once, and host 0, with history, would then refuse to join it). */
    spawn(&p, 1, "--allow-empty-log");
    sh_sleep_ms(500);
    spawn(&p, 0, NULL);
    for (int h = 0; h < NHOSTS; h++) ph_wait_up(p.pid[h], p.sock[h], p.log[h], h);
    t = output(&p, 1);
    ck_assert_msg(strstr(t, "--allow-empty-log: host 1 starts with an empty log directory"),
                  "host 1 did not say what it lost:\n%s", t);
    free(t);
    int lost = 0;
    for (int i = 0; i < NKEYS; i++) {
        ck_assert_msg(present(&p, 0, 0, i), "put %d, acknowledged through host 0, is missing", i);
        lost += !present(&p, 1, 1, i);
    }
    fprintf(stderr, "with --allow-empty-log: every put through host 0 is there; %d of %d "
            "through host 1 went with its log\n", lost, NKEYS);
    /* The pod acknowledges again. */
    pod_client *c = connect_to(p.sock[1], 30000);
    ck_assert_int_eq(put(&c, 1, NKEYS + 2), POD_OK);
    pod_client_close(c);
    stop_pod(&p);
    unlink(p.region);
}
END_TEST

START_TEST(rejoin_refused)
{
    struct pod p;
    new_pod(&p, "rejoin");
    write_then_remove(&p);
    kill_host(&p, 1);
    spawn(&p, 1, NULL);
    int st = wait_exit(&p, 1, UP_MS);
    char *t = output(&p, 1);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0 &&
                      strstr(t, "refuses to start with an empty log directory") &&
                      strstr(t, "the region records that this host's log directory was lost"),
                  "host 1 did not refuse to rejoin (status %#x):\n%s", st, t);
    free(t);
    /* Host 1 is gone, but what it logged since its directory went is
     * nowhere: host 0 still acknowledges nothing. */
    pod_client *c = connect_to(p.sock[0], QUIET_MS);
    ck_assert_int_eq(put(&c, 0, NKEYS + 3), -1000);
    pod_client_close(c);
    kill_host(&p, 0);
    unlink(p.region);
}
END_TEST

START_TEST(empty_starts_allowed)
{
    struct pod p;
    new_pod(&p, "fresh");
    start_pod(&p);
    /* Only host 0 takes calls (host 1 runs the other hosts' share of them
     * but logs nothing): host 1 never logged. */
    pod_client *c = connect_to(p.sock[0], 30000);
    for (int i = 0; i < NKEYS; i++) ck_assert_int_eq(put(&c, 0, i), POD_OK);
    pod_client_close(c);
    for (int h = 0; h < NHOSTS; h++) kill_host(&p, h);
    remove_dir(p.logdir[1]);
    start_pod_host0_first(&p, NULL);
    for (int i = 0; i < NKEYS; i++)
        ck_assert_msg(present(&p, 1, 0, i), "put %d through host 0 is missing", i);
    ck_assert_msg(!sh_file_contains(p.log[1], "allow-empty-log"), "host 1 spoke of its empty "
                  "log:\n%s", sh_slurp(p.log[1]));
    /* Every log directory and the region removed on purpose: a new pod. */
    stop_pod(&p);
    unlink(p.region);
    for (int h = 0; h < NHOSTS; h++) remove_dir(p.logdir[h]);
    start_pod(&p);
    ck_assert_msg(!present(&p, 0, 0, 0), "a removed pod's row is back");
    c = connect_to(p.sock[1], 30000);
    ck_assert_int_eq(put(&c, 1, 0), POD_OK);
    pod_client_close(c);
    stop_pod(&p);
    unlink(p.region);
}
END_TEST

START_TEST(removed_answers_not_durable)
{
    struct pod p;
    engine_extra = "  durable_wait_ms: 300\n";
    new_pod(&p, "notdurable");
    engine_extra = NULL;
    start_pod(&p);
    write_keys(&p);
    remove_dir(p.logdir[1]);
    wait_log(&p, 1, "was lost while the server ran", 30000);
    for (int h = NHOSTS; h-- > 0;) {
        pod_client *c = connect_to(p.sock[h], 30000);
        char k[32];
        key_of(k, sizeof k, h, NKEYS);
        pod_value a[3] = {pod_v_str("kv"), pod_v_str(k), pod_v_str("after")};
        uint64_t t0 = sh_now_ms();
        pod_reply *r = pod_client_call(c, "kv.put", a, 3);
        uint64_t took = sh_now_ms() - t0;
        ck_assert_msg(r != NULL, "a put through host %d got no reply in 30 s: %s", h,
                      pod_client_error(c));
        const char *m = pod_reply_message(r);
        fprintf(stderr, "a put through host %d after the removal: status %d after %llu ms: %s\n",
                h, pod_reply_status(r), (unsigned long long)took, m);
        ck_assert_msg(pod_reply_status(r) == POD_E_NOT_DURABLE, "host %d: status %d: %s", h,
                      pod_reply_status(r), m);
        ck_assert_msg(strstr(m, "log directory of host 1") && strstr(m, "was lost") &&
                          strstr(m, "outcome is unknown"),
                      "host %d: the message does not say why and what it means: %s", h, m);
        ck_assert_uint_ge(took, 250);
        pod_reply_free(r);
        pod_client_close(c);
    }
    for (int h = 0; h < NHOSTS; h++) kill_host(&p, h);
    unlink(p.region);
}
END_TEST

static Suite *logdir_suite(void)
{
    Suite *s = suite_create("logdir");
    TCase *tc = tcase_create("removed");
    tcase_add_test(tc, removed_while_writing);
    tcase_add_test(tc, empty_restart_refused);
    tcase_add_test(tc, rejoin_refused);
    tcase_add_test(tc, empty_starts_allowed);
    tcase_add_test(tc, removed_answers_not_durable);
    tcase_set_timeout(tc, 300);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    sh_init();
    SRunner *sr = srunner_create(logdir_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
