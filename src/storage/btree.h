/* B+-tree index with optimistic lock coupling (OLC).
 *
 * Keys are fixed-width byte strings (width chosen per tree, 1..255 bytes)
 * ordered by memcmp; values are uint64_t (a row pointer or an offset). Any
 * number of threads may call every operation concurrently: readers never
 * write shared memory on the happy path, writers lock single nodes with a CAS
 * on the node's version word. See docs/btree.md for the layout and protocol.
 *
 * Position independence: nodes never hold raw pointers. Every child and root
 * reference is a uint64_t "ref", turned into an address with
 * `space->base + ref`. For a tree in local DRAM base is NULL (a ref is the
 * address); for a tree in the shared CXL region base is where this process
 * mapped the region (a ref is an offset). The tree header (bt_header) holds
 * no pointers either, so it can live in shared memory; each process keeps its
 * own small handle (bt_tree) that pairs the header with its space.
 *
 * Reclamation: nodes that stop being reachable (an emptied leaf, an old
 * root) are handed to space->retire, never freed directly, because optimistic
 * readers may still be reading them. Callers must keep retired memory
 * readable until no operation that started before the retire is still
 * running (epoch-based reclamation plugs in there). */
#ifndef PODDB_STORAGE_BTREE_H
#define PODDB_STORAGE_BTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

typedef enum bt_status {
    BT_OK = 0,
    BT_NOT_FOUND,  /* no such key (lookup, remove, next/prev) */
    BT_EXISTS,     /* insert of a key that is already present */
    BT_NOMEM,      /* the space's alloc failed; the tree is unchanged */
    BT_INVALID,    /* bad argument: key width, node size, NULL, not a tree */
} bt_status;

/* "ok", "not found", ... for messages. */
const char *bt_status_name(bt_status s);

#define BT_MAX_KEY_WIDTH 255u
#define BT_MIN_NODE_SIZE 64u    /* and at least 4 entries per node */
#define BT_MAX_NODE_SIZE 16384u
#define BT_DEFAULT_NODE_SIZE 512u

/* Where nodes live. alloc returns memory for one node (size bytes, 8-byte
 * aligned at least, 64 recommended) or NULL when out of memory; it must never
 * return `base` itself, because ref 0 means "no node". retire takes a node
 * that is no longer reachable from the tree; it may free it only once no
 * reader can still be inside it (see top of file). */
typedef struct bt_space {
    char *base;  /* NULL for local DRAM: refs are addresses */
    void *(*alloc)(void *ctx, size_t size);
    void (*retire)(void *ctx, void *node, size_t size);
    void *ctx;
} bt_space;

/* The shared, position-independent part of a tree. May live in the CXL
 * region. Fields other than root never change after bt_create. */
typedef struct bt_header {
    uint64_t magic;
    uint64_t root;       /* ref of the root node; accessed atomically */
    uint32_t key_width;
    uint32_t node_size;
    uint64_t reserved[4];
} bt_header;

/* Per-process handle: the header, this process's view of the space, and
 * geometry derived from the header. Read-only after create/attach, so one
 * handle can be shared by all threads of a process. */
typedef struct bt_tree {
    bt_header *hdr;
    bt_space space;
    uint32_t key_width;   /* bytes compared */
    uint32_t key_stride;  /* bytes per key slot: key_width rounded up to 8 */
    uint32_t key_words;   /* key_stride / 8 */
    uint32_t node_size;
    uint32_t leaf_cap;    /* entries per leaf */
    uint32_t inner_cap;   /* separators per inner node (children = +1) */
    uint32_t leaf_vals_off;   /* byte offset of the value array in a leaf */
    uint32_t inner_kids_off;  /* byte offset of the child array in an inner node */
} bt_tree;

typedef struct bt_config {
    unsigned key_width; /* 1..BT_MAX_KEY_WIDTH */
    unsigned node_size; /* 0: BT_DEFAULT_NODE_SIZE, grown for wide keys; else a
                           multiple of 8 in [BT_MIN_NODE_SIZE, BT_MAX_NODE_SIZE]
                           holding at least 4 entries */
} bt_config;

/* Format *hdr as an empty tree (one empty leaf allocated from space) and
 * fill the handle *t. BT_INVALID on a bad config, BT_NOMEM if the root leaf
 * cannot be allocated. */
bt_status bt_create(bt_tree *t, bt_header *hdr, const bt_space *space, const bt_config *cfg);
/* Fill a handle for an existing tree (e.g. from another process that maps
 * the region at a different address). BT_INVALID if *hdr is not a tree. */
bt_status bt_attach(bt_tree *t, bt_header *hdr, const bt_space *space);
/* Retire every node and clear the header. No other thread may be using the
 * tree. */
void bt_destroy(bt_tree *t);

/* Point operations. key points to key_width bytes. */
bt_status bt_lookup(const bt_tree *t, const void *key, uint64_t *value);
bt_status bt_insert(const bt_tree *t, const void *key, uint64_t value);
/* Insert or overwrite; *replaced (may be NULL) says which. */
bt_status bt_upsert(const bt_tree *t, const void *key, uint64_t value, bool *replaced);
/* Remove key; its value goes to *value (may be NULL). */
bt_status bt_remove(const bt_tree *t, const void *key, uint64_t *value);

/* Next-key lookups (for next-key locking). bt_next finds the smallest key
 * > key (>= key with inclusive); bt_prev the largest key < key (<= with
 * inclusive). key NULL means "from the start" / "from the end", i.e. the
 * first / last key. The found key is copied to key_out (key_width bytes; may
 * be NULL), its value to *value (may be NULL). BT_NOT_FOUND if none. */
bt_status bt_next(const bt_tree *t, const void *key, bool inclusive, void *key_out,
                  uint64_t *value);
bt_status bt_prev(const bt_tree *t, const void *key, bool inclusive, void *key_out,
                  uint64_t *value);

/* A leaf remembered from the previous call of one operation (a scan's step,
 * an insert's lookup and next-key search), so the next call answers from that
 * leaf without a descent while the leaf's version is unchanged. Zero it
 * before first use ({0}); use it only inside one EBR critical section (the
 * leaf's memory must stay valid) and only with the tree it was filled by. A
 * stale hint is detected and costs one version check.
 *
 * What was learnt about the leaf's right side comes along: its right
 * neighbour (a next-key search that crossed into it), or that it is the
 * tree's last leaf. Then a key past the leaf's last entry is answered too
 * (an append, a run's end whose successor is in the next leaf). */
typedef struct bt_hint {
    const bt_tree *tree;
    char *leaf;
    uint64_t v;
    char *next;      /* the leaf right of `leaf` at version next_v, or NULL */
    uint64_t next_v;
    bool last;       /* `leaf` is the tree's last leaf */
    uint16_t at;     /* 1 + the slot of the last next-key answer in `leaf` (0: none) */
} bt_hint;

bt_status bt_lookup_at(const bt_tree *t, const void *key, uint64_t *value, bt_hint *hint);
bt_status bt_next_at(const bt_tree *t, const void *key, bool inclusive, void *key_out,
                     uint64_t *value, bt_hint *hint);
bt_status bt_prev_at(const bt_tree *t, const void *key, bool inclusive, void *key_out,
                     uint64_t *value, bt_hint *hint);
/* bt_insert, into the hinted leaf without a descent when the key falls
 * between two of its entries and it has room; the hint then stays valid. */
bt_status bt_insert_at(const bt_tree *t, const void *key, uint64_t value, bt_hint *hint);

/* Look up n keys (at most BT_PREFETCH_MAX; keys[i] in trees[i]) together,
 * descending all of them one level at a time, so that their cache misses
 * overlap: values[i] is key i's value, or 0 when it was not found or its
 * descent met a concurrent change. For prefetching what a transaction will
 * read next — a value is a hint, not an answer. With hints (may be NULL),
 * hints[i] is the leaf key i's descent reached (zeroed when it met a
 * change): the later lookup of the key, inside the same EBR section, can
 * start there (bt_lookup_at) instead of descending again. Call inside the
 * EBR section that protects the trees' nodes. */
#define BT_PREFETCH_MAX 16
void bt_prefetch(const bt_tree *const *trees, const void *const *keys, unsigned n,
                 uint64_t *values, bt_hint *hints);

/* Called once per entry of a scan, in scan order. key points to key_width
 * bytes valid only during the call. Return true to go on, false to stop. No
 * lock is held during the call: it may itself use the tree. */
typedef bool (*bt_visit_fn)(void *arg, const void *key, uint64_t value);

/* Ascending scan from start (>= start with inclusive, > start without;
 * start NULL: from the first key) until the end or until fn returns false.
 * Under concurrent writes each key is returned at most once, keys come in
 * strictly increasing order, and every key present for the whole scan is
 * returned. */
bt_status bt_scan_forward(const bt_tree *t, const void *start, bool inclusive,
                          bt_visit_fn fn, void *arg);
/* Descending scan from start (<= start with inclusive, < without; start
 * NULL: from the last key), same guarantees in decreasing order. */
bt_status bt_scan_backward(const bt_tree *t, const void *start, bool inclusive,
                           bt_visit_fn fn, void *arg);

typedef struct bt_stats {
    uint64_t keys;
    uint64_t leaves;
    uint64_t inner_nodes;
    uint64_t nodes;    /* leaves + inner_nodes */
    uint64_t bytes;    /* nodes * node_size */
    unsigned height;   /* 1 for a tree that is a single leaf */
} bt_stats;

/* Walks the whole tree. Exact when no writer runs concurrently, otherwise a
 * consistent-per-node approximation. */
bt_status bt_get_stats(const bt_tree *t, bt_stats *out);

/* Checks the structural invariants (sorted keys within each node's key
 * range, all leaves at the same depth, counts within capacity). Only while no
 * writer runs. Returns true if sound, else false with the first violation in
 * *err (may be NULL). For tests and debugging. */
bool bt_verify(const bt_tree *t, pod_err *err);

/* Descents from the root this thread has made (every tree, every
 * operation; a restart counts again): what hints save shows here, for
 * tests and profiling. */
uint64_t bt_thread_descents(void);

/* ---- test seam -------------------------------------------------------------- */

/* Points in the protocol where a concurrency test may stall the calling
 * thread to widen race windows. bt_race_point is a weak symbol: undefined
 * (and never called) unless a test program defines it. */
enum bt_race_where {
    BT_RACE_CHILD,     /* a child ref was read and checked, its version not yet read */
    BT_RACE_LEAF_READ, /* a leaf was read optimistically, not yet validated */
    BT_RACE_LOCKED,    /* a writer holds node locks in the middle of a change */
};
void bt_race_point(enum bt_race_where where) __attribute__((weak));

/* ---- the default space for local (DRAM) trees --------------------------- */

/* Nodes come from aligned_alloc (64-byte aligned). Retired nodes are kept on
 * a lock-free list and freed only by bt_local_space_reclaim/fini, which the
 * caller runs when no thread can be inside a tree that uses this space (EBR
 * will take this over). The struct must not move after init: its space.ctx
 * points to itself. */
typedef struct bt_local_space {
    bt_space space;
    void *retired;           /* head of the retired-node list; atomic */
    uint64_t retired_nodes;  /* retired and not yet freed; atomic */
} bt_local_space;

void bt_local_space_init(bt_local_space *ls);
/* Free every retired node. Returns how many were freed. */
uint64_t bt_local_space_reclaim(bt_local_space *ls);
void bt_local_space_fini(bt_local_space *ls);

#endif
