#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static char g_role[48] = "poddb";
static int g_level = -1; /* -1: not yet read from the environment */

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void pod_log_set_role(const char *role)
{
    snprintf(g_role, sizeof g_role, "%s", role);
}

void pod_log_set_level(enum pod_log_level lvl)
{
    __atomic_store_n(&g_level, (int)lvl, __ATOMIC_RELAXED);
}

enum pod_log_level pod_log_get_level(void)
{
    int lvl = __atomic_load_n(&g_level, __ATOMIC_RELAXED);
    if (lvl >= 0) return (enum pod_log_level)lvl;
    lvl = POD_LOG_INFO;
    const char *env = getenv("PODDB_LOG");
    if (env)
        for (int i = 0; i < 4; i++)
            if (strcasecmp(env, level_names[i]) == 0) lvl = i;
    __atomic_store_n(&g_level, lvl, __ATOMIC_RELAXED);
    return (enum pod_log_level)lvl;
}

void pod_log(enum pod_log_level lvl, const char *fmt, ...)
{
    if ((int)lvl > (int)pod_log_get_level()) return;
    char buf[1024];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    int n = snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03ld %s[%d] %s: ", tm.tm_hour,
                     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, g_role, (int)getpid(),
                     level_names[lvl]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof buf - 2) len = sizeof buf - 2; /* long message: cut, but keep the newline */
    buf[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w;
}
