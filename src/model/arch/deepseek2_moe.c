/* deepseek2_moe.c - the routed-expert FFN of a deepseek2 MoE layer, and the
 * expert load counters.
 *
 * Routing, per token (DeepSeek V2/V3 as llama.cpp's build_moe_ffn and
 * transformers' DeepseekV3TopkRouter compute it):
 *   p = softmax(logits) or sigmoid(logits) (expert_gating_func), logits =
 *       W_router h
 *   choice score s = p + exp_probs_b (the bias only steers the choice)
 *   group-limited (expert_group_count > 1): group score = sum of the two
 *       largest s in the group; keep the expert_group_used_count best groups;
 *       experts of the other groups are never chosen (transformers masks
 *       them with -inf)
 *   top-k of s (ties: lower id); weights w = p of the chosen experts,
 *       divided by their sum if expert_weights_norm, times
 *       expert_weights_scale
 *   y = sum_e w_e · W_down_e(silu(W_gate_e h) ⊙ W_up_e h)
 * Execution: the step's (token, expert) pairs are grouped by expert, so each
 * chosen expert's matrices are read once per step for all its tokens. A
 * token's sum runs over its experts in id order: the result does not depend
 * on the other tokens in the batch. With an expert executor (expert
 * parallelism, cinfer/model.h) the grouped pairs' products are computed by
 * the executor (on other processes) and combined here in the same order, so
 * results are bit-identical to the in-process path.
 *
 * Load counters: tokens routed to each expert of each MoE layer, summed over
 * the last MOE_LOAD_WINDOW forward passes (a ring of per-step counts, owned
 * by the thread running the forward pass, plus atomic window sums that readers load). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch/deepseek2_fwd.h"
#include "model/rowops.h"
#include "tensor/vecmath.h"

/* Indices of the k largest of v[0..n) (ties: lower index first) into out. */
static void top_k(const float *v, int32_t n, int32_t k, int32_t *out) {
    for (int32_t i = 0; i < k; i++) {
        int32_t best = -1;
        for (int32_t e = 0; e < n; e++) {
            bool taken = false;
            for (int32_t q = 0; q < i && !taken; q++) taken = out[q] == e;
            if (!taken && (best < 0 || v[e] > v[best])) best = e;
        }
        out[i] = best;
    }
}

/* Chooses the token's experts (sel[k]) and their weights (w[k]) from its
 * router logits (overwritten with the probabilities). */
static void route(const model_hparams *hp, const float *bias, float *logits, float *scratch, int32_t *sel, float *w) {
    int32_t ne = hp->n_expert, k = hp->n_expert_used;
    float *p = logits, *s = scratch;
    if (hp->expert_gating == 2) {
        for (int32_t e = 0; e < ne; e++) p[e] = 1.0f / (1.0f + expf(-p[e]));
    } else {
        float mx = p[0], sum = 0.0f;
        for (int32_t e = 1; e < ne; e++) mx = p[e] > mx ? p[e] : mx;
        for (int32_t e = 0; e < ne; e++) sum += p[e] = expf(p[e] - mx);
        for (int32_t e = 0; e < ne; e++) p[e] /= sum;
    }
    for (int32_t e = 0; e < ne; e++) s[e] = p[e] + (bias ? bias[e] : 0.0f);
    if (hp->n_expert_group > 1) {
        int32_t ng = hp->n_expert_group, per = ne / ng;
        float gs[4096];
        int32_t top2[2], keep[4096];
        for (int32_t g = 0; g < ng; g++) {
            top_k(s + g * per, per, 2, top2);
            gs[g] = s[g * per + top2[0]] + s[g * per + top2[1]];
        }
        top_k(gs, ng, hp->n_group_used, keep);
        for (int32_t g = 0; g < ng; g++) {
            bool kept = false;
            for (int32_t i = 0; i < hp->n_group_used && !kept; i++) kept = keep[i] == g;
            if (!kept)
                for (int32_t e = 0; e < per; e++) s[g * per + e] = -INFINITY;
        }
    }
    top_k(s, ne, k, sel);
    float sum = 0.0f;
    for (int32_t i = 0; i < k; i++) sum += w[i] = p[sel[i]];
    float mul = hp->expert_weights_scale / (hp->expert_weights_norm ? sum : 1.0f);
    for (int32_t i = 0; i < k; i++) w[i] *= mul;
}

/* y += w * src over n floats: the one combine of both paths (same rounding). */
static void add_weighted(float *y, float w, const float *src, int64_t n) {
    for (int64_t d = 0; d < n; d++) y[d] += w * src[d];
}

/* y[0..n) = FFN of routed expert e of layer L on x[0..n), n <= max_tokens
 * (uses the ge/ue scratch). Each row's result depends on that row only. */
static void expert_rows(ds2_fwd *c, const ds2_layer *L, int32_t e, const float *x, int32_t n, float *y) {
    int64_t fe = c->m->hp.n_ff_exp;
    if (L->egu) {
        kern_matmul(c->kc, &L->egu[e], x, n, c->ue); /* rows [gate | up] */
        for (int32_t i = 0; i < n; i++) {
            float *g = c->ge + (int64_t)i * fe;
            memcpy(g, c->ue + (int64_t)i * 2 * fe, (size_t)fe * sizeof(float));
            kern_silu_mul(g, c->ue + (int64_t)i * 2 * fe + fe, fe);
        }
    } else {
        kern_matmul(c->kc, &L->eg[e], x, n, c->ge);
        kern_matmul(c->kc, &L->eu[e], x, n, c->ue);
        rows_silu_mul(c->pool, c->ge, c->ue, n, fe);
    }
    kern_matmul(c->kc, &L->ed[e], c->ge, n, y);
}

/* The executor path of ds2_moe: the step's (token, expert) pairs, grouped by
 * expert as exp_off/exp_tok order them, go out as rows; their outputs are
 * combined here in the same order as the in-process path. */
static int run_executor(ds2_fwd *c, int il, cf_err *err) {
    int32_t ne = c->m->hp.n_expert, np = c->exp_off[ne];
    int64_t E = c->m->hp.n_embd;
    for (int32_t e = 0; e < ne; e++)
        for (int32_t at = c->exp_off[e]; at < c->exp_off[e + 1]; at++) {
            c->pair_e[at] = e;
            memcpy(c->pair_x + (int64_t)at * E, c->h + (int64_t)c->exp_tok[at] * E, (size_t)E * sizeof(float));
        }
    char msg[256] = "";
    if (c->exec->run(c->exec->self, il, np, c->pair_e, c->pair_x, E, c->pair_y, msg, sizeof msg))
        return cf_fail(err, "layer %d experts: %s", il, msg[0] ? msg : "the executor failed");
    for (int32_t at = 0; at < np; at++)
        add_weighted(c->moe + (int64_t)c->exp_tok[at] * E, c->exp_w[at], c->pair_y + (int64_t)at * E, E);
    return 0;
}

void ds2_moe_step_begin(ds2_fwd *c) {
    if (!c->n_moe) return;
    size_t cells = (size_t)c->n_moe * (size_t)c->m->hp.n_expert;
    uint32_t *slot = c->ring + (size_t)c->ring_pos * cells;
    for (size_t i = 0; i < cells; i++) {
        if (slot[i]) atomic_fetch_sub_explicit(&c->load[i], slot[i], memory_order_relaxed);
        slot[i] = 0;
    }
}

/* Called at the end of a forward pass by ds2_moe on the last MoE layer. */
static void step_end(ds2_fwd *c) { c->ring_pos = (c->ring_pos + 1) % MOE_LOAD_WINDOW; }

int ds2_moe(ds2_fwd *c, const fwd_batch *b, int il, cf_err *err) {
    const model_hparams *hp = &c->m->hp;
    const ds2_layer *L = &ds2_layers(c->m)[il];
    int32_t T = b->n_tokens, ne = hp->n_expert, k = hp->n_expert_used;
    int64_t E = hp->n_embd;
    kern_matmul(c->kc, &L->router, c->h, T, c->router);
    memset(c->exp_n, 0, (size_t)ne * sizeof(int32_t));
    for (int32_t t = 0; t < T; t++) {
        route(hp, L->exp_bias, c->router + (int64_t)t * ne, c->rscore, c->sel + (int64_t)t * k,
              c->sel_w + (int64_t)t * k);
        for (int32_t i = 0; i < k; i++) c->exp_n[c->sel[(int64_t)t * k + i]]++;
    }
    c->exp_off[0] = 0;
    for (int32_t e = 0; e < ne; e++) c->exp_off[e + 1] = c->exp_off[e] + c->exp_n[e];
    memset(c->exp_n, 0, (size_t)ne * sizeof(int32_t));
    for (int32_t t = 0; t < T; t++)
        for (int32_t i = 0; i < k; i++) {
            int32_t e = c->sel[(int64_t)t * k + i], at = c->exp_off[e] + c->exp_n[e]++;
            c->exp_tok[at] = t;
            c->exp_w[at] = c->sel_w[(int64_t)t * k + i];
        }
    /* load counters (main layers only: an MTP layer's index is -1 and it never leaves the process) */
    int32_t mi = c->moe_index[il];
    memset(c->moe, 0, (size_t)T * (size_t)E * sizeof(float));
    if (mi >= 0) {
        uint32_t *slot = c->ring + ((size_t)c->ring_pos * (size_t)c->n_moe + (size_t)mi) * (size_t)ne;
        for (int32_t e = 0; e < ne; e++)
            if (c->exp_n[e]) {
                slot[e] += (uint32_t)c->exp_n[e];
                atomic_fetch_add_explicit(&c->load[(size_t)mi * (size_t)ne + (size_t)e], (uint64_t)c->exp_n[e],
                                          memory_order_relaxed);
            }
        if (mi == c->n_moe - 1) step_end(c);
        if (c->exec) return run_executor(c, il, err);
    }
    for (int32_t e = 0; e < ne; e++) {
        int32_t n = c->exp_n[e], off = c->exp_off[e];
        if (!n) continue;
        if (L->emem && !atomic_load_explicit(&L->emem[e].resident, memory_order_acquire))
            return cf_fail(err,
                           "layer %d: expert %d is not loaded in this process (a partial expert set needs the "
                           "expert-parallel executor)",
                           il, e);
        for (int32_t i = 0; i < n; i++)
            memcpy(c->xe + (int64_t)i * E, c->h + (int64_t)c->exp_tok[off + i] * E, (size_t)E * sizeof(float));
        expert_rows(c, L, e, c->xe, n, c->ye);
        for (int32_t i = 0; i < n; i++)
            add_weighted(c->moe + (int64_t)c->exp_tok[off + i] * E, c->exp_w[off + i], c->ye + (int64_t)i * E, E);
    }
    return 0;
}

int ds2_fwd_set_moe_executor(ds2_fwd *c, const cinfer_moe_executor *x, cf_err *err) {
    const model_hparams *hp = &c->m->hp;
    if (!c->n_moe) return cf_fail(err, "expert parallelism: the model has no MoE layers");
    if (x && !c->pair_x) {
        size_t rows = (size_t)c->max_tokens * (size_t)hp->n_expert_used, E = (size_t)hp->n_embd;
        c->pair_x = malloc(rows * E * sizeof(float));
        c->pair_y = malloc(rows * E * sizeof(float));
        c->pair_e = malloc(rows * sizeof(int32_t));
        if (!c->pair_x || !c->pair_y || !c->pair_e)
            return cf_fail(err, "expert parallelism: out of memory for %zu expert rows", rows);
    }
    c->exec = x;
    return 0;
}

int ds2_fwd_expert_ffn(ds2_fwd *c, int32_t layer, int32_t expert, const float *x, int32_t n, float *y, cf_err *err) {
    const model_hparams *hp = &c->m->hp;
    if (layer < 0 || layer >= hp->n_layer || c->moe_index[layer] < 0 || expert < 0 || expert >= hp->n_expert || n < 0)
        return cf_fail(err, "expert FFN: layer %d expert %d is not a routed expert of this model", layer, expert);
    const ds2_layer *L = &ds2_layers(c->m)[layer];
    if (L->emem && !atomic_load_explicit(&L->emem[expert].resident, memory_order_acquire))
        return cf_fail(err, "expert FFN: expert %d of layer %d is not resident in this process", expert, layer);
    int64_t E = hp->n_embd;
    for (int32_t at = 0; at < n; at += c->max_tokens) {
        int32_t rows = n - at < c->max_tokens ? n - at : c->max_tokens;
        expert_rows(c, L, expert, x + (int64_t)at * E, rows, y + (int64_t)at * E);
    }
    return 0;
}

int ds2_fwd_expert_load(const ds2_fwd *c, int32_t layer, uint64_t *counts, int32_t n) {
    const model_hparams *hp = &c->m->hp;
    if (layer < 0 || layer >= hp->n_layer) return -1;
    int32_t mi = c->moe_index[layer];
    if (mi < 0) return 0;
    for (int32_t e = 0; e < hp->n_expert && e < n; e++)
        counts[e] = atomic_load_explicit(&c->load[(size_t)mi * (size_t)hp->n_expert + (size_t)e], memory_order_relaxed);
    return hp->n_expert;
}
