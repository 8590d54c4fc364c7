#!/bin/sh
# Logistic regression part 2 (named axes).  The document's run: the
# validation loss falls every epoch and W . mean + b separates the class
# means.  With --better (plain SGD on the mean loss): the validation loss
# after 10 epochs is under a quarter of its start, and the same separation.
check() {
    out=$("$1/examples/logreg2" $2) || exit 1
    printf '%s\n' "$out" | sed -n '1,2p;/^After epoch 9/,$p'
    printf '%s\n' "$out" | awk -v ratio="$3" '
        /^Starting avg loss:/ { start = $NF; prev = $NF }
        /^After epoch/ { if (!($NF < prev)) { print "loss rose: " prev " -> " $NF; bad = 1 } prev = $NF; n++ }
        /^W \. mean0/ { split($0, f, /[=,]/); d0 = f[2]; d1 = f[4] }
        END {
            if (bad) exit 1
            if (start == "" || n != 10 || d0 == "") { print "missing output"; exit 1 }
            if (!(prev < ratio * start)) { print "final loss " prev " not under " ratio " x " start; exit 1 }
            if (!(d0 < 0 && d1 > 0)) { print "W does not separate the means: " d0 ", " d1; exit 1 }
        }' || exit 1
}
check "$1" "" 1
check "$1" --better 0.25
