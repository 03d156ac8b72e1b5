/* Private to cxl/: what a region handle holds beyond cxl/region.h. */
#ifndef PODDB_CXL_REGION_PRIV_H
#define PODDB_CXL_REGION_PRIV_H

#include <libpmem2.h>
#include <pthread.h>

#include "cxl/region.h"

struct cxl_region_priv {
    int fd;
    enum pod_region_kind kind;
    struct pmem2_config *cfg;
    struct pmem2_source *src;
    struct pmem2_vm_reservation *rsv;
    struct pmem2_map *map;
    pmem2_memset_fn memset_fn;
    int arena_id[2];             /* mimalloc arena of this host's HWcc/SWcc slice */
    bool arenas_ready;
    pthread_t heartbeat_thread;
    bool heartbeat_running;
    int heartbeat_stop;          /* atomic */
    char boot_id[40];
};

/* alloc.c */
int cxl_alloc_attach(struct cxl_region *r, pod_err *err);
void cxl_alloc_detach(struct cxl_region *r);

/* hosts.c */
int cxl_host_register(struct cxl_region *r, int host, pod_err *err);
void cxl_host_unregister(struct cxl_region *r);
int cxl_heartbeat_start(struct cxl_region *r, pod_err *err);
void cxl_heartbeat_stop(struct cxl_region *r);
void cxl_read_boot_id(char out[40]);
uint64_t cxl_now_realtime_ns(void);

/* numa.c */
int cxl_numa_bind(void *addr, size_t len, int node, enum pod_region_kind kind, pod_err *err);

/* region.c */
void cxl_zero_range(struct cxl_region *r, uint64_t off, uint64_t len);

#endif
