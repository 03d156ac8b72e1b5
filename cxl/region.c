/* Mapping, formatting and attaching the shared region.
 *
 * Who formats: every open takes an exclusive flock on the backing file (a
 * bounded wait), so format and attach never interleave across processes. Under
 * the lock, and before anything is resized or mapped, it looks at what the
 * backing holds (backing.c): a foreign file is refused. A host formats when
 * the backing is empty, the superblock is not READY, or no host of the pod
 * it describes is alive (the region is volatile: a pod that died left
 * nothing worth keeping; recovery comes from the logs). Otherwise it
 * attaches, which requires the same layout version, ABI and config digest. */
#include "cxl/region.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cxl/region_priv.h"
#include "util/log.h"

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
static uint64_t align_down(uint64_t v, uint64_t a) { return v / a * a; }

/* Digest of the struct sizes this build puts in the region (LMDB's habit):
 * two builds that disagree refuse to share a region instead of corrupting it. */
static uint64_t layout_abi(void)
{
    uint64_t h = 1469598103934665603ull;
    const uint64_t parts[] = {sizeof(struct cxl_superblock), sizeof(struct cxl_control),
                              sizeof(struct cxl_host_slot), POD_MAX_HOSTS, POD_MAX_WORKERS,
                              POD_MAX_LOGGERS, CXL_MAX_ROOTS, CXL_SLICE_ALIGN};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        h ^= parts[i];
        h *= 1099511628211ull;
    }
    return h;
}

static const char *mib(uint64_t bytes, char *buf, size_t n)
{
    if (bytes % (1ull << 20) == 0)
        snprintf(buf, n, "%llu MiB", (unsigned long long)(bytes >> 20));
    else
        snprintf(buf, n, "%.2f MiB", (double)bytes / (1 << 20));
    return buf;
}

/* Threads that allocate in a host's slices: its workers plus two service
 * threads. mimalloc gives each allocating thread segments of its own, so a
 * slice needs one 32 MiB segment per thread beyond the bytes it holds. */
static uint64_t alloc_threads(const struct pod_config *c)
{
    int mx = 1;
    for (int h = 0; h < c->nhosts; h++)
        if (c->hosts[h].workers > mx) mx = c->hosts[h].workers;
    return (uint64_t)mx + 2;
}

int cxl_geometry_compute(const struct pod_config *c, struct cxl_geometry *g, pod_err *err)
{
    char b1[32], b2[32], b3[32];
    memset(g, 0, sizeof *g);
    g->nhosts = (uint32_t)c->nhosts;
    g->region_size = c->region.size;
    g->hwcc_budget = c->region.hwcc_budget;
    g->control_off = CXL_CONTROL_OFF;
    g->control_size = align_up(sizeof(struct cxl_control), 4096);
    if (g->region_size % 4096) {
        pod_err_set(err, "%s: region.size %llu is not a multiple of 4096", c->source,
                    (unsigned long long)g->region_size);
        return -1;
    }
    /* The control block is HWcc memory too: it is charged to the budget. */
    uint64_t min_quota = 256 << 10;
    if (g->hwcc_budget < g->control_size + g->nhosts * min_quota) {
        pod_err_set(err,
                    "%s: region.hwcc_budget %s is too small for %u hosts: the control "
                    "block takes %llu KiB and each host needs at least %llu KiB",
                    c->source, mib(g->hwcc_budget, b1, sizeof b1), g->nhosts,
                    (unsigned long long)(g->control_size >> 10),
                    (unsigned long long)(min_quota >> 10));
        return -1;
    }
    g->hwcc_quota = align_down((g->hwcc_budget - g->control_size) / g->nhosts, CXL_CACHELINE);
    uint64_t threads = alloc_threads(c);
    /* 25% slack for mimalloc's size-class waste, plus one segment per thread. */
    g->hwcc_slice_size = align_up(g->hwcc_quota + g->hwcc_quota / 4, CXL_SLICE_ALIGN) +
                         threads * CXL_SLICE_ALIGN;
    g->hwcc_off = CXL_SLICE_ALIGN; /* the first 32 MiB hold the superblock and control block */
    g->swcc_off = g->hwcc_off + g->nhosts * g->hwcc_slice_size;
    if (g->swcc_off > CXL_HWCC_LIMIT) {
        pod_err_set(err,
                    "%s: region.hwcc_budget %s is too large for %u hosts: the HWcc slices "
                    "would end at %s, and must end within the region's first %s "
                    "(local rows address HWcc records with 32-bit offsets)",
                    c->source, mib(g->hwcc_budget, b1, sizeof b1), g->nhosts,
                    mib(g->swcc_off, b2, sizeof b2), mib(CXL_HWCC_LIMIT, b3, sizeof b3));
        return -1;
    }
    uint64_t min_swcc = (threads + 1) * CXL_SLICE_ALIGN;
    uint64_t need = g->swcc_off + g->nhosts * min_swcc;
    if (g->region_size < need) {
        pod_err_set(err,
                    "%s: region.size %s is too small: %u hosts with %llu allocating "
                    "threads each and a HWcc budget of %s need at least %s "
                    "(each thread claims 32 MiB segments of its host's slices)",
                    c->source, mib(g->region_size, b1, sizeof b1), g->nhosts,
                    (unsigned long long)threads, mib(g->hwcc_budget, b2, sizeof b2),
                    mib(need, b3, sizeof b3));
        return -1;
    }
    g->swcc_slice_size = align_down((g->region_size - g->swcc_off) / g->nhosts, CXL_SLICE_ALIGN);
    return 0;
}

/* ---- mapping ------------------------------------------------------------ */

static int pmem2_fail(pod_err *err, const char *what, const char *path, int rc)
{
    pod_err_set(err, "%s of region %s failed: %s (libpmem2 %d)", what, path, pmem2_errormsg(),
                rc);
    return -1;
}

/* Map with a 32 MiB-aligned base (mimalloc arenas need it; see
 * ../shared/notes/region-alloc.md A5): reserve size + alignment, map at the
 * first aligned address inside the reservation. */
static int map_region(struct cxl_region *r, const struct pod_config *c, pod_err *err)
{
    struct cxl_region_priv *p = r->priv;
    const char *path = c->region.path;
    int rc;
    if ((rc = pmem2_config_new(&p->cfg))) return pmem2_fail(err, "pmem2_config_new", path, rc);
    if ((rc = pmem2_source_from_fd(&p->src, p->fd)))
        return pmem2_fail(err, "pmem2_source_from_fd", path, rc);
    size_t src_size = 0, src_align = 0;
    if ((rc = pmem2_source_size(p->src, &src_size)))
        return pmem2_fail(err, "pmem2_source_size", path, rc);
    if ((rc = pmem2_source_alignment(p->src, &src_align)))
        return pmem2_fail(err, "pmem2_source_alignment", path, rc);
    if (src_size < c->region.size) {
        pod_err_set(err, "region %s holds %zu bytes, less than region.size %llu", path, src_size,
                    (unsigned long long)c->region.size);
        return -1;
    }
    if (c->region.size % src_align) {
        pod_err_set(err, "region.size %llu is not a multiple of %s's alignment %zu",
                    (unsigned long long)c->region.size, path, src_align);
        return -1;
    }
    /* PAGE is the coarsest granularity we accept; DAX gives finer. */
    if ((rc = pmem2_config_set_required_store_granularity(p->cfg, PMEM2_GRANULARITY_PAGE)))
        return pmem2_fail(err, "pmem2 granularity", path, rc);
    if ((rc = pmem2_config_set_length(p->cfg, c->region.size)))
        return pmem2_fail(err, "pmem2_config_set_length", path, rc);
    uint64_t align = src_align > CXL_SLICE_ALIGN ? src_align : CXL_SLICE_ALIGN;
    if ((rc = pmem2_vm_reservation_new(&p->rsv, NULL, c->region.size + align)))
        return pmem2_fail(err, "address reservation", path, rc);
    uintptr_t ra = (uintptr_t)pmem2_vm_reservation_get_address(p->rsv);
    size_t roff = (size_t)(align_up(ra, align) - ra);
    if ((rc = pmem2_config_set_vm_reservation(p->cfg, p->rsv, roff)))
        return pmem2_fail(err, "pmem2_config_set_vm_reservation", path, rc);
    if ((rc = pmem2_map_new(&p->map, p->cfg, p->src)))
        return pmem2_fail(err, "mapping", path, rc);
    r->base = pmem2_map_get_address(p->map);
    r->size = pmem2_map_get_size(p->map);
    p->memset_fn = pmem2_get_memset_fn(p->map);
    switch (pmem2_map_get_store_granularity(p->map)) {
    case PMEM2_GRANULARITY_BYTE: r->store_granularity = "byte"; break;
    case PMEM2_GRANULARITY_CACHE_LINE: r->store_granularity = "cache line"; break;
    default: r->store_granularity = "page"; break;
    }
    return 0;
}

static void unmap_region(struct cxl_region *r)
{
    struct cxl_region_priv *p = r->priv;
    if (p->map) pmem2_map_delete(&p->map);
    if (p->rsv) pmem2_vm_reservation_delete(&p->rsv);
    if (p->src) pmem2_source_delete(&p->src);
    if (p->cfg) pmem2_config_delete(&p->cfg);
    if (p->fd >= 0) close(p->fd);
    p->fd = -1;
    free(p->head);
    p->head = NULL;
}

/* Zero [off, off+len) of the region: punch a hole in files (cheap, and gives
 * the pages back), store zeros on a device. */
void cxl_zero_range(struct cxl_region *r, uint64_t off, uint64_t len)
{
    struct cxl_region_priv *p = r->priv;
    if (p->kind != POD_REGION_DEVDAX &&
        fallocate(p->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0)
        return;
    if (p->memset_fn)
        p->memset_fn(r->base + off, 0, len, PMEM2_F_MEM_NONTEMPORAL | PMEM2_F_MEM_NODRAIN);
    else
        memset(r->base + off, 0, len);
}

/* ---- format and attach ------------------------------------------------- */

static void format_region(struct cxl_region *r, const struct pod_config *c,
                          const struct cxl_geometry *g, int host)
{
    struct cxl_superblock *sb = r->sb;
    uint64_t old_gen = (sb->magic == CXL_MAGIC) ? sb->generation : 0;
    /* The magic first: a format cut short leaves a region, never a first
     * page that looks like someone else's data (backing.c). */
    sb->magic = CXL_MAGIC;
    __atomic_store_n(&sb->state, CXL_SB_FORMATTING, __ATOMIC_RELEASE);
    /* Everything past the superblock page goes back to zero. */
    cxl_zero_range(r, CXL_CONTROL_OFF, r->size - CXL_CONTROL_OFF);
    sb->layout_version = CXL_LAYOUT_VERSION;
    sb->layout_abi = layout_abi();
    sb->generation = old_gen + 1;
    sb->config_digest = pod_config_digest(c);
    sb->region_size = g->region_size;
    sb->hwcc_budget = g->hwcc_budget;
    sb->hwcc_quota = g->hwcc_quota;
    sb->control_off = g->control_off;
    sb->control_size = g->control_size;
    sb->hwcc_off = g->hwcc_off;
    sb->hwcc_slice_size = g->hwcc_slice_size;
    sb->swcc_off = g->swcc_off;
    sb->swcc_slice_size = g->swcc_slice_size;
    sb->nhosts = g->nhosts;
    sb->kind = (uint32_t)c->region.kind;
    sb->formatted_at_ns = cxl_now_realtime_ns();
    sb->formatter_pid = (int32_t)getpid();
    sb->formatter_host = host;
    __atomic_store_n(&sb->state, CXL_SB_READY, __ATOMIC_RELEASE);
    r->formatted_now = true;
    pod_info("formatted region %s: generation %llu, %u hosts, HWcc budget %llu bytes",
             c->region.path, (unsigned long long)sb->generation, sb->nhosts,
             (unsigned long long)sb->hwcc_budget);
}

/* Can this process use the superblock as it is? */
static int check_compatible(const struct cxl_region *r, const struct pod_config *c, pod_err *err)
{
    const struct cxl_superblock *sb = r->sb;
    if (sb->layout_version != CXL_LAYOUT_VERSION || sb->layout_abi != layout_abi()) {
        pod_err_set(err,
                    "region %s has layout version %u (ABI %016llx) but this build uses "
                    "version %u (ABI %016llx): stop its hosts and let the pod reformat it",
                    c->region.path, sb->layout_version, (unsigned long long)sb->layout_abi,
                    CXL_LAYOUT_VERSION, (unsigned long long)layout_abi());
        return -1;
    }
    if (sb->config_digest != pod_config_digest(c)) {
        pod_err_set(err,
                    "region %s was formatted with a different configuration (digest "
                    "%016llx, %s has %016llx): every host of a pod must use the same config",
                    c->region.path, (unsigned long long)sb->config_digest, c->source,
                    (unsigned long long)pod_config_digest(c));
        return -1;
    }
    return 0;
}

static bool superblock_ready(const struct cxl_region *r)
{
    return r->sb->magic == CXL_MAGIC &&
           __atomic_load_n(&r->sb->state, __ATOMIC_ACQUIRE) == CXL_SB_READY;
}

/* The superblock and control block at base: the mapping, or a file's head
 * as read before it is mapped. */
static void view_at(struct cxl_region *r, char *base)
{
    r->sb = (struct cxl_superblock *)base;
    r->ctl = (struct cxl_control *)(base + CXL_CONTROL_OFF);
}

static int map_and_view(struct cxl_region *r, const struct pod_config *c, pod_err *err)
{
    if (map_region(r, c, err)) return -1;
    view_at(r, r->base);
    free(r->priv->head); /* what was read before is stale now */
    r->priv->head = NULL;
    return cxl_numa_bind(r->base, r->size, c->region.numa_node, c->region.kind, err);
}

/* What the backing holds, seen without changing it: a file's head is read
 * (so that nothing is resized before the decision), a device is mapped. */
static int survey(struct cxl_region *r, const struct pod_config *c, enum cxl_identity *id,
                  pod_err *err)
{
    struct cxl_region_priv *p = r->priv;
    if (c->region.kind == POD_REGION_DEVDAX) {
        if (map_and_view(r, c, err)) return -1;
        *id = cxl_identify(r->base, r->size, true);
        return *id == CXL_ID_FOREIGN ? cxl_refuse_foreign(c->region.path, r->size, true, err) : 0;
    }
    uint64_t size;
    if (!(p->head = malloc(CXL_HEAD_SIZE))) {
        pod_err_set(err, "out of memory");
        return -1;
    }
    if (cxl_backing_read_head(p->fd, p->head, &size, c->region.path, err)) return -1;
    view_at(r, p->head);
    *id = cxl_identify(p->head, size, false);
    return *id == CXL_ID_FOREIGN ? cxl_refuse_foreign(c->region.path, size, false, err) : 0;
}

enum open_action { OPEN_FAIL = -1, OPEN_FORMAT, OPEN_ATTACH, OPEN_OBSERVE };

/* Format, attach, or only look (RAW), given what the backing holds. A
 * PodDB region without live hosts is volatile: a server may format it
 * whatever config formatted it. */
static enum open_action choose(struct cxl_region *r, const struct pod_config *c, unsigned flags,
                               enum cxl_identity id, pod_err *err)
{
    bool ready = id == CXL_ID_PODDB && superblock_ready(r);
    int live = ready ? cxl_live_hosts(r) : 0;
    if (flags & CXL_OPEN_FORMAT) {
        if (live > 0 && !(flags & CXL_OPEN_FORCE)) {
            pod_err_set(err, "region %s has %d live host(s); stop them first (or force)",
                        c->region.path, live);
            return OPEN_FAIL;
        }
        return OPEN_FORMAT;
    }
    if ((flags & CXL_OPEN_CREATE) && (!ready || live == 0)) return OPEN_FORMAT;
    if (flags & CXL_OPEN_RAW) return OPEN_OBSERVE;
    if (!ready) {
        pod_err_set(err, "region %s is not formatted", c->region.path);
        return OPEN_FAIL;
    }
    return check_compatible(r, c, err) ? OPEN_FAIL : OPEN_ATTACH;
}

/* A file to be formatted gets the config's size (an empty one the magic
 * first). */
static int prepare_format(struct cxl_region *r, const struct pod_config *c,
                          enum cxl_identity id, pod_err *err)
{
    if (c->region.kind == POD_REGION_DEVDAX) return 0;
    if (id == CXL_ID_EMPTY && cxl_backing_stamp(r->priv->fd, c->region.path, err)) return -1;
    return cxl_backing_size(r->priv->fd, c, err);
}

/* Register as host and give it its slices (mimalloc arenas, heartbeat). */
static int attach_host(struct cxl_region *r, int host, unsigned flags, pod_err *err)
{
    if (cxl_host_register(r, host, err)) return -1;
    /* A host's slices start empty at every attach: mimalloc keeps its
     * state in process memory, so a slice cannot outlive its process
     * (../shared/notes/region-alloc.md B4, B5). */
    if (!r->formatted_now) {
        cxl_zero_range(r, r->sb->hwcc_off + (uint64_t)host * r->sb->hwcc_slice_size,
                       r->sb->hwcc_slice_size);
        cxl_zero_range(r, r->sb->swcc_off + (uint64_t)host * r->sb->swcc_slice_size,
                       r->sb->swcc_slice_size);
    }
    if (cxl_alloc_attach(r, err) ||
        ((flags & CXL_OPEN_HEARTBEAT) && cxl_heartbeat_start(r, err))) {
        cxl_host_unregister(r);
        return -1;
    }
    return 0;
}

static uint64_t g_next_uid = 1;

static struct cxl_region *region_new(const struct pod_config *c, int host, pod_err *err)
{
    struct cxl_region *r = calloc(1, sizeof *r + sizeof(struct cxl_region_priv));
    if (!r) {
        pod_err_set(err, "out of memory");
        return NULL;
    }
    r->priv = (struct cxl_region_priv *)(r + 1);
    r->priv->fd = -1;
    r->priv->kind = c->region.kind;
    r->host = host;
    r->uid = __atomic_fetch_add(&g_next_uid, 1, __ATOMIC_RELAXED);
    cxl_read_boot_id(r->priv->boot_id);
    return r;
}

struct cxl_region *cxl_region_open(const struct pod_config *c, int host, unsigned flags,
                                   pod_err *err)
{
    struct cxl_geometry g;
    if (cxl_geometry_compute(c, &g, err)) return NULL;
    if (host < -1 || host >= c->nhosts) {
        pod_err_set(err, "host id %d is out of range: %s has hosts 0..%d", host, c->source,
                    c->nhosts - 1);
        return NULL;
    }
    bool may_format = (flags & (CXL_OPEN_CREATE | CXL_OPEN_FORMAT)) != 0;
    if (may_format && cxl_numa_check(c->region.numa_node, err)) return NULL;
    struct cxl_region *r = region_new(c, host, err);
    if (!r) return NULL;
    bool exclusive = may_format || host >= 0 || (flags & CXL_OPEN_RAW);
    bool locked = false;
    enum cxl_identity id;
    enum open_action act;

    /* The file locked must still be the one at the path: one removed while
     * this open waited for its lock (by a start that created it and was
     * refused, or by destroy) is not the pod's region any more. */
    for (int tries = 0;; tries++) {
        r->priv->fd = cxl_backing_open(c, may_format, &r->created_now, err);
        if (r->priv->fd < 0) goto fail;
        if (cxl_backing_lock(r->priv->fd, exclusive ? LOCK_EX : LOCK_SH, c->region.path, err))
            goto fail;
        locked = true;
        if (cxl_backing_same_file(r->priv->fd, c->region.path)) break;
        flock(r->priv->fd, LOCK_UN);
        close(r->priv->fd);
        r->priv->fd = -1;
        locked = false;
        if (tries == 100) {
            pod_err_set(err, "region %s was removed or replaced 100 times while this process "
                        "waited for its lock", c->region.path);
            goto fail;
        }
    }
    if (survey(r, c, &id, err) || (act = choose(r, c, flags, id, err)) == OPEN_FAIL) goto fail;
    /* (a file this open created was checked before) */
    if (may_format && act != OPEN_OBSERVE && !r->created_now &&
        cxl_backing_check_room(r->priv->fd, c, err))
        goto fail;
    if (act == OPEN_FORMAT && prepare_format(r, c, id, err)) goto fail;
    if (!r->base && act != OPEN_OBSERVE && map_and_view(r, c, err)) goto fail;
    if (act == OPEN_FORMAT) format_region(r, c, &g, host);
    r->ready = superblock_ready(r);
    if (act == OPEN_OBSERVE) {
        flock(r->priv->fd, LOCK_UN);
        return r; /* a RAW observer: the superblock and host table only */
    }
    r->compatible = true;

    if (cxl_swcc_init(&r->swcc, r->base + r->sb->swcc_off,
                      (size_t)r->sb->swcc_slice_size * r->sb->nhosts,
                      c->region.simulate_noncoherent, err))
        goto fail;
    if (r->priv->memset_fn && strcmp(r->store_granularity, "page") != 0)
        r->swcc.pmem_memcpy = (void *(*)(void *, const void *, size_t, unsigned))
            pmem2_get_memcpy_fn(r->priv->map);
    if (host >= 0 && attach_host(r, host, flags, err)) goto fail;
    flock(r->priv->fd, LOCK_UN);
    return r;

fail:
    /* A file this open created is removed under its lock: whoever opened
     * it meanwhile finds it gone once it has the lock (above). */
    if (r->created_now && locked && cxl_backing_same_file(r->priv->fd, c->region.path))
        unlink(c->region.path);
    if (locked) flock(r->priv->fd, LOCK_UN);
    if (r->swcc.base) cxl_swcc_fini(&r->swcc);
    unmap_region(r);
    free(r);
    return NULL;
}

void cxl_region_close(struct cxl_region *r)
{
    if (!r) return;
    if (r->host >= 0) {
        cxl_heartbeat_stop(r);
        cxl_region_set_state(r, CXL_HOST_STOPPING);
        cxl_alloc_detach(r);
        cxl_host_unregister(r);
    }
    if (r->swcc.base) cxl_swcc_fini(&r->swcc);
    unmap_region(r);
    free(r);
}

/* Only a region is removed: a foreign file is refused by the open, and an
 * empty one (no magic) is not proven to be PodDB's either. */
int cxl_region_destroy(const struct pod_config *c, bool force, pod_err *err)
{
    struct cxl_region *r = cxl_region_open(c, -1, CXL_OPEN_RAW, err);
    if (!r) return -1;
    int rc = -1;
    if (r->sb->magic != CXL_MAGIC) {
        pod_err_set(err, "region %s is not a PodDB region: it is empty (no PodDB superblock), "
                    "so it is not removed", c->region.path);
        goto out;
    }
    /* Liveness is read from the host table whatever config formatted it, as
     * long as this build knows the table's layout. */
    if (r->ready && r->sb->layout_abi != layout_abi() && !force) {
        pod_err_set(err, "region %s was formatted by a build with another layout; cannot "
                    "tell whether its hosts are alive (force to remove it anyway)",
                    c->region.path);
        goto out;
    }
    int live = r->ready ? cxl_live_hosts(r) : 0;
    if (live > 0 && !force) {
        pod_err_set(err, "region %s has %d live host(s); stop them first (or force)",
                    c->region.path, live);
        goto out;
    }
    if (c->region.kind == POD_REGION_DEVDAX) {
        memset(r->base, 0, 4096); /* the superblock: the device reads as unformatted */
        rc = 0;
    } else if (!cxl_backing_same_file(r->priv->fd, c->region.path)) {
        pod_err_set(err, "region %s was replaced while it was checked; not removed",
                    c->region.path);
    } else if (unlink(c->region.path) != 0) {
        pod_err_set(err, "cannot remove %s: %s", c->region.path, strerror(errno));
    } else {
        rc = 0;
    }
out:
    cxl_region_close(r);
    return rc;
}
