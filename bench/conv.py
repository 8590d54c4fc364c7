"""PyTorch's side of bench/conv.c: forward, and backward (input and weight
gradients, the weight's alone for mnist1 as in the CNN's first layer)
timed as forward+backward less the forward, same cases and arguments,
same output lines:

    conv.py CASE THREADS    KERNEL <fwd|bwd> <ms> ms <GFLOP/s> GFLOP/s <share>% of peak

The BLAS thread count comes from OPENBLAS_NUM_THREADS (set it to THREADS).
"""
import sys
import time

import torch
import torch.nn.functional as F

from torch_bench import seconds

PEAK_PER_CORE = 115.0
CASES = {  # n, c, o, h, k, pad, need_dx
    "mnist1": (128, 1, 32, 28, 5, 2, False),
    "mnist2": (128, 32, 64, 14, 5, 2, True),
    "res": (32, 64, 64, 32, 3, 1, True),
}


def median_time(fn, budget, reps=5, warm=5):
    for _ in range(warm):  # oneDNN builds its primitives on the first calls
        fn()
    times = []
    for _ in range(reps):
        runs, t0 = 0, time.perf_counter()
        while True:
            fn()
            runs += 1
            el = time.perf_counter() - t0
            if el >= budget / reps:
                break
        times.append(el / runs)
    return sorted(times)[reps // 2]


def main():
    n, c, o, h, k, pad, need_dx = CASES[sys.argv[1]]
    threads = int(sys.argv[2])
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(n, c, h, h, generator=g) - 0.5).requires_grad_(need_dx)
    w = (torch.rand(o, c, k, k, generator=g) - 0.5).requires_grad_(True)
    dy = torch.rand(n, o, h, h, generator=g) - 0.5
    flops = 2.0 * n * o * h * h * c * k * k
    budget = seconds() / 2

    def fwd():  # with autograd on, as in training (its no_grad path differs)
        F.conv2d(x, w, None, 1, pad)

    def fwd_bwd():
        F.conv2d(x, w, None, 1, pad).backward(dy)

    t_fwd = median_time(fwd, budget)
    t_bwd = median_time(fwd_bwd, budget) - t_fwd
    bwd_flops = flops * (2 if need_dx else 1)
    for name, t, f in (("fwd", t_fwd, flops), ("bwd", t_bwd, bwd_flops)):
        gf = f / t * 1e-9
        print(f"KERNEL {name} {t * 1e3:.3f} ms {gf:.1f} GFLOP/s "
              f"{100 * gf / (PEAK_PER_CORE * threads):.0f}% of peak")


if __name__ == "__main__":
    main()
