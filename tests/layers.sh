#!/bin/sh
# The layer order of DESIGN.md ("Layers"): a folder may use the folders
# before it in ORDER, never one after it.  Fails on
#   - an #include from a folder to a later one (src/ folders and tools/),
#     or from the public headers (include/) to anything but themselves;
#   - an undefined symbol in a folder's object files that only a later
#     folder defines (nm on the library's objects);
#   - an include cycle between folders, or between the modules of a folder
#     (foo.c and foo.h are one module);
#   - a folder missing from ORDER, so a new folder must be placed in it.
# usage: layers.sh SOURCE_DIR OBJECT_LIST (one object file a line)
set -e
root=$1 objects=$2

# The one table of the order: earlier uses, later is used by nothing above.
ORDER="base graph cpu grad passes runtime io train nn axes modules onnx dist tools"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
fail() {
    echo "$*"
    status=1
}
rank() {
    i=0
    for f in $ORDER; do
        [ "$f" = "$1" ] && echo $i && return
        i=$((i + 1))
    done
    echo -1
}

# Edges "from-folder from-module to-folder to-module", one per #include
# "..."; kiln.h and kiln/*.h are the public headers, folder "include".
(cd "$root" && find src tools include -name '*.[ch]' -o -name '*.def' | sort |
    xargs awk '
    FNR == 1 {
        n = split(FILENAME, p, "/")
        from = p[1] == "src" ? p[2] : p[1]
        mod = p[n]; sub(/\.[^.]*$/, "", mod)
    }
    /^[ \t]*#[ \t]*include[ \t]*"/ {
        inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*$/, "", inc)
        if (inc == "kiln.h" || inc ~ /^kiln\//) to = "include"
        else if (inc ~ /\//) { to = inc; sub(/\/.*$/, "", to) }
        else to = from # a header beside the file
        m = inc; sub(/^.*\//, "", m); sub(/\.[^.]*$/, "", m)
        print from, mod, to, m
    }') >"$tmp/includes"
[ -s "$tmp/includes" ] || fail "layers.sh: no #include read under $root"

for d in $(cd "$root/src" && ls -d */ | tr -d /) tools; do
    [ "$(rank "$d")" -ge 0 ] || fail "src/$d is not in the layer order (tests/layers.sh ORDER, DESIGN.md)"
done

awk -v order="$ORDER" '
    BEGIN { n = split(order, o, " "); for (i = 1; i <= n; i++) rank[o[i]] = i }
    $1 == $3 { next }
    $1 == "include" { print "include/: " $2 " includes " $3 "/" $4 \
                      " (public headers include only each other)"; next }
    $3 != "include" && rank[$3] > rank[$1] {
        print $1 "/" $2 " includes " $3 "/" $4 ": " $3 \
              " comes after " $1 " in the layer order" }' \
    "$tmp/includes" >"$tmp/late"
if [ -s "$tmp/late" ]; then
    cat "$tmp/late"
    status=1
fi

# Cycles: tsort names the modules of a loop on stderr.
awk '$1 != $3 { print $1, $3 }' "$tmp/includes" | sort -u >"$tmp/folders"
if ! tsort "$tmp/folders" >/dev/null 2>"$tmp/loop"; then
    fail "include cycle between folders: $(grep -v 'input contains a loop' "$tmp/loop" | sed 's/^tsort: //' | tr '\n' ' ')"
fi
for d in $(cut -d' ' -f1 "$tmp/includes" | sort -u); do
    awk -v d="$d" '$1 == d && $3 == d && $2 != $4 { print $2, $4 }' \
        "$tmp/includes" | sort -u >"$tmp/mods"
    if ! tsort "$tmp/mods" >/dev/null 2>"$tmp/loop"; then
        fail "include cycle in $d/: $(grep -v 'input contains a loop' "$tmp/loop" | sed 's/^tsort: //' | tr '\n' ' ')"
    fi
done

# Symbols: "name folder" for what each folder's objects define and use.
# An object's folder is the path part after the last /src/ (nm -A
# writes "path:value type name").
folder='{ d = $1; sub(/:[^\/]*$/, "", d); sub(/^.*\/src\//, "", d); obj = d; sub(/\/.*$/, "", d) }'
xargs nm -A --defined-only <"$objects" | awk "$folder"' NF == 3 { print $3, d }' >"$tmp/def"
xargs nm -A -u <"$objects" | awk "$folder"' { print $NF, d, obj }' >"$tmp/use"
[ -s "$tmp/def" ] || fail "layers.sh: no symbols read from the objects in $objects"
sort -u "$tmp/def" -o "$tmp/def"
sort -u "$tmp/use" -o "$tmp/use"
# A used symbol is late when every folder defining it comes after the
# user's folder (a symbol defined in the user's folder or before is fine).
join "$tmp/use" "$tmp/def" | awk -v order="$ORDER" '
    BEGIN { n = split(order, o, " "); for (i = 1; i <= n; i++) rank[o[i]] = i }
    { key = $1 " " $3; r = rank[$4]
      if (!(key in best) || r < best[key]) {
          best[key] = r; by[key] = $4; user[key] = $2 } }
    END { for (k in best) if (best[k] > rank[user[k]]) {
          split(k, f, " ")
          print f[2] " uses " f[1] ", defined in " by[k] \
                "/, which comes after " user[k] "/" } }' |
    sort >"$tmp/late"
if [ -s "$tmp/late" ]; then
    cat "$tmp/late"
    status=1
fi

[ $status -eq 0 ] && echo "includes and symbols follow the layer order: $ORDER; no include cycles"
exit $status
