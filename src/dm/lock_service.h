/* Lotus's lock requests between compute nodes (docs/dm.md, "Lotus's lock
 * service"): each compute node keeps the lock table of the shards it owns
 * (dm/lock_table.h) and answers the others' requests for them over the
 * fabric (fabric.h, messages); its own transactions use the table directly.
 *
 * A request carries up to LK_BATCH locks of one transaction to one owner
 * (Lotus batches a transaction's requests per owner), and the address its
 * reply goes to, so the service learns its clients from their requests.
 * Acquires are answered; releases are not (Lotus does not wait for them).
 * Both are idempotent at the table (a holder's lock taken or given back
 * twice changes nothing), so a request repeated or answered late does no
 * harm: a client that gave up on an acquire releases what it asked for.
 *
 * Thread safety: a service runs on its own thread (lock_service_start)
 * beside the callers of lock_service_table's table; a client is one
 * thread's. */
#ifndef PODDB_DM_LOCK_SERVICE_H
#define PODDB_DM_LOCK_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dm/lock_table.h"
#include "util/err.h"

#define LK_BATCH 64u /* locks in one request */

struct lock_service;
struct lock_client;

struct lock_service_opts {
    const char *provider;   /* the fabric's, as the memory nodes' */
    size_t table_bytes;     /* the lock table's slots (lock_table_new) */
    int reply_timeout_ms;   /* a reply's send, bounded: a client that died; 0: 1000 */
};

/* This compute node's lock table and the thread that answers requests for
 * it. NULL with err. */
struct lock_service *lock_service_start(const struct lock_service_opts *o, pod_err *err);
void lock_service_stop(struct lock_service *s);
struct lock_table *lock_service_table(struct lock_service *s);
/* The address clients send to (lock_client_owner). */
int lock_service_name(struct lock_service *s, void *buf, size_t *len, pod_err *err);

struct lock_service_stats {
    uint64_t acquires, releases; /* requests served */
    uint64_t locks;              /* locks asked for in them */
    uint64_t bad;                /* messages that were no request */
    uint64_t unanswered;         /* acquires whose reply could not be sent */
};
void lock_service_stats(struct lock_service *s, struct lock_service_stats *out);

/* A worker's endpoint for requests: cn is its compute node's slot, lane its
 * number there (the pair names its reply address at the services). */
struct lock_client *lock_client_new(const char *provider, uint32_t cn, uint32_t lane,
                                    int timeout_ms, pod_err *err);
void lock_client_free(struct lock_client *c);
/* The service of compute node `owner` is at this address (again when it
 * restarted: the new address replaces the old). */
int lock_client_owner(struct lock_client *c, uint32_t owner, const void *name, size_t len,
                      pod_err *err);
bool lock_client_knows(const struct lock_client *c, uint32_t owner);
/* Forget owner's address (it did not answer: it is to be looked up again). */
void lock_client_forget(struct lock_client *c, uint32_t owner);
/* Under the NIC model (dm/nic_model.h): an answered request takes at least
 * rtt_ns, a round trip of the modelled NIC (the fabric's messages are the
 * machine's own otherwise); 0: off. */
void lock_client_model_rtt(struct lock_client *c, uint64_t rtt_ns);

/* Take n (<= LK_BATCH) locks of holder at owner, hash[i] a write lock when
 * bit i of write_mask is set, in order, stopping at the first refused.
 * 0: *granted == n; 1: the first *granted were taken and the next was
 * refused with *why; -1 with err: no answer (timeout: is the owner
 * alive?) or a broken one. On 1 and -1 the caller releases what it asked
 * for (lock_client_release), which is harmless for the locks not taken. */
int lock_client_acquire(struct lock_client *c, uint32_t owner, uint64_t holder,
                        const uint64_t *hash, uint64_t write_mask, uint32_t n, uint32_t *granted,
                        enum lt_result *why, pod_err *err);
/* Give back n (<= LK_BATCH) locks of holder at owner; not waited for. */
int lock_client_release(struct lock_client *c, uint32_t owner, uint64_t holder,
                        const uint64_t *hash, uint32_t n, pod_err *err);
/* Give back, at owner, every lock of this client's compute node (what a
 * compute node that restarted asks of the others: its previous run's
 * locks), waited for: 0 with *released the count, or -1 with err. */
int lock_client_release_cn(struct lock_client *c, uint32_t owner, size_t *released, pod_err *err);

#endif
