#!/bin/bash
# serve_ep_netns.sh - expert parallelism across two "hosts": two network namespaces joined by a
# veth pair (10.$N.0.2 and 10.$N.0.3), mpirun started in the first, ranks placed on both through
# an rsh agent that runs Open MPI's daemon in the namespace owning the host address, rows moving
# over Open MPI's TCP transport (btl tcp,self). tests/clients/test_serve_ep.py's TestTwoHosts
# (run inside the first namespace) compares greedy outputs of 2 ranks (one per host) and 4 ranks
# (two per host) with the single-process server, and rebalances moving experts between the hosts
# over MPI (--ep-weight-source peer); TestDeepseek4TwoHosts compares a deepseek4 model's outputs with
# one rank per host (each holding half its routed experts). SKIP (77) when namespaces cannot be made
# (not root) or mpirun is missing, except under CI=true. Everything is torn down on exit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/fixture.sh"
SHARED=${CINFER_SHARED:-$here/../../../shared}
BIN=${CINFER_BIN:-$here/../../build/cinfer}
VENV=${CINFER_VENV:-$here/../../.venv}
need_fixture "$BIN" "$SHARED/models/tiny/tiny-deepseek2.gguf" "$VENV/bin/python" "$(command -v mpirun || echo /usr/bin/mpirun)"
skip() {
    if [ "${CI:-}" = true ] || [ "${CI:-}" = 1 ]; then echo "FAIL: $1 (CI=true)"; exit 1; fi
    echo "SKIP: $1 (exit 77)"; exit 77
}
pfx=cep$$
net=$((100 + $$ % 100))
a=${pfx}A b=${pfx}B
tmp=$(mktemp -d /tmp/cinfer-ep-netns.XXXXXX)
cleanup() {
    ip netns pids "$a" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns pids "$b" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$a" 2>/dev/null
    ip netns del "$b" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$a" 2>/dev/null || skip "cannot create network namespaces"
ip netns add "$b" || skip "cannot create a second network namespace"
ip link add ${pfx}a type veth peer name ${pfx}b || skip "cannot create a veth pair"
ip link set ${pfx}a netns "$a" && ip link set ${pfx}b netns "$b" &&
    ip -n "$a" addr add 10.$net.0.2/24 dev ${pfx}a && ip -n "$b" addr add 10.$net.0.3/24 dev ${pfx}b &&
    ip -n "$a" link set ${pfx}a up && ip -n "$b" link set ${pfx}b up &&
    ip -n "$a" link set lo up && ip -n "$b" link set lo up || { echo "FAIL: namespace set-up"; exit 1; }
cat >"$tmp/agent.sh" <<AGENT
#!/bin/bash
# mpirun's rsh agent: "agent HOST command..." runs the command in the namespace that owns HOST
host=\$1; shift
case "\$host" in 10.$net.0.2) ns=$a ;; 10.$net.0.3) ns=$b ;; *) echo "agent: unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec \$ns /bin/sh -c "\$*"
AGENT
chmod +x "$tmp/agent.sh"
export EP_NETNS_HOSTS=10.$net.0.2,10.$net.0.3
export EP_MPIRUN_ARGS="--mca plm_rsh_agent $tmp/agent.sh --mca btl tcp,self --mca btl_tcp_if_include 10.$net.0.0/24 --mca oob_tcp_if_include 10.$net.0.0/24"
cd "$here/../clients" || exit 1
timeout 450 ip netns exec "$a" "$VENV/bin/python" -m unittest -v test_serve_ep.TestTwoHosts test_serve_ep.TestDeepseek4TwoHosts
