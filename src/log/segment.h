/* Log segment files: the on-disk format of the durability layer (docs/log-format.md).
 *
 * A segment is a 64-byte header followed by blocks; a block is a 32-byte block
 * header plus a payload of records, covered by one CRC-32C; every record also
 * carries its own CRC-32C. A block is the unit one fdatasync makes durable: the
 * writer appends whole blocks, and the reader hands out a block's records only
 * after the whole block has been verified, so it never returns part of a block.
 * At the first block that is incomplete or damaged the reader stops and reports
 * the tail (clean, torn or corrupt, with offset and reason); everything before
 * it is intact.
 *
 * Loggers, epochs and recovery are built on top of this; this module knows
 * nothing about them beyond the epoch numbers it stores. Not thread-safe: one
 * writer or reader per thread. */
#ifndef PODDB_LOG_SEGMENT_H
#define PODDB_LOG_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "util/err.h"

#define SEG_MAGIC "PODDBLOG" /* 8 bytes, no NUL on disk */
#define SEG_VERSION 4u        /* written; 3 (no marks), 2 (no delta checkpoints), 1 (no PATCH records) are read */
#define SEG_VERSION_OLDEST 1u
#define SEG_HEADER_SIZE 64u
#define SEG_BLOCK_MAGIC 0x4B4C4250u /* "PBLK" little-endian */
#define SEG_BLOCK_HEADER_SIZE 32u
/* A durable mark (version 4): a block header without payload that says the
 * logger's records of every epoch below `through` precede it in its log
 * (docs/log-format.md, "Marks"; docs/durability.md). */
#define SEG_MARK_MAGIC 0x4B524D50u /* "PMRK" little-endian */
#define SEG_RECORD_HEADER 20u   /* a record's bytes before its key */
#define SEG_RECORD_OVERHEAD (SEG_RECORD_HEADER + 4u) /* header + CRC */
/* Largest block payload the writer produces and the reader accepts; a larger
 * length field is corruption. */
#define SEG_MAX_BLOCK_PAYLOAD (16u << 20)
/* Largest tuple a record may carry (a record must fit into one block). */
#define SEG_MAX_TUPLE (SEG_MAX_BLOCK_PAYLOAD - SEG_RECORD_OVERHEAD - 65535u)
/* "seg-<host>-<logger>-<seq 10 digits>.log" */
#define SEG_NAME_MAX 64

enum log_kind { LOG_PUT = 1, LOG_DELETE = 2, LOG_PATCH = 3 };

/* One value log record. For the writer key/tuple are read during append only;
 * from the reader they point into the reader's buffer and stay valid until the
 * next seg_reader_next or seg_reader_close. A DELETE has no tuple (tuple_len 0);
 * a PUT may have an empty one. A PATCH is an update that logs only the bytes
 * it changed: its "tuple" is a patch (below) that turns the tuple's version
 * base_ev into the record's epoch-version. */
struct log_record {
    uint32_t table_id;
    uint8_t kind; /* enum log_kind */
    uint16_t key_len;
    uint32_t tuple_len;
    uint64_t epoch_version; /* epoch << 32 | version */
    const void *key;
    const void *tuple;
};

static inline uint32_t log_ev_epoch(uint64_t ev) { return (uint32_t)(ev >> 32); }
static inline uint32_t log_ev_version(uint64_t ev) { return (uint32_t)ev; }
static inline uint64_t log_ev_make(uint32_t epoch, uint32_t version)
{
    return (uint64_t)epoch << 32 | version;
}

/* A PATCH record's tuple field: base_ev (8 bytes), offset (4), then the new
 * bytes at that offset of the tuple (tuple_len - LOG_PATCH_HEADER of them). */
#define LOG_PATCH_HEADER 12u

struct log_patch {
    uint64_t base_ev;  /* the epoch-version of the tuple the patch applies to */
    uint32_t offset;   /* of the first changed byte */
    uint32_t len;      /* changed bytes, from offset on */
    const unsigned char *bytes;
};

/* Encode a patch's header at p (LOG_PATCH_HEADER bytes; the bytes follow it). */
void log_patch_put_header(unsigned char *p, uint64_t base_ev, uint32_t offset);
/* Parse a PATCH record's tuple field (tuple_len >= LOG_PATCH_HEADER). */
struct log_patch log_patch_parse(const void *tuple, uint32_t tuple_len);

/* The segment header's fields. */
struct seg_header {
    uint32_t version;
    uint32_t host;
    uint32_t logger;
    uint64_t seq;
    uint64_t first_epoch;
    uint64_t create_time_ns; /* CLOCK_REALTIME at creation */
    /* Checkpoint files only (version 3; zero otherwise): SEG_CKPT_DELTA when
     * the file holds only what changed since the checkpoint before it, whose
     * start epoch is since_epoch (docs/durability.md, "Checkpoints"). */
    uint32_t ckpt_flags;
    uint64_t since_epoch;
};

#define SEG_CKPT_DELTA 1u

/* The header's logger field of a checkpoint file (docs/durability.md). */
#define SEG_LOGGER_CHECKPOINT UINT32_MAX

/* Bytes of an encoded record. */
static inline size_t seg_record_size(uint32_t key_len, uint32_t tuple_len)
{
    return SEG_RECORD_OVERHEAD + (size_t)key_len + tuple_len;
}
/* 0, or -1 with err filled when rec cannot be written (kind, a DELETE with a
 * tuple, a PATCH shorter than its header, a tuple above SEG_MAX_TUPLE, a
 * length without data). */
int seg_record_check(const struct log_record *rec, pod_err *err);
/* Encode a checked record at p (seg_record_size bytes, CRC included); returns
 * its size. For callers that build block payloads themselves (the loggers'
 * per-worker buffers) and hand them to seg_writer_write_block. */
size_t seg_record_encode(unsigned char *p, const struct log_record *rec);
/* The same for a PATCH (rec: kind LOG_PATCH, tuple_len = LOG_PATCH_HEADER +
 * the patch's length, tuple unused) whose header is base_ev and offset and
 * whose new bytes are read from `bytes`: no patch is put together first. */
size_t seg_patch_encode(unsigned char *p, const struct log_record *rec, uint64_t base_ev,
                        uint32_t offset, const void *bytes);

/* "seg-<host>-<logger>-<seq %010>.log" into buf (>= SEG_NAME_MAX). */
void seg_format_name(char *buf, size_t len, uint32_t host, uint32_t logger, uint64_t seq);
/* Parse a base name of that form; false when it is not one. */
bool seg_parse_name(const char *name, uint32_t *host, uint32_t *logger, uint64_t *seq);
/* Checkpoint files: "ckpt-<host>-<seq %010>.log", or ".tmp" while being written. */
void seg_format_ckpt_name(char *buf, size_t len, uint32_t host, uint64_t seq, bool tmp);
bool seg_parse_ckpt_name(const char *name, uint32_t *host, uint64_t *seq, bool *tmp);
/* fsync a directory (after creating, renaming or removing files in it). */
int seg_fsync_dir(const char *dir, pod_err *err);

/* ---- writer ------------------------------------------------------------------ */

struct seg_writer;

/* Create DIR/seg-<host>-<logger>-<seq>.log (it must not exist), write and
 * fdatasync the header and fsync DIR, so the segment survives a crash from the
 * moment this returns. NULL with err filled on failure. */
struct seg_writer *seg_writer_open(const char *dir, uint32_t host, uint32_t logger, uint64_t seq,
                                   uint64_t first_epoch, pod_err *err);

/* The same with an explicit file name and header (host, logger, seq,
 * first_epoch are taken from hdr; version and, when 0, create_time_ns are
 * filled in). Used for checkpoint files. */
struct seg_writer *seg_writer_open_named(const char *dir, const char *name,
                                         const struct seg_header *hdr, pod_err *err);

/* Add a record to the current block (in memory). When the record would make the
 * block's payload exceed SEG_MAX_BLOCK_PAYLOAD the current block is written
 * first (seg_writer_flush_block), so this can do I/O and fail like it.
 * -1 with err filled on an invalid record (kind, DELETE with a tuple, tuple
 * larger than SEG_MAX_TUPLE) or a write error. */
int seg_writer_append(struct seg_writer *w, const struct log_record *rec, pod_err *err);

/* The same without copying the tuple: seg_writer_reserve makes room for a
 * record of key_len and tuple_len bytes at the block's end (writing the block
 * first like seg_writer_append) and returns where its tuple goes; the caller
 * fills the tuple in and seg_writer_commit makes it a record (rec->tuple must
 * be that pointer, the lengths those reserved). Room reserved and not
 * committed is not written: the next reserve or append takes it, and a
 * flush or sync in between drops it. NULL / -1 with err filled on an error. */
unsigned char *seg_writer_reserve(struct seg_writer *w, uint16_t key_len, uint32_t tuple_len,
                                  pod_err *err);
int seg_writer_commit(struct seg_writer *w, const struct log_record *rec, pod_err *err);

/* Write the current block (if it has records) to the file; not yet durable.
 * Short writes are continued; on an error (ENOSPC, EIO, EFBIG...) the file is
 * truncated back to its last complete block and the block stays buffered, so a
 * later call may retry; if that truncation fails too the writer is broken and
 * every later call fails. */
int seg_writer_flush_block(struct seg_writer *w, pod_err *err);

/* Write one block whose payload the caller encoded (records made with
 * seg_record_encode, count of them, epochs within [epoch_lo, epoch_hi]): the
 * writer adds the block header and CRC and writes both with one pwritev
 * sequence, without copying the payload. The current block is written first.
 * Errors as seg_writer_flush_block. */
int seg_writer_write_block(struct seg_writer *w, const void *payload, size_t len, uint32_t count,
                           uint64_t epoch_lo, uint64_t epoch_hi, pod_err *err);

/* Write a mark: every record of epochs below `through` that logger `logger`
 * (one of `nloggers` of its host) writes is in the blocks before it. Durable
 * with the next seg_writer_sync, like a block; it holds no records and does
 * not change the file's epoch range. Errors as seg_writer_flush_block. */
int seg_writer_write_mark(struct seg_writer *w, uint64_t through, uint32_t nloggers,
                          uint32_t logger, pod_err *err);

/* What a checkpoint's direct writer gathers before it writes full pages
 * without a sync: small, so that the buffer it cycles through stays small in
 * the last-level cache the workers share (4 MiB here cost TPC-C 4-6% while a
 * checkpoint ran). */
#define SEG_DIRECT_EARLY_BYTES (256u << 10)

/* From now on write with O_DIRECT, bypassing the page cache (loggers and
 * checkpoints: the copy into fresh page-cache pages, their writeback and
 * the file system's bookkeeping cost a logger a third of its CPU). Blocks
 * are gathered in an aligned buffer and written in whole 4 KiB pages, at a
 * sync (the last page padded with zeros, written again with more blocks at
 * the next sync; a reader takes zeros from the last block to a page end for
 * a clean end) or once early_bytes are gathered (0: SEG_DIRECT_EARLY_BYTES);
 * seg_writer_close cuts the padding off. A failed write breaks a direct
 * writer (like a failed sync): continue in a new file. Call on a synced
 * writer without a pending block. Returns 0 also when the file system
 * refuses O_DIRECT (the writer stays as it was); -1 with err on a failure. */
int seg_writer_go_direct(struct seg_writer *w, size_t early_bytes, pod_err *err);
/* Reserve the file's blocks up to `bytes` without changing its size
 * (fallocate, FALLOC_FL_KEEP_SIZE), so that a sync of what is written there
 * later does not also write the file system's allocation metadata: one
 * metadata write fewer per fdatasync on ext4, and each disk request holds a
 * CPU on a VM. seg_writer_close gives back what is left. Advice: where the file
 * system cannot, nothing changes. */
void seg_writer_preallocate(struct seg_writer *w, uint64_t bytes);
/* True when the writer writes with O_DIRECT. */
bool seg_writer_is_direct(const struct seg_writer *w);

/* Make everything written so far durable (fdatasync). Does not flush the
 * current block: call seg_writer_flush_block first. A failed fdatasync breaks
 * the writer for good (the kernel may have dropped the dirty pages; retrying
 * could report success for data that never reached the disk): the caller must
 * treat the segment's unsynced blocks as lost and continue in a new segment. */
int seg_writer_sync(struct seg_writer *w, pod_err *err);

/* For a large file written in one go (a checkpoint): once chunk bytes were
 * written since the last call, wait until the previous chunk is on disk and
 * start writing back the new one. This keeps the dirty page cache small, so
 * that the final fdatasync — and, on a shared file system, the loggers'
 * fdatasyncs meanwhile — do not wait behind the whole file. An error breaks
 * the writer like a failed write. */
int seg_writer_pace(struct seg_writer *w, uint64_t chunk, pod_err *err);

/* The epochs of the blocks written so far (what seg_peek_epochs would read
 * back from the file): *lo > *hi while there are none. */
void seg_writer_epochs(const struct seg_writer *w, uint64_t *lo, uint64_t *hi);
/* Bytes in the file (header + written blocks): the caller rotates on this. */
uint64_t seg_writer_size(const struct seg_writer *w);
/* Bytes of the current, not yet written block (0 when empty; else header + payload). */
uint64_t seg_writer_pending(const struct seg_writer *w);
/* Records in the current block. */
uint32_t seg_writer_pending_records(const struct seg_writer *w);
/* Bytes in the file known durable (after the last successful seg_writer_sync). */
uint64_t seg_writer_synced_size(const struct seg_writer *w);
const char *seg_writer_path(const struct seg_writer *w);
/* fstat of the file (log/dirwatch.h checks it is still at its path). */
int seg_writer_stat(const struct seg_writer *w, struct stat *st);

/* Write the current block, fdatasync, close and free. 0, or -1 when any of it
 * failed (the writer is freed either way). A writer that was already broken is
 * just closed (-1, with the earlier error). NULL is a no-op. */
int seg_writer_close(struct seg_writer *w, pod_err *err);
/* Close without writing the current block or syncing (after an error). */
void seg_writer_abandon(struct seg_writer *w);

/* ---- reader ------------------------------------------------------------------ */

enum seg_tail_kind {
    SEG_TAIL_UNKNOWN = 0, /* not at the end yet */
    SEG_TAIL_CLEAN,       /* the file ends exactly after the last block */
    SEG_TAIL_TORN,        /* an incomplete last block: what a crash leaves */
    SEG_TAIL_CORRUPT,     /* a complete block that is damaged, or garbage */
};

struct seg_tail_status {
    enum seg_tail_kind kind;
    uint64_t offset; /* where the first bad byte's block starts (= good bytes) */
    char reason[200];
};

struct seg_reader_stats {
    uint64_t file_size;
    uint64_t good_bytes; /* header + verified blocks handed out so far */
    uint64_t blocks;     /* verified blocks */
    uint64_t records;    /* records handed out */
    uint64_t epoch_lo, epoch_hi; /* over the verified blocks; lo > hi when none */
    uint64_t marks;              /* verified marks (seg_writer_write_mark) read so far */
    uint64_t mark_through;       /* the last one's fields (when marks > 0) */
    uint32_t mark_nloggers, mark_logger;
};

/* Where the block of the record last returned by seg_reader_next lies. */
struct seg_block_info {
    uint64_t offset, size; /* in the file, header included */
    uint64_t epoch_lo, epoch_hi;
    uint32_t count;
};

struct seg_reader;

/* Open a segment and validate its header (magic, version, size, CRC). NULL
 * with err naming the file and the problem otherwise. */
struct seg_reader *seg_reader_open(const char *path, pod_err *err);
const struct seg_header *seg_reader_header(const struct seg_reader *r);

/* 1: *out holds the next record. 0: end of the log — read the tail status.
 * -1: an I/O error reading the file (err filled); the tail status stays UNKNOWN. */
int seg_reader_next(struct seg_reader *r, struct log_record *out, pod_err *err);

const struct seg_tail_status *seg_reader_tail_status(const struct seg_reader *r);
const struct seg_reader_stats *seg_reader_stats(const struct seg_reader *r);
const struct seg_block_info *seg_reader_block(const struct seg_reader *r);
void seg_reader_close(struct seg_reader *r);

/* The epoch range of a segment's blocks from their headers alone (no CRC
 * check, no payload read): for deciding which segments a checkpoint made
 * obsolete. Stops at the first block header that does not make sense.
 * lo > hi when there are no blocks. -1 when the file or its header is bad. */
int seg_peek_epochs(const char *path, uint64_t *epoch_lo, uint64_t *epoch_hi, pod_err *err);

/* "clean", "torn", "corrupt", "unknown". */
const char *seg_tail_name(enum seg_tail_kind k);

#endif
