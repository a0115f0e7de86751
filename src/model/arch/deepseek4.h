/* deepseek4.h - the weights of one DeepSeek V4 block (mHC mixing, hybrid
 * attention, MoE FFN), shared by the loader (deepseek4_load.c) and the
 * forward pass (deepseek4_*.c). Not a public header.
 *
 * GGUF layout = llama.cpp's deepseek4 (ne = {in, out}; W[out][in] here).
 * E = n_embd, H heads of width D (= the shared latent KV width), R rope dims
 * (the LAST R of each D-wide row, interleaved pairs), n = hc streams,
 * M = (2 + n) * n mixing weights, G output groups of rank OR, IH indexer
 * heads of width I:
 *   attn_norm [E], attn_sinks [H]
 *   attn_q_a [E -> Q], attn_q_a_norm [Q], attn_q_b [Q -> H*D]
 *   attn_kv [E -> D], attn_kv_a_norm [D]
 *   attn_output_a [H*D/G -> G*OR] (group g: rows g*OR..), attn_output_b [G*OR -> E]
 *   hc_{attn,ffn}_fn [n*E -> M], _base [M], _scale [3]
 *   ratio r != 0: attn_compressor_{kv,gate} [E -> c*D] (c = 2 if r == 4, else 1),
 *     attn_compressor_ape [c*D, r] (row j: bias of the j-th token of a group),
 *     attn_compressor_norm [D]
 *   ratio 4: indexer.proj [E -> IH], indexer.attn_q_b [Q -> IH*I],
 *     indexer_compressor_{kv,gate} [E -> 2I], _ape [2I, 4], _norm [I]
 *   ffn_gate_inp [E -> X] (F32), exp_probs_b.bias [X] (score layers) or
 *     ffn_gate_tid2eid [K, n_vocab] I32 (the first hash_layer_count blocks),
 *     ffn_norm [E], ffn_{gate,up}_exps [E -> FE, X], ffn_down_exps [FE -> E, X],
 *     ffn_{gate,up}_shexp [E -> FE*S], ffn_down_shexp [FE*S -> E]
 *   MTP blocks also: nextn.eh_proj [2E -> E], nextn.enorm, nextn.hnorm,
 *     nextn.shared_head_norm [E] (optional: output_norm)
 * Globals: output_hc_fn [n*E -> n], output_hc_base [n], output_hc_scale [1].
 * DSpark block drafter (optional, deepseek4_dspark.c; T taps, rank Rk):
 *   dspark.fc [T*E -> E], dspark.enc.output_norm [E], dspark.markov_w1
 *   [Rk, n_vocab] (read as F32 rows), dspark.markov_w2 [Rk -> n_vocab] (any
 *   matrix dtype), dspark.conf_proj [E + Rk, 1] and
 *   dspark.conf_proj.bias [1] (F32); keys deepseek4.dspark.block_size,
 *   deepseek4.dspark.target_layers, deepseek4.dspark.noise_token_id (or
 *   tokenizer.ggml.mask_token_id). Its stage is MTP block 0.
 *
 * Routed experts (deepseek4_experts.c): with a partial expert set (expert
 * parallelism, model_load_opts.expert_keep) `emem` [n_expert] of a main
 * block says which are resident and owns their prepared copies; the others'
 * kern_weights are zero. Without one (and in MTP blocks, which run
 * in-process) emem is NULL and every expert is prepared at load into model
 * weight buffers.
 * Ownership: everything belongs to the model (m->layers: ds4_weights, freed
 * by the family's release hook). */
#ifndef CINFER_MODEL_DEEPSEEK4_H
#define CINFER_MODEL_DEEPSEEK4_H

#include "model/arch/arch.h"
#include "model/arch/expert_buf.h"

typedef struct ds4_compressor {
    kern_weight wkv, wgate; /* [c*W][E] */
    float *ape; /* [r][c*W] */
    float *norm; /* [W] */
} ds4_compressor;

typedef struct ds4_layer {
    int32_t ratio;
    float *attn_norm, *ffn_norm, *q_a_norm, *kv_norm, *sinks; /* owned f32 */
    kern_weight wq_a, wq_b, wkv, wo_b;
    kern_weight *wo_a; /* G matrices [OR][H*D/G]: the groups' rows of attn_output_a */
    float *hc_attn_fn, *hc_attn_base, *hc_attn_scale; /* [M][n*E], [M], [3] */
    float *hc_ffn_fn, *hc_ffn_base, *hc_ffn_scale;
    ds4_compressor comp; /* ratio != 0 */
    ds4_compressor icomp; /* ratio 4: the indexer's */
    kern_weight idx_q_b, idx_proj; /* ratio 4 */
    /* MoE */
    kern_weight router; /* f32 [X][E] */
    float *exp_bias; /* [X] or NULL (hash layer) */
    int32_t *tid2eid; /* [n_vocab][K] or NULL (score layer); owned, checked < X */
    kern_weight *eg, *eu, *ed; /* n_expert each */
    const gguf_tensor *exps[3]; /* the gate, up, down stacks [in, out, n_expert] in the file */
    expert_mem *emem; /* [n_expert] with a partial expert set, else NULL */
    bool has_shared;
    kern_weight sg, su, sd;
    float swiglu_exp, swiglu_shexp; /* clamp limits (0: none) */
    /* MTP blocks */
    kern_weight eh_proj; /* [E][2E] */
    float *enorm, *hnorm, *head_norm;
} ds4_layer;

#define DS4_DSPARK_MAX_TAPS 8
#define DS4_DSPARK_MAX_BLOCK 16

/* The DSpark drafter's own weights (block 0: none in the file). */
typedef struct ds4_dspark {
    int32_t block; /* draft block rows (0: absent) */
    int32_t noise; /* input token of block rows 1.. */
    int32_t rank; /* Markov rank */
    int32_t n_taps, taps[DS4_DSPARK_MAX_TAPS]; /* target layers: tap t = the streams entering block t (1..n_layer) */
    kern_weight fc; /* [E][T*E] */
    float *enc_norm; /* [E] */
    float *w1; /* [n_vocab][Rk] */
    kern_weight w2; /* [n_vocab][Rk] */
    float *conf_w, *conf_b; /* [E + Rk], [1] */
} ds4_dspark;

typedef struct ds4_weights {
    int32_t n_blocks; /* main + MTP */
    ds4_layer *layer;
    float *hc_head_fn, *hc_head_base, *hc_head_scale; /* [n][n*E], [n], [1] */
    ds4_dspark dspark;
} ds4_weights;

static inline const ds4_weights *ds4_w(const model *m) { return (const ds4_weights *)m->layers; }

/* deepseek4_load.c */
int ds4_load(model *m, cf_err *err);
void ds4_release(model *m);
/* A small f32 tensor of exactly ne0 x ne1 (ne1 = 0: 1-D) into an owned copy (*out stays NULL when an optional one
 * is absent). */
int ds4_load_f32(model *m, const char *name, int64_t ne0, int64_t ne1, bool required, float **out, cf_err *err);

/* deepseek4_dspark.c: the DSpark tensors and keys (all or none; a partial set is an error naming what is
 * missing), their release, and the arch hooks (model.h "DSpark"). */
int ds4_dspark_load(model *m, ds4_dspark *d, cf_err *err);
void ds4_dspark_release(ds4_dspark *d);
void ds4_dspark_info(const model *m, model_dspark_info *out);
void ds4_dspark_head(void *fc, const float *state, int32_t prev, float *logits, float *conf); /* fc: ds4_fwd */

/* Routed experts (deepseek4_experts.c): block il's expert stacks (all, or
 * those m->expert_keep keeps; MTP blocks keep all), their release, and the
 * arch hooks that make one resident / release it later (model.h
 * model_expert_acquire). *routed += the stacks' file bytes. */
int ds4_load_routed(model *m, int il, ds4_layer *L, uint64_t *routed, cf_err *err);
void ds4_release_routed(model *m, ds4_layer *L);
int ds4_expert_acquire(model *m, int32_t layer, int32_t expert, cf_err *err);
void ds4_expert_release(model *m, int32_t layer, int32_t expert);
bool ds4_expert_resident(const model *m, int32_t layer, int32_t expert);
/* An expert's file bytes (gate, up, down slices back to back), read from
 * this process's file mapping or made resident from another's (model.h
 * model_expert_raw_size). */
size_t ds4_expert_raw_size(const model *m, int32_t layer);
int ds4_expert_read_raw(const model *m, int32_t layer, int32_t expert, void *dst, size_t n, cf_err *err);
int ds4_expert_acquire_raw(model *m, int32_t layer, int32_t expert, const void *raw, size_t n, cf_err *err);

/* KV of one layer (deepseek4.c; docs/deepseek4.md "KV"): the per-token
 * state a sequence keeps for its last positions (main layers: on its window
 * ring) and the rows a compressor group ends with (main layers: packed in
 * the paged blocks, one per `ratio` tokens). MTP blocks keep both in one
 * slot per token (state, then rows) of their own one-layer blocks. */
typedef struct ds4_kv_row {
    int32_t state; /* per-token state floats */
    int32_t raw; /* 0: the token's rotated latent (D) */
    int32_t cstate; /* compressor kv | score + ape of this token (2*c*D), or -1 */
    int32_t istate; /* indexer compressor kv | score (4*I), or -1 */
    int32_t rows; /* floats a finished group stores: compressed row D (+ indexer row I); 0 for ratio 0 */
} ds4_kv_row;
ds4_kv_row ds4_kv_row_of(const model_hparams *hp, int32_t ratio);
/* The ring window of a layer of this ratio: the attention window W, or the
 * tokens a finishing compressor row reads back (8 for ratio 4, 128 for 128)
 * when more. */
int32_t ds4_ring_window(const model_hparams *hp, int32_t ratio);

/* The forward pass (deepseek4_forward.c); model.h's contract. */
typedef struct ds4_fwd ds4_fwd;
ds4_fwd *ds4_fwd_create(const model *m, thread_pool *pool, int32_t max_tokens, int32_t max_ctx, int32_t block_tokens,
                        cf_err *err);
void ds4_fwd_free(ds4_fwd *c);
int ds4_forward(ds4_fwd *c, const fwd_batch *b, float *logits, cf_err *err);
/* The residual streams [n_tokens][hc][n_embd] the last ds4_forward left
 * (valid until the next call): the MTP blocks' `h` input. */
const float *ds4_fwd_streams(const ds4_fwd *c);
/* MTP block `mtp` (reference MTPBlock; llama.cpp's layout): for each batch
 * token t (the token after the one whose main-model streams are h[t]),
 * streams = eh_proj [rmsnorm_e(embed(t)) | rmsnorm_h(h_i)] per stream i, one
 * block (its own attention and MoE), then the head (output_hc_*, the
 * block's shared_head_norm or output_norm, output) for the out_rows. The
 * batch's block tables are the MTP block's own KV: blocks of
 * ds4_mtp_block_floats(m, block_tokens) floats (one layer, a slot per token;
 * no ring). */
/* Expert parallelism and load counters (deepseek4_moe_ep.c; model.h's
 * fwd_ctx_set_moe_executor / fwd_ctx_expert_ffn / fwd_ctx_expert_load). */
int ds4_fwd_set_moe_executor(ds4_fwd *c, const cinfer_moe_executor *x, cf_err *err);
int ds4_fwd_expert_ffn(ds4_fwd *c, int32_t layer, int32_t expert, const float *x, int32_t n, float *y, cf_err *err);
int ds4_fwd_expert_load(const ds4_fwd *c, int32_t layer, uint64_t *counts, int32_t n);
int ds4_mtp_forward(ds4_fwd *c, int mtp, const fwd_batch *b, const float *h, float *logits, cf_err *err);
int64_t ds4_mtp_block_floats(const model *m, int mtp, int32_t block_tokens);

#endif
