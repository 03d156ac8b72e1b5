/* poddb-segbench: CPU per record of the log's segment writer
 * (src/log/segment.h) writing the way a checkpoint does.
 *
 * A checkpoint reserves each record's room at the end of its block
 * (seg_writer_reserve), reads the tuple straight into it, commits it
 * (seg_writer_commit: the record's header and CRC), writes 1 MiB blocks (the
 * block's CRC) through a direct writer (O_DIRECT, 4 KiB-aligned stage) and
 * syncs at the end. This does the same with tuples of one size copied from
 * memory, in a fresh segment file in DIR each time, and prints the calling
 * thread's CPU time per record: what writing costs the checkpointer, without
 * the reading of rows that a checkpoint adds, which beside running workers
 * varies too much to compare builds. The file system of DIR decides whether
 * O_DIRECT is used (said in the
 * output); the segment files are removed. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log/segment.h"
#include "util/clock.h"
#include "util/opt.h"

#define BLOCK_BYTES (1u << 20) /* the checkpointer's FLUSH_BYTES */

static const char usage[] =
    "usage: poddb-segbench [options] DIR\n"
    "\n"
    "Writes records the way a checkpoint does (reserve, copy the tuple in,\n"
    "commit; 1 MiB blocks; a direct writer; a sync at the end) into a fresh\n"
    "segment file in DIR, and prints the CPU time per record. DIR must exist;\n"
    "its file system decides whether O_DIRECT is used (a disk's, not tmpfs, for\n"
    "what a checkpoint pays). The files are removed afterwards.\n"
    "\n"
    "Options:\n"
    "  -s, --size BYTES     tuple bytes per record (default 300, a TPC-C stock\n"
    "                       row); 0..65536\n"
    "  -n, --records N      records per run (default 2000000); 1..1000000000\n"
    "  -r, --runs N         runs, each in a new file (default 3); 1..100\n"
    "  -j, --json           print one JSON line instead of the table\n"
    "  -h, --help           this text\n";

struct run_result {
    double cpu_ns_per_record, wall_s;
    uint64_t bytes;
    bool direct;
};

/* One run into segment `seq` of dir; false (err filled) on a write error. */
static bool run_once(const char *dir, uint64_t seq, uint32_t tuple, uint64_t n,
                     const unsigned char *src, size_t src_len, struct run_result *out, pod_err *err)
{
    struct seg_writer *w = seg_writer_open(dir, 0, 0, seq, 1, err);
    if (!w) return false;
    if (seg_writer_go_direct(w, SEG_DIRECT_EARLY_BYTES, err) != 0) {
        seg_writer_abandon(w);
        return false;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s", seg_writer_path(w));
    out->direct = seg_writer_is_direct(w);
    uint64_t cpu0 = pod_thread_cpu_ns(), t0 = pod_mono_ns();
    bool ok = true;
    for (uint64_t i = 0; i < n && ok; i++) {
        uint64_t key = i;
        unsigned char *t = seg_writer_reserve(w, sizeof key, tuple, err);
        if (!t) {
            ok = false;
            break;
        }
        memcpy(t, src + (i * 64) % (src_len - tuple), tuple); /* a row read into the block */
        struct log_record rec = {.table_id = 1, .kind = LOG_PUT, .key_len = sizeof key,
                                 .tuple_len = tuple, .epoch_version = (1ull << 32) | i,
                                 .key = &key, .tuple = t};
        ok = seg_writer_commit(w, &rec, err) == 0 &&
             (seg_writer_pending(w) < BLOCK_BYTES || seg_writer_flush_block(w, err) == 0);
    }
    out->bytes = seg_writer_size(w) + seg_writer_pending(w);
    if (!ok) {
        seg_writer_abandon(w);
        unlink(path);
        return false;
    }
    ok = seg_writer_close(w, err) == 0;
    out->cpu_ns_per_record = (double)(pod_thread_cpu_ns() - cpu0) / (double)n;
    out->wall_s = (double)(pod_mono_ns() - t0) / 1e9;
    if (unlink(path) != 0 && ok) {
        pod_err_set(err, "cannot remove %s: %s", path, strerror(errno));
        ok = false;
    }
    return ok;
}

int main(int argc, char **argv)
{
    uint64_t size = 300, records = 2000000, runs = 3;
    bool json = false;
    static const struct option opts[] = {
        {"size", required_argument, NULL, 's'}, {"records", required_argument, NULL, 'n'},
        {"runs", required_argument, NULL, 'r'}, {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0},
    };
    int o;
    while ((o = getopt_long(argc, argv, "s:n:r:jh", opts, NULL)) != -1) {
        switch (o) {
        case 's':
            if (!pod_opt_u64("poddb-segbench", "size", optarg, 0, 65536, "bytes", &size)) return 2;
            break;
        case 'n':
            if (!pod_opt_u64("poddb-segbench", "records", optarg, 1, 1000000000, "records",
                             &records))
                return 2;
            break;
        case 'r':
            if (!pod_opt_u64("poddb-segbench", "runs", optarg, 1, 100, "runs", &runs)) return 2;
            break;
        case 'j': json = true; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind + 1 != argc) {
        fprintf(stderr, "poddb-segbench: want one directory (see --help)\n");
        return 2;
    }
    const char *dir = argv[optind];
    /* Tuples are taken from 1 MiB of varied bytes, as rows would be. */
    size_t src_len = BLOCK_BYTES + 65536 + 1;
    unsigned char *src = malloc(src_len);
    if (!src) {
        fprintf(stderr, "poddb-segbench: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < src_len; i++) src[i] = (unsigned char)(i * 131 + (i >> 12));
    /* Segment numbers of this process, so that two benchmarks in one DIR
     * do not meet (the writer refuses an existing file). */
    uint64_t seq0 = (uint64_t)getpid() * 1000;
    double best = 0, sum = 0;
    struct run_result r = {0};
    if (!json)
        printf("segment writer, %llu records of %llu-byte tuples per run, in %s\n",
               (unsigned long long)records, (unsigned long long)size, dir);
    for (uint64_t i = 0; i < runs; i++) {
        pod_err err = {{0}};
        if (!run_once(dir, seq0 + i, (uint32_t)size, records, src, src_len, &r, &err)) {
            fprintf(stderr, "poddb-segbench: %s\n", err.msg);
            free(src);
            return 1;
        }
        if (i == 0 || r.cpu_ns_per_record < best) best = r.cpu_ns_per_record;
        sum += r.cpu_ns_per_record;
        if (!json)
            printf("  run %llu: %7.1f ns of CPU per record, %.1f MB written in %.2f s (%s)\n",
                   (unsigned long long)i + 1, r.cpu_ns_per_record, (double)r.bytes / 1e6, r.wall_s,
                   r.direct ? "O_DIRECT" : "page cache: the file system refused O_DIRECT");
    }
    free(src);
    if (json)
        printf("{\"size\":%llu,\"records\":%llu,\"runs\":%llu,\"direct\":%s,"
               "\"cpu_ns_per_record_mean\":%.1f,\"cpu_ns_per_record_min\":%.1f}\n",
               (unsigned long long)size, (unsigned long long)records, (unsigned long long)runs,
               r.direct ? "true" : "false", sum / (double)runs, best);
    else
        printf("  mean %.1f ns, least %.1f ns of CPU per record\n", sum / (double)runs, best);
    return 0;
}
