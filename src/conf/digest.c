/* pod_config_digest: FNV-1a over a canonical serialization of the parsed
 * configuration, finished with a 64-bit avalanche mixer.
 *
 * Every field is written explicitly (never struct bytes: padding and unused
 * array tails would leak in), each preceded by its name so that two different
 * layouts cannot serialize to the same bytes. Integers are written as 8 bytes
 * little-endian, strings as length + bytes, the double as its IEEE-754 bits.
 * `source` and `cpu_list` (the text as written) are left out: "0-1" and "0,1"
 * are the same configuration. So are region.allow_overcommit and the server
 * section: checks and limits of each server, not properties of the pod.
 * The mode and the dm section enter only with mode: dm, so that a cxl
 * config keeps the digest it had before there were modes. */
#include <stdio.h>
#include <string.h>

#include "conf/config.h"
#include "conf/section.h"

#define FNV64_OFFSET 0xcbf29ce484222325ULL
#define FNV64_PRIME 0x100000001b3ULL

/* Bump when the serialization changes, so old and new builds never agree by accident. */
#define DIGEST_FORMAT "poddb-config-digest-v5"

static void put_bytes(uint64_t *h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        *h ^= p[i];
        *h *= FNV64_PRIME;
    }
}

static void put_u64(uint64_t *h, uint64_t v)
{
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(v >> (8 * i));
    put_bytes(h, le, sizeof le);
}

static void put_i64(uint64_t *h, int64_t v) { put_u64(h, (uint64_t)v); }

/* Length-prefixed, so ("ab","c") and ("a","bc") differ. */
static void put_str(uint64_t *h, const char *s, size_t max)
{
    size_t n = strnlen(s, max);
    put_u64(h, n);
    put_bytes(h, s, n);
}

static void put_field(uint64_t *h, const char *name) { put_str(h, name, 64); }

static void put_double(uint64_t *h, double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    put_u64(h, bits);
}

/* The splitmix64 finalizer: FNV-1a alone mixes the last bytes poorly. Not
 * pod_mix64 (util/mix.h, another finalizer): a config's digest must not change. */
static uint64_t avalanche(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static void put_host(uint64_t *h, const struct pod_host_conf *host)
{
    int ncpus = host->ncpus;
    if (ncpus < 0) ncpus = 0;
    if (ncpus > (int)(sizeof host->cpus / sizeof host->cpus[0]))
        ncpus = (int)(sizeof host->cpus / sizeof host->cpus[0]);

    put_field(h, "workers");
    put_i64(h, host->workers);
    put_field(h, "loggers");
    put_i64(h, host->loggers);
    put_field(h, "cpus");
    put_i64(h, ncpus);
    for (int i = 0; i < ncpus; i++) put_i64(h, host->cpus[i]);
    put_field(h, "socket");
    put_str(h, host->socket_path, sizeof host->socket_path);
    put_field(h, "log_dir");
    put_str(h, host->log_dir, sizeof host->log_dir);
    put_field(h, "tcp_port");
    put_i64(h, host->tcp_port);
    if (host->huge_pages) { /* absent when off: older configs keep their digest */
        put_field(h, "huge_pages");
        put_i64(h, 1);
    }
}

void conf_digest_u64(uint64_t *h, uint64_t v) { put_u64(h, v); }
void conf_digest_double(uint64_t *h, double d) { put_double(h, d); }

/* Each workload section: its name, whether the file has it, and then what
 * its digest function feeds (a section the file lacks has no values). */
static void put_workloads(uint64_t *h, const struct pod_config *c)
{
    for (int i = 0; pod_workload_sections[i]; i++) {
        const struct conf_section *s = pod_workload_sections[i];
        char field[64];
        snprintf(field, sizeof field, "workloads.%s", s->name);
        put_field(h, field);
        put_u64(h, c->has_section[i]);
        if (c->has_section[i]) s->digest(c->sections[i].bytes, h);
    }
}

/* The mode and where its memory nodes are (not written for mode: cxl).
 * dm.pool_size is left out: the pool is the memory node's business (tools/pod
 * starts it with that size), and two compute nodes that disagree about it
 * still reach the same records. */
static void put_dm(uint64_t *h, const struct pod_config *c)
{
    int n = c->dm.nmemnodes < 0 ? 0 : c->dm.nmemnodes > POD_MAX_MEMNODES ? POD_MAX_MEMNODES
                                                                         : c->dm.nmemnodes;
    put_field(h, "mode");
    put_i64(h, (int64_t)c->mode);
    put_field(h, "dm.pod");
    put_str(h, c->dm.pod, sizeof c->dm.pod);
    put_field(h, "dm.provider");
    put_str(h, c->dm.provider, sizeof c->dm.provider);
    put_field(h, "dm.memnodes");
    put_i64(h, n);
    for (int i = 0; i < n; i++) put_str(h, c->dm.memnodes[i], sizeof c->dm.memnodes[i]);
    put_field(h, "dm.protocol");
    put_i64(h, (int64_t)c->dm.protocol);
    put_field(h, "dm.replicas");
    put_i64(h, c->dm.replicas);
    if (pod_dm_multiversion(c->dm.protocol)) { /* the records' layout */
        put_field(h, "dm.versions");
        put_i64(h, c->dm.versions);
    }
}

uint64_t pod_config_digest(const struct pod_config *c)
{
    uint64_t h = FNV64_OFFSET;
    put_field(&h, DIGEST_FORMAT);

    put_field(&h, "region.path");
    put_str(&h, c->region.path, sizeof c->region.path);
    put_field(&h, "region.kind");
    put_i64(&h, (int64_t)c->region.kind);
    put_field(&h, "region.size");
    put_u64(&h, c->region.size);
    put_field(&h, "region.hwcc_budget");
    put_u64(&h, c->region.hwcc_budget);
    put_field(&h, "region.numa_node");
    put_i64(&h, c->region.numa_node);
    put_field(&h, "region.simulate_noncoherent");
    put_u64(&h, c->region.simulate_noncoherent ? 1 : 0);

    int nhosts = c->nhosts;
    if (nhosts < 0) nhosts = 0;
    if (nhosts > POD_MAX_HOSTS) nhosts = POD_MAX_HOSTS;
    put_field(&h, "hosts");
    put_i64(&h, nhosts);
    for (int i = 0; i < nhosts; i++) put_host(&h, &c->hosts[i]);

    put_field(&h, "engine.epoch_ms");
    put_i64(&h, c->engine.epoch_ms);
    put_field(&h, "engine.moveout_threshold");
    put_double(&h, c->engine.moveout_threshold);
    put_field(&h, "engine.moveback_rate");
    put_u64(&h, c->engine.moveback_rate);
    put_field(&h, "engine.coherence");
    put_i64(&h, (int64_t)c->engine.coherence);
    put_field(&h, "engine.phantom_protection");
    put_u64(&h, c->engine.phantom_protection ? 1 : 0);
    put_field(&h, "engine.checkpoint_after");
    put_u64(&h, c->engine.checkpoint_after);
    put_field(&h, "engine.reply_before_durable");
    put_u64(&h, c->engine.reply_before_durable ? 1 : 0);
    put_field(&h, "engine.eviction");
    put_i64(&h, (int64_t)c->engine.eviction);
    put_field(&h, "engine.shortcut_pointers");
    put_u64(&h, c->engine.shortcut_pointers ? 1 : 0);
    put_field(&h, "engine.dirty_tracking");
    put_u64(&h, c->engine.dirty_tracking ? 1 : 0);
    put_field(&h, "engine.locking");
    put_u64(&h, c->engine.locking ? 1 : 0);
    put_field(&h, "engine.max_retries");
    put_u64(&h, c->engine.max_retries);
    put_field(&h, "engine.retry_timeout_ms");
    put_u64(&h, c->engine.retry_timeout_ms);
    put_field(&h, "engine.slow_call_ms");
    put_u64(&h, c->engine.slow_call_ms);
    put_field(&h, "engine.durable_wait_ms");
    put_u64(&h, c->engine.durable_wait_ms);

    int ntables = c->ntables < 0 ? 0 : c->ntables > POD_MAX_KV_TABLES ? POD_MAX_KV_TABLES : c->ntables;
    put_field(&h, "tables");
    put_i64(&h, ntables);
    for (int i = 0; i < ntables; i++) {
        put_str(&h, c->tables[i].name, sizeof c->tables[i].name);
        put_u64(&h, c->tables[i].key_size);
        put_u64(&h, c->tables[i].value_size);
        put_u64(&h, c->tables[i].partitions);
    }
    int nmodules = c->nmodules < 0 ? 0 : c->nmodules > POD_MAX_MODULES ? POD_MAX_MODULES : c->nmodules;
    put_field(&h, "modules");
    put_i64(&h, nmodules);
    for (int i = 0; i < nmodules; i++) put_str(&h, c->modules[i], sizeof c->modules[i]);

    put_workloads(&h, c);
    if (c->mode != POD_MODE_CXL) put_dm(&h, c);
    return avalanche(h);
}
