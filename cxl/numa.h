/* NUMA placement: the region's pages on the node that stands for the CXL
 * device, each host's threads on its CPU list. */
#ifndef PODDB_CXL_NUMA_H
#define PODDB_CXL_NUMA_H

#include "util/err.h"

/* Pin the calling thread to cpus[0..n). n == 0 leaves it unpinned. Fails with
 * a message naming the CPUs the machine (this process) may use. */
int cxl_pin_thread(const int *cpus, int n, pod_err *err);

/* "0-1" style description of the CPUs this process may run on. */
void cxl_describe_cpus(char *buf, int len);

#endif
