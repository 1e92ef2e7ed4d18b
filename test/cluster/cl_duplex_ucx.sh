#!/bin/sh
# cl_duplex_ucx.sh -- cl_duplex.sh over UCX's tcp transport (ucx:tcp:railN): CL_RAILSET=ucx
CL_RAILSET=ucx exec sh "$(dirname "$0")/cl_duplex.sh"
