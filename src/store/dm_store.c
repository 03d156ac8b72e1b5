/* The dm record store (dm_store.h). A location is (table + 1) << 48 |
 * memory node << 40 | the record's offset in that memory node's pool, so
 * that a row operation knows its table's tuple size and its memory node
 * without another round trip.
 *
 * Placement over n memory nodes: a key's bucket chain lives on memory node
 * ((hash >> 32) * n) >> 32 of its hash, whose low bits pick the bucket, so
 * the buckets of every memory node stay evenly used. Each memory node has,
 * per table, its own catalog entry and hash index (sized for rows_hint / n
 * rows); the table's sentinel is on memory node 0. A key's record is
 * allocated on its memory node too (alloc is given the key).
 *
 * Hash index of a table: nbuckets head buckets of bucket_bytes (sized from
 * the table's rows_hint), each a header {lock word, next bucket} (struct
 * dm_bucket_head) and `slots` slots of {word: the record's location or 0,
 * key bytes padded to 8}; a head bucket leads a chain of overflow buckets
 * of the same bytes, taken from the pool's cursor (FAA) as it fills. A
 * lookup READs the chain's buckets one by one, without a lock, until the
 * key is found; it ignores slots whose word is 0. Insert and remove take the
 * head bucket's lock (CAS 0 -> 1) for the whole chain and READ the chain,
 * and then insert (RS_EXISTS if the key is anywhere in it): WRITE the key
 * into the first free slot, make it placed (a READ after it), CAS the
 * slot's word 0 -> location; or, the chain being full, take a bucket from
 * the cursor, WRITE the slot {location, key} into it, make it placed, and
 * CAS the last bucket's next 0 -> the new bucket, which publishes it;
 * remove: CAS the word location -> 0; then release the lock (FAA -1).
 * Slots never move and buckets are never unlinked, so a walk sees an entry
 * present throughout exactly once. RS_NOMEM only when the pool is full. A
 * lookup (or walk) that races a remove and a reuse of the slot can pair an
 * old word with new key bytes: the word names a record that was made
 * invalid before its removal and is never reused (records are kept), so the
 * protocol sees a dead record and starts over. */
#include "store/dm_store.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "dm/fabric.h"
#include "dm/nic_model.h"
#include "dm/pool.h"
#include "util/clock.h"
#include "util/crashpoint.h"
#include "util/lanes.h"
#include "util/log.h"

#define LOC_OFF_MASK (DM_POOL_MAX - 1)
#define LOC_MN_SHIFT 40
#define BUCKET_TARGET 256u      /* bytes: one READ resolves a key */
#define MAX_SLOTS 15u
#define MAX_KEY 4096u
/* the largest bucket: BUCKET_TARGET, or one slot of the largest key */
#define MAX_BUCKET_BYTES (BUCKET_TARGET + 8u + MAX_KEY)
#define DEFAULT_BUCKETS (1u << 14) /* rows_hint 0 */
#define MIN_BUCKETS 64u
#define MAX_BUCKETS (1ull << 40)
#define WALK_BYTES (64u << 10)      /* a walk READs head buckets this many bytes at a time */
#define BHEAD ((uint32_t)sizeof(struct dm_bucket_head))
#define LOCK_WAIT_MS 10000
#define CATALOG_WAIT_MS 10000
#define DM_LOG_TABLE (DM_MAX_TABLES - 1) /* the table id of the undo logs' records */
#define SLOT_OFF(slot) (DM_CN_SLOTS_OFF + (uint64_t)(slot) * sizeof(struct dm_cn_slot))

struct dm_rowhead { /* cxl_swcc_row without its tuple */
    uint32_t valid, tuple_size;
    uint64_t epoch_version;
};

/* A record's first 24 bytes: what a READ with word and header brings. */
struct dm_rechead {
    uint64_t word;
    struct dm_rowhead h;
};

#define OWNER_CACHE_MS 20 /* owner_check trusts "it lives" this long */

struct dm_table {
    bool present;
    struct dm_catalog_entry *e; /* the table's catalog entry on each memory node */
};

struct memnode {
    int peer;
    struct fab_region region; /* as its bootstrap reply gave it: a handle's endpoint adds it */
    int boot_fd;             /* held open: the memory node sees this compute node leave */
    char label[160];
    uint64_t pool_size;
    unsigned char name[FAB_NAME_MAX]; /* its fabric address: two sockets, one memory node? */
    size_t name_len;
};

/* The store as opened (the root), or a handle of it for one user (attach):
 * a handle has its own endpoint, scratch, pending copies and counters and
 * shares the root's tables; its other fields are copies of the root's. */
struct dm_store {
    struct record_store base;
    pthread_mutex_t mu;      /* the endpoint and the scratch below */
    struct fab *f;
    struct dm_store *root;   /* itself for the root */
    struct dm_store *handles; /* the root's: its handles (next_handle), under mu */
    struct dm_store *next_handle;
    struct nic_model_params nic; /* the root's NIC model, for its handles (nic_on) */
    bool nic_on;
    char pod[DM_POD_NAME_MAX];
    unsigned nmn;
    struct memnode mn[DM_MAX_MEMNODES];
    struct dm_table *t;      /* the root's tables[] */
    struct dm_table tables[DM_MAX_TABLES];
    uint64_t freed;
    /* what run() sent (atomic: counters() reads them without the lock);
     * by enum fab_op_kind, and the batches waited for */
    uint64_t ops[4], round_trips;
    /* this compute node's slot (0: a client that is not one) and what
     * owner_check last learnt of each slot: alive in incarnation
     * alive_inc[s] until alive_until[s] (ms) */
    uint32_t slot, my_inc;
    rs_loc logs_old, logs_fresh; /* logs to switch to once our previous run is recovered */
    uint32_t logs_fresh_bytes;
    uint64_t conn_gen;       /* which connection of the slot this is (the conn word's id) */
    /* Backups (pool.h, docs/dm.md "Replication"): every memory node's area 0
     * is copied to area j of memory node (mn + j) % nmn, j = 1..replicas,
     * each area `area` bytes. pend: the copies' record words still to be
     * written after CASes that took them (flushed before the next change
     * that reaches that memory node). */
    uint32_t replicas;
    uint64_t area;
    struct pend { unsigned mn; uint64_t off, val; } *pend, *flushing;
    uint32_t npend, pend_cap;
    struct rs_op *mops;      /* a mirrored batch's first step */
    uint32_t *mfrom;         /* mops[j] is ops[mfrom[j]], or UINT32_MAX: a copy's op */
    uint32_t mcap;
    /* a compute node stops when a memory node's connection closes */
    pthread_t watcher;
    int watch_stop;          /* an eventfd that stops the watcher; -1: none */
    uint32_t alive_inc[DM_CN_SLOTS];
    uint64_t alive_until[DM_CN_SLOTS];
    /* scratch of a batch */
    struct fab_op *fops;
    int *fpeer;              /* fops[j] goes to peer fpeer[j] */
    uint64_t probe[DM_MAX_MEMNODES]; /* where the READs that place writes land */
    struct dm_rechead *heads;
    struct rs_op *grouped;   /* a batch's ops grouped by memory node */
    uint32_t *from;          /* grouped[j] is ops[from[j]] */
    uint32_t cap;
    unsigned char *bucket;   /* one bucket: MAX_BUCKET_BYTES */
};

static inline struct dm_store *ds(struct record_store *s) { return (struct dm_store *)s; }

static inline uint64_t loc_off(rs_loc l) { return l & LOC_OFF_MASK; }
static inline uint32_t loc_table(rs_loc l) { return (uint32_t)(l >> 48) - 1; }
static inline rs_loc make_loc(uint32_t table, unsigned mn, uint64_t off)
{
    return ((uint64_t)(table + 1) << 48) | (uint64_t)mn << LOC_MN_SHIFT | off;
}
static inline uint64_t round8(uint64_t v) { return (v + 7) & ~7ull; }
/* A location of the store's own bytes (header, catalog, index): no table,
 * offsets taken as they are. */
#define RAW_TABLE UINT32_MAX
static inline rs_loc raw_loc(unsigned mn, uint64_t off) { return (uint64_t)mn << LOC_MN_SHIFT | off; }

unsigned rs_dm_loc_memnode(rs_loc loc) { return (unsigned)(loc >> LOC_MN_SHIFT) & 0xff; }

/* While waiting on another user: the thread's next lane (src/util/lanes.h),
 * which may be the one to let go, or the CPU. */
static void yield_cpu(void)
{
    if (lanes_count() > 1) lanes_yield();
    else sched_yield();
}

static void memnode_gone(struct dm_store *d, unsigned mn);

static void fatal(struct dm_store *d, unsigned mn, const pod_err *e)
{
    /* an operation that failed because a memory node died (a wave may go
     * to several): say which */
    struct pollfd p[DM_MAX_MEMNODES];
    for (unsigned i = 0; i < d->nmn; i++)
        p[i] = (struct pollfd){.fd = d->mn[i].boot_fd, .events = POLLIN | POLLRDHUP};
    if (poll(p, d->nmn, 1000) > 0)
        for (unsigned i = 0; i < d->nmn; i++)
            if (p[i].revents) memnode_gone(d, i);
    fprintf(stderr, "dm record store (memory node %u, %s): %s; this compute node cannot go on\n",
            mn, d->mn[mn].label, e->msg);
    abort();
}

/* The memory node of a location; one this store does not have is fatal. */
static unsigned mn_of(struct dm_store *d, rs_loc loc)
{
    unsigned mn = rs_dm_loc_memnode(loc);
    if (mn < d->nmn) return mn;
    pod_err e;
    pod_err_set(&e, "location 0x%llx names memory node %u of %u", (unsigned long long)loc, mn,
                d->nmn);
    fatal(d, 0, &e);
    return 0;
}

static void run(struct dm_store *d, unsigned mn, struct fab_op *ops, uint32_t n)
{
    pod_err e;
    for (uint32_t i = 0; i < n; i++) __atomic_fetch_add(&d->ops[ops[i].kind], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&d->round_trips, 1, __ATOMIC_RELAXED);
    if (fab_batch(d->f, d->mn[mn].peer, ops, n, &e) != 0) fatal(d, mn, &e);
}

static void counters_add(const struct dm_store *d, struct rs_counters *out)
{
    out->reads += __atomic_load_n(&d->ops[FAB_READ], __ATOMIC_RELAXED);
    out->writes += __atomic_load_n(&d->ops[FAB_WRITE], __ATOMIC_RELAXED);
    out->cas += __atomic_load_n(&d->ops[FAB_CAS], __ATOMIC_RELAXED);
    out->faa += __atomic_load_n(&d->ops[FAB_FAA], __ATOMIC_RELAXED);
    out->round_trips += __atomic_load_n(&d->round_trips, __ATOMIC_RELAXED);
}

/* The root's and every handle's. */
static void counters(struct record_store *s, struct rs_counters *out)
{
    struct dm_store *r = ds(s)->root;
    *out = (struct rs_counters){0};
    counters_add(r, out);
    for (struct dm_store *h = __atomic_load_n(&r->handles, __ATOMIC_ACQUIRE); h; h = h->next_handle)
        counters_add(h, out);
}

/* The store's own operations on raw offsets go through batch_locked like
 * the records' do, so that a pod with backups copies them too. */
static void batch_locked(struct dm_store *d, struct rs_op *ops, uint32_t n);
static void pend_flush(struct dm_store *d, uint32_t mns);
static uint32_t copies_of(const struct dm_store *d, unsigned mn);

/* FAA on a raw offset; with backups, the copies' FAAs are placed first (a
 * copy's cursor never lags its memory node's: docs/dm.md, "Replication"). */
static uint64_t faa(struct dm_store *d, unsigned mn, uint64_t off, uint64_t add)
{
    struct rs_op o = {.kind = RS_OP_FAA, .loc = raw_loc(mn, off), .add = add};
    batch_locked(d, &o, 1);
    return o.old;
}

/* CAS on a raw offset; with backups, a CAS that took is written to the
 * copies before this returns. */
static uint64_t cas(struct dm_store *d, unsigned mn, uint64_t off, uint64_t compare, uint64_t swap)
{
    struct rs_op o = {.kind = RS_OP_CAS, .loc = raw_loc(mn, off), .expected = compare,
                      .desired = swap};
    batch_locked(d, &o, 1);
    if (o.ok && d->replicas) pend_flush(d, copies_of(d, mn));
    return o.old;
}

static void rd(struct dm_store *d, unsigned mn, uint64_t off, void *buf, uint32_t len)
{
    struct rs_op o = {.kind = RS_OP_READ, .loc = raw_loc(mn, off), .buf = buf, .len = len};
    batch_locked(d, &o, 1);
}

/* WRITE buf, and return once it is placed at the memory node and its
 * copies (RS_OP_SYNC: a READ behind the WRITE on the same endpoint returns
 * only after the write is placed: RMA read-after-write order, which shm and
 * rxm give; rxm completes a WRITE when it is sent, so its completion alone
 * would not do). */
static void write_placed(struct dm_store *d, unsigned mn, uint64_t off, const void *buf,
                         uint32_t len)
{
    struct rs_op o[2] = {{.kind = RS_OP_WRITE, .loc = raw_loc(mn, off), .buf = (void *)buf,
                          .len = len},
                         {.kind = RS_OP_SYNC}};
    batch_locked(d, o, 2);
}

static uint64_t ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t hash_key(const void *key, uint32_t len)
{
    const unsigned char *p = key;
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint32_t i = 0; i < len; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

static struct dm_table *table_of(struct dm_store *d, uint32_t id)
{
    /* present is set after e, under the root's lock (table_add) */
    return id < DM_MAX_TABLES && __atomic_load_n(&d->t[id].present, __ATOMIC_ACQUIRE) ? &d->t[id]
                                                                                      : NULL;
}

/* ---- the catalog ------------------------------------------------------------- */

/* Head buckets for rows_hint rows: about rows_hint / (slots * 0.7), a power
 * of two, at least MIN_BUCKETS, the index at most a quarter of the pool
 * (overflow buckets take the rest). rows_hint 0: DEFAULT_BUCKETS, the index
 * at most 1/16 of the pool. */
static uint64_t bucket_count(uint64_t rows_hint, uint32_t slots, uint32_t bucket_bytes,
                             uint64_t pool_size)
{
    uint64_t nb = DEFAULT_BUCKETS, cap = pool_size / 16;
    if (rows_hint) {
        uint64_t full = rows_hint / slots + 1; /* buckets, were they full; then / 0.7 */
        uint64_t want = full > MAX_BUCKETS ? MAX_BUCKETS : full + (3 * full + 6) / 7;
        for (nb = MIN_BUCKETS; nb < want;) nb *= 2;
        cap = pool_size / 4;
    }
    while (nb > MIN_BUCKETS && nb * bucket_bytes > cap) nb /= 2;
    return nb;
}

/* Under d->mu: table def's catalog entry on memory node mn, laid out from
 * want if this compute node is the first to add it there (the sentinel
 * only on memory node 0), else waited for and checked against want. */
static int catalog_join(struct dm_store *d, unsigned mn, const struct dm_catalog_entry *want,
                        struct dm_catalog_entry *got, pod_err *err)
{
    const char *label = d->mn[mn].label;
    uint32_t id = want->table_id;
    uint64_t ent_off = DM_CATALOG_OFF + (uint64_t)id * DM_CATALOG_ENTRY;
    uint64_t old = cas(d, mn, ent_off, DM_CAT_FREE, DM_CAT_CREATING);
    if (old == DM_CAT_FREE) { /* the first: lay the table out */
        /* the index, then (memory node 0) the sentinel record */
        uint64_t ix_bytes = (want->nbuckets * want->bucket_bytes + 63) & ~63ull;
        uint64_t bytes = ix_bytes + (mn == 0 ? want->record_bytes : 0);
        uint64_t at = faa(d, mn, offsetof(struct dm_pool_header, cursor), bytes);
        if (at + bytes > d->mn[mn].pool_size) {
            cas(d, mn, ent_off, DM_CAT_CREATING, DM_CAT_FREE);
            pod_err_set(err, "dm record store: the pool of memory node %u (%s) is full: no room "
                        "for the %llu-byte index of table %u", mn, label,
                        (unsigned long long)bytes, id);
            return -1;
        }
        *got = *want;
        got->index_off = at; /* fresh pool memory: zero */
        if (mn == 0) {
            got->sentinel_off = at + ix_bytes;
            struct dm_rowhead sh = {.valid = 0, .tuple_size = want->tuple_size};
            write_placed(d, mn, got->sentinel_off + 8, &sh, sizeof sh);
        }
        got->state = DM_CAT_CREATING;
        write_placed(d, mn, ent_off + 8, (const unsigned char *)got + 8, DM_CATALOG_ENTRY - 8);
        cas(d, mn, ent_off, DM_CAT_CREATING, DM_CAT_READY);
        got->state = DM_CAT_READY;
        return 0;
    }
    uint64_t until = ms_now() + CATALOG_WAIT_MS;
    for (;;) {
        rd(d, mn, ent_off, got, sizeof *got);
        if (got->state == DM_CAT_READY) break;
        if (ms_now() > until) {
            pod_err_set(err, "dm record store: table %u on memory node %u (%s) stayed "
                        "half-created for %d ms (its creator died?)", id, mn, label,
                        CATALOG_WAIT_MS);
            return -1;
        }
        sched_yield();
    }
    if (got->key_size != want->key_size || got->tuple_size != want->tuple_size ||
        got->record_bytes != want->record_bytes || got->table_id != id ||
        got->bucket_bytes != want->bucket_bytes || (mn == 0) != (got->sentinel_off != 0)) {
        pod_err_set(err, "dm record store: catalog mismatch for table %u on memory node %u (%s): "
                    "it was created with keys of %u bytes and tuples of %u bytes, this compute "
                    "node declares keys of %u bytes and tuples of %u bytes", id, mn, label,
                    got->key_size, got->tuple_size, want->key_size, want->tuple_size);
        return -1;
    }
    return 0;
}

static int table_add(struct record_store *s, const struct rs_table_def *def, pod_err *err)
{
    struct dm_store *d = ds(s)->root;
    if (def->id >= DM_LOG_TABLE) {
        pod_err_set(err, "dm record store: table id %u is beyond the catalog's %u", def->id,
                    DM_LOG_TABLE);
        return -1;
    }
    if (d->t[def->id].present) {
        pod_err_set(err, "dm record store: table %u added twice", def->id);
        return -1;
    }
    if (def->tuple_size > (1u << 24) || def->key_size == 0 || def->key_size > MAX_KEY) {
        pod_err_set(err, "dm record store: table %u: key of %u bytes or tuple of %u bytes is out "
                    "of range", def->id, def->key_size, def->tuple_size);
        return -1;
    }
    struct dm_catalog_entry want = {.table_id = def->id, .key_size = def->key_size,
                                    .tuple_size = def->tuple_size};
    want.record_bytes = (uint32_t)round8(8 + sizeof(struct dm_rowhead) + def->tuple_size);
    want.slot_bytes = (uint32_t)(8 + round8(def->key_size));
    uint32_t slots = (BUCKET_TARGET - BHEAD) / want.slot_bytes;
    want.slots = slots < 1 ? 1 : slots > MAX_SLOTS ? MAX_SLOTS : slots;
    want.bucket_bytes = BHEAD + want.slots * want.slot_bytes;
    uint64_t rows = def->rows_hint ? (def->rows_hint + d->nmn - 1) / d->nmn : 0;
    struct dm_catalog_entry *e = calloc(d->nmn, sizeof *e);
    if (!e) {
        pod_err_set(err, "dm record store: out of memory");
        return -1;
    }
    pthread_mutex_lock(&d->mu);
    for (unsigned mn = 0; mn < d->nmn; mn++) {
        want.nbuckets = bucket_count(rows, want.slots, want.bucket_bytes, d->mn[mn].pool_size);
        if (catalog_join(d, mn, &want, &e[mn], err) != 0) goto fail;
    }
    d->t[def->id].e = e;
    __atomic_store_n(&d->t[def->id].present, true, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&d->mu);
    return 0;
fail:
    pthread_mutex_unlock(&d->mu);
    free(e);
    return -1;
}

/* ---- the index ----------------------------------------------------------------- */

/* Where a key's entry lives: its memory node, that memory node's catalog
 * entry of the table, and the key's head bucket there. */
struct place {
    unsigned mn;
    const struct dm_catalog_entry *e;
    uint64_t b;
};

static struct place place_of(struct dm_store *d, uint32_t table, const void *key)
{
    const struct dm_table *t = table_of(d, table);
    uint64_t h = hash_key(key, t->e[0].key_size);
    struct place p = {.mn = (unsigned)(((h >> 32) * d->nmn) >> 32)};
    p.e = &t->e[p.mn];
    p.b = p.e->index_off + (h & (p.e->nbuckets - 1)) * p.e->bucket_bytes;
    return p;
}

unsigned rs_dm_key_memnode(struct record_store *s, uint32_t table, const void *key)
{
    return place_of(ds(s), table, key).mn;
}

static uint64_t slot_word(const unsigned char *bucket, const struct dm_catalog_entry *e, uint32_t i)
{
    uint64_t w;
    memcpy(&w, bucket + BHEAD + (size_t)i * e->slot_bytes, 8);
    return w;
}

static uint64_t next_of(const unsigned char *bucket)
{
    uint64_t n;
    memcpy(&n, bucket + offsetof(struct dm_bucket_head, next), 8);
    return n;
}

/* A chain cannot hold more buckets than the pool: one that seems to is
 * corrupt (a loop), and going on would never end. */
static void chain_check(struct dm_store *d, unsigned mn, const struct dm_catalog_entry *e,
                        uint64_t hops, uint64_t head)
{
    if (hops <= d->mn[mn].pool_size / e->bucket_bytes) return;
    pod_err er;
    pod_err_set(&er, "the overflow chain of index bucket at offset %llu of table %u is longer "
                "than the pool holds (a loop?)", (unsigned long long)head, e->table_id);
    fatal(d, mn, &er);
}

/* Where a chain search ended (chain_find). */
struct chain_pos {
    uint64_t slot;   /* the key's slot (its offset), 0: not in the chain */
    uint64_t word;   /* that slot's word */
    uint64_t free;   /* the first free slot of the chain, 0: none */
    uint64_t last;   /* the chain's last bucket (when the key is not in it) */
};

/* Under d->mu: READ the chain from head bucket pl->b, one bucket at a time
 * into d->bucket, until key's slot. Without the chain's lock (a lookup) a
 * bucket appended meanwhile is either seen whole or not at all: its link is
 * published only once its bytes are placed. */
static struct chain_pos chain_find(struct dm_store *d, const struct place *pl, const void *key)
{
    const struct dm_catalog_entry *e = pl->e;
    struct chain_pos p = {0};
    for (uint64_t at = pl->b, hops = 0;; hops++) {
        chain_check(d, pl->mn, e, hops, pl->b);
        rd(d, pl->mn, at, d->bucket, e->bucket_bytes);
        for (uint32_t i = 0; i < e->slots; i++) {
            uint64_t w = slot_word(d->bucket, e, i), so = at + BHEAD + (uint64_t)i * e->slot_bytes;
            const unsigned char *k = d->bucket + BHEAD + (size_t)i * e->slot_bytes + 8;
            if (w && memcmp(k, key, e->key_size) == 0) {
                p.slot = so;
                p.word = w;
                return p;
            }
            if (!w && !p.free) p.free = so;
        }
        uint64_t next = next_of(d->bucket);
        if (!next) {
            p.last = at;
            return p;
        }
        at = next;
    }
}

static int lookup(struct record_store *s, uint32_t table, const void *key, rs_loc *loc)
{
    struct dm_store *d = ds(s);
    struct place pl = place_of(d, table, key);
    pthread_mutex_lock(&d->mu);
    struct chain_pos p = chain_find(d, &pl, key);
    pthread_mutex_unlock(&d->mu);
    if (!p.slot) return RS_MISSING;
    *loc = p.word;
    return RS_OK;
}

/* The chains of n keys walked side by side: one wave of READs (to every
 * memory node at once) per level of the chains still searched. */
static int lookup_many(struct record_store *s, uint32_t table, const void *keys, uint32_t n,
                       rs_loc *locs)
{
    struct dm_store *d = ds(s);
    const struct dm_table *t = table_of(d, table);
    uint32_t ks = t->e[0].key_size, bb = t->e[0].bucket_bytes;
    struct place *pl = malloc((size_t)n * sizeof *pl);
    uint64_t *at = malloc((size_t)n * sizeof *at);
    uint32_t *left = malloc((size_t)n * sizeof *left);
    struct rs_op *ops = malloc((size_t)n * sizeof *ops);
    unsigned char *buf = malloc((size_t)n * bb);
    int rc = pl && at && left && ops && buf ? RS_OK : RS_NOMEM;
    uint32_t m = 0;
    for (uint32_t i = 0; rc == RS_OK && i < n; i++) {
        pl[i] = place_of(d, table, (const unsigned char *)keys + (size_t)i * ks);
        at[i] = pl[i].b;
        locs[i] = 0;
        left[m++] = i;
    }
    pthread_mutex_lock(&d->mu);
    for (uint64_t hops = 0; rc == RS_OK && m; hops++) {
        for (uint32_t j = 0; j < m; j++) {
            uint32_t i = left[j];
            chain_check(d, pl[i].mn, pl[i].e, hops, pl[i].b);
            ops[j] = (struct rs_op){.kind = RS_OP_READ, .loc = raw_loc(pl[i].mn, at[i]),
                                    .buf = buf + (size_t)i * bb, .len = bb};
        }
        batch_locked(d, ops, m);
        uint32_t still = 0;
        for (uint32_t j = 0; j < m; j++) {
            uint32_t i = left[j];
            const unsigned char *bk = buf + (size_t)i * bb, *key = (const unsigned char *)keys +
                                                                   (size_t)i * ks;
            for (uint32_t k = 0; k < pl[i].e->slots && !locs[i]; k++) {
                uint64_t w = slot_word(bk, pl[i].e, k);
                if (w && memcmp(bk + BHEAD + (size_t)k * pl[i].e->slot_bytes + 8, key, ks) == 0)
                    locs[i] = w;
            }
            if (!locs[i] && next_of(bk)) {
                at[i] = next_of(bk);
                left[still++] = i;
            }
        }
        m = still;
    }
    pthread_mutex_unlock(&d->mu);
    free(pl);
    free(at);
    free(left);
    free(ops);
    free(buf);
    return rc;
}

static int neighbour(struct record_store *s, uint32_t table, const void *key, bool inclusive,
                     bool backward, void *key_out, rs_loc *loc)
{
    (void)s, (void)table, (void)key, (void)inclusive, (void)backward, (void)key_out, (void)loc;
    return RS_MISSING; /* not ordered: rs-2pl never asks */
}

/* The slot of this compute node and which connection of it, as a bucket
 * lock's word holds them (pool.h, struct dm_bucket_head). */
static uint64_t bucket_owner(const struct dm_store *d)
{
    return DM_BUCKET_TAKEN | (uint64_t)d->slot << 56 | (d->conn_gen & DM_CONN_ID_MASK);
}

static unsigned bucket_slot(uint64_t w) { return (unsigned)(w >> 56) & 0x7fu; }

/* The compute node that took a bucket lock (its word w) is gone: its slot's
 * connection is closed or is another one. Index changes are single CASes
 * on placed bytes, so the chain it left is whole. */
static bool bucket_holder_gone(struct dm_store *d, uint64_t w)
{
    unsigned slot = bucket_slot(w);
    if (!slot || slot >= DM_CN_SLOTS) return false; /* a client that is not a compute node */
    uint64_t conn;
    rd(d, 0, SLOT_OFF(slot) + offsetof(struct dm_cn_slot, conn), &conn, sizeof conn);
    return !(conn & DM_CN_CONNECTED) || (conn & DM_CONN_ID_MASK) != (w & DM_CONN_ID_MASK);
}

static void bucket_lock(struct dm_store *d, unsigned mn, uint64_t b)
{
    uint64_t until = 0, mine = bucket_owner(d);
    for (unsigned tries = 0;; tries++) {
        uint64_t w = cas(d, mn, b, 0, mine);
        if (w == 0) return;
        if (tries % 64 == 63 && bucket_holder_gone(d, w) && cas(d, mn, b, w, mine) == w) {
            pod_warn("dm record store: took over the lock of index bucket %llu on memory node "
                     "%u from compute node slot %u, which is gone", (unsigned long long)b, mn,
                     bucket_slot(w));
            return;
        }
        if (!until) until = ms_now() + LOCK_WAIT_MS;
        else if (ms_now() > until) {
            pod_err e;
            pod_err_set(&e, "the lock of index bucket at offset %llu stayed taken for %d ms (a "
                        "compute node died holding it?)", (unsigned long long)b, LOCK_WAIT_MS);
            fatal(d, mn, &e);
        }
        if (tries > 4) yield_cpu();
    }
}

/* A full chain: a bucket from the cursor holding key -> loc in its first
 * slot, placed, then linked after the chain's last bucket. Under d->mu and
 * the chain's lock. */
static int chain_append(struct dm_store *d, const struct place *pl, uint64_t last,
                        const void *key, rs_loc loc)
{
    const struct dm_catalog_entry *e = pl->e;
    uint64_t nb = faa(d, pl->mn, offsetof(struct dm_pool_header, cursor), e->bucket_bytes);
    if (nb + e->bucket_bytes > d->mn[pl->mn].pool_size) return RS_NOMEM;
    /* fresh pool memory: its lock, next and other slots are zero */
    memcpy(d->bucket, &loc, 8);
    memcpy(d->bucket + 8, key, e->key_size);
    write_placed(d, pl->mn, nb + BHEAD, d->bucket, 8 + e->key_size);
    /* under the chain's lock nothing else links after last */
    return cas(d, pl->mn, last + offsetof(struct dm_bucket_head, next), 0, nb) == 0 ? RS_OK
                                                                                   : RS_NOMEM;
}

static int index_insert(struct record_store *s, uint32_t table, const void *key, rs_loc loc)
{
    struct dm_store *d = ds(s);
    struct place pl = place_of(d, table, key);
    pthread_mutex_lock(&d->mu);
    bucket_lock(d, pl.mn, pl.b);
    pod_crash_point("dm-bucket-locked");
    struct chain_pos p = chain_find(d, &pl, key);
    int rc = RS_NOMEM;
    if (p.slot) {
        rc = RS_EXISTS;
    } else if (p.free) {
        /* the key, placed before the word that makes the slot visible */
        write_placed(d, pl.mn, p.free + 8, key, pl.e->key_size);
        if (cas(d, pl.mn, p.free, 0, loc) == 0) rc = RS_OK; /* under the lock it cannot fail */
    } else {
        rc = chain_append(d, &pl, p.last, key, loc);
    }
    faa(d, pl.mn, pl.b, (uint64_t)0 - bucket_owner(d));
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static int index_remove(struct record_store *s, uint32_t table, const void *key)
{
    struct dm_store *d = ds(s);
    struct place pl = place_of(d, table, key);
    pthread_mutex_lock(&d->mu);
    bucket_lock(d, pl.mn, pl.b);
    struct chain_pos p = chain_find(d, &pl, key);
    int rc = RS_MISSING;
    if (p.slot && cas(d, pl.mn, p.slot, p.word, 0) == p.word) rc = RS_OK;
    faa(d, pl.mn, pl.b, (uint64_t)0 - bucket_owner(d));
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* Visit the slots of buckets[0..n) (READ into buf); gather their next
 * buckets into next[], *m of them. False when fn stopped the walk. */
static bool walk_buckets(const struct dm_catalog_entry *e, const unsigned char *buf, uint64_t n,
                         rs_walk_fn fn, void *arg, uint64_t *next, uint64_t *m)
{
    *m = 0;
    for (uint64_t j = 0; j < n; j++) {
        const unsigned char *bk = buf + j * e->bucket_bytes;
        for (uint32_t i = 0; i < e->slots; i++) {
            uint64_t w = slot_word(bk, e, i);
            if (w && !fn(arg, bk + BHEAD + (size_t)i * e->slot_bytes + 8, w)) return false;
        }
        if (next_of(bk)) next[(*m)++] = next_of(bk);
    }
    return true;
}

/* One memory node's index of a table: head buckets WALK_BYTES at a time
 * (one READ), then their chains a level at a time (one batch of READs per
 * level, at most as many buckets as the heads). Work: one pass over the
 * index and its overflow buckets; memory: one chunk's buffer; d->mu is held
 * for one READ or batch at a time and never while fn runs (fn may use the
 * store). False when fn stopped the walk; *rc RS_NOMEM when out of memory. */
static bool walk_mn(struct dm_store *d, unsigned mn, const struct dm_catalog_entry *e,
                    rs_walk_fn fn, void *arg, int *rc)
{
    uint64_t per = WALK_BYTES / e->bucket_bytes ? WALK_BYTES / e->bucket_bytes : 1;
    if (per > e->nbuckets) per = e->nbuckets;
    unsigned char *buf = malloc(per * e->bucket_bytes);
    uint64_t *next = malloc(per * sizeof *next);
    struct fab_op *ops = malloc(per * sizeof *ops);
    *rc = buf && next && ops ? RS_OK : RS_NOMEM;
    bool go = *rc == RS_OK;
    for (uint64_t first = 0; go && first < e->nbuckets; first += per) {
        uint64_t n = e->nbuckets - first < per ? e->nbuckets - first : per, m;
        pthread_mutex_lock(&d->mu);
        rd(d, mn, e->index_off + first * e->bucket_bytes, buf, (uint32_t)(n * e->bucket_bytes));
        pthread_mutex_unlock(&d->mu);
        for (uint64_t level = 0;; level++) {
            go = walk_buckets(e, buf, n, fn, arg, next, &m);
            if (!go || !m) break;
            chain_check(d, mn, e, level + 1, e->index_off + first * e->bucket_bytes);
            for (uint64_t j = 0; j < m; j++)
                ops[j] = (struct fab_op){.kind = FAB_READ, .off = next[j],
                                         .buf = buf + j * e->bucket_bytes, .len = e->bucket_bytes};
            pthread_mutex_lock(&d->mu);
            run(d, mn, ops, (uint32_t)m);
            pthread_mutex_unlock(&d->mu);
            n = m;
        }
    }
    free(buf);
    free(next);
    free(ops);
    return go;
}

/* Every memory node's index of the table, one after the other. */
static int walk(struct record_store *s, uint32_t table, rs_walk_fn fn, void *arg)
{
    struct dm_store *d = ds(s);
    const struct dm_table *t = table_of(d, table);
    int rc = RS_OK;
    for (unsigned mn = 0; mn < d->nmn && walk_mn(d, mn, &t->e[mn], fn, arg, &rc); mn++) {
    }
    return rc;
}

/* ---- the record word ------------------------------------------------------------ */

static uint64_t word_read(struct record_store *s, rs_loc loc)
{
    struct dm_store *d = ds(s);
    uint64_t w;
    pthread_mutex_lock(&d->mu);
    rd(d, mn_of(d, loc), loc_off(loc), &w, 8);
    pthread_mutex_unlock(&d->mu);
    return w;
}

static bool word_cas(struct record_store *s, rs_loc loc, uint64_t *expected, uint64_t desired)
{
    struct dm_store *d = ds(s);
    pthread_mutex_lock(&d->mu);
    uint64_t old = cas(d, mn_of(d, loc), loc_off(loc), *expected, desired);
    pthread_mutex_unlock(&d->mu);
    if (old == *expected) return true;
    *expected = old;
    return false;
}

static uint64_t word_faa(struct record_store *s, rs_loc loc, uint64_t add)
{
    struct dm_store *d = ds(s);
    pthread_mutex_lock(&d->mu);
    uint64_t old = faa(d, mn_of(d, loc), loc_off(loc), add);
    pthread_mutex_unlock(&d->mu);
    return old;
}

/* ---- rows, batches ------------------------------------------------------------------ */

static int grow(struct dm_store *d, uint32_t n)
{
    if (n <= d->cap) return 0;
    uint32_t cap = d->cap ? d->cap : 64;
    while (cap < n) cap *= 2;
    /* a fabric op or two per op, and a READ behind each run of writes */
    size_t nf = (size_t)cap * 3;
    struct fab_op *f = realloc(d->fops, nf * sizeof *f);
    if (!f) return -1;
    d->fops = f;
    int *fp = realloc(d->fpeer, nf * sizeof *fp);
    if (!fp) return -1;
    d->fpeer = fp;
    struct dm_rechead *h = realloc(d->heads, (size_t)cap * sizeof *h);
    if (!h) return -1;
    d->heads = h;
    struct rs_op *g = realloc(d->grouped, (size_t)cap * sizeof *g);
    if (!g) return -1;
    d->grouped = g;
    uint32_t *from = realloc(d->from, (size_t)cap * sizeof *from);
    if (!from) return -1;
    d->from = from;
    d->cap = cap;
    return 0;
}

static bool is_rma(enum rs_op_kind k) { return k == RS_OP_READ || k == RS_OP_WRITE; }

/* A release: a WRITE of the record word alone or an FAA. */
static bool is_release(const struct rs_op *o)
{
    return (o->kind == RS_OP_WRITE && o->word) || o->kind == RS_OP_FAA;
}

/* The fabric ops of g[lo..hi) (all RMA or all atomics, all on memory node
 * mn), appended at d->fops[*nf]; with flush a run with WRITEs ends with a
 * READ, so that its writes are placed before what follows (the FAA that
 * releases a lock must not pass the row it guards: rxm carries atomics and
 * RMA on different paths, and completes a WRITE once it is sent). */
static void run_build(struct dm_store *d, unsigned mn, struct rs_op *g, uint32_t lo, uint32_t hi,
                      bool flush, uint32_t *nf)
{
    uint32_t n = *nf;
    uint64_t last_write = 0;
    bool wrote = false;
    for (uint32_t i = lo; i < hi; i++) {
        struct rs_op *o = &g[i];
        uint64_t off = loc_off(o->loc);
        struct dm_rechead *h = &d->heads[i];
        /* a record's bytes follow its word and header; a raw offset's are at it */
        uint64_t body = loc_table(o->loc) == RAW_TABLE ? off : off + sizeof *h;
        switch (o->kind) {
        case RS_OP_READ: /* the word, the header, the tuple: in this order (record_store.h) */
            if (o->word || o->head) {
                bool w = o->word != NULL;
                d->fops[n++] = (struct fab_op){.kind = FAB_READ, .off = w ? off : off + 8,
                                               .buf = w ? (void *)h : (void *)&h->h,
                                               .len = w ? sizeof *h : sizeof h->h};
            }
            if (o->len)
                d->fops[n++] = (struct fab_op){.kind = FAB_READ, .off = body + o->off,
                                               .buf = o->buf, .len = o->len};
            break;
        case RS_OP_WRITE: /* the tuple's bytes before the header (record_store.h) */
            if (o->word) { /* the record word alone */
                d->fops[n++] = (struct fab_op){.kind = FAB_WRITE, .off = off, .buf = o->word,
                                               .len = 8};
                wrote = true;
                last_write = off;
                break;
            }
            if (o->len)
                d->fops[n++] = (struct fab_op){.kind = FAB_WRITE, .off = body + o->off,
                                               .buf = o->buf, .len = o->len};
            if (o->head) {
                h->h.valid = o->head->valid;
                h->h.tuple_size = table_of(d, loc_table(o->loc))->e[0].tuple_size;
                h->h.epoch_version = o->head->epoch_version;
                d->fops[n++] = (struct fab_op){.kind = FAB_WRITE, .off = off + 8, .buf = &h->h,
                                               .len = sizeof h->h};
            }
            wrote = wrote || o->head || o->len;
            last_write = off;
            break;
        case RS_OP_CAS:
            d->fops[n++] = (struct fab_op){.kind = FAB_CAS, .off = off, .compare = o->expected,
                                           .operand = o->desired};
            break;
        case RS_OP_FAA:
            d->fops[n++] = (struct fab_op){.kind = FAB_FAA, .off = off, .operand = o->add};
            break;
        case RS_OP_SYNC: break; /* taken out by batch_plain */
        }
    }
    if (wrote && flush)
        d->fops[n++] = (struct fab_op){.kind = FAB_READ, .off = last_write & ~7ull,
                                       .buf = &d->probe[mn], .len = 8};
    for (uint32_t j = *nf; j < n; j++) d->fpeer[j] = d->mn[mn].peer;
    *nf = n;
}

/* The results of g[lo..hi), whose fabric ops start at d->fops[base]. */
static void run_finish(struct dm_store *d, struct rs_op *g, uint32_t lo, uint32_t hi,
                       uint32_t base)
{
    uint32_t n = base;
    for (uint32_t i = lo; i < hi; i++) {
        struct rs_op *o = &g[i];
        if (o->kind == RS_OP_READ) {
            if (o->word) *o->word = d->heads[i].word;
            if (o->head) {
                o->head->valid = d->heads[i].h.valid;
                o->head->epoch_version = d->heads[i].h.epoch_version;
            }
            n += (o->word || o->head) + (o->len != 0);
        } else if (o->kind == RS_OP_WRITE) {
            n += o->word ? 1 : (o->head != NULL) + (o->len != 0);
        } else {
            o->old = d->fops[n++].old;
            if (o->kind == RS_OP_CAS) {
                o->ok = o->old == o->expected;
                o->expected = o->old;
            }
        }
    }
}

/* Send d->fops[0..nf) (op j to d->fpeer[j]) and wait for all: one round
 * trip, to however many memory nodes. */
static void wave_run(struct dm_store *d, uint32_t nf)
{
    if (!nf) return;
    pod_err e;
    for (uint32_t i = 0; i < nf; i++)
        __atomic_fetch_add(&d->ops[d->fops[i].kind], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&d->round_trips, 1, __ATOMIC_RELAXED);
    if (fab_batch_to(d->f, d->fpeer, d->fops, nf, &e) != 0) {
        unsigned mn = 0;
        while (mn + 1 < d->nmn && d->mn[mn].peer != d->fpeer[0]) mn++;
        fatal(d, mn, &e);
    }
}

/* The groups g[lo[m]..hi[m]) of the memory nodes of mask (group m all on
 * memory node m), at once: each group's ops cut into runs of RMA and of
 * atomics in their order, the k-th runs of every group posted together as
 * one wave, each wave complete before the next. A run is made placed when
 * a run of its group follows, and the last ones too when sync. */
static void groups_run(struct dm_store *d, struct rs_op *g, const uint32_t *lo,
                       const uint32_t *hi, uint32_t mask, bool sync)
{
    uint32_t at[DM_MAX_MEMNODES], base[DM_MAX_MEMNODES], end[DM_MAX_MEMNODES];
    for (unsigned m = 0; m < d->nmn; m++) at[m] = lo[m];
    for (;;) {
        uint32_t nf = 0, busy = 0;
        for (unsigned m = 0; m < d->nmn; m++) {
            if (!(mask & 1u << m) || at[m] >= hi[m]) continue;
            uint32_t a = at[m], b = a + 1;
            while (b < hi[m] && is_rma(g[b].kind) == is_rma(g[a].kind)) b++;
            base[m] = nf;
            end[m] = b;
            run_build(d, m, g, a, b, b < hi[m] || sync, &nf);
            busy |= 1u << m;
        }
        if (!busy) return;
        wave_run(d, nf);
        for (unsigned m = 0; m < d->nmn; m++) {
            if (!(busy & 1u << m)) continue;
            run_finish(d, g, at[m], end[m], base[m]);
            at[m] = end[m];
        }
    }
}

static void oom(struct dm_store *d, uint32_t n)
{
    pod_err e;
    pod_err_set(&e, "out of memory for a batch of %u operations", n);
    fatal(d, 0, &e);
}

/* ops[from..to) but RS_OP_SYNC grouped by memory node into d->grouped from
 * *k on, each group in the ops' order (d->from says where each came from);
 * lo[m], hi[m]: group m; the memory nodes met, a bit each. */
static uint32_t group(struct dm_store *d, struct rs_op *ops, uint32_t from, uint32_t to,
                      uint32_t *k, uint32_t *lo, uint32_t *hi)
{
    uint32_t mask = 0;
    for (uint32_t i = from; i < to; i++)
        if (ops[i].kind != RS_OP_SYNC) mask |= 1u << mn_of(d, ops[i].loc);
    for (unsigned mn = 0; mn < d->nmn; mn++) {
        lo[mn] = hi[mn] = *k;
        if (!(mask & 1u << mn)) continue;
        for (uint32_t i = from; i < to; i++)
            if (ops[i].kind != RS_OP_SYNC && rs_dm_loc_memnode(ops[i].loc) == mn) {
                d->from[*k] = i;
                d->grouped[(*k)++] = ops[i];
            }
        hi[mn] = *k;
    }
    return mask;
}

/* The ops grouped by memory node, each group in the ops' order, the groups
 * at once (groups_run): a record's word and row are on one memory node, so
 * a release still follows the row it guards, and what goes to different
 * memory nodes has no order to keep, but for one rule: with split, when the
 * batch spans several memory nodes, the ops before its first release are
 * placed on all of them before any release is posted (ford's undo log is
 * marked done before any of its locks is released). RS_OP_SYNC ops are
 * taken out: they make every group's last run placed, as sync does. */
static void batch_plain(struct dm_store *d, struct rs_op *ops, uint32_t n, bool sync, bool split)
{
    if (grow(d, n) != 0) oom(d, n);
    uint32_t cut = n, mns = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (ops[i].kind == RS_OP_SYNC) sync = true;
        else mns |= 1u << mn_of(d, ops[i].loc);
        if (cut == n && split && is_release(&ops[i])) cut = i;
    }
    if (!(mns & (mns - 1)) || cut == 0) cut = n; /* one memory node: its queue keeps the order */
    uint32_t k = 0, lo[DM_MAX_MEMNODES], hi[DM_MAX_MEMNODES];
    uint32_t mask = group(d, ops, 0, cut, &k, lo, hi);
    groups_run(d, d->grouped, lo, hi, mask, sync || cut < n);
    if (cut < n) {
        mask = group(d, ops, cut, n, &k, lo, hi);
        groups_run(d, d->grouped, lo, hi, mask, sync);
    }
    for (uint32_t j = 0; j < k; j++) ops[d->from[j]] = d->grouped[j];
}

static void batch_locked(struct dm_store *d, struct rs_op *ops, uint32_t n);

static void batch(struct record_store *s, struct rs_op *ops, uint32_t n)
{
    struct dm_store *d = ds(s);
    pthread_mutex_lock(&d->mu);
    batch_locked(d, ops, n);
    pthread_mutex_unlock(&d->mu);
}

/* ---- backups (docs/dm.md, "Replication") ---------------------------------------- */

/* The memory nodes that keep copies of memory node mn's records: a bit each. */
static uint32_t copies_of(const struct dm_store *d, unsigned mn)
{
    uint32_t m = 0;
    for (uint32_t j = 1; j <= d->replicas; j++) m |= 1u << ((mn + j) % d->nmn);
    return m;
}

/* op's location in its j-th copy */
static rs_loc copy_loc(const struct dm_store *d, rs_loc loc, uint32_t j)
{
    unsigned mn = rs_dm_loc_memnode(loc);
    uint64_t table_bits = loc & ~((1ull << 48) - 1);
    return table_bits | (uint64_t)((mn + j) % d->nmn) << LOC_MN_SHIFT |
           (loc_off(loc) + j * d->area);
}

static bool is_change(const struct rs_op *o) { return o->kind == RS_OP_WRITE || o->kind == RS_OP_FAA; }

static int mgrow(struct dm_store *d, uint32_t n)
{
    if (n <= d->mcap) return 0;
    uint32_t cap = d->mcap ? d->mcap : 64;
    while (cap < n) cap *= 2;
    struct rs_op *m = realloc(d->mops, (size_t)cap * sizeof *m);
    if (!m) return -1;
    d->mops = m;
    uint32_t *f = realloc(d->mfrom, (size_t)cap * sizeof *f);
    if (!f) return -1;
    d->mfrom = f;
    d->mcap = cap;
    return 0;
}

static void pend_add(struct dm_store *d, unsigned mn, uint64_t off, uint64_t val)
{
    if (d->npend == d->pend_cap) {
        uint32_t cap = d->pend_cap ? d->pend_cap * 2 : 64;
        struct pend *p = realloc(d->pend, (size_t)cap * sizeof *p);
        struct pend *q = realloc(d->flushing, (size_t)cap * sizeof *q);
        if (p) d->pend = p;
        if (q) d->flushing = q;
        if (!p || !q) oom(d, cap);
        d->pend_cap = cap;
    }
    d->pend[d->npend++] = (struct pend){.mn = mn, .off = off, .val = val};
}

/* Move the pending copies of record words bound for the memory nodes of
 * mask out of d->pend into d->flushing; their number. */
static uint32_t pend_take(struct dm_store *d, uint32_t mask)
{
    uint32_t k = 0, keep = 0;
    for (uint32_t i = 0; i < d->npend; i++) {
        if (mask & 1u << d->pend[i].mn) d->flushing[k++] = d->pend[i];
        else d->pend[keep++] = d->pend[i];
    }
    d->npend = keep;
    return k;
}

/* Write (placed) the pending copies bound for the memory nodes of mask. */
static void pend_flush(struct dm_store *d, uint32_t mask)
{
    uint32_t k = pend_take(d, mask);
    if (!k) return;
    if (mgrow(d, k + 1) != 0) oom(d, k + 1);
    for (uint32_t i = 0; i < k; i++)
        d->mops[i] = (struct rs_op){.kind = RS_OP_WRITE,
                                    .loc = raw_loc(d->flushing[i].mn, d->flushing[i].off),
                                    .word = &d->flushing[i].val};
    batch_plain(d, d->mops, k, true, false);
}

/* A batch of a pod with backups, in two steps.
 * 1. The copies' writes pending from earlier CASes (to the memory nodes
 *    this batch changes), then the ops up to the first release (with each
 *    change also written to the copies) and the copies of every later op
 *    that changes anything; placed when a second step follows.
 * 2. The ops from the first release on, on their memory nodes only.
 * So a copy takes every change, a lock's release reaches the copies before
 * the record (nobody can take the lock until all copies show it free), and
 * what precedes a release in the batch (an undo log's done mark, a row) is
 * placed everywhere before it. A CAS that takes a record word is copied
 * lazily: with the next change this store sends to the copy's memory node
 * (a transaction's rows and releases always do), which comes before any
 * row behind that lock. */
static void batch_mirrored(struct dm_store *d, struct rs_op *ops, uint32_t n)
{
    uint32_t first_release = n, changed = 0, copies = 0;
    bool sync = false;
    for (uint32_t i = 0; i < n; i++) {
        if (ops[i].kind == RS_OP_SYNC) {
            sync = true;
            continue;
        }
        if (first_release == n && is_release(&ops[i])) first_release = i;
        if (is_change(&ops[i])) {
            changed |= copies_of(d, rs_dm_loc_memnode(ops[i].loc));
            copies += d->replicas;
        }
    }
    uint32_t k = pend_take(d, changed);
    if (mgrow(d, k + n + copies + 1) != 0) oom(d, k + n + copies + 1);
    for (uint32_t i = 0; i < k; i++) {
        d->mops[i] = (struct rs_op){.kind = RS_OP_WRITE,
                                    .loc = raw_loc(d->flushing[i].mn, d->flushing[i].off),
                                    .word = &d->flushing[i].val};
        d->mfrom[i] = UINT32_MAX;
    }
    for (uint32_t i = 0; i < n; i++) {
        const struct rs_op *o = &ops[i];
        if (o->kind == RS_OP_SYNC) continue;
        if (i < first_release) {
            d->mops[k] = *o;
            d->mfrom[k++] = i;
        }
        if (!is_change(o)) continue;
        for (uint32_t j = 1; j <= d->replicas; j++) {
            d->mops[k] = *o;
            d->mops[k].loc = copy_loc(d, o->loc, j);
            d->mfrom[k++] = UINT32_MAX;
        }
    }
    bool second = first_release < n;
    if (k) batch_plain(d, d->mops, k, sync || second, false);
    for (uint32_t j = 0; j < k; j++)
        if (d->mfrom[j] != UINT32_MAX) ops[d->mfrom[j]] = d->mops[j];
    if (second) batch_plain(d, ops + first_release, n - first_release, sync, false);
    for (uint32_t i = 0; i < n; i++)
        if (ops[i].kind == RS_OP_CAS && ops[i].ok)
            for (uint32_t j = 1; j <= d->replicas; j++) {
                rs_loc c = copy_loc(d, ops[i].loc, j);
                pend_add(d, rs_dm_loc_memnode(c), loc_off(c), ops[i].desired);
            }
}

static void batch_locked(struct dm_store *d, struct rs_op *ops, uint32_t n)
{
    if (d->replicas) batch_mirrored(d, ops, n);
    else batch_plain(d, ops, n, false, true);
}

static void row_read(struct record_store *s, rs_loc loc, struct rs_row_head *head, void *buf,
                     uint32_t off, uint32_t len)
{
    struct rs_op o = {.kind = RS_OP_READ, .loc = loc, .head = head, .buf = buf, .off = off,
                      .len = len};
    batch(s, &o, 1);
}

static void row_write(struct record_store *s, rs_loc loc, const struct rs_row_head *head,
                      const void *buf, uint32_t off, uint32_t len)
{
    struct rs_op o = {.kind = RS_OP_WRITE, .loc = loc, .head = (struct rs_row_head *)head,
                      .buf = (void *)buf, .off = off, .len = len};
    batch(s, &o, 1);
}

static rs_loc sentinel(struct record_store *s, uint32_t table)
{
    return make_loc(table, 0, table_of(ds(s), table)->e[0].sentinel_off);
}

static int alloc(struct record_store *s, uint32_t table, const void *key, rs_loc *loc)
{
    struct dm_store *d = ds(s);
    unsigned mn = place_of(d, table, key).mn;
    const struct dm_catalog_entry *e = &table_of(d, table)->e[mn];
    pthread_mutex_lock(&d->mu);
    uint64_t at = faa(d, mn, offsetof(struct dm_pool_header, cursor), e->record_bytes);
    if (at + e->record_bytes > d->mn[mn].pool_size) {
        pthread_mutex_unlock(&d->mu);
        return RS_NOMEM;
    }
    /* word 0 and tuple zero already (fresh pool memory); the row's header */
    struct dm_rowhead h = {.valid = 0, .tuple_size = e->tuple_size};
    write_placed(d, mn, at + 8, &h, sizeof h);
    pthread_mutex_unlock(&d->mu);
    *loc = make_loc(table, mn, at);
    return RS_OK;
}

static void free_rec(struct record_store *s, uint32_t table, rs_loc loc)
{
    (void)table, (void)loc;
    __atomic_fetch_add(&ds(s)->freed, 1, __ATOMIC_RELAXED); /* records are kept */
}

/* ---- compute-node slots (pool.h): who holds a lock, and whether it lives ---- */

#define RECOVER_WAIT_MS 10000

static bool slot_connected(struct dm_store *d, uint32_t slot)
{
    uint64_t conn;
    rd(d, 0, SLOT_OFF(slot) + offsetof(struct dm_cn_slot, conn), &conn, sizeof conn);
    return conn & DM_CN_CONNECTED;
}

/* The undo logs that slot's record holds: the record's header keeps their
 * layout (epoch_version = nlogs << 32 | bytes of each; 0 in a pool written
 * before there were several: one log of the slot's log_bytes). */
static void logs_of(struct dm_store *d, uint32_t slot, struct rs_member *m)
{
    struct dm_cn_slot e;
    rd(d, 0, SLOT_OFF(slot), &e, sizeof e);
    m->log = e.log;
    m->log_bytes = (uint32_t)e.log_bytes;
    m->nlogs = e.log ? 1 : 0;
    if (!e.log) return;
    struct dm_rechead h;
    rd(d, 0, loc_off(e.log), &h, sizeof h);
    if (h.h.epoch_version) {
        m->nlogs = (uint32_t)(h.h.epoch_version >> 32);
        m->log_bytes = (uint32_t)h.h.epoch_version;
    }
}

static void member_of(struct dm_store *d, uint32_t slot, uint32_t inc, struct rs_member *m)
{
    logs_of(d, slot, m);
    m->slot = slot;
    m->incarnation = inc;
}

/* Under d->mu: a new record for nlogs undo logs of log_bytes on memory
 * node 0 (table DM_LOG_TABLE; its header says the layout): *loc. */
static int logs_new(struct dm_store *d, uint32_t log_bytes, uint32_t nlogs, rs_loc *loc,
                    pod_err *err)
{
    uint64_t tuple = (uint64_t)log_bytes * nlogs;
    if (tuple > UINT32_MAX) {
        pod_err_set(err, "dm record store: %u undo logs of %u bytes (one per worker; "
                    "dm.undo_log_size) exceed the 4 GiB a record can hold", nlogs, log_bytes);
        return -1;
    }
    uint64_t bytes = round8(sizeof(struct dm_rechead) + tuple);
    uint64_t at = faa(d, 0, offsetof(struct dm_pool_header, cursor), bytes);
    if (at + bytes > d->mn[0].pool_size) {
        pod_err_set(err, "dm record store: the pool of memory node 0 (%s) is full: no room for "
                    "this compute node's %u undo logs of %u bytes (one per worker; "
                    "dm.undo_log_size)", d->mn[0].label, nlogs, log_bytes);
        return -1;
    }
    struct dm_rowhead h = {.valid = 1, .tuple_size = (uint32_t)tuple,
                           .epoch_version = (uint64_t)nlogs << 32 | log_bytes};
    write_placed(d, 0, at + offsetof(struct dm_rechead, h), &h, sizeof h);
    *loc = make_loc(DM_LOG_TABLE, 0, at);
    return 0;
}

/* Under d->mu: the slot's undo logs are now those at loc (a later
 * incarnation's, none of them active). */
static void logs_switch(struct dm_store *d, rs_loc old, rs_loc loc, uint32_t log_bytes)
{
    uint64_t lb = log_bytes;
    write_placed(d, 0, SLOT_OFF(d->slot) + offsetof(struct dm_cn_slot, log_bytes), &lb, sizeof lb);
    if (cas(d, 0, SLOT_OFF(d->slot) + offsetof(struct dm_cn_slot, log), old, loc) != old) {
        pod_err e;
        pod_err_set(&e, "the undo log of compute-node slot %u changed while this compute node "
                    "joined", d->slot);
        fatal(d, 0, &e);
    }
}

static int member_join(struct record_store *s, uint32_t slot, uint32_t log_bytes, uint32_t nlogs,
                       struct rs_member *me, struct rs_member *prev, pod_err *err)
{
    struct dm_store *d = ds(s);
    if (!d->slot || slot != d->slot) {
        pod_err_set(err, "dm record store: opened as compute node slot %u, asked to join as %u",
                    d->slot, slot);
        return -1;
    }
    prev->slot = 0;
    if (!nlogs || !log_bytes) {
        pod_err_set(err, "dm record store: a compute node needs at least one undo log of at "
                    "least one byte");
        return -1;
    }
    pthread_mutex_lock(&d->mu);
    /* The slot's logs, or new ones when they are fewer or smaller than asked
     * (the slot then switches to them once its previous run, which may need
     * the old ones, is recovered). */
    struct rs_member cur;
    logs_of(d, slot, &cur);
    rs_loc fresh = 0;
    int rc = 0;
    if (!cur.log || cur.nlogs < nlogs || cur.log_bytes < log_bytes)
        rc = logs_new(d, log_bytes, nlogs, &fresh, err);
    uint64_t until = ms_now() + RECOVER_WAIT_MS;
    while (rc == 0) {
        uint64_t st, next;
        rd(d, 0, SLOT_OFF(slot), &st, sizeof st);
        uint32_t inc = DM_CN_INC(st);
        switch (DM_CN_KIND(st)) {
        case DM_CN_NEVER: next = DM_CN_STATE(DM_CN_LIVE, 0, 1); break;
        case DM_CN_CLEAN: next = DM_CN_STATE(DM_CN_LIVE, 0, inc); break;
        case DM_CN_LIVE: /* the slot's last compute node died: it is ours to recover */
            next = DM_CN_STATE(DM_CN_RECOVERING, slot, inc);
            break;
        default: /* another compute node recovers it: wait while that one lives */
            if (DM_CN_BY(st) != slot && slot_connected(d, DM_CN_BY(st))) {
                if (ms_now() > until) {
                    pod_err_set(err, "dm record store: the compute node of host %u has been "
                                "recovering this host's previous run for %d ms", DM_CN_BY(st) - 1,
                                RECOVER_WAIT_MS);
                    rc = -1;
                    continue;
                }
                pthread_mutex_unlock(&d->mu);
                usleep(10000);
                pthread_mutex_lock(&d->mu);
                continue;
            }
            next = DM_CN_STATE(DM_CN_RECOVERING, slot, inc);
        }
        if (cas(d, 0, SLOT_OFF(slot), st, next) != st) continue;
        if (DM_CN_KIND(next) == DM_CN_LIVE) {
            d->my_inc = DM_CN_INC(next);
            if (fresh) logs_switch(d, cur.log, fresh, log_bytes);
        } else {
            d->my_inc = inc + 1;
            member_of(d, slot, inc, prev);
            d->logs_old = cur.log;
            d->logs_fresh = fresh;
            d->logs_fresh_bytes = log_bytes;
        }
        *me = fresh ? (struct rs_member){.log = fresh, .log_bytes = log_bytes, .nlogs = nlogs}
                    : cur;
        me->slot = slot;
        me->incarnation = d->my_inc;
        break;
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static enum rs_owner owner_check(struct record_store *s, uint32_t slot, uint32_t inc,
                                 struct rs_member *dead)
{
    struct dm_store *d = ds(s);
    if (!d->slot || !slot || slot >= DM_CN_SLOTS) return RS_OWNER_LIVE;
    pthread_mutex_lock(&d->mu);
    enum rs_owner r = RS_OWNER_LIVE;
    uint64_t now = ms_now();
    if (d->alive_inc[slot] == inc && now < d->alive_until[slot]) goto out;
    for (;;) {
        uint64_t st;
        rd(d, 0, SLOT_OFF(slot), &st, sizeof st);
        if (DM_CN_INC(st) != inc || DM_CN_KIND(st) == DM_CN_CLEAN) {
            r = RS_OWNER_STALE;
            break;
        }
        /* alive: the slot's process (or, recovering it, the recoverer's) holds its connection */
        uint32_t who = DM_CN_KIND(st) == DM_CN_RECOVERING ? DM_CN_BY(st) : slot;
        if (who == d->slot || slot_connected(d, who)) {
            d->alive_inc[slot] = inc;
            d->alive_until[slot] = now + OWNER_CACHE_MS;
            break;
        }
        if (cas(d, 0, SLOT_OFF(slot), st, DM_CN_STATE(DM_CN_RECOVERING, d->slot, inc)) == st) {
            member_of(d, slot, inc, dead);
            r = RS_OWNER_RECOVER;
            break;
        }
    }
out:
    pthread_mutex_unlock(&d->mu);
    return r;
}

static void owner_recovered(struct record_store *s, const struct rs_member *dead)
{
    struct dm_store *d = ds(s);
    pthread_mutex_lock(&d->mu);
    uint64_t was = DM_CN_STATE(DM_CN_RECOVERING, d->slot, dead->incarnation);
    /* our own previous run: we are its next incarnation; another's: clean */
    uint64_t now = dead->slot == d->slot ? DM_CN_STATE(DM_CN_LIVE, 0, d->my_inc)
                                         : DM_CN_STATE(DM_CN_CLEAN, 0, dead->incarnation + 1);
    uint64_t old = cas(d, 0, SLOT_OFF(dead->slot), was, now);
    if (old == was && dead->slot == d->slot && d->logs_fresh) { /* member_join's new logs */
        logs_switch(d, d->logs_old, d->logs_fresh, d->logs_fresh_bytes);
        d->logs_fresh = 0;
    }
    pthread_mutex_unlock(&d->mu);
    if (old != was) {
        pod_err e;
        pod_err_set(&e, "the state of compute-node slot %u changed while this compute node "
                    "recovered it (0x%llx)", dead->slot, (unsigned long long)old);
        fatal(d, 0, &e);
    }
}

/* A handle's own parts. */
static void handle_free(struct dm_store *d)
{
    fab_close(d->f);
    pthread_mutex_destroy(&d->mu);
    free(d->fops);
    free(d->fpeer);
    free(d->heads);
    free(d->grouped);
    free(d->from);
    free(d->bucket);
    free(d->pend);
    free(d->flushing);
    free(d->mops);
    free(d->mfrom);
    free(d);
}

/* The root frees its handles with it; a handle alone is not destroyed. */
static void destroy(struct record_store *s)
{
    struct dm_store *d = ds(s);
    if (!d || d->root != d) return;
    for (struct dm_store *h = d->handles, *next; h; h = next) {
        next = h->next_handle;
        handle_free(h);
    }
    if (d->watch_stop >= 0) {
        eventfd_write(d->watch_stop, 1);
        pthread_join(d->watcher, NULL);
        close(d->watch_stop);
    }
    for (unsigned mn = 0; mn < DM_MAX_MEMNODES; mn++)
        if (d->mn[mn].boot_fd >= 0) close(d->mn[mn].boot_fd);
    for (uint32_t t = 0; t < DM_MAX_TABLES; t++) free(d->tables[t].e);
    handle_free(d);
}

/* The NIC model of the root's, on f (peer i: memory node i). */
static int nic_model_on(struct dm_store *d, struct fab *f, pod_err *err)
{
    struct nic_model *m = nic_model_new(&d->nic, err);
    for (unsigned i = 0; m && i < d->nmn; i++)
        if (nic_model_attach(m, d->mn[i].peer, d->pod, d->mn[i].label, err) != 0) {
            nic_model_free(m);
            m = NULL;
        }
    if (!m) return -1;
    fab_set_nic_model(f, m);
    return 0;
}

static struct record_store *attach(struct record_store *s, pod_err *err)
{
    struct dm_store *r = ds(s)->root;
    struct dm_store *h = malloc(sizeof *h);
    if (!h) {
        pod_err_set(err, "dm record store: out of memory");
        return NULL;
    }
    pthread_mutex_lock(&r->mu);
    *h = *r;
    pthread_mutex_unlock(&r->mu);
    /* its own from here on */
    pthread_mutex_init(&h->mu, NULL);
    h->handles = h->next_handle = NULL;
    memset(h->ops, 0, sizeof h->ops);
    h->round_trips = 0;
    h->watch_stop = -1;
    h->pend = h->flushing = NULL;
    h->npend = h->pend_cap = 0;
    h->mops = NULL;
    h->mfrom = NULL;
    h->mcap = 0;
    h->fops = NULL;
    h->fpeer = NULL;
    h->heads = NULL;
    h->grouped = NULL;
    h->from = NULL;
    h->cap = 0;
    memset(h->alive_inc, 0, sizeof h->alive_inc);
    h->f = NULL;
    if (!(h->bucket = malloc(MAX_BUCKET_BYTES))) {
        pod_err_set(err, "dm record store: out of memory");
        goto fail;
    }
    if (!(h->f = fab_open(&(struct fab_open_opts){.provider = fab_provider(r->f)}, err)))
        goto fail;
    for (unsigned i = 0; i < h->nmn; i++) {
        struct memnode *m = &h->mn[i];
        m->peer = fab_peer_add(h->f, m->name, m->name_len, &m->region, m->label, err);
        if (m->peer < 0) goto fail;
    }
    if (h->nic_on && nic_model_on(h, h->f, err) != 0) goto fail;
    pthread_mutex_lock(&r->mu);
    h->next_handle = r->handles;
    __atomic_store_n(&r->handles, h, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&r->mu);
    return &h->base;
fail:
    handle_free(h);
    return NULL;
}

/* ---- the members' message addresses (pool.h, DM_CN_DIR_OFF) ---- */

static const char *msg_provider(struct record_store *s) { return fab_provider(ds(s)->f); }

static int dir_publish(struct record_store *s, uint32_t slot, const void *name, size_t len,
                       pod_err *err)
{
    struct dm_store *d = ds(s);
    if (!slot || slot >= DM_CN_SLOTS || len > DM_CN_DIR_NAME_MAX) {
        pod_err_set(err, "dm record store: a directory entry for slot %u of %zu bytes: slots "
                    "1..%u, at most %u bytes", slot, len, DM_CN_SLOTS - 1, DM_CN_DIR_NAME_MAX);
        return -1;
    }
    struct dm_cn_dir_entry e = {.conn = d->root->conn_gen, .len = (uint32_t)len,
                                .inc = d->root->my_inc};
    memcpy(e.name, name, len);
    write_placed(d, 0, DM_CN_DIR_OFF + (uint64_t)slot * sizeof e, &e, sizeof e);
    return 0;
}

static int dir_lookup(struct record_store *s, uint32_t slot, void *name, size_t *len,
                      uint32_t *incarnation, bool *connected)
{
    struct dm_store *d = ds(s);
    if (!slot || slot >= DM_CN_SLOTS) return 0;
    struct dm_cn_dir_entry e;
    uint64_t conn;
    rd(d, 0, SLOT_OFF(slot) + offsetof(struct dm_cn_slot, conn), &conn, sizeof conn);
    rd(d, 0, DM_CN_DIR_OFF + (uint64_t)slot * sizeof e, &e, sizeof e);
    if (!e.len || e.len > DM_CN_DIR_NAME_MAX || e.len > *len) return 0;
    memcpy(name, e.name, e.len);
    *len = e.len;
    *incarnation = e.inc;
    *connected = (conn & DM_CN_CONNECTED) && e.conn == (conn & ~DM_CN_CONNECTED);
    return 1;
}

static const struct rs_ops dm_ops = {
    .name = "dm",
    .ordered = false,
    .table_add = table_add,
    .sentinel = sentinel,
    .lookup = lookup,
    .lookup_many = lookup_many,
    .neighbour = neighbour,
    .index_insert = index_insert,
    .index_remove = index_remove,
    .walk = walk,
    .word_read = word_read,
    .word_cas = word_cas,
    .word_faa = word_faa,
    .row_read = row_read,
    .row_write = row_write,
    .alloc = alloc,
    .free = free_rec,
    .batch = batch,
    .attach = attach,
    .member_join = member_join,
    .owner_check = owner_check,
    .owner_recovered = owner_recovered,
    .msg_provider = msg_provider,
    .dir_publish = dir_publish,
    .dir_lookup = dir_lookup,
    .counters = counters,
    .destroy = destroy,
};

/* ---- bootstrap ------------------------------------------------------------------------ */

static bool xfer(int fd, void *buf, size_t len, bool out)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = out ? send(fd, (char *)buf + done, len - done, MSG_NOSIGNAL)
                        : recv(fd, (char *)buf + done, len - done, 0);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            return false;
        }
        done += (size_t)n;
    }
    return true;
}

/* Memory node i of n at sock: bootstrap (req: our fabric address), its
 * peer, its pool header checked, its place in the pod claimed or checked. */
static int memnode_join(struct dm_store *d, unsigned i, unsigned n, const char *sock,
                        const char *pod, const struct dm_boot_req *req, pod_err *err)
{
    struct memnode *m = &d->mn[i];
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (!sock || strlen(sock) >= sizeof sa.sun_path) {
        pod_err_set(err, "dm record store: memory node %u: socket path missing or too long", i);
        return -1;
    }
    strcpy(sa.sun_path, sock);
    snprintf(m->label, sizeof m->label, "%s", sock);
    m->boot_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (m->boot_fd < 0 || connect(m->boot_fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        pod_err_set(err, "dm record store: cannot reach the memory node at %s: %s", sock,
                    strerror(errno));
        return -1;
    }
    struct timeval tv = {.tv_sec = 10};
    setsockopt(m->boot_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct dm_boot_rep rep;
    if (!xfer(m->boot_fd, (void *)req, sizeof *req, true) ||
        !xfer(m->boot_fd, &rep, sizeof rep, false) || rep.magic != DM_BOOT_MAGIC) {
        pod_err_set(err, "dm record store: the memory node at %s did not answer its bootstrap "
                    "request", sock);
        return -1;
    }
    rep.msg[sizeof rep.msg - 1] = 0;
    if (rep.status) {
        pod_err_set(err, "dm record store: the memory node at %s refused this compute node: %s",
                    sock, rep.msg);
        return -1;
    }
    m->name_len = rep.name_len < sizeof m->name ? rep.name_len : sizeof m->name;
    memcpy(m->name, rep.name, m->name_len);
    for (unsigned j = 0; j < i; j++)
        if (d->mn[j].name_len == m->name_len && memcmp(d->mn[j].name, m->name, m->name_len) == 0) {
            pod_err_set(err, "dm record store: memory nodes %u (%s) and %u (%s) are the same "
                        "memory node: each must be listed once", j, d->mn[j].label, i, sock);
            return -1;
        }
    m->region = rep.region;
    m->peer = fab_peer_add(d->f, rep.name, rep.name_len, &rep.region, sock, err);
    if (m->peer < 0) return -1;
    m->pool_size = rep.region.size;
    if (m->pool_size > DM_POOL_MAX) {
        pod_err_set(err, "dm record store: the pool of memory node %s has %llu bytes, more than "
                    "the %llu a location can name", sock, (unsigned long long)m->pool_size,
                    (unsigned long long)DM_POOL_MAX);
        return -1;
    }
    /* The pool's own header: a second check of what the socket said. */
    struct dm_pool_header h;
    if (fab_read(d->f, m->peer, 0, &h, sizeof h, err) != 0) return -1;
    h.pod[DM_POD_NAME_MAX - 1] = 0;
    if (h.magic != DM_POOL_MAGIC || h.version != DM_LAYOUT_VERSION) {
        pod_err_set(err, "dm record store: the pool of memory node %s has magic 0x%llx layout %u, "
                    "not a PodDB pool of layout %u", sock, (unsigned long long)h.magic, h.version,
                    DM_LAYOUT_VERSION);
        return -1;
    }
    if (strcmp(h.pod, pod) != 0 || h.pool_size != m->pool_size) {
        pod_err_set(err, "dm record store: the pool of memory node %s belongs to pod \"%s\" "
                    "(%llu bytes), not to pod \"%s\"", sock, h.pod,
                    (unsigned long long)h.pool_size, pod);
        return -1;
    }
    /* Its place in the pod: claimed by the first compute node, the same for
     * every other. */
    uint64_t want = DM_MEMBERSHIP(i, n), was;
    if (fab_cas(d->f, m->peer, offsetof(struct dm_pool_header, membership), 0, want, &was,
                err) != 0)
        return -1;
    if (was != 0 && was != want) {
        if (was >> 32 != DM_MEMBERSHIP_TAG)
            pod_err_set(err, "dm record store: the pool of memory node %s has a membership word "
                        "0x%llx that is not PodDB's", sock, (unsigned long long)was);
        else
            pod_err_set(err, "dm record store: the memory node at %s is memory node %u of %u of "
                        "pod \"%s\", but this compute node names it memory node %u of %u: every "
                        "compute node must list the same memory nodes in the same order", sock,
                        (unsigned)(was & 0xffff), (unsigned)(was >> 16 & 0xffff), pod, i, n);
        return -1;
    }
    return 0;
}

/* The pod's incarnation (pool.h): a memory node that restarted, its pool
 * empty, while the others kept theirs must not be taken into the pod again
 * as if nothing was lost. Memory node 0's incarnation is the pod's (set by
 * the first compute node to come); each other memory node must hold it or
 * nothing yet; and once memory node 0 says every memory node was claimed
 * (complete), a pool found without the incarnation is one that restarted.
 * Compute nodes that start together before that all CAS the same values
 * in; which of them claimed a pool first does not matter. */
static int rebuild_restarted(struct dm_store *d, const char *pod, pod_err *err);

static int pod_incarnation(struct dm_store *d, const char *pod, pod_err *err)
{
    const uint64_t inc_off = offsetof(struct dm_pool_header, incarnation),
                   complete_off = offsetof(struct dm_pool_header, complete);
    uint64_t mine = 0, inc, complete;
    if (d->replicas && rebuild_restarted(d, pod, err) != 0) return -1;
    while (!mine || mine == DM_INCARNATION_LOST)
        if (getrandom(&mine, sizeof mine, 0) != (ssize_t)sizeof mine)
            mine = pod_real_ns() ^ (uint64_t)getpid();
    if (fab_cas(d->f, d->mn[0].peer, inc_off, 0, mine, &inc, err) != 0 ||
        fab_read(d->f, d->mn[0].peer, complete_off, &complete, sizeof complete, err) != 0)
        return -1;
    if (!inc) inc = mine;
    for (unsigned i = 0; i < d->nmn; i++) {
        /* Once the pod was complete every pool holds the incarnation, and
         * one that holds none restarted: it is marked lost (for every
         * compute node after this one too). Before, each is given it. */
        uint64_t was;
        if (fab_cas(d->f, d->mn[i].peer, inc_off, 0, complete ? DM_INCARNATION_LOST : inc, &was,
                    err) != 0)
            return -1;
        if (!was && complete) {
            pod_err_set(err, "dm record store: memory node %u (%s) has an empty pool, but pod "
                        "\"%s\" was set up on all its memory nodes before: that memory node "
                        "restarted and the records it held are lost; stop the compute nodes and "
                        "restart every memory node of the pod", i, d->mn[i].label, pod);
            return -1;
        }
        if (was && was != inc) {
            pod_err_set(err, "dm record store: memory node %u (%s) belongs to another incarnation "
                        "of pod \"%s\" than memory node 0 (%s): one of them restarted and the "
                        "records it held are lost; stop the compute nodes and restart every "
                        "memory node of the pod", i, d->mn[i].label, pod, d->mn[0].label);
            return -1;
        }
    }
    return fab_cas(d->f, d->mn[0].peer, complete_off, 0, 1, &complete, err);
}

/* ---- backups: the pod's count, and rebuilding a memory node that restarted ---- */

#define REBUILD_WAIT_MS 600000   /* another compute node rebuilding a memory node */
#define OLD_CN_WAIT_MS 10000     /* a compute node of before the restart stopping */
#define COPY_CHUNK (256u << 10)

/* The pod's backups (pool.h): every pool holds replicas + 1, CASed in by
 * the first compute node. A pod with backups needs pools of one size, each
 * split into replicas + 1 areas. */
static int pod_replicas(struct dm_store *d, const char *pod, uint32_t replicas, pod_err *err)
{
    if (replicas >= d->nmn || replicas > 3) {
        pod_err_set(err, "dm record store: %u backups of each memory node's records need more "
                    "memory nodes than the %u given (at most 3 backups, and fewer than the "
                    "memory nodes)", replicas, d->nmn);
        return -1;
    }
    for (unsigned i = 0; i < d->nmn; i++) {
        uint64_t was;
        if (fab_cas(d->f, d->mn[i].peer, offsetof(struct dm_pool_header, replicas), 0,
                    replicas + 1, &was, err) != 0)
            return -1;
        if (was && was != replicas + 1) {
            pod_err_set(err, "dm record store: pod \"%s\" keeps %llu backup%s of each memory "
                        "node's records (set by its first compute node on memory node %u, %s), "
                        "this compute node is configured for %u (dm.replicas): every compute node "
                        "of a pod must say the same", pod, (unsigned long long)(was - 1),
                        was == 2 ? "" : "s", i, d->mn[i].label, replicas);
            return -1;
        }
    }
    if (!replicas) return 0;
    for (unsigned i = 1; i < d->nmn; i++)
        if (d->mn[i].pool_size != d->mn[0].pool_size) {
            pod_err_set(err, "dm record store: a pod with backups needs memory nodes of one pool "
                        "size: memory node 0 (%s) has %llu bytes, memory node %u (%s) %llu",
                        d->mn[0].label, (unsigned long long)d->mn[0].pool_size, i,
                        d->mn[i].label, (unsigned long long)d->mn[i].pool_size);
            return -1;
        }
    uint64_t area = (d->mn[0].pool_size / (replicas + 1)) & ~4095ull;
    if (area < DM_POOL_MIN) {
        pod_err_set(err, "dm record store: pools of %llu bytes split into %u areas (the records "
                    "and %u backup%s) leave less than %llu bytes each", 
                    (unsigned long long)d->mn[0].pool_size, replicas + 1, replicas,
                    replicas == 1 ? "" : "s", (unsigned long long)DM_POOL_MIN);
        return -1;
    }
    d->area = area;
    d->replicas = replicas;
    for (unsigned i = 0; i < d->nmn; i++) d->mn[i].pool_size = area; /* what allocations may use */
    return 0;
}

/* Every copy area's cursor starts where area 0's does; a copy's FAAs then
 * keep it at or past its memory node's. Each compute node CASes 0 -> start
 * before it allocates anything. */
static int copies_ready(struct dm_store *d, pod_err *err)
{
    for (unsigned mn = 0; mn < d->nmn; mn++)
        for (uint32_t j = 1; j <= d->replicas; j++) {
            uint64_t was;
            if (fab_cas(d->f, d->mn[(mn + j) % d->nmn].peer,
                        j * d->area + offsetof(struct dm_pool_header, cursor), 0, DM_DATA_START,
                        &was, err) != 0)
                return -1;
        }
    return 0;
}

static int read_slots(struct dm_store *d, unsigned mn, uint64_t base, struct dm_cn_slot *out,
                      pod_err *err)
{
    return fab_read(d->f, d->mn[mn].peer, base + DM_CN_SLOTS_OFF, out,
                    DM_CN_SLOTS * sizeof *out, err);
}

/* A compute node that used memory node k before it restarted must be gone
 * before k is rebuilt: it could still change the other memory nodes behind
 * the copy. Such a one holds a connection to a memory node that kept its
 * pool and none to k (a compute node that came after the restart has both,
 * once its bootstrap, which goes in the memory nodes' order, reached k). */
static int old_cns_gone(struct dm_store *d, unsigned k, uint32_t fresh, pod_err *err)
{
    static struct dm_cn_slot at_k[DM_CN_SLOTS], at_m[DM_CN_SLOTS];
    uint64_t until = ms_now() + OLD_CN_WAIT_MS;
    for (;;) {
        unsigned live = 0, where = 0;
        if (read_slots(d, k, 0, at_k, err) != 0) return -1;
        for (unsigned m = 0; m < d->nmn && !live; m++) {
            if (fresh & 1u << m) continue;
            if (read_slots(d, m, 0, at_m, err) != 0) return -1;
            for (unsigned s = 1; s < DM_CN_SLOTS && !live; s++)
                if (s != d->slot && (at_m[s].conn & DM_CN_CONNECTED) &&
                    !(at_k[s].conn & DM_CN_CONNECTED))
                    live = s, where = m;
        }
        if (!live) return 0;
        if (ms_now() > until) {
            pod_err_set(err, "dm record store: memory node %u (%s) restarted and is to be rebuilt "
                        "from its backups, but the compute node of host %u is still connected to "
                        "memory node %u (%s) after %d ms: every compute node that ran before the "
                        "restart must have stopped (they stop by themselves when a memory node's "
                        "connection closes)", k, d->mn[k].label, live - 1, where,
                        d->mn[where].label, OLD_CN_WAIT_MS);
            return -1;
        }
        usleep(50000);
    }
}

/* Copy the used part of area `from_base` of memory node `from` to area
 * `to_base` of memory node `to`: the compute-node slots (not their conn
 * words: those are the memory node's own), the catalog and everything
 * allocated, and last the cursor. *bytes counts what was copied. */
static int copy_area(struct dm_store *d, unsigned to, uint64_t to_base, unsigned from,
                     uint64_t from_base, unsigned char *buf, uint64_t *bytes, pod_err *err)
{
    struct fab *f = d->f;
    int tp = d->mn[to].peer, fp = d->mn[from].peer;
    uint64_t cur, end;
    if (fab_read(f, fp, from_base + offsetof(struct dm_pool_header, cursor), &cur, 8, err) != 0)
        return -1;
    end = cur < DM_DATA_START ? DM_DATA_START : cur > d->area ? d->area : cur;
    static struct dm_cn_slot sl[DM_CN_SLOTS];
    if (read_slots(d, from, from_base, sl, err) != 0) return -1;
    struct fab_op ops[2 * DM_CN_SLOTS];
    for (unsigned s = 0; s < DM_CN_SLOTS; s++) {
        uint64_t at = to_base + SLOT_OFF(s);
        ops[2 * s] = (struct fab_op){.kind = FAB_WRITE, .off = at, .buf = &sl[s].state, .len = 8};
        ops[2 * s + 1] = (struct fab_op){.kind = FAB_WRITE, .off = at + 16, .buf = &sl[s].log,
                                         .len = 16};
    }
    if (fab_batch(f, tp, ops, 2 * DM_CN_SLOTS, err) != 0) return -1;
    uint64_t said = ms_now();
    for (uint64_t off = DM_CATALOG_OFF; off < end; off += COPY_CHUNK) {
        uint32_t len = end - off < COPY_CHUNK ? (uint32_t)(end - off) : COPY_CHUNK;
        if (fab_read(f, fp, from_base + off, buf, len, err) != 0 ||
            fab_write(f, tp, to_base + off, buf, len, err) != 0)
            return -1;
        *bytes += len;
        if (ms_now() - said > 2000) {
            said = ms_now();
            pod_info("dm record store: rebuilding memory node %u: %llu of %llu MiB of an area",
                     to, (unsigned long long)(off >> 20), (unsigned long long)(end >> 20));
        }
    }
    uint64_t probe;
    if (fab_write(f, tp, to_base + offsetof(struct dm_pool_header, cursor), &cur, 8, err) != 0 ||
        fab_read(f, tp, to_base, &probe, 8, err) != 0) /* placed */
        return -1;
    return 0;
}

/* The holder of a live copy of memory node p's records, none of fresh:
 * p itself (area 0) or memory node p + j (area j). */
static bool copy_source(const struct dm_store *d, unsigned p, uint32_t fresh, unsigned *mn,
                        uint64_t *base)
{
    for (uint32_t j = 0; j <= d->replicas; j++) {
        unsigned m = (p + j) % d->nmn;
        if (fresh & 1u << m) continue;
        *mn = m;
        *base = j * d->area;
        return true;
    }
    return false;
}

/* Memory node k restarted with an empty pool: claim it (its incarnation
 * CAS 0 -> "rebuilding by this compute node"), or wait while another
 * compute node that lives rebuilds it, then copy into it its own records
 * (from a backup) and the backups it keeps (from their memory nodes), and
 * give it the pod's incarnation once all is placed. */
static int rebuild(struct dm_store *d, unsigned k, uint64_t pod_inc, uint32_t fresh, pod_err *err)
{
    const uint64_t inc_off = offsetof(struct dm_pool_header, incarnation);
    int peer = d->mn[k].peer;
    uint64_t conn, was;
    if (fab_read(d->f, peer, SLOT_OFF(d->slot) + offsetof(struct dm_cn_slot, conn), &conn, 8,
                 err) != 0)
        return -1;
    uint64_t mine = DM_INCARNATION_REBUILDING(d->slot, conn), until = ms_now() + REBUILD_WAIT_MS,
             said = 0;
    for (uint64_t expect = 0;;) {
        if (fab_cas(d->f, peer, inc_off, expect, mine, &was, err) != 0) return -1;
        if (was == expect) break;
        if (was == pod_inc) return 0; /* rebuilt by another */
        if (!DM_IS_REBUILDING(was)) {
            pod_err_set(err, "dm record store: memory node %u (%s) holds incarnation 0x%llx of pod "
                        "\"%s\", the others 0x%llx", k, d->mn[k].label, (unsigned long long)was,
                        d->mn[0].label, (unsigned long long)pod_inc);
            return -1;
        }
        unsigned by = (unsigned)(was >> 40) & 0xffu;
        uint64_t c;
        if (by >= DM_CN_SLOTS ||
            fab_read(d->f, peer, SLOT_OFF(by) + offsetof(struct dm_cn_slot, conn), &c, 8, err) != 0)
            return -1;
        if (!(c & DM_CN_CONNECTED) ||
            DM_INCARNATION_REBUILDING(by, c) != was) { /* its rebuilder is gone: ours now */
            expect = was;
            continue;
        }
        expect = 0;
        if (ms_now() > until) {
            pod_err_set(err, "dm record store: the compute node of host %u has been rebuilding "
                        "memory node %u (%s) for %d s", by - 1, k, d->mn[k].label,
                        REBUILD_WAIT_MS / 1000);
            return -1;
        }
        if (ms_now() > said + 5000) {
            said = ms_now();
            pod_info("dm record store: waiting for the compute node of host %u to rebuild memory "
                     "node %u (%s)", by - 1, k, d->mn[k].label);
        }
        usleep(20000);
    }
    int rc = old_cns_gone(d, k, fresh, err);
    unsigned char *buf = rc ? NULL : malloc(COPY_CHUNK);
    if (!rc && !buf) {
        pod_err_set(err, "dm record store: out of memory");
        rc = -1;
    }
    uint64_t bytes = 0, t0 = ms_now();
    pod_info("dm record store: memory node %u (%s) restarted with an empty pool: rebuilding it "
             "from the backups", k, d->mn[k].label);
    for (uint32_t j = 0; rc == 0 && j <= d->replicas; j++) {
        /* area j of k holds memory node p's records */
        unsigned p = (k + d->nmn - j) % d->nmn, src;
        uint64_t base;
        if (!copy_source(d, p, fresh, &src, &base)) {
            pod_err_set(err, "dm record store: no memory node keeps a copy of memory node %u's "
                        "records", p);
            rc = -1;
            break;
        }
        rc = copy_area(d, k, j * d->area, src, base, buf, &bytes, err);
    }
    free(buf);
    if (rc != 0) { /* let another try */
        pod_err pe;
        fab_cas(d->f, peer, inc_off, mine, 0, &was, &pe);
        return -1;
    }
    if (fab_cas(d->f, peer, inc_off, mine, pod_inc, &was, err) != 0) return -1;
    if (was != mine) {
        pod_err_set(err, "dm record store: memory node %u (%s) was claimed by another compute "
                    "node while this one rebuilt it", k, d->mn[k].label);
        return -1;
    }
    pod_info("dm record store: rebuilt memory node %u (%s) from the backups: %.1f MiB in %.1f s",
             k, d->mn[k].label, (double)bytes / (1 << 20), (double)(ms_now() - t0) / 1000);
    return 0;
}

/* A pod with backups whose memory nodes, or up to `replicas` of them, restarted
 * (their pools empty while the others keep the pod's incarnation) is rebuilt;
 * more than that is refused: records are lost. */
static int rebuild_restarted(struct dm_store *d, const char *pod, pod_err *err)
{
    const uint64_t inc_off = offsetof(struct dm_pool_header, incarnation);
    uint64_t inc[DM_MAX_MEMNODES], pod_inc = 0;
    uint32_t fresh = 0;
    unsigned nfresh = 0, first = 0;
    for (unsigned i = 0; i < d->nmn; i++) {
        if (fab_read(d->f, d->mn[i].peer, inc_off, &inc[i], 8, err) != 0) return -1;
        if (!inc[i] || DM_IS_REBUILDING(inc[i])) {
            if (!nfresh++) first = i;
            fresh |= 1u << i;
        } else if (!pod_inc) {
            pod_inc = inc[i];
        } else if (inc[i] != pod_inc) {
            return 0; /* pools of different pods: pod_incarnation says so */
        }
    }
    if (!pod_inc || !fresh || pod_inc == DM_INCARNATION_LOST) return 0; /* a new pod, or whole */
    if (!(fresh & 1)) { /* a pod that was never complete is still being set up */
        uint64_t complete;
        if (fab_read(d->f, d->mn[0].peer, offsetof(struct dm_pool_header, complete), &complete,
                     8, err) != 0)
            return -1;
        if (!complete) return 0;
    }
    if (nfresh > d->replicas) {
        pod_err_set(err, "dm record store: %u memory nodes of pod \"%s\" restarted with empty "
                    "pools (the first: memory node %u, %s) and the pod keeps %u backup%s of each "
                    "memory node's records: records are lost; stop the compute nodes and restart "
                    "every memory node of the pod", nfresh, pod, first, d->mn[first].label,
                    d->replicas, d->replicas == 1 ? "" : "s");
        return -1;
    }
    if (!d->slot) {
        pod_err_set(err, "dm record store: memory node %u (%s) of pod \"%s\" restarted with an "
                    "empty pool: a compute node must rebuild it from the backups first", first,
                    d->mn[first].label, pod);
        return -1;
    }
    for (unsigned k = 0; k < d->nmn; k++)
        if ((fresh & 1u << k) && rebuild(d, k, pod_inc, fresh, err) != 0) return -1;
    return 0;
}

/* The pod's protocol (pool.h): compute nodes running different ones would
 * read each other's lock words wrong. */
static int pod_protocol(struct dm_store *d, const char *pod, const char *protocol, pod_err *err)
{
    uint64_t want = 0, was;
    if (strlen(protocol) >= sizeof want) {
        pod_err_set(err, "dm record store: protocol name %s is too long", protocol);
        return -1;
    }
    memcpy(&want, protocol, strlen(protocol));
    if (fab_cas(d->f, d->mn[0].peer, offsetof(struct dm_pool_header, protocol), 0, want, &was,
                err) != 0)
        return -1;
    if (was && was != want) {
        char name[9] = {0};
        memcpy(name, &was, 8);
        pod_err_set(err, "dm record store: pod \"%s\" runs protocol %s (set by its first compute "
                    "node), this compute node is configured for %s (dm.protocol): every compute "
                    "node of a pod must run the same", pod, name, protocol);
        return -1;
    }
    return 0;
}

/* Memory node mn closed its bootstrap connection: it stopped. A compute
 * node stops too (status 3), saying so. */
static void memnode_gone(struct dm_store *d, unsigned mn)
{
    fprintf(stderr, "dm record store: memory node %u (%s) closed its connection: it stopped. "
            "This compute node stops too; start it again once the memory node is back (in a "
            "pod with backups the first compute node to start rebuilds a memory node that "
            "restarted)\n", mn, d->mn[mn].label);
    _exit(3);
}

/* A compute node stops when a memory node's bootstrap connection closes:
 * that memory node stopped, and every operation on it would fail. Stopping
 * at once, rather than at its next operation, lets a memory node with
 * backups be rebuilt (docs/dm.md, "Replication") without waiting for
 * compute nodes that sit idle. */
static void *watcher(void *arg)
{
    struct dm_store *d = arg;
    struct pollfd p[DM_MAX_MEMNODES + 1];
    for (unsigned i = 0; i < d->nmn; i++)
        p[i] = (struct pollfd){.fd = d->mn[i].boot_fd, .events = POLLIN | POLLRDHUP};
    p[d->nmn] = (struct pollfd){.fd = d->watch_stop, .events = POLLIN};
    for (;;) {
        if (poll(p, d->nmn + 1, -1) < 0) {
            if (errno == EINTR) continue;
            return NULL;
        }
        if (p[d->nmn].revents) return NULL;
        for (unsigned i = 0; i < d->nmn; i++)
            if (p[i].revents) memnode_gone(d, i); /* it sends nothing after its reply */
    }
}

static int watch_memnodes(struct dm_store *d, pod_err *err)
{
    d->watch_stop = eventfd(0, EFD_CLOEXEC);
    if (d->watch_stop < 0 || pthread_create(&d->watcher, NULL, watcher, d) != 0) {
        pod_err_set(err, "dm record store: cannot start the thread that watches the memory "
                    "nodes: %s", strerror(errno));
        if (d->watch_stop >= 0) close(d->watch_stop);
        d->watch_stop = -1;
        return -1;
    }
    return 0;
}

struct record_store *rs_dm_open_cn(const char *const *sockets, int n, const char *provider,
                                   const char *pod, uint32_t slot, const char *protocol,
                                   uint32_t replicas, pod_err *err)
{
    if (!provider || !*provider) provider = "shm";
    if (!pod || !*pod || strlen(pod) >= DM_POD_NAME_MAX) {
        pod_err_set(err, "dm record store: a pod name of 1..%d bytes is needed",
                    DM_POD_NAME_MAX - 1);
        return NULL;
    }
    if (slot >= DM_CN_SLOTS) {
        pod_err_set(err, "dm record store: compute node slot %u: 1..%u are served (hosts 0..%u)",
                    slot, DM_CN_SLOTS - 1, DM_CN_SLOTS - 2);
        return NULL;
    }
    if (n < 1 || n > (int)DM_MAX_MEMNODES || !sockets) {
        pod_err_set(err, "dm record store: %d memory nodes: 1..%u are served", n,
                    DM_MAX_MEMNODES);
        return NULL;
    }
    struct dm_store *d = calloc(1, sizeof *d);
    if (!d) {
        pod_err_set(err, "dm record store: out of memory");
        return NULL;
    }
    d->base.ops = &dm_ops;
    d->root = d;
    d->t = d->tables;
    d->nmn = (unsigned)n;
    d->watch_stop = -1;
    snprintf(d->pod, sizeof d->pod, "%s", pod);
    for (unsigned i = 0; i < DM_MAX_MEMNODES; i++) d->mn[i].boot_fd = -1;
    pthread_mutex_init(&d->mu, NULL);
    if (!(d->bucket = malloc(MAX_BUCKET_BYTES))) {
        pod_err_set(err, "dm record store: out of memory");
        goto fail;
    }
    d->f = fab_open(&(struct fab_open_opts){.provider = provider}, err);
    if (!d->f) goto fail;
    struct dm_boot_req req = {.magic = DM_BOOT_MAGIC, .version = DM_BOOT_VERSION};
    snprintf(req.pod, sizeof req.pod, "%s", pod);
    snprintf(req.provider, sizeof req.provider, "%s", provider);
    size_t nl = sizeof req.name;
    if (fab_name(d->f, req.name, &nl, err) != 0) goto fail;
    req.name_len = (uint32_t)nl;
    req.cn_slot = d->slot = slot;
    for (unsigned i = 0; i < d->nmn; i++)
        if (memnode_join(d, i, d->nmn, sockets[i], pod, &req, err) != 0) goto fail;
    if ((protocol && pod_protocol(d, pod, protocol, err) != 0) ||
        pod_replicas(d, pod, replicas, err) != 0 || pod_incarnation(d, pod, err) != 0 ||
        copies_ready(d, err) != 0)
        goto fail;
    if (slot) { /* which connection of the slot we are: bucket locks name it */
        uint64_t conn;
        if (fab_read(d->f, d->mn[0].peer, SLOT_OFF(slot) + offsetof(struct dm_cn_slot, conn), &conn,
                     sizeof conn, err) != 0)
            goto fail;
        d->conn_gen = conn & ~DM_CN_CONNECTED;
    }
    if (slot && watch_memnodes(d, err) != 0) goto fail;
    return &d->base;
fail:
    destroy(&d->base);
    return NULL;
}

struct record_store *rs_dm_open_many(const char *const *sockets, int n, const char *provider,
                                     const char *pod, pod_err *err)
{
    return rs_dm_open_cn(sockets, n, provider, pod, 0, NULL, 0, err);
}

struct record_store *rs_dm_open(const char *memnode_socket, const char *provider, const char *pod,
                                pod_err *err)
{
    return rs_dm_open_many(&memnode_socket, 1, provider, pod, err);
}

int rs_dm_nic_model(struct record_store *s, const struct nic_model_params *p, pod_err *err)
{
    struct dm_store *d = ds(s)->root;
    pthread_mutex_lock(&d->mu);
    d->nic = *p;
    int rc = nic_model_on(d, d->f, err);
    d->nic_on = rc == 0;
    pthread_mutex_unlock(&d->mu);
    return rc;
}
