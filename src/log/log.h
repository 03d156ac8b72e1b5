/* The durability layer of one host (docs/durability.md): epochs, loggers,
 * the persistent durable epoch, checkpoints and recovery, wired together.
 *
 * Life cycle (the server follows it; tests too):
 *   lh = log_host_open(&opts)      reads the durable-epoch record, scans the log dir
 *   log_host_recover(lh)           replays committed history into the tables
 *   log_host_start(lh, cb, arg)    loggers, epoch thread, checkpointer; db->log = lh
 *   ... workers run transactions (src/log/txlog.h is their side) ...
 *   (workers stopped and idle)
 *   log_host_stop(lh)              final flush and sync, threads joined
 *   log_host_free(lh)
 * With hosts[].loggers = 0 the host still takes part in epochs (its
 * transactions get commit epochs) but logs nothing and persists nothing:
 * log_host_logging() is false and replies need not wait. */
#ifndef PODDB_LOG_LOG_H
#define PODDB_LOG_LOG_H

#include <stdbool.h>
#include <stdint.h>

#include "conf/config.h"
#include "cxl/region.h"
#include "db/types.h"
#include "util/err.h"

struct log_host;

struct log_host_options {
    const struct pod_config *conf;
    int host;
    struct cxl_region *region;
    pod_db *db;
    /* Pod mode (a pod of several hosts, where a transaction may write
     * other hosts' tuples): a record is replayed by the owner of its
     * partition (sent there through the region), the committed end is
     * agreed pod-wide, a dead host freezes the durable epoch, and a host
     * checkpoints only the partitions it owns. The server sets it when the
     * db is attached to a pod (db->pod); false: this host holds every
     * partition and replays its own log. */
    bool pod_mode;
    int epoch_ms;              /* 0: conf->engine.epoch_ms */
    uint64_t checkpoint_after; /* log bytes between checkpoints; 0: never
                                  (conf->engine.checkpoint_after is the server's) */
    const int *cpus;           /* replay threads are pinned like the workers */
    int ncpus;
    /* Start with an empty log directory even though the pod says this host
     * logged before (log/emptylog.h; poddb-server --allow-empty-log). */
    bool allow_empty_log;
};

/* Create the log directory if needed, claim it (log/claim.h: its lock,
 * held until log_host_free, and its identity), read the durable-epoch
 * record, list the segments and checkpoints, and from then on watch the
 * directory (log/dirwatch.h). Fails when another process holds the
 * directory or it belongs to another pod or host, when it holds no log but
 * the pod says this host logged before (log/emptylog.h), on a damaged
 * durable-epoch record, an unreadable directory, or a table whose tuples
 * cannot be logged. */
struct log_host *log_host_open(const struct log_host_options *o, pod_err *err);

/* What recovery did (also printed as it goes). */
struct log_recovery_stats {
    bool ran;                   /* there was history to recover */
    uint64_t durable_epoch;     /* every epoch below it was committed */
    uint64_t checkpoint_epoch;  /* start epoch of the checkpoint used (0: none) */
    uint64_t files, bytes;
    uint64_t records_read, records_applied, records_older, records_discarded;
    uint64_t records_before_checkpoint, records_sent, records_received;
    uint64_t tombstones_removed, rows;
    uint64_t epoch_lo, epoch_hi; /* of the committed records */
    uint64_t torn_tails, corrupt_tails;
    uint64_t patches_lost;      /* updates whose base version was lost (damaged segments) */
    uint64_t truncated_files, salvaged_records;
    double seconds;
};

/* Replay the committed history of the log directory (and, in pod mode, what
 * the other hosts route here) into the db's tables, rebuild their indexes,
 * and cut the logs back to committed history. Nothing happens without
 * history. Before any worker runs. */
int log_host_recover(struct log_host *lh, struct log_recovery_stats *st, pod_err *err);

/* Start logging. on_durable (may be NULL) is called from the epoch thread
 * each time the persisted durable epoch grows. Sets db->log. */
int log_host_start(struct log_host *lh, void (*on_durable)(void *arg, uint64_t persisted),
                   void *arg, pod_err *err);

/* This host logs (hosts[].loggers > 0). */
bool log_host_logging(const struct log_host *lh);
/* Every epoch below this is committed and recorded on this host's disk: a
 * reply of a commit in epoch e may go once e < log_host_persisted(). */
uint64_t log_host_persisted(const struct log_host *lh);
/* n more (n < 0: fewer) replies of this host wait for log_host_persisted()
 * to grow; while some do, the epoch thread polls for it every period / 4
 * (at most 1 ms), otherwise it sleeps longer (epoch.h). */
void log_host_waiters_add(struct log_host *lh, int64_t n);
/* How many wait now. */
int64_t log_host_waiters(const struct log_host *lh);
/* What is known of why the pod's durable epoch does not advance, for the
 * message of a reply that waited too long for it (engine.durable_wait_ms):
 * a host's log directory lost, a host dead, a host whose log lags behind
 * the global epoch or whose heartbeat stopped (a process stopped or hung),
 * this host unable to record the durable epoch. "" when nothing is seen.
 * Any thread; reads the region's words. */
void log_host_why_not_durable(struct log_host *lh, char *buf, size_t len);
/* The global epoch E now. */
uint64_t log_host_epoch(const struct log_host *lh);
/* At shutdown: end the current epoch now instead of at the next tick (E is
 * raised by one), so that the last commits become durable sooner. Returns
 * the epoch that was closed. */
uint64_t log_host_close_epoch(struct log_host *lh);

/* The last checkpoint a host wrote. */
struct checkpoint_summary {
    bool delta;                  /* a delta of the one before, else full */
    uint64_t rows;               /* rows written */
    uint64_t unchanged;          /* a delta's rows left out (in the chain before it) */
    uint64_t deleted;            /* DELETE records of keys deleted since the last one */
    uint64_t bytes;              /* the file's size */
    uint64_t ns, cpu_ns;         /* how long it took; the checkpoint thread's CPU time */
};

struct log_host_stats {
    uint64_t global_epoch, pod_durable_epoch, persisted_epoch;
    uint64_t records, bytes, blocks, syncs, sync_ns, sync_ns_max, segments, write_errors;
    uint64_t direct_segments; /* of segments: written with O_DIRECT */
    uint64_t checkpoints, checkpoint_epoch, segments_removed;
    uint64_t checkpoint_deltas; /* deltas after the last full checkpoint (recovery's chain) */
    uint64_t checkpoint_failures;
    bool checkpoint_running;    /* one is being written or was asked for */
    struct checkpoint_summary last_checkpoint; /* valid when checkpoints > 0 */
    uint64_t persisted_by_file, persisted_by_marks, persisted_empty; /* log_epochs_persist_counts */
    bool dir_lost;              /* this host's log directory was lost (log/dirwatch.h) */
    char dir_lost_why[512];     /* what was found then */
    int dir_lost_host;          /* the lowest host of the pod whose log directory was lost (-1) */
};
void log_host_get_stats(const struct log_host *lh, struct log_host_stats *out);

/* Ask for a checkpoint now, besides the ones the log's growth brings (a full
 * one with full); it starts once the one being written, if any, is done, so
 * its start epoch is at least the epoch of the call. *done_at: the count of
 * checkpoints (log_host_stats.checkpoints) once it is written; a failure
 * counts in checkpoint_failures instead. -1 (err) when logging or checkpoints
 * are off. */
int log_host_request_checkpoint(struct log_host *lh, bool full, uint64_t *done_at, pod_err *err);

/* Workers are stopped: flush, sync, publish, join every thread. */
void log_host_stop(struct log_host *lh);
void log_host_free(struct log_host *lh);

#endif
