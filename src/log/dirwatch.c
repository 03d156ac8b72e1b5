/* The log directory watched; see dirwatch.h. */
#include "log/dirwatch.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log/claim.h"
#include "util/clock.h"
#include "util/log.h"

#define REMIND_EVERY_NS (10ull * 1000 * 1000 * 1000)
#define WARN_EVERY_NS (5ull * 1000 * 1000 * 1000)

struct file_id {
    dev_t dev;
    ino_t ino;
};

struct logdir_watch {
    char dir[PATH_MAX];
    struct file_id d, lock, ident;
    bool have_ident;
    uint32_t *lost_word;
    bool lost;              /* atomic */
    pthread_mutex_t mu;     /* why, the rate limits */
    char why[512];
    uint64_t reminded_at, warned_at;
};

static struct file_id id_of(const struct stat *st) { return (struct file_id){st->st_dev, st->st_ino}; }

static bool same(struct file_id a, const struct stat *st)
{
    return a.dev == st->st_dev && a.ino == st->st_ino;
}

struct logdir_watch *logdir_watch_new(const char *dir, int lock_fd, uint32_t *lost_word,
                                      pod_err *err)
{
    struct logdir_watch *w = calloc(1, sizeof *w);
    if (!w) {
        pod_err_set(err, "out of memory");
        return NULL;
    }
    snprintf(w->dir, sizeof w->dir, "%s", dir);
    w->lost_word = lost_word;
    pthread_mutex_init(&w->mu, NULL);
    struct stat st;
    char path[PATH_MAX + 16];
    if (fstat(lock_fd, &st) != 0) {
        pod_err_set(err, "cannot stat the lock of log directory %s: %s", dir, strerror(errno));
        goto fail;
    }
    w->lock = id_of(&st);
    if (stat(dir, &st) != 0) {
        pod_err_set(err, "cannot stat log directory %s: %s", dir, strerror(errno));
        goto fail;
    }
    w->d = id_of(&st);
    snprintf(path, sizeof path, "%s/%s", dir, LOGDIR_IDENTITY_NAME);
    if (lstat(path, &st) == 0) {
        w->ident = id_of(&st);
        w->have_ident = true;
    }
    return w;
fail:
    pthread_mutex_destroy(&w->mu);
    free(w);
    return NULL;
}

void logdir_watch_free(struct logdir_watch *w)
{
    if (!w) return;
    pthread_mutex_destroy(&w->mu);
    free(w);
}

bool logdir_watch_lost(const struct logdir_watch *w)
{
    return w && __atomic_load_n(&w->lost, __ATOMIC_ACQUIRE);
}

void logdir_watch_why(struct logdir_watch *w, char *buf, size_t len)
{
    pthread_mutex_lock(&w->mu);
    snprintf(buf, len, "%s", logdir_watch_lost(w) ? w->why : "");
    pthread_mutex_unlock(&w->mu);
}

static enum logdir_check lose(struct logdir_watch *w, const char *why)
{
    pthread_mutex_lock(&w->mu);
    if (!__atomic_load_n(&w->lost, __ATOMIC_ACQUIRE)) {
        snprintf(w->why, sizeof w->why, "%s", why);
        __atomic_store_n(&w->lost, true, __ATOMIC_SEQ_CST);
        if (w->lost_word) __atomic_store_n(w->lost_word, 1, __ATOMIC_SEQ_CST);
        w->reminded_at = pod_mono_ns();
        pod_error("log directory %s was lost while the server ran: %s. Whatever this host "
                  "logs now cannot be recovered: it acknowledges no more writes, and the pod's "
                  "durable epoch stays where it is (the replies of every host wait)", w->dir, why);
        pod_error("Stop the pod (tools/pod down, or SIGTERM to every host). What this host "
                  "logged in %s is gone unless the directory is restored from a copy; at the "
                  "next start the host refuses an empty log directory: restore it, or start the "
                  "host once with --allow-empty-log to go on without what it held "
                  "(docs/durability.md, \"The log directory watched\")", w->dir);
    }
    pthread_mutex_unlock(&w->mu);
    return LOGDIR_LOST;
}

static enum logdir_check unknown(struct logdir_watch *w, const char *path, int e)
{
    uint64_t now = pod_mono_ns();
    pthread_mutex_lock(&w->mu);
    if (!w->warned_at || now - w->warned_at >= WARN_EVERY_NS) {
        w->warned_at = now;
        pod_warn("cannot check that log directory %s is the one this server claimed (stat "
                 "%s: %s); this host's durable epoch waits until it can", w->dir, path,
                 strerror(e));
    }
    pthread_mutex_unlock(&w->mu);
    return LOGDIR_UNKNOWN;
}

/* The directory itself: gone, or another one at the path. */
static enum logdir_check check_dir(struct logdir_watch *w)
{
    struct stat st;
    char why[256];
    if (stat(w->dir, &st) != 0) {
        if (errno != ENOENT && errno != ENOTDIR) return unknown(w, w->dir, errno);
        snprintf(why, sizeof why, "the directory is gone (%s)", strerror(errno));
        return lose(w, why);
    }
    if (same(w->d, &st)) return LOGDIR_INTACT;
    snprintf(why, sizeof why, "the path names another directory now (inode %lu, the one "
             "claimed was inode %lu)", (unsigned long)st.st_ino, (unsigned long)w->d.ino);
    return lose(w, why);
}

/* DIR/name is the file id (what: how to call it in a message). */
static enum logdir_check check_file(struct logdir_watch *w, const char *name, struct file_id id,
                                    const char *what)
{
    char path[PATH_MAX + 64], why[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/%s", w->dir, name);
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno != ENOENT && errno != ENOTDIR) return unknown(w, path, errno);
        snprintf(why, sizeof why, "%s %s was removed", what, path);
        return lose(w, why);
    }
    if (same(id, &st)) return LOGDIR_INTACT;
    snprintf(why, sizeof why, "%s %s was replaced by another file (inode %lu, was %lu)", what,
             path, (unsigned long)st.st_ino, (unsigned long)id.ino);
    return lose(w, why);
}

enum logdir_check logdir_watch_file(struct logdir_watch *w, const char *name,
                                    const struct stat *st)
{
    if (logdir_watch_lost(w)) return LOGDIR_LOST;
    enum logdir_check r = check_dir(w);
    if (r != LOGDIR_INTACT || !name) return r;
    return check_file(w, name, id_of(st), "the log file");
}

enum logdir_check logdir_watch_check(struct logdir_watch *w)
{
    if (logdir_watch_lost(w)) return LOGDIR_LOST;
    enum logdir_check r = check_dir(w);
    if (r == LOGDIR_INTACT)
        r = check_file(w, LOGDIR_LOCK_NAME, w->lock,
                       "its lock file (another server could claim the directory now)");
    if (r == LOGDIR_INTACT && w->have_ident)
        r = check_file(w, LOGDIR_IDENTITY_NAME, w->ident, "its identity file");
    return r;
}

void logdir_watch_remind(struct logdir_watch *w)
{
    if (!logdir_watch_lost(w)) return;
    uint64_t now = pod_mono_ns();
    pthread_mutex_lock(&w->mu);
    if (now - w->reminded_at >= REMIND_EVERY_NS) {
        w->reminded_at = now;
        pod_error("log directory %s was lost (%s): this host acknowledges no more writes; stop "
                  "the pod (docs/durability.md, \"The log directory watched\")", w->dir, w->why);
    }
    pthread_mutex_unlock(&w->mu);
}
