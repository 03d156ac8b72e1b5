/* The cross-host message transport: one inbox ring per host, one reply slot per
 * (host, worker). docs/transport.md describes the layout and the protocol.
 *
 * Inbox ring (Tigon §3.6): a bounded multi-producer queue in the shared region.
 * Its positions and one sequence word per slot live in the owner's HWcc slice
 * (cross-host atomics); the 256-byte message slots live in the owner's SWcc
 * slice. Any thread of any host may send; any thread of the owning host may
 * poll (several may poll at once). Sending never blocks: a full ring says so,
 * and the caller keeps serving its own inbox before it retries.
 *
 * Reply slots: each host has an area with one slot per worker in its own
 * slices. A requester arms its worker's slot (which gives the request id),
 * sends the request, and waits — bounded, serving its own inbox through a
 * callback meanwhile; the host that handles the request posts the reply
 * straight into that slot.
 *
 * Every access to SWcc memory goes through the region's SWcc view: writers
 * cxl_swcc_write + cxl_swcc_writeback before publishing in HWcc with a release
 * store, readers cxl_swcc_flush after the acquire load and before reading, so
 * the transport is correct on non-coherent devices and in the simulated
 * non-coherent mode.
 *
 * A worker that waits for a reply MUST keep serving its own inbox (the poll
 * callback of cxl_reply_wait, and between retries of a full send): two hosts
 * whose workers wait for each other without serving their inboxes deadlock
 * until the waits time out. */
#ifndef PODDB_CXL_RING_H
#define PODDB_CXL_RING_H

#include <stdbool.h>
#include <stdint.h>

#include "cxl/region.h"
#include "util/err.h"

/* Root slots (cxl_root_publish) used by the transport. Slot 0 is used by
 * tests, slot 2 by the CXL index directory (src/pod/cxl_index.h). */

/* A message is one 256-byte slot: a 16-byte header and up to 240 bytes inline.
 * Larger messages are refused (CXL_RING_TOOBIG); there is no fragmentation. */
#define CXL_MSG_SLOT 256
#define CXL_MSG_HDR 16
#define CXL_MSG_MAX (CXL_MSG_SLOT - CXL_MSG_HDR)

/* Limits of cxl_ring_create and cxl_reply_area_create. */
#define CXL_RING_MIN_SLOTS 2
#define CXL_RING_MAX_SLOTS (1u << 20)
#define CXL_REPLY_MAX_WORKERS 1024

struct cxl_msg {
    uint16_t type;        /* the caller's message type */
    uint16_t from_host;   /* set by send/post to the sending host */
    uint16_t from_worker; /* the sender's worker: where a reply goes */
    uint16_t len;         /* bytes of data used: 0..CXL_MSG_MAX */
    uint64_t req_id;      /* request id (cxl_reply_arm); echoed by the reply */
    uint8_t data[CXL_MSG_MAX];
};
_Static_assert(sizeof(struct cxl_msg) == CXL_MSG_SLOT, "a message is one slot");

/* Return codes: 0 and positive values are outcomes, negative ones errors. */
enum cxl_ring_rc {
    CXL_RING_OK = 0,
    CXL_RING_EMPTY = 1,    /* poll: no message */
    CXL_RING_FULL = 2,     /* send: no free slot now (serve your inbox, retry) */
    CXL_RING_TIMEOUT = 3,  /* reply_wait: no reply within the bound */
    CXL_RING_STALE = 4,    /* reply_post: the worker no longer waits for that id
                              (it timed out or gave up); the reply was dropped */
    CXL_RING_TOOBIG = -1,  /* len > CXL_MSG_MAX */
    CXL_RING_GONE = -2,    /* the ring / reply area was closed or its host
                              restarted; attach again */
    CXL_RING_DEAD = -3,    /* reply_wait: the replying host is not alive */
    CXL_RING_INVAL = -4,   /* bad argument: poll on a ring this host does not own,
                              a worker out of range, a wait without an armed id */
    CXL_RING_CORRUPT = -5, /* a slot held an impossible header (protocol bug) */
};

/* A short description of a return code ("ring full", ...). */
const char *cxl_ring_strerror(int rc);

/* ---- inbox rings -------------------------------------------------------- */

struct cxl_ring; /* a process-local handle; thread-safe as described above */

/* Create this host's inbox with nslots slots (a power of two in
 * [CXL_RING_MIN_SLOTS, CXL_RING_MAX_SLOTS]) and publish it in root slot
 * CXL_ROOT_RING. Uses 8 * nslots + 320 bytes of the HWcc quota and
 * 256 * nslots + 64 bytes of SWcc. NULL with err set if the region is not
 * attached as a host, nslots is invalid or the memory is not available. */
struct cxl_ring *cxl_ring_create(struct cxl_region *r, unsigned nslots, pod_err *err);

/* A sender's handle on host's inbox: waits at most timeout_ms for host to
 * publish it, then checks it (the error says whether the host is alive). */
struct cxl_ring *cxl_ring_attach(struct cxl_region *r, int host, int timeout_ms,
                                 pod_err *err);

/* Drop the handle. On the owner's handle this also closes the ring: it is
 * unpublished and later sends get CXL_RING_GONE. The ring's memory is not
 * freed (a sender may still be writing a slot); a host's slices are reset
 * when the host attaches again. */
void cxl_ring_close(struct cxl_ring *ring);

/* Copy m into a free slot of the ring and publish it. Non-blocking:
 * CXL_RING_OK, CXL_RING_FULL, CXL_RING_TOOBIG, CXL_RING_GONE, CXL_RING_INVAL
 * (the region is open as an observer). The region's host is stamped in
 * from_host; the rest of the header is the caller's. Sending to a host that
 * died succeeds until its ring is full: the reply wait notices the death. */
int cxl_ring_send(struct cxl_ring *ring, const struct cxl_msg *m);

/* Take the oldest message of this host's own ring into *out (header and len
 * bytes of data; the rest of out->data is left as it was). CXL_RING_OK,
 * CXL_RING_EMPTY, CXL_RING_INVAL (not the owner's handle), CXL_RING_CORRUPT.
 * Messages of one sending thread arrive in the order it sent them. */
int cxl_ring_poll(struct cxl_ring *own, struct cxl_msg *out);

/* Sleep on the owner's doorbell: at most timeout_ns, and not at all when a
 * message is in the ring or has_work(arg) (may be NULL) says there is other
 * work. Wakes early when a message is sent to the ring or cxl_ring_wake is
 * called. The doorbell is a futex word in the region: it wakes threads of
 * processes on this kernel only; a host on another kernel (another machine
 * or VM sharing the device) is not woken, and its sleep lasts the timeout.
 * Returns whether it slept (false: work was already there). The owner's
 * handle only. Any number of the owner's threads may sleep at once. */
bool cxl_ring_sleep(struct cxl_ring *own, uint64_t timeout_ns, bool (*has_work)(void *arg),
                    void *arg);
/* Wake the ring's sleepers, if any (cheap when none sleep): for work that
 * does not arrive through the ring (a call queued by a local thread). Call it
 * after publishing that work. */
void cxl_ring_wake(struct cxl_ring *ring);

/* Introspection for tests and diagnostics (protocol code never needs these):
 * the ring's slot count, the owner's next read position, and the shared SWcc
 * address of the slot used by position pos. */
unsigned cxl_ring_nslots(const struct cxl_ring *ring);
uint64_t cxl_ring_head(const struct cxl_ring *ring);
const void *cxl_ring_slot_addr(const struct cxl_ring *ring, uint64_t pos);

/* ---- reply slots -------------------------------------------------------- */

struct cxl_replies; /* this host's reply area */

/* Create this host's reply area with one slot per worker (1..
 * CXL_REPLY_MAX_WORKERS) and publish it in root slot CXL_ROOT_REPLY. Uses
 * 64 * (nworkers + 2) bytes of HWcc and 256 * nworkers + 64 of SWcc. */
struct cxl_replies *cxl_reply_area_create(struct cxl_region *r, unsigned nworkers,
                                          pod_err *err);
/* Unpublish the area and drop the handle (the memory stays, as for rings). */
void cxl_reply_area_close(struct cxl_replies *ra);

/* Arm worker's slot for its next request and return that request's id (put it
 * in req_id of the request); call it before sending the request. Ids increase
 * by one from a random start per area (never 0). Only worker
 * itself arms and waits on its slot, one request at a time. Returns 0 if the
 * worker is out of range or a reply for its previous request is still being
 * written (call cxl_reply_wait for that request first). */
uint64_t cxl_reply_arm(struct cxl_replies *ra, unsigned worker);

/* Post m as the reply to request m->req_id into to_worker's slot of to_host's
 * reply area (found through its published root). CXL_RING_OK,
 * CXL_RING_STALE (nobody waits for that id any more: dropped),
 * CXL_RING_TOOBIG, CXL_RING_GONE (to_host has no reply area),
 * CXL_RING_INVAL (to_host or to_worker out of range, or r is an observer). */
int cxl_reply_post(struct cxl_region *r, int to_host, unsigned to_worker,
                   const struct cxl_msg *m);

/* Called while a worker waits, to serve its own inbox. It must not wait for a
 * reply on the same worker slot (no nested requests). */
typedef void cxl_poll_fn(void *arg);

/* Let the area's waiters sleep on inbox's doorbell (this host's own inbox
 * handle) once spinning and yielding have not brought the reply, and make
 * cxl_reply_post ring it: a waiter then gives its CPU to the hosts that
 * share it and still wakes for a request to serve. Without it (or when the
 * replier runs on another kernel, which a futex cannot reach) waiters nap. */
void cxl_reply_area_doorbell(struct cxl_replies *ra, struct cxl_ring *inbox);

/* Wait at most timeout_us for the reply to request id in worker's slot from
 * from_host (the host the request went to). Calls poll(poll_arg) between
 * checks (poll may be NULL). Spins for the first 20 us, then yields until
 * 1 ms, then sleeps on the doorbell (cxl_reply_area_doorbell; at most 1 ms at
 * a time) or naps 20 us between checks. Checks that from_host is alive after 1 ms and
 * then every 5 ms. Returns CXL_RING_OK with the reply in *out, or
 * CXL_RING_TIMEOUT / CXL_RING_DEAD / CXL_RING_INVAL / CXL_RING_CORRUPT with
 * err saying which request, host and bound. The bound is exceeded only while a
 * live replier is copying the reply into the slot. After any return the slot
 * is free for the next cxl_reply_arm; a reply that arrives later is dropped. */
int cxl_reply_wait(struct cxl_replies *ra, unsigned worker, uint64_t id, int from_host,
                   int timeout_us, struct cxl_msg *out, cxl_poll_fn *poll, void *poll_arg,
                   pod_err *err);

#endif
