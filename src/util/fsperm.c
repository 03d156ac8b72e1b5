/* Whose a path is; see fsperm.h. */
#include "util/fsperm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static bool trusted_owner(uid_t uid) { return uid == 0 || uid == geteuid(); }

static const char *user_name(uid_t uid, char *buf, size_t len)
{
    struct passwd pw, *res = NULL;
    char tmp[1024];
    if (getpwuid_r(uid, &pw, tmp, sizeof tmp, &res) == 0 && res)
        snprintf(buf, len, " (%s)", res->pw_name);
    else
        buf[0] = 0;
    return buf;
}

/* "PATH is owned by uid U (name) with mode M" into buf. */
static const char *describe(const char *path, const struct stat *st, char *buf, size_t len)
{
    char name[96];
    snprintf(buf, len, "%s is owned by uid %u%s with mode %04o", path, (unsigned)st->st_uid,
             user_name(st->st_uid, name, sizeof name), (unsigned)(st->st_mode & 07777));
    return buf;
}

/* Why st cannot be trusted, or NULL. */
static const char *distrust(const struct stat *st)
{
    if (!trusted_owner(st->st_uid)) return "it must belong to this user or root";
    bool sticky_dir = S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX);
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !sticky_dir)
        return S_ISDIR(st->st_mode) ? "it is writable by group or others and not sticky"
                                    : "it is writable by group or others";
    return NULL;
}

/* "WHAT SUBJECT is owned by ..." or, for a directory above it, "WHAT
 * SUBJECT: the directory PATH above it is owned by ...". */
static int refuse(const char *what, const char *subject, const char *path, const struct stat *st,
                  const char *why, pod_err *err)
{
    char d[PATH_MAX + 128];
    describe(path, st, d, sizeof d);
    if (strcmp(subject, path) == 0)
        pod_err_set(err, "%s %s; refusing it: %s (this process runs as uid %u)", what, d, why,
                    (unsigned)geteuid());
    else
        pod_err_set(err, "%s %s: the directory %s; refusing it: %s (whoever owns or may write "
                    "a directory above a path can replace what lies below it; this process runs "
                    "as uid %u)", what, subject, d, why, (unsigned)geteuid());
    return -1;
}

int pod_check_trusted(const char *what, const char *path, const struct stat *st, pod_err *err)
{
    const char *why = distrust(st);
    return why ? refuse(what, path, path, st, why, err) : 0;
}

/* Check one existing path for `what` (subject: how the message names it).
 * 1 when it does not exist, 0 when trusted, -1 with err. */
static int check_one(const char *what, const char *subject, const char *path, pod_err *err)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return 1;
        pod_err_set(err, "%s %s: cannot stat %s: %s", what, subject, path, strerror(errno));
        return -1;
    }
    if (S_ISLNK(st.st_mode)) {
        if (!trusted_owner(st.st_uid))
            return refuse(what, subject, path, &st, "a symbolic link must belong to this user "
                          "or root", err);
        if (stat(path, &st) != 0) {
            if (errno == ENOENT) return 1;
            pod_err_set(err, "%s %s: cannot stat %s: %s", what, subject, path, strerror(errno));
            return -1;
        }
    }
    const char *why = distrust(&st);
    return why ? refuse(what, subject, path, &st, why, err) : 0;
}

int pod_check_parents(const char *what, const char *path, pod_err *err)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) {
        pod_err_set(err, "%s %s: path too long", what, path);
        return -1;
    }
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0; /* "dir/" is dir */
    char *last = strrchr(p, '/');
    /* The start: "/" for an absolute path, "." for a relative one. */
    if (check_one(what, path, p[0] == '/' ? "/" : ".", err) < 0) return -1;
    if (!last || last == p) return 0;
    *last = 0; /* p is the parent now; check each prefix of it, down to it */
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != 0) continue;
        char c = *s;
        *s = 0;
        int rc = check_one(what, path, p, err);
        *s = c;
        if (rc < 0) return -1;
        if (rc > 0 || c == 0) return 0; /* nothing below a missing one exists */
    }
}

int pod_check_path(const char *what, const char *path, pod_err *err)
{
    int rc = check_one(what, path, path, err);
    if (rc > 0) pod_err_set(err, "%s %s does not exist", what, path);
    return rc ? -1 : 0;
}

int pod_create_private(const char *path, int flags)
{
    int fd = open(path, flags | O_CREAT, 0600);
    if (fd < 0 || fchmod(fd, 0600) == 0) return fd;
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

int pod_mkdir_private(const char *path)
{
    if (mkdir(path, 0700) != 0) return -1;
    return chmod(path, 0700);
}
