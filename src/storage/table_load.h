/* Loading rows outside transactions, for recovery: install a logged value if
 * it is newer than what the table holds, then drop what ended up deleted.
 *
 * No transaction may run. Several threads may install concurrently as long
 * as each key is installed by one thread only (recovery shards records by
 * key); every caller must be a pod worker inside its EBR critical section,
 * because the index retires nodes through EBR while others read it. */
#ifndef PODDB_STORAGE_TABLE_LOAD_H
#define PODDB_STORAGE_TABLE_LOAD_H

#include <stdint.h>

#include "storage/table.h"

struct ebr_domain;

enum table_install_result {
    TABLE_INSTALLED = 0, /* the row now carries ev (and tuple, or is a tombstone) */
    TABLE_NOT_NEWER,     /* the row already had an epoch-version >= ev: unchanged */
    TABLE_INSTALL_NOMEM,
    TABLE_NO_BASE,       /* table_patch: the row is missing, deleted, or at another version */
};

/* key: t->key_size bytes; tuple: t->tuple_size bytes, or NULL for a delete,
 * which leaves an invalid row (a tombstone) carrying ev in the index, so that
 * an older put of the key met later cannot bring it back. */
enum table_install_result table_install(pod_table *t, const void *key, uint64_t ev,
                                        const void *tuple);

/* Apply a logged update that changed len bytes at offset of the tuple whose
 * epoch-version was base_ev, turning it into version ev. NOT_NEWER when the
 * row is already at ev or later; NO_BASE when the row is not at base_ev (its
 * version base_ev was never installed: a record of the chain is missing). */
enum table_install_result table_patch(pod_table *t, const void *key, uint64_t ev,
                                      uint64_t base_ev, uint32_t offset, const void *bytes,
                                      uint32_t len);

/* Remove key's row if it is a tombstone. 1 removed, 0 not (absent or valid).
 * The row is retired in slot `slot` of ebr, the caller's EBR domain and slot
 * (inside its critical section), or freed at once when ebr is NULL (no
 * other thread reads the table). */
int table_drop_tombstone(pod_table *t, const void *key, struct ebr_domain *ebr, int slot);

#endif
