#!/bin/sh
# Generate ./configure and Makefile.in from configure.ac and Makefile.am.
# Only needed in a git checkout (release tarballs ship them); the same as
# `autoreconf -fi`, kept as a script because people look for it.
set -e
cd "$(dirname "$0")"
for t in autoconf automake libtoolize pkg-config; do
    if ! command -v "$t" >/dev/null 2>&1; then
        echo "autogen.sh: '$t' is missing; install autoconf automake libtool pkg-config" >&2
        echo "            (or run ./quickstart.sh as root on Debian 12)" >&2
        exit 1
    fi
done
exec autoreconf -fi "$@"
