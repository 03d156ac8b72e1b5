/* Stored procedures from shared objects listed under `modules:` in the config.
 * Each exports poddb_module_init (POD_MODULE_INIT_SYMBOL), which creates its
 * tables and registers its procedures through include/poddb/proc.h. Modules
 * stay loaded for the life of the server. */
#include <dlfcn.h>
#include <stdio.h>

#include "server/server.h"
#include "util/log.h"

int pod_modules_load(pod_db *db, const struct pod_config *c, char *err, size_t errlen)
{
    for (int i = 0; i < c->nmodules; i++) {
        const char *path = c->modules[i];
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            snprintf(err, errlen, "module %s: %s", path, dlerror());
            return -1;
        }
        pod_module_init_fn init = (pod_module_init_fn)(uintptr_t)dlsym(h, POD_MODULE_INIT_SYMBOL);
        if (!init) {
            snprintf(err, errlen, "module %s does not export %s", path, POD_MODULE_INIT_SYMBOL);
            dlclose(h);
            return -1;
        }
        char why[256] = "";
        if (init(db, why, sizeof why) != 0) {
            snprintf(err, errlen, "module %s: initialisation failed: %s", path,
                     why[0] ? why : "(no reason given)");
            return -1;
        }
        pod_info("loaded module %s", path);
    }
    return 0;
}
