#!/bin/sh
# label: slow
# kiln train --model cnn --dataset fashion-mnist on a short schedule: the
# first 12000 training images for two epochs at batch 64, scored on the
# first 2000 test images (gzip IDX files cut here, header counts
# rewritten), reaches >= 0.85 (0.8715 here; the full default run, 10 epochs
# on all 60000, is the issue's >= 0.91 check).  About 45 s of CPU time.
# Needs data/fashion-mnist.
kiln="$1/kiln"
cd "$2" || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/data"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte \
    t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    [ -f "data/fashion-mnist/$f.gz" ] ||
        { echo "data/fashion-mnist/$f.gz missing: run scripts/setup"; exit 1; }
done
# cut NAME COUNT ITEM_BYTES HEADER_BYTES: the first COUNT items of NAME.gz
cut_idx() {
    src=data/fashion-mnist/$1.gz dst=$tmp/data/$1
    gzip -dc "$src" | head -c 4 >"$dst"
    printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($2 >> 24 & 255)) \
        $(($2 >> 16 & 255)) $(($2 >> 8 & 255)) $(($2 & 255)))" >>"$dst"
    gzip -dc "$src" | tail -c +9 | head -c $(($4 - 8 + $2 * $3)) >>"$dst"
}
cut_idx train-images-idx3-ubyte 12000 784 16
cut_idx train-labels-idx1-ubyte 12000 1 8
cut_idx t10k-images-idx3-ubyte 2000 784 16
cut_idx t10k-labels-idx1-ubyte 2000 1 8
"$kiln" train --model cnn --dataset fashion-mnist --data "$tmp/data" \
    --epochs 2 --batch 64 >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
cat "$tmp/out"
acc=$(awk '/^test accuracy:/ {print $3}' "$tmp/out")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.85) }' || { echo "accuracy $acc < 0.85"; exit 1; }
