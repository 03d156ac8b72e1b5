/* Log segment format (src/log/segment.c, docs/log-format.md) and CRC-32C
 * (src/log/crc32c.c).
 *
 *  - CRC-32C test vectors; SSE4.2 and software versions agree on random
 *    buffers of random lengths and alignments; chaining.
 *  - Round trip of thousands of records (empty tuples, deletes, empty keys,
 *    64 KiB tuples) over many blocks and several segments rotated by size.
 *  - A 3-block segment truncated at every byte offset: exactly the records of
 *    the complete blocks before the cut, tail TORN (CLEAN at block boundaries),
 *    a clear header error below 64 bytes.
 *  - One flipped bit at every byte offset: the records of the blocks before the
 *    damaged one, a non-clean tail at that block's offset (CORRUPT whenever the
 *    byte is not the length field), header damage refused at open.
 *  - A bad record inside a block whose block CRC is valid: the whole block is
 *    withheld.
 *  - Garbage, short garbage and zeros after the last block.
 *  - Marks: read back with their fields, no records or epochs of their own,
 *    a damaged or cut one ends the file, none in a version-3 file.
 *  - Written and synced (or paced) pages leave the page cache.
 *  - Bad headers, invalid records, writer errors (missing directory, existing
 *    segment, a file-size limit hit in the middle of a block: EFBIG with a
 *    partial write, the partial block removed, a retry succeeding).
 *
 * With PODDB_LOGDUMP_SAMPLE=DIR set, the program instead writes sample log
 * directories for tests/integration/logdump.sh (DIR/ok, DIR/corrupt,
 * DIR/badheader) and exits. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "log/crc32c.h"
#include "log/segment.h"
#include "helpers/testutil.h"

/* ---- helpers ------------------------------------------------------------------ */

static uint64_t rng_state;
static uint64_t rnd(void) { return tu_rand(&rng_state); }

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag, (void)f;
    return remove(p);
}
static void rm_rf(const char *p) { nftw(p, rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

static char tmp_dir[256];
static void cleanup_tmp(void)
{
    if (tmp_dir[0]) {
        chmod(tmp_dir, 0755);
        rm_rf(tmp_dir);
    }
}
/* A fresh directory, removed at exit (each test runs in its own process). */
static const char *make_tmp(void)
{
    const char *tag = getenv("PODDB_TEST_TAG");
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/poddb-test-%s-log-XXXXXX", tag ? tag : "x");
    ck_assert_ptr_nonnull(mkdtemp(tmp_dir));
    atexit(cleanup_tmp);
    return tmp_dir;
}

/* Record i of a deterministic stream: content depends only on (seed, i). */
struct gen {
    struct log_record rec;
    unsigned char key[300];
    unsigned char *tuple; /* owned */
};

static void gen_record(struct gen *g, uint64_t seed, uint64_t i, bool big_tuples)
{
    uint64_t save = rng_state;
    rng_state = seed * 1000003u + i;
    struct log_record *r = &g->rec;
    memset(r, 0, sizeof *r);
    r->table_id = (uint32_t)(rnd() % 5);
    r->kind = (i % 7 == 3) ? LOG_DELETE : LOG_PUT;
    r->epoch_version = log_ev_make((uint32_t)(1 + i / 100), (uint32_t)(i % 100));
    r->key_len = (uint16_t)(i % 53 == 0 ? 0 : 1 + rnd() % 40);
    for (int k = 0; k < r->key_len; k++) g->key[k] = (unsigned char)rnd();
    r->key = g->key;
    uint32_t tl = 0;
    if (r->kind == LOG_PUT) {
        uint64_t c = rnd() % 40;
        if (c == 0) tl = 0;
        else if (c == 1 && big_tuples) tl = 64 * 1024;
        else if (c == 2 && big_tuples) tl = 64 * 1024 + (uint32_t)(rnd() % 1000);
        else tl = (uint32_t)(rnd() % 300);
    }
    free(g->tuple);
    g->tuple = tl ? malloc(tl) : NULL;
    for (uint32_t k = 0; k < tl; k++) g->tuple[k] = (unsigned char)(rnd() >> 13);
    r->tuple = g->tuple;
    r->tuple_len = tl;
    rng_state = save;
}

static void assert_same(const struct log_record *got, const struct log_record *want, uint64_t i)
{
    ck_assert_msg(got->table_id == want->table_id && got->kind == want->kind &&
                      got->epoch_version == want->epoch_version && got->key_len == want->key_len &&
                      got->tuple_len == want->tuple_len,
                  "record %" PRIu64 " differs in its fields", i);
    ck_assert_msg(memcmp(got->key, want->key, want->key_len) == 0, "record %" PRIu64 " key", i);
    ck_assert_msg(want->tuple_len == 0 || memcmp(got->tuple, want->tuple, want->tuple_len) == 0,
                  "record %" PRIu64 " tuple", i);
}

static void seg_path(char *buf, size_t len, const char *dir, uint32_t h, uint32_t l, uint64_t s)
{
    char name[SEG_NAME_MAX];
    seg_format_name(name, sizeof name, h, l, s);
    snprintf(buf, len, "%s/%s", dir, name);
}

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void put32le_t(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void write_all(const char *path, const void *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* Read a whole segment; returns the records read, fills the tail. -1 when open fails. */
static bool read_big = true; /* the generator's big_tuples for read_segment */
static long read_segment(const char *path, uint64_t seed, uint64_t first, struct seg_tail_status *tail,
                         struct seg_reader_stats *st, pod_err *oerr)
{
    pod_err err = {{0}};
    struct seg_reader *r = seg_reader_open(path, &err);
    if (!r) {
        if (oerr) *oerr = err;
        return -1;
    }
    struct gen g = {0};
    struct log_record rec;
    long n = 0;
    int rc;
    while ((rc = seg_reader_next(r, &rec, &err)) == 1) {
        gen_record(&g, seed, first + (uint64_t)n, read_big);
        assert_same(&rec, &g.rec, first + (uint64_t)n);
        n++;
    }
    ck_assert_msg(rc == 0, "read error: %s", err.msg);
    /* Reading past the end stays at the end. */
    ck_assert_int_eq(seg_reader_next(r, &rec, &err), 0);
    if (tail) *tail = *seg_reader_tail_status(r);
    if (st) *st = *seg_reader_stats(r);
    ck_assert_uint_eq(seg_reader_stats(r)->records, (uint64_t)n);
    seg_reader_close(r);
    free(g.tuple);
    return n;
}

/* A small segment of 3 blocks (3, 1 and 4 records of small tuples) in a
 * fresh directory, read back into memory for the tests that damage copies. */
struct small {
    const char *dir;
    char path[512];   /* the segment */
    uint64_t ends[3]; /* the file size after block i */
    long counts[3];   /* records up to block i */
    unsigned char *b; /* the file's len bytes (free it) */
    size_t len;
};

static struct small write_small(uint64_t seed)
{
    struct small s = {.dir = make_tmp()};
    pod_err err = {{0}};
    struct seg_writer *w = seg_writer_open(s.dir, 1, 0, 1, 7, &err);
    ck_assert_msg(w != NULL, "%s", err.msg);
    const int per_block[3] = {3, 1, 4};
    read_big = false;
    struct gen g = {0};
    uint64_t i = 0;
    for (int b = 0; b < 3; b++) {
        for (int k = 0; k < per_block[b]; k++) {
            gen_record(&g, seed, i++, false);
            ck_assert_int_eq(seg_writer_append(w, &g.rec, &err), 0);
        }
        ck_assert_int_eq(seg_writer_flush_block(w, &err), 0);
        s.ends[b] = seg_writer_size(w);
        s.counts[b] = (long)i;
    }
    ck_assert_int_eq(seg_writer_close(w, &err), 0);
    free(g.tuple);
    seg_path(s.path, sizeof s.path, s.dir, 1, 0, 1);
    s.b = read_all(s.path, &s.len);
    return s;
}

/* ---- CRC-32C ------------------------------------------------------------------- */

START_TEST(crc32c_vectors)
{
    ck_assert_uint_eq(crc32c(0, "123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(crc32c_sw(0, "123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(crc32c_hw(0, "123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(crc32c(0, "", 0), 0);
    unsigned char b[32];
    memset(b, 0, 32); /* RFC 3720 B.4 */
    ck_assert_uint_eq(crc32c_sw(0, b, 32), 0x8A9136AAu);
    ck_assert_uint_eq(crc32c(0, b, 32), 0x8A9136AAu);
    memset(b, 0xff, 32);
    ck_assert_uint_eq(crc32c_sw(0, b, 32), 0x62A8AB43u);
    ck_assert_uint_eq(crc32c(0, b, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++) b[i] = (unsigned char)i;
    ck_assert_uint_eq(crc32c_sw(0, b, 32), 0x46DD794Eu);
    ck_assert_uint_eq(crc32c(0, b, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++) b[i] = (unsigned char)(31 - i);
    ck_assert_uint_eq(crc32c_sw(0, b, 32), 0x113FDB5Cu);
    ck_assert_uint_eq(crc32c(0, b, 32), 0x113FDB5Cu);
    printf("crc32c: SSE4.2 %s\n", crc32c_hw_available() ? "available" : "not available");
}
END_TEST

START_TEST(crc32c_hw_equals_sw)
{
    rng_state = 42;
    /* Every tenth length reaches past the hardware version's three 8 KiB
     * stripes (24 KiB), up to four rounds of them and a tail. */
    enum { MAX = 8192, MAX_LONG = 4 * 3 * 8192 + 8192 };
    unsigned char *buf = malloc(MAX_LONG + 16);
    for (int i = 0; i < MAX_LONG + 16; i++) buf[i] = (unsigned char)rnd();
    for (int it = 0; it < 3000; it++) {
        size_t off = rnd() % 16,
               len = it < 64 ? (size_t)it : rnd() % (it % 10 == 0 ? MAX_LONG : MAX);
        uint32_t seed = it % 3 ? (uint32_t)rnd() : 0;
        uint32_t sw = crc32c_sw(seed, buf + off, len), hw = crc32c_hw(seed, buf + off, len);
        ck_assert_msg(sw == hw, "len %zu off %zu: sw 0x%08x hw 0x%08x", len, off, sw, hw);
        ck_assert_uint_eq(crc32c(seed, buf + off, len), sw);
        /* chaining */
        size_t cut = len ? rnd() % len : 0;
        ck_assert_uint_eq(crc32c(crc32c(seed, buf + off, cut), buf + off + cut, len - cut), sw);
        ck_assert_uint_eq(crc32c_sw(crc32c_sw(seed, buf + off, cut), buf + off + cut, len - cut), sw);
    }
    free(buf);
}
END_TEST

/* ---- names ---------------------------------------------------------------------- */

START_TEST(segment_names)
{
    char n[SEG_NAME_MAX];
    seg_format_name(n, sizeof n, 3, 12, 42);
    ck_assert_str_eq(n, "seg-3-12-0000000042.log");
    uint32_t h, l;
    uint64_t s;
    ck_assert(seg_parse_name(n, &h, &l, &s));
    ck_assert_uint_eq(h, 3);
    ck_assert_uint_eq(l, 12);
    ck_assert_uint_eq(s, 42);
    seg_format_name(n, sizeof n, UINT32_MAX, 0, 9999999999ull);
    ck_assert(seg_parse_name(n, &h, &l, &s));
    ck_assert_uint_eq(h, UINT32_MAX);
    ck_assert_uint_eq(s, 9999999999ull);
    const char *bad[] = {"seg-1-0-000000001.log", "seg-1-0-00000000001.log", "seg-1-0-0000000001.lo",
                         "seg-1-0-0000000001.log~", "seg--0-0000000001.log", "seg-1-0000000001.log",
                         "xseg-1-0-0000000001.log", "seg-4294967296-0-0000000001.log", "notes.txt"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(!seg_parse_name(bad[i], &h, &l, &s), "accepted %s", bad[i]);
}
END_TEST

/* ---- round trip ------------------------------------------------------------------- */

START_TEST(round_trip_many_blocks_and_segments)
{
    const char *dir = make_tmp();
    const uint64_t seed = 7, N = 4000, ROTATE = 1 << 20;
    rng_state = 99;
    pod_err err = {{0}};
    struct gen g = {0};
    uint64_t seq = 1, first[64], nblocks[64], nrec[64];
    int nseg = 0;
    struct seg_writer *w = seg_writer_open(dir, 2, 1, seq, 1, &err);
    ck_assert_msg(w != NULL, "%s", err.msg);
    first[0] = 0;
    nblocks[0] = nrec[0] = 0;
    uint64_t block_target = 1 + rnd() % 50;
    uint32_t in_block = 0;
    for (uint64_t i = 0; i < N; i++) {
        gen_record(&g, seed, i, true);
        ck_assert_msg(seg_writer_append(w, &g.rec, &err) == 0, "%s", err.msg);
        nrec[nseg]++;
        if (++in_block >= block_target) {
            ck_assert_uint_eq(seg_writer_pending_records(w), in_block);
            ck_assert_uint_gt(seg_writer_pending(w), SEG_BLOCK_HEADER_SIZE);
            uint64_t before = seg_writer_size(w), pend = seg_writer_pending(w);
            ck_assert_msg(seg_writer_flush_block(w, &err) == 0, "%s", err.msg);
            ck_assert_uint_eq(seg_writer_size(w), before + pend);
            ck_assert_uint_eq(seg_writer_pending(w), 0);
            nblocks[nseg]++;
            in_block = 0;
            block_target = 1 + rnd() % 50;
            if (rnd() % 4 == 0) {
                ck_assert_msg(seg_writer_sync(w, &err) == 0, "%s", err.msg);
                ck_assert_uint_eq(seg_writer_synced_size(w), seg_writer_size(w));
            }
            if (seg_writer_size(w) >= ROTATE) {
                ck_assert_msg(seg_writer_close(w, &err) == 0, "%s", err.msg);
                nseg++;
                ck_assert_int_lt(nseg, 64);
                first[nseg] = i + 1;
                nblocks[nseg] = nrec[nseg] = 0;
                w = seg_writer_open(dir, 2, 1, ++seq, log_ev_epoch(g.rec.epoch_version), &err);
                ck_assert_msg(w != NULL, "%s", err.msg);
            }
        }
    }
    if (in_block) nblocks[nseg]++;
    ck_assert_msg(seg_writer_close(w, &err) == 0, "%s", err.msg); /* writes the last block */
    nseg++;
    ck_assert_int_ge(nseg, 3);
    uint64_t total = 0, total_blocks = 0;
    for (int s = 0; s < nseg; s++) {
        char path[512];
        seg_path(path, sizeof path, dir, 2, 1, (uint64_t)s + 1);
        struct seg_tail_status tail;
        struct seg_reader_stats st;
        long n = read_segment(path, seed, first[s], &tail, &st, NULL);
        ck_assert_int_eq(n, (long)nrec[s]);
        ck_assert_int_eq(tail.kind, SEG_TAIL_CLEAN);
        ck_assert_uint_eq(tail.offset, st.file_size);
        ck_assert_uint_eq(st.good_bytes, st.file_size);
        ck_assert_uint_eq(st.blocks, nblocks[s]);
        if (nrec[s]) {
            ck_assert_uint_eq(st.epoch_lo, 1 + first[s] / 100);
            ck_assert_uint_eq(st.epoch_hi, 1 + (first[s] + nrec[s] - 1) / 100);
        }
        struct seg_reader *r = seg_reader_open(path, &err);
        ck_assert_ptr_nonnull(r);
        const struct seg_header *h = seg_reader_header(r);
        ck_assert_uint_eq(h->host, 2);
        ck_assert_uint_eq(h->logger, 1);
        ck_assert_uint_eq(h->seq, (uint64_t)s + 1);
        ck_assert_uint_eq(h->version, SEG_VERSION);
        ck_assert_uint_gt(h->create_time_ns, 0);
        seg_reader_close(r);
        total += (uint64_t)n;
        total_blocks += st.blocks;
    }
    ck_assert_uint_eq(total, N);
    printf("round trip: %" PRIu64 " records in %" PRIu64 " blocks, %d segments\n", total,
           total_blocks, nseg);
    free(g.tuple);
}
END_TEST

/* Empty segments and empty flushes. */
START_TEST(empty_segment_and_noop_flush)
{
    const char *dir = make_tmp();
    pod_err err = {{0}};
    struct seg_writer *w = seg_writer_open(dir, 0, 0, 0, 0, &err);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(seg_writer_flush_block(w, &err), 0);
    ck_assert_int_eq(seg_writer_sync(w, &err), 0);
    ck_assert_uint_eq(seg_writer_size(w), SEG_HEADER_SIZE);
    ck_assert_int_eq(seg_writer_close(w, &err), 0);
    char path[512];
    seg_path(path, sizeof path, dir, 0, 0, 0);
    struct seg_tail_status tail;
    struct seg_reader_stats st;
    ck_assert_int_eq(read_segment(path, 0, 0, &tail, &st, NULL), 0);
    ck_assert_int_eq(tail.kind, SEG_TAIL_CLEAN);
    ck_assert_uint_eq(st.blocks, 0);
    ck_assert_uint_eq(tail.offset, SEG_HEADER_SIZE);
}
END_TEST

/* ---- torn tails ---------------------------------------------------------------------- */

START_TEST(truncation_at_every_offset)
{
    struct small s = write_small(11);
    char cut[600];
    snprintf(cut, sizeof cut, "%s/cut.log", s.dir);
    ck_assert_uint_eq(s.len, s.ends[2]);
    int torn = 0, clean = 0;
    for (size_t c = 0; c <= s.len; c++) {
        write_all(cut, s.b, c);
        struct seg_tail_status tail;
        pod_err err = {{0}};
        long n = read_segment(cut, 11, 0, &tail, NULL, &err);
        if (c < SEG_HEADER_SIZE) {
            ck_assert_int_eq(n, -1);
            ck_assert_msg(strstr(err.msg, "not a log segment") && strstr(err.msg, "cut.log"),
                          "cut at %zu: %s", c, err.msg);
            continue;
        }
        long want = 0;
        uint64_t good = SEG_HEADER_SIZE;
        for (int k = 0; k < 3; k++)
            if (s.ends[k] <= c) {
                want = s.counts[k];
                good = s.ends[k];
            }
        ck_assert_msg(n == want, "cut at %zu: %ld records, want %ld", c, n, want);
        ck_assert_uint_eq(tail.offset, good);
        if (c == good) {
            ck_assert_int_eq(tail.kind, SEG_TAIL_CLEAN);
            clean++;
        } else {
            ck_assert_msg(tail.kind == SEG_TAIL_TORN, "cut at %zu: %s (%s)", c,
                          seg_tail_name(tail.kind), tail.reason);
            torn++;
        }
    }
    ck_assert_int_eq(clean, 4);
    ck_assert_int_eq(torn, (int)s.len - (int)SEG_HEADER_SIZE + 1 - 4);
    free(s.b);
}
END_TEST

START_TEST(bit_flip_at_every_offset)
{
    struct small s = write_small(12);
    char bad[600];
    snprintf(bad, sizeof bad, "%s/bad.log", s.dir);
    int corrupt = 0;
    for (size_t o = 0; o < s.len; o++) {
        s.b[o] ^= (unsigned char)(1u << (o % 8));
        write_all(bad, s.b, s.len);
        s.b[o] ^= (unsigned char)(1u << (o % 8));
        struct seg_tail_status tail;
        pod_err err = {{0}};
        long n = read_segment(bad, 12, 0, &tail, NULL, &err);
        if (o < SEG_HEADER_SIZE) {
            ck_assert_msg(n == -1, "header byte %zu flipped, yet opened", o);
            ck_assert_msg(strstr(err.msg, "damaged header") || strstr(err.msg, "bad magic"),
                          "byte %zu: %s", o, err.msg);
            continue;
        }
        int blk = 0;
        while (o >= s.ends[blk]) blk++;
        uint64_t start = blk ? s.ends[blk - 1] : SEG_HEADER_SIZE;
        long want = blk ? s.counts[blk - 1] : 0;
        ck_assert_msg(n == want, "byte %zu (block %d): %ld records, want %ld", o, blk, n, want);
        ck_assert_uint_eq(tail.offset, start);
        ck_assert_msg(tail.kind == SEG_TAIL_CORRUPT || tail.kind == SEG_TAIL_TORN,
                      "byte %zu: tail %s", o, seg_tail_name(tail.kind));
        bool length_field = o - start >= 4 && o - start < 8;
        if (!length_field) {
            ck_assert_msg(tail.kind == SEG_TAIL_CORRUPT, "byte %zu: %s (%s)", o,
                          seg_tail_name(tail.kind), tail.reason);
            corrupt++;
        }
    }
    ck_assert_int_gt(corrupt, 0);
    free(s.b);
}
END_TEST

/* A damaged middle block hides the blocks after it, but not those before. */
START_TEST(corrupt_middle_block_keeps_earlier_records)
{
    struct small s = write_small(13);
    s.b[s.ends[0] + SEG_BLOCK_HEADER_SIZE + 25] ^= 0x10; /* in block 2's payload */
    write_all(s.path, s.b, s.len);
    struct seg_tail_status tail;
    ck_assert_int_eq(read_segment(s.path, 13, 0, &tail, NULL, NULL), s.counts[0]);
    ck_assert_int_eq(tail.kind, SEG_TAIL_CORRUPT);
    ck_assert_uint_eq(tail.offset, s.ends[0]);
    ck_assert_ptr_nonnull(strstr(tail.reason, "block CRC mismatch"));
    free(s.b);
}
END_TEST

/* A bad record inside a block whose block CRC is valid (re-computed after the
 * damage): the block's records are all withheld, CORRUPT at that block. */
START_TEST(bad_record_in_valid_block)
{
    struct small s = write_small(16);
    unsigned char *blk = s.b + s.ends[0]; /* block 2 (one record) */
    uint32_t plen = (uint32_t)blk[4] | (uint32_t)blk[5] << 8 | (uint32_t)blk[6] << 16 |
                    (uint32_t)blk[7] << 24;
    blk[SEG_BLOCK_HEADER_SIZE + plen - 6] ^= 0x01; /* last byte before the record CRC */
    uint32_t c = crc32c(crc32c(0, blk, 28), blk + SEG_BLOCK_HEADER_SIZE, plen);
    put32le_t(blk + 28, c);
    write_all(s.path, s.b, s.len);
    struct seg_tail_status tail;
    ck_assert_int_eq(read_segment(s.path, 16, 0, &tail, NULL, NULL), s.counts[0]);
    ck_assert_int_eq(tail.kind, SEG_TAIL_CORRUPT);
    ck_assert_uint_eq(tail.offset, s.ends[0]);
    ck_assert_msg(strstr(tail.reason, "record CRC mismatch in record 0 of 1"), "%s", tail.reason);
    free(s.b);
}
END_TEST

START_TEST(garbage_after_last_block)
{
    struct small s = write_small(14);
    char g[600];
    snprintf(g, sizeof g, "%s/g.log", s.dir);
    unsigned char *x = malloc(s.len + 8192);
    memcpy(x, s.b, s.len);
    rng_state = 5;
    struct {
        size_t n;
        int fill; /* -1 random, else the byte */
        enum seg_tail_kind want;
        const char *reason;
    } cases[] = {
        {200, -1, SEG_TAIL_CORRUPT, "bad block magic"},
        {10, -1, SEG_TAIL_TORN, "incomplete block header"},
        {8192, 0, SEG_TAIL_TORN, "zero bytes"},
        {1, 0, SEG_TAIL_TORN, "incomplete block header"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        for (size_t i = 0; i < cases[c].n; i++)
            x[s.len + i] = cases[c].fill < 0 ? (unsigned char)(rnd() | 1) : (unsigned char)cases[c].fill;
        write_all(g, x, s.len + cases[c].n);
        struct seg_tail_status tail;
        ck_assert_int_eq(read_segment(g, 14, 0, &tail, NULL, NULL), s.counts[2]);
        ck_assert_int_eq(tail.kind, cases[c].want);
        ck_assert_uint_eq(tail.offset, s.len);
        ck_assert_msg(strstr(tail.reason, cases[c].reason), "case %zu: %s", c, tail.reason);
    }
    /* Zeros from the last block to the page's end (a direct writer's sync):
     * a clean end. */
    size_t pad = (4096 - s.len % 4096) % 4096;
    if (pad) {
        memset(x + s.len, 0, pad);
        write_all(g, x, s.len + pad);
        struct seg_tail_status ptail;
        ck_assert_int_eq(read_segment(g, 14, 0, &ptail, NULL, NULL), s.counts[2]);
        ck_assert_int_eq(ptail.kind, SEG_TAIL_CLEAN);
        ck_assert_uint_eq(ptail.offset, s.len);
        ck_assert_msg(strstr(ptail.reason, "padding"), "%s", ptail.reason);
    }
    /* A copy of the first block appended with its last byte missing: torn. */
    size_t b1 = s.ends[0] - SEG_HEADER_SIZE;
    memcpy(x + s.len, s.b + SEG_HEADER_SIZE, b1 - 1);
    write_all(g, x, s.len + b1 - 1);
    struct seg_tail_status tail;
    ck_assert_int_eq(read_segment(g, 14, 0, &tail, NULL, NULL), s.counts[2]);
    ck_assert_int_eq(tail.kind, SEG_TAIL_TORN);
    ck_assert_ptr_nonnull(strstr(tail.reason, "incomplete block"));
    /* A block with an absurd length: corrupt, not torn. */
    memcpy(x + s.len, s.b + SEG_HEADER_SIZE, SEG_BLOCK_HEADER_SIZE);
    x[s.len + 7] = 0x7f;
    write_all(g, x, s.len + SEG_BLOCK_HEADER_SIZE);
    ck_assert_int_eq(read_segment(g, 14, 0, &tail, NULL, NULL), s.counts[2]);
    ck_assert_int_eq(tail.kind, SEG_TAIL_CORRUPT);
    ck_assert_ptr_nonnull(strstr(tail.reason, "exceeds the limit"));
    free(x);
    free(s.b);
}
END_TEST

/* ---- bad headers ------------------------------------------------------------------------ */

static void put32le(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Make the open segment fd claim format version v (header CRC made right again). */
static void set_version(int fd, uint32_t v)
{
    unsigned char h[SEG_HEADER_SIZE];
    ck_assert_int_eq(pread(fd, h, sizeof h, 0), (ssize_t)sizeof h);
    put32le(h + 8, v);
    put32le(h + 60, crc32c(0, h, 60));
    ck_assert_int_eq(pwrite(fd, h, sizeof h, 0), (ssize_t)sizeof h);
}

START_TEST(bad_headers)
{
    struct small s = write_small(15);
    char h[600];
    snprintf(h, sizeof h, "%s/h.log", s.dir);
    pod_err err = {{0}};

    write_all(h, s.b, 0);
    ck_assert_ptr_null(seg_reader_open(h, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "shorter than the 64-byte header"));

    memcpy(s.b, "PODDBLOX", 8);
    write_all(h, s.b, s.len);
    ck_assert_ptr_null(seg_reader_open(h, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "bad magic"));
    memcpy(s.b, SEG_MAGIC, 8);

    s.b[20] ^= 1; /* logger id, CRC now wrong */
    write_all(h, s.b, s.len);
    ck_assert_ptr_null(seg_reader_open(h, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "damaged header"));
    s.b[20] ^= 1;

    put32le(s.b + 8, SEG_VERSION + 1); /* a future version, CRC fixed up */
    put32le(s.b + 60, crc32c(0, s.b, 60));
    write_all(h, s.b, s.len);
    ck_assert_ptr_null(seg_reader_open(h, &err));
    char want[32];
    snprintf(want, sizeof want, "format version %u", SEG_VERSION + 1);
    ck_assert_msg(strstr(err.msg, want) != NULL, "%s", err.msg);

    snprintf(h, sizeof h, "%s/missing.log", s.dir);
    ck_assert_ptr_null(seg_reader_open(h, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "No such file"));
    ck_assert_ptr_nonnull(strstr(err.msg, "missing.log"));

    ck_assert_ptr_null(seg_reader_open(s.dir, &err));
    ck_assert_msg(strstr(err.msg, "not a regular file") || strstr(err.msg, "directory"), "%s",
                  err.msg);
    free(s.b);
}
END_TEST

/* ---- writer errors ------------------------------------------------------------------------- */

START_TEST(invalid_records_refused)
{
    const char *dir = make_tmp();
    pod_err err = {{0}};
    struct seg_writer *w = seg_writer_open(dir, 1, 1, 1, 1, &err);
    ck_assert_ptr_nonnull(w);
    struct log_record r = {.table_id = 3, .kind = 9, .key = "k", .key_len = 1};
    ck_assert_int_eq(seg_writer_append(w, &r, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "invalid kind 9"));
    r.kind = LOG_DELETE;
    r.tuple = "v";
    r.tuple_len = 1;
    ck_assert_int_eq(seg_writer_append(w, &r, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "DELETE"));
    r.kind = LOG_PATCH;
    r.tuple_len = LOG_PATCH_HEADER - 1;
    ck_assert_int_eq(seg_writer_append(w, &r, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "less than its 12-byte header"));
    r.kind = LOG_PUT;
    r.tuple_len = SEG_MAX_TUPLE + 1;
    ck_assert_int_eq(seg_writer_append(w, &r, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "exceeds the limit"));
    ck_assert_uint_eq(seg_writer_pending_records(w), 0);
    ck_assert_int_eq(seg_writer_close(w, &err), 0);
}
END_TEST

/* Records whose tuples were written in place (seg_writer_reserve, then
 * seg_writer_commit: the checkpoints) read back like appended ones, mixed
 * with them; room reserved and not committed leaves nothing behind; a
 * commit without its reservation is refused. */
/* _i = 0: a buffered writer; 1: a direct one, which builds its blocks in
 * its stage (and is synced now and then while one is being built). */
START_TEST(reserved_records_round_trip)
{
    const char *dir = make_tmp();
    pod_err err = {{0}};
    struct seg_writer *w = seg_writer_open(dir, 1, 0, 1, 1, &err);
    ck_assert_msg(w != NULL, "%s", err.msg);
    if (_i == 1) {
        ck_assert_msg(seg_writer_go_direct(w, 0, &err) == 0, "%s", err.msg);
        if (!seg_writer_is_direct(w)) printf("reserved_records_round_trip: %s refuses O_DIRECT\n", dir);
    }
    read_big = false;
    struct gen g = {0};
    /* A commit before anything was reserved (no block buffer yet either). */
    gen_record(&g, 77, 1, false);
    ck_assert_int_eq(seg_writer_commit(w, &g.rec, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "without its reserved room"));
    const uint64_t n = 600;
    for (uint64_t i = 0; i < n; i++) {
        gen_record(&g, 77, i, false);
        if (i % 5 == 2) { /* abandoned: filled with garbage, then another record takes its room */
            unsigned char *t = seg_writer_reserve(w, g.rec.key_len, 100, &err);
            ck_assert_msg(t != NULL, "%s", err.msg);
            memset(t, 0xEE, 100);
        }
        if (i % 2 == 0) {
            if (i % 7 == 3) /* with a block being built */
                ck_assert_msg(seg_writer_sync(w, &err) == 0, "%s", err.msg);
            unsigned char *t = seg_writer_reserve(w, g.rec.key_len, g.rec.tuple_len, &err);
            ck_assert_msg(t != NULL, "%s", err.msg);
            if (g.rec.tuple_len) memcpy(t, g.rec.tuple, g.rec.tuple_len);
            struct log_record r = g.rec;
            r.tuple = t;
            ck_assert_msg(seg_writer_commit(w, &r, &err) == 0, "%s", err.msg);
        } else {
            ck_assert_int_eq(seg_writer_append(w, &g.rec, &err), 0);
        }
        if (i % 50 == 49) ck_assert_int_eq(seg_writer_flush_block(w, &err), 0);
    }
    /* A commit with nothing reserved, after the room moved, or of another
     * length or place is refused and adds nothing. */
    gen_record(&g, 77, n, false);
    ck_assert_int_eq(seg_writer_commit(w, &g.rec, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "without its reserved room"));
    struct log_record r = {.table_id = 1, .kind = LOG_PUT, .key = "k", .key_len = 1,
                           .tuple_len = 8};
    unsigned char *t = seg_writer_reserve(w, 1, 8, &err);
    ck_assert_ptr_nonnull(t);
    r.tuple = t;
    r.tuple_len = 9;
    ck_assert_int_eq(seg_writer_commit(w, &r, &err), -1);
    r.tuple_len = 8;
    r.tuple = "elsewhere";
    ck_assert_int_eq(seg_writer_commit(w, &r, &err), -1);
    ck_assert_ptr_nonnull(t = seg_writer_reserve(w, 1, 8, &err));
    ck_assert_int_eq(seg_writer_flush_block(w, &err), 0);
    r.tuple = t;
    ck_assert_int_eq(seg_writer_commit(w, &r, &err), -1);
    ck_assert_ptr_nonnull(t = seg_writer_reserve(w, 1, 8, &err));
    ck_assert_int_eq(seg_writer_sync(w, &err), 0);
    r.tuple = t;
    ck_assert_int_eq(seg_writer_commit(w, &r, &err), -1);
    ck_assert_ptr_null(seg_writer_reserve(w, 1, SEG_MAX_TUPLE + 1, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "exceeds the log's limit"));
    ck_assert_uint_eq(seg_writer_pending_records(w), 0);
    char path[512];
    snprintf(path, sizeof path, "%s", seg_writer_path(w));
    ck_assert_int_eq(seg_writer_close(w, &err), 0);
    struct seg_tail_status tail;
    ck_assert_int_eq(read_segment(path, 77, 0, &tail, NULL, NULL), (long)n);
    ck_assert_int_eq(tail.kind, SEG_TAIL_CLEAN);
    free(g.tuple);
}
END_TEST

/* A PATCH comes back as written; a segment of format version 1 (which had
 * no patches) is still read, but a PATCH in it is damage. */
START_TEST(patch_round_trip_and_version_1)
{
    const char *dir = make_tmp();
    pod_err err = {{0}};
    struct seg_writer *w = seg_writer_open(dir, 1, 0, 7, 1, &err);
    ck_assert_ptr_nonnull(w);
    unsigned char patch[LOG_PATCH_HEADER + 3];
    log_patch_put_header(patch, log_ev_make(4, 2), 17);
    memcpy(patch + LOG_PATCH_HEADER, "xyz", 3);
    struct log_record r = {.table_id = 2, .kind = LOG_PATCH, .key = "kk", .key_len = 2,
                           .tuple = patch, .tuple_len = sizeof patch,
                           .epoch_version = log_ev_make(5, 0)};
    ck_assert_int_eq(seg_writer_append(w, &r, &err), 0);
    /* seg_patch_encode (the loggers' workers: no patch put together first)
     * writes the same bytes as seg_record_encode of the assembled patch. */
    unsigned char a[64], b[64];
    ck_assert_uint_le(seg_record_size(r.key_len, r.tuple_len), sizeof a);
    size_t na = seg_record_encode(a, &r);
    struct log_record rp = r;
    rp.tuple = NULL;
    size_t nb = seg_patch_encode(b, &rp, log_ev_make(4, 2), 17, "xyz");
    ck_assert_uint_eq(na, nb);
    ck_assert(memcmp(a, b, na) == 0);
    char path[512];
    snprintf(path, sizeof path, "%s", seg_writer_path(w));
    ck_assert_int_eq(seg_writer_close(w, &err), 0);
    struct seg_reader *rd = seg_reader_open(path, &err);
    ck_assert_msg(rd != NULL, "%s", err.msg);
    ck_assert_uint_eq(seg_reader_header(rd)->version, SEG_VERSION);
    struct log_record out;
    ck_assert_int_eq(seg_reader_next(rd, &out, &err), 1);
    ck_assert_uint_eq(out.kind, LOG_PATCH);
    struct log_patch pa = log_patch_parse(out.tuple, out.tuple_len);
    ck_assert_uint_eq(pa.base_ev, log_ev_make(4, 2));
    ck_assert_uint_eq(pa.offset, 17);
    ck_assert_uint_eq(pa.len, 3);
    ck_assert_mem_eq(pa.bytes, "xyz", 3);
    ck_assert_int_eq(seg_reader_next(rd, &out, &err), 0);
    ck_assert_int_eq(seg_reader_tail_status(rd)->kind, SEG_TAIL_CLEAN);
    seg_reader_close(rd);
    /* The same file claiming version 1. */
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    set_version(fd, 1);
    close(fd);
    rd = seg_reader_open(path, &err);
    ck_assert_msg(rd != NULL, "%s", err.msg);
    ck_assert_uint_eq(seg_reader_header(rd)->version, 1);
    ck_assert_int_eq(seg_reader_next(rd, &out, &err), 0);
    ck_assert_int_eq(seg_reader_tail_status(rd)->kind, SEG_TAIL_CORRUPT);
    ck_assert_ptr_nonnull(strstr(seg_reader_tail_status(rd)->reason, "invalid record kind"));
    seg_reader_close(rd);
}
END_TEST

/* Writing back while writing (a checkpoint's pacing) leaves the file whole. */
/* Pages of path in the page cache among its first `bytes` bytes (mincore);
 * -1 when the file system keeps files in memory (tmpfs: nothing to drop). */
static long cached_pages(const char *path, uint64_t bytes)
{
    struct statfs sf;
    ck_assert_int_eq(statfs(path, &sf), 0);
    if (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC) return -1;
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    size_t pages = (size_t)(bytes / 4096);
    long n = 0;
    if (pages) {
        void *m = mmap(NULL, pages * 4096, PROT_READ, MAP_SHARED, fd, 0);
        ck_assert_ptr_ne(m, MAP_FAILED);
        unsigned char *vec = malloc(pages);
        ck_assert_int_eq(mincore(m, pages * 4096, vec), 0);
        for (size_t i = 0; i < pages; i++) n += vec[i] & 1;
        free(vec);
        munmap(m, pages * 4096);
    }
    close(fd);
    return n;
}

/* Append record n: key n, a tuple of `size` bytes all equal to n's low byte. */
static void append_filled(struct seg_writer *w, long n, unsigned char *tuple, uint32_t size)
{
    pod_err err = {{0}};
    memset(tuple, (int)(n & 0xff), size);
    struct log_record r = {.table_id = 1, .kind = LOG_PUT, .key = &n, .key_len = sizeof n,
                           .tuple = tuple, .tuple_len = size,
                           .epoch_version = log_ev_make(2, (uint32_t)n)};
    ck_assert_msg(seg_writer_append(w, &r, &err) == 0, "%s", err.msg);
}

/* Marks (format version 4): read back in order with their fields, no
 * records and no epochs of their own; one cut short or damaged ends the
 * file there like a block; a version-3 file may not hold one; in a direct
 * writer's padded file they read the same. */
static uint64_t count_records(const char *path, struct seg_reader_stats *st,
                              struct seg_tail_status *tail)
{
    pod_err err = {{0}};
    struct seg_reader *rd = seg_reader_open(path, &err);
    ck_assert_msg(rd != NULL, "%s", err.msg);
    struct log_record out;
    uint64_t n = 0;
    int rc;
    while ((rc = seg_reader_next(rd, &out, &err)) == 1) n++;
    ck_assert_msg(rc == 0, "%s", err.msg);
    *st = *seg_reader_stats(rd);
    *tail = *seg_reader_tail_status(rd);
    seg_reader_close(rd);
    return n;
}

static void write_marked(struct seg_writer *w)
{
    pod_err err = {{0}};
    unsigned char tuple[100];
    append_filled(w, 1, tuple, sizeof tuple); /* epoch 2 */
    append_filled(w, 2, tuple, sizeof tuple);
    ck_assert_msg(seg_writer_write_mark(w, 3, 2, 1, &err) == 0, "%s", err.msg); /* flushes */
    append_filled(w, 3, tuple, sizeof tuple);
    ck_assert_msg(seg_writer_write_mark(w, 9, 2, 1, &err) == 0, "%s", err.msg);
}

START_TEST(marks_round_trip)
{
    const char *dir = make_tmp();
    pod_err err = {{0}};
    struct seg_writer *w = seg_writer_open(dir, 1, 1, 5, 2, &err);
    ck_assert_msg(w != NULL, "%s", err.msg);
    write_marked(w);
    uint64_t lo, hi;
    seg_writer_epochs(w, &lo, &hi);
    ck_assert_uint_eq(lo, 2);
    ck_assert_uint_eq(hi, 2);
    char path[512];
    snprintf(path, sizeof path, "%s", seg_writer_path(w));
    uint64_t size = seg_writer_size(w);
    ck_assert_msg(seg_writer_close(w, &err) == 0, "%s", err.msg);
    struct seg_reader_stats st;
    struct seg_tail_status tail;
    ck_assert_uint_eq(count_records(path, &st, &tail), 3);
    ck_assert_int_eq(tail.kind, SEG_TAIL_CLEAN);
    ck_assert_uint_eq(st.blocks, 2);
    ck_assert_uint_eq(st.marks, 2);
    ck_assert_uint_eq(st.mark_through, 9);
    ck_assert_uint_eq(st.mark_nloggers, 2);
    ck_assert_uint_eq(st.mark_logger, 1);
    ck_assert_uint_eq(st.epoch_lo, 2);
    ck_assert_uint_eq(st.epoch_hi, 2);
    ck_assert_uint_eq(st.good_bytes, size);
    ck_assert_int_eq(seg_peek_epochs(path, &lo, &hi, &err), 0);
    ck_assert_uint_eq(lo, 2);
    ck_assert_uint_eq(hi, 2);
    /* The last mark cut short: torn there, the first mark stands. */
    ck_assert_int_eq(truncate(path, (off_t)(size - 1)), 0);
    ck_assert_uint_eq(count_records(path, &st, &tail), 3);
    ck_assert_int_eq(tail.kind, SEG_TAIL_TORN);
    ck_assert_uint_eq(st.marks, 1);
    ck_assert_uint_eq(st.mark_through, 3);
    /* Its `through` damaged (the CRC no longer matches): corrupt. */
    ck_assert_int_eq(truncate(path, (off_t)size), 0);
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    unsigned char b = 0x7f;
    ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)(size - SEG_BLOCK_HEADER_SIZE + 8)), 1);
    ck_assert_uint_eq(count_records(path, &st, &tail), 3);
    ck_assert_int_eq(tail.kind, SEG_TAIL_CORRUPT);
    ck_assert_ptr_nonnull(strstr(tail.reason, "damaged mark"));
    ck_assert_uint_eq(st.marks, 1);
    /* A version-3 file cannot hold a mark: its first one ends the file. */
    set_version(fd, 3);
    close(fd);
    ck_assert_uint_eq(count_records(path, &st, &tail), 2);
    ck_assert_int_eq(tail.kind, SEG_TAIL_CORRUPT);
    ck_assert_uint_eq(st.marks, 0);
    /* Through a direct writer: the same, before and after its padding is cut. */
    w = seg_writer_open(dir, 1, 1, 6, 2, &err);
    ck_assert_msg(w != NULL, "%s", err.msg);
    ck_assert_msg(seg_writer_go_direct(w, 0, &err) == 0, "%s", err.msg);
    write_marked(w);
    ck_assert_msg(seg_writer_sync(w, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s", seg_writer_path(w));
    ck_assert_uint_eq(count_records(path, &st, &tail), 3);
    ck_assert_int_eq(tail.kind, SEG_TAIL_CLEAN);
    ck_assert_uint_eq(st.marks, 2);
    ck_assert_uint_eq(st.mark_through, 9);
    ck_assert_msg(seg_writer_close(w, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(count_records(path, &st, &tail), 3);
    ck_assert_uint_eq(st.marks, 2);
}
END_TEST

START_TEST(synced_pages_leave_the_page_cache)
{
    const char *dir = make_tmp();
    pod_err err = {{0}};
    struct seg_writer *w = seg_writer_open(dir, 1, 0, 11, 1, &err);
    ck_assert_ptr_nonnull(w);
    static unsigned char tuple[3000];
    for (long n = 0; n < 2000; n++) {
        append_filled(w, n, tuple, sizeof tuple);
        if (n % 100 == 99) ck_assert_int_eq(seg_writer_flush_block(w, &err), 0);
    }
    ck_assert_int_eq(seg_writer_flush_block(w, &err), 0);
    uint64_t written = seg_writer_size(w);
    long before = cached_pages(seg_writer_path(w), written);
    ck_assert_msg(seg_writer_sync(w, &err) == 0, "%s", err.msg);
    long after = cached_pages(seg_writer_path(w), written);
    if (before < 0) {
        printf("synced_pages_leave_the_page_cache: %s is on tmpfs, the page cache is the file; "
               "residency not checked\n", dir);
    } else {
        /* 6 MB written: cached until synced, then gone but for the partial last page. */
        ck_assert_msg(before > 1000, "%ld pages cached before the sync", before);
        ck_assert_msg(after == 0, "%ld of %" PRIu64 " pages still cached after the sync", after,
                      written / 4096);
    }
    ck_assert_int_eq(seg_writer_close(w, &err), 0);
}
END_TEST

START_TEST(paced_writeback)
{
    const char *dir = make_tmp();
    pod_err err = {{0}};
    struct seg_writer *w = seg_writer_open(dir, 1, 0, 9, 1, &err);
    ck_assert_ptr_nonnull(w);
    static unsigned char tuple[4000];
    long n = 0;
    for (int b = 0; b < 40; b++) {
        for (int i = 0; i < 64; i++, n++) append_filled(w, n, tuple, sizeof tuple);
        ck_assert_int_eq(seg_writer_flush_block(w, &err), 0);
        ck_assert_msg(seg_writer_pace(w, 1u << 20, &err) == 0, "%s", err.msg);
    }
    char path[512];
    snprintf(path, sizeof path, "%s", seg_writer_path(w));
    /* ~10 MB written in 1 MiB paces: all but the last two chunks were
     * written back, waited for and dropped. */
    long cached = cached_pages(path, seg_writer_size(w) - (3u << 20));
    if (cached < 0) printf("paced_writeback: on tmpfs, residency not checked\n");
    ck_assert_msg(cached <= 0, "%ld pages of paced chunks still cached", cached);
    ck_assert_int_eq(seg_writer_close(w, &err), 0);
    struct seg_reader *rd = seg_reader_open(path, &err);
    ck_assert_msg(rd != NULL, "%s", err.msg);
    struct log_record out;
    long got = 0;
    while (seg_reader_next(rd, &out, &err) == 1) {
        long k;
        memcpy(&k, out.key, sizeof k);
        ck_assert_int_eq(k, got);
        ck_assert_uint_eq(((const unsigned char *)out.tuple)[3999], (unsigned)(got & 0xff));
        got++;
    }
    ck_assert_int_eq(got, n);
    ck_assert_int_eq(seg_reader_tail_status(rd)->kind, SEG_TAIL_CLEAN);
    seg_reader_close(rd);
}
END_TEST

/* Direct mode: every record written comes back, a sync leaves the file padded
 * to its page end (what a killed logger leaves: read as a clean end), a run
 * of over 4 MiB between syncs is written in pages as it goes, and close cuts
 * the padding off. */
/* The segment at path as a SIGKILL would leave it (copied to copy) holds the
 * first n records of seed and ends cleanly at end. */
static void assert_killed_copy_reads(const char *path, const char *copy, uint64_t seed, uint64_t n,
                                     uint64_t end)
{
    size_t len;
    unsigned char *b = read_all(path, &len);
    write_all(copy, b, len);
    free(b);
    struct seg_tail_status tail;
    ck_assert_int_eq(read_segment(copy, seed, 0, &tail, NULL, NULL), (long)n);
    ck_assert_msg(tail.kind == SEG_TAIL_CLEAN, "%s", tail.reason);
    ck_assert_uint_eq(tail.offset, end);
}

START_TEST(direct_writes_round_trip)
{
    const char *dir = make_tmp();
    const uint64_t seed = 11, N = 6000;
    pod_err err = {{0}};
    struct gen g = {0};
    struct seg_writer *w = seg_writer_open(dir, 3, 0, 1, 1, &err);
    ck_assert_msg(w != NULL, "%s", err.msg);
    ck_assert_msg(seg_writer_go_direct(w, 0, &err) == 0, "%s", err.msg);
    if (!seg_writer_is_direct(w)) {
        printf("direct_writes_round_trip: %s refuses O_DIRECT; not checked\n", dir);
        ck_assert_int_eq(seg_writer_close(w, &err), 0);
        return;
    }
    char path[512], copy[600];
    snprintf(path, sizeof path, "%s", seg_writer_path(w));
    snprintf(copy, sizeof copy, "%s/killed.log", dir);
    rng_state = 3;
    uint64_t synced_recs = 0, copies = 0, flushed_recs = 0, pending_syncs = 0;
    for (uint64_t i = 0; i < N; i++) {
        gen_record(&g, seed, i, true); /* one in 20 is a 64 KiB tuple */
        ck_assert_msg(seg_writer_append(w, &g.rec, &err) == 0, "%s", err.msg);
        if (rnd() % 20) {
            /* Now and then a sync while a block is being built (in the
             * stage, right after the file's bytes): the padding of the last
             * page must not clobber it, and the file holds what was flushed. */
            if (i >= 3600 && rnd() % 150 == 0) {
                ck_assert_msg(seg_writer_sync(w, &err) == 0, "%s", err.msg);
                assert_killed_copy_reads(path, copy, seed, flushed_recs, seg_writer_size(w));
                pending_syncs++;
            }
            continue;
        }
        ck_assert_msg(seg_writer_flush_block(w, &err) == 0, "%s", err.msg);
        flushed_recs = i + 1;
        if ((i < 2000 || i >= 3600) && rnd() % 3 == 0) { /* not between: > 4 MiB unsynced */
            ck_assert_msg(seg_writer_sync(w, &err) == 0, "%s", err.msg);
            synced_recs = i + 1;
            struct stat sb;
            ck_assert_int_eq(stat(path, &sb), 0);
            ck_assert_msg(sb.st_size % 4096 == 0 && (uint64_t)sb.st_size >= seg_writer_size(w) &&
                              (uint64_t)sb.st_size < seg_writer_size(w) + 4096,
                          "file of %lld bytes after a sync at %" PRIu64, (long long)sb.st_size,
                          seg_writer_size(w));
            if (rnd() % 8 == 0 || copies == 0) {
                assert_killed_copy_reads(path, copy, seed, synced_recs, seg_writer_size(w));
                copies++;
            }
        }
    }
    ck_assert_int_eq(seg_writer_flush_block(w, &err), 0);
    uint64_t logical = seg_writer_size(w);
    ck_assert_msg(seg_writer_close(w, &err) == 0, "%s", err.msg);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_uint_eq((uint64_t)sb.st_size, logical);
    struct seg_tail_status tail;
    struct seg_reader_stats st;
    ck_assert_int_eq(read_segment(path, seed, 0, &tail, &st, NULL), (long)N);
    ck_assert_int_eq(tail.kind, SEG_TAIL_CLEAN);
    ck_assert_uint_eq(st.good_bytes, st.file_size);
    ck_assert_uint_gt(pending_syncs, 0);
    printf("direct round trip: %" PRIu64 " records, %" PRIu64 " bytes, %" PRIu64
           " killed-file copies read back, %" PRIu64 " syncs while a block was built\n", N,
           logical, copies, pending_syncs);
    free(g.tuple);
}
END_TEST

/* On tmpfs: kernels before 6.6 refuse O_DIRECT there, and the writer stays a
 * buffered one (no padding); newer ones take it. Either way every record
 * comes back and the end is clean. */
/* A file system that takes O_DIRECT at fcntl but refuses the write: while
 * refuse_direct is set, pwrite (the segment writer's, resolved to this
 * definition in the test program) fails with EINVAL on a descriptor that
 * has O_DIRECT. Each test runs in a process of its own (Check forks). */
static int refuse_direct;

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    if (refuse_direct) {
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0 && (fl & O_DIRECT)) {
            errno = EINVAL;
            return -1;
        }
    }
    return syscall(SYS_pwrite64, fd, buf, n, off);
}

/* The segment at path holds n records and ends cleanly. */
static void assert_reads_clean(const char *path, long n)
{
    pod_err err = {{0}};
    struct seg_reader *rd = seg_reader_open(path, &err);
    ck_assert_msg(rd != NULL, "%s", err.msg);
    struct log_record out;
    long got = 0;
    while (seg_reader_next(rd, &out, &err) == 1) got++;
    ck_assert_int_eq(got, n);
    ck_assert_int_eq(seg_reader_tail_status(rd)->kind, SEG_TAIL_CLEAN);
    seg_reader_close(rd);
}

START_TEST(direct_write_refused)
{
    const char *dir = make_tmp();
    pod_err err = {{0}};
    struct seg_writer *w = seg_writer_open(dir, 1, 0, 1, 1, &err);
    ck_assert_msg(w != NULL, "%s", err.msg);
    ck_assert_msg(seg_writer_go_direct(w, 0, &err) == 0, "%s", err.msg);
    if (!seg_writer_is_direct(w)) {
        printf("direct_write_refused: %s refuses O_DIRECT at fcntl; not checked\n", dir);
        ck_assert_int_eq(seg_writer_close(w, &err), 0);
        return;
    }
    refuse_direct = 1;
    static unsigned char tuple[700];
    long n = 0;
    for (int round = 0; round < 3; round++) { /* the first sync falls back, the rest follow */
        for (int i = 0; i < 50; i++, n++) append_filled(w, n, tuple, sizeof tuple);
        ck_assert_msg(seg_writer_flush_block(w, &err) == 0, "%s", err.msg);
        ck_assert_msg(seg_writer_sync(w, &err) == 0, "sync %d: %s", round, err.msg);
        ck_assert_msg(!seg_writer_is_direct(w), "still direct after a refused write");
    }
    char path[512];
    snprintf(path, sizeof path, "%s", seg_writer_path(w));
    uint64_t size = seg_writer_size(w);
    ck_assert_int_eq(seg_writer_close(w, &err), 0);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_uint_eq((uint64_t)sb.st_size, size); /* the padding cut at close */
    assert_reads_clean(path, n);
}
END_TEST

/* A logger's writer (src/log/logger.c): pages written only at a sync below
 * its early-write threshold, the segment's blocks reserved ahead without
 * changing its size, and what is left of them given back at close. */
START_TEST(preallocated_direct_segment)
{
    const char *dir = make_tmp();
    pod_err err = {{0}};
    struct seg_writer *w = seg_writer_open(dir, 2, 0, 1, 1, &err);
    ck_assert_msg(w != NULL, "%s", err.msg);
    ck_assert_msg(seg_writer_go_direct(w, 2u << 20, &err) == 0, "%s", err.msg);
    if (!seg_writer_is_direct(w)) {
        printf("preallocated_direct_segment: %s refuses O_DIRECT; not checked\n", dir);
        ck_assert_int_eq(seg_writer_close(w, &err), 0);
        return;
    }
    const uint64_t reserve = 8u << 20;
    seg_writer_preallocate(w, reserve);
    char path[512];
    snprintf(path, sizeof path, "%s", seg_writer_path(w));
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    bool reserved = (uint64_t)sb.st_blocks * 512 >= reserve;
    if (!reserved) printf("preallocated_direct_segment: %s does not fallocate; reservation not checked\n", dir);
    ck_assert_uint_eq((uint64_t)sb.st_size, SEG_HEADER_SIZE); /* the size is not the reservation */
    static unsigned char tuple[900];
    long n = 0;
    for (int round = 0; round < 3; round++) {
        /* ~600 KB of blocks: more than a checkpoint writer's 256 KiB, less
         * than this writer's 2 MiB: nothing written before the sync. */
        for (int i = 0; i < 640; i++, n++) {
            append_filled(w, n, tuple, sizeof tuple);
            if (i % 100 == 99) ck_assert_msg(seg_writer_flush_block(w, &err) == 0, "%s", err.msg);
        }
        ck_assert_msg(seg_writer_flush_block(w, &err) == 0, "%s", err.msg);
        uint64_t before = (uint64_t)(stat(path, &sb) == 0 ? sb.st_size : 0);
        ck_assert_uint_le(before, seg_writer_synced_size(w) + 4096);
        ck_assert_msg(seg_writer_sync(w, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(stat(path, &sb), 0);
        ck_assert_uint_eq((uint64_t)sb.st_size, (seg_writer_size(w) + 4095) & ~(uint64_t)4095);
    }
    uint64_t size = seg_writer_size(w);
    ck_assert_int_eq(seg_writer_close(w, &err), 0);
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_uint_eq((uint64_t)sb.st_size, size);
    if (reserved) ck_assert_uint_lt((uint64_t)sb.st_blocks * 512, size + (1u << 20));
    assert_reads_clean(path, n);
}
END_TEST

START_TEST(direct_on_tmpfs)
{
    char dir[128];
    snprintf(dir, sizeof dir, "/dev/shm/poddb-test-%s-dio-XXXXXX",
             getenv("PODDB_TEST_TAG") ? getenv("PODDB_TEST_TAG") : "x");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    pod_err err = {{0}};
    struct seg_writer *w = seg_writer_open(dir, 1, 0, 1, 1, &err);
    ck_assert_msg(w != NULL, "%s", err.msg);
    ck_assert_msg(seg_writer_go_direct(w, 0, &err) == 0, "%s", err.msg);
    bool direct = seg_writer_is_direct(w);
    static unsigned char tuple[500];
    for (long n = 0; n < 100; n++) append_filled(w, n, tuple, sizeof tuple);
    ck_assert_int_eq(seg_writer_flush_block(w, &err), 0);
    ck_assert_int_eq(seg_writer_sync(w, &err), 0);
    char path[512];
    snprintf(path, sizeof path, "%s", seg_writer_path(w));
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    if (!direct) ck_assert_uint_eq((uint64_t)sb.st_size, seg_writer_size(w)); /* no padding */
    ck_assert_int_eq(seg_writer_close(w, &err), 0);
    struct seg_reader *rd = seg_reader_open(path, &err);
    ck_assert_msg(rd != NULL, "%s", err.msg);
    struct log_record out;
    long got = 0;
    while (seg_reader_next(rd, &out, &err) == 1) got++;
    ck_assert_int_eq(got, 100);
    ck_assert_int_eq(seg_reader_tail_status(rd)->kind, SEG_TAIL_CLEAN);
    seg_reader_close(rd);
    unlink(path);
    rmdir(dir);
    if (direct) printf("direct_on_tmpfs: /dev/shm took O_DIRECT here\n");
}
END_TEST

START_TEST(writer_open_errors)
{
    const char *dir = make_tmp();
    pod_err err = {{0}};
    char missing[512];
    snprintf(missing, sizeof missing, "%s/no/such/dir", dir);
    ck_assert_ptr_null(seg_writer_open(missing, 1, 0, 1, 1, &err));
    ck_assert_msg(strstr(err.msg, "cannot create log segment") && strstr(err.msg, "no/such/dir") &&
                      strstr(err.msg, "No such file or directory"),
                  "%s", err.msg);
    struct seg_writer *w = seg_writer_open(dir, 1, 0, 1, 1, &err);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(seg_writer_close(w, &err), 0);
    ck_assert_ptr_null(seg_writer_open(dir, 1, 0, 1, 1, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "exists already"));
    if (geteuid() != 0) { /* root ignores permissions */
        char ro[512];
        snprintf(ro, sizeof ro, "%s/ro", dir);
        ck_assert_int_eq(mkdir(ro, 0555), 0);
        ck_assert_ptr_null(seg_writer_open(ro, 1, 0, 1, 1, &err));
        ck_assert_ptr_nonnull(strstr(err.msg, "Permission denied"));
    }
}
END_TEST

/* A file-size limit in the middle of a block: pwrite writes part of it (a short
 * write), then fails with EFBIG. The error is reported, the partial block is
 * taken off the file, and a retry after the limit is lifted succeeds. */
START_TEST(writer_write_error_and_retry)
{
    const char *dir = make_tmp();
    pod_err err = {{0}};
    signal(SIGXFSZ, SIG_IGN);
    struct seg_writer *w = seg_writer_open(dir, 1, 0, 1, 1, &err);
    ck_assert_ptr_nonnull(w);
    static unsigned char big[8192];
    memset(big, 0xab, sizeof big);
    struct log_record r = {.table_id = 1, .kind = LOG_PUT, .key = "a", .key_len = 1,
                           .tuple = big, .tuple_len = 1000, .epoch_version = log_ev_make(1, 0)};
    ck_assert_int_eq(seg_writer_append(w, &r, &err), 0);
    ck_assert_int_eq(seg_writer_flush_block(w, &err), 0);
    uint64_t good = seg_writer_size(w);
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 4096;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    r.key = "b";
    r.tuple_len = sizeof big;
    ck_assert_int_eq(seg_writer_append(w, &r, &err), 0);
    ck_assert_int_eq(seg_writer_flush_block(w, &err), -1);
    ck_assert_msg(strstr(err.msg, "cannot write a block") && strstr(err.msg, "File too large") &&
                      strstr(err.msg, "bytes written"),
                  "%s", err.msg);
    ck_assert_uint_eq(seg_writer_size(w), good);
    ck_assert_uint_eq(seg_writer_pending_records(w), 1);
    struct stat sb;
    ck_assert_int_eq(stat(seg_writer_path(w), &sb), 0);
    ck_assert_uint_eq((uint64_t)sb.st_size, good); /* the partial block was removed */
    ck_assert_int_eq(seg_writer_flush_block(w, &err), -1); /* still failing */
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    ck_assert_msg(seg_writer_flush_block(w, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(seg_writer_sync(w, &err), 0);
    char path[512];
    snprintf(path, sizeof path, "%s", seg_writer_path(w));
    ck_assert_int_eq(seg_writer_close(w, &err), 0);
    struct seg_reader *rd = seg_reader_open(path, &err);
    ck_assert_ptr_nonnull(rd);
    struct log_record out;
    ck_assert_int_eq(seg_reader_next(rd, &out, &err), 1);
    ck_assert_uint_eq(out.tuple_len, 1000);
    ck_assert_int_eq(seg_reader_next(rd, &out, &err), 1);
    ck_assert_uint_eq(out.tuple_len, sizeof big);
    ck_assert_int_eq(memcmp(out.key, "b", 1), 0);
    ck_assert_int_eq(seg_reader_next(rd, &out, &err), 0);
    ck_assert_int_eq(seg_reader_tail_status(rd)->kind, SEG_TAIL_CLEAN);
    seg_reader_close(rd);
}
END_TEST

/* The header of a new segment fails to fit: no half-written segment is left. */
START_TEST(writer_open_write_error_leaves_nothing)
{
    const char *dir = make_tmp();
    pod_err err = {{0}};
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &lim), 0);
    lim.rlim_cur = 10;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    ck_assert_ptr_null(seg_writer_open(dir, 1, 0, 5, 1, &err));
    ck_assert_msg(strstr(err.msg, "cannot write the header") && strstr(err.msg, "File too large"),
                  "%s", err.msg);
    char path[512];
    seg_path(path, sizeof path, dir, 1, 0, 5);
    ck_assert_int_eq(access(path, F_OK), -1);
}
END_TEST

/* ---- sample for tests/integration/logdump.sh ----------------------------------------------- */

static void sample_segment(const char *dir, uint32_t host, uint32_t logger, uint64_t seq, int blocks,
                           uint64_t seed)
{
    pod_err err = {{0}};
    struct seg_writer *w = seg_writer_open(dir, host, logger, seq, 1, &err);
    if (!w) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    struct gen g = {0};
    uint64_t i = 0;
    for (int b = 0; b < blocks; b++) {
        for (int k = 0; k < 5; k++) {
            gen_record(&g, seed, i++, false);
            if (seg_writer_append(w, &g.rec, &err) != 0) goto fail;
        }
        if (seg_writer_flush_block(w, &err) != 0) goto fail;
    }
    /* one readable record */
    struct log_record r = {.table_id = 9, .kind = LOG_PUT, .key = "user:42", .key_len = 7,
                           .tuple = "hello", .tuple_len = 5, .epoch_version = log_ev_make(99, 3)};
    if (seg_writer_append(w, &r, &err) != 0 || seg_writer_close(w, &err) != 0) goto fail;
    free(g.tuple);
    return;
fail:
    fprintf(stderr, "%s\n", err.msg);
    exit(1);
}

static void mutate(const char *dir, uint32_t host, uint32_t logger, uint64_t seq, long off,
                   int flip, long truncate_by)
{
    char path[600];
    seg_path(path, sizeof path, dir, host, logger, seq);
    int fd = open(path, O_RDWR);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) exit(1);
    if (flip) {
        unsigned char c;
        if (pread(fd, &c, 1, off) != 1) exit(1);
        c ^= 0x04;
        if (pwrite(fd, &c, 1, off) != 1) exit(1);
    }
    if (truncate_by && ftruncate(fd, sb.st_size - truncate_by) != 0) exit(1);
    close(fd);
}

static int write_sample(const char *root)
{
    char ok[600], bad[600], bh[600];
    snprintf(ok, sizeof ok, "%s/ok", root);
    snprintf(bad, sizeof bad, "%s/corrupt", root);
    snprintf(bh, sizeof bh, "%s/badheader", root);
    if ((mkdir(root, 0755) && errno != EEXIST) || mkdir(ok, 0755) || mkdir(bad, 0755) || mkdir(bh, 0755)) {
        fprintf(stderr, "cannot create sample directories under %s: %s\n", root, strerror(errno));
        return 1;
    }
    /* ok: two clean segments of host 1 and a torn one; a clean one of host 2. */
    sample_segment(ok, 1, 0, 1, 2, 1);
    sample_segment(ok, 1, 0, 2, 3, 2);
    sample_segment(ok, 1, 0, 3, 2, 3);
    mutate(ok, 1, 0, 3, 0, 0, 7); /* cut into the last block */
    sample_segment(ok, 2, 1, 1, 1, 4);
    /* corrupt: a flipped bit in the second block's payload; a stray file. */
    sample_segment(bad, 1, 0, 1, 3, 5);
    char p[700];
    seg_path(p, sizeof p, bad, 1, 0, 1);
    struct stat sb;
    stat(p, &sb);
    mutate(bad, 1, 0, 1, (long)sb.st_size - 60, 1, 0); /* inside the last block's payload */
    snprintf(p, sizeof p, "%s/notes.txt", bad);
    FILE *f = fopen(p, "w");
    if (f) fputs("not a segment\n", f), fclose(f);
    /* badheader: a damaged header CRC. */
    sample_segment(bh, 3, 0, 1, 1, 6);
    mutate(bh, 3, 0, 1, 20, 1, 0);
    printf("sample logs written under %s\n", root);
    return 0;
}

int main(void)
{
    const char *sample = getenv("PODDB_LOGDUMP_SAMPLE");
    if (sample && *sample) return write_sample(sample);
    Suite *s = suite_create("log_segment");
    TCase *t = tu_tcase(s, "log_segment", 300);
    tcase_add_test(t, crc32c_vectors);
    tcase_add_test(t, crc32c_hw_equals_sw);
    tcase_add_test(t, segment_names);
    tcase_add_test(t, round_trip_many_blocks_and_segments);
    tcase_add_test(t, empty_segment_and_noop_flush);
    tcase_add_test(t, truncation_at_every_offset);
    tcase_add_test(t, bit_flip_at_every_offset);
    tcase_add_test(t, corrupt_middle_block_keeps_earlier_records);
    tcase_add_test(t, bad_record_in_valid_block);
    tcase_add_test(t, garbage_after_last_block);
    tcase_add_test(t, bad_headers);
    tcase_add_test(t, invalid_records_refused);
    tcase_add_loop_test(t, reserved_records_round_trip, 0, 2);
    tcase_add_test(t, patch_round_trip_and_version_1);
    tcase_add_test(t, marks_round_trip);
    tcase_add_test(t, synced_pages_leave_the_page_cache);
    tcase_add_test(t, paced_writeback);
    tcase_add_test(t, direct_writes_round_trip);
    tcase_add_test(t, direct_on_tmpfs);
    tcase_add_test(t, preallocated_direct_segment);
    tcase_add_test(t, direct_write_refused);
    tcase_add_test(t, writer_open_errors);
    tcase_add_test(t, writer_write_error_and_retry);
    tcase_add_test(t, writer_open_write_error_leaves_nothing);
    return tu_run(s);
}
