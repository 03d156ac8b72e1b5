/* The strict YAML configuration loader (config.h; docs/configuration.md).
 *
 * The text becomes a ynode tree (yaml_tree.c), and the tree is checked against
 * a table of keys per section: every key must be known and appear once, every
 * required key must be present, and every value is converted by a getter that
 * knows its type and range. All messages are "FILE:LINE:COL: KEY: problem
 * (expectation)", KEY being the dotted path of the key ("hosts[1].workers"). */
#include "conf/config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "conf/section.h"
#include "conf/values.h"
#include "conf/yaml_tree.h"

#define KIB (1ULL << 10)
#define MIB (1ULL << 20)
#define GIB (1ULL << 30)
#define TIB (1ULL << 40)
#define REGION_MIN_SIZE (128 * MIB)
#define REGION_MAX_SIZE (64 * TIB)
/* dm.pool_size: poddb-memnode's least pool (DM_POOL_MIN, src/dm/pool.h), and
 * less than the 2^48 bytes a location's offset can name. */
#define DM_POOL_MIN_SIZE (1 * MIB)
#define DM_POOL_MAX_SIZE (128 * TIB)
#define DM_POOL_DEFAULT_SIZE (256 * MIB)
#define REGION_PAGE 4096
#define HWCC_MIN_BUDGET (1 * MIB)
#define SERVER_MIN_BUFFERED (1 * MIB)
#define SERVER_MAX_BUFFERED (64 * TIB)
#define SERVER_DEFAULT_CONN_BUFFERED (64 * MIB)
#define SERVER_DEFAULT_BUFFERED (1024 * MIB)
#define SERVER_MAX_CALLS 65536
#define MAX_NUMA_NODE 1023
#define MAX_EPOCH_MS 10000
#define MAX_CONFIG_FILE_BYTES (1 << 20)
#define HOST_PLACEHOLDER "{host}"

/* A Unix socket path must fit sockaddr_un.sun_path with its NUL. */
#define MAX_SOCKET_PATH_LEN (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

struct conf_reader {
    const char *name; /* file name for messages */
    pod_err *err;
};

/* ---- messages ------------------------------------------------------------------ */

/* Sets "NAME:LINE:COL: KEY: what" (no "KEY: " when key is NULL); returns -1. */
static int vfail(const struct conf_reader *c, unsigned line, unsigned col, const char *key,
                 const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));
static int vfail(const struct conf_reader *c, unsigned line, unsigned col, const char *key,
                 const char *fmt, va_list ap)
{
    char what[sizeof c->err->msg];
    vsnprintf(what, sizeof what, fmt, ap);
    if (key) pod_err_set(c->err, "%s:%u:%u: %s: %s", c->name, line, col, key, what);
    else pod_err_set(c->err, "%s:%u:%u: %s", c->name, line, col, what);
    return -1;
}

static int fail(const struct conf_reader *c, unsigned line, unsigned col, const char *key,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int fail(const struct conf_reader *c, unsigned line, unsigned col, const char *key,
                const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(c, line, col, key, fmt, ap);
    va_end(ap);
    return -1;
}

#define fail_node(c, node, key, ...) fail((c), (node)->line, (node)->col, (key), __VA_ARGS__)

/* A scalar as written, for messages: at most ~40 bytes, control bytes as '?'. */
struct shown {
    char s[48];
};

static struct shown show(const struct ynode *n)
{
    struct shown out;
    size_t limit = 40, len = n->len < limit ? n->len : limit;
    /* Do not cut a UTF-8 sequence in half. */
    while (len < n->len && len > 0 && ((unsigned char)n->text[len] & 0xC0) == 0x80) len--;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)n->text[i];
        out.s[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    strcpy(out.s + len, len < n->len ? "..." : "");
    return out;
}

static const char *kind_phrase(const struct ynode *n)
{
    switch (n->kind) {
    case YN_MAPPING: return "a mapping";
    case YN_SEQUENCE: return "a sequence";
    case YN_SCALAR: break;
    }
    return "a scalar";
}

/* YAML's null: an empty plain value, ~ or null. */
static bool is_null(const struct ynode *n)
{
    if (n->kind != YN_SCALAR || !n->plain) return false;
    return n->len == 0 || strcmp(n->text, "~") == 0 || strcmp(n->text, "null") == 0 ||
           strcmp(n->text, "Null") == 0 || strcmp(n->text, "NULL") == 0;
}

/* "is a sequence", "has no value", ... for "KEY: <this> (expected ...)". */
static const char *node_problem(const struct ynode *n)
{
    if (is_null(n)) return "has no value";
    switch (n->kind) {
    case YN_MAPPING: return "is a mapping";
    case YN_SEQUENCE: return "is a sequence";
    case YN_SCALAR: break;
    }
    return "is a scalar";
}

/* ---- keys of a mapping ------------------------------------------------------------ */

static const char *key_list(const struct conf_key *specs, int n, char *buf, size_t bufsz)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used < bufsz; i++)
        used += (size_t)snprintf(buf + used, bufsz - used, "%s%s", i ? ", " : "", specs[i].key);
    return buf;
}

static void join_path(char *buf, size_t bufsz, const char *prefix, const char *key)
{
    if (prefix) snprintf(buf, bufsz, "%s.%s", prefix, key);
    else snprintf(buf, bufsz, "%s", key);
}

static void init_items(struct conf_item *items, const struct conf_key *specs, int n,
                       const char *prefix)
{
    for (int i = 0; i < n; i++) {
        items[i] = (struct conf_item){.spec = &specs[i]};
        join_path(items[i].path, sizeof items[i].path, prefix, specs[i].key);
    }
}

static int find_key(const struct conf_key *specs, int n, const struct ynode *key)
{
    for (int i = 0; i < n; i++)
        if (strlen(specs[i].key) == key->len && memcmp(specs[i].key, key->text, key->len) == 0)
            return i;
    return -1;
}

/* Fills items[] from `node`, which must be a mapping whose keys are all in
 * specs[] and appear once. `prefix` names the mapping (NULL: the top level). */
static int read_mapping(const struct conf_reader *c, const struct ynode *node, const char *prefix,
                        const struct conf_key *specs, int n, struct conf_item *items)
{
    char keys[256];
    init_items(items, specs, n, prefix);
    if (node->kind != YN_MAPPING || is_null(node))
        return fail_node(c, node, prefix, "%s (expected a mapping with keys: %s)",
                         node_problem(node),
                         key_list(specs, n, keys, sizeof keys));
    for (size_t p = 0; p < node->n; p++) {
        const struct ynode *key = node->pairs[p].key;
        if (key->kind != YN_SCALAR)
            return fail_node(c, key, prefix, "a key is %s (expected a name, one of: %s)",
                             kind_phrase(key), key_list(specs, n, keys, sizeof keys));
        int i = find_key(specs, n, key);
        if (i < 0) {
            char path[128];
            join_path(path, sizeof path, prefix, key->len ? show(key).s : "''");
            return fail_node(c, key, path, "unknown key (expected one of: %s)",
                             key_list(specs, n, keys, sizeof keys));
        }
        if (items[i].key)
            return fail_node(c, key, items[i].path,
                             "duplicate key (first at line %u; a key may appear once)",
                             items[i].key->line);
        items[i].key = key;
        items[i].value = node->pairs[p].value;
    }
    return 0;
}

/* Every required key of items[] must be present; `where` is the mapping. */
static int require_keys(const struct conf_reader *c, const struct ynode *where,
                        const struct conf_item *items, int n)
{
    for (int i = 0; i < n; i++)
        if (items[i].spec->required && !items[i].key)
            return fail_node(c, where, items[i].path, "missing required key (expected %s)",
                             items[i].spec->expect);
    return 0;
}

/* ---- typed getters: each converts items->value or fails with a message ------------ */

/* The value must be a scalar with a value and without NUL bytes. */
static int want_scalar(const struct conf_reader *c, const struct conf_item *it)
{
    const struct ynode *v = it->value;
    if (v->kind != YN_SCALAR || is_null(v))
        return fail_node(c, v, it->path, "%s (expected %s)", node_problem(v), it->spec->expect);
    if (strlen(v->text) != v->len)
        return fail_node(c, v, it->path, "contains a NUL character (expected %s)",
                         it->spec->expect);
    return 0;
}

/* Numbers and booleans must be plain: "4" in quotes is a string in YAML. */
static int want_plain_scalar(const struct conf_reader *c, const struct conf_item *it)
{
    if (want_scalar(c, it) < 0) return -1;
    if (!it->value->plain)
        return fail_node(c, it->value, it->path, "'%s' is quoted (expected %s, without quotes)",
                         show(it->value).s, it->spec->expect);
    return 0;
}

/* A 64-bit integer in min..max. */
static int get_i64(const struct conf_reader *c, const struct conf_item *it, int64_t min,
                   int64_t max, int64_t *out)
{
    if (want_plain_scalar(c, it) < 0) return -1;
    const struct ynode *v = it->value;
    int64_t n = 0;
    switch (conf_parse_int(v->text, &n)) {
    case CONF_INT_OK:
        break;
    case CONF_INT_SYNTAX:
        return fail_node(c, v, it->path, "'%s' is not an integer (expected %s)", show(v).s,
                         it->spec->expect);
    case CONF_INT_LEADING_ZERO:
        return fail_node(c, v, it->path,
                         "'%s' has a leading zero (expected %s, written without leading zeros)",
                         show(v).s, it->spec->expect);
    case CONF_INT_OVERFLOW:
        return fail_node(c, v, it->path, "%s is out of range (%lld..%lld)", show(v).s,
                         (long long)min, (long long)max);
    }
    if (n < min || n > max)
        return fail_node(c, v, it->path, "%s is out of range (%lld..%lld)", show(v).s,
                         (long long)min, (long long)max);
    *out = n;
    return 0;
}

static int get_int(const struct conf_reader *c, const struct conf_item *it, int min, int max,
                   int *out)
{
    int64_t n;
    if (get_i64(c, it, min, max, &n) < 0) return -1;
    *out = (int)n;
    return 0;
}

static int get_u32(const struct conf_reader *c, const struct conf_item *it, int min, int max,
                   uint32_t *out)
{
    int n;
    if (get_int(c, it, min, max, &n) < 0) return -1;
    *out = (uint32_t)n;
    return 0;
}

static int get_bool(const struct conf_reader *c, const struct conf_item *it, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no", "off"};
    if (want_plain_scalar(c, it) < 0) return -1;
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcmp(it->value->text, yes[i]) == 0 || strcmp(it->value->text, no[i]) == 0) {
            *out = strcmp(it->value->text, yes[i]) == 0;
            return 0;
        }
    }
    return fail_node(c, it->value, it->path, "'%s' is not a boolean (expected %s)",
                     show(it->value).s, it->spec->expect);
}

static int get_enum(const struct conf_reader *c, const struct conf_item *it,
                    const char *const *names, int n, int *out)
{
    if (want_scalar(c, it) < 0) return -1;
    for (int i = 0; i < n; i++)
        if (strcmp(it->value->text, names[i]) == 0) {
            *out = i;
            return 0;
        }
    return fail_node(c, it->value, it->path, "unknown value '%s' (expected %s)",
                     show(it->value).s, it->spec->expect);
}

static int get_size(const struct conf_reader *c, const struct conf_item *it, uint64_t *out)
{
    if (want_scalar(c, it) < 0) return -1;
    const struct ynode *v = it->value;
    switch (conf_parse_size(v->text, out)) {
    case CONF_SIZE_OK:
        return 0;
    case CONF_SIZE_NEGATIVE:
        return fail_node(c, v, it->path, "'%s' is negative (expected %s)", show(v).s,
                         it->spec->expect);
    case CONF_SIZE_TOO_LARGE:
        return fail_node(c, v, it->path, "'%s' is too large (expected %s)", show(v).s,
                         it->spec->expect);
    case CONF_SIZE_NOT_WHOLE:
        return fail_node(c, v, it->path, "'%s' is not a whole number of bytes (expected %s)",
                         show(v).s, it->spec->expect);
    case CONF_SIZE_SYNTAX:
        break;
    }
    return fail_node(c, v, it->path,
                     "'%s' is not a byte size (expected a number of bytes, or a number with a "
                     "unit: %s)",
                     show(v).s, conf_size_units);
}

static int get_size_in_range(const struct conf_reader *c, const struct conf_item *it, uint64_t min,
                             uint64_t max, uint64_t *out)
{
    char lo[32], hi[32];
    if (get_size(c, it, out) < 0) return -1;
    if (*out < min || *out > max)
        return fail_node(c, it->value, it->path, "%s (%llu bytes) is out of range (%s..%s)",
                         show(it->value).s, (unsigned long long)*out,
                         conf_format_size(min, lo, sizeof lo),
                         conf_format_size(max, hi, sizeof hi));
    return 0;
}

/* An integer -1..1023, or "none" (= -1). */
static int get_numa_node(const struct conf_reader *c, const struct conf_item *it, int *out)
{
    if (want_scalar(c, it) < 0) return -1;
    if (strcmp(it->value->text, "none") == 0) {
        *out = -1;
        return 0;
    }
    return get_int(c, it, -1, MAX_NUMA_NODE, out);
}

/* A number in (0, 1]. */
static int get_fraction(const struct conf_reader *c, const struct conf_item *it, double *out)
{
    if (want_plain_scalar(c, it) < 0) return -1;
    if (conf_parse_fraction(it->value->text, out) < 0)
        return fail_node(c, it->value, it->path, "'%s' is not a decimal number (expected %s)",
                         show(it->value).s, it->spec->expect);
    if (!(*out > 0.0 && *out <= 1.0))
        return fail_node(c, it->value, it->path, "%s is out of range (expected %s)",
                         show(it->value).s, it->spec->expect);
    return 0;
}

/* A Zipfian skew: a decimal number in [0, 1). */
static int get_theta(const struct conf_reader *c, const struct conf_item *it, double *out)
{
    if (want_plain_scalar(c, it) < 0) return -1;
    if (conf_parse_fraction(it->value->text, out) < 0)
        return fail_node(c, it->value, it->path, "'%s' is not a decimal number (expected %s)",
                         show(it->value).s, it->spec->expect);
    if (!(*out >= 0.0 && *out < 1.0))
        return fail_node(c, it->value, it->path, "%s is out of range (expected %s)",
                         show(it->value).s, it->spec->expect);
    return 0;
}

/* Copies the path with every "{host}" replaced by host_index (or, when
 * host_index < 0, refuses "{host}"). Any other '{' in a host path is most
 * likely a misspelt placeholder, so it is refused too. */
static int get_path(const struct conf_reader *c, const struct conf_item *it, int host_index,
                    size_t max_len, const char *limit_reason, char *out, size_t outsz)
{
    if (want_scalar(c, it) < 0) return -1;
    const struct ynode *v = it->value;
    const char *s = v->text;
    size_t len = 0;
    for (size_t i = 0; i < v->len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return fail_node(c, v, it->path, "'%s' contains a control character (expected %s)",
                             show(v).s, it->spec->expect);
    for (const char *p = s; *p;) {
        char piece[16];
        const char *add = piece;
        size_t addlen;
        if (strncmp(p, HOST_PLACEHOLDER, strlen(HOST_PLACEHOLDER)) == 0) {
            if (host_index < 0)
                return fail_node(c, v, it->path,
                                 "{host} is only replaced in a host's socket, log_dir and "
                                 "tcp_token_file (expected %s)", it->spec->expect);
            addlen = (size_t)snprintf(piece, sizeof piece, "%d", host_index);
            p += strlen(HOST_PLACEHOLDER);
        } else if (*p == '{' && host_index >= 0) {
            return fail_node(c, v, it->path, "unknown placeholder in '%s' (expected %s)",
                             show(v).s, it->spec->expect);
        } else {
            add = p++;
            addlen = 1;
        }
        if (len + addlen < outsz) memcpy(out + len, add, addlen);
        len += addlen;
    }
    if (len == 0) return fail_node(c, v, it->path, "is empty (expected %s)", it->spec->expect);
    if (len > max_len)
        return fail_node(c, v, it->path, "is %zu bytes long (expected at most %zu: %s)", len,
                         max_len, limit_reason);
    out[len] = '\0';
    return 0;
}

static int get_cpu_list(const struct conf_reader *c, const struct conf_item *it,
                        struct pod_host_conf *h)
{
    const int max_cpus = (int)(sizeof h->cpus / sizeof h->cpus[0]);
    if (want_scalar(c, it) < 0) return -1;
    const struct ynode *v = it->value;
    if (v->len >= sizeof h->cpu_list)
        return fail_node(c, v, it->path, "is %zu characters long (expected at most %zu)", v->len,
                         sizeof h->cpu_list - 1);
    const char *why = "";
    int n = conf_parse_cpu_list(v->text, h->cpus, max_cpus, &why);
    if (n < 0)
        return fail_node(c, v, it->path, "'%s' is not a valid CPU list: %s (expected %s)",
                         show(v).s, why, it->spec->expect);
    h->ncpus = n;
    memcpy(h->cpu_list, v->text, v->len + 1);
    return 0;
}

/* A name of 1..POD_NAME_MAX-1 letters, digits and characters of punct. */
static int get_name(const struct conf_reader *c, const struct conf_item *it, const char *punct,
                    char out[POD_NAME_MAX])
{
    if (want_scalar(c, it) < 0) return -1;
    const struct ynode *v = it->value;
    bool ok = v->len > 0 && v->len < POD_NAME_MAX;
    for (size_t i = 0; ok && i < v->len; i++) {
        char ch = v->text[i];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
             strchr(punct, ch) != NULL;
    }
    if (!ok)
        return fail_node(c, v, it->path, "'%s' is not a valid name (expected %s)", show(v).s,
                         it->spec->expect);
    memcpy(out, v->text, v->len + 1);
    return 0;
}

/* ---- sections ------------------------------------------------------------------ */

static const char *const region_kind_names[] = {
    [POD_REGION_SHM] = "shm", [POD_REGION_DEVDAX] = "devdax", [POD_REGION_FSDAX] = "fsdax",
};
static const char *const coherence_names[] = {
    [POD_COH_FULL] = "full",
    [POD_COH_NON_TEMPORAL] = "non-temporal",
    [POD_COH_NO_SHARED_READER] = "no-shared-reader",
    [POD_COH_HWCC_ONLY] = "hwcc-only",
};
static const char *const eviction_names[] = {
    [POD_EVICT_CLOCK] = "clock",
    [POD_EVICT_RANDOM] = "random",
};
static const char *const mode_names[] = {[POD_MODE_CXL] = "cxl", [POD_MODE_DM] = "dm"};
/* The libfabric providers a compute node may name (src/dm/fabric.h). */
static const char *const provider_names[] = {"shm", "tcp;ofi_rxm", "verbs;ofi_rxm"};
#define NEVICTION ((int)(sizeof eviction_names / sizeof eviction_names[0]))
#define NMODES ((int)(sizeof mode_names / sizeof mode_names[0]))
#define NPROVIDERS ((int)(sizeof provider_names / sizeof provider_names[0]))
#define NKINDS ((int)(sizeof region_kind_names / sizeof region_kind_names[0]))
#define NCOHERENCE ((int)(sizeof coherence_names / sizeof coherence_names[0]))

/* region is required with mode: cxl and dm with mode: dm (load_config). */
enum { TOP_REGION, TOP_HOSTS, TOP_HOST_DEFAULTS, TOP_ENGINE, TOP_SERVER, TOP_TABLES,
       TOP_MODULES, TOP_WORKLOADS, TOP_MODE, TOP_DM, TOP_NKEYS };
static const struct conf_key top_keys[TOP_NKEYS] = {
    [TOP_REGION] = {"region", false, "a mapping describing the shared memory region"},
    [TOP_HOSTS] = {"hosts", true, "a sequence of 1..16 host entries"},
    [TOP_HOST_DEFAULTS] = {"host_defaults", false, "a mapping of keys shared by all hosts"},
    [TOP_ENGINE] = {"engine", false, "a mapping of engine settings"},
    [TOP_SERVER] = {"server", false, "a mapping of the server's limits per client"},
    [TOP_TABLES] = {"tables", false, "a sequence of kv table entries (name, key_size, "
                                     "value_size, partitions)"},
    [TOP_MODULES] = {"modules", false, "a sequence of paths of shared objects with stored "
                                       "procedures"},
    [TOP_WORKLOADS] = {"workloads", false, "a mapping of benchmark workloads (tpcc, ycsb, "
                                           "smallbank)"},
    [TOP_MODE] = {"mode", false, "cxl (the default: a shared CXL region) or dm (memory nodes)"},
    [TOP_DM] = {"dm", false, "a mapping with the memory nodes' pod, provider and memnodes, "
                             "required with mode: dm"},
};

enum {
    DM_POD,
    DM_PROVIDER,
    DM_MEMNODES,
    DM_POOL_SIZE,
    DM_PROTOCOL,
    DM_UNDO_LOG_SIZE,
    DM_REPLICAS,
    DM_INFLIGHT,
    DM_NIC_MODEL,
    DM_VERSIONS,
    DM_NKEYS
};
static const struct conf_key dm_keys[DM_NKEYS] = {
    [DM_POD] = {"pod", true, "the pod name the memory nodes serve (poddb-memnode --pod): "
                             "1..63 letters, digits, '_', '.' or '-'"},
    [DM_PROVIDER] = {"provider", false, "one of: shm, tcp;ofi_rxm, verbs;ofi_rxm (the default "
                                        "is shm; verbs needs an RDMA NIC)"},
    [DM_MEMNODES] = {"memnodes", true, "a sequence of 1..16 memory nodes' bootstrap socket "
                                       "paths (poddb-memnode --socket)"},
    [DM_POOL_SIZE] = {"pool_size", false, "a byte size in 1MiB..128TiB: each memory node's pool "
                                          "(poddb-memnode --pool-size; default 256MiB)"},
    [DM_PROTOCOL] = {"protocol", false, "ford (the default: optimistic reads, undo logs, a dead "
                                        "compute node recovered), rs-2pl, motor (ford over "
                                        "records of several versions, snapshot reads) or lotus "
                                        "(motor's records, locks in the compute nodes' tables)"},
    [DM_UNDO_LOG_SIZE] = {"undo_log_size", false, "a byte size in 64KiB..1GiB: each compute "
                                                  "node's undo log under ford, motor and lotus "
                                                  "(default 1MiB)"},
    [DM_REPLICAS] = {"replicas", false, "an integer in 0..3: the backups of each memory node's "
                                        "records on the next memory nodes, at most one fewer "
                                        "than dm.memnodes lists, ford only (default 1 under "
                                        "ford with 2 or more memory nodes, else 0)"},
    [DM_INFLIGHT] = {"inflight", false, "an integer in 1..64: the transactions each worker "
                                        "thread of a compute node keeps in flight (lanes; "
                                        "workers times inflight at most 64; default 1)"},
    [DM_NIC_MODEL] = {"nic_model", false, "a mapping with enabled (required) and rtt_us, "
                                          "atomic_mops, rw_mops, gbps: a model of an RDMA NIC "
                                          "(docs/dm.md)"},
    [DM_VERSIONS] = {"versions", false, "an integer in 2..16: the versions each record keeps "
                                        "under motor and lotus (default 2)"},
};
static const char *const dm_protocol_names[] = {
    [POD_DM_FORD] = "ford", [POD_DM_RS_2PL] = "rs-2pl", [POD_DM_MOTOR] = "motor",
    [POD_DM_LOTUS] = "lotus"};

const char *pod_dm_protocol_name(enum pod_dm_protocol p)
{
    return (unsigned)p < POD_DM_NPROTOCOLS ? dm_protocol_names[p] : "?";
}

/* dm.nic_model: the defaults are the DM papers' RNICs (docs/dm.md). */
enum { NIC_ENABLED, NIC_RTT_US, NIC_ATOMIC_MOPS, NIC_RW_MOPS, NIC_GBPS, NIC_NKEYS };
static const struct conf_key nic_keys[NIC_NKEYS] = {
    [NIC_ENABLED] = {"enabled", true, "true, false, yes, no, on or off"},
    [NIC_RTT_US] = {"rtt_us", false, "a number of microseconds in 0..1000000, like 2.5 (a round "
                                     "trip; default 2.5)"},
    [NIC_ATOMIC_MOPS] = {"atomic_mops", false, "a rate above 0 and at most 1000000, like 2.5 "
                                               "(CAS and FAA per memory node, millions per second; "
                                               "default 2.5)"},
    [NIC_RW_MOPS] = {"rw_mops", false, "a rate above 0 and at most 1000000, like 35 (READ and "
                                       "WRITE per memory node, millions per second; default 35)"},
    [NIC_GBPS] = {"gbps", false, "a rate above 0 and at most 1000000, like 100 (READ and WRITE "
                                 "payload per memory node, gigabits per second; default 100)"},
};
#define NIC_DEFAULT_RTT_US 2.5
#define NIC_DEFAULT_ATOMIC_MOPS 2.5
#define NIC_DEFAULT_RW_MOPS 35.0
#define NIC_DEFAULT_GBPS 100.0
#define NIC_MAX 1000000.0

enum { T_NAME, T_KEY_SIZE, T_VALUE_SIZE, T_PARTITIONS, T_NKEYS };
static const struct conf_key table_keys[T_NKEYS] = {
    [T_NAME] = {"name", true, "a table name: 1..63 letters, digits, '_' or '.'"},
    /* 254: the engine key is the key plus a length byte, at most 255 bytes */
    [T_KEY_SIZE] = {"key_size", true, "an integer in 1..254 (bytes)"},
    [T_VALUE_SIZE] = {"value_size", true, "an integer in 1..1048576 (bytes)"},
    [T_PARTITIONS] = {"partitions", false, "an integer in 1..4096"},
};

enum { R_PATH, R_KIND, R_SIZE, R_HWCC_BUDGET, R_NUMA_NODE, R_SIMULATE_NONCOHERENT,
       R_ALLOW_OVERCOMMIT, R_NKEYS };
static const struct conf_key region_keys[R_NKEYS] = {
    [R_PATH] = {"path", true, "a non-empty path: /dev/shm/..., /dev/daxX.Y or a file on a DAX "
                              "file system"},
    [R_KIND] = {"kind", true, "one of: shm, devdax, fsdax"},
    [R_SIZE] = {"size", true, "a byte size in 128MiB..64TiB, a multiple of 4KiB, like 1GiB"},
    [R_HWCC_BUDGET] = {"hwcc_budget", true,
                       "a byte size of at least 1MiB and less than region.size, like 64MiB"},
    [R_NUMA_NODE] = {"numa_node", false,
                     "a NUMA node number 0..1023, or none or -1 for no binding"},
    [R_SIMULATE_NONCOHERENT] = {"simulate_noncoherent", false,
                                "true, false, yes, no, on or off"},
    [R_ALLOW_OVERCOMMIT] = {"allow_overcommit", false, "true, false, yes, no, on or off"},
};

enum { H_WORKERS, H_LOGGERS, H_CPUS, H_SOCKET, H_LOG_DIR, H_TCP_PORT, H_TCP_TOKEN_FILE,
       H_HUGE_PAGES, H_NKEYS };
static const struct conf_key host_keys[H_NKEYS] = {
    [H_WORKERS] = {"workers", true, "an integer in 1..64"},
    [H_LOGGERS] = {"loggers", false, "an integer in 0..16"},
    [H_CPUS] = {"cpus", false, "a CPU list like \"0-3,8\" or a CPU number"},
    [H_SOCKET] = {"socket", true, "a Unix socket path; {host} becomes the host index"},
    [H_LOG_DIR] = {"log_dir", true, "a directory path; {host} becomes the host index"},
    [H_TCP_PORT] = {"tcp_port", false, "a TCP port in 1..65535 for a listener on 127.0.0.1 "
                                       "(default: none)"},
    [H_TCP_TOKEN_FILE] = {"tcp_token_file", false,
                          "a file holding the TCP listener's token, required with tcp_port "
                          "(a relative path is taken from the config's directory)"},
    [H_HUGE_PAGES] = {"huge_pages", false, "true, false, yes, no, on or off"},
};

enum { E_EPOCH_MS, E_MOVEOUT_THRESHOLD, E_MOVEBACK_RATE, E_COHERENCE, E_PHANTOM_PROTECTION, E_CHECKPOINT_AFTER,
       E_REPLY_BEFORE_DURABLE, E_EVICTION, E_SHORTCUT_POINTERS, E_DIRTY_TRACKING, E_LOCKING,
       E_MAX_RETRIES, E_RETRY_TIMEOUT_MS, E_SLOW_CALL_MS, E_DURABLE_WAIT_MS, E_NKEYS };
static const struct conf_key engine_keys[E_NKEYS] = {
    [E_EPOCH_MS] = {"epoch_ms", false, "an integer in 1..10000"},
    [E_MOVEOUT_THRESHOLD] = {"moveout_threshold", false, "a number in (0, 1], like 0.9"},
    [E_MOVEBACK_RATE] = {"moveback_rate", false, "an integer in 0..10000000 (records a second)"},
    [E_COHERENCE] = {"coherence", false, "one of: full, non-temporal, no-shared-reader, "
                                         "hwcc-only"},
    [E_PHANTOM_PROTECTION] = {"phantom_protection", false, "true, false, yes, no, on or off"},
    [E_CHECKPOINT_AFTER] = {"checkpoint_after", false, "a size like 256MiB (0 = never)"},
    [E_REPLY_BEFORE_DURABLE] = {"reply_before_durable", false,
                                "true, false, yes, no, on or off (true is NOT durable)"},
    [E_EVICTION] = {"eviction", false, "one of: clock, random"},
    [E_SHORTCUT_POINTERS] = {"shortcut_pointers", false, "true, false, yes, no, on or off"},
    [E_DIRTY_TRACKING] = {"dirty_tracking", false, "true, false, yes, no, on or off"},
    [E_LOCKING] = {"locking", false, "true, false, yes, no, on or off (false is for benchmarks only: "
                                     "transactions are not isolated)"},
    [E_MAX_RETRIES] = {"max_retries", false, "an integer in 1..1000000000 (conflicts a call may "
                                             "retry)"},
    [E_RETRY_TIMEOUT_MS] = {"retry_timeout_ms", false, "an integer in 0..86400000 (how long a call "
                                                       "may retry; 0 = no limit)"},
    [E_SLOW_CALL_MS] = {"slow_call_ms", false, "an integer in 0..86400000 (the watchdog logs calls "
                                               "running this long; 0 = off)"},
    [E_DURABLE_WAIT_MS] = {"durable_wait_ms", false, "an integer in 0..86400000 (how long a reply "
                                                     "waits for durability; 0 = for ever)"},
};

enum { S_MAX_CONN_BUFFERED, S_MAX_BUFFERED, S_MAX_CALLS_PER_CONN, S_AUTH_TIMEOUT_MS, S_NKEYS };
static const struct conf_key server_keys[S_NKEYS] = {
    [S_MAX_CONN_BUFFERED] = {"max_conn_buffered", false,
                             "a byte size in 1MiB..64TiB, at most server.max_buffered, like 64MiB"},
    [S_MAX_BUFFERED] = {"max_buffered", false, "a byte size in 1MiB..64TiB, like 1GiB"},
    [S_MAX_CALLS_PER_CONN] = {"max_calls_per_conn", false, "an integer in 1..65536"},
    [S_AUTH_TIMEOUT_MS] = {"auth_timeout_ms", false, "an integer in 0..86400000 (how long a TCP "
                                                     "connection may wait before sys.auth; 0 = "
                                                     "for ever)"},
};

static void set_defaults(struct pod_config *cfg)
{
    cfg->region.numa_node = -1;
    cfg->region.simulate_noncoherent = false;
    cfg->region.allow_overcommit = false;
    cfg->engine.epoch_ms = 10;
    cfg->engine.moveout_threshold = 0.9;
    cfg->engine.moveback_rate = 0;
    cfg->engine.coherence = POD_COH_FULL;
    cfg->engine.phantom_protection = true;
    cfg->engine.locking = true;
    cfg->engine.checkpoint_after = 256ull << 20;
    cfg->engine.reply_before_durable = false;
    cfg->engine.eviction = POD_EVICT_CLOCK;
    cfg->engine.shortcut_pointers = true;
    cfg->engine.dirty_tracking = true;
    cfg->engine.max_retries = 100000;
    cfg->engine.retry_timeout_ms = 10000;
    cfg->engine.slow_call_ms = 5000;
    cfg->engine.durable_wait_ms = 30000;
    cfg->server.max_conn_buffered = SERVER_DEFAULT_CONN_BUFFERED;
    cfg->server.max_buffered = SERVER_DEFAULT_BUFFERED;
    cfg->server.max_calls_per_conn = 128;
    cfg->server.auth_timeout_ms = 10000;
}

/* The region is mapped in whole pages (cxl_geometry_compute insists too, but
 * here the message can point at the line). */
static int get_region_size(const struct conf_reader *c, const struct conf_item *it, uint64_t *out)
{
    if (get_size_in_range(c, it, REGION_MIN_SIZE, REGION_MAX_SIZE, out) < 0) return -1;
    if (*out % REGION_PAGE != 0)
        return fail_node(c, it->value, it->path,
                         "%s (%llu bytes) is not a multiple of 4KiB (expected whole pages; "
                         "binary units like GiB always are)",
                         show(it->value).s, (unsigned long long)*out);
    return 0;
}

/* Values present are checked first (their errors point at a line), then the
 * required keys, then the rules between keys. */
static int load_region(const struct conf_reader *c, const struct conf_item *section,
                       struct pod_config *cfg)
{
    struct conf_item it[R_NKEYS];
    int kind = 0;
    if (read_mapping(c, section->value, "region", region_keys, R_NKEYS, it) < 0) return -1;
    if (it[R_PATH].value &&
        get_path(c, &it[R_PATH], -1, POD_PATH_MAX - 1, "POD_PATH_MAX", cfg->region.path,
                 sizeof cfg->region.path) < 0)
        return -1;
    if (it[R_KIND].value) {
        if (get_enum(c, &it[R_KIND], region_kind_names, NKINDS, &kind) < 0) return -1;
        cfg->region.kind = (enum pod_region_kind)kind;
    }
    if (it[R_SIZE].value && get_region_size(c, &it[R_SIZE], &cfg->region.size) < 0) return -1;
    if (it[R_HWCC_BUDGET].value && get_size(c, &it[R_HWCC_BUDGET], &cfg->region.hwcc_budget) < 0)
        return -1;
    if (it[R_NUMA_NODE].value && get_numa_node(c, &it[R_NUMA_NODE], &cfg->region.numa_node) < 0)
        return -1;
    if (it[R_SIMULATE_NONCOHERENT].value &&
        get_bool(c, &it[R_SIMULATE_NONCOHERENT], &cfg->region.simulate_noncoherent) < 0)
        return -1;
    if (it[R_ALLOW_OVERCOMMIT].value &&
        get_bool(c, &it[R_ALLOW_OVERCOMMIT], &cfg->region.allow_overcommit) < 0)
        return -1;
    if (require_keys(c, section->value, it, R_NKEYS) < 0) return -1;

    char min_budget[32];
    const struct conf_item *hwcc = &it[R_HWCC_BUDGET];
    if (cfg->region.hwcc_budget < HWCC_MIN_BUDGET)
        return fail_node(c, hwcc->value, hwcc->path, "%s is too small (expected at least %s)",
                         show(hwcc->value).s,
                         conf_format_size(HWCC_MIN_BUDGET, min_budget, sizeof min_budget));
    /* The HWcc memory is carved out of the region, so it must leave room. */
    if (cfg->region.hwcc_budget >= cfg->region.size)
        return fail_node(c, hwcc->value, hwcc->path,
                         "%s is not less than region.size (expected less than %s)",
                         show(hwcc->value).s, show(it[R_SIZE].value).s);
    return 0;
}

static int get_file_path(const struct conf_reader *c, const struct conf_item *it, int host_index,
                         size_t max_len, const char *limit_reason, char *out, size_t outsz);

/* dm.memnodes: each memory node's bootstrap socket, relative paths taken
 * from the file's directory; memory node i is the i-th (its keys are
 * placed by that number: docs/dm.md), so no path may come twice. */
static int load_memnodes(const struct conf_reader *c, const struct conf_item *it,
                         struct pod_config *cfg)
{
    static const struct conf_key memnode_spec = {
        "memnodes", false, "a memory node's bootstrap socket path (poddb-memnode --socket; a "
                           "relative path is taken from the config's directory)"};
    const struct ynode *seq = it->value;
    if (is_null(seq) || seq->kind != YN_SEQUENCE)
        return fail_node(c, seq, it->path, "%s (expected %s)", node_problem(seq),
                         it->spec->expect);
    if (seq->n == 0)
        return fail_node(c, seq, it->path, "is empty (expected %s)", it->spec->expect);
    if (seq->n > POD_MAX_MEMNODES)
        return fail_node(c, seq->items[POD_MAX_MEMNODES], it->path,
                         "%zu entries, more than the %d memory nodes a pod may have", seq->n,
                         POD_MAX_MEMNODES);
    for (size_t i = 0; i < seq->n; i++) {
        struct conf_item e = {&memnode_spec, seq->items[i], seq->items[i], ""};
        snprintf(e.path, sizeof e.path, "dm.memnodes[%zu]", i);
        if (get_file_path(c, &e, -1, MAX_SOCKET_PATH_LEN, "the size of sun_path",
                          cfg->dm.memnodes[i], sizeof cfg->dm.memnodes[i]) < 0)
            return -1;
        for (size_t j = 0; j < i; j++)
            if (!strcmp(cfg->dm.memnodes[j], cfg->dm.memnodes[i]))
                return fail_node(c, seq->items[i], e.path,
                                 "'%s' is also dm.memnodes[%zu] (expected each memory node once)",
                                 cfg->dm.memnodes[i], j);
    }
    cfg->dm.nmemnodes = (int)seq->n;
    return 0;
}

/* A decimal number in [0, NIC_MAX] (zero refused unless zero_ok), with a
 * message of its own for a negative one. */
static int get_nic_number(const struct conf_reader *c, const struct conf_item *it, bool zero_ok,
                          double *out)
{
    if (want_plain_scalar(c, it) < 0) return -1;
    const struct ynode *v = it->value;
    if (v->text[0] == '-')
        return fail_node(c, v, it->path, "%s is negative (expected %s)", show(v).s,
                         it->spec->expect);
    if (conf_parse_fraction(v->text, out) < 0)
        return fail_node(c, v, it->path, "'%s' is not a decimal number (expected %s)", show(v).s,
                         it->spec->expect);
    if (*out == 0 && !zero_ok)
        return fail_node(c, v, it->path, "is zero: no operation would ever complete (expected %s)",
                         it->spec->expect);
    if (*out > NIC_MAX)
        return fail_node(c, v, it->path, "%s is out of range (expected %s)", show(v).s,
                         it->spec->expect);
    return 0;
}

static int load_nic_model(const struct conf_reader *c, const struct conf_item *section,
                          struct pod_config *cfg)
{
    struct conf_item it[NIC_NKEYS];
    if (read_mapping(c, section->value, "dm.nic_model", nic_keys, NIC_NKEYS, it) < 0) return -1;
    if (it[NIC_ENABLED].value && get_bool(c, &it[NIC_ENABLED], &cfg->dm.nic_model.enabled) < 0)
        return -1;
    double *const field[NIC_NKEYS] = {
        [NIC_RTT_US] = &cfg->dm.nic_model.rtt_us,
        [NIC_ATOMIC_MOPS] = &cfg->dm.nic_model.atomic_mops,
        [NIC_RW_MOPS] = &cfg->dm.nic_model.rw_mops,
        [NIC_GBPS] = &cfg->dm.nic_model.gbps,
    };
    for (int k = NIC_RTT_US; k < NIC_NKEYS; k++)
        if (it[k].value && get_nic_number(c, &it[k], k == NIC_RTT_US, field[k]) < 0) return -1;
    return require_keys(c, section->value, it, NIC_NKEYS);
}

/* dm.replicas: backups of a memory node's records go to the next memory
 * nodes of the list, so there must be that many others; only ford rebuilds
 * them (its undo logs), rs-2pl cannot recover the compute nodes that a lost
 * memory node stops, and motor's snapshot readers may see a version that
 * reached a memory node but not its backup (docs/dm.md). Absent: 1 under
 * ford with 2 or more memory nodes, else 0. */
static int check_replicas(const struct conf_reader *c, const struct conf_item *it,
                          struct pod_config *cfg)
{
    bool ford = cfg->dm.protocol == POD_DM_FORD;
    if (!it->value) {
        cfg->dm.replicas = ford && cfg->dm.nmemnodes >= 2 ? 1 : 0;
        return 0;
    }
    int n = cfg->dm.replicas;
    if (n > 0 && !ford)
        return fail_node(c, it->value, it->path,
                         "%d needs dm.protocol: ford (%s)", n,
                         pod_dm_multiversion(cfg->dm.protocol)
                             ? "its readers may see a version that reached a memory "
                               "node and not its backup"
                             : "rs-2pl cannot recover the compute nodes that a lost memory node "
                               "stops");
    if (n > cfg->dm.nmemnodes - 1)
        return fail_node(c, it->value, it->path,
                         "%d backup%s need%s at least %d memory nodes (dm.memnodes lists %d)", n,
                         n == 1 ? "" : "s", n == 1 ? "s" : "", n + 1, cfg->dm.nmemnodes);
    return 0;
}

static int load_dm(const struct conf_reader *c, const struct conf_item *section,
                   struct pod_config *cfg)
{
    struct conf_item it[DM_NKEYS];
    int provider = 0;
    if (read_mapping(c, section->value, "dm", dm_keys, DM_NKEYS, it) < 0) return -1;
    if (it[DM_POD].value && get_name(c, &it[DM_POD], "_.-", cfg->dm.pod) < 0) return -1;
    if (it[DM_PROVIDER].value &&
        get_enum(c, &it[DM_PROVIDER], provider_names, NPROVIDERS, &provider) < 0)
        return -1;
    snprintf(cfg->dm.provider, sizeof cfg->dm.provider, "%s", provider_names[provider]);
    if (it[DM_MEMNODES].value && load_memnodes(c, &it[DM_MEMNODES], cfg) < 0) return -1;
    /* Read for tools/pod, which starts the memory nodes; left out of the
     * digest (digest.c): the pool is the memory node's business, not a
     * compute node's. */
    cfg->dm.pool_size = DM_POOL_DEFAULT_SIZE;
    if (it[DM_POOL_SIZE].value &&
        get_size_in_range(c, &it[DM_POOL_SIZE], DM_POOL_MIN_SIZE, DM_POOL_MAX_SIZE,
                          &cfg->dm.pool_size) < 0)
        return -1;
    int protocol = POD_DM_FORD;
    if (it[DM_PROTOCOL].value &&
        get_enum(c, &it[DM_PROTOCOL], dm_protocol_names, POD_DM_NPROTOCOLS, &protocol) < 0)
        return -1;
    cfg->dm.protocol = (enum pod_dm_protocol)protocol;
    cfg->dm.undo_log_size = 1 * MIB;
    if (it[DM_UNDO_LOG_SIZE].value &&
        get_size_in_range(c, &it[DM_UNDO_LOG_SIZE], 64 * KIB, 1 * GIB, &cfg->dm.undo_log_size) < 0)
        return -1;
    /* Checked against the memory nodes, or defaulted, by check_replicas. */
    if (it[DM_REPLICAS].value &&
        get_int(c, &it[DM_REPLICAS], 0, POD_MAX_DM_REPLICAS, &cfg->dm.replicas) < 0)
        return -1;
    cfg->dm.versions = DM_VERSIONS_DEFAULT;
    if (it[DM_VERSIONS].value) {
        if (!pod_dm_multiversion(cfg->dm.protocol))
            return fail_node(c, it[DM_VERSIONS].value, it[DM_VERSIONS].path,
                             "only with dm.protocol: motor or lotus (%s keeps one version of a "
                             "record)",
                             dm_protocol_names[cfg->dm.protocol]);
        if (get_int(c, &it[DM_VERSIONS], 2, DM_VERSIONS_MAX, &cfg->dm.versions) < 0) return -1;
    }
    cfg->dm.inflight = DM_INFLIGHT_DEFAULT;
    if (it[DM_INFLIGHT].value &&
        get_int(c, &it[DM_INFLIGHT], 1, POD_MAX_WORKERS, &cfg->dm.inflight) < 0)
        return -1;
    cfg->dm.nic_model.enabled = false;
    cfg->dm.nic_model.rtt_us = NIC_DEFAULT_RTT_US;
    cfg->dm.nic_model.atomic_mops = NIC_DEFAULT_ATOMIC_MOPS;
    cfg->dm.nic_model.rw_mops = NIC_DEFAULT_RW_MOPS;
    cfg->dm.nic_model.gbps = NIC_DEFAULT_GBPS;
    if (it[DM_NIC_MODEL].value && load_nic_model(c, &it[DM_NIC_MODEL], cfg) < 0) return -1;
    if (require_keys(c, section->value, it, DM_NKEYS) < 0) return -1;
    return check_replicas(c, &it[DM_REPLICAS], cfg);
}

/* Where the records live: the region with mode: cxl, the memory nodes of
 * `dm` with mode: dm; a section of the other mode is a mistake. */
static int load_records(const struct conf_reader *c, const struct conf_item *top,
                        struct pod_config *cfg)
{
    const struct conf_item *region = &top[TOP_REGION], *dm = &top[TOP_DM];
    if (cfg->mode == POD_MODE_DM) {
        if (region->key)
            return fail_node(c, region->key, region->path,
                             "not used with mode: dm: the records live on the memory nodes "
                             "(expected no region section, or mode: cxl)");
        return load_dm(c, dm, cfg);
    }
    if (dm->key)
        return fail_node(c, dm->key, dm->path,
                         "only with mode: dm (expected mode: dm, or no dm section: the mode "
                         "is cxl%s)",
                         top[TOP_MODE].key ? "" : ", the default");
    return load_region(c, region, cfg);
}

/* Converts the host keys present in items[] into h (absent keys keep h's value). */
static int convert_host(const struct conf_reader *c, const struct conf_item *it, int host_index,
                        enum pod_mode mode, struct pod_host_conf *h)
{
    if (it[H_WORKERS].value && get_int(c, &it[H_WORKERS], 1, POD_MAX_WORKERS, &h->workers) < 0)
        return -1;
    if (it[H_LOGGERS].value && get_int(c, &it[H_LOGGERS], 0, POD_MAX_LOGGERS, &h->loggers) < 0)
        return -1;
    if (mode == POD_MODE_DM && h->loggers > 0)
        return fail_node(c, it[H_LOGGERS].value, it[H_LOGGERS].path,
                         "is %d but mode: dm does not log yet (expected 0: set loggers: 0, or "
                         "leave it out: with mode: dm it defaults to 0)",
                         h->loggers);
    if (it[H_CPUS].value && get_cpu_list(c, &it[H_CPUS], h) < 0) return -1;
    if (it[H_SOCKET].value &&
        get_path(c, &it[H_SOCKET], host_index, MAX_SOCKET_PATH_LEN, "the size of sun_path",
                 h->socket_path, sizeof h->socket_path) < 0)
        return -1;
    if (it[H_LOG_DIR].value &&
        get_path(c, &it[H_LOG_DIR], host_index, POD_PATH_MAX - 1, "POD_PATH_MAX", h->log_dir,
                 sizeof h->log_dir) < 0)
        return -1;
    if (it[H_TCP_PORT].value && get_int(c, &it[H_TCP_PORT], 1, 65535, &h->tcp_port) < 0)
        return -1;
    if (it[H_TCP_TOKEN_FILE].value &&
        get_file_path(c, &it[H_TCP_TOKEN_FILE], host_index, POD_PATH_MAX - 1, "POD_PATH_MAX",
                      h->tcp_token_file, sizeof h->tcp_token_file) < 0)
        return -1;
    if (it[H_HUGE_PAGES].value && get_bool(c, &it[H_HUGE_PAGES], &h->huge_pages) < 0) return -1;
    return 0;
}

/* A host logs with one logger unless told otherwise; with mode: dm it does not log. */
static void default_host(struct pod_host_conf *h, enum pod_mode mode)
{
    memset(h, 0, sizeof *h);
    h->loggers = mode == POD_MODE_DM ? 0 : 1;
}

/* A TCP listener needs a token file (docs/security.md), and a token file
 * belongs to a TCP listener: one in a host's own entry without tcp_port is
 * a mistake, one from host_defaults is for the hosts that have a port. */
static int check_tcp_token(const struct conf_reader *c, const struct ynode *node,
                           const struct conf_item *own, const struct conf_item *merged,
                           struct pod_host_conf *h)
{
    if (h->tcp_port && !merged[H_TCP_TOKEN_FILE].key)
        return fail_node(c, node, own[H_TCP_TOKEN_FILE].path,
                         "missing required key (expected %s; the listener on tcp_port %d "
                         "answers only calls that give the token; set it in this entry or in "
                         "host_defaults)",
                         host_keys[H_TCP_TOKEN_FILE].expect, h->tcp_port);
    if (!h->tcp_port && own[H_TCP_TOKEN_FILE].key)
        return fail_node(c, own[H_TCP_TOKEN_FILE].key, own[H_TCP_TOKEN_FILE].path,
                         "is set but the host has no tcp_port (expected tcp_port in this entry "
                         "or in host_defaults, or no tcp_token_file: only the TCP listener "
                         "uses a token)");
    if (!h->tcp_port) h->tcp_token_file[0] = '\0';
    return 0;
}

/* hosts[i] must not share a socket or log directory with an earlier host. */
static int check_unique_paths(const struct conf_reader *c, const struct pod_config *cfg, int i,
                              const struct conf_item *merged)
{
    const struct pod_host_conf *h = &cfg->hosts[i];
    char path[32];
    for (int j = 0; j < i; j++) {
        if (strcmp(cfg->hosts[j].socket_path, h->socket_path) == 0) {
            snprintf(path, sizeof path, "hosts[%d].socket", i);
            return fail_node(c, merged[H_SOCKET].value, path,
                             "'%s' is also the socket of hosts[%d] (expected one socket per "
                             "host; use {host} in the path)",
                             h->socket_path, j);
        }
        if (h->tcp_port && cfg->hosts[j].tcp_port == h->tcp_port) {
            snprintf(path, sizeof path, "hosts[%d].tcp_port", i);
            return fail_node(c, merged[H_TCP_PORT].value, path,
                             "%d is also the tcp_port of hosts[%d] (expected one port per host)",
                             h->tcp_port, j);
        }
        if (h->log_dir[0] && strcmp(cfg->hosts[j].log_dir, h->log_dir) == 0) {
            snprintf(path, sizeof path, "hosts[%d].log_dir", i);
            return fail_node(c, merged[H_LOG_DIR].value, path,
                             "'%s' is also the log_dir of hosts[%d] (expected one log directory "
                             "per host; use {host} in the path)",
                             h->log_dir, j);
        }
    }
    return 0;
}

static int load_host(const struct conf_reader *c, const struct ynode *node, int i,
                     const struct conf_item *defaults, struct pod_config *cfg)
{
    char prefix[16];
    struct conf_item own[H_NKEYS], merged[H_NKEYS];
    snprintf(prefix, sizeof prefix, "hosts[%d]", i);
    if (is_null(node))
        return fail_node(c, node, prefix,
                         "has no value (expected a mapping; write {} to take every key from "
                         "host_defaults)");
    if (read_mapping(c, node, prefix, host_keys, H_NKEYS, own) < 0) return -1;
    /* A key of the entry wins over host_defaults; messages name where the value is. */
    for (int k = 0; k < H_NKEYS; k++) merged[k] = own[k].key ? own[k] : defaults[k];
    default_host(&cfg->hosts[i], cfg->mode);
    if (convert_host(c, merged, i, cfg->mode, &cfg->hosts[i]) < 0) return -1;
    for (int k = 0; k < H_NKEYS; k++)
        /* A host of mode: dm has no log (log_dir is accepted and unused). */
        if (host_keys[k].required && !merged[k].key &&
            !(k == H_LOG_DIR && cfg->mode == POD_MODE_DM))
            return fail_node(c, node, own[k].path,
                             "missing required key (expected %s; set it in this entry or "
                             "in host_defaults)",
                             host_keys[k].expect);
    if (check_tcp_token(c, node, own, merged, &cfg->hosts[i]) < 0) return -1;
    return check_unique_paths(c, cfg, i, merged);
}

static int load_hosts(const struct conf_reader *c, const struct conf_item *hosts_item,
                      const struct conf_item *defaults_item, struct pod_config *cfg)
{
    struct conf_item defaults[H_NKEYS];
    init_items(defaults, host_keys, H_NKEYS, "host_defaults");
    if (defaults_item->value && !is_null(defaults_item->value)) {
        struct pod_host_conf scratch;
        default_host(&scratch, cfg->mode);
        /* Check the defaults once on their own, so a bad default is reported
         * even when every host overrides it. */
        if (read_mapping(c, defaults_item->value, "host_defaults", host_keys, H_NKEYS,
                         defaults) < 0 ||
            convert_host(c, defaults, 0, cfg->mode, &scratch) < 0)
            return -1;
    }

    const struct ynode *seq = hosts_item->value;
    if (is_null(seq) || seq->kind != YN_SEQUENCE)
        return fail_node(c, seq, "hosts", "%s (expected %s)", node_problem(seq),
                         top_keys[TOP_HOSTS].expect);
    if (seq->n == 0)
        return fail_node(c, seq, "hosts", "is empty (expected %s)", top_keys[TOP_HOSTS].expect);
    if (seq->n > POD_MAX_HOSTS)
        return fail_node(c, seq->items[POD_MAX_HOSTS], "hosts",
                         "%zu entries are too many (expected at most %d hosts)", seq->n,
                         POD_MAX_HOSTS);
    for (size_t i = 0; i < seq->n; i++)
        if (load_host(c, seq->items[i], (int)i, defaults, cfg) < 0) return -1;
    cfg->nhosts = (int)seq->n;
    return 0;
}

/* Converts the engine keys present in items[] (absent keys keep their default). */
static int convert_engine(const struct conf_reader *c, const struct conf_item *it,
                          struct pod_config *cfg)
{
    int coherence = 0;
    if (it[E_EPOCH_MS].value &&
        get_int(c, &it[E_EPOCH_MS], 1, MAX_EPOCH_MS, &cfg->engine.epoch_ms) < 0)
        return -1;
    if (it[E_MOVEOUT_THRESHOLD].value &&
        get_fraction(c, &it[E_MOVEOUT_THRESHOLD], &cfg->engine.moveout_threshold) < 0)
        return -1;
    if (it[E_MOVEBACK_RATE].value &&
        get_u32(c, &it[E_MOVEBACK_RATE], 0, 10000000, &cfg->engine.moveback_rate) < 0)
        return -1;
    if (it[E_COHERENCE].value) {
        if (get_enum(c, &it[E_COHERENCE], coherence_names, NCOHERENCE, &coherence) < 0) return -1;
        cfg->engine.coherence = (enum pod_coherence)coherence;
    }
    if (it[E_PHANTOM_PROTECTION].value &&
        get_bool(c, &it[E_PHANTOM_PROTECTION], &cfg->engine.phantom_protection) < 0)
        return -1;
    if (it[E_CHECKPOINT_AFTER].value &&
        get_size(c, &it[E_CHECKPOINT_AFTER], &cfg->engine.checkpoint_after) < 0)
        return -1;
    if (it[E_REPLY_BEFORE_DURABLE].value &&
        get_bool(c, &it[E_REPLY_BEFORE_DURABLE], &cfg->engine.reply_before_durable) < 0)
        return -1;
    if (it[E_EVICTION].value) {
        int eviction = 0;
        if (get_enum(c, &it[E_EVICTION], eviction_names, NEVICTION, &eviction) < 0) return -1;
        cfg->engine.eviction = (enum pod_eviction)eviction;
    }
    if (it[E_SHORTCUT_POINTERS].value &&
        get_bool(c, &it[E_SHORTCUT_POINTERS], &cfg->engine.shortcut_pointers) < 0)
        return -1;
    if (it[E_DIRTY_TRACKING].value &&
        get_bool(c, &it[E_DIRTY_TRACKING], &cfg->engine.dirty_tracking) < 0)
        return -1;
    if (it[E_LOCKING].value && get_bool(c, &it[E_LOCKING], &cfg->engine.locking) < 0) return -1;
    if (it[E_MAX_RETRIES].value &&
        get_u32(c, &it[E_MAX_RETRIES], 1, 1000000000, &cfg->engine.max_retries) < 0)
        return -1;
    if (it[E_RETRY_TIMEOUT_MS].value &&
        get_u32(c, &it[E_RETRY_TIMEOUT_MS], 0, 86400000, &cfg->engine.retry_timeout_ms) < 0)
        return -1;
    if (it[E_SLOW_CALL_MS].value &&
        get_u32(c, &it[E_SLOW_CALL_MS], 0, 86400000, &cfg->engine.slow_call_ms) < 0)
        return -1;
    if (it[E_DURABLE_WAIT_MS].value &&
        get_u32(c, &it[E_DURABLE_WAIT_MS], 0, 86400000, &cfg->engine.durable_wait_ms) < 0)
        return -1;
    return 0;
}

/* A dm pod's tables have a hash index, without the order next-key locking
 * needs, and rs-2pl refuses phantom protection there: the file must turn it
 * off itself, so that nobody runs it believing scans are protected. `where`
 * is the engine mapping, or the top level when there is none. */
static int check_dm_engine(const struct conf_reader *c, const struct ynode *where,
                           const struct conf_item *it, const struct pod_config *cfg)
{
    const struct conf_item *pp = &it[E_PHANTOM_PROTECTION];
    if (cfg->mode != POD_MODE_DM || !cfg->engine.phantom_protection) return 0;
    return fail_node(c, pp->value ? pp->value : where, pp->path,
                     "is true%s with mode: dm: the memory nodes' index is a hash, so next-key "
                     "locking cannot run (expected engine.phantom_protection: false, written in "
                     "the file; scans then neither see nor block concurrent inserts)",
                     pp->value ? "" : " by default");
}

static int load_engine(const struct conf_reader *c, const struct conf_item *section,
                       const struct ynode *root, struct pod_config *cfg)
{
    struct conf_item it[E_NKEYS];
    init_items(it, engine_keys, E_NKEYS, "engine");
    if (section->value && !is_null(section->value) && /* else all defaults */
        (read_mapping(c, section->value, "engine", engine_keys, E_NKEYS, it) < 0 ||
         convert_engine(c, it, cfg) < 0))
        return -1;
    return check_dm_engine(c, section->value ? section->value : root, it, cfg);
}

/* A connection's limit cannot exceed the server's: an explicit one larger is
 * an error, the default shrinks to it. */
static int load_server(const struct conf_reader *c, const struct conf_item *section,
                       struct pod_config *cfg)
{
    struct conf_item it[S_NKEYS];
    if (!section->value || is_null(section->value)) return 0; /* all defaults */
    if (read_mapping(c, section->value, "server", server_keys, S_NKEYS, it) < 0) return -1;
    if (it[S_MAX_CONN_BUFFERED].value &&
        get_size_in_range(c, &it[S_MAX_CONN_BUFFERED], SERVER_MIN_BUFFERED, SERVER_MAX_BUFFERED,
                          &cfg->server.max_conn_buffered) < 0)
        return -1;
    if (it[S_MAX_BUFFERED].value &&
        get_size_in_range(c, &it[S_MAX_BUFFERED], SERVER_MIN_BUFFERED, SERVER_MAX_BUFFERED,
                          &cfg->server.max_buffered) < 0)
        return -1;
    if (it[S_MAX_CALLS_PER_CONN].value &&
        get_u32(c, &it[S_MAX_CALLS_PER_CONN], 1, SERVER_MAX_CALLS,
                &cfg->server.max_calls_per_conn) < 0)
        return -1;
    if (it[S_AUTH_TIMEOUT_MS].value &&
        get_u32(c, &it[S_AUTH_TIMEOUT_MS], 0, 86400000, &cfg->server.auth_timeout_ms) < 0)
        return -1;
    if (cfg->server.max_conn_buffered > cfg->server.max_buffered) {
        const struct conf_item *conn = &it[S_MAX_CONN_BUFFERED];
        if (!conn->value) {
            cfg->server.max_conn_buffered = cfg->server.max_buffered;
            return 0;
        }
        char lim[32];
        return fail_node(c, conn->value, conn->path,
                         "%s is more than server.max_buffered (expected at most %s: one "
                         "connection cannot hold more than the whole server)",
                         show(conn->value).s,
                         conf_format_size(cfg->server.max_buffered, lim, sizeof lim));
    }
    return 0;
}

static int load_table(const struct conf_reader *c, const struct ynode *node, int i,
                      struct pod_config *cfg)
{
    char prefix[24];
    struct conf_item it[T_NKEYS];
    snprintf(prefix, sizeof prefix, "tables[%d]", i);
    if (read_mapping(c, node, prefix, table_keys, T_NKEYS, it) < 0 ||
        require_keys(c, node, it, T_NKEYS) < 0)
        return -1;
    struct pod_kv_table_conf *t = &cfg->tables[i];
    if (get_name(c, &it[T_NAME], "_.", t->name) < 0) return -1;
    const struct ynode *v = it[T_NAME].value;
    for (int j = 0; j < i; j++)
        if (strcmp(cfg->tables[j].name, t->name) == 0)
            return fail_node(c, v, it[T_NAME].path, "'%s' is also the name of tables[%d]",
                             t->name, j);
    int n;
    if (get_int(c, &it[T_KEY_SIZE], 1, 254, &n) < 0) return -1;
    t->key_size = (uint32_t)n;
    if (get_int(c, &it[T_VALUE_SIZE], 1, 1 << 20, &n) < 0) return -1;
    t->value_size = (uint32_t)n;
    t->partitions = (uint32_t)cfg->nhosts;
    if (it[T_PARTITIONS].value) {
        if (get_int(c, &it[T_PARTITIONS], 1, 4096, &n) < 0) return -1;
        t->partitions = (uint32_t)n;
    }
    return 0;
}

static int load_tables(const struct conf_reader *c, const struct conf_item *section,
                       struct pod_config *cfg)
{
    const struct ynode *seq = section->value;
    if (!seq || is_null(seq)) return 0;
    if (seq->kind != YN_SEQUENCE)
        return fail_node(c, seq, "tables", "%s (expected %s)", node_problem(seq),
                         top_keys[TOP_TABLES].expect);
    if (seq->n > POD_MAX_KV_TABLES)
        return fail_node(c, seq->items[POD_MAX_KV_TABLES], "tables",
                         "%zu entries are too many (at most %d)", seq->n, POD_MAX_KV_TABLES);
    for (size_t i = 0; i < seq->n; i++)
        if (load_table(c, seq->items[i], (int)i, cfg) < 0) return -1;
    cfg->ntables = (int)seq->n;
    return 0;
}

/* The directory of the file named c->name, absolute: canonical (realpath) when
 * it exists, else made absolute from the working directory as written. */
static int config_dir(const struct conf_reader *c, char *out, size_t outsz)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(c->name, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else snprintf(dir, sizeof dir, "%.*s", slash == c->name ? 1 : (int)(slash - c->name), c->name);
    char *real = realpath(dir, NULL);
    int n;
    if (real) {
        n = snprintf(out, outsz, "%s", real);
        free(real);
    } else if (dir[0] == '/') {
        n = snprintf(out, outsz, "%s", dir);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) return -1;
        n = snprintf(out, outsz, "%s/%s", cwd, dir);
    }
    return n < 0 || (size_t)n >= outsz ? -1 : 0;
}

/* Appends rel to the absolute directory dir, leaving out "." and empty
 * components ("./mod.so" -> DIR/mod.so); ".." stays, since a symbolic link
 * in rel would make dropping it wrong. Returns the length of out. */
static size_t join_relative(const char *dir, const char *rel, char *out, size_t outsz)
{
    size_t len = (size_t)snprintf(out, outsz, "%s", strcmp(dir, "/") == 0 ? "" : dir);
    for (const char *p = rel; *p;) {
        size_t n = strcspn(p, "/");
        if (n && !(n == 1 && p[0] == '.')) {
            if (len + 1 + n < outsz) snprintf(out + len, outsz - len, "/%.*s", (int)n, p);
            len += 1 + n;
        }
        p += n + (p[n] == '/');
    }
    return len;
}

/* A path as get_path reads it, where a relative one (a module's, a token
 * file's, a memory node's socket) is taken from the config file's directory,
 * not from the working directory of whoever starts the server; max_len
 * (less than outsz) applies to the path so made. */
static int get_file_path(const struct conf_reader *c, const struct conf_item *it, int host_index,
                         size_t max_len, const char *limit_reason, char *out, size_t outsz)
{
    char dir[PATH_MAX], full[PATH_MAX];
    if (get_path(c, it, host_index, max_len, limit_reason, out, outsz) < 0) return -1;
    if (out[0] == '/') return 0;
    if (config_dir(c, dir, sizeof dir) < 0)
        return fail_node(c, it->value, it->path,
                         "'%s' is relative and the directory of %s cannot be found (expected an "
                         "absolute path)",
                         out, c->name);
    size_t len = join_relative(dir, out, full, sizeof full);
    if (len > max_len)
        return fail_node(c, it->value, it->path,
                         "'%s' taken from the config's directory is %zu bytes long (expected at "
                         "most %zu: %s)",
                         out, len, max_len, limit_reason);
    memcpy(out, full, len + 1);
    return 0;
}

static int load_modules(const struct conf_reader *c, const struct conf_item *section,
                        struct pod_config *cfg)
{
    const struct ynode *seq = section->value;
    if (!seq || is_null(seq)) return 0;
    if (seq->kind != YN_SEQUENCE)
        return fail_node(c, seq, "modules", "%s (expected %s)", node_problem(seq),
                         top_keys[TOP_MODULES].expect);
    if (seq->n > POD_MAX_MODULES)
        return fail_node(c, seq->items[POD_MAX_MODULES], "modules",
                         "%zu entries are too many (at most %d)", seq->n, POD_MAX_MODULES);
    static const struct conf_key module_spec = {"modules", false, "a path to a shared object"};
    for (size_t i = 0; i < seq->n; i++) {
        struct conf_item it = {&module_spec, seq->items[i], seq->items[i], ""};
        snprintf(it.path, sizeof it.path, "modules[%zu]", i);
        if (get_file_path(c, &it, -1, POD_PATH_MAX - 1, "POD_PATH_MAX", cfg->modules[i],
                          sizeof cfg->modules[i]) < 0)
            return -1;
        cfg->module_line[i] = it.value->line;
        cfg->module_col[i] = it.value->col;
    }
    cfg->nmodules = (int)seq->n;
    return 0;
}

/* ---- workloads ------------------------------------------------------------------- */

/* Each key of `workloads:` is a section that its workload parses
 * (src/conf/section.h, pod_workload_sections). */
static int load_workloads(const struct conf_reader *c, const struct conf_item *section,
                          struct pod_config *cfg)
{
    struct conf_key keys[POD_MAX_SECTIONS];
    struct conf_item it[POD_MAX_SECTIONS];
    int n = 0;
    for (; pod_workload_sections[n]; n++)
        keys[n] = (struct conf_key){pod_workload_sections[n]->name, false,
                                   pod_workload_sections[n]->expect};
    if (!section->value || is_null(section->value)) return 0;
    if (read_mapping(c, section->value, "workloads", keys, n, it) < 0) return -1;
    for (int i = 0; i < n; i++)
        if (it[i].key) {
            if (pod_workload_sections[i]->parse(c, &it[i], cfg->nhosts, cfg->sections[i].bytes) < 0)
                return -1;
            cfg->has_section[i] = true;
        }
    return 0;
}

const void *pod_config_section(const struct pod_config *c, const struct conf_section *s)
{
    for (int i = 0; pod_workload_sections[i]; i++)
        if (pod_workload_sections[i] == s) return c->sections[i].bytes;
    return NULL;
}

/* ---- for the sections parsed outside src/conf/ (section.h) ------------------------ */

int conf_fail(const struct conf_reader *r, const struct ynode *node, const char *key,
              const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(r, node->line, node->col, key, fmt, ap);
    va_end(ap);
    return -1;
}

/* The mapping of one section: NULL or an empty value means every default. */
int conf_read_section(const struct conf_reader *r, const struct conf_item *section,
                      const struct conf_key *specs, int n, struct conf_item *items)
{
    init_items(items, specs, n, section->path);
    if (!section->value || is_null(section->value)) return 0;
    return read_mapping(r, section->value, section->path, specs, n, items);
}

int conf_get_i64(const struct conf_reader *r, const struct conf_item *it, int64_t min,
                 int64_t max, int64_t *out)
{
    return get_i64(r, it, min, max, out);
}

int conf_get_u32(const struct conf_reader *r, const struct conf_item *it, int min, int max,
                 uint32_t *out)
{
    return get_u32(r, it, min, max, out);
}

int conf_get_bool(const struct conf_reader *r, const struct conf_item *it, bool *out)
{
    return get_bool(r, it, out);
}

int conf_get_enum(const struct conf_reader *r, const struct conf_item *it,
                  const char *const *names, int n, int *out)
{
    return get_enum(r, it, names, n, out);
}

int conf_get_theta(const struct conf_reader *r, const struct conf_item *it, double *out)
{
    return get_theta(r, it, out);
}

static int load_config(const struct conf_reader *c, const struct ynode *root,
                       struct pod_config *cfg)
{
    char keys[128];
    struct conf_item top[TOP_NKEYS];
    struct conf_key specs[TOP_NKEYS]; /* top_keys, with what the mode requires */
    memcpy(specs, top_keys, sizeof specs);
    if (!root || is_null(root))
        return fail(c, root ? root->line : 1, root ? root->col : 1, NULL,
                    "the configuration is empty (expected a mapping with sections: %s)",
                    key_list(top_keys, TOP_NKEYS, keys, sizeof keys));
    if (root->kind != YN_MAPPING)
        return fail_node(c, root, NULL,
                         "the top level is %s (expected a mapping with sections: %s)",
                         kind_phrase(root), key_list(top_keys, TOP_NKEYS, keys, sizeof keys));
    if (read_mapping(c, root, NULL, specs, TOP_NKEYS, top) < 0) return -1;
    if (top[TOP_MODE].value) {
        int mode;
        if (get_enum(c, &top[TOP_MODE], mode_names, NMODES, &mode) < 0) return -1;
        cfg->mode = (enum pod_mode)mode;
    }
    specs[TOP_REGION].required = cfg->mode == POD_MODE_CXL;
    specs[TOP_DM].required = cfg->mode == POD_MODE_DM;
    if (require_keys(c, root, top, TOP_NKEYS) < 0) return -1;
    set_defaults(cfg);
    if (load_records(c, top, cfg) < 0 ||
        load_hosts(c, &top[TOP_HOSTS], &top[TOP_HOST_DEFAULTS], cfg) < 0 ||
        load_engine(c, &top[TOP_ENGINE], root, cfg) < 0 ||
        load_server(c, &top[TOP_SERVER], cfg) < 0 ||
        load_tables(c, &top[TOP_TABLES], cfg) < 0 ||
        load_modules(c, &top[TOP_MODULES], cfg) < 0 ||
        load_workloads(c, &top[TOP_WORKLOADS], cfg) < 0)
        return -1;
    return 0;
}

/* ---- entry points ---------------------------------------------------------------- */

/* YAML forbids tabs in indentation and libyaml's complaint about them is
 * cryptic; a config has no need for tabs anywhere, so any tab is an error.
 * The scan (and every column in messages) assumes UTF-8, so UTF-16, which
 * libyaml would accept, is refused. */
static int reject_tabs_and_utf16(const struct conf_reader *c, const char *text, size_t len)
{
    if (len >= 2 && ((text[0] == '\xff' && text[1] == '\xfe') ||
                     (text[0] == '\xfe' && text[1] == '\xff')))
        return fail(c, 1, 1, NULL, "the file is UTF-16 (expected UTF-8)");
    unsigned line = 1, col = 1;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (ch == '\t')
            return fail(c, line, col, NULL, "tab character (expected spaces: YAML does not "
                                            "allow tabs for indentation)");
        if (ch == '\n') {
            line++;
            col = 1;
        } else if ((ch & 0xC0) != 0x80) {
            col++;
        }
    }
    return 0;
}

int pod_config_parse(const char *name, const char *text, size_t len, struct pod_config *out,
                     pod_err *err)
{
    struct conf_reader c = {.name = name ? name : "<config>", .err = err};
    struct ynode *root = NULL;
    struct ytree_error yerr;

    memset(out, 0, sizeof *out);
    if (!text) {
        if (len) return fail(&c, 1, 1, NULL, "no text (expected the YAML configuration)");
        text = "";
    }
    if (reject_tabs_and_utf16(&c, text, len) < 0) return -1;
    if (ytree_load(text, len, &root, &yerr) < 0)
        return fail(&c, yerr.line, yerr.col, NULL, "%s", yerr.msg);
    int rc = load_config(&c, root, out);
    ytree_free(root);
    if (rc < 0) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    size_t namelen = strnlen(c.name, sizeof out->source - 1);
    memcpy(out->source, c.name, namelen);
    out->source[namelen] = '\0';
    return 0;
}

/* Reads the whole file (at most MAX_CONFIG_FILE_BYTES) into a malloc'd buffer. */
static char *read_file(const char *path, size_t *len, pod_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        pod_err_set(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf && n <= MAX_CONFIG_FILE_BYTES) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap || ferror(f)) break;
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) free(buf);
        buf = bigger;
        cap *= 2;
    }
    int read_errno = errno;
    bool read_failed = ferror(f);
    fclose(f);
    if (!buf) {
        pod_err_set(err, "%s: out of memory", path);
        return NULL;
    }
    if (read_failed || n > MAX_CONFIG_FILE_BYTES) {
        if (read_failed) pod_err_set(err, "%s: cannot read: %s", path, strerror(read_errno));
        else pod_err_set(err, "%s: larger than %d bytes (expected a configuration file)", path,
                         MAX_CONFIG_FILE_BYTES);
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

int pod_config_load(const char *path, struct pod_config *out, pod_err *err)
{
    size_t len;
    memset(out, 0, sizeof *out);
    if (!path) {
        pod_err_set(err, "no configuration path given");
        return -1;
    }
    char *text = read_file(path, &len, err);
    if (!text) return -1;
    int rc = pod_config_parse(path, text, len, out, err);
    free(text);
    return rc;
}

const char *pod_region_kind_name(enum pod_region_kind k)
{
    return (int)k >= 0 && (int)k < NKINDS ? region_kind_names[k] : "unknown";
}

const char *pod_coherence_name(enum pod_coherence c)
{
    return (int)c >= 0 && (int)c < NCOHERENCE ? coherence_names[c] : "unknown";
}

const char *pod_eviction_name(enum pod_eviction e)
{
    return (int)e >= 0 && (int)e < NEVICTION ? eviction_names[e] : "unknown";
}

const char *pod_mode_name(enum pod_mode m)
{
    return (int)m >= 0 && (int)m < NMODES ? mode_names[m] : "unknown";
}
