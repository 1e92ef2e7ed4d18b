#!/bin/sh
# cl_duplex_mix.sh -- cl_duplex.sh over one ofi rail (rail0) and one ucx rail (rail1): CL_RAILSET=mix
CL_RAILSET=mix exec sh "$(dirname "$0")/cl_duplex.sh"
