/* An empty log directory at start; see emptylog.h. */
#include "log/emptylog.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log/claim.h"
#include "log/durable_file.h"
#include "util/fsperm.h"
#include "util/log.h"

void emptylog_region_look(const struct cxl_region *r, const struct pod_config *c, int host,
                          struct emptylog_region *out)
{
    *out = (struct emptylog_region){.listed_by = -1};
    if (r->formatted_now) return; /* a new region remembers nothing */
    const struct cxl_control *ctl = r->ctl;
    out->kept = true;
    out->dir_lost = __atomic_load_n(&ctl->hosts[host].log_dir_lost, __ATOMIC_ACQUIRE) != 0;
    for (int l = 0; l < POD_MAX_LOGGERS; l++) {
        uint64_t w = __atomic_load_n(&ctl->logger[host][l].written, __ATOMIC_ACQUIRE);
        if (w > out->written) out->written = w;
    }
    for (int h = 0; h < c->nhosts && out->listed_by < 0; h++)
        if (h != host && (__atomic_load_n(&ctl->hosts[h].log_hosts, __ATOMIC_ACQUIRE) >> host & 1))
            out->listed_by = h;
}

#define EVIDENCE_MAX (POD_MAX_HOSTS + 3)

struct evidence {
    char item[EVIDENCE_MAX][POD_PATH_MAX + 256];
    int n;
};

static void add(struct evidence *ev, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct evidence *ev, const char *fmt, ...)
{
    if (ev->n == EVIDENCE_MAX) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ev->item[ev->n++], sizeof ev->item[0], fmt, ap);
    va_end(ap);
}

/* Host g's log directory, if this machine has it and it is g's of this pod:
 * does its durable-epoch record list `host` among the hosts that logged? */
static void look_at_dir(const struct pod_config *c, int g, int host, struct evidence *ev)
{
    const char *dir = c->hosts[g].log_dir;
    struct stat st;
    pod_err err;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return; /* on another machine, or none */
    /* Only a directory no one else may have prepared speaks for the pod. */
    if (pod_check_parents("log directory", dir, &err) || pod_check_path("log directory", dir, &err)) {
        pod_debug("empty log check: %s is not evidence: %s", dir, err.msg);
        return;
    }
    char region[POD_PATH_MAX];
    int id_host;
    if (logdir_identity_read(dir, region, sizeof region, &id_host, &err) != 1 || id_host != g ||
        strcmp(region, c->region.path) != 0)
        return;
    struct durable_record rec;
    if (durable_file_read(dir, &rec, &err) != 0 || !rec.exists || !(rec.hosts >> host & 1)) return;
    add(ev, "%s/%s, host %d's record, lists host %d among the hosts that logged in this pod "
        "(the pod's history is committed below epoch %" PRIu64 " there)", dir, DURABLE_FILE_NAME,
        g, host, rec.epoch);
}

int emptylog_check(const struct pod_config *c, int host, const struct emptylog_region *rg,
                   bool allow, bool *evidence, pod_err *err)
{
    *evidence = false;
    struct evidence *ev = calloc(1, sizeof *ev);
    if (!ev) {
        pod_err_set(err, "out of memory");
        return -1;
    }
    if (rg->dir_lost)
        add(ev, "the region records that this host's log directory was lost while it ran");
    if (rg->written)
        add(ev, "the region records that this host's loggers wrote records up to epoch %" PRIu64
            " before it stopped", rg->written);
    if (rg->listed_by >= 0)
        add(ev, "host %d lists host %d in the region among the hosts that logged in this pod",
            rg->listed_by, host);
    for (int g = 0; g < c->nhosts; g++)
        if (g != host) look_at_dir(c, g, host, ev);
    int rc = 0;
    const char *dir = c->hosts[host].log_dir;
    *evidence = ev->n > 0;
    if (ev->n && allow) {
        pod_warn("--allow-empty-log: host %d starts with an empty log directory %s although it "
                 "logged in this pod before; whatever only its log held is lost. The evidence:",
                 host, dir);
        for (int i = 0; i < ev->n; i++) pod_warn("  - %s", ev->item[i]);
    } else if (ev->n) {
        pod_error("log directory %s holds no log (no segment, checkpoint or %s record), but host "
                  "%d logged in this pod before:", dir, DURABLE_FILE_NAME, host);
        for (int i = 0; i < ev->n; i++) pod_error("  - %s", ev->item[i]);
        emptylog_refuse(c, host, err);
        rc = -1;
    }
    free(ev);
    return rc;
}

void emptylog_refuse(const struct pod_config *c, int host, pod_err *err)
{
    pod_error("Its log was removed or replaced: starting with an empty one would silently lose "
              "what it held. Restore the directory from a copy and start again; or, to go on "
              "without what it held, start this host once with --allow-empty-log (the other "
              "hosts still recover what their own logs hold); or, to start the whole pod "
              "afresh, stop every host and remove the region and every host's log directory "
              "(tools/pod down removes the region) (docs/durability.md, \"An empty log "
              "directory\")");
    pod_err_set(err, "host %d refuses to start with an empty log directory %s: it logged in this "
                "pod before (the evidence is above; --allow-empty-log starts it anyway)", host,
                c->hosts[host].log_dir);
}
