/* The libfabric layer (fabric.h), after the pattern measured on this machine:
 * symmetric hints (FI_RMA | FI_ATOMIC, RDM, mr_mode LOCAL | VIRT_ADDR |
 * ALLOCATED | PROV_KEY | ENDPOINT, FI_CONTEXT2 per op), addressing from the
 * returned mr_mode, the key from fi_mr_key, every local operand and result
 * in one registered staging buffer, completions matched by their context. */
#include "dm/fabric.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "dm/nic_model.h"
#include "util/lanes.h"

#define FAB_API FI_VERSION(1, 17)
#define MAX_PEERS 16
#define MAX_MSG_PEERS 4096 /* message peers: endpoints of other compute nodes */
#define WAVE 128 /* ops posted before their completions are reaped */

/* ---- libfabric, loaded on first use ---------------------------------------- */

static struct {
    int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
                   struct fi_info **);
    void (*freeinfo)(struct fi_info *);
    struct fi_info *(*dupinfo)(const struct fi_info *);
    int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
    const char *(*strerror)(int);
    char err[256];
    bool ok;
} lf;
static pthread_once_t lf_once = PTHREAD_ONCE_INIT;

static void lf_load(void)
{
    void *h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        snprintf(lf.err, sizeof lf.err, "libfabric is not installed (dlopen libfabric.so.1: %s)",
                 dlerror());
        return;
    }
    *(void **)&lf.getinfo = dlsym(h, "fi_getinfo");
    *(void **)&lf.freeinfo = dlsym(h, "fi_freeinfo");
    *(void **)&lf.dupinfo = dlsym(h, "fi_dupinfo");
    *(void **)&lf.fabric = dlsym(h, "fi_fabric");
    *(void **)&lf.strerror = dlsym(h, "fi_strerror");
    if (!lf.getinfo || !lf.freeinfo || !lf.dupinfo || !lf.fabric || !lf.strerror) {
        snprintf(lf.err, sizeof lf.err, "libfabric.so.1 lacks fi_getinfo/fi_fabric (too old?)");
        return;
    }
    lf.ok = true;
}

static const char *fstr(ssize_t rc) { return lf.strerror((int)(rc < 0 ? -rc : rc)); }

/* ---- the endpoint ------------------------------------------------------------ */

struct fab_peer {
    fi_addr_t addr;
    struct fab_region r;
    char label[96];
};

struct fab {
    char prov[64];
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_cq *cq;
    struct fid_av *av;
    struct fid_ep *ep;
    struct fid_mr *mr;       /* the exposed region (memory node) */
    struct fid_mr *lmr;      /* the staging buffer */
    void *desc;
    unsigned char *stage;
    size_t stage_len;
    bool cq_waits;           /* the CQ has a wait object: fi_cq_sread */
    int timeout_ms;
    size_t tx_size;
    struct fab_peer peer[MAX_PEERS];
    int npeers;
    struct nic_model *nic;   /* NULL: the provider's own costs only */
    struct fi_context2 ctx[WAVE];
    /* messages (fab_open_opts.msg_slots > 0): receive buffers of msg_bytes
     * each, always posted but while one is copied out; completions on rcq,
     * so that the ops' CQ counts only the ops' */
    struct fid_cq *rcq;
    struct fid_mr *rmr;
    unsigned char *rbuf;
    uint32_t msg_bytes, msg_slots;
    struct fi_context2 *rctx;
    fi_addr_t *mpeer;
    int nmpeers;
};

const char *fab_provider(const struct fab *f) { return f->prov; }
uint64_t fab_mr_mode(const struct fab *f) { return (uint64_t)f->info->domain_attr->mr_mode; }

static bool is_shm(const char *p) { return strcmp(p, "shm") == 0; }
/* shm's peers per endpoint (SMR_MAX_PEERS in libfabric 1.17): an endpoint
 * past them gets no answer, its operations time out. */
#define SHM_MAX_PEERS_TEXT "256"

void fab_close(struct fab *f)
{
    if (!f) return;
    if (f->ep) fi_close(&f->ep->fid);
    if (f->rmr) fi_close(&f->rmr->fid);
    if (f->rcq) fi_close(&f->rcq->fid);
    if (f->mr) fi_close(&f->mr->fid);
    if (f->lmr) fi_close(&f->lmr->fid);
    if (f->av) fi_close(&f->av->fid);
    if (f->cq) fi_close(&f->cq->fid);
    if (f->domain) fi_close(&f->domain->fid);
    if (f->fabric) fi_close(&f->fabric->fid);
    if (f->info) lf.freeinfo(f->info);
    if (f->stage) munmap(f->stage, f->stage_len);
    if (f->rbuf) munmap(f->rbuf, (size_t)f->msg_bytes * f->msg_slots);
    free(f->rctx);
    free(f->mpeer);
    nic_model_free(f->nic);
    free(f);
}

/* Bind an MR to the endpoint where the provider wants it (FI_MR_ENDPOINT). */
static int mr_bind(struct fab *f, struct fid_mr *mr, const char *what, pod_err *err)
{
    if (!(f->info->domain_attr->mr_mode & FI_MR_ENDPOINT)) return 0;
    int rc = fi_mr_bind(mr, &f->ep->fid, 0);
    if (!rc) rc = fi_mr_enable(mr);
    if (rc) {
        pod_err_set(err, "fabric %s: binding the %s to the endpoint: %s", f->prov, what, fstr(rc));
        return -1;
    }
    return 0;
}

/* shm names an endpoint's region /dev/shm/<pid>:<n>:<m> and leaves it
 * behind when its process is killed; a later process given the same pid
 * then cannot create its own (fi_enable fails with EBUSY). No live process
 * but this one has this pid, so such files are a dead one's: removed once,
 * before this process's first endpoint (later ones must not remove the
 * regions of its live endpoints). */
static void shm_remove_stale_own(void)
{
    char prefix[32];
    int n = snprintf(prefix, sizeof prefix, "%d:", (int)getpid());
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, prefix, (size_t)n) == 0) unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
}

int fab_shm_sweep(void)
{
    DIR *d = opendir("/dev/shm");
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != ':' || pid <= 0 || !strchr(end + 1, ':')) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to tell */
        if (unlinkat(dirfd(d), e->d_name, 0) == 0) n++;
    }
    closedir(d);
    return n;
}

static int msg_post(struct fab *f, uint32_t i, pod_err *err);

/* The receive buffers, registered and posted. */
static int msg_ready(struct fab *f, const struct fab_open_opts *o, pod_err *err)
{
    f->msg_slots = o->msg_slots;
    f->msg_bytes = (o->msg_bytes ? o->msg_bytes : 256 + 7) & ~7u;
    if (f->msg_bytes > f->stage_len) {
        pod_err_set(err, "fabric %s: messages of %u bytes exceed the %zu-byte staging buffer",
                    f->prov, f->msg_bytes, f->stage_len);
        return -1;
    }
    size_t len = (size_t)f->msg_bytes * f->msg_slots;
    f->rbuf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    f->rctx = calloc(f->msg_slots, sizeof *f->rctx);
    if (f->rbuf == MAP_FAILED || !f->rctx) {
        if (f->rbuf == MAP_FAILED) f->rbuf = NULL;
        pod_err_set(err, "fabric %s: no memory for %u receive buffers", f->prov, f->msg_slots);
        return -1;
    }
    int rc = fi_mr_reg(f->domain, f->rbuf, len, FI_RECV, 0, 3, 0, &f->rmr, NULL);
    if (rc) {
        pod_err_set(err, "fabric %s: registering the receive buffers: %s", f->prov, fstr(rc));
        return -1;
    }
    if (mr_bind(f, f->rmr, "receive buffers", err)) return -1;
    for (uint32_t i = 0; i < f->msg_slots; i++)
        if (msg_post(f, i, err) != 0) return -1;
    return 0;
}

struct fab *fab_open(const struct fab_open_opts *o, pod_err *err)
{
    pthread_once(&lf_once, lf_load);
    if (!lf.ok) {
        pod_err_set(err, "fabric: %s", lf.err);
        return NULL;
    }
    const char *prov = o->provider && *o->provider ? o->provider : "shm";
    struct fab *f = calloc(1, sizeof *f);
    struct fi_info *hints = lf.dupinfo(NULL);
    if (!f || !hints) {
        free(f);
        if (hints) lf.freeinfo(hints);
        pod_err_set(err, "fabric: out of memory");
        return NULL;
    }
    snprintf(f->prov, sizeof f->prov, "%s", prov);
    f->timeout_ms = o->op_timeout_ms > 0 ? o->op_timeout_ms : 10000;
    hints->caps = FI_RMA | FI_ATOMIC | (o->msg_slots ? FI_MSG : 0);
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode =
        FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    hints->domain_attr->threading = FI_THREAD_SAFE;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->fabric_attr->prov_name = strdup(prov);
    int rc;
    if (is_shm(prov)) {
        rc = lf.getinfo(FAB_API, NULL, NULL, 0, hints, &f->info);
    } else {
        hints->addr_format = FI_SOCKADDR_IN;
        rc = lf.getinfo(FAB_API, o->node ? o->node : "127.0.0.1", "0", FI_SOURCE, hints, &f->info);
    }
    lf.freeinfo(hints);
    if (rc || !f->info) {
        pod_err_set(err, "fabric: provider \"%s\" is not available here with RDM endpoints, RMA "
                    "and atomics (fi_getinfo: %s); try shm or tcp;ofi_rxm", prov, fstr(rc));
        f->info = NULL;
        fab_close(f);
        return NULL;
    }
    struct fi_info *in = f->info;
    f->tx_size = in->tx_attr && in->tx_attr->size ? in->tx_attr->size : 64;
    const char *step = "fi_fabric";
    if ((rc = lf.fabric(in->fabric_attr, &f->fabric, NULL))) goto fail;
    step = "fi_domain";
    if ((rc = fi_domain(f->fabric, in, &f->domain, NULL))) goto fail;
    step = "fi_cq_open";
    struct fi_cq_attr cqa = {.size = 1024, .format = FI_CQ_FORMAT_CONTEXT,
                             .wait_obj = (o->server && !is_shm(prov)) ? FI_WAIT_FD : FI_WAIT_NONE};
    rc = fi_cq_open(f->domain, &cqa, &f->cq, NULL);
    if (rc && cqa.wait_obj != FI_WAIT_NONE) {
        cqa.wait_obj = FI_WAIT_NONE;
        rc = fi_cq_open(f->domain, &cqa, &f->cq, NULL);
    }
    if (rc) goto fail;
    f->cq_waits = cqa.wait_obj != FI_WAIT_NONE;
    step = "fi_av_open";
    struct fi_av_attr ava = {.type = FI_AV_TABLE};
    if ((rc = fi_av_open(f->domain, &ava, &f->av, NULL))) goto fail;
    step = "fi_endpoint";
    if ((rc = fi_endpoint(f->domain, in, &f->ep, NULL))) goto fail;
    step = "fi_ep_bind";
    if ((rc = fi_ep_bind(f->ep, &f->av->fid, 0))) goto fail;
    if (o->msg_slots) {
        step = "fi_cq_open (receives)";
        struct fi_cq_attr rca = {.size = o->msg_slots, .format = FI_CQ_FORMAT_MSG,
                                 .wait_obj = FI_WAIT_NONE};
        if ((rc = fi_cq_open(f->domain, &rca, &f->rcq, NULL))) goto fail;
        step = "fi_ep_bind";
        if ((rc = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT)) ||
            (rc = fi_ep_bind(f->ep, &f->rcq->fid, FI_RECV)))
            goto fail;
    } else if ((rc = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV))) {
        goto fail;
    }
    step = "fi_enable";
    static pthread_once_t stale_removed = PTHREAD_ONCE_INIT;
    if (is_shm(prov)) pthread_once(&stale_removed, shm_remove_stale_own);
    if ((rc = fi_enable(f->ep))) goto fail;
    /* Atomics on 64-bit words, as the record store needs them. */
    size_t cnt = 0;
    step = "FI_SUM/FI_CSWAP on FI_UINT64";
    if ((rc = fi_fetch_atomicvalid(f->ep, FI_UINT64, FI_SUM, &cnt)) || !cnt ||
        (rc = fi_compare_atomicvalid(f->ep, FI_UINT64, FI_CSWAP, &cnt)) || !cnt) {
        if (!rc) rc = -FI_EOPNOTSUPP;
        goto fail;
    }
    /* The staging buffer: every operand and result of the ops. */
    f->stage_len = o->staging ? o->staging : (1u << 20);
    f->stage = mmap(NULL, f->stage_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (f->stage == MAP_FAILED) {
        f->stage = NULL;
        pod_err_set(err, "fabric %s: no memory for a %zu-byte staging buffer", prov, f->stage_len);
        fab_close(f);
        return NULL;
    }
    step = "fi_mr_reg (staging)";
    if ((rc = fi_mr_reg(f->domain, f->stage, f->stage_len,
                        FI_READ | FI_WRITE | (o->msg_slots ? FI_SEND : 0), 0, 2, 0, &f->lmr, NULL)))
        goto fail;
    if (mr_bind(f, f->lmr, "staging buffer", err)) {
        fab_close(f);
        return NULL;
    }
    f->desc = fi_mr_desc(f->lmr);
    if (o->msg_slots && msg_ready(f, o, err) != 0) {
        fab_close(f);
        return NULL;
    }
    return f;
fail:
    pod_err_set(err, "fabric %s: %s: %s", prov, step, fstr(rc));
    fab_close(f);
    return NULL;
}

int fab_name(struct fab *f, void *buf, size_t *len, pod_err *err)
{
    int rc = fi_getname(&f->ep->fid, buf, len);
    if (rc) {
        pod_err_set(err, "fabric %s: fi_getname: %s", f->prov, fstr(rc));
        return -1;
    }
    return 0;
}

int fab_expose(struct fab *f, void *buf, uint64_t len, struct fab_region *out, pod_err *err)
{
    int rc = fi_mr_reg(f->domain, buf, len, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 1, 0, &f->mr,
                       NULL);
    if (rc) {
        pod_err_set(err, "fabric %s: registering %llu bytes: %s", f->prov,
                    (unsigned long long)len, fstr(rc));
        return -1;
    }
    if (mr_bind(f, f->mr, "pool", err)) return -1;
    uint64_t mode = fab_mr_mode(f);
    out->base = (mode & (FI_MR_VIRT_ADDR | FI_MR_BASIC)) ? (uint64_t)(uintptr_t)buf : 0;
    out->key = fi_mr_key(f->mr);
    out->size = len;
    out->mr_mode = mode;
    return 0;
}

int fab_peer_add(struct fab *f, const void *peer_name, size_t len, const struct fab_region *r,
                 const char *label, pod_err *err)
{
    (void)len;
    if (f->npeers == MAX_PEERS) {
        pod_err_set(err, "fabric %s: more than %d memory nodes", f->prov, MAX_PEERS);
        return -1;
    }
    if (r->mr_mode != fab_mr_mode(f)) {
        pod_err_set(err, "fabric %s: memory node %s registered its pool with mr_mode 0x%llx, this "
                    "process got 0x%llx: not the same provider set-up", f->prov, label,
                    (unsigned long long)r->mr_mode, (unsigned long long)fab_mr_mode(f));
        return -1;
    }
    struct fab_peer *p = &f->peer[f->npeers];
    int rc = fi_av_insert(f->av, peer_name, 1, &p->addr, 0, NULL);
    if (rc != 1) {
        pod_err_set(err, "fabric %s: the address of memory node %s is not usable (fi_av_insert: "
                    "%s)", f->prov, label, rc < 0 ? fstr(rc) : "not inserted");
        return -1;
    }
    p->r = *r;
    snprintf(p->label, sizeof p->label, "%s", label);
    return f->npeers++;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *op_name(enum fab_op_kind k)
{
    static const char *const n[] = {"READ", "WRITE", "CAS", "FAA"};
    return n[k];
}

static void cq_error(struct fab *f, pod_err *err, const char *during)
{
    struct fi_cq_err_entry e = {0};
    char detail[200] = "";
    if (fi_cq_readerr(f->cq, &e, 0) >= 0)
        fi_cq_strerror(f->cq, e.prov_errno, e.err_data, detail, sizeof detail);
    pod_err_set(err, "fabric %s: %s: %s (%s)", f->prov, during, fstr(e.err ? e.err : FI_EIO),
                detail);
}

int fab_progress(struct fab *f, int timeout_ms, pod_err *err)
{
    struct fi_cq_entry ent[16];
    if (f->cq_waits) {
        ssize_t n = fi_cq_sread(f->cq, ent, 16, NULL, timeout_ms);
        if (n == -FI_EAVAIL) {
            cq_error(f, err, "memory node progress");
            return -1;
        }
        return 0;
    }
    uint64_t end = now_ns() + (uint64_t)timeout_ms * 1000000ull;
    do {
        for (int i = 0; i < 64; i++) {
            ssize_t n = fi_cq_read(f->cq, ent, 16);
            if (n == -FI_EAVAIL) {
                cq_error(f, err, "memory node progress");
                return -1;
            }
            sched_yield();
        }
    } while (now_ns() < end);
    return 0;
}

/* One look at the ops' CQ: the completions reaped (up to max, into ent);
 * 0 when there were none, after letting the thread's other lanes run
 * (src/util/lanes.h) and, once nothing came back for a while, the CPU go
 * (to the memory node, on shm); -FI_EAVAIL for an error completion (the
 * caller says which op failed: cq_error); -1 with err otherwise. */
static ssize_t reap(struct fab *f, struct fi_cq_entry *ent, size_t max, unsigned *spins,
                    pod_err *err)
{
    ssize_t got = fi_cq_read(f->cq, ent, max);
    if (got > 0) {
        *spins = 0;
        return got;
    }
    if (got == -FI_EAVAIL) return got;
    if (got != -FI_EAGAIN) {
        pod_err_set(err, "fabric %s: fi_cq_read: %s", f->prov, fstr(got));
        return -1;
    }
    if (lanes_count() > 1) lanes_yield();
    if (++*spins > 64) sched_yield();
    return 0;
}

/* Post ops[0..n) (n <= WAVE, their staging within the buffer), op i to
 * peer pp[i], and wait for all. */
static int wave(struct fab *f, struct fab_peer *const *pp, struct fab_op *ops, uint32_t n,
                unsigned char **slot, pod_err *err)
{
    uint64_t deadline = now_ns() + (uint64_t)f->timeout_ms * 1000000ull;
    uint32_t posted = 0, done = 0;
    struct fi_cq_entry ent[16];
    unsigned spins = 0;
    while (done < n) {
        while (posted < n) {
            struct fab_op *o = &ops[posted];
            const struct fab_peer *p = pp[posted];
            unsigned char *s = slot[posted];
            uint64_t addr = p->r.base + o->off;
            void *ctx = &f->ctx[posted];
            ssize_t rc;
            switch (o->kind) {
            case FAB_READ:
                rc = fi_read(f->ep, s, o->len, f->desc, p->addr, addr, p->r.key, ctx);
                break;
            case FAB_WRITE:
                rc = fi_write(f->ep, s, o->len, f->desc, p->addr, addr, p->r.key, ctx);
                break;
            case FAB_CAS: /* s: swap, compare, result */
                rc = fi_compare_atomic(f->ep, s, 1, f->desc, s + 8, f->desc, s + 16, f->desc,
                                       p->addr, addr, p->r.key, FI_UINT64, FI_CSWAP, ctx);
                break;
            default: /* FAA; s: operand, result */
                rc = fi_fetch_atomic(f->ep, s, 1, f->desc, s + 8, f->desc, p->addr, addr,
                                     p->r.key, FI_UINT64, FI_SUM, ctx);
                break;
            }
            if (rc == -FI_EAGAIN) break; /* the queue is full: reap, then go on */
            if (rc) {
                pod_err_set(err, "fabric %s: posting %s of %u bytes at offset %llu of memory "
                            "node %s: %s", f->prov, op_name(o->kind), o->len,
                            (unsigned long long)o->off, p->label, fstr(rc));
                return -1;
            }
            posted++;
        }
        ssize_t got = reap(f, ent, 16, &spins, err);
        if (got > 0) {
            done += (uint32_t)got;
            continue;
        }
        if (got == -FI_EAVAIL) {
            char during[200];
            snprintf(during, sizeof during, "a batch of %u ops on memory node %s%s", n,
                     pp[0]->label, pp[n - 1] != pp[0] ? " and others" : "");
            cq_error(f, err, during);
            return -1;
        }
        if (got < 0) return -1;
        if ((spins & 63) == 0 && now_ns() > deadline) {
            pod_err_set(err, "fabric %s: %u of %u ops (first: %s at offset %llu) on memory node "
                        "%s%s did not complete within %d ms: is the memory node running?%s",
                        f->prov, n - done, n, op_name(ops[0].kind), (unsigned long long)ops[0].off,
                        pp[0]->label, pp[n - 1] != pp[0] ? " and others" : "", f->timeout_ms,
                        is_shm(f->prov) ? " On shm, are its peers all taken? It serves at most "
                                          SHM_MAX_PEERS_TEXT " endpoints, and every worker of "
                                          "every compute node has one (workers x dm.inflight, "
                                          "and 2 more, per compute node)" : "");
            return -1;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        struct fab_op *o = &ops[i];
        unsigned char *s = slot[i];
        if (o->kind == FAB_READ) memcpy(o->buf, s, o->len);
        else if (o->kind == FAB_CAS) memcpy(&o->old, s + 16, 8);
        else if (o->kind == FAB_FAA) memcpy(&o->old, s + 8, 8);
    }
    return 0;
}

void fab_set_nic_model(struct fab *f, struct nic_model *m)
{
    nic_model_free(f->nic);
    f->nic = m;
}

/* Under the NIC model: wait until the wave of n ops (op i to peer pi[i]),
 * posted at posted_ns, would have completed on RDMA NICs: each peer's NIC
 * serves its share, the wave is done when the last is. */
static void nic_wait(struct fab *f, const int *pi, const struct fab_op *ops, uint32_t n,
                     uint64_t posted_ns)
{
    uint64_t done = 0;
    for (uint32_t first = 0; first < n; first++) {
        bool seen = false;
        for (uint32_t j = 0; j < first && !seen; j++) seen = pi[j] == pi[first];
        if (seen) continue;
        struct nic_batch b = {0};
        for (uint32_t i = first; i < n; i++) {
            if (pi[i] != pi[first]) continue;
            if (ops[i].kind <= FAB_WRITE) {
                b.rw++;
                b.bytes += ops[i].len;
            } else {
                b.atomics++;
            }
        }
        uint64_t at = nic_model_done_at(f->nic, pi[first], &b, posted_ns);
        if (at > done) done = at;
    }
    nic_model_wait_until(done);
}

static size_t stage_bytes(const struct fab_op *o)
{
    size_t b = o->kind == FAB_CAS ? 24 : o->kind == FAB_FAA ? 16 : o->len;
    return (b + 7) & ~(size_t)7;
}

/* fab_batch_to, with op i to peers[i], or to peer when peers is NULL. */
static int batch(struct fab *f, const int *peers, int peer, struct fab_op *ops, uint32_t n,
                 pod_err *err)
{
    unsigned char *slot[WAVE];
    struct fab_peer *pp[WAVE];
    int pi[WAVE];
    uint32_t limit = f->tx_size < WAVE ? (uint32_t)f->tx_size : WAVE;
    for (uint32_t i = 0; i < n;) {
        size_t used = 0;
        uint32_t k = 0;
        while (i + k < n && k < limit) {
            struct fab_op *o = &ops[i + k];
            int to = peers ? peers[i + k] : peer;
            if (to < 0 || to >= f->npeers) {
                pod_err_set(err, "fabric %s: no memory node %d", f->prov, to);
                return -1;
            }
            struct fab_peer *p = &f->peer[to];
            pp[k] = p;
            pi[k] = to;
            size_t b = stage_bytes(o);
            if (o->off + (o->kind <= FAB_WRITE ? o->len : 8) > p->r.size ||
                (o->kind > FAB_WRITE && (o->off & 7))) {
                pod_err_set(err, "fabric %s: %s of %u bytes at offset %llu is outside the %llu-byte "
                            "pool of memory node %s (or unaligned)", f->prov, op_name(o->kind),
                            o->len, (unsigned long long)o->off, (unsigned long long)p->r.size,
                            p->label);
                return -1;
            }
            if (b > f->stage_len) {
                pod_err_set(err, "fabric %s: %s of %u bytes exceeds the %zu-byte staging buffer",
                            f->prov, op_name(o->kind), o->len, f->stage_len);
                return -1;
            }
            if (used + b > f->stage_len) break;
            unsigned char *s = f->stage + used;
            slot[k] = s;
            if (o->kind == FAB_WRITE) memcpy(s, o->buf, o->len);
            else if (o->kind == FAB_CAS) {
                memcpy(s, &o->operand, 8);
                memcpy(s + 8, &o->compare, 8);
            } else if (o->kind == FAB_FAA) memcpy(s, &o->operand, 8);
            used += b;
            k++;
        }
        uint64_t posted = f->nic ? now_ns() : 0;
        if (wave(f, pp, ops + i, k, slot, err)) return -1;
        if (f->nic) nic_wait(f, pi, ops + i, k, posted);
        i += k;
    }
    return 0;
}

int fab_batch(struct fab *f, int peer, struct fab_op *ops, uint32_t n, pod_err *err)
{
    return batch(f, NULL, peer, ops, n, err);
}

int fab_batch_to(struct fab *f, const int *peers, struct fab_op *ops, uint32_t n, pod_err *err)
{
    return batch(f, peers, 0, ops, n, err);
}

int fab_read(struct fab *f, int peer, uint64_t off, void *buf, uint32_t len, pod_err *err)
{
    struct fab_op o = {.kind = FAB_READ, .off = off, .buf = buf, .len = len};
    return fab_batch(f, peer, &o, 1, err);
}

int fab_write(struct fab *f, int peer, uint64_t off, const void *buf, uint32_t len, pod_err *err)
{
    struct fab_op o = {.kind = FAB_WRITE, .off = off, .buf = (void *)buf, .len = len};
    return fab_batch(f, peer, &o, 1, err);
}

int fab_cas(struct fab *f, int peer, uint64_t off, uint64_t compare, uint64_t swap, uint64_t *old,
            pod_err *err)
{
    struct fab_op o = {.kind = FAB_CAS, .off = off, .compare = compare, .operand = swap, .len = 8};
    int rc = fab_batch(f, peer, &o, 1, err);
    *old = o.old;
    return rc;
}

int fab_faa(struct fab *f, int peer, uint64_t off, uint64_t add, uint64_t *old, pod_err *err)
{
    struct fab_op o = {.kind = FAB_FAA, .off = off, .operand = add, .len = 8};
    int rc = fab_batch(f, peer, &o, 1, err);
    if (old) *old = o.old;
    return rc;
}

/* ---- messages ------------------------------------------------------------------ */

static int msg_post(struct fab *f, uint32_t i, pod_err *err)
{
    uint64_t deadline = now_ns() + (uint64_t)f->timeout_ms * 1000000ull;
    for (;;) {
        ssize_t rc = fi_recv(f->ep, f->rbuf + (size_t)i * f->msg_bytes, f->msg_bytes,
                             fi_mr_desc(f->rmr), FI_ADDR_UNSPEC, &f->rctx[i]);
        if (!rc) return 0;
        if (rc != -FI_EAGAIN || now_ns() > deadline) {
            pod_err_set(err, "fabric %s: posting a receive buffer: %s", f->prov, fstr(rc));
            return -1;
        }
        struct fi_cq_entry ent[16];
        (void)fi_cq_read(f->cq, ent, 0); /* progress */
        sched_yield();
    }
}

int fab_msg_peer_add(struct fab *f, const void *name, size_t len, pod_err *err)
{
    if (!f->msg_slots) {
        pod_err_set(err, "fabric %s: this endpoint was opened without messages", f->prov);
        return -1;
    }
    if (f->nmpeers == MAX_MSG_PEERS) {
        pod_err_set(err, "fabric %s: more than %d endpoints to send messages to", f->prov,
                    MAX_MSG_PEERS);
        return -1;
    }
    if (!(f->nmpeers & (f->nmpeers - 1)) || !f->mpeer) {
        size_t cap = f->nmpeers ? (size_t)f->nmpeers * 2 : 8;
        fi_addr_t *p = realloc(f->mpeer, cap * sizeof *p);
        if (!p) {
            pod_err_set(err, "fabric %s: out of memory", f->prov);
            return -1;
        }
        f->mpeer = p;
    }
    (void)len;
    int rc = fi_av_insert(f->av, name, 1, &f->mpeer[f->nmpeers], 0, NULL);
    if (rc != 1) {
        pod_err_set(err, "fabric %s: an endpoint's address is not usable (fi_av_insert: %s)",
                    f->prov, rc < 0 ? fstr(rc) : "not inserted");
        return -1;
    }
    return f->nmpeers++;
}

uint32_t fab_msg_max(const struct fab *f) { return f->msg_bytes; }

int fab_send(struct fab *f, int peer, const void *msg, uint32_t len, pod_err *err)
{
    if (peer < 0 || peer >= f->nmpeers) {
        pod_err_set(err, "fabric %s: no message peer %d", f->prov, peer);
        return -1;
    }
    if (len > f->msg_bytes) {
        pod_err_set(err, "fabric %s: a message of %u bytes is longer than the %u the endpoints "
                    "receive", f->prov, len, f->msg_bytes);
        return -1;
    }
    memcpy(f->stage, msg, len);
    uint64_t deadline = now_ns() + (uint64_t)f->timeout_ms * 1000000ull;
    struct fi_cq_entry ent[1];
    ssize_t rc;
    while ((rc = fi_send(f->ep, f->stage, len, f->desc, f->mpeer[peer], &f->ctx[0])) ==
           -FI_EAGAIN) {
        (void)fi_cq_read(f->cq, ent, 0); /* progress: the queue frees as sends complete */
        if (now_ns() > deadline) break;
        sched_yield();
    }
    if (rc) {
        pod_err_set(err, "fabric %s: sending a message of %u bytes: %s", f->prov, len, fstr(rc));
        return -1;
    }
    for (unsigned spins = 0;;) {
        ssize_t got = reap(f, ent, 1, &spins, err);
        if (got == 1) return 0;
        if (got == -FI_EAVAIL) {
            cq_error(f, err, "sending a message");
            return -1;
        }
        if (got < 0) return -1;
        if ((spins & 63) == 0 && now_ns() > deadline) {
            pod_err_set(err, "fabric %s: a message of %u bytes was not sent within %d ms: does its "
                        "receiver still run?", f->prov, len, f->timeout_ms);
            return -1;
        }
    }
}

int fab_recv(struct fab *f, void *buf, uint32_t cap, uint32_t *len, int timeout_ms, pod_err *err)
{
    if (!f->msg_slots) {
        pod_err_set(err, "fabric %s: this endpoint was opened without messages", f->prov);
        return -1;
    }
    uint64_t deadline = timeout_ms > 0 ? now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
    struct fi_cq_msg_entry e;
    for (unsigned spins = 0;;) {
        ssize_t got = fi_cq_read(f->rcq, &e, 1);
        if (got == 1) break;
        if (got == -FI_EAVAIL) {
            struct fi_cq_err_entry ee = {0};
            char detail[200] = "";
            if (fi_cq_readerr(f->rcq, &ee, 0) >= 0)
                fi_cq_strerror(f->rcq, ee.prov_errno, ee.err_data, detail, sizeof detail);
            pod_err_set(err, "fabric %s: receiving a message: %s (%s)", f->prov,
                        fstr(ee.err ? ee.err : FI_EIO), detail);
            /* its buffer goes back: later messages still arrive */
            if (ee.op_context) {
                pod_err pe;
                (void)msg_post(f, (uint32_t)((struct fi_context2 *)ee.op_context - f->rctx), &pe);
            }
            return -1;
        }
        if (got != -FI_EAGAIN) {
            pod_err_set(err, "fabric %s: fi_cq_read: %s", f->prov, fstr(got));
            return -1;
        }
        (void)fi_cq_read(f->cq, &e, 0); /* progress of the sends' side too */
        if (!deadline || ((++spins & 63) == 0 && now_ns() > deadline)) return 0;
        if (lanes_count() > 1) lanes_yield();
        else if (spins > 64) sched_yield();
    }
    uint32_t i = (uint32_t)((struct fi_context2 *)e.op_context - f->rctx);
    int rc = 1;
    if (e.len > cap) {
        pod_err_set(err, "fabric %s: a message of %zu bytes does not fit the %u-byte buffer given",
                    f->prov, e.len, cap);
        rc = -1;
    } else {
        memcpy(buf, f->rbuf + (size_t)i * f->msg_bytes, e.len);
        *len = (uint32_t)e.len;
    }
    pod_err pe;
    if (msg_post(f, i, rc == 1 ? err : &pe) != 0) return -1;
    return rc;
}
