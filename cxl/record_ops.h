/* The access protocol of a tuple that lives in CXL memory: operations on its
 * 8-byte HWcc record (cxl/record.h has the bit layout) and the coherent read
 * and write of its SWcc row under each coherence variant (Tigon §3.2).
 * docs/coherence.md explains the protocol and what the tests prove.
 *
 * Two different exclusions live in the same word:
 *  - the HWcc-latch (bit 63) is held only while a row is copied in or out and
 *    while the SWcc bitmap changes: microseconds, never across a transaction;
 *  - the 2PL lock (bits 62..55) is held by a transaction until it ends. Its
 *    operations are NO_WAIT: they fail at once on a conflict.
 * Every operation is an atomic read-modify-write that changes only its own
 * field, because other hosts change the other fields of the word concurrently
 * (a 2PL lock may be taken while another host holds the latch, a CLOCK bit set
 * while the owner moves the row offset, ...).
 *
 * No wait is unbounded: a latch acquire gives up after spin_bound spins
 * (a host that died holding a latch makes its tuples unreachable, never hangs
 * the others); the row operations use REC_LATCH_SPINS. */
#ifndef PODDB_CXL_RECORD_OPS_H
#define PODDB_CXL_RECORD_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "conf/config.h"
#include "cxl/record.h"
#include "cxl/region.h"

/* Results of the row operations. */
enum {
    REC_OK = 0,
    REC_BUSY = -1,   /* the latch stayed taken for REC_LATCH_SPINS spins: abort and retry */
    REC_EINVAL = -2, /* the row is not what the call says (size, area, null offset) */
};

/* Spins before a row operation gives up on the latch. A spin is one pause
 * instruction; every 1024th spin also yields the CPU, so a latch holder that
 * was descheduled can run. About 20-60 ms on current x86 (docs/coherence.md). */
#define REC_LATCH_SPINS (1u << 20)

/* Flags that rec_flag_set/clear may change. */
#define REC_FLAG_MASK (REC_HAS_NEXT | REC_DIRTY | REC_CLOCK)

/* The SWcc row of a tuple of size bytes occupies whole cache lines. */
#define REC_ROW_HEADER ((uint32_t)sizeof(struct cxl_swcc_row))
static inline uint64_t rec_row_alloc_size(uint32_t tuple_size)
{
    return ((uint64_t)REC_ROW_HEADER + tuple_size + CXL_LINE - 1) & ~(uint64_t)(CXL_LINE - 1);
}

static inline cxl_record rec_load(const cxl_record *rec)
{
    return __atomic_load_n(rec, __ATOMIC_ACQUIRE);
}

/* ---- HWcc-latch ------------------------------------------------------------ */

/* Take the latch, spinning at most spin_bound times (0: one attempt). True if
 * taken (acquire ordering), false if still held by someone else. */
bool rec_latch_acquire(cxl_record *rec, uint32_t spin_bound);
/* Release (release ordering). False, and nothing changed, if it was not held. */
bool rec_latch_release(cxl_record *rec);

/* ---- 2PL lock, NO_WAIT ----------------------------------------------------- */

/* Shared lock: fails if write-locked or if 127 readers hold it already. */
bool rec_try_read_lock(cxl_record *rec);
/* Exclusive lock: fails if any reader or writer holds it. */
bool rec_try_write_lock(cxl_record *rec);
/* Read lock -> write lock; the caller holds a read lock and succeeds only when
 * it is the sole reader. On failure the caller still holds its read lock. */
bool rec_try_upgrade(cxl_record *rec);
/* Releases. False, and nothing changed, if no such lock was held. */
bool rec_release_read(cxl_record *rec);
bool rec_release_write(cxl_record *rec);

/* Write lock -> read lock (the caller holds the write lock). False, nothing
 * changed, if the write lock was not held. */
bool rec_downgrade(cxl_record *rec);
/* Give a record nobody else can reach yet (not published) the lock state
 * write (exclusive) or `readers` shared holders; false if readers > 127. */
bool rec_init_lock(cxl_record *rec, bool write, unsigned readers);

/* ---- flags and row offset -------------------------------------------------- */

/* Set / clear flag bits (REC_HAS_NEXT, REC_DIRTY, REC_CLOCK; other bits of flag
 * are ignored). Return whether all of them were set before. No write happens
 * when the bits already have the wanted value (the CLOCK bit is set on every
 * non-owner access: that keeps the line shared). */
bool rec_flag_set(cxl_record *rec, uint64_t flag);
bool rec_flag_clear(cxl_record *rec, uint64_t flag);

/* Point the record at another row (owner only, latch held by the caller).
 * False if the latch is not held or row_off is not a cache-line aligned
 * offset that fits 36 bits of lines. */
bool rec_set_row_off(cxl_record *rec, cxl_off row_off);

/* ---- SWcc row protocol ----------------------------------------------------- */

/* Create a tuple in CXL memory (the owner, r->host): a row of
 * rec_row_alloc_size(tuple_size) bytes in this host's SWcc slice (HWcc slice
 * for POD_COH_HWCC_ONLY) holding valid, epoch_version and the tuple, published
 * to memory; then an 8-byte HWcc record pointing at it with only this host's
 * bitmap bit set (none for HWCC_ONLY) and every other field clear. Returns the
 * record's offset, CXL_NULL if an allocation failed (HWcc quota or slice full)
 * or tuple is NULL. The record is not visible to others until the caller
 * publishes its offset (index insert, release store). */
cxl_off rec_create(struct cxl_region *r, enum pod_coherence v, const void *tuple,
                   uint32_t tuple_size, uint32_t valid, uint64_t epoch_version);

/* Free a record and its row (owner only; the caller guarantees nobody can
 * still reach them, e.g. by EBR). -1 if the record is not in this host's
 * HWcc slice (nothing freed). */
int rec_destroy(struct cxl_region *r, cxl_off rec_off);

/* Read the tuple coherently as host r->host: take the latch; if this host's
 * bitmap bit is clear (always, for NO_SHARED_READER) flush the row's lines
 * first; copy; update the bitmap (FULL, NON_TEMPORAL: set own bit;
 * NO_SHARED_READER: clear own bit); release. tuple_out, valid and
 * epoch_version may each be NULL. tuple_size must be the row's size (checked:
 * REC_EINVAL). Returns REC_OK, REC_BUSY or REC_EINVAL. Takes no 2PL lock. */
int rec_row_read(struct cxl_region *r, enum pod_coherence v, cxl_record *rec, void *tuple_out,
                 uint32_t tuple_size, uint32_t *valid, uint64_t *epoch_version);

/* Write the tuple as host r->host: take the latch; write the row and publish
 * it (write-back, or non-temporal stores for NON_TEMPORAL); set the bitmap to
 * this host's bit only; set is-dirty; release. tuple == NULL writes only the
 * header (valid, epoch_version; e.g. a delete) and keeps the tuple bytes.
 * tuple_size must be the size the row was created with (not checked: the
 * writer does not read the row). Returns REC_OK, REC_BUSY or REC_EINVAL. Takes
 * no 2PL lock: the caller holds the write lock. */
int rec_row_write(struct cxl_region *r, enum pod_coherence v, cxl_record *rec, const void *tuple,
                  uint32_t tuple_size, uint32_t valid, uint64_t epoch_version);
/* rec_row_write of the header and only the tuple's bytes off..off+len-1
 * (bytes: len bytes); the row's other bytes stay as they are. Publishes the
 * lines of the header and of the range only, after refreshing this host's
 * copy of the row when its bitmap bit is clear. REC_EINVAL also for a range
 * past tuple_size. dirty false is the owner's write, whose DRAM row holds
 * the same bytes: is-dirty is cleared instead of set, in the latch's release
 * (one atomic where a separate rec_flag_clear would be a second). */
int rec_row_write_range(struct cxl_region *r, enum pod_coherence v, cxl_record *rec,
                        const void *bytes, uint32_t off, uint32_t len, uint32_t tuple_size,
                        uint32_t valid, uint64_t epoch_version, bool dirty);
/* Prefetch for writing the lines that rec_row_write_range(off, len) will
 * store: the row's header and bytes off..off+len-1. The caller holds the
 * record's write lock and will publish at commit; the prefetch lets that
 * copy find its lines in the cache, which a write-back evicts on CPUs whose
 * clwb does (AMD EPYC: a reload after clwb took ~430 cycles, ~50 without).
 * Does nothing when the store
 * must refresh the row first (this host's bitmap bit is clear), with
 * non-temporal stores (they bypass the cache) and in the simulated cache. */
void rec_row_prefetch_write(struct cxl_region *r, enum pod_coherence v, const cxl_record *rec,
                            uint32_t off, uint32_t len);

/* ---- counters (per thread) ------------------------------------------------- */

struct rec_stats {
    uint64_t reads, writes;        /* completed row operations (rec_create counts a write) */
    uint64_t flushes;              /* cxl_swcc_flush calls (one per row) */
    uint64_t flushed_lines;        /* cache lines they covered */
    uint64_t writebacks;           /* cxl_swcc_writeback calls */
    uint64_t nt_writes;            /* cxl_swcc_nt_write calls */
    uint64_t latch_timeouts;       /* row operations that returned REC_BUSY */
};

/* This thread's counters since its start or last reset. */
void rec_stats_get(struct rec_stats *out);
void rec_stats_reset(void);

#endif
