/* The checks of a start and what a failed one takes back; see startcheck.h. */
#include "server/startcheck.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <unistd.h>

#include "cxl/region.h"
#include "log/claim.h"
#include "util/fsperm.h"
#include "util/log.h"

/* Below this much free space on the log directory's file system (when
 * engine.checkpoint_after is 0) a start warns. */
#define LOG_SPACE_WARN_DEFAULT (256ull << 20)

/* The directory of path: "." for a name without '/', "/" for "/name". */
static void parent_of(const char *path, char *out, size_t len)
{
    snprintf(out, len, "%s", path);
    char *slash = strrchr(out, '/');
    if (!slash) snprintf(out, len, ".");
    else if (slash == out) out[1] = 0;
    else *slash = 0;
}

static const char *file_kind(mode_t m)
{
    if (S_ISREG(m)) return "a regular file";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISLNK(m)) return "a symbolic link";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
    return "not a socket";
}

int pod_socket_probe(const char *path, pod_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        pod_err_set(err, "socket path %s is too long", path);
        return -1;
    }
    strcpy(sa.sun_path, path);
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return POD_SOCKET_FREE;
        pod_err_set(err, "cannot listen on %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISSOCK(st.st_mode)) {
        pod_err_set(err, "socket path %s is %s, not a socket: a server replaces only a socket "
                    "that a stopped server left there (choose another socket path, or remove "
                    "it yourself if nothing needs it)", path, file_kind(st.st_mode));
        return -1;
    }
    /* Non-blocking: a live server whose backlog is full (EAGAIN) is still
     * live, and a hung one does not hang this start. */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        pod_err_set(err, "socket: %s", strerror(errno));
        return -1;
    }
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    int e = errno;
    if (rc == 0 || e == EAGAIN || e == EINPROGRESS) {
        struct ucred cred;
        socklen_t len = sizeof cred;
        if (rc == 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0)
            pod_err_set(err, "socket %s is in use by another running server (pid %d)", path,
                        (int)cred.pid);
        else
            pod_err_set(err, "socket %s is in use by another running server", path);
        close(fd);
        return -1;
    }
    close(fd);
    if (e == ECONNREFUSED) return POD_SOCKET_STALE;
    if (e == ENOENT) return POD_SOCKET_FREE; /* removed meanwhile */
    pod_err_set(err, "cannot tell whether a server listens on socket %s: connect: %s (remove "
                "it if no server uses it)", path, strerror(e));
    return -1;
}

/* The socket's directory exists and is trusted like a log directory's
 * (util/fsperm.h), and nothing but a stale socket is at the path. */
static int check_socket(const char *path, pod_err *err)
{
    if (pod_check_parents("socket", path, err)) return -1;
    char dir[POD_PATH_MAX];
    parent_of(path, dir, sizeof dir);
    struct stat st;
    if (stat(dir, &st) != 0) {
        pod_err_set(err, "cannot listen on %s: its directory %s: %s", path, dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        pod_err_set(err, "cannot listen on %s: %s is not a directory", path, dir);
        return -1;
    }
    return pod_socket_probe(path, err) < 0 ? -1 : 0;
}

int pod_tcp_bind_loopback(int port, int flags, pod_err *err)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
    if (fd < 0) {
        pod_err_set(err, "socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        pod_err_set(err, "cannot listen on 127.0.0.1:%d: %s", port, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* The port is free on 127.0.0.1 (bound for an instant, never listened on). */
static int check_tcp(int port, pod_err *err)
{
    int fd = pod_tcp_bind_loopback(port, 0, err);
    if (fd < 0) return -1;
    close(fd);
    return 0;
}

/* Which directories of dir a start will create: the topmost missing one. */
static void find_new_dirs(const char *dir, struct pod_start_undo *u)
{
    char p[POD_PATH_MAX];
    snprintf(p, sizeof p, "%s", dir);
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != 0) continue;
        char c = *s;
        *s = 0;
        struct stat st;
        if (lstat(p, &st) != 0 && errno == ENOENT) {
            u->log_dir_new = true;
            snprintf(u->log_dir_top, sizeof u->log_dir_top, "%s", p);
            return;
        }
        *s = c;
        if (c == 0) return;
    }
}

/* A warning when the log directory's file system (that of its nearest
 * existing directory) has less free space than the log grows by between
 * checkpoints. */
static void warn_log_space(const struct pod_config *c, const char *dir)
{
    char p[POD_PATH_MAX];
    struct statvfs vs;
    snprintf(p, sizeof p, "%s", dir);
    while (statvfs(p, &vs) != 0) {
        char up[POD_PATH_MAX];
        if (strcmp(p, "/") == 0 || strcmp(p, ".") == 0) return;
        parent_of(p, up, sizeof up);
        snprintf(p, sizeof p, "%s", up);
    }
    uint64_t avail = (uint64_t)vs.f_bavail * vs.f_frsize;
    uint64_t want = c->engine.checkpoint_after ? c->engine.checkpoint_after
                                               : LOG_SPACE_WARN_DEFAULT;
    if (avail >= want) return;
    pod_warn("log directory %s: its file system has %.1f MiB free, less than the %.1f MiB the "
             "log grows by between checkpoints (engine.checkpoint_after); once it is full, "
             "nothing this host runs becomes durable until space is freed", dir,
             (double)avail / (1 << 20), (double)want / (1 << 20));
}

int pod_start_check(const struct pod_config *c, int host, struct pod_start_undo *u, pod_err *err)
{
    const struct pod_host_conf *hc = &c->hosts[host];
    memset(u, 0, sizeof *u);
    if (check_socket(hc->socket_path, err)) return -1;
    if (hc->tcp_port && check_tcp(hc->tcp_port, err)) return -1;
    if (hc->loggers == 0) return 0; /* the log directory is not used */
    if (logdir_check(hc->log_dir, c->region.path, host, err)) return -1;
    find_new_dirs(hc->log_dir, u);
    warn_log_space(c, hc->log_dir);
    return 0;
}

void pod_start_undo_log_dir(const struct pod_start_undo *u, const char *dir, bool claimed)
{
    if (!u->log_dir_new) return;
    if (claimed) { /* made by this start and held by it: its files are this server's */
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            char p[PATH_MAX];
            struct stat st;
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= sizeof p) continue;
            if (lstat(p, &st) == 0 && S_ISREG(st.st_mode)) unlink(p);
        }
        if (d) closedir(d);
    }
    char p[POD_PATH_MAX];
    snprintf(p, sizeof p, "%s", dir);
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
    for (;;) {
        if (rmdir(p) != 0) {
            if (claimed && errno != ENOENT)
                pod_warn("a failed start leaves %s, which it created: %s", p, strerror(errno));
            return;
        }
        if (strcmp(p, u->log_dir_top) == 0) break;
        char *slash = strrchr(p, '/');
        if (!slash || slash == p) break;
        *slash = 0;
    }
    pod_info("removed log directory %s, which this start had created", dir);
}

void pod_start_undo_region(const struct pod_config *c)
{
    pod_err err = {{0}};
    if (cxl_region_destroy(c, false, &err) == 0)
        pod_info("removed region %s, which this start had created", c->region.path);
    else
        pod_info("region %s, which this start created, stays: %s", c->region.path, err.msg);
}
