/* The claim on a log directory; see claim.h. */
#include "log/claim.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "conf/config.h"
#include "log/segment.h"
#include "util/fsperm.h"
#include "util/log.h"

#define IDENTITY_HEAD "PodDB log directory"
#define IDENTITY_MAX 4096

struct logdir_claim {
    int fd; /* DIR/lock, flocked */
};

static int join(char *out, size_t len, const char *dir, const char *name, pod_err *err)
{
    if ((size_t)snprintf(out, len, "%s/%s", dir, name) < len) return 0;
    pod_err_set(err, "log directory path too long: %s", dir);
    return -1;
}

/* The pid the holder wrote into the lock file (0: unknown). */
static long holder_pid(int fd)
{
    char buf[32] = {0};
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    return n > 0 ? strtol(buf, NULL, 10) : 0;
}

/* The lock at path (of dir, open at fd) is held by another process. */
static int refuse_held(const char *dir, const char *path, int fd, pod_err *err)
{
    long pid = holder_pid(fd);
    if (pid > 0)
        pod_err_set(err, "log directory %s is in use by another server (pid %ld): two "
                    "servers, of one pod or of two, never share a log directory", dir, pid);
    else
        pod_err_set(err, "log directory %s is in use by another process (it holds %s): "
                    "two servers, of one pod or of two, never share a log directory",
                    dir, path);
    return -1;
}

static int take_lock(const char *dir, int *fd_out, pod_err *err)
{
    char path[PATH_MAX];
    if (join(path, sizeof path, dir, LOGDIR_LOCK_NAME, err)) return -1;
    int fd = pod_create_private(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        pod_err_set(err, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        if (e != EWOULDBLOCK) pod_err_set(err, "cannot lock %s: %s", path, strerror(e));
        else refuse_held(dir, path, fd, err);
        close(fd);
        return -1;
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n)
        pod_warn("cannot write this server's pid into %s: %s", path, strerror(errno));
    *fd_out = fd;
    return 0;
}

/* What an identity file says: its region path and host id. */
struct identity {
    char region[POD_PATH_MAX];
    int host;
};

static int parse_identity(const char *text, struct identity *id)
{
    const char *r = strstr(text, "\nregion "), *h = strstr(text, "\nhost ");
    if (strncmp(text, IDENTITY_HEAD "\n", sizeof IDENTITY_HEAD) != 0 || !r || !h) return -1;
    r += strlen("\nregion ");
    size_t n = strcspn(r, "\n");
    if (n == 0 || n >= sizeof id->region) return -1;
    memcpy(id->region, r, n);
    id->region[n] = 0;
    char *end;
    long host = strtol(h + strlen("\nhost "), &end, 10);
    if (*end != '\n' || host < 0 || host >= POD_MAX_HOSTS) return -1;
    id->host = (int)host;
    return 0;
}

/* 1 with id filled, 0 when there is no identity file, -1 with err. */
static int read_identity(const char *path, struct identity *id, pod_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) return 0;
    if (fd < 0) {
        pod_err_set(err, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    char text[IDENTITY_MAX + 1];
    ssize_t n = read(fd, text, IDENTITY_MAX);
    close(fd);
    if (n < 0) {
        pod_err_set(err, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    text[n] = 0;
    if (parse_identity(text, id) == 0) return 1;
    pod_err_set(err, "%s is damaged (no region or host line): this log directory's owner is "
                "unknown, so it is not replayed (if it is this host's, remove the file)", path);
    return -1;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Written once: a temporary file, synced, renamed into place, directory synced. */
static int write_identity(const char *dir, const char *path, const char *region, int host,
                          pod_err *err)
{
    char tmp[PATH_MAX], machine[256] = "unknown", when[64] = "";
    if (join(tmp, sizeof tmp, dir, LOGDIR_IDENTITY_NAME ".tmp", err)) return -1;
    gethostname(machine, sizeof machine - 1);
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&now, &tm));
    char text[IDENTITY_MAX];
    int n = snprintf(text, sizeof text, IDENTITY_HEAD "\nregion %s\nhost %d\nmachine %s\ncreated %s\n",
                     region, host, machine, when);
    unlink(tmp);
    int fd = pod_create_private(tmp, O_WRONLY | O_EXCL | O_CLOEXEC);
    if (fd < 0 || write_all(fd, text, (size_t)n) != 0 || fsync(fd) != 0) {
        pod_err_set(err, "cannot write %s: %s", tmp, strerror(errno));
        if (fd >= 0) close(fd);
        unlink(tmp);
        return -1;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        pod_err_set(err, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return seg_fsync_dir(dir, err);
}

/* 1 when the identity file at path is missing, 0 when it names this host
 * of this pod, -1 with err otherwise. */
static int match_identity(const char *dir, const char *path, const char *region, int host,
                          pod_err *err)
{
    struct identity id;
    int found = read_identity(path, &id, err);
    if (found <= 0) return found < 0 ? -1 : 1;
    if (id.host == host && strcmp(id.region, region) == 0) return 0;
    pod_err_set(err, "log directory %s belongs to host %d of the pod of region %s (%s), not "
                "to host %d of the pod of region %s: a server replays only its own log (if "
                "this directory really is this host's now, remove %s)",
                dir, id.host, id.region, path, host, region, path);
    return -1;
}

static int check_identity(const char *dir, const char *region, int host, pod_err *err)
{
    char path[PATH_MAX];
    if (join(path, sizeof path, dir, LOGDIR_IDENTITY_NAME, err)) return -1;
    int rc = match_identity(dir, path, region, host, err);
    return rc > 0 ? write_identity(dir, path, region, host, err) : rc;
}

int logdir_check(const char *dir, const char *region, int host, pod_err *err)
{
    if (pod_check_parents("log directory", dir, err)) return -1;
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno == ENOENT) return 0; /* nothing there yet: it is made at start */
        pod_err_set(err, "log directory %s: %s", dir, strerror(errno));
        return -1;
    }
    if (pod_check_path("log directory", dir, err)) return -1;
    if (!S_ISDIR(st.st_mode)) {
        pod_err_set(err, "log directory %s is not a directory", dir);
        return -1;
    }
    char path[PATH_MAX];
    if (join(path, sizeof path, dir, LOGDIR_LOCK_NAME, err)) return -1;
    /* A shared lock for an instant: refused while a server holds the
     * directory (its exclusive lock), given back at once. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        int rc = 0;
        if (flock(fd, LOCK_SH | LOCK_NB) == 0) flock(fd, LOCK_UN);
        else if (errno == EWOULDBLOCK) rc = refuse_held(dir, path, fd, err);
        close(fd);
        if (rc) return -1;
    }
    if (join(path, sizeof path, dir, LOGDIR_IDENTITY_NAME, err)) return -1;
    return match_identity(dir, path, region, host, err) < 0 ? -1 : 0;
}

struct logdir_claim *logdir_claim(const char *dir, const char *region, int host, pod_err *err)
{
    struct logdir_claim *c = calloc(1, sizeof *c);
    if (!c) {
        pod_err_set(err, "out of memory");
        return NULL;
    }
    if (take_lock(dir, &c->fd, err)) {
        free(c);
        return NULL;
    }
    if (check_identity(dir, region, host, err)) {
        logdir_release(c);
        return NULL;
    }
    return c;
}

void logdir_release(struct logdir_claim *c)
{
    if (!c) return;
    close(c->fd); /* the flock goes with the descriptor */
    free(c);
}

int logdir_claim_lock_fd(const struct logdir_claim *c) { return c->fd; }

int logdir_identity_read(const char *dir, char *region, size_t len, int *host, pod_err *err)
{
    char path[PATH_MAX];
    struct identity id;
    if (join(path, sizeof path, dir, LOGDIR_IDENTITY_NAME, err)) return -1;
    int found = read_identity(path, &id, err);
    if (found == 1) {
        snprintf(region, len, "%s", id.region);
        *host = id.host;
    }
    return found;
}
