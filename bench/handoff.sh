#!/bin/bash
# handoff.sh - KV handoff transport throughput (docs/pd.md, issue 19): bench/bench_handoff (the
# xfer layer a prefill worker pushes blocks with) against `ucx_perftest -t ucp_am_bw` on the same
# path, in one run. Rows: (1) one namespace, UCX's default transport selection, our endpoint without
# UCX's peer-failure detection as a prefill worker makes it for a decode worker of its own host
# ("shm:" peer: shared memory); (1b) the same with peer-failure detection ("ucx:" peer: UCX then
# leaves shared memory out, TCP); (2) one namespace, UCX_TLS=tcp,self, "ucx:" peer (as between hosts);
# (2n) the same without peer-failure detection (not what a worker uses over TCP: the protocol
# reference); (3) two network namespaces (tests/integration/lib/netns.sh, $NETNS_NET.0/24) with
# UCX_TLS=tcp,self, "ucx:" peer, as between hosts.
#
# Same path means the same transports AND the same endpoint error-handling mode: perftest runs with
# -e (peer-failure detection) against our "ucx:" rows and without it against "shm:" rows. This
# matters on TCP: with peer-failure detection UCX 1.13 selects no RMA lane on TCP (its memory domain
# cannot invalidate remote keys: openucx/ucx#11929), so a rendezvous moves as 64 KiB active-message
# fragments instead of one put_zcopy; perftest without -e (the put_zcopy protocol) is printed as
# well, as "(no -e ...)" with its own ratio, on the TCP rows.
#
# The receiver places each message straight into a staging buffer as a decode worker places RECORDS:
# by default one of SIZE x COUNT bytes, fresh (its pages fault in on first touch, as a per-handoff
# malloc'd buffer did); the (1r) row reuses 4 messages' worth (perftest reuses one receive buffer);
# the pool rows receive as a decode worker does now: each POOL_MSGS (4) messages are one handoff,
# placed into a run of a pre-faulted receive-buffer pool holding 4 handoffs (src/xfer/xfer_pool.h),
# given back when the handoff is complete; a full pool is back-pressure. Both sides wait on the UCX
# fd as the server's loop does (no spinning). perftest runs in both wait modes (-E poll: spinning,
# -E sleep: waiting on the worker's fd).
#
# Each row runs REPEAT (default 3) rounds, each round ours then perftest (poll, sleep) back to back,
# so load changes hit both alike; it prints every round's GB/s, the medians, and the ratio of our
# median to the better perftest mode's median. Needs root for (3); skips it otherwise.
#   usage: bench/handoff.sh [BUILD_DIR] [SIZE_BYTES] [COUNT]
#   env: REPEAT (rounds per row, default 3), POOL_MSGS (messages per handoff in the pool rows, 4),
#        NETNS_NET (the /24 of the namespace row, default 10.78.0), ROWS (space-separated row ids
#        to run: 1 1r 1p 1b 2 2p 2n 3 3p; default all)
set -u
usage="usage: bench/handoff.sh [BUILD_DIR] [SIZE_BYTES] [COUNT]  (KV handoff GB/s vs ucx_perftest; root for the namespace rows)
  env: REPEAT=3 rounds per row (ours and perftest alternate), POOL_MSGS=4, NETNS_NET=10.78.0,
       ROWS='1 1r 1p 1b 2 2p 2n 3 3p' (row ids to run)"
case ${1:-} in
  -h|--help) printf '%s\n' "$usage"; exit 0 ;;
  -*) echo "handoff.sh: unknown option '$1' (--help for usage)" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
size=${2:-4194304}
count=${3:-100}
repeat=${REPEAT:-3}
rows=" ${ROWS:-1 1r 1p 1b 2 2p 2n 3 3p} "
window=4 # messages in flight, ours and perftest's (-O) alike
pool_msgs=${POOL_MSGS:-4} # pool rows: messages per handoff; the pool holds 4 handoffs
pool="pool:$size:$((4 * pool_msgs * size)):$pool_msgs"
bh=$build/bench_handoff
[ -x "$bh" ] || { echo "no $bh (build the bench_handoff target)"; exit 1; }
command -v ucx_perftest >/dev/null || { echo "no ucx_perftest (apt-get install ucx-utils)"; exit 1; }
case $repeat in '' | *[!0-9]* | 0) echo "handoff.sh: REPEAT must be a positive integer" >&2; exit 2 ;; esac
port=$((20000 + $$ % 10000)) # a fresh port per server (row advances it), so two runs at once do not collide

# ours RUN_RECV RUN_SEND HOST:PORT TLS SCHEME STAGING|pool:SIZE:POOL:MSGS -> GB/s; SCHEME "shm" (one host: what a prefill
# worker uses when D's /handoff/info names its own host) or "ucx" (peer-failure detection: no shared memory)
ours() {
    local rr=$1 rs=$2 addr=$3 tls=$4 scheme=$5 staging=$6
    local out
    out=$(mktemp)
    UCX_TLS=$tls $rr "$bh" recv "$addr" "$staging" >"$out" 2>/dev/null &
    local rp=$!
    for _ in $(seq 150); do grep -q '^worker ucx:' "$out" && break; sleep 0.2; done # a loaded machine starts slowly
    # as a prefill worker does: D's worker address from /handoff/info ("ucx_address")
    UCX_TLS=$tls $rs "$bh" send "$(sed -n "s/^worker ucx:/$scheme:/p" "$out")" "$size" "$count" "$window" 2>/dev/null |
        sed -n 's/.* = \([0-9.]*\) GB\/s.*/\1/p'
    kill "$rp" 2>/dev/null # a failed sender leaves the receiver waiting for its END
    wait "$rp" 2>/dev/null
    rm -f "$out"
}
# perf RUN_SERVER RUN_CLIENT HOST PORT TLS ARGS -> GB/s (perftest's overall MB/s is 2^20 bytes/s)
perf() {
    local rr=$1 rs=$2 host=$3 port=$4 tls=$5 args=$6
    UCX_TLS=$tls $rr ucx_perftest -p "$port" >/dev/null 2>&1 &
    local rp=$!
    for _ in $(seq 150); do $rr ss -ltnH "sport = :$port" 2>/dev/null | grep -q . && break; sleep 0.2; done
    # shellcheck disable=SC2086  # args: separate perftest options
    UCX_TLS=$tls $rs ucx_perftest "$host" -p "$port" -t ucp_am_bw -s "$size" -n "$count" -w 10 -O "$window" $args 2>/dev/null |
        awk '/^Final:/ {printf "%.3f\n", $7 * 1048576 / 1e9}'
    kill "$rp" 2>/dev/null
    wait "$rp" 2>/dev/null
}
or_fail() { echo "${1:-fail}"; } # a round that printed no result shows as "fail" and is left out of the median
median() { tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "0"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}'; }
# row ID NAME RUN_RECV RUN_SEND HOST TLS SCHEME STAGING PERFTEST_ARGS [REF_ARGS]: REPEAT rounds of ours, perftest
# -E poll, perftest -E sleep (and, with REF_ARGS, a reference perftest -E sleep), then one line
row() {
    local id=$1 name=$2 rr=$3 rs=$4 host=$5 tls=$6 scheme=$7 staging=$8 pargs=$9 ref=${10:-}
    case $rows in *" $id "*) ;; *) return ;; esac
    local a="" b="" c="" d=""
    for _ in $(seq "$repeat"); do
        port=$((port + 4))
        a="$a $(or_fail "$(ours "$rr" "$rs" "$host:$port" "$tls" "$scheme" "$staging")")"
        b="$b $(or_fail "$(perf "$rr" "$rs" "$host" $((port + 1)) "$tls" "$pargs -E poll")")"
        c="$c $(or_fail "$(perf "$rr" "$rs" "$host" $((port + 2)) "$tls" "$pargs -E sleep")")"
        [ -n "$ref" ] && d="$d $(or_fail "$(perf "$rr" "$rs" "$host" $((port + 3)) "$tls" "$ref -E sleep")")"
    done
    local ma mb mc best
    ma=$(echo "$a" | median) mb=$(echo "$b" | median) mc=$(echo "$c" | median)
    best=$(awk -v b="$mb" -v c="$mc" 'BEGIN {print (b > c ? b : c)}')
    local line
    line="($id) $name: bench_handoff$a = $ma GB/s, ucx_perftest ucp_am_bw${pargs:+ $pargs} -E poll$b = $mb, -E sleep$c = $mc GB/s (medians), ratio $(ratio "$ma" "$best")"
    if [ -n "$ref" ]; then
        local md
        md=$(echo "$d" | median)
        line="$line; (no -e: put_zcopy) -E sleep$d = $md GB/s, ratio $(ratio "$ma" "$md")"
    fi
    echo "$line"
}
echo "# bench/handoff.sh $build $size $count  (REPEAT=$repeat, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
echo "# messages of $size bytes x $count, $window in flight (perftest -O $window); UCX $(ucx_info -v | sed -n 's/# Version //p')"
echo "# per row: GB/s of each round (ours, then perftest in both wait modes, alternating), medians, ratio to the better perftest median"
lo=127.0.0.1
row 1 "one namespace, default TLS, shm: peer (shared memory), fresh staging" "" "" $lo all shm "$((size * count))" ""
row 1r "one namespace, default TLS, shm: peer (shared memory), reused staging" "" "" $lo all shm "$((4 * size))" ""
row 1p "one namespace, default TLS, shm: peer (shared memory), receive-buffer pool" "" "" $lo all shm "$pool" ""
row 1b "one namespace, default TLS, ucx: peer / perftest -e (peer-failure detection: TCP), receive-buffer pool" "" "" \
    $lo all ucx "$pool" "-e"
row 2 "one namespace, UCX_TLS=tcp,self, ucx: peer / perftest -e, fresh staging" "" "" $lo tcp,self ucx "$((size * count))" "-e" " "
row 2p "one namespace, UCX_TLS=tcp,self, ucx: peer / perftest -e, receive-buffer pool" "" "" $lo tcp,self ucx "$pool" "-e" " "
row 2n "one namespace, UCX_TLS=tcp,self, no peer-failure detection (shm: scheme; reference), receive-buffer pool" "" "" \
    $lo tcp,self shm "$pool" ""
case $rows in *" 3 "* | *" 3p "*)
    if [ "$(id -u)" = 0 ]; then
        NETNS_NET=${NETNS_NET:-10.78.0}
        . "$here/../tests/integration/lib/netns.sh"
        netns_init
        netns_add P 2
        netns_add D 3
        rp="ip netns exec ${NETNS_PFX}D" sp="ip netns exec ${NETNS_PFX}P"
        row 3 "two namespaces (veth + bridge), UCX_TLS=tcp,self, ucx: peer / perftest -e, fresh staging" "$rp" "$sp" \
            "$NETNS_NET.3" tcp,self ucx "$((size * count))" "-e" " "
        row 3p "two namespaces (veth + bridge), UCX_TLS=tcp,self, ucx: peer / perftest -e, receive-buffer pool" "$rp" "$sp" \
            "$NETNS_NET.3" tcp,self ucx "$pool" "-e" " "
    else
        echo "(3) two namespaces: skipped (needs root)"
    fi ;;
esac
