#!/usr/bin/python3
"""PyTorch 1.13 exports (torch.onnx.export) of the ops issue 13's second
round imports -- cross_entropy and nll_loss with weights and ignore_index
(SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss), gather
(GatherElements), triu (Trilu), conv_transpose2d (ConvTranspose),
interpolate (Resize, nearest and bilinear) -- into tests/ref/onnx/ops_*.onnx,
with an input, PyTorch's output and PyTorch's gradient of sum(output) with
respect to the input (ops_*.txt, the format of make_onnx_models.py: "in x",
"out y", "out dx").  tests/test_onnx_ops.c checks Kiln's values and
gradients of the imported graphs against them.  Also writes
ops_reshape_input.onnx, a Reshape whose shape is a graph input
(kiln_onnx_options.input_values).

Run: /usr/bin/python3 tests/ref/make_onnx_ops_refs.py  (python3-torch,
python3-onnx).
"""
import os

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper
from torch import nn
from torch.nn import functional as F

from make_onnx_models import OUT, save, write_refs

torch.manual_seed(13)
torch.set_num_threads(1)


class Loss(nn.Module):
    """A loss of x against fixed labels (with ignored ones) and weights."""

    def __init__(self, kind, classes, label_shape, reduction):
        super().__init__()
        self.kind, self.reduction = kind, reduction
        labels = torch.randint(0, classes, label_shape)
        labels.view(-1)[::3] = 1  # ignored
        self.register_buffer("labels", labels)
        self.register_buffer("weight", torch.rand(classes) + 0.5)

    def forward(self, x):
        if self.kind == "ce":
            return F.cross_entropy(x, self.labels, weight=self.weight,
                                   ignore_index=1, reduction=self.reduction)
        return F.nll_loss(x, self.labels, weight=self.weight, ignore_index=1,
                          reduction=self.reduction)


class Gather(nn.Module):
    def __init__(self, shape, axis, size):
        super().__init__()
        self.axis = axis
        self.register_buffer("idx", torch.randint(0, size, shape))

    def forward(self, x):
        return torch.gather(x, self.axis, self.idx)


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class Recurrent(nn.Module):
    """An nn.LSTM, GRU or RNN: its outputs and final states in one vector."""
    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        y, state = self.layer(x)
        states = state if isinstance(state, tuple) else (state,)
        return torch.cat([y.flatten()] + [s.flatten() for s in states])


class Einsums(nn.Module):
    """torch.einsum over x [2, 3, 4] and fixed operands: batched and
    transposed products, ellipsis, sums, a diagonal, an outer product,
    three operands and an implicit output, all flattened into one."""
    def __init__(self):
        super().__init__()
        gen = torch.Generator().manual_seed(5)
        self.w1 = torch.randn(2, 4, 5, generator=gen)
        self.w2 = torch.randn(5, 4, generator=gen)
        self.w3 = torch.randn(4, 2, generator=gen)
        self.w4 = torch.randn(5, 2, generator=gen)

    def forward(self, x):
        e = torch.einsum
        ys = [e("bij,bjk->bik", x, self.w1), e("bij,kj->bik", x, self.w2),
              e("...ij,jk->...ik", x, self.w3), e("bij->j", x),
              e("bii->bi", x[:, :, :3]), e("i,j->ij", x[0, 0], x[1, 1]),
              e("ij,jk,kl->il", x[0], self.w1[0], self.w4),
              e("bij,bij", x, x), e("bij->jb", x)]
        return torch.cat([y.flatten() for y in ys])


class Volumes(nn.Module):
    """3-D convolution and pools of x [2, 4, 5, 6, 5]: a grouped, strided,
    padded, dilated conv3d with bias; max_pool3d padded; avg_pool3d padded
    without and with the pads counted (weights from their own generator,
    so the other cases' random inputs stay the same)."""
    def __init__(self):
        super().__init__()
        gen = torch.Generator().manual_seed(7)
        self.w = torch.randn(6, 2, 2, 3, 2, generator=gen) * 0.3
        self.b = torch.randn(6, generator=gen)

    def forward(self, x):
        ys = [F.conv3d(x, self.w, self.b, stride=(2, 1, 2), padding=(1, 0, 1),
                       dilation=(1, 2, 1), groups=2),
              F.max_pool3d(x, 2, stride=2, padding=1),
              F.avg_pool3d(x, 3, stride=(1, 2, 2), padding=1,
                           count_include_pad=False),
              F.avg_pool3d(x, 2, stride=1, padding=1)]
        return torch.cat([y.flatten() for y in ys])


class GridSamples(nn.Module):
    """F.grid_sample of x [1, 2, 4, 5] on a grid that depends on x (so the
    gradient reaches both), in every mode and padding, partly outside."""
    def __init__(self):
        super().__init__()
        gen = torch.Generator().manual_seed(9)
        self.g0 = torch.randn(1, 4, 5, 2, generator=gen)

    def forward(self, x):
        grid = 1.3 * torch.tanh(self.g0 + 0.5 * x.permute(0, 2, 3, 1))
        ys = [F.grid_sample(x, grid, mode=m, padding_mode=p, align_corners=a)
              for m, p, a in (("bilinear", "zeros", False),
                              ("bilinear", "border", True),
                              ("bilinear", "reflection", False),
                              ("nearest", "zeros", False),
                              ("bicubic", "zeros", False),
                              ("bicubic", "reflection", True))]
        return torch.cat([y.flatten() for y in ys])


class PoolIndices(nn.Module):
    """F.max_pool2d and F.max_pool1d with return_indices (MaxPool's Indices
    output; PyTorch's export turns them into per-plane indices): the values
    and the indices as floats, padded, strided, dilated, ceil_mode."""
    def forward(self, x):
        v, i = F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)
        v1, i1 = F.max_pool1d(x.flatten(2), 3, stride=2, dilation=2,
                              ceil_mode=True, return_indices=True)
        # the indices scaled down: the finite differences of a large sum
        # would lose the values' digits in float32
        return torch.cat([v.flatten(), 1e-3 * i.float().flatten(),
                          v1.flatten(), 1e-3 * i1.float().flatten()])

    @staticmethod
    def make_input(shape):
        """Values 0.02 apart: no two elements of a window within the
        finite-difference step (a near tie flips an index)."""
        n = int(np.prod(shape))
        return (torch.randperm(n).float() * 0.02 - 0.01 * n).reshape(shape)


class TrainBatchNorm(nn.Module):
    """nn.BatchNorm2d in training mode (batch statistics; exported with
    TrainingMode.TRAINING as BatchNormalization training_mode=1), times a
    fixed tensor so that the gradient of the sum is not zero."""
    training_export = True

    def __init__(self):
        super().__init__()
        gen = torch.Generator().manual_seed(11)
        self.bn = nn.BatchNorm2d(3)
        with torch.no_grad():
            self.bn.weight.copy_(torch.rand(3, generator=gen) + 0.5)
            self.bn.bias.copy_(torch.randn(3, generator=gen))
        self.register_buffer("w", torch.randn(4, 3, 5, 5, generator=gen))

    def forward(self, x):
        return self.bn(x) * self.w


def models():
    deconv = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1,
                                output_padding=1, groups=2)
    return [
        ("ops_sce", Loss("ce", 5, (4, 3), "mean"), (4, 5, 3), 13),
        ("ops_sce_sum", Loss("ce", 6, (5,), "sum"), (5, 6), 13),
        ("ops_nll_none", Loss("nll", 5, (3, 2, 2), "none"), (3, 5, 2, 2), 13),
        ("ops_gather", Gather((3, 2, 4), 1, 5), (3, 5, 4), 13),
        ("ops_triu", Fn(lambda x: torch.triu(x, 1) + torch.tril(x, -2)),
         (2, 4, 5), 14),
        ("ops_deconv", deconv, (2, 4, 5, 6), 13),
        ("ops_resize", Fn(lambda x: torch.cat([
            F.interpolate(x, scale_factor=2, mode="nearest"),
            F.interpolate(x, scale_factor=2, mode="bilinear",
                          align_corners=False),
            F.interpolate(x, scale_factor=2, mode="bilinear",
                          align_corners=True)], 1)), (2, 3, 4, 5), 13),
        # recurrent layers: every output and final state, flattened
        ("ops_lstm", Recurrent(nn.LSTM(3, 4, num_layers=2, bidirectional=True,
                                       batch_first=True)), (2, 5, 3), 14),
        ("ops_gru", Recurrent(nn.GRU(3, 5, bidirectional=True)), (4, 2, 3),
         14),
        ("ops_rnn", Recurrent(nn.RNN(3, 4, nonlinearity="relu",
                                     num_layers=2)), (3, 2, 3), 14),
        ("ops_act", Fn(lambda x: torch.cat([F.hardswish(x),
                                            F.celu(x, 0.7)], 1)),
         (2, 3, 4), 14),
        ("ops_einsum", Einsums(), (2, 3, 4), 14),
        ("ops_volumes", Volumes(), (2, 4, 5, 6, 5), 13),
        ("ops_grid", GridSamples(), (1, 2, 4, 5), 16),
        ("ops_pool_idx", PoolIndices(), (2, 3, 5, 6), 13),
        ("ops_bn_train", TrainBatchNorm(), (4, 3, 5, 5), 15),
    ]


def reshape_input():
    """Y = Reshape(X [2, 3], S): the shape is an input, known only when
    the loader is given its value."""
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["X", "S"], ["Y"])], "reshape_input",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("S", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["r", "c"])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                           producer_name="kiln-tests"),
         "ops_reshape_input")


def main():
    for name, model, shape, opset in models():
        train = getattr(model, "training_export", False)
        model.train(train)
        x = (model.make_input(shape) if hasattr(model, "make_input")
             else torch.randn(shape)).requires_grad_()
        xin = x
        if name.startswith("ops_nll"):
            xin = F.log_softmax(x, 1).detach().requires_grad_()
        y = model(xin)
        y.sum().backward()
        torch.onnx.export(model, xin.detach(),
                          os.path.join(OUT, name + ".onnx"),
                          input_names=["x"], output_names=["y"],
                          opset_version=opset,
                          training=torch.onnx.TrainingMode.TRAINING if train
                          else torch.onnx.TrainingMode.EVAL)
        onnx.checker.check_model(onnx.load(os.path.join(OUT, name + ".onnx")))
        write_refs(name, [("x", xin.detach().numpy())],
                   [("y", y.detach().numpy()),
                    ("dx", xin.grad.numpy().astype(np.float32))])
    reshape_input()


if __name__ == "__main__":
    main()
