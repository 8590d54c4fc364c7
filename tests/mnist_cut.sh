# Sourced by the tests that train on a cut of MNIST (run from the source
# directory, data/mnist set up): mnist_cut DIR TRAIN TEST writes the first
# TRAIN training and TEST test images and labels of data/mnist into DIR as
# IDX files, their header counts rewritten.

# cut_idx NAME COUNT ITEM_BYTES HEADER_BYTES DIR: the first COUNT items
cut_idx() {
    src=data/mnist/$1 dst=$5/$1
    head -c 4 "$src" >"$dst"
    printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($2 >> 24 & 255)) \
        $(($2 >> 16 & 255)) $(($2 >> 8 & 255)) $(($2 & 255)))" >>"$dst"
    tail -c +9 "$src" | head -c $(($4 - 8 + $2 * $3)) >>"$dst"
}

mnist_cut() {
    mkdir -p "$1"
    cut_idx train-images-idx3-ubyte "$2" 784 16 "$1"
    cut_idx train-labels-idx1-ubyte "$2" 1 8 "$1"
    cut_idx t10k-images-idx3-ubyte "$3" 784 16 "$1"
    cut_idx t10k-labels-idx1-ubyte "$3" 1 8 "$1"
}
