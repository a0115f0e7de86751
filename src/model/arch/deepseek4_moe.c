/* deepseek4_moe.c - the deepseek4 MoE FFN over a batch (reference:
 * inference/model.py Gate, Expert, MoE): router scores sqrt(softplus(x . w));
 * score layers pick the top-k of score + exp_probs_b (ties: lower expert),
 * hash layers (the first hash_layer_count) take tid2eid[token]; the weights
 * are the picked scores (without bias), normalized to sum 1 when
 * expert_weights_norm, times expert_weights_scale. Experts and the shared
 * expert are SwiGLU with the block's clamp: gate <= limit, |up| <= limit.
 * Tokens are grouped by expert (one matmul per used expert); each token's
 * sum runs in its pick order, so results do not depend on the batch. With
 * an expert executor (expert parallelism; deepseek4_moe_ep.c) the main
 * layers' (token, pick) rows are computed elsewhere and added here in the
 * same order: bit-identical. MTP blocks always run in-process. */
#include <math.h>
#include <string.h>

#include "model/arch/deepseek4_fwd.h"
#include "model/arch/deepseek4_math.h"

static float softplusf(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* g = silu(min(g, limit)) * clamp(u, -limit, limit) (limit 0: no clamp). */
static void swiglu_clamped(float *g, const float *u, int64_t n, float limit) {
    for (int64_t i = 0; i < n; i++) {
        float a = g[i], b = u[i];
        if (limit > 0) {
            a = a < limit ? a : limit;
            b = b < -limit ? -limit : b > limit ? limit : b;
        }
        g[i] = a / (1.0f + expf(-a)) * b;
    }
}

static void route(ds4_fwd *c, const fwd_batch *b, int il) {
    const model_hparams *hp = &c->m->hp;
    const ds4_layer *L = &ds4_w(c->m)->layer[il];
    int32_t T = b->n_tokens, X = hp->n_expert, K = hp->n_expert_used;
    kern_matmul(c->kc, &L->router, c->xa, T, c->router);
    for (int32_t t = 0; t < T; t++) {
        float *s = c->router + (int64_t)t * X;
        for (int32_t e = 0; e < X; e++) s[e] = sqrtf(softplusf(s[e]));
        int32_t *sel = c->rsel + (int64_t)t * K;
        if (L->tid2eid) {
            memcpy(sel, L->tid2eid + (int64_t)b->tokens[t] * K, (size_t)K * sizeof *sel);
        } else {
            float *biased = c->rbias;
            for (int32_t e = 0; e < X; e++) biased[e] = s[e] + L->exp_bias[e];
            ds4_topk(biased, X, K, sel);
        }
        float sum = 0;
        for (int32_t k = 0; k < K; k++) sum += c->rw[t * K + k] = s[sel[k]];
        float mul = hp->expert_weights_scale / (hp->expert_weights_norm && sum > 0 ? sum : 1.0f);
        for (int32_t k = 0; k < K; k++) c->rw[t * K + k] *= mul;
    }
}

void ds4_expert_rows(ds4_fwd *c, int il, int32_t e, const float *x, int32_t n, float *y) {
    const ds4_layer *L = &ds4_w(c->m)->layer[il];
    kern_matmul(c->kc, &L->eg[e], x, n, c->ge);
    kern_matmul(c->kc, &L->eu[e], x, n, c->ue);
    swiglu_clamped(c->ge, c->ue, n * c->m->hp.n_ff_exp, L->swiglu_exp);
    kern_matmul(c->kc, &L->ed[e], c->ge, n, y);
}

int ds4_moe(ds4_fwd *c, const fwd_batch *b, int il, cf_err *err) {
    const model_hparams *hp = &c->m->hp;
    const ds4_layer *L = &ds4_w(c->m)->layer[il];
    int32_t T = b->n_tokens, X = hp->n_expert, K = hp->n_expert_used;
    int64_t E = hp->n_embd, FE = hp->n_ff_exp;
    route(c, b, il);
    /* shared expert first: c->out = its output */
    if (L->has_shared) {
        int64_t FS = FE * hp->n_expert_shared;
        kern_matmul(c->kc, &L->sg, c->xa, T, c->sh_g);
        kern_matmul(c->kc, &L->su, c->xa, T, c->sh_u);
        swiglu_clamped(c->sh_g, c->sh_u, T * FS, L->swiglu_shexp);
        kern_matmul(c->kc, &L->sd, c->sh_g, T, c->out);
    } else {
        memset(c->out, 0, (size_t)(T * E) * sizeof *c->out);
    }
    if (il < hp->n_layer) ds4_moe_count(c, il, T); /* MTP blocks are not counted */
    if (c->exec && il < hp->n_layer) return ds4_moe_run_executor(c, il, T, err);
    /* routed experts, grouped: each token adds its picks in pick order, so
     * accumulate per (token, pick) into the token's row in order k = 0..K-1 */
    for (int32_t k = 0; k < K; k++) {
        memset(c->exp_n, 0, (size_t)X * sizeof *c->exp_n);
        for (int32_t t = 0; t < T; t++) c->exp_n[c->rsel[t * K + k]]++;
        for (int32_t e = 0; e < X; e++) {
            if (!c->exp_n[e]) continue;
            if (!ds4_expert_resident(c->m, il, e))
                return cf_fail(err,
                               "block %d: expert %d is not loaded in this process (a partial expert set needs the "
                               "expert-parallel executor)",
                               il, e);
            int32_t n = 0;
            for (int32_t t = 0; t < T; t++)
                if (c->rsel[t * K + k] == e) {
                    c->exp_tok[n] = t;
                    memcpy(c->xe + n * E, c->xa + (int64_t)t * E, (size_t)E * sizeof(float));
                    n++;
                }
            ds4_expert_rows(c, il, e, c->xe, n, c->ye);
            for (int32_t i = 0; i < n; i++) {
                int32_t t = c->exp_tok[i];
                kern_axpy_f32(c->rw[t * K + k], c->ye + i * E, c->out + (int64_t)t * E, E);
            }
        }
    }
    return 0;
}
