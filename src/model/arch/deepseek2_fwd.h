/* deepseek2_fwd.h - the deepseek2 forward context shared by its three
 * parts: deepseek2_forward.c (context, layer loop), deepseek2_attention.c
 * (MLA in absorbed and expanded form) and deepseek2_moe.c (routing, experts,
 * load counters). Not a public header.
 *
 * Scratch is sized at creation (T = max_tokens, H heads, E = n_embd):
 * nothing is allocated per step. */
#ifndef CINFER_MODEL_DS2_FWD_INTERNAL_H
#define CINFER_MODEL_DS2_FWD_INTERNAL_H

#include <stdatomic.h>

#include "model/arch/deepseek2.h"

/* Expanded-form attention holds K/V of the whole context of one sequence;
 * sequences reaching further use the absorbed form. The expanded form's
 * per-(token, head) dot products beat the tiled absorbed kernel only on
 * short contexts (bench/results/mla15-*.txt: 1.9x at 128 tokens, even at
 * 512, 2.3x slower at 2,048). */
#define MLA_EXPAND_MAX_CTX 512

struct ds2_fwd {
    const model *m;
    thread_pool *pool;
    kern_ctx *kc; /* rows <= max_tokens */
    kern_ctx *kc_exp; /* expansion: rows <= exp_cap */
    int32_t max_tokens, max_ctx, bt, n_threads, expand_min, exp_cap;
    float scale; /* kq scale */
    int32_t kv_shift; /* the layer being run stores its KV as layer il - kv_shift (MTP layers: 0 of their own blocks) */
    float *mtp_cat; /* next-n layers: [enorm(e) | hnorm(h)] rows (T x 2E), or NULL */
    /* activations */
    float *x, *h, *qa, *q, *ckv, *att, *ffa, *ffb, *ffo, *moe, *rope_cs;
    float *lat; /* absorbed queries [T][H][kv_lora_rank + rope_dim] */
    float *olat; /* absorbed attention output [T][H][kv_lora_rank] */
    float *scores; /* expanded form, per thread: scores_per_thread */
    int64_t scores_per_thread;
    float *attn_scratch; /* absorbed form, per thread: attn_scratch_per_thread (kern_attention's scratch) */
    int64_t attn_scratch_per_thread;
    int32_t run_max; /* absorbed form: query tokens per kernel call */
    int32_t *run_first, *run_len; /* absorbed form: this layer's runs (batch index, length) */
    /* expanded form */
    float *ctx_lat, *ctx_kv;
    /* per batch: distinct sequences and how each runs attention */
    int32_t *tok_group, *grp_seq, *grp_n, *grp_last, *grp_toks;
    uint8_t *grp_expand;
    int32_t n_grp;
    /* MoE */
    float *router, *rscore, *sel_w, *exp_w, *xe, *ge, *ue, *ye;
    int32_t *sel, *exp_n, *exp_off, *exp_tok;
    /* expert load: ring of per-step counts and atomic window sums */
    int32_t n_moe, *moe_index; /* layer -> MoE layer index or -1 */
    uint32_t *ring; /* [MOE_LOAD_WINDOW][n_moe][n_expert] */
    int32_t ring_pos;
    _Atomic uint64_t *load; /* [n_moe][n_expert] */
    /* expert parallelism: the executor (borrowed) and its pair rows [max_tokens * n_expert_used] */
    const cinfer_moe_executor *exec;
    float *pair_x, *pair_y;
    int32_t *pair_e;
};

/* deepseek2_attention.c: attention for layer il from c->q (per head [nope | rope],
 * rope applied) against the cache (this batch's rows already stored) into
 * c->att ([T][H * v_head_dim]). */
void ds2_attention(ds2_fwd *c, const fwd_batch *b, int il);
/* deepseek2_moe.c: c->moe = the routed experts' output for c->h in layer il (the
 * shared experts are a dense FFN run by the caller). -1 only if the expert
 * executor failed. */
int ds2_moe(ds2_fwd *c, const fwd_batch *b, int il, cf_err *err);
/* deepseek2_moe.c: starts a step of the expert-load window. */
void ds2_moe_step_begin(ds2_fwd *c);

#endif
