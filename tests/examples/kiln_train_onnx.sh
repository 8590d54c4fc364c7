#!/bin/sh
# kiln train --save model.onnx for --model mlp and --model cnn (a few steps
# on the first 300 training and 100 test images of MNIST): kiln info reads
# the inference graph (opset 17, X [batch,784] -> logits [batch,10], the
# ops of each model), kiln run computes logits from an .npy input, and
# onnx.checker accepts both files when /usr/bin/python3 has onnx; a .onnx
# path that cannot be written, or given to the transformer, is refused
# before training.  Needs data/mnist.
kiln="$1/kiln"
cd "$2" || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
. ./tests/mnist_cut.sh
mnist_cut "$tmp/data" 300 100
fails=0
expect() { # pattern, file
    if ! grep -q -- "$1" "$2"; then
        echo "FAIL: '$1' not in:"
        cat "$2"
        fails=$((fails + 1))
    fi
}
train() { # model, file, flags...
    m=$1 f=$2
    shift 2
    "$kiln" train --model "$m" --data "$tmp/data" --save "$tmp/$f" "$@" \
        >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; fails=$((fails + 1)); }
    expect "inference graph saved to $tmp/$f" "$tmp/err"
    "$kiln" info "$tmp/$f" >"$tmp/info" || fails=$((fails + 1))
    expect "opset: ai.onnx 17" "$tmp/info"
    expect "producer: kiln" "$tmp/info"
    expect "X  *float  *\[batch,784\]" "$tmp/info"
    expect "logits  *float  *\[batch,10\]" "$tmp/info"
}
train mlp m.onnx --hidden 32,16 --steps 5 --batch 32
expect "MatMul  *3" "$tmp/info"
expect "parameters: 25818 in 6 initializers" "$tmp/info"
train cnn c.onnx --hidden 64 --steps 2 --batch 16
expect "Conv  *2" "$tmp/info"
expect "MaxPool  *2" "$tmp/info"

# Two rows of 0.5 as an .npy file (header padded to 128 bytes).
{
    printf '\223NUMPY\001\000\166\000'
    printf "%-117s\n" "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 784), }"
    i=0
    while [ $i -lt 1568 ]; do
        printf '\000\000\000\077'
        i=$((i + 1))
    done
} >"$tmp/x.npy"
for f in m.onnx c.onnx; do
    "$kiln" run "$tmp/$f" --input "X=$tmp/x.npy" --output "$tmp/y.npz" ||
        fails=$((fails + 1))
    "$kiln" info "$tmp/y.npz" >"$tmp/y" || fails=$((fails + 1))
    expect "logits  *f32  *\[2,10\]" "$tmp/y"
done
# Mistakes: one "kiln: ..." line, status 1, before any training.
expect_fail() { # pattern, command...
    pat=$1
    shift
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -ne 1 ] || ! grep -q -- "$pat" "$tmp/err" ||
        grep -q '^epoch' "$tmp/out"; then
        echo "FAIL ($rc): $*"
        cat "$tmp/err"
        fails=$((fails + 1))
    fi
}
expect_fail "^kiln: --save: .*does not exist" "$kiln" train --data \
    "$tmp/data" --steps 1 --save "$tmp/no/such/dir/m.onnx"
expect_fail "ONNX export is for --model mlp and cnn" "$kiln" train \
    --model transformer --save "$tmp/t.onnx"
if /usr/bin/python3 -c 'import onnx' 2>/dev/null; then
    /usr/bin/python3 -c 'import onnx, sys
for p in sys.argv[1:]:
    onnx.checker.check_model(onnx.load(p), full_check=True)' \
        "$tmp/m.onnx" "$tmp/c.onnx" || fails=$((fails + 1))
else
    echo "onnx.checker skipped: /usr/bin/python3 cannot import onnx"
fi
exit $((fails > 0))
