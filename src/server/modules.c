/* Stored procedures from shared objects listed under `modules:` in the config.
 * Each exports poddb_module_init (POD_MODULE_INIT_SYMBOL), which creates its
 * tables and registers its procedures through include/poddb/proc.h. Modules
 * stay loaded for the life of the server. Their paths are absolute: the
 * config loader takes a relative one from the config file's directory. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "server/server.h"
#include "util/log.h"

/* "FILE:LINE:COL: modules[i]" where the config says, else "modules[i]". */
static void entry_name(const struct pod_config *c, int i, char *buf, size_t bufsz)
{
    if (c->module_line[i])
        snprintf(buf, bufsz, "%s:%u:%u: modules[%d]", c->source, c->module_line[i],
                 c->module_col[i], i);
    else snprintf(buf, bufsz, "modules[%d]", i);
}

/* dlerror's reason without the path it starts with (the message names it). */
static const char *dl_reason(const char *path)
{
    const char *why = dlerror();
    if (!why) return "unknown reason";
    size_t n = strlen(path);
    if (strncmp(why, path, n) == 0 && strncmp(why + n, ": ", 2) == 0) why += n + 2;
    return why;
}

static int load_one(pod_db *db, const struct pod_config *c, int i, char *err, size_t errlen)
{
    const char *path = c->modules[i];
    char entry[POD_PATH_MAX + 48];
    entry_name(c, i, entry, sizeof entry);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(err, errlen, "%s: cannot load %s: %s", entry, path, dl_reason(path));
        return -1;
    }
    pod_module_init_fn init = (pod_module_init_fn)(uintptr_t)dlsym(h, POD_MODULE_INIT_SYMBOL);
    if (!init) {
        snprintf(err, errlen, "%s: %s does not export %s", entry, path, POD_MODULE_INIT_SYMBOL);
        dlclose(h);
        return -1;
    }
    char why[256] = "";
    if (init(db, why, sizeof why) != 0) {
        snprintf(err, errlen, "%s: %s: initialisation failed: %s", entry, path,
                 why[0] ? why : "(no reason given)");
        return -1;
    }
    pod_info("loaded module %s", path);
    return 0;
}

int pod_modules_load(pod_db *db, const struct pod_config *c, char *err, size_t errlen)
{
    for (int i = 0; i < c->nmodules; i++)
        if (load_one(db, c, i, err, errlen) < 0) return -1;
    return 0;
}
