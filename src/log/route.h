/* Pod-mode recovery: the hosts agree on the committed end of the history and
 * send each logged record to the host that owns its tuple, through the
 * region (Tigon §3.5: records are moved to CXL memory and divided among the
 * workers). Used when log_host_options.pod_mode is set (a multi-host pod).
 *
 * Each host allocates an exchange block in its HWcc slice and publishes it at
 * root slot CXL_ROOT_RECOVERY: its phase, its recorded durable epoch, and per
 * destination host the offset and length of a staging area in its own SWcc
 * slice. The staged bytes are logrec_entry records (recbuf.h), written back
 * (cxl_swcc_writeback) before the phase that announces them is stored, and
 * flushed (cxl_swcc_flush) by the reader before it reads them. Phases are
 * barriers over all hosts of the pod; every wait is bounded and reports which
 * hosts it is waiting for. */
#ifndef PODDB_LOG_ROUTE_H
#define PODDB_LOG_ROUTE_H

#include <stdbool.h>
#include <stdint.h>

#include "log/recbuf.h"
#include "util/err.h"

struct log_host;
struct route;

/* What a host's log directory says about the committed end of the history
 * (docs/durability.md, "Marks"). */
struct log_durable_view {
    uint64_t recorded;   /* its durable-epoch record (0: none) */
    uint64_t marked;     /* the smallest of its loggers' last marks (0: a logger has none;
                            UINT64_MAX: the host has no segment, so none of its records can
                            be missing below any epoch) */
    uint64_t marked_max; /* the largest of its loggers' last marks */
    uint32_t hosts;      /* the hosts its durable-epoch record lists as having logged */
};

/* Of the views of every host of a pod (one in a single-host pod): *end, the
 * committed end (every record is durable below the largest record, and
 * below the smallest mark when every host has marks), and *start, the epoch
 * the next life starts at: at least every mark, so that no mark left by this
 * life can later speak for the next one. */
void log_durable_combine(const struct log_durable_view *v, int n, uint64_t *end, uint64_t *start);

/* Publish this host's view and whether it has a log history, and wait for
 * every host to do the same; *pod_durable and *pod_start as
 * log_durable_combine of every host's view, and the hosts that logged (every
 * view's, and each host with history) added to lh->logged_hosts. A host without history that
 * sees no host with history recovering takes no part: NULL with *skipped
 * (not an error), and it may serve at once
 * (a host with history that arrives later finds it and refuses to start, as
 * it does when another host already finished). timeout_ms 0: wait forever
 * (with a message every 5 s). */
struct route *route_begin(struct log_host *lh, const struct log_durable_view *local, bool history,
                          int timeout_ms, uint64_t *pod_durable, uint64_t *pod_start,
                          bool *skipped, pod_err *err);
/* Stage out[h] for every other host h, and wait until every host staged. */
int route_send(struct route *rt, const struct logrec_list out[], pod_err *err);
/* Deliver every record the other hosts staged for this host. deliver returns
 * false to fail (out of memory). Then wait until every host has received. */
int route_receive(struct route *rt, bool (*deliver)(void *ctx, const struct logrec_entry *e),
                  void *ctx, pod_err *err);
/* Free the staging areas (after route_receive, or after a failure). */
void route_end(struct route *rt);

#endif
