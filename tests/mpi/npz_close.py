#!/usr/bin/python3
"""Every f32 variable of the .npz files GOT... against REF's:
|got - want| <= tol |want| + floor (L2 norms over the variable), tol being
STATE_TOL for optimiser momentum ("<var>.momentum") and VAR_TOL otherwise;
the files must hold the same names, and REF at least MIN_VARS of them.
Exit status 1 (each difference printed) when one is out of bounds.

    npz_close.py VAR_TOL STATE_TOL FLOOR MIN_VARS REF GOT...
"""
import array
import ast
import sys
import zipfile


def load(path):
    out = {}
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            raw = z.read(name)
            n = int.from_bytes(raw[8:10], "little")
            header = ast.literal_eval(raw[10:10 + n].decode())
            if header["descr"] == "<f4":
                a = array.array("f")
                a.frombytes(raw[10 + n:])
                out[name] = a
    return out


var_tol, state_tol, floor = map(float, sys.argv[1:4])
min_vars = int(sys.argv[4])
ref = load(sys.argv[5])
assert len(ref) >= min_vars, sorted(ref)
bad = 0
for path in sys.argv[6:]:
    got = load(path)
    assert set(got) == set(ref), (path, sorted(got), sorted(ref))
    for name, want in ref.items():
        norm = sum(v * v for v in want) ** 0.5
        diff = sum((a - b) ** 2 for a, b in zip(got[name], want)) ** 0.5
        limit = state_tol if name[:-4].endswith(".momentum") else var_tol
        if diff > limit * norm + floor:
            print(f"{path}: {name}: |difference| {diff:g}, |values| {norm:g}")
            bad = 1
sys.exit(bad)
