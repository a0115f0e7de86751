/* deepseek4_moe_ep.c - what deepseek4's MoE offers expert parallelism
 * (model.h: fwd_ctx_expert_load, fwd_ctx_set_moe_executor,
 * fwd_ctx_expert_ffn), the same contract as deepseek2's:
 *  - expert load: tokens routed to each expert of each main layer over the
 *    last MOE_LOAD_WINDOW forward passes (a ring of per-step counts owned by
 *    the forward thread, atomic window sums any thread reads);
 *  - the executor path: the step's (token, pick) rows of a main layer are
 *    grouped by expert (score and hash layers alike: routing stays local)
 *    and handed to the executor in one call; each token then adds its picks'
 *    outputs in pick order with the in-process arithmetic (kern_axpy_f32), so
 *    results are bit-identical to the in-process path (each expert matmul row
 *    depends on that row only);
 *  - the owner side: one expert's clamped SwiGLU FFN on any number of rows.
 * MTP blocks (layers >= n_layer) always run in-process. */
#include <stdlib.h>
#include <string.h>

#include "model/arch/deepseek4.h"
#include "model/arch/deepseek4_fwd.h"

int ds4_moe_load_init(ds4_fwd *c) {
    const model_hparams *hp = &c->m->hp;
    size_t cells = (size_t)hp->n_layer * (size_t)hp->n_expert;
    c->ring = calloc((size_t)MOE_LOAD_WINDOW * cells, sizeof *c->ring);
    c->load = calloc(cells, sizeof *c->load);
    if (!c->ring || !c->load) return -1;
    for (size_t i = 0; i < cells; i++) atomic_init(&c->load[i], 0);
    return 0;
}

void ds4_moe_load_free(ds4_fwd *c) {
    free(c->ring);
    free((void *)c->load);
    free(c->pair_x);
    free(c->pair_y);
    free(c->pair_e);
    free(c->pair_at);
}

void ds4_moe_step_begin(ds4_fwd *c) {
    size_t cells = (size_t)c->m->hp.n_layer * (size_t)c->m->hp.n_expert;
    c->ring_pos = (c->ring_pos + 1) % MOE_LOAD_WINDOW;
    uint32_t *slot = c->ring + (size_t)c->ring_pos * cells;
    for (size_t i = 0; i < cells; i++) {
        if (slot[i]) atomic_fetch_sub_explicit(&c->load[i], slot[i], memory_order_relaxed);
        slot[i] = 0;
    }
}

void ds4_moe_count(ds4_fwd *c, int il, int32_t T) {
    int32_t X = c->m->hp.n_expert, K = c->m->hp.n_expert_used;
    size_t row = (size_t)il * (size_t)X;
    uint32_t *slot = c->ring + (size_t)c->ring_pos * (size_t)c->m->hp.n_layer * (size_t)X + row;
    for (int32_t i = 0; i < T * K; i++) {
        int32_t e = c->rsel[i];
        slot[e]++;
        atomic_fetch_add_explicit(&c->load[row + (size_t)e], 1, memory_order_relaxed);
    }
}

int ds4_moe_run_executor(ds4_fwd *c, int il, int32_t T, cf_err *err) {
    const model_hparams *hp = &c->m->hp;
    int32_t X = hp->n_expert, K = hp->n_expert_used, np = T * K;
    int64_t E = hp->n_embd;
    /* slots grouped by expert (counting sort; within an expert, (token, pick) order) */
    memset(c->exp_n, 0, (size_t)X * sizeof *c->exp_n);
    for (int32_t i = 0; i < np; i++) c->exp_n[c->rsel[i]]++;
    for (int32_t e = 0, at = 0; e < X; e++) {
        int32_t n = c->exp_n[e];
        c->exp_n[e] = at;
        at += n;
    }
    for (int32_t i = 0; i < np; i++) {
        int32_t e = c->rsel[i], at = c->exp_n[e]++;
        c->pair_at[i] = at;
        c->pair_e[at] = e;
        memcpy(c->pair_x + (int64_t)at * E, c->xa + (int64_t)(i / K) * E, (size_t)E * sizeof(float));
    }
    char msg[256] = "";
    if (c->exec->run(c->exec->self, il, np, c->pair_e, c->pair_x, E, c->pair_y, msg, sizeof msg))
        return cf_fail(err, "layer %d experts: %s", il, msg[0] ? msg : "the executor failed");
    for (int32_t k = 0; k < K; k++) /* each token's picks in pick order, as the in-process path adds them */
        for (int32_t t = 0; t < T; t++)
            kern_axpy_f32(c->rw[t * K + k], c->pair_y + (int64_t)c->pair_at[t * K + k] * E, c->out + (int64_t)t * E, E);
    return 0;
}

int ds4_fwd_set_moe_executor(ds4_fwd *c, const cinfer_moe_executor *x, cf_err *err) {
    const model_hparams *hp = &c->m->hp;
    if (x && !c->pair_x) {
        size_t rows = (size_t)c->max_tokens * (size_t)hp->n_expert_used, E = (size_t)hp->n_embd;
        c->pair_x = malloc(rows * E * sizeof(float));
        c->pair_y = malloc(rows * E * sizeof(float));
        c->pair_e = malloc(rows * sizeof(int32_t));
        c->pair_at = malloc(rows * sizeof(int32_t));
        if (!c->pair_x || !c->pair_y || !c->pair_e || !c->pair_at)
            return cf_fail(err, "expert parallelism: out of memory for %zu expert rows", rows);
    }
    c->exec = x;
    return 0;
}

int ds4_fwd_expert_ffn(ds4_fwd *c, int32_t layer, int32_t expert, const float *x, int32_t n, float *y, cf_err *err) {
    const model_hparams *hp = &c->m->hp;
    if (layer < 0 || layer >= hp->n_layer || expert < 0 || expert >= hp->n_expert || n < 0)
        return cf_fail(err, "expert FFN: layer %d expert %d is not a routed expert of this model", layer, expert);
    if (!ds4_expert_resident(c->m, layer, expert))
        return cf_fail(err, "expert FFN: expert %d of layer %d is not resident in this process", expert, layer);
    int64_t E = hp->n_embd;
    for (int32_t at = 0; at < n; at += c->max_tokens) {
        int32_t rows = n - at < c->max_tokens ? n - at : c->max_tokens;
        ds4_expert_rows(c, layer, expert, x + (int64_t)at * E, rows, y + (int64_t)at * E);
    }
    return 0;
}

int ds4_fwd_expert_load(const ds4_fwd *c, int32_t layer, uint64_t *counts, int32_t n) {
    const model_hparams *hp = &c->m->hp;
    if (layer < 0 || layer >= hp->n_layer) return -1;
    for (int32_t e = 0; e < hp->n_expert && e < n; e++)
        counts[e] =
            atomic_load_explicit(&c->load[(size_t)layer * (size_t)hp->n_expert + (size_t)e], memory_order_relaxed);
    return hp->n_expert;
}
