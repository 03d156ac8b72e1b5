/* For the Check tests that run a pod of several real poddb-server processes
 * (test_pod_mp.c, test_liveness_mp.c, test_crash_mp.c, test_logdir_mp.c):
 * a new pod's paths, a client for a worker thread, wait until a host
 * answers, and stop one with the checks every such test makes. On
 * server_harness.h. */
#ifndef PODDB_TESTS_POD_HARNESS_H
#define PODDB_TESTS_POD_HARNESS_H

#include <check.h>

#include "helpers/server_harness.h"

/* A new pod's directory (made 0700 under sh_root), its config path
 * (DIR/pod.yaml) and its region in /dev/shm, named after the test run, name,
 * the process and a counter: every pod of a run has its own. */
static inline void ph_pod_paths(const char *name, char *dir, size_t dirsz, char *conf,
                                size_t confsz, char *region, size_t regionsz)
{
    int n = sh_counter++;
    snprintf(dir, dirsz, "%s/%s-%d-%d", sh_root, name, (int)getpid(), n);
    ck_assert_msg(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
    snprintf(conf, confsz, "%s/pod.yaml", dir);
    snprintf(region, regionsz, "/dev/shm/poddb-srvtest-%d-%s-%d-%d", (int)sh_main_pid, name,
             (int)getpid(), n);
}

/* Host h's socket DIR/pod-H.sock, server log DIR/server-H.log and log
 * directory DIR/log-H, as a config with socket DIR/pod-{host}.sock and
 * log_dir DIR/log-{host} names them. */
static inline void ph_host_paths(const char *dir, int h, char *sock, size_t socksz, char *log,
                                 size_t logsz, char *logdir, size_t logdirsz)
{
    char d[SH_PATH - 64]; /* dir may be in the same struct as the outputs */
    snprintf(d, sizeof d, "%s", dir);
    snprintf(sock, socksz, "%s/pod-%d.sock", d, h);
    snprintf(log, logsz, "%s/server-%d.log", d, h);
    snprintf(logdir, logdirsz, "%s/log-%d", d, h);
}

/* For a client thread: a connection to sock with the given call timeout, or
 * NULL with "connect: why" in failure (the thread reports it; Check's
 * assertions belong to the test's own thread). */
static inline pod_client *ph_connect(const char *sock, int timeout_ms, char *failure,
                                    size_t failsz)
{
    char err[256];
    pod_client *c = pod_client_connect(sock, err, sizeof err);
    if (!c) {
        snprintf(failure, failsz, "connect: %.200s", err);
        return NULL;
    }
    pod_client_set_timeout(c, timeout_ms);
    return c;
}

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
