#!/bin/sh
# cl_adapt_ucx.sh -- cl_adapt.sh over UCX's tcp transport (ucx:tcp:railN): CL_RAILSET=ucx
CL_RAILSET=ucx exec sh "$(dirname "$0")/cl_adapt.sh"
