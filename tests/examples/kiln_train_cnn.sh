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
mkdir "$tmp/data"
# cut NAME COUNT ITEM_BYTES HEADER_BYTES: the first COUNT items of NAME
cut_idx() {
    src=data/mnist/$1 dst=$tmp/data/$1
    head -c 4 "$src" >"$dst"
    printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($2 >> 24 & 255)) \
        $(($2 >> 16 & 255)) $(($2 >> 8 & 255)) $(($2 & 255)))" >>"$dst"
    tail -c +9 "$src" | head -c $(($4 - 8 + $2 * $3)) >>"$dst"
}
cut_idx train-images-idx3-ubyte 2000 784 16
cut_idx train-labels-idx1-ubyte 2000 1 8
cut_idx t10k-images-idx3-ubyte 1000 784 16
cut_idx t10k-labels-idx1-ubyte 1000 1 8
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
