#!/bin/sh
# The kiln command on hostile input (issue 9): help on every subcommand,
# data sets validated on load (widths, labels, empty sets), output paths
# checked before training, plot paths never reaching gnuplot or a shell,
# models with too many layers refused; and the installed kiln.pc and CMake
# package follow the install prefix; bench/run --csv quotes its labels.  Tiny hand-made IDX files keep it fast.
kiln="$1/kiln"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
# pattern, command...: status 1, one "kiln: " message matching pattern,
# and no training started
expect_fail() {
    pat=$1
    shift
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -ne 1 ] || ! grep -q "$pat" "$tmp/err" ||
        grep -q '^epoch' "$tmp/out"; then
        fail "($rc) $*"
        cat "$tmp/out" "$tmp/err"
    fi
}
expect_help() {
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -ne 0 ] || ! grep -q '^usage: kiln train' "$tmp/out"; then
        fail "($rc) $*: no usage on stdout with status 0"
        cat "$tmp/err"
    fi
}

# big-endian u32 of a small number
be32() {
    printf "\\000\\000\\$(printf %03o $(($1 / 256)))\\$(printf %03o $(($1 % 256)))"
}
# images FILE COUNT ROWS COLS: pixel i of image n is (n * 7 + i * 13) % 256
images() {
    {
        printf '\000\000\010\003'
        be32 "$2"
        be32 "$3"
        be32 "$4"
        n=0
        while [ $n -lt "$2" ]; do
            i=0
            while [ $i -lt $(($3 * $4)) ]; do
                printf "\\$(printf %03o $(((n * 7 + i * 13) % 256)))"
                i=$((i + 1))
            done
            n=$((n + 1))
        done
    } >"$1"
}
# labels FILE LABEL...
labels() {
    f=$1
    shift
    {
        printf '\000\000\010\001'
        be32 $#
        for l in "$@"; do
            printf "\\$(printf %03o "$l")"
        done
    } >"$f"
}
# dataset DIR TRAIN_ROWSxCOLS TEST_ROWSxCOLS: 8 training and 4 test images
dataset() {
    mkdir -p "$1"
    images "$1/train-images-idx3-ubyte" 8 "${2%x*}" "${2#*x}"
    labels "$1/train-labels-idx1-ubyte" 0 1 2 3 4 5 6 9
    images "$1/t10k-images-idx3-ubyte" 4 "${3%x*}" "${3#*x}"
    labels "$1/t10k-labels-idx1-ubyte" 1 0 9 3
}
train() { # DIR, more flags...
    d=$1
    shift
    "$kiln" train --data "$d" --epochs 2 --batch 4 --hidden 8 --threads 1 "$@"
}

# -- help: usage on stdout, status 0, for every subcommand
expect_help "$kiln" --help
expect_help "$kiln" help
expect_help "$kiln" train --help
expect_help "$kiln" train -h
expect_help "$kiln" train --epochs 3 --help
expect_help "$kiln" eval --help
expect_help "$kiln" eval -h
expect_help "$kiln" info -h
expect_help "$kiln" info --help
# "-h" as the value of a flag is a value, not a request for help
expect_fail "not an integer" "$kiln" train --epochs -h

# -- data sets are validated on load
dataset "$tmp/ok" 2x2 2x2
train "$tmp/ok" >"$tmp/out" 2>"$tmp/err" || { fail "training on a tiny set"; cat "$tmp/err"; }
grep -q '^test accuracy: ' "$tmp/out" || fail "no test accuracy"
dataset "$tmp/wide" 2x2 3x3
expect_fail "t10k-images-idx3-ubyte has 3x3 images but the training set .*train-images-idx3-ubyte has 2x2" train "$tmp/wide"
dataset "$tmp/badlabel" 2x2 2x2
labels "$tmp/badlabel/train-labels-idx1-ubyte" 0 1 2 3 10 5 6 9
expect_fail "train-labels-idx1-ubyte: label 10 at index 4 is outside \[0, 10)" train "$tmp/badlabel"
labels "$tmp/badlabel/train-labels-idx1-ubyte" 0 1 2 3 4 5 6 9
labels "$tmp/badlabel/t10k-labels-idx1-ubyte" 1 0 255 3
expect_fail "t10k-labels-idx1-ubyte: label 255 at index 2" train "$tmp/badlabel"
dataset "$tmp/count" 2x2 2x2
labels "$tmp/count/t10k-labels-idx1-ubyte" 1 0 9
expect_fail "4 images but 3 labels" train "$tmp/count"
dataset "$tmp/empty" 2x2 2x2
images "$tmp/empty/t10k-images-idx3-ubyte" 0 2 2
labels "$tmp/empty/t10k-labels-idx1-ubyte"
expect_fail "t10k-images-idx3-ubyte: no images" train "$tmp/empty"

# -- output paths are checked before training starts
expect_fail "^kiln: --save: .*does not exist" train "$tmp/ok" --save "$tmp/no/such/dir/m.npz"
expect_fail "^kiln: --save: .*is a directory" train "$tmp/ok" --save "$tmp"
expect_fail "^kiln: --plot: .*does not exist" train "$tmp/ok" --log "$tmp/m.csv" --plot "$tmp/no/dir/p.png"
expect_fail "^kiln: --log: .*is a directory" train "$tmp/ok" --log "$tmp"
# a FIFO (as a device would be) is refused, not replaced by a file
mkfifo "$tmp/fifo.npz"
expect_fail "^kiln: --save: .*is not a regular file" train "$tmp/ok" --save "$tmp/fifo.npz"
[ -p "$tmp/fifo.npz" ] || fail "--save replaced the FIFO"
# -- a device as input: refused by name, never read for ever
expect_fail "/dev/zero: not a regular file or a pipe" "$kiln" eval --model /dev/zero --data "$tmp/ok"
expect_fail "/dev/zero: not a regular file or a pipe" "$kiln" info /dev/zero
if "$kiln" run --help 2>&1 | grep -q onnx; then
    expect_fail "/dev/zero: not a regular file or a pipe" "$kiln" run /dev/zero --output "$tmp/o.npz"
fi
if [ "$(id -u)" -ne 0 ]; then
    mkdir "$tmp/ro" && chmod 555 "$tmp/ro"
    expect_fail "^kiln: --save: .*cannot write" train "$tmp/ok" --save "$tmp/ro/m.npz"
fi

# -- a saved model loads in eval; one with too many layers is refused
train "$tmp/ok" --save "$tmp/m.safetensors" >"$tmp/out" 2>"$tmp/err" || fail "save"
"$kiln" eval --model "$tmp/m.safetensors" --data "$tmp/ok" >"$tmp/out" 2>"$tmp/err" ||
    { fail "eval of a saved model"; cat "$tmp/err"; }
expect_fail "label 255 at index 2" "$kiln" eval --model "$tmp/m.safetensors" --data "$tmp/badlabel"
expect_fail "no images" "$kiln" eval --model "$tmp/m.safetensors" --data "$tmp/empty"
expect_fail "m.safetensors expects 4 inputs, the data has 9" "$kiln" eval --model "$tmp/m.safetensors" --data "$tmp/wide"
if command -v python3 >/dev/null 2>&1; then
    python3 - "$tmp/deep.safetensors" <<'PY'
import json, struct, sys
# fc0.W [4, 1], fc1.W .. fc15.W [1, 1], fc16.W [1, 10]: 17 layers
shapes = [[4, 1]] + [[1, 1]] * 15 + [[1, 10]]
header, data = {}, b""
for k, s in enumerate(shapes):
    for name, shape in (("fc%d.W" % k, s), ("fc%d.b" % k, [s[1]])):
        n = 1
        for d in shape:
            n *= d
        header[name] = {"dtype": "F32", "shape": shape,
                        "data_offsets": [len(data), len(data) + 4 * n]}
        data += struct.pack("<%df" % n, *([0.5] * n))
h = json.dumps(header).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + data)
PY
    expect_fail "deep.safetensors: more than 16 layers" "$kiln" eval --model "$tmp/deep.safetensors" --data "$tmp/ok"
fi

# -- plot and log paths are data, never code: run in $tmp, where the
# commands they hold would create pwned*
cd "$tmp" || exit 1
odd="a'b\"c;d\`touch pwned1\`\$(touch pwned2)
e"
log="$odd/m'\$(touch pwned3).csv"
png="$odd/p;\`touch pwned4\`'.png"
mkdir "$odd" || fail "mkdir of an odd name"
train "$tmp/ok" --log "$log" --plot "$png" >"$tmp/out" 2>"$tmp/err" ||
    { fail "training with odd --log/--plot paths"; cat "$tmp/err"; }
for i in 1 2 3 4; do
    [ -e "$tmp/pwned$i" ] && fail "a path ran a command (pwned$i)"
done
[ "$(wc -l <"$log")" -eq 3 ] || fail "metrics log at an odd path"
if command -v gnuplot >/dev/null 2>&1; then
    head -c 4 "$png" | grep -q PNG || fail "no plot at an odd path"
    # --plot without --log works too
    train "$tmp/ok" --plot "$tmp/solo.png" >"$tmp/out" 2>"$tmp/err" || fail "--plot without --log"
    head -c 4 "$tmp/solo.png" | grep -q PNG || fail "no plot without --log"
fi
cd / || exit 1

# -- the installed kiln.pc and CMake package follow the install prefix
if command -v cmake >/dev/null 2>&1; then
    prefix="$tmp/pre fix"
    cmake --install "$1" --prefix "$prefix" >/dev/null || fail "cmake --install"
    pc=$(find "$prefix" -name kiln.pc)
    grep -qx "prefix=$prefix" "$pc" || { fail "kiln.pc prefix"; head -1 "$pc"; }
    if command -v pkg-config >/dev/null 2>&1; then
        flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs kiln)
        case "$flags" in
        *"-I$prefix/include"*"-L$prefix/"*) ;;
        *) fail "pkg-config gives '$flags'" ;;
        esac
    fi
    # a consumer of find_package(kiln) and kiln::kiln (not for sanitizer or fuzz
    # builds, whose library needs the sanitizer runtime)
    if ! grep -qE '^KILN_(SANITIZE|TSAN|FUZZ):BOOL=ON' "$1/CMakeCache.txt"; then
        mkdir "$tmp/use"
        cat >"$tmp/use/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(use C)
find_package(kiln REQUIRED)
add_executable(use use.c)
target_link_libraries(use PRIVATE kiln::kiln)
CM
        printf '#include <kiln.h>\nint main(void) { kiln_graph *g = kiln_graph_new(); kiln_graph_free(g); return 0; }\n' >"$tmp/use/use.c"
        if ! cmake -S "$tmp/use" -B "$tmp/use/b" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/out" 2>&1 ||
            ! cmake --build "$tmp/use/b" >>"$tmp/out" 2>&1 || ! "$tmp/use/b/use"; then
            fail "find_package(kiln) consumer"
            tail -20 "$tmp/out"
        fi
    fi
fi

# -- bench/run --csv writes RFC 4180 CSV: labels with commas and quotes
# survive a round trip through a CSV reader
if command -v python3 >/dev/null 2>&1; then
    python3 - "$2/bench/run" <<'PY' || fail "bench/run CSV"
import csv, importlib.machinery, importlib.util, io, sys
loader = importlib.machinery.SourceFileLoader("bench_run", sys.argv[1])
run = importlib.util.module_from_spec(importlib.util.spec_from_loader("bench_run", loader))
loader.exec_module(run)
rows = [('MLP 784-32-10 gelu, b8 "fast" train', 2, "samples/s", 1234.5, 1000.0, 1.2345,
         (">=", 5.0)),
        ("plain", 1, "ms", 2.0, None, None, None)]
out = io.StringIO()
run.write_csv(rows, out)
back = list(csv.reader(io.StringIO(out.getvalue(), newline="")))
assert back[0] == ["work", "threads", "unit", "kiln", "torch", "ratio", "target", "met"], back
assert back[1] == ['MLP 784-32-10 gelu, b8 "fast" train', "2", "samples/s", "1234.5", "1000",
                   "1.234", ">= 5", "no"], back[1]
assert back[2] == ["plain", "1", "ms", "2", "", "", "", ""], back[2]
assert out.getvalue().startswith("work,") and "\r\n" in out.getvalue()
PY
fi

[ $fails -eq 0 ] || exit 1
echo "kiln_cli_harden: all checks passed"
