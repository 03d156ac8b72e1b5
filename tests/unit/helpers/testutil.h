/* Helpers shared by the unit tests: configs built in code, unique /dev/shm
 * names that are always removed, bounded waits. */
#ifndef PODDB_TESTS_TESTUTIL_H
#define PODDB_TESTS_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stdint.h>

#include "conf/config.h"
#include "engine/db.h"
#include "poddb/proc.h"

struct pod_worker;

/* A config for a pod of nhosts hosts (1 worker each) on a unique /dev/shm
 * file. The file is registered for removal at exit (also on test failure). */
void tu_make_config(struct pod_config *c, int nhosts, uint64_t size, uint64_t hwcc_budget,
                    bool simulate_noncoherent);

/* A unique path under /dev/shm ("poddb-test-<pid>-<n>-<tag>"), removed at exit. */
void tu_unique_shm_path(char *buf, int len, const char *tag);

/* Spin (with short sleeps) until *word == want or timeout_ms passes. */
bool tu_wait_u64(const uint64_t *word, uint64_t want, int timeout_ms);

/* Fork a child running fn(arg); returns its pid. The child exits with fn's
 * return value (0 = success). */
int tu_fork(int (*fn)(void *), void *arg);
/* Fork a server child: it runs setup(arg, reply), which fills reply (len
 * bytes: what the parent needs to reach it), sends reply to the parent, and
 * then serve(arg) until killed. The parent gets reply; returns the pid, or
 * -1 when the child sent nothing. Fork before this process starts threads. */
int tu_fork_server(void (*setup)(void *arg, void *reply), void (*serve)(void *arg), void *arg,
                   void *reply, size_t len);
/* Wait for a child with a timeout; returns its exit status, or -1 when it
 * died by a signal or had to be killed after timeout_ms. */
int tu_wait_child(int pid, int timeout_ms);

/* The first failure seen by any thread of a multi-threaded test: worker
 * threads record it with tu_fail (later ones are dropped) and stop when
 * tu_failed(); the test's own thread reports tu_failure() through Check.
 * tu_fail_reset before each run. */
void tu_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool tu_failed(void);
const char *tu_failure(void);
void tu_fail_reset(void);

/* A seed from the environment variable var (any base strtoull reads), or
 * one from the clock when it is unset: print it with a failure so that the
 * run can be repeated. */
uint64_t tu_env_seed(const char *var);
/* A positive number of milliseconds from var, or dflt. */
int tu_env_ms(const char *var, int dflt);

/* A multi-threaded test's default run length: ThreadSanitizer runs it several
 * times slower, so it gets the second figure. */
#if defined(__SANITIZE_THREAD__)
#define TU_TSAN_OR(plain, tsan) (tsan)
#else
#define TU_TSAN_OR(plain, tsan) (plain)
#endif

/* In a forked host of a multi-process test: "host H: message" on stderr,
 * and the child's function returns 1 (its exit status). */
#define TU_HOST_FAIL(host, ...)                                                              \
    do {                                                                                     \
        tu_host_msg(host, __VA_ARGS__);                                                      \
        return 1;                                                                            \
    } while (0)
void tu_host_msg(int host, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A database of one host with nworkers workers and phantom protection, as
 * the workload tests run it; the test fails when it cannot be made. */
pod_db *tu_db_new(int nworkers);
/* Where the databases of tu_db_new (and of tests that read it) keep their
 * records: POD_STORE_TABLES, or POD_STORE_ARRAY after tu_use_array_store
 * (a checked fixture: the tests of that case then run rs-2pl over the
 * in-process record store, src/store/record_store.h). */
extern enum pod_store_kind tu_store;
void tu_use_array_store(void);
/* db runs the protocol of tu_store (tu_db_new checks its own). */
void tu_check_protocol(const pod_db *db);

/* A loader's progress callback (wl_progress_fn, sb_progress_fn), arg a struct
 * tu_progress: how often it was called and the last row count. */
struct tu_progress {
    uint64_t calls, rows;
};
void tu_progress(uint64_t rows, void *arg);

/* Run body on every worker of db until all have returned; the test fails
 * with the first failure they recorded (tu_fail) and the seed of the run.
 * Returns the seconds they ran. */
double tu_run_workers(pod_db *db, void (*body)(struct pod_worker *w, void *arg), void *arg,
                      uint64_t seed);

/* splitmix64: the tests' reproducible random numbers (a seed always gives the
 * same sequence). */
static inline uint64_t tu_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The four coherence variants (engine.coherence) the record tests run in. */
#define TU_NVARIANTS 4
extern const enum pod_coherence tu_variants[TU_NVARIANTS];

/* A test case named name, added to suite s, with a timeout in seconds (0:
 * Check's default). Its tests and fixtures may be added afterwards. */
TCase *tu_tcase(Suite *s, const char *name, double timeout_s);
/* Run every test of s (CK_NORMAL output); the exit status of a test
 * program: 0 when all passed. */
int tu_run(Suite *s);

#endif
