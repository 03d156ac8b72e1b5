/* A small libfabric layer for the disaggregated-memory mode: one RDM endpoint
 * (FI_RMA | FI_ATOMIC) with its CQ and AV on a provider chosen by name
 * ("shm", "tcp;ofi_rxm"; "verbs;ofi_rxm" on an RDMA NIC), memory
 * registration, and synchronous one-sided READ, WRITE, CAS (FI_CSWAP on
 * FI_UINT64) and FAA (fetching FI_SUM) against one peer's registered region,
 * singly or as a batch (post several, wait for all).
 *
 * libfabric is loaded with dlopen when the first endpoint is opened, so that
 * only the processes that use the fabric load it (linking it loads
 * libinfinipath, whose start-up code replaces fatal-signal handlers).
 *
 * Addressing follows the mr_mode the provider returned: a peer's region is
 * named by base + offset, base being the region's virtual address under
 * FI_MR_VIRT_ADDR (shm, verbs) and 0 otherwise (rxm over tcp), and the key
 * is fi_mr_key's. The memory node publishes both (fab_region).
 *
 * Every wait is bounded (fab_open's op_timeout_ms); a failure is an error
 * message naming the provider, the operation and the peer.
 *
 * Thread safety: none. A struct fab (its endpoint, CQ and staging buffer)
 * is used by one thread at a time: one per thread, or the caller's lock.
 * The memory node's progress loop (fab_progress) is the one exception: it
 * may run on its own thread while another thread only reads fab_name. */
#ifndef PODDB_DM_FABRIC_H
#define PODDB_DM_FABRIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define FAB_NAME_MAX 256 /* an endpoint's address (fi_getname) */

struct fab;

/* What a memory node tells its clients about its registered region. */
struct fab_region {
    uint64_t base;    /* add offsets to this: the region's address or 0 */
    uint64_t key;     /* fi_mr_key */
    uint64_t size;
    uint64_t mr_mode; /* as returned by fi_getinfo: the client checks it is its own */
};

struct fab_open_opts {
    const char *provider; /* "shm", "tcp;ofi_rxm", ... */
    const char *node;     /* address to bind on IP providers; NULL: 127.0.0.1 */
    bool server;          /* a memory node: a CQ it can sleep on where the provider has one */
    int op_timeout_ms;    /* bound on one operation or batch; 0: 10000 */
    size_t staging;       /* bytes of the registered staging buffer (clients); 0: 1 MiB */
    /* > 0: the endpoint also sends and receives messages (fab_send,
     * fab_recv) of at most msg_bytes (0: 256) into msg_slots buffers */
    uint32_t msg_slots, msg_bytes;
};

struct fab *fab_open(const struct fab_open_opts *o, pod_err *err);
void fab_close(struct fab *f);

const char *fab_provider(const struct fab *f);
uint64_t fab_mr_mode(const struct fab *f);
/* This endpoint's address: its bytes and length. */
int fab_name(struct fab *f, void *buf, size_t *len, pod_err *err);

/* Register buf (len bytes, allocated memory) for remote READ, WRITE and
 * atomics; *out says how clients name it. One region per struct fab. */
int fab_expose(struct fab *f, void *buf, uint64_t len, struct fab_region *out, pod_err *err);

/* The peer with this address, serving region r: ops name it by the index
 * returned (>= 0), or -1 with err. peer_name is what the peer's fab_name gave. */
int fab_peer_add(struct fab *f, const void *peer_name, size_t len, const struct fab_region *r,
                 const char *label, pod_err *err);

/* The memory node's progress: drain the CQ, sleeping up to timeout_ms where
 * the CQ has a wait object (else a poll and a yield). Returns 0, or -1 with
 * err on a CQ error (the loop logs it and goes on). */
int fab_progress(struct fab *f, int timeout_ms, pod_err *err);

/* ---- one-sided operations on a peer's region (off: from its start) ---- */

enum fab_op_kind { FAB_READ, FAB_WRITE, FAB_CAS, FAB_FAA };
struct fab_op {
    enum fab_op_kind kind;
    uint64_t off;
    /* READ / WRITE: len bytes to / from buf */
    void *buf;
    uint32_t len;
    /* CAS: compare and swap; FAA: add in operand. Both: the old value. */
    uint64_t compare, operand, old;
};

/* Post all n (in order, as the provider's queue takes them) and wait for
 * all. 0, or -1 with err naming the provider, the first failed op and the
 * peer; after a failure the endpoint is not to be used again. */
int fab_batch(struct fab *f, int peer, struct fab_op *ops, uint32_t n, pod_err *err);

/* fab_batch with ops[i] to peers[i]: the ops to each peer are posted in
 * their order, those to different peers at once (one wait for all, not one
 * per peer). */
int fab_batch_to(struct fab *f, const int *peers, struct fab_op *ops, uint32_t n, pod_err *err);

/* From now on every batch completes no earlier than model m says a real
 * RDMA NIC would let it (src/dm/nic_model.h); model node i is peer i. f
 * owns m (fab_close frees it); NULL turns the model off. */
struct nic_model;
void fab_set_nic_model(struct fab *f, struct nic_model *m);

int fab_read(struct fab *f, int peer, uint64_t off, void *buf, uint32_t len, pod_err *err);
int fab_write(struct fab *f, int peer, uint64_t off, const void *buf, uint32_t len, pod_err *err);
/* *old: the word found; swapped iff *old == compare. */
int fab_cas(struct fab *f, int peer, uint64_t off, uint64_t compare, uint64_t swap, uint64_t *old,
            pod_err *err);
int fab_faa(struct fab *f, int peer, uint64_t off, uint64_t add, uint64_t *old, pod_err *err);

/* ---- messages between endpoints opened with msg_slots (compute nodes'
 * requests to each other; memory nodes take none) ----
 * A message is at most fab_msg_max bytes, the same on both sides; one lands
 * in any receive buffer of its receiver, whoever sent it: a request says
 * itself where its reply goes. Sends wait for their completion (bounded). */

/* A peer to send messages to, by the address its fab_name gave: its index
 * (>= 0), or -1 with err. Independent of fab_peer_add's memory nodes. */
int fab_msg_peer_add(struct fab *f, const void *name, size_t len, pod_err *err);
uint32_t fab_msg_max(const struct fab *f);
int fab_send(struct fab *f, int peer, const void *msg, uint32_t len, pod_err *err);
/* The next message into buf (cap bytes), its length in *len: 1; 0 if none
 * came within timeout_ms (0: look once); -1 with err. */
int fab_recv(struct fab *f, void *buf, uint32_t cap, uint32_t *len, int timeout_ms, pod_err *err);

/* shm leaves each process's region (/dev/shm/PID:N:M) behind when the
 * process is killed: remove those of processes that no longer exist. The
 * number removed. */
int fab_shm_sweep(void);

#endif
