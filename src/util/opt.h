/* Command-line numbers for the benchmark tools. */
#ifndef PODDB_UTIL_OPT_H
#define PODDB_UTIL_OPT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* arg as a whole number in lo..hi for option --name of program prog; false
 * (after saying why on stderr, with the unit) when it is not one. */
static inline bool pod_opt_u64(const char *prog, const char *name, const char *arg, uint64_t lo,
                               uint64_t hi, const char *unit, uint64_t *out)
{
    char *end;
    unsigned long long v = strtoull(arg, &end, 10);
    if (!*arg || *end || *arg == '-' || v < lo || v > hi) {
        fprintf(stderr, "%s: --%s: want %llu..%llu %s, not '%s'\n", prog, name,
                (unsigned long long)lo, (unsigned long long)hi, unit, arg);
        return false;
    }
    *out = v;
    return true;
}

#endif
