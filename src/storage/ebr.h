/* Epoch-based reclamation (EBR) for the storage engine.
 *
 * A domain has a global epoch and N participant slots (one per worker thread;
 * slot ids 0..nslots-1 are assigned by the caller, and each slot is used by one
 * thread at a time). A participant enters a critical section (pins the current
 * epoch) before it reads shared structures and exits after; objects retired at
 * epoch e are freed once every participant that was inside a critical section
 * at e has left it. Classic three-epoch scheme (Fraser; Silo): the global epoch
 * advances from e to e+1 only when every active slot has announced e, and an
 * object retired while the global epoch was e is freed once it is >= e+2.
 * See the top of ebr.c for the invariant and the memory-ordering argument.
 *
 * Announcement slots are a plain array of 64-byte padded uint64_t words
 * (0 = inactive, else pinned epoch + 1), and the global epoch is one uint64_t;
 * both may live in caller-provided memory (ebr_domain_new_ext), e.g. shared CXL
 * memory later. Retired lists, nesting counters and statistics are always
 * private to the domain object (and each slot's list to its thread).
 *
 * Threading: ebr_enter/exit/retire/collect/drain on slot s must only be called
 * by the thread that currently owns s. ebr_epoch and ebr_get_stats may be
 * called from any thread. Creating and freeing a domain is not concurrent
 * with anything else on it. */
#ifndef PODDB_STORAGE_EBR_H
#define PODDB_STORAGE_EBR_H

#include <stddef.h>
#include <stdint.h>

/* Bytes per announcement slot in slots_mem (one cache line). */
#define EBR_SLOT_BYTES 64

/* Collection is attempted from ebr_exit every EBR_COLLECT_EVERY outermost
 * exits of a slot, or sooner when its pending count passes
 * EBR_COLLECT_PENDING (then again each further EBR_COLLECT_PENDING). */
#define EBR_COLLECT_EVERY 64
#define EBR_COLLECT_PENDING 1024

struct ebr_domain;

/* A domain with nslots slots (1..), announcement slots and global epoch
 * allocated and zeroed. NULL on bad nslots or out of memory. */
struct ebr_domain *ebr_domain_new(int nslots);
/* Same, announcement slots in slots_mem: nslots * EBR_SLOT_BYTES bytes, 8-byte
 * aligned (64 recommended), or NULL to allocate. Caller-provided memory is NOT
 * initialised here (it may already be in use by other views of the domain):
 * the caller zeroes it once when it creates it, and keeps it alive until
 * ebr_domain_free. */
struct ebr_domain *ebr_domain_new_at(int nslots, void *slots_mem);
/* Same, and the global epoch word at *global (8-byte aligned; NULL to allocate).
 * Like slots_mem it is used as is (zero it once when creating it). */
struct ebr_domain *ebr_domain_new_ext(int nslots, void *slots_mem, uint64_t *global);
/* Runs free_fn for everything still retired (from the calling thread) and
 * frees the domain. No participant may be active, nor any other thread use
 * the domain. Caller-provided memory is left alone. NULL is a no-op. */
void ebr_domain_free(struct ebr_domain *d);

/* Pin the current epoch (a load of the global epoch + a seq_cst store to the
 * slot). Nests: an enter inside an enter on the same slot only counts. */
void ebr_enter(struct ebr_domain *d, int slot);
/* Unpin (the outermost exit clears the slot). Every EBR_COLLECT_EVERY
 * outermost exits, or when the slot has many pending objects, runs
 * ebr_collect. */
void ebr_exit(struct ebr_domain *d, int slot);
/* 1 if slot is inside a critical section (its own thread's view). */
int ebr_active(const struct ebr_domain *d, int slot);

/* Retire obj: free_fn(ctx, obj) runs later from an ebr_exit/ebr_collect/
 * ebr_drain of the SAME slot (so on the retiring thread), or from
 * ebr_domain_free; never from inside ebr_retire. obj must already be
 * unreachable for readers that start from now on. May be called inside or
 * outside a critical section. Allocates only when a 4 KiB chunk of the
 * slot's list fills up and no spare chunk is cached (a failed allocation is
 * fatal: logged, then abort()). Entries retired during a critical section
 * cannot be freed before the slot exits it. */
void ebr_retire(struct ebr_domain *d, int slot, void *obj,
                void (*free_fn)(void *ctx, void *obj), void *ctx);

/* Try to advance the global epoch (one scan of the slots) and free what is
 * safe on this slot's list. Cheap when nothing can move. */
void ebr_collect(struct ebr_domain *d, int slot);
/* Advance/free until everything retired by this slot is freed, waiting up to
 * timeout_ms (0 = just try, < 0 = forever) for other participants to leave
 * their critical sections. Returns how many of this slot's objects are still
 * pending. Call it outside a critical section on this slot: while the slot is
 * itself pinned, objects it retired during that section cannot be freed. */
size_t ebr_drain(struct ebr_domain *d, int slot, int timeout_ms);

/* The global epoch. */
uint64_t ebr_epoch(const struct ebr_domain *d);

struct ebr_stats {
    uint64_t retired; /* ebr_retire calls */
    uint64_t freed;   /* free_fn calls */
    uint64_t pending; /* retired - freed */
    uint64_t epoch;   /* global epoch */
};
/* Sums over slots; approximate while other threads run. */
void ebr_get_stats(const struct ebr_domain *d, struct ebr_stats *out);
/* Pending objects of one slot (any thread; approximate while it runs). */
size_t ebr_pending(const struct ebr_domain *d, int slot);

#endif
