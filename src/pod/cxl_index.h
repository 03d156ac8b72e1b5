/* The CXL index (Tigon §3.2, §3.4.1): one B+-tree per (table, partition) in
 * the owner host's HWcc slice, mapping a key of a CXL-resident tuple to the
 * offset of its HWcc record. Only the owner host changes it; every host reads
 * it, concurrently with the owner's changes, with the OLC protocol of
 * src/storage/btree.h (nodes hold offsets, so each process reads the tree at
 * its own mapping address).
 *
 * Directory: each host keeps, in its HWcc slice, an append-only directory of
 * its indexes, (table id, partition) -> offset of the index header, published
 * at root slot CXL_ROOT_INDEX_DIR (cxl_root_publish). cxl_index_open finds an
 * index of any host through it.
 *
 * Reclamation: nodes the owner unlinks (emptied leaves, old roots) go through
 * cross-host EBR (src/pod/xebr.h) and are poisoned and cxl_free'd on the owner
 * only once every worker slot of every host has left the critical sections
 * that could still see them. So every read on every host runs inside
 * xebr_enter/xebr_exit of its worker slot: the cxl_index_* calls below enter
 * and exit themselves (nesting is cheap), and a caller that keeps using what it
 * found (a scan callback, a cached record offset) wraps the whole use in its
 * own xebr_enter/exit. docs/cxl-index.md has the layout and the protocol. */
#ifndef PODDB_POD_CXL_INDEX_H
#define PODDB_POD_CXL_INDEX_H

#include <stdbool.h>
#include <stdint.h>

#include "cxl/region.h"
#include "pod/xebr.h"
#include "storage/btree.h"
#include "util/err.h"

/* Root slot of a host's index directory (slot 0: tests, slot 1: ring transport). */

/* Node size when the creator passes 0 and the key fits (>= 8 entries per node;
 * wider keys get btree.h's default sizing). See docs/cxl-index.md for the
 * measured HWcc bytes per key by node size. */
#define CXL_INDEX_DEFAULT_NODE_SIZE 512u

/* Per-process handle of one index. Read-only after create/open: all threads
 * of the process may share it. */
struct cxl_index;

/* Create the index of (table_id, part) in this host's HWcc slice (r must be
 * attached as a host; x is this process's xebr view of r). key_width 1..255;
 * node_size 0 for the default, else as bt_config. Returns an owner handle
 * (reads and writes), NULL with err set on a bad argument, an index of that
 * (table, part) that already exists, or HWcc memory exhausted. */
struct cxl_index *cxl_index_create(struct cxl_region *r, struct xebr *x, uint32_t table_id,
                                   uint32_t part, unsigned key_width, unsigned node_size,
                                   pod_err *err);
/* Open the index of (table_id, part) owned by owner_host. On the owner host
 * the handle may write; on any other host it is read-only (writes return
 * BT_INVALID and change nothing). NULL with err set when the owner has no
 * such index (yet). */
struct cxl_index *cxl_index_open(struct cxl_region *r, struct xebr *x, int owner_host,
                                 uint32_t table_id, uint32_t part, pod_err *err);
/* Free the handle (the shared index stays). NULL is a no-op. */
void cxl_index_close(struct cxl_index *ix);

bool cxl_index_is_owner(const struct cxl_index *ix);
int cxl_index_owner(const struct cxl_index *ix);
unsigned cxl_index_key_width(const struct cxl_index *ix);
/* The tree, for direct bt_lookup/bt_next/bt_prev/bt_scan_* calls inside the
 * caller's own xebr_enter/exit. Never write through it (use the calls below:
 * they route retired nodes to EBR). */
const bt_tree *cxl_index_tree(const struct cxl_index *ix);

/* Reads, any host; worker is the caller's worker id on its host (its xebr
 * slot). Each call runs inside a critical section of that slot; scan
 * callbacks run inside it too. Results as in btree.h. */
bt_status cxl_index_lookup(const struct cxl_index *ix, int worker, const void *key,
                           uint64_t *value);
bt_status cxl_index_next(const struct cxl_index *ix, int worker, const void *key, bool inclusive,
                         void *key_out, uint64_t *value);
bt_status cxl_index_prev(const struct cxl_index *ix, int worker, const void *key, bool inclusive,
                         void *key_out, uint64_t *value);
bt_status cxl_index_scan_forward(const struct cxl_index *ix, int worker, const void *start,
                                 bool inclusive, bt_visit_fn fn, void *arg);
bt_status cxl_index_scan_backward(const struct cxl_index *ix, int worker, const void *start,
                                  bool inclusive, bt_visit_fn fn, void *arg);

/* Writes, owner host only (else BT_INVALID, nothing changed). value is the
 * offset of the tuple's HWcc record. BT_NOMEM when the HWcc budget is
 * reached (the tree is unchanged). Any number of the owner's threads may
 * write concurrently, each with its own worker id (they share a counter on
 * an owner-only line of the index header, which lets compaction exclude
 * them). */
bt_status cxl_index_insert(const struct cxl_index *ix, int worker, const void *key, uint64_t value);
bt_status cxl_index_upsert(const struct cxl_index *ix, int worker, const void *key, uint64_t value,
                           bool *replaced);
bt_status cxl_index_remove(const struct cxl_index *ix, int worker, const void *key,
                           uint64_t *value);

/* Rebuild the tree densely (owner only; else BT_INVALID): copy every entry
 * in ascending order into a new tree (leaves ~97% full), switch the root,
 * and retire the old nodes through EBR. The tree never merges underfull
 * nodes, so after many removes (move-outs) it holds far more nodes than its
 * keys need; this gives the HWcc memory back (once EBR frees the old nodes).
 * Readers on every host keep reading throughout (they see the same entries
 * in the old or the new tree); the owner's writers of this index wait while
 * it runs (it takes O(n log n)). Needs free HWcc for the new tree: BT_NOMEM
 * if that runs out, the index unchanged. */
bt_status cxl_index_compact(const struct cxl_index *ix, int worker);

/* The partition's sentinel record (next-key locking past the last key; see
 * src/pod/pod.h): set once by the owner after create; 0 until then. */
void cxl_index_set_sentinel(const struct cxl_index *ix, cxl_off rec);
cxl_off cxl_index_sentinel(const struct cxl_index *ix);

/* Entries in the index now (a counter the owner keeps; any host may read). */
uint64_t cxl_index_nkeys(const struct cxl_index *ix);

/* Totals over every index of host's directory, from the shared counters: no
 * critical section needed, so observers (poddb-region inspect) may call it.
 * -1 if the directory looks damaged. */
struct cxl_index_usage {
    uint64_t indexes, keys, hwcc_bytes;
};
int cxl_index_host_usage(const struct cxl_region *r, int host, struct cxl_index_usage *out);

/* HWcc bytes the index holds now, as the allocator charges them (mimalloc
 * size classes): its header plus its live nodes (retired nodes waiting for
 * EBR are counted by xebr_get_stats instead). O(1): read from counters the
 * owner keeps in the shared header, so any host may ask. */
uint64_t cxl_index_hwcc_bytes(const struct cxl_index *ix);

struct cxl_index_stats {
    uint32_t table_id, part;
    int owner_host;
    unsigned key_width, node_size, leaf_cap, inner_cap;
    uint64_t node_bytes;  /* HWcc bytes charged per node (size class of node_size) */
    uint64_t live_nodes;  /* allocated and not yet retired (shared counter) */
    uint64_t hwcc_bytes;  /* cxl_index_hwcc_bytes */
    bt_stats tree;        /* from a walk: keys, leaves, inner nodes, height */
    double bytes_per_key; /* hwcc_bytes / tree.keys (0 when empty) */
    double leaf_fill;     /* tree.keys / (tree.leaves * leaf_cap) */
};
/* Walks the tree (inside a critical section of worker): exact when the owner
 * is not writing, else an approximation. */
bt_status cxl_index_get_stats(const struct cxl_index *ix, int worker, struct cxl_index_stats *out);

#endif
