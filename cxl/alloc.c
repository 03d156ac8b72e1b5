/* Allocation in a host's own slices of the region.
 *
 * Each host manages its HWcc slice and its SWcc slice as two exclusive
 * mimalloc arenas; each thread allocates from its own heap in each arena
 * (a mimalloc heap may only be used by the thread that created it). Recipe and
 * pitfalls: ../shared/notes/region-alloc.md §C — zeroed slices, 32 MiB aligned
 * starts, is_committed=true so mimalloc never madvises the region, never
 * mi_heap_delete an arena heap, never free another host's object.
 *
 * The HWcc budget is enforced here, not by the arena size: every allocation
 * charges its usable size to the host's counter in the host table and fails
 * (returns CXL_NULL) when the quota would be exceeded. */
#include <errno.h>
#include <mimalloc.h>
#include <string.h>

#include "cxl/region_priv.h"
#include "util/log.h"

#define TLS_REGIONS 8

/* Per-thread heaps, keyed by the region handle's uid. */
struct tls_heaps {
    uint64_t uid;
    mi_heap_t *heap[2];
};
static __thread struct tls_heaps tls_heaps[TLS_REGIONS];

static uint64_t slice_off(const struct cxl_region *r, enum cxl_area a, int host)
{
    return a == CXL_HWCC ? r->sb->hwcc_off + (uint64_t)host * r->sb->hwcc_slice_size
                         : r->sb->swcc_off + (uint64_t)host * r->sb->swcc_slice_size;
}

static uint64_t slice_size(const struct cxl_region *r, enum cxl_area a)
{
    return a == CXL_HWCC ? r->sb->hwcc_slice_size : r->sb->swcc_slice_size;
}

int cxl_alloc_attach(struct cxl_region *r, pod_err *err)
{
    for (int a = 0; a < 2; a++) {
        void *start = r->base + slice_off(r, (enum cxl_area)a, r->host);
        size_t size = slice_size(r, (enum cxl_area)a);
        mi_arena_id_t id;
        /* is_zero: the slice was zeroed at format or attach (mimalloc 2.0.9
         * assumes it whatever this flag says). */
        if (!mi_manage_os_memory_ex(start, size, true, false, true, -1, true, &id)) {
            pod_err_set(err, "mimalloc refused the %s slice of host %d (%zu bytes at %p): "
                        "a process can manage at most 64 arenas",
                        a == CXL_HWCC ? "HWcc" : "SWcc", r->host, size, start);
            return -1;
        }
        size_t got = 0;
        void *area = mi_arena_area(id, &got);
        if (area != start || got != size) {
            pod_err_set(err, "mimalloc manages %zu bytes at %p for a slice of %zu at %p", got,
                        area, size, start);
            return -1;
        }
        r->priv->arena_id[a] = id;
    }
    r->priv->arenas_ready = true;
    return 0;
}

static struct tls_heaps *tls_find(const struct cxl_region *r, bool create)
{
    struct tls_heaps *free_slot = NULL;
    for (int i = 0; i < TLS_REGIONS; i++) {
        if (tls_heaps[i].uid == r->uid) return &tls_heaps[i];
        if (!free_slot && tls_heaps[i].uid == 0) free_slot = &tls_heaps[i];
    }
    if (!create || !free_slot) return NULL;
    free_slot->uid = r->uid;
    free_slot->heap[0] = free_slot->heap[1] = NULL;
    return free_slot;
}

static mi_heap_t *thread_heap(struct cxl_region *r, enum cxl_area a)
{
    struct tls_heaps *t = tls_find(r, true);
    if (!t) {
        pod_error("a thread may use at most %d regions for allocation", TLS_REGIONS);
        return NULL;
    }
    if (!t->heap[a]) t->heap[a] = mi_heap_new_in_arena(r->priv->arena_id[a]);
    return t->heap[a];
}

static uint64_t *used_counter(struct cxl_region *r, enum cxl_area a)
{
    struct cxl_host_slot *s = &r->ctl->hosts[r->host];
    return a == CXL_HWCC ? &s->hwcc_used : &s->swcc_used;
}

static void count_failure(struct cxl_region *r, enum cxl_area a)
{
    struct cxl_host_slot *s = &r->ctl->hosts[r->host];
    __atomic_fetch_add(a == CXL_HWCC ? &s->hwcc_failures : &s->swcc_failures, 1,
                       __ATOMIC_RELAXED);
}

static cxl_off alloc_impl(struct cxl_region *r, enum cxl_area a, size_t size, bool zero)
{
    if (r->host < 0 || !r->priv->arenas_ready || size == 0) return CXL_NULL;
    mi_heap_t *heap = thread_heap(r, a);
    if (!heap) return CXL_NULL;
    uint64_t *used = used_counter(r, a);
    size_t charge = mi_good_size(size);
    if (a == CXL_HWCC) {
        /* Charge first, so concurrent allocations can never overshoot together. */
        uint64_t before = __atomic_fetch_add(used, charge, __ATOMIC_RELAXED);
        if (before + charge > r->sb->hwcc_quota) {
            __atomic_fetch_sub(used, charge, __ATOMIC_RELAXED);
            count_failure(r, a);
            return CXL_NULL;
        }
    } else {
        __atomic_fetch_add(used, charge, __ATOMIC_RELAXED);
    }
    void *p = zero ? mi_heap_zalloc(heap, size) : mi_heap_malloc(heap, size);
    if (!p) { /* the slice is full */
        __atomic_fetch_sub(used, charge, __ATOMIC_RELAXED);
        count_failure(r, a);
        return CXL_NULL;
    }
    size_t usable = mi_usable_size(p);
    if (usable != charge) __atomic_fetch_add(used, usable - charge, __ATOMIC_RELAXED);
    struct cxl_host_slot *s = &r->ctl->hosts[r->host];
    __atomic_fetch_add(a == CXL_HWCC ? &s->hwcc_objects : &s->swcc_objects, 1, __ATOMIC_RELAXED);
    return cxl_off_in(r, p);
}

cxl_off cxl_alloc(struct cxl_region *r, enum cxl_area a, size_t size)
{
    return alloc_impl(r, a, size, false);
}

cxl_off cxl_zalloc(struct cxl_region *r, enum cxl_area a, size_t size)
{
    return alloc_impl(r, a, size, true);
}

int cxl_owner_of(const struct cxl_region *r, cxl_off off, enum cxl_area *area)
{
    const struct cxl_superblock *sb = r->sb;
    for (int a = 0; a < 2; a++) {
        uint64_t lo = a == CXL_HWCC ? sb->hwcc_off : sb->swcc_off;
        uint64_t ss = a == CXL_HWCC ? sb->hwcc_slice_size : sb->swcc_slice_size;
        if (off >= lo && off < lo + ss * sb->nhosts) {
            if (area) *area = (enum cxl_area)a;
            return (int)((off - lo) / ss);
        }
    }
    return -1;
}

void cxl_free(struct cxl_region *r, enum cxl_area a, cxl_off off)
{
    if (off == CXL_NULL) return;
    enum cxl_area got;
    int owner = cxl_owner_of(r, off, &got);
    if (owner != r->host || got != a) {
        /* Freeing another host's object would corrupt its allocator
         * (region-alloc.md B7): refuse loudly instead. */
        pod_error("cxl_free: offset %#llx belongs to host %d's %s slice, not to host %d's %s "
                  "slice; not freed",
                  (unsigned long long)off, owner, got == CXL_HWCC ? "HWcc" : "SWcc", r->host,
                  a == CXL_HWCC ? "HWcc" : "SWcc");
        return;
    }
    void *p = cxl_ptr(r, off);
    size_t usable = mi_usable_size(p);
    mi_free(p);
    __atomic_fetch_sub(used_counter(r, a), usable, __ATOMIC_RELAXED);
    struct cxl_host_slot *s = &r->ctl->hosts[r->host];
    __atomic_fetch_sub(a == CXL_HWCC ? &s->hwcc_objects : &s->swcc_objects, 1, __ATOMIC_RELAXED);
}

void cxl_thread_detach(struct cxl_region *r)
{
    struct tls_heaps *t = tls_find(r, false);
    if (!t) return;
    /* mi_heap_destroy, never mi_heap_delete: delete would hand the heap's
     * pages to this thread's default heap, and plain malloc would then return
     * private memory inside the shared slice (region-alloc.md B2). */
    for (int a = 0; a < 2; a++)
        if (t->heap[a]) mi_heap_destroy(t->heap[a]);
    t->uid = 0;
    t->heap[0] = t->heap[1] = NULL;
}

void cxl_alloc_detach(struct cxl_region *r)
{
    cxl_thread_detach(r);
    r->priv->arenas_ready = false;
}

void cxl_usage_get(const struct cxl_region *r, int host, enum cxl_area a, struct cxl_usage *u)
{
    const struct cxl_host_slot *s = &r->ctl->hosts[host];
    bool hw = a == CXL_HWCC;
    u->used = __atomic_load_n(hw ? &s->hwcc_used : &s->swcc_used, __ATOMIC_RELAXED);
    u->objects = __atomic_load_n(hw ? &s->hwcc_objects : &s->swcc_objects, __ATOMIC_RELAXED);
    u->failures = __atomic_load_n(hw ? &s->hwcc_failures : &s->swcc_failures, __ATOMIC_RELAXED);
    u->quota = hw ? r->sb->hwcc_quota : r->sb->swcc_slice_size;
    u->slice_size = hw ? r->sb->hwcc_slice_size : r->sb->swcc_slice_size;
}
