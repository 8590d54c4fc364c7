#!/bin/sh
# Checks Marian's numbers: z=6.9093, dz/dx=2.58385, x=1.98708 after one Sgd
# step; the debug output of x and its gradient in Marian's layout; the three
# optimisers; params; .npz and .bin round trips; identical gradients with
# checkpointing; and that Graphviz accepts the printed graph when dot is
# installed.
out=$("$1/examples/expression_graph") || { printf '%s\n' "$out"; exit 1; }
for want in 'z=6.9093' 'dz/dx=2.58385' 'x=1.98708' \
    'min: 2.00000000 max: 2.00000000 l2-norm: 2.00000000' \
    'min: 2.58385324 max: 2.58385324 l2-norm: 2.58385324' \
    '[[   2.58385324 ]]' \
    'x  f32  [1,1]  trainable  1 values' \
    'saved and loaded .npz: 2 variables, x=1.98708' \
    'saved and loaded .bin: 2 variables, x=1.98708'; do
    printf '%s\n' "$out" | grep -qxF "$want" || { echo "missing $want"; printf '%s\n' "$out"; exit 1; }
done
for want in '^\[[0-9-]* [0-9:]*\] \[memory\] Reserving 8 MB, device cpu0$' \
    '^\[[0-9-]* [0-9:]*\] Debug: Parameter x op=variable$' \
    '^\[[0-9-]* [0-9:]*\] Debug Grad: Parameter x op=variable$' \
    '^\[[0-9-]* [0-9:]*\] shape=1x1 size=1 type=float32 device=cpu0 ptr=[0-9]* bytes=64$' \
    '^Sgd  *lr=0.005 50 steps: x=1\.6' '^Adagrad  *lr=0.05  *50 steps: x=1\.6' \
    '^Adam  *lr=0.01  *50 steps: x=1\.6' \
    '^checkpointing: gradients identical, peak workspace [0-9]* kB -> [0-9]* kB$'; do
    printf '%s\n' "$out" | grep -q "$want" || { echo "missing $want"; printf '%s\n' "$out"; exit 1; }
done
if command -v dot >/dev/null 2>&1; then
    printf '%s\n' "$out" | sed -n '/^digraph/,/^}/p' | dot -Tsvg >/dev/null || { echo "dot rejected the graph"; exit 1; }
fi
