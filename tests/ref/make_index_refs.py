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


def unary_case(name, op, params, x, fn, extra=()):
    """params <op> <params...>: y = fn(x) for the op of tests/test_seqops.c
    (extra inputs, such as a mask, go in before gy)."""
    tx = T(x, True)
    y = fn(tx)
    gy = U(tuple(y.shape))
    write(name, [op, *params], [("x", x), *extra, ("gy", gy)],
          [("y", y), ("dx", grads(y, gy, tx)[0])])


def with_zeros(a, at):
    a = a.copy()
    for i in at:
        a.flat[i] = 0.0
    return a


def seq_cases():
    unary_case("cumsum_axis1", "cumsum", [1], U((3, 5)),
               lambda t: torch.cumsum(t, 1))
    unary_case("cumsum_axis0", "cumsum", [0], U((4, 2, 3)),
               lambda t: torch.cumsum(t, 0))
    # prod: axes mask, keepdims
    unary_case("prod_axis1", "prod", [2, 0], U((3, 4), 0.5, 1.5),
               lambda t: torch.prod(t, 1))
    unary_case("prod_zeros", "prod", [2, 1],
               with_zeros(U((4, 3)), [0, 3, 5]),
               lambda t: torch.prod(t, 1, keepdim=True))
    unary_case("prod_all", "prod", [3, 0], U((2, 3), 0.5, 1.5),
               lambda t: torch.prod(t))
    x = rng.permutation(18).astype(np.float32).reshape(3, 6) / 10
    vals, idx = torch.topk(T(x), 3, 1)
    unary_case("topk", "topk", [3, 1], x, lambda t: torch.topk(t, 3, 1)[0])
    with open(os.path.join(OUT, "topk.txt"), "a") as f:
        f.write(fmt("out", "idx", idx.numpy()))
    mask = (rng.random((3, 4)) < 0.5).astype(np.float32)
    unary_case("masked_fill", "masked_fill", [-5.0], U((2, 3, 4)),
               lambda t: t.masked_fill(T(mask).bool(), -5.0),
               [("mask", mask)])
    imask = (rng.random((2, 1, 4)) < 0.5).astype(np.int32)
    unary_case("masked_fill_i32", "masked_fill", [2.5], U((2, 3, 4)),
               lambda t: t.masked_fill(T(imask).bool(), 2.5),
               [("mask", imask)])
    for k in (0, -1, 2):
        unary_case(f"tril_k{k}".replace("-", "m"), "tril", [k], U((2, 4, 5)),
                   lambda t: torch.tril(t, k))
        unary_case(f"triu_k{k}".replace("-", "m"), "triu", [k], U((2, 4, 5)),
                   lambda t: torch.triu(t, k))
    kinks = with_zeros(U((3, 4), -2, 2), [1, 6])
    unary_case("leaky_relu", "leaky_relu", [0.1], kinks,
               lambda t: F.leaky_relu(t, 0.1))
    big = kinks.copy()
    big.flat[2] = 100.0
    unary_case("elu", "elu", [1.5], big, lambda t: F.elu(t, 1.5))
    # bounds as float32 values, so that the inputs on them are on them
    lo, hi = float(np.float32(-0.3)), float(np.float32(0.4))
    edges = U((3, 4))
    edges.flat[0], edges.flat[5] = lo, hi
    unary_case("clamp", "clamp", [lo, hi], edges,
               lambda t: torch.clamp(t, lo, hi))
    ties = U((3, 4))
    ties.flat[1] = ties.flat[3] = -1.5
    unary_case("reduce_min", "reduce_min", [2, 0], ties,
               lambda t: torch.amin(t, 1))
    unary_case("logsumexp", "logsumexp", [2, 0], U((3, 5), -30, 30),
               lambda t: torch.logsumexp(t, 1))
    unary_case("logsumexp_keep", "logsumexp", [1, 1], U((3, 4)),
               lambda t: torch.logsumexp(t, 0, keepdim=True))
    # variance: axes mask, correction, keepdims
    unary_case("variance_unbiased", "variance", [2, 1, 0], U((3, 5)),
               lambda t: torch.var(t, 1))
    unary_case("variance_biased", "variance", [1, 0, 1], U((4, 3)),
               lambda t: torch.var(t, 0, unbiased=False, keepdim=True))
    unary_case("std", "std", [3, 1, 0], U((3, 4)), lambda t: torch.std(t))


def int_case(name, op, a, b, fn):
    """params <op>: y = fn(a, b) on int32 a and b (broadcast)."""
    y = fn(torch.from_numpy(a), torch.from_numpy(b))
    assert y.dtype == torch.int32
    write(name, [op], [("a", a), ("b", b)],
          [("y", y.numpy().astype(np.int64))])


def int_cases():
    """i32 arithmetic with broadcasting, negative operands of both signs
    and results that wrap around."""
    big = np.array([[2147483647], [-2147483647], [65536], [-7]], np.int32)
    a = np.concatenate([big, rng.integers(-50, 50, (4, 4))], 1).astype(np.int32)
    b = rng.integers(-9, 10, (5,)).astype(np.int32)
    b[b == 0] = 3
    b[0] = 65536
    int_case("int_add", "int_add", a, b, torch.add)
    int_case("int_sub", "int_sub", a, -b, torch.sub)
    int_case("int_mul", "int_mul", a, b, torch.mul)
    # every sign pair, and dividends that are multiples
    n = np.array([7, -7, 7, -7, 6, -6, 0, 2147483647, -2147483647], np.int32)
    d = np.array([2, 2, -2, -2, 3, -3, 5, -1, 2], np.int32)
    for op, fn in (("int_floor_div",
                    lambda x, y: torch.div(x, y, rounding_mode="floor")),
                   ("int_mod", torch.remainder)):
        int_case(op, op, np.stack([n, n - 1]), d, fn)


REDUCTIONS = {"mean": 0, "sum": 1, "none": 2}


def ce_case(name, reduction, ignore, smoothing, x, labels):
    """params ce <reduction 0 mean, 1 sum, 2 none> <ignore_index, or
    -2147483648 for none> <label_smoothing>: F.cross_entropy."""
    tx = T(x, True)
    kw = {} if ignore is None else {"ignore_index": ignore}
    y = F.cross_entropy(tx, T(labels), reduction=reduction,
                        label_smoothing=smoothing, **kw)
    gy = U(tuple(y.shape))
    write(name, ["ce", REDUCTIONS[reduction],
                 -2147483648 if ignore is None else ignore, smoothing],
          [("x", x), ("idx", labels), ("gy", gy)],
          [("y", y), ("dx", grads(y, gy, tx)[0])])


def ce_cases():
    lab = np.array([2, -100, 0, 4, -100, 1], np.int32)
    x = U((6, 5), -3, 3)
    ce_case("ce_ignore_mean", "mean", -100, 0.0, x, lab)
    ce_case("ce_ignore_sum", "sum", -100, 0.0, x, lab)
    ce_case("ce_ignore_none", "none", -100, 0.0, x, lab)
    ce_case("ce_smooth_ignore_mean", "mean", -100, 0.1, x, lab)
    ce_case("ce_smooth_ignore_none", "none", -100, 0.25, x, lab)
    pad = np.array([0, 3, 0, 2, 1, 0, 4], np.int32)  # class 0 as padding
    ce_case("ce_ignore0_smooth_sum", "sum", 0, 0.2, U((7, 5), -3, 3), pad)
    ce_case("ce_smooth_mean", "mean", None, 0.3, x, I((6,), 5))
    ce_case("ce_none", "none", None, 0.0, x, I((6,), 5))
    ce_case("ce_mean", "mean", None, 0.0, x, I((6,), 5))


def rnn_case(name, cell, x, h, c, hid, bias=True):
    """params <lstm_cell|gru_cell> <has bias>: one step of torch.nn.LSTMCell
    or GRUCell with the weights given; gradients of sum(h2 gh) (+ sum(c2
    gc)) for every input and weight."""
    n = 4 if cell == "lstm_cell" else 3
    w_ih, w_hh = U((n * hid, x.shape[1])), U((n * hid, hid))
    ins = [("x", x), ("h", h)] + ([("c", c)] if c is not None else [])
    ins += [("w_ih", w_ih), ("w_hh", w_hh)]
    if bias:
        ins += [("b_ih", U((n * hid,))), ("b_hh", U((n * hid,)))]
    ts = {k: T(a, True) for k, a in ins}
    m = (torch.nn.LSTMCell if c is not None else torch.nn.GRUCell)(
        x.shape[1], hid, bias=bias).double()
    with torch.no_grad():
        for k in ("w_ih", "w_hh", "b_ih", "b_hh"):
            if k in ts:
                delattr(m, "weight_" + k[2:] if k[0] == "w" else "bias_" + k[2:])
    for k in ("w_ih", "w_hh", "b_ih", "b_hh"):
        if k in ts:
            setattr(m, ("weight_" if k[0] == "w" else "bias_") + k[2:], ts[k])
    if c is not None:
        h2, c2 = m(ts["x"], (ts["h"], ts["c"]))
        gh, gc = U(h2.shape), U(c2.shape)
        loss = (h2 * T(gh)).sum() + (c2 * T(gc)).sum()
        outs, feeds = [("h2", h2), ("c2", c2)], [("gh", gh), ("gc", gc)]
    else:
        h2 = m(ts["x"], ts["h"])
        gh = U(h2.shape)
        loss = (h2 * T(gh)).sum()
        outs, feeds = [("h2", h2)], [("gh", gh)]
    ds = torch.autograd.grad(loss, list(ts.values()))
    outs += [("d" + k, d) for k, d in zip(ts, ds)]
    write(name, [cell, int(bias)], ins + feeds, outs)


def rnn_cases():
    rnn_case("lstm_cell", "lstm_cell", U((3, 5)), U((3, 4)), U((3, 4)), 4)
    rnn_case("lstm_cell_nobias", "lstm_cell", U((2, 3)), U((2, 6)),
             U((2, 6)), 6, bias=False)
    rnn_case("gru_cell", "gru_cell", U((3, 5)), U((3, 4)), None, 4)
    rnn_case("gru_cell_nobias", "gru_cell", U((1, 2)), U((1, 3)), None, 3,
             bias=False)


if __name__ == "__main__":
    index_cases()
    seq_cases()
    int_cases()
    ce_cases()
    rnn_cases()
