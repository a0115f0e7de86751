/* sim_config.h - a simulated cluster: model, prefill and decode pools,
 * store tier, window-state tier, network, router policies and price table,
 * read from one JSON file (sim/clusters/NAME.json). Hardware, model and price
 * entries are either a name, resolved as <profiles>/hw/<name>.json,
 * <profiles>/model/<name>.json and <profiles>/prices/<name>.json, or an
 * inline object of the same form. Every error is one line naming the file
 * and field (sim_json.h); besides ranges it checks that each instance's
 * accelerators hold the model's weights with room for KV blocks ("a pool too
 * small for the model"). decode.instances = 0 means colocated serving: the
 * prefill instances also decode (one cinfer worker per instance). */
#ifndef CINFER_SIM_SIM_CONFIG_H
#define CINFER_SIM_SIM_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "cluster/route_policy.h"
#include "sim/sim_profile.h"
#include "store/store_format.h"

typedef struct sim_pool_cfg {
    sim_hw hw;
    long instances; /* engines in the pool */
    long accels; /* accelerators per instance (EP degree of the MoE layers) */
    long dp; /* attention data-parallel ranks per instance (each runs its own batch) */
    long max_batch_tokens, max_seqs; /* per DP rank (the scheduler sees dp x these) */
    long block_tokens; /* KV page size */
    long min_prefill_chunk;
    double kv_fraction; /* share of HBM left after weights that holds KV blocks */
    double prefix_cache_fraction; /* share of the KV blocks kept as the prefix cache */
    long spec_draft; /* draft tokens per decode (speculative decoding); 0: off */
    double spec_accept; /* per-draft-token acceptance probability */
    bool overlap_comm; /* expert-parallel communication overlaps compute (dual micro-batch) */
    bool eplb; /* experts placed by EPLB (src/eplb) rather than one slot each in order */
    /* the engine plans step N+1 while step N runs (cinfer's asynchronous scheduling, docs/engine.md): a
     * request that reaches a busy instance misses the step already planned unless that plan is empty */
    bool async_scheduling;
    long redundant_experts; /* extra expert slots per layer for EPLB replicas */
    double expert_skew; /* sigma of the log-normal expert load (sim_eplb.h) */
    int64_t kv_blocks; /* derived: KV blocks per instance */
} sim_pool_cfg;

typedef struct sim_price {
    char name[SIM_NAME_MAX];
    double input_hit_per_mtok, input_miss_per_mtok, output_per_mtok; /* revenue, $ per million tokens */
    double accel_hour; /* $ per accelerator-hour (rent or amortised ownership) */
    double ssd_tb_month; /* $ per TB-month of store capacity */
    double cpu_node_hour; /* $ per node-hour for host CPUs/memory not in accel_hour */
    double network_node_hour; /* $ per node-hour of scale-out network */
    double idle_reserve; /* extra accelerators held idle, as a fraction of the serving ones */
} sim_price;

typedef struct sim_config {
    char file[512];
    sim_model model;
    sim_pool_cfg prefill, decode;
    /* store tier */
    bool store_on;
    double store_capacity_bytes; /* quota enforced by the GC decision */
    double store_read_bw, store_write_bw; /* aggregate bytes/s */
    long store_block_tokens; /* tokens per stored block (512 = Mooncake hash blocks) */
    int64_t retention_s[STORE_N_CLASSES];
    double gc_interval_s;
    /* window-state tier (models with a window cache kind) */
    double window_state_bytes; /* tier capacity (host memory, whole cluster) */
    bool bounded_replay; /* on a snapshot miss: replay the last window tokens (else exact recompute) */
    /* network */
    double net_latency_s;
    /* router */
    route_policy_kind route_kind[2]; /* prefill, decode placement (cluster/route_policy.h) */
    sim_price price;
} sim_config;

/* Parses a cluster config. profiles: the directory holding hw/, model/ and
 * prices/ (NULL: names are errors, only inline objects are accepted). */
int sim_config_parse(const char *file, const char *text, size_t len, const char *profiles, sim_config *out,
                     cf_err *err);
int sim_config_load(const char *path, const char *profiles, sim_config *out, cf_err *err);

#endif
