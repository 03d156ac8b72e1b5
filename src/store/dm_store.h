/* The dm record store: the operations of record_store.h over 1..16 memory
 * nodes (tools/poddb-memnode.c), reached with one-sided libfabric READ,
 * WRITE, CAS and FAA (src/dm/fabric.h). The pool layout is in src/dm/pool.h
 * and docs/dm.md: on each memory node a header, a catalog of tables (laid
 * out by the first compute node that adds a table, checked by every other),
 * and per table a hash index and records in the layout of cxl/record.h. A
 * key's index entry and (as a rule) its record are on the memory node its
 * hash picks; a location names its memory node.
 *
 * The index is a hash: ordered is false, so rs-2pl serves point operations
 * on it and refuses scans and next-key locking (phantom_protection) clearly.
 *
 * One endpoint per store, used under a lock: the workers of a compute node
 * take turns on it (an endpoint per worker is the next step).
 *
 * The word and row operations of record_store.h have no error path: when
 * the fabric fails (the memory node is gone, an operation does not complete
 * within its bound) the store prints what failed, naming the provider, the
 * operation and the memory node, and aborts the compute node, which is the
 * one safe thing left without CN failure handling. */
#ifndef PODDB_STORE_DM_STORE_H
#define PODDB_STORE_DM_STORE_H

#include "store/record_store.h"
#include "util/err.h"

/* A store on the n (1..16) memory nodes serving sockets[0..n) for pod, over
 * provider ("shm", "tcp;ofi_rxm"; NULL: shm). Memory node i is sockets[i]:
 * every compute node of the pod must list them in the same order (the first
 * to reach a memory node writes its number and n into its pool's header;
 * another order or count is refused). NULL with err when a memory node
 * cannot be reached, belongs to another pod, serves another provider, has
 * another number in the pod, or is listed twice, or the provider is missing. */
struct record_store *rs_dm_open_many(const char *const *sockets, int n, const char *provider,
                                     const char *pod, pod_err *err);

/* rs_dm_open_many for a compute node of slot (1..63: host + 1) running
 * protocol ("ford", "rs-2pl", "motor"; every compute node of the pod must run the
 * same: refused otherwise) with replicas (0..n-1) backups of every memory
 * node's records (every compute node must say the same; docs/dm.md,
 * "Replication"). The store offers member_join, owner_check and
 * owner_recovered (record_store.h), and every memory node refuses a second
 * live compute node of the slot. */
struct record_store *rs_dm_open_cn(const char *const *sockets, int n, const char *provider,
                                   const char *pod, uint32_t slot, const char *protocol,
                                   uint32_t replicas, pod_err *err);

/* The one memory node serving memnode_socket: rs_dm_open_many of one. */
struct record_store *rs_dm_open(const char *memnode_socket, const char *provider, const char *pod,
                                pod_err *err);

/* Model an RDMA NIC from now on (src/dm/nic_model.h, docs/dm.md "The NIC
 * model"): every fabric batch of s and of its handles (attach, also those
 * made later) completes no earlier than such a NIC would let it, with each
 * memory node's caps shared, through a file in /dev/shm named after the
 * pod and the memory node, by the compute nodes of this machine. 0, or -1
 * with err (the store is then unchanged). */
struct nic_model_params;
int rs_dm_nic_model(struct record_store *s, const struct nic_model_params *p, pod_err *err);

/* The memory node (0..15) a location of a dm store names. */
unsigned rs_dm_loc_memnode(rs_loc loc);

/* The memory node that holds key's index entry in table (added to s). */
unsigned rs_dm_key_memnode(struct record_store *s, uint32_t table, const void *key);

#endif
