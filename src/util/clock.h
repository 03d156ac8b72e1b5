/* Clocks in nanoseconds and a small fast random generator. */
#ifndef PODDB_UTIL_CLOCK_H
#define PODDB_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

/* For intervals and timeouts. */
static inline uint64_t pod_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CPU time of the calling thread. */
static inline uint64_t pod_thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wall-clock time: comparable across processes and (NTP-synchronised) hosts. */
static inline uint64_t pod_real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: cheap, good enough for backoff and workload generation. A
 * zero state (which xorshift would never leave) is replaced by a constant. */
static inline uint64_t pod_rand(uint64_t *state)
{
    uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

#endif
