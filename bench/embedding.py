"""PyTorch's side of bench/embedding.c, same arguments and output lines:

    embedding.py V D N THREADS    FORWARD <ms> ms, RESULT <ms> ms

F.embedding of N random ids into a [V, D] table, and its backward for the
table (the dense gradient PyTorch builds for a plain nn.Embedding), with a
fixed gradient G of the rows.  Set OPENBLAS_NUM_THREADS to THREADS.
"""
import sys

import torch
import torch.nn.functional as F

from conv import median_time
from torch_bench import seconds


def main():
    v, d, n, t = (int(a) for a in sys.argv[1:5])
    torch.set_num_threads(t)
    gen = torch.Generator().manual_seed(1)
    table = (torch.rand(v, d, generator=gen) * 2 - 1).requires_grad_()
    ids = torch.randint(0, v, (n,), generator=gen)
    g = torch.rand(n, d, generator=gen) - 0.5

    def forward():
        with torch.no_grad():
            return F.embedding(ids, table)

    def step():
        table.grad = None
        F.embedding(ids, table).backward(g)

    budget = seconds() / 2
    print(f"FORWARD {median_time(forward, budget) * 1e3:.4f} ms")
    print(f"RESULT {median_time(step, budget) * 1e3:.4f} ms")


if __name__ == "__main__":
    main()
