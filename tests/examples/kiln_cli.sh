#!/bin/sh
# The kiln command's error paths: one "kiln: ..." line and status 1, never a
# crash (status > 128) or silence.
kiln="$1/kiln"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0
expect_fail() { # pattern, command...
    pat=$1
    shift
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -ne 1 ] || ! grep -q "$pat" "$tmp/err"; then
        echo "FAIL ($rc): $*"
        cat "$tmp/err"
        fails=$((fails + 1))
    fi
}
expect_fail 'usage' "$kiln"
expect_fail "unknown command 'fly'" "$kiln" fly
expect_fail "unknown value 'cifar'" "$kiln" train --dataset cifar
expect_fail "not an integer" "$kiln" train --epochs zero
expect_fail "not a positive number" "$kiln" train --lr -1
expect_fail "not a list" "$kiln" train --hidden 12,,x
expect_fail "needs a value" "$kiln" train --batch
expect_fail "unknown option '--bogus'" "$kiln" train --bogus 1
expect_fail "not found" "$kiln" train --dataset mnist --data "$tmp/none"
expect_fail "model is required" "$kiln" eval
expect_fail "cannot open" "$kiln" eval --model "$tmp/missing.npz"
printf 'PK\003\004garbage' >"$tmp/bad.npz"
expect_fail "bad.npz" "$kiln" info "$tmp/bad.npz"
expect_fail "bad.npz" "$kiln" eval --model "$tmp/bad.npz"
printf '\377\377\377\377\377\377\377\377{}' >"$tmp/bad.safetensors"
expect_fail "bad.safetensors" "$kiln" info "$tmp/bad.safetensors"
# a truncated IDX file in a data directory
mkdir "$tmp/data"
printf '\000\000\010\003\000\000\000\002\000\000\000\034\000\000\000\034abc' >"$tmp/data/train-images-idx3-ubyte"
printf '\000\000\010\001\000\000\000\002\001\002' >"$tmp/data/train-labels-idx1-ubyte"
expect_fail "truncated" "$kiln" train --data "$tmp/data"
[ $fails -eq 0 ] || exit 1
"$kiln" --help >/dev/null 2>&1 || { echo "--help failed"; exit 1; }
