"""PyTorch's side of the benchmarks: the same work as bench/kiln_bench.c with
the same arguments, one measurement per run, printed as
    RESULT <value> <unit>

    torch_bench.py train  LAYERS ACT BATCH THREADS
    torch_bench.py logreg BATCH THREADS
    torch_bench.py infer  LAYERS BATCH THREADS
    torch_bench.py epoch  DATA_DIR THREADS
    torch_bench.py memory LAYERS BATCH THREADS   (memory-unplanned: the same)

The BLAS thread count comes from OPENBLAS_NUM_THREADS, set by bench/run
before the interpreter starts.  KILN_BENCH_SECONDS sets the timed duration.
"""
import gzip
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def seconds():
    v = float(os.environ.get("KILN_BENCH_SECONDS", "1") or 1)
    return v if v > 0 else 1.0


def mlp(sizes, act):
    layers = []
    for i in range(len(sizes) - 1):
        lin = torch.nn.Linear(sizes[i], sizes[i + 1])
        torch.nn.init.xavier_uniform_(lin.weight)
        torch.nn.init.zeros_(lin.bias)
        layers.append(lin)
        if i + 2 < len(sizes):
            layers.append(torch.nn.GELU(approximate="tanh") if act == "gelu" else torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def time_runs(fn):
    budget = seconds()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.1 * budget:
        fn()
    runs = 0
    t0 = time.perf_counter()
    while True:
        for _ in range(8):
            fn()
        runs += 8
        t = time.perf_counter() - t0
        if t >= budget:
            return t / runs


def sgd_step(model, opt, loss_fn, x, y):
    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def cmd_train(sizes, act, batch, logreg=False):
    torch.manual_seed(1)
    if logreg:
        model = torch.nn.Sequential(torch.nn.Linear(4, 1), torch.nn.Sigmoid())
        x = torch.rand(batch, 4)
        y = torch.randint(0, 2, (batch, 1)).float()
        loss_fn = F.binary_cross_entropy
    else:
        model = mlp(sizes, act)
        x = torch.rand(batch, sizes[0])
        y = torch.randint(0, sizes[-1], (batch,))
        loss_fn = F.cross_entropy
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sec = time_runs(sgd_step(model, opt, loss_fn, x, y))
    print(f"RESULT {batch / sec:.1f} samples/s")


def cmd_infer(sizes, batch):
    torch.manual_seed(1)
    model = mlp(sizes, "relu").eval()
    x = torch.rand(batch, sizes[0])
    with torch.inference_mode():
        sec = time_runs(lambda: model(x))
    print(f"RESULT {sec * 1e6:.2f} us")


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(d, stem):
    for name in (stem, stem + ".gz"):
        if os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    sys.exit(f"torch_bench: {stem} not found in {d}")


def cmd_epoch(data_dir):
    images = read_idx(find(data_dir, "train-images-idx3-ubyte"))
    labels = read_idx(find(data_dir, "train-labels-idx1-ubyte"))
    x_all = torch.from_numpy(images.reshape(len(images), -1).astype(np.float32) / 255)
    y_all = torch.from_numpy(labels.astype(np.int64))
    torch.manual_seed(1)
    model = mlp([784, 600, 10], "relu")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    t0 = time.perf_counter()
    perm = torch.randperm(len(x_all))
    n = len(x_all) // 128 * 128
    total = 0.0
    for i in range(0, n, 128):
        idx = perm[i:i + 128]
        x, y = x_all[idx], y_all[idx]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        total += loss.item()
    print(f"RESULT {time.perf_counter() - t0:.3f} s")
    print(f"mean loss {total / (n // 128):.4f}", file=sys.stderr)


def cmd_memory(sizes, batch):
    torch.manual_seed(1)
    model = mlp(sizes, "relu")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.rand(batch, sizes[0])
    y = torch.randint(0, sizes[-1], (batch,))
    step = sgd_step(model, opt, F.cross_entropy, x, y)
    for _ in range(20):
        step()
    print(f"RESULT {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MiB")


def main(argv):
    torch.set_num_threads(int(argv[-1]))
    cmd = argv[1] if len(argv) > 1 else ""
    sizes = lambda s: [int(v) for v in s.split("-")]
    if cmd == "train" and len(argv) == 6:
        cmd_train(sizes(argv[2]), argv[3], int(argv[4]))
    elif cmd == "logreg" and len(argv) == 4:
        cmd_train(None, None, int(argv[2]), logreg=True)
    elif cmd == "infer" and len(argv) == 5:
        cmd_infer(sizes(argv[2]), int(argv[3]))
    elif cmd == "epoch" and len(argv) == 4:
        cmd_epoch(argv[2])
    elif cmd in ("memory", "memory-unplanned") and len(argv) == 5:
        cmd_memory(sizes(argv[2]), int(argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
