/* A compute node's lock table, after Lotus (Hu et al., 2025; docs/dm.md,
 * "Lotus's lock table"): the record locks of the keys whose shard this
 * compute node owns, kept in its own memory instead of in the records'
 * words on the memory nodes, so that taking one is a local operation (or a
 * message to the owning compute node), never an atomic on a memory node.
 *
 * A fixed-size hash table of buckets of 8 slots. A slot is one 8-byte word,
 * a 56-bit fingerprint of the key (never 0) and an 8-bit counter: 0 free, 1
 * write-locked, 2k read-locked by k holders (at most 127). No chaining: a
 * lock whose bucket has no free slot and no slot of its fingerprint is
 * refused (LT_FULL), and its transaction aborts, as under NO_WAIT. A key is
 * named by a 64-bit hash of its table and key bytes (lt_key_hash): two keys
 * with one hash share a lock (a false conflict, never a missed one).
 *
 * Each bucket has a latch, held over its slots' search and change (Lotus's
 * Alg. 1 CASes a slot found by a search, which lets two threads that search
 * at once lock one key in two slots), and a list of who holds what in it
 * (Lotus's "lock state"): a holder is a compute node's transaction
 * (LT_HOLDER), so that taking a lock twice, or releasing it twice, is
 * harmless (messages may repeat), a read lock can be made a write lock by
 * its only holder, and the locks of a compute node that died can all be
 * released (lock_table_release_cn).
 *
 * Thread safety: every operation may run on any thread at once. */
#ifndef PODDB_DM_LOCK_TABLE_H
#define PODDB_DM_LOCK_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define LT_SLOTS 8u          /* per bucket: 64 bytes of slots, Lotus's cache line */
#define LT_MAX_READERS 127u

/* Who holds a lock: a compute node (its slot, 1..255) and a transaction of
 * it (any 56-bit number unique among its running transactions). */
#define LT_HOLDER(cn, txn) ((uint64_t)(cn) << 56 | ((txn) & ((1ull << 56) - 1)))
#define LT_HOLDER_CN(h) ((uint32_t)((h) >> 56))

enum lt_result {
    LT_OK = 0,        /* held now (or already, by this holder, in a mode at least as strong) */
    LT_CONFLICT = 1,  /* held by another in a conflicting mode, or 127 readers */
    LT_FULL = 2,      /* its bucket has no slot left */
    LT_NOMEM = -1,    /* the holder list could not grow */
};

struct lock_table;

/* A table of at least `bytes` of slots (rounded up to a power of two of
 * buckets; at least one bucket). NULL with err when out of memory. */
struct lock_table *lock_table_new(size_t bytes, pod_err *err);
void lock_table_free(struct lock_table *t);

/* The hash that names the lock of key (len bytes) of table. */
uint64_t lt_key_hash(uint32_t table, const void *key, size_t len);

/* Take the lock of hash for holder: a write lock when write, else a read
 * lock. A holder that has the read lock and asks for the write lock gets it
 * when it is the only reader (else LT_CONFLICT, its read lock kept). */
enum lt_result lock_table_acquire(struct lock_table *t, uint64_t hash, bool write,
                                  uint64_t holder);

/* Give back holder's lock of hash (whatever its mode); nothing when holder
 * does not hold it. */
void lock_table_release(struct lock_table *t, uint64_t hash, uint64_t holder);

/* Give back every lock a holder of compute node cn holds: what the others
 * do for a compute node that died. The count released. */
size_t lock_table_release_cn(struct lock_table *t, uint32_t cn);
/* Give back every lock of the holders h with (h & mask) == value (a
 * compute node's run, when its holders name it): the count released. */
size_t lock_table_release_match(struct lock_table *t, uint64_t mask, uint64_t value);

/* Locks held (slots in use), and holders, over the whole table: what a test
 * or sys.stats looks at, not exact while others lock. */
void lock_table_count(struct lock_table *t, size_t *locks, size_t *holders);

/* ---- Lotus's shards ----
 * A key's shard is the low 12 bits of its table's critical field (TPC-C's
 * warehouse, a hash of the key where a table has none); the 4096 shards are
 * split in even ranges over the compute nodes: compute node i of n owns
 * shards [i * 4096 / n, (i + 1) * 4096 / n). */
#define LT_SHARDS 4096u
static inline uint32_t lt_shard(uint64_t critical) { return (uint32_t)(critical % LT_SHARDS); }
static inline uint32_t lt_shard_owner(uint32_t shard, uint32_t ncn)
{
    return (uint32_t)((uint64_t)shard * ncn / LT_SHARDS);
}

#endif
