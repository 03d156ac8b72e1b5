/* The persistent record of the pod durable epoch: one small file per host,
 * DIR/durable-epoch (docs/durability.md, docs/log-format.md).
 *
 * Recovery treats every epoch below the recorded value as committed, so a
 * reply may be released only once the file says so. The file has two 512-byte
 * slots written alternately, each with a sequence number and a CRC-32C; an
 * update is one pwrite of one slot and one fdatasync. A crash in the middle
 * damages at most the slot being written, and the reader takes the valid slot
 * with the higher sequence number, so the previous value survives. (A
 * rename-based update would need a file sync, a rename and a directory sync
 * per epoch; this is one sync.) Not thread-safe: one writer per file. */
#ifndef PODDB_LOG_DURABLE_FILE_H
#define PODDB_LOG_DURABLE_FILE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "util/err.h"

#define DURABLE_FILE_NAME "durable-epoch"
#define DURABLE_SLOT_SIZE 512u
#define DURABLE_MAGIC "PODDBDUR" /* 8 bytes */

struct durable_file;

/* What a read found. */
struct durable_record {
    bool exists;            /* the file is there */
    uint64_t epoch;         /* every epoch below it is committed; 0 when !exists */
    uint64_t seq;           /* slot sequence number of that value */
    uint32_t host;
    /* The hosts of the pod known to have logged (bit h: host h wrote log
     * records): what an empty log directory of one of them at start is
     * checked against (log/emptylog.h). 0 in a file of an older build. */
    uint32_t hosts;
    int valid_slots;        /* 0..2 */
};

/* Read DIR/durable-epoch. 0 with rec filled (rec->exists false when there is
 * no file); -1 with err when the file exists but neither slot is valid (the
 * record is damaged: recovery must not guess), or on an I/O error. */
int durable_file_read(const char *dir, struct durable_record *rec, pod_err *err);
/* The same for the file at path. */
int durable_file_read_path(const char *path, struct durable_record *rec, pod_err *err);

/* Open (creating it if needed, with both slots holding `initial` when
 * created) for updates. The directory must exist. */
struct durable_file *durable_file_open(const char *dir, uint32_t host, uint64_t initial,
                                       pod_err *err);
/* Record epoch durably (pwrite of the older slot + fdatasync). Values never go
 * backwards: a smaller epoch than the last one written is a no-op. */
int durable_file_write(struct durable_file *f, uint64_t epoch, pod_err *err);
uint64_t durable_file_epoch(const struct durable_file *f);
/* Add hosts (a mask of host ids) to the hosts recorded as having logged:
 * one slot write and fdatasync when any is new, else nothing. */
int durable_file_add_hosts(struct durable_file *f, uint32_t hosts, pod_err *err);
uint32_t durable_file_hosts(const struct durable_file *f);
/* fstat of the open file (the log directory's watch checks it is still
 * DIR/durable-epoch). */
int durable_file_stat(const struct durable_file *f, struct stat *st);
void durable_file_close(struct durable_file *f);

#endif
