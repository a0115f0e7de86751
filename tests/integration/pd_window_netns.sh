#!/bin/bash
# pd_window_netns.sh - issue 19, window state across hosts on one machine: a prefill worker and a
# decode worker on tiny-gemma2 (sliding-window layers), each in its own network namespace
# (tests/integration/lib/netns.sh: veth + bridge, $NETNS_NET.0/24, default 10.81.0), UCX over TCP
# between them. The test client (tests/clients/test_pd_window_netns.py, the root namespace at
# $NETNS_NET.1) compares greedy outputs with a monolithic server for all three APIs, streamed and
# not, with the window-state snapshot handed off and installed. SKIP (77) without namespaces,
# except under CI=true. Everything is torn down on exit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/fixture.sh"
NETNS_NET=${NETNS_NET:-10.81.0}
. "$here/lib/netns.sh"
SHARED=${CINFER_SHARED:-$here/../../../shared}
BIN=${CINFER_BIN:-$here/../../build/cinfer}
MODEL=$SHARED/models/tiny/tiny-gemma2.gguf
VENV=${CINFER_VENV:-$here/../../.venv}
need_fixture "$BIN" "$MODEL" "$VENV/bin/python"
netns_init
netns_add P 2
netns_add D 3
logs=$(mktemp -d /tmp/cinfer-pd-window-netns-logs.XXXXXX)
common=(serve "$MODEL" --port 8080 --ctx 1024 -t 1)
netns_run P env UCX_TLS=tcp "$BIN" "${common[@]}" --host "$NETNS_NET.2" --role prefill --handoff-timeout 30 \
    2>"$logs/p.log"
netns_run D env UCX_TLS=tcp "$BIN" "${common[@]}" --host "$NETNS_NET.3" --role decode --handoff-timeout 30 \
    2>"$logs/d.log"
netns_wait_http "http://$NETNS_NET.2:8080" "$logs/p.log"
netns_wait_http "http://$NETNS_NET.3:8080" "$logs/d.log"
cd "$here/../clients" || exit 1
PD_P=http://$NETNS_NET.2:8080 PD_D=http://$NETNS_NET.3:8080 \
    timeout 240 "$VENV/bin/python" -m unittest -v test_pd_window_netns
rc=$?
if [ $rc != 0 ]; then
    echo "--- P log"; tail -30 "$logs/p.log"; echo "--- D log"; tail -30 "$logs/d.log"
fi
rm -rf "$logs"
exit $rc
