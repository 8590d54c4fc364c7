#!/bin/sh
# label: slow
# kiln train --model cnn on the first 2000 training and 1000 test images of
# MNIST (IDX files cut here, header counts rewritten): two epochs reach
# >= 0.85; the saved model loads in kiln eval with the same accuracy and
# kiln info lists the convolution weights.  Needs data/mnist.
kiln="$1/kiln"
cd "$2" || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
. ./tests/mnist_cut.sh
mnist_cut "$tmp/data" 2000 1000
"$kiln" train --model cnn --data "$tmp/data" --epochs 2 --batch 64 \
    --save "$tmp/c.npz" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
cat "$tmp/out"
acc=$(awk '/^test accuracy:/ {print $3}' "$tmp/out")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.85) }' || { echo "accuracy $acc < 0.85"; exit 1; }
eval_acc=$("$kiln" eval --model "$tmp/c.npz" --data "$tmp/data" | awk '/^test accuracy:/ {print $3}')
[ "$eval_acc" = "$acc" ] || { echo "eval gives $eval_acc, training gave $acc"; exit 1; }
"$kiln" info "$tmp/c.npz" | grep -q '^conv0.W  f32  \[32,1,5,5\]' ||
    { echo "info missing conv0.W"; exit 1; }
"$kiln" info "$tmp/c.npz" | grep -q '^fc0.W  f32  \[3136,512\]' ||
    { echo "info missing fc0.W"; exit 1; }
