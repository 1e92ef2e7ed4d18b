#!/bin/sh
# cl_stripe_ofi.sh -- cl_stripe.sh over libfabric's tcp provider with rxm (ofi:tcp;ofi_rxm:railN): CL_RAILSET=ofi
CL_RAILSET=ofi exec sh "$(dirname "$0")/cl_stripe.sh"
