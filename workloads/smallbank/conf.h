/* SmallBank's section of the configuration, `workloads.smallbank`
 * (docs/configuration.md): every server of the pod creates the same tables
 * and procedures at start, and partition p is owned by host p % hosts. The
 * data shape is fixed by the config; the run knobs are defaults that
 * poddb-bench may override per run. Parsed by the config loader through
 * smallbank_conf_section (src/conf/section.h). */
#ifndef PODDB_WORKLOADS_SMALLBANK_CONF_H
#define PODDB_WORKLOADS_SMALLBANK_CONF_H

#include <stdbool.h>
#include <stdint.h>

#include "conf/config.h"

struct pod_smallbank_conf {
    bool enabled, load_at_start;     /* enabled: the file has the section */
    uint64_t accounts;               /* default 100000 */
    uint32_t partitions;             /* default: the number of hosts */
    uint64_t hot_accounts;           /* run knob: default 4% of the accounts (at least 1) */
    uint32_t hot_pct;                /* run knob, default 90 */
    double theta;                    /* run knob: 0 (default) the hot set, else Zipfian skew */
    uint32_t remote_pct;             /* run knob, default 0 */
};

extern const struct conf_section smallbank_conf_section;

/* The section as c parsed it (enabled false, all zero, when c has none). */
const struct pod_smallbank_conf *pod_smallbank_conf(const struct pod_config *c);

#endif
