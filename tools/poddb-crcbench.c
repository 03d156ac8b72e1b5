/* poddb-crcbench: throughput of the log's CRC-32C (src/log/crc32c.h).
 *
 * Every log block and checkpoint block is checksummed by its logger or
 * checkpointer when it is written and by recovery when it is read; every
 * record by its worker. This measures crc32c() over buffers of one size,
 * either again and again over the same buffer (hot: in the cache, as a
 * record just encoded) or walking a buffer larger than the caches (cold: as
 * a block read back from memory), and prints GB/s. */
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log/crc32c.h"
#include "util/opt.h"

static const char usage[] =
    "usage: poddb-crcbench [options]\n"
    "\n"
    "Measures crc32c() (the SSE4.2 version when the CPU has it, and the software\n"
    "version) over buffers of one size: hot (the same buffer again and again) and\n"
    "cold (consecutive buffers of a region larger than the caches). Prints GB/s.\n"
    "\n"
    "Options:\n"
    "  -s, --size BYTES   bytes per call (default 262144: a worker's log buffer,\n"
    "                     one block); 1..1073741824\n"
    "  -t, --total MIB    MiB to checksum per measurement (default 2048)\n"
    "  -c, --cold MIB     size of the cold region (default 512)\n"
    "  -j, --json         print one JSON line instead of the table\n"
    "  -h, --help         this text\n";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* GB/s of fn over `total` bytes in calls of `size` bytes, from buf (region
 * bytes long, walked round when it is larger than size). */
static double measure(uint32_t (*fn)(uint32_t, const void *, size_t), const unsigned char *buf,
                      size_t region, size_t size, uint64_t total, volatile uint32_t *sink)
{
    uint64_t calls = total / size ? total / size : 1;
    size_t off = 0;
    uint32_t x = 0;
    double t0 = now_s();
    for (uint64_t i = 0; i < calls; i++) {
        x ^= fn(x, buf + off, size);
        off += size;
        if (off + size > region) off = 0;
    }
    double t = now_s() - t0;
    *sink ^= x;
    return (double)calls * (double)size / t / 1e9;
}

int main(int argc, char **argv)
{
    uint64_t size = 262144, total_mib = 2048, cold_mib = 512;
    bool json = false;
    static const struct option opts[] = {
        {"size", required_argument, NULL, 's'}, {"total", required_argument, NULL, 't'},
        {"cold", required_argument, NULL, 'c'}, {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0},
    };
    int o;
    while ((o = getopt_long(argc, argv, "s:t:c:jh", opts, NULL)) != -1) {
        switch (o) {
        case 's':
            if (!pod_opt_u64("poddb-crcbench", "size", optarg, 1, 1u << 30, "bytes", &size)) return 2;
            break;
        case 't':
            if (!pod_opt_u64("poddb-crcbench", "total", optarg, 1, 1u << 20, "MiB", &total_mib)) return 2;
            break;
        case 'c':
            if (!pod_opt_u64("poddb-crcbench", "cold", optarg, 1, 1u << 20, "MiB", &cold_mib)) return 2;
            break;
        case 'j': json = true; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "poddb-crcbench: unexpected argument '%s'\n%s", argv[optind], usage);
        return 2;
    }
    size_t region = (size_t)cold_mib << 20;
    if (region < size) region = size;
    unsigned char *buf = malloc(region);
    if (!buf) {
        fprintf(stderr, "poddb-crcbench: cannot allocate %zu bytes for the cold region\n", region);
        return 1;
    }
    for (size_t i = 0; i < region; i++) buf[i] = (unsigned char)(i * 131 + (i >> 12));
    uint64_t total = total_mib << 20;
    static volatile uint32_t sink; /* the checksums are used */
    bool hw = crc32c_hw_available();
    double hot = measure(crc32c, buf, size, size, total, &sink);
    double cold = measure(crc32c, buf, region, size, total, &sink);
    double sw_hot = measure(crc32c_sw, buf, size, size, total / 8, &sink);
    free(buf);
    if (json) {
        printf("{\"size\":%llu,\"hw\":%s,\"hot_gbps\":%.2f,\"cold_gbps\":%.2f,"
               "\"sw_hot_gbps\":%.2f}\n",
               (unsigned long long)size, hw ? "true" : "false", hot, cold, sw_hot);
    } else {
        printf("crc32c over %llu-byte buffers (%s)\n", (unsigned long long)size,
               hw ? "SSE4.2, three streams from 192 bytes" : "software: no SSE4.2");
        printf("  hot (one buffer again and again)   %8.2f GB/s\n", hot);
        printf("  cold (walking %llu MiB)            %8.2f GB/s\n", (unsigned long long)cold_mib,
               cold);
        printf("  software version, hot              %8.2f GB/s\n", sw_hot);
    }
    return 0;
}
