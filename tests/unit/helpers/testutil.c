#include "testutil.h"

#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/db.h"
#include "engine/worker.h"
#include "txn/cc.h"
#include "util/clock.h"

const enum pod_coherence tu_variants[TU_NVARIANTS] = {
    POD_COH_FULL, POD_COH_NON_TEMPORAL, POD_COH_NO_SHARED_READER, POD_COH_HWCC_ONLY};

#define MAX_CLEANUP 64
static char cleanup_paths[MAX_CLEANUP][POD_PATH_MAX];
static int ncleanup;
static pid_t cleanup_owner;

static void remove_paths(void)
{
    /* Only the process that made a name removes it, not its forked children. */
    if (getpid() != cleanup_owner) return;
    for (int i = 0; i < ncleanup; i++) unlink(cleanup_paths[i]);
}

/* tests/run-tests sets PODDB_TEST_TAG and removes /dev/shm/poddb-test-TAG-*
 * after the run, whatever state a test died in. */
static const char *run_tag(void)
{
    const char *t = getenv("PODDB_TEST_TAG");
    return t && *t ? t : "manual";
}

void tu_unique_shm_path(char *buf, int len, const char *tag)
{
    static int counter;
    snprintf(buf, (size_t)len, "/dev/shm/poddb-test-%s-%d-%d-%s", run_tag(), (int)getpid(),
             counter++, tag);
    if (cleanup_owner != getpid()) {
        cleanup_owner = getpid();
        ncleanup = 0;
        atexit(remove_paths);
    }
    if (ncleanup < MAX_CLEANUP) snprintf(cleanup_paths[ncleanup++], POD_PATH_MAX, "%s", buf);
}

void tu_make_config(struct pod_config *c, int nhosts, uint64_t size, uint64_t hwcc_budget,
                    bool simulate_noncoherent)
{
    memset(c, 0, sizeof *c);
    snprintf(c->source, sizeof c->source, "test-config");
    tu_unique_shm_path(c->region.path, sizeof c->region.path, "region");
    c->region.kind = POD_REGION_SHM;
    c->region.size = size;
    c->region.hwcc_budget = hwcc_budget;
    c->region.numa_node = -1;
    c->region.simulate_noncoherent = simulate_noncoherent;
    c->nhosts = nhosts;
    for (int h = 0; h < nhosts; h++) {
        c->hosts[h].workers = 1;
        c->hosts[h].loggers = 1;
        snprintf(c->hosts[h].socket_path, POD_PATH_MAX, "/tmp/poddb-test-%s-%d-%d.sock",
                 run_tag(), (int)getpid(), h);
        snprintf(c->hosts[h].log_dir, POD_PATH_MAX, "/tmp/poddb-test-%s-%d-log-%d", run_tag(),
                 (int)getpid(), h);
    }
    c->engine.epoch_ms = 10;
    c->engine.moveout_threshold = 0.9;
    c->engine.coherence = POD_COH_FULL;
    c->engine.phantom_protection = true;
}

bool tu_wait_u64(const uint64_t *word, uint64_t want, int timeout_ms)
{
    struct timespec nap = {0, 100 * 1000};
    for (long spent_us = 0; spent_us < (long)timeout_ms * 1000; spent_us += 100) {
        if (__atomic_load_n(word, __ATOMIC_ACQUIRE) == want) return true;
        nanosleep(&nap, NULL);
    }
    return __atomic_load_n(word, __ATOMIC_ACQUIRE) == want;
}

int tu_fork(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) _exit(fn(arg));
    return (int)pid;
}

int tu_fork_server(void (*setup)(void *arg, void *reply), void (*serve)(void *arg), void *arg,
                   void *reply, size_t len)
{
    int p[2];
    if (pipe(p) != 0) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        setup(arg, reply);
        if (write(p[1], reply, len) != (ssize_t)len) _exit(1);
        close(p[1]);
        for (;;) serve(arg);
    }
    close(p[1]);
    ssize_t got = pid > 0 ? read(p[0], reply, len) : -1;
    close(p[0]);
    if (got != (ssize_t)len) {
        if (pid > 0) kill(pid, SIGKILL), waitpid(pid, NULL, 0);
        return -1;
    }
    return (int)pid;
}

int tu_wait_child(int pid, int timeout_ms)
{
    struct timespec nap = {0, 1000 * 1000};
    for (int waited = 0;; waited++) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        if (w < 0) return -1;
        if (waited >= timeout_ms) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        nanosleep(&nap, NULL);
    }
}

static int g_failed;
static char g_failure[512];

void tu_fail(const char *fmt, ...)
{
    if (__atomic_exchange_n(&g_failed, 1, __ATOMIC_ACQ_REL)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_failure, sizeof g_failure, fmt, ap);
    va_end(ap);
}

bool tu_failed(void) { return __atomic_load_n(&g_failed, __ATOMIC_ACQUIRE); }

const char *tu_failure(void) { return g_failure; }

void tu_fail_reset(void) { __atomic_store_n(&g_failed, 0, __ATOMIC_RELEASE); }

uint64_t tu_env_seed(const char *var)
{
    const char *env = getenv(var);
    if (env && *env) return strtoull(env, NULL, 0);
    return pod_mono_ns() | 1;
}

int tu_env_ms(const char *var, int dflt)
{
    const char *env = getenv(var);
    return env && atoi(env) > 0 ? atoi(env) : dflt;
}

TCase *tu_tcase(Suite *s, const char *name, double timeout_s)
{
    TCase *t = tcase_create(name);
    if (timeout_s > 0) tcase_set_timeout(t, timeout_s);
    suite_add_tcase(s, t);
    return t;
}

int tu_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

void tu_host_msg(int host, const char *fmt, ...)
{
    fprintf(stderr, "host %d: ", host);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

enum pod_store_kind tu_store = POD_STORE_TABLES;

void tu_use_array_store(void) { tu_store = POD_STORE_ARRAY; }

pod_db *tu_db_new(int nworkers)
{
    char err[256];
    pod_db *db = pod_db_new(&(struct pod_db_options){.nworkers = nworkers, .host_id = 0,
                                                     .nhosts = 1, .phantom_protection = true,
                                                     .store = tu_store},
                            err, sizeof err);
    ck_assert_msg(db, "pod_db_new: %s", err);
    tu_check_protocol(db);
    return db;
}

void tu_check_protocol(const pod_db *db)
{
    const char *want = tu_store == POD_STORE_ARRAY ? "rs-2pl" : "tigon-2pl";
    ck_assert_msg(strcmp(db->cc->name, want) == 0, "the database runs %s, not %s", db->cc->name,
                  want);
}

void tu_progress(uint64_t rows, void *arg)
{
    struct tu_progress *p = arg; /* called by the loader's one thread */
    p->calls++;
    p->rows = rows;
}

double tu_run_workers(pod_db *db, void (*body)(struct pod_worker *w, void *arg), void *arg,
                      uint64_t seed)
{
    char err[256];
    uint64_t t0 = pod_mono_ns();
    ck_assert_msg(pod_workers_start(db, NULL, 0, body, arg, err, sizeof err) == 0,
                  "pod_workers_start: %s", err);
    pod_workers_join(db);
    double secs = (double)(pod_mono_ns() - t0) / 1e9;
    if (tu_failed()) ck_abort_msg("seed 0x%" PRIx64 ": %s", seed, tu_failure());
    return secs;
}
