/* poddb-logdump: list and check a log directory: segments, checkpoints and
 * the durable-epoch record (docs/log-format.md). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log/durable_file.h"
#include "log/segment.h"
#include "util/json.h"

static const char usage[] =
    "usage: poddb-logdump [--json] [--records] [--verify] DIR|FILE...\n"
    "\n"
    "Lists log segments: host, logger, sequence number, size, blocks, records,\n"
    "epoch range, the loggers' durable marks (how many, the last one's epoch)\n"
    "and how the segment ends (tail clean, torn or corrupt). A DIR is a log\n"
    "directory: its durable-epoch record comes first (every epoch below it is\n"
    "committed, as is every epoch below all of the loggers' last marks),\n"
    "then its files named seg-<host>-<logger>-<seq>.log in (host, logger, seq)\n"
    "order, then its checkpoints ckpt-<host>-<seq>.log (.tmp while\n"
    "unfinished); other files are ignored. A FILE is read whatever its name (a\n"
    "file named durable-epoch as the record).\n"
    "\n"
    "A torn tail (an incomplete last block, as a crash leaves it) is normal; a\n"
    "corrupt tail (a complete block whose checksum or contents are wrong, or\n"
    "garbage) is not. Either way the records before it are intact.\n"
    "\n"
    "Options:\n"
    "  -r, --records   also print every record (table, kind, key, epoch.version,\n"
    "                  tuple length)\n"
    "  -v, --verify    exit 1 if a segment has a corrupt tail or a bad header, or\n"
    "                  the durable-epoch record is damaged\n"
    "  -j, --json      one JSON line per segment (and per record with --records)\n"
    "  -h, --help      this text\n"
    "\n"
    "Exit status: 0 ok; 1 an input could not be read, or --verify found damage;\n"
    "2 usage error.\n";

struct opts {
    bool json, records, verify;
};

static int g_rc; /* exit status so far */
static bool g_damage;

/* A line of --json output: an object that starts with "type" and "path". */
static void json_line_begin(struct json_writer *w, const char *type, const char *path)
{
    json_init(w, stdout);
    json_obj_begin(w);
    json_kv_str(w, "type", type);
    json_kv_str(w, "path", path);
}

static void json_line_end(struct json_writer *w)
{
    json_obj_end(w);
    fputc('\n', stdout);
}

/* key: v when has, else key: null. */
static void json_kv_u64_if(struct json_writer *w, const char *key, bool has, uint64_t v)
{
    json_key(w, key);
    if (has) json_u64(w, v);
    else json_null(w);
}

static bool printable(const unsigned char *k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (k[i] < 0x20 || k[i] > 0x7e || k[i] == '"' || k[i] == '\\') return false;
    return true;
}

static void hex(char *out, const unsigned char *k, size_t n)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[k[i] >> 4];
        out[2 * i + 1] = d[k[i] & 15];
    }
    out[2 * n] = 0;
}

static const char *kind_name(uint8_t k)
{
    return k == LOG_PUT ? "PUT" : k == LOG_DELETE ? "DELETE" : k == LOG_PATCH ? "PATCH" : "?";
}

static void print_record(const struct opts *o, const char *path, uint64_t idx,
                         const struct log_record *r)
{
    const unsigned char *k = r->key;
    char *h = malloc(2 * (size_t)r->key_len + 1);
    if (!h) {
        fprintf(stderr, "poddb-logdump: out of memory\n");
        exit(1);
    }
    hex(h, k, r->key_len);
    bool pr = r->key_len > 0 && printable(k, r->key_len);
    if (o->json) {
        struct json_writer w;
        json_line_begin(&w, "record", path);
        json_kv_u64(&w, "index", idx);
        json_kv_u64(&w, "table", r->table_id);
        json_kv_str(&w, "kind", kind_name(r->kind));
        json_kv_str(&w, "key_hex", h);
        if (pr) {
            char *s = strndup((const char *)k, r->key_len);
            json_kv_str(&w, "key", s);
            free(s);
        }
        json_kv_u64(&w, "key_len", r->key_len);
        json_kv_u64(&w, "epoch", log_ev_epoch(r->epoch_version));
        json_kv_u64(&w, "version", log_ev_version(r->epoch_version));
        json_kv_u64(&w, "tuple_len", r->tuple_len);
        if (r->kind == LOG_PATCH) {
            struct log_patch pa = log_patch_parse(r->tuple, r->tuple_len);
            json_kv_u64(&w, "base_epoch", log_ev_epoch(pa.base_ev));
            json_kv_u64(&w, "base_version", log_ev_version(pa.base_ev));
            json_kv_u64(&w, "patch_offset", pa.offset);
            json_kv_u64(&w, "patch_len", pa.len);
        }
        json_line_end(&w);
    } else {
        printf("  #%-6" PRIu64 " table %-4" PRIu32 " %-6s key ", idx, r->table_id,
               kind_name(r->kind));
        if (pr) printf("\"%.*s\"", (int)r->key_len, (const char *)k);
        else if (r->key_len == 0) printf("(empty)");
        else if (r->key_len <= 32) printf("0x%s", h);
        else printf("0x%.64s... (%u bytes)", h, r->key_len);
        printf("  ev %" PRIu32 ".%" PRIu32, log_ev_epoch(r->epoch_version),
               log_ev_version(r->epoch_version));
        if (r->kind == LOG_PATCH) {
            struct log_patch pa = log_patch_parse(r->tuple, r->tuple_len);
            printf("  from ev %" PRIu32 ".%" PRIu32 ": %" PRIu32 " bytes at offset %" PRIu32 "\n",
                   log_ev_epoch(pa.base_ev), log_ev_version(pa.base_ev), pa.len, pa.offset);
        } else {
            printf("  tuple %" PRIu32 " bytes\n", r->tuple_len);
        }
    }
    free(h);
}

static void print_bad_header(const struct opts *o, const char *path, const char *msg)
{
    if (o->json) {
        struct json_writer w;
        json_line_begin(&w, "segment", path);
        json_kv_bool(&w, "bad_header", true);
        json_kv_str(&w, "error", msg);
        json_line_end(&w);
    } else {
        printf("%s  BAD HEADER: %s\n", path, msg);
    }
}

static void print_segment(const struct opts *o, const char *path, const struct seg_reader *r)
{
    const struct seg_header *h = seg_reader_header(r);
    const struct seg_reader_stats *st = seg_reader_stats(r);
    const struct seg_tail_status *t = seg_reader_tail_status(r);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    uint32_t nh, nl;
    uint64_t ns;
    bool tmp, ckpt = h->logger == SEG_LOGGER_CHECKPOINT;
    bool mismatch = (seg_parse_name(base, &nh, &nl, &ns) &&
                     (nh != h->host || nl != h->logger || ns != h->seq)) ||
                    (seg_parse_ckpt_name(base, &nh, &ns, &tmp) &&
                     (nh != h->host || !ckpt || ns != h->seq));
    if (o->json) {
        struct json_writer w;
        json_line_begin(&w, "segment", path);
        json_kv_u64(&w, "host", h->host);
        json_kv_bool(&w, "checkpoint", ckpt);
        json_kv_bool(&w, "delta", (h->ckpt_flags & SEG_CKPT_DELTA) != 0);
        json_kv_u64(&w, "since_epoch", h->since_epoch);
        json_kv_u64(&w, "logger", h->logger);
        json_kv_u64(&w, "seq", h->seq);
        json_kv_u64(&w, "version", h->version);
        json_kv_u64(&w, "first_epoch", h->first_epoch);
        json_kv_u64(&w, "create_time_ns", h->create_time_ns);
        json_kv_u64(&w, "size", st->file_size);
        json_kv_u64(&w, "good_bytes", st->good_bytes);
        json_kv_u64(&w, "blocks", st->blocks);
        json_kv_u64(&w, "records", st->records);
        json_kv_u64_if(&w, "epoch_lo", st->blocks, st->epoch_lo);
        json_kv_u64_if(&w, "epoch_hi", st->blocks, st->epoch_hi);
        json_kv_u64(&w, "marks", st->marks);
        json_kv_u64_if(&w, "last_mark", st->marks, st->mark_through);
        json_kv_str(&w, "tail", seg_tail_name(t->kind));
        json_kv_u64(&w, "tail_offset", t->offset);
        json_kv_str(&w, "tail_reason", t->reason);
        json_kv_bool(&w, "name_mismatch", mismatch);
        json_line_end(&w);
        return;
    }
    if (ckpt) {
        printf("%s  host %" PRIu32 "  CHECKPOINT", path, h->host);
        if (h->ckpt_flags & SEG_CKPT_DELTA) printf(" delta since %" PRIu64, h->since_epoch);
        printf("  seq %" PRIu64 "  start epoch %" PRIu64 "  size %" PRIu64 "  blocks %" PRIu64
               "  records %" PRIu64, h->seq, h->first_epoch, st->file_size, st->blocks,
               st->records);
    } else
        printf("%s  host %" PRIu32 "  logger %" PRIu32 "  seq %" PRIu64 "  size %" PRIu64
               "  blocks %" PRIu64 "  records %" PRIu64, path, h->host, h->logger, h->seq,
               st->file_size, st->blocks, st->records);
    if (st->blocks) printf("  epochs %" PRIu64 "..%" PRIu64, st->epoch_lo, st->epoch_hi);
    else printf("  epochs -");
    if (st->marks) printf("  marks %" PRIu64 " (last: below %" PRIu64 ")", st->marks, st->mark_through);
    printf("  tail %s", seg_tail_name(t->kind));
    if (t->kind != SEG_TAIL_CLEAN)
        printf(" at offset %" PRIu64 " (%" PRIu64 " bytes ignored): %s", t->offset,
               st->file_size - t->offset, t->reason);
    if (mismatch)
        printf("  [name does not match header: host %" PRIu32 " logger %" PRIu32 " seq %" PRIu64 "]",
               h->host, h->logger, h->seq);
    putchar('\n');
}

/* Read a segment to its end; with records, print each. 0, or -1 on an I/O error. */
static int scan(const struct opts *o, const char *path, struct seg_reader *r, bool records)
{
    struct log_record rec;
    pod_err err = {{0}};
    uint64_t i = 0;
    int rc;
    while ((rc = seg_reader_next(r, &rec, &err)) == 1)
        if (records) print_record(o, path, i++, &rec);
    if (rc < 0) {
        fprintf(stderr, "poddb-logdump: %s\n", err.msg);
        g_rc = 1;
        return -1;
    }
    return 0;
}

static void dump_durable(const struct opts *o, const char *path)
{
    struct durable_record rec;
    pod_err err = {{0}};
    bool bad = durable_file_read_path(path, &rec, &err) != 0;
    if (bad) g_damage = true;
    if (o->json) {
        struct json_writer w;
        json_line_begin(&w, "durable", path);
        if (bad) {
            json_kv_bool(&w, "damaged", true);
            json_kv_str(&w, "error", err.msg);
        } else {
            json_kv_u64(&w, "host", rec.host);
            json_kv_u64(&w, "epoch", rec.epoch);
            json_kv_u64(&w, "seq", rec.seq);
            json_kv_u64(&w, "valid_slots", (uint64_t)rec.valid_slots);
            json_kv_u64(&w, "hosts_mask", rec.hosts);
        }
        json_line_end(&w);
    } else if (bad) {
        printf("%s  DAMAGED: %s\n", path, err.msg);
    } else {
        char hosts[32 * 4] = "none"; /* a mask of 32 host ids at most */
        for (int h = 0, n = 0; h < 32; h++)
            if (rec.hosts >> h & 1)
                n += snprintf(hosts + n, sizeof hosts - (size_t)n, "%s%d", n ? "," : "", h);
        printf("%s  host %" PRIu32 "  committed below epoch %" PRIu64 "  (update %" PRIu64
               ", %d of 2 slots valid; hosts that logged: %s)\n", path, rec.host, rec.epoch,
               rec.seq, rec.valid_slots, hosts);
    }
    fflush(stdout);
}

static void dump_file(const struct opts *o, const char *path)
{
    /* Unreadable is an error of its own, distinct from a bad header. */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "poddb-logdump: cannot read %s: %s\n", path, strerror(errno));
        g_rc = 1;
        return;
    }
    close(fd);
    const char *base = strrchr(path, '/');
    if (strcmp(base ? base + 1 : path, DURABLE_FILE_NAME) == 0) {
        dump_durable(o, path);
        return;
    }
    pod_err err = {{0}};
    struct seg_reader *r = seg_reader_open(path, &err);
    if (!r) {
        print_bad_header(o, path, err.msg);
        g_damage = true;
        return;
    }
    if (scan(o, path, r, false) == 0) {
        print_segment(o, path, r);
        if (seg_reader_tail_status(r)->kind == SEG_TAIL_CORRUPT) g_damage = true;
        if (o->records) {
            seg_reader_close(r);
            r = seg_reader_open(path, &err);
            if (!r) {
                fprintf(stderr, "poddb-logdump: %s\n", err.msg);
                g_rc = 1;
                return;
            }
            scan(o, path, r, true);
        }
    }
    fflush(stdout);
    seg_reader_close(r);
}

struct entry {
    uint32_t kind; /* 0 durable-epoch, 1 segment, 2 checkpoint */
    uint32_t host, logger;
    uint64_t seq;
    char *name;
};

static int cmp_entry(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    if (x->host != y->host) return x->host < y->host ? -1 : 1;
    if (x->logger != y->logger) return x->logger < y->logger ? -1 : 1;
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    return 0;
}

static void dump_dir(const struct opts *o, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "poddb-logdump: cannot open directory %s: %s\n", dir, strerror(errno));
        g_rc = 1;
        return;
    }
    struct entry *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d))) {
        struct entry x = {0};
        bool tmp;
        if (seg_parse_name(e->d_name, &x.host, &x.logger, &x.seq)) x.kind = 1;
        else if (seg_parse_ckpt_name(e->d_name, &x.host, &x.seq, &tmp)) x.kind = 2, x.logger = tmp;
        else if (strcmp(e->d_name, DURABLE_FILE_NAME) == 0) x.kind = 0;
        else continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            struct entry *nv = realloc(v, cap * sizeof *v);
            if (!nv) {
                fprintf(stderr, "poddb-logdump: out of memory\n");
                exit(1);
            }
            v = nv;
        }
        x.name = strdup(e->d_name);
        v[n++] = x;
    }
    if (errno) {
        fprintf(stderr, "poddb-logdump: cannot list directory %s: %s\n", dir, strerror(errno));
        g_rc = 1;
    }
    closedir(d);
    if (n == 0) fprintf(stderr, "poddb-logdump: no log files in %s\n", dir);
    qsort(v, n, sizeof *v, cmp_entry);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(dir) + strlen(v[i].name) + 2;
        char *p = malloc(len);
        if (!p) exit(1);
        snprintf(p, len, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", v[i].name);
        dump_file(o, p);
        free(p);
        free(v[i].name);
    }
    free(v);
}

int main(int argc, char **argv)
{
    struct opts o = {0};
    static const struct option lo[] = {
        {"json", no_argument, NULL, 'j'},    {"records", no_argument, NULL, 'r'},
        {"verify", no_argument, NULL, 'v'},  {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "jrvh", lo, NULL)) != -1) {
        switch (c) {
        case 'j': o.json = true; break;
        case 'r': o.records = true; break;
        case 'v': o.verify = true; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "poddb-logdump: no DIR or FILE given\n%s", usage);
        return 2;
    }
    for (int i = optind; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "poddb-logdump: cannot access %s: %s\n", argv[i], strerror(errno));
            g_rc = 1;
            continue;
        }
        if (S_ISDIR(sb.st_mode)) dump_dir(&o, argv[i]);
        else dump_file(&o, argv[i]);
    }
    if (o.verify && g_damage) {
        fprintf(stderr, "poddb-logdump: verify failed: a segment has a corrupt tail or a bad "
                "header, or the durable-epoch record is damaged\n");
        g_rc = 1;
    }
    return g_rc;
}
