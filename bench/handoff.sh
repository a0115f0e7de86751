#!/bin/bash
# handoff.sh - KV handoff transport throughput (docs/pd.md, issue 19): bench/bench_handoff (the
# xfer layer a prefill worker pushes blocks with) against `ucx_perftest -t ucp_am_bw` on the same
# path, in one run: (1) one namespace, UCX's default transport selection, our endpoint without UCX's
# peer-failure detection as a prefill worker makes it for a decode worker of its own host (shared
# memory), (1b) the same with peer-failure detection (UCX then leaves shared memory out), (2) one namespace with UCX_TLS=tcp,self, (3) two network namespaces
# (tests/integration/lib/netns.sh, 10.78.0.0/24) with UCX_TLS=tcp,self, as between hosts. The
# receiver places each message straight into a staging buffer as a decode worker places RECORDS in
# the handoff's records buffer: by default one of SIZE x COUNT bytes, fresh (its pages fault in on
# first touch, as a per-handoff malloc'd buffer does); the (1r) row reuses 4 messages' worth (perftest
# reuses one receive buffer); the (1p) row receives as a decode worker does now: each POOL_MSGS (4)
# messages are one handoff, placed into a run of a pre-faulted receive-buffer pool holding 4 handoffs
# (src/xfer/xfer_pool.h), given back when the handoff is complete; a full pool is back-pressure. Both sides wait on the UCX fd as the server's loop does (no spinning).
# perftest runs in both wait modes (-E poll: spinning, -E sleep: waiting on the worker's fd); the ratio
# is against the better one. Prints one line per case: ours, perftest x2, ratio. Needs root for (3); skips it otherwise.
#   usage: bench/handoff.sh [BUILD_DIR] [SIZE_BYTES] [COUNT]
set -u
usage="usage: bench/handoff.sh [BUILD_DIR] [SIZE_BYTES] [COUNT]  (KV handoff GB/s vs ucx_perftest; root for the namespace case)"
case ${1:-} in
  -h|--help) printf '%s\n' "$usage"; exit 0 ;;
  -*) echo "handoff.sh: unknown option '$1' (--help for usage)" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
size=${2:-4194304}
count=${3:-100}
window=4 # messages in flight, ours and perftest's (-O) alike
pool_msgs=${POOL_MSGS:-4} # pool row: messages per handoff; the pool holds 4 handoffs
bh=$build/bench_handoff
[ -x "$bh" ] || { echo "no $bh (build the bench_handoff target)"; exit 1; }
command -v ucx_perftest >/dev/null || { echo "no ucx_perftest (apt-get install ucx-utils)"; exit 1; }

# ours RUN_RECV RUN_SEND ADDR TLS [SCHEME [STAGING | pool:SIZE:POOL:MSGS]] -> GB/s; SCHEME "shm" (one host: what a prefill worker
# uses when D's /handoff/info names its own host) or "ucx" (peer-failure detection: no shared memory)
ours() {
    local rr=$1 rs=$2 addr=$3 tls=$4 scheme=${5:-ucx} staging=${6:-$((size * count))}
    local out
    out=$(mktemp)
    UCX_TLS=$tls $rr "$bh" recv "$addr" "$staging" >"$out" 2>/dev/null &
    local rp=$!
    sleep 1.5
    # as a prefill worker does: D's worker address from /handoff/info ("ucx_address")
    UCX_TLS=$tls $rs "$bh" send "$(sed -n "s/^worker ucx:/$scheme:/p" "$out")" "$size" "$count" "$window" 2>/dev/null |
        sed -n 's/.* = \([0-9.]*\) GB\/s/\1/p'
    wait $rp
    rm -f "$out"
}
# perf RUN_SERVER RUN_CLIENT HOST PORT TLS [ARGS] -> GB/s (perftest's overall MB/s is 2^20 bytes/s)
perf() {
    local rr=$1 rs=$2 host=$3 port=$4 tls=$5 args=${6:-}
    UCX_TLS=$tls $rr ucx_perftest -p "$port" >/dev/null 2>&1 &
    local rp=$!
    sleep 1
    # shellcheck disable=SC2086  # args: separate perftest options
    UCX_TLS=$tls $rs ucx_perftest "$host" -p "$port" -t ucp_am_bw -s "$size" -n "$count" -w 10 -O "$window" $args 2>/dev/null |
        awk '/^Final:/ {printf "%.3f\n", $7 * 1048576 / 1e9}'
    wait $rp
}
# row NAME OURS PERFTEST_POLL PERFTEST_SLEEP: the ratio is against the better perftest mode
row() {
    local name=$1 a=$2 b=$3 c=$4
    echo "$name: bench_handoff $a GB/s, ucx_perftest ucp_am_bw $b GB/s (-E poll) $c GB/s (-E sleep), ratio" \
        "$(awk -v a="$a" -v b="$b" -v c="$c" 'BEGIN {m = (b > c ? b : c); printf "%.2f", (m > 0 ? a / m : 0)}')"
}
# both RUN_SERVER RUN_CLIENT HOST PORT TLS [ARGS] -> "POLL SLEEP" (perftest in both wait modes)
both() {
    echo "$(perf "$1" "$2" "$3" "$4" "$5" "${6:-} -E poll")" "$(perf "$1" "$2" "$3" $(($4 + 100)) "$5" "${6:-} -E sleep")"
}
echo "# bench/handoff.sh $build $size $count  ($(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
echo "# messages of $size bytes x $count, $window in flight (perftest -O $window); UCX $(ucx_info -v | sed -n 's/# Version //p')"
# perftest's endpoints: no error handling (shared memory) unless -e (then, as ours with peer-failure detection, TCP)
# shellcheck disable=SC2046  # both() prints two numbers
row "one namespace, default TLS, shm: peer (shared memory), fresh staging" "$(ours "" "" 127.0.0.1:23471 all shm)" \
    $(both "" "" 127.0.0.1 13471 all)
# shellcheck disable=SC2046
row "one namespace, default TLS, shm: peer (shared memory), reused staging" \
    "$(ours "" "" 127.0.0.1:23475 all shm $((4 * size)))" $(both "" "" 127.0.0.1 13475 all)
# shellcheck disable=SC2046
row "one namespace, default TLS, shm: peer (shared memory), receive-buffer pool" \
    "$(ours "" "" 127.0.0.1:23476 all shm "pool:$size:$((4 * pool_msgs * size)):$pool_msgs")" $(both "" "" 127.0.0.1 13476 all)
# shellcheck disable=SC2046
row "one namespace, default TLS, ucx: peer / perftest -e (peer-failure detection: TCP)" \
    "$(ours "" "" 127.0.0.1:23474 all ucx)" $(both "" "" 127.0.0.1 13474 all -e)
# shellcheck disable=SC2046
row "one namespace, UCX_TLS=tcp,self" "$(ours "" "" 127.0.0.1:23472 tcp,self)" $(both "" "" 127.0.0.1 13472 tcp,self)
if [ "$(id -u)" = 0 ]; then
    NETNS_NET=10.78.0
    . "$here/../tests/integration/lib/netns.sh"
    netns_init
    netns_add P 2
    netns_add D 3
    rp="ip netns exec ${NETNS_PFX}D" sp="ip netns exec ${NETNS_PFX}P"
    # shellcheck disable=SC2046
    row "two namespaces (veth + bridge), UCX_TLS=tcp,self" "$(ours "$rp" "$sp" 10.78.0.3:23473 tcp,self)" \
        $(both "$rp" "$sp" 10.78.0.3 13473 tcp,self)
fi
