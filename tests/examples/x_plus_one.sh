#!/bin/sh
# Checks the printed values of examples/x_plus_one: 1 2 3 4 5.
out=$("$1/examples/x_plus_one") || exit 1
vals=$(printf '%s\n' "$out" | grep -E '^[0-9]+$' | tr '\n' ' ')
[ "$vals" = "1 2 3 4 5 " ] || { echo "x_plus_one printed: $vals"; exit 1; }
printf '%s\n' "$out" | grep -q 'add(%0, %1)' || { echo "no compiled code"; exit 1; }
