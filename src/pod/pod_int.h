/* Inside the pod layer: the host context, the messages, and what the
 * transaction code (src/txn/txn_remote.c) calls. Not for procedures. */
#ifndef PODDB_POD_POD_INT_H
#define PODDB_POD_POD_INT_H

#include <pthread.h>

#include "cxl/ring.h"
#include "pod/cxl_index.h"
#include "pod/pod.h"
#include "pod/xebr.h"
#include "storage/table.h"

/* Longest key a request carries inline (one 256-byte ring slot). */
#define POD_MSG_KEY_MAX (CXL_MSG_MAX - 24)
/* How long a requester waits for an owner's reply before giving up. */
#define POD_REPLY_TIMEOUT_US (10 * 1000 * 1000)
/* Most tuples one range request moves in. */
#define POD_RANGE_MAX 64

enum pod_msg_type {
    POD_MSG_MOVE_IN = 1,   /* move key in; if absent, make its gap lockable */
    POD_MSG_MOVE_RANGE,    /* move a run of keys in and mark the gaps between them */
    POD_MSG_PREP_INSERT,   /* create an invalid, write-locked tuple for a remote insert */
    POD_MSG_UNLINK,        /* a write-locked tuple is dead (deleted or insert undone): remove it */
    POD_MSG_REPLY,
    POD_MSG_MOVE_MANY,     /* move in those of count keys that exist and are free (a prefetch) */
};

/* Request flags. */
enum {
    POD_RQ_HAS_KEY = 1 << 0,   /* key is set (else: from the start / the end) */
    POD_RQ_INCLUSIVE = 1 << 1, /* the range starts at key itself */
    POD_RQ_REVERSE = 1 << 2,   /* the range goes down from key */
    /* The requester itself holds the lock of rec, the CXL key after the gap
     * it asks about (move-in, range: any mode; prep-insert: exclusively):
     * the owner's gap check counts that lock as its own instead of waiting
     * for it (it would wait for the requester, which waits for the reply). */
    POD_RQ_GAP_HELD = 1 << 3,
};

/* Reply statuses. */
enum pod_reply_status {
    POD_RS_OK = 0,      /* done; rec is the tuple's record (move-in, prep-insert) */
    POD_RS_ABSENT = 1,  /* no such key (its gap is now marked, when asked) */
    POD_RS_EXISTS = 2,  /* prep-insert: the key exists (moved in; rec is its record) */
    POD_RS_BUSY = -1,   /* a lock the owner needed was taken: abort and retry */
    POD_RS_NOMEM = -2,  /* the owner's HWcc memory is full even after moving out */
    POD_RS_ERROR = -3,  /* a bad request (protocol bug): see the message */
};

struct pod_req_msg {
    uint32_t table, part;
    cxl_off rec;        /* unlink: the record; with GAP_HELD: the record the requester holds */
    uint16_t flags, count;
    uint16_t key_len;
    uint16_t reserved;
    unsigned char key[POD_MSG_KEY_MAX];
};
_Static_assert(sizeof(struct pod_req_msg) <= CXL_MSG_MAX, "a request fits one slot");

struct pod_reply_msg {
    int32_t status;
    uint32_t reserved;
    cxl_off rec;
    char msg[CXL_MSG_MAX - 16];
};
_Static_assert(sizeof(struct pod_reply_msg) <= CXL_MSG_MAX, "a reply fits one slot");

struct pod_host {
    pod_db *db;
    struct cxl_region *r;
    const struct pod_config *conf;
    enum pod_coherence coh;
    int host, nhosts;
    struct xebr *x;
    struct cxl_ring *inbox;
    struct cxl_ring *peers[POD_MAX_HOSTS]; /* senders' handles, opened at first use */
    pthread_mutex_t peers_lock;
    struct cxl_replies *replies;
    uint64_t moveout_at;        /* HWcc bytes above which move-out runs */
    uint64_t moveout_to;        /* ... and the level it stops at */
    pthread_mutex_t moveout_lock; /* one move-out at a time (trylock) */
    uint64_t moveout_idle_until; /* a pass that moved nothing: no unforced pass before this
                                  * (pod_mono_ns), or every idle poll would rescan locked tuples */
    uint32_t moveout_table, moveout_part; /* the CLOCK hand: which partition next */
    uint64_t moveback_next;     /* below the threshold: the hand's next step (pod_mono_ns) */
    struct pod_host_stats st;
};

static inline void pod_count(uint64_t *c, uint64_t d)
{
    __atomic_fetch_add(c, d, __ATOMIC_RELAXED);
}

/* The CXL side of (t, part), opening another host's index at first use.
 * NULL with err set if the owner has not published it (not running yet). */
struct pod_part_cxl *pod_part(struct pod_host *ph, pod_table *t, uint32_t part, int worker,
                              pod_err *err);

static inline cxl_record *pod_rec(const struct pod_host *ph, cxl_off off)
{
    return (cxl_record *)cxl_ptr(ph->r, off);
}

/* Send a request to owner and wait for the reply (serving this host's inbox
 * meanwhile). Returns the reply status (enum pod_reply_status) with the
 * record in *rec, or POD_RS_ERROR with err set (timeout, dead host). */
int pod_request(struct pod_worker *w, int owner, int type, const struct pod_req_msg *rq,
                cxl_off *rec, pod_err *err);
/* Send an unlink (no reply); retries a full ring while serving the inbox.
 * -1 with err set if the owner is gone. */
int pod_send_unlink(struct pod_worker *w, int owner, const pod_table *t, uint32_t part,
                    const void *key, cxl_off rec, pod_err *err);
/* Fill a request's table, partition and key. */
void pod_req_init(struct pod_req_msg *rq, const pod_table *t, uint32_t part, const void *key,
                  uint16_t flags);

/* ---- owner side (movement.c) ---- */

/* The row latch orders the movements of one row (move-in, move-out, unlink,
 * setting its has-next-key bit). Held for microseconds, never across a
 * transaction. A bit of the row word, independent of the lock bits. */
static inline bool pod_row_latch_try(struct pod_row *row)
{
    return !(__atomic_fetch_or(&row->lock, ROW_LATCH, __ATOMIC_ACQUIRE) & ROW_LATCH);
}
static inline void pod_row_latch_release(struct pod_row *row)
{
    __atomic_fetch_and(&row->lock, ~ROW_LATCH, __ATOMIC_RELEASE);
}

/* Owner: take key's record (write-locked by the caller for good, row marked
 * invalid) out of CXL memory: clear its bit and the bit before it, then
 * remove it from the index (in that order: a scanner that still sees the bit
 * still sees the key, and fails to lock it), and retire it through xebr. */
void pod_forget_record(struct pod_worker *w, struct pod_part_cxl *pc, const void *key,
                       cxl_record *rec);

/* Handle one request addressed to this host. */
void pod_handle(struct pod_worker *w, const struct cxl_msg *m);
/* Owner: remove the moved row of key whose record this thread holds write-locked
 * (a committed delete, an undone insert): record invalid, out of the CXL
 * index and the local index, both retired. The lock is never released. */
void pod_unlink_moved(struct pod_worker *w, pod_table *t, uint32_t part, const void *key,
                      struct pod_row *row);
/* Owner: a key was inserted into the local index (under an exclusive lock on
 * its next key): the gap before it is no longer known to be complete. */
void pod_local_inserted(struct pod_worker *w, pod_table *t, uint32_t part, const void *key);

/* ---- move-out (moveout.c) ---- */
void pod_moveout(struct pod_worker *w, bool force);
/* Below the threshold: one step of the CLOCK hand when engine.moveback_rate
 * says it is due, so tuples no other host uses go back to DRAM. */
void pod_moveback(struct pod_worker *w);

#endif
