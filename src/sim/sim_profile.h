/* sim_profile.h - hardware and model profiles of the cluster simulator, read
 * from JSON files where every value cites its public source (sim_json.h).
 *
 * Hardware (sim/hw/<name>.json): per accelerator peak dense FLOP/s (FP8 and
 * BF16), HBM capacity and bandwidth, scale-up (NVLink / HCCS) and scale-out
 * (NIC) bandwidth, accelerators per node, storage bandwidth per node, and the
 * achievable fractions the cost model applies to the peaks (model FLOP
 * utilisation, memory bandwidth utilisation, network efficiency, a fixed
 * per-step overhead), a request's latency outside the forward passes (a fixed
 * part and a part per prompt token; optional, default 0), each with how it
 * was obtained.
 *
 * Model (sim/model/<name>.json): total / active / dense parameters, bytes per
 * weight, layer counts and MoE shape, attention FLOPs per token per context
 * position, and its cache kinds: per-token kinds (bytes per token divided by
 * the kind's compression ratio) make the KV cache that is paged, stored and
 * transferred; a "window" kind is per-sequence state (window x bytes) that
 * the window-state tier snapshots or bounded replay recomputes. */
#ifndef CINFER_SIM_SIM_PROFILE_H
#define CINFER_SIM_SIM_PROFILE_H

#include <jansson.h>

#include "base/error.h"

#define SIM_NAME_MAX 48
#define SIM_MAX_CACHE_KINDS 8

typedef struct sim_hw {
    char name[SIM_NAME_MAX];
    double flops_fp8, flops_bf16; /* dense FLOP/s per accelerator */
    double hbm_bytes, hbm_bw; /* bytes, bytes/s per accelerator */
    double scaleup_bw, scaleout_bw; /* bytes/s per accelerator, one direction */
    double ssd_bw; /* storage read bandwidth per node, bytes/s */
    long accel_per_node;
    double mfu, mbu, net_eff; /* achievable fractions of the peaks, (0, 1] */
    double step_overhead_s; /* fixed cost per engine step (launch, scheduling) */
    /* a request's latency outside the forward passes (HTTP, JSON, prompt preparation, submission,
     * engine wake-up, first-token output): request_overhead_s + prompt tokens x
     * prompt_token_overhead_s, spent before the request reaches the router (0: none) */
    double request_overhead_s, prompt_token_overhead_s;
} sim_hw;

typedef struct sim_cache_kind {
    char name[SIM_NAME_MAX];
    double bytes_per_token; /* per layer-group, all its layers, before compression */
    double compression; /* tokens per stored row (1: every token) */
    long window; /* > 0: per-sequence window state of `window` tokens, not per-token KV */
} sim_cache_kind;

typedef struct sim_model {
    char name[SIM_NAME_MAX];
    double total_params, active_params, dense_params; /* dense: read by every token (not routed experts) */
    double weight_bytes; /* bytes per parameter as served */
    long n_layer, n_moe_layer, n_embd, n_expert, n_expert_used;
    double attn_flops_per_ctx; /* attention FLOPs per token per context position, all layers (decode) */
    double attn_flops_per_ctx_prefill; /* the same in prefill (MLA: the non-absorbed form); default as decode */
    double act_bytes; /* bytes per activation element moved by expert parallelism */
    long route_nodes; /* node-limited routing: a token's experts span at most this many nodes (0: no limit) */
    sim_cache_kind kinds[SIM_MAX_CACHE_KINDS];
    int n_kinds;
    /* derived */
    double kv_bytes_per_token; /* sum of per-token kinds / compression */
    double window_state_bytes; /* sum of window kinds: window x bytes per token */
    long window_tokens; /* largest window (bounded replay length), 0: none */
} sim_model;

/* Read a profile from JSON (file: the name used in messages). */
int sim_hw_from_json(json_t *j, const char *file, sim_hw *out, cf_err *err);
int sim_model_from_json(json_t *j, const char *file, sim_model *out, cf_err *err);
/* Read a profile file. */
int sim_hw_load(const char *path, sim_hw *out, cf_err *err);
int sim_model_load(const char *path, sim_model *out, cf_err *err);

#endif
