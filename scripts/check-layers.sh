#!/usr/bin/env bash
# check-layers.sh - checks every #include in src/ and include/cinfer/ against the
# layer graph declared in cmake/layers.txt (the same file CMakeLists.txt builds
# the per-layer libraries from). Registered as the ctest test check_layers
# (label "lint").
#
# Rules, for a file of layer L (src/L/..., or include/<h> owned by L):
#  - #include "X/..." or <X/...> where X is a layer: X must be L or listed for L;
#    a public header (include/cinfer/) may include no src/ header at all;
#  - #include "cinfer/h.h": h must be declared "public cinfer/h.h OWNER" and
#    OWNER must be L or listed for L;
#  - a quoted include with a directory that is neither a layer nor cinfer/ is
#    an error (no "../" escapes);
#  - layers.txt itself: each layer lists only layers declared above it (no
#    cycles), every directory of src/ is a layer, every include/cinfer header
#    has an owner.
# Usage: scripts/check-layers.sh [repo root]; exit 0 clean, 1 on violations.
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
graph=cmake/layers.txt
[ -f "$graph" ] || { echo "check-layers: $graph not found" >&2; exit 1; }
mapfile -t files < <(find src include/cinfer -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort)
mapfile -t dirs < <(find src -mindepth 1 -maxdepth 1 -type d | LC_ALL=C sort)
[ "${#files[@]}" -gt 0 ] || { echo "check-layers: no sources under $root" >&2; exit 1; }

awk -v graph="$graph" -v dirlist="${dirs[*]}" '
function fail(msg) { print msg > "/dev/stderr"; bad++ }
function allowed(layer, target) { return target == layer || ((layer SUBSEP target) in dep) }
BEGIN {
    n = 0
    while ((getline line < graph) > 0) {
        ln++
        sub(/#.*/, "", line)
        if (line ~ /^[ \t]*$/) continue
        if (line ~ /^[a-z0-9_]+:/) {
            name = line; sub(/:.*/, "", name)
            rest = line; sub(/^[^:]*:/, "", rest)
            if (name in islayer) fail(graph ":" ln ": layer " name " declared twice")
            k = split(rest, ds, /[ \t]+/)
            for (i = 1; i <= k; i++) {
                if (ds[i] == "") continue
                if (!(ds[i] in islayer)) fail(graph ":" ln ": " name " uses " ds[i] ", which is not declared above it")
                dep[name, ds[i]] = 1
                deps[name] = deps[name] " " ds[i]
            }
            islayer[name] = 1
        } else if (line ~ /^public[ \t]/) {
            k = split(line, ps, /[ \t]+/)
            if (k < 3 || !(ps[3] in islayer)) fail(graph ":" ln ": bad public line (owner must be a layer declared above)")
            else owner[ps[2]] = ps[3]
        } else fail(graph ":" ln ": cannot parse: " line)
    }
    k = split(dirlist, dl, / /)
    for (i = 1; i <= k; i++) {
        d = dl[i]; sub(/^src\//, "", d)
        if (d != "" && !(d in islayer)) fail("src/" d ": not a layer in " graph)
    }
}
FNR == 1 {
    file = FILENAME; pub = 0; layer = ""
    if (file ~ /^src\//) { layer = file; sub(/^src\//, "", layer); sub(/\/.*/, "", layer) }
    else {
        h = file; sub(/^include\//, "", h); pub = 1
        if (h in owner) layer = owner[h]
        else fail(file ": public header with no owner (add \"public " h " <layer>\" to " graph ")")
    }
}
layer != "" && /^[ \t]*#[ \t]*include[ \t]*["<]/ {
    inc = $0
    sub(/^[ \t]*#[ \t]*include[ \t]*/, "", inc)
    quoted = substr(inc, 1, 1) == "\""
    inc = substr(inc, 2); sub(/[">].*/, "", inc)
    if (inc !~ /\//) next
    top = inc; sub(/\/.*/, "", top)
    where = file ":" FNR ": "
    if (top == "cinfer") {
        if (!(inc in owner)) fail(where "includes " inc ", a public header with no owner in " graph)
        else if (!allowed(layer, owner[inc]))
            fail(where layer " may not include " inc " (implemented by " owner[inc] "; " layer ":" deps[layer] ")")
    } else if (top in islayer) {
        if (pub) fail(where "public header includes internal " inc)
        else if (!allowed(layer, top)) fail(where layer " may not include " inc " (" layer ":" deps[layer] ")")
    } else if (quoted) fail(where "include \"" inc "\" is neither a layer nor cinfer/")
}
END {
    if (bad) { printf "check-layers: %d violation(s) of %s\n", bad, graph > "/dev/stderr"; exit 1 }
    printf "check-layers: %d files follow %s\n", nfiles, graph
}
FNR == 1 { nfiles++ }
' "${files[@]}"
