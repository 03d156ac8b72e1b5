/* Scalar parsers of the configuration (see values.h). */
#include "conf/values.h"

#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "conf/config.h"

_Static_assert(CONF_MAX_CPU < CPU_SETSIZE, "a CPU list must fit a cpu_set_t");

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* ---- integers ---------------------------------------------------------------- */

enum conf_int_status conf_parse_int(const char *s, int64_t *out)
{
    const char *p = s;
    bool negative = false;
    if (*p == '-') {
        negative = true;
        p++;
    }
    if (!is_digit(*p)) return CONF_INT_SYNTAX;
    const char *digits = p;
    uint64_t magnitude = 0;
    bool overflow = false;
    for (; is_digit(*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (magnitude > (UINT64_MAX - d) / 10) overflow = true;
        else magnitude = magnitude * 10 + d;
    }
    /* Syntax before overflow: "99999999999999999999x" is not a number at all. */
    if (*p != '\0') return CONF_INT_SYNTAX;
    if (digits[0] == '0' && p - digits > 1) return CONF_INT_LEADING_ZERO;
    if (overflow) return CONF_INT_OVERFLOW;
    if (negative) {
        if (magnitude > (uint64_t)INT64_MAX + 1) return CONF_INT_OVERFLOW;
        *out = magnitude == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)magnitude;
    } else {
        if (magnitude > (uint64_t)INT64_MAX) return CONF_INT_OVERFLOW;
        *out = (int64_t)magnitude;
    }
    return CONF_INT_OK;
}

/* ---- decimal fractions --------------------------------------------------------- */

#define MAX_FRACTION_DIGITS 18

int conf_parse_fraction(const char *s, double *out)
{
    /* Powers of ten up to 1e22 are exact doubles. */
    static const double pow10[MAX_FRACTION_DIGITS + 1] = {
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9,
        1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
    };
    const char *p = s;
    uint64_t mantissa = 0;
    int ndigits = 0, nfraction = 0;

    if (p[0] == '0' && is_digit(p[1])) return -1; /* "00.5" */
    for (; is_digit(*p); p++, ndigits++) {
        if (ndigits == MAX_FRACTION_DIGITS) return -1;
        mantissa = mantissa * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.') {
        p++;
        if (!is_digit(*p)) return -1; /* "1." */
        for (; is_digit(*p); p++, ndigits++, nfraction++) {
            if (ndigits == MAX_FRACTION_DIGITS) return -1;
            mantissa = mantissa * 10 + (uint64_t)(*p - '0');
        }
    }
    if (ndigits == 0 || *p != '\0') return -1;
    /* One rounding of the mantissa and one of the division: the result is the
     * same on every host, which is what the config digest needs. */
    *out = (double)mantissa / pow10[nfraction];
    return 0;
}

/* ---- byte sizes ---------------------------------------------------------------- */

struct size_unit {
    const char *name;
    uint64_t bytes;
};

static const struct size_unit size_units[] = {
    {"B", 1},
    {"K", 1ULL << 10},       {"KiB", 1ULL << 10},
    {"M", 1ULL << 20},       {"MiB", 1ULL << 20},
    {"G", 1ULL << 30},       {"GiB", 1ULL << 30},
    {"T", 1ULL << 40},       {"TiB", 1ULL << 40},
    {"KB", 1000ULL},         {"MB", 1000ULL * 1000},
    {"GB", 1000ULL * 1000 * 1000}, {"TB", 1000ULL * 1000 * 1000 * 1000},
};

const char conf_size_units[] = "B, K/KiB, M/MiB, G/GiB, T/TiB (binary), KB, MB, GB, TB (decimal)";

static const struct size_unit *find_size_unit(const char *name)
{
    for (size_t i = 0; i < sizeof size_units / sizeof size_units[0]; i++)
        if (strcmp(size_units[i].name, name) == 0) return &size_units[i];
    return NULL;
}

/* The fraction digits after '.', as fraction / 10^scale_digits. Trailing zeros
 * are dropped so "1.50000000000000000000GiB" still parses. */
static enum conf_size_status parse_size_fraction(const char **pp, uint64_t *fraction,
                                                 int *scale_digits)
{
    const char *p = *pp;
    uint64_t value = 0;
    int digits = 0, pending_zeros = 0;
    if (!is_digit(*p)) return CONF_SIZE_SYNTAX;
    for (; is_digit(*p); p++) {
        if (*p == '0') {
            pending_zeros++;
            continue;
        }
        if (digits + pending_zeros + 1 > MAX_FRACTION_DIGITS) return CONF_SIZE_NOT_WHOLE;
        for (; pending_zeros > 0; pending_zeros--, digits++) value *= 10;
        value = value * 10 + (uint64_t)(*p - '0');
        digits++;
    }
    *pp = p;
    *fraction = value;
    *scale_digits = digits;
    return CONF_SIZE_OK;
}

enum conf_size_status conf_parse_size(const char *s, uint64_t *out)
{
    const char *p = s;
    if (p[0] == '-' && (is_digit(p[1]) || p[1] == '.')) return CONF_SIZE_NEGATIVE;
    if (!is_digit(*p)) return CONF_SIZE_SYNTAX;
    if (p[0] == '0' && is_digit(p[1])) return CONF_SIZE_SYNTAX; /* leading zero */

    uint64_t whole = 0;
    bool overflow = false;
    for (; is_digit(*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (whole > (UINT64_MAX - d) / 10) overflow = true;
        else whole = whole * 10 + d;
    }
    uint64_t fraction = 0;
    int scale_digits = 0;
    if (*p == '.') {
        p++;
        enum conf_size_status st = parse_size_fraction(&p, &fraction, &scale_digits);
        if (st != CONF_SIZE_OK) return st;
    }
    uint64_t unit = 1;
    if (*p == ' ') {
        while (*p == ' ') p++;
        if (*p == '\0') return CONF_SIZE_SYNTAX; /* trailing blank, no unit */
    }
    if (*p != '\0') {
        const struct size_unit *u = find_size_unit(p);
        if (!u) return CONF_SIZE_SYNTAX;
        unit = u->bytes;
    }
    if (overflow) return CONF_SIZE_TOO_LARGE;

    /* 128-bit products: whole * unit < 2^104, fraction * unit < 2^100. */
    unsigned __int128 scale = 1;
    for (int i = 0; i < scale_digits; i++) scale *= 10;
    unsigned __int128 fraction_bytes = (unsigned __int128)fraction * unit;
    if (fraction_bytes % scale != 0) return CONF_SIZE_NOT_WHOLE;
    unsigned __int128 total = (unsigned __int128)whole * unit + fraction_bytes / scale;
    if (total > UINT64_MAX) return CONF_SIZE_TOO_LARGE;
    *out = (uint64_t)total;
    return CONF_SIZE_OK;
}

int pod_parse_size(const char *s, uint64_t *out)
{
    uint64_t v;
    if (!s || !out || conf_parse_size(s, &v) != CONF_SIZE_OK) return -1;
    *out = v;
    return 0;
}

const char *conf_format_size(uint64_t bytes, char *buf, unsigned bufsz)
{
    static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    unsigned i = 0;
    while (bytes != 0 && bytes % 1024 == 0 && i + 1 < sizeof names / sizeof names[0]) {
        bytes /= 1024;
        i++;
    }
    snprintf(buf, bufsz, "%llu%s", (unsigned long long)bytes, names[i]);
    return buf;
}

/* ---- CPU lists ------------------------------------------------------------------ */

static const char *skip_blanks(const char *p)
{
    while (*p == ' ') p++;
    return p;
}

static int read_cpu_number(const char **pp, int *cpu, const char **why)
{
    const char *p = *pp;
    if (!is_digit(*p)) {
        bool empty = *p == ',' || *p == '-' || *p == '\0';
        *why = empty ? "an entry is empty" : "an entry is not a CPU number";
        return -1;
    }
    long v = 0;
    for (; is_digit(*p); p++) {
        if (v <= CONF_MAX_CPU) v = v * 10 + (*p - '0'); /* stop growing: no overflow */
    }
    if (v > CONF_MAX_CPU) {
        *why = "CPU numbers must be at most " STRINGIFY(CONF_MAX_CPU);
        return -1;
    }
    *pp = p;
    *cpu = (int)v;
    return 0;
}

int conf_parse_cpu_list(const char *s, int *cpus, int max, const char **why)
{
    unsigned char seen[(CONF_MAX_CPU + 8) / 8] = {0};
    int n = 0;
    const char *p = skip_blanks(s);
    if (*p == '\0') {
        *why = "it is empty";
        return -1;
    }
    for (;;) {
        int first, last;
        p = skip_blanks(p);
        if (read_cpu_number(&p, &first, why) < 0) return -1;
        last = first;
        p = skip_blanks(p);
        if (*p == '-') {
            p = skip_blanks(p + 1);
            if (read_cpu_number(&p, &last, why) < 0) return -1;
            if (last < first) {
                *why = "a range must go upwards, like 1-3";
                return -1;
            }
        }
        for (int cpu = first; cpu <= last; cpu++) {
            if (seen[cpu / 8] & (1u << (cpu % 8))) {
                *why = "a CPU appears twice";
                return -1;
            }
            if (n >= max) {
                *why = "it names too many CPUs";
                return -1;
            }
            seen[cpu / 8] |= (unsigned char)(1u << (cpu % 8));
            cpus[n++] = cpu;
        }
        p = skip_blanks(p);
        if (*p == '\0') return n;
        if (*p != ',') {
            *why = "entries must be separated by ','";
            return -1;
        }
        p++;
    }
}

int pod_parse_cpu_list(const char *s, int *cpus, int max)
{
    const char *why;
    if (!s || !cpus || max < 0) return -1;
    return conf_parse_cpu_list(s, cpus, max, &why);
}
