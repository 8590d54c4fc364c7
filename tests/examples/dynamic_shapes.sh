#!/bin/sh
# Variable shapes per step: every step rebuilds the graph with its own
# sequence length and batch size; the loss must fall to under a third.
out=$("$1/examples/dynamic_shapes" 400) || { printf '%s\n' "$out"; exit 1; }
line=$(printf '%s\n' "$out" | grep '^loss .* -> .* over 400 steps; lengths 2\.\.12, batches 4\.\.24,') ||
    { echo "missing summary line"; printf '%s\n' "$out"; exit 1; }
printf '%s\n' "$line" | awk '{ if (!($4 < $2 / 3)) { print "loss did not fall enough: " $0; exit 1 } }' ||
    { printf '%s\n' "$out"; exit 1; }
