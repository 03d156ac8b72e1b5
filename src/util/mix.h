/* A 64-bit finalizer (MurmurHash3's fmix64): every input bit changes about
 * half of the output bits. Seeds workload data and terminal streams from
 * small numbers (a key, a terminal id) so that neighbours look unrelated. */
#ifndef PODDB_UTIL_MIX_H
#define PODDB_UTIL_MIX_H

#include <stdint.h>

/* conf/digest.c keeps its own (splitmix64's) finalizer: its digests must not change. */
static inline uint64_t pod_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

#endif
