#!/bin/sh
# kiln info and kiln run on ONNX models (tests/ref/onnx, made by
# tests/ref/make_onnx_models.py): what info prints, the outputs run writes,
# and one "kiln: ..." line with status 1 for each mistake.
kiln="$1/kiln"
models="$2/tests/ref/onnx"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0
expect() { # pattern, file
    if ! grep -q -- "$1" "$2"; then
        echo "FAIL: '$1' not in:"
        cat "$2"
        fails=$((fails + 1))
    fi
}
expect_fail() { # pattern, command...
    pat=$1
    shift
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -ne 1 ] || ! grep -q -- "$pat" "$tmp/err"; then
        echo "FAIL ($rc): $*"
        cat "$tmp/err"
        fails=$((fails + 1))
    fi
}
"$kiln" info "$models/mlp.onnx" >"$tmp/info" || fails=$((fails + 1))
expect "opset: ai.onnx 13" "$tmp/info"
expect "producer: kiln-tests" "$tmp/info"
expect "x  *float  *\[batch,4\]" "$tmp/info"
expect "Gemm  *1" "$tmp/info"
expect "parameters: 43 in 4 initializers" "$tmp/info"
"$kiln" run "$models/mlp.onnx" --input "x=$models/mlp_x.npy" \
    --output "$tmp/y.npz" || fails=$((fails + 1))
"$kiln" info "$tmp/y.npz" >"$tmp/y" || fails=$((fails + 1))
expect "y  *f32  *\[3,3\]" "$tmp/y"
"$kiln" info "$models/unsupported.onnx" >"$tmp/info" || fails=$((fails + 1))
expect "NonMaxSuppression  *1  (unsupported)" "$tmp/info"
expect_fail "no --input for the model's input 'x'" "$kiln" run \
    "$models/mlp.onnx" --output "$tmp/y.npz"
expect_fail "wants name=file" "$kiln" run "$models/mlp.onnx" --input x \
    --output "$tmp/y.npz"
expect_fail "unsupported op NonMaxSuppression" "$kiln" run \
    "$models/unsupported.onnx" --input "x=$models/mlp_x.npy" --output "$tmp/y.npz"
expect_fail "given shape \[3,4\], the model says \[2,3,4\]" "$kiln" run \
    "$models/shapes.onnx" --input "x=$models/mlp_x.npy" --output "$tmp/y.npz"
cp "$models/mlp.txt" "$tmp/bad.onnx"
expect_fail "not an ONNX model" "$kiln" info "$tmp/bad.onnx"
exit $((fails > 0))
