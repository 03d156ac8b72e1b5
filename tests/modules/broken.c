/* A module whose initialisation fails: the server must not start. */
#include <stdio.h>

#include "poddb/proc.h"

int poddb_module_init(pod_db *db, char *err, size_t errlen)
{
    (void)db;
    snprintf(err, errlen, "deliberately broken for a test");
    return -1;
}
