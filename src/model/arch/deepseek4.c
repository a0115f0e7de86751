/* deepseek4.c - the 'deepseek4' architecture family (DeepSeek V4: mHC
 * residual streams, hybrid window + compressed attention, MoE with hash
 * layers) as llama.cpp's converter writes it: its hook table (arch.h), the
 * keys beyond the shared ones with their consistency checks, the KV layout
 * and the fingerprint contribution. Tensors: deepseek4_load.c; forward:
 * deepseek4_forward.c and its parts. docs/deepseek4.md describes the design.
 *
 * Keys (deepseek4.*): attention.q_lora_rank, attention.sliding_window,
 * attention.output_group_count, attention.output_lora_rank,
 * attention.compress_ratios (one of 0|4|128 per block, MTP blocks
 * included), attention.compress_rope_freq_base, attention.indexer.{head_count,
 * key_length,top_k} (needed when a ratio is 4), hyper_connection.{count,
 * sinkhorn_iterations,epsilon}, hash_layer_count, nextn_predict_layers (0),
 * expert_{count,used_count,shared_count,feed_forward_length,weights_scale,
 * weights_norm,gating_func = 4 (sqrt softplus)}, swiglu_clamp_{exp,shexp}
 * (per block; read by the loader). Every problem is one line naming the key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch/deepseek4.h"

static int key_i32(const gguf_file *f, const char *suffix, int32_t *out, bool required, cf_err *err) {
    return model_key_i32(f, "deepseek4", suffix, out, required, err);
}

static int read_ratios(const gguf_file *f, model_hparams *hp, int32_t blocks, cf_err *err) {
    int64_t *r = NULL;
    uint64_t n = 0;
    int rc = gguf_get_arr_i64(f, "deepseek4.attention.compress_ratios", &r, &n, err);
    if (rc < 0) return -1;
    if (rc == 1) return cf_fail(err, "missing key deepseek4.attention.compress_ratios");
    if (n != (uint64_t)blocks) {
        free(r);
        return cf_fail(err, "deepseek4.attention.compress_ratios has %llu entries, expected %d (block_count)",
                       (unsigned long long)n, blocks);
    }
    for (uint64_t i = 0; i < n; i++) {
        if (r[i] != 0 && r[i] != 4 && r[i] != 128) {
            long long v = (long long)r[i];
            free(r);
            return cf_fail(err, "deepseek4.attention.compress_ratios[%llu] = %lld (supported: 0, 4, 128)",
                           (unsigned long long)i, v);
        }
        hp->ds4_ratio[i] = (uint8_t)r[i];
    }
    free(r);
    return 0;
}

static int read_moe(const gguf_file *f, model_hparams *hp, cf_err *err) {
    hp->expert_weights_scale = 1.0f;
    hp->n_expert_shared = 0;
    if (key_i32(f, "expert_count", &hp->n_expert, true, err) ||
        key_i32(f, "expert_used_count", &hp->n_expert_used, true, err) ||
        key_i32(f, "expert_shared_count", &hp->n_expert_shared, false, err) ||
        key_i32(f, "expert_feed_forward_length", &hp->n_ff_exp, true, err) ||
        key_i32(f, "expert_gating_func", &hp->expert_gating, true, err) ||
        key_i32(f, "hash_layer_count", &hp->ds4_hash_layers, false, err) ||
        model_key_f32(f, "deepseek4", "expert_weights_scale", &hp->expert_weights_scale, err))
        return -1;
    hp->expert_weights_norm = true;
    if (gguf_get_bool(f, "deepseek4.expert_weights_norm", &hp->expert_weights_norm, err) < 0) return -1;
    if (hp->n_expert <= 0 || hp->n_expert > 4096)
        return cf_fail(err, "deepseek4.expert_count = %d (must be 1..4096)", hp->n_expert);
    if (hp->n_expert_used <= 0 || hp->n_expert_used > hp->n_expert)
        return cf_fail(err, "deepseek4.expert_used_count = %d (must be 1..expert_count %d)", hp->n_expert_used,
                       hp->n_expert);
    if (hp->n_ff_exp <= 0) return cf_fail(err, "deepseek4.expert_feed_forward_length must be positive");
    if (hp->n_expert_shared > 16)
        return cf_fail(err, "deepseek4.expert_shared_count = %d is too many", hp->n_expert_shared);
    if (hp->expert_gating != 4)
        return cf_fail(err, "deepseek4.expert_gating_func = %d (supported: 4, sqrt softplus)", hp->expert_gating);
    if (hp->ds4_hash_layers > hp->n_layer)
        return cf_fail(err, "deepseek4.hash_layer_count = %d exceeds the %d main blocks", hp->ds4_hash_layers,
                       hp->n_layer);
    if (!(hp->expert_weights_scale > 0)) return cf_fail(err, "deepseek4.expert_weights_scale must be positive");
    return 0;
}

static int read_attention(const gguf_file *f, model_hparams *hp, int32_t blocks, cf_err *err) {
    hp->ds4_compress_rope_base = 160000.0f;
    if (key_i32(f, "attention.q_lora_rank", &hp->q_lora_rank, true, err) ||
        key_i32(f, "attention.sliding_window", &hp->ds4_window, true, err) ||
        key_i32(f, "attention.output_group_count", &hp->ds4_o_groups, true, err) ||
        key_i32(f, "attention.output_lora_rank", &hp->ds4_o_lora, true, err) ||
        model_key_f32(f, "deepseek4", "attention.compress_rope_freq_base", &hp->ds4_compress_rope_base, err) ||
        read_ratios(f, hp, blocks, err))
        return -1;
    if (hp->n_head_kv != 1) return cf_fail(err, "deepseek4.attention.head_count_kv = %d (must be 1)", hp->n_head_kv);
    if (hp->v_head_dim != hp->head_dim)
        return cf_fail(err, "deepseek4.attention.value_length (%d) must equal key_length (%d)", hp->v_head_dim,
                       hp->head_dim);
    if (hp->q_lora_rank <= 0) return cf_fail(err, "deepseek4.attention.q_lora_rank must be positive");
    if (hp->ds4_window <= 0 || hp->ds4_window > 1 << 20)
        return cf_fail(err, "deepseek4.attention.sliding_window = %d (must be 1..1048576)", hp->ds4_window);
    if (hp->ds4_o_groups <= 0 || hp->n_head % hp->ds4_o_groups)
        return cf_fail(err, "deepseek4.attention.output_group_count = %d does not divide head_count %d",
                       hp->ds4_o_groups, hp->n_head);
    if (hp->ds4_o_lora <= 0) return cf_fail(err, "deepseek4.attention.output_lora_rank must be positive");
    if (!(hp->ds4_compress_rope_base > 0))
        return cf_fail(err, "deepseek4.attention.compress_rope_freq_base must be positive");
    bool csa = false;
    for (int32_t i = 0; i < blocks; i++) csa |= hp->ds4_ratio[i] == 4;
    if (!csa) return 0;
    if (key_i32(f, "attention.indexer.head_count", &hp->ds4_index_heads, true, err) ||
        key_i32(f, "attention.indexer.key_length", &hp->ds4_index_dim, true, err) ||
        key_i32(f, "attention.indexer.top_k", &hp->ds4_index_topk, true, err))
        return -1;
    if (hp->ds4_index_heads <= 0 || hp->ds4_index_heads > 4096)
        return cf_fail(err, "deepseek4.attention.indexer.head_count = %d (must be 1..4096)", hp->ds4_index_heads);
    if (hp->ds4_index_dim < hp->rope_dim || hp->ds4_index_dim > 65536)
        return cf_fail(err, "deepseek4.attention.indexer.key_length = %d (must be >= rope.dimension_count %d)",
                       hp->ds4_index_dim, hp->rope_dim);
    int32_t most = hp->n_ctx_train / 4; /* compressed rows a ratio-4 layer can hold */
    if (hp->ds4_index_topk <= 0 || hp->ds4_index_topk > most)
        return cf_fail(err,
                       "deepseek4.attention.indexer.top_k = %d is impossible: must be 1..%d (context_length %d / 4 "
                       "compressed rows)",
                       hp->ds4_index_topk, most, hp->n_ctx_train);
    return 0;
}

static int ds4_read_hparams(const gguf_file *f, model_hparams *hp, cf_err *err) {
    int32_t blocks = hp->n_layer;
    hp->rope_mode = ROPE_NORM;
    if (blocks > DS4_MAX_BLOCKS) return cf_fail(err, "deepseek4.block_count = %d is too many", blocks);
    if (key_i32(f, "nextn_predict_layers", &hp->ds4_n_mtp, false, err)) return -1;
    if (hp->ds4_n_mtp >= blocks)
        return cf_fail(err, "deepseek4.nextn_predict_layers = %d leaves no main block (block_count %d)", hp->ds4_n_mtp,
                       blocks);
    hp->n_layer = blocks - hp->ds4_n_mtp;
    hp->ds4_hc = 4;
    hp->ds4_sinkhorn = 20;
    hp->ds4_hc_eps = 1e-6f;
    if (key_i32(f, "hyper_connection.count", &hp->ds4_hc, true, err) ||
        key_i32(f, "hyper_connection.sinkhorn_iterations", &hp->ds4_sinkhorn, true, err) ||
        model_key_f32(f, "deepseek4", "hyper_connection.epsilon", &hp->ds4_hc_eps, err))
        return -1;
    if (hp->ds4_hc <= 0 || hp->ds4_hc > 16)
        return cf_fail(err, "deepseek4.hyper_connection.count = %d (must be 1..16)", hp->ds4_hc);
    if (hp->ds4_sinkhorn <= 0 || hp->ds4_sinkhorn > 1000)
        return cf_fail(err, "deepseek4.hyper_connection.sinkhorn_iterations = %d (must be 1..1000)", hp->ds4_sinkhorn);
    if (!(hp->ds4_hc_eps >= 0)) return cf_fail(err, "deepseek4.hyper_connection.epsilon must not be negative");
    return read_attention(f, hp, blocks, err) || read_moe(f, hp, err) ? -1 : 0;
}

ds4_kv_row ds4_kv_row_of(const model_hparams *hp, int32_t ratio) {
    int32_t D = hp->head_dim, I = hp->ds4_index_dim, c = ratio == 4 ? 2 : 1;
    ds4_kv_row r = {.state = D, .raw = 0, .cstate = -1, .istate = -1, .rows = 0};
    if (ratio) {
        r.cstate = r.state;
        r.state += 2 * c * D;
        r.rows = D;
    }
    if (ratio == 4) {
        r.istate = r.state;
        r.state += 4 * I;
        r.rows += I;
    }
    return r;
}

int32_t ds4_ring_window(const model_hparams *hp, int32_t ratio) {
    int32_t span = ratio == 4 ? 8 : ratio; /* tokens whose compressor inputs a finishing row reads */
    return hp->ds4_window > span ? hp->ds4_window : span;
}

int64_t ds4_mtp_block_floats(const model *m, int mtp, int32_t block_tokens) {
    const model_hparams *hp = &m->hp;
    ds4_kv_row r = ds4_kv_row_of(hp, hp->ds4_ratio[hp->n_layer + mtp]);
    return (int64_t)(r.state + r.rows) * block_tokens;
}

/* Paged groups (block order): CSA rows, HCA rows; window groups (ring
 * order): window-only, CSA, HCA layers' per-token state. Within a group,
 * layers in model order. */
static const int32_t paged_ratio[2] = {4, 128};
static const int32_t ring_ratio[3] = {0, 4, 128};

static int32_t count_ratio(const model_hparams *hp, int32_t ratio) {
    int32_t n = 0;
    for (int32_t l = 0; l < hp->n_layer; l++) n += hp->ds4_ratio[l] == ratio;
    return n;
}

static void ds4_kv_layout(const model *m, kv_spec *out) {
    const model_hparams *hp = &m->hp;
    out->n_groups = 0;
    out->bounded_replay = true; /* V4 is trained for SWA bounded replay */
    for (int g = 0; g < 2; g++) {
        int32_t n = count_ratio(hp, paged_ratio[g]);
        if (n)
            out->groups[out->n_groups++] = (kv_group_spec){.kind = KV_LAYER_MLA,
                                                           .n_layers = n,
                                                           .token_floats = ds4_kv_row_of(hp, paged_ratio[g]).rows,
                                                           .row_tokens = paged_ratio[g]};
    }
    for (int g = 0; g < 3; g++) {
        int32_t n = count_ratio(hp, ring_ratio[g]);
        if (n)
            out->groups[out->n_groups++] = (kv_group_spec){.kind = KV_LAYER_WINDOW,
                                                           .n_layers = n,
                                                           .token_floats = ds4_kv_row_of(hp, ring_ratio[g]).state,
                                                           .window = ds4_ring_window(hp, ring_ratio[g])};
    }
}

static void ds4_kv_describe(const model *m, char *buf, size_t n) {
    const model_hparams *hp = &m->hp;
    int32_t n4 = count_ratio(hp, 4), n128 = count_ratio(hp, 128);
    snprintf(buf, n,
             "(%d CSA x %d / 4 + %d HCA x %d / 128 floats x 4 B, deepseek4; plus a ring per sequence: %d layers' "
             "window and compressor state)",
             n4, ds4_kv_row_of(hp, 4).rows, n128, ds4_kv_row_of(hp, 128).rows, hp->n_layer);
}

static int ds4_fingerprint(const model_hparams *hp, model_fp_writer *w) {
    const int32_t v[] = {hp->q_lora_rank,   hp->ds4_n_mtp,       hp->ds4_window,      hp->ds4_o_groups,
                         hp->ds4_o_lora,    hp->ds4_index_heads, hp->ds4_index_dim,   hp->ds4_index_topk,
                         hp->ds4_hc,        hp->ds4_sinkhorn,    hp->ds4_hash_layers, hp->n_expert,
                         hp->n_expert_used, hp->n_expert_shared, hp->n_ff_exp,        (int32_t)hp->expert_weights_norm};
    int ok = 1;
    for (size_t i = 0; ok && i < sizeof v / sizeof v[0]; i++) ok = model_fp_u32(w, (uint32_t)v[i]);
    for (int32_t l = 0; ok && l < hp->n_layer + hp->ds4_n_mtp; l++) ok = model_fp_u32(w, hp->ds4_ratio[l]);
    return ok && model_fp_f32(w, hp->expert_weights_scale) && model_fp_f32(w, hp->ds4_hc_eps) &&
           model_fp_f32(w, hp->ds4_compress_rope_base);
}

static void *ds4_create_hook(const model *m, thread_pool *pool, int32_t max_tokens, int32_t max_ctx,
                             int32_t block_tokens, cf_err *err) {
    return ds4_fwd_create(m, pool, max_tokens, max_ctx, block_tokens, err);
}
static void ds4_free_hook(void *fc) { ds4_fwd_free(fc); }
static int ds4_forward_hook(void *fc, const fwd_batch *b, float *logits, cf_err *err) {
    return ds4_forward(fc, b, logits, err);
}
static int ds4_load_hook(const void *fc, int32_t layer, uint64_t *counts, int32_t n) {
    return ds4_fwd_expert_load(fc, layer, counts, n);
}
static int ds4_exec_hook(void *fc, const cinfer_moe_executor *x, cf_err *err) {
    return ds4_fwd_set_moe_executor(fc, x, err);
}
static int ds4_ffn_hook(void *fc, int32_t layer, int32_t expert, const float *x, int32_t n, float *y, cf_err *err) {
    return ds4_fwd_expert_ffn(fc, layer, expert, x, n, y, err);
}

/* MTP (model.h): the blocks after the main ones; hidden state = the final streams [hc][E] (DSpark models: the
 * DSpark context in each stream, deepseek4_dspark.c). */
static void ds4_mtp_info(const model *m, int32_t block_tokens, model_mtp_info *out) {
    const model_hparams *hp = &m->hp;
    *out = (model_mtp_info){.n_blocks = hp->ds4_n_mtp, .hidden_floats = (int64_t)hp->ds4_hc * hp->n_embd};
    for (int32_t i = 0; i < hp->ds4_n_mtp; i++) {
        int64_t f = ds4_mtp_block_floats(m, i, block_tokens);
        if (f > out->block_floats) out->block_floats = f;
    }
}

static int ds4_mtp_hook(void *fc, int32_t mtp, const fwd_batch *b, const float *h, float *logits, cf_err *err) {
    return ds4_mtp_forward(fc, mtp, b, h, logits, err);
}

const model_arch model_arch_deepseek4 = {
    .names = {"deepseek4", NULL},
    .read_hparams = ds4_read_hparams,
    .load = ds4_load,
    .release = ds4_release,
    .kv_layout = ds4_kv_layout,
    .kv_describe = ds4_kv_describe,
    .fingerprint = ds4_fingerprint,
    .fwd_create = ds4_create_hook,
    .fwd_free = ds4_free_hook,
    .forward = ds4_forward_hook,
    .mtp_info = ds4_mtp_info,
    .mtp_forward = ds4_mtp_hook,
    .dspark_info = ds4_dspark_info,
    .dspark_head = ds4_dspark_head,
    .expert_load = ds4_load_hook,
    .fwd_set_moe_executor = ds4_exec_hook,
    .expert_ffn = ds4_ffn_hook,
    .expert_acquire = ds4_expert_acquire,
    .expert_release = ds4_expert_release,
    .expert_resident = ds4_expert_resident,
    .expert_raw_size = ds4_expert_raw_size,
    .expert_read_raw = ds4_expert_read_raw,
    .expert_acquire_raw = ds4_expert_acquire_raw,
};
