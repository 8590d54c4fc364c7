#!/usr/bin/python3
"""Writes the reference files tests/test_io.c reads, with numpy only.

Run from anywhere: /usr/bin/python3 tests/ref/make_io_refs.py
Every value is a closed form the C test recomputes independently:
  a  float32 (3, 4)  a[i] = i * 0.5 - 1           (flat index i)
  b  int32   (10,)   b[i] = i - 5
  c  float64 (2, 3)  c[i] = i / 4                 (loads as f32)
  d  int64   (3,)    [1, -2, 2**31 - 1]           (loads as i32)
  e  uint8   (2, 3)  e[i] = 250 + i               (loads as i32)
  s  float32 ()      3.25
  z  float32 (0, 3)  empty
IDX: images uint8 (3, 4, 5) v[i] = (7 * i) % 256, labels uint8 (3,) [7, 0, 255].
The bad_*.npz files each hold one member that a reader must refuse.
"""
import gzip
import io
import json
import os
import struct
import zipfile

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "io")


def arrays():
    return {
        "a": (np.arange(12, dtype=np.float32) * 0.5 - 1).reshape(3, 4),
        "b": np.arange(10, dtype=np.int32) - 5,
        "c": (np.arange(6, dtype=np.float64) / 4).reshape(2, 3),
        "d": np.array([1, -2, 2**31 - 1], dtype=np.int64),
        "e": (np.arange(6) + 250).astype(np.uint8).reshape(2, 3),
        "s": np.float32(3.25),
        "z": np.zeros((0, 3), dtype=np.float32),
    }


def npy_bytes(arr):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=False)
    return buf.getvalue()


def write_member_npz(name, member, data):
    # A fixed date keeps the files byte-identical between runs.
    info = zipfile.ZipInfo(member, date_time=(2020, 1, 1, 0, 0, 0))
    with zipfile.ZipFile(os.path.join(OUT, name), "w") as z:
        z.writestr(info, data)


def write_bad_npz():
    good = npy_bytes(np.arange(4, dtype=np.float32))
    hlen = struct.unpack("<H", good[8:10])[0]
    header = good[10:10 + hlen].decode("latin1")
    body = good[10 + hlen:]

    def with_header(text):
        text = text.ljust(hlen - 1) + "\n"
        return good[:10] + text.encode("latin1") + body

    write_member_npz("bad_magic.npz", "x.npy", b"\x93NUMPZ" + good[6:])
    write_member_npz("bad_header.npz", "x.npy",
                     with_header(header.replace("'shape'", "'shapf'")))
    write_member_npz("bad_version.npz", "x.npy", good[:6] + b"\x07\x00" + good[8:])
    write_member_npz("bad_short_data.npz", "x.npy", good[:-4])
    write_member_npz("bad_fortran.npz", "x.npy",
                     npy_bytes(np.asfortranarray(np.ones((2, 3), np.float32))))
    write_member_npz("bad_bigendian.npz", "x.npy",
                     npy_bytes(np.arange(4, dtype=">f4")))
    write_member_npz("bad_dtype.npz", "x.npy",
                     npy_bytes(np.arange(4, dtype=np.complex64)))
    write_member_npz("bad_i64_range.npz", "x.npy",
                     npy_bytes(np.array([1, 2**31], dtype=np.int64)))
    write_member_npz("bad_not_npy.npz", "readme.txt", b"hello")


def write_safetensors(name, tensors, metadata):
    """tensors: list of (name, dtype string, array); data in list order, the
    JSON keys in reverse order so that a reader must sort by offset."""
    header, blobs, offset = {}, [], 0
    for tname, dt, arr in tensors:
        raw = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        header[tname] = {"dtype": dt, "shape": list(arr.shape),
                         "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    ordered = dict(reversed(list(header.items())))
    ordered["__metadata__"] = metadata
    text = json.dumps(ordered).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write_idx(name, arr):
    head = struct.pack(">BBBB", 0, 0, 0x08, arr.ndim)
    head += struct.pack(">" + "I" * arr.ndim, *arr.shape)
    raw = head + arr.tobytes()
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(raw)
    with open(os.path.join(OUT, name + ".gz"), "wb") as f:
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as g:
            g.write(raw)


def main():
    os.makedirs(OUT, exist_ok=True)
    arrs = arrays()
    np.savez(os.path.join(OUT, "np_plain.npz"), **arrs)
    np.savez_compressed(os.path.join(OUT, "np_compressed.npz"), **arrs)
    write_bad_npz()
    a = arrs
    write_safetensors("ref.safetensors",
                      [("a", "F32", a["a"]), ("b", "I32", a["b"]),
                       ("c", "F64", a["c"]), ("d", "I64", a["d"]),
                       ("e", "U8", a["e"]), ("s", "F32", a["s"])],
                      {"format": "np", "note": "esc\"aped \u00e9"})
    write_idx("images-idx3-ubyte",
              ((np.arange(60) * 7) % 256).astype(np.uint8).reshape(3, 4, 5))
    write_idx("labels-idx1-ubyte", np.array([7, 0, 255], dtype=np.uint8))


if __name__ == "__main__":
    main()
