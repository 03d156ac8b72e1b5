/* Internals of the durability layer shared by log.c, recovery.c,
 * checkpoint.c and route.c. Not for other modules. */
#ifndef PODDB_LOG_LOG_PRIV_H
#define PODDB_LOG_LOG_PRIV_H

#include <pthread.h>

#include "log/claim.h"
#include "log/dirwatch.h"
#include "log/durable_file.h"
#include "log/epoch.h"
#include "log/log.h"
#include "log/logdir.h"
#include "log/logger.h"

struct checkpointer;

/* Keys of this host's rows whose committed delete took them out of their
 * index since the last checkpoint took the list (checkpoint.c): a delta
 * checkpoint cannot see them in the tree, so it writes them as DELETE
 * records. Entries: table id (4 bytes), epoch-version (8), key. */
struct log_deleted {
    pthread_mutex_t mu;
    bool on;      /* a checkpointer runs: keep the list */
    bool lost;    /* an entry could not be kept (out of memory) */
    unsigned char *buf;
    size_t len, cap;
};

struct log_host {
    struct log_host_options o;
    char dir[POD_PATH_MAX];
    bool logging;               /* hosts[host].loggers > 0 */
    int nloggers;
    int nworkers;               /* db workers + the admin worker */
    struct log_worker *workers; /* [nworkers], cache-line aligned */
    struct logger *loggers[POD_MAX_LOGGERS];
    pthread_mutex_t loggers_mu; /* loggers[] against the epoch thread's wake-ups */
    struct log_epochs *epochs;
    int64_t *waiters;           /* atomic, in the host's slot of the region: log_host_waiters_add */
    struct logdir_claim *claim; /* the directory's lock and identity (logging hosts) */
    struct logdir_watch *watch; /* the directory watched (logging hosts) */
    uint32_t logged_hosts;      /* hosts known to have logged: added to the durable-epoch record */
    bool lost_history;          /* its log is empty, but the pod says it logged (--allow-empty-log) */
    bool words_reset;           /* its words in the region are this life's (log.c, reset_words) */
    struct durable_file *durable;
    struct durable_record drec; /* as read at open */
    struct logdir listing;      /* as found at open (recovery's input) */
    struct checkpointer *ckpt;
    struct log_deleted deleted;
    uint64_t *epoch_word;       /* ctl->global_epoch */
    uint64_t *delete_hwm;       /* ctl->delete_ev_hwm */
    uint64_t start_epoch;       /* E is raised to this at start (recovery sets it) */
    uint64_t next_seq[POD_MAX_LOGGERS]; /* next segment number per logger id */
    uint64_t next_ckpt_seq;
    uint64_t ckpt_epoch;        /* start epoch of the valid checkpoint (0: none) */
    void (*on_durable)(void *arg, uint64_t persisted);
    void *on_durable_arg;
    bool started;
};

/* Log directory bookkeeping after a segment was written (recovery's salvage). */
static inline uint64_t log_take_seq(struct log_host *lh, uint32_t logger)
{
    return logger < POD_MAX_LOGGERS ? lh->next_seq[logger]++ : 0;
}

/* The host owning table t's partition of key (pod mode), else this host. */
int log_owner_of(const struct log_host *lh, const pod_table *t, const void *key);

/* checkpoint.c */
struct checkpointer *checkpointer_start(struct log_host *lh, pod_err *err);
void checkpointer_stop(struct checkpointer *c);
/* Ask for a checkpoint now (a full one with full), after the one being
 * written if any; returns the count of checkpoints written once it is. */
uint64_t checkpointer_request(struct checkpointer *c, bool full);
/* The checkpoint fields of a log_host_stats. */
void checkpointer_stats(struct checkpointer *c, struct log_host_stats *out);
/* The checkpointer's choice of kind: may the next checkpoint be a delta,
 * given the sizes in bytes of the chain's full checkpoint (base), of the
 * deltas after it (chain: ndeltas of them), of the last delta (last: 0
 * after a full one), and of the live data (live: a full checkpoint now)? */
bool checkpoint_policy_delta(uint64_t base, uint64_t chain, uint64_t last, uint64_t live,
                             uint64_t ndeltas);
/* Add a deleted key to lh->deleted (sets lost when out of memory). */
void log_deleted_note(struct log_deleted *d, const pod_table *t, const void *key, uint64_t ev);
/* Remove segments every record of which is older than the checkpoint
 * horizon, and older checkpoints (also used at startup). */
void log_remove_obsolete(struct log_host *lh, uint64_t horizon, uint64_t *removed);
/* That horizon: this host's checkpoint epoch, in pod mode the smallest of all hosts'. */
uint64_t log_checkpoint_horizon(const struct log_host *lh);

#endif
