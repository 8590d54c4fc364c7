#!/usr/bin/python3
"""Hostile models from an audit of the ONNX importer's converters (kept by
tests/test_onnx_fuzz.c beside the fuzzer's finds): each reached undefined
behaviour or a load-time allocation of a declared size before its fix.

audit_poison_then_stft: a QLinearConv whose weight does not fit its input
  (the convolution fails) and whose w_scale is per channel: it read the
  channels from the poisoned result and gave up with a problem of its
  own, so the loader went on to build the STFT on the poisoned graph
  (its frames' shape read at index -1).
audit_tile_overflow: Tile by 2^62 repeats (the output size overflowed).
audit_depth_to_space: DepthToSpace of blocksize 2^32 over no channels
  (blocksize squared overflowed).
audit_einsum_broadcast: Einsum "kl,kl->" of [2^40, 1] and [1, 2^40] (the
  broadcast sizes' product overflowed).
audit_conv_same_kernel: Conv with auto_pad SAME_UPPER, a weight of kernel
  2^35 and dilation 2^31 - 1 (the dilated span overflowed).
audit_loop_nine_dims: a Loop whose scan output has 8 dims (stacked into 9:
  written past the shape's dims).
audit_gather_nd_empty: GatherND with a batch dim of 0 (rows per batch
  divided 0 by 0).
audit_dft_scalar: DFT of a 0-d signal (its last dim read at index -1).
audit_resize_poisoned: Resize whose first axis's product fails (over 2^40
  elements): the next axis read its input size, 0, from the poisoned
  result and divided by it.
audit_lstm_hidden: LSTM of hidden_size 2^62 (gates times hidden overflowed).
audit_matmul_vector: MatMul of a vector [3] by [4, 5] (the product fails):
  the vector's axis was dropped from the poisoned result's dims (index -2).
audit_mel_huge: MelWeightMatrix of 1e30 mel bins (converted to int64 before
  the range check: undefined).
audit_pool3d_depth: a 3-D MaxPool strided over a depth of 2^31 (a table of
  2^30 depths made while loading, its positions past int32).
audit_cumsum_long: a reversed CumSum over 2^32 points (a 16 GiB table of
  positions made while loading, past int32).
audit_unpool_stride: MaxUnpool of 2^39 points by a stride of 2^31 - 1 (the
  unpooled size overflowed).
audit_lrn_window: LRN of size 2^31 over 2^30 channels (a slice per channel
  of the window: 2^31 nodes).
audit_pool3d_deep: a 3-D MaxPool 2^30 deep (a few nodes per depth tap).
audit_tables_huge: tables of positions as long as a declared dim of 2^31 - 1
  (a strided Slice, a reversed CumSum, a 3-D pool strided in depth): 4 to
  8 GiB each while loading; they load.
audit_range_huge: Range of 2^30 floats from three scalars (a 4 GiB
  constant made while loading).
audit_pad_huge: Pad in reflect mode by 2^62 (the padded size overflowed).
audit_fills_huge: ops whose constants took their input's declared size
  while loading (ConstantOfShape, Dropout's mask, AveragePool's divisor,
  ScatterElements, ScatterND, MaxUnpool, EyeLike, Det of empty matrices,
  a GRU's initial state, MaxPool's Indices grids) on inputs of up to 2^40
  elements: they load.

Run: /usr/bin/python3 tests/ref/make_onnx_audit_models.py  (python3-onnx).
"""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from make_onnx_models import save_unchecked

BIG = 1 << 40


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def i64(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.INT64, shape)


def ints(name, v):
    return numpy_helper.from_array(np.array(v, np.int64), name)


def write(name, nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    save_unchecked(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)],
        producer_name="kiln-tests"), name)


def main():
    big = (1 << 31) - 1
    u8 = lambda name, shape: helper.make_tensor_value_info(
        name, TensorProto.UINT8, shape)
    zp = lambda name: numpy_helper.from_array(np.array(0, np.uint8), name)
    one = lambda name, n=None: numpy_helper.from_array(
        np.ones(n, np.float32) if n else np.array(1, np.float32), name)
    write("audit_poison_then_stft",
          [helper.make_node("QLinearConv",
                            ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"],
                            ["q"], "qconv"),
           helper.make_node("STFT", ["s", "step", "", "len"], ["y"], "stft")],
          [u8("x", [1, 3, 4, 4]), u8("w", [2, 2, 3, 3]),
           f32("s", [1, 16, 1])],
          [u8("q", None), f32("y", None)],
          [one("xs"), zp("xz"), one("ws", 2), zp("wz"), one("ys"), zp("yz"),
           ints("step", 4), ints("len", 8)], opset=17)
    write("audit_tile_overflow",
          [helper.make_node("Tile", ["x", "r"], ["y"], "tile")],
          [f32("x", [2, 3])], [f32("y", None)], [ints("r", [1 << 62, 1])])
    write("audit_depth_to_space",
          [helper.make_node("DepthToSpace", ["x"], ["y"], "d2s",
                            blocksize=1 << 32)],
          [f32("x", [1, 0, 2, 2])], [f32("y", None)])
    write("audit_einsum_broadcast",
          [helper.make_node("Einsum", ["a", "b"], ["y"], "es",
                            equation="kl,kl->")],
          [f32("a", [BIG, 1]), f32("b", [1, BIG])], [f32("y", None)])
    write("audit_conv_same_kernel",
          [helper.make_node("Conv", ["x", "w"], ["y"], "conv",
                            auto_pad="SAME_UPPER", dilations=[big, 1])],
          [f32("x", [1, 1, 4, 4]), f32("w", [1, 1, 1 << 35, 1])],
          [f32("y", None)])
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Identity", ["v"], ["s_out"])], "body",
        [i64("i", []), helper.make_tensor_value_info("c_in", TensorProto.BOOL,
                                                     [])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         f32("s_out", [1] * 8)])
    write("audit_loop_nine_dims",
          [helper.make_node("Loop", ["m", ""], ["y"], "loop", body=body)],
          [f32("v", [1] * 8)], [f32("y", None)], [ints("m", 2)])
    write("audit_gather_nd_empty",
          [helper.make_node("GatherND", ["x", "i"], ["y"], "gnd",
                            batch_dims=1)],
          [f32("x", [0, 3])], [f32("y", None)],
          [numpy_helper.from_array(np.zeros((0, 1), np.int64), "i")])
    write("audit_dft_scalar",
          [helper.make_node("DFT", ["x"], ["y"], "dft", axis=0)],
          [f32("x", [])], [f32("y", None)], opset=17)
    write("audit_resize_poisoned",
          [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], "resize")],
          [f32("x", [2, 1 << 19, 1 << 20])], [f32("y", None)],
          [ints("sizes", [1024, 1 << 19, 1 << 20])])
    write("audit_lstm_hidden",
          [helper.make_node("LSTM", ["x", "w", "r"], ["y"], "lstm",
                            hidden_size=1 << 62)],
          [f32("x", [2, 1, 3]), f32("w", [1, 4, 3]), f32("r", [1, 4, 1])],
          [f32("y", None)])
    write("audit_matmul_vector",
          [helper.make_node("MatMul", ["a", "b"], ["y"], "mm")],
          [f32("a", [3]), f32("b", [4, 5])], [f32("y", None)])
    fl = lambda name, v: numpy_helper.from_array(np.array(v, np.float32),
                                                 name)
    write("audit_mel_huge",
          [helper.make_node("MelWeightMatrix", ["m", "d", "r", "lo", "hi"],
                            ["y"], "mel")],
          [], [f32("y", None)],
          [fl("m", 1e30), ints("d", 16), ints("r", 8000), fl("lo", 0),
           fl("hi", 4000)], opset=17)
    write("audit_pool3d_depth",
          [helper.make_node("MaxPool", ["x"], ["y"], "pool3d",
                            kernel_shape=[1, 1, 1], strides=[2, 1, 1])],
          [f32("x", [1, 1, 1 << 31, 1, 1])], [f32("y", None)])
    write("audit_cumsum_long",
          [helper.make_node("CumSum", ["x", "axis"], ["y"], "cumsum",
                            reverse=1)],
          [f32("x", [1 << 32])], [f32("y", None)], [ints("axis", 0)])
    write("audit_unpool_stride",
          [helper.make_node("MaxUnpool", ["x", "i"], ["y"], "unpool",
                            kernel_shape=[1], strides=[big])],
          [f32("x", [1, 1, 1 << 39]), i64("i", [1, 1, 1 << 39])],
          [f32("y", None)], opset=11)
    write("audit_lrn_window",
          [helper.make_node("LRN", ["x"], ["y"], "lrn", size=1 << 31)],
          [f32("x", [1, 1 << 30, 1])], [f32("y", None)])
    write("audit_pool3d_deep",
          [helper.make_node("MaxPool", ["x"], ["y"], "pool3d",
                            kernel_shape=[1 << 30, 1, 1])],
          [f32("x", [1, 1, 1 << 30, 1, 1])], [f32("y", None)])
    long = (1 << 31) - 1
    write("audit_tables_huge",
          [helper.make_node("Slice", ["v", "s0", "e0", "a0", "st0"], ["y0"],
                            "slice"),
           helper.make_node("CumSum", ["v", "a0"], ["y1"], "cumsum",
                            reverse=1),
           helper.make_node("MaxPool", ["vol"], ["y2"], "pool3d",
                            kernel_shape=[1, 1, 1], strides=[2, 1, 1])],
          [f32("v", [long]), f32("vol", [1, 1, long, 1, 1])],
          [f32("y%d" % k, None) for k in range(3)],
          [ints("s0", [0]), ints("e0", [long]), ints("a0", [0]),
           ints("st0", [2])])
    write("audit_range_huge",
          [helper.make_node("Range", ["a", "b", "d"], ["y"], "range")],
          [], [f32("y", None)],
          [numpy_helper.from_array(np.array(v, np.float32), nm)
           for nm, v in (("a", 0), ("b", 2 ** 30), ("d", 1))], opset=13)
    write("audit_pad_huge",
          [helper.make_node("Pad", ["x", "p"], ["y"], "pad", mode="reflect")],
          [f32("x", [2, 3])], [f32("y", None)],
          [ints("p", [0, 1 << 62, 0, 1 << 62])])
    side = 1 << 20
    write("audit_fills_huge",
          [helper.make_node("ConstantOfShape", ["shape"], ["y0"], "cos"),
           helper.make_node("Dropout", ["x"], ["y1", "mask"], "drop"),
           helper.make_node("AveragePool", ["img2"], ["y2"], "pool",
                            kernel_shape=[3, 3], pads=[0, 0, 1, 1]),
           helper.make_node("ScatterElements", ["x", "idx", "upd"], ["y3"],
                            "scatter"),
           helper.make_node("ScatterND", ["x_nd", "idx_nd", "upd_nd"], ["y4"],
                            "scatter_nd"),
           helper.make_node("MaxUnpool", ["img2", "img_idx"], ["y5"],
                            "unpool", kernel_shape=[2, 2], strides=[2, 2]),
           helper.make_node("EyeLike", ["x"], ["y6"], "eye"),
           helper.make_node("Det", ["empty"], ["y7"], "det"),
           helper.make_node("GRU", ["seq", "gw", "gr"], ["y8"], "gru",
                            hidden_size=1 << 18),
           helper.make_node("MaxPool", ["pool_in"], ["y9", "y10"],
                            "pool_idx", kernel_shape=[1, 1])],
          [f32("x", [side, side]), f32("x_nd", [side, 1024]),
           f32("img2", [1, 1, 1 << 19, 1 << 19]),
           i64("img_idx", [1, 1, 1 << 19, 1 << 19]),
           f32("empty", [BIG, 0, 0]), f32("seq", [1, side, 1]),
           f32("gw", [1, 3 << 18, 1]), f32("gr", [1, 3 << 18, 1 << 18]),
           f32("pool_in", [1, 1, 1 << 13, 1 << 16])],
          [f32("y%d" % k, None) for k in range(11)] + [f32("mask", None)],
          [ints("shape", [side, side]), ints("idx", [[0, 1]]),
           numpy_helper.from_array(np.ones((1, 2), np.float32), "upd"),
           ints("idx_nd", [[0], [2]]),
           numpy_helper.from_array(np.ones((2, 1024), np.float32), "upd_nd")],
          opset=13)


if __name__ == "__main__":
    main()
