/* The CXL index: B+-trees in the owner's HWcc slice, a per-host directory to
 * find them, and cross-host EBR for their nodes.
 *
 * Shared layout (all in the owner's HWcc slice, offsets only):
 *
 *   root slot CXL_ROOT_INDEX_DIR -> directory block
 *     directory block (512 B): magic, next block, 31 entries {id, header}
 *       id = table_id << 32 | part; header = offset of the index header
 *     index header (128 B): magic, owner, table id, partition, the
 *       partition's sentinel record and the bt_header (root ref, key width,
 *       node size) on the first cache line, which readers touch; on the
 *       second, the owner's key and live-node counters and writer lock word
 *     nodes: bt nodes of node_size bytes from xebr_alloc_hwcc
 *
 * The directory is append-only: an entry is written (id, then a release store
 * of its header offset) and never changes again, and blocks are only linked
 * (release store of `next`), never unlinked. So a reader needs no critical
 * section to search it and an entry it finds stays valid as long as the
 * owner process lives. Index headers are never freed either; only nodes are
 * reclaimed, through xebr.
 *
 * Which worker slot a node is retired on: the tree calls space->retire from
 * inside bt_insert/bt_upsert/bt_remove on the calling thread, so the write
 * wrappers note (thread-local) which worker is calling; the retire callback
 * hands the node to that worker's xebr slot. A retire outside a wrapper is a
 * bug (a write through cxl_index_tree) and aborts.
 *
 * Compaction builds a second tree from an ascending copy and switches the
 * root ref in the header. The owner's writers of the index are excluded
 * meanwhile (a counter/flag word on the header's second line, touched only
 * by the owner process), so the old tree no longer changes: a reader that
 * loaded the old root finishes in the old tree (same entries, every version
 * still valid), later ones start in the new one. Then the old nodes are
 * retired to EBR like any unlinked node. */
#include "pod/cxl_index.h"

#include <mimalloc.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/cpu.h"

#define DIR_MAGIC 0x5249445f58444e49ull /* "INDX_DIR" */
#define HDR_MAGIC 0x5844494c5843ull     /* "CXLIDX" */
#define DIR_BLOCK_BYTES 512u
#define DIR_ENTRIES ((DIR_BLOCK_BYTES - 16u) / 16u) /* 31 */
#define HDR_BYTES 128u

struct dir_entry {
    uint64_t id;  /* table_id << 32 | part; written before hdr */
    cxl_off hdr;  /* 0 = free (the end of the directory); release/acquire */
};

struct dir_block {
    uint64_t magic;
    cxl_off next; /* next block, 0 = none; release/acquire */
    struct dir_entry e[DIR_ENTRIES];
};
_Static_assert(sizeof(struct dir_block) == DIR_BLOCK_BYTES, "directory block size");

struct index_hdr {
    /* First cache line: what readers load (never changes but for bt.root). */
    uint64_t magic;
    uint32_t owner_host;
    uint32_t reserved0;
    uint32_t table_id;
    uint32_t part;
    cxl_off sentinel; /* the partition's sentinel record (release/acquire; 0: none yet) */
    bt_header bt; /* bytes 32..87: the root ref at 40 */
    uint64_t nkeys; /* entries (owner writes, anyone may read) */
    uint64_t reserved2[2];
    /* Second line, owner process only (atomics): */
    uint64_t live_nodes; /* allocated - retired */
    uint64_t wlock;      /* writers add 2 while writing; compaction sets bit 0 and
                            waits for the writers to leave */
};
_Static_assert(sizeof(struct index_hdr) == HDR_BYTES, "index header size");
_Static_assert(offsetof(struct index_hdr, bt) + offsetof(bt_header, root) < 64 &&
                   offsetof(struct index_hdr, live_nodes) >= 64,
               "readers' and the owner's words on separate lines");

struct cxl_index {
    bt_tree t;
    struct cxl_region *r;
    struct xebr *x;
    struct index_hdr *h;
    int owner;
    bool writable;
    uint64_t node_charge; /* mi_good_size(node_size) */
};

/* The worker whose write wrapper is running on this thread (see top). */
struct write_ctx {
    const struct cxl_index *ix;
    int worker;
};
static __thread struct write_ctx tls_write = {NULL, -1};

/* Directory changes of this process (one process per host). */
static pthread_mutex_t dir_mu = PTHREAD_MUTEX_INITIALIZER;

static inline uint64_t dir_id(uint32_t table_id, uint32_t part)
{
    return (uint64_t)table_id << 32 | part;
}

/* ---- node space ------------------------------------------------------------ */

static void *owner_alloc(void *ctx, size_t size)
{
    struct cxl_index *ix = ctx;
    void *node = xebr_alloc_hwcc(ix->x, size);
    if (node) __atomic_fetch_add(&ix->h->live_nodes, 1, __ATOMIC_RELAXED);
    return node;
}

static void owner_retire(void *ctx, void *node, size_t size)
{
    struct cxl_index *ix = ctx;
    if (tls_write.ix == NULL || tls_write.worker < 0) {
        pod_error("cxl index (table %u, partition %u): a node was retired outside "
                  "cxl_index_insert/upsert/remove (a write through cxl_index_tree?)",
                  ix->h->table_id, ix->h->part);
        abort();
    }
    __atomic_fetch_sub(&ix->h->live_nodes, 1, __ATOMIC_RELAXED);
    xebr_retire_hwcc(ix->x, tls_write.worker, node, size);
}

static void *reader_alloc(void *ctx, size_t size)
{
    (void)ctx;
    (void)size;
    return NULL; /* not the owner: never allocates */
}

static void reader_retire(void *ctx, void *node, size_t size)
{
    (void)node;
    (void)size;
    struct cxl_index *ix = ctx;
    pod_error("cxl index (table %u, partition %u): host %d tried to change host %d's index",
              ix->h->table_id, ix->h->part, ix->r->host, ix->owner);
    abort();
}

static void set_space(struct cxl_index *ix, bt_space *s)
{
    s->base = ix->r->base;
    s->ctx = ix;
    s->alloc = ix->writable ? owner_alloc : reader_alloc;
    s->retire = ix->writable ? owner_retire : reader_retire;
}

/* ---- directory --------------------------------------------------------------- */

/* Header offset of (table, part) in host's directory, or CXL_NULL. */
static cxl_off dir_find(const struct cxl_region *r, int host, uint64_t id)
{
    cxl_off boff = cxl_root_get(r, host, CXL_ROOT_INDEX_DIR);
    while (boff != CXL_NULL) {
        struct dir_block *b = cxl_ptr(r, boff);
        if (__atomic_load_n(&b->magic, __ATOMIC_RELAXED) != DIR_MAGIC) return CXL_NULL;
        for (unsigned i = 0; i < DIR_ENTRIES; i++) {
            cxl_off h = __atomic_load_n(&b->e[i].hdr, __ATOMIC_ACQUIRE);
            if (h == CXL_NULL) return CXL_NULL; /* entries fill in order */
            if (__atomic_load_n(&b->e[i].id, __ATOMIC_RELAXED) == id) return h;
        }
        boff = __atomic_load_n(&b->next, __ATOMIC_ACQUIRE);
    }
    return CXL_NULL;
}

static cxl_off new_dir_block(struct cxl_region *r)
{
    cxl_off off = cxl_zalloc(r, CXL_HWCC, sizeof(struct dir_block));
    if (off != CXL_NULL) {
        struct dir_block *b = cxl_ptr(r, off);
        __atomic_store_n(&b->magic, DIR_MAGIC, __ATOMIC_RELAXED);
    }
    return off;
}

/* A free entry of this host's directory, linking a new block when the last
 * one is full. Caller holds dir_mu; the entry stays free until published. */
static struct dir_entry *dir_reserve(struct cxl_region *r, pod_err *err)
{
    cxl_off boff = cxl_root_get(r, r->host, CXL_ROOT_INDEX_DIR);
    if (boff == CXL_NULL) {
        boff = new_dir_block(r);
        if (boff == CXL_NULL) goto nomem;
        cxl_root_publish(r, CXL_ROOT_INDEX_DIR, boff); /* release */
    }
    for (;;) {
        struct dir_block *b = cxl_ptr(r, boff);
        for (unsigned i = 0; i < DIR_ENTRIES; i++)
            if (__atomic_load_n(&b->e[i].hdr, __ATOMIC_RELAXED) == CXL_NULL) return &b->e[i];
        cxl_off next = __atomic_load_n(&b->next, __ATOMIC_RELAXED);
        if (next == CXL_NULL) {
            next = new_dir_block(r);
            if (next == CXL_NULL) goto nomem;
            __atomic_store_n(&b->next, next, __ATOMIC_RELEASE);
        }
        boff = next;
    }
nomem:
    pod_err_set(err, "cxl index: host %d's HWcc budget is exhausted (index directory)", r->host);
    return NULL;
}

/* Make entry e say id -> hdr: id first, then the release store readers
 * acquire. */
static void dir_publish(struct dir_entry *e, uint64_t id, cxl_off hdr)
{
    __atomic_store_n(&e->id, id, __ATOMIC_RELAXED);
    __atomic_store_n(&e->hdr, hdr, __ATOMIC_RELEASE);
}

/* ---- create / open / close ----------------------------------------------------- */

/* CXL_INDEX_DEFAULT_NODE_SIZE when it holds 8 entries (16-byte node header,
 * one more child than separators), else 0: the tree sizes the node for the
 * key as btree.h describes. */
static unsigned default_node_size(unsigned key_width)
{
    unsigned stride = (key_width + 7) & ~7u;
    return (CXL_INDEX_DEFAULT_NODE_SIZE - 24) / (stride + 8) >= 8 ? CXL_INDEX_DEFAULT_NODE_SIZE : 0;
}

/* The handle of owner's index on this host (writable by the owner only), its
 * header still to be set; NULL when out of memory. */
static struct cxl_index *index_new(struct cxl_region *r, struct xebr *x, int owner,
                                   pod_err *err)
{
    struct cxl_index *ix = calloc(1, sizeof *ix);
    if (!ix) {
        pod_err_set(err, "cxl index: out of memory");
        return NULL;
    }
    ix->r = r;
    ix->x = x;
    ix->owner = owner;
    ix->writable = r->host == owner;
    return ix;
}

struct cxl_index *cxl_index_create(struct cxl_region *r, struct xebr *x, uint32_t table_id,
                                   uint32_t part, unsigned key_width, unsigned node_size,
                                   pod_err *err)
{
    if (!r || r->host < 0) {
        pod_err_set(err, "cxl index: only a host (not an observer) creates indexes");
        return NULL;
    }
    if (!x || xebr_region(x) != r) {
        pod_err_set(err, "cxl index: the xebr view does not belong to this region handle");
        return NULL;
    }
    if (key_width < 1 || key_width > BT_MAX_KEY_WIDTH) {
        pod_err_set(err, "cxl index (table %u, partition %u): key width %u is not in 1..%u",
                    table_id, part, key_width, BT_MAX_KEY_WIDTH);
        return NULL;
    }
    if (node_size == 0) node_size = default_node_size(key_width);
    uint64_t id = dir_id(table_id, part);
    struct cxl_index *ix = index_new(r, x, r->host, err);
    if (!ix) return NULL;

    pthread_mutex_lock(&dir_mu);
    if (dir_find(r, r->host, id) != CXL_NULL) {
        pthread_mutex_unlock(&dir_mu);
        pod_err_set(err, "cxl index (table %u, partition %u) already exists on host %d",
                    table_id, part, r->host);
        free(ix);
        return NULL;
    }
    struct dir_entry *entry = dir_reserve(r, err);
    cxl_off hoff = entry ? cxl_zalloc(r, CXL_HWCC, sizeof(struct index_hdr)) : CXL_NULL;
    if (hoff == CXL_NULL) {
        pthread_mutex_unlock(&dir_mu);
        if (entry)
            pod_err_set(err, "cxl index (table %u, partition %u): host %d's HWcc budget is "
                        "exhausted", table_id, part, r->host);
        free(ix);
        return NULL;
    }
    ix->h = cxl_ptr(r, hoff);
    ix->h->owner_host = (uint32_t)r->host;
    ix->h->table_id = table_id;
    ix->h->part = part;
    bt_space space;
    set_space(ix, &space);
    bt_status st = bt_create(&ix->t, &ix->h->bt, &space,
                             &(bt_config){.key_width = key_width, .node_size = node_size});
    if (st != BT_OK) {
        pthread_mutex_unlock(&dir_mu);
        cxl_free(r, CXL_HWCC, hoff); /* never published, and bt_create allocated nothing */
        if (st == BT_NOMEM)
            pod_err_set(err, "cxl index (table %u, partition %u): host %d's HWcc budget is "
                        "exhausted", table_id, part, r->host);
        else
            pod_err_set(err, "cxl index (table %u, partition %u): node size %u does not fit "
                        "keys of %u bytes (a multiple of 8 in %u..%u holding at least 4 "
                        "entries)",
                        table_id, part, node_size, key_width, BT_MIN_NODE_SIZE,
                        BT_MAX_NODE_SIZE);
        free(ix);
        return NULL;
    }
    /* Everything the header holds is written; now make it findable. */
    __atomic_store_n(&ix->h->magic, HDR_MAGIC, __ATOMIC_RELEASE);
    dir_publish(entry, id, hoff);
    pthread_mutex_unlock(&dir_mu);
    ix->node_charge = mi_good_size(ix->t.node_size);
    return ix;
}

struct cxl_index *cxl_index_open(struct cxl_region *r, struct xebr *x, int owner_host,
                                 uint32_t table_id, uint32_t part, pod_err *err)
{
    if (!r || !x || xebr_region(x) != r) {
        pod_err_set(err, "cxl index: the xebr view does not belong to this region handle");
        return NULL;
    }
    if (owner_host < 0 || (uint32_t)owner_host >= r->sb->nhosts) {
        pod_err_set(err, "cxl index: host %d is not in this pod of %u hosts", owner_host,
                    r->sb->nhosts);
        return NULL;
    }
    cxl_off hoff = dir_find(r, owner_host, dir_id(table_id, part));
    if (hoff == CXL_NULL) {
        pod_err_set(err, "cxl index (table %u, partition %u): host %d has no such index",
                    table_id, part, owner_host);
        return NULL;
    }
    struct index_hdr *h = cxl_ptr(r, hoff);
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != HDR_MAGIC ||
        h->owner_host != (uint32_t)owner_host || h->table_id != table_id || h->part != part) {
        pod_err_set(err, "cxl index (table %u, partition %u): host %d's directory points at "
                    "offset %#llx, which is not that index",
                    table_id, part, owner_host, (unsigned long long)hoff);
        return NULL;
    }
    struct cxl_index *ix = index_new(r, x, owner_host, err);
    if (!ix) return NULL;
    ix->h = h;
    bt_space space;
    set_space(ix, &space);
    if (bt_attach(&ix->t, &h->bt, &space) != BT_OK) {
        pod_err_set(err, "cxl index (table %u, partition %u) of host %d: the tree header at "
                    "offset %#llx is damaged",
                    table_id, part, owner_host, (unsigned long long)hoff);
        free(ix);
        return NULL;
    }
    ix->node_charge = mi_good_size(ix->t.node_size);
    return ix;
}

void cxl_index_close(struct cxl_index *ix)
{
    free(ix);
}

bool cxl_index_is_owner(const struct cxl_index *ix)
{
    return ix->writable;
}

int cxl_index_owner(const struct cxl_index *ix)
{
    return ix->owner;
}

unsigned cxl_index_key_width(const struct cxl_index *ix)
{
    return ix->t.key_width;
}

const bt_tree *cxl_index_tree(const struct cxl_index *ix)
{
    return &ix->t;
}

/* ---- reads ------------------------------------------------------------------------ */

/* The reads run inside the worker's section of the cross-host EBR domain, so
 * that no node they pass is freed under them (a GNU statement expression:
 * the value of call). */
#define IN_SECTION(ix, worker, call)                                                          \
    ({                                                                                        \
        xebr_enter((ix)->x, worker);                                                          \
        bt_status st_ = (call);                                                               \
        xebr_exit((ix)->x, worker);                                                           \
        st_;                                                                                  \
    })

bt_status cxl_index_lookup(const struct cxl_index *ix, int worker, const void *key,
                           uint64_t *value)
{
    return IN_SECTION(ix, worker, bt_lookup(&ix->t, key, value));
}

bt_status cxl_index_next(const struct cxl_index *ix, int worker, const void *key, bool inclusive,
                         void *key_out, uint64_t *value)
{
    return IN_SECTION(ix, worker, bt_next(&ix->t, key, inclusive, key_out, value));
}

bt_status cxl_index_prev(const struct cxl_index *ix, int worker, const void *key, bool inclusive,
                         void *key_out, uint64_t *value)
{
    return IN_SECTION(ix, worker, bt_prev(&ix->t, key, inclusive, key_out, value));
}

bt_status cxl_index_scan_forward(const struct cxl_index *ix, int worker, const void *start,
                                 bool inclusive, bt_visit_fn fn, void *arg)
{
    return IN_SECTION(ix, worker, bt_scan_forward(&ix->t, start, inclusive, fn, arg));
}

bt_status cxl_index_scan_backward(const struct cxl_index *ix, int worker, const void *start,
                                  bool inclusive, bt_visit_fn fn, void *arg)
{
    return IN_SECTION(ix, worker, bt_scan_backward(&ix->t, start, inclusive, fn, arg));
}

/* ---- writes (owner) ------------------------------------------------------------------ */

static void pause_a_little(unsigned spins)
{
    if (spins < 64) {
        pod_cpu_relax();
    } else {
        sched_yield();
    }
}

static void writer_enter(struct index_hdr *h)
{
    for (unsigned spins = 0;; spins++) {
        uint64_t v = __atomic_load_n(&h->wlock, __ATOMIC_RELAXED);
        if (!(v & 1) && __atomic_compare_exchange_n(&h->wlock, &v, v + 2, false, __ATOMIC_ACQUIRE,
                                                    __ATOMIC_RELAXED))
            return;
        pause_a_little(spins);
    }
}

static void writer_exit(struct index_hdr *h)
{
    __atomic_fetch_sub(&h->wlock, 2, __ATOMIC_RELEASE);
}

/* Exclusive: no other writer (or compaction) of this index runs. */
static void exclusive_enter(struct index_hdr *h)
{
    for (unsigned spins = 0;; spins++) {
        uint64_t v = __atomic_load_n(&h->wlock, __ATOMIC_RELAXED);
        if (!(v & 1) && __atomic_compare_exchange_n(&h->wlock, &v, v | 1, false, __ATOMIC_ACQUIRE,
                                                    __ATOMIC_RELAXED))
            break;
        pause_a_little(spins);
    }
    for (unsigned spins = 0; __atomic_load_n(&h->wlock, __ATOMIC_ACQUIRE) != 1; spins++)
        pause_a_little(spins);
}

static void exclusive_exit(struct index_hdr *h)
{
    __atomic_store_n(&h->wlock, 0, __ATOMIC_RELEASE);
}

enum write_op { W_INSERT, W_UPSERT, W_REMOVE };

static bt_status do_write(const struct cxl_index *ix, int worker, enum write_op op,
                          const void *key, uint64_t value, bool *replaced, uint64_t *old)
{
    if (!ix->writable) return BT_INVALID;
    writer_enter(ix->h);
    xebr_enter(ix->x, worker);
    struct write_ctx saved = tls_write;
    tls_write = (struct write_ctx){ix, worker};
    bt_status st;
    switch (op) {
    case W_INSERT: st = bt_insert(&ix->t, key, value); break;
    case W_UPSERT: st = bt_upsert(&ix->t, key, value, replaced); break;
    default: st = bt_remove(&ix->t, key, old); break;
    }
    tls_write = saved;
    if (st == BT_OK && (op == W_INSERT || op == W_REMOVE || (op == W_UPSERT && !*replaced)))
        __atomic_fetch_add(&ix->h->nkeys, op == W_REMOVE ? (uint64_t)-1 : 1, __ATOMIC_RELAXED);
    xebr_exit(ix->x, worker);
    writer_exit(ix->h);
    return st;
}

bt_status cxl_index_insert(const struct cxl_index *ix, int worker, const void *key, uint64_t value)
{
    return do_write(ix, worker, W_INSERT, key, value, NULL, NULL);
}

bt_status cxl_index_upsert(const struct cxl_index *ix, int worker, const void *key, uint64_t value,
                           bool *replaced)
{
    bool r;
    return do_write(ix, worker, W_UPSERT, key, value, replaced ? replaced : &r, NULL);
}

bt_status cxl_index_remove(const struct cxl_index *ix, int worker, const void *key,
                           uint64_t *value)
{
    return do_write(ix, worker, W_REMOVE, key, 0, NULL, value);
}

/* ---- compaction ------------------------------------------------------------------------- */

struct copy_ctx {
    const bt_tree *to;
    bt_status st;
};

static bool copy_visit(void *arg, const void *key, uint64_t value)
{
    struct copy_ctx *c = arg;
    c->st = bt_insert(c->to, key, value);
    return c->st == BT_OK;
}

bt_status cxl_index_compact(const struct cxl_index *ix, int worker)
{
    if (!ix->writable) return BT_INVALID;
    /* No critical section: with the owner's writers excluded nothing of the
     * old tree is retired before the switch, and nothing this thread retires
     * is freed before its next exit/collect; a section held for the whole
     * copy would stall reclamation pod-wide. */
    exclusive_enter(ix->h);
    struct write_ctx saved = tls_write;
    tls_write = (struct write_ctx){ix, worker};

    /* The copy: ascending inserts fill each leaf but the last (append
     * splits), in a tree nobody else can see yet. */
    bt_header nh;
    bt_tree nt;
    bt_space space;
    set_space((struct cxl_index *)ix, &space);
    bt_status st = bt_create(&nt, &nh, &space,
                             &(bt_config){.key_width = ix->t.key_width,
                                          .node_size = ix->t.node_size});
    if (st == BT_OK) {
        struct copy_ctx c = {&nt, BT_OK};
        st = bt_scan_forward(&ix->t, NULL, true, copy_visit, &c);
        if (st == BT_OK) st = c.st;
        if (st != BT_OK) {
            bt_destroy(&nt); /* never published: its nodes just go through EBR */
        } else {
            /* Switch. A reader that loaded the old root keeps reading the old
             * tree, which no longer changes and holds the same entries; one
             * that loads the root from now on reads the new one. */
            bt_header old = ix->h->bt; /* private copy naming the old root */
            __atomic_store_n(&ix->h->bt.root, __atomic_load_n(&nh.root, __ATOMIC_RELAXED),
                             __ATOMIC_RELEASE);
            bt_tree ot = ix->t;
            ot.hdr = &old;
            bt_destroy(&ot); /* retires every old node to EBR */
        }
    }
    tls_write = saved;
    exclusive_exit(ix->h);
    return st;
}

/* ---- sentinel ------------------------------------------------------------------------------- */

void cxl_index_set_sentinel(const struct cxl_index *ix, cxl_off rec)
{
    if (ix->writable) __atomic_store_n(&ix->h->sentinel, rec, __ATOMIC_RELEASE);
}

cxl_off cxl_index_sentinel(const struct cxl_index *ix)
{
    return __atomic_load_n(&ix->h->sentinel, __ATOMIC_ACQUIRE);
}

/* ---- accounting -------------------------------------------------------------------------- */

uint64_t cxl_index_nkeys(const struct cxl_index *ix)
{
    return __atomic_load_n(&ix->h->nkeys, __ATOMIC_RELAXED);
}

int cxl_index_host_usage(const struct cxl_region *r, int host, struct cxl_index_usage *out)
{
    memset(out, 0, sizeof *out);
    if (host < 0 || (uint32_t)host >= r->sb->nhosts) return -1;
    cxl_off boff = cxl_root_get(r, host, CXL_ROOT_INDEX_DIR);
    while (boff != CXL_NULL) {
        struct dir_block *b = cxl_ptr(r, boff);
        if (__atomic_load_n(&b->magic, __ATOMIC_RELAXED) != DIR_MAGIC) return -1;
        for (unsigned i = 0; i < DIR_ENTRIES; i++) {
            cxl_off hoff = __atomic_load_n(&b->e[i].hdr, __ATOMIC_ACQUIRE);
            if (hoff == CXL_NULL) return 0;
            const struct index_hdr *h = cxl_ptr(r, hoff);
            if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != HDR_MAGIC) return -1;
            out->indexes++;
            out->keys += __atomic_load_n(&h->nkeys, __ATOMIC_RELAXED);
            out->hwcc_bytes += mi_good_size(sizeof(struct index_hdr)) +
                               __atomic_load_n(&h->live_nodes, __ATOMIC_RELAXED) *
                                   mi_good_size(h->bt.node_size);
        }
        boff = __atomic_load_n(&b->next, __ATOMIC_ACQUIRE);
    }
    return 0;
}


uint64_t cxl_index_hwcc_bytes(const struct cxl_index *ix)
{
    uint64_t nodes = __atomic_load_n(&ix->h->live_nodes, __ATOMIC_RELAXED);
    return mi_good_size(sizeof(struct index_hdr)) + nodes * ix->node_charge;
}

bt_status cxl_index_get_stats(const struct cxl_index *ix, int worker, struct cxl_index_stats *out)
{
    memset(out, 0, sizeof *out);
    xebr_enter(ix->x, worker);
    bt_status st = bt_get_stats(&ix->t, &out->tree);
    xebr_exit(ix->x, worker);
    out->table_id = ix->h->table_id;
    out->part = ix->h->part;
    out->owner_host = ix->owner;
    out->key_width = ix->t.key_width;
    out->node_size = ix->t.node_size;
    out->leaf_cap = ix->t.leaf_cap;
    out->inner_cap = ix->t.inner_cap;
    out->node_bytes = ix->node_charge;
    out->live_nodes = __atomic_load_n(&ix->h->live_nodes, __ATOMIC_RELAXED);
    out->hwcc_bytes = cxl_index_hwcc_bytes(ix);
    if (out->tree.keys) out->bytes_per_key = (double)out->hwcc_bytes / (double)out->tree.keys;
    if (out->tree.leaves)
        out->leaf_fill = (double)out->tree.keys / ((double)out->tree.leaves * ix->t.leaf_cap);
    return st;
}
