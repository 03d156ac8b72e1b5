/* The configuration loader: the shipped configuration files in conf/ parse, the digest
 * depends on the parsed values and nothing else, the size and CPU list parsers
 * follow their rules, and every kind of bad input gives a clean error that names
 * the right line, column and key. Random damage to a good file never crashes. */
#include <check.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf/config.h"
#include "helpers/testutil.h"
#include "workloads/smallbank/conf.h"
#include "workloads/tpcc/conf.h"
#include "workloads/tpcc/tpcc.h"
#include "workloads/ycsb/conf.h"

/* ---- helpers ---------------------------------------------------------------------- */

/* A repository file: relative to the cwd (the Makefile runs tests from the repo
 * root), else relative to this binary (build/test/<variant>/test_config). */
static const char *repo_file(const char *rel)
{
    static char buf[PATH_MAX + 64];
    if (access(rel, R_OK) == 0) return rel;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return rel;
    exe[n] = '\0';
    snprintf(buf, sizeof buf, "%s/../../../%s", dirname(exe), rel);
    return buf;
}

/* A config from a string; fails the test with the message if it does not parse. */
static struct pod_config *parse_ok(const char *text)
{
    static struct pod_config cfg;
    pod_err err = {{0}};
    int rc = pod_config_parse("t.yaml", text, strlen(text), &cfg, &err);
    ck_assert_msg(rc == 0, "expected success, got: %s", err.msg);
    return &cfg;
}

/* Parses and checks that the message starts with "t.yaml:" + expected. */
static void expect_error_len(const char *text, size_t len, const char *expected)
{
    struct pod_config cfg;
    pod_err err = {{0}};
    char want[512];
    snprintf(want, sizeof want, "t.yaml:%s", expected);
    int rc = pod_config_parse("t.yaml", text, len, &cfg, &err);
    ck_assert_msg(rc == -1, "expected an error starting \"%s\", but it parsed", want);
    ck_assert_msg(strncmp(err.msg, want, strlen(want)) == 0, "expected \"%s...\"\n     got \"%s\"",
                  want, err.msg);
}

static void expect_error(const char *text, const char *expected)
{
    expect_error_len(text, strlen(text), expected);
}

static uint64_t digest_of(const char *text) { return pod_config_digest(parse_ok(text)); }

/* Lines 1-5 and 6-9 of most test configurations. */
#define REGION_OK                                                                          \
    "region:\n"                                                                            \
    "  path: /dev/shm/poddb-test\n"                                                        \
    "  kind: shm\n"                                                                        \
    "  size: 1GiB\n"                                                                       \
    "  hwcc_budget: 64MiB\n"
#define HOSTS_OK                                                                           \
    "hosts:\n"                                                                             \
    "  - workers: 2\n"                                                                     \
    "    socket: /tmp/poddb-test-0.sock\n"                                                 \
    "    log_dir: /tmp/poddb-test-0\n"
/* host_defaults on lines 6-9 with every required host key. */
#define DEFAULTS_OK                                                                        \
    "host_defaults:\n"                                                                     \
    "  workers: 1\n"                                                                       \
    "  socket: /tmp/poddb-test-{host}.sock\n"                                              \
    "  log_dir: /tmp/poddb-test/log-{host}\n"
/* A dm config: mode and dm on lines 1-5, hosts on 6-11, engine on 12-13. */
#define DM_SECTION_OK                                                                      \
    "mode: dm\n"                                                                           \
    "dm:\n"                                                                                \
    "  pod: dm-pod.1\n"                                                                    \
    "  memnodes:\n"                                                                        \
    "    - /tmp/poddb-test-mn0.sock\n"
#define DM_HOSTS_OK                                                                        \
    "host_defaults:\n"                                                                     \
    "  workers: 1\n"                                                                       \
    "  socket: /tmp/poddb-test-{host}.sock\n"                                              \
    "hosts:\n"                                                                             \
    "  - {}\n"                                                                             \
    "  - {}\n"
#define DM_ENGINE_OK                                                                       \
    "engine:\n"                                                                            \
    "  phantom_protection: false\n"
#define DM_OK DM_SECTION_OK DM_HOSTS_OK DM_ENGINE_OK
#define REPEAT4(s) s s s s
#define REPEAT16(s) REPEAT4(REPEAT4(s))

/* ---- the shipped files ------------------------------------------------------------- */

START_TEST(test_default_pod_file)
{
    struct pod_config cfg;
    pod_err err = {{0}};
    ck_assert_msg(pod_config_load(repo_file("conf/pod.yaml"), &cfg, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(cfg.region.path, "/dev/shm/poddb-default");
    ck_assert_int_eq(cfg.region.kind, POD_REGION_SHM);
    ck_assert_uint_eq(cfg.region.size, 1ULL << 30);
    ck_assert_uint_eq(cfg.region.hwcc_budget, 64ULL << 20);
    ck_assert_int_eq(cfg.region.numa_node, -1);
    ck_assert(!cfg.region.simulate_noncoherent);
    ck_assert(!cfg.region.allow_overcommit);
    ck_assert_int_eq(cfg.nhosts, 2);
    for (int i = 0; i < 2; i++) {
        char want[64];
        const struct pod_host_conf *h = &cfg.hosts[i];
        ck_assert_int_eq(h->workers, 1);
        ck_assert_int_eq(h->loggers, 1);
        ck_assert_int_eq(h->ncpus, 1);
        ck_assert_int_eq(h->cpus[0], i);
        snprintf(want, sizeof want, "/tmp/poddb-default-%d.sock", i);
        ck_assert_str_eq(h->socket_path, want);
        snprintf(want, sizeof want, "/tmp/poddb-default/log-%d", i);
        ck_assert_str_eq(h->log_dir, want);
    }
    ck_assert_int_eq(cfg.engine.epoch_ms, 10);
    ck_assert(cfg.engine.moveout_threshold == 0.9);
    ck_assert_uint_eq(cfg.engine.moveback_rate, 0);
    ck_assert_int_eq(cfg.engine.coherence, POD_COH_FULL);
    ck_assert(cfg.engine.phantom_protection);
    ck_assert_str_eq(cfg.source, repo_file("conf/pod.yaml"));
}
END_TEST

START_TEST(test_numa_8host_file)
{
    struct pod_config cfg;
    pod_err err = {{0}};
    ck_assert_msg(pod_config_load(repo_file("conf/numa-8host.yaml"), &cfg, &err) == 0, "%s",
                  err.msg);
    ck_assert_int_eq(cfg.nhosts, 8);
    ck_assert_int_eq(cfg.region.numa_node, 1);
    ck_assert_uint_eq(cfg.region.size, 64ULL << 30);
    ck_assert_uint_eq(cfg.region.hwcc_budget, 200ULL << 20);
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(cfg.hosts[i].workers, 4);
        ck_assert_int_eq(cfg.hosts[i].ncpus, 4);
        ck_assert_int_eq(cfg.hosts[i].cpus[0], 4 * i);
        ck_assert_int_eq(cfg.hosts[i].cpus[3], 4 * i + 3);
    }
}
END_TEST

START_TEST(test_bench_file)
{
    struct pod_config cfg;
    pod_err err = {{0}};
    ck_assert_msg(pod_config_load(repo_file("conf/bench.yaml"), &cfg, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(cfg.nhosts, 2);
    ck_assert(pod_tpcc_conf(&cfg)->enabled && pod_ycsb_conf(&cfg)->enabled &&
              pod_smallbank_conf(&cfg)->enabled);
    ck_assert_uint_eq(pod_tpcc_conf(&cfg)->warehouses, 2);
    ck_assert_uint_eq(pod_tpcc_conf(&cfg)->items, 100000);
    ck_assert_uint_eq(pod_ycsb_conf(&cfg)->tuples, 600000);
    ck_assert(pod_ycsb_conf(&cfg)->theta == 0.7);
    ck_assert_uint_eq(pod_smallbank_conf(&cfg)->accounts, 100000);
}
END_TEST

START_TEST(test_dm_file)
{
    static struct pod_config cfg;
    pod_err err = {{0}};
    ck_assert_msg(pod_config_load(repo_file("conf/dm.yaml"), &cfg, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(cfg.mode, POD_MODE_DM);
    ck_assert_str_eq(cfg.dm.pod, "dmpod");
    ck_assert_str_eq(cfg.dm.provider, "shm");
    ck_assert_int_eq(cfg.dm.nmemnodes, 1);
    ck_assert_str_eq(cfg.dm.memnodes[0], "/tmp/poddb-dm-mn0.sock");
    ck_assert_str_eq(cfg.region.path, "");
    ck_assert_int_eq(cfg.nhosts, 2);
    for (int i = 0; i < 2; i++) {
        char want[64];
        ck_assert_int_eq(cfg.hosts[i].loggers, 0);
        ck_assert_int_eq(cfg.hosts[i].cpus[0], i);
        snprintf(want, sizeof want, "/tmp/poddb-dm-%d.sock", i);
        ck_assert_str_eq(cfg.hosts[i].socket_path, want);
    }
    ck_assert(!cfg.engine.phantom_protection);
    ck_assert(!pod_tpcc_conf(&cfg)->enabled);
    ck_assert(pod_ycsb_conf(&cfg)->enabled && pod_smallbank_conf(&cfg)->enabled);
    ck_assert_uint_eq(pod_ycsb_conf(&cfg)->tuples, 20000);
    ck_assert_uint_eq(pod_smallbank_conf(&cfg)->accounts, 10000);
}
END_TEST

START_TEST(test_devdax_file)
{
    struct pod_config cfg;
    pod_err err = {{0}};
    ck_assert_msg(pod_config_load(repo_file("conf/devdax.yaml"), &cfg, &err) == 0, "%s",
                  err.msg);
    ck_assert_str_eq(cfg.region.path, "/dev/dax0.0");
    ck_assert_int_eq(cfg.region.kind, POD_REGION_DEVDAX);
    ck_assert_int_ge(cfg.nhosts, 1);
}
END_TEST

START_TEST(test_load_file_with_misspelt_key)
{
    struct pod_config cfg;
    pod_err err = {{0}};
    const char *path = repo_file("tests/unit/data/config/bad-misspelt-key.yaml");
    char want[PATH_MAX + 128];
    ck_assert_int_eq(pod_config_load(path, &cfg, &err), -1);
    snprintf(want, sizeof want,
             "%s:7:3: region.hwcc_budgt: unknown key (expected one of: path, kind, size, "
             "hwcc_budget, numa_node, simulate_noncoherent, allow_overcommit)",
             path);
    ck_assert_str_eq(err.msg, want);
}
END_TEST

START_TEST(test_load_file_with_duplicate_socket)
{
    struct pod_config cfg;
    pod_err err = {{0}};
    const char *path = repo_file("tests/unit/data/config/bad-duplicate-socket.yaml");
    char want[PATH_MAX + 64];
    ck_assert_int_eq(pod_config_load(path, &cfg, &err), -1);
    snprintf(want, sizeof want, "%s:10:11: hosts[1].socket: '/tmp/poddb-test-dup.sock' is also",
             path);
    ck_assert_msg(strncmp(err.msg, want, strlen(want)) == 0, "got: %s", err.msg);
}
END_TEST

START_TEST(test_load_minimal_file_defaults)
{
    struct pod_config cfg;
    pod_err err = {{0}};
    ck_assert_msg(pod_config_load(repo_file("tests/unit/data/config/good-minimal.yaml"), &cfg,
                                  &err) == 0,
                  "%s", err.msg);
    ck_assert_uint_eq(cfg.region.size, 512ULL << 20);
    ck_assert_uint_eq(cfg.region.hwcc_budget, 16ULL << 20);
    ck_assert_int_eq(cfg.region.numa_node, -1);
    ck_assert(!cfg.region.simulate_noncoherent);
    ck_assert_int_eq(cfg.nhosts, 1);
    ck_assert_int_eq(cfg.hosts[0].loggers, 1);
    ck_assert_int_eq(cfg.hosts[0].ncpus, 0);
    ck_assert_str_eq(cfg.hosts[0].cpu_list, "");
    ck_assert(!cfg.hosts[0].huge_pages);
    ck_assert_int_eq(cfg.engine.epoch_ms, 10);
    ck_assert(cfg.engine.moveout_threshold == 0.9);
    ck_assert_int_eq(cfg.engine.coherence, POD_COH_FULL);
    ck_assert(cfg.engine.phantom_protection);
    ck_assert_uint_eq(cfg.engine.checkpoint_after, 256ULL << 20);
    ck_assert(!cfg.engine.reply_before_durable);
    ck_assert_int_eq(cfg.engine.eviction, POD_EVICT_CLOCK);
    ck_assert(cfg.engine.shortcut_pointers);
    ck_assert(cfg.engine.dirty_tracking);
    ck_assert(cfg.engine.locking);
    ck_assert_uint_eq(cfg.engine.max_retries, 100000);
    ck_assert_uint_eq(cfg.engine.retry_timeout_ms, 10000);
    ck_assert_uint_eq(cfg.engine.slow_call_ms, 5000);
    ck_assert_uint_eq(cfg.engine.durable_wait_ms, 30000);
    ck_assert_uint_eq(cfg.server.max_conn_buffered, 64ULL << 20);
    ck_assert_uint_eq(cfg.server.max_buffered, 1ULL << 30);
    ck_assert_uint_eq(cfg.server.max_calls_per_conn, 128);
    ck_assert_uint_eq(cfg.server.auth_timeout_ms, 10000);
}
END_TEST

START_TEST(test_load_missing_file)
{
    struct pod_config cfg;
    pod_err err = {{0}};
    ck_assert_int_eq(pod_config_load("/nonexistent/poddb.yaml", &cfg, &err), -1);
    ck_assert_str_eq(err.msg, "/nonexistent/poddb.yaml: cannot open: No such file or directory");
    ck_assert_int_eq(pod_config_load("/", &cfg, &err), -1);
    ck_assert_msg(strncmp(err.msg, "/: cannot read", 14) == 0, "got: %s", err.msg);
}
END_TEST

/* ---- good configurations ------------------------------------------------------------ */

START_TEST(test_every_key)
{
    const struct pod_config *c = parse_ok(
        "region:\n"
        "  path: \"/mnt/pmem/pod\"\n"
        "  kind: 'fsdax'\n"
        "  size: 1.5GiB\n"
        "  hwcc_budget: 1025KiB\n"
        "  numa_node: 3\n"
        "  simulate_noncoherent: yes\n"
        "hosts:\n"
        "  - workers: 64\n"
        "    loggers: 0\n"
        "    cpus: 0-3, 8, 10-11\n"
        "    socket: /run/a.sock\n"
        "    log_dir: /var/log/a\n"
        "    huge_pages: on\n"
        "  - {workers: 1, loggers: 16, cpus: 7, socket: /run/b.sock, log_dir: /var/log/b}\n"
        "engine:\n"
        "  epoch_ms: 10000\n"
        "  moveout_threshold: 1\n"
        "  moveback_rate: 5000\n"
        "  coherence: no-shared-reader\n"
        "  phantom_protection: off\n"
        "  checkpoint_after: 1GiB\n"
        "  reply_before_durable: yes\n"
        "  eviction: random\n"
        "  shortcut_pointers: off\n"
        "  dirty_tracking: no\n"
        "  locking: false\n"
        "  max_retries: 7\n"
        "  retry_timeout_ms: 0\n"
        "  slow_call_ms: 250\n"
        "  durable_wait_ms: 0\n"
        "server:\n"
        "  max_conn_buffered: 1.5MiB\n"
        "  max_buffered: 2 GB\n"
        "  max_calls_per_conn: 65536\n");
    ck_assert_str_eq(c->region.path, "/mnt/pmem/pod");
    ck_assert_int_eq(c->region.kind, POD_REGION_FSDAX);
    ck_assert_uint_eq(c->region.size, 3ULL << 29);
    ck_assert_uint_eq(c->region.hwcc_budget, 1025ULL << 10);
    ck_assert_int_eq(c->region.numa_node, 3);
    ck_assert(c->region.simulate_noncoherent);
    ck_assert_int_eq(c->nhosts, 2);
    ck_assert_int_eq(c->hosts[0].workers, 64);
    ck_assert_int_eq(c->hosts[0].loggers, 0);
    ck_assert_int_eq(c->hosts[0].ncpus, 7);
    static const int want_cpus[] = {0, 1, 2, 3, 8, 10, 11};
    for (int i = 0; i < 7; i++) ck_assert_int_eq(c->hosts[0].cpus[i], want_cpus[i]);
    ck_assert_str_eq(c->hosts[0].cpu_list, "0-3, 8, 10-11");
    ck_assert_str_eq(c->hosts[0].socket_path, "/run/a.sock");
    ck_assert_str_eq(c->hosts[0].log_dir, "/var/log/a");
    ck_assert(c->hosts[0].huge_pages);
    ck_assert(!c->hosts[1].huge_pages);
    ck_assert_int_eq(c->hosts[1].workers, 1);
    ck_assert_int_eq(c->hosts[1].loggers, 16);
    ck_assert_int_eq(c->hosts[1].ncpus, 1);
    ck_assert_int_eq(c->hosts[1].cpus[0], 7);
    ck_assert_str_eq(c->hosts[1].cpu_list, "7");
    ck_assert_str_eq(c->hosts[1].socket_path, "/run/b.sock");
    ck_assert_int_eq(c->engine.epoch_ms, 10000);
    ck_assert(c->engine.moveout_threshold == 1.0);
    ck_assert_uint_eq(c->engine.moveback_rate, 5000);
    ck_assert_int_eq(c->engine.coherence, POD_COH_NO_SHARED_READER);
    ck_assert(!c->engine.phantom_protection);
    ck_assert_uint_eq(c->engine.checkpoint_after, 1ULL << 30);
    ck_assert(c->engine.reply_before_durable);
    ck_assert_int_eq(c->engine.eviction, POD_EVICT_RANDOM);
    ck_assert(!c->engine.shortcut_pointers);
    ck_assert(!c->engine.dirty_tracking);
    ck_assert(!c->engine.locking);
    ck_assert_uint_eq(c->engine.max_retries, 7);
    ck_assert_uint_eq(c->engine.retry_timeout_ms, 0);
    ck_assert_uint_eq(c->engine.slow_call_ms, 250);
    ck_assert_uint_eq(c->engine.durable_wait_ms, 0);
    ck_assert_uint_eq(c->server.max_conn_buffered, 3ULL << 19);
    ck_assert_uint_eq(c->server.max_buffered, 2000000000ULL);
    ck_assert_uint_eq(c->server.max_calls_per_conn, 65536);
    ck_assert_str_eq(c->source, "t.yaml");
}
END_TEST

START_TEST(test_host_defaults_and_placeholder)
{
    /* 11 hosts, so {host} also becomes a two-digit index; an entry's own key wins. */
    const struct pod_config *c = parse_ok(
        REGION_OK
        "host_defaults:\n"
        "  workers: 3\n"
        "  loggers: 2\n"
        "  cpus: 0-1\n"
        "  socket: /tmp/p-{host}/s-{host}.sock\n"
        "  log_dir: /tmp/p-{host}/log\n"
        "hosts:\n"
        "  - {}\n"
        "  - workers: 5\n"
        "    socket: /tmp/own.sock\n"
        "  - {}\n  - {}\n  - {}\n  - {}\n  - {}\n  - {}\n  - {}\n  - {}\n  - {loggers: 0}\n");
    ck_assert_int_eq(c->nhosts, 11);
    ck_assert_int_eq(c->hosts[0].workers, 3);
    ck_assert_int_eq(c->hosts[0].loggers, 2);
    ck_assert_int_eq(c->hosts[0].ncpus, 2);
    ck_assert_str_eq(c->hosts[0].socket_path, "/tmp/p-0/s-0.sock");
    ck_assert_str_eq(c->hosts[0].log_dir, "/tmp/p-0/log");
    ck_assert_int_eq(c->hosts[1].workers, 5);
    ck_assert_str_eq(c->hosts[1].socket_path, "/tmp/own.sock");
    ck_assert_str_eq(c->hosts[1].log_dir, "/tmp/p-1/log");
    ck_assert_str_eq(c->hosts[10].socket_path, "/tmp/p-10/s-10.sock");
    ck_assert_int_eq(c->hosts[10].loggers, 0);
    ck_assert_int_eq(c->hosts[10].workers, 3);
}
END_TEST

/* {host} in flow style: quoted, it works as in block style. */
START_TEST(test_placeholder_quoted_in_flow_style)
{
    static const char flow[] = REGION_OK
        "host_defaults: {workers: 1, socket: \"/tmp/s-{host}.sock\", log_dir: '/tmp/l-{host}'}\n"
        "hosts: [{}, {socket: \"/tmp/own-{host}.sock\"}]\n";
    static const char block[] = REGION_OK
        "host_defaults:\n  workers: 1\n  socket: /tmp/s-{host}.sock\n  log_dir: /tmp/l-{host}\n"
        "hosts:\n  - {}\n  - socket: /tmp/own-{host}.sock\n";
    const struct pod_config *c = parse_ok(flow);
    ck_assert_int_eq(c->nhosts, 2);
    ck_assert_str_eq(c->hosts[0].socket_path, "/tmp/s-0.sock");
    ck_assert_str_eq(c->hosts[0].log_dir, "/tmp/l-0");
    ck_assert_str_eq(c->hosts[1].socket_path, "/tmp/own-1.sock");
    ck_assert_str_eq(c->hosts[1].log_dir, "/tmp/l-1");
    ck_assert_uint_eq(digest_of(flow), digest_of(block));
}
END_TEST

START_TEST(test_sixteen_hosts_and_empty_sections)
{
    const struct pod_config *c =
        parse_ok(REGION_OK DEFAULTS_OK "hosts:\n" REPEAT16("  - {}\n") "engine:\n");
    ck_assert_int_eq(c->nhosts, POD_MAX_HOSTS);
    ck_assert_str_eq(c->hosts[15].socket_path, "/tmp/poddb-test-15.sock");
    ck_assert_int_eq(c->engine.epoch_ms, 10);
    ck_assert(c->engine.phantom_protection);

    c = parse_ok(REGION_OK "host_defaults:\n" HOSTS_OK "engine: ~\n");
    ck_assert_int_eq(c->nhosts, 1);
}
END_TEST

START_TEST(test_numa_node_spellings)
{
    ck_assert_int_eq(parse_ok(REGION_OK "  numa_node: none\n" HOSTS_OK)->region.numa_node, -1);
    ck_assert_int_eq(parse_ok(REGION_OK "  numa_node: -1\n" HOSTS_OK)->region.numa_node, -1);
    ck_assert_int_eq(parse_ok(REGION_OK "  numa_node: 0\n" HOSTS_OK)->region.numa_node, 0);
    ck_assert_int_eq(parse_ok(REGION_OK "  numa_node: 1023\n" HOSTS_OK)->region.numa_node, 1023);
}
END_TEST

START_TEST(test_booleans_and_enums)
{
    static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no", "off"};
    char text[1024];
    for (int i = 0; i < 3; i++) {
        snprintf(text, sizeof text, REGION_OK "  simulate_noncoherent: %s\n" HOSTS_OK, yes[i]);
        ck_assert(parse_ok(text)->region.simulate_noncoherent);
        snprintf(text, sizeof text, REGION_OK "  simulate_noncoherent: %s\n" HOSTS_OK, no[i]);
        ck_assert(!parse_ok(text)->region.simulate_noncoherent);
        snprintf(text, sizeof text, REGION_OK "  allow_overcommit: %s\n" HOSTS_OK, yes[i]);
        ck_assert(parse_ok(text)->region.allow_overcommit);
        snprintf(text, sizeof text, REGION_OK "  allow_overcommit: %s\n" HOSTS_OK, no[i]);
        ck_assert(!parse_ok(text)->region.allow_overcommit);
    }
    for (int k = POD_COH_FULL; k <= POD_COH_HWCC_ONLY; k++) {
        snprintf(text, sizeof text, REGION_OK HOSTS_OK "engine: {coherence: %s}\n",
                 pod_coherence_name((enum pod_coherence)k));
        ck_assert_int_eq(parse_ok(text)->engine.coherence, k);
    }
    for (int k = POD_REGION_SHM; k <= POD_REGION_FSDAX; k++) {
        snprintf(text, sizeof text,
                 "region: {path: /x, kind: %s, size: 1GiB, hwcc_budget: 1MiB}\n" HOSTS_OK,
                 pod_region_kind_name((enum pod_region_kind)k));
        ck_assert_int_eq(parse_ok(text)->region.kind, k);
    }
}
END_TEST

START_TEST(test_kind_and_coherence_names)
{
    ck_assert_str_eq(pod_region_kind_name(POD_REGION_SHM), "shm");
    ck_assert_str_eq(pod_region_kind_name(POD_REGION_DEVDAX), "devdax");
    ck_assert_str_eq(pod_region_kind_name(POD_REGION_FSDAX), "fsdax");
    ck_assert_str_eq(pod_region_kind_name((enum pod_region_kind)42), "unknown");
    ck_assert_str_eq(pod_coherence_name(POD_COH_FULL), "full");
    ck_assert_str_eq(pod_coherence_name(POD_COH_NON_TEMPORAL), "non-temporal");
    ck_assert_str_eq(pod_coherence_name(POD_COH_NO_SHARED_READER), "no-shared-reader");
    ck_assert_str_eq(pod_coherence_name(POD_COH_HWCC_ONLY), "hwcc-only");
    ck_assert_str_eq(pod_coherence_name((enum pod_coherence)-1), "unknown");
}
END_TEST

START_TEST(test_size_limits)
{
    /* Exactly the bounds are accepted, decimal units are decimal. */
    ck_assert_uint_eq(parse_ok("region: {path: /x, kind: shm, size: 128MiB, hwcc_budget: 1MiB}\n"
                               HOSTS_OK)->region.size, 128ULL << 20);
    ck_assert_uint_eq(parse_ok("region: {path: /x, kind: shm, size: 64TiB, hwcc_budget: 1MiB}\n"
                               HOSTS_OK)->region.size, 64ULL << 40);
    ck_assert_uint_eq(parse_ok("region: {path: /x, kind: shm, size: 4096MB, hwcc_budget: 1999MB}\n"
                               HOSTS_OK)->region.hwcc_budget, 1999000000ULL);
    ck_assert_uint_eq(parse_ok("region: {path: /x, kind: shm, size: 1TB, hwcc_budget: 1GB}\n"
                               HOSTS_OK)->region.size, 1000000000000ULL);
    ck_assert_uint_eq(parse_ok("region: {path: /x, kind: shm, size: '1 GiB', "
                               "hwcc_budget: 1048576}\n" HOSTS_OK)->region.hwcc_budget,
                      1ULL << 20);
}
END_TEST

/* ---- the digest ----------------------------------------------------------------------- */

#define DIGEST_BASE                                                                        \
    REGION_OK                                                                              \
    "  numa_node: 0\n"                                                                     \
    "hosts:\n"                                                                             \
    "  - workers: 2\n"                                                                     \
    "    cpus: 0-1\n"                                                                      \
    "    socket: /tmp/d-0.sock\n"                                                          \
    "    log_dir: /tmp/d-0\n"                                                              \
    "  - workers: 2\n"                                                                     \
    "    socket: /tmp/d-1.sock\n"                                                          \
    "    log_dir: /tmp/d-1\n"                                                              \
    "engine:\n"                                                                            \
    "  epoch_ms: 10\n"

static void replace_once(char *out, size_t outsz, const char *text, const char *from,
                         const char *to)
{
    const char *at = strstr(text, from);
    ck_assert_msg(at != NULL, "'%s' not in the base text", from);
    snprintf(out, outsz, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
}

struct text_change {
    const char *from, *to;
};

/* Each change of base_text (one at a time) must change its digest. */
static void expect_digest_sees(const char *base_text, const struct text_change *changes, size_t n)
{
    uint64_t base = digest_of(base_text);
    char text[2048];
    for (size_t i = 0; i < n; i++) {
        replace_once(text, sizeof text, base_text, changes[i].from, changes[i].to);
        ck_assert_msg(digest_of(text) != base, "changing '%s' to '%s' kept the digest",
                      changes[i].from, changes[i].to);
    }
}

START_TEST(test_digest_ignores_text_form)
{
    uint64_t base = digest_of(DIGEST_BASE);
    ck_assert_uint_eq(base, digest_of(DIGEST_BASE));
    ck_assert_uint_ne(base, 0);

    /* Same values, written differently: comments, blank lines, flow style, key
     * order, quoting, other units, explicit defaults, host_defaults, a different
     * spelling of the same CPU set. */
    static const char *const same[] = {
        "# a comment\n\n" DIGEST_BASE "\n# trailing comment\n",
        "---\n" DIGEST_BASE "...\n",
        "engine: {epoch_ms: 10, coherence: full, phantom_protection: true, "
        "moveout_threshold: 0.90}\n"
        "hosts:\n"
        "  - {log_dir: /tmp/d-0, socket: '/tmp/d-0.sock', cpus: '0,1', workers: 2, loggers: 1}\n"
        "  - {socket: \"/tmp/d-1.sock\", workers: 2, log_dir: /tmp/d-1}\n"
        "region:\n"
        "  hwcc_budget: 65536KiB\n"
        "  size: 1073741824\n"
        "  simulate_noncoherent: no\n"
        "  numa_node: 0\n"
        "  kind: \"shm\"\n"
        "  path: /dev/shm/poddb-test\n",
        REGION_OK
        "  numa_node: 0\n"
        "host_defaults:\n"
        "  workers: 2\n"
        "  socket: /tmp/d-{host}.sock\n"
        "  log_dir: /tmp/d-{host}\n"
        "hosts:\n"
        "  - cpus: 0 - 1\n"
        "  - {}\n",
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        ck_assert_msg(digest_of(same[i]) == base, "variant %zu changed the digest", i);

    /* CRLF line endings. */
    char crlf[2048];
    size_t n = 0;
    for (const char *p = DIGEST_BASE; *p && n + 2 < sizeof crlf; p++) {
        if (*p == '\n') crlf[n++] = '\r';
        crlf[n++] = *p;
    }
    crlf[n] = '\0';
    ck_assert_uint_eq(digest_of(crlf), base);

    /* The source name is not part of the digest. */
    struct pod_config a;
    pod_err err;
    ck_assert_int_eq(pod_config_parse("other-name.yaml", DIGEST_BASE, strlen(DIGEST_BASE), &a,
                                      &err), 0);
    ck_assert_uint_eq(pod_config_digest(&a), base);

    /* region.allow_overcommit is a check at start, not a property of the
     * region: a host may be restarted with it set while the others run. */
    char over[2048];
    replace_once(over, sizeof over, DIGEST_BASE, "  numa_node: 0\n",
                 "  numa_node: 0\n  allow_overcommit: true\n");
    ck_assert(parse_ok(over)->region.allow_overcommit);
    ck_assert_uint_eq(digest_of(over), base);

    /* Neither are the server's limits: a host may be restarted with others. */
    char limits[2048];
    snprintf(limits, sizeof limits, "%sserver:\n  max_conn_buffered: 8MiB\n  max_buffered: 64MiB\n"
             "  max_calls_per_conn: 7\n  auth_timeout_ms: 0\n", DIGEST_BASE);
    ck_assert_uint_eq(parse_ok(limits)->server.max_calls_per_conn, 7);
    ck_assert_uint_eq(parse_ok(limits)->server.auth_timeout_ms, 0);
    ck_assert_uint_eq(digest_of(limits), base);
}
END_TEST

/* A smaller server.max_buffered brings the default per connection down with
 * it; an explicit one above it is an error. */
START_TEST(test_server_limits_between_keys)
{
    const struct pod_config *c = parse_ok(REGION_OK HOSTS_OK "server:\n  max_buffered: 16MiB\n");
    ck_assert_uint_eq(c->server.max_buffered, 16ULL << 20);
    ck_assert_uint_eq(c->server.max_conn_buffered, 16ULL << 20);
    c = parse_ok(REGION_OK HOSTS_OK "server: {max_conn_buffered: 2MiB, max_buffered: 2MiB}\n");
    ck_assert_uint_eq(c->server.max_conn_buffered, 2ULL << 20);
    c = parse_ok(REGION_OK HOSTS_OK "server:\n");
    ck_assert_uint_eq(c->server.max_conn_buffered, 64ULL << 20);
}
END_TEST

/* Each change of one value must change the digest. */
static const struct text_change digest_changes[] = {
    {"path: /dev/shm/poddb-test", "path: /dev/shm/poddb-tesT"},
    {"kind: shm", "kind: fsdax"},
    {"size: 1GiB", "size: 1TB"},
    {"hwcc_budget: 64MiB", "hwcc_budget: 65MiB"},
    {"numa_node: 0", "numa_node: 1"},
    {"  numa_node: 0\n", "  numa_node: 0\n  simulate_noncoherent: true\n"},
    {"cpus: 0-1", "cpus: 0-2"},
    {"cpus: 0-1", "cpus: 1,0"},
    {"cpus: 0-1", "loggers: 1"},
    {"    cpus: 0-1\n", ""},
    {"    log_dir: /tmp/d-1\n", "    log_dir: /tmp/d-1\n    loggers: 2\n"},
    {"    log_dir: /tmp/d-1\n", "    log_dir: /tmp/d-1\n    huge_pages: true\n"},
    {"  - workers: 2\n    socket: /tmp/d-1", "  - workers: 3\n    socket: /tmp/d-1"},
    {"socket: /tmp/d-1.sock", "socket: /tmp/d-2.sock"},
    {"log_dir: /tmp/d-1\n", "log_dir: /tmp/d-1/\n"},
    {"epoch_ms: 10", "epoch_ms: 11"},
    {"epoch_ms: 10", "moveout_threshold: 0.8"},
    {"epoch_ms: 10", "coherence: hwcc-only"},
    {"epoch_ms: 10", "phantom_protection: false"},
    {"epoch_ms: 10", "checkpoint_after: 1MiB"},
    {"epoch_ms: 10", "reply_before_durable: true"},
    {"epoch_ms: 10", "eviction: random"},
    {"epoch_ms: 10", "shortcut_pointers: false"},
    {"epoch_ms: 10", "dirty_tracking: false"},
    {"epoch_ms: 10", "locking: false"},
    {"epoch_ms: 10", "max_retries: 5"},
    {"epoch_ms: 10", "retry_timeout_ms: 0"},
    {"epoch_ms: 10", "slow_call_ms: 100"},
    {"epoch_ms: 10", "durable_wait_ms: 0"},
    {"  - workers: 2\n    socket: /tmp/d-1.sock\n    log_dir: /tmp/d-1\n", ""},
};

START_TEST(test_digest_sees_every_field)
{
    char text[2048];
    uint64_t base = digest_of(DIGEST_BASE);
    replace_once(text, sizeof text, DIGEST_BASE, digest_changes[_i].from, digest_changes[_i].to);
    ck_assert_msg(digest_of(text) != base, "changing '%s' to '%s' kept the digest",
                  digest_changes[_i].from, digest_changes[_i].to);
}
END_TEST

/* ---- workloads ------------------------------------------------------------------ */

START_TEST(test_workloads_every_key)
{
    const struct pod_config *c = parse_ok(
        REGION_OK HOSTS_OK
        "workloads:\n"
        "  tpcc:\n"
        "    warehouses: 8\n"
        "    items: 1000\n"
        "    customers_per_district: 90\n"
        "    remote_new_order_pct: 60\n"
        "    remote_payment_pct: 90\n"
        "    load_at_start: true\n"
        "    range_reads: point\n"
        "  ycsb: {tuples: 20000, partitions: 4, read_pct: 95, theta: 0.7, "
        "multi_partition_pct: 100, scramble: yes, load_at_start: no}\n"
        "  smallbank:\n"
        "    accounts: 10000\n"
        "    partitions: 3\n"
        "    hot_accounts: 100\n"
        "    hot_pct: 50\n"
        "    theta: .5\n"
        "    remote_pct: 7\n");
    const struct pod_tpcc_conf *t = pod_tpcc_conf(c);
    ck_assert(t->enabled && t->load_at_start);
    ck_assert_uint_eq(t->warehouses, 8);
    ck_assert_uint_eq(t->items, 1000);
    ck_assert_uint_eq(t->customers_per_district, 90);
    ck_assert_uint_eq(t->remote_new_order_pct, 60);
    ck_assert_uint_eq(t->remote_payment_pct, 90);
    ck_assert_uint_eq(t->range_reads, TPCC_RANGE_POINT);
    const struct pod_ycsb_conf *y = pod_ycsb_conf(c);
    ck_assert(y->enabled && !y->load_at_start && y->scramble);
    ck_assert_uint_eq(y->tuples, 20000);
    ck_assert_uint_eq(y->partitions, 4);
    ck_assert_uint_eq(y->read_pct, 95);
    ck_assert(y->theta == 0.7);
    ck_assert_uint_eq(y->multi_partition_pct, 100);
    const struct pod_smallbank_conf *b = pod_smallbank_conf(c);
    ck_assert(b->enabled && !b->load_at_start);
    ck_assert_uint_eq(b->accounts, 10000);
    ck_assert_uint_eq(b->partitions, 3);
    ck_assert_uint_eq(b->hot_accounts, 100);
    ck_assert_uint_eq(b->hot_pct, 50);
    ck_assert(b->theta == 0.5);
    ck_assert_uint_eq(b->remote_pct, 7);
}
END_TEST

START_TEST(test_workloads_defaults)
{
    /* Absent: nothing enabled. */
    const struct pod_config *c = parse_ok(REGION_OK DEFAULTS_OK "hosts:\n  - {}\n  - {}\n");
    ck_assert(!pod_tpcc_conf(c)->enabled && !pod_ycsb_conf(c)->enabled &&
              !pod_smallbank_conf(c)->enabled);
    /* Named with no value or {}: every default; partitions follow the hosts. */
    c = parse_ok(REGION_OK DEFAULTS_OK "hosts:\n  - {}\n  - {}\n"
                 "workloads:\n  tpcc:\n  ycsb: {}\n  smallbank: ~\n");
    const struct pod_tpcc_conf *t = pod_tpcc_conf(c);
    ck_assert(t->enabled && !t->load_at_start);
    ck_assert_uint_eq(t->warehouses, 2);
    ck_assert_uint_eq(t->items, 100000);
    ck_assert_uint_eq(t->customers_per_district, 3000);
    ck_assert_uint_eq(t->remote_new_order_pct, 10);
    ck_assert_uint_eq(t->remote_payment_pct, 15);
    ck_assert_uint_eq(t->range_reads, TPCC_RANGE_AUTO);
    const struct pod_ycsb_conf *y = pod_ycsb_conf(c);
    ck_assert(y->enabled && !y->scramble);
    ck_assert_uint_eq(y->tuples, 1000000);
    ck_assert_uint_eq(y->partitions, 2);
    ck_assert_uint_eq(y->read_pct, 50);
    ck_assert(y->theta == 0.99);
    ck_assert_uint_eq(y->multi_partition_pct, 10);
    const struct pod_smallbank_conf *b = pod_smallbank_conf(c);
    ck_assert(b->enabled);
    ck_assert_uint_eq(b->accounts, 100000);
    ck_assert_uint_eq(b->partitions, 2);
    ck_assert_uint_eq(b->hot_accounts, 4000);
    ck_assert_uint_eq(b->hot_pct, 90);
    ck_assert(b->theta == 0.0);
    ck_assert_uint_eq(b->remote_pct, 0);
    /* An empty section is allowed like the others. */
    c = parse_ok(REGION_OK HOSTS_OK "workloads:\n");
    ck_assert(!pod_tpcc_conf(c)->enabled);
}
END_TEST

#define WL_DIGEST_BASE                                                                     \
    REGION_OK DEFAULTS_OK "hosts:\n  - {}\n  - {}\n"                                       \
    "workloads:\n"                                                                         \
    "  tpcc: {warehouses: 4, items: 1000, customers_per_district: 90}\n"                   \
    "  ycsb: {tuples: 20000, theta: 0.7}\n"                                                \
    "  smallbank: {accounts: 1000, hot_accounts: 40}\n"

START_TEST(test_workloads_digest)
{
    uint64_t base = digest_of(WL_DIGEST_BASE);
    /* Defaults written out do not change it. */
    ck_assert_uint_eq(base, digest_of(REGION_OK DEFAULTS_OK "hosts:\n  - {}\n  - {}\n"
                                      "workloads:\n"
                                      "  smallbank: {accounts: 1000, partitions: 2, hot_pct: 90}\n"
                                      "  ycsb: {tuples: 20000, theta: .70, read_pct: 50}\n"
                                      "  tpcc:\n    warehouses: 4\n    items: 1000\n"
                                      "    customers_per_district: 90\n"
                                      "    remote_payment_pct: 15\n"
                                      "    range_reads: auto\n"));
    static const struct text_change changes[] = {
        {"warehouses: 4", "warehouses: 5"},
        {"items: 1000", "items: 1001"},
        {"customers_per_district: 90", "customers_per_district: 91"},
        {"warehouses: 4", "warehouses: 4, remote_new_order_pct: 11"},
        {"warehouses: 4", "warehouses: 4, remote_payment_pct: 16"},
        {"warehouses: 4", "warehouses: 4, load_at_start: true"},
        {"warehouses: 4", "warehouses: 4, range_reads: scan"},
        {"warehouses: 4", "warehouses: 4, range_reads: point"},
        {"tuples: 20000", "tuples: 20001"},
        {"tuples: 20000", "tuples: 20000, partitions: 3"},
        {"tuples: 20000", "tuples: 20000, read_pct: 95"},
        {"theta: 0.7", "theta: 0.99"},
        {"tuples: 20000", "tuples: 20000, multi_partition_pct: 0"},
        {"tuples: 20000", "tuples: 20000, scramble: true"},
        {"accounts: 1000", "accounts: 1001"},
        {"accounts: 1000", "accounts: 1000, partitions: 1"},
        {"hot_accounts: 40", "hot_accounts: 41"},
        {"accounts: 1000", "accounts: 1000, hot_pct: 80"},
        {"accounts: 1000", "accounts: 1000, theta: 0.5"},
        {"accounts: 1000", "accounts: 1000, remote_pct: 1"},
        {"  smallbank: {accounts: 1000, hot_accounts: 40}\n", ""},
    };
    expect_digest_sees(WL_DIGEST_BASE, changes, sizeof changes / sizeof changes[0]);
}
END_TEST

/* ---- mode: dm ------------------------------------------------------------------------- */

START_TEST(test_dm_every_field)
{
    /* The smallest: no region, no log_dir, loggers 0 and provider shm by default. */
    const struct pod_config *c = parse_ok(DM_OK);
    ck_assert_int_eq(c->mode, POD_MODE_DM);
    ck_assert_str_eq(pod_mode_name(c->mode), "dm");
    ck_assert_str_eq(c->dm.pod, "dm-pod.1");
    ck_assert_str_eq(c->dm.provider, "shm");
    ck_assert_int_eq(c->dm.nmemnodes, 1);
    ck_assert_str_eq(c->dm.memnodes[0], "/tmp/poddb-test-mn0.sock");
    ck_assert_uint_eq(c->dm.pool_size, 256ull << 20);
    ck_assert_str_eq(c->region.path, "");
    ck_assert_uint_eq(c->region.size, 0);
    ck_assert_int_eq(c->nhosts, 2);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(c->hosts[i].workers, 1);
        ck_assert_int_eq(c->hosts[i].loggers, 0);
        ck_assert_str_eq(c->hosts[i].log_dir, "");
    }
    ck_assert_str_eq(c->hosts[1].socket_path, "/tmp/poddb-test-1.sock");
    ck_assert(!c->engine.phantom_protection);

    /* Every key: another provider, a relative socket taken from the file's
     * directory, loggers 0 and log_dir written out (accepted, unused), the
     * engine keys of mode: cxl accepted and ignored, workloads. */
    static struct pod_config d;
    pod_err err = {{0}};
    const char *text =
        "mode: 'dm'\n"
        "dm:\n"
        "  pod: Bank_2\n"
        "  provider: tcp;ofi_rxm\n"
        "  memnodes: [./run/mn0.sock, /tmp/poddb-test-mn1.sock]\n"
        "  pool_size: 64MiB\n"
        "host_defaults:\n"
        "  workers: 2\n"
        "  loggers: 0\n"
        "  socket: /tmp/poddb-test-{host}.sock\n"
        "  log_dir: /tmp/poddb-test/log-{host}\n"
        "hosts:\n"
        "  - {loggers: 0}\n"
        "engine:\n"
        "  phantom_protection: off\n"
        "  coherence: hwcc-only\n"
        "  moveout_threshold: 0.5\n"
        "  moveback_rate: 10\n"
        "  eviction: random\n"
        "  shortcut_pointers: false\n"
        "  dirty_tracking: false\n"
        "  checkpoint_after: 0\n"
        "workloads:\n"
        "  smallbank: {accounts: 1000}\n";
    ck_assert_msg(pod_config_parse("/no/such/dir/t.yaml", text, strlen(text), &d, &err) == 0,
                  "%s", err.msg);
    ck_assert_int_eq(d.mode, POD_MODE_DM);
    ck_assert_str_eq(d.dm.pod, "Bank_2");
    ck_assert_str_eq(d.dm.provider, "tcp;ofi_rxm");
    ck_assert_int_eq(d.dm.nmemnodes, 2);
    ck_assert_str_eq(d.dm.memnodes[0], "/no/such/dir/run/mn0.sock");
    ck_assert_str_eq(d.dm.memnodes[1], "/tmp/poddb-test-mn1.sock");
    ck_assert_uint_eq(d.dm.pool_size, 64ull << 20);
    ck_assert_int_eq(d.hosts[0].workers, 2);
    ck_assert_int_eq(d.hosts[0].loggers, 0);
    ck_assert_str_eq(d.hosts[0].log_dir, "/tmp/poddb-test/log-0");
    ck_assert_int_eq(d.engine.coherence, POD_COH_HWCC_ONLY);
    ck_assert(pod_smallbank_conf(&d)->enabled);

    /* verbs is a valid name (whether this machine has an RDMA NIC is not the
     * parser's business); mode: cxl written out is the default. */
    c = parse_ok("mode: dm\ndm: {pod: p, provider: verbs;ofi_rxm, memnodes: [/m.sock]}\n"
                 DM_HOSTS_OK DM_ENGINE_OK);
    ck_assert_str_eq(c->dm.provider, "verbs;ofi_rxm");
    c = parse_ok("mode: dm\ndm: {pod: " REPEAT4("abcdefghijklmno") "xyz, memnodes: [/m.sock]}\n"
                 DM_HOSTS_OK DM_ENGINE_OK);
    ck_assert_uint_eq(strlen(c->dm.pod), 63);
    c = parse_ok("mode: dm\ndm: {pod: p, memnodes: [/m.sock], pool_size: 1MiB}\n"
                 DM_HOSTS_OK DM_ENGINE_OK);
    ck_assert_uint_eq(c->dm.pool_size, 1ull << 20);
    c = parse_ok("mode: dm\ndm: {pod: p, memnodes: [/m.sock], pool_size: 2G}\n"
                 DM_HOSTS_OK DM_ENGINE_OK);
    ck_assert_uint_eq(c->dm.pool_size, 2ull << 30);
    /* dm.protocol: ford with a 1 MiB undo log unless the file says otherwise; in the digest */
    ck_assert_int_eq(d.dm.protocol, POD_DM_FORD);
    ck_assert_uint_eq(d.dm.undo_log_size, 1ull << 20);
    c = parse_ok("mode: dm\ndm: {pod: p, memnodes: [/m.sock], protocol: rs-2pl, "
                 "undo_log_size: 64KiB}\n" DM_HOSTS_OK DM_ENGINE_OK);
    ck_assert_int_eq(c->dm.protocol, POD_DM_RS_2PL);
    ck_assert_uint_eq(c->dm.undo_log_size, 64ull << 10);
    uint64_t rs2pl_digest = pod_config_digest(c);
    c = parse_ok("mode: dm\ndm: {pod: p, memnodes: [/m.sock], protocol: ford, "
                 "undo_log_size: 64KiB}\n" DM_HOSTS_OK DM_ENGINE_OK);
    ck_assert(pod_config_digest(c) != rs2pl_digest);
    /* motor: 2 versions a record unless the file says otherwise (in the digest); no backups */
    c = parse_ok("mode: dm\ndm: {pod: p, memnodes: [/a.sock, /b.sock], protocol: motor}\n"
                 DM_HOSTS_OK DM_ENGINE_OK);
    ck_assert_int_eq(c->dm.protocol, POD_DM_MOTOR);
    ck_assert_int_eq(c->dm.versions, 2);
    ck_assert_int_eq(c->dm.replicas, 0);
    ck_assert_str_eq(pod_dm_protocol_name(c->dm.protocol), "motor");
    uint64_t motor2_digest = pod_config_digest(c);
    c = parse_ok("mode: dm\ndm: {pod: p, memnodes: [/a.sock, /b.sock], protocol: motor, "
                 "versions: 3}\n" DM_HOSTS_OK DM_ENGINE_OK);
    ck_assert_int_eq(c->dm.versions, 3);
    ck_assert(pod_config_digest(c) != motor2_digest);
    /* lotus: motor's records (versions in the digest), no backups */
    c = parse_ok("mode: dm\ndm: {pod: p, memnodes: [/a.sock, /b.sock], protocol: lotus, "
                 "versions: 3}\n" DM_HOSTS_OK DM_ENGINE_OK);
    ck_assert_int_eq(c->dm.protocol, POD_DM_LOTUS);
    ck_assert_str_eq(pod_dm_protocol_name(c->dm.protocol), "lotus");
    ck_assert_int_eq(c->dm.versions, 3);
    ck_assert_int_eq(c->dm.replicas, 0);
    uint64_t lotus3_digest = pod_config_digest(c);
    c = parse_ok("mode: dm\ndm: {pod: p, memnodes: [/a.sock, /b.sock], protocol: lotus}\n"
                 DM_HOSTS_OK DM_ENGINE_OK);
    ck_assert_int_eq(c->dm.versions, 2);
    ck_assert(pod_config_digest(c) != lotus3_digest);
    /* dm.replicas: 1 under ford with 2 or more memory nodes, else 0; 0..n-1 when written. */
    ck_assert_int_eq(d.dm.replicas, 1);
    ck_assert_int_eq(parse_ok(DM_OK)->dm.replicas, 0);
    c = parse_ok("mode: dm\ndm: {pod: p, memnodes: [/a.sock, /b.sock], protocol: rs-2pl}\n"
                 DM_HOSTS_OK DM_ENGINE_OK);
    ck_assert_int_eq(c->dm.replicas, 0);
    c = parse_ok("mode: dm\ndm: {pod: p, memnodes: [/a.sock, /b.sock], protocol: rs-2pl, "
                 "replicas: 0}\n" DM_HOSTS_OK DM_ENGINE_OK);
    ck_assert_int_eq(c->dm.replicas, 0);
    c = parse_ok("mode: dm\ndm: {pod: p, memnodes: [/a.sock, /b.sock], replicas: 0}\n"
                 DM_HOSTS_OK DM_ENGINE_OK);
    ck_assert_int_eq(c->dm.replicas, 0);
    uint64_t unreplicated_digest = pod_config_digest(c);
    c = parse_ok("mode: dm\ndm: {pod: p, memnodes: [/a.sock, /b.sock]}\n" DM_HOSTS_OK
                 DM_ENGINE_OK);
    ck_assert_int_eq(c->dm.replicas, 1);
    ck_assert(pod_config_digest(c) != unreplicated_digest);
    c = parse_ok("mode: dm\ndm: {pod: p, memnodes: [/m.sock], replicas: 0}\n" DM_HOSTS_OK
                 DM_ENGINE_OK);
    ck_assert_int_eq(c->dm.replicas, 0);
    c = parse_ok("mode: dm\ndm: {pod: p, memnodes: [/0, /1, /2, /3], replicas: 3}\n"
                 DM_HOSTS_OK DM_ENGINE_OK);
    ck_assert_int_eq(c->dm.replicas, 3);
    /* dm.inflight: 1 transaction per worker thread unless the file says otherwise; not in
     * the digest (how a compute node runs its workers) */
    ck_assert_int_eq(d.dm.inflight, 1);
    c = parse_ok("mode: dm\ndm: {pod: p, memnodes: [/a.sock, /b.sock], inflight: 4}\n"
                 DM_HOSTS_OK DM_ENGINE_OK);
    ck_assert_int_eq(c->dm.inflight, 4);
    uint64_t one_in_flight = pod_config_digest(c);
    c = parse_ok("mode: dm\ndm: {pod: p, memnodes: [/a.sock, /b.sock], inflight: 64}\n"
                 DM_HOSTS_OK DM_ENGINE_OK);
    ck_assert_int_eq(c->dm.inflight, 64);
    ck_assert(pod_config_digest(c) == one_in_flight);
    /* dm.nic_model: off, with the papers' figures, unless the file says otherwise. */
    ck_assert(!d.dm.nic_model.enabled);
    ck_assert(d.dm.nic_model.rtt_us == 2.5 && d.dm.nic_model.atomic_mops == 2.5 &&
              d.dm.nic_model.rw_mops == 35 && d.dm.nic_model.gbps == 100);
    c = parse_ok("mode: dm\ndm: {pod: p, memnodes: [/m.sock], nic_model: {enabled: on}}\n"
                 DM_HOSTS_OK DM_ENGINE_OK);
    ck_assert(c->dm.nic_model.enabled && c->dm.nic_model.rtt_us == 2.5 &&
              c->dm.nic_model.atomic_mops == 2.5);
    c = parse_ok("mode: dm\ndm:\n  pod: p\n  memnodes: [/m.sock]\n  nic_model:\n"
                 "    enabled: false\n    rtt_us: 0\n    atomic_mops: 0.5\n    rw_mops: 100\n"
                 "    gbps: 200\n" DM_HOSTS_OK DM_ENGINE_OK);
    ck_assert(!c->dm.nic_model.enabled && c->dm.nic_model.rtt_us == 0 &&
              c->dm.nic_model.atomic_mops == 0.5 && c->dm.nic_model.rw_mops == 100 &&
              c->dm.nic_model.gbps == 200);
    c = parse_ok("mode: cxl\n" REGION_OK HOSTS_OK);
    ck_assert_int_eq(c->mode, POD_MODE_CXL);
    ck_assert_str_eq(pod_mode_name(c->mode), "cxl");
    ck_assert_int_eq(c->dm.nmemnodes, 0);
    ck_assert_int_eq(parse_ok(REGION_OK HOSTS_OK)->mode, POD_MODE_CXL);
    ck_assert_str_eq(pod_mode_name((enum pod_mode)7), "unknown");
}
END_TEST

/* The digests of cxl configs as they were before there were modes: the mode
 * and the dm section enter a digest only with mode: dm. */
START_TEST(test_dm_digest)
{
    static const struct {
        const char *file;
        uint64_t digest;
    } pinned[] = {
        {"conf/pod.yaml", 0x97da98e20b26fb0fULL},
        {"conf/bench.yaml", 0x299a23789cd0878bULL},
        {"conf/numa-8host.yaml", 0x0970b6ad55f5e899ULL},
    };
    for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++) {
        static struct pod_config cfg;
        pod_err err = {{0}};
        ck_assert_msg(pod_config_load(repo_file(pinned[i].file), &cfg, &err) == 0, "%s", err.msg);
        ck_assert_msg(pod_config_digest(&cfg) == pinned[i].digest, "%s: digest %016llx changed",
                      pinned[i].file, (unsigned long long)pod_config_digest(&cfg));
    }
    ck_assert_uint_eq(digest_of(DIGEST_BASE), 0xfb5857e7414df393ULL);
    ck_assert_uint_eq(digest_of("mode: cxl\n" DIGEST_BASE), 0xfb5857e7414df393ULL);

    uint64_t base = digest_of(DM_OK);
    /* Key order, flow style and defaults written out do not change it. */
    ck_assert_uint_eq(base, digest_of("engine: {phantom_protection: no}\n"
                                      "dm: {memnodes: [/tmp/poddb-test-mn0.sock], provider: shm, "
                                      "pod: dm-pod.1}\n"
                                      "host_defaults: {workers: 1, loggers: 0, "
                                      "socket: \"/tmp/poddb-test-{host}.sock\"}\n"
                                      "hosts: [{}, {}]\n"
                                      "mode: dm\n"));
    ck_assert_uint_ne(base, 0);
    /* The pool size is the memory node's business, not the compute nodes'. */
    ck_assert_uint_eq(base, digest_of(DM_SECTION_OK "  pool_size: 1GiB\n" DM_HOSTS_OK
                                            DM_ENGINE_OK));
    /* Nor is the NIC model: it models costs, the records are where they were. */
    ck_assert_uint_eq(base, digest_of(DM_SECTION_OK "  nic_model: {enabled: true, rtt_us: 3}\n"
                                            DM_HOSTS_OK DM_ENGINE_OK));
    /* dm.replicas written out as its default (0 with one memory node) is the same config. */
    ck_assert_uint_eq(base, digest_of(DM_SECTION_OK "  replicas: 0\n" DM_HOSTS_OK DM_ENGINE_OK));
    static const struct text_change changes[] = {
        {"pod: dm-pod.1", "pod: dm-pod.2"},
        {"pod: dm-pod.1", "pod: dm-pod.1\n  provider: tcp;ofi_rxm"},
        {"mn0.sock", "mn1.sock"},
        {"  - {}\n  - {}\n", "  - {}\n"},
        {"  workers: 1\n", "  workers: 2\n"},
        {"  phantom_protection: false\n", "  phantom_protection: false\n  epoch_ms: 5\n"},
    };
    expect_digest_sees(DM_OK, changes, sizeof changes / sizeof changes[0]);
}
END_TEST

/* ---- pod_parse_size and pod_parse_cpu_list ----------------------------------------- */

START_TEST(test_parse_size)
{
    static const struct {
        const char *text;
        uint64_t bytes;
    } good[] = {
        {"0", 0},
        {"1", 1},
        {"1B", 1},
        {"1K", 1024},
        {"1KiB", 1024},
        {"1KB", 1000},
        {"1M", 1 << 20},
        {"1MiB", 1 << 20},
        {"1MB", 1000000},
        {"1G", 1ULL << 30},
        {"1GiB", 1ULL << 30},
        {"1GB", 1000000000},
        {"1T", 1ULL << 40},
        {"1TiB", 1ULL << 40},
        {"1TB", 1000000000000ULL},
        {"1.5GiB", 3ULL << 29},
        {"1.5KB", 1500},
        {"0.5KiB", 512},
        {"2.50MiB", 5ULL << 19},
        {"1 GiB", 1ULL << 30},
        {"1.0", 1},
        {"18446744073709551615", UINT64_MAX},
        {"16777215TiB", 16777215ULL << 40},
    };
    static const char *const bad[] = {
        "", " 1", "1 ", "10x", "-1", "-1GiB", "+1", "1.1KiB", "0.3GiB", "1.5", "1.", ".5GiB",
        "1kb", "1gib", "1Gi", "1e9", "0x10", "01", "1GiBx", "1 GiB ", "GiB",
        "18446744073709551616", "99999999999999999999999", "16777216TiB", "1,5GiB", "1_000",
    };
    uint64_t v;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        v = 12345;
        ck_assert_msg(pod_parse_size(good[i].text, &v) == 0, "'%s' rejected", good[i].text);
        ck_assert_msg(v == good[i].bytes, "'%s' gave %llu", good[i].text, (unsigned long long)v);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 12345;
        ck_assert_msg(pod_parse_size(bad[i], &v) == -1, "'%s' accepted", bad[i]);
        ck_assert_uint_eq(v, 12345); /* untouched on failure */
    }
    ck_assert_int_eq(pod_parse_size(NULL, &v), -1);
}
END_TEST

START_TEST(test_parse_cpu_list)
{
    int cpus[300];
    ck_assert_int_eq(pod_parse_cpu_list("0-3,8,10-11", cpus, 300), 7);
    static const int want[] = {0, 1, 2, 3, 8, 10, 11};
    for (int i = 0; i < 7; i++) ck_assert_int_eq(cpus[i], want[i]);
    ck_assert_int_eq(pod_parse_cpu_list("5", cpus, 300), 1);
    ck_assert_int_eq(cpus[0], 5);
    ck_assert_int_eq(pod_parse_cpu_list(" 2 - 3 , 1 ", cpus, 300), 3);
    ck_assert_int_eq(cpus[2], 1);
    ck_assert_int_eq(pod_parse_cpu_list("7-7", cpus, 300), 1);
    ck_assert_int_eq(pod_parse_cpu_list("1023", cpus, 300), 1);
    ck_assert_int_eq(pod_parse_cpu_list("0-255", cpus, 256), 256);
    ck_assert_int_eq(pod_parse_cpu_list("0-3", cpus, 4), 4);

    static const char *const bad[] = {
        "3-1", "a", "1,,2", "1,1", "0-3,2", "", " ", ",", "1,", ",1", "-1", "1-", "1-2-3",
        "1024", "0-1024", "99999999999999999999", "1 2", "0x1", "1.5", "1;2",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(pod_parse_cpu_list(bad[i], cpus, 300) == -1, "'%s' accepted", bad[i]);
    ck_assert_int_eq(pod_parse_cpu_list("0-4", cpus, 4), -1); /* more than max */
    ck_assert_int_eq(pod_parse_cpu_list("0-256", cpus, 256), -1);
    ck_assert_int_eq(pod_parse_cpu_list(NULL, cpus, 4), -1);
}
END_TEST

/* ---- the TCP listener's token file ---------------------------------------------------- */

/* Required with tcp_port; from host_defaults only for the hosts with a port;
 * {host} replaced; a relative path taken from the config's directory; not
 * part of the digest (it is read at start, like allow_overcommit). */
START_TEST(test_tcp_token_file)
{
    static struct pod_config c;
    pod_err err = {{0}};
    const char *text = REGION_OK
        "host_defaults:\n"
        "  workers: 1\n"
        "  socket: /tmp/t-{host}.sock\n"
        "  log_dir: /tmp/t-{host}\n"
        "  tcp_token_file: tokens/host-{host}\n"
        "hosts:\n"
        "  - tcp_port: 7000\n"
        "  - {}\n"
        "  - {tcp_port: 7002, tcp_token_file: /etc/poddb/token}\n";
    ck_assert_msg(pod_config_parse("/srv/pod/pod.yaml", text, strlen(text), &c, &err) == 0, "%s",
                  err.msg);
    ck_assert_int_eq(c.hosts[0].tcp_port, 7000);
    ck_assert_str_eq(c.hosts[0].tcp_token_file, "/srv/pod/tokens/host-0");
    ck_assert_int_eq(c.hosts[1].tcp_port, 0);
    ck_assert_str_eq(c.hosts[1].tcp_token_file, ""); /* no listener, no token */
    ck_assert_str_eq(c.hosts[2].tcp_token_file, "/etc/poddb/token");

    char with[2048], other[2048];
    replace_once(with, sizeof with, DIGEST_BASE, "    log_dir: /tmp/d-0\n",
                 "    log_dir: /tmp/d-0\n    tcp_port: 7000\n    tcp_token_file: /a/token\n");
    replace_once(other, sizeof other, DIGEST_BASE, "    log_dir: /tmp/d-0\n",
                 "    log_dir: /tmp/d-0\n    tcp_port: 7000\n    tcp_token_file: b/token\n");
    ck_assert_str_eq(parse_ok(with)->hosts[0].tcp_token_file, "/a/token");
    ck_assert_uint_eq(digest_of(with), digest_of(other));
    ck_assert_uint_ne(digest_of(with), digest_of(DIGEST_BASE)); /* the port is in it */
}
END_TEST

/* ---- module paths: a relative one is taken from the config file's directory ------------ */

#define MODULES_REL "modules:\n  - ./m.so\n  - sub/./n.so\n  - ../x.so\n  - /abs//y.so\n  - z.so\n"

START_TEST(test_module_paths_from_config_dir)
{
    /* The directory does not exist: it is taken as written. */
    static struct pod_config c;
    pod_err err = {{0}};
    const char *text = REGION_OK HOSTS_OK MODULES_REL;
    ck_assert_msg(pod_config_parse("/no/such/dir/t.yaml", text, strlen(text), &c, &err) == 0,
                  "%s", err.msg);
    ck_assert_int_eq(c.nmodules, 5);
    ck_assert_str_eq(c.modules[0], "/no/such/dir/m.so");
    ck_assert_str_eq(c.modules[1], "/no/such/dir/sub/n.so");
    ck_assert_str_eq(c.modules[2], "/no/such/dir/../x.so");
    ck_assert_str_eq(c.modules[3], "/abs//y.so"); /* absolute: kept as written */
    ck_assert_str_eq(c.modules[4], "/no/such/dir/z.so"); /* not looked up on the library path */
    ck_assert_uint_eq(c.module_line[0], 11);
    ck_assert_uint_eq(c.module_col[0], 5);
    ck_assert_uint_eq(c.module_line[4], 15);

    /* A name without a directory: the working directory. */
    char cwd[PATH_MAX], want[PATH_MAX + 16];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    const struct pod_config *d = parse_ok(REGION_OK HOSTS_OK MODULES_REL);
    snprintf(want, sizeof want, "%s/m.so", cwd);
    ck_assert_str_eq(d->modules[0], want);
    ck_assert_int_eq(pod_config_parse("/t.yaml", text, strlen(text), &c, &err), 0);
    ck_assert_str_eq(c.modules[0], "/m.so");
}
END_TEST

/* Writes `text` to DIR/sub/pod.yaml in a new temporary DIR; returns DIR. */
static const char *write_conf_in_temp_dir(const char *text)
{
    static char dir[64];
    char path[128];
    snprintf(dir, sizeof dir, "/tmp/poddb-test-config-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/sub", dir);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/sub/pod.yaml", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    return dir;
}

START_TEST(test_module_paths_independent_of_cwd)
{
    const char *dir = write_conf_in_temp_dir(REGION_OK HOSTS_OK "modules: [./mymod.so]\n");
    char real[PATH_MAX], want[PATH_MAX + 32], abs_conf[128], cwd[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(dir, real));
    snprintf(want, sizeof want, "%s/sub/mymod.so", real);
    snprintf(abs_conf, sizeof abs_conf, "%s/sub/pod.yaml", dir);
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));

    /* The same file named three ways from three working directories. */
    static struct pod_config a, b, c;
    pod_err err = {{0}};
    ck_assert_int_eq(chdir("/"), 0);
    ck_assert_msg(pod_config_load(abs_conf, &a, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(chdir(dir), 0);
    ck_assert_msg(pod_config_load("sub/pod.yaml", &b, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(chdir("sub"), 0);
    ck_assert_msg(pod_config_load("./pod.yaml", &c, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(chdir(cwd), 0);

    ck_assert_str_eq(a.modules[0], want);
    ck_assert_str_eq(b.modules[0], want);
    ck_assert_str_eq(c.modules[0], want);
    ck_assert_str_eq(b.source, "sub/pod.yaml"); /* messages name the file as given */
    /* Hosts given the file under different names still agree on the digest. */
    ck_assert_uint_eq(pod_config_digest(&a), pod_config_digest(&b));
    ck_assert_uint_eq(pod_config_digest(&a), pod_config_digest(&c));
    remove(abs_conf);
    snprintf(abs_conf, sizeof abs_conf, "%s/sub", dir);
    rmdir(abs_conf);
    rmdir(dir);
}
END_TEST

START_TEST(test_module_path_too_long)
{
    char name[300], text[1024];
    struct pod_config c;
    pod_err err = {{0}};
    snprintf(name, sizeof name, "/%0240d/t.yaml", 0);
    snprintf(text, sizeof text, "%s%smodules: [./m.so, ./%020d.so]\n", REGION_OK, HOSTS_OK, 0);
    ck_assert_int_eq(pod_config_parse(name, text, strlen(text), &c, &err), -1);
    char want[600];
    snprintf(want, sizeof want,
             "%s:10:19: modules[1]: './%020d.so' taken from the config's directory is 265 bytes "
             "long (expected at most 255: POD_PATH_MAX)",
             name, 0);
    ck_assert_str_eq(err.msg, want);
}
END_TEST

/* ---- bad configurations: each names the line, column and key ------------------------ */

static const struct bad_case {
    const char *what;
    const char *text;
    const char *expected; /* the message after "t.yaml:" starts with this */
} bad_cases[] = {
    /* mode: dm */
    {"unknown mode", "mode: cdl\n" REGION_OK HOSTS_OK,
     "1:7: mode: unknown value 'cdl' (expected cxl (the default: a shared CXL region) or dm "
     "(memory nodes))"},
    {"mode in capitals", "mode: DM\n" DM_HOSTS_OK, "1:7: mode: unknown value 'DM'"},
    {"dm section with the default mode", REGION_OK HOSTS_OK "dm:\n  pod: p\n",
     "10:1: dm: only with mode: dm (expected mode: dm, or no dm section: the mode is cxl, the "
     "default)"},
    {"dm section with mode: cxl", "mode: cxl\n" REGION_OK HOSTS_OK "dm: {pod: p}\n",
     "11:1: dm: only with mode: dm (expected mode: dm, or no dm section: the mode is cxl)"},
    {"no dm section", "mode: dm\n" DM_HOSTS_OK DM_ENGINE_OK,
     "1:1: dm: missing required key (expected a mapping with the memory nodes' pod, provider "
     "and memnodes, required with mode: dm)"},
    {"region with mode: dm", DM_OK REGION_OK,
     "14:1: region: not used with mode: dm: the records live on the memory nodes (expected no "
     "region section, or mode: cxl)"},
    {"no region with mode: cxl", "mode: cxl\n" HOSTS_OK, "1:1: region: missing required key"},
    {"dm is a scalar", "mode: dm\ndm: yes\n" DM_HOSTS_OK DM_ENGINE_OK,
     "2:5: dm: is a scalar (expected a mapping with keys: pod, provider, memnodes, pool_size, "
     "protocol, undo_log_size, replicas, inflight, nic_model, versions)"},
    {"misspelt dm key", "mode: dm\ndm:\n  pod: p\n  memnode: [/m.sock]\n" DM_HOSTS_OK,
     "4:3: dm.memnode: unknown key (expected one of: pod, provider, memnodes, pool_size, "
     "protocol, undo_log_size, replicas, inflight, nic_model, versions)"},
    {"unknown dm protocol", "mode: dm\ndm:\n  pod: p\n  memnodes: [/m.sock]\n  protocol: occ\n"
     DM_HOSTS_OK DM_ENGINE_OK,
     "5:13: dm.protocol: unknown value 'occ' (expected ford (the default: optimistic reads, "
     "undo logs, a dead compute node recovered), rs-2pl, motor (ford over records of several "
     "versions, snapshot reads) or lotus (motor's records, locks in the compute nodes' "
     "tables))"},
    {"versions under ford",
     "mode: dm\ndm:\n  pod: p\n  memnodes: [/m.sock]\n  versions: 3\n" DM_HOSTS_OK DM_ENGINE_OK,
     "5:13: dm.versions: only with dm.protocol: motor or lotus (ford keeps one version of a "
     "record)"},
    {"one version under motor",
     "mode: dm\ndm:\n  pod: p\n  memnodes: [/m.sock]\n  protocol: motor\n  versions: 1\n"
     DM_HOSTS_OK DM_ENGINE_OK,
     "6:13: dm.versions: 1 is out of range (2..16)"},
    {"backups under motor",
     "mode: dm\ndm:\n  pod: p\n  memnodes: [/a.sock, /b.sock]\n  protocol: motor\n"
     "  replicas: 1\n" DM_HOSTS_OK DM_ENGINE_OK,
     "6:13: dm.replicas: 1 needs dm.protocol: ford (its readers may see a version "
     "that reached a memory node and not its backup)"},
    {"backups under lotus",
     "mode: dm\ndm:\n  pod: p\n  memnodes: [/a.sock, /b.sock]\n  protocol: lotus\n"
     "  replicas: 1\n" DM_HOSTS_OK DM_ENGINE_OK,
     "6:13: dm.replicas: 1 needs dm.protocol: ford (its readers may see a version "
     "that reached a memory node and not its backup)"},
    {"undo log smaller than 64KiB",
     "mode: dm\ndm:\n  pod: p\n  memnodes: [/m.sock]\n  undo_log_size: 4KiB\n" DM_HOSTS_OK,
     "5:18: dm.undo_log_size: 4KiB (4096 bytes) is out of range (64KiB..1GiB)"},
    {"more backups than other memory nodes",
     "mode: dm\ndm:\n  pod: p\n  memnodes: [/a.sock, /b.sock]\n  replicas: 2\n" DM_HOSTS_OK
     DM_ENGINE_OK,
     "5:13: dm.replicas: 2 backups need at least 3 memory nodes (dm.memnodes lists 2)"},
    {"a backup with one memory node",
     "mode: dm\ndm:\n  pod: p\n  memnodes: [/m.sock]\n  replicas: 1\n" DM_HOSTS_OK DM_ENGINE_OK,
     "5:13: dm.replicas: 1 backup needs at least 2 memory nodes (dm.memnodes lists 1)"},
    {"more than 3 backups",
     "mode: dm\ndm:\n  pod: p\n  memnodes: [/0, /1, /2, /3, /4]\n  replicas: 4\n" DM_HOSTS_OK
     DM_ENGINE_OK,
     "5:13: dm.replicas: 4 is out of range (0..3)"},
    {"negative backups",
     "mode: dm\ndm:\n  pod: p\n  memnodes: [/a.sock, /b.sock]\n  replicas: -1\n" DM_HOSTS_OK
     DM_ENGINE_OK,
     "5:13: dm.replicas: -1 is out of range (0..3)"},
    {"backups under rs-2pl",
     "mode: dm\ndm:\n  pod: p\n  memnodes: [/a.sock, /b.sock]\n  protocol: rs-2pl\n"
     "  replicas: 1\n" DM_HOSTS_OK DM_ENGINE_OK,
     "6:13: dm.replicas: 1 needs dm.protocol: ford (rs-2pl cannot recover the compute nodes "
     "that a lost memory node stops)"},
    {"backups not an integer",
     "mode: dm\ndm:\n  pod: p\n  memnodes: [/a.sock, /b.sock]\n  replicas: one\n" DM_HOSTS_OK
     DM_ENGINE_OK,
     "5:13: dm.replicas: 'one' is not an integer (expected an integer in 0..3: the backups of "
     "each memory node's records on the next memory nodes"},
    {"no transaction in flight",
     "mode: dm\ndm:\n  pod: p\n  memnodes: [/m.sock]\n  inflight: 0\n" DM_HOSTS_OK DM_ENGINE_OK,
     "5:13: dm.inflight: 0 is out of range (1..64)"},
    {"65 transactions in flight",
     "mode: dm\ndm:\n  pod: p\n  memnodes: [/m.sock]\n  inflight: 65\n" DM_HOSTS_OK DM_ENGINE_OK,
     "5:13: dm.inflight: 65 is out of range (1..64)"},
    {"fractional backups",
     "mode: dm\ndm:\n  pod: p\n  memnodes: [/a.sock, /b.sock]\n  replicas: 1.5\n" DM_HOSTS_OK
     DM_ENGINE_OK,
     "5:13: dm.replicas: '1.5' is not an integer"},
    {"no pod", "mode: dm\ndm:\n  memnodes: [/m.sock]\n" DM_HOSTS_OK DM_ENGINE_OK,
     "3:3: dm.pod: missing required key (expected the pod name the memory nodes serve "
     "(poddb-memnode --pod): 1..63 letters, digits, '_', '.' or '-')"},
    {"pod name with a space", "mode: dm\ndm:\n  pod: 'my pod'\n  memnodes: [/m.sock]\n"
     DM_HOSTS_OK DM_ENGINE_OK,
     "3:8: dm.pod: 'my pod' is not a valid name (expected the pod name the memory nodes serve"},
    {"pod name of 64 characters", "mode: dm\ndm:\n  pod: " REPEAT16("abcd") "\n"
     "  memnodes: [/m.sock]\n" DM_HOSTS_OK DM_ENGINE_OK,
     "3:8: dm.pod: 'abcdabcdabcdabcdabcdabcdabcdabcdabcdabcd...' is not a valid name"},
    {"unknown provider", "mode: dm\ndm:\n  pod: p\n  provider: verbs\n  memnodes: [/m.sock]\n"
     DM_HOSTS_OK DM_ENGINE_OK,
     "4:13: dm.provider: unknown value 'verbs' (expected one of: shm, tcp;ofi_rxm, verbs;ofi_rxm "
     "(the default is shm; verbs needs an RDMA NIC))"},
    {"pool smaller than 1MiB",
     "mode: dm\ndm:\n  pod: p\n  memnodes: [/m.sock]\n  pool_size: 512KiB\n" DM_HOSTS_OK,
     "5:14: dm.pool_size: 512KiB (524288 bytes) is out of range (1MiB..128TiB)"},
    {"pool size not a size",
     "mode: dm\ndm:\n  pod: p\n  memnodes: [/m.sock]\n  pool_size: lots\n" DM_HOSTS_OK,
     "5:14: dm.pool_size: 'lots' is not a byte size"},
    {"no memnodes", "mode: dm\ndm:\n  pod: p\n" DM_HOSTS_OK DM_ENGINE_OK,
     "3:3: dm.memnodes: missing required key (expected a sequence of 1..16 memory nodes' "
     "bootstrap socket paths"},
    {"no memory node", "mode: dm\ndm:\n  pod: p\n  memnodes: []\n" DM_HOSTS_OK DM_ENGINE_OK,
     "4:13: dm.memnodes: is empty (expected a sequence of 1..16 memory nodes' bootstrap socket "
     "paths"},
    {"memnodes is a scalar", "mode: dm\ndm:\n  pod: p\n  memnodes: /m.sock\n" DM_HOSTS_OK,
     "4:13: dm.memnodes: is a scalar (expected a sequence"},
    {"a memory node twice",
     "mode: dm\ndm:\n  pod: p\n  memnodes:\n    - /a.sock\n    - /b.sock\n    - /a.sock\n"
     DM_HOSTS_OK,
     "7:7: dm.memnodes[2]: '/a.sock' is also dm.memnodes[0] (expected each memory node once)"},
    {"seventeen memory nodes",
     "mode: dm\ndm:\n  pod: p\n  memnodes: [/0, /1, /2, /3, /4, /5, /6, /7, /8, /9, /10, /11, "
     "/12, /13, /14, /15, /16]\n" DM_HOSTS_OK,
     "4:84: dm.memnodes: 17 entries, more than the 16 memory nodes a pod may have"},
    {"memory node with {host}", "mode: dm\ndm:\n  pod: p\n  memnodes: ['/m-{host}.sock']\n"
     DM_HOSTS_OK,
     "4:14: dm.memnodes[0]: {host} is only replaced in a host's socket, log_dir and "
     "tcp_token_file (expected a memory node's bootstrap socket path"},
    {"memory node's socket path too long",
     "mode: dm\ndm:\n  pod: p\n  memnodes:\n    - /" REPEAT16("aaaaaaa") "\n" DM_HOSTS_OK,
     "5:7: dm.memnodes[0]: is 113 bytes long (expected at most 107: the size of sun_path)"},
    {"nic_model without enabled", "mode: dm\ndm:\n  pod: p\n  memnodes: [/m.sock]\n  nic_model: {rtt_us: 3}\n" DM_HOSTS_OK DM_ENGINE_OK,
     "5:14: dm.nic_model.enabled: missing required key (expected true, false"},
    {"unknown nic_model key", "mode: dm\ndm:\n  pod: p\n  memnodes: [/m.sock]\n  nic_model: {enabled: true, rtt: 3}\n" DM_HOSTS_OK,
     "5:30: dm.nic_model.rtt: unknown key (expected one of: enabled, rtt_us, atomic_mops, "
     "rw_mops, gbps)"},
    {"negative round trip", "mode: dm\ndm:\n  pod: p\n  memnodes: [/m.sock]\n  nic_model: {enabled: true, rtt_us: -1}\n" DM_HOSTS_OK,
     "5:38: dm.nic_model.rtt_us: -1 is negative (expected a number of microseconds"},
    {"zero atomic rate", "mode: dm\ndm:\n  pod: p\n  memnodes: [/m.sock]\n  nic_model: {enabled: true, atomic_mops: 0}\n" DM_HOSTS_OK,
     "5:43: dm.nic_model.atomic_mops: is zero: no operation would ever complete (expected a "
     "rate above 0"},
    {"zero bandwidth", "mode: dm\ndm:\n  pod: p\n  memnodes: [/m.sock]\n  nic_model: {enabled: true, gbps: 0.0}\n" DM_HOSTS_OK,
     "5:36: dm.nic_model.gbps: is zero"},
    {"rate out of range", "mode: dm\ndm:\n  pod: p\n  memnodes: [/m.sock]\n  nic_model: {enabled: true, rw_mops: 2000000}\n" DM_HOSTS_OK,
     "5:39: dm.nic_model.rw_mops: 2000000 is out of range (expected a rate above 0 and at "
     "most 1000000"},
    {"rate with a unit", "mode: dm\ndm:\n  pod: p\n  memnodes: [/m.sock]\n  nic_model: {enabled: true, rw_mops: 35M}\n" DM_HOSTS_OK,
     "5:39: dm.nic_model.rw_mops: '35M' is not a decimal number"},
    {"quoted rate", "mode: dm\ndm:\n  pod: p\n  memnodes: [/m.sock]\n  nic_model: {enabled: true, gbps: '100'}\n" DM_HOSTS_OK,
     "5:36: dm.nic_model.gbps: '100' is quoted"},
    {"nic_model is a scalar", "mode: dm\ndm:\n  pod: p\n  memnodes: [/m.sock]\n  nic_model: on\n" DM_HOSTS_OK,
     "5:14: dm.nic_model: is a scalar (expected a mapping with keys: enabled, rtt_us"},
    {"a host that logs with mode: dm", DM_SECTION_OK
     "host_defaults:\n  workers: 1\n  socket: /tmp/poddb-test-{host}.sock\n"
     "hosts:\n  - {}\n  - loggers: 1\n" DM_ENGINE_OK,
     "11:14: hosts[1].loggers: is 1 but mode: dm does not log yet (expected 0: set loggers: 0, "
     "or leave it out: with mode: dm it defaults to 0)"},
    {"loggers in host_defaults with mode: dm", DM_SECTION_OK
     "host_defaults:\n  workers: 1\n  loggers: 2\n  socket: /tmp/poddb-test-{host}.sock\n"
     "hosts:\n  - {loggers: 0}\n" DM_ENGINE_OK,
     "8:12: host_defaults.loggers: is 2 but mode: dm does not log yet (expected 0: set "
     "loggers: 0"},
    {"phantom protection by default, no engine", DM_SECTION_OK DM_HOSTS_OK,
     "1:1: engine.phantom_protection: is true by default with mode: dm: the memory nodes' index "
     "is a hash, so next-key locking cannot run (expected engine.phantom_protection: false, "
     "written in the file; scans then neither see nor block concurrent inserts)"},
    {"phantom protection by default, empty engine", DM_SECTION_OK DM_HOSTS_OK "engine: ~\n",
     "12:9: engine.phantom_protection: is true by default with mode: dm"},
    {"phantom protection by default", DM_SECTION_OK DM_HOSTS_OK "engine:\n  epoch_ms: 5\n",
     "13:3: engine.phantom_protection: is true by default with mode: dm: the memory nodes' "
     "index is a hash"},
    {"phantom protection on with mode: dm", DM_SECTION_OK DM_HOSTS_OK
     "engine:\n  phantom_protection: yes\n",
     "13:23: engine.phantom_protection: is true with mode: dm: the memory nodes' index is a "
     "hash, so next-key locking cannot run (expected engine.phantom_protection: false"},
    {"duplicate log_dir with mode: dm", DM_SECTION_OK
     "host_defaults:\n  workers: 1\n  socket: /tmp/poddb-test-{host}.sock\n  log_dir: /tmp/same\n"
     "hosts:\n  - {}\n  - {}\n" DM_ENGINE_OK,
     "9:12: hosts[1].log_dir: '/tmp/same' is also the log_dir of hosts[0]"},

    /* misspelt keys */
    {"misspelt region key",
     "region:\n  path: /dev/shm/poddb-test\n  kind: shm\n  size: 1GiB\n  hwcc_budgt: 64MiB\n"
     HOSTS_OK,
     "5:3: region.hwcc_budgt: unknown key (expected one of: path, kind, size, hwcc_budget, "
     "numa_node, simulate_noncoherent, allow_overcommit)"},
    {"misspelt section", REGION_OK HOSTS_OK "engnie:\n  epoch_ms: 5\n",
     "10:1: engnie: unknown key (expected one of: region, hosts, host_defaults, engine, server, "
     "tables, modules, workloads, mode, dm)"},
    {"misspelt host key",
     REGION_OK "hosts:\n  - workers: 2\n    sockt: /tmp/s\n    log_dir: /tmp/l\n",
     "8:5: hosts[0].sockt: unknown key (expected one of: workers, loggers, cpus, socket, "
     "log_dir, tcp_port, tcp_token_file, huge_pages)"},
    {"misspelt engine key", REGION_OK HOSTS_OK "engine:\n  epoch: 5\n",
     "11:3: engine.epoch: unknown key (expected one of: epoch_ms, moveout_threshold, "
     "moveback_rate, coherence, phantom_protection, checkpoint_after, reply_before_durable, eviction, "
     "shortcut_pointers, dirty_tracking, locking, max_retries, retry_timeout_ms, slow_call_ms, "
     "durable_wait_ms)"},
    {"misspelt host_defaults key", REGION_OK "host_defaults:\n  worker: 1\n" HOSTS_OK,
     "7:3: host_defaults.worker: unknown key"},
    {"key in the wrong case", REGION_OK HOSTS_OK "Engine: {}\n", "10:1: Engine: unknown key"},
    {"merge key", REGION_OK "  <<: {numa_node: 1}\n" HOSTS_OK, "6:3: region.<<: unknown key"},

    /* kv tables, modules, tcp ports */
    {"table without value_size", REGION_OK HOSTS_OK "tables:\n  - name: users\n    key_size: 16\n",
     "11:5: tables[0].value_size: missing required key"},
    {"table name with a space", REGION_OK HOSTS_OK
     "tables:\n  - {name: 'my users', key_size: 8, value_size: 8}\n",
     "11:12: tables[0].name: 'my users' is not a valid name"},
    {"table key_size too big", REGION_OK HOSTS_OK
     "tables:\n  - {name: t, key_size: 256, value_size: 8}\n",
     "11:25: tables[0].key_size: 256 is out of range (1..254)"},
    {"duplicate table", REGION_OK HOSTS_OK
     "tables:\n  - {name: t, key_size: 8, value_size: 8}\n  - {name: t, key_size: 8, value_size: 8}\n",
     "12:12: tables[1].name: 't' is also the name of tables[0]"},
    {"misspelt table key", REGION_OK HOSTS_OK
     "tables:\n  - {name: t, key_size: 8, value_sise: 8}\n",
     "11:28: tables[0].value_sise: unknown key"},
    {"modules is a mapping", REGION_OK HOSTS_OK "modules:\n  a: b\n",
     "11:3: modules: is a mapping (expected a sequence of paths"},
    {"move-back rate out of range", REGION_OK HOSTS_OK "engine:\n  moveback_rate: -1\n",
     "11:18: engine.moveback_rate: -1 is out of range (0..10000000)"},
    {"no retries at all", REGION_OK HOSTS_OK "engine:\n  max_retries: 0\n",
     "11:16: engine.max_retries: 0 is out of range (1..1000000000)"},
    {"retry time budget negative", REGION_OK HOSTS_OK "engine:\n  retry_timeout_ms: -5\n",
     "11:21: engine.retry_timeout_ms: -5 is out of range (0..86400000)"},
    {"watchdog period over a day", REGION_OK HOSTS_OK "engine:\n  slow_call_ms: 86400001\n",
     "11:17: engine.slow_call_ms: 86400001 is out of range (0..86400000)"},
    {"durable wait negative", REGION_OK HOSTS_OK "engine:\n  durable_wait_ms: -1\n",
     "11:20: engine.durable_wait_ms: -1 is out of range (0..86400000)"},

    /* server limits */
    {"misspelt server key", REGION_OK HOSTS_OK "server:\n  max_buffer: 1GiB\n",
     "11:3: server.max_buffer: unknown key (expected one of: max_conn_buffered, max_buffered, "
     "max_calls_per_conn, auth_timeout_ms)"},
    {"server is a scalar", REGION_OK HOSTS_OK "server: big\n",
     "10:9: server: is a scalar (expected a mapping with keys: max_conn_buffered"},
    {"connection limit too small", REGION_OK HOSTS_OK "server:\n  max_conn_buffered: 64KiB\n",
     "11:22: server.max_conn_buffered: 64KiB (65536 bytes) is out of range (1MiB..64TiB)"},
    {"server limit not a size", REGION_OK HOSTS_OK "server:\n  max_buffered: lots\n",
     "11:17: server.max_buffered: 'lots' is not a byte size"},
    {"server limit with a bad unit", REGION_OK HOSTS_OK "server:\n  max_buffered: 1gib\n",
     "11:17: server.max_buffered: '1gib' is not a byte size"},
    {"connection limit above the server's", REGION_OK HOSTS_OK
     "server:\n  max_buffered: 32MiB\n  max_conn_buffered: 64MiB\n",
     "12:22: server.max_conn_buffered: 64MiB is more than server.max_buffered (expected at most "
     "32MiB: one connection cannot hold more than the whole server)"},
    {"no calls per connection", REGION_OK HOSTS_OK "server:\n  max_calls_per_conn: 0\n",
     "11:23: server.max_calls_per_conn: 0 is out of range (1..65536)"},
    {"auth timeout too long", REGION_OK HOSTS_OK "server:\n  auth_timeout_ms: 86400001\n",
     "11:20: server.auth_timeout_ms: 86400001 is out of range (0..86400000)"},
    {"tcp port out of range", REGION_OK DEFAULTS_OK "hosts:\n  - tcp_port: 70000\n",
     "11:15: hosts[0].tcp_port: 70000 is out of range (1..65535)"},
    {"duplicate tcp port", REGION_OK DEFAULTS_OK "  tcp_token_file: /t\n"
     "hosts:\n  - tcp_port: 7000\n  - tcp_port: 7000\n",
     "13:15: hosts[1].tcp_port: 7000 is also the tcp_port of hosts[0]"},
    {"tcp port without a token file", REGION_OK DEFAULTS_OK "hosts:\n  - {}\n  - tcp_port: 7000\n",
     "12:5: hosts[1].tcp_token_file: missing required key (expected a file holding the TCP "
     "listener's token, required with tcp_port (a relative path is taken from the config's "
     "directory); the listener on tcp_port 7000 answers only calls that give the token; set it "
     "in this entry or in host_defaults)"},
    {"token file without a tcp port", REGION_OK DEFAULTS_OK
     "hosts:\n  - tcp_port: 7000\n    tcp_token_file: /t\n  - tcp_token_file: /t\n",
     "13:5: hosts[1].tcp_token_file: is set but the host has no tcp_port (expected tcp_port in "
     "this entry or in host_defaults, or no tcp_token_file: only the TCP listener uses a token)"},
    {"empty token file path", REGION_OK DEFAULTS_OK "hosts:\n  - tcp_port: 7000\n    tcp_token_file: ''\n",
     "12:21: hosts[0].tcp_token_file: is empty"},
    {"token file with a misspelt placeholder", REGION_OK DEFAULTS_OK
     "hosts:\n  - tcp_port: 7000\n    tcp_token_file: /t-{hots}\n",
     "12:21: hosts[0].tcp_token_file: unknown placeholder in '/t-{hots}'"},
    {"huge pages not a boolean", REGION_OK DEFAULTS_OK "hosts:\n  - huge_pages: 2MiB\n",
     "11:17: hosts[0].huge_pages: '2MiB' is not a boolean (expected true, false, yes, no, on or off)"},

    /* wrong types */
    {"word for an integer", REGION_OK "hosts:\n  - workers: two\n",
     "7:14: hosts[0].workers: 'two' is not an integer (expected an integer in 1..64)"},
    {"quoted integer", REGION_OK "hosts:\n  - workers: \"2\"\n",
     "7:14: hosts[0].workers: '2' is quoted"},
    {"fraction for an integer", REGION_OK "hosts:\n  - workers: 2.0\n",
     "7:14: hosts[0].workers: '2.0' is not an integer"},
    {"hex integer", REGION_OK "hosts:\n  - workers: 0x10\n",
     "7:14: hosts[0].workers: '0x10' is not an integer"},
    {"leading zero", REGION_OK "hosts:\n  - workers: 010\n",
     "7:14: hosts[0].workers: '010' has a leading zero"},
    {"sequence for an integer", REGION_OK "hosts:\n  - workers: [1, 2]\n",
     "7:14: hosts[0].workers: is a sequence (expected an integer in 1..64)"},
    {"empty value", REGION_OK "hosts:\n  - workers:\n    socket: /s\n",
     "7:13: hosts[0].workers: has no value (expected an integer in 1..64)"},
    {"region is a sequence", "region: [a, b]\n" HOSTS_OK,
     "1:9: region: is a sequence (expected a mapping with keys: path, kind, size, hwcc_budget, "
     "numa_node, simulate_noncoherent, allow_overcommit)"},
    {"region has no value", "region:\n" HOSTS_OK, "1:8: region: has no value"},
    {"hosts is a mapping", REGION_OK "hosts:\n  workers: 2\n",
     "7:3: hosts: is a mapping (expected a sequence of 1..16 host entries)"},
    {"host entry is a scalar", REGION_OK "hosts:\n  - hello\n",
     "7:5: hosts[0]: is a scalar (expected a mapping with keys: workers, loggers, cpus, "
     "socket, log_dir, tcp_port, tcp_token_file, huge_pages)"},
    {"host entry is empty", REGION_OK DEFAULTS_OK "hosts:\n  - {}\n  -\n",
     "12:4: hosts[1]: has no value (expected a mapping; write {} to take every key"},
    {"engine is a scalar", REGION_OK HOSTS_OK "engine: fast\n",
     "10:9: engine: is a scalar (expected a mapping with keys: epoch_ms"},
    {"bad boolean", REGION_OK "  simulate_noncoherent: maybe\n" HOSTS_OK,
     "6:25: region.simulate_noncoherent: 'maybe' is not a boolean (expected true, false, yes, "
     "no, on or off)"},
    {"number for a boolean", REGION_OK HOSTS_OK "engine:\n  phantom_protection: 1\n",
     "11:23: engine.phantom_protection: '1' is not a boolean"},
    {"capitalised boolean", REGION_OK "  simulate_noncoherent: True\n" HOSTS_OK,
     "6:25: region.simulate_noncoherent: 'True' is not a boolean"},
    {"quoted boolean", REGION_OK "  simulate_noncoherent: 'true'\n" HOSTS_OK,
     "6:25: region.simulate_noncoherent: 'true' is quoted"},
    {"mapping for a path", REGION_OK DEFAULTS_OK "hosts:\n  - socket: {a: 1}\n",
     "11:13: hosts[0].socket: is a mapping"},
    {"non-scalar key", REGION_OK HOSTS_OK "? [a, b]\n: c\n",
     "10:3: a key is a sequence (expected a name, one of: region, hosts, host_defaults, "
     "engine, server, tables, modules, workloads, mode, dm)"},

    /* workloads */
    {"unknown workload", REGION_OK HOSTS_OK "workloads:\n  tpc-c: {}\n",
     "11:3: workloads.tpc-c: unknown key (expected one of: tpcc, ycsb, smallbank)"},
    {"misspelt tpcc key", REGION_OK HOSTS_OK "workloads:\n  tpcc:\n    warehouse: 4\n",
     "12:5: workloads.tpcc.warehouse: unknown key (expected one of: warehouses, items, "
     "customers_per_district, remote_new_order_pct, remote_payment_pct, load_at_start, "
     "range_reads)"},
    {"unknown range_reads", REGION_OK HOSTS_OK "workloads:\n  tpcc:\n    range_reads: hash\n",
     "12:18: workloads.tpcc.range_reads: unknown value 'hash' (expected auto, scan or point)"},
    {"workloads is a sequence", REGION_OK HOSTS_OK "workloads:\n  - tpcc\n",
     "11:3: workloads: is a sequence (expected a mapping with keys: tpcc, ycsb, smallbank)"},
    {"workload twice", REGION_OK HOSTS_OK "workloads:\n  tpcc: {}\n  tpcc: {}\n",
     "12:3: workloads.tpcc: duplicate key (first at line 11"},
    {"tpcc is a scalar", REGION_OK HOSTS_OK "workloads:\n  tpcc: yes\n",
     "11:9: workloads.tpcc: is a scalar (expected a mapping with keys: warehouses"},
    {"remote share over 100", REGION_OK HOSTS_OK "workloads:\n  tpcc: {remote_payment_pct: 101}\n",
     "11:30: workloads.tpcc.remote_payment_pct: 101 is out of range (0..100)"},
    {"no warehouses", REGION_OK HOSTS_OK "workloads:\n  tpcc:\n    warehouses: 0\n",
     "12:17: workloads.tpcc.warehouses: 0 is out of range (1..10000)"},
    {"theta 1", REGION_OK HOSTS_OK "workloads:\n  ycsb:\n    theta: 1\n",
     "12:12: workloads.ycsb.theta: 1 is out of range (expected a number in [0, 1)"},
    {"negative theta", REGION_OK HOSTS_OK "workloads:\n  ycsb:\n    theta: -0.5\n",
     "12:12: workloads.ycsb.theta: '-0.5' is not a decimal number"},
    {"quoted tuples", REGION_OK HOSTS_OK "workloads:\n  ycsb:\n    tuples: '100'\n",
     "12:13: workloads.ycsb.tuples: '100' is quoted"},
    {"too few tuples", REGION_OK HOSTS_OK "workloads:\n  ycsb:\n    tuples: 15\n    partitions: 2\n",
     "12:13: workloads.ycsb.tuples: 15 tuples in 2 partitions are fewer than 10 per partition"},
    {"tuples too large", REGION_OK HOSTS_OK "workloads:\n  ycsb:\n    tuples: 99999999999999999999\n",
     "12:13: workloads.ycsb.tuples: 99999999999999999999 is out of range (10..1099511627776)"},
    {"more partitions than accounts", REGION_OK HOSTS_OK
     "workloads:\n  smallbank:\n    accounts: 4\n    partitions: 5\n",
     "13:17: workloads.smallbank.partitions: 5 partitions for 4 accounts"},
    {"hot set larger than the accounts", REGION_OK HOSTS_OK
     "workloads:\n  smallbank:\n    accounts: 100\n    hot_accounts: 101\n",
     "13:19: workloads.smallbank.hot_accounts: 101 is out of range (1..100)"},
    {"bad load_at_start", REGION_OK HOSTS_OK "workloads:\n  smallbank: {load_at_start: 2}\n",
     "11:30: workloads.smallbank.load_at_start: '2' is not a boolean"},

    /* missing required keys: the position of the mapping, the key's path */
    {"no region.kind",
     "region:\n  path: /dev/shm/poddb-test\n  size: 1GiB\n  hwcc_budget: 64MiB\n" HOSTS_OK,
     "2:3: region.kind: missing required key (expected one of: shm, devdax, fsdax)"},
    {"no region.hwcc_budget",
     "region:\n  path: /dev/shm/poddb-test\n  kind: shm\n  size: 1GiB\n" HOSTS_OK,
     "2:3: region.hwcc_budget: missing required key"},
    {"no region", HOSTS_OK, "1:1: region: missing required key"},
    {"no hosts", REGION_OK "engine: {}\n", "1:1: hosts: missing required key"},
    {"no workers", REGION_OK "hosts:\n  - socket: /s\n    log_dir: /l\n",
     "7:5: hosts[0].workers: missing required key (expected an integer in 1..64; set it in this "
     "entry or in host_defaults)"},
    {"no socket in entry nor defaults",
     REGION_OK "host_defaults:\n  workers: 1\nhosts:\n  - socket: /tmp/a.sock\n"
     "    log_dir: /tmp/a\n  - log_dir: /tmp/b\n",
     "11:5: hosts[1].socket: missing required key"},
    {"no log_dir", REGION_OK "hosts:\n  - {workers: 1, socket: /s}\n",
     "7:5: hosts[0].log_dir: missing required key"},

    /* out of range */
    {"workers 0", REGION_OK "hosts:\n  - workers: 0\n",
     "7:14: hosts[0].workers: 0 is out of range (1..64)"},
    {"workers 65", REGION_OK "hosts:\n  - workers: 65\n",
     "7:14: hosts[0].workers: 65 is out of range (1..64)"},
    {"workers overflow", REGION_OK "hosts:\n  - workers: 99999999999999999999999\n",
     "7:14: hosts[0].workers: 99999999999999999999999 is out of range (1..64)"},
    {"workers negative overflow", REGION_OK "hosts:\n  - workers: -9223372036854775809\n",
     "7:14: hosts[0].workers: -9223372036854775809 is out of range (1..64)"},
    {"loggers 17", REGION_OK "hosts:\n  - workers: 1\n    loggers: 17\n",
     "8:14: hosts[0].loggers: 17 is out of range (0..16)"},
    {"loggers negative", REGION_OK "hosts:\n  - workers: 1\n    loggers: -1\n",
     "8:14: hosts[0].loggers: -1 is out of range (0..16)"},
    {"second host out of range",
     REGION_OK DEFAULTS_OK "hosts:\n  - {}\n  - workers: 1\n    loggers: 1\n"
     "  - workers: 100\n",
     "14:14: hosts[2].workers: 100 is out of range (1..64)"},
    {"bad default even if overridden", REGION_OK "host_defaults:\n  workers: 0\n" HOSTS_OK,
     "7:12: host_defaults.workers: 0 is out of range (1..64)"},
    {"numa_node 1024", REGION_OK "  numa_node: 1024\n" HOSTS_OK,
     "6:14: region.numa_node: 1024 is out of range (-1..1023)"},
    {"numa_node -2", REGION_OK "  numa_node: -2\n" HOSTS_OK,
     "6:14: region.numa_node: -2 is out of range (-1..1023)"},
    {"numa_node word", REGION_OK "  numa_node: nowhere\n" HOSTS_OK,
     "6:14: region.numa_node: 'nowhere' is not an integer"},
    {"epoch_ms 0", REGION_OK HOSTS_OK "engine:\n  epoch_ms: 0\n",
     "11:13: engine.epoch_ms: 0 is out of range (1..10000)"},
    {"epoch_ms 10001", REGION_OK HOSTS_OK "engine:\n  epoch_ms: 10001\n",
     "11:13: engine.epoch_ms: 10001 is out of range (1..10000)"},
    {"moveout_threshold 0", REGION_OK HOSTS_OK "engine:\n  moveout_threshold: 0\n",
     "11:22: engine.moveout_threshold: 0 is out of range (expected a number in (0, 1]"},
    {"moveout_threshold 1.01", REGION_OK HOSTS_OK "engine:\n  moveout_threshold: 1.01\n",
     "11:22: engine.moveout_threshold: 1.01 is out of range"},
    {"moveout_threshold exponent", REGION_OK HOSTS_OK "engine:\n  moveout_threshold: 9e-1\n",
     "11:22: engine.moveout_threshold: '9e-1' is not a decimal number"},
    {"moveout_threshold negative", REGION_OK HOSTS_OK "engine:\n  moveout_threshold: -0.5\n",
     "11:22: engine.moveout_threshold: '-0.5' is not a decimal number"},

    /* sizes */
    {"size too small", "region:\n  path: /p\n  kind: shm\n  size: 127MiB\n" HOSTS_OK,
     "4:9: region.size: 127MiB (133169152 bytes) is out of range (128MiB..64TiB)"},
    {"size decimal is smaller than binary",
     "region:\n  path: /p\n  kind: shm\n  size: 128MB\n" HOSTS_OK,
     "4:9: region.size: 128MB (128000000 bytes) is out of range (128MiB..64TiB)"},
    {"size too large", "region:\n  path: /p\n  kind: shm\n  size: 65TiB\n" HOSTS_OK,
     "4:9: region.size: 65TiB (71468255805440 bytes) is out of range (128MiB..64TiB)"},
    {"size with trailing junk", "region:\n  path: /p\n  kind: shm\n  size: 10x\n" HOSTS_OK,
     "4:9: region.size: '10x' is not a byte size (expected a number of bytes, or a number with "
     "a unit: B, K/KiB, M/MiB, G/GiB, T/TiB (binary), KB, MB, GB, TB (decimal))"},
    {"size lowercase unit", "region:\n  path: /p\n  kind: shm\n  size: 1gib\n" HOSTS_OK,
     "4:9: region.size: '1gib' is not a byte size"},
    {"size negative", "region:\n  path: /p\n  kind: shm\n  size: -1GiB\n" HOSTS_OK,
     "4:9: region.size: '-1GiB' is negative"},
    {"size overflow", "region:\n  path: /p\n  kind: shm\n  size: 99999999999999999999999\n"
     HOSTS_OK,
     "4:9: region.size: '99999999999999999999999' is too large"},
    {"size overflow by unit", "region:\n  path: /p\n  kind: shm\n  size: 16777216TiB\n" HOSTS_OK,
     "4:9: region.size: '16777216TiB' is too large"},
    {"size not whole bytes", "region:\n  path: /p\n  kind: shm\n  size: 0.3GiB\n" HOSTS_OK,
     "4:9: region.size: '0.3GiB' is not a whole number of bytes"},
    {"hwcc_budget equals size",
     "region:\n  path: /p\n  kind: shm\n  size: 1GiB\n  hwcc_budget: 1GiB\n" HOSTS_OK,
     "5:16: region.hwcc_budget: 1GiB is not less than region.size (expected less than 1GiB)"},
    {"hwcc_budget binary above decimal size",
     "region:\n  path: /p\n  kind: shm\n  size: 4096MB\n  hwcc_budget: 4GiB\n" HOSTS_OK,
     "5:16: region.hwcc_budget: 4GiB is not less than region.size (expected less than "
     "4096MB)"},
    {"size not whole pages", "region:\n  path: /p\n  kind: shm\n  size: 1GB\n" HOSTS_OK,
     "4:9: region.size: 1GB (1000000000 bytes) is not a multiple of 4KiB"},
    {"size in bytes not whole pages",
     "region:\n  path: /p\n  kind: shm\n  size: 134217729\n" HOSTS_OK,
     "4:9: region.size: 134217729 (134217729 bytes) is not a multiple of 4KiB"},
    {"hwcc_budget too small",
     "region:\n  path: /p\n  kind: shm\n  size: 1GiB\n  hwcc_budget: 1000KB\n" HOSTS_OK,
     "5:16: region.hwcc_budget: 1000KB is too small (expected at least 1MiB)"},

    /* duplicates */
    {"duplicate region key",
     "region:\n  path: /p\n  kind: shm\n  kind: devdax\n  size: 1GiB\n" HOSTS_OK,
     "4:3: region.kind: duplicate key (first at line 3"},
    {"duplicate section", REGION_OK HOSTS_OK "region:\n  path: /q\n",
     "10:1: region: duplicate key (first at line 1"},
    {"duplicate key in flow mapping",
     REGION_OK "hosts:\n  - {workers: 1, workers: 2, socket: /s, log_dir: /l}\n",
     "7:18: hosts[0].workers: duplicate key (first at line 7"},
    {"duplicate socket path",
     REGION_OK "hosts:\n  - workers: 1\n    socket: /tmp/s.sock\n    log_dir: /tmp/l0\n"
     "  - workers: 1\n    socket: /tmp/s.sock\n    log_dir: /tmp/l1\n",
     "11:13: hosts[1].socket: '/tmp/s.sock' is also the socket of hosts[0]"},
    {"duplicate log_dir from host_defaults",
     REGION_OK "host_defaults:\n  workers: 1\n  log_dir: /tmp/same\n"
     "hosts:\n  - socket: /tmp/a.sock\n  - socket: /tmp/b.sock\n",
     "8:12: hosts[1].log_dir: '/tmp/same' is also the log_dir of hosts[0]"},
    {"duplicate after substitution",
     REGION_OK DEFAULTS_OK "hosts:\n  - {}\n  - socket: /tmp/poddb-test-0.sock\n",
     "12:13: hosts[1].socket: '/tmp/poddb-test-0.sock' is also the socket of hosts[0]"},

    /* host count */
    {"too many hosts", REGION_OK DEFAULTS_OK "hosts:\n" REPEAT16("  - {}\n") "  - {}\n",
     "27:5: hosts: 17 entries are too many (expected at most 16 hosts)"},
    {"no hosts at all", REGION_OK DEFAULTS_OK "hosts: []\n",
     "10:8: hosts: is empty (expected a sequence of 1..16 host entries)"},
    {"hosts without value", REGION_OK DEFAULTS_OK "hosts:\n", "10:7: hosts: has no value"},

    /* enums */
    {"unknown region kind", "region:\n  path: /p\n  kind: dax\n" HOSTS_OK,
     "3:9: region.kind: unknown value 'dax' (expected one of: shm, devdax, fsdax)"},
    {"region kind in capitals", "region:\n  path: /p\n  kind: SHM\n" HOSTS_OK,
     "3:9: region.kind: unknown value 'SHM'"},
    {"unknown coherence", REGION_OK HOSTS_OK "engine:\n  coherence: partial\n",
     "11:14: engine.coherence: unknown value 'partial' (expected one of: full, non-temporal, "
     "no-shared-reader, hwcc-only)"},
    {"unknown eviction", REGION_OK HOSTS_OK "engine:\n  eviction: lru\n",
     "11:13: engine.eviction: unknown value 'lru' (expected one of: clock, random)"},
    {"shortcut_pointers not a boolean", REGION_OK HOSTS_OK "engine:\n  shortcut_pointers: 2\n",
     "11:22: engine.shortcut_pointers: '2' is not a boolean"},
    {"dirty_tracking not a boolean", REGION_OK HOSTS_OK "engine:\n  dirty_tracking: maybe\n",
     "11:19: engine.dirty_tracking: 'maybe' is not a boolean"},

    /* CPU lists */
    {"reversed CPU range", REGION_OK "hosts:\n  - workers: 1\n    cpus: 3-1\n",
     "8:11: hosts[0].cpus: '3-1' is not a valid CPU list: a range must go upwards"},
    {"CPU list with a word", REGION_OK "hosts:\n  - workers: 1\n    cpus: a\n",
     "8:11: hosts[0].cpus: 'a' is not a valid CPU list: an entry is not a CPU number"},
    {"CPU list with an empty entry", REGION_OK "hosts:\n  - workers: 1\n    cpus: 1,,2\n",
     "8:11: hosts[0].cpus: '1,,2' is not a valid CPU list: an entry is empty"},
    {"CPU listed twice", REGION_OK "hosts:\n  - workers: 1\n    cpus: 0-3,2\n",
     "8:11: hosts[0].cpus: '0-3,2' is not a valid CPU list: a CPU appears twice"},
    {"CPU number too high", REGION_OK "hosts:\n  - workers: 1\n    cpus: 2048\n",
     "8:11: hosts[0].cpus: '2048' is not a valid CPU list: CPU numbers must be at most 1023"},
    {"too many CPUs", REGION_OK "hosts:\n  - workers: 1\n    cpus: 0-300\n",
     "8:11: hosts[0].cpus: '0-300' is not a valid CPU list: it names too many CPUs"},
    {"CPU list in host_defaults", REGION_OK "host_defaults:\n  cpus: -1\n" HOSTS_OK,
     "7:9: host_defaults.cpus: '-1' is not a valid CPU list"},

    /* paths */
    {"unknown placeholder",
     REGION_OK "hosts:\n  - workers: 1\n    socket: /tmp/s-{hots}.sock\n",
     "8:13: hosts[0].socket: unknown placeholder in '/tmp/s-{hots}.sock' (expected"},
    {"placeholder in region.path", "region:\n  path: /dev/shm/p-{host}\n" HOSTS_OK,
     "2:9: region.path: {host} is only replaced in a host's socket, log_dir and tcp_token_file"},
    {"empty path", "region:\n  path: ''\n" HOSTS_OK, "2:9: region.path: is empty"},
    {"NUL in a path", "region:\n  path: \"/a\\0b\"\n" HOSTS_OK,
     "2:9: region.path: contains a NUL character"},
    {"newline in a path", "region:\n  path: \"/a\\nb\"\n" HOSTS_OK,
     "2:9: region.path: '/a?b' contains a control character"},
    {"socket path too long",
     REGION_OK "hosts:\n  - workers: 1\n    socket: /" REPEAT16("aaaaaaa") "\n",
     "8:13: hosts[0].socket: is 113 bytes long (expected at most 107: the size of sun_path)"},
    {"region path too long",
     "region:\n  path: /" REPEAT16("aaaaaaaaaaaaaaaa") "\n" HOSTS_OK,
     "2:9: region.path: is 257 bytes long (expected at most 255"},

    /* YAML itself */
    {"empty text", "", "1:1: the configuration is empty (expected a mapping with sections: "
                       "region, hosts, host_defaults, engine, server, tables, modules, workloads, "
                       "mode, dm)"},
    {"only comments", "# nothing here\n\n   \n", "1:1: the configuration is empty"},
    {"null document", "---\n~\n", "2:1: the configuration is empty"},
    {"top level sequence", "- region\n- hosts\n", "1:1: the top level is a sequence"},
    {"top level scalar", "region\n", "1:1: the top level is a scalar"},
    {"tab indentation", "region:\n  path: /p\n\tkind: shm\n", "3:1: tab character"},
    {"tab after a colon", REGION_OK "hosts:\n  - workers:\t2\n", "7:13: tab character"},
    {"unclosed flow sequence", "region: [a\nhosts: x\n",
     "2:6: YAML syntax error: did not find expected ',' or ']' (while parsing a flow sequence at "
     "line 1)"},
    {"colon inside a value", "region:\n  path: /p\n  kind: shm: x\n",
     "3:12: YAML syntax error: mapping values are not allowed in this context"},
    {"bad indentation", "region:\n  path: /p\n kind: shm\n",
     "3:2: YAML syntax error: did not find expected key"},
    {"unterminated quote", "region:\n  path: \"/p\n", "3:1: YAML syntax error: found unexpected "
                                                       "end of stream"},
    {"anchor", REGION_OK "hosts:\n  - workers: &w 2\n",
     "7:14: anchor &w: anchors and aliases are not supported"},
    {"alias", REGION_OK "hosts:\n  - workers: *w\n",
     "7:14: alias *w: anchors and aliases are not supported"},
    {"tag", REGION_OK "hosts:\n  - workers: !!str 2\n", "7:14: tag tag:yaml.org,2002:str: YAML "
                                                         "tags are not supported"},
    {"second document", REGION_OK HOSTS_OK "---\nregion: {}\n",
     "10:1: a second YAML document (a configuration is a single document)"},
    {"invalid UTF-8", REGION_OK "hosts:\n  - workers: \xff\n",
     "7:14: invalid input: invalid leading UTF-8 octet (byte 0xff)"},
    {"control character", "region:\n  path: /p\x01\n",
     "2:11: invalid input: control characters are not allowed (byte 0x01)"},
    {"UTF-16", "\xff\xfer\0e\0", "1:1: the file is UTF-16 (expected UTF-8)"},
    {"deep nesting", "region: " REPEAT16("[[") "]" REPEAT16("]]") "\n",
     "1:40: nesting deeper than 32 levels"},

    /* '{' starts a flow mapping: an unquoted {host} inside one, or at the start of a value */
    {"{host} unquoted in a flow mapping", REGION_OK
     "host_defaults: {workers: 1, socket: /tmp/s-{host}.sock, log_dir: /tmp/l}\n" HOSTS_OK,
     "6:44: YAML syntax error: an unquoted value inside {...} cannot contain '{': "
     "/tmp/s-{host}.sock (expected the value in quotes: \"/tmp/s-{host}.sock\")"},
    {"{host} unquoted at the end of a flow mapping", REGION_OK
     "hosts:\n  - {workers: 1, log_dir: /tmp/l, socket: /tmp/s-{host}}\n",
     "7:50: YAML syntax error: an unquoted value inside {...} cannot contain '{': /tmp/s-{host} "
     "(expected the value in quotes: \"/tmp/s-{host}\")"},
    {"brace unquoted in a flow sequence", REGION_OK HOSTS_OK "modules: [./m-{x}.so, /n.so]\n",
     "10:15: YAML syntax error: an unquoted value inside [...] cannot contain '{': ./m-{x}.so "
     "(expected the value in quotes: \"./m-{x}.so\")"},
    {"value starting with {host}", REGION_OK
     "host_defaults:\n  workers: 1\n  socket: {host}.sock   # comment\n" HOSTS_OK,
     "8:11: YAML syntax error: a value that starts with '{' is a flow mapping: {host}.sock "
     "(expected the value in quotes: \"{host}.sock\")"},
    {"value starting with {host} in a flow mapping", REGION_OK
     "host_defaults: {socket: {host}.sock}\n" HOSTS_OK,
     "6:25: YAML syntax error: a value that starts with '{' is a flow mapping: {host}.sock "
     "(expected the value in quotes: \"{host}.sock\")"},
    {"brace in a value that needs escapes", REGION_OK
     "host_defaults: {socket: /tmp/\"s-{host}.sock}\n" HOSTS_OK,
     "6:33: YAML syntax error: an unquoted value inside {...} cannot contain '{' (expected the "
     "value in quotes)"},
    {"a stray closing brace is not taken for a placeholder", REGION_OK
     "host_defaults: {workers: 1, socket: /tmp/x-}host.s}\n" HOSTS_OK,
     "6:45: YAML syntax error: did not find expected key"},
};

START_TEST(test_bad_config)
{
    const struct bad_case *b = &bad_cases[_i];
    struct pod_config cfg;
    pod_err err = {{0}};
    char want[512];
    snprintf(want, sizeof want, "t.yaml:%s", b->expected);
    memset(&cfg, 0xA5, sizeof cfg);
    int rc = pod_config_parse("t.yaml", b->text, strlen(b->text), &cfg, &err);
    ck_assert_msg(rc == -1, "%s: parsed, expected \"%s\"", b->what, want);
    ck_assert_msg(strncmp(err.msg, want, strlen(want)) == 0,
                  "%s:\n  expected \"%s...\"\n  got      \"%s\"", b->what, want, err.msg);
    ck_assert_int_eq(cfg.nhosts, 0); /* nothing half-filled is left behind */
}
END_TEST

START_TEST(test_raw_nul_byte)
{
    static const char text[] = "region:\n  path: /p\0q\n";
    expect_error_len(text, sizeof text - 1, "2:11: invalid input: control characters are not "
                                            "allowed (byte 0x00)");
    struct pod_config cfg;
    pod_err err;
    ck_assert_int_eq(pod_config_parse("t.yaml", NULL, 0, &cfg, &err), -1);
    ck_assert_str_eq(err.msg, "t.yaml:1:1: the configuration is empty (expected a mapping with "
                              "sections: region, hosts, host_defaults, engine, server, "
                              "tables, modules, workloads, mode, dm)");
    expect_error("", "1:1: the configuration is empty");
    ck_assert_int_eq(pod_config_parse("t.yaml", "a: 1", 4, &cfg, NULL), -1); /* err may be NULL */
}
END_TEST

/* ---- robustness: damaged files never crash ----------------------------------------- */

static char *read_whole(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    static char buf[16384];
    *len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ck_assert_uint_lt(*len, sizeof buf);
    return buf;
}

/* A failed parse must leave a message of the usual form; a successful one must
 * satisfy the documented invariants. */
static void check_outcome(int rc, const struct pod_config *cfg, const pod_err *err)
{
    if (rc == 0) {
        ck_assert(cfg->nhosts >= 1 && cfg->nhosts <= POD_MAX_HOSTS);
        if (cfg->mode == POD_MODE_DM) ck_assert_int_eq(cfg->dm.nmemnodes, 1);
        else ck_assert(cfg->region.hwcc_budget < cfg->region.size);
        for (int i = 0; i < cfg->nhosts; i++)
            ck_assert(cfg->hosts[i].workers >= 1 && cfg->hosts[i].workers <= POD_MAX_WORKERS);
    } else {
        ck_assert_int_eq(rc, -1);
        ck_assert_msg(strncmp(err->msg, "f.yaml:", 7) == 0, "odd message: %s", err->msg);
    }
}

START_TEST(test_truncated_files_never_crash)
{
    static const char *const files[] = {"conf/pod.yaml", "conf/dm.yaml"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        size_t len;
        const char *text = read_whole(repo_file(files[f]), &len);
        for (size_t cut = 0; cut <= len; cut++) {
            struct pod_config cfg;
            pod_err err = {{0}};
            int rc = pod_config_parse("f.yaml", text, cut, &cfg, &err);
            check_outcome(rc, &cfg, &err);
        }
    }
}
END_TEST

START_TEST(test_mutated_files_never_crash)
{
    static const char alphabet[] = ":-[]{}\"'&*!|>#%@`,?\n \t\\0123456789aZ\x01\xff\xc3";
    size_t len;
    const char *orig = read_whole(repo_file("conf/pod.yaml"), &len);
    char *text = malloc(len);
    ck_assert_ptr_nonnull(text);
    uint64_t rng = 0x9e3779b97f4a7c15ULL;
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(text, orig, len);
        int nflips = 1 + iter % 4;
        for (int k = 0; k < nflips; k++) {
            rng ^= rng >> 12;
            rng ^= rng << 25;
            rng ^= rng >> 27;
            uint64_t r = rng * 2685821657736338717ULL;
            text[(r >> 8) % len] = alphabet[(r >> 40) % (sizeof alphabet - 1)];
        }
        struct pod_config cfg;
        pod_err err = {{0}};
        int rc = pod_config_parse("f.yaml", text, len, &cfg, &err);
        check_outcome(rc, &cfg, &err);
    }
    free(text);
}
END_TEST

/* ---- suite ------------------------------------------------------------------------------ */

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");

    TCase *files = tu_tcase(s, "files", 0);
    tcase_add_test(files, test_default_pod_file);
    tcase_add_test(files, test_numa_8host_file);
    tcase_add_test(files, test_devdax_file);
    tcase_add_test(files, test_bench_file);
    tcase_add_test(files, test_dm_file);
    tcase_add_test(files, test_load_file_with_misspelt_key);
    tcase_add_test(files, test_load_file_with_duplicate_socket);
    tcase_add_test(files, test_load_minimal_file_defaults);
    tcase_add_test(files, test_load_missing_file);

    TCase *good = tu_tcase(s, "good", 0);
    tcase_add_test(good, test_every_key);
    tcase_add_test(good, test_host_defaults_and_placeholder);
    tcase_add_test(good, test_sixteen_hosts_and_empty_sections);
    tcase_add_test(good, test_placeholder_quoted_in_flow_style);
    tcase_add_test(good, test_numa_node_spellings);
    tcase_add_test(good, test_booleans_and_enums);
    tcase_add_test(good, test_kind_and_coherence_names);
    tcase_add_test(good, test_size_limits);
    tcase_add_test(good, test_workloads_every_key);
    tcase_add_test(good, test_workloads_defaults);
    tcase_add_test(good, test_server_limits_between_keys);
    tcase_add_test(good, test_dm_every_field);

    TCase *modules = tu_tcase(s, "module paths", 0);
    tcase_add_test(modules, test_module_paths_from_config_dir);
    tcase_add_test(modules, test_module_paths_independent_of_cwd);
    tcase_add_test(modules, test_module_path_too_long);
    tcase_add_test(modules, test_tcp_token_file);

    TCase *digest = tu_tcase(s, "digest", 0);
    tcase_add_test(digest, test_digest_ignores_text_form);
    tcase_add_test(digest, test_workloads_digest);
    tcase_add_test(digest, test_dm_digest);
    tcase_add_loop_test(digest, test_digest_sees_every_field, 0,
                        (int)(sizeof digest_changes / sizeof digest_changes[0]));

    TCase *values = tu_tcase(s, "values", 0);
    tcase_add_test(values, test_parse_size);
    tcase_add_test(values, test_parse_cpu_list);

    TCase *bad = tu_tcase(s, "bad", 0);
    tcase_add_loop_test(bad, test_bad_config, 0, (int)(sizeof bad_cases / sizeof bad_cases[0]));
    tcase_add_test(bad, test_raw_nul_byte);

    TCase *robust = tu_tcase(s, "robustness", 120);
    tcase_add_test(robust, test_truncated_files_never_crash);
    tcase_add_test(robust, test_mutated_files_never_crash);
    return s;
}

int main(void)
{
    return tu_run(config_suite());
}
