# netns.sh - sourced by multi-host integration tests (docs/pd.md "Tests across hosts"): each
# worker in its own network namespace, joined by veth pairs to a bridge that lives in a namespace
# of its own, addresses in $NETNS_NET.0/24 (NETNS_NET, set before sourcing: 10.77.0 unless given; tests
# of different areas take different /24s so they can run at once), the test (the root namespace) at .1. The shared
# store is a directory every namespace sees (network namespaces share the mount namespace: the
# stand-in for a 3FS/NFS/Lustre mount). Everything is torn down by an EXIT trap, servers first.
#
#   netns_init                 SKIP (77) when namespaces are unavailable (not root, no `ip`), FAIL
#                              under CI=true; takes a lock (one user of $NETNS_NET.0/24 at a time)
#   netns_add NAME LASTOCTET   namespace NAME with $NETNS_NET.LASTOCTET/24 on its veth
#   netns_link NAME IF OCTET   one more veth into the bridge, named IF in NAME, $NETNS_NET.OCTET/24
#                              (e.g. a separate interface for UCX: UCX_NET_DEVICES=IF)
#   netns_run NAME CMD...      runs CMD in NAME in the background; its pid is killed on exit
#   NETNS_STORE                the shared store directory
NETNS_PFX="cpd$$"
NETNS_NET=${NETNS_NET:-10.77.0}
NETNS_NAMES=()
NETNS_PIDS=()
NETNS_STORE=""

netns_skip() {
    if [ "${CI:-}" = true ] || [ "${CI:-}" = 1 ]; then
        echo "FAIL: $1 (CI=true: network namespaces are required)"; exit 1
    fi
    echo "SKIP: $1 (exit 77; under CI=true this fails)"; exit 77
}

netns_teardown() {
    for p in "${NETNS_PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    for p in "${NETNS_PIDS[@]}"; do wait "$p" 2>/dev/null; done
    ip link del "${NETNS_PFX}h" 2>/dev/null
    for n in "${NETNS_NAMES[@]}"; do ip netns del "$n" 2>/dev/null; done
    ip netns del "${NETNS_PFX}br" 2>/dev/null
    [ -n "$NETNS_STORE" ] && rm -rf "$NETNS_STORE"
}

netns_init() {
    command -v ip >/dev/null || netns_skip "no 'ip' command"
    [ "$(id -u)" = 0 ] || netns_skip "network namespaces need root"
    exec 9>"/tmp/cinfer-netns-$NETNS_NET.lock"
    flock -w 300 9 || netns_skip "another test holds $NETNS_NET.0/24"
    ip netns add "${NETNS_PFX}br" 2>/dev/null || netns_skip "cannot create a network namespace"
    trap netns_teardown EXIT
    trap 'exit 130' INT TERM
    ip -n "${NETNS_PFX}br" link add br0 type bridge || netns_skip "no bridge support"
    ip -n "${NETNS_PFX}br" link set br0 up
    ip -n "${NETNS_PFX}br" link set lo up
    # the root namespace (the test client) joins at $NETNS_NET.1
    ip link add "${NETNS_PFX}h" type veth peer name "${NETNS_PFX}hb" netns "${NETNS_PFX}br" || netns_skip "no veth"
    ip -n "${NETNS_PFX}br" link set "${NETNS_PFX}hb" master br0 up
    ip addr add "$NETNS_NET.1/24" dev "${NETNS_PFX}h"
    ip link set "${NETNS_PFX}h" up
    NETNS_STORE=$(mktemp -d /tmp/cinfer-netns-store.XXXXXX)
}

netns_link() {
    local name="${NETNS_PFX}$1" ip="$NETNS_NET.$3" v="v$1$2$$"
    ip link add "$v" type veth peer name "b$1$2$$" netns "${NETNS_PFX}br" || exit 1
    ip link set "$v" netns "$name"
    ip -n "${NETNS_PFX}br" link set "b$1$2$$" master br0 up
    ip -n "$name" link set "$v" name "$2"
    ip -n "$name" addr add "$ip/24" dev "$2"
    ip -n "$name" link set "$2" up
}

netns_add() {
    ip netns add "${NETNS_PFX}$1" || exit 1
    NETNS_NAMES+=("${NETNS_PFX}$1")
    ip -n "${NETNS_PFX}$1" link set lo up
    netns_link "$1" eth0 "$2"
}

netns_exec() {
    local name="${NETNS_PFX}$1"
    shift
    ip netns exec "$name" "$@"
}

netns_run() {
    local name="${NETNS_PFX}$1"
    shift
    ip netns exec "$name" "$@" &
    NETNS_PIDS+=("$!")
}

# netns_wait_http URL LOGFILE: until URL/health answers (the server's log shows why not), 60 s
netns_wait_http() {
    for _ in $(seq 600); do
        curl -sf "$1/health" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "FAIL: $1 did not come up"; tail -20 "$2"; exit 1
}
