"""PyTorch's side of bench/pool.c: 2x2 stride-2 max pooling forward (with
the indices a training step keeps), its backward from those indices, and
both, same cases and arguments, same output lines:

    pool.py CASE THREADS    KERNEL <fwd|bwd|fwd+bwd> <ms> ms

The BLAS thread count comes from OPENBLAS_NUM_THREADS (set it to THREADS).
"""
import sys

import torch

from conv import median_time
from torch_bench import seconds

CASES = {"mnist1": (32, 28), "mnist2": (64, 14)}  # channels, size
WIN = ([2, 2], [2, 2], [0, 0], [1, 1], False)  # kernel, stride, pad, dil, ceil


def main():
    c, h = CASES[sys.argv[1]]
    torch.set_num_threads(int(sys.argv[2]))
    g = torch.Generator().manual_seed(1)
    x = torch.rand(128, c, h, h, generator=g) - 0.5
    dy = torch.rand(128, c, h // 2, h // 2, generator=g) - 0.5
    aten = torch.ops.aten

    def fwd():
        return aten.max_pool2d_with_indices(x, *WIN)

    _, idx = fwd()

    def both():
        _, i = fwd()
        return aten.max_pool2d_with_indices_backward(dy, x, *WIN, i)

    kernels = [("fwd", fwd),
               ("bwd", lambda: aten.max_pool2d_with_indices_backward(dy, x, *WIN, idx)),
               ("fwd+bwd", both)]
    budget = seconds() / 3
    with torch.no_grad():
        for name, fn in kernels:
            print(f"KERNEL {name} {median_time(fn, budget) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
