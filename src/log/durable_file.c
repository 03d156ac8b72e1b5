/* The durable-epoch file; see durable_file.h. Slot layout (little-endian):
 *   0  8  magic "PODDBDUR"
 *   8  4  version (1)
 *  12  4  host
 *  16  8  seq (slot writes so far; the higher valid one wins)
 *  24  8  durable epoch
 *  32  4  hosts known to have logged (bit h: host h; 0 in older files)
 *  36 472 zero
 * 508  4  CRC-32C of bytes 0..507 */
#include "log/durable_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log/crc32c.h"
#include "log/segment.h"
#include "util/fsperm.h"

#define DURABLE_VERSION 1u

struct durable_file {
    int fd;
    char path[PATH_MAX];
    uint32_t host, hosts;
    uint64_t seq, epoch;
};

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const unsigned char *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }

static void encode_slot(unsigned char *b, uint32_t host, uint64_t seq, uint64_t epoch,
                        uint32_t hosts)
{
    memset(b, 0, DURABLE_SLOT_SIZE);
    memcpy(b, DURABLE_MAGIC, 8);
    put32(b + 8, DURABLE_VERSION);
    put32(b + 12, host);
    put64(b + 16, seq);
    put64(b + 24, epoch);
    put32(b + 32, hosts);
    put32(b + DURABLE_SLOT_SIZE - 4, crc32c(0, b, DURABLE_SLOT_SIZE - 4));
}

static bool decode_slot(const unsigned char *b, uint32_t *host, uint64_t *seq, uint64_t *epoch,
                        uint32_t *hosts)
{
    if (memcmp(b, DURABLE_MAGIC, 8) != 0) return false;
    if (get32(b + DURABLE_SLOT_SIZE - 4) != crc32c(0, b, DURABLE_SLOT_SIZE - 4)) return false;
    if (get32(b + 8) != DURABLE_VERSION) return false;
    *host = get32(b + 12);
    *seq = get64(b + 16);
    *epoch = get64(b + 24);
    *hosts = get32(b + 32);
    return true;
}

static int path_of(char *buf, size_t len, const char *dir, pod_err *err)
{
    if ((size_t)snprintf(buf, len, "%s/%s", dir, DURABLE_FILE_NAME) >= len) {
        pod_err_set(err, "log directory path too long: %s", dir);
        return -1;
    }
    return 0;
}

/* Read both slots of an open file into rec. */
static int read_slots(int fd, const char *path, struct durable_record *rec, pod_err *err)
{
    unsigned char b[2 * DURABLE_SLOT_SIZE];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t n = pread(fd, b + got, sizeof b - got, (off_t)got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            pod_err_set(err, "cannot read %s: %s", path, strerror(errno));
            return -1;
        }
        if (n == 0) break;
        got += (size_t)n;
    }
    memset(b + got, 0, sizeof b - got);
    *rec = (struct durable_record){.exists = true};
    for (int i = 0; i < 2; i++) {
        uint32_t h, hs;
        uint64_t s, e;
        if (!decode_slot(b + i * DURABLE_SLOT_SIZE, &h, &s, &e, &hs)) continue;
        if (rec->valid_slots++ == 0 || s > rec->seq) {
            rec->seq = s;
            rec->epoch = e;
            rec->host = h;
            rec->hosts = hs;
        }
    }
    if (rec->valid_slots == 0) {
        pod_err_set(err, "%s is damaged: neither of its two slots is valid (%zu bytes); the "
                    "committed end of the log is unknown, so recovery refuses to guess", path, got);
        return -1;
    }
    return 0;
}

int durable_file_read(const char *dir, struct durable_record *rec, pod_err *err)
{
    char path[PATH_MAX];
    if (path_of(path, sizeof path, dir, err)) return -1;
    return durable_file_read_path(path, rec, err);
}

int durable_file_read_path(const char *path, struct durable_record *rec, pod_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) {
            *rec = (struct durable_record){0};
            return 0;
        }
        pod_err_set(err, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    int rc = read_slots(fd, path, rec, err);
    close(fd);
    return rc;
}

static int write_slot(struct durable_file *f, int slot, uint64_t seq, uint64_t epoch, pod_err *err)
{
    unsigned char b[DURABLE_SLOT_SIZE];
    encode_slot(b, f->host, seq, epoch, f->hosts);
    size_t done = 0;
    while (done < sizeof b) {
        ssize_t n = pwrite(f->fd, b + done, sizeof b - done,
                           (off_t)(slot * DURABLE_SLOT_SIZE + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            pod_err_set(err, "cannot write %s: %s", f->path, n < 0 ? strerror(errno) : "no progress");
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}

struct durable_file *durable_file_open(const char *dir, uint32_t host, uint64_t initial,
                                       pod_err *err)
{
    struct durable_file *f = calloc(1, sizeof *f);
    if (!f) {
        pod_err_set(err, "out of memory");
        return NULL;
    }
    f->host = host;
    if (path_of(f->path, sizeof f->path, dir, err)) goto fail;
    f->fd = open(f->path, O_RDWR | O_CLOEXEC);
    if (f->fd >= 0) {
        struct durable_record rec;
        if (read_slots(f->fd, f->path, &rec, err)) goto fail_fd;
        f->seq = rec.seq;
        f->epoch = rec.epoch;
        f->hosts = rec.hosts;
        return f;
    }
    if (errno != ENOENT) {
        pod_err_set(err, "cannot open %s: %s", f->path, strerror(errno));
        goto fail;
    }
    f->fd = pod_create_private(f->path, O_RDWR | O_EXCL | O_CLOEXEC);
    if (f->fd < 0) {
        pod_err_set(err, "cannot create %s: %s", f->path, strerror(errno));
        goto fail;
    }
    if (write_slot(f, 0, 0, initial, err) || write_slot(f, 1, 1, initial, err)) goto fail_new;
    if (fdatasync(f->fd) != 0) {
        pod_err_set(err, "cannot sync %s: %s", f->path, strerror(errno));
        goto fail_new;
    }
    if (seg_fsync_dir(dir, err)) goto fail_new;
    f->seq = 1;
    f->epoch = initial;
    return f;
fail_new:
    unlink(f->path);
fail_fd:
    close(f->fd);
fail:
    free(f);
    return NULL;
}

/* The next slot with epoch and f->hosts, synced. */
static int update(struct durable_file *f, uint64_t epoch, pod_err *err)
{
    uint64_t seq = f->seq + 1;
    if (write_slot(f, (int)(seq & 1), seq, epoch, err)) return -1;
    if (fdatasync(f->fd) != 0) {
        pod_err_set(err, "cannot sync %s: %s", f->path, strerror(errno));
        return -1;
    }
    f->seq = seq;
    f->epoch = epoch;
    return 0;
}

int durable_file_write(struct durable_file *f, uint64_t epoch, pod_err *err)
{
    return epoch <= f->epoch ? 0 : update(f, epoch, err);
}

uint64_t durable_file_epoch(const struct durable_file *f) { return f->epoch; }

int durable_file_add_hosts(struct durable_file *f, uint32_t hosts, pod_err *err)
{
    uint32_t was = f->hosts;
    if ((was | hosts) == was) return 0;
    f->hosts = was | hosts;
    if (update(f, f->epoch, err) == 0) return 0;
    f->hosts = was;
    return -1;
}

uint32_t durable_file_hosts(const struct durable_file *f) { return f->hosts; }

int durable_file_stat(const struct durable_file *f, struct stat *st) { return fstat(f->fd, st); }

void durable_file_close(struct durable_file *f)
{
    if (!f) return;
    close(f->fd);
    free(f);
}
