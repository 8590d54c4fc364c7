"""Writes the ONNX files of the ONNX Runtime rows of bench/run with
torch.onnx.export (PyTorch 1.13, opset 13, the batch dim named "batch"):

    ort_models.py DIR     -> DIR/mlp.onnx, DIR/cnn.onnx, DIR/gpt.onnx,
                             DIR/identity.onnx

mlp: 784-600-10 with relu; cnn: the MNIST CNN of bench/cnn.py (conv 1->32
5x5 pad 2, relu, maxpool 2, conv 32->64 5x5 pad 2, relu, maxpool 2, fc
3136->512, relu, fc 512->10); gpt: bench/gpt.py's decoder (4 layers, 4
heads, width 128, vocabulary 128) on int64 ids [1, 128], the forward of a
full context of 128 tokens giving logits [1, 128, 128], exported at opset
17 (LayerNormalization) with fixed shapes; identity: one Identity node on
[1, 1], which measures ONNX Runtime's per-call overhead.  Weights are
PyTorch's default initialisation under a fixed seed.  Files already there
are kept.
"""
import os
import sys

import torch

import gpt
from cnn import mnist_cnn


class Identity(torch.nn.Module):
    def forward(self, x):
        return x


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(784, 600), torch.nn.ReLU(),
                               torch.nn.Linear(600, 10))


def export(model, shape, path):
    model.eval()
    # Identity would be exported as a graph with no node at all.
    opts = {"do_constant_folding": False} if isinstance(model, Identity) else {}
    torch.onnx.export(model, torch.zeros(shape), path, opset_version=13,
                      input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, **opts)


class Logits(torch.nn.Module):
    """The decoder with its positions starting at 0: ids in, logits out."""
    def __init__(self):
        super().__init__()
        self.gpt = gpt.GPT()

    def forward(self, ids):
        return self.gpt(ids)


def export_gpt(path):
    model = Logits().eval()
    ids = torch.zeros((1, gpt.CTX), dtype=torch.long)
    torch.onnx.export(model, ids, path, opset_version=17, input_names=["x"],
                      output_names=["y"])


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(13)
    for name, model, shape in (("mlp", mlp(), (1, 784)),
                               ("cnn", mnist_cnn(), (1, 1, 28, 28)),
                               ("identity", Identity(), (1, 1))):
        path = os.path.join(out, name + ".onnx")
        if not os.path.exists(path):
            export(model, shape, path)
    path = os.path.join(out, "gpt.onnx")
    if not os.path.exists(path):
        export_gpt(path)


if __name__ == "__main__":
    main()
