/* The workloads' sections of the configuration (src/conf/section.h): the
 * keys `workloads:` may hold, in this order (which is also the order their
 * values enter the config's digest). */
#include "conf/section.h"
#include "workloads/smallbank/conf.h"
#include "workloads/tpcc/conf.h"
#include "workloads/ycsb/conf.h"

const struct conf_section *const pod_workload_sections[] = {
    &tpcc_conf_section,
    &ycsb_conf_section,
    &smallbank_conf_section,
    NULL,
};

_Static_assert(sizeof pod_workload_sections / sizeof pod_workload_sections[0] - 1 <=
                   POD_MAX_SECTIONS,
               "POD_MAX_SECTIONS");
