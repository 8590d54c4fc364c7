#!/bin/sh
# `mpirun -np N kiln train --model transformer` against `kiln train --model
# transformer`: every rank draws the same global batch of windows and takes
# its share of the rows, so 2 ranks (3 and 3 rows of 6) and 3 ranks (2 each)
# take the steps one process takes: the same losses at every step and the
# same validation loss (printed to 4 decimals), variables within 1e-3
# relative (AdamW and clipping amplify rounding in the smallest gradients);
# rank 0 alone prints and samples; a batch smaller than the ranks ends the
# job with an error; a warm-up, validation batches or corpus that differ
# between the ranks fail the start-up check on every rank.
# usage: char_lm_mpi.sh BUILD_DIR SOURCE_DIR MPIEXEC
kiln="$1/kiln"
mpirun="$3"
cd "$2" || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
. ./tests/mpi/mismatch.sh
# a corpus of 60,000 characters: words drawn from a fixed list
awk 'BEGIN { srand(3); split("the a of kiln graph tensor step loss rank batch \
gradient window model train", w, " "); n = 0;
    while (n < 60000) { s = w[int(rand() * 14) + 1]; printf "%s ", s;
        n += length(s) + 1; if (rand() < 0.1) { print ""; n++ } } }' \
    >"$tmp/corpus.txt"
args="train --model transformer --corpus $tmp/corpus.txt --steps 20
    --log-every 1 --layers 1 --heads 2 --width 32 --context 16 --batch 6
    --threads 1 --eval-batches 4 --sample-len 20 --seed 9 --prompt the"
run() {
    name=$1 ranks=$2
    shift 2
    if [ "$ranks" -eq 1 ]; then
        timeout 300 "$kiln" $args "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
    else
        timeout 300 "$mpirun" -np "$ranks" "$kiln" $args "$@" \
            >"$tmp/$name.out" 2>"$tmp/$name.err"
    fi || { fail "$name: status $?"; cat "$tmp/$name.err"; }
}
run one 1 --save "$tmp/one.npz"
run two 2 --save "$tmp/two.npz"
run three 3 --save "$tmp/three.npz"
for r in two three; do
    [ "$(grep -c '^step ' "$tmp/$r.out")" -eq 20 ] ||
        fail "$r: $(grep -c '^step ' "$tmp/$r.out") step lines (rank 0 alone prints 20)"
    [ "$(grep -c '^Sample' "$tmp/$r.out")" -eq 1 ] || fail "$r: not one sample"
    # the losses and the validation loss, without the times
    for f in one $r; do
        sed -n 's/^\(step [0-9]*: loss [0-9.]*\).*/\1/p; /^Validation/p' \
            "$tmp/$f.out" >"$tmp/$f.losses"
    done
    [ "$(wc -l <"$tmp/one.losses")" -eq 21 ] || fail "one: no 21 loss lines"
    cmp -s "$tmp/one.losses" "$tmp/$r.losses" ||
        { fail "$r: losses differ from one process"; diff "$tmp/one.losses" "$tmp/$r.losses"; }
done
/usr/bin/python3 tests/mpi/npz_close.py 1e-3 1e-3 1e-7 5 "$tmp/one.npz" "$tmp/two.npz" "$tmp/three.npz" ||
    fail "variables differ"
# a global batch smaller than the ranks
timeout 120 "$mpirun" -np 3 "$kiln" $args --batch 2 >"$tmp/small.out" 2>"$tmp/small.err"
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "batch 2 on 3 ranks: status $rc"
# (the first rank to fail ends the job: the others may not get to say it)
grep -q "kiln: --batch 2 is the global batch, shared by 3 ranks" \
    "$tmp/small.err" || fail "batch 2 on 3 ranks: no error"
# what the ranks must agree on (start-up check), each named on every rank:
# a warm-up (the learning rate's schedule), the validation batches, and
# the text itself (rank 1's corpus has 'a' and 't' swapped: the same
# length and alphabet)
tr 'at' 'ta' <"$tmp/corpus.txt" >"$tmp/corpus1.txt"
for case in "--warmup 5:--warmup 7:warmup 5', rank 1 has 'config: warmup 7'" \
    "--eval-batches 4:--eval-batches 2:eval batches 4', rank 1 has 'config: eval batches 2'" \
    "--corpus $tmp/corpus.txt:--corpus $tmp/corpus1.txt:rank 1 has 'config: corpus 60"; do
    a=${case%%:*} rest=${case#*:}
    b=${rest%%:*} want=${rest#*:}
    expect_mismatch "mismatched ${a%% *}" ".*$want" \
        "if [ \$OMPI_COMM_WORLD_RANK = 1 ]; then x='$b'; else x='$a'; fi; exec \"$kiln\" $(echo $args) \$x"
done

[ $fails -eq 0 ] || exit 1
echo "kiln train --model transformer on 2 and 3 ranks matches one process (20 steps)"
