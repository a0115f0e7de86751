/* mkmodel.h - random-weight models of any shape for tests and benchmarks.
 * Called by `cinfer mkmodel` and tests. */
#ifndef CINFER_MODEL_MKMODEL_H
#define CINFER_MODEL_MKMODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "tensor/dtype.h"

typedef struct mkmodel_opts {
    const char *arch; /* "llama", "deepseek2", "gemma2" or "deepseek4" */
    int dim, layers, heads, kv_heads, ffn;
    const char *vocab_from; /* GGUF whose tokenizer.* keys are copied; vocab = its token count */
    dtype type; /* weight matrices; norms are always F32 */
    uint64_t seed;
    int ctx; /* llama.context_length (0 = 2048) */
    bool tied; /* no output.weight: the output reuses token_embd.weight */
    /* deepseek2 only (kv_heads is ignored; ffn = the dense layers' width) */
    int q_lora; /* 0: one attn_q matrix */
    int kv_lora, qk_nope, qk_rope, v_head;
    int experts, experts_used, shared_experts, expert_ffn, dense_layers;
    int groups, groups_used; /* group-limited routing; 0 = off */
    bool softmax_gating; /* default: sigmoid with exp_probs_b and normalized weights */
    float expert_scale; /* expert_weights_scale (0 = 1) */
    int32_t hot_experts; /* deepseek2, sigmoid gating: experts 0..hot_experts-1 of every MoE layer get hot_bias */
    float hot_bias; /* added to their exp_probs_b (selection only): a skewed router, for EP benchmarks */
    float yarn_factor; /* > 1: YaRN rope scaling (yarn_log_multiplier 0.1) */
    int yarn_orig_ctx; /* its original context (0 = ctx / factor) */
    /* shared by gemma2 and deepseek4 */
    int head_dim; /* gemma2: per-head width (0: dim / heads); deepseek4: shared latent KV width */
    int window; /* sliding window in tokens (0: gemma2 4096, deepseek4 128) */
    /* gemma2 only (always tied; kv_heads as llama) */
    int swa_pattern; /* attention.sliding_window_pattern (0: not written, llama.cpp's default 2) */
    float attn_softcap, final_softcap; /* 0: 50 and 30 */
    /* deepseek4 (also uses q_lora, qk_rope, experts, experts_used,
     * shared_experts, expert_ffn, expert_scale, yarn_*; --ffn = expert_ffn) */
    int o_groups, o_lora; /* grouped low-rank output projection */
    const char *ratios; /* compress ratios per layer, "4,128,0,..." (0|4|128) */
    int index_heads, index_dim, index_topk; /* lightning indexer */
    int hc, sinkhorn; /* hyper-connection streams, Sinkhorn iterations */
    int hash_layers, mtp_layers;
    int dspark_block, dspark_rank; /* DSpark drafter tensors (block rows, 0: none; Markov rank, 0: 16) */
    const char *dspark_taps; /* its target layers "a,b,c" (1..layers; NULL: the last three boundaries) */
    float swiglu_limit; /* 0: no clamp */
    float compress_rope_base; /* 0: 160000 */
} mkmodel_opts;

/* True when the options the architecture needs beyond the shared ones are
 * given (llama, gemma2: kv_heads; deepseek2: kv_lora, qk_nope, qk_rope, v_head); an
 * unknown arch counts as complete (mkmodel_write then names it). */
bool mkmodel_has_arch_options(const mkmodel_opts *o);

/* Writes the model to out_path (atomically, streamed row by row).
 * Matrices ~ N(0, 0.02), norm weights 1 + N(0, 0.02), deepseek2's router
 * (ffn_gate_inp, F32) and exp_probs_b (F32) N(0, 0.02); every row is drawn from
 * its own generator seeded by (seed, tensor name, row), so the values do not
 * depend on the dtype, on --tied, or on how the work is split. */
int mkmodel_write(const mkmodel_opts *o, const char *out_path, cf_err *err);

#endif
