#!/usr/bin/python3
"""Writes the PyTorch reference files tests/test_pool.c reads (tests/ref/pool/).

Run from anywhere: /usr/bin/python3 tests/ref/make_pool_refs.py
One file per case, <case>.txt: a line "params <op> <numbers...>" giving the
builder and its arguments (see PARAMS below), then tensors in the format of
tests/ref/make_op_refs.py:

    in a f32 ...   the input x (float32 values)
    in b f32 ...   dy, an upstream gradient shaped like the output
    in c f32 ...   (max pooling) v, shaped like x
    out y ...      op(x), computed by torch in float64
    out dx ...     the gradient of sum(y * dy) with respect to x
    out gg ...     (max pooling) the gradient of sum(dx * v) with respect to
                   dy: max pooling's grad-of-grad

PARAMS: max_pool2d k0 k1 s0 s1 p0 p1 d0 d1 ceil; avg_pool2d k0 k1 s0 s1 p0
p1 ceil count_include_pad; adaptive_avg_pool2d oh ow; reflect / replicate
n p0 .. p(n-1) (F.pad order); nearest / bilinear size_h size_w scale_h
scale_w align_corners (size 0: the scales are used).
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pool")
rng = np.random.default_rng(20261124)
CASES = {}


def U(shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def fmt(kind, name, a):
    head = f"{kind} {name} f32 {a.ndim}" + "".join(f" {d}" for d in a.shape)
    return head + "\n" + " ".join(repr(float(v)) for v in a.reshape(-1)) + "\n"


def case(name, params, x, fn, double_backward=False):
    """fn: float64 torch tensor -> tensor; params: the numbers after the op."""
    xt = torch.from_numpy(x.astype(np.float64)).requires_grad_(True)
    y = fn(xt)
    dy = U(tuple(y.shape))
    dyt = torch.from_numpy(dy.astype(np.float64)).requires_grad_(True)
    (dx,) = torch.autograd.grad(y, xt, dyt, create_graph=double_backward)
    ins = [x, dy]
    outs = [("y", y), ("dx", dx)]
    if double_backward:
        v = U(x.shape)
        (gg,) = torch.autograd.grad(dx, dyt, torch.from_numpy(v.astype(np.float64)))
        ins.append(v)
        outs.append(("gg", gg))
    assert name not in CASES, name
    text = "params " + " ".join(str(p) for p in params) + "\n"
    text += "".join(fmt("in", "abc"[i], a) for i, a in enumerate(ins))
    text += "".join(fmt("out", n, t.detach().numpy()) for n, t in outs)
    CASES[name] = text


def max_case(name, x, k, s=None, p=(0, 0), d=(1, 1), ceil=False):
    s = s or k
    case(name, ["max_pool2d", *k, *s, *p, *d, int(ceil)], x,
         lambda t: F.max_pool2d(t, k, s, p, d, ceil_mode=ceil), True)


def avg_case(name, x, k, s=None, p=(0, 0), ceil=False, cip=True):
    s = s or k
    case(name, ["avg_pool2d", *k, *s, *p, int(ceil), int(cip)], x,
         lambda t: F.avg_pool2d(t, k, s, p, ceil_mode=ceil, count_include_pad=cip))


# ------------------------------------------------------------ max pooling
max_case("max_pool2d_basic", U((2, 3, 6, 7)), (2, 2))
max_case("max_pool2d_k3s2p1", U((2, 2, 7, 6)), (3, 3), (2, 2), (1, 1))
max_case("max_pool2d_ceil", U((1, 2, 7, 7)), (3, 3), (2, 2), ceil=True)
max_case("max_pool2d_ceil_pad", U((1, 2, 6, 5)), (3, 2), (2, 2), (1, 1), ceil=True)
max_case("max_pool2d_dilation", U((1, 2, 9, 8)), (3, 3), (1, 1), (1, 1), (2, 2))
max_case("max_pool2d_rect", U((2, 1, 6, 9)), (2, 3), (1, 2), (1, 0), (1, 2))
ties = rng.integers(-1, 2, size=(1, 2, 6, 6)).astype(np.float32)
max_case("max_pool2d_ties", ties, (2, 2))
max_case("max_pool2d_ties_overlap", ties, (3, 3), (1, 1), (1, 1))
special = U((1, 1, 4, 6))
special[0, 0, 0, 1] = np.nan
special[0, 0, 1, 0] = np.nan  # two NaNs in one window: the last wins
special[0, 0, 2:4, 0:2] = -np.inf
special[0, 0, 2, 3] = np.inf
max_case("max_pool2d_nan_inf", special, (2, 2))
max_case("max_pool2d_unbatched", U((3, 5, 5)), (2, 2), (1, 1))

# ------------------------------------------------------------ average pooling
avg_case("avg_pool2d_basic", U((2, 3, 6, 7)), (2, 2))
for cip in (True, False):
    sfx = "incl" if cip else "excl"
    avg_case(f"avg_pool2d_pad_{sfx}", U((2, 2, 7, 6)), (3, 3), (2, 2), (1, 1), cip=cip)
    avg_case(f"avg_pool2d_ceil_{sfx}", U((1, 2, 7, 6)), (3, 3), (2, 2), (1, 1),
             ceil=True, cip=cip)
    avg_case(f"avg_pool2d_rect_{sfx}", U((1, 2, 5, 6)), (3, 2), (1, 2), (1, 1),
             ceil=True, cip=cip)
avg_case("avg_pool2d_unbatched", U((3, 5, 5)), (2, 2), (1, 1))

# ------------------------------------------------------------ adaptive
for name, shape, size in [("global", (2, 3, 5, 7), (1, 1)),
                          ("nondiv", (2, 2, 7, 5), (3, 4)),
                          ("up", (1, 2, 3, 2), (5, 4)),
                          ("unbatched", (3, 10, 6), (4, 4))]:
    case(f"adaptive_avg_pool2d_{name}", ["adaptive_avg_pool2d", *size], U(shape),
         lambda t, s=size: F.adaptive_avg_pool2d(t, s))

# ------------------------------------------------------------ padding
for mode in ("reflect", "replicate"):
    for name, shape, pad in [("2d", (2, 2, 4, 5), (1, 2, 3, 0)),
                             ("2d_chw", (2, 4, 4), (3, 3, 1, 2)),
                             ("1d", (2, 3, 5), (2, 4)),
                             ("1d_cw", (3, 6), (0, 5))]:
        if mode == "replicate" and name == "2d":
            pad = (2, 7, 4, 1)  # replicate pads past the input's size
        case(f"pad_{mode}_{name}", [mode, len(pad), *pad], U(shape),
             lambda t, p=pad, m=mode: F.pad(t, p, mode=m))

# ------------------------------------------------------------ upsampling
def up_case(name, mode, shape, size=None, scale=None, align=False):
    kw = {} if mode == "nearest" else {"align_corners": align}
    sz = size or (0, 0)
    sc = scale or (0.0, 0.0)
    case(f"upsample_{name}", [mode, *sz, *sc, int(align)], U(shape),
         lambda t: F.interpolate(t, size=size, scale_factor=scale, mode=mode, **kw))


up_case("nearest_size", "nearest", (1, 2, 3, 4), size=(5, 7))
up_case("nearest_down", "nearest", (1, 2, 7, 6), size=(3, 4))
up_case("nearest_scale", "nearest", (1, 2, 3, 4), scale=(1.5, 2.3))
up_case("nearest_x2", "nearest", (2, 1, 3, 4), scale=(2.0, 2.0))
for align in (False, True):
    sfx = "ac" if align else "hp"
    up_case(f"bilinear_size_{sfx}", "bilinear", (1, 2, 3, 4), size=(5, 7), align=align)
    up_case(f"bilinear_down_{sfx}", "bilinear", (1, 2, 7, 6), size=(3, 4), align=align)
    up_case(f"bilinear_one_{sfx}", "bilinear", (1, 1, 3, 4), size=(1, 6), align=align)
up_case("bilinear_scale_hp", "bilinear", (1, 2, 4, 5), scale=(1.7, 0.6))


def write_all():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".txt"):
            os.remove(os.path.join(OUT, f))
    for name, text in sorted(CASES.items()):
        with open(os.path.join(OUT, name + ".txt"), "w") as f:
            f.write(text)
    print(f"wrote {len(CASES)} cases to {OUT}")


write_all()
