/* B+-tree with optimistic lock coupling (Leis et al., "The ART of practical
 * synchronization", DaMoN 2016; the BTreeOLC reference design).
 *
 * OLC invariants
 * --------------
 * 1. Every node starts with a 64-bit version word: bit 0 obsolete, bit 1
 *    locked, bits 2.. a counter. Locking is a CAS from an observed unlocked
 *    version v to v + LOCKED ("upgrade"), so it also proves that the node did
 *    not change since v was read. Unlocking adds LOCKED again, which clears
 *    the bit and bumps the counter; unlocking a node that was not modified may
 *    restore v instead. A node is marked obsolete (under its lock) when it
 *    leaves the tree and never becomes unobsolete.
 * 2. A node's contents change only while its lock is held. A reader reads the
 *    version, reads what it needs, then re-reads the version; any difference
 *    (or the locked/obsolete bit) means "restart from the root". Nothing a
 *    reader computes from unvalidated data is used except to decide where to
 *    read next inside the same node (counts are clamped to capacity for that)
 *    or is trusted before validation.
 * 3. Lock coupling: a child's address is used only after the parent is
 *    validated, and the parent is validated again after the child's version
 *    is read. So at the leaf, "parent unchanged" proves the leaf still covers
 *    the searched key (a split or a prune changes the parent).
 * 4. Writers lock top-down (parent before child) and only with try-locks
 *    (upgrade fails -> release what is held, restart), so there is no
 *    deadlock. Inner nodes are split eagerly on the way down when full, so a
 *    child split always finds room in its (locked) parent.
 * 5. The root ref in the header changes only while the old root is locked
 *    (a root split, or collapsing a root that has a single child), and an
 *    operation that starts at the root re-checks the ref after reading the
 *    root's version.
 * 6. A node leaves the tree only by being marked obsolete and is then handed
 *    to space->retire, never freed here: readers may still be inside it.
 *    Conversely, an unlocked node whose version has not changed is still
 *    reachable from the root, with the same key range.
 * 7. Empty leaves are unlinked (with the chain of single-child inner nodes
 *    above them) so scans and next-key never walk long runs of empty nodes;
 *    underfull nodes are not merged.
 *
 * Memory model: every access to a node field that another thread may touch
 * concurrently is an __atomic load (ACQUIRE) or store (RELEASE). On x86 both
 * are plain moves; they make the optimistic protocol race-free in the C11
 * sense (and ThreadSanitizer-clean) without fences: a reader that sees any
 * value written inside a critical section also sees the locked version when
 * it validates.
 *
 * Node layout (all fields are 8-byte words; key slots are padded to a
 * multiple of 8 bytes with zeros so whole words can be compared as
 * big-endian numbers, which is memcmp order):
 *   word 0   version
 *   word 1   meta: entry count (bits 0-15), a leaf's run (16-31: see
 *            meta_run_slot), level (high 32; 0 = leaf)
 *   leaf:    keys[leaf_cap][key_stride], values[leaf_cap]
 *   inner:   separators[inner_cap][key_stride], children[inner_cap + 1]
 * Inner child i holds the keys k with sep[i-1] <= k < sep[i]. */
#include "storage/btree.h"
#include "util/cpu.h"

#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define BT_MAGIC 0x31305f4545525442ull /* "BTREE_01" */

#define V_OBSOLETE 1ull
#define V_LOCKED 2ull

#define KEY_WORDS_MAX ((BT_MAX_KEY_WIDTH + 7) / 8)
#define NODE_HEADER_BYTES 16u
#define MAX_DEPTH 48           /* path length tracked when pruning */
#define READ_LOCK_SPINS 64     /* pauses on a locked node before restarting */
#define COLLAPSE_ATTEMPTS 64

/* Test seam (see btree.h): a compare with a link-time constant when no test
 * defines the hook. */
#define RACE_POINT(where)                                                     \
    do {                                                                      \
        if (bt_race_point) bt_race_point(where);                              \
    } while (0)

/* ---- word access --------------------------------------------------------- */

static inline uint64_t load_word(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline void store_word(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static void copy_words_up(uint64_t *dst, const uint64_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) store_word(&dst[i], load_word(&src[i]));
}

static void copy_words_down(uint64_t *dst, const uint64_t *src, size_t n)
{
    for (size_t i = n; i-- > 0;) store_word(&dst[i], load_word(&src[i]));
}

/* Overlap-safe copy of n words inside one node. */
static void move_words(uint64_t *dst, const uint64_t *src, size_t n)
{
    if (dst < src) copy_words_up(dst, src, n);
    else if (dst > src) copy_words_down(dst, src, n);
}

/* Copy out of a node into private memory (optimistic readers). */
static void read_words(uint64_t *dst, const uint64_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = load_word(&src[i]);
}

/* Copy private memory into a locked or unpublished node. */
static void write_words(uint64_t *dst, const uint64_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) store_word(&dst[i], src[i]);
}

static inline uint64_t be_word(uint64_t w)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return __builtin_bswap64(w);
#else
    return w;
#endif
}


/* Restart n of an operation: spin a little, then let the lock holder run
 * (it may be preempted on a busy machine). */
static void backoff(unsigned restarts)
{
    if (restarts == 0) return;
    if (restarts < 8) {
        for (unsigned i = 0; i < (1u << restarts); i++) pod_cpu_relax();
    } else {
        sched_yield();
    }
}

/* ---- nodes ---------------------------------------------------------------- */

static inline char *node_at(const bt_tree *t, uint64_t ref)
{
    return (char *)((uintptr_t)t->space.base + (uintptr_t)ref);
}

static inline uint64_t ref_of(const bt_tree *t, const char *node)
{
    return (uint64_t)((uintptr_t)node - (uintptr_t)t->space.base);
}

static inline uint64_t *version_word(char *n) { return (uint64_t *)n; }
static inline uint64_t *meta_word(char *n) { return (uint64_t *)n + 1; }

static inline uint64_t *key_slot(const bt_tree *t, char *n, unsigned i)
{
    return (uint64_t *)(n + NODE_HEADER_BYTES + (size_t)i * t->key_stride);
}

static inline uint64_t *leaf_value(const bt_tree *t, char *n, unsigned i)
{
    return (uint64_t *)(n + t->leaf_vals_off) + i;
}

static inline uint64_t *child_ref(const bt_tree *t, char *n, unsigned i)
{
    return (uint64_t *)(n + t->inner_kids_off) + i;
}

/* The meta word: level << 32 | run << 16 | count. A leaf's run is the slot
 * after its last insert plus one (0: unknown); it tells an ascending run of
 * inserts inside the leaf from scattered ones (see split_leaf). Counts stay
 * below 2^16: a node is at most BT_MAX_NODE_SIZE bytes. */
static inline uint64_t make_meta(unsigned level, unsigned count)
{
    return (uint64_t)level << 32 | count;
}

static inline unsigned meta_level(uint64_t meta) { return (unsigned)(meta >> 32); }

static inline unsigned meta_raw_count(uint64_t meta) { return (unsigned)(meta & 0xffff); }

/* The slot an insert continuing the leaf's ascending run would take, or
 * UINT_MAX when the leaf has seen no insert since its last split. */
static inline unsigned meta_run_slot(uint64_t meta)
{
    unsigned run = (unsigned)(meta >> 16 & 0xffff);
    return run ? run - 1 : UINT_MAX;
}

/* The entry count, clamped so that an inconsistent optimistic read still
 * indexes inside the node. */
static inline unsigned meta_count(const bt_tree *t, uint64_t meta)
{
    unsigned count = meta_raw_count(meta);
    unsigned cap = meta_level(meta) == 0 ? t->leaf_cap : t->inner_cap;
    return count > cap ? cap : count;
}

static inline void set_count(char *n, unsigned level, unsigned count)
{
    store_word(meta_word(n), make_meta(level, count));
}

/* The whole node up to 1 KiB: the search touches keys all over it and then
 * one child or value, and fetching the lines together overlaps their misses
 * (with 1 KiB nodes, prefetching only the first 512 bytes was slower). */
static inline void prefetch_node(const bt_tree *t, const char *n)
{
    unsigned lines = t->node_size < 1024 ? t->node_size : 1024;
    for (unsigned off = 0; off < lines; off += 64) __builtin_prefetch(n + off);
}

static char *alloc_node(const bt_tree *t, unsigned level)
{
    char *n = t->space.alloc(t->space.ctx, t->node_size);
    if (!n) return NULL;
    store_word(version_word(n), 0);
    set_count(n, level, 0);
    return n;
}

static void retire_node(const bt_tree *t, char *n)
{
    t->space.retire(t->space.ctx, n, t->node_size);
}

/* ---- version word --------------------------------------------------------- */

/* Optimistic read lock: the current version if the node is unlocked and not
 * obsolete (waiting briefly while a writer holds it). */
static inline bool read_lock(char *n, uint64_t *version)
{
    for (unsigned spin = 0;; spin++) {
        uint64_t v = load_word(version_word(n));
        if (!(v & (V_LOCKED | V_OBSOLETE))) {
            *version = v;
            return true;
        }
        if ((v & V_OBSOLETE) || spin >= READ_LOCK_SPINS) return false;
        pod_cpu_relax();
    }
}

static inline bool validate(char *n, uint64_t version)
{
    return load_word(version_word(n)) == version;
}

static inline bool upgrade(char *n, uint64_t version)
{
    uint64_t expected = version;
    return __atomic_compare_exchange_n(version_word(n), &expected, version + V_LOCKED, false,
                                       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static inline void unlock(char *n)
{
    __atomic_fetch_add(version_word(n), V_LOCKED, __ATOMIC_RELEASE);
}

/* Release a lock without having modified the node: readers that saw the old
 * version stay valid. */
static inline void unlock_unchanged(char *n, uint64_t version)
{
    store_word(version_word(n), version);
}

static inline void unlock_obsolete(char *n)
{
    __atomic_fetch_add(version_word(n), V_LOCKED + V_OBSOLETE, __ATOMIC_RELEASE);
}

/* ---- keys ------------------------------------------------------------------ */

/* A key being searched for: the padded words as stored in a node, and the
 * same words as big-endian numbers for comparing. */
typedef struct search_key {
    uint64_t raw[KEY_WORDS_MAX];
    uint64_t ord[KEY_WORDS_MAX];
} search_key;

static void search_key_from_words(const bt_tree *t, search_key *sk, const uint64_t *raw)
{
    for (unsigned i = 0; i < t->key_words; i++) {
        sk->raw[i] = raw[i];
        sk->ord[i] = be_word(raw[i]);
    }
}

static void search_key_set(const bt_tree *t, search_key *sk, const void *key)
{
    uint64_t raw[KEY_WORDS_MAX];
    raw[t->key_words - 1] = 0; /* the zero padding after key_width bytes */
    memcpy(raw, key, t->key_width);
    search_key_from_words(t, sk, raw);
}

/* <0, 0, >0 as the key in a node slot is below, equal to, above sk. */
static inline int compare_slot(const bt_tree *t, const uint64_t *slot, const search_key *sk)
{
    for (unsigned i = 0; i < t->key_words; i++) {
        uint64_t w = be_word(load_word(&slot[i]));
        if (w != sk->ord[i]) return w < sk->ord[i] ? -1 : 1;
    }
    return 0;
}

/* Binary search over the first `count` key slots: the first slot whose key
 * is >= sk, or with past_equal the first whose key is > sk. Keys of one and
 * two words (most keys: 8 and 16 bytes) have their own loops, with the
 * word count a constant. */
static unsigned key_bound(const bt_tree *t, char *n, unsigned count, const search_key *sk,
                          bool past_equal)
{
    unsigned lo = 0, hi = count;
    const uint64_t *keys = key_slot(t, n, 0);
    if (t->key_words == 1) {
        uint64_t k = sk->ord[0];
        while (lo < hi) {
            unsigned mid = lo + (hi - lo) / 2;
            uint64_t w = be_word(load_word(&keys[mid]));
            if (w < k || (past_equal && w == k)) lo = mid + 1;
            else hi = mid;
        }
        return lo;
    }
    if (t->key_words == 2) {
        uint64_t k0 = sk->ord[0], k1 = sk->ord[1];
        while (lo < hi) {
            unsigned mid = lo + (hi - lo) / 2;
            uint64_t w0 = be_word(load_word(&keys[2 * mid]));
            bool below;
            if (w0 != k0) {
                below = w0 < k0;
            } else {
                uint64_t w1 = be_word(load_word(&keys[2 * mid + 1]));
                below = w1 < k1 || (past_equal && w1 == k1);
            }
            if (below) lo = mid + 1;
            else hi = mid;
        }
        return lo;
    }
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        int c = compare_slot(t, key_slot(t, n, mid), sk);
        if (c < 0 || (past_equal && c == 0)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* ---- optimistic descent ---------------------------------------------------- */

enum descend_mode {
    TO_KEY,    /* the leaf whose range holds the key */
    BELOW_KEY, /* the leaf holding the largest keys < key */
    TO_FIRST,  /* the leftmost leaf */
    TO_LAST,   /* the rightmost leaf */
};

static inline unsigned child_slot(const bt_tree *t, char *n, unsigned count,
                                  enum descend_mode mode, const search_key *sk)
{
    switch (mode) {
    case TO_KEY: return key_bound(t, n, count, sk, true);
    case BELOW_KEY: return key_bound(t, n, count, sk, false);
    case TO_FIRST: return 0;
    case TO_LAST: break;
    }
    return count;
}

/* The key range of the leaf reached, from the separators on the path (the
 * deepest one on each side is the tightest). */
typedef struct fences {
    bool want_low, want_high;
    bool has_low, has_high;
    uint64_t low[KEY_WORDS_MAX];  /* leaf keys are >= low */
    uint64_t high[KEY_WORDS_MAX]; /* leaf keys are < high */
} fences;

static void note_fences(const bt_tree *t, char *n, unsigned slot, unsigned count, fences *f)
{
    if (f->want_high && slot < count) {
        read_words(f->high, key_slot(t, n, slot), t->key_words);
        f->has_high = true;
    }
    if (f->want_low && slot > 0) {
        read_words(f->low, key_slot(t, n, slot - 1), t->key_words);
        f->has_low = true;
    }
}

/* A leaf reached optimistically. Neither version has been validated after
 * the leaf was read: the caller reads the leaf, then validates parent and
 * leaf. */
typedef struct leaf_ref {
    char *leaf;
    uint64_t leaf_v;
    char *parent; /* NULL when the leaf is the root */
    uint64_t parent_v;
} leaf_ref;

static _Thread_local uint64_t descents; /* bt_thread_descents */

uint64_t bt_thread_descents(void) { return descents; }

/* Returns false when the caller must restart. */
static bool descend(const bt_tree *t, enum descend_mode mode, const search_key *sk, leaf_ref *out,
                    fences *f)
{
    descents++;
    uint64_t root_ref = load_word(&t->hdr->root);
    char *node = node_at(t, root_ref);
    uint64_t v;
    if (!read_lock(node, &v) || load_word(&t->hdr->root) != root_ref) return false;
    char *parent = NULL;
    uint64_t parent_v = 0;
    if (f) f->has_low = f->has_high = false;
    for (;;) {
        uint64_t meta = load_word(meta_word(node));
        if (meta_level(meta) == 0) break;
        unsigned count = meta_count(t, meta);
        if (parent && !validate(parent, parent_v)) return false;
        unsigned slot = child_slot(t, node, count, mode, sk);
        if (f) note_fences(t, node, slot, count, f);
        uint64_t next = load_word(child_ref(t, node, slot));
        if (!validate(node, v)) return false;
        parent = node;
        parent_v = v;
        node = node_at(t, next);
        prefetch_node(t, node);
        RACE_POINT(BT_RACE_CHILD);
        if (!read_lock(node, &v)) return false;
    }
    out->leaf = node;
    out->leaf_v = v;
    out->parent = parent;
    out->parent_v = parent_v;
    return true;
}

static inline bool leaf_ref_valid(const leaf_ref *lr)
{
    return (!lr->parent || validate(lr->parent, lr->parent_v)) && validate(lr->leaf, lr->leaf_v);
}

static inline unsigned leaf_count(const bt_tree *t, char *leaf)
{
    return meta_count(t, load_word(meta_word(leaf)));
}

/* ---- public: setup --------------------------------------------------------- */

const char *bt_status_name(bt_status s)
{
    switch (s) {
    case BT_OK: return "ok";
    case BT_NOT_FOUND: return "not found";
    case BT_EXISTS: return "key exists";
    case BT_NOMEM: return "out of memory";
    case BT_INVALID: return "invalid argument";
    }
    return "unknown status";
}

/* 512 bytes (8 cache lines) unless that holds fewer than 8 entries; then
 * the smallest multiple of 64 bytes that holds 8. */
static unsigned default_node_size(unsigned key_stride)
{
    unsigned entry = key_stride + 8;
    if ((BT_DEFAULT_NODE_SIZE - NODE_HEADER_BYTES - 8) / entry >= 8) return BT_DEFAULT_NODE_SIZE;
    unsigned need = NODE_HEADER_BYTES + 8 + 8 * entry;
    return (need + 63) & ~63u;
}

static bool set_geometry(bt_tree *t, unsigned key_width, unsigned node_size)
{
    if (key_width < 1 || key_width > BT_MAX_KEY_WIDTH) return false;
    unsigned stride = (key_width + 7) & ~7u;
    if (node_size == 0) node_size = default_node_size(stride);
    if (node_size % 8 != 0 || node_size < BT_MIN_NODE_SIZE || node_size > BT_MAX_NODE_SIZE)
        return false;
    unsigned leaf_cap = (node_size - NODE_HEADER_BYTES) / (stride + 8);
    unsigned inner_cap = (node_size - NODE_HEADER_BYTES - 8) / (stride + 8);
    if (leaf_cap < 4 || inner_cap < 4) return false;
    t->key_width = key_width;
    t->key_stride = stride;
    t->key_words = stride / 8;
    t->node_size = node_size;
    t->leaf_cap = leaf_cap;
    t->inner_cap = inner_cap;
    t->leaf_vals_off = NODE_HEADER_BYTES + leaf_cap * stride;
    t->inner_kids_off = NODE_HEADER_BYTES + inner_cap * stride;
    return true;
}

static bool space_usable(const bt_space *space)
{
    return space && space->alloc && space->retire;
}

bt_status bt_create(bt_tree *t, bt_header *hdr, const bt_space *space, const bt_config *cfg)
{
    if (!t || !hdr || !cfg || !space_usable(space)) return BT_INVALID;
    bt_tree nt = {.hdr = hdr, .space = *space};
    if (!set_geometry(&nt, cfg->key_width, cfg->node_size)) return BT_INVALID;
    char *root = alloc_node(&nt, 0);
    if (!root) return BT_NOMEM;
    memset(hdr, 0, sizeof *hdr);
    hdr->magic = BT_MAGIC;
    hdr->key_width = nt.key_width;
    hdr->node_size = nt.node_size;
    store_word(&hdr->root, ref_of(&nt, root));
    *t = nt;
    return BT_OK;
}

bt_status bt_attach(bt_tree *t, bt_header *hdr, const bt_space *space)
{
    if (!t || !hdr || !space_usable(space)) return BT_INVALID;
    if (hdr->magic != BT_MAGIC || load_word(&hdr->root) == 0) return BT_INVALID;
    bt_tree nt = {.hdr = hdr, .space = *space};
    if (!set_geometry(&nt, hdr->key_width, hdr->node_size)) return BT_INVALID;
    *t = nt;
    return BT_OK;
}

/* Retires a subtree, children before parents. Single-threaded. */
static void retire_subtree(const bt_tree *t, char *n)
{
    uint64_t meta = load_word(meta_word(n));
    if (meta_level(meta) > 0) {
        unsigned count = meta_count(t, meta);
        for (unsigned i = 0; i <= count; i++)
            retire_subtree(t, node_at(t, load_word(child_ref(t, n, i))));
    }
    retire_node(t, n);
}

void bt_destroy(bt_tree *t)
{
    if (!t || !t->hdr) return;
    uint64_t root = load_word(&t->hdr->root);
    if (t->hdr->magic == BT_MAGIC && root != 0) retire_subtree(t, node_at(t, root));
    store_word(&t->hdr->root, 0);
    t->hdr->magic = 0;
    t->hdr = NULL;
}

static inline bool tree_usable(const bt_tree *t)
{
    return t && t->hdr && load_word(&t->hdr->root) != 0;
}

/* ---- hints: answers from a remembered leaf ------------------------------------ */

/* The hinted leaf at its remembered version, or NULL. */
static char *hint_leaf(const bt_tree *t, const bt_hint *h)
{
    /* h->v is an unlocked version: equal means unlocked and unchanged. */
    if (!h || h->tree != t || !h->leaf || load_word(version_word(h->leaf)) != h->v) return NULL;
    return h->leaf;
}

static void hint_set(const bt_tree *t, bt_hint *h, char *leaf, uint64_t v)
{
    if (!h) return;
    h->tree = t;
    h->leaf = leaf;
    h->v = v;
    h->next = NULL;
    h->next_v = 0;
    h->last = false;
    h->at = 0;
}

/* hint_set with what is known of the leaf's right side: its neighbour
 * `next` at next_v (NULL: not known), or that it is the tree's last. */
static void hint_set_right(const bt_tree *t, bt_hint *h, char *leaf, uint64_t v, char *next,
                           uint64_t next_v, bool last)
{
    if (!h) return;
    hint_set(t, h, leaf, v);
    h->next = next;
    h->next_v = next_v;
    h->last = last;
}

/* Past the hinted leaf's last entry. The hinted leaf (validated by the caller
 * after this) has entries, all below sk; where is the first entry >= sk
 * (> sk with exclusive)? In no leaf when the leaf is the tree's last; in its
 * right neighbour when the hint knows it and the entry is there. Both leaves
 * unchanged means both still cover at least the ranges they had when the
 * hint saw them side by side (a leaf's range shrinks only by its own split;
 * a pruned empty neighbour's range goes to a neighbour without changing it),
 * so no key can lie between the leaf's last entry and the neighbour's first
 * (invariant 6). HINT_END, HINT_FOUND (*pos2: the entry's slot in the
 * neighbour), or HINT_UNKNOWN. */
enum hint_answer { HINT_UNKNOWN, HINT_FOUND, HINT_END };

static enum hint_answer hint_right(const bt_tree *t, const bt_hint *h, const search_key *sk,
                                   bool exclusive, uint64_t *key_buf, uint64_t *value,
                                   unsigned *pos2)
{
    if (h->last) return HINT_END;
    char *nx = h->next;
    if (!nx || load_word(version_word(nx)) != h->next_v) return HINT_UNKNOWN;
    unsigned count = leaf_count(t, nx);
    unsigned pos = key_bound(t, nx, count, sk, exclusive);
    if (pos >= count) return HINT_UNKNOWN;
    if (key_buf) read_words(key_buf, key_slot(t, nx, pos), t->key_words);
    *value = load_word(leaf_value(t, nx, pos));
    RACE_POINT(BT_RACE_LEAF_READ);
    if (!validate(nx, h->next_v)) return HINT_UNKNOWN;
    *pos2 = pos;
    return HINT_FOUND;
}

/* ---- public: lookup -------------------------------------------------------- */

/* Group prefetching: all descents advance one level per round, so the cache
 * misses of a level are taken together instead of one key after another.
 * Every node is read under the optimistic protocol (a lane whose node
 * changed under it just stops), so a lane only ever follows a child pointer
 * read from a validated node; the caller's EBR section keeps those nodes
 * readable. A value is a hint, valid when its leaf was. */
void bt_prefetch(const bt_tree *const *trees, const void *const *keys, unsigned n,
                 uint64_t *values, bt_hint *hints)
{
    struct lane {
        const bt_tree *t;
        char *node;
        search_key sk;
    } lane[BT_PREFETCH_MAX];
    if (n > BT_PREFETCH_MAX) n = BT_PREFETCH_MAX;
    unsigned live = 0;
    for (unsigned i = 0; i < n; i++) {
        values[i] = 0;
        if (hints) hints[i] = (bt_hint){0};
        struct lane *l = &lane[i];
        l->t = trees[i];
        l->node = NULL;
        if (!tree_usable(l->t) || !keys[i]) continue;
        search_key_set(l->t, &l->sk, keys[i]);
        l->node = node_at(l->t, load_word(&l->t->hdr->root));
        descents++;
        prefetch_node(l->t, l->node);
        live++;
    }
    while (live) {
        for (unsigned i = 0; i < n; i++) {
            struct lane *l = &lane[i];
            if (!l->node) continue;
            const bt_tree *t = l->t;
            char *node = l->node;
            uint64_t v;
            l->node = NULL;
            live--;
            if (!read_lock(node, &v)) continue;
            uint64_t meta = load_word(meta_word(node));
            unsigned count = meta_count(t, meta);
            if (meta_level(meta) == 0) {
                unsigned pos = key_bound(t, node, count, &l->sk, false);
                bool found = pos < count && compare_slot(t, key_slot(t, node, pos), &l->sk) == 0;
                uint64_t val = found ? load_word(leaf_value(t, node, pos)) : 0;
                if (validate(node, v)) {
                    values[i] = val;
                    if (hints) hint_set(t, &hints[i], node, v);
                }
                continue;
            }
            uint64_t next = load_word(child_ref(t, node, key_bound(t, node, count, &l->sk, true)));
            if (!validate(node, v)) continue;
            l->node = node_at(t, next);
            prefetch_node(t, l->node);
            live++;
        }
    }
}

/* A leaf that is unchanged since it was validated is still in the tree with
 * the same entries (invariant 6), and no key can lie between two adjacent
 * entries of one leaf. So when the searched position has an entry of the
 * leaf on both sides, the leaf alone answers; at its edges it does not (the
 * answer may be in a neighbour), and the caller descends. */
static bool hint_lookup(const bt_tree *t, const bt_hint *h, const search_key *sk, bool *found,
                        uint64_t *value)
{
    char *leaf = hint_leaf(t, h);
    if (!leaf) return false;
    unsigned count = leaf_count(t, leaf);
    unsigned pos = key_bound(t, leaf, count, sk, false);
    if (pos >= count) { /* above every entry: the right side may answer */
        uint64_t key_buf[KEY_WORDS_MAX], v = 0;
        unsigned pos2;
        enum hint_answer a =
            count ? hint_right(t, h, sk, false, key_buf, &v, &pos2) : HINT_UNKNOWN;
        if (a == HINT_UNKNOWN || !validate(leaf, h->v)) return false;
        *found = a == HINT_FOUND && compare_slot(t, key_buf, sk) == 0;
        *value = *found ? v : 0;
        return true;
    }
    bool eq = compare_slot(t, key_slot(t, leaf, pos), sk) == 0;
    if (!eq && pos == 0) return false;
    uint64_t v = eq ? load_word(leaf_value(t, leaf, pos)) : 0;
    RACE_POINT(BT_RACE_LEAF_READ);
    if (!validate(leaf, h->v)) return false;
    *found = eq;
    *value = v;
    return true;
}

/* key_bound for a scan's steps through a hint: from is usually the last
 * answer (the next step) or the entry before it (the same search repeated
 * after locking), so one comparison with the slots around the last answer
 * finds the position before a binary search does. */
static unsigned step_bound(const bt_tree *t, char *leaf, unsigned count, const bt_hint *h,
                           const search_key *from, bool exclusive)
{
    unsigned s = h->at;
    if (s && s <= count) {
        s--; /* the last answer's slot */
        int c = compare_slot(t, key_slot(t, leaf, s), from);
        if (c == 0) return exclusive ? s + 1 : s;
        if (c > 0 && s > 0 && compare_slot(t, key_slot(t, leaf, s - 1), from) == 0)
            return exclusive ? s : s - 1;
    }
    return key_bound(t, leaf, count, from, exclusive);
}

/* The first entry > from (>= from without exclusive) when the hinted leaf
 * holds it and an entry at or below from, or when from is past the leaf's
 * entries and the hint knows the right side (hint_right). An answer from the
 * right neighbour with an entry of its own at or below from moves the hint
 * there: the next step of a scan starts in it. */
static enum hint_answer hint_next(const bt_tree *t, bt_hint *h, const search_key *from,
                                  bool exclusive, uint64_t *key_buf, uint64_t *value)
{
    char *leaf = hint_leaf(t, h);
    if (!leaf || !from) return HINT_UNKNOWN;
    unsigned count = leaf_count(t, leaf);
    unsigned pos = step_bound(t, leaf, count, h, from, exclusive);
    if (pos >= count && count) {
        unsigned pos2 = 0;
        enum hint_answer a = hint_right(t, h, from, exclusive, key_buf, value, &pos2);
        if (a == HINT_UNKNOWN || !validate(leaf, h->v)) return HINT_UNKNOWN;
        if (a == HINT_FOUND && pos2 > 0) {
            hint_set(t, h, h->next, h->next_v);
            h->at = (uint16_t)(pos2 + 1);
        }
        return a;
    }
    if (pos == 0 || pos >= count) return HINT_UNKNOWN;
    read_words(key_buf, key_slot(t, leaf, pos), t->key_words);
    *value = load_word(leaf_value(t, leaf, pos));
    RACE_POINT(BT_RACE_LEAF_READ);
    if (!validate(leaf, h->v)) return HINT_UNKNOWN;
    h->at = (uint16_t)(pos + 1);
    return HINT_FOUND;
}

/* The last entry < from (<= from without exclusive), likewise. */
static bool hint_prev(const bt_tree *t, const bt_hint *h, const search_key *from, bool exclusive,
                      uint64_t *key_buf, uint64_t *value)
{
    char *leaf = hint_leaf(t, h);
    if (!leaf || !from) return false;
    unsigned count = leaf_count(t, leaf);
    unsigned end = key_bound(t, leaf, count, from, !exclusive);
    if (end == 0 || end >= count) return false;
    read_words(key_buf, key_slot(t, leaf, end - 1), t->key_words);
    *value = load_word(leaf_value(t, leaf, end - 1));
    RACE_POINT(BT_RACE_LEAF_READ);
    return validate(leaf, h->v);
}

bt_status bt_lookup(const bt_tree *t, const void *key, uint64_t *value)
{
    return bt_lookup_at(t, key, value, NULL);
}

bt_status bt_lookup_at(const bt_tree *t, const void *key, uint64_t *value, bt_hint *hint)
{
    if (!tree_usable(t) || !key) return BT_INVALID;
    search_key sk;
    search_key_set(t, &sk, key);
    bool hfound;
    uint64_t hv;
    if (hint_lookup(t, hint, &sk, &hfound, &hv)) {
        if (!hfound) return BT_NOT_FOUND;
        if (value) *value = hv;
        return BT_OK;
    }
    /* With a hint, note whether the leaf is the tree's last (an append's
     * lookup: its next-key search and insert then need no descent). */
    fences f = {.want_high = true};
    for (unsigned restarts = 0;; restarts++) {
        backoff(restarts);
        leaf_ref lr;
        if (!descend(t, TO_KEY, &sk, &lr, hint ? &f : NULL)) continue;
        unsigned count = leaf_count(t, lr.leaf);
        unsigned pos = key_bound(t, lr.leaf, count, &sk, false);
        bool found = pos < count && compare_slot(t, key_slot(t, lr.leaf, pos), &sk) == 0;
        uint64_t v = found ? load_word(leaf_value(t, lr.leaf, pos)) : 0;
        RACE_POINT(BT_RACE_LEAF_READ);
        if (!leaf_ref_valid(&lr)) continue;
        hint_set_right(t, hint, lr.leaf, lr.leaf_v, NULL, 0, !f.has_high);
        if (!found) return BT_NOT_FOUND;
        if (value) *value = v;
        return BT_OK;
    }
}

/* ---- insert ------------------------------------------------------------------ */

/* Where to cut a full node. Ascending (descending) key runs into the
 * rightmost (leftmost) node keep the old node nearly full instead of leaving
 * a trail of half-empty ones: bulk loads and sequential ids are common.
 * SPLIT_RUN (leaves only) is an ascending run inside the tree, such as the
 * new orders of one district followed in the same leaf by the next
 * district's keys: see split_leaf. */
enum split_shape { SPLIT_MIDDLE, SPLIT_APPEND, SPLIT_PREPEND, SPLIT_RUN };

static enum split_shape split_shape_for(unsigned slot, unsigned count, bool leftmost,
                                        bool rightmost)
{
    if (rightmost && slot == count) return SPLIT_APPEND;
    if (leftmost && slot == 0) return SPLIT_PREPEND;
    return SPLIT_MIDDLE;
}

static enum split_shape leaf_split_shape(uint64_t meta, unsigned slot, unsigned count,
                                         bool leftmost, bool rightmost)
{
    enum split_shape shape = split_shape_for(slot, count, leftmost, rightmost);
    return shape == SPLIT_MIDDLE && slot == meta_run_slot(meta) ? SPLIT_RUN : shape;
}

/* Moves the upper part of the locked full leaf into the new leaf `right`;
 * the first key of `right` goes to sep.
 *
 * A run inserting `key` at `slot` keeps exactly one key after it in its
 * leaf: the run's successor, which its next-key locking reads through the
 * leaf hint (a successor in another leaf costs a descent per insert: 7% of
 * TPC-C). With more keys after the run, the cut goes after the successor and
 * the run goes on in the left leaf; with only the successor left, the cut
 * goes before it and sep is `key` itself, so the run moves on into the new
 * leaf and the left one stays full. */
static void split_leaf(const bt_tree *t, char *left, char *right, enum split_shape shape,
                       unsigned slot, const uint64_t *key, uint64_t *sep)
{
    unsigned n = leaf_count(t, left), mid = n / 2;
    bool sep_is_key = false;
    if (shape == SPLIT_APPEND) mid = n - 1;
    else if (shape == SPLIT_PREPEND) mid = 1;
    else if (shape == SPLIT_RUN && slot + 1 < n) mid = slot + 1;
    else if (shape == SPLIT_RUN && slot + 1 == n) mid = slot, sep_is_key = true;
    else if (shape == SPLIT_RUN) mid = n - 1;
    unsigned moved = n - mid;
    copy_words_up(key_slot(t, right, 0), key_slot(t, left, mid), (size_t)moved * t->key_words);
    copy_words_up(leaf_value(t, right, 0), leaf_value(t, left, mid), moved);
    set_count(right, 0, moved);
    if (sep_is_key) memcpy(sep, key, (size_t)t->key_words * 8);
    else read_words(sep, key_slot(t, left, mid), t->key_words);
    set_count(left, 0, mid);
}

/* Moves the separators above sep[m] (and their children) of the locked full
 * inner node into `right`; sep[m] itself moves up into sep. */
static void split_inner(const bt_tree *t, char *left, char *right, enum split_shape shape,
                        uint64_t *sep)
{
    uint64_t meta = load_word(meta_word(left));
    unsigned level = meta_level(meta), n = meta_count(t, meta);
    unsigned m = shape == SPLIT_APPEND ? n - 1 : shape == SPLIT_PREPEND ? 0 : n / 2;
    unsigned right_count = n - m - 1;
    copy_words_up(key_slot(t, right, 0), key_slot(t, left, m + 1),
                  (size_t)right_count * t->key_words);
    copy_words_up(child_ref(t, right, 0), child_ref(t, left, m + 1), right_count + 1);
    set_count(right, level, right_count);
    read_words(sep, key_slot(t, left, m), t->key_words);
    set_count(left, level, m);
}

/* Inserts sep and the child to its right after child `slot` of a locked
 * inner node that has room. */
static void inner_insert(const bt_tree *t, char *n, unsigned slot, const uint64_t *sep,
                         uint64_t right_ref)
{
    uint64_t meta = load_word(meta_word(n));
    unsigned level = meta_level(meta), count = meta_count(t, meta);
    move_words(key_slot(t, n, slot + 1), key_slot(t, n, slot),
               (size_t)(count - slot) * t->key_words);
    move_words(child_ref(t, n, slot + 2), child_ref(t, n, slot + 1), count - slot);
    write_words(key_slot(t, n, slot), sep, t->key_words);
    store_word(child_ref(t, n, slot + 1), right_ref);
    set_count(n, level, count + 1);
}

/* Removes child `slot` of a locked inner node with at least one separator,
 * with the separator on its left (or right, for the first child): a
 * neighbour's key range absorbs the removed one. */
static void inner_remove_child(const bt_tree *t, char *n, unsigned slot)
{
    uint64_t meta = load_word(meta_word(n));
    unsigned level = meta_level(meta), count = meta_count(t, meta);
    unsigned sep = slot > 0 ? slot - 1 : 0;
    move_words(key_slot(t, n, sep), key_slot(t, n, sep + 1),
               (size_t)(count - sep - 1) * t->key_words);
    move_words(child_ref(t, n, slot), child_ref(t, n, slot + 1), count - slot);
    set_count(n, level, count - 1);
}

/* Splits `node` (version node_v) whose parent is `parent` (NULL: node is
 * the root) at child `parent_slot`. BT_OK means "done or lost a race":
 * either way the caller restarts. BT_NOMEM leaves the tree unchanged. */
static bt_status split_node(const bt_tree *t, char *parent, uint64_t parent_v, unsigned parent_slot,
                            char *node, uint64_t node_v, enum split_shape shape, unsigned slot,
                            const uint64_t *key)
{
    if (parent && !upgrade(parent, parent_v)) return BT_OK;
    if (!upgrade(node, node_v)) {
        if (parent) unlock_unchanged(parent, parent_v);
        return BT_OK;
    }
    if (!parent && load_word(&t->hdr->root) != ref_of(t, node)) { /* a new root appeared */
        unlock_unchanged(node, node_v);
        return BT_OK;
    }
    if (parent && meta_count(t, load_word(meta_word(parent))) >= t->inner_cap) {
        /* Cannot happen while inner splits succeed (see try_insert). */
        unlock_unchanged(node, node_v);
        unlock_unchanged(parent, parent_v);
        return BT_NOMEM;
    }
    unsigned level = meta_level(load_word(meta_word(node)));
    char *right = alloc_node(t, level);
    char *new_root = right && !parent ? alloc_node(t, level + 1) : NULL;
    if (!right || (!parent && !new_root)) {
        if (right) retire_node(t, right); /* never published */
        unlock_unchanged(node, node_v);
        if (parent) unlock_unchanged(parent, parent_v);
        return BT_NOMEM;
    }
    uint64_t sep[KEY_WORDS_MAX];
    if (level == 0) split_leaf(t, node, right, shape, slot, key, sep);
    else split_inner(t, node, right, shape, sep);
    RACE_POINT(BT_RACE_LOCKED);
    if (parent) {
        inner_insert(t, parent, parent_slot, sep, ref_of(t, right));
    } else {
        write_words(key_slot(t, new_root, 0), sep, t->key_words);
        store_word(child_ref(t, new_root, 0), ref_of(t, node));
        store_word(child_ref(t, new_root, 1), ref_of(t, right));
        set_count(new_root, level + 1, 1);
        store_word(&t->hdr->root, ref_of(t, new_root));
    }
    unlock(node);
    if (parent) unlock(parent);
    return BT_OK;
}

static void leaf_insert_at(const bt_tree *t, char *leaf, unsigned pos, unsigned count,
                           const search_key *sk, uint64_t value)
{
    move_words(key_slot(t, leaf, pos + 1), key_slot(t, leaf, pos),
               (size_t)(count - pos) * t->key_words);
    move_words(leaf_value(t, leaf, pos + 1), leaf_value(t, leaf, pos), count - pos);
    write_words(key_slot(t, leaf, pos), sk->raw, t->key_words);
    store_word(leaf_value(t, leaf, pos), value);
    store_word(meta_word(leaf), make_meta(0, count + 1) | (uint64_t)(pos + 2) << 16);
}

/* One attempt; false means restart. */
static bool try_insert(const bt_tree *t, const search_key *sk, uint64_t value, bool overwrite,
                       bool *replaced, bt_status *st, bt_hint *hint)
{
    descents++;
    uint64_t root_ref = load_word(&t->hdr->root);
    char *node = node_at(t, root_ref);
    uint64_t v;
    if (!read_lock(node, &v) || load_word(&t->hdr->root) != root_ref) return false;
    char *parent = NULL;
    uint64_t parent_v = 0;
    unsigned parent_slot = 0, parent_count = 0;
    bool leftmost = true, rightmost = true; /* every choice so far was the first/last child */
    for (;;) {
        uint64_t meta = load_word(meta_word(node));
        if (meta_level(meta) == 0) break;
        unsigned count = meta_count(t, meta);
        unsigned slot = key_bound(t, node, count, sk, true);
        /* Split a full inner node eagerly, so a child split finds room in
         * it. If that runs out of memory (nothing changed), or the parent is
         * full because its own split just did, go on down: the key may exist
         * or fit in its leaf, and a leaf split that needs room here reports
         * BT_NOMEM. */
        if (count >= t->inner_cap && !(parent && parent_count >= t->inner_cap)) {
            *st = split_node(t, parent, parent_v, parent_slot, node, v,
                             split_shape_for(slot, count, leftmost, rightmost), slot, sk->raw);
            if (*st != BT_NOMEM) return false;
        }
        if (parent && !validate(parent, parent_v)) return false;
        leftmost = leftmost && slot == 0;
        rightmost = rightmost && slot == count;
        uint64_t next = load_word(child_ref(t, node, slot));
        if (!validate(node, v)) return false;
        parent = node;
        parent_v = v;
        parent_slot = slot;
        parent_count = count;
        node = node_at(t, next);
        prefetch_node(t, node);
        RACE_POINT(BT_RACE_CHILD);
        if (!read_lock(node, &v)) return false;
    }

    unsigned count = leaf_count(t, node);
    unsigned pos = key_bound(t, node, count, sk, false);
    bool found = pos < count && compare_slot(t, key_slot(t, node, pos), sk) == 0;
    if (found) {
        /* A key seen in a leaf at a valid version is in the tree: no need
         * to validate the parent. */
        if (!overwrite) {
            if (!validate(node, v)) return false;
            *st = BT_EXISTS;
            return true;
        }
        if (!upgrade(node, v)) return false;
        store_word(leaf_value(t, node, pos), value);
        unlock(node);
        if (replaced) *replaced = true;
        *st = BT_OK;
        return true;
    }
    if (count >= t->leaf_cap) {
        if (parent && parent_count >= t->inner_cap) { /* its split ran out of memory */
            if (!validate(node, v)) return false;
            *st = BT_NOMEM;
            return true;
        }
        *st = split_node(t, parent, parent_v, parent_slot, node, v,
                         leaf_split_shape(load_word(meta_word(node)), pos, count, leftmost,
                                          rightmost),
                         pos, sk->raw);
        return *st == BT_NOMEM;
    }
    if (!upgrade(node, v)) return false;
    if (parent && !validate(parent, parent_v)) { /* the leaf may no longer cover the key */
        unlock_unchanged(node, v);
        return false;
    }
    leaf_insert_at(t, node, pos, count, sk, value);
    unlock(node);
    if (hint) {
        /* The leaf as we left it. A right neighbour the hint knew stays
         * one when the leaf had not changed since (an insert does not split). */
        bool kept = hint->tree == t && hint->leaf == node && hint->v == v;
        hint_set_right(t, hint, node, v + 2 * V_LOCKED, kept ? hint->next : NULL,
                       kept ? hint->next_v : 0, rightmost);
    }
    if (replaced) *replaced = false;
    *st = BT_OK;
    return true;
}

/* Insert a new key into the hinted leaf when the leaf alone covers it (an
 * entry on each side, as in hint_lookup, or past the last entry of the
 * tree's last leaf) and has room: no split, so no parent is involved.
 * Locking from the hint's version proves the leaf is unchanged since it was
 * read. False: take the descent. */
static bool hint_insert(const bt_tree *t, bt_hint *h, const search_key *sk, uint64_t value)
{
    char *leaf = hint_leaf(t, h);
    if (!leaf) return false;
    unsigned count = leaf_count(t, leaf);
    if (count >= t->leaf_cap) return false;
    unsigned pos = key_bound(t, leaf, count, sk, false);
    /* Past the last entry of the tree's last leaf (an append) it is ours too. */
    bool append = pos == count && count && h->last;
    if (!append && (pos == 0 || pos >= count || compare_slot(t, key_slot(t, leaf, pos), sk) == 0))
        return false; /* at an edge, or present: the descent decides */
    RACE_POINT(BT_RACE_LEAF_READ);
    if (!upgrade(leaf, h->v)) return false;
    leaf_insert_at(t, leaf, pos, count, sk, value);
    unlock(leaf);
    h->v += 2 * V_LOCKED; /* the version our unlock left: the leaf as we wrote it */
    return true;
}

static bt_status insert_key(const bt_tree *t, const void *key, uint64_t value, bool overwrite,
                            bool *replaced, bt_hint *hint)
{
    if (!tree_usable(t) || !key) return BT_INVALID;
    search_key sk;
    search_key_set(t, &sk, key);
    if (hint && hint_insert(t, hint, &sk, value)) return BT_OK;
    bt_status st = BT_OK;
    for (unsigned restarts = 0;; restarts++) {
        backoff(restarts);
        if (try_insert(t, &sk, value, overwrite, replaced, &st, hint)) return st;
    }
}

bt_status bt_insert(const bt_tree *t, const void *key, uint64_t value)
{
    return insert_key(t, key, value, false, NULL, NULL);
}

bt_status bt_insert_at(const bt_tree *t, const void *key, uint64_t value, bt_hint *hint)
{
    return insert_key(t, key, value, false, NULL, hint);
}

bt_status bt_upsert(const bt_tree *t, const void *key, uint64_t value, bool *replaced)
{
    return insert_key(t, key, value, true, replaced, NULL);
}

/* ---- remove ------------------------------------------------------------------ */

/* Replaces a root that is an inner node with a single child by that child,
 * as long as that applies. Best effort: gives up under heavy contention. */
static void collapse_root(const bt_tree *t)
{
    for (unsigned attempt = 0; attempt < COLLAPSE_ATTEMPTS; attempt++) {
        backoff(attempt);
        uint64_t root_ref = load_word(&t->hdr->root);
        char *root = node_at(t, root_ref);
        uint64_t v;
        if (!read_lock(root, &v)) continue;
        uint64_t meta = load_word(meta_word(root));
        uint64_t only_child = load_word(child_ref(t, root, 0));
        if (meta_level(meta) == 0 || meta_raw_count(meta) != 0) {
            if (validate(root, v)) return; /* nothing to collapse */
            continue;
        }
        if (!upgrade(root, v)) continue;
        if (load_word(&t->hdr->root) != root_ref) {
            unlock_unchanged(root, v);
            continue;
        }
        store_word(&t->hdr->root, only_child);
        unlock_obsolete(root);
        retire_node(t, root);
        attempt = 0; /* the new root may be a single-child node too */
    }
}

/* Unlinks the empty leaf covering sk, with the chain of single-child inner
 * nodes right above it, from the lowest ancestor that has other children.
 * Returns false to ask for a restart. */
static bool try_prune(const bt_tree *t, const search_key *sk)
{
    char *node_at_depth[MAX_DEPTH];
    uint64_t version_at[MAX_DEPTH];
    unsigned slot_at[MAX_DEPTH], count_at[MAX_DEPTH];

    uint64_t root_ref = load_word(&t->hdr->root);
    char *node = node_at(t, root_ref);
    uint64_t v;
    if (!read_lock(node, &v) || load_word(&t->hdr->root) != root_ref) return false;
    unsigned d = 0;
    for (;;) {
        uint64_t meta = load_word(meta_word(node));
        node_at_depth[d] = node;
        version_at[d] = v;
        count_at[d] = meta_count(t, meta);
        if (meta_level(meta) == 0) break;
        if (d > 0 && !validate(node_at_depth[d - 1], version_at[d - 1])) return false;
        if (d + 1 >= MAX_DEPTH) return true; /* deeper than tracked: leave it */
        slot_at[d] = key_bound(t, node, count_at[d], sk, true);
        uint64_t next = load_word(child_ref(t, node, slot_at[d]));
        if (!validate(node, v)) return false;
        node = node_at(t, next);
        d++;
        RACE_POINT(BT_RACE_CHILD);
        if (!read_lock(node, &v)) return false;
    }
    if (!validate(node, v)) return false;
    if (count_at[d] != 0) return true; /* refilled meanwhile */

    unsigned keep = d; /* the lowest ancestor with another child */
    while (keep > 0 && count_at[keep - 1] == 0) keep--;
    if (keep == 0) { /* the whole path is one chain: only the root can shrink */
        collapse_root(t);
        return true;
    }
    keep--;
    /* Lock top-down; unchanged versions prove the chain is still there and
     * still empty (invariant 6). */
    for (unsigned k = keep; k <= d; k++) {
        if (!upgrade(node_at_depth[k], version_at[k])) {
            while (k-- > keep) unlock_unchanged(node_at_depth[k], version_at[k]);
            return false;
        }
    }
    RACE_POINT(BT_RACE_LOCKED);
    inner_remove_child(t, node_at_depth[keep], slot_at[keep]);
    unlock(node_at_depth[keep]);
    for (unsigned k = keep + 1; k <= d; k++) unlock_obsolete(node_at_depth[k]);
    for (unsigned k = keep + 1; k <= d; k++) retire_node(t, node_at_depth[k]);
    if (keep == 0 && count_at[0] == 1) collapse_root(t);
    return true;
}

static void prune_empty_leaf(const bt_tree *t, const search_key *sk)
{
    for (unsigned restarts = 0; restarts < 1000; restarts++) {
        backoff(restarts);
        if (try_prune(t, sk)) return;
    }
}

static void leaf_remove_at(const bt_tree *t, char *leaf, unsigned pos, unsigned count)
{
    move_words(key_slot(t, leaf, pos), key_slot(t, leaf, pos + 1),
               (size_t)(count - pos - 1) * t->key_words);
    move_words(leaf_value(t, leaf, pos), leaf_value(t, leaf, pos + 1), count - pos - 1);
    set_count(leaf, 0, count - 1);
}

bt_status bt_remove(const bt_tree *t, const void *key, uint64_t *value)
{
    if (!tree_usable(t) || !key) return BT_INVALID;
    search_key sk;
    search_key_set(t, &sk, key);
    for (unsigned restarts = 0;; restarts++) {
        backoff(restarts);
        leaf_ref lr;
        if (!descend(t, TO_KEY, &sk, &lr, NULL)) continue;
        unsigned count = leaf_count(t, lr.leaf);
        unsigned pos = key_bound(t, lr.leaf, count, &sk, false);
        bool found = pos < count && compare_slot(t, key_slot(t, lr.leaf, pos), &sk) == 0;
        if (!found) {
            RACE_POINT(BT_RACE_LEAF_READ);
            if (!leaf_ref_valid(&lr)) continue;
            return BT_NOT_FOUND;
        }
        /* Found at a valid version: removing it from this leaf is right even
         * if the leaf's range changed meanwhile. */
        if (!upgrade(lr.leaf, lr.leaf_v)) continue;
        uint64_t old = load_word(leaf_value(t, lr.leaf, pos));
        leaf_remove_at(t, lr.leaf, pos, count);
        unlock(lr.leaf);
        if (count == 1) prune_empty_leaf(t, &sk);
        if (value) *value = old;
        return BT_OK;
    }
}

/* ---- next key and scans ------------------------------------------------------ */

/* Entries copied out of one leaf at a validated version. */
typedef struct batch {
    unsigned n;
    uint64_t *keys; /* n key slots (key_words each) */
    uint64_t *vals;
    fences f;       /* where the next leaf starts */
    char *leaf;     /* the leaf copied, at version leaf_v */
    uint64_t leaf_v;
} batch;

/* Up to max entries of the leaf holding `from`, ascending from `from` (the
 * first key > from with exclusive; from NULL: the first leaf). */
static void gather_forward(const bt_tree *t, const search_key *from, bool exclusive,
                           unsigned max, batch *b)
{
    b->f.want_low = false;
    b->f.want_high = true;
    for (unsigned restarts = 0;; restarts++) {
        backoff(restarts);
        leaf_ref lr;
        if (!descend(t, from ? TO_KEY : TO_FIRST, from, &lr, &b->f)) continue;
        unsigned count = leaf_count(t, lr.leaf);
        unsigned pos = from ? key_bound(t, lr.leaf, count, from, exclusive) : 0;
        unsigned n = count - pos < max ? count - pos : max;
        read_words(b->keys, key_slot(t, lr.leaf, pos), (size_t)n * t->key_words);
        read_words(b->vals, leaf_value(t, lr.leaf, pos), n);
        RACE_POINT(BT_RACE_LEAF_READ);
        if (!leaf_ref_valid(&lr)) continue;
        b->n = n;
        b->leaf = lr.leaf;
        b->leaf_v = lr.leaf_v;
        return;
    }
}

/* Up to max entries of the leaf holding the keys just below/at `from`,
 * copied in ascending order ending at the largest key <= from (< from with
 * exclusive; from NULL: the last leaf). */
static void gather_backward(const bt_tree *t, const search_key *from, bool exclusive,
                            unsigned max, batch *b)
{
    b->f.want_low = true;
    b->f.want_high = false;
    enum descend_mode mode = !from ? TO_LAST : exclusive ? BELOW_KEY : TO_KEY;
    for (unsigned restarts = 0;; restarts++) {
        backoff(restarts);
        leaf_ref lr;
        if (!descend(t, mode, from, &lr, &b->f)) continue;
        unsigned count = leaf_count(t, lr.leaf);
        unsigned end = from ? key_bound(t, lr.leaf, count, from, !exclusive) : count;
        unsigned n = end < max ? end : max;
        read_words(b->keys, key_slot(t, lr.leaf, end - n), (size_t)n * t->key_words);
        read_words(b->vals, leaf_value(t, lr.leaf, end - n), n);
        RACE_POINT(BT_RACE_LEAF_READ);
        if (!leaf_ref_valid(&lr)) continue;
        b->n = n;
        b->leaf = lr.leaf;
        b->leaf_v = lr.leaf_v;
        return;
    }
}

/* Where a search starts: key's search key in cursor, or NULL (the tree's
 * end) without a key. */
static const search_key *start_at(const bt_tree *t, search_key *cursor, const void *key)
{
    if (!key) return NULL;
    search_key_set(t, cursor, key);
    return cursor;
}

/* The entry a search found: its key (into key_out) and value, when wanted. */
static bt_status found(const bt_tree *t, void *key_out, uint64_t *value, const uint64_t *key,
                       uint64_t v)
{
    if (key_out) memcpy(key_out, key, t->key_width);
    if (value) *value = v;
    return BT_OK;
}

bt_status bt_next(const bt_tree *t, const void *key, bool inclusive, void *key_out,
                  uint64_t *value)
{
    return bt_next_at(t, key, inclusive, key_out, value, NULL);
}

/* bt_prev_at is the mirror image of this search (right to left); the two are
 * kept apart because only this one remembers the leaf it passed on its way
 * (hint_set_right). */
bt_status bt_next_at(const bt_tree *t, const void *key, bool inclusive, void *key_out,
                     uint64_t *value, bt_hint *hint)
{
    if (!tree_usable(t)) return BT_INVALID;
    search_key cursor;
    const search_key *from = start_at(t, &cursor, key);
    bool exclusive = !inclusive;
    uint64_t key_buf[KEY_WORDS_MAX], val;
    enum hint_answer a = hint ? hint_next(t, hint, from, exclusive, key_buf, &val) : HINT_UNKNOWN;
    if (a == HINT_END) return BT_NOT_FOUND;
    if (a == HINT_FOUND) return found(t, key_out, value, key_buf, val);
    batch b = {.keys = key_buf, .vals = &val};
    char *passed = NULL; /* the one leaf passed without an entry (hops 1) */
    uint64_t passed_v = 0;
    for (unsigned hops = 0;; hops++) {
        gather_forward(t, from, exclusive, 1, &b);
        if (b.n == 1) {
            /* Found in the leaf right of the one searched first: remember
             * both (the leaf covering its high fence is its neighbour), so
             * that the same search, a lookup of a key between them and a
             * scan's next step need no descent. */
            if (hops == 1) hint_set_right(t, hint, passed, passed_v, b.leaf, b.leaf_v, false);
            else hint_set(t, hint, b.leaf, b.leaf_v);
            return found(t, key_out, value, key_buf, val);
        }
        if (!b.f.has_high) {
            hint_set_right(t, hint, b.leaf, b.leaf_v, NULL, 0, true);
            return BT_NOT_FOUND;
        }
        passed = b.leaf;
        passed_v = b.leaf_v;
        search_key_from_words(t, &cursor, b.f.high); /* every key >= high is further right */
        from = &cursor;
        exclusive = false;
    }
}

bt_status bt_prev(const bt_tree *t, const void *key, bool inclusive, void *key_out,
                  uint64_t *value)
{
    return bt_prev_at(t, key, inclusive, key_out, value, NULL);
}

/* The mirror image of bt_next_at (right to left); kept apart because only the
 * forward search remembers the leaf it passed on its way (hint_set_right). */
bt_status bt_prev_at(const bt_tree *t, const void *key, bool inclusive, void *key_out,
                     uint64_t *value, bt_hint *hint)
{
    if (!tree_usable(t)) return BT_INVALID;
    search_key cursor;
    const search_key *from = start_at(t, &cursor, key);
    bool exclusive = !inclusive;
    uint64_t key_buf[KEY_WORDS_MAX], val;
    if (hint_prev(t, hint, from, exclusive, key_buf, &val))
        return found(t, key_out, value, key_buf, val);
    batch b = {.keys = key_buf, .vals = &val};
    for (;;) {
        gather_backward(t, from, exclusive, 1, &b);
        if (b.n == 1) {
            hint_set(t, hint, b.leaf, b.leaf_v);
            return found(t, key_out, value, key_buf, val);
        }
        if (!b.f.has_low) return BT_NOT_FOUND;
        search_key_from_words(t, &cursor, b.f.low); /* every key < low is further left */
        from = &cursor;
        exclusive = true;
    }
}

/* Scans copy one leaf at a time into a stack buffer (no allocation), check
 * the copy, hand it to the callback with no lock held, then continue at the
 * leaf's fence: from high (inclusive) going forward, below low going
 * backward. A leaf's copy holds every key of its range that was present at
 * the validated version, so keys present throughout are never skipped, and
 * fences only move one way, so no key comes twice. */
static bt_status scan(const bt_tree *t, const void *start, bool inclusive, bt_visit_fn fn,
                      void *arg, bool forward)
{
    if (!tree_usable(t) || !fn) return BT_INVALID;
    search_key cursor;
    const search_key *from = start_at(t, &cursor, start);
    bool exclusive = !inclusive;
    uint64_t buf[t->leaf_cap * (t->key_words + 1)];
    batch b = {.keys = buf, .vals = buf + (size_t)t->leaf_cap * t->key_words};
    for (;;) {
        if (forward) gather_forward(t, from, exclusive, t->leaf_cap, &b);
        else gather_backward(t, from, exclusive, t->leaf_cap, &b);
        for (unsigned n = 0; n < b.n; n++) {
            unsigned i = forward ? n : b.n - 1 - n; /* a backward batch is in key order */
            if (!fn(arg, &b.keys[(size_t)i * t->key_words], b.vals[i])) return BT_OK;
        }
        if (!(forward ? b.f.has_high : b.f.has_low)) return BT_OK;
        search_key_from_words(t, &cursor, forward ? b.f.high : b.f.low);
        from = &cursor;
        exclusive = !forward;
    }
}

bt_status bt_scan_forward(const bt_tree *t, const void *start, bool inclusive, bt_visit_fn fn,
                          void *arg)
{
    return scan(t, start, inclusive, fn, arg, true);
}

bt_status bt_scan_backward(const bt_tree *t, const void *start, bool inclusive, bt_visit_fn fn,
                           void *arg)
{
    return scan(t, start, inclusive, fn, arg, false);
}

/* ---- stats and verification ------------------------------------------------- */

/* Counts the subtree at n from per-node validated snapshots; a node that
 * left the tree meanwhile is skipped. */
static void stats_visit(const bt_tree *t, char *n, bt_stats *s)
{
    uint64_t kids[t->inner_cap + 1];
    uint64_t meta;
    for (unsigned tries = 0;; tries++) {
        backoff(tries);
        uint64_t v;
        if (!read_lock(n, &v)) {
            if (load_word(version_word(n)) & V_OBSOLETE) return;
            continue;
        }
        meta = load_word(meta_word(n));
        if (meta_level(meta) > 0) read_words(kids, child_ref(t, n, 0), meta_count(t, meta) + 1);
        if (validate(n, v)) break;
    }
    unsigned count = meta_count(t, meta);
    if (meta_level(meta) == 0) {
        s->leaves++;
        s->keys += count;
        return;
    }
    s->inner_nodes++;
    for (unsigned i = 0; i <= count; i++) stats_visit(t, node_at(t, kids[i]), s);
}

bt_status bt_get_stats(const bt_tree *t, bt_stats *out)
{
    if (!tree_usable(t) || !out) return BT_INVALID;
    bt_stats s = {0};
    char *root;
    for (;;) {
        root = node_at(t, load_word(&t->hdr->root));
        uint64_t v;
        if (!read_lock(root, &v)) {
            sched_yield();
            continue;
        }
        s.height = meta_level(load_word(meta_word(root))) + 1;
        if (validate(root, v)) break;
    }
    stats_visit(t, root, &s);
    s.nodes = s.leaves + s.inner_nodes;
    s.bytes = s.nodes * t->node_size;
    *out = s;
    return BT_OK;
}

static int compare_raw(const bt_tree *t, const uint64_t *a, const uint64_t *b)
{
    return memcmp(a, b, t->key_stride);
}

/* Checks the subtree at n against its key range [low, high) (NULL: open)
 * and expected level. */
static bool verify_node(const bt_tree *t, char *n, unsigned level, const uint64_t *low,
                        const uint64_t *high, pod_err *err)
{
    uint64_t ver = load_word(version_word(n)), meta = load_word(meta_word(n));
    unsigned count = meta_raw_count(meta);
    if (ver & (V_LOCKED | V_OBSOLETE)) {
        pod_err_set(err, "node at ref %llu is %s", (unsigned long long)ref_of(t, n),
                    ver & V_LOCKED ? "locked" : "obsolete");
        return false;
    }
    if (meta_level(meta) != level) {
        pod_err_set(err, "node at ref %llu has level %u, expected %u",
                    (unsigned long long)ref_of(t, n), meta_level(meta), level);
        return false;
    }
    if (count > (level == 0 ? t->leaf_cap : t->inner_cap)) {
        pod_err_set(err, "node at ref %llu holds %u entries, over capacity",
                    (unsigned long long)ref_of(t, n), count);
        return false;
    }
    uint64_t prev[KEY_WORDS_MAX], cur[KEY_WORDS_MAX];
    for (unsigned i = 0; i < count; i++) {
        read_words(cur, key_slot(t, n, i), t->key_words);
        if (t->key_stride > t->key_width) {
            const unsigned char *bytes = (const unsigned char *)cur;
            for (unsigned b = t->key_width; b < t->key_stride; b++) {
                if (bytes[b] != 0) {
                    pod_err_set(err, "key %u of node at ref %llu has non-zero padding", i,
                                (unsigned long long)ref_of(t, n));
                    return false;
                }
            }
        }
        if ((i > 0 && compare_raw(t, prev, cur) >= 0) || (low && compare_raw(t, cur, low) < 0) ||
            (high && compare_raw(t, cur, high) >= 0)) {
            pod_err_set(err, "key %u of node at ref %llu (level %u) is out of order or range", i,
                        (unsigned long long)ref_of(t, n), level);
            return false;
        }
        memcpy(prev, cur, t->key_stride);
    }
    if (level == 0) return true;
    uint64_t sep_low[KEY_WORDS_MAX], sep_high[KEY_WORDS_MAX];
    for (unsigned i = 0; i <= count; i++) {
        const uint64_t *child_low = low, *child_high = high;
        if (i > 0) {
            read_words(sep_low, key_slot(t, n, i - 1), t->key_words);
            child_low = sep_low;
        }
        if (i < count) {
            read_words(sep_high, key_slot(t, n, i), t->key_words);
            child_high = sep_high;
        }
        uint64_t ref = load_word(child_ref(t, n, i));
        if (ref == 0) {
            pod_err_set(err, "child %u of node at ref %llu is null", i,
                        (unsigned long long)ref_of(t, n));
            return false;
        }
        if (!verify_node(t, node_at(t, ref), level - 1, child_low, child_high, err)) return false;
    }
    return true;
}

bool bt_verify(const bt_tree *t, pod_err *err)
{
    if (!tree_usable(t)) {
        pod_err_set(err, "not a usable tree handle");
        return false;
    }
    if (t->hdr->magic != BT_MAGIC) {
        pod_err_set(err, "tree header has a bad magic number");
        return false;
    }
    char *root = node_at(t, load_word(&t->hdr->root));
    return verify_node(t, root, meta_level(load_word(meta_word(root))), NULL, NULL, err);
}

/* ---- local space ---------------------------------------------------------------- */

static void *local_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return aligned_alloc(64, (size + 63) & ~(size_t)63);
}

/* Pushes the node on the retired list, linked through its meta word:
 * a reader still inside sees a nonsense count (clamped) and fails
 * validation, because the node is obsolete. */
static void local_retire(void *ctx, void *node, size_t size)
{
    (void)size;
    bt_local_space *ls = ctx;
    void *head = __atomic_load_n(&ls->retired, __ATOMIC_RELAXED);
    do {
        store_word((uint64_t *)node + 1, (uint64_t)(uintptr_t)head);
    } while (!__atomic_compare_exchange_n(&ls->retired, &head, node, true, __ATOMIC_RELEASE,
                                          __ATOMIC_RELAXED));
    __atomic_fetch_add(&ls->retired_nodes, 1, __ATOMIC_RELAXED);
}

void bt_local_space_init(bt_local_space *ls)
{
    ls->space = (bt_space){.base = NULL, .alloc = local_alloc, .retire = local_retire, .ctx = ls};
    ls->retired = NULL;
    ls->retired_nodes = 0;
}

uint64_t bt_local_space_reclaim(bt_local_space *ls)
{
    void *n = __atomic_exchange_n(&ls->retired, NULL, __ATOMIC_ACQUIRE);
    uint64_t freed = 0;
    while (n) {
        void *next = (void *)(uintptr_t)load_word((uint64_t *)n + 1);
        free(n);
        n = next;
        freed++;
    }
    __atomic_fetch_sub(&ls->retired_nodes, freed, __ATOMIC_RELAXED);
    return freed;
}

void bt_local_space_fini(bt_local_space *ls)
{
    bt_local_space_reclaim(ls);
}
