/* Helpers shared by the unit tests: configs built in code, unique /dev/shm
 * names that are always removed, bounded waits. */
#ifndef PODDB_TESTS_TESTUTIL_H
#define PODDB_TESTS_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stdint.h>

#include "conf/config.h"

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

/* A test case named name, added to suite s, with a timeout in seconds (0:
 * Check's default). Its tests and fixtures may be added afterwards. */
TCase *tu_tcase(Suite *s, const char *name, double timeout_s);
/* Run every test of s (CK_NORMAL output); the exit status of a test
 * program: 0 when all passed. */
int tu_run(Suite *s);

#endif
