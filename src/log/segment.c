/* Log segment files; the format is described in docs/log-format.md. */
#include "log/segment.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "log/crc32c.h"
#include "util/fsperm.h"

/* ---- little-endian helpers -------------------------------------------------- */

static inline void put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}
static inline void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t get64(const unsigned char *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* ---- names -------------------------------------------------------------------- */

void seg_format_name(char *buf, size_t len, uint32_t host, uint32_t logger, uint64_t seq)
{
    snprintf(buf, len, "seg-%" PRIu32 "-%" PRIu32 "-%010" PRIu64 ".log", host, logger, seq);
}

/* Parse 1..max_digits decimal digits into *v; returns the end or NULL. */
static const char *parse_num(const char *s, int max_digits, uint64_t limit, uint64_t *v)
{
    int n = 0;
    uint64_t x = 0;
    while (*s >= '0' && *s <= '9') {
        if (++n > max_digits) return NULL;
        x = x * 10 + (uint64_t)(*s - '0');
        s++;
    }
    if (n == 0 || x > limit) return NULL;
    *v = x;
    return s;
}

bool seg_parse_name(const char *name, uint32_t *host, uint32_t *logger, uint64_t *seq)
{
    uint64_t h, l, q;
    const char *p = name;
    if (strncmp(p, "seg-", 4) != 0) return false;
    if (!(p = parse_num(p + 4, 10, UINT32_MAX, &h)) || *p != '-') return false;
    if (!(p = parse_num(p + 1, 10, UINT32_MAX, &l)) || *p != '-') return false;
    const char *q0 = p + 1;
    if (!(p = parse_num(q0, 10, UINT64_MAX, &q)) || p - q0 != 10) return false;
    if (strcmp(p, ".log") != 0) return false;
    if (host) *host = (uint32_t)h;
    if (logger) *logger = (uint32_t)l;
    if (seq) *seq = q;
    return true;
}

void seg_format_ckpt_name(char *buf, size_t len, uint32_t host, uint64_t seq, bool tmp)
{
    snprintf(buf, len, "ckpt-%" PRIu32 "-%010" PRIu64 ".%s", host, seq, tmp ? "tmp" : "log");
}

bool seg_parse_ckpt_name(const char *name, uint32_t *host, uint64_t *seq, bool *tmp)
{
    uint64_t h, q;
    const char *p = name;
    if (strncmp(p, "ckpt-", 5) != 0) return false;
    if (!(p = parse_num(p + 5, 10, UINT32_MAX, &h)) || *p != '-') return false;
    const char *q0 = p + 1;
    if (!(p = parse_num(q0, 10, UINT64_MAX, &q)) || p - q0 != 10) return false;
    bool t;
    if (strcmp(p, ".log") == 0) t = false;
    else if (strcmp(p, ".tmp") == 0) t = true;
    else return false;
    if (host) *host = (uint32_t)h;
    if (seq) *seq = q;
    if (tmp) *tmp = t;
    return true;
}

const char *seg_tail_name(enum seg_tail_kind k)
{
    switch (k) {
    case SEG_TAIL_CLEAN: return "clean";
    case SEG_TAIL_TORN: return "torn";
    case SEG_TAIL_CORRUPT: return "corrupt";
    default: return "unknown";
    }
}

/* ---- I/O helpers ---------------------------------------------------------------- */

/* Write all of buf at off, continuing short writes. 0, or -1 with errno set and
 * *done holding the bytes that did get written. */
static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off, size_t *done)
{
    const unsigned char *p = buf;
    *done = 0;
    while (*done < len) {
        ssize_t n = pwrite(fd, p + *done, len - *done, (off_t)(off + *done));
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (n == 0) {
            errno = ENOSPC; /* no progress and no error: treat as out of space */
            return -1;
        }
        *done += (size_t)n;
    }
    return 0;
}

/* Read len bytes at off. Returns bytes read (< len only at end of file), or -1
 * with errno set. */
static ssize_t pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    unsigned char *p = buf;
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, p + got, len - got, (off_t)(off + got));
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (n == 0) break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* ---- header --------------------------------------------------------------------- */

static void encode_header(unsigned char *b, const struct seg_header *h)
{
    memset(b, 0, SEG_HEADER_SIZE);
    memcpy(b, SEG_MAGIC, 8);
    put32(b + 8, h->version);
    put32(b + 12, SEG_HEADER_SIZE);
    put32(b + 16, h->host);
    put32(b + 20, h->logger);
    put64(b + 24, h->seq);
    put64(b + 32, h->first_epoch);
    put64(b + 40, h->create_time_ns);
    put32(b + 48, h->ckpt_flags);
    put64(b + 52, h->since_epoch);
    put32(b + 60, crc32c(0, b, 60));
}

/* ---- writer ----------------------------------------------------------------------- */

struct seg_writer {
    int fd;
    char path[PATH_MAX];
    uint64_t size;   /* bytes in the file */
    uint64_t synced; /* bytes known durable */
    uint64_t wb_start, wb_end; /* seg_writer_pace: the range whose writeback was started last */
    uint64_t dropped;          /* bytes before this are out of the page cache (drop_written) */
    unsigned char *buf; /* the block being built: header space + payload */
    size_t cap;
    size_t len; /* payload bytes */
    uint32_t nrec;
    uint64_t epoch_lo, epoch_hi;   /* of the current block */
    uint64_t file_lo, file_hi;     /* of the blocks written (seg_writer_epochs) */
    bool broken;
    pod_err broken_err;
    /* Direct mode (seg_writer_go_direct): `stage` holds the file's bytes from
     * stage_off (a page boundary) to size, 4 KiB-aligned, and is written with
     * O_DIRECT in whole pages; the partial last page is padded with zeros at a
     * sync and written again, with the same leading bytes, by the next one.
     * A block is built in buf and copied here when full. Built in the stage
     * itself (no copy), a full checkpoint cost 86-100 ns a row in good spells
     * and up to 230 in bad ones on the development VM; built apart, 79-90 and
     * at most ~160. Why is a guess: the stage's lines had just been read by
     * the device for the previous write. */
    bool direct;
    bool odirect;            /* the fd has O_DIRECT (cleared when the file system refuses it) */
    unsigned char *stage;
    size_t stage_cap;
    uint64_t stage_off;
    size_t early_bytes;  /* full pages are written before a sync once this much is staged */
    uint64_t prealloc;   /* blocks reserved up to here (seg_writer_preallocate) */
    size_t reserved;     /* bytes of the record seg_writer_reserve made room for (0: none) */
};

#define DIRECT_PAGE 4096u

int seg_fsync_dir(const char *dir, pod_err *err)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        pod_err_set(err, "cannot open log directory %s to sync it: %s", dir, strerror(errno));
        return -1;
    }
    int rc = fsync(dfd);
    int e = errno;
    close(dfd);
    if (rc != 0) {
        pod_err_set(err, "cannot sync log directory %s: %s", dir, strerror(e));
        return -1;
    }
    return 0;
}

struct seg_writer *seg_writer_open_named(const char *dir, const char *name,
                                         const struct seg_header *hdr, pod_err *err)
{
    struct seg_writer *w = calloc(1, sizeof *w);
    if (!w) {
        pod_err_set(err, "out of memory opening a log segment");
        return NULL;
    }
    w->fd = -1;
    if ((size_t)snprintf(w->path, sizeof w->path, "%s/%s", dir, name) >= sizeof w->path) {
        pod_err_set(err, "log directory path too long: %s", dir);
        free(w);
        return NULL;
    }
    /* O_RDWR: seg_writer_go_direct reads back the partial last page. */
    w->fd = pod_create_private(w->path, O_RDWR | O_EXCL | O_CLOEXEC);
    if (w->fd < 0) {
        int e = errno;
        if (e == EEXIST)
            pod_err_set(err, "cannot create log segment %s: it exists already (segments are never overwritten)",
                        w->path);
        else
            pod_err_set(err, "cannot create log segment %s: %s", w->path, strerror(e));
        free(w);
        return NULL;
    }
    struct seg_header h = *hdr;
    h.version = SEG_VERSION;
    if (!h.create_time_ns) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        h.create_time_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    }
    unsigned char hb[SEG_HEADER_SIZE];
    encode_header(hb, &h);
    size_t done;
    if (pwrite_all(w->fd, hb, sizeof hb, 0, &done) != 0) {
        pod_err_set(err, "cannot write the header of log segment %s: %s", w->path, strerror(errno));
        goto fail;
    }
    if (fdatasync(w->fd) != 0) {
        pod_err_set(err, "cannot sync the header of log segment %s: %s", w->path, strerror(errno));
        goto fail;
    }
    if (seg_fsync_dir(dir, err) != 0) goto fail;
    w->size = w->synced = SEG_HEADER_SIZE;
    w->epoch_lo = w->file_lo = UINT64_MAX;
    return w;
fail:
    close(w->fd);
    unlink(w->path);
    free(w);
    return NULL;
}

struct seg_writer *seg_writer_open(const char *dir, uint32_t host, uint32_t logger, uint64_t seq,
                                   uint64_t first_epoch, pod_err *err)
{
    char name[SEG_NAME_MAX];
    seg_format_name(name, sizeof name, host, logger, seq);
    struct seg_header h = {.host = host, .logger = logger, .seq = seq, .first_epoch = first_epoch};
    return seg_writer_open_named(dir, name, &h, err);
}

static int check_broken(const struct seg_writer *w, pod_err *err)
{
    if (!w->broken) return 0;
    pod_err_set(err, "%s", w->broken_err.msg);
    return -1;
}

static void set_broken(struct seg_writer *w, const char *msg)
{
    w->broken = true;
    pod_err_set(&w->broken_err, "log segment %s is unusable after an earlier error: %s", w->path, msg);
}

static int write_block(struct seg_writer *w, unsigned char *hdr, const void *payload, size_t len,
                       pod_err *err);
static int stage_reserve(struct seg_writer *w, size_t need, pod_err *err);
static int write_stage(struct seg_writer *w, bool pad, pod_err *err);
static void encode_block_header(unsigned char *h, const void *payload, size_t len, uint32_t count,
                                uint64_t elo, uint64_t ehi);

static void written_epochs(struct seg_writer *w, uint64_t lo, uint64_t hi)
{
    if (lo < w->file_lo) w->file_lo = lo;
    if (hi > w->file_hi) w->file_hi = hi;
}

int seg_writer_flush_block(struct seg_writer *w, pod_err *err)
{
    if (check_broken(w, err)) return -1;
    w->reserved = 0; /* what was reserved would move */
    if (w->nrec == 0) return 0;
    unsigned char *h = w->buf;
    size_t len = w->len;
    encode_block_header(h, h + SEG_BLOCK_HEADER_SIZE, len, w->nrec, w->epoch_lo, w->epoch_hi);
    if (write_block(w, h, h + SEG_BLOCK_HEADER_SIZE, len, err) != 0) return -1;
    written_epochs(w, w->epoch_lo, w->epoch_hi);
    w->len = 0;
    w->nrec = 0;
    w->epoch_lo = UINT64_MAX;
    w->epoch_hi = 0;
    return 0;
}

int seg_record_check(const struct log_record *rec, pod_err *err)
{
    if (rec->kind != LOG_PUT && rec->kind != LOG_DELETE && rec->kind != LOG_PATCH) {
        pod_err_set(err, "log record of table %" PRIu32 " has invalid kind %u (PUT=1, DELETE=2, "
                    "PATCH=3)", rec->table_id, rec->kind);
        return -1;
    }
    if (rec->kind == LOG_PATCH && rec->tuple_len < LOG_PATCH_HEADER) {
        pod_err_set(err, "PATCH log record of table %" PRIu32 " has %" PRIu32 " bytes, less than "
                    "its %u-byte header", rec->table_id, rec->tuple_len, LOG_PATCH_HEADER);
        return -1;
    }
    if (rec->kind == LOG_DELETE && rec->tuple_len != 0) {
        pod_err_set(err, "DELETE log record of table %" PRIu32 " carries a %" PRIu32 "-byte tuple",
                    rec->table_id, rec->tuple_len);
        return -1;
    }
    if (rec->tuple_len > SEG_MAX_TUPLE) {
        pod_err_set(err, "log record of table %" PRIu32 ": tuple of %" PRIu32
                    " bytes exceeds the limit of %u bytes", rec->table_id, rec->tuple_len,
                    SEG_MAX_TUPLE);
        return -1;
    }
    if ((rec->key_len && !rec->key) || (rec->tuple_len && !rec->tuple)) {
        pod_err_set(err, "log record of table %" PRIu32 " has a length but no data", rec->table_id);
        return -1;
    }
    return 0;
}

void log_patch_put_header(unsigned char *p, uint64_t base_ev, uint32_t offset)
{
    put64(p, base_ev);
    put32(p + 8, offset);
}

struct log_patch log_patch_parse(const void *tuple, uint32_t tuple_len)
{
    const unsigned char *p = tuple;
    return (struct log_patch){.base_ev = get64(p), .offset = get32(p + 8),
                              .len = tuple_len - LOG_PATCH_HEADER,
                              .bytes = p + LOG_PATCH_HEADER};
}

/* rec's tuple field is head (hlen bytes) then body (tuple_len - hlen). */
static size_t encode_parts(unsigned char *p, const struct log_record *rec, const void *head,
                           uint32_t hlen, const void *body)
{
    size_t rlen = seg_record_size(rec->key_len, rec->tuple_len);
    put32(p, (uint32_t)rlen);
    put32(p + 4, rec->table_id);
    put16(p + 8, rec->key_len);
    p[10] = rec->kind;
    p[11] = 0;
    put64(p + 12, rec->epoch_version);
    unsigned char *q = p + SEG_RECORD_HEADER;
    if (rec->key_len) memcpy(q, rec->key, rec->key_len);
    q += rec->key_len;
    if (hlen) memcpy(q, head, hlen);
    /* A tuple written in place (seg_writer_reserve) is there already. */
    if (rec->tuple_len > hlen && body != q + hlen) memcpy(q + hlen, body, rec->tuple_len - hlen);
    put32(p + rlen - 4, crc32c(0, p, rlen - 4));
    return rlen;
}

size_t seg_record_encode(unsigned char *p, const struct log_record *rec)
{
    return encode_parts(p, rec, NULL, 0, rec->tuple);
}

size_t seg_patch_encode(unsigned char *p, const struct log_record *rec, uint64_t base_ev,
                        uint32_t offset, const void *bytes)
{
    unsigned char h[LOG_PATCH_HEADER];
    log_patch_put_header(h, base_ev, offset);
    return encode_parts(p, rec, h, LOG_PATCH_HEADER, bytes);
}

/* Where a record of rlen bytes goes at the current block's end (the block
 * written first when the record would make it too large); NULL on an error. */
static unsigned char *block_room(struct seg_writer *w, size_t rlen, pod_err *err)
{
    w->reserved = 0;
    if (check_broken(w, err)) return NULL;
    if (w->len + rlen > SEG_MAX_BLOCK_PAYLOAD && seg_writer_flush_block(w, err) != 0) return NULL;
    size_t need = SEG_BLOCK_HEADER_SIZE + w->len + rlen;
    if (need > w->cap) {
        size_t nc = w->cap ? w->cap : 64 * 1024;
        while (nc < need) nc *= 2;
        unsigned char *nb = realloc(w->buf, nc);
        if (!nb) {
            pod_err_set(err, "out of memory growing the block buffer of %s to %zu bytes", w->path, nc);
            return NULL;
        }
        w->buf = nb;
        w->cap = nc;
    }
    return w->buf + SEG_BLOCK_HEADER_SIZE + w->len;
}

/* Encode rec at p, the block's end, and count it in the block. */
static void block_add(struct seg_writer *w, unsigned char *p, const struct log_record *rec)
{
    w->len += seg_record_encode(p, rec);
    w->nrec++;
    uint64_t e = log_ev_epoch(rec->epoch_version);
    if (e < w->epoch_lo) w->epoch_lo = e;
    if (e > w->epoch_hi) w->epoch_hi = e;
}

int seg_writer_append(struct seg_writer *w, const struct log_record *rec, pod_err *err)
{
    if (seg_record_check(rec, err)) return -1;
    unsigned char *p = block_room(w, seg_record_size(rec->key_len, rec->tuple_len), err);
    if (!p) return -1;
    block_add(w, p, rec);
    return 0;
}

unsigned char *seg_writer_reserve(struct seg_writer *w, uint16_t key_len, uint32_t tuple_len,
                                  pod_err *err)
{
    if (tuple_len > SEG_MAX_TUPLE) {
        pod_err_set(err, "tuple of %" PRIu32 " bytes exceeds the log's limit of %u bytes",
                    tuple_len, SEG_MAX_TUPLE);
        return NULL;
    }
    size_t rlen = seg_record_size(key_len, tuple_len);
    unsigned char *p = block_room(w, rlen, err);
    if (!p) return NULL;
    w->reserved = rlen;
    return p + SEG_RECORD_HEADER + key_len;
}

int seg_writer_commit(struct seg_writer *w, const struct log_record *rec, pod_err *err)
{
    if (seg_record_check(rec, err)) return -1;
    /* The block's room exists once something was reserved (it may not before). */
    unsigned char *p = w->reserved ? w->buf + SEG_BLOCK_HEADER_SIZE + w->len : NULL;
    if (!p || seg_record_size(rec->key_len, rec->tuple_len) != w->reserved ||
        rec->tuple != p + SEG_RECORD_HEADER + rec->key_len) {
        pod_err_set(err, "%s: a record committed without its reserved room", w->path);
        return -1;
    }
    w->reserved = 0;
    block_add(w, p, rec);
    return 0;
}

static int stage_block(struct seg_writer *w, const unsigned char *hdr, const void *payload,
                       size_t len, pod_err *err);

/* Write header + payload at w->size with one pwritev sequence; on failure
 * take a partial block back off the file (see seg_writer_flush_block). A
 * direct writer gathers the block instead (stage_block). */
static int write_block(struct seg_writer *w, unsigned char *hdr, const void *payload, size_t len,
                       pod_err *err)
{
    if (w->direct) return stage_block(w, hdr, payload, len, err);
    size_t total = SEG_BLOCK_HEADER_SIZE + len, done = 0;
    while (done < total) {
        struct iovec iov[2];
        int n = 0;
        if (done < SEG_BLOCK_HEADER_SIZE) {
            iov[n++] = (struct iovec){hdr + done, SEG_BLOCK_HEADER_SIZE - done};
            if (len) iov[n++] = (struct iovec){(void *)payload, len};
        } else {
            size_t o = done - SEG_BLOCK_HEADER_SIZE;
            iov[n++] = (struct iovec){(unsigned char *)payload + o, len - o};
        }
        ssize_t k = pwritev(w->fd, iov, n, (off_t)(w->size + done));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int e = k < 0 ? errno : ENOSPC; /* no progress and no error: out of space */
            pod_err_set(err, "cannot write a block of %zu bytes to log segment %s at offset %" PRIu64
                        " (%zu bytes written): %s", total, w->path, w->size, done, strerror(e));
            /* Take a partial block back off the file so later blocks stay readable. */
            if (done > 0 && ftruncate(w->fd, (off_t)w->size) != 0) {
                char msg[400];
                snprintf(msg, sizeof msg, "a partial block was left at offset %" PRIu64
                         " and truncating it failed: %s", w->size, strerror(errno));
                set_broken(w, msg);
                pod_err_set(err, "cannot write a block of %zu bytes to log segment %s at offset %"
                            PRIu64 ": %s; removing the partial block failed too (%s), the segment "
                            "is unusable", total, w->path, w->size, strerror(e), strerror(errno));
            }
            return -1;
        }
        done += (size_t)k;
    }
    w->size += total;
    return 0;
}

static void encode_block_header(unsigned char *h, const void *payload, size_t len, uint32_t count,
                                uint64_t elo, uint64_t ehi)
{
    put32(h, SEG_BLOCK_MAGIC);
    put32(h + 4, (uint32_t)len);
    put64(h + 8, elo);
    put64(h + 16, ehi);
    put32(h + 24, count);
    put32(h + 28, crc32c(crc32c(0, h, 28), payload, len));
}

int seg_writer_write_block(struct seg_writer *w, const void *payload, size_t len, uint32_t count,
                           uint64_t epoch_lo, uint64_t epoch_hi, pod_err *err)
{
    if (check_broken(w, err)) return -1;
    if (count == 0 || len == 0 || len > SEG_MAX_BLOCK_PAYLOAD || epoch_lo > epoch_hi) {
        pod_err_set(err, "log segment %s: invalid pre-encoded block (%zu bytes, %" PRIu32
                    " records, epochs %" PRIu64 "..%" PRIu64 ")", w->path, len, count, epoch_lo,
                    epoch_hi);
        return -1;
    }
    if (seg_writer_flush_block(w, err) != 0) return -1; /* keep the file's order */
    unsigned char h[SEG_BLOCK_HEADER_SIZE];
    encode_block_header(h, payload, len, count, epoch_lo, epoch_hi);
    if (write_block(w, h, payload, len, err) != 0) return -1;
    written_epochs(w, epoch_lo, epoch_hi);
    return 0;
}

int seg_writer_write_mark(struct seg_writer *w, uint64_t through, uint32_t nloggers,
                          uint32_t logger, pod_err *err)
{
    if (check_broken(w, err)) return -1;
    if (seg_writer_flush_block(w, err) != 0) return -1; /* keep the file's order */
    unsigned char h[SEG_BLOCK_HEADER_SIZE];
    put32(h, SEG_MARK_MAGIC);
    put32(h + 4, 0); /* no payload */
    put64(h + 8, through);
    put32(h + 16, nloggers);
    put32(h + 20, logger);
    put32(h + 24, 0);
    put32(h + 28, crc32c(0, h, 28));
    return write_block(w, h, NULL, 0, err);
}

void seg_writer_epochs(const struct seg_writer *w, uint64_t *lo, uint64_t *hi)
{
    *lo = w->file_lo;
    *hi = w->file_hi;
}

/* ---- direct mode ---------------------------------------------------------------- */

int seg_writer_go_direct(struct seg_writer *w, size_t early_bytes, pod_err *err)
{
    if (check_broken(w, err)) return -1;
    if (w->direct) return 0;
    if (w->nrec || w->synced != w->size) {
        pod_err_set(err, "log segment %s: direct mode starts only on a synced writer", w->path);
        return -1;
    }
    size_t cap = 1u << 20;
    uint64_t off = w->size & ~(uint64_t)(DIRECT_PAGE - 1);
    size_t have = (size_t)(w->size - off);
    void *p;
    if (posix_memalign(&p, DIRECT_PAGE, cap) != 0) {
        pod_err_set(err, "out of memory for the direct-write buffer of %s", w->path);
        return -1;
    }
    /* The leading bytes of the partial page, which every write of it repeats
     * (read before O_DIRECT is set: a direct read would need an aligned length). */
    ssize_t n = have ? pread(w->fd, p, have, (off_t)off) : 0;
    if (n != (ssize_t)have) {
        free(p);
        pod_err_set(err, "cannot read back the last page of %s: %s", w->path,
                    n < 0 ? strerror(errno) : "short read");
        return -1;
    }
    int fl = fcntl(w->fd, F_GETFL);
    if (fl < 0 || fcntl(w->fd, F_SETFL, fl | O_DIRECT) != 0) { /* EINVAL: tmpfs and the like */
        free(p);
        return 0;
    }
    w->stage = p;
    w->stage_cap = cap;
    w->stage_off = off;
    w->early_bytes = early_bytes ? early_bytes : SEG_DIRECT_EARLY_BYTES;
    w->direct = w->odirect = true;
    return 0;
}

void seg_writer_preallocate(struct seg_writer *w, uint64_t bytes)
{
    if (w->broken || bytes <= w->size) return;
    /* Advice only: where the file system cannot, blocks are allocated as the
     * file grows, as before. */
    if (fallocate(w->fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)bytes) == 0) w->prealloc = bytes;
}

bool seg_writer_is_direct(const struct seg_writer *w) { return w->direct && w->odirect; }

static int stage_reserve(struct seg_writer *w, size_t need, pod_err *err)
{
    if (need <= w->stage_cap) return 0;
    size_t nc = w->stage_cap;
    while (nc < need) nc *= 2;
    void *p;
    if (posix_memalign(&p, DIRECT_PAGE, nc) != 0) {
        pod_err_set(err, "out of memory growing the direct-write buffer of %s to %zu bytes", w->path, nc);
        return -1;
    }
    memcpy(p, w->stage, (size_t)(w->size - w->stage_off));
    free(w->stage);
    w->stage = p;
    w->stage_cap = nc;
    return 0;
}

/* Write the staged pages: all of them, the last one padded with zeros
 * (pad), or only the full ones. The partial last page stays staged. */
static int write_stage(struct seg_writer *w, bool pad, pod_err *err)
{
    size_t n = (size_t)(w->size - w->stage_off);
    size_t full = n & ~(size_t)(DIRECT_PAGE - 1);
    size_t out = pad ? (n + DIRECT_PAGE - 1) & ~(size_t)(DIRECT_PAGE - 1) : full;
    if (out == 0) return 0;
    if (out > n) memset(w->stage + n, 0, out - n); /* stage_cap is a multiple of the page */
    size_t done = 0;
    int rc = pwrite_all(w->fd, w->stage, out, w->stage_off, &done);
    if (rc != 0 && errno == EINVAL && w->odirect) {
        /* The file system took O_DIRECT at fcntl but not for this write: go
         * on through the page cache (same bytes, same offsets). */
        int fl = fcntl(w->fd, F_GETFL);
        if (fl >= 0 && fcntl(w->fd, F_SETFL, fl & ~O_DIRECT) == 0) {
            w->odirect = false;
            size_t more;
            rc = pwrite_all(w->fd, w->stage + done, out - done, w->stage_off + done, &more);
        }
    }
    if (rc != 0) {
        char msg[300];
        snprintf(msg, sizeof msg, "a direct write of %zu bytes at offset %" PRIu64 " failed: %s",
                 out, w->stage_off, strerror(errno));
        set_broken(w, msg);
        pod_err_set(err, "%s", w->broken_err.msg);
        return -1;
    }
    if (full) memmove(w->stage, w->stage + full, n - full);
    w->stage_off += full;
    return 0;
}

static int stage_block(struct seg_writer *w, const unsigned char *hdr, const void *payload,
                       size_t len, pod_err *err)
{
    size_t n = (size_t)(w->size - w->stage_off), total = SEG_BLOCK_HEADER_SIZE + len;
    /* Room for the padding of the last page too (write_stage). */
    if (stage_reserve(w, n + total + DIRECT_PAGE, err)) return -1;
    memcpy(w->stage + n, hdr, SEG_BLOCK_HEADER_SIZE);
    if (len) memcpy(w->stage + n + SEG_BLOCK_HEADER_SIZE, payload, len);
    w->size += total;
    if (n + total >= w->early_bytes) return write_stage(w, false, err);
    return 0;
}

/* Drop the file's pages below `upto` (written back already) from the page cache.
 * Nothing reads a segment while it is written, and a log that stayed cached
 * made every write take fresh pages: the page cache grew by the log's rate
 * (100+ MB/s per host) and YCSB ran about a quarter slower on a VM whose
 * fresh pages are slow. Only whole pages go; the last partial one is written
 * again. */
static void drop_written(struct seg_writer *w, uint64_t upto)
{
    uint64_t end = upto & ~(uint64_t)4095;
    if (end <= w->dropped) return;
    /* Advice only: a failure leaves the pages cached, which is still correct. */
    (void)posix_fadvise(w->fd, (off_t)w->dropped, (off_t)(end - w->dropped), POSIX_FADV_DONTNEED);
    w->dropped = end;
}

int seg_writer_sync(struct seg_writer *w, pod_err *err)
{
    if (check_broken(w, err)) return -1;
    w->reserved = 0; /* a sync ends a reservation, as a flush does (segment.h) */
    if (w->synced == w->size) return 0;
    if (w->direct && write_stage(w, true, err) != 0) return -1;
    if (fdatasync(w->fd) != 0) {
        char msg[300];
        snprintf(msg, sizeof msg, "fdatasync failed: %s", strerror(errno));
        set_broken(w, msg);
        pod_err_set(err, "cannot make log segment %s durable (fdatasync): %s; blocks after offset %"
                    PRIu64 " must be considered lost", w->path, strerror(errno), w->synced);
        return -1;
    }
    w->synced = w->size;
    if (!w->odirect) drop_written(w, w->synced);
    return 0;
}

int seg_writer_pace(struct seg_writer *w, uint64_t chunk, pod_err *err)
{
    if (check_broken(w, err)) return -1;
    if (w->direct) return 0; /* no page cache to keep small: stage_block writes as it goes */
    if (w->size - w->wb_end < chunk) return 0;
    /* Wait for the range started last time, then start the new one: at most
     * two chunks are dirty or in flight. An error here is a write error
     * (the kernel reports it once, so the final fdatasync might not). */
    int rc = 0;
    if (w->wb_end > w->wb_start)
        rc = sync_file_range(w->fd, (off64_t)w->wb_start, (off64_t)(w->wb_end - w->wb_start),
                             SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                 SYNC_FILE_RANGE_WAIT_AFTER);
    if (rc == 0)
        rc = sync_file_range(w->fd, (off64_t)w->wb_end, (off64_t)(w->size - w->wb_end),
                             SYNC_FILE_RANGE_WRITE);
    if (rc != 0) {
        char msg[300];
        snprintf(msg, sizeof msg, "writeback failed: %s", strerror(errno));
        set_broken(w, msg);
        pod_err_set(err, "cannot write %s back to disk: %s", w->path, strerror(errno));
        return -1;
    }
    drop_written(w, w->wb_end); /* written back and waited for above */
    w->wb_start = w->wb_end;
    w->wb_end = w->size;
    return 0;
}

uint64_t seg_writer_size(const struct seg_writer *w) { return w->size; }
uint64_t seg_writer_pending(const struct seg_writer *w)
{
    return w->nrec ? SEG_BLOCK_HEADER_SIZE + w->len : 0;
}
uint32_t seg_writer_pending_records(const struct seg_writer *w) { return w->nrec; }
uint64_t seg_writer_synced_size(const struct seg_writer *w) { return w->synced; }
const char *seg_writer_path(const struct seg_writer *w) { return w->path; }
int seg_writer_stat(const struct seg_writer *w, struct stat *st) { return fstat(w->fd, st); }

static void writer_free(struct seg_writer *w)
{
    if (w->fd >= 0) close(w->fd);
    free(w->buf);
    free(w->stage);
    free(w);
}

int seg_writer_close(struct seg_writer *w, pod_err *err)
{
    if (!w) return 0;
    int rc = 0;
    if (seg_writer_flush_block(w, err) != 0 || seg_writer_sync(w, err) != 0) rc = -1;
    /* A direct writer's last page is padded with zeros: end the file at the
     * last block (a reader takes the padding for a clean end either way). */
    if (rc == 0 && w->direct && (w->size & (DIRECT_PAGE - 1)) &&
        (ftruncate(w->fd, (off_t)w->size) != 0 || fdatasync(w->fd) != 0)) {
        pod_err_set(err, "cannot cut the padding off log segment %s: %s", w->path, strerror(errno));
        rc = -1;
    }
    /* Give back the blocks reserved past the end (seg_writer_preallocate):
     * a truncation to the size does, on ext4 (a hole punched past the end
     * does not). A failure only leaves them reserved until the segment is
     * removed; nothing reads past the size. */
    if (rc == 0 && w->prealloc > w->size) (void)ftruncate(w->fd, (off_t)w->size);
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0 && rc == 0) {
        pod_err_set(err, "closing log segment %s failed: %s", w->path, strerror(errno));
        rc = -1;
    }
    writer_free(w);
    return rc;
}

void seg_writer_abandon(struct seg_writer *w)
{
    if (w) writer_free(w);
}

/* ---- reader ------------------------------------------------------------------------- */

struct seg_reader {
    int fd;
    char path[PATH_MAX];
    struct seg_header hdr;
    struct seg_tail_status tail;
    struct seg_reader_stats st;
    uint64_t off; /* next block's offset */
    unsigned char *buf; /* the current block's payload */
    size_t cap;
    size_t len, pos; /* payload length, next record's position */
    uint32_t left;   /* records of the current block not yet handed out */
    struct seg_block_info blk; /* the current block */
};

struct seg_reader *seg_reader_open(const char *path, pod_err *err)
{
    struct seg_reader *r = calloc(1, sizeof *r);
    if (!r) {
        pod_err_set(err, "out of memory opening %s", path);
        return NULL;
    }
    snprintf(r->path, sizeof r->path, "%s", path);
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) {
        pod_err_set(err, "cannot open log segment %s: %s", path, strerror(errno));
        free(r);
        return NULL;
    }
    struct stat sb;
    if (fstat(r->fd, &sb) != 0) {
        pod_err_set(err, "cannot stat log segment %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        pod_err_set(err, "%s is not a regular file, so not a log segment", path);
        goto fail;
    }
    r->st.file_size = (uint64_t)sb.st_size;
    unsigned char b[SEG_HEADER_SIZE];
    ssize_t n = pread_full(r->fd, b, sizeof b, 0);
    if (n < 0) {
        pod_err_set(err, "cannot read the header of log segment %s: %s", path, strerror(errno));
        goto fail;
    }
    if (n < (ssize_t)SEG_HEADER_SIZE) {
        pod_err_set(err, "%s is not a log segment: %zd bytes, shorter than the %u-byte header", path,
                    n, SEG_HEADER_SIZE);
        goto fail;
    }
    if (memcmp(b, SEG_MAGIC, 8) != 0) {
        pod_err_set(err, "%s is not a log segment: bad magic (expected \"%s\")", path, SEG_MAGIC);
        goto fail;
    }
    uint32_t stored = get32(b + 60), computed = crc32c(0, b, 60);
    if (stored != computed) {
        pod_err_set(err, "log segment %s has a damaged header: CRC 0x%08" PRIx32
                    " stored, 0x%08" PRIx32 " computed", path, stored, computed);
        goto fail;
    }
    r->hdr.version = get32(b + 8);
    if (r->hdr.version < SEG_VERSION_OLDEST || r->hdr.version > SEG_VERSION) {
        pod_err_set(err, "log segment %s has format version %" PRIu32 "; this build reads versions "
                    "%u to %u", path, r->hdr.version, SEG_VERSION_OLDEST, SEG_VERSION);
        goto fail;
    }
    if (get32(b + 12) != SEG_HEADER_SIZE) {
        pod_err_set(err, "log segment %s declares a %" PRIu32 "-byte header; version %u has %u bytes",
                    path, get32(b + 12), SEG_VERSION, SEG_HEADER_SIZE);
        goto fail;
    }
    r->hdr.host = get32(b + 16);
    r->hdr.logger = get32(b + 20);
    r->hdr.seq = get64(b + 24);
    r->hdr.first_epoch = get64(b + 32);
    r->hdr.create_time_ns = get64(b + 40);
    if (r->hdr.version >= 3) {
        r->hdr.ckpt_flags = get32(b + 48);
        r->hdr.since_epoch = get64(b + 52);
    }
    r->off = r->st.good_bytes = SEG_HEADER_SIZE;
    r->st.epoch_lo = UINT64_MAX;
    r->st.epoch_hi = 0;
    return r;
fail:
    close(r->fd);
    free(r);
    return NULL;
}

const struct seg_header *seg_reader_header(const struct seg_reader *r) { return &r->hdr; }
const struct seg_tail_status *seg_reader_tail_status(const struct seg_reader *r) { return &r->tail; }
const struct seg_reader_stats *seg_reader_stats(const struct seg_reader *r) { return &r->st; }
const struct seg_block_info *seg_reader_block(const struct seg_reader *r) { return &r->blk; }

static void set_tail(struct seg_reader *r, enum seg_tail_kind k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_tail(struct seg_reader *r, enum seg_tail_kind k, const char *fmt, ...)
{
    r->tail.kind = k;
    r->tail.offset = r->off;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->tail.reason, sizeof r->tail.reason, fmt, ap);
    va_end(ap);
}

/* 1 when every byte from off to the end of the file is zero, 0 if not, -1 on error. */
static int all_zero_from(struct seg_reader *r, uint64_t off)
{
    unsigned char chunk[8192];
    while (off < r->st.file_size) {
        uint64_t want = r->st.file_size - off;
        if (want > sizeof chunk) want = sizeof chunk;
        ssize_t n = pread_full(r->fd, chunk, (size_t)want, off);
        if (n < 0) return -1;
        if (n == 0) return 1;
        for (ssize_t i = 0; i < n; i++)
            if (chunk[i]) return 0;
        off += (uint64_t)n;
    }
    return 1;
}

/* Read, verify and parse-check the block at r->off. 1: it is loaded (records
 * ready); 0: the log ends here (tail set); -1: I/O error. */
static int load_block(struct seg_reader *r, pod_err *err)
{
    uint64_t off = r->off, size = r->st.file_size;
    if (off >= size) {
        set_tail(r, SEG_TAIL_CLEAN, "end of file after the last complete block");
        return 0;
    }
    uint64_t rem = size - off;
    int z;
    if (rem < DIRECT_PAGE && size % DIRECT_PAGE == 0) {
        /* A direct writer's sync pads the last page (seg_writer_go_direct). */
        if ((z = all_zero_from(r, off)) < 0) goto io_error;
        if (z == 1) {
            set_tail(r, SEG_TAIL_CLEAN, "end of file after the last complete block and %" PRIu64
                     " zero bytes of padding to the page's end", rem);
            return 0;
        }
    }
    if (rem < SEG_BLOCK_HEADER_SIZE) {
        set_tail(r, SEG_TAIL_TORN, "incomplete block header: %" PRIu64 " of %u bytes", rem,
                 SEG_BLOCK_HEADER_SIZE);
        return 0;
    }
    unsigned char h[SEG_BLOCK_HEADER_SIZE];
    ssize_t n = pread_full(r->fd, h, sizeof h, off);
    if (n < 0) goto io_error;
    if (n < (ssize_t)sizeof h) {
        set_tail(r, SEG_TAIL_TORN, "file shrank while reading: block header cut short");
        return 0;
    }
    uint32_t magic = get32(h), len = get32(h + 4), count = get32(h + 24), stored = get32(h + 28);
    uint64_t elo = get64(h + 8), ehi = get64(h + 16);
    if (magic == SEG_MARK_MAGIC && r->hdr.version >= 4) {
        uint32_t c = crc32c(0, h, 28);
        if (c != stored || len != 0 || count != 0) {
            set_tail(r, SEG_TAIL_CORRUPT, "damaged mark: %s", c != stored ? "CRC mismatch"
                     : "payload or record count not zero");
            return 0;
        }
        r->st.marks++;
        r->st.mark_through = elo;
        r->st.mark_nloggers = get32(h + 16);
        r->st.mark_logger = get32(h + 20);
        r->off = off + SEG_BLOCK_HEADER_SIZE;
        r->st.good_bytes = r->off;
        r->left = 0;
        return 1; /* no records: seg_reader_next reads on */
    }
    if (magic != SEG_BLOCK_MAGIC) {
        /* Zeros from here to the end: space the file system allocated for an
         * append whose data never reached the disk — a torn write. */
        if ((z = all_zero_from(r, off)) < 0) goto io_error;
        if (z == 1) {
            set_tail(r, SEG_TAIL_TORN, "%" PRIu64 " zero bytes after the last complete block "
                     "(space allocated but never written)", rem);
            return 0;
        }
        set_tail(r, SEG_TAIL_CORRUPT, "bad block magic 0x%08" PRIx32 " (expected 0x%08x): "
                 "garbage after the last good block", magic, SEG_BLOCK_MAGIC);
        return 0;
    }
    if (len > SEG_MAX_BLOCK_PAYLOAD) {
        set_tail(r, SEG_TAIL_CORRUPT, "block payload length %" PRIu32 " exceeds the limit of %u",
                 len, SEG_MAX_BLOCK_PAYLOAD);
        return 0;
    }
    if ((uint64_t)SEG_BLOCK_HEADER_SIZE + len > rem) {
        set_tail(r, SEG_TAIL_TORN, "incomplete block: %" PRIu64 " of %" PRIu64 " bytes present",
                 rem, (uint64_t)SEG_BLOCK_HEADER_SIZE + len);
        return 0;
    }
    if (len > r->cap) {
        size_t nc = r->cap ? r->cap : 64 * 1024;
        while (nc < len) nc *= 2;
        unsigned char *nb = realloc(r->buf, nc);
        if (!nb) {
            pod_err_set(err, "out of memory reading a %" PRIu32 "-byte block of %s", len, r->path);
            return -1;
        }
        r->buf = nb;
        r->cap = nc;
    }
    n = pread_full(r->fd, r->buf, len, off + SEG_BLOCK_HEADER_SIZE);
    if (n < 0) goto io_error;
    if (n < (ssize_t)len) {
        set_tail(r, SEG_TAIL_TORN, "file shrank while reading: block payload cut short");
        return 0;
    }
    uint32_t c = crc32c(crc32c(0, h, 28), r->buf, len);
    if (c != stored) {
        set_tail(r, SEG_TAIL_CORRUPT, "block CRC mismatch: 0x%08" PRIx32 " stored, 0x%08" PRIx32
                 " computed", stored, c);
        return 0;
    }
    if (count == 0 || elo > ehi) {
        set_tail(r, SEG_TAIL_CORRUPT, "block with a valid CRC but %s", count == 0
                 ? "no records" : "an inverted epoch range");
        return 0;
    }
    /* Check every record before handing out any. */
    size_t pos = 0;
    for (uint32_t i = 0; i < count; i++) {
        const unsigned char *p = r->buf + pos;
        size_t avail = len - pos;
        if (avail < SEG_RECORD_OVERHEAD) {
            set_tail(r, SEG_TAIL_CORRUPT, "record %" PRIu32 " of %" PRIu32 " at payload offset %zu "
                     "runs past the block", i, count, pos);
            return 0;
        }
        uint32_t rl = get32(p);
        uint16_t kl = get16(p + 8);
        uint8_t kind = p[10];
        uint64_t e = log_ev_epoch(get64(p + 12));
        const char *bad = NULL;
        if (rl < SEG_RECORD_OVERHEAD || rl > avail) bad = "bad record length";
        else if ((uint64_t)SEG_RECORD_OVERHEAD + kl > rl) bad = "key longer than the record";
        else if (get32(p + rl - 4) != crc32c(0, p, rl - 4)) bad = "record CRC mismatch";
        else if (kind != LOG_PUT && kind != LOG_DELETE && (kind != LOG_PATCH || r->hdr.version < 2))
            bad = "invalid record kind";
        else if (kind == LOG_DELETE && rl != SEG_RECORD_OVERHEAD + kl) bad = "DELETE with a tuple";
        else if (kind == LOG_PATCH && rl < SEG_RECORD_OVERHEAD + kl + LOG_PATCH_HEADER)
            bad = "PATCH shorter than its header";
        else if (e < elo || e > ehi) bad = "record epoch outside the block's epoch range";
        if (bad) {
            set_tail(r, SEG_TAIL_CORRUPT, "%s in record %" PRIu32 " of %" PRIu32
                     " (payload offset %zu)", bad, i, count, pos);
            return 0;
        }
        pos += rl;
    }
    if (pos != len) {
        set_tail(r, SEG_TAIL_CORRUPT, "%zu bytes after the block's %" PRIu32 " records", len - pos,
                 count);
        return 0;
    }
    r->len = len;
    r->pos = 0;
    r->left = count;
    r->blk = (struct seg_block_info){off, SEG_BLOCK_HEADER_SIZE + (uint64_t)len, elo, ehi, count};
    r->off = off + SEG_BLOCK_HEADER_SIZE + len;
    r->st.good_bytes = r->off;
    r->st.blocks++;
    if (elo < r->st.epoch_lo) r->st.epoch_lo = elo;
    if (ehi > r->st.epoch_hi) r->st.epoch_hi = ehi;
    return 1;
io_error:
    pod_err_set(err, "cannot read log segment %s at offset %" PRIu64 ": %s", r->path, off,
                strerror(errno));
    return -1;
}

int seg_reader_next(struct seg_reader *r, struct log_record *out, pod_err *err)
{
    while (r->left == 0) {
        if (r->tail.kind != SEG_TAIL_UNKNOWN) return 0;
        int rc = load_block(r, err);
        if (rc <= 0) return rc;
    }
    const unsigned char *p = r->buf + r->pos;
    uint32_t rl = get32(p);
    out->table_id = get32(p + 4);
    out->key_len = get16(p + 8);
    out->kind = p[10];
    out->epoch_version = get64(p + 12);
    out->key = p + SEG_RECORD_HEADER;
    out->tuple = p + SEG_RECORD_HEADER + out->key_len;
    out->tuple_len = rl - SEG_RECORD_OVERHEAD - out->key_len;
    r->pos += rl;
    r->left--;
    r->st.records++;
    return 1;
}

int seg_peek_epochs(const char *path, uint64_t *epoch_lo, uint64_t *epoch_hi, pod_err *err)
{
    *epoch_lo = UINT64_MAX;
    *epoch_hi = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        pod_err_set(err, "cannot open log segment %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    unsigned char b[SEG_HEADER_SIZE];
    int rc = -1;
    if (fstat(fd, &sb) != 0) {
        pod_err_set(err, "cannot stat log segment %s: %s", path, strerror(errno));
        goto out;
    }
    if (pread_full(fd, b, sizeof b, 0) != (ssize_t)sizeof b || memcmp(b, SEG_MAGIC, 8) != 0 ||
        get32(b + 60) != crc32c(0, b, 60)) {
        pod_err_set(err, "%s has no valid log segment header", path);
        goto out;
    }
    uint64_t off = SEG_HEADER_SIZE, size = (uint64_t)sb.st_size;
    while (size - off >= SEG_BLOCK_HEADER_SIZE) {
        unsigned char h[SEG_BLOCK_HEADER_SIZE];
        if (pread_full(fd, h, sizeof h, off) != (ssize_t)sizeof h) break;
        uint32_t len = get32(h + 4);
        uint64_t lo = get64(h + 8), hi = get64(h + 16);
        if (get32(h) == SEG_MARK_MAGIC && len == 0) { /* no records, no epochs */
            off += SEG_BLOCK_HEADER_SIZE;
            continue;
        }
        if (get32(h) != SEG_BLOCK_MAGIC || len > SEG_MAX_BLOCK_PAYLOAD || lo > hi ||
            SEG_BLOCK_HEADER_SIZE + (uint64_t)len > size - off)
            break;
        if (lo < *epoch_lo) *epoch_lo = lo;
        if (hi > *epoch_hi) *epoch_hi = hi;
        off += SEG_BLOCK_HEADER_SIZE + len;
    }
    rc = 0;
out:
    close(fd);
    return rc;
}

void seg_reader_close(struct seg_reader *r)
{
    if (!r) return;
    close(r->fd);
    free(r->buf);
    free(r);
}
