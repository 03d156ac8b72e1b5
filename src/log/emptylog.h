/* An empty log directory at start (docs/durability.md, "An empty log
 * directory").
 *
 * A host whose log directory holds nothing (no segment, no checkpoint, no
 * durable-epoch record) starts with empty tables. That is right for a host
 * that never logged, and wrong for one whose log was removed or replaced:
 * it would serve without everything it logged, silently. So before it
 * starts empty, a host looks for evidence that it logged in this pod
 * before:
 *   - the region, when it outlived the host (another host kept it): the
 *     host's slot says its log directory was lost while it ran
 *     (log/dirwatch.h), its loggers' words say they wrote records, or
 *     another host's slot lists it among the hosts that logged;
 *   - the other hosts' log directories, where this machine can read them
 *     (the config names each; the directory must be trusted and its
 *     identity name this pod's region and that host): a durable-epoch record
 *     lists the hosts that logged in the pod (log/durable_file.h).
 * With evidence the start is refused with a message saying what is
 * missing, what says the pod had it and how to go on; allow (poddb-server
 * --allow-empty-log) starts anyway, with a warning. A new pod, a host that
 * never logged, and a pod whose every log directory was removed (with its
 * region) start as before. */
#ifndef PODDB_LOG_EMPTYLOG_H
#define PODDB_LOG_EMPTYLOG_H

#include <stdbool.h>
#include <stdint.h>

#include "conf/config.h"
#include "cxl/region.h"
#include "util/err.h"

/* What the region says of host `host`'s past lives, read before the host
 * resets its words in it (log_host_open). */
struct emptylog_region {
    bool kept;          /* the region was not formatted by this start */
    bool dir_lost;      /* the host's log directory was lost while it ran */
    uint64_t written;   /* the largest epoch of a record its loggers wrote (0: none) */
    int listed_by;      /* a host whose slot lists it among the hosts that logged (-1: none) */
};
void emptylog_region_look(const struct cxl_region *r, const struct pod_config *c, int host,
                          struct emptylog_region *out);

/* Host `host`'s log directory is empty: 0 when it may start so (no
 * evidence, or allow; *evidence tells which), -1 with err saying why not. */
int emptylog_check(const struct pod_config *c, int host, const struct emptylog_region *rg,
                   bool allow, bool *evidence, pod_err *err);

/* Refuse the start of host `host` with an empty log directory for the
 * evidence printed before (what to do goes to the log, a summary to err).
 * Also for the evidence met at recovery (log/route.h). */
void emptylog_refuse(const struct pod_config *c, int host, pod_err *err);

#endif
