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
  more_slice, more_slice_extreme
              Slice with negative and strided steps, starts and ends past
              the ends, the extreme int64 steps.
  more_scatter_mul
              ScatterND with reduction 'mul', a row updated three times.
  more_det, more_det_2d
              Det of a batch of matrices and of one needing a row swap.
  more_mel    MelWeightMatrix (ONNX's reference formula) applied to x.
  more_roi, more_roi_v10
              RoiAlign (avg) in both coordinate modes, rois across the edges.
  more_resize_tf_nn
              Resize nearest with tf_half_pixel_for_nn coordinates.
  more_resize_crop
              Resize linear with tf_crop_and_resize, points outside.

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


def i64(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.INT64, shape)


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


def i64_init(name, v):
    return helper.make_tensor(name, TensorProto.INT64, [len(v)], v)


def slice_model(name, shape, starts, ends, axes, steps):
    """Slice of x by known starts, ends, axes and steps; y from Python's
    own slicing, dx from torch.index_select at the positions it takes."""
    x = rng.uniform(-2, 2, shape).astype(np.float32)
    inits = [i64_init("starts", starts), i64_init("ends", ends),
             i64_init("axes", axes), i64_init("steps", steps)]
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"],
                            ["y"])
    index = [slice(None)] * len(shape)
    for b, e, a, st in zip(starts, ends, axes, steps):
        index[a] = slice(b, e, st)
    y = x[tuple(index)]
    m = model([node], [f32("x", list(shape))], [f32("y", list(y.shape))],
              inits)
    save(m, name)

    def taken(t):
        for a in range(len(shape)):
            pos = np.arange(shape[a])[index[a]]
            t = torch.index_select(t, a, torch.tensor(pos.copy(), dtype=torch.long))
        return t
    ty, dx = torch_ref(taken, x)
    assert np.array_equal(ty, y)
    write_refs(name, [("x", x)], [("y", y), ("dx", dx)])


INT64_MAX, INT64_MIN = 2**63 - 1, -2**63


def slice_models():
    # backward whole, forward by 2, backward by 2 from past the end, and
    # a negative axis
    slice_model("more_slice", (4, 5, 6, 3), [-1, 0, 100, 2],
                [INT64_MIN, 5, 0, -4], [0, 1, 2, -1], [-1, 2, -2, -1])
    # the extreme steps the file may hold: one position each
    slice_model("more_slice_extreme", (3, 4), [INT64_MAX, INT64_MIN],
                [INT64_MIN, INT64_MAX], [0, 1], [INT64_MIN, INT64_MAX])


def scatter_mul_model():
    """ScatterND(x, rows, u, reduction='mul') with u = Gather(x) * w: row 1
    updated three times, so the gradient reaches x by both ways."""
    x = rng.uniform(-2, 2, (5, 3)).astype(np.float32)
    rows = [1, 3, 1, 0, 1]
    pick = [2, 4, 0, 1, 2]
    w = rng.uniform(-1.5, 1.5, (5, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Gather", ["x", "pick"], ["g"], axis=0),
        helper.make_node("Mul", ["g", "w"], ["u"]),
        helper.make_node("ScatterND", ["x", "rows", "u"], ["y"],
                         reduction="mul"),
    ]
    inits = [helper.make_tensor("rows", TensorProto.INT64, [5, 1], rows),
             i64_init("pick", pick),
             helper.make_tensor("w", TensorProto.FLOAT, [5, 3],
                                w.ravel().tolist())]
    m = model(nodes, [f32("x", [5, 3])], [f32("y", [5, 3])], inits, opset=16)
    save(m, "more_scatter_mul")
    wt = torch.tensor(w)

    def scatter(t):
        u = t[pick] * wt
        out = list(t)
        for k, r in enumerate(rows):
            out[r] = out[r] * u[k]
        return torch.stack(out)
    y, dx = torch_ref(scatter, x)
    write_refs("more_scatter_mul", [("x", x)], [("y", y), ("dx", dx)])


def det_models():
    """Det of a batch of 4 x 4 matrices and of one 5 x 5 whose first pivot
    is 0 (a swap is forced); torch.linalg.det's values and gradients."""
    x = rng.uniform(-2, 2, (3, 4, 4)).astype(np.float32)
    x[1] += 3 * np.eye(4, dtype=np.float32)
    m = model([helper.make_node("Det", ["x"], ["y"])], [f32("x", [3, 4, 4])],
              [f32("y", [3])], [])
    save(m, "more_det")
    y, dx = torch_ref(torch.linalg.det, x)
    write_refs("more_det", [("x", x)], [("y", y), ("dx", dx)])
    x = rng.uniform(-2, 2, (5, 5)).astype(np.float32)
    x[0, 0] = 0
    m = model([helper.make_node("Det", ["x"], ["y"])], [f32("x", [5, 5])],
              [f32("y", [])], [])
    save(m, "more_det_2d")
    y, dx = torch_ref(torch.linalg.det, x)
    write_refs("more_det_2d", [("x", x)], [("y", y), ("dx", dx)])


def mel_matrix(mels, dft, rate, lo, hi):
    """ONNX's reference (onnx/backend/test/case/node/melweightmatrix.py)."""
    bins = dft // 2 + 1
    fb = np.arange(0, mels + 2)
    lo_mel = 2595 * np.log10(1 + np.float32(lo) / 700)
    hi_mel = 2595 * np.log10(1 + np.float32(hi) / 700)
    step = (hi_mel - lo_mel) / fb.shape[0]
    fb = fb * step + lo_mel
    fb = 700 * (np.power(10, (fb / 2595)) - 1)
    fb = ((np.int32(dft) + 1) * fb) // np.int32(rate)
    fb = fb.astype(int)
    out = np.zeros((bins, mels))
    for i in range(mels):
        left, centre, right = fb[i], fb[i + 1], fb[i + 2]
        if centre == left:
            out[centre, i] = 1
        else:
            for j in range(left, centre + 1):
                out[j, i] = float(j - left) / float(centre - left)
        if right > centre:
            for j in range(centre, right):
                out[j, i] = float(right - j) / float(right - centre)
    return out.astype(np.float32)


def mel_inits(mels, dft, rate, lo, hi):
    return [helper.make_tensor("mels", TensorProto.INT64, [], [mels]),
            helper.make_tensor("dft", TensorProto.INT64, [], [dft]),
            helper.make_tensor("rate", TensorProto.INT64, [], [rate]),
            helper.make_tensor("lo", TensorProto.FLOAT, [], [lo]),
            helper.make_tensor("hi", TensorProto.FLOAT, [], [hi])]


MEL_NODE = helper.make_node("MelWeightMatrix",
                            ["mels", "dft", "rate", "lo", "hi"], ["w"])


def mel_model():
    """A power spectrum x [3, 33] times the mel filters of a 64-point DFT
    at 16 kHz, 10 bands from 100 to 7000 Hz."""
    w = mel_matrix(10, 64, 16000, 100.0, 7000.0)
    x = rng.uniform(0, 2, (3, 33)).astype(np.float32)
    nodes = [MEL_NODE, helper.make_node("MatMul", ["x", "w"], ["y"])]
    m = model(nodes, [f32("x", [3, 33])], [f32("y", [3, 10])],
              mel_inits(10, 64, 16000, 100.0, 7000.0), opset=17)
    save(m, "more_mel")
    y, dx = torch_ref(lambda t: t @ torch.tensor(w), x)
    write_refs("more_mel", [("x", x)], [("y", y), ("dx", dx)])


def roi_align_ref(x, rois, batch, oh, ow, ratio, scale, half_pixel):
    """ONNX Runtime's RoiAlign (mode avg) in plain loops, and the gradient
    of the sum of its output with respect to x (it is linear in x)."""
    n, ch, H, W = x.shape
    y = np.zeros((len(rois), ch, oh, ow), np.float64)
    dx = np.zeros(x.shape, np.float64)
    off = 0.5 if half_pixel else 0.0
    for r, (roi, b) in enumerate(zip(rois.astype(np.float64), batch)):
        x1, y1, x2, y2 = roi * scale - off
        rw, rh = x2 - x1, y2 - y1
        if not half_pixel:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        for ph in range(oh):
            for pw in range(ow):
                taps = []
                for iy in range(ratio):
                    for ix in range(ratio):
                        yy = y1 + ph * rh / oh + (iy + 0.5) * rh / oh / ratio
                        xx = x1 + pw * rw / ow + (ix + 0.5) * rw / ow / ratio
                        if yy < -1 or yy > H or xx < -1 or xx > W:
                            continue
                        yy, xx = max(yy, 0.0), max(xx, 0.0)
                        yl, xl = int(yy), int(xx)
                        if yl >= H - 1:
                            yh = yl = H - 1
                            yy = float(yl)
                        else:
                            yh = yl + 1
                        if xl >= W - 1:
                            xh = xl = W - 1
                            xx = float(xl)
                        else:
                            xh = xl + 1
                        ly, lx = yy - yl, xx - xl
                        taps += [((1 - ly) * (1 - lx), yl, xl),
                                 ((1 - ly) * lx, yl, xh),
                                 (ly * (1 - lx), yh, xl), (ly * lx, yh, xh)]
                for wt, yi, xi in taps:
                    wt /= ratio * ratio
                    y[r, :, ph, pw] += wt * x[b, :, yi, xi]
                    dx[b, :, yi, xi] += wt
    return y.astype(np.float32), dx.astype(np.float32)


def roi_models():
    """RoiAlign of a [2, 3, 6, 7] map by rois inside, across and outside
    its edges: half_pixel at opset 16 (spatial_scale 0.5) and opset 10's
    output_half_pixel (rois at least 1 x 1)."""
    x = rng.uniform(-2, 2, (2, 3, 6, 7)).astype(np.float32)
    rois = np.array([[1, 1, 9, 7], [-4, -2, 5, 3], [10, 8, 16, 14],
                     [3, 2, 3.5, 2.2]], np.float32)
    batch = [0, 1, 1, 0]
    for name, opset, half in (("more_roi", 16, True),
                              ("more_roi_v10", 10, False)):
        attrs = dict(output_height=3, output_width=4, sampling_ratio=2,
                     spatial_scale=0.5)
        if opset == 16:
            attrs["coordinate_transformation_mode"] = "half_pixel"
        node = helper.make_node("RoiAlign", ["x", "rois", "bi"], ["y"],
                                **attrs)
        inits = [helper.make_tensor("rois", TensorProto.FLOAT, [4, 4],
                                    rois.ravel().tolist()),
                 i64_init("bi", batch)]
        m = model([node], [f32("x", [2, 3, 6, 7])], [f32("y", [4, 3, 3, 4])],
                  inits, opset=opset)
        save(m, name)
        y, dx = roi_align_ref(x, rois, batch, 3, 4, 2, 0.5, half)
        write_refs(name, [("x", x)], [("y", y), ("dx", dx)])


def resize_tf_nn_model():
    """Resize nearest (round_prefer_floor) with tf_half_pixel_for_nn from
    [1, 2, 5, 7] to [1, 2, 3, 10]: the source of output point x is
    (x + 0.5) / scale on every axis (ONNX's formula; on the axes of scale
    1 the tie at x + 0.5 rounds down to x itself)."""
    x = rng.uniform(-2, 2, (1, 2, 5, 7)).astype(np.float32)
    out = [1, 2, 3, 10]

    def pick(n_in, n_out):
        src = (np.arange(n_out) + 0.5) / (n_out / n_in)
        idx = np.where(src == np.floor(src) + 0.5, np.floor(src),
                       np.round(src))
        return np.clip(idx, 0, n_in - 1).astype(int)
    rows, cols = pick(5, 3), pick(7, 10)
    y = x[:, :, rows][:, :, :, cols]
    dx = np.zeros_like(x)
    for r in rows:
        for c in cols:
            dx[:, :, r, c] += 1
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"],
                            mode="nearest", nearest_mode="round_prefer_floor",
                            coordinate_transformation_mode=
                            "tf_half_pixel_for_nn")
    m = model([node], [f32("x", [1, 2, 5, 7])], [f32("y", out)],
              [i64_init("sizes", out)])
    save(m, "more_resize_tf_nn")
    write_refs("more_resize_tf_nn", [("x", x)], [("y", y), ("dx", dx)])


def resize_crop_model():
    """Resize linear with tf_crop_and_resize: a roi reaching past the
    input on H and W (those points take extrapolation_value 10); values
    from ONNX's own reference (interpolate_nd), the gradient of the sum
    column by column (the op is affine in x)."""
    from onnx.backend.test.case.node.resize import (interpolate_nd,
                                                    linear_coeffs)
    x = rng.uniform(-2, 2, (1, 2, 4, 5)).astype(np.float32)
    out = [1, 2, 3, 4]
    roi = np.array([0, 0, -0.2, 0.3, 1, 1, 0.7, 1.4], np.float32)

    def ref(v):
        return interpolate_nd(v, linear_coeffs, output_size=out, roi=roi,
                              coordinate_transformation_mode=
                              "tf_crop_and_resize", extrapolation_value=10.0)
    y = ref(x).astype(np.float32)
    base = ref(np.zeros_like(x))
    dx = np.zeros(x.size, np.float32)
    for i in range(x.size):
        e = np.zeros(x.size, np.float32)
        e[i] = 1
        dx[i] = (ref(e.reshape(x.shape)) - base).sum()
    node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"],
                            mode="linear", extrapolation_value=10.0,
                            coordinate_transformation_mode=
                            "tf_crop_and_resize")
    inits = [helper.make_tensor("roi", TensorProto.FLOAT, [8], roi.tolist()),
             i64_init("sizes", out)]
    m = model([node], [f32("x", [1, 2, 4, 5])], [f32("y", out)], inits)
    save(m, "more_resize_crop")
    write_refs("more_resize_crop", [("x", x)],
               [("y", y), ("dx", dx.reshape(x.shape))])


def bad_models():
    # a float16 initializer whose raw_data holds 3 bytes for 2 values
    short = helper.make_tensor("w", TensorProto.FLOAT16, [2], b"\0\0\0\0",
                               raw=True)
    short.raw_data = b"\0\0\0"
    m = model([helper.make_node("Mul", ["x", "w"], ["y"])],
              [f32("x", [2])], [f32("y", [2])], [short])
    save_unchecked(m, "bad_half_raw")
    # a step of 0
    m = model([helper.make_node("Slice", ["x", "b", "e", "a", "s"], ["y"])],
              [f32("x", [4])], [f32("y", [4])],
              [i64_init("b", [0]), i64_init("e", [4]), i64_init("a", [0]),
               i64_init("s", [0])])
    save_unchecked(m, "bad_slice_step0")
    # one row updated 100 times by 'mul'
    m = model([helper.make_node("ScatterND", ["x", "i", "u"], ["y"],
                                reduction="mul")],
              [f32("x", [4, 2]), f32("u", [100, 2])], [f32("y", [4, 2])],
              [helper.make_tensor("i", TensorProto.INT64, [100, 1],
                                  [0] * 100)], opset=16)
    save_unchecked(m, "bad_scatter_mul_repeat")
    # Det of matrices that are not square, and of huge ones
    m = model([helper.make_node("Det", ["x"], ["y"])], [f32("x", [2, 3, 4])],
              [f32("y", [2])], [])
    save_unchecked(m, "bad_det_shape")
    m = model([helper.make_node("Det", ["x"], ["y"])],
              [f32("x", [100000, 100000])], [f32("y", [])], [])
    save_unchecked(m, "bad_det_huge")
    # mel bands past the spectrum, and a matrix of 10^12 elements
    for name, args in (("bad_mel_edges", (10, 64, 16000, 100.0, 30000.0)),
                       ("bad_mel_huge", (10**6, 2 * 10**6, 16000, 0.0,
                                         8000.0))):
        m = model([MEL_NODE, helper.make_node("Add", ["x", "w"], ["y"])],
                  [f32("x", [1])], [f32("y", [1])], mel_inits(*args),
                  opset=17)
        save_unchecked(m, name)
    # RoiAlign with a NaN spatial_scale, and with a huge output
    for name, attrs in (("bad_roi_nan_scale", dict(spatial_scale=float("nan"))),
                        ("bad_roi_huge", dict(output_height=1 << 40))):
        node = helper.make_node("RoiAlign", ["x", "rois", "bi"], ["y"],
                                sampling_ratio=2, **attrs)
        m = model([node], [f32("x", [1, 1, 4, 4]), f32("rois", [1, 4]),
                           i64("bi", [1])], [f32("y", [1, 1, 1, 1])], [],
                  opset=16)
        save_unchecked(m, name)


half_model()
slice_models()
scatter_mul_model()
det_models()
mel_model()
roi_models()
resize_tf_nn_model()
resize_crop_model()
bad_models()
