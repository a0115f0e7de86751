/* sim_workload.h - the requests a simulation replays: arrival time, input
 * and output lengths, traffic class, session, and the chain keys of the
 * input's store blocks (key_i = mix(key_{i-1}, content id of block i), so a
 * block can only hit when its whole prefix matches, as in the store).
 *
 * Sources, all deterministic from the seed:
 *   trace     a Mooncake JSONL trace, read by bench serve's reader
 *             (bs_trace_load); `replicas` copies with disjoint key spaces
 *             and jittered arrivals scale it to a cluster; time_scale
 *             speeds it up;
 *   synthetic bench serve's synthetic generator (bs_workload_build): its
 *             token-id prompts are cut into blocks and hashed; optionally
 *             a share of each prompt comes from a pool of shared prefixes;
 *   sessions  agent and chat sessions for retention studies: sessions
 *             arrive as a Poisson process; each turn appends user (and
 *             tool) content to the conversation, so turn k's prompt extends
 *             turn k-1's prompt plus its answer; the gap before the next
 *             turn is drawn from the class's return-time distribution (a
 *             log-normal mixture of "within the session" and "comes back
 *             later" returns, in docs/sim.md).
 * The workload owns all its arrays. */
#ifndef CINFER_SIM_SIM_WORKLOAD_H
#define CINFER_SIM_SIM_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct sim_wreq {
    double arrival; /* seconds */
    int32_t input_len, output_len;
    int32_t cls; /* store traffic class (STORE_CLASS_*) */
    uint32_t n_keys;
    size_t key_off; /* into sim_workload.keys */
} sim_wreq;

typedef struct sim_workload {
    sim_wreq *r;
    size_t n, cap;
    uint64_t *keys;
    size_t n_keys, cap_keys;
    long block_tokens; /* tokens per key */
    double duration_s; /* last arrival */
} sim_workload;

typedef struct sim_session_model {
    double sessions_per_s; /* Poisson arrival rate of new sessions */
    double duration_s; /* sessions start in [0, duration) */
    double agent_share; /* fraction of sessions that are agent sessions */
    /* per class (0 chat, 1 agent): turns, content per turn, return-time mixture */
    double mean_turns[2], system_tokens[2], turn_tokens[2], output_tokens[2];
    double quick_median_s[2], quick_sigma[2]; /* returns within the session */
    double late_share[2], late_median_s[2], late_sigma[2]; /* returns hours or days later */
} sim_session_model;

/* Defaults of the session model (docs/sim.md "Session model"). */
sim_session_model sim_session_defaults(void);

/* block: tokens per hash id (512 = the trace's own; smaller scales lengths
 * as bench serve's --block-scale does, bs_trace_scaled_input). */
int sim_workload_from_trace(const char *path, long max_lines, double time_scale, long replicas, long block,
                            uint64_t seed, sim_workload *w, cf_err *err);
/* bench serve's synthetic generator with the same options: prefix_share of
 * each input is one of prefix_pool shared prefixes (system prompts,
 * documents; bench serve --prefix-share/--prefix-pool), the rest random
 * tokens. Blocks are keyed by their token ids, so shared prefixes hit. */
typedef struct sim_synth_opts {
    long requests, input_len, output_len;
    int uniform;
    double rate, prefix_share;
    long prefix_pool;
} sim_synth_opts;
int sim_workload_synthetic(const sim_synth_opts *o, uint64_t seed, long block_tokens, sim_workload *w, cf_err *err);
int sim_workload_sessions(const sim_session_model *m, uint64_t seed, long block_tokens, sim_workload *w, cf_err *err);
/* Sorts requests by arrival (stable: ties keep generation order). */
int sim_workload_sort(sim_workload *w, cf_err *err);
void sim_workload_free(sim_workload *w);

#endif
