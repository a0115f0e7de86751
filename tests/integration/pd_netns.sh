#!/bin/bash
# pd_netns.sh - issue 19 across hosts on one machine: the prefill worker and the decode worker
# each in their own network namespace (tests/integration/lib/netns.sh: veth + bridge,
# 10.77.0.0/24, one store directory for both), UCX over TCP between them (UCX_TLS=tcp: on one
# kernel UCX would otherwise find shared memory, as between processes of one host). The test
# client (tests/clients/test_pd_netns.py, the root namespace at 10.77.0.1) compares greedy
# outputs with a monolithic server for all three APIs, and breaks the UCX path (a blackhole
# route in P's namespace to D's handoff address) to check the store fallback; then the same
# requests through `cinfer router` (its own namespace) in PD mode with this 1 P + 1 D. SKIP (77) without
# namespaces, except under CI=true. Everything is torn down on exit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/fixture.sh"
. "$here/lib/netns.sh"
SHARED=${CINFER_SHARED:-$here/../../../shared}
BIN=${CINFER_BIN:-$here/../../build/cinfer}
MODEL=$SHARED/models/stories260K.gguf
VENV=${CINFER_VENV:-$here/../../.venv}
need_fixture "$BIN" "$MODEL" "$VENV/bin/python"
netns_init
netns_add P 2
netns_add D 3
netns_link D eth1 13 # D's handoff interface (UCX_NET_DEVICES=eth1): the test can cut it alone
netns_add R 4 # the router (cinfer router, PD mode: 1 prefill + 1 decode worker)
logs=$(mktemp -d /tmp/cinfer-pd-netns-logs.XXXXXX)
common=(serve "$MODEL" --port 8080 --ctx 512 -t 1 --kv-store "$NETNS_STORE")
netns_run P env UCX_TLS=tcp UCX_NET_DEVICES=eth0 "$BIN" "${common[@]}" --host 10.77.0.2 --role prefill --handoff-timeout 2 \
    2>"$logs/p.log"
netns_run D env UCX_TLS=tcp UCX_NET_DEVICES=eth1 "$BIN" "${common[@]}" --host 10.77.0.3 --role decode \
    --handoff-listen 10.77.0.13:0 --handoff-timeout 4 2>"$logs/d.log"
netns_run R "$BIN" router --host 10.77.0.4 --port 8000 --worker http://10.77.0.2:8080@prefill \
    --worker http://10.77.0.3:8080@decode --health-interval 0.2 2>"$logs/r.log"
netns_wait_http http://10.77.0.2:8080 "$logs/p.log"
netns_wait_http http://10.77.0.3:8080 "$logs/d.log"
netns_wait_http http://10.77.0.4:8000 "$logs/r.log"
cd "$here/../clients" || exit 1
PD_P=http://10.77.0.2:8080 PD_D=http://10.77.0.3:8080 PD_R=http://10.77.0.4:8000 \
    PD_CUT="ip -n ${NETNS_PFX}P route add blackhole 10.77.0.13/32" \
    PD_MEND="ip -n ${NETNS_PFX}P route del blackhole 10.77.0.13/32" \
    timeout 240 "$VENV/bin/python" -m unittest -v test_pd_netns
rc=$?
if [ $rc != 0 ]; then
    echo "--- P log"; tail -30 "$logs/p.log"; echo "--- D log"; tail -30 "$logs/d.log"
    echo "--- router log"; tail -30 "$logs/r.log"
fi
rm -rf "$logs"
exit $rc
