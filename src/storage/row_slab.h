/* Exact-size memory for one table's rows. A general allocator rounds a block
 * up to its size class (mimalloc: 88 bytes take 96), and a table holds
 * millions of rows of one size, so each table carves its rows out of 256 KiB
 * chunks at their exact size (a multiple of 8) instead.
 *
 * Every thread keeps its own free rows and the rest of its current chunk for
 * each slab, so allocating and freeing take no lock; whole batches of free
 * rows pass between threads through the slab (under its mutex), and a thread
 * that exits hands its free rows back. Memory goes back to the system only
 * when the slab is destroyed.
 *
 * With huge pages on (row_slab_use_huge_pages), a slab that holds 16 MiB
 * takes further memory in 2 MiB chunks, each aligned to and advised for a
 * transparent huge page: a table of millions of rows read at random then
 * costs a TLB miss per 2 MiB instead of per 4 KiB (YCSB 1.37x; a table that
 * keeps growing pays for fresh huge pages where a VM's host reclaims freed
 * memory, so the setting is off by default: docs/performance.md). A
 * small table keeps its 256 KiB chunks, so it does not hold a mostly empty
 * huge page. */
#ifndef PODDB_STORAGE_ROW_SLAB_H
#define PODDB_STORAGE_ROW_SLAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ROW_SLAB_MAX_BLOCK 4096u /* larger rows come from malloc */

struct row_slab;

/* A slab of block-byte rows (block: 16..ROW_SLAB_MAX_BLOCK, a multiple of
 * 8), or NULL when out of memory. */
struct row_slab *row_slab_new(size_t block);

/* Free the slab and every row in it. No thread may use it any more. */
void row_slab_destroy(struct row_slab *s);

/* A zeroed row, 8-byte aligned, or NULL when out of memory. */
void *row_slab_alloc(struct row_slab *s);

/* Give back a row of s; any thread may free any thread's row. */
void row_slab_free(struct row_slab *s, void *row);

/* Whether slabs take their later chunks as huge pages (process-wide; off
 * until called). Chunks already taken stay as they are. */
void row_slab_use_huge_pages(bool on);

/* Bytes of chunk memory the slab holds (rows in use, free, and not yet used). */
uint64_t row_slab_bytes(const struct row_slab *s);

#endif
