#!/bin/sh
# Checks Marian's numbers: z=6.9093, dz/dx=2.58385, x=1.98708 after one step,
# and that Graphviz accepts the printed graph when dot is installed.
out=$("$1/examples/expression_graph") || exit 1
for want in 'z=6.9093' 'dz/dx=2.58385' 'x=1.98708'; do
    printf '%s\n' "$out" | grep -qx "$want" || { echo "missing $want"; printf '%s\n' "$out"; exit 1; }
done
if command -v dot >/dev/null 2>&1; then
    printf '%s\n' "$out" | sed -n '/^digraph/,/^}/p' | dot -Tsvg >/dev/null || { echo "dot rejected the graph"; exit 1; }
fi
