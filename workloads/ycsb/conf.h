/* YCSB's section of the configuration, `workloads.ycsb`
 * (docs/configuration.md): every server of the pod creates the same table
 * and procedures at start, and partition p is owned by host p % hosts. The
 * data shape is fixed by the config; the run knobs are defaults that
 * poddb-bench may override per run. Parsed by the config loader through
 * ycsb_conf_section (src/conf/section.h). */
#ifndef PODDB_WORKLOADS_YCSB_CONF_H
#define PODDB_WORKLOADS_YCSB_CONF_H

#include <stdbool.h>
#include <stdint.h>

#include "conf/config.h"

struct pod_ycsb_conf {
    bool enabled, load_at_start;     /* enabled: the file has the section */
    uint64_t tuples;                 /* default 1000000 */
    uint32_t partitions;             /* default: the number of hosts */
    uint32_t read_pct;               /* run knob, default 50 */
    double theta;                    /* run knob: Zipfian skew in [0, 1), default 0.99 */
    uint32_t multi_partition_pct;    /* run knob, default 10 */
    bool scramble;                   /* run knob, default false */
};

extern const struct conf_section ycsb_conf_section;

/* The section as c parsed it (enabled false, all zero, when c has none). */
const struct pod_ycsb_conf *pod_ycsb_conf(const struct pod_config *c);

#endif
