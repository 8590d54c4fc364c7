#!/bin/sh
# kiln train --model transformer on a small repetitive corpus: 80 steps of a
# one-layer model learn it (held-out loss far below ln(vocabulary)), the
# sample is printed, --save writes the variables; bad options fail with one
# message and status 1.
kiln="$1/kiln"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
i=0
while [ $i -lt 1200 ]; do
    echo "the quick brown fox jumps over the lazy dog."
    i=$((i + 1))
done >"$tmp/text"
"$kiln" train --model transformer --corpus "$tmp/text" --steps 80 \
    --context 16 --layers 1 --heads 2 --width 32 --batch 8 --warmup 10 \
    --lr 0.01 --eval-batches 4 --sample-len 40 --prompt "the " \
    --save "$tmp/lm.npz" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
cat "$tmp/out"
grep -q '^corpus: .*vocabulary 29,' "$tmp/out" || { echo "vocabulary"; exit 1; }
val=$(awk '/^Validation loss:/ {print $3}' "$tmp/out")
awk -v v="$val" 'BEGIN { exit !(v != "" && v < 1.5) }' ||
    { echo "validation loss '$val' not below 1.5"; exit 1; }
grep -q '^(40 characters in' "$tmp/out" || { echo "no sample"; exit 1; }
"$kiln" info "$tmp/lm.npz" | grep -q '^wte  f32  \[29,32\]' ||
    { echo "info missing wte"; exit 1; }
fails=0
expect_fail() { # pattern, command...
    pat=$1
    shift
    "$@" >/dev/null 2>"$tmp/err"
    rc=$?
    if [ $rc -ne 1 ] || ! grep -q "$pat" "$tmp/err"; then
        echo "FAIL ($rc): $*"
        cat "$tmp/err"
        fails=$((fails + 1))
    fi
}
lm() { "$kiln" train --model transformer --corpus "$tmp/text" "$@"; }
expect_fail "not a multiple of --heads" lm --width 30 --heads 4
expect_fail "not an integer" lm --steps 0
expect_fail "needs a value" lm --steps
expect_fail "unknown option '--bogus'" lm --bogus 1
expect_fail "$tmp/none: No such file" "$kiln" train --model transformer --corpus "$tmp/none"
expect_fail "too short for context" lm --context 9000
# a corpus that never ends, and a --save that cannot be written (refused
# before training; the FIFO stays a FIFO)
expect_fail "/dev/zero: not a regular file or a directory" "$kiln" train \
    --model transformer --corpus /dev/zero
mkfifo "$tmp/fifo.npz"
expect_fail "is not a regular file" lm --steps 100000 --save "$tmp/fifo.npz"
[ -p "$tmp/fifo.npz" ] || { echo "the FIFO was replaced"; fails=$((fails + 1)); }
expect_fail "does not exist" lm --steps 100000 --save "$tmp/no/dir/m.npz"
expect_fail "character 0x5a is not in the corpus" lm --steps 1 --context 4 \
    --layers 1 --width 8 --heads 1 --batch 1 --eval-batches 1 --prompt "Z"
"$kiln" train --model transformer --help | grep -q -- '--top-k' ||
    { echo "no help"; fails=$((fails + 1)); }
[ $fails -eq 0 ] || exit 1
