#!/usr/bin/env bash
# check-sim-links.sh BUILD_DIR - the cluster simulator links the server's
# policy code instead of copying it (issue 21): every shared decision function
# is undefined (U) in libcinfer_sim.a, defined (T) by the layer that owns it,
# and defined exactly once in the cinfer binary.
set -u
build=${1:?usage: check-sim-links.sh BUILD_DIR}
fail=0
# symbol owner-library
pairs="sched_plan_step:engine store_expiry_for:store store_gc_lru_victims:store
       store_retention_parse:store bs_trace_load:benchserve bs_workload_build:benchserve bs_summarize:benchserve
       svg_line_chart:benchserve route_pick:cluster route_least_requests:cluster eplb_rebalance:eplb
       eplb_imbalance:eplb"
for p in $pairs; do
    sym=${p%%:*} owner=${p##*:}
    sim_u=$(nm "$build/libcinfer_sim.a" 2>/dev/null | grep -c " U $sym\$")
    sim_t=$(nm "$build/libcinfer_sim.a" 2>/dev/null | grep -c " [TtWw] $sym\$")
    own_t=$(nm "$build/libcinfer_$owner.a" 2>/dev/null | grep -c " T $sym\$")
    bin_t=$(nm "$build/cinfer" 2>/dev/null | grep -c " T $sym\$")
    if [ "$sim_t" != 0 ] || [ "$own_t" != 1 ] || [ "$bin_t" != 1 ]; then
        echo "check-sim-links: $sym: defined $sim_t times in libcinfer_sim.a, $own_t in libcinfer_$owner.a, $bin_t in cinfer"
        fail=1
    fi
    # the simulator or its CLI must actually use it (not just leave it unused)
    cli_u=$(nm "$build/CMakeFiles/cinfer_cli.dir/tools/cmd_sim.c.o" 2>/dev/null | grep -c " U $sym\$")
    if [ "$sim_u" = 0 ] && [ "$cli_u" = 0 ]; then
        echo "check-sim-links: $sym is not referenced by src/sim or tools/cmd_sim.c"
        fail=1
    fi
done
[ "$fail" = 0 ] && echo "check-sim-links: ok (the simulator links the scheduler, the store's GC decisions, the router's policies and bench serve's readers)"
exit $fail
