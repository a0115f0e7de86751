/* deepseek4_load.c - loads and checks the tensors of every deepseek4 block
 * (main and MTP) into ds4_weights (deepseek4.h has the shapes). Every
 * problem is one line naming the tensor: a missing compressor or indexer
 * tensor of a compressed layer, a wrong shape, a tid2eid table that is not
 * I32 or routes to an expert that does not exist. The routed experts are
 * deepseek4_experts.c's (a partial set under expert parallelism). active_bytes counts
 * expert_used_count routed experts per block (MTP blocks and the DSpark
 * tensors excluded). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch/deepseek4.h"

#define NAME(buf, il, part) (snprintf(buf, sizeof buf, "blk.%d.%s", il, part), buf)

/* deepseek4.h */
int ds4_load_f32(model *m, const char *name, int64_t ne0, int64_t ne1, bool required, float **out, cf_err *err) {
    int failed = 0;
    const gguf_tensor *t = model_need_tensor(m->gguf, name, ne0, ne1, required, err, &failed);
    if (failed) return -1;
    if (!t) return 0;
    int64_t rows = ne1 ? ne1 : 1;
    float *v = malloc((size_t)(ne0 * rows) * sizeof *v);
    if (!v) return cf_fail(err, "out of memory loading %s", name);
    size_t rb = dtype_row_bytes(t->type, ne0);
    for (int64_t r = 0; r < rows; r++)
        dtype_dequantize_row((dtype)t->type, (const char *)t->data + rb * (size_t)r, v + r * ne0, ne0);
    *out = v;
    m->n_params += (uint64_t)(ne0 * rows);
    model_mem_copied(m, t);
    m->mem.owned_bytes += (uint64_t)(ne0 * rows) * sizeof *v; /* ds4's own copy (freed by ds4_free_weights) */
    return 0;
}

/* A [in, G*rows] matrix as G matrices of `rows` rows (the output groups). */
static int load_grouped(model *m, const char *name, int64_t in, int64_t rows, int64_t G, kern_weight **ws,
                        cf_err *err) {
    int failed = 0;
    const gguf_tensor *t = model_need_tensor(m->gguf, name, in, G * rows, true, err, &failed);
    if (failed) return -1;
    *ws = calloc((size_t)G, sizeof **ws);
    if (!*ws) return cf_fail(err, "out of memory loading %s", name);
    size_t slice = dtype_row_bytes(t->type, in) * (size_t)rows;
    for (int64_t g = 0; g < G; g++)
        if (model_prepare_weight(m, name, &(*ws)[g], (dtype)t->type, (const char *)t->data + slice * (size_t)g, rows,
                                 in, err))
            return cf_prefix(err, "tensor %s (group %lld)", name, (long long)g);
    if ((*ws)[0].packed) model_mem_copied(m, t);
    else model_mem_mapped(m, t);
    m->weight_bytes += t->nbytes;
    m->n_params += (uint64_t)(in * rows * G);
    return 0;
}

static int load_compressor(model *m, int il, const char *prefix, int32_t ratio, int64_t width, ds4_compressor *c,
                           cf_err *err) {
    int64_t E = m->hp.n_embd, cw = (ratio == 4 ? 2 : 1) * width;
    char b[96], part[64];
    snprintf(part, sizeof part, "%s_kv.weight", prefix);
    if (model_load_matrix(m, NAME(b, il, part), E, cw, &c->wkv, err)) return -1;
    snprintf(part, sizeof part, "%s_gate.weight", prefix);
    if (model_load_matrix(m, NAME(b, il, part), E, cw, &c->wgate, err)) return -1;
    snprintf(part, sizeof part, "%s_ape.weight", prefix);
    if (ds4_load_f32(m, NAME(b, il, part), cw, ratio, true, &c->ape, err)) return -1;
    snprintf(part, sizeof part, "%s_norm.weight", prefix);
    return ds4_load_f32(m, NAME(b, il, part), width, 0, true, &c->norm, err);
}

static int load_attention(model *m, int il, ds4_layer *L, cf_err *err) {
    const model_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, H = hp->n_head, D = hp->head_dim, Q = hp->q_lora_rank, G = hp->ds4_o_groups;
    int64_t n = hp->ds4_hc, M = (2 + n) * n;
    char b[96];
    if (ds4_load_f32(m, NAME(b, il, "attn_norm.weight"), E, 0, true, &L->attn_norm, err) ||
        ds4_load_f32(m, NAME(b, il, "attn_sinks.weight"), H, 0, true, &L->sinks, err) ||
        model_load_matrix(m, NAME(b, il, "attn_q_a.weight"), E, Q, &L->wq_a, err) ||
        ds4_load_f32(m, NAME(b, il, "attn_q_a_norm.weight"), Q, 0, true, &L->q_a_norm, err) ||
        model_load_matrix(m, NAME(b, il, "attn_q_b.weight"), Q, H * D, &L->wq_b, err) ||
        model_load_matrix(m, NAME(b, il, "attn_kv.weight"), E, D, &L->wkv, err) ||
        ds4_load_f32(m, NAME(b, il, "attn_kv_a_norm.weight"), D, 0, true, &L->kv_norm, err) ||
        load_grouped(m, NAME(b, il, "attn_output_a.weight"), H * D / G, hp->ds4_o_lora, G, &L->wo_a, err) ||
        model_load_matrix(m, NAME(b, il, "attn_output_b.weight"), G * hp->ds4_o_lora, E, &L->wo_b, err) ||
        ds4_load_f32(m, NAME(b, il, "hc_attn_fn.weight"), n * E, M, true, &L->hc_attn_fn, err) ||
        ds4_load_f32(m, NAME(b, il, "hc_attn_base.weight"), M, 0, true, &L->hc_attn_base, err) ||
        ds4_load_f32(m, NAME(b, il, "hc_attn_scale.weight"), 3, 0, true, &L->hc_attn_scale, err) ||
        ds4_load_f32(m, NAME(b, il, "hc_ffn_fn.weight"), n * E, M, true, &L->hc_ffn_fn, err) ||
        ds4_load_f32(m, NAME(b, il, "hc_ffn_base.weight"), M, 0, true, &L->hc_ffn_base, err) ||
        ds4_load_f32(m, NAME(b, il, "hc_ffn_scale.weight"), 3, 0, true, &L->hc_ffn_scale, err))
        return -1;
    if (L->ratio && load_compressor(m, il, "attn_compressor", L->ratio, D, &L->comp, err)) return -1;
    if (L->ratio != 4) return 0;
    int64_t IH = hp->ds4_index_heads, I = hp->ds4_index_dim;
    return model_load_matrix(m, NAME(b, il, "indexer.proj.weight"), E, IH, &L->idx_proj, err) ||
                   model_load_matrix(m, NAME(b, il, "indexer.attn_q_b.weight"), Q, IH * I, &L->idx_q_b, err) ||
                   load_compressor(m, il, "indexer_compressor", 4, I, &L->icomp, err)
               ? -1
               : 0;
}

/* tid2eid: I32 [K, n_vocab], every id < n_expert. */
static int load_tid2eid(model *m, int il, ds4_layer *L, cf_err *err) {
    const model_hparams *hp = &m->hp;
    char b[96];
    const gguf_tensor *t = gguf_find_tensor(m->gguf, NAME(b, il, "ffn_gate_tid2eid.weight"));
    if (!t) return cf_fail(err, "missing tensor %s (block %d is a hash layer)", b, il);
    if (t->type != 26 || t->n_dims != 2 || t->ne[0] != hp->n_expert_used || t->ne[1] != hp->n_vocab)
        return cf_fail(err, "tensor %s must be i32 [%d, %d] (is %s [%lld, %lld])", b, hp->n_expert_used, hp->n_vocab,
                       dtype_name(t->type), (long long)t->ne[0], (long long)t->ne[1]);
    size_t n = (size_t)hp->n_expert_used * (size_t)hp->n_vocab;
    L->tid2eid = malloc(n * sizeof *L->tid2eid);
    if (!L->tid2eid) return cf_fail(err, "out of memory loading %s", b);
    memcpy(L->tid2eid, t->data, n * sizeof *L->tid2eid);
    for (size_t i = 0; i < n; i++)
        if (L->tid2eid[i] < 0 || L->tid2eid[i] >= hp->n_expert)
            return cf_fail(err, "tensor %s: token %zu routes to expert %d, but there are %d experts", b,
                           i / (size_t)hp->n_expert_used, L->tid2eid[i], hp->n_expert);
    model_mem_copied(m, t);
    m->mem.owned_bytes += n * sizeof *L->tid2eid; /* ds4's own copy (freed by ds4_free_weights) */
    return 0;
}

static int load_ffn(model *m, int il, ds4_layer *L, uint64_t *routed, cf_err *err) {
    const model_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, FE = hp->n_ff_exp, X = hp->n_expert, FS = FE * hp->n_expert_shared;
    char b[96];
    if (model_load_matrix(m, NAME(b, il, "ffn_gate_inp.weight"), E, X, &L->router, err) ||
        ds4_load_f32(m, NAME(b, il, "ffn_norm.weight"), E, 0, true, &L->ffn_norm, err))
        return -1;
    if (il < hp->ds4_hash_layers) {
        if (load_tid2eid(m, il, L, err)) return -1;
    } else if (ds4_load_f32(m, NAME(b, il, "exp_probs_b.bias"), X, 0, true, &L->exp_bias, err)) {
        return -1;
    }
    if (ds4_load_routed(m, il, L, routed, err)) return -1; /* deepseek4_experts.c */
    L->has_shared = FS > 0;
    if (L->has_shared && (model_load_matrix(m, NAME(b, il, "ffn_gate_shexp.weight"), E, FS, &L->sg, err) ||
                          model_load_matrix(m, NAME(b, il, "ffn_up_shexp.weight"), E, FS, &L->su, err) ||
                          model_load_matrix(m, NAME(b, il, "ffn_down_shexp.weight"), FS, E, &L->sd, err)))
        return -1;
    if (il < hp->n_layer) return 0;
    return model_load_matrix(m, NAME(b, il, "nextn.eh_proj.weight"), 2 * E, E, &L->eh_proj, err) ||
                   ds4_load_f32(m, NAME(b, il, "nextn.enorm.weight"), E, 0, true, &L->enorm, err) ||
                   ds4_load_f32(m, NAME(b, il, "nextn.hnorm.weight"), E, 0, true, &L->hnorm, err) ||
                   ds4_load_f32(m, NAME(b, il, "nextn.shared_head_norm.weight"), E, 0, false, &L->head_norm, err)
               ? -1
               : 0;
}

/* swiglu_clamp_{exp,shexp}: absent = no clamp; else one limit per block. */
static int read_clamps(const model *m, ds4_weights *w, cf_err *err) {
    const char *keys[2] = {"deepseek4.swiglu_clamp_exp", "deepseek4.swiglu_clamp_shexp"};
    for (int k = 0; k < 2; k++) {
        float *v = NULL;
        uint64_t n = 0;
        int rc = gguf_get_arr_f32(m->gguf, keys[k], &v, &n, err);
        if (rc < 0) return -1;
        if (rc == 1) continue;
        if (n != (uint64_t)w->n_blocks) {
            free(v);
            return cf_fail(err, "%s has %llu entries, expected %d (block_count)", keys[k], (unsigned long long)n,
                           w->n_blocks);
        }
        for (int32_t i = 0; i < w->n_blocks; i++) {
            if (!(v[i] >= 0)) {
                free(v);
                return cf_fail(err, "%s[%d] must not be negative", keys[k], i);
            }
            if (k == 0) w->layer[i].swiglu_exp = v[i];
            else w->layer[i].swiglu_shexp = v[i];
        }
        free(v);
    }
    return 0;
}

int ds4_load(model *m, cf_err *err) {
    const model_hparams *hp = &m->hp;
    ds4_weights *w = calloc(1, sizeof *w);
    if (!w) return cf_fail(err, "out of memory");
    m->layers = w;
    w->n_blocks = hp->n_layer + hp->ds4_n_mtp;
    w->layer = calloc((size_t)w->n_blocks, sizeof *w->layer);
    if (!w->layer) return cf_fail(err, "out of memory");
    int64_t E = hp->n_embd, n = hp->ds4_hc;
    if (ds4_load_f32(m, "output_hc_fn.weight", n * E, n, true, &w->hc_head_fn, err) ||
        ds4_load_f32(m, "output_hc_base.weight", n, 0, true, &w->hc_head_base, err) ||
        ds4_load_f32(m, "output_hc_scale.weight", 1, 0, true, &w->hc_head_scale, err) || read_clamps(m, w, err))
        return -1;
    if (hp->tied_output) return cf_fail(err, "missing tensor output.weight (deepseek4 has no tied head)");
    uint64_t before = m->weight_bytes, routed_main = 0, mtp_bytes = 0;
    for (int il = 0; il < w->n_blocks; il++) {
        ds4_layer *L = &w->layer[il];
        L->ratio = hp->ds4_ratio[il];
        uint64_t routed = 0, at = m->weight_bytes;
        if (load_attention(m, il, L, err) || load_ffn(m, il, L, &routed, err)) return -1;
        if (il < hp->n_layer) routed_main += routed;
        else mtp_bytes += m->weight_bytes - at;
        if (m->progress && il < hp->n_layer) m->progress(m->progress_ctx, MODEL_LOAD_LAYERS, il + 1, hp->n_layer);
    }
    uint64_t active_routed = routed_main / (uint64_t)hp->n_expert * (uint64_t)hp->n_expert_used;
    m->active_bytes = before + (m->weight_bytes - before - routed_main - mtp_bytes) + active_routed;
    m->active_params = m->n_params; /* refined below: routed experts count k of n */
    uint64_t routed_params = (uint64_t)hp->n_layer * (uint64_t)(3 * E * hp->n_ff_exp) * (uint64_t)hp->n_expert;
    m->active_params -= routed_params - routed_params / (uint64_t)hp->n_expert * (uint64_t)hp->n_expert_used;
    return ds4_dspark_load(m, &w->dspark, err); /* after the active counts: like the MTP blocks, a drafter's */
}

static void release_experts(kern_weight *ws, int32_t n) {
    if (!ws) return;
    for (int32_t e = 0; e < n; e++) kern_weight_release(&ws[e]);
    free(ws);
}

static void release_compressor(ds4_compressor *c) {
    kern_weight_release(&c->wkv);
    kern_weight_release(&c->wgate);
    free(c->ape);
    free(c->norm);
}

void ds4_release(model *m) {
    ds4_weights *w = m->layers;
    if (!w) return;
    for (int il = 0; w->layer && il < w->n_blocks; il++) {
        ds4_layer *L = &w->layer[il];
        float *fs[] = {L->attn_norm,    L->ffn_norm,     L->q_a_norm,      L->kv_norm,   L->sinks,
                       L->hc_attn_fn,   L->hc_attn_base, L->hc_attn_scale, L->hc_ffn_fn, L->hc_ffn_base,
                       L->hc_ffn_scale, L->exp_bias,     L->enorm,         L->hnorm,     L->head_norm};
        for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) free(fs[i]);
        free(L->tid2eid);
        release_experts(L->wo_a, m->hp.ds4_o_groups);
        kern_weight *ws[] = {&L->wq_a,   &L->wq_b, &L->wkv, &L->wo_b, &L->idx_q_b, &L->idx_proj,
                             &L->router, &L->sg,   &L->su,  &L->sd,   &L->eh_proj};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) kern_weight_release(ws[i]);
        release_compressor(&L->comp);
        release_compressor(&L->icomp);
        ds4_release_routed(m, L);
    }
    free(w->layer);
    free(w->hc_head_fn);
    free(w->hc_head_base);
    free(w->hc_head_scale);
    ds4_dspark_release(&w->dspark);
    free(w);
    m->layers = NULL;
}
