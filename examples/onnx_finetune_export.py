#!/usr/bin/python3
"""Writes examples/mnist_cnn_brief.onnx, the model examples/onnx_finetune.c
fine-tunes: a small MNIST CNN that PyTorch 1.13 trained only briefly (three
passes over the first 300 training images), so its test accuracy is
mediocre and Kiln's epoch of fine-tuning has room to show.

Run from the repository root: /usr/bin/python3 examples/onnx_finetune_export.py
(python3-torch, NumPy; data/mnist from scripts/setup).  The output is
committed; the example and its test never need PyTorch.

The network (the MNIST CNN of tools/cnn.c at a quarter of its widths):
x [batch, 1, 28, 28] -> conv 5x5 1->8 pad 2, relu, max pool 2
-> conv 5x5 8->16 pad 2, relu, max pool 2 -> flatten -> dense 784->32, relu
-> dense 32->10: the logits, output "logits".  About 29k parameters.
"""
import os

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "mnist")
OUT = os.path.join(HERE, "mnist_cnn_brief.onnx")
IMAGES = 300  # what PyTorch trains on: "a few hundred images"
PASSES = 3


def read_idx(name, offset):
    with open(os.path.join(DATA, name), "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def train_subset():
    x = read_idx("train-images-idx3-ubyte", 16)[:IMAGES * 784]
    y = read_idx("train-labels-idx1-ubyte", 8)[:IMAGES]
    x = torch.tensor(x.reshape(IMAGES, 1, 28, 28), dtype=torch.float32) / 255
    return x, torch.tensor(y, dtype=torch.int64)


def test_accuracy(model):
    x = read_idx("t10k-images-idx3-ubyte", 16).reshape(-1, 1, 28, 28)
    y = read_idx("t10k-labels-idx1-ubyte", 8)
    with torch.no_grad():
        z = model(torch.tensor(x, dtype=torch.float32) / 255)
    return float((z.argmax(1).numpy() == y).mean())


def main():
    torch.manual_seed(13)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Conv2d(1, 8, 5, padding=2), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Conv2d(8, 16, 5, padding=2),
                          nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(16 * 7 * 7, 32), nn.ReLU(),
                          nn.Linear(32, 10))
    x, y = train_subset()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for at in [a for _ in range(PASSES) for a in range(0, IMAGES, 20)]:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x[at:at + 20]),
                                    y[at:at + 20]).backward()
        opt.step()
    model.eval()
    print("PyTorch test accuracy after %d passes over %d images: %.4f"
          % (PASSES, IMAGES, test_accuracy(model)))
    torch.onnx.export(model, x[:1], OUT, input_names=["x"],
                      output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}},
                      opset_version=13)


if __name__ == "__main__":
    main()
