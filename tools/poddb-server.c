/* poddb-server: the database server of one host of a pod. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/host.h"
#include "conf/config.h"
#include "server/server.h"
#include "util/log.h"

static const char usage[] =
    "usage: poddb-server --conf FILE --host N [--log-level LEVEL] [--allow-empty-log]\n"
    "\n"
    "Runs the server of host N of the pod described by FILE: attaches to (or formats)\n"
    "the shared region (mode: dm: reaches the pod's records on its memory node, see\n"
    "docs/dm.md), creates the kv tables of the config, loads its modules, and\n"
    "serves stored-procedure calls on the host's Unix socket (and on 127.0.0.1:tcp_port\n"
    "when the host has one, to connections that first give the token of its\n"
    "tcp_token_file) until SIGTERM or SIGINT, then shuts down cleanly: it stops\n"
    "accepting, finishes the calls in progress, and leaves the region.\n"
    "\n"
    "A second server for the same host id refuses to start. Whatever can refuse a start\n"
    "(the TCP token file, a live server on the socket, a file there that is not a socket,\n"
    "the TCP port, the log directory, the modules, the region and the room for it) is\n"
    "checked before the region, the log directory or the socket is created: a refused\n"
    "server leaves nothing.\n"
    "\n"
    "Options:\n"
    "  -c, --conf FILE         the pod's YAML config (required; docs/configuration.md)\n"
    "  -H, --host N            this server's host id, 0..hosts-1 (required)\n"
    "  -l, --log-level LEVEL   error, warn, info (default) or debug; also PODDB_LOG\n"
    "      --allow-empty-log   start even though this host's log directory is empty and\n"
    "                          the pod says the host logged before (its log was removed\n"
    "                          or replaced): whatever only that log held is lost\n"
    "                          (docs/durability.md, \"An empty log directory\")\n"
    "  -h, --help              this text\n"
    "\n"
    "Call it with: poddb-cli --socket PATH call sys.ping   (docs/procedures.md)\n";

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"conf", required_argument, 0, 'c'},
                                         {"host", required_argument, 0, 'H'},
                                         {"log-level", required_argument, 0, 'l'},
                                         {"allow-empty-log", no_argument, 0, 'E'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *conf = NULL, *host_arg = NULL;
    struct pod_server_flags flags = {0};
    int o;
    while ((o = getopt_long(argc, argv, "c:H:l:h", opts, NULL)) != -1) {
        switch (o) {
        case 'c': conf = optarg; break;
        case 'H': host_arg = optarg; break;
        case 'E': flags.allow_empty_log = true; break;
        case 'l':
            if (!strcmp(optarg, "error")) pod_log_set_level(POD_LOG_ERROR);
            else if (!strcmp(optarg, "warn")) pod_log_set_level(POD_LOG_WARN);
            else if (!strcmp(optarg, "info")) pod_log_set_level(POD_LOG_INFO);
            else if (!strcmp(optarg, "debug")) pod_log_set_level(POD_LOG_DEBUG);
            else {
                fprintf(stderr, "poddb-server: unknown log level '%s' (error, warn, info, debug)\n",
                        optarg);
                return 2;
            }
            break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "poddb-server: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!conf || !host_arg) {
        fprintf(stderr, "poddb-server: --conf and --host are required\n\n%s", usage);
        return 2;
    }
    char *end;
    long host = strtol(host_arg, &end, 10);
    if (*end || end == host_arg) {
        fprintf(stderr, "poddb-server: --host '%s' is not a number\n", host_arg);
        return 2;
    }
    struct pod_config *c = malloc(sizeof *c);
    pod_err err = {{0}};
    if (!c || pod_config_load(conf, c, &err)) {
        fprintf(stderr, "poddb-server: %s\n", c ? err.msg : "out of memory");
        free(c);
        return 1;
    }
    if (host < 0 || host >= c->nhosts) {
        fprintf(stderr, "poddb-server: --host %ld is out of range: %s has hosts 0..%d\n", host, conf,
                c->nhosts - 1);
        free(c);
        return 2;
    }
    char role[32];
    snprintf(role, sizeof role, "host %ld", host);
    pod_log_set_role(role);
    /* The benchmark jobs (bench.load/run/check) run on the workers between
     * client calls: the server's background job. */
    int rc = pod_server_main(c, (int)host, &flags, &pod_bench_job);
    free(c);
    return rc;
}
