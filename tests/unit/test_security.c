/* What a careless operator or another local user cannot do to a pod
 * (docs/security.md):
 *   - a file that is not a PodDB region is never formatted, resized or
 *     removed, and a live pod's region is not resized by another pod's host;
 *   - a region larger than its file system's free space, or on a NUMA node
 *     the machine lacks, is refused before its file is created or sized;
 *   - a region file, a log directory or a directory above it that belongs to
 *     another user, or that others may write, is refused;
 *   - two servers never share a log directory (a lock), and a log directory
 *     is never replayed by another pod or host (its identity);
 *   - what a server creates is private whatever the umask (files 0600,
 *     directories 0700, its socket 0660);
 *   - running out of file descriptors does not make a live host look dead;
 *   - a refused start leaves nothing behind (no region file, log directory
 *     or socket), a socket path that holds something else than a socket is
 *     refused and left alone, and a socket's directory is checked like a
 *     log directory's;
 *   - a TCP token file that others may read or replace refuses the start.
 * The log-directory tests run real servers ($PODDB_BIN/poddb-server). Tests
 * that need another user chown to uid 65534; where chown is impossible they
 * say so and are not run. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cxl/region.h"
#include "helpers/server_harness.h"
#include "helpers/testutil.h"
#include "log/claim.h"
#include "log/crc32c.h"

#define MiB (1ull << 20)
#define OTHER_UID 65534
#define START_TIMEOUT_MS 30000
#define STOP_TIMEOUT_MS 20000

/* ---- files ------------------------------------------------------------------ */

/* Write len pseudo-random bytes at off (a file's contents no one would mistake
 * for a region). */
static void write_noise(int fd, uint64_t off, uint64_t len, uint64_t seed)
{
    static unsigned char buf[1 << 16];
    uint64_t x = seed | 1;
    for (uint64_t done = 0; done < len;) {
        for (size_t i = 0; i < sizeof buf; i += 8) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            memcpy(buf + i, &x, 8);
        }
        size_t n = len - done < sizeof buf ? (size_t)(len - done) : sizeof buf;
        ck_assert_int_eq(pwrite(fd, buf, n, (off_t)(off + done)), (ssize_t)n);
        done += n;
    }
}

/* CRC-32C of len bytes at off. */
static uint32_t crc_range(const char *path, uint64_t off, uint64_t len)
{
    static unsigned char buf[1 << 20];
    int fd = open(path, O_RDONLY);
    ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
    uint32_t crc = 0;
    for (uint64_t done = 0; done < len;) {
        size_t want = len - done < sizeof buf ? (size_t)(len - done) : sizeof buf;
        ssize_t n = pread(fd, buf, want, (off_t)(off + done));
        ck_assert_int_gt(n, 0);
        crc = crc32c(crc, buf, (size_t)n);
        done += (uint64_t)n;
    }
    close(fd);
    return crc;
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    ck_assert_msg(stat(path, &st) == 0, "%s: %s", path, strerror(errno));
    return (uint64_t)st.st_size;
}

static unsigned file_mode(const char *path)
{
    struct stat st;
    ck_assert_msg(lstat(path, &st) == 0, "%s: %s", path, strerror(errno));
    return st.st_mode & 07777;
}

static struct pod_config *region_cfg(int nhosts, uint64_t size)
{
    struct pod_config *c = malloc(sizeof *c);
    tu_make_config(c, nhosts, size, 8 * MiB, false);
    return c;
}

/* chown, or say why the test cannot run (tests run as root; another user is
 * simulated by uid 65534). */
static bool chown_or_skip(const char *path, uid_t uid, const char *test)
{
    if (chown(path, uid, (gid_t)-1) == 0) return true;
    fprintf(stderr, "%s: NOT RUN: cannot chown %s to uid %u (%s); another user cannot be "
            "simulated here\n", test, path, (unsigned)uid, strerror(errno));
    return false;
}

/* Every way in (a server's start, poddb-region format with and without
 * --force, inspect, destroy with and without --force) refuses path. */
static void expect_every_open_refused(struct pod_config *c, const char *needle)
{
    static const unsigned flags[] = {CXL_OPEN_CREATE | CXL_OPEN_HEARTBEAT, CXL_OPEN_FORMAT,
                                     CXL_OPEN_FORMAT | CXL_OPEN_FORCE, 0};
    pod_err err = {{0}};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        int host = flags[i] & CXL_OPEN_CREATE ? 0 : -1;
        struct cxl_region *r = cxl_region_open(c, host, flags[i], &err);
        if (r) cxl_region_close(r);
        ck_assert_msg(r == NULL, "open with flags %#x accepted %s", flags[i], c->region.path);
        ck_assert_msg(strstr(err.msg, needle), "flags %#x: '%s' lacks '%s'", flags[i], err.msg,
                      needle);
    }
    for (int force = 0; force < 2; force++) {
        ck_assert_int_eq(cxl_region_destroy(c, force, &err), -1);
        ck_assert_msg(strstr(err.msg, needle), "destroy: '%s' lacks '%s'", err.msg, needle);
    }
}

/* ---- the region's identity ---------------------------------------------------- */

START_TEST(foreign_file_is_never_touched)
{
    struct pod_config *c = region_cfg(1, 1024 * MiB);
    const uint64_t size = 10 * MiB + MiB / 2; /* 10.5 MiB of someone's data */
    int fd = open(c->region.path, O_RDWR | O_CREAT | O_EXCL, 0600);
    ck_assert_int_ge(fd, 0);
    write_noise(fd, 0, size, 42);
    close(fd);
    uint32_t crc = crc_range(c->region.path, 0, size);

    expect_every_open_refused(c, "is not a PodDB region");
    ck_assert_uint_eq(file_size(c->region.path), size);
    ck_assert_uint_eq(crc_range(c->region.path, 0, size), crc);
    free(c);
}
END_TEST

START_TEST(larger_foreign_file_is_not_cut)
{
    struct pod_config *c = region_cfg(1, 1024 * MiB);
    const uint64_t size = 2048 * MiB; /* sparse: data at both ends */
    int fd = open(c->region.path, O_RDWR | O_CREAT | O_EXCL, 0600);
    ck_assert_int_ge(fd, 0);
    write_noise(fd, 0, MiB, 7);
    write_noise(fd, size - MiB, MiB, 8);
    close(fd);
    uint32_t head = crc_range(c->region.path, 0, MiB), tail = crc_range(c->region.path, size - MiB, MiB);

    expect_every_open_refused(c, "is not a PodDB region");
    ck_assert_uint_eq(file_size(c->region.path), size);
    ck_assert_uint_eq(crc_range(c->region.path, 0, MiB), head);
    ck_assert_uint_eq(crc_range(c->region.path, size - MiB, MiB), tail);
    free(c);
}
END_TEST

/* A zero-length file holds nothing: a server may format it. It is not a
 * region either, so destroy leaves it alone. */
START_TEST(empty_file_is_formatted_not_destroyed)
{
    struct pod_config *c = region_cfg(1, 512 * MiB);
    close(open(c->region.path, O_RDWR | O_CREAT | O_EXCL, 0600));
    pod_err err = {{0}};
    ck_assert_int_eq(cxl_region_destroy(c, true, &err), -1);
    ck_assert_msg(strstr(err.msg, "is not a PodDB region"), "%s", err.msg);
    ck_assert_uint_eq(file_size(c->region.path), 0);

    struct cxl_region *r = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err);
    ck_assert_msg(r != NULL, "%s", err.msg);
    ck_assert(r->formatted_now);
    cxl_region_close(r);
    ck_assert_uint_eq(file_size(c->region.path), 512 * MiB);
    ck_assert_int_eq(cxl_region_destroy(c, false, &err), 0);
    ck_assert_int_eq(access(c->region.path, F_OK), -1);
    free(c);
}
END_TEST

/* A host of another pod (another config on the same path) neither resizes
 * nor formats a live pod's region; once that pod is gone, its region is
 * volatile and may be formatted again (a new generation). */
START_TEST(live_region_of_another_pod_is_not_resized)
{
    struct pod_config *a = region_cfg(1, 1024 * MiB);
    struct pod_config *b = malloc(sizeof *b);
    *b = *a;
    b->region.size = 512 * MiB;
    pod_err err = {{0}};
    struct cxl_region *ra = cxl_region_open(a, 0, CXL_OPEN_CREATE, &err);
    ck_assert_msg(ra != NULL, "%s", err.msg);
    uint64_t gen = ra->sb->generation;

    ck_assert_ptr_null(cxl_region_open(b, 0, CXL_OPEN_CREATE, &err));
    ck_assert_msg(strstr(err.msg, "different configuration"), "%s", err.msg);
    ck_assert_ptr_null(cxl_region_open(b, -1, CXL_OPEN_FORMAT, &err));
    ck_assert_msg(strstr(err.msg, "live host"), "%s", err.msg);
    ck_assert_int_eq(cxl_region_destroy(b, false, &err), -1);
    ck_assert_msg(strstr(err.msg, "live host"), "%s", err.msg);
    ck_assert_uint_eq(file_size(a->region.path), 1024 * MiB);
    /* pod A still uses all of it */
    char *last = ra->base + 1024 * MiB - 64;
    memset(last, 0x5a, 64);
    ck_assert_int_eq(last[63], 0x5a);
    memset(last, 0, 64);
    cxl_region_close(ra);

    struct cxl_region *rb = cxl_region_open(b, 0, CXL_OPEN_CREATE, &err);
    ck_assert_msg(rb != NULL, "%s", err.msg);
    ck_assert(rb->formatted_now);
    ck_assert_uint_eq(rb->sb->generation, gen + 1);
    cxl_region_close(rb);
    ck_assert_uint_eq(file_size(a->region.path), 512 * MiB);
    free(a);
    free(b);
}
END_TEST

/* ---- room on the region's file system --------------------------------------------- */

/* A region size larger than twice /dev/shm's free space (0 when no valid
 * size is: a file system larger than 32 TiB). */
static uint64_t size_beyond_shm(void)
{
    struct statvfs vs;
    ck_assert_int_eq(statvfs("/dev/shm", &vs), 0);
    uint64_t avail = (uint64_t)vs.f_bavail * vs.f_frsize;
    uint64_t size = (2 * avail + (1ull << 30)) & ~((1ull << 30) - 1);
    return size <= (64ull << 40) ? size : 0;
}

/* A region larger than its file system's free space is refused by a server
 * and by poddb-region format, naming both sizes, before anything is created
 * or resized; region.allow_overcommit lets it be used with a warning. */
START_TEST(region_larger_than_its_file_system_is_refused)
{
    uint64_t big = size_beyond_shm();
    if (!big) {
        fprintf(stderr, "region_larger_than_its_file_system_is_refused: NOT RUN: /dev/shm has "
                "more than 32 TiB free\n");
        return;
    }
    struct pod_config *c = region_cfg(1, big);
    char bytes[32];
    snprintf(bytes, sizeof bytes, "(%llu bytes)", (unsigned long long)big);
    pod_err err = {{0}};
    static const unsigned flags[] = {CXL_OPEN_CREATE | CXL_OPEN_HEARTBEAT, CXL_OPEN_FORMAT,
                                     CXL_OPEN_FORMAT | CXL_OPEN_FORCE};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        int host = flags[i] & CXL_OPEN_CREATE ? 0 : -1;
        struct cxl_region *r = cxl_region_open(c, host, flags[i], &err);
        if (r) cxl_region_close(r);
        ck_assert_msg(r == NULL, "flags %#x: a region of %llu bytes was opened", flags[i],
                      (unsigned long long)big);
        ck_assert_msg(strstr(err.msg, "does not fit its file system") && strstr(err.msg, bytes) &&
                      strstr(err.msg, "free") && strstr(err.msg, "allow_overcommit"),
                      "flags %#x: %s", flags[i], err.msg);
        ck_assert_msg(access(c->region.path, F_OK) == -1, "flags %#x: %s was created", flags[i],
                      c->region.path);
    }

    /* an empty file is not sized; a smaller region of a dead pod is not resized */
    close(open(c->region.path, O_RDWR | O_CREAT | O_EXCL, 0600));
    ck_assert_ptr_null(cxl_region_open(c, 0, CXL_OPEN_CREATE, &err));
    ck_assert_msg(strstr(err.msg, "does not fit its file system"), "%s", err.msg);
    ck_assert_uint_eq(file_size(c->region.path), 0);
    struct pod_config *small = malloc(sizeof *small);
    *small = *c;
    small->region.size = 512 * MiB;
    struct cxl_region *r = cxl_region_open(small, -1, CXL_OPEN_FORMAT, &err);
    ck_assert_msg(r != NULL, "%s", err.msg);
    cxl_region_close(r);
    ck_assert_ptr_null(cxl_region_open(c, 0, CXL_OPEN_CREATE, &err));
    ck_assert_msg(strstr(err.msg, "does not fit its file system"), "%s", err.msg);
    ck_assert_uint_eq(file_size(c->region.path), 512 * MiB);
    ck_assert_int_eq(cxl_region_destroy(small, false, &err), 0);

    /* allowed: formatted (sparse), with a warning */
    c->region.allow_overcommit = true;
    r = cxl_region_open(c, -1, CXL_OPEN_FORMAT, &err);
    ck_assert_msg(r != NULL, "%s", err.msg);
    cxl_region_close(r);
    ck_assert_uint_eq(file_size(c->region.path), big);
    ck_assert_int_eq(cxl_region_destroy(c, false, &err), 0);
    free(small);
    free(c);
}
END_TEST

/* A NUMA node the machine lacks is refused before the region file exists. */
START_TEST(missing_numa_node_creates_nothing)
{
    struct pod_config *c = region_cfg(1, 512 * MiB);
    c->region.numa_node = 1023;
    pod_err err = {{0}};
    struct cxl_region *r = cxl_region_open(c, 0, CXL_OPEN_CREATE | CXL_OPEN_HEARTBEAT, &err);
    if (r) { /* a machine with 1024 NUMA nodes, or a kernel without NUMA */
        cxl_region_close(r);
        cxl_region_destroy(c, false, &err);
        free(c);
        return;
    }
    ck_assert_msg(strstr(err.msg, "region.numa_node is 1023"), "%s", err.msg);
    ck_assert_msg(access(c->region.path, F_OK) == -1, "%s was created", c->region.path);
    free(c);
}
END_TEST

/* ---- ownership and modes -------------------------------------------------------- */

START_TEST(region_of_another_user_is_refused)
{
    struct pod_config *c = region_cfg(1, 512 * MiB);
    pod_err err = {{0}};
    struct cxl_region *r = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err);
    ck_assert_msg(r != NULL, "%s", err.msg);
    cxl_region_close(r);
    if (!chown_or_skip(c->region.path, OTHER_UID, "region_of_another_user_is_refused")) {
        free(c);
        return;
    }
    ck_assert_ptr_null(r = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err));
    ck_assert_msg(strstr(err.msg, c->region.path) && strstr(err.msg, "uid 65534") &&
                  strstr(err.msg, "0600"), "%s", err.msg);
    ck_assert_int_eq(cxl_region_destroy(c, true, &err), -1);
    ck_assert_int_eq(access(c->region.path, F_OK), 0);

    /* this user's file, but world-writable */
    ck_assert_int_eq(chown(c->region.path, geteuid(), (gid_t)-1), 0);
    ck_assert_int_eq(chmod(c->region.path, 0666), 0);
    ck_assert_ptr_null(r = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err));
    ck_assert_msg(strstr(err.msg, "0666") && strstr(err.msg, "writable"), "%s", err.msg);

    ck_assert_int_eq(chmod(c->region.path, 0600), 0);
    ck_assert_ptr_nonnull(r = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err));
    cxl_region_close(r);
    free(c);
}
END_TEST

/* ---- liveness under resource exhaustion --------------------------------------------- */

static int attach_and_die(void *arg)
{
    pod_err err;
    struct cxl_region *r = cxl_region_open(arg, 2, CXL_OPEN_CREATE, &err);
    return r ? 0 : 1; /* exits attached: a dead host in the table */
}

/* Fill every free descriptor below a lowered limit; returns how many. */
static int use_all_fds(int *fds, int max)
{
    int n = 0, src = open("/dev/null", O_RDONLY);
    ck_assert_int_ge(src, 0);
    fds[n++] = src;
    while (n < max) {
        int fd = dup(src);
        if (fd < 0) break;
        fds[n++] = fd;
    }
    ck_assert_int_eq(errno, EMFILE);
    return n;
}

START_TEST(emfile_does_not_kill_a_host)
{
    struct pod_config *c = region_cfg(3, 1024 * MiB);
    pod_err err = {{0}};
    struct cxl_region *r0 = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err);
    ck_assert_msg(r0 != NULL, "%s", err.msg);
    struct cxl_region *r1 = cxl_region_open(c, 1, CXL_OPEN_CREATE, &err);
    ck_assert_msg(r1 != NULL, "%s", err.msg);
    int child = tu_fork(attach_and_die, c);
    ck_assert_int_eq(tu_wait_child(child, 30000), 0);
    ck_assert(cxl_host_alive(r0, 1));
    ck_assert(!cxl_host_alive(r0, 2));

    struct rlimit old, low;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = 256;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
    static int fds[256];
    int n = use_all_fds(fds, 256);
    bool alive1 = cxl_host_alive(r0, 1), alive2 = cxl_host_alive(r0, 2);
    int live = cxl_live_hosts(r0);
    for (int i = 0; i < n; i++) close(fds[i]);
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);

    ck_assert_msg(alive1, "a live host looked dead while this process had no descriptor free");
    ck_assert_msg(!alive2, "a dead host looked alive while this process had no descriptor free");
    ck_assert_int_eq(live, 2);
    cxl_region_close(r1);
    cxl_region_close(r0);
    free(c);
}
END_TEST

/* ---- log directories, with real servers ---------------------------------------------- */

/* s's config with log_dir instead of the harness's (and s's own region and
 * socket). */
static void set_log_dir(struct sh_server *s, const char *log_dir)
{
    FILE *f = fopen(s->conf, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "region:\n  path: %s\n  kind: shm\n  size: 512MiB\n  hwcc_budget: 16MiB\n"
            "hosts:\n  - workers: 1\n    loggers: 1\n    socket: %s\n    log_dir: %s\n"
            "tables:\n  - name: kv\n    key_size: 64\n    value_size: 1024\n"
            "engine:\n  epoch_ms: 10\n",
            s->region, s->sock, log_dir);
    ck_assert_int_eq(fclose(f), 0);
}

/* A server of its own (region, socket) on log_dir. */
static void prepare_on(struct sh_server *s, const char *log_dir)
{
    ck_assert_int_eq(sh_prepare(s, 1, 0, NULL), 0);
    set_log_dir(s, log_dir);
}

/* The server must refuse to start, saying each of the needles. */
static void expect_refused(struct sh_server *s, const char *const *needles, int n)
{
    int rc = sh_start(s, START_TIMEOUT_MS);
    if (rc == 0) {
        sh_stop(s, SIGTERM, STOP_TIMEOUT_MS);
        sh_dump_log(s, "started");
        ck_abort_msg("the server started (its log is above)");
    }
    ck_assert_msg(WIFEXITED(s->status) && WEXITSTATUS(s->status) != 0,
                  "wait status %d: not a refusal", s->status);
    for (int i = 0; i < n; i++)
        if (!sh_file_contains(s->log, needles[i])) {
            sh_dump_log(s, "refused");
            ck_abort_msg("the refusal does not say '%s' (its log is above)", needles[i]);
        }
    ck_assert_ptr_null(sh_sanitizer_error(s));
}

static void start_ok(struct sh_server *s)
{
    if (sh_start(s, START_TIMEOUT_MS) != 0) {
        sh_dump_log(s, "did not start");
        ck_abort_msg("the server did not start (wait status %d)", s->status);
    }
}

static void stop_ok(struct sh_server *s)
{
    int st = sh_stop(s, SIGTERM, STOP_TIMEOUT_MS);
    ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "stop: wait status %d", st);
    ck_assert_ptr_null(sh_sanitizer_error(s));
}

static void put_key(const char *sock, const char *key)
{
    char e[256];
    pod_client *cl = pod_client_connect(sock, e, sizeof e);
    ck_assert_msg(cl != NULL, "%s", e);
    pod_client_set_timeout(cl, 20000);
    pod_value a[] = {pod_v_str("kv"), pod_v_str(key), pod_v_str("v")};
    pod_reply *r = pod_client_call(cl, "kv.put", a, 3);
    ck_assert_msg(r && pod_reply_status(r) == POD_OK, "kv.put %s", key);
    pod_reply_free(r);
    pod_client_close(cl);
}

/* The claim itself: a second claim is refused naming the holder's pid; once
 * released, the directory is still only its own pod's and host's. */
START_TEST(log_dir_claim_names_holder_and_owner)
{
    char dir[] = "/tmp/poddb-srvtest-claim-XXXXXX", id[64], pid[32];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    pod_err err = {{0}};
    struct logdir_claim *c = logdir_claim(dir, "/dev/shm/pod-a", 0, &err);
    ck_assert_msg(c != NULL, "%s", err.msg);
    snprintf(pid, sizeof pid, "pid %d", (int)getpid());
    ck_assert_ptr_null(logdir_claim(dir, "/dev/shm/pod-a", 0, &err));
    ck_assert_msg(strstr(err.msg, dir) && strstr(err.msg, pid), "%s", err.msg);
    logdir_release(c);

    ck_assert_ptr_null(logdir_claim(dir, "/dev/shm/pod-a", 1, &err));
    ck_assert_msg(strstr(err.msg, "belongs to host 0 of the pod of region /dev/shm/pod-a"), "%s",
                  err.msg);
    ck_assert_ptr_null(logdir_claim(dir, "/dev/shm/pod-b", 0, &err));
    ck_assert_msg(strstr(err.msg, "not to host 0 of the pod of region /dev/shm/pod-b"), "%s",
                  err.msg);
    ck_assert_ptr_nonnull(c = logdir_claim(dir, "/dev/shm/pod-a", 0, &err));
    logdir_release(c);

    snprintf(id, sizeof id, "%s/identity", dir);
    FILE *f = fopen(id, "w");
    fputs("something else\n", f);
    fclose(f);
    ck_assert_ptr_null(logdir_claim(dir, "/dev/shm/pod-a", 0, &err));
    ck_assert_msg(strstr(err.msg, "damaged"), "%s", err.msg);
    unlink(id);
    char lock[64];
    snprintf(lock, sizeof lock, "%s/lock", dir);
    unlink(lock);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

START_TEST(second_pod_on_a_live_log_dir_is_refused)
{
    struct sh_server a, b;
    ck_assert_int_eq(sh_prepare(&a, 1, 0, NULL), 0);
    char dir[SH_PATH + 16], pid[32];
    snprintf(dir, sizeof dir, "%s/log-0", a.dir);
    set_log_dir(&a, dir);
    prepare_on(&b, dir); /* another pod: its own region and socket, a's log directory */
    start_ok(&a);
    put_key(a.sock, "a-key");
    snprintf(pid, sizeof pid, "pid %d", (int)a.pid);

    const char *live[] = {dir, "in use", pid};
    expect_refused(&b, live, 3);
    ck_assert(sh_ping(a.sock, 2000));
    stop_ok(&a);

    /* a stopped: the directory is still pod a's */
    const char *dead[] = {dir, "belongs to", a.region};
    expect_refused(&b, dead, 3);
    start_ok(&a);
    stop_ok(&a);
}
END_TEST

START_TEST(log_dir_of_another_user_is_refused)
{
    struct sh_server s;
    ck_assert_int_eq(sh_prepare(&s, 1, 0, NULL), 0);
    char dir[SH_PATH + 32], seg[SH_PATH + 64];
    /* a log directory someone else made (and filled) before the pod started */
    snprintf(dir, sizeof dir, "%s/log-0", s.dir);
    ck_assert_int_eq(mkdir(dir, 0777), 0);
    ck_assert_int_eq(chmod(dir, 0777), 0);
    snprintf(seg, sizeof seg, "%s/seg-0-0-1.log", dir);
    close(open(seg, O_WRONLY | O_CREAT, 0644));
    if (!chown_or_skip(dir, OTHER_UID, "log_dir_of_another_user_is_refused")) return;
    set_log_dir(&s, dir);
    const char *theirs[] = {dir, "uid 65534", "0777"};
    expect_refused(&s, theirs, 3);

    /* a parent of another user: nothing is created inside it */
    struct sh_server p, g, t;
    char parent[SH_PATH + 32], sub[SH_PATH + 48];
    snprintf(parent, sizeof parent, "%s/theirs", s.dir);
    ck_assert_int_eq(mkdir(parent, 0755), 0);
    ck_assert_int_eq(chown(parent, OTHER_UID, (gid_t)-1), 0);
    snprintf(sub, sizeof sub, "%s/log-0", parent);
    prepare_on(&p, sub);
    const char *their_parent[] = {parent, "uid 65534"};
    expect_refused(&p, their_parent, 2);
    ck_assert_int_eq(access(sub, F_OK), -1);

    /* a group-writable parent without the sticky bit */
    snprintf(parent, sizeof parent, "%s/shared", s.dir);
    ck_assert_int_eq(mkdir(parent, 0775), 0);
    ck_assert_int_eq(chmod(parent, 0775), 0);
    snprintf(sub, sizeof sub, "%s/log-0", parent);
    prepare_on(&g, sub);
    const char *shared[] = {parent, "0775", "writable"};
    expect_refused(&g, shared, 3);

    /* a sticky world-writable parent of root's, like /tmp, is fine; a log
     * directory of this user's that others may read is made private */
    snprintf(parent, sizeof parent, "%s/tmp", s.dir);
    ck_assert_int_eq(mkdir(parent, 0777), 0);
    ck_assert_int_eq(chmod(parent, 01777), 0);
    snprintf(sub, sizeof sub, "%s/log-0", parent);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    ck_assert_int_eq(chmod(sub, 0755), 0);
    prepare_on(&t, sub);
    start_ok(&t);
    stop_ok(&t);
    ck_assert_uint_eq(file_mode(sub), 0700);
}
END_TEST

/* Wait until dir holds a complete checkpoint. */
static bool wait_checkpoint(const char *dir, int timeout_ms)
{
    uint64_t end = sh_now_ms() + (uint64_t)timeout_ms;
    while (sh_now_ms() < end) {
        DIR *d = opendir(dir);
        struct dirent *e;
        bool found = false;
        while (d && (e = readdir(d)))
            if (strncmp(e->d_name, "ckpt-", 5) == 0 && strstr(e->d_name, ".log")) found = true;
        if (d) closedir(d);
        if (found) return true;
        sh_sleep_ms(20);
    }
    return false;
}

START_TEST(files_are_private_under_umask_000)
{
    umask(0);
    struct sh_server s;
    ck_assert_int_eq(sh_prepare(&s, 1, 0, NULL), 0);
    char deep[SH_PATH + 16], mid[SH_PATH + 32], dir[SH_PATH + 48];
    snprintf(deep, sizeof deep, "%s/deep", s.dir);
    snprintf(mid, sizeof mid, "%s/er", deep);
    snprintf(dir, sizeof dir, "%s/log-0", mid);
    set_log_dir(&s, dir);
    start_ok(&s);
    for (int i = 0; i < 20; i++) {
        char k[32];
        snprintf(k, sizeof k, "key-%d", i);
        put_key(s.sock, k);
    }
    char e[256];
    pod_client *cl = pod_client_connect(s.sock, e, sizeof e);
    ck_assert_msg(cl != NULL, "%s", e);
    pod_client_set_timeout(cl, 20000);
    pod_value full = pod_v_str("full");
    pod_reply *r = pod_client_call(cl, "sys.checkpoint", &full, 1);
    ck_assert_msg(r && pod_reply_status(r) == POD_OK, "sys.checkpoint: %s",
                  r ? pod_reply_message(r) : pod_client_error(cl));
    pod_reply_free(r);
    pod_client_close(cl);
    ck_assert_msg(wait_checkpoint(dir, 20000), "no checkpoint in %s", dir);

    ck_assert_uint_eq(file_mode(s.sock), 0660);
    ck_assert_uint_eq(file_mode(s.region), 0600);
    ck_assert_uint_eq(file_mode(deep), 0700);
    ck_assert_uint_eq(file_mode(mid), 0700);
    ck_assert_uint_eq(file_mode(dir), 0700);
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    int files = 0;
    bool seg = false, ckpt = false, durable = false;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char p[SH_PATH + 320];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        ck_assert_msg(file_mode(p) == 0600, "%s has mode %04o", p, file_mode(p));
        seg |= strncmp(de->d_name, "seg-", 4) == 0;
        ckpt |= strncmp(de->d_name, "ckpt-", 5) == 0;
        durable |= strcmp(de->d_name, "durable-epoch") == 0;
        files++;
    }
    closedir(d);
    ck_assert_msg(seg && ckpt && durable, "%d files: segment %d, checkpoint %d, durable-epoch %d",
                  files, seg, ckpt, durable);
    stop_ok(&s);
}
END_TEST

/* ---- a refused start leaves nothing behind -------------------------------------------- */

/* s's config (its own region of `size`, socket and log directory DIR/log-0):
 * host_extra goes into its host entry, tail after the tables. nhosts 2 adds
 * a host 1 (DIR/pod-1.sock, DIR/log-1) that is never started. */
static void write_conf(struct sh_server *s, int nhosts, const char *size, const char *key_size,
                       const char *host_extra, const char *tail)
{
    FILE *f = fopen(s->conf, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "region:\n  path: %s\n  kind: shm\n  size: %s\n  hwcc_budget: 16MiB\n"
            "hosts:\n  - workers: 1\n    loggers: 1\n    socket: %s\n    log_dir: %s/log-0\n%s",
            s->region, size, s->sock, s->dir, host_extra);
    if (nhosts == 2)
        fprintf(f, "  - workers: 1\n    socket: %s/pod-1.sock\n    log_dir: %s/log-1\n", s->dir,
                s->dir);
    fprintf(f,
            "tables:\n  - name: kv\n    key_size: %s\n    value_size: 1024\n"
            "engine:\n  epoch_ms: 10\n%s",
            key_size, tail);
    ck_assert_int_eq(fclose(f), 0);
}

/* Neither s's region, nor its log directory (nor anything in it, when it
 * existed before), nor its socket exists. */
static void expect_nothing_left(const struct sh_server *s, bool log_dir_existed)
{
    char log_dir[SH_PATH + 16], lock[SH_PATH + 32];
    snprintf(log_dir, sizeof log_dir, "%s/log-0", s->dir);
    snprintf(lock, sizeof lock, "%s/lock", log_dir);
    ck_assert_msg(access(s->region, F_OK) == -1, "the refused start left its region %s", s->region);
    if (log_dir_existed)
        ck_assert_msg(access(lock, F_OK) == -1, "the refused start left %s", lock);
    else
        ck_assert_msg(access(log_dir, F_OK) == -1, "the refused start left its log directory %s",
                      log_dir);
    ck_assert_msg(access(s->sock, F_OK) == -1, "the refused start left its socket %s", s->sock);
}

/* A TCP listener on 127.0.0.1 at a free port (its descriptor in *fd). */
static int tcp_listener(int *fd)
{
    *fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(*fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    ck_assert_int_eq(bind(*fd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(*fd, 1), 0);
    ck_assert_int_eq(getsockname(*fd, (struct sockaddr *)&sa, &len), 0);
    return ntohs(sa.sin_port);
}

/* Every refusal of a start comes before its region file, log directory and
 * socket exist (a TCP token file others may read, a TCP port in use, a
 * module that does not load, a region too large for /dev/shm, another pod's
 * log directory), and what a failure
 * later in the start created is removed again (a key too long for a pod of
 * several hosts is found once the region is open). */
START_TEST(refused_start_leaves_nothing)
{
    struct sh_server s;
    char host_extra[2 * SH_PATH], tail[SH_PATH + 64], needle[SH_PATH + 64];

    ck_assert_int_eq(sh_prepare(&s, 1, 0, NULL), 0);
    ck_assert_int_eq(sh_write_token(&s), 0);
    ck_assert_int_eq(chmod(s.token_file, 0640), 0);
    snprintf(host_extra, sizeof host_extra, "    tcp_port: 1\n    tcp_token_file: %s\n",
             s.token_file);
    write_conf(&s, 1, "512MiB", "64", host_extra, "");
    const char *token[] = {s.token_file, "readable by group or others"};
    expect_refused(&s, token, 2);
    expect_nothing_left(&s, false);

    int lfd, port = tcp_listener(&lfd);
    ck_assert_int_eq(sh_prepare(&s, 1, 0, NULL), 0);
    ck_assert_int_eq(sh_write_token(&s), 0);
    snprintf(host_extra, sizeof host_extra, "    tcp_port: %d\n    tcp_token_file: %s\n", port,
             s.token_file);
    write_conf(&s, 1, "512MiB", "64", host_extra, "");
    snprintf(needle, sizeof needle, "cannot listen on 127.0.0.1:%d", port);
    const char *tcp[] = {needle, "in use"};
    expect_refused(&s, tcp, 2);
    expect_nothing_left(&s, false);
    close(lfd);

    ck_assert_int_eq(sh_prepare(&s, 1, 0, NULL), 0);
    snprintf(tail, sizeof tail, "modules:\n  - %s/missing.so\n", s.dir);
    write_conf(&s, 1, "512MiB", "64", "", tail);
    const char *module[] = {"cannot load", "missing.so"};
    expect_refused(&s, module, 2);
    expect_nothing_left(&s, false);

    uint64_t big = size_beyond_shm();
    if (big) {
        char size[32], bytes[48];
        snprintf(size, sizeof size, "%llu", (unsigned long long)big);
        snprintf(bytes, sizeof bytes, "(%llu bytes)", (unsigned long long)big);
        ck_assert_int_eq(sh_prepare(&s, 1, 0, NULL), 0);
        write_conf(&s, 1, size, "64", "", "");
        const char *room[] = {s.region, "does not fit its file system", bytes, "free"};
        expect_refused(&s, room, 4);
        expect_nothing_left(&s, false);
    }

    /* a log directory another pod's server wrote (its server is stopped) */
    ck_assert_int_eq(sh_prepare(&s, 1, 0, NULL), 0);
    write_conf(&s, 1, "512MiB", "64", "", "");
    char dir[SH_PATH + 16], id[SH_PATH + 32];
    snprintf(dir, sizeof dir, "%s/log-0", s.dir);
    snprintf(id, sizeof id, "%s/identity", dir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    FILE *f = fopen(id, "w");
    ck_assert_ptr_nonnull(f);
    fputs("PodDB log directory\nregion /dev/shm/another-pod\nhost 0\n", f);
    ck_assert_int_eq(fclose(f), 0);
    const char *other_pod[] = {dir, "belongs to host 0 of the pod of region /dev/shm/another-pod"};
    expect_refused(&s, other_pod, 2);
    expect_nothing_left(&s, true);

    /* found after the region was created: the region goes again */
    ck_assert_int_eq(sh_prepare(&s, 1, 0, NULL), 0);
    write_conf(&s, 2, "1GiB", "254", "", "");
    const char *key[] = {"in a pod of several hosts a key has at most"};
    expect_refused(&s, key, 1);
    expect_nothing_left(&s, false);
    ck_assert(sh_file_contains(s.log, "removed region"));
}
END_TEST

/* Whoever may replace the TCP token file chooses the token: a token file of
 * another user, or in a directory others may write, refuses the start (and
 * leaves nothing). */
START_TEST(tcp_token_file_others_may_replace_is_refused)
{
    struct sh_server s;
    char host_extra[2 * SH_PATH], dir[SH_PATH + 16], file[SH_PATH + 32];

    ck_assert_int_eq(sh_prepare(&s, 1, 0, NULL), 0);
    ck_assert_int_eq(sh_write_token(&s), 0);
    snprintf(host_extra, sizeof host_extra, "    tcp_port: 1\n    tcp_token_file: %s\n",
             s.token_file);
    write_conf(&s, 1, "512MiB", "64", host_extra, "");
    if (chown_or_skip(s.token_file, OTHER_UID, "tcp_token_file_others_may_replace_is_refused")) {
        const char *owner[] = {s.token_file, "it must belong to this user or root"};
        expect_refused(&s, owner, 2);
        expect_nothing_left(&s, false);
    }

    ck_assert_int_eq(sh_prepare(&s, 1, 0, NULL), 0);
    ck_assert_int_eq(sh_write_token(&s), 0);
    snprintf(dir, sizeof dir, "%s/open", s.dir);
    snprintf(file, sizeof file, "%s/token", dir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    ck_assert_int_eq(chmod(dir, 0777), 0);
    ck_assert_int_eq(rename(s.token_file, file), 0);
    snprintf(host_extra, sizeof host_extra, "    tcp_port: 1\n    tcp_token_file: %s\n", file);
    write_conf(&s, 1, "512MiB", "64", host_extra, "");
    const char *open_dir[] = {file, dir, "writable by group or others and not sticky"};
    expect_refused(&s, open_dir, 3);
    expect_nothing_left(&s, false);
}
END_TEST

/* A failure after the region and the log directory were made (here: a bind
 * the socket's checks could not foresee, in /sys, which refuses sockets)
 * takes both back, with the directories made above the log directory. */
START_TEST(late_failure_takes_back_what_it_created)
{
    struct sh_server s;
    char sock[64], top[SH_PATH], dir[SH_PATH + 32];
    snprintf(sock, sizeof sock, "/sys/poddb-srvtest-%d.sock", (int)getpid());
    ck_assert_int_eq(sh_prepare(&s, 1, 0, sock), 0);
    snprintf(top, sizeof top, "%s/new", s.dir);
    snprintf(dir, sizeof dir, "%s/deeper/log-0", top);
    set_log_dir(&s, dir);
    if (sh_start(&s, START_TIMEOUT_MS) == 0) {
        stop_ok(&s);
        unlink(sock);
        fprintf(stderr, "late_failure_takes_back_what_it_created: NOT RUN: a socket could be "
                "made in /sys here\n");
        return;
    }
    const char *late[] = {"cannot listen on", sock, "removed log directory", "removed region"};
    for (int i = 0; i < 4; i++)
        if (!sh_file_contains(s.log, late[i])) {
            sh_dump_log(&s, "refused");
            ck_abort_msg("the log does not say '%s' (it is above)", late[i]);
        }
    ck_assert_msg(access(s.region, F_OK) == -1, "the failed start left its region %s", s.region);
    ck_assert_msg(access(top, F_OK) == -1, "the failed start left %s", top);
    ck_assert_ptr_null(sh_sanitizer_error(&s));
}
END_TEST

/* A socket path that holds something other than a socket is refused and
 * left as it is: only a socket a stopped server left is replaced. */
START_TEST(socket_path_that_is_not_a_socket_is_refused)
{
    struct sh_server s;
    ck_assert_int_eq(sh_prepare(&s, 1, 0, NULL), 0);
    FILE *f = fopen(s.sock, "w");
    ck_assert_ptr_nonnull(f);
    fputs("someone's notes\n", f);
    ck_assert_int_eq(fclose(f), 0);
    const char *file[] = {s.sock, "is a regular file, not a socket"};
    expect_refused(&s, file, 2);
    ck_assert_msg(sh_file_contains(s.sock, "someone's notes"), "the file at the socket path changed");
    ck_assert_int_eq(unlink(s.sock), 0);
    expect_nothing_left(&s, false);

    ck_assert_int_eq(mkdir(s.sock, 0700), 0);
    const char *dir[] = {s.sock, "is a directory, not a socket"};
    expect_refused(&s, dir, 2);
    struct stat st;
    ck_assert(lstat(s.sock, &st) == 0 && S_ISDIR(st.st_mode));
    ck_assert_int_eq(rmdir(s.sock), 0);
    expect_nothing_left(&s, false);

    /* a stale socket is still replaced */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, s.sock, strlen(s.sock) + 1);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    close(fd);
    start_ok(&s);
    stop_ok(&s);
}
END_TEST

/* The socket's directory is trusted like a log directory's: a directory of
 * another user's, or one that group or others may write without the sticky
 * bit, is refused (another user could put a socket of theirs at the path
 * while the server is down); a sticky one like /tmp is fine. */
/* A directory parent/name with mode (the umask aside), and the path of a
 * socket in it. */
static void socket_dir(char *dir, size_t dlen, char *sock, size_t slen, const char *parent,
                       const char *name, mode_t mode)
{
    snprintf(dir, dlen, "%s/%s", parent, name);
    ck_assert_int_eq(mkdir(dir, mode & 0777), 0);
    ck_assert_int_eq(chmod(dir, mode), 0);
    snprintf(sock, slen, "%s/pod.sock", dir);
}

START_TEST(socket_dir_of_another_user_is_refused)
{
    struct sh_server s;
    char dir[SH_PATH - 48], sock[SH_PATH];
    ck_assert_int_eq(sh_prepare(&s, 1, 0, NULL), 0);

    socket_dir(dir, sizeof dir, sock, sizeof sock, s.dir, "theirs", 0755);
    if (chown_or_skip(dir, OTHER_UID, "socket_dir_of_another_user_is_refused")) {
        struct sh_server t;
        ck_assert_int_eq(sh_prepare(&t, 1, 0, sock), 0);
        const char *theirs[] = {"socket", dir, "uid 65534"};
        expect_refused(&t, theirs, 3);
        expect_nothing_left(&t, false);
    }

    socket_dir(dir, sizeof dir, sock, sizeof sock, s.dir, "shared", 0775);
    struct sh_server g;
    ck_assert_int_eq(sh_prepare(&g, 1, 0, sock), 0);
    const char *shared[] = {"socket", dir, "0775", "writable"};
    expect_refused(&g, shared, 4);
    expect_nothing_left(&g, false);

    socket_dir(dir, sizeof dir, sock, sizeof sock, s.dir, "tmp", 01777);
    struct sh_server t;
    ck_assert_int_eq(sh_prepare(&t, 1, 0, sock), 0);
    start_ok(&t);
    stop_ok(&t);
}
END_TEST

int main(void)
{
    sh_init();
    Suite *s = suite_create("security");
    TCase *region = tu_tcase(s, "region", 120);
    tcase_add_test(region, foreign_file_is_never_touched);
    tcase_add_test(region, larger_foreign_file_is_not_cut);
    tcase_add_test(region, empty_file_is_formatted_not_destroyed);
    tcase_add_test(region, live_region_of_another_pod_is_not_resized);
    tcase_add_test(region, region_larger_than_its_file_system_is_refused);
    tcase_add_test(region, missing_numa_node_creates_nothing);
    tcase_add_test(region, region_of_another_user_is_refused);
    tcase_add_test(region, emfile_does_not_kill_a_host);
    TCase *logdir = tu_tcase(s, "log_dir", 300);
    tcase_add_test(logdir, log_dir_claim_names_holder_and_owner);
    tcase_add_test(logdir, second_pod_on_a_live_log_dir_is_refused);
    tcase_add_test(logdir, log_dir_of_another_user_is_refused);
    tcase_add_test(logdir, files_are_private_under_umask_000);
    TCase *start = tu_tcase(s, "start", 300);
    tcase_add_test(start, refused_start_leaves_nothing);
    tcase_add_test(start, tcp_token_file_others_may_replace_is_refused);
    tcase_add_test(start, late_failure_takes_back_what_it_created);
    tcase_add_test(start, socket_path_that_is_not_a_socket_is_refused);
    tcase_add_test(start, socket_dir_of_another_user_is_refused);
    return tu_run(s);
}
