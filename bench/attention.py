"""PyTorch's side of bench/attention.c: attention on q, k, v [B,8,T,64] as
PyTorch 1.13 writes it (it has no fused scaled_dot_product_attention):
softmax(q k^T / 8 [causal: -inf above the diagonal]) v, forward and
backward (dq, dk, dv from an adjoint of the output); same arguments and
output lines:

    attention.py step   B T THREADS causal|full   RESULT <ms> ms (median
        of three timings after one warm-up: a step takes seconds)
    attention.py memory B T THREADS causal|full   RESULT <MiB> MiB (the
        peak RSS over two runs less the RSS with the inputs allocated),
        PEAK_RSS <MiB> MiB (the process's peak, runtime included)

KILN_BENCH_SECONDS sets the timed duration (default 1).
"""
import math
import resource
import sys

import torch

from conv import median_time
from torch_bench import seconds

HEADS, DIM = 8, 64


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def main():
    mode, b, t, threads, causal = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                   int(sys.argv[4]), sys.argv[5] == "causal")
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(1)
    q, k, v, dy = (torch.rand(b, HEADS, t, DIM, generator=g) - 0.5 for _ in range(4))
    q, k, v = (x.requires_grad_(True) for x in (q, k, v))
    hidden = torch.ones(t, t, dtype=torch.bool).triu(1) if causal else None

    def step():
        s = q @ k.transpose(-2, -1) / math.sqrt(DIM)
        if hidden is not None:
            s = s.masked_fill(hidden, float("-inf"))
        y = torch.softmax(s, -1) @ v
        return torch.autograd.grad(y, [q, k, v], dy)

    if mode == "step":
        print(f"RESULT {1e3 * median_time(step, seconds(), reps=3, warm=1):.3f} ms")
        return
    before = rss_mib()
    for _ in range(2):
        step()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"RESULT {peak - before:.1f} MiB")
    print(f"PEAK_RSS {peak:.1f} MiB")


if __name__ == "__main__":
    main()
