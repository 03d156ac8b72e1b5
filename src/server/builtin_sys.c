/* Administrative procedures: sys.ping, sys.stats, sys.config, sys.procs,
 * sys.tables, sys.log, sys.pod, sys.checkpoint, sys.auth (docs/procedures.md).
 * They read server and engine state (sys.checkpoint asks the checkpoint
 * thread for a checkpoint); none touches a table. sys.auth is answered by the
 * server's loop (server/token.h) and never reaches a worker. */
#include "pod/cxl_index.h"
#include "pod/pod.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "engine/db.h"
#include "engine/watchdog.h"
#include "txn/cc.h"
#include "server/server.h"
#include "storage/table.h"
#include "store/record_store.h"
#include "util/clock.h"

static uint64_t rd(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }

/* sys.ping -> ["pong", host] */
static int sys_ping(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)tx;
    (void)a;
    (void)ctx;
    const struct pod_server_info *si = pod_server_info();
    pod_result_str(res, "pong");
    pod_result_i64(res, si ? si->host : -1);
    return POD_OK;
}

/* This host's pod counters as sys.pod and sys.stats report them; false
 * outside a pod of several hosts. */
struct pod_counters {
    struct pod_host_stats st;
    struct cxl_usage hwcc;
    struct cxl_index_usage index;
};

static bool pod_counters_get(pod_db *db, struct pod_counters *c)
{
    if (!db->pod) return false;
    pod_host_get_stats(db->pod, &c->st);
    struct cxl_region *r = pod_host_region(db->pod);
    cxl_usage_get(r, r->host, CXL_HWCC, &c->hwcc);
    cxl_index_host_usage(r, r->host, &c->index);
    return true;
}

static void name_i64_row(pod_result *res, const char *name, uint64_t v)
{
    pod_result_row(res);
    pod_result_str(res, name);
    pod_result_i64(res, (int64_t)v);
}

/* sys.stats -> first row: host, uptime_s, open connections, connections,
 * requests, bad frames; then one row per procedure that ran: name, commits,
 * user_aborts, errors, conflicts, one column per abort cause, gave_up; in a
 * pod of several hosts also rows [name, value] pod.moved_in, pod.moved_out,
 * pod.hwcc_used, pod.hwcc_quota (what poddb-bench reports). */
static int sys_stats(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)a;
    (void)ctx;
    pod_db *db = pod_txn_db(tx);
    const struct pod_server_info *si = pod_server_info();
    pod_result_i64(res, si ? si->host : -1);
    pod_result_f64(res, si ? (double)(pod_real_ns() - si->started_ns) / 1e9 : 0.0);
    pod_result_i64(res, si ? (int64_t)rd(&si->connections_open) : 0);
    pod_result_i64(res, si ? (int64_t)rd(&si->connections_total) : 0);
    pod_result_i64(res, si ? (int64_t)rd(&si->requests_total) : 0);
    pod_result_i64(res, si ? (int64_t)rd(&si->bad_frames) : 0);
    for (uint32_t p = 0; p < db->nprocs; p++) {
        struct pod_proc_stats s;
        pod_db_proc_stats(db, (int)p, &s);
        if (!s.commits && !s.user_aborts && !s.errors && !s.conflicts) continue;
        pod_result_row(res);
        pod_result_str(res, db->procs[p].name);
        pod_result_i64(res, (int64_t)s.commits);
        pod_result_i64(res, (int64_t)s.user_aborts);
        pod_result_i64(res, (int64_t)s.errors);
        pod_result_i64(res, (int64_t)s.conflicts);
        for (int c = 0; c < POD_CAUSE_COUNT; c++) pod_result_i64(res, (int64_t)s.by_cause[c]);
        pod_result_i64(res, (int64_t)s.gave_up);
    }
    /* The process's CPU time (user + system): an idle pod should use next to none. */
    struct rusage ru;
    uint64_t cpu_us = 0;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        cpu_us = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
                 (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    name_i64_row(res, "process.cpu_ms", cpu_us / 1000);
    /* Liveness: the oldest call running (this one included) and how many run. */
    name_i64_row(res, "calls.running", (uint64_t)pod_calls_running(db));
    name_i64_row(res, "calls.oldest_ms", pod_oldest_call(db, NULL, NULL) / 1000000);
    name_i64_row(res, "calls.handed_back", si ? rd(&si->calls_handed_back) : 0);
    /* Limits (docs/configuration.md, "server"): what the connections make
     * the server hold now, connections closed for a limit, and replies that
     * waited too long for durability. */
    name_i64_row(res, "server.buffered", si ? rd(&si->buffered) : 0);
    name_i64_row(res, "server.conn_limit_closes", si ? rd(&si->conn_limit_closes) : 0);
    name_i64_row(res, "server.server_limit_closes", si ? rd(&si->server_limit_closes) : 0);
    name_i64_row(res, "server.not_durable_replies", si ? rd(&si->not_durable_replies) : 0);
    name_i64_row(res, "server.stalls", si ? rd(&si->stalls) : 0);
    name_i64_row(res, "server.auth_timeouts", si ? rd(&si->auth_timeouts) : 0);
    /* The log directory lost under the server (docs/durability.md, "The log
     * directory watched"): this host's, and the lowest host's of the pod. */
    if (db->log) {
        struct log_host_stats ls;
        log_host_get_stats(db->log, &ls);
        name_i64_row(res, "log.dir_lost", ls.dir_lost);
        name_i64_row(res, "log.dir_lost_host", (uint64_t)(int64_t)ls.dir_lost_host);
    }
    /* What the record store sent to its memory (mode: dm: the fabric's
     * operations and round trips, docs/dm.md). */
    if (db->store && db->store->ops->counters) {
        struct rs_counters rc;
        db->store->ops->counters(db->store, &rc);
        name_i64_row(res, "store.reads", rc.reads);
        name_i64_row(res, "store.writes", rc.writes);
        name_i64_row(res, "store.cas", rc.cas);
        name_i64_row(res, "store.faa", rc.faa);
        name_i64_row(res, "store.round_trips", rc.round_trips);
    }
    /* Messages to other compute nodes (lotus's lock requests and releases). */
    if (db->cc && db->cc->messages) name_i64_row(res, "cc.messages", db->cc->messages(db));
    struct pod_counters pc;
    if (pod_counters_get(db, &pc)) {
        name_i64_row(res, "pod.moved_in", pc.st.moved_in);
        name_i64_row(res, "pod.moved_out", pc.st.moved_out);
        name_i64_row(res, "pod.hwcc_used", pc.hwcc.used);
        name_i64_row(res, "pod.hwcc_quota", pc.hwcc.quota);
        name_i64_row(res, "pod.waits", pc.st.waits);
        name_i64_row(res, "pod.wait_ns", pc.st.wait_ns);
        name_i64_row(res, "pod.waits_over_128us", pod_waits_at_least(&pc.st, 128));
    }
    return POD_OK;
}

static void kv_row(pod_result *res, int *row, const char *k, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void kv_row(pod_result *res, int *row, const char *k, const char *fmt, ...)
{
    char v[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    if ((*row)++) pod_result_row(res);
    pod_result_str(res, k);
    pod_result_str(res, v);
}

static void kv_u64(pod_result *res, int *row, const char *k, uint64_t v)
{
    kv_row(res, row, k, "%llu", (unsigned long long)v);
}

static void kv_bool(pod_result *res, int *row, const char *k, bool v)
{
    kv_row(res, row, k, "%s", v ? "true" : "false");
}

/* sys.config -> rows [key, value] of the effective configuration. */
static int sys_config(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)tx;
    (void)a;
    (void)ctx;
    const struct pod_server_info *si = pod_server_info();
    if (!si) return POD_OK;
    const struct pod_config *c = si->conf;
    int row = 0;
    kv_row(res, &row, "source", "%s", c->source);
    kv_row(res, &row, "digest", "%016llx", (unsigned long long)pod_config_digest(c));
    kv_row(res, &row, "mode", "%s", c->mode == POD_MODE_DM ? "dm" : "cxl");
    if (c->mode == POD_MODE_DM) {
        kv_row(res, &row, "dm.pod", "%s", c->dm.pod);
        kv_row(res, &row, "dm.provider", "%s", c->dm.provider);
        kv_row(res, &row, "dm.protocol", "%s", pod_dm_protocol_name(c->dm.protocol));
        if (c->dm.protocol != POD_DM_RS_2PL)
            kv_row(res, &row, "dm.undo_log_size", "%llu", (unsigned long long)c->dm.undo_log_size);
        if (pod_dm_multiversion(c->dm.protocol)) kv_row(res, &row, "dm.versions", "%d", c->dm.versions);
        kv_row(res, &row, "dm.replicas", "%d", c->dm.replicas);
        kv_row(res, &row, "dm.inflight", "%d", c->dm.inflight);
        for (int i = 0; i < c->dm.nmemnodes; i++)
            kv_row(res, &row, "dm.memnode", "%s", c->dm.memnodes[i]);
        kv_bool(res, &row, "dm.nic_model.enabled", c->dm.nic_model.enabled);
        if (c->dm.nic_model.enabled) {
            kv_row(res, &row, "dm.nic_model.rtt_us", "%g", c->dm.nic_model.rtt_us);
            kv_row(res, &row, "dm.nic_model.atomic_mops", "%g", c->dm.nic_model.atomic_mops);
            kv_row(res, &row, "dm.nic_model.rw_mops", "%g", c->dm.nic_model.rw_mops);
            kv_row(res, &row, "dm.nic_model.gbps", "%g", c->dm.nic_model.gbps);
        }
    } else {
        kv_row(res, &row, "region.path", "%s", c->region.path);
        kv_row(res, &row, "region.kind", "%s", pod_region_kind_name(c->region.kind));
        kv_u64(res, &row, "region.size", c->region.size);
        kv_u64(res, &row, "region.hwcc_budget", c->region.hwcc_budget);
        kv_row(res, &row, "region.numa_node", "%d", c->region.numa_node);
        kv_bool(res, &row, "region.simulate_noncoherent", c->region.simulate_noncoherent);
        kv_bool(res, &row, "region.allow_overcommit", c->region.allow_overcommit);
    }
    kv_row(res, &row, "hosts", "%d", c->nhosts);
    kv_row(res, &row, "host", "%d", si->host);
    const struct pod_host_conf *h = &c->hosts[si->host];
    kv_row(res, &row, "host.workers", "%d", h->workers);
    kv_row(res, &row, "host.loggers", "%d", h->loggers);
    kv_row(res, &row, "host.cpus", "%s", h->ncpus ? h->cpu_list : "(not pinned)");
    kv_row(res, &row, "host.socket", "%s", h->socket_path);
    kv_row(res, &row, "host.tcp_port", "%d", h->tcp_port);
    kv_row(res, &row, "host.tcp_token_file", "%s", h->tcp_port ? h->tcp_token_file : "");
    kv_bool(res, &row, "host.huge_pages", h->huge_pages);
    kv_row(res, &row, "host.log_dir", "%s", h->log_dir);
    kv_row(res, &row, "engine.epoch_ms", "%d", c->engine.epoch_ms);
    kv_row(res, &row, "engine.moveout_threshold", "%g", c->engine.moveout_threshold);
    kv_row(res, &row, "engine.moveback_rate", "%u", c->engine.moveback_rate);
    kv_row(res, &row, "engine.coherence", "%s", pod_coherence_name(c->engine.coherence));
    kv_bool(res, &row, "engine.phantom_protection", c->engine.phantom_protection);
    kv_u64(res, &row, "engine.checkpoint_after", c->engine.checkpoint_after);
    kv_row(res, &row, "engine.reply_before_durable", "%s",
           c->engine.reply_before_durable ? "true (NOT durable)" : "false");
    /* pod ablation knobs (docs/pod.md) */
    kv_row(res, &row, "engine.eviction", "%s", pod_eviction_name(c->engine.eviction));
    kv_bool(res, &row, "engine.shortcut_pointers", c->engine.shortcut_pointers);
    kv_bool(res, &row, "engine.dirty_tracking", c->engine.dirty_tracking);
    kv_bool(res, &row, "engine.locking", c->engine.locking);
    kv_row(res, &row, "engine.max_retries", "%u", c->engine.max_retries);
    kv_row(res, &row, "engine.retry_timeout_ms", "%u", c->engine.retry_timeout_ms);
    kv_row(res, &row, "engine.slow_call_ms", "%u", c->engine.slow_call_ms);
    kv_row(res, &row, "engine.durable_wait_ms", "%u", c->engine.durable_wait_ms);
    kv_row(res, &row, "server.max_conn_buffered", "%llu",
           (unsigned long long)c->server.max_conn_buffered);
    kv_row(res, &row, "server.max_buffered", "%llu", (unsigned long long)c->server.max_buffered);
    kv_row(res, &row, "server.max_calls_per_conn", "%u", c->server.max_calls_per_conn);
    kv_row(res, &row, "server.auth_timeout_ms", "%u", c->server.auth_timeout_ms);
    for (int i = 0; i < c->nmodules; i++) kv_row(res, &row, "module", "%s", c->modules[i]);
    return POD_OK;
}

/* sys.log -> rows [key, value]: the durability layer's epochs and counters,
 * and what recovery did at startup. */
static int sys_log(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)a;
    (void)ctx;
    pod_db *db = pod_txn_db(tx);
    const struct pod_server_info *si = pod_server_info();
    int row = 0;
    struct log_host *lh = db->log;
    kv_row(res, &row, "logging", "%s", lh && log_host_logging(lh) ? "on" : "off");
    if (lh) {
        struct log_host_stats st;
        log_host_get_stats(lh, &st);
        kv_u64(res, &row, "global_epoch", st.global_epoch);
        kv_u64(res, &row, "pod_durable_epoch", st.pod_durable_epoch);
        kv_u64(res, &row, "persisted_epoch", st.persisted_epoch);
        kv_u64(res, &row, "persisted_by_file", st.persisted_by_file);
        kv_u64(res, &row, "persisted_by_marks", st.persisted_by_marks);
        kv_u64(res, &row, "persisted_empty", st.persisted_empty);
        kv_row(res, &row, "dir_lost", "%s", st.dir_lost ? st.dir_lost_why : "no");
        kv_row(res, &row, "dir_lost_host", "%d", st.dir_lost_host);
        kv_u64(res, &row, "records", st.records);
        kv_u64(res, &row, "bytes", st.bytes);
        kv_u64(res, &row, "blocks", st.blocks);
        kv_u64(res, &row, "syncs", st.syncs);
        kv_row(res, &row, "sync_us_avg", "%.1f",
               st.syncs ? (double)st.sync_ns / (double)st.syncs / 1000.0 : 0.0);
        kv_row(res, &row, "sync_us_max", "%.1f", (double)st.sync_ns_max / 1000.0);
        kv_u64(res, &row, "segments", st.segments);
        kv_u64(res, &row, "direct_segments", st.direct_segments);
        kv_u64(res, &row, "write_errors", st.write_errors);
        kv_u64(res, &row, "checkpoints", st.checkpoints);
        kv_u64(res, &row, "checkpoint_epoch", st.checkpoint_epoch);
        kv_u64(res, &row, "checkpoint_deltas", st.checkpoint_deltas);
        kv_u64(res, &row, "segments_removed", st.segments_removed);
        kv_u64(res, &row, "checkpoint_failures", st.checkpoint_failures);
        kv_row(res, &row, "checkpoint_running", "%d", st.checkpoint_running ? 1 : 0);
        if (st.checkpoints) {
            const struct checkpoint_summary *c = &st.last_checkpoint;
            kv_row(res, &row, "last_checkpoint.kind", "%s", c->delta ? "delta" : "full");
            kv_u64(res, &row, "last_checkpoint.rows", c->rows);
            kv_u64(res, &row, "last_checkpoint.unchanged", c->unchanged);
            kv_u64(res, &row, "last_checkpoint.deleted_keys", c->deleted);
            kv_u64(res, &row, "last_checkpoint.bytes", c->bytes);
            kv_row(res, &row, "last_checkpoint.seconds", "%.3f", (double)c->ns / 1e9);
            kv_row(res, &row, "last_checkpoint.cpu_seconds", "%.3f", (double)c->cpu_ns / 1e9);
        }
    }
    if (si && si->recovery.ran) {
        const struct log_recovery_stats *r = &si->recovery;
        kv_u64(res, &row, "recovery.durable_epoch", r->durable_epoch);
        kv_u64(res, &row, "recovery.checkpoint_epoch", r->checkpoint_epoch);
        kv_u64(res, &row, "recovery.records_read", r->records_read);
        kv_u64(res, &row, "recovery.records_applied", r->records_applied);
        kv_u64(res, &row, "recovery.records_discarded", r->records_discarded);
        kv_u64(res, &row, "recovery.rows", r->rows);
        kv_row(res, &row, "recovery.seconds", "%.3f", r->seconds);
        kv_row(res, &row, "recovery.records_per_s", "%.0f",
               r->seconds > 0 ? (double)r->records_read / r->seconds : 0.0);
        kv_u64(res, &row, "recovery.torn_tails", r->torn_tails);
        kv_u64(res, &row, "recovery.corrupt_tails", r->corrupt_tails);
        kv_u64(res, &row, "recovery.patches_lost", r->patches_lost);
    }
    return POD_OK;
}

/* sys.checkpoint [full] -> rows [checkpoints, N], [checkpoint_failures, F]:
 * asks this host's checkpoint thread for a checkpoint now (a full one with
 * "full"); it is written once sys.log's checkpoints reaches N, or failed once
 * checkpoint_failures passes F. Returns at once: a worker must not wait for
 * a checkpoint, which waits for the pod's epochs. */
static int sys_checkpoint(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)ctx;
    bool full = false;
    if (a->n > 1 ||
        (a->n == 1 && (a->v[0].type != POD_T_BYTES || a->v[0].len != 4 ||
                       memcmp(a->v[0].u.bytes, "full", 4) != 0)))
        return pod_txn_fail(tx, POD_E_INVALID, "sys.checkpoint takes no argument, or \"full\"");
    if (a->n == 1) full = true;
    struct log_host *lh = pod_txn_db(tx)->log;
    if (!lh) return pod_txn_fail(tx, POD_E_INVALID, "this server does not log");
    uint64_t done_at;
    pod_err e;
    if (log_host_request_checkpoint(lh, full, &done_at, &e) != 0)
        return pod_txn_fail(tx, POD_E_INVALID, "no checkpoint: %s", e.msg);
    struct log_host_stats st;
    log_host_get_stats(lh, &st);
    pod_result_str(res, "checkpoints");
    pod_result_i64(res, (int64_t)done_at);
    name_i64_row(res, "checkpoint_failures", st.checkpoint_failures);
    return POD_OK;
}

/* sys.procs -> rows [id, name, nargs (-1: any), read_only (0/1)]. */
static int sys_procs(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)a;
    (void)ctx;
    pod_db *db = pod_txn_db(tx);
    for (uint32_t p = 0; p < db->nprocs; p++) {
        if (p) pod_result_row(res);
        pod_result_i64(res, p);
        pod_result_str(res, db->procs[p].name);
        pod_result_i64(res, db->procs[p].nargs);
        pod_result_i64(res, db->procs[p].read_only);
    }
    return POD_OK;
}

/* sys.tables -> rows [name, key_size, tuple_size, partitions, keys, index_bytes,
 * row_bytes]. */
static int sys_tables(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)a;
    (void)ctx;
    pod_db *db = pod_txn_db(tx);
    for (uint32_t i = 0; i < db->ntables; i++) {
        const pod_table *t = db->tables[i];
        uint64_t keys = 0, bytes = 0;
        for (uint32_t p = 0; p < t->nparts; p++) {
            bt_stats st;
            if (bt_get_stats(&t->parts[p].tree, &st) != BT_OK) continue;
            keys += st.keys;
            bytes += st.bytes;
        }
        if (i) pod_result_row(res);
        pod_result_str(res, t->name);
        pod_result_i64(res, t->key_size);
        pod_result_i64(res, t->tuple_size);
        pod_result_i64(res, t->nparts);
        pod_result_i64(res, (int64_t)keys);
        pod_result_i64(res, (int64_t)bytes);
        pod_result_i64(res, (int64_t)table_row_memory(t, keys));
    }
    return POD_OK;
}

/* sys.pod -> rows [name, value] of this host's pod counters (data movement,
 * messages, HWcc use). Empty outside a pod of several hosts. */
static int sys_pod(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)a;
    (void)ctx;
    struct pod_counters pc;
    if (!pod_counters_get(pod_txn_db(tx), &pc)) return POD_OK;
    const struct pod_host_stats *st = &pc.st;
    const struct cxl_usage *u = &pc.hwcc;
    const struct cxl_index_usage *iu = &pc.index;
    int row = 0;
    kv_u64(res, &row, "moved_in", st->moved_in);
    kv_u64(res, &row, "moved_out", st->moved_out);
    kv_u64(res, &row, "moved_batched", st->moved_batched);
    kv_u64(res, &row, "resident", iu->keys);
    kv_u64(res, &row, "msgs_sent", st->msgs_sent);
    kv_u64(res, &row, "msgs_served", st->msgs_served);
    kv_u64(res, &row, "waits", st->waits);
    kv_row(res, &row, "wait_us_avg", "%.1f",
           st->waits ? (double)st->wait_ns / 1e3 / (double)st->waits : 0.0);
    kv_u64(res, &row, "wait_us_p50", pod_wait_quantile_us(st, 0.5));
    kv_u64(res, &row, "wait_us_p99", pod_wait_quantile_us(st, 0.99));
    kv_u64(res, &row, "waits_over_128us", pod_waits_at_least(st, 128));
    kv_u64(res, &row, "remote_reads", st->remote_reads);
    kv_u64(res, &row, "remote_writes", st->remote_writes);
    kv_u64(res, &row, "busy_replies", st->busy_replies);
    kv_u64(res, &row, "nomem_replies", st->nomem_replies);
    kv_u64(res, &row, "moveout_runs", st->moveout_runs);
    kv_u64(res, &row, "compactions", st->compactions);
    kv_u64(res, &row, "hwcc_used", u->used);
    kv_u64(res, &row, "hwcc_quota", u->quota);
    kv_u64(res, &row, "hwcc_index_bytes", iu->hwcc_bytes);
    kv_u64(res, &row, "hwcc_record_bytes", (iu->keys * sizeof(cxl_record)));
    return POD_OK;
}

/* sys.auth TOKEN: the server's loop answers it, since what it changes is
 * the connection's state (server/token.h); a call that gets here came some
 * other way (a module's, say) and has no connection to authenticate. */
static int sys_auth(pod_txn *tx, const pod_args *a, pod_result *res, void *ctx)
{
    (void)a;
    (void)res;
    (void)ctx;
    return pod_txn_fail(tx, POD_E_INVALID, "sys.auth authenticates a TCP connection and is "
                        "answered by the server itself");
}

int pod_builtin_sys_init(pod_db *db, char *err, size_t errlen)
{
    static const enum pod_type auth_args[] = {POD_T_BYTES};
    const pod_proc_def defs[] = {
        {"sys.ping", sys_ping, NULL, 0, NULL, true},
        {"sys.stats", sys_stats, NULL, 0, NULL, true},
        {"sys.config", sys_config, NULL, 0, NULL, true},
        {"sys.procs", sys_procs, NULL, 0, NULL, true},
        {"sys.tables", sys_tables, NULL, 0, NULL, true},
        {"sys.log", sys_log, NULL, 0, NULL, true},
        {"sys.checkpoint", sys_checkpoint, NULL, -1, NULL, true},
        {"sys.pod", sys_pod, NULL, 0, NULL, true},
        {"sys.auth", sys_auth, NULL, 1, auth_args, true},
    };
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
        if (pod_proc_register(db, &defs[i], err, errlen) < 0) return -1;
    return 0;
}
