#!/bin/sh
# cl_stripe_ucx.sh -- cl_stripe.sh over UCX's tcp transport (ucx:tcp:railN): CL_RAILSET=ucx
CL_RAILSET=ucx exec sh "$(dirname "$0")/cl_stripe.sh"
