#!/bin/sh
# label: slow
# kiln train for one epoch reaches >= 0.95; the saved model loads in kiln
# eval with the same accuracy, kiln info lists it, and numpy reads it.
kiln="$1/kiln"
cd "$2" || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
"$kiln" train --dataset mnist --epochs 1 --save "$tmp/m.npz" --log "$tmp/m.csv" >"$tmp/out" || exit 1
cat "$tmp/out"
acc=$(awk '/^test accuracy:/ {print $3}' "$tmp/out")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.95) }' || { echo "accuracy $acc < 0.95"; exit 1; }
eval_acc=$("$kiln" eval --model "$tmp/m.npz" | awk '/^test accuracy:/ {print $3}')
[ "$eval_acc" = "$acc" ] || { echo "eval gives $eval_acc, training gave $acc"; exit 1; }
"$kiln" info "$tmp/m.npz" | grep -q '^fc0.W  f32  \[784,800\]' || { echo "info missing fc0.W"; exit 1; }
[ "$(wc -l <"$tmp/m.csv")" -eq 2 ] || { echo "bad metrics log"; exit 1; }
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
    /usr/bin/python3 - "$tmp/m.npz" <<'PY' || exit 1
import sys, numpy as np
d = np.load(sys.argv[1])
assert d["fc0.W"].shape == (784, 800) and d["fc0.W"].dtype == np.float32
assert d["fc1.b"].shape == (10,)
PY
fi
