/* deepseek2.c - the 'deepseek2' architecture family (DeepSeek V2/V3: MLA
 * attention, MoE FFN) as llama.cpp's converter writes it: its hook table
 * (arch.h), the keys beyond the shared ones (model.c reads those first),
 * every layer's tensors (deepseek2.h has the shapes), the KV layout (one MLA
 * group: latent + rotary key per token and layer), the fingerprint
 * contribution. The forward pass: deepseek2_forward.c, deepseek2_attention.c,
 * deepseek2_moe.c. Every load problem is a one-line error naming the key or
 * tensor.
 *
 * Keys (deepseek2.*): attention.q_lora_rank (absent/0: attn_q),
 * attention.kv_lora_rank, attention.key_length = qk_nope + rope dims,
 * attention.value_length, rope.dimension_count, leading_dense_block_count,
 * expert_count, expert_used_count, expert_shared_count,
 * expert_feed_forward_length, expert_weights_scale (1), expert_weights_norm
 * (false), expert_gating_func (absent/1 softmax, 2 sigmoid),
 * expert_group_count / expert_group_used_count (group-limited routing,
 * DeepSeek-V3; absent = off), rope.scaling.yarn_log_multiplier (0),
 * nextn_predict_layers (0: DeepSeek V3's MTP layers, the last of block_count,
 * with blk.N.nextn.{eh_proj,enorm,hnorm} and optional shared_head_norm,
 * shared_head_head, embed_tokens; the MTP drafter runs them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/wcache_format.h"
#include "model/arch/deepseek2_fwd.h"

static int ds2_read_hparams(const gguf_file *f, model_hparams *hp, cf_err *err) {
    const char *a = hp->arch;
    hp->rope_mode = ROPE_NORM;
    hp->expert_gating = 1;
    hp->expert_weights_scale = 1.0f;
    if (model_key_i32(f, a, "attention.q_lora_rank", &hp->q_lora_rank, false, err) ||
        model_key_i32(f, a, "attention.kv_lora_rank", &hp->kv_lora_rank, true, err) ||
        model_key_i32(f, a, "leading_dense_block_count", &hp->n_dense_lead, false, err) ||
        model_key_i32(f, a, "expert_count", &hp->n_expert, false, err) ||
        model_key_i32(f, a, "expert_used_count", &hp->n_expert_used, false, err) ||
        model_key_i32(f, a, "expert_shared_count", &hp->n_expert_shared, false, err) ||
        model_key_i32(f, a, "expert_feed_forward_length", &hp->n_ff_exp, false, err) ||
        model_key_i32(f, a, "expert_gating_func", &hp->expert_gating, false, err) ||
        model_key_i32(f, a, "expert_group_count", &hp->n_expert_group, false, err) ||
        model_key_i32(f, a, "expert_group_used_count", &hp->n_group_used, false, err) ||
        model_key_f32(f, a, "expert_weights_scale", &hp->expert_weights_scale, err) ||
        model_key_f32(f, a, "rope.scaling.yarn_log_multiplier", &hp->yarn_log_mul, err) ||
        model_key_i32(f, a, "nextn_predict_layers", &hp->n_nextn, false, err))
        return -1;
    /* block_count counts the next-n layers too (llama.cpp's layout): they follow the main ones */
    if (hp->n_nextn < 0 || hp->n_nextn >= hp->n_layer)
        return cf_fail(err, "%s.nextn_predict_layers %d must be in 0..block_count - 1 (%d)", a, hp->n_nextn,
                       hp->n_layer - 1);
    hp->n_layer -= hp->n_nextn;
    char probe[96]; /* a trunk-only file (the next-n tensors left out, the key kept): no MTP, as llama.cpp */
    snprintf(probe, sizeof probe, "blk.%d.nextn.eh_proj.weight", hp->n_layer);
    if (hp->n_nextn > 0 && !gguf_find_tensor(f, probe)) hp->n_nextn = 0;
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", a);
    if (gguf_get_bool(f, key, &hp->expert_weights_norm, err) < 0) return -1;
    hp->qk_nope_dim = hp->head_dim - hp->rope_dim;
    if (hp->kv_lora_rank <= 0 || hp->qk_nope_dim <= 0)
        return cf_fail(err,
                       "%s: kv_lora_rank (%d) must be positive and key_length (%d) larger than "
                       "rope.dimension_count (%d)",
                       a, hp->kv_lora_rank, hp->head_dim, hp->rope_dim);
    if (hp->n_dense_lead > hp->n_layer)
        return cf_fail(err, "%s.leading_dense_block_count %d exceeds block_count %d", a, hp->n_dense_lead, hp->n_layer);
    if (hp->n_dense_lead < hp->n_layer) {
        if (hp->n_expert <= 0 || hp->n_expert_used <= 0 || hp->n_expert_used > hp->n_expert || hp->n_ff_exp <= 0)
            return cf_fail(err,
                           "%s: MoE layers need expert_count > 0, expert_used_count in 1..expert_count "
                           "(%d of %d) and expert_feed_forward_length > 0",
                           a, hp->n_expert_used, hp->n_expert);
        if (hp->n_expert > 4096) return cf_fail(err, "%s.expert_count %d is too large", a, hp->n_expert);
        if (hp->expert_gating != 1 && hp->expert_gating != 2)
            return cf_fail(err, "%s.expert_gating_func %d is not supported (1 softmax, 2 sigmoid)", a,
                           hp->expert_gating);
        if (hp->n_expert_group > 1) {
            int per = hp->n_expert % hp->n_expert_group ? 0 : hp->n_expert / hp->n_expert_group;
            if (per < 2 || hp->n_group_used <= 0 || hp->n_group_used > hp->n_expert_group ||
                hp->n_group_used * per < hp->n_expert_used)
                return cf_fail(err,
                               "%s: expert_group_count %d / expert_group_used_count %d do not fit %d experts "
                               "(top %d)",
                               a, hp->n_expert_group, hp->n_group_used, hp->n_expert, hp->n_expert_used);
        } else {
            hp->n_expert_group = hp->n_group_used = 0;
        }
    }
    return 0;
}

static int load_attention(model *m, int il, ds2_layer *L, cf_err *err) {
    const model_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, H = hp->n_head, qk = hp->head_dim, kvl = hp->kv_lora_rank;
    int64_t kvb_rows = H * (hp->qk_nope_dim + hp->v_head_dim);
    char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    if (model_load_vector(m, NAME("attn_norm.weight"), E, true, &L->attn_norm, err) ||
        model_load_vector(m, NAME("ffn_norm.weight"), E, true, &L->ffn_norm, err) ||
        model_load_matrix(m, NAME("attn_kv_a_mqa.weight"), E, kvl + hp->rope_dim, &L->wkv_a, err) ||
        model_load_vector(m, NAME("attn_kv_a_norm.weight"), kvl, true, &L->kv_a_norm, err) ||
        model_load_matrix(m, NAME("attn_kv_b.weight"), kvl, kvb_rows, &L->wkv_b, err) ||
        model_load_matrix(m, NAME("attn_output.weight"), H * hp->v_head_dim, E, &L->wo, err))
        return -1;
    if (hp->q_lora_rank > 0) {
        if (model_load_matrix(m, NAME("attn_q_a.weight"), E, hp->q_lora_rank, &L->wq_a, err) ||
            model_load_vector(m, NAME("attn_q_a_norm.weight"), hp->q_lora_rank, true, &L->q_a_norm, err) ||
            model_load_matrix(m, NAME("attn_q_b.weight"), hp->q_lora_rank, H * qk, &L->wq_b, err))
            return -1;
    } else if (model_load_matrix(m, NAME("attn_q.weight"), E, H * qk, &L->wq, err)) {
        return -1;
    }
    const gguf_tensor *kvb = gguf_find_tensor(m->gguf, NAME("attn_kv_b.weight"));
#undef NAME
    if (kvb->type == DT_F8_B128) { /* FP8 with block scales: converted once into a weight buffer */
        const float *sc = model_fp8_scales(m->gguf, kvb->name, kvl, kvb_rows, 1, err);
        if (!sc) return -1;
        bool filled;
        float *v = model_wbuf(m, kvb->name, WC_KIND_F32, (size_t)(kvb_rows * kvl) * sizeof(float), &filled, err);
        if (!v) return -1;
        size_t rb = dtype_row_bytes(kvb->type, kvl);
        for (int64_t r = 0; !filled && r < kvb_rows; r++) {
            const uint8_t *src = (const uint8_t *)kvb->data + rb * (size_t)r;
            for (int64_t j = 0; j < kvl; j++)
                v[r * kvl + j] = kern_fp8_e4m3_to_f32(src[j]) * sc[(r / 128) * ((kvl + 127) / 128) + j / 128];
        }
        model_mem_copied(m, kvb);
        model_mem_drop_pages(m, kvb); /* read again by the conversion */
        L->kv_b_f32 = v;
    } else if (!(L->kv_b_f32 = model_tensor_f32(m, kvb, kvb_rows * kvl, err))) { /* in place when f32 */
        return -1;
    }
    /* decode reads the f32 rows instead of the stored matrix */
    m->active_bytes += (uint64_t)(kvb_rows * kvl) * sizeof(float) - kvb->nbytes;
    return 0;
}

static int load_ffn(model *m, int il, ds2_layer *L, uint64_t *routed_bytes, uint64_t *routed_params, cf_err *err) {
    const model_hparams *hp = &m->hp;
    int64_t E = hp->n_embd;
    char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    if (il < hp->n_dense_lead || (il >= hp->n_layer && hp->n_expert == 0)) { /* an MTP layer of a dense model */
        return model_load_matrix(m, NAME("ffn_gate.weight"), E, hp->n_ff, &L->w_gate, err) ||
                       model_load_matrix(m, NAME("ffn_up.weight"), E, hp->n_ff, &L->w_up, err) ||
                       model_load_matrix(m, NAME("ffn_down.weight"), hp->n_ff, E, &L->w_down, err)
                   ? -1
                   : 0;
    }
    L->moe = true;
    int64_t fe = hp->n_ff_exp;
    if (model_load_matrix(m, NAME("ffn_gate_inp.weight"), E, hp->n_expert, &L->router, err) ||
        model_load_vector(m, NAME("exp_probs_b.bias"), hp->n_expert, false, &L->exp_bias, err) ||
        ds2_load_routed(m, il, L, routed_bytes, routed_params, err))
        return -1;
    if (hp->n_expert_shared > 0) {
        int64_t fs = fe * hp->n_expert_shared;
        L->has_shared = true;
        if (model_load_matrix(m, NAME("ffn_gate_shexp.weight"), E, fs, &L->sg, err) ||
            model_load_matrix(m, NAME("ffn_up_shexp.weight"), E, fs, &L->su, err) ||
            model_load_matrix(m, NAME("ffn_down_shexp.weight"), fs, E, &L->sd, err))
            return -1;
    }
#undef NAME
    return 0;
}

/* The next-n extras of MTP layer il (deepseek2.h); its attention and FFN load like a main layer's. */
static int load_nextn(model *m, int il, ds2_layer *L, cf_err *err) {
    const model_hparams *hp = &m->hp;
    int64_t E = hp->n_embd;
    char n[96];
    int failed = 0;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.nextn." s, il), n)
    if (model_load_matrix(m, NAME("eh_proj.weight"), 2 * E, E, &L->eh_proj, err) ||
        model_load_vector(m, NAME("enorm.weight"), E, true, &L->enorm, err) ||
        model_load_vector(m, NAME("hnorm.weight"), E, true, &L->hnorm, err) ||
        model_load_vector(m, NAME("shared_head_norm.weight"), E, false, &L->head_norm, err))
        return -1;
    if (gguf_find_tensor(m->gguf, NAME("shared_head_head.weight"))) {
        if (model_load_matrix(m, n, E, hp->n_vocab, &L->head, err)) return -1;
        L->has_head = true;
    }
    L->embed = model_need_tensor(m->gguf, NAME("embed_tokens.weight"), E, hp->n_vocab, false, err, &failed);
#undef NAME
    if (failed) return -1;
    if (L->embed && !dtype_computable(L->embed->type)) return model_unsupported_type(L->embed, err);
    if (L->embed) {
        model_mem_mapped(m, L->embed);
        m->weight_bytes += L->embed->nbytes;
        m->n_params += (uint64_t)(E * hp->n_vocab);
    }
    return 0;
}

static int ds2_load_layers(model *m, cf_err *err) {
    const model_hparams *hp = &m->hp;
    ds2_layer *layers = calloc((size_t)(hp->n_layer + hp->n_nextn), sizeof *layers);
    if (!layers) return cf_fail(err, "out of memory");
    m->layers = layers;
    uint64_t routed = 0, routed_params = 0;
    uint64_t before = m->weight_bytes;
    m->active_bytes = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        if (load_attention(m, il, &layers[il], err) || load_ffn(m, il, &layers[il], &routed, &routed_params, err))
            return -1;
        if (m->progress) m->progress(m->progress_ctx, MODEL_LOAD_LAYERS, il + 1, hp->n_layer);
    }
    /* active: everything but the routed experts, plus expert_used_count of every n_expert */
    uint64_t active_routed = hp->n_expert ? routed / (uint64_t)hp->n_expert * (uint64_t)hp->n_expert_used : 0;
    int32_t n_moe = 0;
    for (int il = 0; il < hp->n_layer; il++) n_moe += layers[il].moe;
    m->routed_expert_bytes = n_moe && hp->n_expert ? routed / (uint64_t)n_moe / (uint64_t)hp->n_expert : 0;
    m->active_bytes += before + (m->weight_bytes - before - routed) + active_routed;
    m->active_params = m->n_params - routed_params;
    if (hp->n_expert) m->active_params += routed_params / (uint64_t)hp->n_expert * (uint64_t)hp->n_expert_used;
    /* next-n layers: in the file (weights, params), not in a target step's active bytes */
    for (int il = hp->n_layer; il < hp->n_layer + hp->n_nextn; il++) {
        uint64_t rb = 0, rp = 0;
        if (load_attention(m, il, &layers[il], err) || load_ffn(m, il, &layers[il], &rb, &rp, err) ||
            load_nextn(m, il, &layers[il], err))
            return cf_prefix(err, "next-n layer %d", il);
    }
    return 0;
}

static void ds2_free_layers(model *m) {
    ds2_layer *layers = m->layers;
    if (!layers) return;
    for (int il = 0; il < m->hp.n_layer + m->hp.n_nextn; il++) {
        ds2_layer *L = &layers[il]; /* the vectors and repacked / stacked copies are the model's (model_wbuf) */
        kern_weight *ws[] = {&L->wq,     &L->wq_a,   &L->wq_b, &L->wkv_a, &L->wkv_b, &L->wo,      &L->w_gate, &L->w_up,
                             &L->w_down, &L->router, &L->sg,   &L->su,    &L->sd,    &L->eh_proj, &L->head};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) kern_weight_release(ws[i]);
        ds2_release_routed(m, L);
    }
    free(layers);
    m->layers = NULL;
}

/* ---- KV layout, fingerprint ---- */

static void ds2_kv_layout(const model *m, kv_spec *out) {
    out->n_groups = 1;
    out->groups[0] = (kv_group_spec){
        .kind = KV_LAYER_MLA, .n_layers = m->hp.n_layer, .token_floats = m->hp.kv_lora_rank + m->hp.rope_dim};
}

static void ds2_kv_describe(const model *m, char *buf, size_t n) {
    snprintf(buf, n, "(%d layers x (%d latent + %d rope) x 4 B, MLA)", m->hp.n_layer, m->hp.kv_lora_rank,
             m->hp.rope_dim);
}

/* In fingerprint v1's order (prefix_cache.c): 13 words, then 2 floats. */
static int ds2_fingerprint(const model_hparams *hp, model_fp_writer *w) {
    const int32_t ds[] = {hp->q_lora_rank,
                          hp->kv_lora_rank,
                          hp->qk_nope_dim,
                          hp->v_head_dim,
                          hp->n_dense_lead,
                          hp->n_expert,
                          hp->n_expert_used,
                          hp->n_expert_shared,
                          hp->n_ff_exp,
                          hp->n_expert_group,
                          hp->n_group_used,
                          hp->expert_gating,
                          (int32_t)hp->expert_weights_norm};
    int ok = 1;
    for (size_t i = 0; ok && i < sizeof ds / sizeof ds[0]; i++) ok = model_fp_u32(w, (uint32_t)ds[i]);
    return ok && model_fp_f32(w, hp->expert_weights_scale) && model_fp_f32(w, hp->yarn_log_mul);
}

/* ---- MTP (model.h): one MLA layer of latent + rope per token ---- */

static void ds2_mtp_info(const model *m, int32_t block_tokens, model_mtp_info *out) {
    const model_hparams *hp = &m->hp;
    *out = (model_mtp_info){.n_blocks = hp->n_nextn,
                            .hidden_floats = hp->n_embd,
                            .block_floats = (int64_t)block_tokens * (hp->kv_lora_rank + hp->rope_dim)};
}

/* ---- the table ---- */

static void *ds2_create_hook(const model *m, thread_pool *pool, int32_t max_tokens, int32_t max_ctx,
                             int32_t block_tokens, cf_err *err) {
    return ds2_fwd_create(m, pool, max_tokens, max_ctx, block_tokens, err);
}
static void ds2_free_hook(void *fc) { ds2_fwd_free(fc); }
static int ds2_forward_hook(void *fc, const fwd_batch *b, float *logits, cf_err *err) {
    return ds2_forward(fc, b, logits, err);
}
static void ds2_expand_hook(void *fc, int32_t min_tokens) { ds2_fwd_set_expand_min(fc, min_tokens); }
static int ds2_load_hook(const void *fc, int32_t layer, uint64_t *counts, int32_t n) {
    return ds2_fwd_expert_load(fc, layer, counts, n);
}

static int ds2_mtp_hook(void *fc, int32_t mtp, const fwd_batch *b, const float *h, float *logits, cf_err *err) {
    return ds2_mtp_forward(fc, mtp, b, h, logits, err);
}

static int ds2_exec_hook(void *fc, const cinfer_moe_executor *x, cf_err *err) {
    return ds2_fwd_set_moe_executor(fc, x, err);
}
static int ds2_ffn_hook(void *fc, int32_t layer, int32_t expert, const float *x, int32_t n, float *y, cf_err *err) {
    return ds2_fwd_expert_ffn(fc, layer, expert, x, n, y, err);
}

const model_arch model_arch_deepseek2 = {
    .names = {"deepseek2", NULL},
    .read_hparams = ds2_read_hparams,
    .load = ds2_load_layers,
    .release = ds2_free_layers,
    .kv_layout = ds2_kv_layout,
    .kv_describe = ds2_kv_describe,
    .fingerprint = ds2_fingerprint,
    .fwd_create = ds2_create_hook,
    .fwd_free = ds2_free_hook,
    .forward = ds2_forward_hook,
    .fwd_set_expand_min = ds2_expand_hook,
    .expert_load = ds2_load_hook,
    .fwd_set_moe_executor = ds2_exec_hook,
    .expert_ffn = ds2_ffn_hook,
    .mtp_info = ds2_mtp_info,
    .mtp_forward = ds2_mtp_hook,
    .expert_acquire = ds2_expert_acquire,
    .expert_release = ds2_expert_release,
    .expert_resident = ds2_expert_resident,
    .expert_raw_size = ds2_expert_raw_size,
    .expert_read_raw = ds2_expert_read_raw,
    .expert_acquire_raw = ds2_expert_acquire_raw,
};
