#!/usr/bin/python3
"""Writes the seed corpora fuzz/corpus/<reader>/: a few small valid files of
each format and slightly broken variants (truncated, wrong sizes, bad
fields).  Standard library only; run it again after changing it:

    /usr/bin/python3 fuzz/make_corpus.py
"""
import gzip
import io
import json
import os
import re
import shutil
import struct
import warnings
import zipfile
import zlib

warnings.simplefilter("ignore")  # zipfile on the duplicate member
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(reader, name, data):
    d = os.path.join(ROOT, reader)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


def i32(*v):
    return struct.pack("<%di" % len(v), *v)


# ------------------------------------------------------------------ npy

def npy(descr, shape, data, version=1, fortran=False):
    dims = "".join("%d, " % d for d in shape) if len(shape) == 1 else \
        ", ".join(str(d) for d in shape)
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (
        descr, "True" if fortran else "False", dims)
    prefix = 10 if version == 1 else 12
    n = (prefix + len(d) + 1 + 63) // 64 * 64 - prefix
    d = d + " " * (n - len(d) - 1) + "\n"
    size = struct.pack("<H", n) if version == 1 else struct.pack("<I", n)
    return b"\x93NUMPY" + bytes([version, 0]) + size + d.encode() + data


NPY = {
    "f32_2x3": npy("<f4", (2, 3), f32(1, 2, 3, 4, 5, 6)),
    "f64_2": npy("<f8", (2,), struct.pack("<2d", 1.5, -2)),
    "i64_3": npy("<i8", (3,), struct.pack("<3q", 1, -1, 2 ** 40)),
    "u1_4": npy("|u1", (4,), bytes([0, 1, 254, 255])),
    "b1_2": npy("|b1", (2,), bytes([0, 1])),
    "i32_scalar_v2": npy("<i4", (), i32(42), version=2),
    "f32_empty": npy("<f4", (0, 3), b""),
    "truncated": npy("<f4", (2, 3), f32(1, 2, 3)),
    "trailing": npy("<f4", (1,), f32(1, 2)),
    "fortran": npy("<f4", (2, 2), f32(1, 2, 3, 4), fortran=True),
    "big_endian": npy(">f4", (1,), b"\0\0\0\1"),
    "huge_shape": npy("<f4", (1 << 30, 1 << 10), f32(1)),
}


# ------------------------------------------------------------------ npz

def npz(members, method=zipfile.ZIP_STORED):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", method) as z:
        for name, data in members:
            # a fixed time keeps the corpus identical from run to run
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            z.writestr(info, data)
    return b.getvalue()


WEIGHTS = [("W.npy", NPY["f32_2x3"]), ("n.npy", npy("<i4", (2,), i32(3, 4)))]
NPZ = {
    "stored": npz(WEIGHTS),
    "deflated": npz(WEIGHTS, zipfile.ZIP_DEFLATED),
    "mixed_dtypes": npz([("a.npy", NPY["f64_2"]), ("b.npy", NPY["i64_3"]),
                         ("c.npy", NPY["u1_4"]), ("d.npy", NPY["b1_2"])],
                        zipfile.ZIP_DEFLATED),
    "empty": b"PK\x05\x06" + bytes(18),
    "not_npy_member": npz([("readme.txt", b"hello")]),
    "truncated_member": npz([("W.npy", NPY["truncated"])]),
    "duplicate_names": npz([("W.npy", NPY["f32_2x3"]), ("W.npy", NPY["u1_4"])]),
    "cut": npz(WEIGHTS)[:-30],
}


# ----------------------------------------------------------- safetensors

def st(entries, data, extra=None):
    h = dict(extra or {})
    h.update(entries)
    text = json.dumps(h, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def raw_st(text, data):
    """A safetensors file from header text as is (json.dumps cannot write
    repeated keys)."""
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def ent(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": [begin, end]}


SAFETENSORS = {
    "two": st({"W": ent("F32", (2, 3), 0, 24), "n": ent("I32", (2,), 24, 32)},
              f32(1, 2, 3, 4, 5, 6) + i32(3, 4)),
    "metadata": st({"x": ent("F64", (1,), 0, 8)}, struct.pack("<d", 2.5),
                   {"__metadata__": {"format": "pt"}}),
    "types": st({"a": ent("I64", (1,), 0, 8), "b": ent("U8", (2,), 8, 10),
                 "c": ent("BOOL", (2,), 10, 12)},
                struct.pack("<q", -5) + bytes([7, 8, 1, 0])),
    "no_tensors": st({}, b""),
    "only_metadata": st({}, b"", {"__metadata__": {}}),
    "gap": st({"a": ent("F32", (1,), 4, 8)}, f32(0, 1)),
    "overlap": st({"a": ent("F32", (1,), 0, 4), "b": ent("F32", (1,), 0, 4)},
                  f32(1)),
    "bad_dtype": st({"a": ent("F16", (1,), 0, 2)}, b"\0\0"),
    "short": st({"a": ent("F32", (4,), 0, 16)}, f32(1, 2, 3, 4))[:-5],
    "escapes": raw_st(b'{"\\u00e9\\ud83d\\ude00\\n":{"dtype":"F32",'
                      b'"shape":[],"data_offsets":[0,4]}}', f32(1)),
    "duplicate": raw_st(b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                        b'"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}',
                        f32(1, 2)),
}


# ------------------------------------------------------------------ JSON

JSON = {
    "object": b'{"a": [1, 2.5e-3, -0, true, false, null], "b": {"c": "d\\u0041"}}',
    "nested": b"[" * 40 + b"]" * 40,
    "too_deep": b"[" * 100 + b"]" * 100,
    "strings": b'["\\"\\\\\\/\\b\\f\\n\\r\\t", "\\ud83d\\ude00", "\xc3\xa9"]',
    "bad_surrogate": b'["\\udc00"]',
    "trailing_comma": b'{"a": 1,}',
    "numbers": b"[0, -1, 1e5, 1E+5, 1.0e-5, 123456789012345678901234567890]",
    "unterminated": b'{"a": "b',
}
JSON["header"] = SAFETENSORS["two"][8:8 + 96].rstrip()


# ------------------------------------------------------------------- bin

def kiln_bin(tensors):
    table, data, offsets = b"", b"", []
    for name, dtype, shape, raw in tensors:
        off = (len(data) + 63) // 64 * 64
        data = data.ljust(off, b"\0") + raw
        table += struct.pack("<H", len(name)) + name.encode()
        table += bytes([dtype, len(shape)])
        table += b"".join(struct.pack("<q", d) for d in shape)
        table += struct.pack("<QQI", off, len(raw), zlib.crc32(raw))
    data_offset = (64 + len(table) + 63) // 64 * 64
    h = b"KILNBIN\0" + struct.pack("<IIQQQI", 1, len(tensors), len(table),
                                   data_offset, len(data), zlib.crc32(table))
    h += struct.pack("<I", zlib.crc32(h)) + bytes(16)
    return (h + table).ljust(data_offset, b"\0") + data


GOOD_BIN = kiln_bin([("W", 0, (2, 3), f32(1, 2, 3, 4, 5, 6)),
                     ("n", 1, (2,), i32(3, 4))])
BIN = {
    "two": GOOD_BIN,
    "empty": kiln_bin([]),
    "scalar": kiln_bin([("s", 0, (), f32(3))]),
    "bad_crc": GOOD_BIN[:-1] + b"\x7f",
    "data_changed": GOOD_BIN[:-1] + b"\x7f",
    "bad_table": GOOD_BIN[:64] + b"\xff\xff" + GOOD_BIN[66:],
    "truncated": GOOD_BIN[:-8],
    "bad_magic": b"KILNBIX" + GOOD_BIN[7:],
}


# ------------------------------------------------------------------- IDX

def idx(shape, data):
    return bytes([0, 0, 8, len(shape)]) + \
        b"".join(struct.pack(">I", d) for d in shape) + data


IMAGES = idx((2, 3, 3), bytes(range(18)))
IDX = {
    "images": IMAGES,
    "labels": idx((4,), bytes([1, 2, 3, 4])),
    "images_gz": gzip.compress(IMAGES, mtime=0),
    "truncated": IMAGES[:-5],
    "trailing": IMAGES + b"\0",
    "huge_claim": bytes([0, 0, 8, 1]) + struct.pack(">I", 1 << 31) + b"ab",
    "huge_claim_gz": gzip.compress(bytes([0, 0, 8, 1]) +
                                   struct.pack(">I", 1 << 31) + b"ab", mtime=0),
    "bad_type": bytes([0, 0, 9, 1, 0, 0, 0, 1, 5]),
}
IDX_GZ = {k: v for k, v in IDX.items() if not k.endswith("_gz")}


# --------------------------------------------------------------- session

RNG = ("__rng__", i32(1, 2, 3, 4))
SESSION = {
    "npz": npz([("W.npy", npy("<f4", (2, 3), f32(9, 8, 7, 6, 5, 4))),
                ("n.npy", npy("<i4", (2,), i32(1, 2))),
                ("new.npy", npy("<f4", (1,), f32(3))),
                ("__rng__.npy", npy("<i4", (4,), RNG[1]))]),
    "npz_wrong_shape": npz([("W.npy", npy("<f4", (3, 2), f32(*range(6))))]),
    "safetensors": st({"W": ent("F32", (2, 3), 0, 24),
                       "n": ent("I32", (2,), 24, 32),
                       "__rng__": ent("I32", (4,), 32, 48)},
                      f32(9, 8, 7, 6, 5, 4) + i32(1, 2) + RNG[1]),
    "safetensors_bad_rng": st({"__rng__": ent("F32", (4,), 0, 16)},
                              f32(1, 2, 3, 4)),
    "bin": kiln_bin([("W", 0, (2, 3), f32(9, 8, 7, 6, 5, 4)),
                     ("n", 1, (2,), i32(1, 2)), ("__rng__", 1, (4,), RNG[1])]),
    "bin_wrong_dtype": kiln_bin([("n", 0, (2,), f32(1, 2))]),
}


# ------------------------------------------------------------------ onnx
# Copies, not generated: the importer's own test models (tests/ref/onnx,
# those under 64 KiB) and a few of Debian's libonnx-testdata models that
# carry initializers, Constants and the window and shape ops.

ONNX_REF = os.path.join(os.path.dirname(ROOT), "..", "tests", "ref", "onnx")
ONNX_TESTDATA = "/usr/share/libonnx-testdata/data"
ONNX_PICKS = [
    "node/test_conv_with_strides_padding", "node/test_maxpool_2d_pads",
    "node/test_averagepool_2d_same_upper", "node/test_batchnorm_example",
    "node/test_gemm_default_single_elem_vector_bias", "node/test_slice",
    "node/test_gather_0", "node/test_concat_3d_axis_1",
    "node/test_constantofshape_int_zeros", "node/test_expand_dim_changed",
    "node/test_layer_normalization_2d_axis0", "node/test_tile",
    "node/test_range_float_type_positive_delta", "node/test_where_example",
    "node/test_split_equal_parts_1d", "node/test_einsum_batch_matmul",
    "pytorch-converted/test_PReLU_2d_multiparam",
    "pytorch-converted/test_ReflectionPad2d",
    "pytorch-operator/test_operator_chunk",
    "pytorch-operator/test_operator_reduced_mean_keepdim",
    "simple/test_expand_shape_model4", "node/test_lstm_with_peepholes",
    "node/test_gru_seq_length", "node/test_lrn", "node/test_gridsample_bicubic",
    "node/test_layer_normalization_3d_axis_negative_1_epsilon_expanded",
    "node/test_if", "node/test_loop11", "node/test_scan9_sum",
    "node/test_scan_sum", "node/test_reversesequence_batch",
    "node/test_maxunpool_export_with_output_shape",
    "node/test_maxpool_with_argmax_2d_precomputed_pads",
    "node/test_upsample_nearest", "node/test_batchnorm_example_training_mode",
]


def copy_onnx():
    for name in sorted(os.listdir(ONNX_REF)):
        path = os.path.join(ONNX_REF, name)
        if name.endswith(".onnx") and os.path.getsize(path) < 65536:
            with open(path, "rb") as f:
                put("onnx", name[:-5], f.read())
    for pick in ONNX_PICKS:
        path = os.path.join(ONNX_TESTDATA, pick, "model.onnx")
        if os.path.exists(path):
            with open(path, "rb") as f:
                put("onnx", os.path.basename(pick), f.read())


# Serialized TensorProtos of each element type Kiln reads or refuses
# (float, double, float16, int64, bool, string), plain and as raw_data.
ONNX_TENSOR_PICKS = [
    "node/test_cast_FLOAT_to_STRING/test_data_set_0/output_0.pb",
    "node/test_cast_DOUBLE_to_FLOAT/test_data_set_0/input_0.pb",
    "node/test_cast_FLOAT16_to_FLOAT/test_data_set_0/input_0.pb",
    "node/test_argmax_default_axis_example/test_data_set_0/output_0.pb",
    "node/test_and2d/test_data_set_0/input_0.pb",
    "node/test_gather_0/test_data_set_0/input_1.pb",
    "node/test_reshape_reordered_all_dims/test_data_set_0/input_1.pb",
    "node/test_slice/test_data_set_0/input_1.pb",
]


def copy_onnx_tensors():
    for pick in ONNX_TENSOR_PICKS:
        path = os.path.join(ONNX_TESTDATA, pick)
        if os.path.exists(path):
            with open(path, "rb") as f:
                put("onnx_tensor", pick.split("/")[1] + "_" +
                    os.path.basename(pick)[:-3], f.read())



# ------------------------------------------------------------------ graph
# fuzz_graph reads its input as calls: one byte chooses the call (byte % 37:
# 0-5 leaves, 6-34 builders, 35 a run, 36 kiln_graph_clear), the bytes after
# it the operands and attributes, in the order fuzz/fuzz_graph.c reads them.
# Operand bytes count back from the latest node (0 is the latest).

G_INPUT, G_SYM, G_CONST, G_FILL, G_SCALAR, G_VAR = range(6)
G_UNARY, G_BINARY, G_SCALED, G_SELECT, G_REDUCE, G_AXISOP, G_SHAPEOP, \
    G_PERMUTE, G_SLICE, G_CONCAT, G_MATMUL, G_CONVERT, G_AFFINE, G_CE, \
    G_CELOSS, G_NLL, G_CONV, G_POOL, G_RESAMPLE, G_INDEX, G_TOPK, G_MASKED, \
    G_ATTN, G_NORM, G_BN, G_RNN, G_ASSIGN, G_MISC, G_GRAD = range(6, 35)
G_RUN, G_CLEAR = 35, 36
ALL_AXES = 0xF8  # raxes: KILN_ALL_AXES


def elementwise(kind):
    """Indices of the unary (kind "UNARY") or binary ops in the harness's
    tables, which list src/graph/elementwise.def's rows in order."""
    path = os.path.join(os.path.dirname(ROOT), "..", "src", "graph",
                        "elementwise.def")
    with open(path) as f:
        names = re.findall(r"^KILN_%s\([A-Z0-9_]+, ([a-z0-9_]+)" % kind,
                           f.read(), re.M)
    return {n: i for i, n in enumerate(names)}


def shape(*dims):
    return [len(dims)] + list(dims)


def graph_seeds():
    un = elementwise("UNARY")
    bi = elementwise("BINARY")
    f32, i32 = 0, 4  # rdtype bytes
    seeds = {}
    # x [4,3] @ W [3,2] -> relu -> sum: compiled, then forward and backward
    mlp = ([G_INPUT, f32] + shape(4, 3) + [0] +
           [G_VAR, f32] + shape(3, 2) + [0, 6, 0, 0, 1] +
           [G_MATMUL, 1, 0, 0] + [G_UNARY, un["relu"], 0] +
           [G_REDUCE, 0, ALL_AXES, 0, 0])
    seeds["mlp"] = bytes([0] + mlp + [G_RUN, 1, 0, 0, 0xFF, 0, 5, 1, 1] +
                         [G_RUN, 0, 8, 3, 0, 1])
    # logits [3,4], labels i32 [3]: softmax cross-entropy, gradient
    seeds["xent"] = bytes([1, G_INPUT, f32] + shape(3, 4) + [0] +
                          [G_INPUT, i32] + shape(3) + [0] +
                          [G_BINARY, len(bi) + 5, 1, 0] +  # softmax_cross_entropy
                          [G_GRAD, 0, 0, 2] +  # kiln_grad(loss, logits)
                          [G_RUN, 1, 1, 0, 1, 0xFF, 0, 9, 0, 0])
    # conv2d x [1,2,5,5] w [3,2,3,3], stride 2 pad 1, then max pool
    conv = ([G_INPUT, f32] + shape(1, 2, 5, 5) + [0] +
            [G_VAR, f32] + shape(3, 2, 3, 3) + [1, 5, 0, 1, 1] +
            [G_CONV, 1, 0, 0] +
            [4, 3, 3, 2, 4, 3, 3, 2, 3, 0] + [1, 0] +
            [G_POOL, 0, 4, 4, 2, 3, 4, 4, 2, 3, 1])
    seeds["conv"] = bytes([0] + conv + [G_RUN, 1, 0, 0, 0xFF, 0, 7, 1, 0])
    # attention q, k, v [1,2,3,4], causal
    attn = ([G_INPUT, f32] + shape(1, 2, 3, 4) + [0]) * 3 + \
        [G_ATTN, 2, 1, 0, 0, 1, 0, 1] + [G_REDUCE, 0, ALL_AXES, 0, 2]
    seeds["attention"] = bytes([1] + attn + [G_RUN, 0, 8, 1, 0, 1])
    # hostile sizes: a [2^31, 2^62] input, reshape to -1, slice
    seeds["hostile"] = bytes([0, G_INPUT, f32, 2, 0xF0, 0xF1, 0] +
                             [G_SHAPEOP, 0, 1, 0xF2, 0] +
                             [G_SLICE, 0] + [0xF0, 0xF1] * 8 + [0] +
                             [G_INPUT, f32] + shape(0, 3) + [0] +
                             [G_REDUCE, 0, ALL_AXES, 0, 1] +
                             [G_RUN, 1, 0, 0, 0xFF, 0, 1, 0, 2, 1])
    # a symbolic batch: input [2,3] with axis 0 symbolic, layer norm, run at
    # another batch size
    seeds["symbolic"] = bytes([0, G_SYM, f32] + shape(2, 3) + [1] +
                              [G_NORM, 0, 0, 0, 5, 1] + shape(3) +
                              [G_RUN, 1, 0, 0, 0xFF, 0, 3, 0, 3, 0])
    # index ops: embedding, gather, topk, cumsum
    seeds["index"] = bytes([0, G_VAR, f32] + shape(4, 3) + [2, 4, 0, 1, 1] +
                           [G_INPUT, i32] + shape(2, 2) + [0] +
                           [G_BINARY, len(bi) + 7, 1, 0] +  # embedding
                           [G_TOPK, 0, 5, 1] +  # k 3, axis -1
                           [G_AXISOP, 1, 2, 3] +  # cumsum, axis 0
                           [G_RUN, 0, 0, 4, 0, 2])
    return seeds


def main():
    if os.path.isdir(ROOT):
        shutil.rmtree(ROOT)
    for reader, files in [("npy", NPY), ("npz", NPZ),
                          ("safetensors", SAFETENSORS), ("json", JSON),
                          ("bin", BIN), ("idx", IDX), ("idx_gz", IDX_GZ),
                          ("session", SESSION), ("graph", graph_seeds())]:
        for name, data in files.items():
            if reader == "bin":  # the harness's mode byte: 0 fixes CRCs
                data = bytes([name == "bad_crc"]) + data
            put(reader, name, data)
    copy_onnx()
    copy_onnx_tensors()


if __name__ == "__main__":
    main()
