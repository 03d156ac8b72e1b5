/* The benchmark workloads by name, and their run knobs: the settings of a
 * run that change what transactions are generated but not the data
 * (docs/configuration.md, "workloads"). The config gives their defaults;
 * poddb-bench overrides them per run and passes them to the servers as text
 * "key=value,key=value" (the keys are the config keys). Shared by the
 * servers' bench.* procedures and poddb-bench. */
#ifndef PODDB_BENCH_KNOBS_H
#define PODDB_BENCH_KNOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf/config.h"

enum bench_wl { BENCH_TPCC, BENCH_YCSB, BENCH_SMALLBANK, BENCH_NWL };

const char *bench_wl_name(enum bench_wl w); /* "tpcc", "ycsb", "smallbank" */
/* The workload called name[0..len), or -1. */
int bench_wl_parse(const char *name, size_t len);
/* Whether the config declares the workload. */
bool bench_wl_enabled(const struct pod_config *c, enum bench_wl w);

struct bench_knobs {
    enum bench_wl wl;
    uint32_t remote_new_order_pct, remote_payment_pct; /* tpcc */
    uint32_t read_pct, multi_partition_pct;            /* ycsb */
    bool scramble;                                     /* ycsb */
    uint64_t hot_accounts;                             /* smallbank */
    uint32_t hot_pct, remote_pct;                      /* smallbank */
    double theta;                                      /* ycsb, smallbank */
};

/* The config's values (the workload need not be enabled: then the defaults
 * of an empty entry are not known and the fields are zero). */
void bench_knobs_from_conf(struct bench_knobs *k, const struct pod_config *c, enum bench_wl wl);

/* Set one knob of k's workload from text. -1 with a message naming the key
 * and what it accepts (an unknown key lists the workload's knobs). */
int bench_knobs_set(struct bench_knobs *k, const char *key, const char *value, char *err,
                    size_t errlen);

/* Apply "key=value,key=value" (len bytes; empty: nothing). 0 or -1 with err. */
int bench_knobs_apply(struct bench_knobs *k, const char *text, size_t len, char *err,
                      size_t errlen);

/* Every knob of k's workload as "key=value,..." (what bench_knobs_apply reads). */
void bench_knobs_format(const struct bench_knobs *k, char *buf, size_t n);

/* The knob names of a workload, comma separated (for messages and --help). */
const char *bench_knob_names(enum bench_wl wl);

#endif
