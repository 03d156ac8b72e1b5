/* Epochs (Tigon §3.5, SiloR): the global epoch E and the pod durable epoch.
 *
 * E lives in the control block (HWcc). Every host runs one epoch thread; only
 * the lowest live host id advances E, by one every epoch_ms, so when that host
 * goes away the next one takes over within a liveness check (100 ms).
 *
 * The same thread computes the pod durable epoch D: the minimum over the
 * loggers of every host that logs of their published durable epoch
 * (ctl->logger[h][l].durable; a logger publishes d when every record of an epoch
 * below d is on disk). Hosts whose slot is free are skipped; a dead host is
 * skipped too, except in pod mode (cross-host transactions), where it freezes
 * D: its unsynced records may be needed by another host's transaction, and the
 * pod must restart as a whole. So does a host whose log directory was lost
 * (its slot's log_dir_lost, log/dirwatch.h), even once it has stopped.
 * D goes into ctl->pod_durable_epoch (atomic max)
 * and, on a host that logs, into its durable-epoch file (durable_file.h)
 * before anyone is told: a reply may go out only once its epoch is below the
 * persisted value, so that recovery never discards an acknowledged
 * transaction. */
#ifndef PODDB_LOG_EPOCH_H
#define PODDB_LOG_EPOCH_H

#include <stdbool.h>
#include <stdint.h>

#include "conf/config.h"
#include "cxl/region.h"
#include "log/dirwatch.h"
#include "log/durable_file.h"
#include "util/err.h"

struct log_epochs;

struct log_epoch_options {
    struct cxl_region *region;
    const struct pod_config *conf;
    int host;
    int epoch_ms;               /* 0: conf->engine.epoch_ms */
    bool pod_mode;              /* a dead host freezes the pod durable epoch */
    uint64_t start_epoch;       /* E is raised to at least this before the thread starts */
    struct durable_file *durable; /* NULL: this host does not log (persists nothing) */
    /* Called from the epoch thread after a new value was persisted. */
    void (*on_durable)(void *arg, uint64_t persisted);
    /* Called from the epoch thread when it sees E grow (may be NULL): the
     * loggers wait for it instead of polling E. */
    void (*on_epoch)(void *epoch_arg);
    /* True when a logger of this host has only idle workers (may be NULL):
     * no worker's commit will wake it when E grows, so the thread watches E
     * closely for it (log_epochs_watch). */
    bool (*needs_watch)(void *epoch_arg);
    /* How many replies of this host wait for the persisted durable epoch
     * (atomic; may be NULL): while some do, the thread polls (below). */
    const int64_t *waiters;
    void *arg, *epoch_arg;
    /* The log directory's watch (NULL when the host does not log): nothing
     * is persisted once it is lost, the durable-epoch file is checked
     * after each write, and the whole directory once a second. */
    struct logdir_watch *watch;
};

struct log_epochs *log_epochs_start(const struct log_epoch_options *o, pod_err *err);
/* Stop and join the thread (does not close the durable file). */
void log_epochs_stop(struct log_epochs *le);

/* Every epoch below this is committed and recorded, in this host's
 * durable-epoch file or by every logger's marks (UINT64_MAX on a host that
 * does not log). */
uint64_t log_epochs_persisted(const struct log_epochs *le);
/* How often the persisted epoch grew through the durable-epoch file,
 * through the loggers' marks alone, and over epochs in which no logger of the
 * pod wrote a record (nothing to record: an idle pod does no I/O). */
void log_epochs_persist_counts(const struct log_epochs *le, uint64_t *by_file, uint64_t *by_marks,
                               uint64_t *empty);
/* Wake the thread now (a local logger published progress). */
void log_epochs_nudge(struct log_epochs *le);
/* When the thread polls: every period / 4 (at most 1 ms) while *waiters >
 * 0 (replies held for durability: a reply must not wait for the next epoch
 * to learn that another host's log caught up) or while needs_watch says so.
 * Otherwise it wakes for its tick (every epoch_ms) and its own loggers'
 * nudges only: a busy host's loggers learn of E from their workers' first
 * commits in it, and each wake-up of the thread preempts a worker where the
 * threads share the workers' cores (docs/performance.md, "The log").
 * Whoever raises *waiters from 0 nudges the thread (log_host_waiters_add),
 * and a worker that goes idle calls this: it wakes the thread unless it
 * polls already, so that needs_watch is asked again now rather than at the
 * end of a longer sleep. */
void log_epochs_watch(struct log_epochs *le);

/* A quiet pod: no host holds replies for durability and no logger wrote a
 * record in the last epochs. Then every epoch thread (all hosts on one
 * kernel) sleeps on a futex word of its host slot, up to a second at a time,
 * and E stays where it is: nobody needs it to move, and an idle pod takes no
 * CPU. Whoever needs E again wakes them: a host whose replies start to wait
 * (log_host_waiters_add), a logger that wrote records, a checkpoint that
 * waits for an epoch. Cheap when no thread is quiet. */
void log_epochs_wake_quiet(struct cxl_region *r, const struct pod_config *c);

/* The hosts that logged (the durable-epoch file's record, durable_file.h):
 * the thread adds every host of the pod whose loggers wrote a record, and
 * publishes the record in its slot (log_hosts). A host that wrote records
 * persists nothing until every other running host that logs lists it
 * there: from then on an empty log directory of it at a start is refused
 * (log/emptylog.h). */

/* The pod durable epoch as computed now from the control block (0 while a
 * dead host, or one whose log directory was lost, freezes it in pod mode).
 * For the thread and for tests. */
uint64_t log_pod_durable_now(struct cxl_region *r, const struct pod_config *c, bool pod_mode);

/* Raise ctl word *w to at least v (atomic max). */
static inline void log_atomic_max(uint64_t *w, uint64_t v)
{
    uint64_t cur = __atomic_load_n(w, __ATOMIC_ACQUIRE);
    while (cur < v &&
           !__atomic_compare_exchange_n(w, &cur, v, true, __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE)) {
    }
}

#endif
