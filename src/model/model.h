/* model.h - a loaded model: hyper-parameters, prepared weights, tokenizer,
 * and the forward pass over a ragged batch against a paged KV cache.
 *
 * Ownership: model_load() opens (and keeps) the GGUF mapping, prepares every
 * weight matrix for the active kernel ISA (possibly repacking into owned
 * memory), and loads the tokenizer; model_free() releases all of it. A model
 * is immutable after load and may be shared by several forward contexts.
 *
 * KV cache layout (the engine owns the memory; the model only reads and
 * writes it): one block = all layers of `block_tokens` consecutive tokens of
 * one sequence, as one contiguous float array of model_kv_block_floats():
 *   block[layer][K: [n_head_kv * head_dim][token_in_block],
 *                V: [token_in_block][n_head_kv * head_dim]]
 * (K dimension-major so attention reads 16-key tiles in place; V
 * token-major so P.V streams rows)
 * so a block can be copied to / from a persistent store as one object.
 *
 * MLA layers (deepseek2) store instead, per layer and token, the normalized
 * latent and the rotated shared key, token-major:
 *   block[layer][token_in_block][kv_lora_rank | rope_dim]
 *
 * Architectures: 'llama' (and 'qwen2'-style Q/K/V biases when present) and
 * 'deepseek2' (model_deepseek2.h). Other architectures register in
 * model_load() by name. */
#ifndef CINFER_MODEL_MODEL_H
#define CINFER_MODEL_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "base/threadpool.h"
#include "model/gguf.h"
#include "tensor/kernels.h"
#include "text/tokenizer.h"

typedef enum { ROPE_NORM = 0, ROPE_NEOX = 2 } rope_mode;
typedef enum { ROPE_SCALING_NONE = 0, ROPE_SCALING_LINEAR, ROPE_SCALING_YARN } rope_scaling;

typedef struct model_hparams {
    char arch[32];
    int32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train;
    float rms_eps;
    int32_t rope_dim;        /* rotated dims per head (<= head_dim) */
    float rope_base;
    rope_mode rope_mode;
    rope_scaling rope_scaling;
    float rope_factor;       /* context extension factor (linear / yarn) */
    int32_t rope_orig_ctx;   /* yarn: original training context */
    float yarn_ext_factor, yarn_attn_factor, yarn_beta_fast, yarn_beta_slow;
    bool tied_output;        /* LM head is token_embd */
    /* deepseek2 (MLA + MoE; model_deepseek2.h); all 0 for other architectures.
     * There head_dim = qk_nope_dim + rope_dim (the query/key width) and
     * n_head_kv = n_head; the KV cache holds kv_lora_rank + rope_dim floats
     * per token and layer. */
    int32_t q_lora_rank;     /* 0: one attn_q matrix */
    int32_t kv_lora_rank, qk_nope_dim, v_head_dim;
    int32_t n_dense_lead;    /* leading layers with a dense FFN (n_ff) */
    int32_t n_expert, n_expert_used, n_expert_shared, n_ff_exp;
    int32_t n_expert_group, n_group_used; /* group-limited routing (0 = off) */
    int32_t expert_gating;   /* 1 softmax, 2 sigmoid */
    bool expert_weights_norm;
    float expert_weights_scale;
    float yarn_log_mul;      /* kq scale = (attn_factor*(1 + yarn_log_mul*ln factor))^2 / sqrt(head_dim) */
} model_hparams;

typedef struct model model;

int model_load(const char *path, model **out, cf_err *err);
/* Progress of a load: called on the loading thread after each of n_layer
 * layers' weights is prepared (done = 1..total). */
typedef void (*model_progress_fn)(void *ctx, int done, int total);
/* model_load, reporting progress to fn (may be NULL). */
int model_load_progress(const char *path, model_progress_fn fn, void *ctx, model **out, cf_err *err);
void model_free(model *m);

const model_hparams *model_get_hparams(const model *m);
const tokenizer *model_get_tokenizer(const model *m);
const gguf_file *model_get_gguf(const model *m);
/* Bytes of weights a decode step streams (all matrices + one embedding row). */
uint64_t model_weight_bytes(const model *m);
/* Bytes of weights one token reads in a decode step: like model_weight_bytes
 * but counting only expert_used_count routed experts of a MoE layer (the
 * roofline of a single stream). Equal to model_weight_bytes without MoE. */
uint64_t model_active_weight_bytes(const model *m);
/* Parameters one token multiplies with (MoE: expert_used_count routed experts). */
uint64_t model_active_params(const model *m);
/* Number of parameters (elements of all tensors). */
uint64_t model_n_params(const model *m);
/* Floats in one KV block of `block_tokens` tokens (all layers, K and V; for
 * MLA the latent and the rotary key). */
int64_t model_kv_block_floats(const model *m, int block_tokens);
/* KV cache floats one token needs in one layer (2 * n_head_kv * head_dim;
 * MLA: kv_lora_rank + rope_dim). */
int32_t model_kv_token_floats(const model *m);
/* True for MLA attention (deepseek2): KV = latent + rotary key per token. */
bool model_is_mla(const model *m);

/* ---- forward pass ---- */

/* One sequence's KV: its block table (pointers to blocks of model_kv_block_floats). */
typedef struct fwd_seq {
    float *const *blocks;
    int32_t n_blocks;
} fwd_seq;

/* A ragged batch: tokens of several sequences, each at its position. For
 * every sequence, positions in the batch must be consecutive and continue
 * what its cache already holds (the cache holds positions < first pos). */
typedef struct fwd_batch {
    int32_t n_tokens;
    const int32_t *tokens;
    const int32_t *pos;
    const int32_t *seq;        /* index into seqs[] per token */
    const fwd_seq *seqs;
    int32_t n_seqs;
    int32_t n_out;             /* rows that need logits */
    const int32_t *out_rows;   /* their batch indices, ascending */
} fwd_batch;

typedef struct fwd_ctx fwd_ctx;

/* Scratch for batches of up to max_tokens tokens whose sequences reach at most
 * max_ctx positions, with KV blocks of block_tokens tokens. */
fwd_ctx *fwd_ctx_create(const model *m, thread_pool *pool, int32_t max_tokens, int32_t max_ctx,
                        int32_t block_tokens, cf_err *err);
void fwd_ctx_free(fwd_ctx *c);

/* Runs the batch: writes each token's K/V into its sequence's blocks and the
 * logits of the out_rows into logits[n_out][n_vocab]. Input errors (token
 * ids, positions beyond the block table / max_ctx) return -1 before any work. */
int model_forward(fwd_ctx *c, const fwd_batch *b, float *logits, cf_err *err);

/* MLA (deepseek2) attention form: a sequence with at least `min_tokens`
 * query tokens in a batch uses the expanded form (its cached latents expanded
 * to per-head K/V through attn_kv_b: cheaper for long prompt chunks), fewer
 * use the absorbed form (attention against the latent cache). The two agree
 * to ~1e-6 but not bit for bit, so a batch-invariant caller (the engine,
 * whose chunking and preemption change how many tokens of a sequence share a
 * batch) keeps the default MLA_EXPAND_NEVER: absorbed for every token.
 * Single-sequence sessions (engine/generate.h) use MLA_EXPAND_MIN_PREFILL.
 * min_tokens <= 0 restores the default. Enabling allocates the expansion
 * scratch (K/V for up to 4096 positions); if that fails the context stays
 * absorbed (same results, slower prompts). No effect on other models. */
#define MLA_EXPAND_NEVER INT32_MAX
#define MLA_EXPAND_MIN_PREFILL 32
void fwd_ctx_set_mla_expand_min(fwd_ctx *c, int32_t min_tokens);

/* MoE expert load: tokens routed to each expert of `layer` over the last
 * `window` forward passes of this context (window = MOE_LOAD_WINDOW steps).
 * Writes min(n, n_expert) counts; returns n_expert (0 for a dense layer or a
 * model without experts, -1 for a bad layer). Safe to call from any thread
 * while the context runs (relaxed atomic reads; counts of one call may mix
 * two neighbouring steps). */
#define MOE_LOAD_WINDOW 64
int fwd_ctx_expert_load(const fwd_ctx *c, int32_t layer, uint64_t *counts, int32_t n);

#endif
