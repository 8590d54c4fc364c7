#!/bin/sh
# Train what you import, shortened: the ONNX CNN PyTorch trained on 300
# images is fine-tuned for 100 steps of batch 64 (the full epoch is 937).
# Before training its test accuracy must be PyTorch's (0.6739, printed by
# examples/onnx_finetune_export.py) and after it at least 0.15 higher and
# above 0.85 (the full epoch reaches 0.9765); --save must write the
# variables.  Needs data/mnist (scripts/setup).
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
out=$(cd "$2" && "$1/examples/onnx_finetune" --steps 100 --threads 2 \
    --save "$tmp/tuned.npz" 2>"$tmp/err")
rc=$?
if grep -q "built without ONNX" "$tmp/err"; then
    echo "skipped: Kiln was built without ONNX"
    exit 0
fi
[ $rc -eq 0 ] || { cat "$tmp/err"; exit 1; }
printf '%s\n' "$out"
before=$(printf '%s\n' "$out" | awk '/^Test accuracy:.*imported/ {print $3}')
after=$(printf '%s\n' "$out" | awk '/^Test accuracy:.*fine-tuned/ {print $3}')
[ -s "$tmp/tuned.npz" ] || { echo "no saved variables"; exit 1; }
awk -v a="$before" -v b="$after" 'BEGIN {
    if (a == "" || b == "") { print "missing output"; exit 1 }
    if (a < 0.6729 || a > 0.6749) { print "imported accuracy " a " is not PyTorch 0.6739"; exit 1 }
    if (!(b >= a + 0.15 && b >= 0.85)) { print "fine-tuned accuracy " b " from " a; exit 1 }
}'
