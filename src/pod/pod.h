/* A host's membership in the pod (Tigon §3.1-§3.4, §3.6): what a pod_db needs
 * to reach the partitions of other hosts through CXL memory and to serve its
 * own partitions to them. docs/pod.md describes the protocol.
 *
 * Partition p of a table is owned by host p % nhosts. The owner keeps its
 * tuples in local DRAM (the table's B+-tree of struct pod_row) and moves a
 * tuple into CXL memory when another host asks for it: an HWcc record + SWcc
 * row (cxl/record.h), entered in the partition's CXL index (owned by the same
 * host), with the local row's shortcut pointing at the record and its lock
 * word frozen (LOCK_MOVED, src/storage/lock.h) so the record's lock is the only
 * live lock of the tuple. Other hosts find CXL-resident tuples in the index
 * and lock, read and write them there with no message; a tuple that is not in
 * CXL memory is requested from the owner over the MPSC rings. The owner moves
 * tuples back out under CLOCK when its HWcc use passes the threshold.
 *
 * Every partition also has a sentinel record in CXL memory (never in the
 * index): its lock covers the gap after the last key (next-key locking), and
 * its has-next-key bit means "the first key of the CXL index is the first key
 * of the local index". A record's has-next-key bit means its next key in the
 * CXL index is also its next key in the local index, so the gap between them
 * holds no key (Tigon §3.4.2). The owner clears a bit whenever a key may have
 * appeared in that gap (a local insert, a removal from the CXL index) and sets
 * it only while it holds a shared lock on the upper key of the gap, which every
 * insert into the gap must lock exclusively. */
#ifndef PODDB_POD_POD_H
#define PODDB_POD_POD_H

#include <stdbool.h>
#include <stdint.h>

#include "conf/config.h"
#include "cxl/record.h"
#include "cxl/region.h"
#include "db/types.h"
#include "storage/btree.h"
#include "storage/row.h"
#include "util/err.h"

struct pod_worker;
struct cxl_index;

/* The CXL side of one partition, on every host. */
struct pod_part_cxl {
    struct cxl_index *ix;  /* owner: created; others: opened at first use (atomic) */
    cxl_record *sentinel;  /* the partition's sentinel record (atomic; NULL until known) */
    uint64_t resident;     /* owner: tuples of the partition in CXL memory (atomic) */
    /* owner: the CLOCK hand (the last key looked at), under the move-out lock */
    bool hand_set;
    unsigned char hand[BT_MAX_KEY_WIDTH];
};

/* Reply waits by length: bucket b counts waits of [2^b, 2^(b+1)) us (b 0:
 * below 2 us; the last: that long or longer). The mean hides the tail that
 * makes most of the waiting: about one wait in thirty lasts 0.13-4 ms, when
 * a background thread took the CPU of the waiter or of the owner. Not a
 * struct hist (util/hist.h): several workers count here, with atomics. */
#define POD_WAIT_BUCKETS 24

/* Per-host counters (atomics; sys.stats reports them). */
struct pod_host_stats {
    uint64_t moved_in, moved_out;      /* tuples this host (as owner) moved */
    uint64_t moved_batched;            /* of moved_in: for several keys of one prefetch at once */
    uint64_t msgs_sent, msgs_served;   /* ring messages */
    uint64_t waits, wait_ns;           /* replies waited for, and the time spent */
    uint64_t wait_hist[POD_WAIT_BUCKETS]; /* those waits by length (POD_WAIT_BUCKETS) */
    uint64_t remote_reads, remote_writes; /* operations on other hosts' tuples */
    uint64_t busy_replies, nomem_replies; /* requests the owner could not serve now */
    uint64_t moveout_runs, compactions;
};

/* Attach db to the pod of region r (nhosts > 1): create this host's ring,
 * reply area, cross-host EBR view, the CXL index and sentinel of every
 * partition it owns, and publish them. Call after every table exists and
 * before any worker runs. NULL with err set on failure. */
struct pod_host *pod_host_attach(pod_db *db, struct cxl_region *r, const struct pod_config *c,
                                 pod_err *err);
/* After every worker stopped: drain reclamation, close handles. */
void pod_host_detach(struct pod_host *ph);

/* Serve up to max messages of this host's inbox on worker w's thread.
 * Returns how many were served. Cheap when the inbox is empty. */
int pod_serve(struct pod_worker *w, int max);
/* Between two transactions of w: serve the inbox and, when HWcc use passed
 * the threshold, move tuples out. Returns the messages served. */
int pod_between(struct pod_worker *w);
/* For an idle worker that just served requests (pod_between > 0): keep
 * polling the inbox until POD_IDLE_SPIN_NS passed without a message, before
 * it sleeps again; a remote transaction's next request tends to follow
 * within microseconds, and a sleeping host serves it only at its next poll.
 * Bounded in time, not spins, so that oversubscribed hosts (more hosts than
 * cores) lose little CPU to it. Returns early once *work (the worker's own
 * queue) is non-NULL. */
#define POD_IDLE_SPIN_NS 20000
void pod_idle_spin(struct pod_worker *w, void *const *work);
/* For an idle worker with nothing to do: sleep on this host's inbox doorbell
 * until a message arrives, pod_wake_idle is called, or has_work(arg) (may be
 * NULL) holds when it is about to sleep. The sleep is bounded: by
 * POD_IDLE_SLEEP_NS while every live host shares this kernel (a sender's
 * wake-up reaches us); otherwise, or when move-back steps are due, by the
 * short polling intervals the hosts used before there was a doorbell
 * (POD_IDLE_POLL_NS for the first POD_IDLE_SLOW_AFTER_NS of idleness
 * (idle_ns), POD_IDLE_POLL_SLOW_NS after). */
#define POD_IDLE_SLEEP_NS (200ull * 1000 * 1000)
#define POD_IDLE_POLL_NS (50ull * 1000)
#define POD_IDLE_POLL_SLOW_NS (1000ull * 1000)
#define POD_IDLE_SLOW_AFTER_NS (100ull * 1000 * 1000)
void pod_idle_sleep(struct pod_worker *w, uint64_t idle_ns, bool (*has_work)(void *arg),
                    void *arg);
/* Work for this host's workers arrived by another way than the inbox (a
 * queued call, a benchmark job, shutdown): wake those asleep in
 * pod_idle_sleep. Cheap when none sleeps. */
void pod_wake_idle(struct pod_host *ph);

void pod_host_get_stats(const struct pod_host *ph, struct pod_host_stats *out);
/* The bound (us) below which a fraction q (0..1] of the waits in st ended:
 * the upper end of the bucket that holds that quantile; 0 without waits. */
uint64_t pod_wait_quantile_us(const struct pod_host_stats *st, double q);
/* Waits in st that lasted at least us microseconds (a power of two). */
uint64_t pod_waits_at_least(const struct pod_host_stats *st, uint64_t us);
struct cxl_region *pod_host_region(const struct pod_host *ph);
enum pod_coherence pod_host_coherence(const struct pod_host *ph);

#endif
