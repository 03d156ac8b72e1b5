/* A model of an RDMA NIC for the disaggregated-memory mode (docs/dm.md, "The
 * NIC model"). This machine has no RNIC: its providers (shm, tcp;ofi_rxm on
 * loopback) cost CPU time instead, and some of their costs are the wrong
 * way round (on shm a CAS is cheaper than a READ). With the model on, a
 * batch of one-sided operations to one memory node completes no earlier
 * than a real NIC would let it:
 *
 *   arrive = posted + rtt / 2
 *   end_c  = max(arrive, next_free_c) + cost_c   for each class c the batch uses
 *   done   = max(arrive, max_c end_c) + rtt / 2
 *
 * where the classes are the memory node's NIC's caps: atomics (CAS and FAA,
 * cost n / atomic_mops), READ and WRITE operations (n / rw_mops) and their
 * payload bytes (bytes / gbps). next_free_c is the end of the last
 * reservation of class c on that memory node, by any compute node: it is
 * kept in a small shared file in /dev/shm named after the pod and the
 * memory node, so the compute nodes of one machine share each memory
 * node's caps as they would share its NIC. The model never makes anything
 * faster: a batch that took longer on this machine is not waited for again.
 *
 * Thread safety: a struct nic_model is used under its caller's lock (the
 * dm store's endpoint lock); the shared schedules are updated with atomics. */
#ifndef PODDB_DM_NIC_MODEL_H
#define PODDB_DM_NIC_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "util/err.h"

struct nic_model_params {
    double rtt_us;      /* a round trip, >= 0 */
    double atomic_mops; /* CAS + FAA a memory node's NIC serves, millions per second, > 0 */
    double rw_mops;     /* READ + WRITE operations, millions per second, > 0 */
    double gbps;        /* READ + WRITE payload, gigabits per second, > 0 */
};

/* What one batch asks of a memory node's NIC. */
struct nic_batch {
    uint32_t atomics; /* CAS and FAA */
    uint32_t rw;      /* READ and WRITE */
    uint64_t bytes;   /* their payload */
};

struct nic_model;

/* A model with these parameters and no memory node yet. NULL with err when a
 * parameter is out of range. */
struct nic_model *nic_model_new(const struct nic_model_params *p, pod_err *err);
void nic_model_free(struct nic_model *m);

/* Memory node `node` (0..15, the index batches name) is the one that serves
 * `memnode` (its bootstrap socket) for pod: its schedule is the shared file
 * /dev/shm/poddb-nic1-POD-HASH, HASH a hash of memnode, created (0600) by
 * the first compute node. With pod NULL the schedule is this model's own
 * (not shared: for tests). 0, or -1 with err. */
int nic_model_attach(struct nic_model *m, int node, const char *pod, const char *memnode,
                     pod_err *err);

/* The path of the shared schedule of (pod, memnode), into buf. */
void nic_model_schedule_path(const char *pod, const char *memnode, char *buf, unsigned len);

/* Reserve what batch b asks of memory node `node`, posted at posted_ns
 * (pod_mono_ns), and return when it completes under the model. A node not
 * attached has no caps (the round trip only); no model (NULL) adds nothing:
 * posted_ns. */
uint64_t nic_model_done_at(struct nic_model *m, int node, const struct nic_batch *b,
                           uint64_t posted_ns);

/* Wait until pod_mono_ns() >= t: spinning on the clock, sleeping only for
 * the part of a long wait that lies beyond the last 100 us. Returns the
 * nanoseconds waited (0 when t had passed). */
uint64_t nic_model_wait_until(uint64_t t);

#endif
