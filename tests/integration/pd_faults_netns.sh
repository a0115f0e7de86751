#!/bin/bash
# pd_faults_netns.sh - issue 19 fault tests across hosts on one machine: a prefill worker, two decode
# workers and `cinfer router` (PD mode) each in its own network namespace (tests/integration/lib/netns.sh,
# 10.78.0.0/24, one store directory for all), UCX over TCP between them, a random-weight model slow
# enough that streams are still running when the test kills something. The client
# (tests/clients/test_pd_faults_netns.py, root namespace at 10.78.0.1) SIGKILLs the decode worker
# serving a stream, the router, then the last decode worker, and checks that it never sees lost or
# duplicated tokens and never hangs. SKIP (77) without namespaces, except under CI=true. Everything is
# torn down on exit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/fixture.sh"
NETNS_NET=10.78.0
. "$here/lib/netns.sh"
SHARED=${CINFER_SHARED:-$here/../../../shared}
BIN=${CINFER_BIN:-$here/../../build/cinfer}
MODEL=$SHARED/models/stories260K.gguf
VENV=${CINFER_VENV:-$here/../../.venv}
need_fixture "$BIN" "$MODEL" "$VENV/bin/python"
netns_init
logs=$(mktemp -d /tmp/cinfer-pd-faults-logs.XXXXXX)
slow=$logs/slow.gguf # about 10 ms a token on an idle core (as tests/clients/test_router_resume.py)
"$BIN" mkmodel --arch llama --dim 1024 --layers 8 --heads 16 --kv-heads 16 --ffn 2816 --vocab-from "$MODEL" \
    --dtype q8_0 --seed 1 "$slow" >/dev/null || { echo "FAIL: mkmodel"; exit 1; }
netns_add P 2
netns_add D 3
netns_add E 5
netns_add R 4
common=(serve "$slow" --port 8080 --ctx 512 -t 1 --kv-store "$NETNS_STORE" --served-model-name slow
    --kv-memory 0.125)
netns_run P env UCX_TLS=tcp "$BIN" "${common[@]}" --host 10.78.0.2 --role prefill --handoff-timeout 5 \
    2>"$logs/p.log"
netns_run D env UCX_TLS=tcp "$BIN" "${common[@]}" --host 10.78.0.3 --role decode --handoff-timeout 10 \
    2>"$logs/d.log"
d_pid=${NETNS_PIDS[-1]}
netns_run E env UCX_TLS=tcp "$BIN" "${common[@]}" --host 10.78.0.5 --role decode --handoff-timeout 10 \
    2>"$logs/e.log"
e_pid=${NETNS_PIDS[-1]}
router=(ip netns exec "${NETNS_PFX}R" "$BIN" router --host 10.78.0.4 --port 8000 --health-interval 0.2
    --worker http://10.78.0.2:8080@prefill --worker http://10.78.0.3:8080@decode --worker http://10.78.0.5:8080@decode)
"${router[@]}" 2>"$logs/r.log" &
r_pid=$!
NETNS_PIDS+=("$r_pid")
netns_wait_http http://10.78.0.2:8080 "$logs/p.log"
netns_wait_http http://10.78.0.3:8080 "$logs/d.log"
netns_wait_http http://10.78.0.5:8080 "$logs/e.log"
netns_wait_http http://10.78.0.4:8000 "$logs/r.log"
cd "$here/../clients" || exit 1
PD_MODEL=$slow PD_R=http://10.78.0.4:8000 PD_R_PID=$r_pid PD_R_CMD="${router[*]}" PD_R_LOG=$logs/r2.log \
    PD_D_PIDS="http://10.78.0.3:8080=$d_pid http://10.78.0.5:8080=$e_pid" \
    timeout 240 "$VENV/bin/python" -m unittest -v test_pd_faults_netns
rc=$?
if [ $rc != 0 ]; then
    for f in p d e r r2; do [ -f "$logs/$f.log" ] && { echo "--- $f log"; tail -30 "$logs/$f.log"; }; done
fi
rm -rf "$logs"
exit $rc
