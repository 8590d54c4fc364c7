"""PyTorch eager mode doing bench/dynamic.c's work, same arguments:

    dynamic.py chain N                      microseconds per op
    dynamic.py mlp LAYERS WIDTH BATCH       microseconds per step

One thread (torch.set_num_threads(1); run with OPENBLAS_NUM_THREADS=1).
Prints "RESULT <median> <unit>" over 5 timed runs of KILN_BENCH_SECONDS
(default 1) / 5 seconds each.
"""
import os
import sys
import time

import torch

REPS = 5


def budget():
    v = float(os.environ.get("KILN_BENCH_SECONDS", "1") or 1)
    return (v if v > 0 else 1.0) / REPS


def chain_step(n):
    x = torch.tensor([0.5], requires_grad=True)
    y = x
    for i in range(n):
        k = i % 4
        if k == 0:
            y = torch.sin(y)
        elif k == 1:
            y = y * x
        elif k == 2:
            y = y + x
        else:
            y = torch.tanh(y)
    y.sum().backward()
    return x.grad


def make_mlp(layers, width):
    g = torch.Generator().manual_seed(0)
    ps = []
    for _ in range(layers):
        lim = (6.0 / (2 * width)) ** 0.5
        w = ((torch.rand(width, width, generator=g) * 2 - 1) * lim).requires_grad_()
        b = torch.zeros(width, requires_grad=True)
        ps.append((w, b))
    return ps


def mlp_step(ps, x):
    h = x
    for w, b in ps:
        h = torch.relu(h @ w + b)
    loss = (h * h).mean()
    for w, b in ps:
        w.grad = None
        b.grad = None
    loss.backward()


def main():
    torch.set_num_threads(1)
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "chain":
        n = int(args[1])
        work, unit, div = (lambda: chain_step(n)), "us/op", n
    elif len(args) == 4 and args[0] == "mlp":
        layers, width, batch = map(int, args[1:])
        ps = make_mlp(layers, width)
        x = torch.rand(batch, width) * 2 - 1
        work, unit, div = (lambda: mlp_step(ps, x)), "us/step", 1
    else:
        sys.exit("usage: dynamic.py chain N | dynamic.py mlp LAYERS WIDTH BATCH")
    for _ in range(20):
        work()
    med = []
    for _ in range(REPS):
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < budget():
            work()
            steps += 1
        med.append(1e6 * (time.perf_counter() - t0) / steps / div)
    med.sort()
    print("RESULT %.4f %s" % (med[REPS // 2], unit))


if __name__ == "__main__":
    main()
