#include "log/logdir.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log/durable_file.h"
#include "util/fsperm.h"
#include "util/log.h"

static int seg_cmp(const void *a, const void *b)
{
    const struct logdir_seg *x = a, *y = b;
    if (x->host != y->host) return x->host < y->host ? -1 : 1;
    if (x->logger != y->logger) return x->logger < y->logger ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int ckpt_cmp(const void *a, const void *b)
{
    const struct logdir_ckpt *x = a, *y = b;
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    return (int)x->tmp - (int)y->tmp;
}

int logdir_scan(const char *dir, struct logdir *out, pod_err *err)
{
    memset(out, 0, sizeof *out);
    DIR *d = opendir(dir);
    if (!d) {
        pod_err_set(err, "cannot read log directory %s: %s", dir, strerror(errno));
        return -1;
    }
    int scap = 0, ccap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        struct logdir_seg s;
        struct logdir_ckpt c;
        size_t nlen = strlen(e->d_name);
        if (nlen >= SEG_NAME_MAX) continue; /* not one of ours */
        if (seg_parse_name(e->d_name, &s.host, &s.logger, &s.seq)) {
            if (out->nsegs == scap) {
                scap = scap ? 2 * scap : 64;
                void *n = realloc(out->segs, (size_t)scap * sizeof *out->segs);
                if (!n) goto nomem;
                out->segs = n;
            }
            memcpy(s.name, e->d_name, nlen + 1);
            out->segs[out->nsegs++] = s;
        } else if (seg_parse_ckpt_name(e->d_name, &c.host, &c.seq, &c.tmp)) {
            if (out->nckpts == ccap) {
                ccap = ccap ? 2 * ccap : 8;
                void *n = realloc(out->ckpts, (size_t)ccap * sizeof *out->ckpts);
                if (!n) goto nomem;
                out->ckpts = n;
            }
            memcpy(c.name, e->d_name, nlen + 1);
            out->ckpts[out->nckpts++] = c;
        } else if (strcmp(e->d_name, DURABLE_FILE_NAME) == 0) {
            out->has_durable_file = true;
        }
    }
    closedir(d);
    if (out->nsegs) qsort(out->segs, (size_t)out->nsegs, sizeof *out->segs, seg_cmp);
    if (out->nckpts) qsort(out->ckpts, (size_t)out->nckpts, sizeof *out->ckpts, ckpt_cmp);
    return 0;
nomem:
    closedir(d);
    logdir_free(out);
    pod_err_set(err, "out of memory listing %s", dir);
    return -1;
}

void logdir_free(struct logdir *d)
{
    free(d->segs);
    free(d->ckpts);
    memset(d, 0, sizeof *d);
}

static int ckpt_header(const char *dir, const char *name, struct seg_header *h, pod_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct seg_reader *r = seg_reader_open(path, err);
    if (!r) return -1;
    *h = *seg_reader_header(r);
    seg_reader_close(r);
    return 0;
}

int logdir_ckpt_chain(const char *dir, const struct logdir *d, uint32_t host, int *chain, int *n,
                      struct seg_header *newest, pod_err *err)
{
    int k = 0;
    struct seg_header h, prev = {0}; /* prev: the later checkpoint of the chain */
    for (int i = d->nckpts; i-- > 0;) {
        const struct logdir_ckpt *c = &d->ckpts[i];
        if (c->tmp || c->host != host) continue;
        if (ckpt_header(dir, c->name, &h, err)) return -1;
        if (k && h.first_epoch != prev.since_epoch) {
            pod_err_set(err, "%s/%s: the delta checkpoint after it was taken since epoch %" PRIu64
                        ", but this one started at epoch %" PRIu64 ": a checkpoint between them "
                        "is missing", dir, c->name, prev.since_epoch, h.first_epoch);
            return -1;
        }
        if (!k) *newest = h;
        chain[k++] = i;
        prev = h;
        if (!(h.ckpt_flags & SEG_CKPT_DELTA)) break;
    }
    if (k && (prev.ckpt_flags & SEG_CKPT_DELTA)) {
        pod_err_set(err, "%s: the oldest checkpoint of the newest chain (seq %" PRIu64 ") is a delta "
                    "since epoch %" PRIu64 ", and no checkpoint before it is left",
                    dir, prev.seq, prev.since_epoch);
        return -1;
    }
    for (int a = 0, b = k - 1; a < b; a++, b--) { /* oldest first */
        int t = chain[a];
        chain[a] = chain[b];
        chain[b] = t;
    }
    *n = k;
    return 0;
}

/* mkdir -p, each directory it makes 0700. */
static int make_dirs(const char *dir, pod_err *err)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) {
        pod_err_set(err, "log directory path too long: %s", dir);
        return -1;
    }
    for (char *s = p + 1;; s++) {
        bool end = *s == 0;
        if (*s == '/' || end) {
            *s = 0;
            if (pod_mkdir_private(p) != 0 && errno != EEXIST) {
                pod_err_set(err, "cannot create log directory %s: %s", p, strerror(errno));
                return -1;
            }
            if (end) break;
            *s = '/';
        }
    }
    return 0;
}

int logdir_prepare(const char *dir, pod_err *err)
{
    /* The directories above it are checked before anything is created in
     * them, and again after (one may have appeared meanwhile). */
    if (pod_check_parents("log directory", dir, err) || make_dirs(dir, err) ||
        pod_check_parents("log directory", dir, err) ||
        pod_check_path("log directory", dir, err))
        return -1;
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        pod_err_set(err, "log directory %s is not a directory", dir);
        return -1;
    }
    /* One made before (by hand, or by an older build: 0755) may let others
     * read the pod's data. */
    if (sb.st_uid == geteuid() && (sb.st_mode & 077)) {
        if (chmod(dir, 0700) == 0)
            pod_info("log directory %s had mode %04o, now 0700 (only this user may read the "
                     "pod's log)", dir, (unsigned)(sb.st_mode & 07777));
        else
            pod_warn("cannot make log directory %s private (mode %04o): %s", dir,
                     (unsigned)(sb.st_mode & 07777), strerror(errno));
    }
    return 0;
}
