#!/usr/bin/python3
"""ConvTranspose over 3 spatial dims, against PyTorch's F.conv_transpose3d
(tests/test_onnx_ops.c reads the files; the format of make_onnx_models.py:
"in x", "out y", "out dx" of sum(y)).

ops_deconv3d: PyTorch 1.13's export of four conv_transpose3d calls on one
flat input that holds the volume x [2, 4, 3, 4, 3] and, for two of the
calls, the weight and bias too, so that dx covers the gradients of the
weight and bias as well: grouped, strided, padded, dilated, with output
padding and bias; dilated in depth only; depthwise with uneven strides
and output padding; a kernel one deep.

ops_deconv3d_pads: ConvTranspose nodes PyTorch does not export, built
with onnx.helper: auto_pad SAME_UPPER and SAME_LOWER, output_shape given
as the spatial sizes and as the whole shape (one output larger than the
unpadded result: zeros added).  The reference is F.conv_transpose3d
without padding, then ONNX's rule (ConvTranspose's operator doc):
total = stride (in - 1) + output_padding + (k - 1) dilation + 1 - out,
split total // 2 at the begin for SAME_UPPER, total - total // 2 at the
begin otherwise, as F.pad's negative (cropping) and positive pads.  The
model also holds a 3-D Conv without kernel_shape (inferred from the
weight; uneven pads), against F.conv3d of the padded input.

ops_long_positions: Slice with steps and ArgMax's select_last_index over
20000 points (position tables past 4096 entries), against torch.

bad_deconv3d_*: hostile ConvTranspose nodes (node 'dc') the loader must
refuse naming the node: a zero and a negative stride, strides making
the output too large, weights that do not fit the input (channels, rank,
group, kernel_shape), output_shape entries negative or huge, output
padding past any size, a depth times kernel depth past what is placed.

Run: /usr/bin/python3 tests/ref/make_onnx_deconv3d_refs.py  (python3-torch,
python3-onnx).
"""
import os

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper
from torch import nn
from torch.nn import functional as F

from make_onnx_models import OUT, save, save_unchecked, write_refs

XS = (2, 4, 3, 4, 3)
WA, BA = (4, 3, 2, 3, 2), (6,)
WB = (4, 2, 3, 2, 2)


def numel(shape):
    return int(np.prod(shape))


class Deconv3d(nn.Module):
    """Four conv_transpose3d calls, flattened and concatenated; the first
    two take their weights (and the first its bias) from the input."""

    def __init__(self):
        super().__init__()
        gen = torch.Generator().manual_seed(17)
        self.wc = torch.randn(4, 1, 1, 2, 3, generator=gen) * 0.5
        self.bc = torch.randn(4, generator=gen)
        self.wd = torch.randn(4, 2, 1, 2, 2, generator=gen) * 0.5

    def forward(self, inp):
        at = 0
        parts = []
        for shape in (XS, WA, BA, WB):
            parts.append(inp[at:at + numel(shape)].reshape(shape))
            at += numel(shape)
        x, wa, ba, wb = parts
        ys = [F.conv_transpose3d(x, wa, ba, stride=(2, 1, 2),
                                 padding=(1, 0, 1), output_padding=(1, 0, 1),
                                 groups=2, dilation=(1, 2, 1)),
              F.conv_transpose3d(x, wb, dilation=(2, 1, 1)),
              F.conv_transpose3d(x, self.wc, self.bc, stride=(3, 2, 1),
                                 padding=(0, 1, 1), output_padding=(2, 1, 0),
                                 groups=4),
              F.conv_transpose3d(x, self.wd, stride=(1, 2, 2))]
        # scaled down: the finite differences of the sum of a few thousand
        # products would otherwise lose too many digits in float32
        return 0.25 * torch.cat([y.flatten() for y in ys])


def exported():
    name = "ops_deconv3d"
    model = Deconv3d().eval()
    torch.manual_seed(3)
    x = torch.randn(numel(XS) + numel(WA) + numel(BA) + numel(WB))
    x.requires_grad_()
    y = model(x)
    y.sum().backward()
    path = os.path.join(OUT, name + ".onnx")
    torch.onnx.export(model, x.detach(), path, input_names=["x"],
                      output_names=["y"], opset_version=13)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    assert sum(n.op_type == "ConvTranspose" for n in m.graph.node) == 4
    write_refs(name, [("x", x.detach().numpy())],
               [("y", y.detach().numpy()), ("dx", x.grad.numpy())])


def onnx_deconv(x, w, b, strides, dil, group, op, out, upper):
    """ConvTranspose with output sizes out (spatial) by ONNX's rule; the
    bias is added to every output position, padded ones included."""
    full = F.conv_transpose3d(x, w, None, stride=strides, dilation=dil,
                              groups=group)
    pads = []
    for i in range(3):
        total = (strides[i] * (x.shape[2 + i] - 1) + op[i] +
                 (w.shape[2 + i] - 1) * dil[i] + 1 - out[i])
        begin = total // 2 if upper else total - total // 2
        end = total - begin
        pads = [-begin, op[i] - end] + pads  # F.pad: last dim first
    y = F.pad(full, pads)
    assert list(y.shape[2:]) == list(out)
    return y if b is None else y + b.reshape(1, -1, 1, 1, 1)


def hand_built():
    name = "ops_deconv3d_pads"
    gen = torch.Generator().manual_seed(19)
    xs = (1, 4, 3, 4, 2)
    x = torch.randn(xs, generator=gen).requires_grad_()
    cases = [  # weight shape, strides, dilations, group, output_padding,
        # bias, attributes
        ((4, 2, 3, 2, 2), (2, 1, 3), (1, 2, 1), 1, (1, 0, 0), True,
         {"auto_pad": "SAME_UPPER"}),
        ((4, 1, 2, 3, 2), (2, 3, 1), (1, 1, 2), 2, (0, 0, 0), False,
         {"auto_pad": "SAME_LOWER"}),
        ((4, 3, 2, 2, 3), (1, 2, 2), (1, 1, 1), 1, (0, 1, 0), True,
         {"output_shape": [5, 9, 6]}),
        ((4, 1, 3, 3, 2), (2, 2, 1), (1, 1, 1), 4, (0, 0, 0), False,
         {"output_shape": [1, 4, 6, 7, 3]}),
    ]
    nodes, inits, ys = [], [], []
    for k, (wshape, st, dl, grp, op, bias, attrs) in enumerate(cases):
        w = torch.randn(wshape, generator=gen) * 0.5
        b = torch.randn(wshape[1] * grp, generator=gen) if bias else None
        ins = ["x", "w%d" % k]
        inits.append(numpy_helper.from_array(w.numpy(), "w%d" % k))
        if bias:
            ins.append("b%d" % k)
            inits.append(numpy_helper.from_array(b.numpy(), "b%d" % k))
        if "output_shape" in attrs:
            out = attrs["output_shape"][-3:]
            upper = False
        else:
            out = [xs[2 + i] * st[i] for i in range(3)]
            upper = attrs["auto_pad"] == "SAME_UPPER"
        ys.append(onnx_deconv(x, w, b, st, dl, grp, op, out, upper))
        nodes.append(helper.make_node(
            "ConvTranspose", ins, ["y%d" % k], "deconv%d" % k,
            strides=list(st), dilations=list(dl), group=grp,
            output_padding=list(op), **attrs))
        nodes.append(helper.make_node("Reshape", ["y%d" % k, "flat"],
                                      ["f%d" % k]))
    # a 3-D Conv without kernel_shape (ONNX infers it from the weight)
    wc = torch.randn(3, 4, 2, 3, 2, generator=gen) * 0.5
    bc = torch.randn(3, generator=gen)
    inits += [numpy_helper.from_array(wc.numpy(), "wc"),
              numpy_helper.from_array(bc.numpy(), "bc")]
    nodes += [helper.make_node("Conv", ["x", "wc", "bc"], ["yc"], "conv3d",
                               strides=[1, 2, 1], pads=[1, 0, 0, 0, 1, 1]),
              helper.make_node("Reshape", ["yc", "flat"], ["fc"])]
    ys.append(F.conv3d(F.pad(x, (0, 1, 0, 1, 1, 0)), wc, bc,
                       stride=(1, 2, 1)))
    inits.append(numpy_helper.from_array(np.array([-1], np.int64), "flat"))
    nodes.append(helper.make_node("Concat", ["f%d" % k for k in
                                             range(len(cases))] + ["fc"],
                                  ["y"], axis=0))
    y = torch.cat([t.flatten() for t in ys])
    y.sum().backward()
    graph = helper.make_graph(
        nodes, "deconv3d_pads",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xs))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                       [y.numel()])], inits)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                           producer_name="kiln-tests"), name)
    write_refs(name, [("x", x.detach().numpy())],
               [("y", y.detach().numpy()), ("dx", x.grad.numpy())])


def hostile():
    big = (1 << 31) - 1
    cases = {  # x shape, w shape, attributes
        "stride0": ((1, 2, 3, 3, 3), (2, 1, 2, 2, 2), {"strides": [1, 0, 1]}),
        "stride_neg": ((1, 2, 3, 3, 3), (2, 1, 2, 2, 2),
                       {"strides": [-2, 1, 1]}),
        "huge": ((1, 2, 3, 3, 3), (2, 1, 2, 2, 2),
                 {"strides": [1, big, big]}),
        "channels": ((1, 3, 3, 3, 3), (2, 1, 3, 3, 3), {}),
        "rank": ((1, 2, 3, 3, 3), (2, 1, 3, 3), {}),
        "group": ((1, 4, 3, 3, 3), (4, 1, 3, 3, 3), {"group": 3}),
        "kernel": ((1, 2, 3, 3, 3), (2, 1, 3, 3, 3),
                   {"kernel_shape": [3, 2, 3]}),
        "out_neg": ((1, 2, 3, 3, 3), (2, 1, 2, 2, 2),
                    {"output_shape": [-4, 4, 4]}),
        "out_huge": ((1, 2, 3, 3, 3), (2, 1, 2, 2, 2),
                     {"output_shape": [4, 1 << 50, 4]}),
        "out_pad": ((1, 2, 3, 3, 3), (2, 1, 2, 2, 2),
                    {"output_padding": [big, big, big]}),
        "taps": ((1, 1, 4100, 1, 1), (1, 1, 4100, 1, 1), {}),
    }
    for name, (xs, ws, attrs) in cases.items():
        node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], "dc",
                                **attrs)
        graph = helper.make_graph(
            [node], "bad_deconv3d",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xs)),
             helper.make_tensor_value_info("w", TensorProto.FLOAT, list(ws))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        save_unchecked(helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 13)],
            producer_name="kiln-tests"), "bad_deconv3d_" + name)


def long_positions():
    """ops_long_positions: position tables past 4096 entries (built from
    two short tables while loading): Slice of x [20000] from 5 by step 3
    and from the end by step -7, and ArgMax with select_last_index (x
    reversed) of round(x), against torch."""
    name = "ops_long_positions"
    gen = torch.Generator().manual_seed(23)
    n = 20000
    x = torch.randn(n, generator=gen).requires_grad_()
    r = torch.round(x.detach())
    last = n - 1 - int(torch.argmax(torch.flip(r, [0])))
    y = torch.cat([x[5::3], torch.flip(x, [0])[0::7],
                   torch.tensor([float(last)])])
    y.sum().backward()
    ints = lambda nm, v: numpy_helper.from_array(np.array(v, np.int64), nm)
    nodes = [
        helper.make_node("Slice", ["x", "s0", "e0", "ax", "st0"], ["a"]),
        helper.make_node("Slice", ["x", "s1", "e1", "ax", "st1"], ["b"]),
        helper.make_node("Round", ["x"], ["r"]),
        helper.make_node("ArgMax", ["r"], ["i"], axis=0, keepdims=1,
                         select_last_index=1),
        helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Concat", ["a", "b", "f"], ["y"], axis=0)]
    inits = [ints("s0", [5]), ints("e0", [n]), ints("ax", [0]),
             ints("st0", [3]), ints("s1", [-1]), ints("e1", [-n - 1]),
             ints("st1", [-7])]
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                       [y.numel()])], inits)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                           producer_name="kiln-tests"), name)
    write_refs(name, [("x", x.detach().numpy())],
               [("y", y.detach().numpy()), ("dx", x.grad.numpy())])


def main():
    torch.set_num_threads(1)
    exported()
    hand_built()
    hostile()
    long_positions()


if __name__ == "__main__":
    main()
