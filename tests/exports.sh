#!/bin/sh
# Fails when libkiln.so exports a symbol that include/kiln.h (with the
# per-area headers it includes, include/kiln/*.h) does not declare, or does
# not export one it declares (the library is built with -fvisibility=hidden
# and the headers make their declarations visible).
# usage: exports.sh LIBKILN_SO KILN_H CC [GENERATED_INCLUDE_DIR]
# (the build writes kiln/elementwise.h into GENERATED_INCLUDE_DIR)
set -e
lib=$1 header=$2 cc=$3 generated=${4:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# functions the header declares: names followed by "(" after preprocessing
"$cc" -E -P -I"$(dirname "$header")" -I"$generated" "$header" | grep -o 'kiln_[A-Za-z0-9_]*[[:space:]]*(' |
    sed 's/[[:space:](]//g' | sort -u >"$tmp/declared"
nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u >"$tmp/exported"
if [ ! -s "$tmp/exported" ] || [ ! -s "$tmp/declared" ]; then
    echo "exports.sh: no symbols read from $lib or $header" >&2
    exit 1
fi
status=0
extra=$(comm -23 "$tmp/exported" "$tmp/declared")
if [ -n "$extra" ]; then
    echo "exported by $lib but not declared in kiln.h:"
    echo "$extra"
    status=1
fi
missing=$(comm -13 "$tmp/exported" "$tmp/declared")
if [ -n "$missing" ]; then
    echo "declared in kiln.h but not exported by $lib:"
    echo "$missing"
    status=1
fi
[ $status -eq 0 ] && echo "$(wc -l <"$tmp/exported") symbols exported, each declared in kiln.h"
exit $status
