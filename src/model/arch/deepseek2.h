/* deepseek2.h - the weights of one deepseek2 layer (MLA attention, and
 * a dense FFN or a MoE FFN), shared by the loader (deepseek2.c) and the
 * forward pass (deepseek2_forward.c). Not a public header.
 *
 * Shapes (W[out][in], GGUF ne = {in, out}); H heads, E = n_embd:
 *   wq        [H*(nope+rope)][E]            (q_lora_rank == 0), or
 *   wq_a      [q_lora][E], q_a_norm, wq_b [H*(nope+rope)][q_lora]
 *   wkv_a     [kv_lora + rope][E]           latent | shared rotary key
 *   wkv_b     [H*(nope+v)][kv_lora]         per head: nope rows of K, then v rows of V
 *   kv_b_f32  the same matrix in f32 (the absorbed decode form reads its rows)
 *   wo        [E][H*v]
 *   dense FFN: w_gate, w_up [n_ff][E], w_down [E][n_ff]
 *   MoE: router [n_expert][E], exp_bias [n_expert] (selection only, may be
 *        NULL), per expert egu [2*n_ff_exp][E] (gate rows then up rows; or
 *        separate eg/eu [n_ff_exp][E] when their types differ), ed
 *        [E][n_ff_exp]; shared
 *        experts sg/su [n_ff_exp*n_shared][E], sd [E][n_ff_exp*n_shared].
 * Routed experts (deepseek2_experts.c): with a partial expert set (expert
 * parallelism, model_load_opts.expert_keep) `emem` [n_expert] says which are
 * resident and owns their prepared copies; the others' kern_weights are
 * zero. Without one, emem is NULL and every expert is prepared at load into
 * model weight buffers.
 * Ownership: everything here belongs to the model (m->layers, an array of
 * n_layer + n_nextn ds2_layer (the next-n layers last), and the expert arrays are freed by the family's release
 * hook; the f32 vectors and repacked / stacked copies are model weight
 * buffers, model_wbuf, released with the model). */
#ifndef CINFER_MODEL_DEEPSEEK2_H
#define CINFER_MODEL_DEEPSEEK2_H

#include "model/arch/arch.h"
#include "model/arch/expert_buf.h"

/* Where a MoE layer's expert stacks are in the file (FP8: their block scales). */
typedef struct ds2_expert_src {
    const gguf_tensor *gate, *up, *down;
    const float *gate_scale, *up_scale, *down_scale; /* DT_F8_B128 only */
    bool stacked; /* gate and up become one egu matrix per expert */
} ds2_expert_src;

typedef struct ds2_layer {
    const float *attn_norm, *ffn_norm, *q_a_norm, *kv_a_norm; /* f32 */
    kern_weight wq, wq_a, wq_b, wkv_a, wkv_b, wo;
    const float *kv_b_f32; /* rows of wkv_b in f32 (the file's tensor, or a converted copy) */
    bool moe;
    kern_weight w_gate, w_up, w_down;
    kern_weight router;
    const float *exp_bias;
    kern_weight *egu; /* n_expert stacked gate|up, or NULL (then eg, eu) */
    kern_weight *eg, *eu, *ed; /* n_expert each, owned arrays */
    ds2_expert_src esrc;
    expert_mem *emem; /* [n_expert] with a partial expert set, else NULL */
    bool has_shared;
    kern_weight sg, su, sd;
    /* next-n (MTP) layers only (blk.N.nextn.*, N >= n_layer): eh_proj [E][2E] over
     * [enorm(embed(t)) | hnorm(h)]; the head's norm (shared_head_norm, else output_norm), its
     * matrix (shared_head_head, else output) and the token rows (embed_tokens, else token_embd) */
    kern_weight eh_proj;
    const float *enorm, *hnorm, *head_norm;
    bool has_head;
    kern_weight head;
    const gguf_tensor *embed; /* NULL: token_embd */
} ds2_layer;

static inline const ds2_layer *ds2_layers(const model *m) { return (const ds2_layer *)m->layers; }

/* Routed experts (deepseek2_experts.c): the layer's expert stacks (all, or
 * those m->expert_keep keeps), their release, and the arch hooks that make
 * one resident / release it later (model.h model_expert_acquire). */
int ds2_load_routed(model *m, int il, ds2_layer *L, uint64_t *bytes, uint64_t *params, cf_err *err);
void ds2_release_routed(model *m, ds2_layer *L);
int ds2_expert_acquire(model *m, int32_t layer, int32_t expert, cf_err *err);
void ds2_expert_release(model *m, int32_t layer, int32_t expert);
bool ds2_expert_resident(const model *m, int32_t layer, int32_t expert);
/* An expert's file bytes (gate, up, down slices back to back; not offered
 * for FP8 stacks), read from this process's file mapping or made resident
 * from another's (model.h model_expert_raw_size). */
size_t ds2_expert_raw_size(const model *m, int32_t layer);
int ds2_expert_read_raw(const model *m, int32_t layer, int32_t expert, void *dst, size_t n, cf_err *err);
int ds2_expert_acquire_raw(model *m, int32_t layer, int32_t expert, const void *raw, size_t n, cf_err *err);

/* The deepseek2 forward pass (deepseek2_forward.c) behind fwd_ctx (the
 * table's hooks, deepseek2.c); same contract as model.h's fwd_ctx_create /
 * model_forward, the batch already checked. */
typedef struct ds2_fwd ds2_fwd;
ds2_fwd *ds2_fwd_create(const model *m, thread_pool *pool, int32_t max_tokens, int32_t max_ctx, int32_t block_tokens,
                        cf_err *err);
void ds2_fwd_free(ds2_fwd *c);
int ds2_forward(ds2_fwd *c, const fwd_batch *b, float *logits, cf_err *err);
void ds2_fwd_set_expand_min(ds2_fwd *c, int32_t min_tokens);
int ds2_fwd_expert_load(const ds2_fwd *c, int32_t layer, uint64_t *counts, int32_t n);
int ds2_fwd_set_moe_executor(ds2_fwd *c, const cinfer_moe_executor *x, cf_err *err);
int ds2_fwd_expert_ffn(ds2_fwd *c, int32_t layer, int32_t expert, const float *x, int32_t n, float *y, cf_err *err);
/* MTP (model.h "MTP"): next-n layer `mtp` over b, conditioned on h (final normed hidden states). */
int ds2_mtp_forward(ds2_fwd *c, int32_t mtp, const fwd_batch *b, const float *h, float *logits, cf_err *err);

#endif
