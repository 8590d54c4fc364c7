#!/usr/bin/python3
"""Writes the PyTorch reference files of issue 12's indexing and sequence
ops (tests/ref/index/), read by tests/test_index.c and tests/test_seqops.c.

Run from anywhere: /usr/bin/python3 tests/ref/make_index_refs.py
Inputs are small random float32 arrays (and int32 indices) from a fixed
numpy seed; every expected value is computed by torch in float64 from
those exact values.  One file per case, <case>.txt:

    params <op> <int>...            (one line: the op and its settings)
    in x f32 <ndim> <dims...>       then its values, one line
    in idx i32 ...   [in src ...]   in gy ...  (gy: the gradient fed to y)
    out y ...  out dx ...  [out dsrc ...]

Each file's params line is documented by the case function writing it.
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "index")
rng = np.random.default_rng(20261124)


def U(shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def I(shape, hi):
    return rng.integers(0, hi, size=shape).astype(np.int32)


def T(a, grad=False):
    if a.dtype == np.int32:
        return torch.from_numpy(a.astype(np.int64))
    return torch.from_numpy(a.astype(np.float64)).requires_grad_(grad)


def fmt(kind, name, a):
    dt = "i32" if a.dtype in (np.int32, np.int64) else "f32"
    head = f"{kind} {name} {dt} {a.ndim}" + "".join(f" {d}" for d in a.shape)
    vals = (str(int(v)) if dt == "i32" else repr(float(v))
            for v in a.reshape(-1))
    return head + "\n" + " ".join(vals) + "\n"


def write(name, params, ins, outs):
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, name + ".txt"), "w") as f:
        f.write("params " + " ".join(str(p) for p in params) + "\n")
        for k, a in ins:
            f.write(fmt("in", k, a))
        for k, a in outs:
            a = a.detach().numpy() if torch.is_tensor(a) else a
            if a.dtype != np.int64:
                a = np.asarray(a, dtype=np.float64)
            f.write(fmt("out", k, a))


def grads(y, gy, *ts):
    """Gradients of sum(y * gy) for the tensors ts (zeros if unused)."""
    g = torch.autograd.grad(y, ts, T(gy), allow_unused=True)
    return [torch.zeros_like(t) if d is None else d for d, t in zip(g, ts)]


def index_case(name, op, axis, x, idx, src=None):
    """params <op> <axis>: op is index_select, index_add, gather,
    scatter_add or embedding (x the table, idx the ids)."""
    tx, ti = T(x, True), T(idx)
    ts = T(src, True) if src is not None else None
    if op == "index_select":
        y = torch.index_select(tx, axis, ti)
    elif op == "index_add":
        y = tx.index_add(axis, ti, ts)
    elif op == "gather":
        y = torch.gather(tx, axis, ti)
    elif op == "scatter_add":
        y = tx.scatter_add(axis, ti, ts)
    else:
        y = F.embedding(ti, tx)
    gy = U(tuple(y.shape))
    ins = [("x", x), ("idx", idx)] + ([("src", src)] if ts is not None else [])
    outs = [("y", y)]
    if ts is not None and op == "scatter_add" and ti.shape != ts.shape:
        # torch 1.13's scatter_add backward returns src's gradient at the
        # indices' shape and fails; it is gather(gy) there, zero beyond
        dx = grads(y, gy, tx)[0]
        ds = torch.zeros_like(ts)
        part = torch.gather(T(gy), axis, ti)
        ds[tuple(slice(0, d) for d in part.shape)] = part
        outs += [("dx", dx), ("dsrc", ds)]
    elif ts is not None:
        dx, ds = grads(y, gy, tx, ts)
        outs += [("dx", dx), ("dsrc", ds)]
    else:
        outs.append(("dx", grads(y, gy, tx)[0]))
    write(name, [op, axis], ins + [("gy", gy)], outs)


def index_cases():
    rep = np.array([3, 0, 3, 4], dtype=np.int32)  # a repeated index
    index_case("index_select_rows", "index_select", 0, U((5, 3)), rep)
    index_case("index_select_axis1", "index_select", 1, U((2, 5, 3)),
               np.array([4, 4, 1], dtype=np.int32))
    index_case("index_select_last", "index_select", 2, U((2, 3, 4)),
               np.array([3, 0], dtype=np.int32))
    index_case("index_add_rows", "index_add", 0, U((5, 3)), rep, U((4, 3)))
    index_case("index_add_axis1", "index_add", 1, U((2, 5, 3)),
               np.array([1, 1, 4], dtype=np.int32), U((2, 3, 3)))
    index_case("gather_axis1", "gather", 1, U((3, 4)), I((3, 5), 4))
    index_case("gather_axis0", "gather", 0, U((4, 3)), I((6, 3), 4))
    index_case("gather_smaller", "gather", 1, U((4, 5, 3)), I((2, 3, 2), 5))
    index_case("scatter_add_axis1", "scatter_add", 1, U((3, 5)),
               I((3, 6), 5), U((3, 6)))
    index_case("scatter_add_smaller", "scatter_add", 0, U((4, 3, 2)),
               I((3, 2, 2), 4), U((5, 3, 2)))
    index_case("embedding", "embedding", 0, U((7, 4)), I((2, 3), 7))


if __name__ == "__main__":
    index_cases()
