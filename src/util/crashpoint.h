/* Crash points: places where a test may have the process die at once, as
 * SIGKILL at that instant would, to reach states a random kill hits too
 * rarely (a compute node between writing its rows and releasing them).
 * Off unless the environment says PODDB_CRASH_POINT=NAME:N: the N-th time
 * (1..) the process passes the point NAME, it prints a line to stderr and
 * kills itself with SIGKILL. */
#ifndef PODDB_UTIL_CRASHPOINT_H
#define PODDB_UTIL_CRASHPOINT_H

void pod_crash_point(const char *name);

#endif
