"""PyTorch's side of the CNN benchmarks (issue 11): the same work as
bench/cnn.c with the same arguments, one measurement per run, printed as
    RESULT <value> <unit>

    cnn.py train    BATCH THREADS   samples/s of Adam steps of the MNIST CNN
    cnn.py resblock BATCH THREADS   samples/s of forward+backward of a
                                    residual block (64 ch, 32x32)
    cnn.py infer    BATCH THREADS   latency (us) of the MNIST CNN's forward
    cnn.py accuracy DATA_DIR THREADS [TARGET]
                                    seconds of training (evaluation
                                    included) until the test accuracy
                                    reaches TARGET (default 0.99), at most
                                    10 epochs; per-epoch lines on stderr

The MNIST CNN: conv 1->32 5x5 pad 2, relu, maxpool 2, conv 32->64 5x5 pad 2,
relu, maxpool 2, fc 3136->512, relu, fc 512->10, softmax cross-entropy,
Adam (lr 1e-3), PyTorch's default initialisation.  The BLAS thread count
comes from OPENBLAS_NUM_THREADS (bench/run sets it);
KILN_BENCH_SECONDS sets the timed duration.
"""
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from torch_bench import find, read_idx, time_runs


def mnist_cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(3136, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 10))


class ResBlock(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b1 = torch.nn.BatchNorm2d(c)
        self.c2 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b2 = torch.nn.BatchNorm2d(c)

    def forward(self, x):
        h = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(h)) + x)


def cmd_train(batch):
    torch.manual_seed(1)
    model = mnist_cnn()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.rand(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
    print(f"RESULT {batch / time_runs(step):.1f} samples/s")


def cmd_resblock(batch):
    torch.manual_seed(1)
    block = ResBlock(64)
    x = torch.rand(batch, 64, 32, 32, requires_grad=True)

    def step():
        block.zero_grad(set_to_none=True)
        x.grad = None
        block(x).sum().backward()
    print(f"RESULT {batch / time_runs(step):.1f} samples/s")


def cmd_infer(batch):
    torch.manual_seed(1)
    model = mnist_cnn().eval()
    x = torch.rand(batch, 1, 28, 28)
    with torch.inference_mode():
        sec = time_runs(lambda: model(x))
    print(f"RESULT {sec * 1e6:.2f} us")


def load(data_dir, prefix):
    images = read_idx(find(data_dir, f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(find(data_dir, f"{prefix}-labels-idx1-ubyte"))
    x = torch.from_numpy(images.astype(np.float32).reshape(-1, 1, 28, 28) / 255)
    return x, torch.from_numpy(labels.astype(np.int64))


def cmd_accuracy(data_dir, target):
    x_train, y_train = load(data_dir, "train")
    x_test, y_test = load(data_dir, "t10k")
    torch.manual_seed(1)
    model = mnist_cnn()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    t0 = time.perf_counter()
    for epoch in range(1, 11):
        model.train()
        perm = torch.randperm(len(x_train))
        for i in range(0, len(x_train) // 128 * 128, 128):
            idx = perm[i:i + 128]
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x_train[idx]), y_train[idx]).backward()
            opt.step()
        model.eval()
        correct = 0
        with torch.inference_mode():
            for i in range(0, len(x_test), 1000):
                pred = model(x_test[i:i + 1000]).argmax(1)
                correct += int((pred == y_test[i:i + 1000]).sum())
        acc = correct / len(x_test)
        elapsed = time.perf_counter() - t0
        print(f"epoch {epoch}: test accuracy {acc:.4f} at {elapsed:.1f} s", file=sys.stderr)
        if acc >= target:
            print(f"RESULT {elapsed:.2f} s")
            print(f"EPOCHS {epoch} epochs")
            return
    sys.exit(f"cnn.py: test accuracy {acc:.4f} after 10 epochs, below {target}")


def main(argv):
    torch.set_num_threads(int(argv[3] if argv[1:2] == ["accuracy"] else argv[-1]))
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "train" and len(argv) == 4:
        cmd_train(int(argv[2]))
    elif cmd == "resblock" and len(argv) == 4:
        cmd_resblock(int(argv[2]))
    elif cmd == "infer" and len(argv) == 4:
        cmd_infer(int(argv[2]))
    elif cmd == "accuracy" and len(argv) in (4, 5):
        cmd_accuracy(argv[2], float(argv[4]) if len(argv) == 5 else 0.99)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
