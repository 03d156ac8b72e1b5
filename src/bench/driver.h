/* The benchmark driver's workload side, shared by the servers' internal mode
 * (src/bench/host.c) and poddb-bench's client mode: the data shape from the
 * config, terminals that generate the next transaction of the workload's mix
 * for their home partitions, and a tally of outcomes.
 *
 * Locality: a terminal of host h has home partitions among those h owns
 * (partition p is owned by host p % hosts), so that with the remote knobs at
 * 0 every transaction stays on its host; the knobs (remote NewOrder/Payment,
 * YCSB multi-partition, SmallBank remote) send a share to other partitions. */
#ifndef PODDB_BENCH_DRIVER_H
#define PODDB_BENCH_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

#include "bench/knobs.h"
#include "conf/config.h"
#include "workloads/smallbank/smallbank.h"
#include "workloads/tpcc/tpcc.h"
#include "workloads/ycsb/ycsb.h"

#define BENCH_MAX_TYPES 6   /* transaction types of a workload's mix */
/* Generator ids (TPC-C HISTORY keys): session << BENCH_SLOT_BITS | slot. */
#define BENCH_SLOT_BITS 10
#define BENCH_MAX_SESSION ((1u << (31 - BENCH_SLOT_BITS)) - 1)

/* The data shape of each workload as the config declares it (the workloads'
 * own config structs, run knobs at their config defaults). */
void bench_tpcc_config(const struct pod_config *c, struct tpcc_config *out);
void bench_ycsb_config(const struct pod_config *c, struct ycsb_config *out);
void bench_smallbank_config(const struct pod_config *c, struct sb_config *out);

/* One workload with the knobs of a run; read-only while terminals use it. */
struct bench_workload {
    enum bench_wl wl;
    struct bench_knobs knobs;
    int nhosts;
    uint32_t nparts;          /* warehouses / partitions */
    struct tpcc_config tpcc;
    struct ycsb_gen ycsb;     /* config + Zipfian constants */
    struct sb_gen sb;         /* config + Zipfian constants */
};

/* O(rows per partition) when a Zipfian skew is set (zeta). 0, or -1 with err
 * (the workload is not in the config, a knob is out of range). */
int bench_workload_init(struct bench_workload *w, const struct pod_config *c,
                        const struct bench_knobs *k, char *err, size_t errlen);

/* The transaction types of a workload's mix and their procedure names. */
int bench_ntypes(enum bench_wl wl);
const char *bench_type_name(enum bench_wl wl, int type);

/* Partitions owned by host h: h, h + hosts, h + 2*hosts, ... */
uint32_t bench_owned_count(const struct bench_workload *w, int host);

struct bench_terminal {
    const struct bench_workload *w;
    uint64_t rng;
    uint32_t home_first, home_step, nhomes; /* home partitions first + i*step, i < nhomes */
    struct tpcc_gen tpcc;
};

/* Terminal `term` of the `nterms` terminals of host h: the host's partitions
 * are dealt round robin (a terminal gets one or more; with more terminals
 * than partitions several share one). gen_id in 1..2^31-1 must be unique
 * among all terminals that ever ran on the data (BENCH_SLOT_BITS). -1 if the
 * host owns no partition. */
int bench_terminal_init(struct bench_terminal *t, const struct bench_workload *w, int host,
                        int term, int nterms, uint32_t gen_id, uint64_t seed);

/* One transaction, ready for pod_call or pod_client_send (args point into
 * the struct: do not copy it while they are in use). */
struct bench_call {
    enum bench_wl wl;
    int type;
    bool remote;              /* touches a partition other than its home */
    bool rollback;            /* TPC-C NewOrder meant to roll back (spec 1%) */
    uint32_t nwrites;         /* YCSB: read-modify-write operations */
    int nargs;
    const pod_value *args;
    union {
        struct tpcc_call tpcc;
        struct ycsb_call ycsb;
        struct sb_call sb;
    } u;
};

void bench_next(struct bench_terminal *t, struct bench_call *c);

/* Outcomes of calls. A call committed when its status is >= 0. */
struct bench_tally {
    uint64_t calls[BENCH_MAX_TYPES], commits[BENCH_MAX_TYPES];
    uint64_t user_aborts[BENCH_MAX_TYPES], errors[BENCH_MAX_TYPES];
    uint64_t rollbacks;       /* TPC-C: generated rollbacks that rolled back (in user_aborts) */
    uint64_t remote_calls, remote_commits;
    uint64_t rmw_ops;         /* YCSB: committed read-modify-writes */
    int64_t net;              /* SmallBank: money created by committed calls (cents) */
};

/* value0: the first value of the result (SmallBank's net); 0 if none. */
void bench_tally_add(struct bench_tally *t, const struct bench_call *c, int status, int64_t value0);
void bench_tally_merge(struct bench_tally *into, const struct bench_tally *from);
uint64_t bench_tally_sum(const uint64_t v[BENCH_MAX_TYPES]);

#endif
