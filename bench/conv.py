"""PyTorch's side of bench/conv.c: forward, input gradient and weight
gradient of one convolution (torch.ops.aten.convolution_backward with one
output asked for), same cases and arguments, same output lines:

    conv.py CASE THREADS    KERNEL <fwd|dx|dw> <ms> ms <GFLOP/s> GFLOP/s <share>% of peak

The BLAS thread count comes from OPENBLAS_NUM_THREADS (set it to THREADS).
"""
import sys

import torch
import torch.nn.functional as F

from torch_bench import seconds

PEAK_PER_CORE = 115.0
CASES = {  # n, c, o, h, k, pad, need_dx
    "mnist1": (128, 1, 32, 28, 5, 2, False),
    "mnist2": (128, 32, 64, 14, 5, 2, True),
    "res": (32, 64, 64, 32, 3, 1, True),
}


def median_time(fn, budget, reps=5):
    import time
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
    x = torch.rand(n, c, h, h, generator=g) - 0.5
    w = torch.rand(o, c, k, k, generator=g) - 0.5
    dy = torch.rand(n, o, h, h, generator=g) - 0.5
    flops = 2.0 * n * o * h * h * c * k * k
    budget = seconds() / 3

    def back(mask):
        return lambda: torch.ops.aten.convolution_backward(
            dy, x, w, None, [1, 1], [pad, pad], [1, 1], False, [0, 0], 1, mask)

    kernels = [("fwd", lambda: F.conv2d(x, w, None, 1, pad))]
    if need_dx:
        kernels.append(("dx", back([True, False, False])))
    kernels.append(("dw", back([False, True, False])))
    with torch.no_grad():
        for name, fn in kernels:
            t = median_time(fn, budget)
            gf = flops / t * 1e-9
            print(f"KERNEL {name} {t * 1e3:.3f} ms {gf:.1f} GFLOP/s "
                  f"{100 * gf / (PEAK_PER_CORE * threads):.0f}% of peak")


if __name__ == "__main__":
    main()
