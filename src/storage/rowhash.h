/* A hash of a partition's rows by key, beside its B+-tree: point lookups of
 * present keys in about one cache miss instead of a descent. The tree stays
 * the index of record (order, next keys, gaps); the hash only accelerates
 * hits. A miss means "ask the tree": a reader that races a resize or an
 * insert may miss a row that exists, never find one that does not have the
 * key. A row found may be dead (being removed); callers check validity under
 * the row's lock, as they do for a row the tree returns.
 *
 * Rows are chained through pod_row.hnext. Readers take no lock and must be
 * inside an EBR critical section (removed rows are freed through EBR).
 * Writers (add, del, and the resize that an add may trigger) serialise per
 * stripe of buckets; a resize takes every stripe. Old bucket arrays are kept
 * until the hash is destroyed, since readers may still walk them (they sum to
 * less than the current array). */
#ifndef PODDB_STORAGE_ROWHASH_H
#define PODDB_STORAGE_ROWHASH_H

#include <stdint.h>

#include "storage/row.h"

#define ROWHASH_STRIPES 64

struct rowhash_old;
struct rh_array;

struct row_hash {
    struct rh_array *arr;     /* buckets and mask; NULL until the first add */
    uint64_t count;           /* rows in the hash */
    uint32_t key_size, key_off; /* the key of a row: (char *)row->tuple + key_off */
    struct rowhash_old *old;  /* replaced arrays */
    uint32_t stripe[ROWHASH_STRIPES];
};

void rowhash_init(struct row_hash *h, uint32_t key_off, uint32_t key_size);
void rowhash_destroy(struct row_hash *h);

/* The row with this key, or NULL: not in the hash (ask the tree). */
struct pod_row *rowhash_find(const struct row_hash *h, const void *key);
/* Add a row just inserted into the tree (its key stored in it). Never fails:
 * without memory the hash just stops growing. */
void rowhash_add(struct row_hash *h, struct pod_row *row);
/* Take a row out (before it is handed to EBR). */
void rowhash_del(struct row_hash *h, struct pod_row *row);

struct rowhash_stats {
    uint64_t buckets, rows, longest_chain, empty_buckets;
};
/* Walks every bucket: for tests and diagnostics, with no writer running. */
void rowhash_get_stats(const struct row_hash *h, struct rowhash_stats *out);

#endif
