#!/bin/sh
# The code-size limits the project keeps (issue 10): no file in src/ over 600
# lines, no function (top-level brace block) in src/ or tools/ over 80.
# usage: limits.sh SOURCE_DIR
set -e
root=$1
status=0
for f in $(find "$root/src" -name '*.[ch]' | sort); do
    n=$(wc -l <"$f")
    if [ "$n" -gt 600 ]; then
        echo "${f#$root/}: $n lines (at most 600)"
        status=1
    fi
done
# A block starts where the brace depth leaves 0 and ends where it returns;
# strings, character literals and // comments are blanked first so their
# braces do not count.  Multi-line /* */ comments hold no braces here.
long=$(find "$root/src" "$root/tools" -name '*.c' | sort | xargs awk '
FNR == 1 { depth = 0; start = 0 }
{
    line = $0
    gsub(/"([^"\\]|\\.)*"/, "\"\"", line)
    gsub(/'\''([^'\''\\]|\\.)*'\''/, "x", line)
    sub(/\/\/.*$/, "", line)
    o = gsub(/{/, "{", line); c = gsub(/}/, "}", line)
    if (depth == 0 && o > 0) start = FNR
    depth += o - c
    if (depth == 0 && o + c > 0 && start) {
        n = FNR - start + 1
        if (n > 80) print FILENAME ":" start ": a block of " n " lines (at most 80)"
        start = 0
    }
}')
if [ -n "$long" ]; then
    echo "$long" | sed "s|$root/||"
    status=1
fi
[ $status -eq 0 ] && echo "every src/ file within 600 lines, every function within 80"
exit $status
