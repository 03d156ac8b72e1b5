/* Sections of the configuration parsed outside src/conf/: each workload under
 * `workloads:` (workloads/tpcc, ycsb, smallbank) parses its own mapping with
 * the loader's key tables and typed getters, so its messages are the
 * loader's: "FILE:LINE:COL: workloads.tpcc.warehouses: 0 is out of range
 * (1..10000)".
 *
 * The sections are named in one table, pod_workload_sections
 * (workloads/common/sections.c), which the loader reads: the keys a
 * `workloads:` mapping may hold are exactly its entries. The parsed value of
 * each sits in the pod_config (pod_config_section) and enters its digest
 * through the section's digest function. */
#ifndef PODDB_CONF_SECTION_H
#define PODDB_CONF_SECTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf/config.h"
#include "conf/yaml_tree.h"

/* The file being read, for messages (opaque). */
struct conf_reader;

/* A key a mapping may hold. */
struct conf_key {
    const char *key;
    bool required;      /* (for hosts: required after merging host_defaults) */
    const char *expect; /* what the value should be, for messages */
};

/* One key of a mapping as found in the file. */
struct conf_item {
    const struct conf_key *spec;
    const struct ynode *key;   /* NULL: the key is absent */
    const struct ynode *value;
    char path[64];             /* dotted path for messages: "hosts[3].workers" */
};

struct conf_section {
    const char *name;   /* its key under `workloads:` ("tpcc") */
    const char *expect; /* what its value should be, for messages */
    size_t size;        /* bytes of its parsed value: at most POD_SECTION_BYTES */
    /* Parse the section: it (its key, its value, its path "workloads.tpcc")
     * into out (size bytes, zeroed), with the pod's host count for defaults.
     * 0, or -1 with the message set through conf_fail or a getter. */
    int (*parse)(const struct conf_reader *r, const struct conf_item *it, int nhosts, void *out);
    /* Feed the parsed value to the config's digest (conf_digest_*): every
     * value that must match across the pod's hosts. */
    void (*digest)(const void *value, uint64_t *h);
};

/* What the common values should be, for a conf_key's expect. */
#define CONF_PCT_EXPECT "an integer in 0..100 (percent)"
#define CONF_THETA_EXPECT "a number in [0, 1), like 0.99"
#define CONF_BOOL_EXPECT "true, false, yes, no, on or off"

/* The sections under `workloads:`, in the order of their index in
 * pod_config.sections, NULL-terminated (workloads/common/sections.c). */
extern const struct conf_section *const pod_workload_sections[];

/* Set the message "FILE:LINE:COL: KEY: what" for node (KEY may be NULL);
 * returns -1. */
int conf_fail(const struct conf_reader *r, const struct ynode *node, const char *key,
              const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Fill items[0..n) from the section's value, a mapping whose keys are all in
 * specs[] and appear once (NULL or an empty value: no keys, every default);
 * each item's path is the section's path, '.', its key. 0 or -1. */
int conf_read_section(const struct conf_reader *r, const struct conf_item *section,
                      const struct conf_key *specs, int n, struct conf_item *items);

/* Typed getters of an item's value (a plain scalar): convert it or fail with
 * the file, line, column and key. 0 or -1. */
int conf_get_i64(const struct conf_reader *r, const struct conf_item *it, int64_t min,
                 int64_t max, int64_t *out);
int conf_get_u32(const struct conf_reader *r, const struct conf_item *it, int min, int max,
                 uint32_t *out);
int conf_get_bool(const struct conf_reader *r, const struct conf_item *it, bool *out);
/* One of names[0..n): *out its index. */
int conf_get_enum(const struct conf_reader *r, const struct conf_item *it,
                  const char *const *names, int n, int *out);
/* A Zipfian skew: a decimal number in [0, 1). */
int conf_get_theta(const struct conf_reader *r, const struct conf_item *it, double *out);

/* The digest's value encodings (digest.c). */
void conf_digest_u64(uint64_t *h, uint64_t v);
void conf_digest_double(uint64_t *h, double d);

#endif
