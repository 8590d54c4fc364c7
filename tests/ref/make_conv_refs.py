#!/usr/bin/python3
"""Writes the PyTorch reference files tests/test_conv.c reads (tests/ref/conv/).

Run from anywhere: /usr/bin/python3 tests/ref/make_conv_refs.py
Inputs are small random float32 arrays from a fixed numpy seed; every
expected value is computed by torch in float64 from those exact values.
One file per case, <case>.txt:

    params <op> <nd> <stride0> <stride1> <pad0> <pad1> <dil0> <dil1>
           <outpad0> <outpad1> <groups> <same> <bias> <relu>  (one line)
    in x f32 <ndim> <dims...>          then its values, one line
    in w ...   [in b ...]   in gy ...  (gy: the gradient fed back to y)
    out y ...  out dx ...  out dw ...  [out db ...]

op is conv (conv1d / conv2d by nd), transpose (conv_transpose2d) or wgrad
(torch.nn.grad.conv2d_weight of x and gy, written as y).
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conv")
rng = np.random.default_rng(20261124)


def U(shape):
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def T(a, grad=False):
    return torch.from_numpy(a.astype(np.float64)).requires_grad_(grad)


def fmt(kind, name, a):
    head = f"{kind} {name} f32 {a.ndim}" + "".join(f" {d}" for d in a.shape)
    return head + "\n" + " ".join(repr(float(v)) for v in a.reshape(-1)) + "\n"


def pair(v, nd):
    v = v if isinstance(v, tuple) else (v,) * nd
    return tuple(v) + (0,) * (2 - len(v))


def write(name, params, ins, outs):
    with open(os.path.join(OUT, name + ".txt"), "w") as f:
        f.write("params " + " ".join(str(p) for p in params) + "\n")
        for k, a in ins:
            f.write(fmt("in", k, a))
        for k, a in outs:
            f.write(fmt("out", k, np.asarray(a, dtype=np.float64)))


def conv_case(name, x, w, stride=1, pad=0, dil=1, groups=1, same=False,
              bias=True, op="conv", outpad=0, relu=False):
    nd = x.ndim - 2
    b = U((w.shape[1] * groups if op == "transpose" else w.shape[0],))
    tx, tw, tb = T(x, True), T(w, True), T(b, True)
    tbias = tb if bias else None
    if op == "transpose":
        y = F.conv_transpose2d(tx, tw, tbias, stride, pad, outpad, groups,
                               dil)
    else:
        fn = F.conv1d if nd == 1 else F.conv2d
        y = fn(tx, tw, tbias, stride, "same" if same else pad, dil, groups)
    if relu:
        y = F.relu(y)
    gy = U(tuple(y.shape))
    y.backward(T(gy))
    params = [op, nd, *pair(stride, nd), *pair(pad, nd), *pair(dil, nd),
              *pair(outpad, nd), groups, int(same), int(bias), int(relu)]
    ins = [("x", x), ("w", w)] + ([("b", b)] if bias else []) + [("gy", gy)]
    outs = [("y", y.detach().numpy()), ("dx", tx.grad.numpy()),
            ("dw", tw.grad.numpy())]
    if bias:
        outs.append(("db", tb.grad.numpy()))
    write(name, params, ins, outs)


def wgrad_case(name, x, wshape, stride=1, pad=0, dil=1, groups=1):
    out = F.conv2d(T(x), T(U(wshape)), None, stride, pad, dil, groups)
    gy = U(tuple(out.shape))
    dw = torch.nn.grad.conv2d_weight(T(x), wshape, T(gy), stride, pad, dil,
                                     groups)
    params = ["wgrad", 2, *pair(stride, 2), *pair(pad, 2), *pair(dil, 2),
              0, 0, groups, 0, 0, 0]
    write(name, params, [("x", x), ("gy", gy)], [("y", dw.numpy())])


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".txt"):
            os.remove(os.path.join(OUT, f))
    conv_case("conv_basic", U((2, 3, 7, 6)), U((4, 3, 3, 3)))
    conv_case("conv_stride2_pad1", U((2, 3, 9, 8)), U((5, 3, 3, 3)),
              stride=2, pad=1)
    conv_case("conv_same", U((1, 2, 6, 7)), U((3, 2, 4, 3)), same=True,
              bias=False)
    conv_case("conv_dilation2", U((2, 2, 9, 9)), U((3, 2, 3, 3)), dil=2,
              pad=1)
    conv_case("conv_groups2", U((2, 4, 6, 6)), U((6, 2, 3, 3)), groups=2,
              stride=(2, 1))
    conv_case("conv_depthwise", U((2, 4, 7, 7)), U((4, 1, 3, 3)), groups=4,
              pad=1)
    conv_case("conv_nonsquare", U((1, 3, 5, 9)), U((2, 3, 2, 4)),
              stride=(1, 2), pad=(1, 0))
    conv_case("conv_1x1", U((2, 5, 4, 4)), U((3, 5, 1, 1)))
    conv_case("conv_mnist", U((2, 1, 12, 12)), U((4, 1, 5, 5)), pad=2)
    conv_case("conv_relu", U((2, 3, 6, 5)), U((4, 3, 3, 3)), pad=1,
              relu=True)
    conv_case("conv_relu_strided", U((2, 2, 7, 7)), U((3, 2, 3, 3)),
              stride=2, relu=True)
    conv_case("conv1d", U((2, 3, 11)), U((4, 3, 3)), stride=2, pad=1)
    conv_case("conv1d_same_dilation2", U((2, 2, 10)), U((3, 2, 3)), dil=2,
              same=True)
    conv_case("conv_transpose", U((2, 3, 4, 5)), U((3, 2, 3, 3)), stride=2,
              pad=1, op="transpose", outpad=1)
    conv_case("conv_transpose_groups2", U((1, 4, 3, 3)), U((4, 3, 2, 2)),
              stride=2, groups=2, op="transpose", bias=False)
    conv_case("conv_transpose_dilation2", U((2, 2, 4, 4)), U((2, 3, 3, 3)),
              stride=(2, 3), dil=2, pad=(2, 1), outpad=(1, 2),
              op="transpose")
    wgrad_case("conv_weight_grad", U((2, 4, 7, 6)), (6, 2, 3, 3), stride=2,
               pad=1, groups=2)
    print(f"wrote the cases to {OUT}")


if __name__ == "__main__":
    main()
