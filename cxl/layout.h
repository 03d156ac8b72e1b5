/* The region's on-device layout: superblock, control block, per-host slices.
 * docs/architecture.md draws it. Every struct here lives in shared memory:
 * fixed-width fields only, no raw pointers (offsets, see cxl/offset.h), and
 * anything written by one host while others read it is one aligned word
 * accessed with atomics.
 *
 *   0            superblock (one 4 KiB page)
 *   4 KiB        control block (HWcc; charged to the HWcc budget)
 *   32 MiB       HWcc slices: host h at hwcc_off + h * hwcc_slice_size
 *   ...          SWcc slices: host h at swcc_off + h * swcc_slice_size
 * Slices start at multiples of 32 MiB because mimalloc arenas require it. */
#ifndef PODDB_CXL_LAYOUT_H
#define PODDB_CXL_LAYOUT_H

#include <stdint.h>

#include "conf/config.h"
#include "cxl/offset.h"

#define CXL_MAGIC 0x4e4759524244444fULL /* bytes "ODDBRYGN": a PodDB region */
#define CXL_LAYOUT_VERSION 5u
#define CXL_SLICE_ALIGN (32ull << 20)  /* mimalloc 2.0.9 arena block/segment size */
#define CXL_CACHELINE 64
#define CXL_MAX_ROOTS 16               /* published root offsets per host */

/* Root slots: what each host publishes where (cxl_root_publish). One list so
 * that modules never collide. */
enum cxl_root_slot {
    CXL_ROOT_TEST = 0,      /* free for tests */
    CXL_ROOT_RING = 1,      /* the host's inbox ring (cxl/ring.c) */
    CXL_ROOT_INDEX_DIR = 2, /* the host's CXL index directory (src/pod/cxl_index.c) */
    CXL_ROOT_REPLY = 3,     /* the host's reply slots (cxl/ring.c) */
    CXL_ROOT_RECOVERY = 4,  /* the host's recovery exchange (src/log/route.c) */
};
#define CXL_CONTROL_OFF 4096ull

enum cxl_sb_state { CXL_SB_EMPTY = 0, CXL_SB_FORMATTING = 1, CXL_SB_READY = 2 };

struct cxl_superblock {
    uint64_t magic;
    uint32_t layout_version;
    uint32_t state;             /* enum cxl_sb_state; READY is stored last */
    uint64_t layout_abi;        /* digest of this build's struct sizes */
    uint64_t generation;        /* pod generation: +1 at every format */
    uint64_t config_digest;     /* pod_config_digest() of the formatting config */
    uint64_t region_size;
    uint64_t hwcc_budget;       /* configured budget for the whole pod */
    uint64_t hwcc_quota;        /* allocation quota of each host's HWcc slice */
    uint64_t control_off, control_size;
    uint64_t hwcc_off, hwcc_slice_size;
    uint64_t swcc_off, swcc_slice_size;
    uint32_t nhosts;
    uint32_t kind;              /* enum pod_region_kind */
    uint64_t formatted_at_ns;   /* CLOCK_REALTIME */
    int32_t formatter_pid;
    int32_t formatter_host;     /* -1: formatted by a tool */
};

enum cxl_host_state {
    CXL_HOST_FREE = 0,     /* no process has this host id */
    CXL_HOST_STARTING = 1, /* attached, setting up */
    CXL_HOST_RUNNING = 2,
    CXL_HOST_STOPPING = 3,
};

/* One per host id; written only by the process holding that id. */
struct cxl_host_slot {
    uint32_t state;             /* enum cxl_host_state (atomic) */
    int32_t pid;
    uint64_t proc_start;        /* /proc/PID/stat starttime: tells pid reuse apart */
    uint64_t heartbeat;         /* incremented by the host's heartbeat (atomic) */
    uint64_t heartbeat_ns;      /* CLOCK_REALTIME of the last beat (atomic) */
    uint64_t attached_ns;
    char boot_id[40];           /* kernel boot id: a pid means something only on its boot */
    /* The host's epoch thread in a quiet pod (src/log/epoch.c): replies of
     * this host waiting for durability (atomic, written by the host only),
     * whether its epoch thread sleeps because the pod is quiet, and the
     * futex word it sleeps on (others bump and wake it). */
    int64_t reply_waiters;
    uint32_t epoch_quiet;
    uint32_t epoch_bell;
    /* The host's log directory (src/log/dirwatch.h, emptylog.h): 1 once it
     * was lost while the host ran (atomic; it freezes the pod durable epoch
     * until the host starts again with a log, and survives the process),
     * and the hosts its durable-epoch record lists as having logged (atomic
     * mask, bit h: host h). */
    uint32_t log_dir_lost;
    uint32_t log_hosts;
    /* Usage of the host's slices in allocator bytes (atomic). Only the owner
     * writes them; everyone may read. */
    uint64_t hwcc_used;
    uint64_t swcc_used;
    uint64_t hwcc_objects;
    uint64_t swcc_objects;
    uint64_t hwcc_failures;     /* allocations refused: budget reached or slice full */
    uint64_t swcc_failures;
} __attribute__((aligned(CXL_CACHELINE)));

/* A 64-bit counter alone on its cache line, so writers never false-share. */
struct cxl_padded_u64 {
    uint64_t v;
} __attribute__((aligned(CXL_CACHELINE)));

struct cxl_logger_words {
    uint64_t durable; /* atomic */
    uint64_t marked;  /* atomic */
    uint64_t written; /* atomic: largest epoch of a record it wrote (0: none in this life) */
} __attribute__((aligned(CXL_CACHELINE)));

/* The control block: the fixed part of the HWcc area. */
struct cxl_control {
    struct cxl_padded_u64 global_epoch;      /* advanced by the epoch leader */
    struct cxl_padded_u64 pod_durable_epoch; /* every epoch below it is committed */
    struct cxl_host_slot hosts[POD_MAX_HOSTS];
    /* each logger of each host: its published durable epoch, the `through`
     * of its last durable mark in its log (0: none in this life; with every
     * logger's at d or above, epochs below d are committed without the
     * durable-epoch file: src/log/epoch.c), and the largest epoch of a
     * record it wrote (none at or above the file's value: nothing to
     * record). One line: the logger writes them about once an epoch. */
    struct cxl_logger_words logger[POD_MAX_HOSTS][POD_MAX_LOGGERS];
    /* epoch each worker is in, for cross-host epoch-based reclamation */
    struct cxl_padded_u64 worker_epoch[POD_MAX_HOSTS][POD_MAX_WORKERS];
    /* the global epoch of cross-host EBR (src/pod/xebr.h); any host may advance it */
    struct cxl_padded_u64 ebr_epoch;
    /* offsets a host publishes for others to find (its rings, index roots, ...);
     * written only by that host, with release stores */
    cxl_off roots[POD_MAX_HOSTS][CXL_MAX_ROOTS];
    /* durability (src/log/): the largest epoch-version a delete has given a
     * row, so that a key inserted again gets a larger one (log/txlog.h) */
    struct cxl_padded_u64 delete_ev_hwm;
    /* start epoch of each host's last valid checkpoint (log truncation) */
    struct cxl_padded_u64 checkpoint_epoch[POD_MAX_HOSTS];

};

#endif
