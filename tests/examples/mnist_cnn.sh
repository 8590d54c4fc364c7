#!/bin/sh
# label: slow
# Shortened CNN walkthrough: one epoch cut to 300 steps of batch 128; the
# running loss must fall and the test accuracy pass 0.95 (the full three
# epochs pass 0.99).  Needs data/mnist (scripts/setup).
out=$(cd "$2" && "$1/examples/mnist_cnn" --epochs 1 --steps 300) || exit 1
printf '%s\n' "$out"
first=$(printf '%s\n' "$out" | awk '/step 100:/ {print $NF}')
last=$(printf '%s\n' "$out" | awk '/step 300:/ {print $NF}')
acc=$(printf '%s\n' "$out" | awk '/^Test accuracy:/ {print $NF}' | tail -1)
awk -v a="$first" -v b="$last" -v c="$acc" 'BEGIN {
    if (a == "" || b == "" || c == "") { print "missing output"; exit 1 }
    if (!(b < a)) { print "loss did not fall: " a " -> " b; exit 1 }
    if (!(c >= 0.95)) { print "accuracy " c " < 0.95"; exit 1 }
}'
