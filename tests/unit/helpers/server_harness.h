/* Header-only helpers for the tests that run REAL poddb-server processes
 * (test_server.c, test_server_fuzz.c): a unique scratch directory and region
 * per server, fork+exec of $PODDB_BIN/poddb-server with its output captured to
 * a file, a bounded wait until sys.ping answers, and a stop that always ends
 * the process (SIGTERM, bounded wait, then SIGKILL).
 *
 * Nothing leaks, also when a test fails or is killed by Check's timeout:
 *   - a server is started with PR_SET_PDEATHSIG=SIGKILL, so it dies with the
 *     process that started it (Check also kills a test's process group);
 *   - every process that started servers kills them at exit (atexit);
 *   - every file lives under /tmp/poddb-srvtest-<main pid>/ or is named
 *     /dev/shm/poddb-srvtest-<main pid>-*, and the main process removes both
 *     at exit (and on SIGTERM/SIGINT/SIGHUP); files of earlier runs that were
 *     killed outright are removed by the next run's sh_init().
 *
 * Call sh_init() once in main() before anything else. Everything is static
 * inline so that a test that does not use a helper does not warn. */
#ifndef PODDB_TESTS_SERVER_HARNESS_H
#define PODDB_TESTS_SERVER_HARNESS_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net/proto.h"
#include "poddb/client.h"

#define SH_MAX_SERVERS 16
#define SH_PATH 256

struct sh_server {
    char dir[SH_PATH - 64]; /* scratch directory of this server */
    char conf[SH_PATH];   /* the YAML config */
    char sock[SH_PATH];   /* host 0's Unix socket */
    char region[SH_PATH]; /* the region file in /dev/shm */
    char log[SH_PATH];    /* the server's stdout+stderr */
    int tcp_port;         /* 0: none */
    char token_file[SH_PATH]; /* with tcp_port: DIR/token (0600), named relative in the config */
    char token[80];       /* what it holds (with a newline after it) */
    int workers;
    pid_t pid;            /* 0 when not running */
    int status;           /* wait status once stopped */
};

/* Per-process bookkeeping (a forked test process starts with a copy and
 * resets it: sh_owner tells which process the copy belongs to). */
static char sh_root[128];
static pid_t sh_main_pid;
static pid_t sh_owner;
static pid_t sh_pids[SH_MAX_SERVERS];
static int sh_counter;
/* > 0: the next servers start with this RLIMIT_NOFILE (soft and hard). */
static int sh_spawn_nofile;
/* More entries for the `tables:` section of the next configs (or NULL). */
static const char *sh_extra_tables;
/* One more argument for the next servers started (or NULL). */
static const char *sh_spawn_arg;

static inline uint64_t sh_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline void sh_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static inline int sh_rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    remove(p);
    return 0;
}

/* Kill this process's servers; the main process also removes every file. */
static inline void sh_cleanup(void)
{
    if (getpid() == sh_owner) {
        for (int i = 0; i < SH_MAX_SERVERS; i++) {
            if (sh_pids[i] > 0) {
                kill(sh_pids[i], SIGKILL);
                waitpid(sh_pids[i], NULL, 0);
                sh_pids[i] = 0;
            }
        }
    }
    if (getpid() != sh_main_pid) return;
    if (sh_root[0]) nftw(sh_root, sh_rm_one, 16, FTW_DEPTH | FTW_PHYS);
    char prefix[64];
    int plen = snprintf(prefix, sizeof prefix, "poddb-srvtest-%d-", (int)sh_main_pid);
    DIR *d = opendir("/dev/shm");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (strncmp(e->d_name, prefix, (size_t)plen) == 0) {
                char p[SH_PATH + 64];
                snprintf(p, sizeof p, "/dev/shm/%s", e->d_name);
                unlink(p);
            }
        }
        closedir(d);
    }
}

/* Files of earlier runs whose main process is gone (killed with SIGKILL, so
 * its atexit cleanup never ran). Only our own naming pattern is touched. */
static inline void sh_remove_stale(void)
{
    const char *dirs[] = {"/dev/shm", "/tmp"};
    for (int i = 0; i < 2; i++) {
        DIR *d = opendir(dirs[i]);
        if (!d) continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            int pid = 0;
            if (sscanf(e->d_name, "poddb-srvtest-%d", &pid) != 1 || pid <= 1) continue;
            if (kill(pid, 0) == 0 || errno != ESRCH) continue; /* still running */
            char p[SH_PATH + 64];
            snprintf(p, sizeof p, "%s/%s", dirs[i], e->d_name);
            if (i == 0) unlink(p);
            else nftw(p, sh_rm_one, 16, FTW_DEPTH | FTW_PHYS);
        }
        closedir(d);
    }
}

static inline void sh_on_signal(int sig)
{
    sh_cleanup();
    signal(sig, SIG_DFL);
    raise(sig);
}

static inline void sh_init(void)
{
    sh_main_pid = sh_owner = getpid();
    sh_remove_stale();
    snprintf(sh_root, sizeof sh_root, "/tmp/poddb-srvtest-%d", (int)sh_main_pid);
    mkdir(sh_root, 0700);
    atexit(sh_cleanup);
    signal(SIGTERM, sh_on_signal);
    signal(SIGINT, sh_on_signal);
    signal(SIGHUP, sh_on_signal);
    signal(SIGPIPE, SIG_IGN);
}

/* The forked copy of the bookkeeping belongs to the parent: start afresh. */
static inline void sh_adopt(void)
{
    if (sh_owner == getpid()) return;
    sh_owner = getpid();
    memset(sh_pids, 0, sizeof sh_pids);
}

static inline const char *sh_bin_dir(void)
{
    const char *b = getenv("PODDB_BIN");
    return b && *b ? b : "build/bin";
}

/* Table declarations shared by the tests (the config's `tables:` section). */
#define SH_TABLES_YAML                                                            \
    "tables:\n"                                                                    \
    "  - name: kv\n    key_size: 64\n    value_size: 1024\n    partitions: 4\n"    \
    "  - name: scan\n    key_size: 16\n    value_size: 64\n    partitions: 4\n"    \
    "  - name: big\n    key_size: 8\n    value_size: 65536\n    partitions: 2\n"   \
    "  - name: safe\n    key_size: 32\n    value_size: 128\n    partitions: 3\n"    \
    "  - name: huge\n    key_size: 8\n    value_size: 1048576\n    partitions: 1\n"

/* s's token file, DIR/token (mode 0600): a token of its own and a newline. */
static inline int sh_write_token(struct sh_server *s)
{
    snprintf(s->token_file, sizeof s->token_file, "%s/token", s->dir);
    snprintf(s->token, sizeof s->token, "srvtest-token-%d-%d-%llu", (int)getpid(), sh_counter,
             (unsigned long long)sh_now_ms());
    int fd = open(s->token_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    bool ok = dprintf(fd, "%s\n", s->token) > 0 && fchmod(fd, 0600) == 0;
    return close(fd) == 0 && ok ? 0 : -1;
}

/* A TCP server's server.auth_timeout_ms in the tests. */
#define SH_AUTH_TIMEOUT_MS 3000

/* Fill in unique paths and write the config (with tcp_port, the token file
 * too: see sh_write_token, and server.auth_timeout_ms SH_AUTH_TIMEOUT_MS). socket_override: NULL, or a
 * socket path to use instead of the default one (for error tests). */
static inline int sh_prepare(struct sh_server *s, int workers, int tcp_port,
                             const char *socket_override)
{
    sh_adopt();
    memset(s, 0, sizeof *s);
    int n = sh_counter++;
    s->workers = workers;
    s->tcp_port = tcp_port;
    snprintf(s->dir, sizeof s->dir, "%s/%d-%d", sh_root, (int)getpid(), n);
    if (mkdir(s->dir, 0700) != 0 && errno != EEXIST) return -1;
    snprintf(s->conf, sizeof s->conf, "%s/pod.yaml", s->dir);
    snprintf(s->sock, sizeof s->sock, "%s", socket_override ? socket_override : "");
    if (!socket_override) snprintf(s->sock, sizeof s->sock, "%s/pod-0.sock", s->dir);
    snprintf(s->log, sizeof s->log, "%s/server.log", s->dir);
    snprintf(s->region, sizeof s->region, "/dev/shm/poddb-srvtest-%d-%d-%d", (int)sh_main_pid,
             (int)getpid(), n);
    if (tcp_port && sh_write_token(s) != 0) return -1;
    FILE *f = fopen(s->conf, "w");
    if (!f) return -1;
    fprintf(f,
            "# written by tests/unit/helpers/server_harness.h\n"
            "region:\n  path: %s\n  kind: shm\n  size: 512MiB\n  hwcc_budget: 16MiB\n"
            "host_defaults:\n  workers: %d\n  loggers: 1\n  socket: %s\n  log_dir: %s/log-{host}\n"
            "hosts:\n  - workers: %d\n",
            s->region, workers, s->sock, s->dir, workers);
    if (tcp_port) fprintf(f, "    tcp_port: %d\n    tcp_token_file: token\n", tcp_port);
    fputs(SH_TABLES_YAML, f);
    if (sh_extra_tables) fputs(sh_extra_tables, f);
    fputs("engine:\n  epoch_ms: 10\n", f);
    if (tcp_port) fprintf(f, "server:\n  auth_timeout_ms: %d\n", SH_AUTH_TIMEOUT_MS);
    return fclose(f) == 0 ? 0 : -1;
}

/* fork+exec a server for (conf, host) with output appended to log. */
static inline pid_t sh_spawn_host(const char *conf, int host, const char *log)
{
    sh_adopt();
    char bin[SH_PATH + 32];
    snprintf(bin, sizeof bin, "%s/poddb-server", sh_bin_dir());
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        signal(SIGPIPE, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        int nul = open("/dev/null", O_RDONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (nul >= 0) dup2(nul, 0);
        if (sh_spawn_nofile > 0) {
            struct rlimit rl = {(rlim_t)sh_spawn_nofile, (rlim_t)sh_spawn_nofile};
            setrlimit(RLIMIT_NOFILE, &rl);
        }
        char hs[16];
        snprintf(hs, sizeof hs, "%d", host);
        execl(bin, bin, "--conf", conf, "--host", hs, sh_spawn_arg, (char *)NULL);
        fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    for (int i = 0; i < SH_MAX_SERVERS; i++)
        if (sh_pids[i] == 0) {
            sh_pids[i] = pid;
            break;
        }
    return pid;
}

static inline pid_t sh_spawn(const char *conf, const char *log)
{
    return sh_spawn_host(conf, 0, log);
}

static inline void sh_forget(pid_t pid)
{
    for (int i = 0; i < SH_MAX_SERVERS; i++)
        if (sh_pids[i] == pid) sh_pids[i] = 0;
}

/* Wait up to timeout_ms for pid to exit; its wait status, or -1 (still running). */
static inline int sh_wait_exit(pid_t pid, int timeout_ms)
{
    uint64_t end = sh_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            sh_forget(pid);
            return st;
        }
        if (w < 0) {
            sh_forget(pid);
            return -1;
        }
        if (sh_now_ms() >= end) return -1;
        sh_sleep_ms(5);
    }
}

/* The whole text of a file (malloc'd, NUL-terminated; "" if unreadable). */
static inline char *sh_slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return strdup("");
    size_t cap = 4096, len = 0;
    char *b = malloc(cap);
    size_t n;
    while (b && (n = fread(b + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            char *nb = realloc(b, cap * 2);
            if (!nb) break;
            b = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!b) return strdup("");
    b[len] = '\0';
    return b;
}

static inline bool sh_file_contains(const char *path, const char *needle)
{
    char *t = sh_slurp(path);
    bool yes = strstr(t, needle) != NULL;
    free(t);
    return yes;
}

/* A sanitizer report in the server's output, or NULL. */
static inline const char *sh_sanitizer_error(const struct sh_server *s)
{
    static const char *const marks[] = {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                                        "runtime error", "ERROR: ThreadSanitizer",
                                        "WARNING: ThreadSanitizer"};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (sh_file_contains(s->log, marks[i])) return marks[i];
    return NULL;
}

/* Print the server's log to stderr (for failure diagnostics). */
static inline void sh_dump_log(const struct sh_server *s, const char *why)
{
    char *t = sh_slurp(s->log);
    size_t n = strlen(t);
    const char *tail = n > 6000 ? t + n - 6000 : t;
    fprintf(stderr, "---- %s: server log %s (last %zu bytes) ----\n%s\n---- end of log ----\n",
            why, s->log, strlen(tail), tail);
    free(t);
}

/* One sys.ping over a fresh connection: true if it answered "pong". */
static inline bool sh_ping(const char *address, int timeout_ms)
{
    char err[256];
    pod_client *c = pod_client_connect(address, err, sizeof err);
    if (!c) return false;
    pod_client_set_timeout(c, timeout_ms);
    pod_reply *r = pod_client_call(c, "sys.ping", NULL, 0);
    const pod_value *v = r ? pod_reply_value(r, 0, 0) : NULL;
    bool ok = r && pod_reply_status(r) == POD_OK && v && v->type == POD_T_BYTES && v->len == 4 &&
              memcmp(v->u.bytes, "pong", 4) == 0;
    pod_reply_free(r);
    pod_client_close(c);
    return ok;
}

/* Start the server described by s (sh_prepare first) and wait until sys.ping
 * answers. 0; or -1 when it exited (s->status set) or did not answer in time
 * (then it is killed). */
static inline int sh_start(struct sh_server *s, int timeout_ms)
{
    s->status = 0;
    s->pid = sh_spawn(s->conf, s->log);
    if (s->pid <= 0) return -1;
    uint64_t end = sh_now_ms() + (uint64_t)timeout_ms;
    while (sh_now_ms() < end) {
        int st;
        pid_t w = waitpid(s->pid, &st, WNOHANG);
        if (w == s->pid) {
            sh_forget(s->pid);
            s->status = st;
            s->pid = 0;
            return -1;
        }
        if (access(s->sock, F_OK) == 0 && sh_ping(s->sock, 2000)) return 0;
        sh_sleep_ms(20);
    }
    kill(s->pid, SIGKILL);
    s->status = sh_wait_exit(s->pid, 5000);
    s->pid = 0;
    return -1;
}

/* Stop with sig; after timeout_ms SIGKILL. Returns the wait status, or -1 if
 * it had to be killed. */
static inline int sh_stop(struct sh_server *s, int sig, int timeout_ms)
{
    if (s->pid <= 0) return s->status;
    kill(s->pid, sig);
    int st = sh_wait_exit(s->pid, timeout_ms);
    if (st == -1) {
        kill(s->pid, SIGKILL);
        sh_wait_exit(s->pid, 5000);
    }
    s->pid = 0;
    s->status = st;
    return st;
}

/* Remove a stopped server's region file. */
static inline void sh_remove_region(const struct sh_server *s) { unlink(s->region); }

/* True if the process is still running (not exited, not a zombie reaped). */
static inline bool sh_alive(const struct sh_server *s)
{
    if (s->pid <= 0) return false;
    int st;
    return waitpid(s->pid, &st, WNOHANG) == 0;
}

/* CPU time (user + system) of a process in clock ticks, or -1. */
static inline long sh_cpu_ticks(pid_t pid)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    char *t = sh_slurp(p);
    char *q = strrchr(t, ')');
    long ut = -1, st = -1;
    /* after ")": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (q) sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &ut, &st);
    free(t);
    return ut < 0 ? -1 : ut + st;
}

/* Resident set size in KiB, or -1. */
static inline long sh_rss_kib(pid_t pid)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    char *t = sh_slurp(p);
    char *q = strstr(t, "VmRSS:");
    long kib = -1;
    if (q) sscanf(q + 6, "%ld", &kib);
    free(t);
    return kib;
}

/* ---- raw sockets (hand-made frames) ------------------------------------------ */

static inline int sh_raw_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) return -1;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
}

/* Send everything (blocking, bounded by SO_SNDTIMEO). 0 or -1. */
static inline int sh_raw_send(int fd, const void *p, size_t n)
{
    const unsigned char *b = p;
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

enum { SH_FRAME = 1, SH_EOF = 0, SH_TIMEOUT = -1, SH_ERROR = -2, SH_BADLEN = -3 };

/* Receive the next frame into frame (replacing its contents), buffering extra
 * bytes in in. SH_FRAME, SH_EOF, SH_TIMEOUT, SH_ERROR (e.g. ECONNRESET) or
 * SH_BADLEN (unframeable). */
static inline int sh_raw_recv_frame(int fd, struct pod_buf *in, struct pod_buf *frame,
                                    int timeout_ms)
{
    uint64_t end = sh_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        long fs = pod_proto_frame_size(in->p, in->len);
        if (fs < 0) return SH_BADLEN;
        if (fs > 0) {
            frame->len = 0;
            if (pod_buf_reserve(frame, (size_t)fs) != 0) return SH_ERROR;
            memcpy(frame->p, in->p, (size_t)fs);
            frame->len = (size_t)fs;
            pod_buf_consume(in, (size_t)fs);
            return SH_FRAME;
        }
        uint64_t now = sh_now_ms();
        if (now >= end) return SH_TIMEOUT;
        struct pollfd pfd = {fd, POLLIN, 0};
        int pr = poll(&pfd, 1, (int)(end - now));
        if (pr < 0 && errno == EINTR) continue;
        if (pr < 0) return SH_ERROR;
        if (pr == 0) return SH_TIMEOUT;
        if (pod_buf_reserve(in, 65536) != 0) return SH_ERROR;
        ssize_t r = recv(fd, in->p + in->len, 65536, MSG_DONTWAIT);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (r < 0) return SH_ERROR;
        if (r == 0) return SH_EOF;
        in->len += (size_t)r;
    }
}

#endif
