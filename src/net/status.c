/* Status names: shared by the engine, the server and the client library. */
#include "poddb/proc.h"

const char *pod_status_name(int status)
{
    switch (status) {
    case POD_OK: return "ok";
    case POD_NOT_FOUND: return "not found";
    case POD_EXISTS: return "exists";
    case POD_CONFLICT: return "conflict";
    case POD_USER_ABORT: return "aborted";
    case POD_E_INVALID: return "invalid argument";
    case POD_E_NOMEM: return "out of memory";
    case POD_E_INTERNAL: return "internal error";
    case POD_E_RETRIES: return "too many conflicts";
    case POD_E_LIMIT: return "over a limit";
    case POD_E_NOT_DURABLE: return "not durable (outcome unknown)";
    case POD_E_AUTH: return "not authenticated";
    default: return "unknown status";
    }
}
