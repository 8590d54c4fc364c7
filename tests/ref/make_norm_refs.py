#!/usr/bin/python3
"""Writes the PyTorch reference files tests/test_norm.c reads (tests/ref/norm/).

Run from anywhere: /usr/bin/python3 tests/ref/make_norm_refs.py
Inputs are small random float32 arrays from a fixed numpy seed; expected
values come from torch in float64 on those exact float32 values.  One file
per case, <case>.txt: a line "attr <key> <value> ..." (the layer's
arguments), then tensors as in tests/ref/make_op_refs.py:

    in <name> f32 <ndim> <d0> <d1> ...
    <values, space separated, row-major>
    out <name> f32 <ndim> ...
    <values>

Batch norm cases (bn_*) hold x, x2, weight, bias (when affine), running_mean,
running_var and dy, then: y, dx, dweight, dbias for a training step on x
(gradients of sum(y * dy)), running_mean1/var1 after it, y2 and
running_mean2/var2 after a second training step on x2, and ye and dxe in
evaluation mode on x after both.  Layer, group and instance norm cases
(ln_*, gn_*, in_*) hold x, weight, bias (when affine) and dy, then y, dx,
dweight, dbias.  dropout_scale holds x and PyTorch's float32 dropout of
it (attr p).
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "norm")
rng = np.random.default_rng(20261124)


def U(shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def T(a, grad=False):
    return torch.tensor(a.astype(np.float64), requires_grad=grad)


def fmt(kind, name, a):
    a = np.asarray(a, dtype=np.float64)
    head = f"{kind} {name} f32 {a.ndim}" + "".join(f" {d}" for d in a.shape)
    return head + "\n" + " ".join(repr(float(v)) for v in a.reshape(-1)) + "\n"


def write(name, attrs, ins, outs):
    with open(os.path.join(OUT, name + ".txt"), "w") as f:
        f.write("attr" + "".join(f" {k} {v}" for k, v in attrs.items()) + "\n")
        for k, v in ins:
            f.write(fmt("in", k, v))
        for k, v in outs:
            f.write(fmt("out", k, v))


def grads(y, dy, xs):
    gs = torch.autograd.grad(y, xs, grad_outputs=T(dy))
    return [g.detach().numpy() for g in gs]


def batch_norm_case(name, shape, affine, momentum, eps, offset=0.0):
    c = shape[1]
    x = U(shape) + np.float32(offset)
    x2 = (U(shape, -1.0, 3.0) + np.float32(offset)).astype(np.float32)
    w, b = U((c,), 0.5, 1.5), U((c,))
    rm, rv = U((c,), -0.5, 0.5), U((c,), 0.5, 2.0)
    dy = U(shape)
    trm, trv = T(rm), T(rv)
    tx, tw, tb = T(x, True), T(w, True), T(b, True)
    y = F.batch_norm(tx, trm, trv, tw if affine else None,
                     tb if affine else None, True, momentum, eps)
    dx, dw, db = grads(y, dy, [tx, tw, tb]) if affine else (
        grads(y, dy, [tx]) + [None, None])
    rm1, rv1 = trm.numpy().copy(), trv.numpy().copy()
    y2 = F.batch_norm(T(x2), trm, trv, T(w) if affine else None,
                      T(b) if affine else None, True, momentum, eps)
    tx = T(x, True)
    ye = F.batch_norm(tx, trm, trv, T(w) if affine else None,
                      T(b) if affine else None, False, momentum, eps)
    (dxe,) = grads(ye, dy, [tx])
    ins = [("x", x), ("x2", x2)]
    if affine:
        ins += [("weight", w), ("bias", b)]
    ins += [("running_mean", rm), ("running_var", rv), ("dy", dy)]
    outs = [("y", y.detach().numpy()), ("dx", dx)]
    if affine:
        outs += [("dweight", dw), ("dbias", db)]
    outs += [("running_mean1", rm1), ("running_var1", rv1),
             ("y2", y2.numpy()), ("running_mean2", trm.numpy()),
             ("running_var2", trv.numpy()), ("ye", ye.detach().numpy()),
             ("dxe", dxe)]
    write(name, {"affine": int(affine), "momentum": momentum, "eps": eps},
          ins, outs)


def per_sample_case(name, shape, affine, eps, fn, pshape, **attrs):
    x, dy = U(shape), U(shape)
    w, b = U(pshape, 0.5, 1.5), U(pshape)
    tx, tw, tb = T(x, True), T(w, True), T(b, True)
    y = fn(tx, tw if affine else None, tb if affine else None)
    ins = [("x", x)] + ([("weight", w), ("bias", b)] if affine else [])
    ins += [("dy", dy)]
    outs = [("y", y.detach().numpy())]
    if affine:
        dx, dw, db = grads(y, dy, [tx, tw, tb])
        outs += [("dx", dx), ("dweight", dw), ("dbias", db)]
    else:
        outs += [("dx", grads(y, dy, [tx])[0])]
    write(name, dict(affine=int(affine), eps=eps, **attrs), ins, outs)


def layer_norm_case(name, shape, k, affine, eps=1e-5):
    ns = tuple(shape[len(shape) - k:])
    per_sample_case(name, shape, affine, eps,
                    lambda x, w, b: F.layer_norm(x, ns, w, b, eps), ns,
                    dims=k)


def group_norm_case(name, shape, groups, affine, eps=1e-5):
    per_sample_case(name, shape, affine, eps,
                    lambda x, w, b: F.group_norm(x, groups, w, b, eps),
                    (shape[1],), groups=groups)


def instance_norm_case(name, shape, affine, eps=1e-5):
    per_sample_case(name, shape, affine, eps,
                    lambda x, w, b: F.instance_norm(x, weight=w, bias=b,
                                                    eps=eps), (shape[1],))


def dropout_case(name, shape, p):
    """PyTorch's float32 dropout of x: its kept values fix the scaling (the
    mask itself is torch's generator's, not comparable)."""
    x = U(shape)
    torch.manual_seed(0)
    y = F.dropout(torch.from_numpy(x), p, training=True)
    write(name, {"p": p}, [("x", x)], [("y", y.numpy())])


def main():
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".txt"):
            os.remove(os.path.join(OUT, f))
    batch_norm_case("bn_2d", (4, 3), True, 0.1, 1e-5)
    batch_norm_case("bn_4d", (2, 3, 4, 5), True, 0.1, 1e-5)
    batch_norm_case("bn_4d_plain", (3, 2, 3, 3), False, 0.3, 1e-3)
    batch_norm_case("bn_c1", (5, 1, 3, 3), True, 0.1, 1e-5)
    batch_norm_case("bn_hw1", (6, 4, 1, 1), True, 0.2, 1e-5)
    batch_norm_case("bn_3d", (3, 2, 5), True, 0.1, 1e-5)
    batch_norm_case("bn_offset", (8, 3, 4, 4), True, 0.1, 1e-5, offset=1e4)
    layer_norm_case("ln_2d", (4, 5), 1, True)
    layer_norm_case("ln_3d_two", (2, 3, 4), 2, True)
    layer_norm_case("ln_plain", (3, 6), 1, False, 1e-3)
    layer_norm_case("ln_one", (3, 1), 1, True)
    group_norm_case("gn_4d", (2, 6, 3, 3), 3, True)
    group_norm_case("gn_3d", (3, 4, 5), 2, True)
    group_norm_case("gn_c1", (4, 1, 2, 2), 1, True)
    group_norm_case("gn_hw1", (3, 4, 1, 1), 2, False)
    instance_norm_case("in_4d", (2, 3, 4, 4), True)
    instance_norm_case("in_c1", (3, 1, 5, 5), False)
    instance_norm_case("in_3d", (2, 3, 7), True)
    dropout_case("dropout_scale", (64, 33), 0.3)


if __name__ == "__main__":
    main()
