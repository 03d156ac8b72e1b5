/* Scalar parsers of the configuration: integers, decimal fractions, byte sizes
 * and CPU lists. Internal to src/conf/; they say *why* a text was rejected so
 * the loader can write a precise message (the public pod_parse_size and
 * pod_parse_cpu_list in config.h are thin wrappers). All take a NUL-terminated
 * string and accept no surrounding whitespace. */
#ifndef PODDB_CONF_VALUES_H
#define PODDB_CONF_VALUES_H

#include <stdint.h>

/* Highest CPU number a CPU list may name (a cpu_set_t holds CPU_SETSIZE). */
#define CONF_MAX_CPU 1023

enum conf_int_status {
    CONF_INT_OK = 0,
    CONF_INT_SYNTAX,       /* not [-]digits */
    CONF_INT_LEADING_ZERO, /* "010": octal in YAML 1.1, decimal elsewhere: refused */
    CONF_INT_OVERFLOW,     /* does not fit in int64_t */
};

/* A decimal integer with an optional leading '-'. */
enum conf_int_status conf_parse_int(const char *s, int64_t *out);

/* A non-negative decimal number without exponent: "1", "0.9", ".5" (at most 18
 * digits). Returns 0 or -1. Locale independent. */
int conf_parse_fraction(const char *s, double *out);

enum conf_size_status {
    CONF_SIZE_OK = 0,
    CONF_SIZE_SYNTAX,    /* not a number with an optional known unit */
    CONF_SIZE_NEGATIVE,  /* "-1GiB" */
    CONF_SIZE_TOO_LARGE, /* more than UINT64_MAX bytes */
    CONF_SIZE_NOT_WHOLE, /* "1.1KiB": a fraction that is not a whole number of bytes */
};

/* The list of units, for messages: "B, K/KiB, M/MiB, G/GiB, T/TiB, KB, MB, GB, TB". */
extern const char conf_size_units[];

enum conf_size_status conf_parse_size(const char *s, uint64_t *out);

/* Writes `bytes` as the largest binary unit that divides it exactly ("64MiB",
 * "1536KiB", "1000B") into buf. Returns buf. */
const char *conf_format_size(uint64_t bytes, char *buf, unsigned bufsz);

/* Parses "0-3,8,10-11" (blanks allowed around numbers) into cpus[0..max).
 * Returns the count, or -1 with *why set to a static phrase. */
int conf_parse_cpu_list(const char *s, int *cpus, int max, const char **why);

#endif
