#!/bin/sh
# config_doc.sh -- docs/configuration.md documents exactly the MADRAIL_*
# variables the library knows.  The list comes from the built madrail_info
# (-v prints every registered config table), so a variable added to a
# table without a line in the reference, or a documented one that was
# removed, fails here instead of rotting quietly.
#
# Run by `make check` (MDR_BUILDDIR/MDR_SRCDIR come from Makefile.am).
# Exit 0 pass, 1 fail, 99 when madrail_info or the document is missing.
set -u

info="${MDR_BUILDDIR:-.}/tools/madrail_info"
doc="${MDR_SRCDIR:-$(dirname "$0")/../..}/docs/configuration.md"
[ -x "$info" ] || { echo "config_doc.sh: $info not built" >&2; exit 99; }
[ -f "$doc" ] || { echo "config_doc.sh: $doc missing" >&2; exit 99; }

known=$("$info" -v | awk '$1 ~ /^MADRAIL_[A-Z0-9_]+$/ { print $1 }' | sort -u)
if [ -z "$known" ]; then
    echo "FAIL: madrail_info -v listed no MADRAIL_* variable"
    exit 1
fi
# Documented = named in the first column of a table row: | `MADRAIL_X` ...
documented=$(sed -n 's/^| `\(MADRAIL_[A-Z0-9_]*\)`.*/\1/p' "$doc" | sort -u)

fail=0
n=0
for v in $known; do
    n=$((n + 1))
    if printf '%s\n' "$documented" | grep -qx "$v"; then
        echo "ok - $v is documented"
    else
        echo "FAIL - $v is not in docs/configuration.md (add a table row)"
        fail=1
    fi
done
for v in $documented; do
    if ! printf '%s\n' "$known" | grep -qx "$v"; then
        echo "FAIL - docs/configuration.md documents $v, which madrail_info -v does not know"
        fail=1
    fi
done
echo "config_doc.sh: $n variables checked"
exit $fail
