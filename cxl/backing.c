/* The region's backing file or device: opening it, its lock, what its first
 * page says it is, and sizing it.
 *
 * Identity: a region starts with a superblock whose first 8 bytes are
 * CXL_MAGIC. A file whose first bytes are anything else holds someone's data
 * and is never formatted, resized or removed; a zero-length file (and a
 * device whose first page is zero) is empty and may become a region. A new
 * file is stamped with the magic before it is sized, so that no crash
 * leaves a file that looks like someone else's.
 *
 * Room: a region file is sparse, so a file system smaller than region.size
 * takes it, and the page that finds no room later is a SIGBUS in whichever
 * host touches it. A server or a format therefore refuses a region larger
 * than its file system's free space plus what the file already holds
 * (region.allow_overcommit: a warning instead), before the file is created
 * or sized. A file this open created is removed again if the open fails. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "cxl/region_priv.h"
#include "util/fsperm.h"
#include "util/log.h"

#define ATTACH_TIMEOUT_MS_DEFAULT 10000

static const char *human(uint64_t b, char *buf, size_t n)
{
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (b < 1024) {
        snprintf(buf, n, "%llu bytes", (unsigned long long)b);
        return buf;
    }
    double v = (double)b / 1024;
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, u++;
    snprintf(buf, n, "%.2f %s (%llu bytes)", v, unit[u], (unsigned long long)b);
    return buf;
}

/* region.size against the free space of the file system of `where` (the
 * region file, or the directory a new one goes in) plus `held`, the bytes
 * the file already has. */
static int check_room(const struct pod_config *c, const char *where, const struct statvfs *vs,
                      uint64_t held, pod_err *err)
{
    uint64_t avail = (uint64_t)vs->f_bavail * vs->f_frsize;
    if (c->region.size <= avail + held) return 0;
    char need[64], have[64], had[80] = "";
    human(c->region.size, need, sizeof need);
    human(avail, have, sizeof have);
    if (held) {
        char h[64];
        snprintf(had, sizeof had, " besides the %s the file holds", human(held, h, sizeof h));
    }
    if (c->region.allow_overcommit) {
        pod_warn("region %s is larger than its file system: region.size is %s, the file "
                 "system of %s has %s free%s; region.allow_overcommit is set, so it is used "
                 "anyway: a host that touches a page the file system cannot give dies of "
                 "SIGBUS",
                 c->region.path, need, where, have, had);
        return 0;
    }
    pod_err_set(err, "region %s does not fit its file system: region.size is %s, the file "
                "system of %s has %s free%s (a region file is sparse: it would start, and a "
                "host would die of SIGBUS once the pod touches more than the free space); make "
                "region.size smaller, free space, or set region.allow_overcommit: true",
                c->region.path, need, where, have, had);
    return -1;
}

/* Room for a region file that does not exist yet: its directory's file
 * system. A directory that cannot be read is left to the create to report. */
static int check_room_new(const struct pod_config *c, pod_err *err)
{
    char dir[POD_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", c->region.path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    struct statvfs vs;
    if (statvfs(dir, &vs) != 0) return 0;
    return check_room(c, dir, &vs, 0, err);
}

int cxl_backing_check_room(int fd, const struct pod_config *c, pod_err *err)
{
    struct stat st;
    struct statvfs vs;
    if (c->region.kind == POD_REGION_DEVDAX) return 0;
    if (fstat(fd, &st) != 0 || fstatvfs(fd, &vs) != 0) {
        pod_err_set(err, "cannot stat region %s or its file system: %s", c->region.path,
                    strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) return 0;
    return check_room(c, c->region.path, &vs, (uint64_t)st.st_blocks * 512, err);
}

bool cxl_backing_same_file(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* A file this open created goes again with its descriptor. */
static int give_up(int fd, const char *path, bool created)
{
    if (created) unlink(path);
    close(fd);
    return -1;
}

/* Open an existing backing; with create, a missing file is created. */
int cxl_backing_open(const struct pod_config *c, bool create, bool *created, pod_err *err)
{
    const char *path = c->region.path;
    *created = false;
    if (pod_check_parents("region", path, err)) return -1;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create && c->region.kind != POD_REGION_DEVDAX) {
        if (check_room_new(c, err)) return -1;
        /* O_EXCL: never through a dangling symlink; EEXIST: another host
         * created it meanwhile. */
        fd = pod_create_private(path, O_RDWR | O_CLOEXEC | O_EXCL);
        if (fd >= 0) *created = true;
        else if (errno == EEXIST) fd = open(path, O_RDWR | O_CLOEXEC);
    }
    if (fd < 0) {
        if (errno == ENOENT && !create)
            pod_err_set(err, "region %s does not exist (format it first, or start a server)",
                        path);
        else
            pod_err_set(err, "cannot open region %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        pod_err_set(err, "cannot stat %s: %s", path, strerror(errno));
        return give_up(fd, path, *created);
    }
    bool is_chr = S_ISCHR(st.st_mode);
    if (c->region.kind == POD_REGION_DEVDAX && !is_chr) {
        pod_err_set(err, "region.kind is devdax but %s is not a character device", path);
        return give_up(fd, path, *created);
    }
    if (c->region.kind != POD_REGION_DEVDAX && !S_ISREG(st.st_mode)) {
        pod_err_set(err, "region.kind is %s but %s is not a regular file%s",
                    pod_region_kind_name(c->region.kind), path,
                    is_chr ? " (a device: use kind devdax)" : "");
        return give_up(fd, path, *created);
    }
    /* A file someone else owns or may write could hold anything. (A
     * device's owner and mode are the administrator's.) */
    if (S_ISREG(st.st_mode) && pod_check_trusted("region", path, &st, err)) {
        return give_up(fd, path, *created);
    }
    return fd;
}

/* Bounded wait for the region's file lock. */
int cxl_backing_lock(int fd, int how, const char *path, pod_err *err)
{
    const char *env = getenv("PODDB_ATTACH_TIMEOUT_MS");
    long timeout_ms = env ? atol(env) : ATTACH_TIMEOUT_MS_DEFAULT;
    struct timespec nap = {0, 2 * 1000 * 1000};
    for (long waited = 0;; waited += 2) {
        if (flock(fd, how | LOCK_NB) == 0) return 0;
        if (errno != EWOULDBLOCK && errno != EINTR) {
            pod_err_set(err, "cannot lock region %s: %s", path, strerror(errno));
            return -1;
        }
        if (waited >= timeout_ms) {
            pod_err_set(err,
                        "region %s stayed locked for %ld ms: another process is formatting "
                        "or attaching and did not finish (set PODDB_ATTACH_TIMEOUT_MS to "
                        "wait longer)",
                        path, timeout_ms);
            return -1;
        }
        nanosleep(&nap, NULL);
    }
}

enum cxl_identity cxl_identify(const void *page, uint64_t size, bool device)
{
    if (!device && size == 0) return CXL_ID_EMPTY;
    uint64_t magic = 0;
    if (device || size >= sizeof magic) memcpy(&magic, page, sizeof magic);
    if (magic == CXL_MAGIC) return CXL_ID_PODDB;
    if (!device) return CXL_ID_FOREIGN;
    const unsigned char *p = page;
    for (size_t i = 0; i < CXL_CONTROL_OFF; i++)
        if (p[i]) return CXL_ID_FOREIGN;
    return CXL_ID_EMPTY;
}

int cxl_refuse_foreign(const char *path, uint64_t size, bool device, pod_err *err)
{
    if (device)
        pod_err_set(err, "region %s is not a PodDB region: its first 4 KiB are neither zero "
                    "nor a PodDB superblock, so PodDB does not format it (if the device is "
                    "meant for PodDB, clear its first 4 KiB)", path);
    else
        pod_err_set(err, "region %s is not a PodDB region: its %llu bytes do not start with "
                    "a PodDB superblock, and PodDB never formats, resizes or removes such a "
                    "file (set region.path to a new path, or remove the file yourself if "
                    "nothing needs it)", path, (unsigned long long)size);
    return -1;
}

static int pread_full(int fd, void *buf, size_t len, uint64_t *got)
{
    *got = 0;
    while (*got < len) {
        ssize_t n = pread(fd, (char *)buf + *got, len - *got, (off_t)*got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) break;
        *got += (uint64_t)n;
    }
    return 0;
}

int cxl_backing_read_head(int fd, void *buf, uint64_t *size, const char *path, pod_err *err)
{
    struct stat st;
    uint64_t got;
    memset(buf, 0, CXL_HEAD_SIZE);
    if (fstat(fd, &st) != 0 || pread_full(fd, buf, CXL_HEAD_SIZE, &got) != 0) {
        pod_err_set(err, "cannot read region %s: %s", path, strerror(errno));
        return -1;
    }
    *size = (uint64_t)st.st_size;
    return 0;
}

int cxl_backing_stamp(int fd, const char *path, pod_err *err)
{
    static const struct cxl_superblock stamp = {.magic = CXL_MAGIC,
                                                .layout_version = CXL_LAYOUT_VERSION,
                                                .state = CXL_SB_FORMATTING};
    unsigned char page[CXL_CONTROL_OFF] = {0};
    memcpy(page, &stamp, sizeof stamp);
    if (pwrite(fd, page, sizeof page, 0) != (ssize_t)sizeof page) {
        pod_err_set(err, "cannot write the superblock of region %s: %s", path,
                    strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}

int cxl_backing_size(int fd, const struct pod_config *c, pod_err *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        pod_err_set(err, "cannot stat %s: %s", c->region.path, strerror(errno));
        return -1;
    }
    if (c->region.kind == POD_REGION_DEVDAX) return 0; /* checked against the source size */
    if ((uint64_t)st.st_size == c->region.size) return 0;
    if (ftruncate(fd, (off_t)c->region.size) != 0) {
        pod_err_set(err, "cannot size region %s to %llu bytes: %s", c->region.path,
                    (unsigned long long)c->region.size, strerror(errno));
        return -1;
    }
    return 0;
}
