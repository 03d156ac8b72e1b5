/* A memory node's pool and its bootstrap protocol: the layout shared by
 * poddb-memnode (which writes the header once, before any client comes) and
 * the dm record store (src/store/dm_store.c), which does everything else
 * with one-sided operations. docs/dm.md has the same byte by byte. A pod
 * has 1..DM_MAX_MEMNODES memory nodes, each with a pool of this layout;
 * the compute nodes number them in the order of their configuration.
 *
 *   0 .. 4095        header (struct dm_pool_header; from 2048 the compute-node slots)
 *   4096 .. 69631    catalog: DM_MAX_TABLES (1024) entries of 64 bytes, entry i for table id i
 *   131072 ..        allocated by FAA on the header's cursor: hash indexes, overflow
 *                    buckets and records
 *
 * A pod with r backups (dm.replicas) splits every pool into r + 1 areas of
 * the same bytes: area 0 is laid out as above and holds the memory node's
 * own records; area j (1..r) is a copy of area 0 of memory node i - j (mod
 * the count), kept by the compute nodes, which write every change to it
 * too (docs/dm.md, "Replication").
 *
 * All integers are little-endian (the byte order of the nodes; the pool is
 * never moved between machines of another order). */
#ifndef PODDB_DM_POOL_H
#define PODDB_DM_POOL_H

#include <stdint.h>

#include "dm/fabric.h"

#define DM_POOL_MAGIC 0x314c4f4f504d4450ull /* "PDMPOOL1" */
#define DM_LAYOUT_VERSION 8u
#define DM_POD_NAME_MAX 64
#define DM_MAX_TABLES 1024u
#define DM_HEADER_BYTES 4096u
#define DM_CATALOG_OFF 4096u
#define DM_CATALOG_ENTRY 64u
#define DM_DATA_START 131072u
#define DM_POOL_MIN (1ull << 20)
#define DM_POOL_MAX (1ull << 40) /* a location holds 40 bits of offset */
#define DM_MAX_MEMNODES 16u

struct dm_pool_header {
    uint64_t magic;           /*  0: DM_POOL_MAGIC */
    uint32_t version;         /*  8: DM_LAYOUT_VERSION */
    uint32_t header_bytes;    /* 12: DM_HEADER_BYTES */
    uint64_t pool_size;       /* 16: bytes */
    uint64_t cursor;          /* 24: next free byte (FAA); may pass pool_size when full */
    char pod[DM_POD_NAME_MAX];/* 32: the pod's name, NUL-padded */
    uint64_t membership;      /* 96: 0 until the first compute node claims the pool
                                 (CAS 0 -> DM_MEMBERSHIP(index, count)); then fixed */
    uint64_t incarnation;     /* 104: the pod's incarnation, the same in all its pools:
                                 random, set (CAS 0 -> it) by the first compute node to
                                 claim memory node 0, then copied to every other */
    uint64_t complete;        /* 112, memory node 0's only: 1 once every memory node of
                                 the pod was claimed with the incarnation */
    char protocol[8];         /* 120, memory node 0's only: the compute nodes' protocol
                                 ("ford", "rs-2pl", "motor", NUL-padded), CASed in by the first */
    uint64_t replicas;        /* 128: 0 until the first compute node CASes in the pod's
                                 backups + 1 (the same on every memory node) */
};
/* The incarnation of a pool found empty after its pod was complete: it
 * restarted, and stays refused until every memory node of the pod does
 * (a pod without backups). */
#define DM_INCARNATION_LOST UINT64_MAX
/* The incarnation of a pool that a compute node rebuilds from the backups
 * (a pod with backups): the tag in bits 48-63, the rebuilder's slot in bits
 * 40-47 and its connection id on this memory node (conn, below) in bits
 * 0-39; the pod's incarnation once the copy is placed. */
#define DM_REBUILD_TAG 0xfffeull
#define DM_INCARNATION_REBUILDING(slot, conn) \
    (DM_REBUILD_TAG << 48 | (uint64_t)(slot) << 40 | ((conn) & ((1ull << 40) - 1)))
#define DM_IS_REBUILDING(inc) ((inc) >> 48 == DM_REBUILD_TAG)
/* 136 bytes; zero up to the compute-node slots */

/* ---- compute-node slots (bytes 2048..4095 of every pool; memory node 0's
 * are the pod's) ----
 * A compute node of host h has slot h + 1 (slot 0 is no compute node's: a
 * client that is not one, such as a test or a tool, boots with slot 0).
 * The slot says who holds a record lock (the owner in a ford lock word,
 * src/txn/ford.c), whether that compute node still lives, and where its
 * undo log is. */
#define DM_CN_SLOTS_OFF 2048u
#define DM_CN_SLOTS 64u
struct dm_cn_slot {
    /* 0: changed by compute nodes only (CAS): DM_CN_STATE(kind, by, incarnation) */
    uint64_t state;
    /* 8: written by the memory node only: DM_CN_CONNECTED while a compute
     * node of this slot holds its bootstrap connection open, and that
     * connection's id in the low bits: the memory node's start time in
     * microseconds (CLOCK_REALTIME) plus the count of the slot's
     * connections since, so that ids never repeat, even across restarts of
     * the memory node. Its process is gone once the bit is clear (the
     * kernel closed the connection). */
    uint64_t conn;
    uint64_t log;             /* 16: the slot's undo log (an rs_loc), set once (CAS 0 -> it) */
    uint64_t log_bytes;       /* 24: its bytes */
};                            /* 32 bytes */
#define DM_CN_CONNECTED (1ull << 63)
#define DM_CONN_ID_MASK ((1ull << 56) - 1) /* what a bucket lock keeps of a connection id */
/* state: kind in bits 62-63, the slot acting on it in bits 32-39 (RECOVERING),
 * the incarnation in bits 0-31. An incarnation's locks are stale once the
 * slot holds a later one. */
#define DM_CN_NEVER 0ull      /* never used */
#define DM_CN_LIVE 1ull       /* incarnation i runs (or died and nobody noticed yet) */
#define DM_CN_RECOVERING 2ull /* slot `by` rolls incarnation i's undo log back or forward */
#define DM_CN_CLEAN 3ull      /* recovered: nothing of incarnation i - 1 is left but stale locks */
#define DM_CN_STATE(kind, by, inc) ((uint64_t)(kind) << 62 | (uint64_t)(by) << 32 | (uint64_t)(inc))
#define DM_CN_KIND(st) ((st) >> 62)
#define DM_CN_BY(st) ((unsigned)((st) >> 32) & 0xffu)
#define DM_CN_INC(st) ((uint32_t)(st))

/* Memory node index (0..count-1) of a pod of count memory nodes: "MEMB" in
 * bits 32-63, count in bits 16-31, index in bits 0-15. */
#define DM_MEMBERSHIP_TAG 0x424d454dull /* "MEMB" */
#define DM_MEMBERSHIP(index, count) \
    (DM_MEMBERSHIP_TAG << 32 | (uint64_t)(count) << 16 | (uint64_t)(index))

/* ---- the compute nodes' message addresses (memory node 0's; after the
 * catalog): entry s is slot s's lock service address (Lotus), written by
 * its compute node at start; conn is the slot's connection id then (a
 * reader compares it with the slot's conn word: an entry of a run that
 * ended is stale). ---- */
#define DM_CN_DIR_OFF (DM_CATALOG_OFF + DM_MAX_TABLES * DM_CATALOG_ENTRY)
#define DM_CN_DIR_NAME_MAX 112u
struct dm_cn_dir_entry {
    uint64_t conn;            /*  0: the writer's connection id (without DM_CN_CONNECTED) */
    uint32_t len;             /*  8: the address's bytes */
    uint32_t inc;             /* 12: the writer's incarnation in the slot (dm_cn_slot.state) */
    unsigned char name[DM_CN_DIR_NAME_MAX]; /* 16 */
};                            /* 128 bytes */

/* state of a catalog entry (its first word, changed by CAS and WRITE) */
#define DM_CAT_FREE 0ull
#define DM_CAT_CREATING 1ull /* a compute node is laying the table out */
#define DM_CAT_READY 2ull

struct dm_catalog_entry {
    uint64_t state;           /*  0: DM_CAT_* */
    uint32_t table_id;        /*  8 */
    uint32_t key_size;        /* 12 */
    uint32_t tuple_size;      /* 16 */
    uint32_t record_bytes;    /* 20: word + row header + tuple, a multiple of 8 */
    uint64_t index_off;       /* 24: the first bucket */
    uint64_t nbuckets;        /* 32: a power of two */
    uint32_t bucket_bytes;    /* 40 */
    uint32_t slots;           /* 44: per bucket */
    uint32_t slot_bytes;      /* 48: 8 + key_size rounded up to 8 */
    uint32_t pad;             /* 52 */
    uint64_t sentinel_off;    /* 56: the table's sentinel record (record_store.h) on
                                 memory node 0; 0 on the others */
};                            /* 64 bytes */

/* The header of a hash index bucket, before its slots. A table's index is
 * nbuckets head buckets; each may lead a chain of overflow buckets of the
 * same bytes, taken from the cursor when the chain is full. The head
 * bucket's lock guards its whole chain (an overflow bucket's lock word stays
 * 0). next is set once (CAS 0 -> offset), after the new bucket's bytes are
 * placed, and never changes again: buckets are never unlinked. */
struct dm_bucket_head {
    uint64_t lock;            /*  0: 0 free, or DM_BUCKET_TAKEN | slot << 56 | the low 56
                                 bits of the connection id (conn) of the compute node
                                 that took it (CAS to take, FAA to release; taken over
                                 once that connection is closed) */
    uint64_t next;            /*  8: the chain's next bucket, 0 for none */
};                            /* 16 bytes; slots follow */

#define DM_BUCKET_TAKEN (1ull << 63)

_Static_assert(sizeof(struct dm_pool_header) == 136, "pool header layout");
_Static_assert(sizeof(struct dm_bucket_head) == 16, "bucket header layout");
_Static_assert(sizeof(struct dm_cn_slot) == 32, "compute-node slot layout");
_Static_assert(DM_CN_SLOTS_OFF + DM_CN_SLOTS * sizeof(struct dm_cn_slot) == DM_HEADER_BYTES,
               "compute-node slots fill the header");
_Static_assert(sizeof(struct dm_catalog_entry) == DM_CATALOG_ENTRY, "catalog entry layout");
_Static_assert(sizeof(struct dm_cn_dir_entry) == 128, "directory entry layout");
_Static_assert(DM_CN_DIR_OFF + DM_CN_SLOTS * sizeof(struct dm_cn_dir_entry) <= DM_DATA_START,
               "the directory fits before the data");

/* ---- bootstrap: one request and one reply over the memory node's Unix
 * socket; the connection then stays open for the client's lifetime. ---- */
#define DM_BOOT_MAGIC 0x31544f4f424d4450ull /* "PDMBOOT1" */
#define DM_BOOT_VERSION 2u

struct dm_boot_req {
    uint64_t magic;
    uint32_t version;
    uint32_t name_len;
    char pod[DM_POD_NAME_MAX];
    char provider[64];
    unsigned char name[FAB_NAME_MAX]; /* the client's fabric address */
    uint32_t cn_slot;         /* 1..DM_CN_SLOTS-1: a compute node's slot; 0: not one */
    uint32_t pad;
};

struct dm_boot_rep {
    uint64_t magic;
    int32_t status;           /* 0: served; else msg says why not */
    uint32_t name_len;
    char msg[256];
    char pod[DM_POD_NAME_MAX];
    char provider[64];
    unsigned char name[FAB_NAME_MAX]; /* the memory node's fabric address */
    struct fab_region region;
};

#endif
