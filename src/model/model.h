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
 * Architectures: 'llama' (and 'qwen2'-style Q/K/V biases when present).
 * Other architectures register in model_load() by name. */
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
} model_hparams;

typedef struct model model;

int model_load(const char *path, model **out, cf_err *err);
void model_free(model *m);

const model_hparams *model_get_hparams(const model *m);
const tokenizer *model_get_tokenizer(const model *m);
const gguf_file *model_get_gguf(const model *m);
/* Bytes of weights a decode step streams (all matrices + one embedding row). */
uint64_t model_weight_bytes(const model *m);
/* Number of parameters (elements of all tensors). */
uint64_t model_n_params(const model *m);
/* Floats in one KV block of `block_tokens` tokens (all layers, K and V). */
int64_t model_kv_block_floats(const model *m, int block_tokens);

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

#endif
