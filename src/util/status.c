/*
 * Status strings.  A switch without a default case lets the compiler
 * (-Wswitch under -Wall) flag a status added to madrail.h but not here;
 * values outside the enum fall through to "unknown status".
 */
#include "mdr_config.h"

#include "madrail.h"

const char *madrail_status_str(madrail_status_t status)
{
    switch (status) {
    case MADRAIL_OK:
        return "success";
    case MADRAIL_INPROGRESS:
        return "in progress";
    case MADRAIL_ERR_NORESOURCE:
        return "out of a transient resource (retry)";
    case MADRAIL_ERR_INVALID:
        return "invalid argument";
    case MADRAIL_ERR_NOMEM:
        return "out of memory";
    case MADRAIL_ERR_UNSUPPORTED:
        return "operation not supported";
    case MADRAIL_ERR_CONFIG:
        return "bad MADRAIL_* configuration";
    case MADRAIL_ERR_TRUNCATE:
        return "message truncated (longer than the receive buffer)";
    case MADRAIL_ERR_CANCELED:
        return "request cancelled";
    case MADRAIL_ERR_IO:
        return "system call failed";
    case MADRAIL_ERR_NOT_FOUND:
        return "no such object";
    case MADRAIL_ERR_PMI:
        return "process manager (PMI) failure";
    case MADRAIL_ERR_RAIL_DOWN:
        return "rail down";
    case MADRAIL_ERR_RAIL_PROTO:
        return "malformed message on a rail";
    case MADRAIL_ERR_RAIL_CONNECT:
        return "rail connection could not be made";
    case MADRAIL_ERR_PEER_UNREACHABLE:
        return "peer unreachable (no rail reaches it)";
    case MADRAIL_ERR_PEER_PROTO:
        return "peer violated the protocol";
    }
    return "unknown status";
}
