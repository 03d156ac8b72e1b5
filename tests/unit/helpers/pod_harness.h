/* For the Check tests that run a pod of several real poddb-server processes
 * (test_pod_mp.c, test_liveness_mp.c): wait until a host answers, and stop
 * one with the checks every such test makes. On server_harness.h. */
#ifndef PODDB_TESTS_POD_HARNESS_H
#define PODDB_TESTS_POD_HARNESS_H

#include <check.h>

#include "helpers/server_harness.h"

/* Host h's server (pid) answers sys.ping on sock; the test fails with the
 * host's log if it exits first or is not up within 60 s. */
static inline void ph_wait_up(pid_t pid, const char *sock, const char *log, int h)
{
    uint64_t end = sh_now_ms() + 60000;
    while (!sh_ping(sock, 5000)) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid || sh_now_ms() > end)
            ck_abort_msg("host %d did not come up:\n%s", h, sh_slurp(log));
        sh_sleep_ms(20);
    }
}

/* Host h's server was sent SIGTERM: it exits with status 0 within 30 s
 * (else SIGKILL and the test fails), and its log has no sanitizer report,
 * error line or protocol bug. */
static inline void ph_reap(pid_t pid, const char *log, int h)
{
    int st = sh_wait_exit(pid, 30000);
    if (st == -1) {
        kill(pid, SIGKILL);
        sh_wait_exit(pid, 5000);
    }
    char *t = sh_slurp(log);
    static const char *const marks[] = {"ERROR: AddressSanitizer", "runtime error",
                                        "ThreadSanitizer", "error:", "protocol bug"};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        ck_assert_msg(!strstr(t, marks[i]), "host %d's log has \"%s\":\n%s", h, marks[i], t);
    ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "host %d did not stop cleanly (status %#x):\n%s", h, st, t);
    free(t);
}

#endif
