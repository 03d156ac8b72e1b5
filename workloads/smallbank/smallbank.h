/* SmallBank (Alomari et al., as used by the disaggregated-memory papers) as
 * PodDB stored procedures: schema, loader, the six transactions, an audit
 * and the input generator. docs/smallbank.md describes the design.
 *
 * Tables "accounts" (id -> name), "savings" (id -> balance), "checking"
 * (id -> balance); keys 8 bytes (big-endian id 0..accounts-1), range
 * partitioned: partition(id) = id * nparts / accounts. Money in cents. */
#ifndef PODDB_WORKLOADS_SMALLBANK_H
#define PODDB_WORKLOADS_SMALLBANK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "poddb/proc.h"
#include "workloads/ycsb/ycsb.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SB_KEY_SIZE 8
#define SB_NAME_LEN 24
#define SB_OVERDRAFT_PENALTY 100   /* cents: WriteCheck when overdrawn */

struct sb_config {
    uint64_t accounts;        /* >= 2 */
    uint32_t nparts;          /* >= 1, <= accounts */
    uint64_t hot;             /* hot accounts (>= 1, <= accounts); default 4% */
    uint32_t hot_pct;         /* share of account picks from the hot set (90) */
    int64_t min_balance, max_balance; /* initial balances, cents, per table */
    uint32_t hosts;           /* partition p lives on host p % hosts: a remote
                               * second account is on another host (0 or 1:
                               * in any other partition) */
    uint32_t load_batch;      /* accounts per loading transaction (default 100) */
    uint64_t seed;            /* loader data seed */
};

void sb_config_default(struct sb_config *c, uint64_t accounts, uint32_t nparts);

struct sb_account {
    uint64_t id;
    char name[SB_NAME_LEN];
};

struct sb_balance {
    int64_t bal;              /* cents */
};

uint32_t sb_part_of(uint64_t id, uint64_t accounts, uint32_t nparts);
uint64_t sb_part_first(uint32_t p, uint64_t accounts, uint32_t nparts);
uint32_t sb_partition(const void *key, uint32_t nparts, void *ctx); /* ctx: struct smallbank */

enum sb_table_id { SB_ACCOUNTS, SB_SAVINGS, SB_CHECKING, SB_NTABLES };
extern const char *const sb_table_names[SB_NTABLES];

enum sb_txn {
    SB_BALANCE, SB_DEPOSIT_CHECKING, SB_TRANSACT_SAVINGS, SB_AMALGAMATE, SB_WRITE_CHECK,
    SB_SEND_PAYMENT, SB_NTXNS
};
extern const char *const sb_txn_names[SB_NTXNS]; /* "smallbank.balance", ... */

/* Procedure arguments (i64) and results. Every transaction returns row 0:
 * (net, value): net is the money it created (> 0) or destroyed (< 0) in
 * cents, so the audit total moves by exactly the sum of the committed nets.
 * smallbank.balance          (id)               net 0, value savings + checking
 * smallbank.deposit_checking (id, amount >= 0)  net +amount, value new checking
 * smallbank.transact_savings (id, amount)       savings += amount; USER_ABORT if it
 *                                               would go negative; net +amount
 * smallbank.amalgamate       (id0, id1)         moves all of id0's savings and
 *                                               checking into id1's checking; net 0
 * smallbank.write_check      (id, amount >= 0)  checking -= amount, plus a 1.00
 *                                               penalty if savings + checking <
 *                                               amount; net -(amount [+ 100])
 * smallbank.send_payment     (id0, id1, amount) checking id0 -> id1; USER_ABORT if
 *                                               id0's checking < amount; net 0
 * smallbank.audit            ()                 read-only: total of all savings and
 *                                               checking (one i64), then the row count
 * smallbank.audit_partition (p)                the same for partition p only
 * smallbank.load             (from, to)         accounts from..to-1
 * An unknown account id is POD_USER_ABORT (as a failed name lookup). */

struct smallbank {
    struct sb_config cfg;
    pod_table *t[SB_NTABLES];
    int proc[SB_NTXNS];
    int proc_audit, proc_load, proc_audit_partition;
};

int sb_register(pod_db *db, const struct sb_config *cfg, char *err, size_t errlen);
struct smallbank *sb_get(pod_db *db);
void sb_free(pod_db *db);

typedef void (*sb_progress_fn)(uint64_t accounts_loaded, void *arg);
/* Populate (no workers running): one worker thread per range of partitions. */
int sb_load(pod_db *db, sb_progress_fn progress, void *progress_arg, char *err, size_t errlen);
/* smallbank.audit through the admin worker (no workers may run). 0 or -1. */
int sb_audit(pod_db *db, int64_t *total, char *err, size_t errlen);
/* smallbank.audit_partition(p) through wk (a worker on the calling thread,
 * outside any transaction; NULL: the admin worker): total and balance rows. */
struct pod_worker;
int sb_audit_partition(pod_db *db, struct pod_worker *wk, uint32_t p, int64_t *total,
                       uint64_t *rows, char *err, size_t errlen);
/* The initial balance of an account in one table (what the loader writes). */
int64_t sb_initial_balance(const struct sb_config *c, enum sb_table_id t, uint64_t id);

/* ---- input generation ------------------------------------------------------------- */

struct sb_call {
    enum sb_txn txn;
    int nargs;
    pod_value args[3];
    bool remote;              /* sb_next_call_home: the second account is in another partition */
};

uint64_t sb_rand(uint64_t *rng);
/* An account: hot_pct% from the hot set (hot ids spread evenly over the id
 * range, so over the partitions), else uniform over all accounts. */
uint64_t sb_pick_account(const struct sb_config *c, uint64_t *rng);
/* The next transaction of the mix Balance 15, DepositChecking 15,
 * TransactSavings 15, Amalgamate 15, WriteCheck 25, SendPayment 15. */
void sb_next_call(const struct sb_config *c, uint64_t *rng, struct sb_call *out);

/* Partition-local generation (the benchmark driver): a terminal has a home
 * partition; every account is picked in it, except that remote_pct% of the
 * Amalgamate/SendPayment calls take the second account from one other
 * partition. theta 0: the hot set of the config, scaled to the partition
 * (its share of `hot` spread over its ids); theta > 0: Zipfian with that skew
 * over the partition's ids (rank r is the r-th id), the generator of
 * workloads/ycsb. */
struct sb_gen {
    struct sb_config cfg;
    double theta;
    uint32_t remote_pct;
    struct ycsb_zipf zipf;    /* theta > 0: over the largest partition's size */
};

/* O(accounts / nparts) when theta > 0 (zeta); the result may be copied. */
void sb_gen_init(struct sb_gen *g, const struct sb_config *cfg, double theta, uint32_t remote_pct);
uint64_t sb_pick_in_partition(const struct sb_gen *g, uint64_t *rng, uint32_t p);
void sb_next_call_home(const struct sb_gen *g, uint64_t *rng, uint32_t home, struct sb_call *out);

#ifdef __cplusplus
}
#endif
#endif
