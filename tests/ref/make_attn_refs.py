#!/usr/bin/python3
"""Writes the PyTorch reference files tests/test_attention.c reads
(tests/ref/attention/).

Run from anywhere: /usr/bin/python3 tests/ref/make_attn_refs.py
One file per case, <case>.txt: a line "params <op> <numbers...>", then
tensors in the format of tests/ref/make_op_refs.py, computed by torch in
float64 from float32 inputs.  The installed torch (1.13) predates
torch.nn.functional.scaled_dot_product_attention and rms_norm: sdpa() and
rms_norm_math() below are their documented definitions.

attention cases, "params attention causal scale mask" (scale 0: the
default 1/sqrt(D); mask 0 none, 1 f32 added, 2 i32 boolean):
    in q, k, v   [B,H,T,D] (or 3-D [B,T,D])
    in mask      (when mask != 0) broadcasting to the scores
    in dy        an upstream gradient shaped like the output
    out y        scaled_dot_product_attention(q, k, v, mask, causal, scale)
    out dq, dk, dv   the gradients of sum(y * dy)

rms_norm cases, "params rms_norm ndims eps weight" (eps -1: None):
    in x, [w], dy, v
    out y        rms_norm(x, x.shape[-ndims:], w, eps)
    out dx, [dw] the gradients of sum(y * dy)
    out gx, gdy  the gradients of sum(dx * v) w.r.t. x and dy (grad of grad)
"""
import os

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attention")
rng = np.random.default_rng(20261124)
CASES = {}


def U(shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def fmt(kind, name, a):
    dt = "i32" if a.dtype in (np.int32, np.int64, np.bool_) else "f32"
    head = f"{kind} {name} {dt} {a.ndim}" + "".join(f" {d}" for d in a.shape)
    vals = a.reshape(-1)
    body = " ".join(str(int(v)) if dt == "i32" else repr(float(v)) for v in vals)
    return head + "\n" + body + "\n"


def t64(a, grad=True):
    return torch.from_numpy(a.astype(np.float64)).requires_grad_(grad)


def sdpa(q, k, v, mask, causal, scale):
    """torch.nn.functional.scaled_dot_product_attention's definition (the
    math its documentation gives): the installed torch (1.13) predates the
    public function."""
    tq, tk = q.shape[-2], k.shape[-2]
    s = q @ k.transpose(-2, -1) * (scale if scale else 1 / q.shape[-1] ** 0.5)
    if causal:
        keep = torch.ones(tq, tk, dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    if mask is not None:
        if mask.dtype == torch.bool:
            s = s.masked_fill(~mask, float("-inf"))
        else:
            s = s + mask
    return torch.softmax(s, dim=-1) @ v


def rms_norm_math(x, ndims, w, eps):
    """torch.nn.functional.rms_norm's definition (torch >= 2.4): eps None is
    the dtype's epsilon, here float32's as Kiln computes in float32."""
    e = float(np.finfo(np.float32).eps) if eps < 0 else eps
    dims = tuple(range(x.dim() - ndims, x.dim()))
    y = x * torch.rsqrt((x * x).mean(dim=dims, keepdim=True) + e)
    return y * w if w is not None else y


def attention(name, q_shape, k_shape, v_shape, causal=False, scale=0.0,
              mask=None):
    q, k, v = U(q_shape), U(k_shape), U(v_shape)
    qt, kt, vt = t64(q), t64(k), t64(v)
    kind = 0
    mt = None
    if mask is not None:
        if mask.dtype == np.bool_:
            kind, mt = 2, torch.from_numpy(mask)
        else:
            kind, mt = 1, torch.from_numpy(mask.astype(np.float64))
    y = sdpa(qt, kt, vt, mt, causal, scale)
    dy = U(tuple(y.shape))
    dq, dk, dv = torch.autograd.grad(y, (qt, kt, vt), t64(dy, False))
    ins = [("q", q), ("k", k), ("v", v)]
    if mask is not None:
        ins.append(("mask", mask.astype(np.int32) if kind == 2 else mask))
    ins.append(("dy", dy))
    outs = [("y", y), ("dq", dq), ("dk", dk), ("dv", dv)]
    text = f"params attention {int(causal)} {scale!r} {kind}\n"
    text += "".join(fmt("in", n, a) for n, a in ins)
    text += "".join(fmt("out", n, t.detach().numpy()) for n, t in outs)
    assert name not in CASES, name
    CASES[name] = text


def rms_norm(name, shape, ndims, eps, weight):
    x = U(shape)
    xt = t64(x)
    norm = tuple(shape[len(shape) - ndims:])
    w = U(norm) if weight else None
    wt = t64(w) if weight else None
    y = rms_norm_math(xt, ndims, wt, eps)
    dy = U(shape)
    dyt = t64(dy)
    wrt = (xt, wt) if weight else (xt,)
    grads = torch.autograd.grad(y, wrt, dyt, create_graph=True)
    v = U(shape)
    gx, gdy = torch.autograd.grad(grads[0], (xt, dyt), t64(v, False))
    ins = [("x", x)] + ([("w", w)] if weight else []) + [("dy", dy), ("v", v)]
    outs = [("y", y), ("dx", grads[0])]
    if weight:
        outs.append(("dw", grads[1]))
    outs += [("gx", gx), ("gdy", gdy)]
    text = f"params rms_norm {ndims} {eps!r} {int(weight)}\n"
    text += "".join(fmt("in", n, a) for n, a in ins)
    text += "".join(fmt("out", n, t.detach().numpy()) for n, t in outs)
    assert name not in CASES, name
    CASES[name] = text


def padding_mask(b, tk, lengths):
    m = np.zeros((b, 1, 1, tk), dtype=np.bool_)
    for i, n in enumerate(lengths):
        m[i, 0, 0, :n] = True
    return m


def main():
    attention("attention_basic", (2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6))
    attention("attention_causal", (2, 2, 6, 8), (2, 2, 6, 8), (2, 2, 6, 8),
              causal=True)
    attention("attention_causal_wide", (1, 2, 4, 5), (1, 2, 7, 5),
              (1, 2, 7, 3), causal=True)
    attention("attention_causal_tall", (1, 2, 7, 5), (1, 2, 4, 5),
              (1, 2, 4, 3), causal=True)
    attention("attention_scale", (2, 1, 3, 5), (2, 1, 4, 5), (2, 1, 4, 5),
              scale=0.3)
    attention("attention_float_mask", (2, 2, 5, 3), (2, 2, 6, 3),
              (2, 2, 6, 4), mask=U((2, 1, 5, 6)))
    attention("attention_padding", (3, 2, 5, 4), (3, 2, 5, 4), (3, 2, 5, 4),
              mask=padding_mask(3, 5, [5, 2, 4]))
    attention("attention_padding_causal", (2, 2, 6, 4), (2, 2, 6, 4),
              (2, 2, 6, 4), causal=True, mask=padding_mask(2, 6, [6, 3]))
    attention("attention_3d", (2, 5, 4), (2, 6, 4), (2, 6, 3),
              mask=U((5, 6)))
    attention("attention_ones", (1, 1, 1, 1), (1, 1, 1, 1), (1, 1, 1, 1))
    attention("attention_long", (1, 2, 37, 16), (1, 2, 70, 16),
              (1, 2, 70, 16), causal=True)
    rms_norm("rms_norm_last", (3, 5, 8), 1, 1e-5, True)
    rms_norm("rms_norm_two", (2, 3, 4, 5), 2, -1.0, False)
    rms_norm("rms_norm_all", (7,), 1, 0.5, True)
    rms_norm("rms_norm_odd", (4, 33), 1, 1e-6, False)
    os.makedirs(OUT, exist_ok=True)
    for name, text in CASES.items():
        with open(os.path.join(OUT, name + ".txt"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
