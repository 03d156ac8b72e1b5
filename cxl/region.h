/* The shared CXL region: mapping, format/attach, host table, per-host slices.
 *
 * One process per host attaches with its host id; tools attach as observers
 * (host id -1) to read the layout without registering. The first host to find
 * the region unformatted (or left behind by a dead pod) formats it; the others
 * wait, bounded, on the region's file lock and then attach. A region formatted
 * with another layout version or configuration is refused with a clear error
 * while any of its hosts is alive. A file that is neither empty nor a PodDB
 * region (its magic) is refused by every open and never changed. */
#ifndef PODDB_CXL_REGION_H
#define PODDB_CXL_REGION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf/config.h"
#include "cxl/coherence.h"
#include "cxl/layout.h"
#include "cxl/offset.h"
#include "util/err.h"

enum cxl_area { CXL_HWCC = 0, CXL_SWCC = 1 };

enum cxl_open_flags {
    CXL_OPEN_CREATE = 1 << 0,    /* create/format if unformatted or stale (dead pod) */
    CXL_OPEN_FORMAT = 1 << 1,    /* always format (refused while hosts are alive) */
    CXL_OPEN_FORCE = 1 << 2,     /* with FORMAT: even when hosts look alive */
    CXL_OPEN_HEARTBEAT = 1 << 3, /* run a heartbeat thread for this host */
    CXL_OPEN_RAW = 1 << 4,       /* observer (destroy): the superblock and host table
                                    even if unformatted or of another config/version;
                                    a file is read, not mapped (r->base is NULL) */
};

/* Layout computed from a config; what format writes into the superblock. */
struct cxl_geometry {
    uint64_t region_size, hwcc_budget, hwcc_quota;
    uint64_t control_off, control_size;
    uint64_t hwcc_off, hwcc_slice_size;
    uint64_t swcc_off, swcc_slice_size;
    uint32_t nhosts;
};

struct cxl_region {
    char *base;                 /* where this process mapped the region */
    size_t size;
    int host;                   /* this process's host id, -1 for an observer */
    struct cxl_superblock *sb;
    struct cxl_control *ctl;
    struct cxl_swcc swcc;       /* this host's view of the SWcc area */
    bool formatted_now;         /* this open formatted the region */
    bool created_now;           /* this open created the region file */
    bool ready;                 /* the superblock is READY (always, except RAW opens) */
    bool compatible;            /* same layout version and config digest as this build */
    const char *store_granularity; /* "page", "cache line" or "byte" (libpmem2) */
    uint64_t uid;               /* unique per open in this process (TLS heap cache key) */
    /* private */
    struct cxl_region_priv *priv;
};

/* Compute the layout for a config, or explain why it does not fit. */
int cxl_geometry_compute(const struct pod_config *c, struct cxl_geometry *g, pod_err *err);

/* Map the region described by c. host is 0..nhosts-1 to attach as that host,
 * or -1 to observe. Returns NULL with err set on failure. */
struct cxl_region *cxl_region_open(const struct pod_config *c, int host, unsigned flags,
                                   pod_err *err);
/* Detach: the host slot becomes FREE; the calling thread's heaps are
 * destroyed (other threads must have called cxl_thread_detach). */
void cxl_region_close(struct cxl_region *r);

/* Remove the backing (unlink the /dev/shm or fsdax file; wipe a devdax
 * superblock). Refused while hosts are alive unless force, and always when
 * the backing does not carry PodDB's magic (foreign or empty). */
int cxl_region_destroy(const struct pod_config *c, bool force, pod_err *err);

/* Host liveness, as seen by this process. */
bool cxl_host_alive(const struct cxl_region *r, int host);
int cxl_live_hosts(const struct cxl_region *r);
/* Every live host runs on this process's kernel (same boot id): a futex word
 * in the region reaches their threads (cxl_ring_sleep). */
bool cxl_hosts_share_kernel(const struct cxl_region *r);
/* Host runs on this process's kernel (the boot id it registered with is
 * ours): one host's check, without the liveness test of the one above. */
bool cxl_host_shares_kernel(const struct cxl_region *r, int host);
void cxl_region_heartbeat(struct cxl_region *r);
void cxl_region_set_state(struct cxl_region *r, enum cxl_host_state st);
const char *cxl_host_state_name(uint32_t st);

/* ---- allocation in this host's slices ------------------------------------
 * Only the owner allocates or frees in its slices (a free of another host's
 * object must be sent to that host). Allocation beyond the HWcc quota or in a
 * full slice returns CXL_NULL, never aborts. Thread-safe: each thread gets its
 * own mimalloc heap in the arena on first use. */
cxl_off cxl_alloc(struct cxl_region *r, enum cxl_area a, size_t size);
cxl_off cxl_zalloc(struct cxl_region *r, enum cxl_area a, size_t size);
void cxl_free(struct cxl_region *r, enum cxl_area a, cxl_off off);
/* Before a thread that allocated exits: drop its heaps (frees nothing). */
void cxl_thread_detach(struct cxl_region *r);

/* Which host's slice holds off (or -1 for the control block / outside). */
int cxl_owner_of(const struct cxl_region *r, cxl_off off, enum cxl_area *area);

struct cxl_usage {
    uint64_t used, objects, failures, quota, slice_size;
};
void cxl_usage_get(const struct cxl_region *r, int host, enum cxl_area a,
                   struct cxl_usage *u);

/* Publish / look up a root offset (rings, index roots) for a host. */
void cxl_root_publish(struct cxl_region *r, int slot, cxl_off off);
cxl_off cxl_root_get(const struct cxl_region *r, int host, int slot);

static inline void *cxl_ptr(const struct cxl_region *r, cxl_off off)
{
    return cxl_at(r->base, off);
}
static inline cxl_off cxl_off_in(const struct cxl_region *r, const void *p)
{
    return cxl_off_of(r->base, p);
}

#endif
