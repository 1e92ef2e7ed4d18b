#!/bin/sh
# it_cancel_probe.sh -- probe, matched probe, cancel and synchronous send
# between two processes (two TCP rails).
. "$(dirname "$0")/common.sh"
it_run 2 --
