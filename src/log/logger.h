/* Loggers and the workers' log buffers (Tigon §3.5, SiloR).
 *
 * Each worker owns a log_worker: the buffer it encodes its commits' value
 * records into (segment record format, CRC included, so the CPU cost of
 * checksumming is spread over the workers) and the epoch it publishes. The
 * hot path (log_worker_append) takes no lock. A buffer is handed to the
 * worker's logger when it is full or when the worker's commit epoch changes,
 * so a buffer normally holds the records of one epoch.
 *
 * The epoch a worker publishes says: "every record of an epoch below this is
 * in my logger's queue" (UINT64_MAX: idle, nothing buffered). A worker
 * publishes a new epoch only after handing over its buffer, and re-reads E
 * after publishing, so its commits never use an epoch below what it published.
 *
 * A logger thread reads E, then its workers' epochs (d = the minimum), then
 * takes the queued buffers, writes each as one block of its current segment
 * (seg-<host>-<logger>-<seq>.log), fdatasyncs, and only then publishes d as
 * its durable epoch (ctl->logger[host][logger].durable). Buffers are recycled
 * after the sync that covers them; when all are in flight a worker waits
 * (backpressure from a slow disk). A failed write or sync leaves the durable
 * epoch where it was, abandons the segment and writes the unsynced buffers
 * again into a new one.
 *
 * With a watch (log/dirwatch.h) a logger publishes only once the directory
 * and the segment it synced are still the ones claimed (an fdatasync into a
 * removed directory succeeds); once the directory is lost it writes and
 * publishes nothing more: it gives its buffers back unwritten, so the
 * workers go on, and no reply of theirs is ever released. */
#ifndef PODDB_LOG_LOGGER_H
#define PODDB_LOG_LOGGER_H

#include <stdbool.h>
#include <stdint.h>

#include "log/dirwatch.h"
#include "log/segment.h"
#include "util/err.h"

#define LOG_BUF_BYTES (256u << 10)        /* a worker buffer (one block) */
#define LOG_SEGMENT_BYTES (64ull << 20)   /* rotate to a new segment past this */
#define LOG_SYNC_EARLY_BYTES (16ull << 20) /* sync before the epoch ends past this */
/* A logger's direct writer writes its pages only at a sync until this much
 * is gathered: one write per epoch instead of one per 256 KiB, each write
 * a system call, and on a VM an exit and an interrupt. */
#define LOG_DIRECT_EARLY_BYTES (2u << 20)

struct log_buf;
struct logger;

struct log_worker {
    uint64_t epoch;          /* published (atomic); UINT64_MAX = idle */
    uint64_t epoch_local;    /* the same, for the worker itself */
    uint64_t commit_epoch;   /* of the last commit */
    struct logger *lg;
    struct log_buf *cur;
    uint64_t records, bytes; /* appended (atomic, relaxed) */
} __attribute__((aligned(64)));

struct logger_options {
    const char *dir;
    uint32_t host, id;
    uint64_t first_seq;          /* sequence number of its first new segment */
    uint64_t *global_epoch;      /* E */
    uint64_t *durable_word;      /* where to publish its durable epoch */
    /* Where to publish the `through` of its last durable mark (0: none; see
     * logger_mark_seq), and how many loggers its host has (in the marks). */
    uint64_t *marked_word;
    uint32_t nloggers;
    uint64_t *written_word;      /* where to publish the largest epoch of a record it wrote */
    struct log_worker **workers; /* the workers it serves */
    int nworkers;
    uint64_t poll_ns;            /* how often it looks at E without a hand-over or a wake-up */
    uint64_t segment_bytes;      /* 0: LOG_SEGMENT_BYTES */
    void (*on_progress)(void *arg); /* after it published a larger durable epoch */
    void (*on_written)(void *arg);  /* after it wrote a record of a later epoch than before */
    void *arg;
    struct logdir_watch *watch;  /* the directory's watch (NULL: not watched) */
};

struct logger_stats {
    uint64_t durable;        /* published durable epoch */
    uint64_t blocks, records, bytes, syncs, sync_ns, segments, write_errors;
    uint64_t direct_segments; /* segments written with O_DIRECT (seg_writer_go_direct) */
    uint64_t sync_ns_max;    /* the slowest fdatasync */
};

/* Start the thread. Publishes E into durable_word at once (nothing pending). */
struct logger *logger_start(const struct logger_options *o, pod_err *err);
/* After its workers went idle: write and sync everything, publish, close the
 * segment, join. */
void logger_stop(struct logger *lg);
void logger_get_stats(const struct logger *lg, struct logger_stats *out);
/* Look at E and the workers now (the epoch thread saw E grow). */
void logger_wake(struct logger *lg);
/* Sequence number of the segment being written (or the next one): every
 * segment of this logger below it is closed. */
uint64_t logger_open_seq(const struct logger *lg);
/* The epochs of the blocks of segment seq, when this logger wrote and closed
 * it (since it started, the latest 4096 segments): *lo > *hi when it has no
 * block. False when unknown: read them from the file (seg_peek_epochs). */
bool logger_closed_epochs(struct logger *lg, uint64_t seq, uint64_t *lo, uint64_t *hi);
/* The segment holding this logger's last durable mark (or, before its first,
 * logger_open_seq): the checkpoint's clean-up keeps it and every later one,
 * since recovery may need that mark (docs/durability.md). */
uint64_t logger_mark_seq(const struct logger *lg);
/* Segment seq is gone: stop remembering it. */
void logger_forget_closed(struct logger *lg, uint64_t seq);

/* ---- the worker side (only the owning worker thread calls these) ---- */

void log_worker_init(struct log_worker *lw, struct logger *lg);
/* Free the current buffer (the logger must be stopped). */
void log_worker_fini(struct log_worker *lw);
/* The epoch of a commit, read under the commit's locks (see top). */
uint64_t log_worker_commit_epoch(struct log_worker *lw, const uint64_t *global_epoch);
/* Encode a record into the buffer (handing it over when full). The record
 * must be valid (seg_record_check); out of memory is fatal: a committed
 * transaction that cannot be logged must not be acknowledged. */
void log_worker_append(struct log_worker *lw, const struct log_record *rec);
/* log_worker_append of a PATCH (seg_patch_encode: rec's tuple is unused,
 * the patch is base_ev, offset and tuple_len - LOG_PATCH_HEADER bytes read
 * from `bytes`). */
void log_worker_append_patch(struct log_worker *lw, const struct log_record *rec,
                             uint64_t base_ev, uint32_t offset, const void *bytes);
/* Not going to commit for a while: hand over the buffer, publish idle. */
void log_worker_idle(struct log_worker *lw);

#endif
