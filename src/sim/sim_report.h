/* sim_report.h - what a simulation run reports: latency distributions,
 * cache hit rate by tier, tokens per second per accelerator and per node of
 * each pool, utilisation, store capacity and bandwidth used, and the
 * economics (revenue at the price table's per-token prices, cost of
 * accelerators plus the parts the community arithmetic omits: store SSDs,
 * host CPUs, network, idle reserve; margin). As a summary struct, a JSON
 * object (--out) and SVG charts (--svg). The summary is computed from the
 * results alone (pure); the caller owns every output. */
#ifndef CINFER_SIM_SIM_REPORT_H
#define CINFER_SIM_SIM_REPORT_H

#include <jansson.h>
#include <stdio.h>

#include "benchserve/stats.h"
#include "sim/sim.h"

typedef struct sim_summary {
    size_t requests, done, rejected;
    double duration_s, wall_s;
    bs_summary ttft, tpot, e2e; /* seconds */
    double hit_hbm, hit_store, replayed, computed, recomputed; /* shares of input tokens */
    double input_per_s, cached_input_per_s, output_per_s;
    double prefill_input_per_accel, prefill_computed_per_accel, decode_output_per_accel; /* tok/s */
    double prefill_input_per_node, decode_output_per_node;
    double util_prefill, util_decode; /* busy share */
    double store_peak_tb, store_read_gbps, store_write_gbps, kv_net_gbps;
    double accel_hours, revenue, cost_accel, cost_other, cost_total, margin;
    double revenue_per_accel_hour, cost_per_accel_hour;
    double spec_accept_rate, tokens_per_decode_step;
    double moe_imbalance_prefill, moe_imbalance_decode;
} sim_summary;

int sim_summarize(const sim_config *c, const sim_workload *w, const sim_results *r, sim_summary *s, cf_err *err);
json_t *sim_summary_json(const sim_config *c, const sim_summary *s);
void sim_summary_print(FILE *f, const sim_config *c, const sim_summary *s);
/* ttft_cdf.svg, tpot_cdf.svg, e2e_cdf.svg, tokens.svg, hit.svg in dir. */
int sim_report_svg(const char *dir, const sim_results *r, const sim_summary *s, cf_err *err);

#endif
