#!/bin/sh
# cl_adapt_ofi.sh -- cl_adapt.sh over libfabric's tcp provider with rxm (ofi:tcp;ofi_rxm:railN): CL_RAILSET=ofi
CL_RAILSET=ofi exec sh "$(dirname "$0")/cl_adapt.sh"
