/* Private to cxl/: what a region handle holds beyond cxl/region.h. */
#ifndef PODDB_CXL_REGION_PRIV_H
#define PODDB_CXL_REGION_PRIV_H

#include <libpmem2.h>
#include <pthread.h>

#include "cxl/region.h"

/* What a file's superblock page and control block are read into before it
 * is mapped (backing.c): enough to tell what it is and whether its hosts
 * live without resizing it. */
#define CXL_HEAD_SIZE (CXL_CONTROL_OFF + sizeof(struct cxl_control))

/* What a backing holds, by its first page. */
enum cxl_identity {
    CXL_ID_EMPTY,   /* a zero-length file, or a device whose first page is zero */
    CXL_ID_PODDB,   /* starts with CXL_MAGIC (formatted, or a format began) */
    CXL_ID_FOREIGN, /* anything else: someone's data */
};

struct cxl_region_priv {
    int fd;
    enum pod_region_kind kind;
    char *head;                  /* files: CXL_HEAD_SIZE bytes as read before mapping */
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

/* backing.c */
/* Open the backing; with create, a missing file is created (mode 0600),
 * unless its file system lacks room for it (cxl_backing_check_room), and
 * *created says so. */
int cxl_backing_open(const struct pod_config *c, bool create, bool *created, pod_err *err);
/* Refuse (or with region.allow_overcommit, warn about) a region file whose
 * file system's free space plus what the file holds is less than
 * region.size. Devices are not checked. */
int cxl_backing_check_room(int fd, const struct pod_config *c, pod_err *err);
/* The path still names the file open at fd (nobody removed or replaced it). */
bool cxl_backing_same_file(int fd, const char *path);
/* flock with a bounded wait (PODDB_ATTACH_TIMEOUT_MS). */
int cxl_backing_lock(int fd, int how, const char *path, pod_err *err);
/* What a backing of size bytes (files) whose first page is page holds. */
enum cxl_identity cxl_identify(const void *page, uint64_t size, bool device);
/* The error for a foreign backing; returns -1. */
int cxl_refuse_foreign(const char *path, uint64_t size, bool device, pod_err *err);
/* A file's first CXL_HEAD_SIZE bytes (zeros past its end) and its size. */
int cxl_backing_read_head(int fd, void *buf, uint64_t *size, const char *path, pod_err *err);
/* Write the magic (state FORMATTING) into an empty file before it is sized. */
int cxl_backing_stamp(int fd, const char *path, pod_err *err);
/* Give a file the config's size (devices keep theirs). */
int cxl_backing_size(int fd, const struct pod_config *c, pod_err *err);

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
/* A node this machine lacks is refused (before anything is created). */
int cxl_numa_check(int node, pod_err *err);
int cxl_numa_bind(void *addr, size_t len, int node, enum pod_region_kind kind, pod_err *err);

/* region.c */
void cxl_zero_range(struct cxl_region *r, uint64_t off, uint64_t len);

#endif
