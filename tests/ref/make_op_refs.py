#!/usr/bin/python3
"""Writes the PyTorch reference files tests/test_ops.c reads (tests/ref/ops/).

Run from anywhere: /usr/bin/python3 tests/ref/make_op_refs.py
Inputs are small random float32 (or int32) arrays from a fixed numpy seed;
each expected output is computed by torch in float64 from those exact float32
values.  One file per case, <case>.txt, holding a sequence of tensors:

    in <name> <f32|i32> <ndim> <d0> <d1> ...
    <values, space separated, row-major; empty line for an empty tensor>
    ...
    out y <f32|i32> <ndim> <d0> ...
    <values>

The inputs come first in the order the C builder takes them; the op and its
attributes (axes, perm, trans flags, ...) are in the C case table, keyed by
the case name.
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops")
rng = np.random.default_rng(20240611)
CASES = {}


def U(shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def away(shape, lo=0.2, hi=2.0):
    """Values with |x| in [lo, hi) and a random sign (no kinks, no ties)."""
    mag = rng.uniform(lo, hi, size=shape)
    sign = np.where(rng.uniform(size=shape) < 0.5, -1.0, 1.0)
    return (mag * sign).astype(np.float32)


def ints(shape, lo, hi):
    return rng.integers(lo, hi, size=shape).astype(np.int32)


def T(a):
    if a.dtype == np.int32:
        return torch.from_numpy(a.astype(np.int64))
    return torch.from_numpy(a.astype(np.float64))


def case(name, inputs, fn):
    """inputs: list of numpy arrays; fn: torch float64 tensors -> tensor."""
    out = fn(*[T(a) for a in inputs])
    if out.dtype in (torch.int64, torch.int32):
        out = out.numpy().astype(np.int32)
    else:
        out = out.to(torch.float64).numpy()
    assert name not in CASES, name
    CASES[name] = (inputs, out)


def fmt_tensor(kind, name, a):
    dt = "i32" if a.dtype == np.int32 else "f32"
    head = f"{kind} {name} {dt} {a.ndim}" + "".join(f" {d}" for d in a.shape)
    if a.dtype == np.int32:
        vals = " ".join(str(int(v)) for v in a.reshape(-1))
    elif a.dtype == np.float32:
        vals = " ".join(repr(float(v)) for v in a.reshape(-1))
    else:
        vals = " ".join(repr(float(v)) for v in a.reshape(-1))
    return head + "\n" + vals + "\n"


def write_all():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".txt"):
            os.remove(os.path.join(OUT, f))
    for name, (inputs, out) in sorted(CASES.items()):
        with open(os.path.join(OUT, name + ".txt"), "w") as f:
            for i, a in enumerate(inputs):
                f.write(fmt_tensor("in", "abcdefgh"[i], a))
            f.write(fmt_tensor("out", "y", out))
    print(f"wrote {len(CASES)} cases to {OUT}")


# ------------------------------------------------------------ unary
X = U((3, 4), -3, 3)
case("neg", [X], lambda x: -x)
case("abs", [away((3, 4))], torch.abs)
sgn = away((3, 4))
sgn[0, 0] = 0.0
case("sign", [sgn], torch.sign)
case("exp", [X], torch.exp)
case("log", [U((3, 4), 0.05, 5)], torch.log)
case("sqrt", [U((3, 4), 0.0, 5)], torch.sqrt)
case("sin", [U((2, 3, 2), -6, 6)], torch.sin)
case("cos", [U((2, 3, 2), -6, 6)], torch.cos)
case("tanh", [U((3, 4), -4, 4)], torch.tanh)
sig = U((3, 4), -6, 6)
sig[0, :] = [-100.0, -30.0, 30.0, 100.0]  # stable for large |x|
case("sigmoid", [sig], torch.sigmoid)
case("relu", [away((3, 4))], torch.relu)
case("erf", [U((3, 4), -3, 3)], torch.erf)
case("gelu", [U((3, 4), -4, 4)], lambda x: F.gelu(x, approximate="tanh"))
case("gelu_erf", [U((3, 4), -4, 4)], lambda x: F.gelu(x))
case("scale", [X], lambda x: x * float(np.float32(-1.5)))
case("unary_empty", [U((0, 3))], torch.exp)
case("unary_scalar", [U(())], torch.tanh)

# ------------------------------------------------------------ binary
BIN = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "max": torch.maximum,
    "min": torch.minimum,
}
for op, fn in BIN.items():
    b = away((5, 1), 0.5, 2) if op == "div" else U((5, 1))
    case(f"{op}_bcast", [U((3, 1, 4)), b], fn)
    case(f"{op}_scalar", [U(()), away((2, 3), 0.5, 2)], fn)
    case(f"{op}_ones", [U((1, 1)), away((4, 1), 0.5, 2)], fn)
    case(f"{op}_empty", [U((0, 3)), away((1, 3), 0.5, 2)], fn)
case("add_same", [U((2, 3, 4)), U((2, 3, 4))], torch.add)
case("add_rank", [U((2, 1, 3, 1)), U((4, 3, 1))], torch.add)
case("pow", [U((3, 1, 4), 0.1, 3), U((5, 1), -2, 2)], torch.pow)
case("pow_scalar", [U((2, 3), 0.1, 3), np.array(2.5, dtype=np.float32)], torch.pow)
tie_a = ints((3, 4), -2, 3).astype(np.float32)
tie_b = ints((4,), -2, 3).astype(np.float32)
case("max_ties", [tie_a, tie_b], torch.maximum)
case("min_ties", [tie_a, tie_b], torch.minimum)
CMP = {"lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge, "eq": torch.eq}
for op, fn in CMP.items():
    case(op, [tie_a, tie_b], lambda a, b, fn=fn: fn(a, b).to(torch.float64))
    case(f"{op}_scalar", [tie_a, np.array(0.0, dtype=np.float32)],
         lambda a, b, fn=fn: fn(a, b).to(torch.float64))
cond = (ints((3, 1), 0, 2) * ints((3, 1), 1, 3)).astype(np.float32)  # 0, 1 or 2
cond[0, 0], cond[1, 0] = 0.0, -1.0
case("select", [cond, U((1, 4)), U(())],
     lambda c, a, b: torch.where(c != 0, a, b).expand(3, 4))
case("select_full", [ints((2, 3), 0, 2).astype(np.float32), U((2, 3)), U((2, 3))],
     lambda c, a, b: torch.where(c != 0, a, b))

# ------------------------------------------------------------ reductions
R = U((2, 3, 4))
MASKS = {"a0": (0,), "a1": (1,), "a2": (2,), "a02": (0, 2), "all": (0, 1, 2)}
for mname, dims in MASKS.items():
    for kd in (0, 1):
        sfx = f"{mname}_k{kd}"
        case(f"sum_{sfx}", [R], lambda x, d=dims, k=kd: x.sum(dim=d, keepdim=bool(k)))
        case(f"mean_{sfx}", [R], lambda x, d=dims, k=kd: x.mean(dim=d, keepdim=bool(k)))
        case(f"rmax_{sfx}", [R],
             lambda x, d=dims, k=kd: torch.amax(x, dim=d, keepdim=bool(k)))
case("sum_empty", [U((0, 3))], lambda x: x.sum(dim=0))
case("sum_scalar", [U(())], lambda x: x)
case("sum_ones", [U((1, 5, 1))], lambda x: x.sum(dim=(0, 2)))
for ax in (0, 1, -1):
    case(f"argmax_{'m1' if ax < 0 else ax}", [R], lambda x, a=ax: torch.argmax(x, dim=a))

# ------------------------------------------------------------ movement
case("reshape", [R], lambda x: x.reshape(4, -1))
case("reshape_flat", [R], lambda x: x.reshape(-1))
case("permute", [R], lambda x: x.permute(2, 0, 1))
case("permute4", [U((2, 1, 3, 2))], lambda x: x.permute(3, 1, 0, 2))
case("transpose", [R], lambda x: x.transpose(-1, -2))
case("broadcast_to", [U((3, 1))], lambda x: x.expand(2, 3, 4))
case("broadcast_to_same", [U((3, 4))], lambda x: x.expand(3, 4))
case("bcast_new02", [U((3,))], lambda x: x.reshape(1, 3, 1).expand(2, 3, 4))
case("bcast_new1", [U((2, 4))], lambda x: x.reshape(2, 1, 4).expand(2, 3, 4))
case("slice", [U((4, 5))], lambda x: x[1:-1, -3:5])
case("slice3", [R], lambda x: x[1:2, 0:3, -2:-1])
case("slice_empty", [U((4, 5))], lambda x: x[2:2, :])
case("concat1", [U((2, 1, 3)), U((2, 2, 3)), U((2, 0, 3))], lambda a, b, c: torch.cat([a, b, c], 1))
case("concat_last", [U((2, 2)), U((2, 3))], lambda a, b: torch.cat([a, b], -1))
case("concat0", [U((1, 3)), U((2, 3))], lambda a, b: torch.cat([a, b], 0))
case("pad", [U((2, 3))], lambda x: F.pad(x, (0, 1, 1, 2), value=0.5))
case("pad3", [U((1, 2, 2))], lambda x: F.pad(x, (1, 1, 0, 0, 2, 0), value=-1.0))
# movement ops copy elements whatever the dtype; pad fills with (int)value
I = ints((2, 3), -50, 50)
case("pad_i32", [I], lambda x: F.pad(x, (0, 1, 1, 2), value=3))
case("slice_i32", [I], lambda x: x[1:2, -2:3])
case("concat_i32", [I, ints((1, 3), -5, 5)], lambda a, b: torch.cat([a, b], 0))
case("transpose_i32", [I], lambda x: x.t())
case("broadcast_to_i32", [ints((3, 1), -5, 5)], lambda x: x.expand(2, 3, 4))
case("reshape_i32", [I], lambda x: x.reshape(3, 2))

# ------------------------------------------------------------ contraction
def mat(shape, trans):
    """A random operand stored transposed (last two axes) when trans."""
    s = list(shape)
    if trans:
        s[-1], s[-2] = s[-2], s[-1]
    return U(tuple(s))


def op_t(x, trans):
    return x.transpose(-1, -2) if trans else x


for ta in (0, 1):
    for tb in (0, 1):
        mm = lambda a, b, ta=ta, tb=tb: torch.matmul(op_t(a, ta), op_t(b, tb))
        case(f"matmul_{ta}{tb}", [mat((3, 4), ta), mat((4, 5), tb)], mm)
        case(f"matmul_batch_{ta}{tb}", [mat((2, 3, 4), ta), mat((2, 4, 5), tb)], mm)
        case(f"matmul_bbcast_{ta}{tb}", [mat((2, 1, 3, 4), ta), mat((3, 4, 2), tb)], mm)
case("matmul_bone", [U((1, 3, 4)), U((2, 4, 2))], torch.matmul)
case("matmul_k0", [U((3, 0)), U((0, 2))], torch.matmul)
case("matmul_1x1", [U((1, 1)), U((1, 1))], torch.matmul)
case("dot0", [U((2, 3)), U((4,))], lambda a, b: torch.tensordot(a, b, 0))
case("dot1", [U((2, 3)), U((3, 4))], lambda a, b: torch.tensordot(a, b, 1))
case("dot2", [U((2, 3, 4)), U((3, 4, 5))], lambda a, b: torch.tensordot(a, b, 2))
case("dot_scalar", [U((3,)), U((3,))], lambda a, b: torch.tensordot(a, b, 1))

# ------------------------------------------------------------ conversion
lab = np.array([[0, 3, -1], [4, 2, 1]], dtype=np.int32)  # -1, 4 out of range
case("one_hot", [lab],
     lambda l: torch.where(((l >= 0) & (l < 4)).unsqueeze(-1),
                           F.one_hot(l.clamp(0, 3), 4), 0).to(torch.float64))
castf = U((3, 4), -5, 5)
castf[0, :3] = [-2.5, 2.5, -0.0]
case("cast_f2i", [castf], lambda x: torch.trunc(x).to(torch.int64))
case("cast_i2f", [ints((2, 3), -100, 100)], lambda x: x.to(torch.float64))
case("stop_gradient", [X], lambda x: x)

# ------------------------------------------------------------ composites
SM = U((3, 4), -3, 3)
SM_BIG = U((3, 4), -3, 3)
SM_BIG[0, :] += 1000.0
SM_BIG[1, :] -= 1000.0
SM_BIG[2, 1] = 1000.0
for nm, xin in (("", SM), ("_big", SM_BIG)):
    for ax in (0, 1, -1):
        a = "m1" if ax < 0 else str(ax)
        case(f"softmax{nm}_{a}", [xin], lambda x, ax=ax: torch.softmax(x, ax))
        case(f"log_softmax{nm}_{a}", [xin], lambda x, ax=ax: torch.log_softmax(x, ax))
case("softmax3_1", [U((2, 3, 2))], lambda x: torch.softmax(x, 1))
case("log_softmax3_1", [U((2, 3, 2))], lambda x: torch.log_softmax(x, 1))
case("affine", [U((3, 4)), U((4, 5)), U((5,))], lambda x, w, b: x @ w + b)

# nGraph cross-entropy: -sum(log(max(p, exp(log_min))) * onehot) / n, log_min=-5
probs = torch.softmax(T(U((4, 5), -4, 4)), 1).numpy().astype(np.float32)
probs[1, 2] = 1e-4  # below exp(-5): clipped
ce_lab = np.array([1, 2, 0, 4])
onehot = np.eye(5, dtype=np.float32)[ce_lab]
LOG_MIN = np.float32(-5.0)
clip = float(np.exp(np.float32(LOG_MIN)))  # the f32 exp the library uses
case("cross_entropy", [probs, onehot, np.array(4.0, dtype=np.float32)],
     lambda p, oh, n: -(torch.log(torch.clamp(p, min=clip)) * oh).sum() / n)

logits = U((4, 5), -3, 3)
case("softmax_ce", [logits, ints((4,), 0, 5)],
     lambda x, l: F.cross_entropy(x, l))
logits_big = logits.copy()
logits_big[0] += 1000.0
logits_big[2, 3] = -1000.0
case("softmax_ce_big", [logits_big, np.array([2, 0, 3, 4], dtype=np.int32)],
     lambda x, l: F.cross_entropy(x, l))

# binary cross-entropy with p clipped to [eps, 1-eps], eps = 1e-7 in float32:
# 1 - eps rounds to 1 - 2^-23 in float32, which is what the library computes.
EPS = np.float32(1e-7)
HI = float(np.float32(1.0) - EPS)
bp = U((3, 4), 0.02, 0.98)
bp[0, 0], bp[0, 1], bp[0, 2], bp[0, 3] = 0.0, 1.0, 0.0, 1.0
by = rng.integers(0, 2, size=(3, 4)).astype(np.float32)
by[0, :] = [1.0, 0.0, 0.0, 1.0]
by[2, 0] = 0.25  # soft label
case("bce", [bp, by],
     lambda p, y: -(y * torch.log(p.clamp(float(EPS), HI))
                    + (1 - y) * torch.log(1 - p.clamp(float(EPS), HI))).mean())

# ------------------------------------------------------------ added ops
# (after every other case, so that the others' random inputs stay the same)
case("log1p", [U((3, 4), -0.9, 3)], torch.log1p)
case("expm1", [U((3, 4), -3, 3)], torch.expm1)
case("softplus", [U((3, 5), -30, 30)], F.softplus)
case("silu", [U((3, 4), -6, 6)], F.silu)
case("floor", [U((3, 4), -3, 3)], torch.floor)
case("ceil", [U((3, 4), -3, 3)], torch.ceil)
case("round", [np.array([[-2.5, -1.5, -0.5, 0.5], [1.5, 2.5, 0.49, -0.51],
                         [3.7, -3.7, 0.0, 7.5]], dtype=np.float32)], torch.round)
case("softmax_ce_grad", [U((4, 5), -3, 3), ints((4,), 0, 5)],
     lambda x, l: torch.autograd.grad(
         F.cross_entropy(x.requires_grad_(), l), x)[0])
case("asin", [U((3, 4), -0.99, 0.99)], torch.asin)
case("acos", [U((3, 4), -0.99, 0.99)], torch.acos)
case("atan", [U((3, 4), -6, 6)], torch.atan)
case("gelu_tanh", [U((3, 5), -6, 6)], lambda x: F.gelu(x, approximate="tanh"))
# ties to even at both precisions (1 + 2^-11 and 1 + 3 2^-11 for half,
# 1 + 2^-8 and 1 + 3 2^-8 for bfloat16), half's subnormals, its overflow at
# 65520 and bfloat16's at the top of f32
hx = U((4, 4), -3, 3)
hx[0] = [1 + 2**-11, 1 + 3 * 2**-11, -(1 + 2**-11), 1 + 2**-11 + 2**-20]
hx[1] = [3e-7, -4.5e-6, 6.1e-5, 2**-25]
hx[2] = [65519.0, 65520.0, -70000.0, 65504.0]
case("round_f16", [hx], lambda x: x.half().float())
bx = U((4, 4), -3, 3)
bx[0] = [1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 1 + 2**-8 + 2**-20]
bx[1] = [1e-40, -3e38, 3.4e38, 0.1]
case("round_bf16", [bx], lambda x: x.bfloat16().float())

write_all()
