#!/bin/sh
# label: slow
# Shortened language-model walkthrough on the fortunes package's texts:
# 300 steps at context 32 (the defaults train longer); the running loss
# must fall and the held-out loss end well below a uniform guess's
# ln(vocabulary) (4.74) and below the characters' own entropy (3.32 nats),
# then a sample is printed.  Needs /usr/share/games/fortunes (scripts/setup).
out=$("$1/examples/char_lm" --steps 300 --context 32 --batch 16 --warmup 30 \
    --eval-batches 16 --sample-len 80 --log-every 100 2>/dev/null) || exit 1
printf '%s\n' "$out"
first=$(printf '%s\n' "$out" | awk '/^step 100:/ {print $4}')
last=$(printf '%s\n' "$out" | awk '/^step 300:/ {print $4}')
val=$(printf '%s\n' "$out" | awk '/^Validation loss:/ {print $3}')
uniform=$(printf '%s\n' "$out" | awk '/^Validation loss:/ {print $6 + 0}')
printf '%s\n' "$out" | grep -q '^(80 characters in' || { echo "no sample"; exit 1; }
awk -v a="$first" -v b="$last" -v v="$val" -v u="$uniform" 'BEGIN {
    if (a == "" || b == "" || v == "" || u == "") { print "missing output"; exit 1 }
    if (!(b < a)) { print "loss did not fall: " a " -> " b; exit 1 }
    if (!(u > 4.7)) { print "vocabulary smaller than the corpus has: ln " u; exit 1 }
    if (!(v < 3.0)) { print "validation loss " v " not below 3.0"; exit 1 }
}'
