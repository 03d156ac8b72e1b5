#include "cxl/numa.h"

#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "cxl/region_priv.h"
#include "util/log.h"

static int g_single_node_said; /* "one node" is said once per process */

int cxl_numa_check(int node, pod_err *err)
{
    if (node < 0 || numa_available() < 0) return 0;
    int maxnode = numa_max_node();
    if (node <= maxnode) return 0;
    if (maxnode == 0)
        pod_err_set(err, "region.numa_node is %d but this machine has NUMA node 0 only", node);
    else
        pod_err_set(err, "region.numa_node is %d but this machine has NUMA nodes 0-%d", node,
                    maxnode);
    return -1;
}

int cxl_numa_bind(void *addr, size_t len, int node, enum pod_region_kind kind, pod_err *err)
{
    if (node < 0) return 0;
    if (numa_available() < 0) {
        if (!__atomic_exchange_n(&g_single_node_said, 1, __ATOMIC_RELAXED))
            pod_warn("region.numa_node is %d but this kernel has no NUMA support; the region "
                     "is not bound", node);
        return 0;
    }
    if (cxl_numa_check(node, err)) return -1;
    int maxnode = numa_max_node();
    if (kind == POD_REGION_DEVDAX) {
        /* Device memory is where the device is; a policy cannot move it. */
        pod_info("region is a devdax device: numa_node %d is informational", node);
        return 0;
    }
    if (maxnode == 0 && !__atomic_exchange_n(&g_single_node_said, 1, __ATOMIC_RELAXED))
        pod_info("this machine has one NUMA node: binding the region to node 0 changes "
                 "nothing here (functional emulation only, see docs/emulation.md)");
    struct bitmask *mask = numa_allocate_nodemask();
    numa_bitmask_setbit(mask, (unsigned)node);
    /* On a shared tmpfs mapping the policy is stored with the file, so it
     * holds for the pages whichever host touches them first. */
    long rc = mbind(addr, len, MPOL_BIND, mask->maskp, mask->size + 1, 0);
    int e = errno;
    numa_free_nodemask(mask);
    if (rc != 0) {
        pod_err_set(err, "cannot bind the region to NUMA node %d: %s", node, strerror(e));
        return -1;
    }
    return 0;
}

void cxl_describe_cpus(char *buf, int len)
{
    cpu_set_t set;
    buf[0] = 0;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return;
    int n = 0, first = -1;
    for (int c = 0; c <= CPU_SETSIZE; c++) {
        bool in = c < CPU_SETSIZE && CPU_ISSET(c, &set);
        if (in && first < 0) first = c;
        if (!in && first >= 0) {
            n += snprintf(buf + n, (size_t)(len - n > 0 ? len - n : 0), "%s%d", n ? "," : "",
                          first);
            if (c - 1 > first)
                n += snprintf(buf + n, (size_t)(len - n > 0 ? len - n : 0), "-%d", c - 1);
            first = -1;
        }
    }
}

int cxl_pin_thread(const int *cpus, int n, pod_err *err)
{
    if (n <= 0) return 0;
    cpu_set_t allowed, want;
    CPU_ZERO(&want);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) CPU_ZERO(&allowed);
    for (int i = 0; i < n; i++) {
        if (cpus[i] < 0 || cpus[i] >= CPU_SETSIZE || !CPU_ISSET(cpus[i], &allowed)) {
            char have[256];
            cxl_describe_cpus(have, sizeof have);
            pod_err_set(err, "CPU %d is not available: this machine (process) has CPUs %s",
                        cpus[i], have);
            return -1;
        }
        CPU_SET(cpus[i], &want);
    }
    int rc = pthread_setaffinity_np(pthread_self(), sizeof want, &want);
    if (rc) {
        pod_err_set(err, "cannot pin thread: %s", strerror(rc));
        return -1;
    }
    return 0;
}
