/* sched.h - the scheduler: a pure policy function from request states and
 * free KV blocks to one step plan. It owns nothing, allocates nothing (the
 * caller provides every array), reads no clock and no global state, so the
 * same input always gives the same plan; the engine executes plans and the
 * cluster simulator reuses it unchanged.
 *
 * Sequence model: a request's sequence is its prompt followed by the tokens
 * generated so far (seq_len = prompt_len + n_generated). n_computed tokens of
 * it have KV in blocks. A running request with n_generated > 0 and exactly one
 * token left to compute is decoding; any other request with tokens left is
 * prefilling (a preempted request recomputes prompt and generated tokens).
 * A chunk that reaches seq_len yields logits: the engine samples one token.
 *
 * Policy, in this order, each step:
 *  1. Decodes: every decoding running request, in rank order, one token each
 *     (long prompts never stall them).
 *  2. Prefill chunks of running requests that are still prefilling, in rank
 *     order.
 *  3. Admission of waiting and preempted requests in rank order; it stops at
 *     the first that does not fit (FCFS within a priority, no overtaking).
 * Rank: lower `priority` value first, then lower `arrival`, then lower index.
 * Limits: tokens per step <= max_batch_tokens; running requests after the
 * step (and items in the plan) <= max_seqs.
 *
 * Chunk sizes follow estimated compute, not raw length: a token at position p
 * costs linear_cost + attn_cost * (p + 1) (weights plus attention over its
 * context), so a chunk [s, s+L) costs
 *     L * linear_cost + attn_cost * (L*s + L*(L+1)/2).
 * The step budget is the cost of a max_batch_tokens prefill from position 0.
 * Decodes are charged first; each prefill chunk is the longest that fits the
 * remaining budget, so later chunks of a long prompt get fewer tokens. If the
 * budget is spent before any prefill of the step, the first prefill still gets
 * min_prefill_chunk tokens (no prefill starvation under heavy decode).
 *
 * Blocks: each item carries how many new blocks it needs
 * (ceil((start + n_tokens) / block_tokens) - blocks held). Admitted requests
 * are charged for every block of their chunk including the prefix-cache hits
 * (n_cached, from prefix_cache_peek), because a hit on an unreferenced cached
 * block also consumes an available block; so the plan never needs more than
 * free_blocks + what its preemptions reclaim, even if the engine's real match
 * finds fewer cached tokens (it then starts earlier with the same length).
 * When a running request lacks blocks, its prefill chunk shrinks to what
 * fits; if nothing fits (or it is a decode), the lowest-ranked running
 * request not yet scheduled this step - possibly itself - is preempted: the
 * engine frees its blocks and it recomputes later.
 *
 * Speculative decoding: a decode with n_draft > 0 is a verify item of
 * 1 + n_draft tokens, costed and given blocks like any chunk of that length.
 * Drafts are optional work: they shrink to the tokens, budget and blocks left
 * and never cause a preemption (only the decode's own token can). Such an
 * item still samples (sample = true) although it does not end at seq_len.
 *
 * Caller: the engine thread once per step (and the simulator). */
#ifndef CINFER_ENGINE_SCHED_H
#define CINFER_ENGINE_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "base/compute_cost.h"
#include "base/error.h"

/* SCHED_LOADING: admitted, waiting for blocks from the persistent store. The
 * plan skips it (no item, never preempted); it counts as running for
 * max_seqs, and its blocks are already allocated (not in free_blocks). */
typedef enum sched_state { SCHED_WAITING = 0, SCHED_RUNNING, SCHED_PREEMPTED, SCHED_LOADING } sched_state;

typedef struct sched_req {
    sched_state state;
    int32_t priority; /* lower value = more urgent */
    uint64_t arrival; /* arrival order (smaller = earlier) */
    int32_t prompt_len; /* >= 1 */
    int32_t n_generated; /* tokens sampled so far */
    int32_t max_tokens; /* generation limit; requests with n_generated >= max_tokens are skipped */
    int32_t n_computed; /* RUNNING: tokens with KV in its blocks; else ignored */
    int32_t n_cached; /* WAITING/PREEMPTED: tokens the prefix cache holds (prefix_cache_peek); else ignored */
    int32_t n_blocks; /* RUNNING: blocks in its table */
    int32_t n_reclaimable; /* RUNNING: blocks preemption would return to the pool (held by it alone) */
    int32_t n_draft; /* decoding: draft tokens to verify with the decode (speculative decoding); 0: none */
} sched_req;

typedef struct sched_limits {
    int32_t max_batch_tokens; /* tokens per step */
    int32_t max_seqs; /* running requests */
    double linear_cost; /* per token (weights); > 0 */
    double attn_cost; /* per token per context position; >= 0 */
    int32_t min_prefill_chunk; /* see above; >= 1 */
    int32_t max_seq_chunk; /* tokens of one request per step (window rings, kv_pool.h); 0 = no limit */
} sched_limits;

typedef struct sched_input {
    const sched_req *reqs;
    int32_t n_reqs;
    int32_t free_blocks; /* blocks an allocation can get now: free + evictable cached (kv_pool_available) */
    int32_t block_tokens;
    sched_limits limits;
} sched_input;

typedef enum sched_kind { SCHED_DECODE = 0, SCHED_PREFILL } sched_kind;

typedef struct sched_item {
    int32_t req; /* index into reqs[] */
    sched_kind kind;
    int32_t start; /* first position computed: n_computed, or for admitted requests n_cached
                           rounded down to a block and below seq_len */
    int32_t n_tokens;
    int32_t new_blocks; /* blocks to allocate before the forward pass */
    bool admitted; /* was waiting/preempted: match the prefix cache (up to start tokens) first */
    bool sample; /* the chunk ends at seq_len: sample a token from its last row */
} sched_item;

typedef struct sched_plan {
    /* caller-provided, capacity n_reqs each (scratch: 2 * n_reqs) */
    sched_item *items;
    int32_t *preempted;
    int32_t *scratch;
    /* results */
    int32_t n_items, n_preempted;
    int32_t n_tokens; /* tokens in the step */
    int32_t new_blocks; /* sum over items */
    int32_t n_running; /* running requests after the step */
    double cost, budget; /* estimated compute of the step, and the budget */
} sched_plan;

/* The model dimensions the cost model needs, as plain numbers (the scheduler
 * knows no model: the engine copies them from model_hparams). */
typedef cf_cost_shape sched_shape;

/* Defaults for a model: max_batch_tokens 2048, max_seqs 64, min_prefill_chunk
 * 16, linear_cost 1 and attn_cost from sched_attn_weight(shape) (shape may be
 * NULL: a 4096-wide model is assumed). */
sched_limits sched_default_limits(const sched_shape *shape);
/* Attention work per (token x context position) relative to the weight work
 * per token: (4 * n_layer * n_head * head_dim) / (2 * weights read per token). */
double sched_attn_weight(const sched_shape *shape);
/* Cost of computing positions [start, start + n) (formula above;
 * base/compute_cost.h cf_chunk_cost with these limits). */
double sched_chunk_cost(const sched_limits *l, int32_t start, int32_t n);

/* Plans one step. Fails (-1, err) only on invalid input (bad limits, a
 * request with negative or inconsistent counts, missing arrays). */
int sched_plan_step(const sched_input *in, sched_plan *plan, cf_err *err);

#endif
