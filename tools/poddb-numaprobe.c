/* poddb-numaprobe: what NUMA topology does this machine have, and what does
 * memory on each node cost? Lists the nodes with their CPUs and memory, marks
 * CPU-less nodes (how Linux exposes a CXL memory expander), prints the
 * firmware's distance table, and measures idle load latency from one CPU of
 * each node that has CPUs to the memory of each node that has memory.
 *
 * Idle load latency is measured with a dependent pointer chase: every load's
 * address comes from the previous load, over a buffer much larger than the
 * last-level cache, in a random cyclic order (one cache line per step), so
 * each step is one full memory round trip that neither the prefetchers nor
 * out-of-order execution can hide. The buffer is asked for transparent huge
 * pages so that the figure is not a page-table walk; the fraction actually
 * backed by huge pages is reported with the result. */
#include <errno.h>
#include <getopt.h>
#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "conf/config.h"
#include "util/clock.h"
#include "util/json.h"

#define LINE 64
#define HUGE_PAGE (2ull << 20)
#define MAX_CPUS 4096

static const char usage[] =
    "usage: poddb-numaprobe [options]\n"
    "\n"
    "Lists the machine's NUMA nodes (CPUs, memory, CPU-less nodes such as a CXL\n"
    "memory expander), the firmware's node distances, and the idle load latency in\n"
    "ns from one CPU of each node with CPUs to the memory of each node with memory\n"
    "(a dependent pointer chase over a buffer bound to that node with libnuma).\n"
    "tools/pod check-numa runs it; docs/emulation.md explains how to read it.\n"
    "\n"
    "Options:\n"
    "  -s, --size BYTES    chase buffer per node (default 256MiB; units as in the\n"
    "                      config: KiB, MiB, GiB...); make it several times the LLC\n"
    "  -n, --loads N       dependent loads per timed round (default 1000000)\n"
    "  -r, --rounds N      timed rounds per pair; the fastest is reported (default 3)\n"
    "  -L, --no-latency    list the topology only, measure nothing\n"
    "  -j, --json          print one JSON object\n"
    "  -o, --json-file F   print the text and also write the JSON object to F\n"
    "  -h, --help          this text\n";

struct node_info {
    int id;
    bool has_cpus;
    int first_cpu;        /* the CPU the latency is measured from; -1: none usable */
    char cpus[256];       /* "0-3,8" */
    long long mem_total;  /* bytes; 0: memory-less node */
    long long mem_free;
};

struct result {
    int from, cpu, to;
    double ns;            /* fastest round; < 0: not measured */
    double huge_fraction; /* of the buffer backed by huge pages, -1 unknown */
    bool placed;          /* sampled pages were on the `to` node */
    char note[128];
};

/* "0-3,8" for the set bits of a CPU predicate. */
static void describe_list(const bool *set, int n, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < n; i++) {
        if (!set[i]) continue;
        int j = i;
        while (j + 1 < n && set[j + 1]) j++;
        int w = j > i ? snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", i, j)
                      : snprintf(buf + off, len - off, "%s%d", off ? "," : "", i);
        if (w < 0 || (size_t)w >= len - off) break;
        off += (size_t)w;
        i = j;
    }
}

static long long llc_bytes(void)
{
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    if (!f) return 0;
    long long v = 0;
    char unit = 0;
    if (fscanf(f, "%lld%c", &v, &unit) < 1) v = 0;
    fclose(f);
    if (unit == 'K') v <<= 10;
    else if (unit == 'M') v <<= 20;
    return v;
}

static void read_thp_mode(char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return;
    char line[128];
    if (fgets(line, sizeof line, f)) {
        char *a = strchr(line, '['), *b = a ? strchr(a, ']') : NULL;
        if (a && b) snprintf(buf, len, "%.*s", (int)(b - a - 1), a + 1);
    }
    fclose(f);
}

/* Bytes of the mapping that contains addr backed by anonymous huge pages,
 * from /proc/self/smaps; -1 when it cannot be told. */
static long long huge_bytes_of(const void *addr)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    bool in = false;
    long long kb = -1;
    uintptr_t a = (uintptr_t)addr;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = a >= lo && a < hi;
            continue;
        }
        if (in && sscanf(line, "AnonHugePages: %lld kB", &kb) == 1) break;
    }
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

static int discover(struct node_info **out, bool *numa_ok, char *online, size_t online_len)
{
    static bool allowed[MAX_CPUS], on[MAX_CPUS];
    cpu_set_t aff;
    CPU_ZERO(&aff);
    sched_getaffinity(0, sizeof aff, &aff);
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    if (ncpu > MAX_CPUS) ncpu = MAX_CPUS;
    for (int c = 0; c < ncpu; c++) allowed[c] = c < CPU_SETSIZE && CPU_ISSET(c, &aff);
    /* Online CPUs as the kernel lists them. */
    FILE *f = fopen("/sys/devices/system/cpu/online", "r");
    char buf[1024] = "";
    if (f) {
        if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
        fclose(f);
    }
    static int list[MAX_CPUS];
    int n = buf[0] ? pod_parse_cpu_list(strtok(buf, "\n"), list, MAX_CPUS) : -1;
    if (n < 0) { /* no sysfs: everything sysconf counts */
        n = (int)sysconf(_SC_NPROCESSORS_ONLN);
        for (int i = 0; i < n; i++) list[i] = i;
    }
    for (int i = 0; i < n; i++)
        if (list[i] < MAX_CPUS) on[list[i]] = true;
    describe_list(on, MAX_CPUS, online, online_len);

    *numa_ok = numa_available() >= 0;
    int max = *numa_ok ? numa_max_node() : 0;
    struct node_info *nodes = calloc((size_t)max + 1, sizeof *nodes);
    int count = 0;
    for (int id = 0; id <= max; id++) {
        struct node_info *ni = &nodes[count];
        static bool in[MAX_CPUS];
        memset(in, 0, sizeof in);
        if (*numa_ok) {
            if (!numa_bitmask_isbitset(numa_nodes_ptr, (unsigned)id)) continue;
            struct bitmask *m = numa_allocate_cpumask();
            if (numa_node_to_cpus(id, m) == 0)
                for (int c = 0; c < MAX_CPUS && (unsigned)c < m->size; c++)
                    in[c] = numa_bitmask_isbitset(m, (unsigned)c) && on[c];
            numa_free_cpumask(m);
            ni->mem_total = numa_node_size64(id, &ni->mem_free);
            if (ni->mem_total < 0) ni->mem_total = ni->mem_free = 0;
        } else {
            memcpy(in, on, sizeof in);
            ni->mem_total = (long long)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
            ni->mem_free = (long long)sysconf(_SC_AVPHYS_PAGES) * sysconf(_SC_PAGESIZE);
        }
        ni->id = id;
        ni->first_cpu = -1;
        for (int c = 0; c < MAX_CPUS; c++) {
            if (!in[c]) continue;
            ni->has_cpus = true;
            if (ni->first_cpu < 0 && c < ncpu && allowed[c]) ni->first_cpu = c;
        }
        describe_list(in, MAX_CPUS, ni->cpus, sizeof ni->cpus);
        count++;
    }
    *out = nodes;
    return count;
}

/* One random cycle through every line of buf: line i holds the address of
 * the next line. */
static void build_chain(char *buf, size_t size)
{
    size_t lines = size / LINE;
    uint32_t *order = malloc(lines * sizeof *order);
    if (!order) {
        fprintf(stderr, "poddb-numaprobe: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < lines; i++) order[i] = (uint32_t)i;
    uint64_t seed = 0x5eed ^ (uint64_t)size;
    for (size_t i = lines - 1; i > 0; i--) {
        size_t j = pod_rand(&seed) % (i + 1);
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < lines; i++)
        *(void **)(buf + (size_t)order[i] * LINE) = buf + (size_t)order[(i + 1) % lines] * LINE;
    free(order);
}

static void *volatile g_sink;

static double chase_ns(void *start, uint64_t loads)
{
    void *p = start;
    uint64_t t0 = pod_mono_ns();
    for (uint64_t i = 0; i < loads; i += 8) {
        p = *(void **)p; p = *(void **)p; p = *(void **)p; p = *(void **)p;
        p = *(void **)p; p = *(void **)p; p = *(void **)p; p = *(void **)p;
    }
    uint64_t t1 = pod_mono_ns();
    g_sink = p;
    return (double)(t1 - t0) / (double)((loads + 7) / 8 * 8);
}

static int pin_to(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return sched_setaffinity(0, sizeof s, &s);
}

/* Were the sampled pages of buf placed on node? */
static bool pages_on_node(char *buf, size_t size, int node, bool numa_ok)
{
    if (!numa_ok) return true;
    enum { SAMPLES = 64 };
    void *pages[SAMPLES];
    int status[SAMPLES];
    for (int i = 0; i < SAMPLES; i++) pages[i] = buf + (size / SAMPLES) * (size_t)i;
    if (numa_move_pages(0, SAMPLES, pages, NULL, status, 0) != 0) return false;
    for (int i = 0; i < SAMPLES; i++)
        if (status[i] != node) return false;
    return true;
}

/* Measure from every source node to target node `to`. */
static void measure_to(const struct node_info *to, const struct node_info *nodes, int nnodes,
                       bool numa_ok, size_t size, uint64_t loads, int rounds, struct result *out)
{
    size_t alloc = size + HUGE_PAGE;
    char *raw = NULL, *buf;
    const char *skip = NULL;
    if (to->mem_total == 0) skip = "node has no memory";
    else if ((long long)alloc > to->mem_free / 10 * 8) skip = "not enough free memory on the node";
    if (!skip) {
        raw = numa_ok ? numa_alloc_onnode(alloc, to->id)
                      : mmap(NULL, alloc, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                             -1, 0);
        if (raw == MAP_FAILED) raw = NULL;
        if (!raw) skip = "allocation failed";
    }
    for (int i = 0; i < nnodes; i++) {
        struct result *r = &out[i];
        r->from = nodes[i].id;
        r->cpu = nodes[i].first_cpu;
        r->to = to->id;
        r->ns = -1;
        r->huge_fraction = -1;
        if (skip) snprintf(r->note, sizeof r->note, "%s", skip);
        else if (!nodes[i].has_cpus) snprintf(r->note, sizeof r->note, "source has no CPUs");
        else if (nodes[i].first_cpu < 0)
            snprintf(r->note, sizeof r->note, "no CPU of the node is usable by this process");
    }
    if (skip) return;
    buf = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    madvise(buf, size, MADV_HUGEPAGE); /* a hint: THP may be off */
    build_chain(buf, size);
    long long huge = huge_bytes_of(buf);
    bool placed = pages_on_node(buf, size, to->id, numa_ok);
    for (int i = 0; i < nnodes; i++) {
        struct result *r = &out[i];
        if (r->note[0]) continue;
        if (pin_to(r->cpu) != 0) {
            snprintf(r->note, sizeof r->note, "cannot run on CPU %d: %s", r->cpu, strerror(errno));
            continue;
        }
        chase_ns(buf, loads / 4 + 8); /* warm the TLB and the path */
        double best = -1;
        for (int k = 0; k < rounds; k++) {
            double ns = chase_ns(buf, loads);
            if (best < 0 || ns < best) best = ns;
        }
        r->ns = best;
        r->huge_fraction = huge < 0 ? -1 : (double)huge / (double)size;
        if (r->huge_fraction > 1) r->huge_fraction = 1;
        r->placed = placed;
        if (!placed) snprintf(r->note, sizeof r->note, "pages were not all on node %d", to->id);
    }
    if (numa_ok) numa_free(raw, alloc);
    else munmap(raw, alloc);
}

static void print_json(FILE *out, const struct node_info *nodes, int nn, bool numa_ok,
                       const char *online, long long llc, const char *thp, bool latency,
                       uint64_t size, uint64_t loads, int rounds, const struct result *res)
{
    struct json_writer w;
    json_init(&w, out);
    json_obj_begin(&w);
    json_kv_bool(&w, "numa_available", numa_ok);
    json_kv_str(&w, "cpus_online", online);
    json_kv_i64(&w, "llc_bytes", llc);
    json_kv_str(&w, "transparent_hugepage", thp);
    json_key(&w, "nodes");
    json_arr_begin(&w);
    for (int i = 0; i < nn; i++) {
        json_obj_begin(&w);
        json_kv_i64(&w, "node", nodes[i].id);
        json_kv_str(&w, "cpus", nodes[i].cpus);
        json_kv_bool(&w, "cpuless", !nodes[i].has_cpus);
        json_kv_i64(&w, "memory_bytes", nodes[i].mem_total);
        json_kv_i64(&w, "free_bytes", nodes[i].mem_free);
        json_key(&w, "distance");
        json_arr_begin(&w);
        for (int j = 0; j < nn; j++)
            json_i64(&w, numa_ok ? numa_distance(nodes[i].id, nodes[j].id) : 10);
        json_arr_end(&w);
        json_obj_end(&w);
    }
    json_arr_end(&w);
    if (latency) {
        json_key(&w, "latency");
        json_obj_begin(&w);
        json_kv_u64(&w, "buffer_bytes", size);
        json_kv_u64(&w, "loads", loads);
        json_kv_i64(&w, "rounds", rounds);
        json_key(&w, "pairs");
        json_arr_begin(&w);
        for (int i = 0; i < nn * nn; i++) {
            const struct result *r = &res[i];
            json_obj_begin(&w);
            json_kv_i64(&w, "from_node", r->from);
            json_kv_i64(&w, "cpu", r->cpu);
            json_kv_i64(&w, "to_node", r->to);
            if (r->ns >= 0) json_kv_f64(&w, "ns", r->ns);
            else {
                json_key(&w, "ns");
                json_null(&w);
            }
            if (r->huge_fraction >= 0) json_kv_f64(&w, "huge_page_fraction", r->huge_fraction);
            if (r->note[0]) json_kv_str(&w, "note", r->note);
            json_obj_end(&w);
        }
        json_arr_end(&w);
        json_obj_end(&w);
    }
    json_obj_end(&w);
    fputc('\n', out);
}

static void human(long long b, char *buf, size_t n)
{
    if (b >= (1ll << 30)) snprintf(buf, n, "%.1f GiB", (double)b / (1ll << 30));
    else snprintf(buf, n, "%.0f MiB", (double)b / (1ll << 20));
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"size", required_argument, 0, 's'},
                                         {"loads", required_argument, 0, 'n'},
                                         {"rounds", required_argument, 0, 'r'},
                                         {"no-latency", no_argument, 0, 'L'},
                                         {"json", no_argument, 0, 'j'},
                                         {"json-file", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    uint64_t size = 256ull << 20, loads = 1000000;
    int rounds = 3;
    bool json = false, latency = true;
    const char *json_file = NULL;
    int o;
    char *end;
    while ((o = getopt_long(argc, argv, "s:n:r:Ljo:h", opts, NULL)) != -1) {
        switch (o) {
        case 's':
            if (pod_parse_size(optarg, &size) || size < (1ull << 20) || size > (64ull << 30)) {
                fprintf(stderr, "poddb-numaprobe: --size '%s' is not a size in 1MiB..64GiB\n",
                        optarg);
                return 2;
            }
            break;
        case 'n':
            loads = strtoull(optarg, &end, 10);
            if (*end || end == optarg || loads < 1000 || loads > 10000000000ull) {
                fprintf(stderr, "poddb-numaprobe: --loads '%s' is not a number in 1000..1e10\n",
                        optarg);
                return 2;
            }
            break;
        case 'r':
            rounds = (int)strtol(optarg, &end, 10);
            if (*end || end == optarg || rounds < 1 || rounds > 100) {
                fprintf(stderr, "poddb-numaprobe: --rounds '%s' is not a number in 1..100\n",
                        optarg);
                return 2;
            }
            break;
        case 'L': latency = false; break;
        case 'j': json = true; break;
        case 'o': json_file = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "poddb-numaprobe: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (size / LINE > UINT32_MAX) size = (uint64_t)UINT32_MAX * LINE;

    struct node_info *nodes;
    bool numa_ok;
    char online[1024], thp[32];
    int nn = discover(&nodes, &numa_ok, online, sizeof online);
    read_thp_mode(thp, sizeof thp);
    long long llc = llc_bytes();

    /* results[t * nn + s]: from nodes[s] to nodes[t] */
    struct result *res = calloc((size_t)nn * (size_t)nn, sizeof *res);
    if (latency) {
        for (int t = 0; t < nn; t++)
            measure_to(&nodes[t], nodes, nn, numa_ok, size, loads, rounds, &res[t * nn]);
    }

    if (json) print_json(stdout, nodes, nn, numa_ok, online, llc, thp, latency, size, loads,
                         rounds, res);
    if (json_file) {
        FILE *f = fopen(json_file, "w");
        if (!f) {
            fprintf(stderr, "poddb-numaprobe: cannot write %s: %s\n", json_file, strerror(errno));
            return 1;
        }
        print_json(f, nodes, nn, numa_ok, online, llc, thp, latency, size, loads, rounds, res);
        if (fclose(f) != 0) {
            fprintf(stderr, "poddb-numaprobe: cannot write %s: %s\n", json_file, strerror(errno));
            return 1;
        }
    }
    if (!json) {
        printf("CPUs online: %s\n", online);
        if (!numa_ok)
            printf("NUMA: not available in this kernel; the machine is treated as one node\n");
        printf("NUMA nodes: %d\n\n  %-5s %-16s %10s %10s\n", nn, "node", "cpus", "memory",
               "free");
        for (int i = 0; i < nn; i++) {
            char m[32], f[32];
            human(nodes[i].mem_total, m, sizeof m);
            human(nodes[i].mem_free, f, sizeof f);
            const char *note = !nodes[i].has_cpus ? "  CPU-less: memory only, as a CXL "
                                                    "expander appears"
                               : nodes[i].mem_total == 0 ? "  memory-less"
                                                         : "";
            printf("  %-5d %-16s %10s %10s%s\n", nodes[i].id,
                   nodes[i].has_cpus ? nodes[i].cpus : "(none)", m, f, note);
        }
        if (numa_ok && nn > 1) {
            printf("\nNode distances (firmware SLIT; 10 = local):\n  %-6s", "");
            for (int j = 0; j < nn; j++) printf(" %6d", nodes[j].id);
            printf("\n");
            for (int i = 0; i < nn; i++) {
                printf("  %-6d", nodes[i].id);
                for (int j = 0; j < nn; j++) printf(" %6d", numa_distance(nodes[i].id, nodes[j].id));
                printf("\n");
            }
        }
        if (latency) {
            char b[32];
            human((long long)size, b, sizeof b);
            printf("\nIdle load latency, ns (dependent loads over %s per node, fastest of %d "
                   "rounds of %llu loads; transparent huge pages: %s):\n  %-16s",
                   b, rounds, (unsigned long long)loads, thp, "from \\ to");
            for (int t = 0; t < nn; t++) {
                char label[16];
                snprintf(label, sizeof label, "node %d", nodes[t].id);
                printf(" %12s", label);
            }
            printf("\n");
            for (int s = 0; s < nn; s++) {
                if (!nodes[s].has_cpus) continue;
                char from[32];
                snprintf(from, sizeof from, "node %d (cpu %d)", nodes[s].id, nodes[s].first_cpu);
                printf("  %-16s", from);
                for (int t = 0; t < nn; t++) {
                    const struct result *r = &res[t * nn + s];
                    if (r->ns >= 0) printf(" %12.1f", r->ns);
                    else printf(" %12s", "-");
                }
                printf("\n");
            }
            for (int i = 0; i < nn * nn; i++) {
                const struct result *r = &res[i];
                if (r->note[0] && nodes[i % nn].has_cpus)
                    printf("  note: node %d -> node %d: %s\n", r->from, r->to, r->note);
                else if (r->ns >= 0 && r->huge_fraction >= 0 && r->huge_fraction < 0.9)
                    printf("  note: node %d -> node %d: only %.0f%% of the buffer is on huge "
                           "pages; the figure includes page-table walks\n",
                           r->from, r->to, 100 * r->huge_fraction);
            }
        }
    }
    if (latency && llc > 0 && (long long)size < 4 * llc)
        fprintf(stderr,
                "poddb-numaprobe: warning: the buffer (%llu bytes) is less than 4x the "
                "last-level cache (%lld bytes); part of the chase hits in cache\n",
                (unsigned long long)size, llc);
    free(res);
    free(nodes);
    return 0;
}
