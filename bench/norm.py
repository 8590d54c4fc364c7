"""PyTorch's side of bench/norm.c: batch norm on [32,64,32,32], a training
forward (running statistics updated), a training forward and backward (dx,
dweight, dbias from dy) and an evaluation forward; same output lines:

    norm.py THREADS    KERNEL <train-fwd|train-fwd+bwd|eval-fwd> <ms> ms
"""
import sys

import torch
import torch.nn.functional as F

from conv import median_time
from torch_bench import seconds


def main():
    torch.set_num_threads(int(sys.argv[1]))
    g = torch.Generator().manual_seed(1)
    x = torch.rand(32, 64, 32, 32, generator=g) - 0.5
    dy = torch.rand(32, 64, 32, 32, generator=g) - 0.5
    w = torch.ones(64, requires_grad=True)
    b = torch.zeros(64, requires_grad=True)
    rm, rv = torch.zeros(64), torch.ones(64)
    xg = x.clone().requires_grad_(True)

    def train_fwd():
        with torch.no_grad():
            return F.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5)

    def train_both():
        y = F.batch_norm(xg, rm, rv, w, b, True, 0.1, 1e-5)
        return torch.autograd.grad(y, [xg, w, b], dy)

    def eval_fwd():
        with torch.no_grad():
            return F.batch_norm(x, rm, rv, w, b, False, 0.1, 1e-5)

    budget = seconds() / 3
    for name, fn in [("train-fwd", train_fwd), ("train-fwd+bwd", train_both),
                     ("eval-fwd", eval_fwd)]:
        print(f"KERNEL {name} {1e3 * median_time(fn, budget):.3f} ms")


if __name__ == "__main__":
    main()
