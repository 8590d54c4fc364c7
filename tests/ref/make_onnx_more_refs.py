#!/usr/bin/python3
"""Models for the ONNX ops of issue 13's follow-up (tests/test_onnx_more.c)
into tests/ref/onnx/more_*.onnx, each with an input x, PyTorch's output y
and PyTorch's gradient dx of sum(y) with respect to x (more_*.txt, the
format of make_onnx_models.py), and the hostile models (bad_*.onnx) a
loader must refuse with a message.

  more_half   Cast to float16, a product by a float16 initializer (one
              stored in raw_data, one in int32_data), Cast to bfloat16 and
              back: x.half().float() * w, then .bfloat16().float(); the
              gradient passes the casts straight through as PyTorch's does.

Run: /usr/bin/python3 tests/ref/make_onnx_more_refs.py  (python3-torch,
python3-onnx).
"""
import numpy as np
import torch
from onnx import TensorProto, helper

from make_onnx_models import model, save, save_unchecked, write_refs

torch.manual_seed(13)
torch.set_num_threads(1)
rng = np.random.default_rng(1313)


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def torch_ref(fn, x):
    """fn's value at x and the gradient of its sum, both float32."""
    xt = torch.tensor(x, requires_grad=True)
    y = fn(xt)
    y.sum().backward()
    return y.detach().numpy(), xt.grad.numpy()


def half_model():
    x = rng.uniform(-3, 3, (3, 4)).astype(np.float32)
    x[0, :2] = [1 + 2**-11, 1 + 3 * 2**-11]  # ties to even
    x[0, 2] = 70000.0  # past half's range: inf
    w = rng.uniform(-2, 2, (4,)).astype(np.float16)
    v = rng.uniform(0.5, 2, (3, 1)).astype(np.float16)
    raw = helper.make_tensor("w", TensorProto.FLOAT16, [4],
                             w.tobytes(), raw=True)
    # make_tensor stores float16 values given as floats as their bits in
    # int32_data
    typed = helper.make_tensor("v", TensorProto.FLOAT16, [3, 1],
                               v.astype(np.float32).ravel().tolist())
    assert list(typed.int32_data) == v.view(np.uint16).ravel().tolist()
    nodes = [
        helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
        helper.make_node("Mul", ["h", "w"], ["hw"]),
        helper.make_node("Mul", ["hw", "v"], ["p"]),
        helper.make_node("Cast", ["p"], ["b"], to=TensorProto.BFLOAT16),
        helper.make_node("Cast", ["b"], ["y"], to=TensorProto.FLOAT),
    ]
    m = model(nodes, [f32("x", [3, 4])], [f32("y", [3, 4])], [raw, typed])
    save(m, "more_half")
    wt = torch.tensor(w.astype(np.float32))
    vt = torch.tensor(v.astype(np.float32))
    y, dx = torch_ref(
        lambda t: (t.half().float() * wt * vt).bfloat16().float(), x)
    write_refs("more_half", [("x", x)], [("y", y), ("dx", dx)])


def bad_models():
    # a float16 initializer whose raw_data holds 3 bytes for 2 values
    short = helper.make_tensor("w", TensorProto.FLOAT16, [2], b"\0\0\0\0",
                               raw=True)
    short.raw_data = b"\0\0\0"
    m = model([helper.make_node("Mul", ["x", "w"], ["y"])],
              [f32("x", [2])], [f32("y", [2])], [short])
    save_unchecked(m, "bad_half_raw")


half_model()
bad_models()
