#!/bin/sh
# label: slow
# PopXL MNIST with the document's settings (batch 8, lr 0.05, 1 epoch,
# 784-32-10 gelu): the test accuracy must reach 0.93.  Needs data/mnist
# (scripts/setup).  A full epoch takes seconds; --steps N shortens it.
out=$(cd "$2" && "$1/examples/mnist_modules" 2>/dev/null) || exit 1
printf '%s\n' "$out"
acc=$(printf '%s\n' "$out" | awk '/^Test accuracy:/ {print $NF}')
loss=$(printf '%s\n' "$out" | awk '/^Epoch 1 average loss:/ {print $5}')
awk -v a="$acc" -v l="$loss" 'BEGIN {
    if (a == "" || l == "") { print "missing output"; exit 1 }
    if (!(a >= 0.93)) { print "accuracy " a " < 0.93"; exit 1 }
}'
