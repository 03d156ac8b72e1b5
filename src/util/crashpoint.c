/* Crash points (crashpoint.h). */
#include "util/crashpoint.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char point[64];
static long left; /* passes until the crash; <= 0: none armed */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void arm(void)
{
    const char *env = getenv("PODDB_CRASH_POINT");
    const char *colon = env ? strrchr(env, ':') : NULL;
    if (!colon || (size_t)(colon - env) >= sizeof point) return;
    memcpy(point, env, (size_t)(colon - env));
    left = strtol(colon + 1, NULL, 10);
}

void pod_crash_point(const char *name)
{
    pthread_once(&once, arm);
    if (__atomic_load_n(&left, __ATOMIC_RELAXED) <= 0 || strcmp(name, point) != 0) return;
    if (__atomic_sub_fetch(&left, 1, __ATOMIC_ACQ_REL) != 0) return;
    fprintf(stderr, "crash point %s reached: killing this process (PODDB_CRASH_POINT)\n", name);
    kill(getpid(), SIGKILL);
}
