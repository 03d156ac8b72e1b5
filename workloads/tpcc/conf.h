/* TPC-C's section of the configuration, `workloads.tpcc`
 * (docs/configuration.md): every server of the pod creates the same tables
 * and procedures at start, and warehouse partition p is owned by host
 * p % hosts. The data shape is fixed by the config; the run knobs are
 * defaults that poddb-bench may override per run. Parsed by the config
 * loader through tpcc_conf_section (src/conf/section.h). */
#ifndef PODDB_WORKLOADS_TPCC_CONF_H
#define PODDB_WORKLOADS_TPCC_CONF_H

#include <stdbool.h>
#include <stdint.h>

#include "conf/config.h"

struct pod_tpcc_conf {
    bool enabled, load_at_start;     /* enabled: the file has the section */
    uint32_t warehouses;             /* one partition each; default: the number of hosts */
    uint32_t items;                  /* default 100000 (the spec) */
    uint32_t customers_per_district; /* default 3000 (the spec); also the initial orders */
    uint32_t remote_new_order_pct;   /* run knob, default 10 */
    uint32_t remote_payment_pct;     /* run knob, default 15 */
    uint32_t range_reads;            /* shape: enum tpcc_range_reads (tpcc.h), default auto */
};

extern const struct conf_section tpcc_conf_section;

/* The section as c parsed it (enabled false, all zero, when c has none). */
const struct pod_tpcc_conf *pod_tpcc_conf(const struct pod_config *c);

#endif
