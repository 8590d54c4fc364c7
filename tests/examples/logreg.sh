#!/bin/sh
# Logistic regression part 1 (named axes): the loss of the last step is
# below the first, and W separates the class means (W . mean0 < 0 < W . mean1).
out=$("$1/examples/logreg") || exit 1
printf '%s\n' "$out" | tail -4
steps=$(printf '%s\n' "$out" | grep -c '^W: \[')
[ "$steps" = 100 ] || { echo "expected 100 steps, got $steps"; exit 1; }
first=$(printf '%s\n' "$out" | awk '/^W: \[/ {print $NF; exit}')
last=$(printf '%s\n' "$out" | awk '/^W: \[/ {v = $NF} END {print v}')
seps=$(printf '%s\n' "$out" | awk -F'[=,]' '/^W \. mean0/ {print $2, $4}')
echo "$first $last $seps" | awk '{
    if (NF != 4) { print "missing output"; exit 1 }
    if (!($2 < $1)) { print "loss did not fall: " $1 " -> " $2; exit 1 }
    if (!($3 < 0 && $4 > 0)) { print "W does not separate the means: " $3 ", " $4; exit 1 }
}'
