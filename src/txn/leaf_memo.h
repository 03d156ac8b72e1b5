/* The leaves a transaction's pod_prefetch reached, for the reads that follow,
 * and the leaf of its last insert into each tree, for the next insert.
 *
 * pod_prefetch descends to the leaves of the keys a transaction is about to
 * read, all keys a level at a time (bt_prefetch); then each read descended
 * again from the root. The memo keeps the leaf of each prefetched key as a
 * bt_hint in a direct-mapped table indexed by a hash of the tree and the key,
 * and the read starts from it (bt_lookup_at); a run of inserts (an order's
 * lines) starts each from the leaf the one before went into. A hint never
 * gives a wrong answer: it is used only while the leaf's version is
 * unchanged, and then only for a key that lies inside the leaf, so a
 * collision or a changed leaf costs a descent and nothing else. Entries
 * belong to one transaction (gen): its EBR section keeps their leaves
 * readable until it ends, and no later transaction may read a leaf that was
 * freed meanwhile. */
#ifndef PODDB_TXN_LEAF_MEMO_H
#define PODDB_TXN_LEAF_MEMO_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "storage/btree.h"

#define LEAF_MEMO_BITS 10 /* 1024 slots: StockLevel prefetches ~180 keys */

struct leaf_memo {
    uint64_t gen;  /* the transaction's; a slot of another is empty */
    bool used;     /* a slot was filled in this transaction */
    struct leaf_memo_slot {
        bt_hint h;
        uint64_t gen;
    } slot[1u << LEAF_MEMO_BITS];
};

/* A new transaction: every slot is empty. */
static inline void leaf_memo_begin(struct leaf_memo *m)
{
    m->gen++;
    m->used = false;
}

static inline struct leaf_memo_slot *leaf_memo_slot(struct leaf_memo *m, const bt_tree *t,
                                                    const void *key, unsigned len)
{
    const uint64_t mul = 0x9e3779b97f4a7c15ull; /* Fibonacci hashing */
    uint64_t h = (uint64_t)(uintptr_t)t * mul;
    const unsigned char *k = key;
    for (unsigned off = 0; off < len; off += 8) {
        uint64_t w = 0;
        memcpy(&w, k + off, len - off < 8 ? len - off : 8);
        h = (h ^ w) * mul;
    }
    return &m->slot[h >> (64 - LEAF_MEMO_BITS)];
}

/* Remember the leaf that key's prefetch reached (h->leaf NULL: none). A
 * NULL key (len 0) stands for the tree: the leaf of its last insert. */
static inline void leaf_memo_put(struct leaf_memo *m, const void *key, unsigned len,
                                 const bt_hint *h)
{
    if (!h->leaf) return;
    struct leaf_memo_slot *s = leaf_memo_slot(m, h->tree, key, len);
    s->h = *h;
    s->gen = m->gen;
    m->used = true;
}

/* The hint remembered for key in tree t, into *h; false (h untouched) when
 * there is none. */
static inline bool leaf_memo_get(struct leaf_memo *m, const bt_tree *t, const void *key,
                                 unsigned len, bt_hint *h)
{
    if (!m->used) return false;
    const struct leaf_memo_slot *s = leaf_memo_slot(m, t, key, len);
    if (s->gen != m->gen || s->h.tree != t) return false;
    *h = s->h;
    return true;
}

#endif
