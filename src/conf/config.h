/* The pod configuration: one YAML file describes the region, the hosts and the
 * engine (docs/configuration.md is the reference for every key).
 *
 * Parsing is strict: an unknown key, a wrong type, a missing required key or an
 * out-of-range value is an error whose message names the file, line, column
 * and key ("conf/pod.yaml:12:5: region.hwcc_budgt: unknown key ..."). */
#ifndef PODDB_CONF_CONFIG_H
#define PODDB_CONF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define POD_MAX_HOSTS 16
#define POD_MAX_WORKERS 64 /* per host */
#define POD_MAX_LOGGERS 16 /* per host */
#define POD_PATH_MAX 256
#define POD_MAX_KV_TABLES 64
#define POD_MAX_MODULES 16
#define POD_NAME_MAX 64 /* table names, with the NUL */

enum pod_region_kind { POD_REGION_SHM = 0, POD_REGION_DEVDAX, POD_REGION_FSDAX };

enum pod_coherence {
    POD_COH_FULL = 0,         /* shared readers keep cacheable copies (default) */
    POD_COH_NON_TEMPORAL,     /* writers use non-temporal stores */
    POD_COH_NO_SHARED_READER, /* a reader's copy is never kept across latches */
    POD_COH_HWCC_ONLY,        /* tuples live in HWcc memory; no SWcc protocol */
};

/* How the owner picks tuples to move out of CXL memory (engine.eviction). */
enum pod_eviction {
    POD_EVICT_CLOCK = 0, /* CLOCK: a tuple another host used gets a second chance (default) */
    POD_EVICT_RANDOM,    /* a random resident tuple of the partition, no second chance */
};

struct pod_host_conf {
    int workers;                   /* 1..POD_MAX_WORKERS */
    int loggers;                   /* 0..POD_MAX_LOGGERS (0 = logging off) */
    int ncpus;                     /* entries used in cpus[]; 0 = not pinned */
    int cpus[256];                 /* parsed from a CPU list string like "0-3,8" */
    char cpu_list[128];            /* the list as written (for messages) */
    char socket_path[POD_PATH_MAX];/* Unix-domain socket of this host's server */
    char log_dir[POD_PATH_MAX];    /* directory of this host's log segments */
    int tcp_port;                  /* 0: no TCP listener; else 127.0.0.1:tcp_port */
    /* The file holding the TCP listener's token (set exactly when tcp_port
     * is); absolute: a relative path is taken from the file's directory.
     * Not part of the digest: it is read and checked at start. */
    char tcp_token_file[POD_PATH_MAX];
    bool huge_pages;               /* large tables' rows on transparent huge pages */
};

/* A table for the generic kv.* procedures: keys and values are byte strings
 * of at most key_size / value_size bytes. */
struct pod_kv_table_conf {
    char name[POD_NAME_MAX];
    uint32_t key_size;             /* 1..255 */
    uint32_t value_size;           /* 1..1048576 */
    uint32_t partitions;           /* 1..4096, default the number of hosts */
};

/* The sections of `workloads:` are parsed by the workloads themselves
 * (src/conf/section.h); pod_config holds each one's parsed value. */
#define POD_MAX_SECTIONS 8
#define POD_SECTION_BYTES 128
struct pod_section_value {
    _Alignas(8) unsigned char bytes[POD_SECTION_BYTES];
};

/* Where the pod's records live (`mode:`). */
enum pod_mode {
    POD_MODE_CXL = 0, /* a shared CXL region, tigon-2pl (default) */
    POD_MODE_DM,      /* memory nodes reached over libfabric, dm.protocol (docs/dm.md) */
};

#define POD_MAX_MEMNODES 16
#define DM_INFLIGHT_DEFAULT 1 /* dm.inflight */
#define POD_MAX_DM_REPLICAS 3 /* dm.replicas: backups of each memory node's records */

/* dm.protocol: the concurrency control of the compute nodes */
enum pod_dm_protocol {
    POD_DM_FORD = 0, /* FORD-style: optimistic reads, undo logs (src/txn/ford.c) */
    POD_DM_RS_2PL,   /* 2PL NO_WAIT (src/txn/rs2pl.c): no recovery of a dead compute node */
    POD_DM_MOTOR,    /* Motor-style MVCC: ford over multi-versioned records (src/txn/ford.c) */
    POD_DM_LOTUS,    /* Lotus: motor's records, locks in the compute nodes' tables (src/txn/ford.c) */
    POD_DM_NPROTOCOLS
};
#define DM_VERSIONS_DEFAULT 2 /* dm.versions */
#define DM_VERSIONS_MAX 16
#define POD_PROVIDER_MAX 32

struct pod_config {
    char source[POD_PATH_MAX];     /* file the config came from (for messages) */

    enum pod_mode mode;

    /* mode: dm only (`dm:`; docs/dm.md). */
    struct {
        char pod[POD_NAME_MAX];    /* the pod the memory nodes serve (poddb-memnode --pod) */
        char provider[POD_PROVIDER_MAX]; /* libfabric provider; default "shm" */
        int nmemnodes;             /* 1 (several are refused until they are served) */
        /* Each memory node's bootstrap socket; absolute (a relative path is
         * taken from the file's directory). */
        char memnodes[POD_MAX_MEMNODES][POD_PATH_MAX];
        /* Each memory node's pool bytes (poddb-memnode --pool-size), for the
         * launcher that starts them; default 256 MiB, at least 1 MiB. Not in
         * the digest: the pool is the memory node's business, and a compute
         * node finds its size in the pool header. */
        uint64_t pool_size;
        enum pod_dm_protocol protocol;
        uint64_t undo_log_size;    /* ford, motor: each compute node's undo log (64 KiB..1 GiB) */
        /* motor: the versions each record keeps (2..DM_VERSIONS_MAX); in
         * the digest (the records' layout) under motor */
        int versions;
        /* Backups of each memory node's records, on the next memory nodes of
         * the list (0..nmemnodes-1, at most POD_MAX_DM_REPLICAS; ford only);
         * default 1 under ford with 2 or more memory nodes, else 0. In the
         * digest: every compute node of a pod must use the same. */
        int replicas;
        /* Transactions each worker thread keeps in flight: its workers run as
         * lanes of the thread (src/util/lanes.h), one yielding to the next
         * while it waits for the memory nodes. Not in the digest: how a
         * compute node runs, not where the records are. */
        int inflight;
        /* dm.nic_model: a model of an RDMA NIC that the compute nodes' fabric
         * operations are made to cost (docs/dm.md, "The NIC model"); off by
         * default. Not in the digest: how costs are modelled, not where the
         * records are. */
        struct {
            bool enabled;
            double rtt_us;      /* a round trip; default 2.5 */
            double atomic_mops; /* CAS + FAA per memory node, Mops/s; default 2.5 */
            double rw_mops;     /* READ + WRITE per memory node, Mops/s; default 35 */
            double gbps;        /* READ + WRITE payload per memory node, Gb/s; default 100 */
        } nic_model;
    } dm;

    struct {
        char path[POD_PATH_MAX];   /* /dev/shm/..., /dev/daxX.Y, or a file on a DAX fs */
        enum pod_region_kind kind;
        uint64_t size;             /* total bytes of the region */
        uint64_t hwcc_budget;      /* bytes of HWcc memory for the whole pod */
        int numa_node;             /* -1 = no binding */
        bool simulate_noncoherent; /* per-host private SWcc cache (testing) */
        bool allow_overcommit;     /* start although the file system lacks room for it */
    } region;

    int nhosts;                    /* 1..POD_MAX_HOSTS */
    struct pod_host_conf hosts[POD_MAX_HOSTS];

    int ntables;
    struct pod_kv_table_conf tables[POD_MAX_KV_TABLES];
    int nmodules;                  /* shared objects with stored procedures */
    /* Absolute: a relative path in the file is taken from the file's directory. */
    char modules[POD_MAX_MODULES][POD_PATH_MAX];
    /* Where each module is named in the file, for messages (0: not from a file). */
    unsigned module_line[POD_MAX_MODULES], module_col[POD_MAX_MODULES];

    struct {
        int epoch_ms;              /* 1..10000, default 10 */
        double moveout_threshold;  /* fraction of a host's HWcc quota, (0,1], default 0.9 */
        uint32_t moveback_rate;    /* below the threshold: CXL-resident records the CLOCK hand
                                    * looks at per second per host; 0 = none (default) */
        enum pod_coherence coherence;
        bool phantom_protection;   /* default true */
        uint64_t checkpoint_after; /* log bytes between checkpoints; 0 = never; default 256 MiB */
        bool reply_before_durable; /* replies before their epoch is durable: NOT durable */
        /* Ablations of the pod layer (docs/pod.md, "Ablation knobs"). */
        enum pod_eviction eviction; /* move-out policy, default CLOCK */
        bool shortcut_pointers;    /* owner finds a CXL-resident tuple by the row's shortcut
                                    * (default); false: through the CXL index */
        bool dirty_tracking;       /* owner trusts its DRAM copy while is-dirty is clear
                                    * (default); false: it always reads the CXL copy */
        bool locking;              /* row locks (default true); false: benchmarks only */
        /* A call's retry budget: it gives up (POD_E_RETRIES) after this many
         * conflicts or this long, whichever comes first. */
        uint32_t max_retries;      /* default 100000 */
        uint32_t retry_timeout_ms; /* default 10000; 0 = no time limit */
        uint32_t slow_call_ms;     /* the watchdog logs a call running this long; 0 = off;
                                    * default 5000 */
        /* A reply held for group commit longer than this is answered with
         * POD_E_NOT_DURABLE instead; 0 = wait for ever. Default 30000. */
        uint32_t durable_wait_ms;
    } engine;

    /* What one server may hold for its clients (docs/configuration.md,
     * "server"). A policy of each server, not of the pod: not part of the
     * digest. */
    struct {
        /* Bytes one connection may make the server hold: its partial input
         * frame, its calls queued or running, its unsent replies and its
         * replies held for group commit. Default 64 MiB (at most
         * max_buffered). */
        uint64_t max_conn_buffered;
        /* The same over every connection of the server. Default 1 GiB. */
        uint64_t max_buffered;
        /* Calls of one connection queued, running or held before the server
         * stops reading it. Default 128. */
        uint32_t max_calls_per_conn;
        /* A TCP connection that has not given its token (sys.auth) this
         * long after it was accepted is closed; 0: never. Default 10 s. */
        uint32_t auth_timeout_ms;
    } server;

    /* Benchmark workloads (`workloads:`; docs/configuration.md): the parsed
     * value of section i of pod_workload_sections (src/conf/section.h), all
     * zero when the file does not have it. Read through the workload's own
     * accessor (pod_tpcc_conf, pod_ycsb_conf, pod_smallbank_conf). */
    struct pod_section_value sections[POD_MAX_SECTIONS];
    bool has_section[POD_MAX_SECTIONS]; /* whether the file has section i */
};

struct conf_section;
/* The parsed value of section s in c (all zero when the file does not have
 * it); NULL when s is not one of pod_workload_sections. */
const void *pod_config_section(const struct pod_config *c, const struct conf_section *s);

/* Parse and validate `path`. On failure returns -1 and sets err to
 * "FILE:LINE:COL: KEY: what is wrong". `out` is fully initialised on success. */
int pod_config_load(const char *path, struct pod_config *out, pod_err *err);

/* The same from a string already in memory; `name` is used in messages, and
 * relative module paths are taken from its directory (the working directory
 * when it has none). */
int pod_config_parse(const char *name, const char *text, size_t len,
                     struct pod_config *out, pod_err *err);

/* A 64-bit digest of the parsed configuration (not of its text: comments and
 * formatting do not change it). Hosts whose digests differ refuse to share a
 * region. */
uint64_t pod_config_digest(const struct pod_config *c);

const char *pod_region_kind_name(enum pod_region_kind k);
const char *pod_coherence_name(enum pod_coherence c);
const char *pod_eviction_name(enum pod_eviction e);
const char *pod_mode_name(enum pod_mode m);
/* "ford", "rs-2pl", "motor" */
const char *pod_dm_protocol_name(enum pod_dm_protocol p);
/* Its records keep dm.versions versions (motor, lotus). */
static inline bool pod_dm_multiversion(enum pod_dm_protocol p)
{
    return p == POD_DM_MOTOR || p == POD_DM_LOTUS;
}

/* Parse a byte size: an integer, or a number with a unit: B, K/KiB, M/MiB,
 * G/GiB, T/TiB (binary) or KB, MB, GB, TB (decimal). Returns 0 or -1. */
int pod_parse_size(const char *s, uint64_t *out);

/* Parse a CPU list like "0-3,8,10-11" into cpus (at most max). Returns the
 * count or -1 on a syntax error / too many CPUs. */
int pod_parse_cpu_list(const char *s, int *cpus, int max);

#endif
