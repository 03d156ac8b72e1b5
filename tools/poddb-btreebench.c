/* poddb-btreebench: the B+-tree (src/storage/btree.h) alone, in one thread.
 *
 * A pod's throughput on a shared 2-core VM moves by 10-25% from run to run,
 * more than most index changes are worth (docs/performance.md, "How to
 * measure"), so index work is measured here first: a tree of TPC-C-like
 * order-line keys
 * (warehouse, district, order, line as big-endian 32-bit words) built in
 * ascending order, then random lookups one at a time and in batches through
 * bt_prefetch (as pod_prefetch does). Nodes come from one arena, on 4 KiB
 * pages or advised for transparent huge pages (--huge). */
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "storage/btree.h"
#include "util/clock.h"
#include "util/opt.h"

static const char usage[] =
    "usage: poddb-btreebench [options]\n"
    "\n"
    "Builds a B+-tree of order-line keys (16 bytes: warehouse 1, 10 districts,\n"
    "orders, 10 lines each) in ascending order, then times random lookups: one at\n"
    "a time (bt_lookup), and in batches (bt_prefetch, then bt_lookup_at from each\n"
    "key's leaf). Prints ns per insert and per lookup for each round.\n"
    "\n"
    "Options:\n"
    "  -k, --keys N        keys in the tree, a multiple of 100 (default 3000000)\n"
    "  -n, --node BYTES    node size, 256..4096 and a multiple of 64 (default 1024)\n"
    "  -l, --lookups N     lookups per measurement (default 2000000)\n"
    "  -b, --batch N       keys per bt_prefetch batch, 1..16 (default 16)\n"
    "  -r, --rounds N      rounds of both measurements (default 3)\n"
    "      --huge          advise the nodes' arena for transparent huge pages\n"
    "  -j, --json          print one JSON line (the last round's figures)\n"
    "  -h, --help          this text\n";

#define PROG "poddb-btreebench"

/* Nodes from one mmap'ed arena, never freed (the benchmark removes nothing). */
struct arena {
    bt_space space;
    unsigned char *base, *next, *end;
};

static void *arena_alloc(void *ctx, size_t size)
{
    struct arena *a = ctx;
    size = (size + 63) & ~(size_t)63;
    if ((size_t)(a->end - a->next) < size) return NULL;
    void *p = a->next;
    a->next += size;
    return p;
}

static void arena_retire(void *ctx, void *node, size_t size)
{
    (void)ctx, (void)node, (void)size; /* nothing is removed; a node is never reused */
}

static void order_line_key(unsigned char k[16], uint64_t i, uint64_t orders)
{
    uint32_t w[4] = {1, (uint32_t)(i / (orders * 10)) + 1, (uint32_t)(i / 10 % orders) + 1,
                     (uint32_t)(i % 10) + 1};
    for (int j = 0; j < 4; j++) {
        k[4 * j] = (unsigned char)(w[j] >> 24);
        k[4 * j + 1] = (unsigned char)(w[j] >> 16);
        k[4 * j + 2] = (unsigned char)(w[j] >> 8);
        k[4 * j + 3] = (unsigned char)w[j];
    }
}

/* optarg as a multiple of mult in lo..hi for option --name (pod_opt_u64). */
static bool opt_multiple(const char *name, uint64_t lo, uint64_t hi, uint64_t mult,
                         const char *unit, uint64_t *out)
{
    if (!pod_opt_u64(PROG, name, optarg, lo, hi, unit, out)) return false;
    if (*out % mult == 0) return true;
    fprintf(stderr, PROG ": --%s: want a multiple of %llu, not %s\n", name,
            (unsigned long long)mult, optarg);
    return false;
}

int main(int argc, char **argv)
{
    uint64_t keys = 3000000, node = 1024, lookups = 2000000, batch = 16, rounds = 3;
    bool huge = false, json = false;
    static const struct option opts[] = {
        {"keys", required_argument, NULL, 'k'},   {"node", required_argument, NULL, 'n'},
        {"lookups", required_argument, NULL, 'l'}, {"batch", required_argument, NULL, 'b'},
        {"rounds", required_argument, NULL, 'r'}, {"huge", no_argument, NULL, 'H'},
        {"json", no_argument, NULL, 'j'},         {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int o;
    while ((o = getopt_long(argc, argv, "k:n:l:b:r:jh", opts, NULL)) != -1) {
        switch (o) {
        case 'k':
            if (!opt_multiple("keys", 100, 1000000000, 100, "keys", &keys)) return 2;
            break;
        case 'n':
            if (!opt_multiple("node", 256, 4096, 64, "bytes", &node)) return 2;
            break;
        case 'l':
            if (!pod_opt_u64(PROG, "lookups", optarg, 16, 1000000000, "lookups", &lookups))
                return 2;
            break;
        case 'b':
            if (!pod_opt_u64(PROG, "batch", optarg, 1, BT_PREFETCH_MAX, "keys", &batch)) return 2;
            break;
        case 'r':
            if (!pod_opt_u64(PROG, "rounds", optarg, 1, 100, "rounds", &rounds)) return 2;
            break;
        case 'H': huge = true; break;
        case 'j': json = true; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, PROG ": unexpected argument '%s'\n%s", argv[optind], usage);
        return 2;
    }

    /* Ascending inserts keep leaves full; twice the keys' bytes is room
     * for the nodes, rounded up to 2 MiB for huge pages. */
    size_t bytes = ((size_t)keys * 24 * 2 + 64 * node + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    struct arena a = {.space = {.alloc = arena_alloc, .retire = arena_retire}};
    a.space.ctx = &a;
    a.base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a.base == MAP_FAILED) {
        fprintf(stderr, PROG ": cannot map %zu bytes for the nodes\n", bytes);
        return 1;
    }
    if (huge && madvise(a.base, bytes, MADV_HUGEPAGE) != 0)
        fprintf(stderr, PROG ": --huge: madvise failed; the nodes stay on 4 KiB pages\n");
    a.next = a.base;
    a.end = a.base + bytes;
    static bt_header hdr;
    bt_tree t;
    bt_config cfg = {.key_width = 16, .node_size = (unsigned)node};
    if (bt_create(&t, &hdr, &a.space, &cfg) != BT_OK) {
        fprintf(stderr, PROG ": cannot create a tree with %llu-byte nodes\n",
                (unsigned long long)node);
        return 1;
    }
    uint64_t orders = keys / 100; /* per district */
    unsigned char k[16];
    uint64_t t0 = pod_mono_ns();
    for (uint64_t i = 0; i < keys; i++) {
        order_line_key(k, i, orders);
        if (bt_insert(&t, k, i + 1) != BT_OK) {
            fprintf(stderr, PROG ": insert %llu failed (the arena is full?)\n",
                    (unsigned long long)i);
            return 1;
        }
    }
    double insert_ns = (double)(pod_mono_ns() - t0) / (double)keys;
    bt_stats st;
    bt_get_stats(&t, &st);

    unsigned char(*ks)[16] = malloc((size_t)lookups * 16);
    if (!ks) {
        fprintf(stderr, PROG ": cannot allocate %llu keys\n", (unsigned long long)lookups);
        return 1;
    }
    if (!json)
        printf("B+-tree of %llu order-line keys: %llu-byte nodes, height %u, %.1f MiB of nodes"
               " (%s pages); %llu random lookups a round\n",
               (unsigned long long)st.keys, (unsigned long long)node, st.height,
               (double)st.bytes / 1048576.0, huge ? "huge" : "4 KiB",
               (unsigned long long)lookups);
    uint64_t rng = 0x9e3779b97f4a7c15ull, found = 0;
    double single_ns = 0, batch_ns = 0;
    for (uint64_t r = 0; r < rounds; r++) {
        for (uint64_t i = 0; i < lookups; i++) order_line_key(ks[i], pod_rand(&rng) % keys, orders);
        uint64_t s0 = pod_mono_ns();
        for (uint64_t i = 0; i < lookups; i++) {
            uint64_t v;
            found += bt_lookup(&t, ks[i], &v) == BT_OK;
        }
        uint64_t s1 = pod_mono_ns();
        const bt_tree *trees[BT_PREFETCH_MAX];
        const void *kp[BT_PREFETCH_MAX];
        uint64_t vals[BT_PREFETCH_MAX];
        bt_hint hints[BT_PREFETCH_MAX];
        for (unsigned j = 0; j < BT_PREFETCH_MAX; j++) trees[j] = &t;
        uint64_t done = 0;
        for (; done + batch <= lookups; done += batch) {
            for (unsigned j = 0; j < batch; j++) kp[j] = ks[done + j];
            bt_prefetch(trees, kp, (unsigned)batch, vals, hints);
            for (unsigned j = 0; j < batch; j++) {
                uint64_t v;
                found += bt_lookup_at(&t, kp[j], &v, &hints[j]) == BT_OK;
            }
        }
        uint64_t s2 = pod_mono_ns();
        single_ns = (double)(s1 - s0) / (double)lookups;
        batch_ns = (double)(s2 - s1) / (double)done;
        if (!json)
            printf("  round %llu: lookup %7.1f ns   batches of %llu %7.1f ns a key\n",
                   (unsigned long long)r + 1, single_ns, (unsigned long long)batch, batch_ns);
    }
    if (found != rounds * (lookups + lookups / batch * batch)) {
        fprintf(stderr, PROG ": %llu lookups found their key, expected all\n",
                (unsigned long long)found);
        return 1;
    }
    if (json)
        printf("{\"keys\":%llu,\"node\":%llu,\"height\":%u,\"node_bytes\":%llu,\"huge\":%s,"
               "\"insert_ns\":%.1f,\"lookup_ns\":%.1f,\"batch\":%llu,\"batch_ns\":%.1f}\n",
               (unsigned long long)st.keys, (unsigned long long)node, st.height,
               (unsigned long long)st.bytes, huge ? "true" : "false", insert_ns, single_ns,
               (unsigned long long)batch, batch_ns);
    else
        printf("  ascending inserts while building: %.1f ns each\n", insert_ns);
    free(ks);
    munmap(a.base, bytes);
    return 0;
}
