/* The CXL index across processes: each host is a process attached to one
 * region (at its own address); owners change their index while the other
 * hosts read it; cross-host EBR reclaims the nodes.
 *
 * Stress scenarios (2 and 3 hosts, coherent and simulated non-coherent): an
 * owner inserts and removes keys for a bounded time (filling buckets, then
 * sweeping them empty, so leaves split and get pruned) and compacts its index
 * every 250 ms, while readers on other hosts run lookups, forward/backward
 * scans and next/prev, checking what must hold whatever the owner does: keys
 * come strictly ordered; the "stable" keys (inserted first, never removed)
 * are always found and never skipped; keys never inserted never appear;
 * every value is key*3+1 (a torn or garbage entry shows). The "mixed"
 * scenario has every host own an index and read the others'.
 *
 * Premature reuse: the owner poisons freed nodes (xebr, XEBR_POISON_BYTE)
 * before cxl_free. A reader cannot crash on another process's freed memory
 * (the region stays mapped), and the tree's version checks make a reader
 * restart on most freed nodes, so readers look for it directly: inside a
 * critical section they walk a root-to-leaf path with the OLC protocol,
 * stall, and check that no node on it holds the poison (walk_path). Checked
 * by mutation: freeing at retire time instead of through EBR fails every
 * stress test and the stuck-reader test; private (per-process) EBR domains
 * fail most of them.
 *
 * At the end every host computes a checksum of the final key set with a full
 * scan and must agree with the owner's; the owner drains its retired nodes
 * to zero and its HWcc usage moved by exactly what cxl_index_hwcc_bytes
 * says. Also: a reader pinned in a critical section keeps the owner from
 * freeing anything retired meanwhile (pending stays > 0, HWcc usage does not
 * drop) until it exits; the API and its refusals; compaction (and BT_NOMEM
 * leaving the index unchanged); HWcc bytes per key by node size (printed;
 * CXL_INDEX_DENSITY_KEYS=N changes the key count). CXL_INDEX_STRESS_MS sets
 * the stress duration (default 2000 ms). */
#include <check.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cxl/region.h"
#include "helpers/testutil.h"
#include "pod/cxl_index.h"
#include "pod/xebr.h"

#define MiB (1ull << 20)
#define WAIT_MS 20000
#define TABLE 7
#define W 0 /* every process uses worker 0 of its host */

/* ---- keys ---------------------------------------------------------------------
 * Domain 0..DOMAIN-1 in buckets of 512. Even buckets: k % 4 == 0 is stable
 * (inserted first, never removed), k % 4 == 2 is never inserted, the rest
 * churns. Odd buckets churn entirely, so their leaves empty out and get
 * pruned and retired. */
#define DOMAIN 32768u
#define BUCKET_SHIFT 9

static bool odd_bucket(uint64_t k) { return (k >> BUCKET_SHIFT) & 1; }
static bool is_stable(uint64_t k) { return k < DOMAIN && !odd_bucket(k) && k % 4 == 0; }
static bool is_never(uint64_t k) { return k < DOMAIN && !odd_bucket(k) && k % 4 == 2; }
static bool is_churn(uint64_t k) { return k < DOMAIN && !is_stable(k) && !is_never(k); }
static uint64_t value_of(uint64_t k) { return k * 3 + 1; }

/* Smallest stable key >= k, or UINT64_MAX. */
static uint64_t stable_ge(uint64_t k)
{
    k = (k + 3) & ~3ull;
    while (k < DOMAIN) {
        if (!odd_bucket(k)) return k; /* a multiple of 4 in an even bucket */
        k = ((k >> BUCKET_SHIFT) + 1) << BUCKET_SHIFT;
    }
    return UINT64_MAX;
}

/* Largest stable key <= k, or UINT64_MAX. */
static uint64_t stable_le(uint64_t k)
{
    if (k >= DOMAIN) k = DOMAIN - 1;
    k &= ~3ull;
    for (;;) {
        if (is_stable(k)) return k;
        /* odd bucket: go to the last multiple of 4 of the bucket below */
        uint64_t b = k >> BUCKET_SHIFT;
        if (b == 0) return UINT64_MAX;
        k = (b << BUCKET_SHIFT) - 4;
    }
}

static void enc(uint64_t k, unsigned char out[8])
{
    for (int i = 7; i >= 0; i--, k >>= 8) out[i] = (unsigned char)k;
}

static uint64_t dec(const void *p)
{
    const unsigned char *b = p;
    uint64_t k = 0;
    for (int i = 0; i < 8; i++) k = k << 8 | b[i];
    return k;
}

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rnd(rng *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

/* Race injection: readers stall now and then at the tree's protocol points,
 * so an owner's unlink and free can fall inside a reader's window. */
static int inject; /* per process */

void bt_race_point(enum bt_race_where where)
{
    static uint64_t x = 0x9e3779b97f4a7c15ull;
    if (!inject || where == BT_RACE_LOCKED) return;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    if ((x & 63) == 0) sched_yield();
}

/* ---- the shared mailbox (host 0's HWcc, root slot 0) ----------------------------- */

struct mailbox {
    uint64_t loaded[POD_MAX_HOSTS];   /* owner h's stable keys are in */
    uint64_t wdone[POD_MAX_HOSTS];    /* owner h stopped writing; sum/nkeys are final */
    uint64_t sum[POD_MAX_HOSTS];      /* owner h's checksum of its final key set */
    uint64_t nkeys[POD_MAX_HOSTS];
    uint64_t rdone[POD_MAX_HOSTS];    /* host h finished reading: 1 ok, 2 failed */
    uint64_t reads[POD_MAX_HOSTS];    /* read operations host h ran */
    uint64_t pinned, release, exited; /* stuck-reader test */
};

enum scenario_kind { ONE_OWNER, EVERY_HOST_OWNS };

struct scenario {
    struct pod_config *c;
    int nhosts;
    enum scenario_kind kind;
    int stress_ms;
};

#define FAILF(...) TU_HOST_FAIL(host, __VA_ARGS__)

/* Host 0 formats and publishes the mailbox; the others attach once it is up. */
static struct cxl_region *attach_host(const struct pod_config *c, int host, struct mailbox **mb,
                                      pod_err *err)
{
    struct cxl_region *r = NULL;
    if (host == 0) {
        r = cxl_region_open(c, 0, CXL_OPEN_CREATE | CXL_OPEN_HEARTBEAT, err);
        if (!r) return NULL;
        cxl_off off = cxl_zalloc(r, CXL_HWCC, sizeof(struct mailbox));
        if (!off) {
            pod_err_set(err, "mailbox allocation failed");
            cxl_region_close(r);
            return NULL;
        }
        *mb = cxl_ptr(r, off);
        cxl_root_publish(r, 0, off);
        return r;
    }
    for (int i = 0; i < WAIT_MS / 5 && !r; i++) {
        struct cxl_region *obs = cxl_region_open(c, -1, 0, err);
        bool up = obs && cxl_root_get(obs, 0, 0) != CXL_NULL;
        if (obs) cxl_region_close(obs);
        if (up) r = cxl_region_open(c, host, CXL_OPEN_CREATE | CXL_OPEN_HEARTBEAT, err);
        else usleep(5000);
    }
    if (!r) return NULL;
    *mb = cxl_ptr(r, cxl_root_get(r, 0, 0));
    return r;
}

static struct cxl_index *wait_open(struct cxl_region *r, struct xebr *x, int owner, pod_err *err)
{
    for (int i = 0; i < WAIT_MS / 2; i++) {
        struct cxl_index *ix = cxl_index_open(r, x, owner, TABLE, (uint32_t)owner, err);
        if (ix) return ix;
        usleep(2000);
    }
    return NULL;
}

/* Wait until host h has finished reading: true if it succeeded, false if
 * it failed or never finished. */
static bool wait_rdone(const struct mailbox *mb, int h)
{
    for (int i = 0; i < WAIT_MS * 10; i++) {
        uint64_t v = __atomic_load_n(&mb->rdone[h], __ATOMIC_ACQUIRE);
        if (v) return v == 1;
        usleep(100);
    }
    return false;
}

/* ---- reader checks ----------------------------------------------------------------- */

struct scan_state {
    bool forward;
    uint64_t bound;     /* keys must be > bound (forward) / < bound (backward) */
    bool bound_incl;    /* ... or equal, for the first key */
    unsigned limit, seen;
    bool bad;
    char why[160];
};

static bool check_entry(uint64_t k, uint64_t v, char *why, size_t n)
{
    if (k >= DOMAIN) {
        snprintf(why, n, "key %#llx outside the domain (poisoned node?)", (unsigned long long)k);
        return false;
    }
    if (is_never(k)) {
        snprintf(why, n, "key %llu was never inserted", (unsigned long long)k);
        return false;
    }
    if (v != value_of(k)) {
        snprintf(why, n, "key %llu has value %#llx, want %llu", (unsigned long long)k,
                 (unsigned long long)v, (unsigned long long)value_of(k));
        return false;
    }
    return true;
}

static bool scan_visit(void *arg, const void *key, uint64_t value)
{
    struct scan_state *s = arg;
    uint64_t k = dec(key);
    if (!check_entry(k, value, s->why, sizeof s->why)) {
        s->bad = true;
        return false;
    }
    if (s->forward) {
        bool ok = s->bound_incl ? k >= s->bound : k > s->bound;
        /* no stable key skipped between the bound and k */
        uint64_t st = stable_ge(s->bound_incl ? s->bound : s->bound + 1);
        if (!ok || st < k) {
            snprintf(s->why, sizeof s->why,
                     "forward scan: key %llu after bound %llu%s (stable %llu skipped?)",
                     (unsigned long long)k, (unsigned long long)s->bound,
                     s->bound_incl ? " incl" : "", (unsigned long long)st);
            s->bad = true;
            return false;
        }
    } else {
        bool ok = s->bound_incl ? k <= s->bound : k < s->bound;
        uint64_t st = s->bound_incl ? stable_le(s->bound)
                                    : (s->bound == 0 ? UINT64_MAX : stable_le(s->bound - 1));
        if (!ok || (st != UINT64_MAX && st > k)) {
            snprintf(s->why, sizeof s->why,
                     "backward scan: key %llu after bound %llu%s (stable %llu skipped?)",
                     (unsigned long long)k, (unsigned long long)s->bound,
                     s->bound_incl ? " incl" : "", (unsigned long long)st);
            s->bad = true;
            return false;
        }
    }
    s->bound = k;
    s->bound_incl = false;
    return ++s->seen < s->limit;
}

/* Premature-reuse detector. Inside a critical section, walk one random
 * root-to-leaf path with the OLC protocol of docs/btree.md (version word,
 * meta word with count and level, child refs after the separators): each
 * node on the path is reachable at some instant of the section (the root ref
 * was loaded in it; a child ref was read between two equal, unlocked,
 * non-obsolete versions of its parent). Then stall, to let the owner unlink
 * and retire those nodes, and check that no word of any of them holds the
 * poison: cross-host EBR must keep them unfreed until this section ends. */
#define POISON64 (0x0101010101010101ull * XEBR_POISON_BYTE)

static bool walk_path(const struct cxl_index *ix, struct xebr *x, rng *g, char *why, size_t n)
{
    const bt_tree *t = cxl_index_tree(ix);
    char *path[32];
    unsigned depth = 0;
    bool ok = true;
    xebr_enter(x, W);
    uint64_t ref = __atomic_load_n(&t->hdr->root, __ATOMIC_ACQUIRE);
    while (depth < 32 && ref != 0) {
        char *node = t->space.base + ref;
        if (ref % 64 != 0) { /* HWcc lines per node: node_size / 64, not one more */
            snprintf(why, n, "node at offset %#llx is not cache-line aligned",
                     (unsigned long long)ref);
            xebr_exit(x, W);
            return false;
        }
        uint64_t v = __atomic_load_n((uint64_t *)node, __ATOMIC_ACQUIRE);
        path[depth++] = node;
        if (v & 3) break; /* locked or obsolete: still protected, but stop here */
        uint64_t meta = __atomic_load_n((uint64_t *)node + 1, __ATOMIC_ACQUIRE);
        unsigned level = (unsigned)(meta >> 32), count = (unsigned)meta;
        if (level == 0 || count > t->inner_cap) break;
        unsigned slot = (unsigned)(rnd(g) % (count + 1));
        uint64_t next = __atomic_load_n((uint64_t *)(node + t->inner_kids_off) + slot,
                                        __ATOMIC_ACQUIRE);
        if (__atomic_load_n((uint64_t *)node, __ATOMIC_ACQUIRE) != v) break; /* may be stale */
        ref = next;
    }
    for (unsigned i = 1 + (unsigned)(rnd(g) % 3); i > 0; i--) sched_yield();
    for (unsigned d = 0; d < depth && ok; d++) {
        const uint64_t *w = (const uint64_t *)path[d];
        for (unsigned i = 1; i < t->node_size / 8; i++) { /* word 0: mimalloc's free list */
            if (__atomic_load_n(&w[i], __ATOMIC_RELAXED) == POISON64) {
                snprintf(why, n, "node at offset %#llx (depth %u) was freed while this reader "
                         "was inside (poison in word %u)",
                         (unsigned long long)(path[d] - t->space.base), d, i);
                ok = false;
                break;
            }
        }
    }
    xebr_exit(x, W);
    return ok;
}

/* One random read operation on ix; false with *why on a violation. */
static bool read_once(const struct cxl_index *ix, struct xebr *x, rng *g, char *why, size_t n)
{
    unsigned char kb[8], ko[8];
    uint64_t v, k;
    unsigned op = (unsigned)(rnd(g) % 12);
    uint64_t start = rnd(g) % (DOMAIN + 64);
    bool incl = rnd(g) & 1;
    bt_status st;
    switch (op) {
    case 0: case 1: { /* stable key: always there */
        k = stable_ge(rnd(g) % DOMAIN);
        if (k == UINT64_MAX) k = 0;
        enc(k, kb);
        st = cxl_index_lookup(ix, W, kb, &v);
        if (st != BT_OK) {
            snprintf(why, n, "stable key %llu: %s", (unsigned long long)k, bt_status_name(st));
            return false;
        }
        return check_entry(k, v, why, n);
    }
    case 2: { /* churn or never key */
        k = rnd(g) % DOMAIN;
        enc(k, kb);
        st = cxl_index_lookup(ix, W, kb, &v);
        if (st == BT_OK) return check_entry(k, v, why, n);
        if (st != BT_NOT_FOUND || is_stable(k)) {
            snprintf(why, n, "lookup %llu: %s", (unsigned long long)k, bt_status_name(st));
            return false;
        }
        return true;
    }
    case 3: { /* several lookups in one longer critical section, on the tree */
        xebr_enter(x, W);
        bool ok = true;
        for (int i = 0; i < 8 && ok; i++) {
            k = stable_ge(rnd(g) % DOMAIN);
            if (k == UINT64_MAX) continue;
            enc(k, kb);
            st = bt_lookup(cxl_index_tree(ix), kb, &v);
            if (st != BT_OK) {
                snprintf(why, n, "stable key %llu (long section): %s", (unsigned long long)k,
                         bt_status_name(st));
                ok = false;
            } else {
                ok = check_entry(k, v, why, n);
            }
        }
        xebr_exit(x, W);
        return ok;
    }
    case 4: case 5: { /* forward scan */
        struct scan_state s = {.forward = true, .bound = start, .bound_incl = incl,
                               .limit = 1 + (unsigned)(rnd(g) % 300)};
        enc(start, kb);
        st = cxl_index_scan_forward(ix, W, kb, incl, scan_visit, &s);
        if (st != BT_OK || s.bad) {
            snprintf(why, n, "%s", s.bad ? s.why : bt_status_name(st));
            return false;
        }
        if (s.seen < s.limit) { /* ran to the end: no stable key left beyond */
            uint64_t sk = stable_ge(s.bound_incl ? s.bound : s.bound + 1);
            if (sk != UINT64_MAX) {
                snprintf(why, n, "forward scan ended at %llu before stable %llu",
                         (unsigned long long)s.bound, (unsigned long long)sk);
                return false;
            }
        }
        return true;
    }
    case 6: case 7: { /* backward scan */
        struct scan_state s = {.forward = false, .bound = start, .bound_incl = incl,
                               .limit = 1 + (unsigned)(rnd(g) % 300)};
        enc(start, kb);
        st = cxl_index_scan_backward(ix, W, kb, incl, scan_visit, &s);
        if (st != BT_OK || s.bad) {
            snprintf(why, n, "%s", s.bad ? s.why : bt_status_name(st));
            return false;
        }
        if (s.seen < s.limit) {
            uint64_t sk = s.bound_incl ? stable_le(s.bound)
                                       : (s.bound == 0 ? UINT64_MAX : stable_le(s.bound - 1));
            if (sk != UINT64_MAX) {
                snprintf(why, n, "backward scan ended at %llu before stable %llu",
                         (unsigned long long)s.bound, (unsigned long long)sk);
                return false;
            }
        }
        return true;
    }
    case 10: case 11:
        return walk_path(ix, x, g, why, n);
    case 8: { /* next key */
        enc(start, kb);
        st = cxl_index_next(ix, W, kb, incl, ko, &v);
        uint64_t sk = stable_ge(incl ? start : start + 1);
        if (st == BT_NOT_FOUND) {
            if (sk != UINT64_MAX) {
                snprintf(why, n, "next(%llu): none, but stable %llu exists",
                         (unsigned long long)start, (unsigned long long)sk);
                return false;
            }
            return true;
        }
        k = dec(ko);
        if (st != BT_OK || !check_entry(k, v, why, n)) {
            if (st != BT_OK) snprintf(why, n, "next: %s", bt_status_name(st));
            return false;
        }
        if ((incl ? k < start : k <= start) || sk < k) {
            snprintf(why, n, "next(%llu%s) = %llu, stable %llu", (unsigned long long)start,
                     incl ? " incl" : "", (unsigned long long)k, (unsigned long long)sk);
            return false;
        }
        return true;
    }
    default: { /* previous key */
        enc(start, kb);
        st = cxl_index_prev(ix, W, kb, incl, ko, &v);
        uint64_t sk = incl ? stable_le(start) : (start == 0 ? UINT64_MAX : stable_le(start - 1));
        if (st == BT_NOT_FOUND) {
            if (sk != UINT64_MAX) {
                snprintf(why, n, "prev(%llu): none, but stable %llu exists",
                         (unsigned long long)start, (unsigned long long)sk);
                return false;
            }
            return true;
        }
        k = dec(ko);
        if (st != BT_OK || !check_entry(k, v, why, n)) {
            if (st != BT_OK) snprintf(why, n, "prev: %s", bt_status_name(st));
            return false;
        }
        if ((incl ? k > start : k >= start) || (sk != UINT64_MAX && sk > k)) {
            snprintf(why, n, "prev(%llu%s) = %llu, stable %llu", (unsigned long long)start,
                     incl ? " incl" : "", (unsigned long long)k, (unsigned long long)sk);
            return false;
        }
        return true;
    }
    }
}

/* Checksum of a key set in ascending order (FNV-1a over the keys). */
struct sum_state {
    uint64_t h, n, last;
    bool bad;
};

static bool sum_visit(void *arg, const void *key, uint64_t value)
{
    struct sum_state *s = arg;
    uint64_t k = dec(key);
    if ((s->n && k <= s->last) || k >= DOMAIN || value != value_of(k)) {
        s->bad = true;
        return false;
    }
    s->h = (s->h ^ k) * 1099511628211ull;
    s->n++;
    s->last = k;
    return true;
}

static void sum_init(struct sum_state *s)
{
    memset(s, 0, sizeof *s);
    s->h = 1469598103934665603ull;
}

/* ---- owner ------------------------------------------------------------------------------ */

struct owner {
    struct cxl_index *ix;
    unsigned char *present; /* DOMAIN flags: the owner's model of the index */
    uint64_t inserts, removes, compactions;
    unsigned phase_ops;     /* ops left in this phase */
    uint64_t window;        /* the bucket this phase works on */
    bool filling;
};

static int owner_setup(int host, struct cxl_region *r, struct xebr *x, struct owner *o)
{
    pod_err err = {{0}};
    o->ix = cxl_index_create(r, x, TABLE, (uint32_t)host, 8, 0, &err);
    if (!o->ix) FAILF("create: %s", err.msg);
    o->present = calloc(DOMAIN, 1);
    unsigned char kb[8];
    for (uint64_t k = 0; k < DOMAIN; k++) {
        if (!is_stable(k) && !(is_churn(k) && k % 3 == 0)) continue;
        enc(k, kb);
        bt_status st = cxl_index_insert(o->ix, W, kb, value_of(k));
        if (st != BT_OK) FAILF("initial insert %llu: %s", (unsigned long long)k, bt_status_name(st));
        o->present[k] = 1;
    }
    return 0;
}

/* One write; checks the answer against the model. Phases alternate between
 * filling one bucket (1500 random operations, 3 in 4 inserts) and draining
 * one (a sweep removing every churn key of the bucket), so leaves split and
 * then empty out and get pruned and retired; 1 in 8 operations is a random
 * insert or remove anywhere. */
static int owner_write(int host, struct owner *o, rng *g)
{
    if (o->phase_ops == 0) {
        o->filling = !o->filling;
        o->window = rnd(g) % (DOMAIN >> BUCKET_SHIFT);
        o->phase_ops = o->filling ? 1500 : 1u << BUCKET_SHIFT;
    }
    uint64_t k;
    bool ins;
    if (rnd(g) % 8 == 0) {
        do k = rnd(g) % DOMAIN;
        while (!is_churn(k));
        ins = rnd(g) & 1;
    } else if (o->filling) {
        do k = o->window << BUCKET_SHIFT | (rnd(g) & ((1u << BUCKET_SHIFT) - 1));
        while (!is_churn(k));
        ins = rnd(g) % 4 != 0;
        o->phase_ops--;
    } else {
        do k = o->window << BUCKET_SHIFT | (uint64_t)((1u << BUCKET_SHIFT) - o->phase_ops--);
        while (o->phase_ops > 0 && !is_churn(k));
        if (!is_churn(k)) return 0;
        ins = false;
    }
    unsigned char kb[8];
    enc(k, kb);
    if (ins) {
        bt_status st = cxl_index_insert(o->ix, W, kb, value_of(k));
        if (st != (o->present[k] ? BT_EXISTS : BT_OK))
            FAILF("insert %llu (present %d): %s", (unsigned long long)k, o->present[k],
                  bt_status_name(st));
        o->present[k] = 1;
        o->inserts++;
    } else {
        uint64_t old = 0;
        bt_status st = cxl_index_remove(o->ix, W, kb, &old);
        if (st != (o->present[k] ? BT_OK : BT_NOT_FOUND))
            FAILF("remove %llu (present %d): %s", (unsigned long long)k, o->present[k],
                  bt_status_name(st));
        if (st == BT_OK && old != value_of(k)) FAILF("removed %llu had value %llu",
                                                     (unsigned long long)k, (unsigned long long)old);
        o->present[k] = 0;
        o->removes++;
    }
    return 0;
}

static void model_sum(const struct owner *o, uint64_t *sum, uint64_t *n)
{
    struct sum_state s;
    sum_init(&s);
    for (uint64_t k = 0; k < DOMAIN; k++) {
        if (!o->present[k]) continue;
        s.h = (s.h ^ k) * 1099511628211ull;
        s.n++;
    }
    *sum = s.h;
    *n = s.n;
}

/* ---- one host of a stress scenario ----------------------------------------------------- */

static int stress_host(int host, const struct scenario *sc)
{
    pod_err err = {{0}};
    struct mailbox *mb = NULL;
    struct cxl_region *r = attach_host(sc->c, host, &mb, &err);
    if (!r) FAILF("attach: %s", err.msg);
    struct xebr *x = xebr_open(r, &err);
    if (!x) FAILF("xebr: %s", err.msg);
    rng g = {0x243f6a8885a308d3ull ^ ((uint64_t)host << 32) ^ (uint64_t)getpid()};
    inject = 1;

    bool owns = sc->kind == EVERY_HOST_OWNS || host == 0;
    struct owner o = {0};
    struct cxl_usage u0, u1;
    uint64_t bytes0 = 0;
    if (owns) {
        if (owner_setup(host, r, x, &o)) return 1;
        __atomic_store_n(&mb->loaded[host], 1, __ATOMIC_RELEASE);
        cxl_usage_get(r, host, CXL_HWCC, &u0);
        bytes0 = cxl_index_hwcc_bytes(o.ix);
    }
    /* The indexes this host reads. */
    struct cxl_index *rix[POD_MAX_HOSTS] = {0};
    int nread = 0;
    for (int h = 0; h < sc->nhosts; h++) {
        bool h_owns = sc->kind == EVERY_HOST_OWNS || h == 0;
        if (h == host || !h_owns) continue;
        rix[h] = wait_open(r, x, h, &err);
        if (!rix[h]) FAILF("open host %d's index: %s", h, err.msg);
        /* Readers may open it at once, but its stable keys are in only now. */
        if (!tu_wait_u64(&mb->loaded[h], 1, WAIT_MS)) FAILF("host %d never loaded", h);
        if (cxl_index_is_owner(rix[h])) FAILF("host %d's index is writable here", h);
        unsigned char kb[8];
        enc(DOMAIN + 5, kb);
        if (cxl_index_insert(rix[h], W, kb, 1) != BT_INVALID ||
            cxl_index_remove(rix[h], W, kb, NULL) != BT_INVALID ||
            cxl_index_upsert(rix[h], W, kb, 1, NULL) != BT_INVALID ||
            cxl_index_compact(rix[h], W) != BT_INVALID)
            FAILF("a write to host %d's index was not refused", h);
        nread++;
    }

    /* Run: owners write until the deadline; readers read until every owner
     * they read has finished (so reads overlap all writes). */
    uint64_t deadline = now_ms() + (uint64_t)sc->stress_ms;
    uint64_t next_compact = now_ms() + 250;
    uint64_t reads = 0;
    bool writing = owns;
    char why[200];
    for (;;) {
        if (writing) {
            for (int i = 0; i < 32 * (nread + 1); i++)
                if (owner_write(host, &o, &g)) return 1;
            if (now_ms() >= next_compact) { /* rebuild under the readers' feet */
                bt_status st = cxl_index_compact(o.ix, W);
                if (st != BT_OK) FAILF("compact: %s", bt_status_name(st));
                o.compactions++;
                next_compact = now_ms() + 250;
            }
            if (now_ms() >= deadline) {
                writing = false;
                uint64_t sum, n;
                model_sum(&o, &sum, &n);
                __atomic_store_n(&mb->sum[host], sum, __ATOMIC_RELAXED);
                __atomic_store_n(&mb->nkeys[host], n, __ATOMIC_RELAXED);
                __atomic_store_n(&mb->wdone[host], 1, __ATOMIC_RELEASE);
            }
        }
        bool all_done = true;
        for (int h = 0; h < sc->nhosts; h++) {
            if (!rix[h]) continue;
            if (!__atomic_load_n(&mb->wdone[h], __ATOMIC_ACQUIRE)) all_done = false;
            for (int i = 0; i < 16; i++, reads++)
                if (!read_once(rix[h], x, &g, why, sizeof why)) {
                    __atomic_store_n(&mb->rdone[host], 2, __ATOMIC_RELEASE);
                    FAILF("reading host %d's index: %s", h, why);
                }
        }
        if (!writing && all_done) break;
        if (!writing && nread == 0) break;
        if (now_ms() > deadline + WAIT_MS) {
            __atomic_store_n(&mb->rdone[host], 2, __ATOMIC_RELEASE);
            FAILF("an owner never finished writing");
        }
    }
    inject = 0;

    /* Final key sets: every host agrees with each owner. */
    for (int h = 0; h < sc->nhosts; h++) {
        if (!rix[h]) continue;
        struct sum_state s;
        sum_init(&s);
        bt_status st = cxl_index_scan_forward(rix[h], W, NULL, true, sum_visit, &s);
        uint64_t want = __atomic_load_n(&mb->sum[h], __ATOMIC_RELAXED);
        uint64_t wantn = __atomic_load_n(&mb->nkeys[h], __ATOMIC_RELAXED);
        if (st != BT_OK || s.bad || s.h != want || s.n != wantn) {
            __atomic_store_n(&mb->rdone[host], 2, __ATOMIC_RELEASE);
            FAILF("final key set of host %d's index: %llu keys, sum %#llx; owner says %llu, "
                  "%#llx%s",
                  h, (unsigned long long)s.n, (unsigned long long)s.h,
                  (unsigned long long)wantn, (unsigned long long)want, s.bad ? " (bad entry)" : "");
        }
    }
    __atomic_store_n(&mb->reads[host], reads, __ATOMIC_RELAXED);
    __atomic_store_n(&mb->rdone[host], 1, __ATOMIC_RELEASE);

    if (owns) {
        /* The owner's own view agrees too, and the tree is sound. */
        struct sum_state s;
        sum_init(&s);
        cxl_index_scan_forward(o.ix, W, NULL, true, sum_visit, &s);
        uint64_t sum, n;
        model_sum(&o, &sum, &n);
        if (s.bad || s.h != sum || s.n != n) FAILF("owner's scan disagrees with its model");
        pod_err verr = {{0}};
        if (!bt_verify(cxl_index_tree(o.ix), &verr)) FAILF("bt_verify: %s", verr.msg);
        /* Once every reader is done, everything retired gets freed. */
        for (int h = 0; h < sc->nhosts; h++)
            if (h != host && !wait_rdone(mb, h))
                FAILF("host %d did not finish reading (rdone %llu)", h,
                      (unsigned long long)mb->rdone[h]);
        size_t left = xebr_drain(x, W, 10000);
        struct xebr_stats xs;
        xebr_get_stats(x, &xs);
        if (left) FAILF("%zu retired nodes still pending after all readers left", left);
        if (xs.retired == 0) FAILF("no node was ever retired: the scenario did not prune");
        if (xs.freed != xs.retired || xs.hwcc_freed_bytes != xs.hwcc_retired_bytes)
            FAILF("retired %llu, freed %llu", (unsigned long long)xs.retired,
                  (unsigned long long)xs.freed);
        /* HWcc usage moved by exactly what the index accounts for. */
        cxl_usage_get(r, host, CXL_HWCC, &u1);
        uint64_t bytes1 = cxl_index_hwcc_bytes(o.ix);
        if (u1.used - u0.used != bytes1 - bytes0)
            FAILF("HWcc usage grew by %lld bytes, the index says %lld",
                  (long long)(u1.used - u0.used), (long long)(bytes1 - bytes0));
        struct cxl_index_stats ist;
        cxl_index_get_stats(o.ix, W, &ist);
        if (ist.live_nodes != ist.tree.nodes)
            FAILF("live node counter %llu, tree has %llu nodes", (unsigned long long)ist.live_nodes,
                  (unsigned long long)ist.tree.nodes);
        fprintf(stderr,
                "host %d (owner): %llu inserts, %llu removes, %llu compactions, %llu nodes "
                "retired and freed, epoch %llu; final %llu keys, %llu nodes, %.1f HWcc B/key, fill %.2f\n",
                host, (unsigned long long)o.inserts, (unsigned long long)o.removes,
                (unsigned long long)o.compactions, (unsigned long long)xs.retired, (unsigned long long)xs.epoch,
                (unsigned long long)ist.tree.keys, (unsigned long long)ist.tree.nodes,
                ist.bytes_per_key, ist.leaf_fill);
        free(o.present);
    }
    fprintf(stderr, "host %d: %llu reads of %d foreign index(es)\n", host,
            (unsigned long long)reads, nread);
    /* Nobody closes before everyone is done (host 0's mailbox must stay). */
    for (int h = 0; h < sc->nhosts; h++)
        if (!wait_rdone(mb, h)) FAILF("host %d never finished", h);
    for (int h = 0; h < sc->nhosts; h++) cxl_index_close(rix[h]);
    cxl_index_close(o.ix);
    xebr_close(x, 1000);
    cxl_region_close(r);
    return 0;
}

struct host_arg {
    const struct scenario *sc;
    int host;
};

static int stress_child(void *arg)
{
    struct host_arg *a = arg;
    return stress_host(a->host, a->sc);
}

static void run_stress(int nhosts, bool sim, enum scenario_kind kind)
{
    struct scenario sc = {malloc(sizeof(struct pod_config)), nhosts, kind,
                          env_int("CXL_INDEX_STRESS_MS", 2000)};
    tu_make_config(sc.c, nhosts, 1024 * MiB, 48 * MiB, sim);
    struct host_arg args[POD_MAX_HOSTS];
    int pids[POD_MAX_HOSTS];
    for (int h = 0; h < nhosts; h++) {
        args[h] = (struct host_arg){&sc, h};
        pids[h] = tu_fork(stress_child, &args[h]);
    }
    int rc[POD_MAX_HOSTS];
    for (int h = 0; h < nhosts; h++) rc[h] = tu_wait_child(pids[h], 120000);
    for (int h = 0; h < nhosts; h++) ck_assert_msg(rc[h] == 0, "host %d failed (%d)", h, rc[h]);
    free(sc.c);
}

START_TEST(stress_2hosts_coherent) { run_stress(2, false, ONE_OWNER); }
END_TEST
START_TEST(stress_2hosts_simulated) { run_stress(2, true, ONE_OWNER); }
END_TEST
START_TEST(stress_3hosts_coherent) { run_stress(3, false, ONE_OWNER); }
END_TEST
START_TEST(stress_3hosts_simulated) { run_stress(3, true, ONE_OWNER); }
END_TEST
START_TEST(mixed_3hosts_coherent) { run_stress(3, false, EVERY_HOST_OWNS); }
END_TEST
START_TEST(mixed_3hosts_simulated) { run_stress(3, true, EVERY_HOST_OWNS); }
END_TEST

/* ---- a reader stuck in a critical section ------------------------------------------------- */

#define STUCK_KEYS 4000u

static int stuck_owner(void *arg)
{
    const int host = 0;
    struct pod_config *c = arg;
    pod_err err = {{0}};
    struct mailbox *mb = NULL;
    struct cxl_region *r = attach_host(c, 0, &mb, &err);
    if (!r) FAILF("attach: %s", err.msg);
    struct xebr *x = xebr_open(r, &err);
    if (!x) FAILF("xebr: %s", err.msg);
    struct cxl_index *ix = cxl_index_create(r, x, TABLE, 0, 8, 0, &err);
    if (!ix) FAILF("create: %s", err.msg);
    unsigned char kb[8];
    for (uint64_t k = 0; k < STUCK_KEYS; k++) {
        enc(k, kb);
        if (cxl_index_insert(ix, W, kb, value_of(k)) != BT_OK) FAILF("insert %llu",
                                                                    (unsigned long long)k);
    }
    /* Churn before the pin: prune a few leaves, all freed once drained. */
    for (uint64_t k = 0; k < 200; k++) {
        enc(k, kb);
        if (cxl_index_remove(ix, W, kb, NULL) != BT_OK) FAILF("remove %llu", (unsigned long long)k);
    }
    if (xebr_drain(x, W, 5000) != 0) FAILF("not drained before the pin");
    struct xebr_stats before;
    xebr_get_stats(x, &before);
    if (before.retired == 0) FAILF("removing 200 keys retired no node");
    __atomic_store_n(&mb->wdone[0], 1, __ATOMIC_RELEASE); /* ready for the pin */

    if (!tu_wait_u64(&mb->pinned, 1, WAIT_MS)) FAILF("the reader never pinned");
    struct cxl_usage u0, u1, u2;
    cxl_usage_get(r, 0, CXL_HWCC, &u0);
    uint64_t b0 = cxl_index_hwcc_bytes(ix);
    for (uint64_t k = 200; k < STUCK_KEYS - 100; k++) { /* empties most leaves */
        enc(k, kb);
        if (cxl_index_remove(ix, W, kb, NULL) != BT_OK) FAILF("remove %llu", (unsigned long long)k);
    }
    struct xebr_stats mid;
    xebr_get_stats(x, &mid);
    uint64_t retired_now = mid.retired - before.retired;
    if (retired_now < 100) FAILF("only %llu nodes retired", (unsigned long long)retired_now);
    /* The reader is pinned: nothing retired since may be freed, however long
     * the owner tries. */
    size_t left = xebr_drain(x, W, 400);
    for (int i = 0; i < 20; i++) xebr_collect(x, W);
    left = xebr_pending(x, W);
    cxl_usage_get(r, 0, CXL_HWCC, &u1);
    if (left != retired_now)
        FAILF("%zu of %llu nodes retired under a pinned reader are pending: some were freed",
              left, (unsigned long long)retired_now);
    xebr_get_stats(x, &mid);
    if (mid.freed != before.freed) FAILF("nodes were freed while a reader was pinned");
    if (u1.used != u0.used) FAILF("HWcc usage changed from %llu to %llu under a pinned reader",
                                  (unsigned long long)u0.used, (unsigned long long)u1.used);
    /* ... and the index's own count says the nodes left it. */
    uint64_t b1 = cxl_index_hwcc_bytes(ix);
    if (b0 - b1 != retired_now * 512)
        FAILF("index bytes fell by %llu, want %llu", (unsigned long long)(b0 - b1),
              (unsigned long long)(retired_now * 512));
    fprintf(stderr, "stuck reader: %llu nodes pending, epoch %llu, HWcc used %llu\n",
            (unsigned long long)left, (unsigned long long)mid.epoch, (unsigned long long)u1.used);

    __atomic_store_n(&mb->release, 1, __ATOMIC_RELEASE);
    if (!tu_wait_u64(&mb->exited, 1, WAIT_MS)) FAILF("the reader never exited");
    left = xebr_drain(x, W, 10000);
    if (left) FAILF("%zu nodes still pending after the reader exited", left);
    cxl_usage_get(r, 0, CXL_HWCC, &u2);
    if (u1.used - u2.used != retired_now * 512)
        FAILF("HWcc usage fell by %llu, want %llu", (unsigned long long)(u1.used - u2.used),
              (unsigned long long)(retired_now * 512));
    /* The reader checks what is left, then we both leave. */
    __atomic_store_n(&mb->release, 2, __ATOMIC_RELEASE);
    if (!tu_wait_u64(&mb->exited, 2, WAIT_MS)) FAILF("the reader never finished");
    cxl_index_close(ix);
    xebr_close(x, 1000);
    cxl_region_close(r);
    return 0;
}

static int stuck_reader(void *arg)
{
    const int host = 1;
    struct pod_config *c = arg;
    pod_err err = {{0}};
    struct mailbox *mb = NULL;
    struct cxl_region *r = attach_host(c, 1, &mb, &err);
    if (!r) FAILF("attach: %s", err.msg);
    struct xebr *x = xebr_open(r, &err);
    if (!x) FAILF("xebr: %s", err.msg);
    struct cxl_index *ix = wait_open(r, x, 0, &err);
    if (!ix) FAILF("open: %s", err.msg);
    unsigned char kb[8];
    uint64_t v;
    if (!tu_wait_u64(&mb->wdone[0], 1, WAIT_MS)) FAILF("the owner never got ready");
    xebr_enter(x, W); /* ... and stay */
    enc(STUCK_KEYS / 2, kb);
    if (bt_lookup(cxl_index_tree(ix), kb, &v) != BT_OK || v != value_of(STUCK_KEYS / 2))
        FAILF("lookup while pinned");
    __atomic_store_n(&mb->pinned, 1, __ATOMIC_RELEASE);
    if (!tu_wait_u64(&mb->release, 1, WAIT_MS)) FAILF("never released");
    /* Still pinned, reads keep working (new readers never see retired nodes). */
    enc(STUCK_KEYS - 1, kb);
    if (bt_lookup(cxl_index_tree(ix), kb, &v) != BT_OK) FAILF("lookup at the end while pinned");
    xebr_exit(x, W);
    __atomic_store_n(&mb->exited, 1, __ATOMIC_RELEASE);
    if (!tu_wait_u64(&mb->release, 2, WAIT_MS)) FAILF("never released (2)");
    struct sum_state s;
    sum_init(&s);
    if (cxl_index_scan_forward(ix, W, NULL, true, sum_visit, &s) != BT_OK || s.bad || s.n != 100 + 0)
        FAILF("final scan: %llu keys%s, want 100", (unsigned long long)s.n, s.bad ? " (bad)" : "");
    __atomic_store_n(&mb->exited, 2, __ATOMIC_RELEASE);
    cxl_index_close(ix);
    xebr_close(x, 1000);
    cxl_region_close(r);
    return 0;
}

static void run_stuck(bool sim)
{
    struct pod_config *c = malloc(sizeof *c);
    tu_make_config(c, 2, 1024 * MiB, 16 * MiB, sim);
    int p0 = tu_fork(stuck_owner, c);
    int p1 = tu_fork(stuck_reader, c);
    int rc0 = tu_wait_child(p0, 60000);
    int rc1 = tu_wait_child(p1, 60000);
    ck_assert_msg(rc0 == 0, "owner failed (%d)", rc0);
    ck_assert_msg(rc1 == 0, "reader failed (%d)", rc1);
    free(c);
}

START_TEST(stuck_reader_blocks_reclamation) { run_stuck(false); }
END_TEST
START_TEST(stuck_reader_blocks_reclamation_simulated) { run_stuck(true); }
END_TEST

/* ---- API in one process -------------------------------------------------------------------- */

START_TEST(api_single_host)
{
    struct pod_config *c = malloc(sizeof *c);
    tu_make_config(c, 2, 1024 * MiB, 16 * MiB, false);
    pod_err err = {{0}};
    struct cxl_region *r = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err);
    ck_assert_msg(r != NULL, "%s", err.msg);
    struct xebr *x = xebr_open(r, &err);
    ck_assert_msg(x != NULL, "%s", err.msg);

    /* Nothing there yet. */
    ck_assert_ptr_null(cxl_index_open(r, x, 0, 1, 0, &err));
    ck_assert_msg(strstr(err.msg, "no such index"), "%s", err.msg);
    ck_assert_ptr_null(cxl_index_open(r, x, 5, 1, 0, &err));
    ck_assert_msg(strstr(err.msg, "not in this pod"), "%s", err.msg);
    struct cxl_usage u0, u1;
    cxl_usage_get(r, 0, CXL_HWCC, &u0);
    /* Bad arguments. */
    ck_assert_ptr_null(cxl_index_create(r, x, 1, 0, 0, 0, &err));
    ck_assert_msg(strstr(err.msg, "key width"), "%s", err.msg);
    ck_assert_ptr_null(cxl_index_create(r, x, 1, 0, 8, 100, &err));
    ck_assert_msg(strstr(err.msg, "node size"), "%s", err.msg);

    struct cxl_index *a = cxl_index_create(r, x, 1, 0, 8, 0, &err);
    ck_assert_msg(a != NULL, "%s", err.msg);
    ck_assert(cxl_index_is_owner(a));
    ck_assert_int_eq(cxl_index_owner(a), 0);
    ck_assert_uint_eq(cxl_index_key_width(a), 8);
    cxl_usage_get(r, 0, CXL_HWCC, &u1);
    /* header (128) + root leaf (512) + the directory block (512) */
    ck_assert_uint_eq(cxl_index_hwcc_bytes(a), 128 + 512);
    ck_assert_uint_eq(u1.used - u0.used, 128 + 512 + 512);
    ck_assert_uint_eq(cxl_root_get(r, 0, CXL_ROOT_INDEX_DIR) != CXL_NULL, 1);
    ck_assert_ptr_null(cxl_index_create(r, x, 1, 0, 8, 0, &err));
    ck_assert_msg(strstr(err.msg, "already exists"), "%s", err.msg);

    /* Many indexes: the directory grows past one block (31 entries). */
    struct cxl_index *many[40];
    for (uint32_t i = 0; i < 40; i++) {
        many[i] = cxl_index_create(r, x, 2, i, 4 + i % 20, 0, &err);
        ck_assert_msg(many[i] != NULL, "%s", err.msg);
    }
    for (uint32_t i = 0; i < 40; i++) {
        struct cxl_index *o = cxl_index_open(r, x, 0, 2, i, &err);
        ck_assert_msg(o != NULL, "%u: %s", i, err.msg);
        ck_assert_uint_eq(cxl_index_key_width(o), 4 + i % 20);
        unsigned char k[24] = {(unsigned char)i};
        ck_assert_int_eq(cxl_index_insert(o, 0, k, i), BT_OK);
        uint64_t v;
        ck_assert_int_eq(cxl_index_lookup(many[i], 0, k, &v), BT_OK);
        ck_assert_uint_eq(v, i);
        cxl_index_close(o);
        cxl_index_close(many[i]);
    }

    /* Operations, through a second handle (the owner may open its own). */
    struct cxl_index *b = cxl_index_open(r, x, 0, 1, 0, &err);
    ck_assert_msg(b != NULL, "%s", err.msg);
    ck_assert(cxl_index_is_owner(b));
    unsigned char kb[8], ko[8];
    uint64_t v;
    for (uint64_t k = 10; k < 10000; k += 10) {
        enc(k, kb);
        ck_assert_int_eq(cxl_index_insert(a, 0, kb, value_of(k)), BT_OK);
    }
    enc(20, kb);
    ck_assert_int_eq(cxl_index_insert(b, 0, kb, 1), BT_EXISTS);
    bool replaced = false;
    ck_assert_int_eq(cxl_index_upsert(b, 0, kb, 77, &replaced), BT_OK);
    ck_assert(replaced);
    ck_assert_int_eq(cxl_index_lookup(a, 0, kb, &v), BT_OK);
    ck_assert_uint_eq(v, 77);
    ck_assert_int_eq(cxl_index_upsert(b, 0, kb, value_of(20), NULL), BT_OK);
    enc(15, kb);
    ck_assert_int_eq(cxl_index_lookup(a, 0, kb, &v), BT_NOT_FOUND);
    ck_assert_int_eq(cxl_index_next(a, 0, kb, false, ko, &v), BT_OK);
    ck_assert_uint_eq(dec(ko), 20);
    ck_assert_int_eq(cxl_index_prev(a, 0, kb, false, ko, &v), BT_OK);
    ck_assert_uint_eq(dec(ko), 10);
    ck_assert_uint_eq(v, value_of(10));
    struct sum_state s;
    sum_init(&s);
    ck_assert_int_eq(cxl_index_scan_forward(b, 0, NULL, true, sum_visit, &s), BT_OK);
    ck_assert(!s.bad);
    ck_assert_uint_eq(s.n, 999);
    enc(9990, kb);
    ck_assert_int_eq(cxl_index_scan_backward(b, 0, kb, false, scan_visit,
                                             &(struct scan_state){.bound = 9990, .limit = 5}),
                     BT_OK);
    /* Remove everything: all but the root leaf are retired and, with nobody
     * else around, freed; HWcc usage returns to one leaf. */
    for (uint64_t k = 10; k < 10000; k += 10) {
        enc(k, kb);
        ck_assert_int_eq(cxl_index_remove(b, 0, kb, &v), BT_OK);
        ck_assert_uint_eq(v, value_of(k));
    }
    enc(10, kb);
    ck_assert_int_eq(cxl_index_remove(b, 0, kb, &v), BT_NOT_FOUND);
    ck_assert_uint_eq(xebr_drain(x, 0, 5000), 0);
    struct xebr_stats xs;
    xebr_get_stats(x, &xs);
    ck_assert_uint_gt(xs.retired, 30);
    ck_assert_uint_eq(xs.freed, xs.retired);
    ck_assert_uint_eq(cxl_index_hwcc_bytes(a), 128 + 512);
    struct cxl_index_stats st;
    ck_assert_int_eq(cxl_index_get_stats(a, 0, &st), BT_OK);
    ck_assert_uint_eq(st.tree.nodes, 1);
    ck_assert_uint_eq(st.live_nodes, 1);
    ck_assert_uint_eq(st.leaf_cap, 31);
    ck_assert_uint_eq(st.node_size, 512);

    cxl_index_close(a);
    cxl_index_close(b);
    xebr_close(x, 1000);
    cxl_region_close(r);
    free(c);
}
END_TEST

/* An observer (host -1) has no EBR slot. */
START_TEST(xebr_refuses_observer)
{
    struct pod_config *c = malloc(sizeof *c);
    tu_make_config(c, 1, 1024 * MiB, 8 * MiB, false);
    pod_err err = {{0}};
    struct cxl_region *r = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err);
    ck_assert_msg(r != NULL, "%s", err.msg);
    struct cxl_region *obs = cxl_region_open(c, -1, 0, &err);
    ck_assert_msg(obs != NULL, "%s", err.msg);
    ck_assert_ptr_null(xebr_open(obs, &err));
    ck_assert_msg(strstr(err.msg, "observer"), "%s", err.msg);
    /* A new view clears its own host's stale pins. */
    r->ctl->worker_epoch[0][3].v = 42;
    struct xebr *x = xebr_open(r, &err);
    ck_assert_ptr_nonnull(x);
    ck_assert_uint_eq(r->ctl->worker_epoch[0][3].v, 0);
    xebr_enter(x, 3);
    ck_assert(xebr_active(x, 3));
    ck_assert_uint_eq(r->ctl->worker_epoch[0][3].v, xebr_epoch(x) + 1);
    xebr_exit(x, 3);
    ck_assert_uint_eq(r->ctl->worker_epoch[0][3].v, 0);
    xebr_close(x, 0);
    cxl_region_close(obs);
    cxl_region_close(r);
    free(c);
}
END_TEST

/* Compaction: after random removes the tree is sparse; compacting keeps the
 * entries, gives the HWcc memory back once drained, and refuses cleanly
 * (BT_NOMEM, index unchanged) when the new tree does not fit. */
START_TEST(compaction)
{
    struct pod_config *c = malloc(sizeof *c);
    tu_make_config(c, 1, 1024 * MiB, 4 * MiB, false);
    pod_err err = {{0}};
    struct cxl_region *r = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err);
    ck_assert_msg(r != NULL, "%s", err.msg);
    struct xebr *x = xebr_open(r, &err);
    ck_assert_ptr_nonnull(x);
    struct cxl_index *ix = cxl_index_create(r, x, 3, 0, 8, 0, &err);
    ck_assert_msg(ix != NULL, "%s", err.msg);
    enum { N = 40000 };
    static unsigned char present[N];
    memset(present, 0, sizeof present);
    rng g = {77};
    unsigned char kb[8];
    for (unsigned i = 0; i < N; i++) { /* random order */
        uint64_t k = rnd(&g) % N;
        enc(k, kb);
        if (cxl_index_insert(ix, 0, kb, value_of(k)) == BT_OK) present[k] = 1;
    }
    for (unsigned i = 0; i < 3 * N; i++) { /* remove ~95% at random */
        uint64_t k = rnd(&g) % N;
        enc(k, kb);
        if (cxl_index_remove(ix, 0, kb, NULL) == BT_OK) present[k] = 0;
    }
    ck_assert_uint_eq(xebr_drain(x, 0, 5000), 0);
    struct cxl_index_stats before, after;
    cxl_index_get_stats(ix, 0, &before);
    struct cxl_usage u0, u1, u2;
    cxl_usage_get(r, 0, CXL_HWCC, &u0);

    /* No room: fill the budget, leave room for a few nodes only. */
    cxl_off filler[4096];
    int nf = 0;
    while (nf < 4096 && (filler[nf] = cxl_alloc(r, CXL_HWCC, 4096)) != CXL_NULL) nf++;
    ck_assert_int_gt(nf, 0);
    ck_assert_int_lt(nf, 4096);
    cxl_free(r, CXL_HWCC, filler[--nf]); /* 4 KiB: 8 nodes, the copy needs more */
    ck_assert_int_eq(cxl_index_compact(ix, 0), BT_NOMEM);
    ck_assert_uint_eq(xebr_drain(x, 0, 5000), 0);
    cxl_index_get_stats(ix, 0, &after);
    ck_assert_uint_eq(after.tree.keys, before.tree.keys);
    ck_assert_uint_eq(after.tree.nodes, before.tree.nodes);
    ck_assert_uint_eq(after.live_nodes, before.live_nodes);
    while (nf > 0) cxl_free(r, CXL_HWCC, filler[--nf]);
    cxl_usage_get(r, 0, CXL_HWCC, &u1);
    ck_assert_uint_eq(u1.used, u0.used);

    ck_assert_int_eq(cxl_index_compact(ix, 0), BT_OK);
    ck_assert_uint_eq(xebr_drain(x, 0, 5000), 0);
    cxl_index_get_stats(ix, 0, &after);
    cxl_usage_get(r, 0, CXL_HWCC, &u2);
    ck_assert_uint_eq(after.tree.keys, before.tree.keys);
    ck_assert_uint_eq(after.live_nodes, after.tree.nodes);
    ck_assert_uint_eq(u0.used - u2.used, before.hwcc_bytes - after.hwcc_bytes);
    ck_assert_msg(after.leaf_fill > 0.9, "fill %.2f", after.leaf_fill);
    fprintf(stderr, "compaction: %llu keys, %llu -> %llu nodes, %.1f -> %.1f HWcc B/key, "
                    "fill %.2f -> %.2f\n",
            (unsigned long long)after.tree.keys, (unsigned long long)before.tree.nodes,
            (unsigned long long)after.tree.nodes, before.bytes_per_key, after.bytes_per_key,
            before.leaf_fill, after.leaf_fill);
    pod_err verr = {{0}};
    ck_assert_msg(bt_verify(cxl_index_tree(ix), &verr), "%s", verr.msg);
    uint64_t v;
    for (uint64_t k = 0; k < N; k++) {
        enc(k, kb);
        bt_status st = cxl_index_lookup(ix, 0, kb, &v);
        ck_assert_int_eq(st, present[k] ? BT_OK : BT_NOT_FOUND);
        if (present[k]) ck_assert_uint_eq(v, value_of(k));
    }
    /* The index keeps working afterwards. */
    for (uint64_t k = 0; k < N; k += 7) {
        enc(k, kb);
        cxl_index_upsert(ix, 0, kb, value_of(k), NULL);
    }
    ck_assert_msg(bt_verify(cxl_index_tree(ix), &verr), "%s", verr.msg);
    /* A reader's handle cannot compact. */
    ck_assert(cxl_index_is_owner(ix));
    cxl_index_close(ix);
    xebr_close(x, 1000);
    cxl_region_close(r);
    free(c);
}
END_TEST

/* ---- HWcc bytes per key -------------------------------------------------------------------- */

struct density {
    double random_bpk, random_fill, seq_bpk, churn_bpk, churn_fill, compact_bpk;
    unsigned height;
};

static void measure_density(struct cxl_region *r, struct xebr *x, uint32_t part,
                            unsigned node_size, unsigned nkeys, struct density *d)
{
    pod_err err = {{0}};
    struct cxl_index *ix = cxl_index_create(r, x, 99, part, 8, node_size, &err);
    ck_assert_msg(ix != NULL, "%s", err.msg);
    struct cxl_usage u0, u1;
    cxl_usage_get(r, r->host, CXL_HWCC, &u0);
    uint64_t b0 = cxl_index_hwcc_bytes(ix);
    /* random order: a permutation of 0..nkeys-1, spread over 64 bits */
    uint64_t *keys = malloc(sizeof *keys * nkeys);
    rng g = {0x1234567 + node_size};
    for (unsigned i = 0; i < nkeys; i++) keys[i] = (uint64_t)i * 0x9e3779b97f4a7c15ull;
    for (unsigned i = nkeys - 1; i > 0; i--) {
        unsigned j = (unsigned)(rnd(&g) % (i + 1));
        uint64_t t = keys[i];
        keys[i] = keys[j];
        keys[j] = t;
    }
    unsigned char kb[8];
    for (unsigned i = 0; i < nkeys; i++) {
        enc(keys[i], kb);
        ck_assert_int_eq(cxl_index_insert(ix, 0, kb, i), BT_OK);
    }
    struct cxl_index_stats st;
    cxl_index_get_stats(ix, 0, &st);
    cxl_usage_get(r, r->host, CXL_HWCC, &u1);
    /* the stat is the allocator's figure */
    ck_assert_uint_eq(u1.used - u0.used, cxl_index_hwcc_bytes(ix) - b0);
    ck_assert_uint_eq(st.tree.keys, nkeys);
    d->random_bpk = st.bytes_per_key;
    d->random_fill = st.leaf_fill;
    d->height = st.tree.height;
    /* churn: replace half the keys by new ones, in random order (moves in and out) */
    for (unsigned i = 0; i < nkeys; i += 2) {
        enc(keys[i], kb);
        ck_assert_int_eq(cxl_index_remove(ix, 0, kb, NULL), BT_OK);
        keys[i] = rnd(&g);
        enc(keys[i], kb);
        bt_status s = cxl_index_insert(ix, 0, kb, i);
        ck_assert(s == BT_OK || s == BT_EXISTS);
        if (s == BT_EXISTS) keys[i] = 0;
    }
    cxl_index_get_stats(ix, 0, &st);
    d->churn_bpk = st.bytes_per_key;
    d->churn_fill = st.leaf_fill;
    uint64_t nchurn = st.tree.keys;
    ck_assert_int_eq(cxl_index_compact(ix, 0), BT_OK);
    cxl_index_get_stats(ix, 0, &st);
    ck_assert_uint_eq(st.tree.keys, nchurn);
    d->compact_bpk = st.bytes_per_key;
    /* empty it again: back to one leaf, everything freed */
    for (unsigned i = 0; i < nkeys; i++) {
        if (i % 2 == 0 && keys[i] == 0) continue;
        enc(keys[i], kb);
        cxl_index_remove(ix, 0, kb, NULL);
    }
    ck_assert_uint_eq(xebr_drain(x, 0, 5000), 0);
    cxl_index_get_stats(ix, 0, &st);
    ck_assert_uint_eq(st.tree.keys, 0);
    ck_assert_uint_eq(st.tree.nodes, 1);
    /* ascending load */
    for (unsigned i = 0; i < nkeys; i++) {
        enc((uint64_t)i, kb);
        ck_assert_int_eq(cxl_index_insert(ix, 0, kb, i), BT_OK);
    }
    cxl_index_get_stats(ix, 0, &st);
    d->seq_bpk = st.bytes_per_key;
    for (unsigned i = 0; i < nkeys; i++) {
        enc((uint64_t)i, kb);
        ck_assert_int_eq(cxl_index_remove(ix, 0, kb, NULL), BT_OK);
    }
    ck_assert_uint_eq(xebr_drain(x, 0, 5000), 0);
    free(keys);
    cxl_index_close(ix);
}

START_TEST(hwcc_bytes_per_key)
{
    unsigned nkeys = (unsigned)env_int("CXL_INDEX_DENSITY_KEYS", 50000);
    struct pod_config *c = malloc(sizeof *c);
    tu_make_config(c, 1, 1024 * MiB, 64 * MiB, false);
    pod_err err = {{0}};
    struct cxl_region *r = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err);
    ck_assert_msg(r != NULL, "%s", err.msg);
    struct xebr *x = xebr_open(r, &err);
    ck_assert_ptr_nonnull(x);
    static const unsigned sizes[] = {256, 384, 512, 640, 768, 1024, 2048, 4096};
    fprintf(stderr, "HWcc bytes per key, 8-byte keys and values, %u keys (mimalloc size classes)\n"
                    "node  leaf-cap  random  fill   churn  fill   compacted  ascending  height\n",
            nkeys);
    struct density d512 = {0};
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        struct density d;
        measure_density(r, x, i, sizes[i], nkeys, &d);
        fprintf(stderr, "%4u  %8u  %6.1f  %4.2f   %5.1f  %4.2f   %9.1f  %9.1f  %6u\n",
                sizes[i], (sizes[i] - 16) / 16, d.random_bpk, d.random_fill, d.churn_bpk,
                d.churn_fill, d.compact_bpk, d.seq_bpk, d.height);
        if (sizes[i] == CXL_INDEX_DEFAULT_NODE_SIZE) d512 = d;
    }
    /* The pod's budget is 48 B of HWcc per CXL-resident tuple, 8 of them the
     * record: the default index must stay well inside the other 40. */
    ck_assert_msg(d512.random_bpk < 30.0, "%.1f B/key after random inserts", d512.random_bpk);
    ck_assert_msg(d512.churn_bpk < 40.0, "%.1f B/key after churn", d512.churn_bpk);
    ck_assert_msg(d512.seq_bpk < 20.0, "%.1f B/key after an ascending load", d512.seq_bpk);
    ck_assert_msg(d512.compact_bpk < 20.0, "%.1f B/key after compaction", d512.compact_bpk);
    xebr_close(x, 1000);
    cxl_region_close(r);
    free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cxl_index_mp");
    TCase *api = tu_tcase(s, "api", 120);
    tcase_add_test(api, api_single_host);
    tcase_add_test(api, xebr_refuses_observer);
    tcase_add_test(api, compaction);
    tcase_add_test(api, hwcc_bytes_per_key);
    TCase *mp = tu_tcase(s, "processes", 300);
    tcase_add_test(mp, stuck_reader_blocks_reclamation);
    tcase_add_test(mp, stuck_reader_blocks_reclamation_simulated);
    tcase_add_test(mp, stress_2hosts_coherent);
    tcase_add_test(mp, stress_2hosts_simulated);
    tcase_add_test(mp, stress_3hosts_coherent);
    tcase_add_test(mp, stress_3hosts_simulated);
    tcase_add_test(mp, mixed_3hosts_coherent);
    tcase_add_test(mp, mixed_3hosts_simulated);
    return tu_run(s);
}
