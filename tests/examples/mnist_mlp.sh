#!/bin/sh
# label: slow
# Shortened nGraph walkthrough: 400 steps with --better; the running loss
# must fall and the test accuracy pass 0.85.  Needs data/mnist (scripts/setup).
out=$(cd "$2" && "$1/examples/mnist_mlp" --better --epochs 1 --steps 400) || exit 1
printf '%s\n' "$out"
first=$(printf '%s\n' "$out" | awk '/^step 100:/ {print $NF}')
last=$(printf '%s\n' "$out" | awk '/^step 400:/ {print $NF}')
acc=$(printf '%s\n' "$out" | awk '/^Test accuracy:/ {print $NF}' | tail -1)
awk -v a="$first" -v b="$last" -v c="$acc" 'BEGIN {
    if (a == "" || b == "" || c == "") { print "missing output"; exit 1 }
    if (!(b < a)) { print "loss did not fall: " a " -> " b; exit 1 }
    if (!(c >= 0.85)) { print "accuracy " c " < 0.85"; exit 1 }
}'
