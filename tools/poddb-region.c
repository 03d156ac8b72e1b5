/* poddb-region: format, inspect and destroy the shared CXL region of a pod. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conf/config.h"
#include "cxl/record.h"
#include "cxl/region.h"
#include "pod/cxl_index.h"
#include "util/json.h"
#include "util/log.h"

static const char usage[] =
    "usage: poddb-region COMMAND --conf FILE [options]\n"
    "\n"
    "Commands:\n"
    "  format    format the region described by the config (a new pod generation);\n"
    "            refused while any host of the pod is alive unless --force, and\n"
    "            always for a file that is not empty and not a PodDB region\n"
    "  inspect   print the layout, the HWcc budget, per-host HWcc/SWcc usage, the\n"
    "            host table and the HWcc bytes per CXL-resident tuple (its 8-byte\n"
    "            record plus its share of the CXL indexes), per host and in total\n"
    "            (--json: the same as one JSON object)\n"
    "  destroy   remove the region's backing file (a devdax device: wipe its\n"
    "            superblock); refused while hosts are alive unless --force, and\n"
    "            always for a file that is not a PodDB region\n"
    "  config    print the parsed config's region (path, kind, size, HWcc budget,\n"
    "            NUMA node), hosts (workers, loggers, CPUs, socket, log dir, TCP\n"
    "            port, huge pages) and modules (absolute paths: a relative one is\n"
    "            taken from the config file's directory) without opening the\n"
    "            region (--json: one JSON object; this is what tools/pod reads);\n"
    "            with mode: dm, the memory nodes (pod, provider, sockets) instead\n"
    "            of a region, which format, inspect and destroy refuse\n"
    "\n"
    "Options:\n"
    "  -c, --conf FILE   the pod's YAML config (required)\n"
    "  -j, --json        inspect, config: print one JSON object\n"
    "  -f, --force       format/destroy even when hosts look alive\n"
    "  -h, --help        this text\n";

static void human_bytes(uint64_t b, char *buf, size_t n)
{
    if (b >= (1ull << 30)) snprintf(buf, n, "%.2f GiB", (double)b / (1ull << 30));
    else if (b >= (1ull << 20)) snprintf(buf, n, "%.2f MiB", (double)b / (1ull << 20));
    else if (b >= 1024) snprintf(buf, n, "%.1f KiB", (double)b / 1024);
    else snprintf(buf, n, "%llu B", (unsigned long long)b);
}

static void format_time(uint64_t ns, char *buf, size_t n)
{
    time_t t = (time_t)(ns / 1000000000ull);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
}

/* HWcc memory of the tuples in CXL memory on one host (its partitions): the
 * HWcc record of each (charged at its size: 8 bytes is a mimalloc size
 * class) and the CXL indexes that map their keys (header + live nodes, as
 * the allocator charges them). Sentinels and nodes waiting for reclamation
 * are not counted. */
struct resident_usage {
    bool ok;
    uint64_t tuples, index_bytes, record_bytes;
};

static struct resident_usage resident_of(const struct cxl_region *r, int host)
{
    struct resident_usage u = {0};
    struct cxl_index_usage iu;
    if (cxl_index_host_usage(r, host, &iu) < 0) return u;
    u.ok = true;
    u.tuples = iu.keys;
    u.index_bytes = iu.hwcc_bytes;
    u.record_bytes = iu.keys * sizeof(cxl_record);
    return u;
}

static double per_tuple(const struct resident_usage *u)
{
    return u->tuples ? (double)(u->index_bytes + u->record_bytes) / (double)u->tuples : 0.0;
}

static void resident_json(struct json_writer *w, const struct resident_usage *u)
{
    json_kv_bool(w, "resident_known", u->ok);
    json_kv_u64(w, "resident_tuples", u->tuples);
    json_kv_u64(w, "resident_index_bytes", u->index_bytes);
    json_kv_u64(w, "resident_record_bytes", u->record_bytes);
    json_kv_f64(w, "hwcc_bytes_per_tuple", per_tuple(u));
}

static void inspect_json(const struct cxl_region *r, const struct pod_config *c)
{
    const struct cxl_superblock *sb = r->sb;
    struct json_writer w;
    json_init(&w, stdout);
    json_obj_begin(&w);
    json_kv_str(&w, "path", c->region.path);
    json_kv_str(&w, "kind", pod_region_kind_name((enum pod_region_kind)sb->kind));
    json_kv_str(&w, "store_granularity", r->store_granularity);
    json_kv_u64(&w, "layout_version", sb->layout_version);
    json_kv_u64(&w, "generation", sb->generation);
    char digest[32];
    snprintf(digest, sizeof digest, "%016llx", (unsigned long long)sb->config_digest);
    json_kv_str(&w, "config_digest", digest);
    json_kv_u64(&w, "formatted_at_ns", sb->formatted_at_ns);
    json_kv_i64(&w, "formatter_pid", sb->formatter_pid);
    json_kv_i64(&w, "formatter_host", sb->formatter_host);
    json_kv_u64(&w, "region_size", sb->region_size);
    json_kv_u64(&w, "hwcc_budget", sb->hwcc_budget);
    json_kv_u64(&w, "hwcc_quota_per_host", sb->hwcc_quota);
    json_kv_u64(&w, "control_block_bytes", sb->control_size);
    json_kv_u64(&w, "nhosts", sb->nhosts);
    json_kv_u64(&w, "live_hosts", (uint64_t)cxl_live_hosts(r));
    json_kv_bool(&w, "simulate_noncoherent", c->region.simulate_noncoherent);
    json_kv_str(&w, "flush_impl", cxl_flush_impl_name());
    json_kv_str(&w, "writeback_impl", cxl_writeback_impl_name());
    json_key(&w, "layout");
    json_obj_begin(&w);
    json_kv_u64(&w, "control_off", sb->control_off);
    json_kv_u64(&w, "hwcc_off", sb->hwcc_off);
    json_kv_u64(&w, "hwcc_slice_size", sb->hwcc_slice_size);
    json_kv_u64(&w, "swcc_off", sb->swcc_off);
    json_kv_u64(&w, "swcc_slice_size", sb->swcc_slice_size);
    json_obj_end(&w);
    json_key(&w, "hosts");
    json_arr_begin(&w);
    struct resident_usage total = {.ok = true};
    for (uint32_t h = 0; h < sb->nhosts; h++) {
        const struct cxl_host_slot *s = &r->ctl->hosts[h];
        struct cxl_usage hw, sw;
        cxl_usage_get(r, (int)h, CXL_HWCC, &hw);
        cxl_usage_get(r, (int)h, CXL_SWCC, &sw);
        json_obj_begin(&w);
        json_kv_u64(&w, "host", h);
        json_kv_str(&w, "state", cxl_host_state_name(s->state));
        json_kv_bool(&w, "alive", cxl_host_alive(r, (int)h));
        json_kv_i64(&w, "pid", s->pid);
        json_kv_u64(&w, "heartbeat", s->heartbeat);
        json_kv_u64(&w, "hwcc_used", hw.used);
        json_kv_u64(&w, "hwcc_quota", hw.quota);
        json_kv_u64(&w, "hwcc_objects", hw.objects);
        json_kv_u64(&w, "hwcc_failures", hw.failures);
        json_kv_u64(&w, "swcc_used", sw.used);
        json_kv_u64(&w, "swcc_slice_size", sw.slice_size);
        json_kv_u64(&w, "swcc_objects", sw.objects);
        json_kv_u64(&w, "swcc_failures", sw.failures);
        struct resident_usage ru = resident_of(r, (int)h);
        resident_json(&w, &ru);
        total.ok &= ru.ok;
        total.tuples += ru.tuples;
        total.index_bytes += ru.index_bytes;
        total.record_bytes += ru.record_bytes;
        json_obj_end(&w);
    }
    json_arr_end(&w);
    json_key(&w, "resident");
    json_obj_begin(&w);
    resident_json(&w, &total);
    json_obj_end(&w);
    json_obj_end(&w);
    fputc('\n', stdout);
}

static void inspect_text(const struct cxl_region *r, const struct pod_config *c)
{
    const struct cxl_superblock *sb = r->sb;
    char b1[32], b2[32], b3[32], when[32];
    human_bytes(sb->region_size, b1, sizeof b1);
    printf("region      %s (%s, %s, store granularity %s)\n", c->region.path,
           pod_region_kind_name((enum pod_region_kind)sb->kind), b1, r->store_granularity);
    format_time(sb->formatted_at_ns, when, sizeof when);
    printf("generation  %llu, formatted %s by pid %d (%s)\n",
           (unsigned long long)sb->generation, when, sb->formatter_pid,
           sb->formatter_host >= 0 ? "a server" : "poddb-region");
    printf("layout      version %u, config digest %016llx\n", sb->layout_version,
           (unsigned long long)sb->config_digest);
    printf("coherence   flush %s, write-back %s%s\n", cxl_flush_impl_name(),
           cxl_writeback_impl_name(),
           c->region.simulate_noncoherent ? ", simulated non-coherent SWcc" : "");
    human_bytes(sb->hwcc_budget, b1, sizeof b1);
    human_bytes(sb->control_size, b2, sizeof b2);
    human_bytes(sb->hwcc_quota, b3, sizeof b3);
    printf("HWcc budget %s = control block %s + %u hosts x quota %s\n", b1, b2, sb->nhosts, b3);
    printf("\n  %-14s %14s %12s\n", "area", "offset", "size");
    human_bytes(4096, b1, sizeof b1);
    printf("  %-14s %#14llx %12s\n", "superblock", 0ull, b1);
    human_bytes(sb->control_size, b1, sizeof b1);
    printf("  %-14s %#14llx %12s  (HWcc)\n", "control block", (unsigned long long)sb->control_off,
           b1);
    human_bytes(sb->hwcc_slice_size, b1, sizeof b1);
    printf("  %-14s %#14llx %3u x %s\n", "HWcc slices", (unsigned long long)sb->hwcc_off,
           sb->nhosts, b1);
    human_bytes(sb->swcc_slice_size, b1, sizeof b1);
    printf("  %-14s %#14llx %3u x %s\n", "SWcc slices", (unsigned long long)sb->swcc_off,
           sb->nhosts, b1);
    printf("\n  %-4s %-9s %-5s %8s  %-26s %9s %6s  %-22s %9s\n", "host", "state", "alive", "pid",
           "HWcc used / quota", "objects", "fails", "SWcc used / slice", "objects");
    for (uint32_t h = 0; h < sb->nhosts; h++) {
        const struct cxl_host_slot *s = &r->ctl->hosts[h];
        struct cxl_usage hw, sw;
        cxl_usage_get(r, (int)h, CXL_HWCC, &hw);
        cxl_usage_get(r, (int)h, CXL_SWCC, &sw);
        char hwb[48], swb[48], x[16], y[16];
        human_bytes(hw.used, x, sizeof x);
        human_bytes(hw.quota, y, sizeof y);
        snprintf(hwb, sizeof hwb, "%s / %s (%.1f%%)", x, y,
                 hw.quota ? 100.0 * (double)hw.used / (double)hw.quota : 0.0);
        human_bytes(sw.used, x, sizeof x);
        human_bytes(sw.slice_size, y, sizeof y);
        snprintf(swb, sizeof swb, "%s / %s", x, y);
        printf("  %-4u %-9s %-5s %8d  %-26s %9llu %6llu  %-22s %9llu\n", h,
               cxl_host_state_name(s->state), cxl_host_alive(r, (int)h) ? "yes" : "no", s->pid,
               hwb, (unsigned long long)hw.objects, (unsigned long long)hw.failures, swb,
               (unsigned long long)sw.objects);
    }
    printf("\n  CXL-resident tuples: HWcc bytes = 8-byte record + share of the CXL indexes\n");
    printf("  %-5s %10s %12s %12s %10s\n", "host", "tuples", "index", "records", "B/tuple");
    struct resident_usage total = {.ok = true};
    for (uint32_t h = 0; h <= sb->nhosts; h++) {
        struct resident_usage ru = total;
        char name[16] = "total";
        if (h < sb->nhosts) {
            ru = resident_of(r, (int)h);
            snprintf(name, sizeof name, "%u", h);
            total.ok &= ru.ok;
            total.tuples += ru.tuples;
            total.index_bytes += ru.index_bytes;
            total.record_bytes += ru.record_bytes;
        }
        if (!ru.ok) {
            printf("  %-5s %s\n", name, "(the host's index directory looks damaged)");
            continue;
        }
        char ib[16], rb[16], pt[16];
        human_bytes(ru.index_bytes, ib, sizeof ib);
        human_bytes(ru.record_bytes, rb, sizeof rb);
        if (ru.tuples) snprintf(pt, sizeof pt, "%.1f", per_tuple(&ru));
        else snprintf(pt, sizeof pt, "-");
        printf("  %-5s %10llu %12s %12s %10s\n", name, (unsigned long long)ru.tuples, ib, rb, pt);
    }
}

/* The parsed configuration as tools/pod needs it. Hosts are numbered from 0;
 * "cpus" is the expanded CPU list (empty: the host is not pinned). */
static void config_json(const struct pod_config *c)
{
    struct json_writer w;
    json_init(&w, stdout);
    json_obj_begin(&w);
    json_kv_str(&w, "source", c->source);
    json_key(&w, "region");
    json_obj_begin(&w);
    json_kv_str(&w, "path", c->region.path);
    json_kv_str(&w, "kind", pod_region_kind_name(c->region.kind));
    json_kv_u64(&w, "size", c->region.size);
    json_kv_u64(&w, "hwcc_budget", c->region.hwcc_budget);
    json_kv_i64(&w, "numa_node", c->region.numa_node); /* -1: no binding */
    json_kv_bool(&w, "simulate_noncoherent", c->region.simulate_noncoherent);
    json_kv_bool(&w, "allow_overcommit", c->region.allow_overcommit);
    json_obj_end(&w);
    json_key(&w, "hosts");
    json_arr_begin(&w);
    for (int h = 0; h < c->nhosts; h++) {
        const struct pod_host_conf *hc = &c->hosts[h];
        json_obj_begin(&w);
        json_kv_i64(&w, "id", h);
        json_kv_i64(&w, "workers", hc->workers);
        json_kv_i64(&w, "loggers", hc->loggers);
        json_kv_str(&w, "cpu_list", hc->cpu_list);
        json_key(&w, "cpus");
        json_arr_begin(&w);
        for (int i = 0; i < hc->ncpus; i++) json_i64(&w, hc->cpus[i]);
        json_arr_end(&w);
        json_kv_str(&w, "socket", hc->socket_path);
        json_kv_str(&w, "log_dir", hc->log_dir);
        json_kv_i64(&w, "tcp_port", hc->tcp_port); /* 0: none */
        json_kv_str(&w, "tcp_token_file", hc->tcp_token_file); /* "": none */
        json_kv_bool(&w, "huge_pages", hc->huge_pages);
        json_obj_end(&w);
    }
    json_arr_end(&w);
    json_key(&w, "modules"); /* absolute paths, as the servers load them */
    json_arr_begin(&w);
    for (int i = 0; i < c->nmodules; i++) json_str(&w, c->modules[i]);
    json_arr_end(&w);
    if (c->mode == POD_MODE_DM) { /* absent with mode: cxl: "mode" defaults to "cxl" */
        json_kv_str(&w, "mode", pod_mode_name(c->mode));
        json_key(&w, "dm");
        json_obj_begin(&w);
        json_kv_str(&w, "pod", c->dm.pod);
        json_kv_str(&w, "provider", c->dm.provider);
        json_key(&w, "memnodes"); /* bootstrap sockets, absolute */
        json_arr_begin(&w);
        for (int i = 0; i < c->dm.nmemnodes; i++) json_str(&w, c->dm.memnodes[i]);
        json_arr_end(&w);
        json_kv_i64(&w, "pool_size", (int64_t)c->dm.pool_size); /* bytes */
        json_kv_str(&w, "protocol", pod_dm_protocol_name(c->dm.protocol));
        if (pod_dm_multiversion(c->dm.protocol)) json_kv_i64(&w, "versions", c->dm.versions);
        json_kv_i64(&w, "undo_log_size", (int64_t)c->dm.undo_log_size); /* bytes */
        json_kv_i64(&w, "replicas", c->dm.replicas);
        json_kv_i64(&w, "inflight", c->dm.inflight);
        json_kv_bool(&w, "nic_model", c->dm.nic_model.enabled);
        json_obj_end(&w);
    }
    json_obj_end(&w);
    fputc('\n', stdout);
}

/* mode: dm: the records are on the memory nodes, there is no region. */
static void memnodes_text(const struct pod_config *c)
{
    char pool[32];
    human_bytes(c->dm.pool_size, pool, sizeof pool);
    printf("mode    dm: pod %s, provider %s, pool %s per memory node\n", c->dm.pod,
           c->dm.provider, pool);
    char versions[32] = "";
    if (pod_dm_multiversion(c->dm.protocol))
        snprintf(versions, sizeof versions, " (%d versions a record)", c->dm.versions);
    printf("dm      protocol %s%s, %d backup%s of each memory node, %d transaction%s in flight "
           "per worker thread, NIC model %s\n",
           pod_dm_protocol_name(c->dm.protocol), versions, c->dm.replicas,
           c->dm.replicas == 1 ? "" : "s", c->dm.inflight, c->dm.inflight == 1 ? "" : "s",
           c->dm.nic_model.enabled ? "on" : "off");
    for (int i = 0; i < c->dm.nmemnodes; i++) printf("memnode %d  %s\n", i, c->dm.memnodes[i]);
}

static void config_text(const struct pod_config *c)
{
    char size[32], budget[32], node[16];
    human_bytes(c->region.size, size, sizeof size);
    human_bytes(c->region.hwcc_budget, budget, sizeof budget);
    if (c->region.numa_node < 0) snprintf(node, sizeof node, "none");
    else snprintf(node, sizeof node, "%d", c->region.numa_node);
    if (c->mode == POD_MODE_DM)
        memnodes_text(c);
    else
        printf("region  %s (%s, %s, HWcc budget %s, NUMA node %s%s%s)\n", c->region.path,
               pod_region_kind_name(c->region.kind), size, budget, node,
               c->region.simulate_noncoherent ? ", simulated non-coherent SWcc" : "",
               c->region.allow_overcommit ? ", may be larger than its file system" : "");
    printf("\n  %-4s %7s %7s  %-12s %-6s %-32s %s\n", "host", "workers", "loggers", "cpus", "tcp",
           "socket", "log_dir");
    for (int h = 0; h < c->nhosts; h++) {
        const struct pod_host_conf *hc = &c->hosts[h];
        char tcp[16];
        if (hc->tcp_port) snprintf(tcp, sizeof tcp, "%d", hc->tcp_port);
        else snprintf(tcp, sizeof tcp, "-");
        printf("  %-4d %7d %7d  %-12s %-6s %-32s %s\n", h, hc->workers, hc->loggers,
               hc->ncpus ? hc->cpu_list : "unpinned", tcp, hc->socket_path, hc->log_dir);
    }
    if (c->nmodules) printf("\n");
    for (int i = 0; i < c->nmodules; i++) printf("module  %s\n", c->modules[i]);
}

int main(int argc, char **argv)
{
    pod_log_set_role("poddb-region");
    static const struct option opts[] = {{"conf", required_argument, 0, 'c'},
                                         {"json", no_argument, 0, 'j'},
                                         {"force", no_argument, 0, 'f'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *conf = NULL;
    bool json = false, force = false;
    int o;
    while ((o = getopt_long(argc, argv, "c:jfh", opts, NULL)) != -1) {
        switch (o) {
        case 'c': conf = optarg; break;
        case 'j': json = true; break;
        case 'f': force = true; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "poddb-region: no command given\n\n%s", usage);
        return 2;
    }
    const char *cmd = argv[optind];
    if (strcmp(cmd, "help") == 0) {
        fputs(usage, stdout);
        return 0;
    }
    if (optind + 1 < argc) {
        fprintf(stderr, "poddb-region: unexpected argument '%s'\n", argv[optind + 1]);
        return 2;
    }
    if (strcmp(cmd, "format") && strcmp(cmd, "inspect") && strcmp(cmd, "destroy") &&
        strcmp(cmd, "config")) {
        fprintf(stderr, "poddb-region: unknown command '%s' (format, inspect, destroy, config)\n",
                cmd);
        return 2;
    }
    if (!conf) {
        fprintf(stderr, "poddb-region: --conf FILE is required\n");
        return 2;
    }
    struct pod_config *c = malloc(sizeof *c);
    pod_err err = {{0}};
    if (!c || pod_config_load(conf, c, &err)) {
        fprintf(stderr, "poddb-region: %s\n", c ? err.msg : "out of memory");
        free(c);
        return 1;
    }
    int rc = 0;
    if (strcmp(cmd, "config") && c->mode == POD_MODE_DM) {
        fprintf(stderr,
                "poddb-region: %s has mode: dm: its records live on the memory nodes, there is "
                "no region to %s\n",
                conf, cmd);
        rc = 1;
    } else if (strcmp(cmd, "config") == 0) {
        if (json) config_json(c);
        else config_text(c);
    } else if (strcmp(cmd, "destroy") == 0) {
        if (cxl_region_destroy(c, force, &err)) {
            fprintf(stderr, "poddb-region: %s\n", err.msg);
            rc = 1;
        } else {
            printf("destroyed region %s\n", c->region.path);
        }
    } else {
        unsigned flags = strcmp(cmd, "format") == 0 ? CXL_OPEN_FORMAT | (force ? CXL_OPEN_FORCE : 0)
                                                   : 0;
        struct cxl_region *r = cxl_region_open(c, -1, flags, &err);
        if (!r) {
            fprintf(stderr, "poddb-region: %s\n", err.msg);
            rc = 1;
        } else {
            if (strcmp(cmd, "format") == 0)
                printf("formatted region %s: generation %llu\n", c->region.path,
                       (unsigned long long)r->sb->generation);
            else if (json)
                inspect_json(r, c);
            else
                inspect_text(r, c);
            cxl_region_close(r);
        }
    }
    free(c);
    return rc;
}
