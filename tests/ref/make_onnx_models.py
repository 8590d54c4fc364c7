#!/usr/bin/python3
"""Writes the small ONNX models tests/test_onnx.c loads, and their expected
outputs, into tests/ref/onnx/.

Run: /usr/bin/python3 tests/ref/make_onnx_models.py  (needs python3-onnx and
NumPy; the outputs are committed, the tests never run this).

Each good model M has M.onnx and M.txt: the inputs and outputs in the format
of tests/ref/make_op_refs.py ("in|out <name> f32|i32 <ndim> <dims> values").
Expected values come from NumPy formulas written here, independent of Kiln.
The bad models are valid protobuf that a loader must refuse with a message:
unsupported ops, attributes and dtypes; hostile sizes; external data
leaving the model's folder.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "onnx")
rng = np.random.default_rng(13)


def save(model, name):
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(OUT, name + ".onnx"))


def save_unchecked(model, name):
    with open(os.path.join(OUT, name + ".onnx"), "wb") as f:
        f.write(model.SerializeToString())


def write_refs(name, ins, outs):
    with open(os.path.join(OUT, name + ".txt"), "w") as f:
        for kind, tensors in (("in", ins), ("out", outs)):
            for tname, v in tensors:
                dt = "i32" if v.dtype.kind in "iu" else "f32"
                f.write("%s %s %s %d %s\n" % (kind, tname, dt, v.ndim,
                                               " ".join(map(str, v.shape))))
                fmt = "%d" if dt == "i32" else "%.9g"
                f.write(" ".join(fmt % x for x in v.reshape(-1)) + "\n")


def init(name, v):
    return numpy_helper.from_array(np.asarray(v), name)


def model(nodes, inputs, outputs, inits, opset=13):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    return helper.make_model(g, producer_name="kiln-tests",
                             opset_imports=[helper.make_opsetid("", opset)])


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def softmax(z, axis=-1):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def mlp():
    w1 = rng.standard_normal((5, 4)).astype(np.float32)
    b1 = rng.standard_normal(5).astype(np.float32)
    w2 = rng.standard_normal((5, 3)).astype(np.float32)
    b2 = rng.standard_normal(3).astype(np.float32)
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], "fc1", transB=1),
        helper.make_node("Relu", ["h"], ["r"], "relu"),
        helper.make_node("MatMul", ["r", "w2"], ["z"], "fc2"),
        helper.make_node("Add", ["z", "b2"], ["zb"], "bias2"),
        helper.make_node("Softmax", ["zb"], ["y"], "softmax", axis=-1),
    ]
    m = model(nodes, [f32("x", ["batch", 4])], [f32("y", ["batch", 3])],
              [init("w1", w1), init("b1", b1), init("w2", w2), init("b2", b2)])
    save(m, "mlp")
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = softmax(np.maximum(x @ w1.T + b1, 0) @ w2 + b2)
    write_refs("mlp", [("x", x)], [("y", y)])
    np.save(os.path.join(OUT, "mlp_x.npy"), x)  # for kiln run's test
    # The same model with every initializer in a file beside it.
    from onnx import external_data_helper
    data = os.path.join(OUT, "mlp_ext.data")
    if os.path.exists(data):
        os.remove(data)  # onnx appends to an existing file
    external_data_helper.convert_model_to_external_data(
        m, all_tensors_to_one_file=True, location="mlp_ext.data",
        size_threshold=0)
    onnx.save(m, os.path.join(OUT, "mlp_ext.onnx"))
    # ... and one whose data lies outside the model's folder.
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = "../make_onnx_models.py"
    save_unchecked(m, "bad_ext_escape")


def conv2d(x, w, b, pad):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    y = np.zeros((n, o, oh, ow), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i:i + kh, j:j + kw]
            y[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return y + b.reshape(1, -1, 1, 1)


def cnn():
    """Conv, batch norm, relu, max pool, then PyTorch's flatten pattern
    (Shape, Gather, Unsqueeze, Concat, Reshape) and a Gemm."""
    w = rng.standard_normal((2, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    sc = rng.uniform(0.5, 1.5, 2).astype(np.float32)
    bi = rng.standard_normal(2).astype(np.float32)
    mean = rng.standard_normal(2).astype(np.float32)
    var = rng.uniform(0.5, 2, 2).astype(np.float32)
    fw = rng.standard_normal((4, 18)).astype(np.float32)
    fb = rng.standard_normal(4).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], "conv",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "sc", "bi", "mean",
                                                "var"], ["n"], "bn",
                         epsilon=1e-5),
        helper.make_node("Relu", ["n"], ["r"], "relu"),
        helper.make_node("MaxPool", ["r"], ["p"], "pool",
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Shape", ["p"], ["s"], "shape"),
        helper.make_node("Gather", ["s", "zero"], ["n0"], "gather", axis=0),
        helper.make_node("Unsqueeze", ["n0", "axes0"], ["n1"], "unsq"),
        helper.make_node("Concat", ["n1", "minus1"], ["newshape"], "cat",
                         axis=0),
        helper.make_node("Reshape", ["p", "newshape"], ["f"], "flatten"),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], "fc", transB=1),
    ]
    inits = [init("w", w), init("b", b), init("sc", sc), init("bi", bi),
             init("mean", mean), init("var", var), init("fw", fw),
             init("fb", fb), init("zero", np.array(0, np.int64)),
             init("axes0", np.array([0], np.int64)),
             init("minus1", np.array([-1], np.int64))]
    m = model(nodes, [f32("x", ["N", 1, 6, 6])], [f32("y", ["N", 4])], inits)
    save(m, "cnn")
    x = rng.standard_normal((2, 1, 6, 6)).astype(np.float32)
    c = conv2d(x.astype(np.float64), w, b, 1)
    rs = lambda v: v.reshape(1, -1, 1, 1)
    n = (c - rs(mean)) / np.sqrt(rs(var) + 1e-5) * rs(sc) + rs(bi)
    r = np.maximum(n, 0)
    p = r.reshape(2, 2, 3, 2, 3, 2).max(axis=(3, 5))
    y = p.reshape(2, -1) @ fw.T + fb
    write_refs("cnn", [("x", x)], [("y", y.astype(np.float32))])


def shapes():
    """Movement and integer ops: Transpose, Slice, Concat, Where, Cast,
    ReduceSum, ArgMax (an int64 output)."""
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], "t", perm=[2, 0, 1]),
        helper.make_node("Slice", ["t", "st", "en", "ax"], ["s"], "slice"),
        helper.make_node("Concat", ["s", "s"], ["c"], "cat", axis=1),
        helper.make_node("Greater", ["c", "zero_f"], ["pos"], "gt"),
        helper.make_node("Where", ["pos", "c", "half"], ["w"], "where"),
        helper.make_node("ReduceSum", ["w", "rax"], ["y"], "sum",
                         keepdims=0),
        helper.make_node("ArgMax", ["w"], ["am"], "argmax", axis=2,
                         keepdims=0),
    ]
    inits = [init("st", np.array([1, 0], np.int64)),
             init("en", np.array([4, 2], np.int64)),
             init("ax", np.array([0, 2], np.int64)),
             init("zero_f", np.array(0, np.float32)),
             init("half", np.array(0.5, np.float32)),
             init("rax", np.array([0], np.int64))]
    outs = [f32("y", [4, 2]),
            helper.make_tensor_value_info("am", TensorProto.INT64, [3, 4])]
    m = model(nodes, [f32("x", [2, 3, 4])], outs, inits)
    save(m, "shapes")
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    t = x.transpose(2, 0, 1)[1:4, :, 0:2]
    c = np.concatenate([t, t], axis=1)
    w = np.where(c > 0, c, np.float32(0.5))
    write_refs("shapes", [("x", x)],
               [("y", w.sum(axis=0)), ("am", w.argmax(axis=2))])


def shape_arith():
    """Shape arithmetic the loader folds (as ONNX's expanded functions
    write it): the target shape of a Reshape computed from x's shape by
    Slice, Mul, Div (truncating: 9 / -2 is -4), Abs, Neg, Sub, Max, Min,
    ConstantOfShape and Concat."""
    i64 = lambda *v: np.array(v, np.int64)
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"], "shape"),
        helper.make_node("Slice", ["shp", "z", "one"], ["n"], "n"),  # [2]
        helper.make_node("Mul", ["n", "three"], ["n3"], "mul"),  # [6]
        helper.make_node("Div", ["nine", "mtwo"], ["q"], "div"),  # [-4]
        helper.make_node("Abs", ["q"], ["four"], "abs"),  # [4]
        helper.make_node("Neg", ["one"], ["mone"], "neg"),  # [-1]
        helper.make_node("Sub", ["mone", "mone"], ["zero"], "sub"),  # [0]
        helper.make_node("Max", ["zero", "one", "mone"], ["cnt"], "max"),
        helper.make_node("Min", ["cnt", "three"], ["cnt1"], "min"),  # [1]
        helper.make_node("ConstantOfShape", ["cnt1"], ["ones"], "cos",
                         value=init("v", i64(1))),  # [1]
        helper.make_node("Concat", ["n3", "four", "ones"], ["target"], "cat",
                         axis=0),  # [6, 4, 1]
        helper.make_node("Reshape", ["x", "target"], ["y"], "reshape"),
    ]
    inits = [init("z", i64(0)), init("one", i64(1)), init("three", i64(3)),
             init("nine", i64(9)), init("mtwo", i64(-2))]
    m = model(nodes, [f32("x", [2, 3, 4])], [f32("y", [6, 4, 1])], inits)
    save(m, "shape_arith")
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    write_refs("shape_arith", [("x", x)], [("y", x.reshape(6, 4, 1))])


def unsupported():
    """Four problems in one model; the loader must list them all."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], "fine"),
        helper.make_node("NonMaxSuppression", ["a", "a"], ["b"], "nms"),
        helper.make_node("Frobnicate", ["a"], ["c"], "custom",
                         domain="com.example"),
        helper.make_node("LeakyRelu", ["a"], ["d"], "leaky", alpha=0.1,
                         bogus=3),
        helper.make_node("Add", ["a", "cplx"], ["e"], "addcplx"),
    ]
    cplx = helper.make_tensor("cplx", TensorProto.COMPLEX64, [1], [0.5 + 1j])
    outs = [f32(n, [2, 3]) for n in "bcde"]
    m = model(nodes, [f32("x", [2, 3])], outs, [cplx])
    save_unchecked(m, "unsupported")


def raw_tensor(name, dtype, dims, raw):
    t = TensorProto()
    t.name, t.data_type = name, dtype
    t.dims.extend(dims)
    t.raw_data = raw
    return t


def hostile():
    """Sizes a reader must check before trusting them."""
    relu = [helper.make_node("Add", ["x", "w"], ["y"], "add")]
    io = ([f32("x", [2])], [f32("y", [2])])
    cases = {
        # 2^40 x 2^40 elements claimed, 8 bytes given.
        "bad_huge_dims": raw_tensor("w", TensorProto.FLOAT, [1 << 40, 1 << 40],
                                    b"\0" * 8),
        "bad_negative_dim": raw_tensor("w", TensorProto.FLOAT, [-2],
                                       b"\0" * 8),
        "bad_short_data": raw_tensor("w", TensorProto.FLOAT, [2], b"\0" * 7),
        "bad_long_data": raw_tensor("w", TensorProto.FLOAT, [2], b"\0" * 12),
        "bad_many_dims": raw_tensor("w", TensorProto.FLOAT, [1] * 40,
                                    b"\0" * 4),
    }
    for name, t in cases.items():
        save_unchecked(model(relu, io[0], io[1], [t]), name)
    # float_data with fewer values than the dims say.
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    t.float_data.extend([1.0, 2.0])
    save_unchecked(model(relu, io[0], io[1], [t]), "bad_typed_count")
    # An input claiming 2^62 x 2^62 elements.
    save_unchecked(model([helper.make_node("Relu", ["x"], ["y"], "r")],
                         [f32("x", [1 << 62, 1 << 62])], [f32("y", [2])],
                         []), "bad_input_dims")
    # A node reading a value nothing defines, and a node feeding itself.
    save_unchecked(model([helper.make_node("Relu", ["nowhere"], ["y"], "r")],
                         [f32("x", [2])], [f32("y", [2])], []),
                   "bad_undefined")
    save_unchecked(model([helper.make_node("Add", ["x", "y"], ["y"], "loop")],
                         [f32("x", [2])], [f32("y", [2])], []), "bad_cycle")
    # A Reshape to 2^40 x 2^40 elements.
    save_unchecked(model([helper.make_node("Reshape", ["x", "s"], ["y"],
                                           "big")],
                         [f32("x", [2])], [f32("y", [2])],
                         [init("s", np.array([1 << 40, 1 << 40], np.int64))]),
                   "bad_reshape")
    # A target shape divided by zero while loading: not folded, refused.
    save_unchecked(model([helper.make_node("Div", ["a", "b"], ["s"], "div"),
                          helper.make_node("Reshape", ["x", "s"], ["y"],
                                           "r0")],
                         [f32("x", [2])], [f32("y", [2])],
                         [init("a", np.array([2], np.int64)),
                          init("b", np.array([0], np.int64))]),
                   "bad_shape_divzero")
    # An LSTM whose W has 3 gates' rows instead of 4, and a GRU with an
    # activation ONNX does not define.
    lstm_in = [f32("x", [2, 1, 3])]
    save_unchecked(model([helper.make_node("LSTM", ["x", "w", "r"], ["y"],
                                           "lstm", hidden_size=2)],
                         lstm_in, [f32("y", [2, 1, 1, 2])],
                         [init("w", np.zeros((1, 6, 3), np.float32)),
                          init("r", np.zeros((1, 8, 2), np.float32))]),
                   "bad_lstm_weights")
    save_unchecked(model([helper.make_node("GRU", ["x", "w", "r"], ["y"],
                                           "gru", hidden_size=2,
                                           activations=["Frob", "Tanh"])],
                         lstm_in, [f32("y", [2, 1, 1, 2])],
                         [init("w", np.zeros((1, 6, 3), np.float32)),
                          init("r", np.zeros((1, 6, 2), np.float32))]),
                   "bad_gru_activation")
    # Einsum: an output label no input has, a term of the wrong rank, and
    # a contraction over unequal sizes.
    for name, eq, w in (("bad_einsum_label", "ij,jk->iq", (3, 4)),
                        ("bad_einsum_rank", "ijk,jk->ik", (3, 4)),
                        ("bad_einsum_sizes", "ij,jk->ik", (4, 4))):
        save_unchecked(model([helper.make_node("Einsum", ["x", "w"], ["y"],
                                               "es", equation=eq)],
                             [f32("x", [2, 3])], [f32("y", [2, 4])],
                             [init("w", np.zeros(w, np.float32))]), name)
    # Shapes that do not match: a MatMul of [2,3] by [4,5].
    save_unchecked(model([helper.make_node("MatMul", ["x", "w"], ["y"], "mm")],
                         [f32("x", [2, 3])], [f32("y", [2, 5])],
                         [init("w", np.zeros((4, 5), np.float32))]),
                   "bad_matmul")


def upsample_ref(x, scales, mode):
    """ONNX Runtime's Upsample (and opset-10 Resize): output point o of an
    axis reads input point o / scale, the nearest the one below it, linear
    between it and the next (the last point repeated past the end)."""
    y = x
    for axis, s in enumerate(scales):
        n = y.shape[axis]
        out = int(np.floor(n * s))
        src = np.arange(out) / s
        lo = np.minimum(np.floor(src).astype(int), n - 1)
        if mode == "nearest":
            y = np.take(y, lo, axis=axis)
            continue
        hi = np.minimum(lo + 1, n - 1)
        shape = [1] * y.ndim
        shape[axis] = out
        f = (src - lo).reshape(shape)
        y = np.take(y, lo, axis=axis) * (1 - f) + np.take(y, hi, axis=axis) * f
    return y.astype(np.float32)


def upsample():
    """Upsample at opset 9 (linear, scales an input) and 7 (nearest, scales
    an attribute), Resize at opset 10 (nearest, down on one axis); and two
    bad ones: a scale per missing axis, and a NaN scale."""
    cases = (("upsample9", 9, "Upsample", "linear", (1, 2, 3, 4),
              [1, 1, 2, 1.5]),
             ("upsample7", 7, "Upsample", "nearest", (1, 1, 2, 3),
              [1.0, 1.0, 3.0, 2.0]),
             ("resize10", 10, "Resize", "nearest", (1, 2, 3, 4),
              [1, 1, 1.5, 0.5]))
    for name, opset, op, mode, shape, scales in cases:
        x = rng.standard_normal(shape).astype(np.float32)
        y = upsample_ref(x, scales, mode)
        sc = np.array(scales, np.float32)
        if opset == 7:
            node = helper.make_node(op, ["x"], ["y"], "up", mode=mode,
                                    scales=scales)
            inits = []
        else:
            node = helper.make_node(op, ["x", "s"], ["y"], "up", mode=mode)
            inits = [init("s", sc)]
        save(model([node], [f32("x", list(shape))], [f32("y", list(y.shape))],
                   inits, opset=opset), name)
        write_refs(name, [("x", x)], [("y", y)])
    for name, sc in (("bad_upsample_count", [1, 2, 2]),
                     ("bad_upsample_nan", [1, 1, float("nan"), 2])):
        save_unchecked(model([helper.make_node("Upsample", ["x", "s"], ["y"],
                                               "up")],
                             [f32("x", [1, 1, 2, 2])], [f32("y", [1, 1, 4, 4])],
                             [init("s", np.array(sc, np.float32))], opset=9),
                       name)


def i64(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.INT64, shape)


def reorder():
    """ReverseSequence with sequence_lens given when running (time first
    and batch first), MaxUnpool of a 1-D max pool with overlapping windows
    (one index twice); and bad ones: axes not 0 and 1, an output_shape past
    any size."""
    for name, ta, shape, lens in (("revseq_time", 0, (5, 3, 2), [5, 2, 1]),
                                  ("revseq_batch", 1, (3, 4), [4, 1, 3])):
        x = rng.standard_normal(shape).astype(np.float32)
        lens = np.array(lens, np.int64)
        y = x.copy()
        for b, n in enumerate(lens):
            if ta == 0:
                y[:n, b] = x[:n, b][::-1]
            else:
                y[b, :n] = x[b, :n][::-1]
        node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], "rs",
                                batch_axis=1 - ta, time_axis=ta)
        save(model([node], [f32("x", list(shape)), i64("lens", [len(lens)])],
                   [f32("y", list(shape))], []), name)
        write_refs(name, [("x", x), ("lens", lens)], [("y", y)])
    # max pool of kernel 3, stride 2 over 7 points: windows [0,3), [2,5),
    # [4,7) share points 2 and 4; the maxima sit there.
    x0 = np.array([[[0.1, 0.2, 3.0, 0.3, 2.0, 0.5, 0.4],
                    [1.0, -2.0, -3.0, 0.5, -1.0, 0.25, 4.0]]], np.float32)
    flat = x0.reshape(-1)
    starts = [0, 2, 4]
    idx = np.array([[[c * 7 + s + int(np.argmax(x0[0, c, s:s + 3]))
                      for s in starts] for c in range(2)]], np.int64)
    xs = flat[idx]
    y = np.zeros(14, np.float32)
    y[idx.reshape(-1)] = xs.reshape(-1)
    node = helper.make_node("MaxUnpool", ["x", "i"], ["y"], "up",
                            kernel_shape=[3], strides=[2])
    save(model([node], [f32("x", [1, 2, 3]), i64("i", [1, 2, 3])],
               [f32("y", [1, 2, 7])], [], opset=11), "unpool_1d")
    write_refs("unpool_1d", [("x", xs), ("i", idx)],
               [("y", y.reshape(1, 2, 7))])
    save_unchecked(model([helper.make_node("ReverseSequence", ["x", "lens"],
                                           ["y"], "rs", batch_axis=2,
                                           time_axis=0)],
                         [f32("x", [3, 2, 2]), i64("lens", [2])],
                         [f32("y", [3, 2, 2])], []), "bad_revseq_axes")
    save_unchecked(model([helper.make_node("MaxUnpool", ["x", "i", "s"], ["y"],
                                           "up", kernel_shape=[2, 2],
                                           strides=[2, 2])],
                         [f32("x", [1, 1, 2, 2]), i64("i", [1, 1, 2, 2])],
                         [f32("y", [1, 1, 4, 4])],
                         [init("s", np.array([1, 1, 1 << 40, 1 << 40],
                                             np.int64))], opset=11),
                   "bad_unpool_huge")


def control():
    """If, Loop and Scan with bodies reading outer values: an If on a
    condition given when running; a Loop whose condition is data (it stops
    when y passes 10); a Loop with a scan output; a Scan of two inputs, one
    reversed, stacking on axis 1.  And bad ones: a trip count past what is
    unrolled, a body with the wrong number of inputs."""
    b = lambda name, shape: helper.make_tensor_value_info(
        name, TensorProto.BOOL, shape)
    graph = lambda nodes, ins, outs, name="body": helper.make_graph(
        nodes, name, ins, outs)
    # If: then 2x, else x - 1
    then_g = graph([helper.make_node("Add", ["x", "x"], ["t"])], [],
                   [f32("t", [2, 3])], "then")
    else_g = graph([helper.make_node("Sub", ["x", "one"], ["e"])], [],
                   [f32("e", [2, 3])], "else")
    x = rng.standard_normal((2, 3)).astype(np.float32)
    for name, cond in (("if_true", True), ("if_false", False)):
        m = model([helper.make_node("If", ["c"], ["y"], "if",
                                    then_branch=then_g, else_branch=else_g)],
                  [f32("x", [2, 3]), b("c", [])], [f32("y", [2, 3])],
                  [init("one", np.float32(1))], opset=13)
        save(m, name)
        write_refs(name, [("x", x), ("c", np.array(cond, np.float32))],
                   [("y", 2 * x if cond else x - 1)])
    # Loop: y = 1.5 y + i while y < 10, at most 6 steps
    body = graph([helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", ["y_in", "k"], ["y1"]),
                  helper.make_node("Add", ["y1", "fi"], ["y_out"]),
                  helper.make_node("ReduceMax", ["y_out"], ["top"], keepdims=0),
                  helper.make_node("Less", ["top", "lim"], ["c_out"])],
                 [i64("i", []), b("c_in", []), f32("y_in", [2])],
                 [b("c_out", []), f32("y_out", [2])])
    y0 = np.array([0.5, 1.25], np.float32)
    y = y0.copy()
    for i in range(6):
        y = (y * 1.5 + i).astype(np.float32)
        if not y.max() < 10:
            break
    m = model([helper.make_node("Loop", ["M", "c", "y0"], ["y"], "loop",
                                body=body)],
              [f32("y0", [2]), b("c", [])], [f32("y", [2])],
              [init("M", np.int64(6)), init("k", np.float32(1.5)),
               init("lim", np.float32(10))], opset=13)
    save(m, "loop_cond")
    write_refs("loop_cond", [("y0", y0), ("c", np.array(1, np.float32))],
               [("y", y)])
    # Loop of 4 steps with a scan output: s = s * w, every s kept
    body = graph([helper.make_node("Mul", ["s_in", "w"], ["s_out"]),
                  helper.make_node("Identity", ["c_in"], ["c_out"]),
                  helper.make_node("Identity", ["s_out"], ["keep"])],
                 [i64("i", []), b("c_in", []), f32("s_in", [2])],
                 [b("c_out", []), f32("s_out", [2]), f32("keep", [2])])
    s0 = rng.standard_normal(2).astype(np.float32)
    w = np.array([0.5, -2], np.float32)
    steps = [s0 * w ** (k + 1) for k in range(4)]
    m = model([helper.make_node("Loop", ["M", "", "s0"], ["s", "all"], "loop",
                                body=body)],
              [f32("s0", [2])], [f32("s", [2]), f32("all", [4, 2])],
              [init("M", np.int64(4)), init("w", w)], opset=13)
    save(m, "loop_scan")
    write_refs("loop_scan", [("s0", s0)],
               [("s", steps[-1]), ("all", np.stack(steps).astype(np.float32))])
    # Scan: acc += a_t * b_(T-1-t) over axis 1 of a and axis 0 of b; the
    # running acc stacked on axis 1
    body = graph([helper.make_node("Mul", ["a_t", "b_t"], ["p"]),
                  helper.make_node("Add", ["acc_in", "p"], ["acc_out"]),
                  helper.make_node("Identity", ["acc_out"], ["keep"])],
                 [f32("acc_in", [3]), f32("a_t", [3]), f32("b_t", [3])],
                 [f32("acc_out", [3]), f32("keep", [3])])
    a = rng.standard_normal((3, 4)).astype(np.float32)
    bb = rng.standard_normal((4, 3)).astype(np.float32)
    acc = np.zeros(3, np.float32)
    keep = []
    for t in range(4):
        acc = acc + a[:, t] * bb[3 - t]
        keep.append(acc)
    m = model([helper.make_node("Scan", ["acc0", "a", "b"], ["acc", "run"],
                                "scan", body=body, num_scan_inputs=2,
                                scan_input_axes=[1, 0],
                                scan_input_directions=[0, 1],
                                scan_output_axes=[-1])],
              [f32("a", [3, 4]), f32("b", [4, 3])],
              [f32("acc", [3]), f32("run", [3, 4])],
              [init("acc0", np.zeros(3, np.float32))], opset=11)
    save(m, "scan_rev")
    write_refs("scan_rev", [("a", a), ("b", bb)],
               [("acc", acc), ("run", np.stack(keep, 1))])
    save_unchecked(model([helper.make_node("Loop", ["M", "", "s0"], ["s"],
                                           "loop", body=body)],
                         [f32("s0", [3])], [f32("s", [3])],
                         [init("M", np.int64(1 << 40))], opset=13),
                   "bad_loop_trips")
    save_unchecked(model([helper.make_node("Loop", ["M", "", "s0", "s1"],
                                           ["s", "t"], "loop", body=body)],
                         [f32("s0", [3]), f32("s1", [3])],
                         [f32("s", [3]), f32("t", [3])],
                         [init("M", np.int64(2))], opset=13),
                   "bad_loop_body")
    # Ifs nested 40 deep on a condition known only when running
    leaf = graph([helper.make_node("Identity", ["x"], ["l"])], [],
                 [f32("l", [1])], "leaf")
    inner = leaf
    for d in range(40):
        inner = graph([helper.make_node("If", ["c"], ["o%d" % d], "if%d" % d,
                                        then_branch=inner, else_branch=leaf)],
                      [], [f32("o%d" % d, [1])], "g%d" % d)
    save_unchecked(model(list(inner.node), [f32("x", [1]), b("c", [])],
                         [f32("o39", [1])], [], opset=13), "bad_if_nesting")
    # a Loop of 1024 steps around one of 1024: a million bodies
    step = graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                  helper.make_node("Identity", ["v_in"], ["v_out"])],
                 [i64("i", []), b("c_in", []), f32("v_in", [1])],
                 [b("c_out", []), f32("v_out", [1])])
    outer = graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                   helper.make_node("Loop", ["M", "", "v_in"], ["v_out"],
                                    "inner", body=step)],
                  [i64("i", []), b("c_in", []), f32("v_in", [1])],
                  [b("c_out", []), f32("v_out", [1])])
    save_unchecked(model([helper.make_node("Loop", ["M", "", "x"], ["y"],
                                           "outer", body=outer)],
                         [f32("x", [1])], [f32("y", [1])],
                         [init("M", np.int64(1024))], opset=13),
                   "bad_loop_nest")


def wire(levels, kind):
    """A ModelProto written byte by byte whose messages nest levels deep:
    If nodes in then_branch graphs, or a graph input's type a sequence of
    sequences.  (protobuf-c unpacks by recursion: tens of thousands of
    levels overflow its stack.)"""
    def varint(n):
        out = bytearray()
        while True:
            b, n = n & 0x7f, n >> 7
            out.append(b | (0x80 if n else 0))
            if not n:
                return bytes(out)

    def ld(field, payload):
        return varint(field << 3 | 2) + varint(len(payload)) + payload

    def vi(field, v):
        return varint(field << 3) + varint(v)

    if kind == "graph":
        g = b""
        for _ in range(levels):
            attr = ld(1, b"then_branch") + ld(6, g) + vi(20, 5)
            g = ld(1, ld(4, b"If") + ld(5, attr))
    else:
        t = ld(1, vi(1, 1))  # tensor_type float
        for _ in range(levels):
            t = ld(4, ld(1, t))  # sequence_type { elem_type }
        g = ld(11, ld(1, b"x") + ld(2, t))
    return vi(1, 8) + ld(7, g) + ld(8, vi(2, 13))


def deep():
    for name, kind in (("bad_deep_graphs", "graph"), ("bad_deep_types", "type")):
        with open(os.path.join(OUT, name + ".onnx"), "wb") as f:
            f.write(wire(300, kind))


def spectral():
    """DFT (complex along a middle axis, cut to dft_length; real onesided;
    inverse padded to dft_length) and STFT (complex, two-sided, no window),
    against numpy.fft; and bad ones: a length past the twiddle bound, a
    frame longer than the signal."""
    def cplx(v):
        return v[..., 0] + 1j * v[..., 1] if v.shape[-1] == 2 else v[..., 0]

    def split(z):
        return np.stack([z.real, z.imag], -1).astype(np.float32)

    cases = (("dft_complex", (2, 6, 3, 2), dict(axis=2), 5,
              lambda z: np.fft.fft(z, n=5, axis=2)),
             ("dft_onesided", (3, 8, 1), dict(axis=1, onesided=1), None,
              lambda z: np.fft.rfft(z.real, axis=1)),
             ("dft_inverse", (2, 7, 2), dict(axis=1, inverse=1), 10,
              lambda z: np.fft.ifft(z, n=10, axis=1)))
    for name, shape, attrs, length, ref in cases:
        x = rng.standard_normal(shape).astype(np.float32)
        y = split(ref(cplx(x).astype(np.complex128)))
        ins, inits = ["x"], []
        if length:
            ins.append("n")
            inits.append(init("n", np.int64(length)))
        save(model([helper.make_node("DFT", ins, ["y"], "dft", **attrs)],
                   [f32("x", list(shape))], [f32("y", list(y.shape))], inits,
                   opset=17), name)
        write_refs(name, [("x", x)], [("y", y)])
    x = rng.standard_normal((1, 20, 2)).astype(np.float32)
    z = cplx(x).astype(np.complex128)
    frames = np.stack([z[:, f * 3:f * 3 + 6] for f in range(5)], 1)
    y = split(np.fft.fft(frames, axis=2))
    save(model([helper.make_node("STFT", ["x", "step", "", "len"], ["y"],
                                 "stft", onesided=0)],
               [f32("x", [1, 20, 2])], [f32("y", list(y.shape))],
               [init("step", np.int64(3)), init("len", np.int64(6))],
               opset=17), "stft_complex")
    write_refs("stft_complex", [("x", x)], [("y", y)])
    save_unchecked(model([helper.make_node("DFT", ["x", "n"], ["y"], "dft")],
                         [f32("x", [1, 4, 1])], [f32("y", [1, 4, 2])],
                         [init("n", np.int64(1 << 24))], opset=17),
                   "bad_dft_length")
    save_unchecked(model([helper.make_node("STFT", ["x", "step", "", "len"],
                                           ["y"], "stft")],
                         [f32("x", [1, 8, 1])], [f32("y", [1, 1, 9, 2])],
                         [init("step", np.int64(2)), init("len", np.int64(16))],
                         opset=17), "bad_stft_frame")


def fold_floats():
    """A Range whose bounds are float arithmetic on constants, as ONNX's
    expanded window functions compute them: start Cast(1), limit
    Relu(Ceil(7 / 2 - 0.25)) = 4, delta 0.5; the loader must know them."""
    nodes = [
        helper.make_node("Cast", ["one"], ["start"], "cast", to=TensorProto.FLOAT),
        helper.make_node("Div", ["seven", "two"], ["q"], "div"),
        helper.make_node("Sub", ["q", "quarter"], ["d"], "sub"),
        helper.make_node("Ceil", ["d"], ["c"], "ceil"),
        helper.make_node("Relu", ["c"], ["limit"], "relu"),
        helper.make_node("Range", ["start", "limit", "half"], ["r"], "range"),
        helper.make_node("Add", ["x", "r"], ["y"], "add"),
    ]
    inits = [init("one", np.int64(1)), init("seven", np.float32(7)),
             init("two", np.float32(2)), init("quarter", np.float32(0.25)),
             init("half", np.float32(0.5))]
    save(model(nodes, [f32("x", [6])], [f32("y", [6])], inits), "fold_floats")
    x = rng.standard_normal(6).astype(np.float32)
    write_refs("fold_floats", [("x", x)],
               [("y", x + np.arange(1, 4, 0.5, dtype=np.float32))])


def bit_shift():
    """BitShift: uint8 left shifts that wrap modulo 256, uint16 right shifts
    broadcast over a row of amounts."""
    u = lambda name, t, shape: helper.make_tensor_value_info(name, t, shape)
    x8 = np.array([200, 3, 255, 1], np.uint8)
    y8 = np.array([1, 2, 3, 7], np.uint8)
    x16 = np.array([[65535, 1024, 7], [300, 2, 9]], np.uint16)
    y16 = np.array([3, 1, 0], np.uint16)
    nodes = [helper.make_node("BitShift", ["a", "b"], ["l"], "left",
                              direction="LEFT"),
             helper.make_node("BitShift", ["c", "d"], ["r"], "right",
                              direction="RIGHT")]
    m = model(nodes, [u("a", TensorProto.UINT8, [4]),
                      u("b", TensorProto.UINT8, [4]),
                      u("c", TensorProto.UINT16, [2, 3]),
                      u("d", TensorProto.UINT16, [3])],
              [u("l", TensorProto.UINT8, [4]), u("r", TensorProto.UINT16, [2, 3])],
              [], opset=11)
    save(m, "bit_shift")
    write_refs("bit_shift", [("a", x8), ("b", y8), ("c", x16), ("d", y16)],
               [("l", (x8 << y8).astype(np.uint8)), ("r", x16 >> y16)])


def quant():
    """Quantized ops against NumPy: QuantizeLinear per channel to int8
    (halves to even, saturation), DequantizeLinear per channel, MatMulInteger
    with a zero point per row of A, QLinearConv with a scale per output
    channel and a bias."""
    T = TensorProto
    v = lambda name, t, shape: helper.make_tensor_value_info(name, t, shape)
    x = np.array([[[0.5, 1.5, -2.5], [300, -300, 0.26]],
                  [[2.0, -1.0, 0.75], [12.5, -12.5, 3.3]]], np.float32)
    qs = np.array([0.5, 0.1], np.float32)     # per axis 1
    qz = np.array([3, -4], np.int8)
    q = np.clip(np.rint(x / qs[None, :, None]) + qz[None, :, None],
                -128, 127).astype(np.int32)
    xi = np.array([[0, 255, 7], [128, 3, 90]], np.uint8)
    ds = np.array([0.25, 2.0, 0.125], np.float32)  # per axis 1
    dz = np.array([1, 128, 0], np.uint8)
    dq = ((xi.astype(np.float32) - dz) * ds).astype(np.float32)
    a = np.array([[3, 250, 7], [100, 0, 255]], np.uint8)
    b = np.array([[1, 2], [3, 4], [250, 0]], np.uint8)
    az = np.array([2, 100], np.uint8)                 # per row
    mm = ((a.astype(np.int64) - az[:, None]) @ b.astype(np.int64)).astype(np.int32)
    cx = rng.integers(0, 256, (1, 2, 4, 4)).astype(np.uint8)
    cw = rng.integers(0, 256, (3, 2, 2, 2)).astype(np.uint8)
    cb = np.array([100, -5000, 7], np.int32)
    sx, sy, zx, zw, zy = np.float32(0.02), np.float32(0.5), 120, 128, 10
    sw = np.array([0.01, 0.002, 0.03], np.float32)
    acc = np.zeros((1, 3, 3, 3), np.int64)
    for o in range(3):
        for i in range(3):
            for j in range(3):
                acc[0, o, i, j] = ((cx[0, :, i:i + 2, j:j + 2].astype(np.int64) - zx)
                                   * (cw[o].astype(np.int64) - zw)).sum()
    real = (acc + cb[None, :, None, None]) * (sx * sw / sy)[None, :, None, None]
    qc = np.clip(np.rint(real) + zy, 0, 255).astype(np.int32)
    nodes = [helper.make_node("QuantizeLinear", ["x", "qs", "qz"], ["q"], "q",
                              axis=1),
             helper.make_node("DequantizeLinear", ["xi", "ds", "dz"], ["dq"],
                              "dq", axis=-1),
             helper.make_node("MatMulInteger", ["a", "b", "az"], ["mm"], "mm"),
             helper.make_node("QLinearConv", ["cx", "sx", "zx", "cw", "sw",
                                              "zw", "sy", "zy", "cb"], ["qc"],
                              "qc")]
    inits = [init("qs", qs), init("qz", qz), init("ds", ds), init("dz", dz),
             init("az", az), init("sx", sx), init("zx", np.uint8(zx)),
             init("sw", sw), init("zw", np.uint8(zw)), init("sy", sy),
             init("zy", np.uint8(zy)), init("cb", cb)]
    m = model(nodes, [f32("x", [2, 2, 3]), v("xi", T.UINT8, [2, 3]),
                      v("a", T.UINT8, [2, 3]), v("b", T.UINT8, [3, 2]),
                      v("cx", T.UINT8, [1, 2, 4, 4]), v("cw", T.UINT8, [3, 2, 2, 2])],
              [v("q", T.INT8, [2, 2, 3]), f32("dq", [2, 3]),
               v("mm", T.INT32, [2, 2]), v("qc", T.UINT8, [1, 3, 3, 3])],
              inits, opset=13)
    save(m, "quant")
    write_refs("quant", [("x", x), ("xi", xi), ("a", a), ("b", b),
                         ("cx", cx), ("cw", cw)],
               [("q", q), ("dq", dq), ("mm", mm), ("qc", qc)])


def train_ops():
    """ai.onnx.preview.training: Adagrad, Nesterov Momentum and Adam at step
    T = 3 (the bias correction and beta apply), and Gradient of d = (a + b)
    * a with respect to a and b, against the operators' formulas in NumPy."""
    dom = "ai.onnx.preview.training"
    R, T = np.float32(0.1), np.int64(3)
    x = np.array([1.0, -2.0], np.float32)
    g = np.array([0.5, 0.25], np.float32)
    v = np.array([0.2, -0.1], np.float32)
    h = np.array([0.3, 0.4], np.float32)
    nc = np.float32(0.01)
    gr = nc * x + g
    # Adagrad, decay 0.5, epsilon 1e-3
    r = R / (1 + T * np.float32(0.5))
    h_ada = h + gr * gr
    x_ada = x - r * gr / (np.sqrt(h_ada) + np.float32(1e-3))
    # Nesterov momentum, alpha 0.9, beta 0.5
    v_mom = 0.9 * v + 0.5 * gr
    x_mom = x - R * (gr + 0.9 * v_mom)
    # Adam, alpha 0.9, beta 0.99, epsilon 1e-4, post 0.1
    v_adam = 0.9 * v + 0.1 * gr
    h_adam = 0.99 * h + 0.01 * gr * gr
    ra = R * np.sqrt(1 - 0.99 ** 3) / (1 - 0.9 ** 3)
    x_adam = (1 - 0.1) * (x - ra * v_adam / (np.sqrt(h_adam) + 1e-4))
    a, b = np.float32(1.5), np.float32(-0.5)
    nodes = [helper.make_node("Adagrad", ["R", "T", "x", "g", "h"],
                              ["x_ada", "h_ada"], "ada", domain=dom,
                              decay_factor=0.5, epsilon=1e-3,
                              norm_coefficient=0.01),
             helper.make_node("Momentum", ["R", "T", "x", "g", "v"],
                              ["x_mom", "v_mom"], "mom", domain=dom, alpha=0.9,
                              beta=0.5, mode="nesterov", norm_coefficient=0.01),
             helper.make_node("Adam", ["R", "T", "x", "g", "v", "h"],
                              ["x_adam", "v_adam", "h_adam"], "adam",
                              domain=dom, alpha=0.9, beta=0.99, epsilon=1e-4,
                              norm_coefficient=0.01,
                              norm_coefficient_post=0.1),
             helper.make_node("Add", ["a", "b"], ["c"], "add"),
             helper.make_node("Mul", ["c", "a"], ["d"], "mul"),
             helper.make_node("Gradient", ["a", "b"], ["dd_da", "dd_db"],
                              "grad", domain=dom, xs=["a", "b"], y="d")]
    outs = [("x_ada", x_ada), ("h_ada", h_ada), ("x_mom", x_mom),
            ("v_mom", v_mom), ("x_adam", x_adam), ("v_adam", v_adam),
            ("h_adam", h_adam), ("dd_da", np.float32(2 * a + b)),
            ("dd_db", np.float32(a))]
    ins = [("x", x), ("g", g), ("v", v), ("h", h), ("a", a), ("b", b)]
    g_ = helper.make_graph(nodes, "g", [f32(k, list(np.shape(val))) for k, val in ins],
                           [f32(k, list(np.shape(val))) for k, val in outs],
                           [init("R", R), init("T", T)])
    m = helper.make_model(g_, producer_name="kiln-tests",
                          opset_imports=[helper.make_opsetid("", 13),
                                         helper.make_opsetid(dom, 1)])
    save_unchecked(m, "train_ops")
    write_refs("train_ops", [(k, np.asarray(val, np.float32)) for k, val in ins],
               [(k, np.asarray(val, np.float32)) for k, val in outs])


def main():
    os.makedirs(OUT, exist_ok=True)
    mlp()
    cnn()
    shapes()
    shape_arith()
    unsupported()
    hostile()
    upsample()
    reorder()
    control()
    deep()
    spectral()
    fold_floats()
    bit_shift()
    quant()
    train_ops()


if __name__ == "__main__":
    main()
