#!/usr/bin/python3
"""Exports small PyTorch 1.13 models with torch.onnx.export into
tests/ref/onnx/ (torch_*.onnx) with an input and PyTorch's output
(torch_*.txt, the format of make_onnx_models.py); tests/test_onnx.c checks
Kiln's outputs agree within 1e-4.

Run: /usr/bin/python3 tests/ref/make_torch_onnx.py  (python3-torch).
The models: an MLP (784-64-10), the MNIST CNN of tools/cnn.c at a quarter
of its widths (kept small for the repository; same layers), and a residual
block (conv-bn-relu-conv-bn, identity skip, relu) in evaluation mode, and
the character-level decoder of tools/gpt.c (bench/gpt.py's model: token and
position embeddings, pre-norm blocks of layer norm, causal multi-head
attention and a tanh-gelu MLP, a final layer norm, the head tied to the
token embedding) at 2 layers, 2 heads, width 32, context 16, vocabulary 64,
exported at opset 17 (LayerNormalization, Split, Trilu).
"""
import sys
import os

import torch
from torch import nn

from make_onnx_models import OUT, write_refs

torch.manual_seed(13)
torch.set_num_threads(1)


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(c)
        self.c2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        return torch.relu(self.b2(self.c2(y)) + x)


def models():
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(784, 64), nn.ReLU(),
                        nn.Linear(64, 10))
    cnn = nn.Sequential(nn.Conv2d(1, 8, 5, padding=2), nn.ReLU(),
                        nn.MaxPool2d(2), nn.Conv2d(8, 16, 5, padding=2),
                        nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(16 * 7 * 7, 32), nn.ReLU(),
                        nn.Linear(32, 10), nn.LogSoftmax(dim=1))
    res = Residual(8)
    # Batch-norm statistics that are not the identity.
    for bn in (res.b1, res.b2):
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.data.uniform_(0.5, 1.5)
        bn.bias.data.uniform_(-0.5, 0.5)
    return [("torch_mlp", mlp, (3, 1, 28, 28)),
            ("torch_cnn", cnn, (2, 1, 28, 28)),
            ("torch_residual", res, (2, 8, 8, 8))]


def gpt():
    """bench/gpt.py's decoder, small: its module with the sizes replaced."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "..", "bench"))
    import gpt as G
    G.V, G.CTX, G.LAYERS, G.HEADS, G.D = 64, 16, 2, 2, 32
    torch.manual_seed(17)
    model = G.GPT().eval()
    ids = torch.randint(0, G.V, (2, G.CTX))
    with torch.no_grad():
        y = model(ids)
    class Logits(nn.Module):  # ids alone: the positions start at 0
        def __init__(self):
            super().__init__()
            self.gpt = model

        def forward(self, ids):
            return self.gpt(ids)

    torch.onnx.export(Logits(), ids, os.path.join(OUT, "torch_gpt.onnx"),
                      input_names=["ids"], output_names=["logits"],
                      opset_version=17)
    write_refs("torch_gpt", [("ids", ids.numpy())], [("logits", y.numpy())])


def main():
    for name, model, shape in models():
        model.eval()
        x = torch.randn(shape)
        with torch.no_grad():
            y = model(x)
        torch.onnx.export(model, x, os.path.join(OUT, name + ".onnx"),
                          input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
                          opset_version=13)
        write_refs(name, [("x", x.numpy())], [("y", y.numpy())])
    gpt()


if __name__ == "__main__":
    main()
